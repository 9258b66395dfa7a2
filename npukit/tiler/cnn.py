"""The GAP AutoTiler's CNN generators (``CNN_Generators.h``): each call creates one user kernel
with the model's tiler, its calls going to the CNN basic kernels of ``basic_kernels``.

- ``CNN_ConvolutionPoolReLU``: iteration order (out-plane, tile, in-plane), horizontal tiles
  of the output rows; an input tile holds its output tile's receptive field (tiles overlap
  by the filter's reach); a one-tile L1 buffer ``ConvOut`` holds the convolution of the
  current tile before the bias/normalisation/activation/pooling kernel writes ``Out``.
  ``KOP_CONV_DP`` accumulates every input plane in 32 bits then normalises once; ``KOP_CONV``
  normalises and saturates after each input plane, as GAP's single precision kernels do.
  Zero padding needs the whole input plane in one tile.
- ``CNN_LinearReLU``: tiles of output rows, the whole input in L1.
- ``CNN_SoftMax``: the whole vector in L1.

Data sizes are 1 (int8) or 2 (int16) bytes in fixed point with the Q formats given (a bias
may be 4 bytes, int32), or ``"float32"`` for every operand (Q formats ignored). The
``*_InL3`` flags give arguments an L3 home when the user kernel is tiled alone; in a graph
the memory planner decides where each tensor lives.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

from ..dtypes import int_range
from ..errors import TilingError
from .api import (
    CALL_PARALLEL,
    CALL_SEQUENTIAL,
    KER_ARG_TILE,
    KER_ARG_TILE_H,
    KER_ARG_TILE_W,
    KER_DIM2,
    KER_DIM4,
    KER_IN_PLANE,
    KER_OUT_PLANE,
    KER_TILE,
    LOC_IN_PLANE_EPILOG,
    LOC_IN_PLANE_PROLOG,
    LOC_INNER_LOOP,
    OBJ_CONSTRAINTS_ONEPREFTILE,
    TILE_HOR,
    Bindings,
    Call,
    Calls,
    CArgs,
    Imm,
    K_Arg,
    Ker_IteratorIndex,
    KerArg,
    KerArgs,
    KernelDimensions,
    KernelIterationOrder,
    Obj,
    TCArg,
)
from .basic_kernels import common, convolution, linear, pooling, softmax


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
    KOP_SOFTMAX = 77


(KOP_NONE, KOP_CONV, KOP_CONV_DP, KOP_MAXPOOL, KOP_AVGPOOL, KOP_RELU, KOP_RELUN, KOP_LINEAR,
 KOP_SOFTMAX) = tuple(KernelOper)

RELUN = 6  # KOP_RELUN's bound, GAP's default ReluN
OBJ_IN_DB = Obj.O_IN | Obj.O_DB | Obj.O_TILED
OBJ_OUT_DB = Obj.O_OUT | Obj.O_DB | Obj.O_TILED


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


def _types(name: str, gen: str, sizes: dict, bias: tuple = ()) -> dict[str, np.dtype]:
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


def _bounds(name: str, gen: str, act: KernelOper, out_dt: np.dtype, out_q: int) -> tuple[int, int]:
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


def _norm(name: str, gen: str, what: str, value: int) -> int:
    if value < 0:
        raise TilingError(f"{gen} {name!r}: {what} = {value} is negative: the output has more "
                          f"fraction bits than the product of its operands")
    return value


def _ctrl(name: str, gen: str, ctrl) -> None:
    if ctrl not in (0, None):
        raise TilingError(f"{gen} {name!r}: generator controls (Ctrl) are not supported; "
                          f"pass 0")


def _l3(flag) -> int:
    return Obj.O_L2DB if flag else 0


def _pad(size: int, f_eff: int, stride: int) -> tuple[int, int]:
    """GAP's zero padding for one dimension, split balanced-left: (before, after)."""
    total = max(f_eff - stride, 0) if size % stride == 0 else max(f_eff - size % stride, 0)
    return total - total // 2, total // 2


class CNNGenerators:
    """The CNN generators as ``Model`` methods (GAP's argument lists, in order)."""

    def LoadCNNLibrary(self) -> None:
        """Make the CNN basic kernels available (int16, int8 and float32 variants; kernels
        for mixed data sizes are added when a generator needs them)."""
        self._cnn = True
        for dt in ("int16", "int8", "float32"):
            acc = "float32" if dt == "float32" else "int32"
            w = self._simd(dt)
            for k in (convolution.set_bias(dt, acc), convolution.conv(dt, dt, acc, w),
                      pooling.pool_act(acc, dt), linear.linear(dt, dt, dt, dt, w),
                      softmax.softmax(dt, dt)):
                self._lib(k)

    def _simd(self, dt) -> int:
        unit = next(iter(self.target.units.values()))
        key = (np.dtype(dt).name, np.dtype(dt).name)
        return unit.widths.get(key, 1)

    def _lib(self, k: common.BasicKernel) -> str:
        if k.name not in self.libs:
            self.LibKernel(k.name, CALL_PARALLEL if k.parallel else CALL_SEQUENTIAL,
                           CArgs(*(TCArg(t, n) for t, n in k.args)), "", c_source=k.c_source,
                           reference=k.reference, cost=k.cost)
        return k.name

    def _need_library(self, gen: str, name: str) -> None:
        if not getattr(self, "_cnn", False):
            raise TilingError(f"{gen} {name!r}: call LoadCNNLibrary() first")

    # -- convolution, pooling, activation ----------------------------------------------------

    def CNN_ConvolutionPoolReLU(
            self, Name: str, Ctrl,
            In_DataSize, Filter_DataSize, Bias_DataSize, Out_DataSize,
            In_Q: int, Filter_Q: int, Bias_Q: int, Out_Q: int,
            In_InL3: int, Filter_InL3: int, Bias_InL3: int, Out_InL3: int,
            InFeat: int, OutFeat: int, Width: int, Height: int,
            ConvOper: KernelOper, Fcx: int, Fcy: int, Dcx: int, Dcy: int, Scx: int, Scy: int,
            ConvPad: int,
            PoolOper: KernelOper, Fpx: int, Fpy: int, Dpx: int, Dpy: int, Spx: int, Spy: int,
            PoolPad: int,
            ReLUOper: KernelOper) -> None:
        """A convolution (``KOP_CONV`` or ``KOP_CONV_DP``), then an optional pooling
        (``KOP_MAXPOOL``, ``KOP_AVGPOOL`` or ``KOP_NONE``), then an optional activation. The
        user kernel ``Name(In, Filter, Bias, Out)``: In [InFeat, Height, Width], Filter
        [OutFeat, InFeat, Fcy, Fcx], Bias [OutFeat], Out [OutFeat, Ho, Wo].
        The arguments, by position or by the names of GAP's ``CNN_Generators.h``, are
        tabled in docs/graph.md."""
        gen = "CNN_ConvolutionPoolReLU"
        self._need_library(gen, Name)
        _ctrl(Name, gen, Ctrl)
        dts = _types(Name, gen, {"In": In_DataSize, "Filter": Filter_DataSize,
                                 "Bias": Bias_DataSize, "Out": Out_DataSize}, bias=("Bias",))
        flt = dts["Out"].kind == "f"
        ConvOper, PoolOper = KernelOper(ConvOper), KernelOper(PoolOper)
        if ConvOper not in (KOP_CONV, KOP_CONV_DP):
            raise TilingError(f"{gen} {Name!r}: ConvOper must be KOP_CONV or KOP_CONV_DP, got "
                              f"{ConvOper.name}")
        if PoolOper not in (KOP_NONE, KOP_MAXPOOL, KOP_AVGPOOL):
            raise TilingError(f"{gen} {Name!r}: PoolOper must be KOP_MAXPOOL, KOP_AVGPOOL or "
                              f"KOP_NONE, got {PoolOper.name}")
        ints = dict(InFeat=InFeat, OutFeat=OutFeat, Width=Width, Height=Height, Fcx=Fcx,
                    Fcy=Fcy, Dcx=Dcx, Dcy=Dcy, Scx=Scx, Scy=Scy)
        if PoolOper == KOP_NONE:
            Fpx = Fpy = Dpx = Dpy = Spx = Spy = 1
            PoolPad = 0
        ints.update(Fpx=Fpx, Fpy=Fpy, Dpx=Dpx, Dpy=Dpy, Spx=Spx, Spy=Spy)
        for k, v in ints.items():
            if int(v) < 1:
                raise TilingError(f"{gen} {Name!r}: {k} must be >= 1, got {v}")
        fcx, fcy = Dcx * (Fcx - 1) + 1, Dcy * (Fcy - 1) + 1
        pad_c = _pad(Width, fcx, Scx) + _pad(Height, fcy, Scy) if ConvPad else (0, 0, 0, 0)
        wc = (Width - fcx + pad_c[0] + pad_c[1]) // Scx + 1
        hc = (Height - fcy + pad_c[2] + pad_c[3]) // Scy + 1
        if wc < 1 or hc < 1:
            raise TilingError(f"{gen} {Name!r}: a {Fcx}x{Fcy} filter (dilation {Dcx}x{Dcy}) does "
                              f"not fit a {Width}x{Height} input")
        fpx, fpy = Dpx * (Fpx - 1) + 1, Dpy * (Fpy - 1) + 1
        pad_p = _pad(wc, fpx, Spx) + _pad(hc, fpy, Spy) if PoolPad else (0, 0, 0, 0)
        wo = (wc - fpx + pad_p[0] + pad_p[1]) // Spx + 1
        ho = (hc - fpy + pad_p[2] + pad_p[3]) // Spy + 1
        if wo < 1 or ho < 1:
            raise TilingError(f"{gen} {Name!r}: a {Fpx}x{Fpy} pooling does not fit the "
                              f"{wc}x{hc} convolution output")
        dp = ConvOper == KOP_CONV_DP or flt
        acc_dt = np.dtype("float32") if flt else (np.dtype("int32") if dp else dts["Out"])
        lb, ub = _bounds(Name, gen, ReLUOper, dts["Out"], Out_Q)
        w = self._simd(dts["In"])
        if flt:
            norm_bias = norm_conv = norm_out = 0
        elif dp:
            norm_bias = Filter_Q + In_Q - Bias_Q
            norm_conv = 0
            norm_out = _norm(Name, gen, "In_Q + Filter_Q - Out_Q", Filter_Q + In_Q - Out_Q)
        else:
            norm_bias = Out_Q - Bias_Q
            norm_conv = _norm(Name, gen, "In_Q + Filter_Q - Out_Q", Filter_Q + In_Q - Out_Q)
            norm_out = 0
        set_bias = self._lib(convolution.set_bias(dts["Bias"].name, acc_dt.name))
        conv = self._lib(convolution.conv(dts["In"].name, dts["Filter"].name, acc_dt.name, w))
        pool = self._lib(pooling.pool_act(acc_dt.name, dts["Out"].name))
        oper = {KOP_NONE: common.POOL_NONE, KOP_MAXPOOL: common.POOL_MAX,
                KOP_AVGPOOL: common.POOL_AVG}[PoolOper]
        # Tiles are horizontal bands of output rows. A band of T output rows needs Spy*T
        # convolution rows (plus the pooling's overlap) and Scy*Spy*T input rows (plus the
        # filter's reach); the input's declared overlap also covers rows no output uses.
        padded = any(pad_c) or any(pad_p)
        k_in = Scy * Spy
        hc_decl = hc if padded else (ho - 1) * Spy + fpy
        one = OBJ_CONSTRAINTS_ONEPREFTILE if padded else 0
        item = {k: d.itemsize for k, d in dts.items()}
        self.UserKernel(Name,
            KernelDimensions(InFeat, Width, Height, OutFeat),
            KernelIterationOrder(KER_DIM4, KER_OUT_PLANE, KER_TILE, KER_IN_PLANE),
            TILE_HOR,
            CArgs(4,
                TCArg(f"{common.c_type(dts['In'])} * __restrict__", "In"),
                TCArg(f"{common.c_type(dts['Filter'])} * __restrict__", "Filter"),
                TCArg(f"{common.c_type(dts['Bias'])} * __restrict__", "Bias"),
                TCArg(f"{common.c_type(dts['Out'])} * __restrict__", "Out")),
            Calls(3,
                Call(set_bias, LOC_IN_PLANE_PROLOG, Bindings(6,
                    K_Arg("ConvOut", KER_ARG_TILE), K_Arg("ConvOut", KER_ARG_TILE_W),
                    K_Arg("ConvOut", KER_ARG_TILE_H), K_Arg("Bias", KER_ARG_TILE),
                    Ker_IteratorIndex(KER_OUT_PLANE), Imm(norm_bias))),
                Call(conv, LOC_INNER_LOOP, Bindings(16,
                    K_Arg("In", KER_ARG_TILE), K_Arg("In", KER_ARG_TILE_W),
                    K_Arg("In", KER_ARG_TILE_H), K_Arg("Filter", KER_ARG_TILE),
                    K_Arg("ConvOut", KER_ARG_TILE), K_Arg("ConvOut", KER_ARG_TILE_W),
                    K_Arg("ConvOut", KER_ARG_TILE_H), Imm(Fcx), Imm(Fcy), Imm(Scx), Imm(Scy),
                    Imm(Dcx), Imm(Dcy), Imm(pad_c[0]), Imm(pad_c[2]), Imm(norm_conv))),
                Call(pool, LOC_IN_PLANE_EPILOG, Bindings(18,
                    K_Arg("ConvOut", KER_ARG_TILE), K_Arg("ConvOut", KER_ARG_TILE_W),
                    K_Arg("ConvOut", KER_ARG_TILE_H), K_Arg("Out", KER_ARG_TILE),
                    K_Arg("Out", KER_ARG_TILE_W), K_Arg("Out", KER_ARG_TILE_H), Imm(Fpx),
                    Imm(Fpy), Imm(Spx), Imm(Spy), Imm(Dpx), Imm(Dpy), Imm(pad_p[0]),
                    Imm(pad_p[2]), Imm(oper), Imm(norm_out), Imm(lb), Imm(ub)))),
            KerArgs(5,
                KerArg("In", OBJ_IN_DB | Obj.O_3D | _l3(In_InL3), Width, Height, item["In"],
                       Height - k_in * ho, one, 0, "In"),
                KerArg("Bias", Obj.O_IN | _l3(Bias_InL3), OutFeat, 1, item["Bias"], 0, 0, 0,
                       "Bias"),
                KerArg("Filter", Obj.O_IN | Obj.O_DB | Obj.O_3D | Obj.O_4D | _l3(Filter_InL3),
                       Fcx, Fcy, item["Filter"], 0, 0, 0, "Filter"),
                KerArg("Out", OBJ_OUT_DB | Obj.O_3D | _l3(Out_InL3), wo, ho, item["Out"], 0, 0,
                       0, "Out"),
                KerArg("ConvOut", Obj.O_BUFF | Obj.O_TILED | Obj.O_ONETILE, wc, hc_decl,
                       acc_dt.itemsize, hc_decl - Spy * ho, 0, 0, None)))
        macs = wc * hc * Fcx * Fcy * InFeat * OutFeat
        self._cnn_ops[Name] = macs + OutFeat * wo * ho * Fpx * Fpy

    # -- linear layer --------------------------------------------------------------------------

    def CNN_LinearReLU(
            self, Name: str, Ctrl,
            In_DataSize, Filter_DataSize, Bias_DataSize, Out_DataSize,
            In_Q: int, Filter_Q: int, Bias_Q: int, Out_Q: int,
            In_InL3: int, Filter_InL3: int, Bias_InL3: int, Out_InL3: int,
            InDim: int, OutDim: int,
            LinearOper: KernelOper, ReLUOper: KernelOper) -> None:
        """A linear layer then an optional activation: ``Name(In, Filter, Bias, Out)``, In
        [InDim], Filter [OutDim, InDim], Bias [OutDim], Out [OutDim]. The
        arguments, by position or by the names of GAP's ``CNN_Generators.h``, are tabled in
        docs/graph.md."""
        gen = "CNN_LinearReLU"
        self._need_library(gen, Name)
        _ctrl(Name, gen, Ctrl)
        if KernelOper(LinearOper) != KOP_LINEAR:
            raise TilingError(f"{gen} {Name!r}: LinearOper must be KOP_LINEAR")
        for k, v in (("InDim", InDim), ("OutDim", OutDim)):
            if int(v) < 1:
                raise TilingError(f"{gen} {Name!r}: {k} must be >= 1, got {v}")
        dts = _types(Name, gen, {"In": In_DataSize, "Filter": Filter_DataSize,
                                 "Bias": Bias_DataSize, "Out": Out_DataSize}, bias=("Bias",))
        flt = dts["Out"].kind == "f"
        lb, ub = _bounds(Name, gen, ReLUOper, dts["Out"], Out_Q)
        norm = 0 if flt else _norm(Name, gen, "In_Q + Filter_Q - Out_Q", Filter_Q + In_Q - Out_Q)
        norm_bias = 0 if flt else Filter_Q + In_Q - Bias_Q
        lin = self._lib(linear.linear(dts["In"].name, dts["Filter"].name, dts["Bias"].name,
                                 dts["Out"].name, self._simd(dts["In"])))
        item = {k: d.itemsize for k, d in dts.items()}
        self.UserKernel(Name,
            KernelDimensions(1, InDim, OutDim, 1),
            KernelIterationOrder(KER_DIM2, KER_TILE),
            TILE_HOR,
            CArgs(4,
                TCArg(f"{common.c_type(dts['In'])} * __restrict__", "In"),
                TCArg(f"{common.c_type(dts['Filter'])} * __restrict__", "Filter"),
                TCArg(f"{common.c_type(dts['Bias'])} * __restrict__", "Bias"),
                TCArg(f"{common.c_type(dts['Out'])} * __restrict__", "Out")),
            Calls(1,
                Call(lin, LOC_INNER_LOOP, Bindings(10,
                    K_Arg("In", KER_ARG_TILE), Imm(InDim), K_Arg("Filter", KER_ARG_TILE),
                    K_Arg("Bias", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE),
                    K_Arg("Out", KER_ARG_TILE_H), Imm(norm), Imm(norm_bias), Imm(lb),
                    Imm(ub)))),
            KerArgs(4,
                KerArg("In", Obj.O_IN | _l3(In_InL3), InDim, 1, item["In"], 0, 0, 0, "In"),
                KerArg("Filter", OBJ_IN_DB | _l3(Filter_InL3), InDim, OutDim, item["Filter"],
                       0, 0, 0, "Filter"),
                KerArg("Bias", OBJ_IN_DB | _l3(Bias_InL3), 1, OutDim, item["Bias"], 0, 0, 0,
                       "Bias"),
                KerArg("Out", OBJ_OUT_DB | _l3(Out_InL3), 1, OutDim, item["Out"], 0, 0, 0,
                       "Out")))
        self._cnn_ops[Name] = InDim * OutDim

    # -- softmax -------------------------------------------------------------------------------

    def CNN_SoftMax(self, Name: str, Ctrl, In_DataSize, Out_DataSize, In_Q: int, Out_Q: int,
                    In_InL3: int, Out_InL3: int, Dim: int, SoftMaxOper: KernelOper) -> None:
        """A softmax over ``Dim`` inputs in Q``In_Q``, outputs in Q``Out_Q`` (Q15 for int16,
        Q7 for int8 in GAP's library): ``Name(In, Out)``. The arguments, by position or by
        the names of GAP's ``CNN_Generators.h``, are tabled in docs/graph.md."""
        gen = "CNN_SoftMax"
        self._need_library(gen, Name)
        _ctrl(Name, gen, Ctrl)
        if KernelOper(SoftMaxOper) != KOP_SOFTMAX:
            raise TilingError(f"{gen} {Name!r}: SoftMaxOper must be KOP_SOFTMAX")
        if int(Dim) < 1:
            raise TilingError(f"{gen} {Name!r}: Dim must be >= 1, got {Dim}")
        dts = _types(Name, gen, {"In": In_DataSize, "Out": Out_DataSize})
        if dts["Out"].kind != "f":
            bits = 8 * dts["Out"].itemsize - 1
            if not 0 <= Out_Q <= bits:
                raise TilingError(f"{gen} {Name!r}: Out_Q must be 0..{bits} for "
                                  f"{dts['Out'].name}, got {Out_Q}")
            if not 0 <= In_Q <= 30:
                raise TilingError(f"{gen} {Name!r}: In_Q must be 0..30, got {In_Q}")
        sm = self._lib(softmax.softmax(dts["In"].name, dts["Out"].name))
        self.UserKernel(Name,
            KernelDimensions(1, Dim, 1, 1),
            KernelIterationOrder(KER_DIM2, KER_TILE),
            TILE_HOR,
            CArgs(2,
                TCArg(f"{common.c_type(dts['In'])} * __restrict__", "In"),
                TCArg(f"{common.c_type(dts['Out'])} * __restrict__", "Out")),
            Calls(1,
                Call(sm, LOC_INNER_LOOP, Bindings(5,
                    K_Arg("In", KER_ARG_TILE), Imm(Dim), Imm(In_Q), K_Arg("Out", KER_ARG_TILE),
                    Imm(Out_Q)))),
            KerArgs(2,
                KerArg("In", Obj.O_IN | _l3(In_InL3), Dim, 1, dts["In"].itemsize, 0, 0, 0, "In"),
                KerArg("Out", Obj.O_OUT | _l3(Out_InL3), Dim, 1, dts["Out"].itemsize, 0, 0, 0,
                       "Out")))
        self._cnn_ops[Name] = Dim


__all__ = ["KernelOper", "CNNGenerators", "KOP_NONE", "KOP_CONV", "KOP_CONV_DP", "KOP_MAXPOOL",
           "KOP_AVGPOOL", "KOP_RELU", "KOP_RELUN", "KOP_LINEAR", "KOP_SOFTMAX"]
