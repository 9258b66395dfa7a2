"""The GAP AutoTiler's CNN generators (gap_sdk 4.x ``CNN_Generators.h``): each call creates one
user kernel with the model's tiler, iterating over the newer API's spaces, its calls going to
the parallel-feature basic kernels of ``basic_kernels.parallel`` (several feature planes per
call).

- ``CNN_ConvolutionPoolReLU``: ``KernelIterSpace(D1 output features, T0 tiles, D0 input
  features)``, horizontal tiles of the output rows; ``In`` is a padded argument of (D0, T0)
  whose tiles overlap by the filter's reach, ``Filter`` of (D1, D0) and ``Bias`` of D1 are
  constants, ``Out`` of (D1, T0); a one-tile L1 buffer ``ConvOut`` of (D1, T0) receives the
  bias and each input feature's taps before the reduction/activation/pooling kernel writes
  ``Out``. ``KOP_CONV_DP`` accumulates every input plane in 32 bits then normalises once;
  ``KOP_CONV`` normalises and saturates after each input plane, as GAP's single precision
  kernels do. Zero padding keeps the whole input plane in one tile (D0 and D1 are still
  cut).
- ``CNN_PoolReLU``: ``KernelIterSpace(D0 features, T0 tiles)``, the pooling and activation
  of ``CNN_ConvolutionPoolReLU`` alone.
- ``CNN_LinearReLU``: every output in a parametric space D0 (its filter row, bias and
  output), the whole input in one L1 buffer.
- ``CNN_SoftMax``: the whole vector in L1 (one tile of T0).
- ``CNN_MatAdd``: ``Out = In1 + In2`` in Q formats, ``KernelIterSpace(D0 features, T0
  tiles)``.

The older API's one-plane generators stay available as ``CNN_ConvolutionPoolReLU_OnePlane``
and ``CNN_LinearReLU_OnePlane`` (``cnn_oneplane``).

Data sizes are 1 (int8) or 2 (int16) bytes in fixed point with the Q formats given (a bias
may be 4 bytes, int32), or ``"float32"`` for every operand (Q formats ignored). The
``*_InL3`` flags give arguments an L3 home when the user kernel is tiled alone; in a graph
the memory planner decides where each tensor lives.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import int_range
from ..errors import TilingError
from .api import (
    CALL_PARALLEL,
    CALL_SEQUENTIAL,
    D0,
    D1,
    KER_ARG_LOADEDPARTILE_SIZE,
    KER_ARG_PARTILE_SIZE,
    KER_ARG_TILE,
    KER_ARG_TILE_H,
    LOC_D0,
    LOC_D0_EPILOG,
    LOC_D0_PROLOG,
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
    KerArgP,
    KerArgs,
    KerArgSpace,
    Obj,
    TCArg,
)
from .api_spaces import IterParSpace, IterTiledSpace, KernelIterSpace
from .basic_kernels import common, linear, parallel, softmax
from .cnn_layers import (
    KOP_AVGPOOL,
    KOP_CONV,
    KOP_CONV_DP,
    KOP_LINEAR,
    KOP_MATADD,
    KOP_MAXPOOL,
    KOP_NONE,
    KOP_RELU,
    KOP_RELUN,
    KOP_SOFTMAX,
    OBJ_CONST_IN,
    KernelOper,
    bounds,
    c_args,
    check_ctrl,
    conv_layer,
    in_constraint,
    l3,
    layer_types,
    norm,
    pad,
    used,
)
from .cnn_oneplane import OnePlaneCNNGenerators


class CNNGenerators(OnePlaneCNNGenerators):
    """The CNN generators as ``Model`` methods (GAP's argument lists, in order)."""

    def LoadCNNLibrary(self) -> None:
        """Make the CNN basic kernels available (int16, int8 and float32 variants; kernels
        for mixed data sizes are added when a generator needs them)."""
        self._cnn = True
        for dt in ("int16", "int8", "float32"):
            acc = "float32" if dt == "float32" else "int32"
            w = self._simd(dt)
            for k in (parallel.par_set_bias(dt, acc), parallel.par_conv(dt, dt, acc, w),
                      parallel.par_pool_act(acc, dt), linear.linear(dt, dt, dt, dt, w),
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
        args = (Name, Ctrl, In_DataSize, Filter_DataSize, Bias_DataSize, Out_DataSize, In_Q,
                Filter_Q, Bias_Q, Out_Q, In_InL3, Filter_InL3, Bias_InL3, Out_InL3, InFeat,
                OutFeat, Width, Height, ConvOper, Fcx, Fcy, Dcx, Dcy, Scx, Scy, ConvPad, PoolOper,
                Fpx, Fpy, Dpx, Dpy, Spx, Spy, PoolPad, ReLUOper)
        self._first_that_tiles(Name, self._conv_par_feat, self.CNN_ConvolutionPoolReLU_OnePlane,
                               args)

    def _first_that_tiles(self, Name: str, *forms_and_args):
        """Create user kernel ``Name`` in the first form whose tiling fits the L1 budget (the
        last one whatever it gives), as gap_sdk's generators try their forms in turn;
        returns the form used."""
        *forms, args = forms_and_args
        for form in forms[:-1]:
            form(*args)
            try:
                self.tiling(Name)
                return form
            except TilingError:
                del self.kernels[Name]
                if self._open:
                    self._open[1].remove(Name)
        forms[-1](*args)
        return forms[-1]

    def _conv_par_feat(
            self, Name, Ctrl, In_DataSize, Filter_DataSize, Bias_DataSize, Out_DataSize, In_Q,
            Filter_Q, Bias_Q, Out_Q, In_InL3, Filter_InL3, Bias_InL3, Out_InL3, InFeat, OutFeat,
            Width, Height, ConvOper, Fcx, Fcy, Dcx, Dcy, Scx, Scy, ConvPad, PoolOper, Fpx, Fpy,
            Dpx, Dpy, Spx, Spy, PoolPad, ReLUOper) -> None:
        """``CNN_ConvolutionPoolReLU``'s parallel-feature form (gap_sdk 4.x)."""
        gen = "CNN_ConvolutionPoolReLU"
        if KernelOper(PoolOper) == KOP_NONE:
            Fpx = Fpy = Dpx = Dpy = Spx = Spy = 1
        c = conv_layer(gen, Name, Ctrl, {"In": In_DataSize, "Filter": Filter_DataSize,
                                         "Bias": Bias_DataSize, "Out": Out_DataSize},
                       In_Q, Filter_Q, Bias_Q, Out_Q,
                       dict(InFeat=InFeat, OutFeat=OutFeat, Width=Width, Height=Height, Fcx=Fcx,
                            Fcy=Fcy, Dcx=Dcx, Dcy=Dcy, Scx=Scx, Scy=Scy, Fpx=Fpx, Fpy=Fpy,
                            Dpx=Dpx, Dpy=Dpy, Spx=Spx, Spy=Spy),
                       ConvOper, ConvPad, PoolOper, PoolPad, ReLUOper)
        dts, item = c.dts, {k: d.itemsize for k, d in c.dts.items()}
        # What the pooling uses of the convolution output and the convolution of the input
        # (gap_sdk's UsedWc/UsedHc, UsedWidth/UsedHeight); tiles of output rows overlap by
        # the filters' reach beyond their stride.
        fcx, fcy = Dcx * (Fcx - 1) + 1, Dcy * (Fcy - 1) + 1
        fpx, fpy = Dpx * (Fpx - 1) + 1, Dpy * (Fpy - 1) + 1
        used_wc, pp = used(c.wo, Spx, fpx, c.pad_p[0], c.wc)
        used_hc, pp2 = used(c.ho, Spy, fpy, c.pad_p[2], c.hc)
        used_w, pc = used(used_wc, Scx, fcx, c.pad_c[0], Width)
        used_h, pc2 = used(used_hc, Scy, fcy, c.pad_c[2], Height)
        pp, pc = pp + pp2, pc + pc2
        pad_tile = tuple(p * s + q for p, s, q in zip(pp, (Scx, Scx, Scy, Scy), pc))
        overlap_c = fcy + Scy * (fpy - Spy - 1)
        overlap_p = fpy - Spy
        tile_cons = Scy * Spy // np.gcd(Scy, Spy)
        in_cons = {1: 4, 2: 2}.get(item["Filter"], 1)
        # Zero padding, or strides beyond the windows (rows skipped, tiles that would overlap
        # negatively): the whole plane in one tile (D0 and D1 are still cut), so the tile's
        # rows and pads are the plane's; the overlaps make that one tile every line.
        padded = any(pc) or any(pp) or overlap_c < 0 or overlap_p < 0
        if padded:
            overlap_c = Height + pad_tile[2] + pad_tile[3] - c.ho
            overlap_p = used_hc + pp[2] + pp[3] - c.ho
        cons = in_constraint(padded, used_h, Height)

        def rows(arg: str, lines: int):
            return Imm(lines) if padded else K_Arg(arg, KER_ARG_TILE_H)

        acc = c.acc.name
        set_bias = self._lib(parallel.par_set_bias(dts["Bias"].name, acc))
        conv = self._lib(parallel.par_conv(dts["In"].name, dts["Filter"].name, acc,
                                           self._simd(dts["In"])))
        pool = self._lib(parallel.par_pool_act(acc, dts["Out"].name))
        self.UserKernel(Name,
            KernelIterSpace(3, IterParSpace(D1, OutFeat, 8), IterTiledSpace(T0),
                            IterParSpace(D0, InFeat, in_cons)),
            TILE_HOR,
            CArgs(*c_args(dts, {"In": (InFeat, Height, Width),
                                "Filter": (OutFeat, InFeat, Fcy, Fcx), "Bias": (1, OutFeat),
                                "Out": (OutFeat, c.ho, c.wo)})),
            Calls(3,
                Call(set_bias, LOC_D0_PROLOG, Bindings(6,
                    K_Arg("ConvOut", KER_ARG_TILE), Imm(used_wc), rows("ConvOut", used_hc),
                    K_ArgPar("ConvOut", KER_ARG_PARTILE_SIZE, D1),
                    K_Arg("Bias", KER_ARG_TILE), Imm(c.norm_bias))),
                Call(conv, LOC_D0, Bindings(19,
                    K_Arg("In", KER_ARG_TILE), Imm(Width), rows("In", Height),
                    K_ArgPar("Filter", KER_ARG_PARTILE_SIZE, D0),
                    K_ArgPar("ConvOut", KER_ARG_PARTILE_SIZE, D1),
                    K_Arg("Filter", KER_ARG_TILE),
                    K_ArgPar("Filter", KER_ARG_LOADEDPARTILE_SIZE, D0),
                    K_Arg("ConvOut", KER_ARG_TILE), Imm(used_wc), rows("ConvOut", used_hc),
                    Imm(Fcx), Imm(Fcy), Imm(Scx), Imm(Scy), Imm(Dcx), Imm(Dcy), Imm(pc[0]),
                    Imm(pc[2]), Imm(c.norm_conv))),
                Call(pool, LOC_D0_EPILOG, Bindings(19,
                    K_Arg("ConvOut", KER_ARG_TILE), Imm(used_wc), rows("ConvOut", used_hc),
                    K_ArgPar("ConvOut", KER_ARG_PARTILE_SIZE, D1),
                    K_Arg("Out", KER_ARG_TILE), Imm(c.wo), rows("Out", c.ho), Imm(Fpx),
                    Imm(Fpy), Imm(Spx), Imm(Spy), Imm(Dpx), Imm(Dpy), Imm(pp[0]), Imm(pp[2]),
                    Imm(c.pool), Imm(c.norm_out), Imm(c.lb), Imm(c.ub)))),
            KerArgs(5,
                KerArgP("In", KerArgSpace(2, D0, T0), Obj.O_IN | Obj.O_DB | l3(In_InL3), Width,
                        Height, used_w, used_h, pad_tile, pc, item["In"], overlap_c, cons,
                        tile_cons, "In"),
                KerArg("Bias", KerArgSpace(1, D1), OBJ_CONST_IN | l3(Bias_InL3), 1, 1,
                       item["Bias"], 0, 0, 0, "Bias"),
                KerArg("Filter", KerArgSpace(2, D1, D0), OBJ_CONST_IN | l3(Filter_InL3), 1, 1,
                       Fcx * Fcy * item["Filter"], 0, 0, 0, "Filter"),
                KerArg("Out", KerArgSpace(2, D1, T0), Obj.O_OUT | Obj.O_DB | l3(Out_InL3), c.wo,
                       c.ho, item["Out"], 0, 0, 0, "Out"),
                KerArgP("ConvOut", KerArgSpace(2, D1, T0), Obj.O_BUFF | Obj.O_ONETILE, used_wc,
                        used_hc, used_wc, used_hc, pp, pp, c.acc.itemsize, overlap_p,
                        0, 0, None)))
        macs = c.wc * c.hc * Fcx * Fcy * InFeat * OutFeat
        self._cnn_ops[Name] = macs + OutFeat * c.wo * c.ho * Fpx * Fpy

    def CNN_PoolReLU(
            self, Name: str, Ctrl, In_DataSize, Out_DataSize, In_Q: int, Out_Q: int,
            In_InL3: int, Out_InL3: int, InFeat: int, OutFeat: int, Width: int, Height: int,
            PoolOper: KernelOper, Fpx: int, Fpy: int, Dpx: int, Dpy: int, Spx: int, Spy: int,
            PoolPad: int, ReLUOper: KernelOper) -> None:
        """A pooling (``KOP_MAXPOOL``, ``KOP_AVGPOOL`` or ``KOP_NONE``) then an optional
        activation, feature by feature: ``Name(In, Out)``, In [InFeat, Height, Width], Out
        [OutFeat, Ho, Wo] with ``OutFeat == InFeat``; each value is normalised by
        ``In_Q - Out_Q`` (``AT_NORM``, 0 in GAP's models) and clipped as
        ``CNN_ConvolutionPoolReLU``'s pooling does."""
        gen = "CNN_PoolReLU"
        self._need_library(gen, Name)
        check_ctrl(Name, gen, Ctrl)
        if InFeat != OutFeat:
            raise TilingError(f"{gen} {Name!r}: InFeat {InFeat} != OutFeat {OutFeat}: a pooling "
                              f"keeps its features")
        PoolOper = KernelOper(PoolOper)
        if PoolOper not in (KOP_NONE, KOP_MAXPOOL, KOP_AVGPOOL):
            raise TilingError(f"{gen} {Name!r}: PoolOper must be KOP_MAXPOOL, KOP_AVGPOOL or "
                              f"KOP_NONE, got {PoolOper.name}")
        if PoolOper == KOP_NONE:
            Fpx = Fpy = Dpx = Dpy = Spx = Spy = 1
        ints = dict(InFeat=InFeat, Width=Width, Height=Height, Fpx=Fpx, Fpy=Fpy, Dpx=Dpx,
                    Dpy=Dpy, Spx=Spx, Spy=Spy)
        for k, v in ints.items():
            if int(v) < 1:
                raise TilingError(f"{gen} {Name!r}: {k} must be >= 1, got {v}")
        dts = layer_types(Name, gen, {"In": In_DataSize, "Out": Out_DataSize})
        flt = dts["Out"].kind == "f"
        shift = 0 if flt else norm(Name, gen, "In_Q - Out_Q", In_Q - Out_Q)
        lb, ub = bounds(Name, gen, ReLUOper, dts["Out"], Out_Q)
        fpx, fpy = Dpx * (Fpx - 1) + 1, Dpy * (Fpy - 1) + 1
        pp = pad(Width, fpx, Spx) + pad(Height, fpy, Spy) if PoolPad and PoolOper else \
            (0, 0, 0, 0)
        wo = (Width - fpx + pp[0] + pp[1]) // Spx + 1
        ho = (Height - fpy + pp[2] + pp[3]) // Spy + 1
        if wo < 1 or ho < 1:
            raise TilingError(f"{gen} {Name!r}: a {Fpx}x{Fpy} pooling does not fit the "
                              f"{Width}x{Height} input")
        used_w, pw = used(wo, Spx, fpx, pp[0], Width)
        used_h, ph = used(ho, Spy, fpy, pp[2], Height)
        pp = pw + ph
        # As in CNN_ConvolutionPoolReLU: padding or a stride beyond the window, the plane in
        # one tile, every line of it.
        padded = any(pp) or fpy < Spy
        overlap = Height + pp[2] + pp[3] - ho if padded else fpy - Spy

        def rows(arg: str, lines: int):
            return Imm(lines) if padded else K_Arg(arg, KER_ARG_TILE_H)

        oper = {KOP_NONE: common.POOL_NONE, KOP_MAXPOOL: common.POOL_MAX,
                KOP_AVGPOOL: common.POOL_AVG}[PoolOper]
        k = self._lib(parallel.par_pool_act(dts["In"].name, dts["Out"].name))
        self.UserKernel(Name,
            KernelIterSpace(2, IterParSpace(D0, InFeat, 8), IterTiledSpace(T0)),
            TILE_HOR,
            CArgs(*c_args(dts, {"In": (InFeat, Height, Width), "Out": (OutFeat, ho, wo)})),
            Calls(1,
                Call(k, LOC_LOOP, Bindings(19,
                    K_Arg("In", KER_ARG_TILE), Imm(Width), rows("In", Height),
                    K_ArgPar("Out", KER_ARG_PARTILE_SIZE, D0), K_Arg("Out", KER_ARG_TILE),
                    Imm(wo), rows("Out", ho), Imm(Fpx), Imm(Fpy), Imm(Spx), Imm(Spy), Imm(Dpx),
                    Imm(Dpy), Imm(pp[0]), Imm(pp[2]), Imm(oper), Imm(shift), Imm(lb), Imm(ub)))),
            KerArgs(2,
                KerArgP("In", KerArgSpace(2, D0, T0), Obj.O_IN | Obj.O_DB | l3(In_InL3), Width,
                        Height, used_w, used_h, pp, pp, dts["In"].itemsize, overlap,
                        in_constraint(padded, used_h, Height), Spy, "In"),
                KerArg("Out", KerArgSpace(2, D0, T0), Obj.O_OUT | Obj.O_DB | l3(Out_InL3), wo, ho,
                       dts["Out"].itemsize, 0, 0, 0, "Out")))
        self._cnn_ops[Name] = OutFeat * wo * ho * Fpx * Fpy

    def CNN_MatAdd(
            self, Name: str, Ctrl, In1_DataSize, In2_DataSize, Out_DataSize, In1_Q: int,
            In2_Q: int, Out_Q: int, In1_InL3: int, In2_InL3: int, Out_InL3: int, InFeat: int,
            OutFeat: int, Width: int, Height: int, AddMatOper: KernelOper) -> None:
        """``Out = In1 + In2`` saturated to the output type (GAP's ``KerParMatAdd``: the Q
        formats are the caller's to match): ``Name(In1, In2, Out)``, each [InFeat, Height,
        Width], ``OutFeat == InFeat``; one data size for the three (or ``"float32"``)."""
        gen = "CNN_MatAdd"
        self._need_library(gen, Name)
        check_ctrl(Name, gen, Ctrl)
        if KernelOper(AddMatOper) != KOP_MATADD:
            raise TilingError(f"{gen} {Name!r}: AddMatOper must be KOP_MATADD")
        for k, v in (("InFeat", InFeat), ("Width", Width), ("Height", Height)):
            if int(v) < 1:
                raise TilingError(f"{gen} {Name!r}: {k} must be >= 1, got {v}")
        if InFeat != OutFeat:
            raise TilingError(f"{gen} {Name!r}: InFeat {InFeat} != OutFeat {OutFeat}")
        dts = layer_types(Name, gen, {"In1": In1_DataSize, "In2": In2_DataSize,
                                      "Out": Out_DataSize})
        if len(set(dts.values())) != 1:
            raise TilingError(f"{gen} {Name!r}: In1, In2 and Out must have one data size, got "
                              f"{', '.join(d.name for d in dts.values())}")
        dt = dts["Out"]
        lb, ub = (0, 0) if dt.kind == "f" else int_range(dt)
        k = self._lib(parallel.par_mat_add(dt.name))
        shape = (InFeat, Height, Width)
        self.UserKernel(Name,
            KernelIterSpace(2, IterParSpace(D0, InFeat, 8), IterTiledSpace(T0)),
            TILE_HOR,
            CArgs(*c_args(dts, {"In1": shape, "In2": shape, "Out": shape})),
            Calls(1,
                Call(k, LOC_LOOP, Bindings(8,
                    K_Arg("In1", KER_ARG_TILE), K_Arg("In2", KER_ARG_TILE),
                    K_Arg("Out", KER_ARG_TILE), Imm(Width), K_Arg("In1", KER_ARG_TILE_H),
                    K_ArgPar("In1", KER_ARG_PARTILE_SIZE, D0), Imm(lb), Imm(ub)))),
            KerArgs(3, *(KerArg(n, KerArgSpace(2, D0, T0),
                                (Obj.O_OUT if n == "Out" else Obj.O_IN) | Obj.O_DB | l3(f), Width,
                                Height, dt.itemsize, 0, 0, 0, n)
                         for n, f in (("In1", In1_InL3), ("In2", In2_InL3), ("Out", Out_InL3)))))
        self._cnn_ops[Name] = InFeat * Width * Height

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
        self._first_that_tiles(Name, self._linear_par_feat, self.CNN_LinearReLU_OnePlane,
                               (Name, Ctrl, In_DataSize, Filter_DataSize, Bias_DataSize,
                                Out_DataSize, In_Q, Filter_Q, Bias_Q, Out_Q, In_InL3, Filter_InL3,
                                Bias_InL3, Out_InL3, InDim, OutDim, LinearOper, ReLUOper))

    def _linear_par_feat(self, Name, Ctrl, In_DataSize, Filter_DataSize, Bias_DataSize,
                         Out_DataSize, In_Q, Filter_Q, Bias_Q, Out_Q, In_InL3, Filter_InL3,
                         Bias_InL3, Out_InL3, InDim, OutDim, LinearOper, ReLUOper) -> None:
        """``CNN_LinearReLU``'s parallel-feature form (gap_sdk 4.x)."""
        gen = "CNN_LinearReLU"
        lin, dts, norms, (lb, ub) = self._linear(gen, Name, Ctrl, In_DataSize, Filter_DataSize,
                                                 Bias_DataSize, Out_DataSize, In_Q, Filter_Q,
                                                 Bias_Q, Out_Q, InDim, OutDim, LinearOper,
                                                 ReLUOper)
        item = {k: d.itemsize for k, d in dts.items()}
        self.UserKernel(Name,
            KernelIterSpace(2, IterParSpace(D0, OutDim, 8), IterTiledSpace(T0)),
            TILE_HOR,
            CArgs(*c_args(dts, {"In": (1, InDim), "Filter": (OutDim, InDim), "Bias": (OutDim, 1),
                                "Out": (OutDim, 1)})),
            Calls(1,
                Call(lin, LOC_LOOP, Bindings(10,
                    K_Arg("In", KER_ARG_TILE), Imm(InDim), K_Arg("Filter", KER_ARG_TILE),
                    K_Arg("Bias", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE),
                    K_ArgPar("Out", KER_ARG_PARTILE_SIZE, D0), Imm(norms[0]), Imm(norms[1]),
                    Imm(lb), Imm(ub)))),
            KerArgs(4,
                KerArg("In", KerArgSpace(1, T0), Obj.O_IN | Obj.O_BUFF | Obj.O_NTILED
                       | l3(In_InL3), 1, 1, InDim * item["In"], 0, 0, 0, "In"),
                KerArg("Filter", KerArgSpace(1, D0), OBJ_CONST_IN | l3(Filter_InL3), 1, 1,
                       InDim * item["Filter"], 0, 0, 0, "Filter"),
                KerArg("Bias", KerArgSpace(1, D0), OBJ_CONST_IN | l3(Bias_InL3), 1, 1,
                       item["Bias"], 0, 0, 0, "Bias"),
                KerArg("Out", KerArgSpace(1, D0), Obj.O_OUT | Obj.O_DB | l3(Out_InL3), 1, 1,
                       item["Out"], 0, 0, 0, "Out")))
        self._cnn_ops[Name] = InDim * OutDim

    def _linear(self, gen, Name, Ctrl, In_DataSize, Filter_DataSize, Bias_DataSize,
                Out_DataSize, In_Q, Filter_Q, Bias_Q, Out_Q, InDim, OutDim, LinearOper,
                ReLUOper):
        """A linear layer's arguments checked (both generations): its basic kernel, the
        operands' dtypes, the (output, bias) shifts and the activation's clip."""
        check_ctrl(Name, gen, Ctrl)
        if KernelOper(LinearOper) != KOP_LINEAR:
            raise TilingError(f"{gen} {Name!r}: LinearOper must be KOP_LINEAR")
        for k, v in (("InDim", InDim), ("OutDim", OutDim)):
            if int(v) < 1:
                raise TilingError(f"{gen} {Name!r}: {k} must be >= 1, got {v}")
        dts = layer_types(Name, gen, {"In": In_DataSize, "Filter": Filter_DataSize,
                                      "Bias": Bias_DataSize, "Out": Out_DataSize}, bias=("Bias",))
        flt = dts["Out"].kind == "f"
        lb_ub = bounds(Name, gen, ReLUOper, dts["Out"], Out_Q)
        shift = 0 if flt else norm(Name, gen, "In_Q + Filter_Q - Out_Q", Filter_Q + In_Q - Out_Q)
        norms = (shift, 0 if flt else Filter_Q + In_Q - Bias_Q)
        lin = self._lib(linear.linear(dts["In"].name, dts["Filter"].name, dts["Bias"].name,
                                      dts["Out"].name, self._simd(dts["In"])))
        return lin, dts, norms, lb_ub

    # -- softmax -------------------------------------------------------------------------------

    def CNN_SoftMax(self, Name: str, Ctrl, In_DataSize, Out_DataSize, In_Q: int, Out_Q: int,
                    In_InL3: int, Out_InL3: int, Dim: int, SoftMaxOper: KernelOper) -> None:
        """A softmax over ``Dim`` inputs in Q``In_Q``, outputs in Q``Out_Q`` (Q15 for int16,
        Q7 for int8 in GAP's library): ``Name(In, Out)``. The arguments, by position or by
        the names of GAP's ``CNN_Generators.h``, are tabled in docs/graph.md."""
        gen = "CNN_SoftMax"
        self._need_library(gen, Name)
        check_ctrl(Name, gen, Ctrl)
        if KernelOper(SoftMaxOper) != KOP_SOFTMAX:
            raise TilingError(f"{gen} {Name!r}: SoftMaxOper must be KOP_SOFTMAX")
        if int(Dim) < 1:
            raise TilingError(f"{gen} {Name!r}: Dim must be >= 1, got {Dim}")
        dts = layer_types(Name, gen, {"In": In_DataSize, "Out": Out_DataSize})
        if dts["Out"].kind != "f":
            bits = 8 * dts["Out"].itemsize - 1
            if not 0 <= Out_Q <= bits:
                raise TilingError(f"{gen} {Name!r}: Out_Q must be 0..{bits} for "
                                  f"{dts['Out'].name}, got {Out_Q}")
            if not 0 <= In_Q <= 30:
                raise TilingError(f"{gen} {Name!r}: In_Q must be 0..30, got {In_Q}")
        sm = self._lib(softmax.softmax(dts["In"].name, dts["Out"].name))
        self.UserKernel(Name,
            KernelIterSpace(1, IterTiledSpace(T0)),
            TILE_HOR,
            CArgs(*c_args(dts, {"In": (1, Dim), "Out": (1, Dim)})),
            Calls(1,
                Call(sm, LOC_LOOP, Bindings(5,
                    K_Arg("In", KER_ARG_TILE), Imm(Dim), Imm(In_Q), K_Arg("Out", KER_ARG_TILE),
                    Imm(Out_Q)))),
            KerArgs(2,
                KerArg("In", KerArgSpace(1, T0), Obj.O_IN | Obj.O_BUFF | l3(In_InL3), 1, Dim,
                       dts["In"].itemsize, 0, 0, 8, "In"),
                KerArg("Out", KerArgSpace(1, T0), Obj.O_OUT | Obj.O_BUFF | l3(Out_InL3), 1, Dim,
                       dts["Out"].itemsize, 0, 0, 0, "Out")))
        self._cnn_ops[Name] = Dim


__all__ = ["KernelOper", "CNNGenerators", "KOP_NONE", "KOP_CONV", "KOP_CONV_DP", "KOP_MAXPOOL",
           "KOP_AVGPOOL", "KOP_RELU", "KOP_RELUN", "KOP_LINEAR", "KOP_MATADD", "KOP_SOFTMAX"]
