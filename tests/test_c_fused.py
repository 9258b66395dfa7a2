"""Fused loops in the C back end, the parts that make them fast: LUT instructions and
their sub-vector loops inside the fused loop, the index in 32-bit integers, float16 lanes
carried as bits (the integer conversions, over every pattern), integer lanes in the
narrowest exact type, and chains of one 8- or 16-bit input read from a table computed once
— each bit for bit against the simulator (and numpy for the conversions)."""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
import pytest
from test_c_dtypes import all16, bits, float16_edges
from test_c_kernels import check_against_sim, same_bits
from test_lut_kernels import linear_kernel, lookup_kernel

import npukit as nk
from npukit import kernels as K
from npukit.c import arith as A
from npukit.c import c_source, toolchain
from npukit.lut import Lut, design

pytestmark = pytest.mark.filterwarnings(
    "ignore:(invalid value|overflow) encountered:RuntimeWarning")
BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32 = np.dtype("float16"), np.dtype("float32")


def f16_helpers():
    """The float16 <-> float32 helpers compiled alone: (from_bits, to_bits) on arrays."""
    h = A.Helpers()
    h.use("npk_f16_round")
    src = "\n".join(["#include <stdint.h>", "#include <string.h>", h.source(), """
void from_bits(const uint16_t *in, float *out, int64_t n)
{
    for (int64_t k = 0; k < n; k++)
        out[k] = npk_f16_from_bits(in[k]);
}
void to_bits(const float *in, uint16_t *out, int64_t n)
{
    for (int64_t k = 0; k < n; k++)
        out[k] = npk_f16_to_bits(in[k]);
}"""])
    lib = ctypes.CDLL(str(toolchain.build(src)))

    def call(name, x, out_dt):
        out = np.empty(x.shape, out_dt)
        fn = lib[name]
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        fn(np.ascontiguousarray(x).ctypes.data, out.ctypes.data, x.size)
        return out
    return (lambda b: call("from_bits", b, F32)), (lambda f: call("to_bits", f, np.uint16))


def test_float16_bits_widen_exactly():
    """Every float16 pattern: the value numpy gives, NaN payloads and signs included."""
    from_bits, _ = f16_helpers()
    h = all16(F16)
    got, want = from_bits(h.view(np.uint16)), h.astype(F32)
    assert np.array_equal(bits(got)[~np.isnan(want)], bits(want)[~np.isnan(want)])
    nan = h.view(np.uint16)[np.isnan(want)].astype(np.uint32)
    assert np.array_equal(bits(got)[np.isnan(want)],  # the payload kept, unquieted
                          (nan & 0x8000) << 16 | 0x7F800000 | (nan & 0x3FF) << 13)


def test_float32_rounds_to_float16_bits_as_numpy():
    """The midpoints between float16 values and their neighbours, overflow, subnormals,
    infinities and random float32s round as numpy's conversion (to nearest even); a NaN
    stays a NaN of its sign."""
    _, to_bits = f16_helpers()
    rng = np.random.default_rng(3)
    x = np.concatenate([float16_edges().astype(F32), rng.standard_normal(100000).astype(F32)
                        * np.float32(2.0) ** rng.integers(-30, 20, 100000).astype(F32),
                        np.float32([2**-25, 2**-25 * 1.0000001, 3 * 2**-26, 1e-45, -1e-40,
                                    65504, 65519, 65520, -np.inf, 3e38])])
    got = to_bits(x).view(F16)
    assert same_bits(got, x.astype(F16))
    nan = np.float32([np.nan, -np.nan])
    assert (to_bits(nan) & 0x7E00).tolist() == [0x7E00, 0x7E00]
    assert (to_bits(nan) >> 15).tolist() == [int(np.signbit(v)) for v in nan]


def _silu(n: int, x: np.ndarray) -> np.ndarray:
    def build(spec):
        return nk.build(K.silu_fp16, input=nk.spec((n,), F16), output=spec)
    return check_against_sim(build, {"input": x}, "output", (n,), F16)


def test_silu_is_one_fused_loop_with_a_vectorisable_index():
    src = c_source(nk.build(K.silu_fp16, input=nk.spec((1000,), F16),
                            output=nk.spec((1000,), F16)))
    assert "fused into one loop over elements" in src and "float pdata[" not in src
    assert "float f = floorf(x);" in src and "int32_t i = (int32_t)f + 160;" in src
    assert "int32_t pos = (i >> 1) * 4 + (i & 1);" in src
    assert "npk_f16_load(&input[e])" in src and "npk_f16_store(&output[cursor + e]" in src
    assert "npk_tab" not in src  # 1000 elements: fewer than the 65536 patterns
    # the tensors reach the loop as restrict parameters, without which gcc cannot tell the
    # float16 byte copies of input and output apart and leaves the loop scalar
    assert "static NPK_NOINLINE void npk_task0_run(const npk_float16_any *restrict input,\n" \
        in src and "npk_float16_any *restrict output," in src


def test_silu_fused_on_every_float16_pattern():
    """Without the table (fewer elements than patterns): every float16 pattern but the first
    sixteen, bit for bit the simulator's, NaN payloads included."""
    x = all16(F16)[16:].copy()
    out = _silu(x.size, x)
    assert len(np.unique(out[np.isfinite(out)])) > 10000


def test_silu_tabulated_on_every_float16_pattern():
    """With the table (as many elements as patterns): all 65536, in reverse order."""
    x = all16(F16)[::-1].copy()
    src = c_source(nk.build(K.silu_fp16, input=nk.spec((x.size,), F16),
                            output=nk.spec((x.size,), F16)))
    assert "static uint16_t npk_tab0[65536 + 1];" in src  # a gather reads 4 bytes
    assert "npk_once(&npk_tab0_once, npk_tab0_init);" in src
    assert "npk_gather16_k16_e2(&input[e], &output[cursor + e], npk_tab0);" in src
    assert "npk_f16_store_bits(&output[cursor + e], npk_tab0[npk_f16_load_bits(&input[e])]);" \
        in src
    out = _silu(x.size, x)
    assert len(np.unique(out[np.isfinite(out)])) > 10000


@pytest.mark.parametrize("n", [1000, 65536 + 37])
def test_sigmoid_bfloat16_to_float32(n):
    """The LUT sigmoid on bfloat16 input, float32 out: every bfloat16 pattern (cycled), fused
    (1000 elements) and tabulated (more than 65536), against the simulator."""
    d = design("sigmoid", -8, 8, 256, kind="linear")
    x = np.resize(all16(BF16), n)
    x = np.roll(x, 12345)

    def build(spec):
        return nk.build(linear_kernel, input=nk.spec((n,), BF16), output=spec, lut=d)
    out = check_against_sim(build, {"input": x}, "output", (n,), F32)
    src = c_source(build(nk.spec((n,), F32)))
    assert ("npk_tab0[65536]" in src) == (n > 65536)
    finite = np.isfinite(x.astype(F32))
    assert 0 <= out[finite].min() and out[finite].max() <= 1.001


@pytest.mark.parametrize("data, n", [("int8", 300), ("uint8", 240), ("int16", 70000)])
def test_lookup_on_narrow_input(data, n):
    """A lookup on an 8- or 16-bit input: tabulated from as many elements as patterns on
    (int8 at 300 >= 256, not uint8 at 240), bit for bit the simulator's."""
    rng = np.random.default_rng(len(data) + n)
    lut = Lut((rng.normal(size=37) * 100).astype(np.int16))
    info = np.iinfo(data)
    x = rng.integers(info.min, int(info.max) + 1, n).astype(data)
    x[:2] = [info.min, info.max]

    def build(spec):
        return nk.build(lookup_kernel, input=nk.spec((n,), data), output=spec, lut=lut,
                        step_bits=2, bias=0 if data == "uint8" else 8)
    out = check_against_sim(build, {"input": x}, "output", (n,), "int32")
    assert ("npk_tab0[" in c_source(build(nk.spec((n,), "int32")))) == (n >= 2 ** info.bits)
    assert len(np.unique(out)) > 20


def test_narrow_lanes():
    """int8 x int8 products in 16-bit lanes, the Act's clamped result stored without a
    saturation it cannot need; uint8 x uint8 in uint16; int16 x int16 in int32."""
    def src(dtype):
        return c_source(nk.build(K.mul, input1=nk.spec((100,), dtype),
                                 input2=nk.spec((100,), dtype), bias_scale=nk.spec((2,), "int32"),
                                 output=nk.spec((100,), dtype), shift=8, out_min=-100,
                                 out_max=100))
    s8 = src("int8")
    assert "const int16_t pdata = (int16_t)((int32_t)idata * (int32_t)wdata);" in s8
    assert "const int8_t qdata = npk_rescale_clamp_half_up_i32(pdata," in s8
    assert "output[cursor + e] = (int8_t)(qdata);" in s8 and "npk_sat_int8" not in s8
    assert "const uint16_t pdata = (uint16_t)((int32_t)idata * (int32_t)wdata);" in src("uint8")
    assert "const int32_t pdata = (int32_t)((int32_t)idata * (int32_t)wdata);" in src("int16")


@pytest.mark.parametrize("out", ["uint8", "int8"])
def test_inverted_clamp_bounds_saturate_at_the_store(out):
    """out_min > out_max: every lane ends at out_max (clamped to out_min, then to out_max),
    so the Act's range is [out_max, out_max], not [out_min, out_max]: -5 stored into uint8
    saturates to 0 (the fuzzer's case 880 wrapped it to 251 in a narrow lane)."""
    rng = np.random.default_rng(880)
    x = rng.integers(-128, 128, 64, dtype=np.int8)
    y = rng.integers(-128, 128, 64, dtype=np.int8)

    def build(spec):
        return nk.build(K.mul, input1=nk.spec((64,), "int8"), input2=nk.spec((64,), "int8"),
                        bias_scale=nk.spec((2,), "int32"), output=spec, shift=8, out_min=5,
                        out_max=-5)
    got = check_against_sim(build, {"input1": x, "input2": y,
                                    "bias_scale": np.array([3, 100], np.int32)},
                            "output", (64,), out)
    info = np.iinfo(out)
    assert np.all(got == max(-5, info.min))  # the int32 -5, saturated by the store


@pytest.mark.slow
@pytest.mark.parametrize("data, out, n", [("int8", "int8", 16 * 40 + 5), ("uint8", "int16", 300),
                                          ("int16", "int32", 65536 + 9),
                                          ("int16", "uint8", 65536 * 2 + 3)])
@pytest.mark.parametrize("gather", [True, False])
def test_tabulated_lookup_every_key_and_entry_size(data, out, n, gather, monkeypatch):
    """A tabulated lookup reads sixteen entries at a time with an AVX-512 gather (8- and
    16-bit keys; 1-, 2- and 4-byte entries, read as 4-byte words from a padded table) and
    the rest one at a time; compiled with -DNPK_NO_GATHER, all one at a time. Both give the
    simulator's bits, every key pattern included, lengths not a multiple of sixteen."""
    if not gather:
        monkeypatch.setenv("NPUKIT_CFLAGS", f"{toolchain.DEFAULT_CFLAGS} -DNPK_NO_GATHER")
    rng = np.random.default_rng(n)
    lut = Lut((rng.normal(size=37) * 100).astype(np.int16))
    info = np.iinfo(data)
    x = np.resize(np.arange(info.min, int(info.max) + 1).astype(data), n)
    x = rng.permutation(x)

    def build(spec):
        return nk.build(lookup_kernel, input=nk.spec((n,), data), output=spec, lut=lut,
                        step_bits=2, bias=0 if data == "uint8" else 8)
    got = check_against_sim(build, {"input": x}, "output", (n,), out)
    src = c_source(build(nk.spec((n,), out)))
    size = np.dtype(out).itemsize
    assert f"npk_gather16_k{info.bits}_e{size}(&input[e], &output[cursor + e], npk_tab0);" \
        in src
    assert f"[{2 ** info.bits}{f' + {4 // size - 1}' if size < 4 else ''}];" in src
    assert len(np.unique(got)) > 20
