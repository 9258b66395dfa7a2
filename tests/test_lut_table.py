"""Lut values and memory images (seed 002, aie::lut): storage rules, bank interleaving,
round trips and the errors of a malformed image."""

import dataclasses

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npukit.errors import LutError
from npukit.lut import Lut

DIRECT_DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "float16", "float32",
                 "bfloat16", "float8_e4m3fn", "int64", "complex64"]
LINEAR_PAIRS = [("int8", "int8"), ("int16", "int16"), ("int32", "int32"),
                ("float32", "bfloat16")]


def _dt(name):
    return np.dtype(getattr(ml_dtypes, name, None) or name)


def _values(rng, name, n):
    """n values of dtype ``name``, never all zero."""
    dt = _dt(name)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        v = rng.integers(int(info.min), int(info.max), n, endpoint=True, dtype=np.int64)
        v[0] = info.max if n > 1 else 1
        return v.astype(dt)
    if dt.kind == "c":
        return (rng.normal(size=n) + 1j * rng.normal(size=n) + 0.5).astype(dt)
    return (rng.normal(size=n) * 4 + 0.25).astype(dt)


def _reference_interleave(values, per_bank):
    """Seed 002's parallel layout read literally: block by block, each block twice."""
    out = []
    blocks = -(-len(values) // per_bank)
    for b in range(blocks):
        block = [values[b * per_bank + j] if b * per_bank + j < len(values) else 0
                 for j in range(per_bank)]
        out += block + block
    return out


def test_lut_is_immutable_and_copies_its_arrays():
    src = np.array([1, 2, 3], np.int16)
    t = Lut(src)
    src[0] = 99
    assert t.offsets.tolist() == [1, 2, 3]
    with pytest.raises(ValueError):
        t.offsets[0] = 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.offsets = np.zeros(3, np.int16)


def test_lut_types_and_equality():
    t = Lut(np.array([0.5, 1.5], np.float32), np.array([1, -1], ml_dtypes.bfloat16))
    assert (t.size, len(t), t.offset_dtype, t.slope_dtype.name, t.is_linear) == \
        (2, 2, np.float32, "bfloat16", True)
    assert t == Lut(np.array([0.5, 1.5], np.float32), np.array([1, -1], ml_dtypes.bfloat16))
    assert t != Lut(np.array([0.5, 1.5], np.float32), np.array([1, 1], ml_dtypes.bfloat16))
    assert Lut(np.array([1, 2], np.int16)) != Lut(np.array([1, 2], np.int32))
    assert hash(Lut(np.array([1, 2], np.int16))) == hash(Lut(np.array([1, 2], np.int16)))


@pytest.mark.parametrize("offsets, slopes, words", [
    (np.zeros((2, 2), np.int16), None, ["offsets", "one-dimensional", "(2, 2)"]),
    (np.zeros(0, np.int16), None, ["offsets", "at least 1", "empty"]),
    (np.array([True, False]), None, ["offsets", "bool", "not a number type"]),
    (np.array([1, 2], np.int16), np.array([1, 2, 3], np.int16), ["slopes", "3", "2"]),
])
def test_lut_rejects_bad_values(offsets, slopes, words):
    with pytest.raises(LutError) as err:
        Lut(offsets, slopes)
    for word in words:
        assert word in str(err.value)


def test_parallel_1_stores_values_linearly_and_8_bit_values_as_16_bit():
    t = Lut(np.array([-128, -3, 5, 127], np.int8))
    image = t.layout(1)
    assert image.dtype == np.int16 and image.tolist() == [-128, -3, 5, 127]
    u = Lut(np.array([0, 200, 255], np.uint8)).layout(1)
    assert u.dtype == np.uint16 and u.tolist() == [0, 200, 255]
    f8 = Lut(np.array([1.5, -2.0], ml_dtypes.float8_e4m3fn)).layout(1)
    assert f8.dtype == np.uint16
    assert f8.tolist() == np.array([1.5, -2.0], ml_dtypes.float8_e4m3fn).view(np.uint8).tolist()


def test_seed_example_32_bit_values_128_bit_banks():
    # "the first 4 values (128b), then the same 4 again, then the next 4, which then repeat"
    t = Lut(np.arange(10, 18, dtype=np.int32))
    assert t.layout(2, 128).tolist() == [10, 11, 12, 13, 10, 11, 12, 13,
                                         14, 15, 16, 17, 14, 15, 16, 17]
    ab, cd = t.layout(4, 128)
    assert ab.tolist() == cd.tolist() == t.layout(2, 128).tolist()
    assert not np.shares_memory(ab, cd)


def test_partial_last_block_is_padded_to_the_bank():
    t = Lut(np.arange(1, 7, dtype=np.int32))
    assert t.layout(2, 128).tolist() == [1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 0, 0, 5, 6, 0, 0]
    assert Lut(np.arange(1, 4, dtype=np.int8)).layout(2, 64).tolist() == [1, 2, 3, 0] * 2


def test_linear_entries_put_the_slope_in_the_low_half_and_the_offset_in_the_high_half():
    off = np.array([1000, -2, 3, 4, 5], np.int16)
    slo = np.array([-7, 8, 9, 10, 11], np.int16)
    image = Lut(off, slo).layout(1)
    words = image.view(np.uint32).tolist()
    assert words == [((int(o) & 0xFFFF) << 16) | (int(s) & 0xFFFF) for o, s in zip(off, slo)]
    pairs8 = Lut(np.array([3, -4], np.int8), np.array([-1, 2], np.int8)).layout(1)
    assert pairs8.dtype.itemsize == 2
    assert pairs8.view(np.uint16).tolist() == [(3 << 8) | 0xFF, (0xFC << 8) | 2]


def test_float_linear_entries_are_32_bit_with_bfloat16_slopes_in_the_high_bits():
    off = np.array([0.25, -3.0], np.float32)
    slo = np.array([1.5, -0.0078125], ml_dtypes.bfloat16)
    image = Lut(off, slo).layout(1)
    words = image.view(np.uint64)
    slope_bits = (words & 0xFFFFFFFF).astype(np.uint32)
    assert (slope_bits & 0xFFFF).tolist() == [0, 0]
    assert (slope_bits >> 16).astype(np.uint16).tolist() == slo.view(np.uint16).tolist()
    assert (words >> 32).astype(np.uint32).tolist() == off.view(np.uint32).tolist()


def test_linear_int16_pairs_interleave_four_entries_per_128_bit_bank():
    off = np.arange(100, 106, dtype=np.int16)
    slo = np.arange(-6, 0, dtype=np.int16)
    image = Lut(off, slo).layout(2, 128)
    assert image["offset"].tolist() == _reference_interleave(off.tolist(), 4)
    assert image["slope"].tolist() == _reference_interleave(slo.tolist(), 4)


@settings(max_examples=150, deadline=None)
@given(st.data())
@pytest.mark.slow
def test_layout_round_trips(data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    n = data.draw(st.integers(1, 70))
    if data.draw(st.booleans()):
        oname, sname = data.draw(st.sampled_from(LINEAR_PAIRS))
        t = Lut(_values(rng, oname, n), _values(rng, sname, n))
        name = oname
    else:
        name = data.draw(st.sampled_from(DIRECT_DTYPES))
        sname = None
        t = Lut(_values(rng, name, n))
    bits = t.storage_dtype().itemsize * 8
    bank_bits = bits * data.draw(st.sampled_from([1, 2, 4, 8]))
    parallel = data.draw(st.sampled_from([1, 2, 4]))
    image = t.layout(parallel, bank_bits)
    back = Lut.from_layout(image, n, offset_dtype=_dt(name),
                           slope_dtype=None if sname is None else _dt(sname),
                           parallel=parallel, bank_bits=bank_bits)
    assert back == t
    first = image[0] if parallel == 4 else image
    if parallel > 1:
        stored = first if sname is None else first["offset"]
        expect = _reference_interleave(t.layout(1).tolist() if sname is None
                                       else t.layout(1)["offset"].tolist(), bank_bits // bits)
        assert stored.tolist() == expect


@pytest.mark.parametrize("make, kwargs, words", [
    (lambda t: t.layout(1).astype(np.int32), {"offset_dtype": "int16"},
     ["dtype int32", "int16"]),
    (lambda t: t.layout(1)[:3], {"offset_dtype": "int16"}, ["3 entries", "size is 4"]),
    (lambda t: t.layout(2), {"offset_dtype": "int16", "parallel": 2, "bank_bits": 32},
     ["16 entries", "take 8"]),
    (lambda t: np.concatenate([t.layout(2)[:-1], [7]]).astype(np.int16),
     {"offset_dtype": "int16", "parallel": 2}, ["copies of bank block 0 differ"]),
    (lambda t: t.layout(2), {"offset_dtype": "int16", "parallel": 4}, ["pair (ab, cd)"]),
    (lambda t: (t.layout(2), t.layout(2) + 1), {"offset_dtype": "int16", "parallel": 4},
     ["identical", "differ"]),
    (lambda t: t.layout(1), {"offset_dtype": "int16", "parallel": 3}, ["parallel", "3"]),
    (lambda t: t.layout(2), {"offset_dtype": "int16", "parallel": 2, "bank_bits": 24},
     ["bank_bits=24", "16-bit"]),
    (lambda t: t.layout(1), {"offset_dtype": "int8"}, ["offsets[0]", "300", "fit int8"]),
])
def test_from_layout_rejects_malformed_images(make, kwargs, words):
    t = Lut(np.array([300, -2, 3, 4], np.int16))
    with pytest.raises(LutError) as err:
        Lut.from_layout(make(t), 4, **kwargs)
    for word in words:
        assert word in str(err.value)


def test_from_layout_enforces_the_zero_low_mantissa_rule_for_bfloat16_slopes():
    slopes = np.array([1.0, 1.0 + 2**-20], np.float32)      # the second has low bits set
    image = Lut(np.array([0.5, 2.5], np.float32), slopes).layout(1)
    with pytest.raises(LutError) as err:
        Lut.from_layout(image, 2, offset_dtype="float32", slope_dtype="bfloat16")
    assert "slopes[1]" in str(err.value) and "low 16 mantissa bits" in str(err.value)
    back = Lut.from_layout(image, 2, offset_dtype="float32", slope_dtype="float32")
    assert back.slopes.tolist() == slopes.tolist()


def test_layout_rejects_bad_parameters():
    t = Lut(np.arange(1, 5, dtype=np.int32))
    with pytest.raises(LutError, match="parallel must be one of"):
        t.layout(3)
    with pytest.raises(LutError, match="bank_bits=48 must be a positive multiple of the 32-bit"):
        t.layout(2, 48)
    with pytest.raises(LutError, match="both be floats"):
        Lut(np.ones(2, np.float32), np.ones(2, np.int32)).layout(1)
