"""What the GAP AutoTiler's CNN generators share (``cnn`` and ``cnn_oneplane``): the kernel
operators, the checks of their arguments with messages naming them, and what a convolution
layer's arguments define (``conv_layer``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from ..dtypes import int_range
from ..errors import TilingError
from .api import OBJ_CONSTRAINTS_DROP_REM, OBJ_CONSTRAINTS_ONEPREFTILE, Obj, TCArg
from .basic_kernels import common


class KernelOper(IntEnum):
    """The kernel operators of the CNN generators (GAP's ``KernelOper_T``)."""

    KOP_NONE = 0
    KOP_CONV = 4
    KOP_CONV_DP = 6
    KOP_MAXPOOL = 24
    KOP_AVGPOOL = 25
    KOP_RELU = 34
    KOP_RELUN = 35
    KOP_LINEAR = 45
    KOP_MATADD = 48
    KOP_SOFTMAX = 77


(KOP_NONE, KOP_CONV, KOP_CONV_DP, KOP_MAXPOOL, KOP_AVGPOOL, KOP_RELU, KOP_RELUN, KOP_LINEAR,
 KOP_MATADD, KOP_SOFTMAX) = tuple(KernelOper)

RELUN = 6  # KOP_RELUN's bound, GAP's default ReluN
OBJ_IN_DB = Obj.O_IN | Obj.O_DB | Obj.O_TILED
OBJ_OUT_DB = Obj.O_OUT | Obj.O_DB | Obj.O_TILED
OBJ_CONST_IN = Obj.O_IN | Obj.O_DB | Obj.O_CONST  # constants: moved once when they fit


def _dtype(what: str, size) -> np.dtype:
    """A data size argument: 1, 2 or 4 bytes of fixed point, or a float dtype name."""
    if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
        if int(size) not in (1, 2, 4):
            raise TilingError(f"{what}: data size must be 1, 2 or 4 bytes (or 'float32'), "
                              f"got {size}")
        return np.dtype(f"int{8 * int(size)}")
    try:
        dt = np.dtype(size)
    except TypeError:
        raise TilingError(f"{what}: data size must be 1, 2 or 4 bytes or 'float32', "
                          f"got {size!r}") from None
    if dt != np.float32:
        raise TilingError(f"{what}: the only floating point data is float32, got {dt.name}")
    return dt


def layer_types(name: str, gen: str, sizes: dict, bias: tuple = ()) -> dict[str, np.dtype]:
    """The operands' dtypes: all float32, or int8/int16 fixed point (int32 allowed for the
    ``bias`` operands)."""
    dts = {k: _dtype(f"{gen} {name!r}: {k}_DataSize", v) for k, v in sizes.items()}
    floats = {k for k, d in dts.items() if d.kind == "f"}
    if floats and floats != set(dts):
        raise TilingError(f"{gen} {name!r}: float32 data must be float32 for every operand "
                          f"({', '.join(f'{k}: {d.name}' for k, d in dts.items())})")
    for k, d in dts.items():
        if d == np.int32 and k not in bias:
            raise TilingError(f"{gen} {name!r}: {k} data must be 1 or 2 bytes (4 bytes only "
                              f"for a bias)")
    return dts


def bounds(name: str, gen: str, act: KernelOper, out_dt: np.dtype, out_q: int) -> tuple[int, int]:
    """GAP's ``CNN_SetUpperLowerBounds``: the output clip range for an activation. float32:
    (0, 0) for a ReLU, (-1, 0) for none (the float kernels only test LB >= 0)."""
    act = KernelOper(act)
    if act not in (KOP_NONE, KOP_RELU, KOP_RELUN):
        raise TilingError(f"{gen} {name!r}: activation {act.name} is not supported; use "
                          f"KOP_NONE, KOP_RELU or KOP_RELUN")
    if out_dt.kind == "f":
        if act == KOP_RELUN:
            raise TilingError(f"{gen} {name!r}: KOP_RELUN needs fixed point data")
        return (0, 0) if act == KOP_RELU else (-1, 0)
    lo, hi = int_range(out_dt)
    if act == KOP_RELU:
        return 0, hi
    if act == KOP_RELUN:
        if RELUN << out_q > hi:
            raise TilingError(f"{gen} {name!r}: KOP_RELUN's bound {RELUN} is not representable "
                              f"in Q{out_q} {out_dt.name}")
        return 0, RELUN << out_q
    return lo, hi


def norm(name: str, gen: str, what: str, value: int) -> int:
    if value < 0:
        raise TilingError(f"{gen} {name!r}: {what} = {value} is negative: the output has more "
                          f"fraction bits than the product of its operands")
    return value


def check_ctrl(name: str, gen: str, ctrl) -> None:
    if ctrl not in (0, None):
        raise TilingError(f"{gen} {name!r}: generator controls (Ctrl) are not supported; "
                          f"pass 0")


def l3(flag) -> int:
    return Obj.O_L2DB if flag else 0


def pad(size: int, f_eff: int, stride: int) -> tuple[int, int]:
    """GAP's zero padding for one dimension, split balanced-left: (before, after)."""
    total = max(f_eff - stride, 0) if size % stride == 0 else max(f_eff - size % stride, 0)
    return total - total // 2, total // 2


@dataclass(frozen=True)
class ConvLayer:
    """What ``CNN_ConvolutionPoolReLU``'s arguments define, checked (both generations).
    ``pad_c``, ``pad_p``: the convolution's and the pooling's zero padding (left, right, top,
    bottom); ``wc`` x ``hc`` the convolution output, ``wo`` x ``ho`` the layer's; ``acc`` the
    accumulator type; ``norm_*`` the shifts of the bias, of each input plane (single
    precision) and of the output; ``lb``, ``ub`` the activation's clip."""

    dts: dict
    acc: np.dtype
    pool: int
    pad_c: tuple[int, int, int, int]
    pad_p: tuple[int, int, int, int]
    wc: int
    hc: int
    wo: int
    ho: int
    norm_bias: int
    norm_conv: int
    norm_out: int
    lb: int
    ub: int


def conv_layer(gen: str, Name: str, Ctrl, sizes: dict, In_Q, Filter_Q, Bias_Q, Out_Q, ints: dict,
               ConvOper, ConvPad, PoolOper, PoolPad, ReLUOper) -> ConvLayer:
    """Check a convolution layer's arguments (``ints``: the features, sizes, filters, dilations
    and strides by GAP's names; the pooling's already 1 under ``KOP_NONE``) and derive it."""
    check_ctrl(Name, gen, Ctrl)
    dts = layer_types(Name, gen, sizes, bias=("Bias",))
    flt = dts["Out"].kind == "f"
    ConvOper, PoolOper = KernelOper(ConvOper), KernelOper(PoolOper)
    if ConvOper not in (KOP_CONV, KOP_CONV_DP):
        raise TilingError(f"{gen} {Name!r}: ConvOper must be KOP_CONV or KOP_CONV_DP, got "
                          f"{ConvOper.name}")
    if PoolOper not in (KOP_NONE, KOP_MAXPOOL, KOP_AVGPOOL):
        raise TilingError(f"{gen} {Name!r}: PoolOper must be KOP_MAXPOOL, KOP_AVGPOOL or "
                          f"KOP_NONE, got {PoolOper.name}")
    for k, v in ints.items():
        if int(v) < 1:
            raise TilingError(f"{gen} {Name!r}: {k} must be >= 1, got {v}")
    i = ints
    fcx, fcy = i["Dcx"] * (i["Fcx"] - 1) + 1, i["Dcy"] * (i["Fcy"] - 1) + 1
    pad_c = pad(i["Width"], fcx, i["Scx"]) + pad(i["Height"], fcy, i["Scy"]) if ConvPad else \
        (0, 0, 0, 0)
    wc = (i["Width"] - fcx + pad_c[0] + pad_c[1]) // i["Scx"] + 1
    hc = (i["Height"] - fcy + pad_c[2] + pad_c[3]) // i["Scy"] + 1
    if wc < 1 or hc < 1:
        raise TilingError(f"{gen} {Name!r}: a {i['Fcx']}x{i['Fcy']} filter (dilation "
                          f"{i['Dcx']}x{i['Dcy']}) does not fit a {i['Width']}x{i['Height']} "
                          f"input")
    fpx, fpy = i["Dpx"] * (i["Fpx"] - 1) + 1, i["Dpy"] * (i["Fpy"] - 1) + 1
    pad_p = pad(wc, fpx, i["Spx"]) + pad(hc, fpy, i["Spy"]) if PoolPad and PoolOper else \
        (0, 0, 0, 0)
    wo = (wc - fpx + pad_p[0] + pad_p[1]) // i["Spx"] + 1
    ho = (hc - fpy + pad_p[2] + pad_p[3]) // i["Spy"] + 1
    if wo < 1 or ho < 1:
        raise TilingError(f"{gen} {Name!r}: a {i['Fpx']}x{i['Fpy']} pooling does not fit the "
                          f"{wc}x{hc} convolution output")
    dp = ConvOper == KOP_CONV_DP or flt
    acc = np.dtype("float32") if flt else (np.dtype("int32") if dp else dts["Out"])
    lb, ub = bounds(Name, gen, ReLUOper, dts["Out"], Out_Q)
    out_norm = 0 if flt else norm(Name, gen, "In_Q + Filter_Q - Out_Q", Filter_Q + In_Q - Out_Q)
    if flt:
        norms = (0, 0, 0)
    elif dp:
        norms = (Filter_Q + In_Q - Bias_Q, 0, out_norm)
    else:
        norms = (Out_Q - Bias_Q, out_norm, 0)
    pool = {KOP_NONE: common.POOL_NONE, KOP_MAXPOOL: common.POOL_MAX,
            KOP_AVGPOOL: common.POOL_AVG}[PoolOper]
    return ConvLayer(dts, acc, pool, pad_c, pad_p, wc, hc, wo, ho, *norms, lb, ub)


def used(n_out: int, stride: int, f_eff: int, before: int, extent: int):
    """What ``n_out`` outputs of a window read of an ``extent``: (the part used, the padding
    (before, after) they need), as gap_sdk re-evaluates it (UsedWc, UsedWidth)."""
    reach = (n_out - 1) * stride + f_eff - before
    return min(reach, extent), (before, max(0, reach - extent))


def in_constraint(whole: bool, used_lines: int, lines: int) -> int:
    """The tiling constraint of a windowed layer's input: ``whole`` keeps the plane in one
    tile; else lines no output uses are dropped from the last tile."""
    if whole:
        return OBJ_CONSTRAINTS_ONEPREFTILE
    return OBJ_CONSTRAINTS_DROP_REM if used_lines < lines else 0


def c_args(dts: dict, shapes: dict | None = None) -> tuple:
    """The user kernel's C arguments, one pointer per operand in GAP's order; ``shapes``: the
    shape of the tensor each points to (GAP's ``AddKernelArgDim``), else its kernel
    argument's."""
    return tuple(TCArg(f"{common.c_type(d)} * __restrict__", k,
                       shape=None if shapes is None else shapes[k]) for k, d in dts.items())
