"""Operations that pick input values by constant index tables: ``Tile``, ``Slice`` with steps
other than 1 (negative too) and ``Trilu``. Each table is one nearest ``resize_planes`` layer,
whose kernel copies ``In[Ys[2 r] * W + Xs[2 c]]`` to ``Out[r][c]`` of every plane (any
element type): an axis viewed as the rows of [outer, D, inner] planes, the chosen rows in
``Ys``; a Trilu reads every matrix as one row with a zero column after each of its rows, the
zeroed elements reading a zero (so inf and NaN are zeroed too, as ONNX says)."""

from __future__ import annotations

import numpy as np

from ...errors import ModelError
from ...tiler import layer_generators_indexed as GI
from ..reader import Node, TInfo
from .context import Lowering
from .shape import pad_axes


def pick(ctx: Lowering, src: str, out: str, planes: int, h: int, w: int, rows, cols,
         nodes: list[Node], ops: str, detail: str) -> None:
    """One layer: ``out[p][r][c] = src[p][rows[r]][cols[c]]`` over ``planes`` [h, w]
    planes."""
    rows, cols = np.asarray(rows, np.int32), np.asarray(cols, np.int32)
    name = ctx.layer(ops)
    GI.resize_planes(ctx.m, name, dt=ctx.dtype(src), Planes=planes, Width=w, Height=h,
                    Wo=cols.size, Ho=rows.size, linear=False)
    hint = f"{nodes[0].name if nodes else out}_{ops}"
    tables = [ctx.const(np.repeat(rows, 2), f"{hint}_rows"),
              ctx.const(np.zeros(rows.size, np.float32), f"{hint}_fy"),
              ctx.const(np.repeat(cols, 2), f"{hint}_cols"),
              ctx.const(np.zeros(cols.size, np.float32), f"{hint}_fx")]
    ctx.add(name, ops, nodes, detail, [ctx.tensor(src), *tables], [ctx.output(out)])


def pick_axes(ctx: Lowering, n: Node, x: str, out: str, chosen: list[tuple[int, list[int]]],
              ops: str) -> None:
    """``x`` to ``out`` keeping, along each axis of ``chosen``, the listed indices (in that
    order, repeats allowed): one layer per axis."""
    shape, dt = list(ctx.shape(x)), ctx.dtype(x)
    cur = x
    for k, (ax, idx) in enumerate(chosen):
        last = k == len(chosen) - 1
        outer, d, inner = int(np.prod(shape[:ax])), shape[ax], int(np.prod(shape[ax + 1:]))
        shape[ax] = len(idx)
        t = out if last else f"{out}__{ops.lower()}{ax}"
        if not last:
            ctx.net.info[t] = TInfo(tuple(shape), dt)
        shown = idx if len(idx) <= 8 else [*idx[:3], "...", *idx[-2:]]
        pick(ctx, cur, t, outer, d, inner, idx, range(inner), [n] if last else [], ops,
             f"axis {ax}: indices {shown} of {d}")
        cur = t


def tile(ctx: Lowering, n: Node) -> None:
    x, out = n.inputs[0], n.outputs[0]
    s = ctx.shape(x)
    reps = ctx.const_input(n, 1, "repeats")
    reps = [] if reps is None else [int(r) for r in reps]
    if len(reps) != len(s) or min(reps, default=1) < 1:
        raise ModelError(f"{n.where()}: repeats {reps} for a rank-{len(s)} input (npukit "
                         f"takes one positive count per axis)")
    chosen = [(a, list(range(s[a])) * r) for a, r in enumerate(reps) if r > 1]
    if not chosen:
        return pad_axes(ctx, n, x, out, [])
    pick_axes(ctx, n, x, out, chosen, "Tile")


def steps_slice(ctx: Lowering, n: Node, x: str, out: str,
                axes: list[tuple[int, int, int, int]]) -> None:
    """Slice along (axis, start, end, step) with ONNX's clamping (a negative step counts
    down from ``start``): the crops of step 1 first, then one layer per other step."""
    s = list(ctx.shape(x))
    crops, chosen = [], []
    for a, b, e, step in axes:
        d = s[a]
        lo, hi = (0, d) if step > 0 else (-1, d - 1)
        b = min(max(b + d if b < 0 else b, lo), hi)
        e = min(max(e + d if e < 0 else e, lo), hi)
        idx = list(range(b, e, step))
        if not idx:
            raise ModelError(f"{n.where()}: starts {b}, ends {e}, step {step} on axis {a} of "
                             f"size {d} leave nothing")
        if step == 1:
            crops.append((a, -b, e - d))
        else:
            chosen.append((a, idx))
    if not chosen:
        return pad_axes(ctx, n, x, out, [c for c in crops if c[1] or c[2]], label="Slice")
    cur = x
    if any(c[1] or c[2] for c in crops):
        cur = f"{out}__cropped"
        shape = list(s)
        for a, b, e in crops:
            shape[a] += b + e
        ctx.net.info[cur] = TInfo(tuple(shape), ctx.dtype(x))
        pad_axes(ctx, Node("Slice", n.name, [x], [cur], {}), x, cur,
                 [c for c in crops if c[1] or c[2]], label="Slice")
    pick_axes(ctx, n, cur, out, chosen, "Slice")


def trilu(ctx: Lowering, n: Node) -> None:
    """Trilu: the last two axes [h, w] of each matrix, with ``k`` (a constant) and ``upper``.
    A zero column joins each row (a ``pad_axis`` layer), then each matrix, read as one row
    of h (w + 1) values, picks its kept values and the zero for the others."""
    x, out = n.inputs[0], n.outputs[0]
    s = ctx.shape(x)
    if len(s) < 2:
        raise ModelError(f"{n.where()}: a rank-{len(s)} input; Trilu takes matrices")
    kv = ctx.const_input(n, 1, "k")
    k = 0 if kv is None else int(kv[0])
    h, w = s[-2], s[-1]
    r, c = np.indices((h, w))
    keep = c - r >= k if n.attrs.get("upper", 1) else c - r <= k
    if keep.all():
        return pad_axes(ctx, n, x, out, [])
    padded = f"{out}__zero_column"
    ctx.net.info[padded] = TInfo((*s[:-1], w + 1), ctx.dtype(x))
    pad_axes(ctx, Node("Pad", n.name, [x], [padded], {}), x, padded,
             [(len(s) - 1, 0, 1)], label="Trilu (zero column)")
    cols = np.where(keep, r * (w + 1) + c, r * (w + 1) + w).reshape(-1)
    planes = int(np.prod(s[:-2]))
    pick(ctx, padded, out, planes, 1, h * (w + 1), [0], cols, [n], "Trilu",
         f"{planes} x [{h}, {w}], {'upper' if n.attrs.get('upper', 1) else 'lower'}, k={k}")
