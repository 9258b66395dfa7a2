"""MaxPool, AveragePool and GlobalAveragePool, float and quantized."""

from __future__ import annotations

import numpy as np

from ...errors import ModelError
from ...tiler import layer_generators as G
from ...tiler.basic_kernels import common
from ...tiler.basic_kernels.common import f32_bits
from ..reader import Node
from .context import Lowering, int_list, rows_cols
from .windows import input_rows, window_pads


def pool(ctx: Lowering, n: Node, quant_avg: bool) -> None:
    x = n.inputs[0]
    C, H, W = ctx.chw(n, x)
    rank = len(ctx.shape(x)) - 2
    if len(n.outputs) > 1 and n.outputs[1]:
        raise ModelError(f"{n.where()}: the Indices output is not supported")
    kernel = list(n.attrs.get("kernel_shape", []))
    if len(kernel) != rank:
        raise ModelError(f"{n.where()}: kernel_shape={kernel} for a {rank}-D input")
    dil = int_list(n, "dilations", rank, 1)
    st = int_list(n, "strides", rank, 1)
    if rank == 1:
        kernel, dil, st = [1] + kernel, [1] + dil, [1] + st
    _, Ho, Wo = ctx.chw(n, n.outputs[0])
    pads = window_pads(n, rank, kernel, dil, st, H, W, Ho, Wo)
    pt, pl, pb, pr = pads
    avg = n.op in ("AveragePool", "QAveragePool")
    if quant_avg and any(d != 1 for d in dil):
        raise ModelError(f"{n.where()}: dilations={dil} on a quantized average pooling")
    fe = dil[0] * (kernel[0] - 1) + 1
    need = st[0] * Ho + max(fe - st[0], 0)
    dt = ctx.dtype(x)
    zx = n.attrs["x"][1] if quant_avg else 0
    src, tiled, hp = input_rows(ctx, n, ctx.tensor(x), C, H, W, dt, pt, need, zx,
                                2 * Wo * dt.itemsize + 16)
    name = ctx.layer("AvgPool" if avg else "MaxPool")
    q = {}
    if quant_avg:
        (xs, xz), (ys, yz) = n.attrs["x"], n.attrs["y"]
        q = dict(InScale=f32_bits(xs), InZp=xz, OutScale=f32_bits(ys), OutZp=yz)
    G.pool(ctx.m, name, dt=dt, C=C, Width=W, Height=hp, in_tiled=tiled, Hreal=H, PadT=pt,
           PadL=pl, PadB=pb, PadR=pr, Fx=kernel[1], Fy=kernel[0], Sx=st[1], Sy=st[0],
           Dx=dil[1], Dy=dil[0], Wo=Wo, Ho=Ho, Oper=common.POOL_AVG if avg else common.POOL_MAX,
           CountPad=int(n.attrs.get("count_include_pad", 0)), **q)
    detail = (f"{kernel[0]}x{kernel[1]} s{st[0]}x{st[1]} d{dil[0]}x{dil[1]} pads "
              f"{list(pads)} ceil_mode={n.attrs.get('ceil_mode', 0)}, {C}x{H}x{W} -> "
              f"{Ho}x{Wo}")
    ctx.add(name, n.op, [n], detail, [src], [ctx.output(n.outputs[0])])


def max_pool(ctx: Lowering, n: Node) -> None:
    if n.attrs.get("storage_order", 0) and len(n.outputs) > 1 and n.outputs[1]:
        raise ModelError(f"{n.where()}: storage_order applies to the Indices output, which "
                         f"is not supported")
    pool(ctx, n, False)


def global_pool(ctx: Lowering, n: Node, quant: bool) -> None:
    x = n.inputs[0]
    s = ctx.shape(x)
    if len(s) < 3 or s[0] != 1:
        raise ModelError(f"{n.where()}: input {x!r} of shape {s}: npukit takes [1, C, ...]")
    C, hw = s[1], int(np.prod(s[2:]))
    rows, cols = rows_cols(hw, ctx.max_cols)
    dt = ctx.dtype(x)
    q = {}
    if quant:
        (xs, xz), (ys, yz) = n.attrs["x"], n.attrs["y"]
        q = dict(InZp=xz, Scale=f32_bits(np.float32(xs) / (np.float32(ys) * np.float32(hw))),
                 OutZp=yz)
    name = ctx.layer("GlobalAvgPool")
    G.global_pool(ctx.m, name, dt=dt, C=C, Width=cols, Height=rows, **q)
    ctx.add(name, n.op, [n], f"{C} planes of {hw}", [ctx.tensor(x)],
            [ctx.output(n.outputs[0])])
