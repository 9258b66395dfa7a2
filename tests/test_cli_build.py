"""``npukit build`` writes a kernel's C and a header; a C program of one's own includes the
header, links the C (compiled with the flags the back end uses) and gets the simulator's
results. ``npukit --version`` reports the installed package."""

from __future__ import annotations

import importlib.metadata
import subprocess
import textwrap

import numpy as np
import pytest

import npukit as nk
from npukit.c import toolchain
from npukit.cli import main
from npukit.cli_build import load_kernel, parse_attr, parse_spec

KERNELS = '''\
import npukit as nk


@nk.kernel
def add_rescale(s, a, b, bias_scale, out, *, shift, lo, hi):
    n = s.act.width(a.dtype, b.dtype)
    av, bv = a.vectorize(n), b.vectorize(n)
    bdata = s.bram.load(bias_scale)
    for i in s.iterate(av.dim(0)):
        da = s.iram.load(av[i])
        db = s.wram.load(bv[i])
        p = s.alu.elementwise_add(da, db)
        q = s.act.rescale_clamp(p, bdata, shift, 0, lo, hi)
        s.append(out, q)


@nk.kernel
def clamp_half(s, x, y, *, lo, hi):
    xv = x.vectorize(s.act.width(x.dtype))
    for i in s.iterate(xv.dim(0)):
        p = s.alu.accumulate(s.iram.load(xv[i]))
        s.append(y, s.act.clamp(p, lo, hi))


if __name__ == "__main__":
    raise SystemExit("npukit build must not run the file as a script")
'''

N = 100
CASES = {
    "add_rescale": dict(
        specs=["a=100:int8", "b=100:int8", "bias_scale=2:int32", "out=100:int16"],
        attrs=["shift=2", "lo=-300", "hi=250"],
        # main.c fills the inputs with these values and prints the output.
        c_init="""for (int i = 0; i < 100; i++) {
                      a[i] = (int8_t)((i * 37) % 256 - 128);
                      b[i] = (int8_t)((i * 53) % 256 - 128);
                  }
                  bias_scale[0] = 5; bias_scale[1] = 7;""",
        c_decl="int8_t a[100], b[100]; int32_t bias_scale[2]; int16_t out[100];",
        c_call="npukit_add_rescale(a, b, bias_scale, out);",
        c_print='printf("%d\\n", out[i]);',
        arrays=lambda: dict(a=(np.arange(N) * 37 % 256 - 128).astype(np.int8),
                            b=(np.arange(N) * 53 % 256 - 128).astype(np.int8),
                            bias_scale=np.array([5, 7], np.int32),
                            out=np.zeros(N, np.int16)),
        out="out"),
    "clamp_half": dict(
        specs=["x=100:float16", "y=(100,):float16"],
        attrs=["lo=-2.5", "hi=7.25"],
        c_init="for (int i = 0; i < 100; i++) x[i] = (npk_float16)((float)i * 0.375f - 12.0f);",
        c_decl="npk_float16 x[100], y[100];",
        c_call="npukit_clamp_half(x, y);",
        c_print='printf("%.9g\\n", (double)y[i]);',
        arrays=lambda: dict(x=(np.arange(N) * 0.375 - 12).astype(np.float16),
                            y=np.zeros(N, np.float16)),
        out="y"),
}


@pytest.fixture
def kernels_file(tmp_path):
    path = tmp_path / "my_kernels.py"
    path.write_text(KERNELS)
    return path


def cc(*args: str, cwd) -> None:
    r = subprocess.run(list(args), cwd=cwd, capture_output=True, text=True, check=False)
    assert r.returncode == 0, f"{' '.join(args)}\n{r.stderr}"


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_built_c_and_header_link_into_a_program_of_ones_own(name, kernels_file, tmp_path,
                                                            capsys, monkeypatch):
    case = CASES[name]
    args = ["build", f"{kernels_file}:{name}", "--target", "torq", "-o", "k.c"]
    for s in case["specs"]:
        args += ["--spec", s]
    for a in case["attrs"]:
        args += ["--attr", a]
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # -o k.c: relative to the working directory
    assert main(args) == 0
    said = capsys.readouterr().out
    assert said.startswith("wrote k.c (") and f"and k.h: void npukit_{name}(" in said
    header = (work / "k.h").read_text()
    assert f"void npukit_{name}(" in header and "#ifndef NPUKIT_" in header
    for s in case["specs"]:  # each parameter described in the prototype's comment
        pname, spec = parse_spec(s)
        assert f"*restrict {pname}" in header
        assert f"/* {spec.dtype.name}{list(spec.shape)}, strides (1,) elements: " in header
    main_c = textwrap.dedent(f"""\
        #include <stdio.h>
        #include "k.h"
        #include "k.h"   /* twice: the guards hold */

        int main(void)
        {{
            {case["c_decl"]}
            {case["c_init"]}
            {case["c_call"]}
            for (int i = 0; i < 100; i++) {case["c_print"]}
            return 0;
        }}
        """)
    (work / "main.c").write_text(main_c)
    compiler = toolchain.resolve(toolchain.compiler())
    # main.c against the header alone, strictly; the kernel with the back end's own flags.
    cc(*compiler, "-std=c99", "-Wall", "-Wextra", "-Werror", "-c", "main.c", "-o", "main.o",
       cwd=work)
    flags = [f for f in toolchain.flags() if f != "-shared"]
    cc(*compiler, *flags, "main.o", "k.c", "-o", "prog", cwd=work)
    printed = subprocess.run([str(work / "prog")], capture_output=True, text=True, check=True,
                             timeout=30).stdout.split()
    # The same kernel on the simulator: the C program prints its results bit for bit.
    kern = load_kernel(f"{kernels_file}:{name}")
    prog = nk.build(kern, target="torq", **dict(map(parse_spec, case["specs"])),
                    **dict(map(parse_attr, case["attrs"])))
    arrays = case["arrays"]()
    prog.run("sim", **arrays)
    want = arrays[case["out"]]
    got = np.array([float(x) for x in printed]).astype(want.dtype)
    assert got.tobytes() == want.tobytes()
    assert len(set(want.tolist())) > 10  # not a constant: the test can see a wrong result


def test_build_errors_name_what_is_wrong(kernels_file, tmp_path, capsys):
    def err(*args):
        assert main(["build", *args, "-o", str(tmp_path / "x.c")]) == 2
        return capsys.readouterr().err

    assert "kernels there: add_rescale, clamp_half" in err(f"{kernels_file}:nope")
    assert "'nk' is not an @npukit.kernel function" in err(f"{kernels_file}:nk")
    assert "no file" in err(f"{tmp_path}/missing.py:k")
    assert "expected FILE.py:KERNEL" in err(str(kernels_file))
    assert "shape 'ab' is not a list of integers" in err(f"{kernels_file}:clamp_half",
                                                          "--spec", "x=ab:float16")
    assert "expected NAME=SHAPE:DTYPE" in err(f"{kernels_file}:clamp_half", "--spec", "x=100")
    missing = err(f"{kernels_file}:clamp_half", "--spec", "x=100:float16", "--attr", "lo=0")
    assert "missing ['y', 'hi']" in missing
    assert "unknown target 'gap9'" in err(f"{kernels_file}:clamp_half", "--target", "gap9")
    broken = tmp_path / "broken.py"
    broken.write_text("raise ValueError('oops')\n")
    assert "broken.py: running the file failed: ValueError: oops" in err(f"{broken}:k")
    assert not (tmp_path / "x.c").exists()


def test_version_comes_from_the_package_metadata(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"npukit {importlib.metadata.version('npukit')}\n"
