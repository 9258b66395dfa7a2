"""Per-segment best uniform (minimax) fits, vectorised over segments, and the directed
rounding to bfloat16 that quantising a fitted slope needs.

Each row of ``t``/``y`` holds the sample points of one segment (repeated points are
harmless). ``linear_approx`` stores an independent (offset, slope) pair per segment, so
every segment is fitted on its own.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import ml_dtypes

_GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0
_ITERATIONS = 60        # the bracket shrinks to 0.618**60 ~ 3e-13 of its width


def midrange(r: np.ndarray) -> np.ndarray:
    """``(max + min) / 2`` along the last axis: the best constant in the uniform norm.

    >>> midrange(np.array([[0.0, 1.0, 4.0]])).tolist()
    [2.0]
    """
    return 0.5 * (r.max(axis=-1) + r.min(axis=-1))


def minimax_slope(t: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per row, the slope ``b`` of the best uniform line ``a + b t`` through ``(t, y)``.

    The uniform error of the best line with slope ``b`` is half the spread
    ``max(y - b t) - min(y - b t)``, a convex function of ``b``; its minimum lies between the
    smallest and largest slope of neighbouring points, where a golden-section search finds
    it. For a convex or concave segment this is the chord's slope, whose line shifted by half
    the largest deviation equioscillates at three points (the classic solution).

    >>> t = np.linspace(0.0, 1.0, 101)[None, :]
    >>> round(float(minimax_slope(t, t**2)[0]), 9)
    1.0
    """
    dt, dy = np.diff(t, axis=-1), np.diff(y, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        local = np.where(dt > 0, dy / dt, np.nan)
    known = ~np.all(np.isnan(local), axis=-1)
    lo = np.where(known, np.nanmin(np.where(known[:, None], local, 0.0), axis=-1), 0.0)
    hi = np.where(known, np.nanmax(np.where(known[:, None], local, 0.0), axis=-1), 0.0)

    def spread(b: np.ndarray) -> np.ndarray:
        r = y - b[:, None] * t
        return r.max(axis=-1) - r.min(axis=-1)

    b1 = hi - _GOLDEN * (hi - lo)
    b2 = lo + _GOLDEN * (hi - lo)
    s1, s2 = spread(b1), spread(b2)
    for _ in range(_ITERATIONS):
        left = s1 <= s2                      # the minimum lies in [lo, b2]
        hi = np.where(left, b2, hi)
        lo = np.where(left, lo, b1)
        b_new = np.where(left, hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo))
        s_new = spread(b_new)
        b1, b2, s1, s2 = (np.where(left, b_new, b2), np.where(left, b1, b_new),
                          np.where(left, s_new, s2), np.where(left, s1, s_new))
    return 0.5 * (lo + hi)


def _ordinal(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns to integers that order like the values (both zeros are 0)."""
    b = bits.astype(np.int32)
    return np.where(b & 0x8000, -(b & 0x7FFF), b)


def _from_ordinal(k: np.ndarray) -> np.ndarray:
    bits = np.where(k >= 0, k, 0x8000 | -k).astype(np.uint16)
    return bits.view(ml_dtypes.bfloat16)


def bf16_floor(v) -> np.ndarray:
    """The largest bfloat16 value ``<= v`` (finite ``v`` within the bfloat16 range).

    >>> float(bf16_floor(1.0 + 2**-8)), float(bf16_floor(-1.0 - 2**-8))
    (1.0, -1.0078125)
    """
    v = np.asarray(v, dtype=np.float64)
    near = v.astype(ml_dtypes.bfloat16)
    k = _ordinal(near.view(np.uint16))
    return _from_ordinal(np.where(near.astype(np.float64) > v, k - 1, k))


def bf16_ceil(v) -> np.ndarray:
    """The smallest bfloat16 value ``>= v`` (finite ``v`` within the bfloat16 range).

    >>> float(bf16_ceil(1.0 + 2**-8))
    1.0078125
    """
    v = np.asarray(v, dtype=np.float64)
    near = v.astype(ml_dtypes.bfloat16)
    k = _ordinal(near.view(np.uint16))
    return _from_ordinal(np.where(near.astype(np.float64) < v, k + 1, k))
