"""Data movement: layout operations (names for the same bytes), Concat, Transpose,
DepthToSpace, SpaceToDepth, Pad, and Cast (refused: npukit keeps each tensor's type)."""

from __future__ import annotations

import numpy as np

from ...dtypes import int_range, is_float
from ...errors import ModelError
from ...tiler import layer_generators as G
from ...tiler.basic_kernels import movement
from ...tiler.basic_kernels.common import f32_bits
from ..reader import Node
from .context import Lowering

PAD_MODES = {"constant": movement.PAD_CONSTANT, "reflect": movement.PAD_REFLECT,
             "edge": movement.PAD_EDGE, "wrap": movement.PAD_WRAP}


def view(ctx: Lowering, n: Node) -> None:
    src = ctx.tensor(n.inputs[0])
    ctx.of[ctx.alias.get(n.outputs[0], n.outputs[0])] = src
    ctx.done.add(id(n))


def concat(ctx: Lowering, n: Node) -> None:
    ins = [t for t in n.inputs if t]
    out = n.outputs[0]
    s = ctx.info(out).shape
    axis = int(n.attrs.get("axis", 0 if ctx.net.opset < 4 else None))
    if not -len(s) <= axis < len(s):
        raise ModelError(f"{n.where()}: axis={axis} for rank {len(s)}")
    axis %= len(s)
    dts = {ctx.dtype(t) for t in ins}
    if len(dts) != 1:
        raise ModelError(f"{n.where()}: inputs of types {sorted(map(str, dts))}")
    outer, inner = int(np.prod(s[:axis])), int(np.prod(s[axis + 1:]))
    ds = tuple(ctx.shape(t)[axis] for t in ins)
    keep = [(t, d) for t, d in zip(ins, ds) if d > 0]
    name = ctx.layer("Concat")
    G.concat(ctx.m, name, dt=dts.pop(), Outer=outer, Ds=tuple(d for _, d in keep),
             Inner=inner)
    ctx.add(name, "Concat", [n], f"{len(keep)} inputs along axis {axis} ({list(ds)})",
            [ctx.tensor(t) for t, _ in keep], [ctx.output(out)])


def rotation(ctx: Lowering, n: Node) -> bool:
    """``torch.roll`` as the exporters write it: Slices of one tensor along one axis whose
    only reader, a Concat along that axis, puts them back in rotated order. Lowered from the
    first of those Slices as one ``pad_axis`` layer in wrap mode (``Out[i] = In[(i + s) mod
    D]``), not a crop per piece and a concat; False (nothing done) for any other Slice."""
    cat = ctx.only_reader(n.outputs[0])
    if cat is None or cat.op != "Concat":
        return False
    x, shape = n.inputs[0], ctx.shape(n.inputs[0])
    axis = int(cat.attrs.get("axis", 0)) % len(shape)
    by_out = {m.outputs[0]: m for m in ctx.consumers.get(x, []) if m.op == "Slice"}
    pieces = [_piece(ctx, by_out.get(t), axis, shape) for t in cat.inputs]
    if any(p is None for p in pieces) or any(ctx.only_reader(t) is not cat
                                             for t in cat.inputs):
        return False
    d, start = shape[axis], pieces[0][0]
    pos = start
    for b, e in pieces:  # each piece starts where the previous ended, past d at 0
        if b != pos % d:
            return False
        pos = e
    if sum(e - b for b, e in pieces) != d:
        return False
    name = ctx.layer("Roll")
    G.pad_axis(ctx.m, name, dt=ctx.dtype(x), Outer=int(np.prod(shape[:axis])), D=d,
               Inner=int(np.prod(shape[axis + 1:])), PadBegin=-start, PadEnd=start,
               Mode=movement.PAD_WRAP)
    ctx.add(name, "Slice+Concat", [by_out[t] for t in cat.inputs] + [cat],
            f"axis {axis} rotated by {start} (a roll)", [ctx.tensor(x)],
            [ctx.output(cat.outputs[0])])
    return True


def _piece(ctx: Lowering, m: Node | None, axis: int, shape) -> tuple[int, int] | None:
    """The [begin, end) a Slice ``m`` (constant inputs, one axis, steps 1) keeps of
    ``axis``, clamped as ONNX clamps; None for any other node."""
    ins = [ctx.alias.get(t, t) for t in m.inputs[1:5]] if m is not None else []
    if m is None or "starts" in m.attrs or len(ins) < 3 or any(
            t and t not in ctx.net.consts for t in ins):
        return None
    starts, ends, axes, *steps = (ctx.net.consts[t].reshape(-1) if t else None for t in ins)
    if axes is None or len(axes) != 1 or int(axes[0]) % len(shape) != axis or len(starts) != 1 or (
            steps and steps[0] is not None and any(v != 1 for v in steps[0])):
        return None
    d = shape[axis]
    b, e = (min(max(int(v) + d if v < 0 else int(v), 0), d) for v in (starts[0], ends[0]))
    return (b, e) if e > b else None


def transpose(ctx: Lowering, n: Node) -> None:
    x = n.inputs[0]
    s = ctx.shape(x)
    perm = list(n.attrs.get("perm", list(range(len(s)))[::-1]))
    if sorted(perm) != list(range(len(s))):
        raise ModelError(f"{n.where()}: perm={perm} is not a permutation of {len(s)} axes")
    permute(ctx, n, s, perm, "Transpose")


def permute(ctx: Lowering, n: Node, shape, perm: list[int], label: str,
            out: str | None = None) -> None:
    """``n``'s input, read as ``shape``, with its axes permuted by ``perm`` into ``out``
    (``n``'s output by default): one ``transpose`` layer per step of ``transpose_steps``, a
    view when there is none. The last layer stands for ``n`` unless ``out`` is given."""
    x, out = n.inputs[0], out or n.outputs[0]
    steps = transpose_steps(shape, perm)
    dt = ctx.dtype(x)
    cur = ctx.tensor(x)
    if not steps:
        return view(ctx, Node("Identity", n.name, [x], [out], {}))
    for k, (P, A, B, I) in enumerate(steps):  # noqa: E741
        last = k == len(steps) - 1
        name = ctx.layer("Transpose")
        G.transpose(ctx.m, name, dt=dt, Planes=P, A=A, B=B, I=I)
        dst = ctx.output(out) if last else ctx.local(f"{out}_step{k}", dt,
                                                     int(np.prod(shape)))
        ctx.add(name, label, [n] if last and out == n.outputs[0] else [],
                f"perm {perm}: [{P}, {A}, {B}, {I}] -> [{P}, {B}, {A}, {I}]", [cur], [dst])
        cur = dst


def depth_space(ctx: Lowering, n: Node) -> None:
    """DepthToSpace and SpaceToDepth (``mode`` DCR or CRD): the [N, C, H, W] input read as 6
    axes, permuted (ONNX's definitions)."""
    x = n.inputs[0]
    s = ctx.shape(x)
    b = int(n.attrs.get("blocksize", 0))
    if len(s) != 4 or b < 1:
        raise ModelError(f"{n.where()}: blocksize={b} for an input of shape {list(s)}; ONNX "
                         f"takes [N, C, H, W] and a blocksize of at least 1")
    N, C, H, W = s
    crd = n.attrs.get("mode", "DCR") == "CRD"
    if n.op == "SpaceToDepth":
        shape = (N, C, H // b, b, W // b, b)
        perm = [0, 1, 3, 5, 2, 4] if crd else [0, 3, 5, 1, 2, 4]
    elif not crd:
        shape, perm = (N, b, b, C // (b * b), H, W), [0, 3, 4, 1, 5, 2]
    else:
        shape, perm = (N, C // (b * b), b, b, H, W), [0, 1, 4, 2, 5, 3]
    permute(ctx, n, shape, perm, n.op)


def pad(ctx: Lowering, n: Node) -> None:
    x, out = n.inputs[0], n.outputs[0]
    s = ctx.shape(x)
    rank = len(s)
    if "pads" in n.attrs:  # Pad-2
        pads = list(n.attrs["pads"])
        value = float(n.attrs.get("value", 0.0))
        axes = list(range(rank))
    else:
        for t, what in zip(n.inputs[1:4], ("pads", "constant_value", "axes")):
            if t and t not in ctx.net.consts:
                raise ModelError(f"{n.where()}: {what} {t!r} must be a constant")
        pads = [int(v) for v in ctx.net.consts[n.inputs[1]].reshape(-1)]
        value = float(ctx.net.consts[n.inputs[2]].reshape(-1)[0]) \
            if len(n.inputs) > 2 and n.inputs[2] else 0.0
        if len(n.inputs) > 3 and n.inputs[3]:
            axes = [int(a) % rank for a in ctx.net.consts[n.inputs[3]].reshape(-1)]
        else:
            axes = list(range(rank))
    if len(pads) != 2 * len(axes):
        raise ModelError(f"{n.where()}: {len(pads)} pads for {len(axes)} axes")
    mode = n.attrs.get("mode", "constant")
    if mode not in PAD_MODES:
        raise ModelError(f"{n.where()}: mode={mode!r}; npukit pads with {list(PAD_MODES)}")
    dt = ctx.dtype(x)
    if is_float(dt):
        fill = f32_bits(value)
    else:
        fill = int(n.attrs.get("qvalue", round(value)))
        lo_, hi_ = int_range(dt)
        if not lo_ <= fill <= hi_ or float(fill) != value and "qvalue" not in n.attrs:
            raise ModelError(f"{n.where()}: constant value {value} for {dt} data")
    todo = [(ax, pads[i], pads[i + len(axes)]) for i, ax in enumerate(axes)
            if pads[i] or pads[i + len(axes)]]
    pad_axes(ctx, n, x, out, todo, mode, fill, value)


def pad_axes(ctx: Lowering, n: Node, x: str, out: str, todo: list[tuple[int, int, int]],
             mode: str = "constant", fill: int = 0, value: float = 0.0,
             label: str = "Pad") -> None:
    """One ``pad_axis`` layer per (axis, pad before, pad after) of ``todo`` (negative pads
    crop), from ``x`` to ``out``; a view when there is none."""
    dt = ctx.dtype(x)
    cur, shape = ctx.tensor(x), list(ctx.shape(x))
    if not todo:
        return view(ctx, Node("Identity", n.name, [x], [out], {}))
    for k, (ax, b, e) in enumerate(todo):
        if mode == "reflect" and (b >= shape[ax] or e >= shape[ax]):
            raise ModelError(f"{n.where()}: reflect pads {b}, {e} on axis {ax} of size "
                             f"{shape[ax]} (ONNX: each must be smaller than the size)")
        if mode in ("reflect", "edge", "wrap") and (b < 0 or e < 0):
            raise ModelError(f"{n.where()}: negative pads with mode={mode!r}")
        outer, inner = int(np.prod(shape[:ax])), int(np.prod(shape[ax + 1:]))
        d = shape[ax]
        shape[ax] = d + b + e
        last = k == len(todo) - 1
        name = ctx.layer(label)
        G.pad_axis(ctx.m, name, dt=dt, Outer=outer, D=d, Inner=inner, PadBegin=b,
                   PadEnd=e, Mode=PAD_MODES[mode], Value=fill)
        dst = ctx.output(out) if last else ctx.local(f"{out}_axis{ax}", dt,
                                                     int(np.prod(shape)))
        what = f"{mode}" + (f" {value:g}" if mode == "constant" else "") if label == "Pad" \
            else "cropped"
        ctx.add(name, label, [n] if last else [], f"axis {ax}: {b} before, {e} after, {what}",
                [cur], [dst])
        cur = dst


def transpose_steps(shape, perm) -> list[tuple[int, int, int, int]]:
    """A permutation as swaps of two adjacent blocks of axes: each step is (P, A, B, I), the
    data viewed as [P, A, B, I] becoming [P, B, A, I]. Axes of size 1 are dropped and axes
    that stay neighbours are merged first."""
    keep = [a for a in perm if shape[a] != 1]
    order = sorted(keep)
    # Merge axes consecutive in both the source and the target order.
    groups: list[list[int]] = []
    for a in keep:
        if groups and order.index(a) == order.index(groups[-1][-1]) + 1:
            groups[-1].append(a)
        else:
            groups.append([a])
    size = {tuple(g): int(np.prod([shape[a] for a in g])) for g in groups}
    target = [tuple(g) for g in groups]
    cur = sorted(target)
    steps = []
    for i in range(len(target)):
        if cur[i] == target[i]:
            continue
        j = cur.index(target[i])
        P = int(np.prod([size[g] for g in cur[:i]]))
        A = int(np.prod([size[g] for g in cur[i:j]]))
        B = size[cur[j]]
        I = int(np.prod([size[g] for g in cur[j + 1:]]))  # noqa: E741
        steps.append((P, A, B, I))
        cur = cur[:i] + [cur[j]] + cur[i:j] + cur[j + 1:]
    return steps
