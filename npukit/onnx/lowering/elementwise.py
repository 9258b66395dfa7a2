"""Elementwise layers: activations, the float binary operations (broadcast as a
[planes, rows, cols] view), Sum, and the quantized Add and Mul."""

from __future__ import annotations

import numpy as np

from ...errors import ModelError
from ...tiler import layer_generators as G
from ...tiler.basic_kernels import elementwise
from ...tiler.basic_kernels.common import f32_bits, fma_f32
from ..reader import Node
from .context import MAX_COLS, Lowering, rows_cols
from .shape import view

BINARY = {"Add": elementwise.BIN_ADD, "Sub": elementwise.BIN_SUB, "Mul": elementwise.BIN_MUL,
          "Div": elementwise.BIN_DIV}


def broadcast_view(out: tuple, shapes: list[tuple], max_cols: int = MAX_COLS):
    """Numpy broadcasting of ``shapes`` to ``out`` as a [planes, rows, cols] view in which
    each operand varies along a dimension or is constant along it: returns the three sizes
    and, per operand, whether it varies along (planes, rows, cols); None when more than three
    groups of dimensions alternate."""
    rank = len(out)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    groups: list[list] = []  # [size, varies per operand]
    for d in range(rank):
        if out[d] == 1:
            continue
        cls = tuple(p[d] == out[d] for p in padded)
        if groups and groups[-1][1] == cls:
            groups[-1][0] *= out[d]
        else:
            groups.append([out[d], cls])
    if len(groups) > 3:
        return None
    if len(groups) < 3:
        size, cls = groups.pop() if groups else (1, tuple(True for _ in shapes))
        rows, cols = rows_cols(size, max_cols)
        groups += [[rows, cls], [cols, cls]]
    while len(groups) < 3:
        groups.insert(0, [1, tuple(False for _ in shapes)])
    sizes = tuple(g[0] for g in groups)
    fulls = [tuple(g[1][k] and g[0] > 1 for g in groups) for k in range(len(shapes))]
    return sizes, fulls


def unary(ctx: Lowering, n: Node, in_dt, out_dt, op: int, p0: int, p1: int, what: str,
          fn: str | None = None) -> None:
    size = ctx.info(n.outputs[0]).size
    rows, cols = rows_cols(size, ctx.max_cols)
    name = ctx.layer(n.op)
    G.unary(ctx.m, name, in_dt=in_dt, out_dt=out_dt, Rows=rows, Cols=cols, Op=op, P0=p0,
            P1=p1, fn=fn)
    ctx.add(name, n.op, [n], what, [ctx.tensor(n.inputs[0])], [ctx.output(n.outputs[0])])


def act(ctx: Lowering, n: Node) -> None:
    dt = ctx.dtype(n.inputs[0])
    if dt != np.float32:
        raise ModelError(f"{n.where()}: {n.op} on {ctx.dtype(n.inputs[0])} data outside a "
                         f"DequantizeLinear/QuantizeLinear pair is not supported")
    code, (p0, p1) = ctx.act_params(n)
    unary(ctx, n, "float32", "float32", code, p0, p1, f"{ctx.info(n.outputs[0]).size} "
          f"values")


def binary_layer(ctx: Lowering, n: Node, a: str, b: str, out: str, nodes: list[Node], op: int,
                 ops: str, **kw) -> None:
    shapes = [ctx.shape(a), ctx.shape(b)]
    view = broadcast_view(ctx.info(out).shape, shapes, ctx.max_cols)
    if view is None:
        raise ModelError(f"{n.where()}: broadcasting {shapes[0]} with {shapes[1]} to "
                         f"{ctx.info(out).shape} alternates more than three groups of "
                         f"dimensions; npukit's broadcast views have three")
    (P, R, L), (fa, fb) = view
    name = ctx.layer(n.op)
    G.binary(ctx.m, name, a_dt=ctx.dtype(a), b_dt=ctx.dtype(b),
             out_dt=ctx.info(out).dtype, Planes=P, Rows=R, Cols=L, a_full=fa, b_full=fb,
             Op=op, **kw)
    ctx.add(name, ops, nodes, f"{shapes[0]} {n.op} {shapes[1]} -> {ctx.info(out).shape}",
            [ctx.tensor(a), ctx.tensor(b)], [ctx.output(out)])


def float_binary(ctx: Lowering, n: Node) -> None:
    for t in n.inputs:
        if ctx.dtype(t) != np.float32:
            raise ModelError(f"{n.where()}: {n.op} of {ctx.dtype(t)} tensors outside a "
                             f"DequantizeLinear/QuantizeLinear pair is not supported")
    nodes, ops, out, code, ap = ctx.with_float_act(n)
    binary_layer(ctx, n, n.inputs[0], n.inputs[1], out, nodes, BINARY[n.op], ops,
                 Act=code, P=(ap[0], ap[1], 0))


def sum_inputs(ctx: Lowering, n: Node) -> None:
    ins = [t for t in n.inputs if t]
    if len(ins) == 1:
        return view(ctx, Node("Identity", n.name, ins, n.outputs, {}))
    acc = ins[0]
    for k, t in enumerate(ins[1:]):
        last = k == len(ins) - 2
        out = n.outputs[0] if last else f"{n.outputs[0]}__sum{k}"
        if not last:
            ctx.net.info[out] = ctx.net.info[n.outputs[0]]
        step = Node("Add", f"{n.name}_{k}", [acc, t], [out], {})
        binary_layer(ctx, step, acc, t, out, [n] if last else [], elementwise.BIN_ADD, "Sum")
        acc = out


def qadd(ctx: Lowering, n: Node) -> None:
    """ONNX Runtime's QLinearAdd (``qladd_avx2.cpp``): ``fma(a, rA, fma(b, rB, F))`` with
    ``F = y_zp - (rA * a_zp + rB * b_zp)``, whose ``rA * a_zp + ...`` its build contracts into
    one fused multiply-add. An ``A`` broadcast along the innermost dimensions is its looper's
    scalar input 0: the kernel is called with the operands swapped, so the fixed part is
    ``y_zp - (rB * b_zp + rA * a_zp)`` and ``a`` is folded in first (the basic kernel's
    ``ACol == 0 != BCol`` order)."""
    (sa, za), (sb, zb), (sy, zy) = n.attrs["a"], n.attrs["b"], n.attrs["y"]
    ra = np.float32(sa) / np.float32(sy)
    rb = np.float32(sb) / np.float32(sy)
    a, b = (int_operand(ctx, n, t) for t in n.inputs)
    view = broadcast_view(ctx.info(n.outputs[0]).shape, [ctx.shape(a), ctx.shape(b)],
                          ctx.max_cols)
    a_first = view is not None and not view[1][0][2] and view[1][1][2]
    if a_first:
        fixed = np.float32(zy) - fma_f32(rb, np.float32(zb), ra * np.float32(za))
    else:
        fixed = np.float32(zy) - fma_f32(ra, np.float32(za), rb * np.float32(zb))
    info = np.iinfo(ctx.dtype(n.outputs[0]))
    lo, hi = n.attrs.get("lo", int(info.min)), n.attrs.get("hi", int(info.max))
    binary_layer(ctx, n, a, b, n.outputs[0], [n], elementwise.BIN_QADD, "QLinearAdd",
                 P=(f32_bits(ra), f32_bits(rb), f32_bits(fixed)), Za=za, Zb=zb, Zout=zy, Lo=lo,
                 Hi=hi)


def qmul(ctx: Lowering, n: Node) -> None:
    (sa, za), (sb, zb), (sy, zy) = n.attrs["a"], n.attrs["b"], n.attrs["y"]
    ratio = (np.float32(sa) * np.float32(sb)) / np.float32(sy)
    info = np.iinfo(ctx.dtype(n.outputs[0]))
    lo, hi = n.attrs.get("lo", int(info.min)), n.attrs.get("hi", int(info.max))
    a, b = (int_operand(ctx, n, t) for t in n.inputs)
    binary_layer(ctx, n, a, b, n.outputs[0], [n], elementwise.BIN_QMUL, "QLinearMul",
                 P=(f32_bits(ratio), 0, 0), Za=za, Zb=zb, Zout=zy, Lo=lo, Hi=hi)


def int_operand(ctx: Lowering, n: Node, t: str) -> str:
    """A quantized operand: a computed integer tensor, or a constant's integers."""
    q = ctx.net.qconsts.get(t)
    if q is not None:
        name = f"{t}__int"
        ctx.net.consts.setdefault(name, q.values)
        return name
    return t
