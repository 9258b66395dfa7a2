"""float16 and bfloat16 in C: gcc's ``_Float16`` and bfloat16 bits in a ``uint16_t``, with
conversions bit-identical to the simulator's (``arith.convert``, ``npukit.floats``): every
conversion to a float rounds once to nearest even from the exact value, checked over every
16-bit pattern and the rounding edges around them against numpy (float16) and an exact
rational oracle (``float_oracle``); kernels on such tensors agree with the simulator bit
for bit (any NaN matches any NaN)."""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
import pytest
from float_oracle import rounded
from test_c_kernels import check_against_sim, rand, same_bits

import npukit as nk
from npukit import arith, ir
from npukit import kernels as K
from npukit.c import arith as A
from npukit.c import c_source, toolchain
from npukit.c.ctype import TYPEDEFS, c_type, literal

# numpy warns on casts of NaN and on overflow to inf: those are the cases under test.
pytestmark = pytest.mark.filterwarnings(
    "ignore:(invalid value|overflow) encountered:RuntimeWarning")
BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32, F64 = np.dtype("float16"), np.dtype("float32"), np.dtype("float64")
I8, I16, I32, I64 = (np.dtype(x) for x in ("int8", "int16", "int32", "int64"))
U8, U16, U32, U64 = (np.dtype(x) for x in ("uint8", "uint16", "uint32", "uint64"))
PAIRS = [(F32, BF16), (BF16, F32), (F16, F32), (F32, F16), (F64, F16), (F64, BF16),
         (I32, F16), (I64, F16), (I32, BF16), (I64, BF16), (I8, BF16), (I16, BF16), (I16, F16),
         (U8, BF16), (U16, BF16), (U32, BF16), (U64, BF16),
         (F16, BF16), (BF16, F16), (BF16, F64), (F16, F64)]


@pytest.fixture(scope="module")
def converters():
    """One compiled function per (src, dst): ``out[k] = <the emitter's conversion>(in[k])``."""
    h = A.Helpers()
    funcs = []
    for s, d in PAIRS:
        expr = A.convert(h, "in[k]", s, d)
        funcs.append(f"void conv_{s.name}_{d.name}(const {c_type(s)} *in, {c_type(d)} *out, "
                     f"int64_t n)\n{{\n    for (int64_t k = 0; k < n; k++)\n"
                     f"        out[k] = {expr};\n}}")
    src = "\n\n".join(["#include <stdint.h>\n#include <string.h>", *TYPEDEFS.values(),
                       h.source(), *funcs]) + "\n"
    lib = ctypes.CDLL(str(toolchain.build(src)))

    def convert(x: np.ndarray, dst: np.dtype) -> np.ndarray:
        x = np.ascontiguousarray(x)
        out = np.empty(x.shape, dst)
        fn = lib[f"conv_{x.dtype.name}_{dst.name}"]
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        fn(x.ctypes.data, out.ctypes.data, x.size)
        return out
    return convert


def all16(dt: np.dtype) -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dt)


def bits(x: np.ndarray) -> np.ndarray:
    return x.view(f"u{x.dtype.itemsize}")


def test_every_float16_and_bfloat16_widens_exactly(converters):
    """bfloat16 bit for bit, NaN payloads included; float16 too, except that the hardware
    conversion quiets a signalling NaN (numpy's keeps it signalling): NaN stays NaN."""
    for dt in (F16, BF16):
        x = all16(dt)
        for dst in (F32, F64):
            got, want = converters(x, dst), x.astype(dst)
            if dt == BF16:
                assert np.array_equal(bits(got), bits(want)), (dt.name, dst.name)
            assert same_bits(got, want), (dt.name, dst.name)


def float32_edges() -> np.ndarray:
    """Every bfloat16 pattern as the top half of float32s whose low halves sit at and
    around the rounding edges (0, 1, half - 1, half, half + 1, all ones, a random one)."""
    hi = np.arange(1 << 16, dtype=np.uint32) << 16
    lows = np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF, 0x3A5C], np.uint32)
    return (hi[:, None] | lows[None, :]).reshape(-1).view(np.float32)


def test_float32_to_bfloat16_rounds_to_nearest_even(converters):
    x = float32_edges()
    got, want = converters(x, BF16), x.astype(BF16)
    assert np.array_equal(bits(got), bits(want))  # NaNs included: 0x7FC0 / 0xFFC0
    assert bits(converters(np.float32([1 + 2**-8, 1 + 3 * 2**-8]), BF16)).tolist() == \
        [0x3F80, 0x3F82]  # ties to even


def float16_edges() -> np.ndarray:
    """Every float16 value in float64, the midpoints between neighbours and values just
    beside them (in float32 and float64), beyond the largest value, and NaN and inf."""
    h = all16(F16)
    h = h[np.isfinite(h)].astype(F64)
    h = np.unique(h)
    mid = (h[:-1] + h[1:]) / 2
    out = np.concatenate([h, mid, np.nextafter(mid, -np.inf), np.nextafter(mid, np.inf),
                          [65504.0, 65519.99, 65520.0, 1e6, -65520.0, np.inf, -np.inf, np.nan]])
    return out


def oracle_sample(x: np.ndarray, k: int = 6000) -> np.ndarray:
    """``k`` elements of ``x`` (the first 40 and a random rest): the exact oracle takes
    about 10 us an element."""
    pick = np.random.default_rng(1).choice(x.size, min(k, x.size), replace=False)
    return np.concatenate([x[:40], x[pick]])


def test_to_float16_rounds_once_to_nearest_even(converters):
    x = float16_edges()
    for src in (F64, F32):
        xs = x.astype(src)
        got, want = converters(xs, F16), xs.astype(F16)
        assert same_bits(got, want), src.name
    xs = oracle_sample(x)  # numpy rounds once, as the exact oracle does
    assert same_bits(arith.convert(xs, F16), rounded(xs, "float16"))
    ints = np.concatenate([np.arange(-70000, 70000, 7), [2**31 - 1, -2**31, 65519, 65520,
                                                           2049, 2051, 4097, 4099]])
    for src in (I32, I64, I16):
        xs = ints.astype(src) if src != I16 else np.arange(-2**15, 2**15).astype(I16)
        assert same_bits(converters(xs, F16), xs.astype(F16)), src.name


def bfloat16_edges() -> np.ndarray:
    """float64 values at every rounding edge of bfloat16: every finite bfloat16 value, the
    midpoints between neighbours (ties), the float64 values just beside them (float32 would
    round those onto the tie: a second rounding then goes the wrong way), beyond the
    largest value, and NaN and infinities."""
    h = all16(BF16)
    h = np.unique(h[np.isfinite(h.astype(F32))].astype(F64))
    mid = (h[:-1] + h[1:]) / 2
    top = 2.0**127 * (2 - 2**-8)  # halfway from the largest value to 2^128: infinity
    return np.concatenate([h, mid, np.nextafter(mid, -np.inf), np.nextafter(mid, np.inf),
                           [top, np.nextafter(top, 0), -top, 1e300, np.inf, -np.inf, np.nan,
                            -np.nan, 5e-324, -5e-324, 2.0**-134, np.nextafter(2.0**-134, 1)]])


def test_to_bfloat16_rounds_once_to_nearest_even(converters):
    """Conversion to bfloat16 rounds once, to nearest even, from the exact value, in the
    simulator (``arith.convert``) and in C alike: a float64 or an int32 does not round
    twice through float32, as ml_dtypes before 0.7 did (and the simulator with it). The
    reference is exact rational rounding (``float_oracle``), not ml_dtypes."""
    x = bfloat16_edges()
    sim = arith.convert(x, BF16)
    assert np.array_equal(bits(converters(x, BF16)), bits(sim))  # NaNs included
    xs = oracle_sample(x)
    assert np.array_equal(bits(arith.convert(xs, BF16)), bits(rounded(xs, "bfloat16")))
    twice = np.array([1 + 2**-8 + 2**-30], F64)  # above the tie, which float32 rounds onto
    assert bits(converters(twice, BF16))[0] == bits(arith.convert(twice, BF16))[0] == 0x3F81
    rng = np.random.default_rng(0)
    for src in (I32, I64, U32, U64):
        info = np.iinfo(src)
        ints = rng.integers(info.min, info.max, 20000, dtype=src, endpoint=True)
        edges = [info.min, info.max, 2**24 + 2**16 + 1, 2**24 + 2**16, 2**24 + 3 * 2**16,
                 2**24 + 2**16 - 1, 2**31 - 2**23, 2**31 - 2**23 - 1]
        xs = np.concatenate([ints, np.array([v for v in edges if v <= info.max], src)])
        sim = arith.convert(xs, BF16)
        assert np.array_equal(bits(converters(xs, BF16)), bits(sim)), src.name
        assert np.array_equal(bits(sim), bits(rounded(xs, "bfloat16"))), src.name
    assert bits(converters(np.array([2**24 + 2**16 + 1], I32), BF16))[0] == 0x4B81
    big = np.array([2**63 - 1, -2**63, 2**62 + 2**54 + 1, -(2**62 + 2**54), 2**53 + 1], I64)
    assert np.array_equal(bits(converters(big, BF16)), bits(rounded(big, "bfloat16")))
    for src in (I8, I16, U8, U16):
        xs = np.arange(np.iinfo(src).min, np.iinfo(src).max + 1).astype(src)
        want = bits(rounded(xs, "bfloat16"))
        assert np.array_equal(bits(converters(xs, BF16)), want), src.name
        assert np.array_equal(bits(arith.convert(xs, BF16)), want), src.name
    for src, dst in ((F16, BF16), (BF16, F16)):
        xs = all16(src)
        got, want = converters(xs, dst), rounded(xs, dst.name)
        assert same_bits(got, want) and same_bits(arith.convert(xs, dst), want), src.name


def test_literals():
    assert [literal(v, BF16) for v in (1.0, -2.5, float("nan"), 1 + 2**-8)] == \
        ["0x3F80", "0xC020", "0x7FC0", "0x3F80"]
    # rounded once, as the simulator's Fill: not through float32
    assert [literal(v, BF16) for v in (1 + 2**-8 + 2**-30, 2**24 + 2**16 + 1)] == \
        ["0x3F81", "0x4B81"]
    assert literal(0.1, F16) == "0.099975586f" and np.float16(0.099975586) == np.float16(0.1)
    assert literal(float("inf"), F16) == "INFINITY"


# -- kernels on float16 and bfloat16 tensors ------------------------------------------------


@pytest.mark.parametrize("dtype", [F16, BF16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("kern", [K.mul_vanilla, K.mul_vectorized, K.mul])
def test_mul_on_16_bit_floats(kern, dtype):
    rng = np.random.default_rng(5)
    n = 203
    a, b = rand(rng, n, dtype), rand(rng, n, dtype)
    a[1:4] = [np.inf, -np.inf, np.nan]  # specials pass through as in the simulator
    b[5] = 60000.0  # overflows float16 after the product
    inputs = {"input1": a, "input2": b, "bias_scale": np.array([0.25, -1.75], np.float32)}

    def build(out_spec):
        return nk.build(kern, target="torq", input1=nk.spec((n,), dtype),
                        input2=nk.spec((n,), dtype), bias_scale=nk.spec((2,), "float32"),
                        output=out_spec, shift=0, out_min=-40.0, out_max=1e6)
    out = check_against_sim(build, inputs, "output", (n,), dtype, step=2)
    assert len(np.unique(out.astype(np.float32))) > 150


def test_copies_between_float_types():
    """Hand-written IR: float16 -> bfloat16 -> float32 -> float16 transfers and a Fill,
    through internal buffers, junk lanes included."""
    from npukit.layout import Layout

    x = ir.Buffer("x", "LRAM", F16, 40, "in")
    bb = ir.Buffer("bb", "IRAM", BF16, 16)
    ff = ir.Buffer("ff", "PRAM", F32, 16)
    i = ir.Var("i0", 3)

    def build(spec):
        y = ir.Buffer("y", "LRAM", F16, spec.footprint()[1], "out")
        valid = ir.Lanes(40, i * 16, 16)
        body = (ir.Loop(i, (
            ir.Fill(ir.View(ff, Layout((16,), F32)), 0.1, "fill"),
            ir.Copy(ir.View(bb, Layout((16,), BF16)), ir.View(x, Layout((16,), F16), i * 16),
                    "ndl_i", valid, "to bfloat16"),
            ir.Copy(ir.View(ff, Layout((8,), F32), ir.affine(8)),
                    ir.View(bb, Layout((8,), BF16), ir.affine(4)), "ndl_w", None, "to float32"),
            ir.Copy(ir.View(y, Layout((16,), F16, (spec.strides[0],), spec.offset),
                            i * 16 * spec.strides[0]),
                    ir.View(ff, Layout((16,), F32)), "ndl_q", valid, "store"),
        ), "loop"),)
        return ir.Program("floats", nk.target("torq"), ((x, nk.spec((40,), F16)), (y, spec)),
                          (bb, ff), body)
    rng = np.random.default_rng(9)
    xs = (rng.normal(size=40) * 1000).astype(F16)
    out = check_against_sim(build, {"x": xs}, "y", (40,), F16, step=3)
    assert out[0] == np.float16(np.float32(0.1)) and out[8] == xs[4].astype(BF16).astype(F16)
    assert "npk_bf16_from_f32((float)(" in c_source(build(nk.spec((40,), F16)))

