"""Act clamp bounds at and beyond the 64-bit extremes (``out_max=2**64 - 1`` for a uint64
output): the integer Act's result is int32 clamped to [lo, hi], so a bound beyond int32 acts
as the int32 limit, on the simulator and in C alike, bit for bit; bounds that hold no int32
value are refused when the kernel is built."""

from __future__ import annotations

import numpy as np
import pytest

import npukit as nk
from npukit import arith
from npukit import kernels as K
from npukit.c import run_c
from npukit.run import check_arrays

I32 = (-2**31, 2**31 - 1)
CASES = [  # (output dtype, lo, hi)
    ("uint64", 0, 2**64 - 1), ("uint64", 2**31 - 1, 2**64 - 1), ("uint64", -5, 2**63),
    ("int64", -2**63, 2**63 - 1), ("int64", -2**70, 2**70), ("int64", -2**63, -2**31),
    ("int64", -2**31 + 1, 2**63 + 5), ("uint32", 0, 2**32 - 1), ("uint32", 7, 7),
    ("int32", -2**63, 2**63 - 1), ("int32", -2**31, 2**31 - 1), ("int16", -2**70, 2**64 - 1),
]


def oracle(t: np.ndarray, lo: int, hi: int, dt: np.dtype) -> np.ndarray:
    """Python integers: clamp to [lo, hi], the Act's int32 result, the store's saturation."""
    out_lo, out_hi = (int(v) for v in (np.iinfo(dt).min, np.iinfo(dt).max))
    vals = [min(max(min(max(int(x), lo), hi), I32[0]), I32[1]) for x in t.tolist()]
    return np.array([min(max(v, out_lo), out_hi) for v in vals], dtype=dt)


@pytest.mark.parametrize("out_dtype, lo, hi", CASES)
def test_rescale_clamp_at_the_extremes(out_dtype, lo, hi):
    """Products of int8 extremes times a scale of 2**20 reach past int32 both ways."""
    n = 64
    a = np.array([-128, 127, 0, 1, -1, 64, -64, 5] * 8, np.int8)
    b = np.array([-128, -128, 127, 1, 3, -2, 100, -100] * 8, np.int8)
    bs = np.array([-3, 2**20], np.int32)
    prog = nk.build(K.mul_vectorized, target="torq", input1=nk.spec((n,), "int8"),
                    input2=nk.spec((n,), "int8"), bias_scale=nk.spec((2,), "int32"),
                    output=nk.spec((n,), out_dtype), shift=0, out_min=lo, out_max=hi)
    t = (a.astype(np.int64) * b + int(bs[0])) * int(bs[1])
    assert t.max() > I32[1] and t.min() < I32[0]
    want = oracle(t, lo, hi, np.dtype(out_dtype))
    arrays = dict(input1=a, input2=b, bias_scale=bs)
    out = np.zeros(n, out_dtype)
    prog.run("sim", **arrays, output=out)
    assert np.array_equal(out, want), "simulator"
    for fuse in (True, False):
        out = np.zeros(n, out_dtype)
        run_c(prog, check_arrays(prog, dict(arrays, output=out)), fuse=fuse)
        assert np.array_equal(out, want), f"C, fuse={fuse}"


@pytest.mark.parametrize("out_dtype", ["uint64", "int64", "uint32"])
def test_clamp_to_the_output_range(out_dtype):
    """The Torq EasyKernel guide's reduce clamps to ``minVal(outType), maxVal(outType)``:
    for wide outputs the bounds lie beyond int32."""
    x = np.random.default_rng(5).integers(-2**15, 2**15, (7, 16)).astype(np.int16)
    x[:, :4] = [[-2**15], [2**15 - 1]] * 3 + [[-1]]  # the extremes, too
    prog = nk.build(K.reduce_rows, target="torq", input=nk.spec(x.shape, "int16"),
                    output=nk.spec((16,), out_dtype))
    t = x.astype(np.int64).sum(0)
    want = oracle(t, *(int(v) for v in (np.iinfo(out_dtype).min, np.iinfo(out_dtype).max)),
                  np.dtype(out_dtype))
    assert len(set(want.tolist())) > 1
    for backend in ("sim", "c"):
        out = np.full(16, 99, out_dtype)
        prog.run(backend, input=x, output=out)
        assert np.array_equal(out, want), backend


@pytest.mark.parametrize("lo, hi", [(2**31, 2**64 - 1), (2**63, 2**64 - 1), (-2**63, -2**31 - 1)])
def test_bounds_without_an_int32_value_are_refused(lo, hi):
    with pytest.raises(nk.KernelError, match=f"lo={lo}, hi={hi} hold no int32 value"):
        nk.build(K.mul_vectorized, target="torq", input1=nk.spec((8,), "int8"),
                 input2=nk.spec((8,), "int8"), bias_scale=nk.spec((2,), "int32"),
                 output=nk.spec((8,), "uint64"), shift=0, out_min=lo, out_max=hi)


def test_act_bounds():
    assert arith.act_bounds(0, 2**64 - 1) == (0, I32[1])
    assert arith.act_bounds(-2**70, -2**40) == (I32[0], I32[0])
    assert arith.act_bounds(-5, 9) == (-5, 9)


@pytest.mark.parametrize("clamp", [(-2**70, 2**64), (2**63, 2**64), (-2**64, -2**63 - 1),
                                   (-3, 2**63), (-2**63, 2**63 - 1)])
def test_linear_approx_clamp_beyond_int64(clamp):
    """``linear_approx`` clamps integer partials in 64 bits: bounds beyond int64 give what
    the exact bounds give (the partial is an int64), on both back ends."""
    from npukit.lut import Lut, linear_approx

    @nk.kernel
    def linear(s, input, output, *, lut, clamp):
        x = input.vectorize(s.act.width(input.dtype))
        for i in s.iterate(x.dims(0, -1)):
            p = s.alu.accumulate(s.iram.load(x[i]))
            s.append(output, s.act.linear_approx(p, lut, 2, 1, 3, clamp=clamp))

    lut = Lut(np.array([-10, 20, 30, 4], np.int8), np.array([5, -6, 7, 1], np.int8))
    x = np.array([-5, -4, -1, 0, 3, 4, 127, -128], np.int8)
    lo, hi = clamp
    exact = np.array([min(max(min(max(int(v), lo), hi), -128), 127) for v in x], np.int8)
    want = linear_approx(lut, exact, 2, 1, 3)
    prog = nk.build(linear, target="torq", input=nk.spec((8,), "int8"),
                    output=nk.spec((8,), "int32"), lut=lut, clamp=clamp)
    for backend in ("sim", "c"):
        out = np.zeros(8, np.int32)
        prog.run(backend, input=x, output=out)
        assert np.array_equal(out, want), backend
