"""Softmax, LogSoftmax, Hardmax and QLinearSoftmax: one layer along an axis."""

from __future__ import annotations

import numpy as np

from ...errors import ModelError
from ...tiler import layer_generators as G
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
                  hard=n.op == "Hardmax")
    ctx.add(name, "QLinearSoftmax" if quant else n.op, [n],
            f"{outer} x {WHAT.get(n.op, 'softmax')} over {d}"
            + (f" (stride {inner})" if inner > 1 else ""),
            ins, [ctx.output(n.outputs[0])])
