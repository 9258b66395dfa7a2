"""ONNX's reductions (``ReduceSum``, ``ReduceMean``, ``ReduceMax``, ``ReduceMin``,
``ReduceProd``, ``ReduceL1``, ``ReduceL2``, ``ReduceLogSum``, ``ReduceLogSumExp``,
``ReduceSumSquare``) on float32: one ``reduce`` layer over an [outer, reduced, inner] view of
the input, after ``transpose`` layers when the reduced axes are not neighbours."""

from __future__ import annotations

import numpy as np

from ...errors import ModelError
from ...tiler import layer_generators as G
from ...tiler import layer_generators_indexed as GI
from ...tiler.basic_kernels.reduction import REDUCE
from ..reader import Node
from .context import Lowering
from .shape import permute

OPS = tuple(REDUCE)


def reduce_axes(ctx: Lowering, n: Node, rank: int) -> list[int]:
    """The axes ``n`` reduces, sorted; none with ``noop_with_empty_axes`` (each value is then
    reduced alone, as ONNX Runtime does: ``ReduceL2`` gives ``|x|``)."""
    given = ctx.const_input(n, 1, "axes")
    axes = [int(a) for a in (given if given is not None else n.attrs.get("axes", []))]
    if not axes:
        return [] if n.attrs.get("noop_with_empty_axes", 0) else list(range(rank))
    bad = [a for a in axes if not -rank <= a < rank]
    if bad:
        raise ModelError(f"{n.where()}: axes {axes} for a rank-{rank} input")
    return sorted({a % rank for a in axes})


def reduce(ctx: Lowering, n: Node) -> None:
    x, out = n.inputs[0], n.outputs[0]
    s = ctx.shape(x)
    if ctx.dtype(x) != np.float32:
        raise ModelError(f"{n.where()}: {n.op} of {ctx.dtype(x)} data is not supported "
                         f"(float32 only)")
    axes = reduce_axes(ctx, n, len(s))
    # Axes of size 1 move no data: the reduced axes must be neighbours among the others.
    real = [a for a in range(len(s)) if s[a] != 1]
    red = [a for a in real if a in axes]
    src = x
    pos = [real.index(a) for a in red]
    if pos and pos != list(range(pos[0], pos[0] + len(pos))):  # reduced axes moved last
        perm = [a for a in range(len(s)) if a not in axes] + axes
        src = f"{out}__reduced_axes_last"
        ctx.net.info[src] = type(ctx.info(out))(tuple(s[a] for a in perm), np.dtype("float32"))
        permute(ctx, n, s, perm, "Transpose", out=src)
        s, red = ctx.shape(src), list(range(len(s) - len(axes), len(s)))
    size = int(np.prod(s))
    if red:
        outer = int(np.prod([s[a] for a in range(red[0])]))
        d = int(np.prod([s[a] for a in red]))
    else:  # no axes, or only axes of size 1: the reduction of one value each
        outer, d = size, 1
    inner = size // (outer * d)
    name = ctx.layer(n.op)
    G.reduce(ctx.m, name, op=n.op, Outer=outer, D=d, Inner=inner)
    ctx.add(name, n.op, [n], f"axes {axes}: [{outer}, {d}, {inner}] -> [{outer}, {inner}]",
            [ctx.tensor(src)], [ctx.output(out)])


def arg(ctx: Lowering, n: Node) -> None:
    """ArgMax and ArgMin along ``axis`` (``keepdims`` only names the output's shape;
    ``select_last_index``): one layer over the input read as [outer, D, inner]."""
    x, out = n.inputs[0], n.outputs[0]
    s, dt = ctx.shape(x), ctx.dtype(x)
    if dt.kind not in "fiu":
        raise ModelError(f"{n.where()}: {n.op} of {dt} data is not supported")
    axis = int(n.attrs.get("axis", 0))
    if not -len(s) <= axis < len(s):
        raise ModelError(f"{n.where()}: axis={axis} for a rank-{len(s)} input")
    axis %= len(s)
    outer, d, inner = int(np.prod(s[:axis])), s[axis], int(np.prod(s[axis + 1:]))
    last = bool(n.attrs.get("select_last_index", 0))
    name = ctx.layer(n.op)
    G.reduce(ctx.m, name, op=n.op, Outer=outer, D=d, Inner=inner, dt=dt, last=last)
    ctx.add(name, n.op, [n], f"axis {axis}: [{outer}, {d}, {inner}] -> [{outer}, {inner}]"
            + (" (last on ties)" if last else ""), [ctx.tensor(x)], [ctx.output(out)])


def top_k(ctx: Lowering, n: Node) -> None:
    """TopK (sorted; ``largest``; K a constant): one layer writing the values and the int64
    indices, each [outer, K, inner] plane whole."""
    x = n.inputs[0]
    s, dt = ctx.shape(x), ctx.dtype(x)
    if dt.kind not in "fiu":
        raise ModelError(f"{n.where()}: {n.op} of {dt} data is not supported")
    if not n.attrs.get("sorted", 1):
        raise ModelError(f"{n.where()}: sorted=0 (an order ONNX leaves open) is not supported")
    if n.attrs.get("k") is not None:  # TopK-1's attribute
        k = int(n.attrs["k"])
    else:
        k = int(ctx.const_input(n, 1, "K")[0])
    axis = int(n.attrs.get("axis", -1))
    if not -len(s) <= axis < len(s):
        raise ModelError(f"{n.where()}: axis={axis} for a rank-{len(s)} input")
    axis %= len(s)
    if not 1 <= k <= s[axis]:
        raise ModelError(f"{n.where()}: K={k} for axis {axis} of size {s[axis]}")
    outer, d, inner = int(np.prod(s[:axis])), s[axis], int(np.prod(s[axis + 1:]))
    largest = bool(n.attrs.get("largest", 1))
    name = ctx.layer(n.op)
    GI.top_k(ctx.m, name, dt=dt, Planes=outer, D=d, Inner=inner, K=k, largest=largest)
    outs = [ctx.output(t) for t in n.outputs]  # Values and Indices (both required)
    ctx.add(name, n.op, [n], f"{'largest' if largest else 'smallest'} {k} of axis {axis}: "
            f"[{outer}, {d}, {inner}] -> [{outer}, {k}, {inner}]", [ctx.tensor(x)], outs)
