"""parallel_lookup and linear_approx against a scalar, element-by-element reading of seed
002's formulas in plain Python ints, floats and Fractions."""

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npukit.errors import LutError
from npukit.lut import LINEAR_TYPES, Lut, linear_approx, linear_type, parallel_lookup

BF16 = ml_dtypes.bfloat16
INDEX_DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
VALUE_DTYPES = ["int8", "uint8", "int16", "int32", "float32", "float16", "bfloat16",
                "complex64"]


def _dt(name):
    return np.dtype(BF16) if name == "bfloat16" else np.dtype(name)


# ---- the scalar oracle: the seed's formulas, one element at a time ----------------------

def ref_parallel_lookup(values, x, signed, step_bits, bias, oor):
    n = len(values)
    out = []
    for v in x:
        raw = int(v) >> step_bits              # Python's >> floors, like the hardware shift
        if oor == "saturate":                  # "taking on the min/max valid index"
            index = min(max(raw + bias, 0), n - 1)
        elif signed:                           # wrap into [-bias, size - bias), then bias
            wrapped = (raw + bias) % n - bias
            assert -bias <= wrapped < n - bias
            index = wrapped + bias
        else:                                  # "retaining the lower bits"
            index = raw & (n - 1)
        out.append(values[index])
    return out


def ref_linear_int(offsets, slopes, x, step_bits, bias, shift_offset):
    n = len(offsets)
    out = []
    for v in x:
        v = int(v)
        index = min(max((v >> step_bits) + bias, 0), n - 1)
        remainder = v & ((1 << step_bits) - 1)
        out.append(int(slopes[index]) * remainder + (int(offsets[index]) << shift_offset))
    return out


# Halfway between the largest float32, (2 - 2**-23) * 2**127, and 2**128: rounds to infinity.
_FLOAT32_OVERFLOW = Fraction(2**128 - 2**103)


def round_to_float32(value: Fraction) -> float:
    """Round an exact rational to the nearest float32, ties to even."""
    if abs(value) >= _FLOAT32_OVERFLOW:
        return math.copysign(math.inf, value)
    guess = np.float32(float(value))
    candidates = [np.nextafter(guess, np.float32(-np.inf)), guess,
                  np.nextafter(guess, np.float32(np.inf))]
    best = min(candidates, key=lambda c: (abs(Fraction(float(c)) - value),
                                          int(np.array(c).view(np.uint32)) & 1))
    return float(best)


def ref_linear_float(offsets, slopes, x, step_bits, bias):
    n = len(offsets)
    out = []
    for v in x:
        v = float(v)
        if step_bits < 0:  # the AIE API's conversion with -step_bits fraction bits
            floor = min(max(math.floor(Fraction(v) * 2**-step_bits), -(2**31)), 2**31 - 1)
            index = min(max(floor + bias, 0), n - 1)
        else:
            floor = min(max(math.floor(v), -(2**31)), 2**31 - 1)
            index = min(max((floor >> step_bits) + bias, 0), n - 1)
        exact = Fraction(float(slopes[index])) * Fraction(v) + Fraction(float(offsets[index]))
        out.append(round_to_float32(exact))
    return out


# ---- inputs ---------------------------------------------------------------------------

def _table_values(rng, name, n):
    dt = _dt(name)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        v = rng.integers(int(info.min), int(info.max), n, endpoint=True, dtype=np.int64)
        v[-1] = info.max
        return v.astype(dt)
    if dt.kind == "c":
        return (rng.normal(size=n) + 1j * (rng.normal(size=n) + 1)).astype(dt)
    return (rng.normal(size=n) * 8 + 1).astype(dt)


def _inputs(rng, dt, step_bits, bias, n):
    """Random inputs plus the edges: dtype limits, zero, cell boundaries, table ends."""
    info = np.iinfo(dt)
    lo, hi = int(info.min), int(info.max)
    special = [lo, hi, 0, 1, lo + 1, hi - 1]
    for k in (-bias - 1, -bias, 0, n - 1 - bias, n - bias, n + 5 - bias):
        for d in (-1, 0, 1):
            special.append((k << step_bits) + d)
    special = [v for v in special if lo <= v <= hi]
    near = rng.integers(max(lo, -((n + 4) << step_bits)), min(hi, (n + 4) << step_bits),
                        100, endpoint=True, dtype=np.int64 if dt != np.uint64 else np.uint64)
    wide = rng.integers(lo, hi, 40, endpoint=True, dtype=np.int64 if dt.kind == "i"
                        else np.uint64)
    return np.concatenate([np.array(special, dtype=dt), near.astype(dt), wide.astype(dt)])


# ---- parallel_lookup -------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.data())
@pytest.mark.slow
def test_parallel_lookup_matches_the_scalar_reading(data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    index_dt = np.dtype(data.draw(st.sampled_from(INDEX_DTYPES)))
    value_name = data.draw(st.sampled_from(VALUE_DTYPES))
    oor = data.draw(st.sampled_from(["saturate", "truncate"]))
    if oor == "truncate":
        n = 1 << data.draw(st.integers(0, 9))
    else:
        n = data.draw(st.integers(1, 600))
    bits = index_dt.itemsize * 8
    step_bits = data.draw(st.integers(0, min(bits - 1, 12)))
    signed = index_dt.kind == "i"
    bias = (1 << data.draw(st.integers(0, 10))) if signed and data.draw(st.booleans()) else 0
    lut = Lut(_table_values(rng, value_name, n))
    x = _inputs(rng, index_dt, step_bits, bias, n)
    got = parallel_lookup(lut, x, step_bits, bias, oor)
    expect = ref_parallel_lookup(list(lut.offsets), x.tolist(), signed, step_bits, bias, oor)
    assert got.dtype == lut.offset_dtype and got.shape == x.shape
    assert got.tobytes() == np.array(expect, dtype=lut.offset_dtype).tobytes()


def test_parallel_lookup_truncate_wraps_signed_indices_around_the_bias():
    lut = Lut(np.arange(100, 108, dtype=np.int16))
    x = np.array([-5, -4, -1, 0, 3, 4, 11, 12], np.int8)
    # wrapped into [-4, 4): -5 -> 3, 4 -> -4, 11 -> 3, 12 -> -4; then + 4
    assert parallel_lookup(lut, x, 0, 4, "truncate").tolist() == \
        [107, 100, 103, 104, 107, 100, 107, 100]
    assert parallel_lookup(lut, x, 0, 4).tolist() == [100, 100, 103, 104, 107, 107, 107, 107]
    u = np.array([0, 7, 8, 9, 255], np.uint8)
    assert parallel_lookup(lut, u, 0, oor="truncate").tolist() == [100, 107, 100, 101, 107]
    assert parallel_lookup(lut, u >> 0, 1).tolist() == [100, 103, 104, 104, 107]


@pytest.mark.parametrize("x, kwargs, words", [
    (np.array([1.0], np.float32), {}, ["integers", "float32"]),
    (np.array([True]), {}, ["integers", "bool"]),
    (np.array([1], np.int8), {"step_bits": 8}, ["step_bits=8", "[0, 8)", "int8"]),
    (np.array([1], np.int16), {"step_bits": -1}, ["step_bits=-1"]),
    (np.array([1], np.int16), {"step_bits": 1.5}, ["step_bits", "integer", "1.5"]),
    (np.array([1], np.int16), {"bias": 3}, ["bias=3", "power of two"]),
    (np.array([1], np.int16), {"bias": -4}, ["bias=-4", "power of two"]),
    (np.array([1], np.uint16), {"bias": 4}, ["bias=4", "signed", "uint16"]),
    (np.array([1], np.int16), {"oor": "wrap"}, ["oor='wrap'", "saturate", "truncate"]),
])
def test_parallel_lookup_rules(x, kwargs, words):
    with pytest.raises(LutError) as err:
        parallel_lookup(Lut(np.arange(1, 9, dtype=np.int16)), x, **kwargs)
    for word in words:
        assert word in str(err.value)


def test_parallel_lookup_truncate_needs_a_power_of_two_table_and_a_direct_table():
    with pytest.raises(LutError, match="power of two; got size 6"):
        parallel_lookup(Lut(np.arange(1, 7, dtype=np.int16)), np.array([1], np.int8),
                        oor="truncate")
    linear = Lut(np.ones(4, np.int16), np.ones(4, np.int16))
    with pytest.raises(LutError, match="direct table"):
        parallel_lookup(linear, np.array([1], np.int8))


# ---- linear_approx ---------------------------------------------------------------------

def _linear_table(rng, row, n, float32_slopes=False):
    if row.accumulator == "accfloat":
        offsets = (rng.normal(size=n) * 4 + 0.5).astype(np.float32)
        slopes = (rng.normal(size=n) * 2 + 0.1).astype(BF16)
        if float32_slopes:
            slopes = slopes.astype(np.float32)
        return Lut(offsets, slopes)
    return Lut(_table_values(rng, row.offset, n), _table_values(rng, row.slope, n))


def _bf16_inputs(rng, step_bits, bias, n):
    """Inputs that land at and beyond both table ends, fractional and integral, +-0."""
    ends = []
    cell = 2.0 ** min(step_bits, 0)  # the inputs between two floors that may index apart
    for k in (-bias - 1, -bias, n - 1 - bias, n - bias):
        base = math.ldexp(k, step_bits)
        ends += [base, base - cell / 2, base + cell / 4, base - cell * 2.0**-9,
                 base + cell * 2.0**-9]
    near = rng.uniform(math.ldexp(-bias - 3, step_bits), math.ldexp(n - bias + 3, step_bits),
                       100)
    wide = rng.normal(size=20) * 1e6
    x = np.concatenate([ends, near, wide, [0.0, -0.0, 3e38, -3e38, 1e-40]])
    return x.astype(BF16)


@settings(max_examples=200, deadline=None)
@given(st.data())
@pytest.mark.slow
def test_linear_approx_matches_the_scalar_reading(data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    row = data.draw(st.sampled_from(LINEAR_TYPES))
    n = data.draw(st.integers(1, 300))
    if row.accumulator == "accfloat":
        step_bits = data.draw(st.integers(-12, 8))
        bias = data.draw(st.integers(-300, 300))
        lut = _linear_table(rng, row, n, float32_slopes=data.draw(st.booleans()))
        x = _bf16_inputs(rng, step_bits, bias, n)
        got = linear_approx(lut, x, step_bits, bias)
        expect = ref_linear_float(list(lut.offsets), list(lut.slopes), x.tolist(),
                                  step_bits, bias)
        assert got.dtype == np.float32
        assert got.tobytes() == np.array(expect, np.float32).tobytes()
        return
    bits = np.dtype(row.input).itemsize * 8
    step_bits = data.draw(st.integers(row.min_step_bits, bits - 1))
    bias = data.draw(st.integers(-2 * n, 2 * n))
    most = row.acc_dtype.itemsize * 8 - np.dtype(row.offset).itemsize * 8 - 1
    shift_offset = data.draw(st.integers(0, most))
    lut = _linear_table(rng, row, n)
    x = _inputs(rng, np.dtype(row.input), step_bits, max(bias, 0), n)
    got = linear_approx(lut, x, step_bits, bias, shift_offset)
    expect = ref_linear_int(list(lut.offsets), list(lut.slopes), x.tolist(), step_bits, bias,
                            shift_offset)
    assert got.dtype == row.acc_dtype
    assert got.tolist() == expect


def test_linear_approx_integer_example_by_hand():
    # index = (x >> 2) + 1, remainder = x & 3, out = slope * rem + (offset << 3)
    lut = Lut(np.array([-10, 20, 30], np.int8), np.array([5, -6, 7], np.int8))
    x = np.array([-5, -4, -1, 0, 3, 4, 127, -128], np.int8)
    assert linear_approx(lut, x, 2, 1, 3).tolist() == [
        5 * 3 - 80, -80, 5 * 3 - 80, 160, -6 * 3 + 160, 240, 7 * 3 + 240, -80]


def test_linear_approx_float_example_by_hand_and_nan():
    lut = Lut(np.array([1.0, 2.0, 3.0], np.float32), np.array([0.5, -1.0, 2.0], BF16))
    x = np.array([-3.5, -1.0, -0.5, 0.0, 1.75, 9.0, np.nan, np.inf], BF16)
    got = linear_approx(lut, x, 0, 1)
    # floor: -4, -1, -1, 0, 1, 9 -> index 0, 0, 0, 1, 2, 2 (clamped)
    assert got[:6].tolist() == [-0.75, 0.5, 0.75, 2.0, 6.5, 21.0]
    assert np.isnan(got[6]) and got[7] == np.inf


def test_linear_approx_negative_step_bits_by_hand():
    # mlir-aie's bfloat16 tanh reads its table with step_bits -2: cells of width 1/4.
    lut = Lut(np.array([1.0, 2.0, 3.0, 4.0], np.float32), np.array([0.5, -1.0, 2.0, 4.0], BF16))
    x = np.array([-0.25, -0.0078125, 0.0, 0.2421875, 0.25, 0.5, 0.75, 100.0, -np.inf, np.inf,
                  np.nan], BF16)
    got = linear_approx(lut, x, -2, 1)
    # floor(4x) + 1: -1+1, -1+1, 0+1, 0+1, 1+1, 2+1, 3+1 (clamped), clamped, 0, 3
    assert got[:8].tolist() == [1.0 - 0.125, 1.0 - 0.00390625, 2.0, 2.0 - 0.2421875,
                                3.0 + 0.5, 4.0 + 2.0, 4.0 + 3.0, 4.0 + 400.0]
    assert got[8] == -np.inf and got[9] == np.inf and np.isnan(got[10])
    # one step_bits lower halves the cells: floor(8x) for x = 0.125 is 1
    assert linear_approx(lut, np.array([0.125], BF16), -3).tolist() == [2.0 - 0.125]


def test_float32_slopes_with_zero_low_bits_equal_bfloat16_slopes():
    rng = np.random.default_rng(7)
    row = LINEAR_TYPES[3]
    lut = _linear_table(rng, row, 40)
    lut32 = Lut(lut.offsets, lut.slopes.astype(np.float32))
    x = _bf16_inputs(rng, 1, 20, 40)
    assert linear_approx(lut, x, 1, 20).tobytes() == linear_approx(lut32, x, 1, 20).tobytes()


@pytest.mark.parametrize("row", LINEAR_TYPES, ids=str)
def test_linear_approx_minimum_step_bits(row):
    lut = _linear_table(np.random.default_rng(1), row, 8)
    x = np.array([1, 2, 3], dtype=_dt(row.input))
    if row.min_step_bits:
        with pytest.raises(LutError) as err:
            linear_approx(lut, x, row.min_step_bits - 1)
        msg = str(err.value)
        assert f"step_bits={row.min_step_bits - 1}" in msg
        assert f"minimum step_bits of the AIE API's table is {row.min_step_bits}" in msg
    linear_approx(lut, x, row.min_step_bits)


@pytest.mark.parametrize("make, args, words", [
    (lambda: Lut(np.ones(4, np.int16)), (np.ones(2, np.int16), 3),
     ["needs a table with slopes"]),
    (lambda: Lut(np.ones(4, np.int16), np.ones(4, np.int16)), (np.ones(2, np.int8), 3),
     ["input int8, offset int16, slope int16", "int8/int8/int8 (acc32)"]),
    (lambda: Lut(np.ones(4, np.float32), np.ones(4, np.float32)),
     (np.ones(2, np.float32), 0), ["input float32", "bfloat16/float32/bfloat16"]),
    (lambda: Lut(np.ones(4, np.float32), np.array([1, 1, 1 + 2**-20, 1], np.float32)),
     (np.ones(2, BF16), 0), ["slopes[2]", "low 16 mantissa bits of a float slope must be zero"]),
    (lambda: Lut(np.ones(4, np.int16), np.ones(4, np.int16)), (np.ones(2, np.int16), 16),
     ["step_bits=16", "[3, 16)"]),
    (lambda: Lut(np.ones(4, np.int8), np.ones(4, np.int8)), (np.ones(2, np.int8), 2, 0, 24),
     ["shift_offset=24", "[0, 23]", "32-bit accumulator"]),
    (lambda: Lut(np.ones(4, np.int16), np.ones(4, np.int16)), (np.ones(2, np.int16), 3, 0, -1),
     ["shift_offset=-1", "[0, 47]"]),
    (lambda: Lut(np.ones(4, np.int32), np.ones(4, np.int32)), (np.ones(2, np.int16), 4, 0, 32),
     ["shift_offset=32", "[0, 31]"]),
    (lambda: Lut(np.ones(4, np.float32), np.ones(4, BF16)), (np.ones(2, BF16), 0, 0, 1),
     ["shift_offset=1", "must be 0 for bfloat16"]),
    (lambda: Lut(np.ones(4, np.float32), np.ones(4, BF16)), (np.ones(2, BF16), 32),
     ["step_bits=32", "[-127, 32)"]),
    (lambda: Lut(np.ones(4, np.float32), np.ones(4, BF16)), (np.ones(2, BF16), -128),
     ["step_bits=-128", "[-127, 32)", "2**-step_bits must be a float32"]),
    (lambda: Lut(np.ones(4, np.int16), np.ones(4, np.int16)), (np.ones(2, np.int16), 3, 2**31),
     ["bias=2147483648", "32-bit int"]),
])
def test_linear_approx_rules(make, args, words):
    with pytest.raises(LutError) as err:
        linear_approx(make(), *args)
    for word in words:
        assert word in str(err.value)


def test_linear_type_reads_the_seed_table():
    rows = [(r.input, r.offset, r.slope, r.accumulator, r.lanes, r.min_step_bits)
            for r in LINEAR_TYPES]
    assert rows == [("int8", "int8", "int8", "acc32", 32, 2),
                    ("int16", "int16", "int16", "acc64", 16, 3),
                    ("int16", "int32", "int32", "acc64", 16, 4),
                    ("bfloat16", "float32", "bfloat16", "accfloat", 16, 0)]
    t = Lut(np.ones(2, np.int32), np.ones(2, np.int32))
    assert linear_type(t, "int16") is LINEAR_TYPES[2]
