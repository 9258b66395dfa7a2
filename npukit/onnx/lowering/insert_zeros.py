"""``InsertZeros`` (made by the ConvTranspose rewrite, ``npukit.onnx.conv_transpose``): ``s - 1``
zeros after every value along each spatial axis of stride ``s``, then crops. Each insertion
is one ``pad_axis`` layer over a view where the inserted zeros are the padding at the end of
every row: along the last axis every value is a row of 1 padded by ``s - 1``; along the axis
before it every row of W values is padded by ``(s - 1) W``. The crops are ``pad_axis``
layers with negative pads."""

from __future__ import annotations

import numpy as np

from ...tiler import layer_generators as G
from ..reader import Node, TInfo
from .context import Lowering
from .shape import pad_axes


def insert_zeros(ctx: Lowering, n: Node) -> None:
    x, out = n.inputs[0], n.outputs[0]
    shape, dt = list(ctx.shape(x)), ctx.dtype(x)
    first = len(shape) - len(n.attrs["strides"])
    cur = x
    crops = [(first + i, b, e) for i, (b, e) in enumerate(n.attrs["crops"]) if b or e]
    steps = [(first + i, s) for i, s in enumerate(n.attrs["strides"]) if s > 1]
    for k, (ax, s) in enumerate(reversed(steps)):
        row = int(np.prod(shape[ax + 1:]))
        shape[ax] *= s
        last = k == len(steps) - 1 and not crops
        t = out if last else f"{out}__axis{ax}"
        if not last:
            ctx.net.info[t] = TInfo(tuple(shape), dt)
        name = ctx.layer("InsertZeros")
        G.pad_axis(ctx.m, name, dt=dt, Outer=int(np.prod(shape[:ax + 1])) // s, D=row,
                   Inner=1, PadBegin=0, PadEnd=(s - 1) * row)
        ctx.add(name, "InsertZeros", [n] if last else [],
                f"axis {ax}: {s - 1} zeros after every value", [ctx.tensor(cur)],
                [ctx.output(t)])
        cur = t
    if crops:
        pad_axes(ctx, n, cur, out, crops, label="Crop")
