"""Resize and Upsample of the last two axes, nearest or bilinear: the source rows and columns
of every output row and column are computed here as ONNX Runtime computes them (float32
coordinates), then one ``resize_planes`` layer reads them as tables; cubic: ``resize_cubic``."""

from __future__ import annotations

import numpy as np

from ...errors import ModelError
from ...tiler import layer_generators_indexed as GI
from ..reader import Node
from .context import Lowering
from .resize_cubic import cubic

F = np.float32
COORDS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
          "asymmetric", "tf_half_pixel_for_nn")
NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def source_coords(mode: str, out_len: int, in_len: int, scale: np.float32) -> np.ndarray:
    """The input coordinate of each output index (ONNX Runtime's
    ``GetOriginalCoordinateFromResizedCoordinate``, in float32)."""
    x = np.arange(out_len, dtype=F)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_half_pixel_for_nn":
        return (x + F(0.5)) / scale
    if mode == "align_corners":
        if out_len == 1:
            return np.zeros(1, F)
        return x * F(in_len - 1) / F(out_len - 1)
    if mode == "pytorch_half_pixel" and out_len == 1:
        return np.zeros(1, F)
    if mode == "half_pixel_symmetric":  # ONNX Runtime adds the terms in double
        adjustment = F(out_len) / (scale * F(in_len))
        offset = F(in_len) / F(2) * (F(1) - adjustment)
        return (np.float64(offset) + (x.astype(np.float64) + 0.5) / np.float64(scale)
                - 0.5).astype(F)
    return ((x + F(0.5)) / scale - F(0.5)).astype(F)


def nearest_index(x: np.ndarray, how: str, in_len: int, scale) -> np.ndarray:
    """ONNX Runtime's ``GetNearestPixelFromOriginal``, clamped to the axis; ``simple`` (Resize
    before opset 11, Upsample): ceil when downsampling, else truncation."""
    fl = np.floor(x)
    if how == "simple":
        i = np.ceil(x) if scale < 1 else np.trunc(x)
    elif how == "floor":
        i = fl
    elif how == "ceil":
        i = np.ceil(x)
    else:
        half = x == fl + F(0.5)
        rounded = np.where(x < 0, -np.floor(-x + F(0.5)), np.floor(x + F(0.5)))
        i = np.where(half, fl if how == "round_prefer_floor" else fl + 1, rounded)
    return np.clip(i, 0, in_len - 1).astype(np.int32)


def tables(linear: bool, mode: str, how: str, out_len: int, in_len: int, scale):
    """(pairs of source indices, fraction of the second) for one axis."""
    x = source_coords(mode, out_len, in_len, F(scale))
    if not linear:
        i = nearest_index(x, how, in_len, scale)
        return np.stack([i, i], 1).reshape(-1), np.zeros(out_len, F)
    x = np.clip(x, F(0), F(in_len - 1))
    i0 = np.minimum(x.astype(np.int32), in_len - 1)
    i1 = np.minimum(i0 + 1, in_len - 1)
    return np.stack([i0, i1], 1).reshape(-1).astype(np.int32), (x - i0.astype(F)).astype(F)


def resize(ctx: Lowering, n: Node) -> None:
    x, out = n.inputs[0], n.outputs[0]
    s, so = ctx.shape(x), ctx.info(out).shape
    rank = len(s)
    a = n.attrs
    if n.op == "Upsample" or ctx.net.opset < 11:  # Upsample, Resize-10: asymmetric
        scales = a.get("scales")
        scales = ctx.const_input(n, 1, "scales") if scales is None else np.asarray(scales)
        sizes, mode, how = None, "asymmetric", "simple"
    else:
        scales, sizes = ctx.const_input(n, 2, "scales"), ctx.const_input(n, 3, "sizes")
        mode = a.get("coordinate_transformation_mode", "half_pixel")
        how = a.get("nearest_mode", "round_prefer_floor")
        if how not in NEAREST:
            raise ModelError(f"{n.where()}: nearest_mode={how!r}; ONNX takes {list(NEAREST)}")
    kind = a.get("mode", "nearest")
    if kind not in ("nearest", "linear", "bilinear", "cubic"):
        raise ModelError(f"{n.where()}: mode={kind!r}; npukit resizes with 'nearest', "
                         f"'linear' or 'cubic'")
    if a.get("antialias", 0):
        raise ModelError(f"{n.where()}: antialias=1 is not supported")
    if mode not in COORDS:
        raise ModelError(f"{n.where()}: coordinate_transformation_mode={mode!r}; npukit takes "
                         f"{list(COORDS)}")
    axes = [int(v) % rank for v in a.get("axes", range(rank))]
    if rank < 2 or any(so[d] != s[d] for d in range(rank - 2)):
        raise ModelError(f"{n.where()}: resizes {list(s)} to {list(so)}; npukit resizes the "
                         f"last two axes only")
    full = {d: None for d in range(rank)}
    if scales is not None:
        if not all(np.isfinite(v) and v > 0 for v in np.asarray(scales, np.float64).reshape(-1)):
            raise ModelError(f"{n.where()}: scales {np.asarray(scales).reshape(-1).tolist()}: "
                             f"each must be a finite number above 0")
        full.update({d: F(v) for d, v in zip(axes, scales)})
    else:  # ONNX Runtime's scales from sizes: before the policy, the sizes asked for
        asked = sizes if sizes is not None else [so[d] for d in axes]
        full.update({d: F(v) / F(s[d]) for d, v in zip(axes, asked)})
        policy = a.get("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            common = pick(full[d] for d in axes)
            full.update({d: common for d in axes})
    if mode == "align_corners" and scales is not None:
        for d in (rank - 2, rank - 1):
            if full[d] is not None and F(full[d]) * F(s[d]) != so[d]:
                raise ModelError(
                    f"{n.where()}: align_corners with scale {float(full[d]):g} on axis {d} of "
                    f"size {s[d]} ({float(F(full[d]) * F(s[d])):g} rows or columns, {so[d]} "
                    f"made): ONNX aligns the corners of the fractional length, ONNX Runtime "
                    f"those of the {so[d]} made; give sizes instead of scales")
    linear = kind != "nearest"
    if linear and ctx.dtype(x) != np.float32:
        raise ModelError(f"{n.where()}: {kind} resizing of {ctx.dtype(x)} data is not "
                         f"supported (float32 only)")
    h, w, ho, wo = s[-2], s[-1], so[-2], so[-1]
    if kind == "cubic":
        return cubic(ctx, n, source_coords(mode, wo, w, F(full[rank - 1] or F(wo / w))),
                     source_coords(mode, ho, h, F(full[rank - 2] or F(ho / h))))
    ys, fy = tables(linear, mode, how, ho, h, full[rank - 2] or F(ho / h))
    xs, fx = tables(linear, mode, how, wo, w, full[rank - 1] or F(wo / w))
    planes = int(np.prod(s[:-2]))
    name = ctx.layer(n.op)
    GI.resize_planes(ctx.m, name, dt=ctx.dtype(x), Planes=planes, Width=w, Height=h, Wo=wo,
                    Ho=ho, linear=linear)
    ins = [ctx.tensor(x)] + [ctx.const(v, f"{n.name}_{k}") for k, v in
                             (("ys", ys), ("fy", fy), ("xs", xs), ("fx", fx))]
    ctx.add(name, n.op, [n], f"{planes} x [{h}, {w}] -> [{ho}, {wo}], "
            f"{'linear' if linear else 'nearest ' + how}, {mode}", ins, [ctx.output(out)])
