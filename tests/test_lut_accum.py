"""The AIE API's accumulator ``to_vector(shift)``: every rounding and saturation mode against
an exact rational reading, on random accumulators and the edges (ties, the type's limits,
the accumulator's limits)."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npukit.errors import LutError
from npukit.lut import ROUNDING_MODES, SATURATION_MODES, to_vector


def ref_round(t: int, shift: int, mode: str) -> int:
    """The AIE API's rounding of the exact rational t / 2**shift."""
    q = Fraction(t, 2**shift)
    lo, hi = math.floor(q), math.ceil(q)
    if mode in ("floor", "ceil"):
        return lo if mode == "floor" else hi
    if mode == "symmetric_floor":          # towards zero
        return math.trunc(q)
    if mode == "symmetric_ceil":           # away from zero
        return hi if q > 0 else lo
    if q - lo != Fraction(1, 2):           # not a tie: the nearest integer
        return round(q)
    return {"positive_inf": hi, "negative_inf": lo,
            "symmetric_inf": hi if q > 0 else lo, "symmetric_zero": lo if q > 0 else hi,
            "conv_even": lo if lo % 2 == 0 else hi, "conv_odd": lo if lo % 2 else hi}[mode]


def ref_narrow(v: int, dtype: str, saturation: str) -> int:
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    if saturation == "saturate":
        return min(max(v, lo), hi)
    if saturation == "symmetric":
        return min(max(v, -hi), hi)
    bits = info.bits                        # none: the low bits, read as the type
    v &= (1 << bits) - 1
    return v - (1 << bits) if lo < 0 and v > hi else v


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_to_vector_matches_the_exact_reading(data):
    acc_dt = data.draw(st.sampled_from(["int32", "int64"]))
    bits = np.iinfo(acc_dt).bits
    shift = data.draw(st.integers(0, bits - 1))
    mode = data.draw(st.sampled_from(ROUNDING_MODES))
    out_dt = data.draw(st.sampled_from(["int8", "uint8", "int16", "uint16", "int32", "uint32"]))
    saturation = data.draw(st.sampled_from(
        [s for s in SATURATION_MODES if not (s == "symmetric" and out_dt.startswith("u"))]))
    info = np.iinfo(acc_dt)
    unit = 1 << shift
    # ties (k + 1/2), one below and above them, the accumulator's limits, the type's limits
    edges = [int(info.min), int(info.max), 0, -1, 1]
    for k in data.draw(st.lists(st.integers(-300, 300), min_size=1, max_size=8)) + \
            [int(np.iinfo(out_dt).max), int(np.iinfo(out_dt).min)]:
        base = k * unit + unit // 2
        edges += [base - 1, base, base + 1, k * unit]
    edges = [v for v in edges if info.min <= v <= info.max]
    rand = data.draw(st.lists(st.integers(int(info.min), int(info.max)), max_size=20))
    acc = np.array(edges + rand, acc_dt)
    got = to_vector(acc, out_dt, shift, mode, saturation)
    want = [ref_narrow(ref_round(int(t), shift, mode), out_dt, saturation) for t in acc]
    assert got.dtype == np.dtype(out_dt)
    assert got.tolist() == want


def test_ties_by_hand():
    acc = np.array([6, 10, -6, -10, 7, -7], np.int32)  # /4: 1.5 2.5 -1.5 -2.5 1.75 -1.75
    table = {"floor": [1, 2, -2, -3, 1, -2], "ceil": [2, 3, -1, -2, 2, -1],
             "symmetric_floor": [1, 2, -1, -2, 1, -1], "symmetric_ceil": [2, 3, -2, -3, 2, -2],
             "positive_inf": [2, 3, -1, -2, 2, -2], "negative_inf": [1, 2, -2, -3, 2, -2],
             "symmetric_inf": [2, 3, -2, -3, 2, -2], "symmetric_zero": [1, 2, -1, -2, 2, -2],
             "conv_even": [2, 2, -2, -2, 2, -2], "conv_odd": [1, 3, -1, -3, 2, -2]}
    assert set(table) == set(ROUNDING_MODES)
    for mode, want in table.items():
        assert to_vector(acc, "int16", 2, mode).tolist() == want, mode


def test_saturation_by_hand():
    acc = np.array([200, -200, -128, 300], np.int64)
    assert to_vector(acc, "int8", 0, saturation="saturate").tolist() == [127, -128, -128, 127]
    assert to_vector(acc, "int8", 0, saturation="symmetric").tolist() == [127, -127, -127, 127]
    assert to_vector(acc, "int8").tolist() == [-56, 56, -128, 44]
    assert to_vector(acc, "uint8", 0, saturation="saturate").tolist() == [200, 0, 0, 255]


@pytest.mark.parametrize("args, words", [
    ((np.ones(2, np.int16), "int8"), ["int32 (acc32) or int64 (acc64)", "int16"]),
    ((np.ones(2, np.int32), "float32"), ["dtype float32"]),
    ((np.ones(2, np.int32), "int8", 32), ["shift=32", "[0, 32)", "acc32"]),
    ((np.ones(2, np.int64), "int8", -1), ["shift=-1", "[0, 64)", "acc64"]),
    ((np.ones(2, np.int32), "int8", 1, "nearest"), ["rounding='nearest'", "conv_even"]),
    ((np.ones(2, np.int32), "int8", 1, "floor", "wrap"), ["saturation='wrap'", "symmetric"]),
    ((np.ones(2, np.int32), "uint8", 1, "floor", "symmetric"), ["signed types", "uint8"]),
])
def test_to_vector_rules(args, words):
    with pytest.raises(LutError) as err:
        to_vector(*args)
    for word in words:
        assert word in str(err.value)
