"""The float32 math functions of ``basic_kernels.mathfn``: the unaries and activations (Abs,
Exp, Sqrt, Sin, Erf, Elu, HardSwish, Gelu, ...), one elementwise layer each; Pow and PRelu,
one broadcasting layer; Max, Min and Mean of any number of inputs, a chain of them."""

from __future__ import annotations

import numpy as np

from ...errors import ModelError
from ...tiler.basic_kernels import elementwise
from ...tiler.basic_kernels.common import f32_bits
from ...tiler.basic_kernels.mathfn import UNARY
from ..reader import Node
from .context import Lowering
from .elementwise import binary_layer, unary
from .shape import view

OPS = tuple(op for op in UNARY if op != "GeluTanh")


def math_unary(ctx: Lowering, n: Node) -> None:
    dt = ctx.dtype(n.inputs[0])
    if dt != np.float32:
        raise ModelError(f"{n.where()}: {n.op} of {dt} data is not supported (float32 only; "
                         f"between a DequantizeLinear and a QuantizeLinear it runs in float32)")
    fn = n.op
    if n.op == "Gelu":
        approx = n.attrs.get("approximate", "none")
        if approx not in ("none", "tanh"):
            raise ModelError(f"{n.where()}: approximate={approx!r}; ONNX's Gelu takes "
                             f"'none' or 'tanh'")
        fn = "GeluTanh" if approx == "tanh" else "Gelu"
    params = [float(n.attrs.get(k, v)) for k, v in UNARY[fn][1]]
    if fn == "Celu" and params[0] == 0:
        raise ModelError(f"{n.where()}: alpha=0 divides by zero in Celu's exp(x / alpha)")
    p0, p1 = (f32_bits(v) for v in (params + [0.0, 0.0])[:2])
    what = ", ".join(f"{k}={v:g}" for (k, _), v in zip(UNARY[fn][1], params))
    unary(ctx, n, "float32", "float32", 0, p0, p1,
          f"{ctx.info(n.outputs[0]).size} values" + (f" ({what})" if what else ""), fn=fn)


def _floats(ctx: Lowering, n: Node, ins: list[str]) -> None:
    for t in ins:
        if ctx.dtype(t) != np.float32:
            raise ModelError(f"{n.where()}: {n.op} of {ctx.dtype(t)} input {t!r} is not "
                             f"supported (float32 only)")


def math_binary(ctx: Lowering, n: Node) -> None:
    """Pow and PRelu: one broadcasting layer. A constant integer exponent of Pow is read as
    float32 (ONNX Runtime converts it so)."""
    a, b = n.inputs[:2]
    if n.op == "Pow" and b in ctx.net.consts and ctx.dtype(b).kind in "iu":
        b = f"{b}__float"
        ctx.net.consts[b] = ctx.net.consts[n.inputs[1]].astype(np.float32)
    _floats(ctx, n, [a, b])
    binary_layer(ctx, n, a, b, n.outputs[0], [n], 0, n.op, fn=n.op)


def variadic(ctx: Lowering, n: Node) -> None:
    """Max, Min and Mean of any number of inputs, broadcast: a chain of two-input layers
    (Mean: sums, then a division by the count, as ONNX Runtime)."""
    ins = [t for t in n.inputs if t]
    _floats(ctx, n, ins)
    out = n.outputs[0]
    if len(ins) == 1:
        return view(ctx, Node("Identity", n.name, ins, n.outputs, {}))
    acc = ins[0]
    for k, t in enumerate(ins[1:]):
        last = k == len(ins) - 2 and n.op != "Mean"
        step_out = out if last else f"{out}__{n.op.lower()}{k}"
        if not last:
            ctx.net.info[step_out] = ctx.net.info[out]
        step = Node(n.op, f"{n.name}_{k}", [acc, t], [step_out], {})
        if n.op == "Mean":
            binary_layer(ctx, step, acc, t, step_out, [], elementwise.BIN_ADD, "Mean (sum)")
        else:
            binary_layer(ctx, step, acc, t, step_out, [n] if last else [], 0, n.op, fn=n.op)
        acc = step_out
    if n.op == "Mean":
        count = f"{n.name}__count"
        ctx.net.consts[count] = np.array([len(ins)], np.float32)
        binary_layer(ctx, n, acc, count, out, [n], elementwise.BIN_DIV, "Mean")


def expand(ctx: Lowering, n: Node) -> None:
    """Expand: the input broadcast to the output's shape (its shape input a constant the
    shape inference read), one broadcasting layer."""
    x = n.inputs[0]
    _floats(ctx, n, [x])
    if ctx.shape(x) == ctx.info(n.outputs[0]).shape:
        return view(ctx, Node("Identity", n.name, [x], n.outputs, {}))
    one = f"{n.name}__unused"
    ctx.net.consts[one] = np.zeros(1, np.float32)
    binary_layer(ctx, n, x, one, n.outputs[0], [n], 0, "Expand", fn="Expand")
