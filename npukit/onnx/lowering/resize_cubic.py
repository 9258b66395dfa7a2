"""Resize in ``cubic`` mode (float32): separable, as ONNX Runtime computes it (each output row
first along x from four input rows, then along y). Each axis is a constant [in, out] matrix
whose column ``o`` holds the four cubic weights of output ``o`` at their (clamped) input
indices: the columns by a ``matmul`` layer, the rows by one between two ``transpose`` layers.
The weights are ONNX Runtime's (``cubic_coeff_a``; ``exclude_outside``: the weights of
indices outside the axis are 0 and the others divided by their sum), from the source
coordinates of ``resize.source_coords``; an axis left as it is takes no layer. A matrix
product adds every input of the axis, the zero-weighted ones too: an inf or NaN anywhere in a
row spreads to the whole output row (ONNX Runtime reads only the four)."""

from __future__ import annotations

import numpy as np

from ..reader import Node, TInfo
from .context import Lowering
from .linear import float_matmul
from .shape import permute

F = np.float32


def cubic_weights(t: np.ndarray, a: np.float32) -> np.ndarray:
    """ONNX Runtime's ``GetCubicCoeffs``: the weights of the inputs at offsets -1, 0, 1, 2
    from ``floor(x)``, for the fractions ``t = x - floor(x)`` (float32)."""
    s1, s2 = t + F(1), F(1) - t
    s3 = F(2) - t
    return np.stack([((a * s1 - F(5) * a) * s1 + F(8) * a) * s1 - F(4) * a,
                     ((a + F(2)) * t - (a + F(3))) * t * t + F(1),
                     ((a + F(2)) * s2 - (a + F(3))) * s2 * s2 + F(1),
                     ((a * s3 - F(5) * a) * s3 + F(8) * a) * s3 - F(4) * a], 1).astype(F)


def cubic_matrix(x: np.ndarray, in_len: int, a: float, exclude: bool) -> np.ndarray:
    """[in_len, len(x)]: column o the weights of output o at source coordinate ``x[o]``."""
    fl = np.floor(x)
    w = cubic_weights((x - fl).astype(F), F(a))
    idx = fl.astype(np.int64)[:, None] + np.arange(-1, 3)[None, :]
    if exclude:
        w = np.where((idx >= 0) & (idx < in_len), w, F(0))
        w = (w / w.sum(1, keepdims=True, dtype=F)).astype(F)
    m = np.zeros((in_len, x.size), F)
    for j in range(4):
        np.add.at(m, (np.clip(idx[:, j], 0, in_len - 1), np.arange(x.size)), w[:, j])
    return m


def cubic(ctx: Lowering, n: Node, xs: np.ndarray, ys: np.ndarray) -> None:
    """``n``'s input resized along its last two axes, ``xs`` and ``ys`` the source
    coordinates of the output columns and rows."""
    x, out = n.inputs[0], n.outputs[0]
    s = ctx.shape(x)
    a, exclude = float(n.attrs.get("cubic_coeff_a", -0.75)), bool(n.attrs.get("exclude_outside", 0))
    mx, my = (cubic_matrix(c, size, a, exclude) for c, size in ((xs, s[-1]), (ys, s[-2])))
    keep_x = mx.shape == (s[-1], s[-1]) and (mx == np.eye(s[-1], dtype=F)).all()
    keep_y = my.shape == (s[-2], s[-2]) and (my == np.eye(s[-2], dtype=F)).all()
    cur = x
    if not keep_x:
        cur = out if keep_y else f"{out}__columns"
        _product(ctx, n, x, mx, cur, (*s[:-1], xs.size), "columns")
    if not keep_y:
        rank, w = len(s), xs.size
        swap = list(range(rank - 2)) + [rank - 1, rank - 2]
        t = f"{out}__rows_last"
        ctx.net.info[t] = TInfo((*s[:-2], w, s[-2]), ctx.dtype(x))
        permute(ctx, Node("Transpose", n.name, [cur], [t], {}), ctx.shape(cur), swap,
                "Resize (rows last)", out=t)
        r = f"{out}__rows"
        _product(ctx, n, t, my, r, (*s[:-2], w, ys.size), "rows")
        permute(ctx, Node("Transpose", n.name, [r], [out], {}), ctx.shape(r), swap,
                "Resize (rows back)", out=out)
    if keep_x and keep_y:
        permute(ctx, Node("Identity", n.name, [x], [out], {}), s, list(range(len(s))), "")


def _product(ctx: Lowering, n: Node, a: str, m: np.ndarray, out: str, shape, what: str):
    if out not in ctx.net.info:
        ctx.net.info[out] = TInfo(tuple(shape), np.dtype(F))
    b = f"{n.name}__cubic_{what}"
    ctx.net.consts[b] = m
    float_matmul(ctx, Node("Resize", f"{n.name}_{what}", [a, b], [out], {}), a, b, None,
                 1.0, 1.0)
