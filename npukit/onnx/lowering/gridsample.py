"""GridSample of 2-D float32 planes (batch 1): one ``grid_sample`` layer, the grid a tensor
or a constant (``basic_kernels.gridsample``: as ONNX Runtime computes it)."""

from __future__ import annotations

import numpy as np

from ...errors import ModelError
from ...tiler import layer_generators_indexed as GI
from ..reader import Node
from .context import Lowering

MODES = {"bilinear": "linear", "linear": "linear", "nearest": "nearest", "bicubic": "cubic",
         "cubic": "cubic"}
PADDINGS = ("zeros", "border", "reflection")


def grid_sample(ctx: Lowering, n: Node) -> None:
    x, grid = n.inputs[:2]
    s, sg = ctx.shape(x), ctx.shape(grid)
    if len(s) != 4 or s[0] != 1 or ctx.dtype(x) != np.float32 or \
            ctx.dtype(grid) != np.float32:
        raise ModelError(f"{n.where()}: input {list(s)} {ctx.dtype(x)}; npukit samples float32 "
                         f"[1, C, H, W] planes (2-D, batch 1)")
    if len(sg) != 4 or sg[0] != 1 or sg[3] != 2:
        raise ModelError(f"{n.where()}: grid {list(sg)}; GridSample of [1, C, H, W] takes a "
                         f"[1, Ho, Wo, 2] grid")
    mode = MODES.get(n.attrs.get("mode", "linear" if ctx.net.opset >= 20 else "bilinear"))
    padding = n.attrs.get("padding_mode", "zeros")
    if mode is None or padding not in PADDINGS:
        raise ModelError(f"{n.where()}: mode={n.attrs.get('mode')!r}, padding_mode="
                         f"{padding!r}; ONNX takes {list(MODES)} and {list(PADDINGS)}")
    align = bool(n.attrs.get("align_corners", 0))
    if padding == "reflection" and align and min(s[2:]) == 1:
        raise ModelError(f"{n.where()}: reflection with aligned corners on a plane {s[2]}x"
                         f"{s[3]}: a side of 1 leaves nothing to reflect in")
    _, c, h, w = s
    ho, wo = sg[1], sg[2]
    name = ctx.layer("GridSample")
    GI.grid_sample(ctx.m, name, Planes=c, Width=w, Height=h, Wo=wo, Ho=ho, mode=mode,
                  padding=padding, align=align)
    ctx.add(name, "GridSample", [n], f"{c} x [{h}, {w}] at [{ho}, {wo}], {mode}, padding "
            f"{padding}" + (", aligned corners" if align else ""),
            [ctx.tensor(x), ctx.tensor(grid)], [ctx.output(n.outputs[0])])
