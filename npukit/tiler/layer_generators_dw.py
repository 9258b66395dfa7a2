"""The host schedule of an integer depthwise convolution (``conv_pool_act(depthwise=True,
par_features=True)`` with int8 or uint8 activations and outputs, no pooling): spaces
(features D1, tiles T0) as the GAP SDK's depthwise generators iterate, one call a tile of
features (``depthwise_int.dw_conv_requant``: the convolution and the requantisation in one
pass, no int32 accumulators in L1), where the plane-by-plane schedule makes three calls a
plane. Single-buffered, as the host schedule's other layers: a tile is copied before the
call that reads it."""

from __future__ import annotations

import numpy as np

from ..dtypes import is_float
from .api import (
    D1,
    KER_ARG_PARTILE_SIZE,
    KER_ARG_TILE,
    KER_ARG_TILE_H,
    KER_ARG_TILEOFFSET,
    LOC_LOOP,
    T0,
    TILE_HOR,
    Bindings,
    Call,
    Calls,
    CArgs,
    Imm,
    K_Arg,
    K_ArgPar,
    KerArg,
    KerArgs,
    KerArgSpace,
    Obj,
    TCArg,
)
from .api_spaces import IterParSpace, IterTiledSpace, KernelIterSpace
from .basic_kernels import common
from .basic_kernels.depthwise_int import dw_conv_requant
from .layer_generators import _lib, _ptr, _width


def fused_applies(in_dt, out_dt, PoolOper: int) -> bool:
    """Whether ``conv_dw_requant`` takes a depthwise layer: 8-bit activations and outputs,
    no pooling after the convolution."""
    eight = (np.int8, np.uint8)
    return (not is_float(out_dt) and np.dtype(in_dt) in eight and np.dtype(out_dt) in eight
            and PoolOper == common.POOL_NONE)


def conv_dw_requant(m, Name: str, *, in_dt, w_dt, out_dt, C: int, Width: int, Height: int,
                    in_tiled: bool, in_rows, conv, pool, act, quant) -> None:
    """The user kernel ``Name(In, Filter, Bias, Scale, Out)`` of the module's docstring
    (``conv_pool_act``'s arguments, grouped as its ``shape``)."""
    ov_in, PadT, Hreal = in_rows
    Fcx, Fcy, Scx, Scy, Dcx, Dcy, PadL, Wc, Hc, Zin, Zw = conv
    Wo, Ho = pool[5], pool[6]
    Zout, Lo, Hi = act
    ker = _lib(m, dw_conv_requant(np.dtype(in_dt).name, np.dtype(w_dt).name,
                                  np.dtype(out_dt).name, _width(m, in_dt)))
    in_row0 = K_Arg("In", KER_ARG_TILEOFFSET) if in_tiled else Imm(PadT)

    def per_feature(name: str, size: int) -> KerArg:
        return KerArg(name, KerArgSpace(1, D1), Obj.O_IN, 1, 1, size, 0, 0, 0, name)

    m.UserKernel(Name,
        KernelIterSpace(2, IterParSpace(D1, C, 1), IterTiledSpace(T0)),
        TILE_HOR,
        CArgs(TCArg(_ptr(in_dt, True), "In"), TCArg(_ptr(w_dt, True), "Filter"),
              TCArg(_ptr("int32", True), "Bias"), *quant, TCArg(_ptr(out_dt), "Out")),
        Calls(Call(ker, LOC_LOOP, Bindings(
            K_Arg("In", KER_ARG_TILE), Imm(Width), in_row0, K_Arg("In", KER_ARG_TILE_H),
            Imm(Hreal), Imm(PadT), K_Arg("Filter", KER_ARG_TILE), K_Arg("Bias", KER_ARG_TILE),
            K_Arg("Scale", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE), Imm(Wo),
            K_Arg("Out", KER_ARG_TILEOFFSET), K_Arg("Out", KER_ARG_TILE_H),
            K_ArgPar("Out", KER_ARG_PARTILE_SIZE, D1), Imm(Fcx), Imm(Fcy), Imm(Scx), Imm(Scy),
            Imm(Dcx), Imm(Dcy), Imm(PadL), Imm(Zin), Imm(Zw), Imm(Zout), Imm(Lo), Imm(Hi)))),
        KerArgs(
            KerArg("In", KerArgSpace(2, D1, T0) if in_tiled else KerArgSpace(1, D1), Obj.O_IN,
                   Width, Height, np.dtype(in_dt).itemsize, ov_in if in_tiled else 0, 0, 0,
                   "In"),
            per_feature("Bias", 4),
            KerArg("Filter", KerArgSpace(1, D1), Obj.O_IN, Fcx, Fcy, np.dtype(w_dt).itemsize,
                   0, 0, 0, "Filter"),
            per_feature("Scale", 4),
            KerArg("Out", KerArgSpace(2, D1, T0), Obj.O_OUT, Wo, Ho,
                   np.dtype(out_dt).itemsize, 0, 0, 0, "Out")))
    m._cnn_ops[Name] = Wc * Hc * Fcx * Fcy * C
