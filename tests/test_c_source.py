"""The generated C as text: clean C99, readable (every kernel statement named), stable, and
its arithmetic helpers right at the edges."""

from __future__ import annotations

import dataclasses
import doctest
import importlib
import subprocess

import numpy as np
import pytest

import npukit as nk
from npukit import ir
from npukit import kernels as K
from npukit.c import arith as A
from npukit.c import c_source
from npukit.c.access import Names, affine_c
from npukit.machine import Arith

MUL = {"bias_scale": nk.spec((2,), "int32"), "shift": 8, "out_min": -128, "out_max": 127}


def programs() -> list[ir.Program]:
    """The six seed-000 kernels, in each rounding mode and dtype the C spells differently."""
    out = []
    for k in (K.mul_vanilla, K.mul_vectorized, K.mul_ndim, K.mul):
        out.append(nk.build(k, input1=nk.spec((37,), "int16"), input2=nk.spec((37,), "int16"),
                            output=nk.spec((37,), "int16"), **MUL))
    out.append(nk.build(K.mul_vectorized_store, input1=nk.spec((20,), "int8"),
                        input2=nk.spec((20,), "int8"), output=nk.spec((32,), "int8"), **MUL))
    out.append(nk.build(K.mul, input1=nk.spec((2, 5, 7), "int8"), input2=nk.spec((1, 5, 1), "int8"),
                        output=nk.spec((2, 5, 7), "int8", (100, 10, 1), 3), **MUL))
    out.append(nk.build(K.mul, input1=nk.spec((9,), "float32"), input2=nk.spec((9,), "float32"),
                        output=nk.spec((9,), "float32"), bias_scale=nk.spec((2,), "float32"),
                        shift=0, out_min=-1.0, out_max=1.0))
    out.append(nk.build(K.reduce_rows, input=nk.spec((5, 70), "int16"),
                        output=nk.spec((70,), "int16")))
    for mode in ("half_even", "floor"):
        tgt = dataclasses.replace(nk.target("torq"), arith=Arith(mode, True))
        out.append(nk.build(K.mul_vectorized, target=tgt, input1=nk.spec((37,), "int8"),
                            input2=nk.spec((37,), "int8"), output=nk.spec((37,), "int8"), **MUL))
    for dt in ("float16", "bfloat16"):  # 16-bit floats, and seed 004's LUT SiLU
        out.append(nk.build(K.mul, input1=nk.spec((9,), dt), input2=nk.spec((9,), dt),
                            output=nk.spec((9,), dt), bias_scale=nk.spec((2,), "float32"),
                            shift=0, out_min=-1.0, out_max=1.0))
    out.append(nk.build(K.silu_fp16, input=nk.spec((30,), "float16"),
                        output=nk.spec((30,), "float16")))
    return out


PROGRAMS = programs()


def compile_only(tmp_path, source: str, flags: list[str]) -> subprocess.CompletedProcess:
    path = tmp_path / "unit.c"
    path.write_text(source)
    return subprocess.run(["cc", *flags, "-c", str(path), "-o", str(tmp_path / "unit.o")],
                          capture_output=True, text=True, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("fuse", [True, False])
def test_strict_c99_without_warnings(tmp_path, fuse):
    """No warning under -std=c99 -pedantic -Wall -Wextra -Wshadow: no unused variable, no
    dead helper, no non-standard construct outside the GNU attribute guard."""
    for prog in PROGRAMS:
        res = compile_only(tmp_path, c_source(prog, fuse=fuse),
                           ["-std=c99", "-pedantic", "-Wall", "-Wextra", "-Wshadow", "-Werror"])
        assert res.returncode == 0, f"{prog.name}:\n{res.stderr}"


def test_every_statement_is_named():
    """Each block names the kernel statement, the tensors and the loop it serves."""
    for prog in PROGRAMS:
        for fuse in (True, False):
            src = c_source(prog, fuse=fuse)
            for st, _ in prog.walk():
                if st.label:
                    assert st.label in src, (prog.name, st.label)
            for buf, _ in prog.params:
                assert f"*restrict {buf.name}" in src
            assert f"void npukit_{prog.name}(" in src


def test_literal_and_fused_readings():
    prog = nk.build(K.mul_vectorized, input1=nk.spec((1000,), "int8"),
                    input2=nk.spec((1000,), "int8"), output=nk.spec((1000,), "int8"), **MUL)
    literal, fused = c_source(prog, fuse=False), c_source(prog)
    # The literal reading copies each vector into IRAM/WRAM with memcpy, runs each unit on
    # local arrays sized by the target and appends at the cursor.
    assert "memcpy(idata, input1 + 16 * i0, (size_t)live * sizeof(int8_t));" in literal
    assert "int8_t idata[16] NPK_ALIGNED;" in literal and "IRAM: 288 B on torq" in literal
    assert "for (int64_t i0 = 0; i0 < 63; i0++)" in literal
    # The fused reading is one loop over the 1000 elements, straight from the tensors, and
    # says why skipping the copies is safe; the host's threads share the elements.
    assert "for (int64_t e = begin; e < end; e++)" in fused and "idata[" not in fused
    assert "npk_parallel_for(n, 131072, npk_task0, &npk_ctx0);" in fused
    assert "const int8_t idata = input1[e];" in fused
    assert "skipping the copies cannot change the result" in fused
    assert "npk_rescale_fits_int32(-16256, 16384, bias, scale, 8, 128, 0)" in fused


def test_closed_form_append_position():
    """An append into a strided output whose dims match the loops lands at a spelled-out
    position, not a division of the cursor."""
    src = c_source(PROGRAMS[5])
    assert "output[100 * i0 + 10 * i1 + e] = (int8_t)(qdata);" in src


def test_source_is_deterministic():
    for prog in PROGRAMS:
        assert c_source(prog) == c_source(dataclasses.replace(prog))


def test_unsupported_dtype_names_the_tensor():
    import ml_dtypes

    from npukit.layout import Layout

    f8, f32 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype("float32")
    x = ir.Buffer("x8", "LRAM", f8, 4, "in")
    y = ir.Buffer("y", "LRAM", f32, 4, "out")
    prog = ir.Program("f8", nk.target("torq"), ((x, nk.spec((4,), f8)), (y, nk.spec((4,), f32))),
                      (), (ir.Copy(ir.View(y, Layout((4,), f32)), ir.View(x, Layout((4,), f8)),
                                   "ndl_i"),))
    with pytest.raises(nk.DTypeError, match=r"float8_e4m3fn \(tensor 'x8'\).*supported: int8"):
        c_source(prog)


def harness(tmp_path, helpers: A.Helpers, main: str) -> str:
    """Compile the helpers with ``main`` and return what it prints."""
    src = "#include <stdint.h>\n#include <stdio.h>\n" + helpers.source() + "\n" + main
    (tmp_path / "h.c").write_text(src)
    subprocess.run(["cc", "-std=c99", "-O2", "-o", str(tmp_path / "h"), str(tmp_path / "h.c")],
                   check=True)
    return subprocess.run([str(tmp_path / "h")], capture_output=True, text=True,
                          check=True).stdout


def test_fast_path_check_is_tight(tmp_path):
    """npk_rescale_fits_int32 accepts exactly the scales whose 32-bit lanes cannot
    overflow: for int8 x int8 partials (-16256..16384), bias 5, shift 5, the largest is
    (2^31 - 1 - 16) / 16389 = 131032 and, negative, -131032."""
    h = A.Helpers()
    h.use("npk_rescale_fits_int32")
    out = harness(tmp_path, h, """int main(void) {
        long s[] = {131031, 131032, 131033, -131032, -131033};
        for (int k = 0; k < 5; k++)
            printf("%d", npk_rescale_fits_int32(-16256, 16384, 5, s[k], 5, 16, 3));
        printf(" %d", npk_rescale_fits_int32(-16256, 16384, INT32_MAX, 1, 0, 0, 0));
        return 0;
    }""")
    assert -131032 * 16389 >= -2**31 > -131033 * 16389  # the negative edge
    assert out == "11010 0"


def test_floordiv_and_mod_atoms(tmp_path):
    """Quasi-affine index atoms round towards -inf, as Python's // and %."""
    i = ir.Var("i", 20)
    expr = (i + -7) // 4 * 3 + (i + -7) % 4
    names = Names(set())
    names.bind(i)
    h = A.Helpers()
    text = affine_c(expr, names, h)
    out = harness(tmp_path, h, f"""int main(void) {{
        for (int64_t i = 0; i < 20; i++) printf("%ld ", (long)({text}));
        return 0;
    }}""")
    assert out.split() == [str((k - 7) // 4 * 3 + (k - 7) % 4) for k in range(20)]


@pytest.mark.parametrize("name", ["npukit.c", "npukit.c.access", "npukit.c.arith",
                                  "npukit.c.calls", "npukit.c.code", "npukit.c.ctype",
                                  "npukit.c.emit", "npukit.c.lut", "npukit.c.runtime",
                                  "npukit.c.toolchain"])
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS,
                             extraglobs={"np": np})
    assert result.failed == 0 and result.attempted > 0
