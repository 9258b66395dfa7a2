"""``npukit.floats``: conversions to floats rounded once, from bits, against the exact
rational oracle of ``float_oracle`` (the C helpers: tests/test_c_dtypes.py)."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest
from float_oracle import rounded

from npukit.floats import BF16, to_float


def test_docstring_examples():
    result = doctest.testmod(importlib.import_module("npukit.floats"),
                             optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize("dst", ["bfloat16", "float16", "float32"])
def test_float64_rounds_once_like_the_oracle(dst):
    rng = np.random.default_rng(3)
    x = rng.normal(size=4000) * 10.0 ** rng.integers(-50, 45, 4000)
    x = np.concatenate([x, [0.0, -0.0, np.inf, -np.inf, 5e-324, -5e-324, 1e300, 2.0**-149,
                            2.0**-150, 3 * 2.0**-150, 1 + 2**-8 + 2**-40, 65520.0, 65519.99]])
    with np.errstate(over="ignore"):
        got = to_float(x, BF16 if dst == "bfloat16" else np.dtype(dst))
    want = rounded(x, dst)
    assert np.array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


@pytest.mark.parametrize("src", ["int64", "uint64"])
def test_64_bit_integers_round_once_to_bfloat16(src):
    """Rounded to odd into a float64 first: the sticky bit keeps the one rounding right
    past 2^53, where the float64 itself would round."""
    info = np.iinfo(src)
    rng = np.random.default_rng(4)
    x = rng.integers(info.min, info.max, 4000, dtype=src, endpoint=True)
    x = np.concatenate([x, np.array([info.min, info.max, 2**53 + 1, 2**62 + 2**54 + 1,
                                     2**62 + 2**54, 2**62 + 2**54 - 1], src)])
    assert np.array_equal(to_float(x, BF16).view(np.uint16),
                          rounded(x, "bfloat16").view(np.uint16))


def test_scalars_keep_their_shape_and_nan_is_quiet_with_its_sign():
    assert to_float(3.0, BF16).shape == () and float(to_float(3.0, BF16)) == 3.0
    nans = to_float(np.array([np.nan, -np.nan]), BF16).view(np.uint16)
    assert nans.tolist() == [0x7FC0, 0xFFC0]
