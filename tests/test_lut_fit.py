"""The per-segment minimax fit and the directed bfloat16 rounding used to quantise slopes."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npukit.lut.fit import bf16_ceil, bf16_floor, midrange, minimax_slope


def _spread(t, y, b):
    r = [yi - b * ti for ti, yi in zip(t, y)]
    return max(r) - min(r)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(3, 40))
def test_minimax_slope_minimises_the_spread(seed, n):
    # Scalar check: no slope on a fine scan around the answer does better, and the answer
    # is within the scan's resolution of the best scanned slope.
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(-2, 3, (2, n)), axis=1)
    y = rng.normal(size=(2, n)) + np.sin(3 * t)
    b = minimax_slope(t, y)
    for row in range(2):
        best = _spread(t[row], y[row], float(b[row]))
        for db in np.linspace(-1, 1, 401):
            assert best <= _spread(t[row], y[row], float(b[row]) + db) + 1e-9


def test_minimax_line_equioscillates_on_a_convex_segment():
    t = np.linspace(0.0, 1.0, 1001)[None, :]
    y = np.exp(t)
    b = minimax_slope(t, y)
    a = midrange(y - b[:, None] * t)
    err = y - (a[:, None] + b[:, None] * t)
    # chord slope e - 1; error +E at both ends and -E inside, E = half the max deviation
    assert abs(b[0] - (np.e - 1)) < 1e-9
    assert abs(err[0, 0] - err[0, -1]) < 1e-9 and abs(err[0, 0] + err.min()) < 1e-6


def test_single_point_and_flat_segments_fit_a_zero_slope():
    t = np.array([[2.0, 2.0, 2.0], [0.0, 1.0, 2.0]])
    y = np.array([[5.0, 5.0, 5.0], [1.0, 1.0, 1.0]])
    assert minimax_slope(t, y).tolist() == [0.0, 0.0]


def test_bf16_floor_and_ceil_bracket_every_value():
    every = np.arange(0, 0x10000, dtype=np.uint32).astype(np.uint16).view(ml_dtypes.bfloat16)
    finite = every[np.isfinite(every.astype(np.float32))].astype(np.float64)
    values = np.unique(finite)
    rng = np.random.default_rng(3)
    picks = rng.integers(0, values.size - 1, 2000)
    mid = values[picks] + (values[picks + 1] - values[picks]) * rng.uniform(0, 1, 2000)
    lo, hi = bf16_floor(mid).astype(np.float64), bf16_ceil(mid).astype(np.float64)
    inside = (mid > values[picks]) & (mid < values[picks + 1])
    assert np.all(lo[inside] == values[picks][inside])
    assert np.all(hi[inside] == values[picks + 1][inside])
    assert np.all(bf16_floor(values).astype(np.float64) == values)
    assert np.all(bf16_ceil(values).astype(np.float64) == values)
