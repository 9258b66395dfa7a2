"""Windowed layers (convolution, pooling): the pads of a window and how a layer reads its
input rows."""

from __future__ import annotations

import math

import numpy as np

from ...dtypes import is_float
from ...errors import ModelError
from ...tiler import layer_generators as G
from ..reader import Node
from .context import Lowering, int_list


def window_pads(n: Node, rank: int, kernel: list[int], dilations: list[int],
                strides: list[int], H: int, W: int, Ho: int, Wo: int) -> tuple[int, int, int, int]:
    """ONNX pads (top, left, bottom, right) from ``pads`` or ``auto_pad``."""
    auto = n.attrs.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        p = int_list(n, "pads", 2 * rank, 0)
        pads = (0, p[0], 0, p[1]) if rank == 1 else (p[0], p[1], p[2], p[3])
    elif auto == "VALID":
        pads = (0, 0, 0, 0)
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        out = []
        for size, k, d, s in zip((H, W), (kernel[0], kernel[-1]), (dilations[0],
                                                                   dilations[-1]),
                                 (strides[0], strides[-1])):
            total = max((math.ceil(size / s) - 1) * s + d * (k - 1) + 1 - size, 0)
            first = total // 2 if auto == "SAME_UPPER" else total - total // 2
            out.append((first, total - first))
        pads = (out[0][0], out[1][0], out[0][1], out[1][1])
        if rank == 1:
            pads = (0, pads[1], 0, pads[3])
    else:
        raise ModelError(f"{n.where()}: auto_pad={auto!r} is not an ONNX value")
    if any(v < 0 for v in pads):
        raise ModelError(f"{n.where()}: negative pads {list(pads)} are not supported")
    return pads


def input_rows(ctx: Lowering, n: Node, x: str, C: int, H: int, W: int, dt, pt: int, need: int,
               zero: int, rest: int) -> tuple[str, bool, int]:
    """How a windowed layer reads its input: (tensor, tiled rows, physical height). Rows
    are tiled straight from the input when no padding row is needed; the whole plane is
    read when two planes take at most half the L1 budget and leave the ``rest`` the layer
    needs at its smallest tile (padding in the kernel); otherwise a pad_axis layer
    first makes the padded rows."""
    if pt == 0 and H >= need:
        return x, True, H
    planes = 2 * H * W * np.dtype(dt).itemsize
    if planes <= ctx.m.l1_budget // 2 and planes + rest <= ctx.m.l1_budget:
        return x, False, H
    hp = max(pt + H, need)
    name = ctx.layer("PadRows")
    G.pad_axis(ctx.m, name, dt=dt, Outer=C, D=H, Inner=W, PadBegin=pt,
               PadEnd=hp - pt - H, Value=(0 if is_float(dt) else zero))
    out = ctx.local(f"{n.outputs[0]}_padrows", dt, C * hp * W)
    ctx.add(name, "Pad rows", [], f"{C}x{H}x{W} -> {C}x{hp}x{W} ({pt} above, "
            f"{hp - pt - H} below) for {n.name}", [x], [out])
    return out, True, hp
