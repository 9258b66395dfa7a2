"""The GAP AutoTiler's CNN generators of the older API, one feature plane per call: for models
written against it (before the iteration spaces of the newer ``CNN_Generators.c``). Same
argument lists, semantics and basic kernels' arithmetic as the built-ins of ``cnn``; only
the iteration differs.

- ``CNN_ConvolutionPoolReLU_OnePlane``: iteration order (out-plane, tile, in-plane),
  horizontal tiles of the output rows; an input tile holds its output tile's receptive field
  (tiles overlap by the filter's reach); a one-tile L1 buffer ``ConvOut`` holds the
  convolution of the current tile before the bias/normalisation/activation/pooling kernel
  writes ``Out``. Zero padding needs the whole input plane in one tile.
- ``CNN_LinearReLU_OnePlane``: tiles of output rows, the whole input in L1.
"""

from __future__ import annotations

from .api import (
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
)
from .basic_kernels import convolution, pooling
from .cnn_layers import KOP_NONE, OBJ_IN_DB, OBJ_OUT_DB, KernelOper, c_args, conv_layer, l3


class OnePlaneCNNGenerators:
    """The older API's CNN generators as ``Model`` methods (GAP's argument lists, in order)."""

    # -- convolution, pooling, activation ----------------------------------------------------

    def CNN_ConvolutionPoolReLU_OnePlane(
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
        gen = "CNN_ConvolutionPoolReLU_OnePlane"
        self._need_library(gen, Name)
        if KernelOper(PoolOper) == KOP_NONE:
            Fpx = Fpy = Dpx = Dpy = Spx = Spy = 1
        c = conv_layer(gen, Name, Ctrl, {"In": In_DataSize, "Filter": Filter_DataSize,
                                         "Bias": Bias_DataSize, "Out": Out_DataSize},
                       In_Q, Filter_Q, Bias_Q, Out_Q,
                       dict(InFeat=InFeat, OutFeat=OutFeat, Width=Width, Height=Height, Fcx=Fcx,
                            Fcy=Fcy, Dcx=Dcx, Dcy=Dcy, Scx=Scx, Scy=Scy, Fpx=Fpx, Fpy=Fpy,
                            Dpx=Dpx, Dpy=Dpy, Spx=Spx, Spy=Spy),
                       ConvOper, ConvPad, PoolOper, PoolPad, ReLUOper)
        dts, acc_dt, pad_c, pad_p = c.dts, c.acc, c.pad_c, c.pad_p
        wc, hc, wo, ho, oper = c.wc, c.hc, c.wo, c.ho, c.pool
        w = self._simd(dts["In"])
        set_bias = self._lib(convolution.set_bias(dts["Bias"].name, acc_dt.name))
        conv = self._lib(convolution.conv(dts["In"].name, dts["Filter"].name, acc_dt.name, w))
        pool = self._lib(pooling.pool_act(acc_dt.name, dts["Out"].name))
        # Tiles are horizontal bands of output rows. A band of T output rows needs Spy*T
        # convolution rows (plus the pooling's overlap) and Scy*Spy*T input rows (plus the
        # filter's reach); the input's declared overlap also covers rows no output uses.
        padded = any(pad_c) or any(pad_p)
        k_in = Scy * Spy
        hc_decl = hc if padded else (ho - 1) * Spy + Dpy * (Fpy - 1) + 1
        one = OBJ_CONSTRAINTS_ONEPREFTILE if padded else 0
        item = {k: d.itemsize for k, d in dts.items()}
        self.UserKernel(Name,
            KernelDimensions(InFeat, Width, Height, OutFeat),
            KernelIterationOrder(KER_DIM4, KER_OUT_PLANE, KER_TILE, KER_IN_PLANE),
            TILE_HOR,
            CArgs(*c_args(dts)),
            Calls(3,
                Call(set_bias, LOC_IN_PLANE_PROLOG, Bindings(6,
                    K_Arg("ConvOut", KER_ARG_TILE), K_Arg("ConvOut", KER_ARG_TILE_W),
                    K_Arg("ConvOut", KER_ARG_TILE_H), K_Arg("Bias", KER_ARG_TILE),
                    Ker_IteratorIndex(KER_OUT_PLANE), Imm(c.norm_bias))),
                Call(conv, LOC_INNER_LOOP, Bindings(16,
                    K_Arg("In", KER_ARG_TILE), K_Arg("In", KER_ARG_TILE_W),
                    K_Arg("In", KER_ARG_TILE_H), K_Arg("Filter", KER_ARG_TILE),
                    K_Arg("ConvOut", KER_ARG_TILE), K_Arg("ConvOut", KER_ARG_TILE_W),
                    K_Arg("ConvOut", KER_ARG_TILE_H), Imm(Fcx), Imm(Fcy), Imm(Scx), Imm(Scy),
                    Imm(Dcx), Imm(Dcy), Imm(pad_c[0]), Imm(pad_c[2]), Imm(c.norm_conv))),
                Call(pool, LOC_IN_PLANE_EPILOG, Bindings(18,
                    K_Arg("ConvOut", KER_ARG_TILE), K_Arg("ConvOut", KER_ARG_TILE_W),
                    K_Arg("ConvOut", KER_ARG_TILE_H), K_Arg("Out", KER_ARG_TILE),
                    K_Arg("Out", KER_ARG_TILE_W), K_Arg("Out", KER_ARG_TILE_H), Imm(Fpx),
                    Imm(Fpy), Imm(Spx), Imm(Spy), Imm(Dpx), Imm(Dpy), Imm(pad_p[0]),
                    Imm(pad_p[2]), Imm(oper), Imm(c.norm_out), Imm(c.lb), Imm(c.ub)))),
            KerArgs(5,
                KerArg("In", OBJ_IN_DB | Obj.O_3D | l3(In_InL3), Width, Height, item["In"],
                       Height - k_in * ho, one, 0, "In"),
                KerArg("Bias", Obj.O_IN | l3(Bias_InL3), OutFeat, 1, item["Bias"], 0, 0, 0,
                       "Bias"),
                KerArg("Filter", Obj.O_IN | Obj.O_DB | Obj.O_3D | Obj.O_4D | l3(Filter_InL3),
                       Fcx, Fcy, item["Filter"], 0, 0, 0, "Filter"),
                KerArg("Out", OBJ_OUT_DB | Obj.O_3D | l3(Out_InL3), wo, ho, item["Out"], 0, 0,
                       0, "Out"),
                KerArg("ConvOut", Obj.O_BUFF | Obj.O_TILED | Obj.O_ONETILE, wc, hc_decl,
                       acc_dt.itemsize, hc_decl - Spy * ho, 0, 0, None)))
        macs = wc * hc * Fcx * Fcy * InFeat * OutFeat
        self._cnn_ops[Name] = macs + OutFeat * wo * ho * Fpx * Fpy

    # -- linear layer --------------------------------------------------------------------------

    def CNN_LinearReLU_OnePlane(
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
        gen = "CNN_LinearReLU_OnePlane"
        self._need_library(gen, Name)
        lin, dts, (shift, norm_bias), (lb, ub) = self._linear(
            gen, Name, Ctrl, In_DataSize, Filter_DataSize, Bias_DataSize, Out_DataSize, In_Q,
            Filter_Q, Bias_Q, Out_Q, InDim, OutDim, LinearOper, ReLUOper)
        item = {k: d.itemsize for k, d in dts.items()}
        self.UserKernel(Name,
            KernelDimensions(1, InDim, OutDim, 1),
            KernelIterationOrder(KER_DIM2, KER_TILE),
            TILE_HOR,
            CArgs(*c_args(dts)),
            Calls(1,
                Call(lin, LOC_INNER_LOOP, Bindings(10,
                    K_Arg("In", KER_ARG_TILE), Imm(InDim), K_Arg("Filter", KER_ARG_TILE),
                    K_Arg("Bias", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE),
                    K_Arg("Out", KER_ARG_TILE_H), Imm(shift), Imm(norm_bias), Imm(lb),
                    Imm(ub)))),
            KerArgs(4,
                KerArg("In", Obj.O_IN | l3(In_InL3), InDim, 1, item["In"], 0, 0, 0, "In"),
                KerArg("Filter", OBJ_IN_DB | l3(Filter_InL3), InDim, OutDim, item["Filter"],
                       0, 0, 0, "Filter"),
                KerArg("Bias", OBJ_IN_DB | l3(Bias_InL3), 1, OutDim, item["Bias"], 0, 0, 0,
                       "Bias"),
                KerArg("Out", OBJ_OUT_DB | l3(Out_InL3), 1, OutDim, item["Out"], 0, 0, 0,
                       "Out")))
        self._cnn_ops[Name] = InDim * OutDim
