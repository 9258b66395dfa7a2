"""Layers on integer and bool tensors (and float32 comparisons): ``Cast``, ``CastLike``, the
comparisons, logical and bitwise operations, ``Where``, ``Mod``, ``BitShift``, ``IsNaN``,
``IsInf``, and the integer forms of ``Add``, ``Sub``, ``Mul``, ``Div``, ``Neg``, ``Abs``,
``Sign``, ``Max``, ``Min``, ``Clip``: one ``typed`` layer each (a chain for more than two
inputs), broadcast as [planes, rows, cols] views as the float layers are. The arithmetic is
``npukit.tiler.basic_kernels.integer``'s."""

from __future__ import annotations

import numpy as np

from ...errors import ModelError
from ...tiler import layer_generators as G
from ..reader import Node
from .context import Lowering
from .elementwise import act, broadcast_view
from .shape import view

COMPARISONS = ("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual")
LOGICAL = ("And", "Or", "Xor", "Not")
BITWISE = ("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot")
# Operators whose every operand has one type (the output: that type or bool).
SAME_TYPE = (*COMPARISONS, *LOGICAL, *BITWISE, "Add", "Sub", "Mul", "Div", "Mod", "Neg", "Abs",
             "Sign", "Max", "Min", "BitShift")
OPS = (*COMPARISONS, *LOGICAL, *BITWISE, "Mod", "BitShift", "IsNaN", "IsInf", "Where")
INTS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
CAST_ONLY = ("float16", "bfloat16", "float64")  # tensors only Cast reads and makes


def compute_types(ctx: Lowering, n: Node) -> None:
    """Refuse an operator other than Cast on a float16, bfloat16 or float64 tensor."""
    for t in [*n.inputs, *n.outputs[:1]]:
        if t and ctx.dtype(t).name in CAST_ONLY:
            raise ModelError(f"{n.where()}: {n.op} of {ctx.dtype(t)} tensor {t!r} is not "
                             f"supported (npukit casts {', '.join(CAST_ONLY)} tensors, and "
                             f"computes on float32, integers and bool)")


def _check_type(ctx: Lowering, n: Node, t: str, allowed) -> str:
    name = ctx.dtype(t).name
    if name not in allowed:
        raise ModelError(f"{n.where()}: {n.op} of {name} tensor {t!r} is not supported "
                         f"(npukit computes it on {', '.join(allowed)})")
    return name


def layer(ctx: Lowering, n: Node, op: str, ins: list[str], out: str, nodes: list[Node],
          ops: str) -> None:
    """One ``typed`` layer computing ``out = op(ins)`` with numpy broadcasting."""
    shapes = [ctx.shape(t) for t in ins]
    oshape = ctx.info(out).shape
    bv = broadcast_view(oshape, shapes, ctx.max_cols)
    if bv is None:
        raise ModelError(f"{n.where()}: broadcasting {' with '.join(map(str, shapes))} to "
                         f"{oshape} alternates more than three groups of dimensions; "
                         f"npukit's broadcast views have three")
    (P, R, L), fulls = bv
    name = ctx.layer(n.op)
    G.typed(ctx.m, name, op=op, in_dts=tuple(ctx.dtype(t) for t in ins),
            out_dt=ctx.info(out).dtype, Planes=P, Rows=R, Cols=L, fulls=tuple(fulls))
    ctx.add(name, ops, nodes, f"{op}({', '.join(map(str, shapes))}) -> {oshape}",
            [ctx.tensor(t) for t in ins], [ctx.output(out)])


def cast(ctx: Lowering, n: Node) -> None:
    """Cast and CastLike (whose second operand only gives the type: never read)."""
    src, dst = ctx.dtype(n.inputs[0]), ctx.info(n.outputs[0]).dtype
    if src == dst:
        return view(ctx, Node("Identity", n.name, n.inputs[:1], n.outputs, {}))
    if n.op == "Cast" and n.attrs.get("saturate", 1) != 1:
        raise ModelError(f"{n.where()}: saturate={n.attrs['saturate']} applies to float8 "
                         f"types only")
    layer(ctx, n, "Cast", n.inputs[:1], n.outputs[0], [n], n.op)


def expand(ctx: Lowering, n: Node) -> None:
    """Expand of an integer or bool tensor (an attention mask broadcast to the scores' shape):
    one ``typed`` copy broadcast to the output's shape."""
    x = n.inputs[0]
    if ctx.shape(x) == ctx.info(n.outputs[0]).shape:
        return view(ctx, Node("Identity", n.name, [x], n.outputs, {}))
    layer(ctx, n, "Cast", [x], n.outputs[0], [n], n.op)


def _op_key(ctx: Lowering, n: Node) -> str:
    if n.op == "Mod":
        return "Mod1" if n.attrs.get("fmod", 0) else "Mod"
    if n.op == "BitShift":
        direction = n.attrs.get("direction", "")
        if direction not in ("LEFT", "RIGHT"):
            raise ModelError(f"{n.where()}: direction={direction!r}; ONNX's BitShift takes "
                             f"'LEFT' or 'RIGHT'")
        return "ShiftLeft" if direction == "LEFT" else "ShiftRight"
    if n.op == "IsInf":
        pos, neg = n.attrs.get("detect_positive", 1), n.attrs.get("detect_negative", 1)
        return {(1, 1): "IsInf", (1, 0): "IsPosInf", (0, 1): "IsNegInf"}.get((pos, neg), "")
    return n.op


def typed_op(ctx: Lowering, n: Node) -> None:
    """An elementwise operator on integer, bool or (comparisons, IsNaN, IsInf, Where) float32
    tensors."""
    ins = [t for t in n.inputs if t]
    if n.op in LOGICAL:
        allowed: tuple = ("bool",)
    elif n.op in (*BITWISE, "Mod", "BitShift"):
        allowed = INTS
    elif n.op in ("IsNaN", "IsInf"):
        allowed = ("float32",)
    elif n.op in COMPARISONS:
        allowed = (*INTS, "float32", "bool") if n.op == "Equal" else (*INTS, "float32")
    else:
        allowed = (*INTS, "float32", "bool")
    data = ins[1:] if n.op == "Where" else ins
    for t in data:
        _check_type(ctx, n, t, allowed)
    if n.op == "Where":
        _check_type(ctx, n, ins[0], ("bool",))
    if n.op in SAME_TYPE and len({ctx.dtype(t) for t in ins}) > 1:
        raise ModelError(f"{n.where()}: inputs of types "
                         f"{sorted({ctx.dtype(t).name for t in ins})}; ONNX's {n.op} takes one")
    if n.op == "Mod" and ctx.dtype(ins[0]).kind == "f":
        raise ModelError(f"{n.where()}: Mod of float32 is not supported (integers only)")
    key = _op_key(ctx, n)
    if not key:
        return _constant_false(ctx, n)
    layer(ctx, n, key, ins, n.outputs[0], [n], n.op)


def _constant_false(ctx: Lowering, n: Node) -> None:
    """IsInf detecting neither infinity: every value false (a cast of a zero constant)."""
    zero = f"{n.name}__false"
    ctx.net.consts[zero] = np.zeros(1, np.bool_)
    layer(ctx, n, "Cast", [zero], n.outputs[0], [n], n.op)


def on_integers(float_handler, int_handler):
    """A handler lowering ``n`` with ``int_handler`` when its first input is an integer or
    bool tensor, else with ``float_handler``."""
    def handle(ctx: Lowering, n: Node) -> None:
        first = next(t for t in n.inputs if t)
        return (int_handler if ctx.dtype(first).kind in "iub" else float_handler)(ctx, n)
    return handle


def int_arith(ctx: Lowering, n: Node) -> None:
    """Add, Sub, Mul, Div, Neg, Abs, Sign of integer tensors."""
    ins = [t for t in n.inputs if t]
    for t in ins:
        _check_type(ctx, n, t, INTS)
    if len({ctx.dtype(t) for t in ins}) > 1:
        raise ModelError(f"{n.where()}: inputs of types "
                         f"{sorted({ctx.dtype(t).name for t in ins})}; ONNX's {n.op} takes one")
    layer(ctx, n, n.op, ins, n.outputs[0], [n], n.op)


def int_variadic(ctx: Lowering, n: Node) -> None:
    """Max, Min and Sum of integer tensors, any number of inputs: one layer per further
    input."""
    ins = [t for t in n.inputs if t]
    if n.op == "Mean":
        raise ModelError(f"{n.where()}: Mean of {ctx.dtype(ins[0])} tensors is not supported "
                         f"(float32 only)")
    for t in ins:
        _check_type(ctx, n, t, INTS)
    op = "Add" if n.op == "Sum" else n.op
    out = n.outputs[0]
    acc = ins[0]
    if len(ins) == 1:
        return view(ctx, Node("Identity", n.name, ins, n.outputs, {}))
    for k, t in enumerate(ins[1:]):
        last = k == len(ins) - 2
        step_out = out if last else f"{out}__{op.lower()}{k}"
        if not last:
            ctx.net.info[step_out] = ctx.net.info[out]
        layer(ctx, Node(n.op, f"{n.name}_{k}", [acc, t], [step_out], {}), op, [acc, t],
              step_out, [n] if last else [], n.op)
        acc = step_out


def clip(ctx: Lowering, n: Node) -> None:
    """Relu and Clip of integer tensors, and Clip of float32 ones whose bounds are computed or
    graph inputs (with constant bounds a float Clip is an activation, ``elementwise.act``):
    one ``Clip`` layer, ``min(max(x, lo), hi)`` as ONNX (``lo > hi`` gives ``hi``; NaN stays
    NaN); an absent bound is the type's extreme."""
    x, dt = n.inputs[0], ctx.dtype(n.inputs[0])
    bounds = [t for t in n.inputs[1:3] if t]
    if dt == np.float32 and ("min" in n.attrs or "max" in n.attrs or all(
            ctx.alias.get(t, t) in ctx.net.consts for t in bounds)):
        return act(ctx, n)
    _check_type(ctx, n, x, (*INTS, "float32"))
    ext = np.finfo(dt) if dt == np.float32 else np.iinfo(dt)  # float: as ONNX Runtime
    extremes = (ext.min, ext.max)
    ins = [x]
    for k, v in ((1, extremes[0]), (2, extremes[1])):
        given = n.inputs[k] if k < len(n.inputs) and n.inputs[k] else ""
        if n.op == "Relu" and k == 1:
            v = 0
        if given:
            ins.append(given)
        else:
            ins.append(f"{n.name}__{'min' if k == 1 else 'max'}")
            ctx.net.consts[ins[-1]] = np.array([v], dt)
    layer(ctx, n, "Clip", ins, n.outputs[0], [n], n.op)
