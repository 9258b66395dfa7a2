"""Matrix products: Gemm, MatMul and QLinearMatMul (and the transposes Gemm needs)."""

from __future__ import annotations

import numpy as np

from ...errors import ModelError
from ...tiler import layer_generators as G
from ...tiler import layer_generators_matmul as GM
from ...tiler.basic_kernels.common import f32_bits
from ..reader import Node, QConst
from .context import Lowering


def transposed(ctx: Lowering, n: Node, t: str) -> str:
    """A tensor read as a matrix [rows, last axis], transposed by a layer (a constant is
    transposed here; a constant this made, transposed back, is the original)."""
    if t in ctx.net.consts:
        if t.endswith("__T") and t[:-3] in ctx.net.consts:
            return t[:-3]
        name = f"{t}__T"
        v = ctx.net.consts[t]
        # A view: copied when a layer reads it (a K-tiled product reads the original).
        ctx.net.consts[name] = v.reshape(-1, v.shape[-1]).T
        return name
    *lead, c = ctx.shape(t)
    r = int(np.prod(lead))
    out = f"{t}__T_{n.name}"
    ctx.net.info[out] = type(ctx.info(t))((c, r), ctx.dtype(t))
    name = ctx.layer("Transpose")
    G.transpose(ctx.m, name, dt=ctx.dtype(t), Planes=1, A=r, B=c, I=1)
    ctx.add(name, "Transpose", [], f"[{r}, {c}] -> [{c}, {r}] for {n.name}",
            [ctx.tensor(t)], [ctx.output(out)])
    return out


def gemm(ctx: Lowering, n: Node) -> None:
    a, b = n.inputs[0], n.inputs[1]
    for t in (a, b):
        if len(ctx.shape(t)) != 2:
            raise ModelError(f"{n.where()}: input {t!r} has shape {ctx.shape(t)}; Gemm "
                             f"takes 2-D matrices")
    if n.attrs.get("transA", 0):
        a = transposed(ctx, n, a)
    if n.attrs.get("transB", 0):
        b = transposed(ctx, n, b)
    c = n.inputs[2] if len(n.inputs) > 2 and n.inputs[2] else None
    float_matmul(ctx, n, a, b, c, float(n.attrs.get("alpha", 1.0)),
                 float(n.attrs.get("beta", 1.0)))


def batched(shape) -> bool:
    """Whether a right operand of this shape holds several matrices."""
    return len(shape) > 2 and any(d != 1 for d in shape[:-2])


def matmul(ctx: Lowering, n: Node) -> None:
    a, b = n.inputs[:2]
    if batched(ctx.shape(b)):
        for t in (a, b):
            if ctx.dtype(t) != np.float32:
                raise ModelError(f"{n.where()}: a batched MatMul of {ctx.dtype(t)} tensors is "
                                 f"not supported outside a DequantizeLinear/QuantizeLinear "
                                 f"pair")
        return batched_matmul(ctx, n, a, b, "MatMul")
    float_matmul(ctx, n, a, b, None, 1.0, 1.0)


def _batch_item(ctx: Lowering, n: Node, t: str, count: int, item: int, size: int) -> str:
    """Matrix ``item`` of the ``count`` matrices of ``size`` values that tensor ``t`` holds:
    ``t`` itself when it holds one, else a ``pad_axis`` layer cropping the others."""
    src = ctx.tensor(t)
    if count == 1:
        return src
    dt = ctx.dtype(t)
    name = ctx.layer("Slice")
    G.pad_axis(ctx.m, name, dt=dt, Outer=1, D=count, Inner=size, PadBegin=-item,
               PadEnd=item + 1 - count)
    dst = ctx.local(f"{t}_{item}_{n.name}", dt, size)
    ctx.add(name, "Slice", [], f"matrix {item} of {count} of {t!r} for {n.name}", [src],
            [dst])
    return dst


def batched_matmul(ctx: Lowering, n: Node, a: str, b: str, ops: str, quant: dict | None = None
                   ) -> None:
    """MatMul with batched operands (numpy's broadcasting of the leading dimensions): one
    ``batched_matmul`` layer when the batch comes down to two dimensions (those where the
    same operands hold a matrix per index merged); else per output matrix, the two operand
    matrices (cropped when the operand holds several), a ``matmul`` layer, then one
    ``concat`` of the products. ``quant``: ``GM.matmul``'s integer parameters and the scale
    constant (per tensor), else float32."""
    sa, sb = ctx.shape(a), ctx.shape(b)
    sa2 = (1,) + tuple(sa) if len(sa) == 1 else tuple(sa)
    M, K_, N = sa2[-2], sa2[-1], sb[-1]
    if sb[-2] != K_:
        raise ModelError(f"{n.where()}: shapes {list(sa)} and {list(sb)} do not multiply")
    out = n.outputs[0]
    dt = ctx.dtype(out)
    batch = ctx.info(out).shape[:-2] if len(sa) > 1 else ctx.info(out).shape[:-1]
    rank = len(batch)
    ba = (1,) * (rank - len(sa2[:-2])) + tuple(sa2[:-2])
    bb = (1,) * (rank - len(sb[:-2])) + tuple(sb[:-2])
    # The batch dimensions of more than one index, those of one pattern (which operands hold
    # a matrix per index) merged: up to two are spaces of one layer.
    groups: list[tuple[int, bool, bool]] = []
    for d, da, db in zip(batch, ba, bb):
        if d > 1 and groups and groups[-1][1:] == (da > 1, db > 1):
            groups[-1] = (groups[-1][0] * d, da > 1, db > 1)
        elif d > 1:
            groups.append((d, da > 1, db > 1))
    if len(groups) <= 2:
        name = ctx.layer(ops)
        kw = dict(Batch=tuple(g[0] for g in groups), M=M, K_=K_, N=N,
                  a_walks=tuple(g[1] for g in groups), b_walks=tuple(g[2] for g in groups))
        if quant is None:
            GM.batched_matmul(ctx.m, name, a_dt="float32", b_dt="float32", out_dt="float32",
                              Alpha=f32_bits(1.0), Beta=f32_bits(1.0), **kw)
            ins = [ctx.tensor(a), ctx.tensor(b)]
        else:
            scale, q = quant["scale"], {k: v for k, v in quant.items() if k != "scale"}
            GM.batched_matmul(ctx.m, name, a_dt=ctx.dtype(a), b_dt=ctx.dtype(b), out_dt=dt,
                              **q, **kw)
            ins = [ctx.tensor(a), ctx.tensor(b), scale]
        count = int(np.prod(batch))
        ctx.add(name, ops, [n], f"{count} products of [{M}, {K_}] x [{K_}, {N}]", ins,
                [ctx.output(out)])
        return
    prods = []
    for idx in np.ndindex(*batch):
        ia = int(np.ravel_multi_index([i if d > 1 else 0 for i, d in zip(idx, ba)], ba))
        ib = int(np.ravel_multi_index([i if d > 1 else 0 for i, d in zip(idx, bb)], bb))
        am = _batch_item(ctx, n, a, int(np.prod(ba)), ia, M * K_)
        bm = _batch_item(ctx, n, b, int(np.prod(bb)), ib, K_ * N)
        name = ctx.layer(ops)
        if quant is None:
            GM.matmul(ctx.m, name, a_dt="float32", b_dt="float32", out_dt="float32", M=M,
                     K_=K_, N=N, Alpha=f32_bits(1.0), Beta=f32_bits(1.0))
            ins = [am, bm]
        else:
            scale, kw = quant["scale"], {k: v for k, v in quant.items() if k != "scale"}
            GM.matmul(ctx.m, name, a_dt=ctx.dtype(a), b_dt=ctx.dtype(b), out_dt=dt, M=M, K_=K_,
                     N=N, **kw)
            ins = [am, bm, scale]
        prod = ctx.local(f"{out}_{len(prods)}", dt, M * N)
        ctx.add(name, ops, [], f"[{M}, {K_}] x [{K_}, {N}], matrix {idx} of {n.name}", ins,
                [prod])
        prods.append(prod)
    name = ctx.layer("Concat")
    G.concat(ctx.m, name, dt=dt, Outer=1, Ds=(1,) * len(prods), Inner=M * N)
    ctx.add(name, ops, [n], f"{len(prods)} products of [{M}, {K_}] x [{K_}, {N}] together",
            prods, [ctx.output(out)])


def mk_sizes(n: Node, a_shape, b_shape) -> tuple[int, int, int]:
    if len(b_shape) == 1:
        b_shape = (b_shape[0], 1)
    if len(b_shape) > 2 and any(d != 1 for d in b_shape[:-2]):
        raise ModelError(f"{n.where()}: a batched right operand {list(b_shape)} is not "
                         f"supported (npukit multiplies by one [K, N] matrix)")
    k, nn = b_shape[-2], b_shape[-1]
    m = int(np.prod(a_shape[:-1])) if len(a_shape) > 1 else 1
    if a_shape[-1] != k:
        raise ModelError(f"{n.where()}: shapes {list(a_shape)} and {list(b_shape)} do not "
                         f"multiply")
    return m, k, nn


def c_kind(ctx: Lowering, n: Node, c: str, M: int, N: int) -> str:
    s = ctx.shape(c)
    size = int(np.prod(s))
    if size == 1:
        return "scalar"
    s2 = (1,) * (2 - len(s)) + tuple(s)
    if len(s2) > 2:
        raise ModelError(f"{n.where()}: C of shape {list(s)} does not broadcast to [M, N]")
    if s2 == (1, N):
        return "column"
    if s2 == (M, 1):
        return "row"
    if s2 == (M, N):
        return "element"
    raise ModelError(f"{n.where()}: C of shape {list(s)} does not broadcast to [{M}, {N}]")


def float_matmul(ctx: Lowering, n: Node, a: str, b: str, c: str | None, alpha: float,
                 beta: float) -> None:
    for t in (a, b) + ((c,) if c else ()):
        if ctx.dtype(t) != np.float32:
            raise ModelError(f"{n.where()}: {n.op} of {ctx.dtype(t)} tensors outside a "
                             f"DequantizeLinear/QuantizeLinear pair is not supported")
    M, K_, N = mk_sizes(n, ctx.shape(a), ctx.shape(b))
    nodes, ops, out, code, ap = ctx.with_float_act(n)
    ckind = c_kind(ctx, n, c, M, N) if c else None
    name = ctx.layer(n.op)
    if GM.matmul(ctx.m, name, a_dt="float32", b_dt="float32", out_dt="float32", M=M, K_=K_, N=N,
                c=ckind, Alpha=f32_bits(alpha), Beta=f32_bits(beta), Act=code, ActParams=ap,
                k_tiles=True):
        b = transposed(ctx, n, b) if N > 1 else b  # the K-tiled form reads B as [N, K]
    ins = [ctx.tensor(a), ctx.tensor(b)] + ([ctx.tensor(c)] if c else [])
    detail = f"[{M}, {K_}] x [{K_}, {N}]" + (f" + C ({ckind})" if c else "") + \
        (f", alpha {alpha:g}" if alpha != 1 else "") + (f", beta {beta:g}" if c and beta != 1
                                                        else "")
    ctx.add(name, ops, nodes, detail, ins, [ctx.output(out)])


def qmatmul(ctx: Lowering, n: Node) -> None:
    a = n.inputs[0]
    sa, za = n.attrs["a"]
    sy, zy = n.attrs["y"]
    alpha = np.float32(n.attrs.get("alpha", 1.0))
    if "w" in n.attrs:
        wq: QConst = n.attrs["w"]
        bvals = wq.values
        if bvals.ndim != 2:
            raise ModelError(f"{n.where()}: weights of shape {list(bvals.shape)}; npukit "
                             f"multiplies by one [K, N] matrix")
        zps = np.unique(wq.zero_point)
        if zps.size != 1:
            raise ModelError(f"{n.where()}: per-column weight zero points differ "
                             f"({zps.tolist()})")
        zb = int(zps[0])
        sb = np.asarray(wq.scale, np.float32).reshape(-1)
        b_shape, b_dt = bvals.shape, bvals.dtype

        def b_tensor(k_tiled: bool) -> str:
            return ctx.const(bvals.T if k_tiled else bvals, f"{n.name}_weights")
    else:
        bt = n.inputs[1]
        sb_, zb = n.attrs["b"]
        sb = np.asarray([sb_], np.float32)
        b_shape, b_dt = ctx.shape(bt), ctx.dtype(bt)
        if batched(b_shape) and n.attrs.get("bias") is None and alpha == 1:
            info = np.iinfo(ctx.dtype(n.outputs[0]))
            scale = (np.float32(sa) * sb) / np.float32(sy)
            return batched_matmul(ctx, n, a, bt, "QLinearMatMul", dict(
                scale=ctx.const(scale, f"{n.name}_scale"), Za=za, Zb=zb, Zout=zy,
                Lo=n.attrs.get("lo", int(info.min)), Hi=n.attrs.get("hi", int(info.max))))

        def b_tensor(k_tiled: bool) -> str:
            return ctx.tensor(transposed(ctx, n, bt) if k_tiled and N > 1 else bt)
    M, K_, N = mk_sizes(n, ctx.shape(a), b_shape)
    scale = ((alpha * np.float32(sa)) * sb) / np.float32(sy) if alpha != 1 else \
        (np.float32(sa) * sb) / np.float32(sy)
    per_col = scale.size > 1
    if per_col and scale.size != N:
        raise ModelError(f"{n.where()}: {scale.size} weight scales for {N} columns")
    info = np.iinfo(ctx.dtype(n.outputs[0]))
    lo, hi = n.attrs.get("lo", int(info.min)), n.attrs.get("hi", int(info.max))
    bias = n.attrs.get("bias")
    ckind = None
    if bias is not None:
        bias = np.asarray(bias, np.int32)
        ckind = "scalar" if bias.size == 1 else ("column" if bias.size == N else None)
        if ckind is None:
            raise ModelError(f"{n.where()}: a bias of shape {list(bias.shape)} for {N} "
                             f"columns")
    name = ctx.layer("QMatMul")
    k_tiled = GM.matmul(ctx.m, name, a_dt=ctx.dtype(a), b_dt=b_dt,
                       out_dt=ctx.dtype(n.outputs[0]), M=M, K_=K_, N=N, c=ckind, Za=za, Zb=zb,
                       scale_per_column=per_col, Zout=zy, Lo=lo, Hi=hi, k_tiles=True)
    ins = [ctx.tensor(a), b_tensor(k_tiled)]
    if bias is not None:
        ins.append(ctx.const(bias.reshape(-1), f"{n.name}_bias"))
    ins.append(ctx.const(scale.astype(np.float32).reshape(-1), f"{n.name}_scale"))
    ctx.add(name, "QLinearMatMul", [n], f"[{M}, {K_}] x [{K_}, {N}]", ins,
            [ctx.output(n.outputs[0])])
