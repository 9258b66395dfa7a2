# ruff: noqa: F403, F405  (the AutoTiler's star-import vocabulary, as in test_tiler.py)
"""No name or path a user passes can run code through, or write outside the folder of,
anything npukit generates: the AutoTiler's flash file name (``SetMemoryDeviceInfos``), the
headers of ``SetUsedFilesNames``, KerArg names in GAP-style C, ONNX tensor names in an
emitted C project, ``npukit build -o``, and the ``.npy`` headers ``main.c`` reads.

Each site is tried with the same payloads: a double quote, ``*/``, a newline, ``../``, an
absolute path, NUL, and a ``system("touch SENTINEL")`` that would create a file under the
test's folder if it ever ran. Names that go into C code or file names are refused at build
time (the error names the argument and the value); names that only go into comments or
string literals are escaped, and the C compiled and run creates nothing."""

from __future__ import annotations

import os
import re
import runpy
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from test_cli_build import KERNELS  # its kernels file: clamp_half

import npukit as nk
from npukit.c import sanitizer_env, toolchain
from npukit.cdecl import c_string, comment_text, file_name
from npukit.cli import main
from npukit.tiler import *
from npukit.tiler import gap_c

ROOT = Path(__file__).parent.parent
KINDS = ["quote", "comment end", "newline", "parent dir", "absolute", "NUL", "system",
         "string system"]


def payload(kind: str, tmp: Path) -> str:
    """A hostile name; the ``system`` ones would create ``tmp/pwned`` if run."""
    touch = f'{{ extern int system(const char *); system("touch {tmp / "pwned"}"); }}'
    return {"quote": 'x"y.dat', "comment end": "x*/y.dat", "newline": "x\ny.dat",
            "parent dir": "../../x.dat", "absolute": str(tmp / "abs.dat"), "NUL": "x\0y.dat",
            "system": f"x */ {touch} /* y",
            "string system": f'x.dat", &Error); {touch} (void)("'}[kind]


def tree(folder: Path) -> set[str]:
    """Every path under ``folder``, relative to it."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def code_only(src: str) -> str:
    """``src`` without its comments and string literals."""
    return re.sub(r'/\*.*?\*/|"(\\.|[^"\\\n])*"', " ", src, flags=re.S)


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """tmp_path as the working directory, with the compiler cache under it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NPUKIT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


# -- the shared checks and escapes -----------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_file_names_are_plain(kind, tmp_path):
    bad = payload(kind, tmp_path)
    with pytest.raises(nk.TilingError, match=re.escape(f"the file {bad!r}: give a plain")):
        file_name(bad, "the file")
    for bad in (".", "..", "", "-x", ".hidden", "a/b", "a\\b", 7, None):
        with pytest.raises(nk.TilingError, match="the file"):
            file_name(bad, "the file")
    assert file_name("Mnist_L3_Flash_Const.dat", "x") == "Mnist_L3_Flash_Const.dat"


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_escaped_text_stays_a_comment_and_a_string(tmp_path):
    """Every payload (and the tricky ones: NUL and a backslash-newline between * and /,
    trigraphs) inside a comment and a string literal: the program prints exactly the text
    and runs nothing."""
    texts = [payload(k, tmp_path) for k in KINDS] + [
        "*\0/ system(0); /*", "*\\\n/ system(0); /*", "??/\n*/", "\\", 'é"\\?']
    body = "\n".join(f'    /* {comment_text(t)} */ fputs({c_string(t)}, stdout); putchar(0);'
                     for t in texts)
    (tmp_path / "t.c").write_text(f"#include <stdio.h>\nint main(void)\n{{\n{body}\n"
                                  f"    return 0;\n}}\n")
    subprocess.run(["cc", "-std=c99", "-trigraphs", "-o", "t", "t.c"], cwd=tmp_path, check=True)
    out = subprocess.run(["./t"], cwd=tmp_path, capture_output=True, check=True).stdout
    # a C string stops at NUL: each text prints up to its first NUL
    assert out.split(b"\0")[:-1] == [t.split("\0")[0].encode() for t in texts]
    assert not (tmp_path / "pwned").exists()


# -- the AutoTiler's flash file name ---------------------------------------------------------

def mnist(tmp: Path):
    ex = runpy.run_path(str(ROOT / "examples" / "graph" / "mnist.py"))
    consts = tmp / "consts"
    consts.mkdir(exist_ok=True)
    ex["write_tensors"](consts, ex["weights"]())
    m = ex["MnistModel"](48000, 300 * 1024, 8 << 20, 20 << 20, const_dir=str(consts))
    m.AT_SetGraphCtrl(AT_GRAPH_TRACE_EXEC, AT_OPT_OFF)
    return m, ex


@pytest.mark.parametrize("kind", KINDS)
def test_flash_file_name_is_refused_at_model_time(kind, in_tmp, monkeypatch):
    m, _ = mnist(in_tmp)
    before = tree(in_tmp)
    monkeypatch.setattr(toolchain, "run_compiler", lambda cmd: pytest.fail(f"compiled: {cmd}"))
    bad = payload(kind, in_tmp)
    with pytest.raises(nk.TilingError, match=re.escape(
            f"SetMemoryDeviceInfos: AT_MEM_L3_DEFAULTFLASH constants file name {bad!r}")):
        m.SetMemoryDeviceInfos(1, AT_MEM_L3_DEFAULTFLASH, 20 << 20, "0", bad, 0)
    assert tree(in_tmp) == before


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_flash_file_stays_in_its_folder(in_tmp):
    """An accepted flash name is a C string literal; ``g.write`` writes only into its folder
    and ``g.run("c")`` only into the compiler cache, and the graph computes as before."""
    m, ex = mnist(in_tmp)
    m.SetMemoryDeviceInfos(1, AT_MEM_L3_DEFAULTFLASH, 20 << 20, "0", "my-flash_1.dat", 0)
    g = m.graph("MnistCNN")
    assert '"my-flash_1.dat"' in g.c_source()
    before = tree(in_tmp)
    c_path, flash = g.write(in_tmp / "out")
    assert flash == in_tmp / "out" / "my-flash_1.dat" and flash.read_bytes() == g.flash_image()
    assert tree(in_tmp) - before == {"out", "out/MnistCNNKernels.c", "out/my-flash_1.dat"}
    x = ex["digits"](1)[0]
    sim, c = np.zeros(10, np.int16), np.zeros(10, np.int16)
    g.run("sim", Input0=x, Output0=sim)
    before = tree(in_tmp)
    g.run("c", Input0=x, Output0=c)
    assert all(p.startswith("cache") for p in tree(in_tmp) - before)
    assert any(p.endswith("/my-flash_1.dat") for p in tree(in_tmp) - before)
    assert (sim == c).all() and len(set(sim.tolist())) > 3


# -- SetUsedFilesNames / SetGeneratedFilesNames (#include lines, file names) -----------------

@pytest.mark.parametrize("kind", KINDS)
def test_header_and_generated_file_names_are_refused(kind, tmp_path):
    bad = payload(kind, tmp_path)
    m = Model(target="gap8")
    with pytest.raises(nk.TilingError, match=re.escape(
            f"SetUsedFilesNames: standard types header {bad!r}")):
        m.SetUsedFilesNames(bad, 0)
    with pytest.raises(nk.TilingError, match=re.escape(
            f"SetUsedFilesNames: kernel header {bad!r}")):
        m.SetUsedFilesNames(0, 2, "CNN_BasicKernels.h", bad)
    with pytest.raises(nk.TilingError, match=re.escape(
            f"SetGeneratedFilesNames: file name {bad!r}")):
        m.SetGeneratedFilesNames("Kernels.c", bad)
    assert not list(tmp_path.iterdir())


def test_accepted_header_names_are_included():
    m = Model(target="gap8")
    m.SetUsedFilesNames("MyTypes.h", 1, "My_Kernels-2.h")
    head = gap_c.kernels_h(m)
    assert '#include "MyTypes.h"\n#include "My_Kernels-2.h"\n' in head


# -- KerArg names in GAP-style C -------------------------------------------------------------

def matadd(kerarg: str):
    """The GAP AutoTiler's matrix addition (20 x 30) with In1's KerArg named ``kerarg``."""
    ex = runpy.run_path(str(ROOT / "examples" / "tiler" / "matadd.py"))
    m = ex["model"](W=20, H=30)
    m.UserKernel(
        "MatAddX", KernelDimensions(1, 20, 30, 1), KernelIterationOrder(KER_DIM2, KER_TILE),
        TILE_HOR, CArgs(3, TCArg("Word32 * __restrict__", "In1"),
                        TCArg("Word32 * __restrict__", "In2"),
                        TCArg("Word32 * __restrict__", "Out")),
        Calls(1, Call("MatSumPar", LOC_INNER_LOOP, Bindings(
            5, K_Arg(kerarg, KER_ARG_TILE), K_Arg("In2", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE),
            K_Arg(kerarg, KER_ARG_TILE_W), K_Arg(kerarg, KER_ARG_TILE_H)))),
        KerArgs(3, KerArg(kerarg, OBJ_IN_DB, 20, 30, 4, 0, 0, 0, "In1", 0),
                KerArg("In2", OBJ_IN_DB, 20, 30, 4, 0, 0, 0, "In2", 0),
                KerArg("Out", OBJ_OUT_DB, 20, 30, 4, 0, 0, 0, "Out", 0)))
    return m


@pytest.mark.slow  # compiles the GAP-style files once a payload
@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
@pytest.mark.parametrize("kind", KINDS)
def test_kerarg_names_stay_in_gap_c_comments(kind, in_tmp):
    """A KerArg's name only labels comments in GAP-style C: escaped there, the emitted files
    hold no code of it, write nothing outside their folder, and run equal to numpy."""
    bad = payload(kind, in_tmp)
    m = matadd(bad)
    before = tree(in_tmp)
    paths = m.emit(in_tmp / "gen")
    assert tree(in_tmp) - before == {"gen"} | {f"gen/{n}" for n in paths}
    src = (in_tmp / "gen" / "GenKernels.c").read_text()
    assert f"Ker Arg: {comment_text(bad)}," in src and "system(" not in code_only(src)
    run = gap_c.host_function(m, "MatAddX")
    rng = np.random.default_rng(3)
    a, b = (rng.integers(-1000, 1000, (30, 20)).astype(np.int32) for _ in range(2))
    out = np.full((30, 20), -7, np.int32)
    run(In1=a, In2=b, Out=out)
    assert (out == a + b).all()
    assert not (in_tmp / "pwned").exists()


# -- ONNX tensor names in an emitted C project -----------------------------------------------

def _two_outputs(name1: str, name2: str):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import helper as h

    x = np.random.default_rng(5).normal(size=(1, 2, 3, 4)).astype(np.float32)
    graph = h.make_graph(
        [h.make_node("Relu", ["x"], [name1]), h.make_node("Sum", ["x", "x"], [name2])], "m",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [h.make_tensor_value_info(n, onnx.TensorProto.FLOAT, x.shape) for n in (name1, name2)])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    return nk.onnx.load(model), x


needs_make = pytest.mark.skipif(shutil.which("make") is None or shutil.which("cc") is None,
                                reason="needs make and a C compiler")


@pytest.mark.slow
@needs_make
def test_outputs_whose_names_sanitize_alike_get_files_of_their_own(in_tmp):
    import npukit.onnx  # noqa: F401

    g, x = _two_outputs("y 1", "y_1")
    proj = g.emit(in_tmp / "proj", {"x": x})
    exp = {n: np.load(proj / "expected" / f) for n, f in [("y 1", "y_1.npy"), ("y_1", "y_1_2.npy")]}
    assert (exp["y 1"] == np.maximum(x, 0)).all() and (exp["y_1"] == 2 * x).all()
    makefile = (proj / "Makefile").read_text()
    assert "#   y_1.npy: output 'y 1'\n#   y_1_2.npy: output 'y_1'\n" in makefile
    assert "cmp outputs/y_1.npy expected/y_1.npy" in makefile
    assert "cmp outputs/y_1_2.npy expected/y_1_2.npy" in makefile
    r = subprocess.run(["make", "-C", str(proj), "check"], capture_output=True, text=True)
    assert r.returncode == 0 and "outputs identical to expected/" in r.stdout, r.stderr
    assert (np.load(proj / "outputs" / "y_1_2.npy") == 2 * x).all()
    # make check compares each output with its own file: a wrong second output fails it
    np.save(proj / "expected" / "y_1_2.npy", x)
    r = subprocess.run(["make", "-C", str(proj), "check"], capture_output=True, text=True)
    assert r.returncode != 0 and "y_1_2.npy" in r.stdout + r.stderr


@pytest.mark.slow  # builds and runs one ONNX project a payload
@needs_make
@pytest.mark.parametrize("kind", KINDS)
def test_onnx_names_stay_in_the_project(kind, in_tmp):
    """ONNX output names go into main.c as escaped string literals and into file names
    sanitized: the project builds, runs, writes only under its folder, runs nothing, and
    prints the names as they are (up to a NUL, where a C string ends)."""
    import npukit.onnx  # noqa: F401

    bad = payload(kind, in_tmp)
    g, x = _two_outputs(bad, "y")
    proj = g.emit(in_tmp / "proj", {"x": x})
    assert "system(" not in code_only((proj / "main.c").read_text())
    before = tree(in_tmp)
    r = subprocess.run(["make", "-C", str(proj), "check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"\n{bad.split(chr(0))[0]} float32 (1, 2, 3, 4) fnv1a" in r.stdout
    assert all(p.startswith("proj/") for p in tree(in_tmp) - before)
    assert not (in_tmp / "pwned").exists() and not (in_tmp / "abs.dat").exists()
    assert not (in_tmp / "abs.dat.npy").exists()


# -- npukit build -o -------------------------------------------------------------------------



@pytest.mark.parametrize("out", ["k.h", "./k.h", "k", "", "sub/"])
def test_build_header_never_overwrites_the_c_file(out, in_tmp, capsys):
    (in_tmp / "k.py").write_text(KERNELS)
    (in_tmp / "sub").mkdir()
    before = tree(in_tmp)
    rc = main(["build", "k.py:clamp_half", "--spec", "x=100:float16", "--spec", "y=100:float16",
               "--attr", "lo=-2.5", "--attr", "hi=7.25", "-o", out])
    err = capsys.readouterr().err
    if out == "k":  # the C file k, its header k.h
        assert rc == 0 and (in_tmp / "k").read_text().startswith("/*")
        assert "void npukit_clamp_half(" in (in_tmp / "k.h").read_text()
        assert "void npukit_clamp_half(" in (in_tmp / "k").read_text()
        return
    assert rc == 2 and f"-o {out!r}" in err, err
    assert tree(in_tmp) == before


# -- .npy headers main.c reads ---------------------------------------------------------------

try:
    SAN_ENV, SAN_WHY = sanitizer_env(), ""
except nk.CompilerError as exc:  # no compiler, or one without the ASan runtime
    SAN_ENV, SAN_WHY = None, str(exc)


def _npy(path: Path, shape: str, data: bytes) -> None:
    header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}"
    header += " " * (-(len(header) + 11) % 64) + "\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()
                     + data)


@pytest.mark.slow  # sanitizer builds
@pytest.mark.skipif(SAN_ENV is None, reason=f"no AddressSanitizer runtime: {SAN_WHY}")
@pytest.mark.parametrize("shape", ["(4294967296, 4294967296, 1, 24)",
                                   "(18446744073709551616, 24)", "(1, 2, 3, 4)",
                                   "(9223372036854775807, 2, 0)"])
def test_hostile_npy_shapes_are_refused_without_overflow(shape, in_tmp):
    """main.c built with the sanitizers (UBSan stops at the first signed overflow): a shape
    whose product overflows is refused with a message; the right shape runs."""
    import npukit.onnx  # noqa: F401

    g, x = _two_outputs("a", "b")
    proj = g.emit(in_tmp / "proj", {"x": x})
    flags = [*toolchain.SANITIZE_CFLAGS, "-fno-sanitize-recover=all", "-std=c99", "-O1"]
    subprocess.run(["cc", *flags, "-o", "model", "main.c", f"{g.name}Kernels.c"], cwd=proj,
                   check=True)
    _npy(proj / "inputs" / "x.npy", shape, x.tobytes())
    (proj / "outputs").mkdir()
    env = {**{k: v for k, v in os.environ.items() if k != "LD_PRELOAD"},
           "ASAN_OPTIONS": "detect_leaks=0"}  # main.c returns at once on a refused input
    r = subprocess.run(["./model"], cwd=proj, capture_output=True, text=True, env=env)
    assert "runtime error" not in r.stderr and "Sanitizer" not in r.stderr, r.stderr
    if shape == "(1, 2, 3, 4)":
        assert r.returncode == 0 and (np.load(proj / "outputs" / "b.npy") == 2 * x).all()
    elif "0)" in shape:
        assert r.returncode == 1 and "0 values, the model's input has 24" in r.stderr
    else:
        assert r.returncode == 1 and "more values than a size_t counts" in r.stderr
