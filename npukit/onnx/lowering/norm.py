"""Normalisation: LRN, LayerNormalization, InstanceNormalization and GroupNormalization (a
layer normalisation of each plane or group of planes, then a per-channel scale and shift
layer), and BatchNormalization that no
convolution absorbed (a scale and a shift layer)."""

from __future__ import annotations

import math

import numpy as np

from ...errors import ModelError
from ...tiler import layer_generators as G
from ...tiler.basic_kernels import elementwise
from ...tiler.basic_kernels.common import f32_bits
from ..reader import Node
from .context import Lowering
from .elementwise import binary_layer


def lrn(ctx: Lowering, n: Node) -> None:
    x = n.inputs[0]
    s = ctx.shape(x)
    if ctx.dtype(x) != np.float32 or len(s) < 3 or s[0] != 1:
        raise ModelError(f"{n.where()}: LRN takes float32 [1, C, ...] data, got "
                         f"{ctx.dtype(x)} {list(s)}")
    if "size" not in n.attrs:
        raise ModelError(f"{n.where()}: the attribute size is required")
    size = int(n.attrs["size"])
    if size < 1:
        raise ModelError(f"{n.where()}: size={size}; ONNX's LRN sums over size >= 1 "
                         f"channels")
    alpha = np.float32(n.attrs.get("alpha", 1e-4))
    C, cols = s[1], int(np.prod(s[2:]))
    name = ctx.layer("LRN")
    G.lrn(ctx.m, name, Planes=1, C=C, Cols=cols, Lo=(size - 1) // 2,
          Hi=math.ceil((size - 1) / 2), AlphaOverSize=f32_bits(alpha / np.float32(size)),
          Beta=f32_bits(n.attrs.get("beta", 0.75)), Bias=f32_bits(n.attrs.get("bias", 1.0)))
    ctx.add(name, "LRN", [n], f"size {size} over {C} channels of {cols}", [ctx.tensor(x)],
            [ctx.output(n.outputs[0])])


def batch_norm(ctx: Lowering, n: Node) -> None:
    if n.attrs.get("spatial", 1) != 1:
        raise ModelError(f"{n.where()}: spatial={n.attrs['spatial']} (statistics per "
                         f"element) is not supported")
    if n.attrs.get("training_mode", 0) or len([o for o in n.outputs if o]) > 1:
        raise ModelError(f"{n.where()}: training mode (running statistics outputs) is not "
                         f"supported")
    x = n.inputs[0]
    s = ctx.shape(x)
    if any(t not in ctx.net.consts for t in n.inputs[1:5]):
        raise ModelError(f"{n.where()}: scale, B, mean and var must be constants")
    scale, beta, mean, var = (ctx.net.consts[t].astype(np.float64) for t in n.inputs[1:5])
    a = scale / np.sqrt(var + n.attrs.get("epsilon", 1e-5))
    shape = (s[1],) + (1,) * (len(s) - 2)
    mul = f"{n.name}__bn_mul"
    ctx.net.info[mul] = ctx.net.info[n.outputs[0]]
    ka, kb = f"{n.name}__bn_a", f"{n.name}__bn_b"
    ctx.net.consts[ka] = a.astype(np.float32).reshape(shape)
    ctx.net.consts[kb] = (beta - mean * a).astype(np.float32).reshape(shape)
    binary_layer(ctx, Node("Mul", n.name, [x, ka], [mul], {}), x, ka, mul, [],
                 elementwise.BIN_MUL, "BatchNormalization (scale)")
    binary_layer(ctx, Node("Add", n.name, [mul, kb], n.outputs, {}), mul, kb,
                 n.outputs[0], [n], elementwise.BIN_ADD, "BatchNormalization (shift)")


def _normalise_rows(ctx: Lowering, n: Node, x: str, out: str, rows: int, d: int,
                    scale: str, bias: str, stats: list[str]) -> None:
    name = ctx.layer("LayerNorm")
    G.layer_norm(ctx.m, name, N=rows, D=d, Eps=f32_bits(n.attrs.get("epsilon", 1e-5)))
    ctx.add(name, "LayerNormalization" if n.op == "LayerNormalization" else f"{n.op} (rows)",
            [n] if n.op == "LayerNormalization" else [], f"{rows} rows of {d}",
            [ctx.tensor(x), scale, bias], [ctx.output(out), *stats])


def instance_norm(ctx: Lowering, n: Node) -> None:
    """InstanceNormalization: each plane of each image normalised as a row, then ``*
    scale[c] + B[c]``."""
    _grouped(ctx, n, ctx.shape(n.inputs[0])[1] if len(ctx.shape(n.inputs[0])) > 1 else 1)


def group_norm(ctx: Lowering, n: Node) -> None:
    """GroupNormalization: the ``num_groups`` groups of channels of each image normalised as
    rows, then ``* scale[c] + bias[c]`` (opset 18's one value per group, constant, repeated
    over the group's channels)."""
    if "num_groups" not in n.attrs:
        raise ModelError(f"{n.where()}: the attribute num_groups is required")
    _grouped(ctx, n, int(n.attrs["num_groups"]))


def _grouped(ctx: Lowering, n: Node, groups: int) -> None:
    x, out = n.inputs[0], n.outputs[0]
    s = ctx.shape(x)
    if len(s) < 3 or ctx.dtype(x) != np.float32:
        raise ModelError(f"{n.where()}: {n.op} takes float32 [N, C, ...] data, got "
                         f"{ctx.dtype(x)} {list(s)}")
    if groups < 1 or s[1] % groups:
        raise ModelError(f"{n.where()}: num_groups={groups} does not divide the {s[1]} "
                         f"channels")
    shape = (s[1],) + (1,) * (len(s) - 2)  # [C, 1, ...]: broadcast along the planes
    params = []
    for t in n.inputs[1:3]:
        k = f"{t}__per_channel"
        if ctx.shape(t) == (groups,) and groups != s[1] and t in ctx.net.consts:
            ctx.net.consts[k] = np.repeat(ctx.net.consts[t], s[1] // groups).reshape(shape)
        elif ctx.shape(t) == (s[1],) and ctx.dtype(t) == np.float32:
            ctx.net.info[k] = type(ctx.info(out))(shape, np.dtype(np.float32))
            ctx.of[k] = ctx.tensor(t)
        else:
            raise ModelError(f"{n.where()}: the scale and the shift take {s[1]} float32 "
                             f"values (one per channel; or, constant, one per group), {t!r} "
                             f"is {ctx.dtype(t)} {list(ctx.shape(t))}")
        params.append(k)
    rows, d = s[0] * groups, int(np.prod(s[1:])) // groups
    norm = f"{out}__normalised"
    ctx.net.info[norm] = ctx.net.info[out]
    ones = ctx.const(np.ones(d, np.float32), f"{n.name}_ones")
    zeros = ctx.const(np.zeros(d, np.float32), f"{n.name}_zeros")
    stats = [ctx.local(f"{n.name}_{k}", np.float32, rows) for k in ("mean", "inv_std")]
    _normalise_rows(ctx, n, x, norm, rows, d, ones, zeros, stats)
    ka, kb = params
    scaled = f"{out}__scaled"
    ctx.net.info[scaled] = ctx.net.info[out]
    binary_layer(ctx, Node("Mul", n.name, [norm, ka], [scaled], {}), norm, ka, scaled, [],
                 elementwise.BIN_MUL, f"{n.op} (scale)")
    binary_layer(ctx, Node("Add", n.name, [scaled, kb], [out], {}), scaled, kb, out, [n],
                 elementwise.BIN_ADD, f"{n.op} (shift)")


def layer_norm(ctx: Lowering, n: Node) -> None:
    x = n.inputs[0]
    s = ctx.shape(x)
    axis = int(n.attrs.get("axis", -1))
    if not -len(s) <= axis < len(s):
        raise ModelError(f"{n.where()}: axis={axis} for a rank-{len(s)} input")
    axis %= len(s)
    rows, d = int(np.prod(s[:axis])), int(np.prod(s[axis:]))
    ins = [t for t in n.inputs[:3] if t]
    for t in ins:
        if ctx.dtype(t) != np.float32:
            raise ModelError(f"{n.where()}: LayerNormalization of {ctx.dtype(t)} input {t!r} "
                             f"is not supported (float32 only)")
    for t, what in zip(ins[1:], ("Scale", "B")):
        if int(np.prod(ctx.shape(t))) != d:
            raise ModelError(f"{n.where()}: {what} {t!r} of shape {list(ctx.shape(t))} for "
                             f"the {list(s[axis:])} normalised; npukit takes one value each")
    bias = ctx.tensor(ins[2]) if len(ins) > 2 else ctx.const(np.zeros(d, np.float32),
                                                             f"{n.name}_zero_bias")
    outs = list(n.outputs) + [""] * (3 - len(n.outputs))
    stats = [ctx.output(o) if o else ctx.local(f"{n.name}_{k}", np.float32, rows)
             for o, k in zip(outs[1:], ("mean", "inv_std"))]
    _normalise_rows(ctx, n, x, outs[0], rows, d, ctx.tensor(ins[1]), bias, stats)
