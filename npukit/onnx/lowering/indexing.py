"""Slice (other steps: ``select``) and Split: crops along axes, one ``pad_axis`` layer with
negative pads per cropped axis; Gather: one ``fetch_rows`` layer (rows fetched from the
table's home), GatherElements and GatherND: one layer each."""

from __future__ import annotations

import numpy as np

from ...errors import ModelError
from ...tiler import layer_generators as G
from ...tiler import layer_generators_indexed as GI
from ..reader import Node
from .context import Lowering
from .select import steps_slice
from .shape import pad_axes, rotation


def _ints(ctx: Lowering, n: Node, k: int, what: str) -> list[int] | None:
    """Input ``k`` of ``n`` as constant integers; None when it is absent."""
    v = ctx.const_input(n, k, what)
    return None if v is None else [int(x) for x in v]


def _axes(n: Node, axes: list[int], rank: int) -> list[int]:
    bad = [a for a in axes if not -rank <= a < rank]
    if bad:
        raise ModelError(f"{n.where()}: axes {axes} for a rank-{rank} input")
    return [a % rank for a in axes]


def slice_(ctx: Lowering, n: Node) -> None:
    if rotation(ctx, n):  # a roll: the Slices and their Concat as one layer
        return
    x = n.inputs[0]
    s = ctx.shape(x)
    if "starts" in n.attrs:  # Slice-1: attributes
        starts, ends = list(n.attrs["starts"]), list(n.attrs["ends"])
        axes, steps = n.attrs.get("axes"), None
    else:
        starts, ends = _ints(ctx, n, 1, "starts"), _ints(ctx, n, 2, "ends")
        axes, steps = _ints(ctx, n, 3, "axes"), _ints(ctx, n, 4, "steps")
    axes = _axes(n, list(range(len(starts))) if axes is None else list(axes), len(s))
    if steps is not None and any(v != 1 for v in steps):
        return steps_slice(ctx, n, x, n.outputs[0], list(zip(axes, starts, ends, steps)))
    todo = []
    for a, b, e in zip(axes, starts, ends):
        d = s[a]
        b = min(max(b + d if b < 0 else b, 0), d)
        e = min(max(e + d if e < 0 else e, 0), d)
        if e <= b:
            raise ModelError(f"{n.where()}: starts {b}, ends {e} on axis {a} of size {d} "
                             f"leave nothing")
        if (b, e) != (0, d):
            todo.append((a, -b, e - d))
    pad_axes(ctx, n, x, n.outputs[0], todo, label="Slice")


def split(ctx: Lowering, n: Node) -> None:
    """Split: every output present, one ``split`` layer (``concat``'s converse: the input
    read once, one block copy per part); else a crop per output there is."""
    x = n.inputs[0]
    s = ctx.shape(x)
    axis = _axes(n, [int(n.attrs.get("axis", 0))], len(s))[0]
    outs = list(n.outputs)
    sizes = _ints(ctx, n, 1, "split") or n.attrs.get("split")
    if sizes is None:  # equal parts; opset 18's num_outputs: the last part smaller
        k = len(outs)
        part = -(-s[axis] // k)
        sizes = [min(part, s[axis] - i * part) for i in range(k)]
    if len(sizes) != len(outs) or sum(sizes) != s[axis] or min(sizes) <= 0:
        raise ModelError(f"{n.where()}: split {list(sizes)} of axis {axis} of size {s[axis]} "
                         f"into {len(outs)} outputs (npukit takes positive parts that sum to "
                         f"the axis)")
    if len(outs) > 1 and all(outs):
        name = ctx.layer("Split")
        G.split(ctx.m, name, dt=ctx.dtype(x), Outer=int(np.prod(s[:axis])), Ds=tuple(sizes),
                Inner=int(np.prod(s[axis + 1:])))
        ctx.add(name, "Split", [n], f"axis {axis} in {len(outs)} parts ({list(sizes)})",
                [ctx.tensor(x)], [ctx.output(o) for o in outs])
        return
    begin = 0
    for o, size in zip(outs, sizes):
        if o:
            part = Node("Split", n.name, [x], [o], {})
            pad_axes(ctx, part, x, o, [(axis, -begin, begin + size - s[axis])]
                     if size != s[axis] else [], label="Split")
        begin += size
    ctx.done.add(id(n))




def gather(ctx: Lowering, n: Node) -> None:
    """Gather: one ``fetch_rows`` layer, whatever the indices. The input read as [outer, D,
    inner] stays in its home memory (L2, L3 RAM or flash) and only the rows the indices name
    reach L1; constant indices are checked here (negative ones from the end) and become a
    graph constant, run-time ones are read as ONNX Runtime reads them."""
    x, idx, out = n.inputs[0], n.inputs[1], n.outputs[0]
    s = ctx.shape(x)
    axis = _axes(n, [int(n.attrs.get("axis", 0))], len(s))[0]
    d = s[axis]
    outer, inner = int(np.prod(s[:axis])), int(np.prod(s[axis + 1:]))
    if ctx.alias.get(idx, idx) in ctx.net.consts:
        values = _ints(ctx, n, 1, "indices")
        bad = [i for i in values if not -d <= i < d]
        if bad:
            raise ModelError(f"{n.where()}: indices {bad} outside axis {axis} of size {d}")
        ids = ctx.const(np.array([i % d for i in values], np.int32), f"{n.name}_indices")
        idt, what = np.dtype(np.int32), "constant"
    else:
        ids, idt, what = ctx.tensor(idx), ctx.dtype(idx), "run-time"
        if idt.name not in ("int32", "int64"):
            raise ModelError(f"{n.where()}: indices {idx!r} of type {idt}; ONNX's Gather "
                             f"takes int32 or int64")
    k = int(np.prod(ctx.shape(idx)))
    name = ctx.layer("Gather")
    GI.fetch_rows(ctx.m, name, dt=ctx.dtype(x), idx_dt=idt, Planes=outer, D=d, Inner=inner,
                  K=k)
    ctx.add(name, "Gather", [n], f"{k} {what} indices of axis {axis} (size {d}), rows "
            f"fetched from the table's home", [ctx.tensor(x), ids], [ctx.output(out)])


def gather_elements(ctx: Lowering, n: Node) -> None:
    """GatherElements: ``out[.., j, ..] = x[.., indices[.., j, ..], ..]`` along ``axis``, the
    indices' other dimensions those of ``x`` (one ``gather`` layer of elements)."""
    x, idx, out = n.inputs[0], n.inputs[1], n.outputs[0]
    s, q, idt = ctx.shape(x), ctx.shape(idx), ctx.dtype(idx)
    axis = _axes(n, [int(n.attrs.get("axis", 0))], len(s))[0]
    if idt.name not in ("int32", "int64"):
        raise ModelError(f"{n.where()}: indices {idx!r} of type {idt}; ONNX's GatherElements "
                         f"takes int32 or int64")
    if len(q) != len(s) or any(a != b for k, (a, b) in enumerate(zip(q, s)) if k != axis):
        raise ModelError(f"{n.where()}: indices of shape {q} for data {s} along axis {axis}; "
                         f"npukit takes indices of the data's size on the other axes")
    outer, inner = int(np.prod(s[:axis])), int(np.prod(s[axis + 1:]))
    name = ctx.layer("GatherElements")
    GI.gather_elements(ctx.m, name, dt=ctx.dtype(x), idx_dt=idt, Planes=outer, D=s[axis],
                       Inner=inner, K=q[axis])
    ctx.add(name, "GatherElements", [n], f"{q} indices into axis {axis} of {s}",
            [ctx.tensor(x), ctx.tensor(idx)], [ctx.output(out)])


def gather_nd(ctx: Lowering, n: Node) -> None:
    """GatherND (``batch_dims`` too): the data read as [batch, D, inner] tables with D the
    product of the R axes the last axis of ``indices`` addresses; one ``fetch_rows`` layer,
    the tables left in their home and only the rows named fetched."""
    x, idx, out = n.inputs[0], n.inputs[1], n.outputs[0]
    s, q, idt = ctx.shape(x), ctx.shape(idx), ctx.dtype(idx)
    b = int(n.attrs.get("batch_dims", 0))
    if idt != np.int64:
        raise ModelError(f"{n.where()}: indices {idx!r} of type {idt}; ONNX's GatherND takes "
                         f"int64")
    r = q[-1]
    if not 1 <= r <= len(s) - b or q[:b] != s[:b]:
        raise ModelError(f"{n.where()}: indices of shape {q} for data {s} with batch_dims={b}")
    planes, d = int(np.prod(s[:b])), int(np.prod(s[b:b + r]))
    inner, rows = int(np.prod(s[b + r:])), int(np.prod(q[b:-1]))
    dims = ctx.const(np.array(s[b:b + r], np.int32), f"{n.name}_dims")
    name = ctx.layer("GatherND")
    GI.fetch_rows(ctx.m, name, dt=ctx.dtype(x), idx_dt=idt, Planes=planes, D=d, Inner=inner,
                  K=rows, R=r)
    ctx.add(name, "GatherND", [n], f"{rows} rows at {r} coordinates of {s} "
            f"(batch_dims={b})", [ctx.tensor(x), ctx.tensor(idx), dims], [ctx.output(out)])
