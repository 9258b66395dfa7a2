"""The numpy references of a tile of convolution features (``layer_conv(planes=True)``) and
of the one-plane convolution over a tile of planes (``parallel.planes``: a depthwise
convolution) at array speed: every feature at once, never element by element.

Integers: each accumulator is ``Acc + sum((In - Zin) * (Filter - Zw))`` over the input
features and taps, wrapped to int32; the sum is one matrix product over (input feature,
tap) of an im2col matrix whose taps on padding are 0. It runs in float64 (BLAS) when every
partial sum is an integer below 2**53, so float64 holds it exactly; else in int64.
Float32: each accumulator adds ``In * Filter`` input feature by input feature, tap by tap
in (fy, fx) order, rounding to float32 after each product and each sum (as the C does):
the loop runs over (input feature, tap), every output feature and pixel in one operation.
"""

from __future__ import annotations

import numpy as np

from ...arith import wrap32
from .common import tap_range

EXACT = 1 << 53  # float64 holds every integer below this exactly
# The one-plane convolution's pointers from one plane to the next (``parallel.planes``)
PLANE_STRIDES = (("In", ("InRows", "W")), ("Filter", ("Fy", "Fx")), ("Acc", ("OutRows", "Wo")))


def _taps(W, Wo, InRow0, InRows, Hreal, PadT, OutRow0, OutRows, Fx, Fy, Sx, Sy, Dx, Dy, PadL):
    """For each tap (fy, fx) that adds anything: (fy, fx, the output rows and columns it adds
    to as slices, the input lines and columns it reads as index arrays)."""
    ys = np.arange(OutRows)
    out = []
    for fy in range(Fy):
        p = (OutRow0 + ys) * Sy + fy * Dy
        lines = p - InRow0
        ok = (p - PadT >= 0) & (p - PadT < Hreal) & (lines >= 0) & (lines < InRows)
        if not ok.any():
            continue
        rows = ys[ok]  # p grows with y: the rows that add form one run
        for fx in range(Fx):
            x0, x1 = tap_range(W, Wo, Sx, fx * Dx - PadL)
            if x0 >= x1:
                continue
            cols = np.arange(x0, x1) * Sx + fx * Dx - PadL
            out.append((fy, fx, slice(int(rows[0]), int(rows[-1]) + 1), slice(x0, x1),
                        lines[ok], cols))
    return out


def feature_tile(flt: bool, In, W, InRow0, InRows, Hreal, PadT, InFeat, Filter, Acc, Wo,
                 OutRow0, OutRows, OutFeat, Fx, Fy, Sx, Sy, Dx, Dy, PadL, Zin, Zw) -> None:
    """``Acc`` (``OutFeat`` planes of ``OutRows`` x ``Wo``) plus the tile's convolution, in
    place (see the module docstring)."""
    if OutRows <= 0 or OutFeat <= 0:
        return
    tile = OutRows * Wo
    acc = Acc[:OutFeat * tile].reshape(OutFeat, OutRows, Wo)
    x = In[:InFeat * InRows * W].reshape(InFeat, InRows, W)
    f = Filter[:OutFeat * InFeat * Fy * Fx].reshape(OutFeat, InFeat, Fy, Fx)
    taps = _taps(W, Wo, InRow0, InRows, Hreal, PadT, OutRow0, OutRows, Fx, Fy, Sx, Sy, Dx, Dy,
                 PadL)
    if flt:
        work = acc.copy()
        for i in range(InFeat):
            for fy, fx, rs, cs, lines, cols in taps:
                win = x[i][lines[:, None], cols[None, :]]
                work[:, rs, cs] += win[None] * f[:, i, fy, fx][:, None, None]
        acc[...] = work
        return
    xi = x.astype(np.int64) - Zin
    fi = f.astype(np.int64) - Zw
    bound = int(np.abs(xi).max(initial=0)) * int(np.abs(fi).max(initial=0)) * InFeat * len(taps)
    kind = np.float64 if bound < EXACT else np.int64
    cols_mat = np.zeros((InFeat, len(taps), OutRows, Wo), kind)
    for k, (_, _, rs, cs, lines, cols) in enumerate(taps):
        cols_mat[:, k, rs, cs] = xi[:, lines[:, None], cols[None, :]]
    fk = np.stack([fi[:, :, fy, fx] for fy, fx, *_ in taps], axis=2) if taps else \
        np.zeros((OutFeat, InFeat, 0), np.int64)
    sums = fk.reshape(OutFeat, -1).astype(kind) @ cols_mat.reshape(-1, tile)
    acc[...] = wrap32(acc.astype(np.int64) + sums.astype(np.int64).reshape(acc.shape))


def planes(flt: bool, In, W, InRow0, InRows, Hreal, PadT, Filter, Acc, Wo, OutRow0, OutRows,
           Fx, Fy, Sx, Sy, Dx, Dy, PadL, Zin, Zw, Feat) -> None:
    """The one-plane convolution of each of ``Feat`` planes with its own filter, every plane
    at once, tap by tap in (fy, fx) order (float32: each accumulator's sums in the one-plane
    kernel's order; integers in int64, wrapped to int32)."""
    if OutRows <= 0 or Feat <= 0:
        return
    acc = Acc[:Feat * OutRows * Wo].reshape(Feat, OutRows, Wo)
    x = In[:Feat * InRows * W].reshape(Feat, InRows, W)
    f = Filter[:Feat * Fy * Fx].reshape(Feat, Fy, Fx)
    work = acc.copy() if flt else acc.astype(np.int64)
    if not flt:
        x, f = x.astype(np.int64) - Zin, f.astype(np.int64) - Zw
    for fy, fx, rs, cs, lines, cols in _taps(W, Wo, InRow0, InRows, Hreal, PadT, OutRow0,
                                             OutRows, Fx, Fy, Sx, Sy, Dx, Dy, PadL):
        work[:, rs, cs] += x[:, lines[:, None], cols[None, :]] * f[:, fy, fx][:, None, None]
    acc[...] = work if flt else wrap32(work)
