"""``npukit.dtypes``: the one table of element-type facts, checked against the C compiler
(sizes and signedness of both C spellings) and against numpy and the formulas of
two's-complement ranges; ``npukit.arith.wrap32`` against Python's integer arithmetic."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npukit.arith import wrap32
from npukit.c import toolchain
from npukit.c.ctype import TYPEDEFS
from npukit.dtypes import FACTS, dtype, int_range, is_float

FLOATS = {"float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2"}
NOT_FLOATS = {"int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "bool",
              "complex64", "complex128"}


@pytest.fixture(scope="module")
def c_facts():
    """{(name, spelling): (sizeof, 1 if (T)-1 < 0)} as gcc sees each C type of the table."""
    rows = [(f.name, spelling, t) for f in FACTS.values()
            for spelling, t in (("c", f.c_type), ("gap", f.gap_c_type)) if t is not None]
    body = "\n".join(f"    out[{2 * k}] = sizeof({t}); out[{2 * k + 1}] = "
                     f"{'(' + t + ')-1 < 0' if 'Complex' not in t else '0'};"
                     for k, (_, _, t) in enumerate(rows))
    src = "\n".join(["#include <stdint.h>", *TYPEDEFS.values(),
                     f"void facts(int64_t *out)\n{{\n{body}\n}}\n"])
    fn = ctypes.CDLL(str(toolchain.build(src))).facts
    fn.argtypes = [ctypes.c_void_p]
    out = np.full(2 * len(rows), -7, np.int64)
    fn(out.ctypes.data)
    return {(name, spelling): (int(out[2 * k]), int(out[2 * k + 1]))
            for k, (name, spelling, _) in enumerate(rows)}


def test_every_c_type_has_the_size_and_signedness_numpy_gives(c_facts):
    assert len(c_facts) == len(FACTS) + 13  # GAP and the layer kernels spell 13 types
    for (name, _), (size, signed) in c_facts.items():
        dt = dtype(name)
        assert size == dt.itemsize == FACTS[name].itemsize, name
        if dt.kind in "iu":
            assert signed == (dt.kind == "i"), name


def test_float_ness_counts_bfloat16_float16_and_float8():
    assert all(is_float(n) and is_float(dtype(n)) for n in FLOATS)
    assert not any(is_float(n) for n in NOT_FLOATS)
    assert {n for n, f in FACTS.items() if f.is_float} == FLOATS & set(FACTS)


def test_ranges_are_twos_complement():
    for name, f in FACTS.items():
        dt = dtype(name)
        if dt.kind == "i":
            bits = 8 * dt.itemsize
            assert f.range == int_range(name) == (-2**(bits - 1), 2**(bits - 1) - 1)
        elif dt.kind == "u":
            assert f.range == int_range(dt) == (0, 2**(8 * dt.itemsize) - 1)
        else:
            assert f.range is None, name


@given(st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=8))
def test_wrap32_is_the_value_modulo_2_32(values):
    want = [(v + 2**31) % 2**32 - 2**31 for v in values]
    got = wrap32(np.array(values, np.int64))
    assert got.dtype == np.int32 and got.tolist() == want
    scalar = wrap32(values[0])  # a Python int, as the GAP kernels' references pass one
    assert isinstance(scalar, np.int32) and int(scalar) == want[0]
    assert int(wrap32(np.int64(values[0]))) == want[0]
