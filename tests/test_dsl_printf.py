"""``S.printf`` (``npukit.dsl.printing``): the simulator and the built C print the same lines,
once per TEC, as an independent Python rendering of C's conversions with the Compass DSL's
twists (``0x`` before hex, ``0`` before octal, six decimals cut rather than rounded, a
float's float32 bits under ``%x``); and what the Compass DSL refuses is refused."""

import doctest
from decimal import ROUND_DOWN, Decimal

import numpy as np
import pytest

import npukit.dsl as S
from npukit.dsl import printing
from npukit.errors import DTypeError, KernelError


def _cut6(x) -> str:
    """Six decimals of the float32 value, cut toward zero (exact, by ``decimal``)."""
    d = Decimal(float(np.float32(x))).quantize(Decimal("0.000001"), rounding=ROUND_DOWN)
    return f"{d:f}" if d or not np.signbit(np.float32(x)) else f"-{d:f}"


def _kernel():
    @S.prim_func
    def show(a: S.ptr("i16x16", "global"), f: S.ptr("fp32x8", "global"),
             c: S.ptr("int8", "global"), g: S.ptr("fp16", "global"),
             out: S.ptr("i16x16", "global")):
        out[0] = a[0]
        tec = S.get_local_id()
        S.printf("tec %d: %u %o %x %X %%\n", tec, tec - 3, tec + 8, tec - 1, tec + 250)
        S.printf("a=%v16hx bytes=%v32hhx\n", a[0], a[0])
        S.printf("f=%v8hlf bits=%v8hlx\n", f[0], f[0])
        S.printf("c=%d %c g=%f %x k=%d %s\n", c[0], c[0], g[0], g[0], 7 - 2 ** 32, "ok")
    return show


def _expected(a, f, c, g) -> list[str]:
    lines = []
    for tec in range(4):
        u = [(v) % 2 ** 32 for v in (tec - 3, tec + 8, tec - 1, tec + 250)]
        lines.append(f"tec {tec}: {u[0]} 0{u[1]:o} 0x{u[2]:x} 0x{u[3]:X} %")
    lines.append("a=" + ",".join(f"0x{int(v) & 0xFFFF:x}" for v in a) + " bytes=" +
                 ",".join(f"0x{b:x}" for b in a.astype("<i2").tobytes()))
    bits = [int.from_bytes(np.float32(x).tobytes(), "little") for x in f]
    lines.append("f=" + ",".join(_cut6(x) for x in f) + " bits=" +
                 ",".join(f"0x{b:x}" for b in bits))
    gbits = int.from_bytes(np.float32(g[0]).tobytes(), "little")
    lines.append(f"c={int(c[0])} {chr(int(c[0]) & 0xFF)} g={_cut6(g[0])} 0x{gbits:x} k=7 ok")
    return lines


@pytest.mark.c_once  # the conftest would run the C twice: its lines would count double
def test_simulator_and_c_print_the_same_lines_once_per_tec(capfd):
    rng = np.random.default_rng(5)
    a = rng.integers(-32768, 32768, 16).astype("int16")
    f = (rng.standard_normal(8) * 1000).astype("float32")
    c = np.array([90], "int8")  # 'Z'
    g = np.array([-3.0517578e-05], "float16")
    show = _kernel()
    ex = S.BuildManager().build(show)
    want = _expected(a, f, c, g)
    capfd.readouterr()
    for run in (show, ex):
        out = np.full(16, 0x5A5A, "int16")
        run(a, f, c, g, out)
        assert out.tolist() == a.tolist()
        printed = capfd.readouterr().out.splitlines()
        for line in want[4:]:
            assert printed.count(line) == 4, (line, printed)
        for line in want[:4]:
            assert printed.count(line) == 1, (line, printed)
        assert len(printed) == 16


@pytest.mark.parametrize("fmt,args,error", [
    ("%d %d\n", (1,), KernelError),
    ("%5d\n", (1,), KernelError),
    ("%d\n", (1.5,), DTypeError),
    ("%f\n", (3,), DTypeError),
    ("%s\n", (3,), DTypeError),
])
def test_what_the_compass_dsl_refuses(fmt, args, error):
    @S.prim_func
    def f(out: S.ptr("int32", "global")):
        out[0] = 1
        S.printf(fmt, *args)

    with pytest.raises(error, match="S.printf"):
        S.build(f, target="compass")


def test_a_vector_conversion_takes_its_vector_type():
    @S.prim_func
    def f(a: S.ptr("i16x16", "global"), out: S.ptr("i16x16", "global")):
        out[0] = a[0]
        S.printf("%v16hf\n", a[0])

    with pytest.raises(DTypeError, match="float16 x 16"):
        S.build(f, target="compass")


def test_doctests():
    result = doctest.testmod(printing)
    assert result.attempted > 0 and result.failed == 0
