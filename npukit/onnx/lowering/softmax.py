"""Softmax, LogSoftmax, Hardmax, QLinearSoftmax and CumSum: one layer along an axis."""

from __future__ import annotations

import numpy as np

from ...errors import ModelError
from ...tiler import layer_generators as G
from ...tiler.basic_kernels import along_axis
from ...tiler.basic_kernels import softmax as softmax_kernels
from ...tiler.basic_kernels.common import f32_bits
from ..reader import Node
from .context import Lowering

WHAT = {"LogSoftmax": "log softmax", "Hardmax": "hardmax"}


def softmax(ctx: Lowering, n: Node, quant: bool) -> None:
    x = n.inputs[0]
    if ctx.dtype(x) != np.float32 and not quant:
        raise ModelError(f"{n.where()}: {n.op} of {ctx.dtype(x)} data outside a "
                         f"DequantizeLinear/QuantizeLinear pair is not supported")
    s = ctx.shape(x)
    axis = int(n.attrs.get("axis", -1 if ctx.net.opset >= 13 else 1))
    if not -len(s) <= axis < len(s):
        raise ModelError(f"{n.where()}: axis={axis} for a rank-{len(s)} input")
    axis %= len(s)
    outer = int(np.prod(s[:axis]))
    if ctx.net.opset >= 13:
        d, inner = s[axis], int(np.prod(s[axis + 1:]))
    else:
        d, inner = int(np.prod(s[axis:])), 1
    name = ctx.layer("Hardmax" if n.op == "Hardmax" else "Softmax")
    ins = [ctx.tensor(x)]
    if quant:
        (xs, _), (ys, yz) = n.attrs["x"], n.attrs["y"]
        ins.append(ctx.const(softmax_kernels.qsoftmax_table(xs, d), f"{n.name}_exp"))
        G.softmax(ctx.m, name, Outer=outer, D=d, Inner=inner, dt=ctx.dtype(x),
                  Ys=f32_bits(np.floor(np.float32(1) / np.float32(ys))), Zp=yz)
    else:
        G.softmax(ctx.m, name, Outer=outer, D=d, Inner=inner, log=n.op == "LogSoftmax",
                  kernel=along_axis.hardmax() if n.op == "Hardmax" else None)
    ctx.add(name, "QLinearSoftmax" if quant else n.op, [n],
            f"{outer} x {WHAT.get(n.op, 'softmax')} over {d}"
            + (f" (stride {inner})" if inner > 1 else ""),
            ins, [ctx.output(n.outputs[0])])


def cumsum(ctx: Lowering, n: Node) -> None:
    """CumSum (float32) along its constant ``axis``, ``exclusive`` and ``reverse``."""
    x = n.inputs[0]
    if ctx.dtype(x) != np.float32:
        raise ModelError(f"{n.where()}: CumSum of {ctx.dtype(x)} data is not supported "
                         f"(float32 only)")
    s = ctx.shape(x)
    a = ctx.const_input(n, 1, "axis")
    axis = int(a[0]) if a is not None else 0
    if not -len(s) <= axis < len(s):
        raise ModelError(f"{n.where()}: axis={axis} for a rank-{len(s)} input")
    axis %= len(s)
    outer, d, inner = int(np.prod(s[:axis])), s[axis], int(np.prod(s[axis + 1:]))
    excl, rev = bool(n.attrs.get("exclusive", 0)), bool(n.attrs.get("reverse", 0))
    name = ctx.layer("CumSum")
    G.softmax(ctx.m, name, Outer=outer, D=d, Inner=inner,
              kernel=along_axis.cumsum(excl, rev))
    ctx.add(name, "CumSum", [n], f"{outer} x running sums over {d}"
            + (f" (stride {inner})" if inner > 1 else "") + (", exclusive" if excl else "")
            + (", reversed" if rev else ""), [ctx.tensor(x)], [ctx.output(n.outputs[0])])
