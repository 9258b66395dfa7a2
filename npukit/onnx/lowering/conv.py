"""Conv and QLinearConv, with the activation and the pooling they absorb."""

from __future__ import annotations

import numpy as np

from ...errors import ModelError
from ...tiler import layer_generators_conv as GC
from ...tiler import layer_generators_matmul as GM
from ...tiler.basic_kernels import common
from ...tiler.basic_kernels.common import f32_bits
from ..reader import Node, QConst
from .context import Lowering, int_list
from .windows import input_rows, window_pads


def conv(ctx: Lowering, n: Node, quant: bool) -> None:
    """One convolution layer with what it absorbs (``fused``). A grouped convolution (RegNet's,
    ResNeXt's: neither dense nor depthwise) is one layer too, each group reading its own
    input channels where they are and writing its own output channels (the generator's
    ``Groups``), never a dense filter mostly zeros nor one layer per group."""
    x = n.inputs[0]
    C, H, W = ctx.chw(n, x)
    rank = len(ctx.shape(x)) - 2
    if quant:
        wq: QConst = n.attrs["w"]
        w = wq.values
    else:
        if n.inputs[1] not in ctx.net.consts:
            raise ModelError(f"{n.where()}: the weights {n.inputs[1]!r} must be a constant")
        w = ctx.net.consts[n.inputs[1]].astype(np.float32)
    if w.ndim != rank + 2:
        raise ModelError(f"{n.where()}: weights of shape {w.shape} for a {rank}-D input")
    if rank == 1:
        w = w[:, :, None, :]
    O, Cg, kh, kw = w.shape  # noqa: E741
    ks = n.attrs.get("kernel_shape")
    if ks is not None and list(ks) != list(w.shape[2:] if rank == 2 else w.shape[3:]):
        raise ModelError(f"{n.where()}: kernel_shape={list(ks)} but the weights are "
                         f"{list(w.shape)}")
    dil = int_list(n, "dilations", rank, 1)
    st = int_list(n, "strides", rank, 1)
    (dy, dx), (sy, sx) = ((1, dil[0]), (1, st[0])) if rank == 1 else (dil, st)
    group = int(n.attrs.get("group", 1))
    if C % group or O % group or Cg != C // group:
        raise ModelError(f"{n.where()}: group={group} with {C} input channels and weights "
                         f"{list(w.shape)}")
    out_t = n.outputs[0]
    _, Hc, Wc = ctx.chw(n, out_t) if len(ctx.shape(out_t)) in (3, 4) else (0, 0, 0)
    pads = window_pads(n, rank, [kh, kw], [dy, dx], [sy, sx], H, W, Hc, Wc)
    pt, pl, pb, pr = pads
    want_h = (H + pt + pb - (dy * (kh - 1) + 1)) // sy + 1
    want_w = (W + pl + pr - (dx * (kw - 1) + 1)) // sx + 1
    if (want_h, want_w) != (Hc, Wc):
        raise ModelError(f"{n.where()}: output {Hc}x{Wc} but the attributes give "
                         f"{want_h}x{want_w}")
    depthwise = group == C and O == C and Cg == 1 and group > 1
    zw = 0
    if quant:
        zps = np.unique(wq.zero_point)
        if zps.size != 1:
            raise ModelError(f"{n.where()}: per-channel weight zero points {zps.tolist()} "
                             f"differ; npukit takes one zero point for the weights")
        zw = int(zps[0])
    nodes, ops, act, pool, t = fused(ctx, n, quant)
    if pool is None and group == 1 and one_pixel(kh, kw, H, W):
        return _one_pixel(ctx, n, w, zw, nodes, ops, act, t)
    if pool is not None:
        fpy, fpx = pool.attrs["kernel_shape"]
        spy, spx = pool.attrs.get("strides", [1, 1])
        _, Ho, Wo = ctx.chw(pool, pool.outputs[0])
        poper = common.POOL_MAX if pool.op == "MaxPool" else common.POOL_AVG
    else:
        fpy = fpx = spy = spx = 1
        Ho, Wo, poper = Hc, Wc, common.POOL_NONE
    fe = dy * (kh - 1) + 1
    need = sy * spy * Ho + max(sy * (fpy - spy - 1) + fe, 0)
    zx = n.attrs["x"][1] if quant else 0
    # L1 besides the input planes at one output row: filters (two slots), bias and
    # scale, an output row (two slots), the accumulator rows of one pooled row.
    rest = (2 * kh * kw * w.dtype.itemsize + 8 * O + 2 * Wo * ctx.dtype(x).itemsize
            + 4 * Wc * fpy + 32)
    src, tiled, hp = input_rows(ctx, n, ctx.tensor(x), C, H, W, ctx.dtype(x), pt, need,
                                zx, rest)
    name = ctx.layer("Conv")
    params = dict(InFeat=C, OutFeat=O, Width=W, Height=hp, in_tiled=tiled, Hreal=H,
                  PadT=pt, PadL=pl, Fcx=kw, Fcy=kh, Dcx=dx, Dcy=dy, Scx=sx, Scy=sy, Wc=Wc,
                  Hc=Hc, depthwise=depthwise, PoolOper=poper, Fpx=fpx, Fpy=fpy, Spx=spx,
                  Spy=spy, Wo=Wo, Ho=Ho, par_features=ctx.host,
                  Groups=1 if depthwise else group)
    wname = ctx.const(w, f"{n.name}_weights")
    if quant:
        scale, bias, (zx, zy, lo, hi) = _requant(ctx, n, t, O)
        GC.conv_pool_act(ctx.m, name, in_dt=ctx.dtype(x), w_dt=w.dtype,
                        out_dt=ctx.dtype(t), Zin=zx, Zw=zw, Zout=zy, Lo=lo, Hi=hi, **params)
        ins = [src, wname, ctx.const(bias, f"{n.name}_bias"),
               ctx.const(scale, f"{n.name}_scale")]
    else:
        bias = _float_bias(ctx, n, O)
        code, ap = ctx.act_params(act) if act is not None else (common.ACT_NONE, (0, 0))
        GC.conv_pool_act(ctx.m, name, in_dt="float32", w_dt="float32", out_dt="float32",
                        Act=code, ActParams=ap, **params)
        ins = [src, wname, ctx.const(bias, f"{n.name}_bias")]
    kind = "depthwise " if depthwise else (f"grouped({group}) " if group > 1 else "")
    detail = (f"{kind}{kh}x{kw} s{sy}x{sx} d{dy}x{dx} pads {list(pads)}, {C}->{O} ch, "
              f"{H}x{W} -> {Ho}x{Wo}" + ("" if tiled else ", whole input planes"))
    ctx.add(name, "+".join(ops), nodes, detail, ins, [ctx.output(t)])


def _float_bias(ctx: Lowering, n: Node, O: int) -> np.ndarray:  # noqa: E741
    """A float convolution's bias (zeros without one), which must be a constant."""
    if len(n.inputs) < 3 or not n.inputs[2]:
        return np.zeros(O, np.float32)
    if n.inputs[2] not in ctx.net.consts:
        raise ModelError(f"{n.where()}: the bias {n.inputs[2]!r} must be a constant")
    return ctx.net.consts[n.inputs[2]].astype(np.float32)


def _requant(ctx: Lowering, n: Node, t: str, O: int) -> tuple:  # noqa: E741
    """A quantized convolution writing ``t``: (its float32 requantisation scale per output
    channel, ``x_scale * w_scale / y_scale``; its int32 bias; (the input's and the output's
    zero points, the output's clamp))."""
    sx, zx = n.attrs["x"]
    sy, zy = n.attrs["y"]
    sw = np.broadcast_to(np.asarray(n.attrs["w"].scale, np.float32).reshape(-1), (O,))
    scale = ((np.float32(sx) * sw.astype(np.float32)) / np.float32(sy)).astype(np.float32)
    bias = n.attrs.get("bias")
    bias = np.zeros(O, np.int32) if bias is None else np.asarray(bias, np.int32)
    info = np.iinfo(ctx.dtype(t))
    lo, hi = n.attrs.get("lo"), n.attrs.get("hi")
    return scale, bias, (zx, zy, int(info.min) if lo is None else lo,
                         int(info.max) if hi is None else hi)


def one_pixel(kh: int, kw: int, H: int, W: int) -> bool:
    """Whether a dense convolution of a kh x kw filter over an H x W plane without pooling
    is a matrix-vector product (``_one_pixel``): a 1x1 filter over a 1x1 plane."""
    return (kh, kw, H, W) == (1, 1, 1, 1)


def _one_pixel(ctx: Lowering, n: Node, w: np.ndarray, zw: int, nodes: list[Node],
               ops: list[str], act: Node | None, t: str) -> None:
    """A 1x1 convolution of a 1x1 plane (squeeze-excite's, after a global pooling) as the
    matrix-vector product it is, [1, C] x [C, O] + bias (``GM.matmul``: the outputs side by
    side in a row, where the convolution kernel makes one pixel per feature); integers: the
    same int32 sums, requantised per output channel as the convolution does."""
    O, C = w.shape[:2]  # noqa: E741
    x = n.inputs[0]
    name = ctx.layer("Conv")
    shape = dict(M=1, K_=C, N=O, c="column", k_tiles=True)
    if "w" in n.attrs:  # QLinearConv
        scale, bias, (zx, zy, lo, hi) = _requant(ctx, n, t, O)
        k_tiled = GM.matmul(ctx.m, name, a_dt=ctx.dtype(x), b_dt=w.dtype, out_dt=ctx.dtype(t),
                            Za=zx, Zb=zw, scale_per_column=True, Zout=zy, Lo=lo, Hi=hi, **shape)
        tail = [ctx.const(bias, f"{n.name}_bias"), ctx.const(scale, f"{n.name}_scale")]
    else:
        code, ap = ctx.act_params(act) if act is not None else (common.ACT_NONE, (0, 0))
        k_tiled = GM.matmul(ctx.m, name, a_dt="float32", b_dt="float32", out_dt="float32",
                            Alpha=f32_bits(1.0), Beta=f32_bits(1.0), Act=code, ActParams=ap,
                            **shape)
        tail = [ctx.const(_float_bias(ctx, n, O), f"{n.name}_bias")]
    b = w.reshape(O, C)  # the K-tiled form reads B as [N, K]
    ins = [ctx.tensor(x), ctx.const(b if k_tiled else np.ascontiguousarray(b.T),
                                    f"{n.name}_weights"), *tail]
    ctx.add(name, "+".join(ops), nodes, f"1x1 of a 1x1 plane, {C}->{O} ch, as [1, {C}] x "
            f"[{C}, {O}]", ins, [ctx.output(t)])


def fused(ctx: Lowering, n: Node, quant: bool) -> tuple[list[Node], list[str], Node | None,
                                                        Node | None, str]:
    """What a convolution absorbs: an activation and a pooling without padding that alone
    read its output (and an activation after a max pooling). Returns the nodes, their
    operators, the activation, the pooling and the tensor the layer writes."""
    nodes, ops = [n], ["QLinearConv" if quant else "Conv"]
    if n.attrs.get("_folded"):
        ops[0] += "+BatchNormalization"
    t = n.outputs[0]
    act = ctx.fusable_act(t, quant)
    if act is not None:
        nodes.append(act)
        ops.append(act.op)
        t = act.outputs[0]
    pool = ctx.fusable_pool(t, quant)
    if pool is not None:
        nodes.append(pool)
        ops.append(pool.op)
        t = pool.outputs[0]
        if act is None and pool.op == "MaxPool":
            a2 = ctx.fusable_act(t, quant)
            if a2 is not None and _monotonic(a2):
                act = a2
                nodes.append(a2)
                ops.append(a2.op)
                t = a2.outputs[0]
    return nodes, ops, act, pool, t


def _monotonic(a: Node) -> bool:
    """Whether activation ``a`` never decreases, so that it commutes with a max pooling
    (HardSwish dips below 0 before it grows; a negative slope reverses the order)."""
    if a.op == "HardSwish":
        return False
    if a.op in ("LeakyRelu", "HardSigmoid"):
        return a.attrs.get("alpha", 0.01 if a.op == "LeakyRelu" else 0.2) >= 0
    return True
