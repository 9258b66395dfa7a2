"""Quantization: QuantizeLinear, DequantizeLinear, the integer clamp of a fused
quantized activation, and 8-bit functions as 256-entry tables."""

from __future__ import annotations

import numpy as np

from ...errors import ModelError
from ...tiler import layer_generators as G
from ...tiler.basic_kernels import common, elementwise
from ...tiler.basic_kernels.common import f32_bits
from ..reader import Node
from .context import Lowering, rows_cols
from .elementwise import unary
from .ort_functions import ort_logistic, ort_tanh


def qclamp(ctx: Lowering, n: Node) -> None:
    dt = ctx.dtype(n.inputs[0])
    unary(ctx, n, dt, dt, 0, n.attrs["lo"], n.attrs["hi"],
          f"clamp to [{n.attrs['lo']}, {n.attrs['hi']}]")


def per_tensor(ctx: Lowering, n: Node, what: str) -> tuple[np.float32, int]:
    s = np.asarray(ctx.net.consts.get(n.inputs[1]), np.float32) if n.inputs[1] in \
        ctx.net.consts else None
    if s is None:
        raise ModelError(f"{n.where()}: the scale {n.inputs[1]!r} must be a constant")
    z = ctx.net.consts[n.inputs[2]] if len(n.inputs) > 2 and n.inputs[2] else \
        np.zeros(1, ctx.dtype(n.outputs[0] if what == "quantize" else n.inputs[0]))
    if s.size != 1 or np.asarray(z).size != 1:
        raise ModelError(f"{n.where()}: axis={n.attrs.get('axis', 1)} with {s.size} scales: "
                         f"per-axis {what} of computed tensors is not supported (weights "
                         f"are folded)")
    if n.attrs.get("block_size", 0):
        raise ModelError(f"{n.where()}: block_size={n.attrs['block_size']} is not supported")
    return np.float32(s.reshape(-1)[0]), int(np.asarray(z).reshape(-1)[0])


def quantize(ctx: Lowering, n: Node) -> None:
    s, z = per_tensor(ctx, n, "quantize")
    if n.attrs.get("saturate", 1) != 1:
        raise ModelError(f"{n.where()}: saturate=0 applies to float8 outputs only")
    out_dt = ctx.info(n.outputs[0]).dtype
    if out_dt not in (np.int8, np.uint8):
        raise ModelError(f"{n.where()}: output type {out_dt} (npukit quantizes to int8 and "
                         f"uint8)")
    unary(ctx, n, "float32", out_dt, elementwise.UN_QUANT, f32_bits(s), z,
          f"scale {s:g}, zero point {z}")


def dequantize(ctx: Lowering, n: Node) -> None:
    s, z = per_tensor(ctx, n, "dequantize")
    in_dt = ctx.dtype(n.inputs[0])
    if in_dt not in (np.int8, np.uint8):
        raise ModelError(f"{n.where()}: input type {in_dt} (npukit dequantizes int8 and "
                         f"uint8)")
    ctx.steps[n.outputs[0]] = float(s)
    unary(ctx, n, in_dt, "float32", elementwise.UN_DEQUANT, f32_bits(s), z,
          f"scale {s:g}, zero point {z}")


def qlut(ctx: Lowering, n: Node) -> None:
    """An 8-bit function as a 256-entry table (npukit.lut): entry x holds
    quantize(f(dequantize(x))), f in float32 as ONNX Runtime computes it (its error is
    reported against float64)."""
    from ...lut import Lut

    in_dt, out_dt = ctx.dtype(n.inputs[0]), ctx.dtype(n.outputs[0])
    (xs, xz), (ys, yz) = n.attrs["x"], n.attrs["y"]
    info_in, info_out = np.iinfo(in_dt), np.iinfo(out_dt)
    xs_ = np.arange(info_in.min, info_in.max + 1)
    real = (xs_ - xz).astype(np.float32) * np.float32(xs)
    f = lut_function(n)
    y = np.asarray(ort_function(n)(real), np.float32)
    table = common.quantize(y, ys, yz, int(info_out.min), int(info_out.max)).astype(out_dt)
    Lut(table)  # checks the table as npukit.lut does
    size = ctx.info(n.outputs[0]).size
    rows, cols = rows_cols(size, ctx.max_cols)
    name = ctx.layer(f"Lut{n.attrs['fn']}")
    G.lut(ctx.m, name, in_dt=in_dt, out_dt=out_dt, Rows=rows, Cols=cols)
    err = float(np.abs((table.astype(np.float64) - yz) * float(ys) - f(real.astype(
        np.float64))).max())
    ctx.add(name, f"{n.attrs['fn']} (table)", [n],
            f"256-entry table of {n.attrs['fn']}, max error {err:.3g} (output scale "
            f"{float(ys):.3g})",
            [ctx.tensor(n.inputs[0]), ctx.const(table, f"{n.name}_table")],
            [ctx.output(n.outputs[0])])


def ort_function(n: Node):
    """The float32 function ONNX Runtime's CPU kernels compute for a QLut node: MLAS's
    ``Tanh`` and ``Sigmoid``, ``LeakyRelu`` as ``x * alpha`` in float32, the others exact."""
    fn = n.attrs["fn"]
    if fn == "Sigmoid":
        return ort_logistic
    if fn == "Tanh":
        return ort_tanh
    if fn == "LeakyRelu":
        alpha = np.float32(n.attrs.get("alpha", 0.01))
        return lambda x: np.where(x >= 0, x, x * alpha)
    f = lut_function(n)
    return lambda x: np.asarray(f(x.astype(np.float64)), np.float64).astype(np.float32)


def lut_function(n: Node):
    """The float64 function of a QLut node."""
    fn = n.attrs["fn"]
    if fn == "Sigmoid":
        return lambda x: 1 / (1 + np.exp(-x))
    if fn == "Tanh":
        return np.tanh
    if fn == "LeakyRelu":
        alpha = n.attrs.get("alpha", 0.01)
        return lambda x: np.where(x >= 0, x, alpha * x)
    if fn == "Relu":
        return lambda x: np.maximum(x, 0)
    if fn == "Clip":
        lo, hi = n.attrs.get("bounds") or (None, None)
        return lambda x: np.clip(x, -np.inf if lo is None else lo, np.inf if hi is None else hi)
    if fn == "Identity":
        return lambda x: x
    raise ModelError(f"{n.where()}: no table for {fn}")
