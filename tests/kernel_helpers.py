"""Shared oracles and harness for the seed-000 kernels: an independent numpy reading of the
seed's formulas, and a runner that places the output in a canary-filled larger buffer."""

from __future__ import annotations

import numpy as np

import npukit as nk

CANARY = {np.dtype("int8"): 0x5A, np.dtype("int16"): 0x5A5A, np.dtype("float32"): 1234.5}


def rescale_ref(a, b, bias, scale, shift, lo, hi, zero_point=0):
    """clamp(round_half_up(((a*b + bias) * scale) / 2**shift) + zp, lo, hi) with Python-int
    semantics (floor division), independent of npukit's shift-based spelling."""
    t = (a.astype(np.int64) * b.astype(np.int64) + bias) * scale
    if shift:
        t = np.floor_divide(t + 2 ** (shift - 1), 2 ** shift)
    return np.clip(t + zero_point, lo, hi)


def canary_output(shape, dtype, rng, pad=3, stride_gap=(0, 2)):
    """A strided sub-view of a larger canary-filled buffer: returns (big, view, spec).
    Every dim but the last gets a random gap; the view starts ``pad`` elements in."""
    dt = np.dtype(dtype)
    strides, acc = [], 1
    for k, n in enumerate(reversed(shape)):
        strides.append(acc)
        acc = acc * n + (int(rng.integers(*stride_gap)) if k < len(shape) - 1 or True else 0)
    strides = tuple(reversed(strides))
    strides = strides[:-1] + (1,)  # innermost stays dense: the kernels need it
    span = pad + sum((n - 1) * s for n, s in zip(shape, strides)) + 1
    big = np.full(span + pad, CANARY[dt], dt)
    byte_strides = tuple(s * dt.itemsize for s in strides)
    view = np.lib.stride_tricks.as_strided(big[pad:], shape, byte_strides)
    return big, view, nk.spec(shape, dt, strides)


def outside_untouched(big, view) -> bool:
    """True when every element of ``big`` outside ``view`` still holds the canary."""
    mask = np.ones(big.shape, bool)
    idx = np.arange(big.size).reshape(big.shape)
    inside = np.lib.stride_tricks.as_strided(idx[(view.__array_interface__["data"][0]
                                                  - big.__array_interface__["data"][0])
                                                 // big.itemsize:],
                                             view.shape, tuple(s // view.itemsize * idx.itemsize
                                                               for s in view.strides))
    mask[inside.reshape(-1)] = False
    return bool((big[mask] == CANARY[big.dtype]).all())
