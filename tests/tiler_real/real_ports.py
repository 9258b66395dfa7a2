"""Python ports of the generators behind the real cases, line by line through npukit.tiler.

Older generation (pulp-platform/autotiler at dd4508adafd6e7b4242cb22ebc5f84b5bae8eaca,
src/CNN_Generator.c, the CNN generators PULP-DroNet's model calls): ``CNN_ReLu_SW_fp``,
``CNN_MatrixAdd_SW_fp``, ``MediumParOutFeatConvolutionPoolReLU_fp``,
``LargeParOutFeatConvolutionPoolReLU_Hor_fp``.

Newer generation (GreenWaves-Technologies/gap_sdk): ``ParMatMultGenerator`` and
``ParVectMatMultGenerator`` (tools/autotiler_v3/Generators/MatMult/MatMultGenerator.c at
a23026507efe57410b98c5945544cff3150eb996); ``CNN_LinearReLU`` and ``CNN_ConvolutionPoolReLU``
(tools/autotiler_v3/CNN_Generators/CNN_Generators.c at
15fcc33e3c7f11e1b837ae1393a6b9466bb8e55e), for the configurations the MNIST model uses
(parallel features, no depth-wise or double-precision convolution, L2 homes).

AutoTiler 3.0 (CappelDen/Univariate-time-series-forecasting-with-Seq2Seq-models-on-GAPuino-
at 0a34b071f9edd98f425b7284256ea129ef9192c9, GAPuino_Code/autotiler_generators/tools/
autotiler_v3/generators/GRU/*/EncDecGenerator.c): ``EncoderGRUGenerator`` of the ``tiled``
variant (three tiled spaces) and of the ``RecKer2notile`` one (two, Rec_Kernel2 a buffer).
"""

from __future__ import annotations

from npukit.tiler import *

S16 = "short int * __restrict__"


def v4s(left, right, top, bottom) -> int:
    """A v4s (left, right, top, bottom) as the int the C code passes."""
    return left | right << 8 | top << 16 | bottom << 24


# -- older generation -----------------------------------------------------------------------

def _in_out_plane_kernel(m, Name, kernel, bindings, InPlane, OutPlane, Width, Height):
    m.UserKernel(Name,
        KernelDimensions(InPlane, Width, Height, OutPlane),
        KernelIterationOrder(KER_DIM3, KER_IN_OUT_PLANE, KER_TILE),
        TILE_HOR,
        CArgs(2,
              TCArg("short int * __restrict__", "In"),
              TCArg("short int * __restrict__", "Out")),
        Calls(1, Call(kernel, LOC_INNER_LOOP, bindings)),
        KerArgs(2,
            KerArg("In", OBJ_IN_DB_3D, Width, Height, 2, 0, 0, 0, "In", 0),
            KerArg("Out", OBJ_IN_OUT_DB_3D, Width, Height, 2, 0, 0, 0, "Out", 0)))


def cnn_relu_sw_fp(m, Name, InPlane, OutPlane, Width, Height):
    """CNN_ReLu_SW_fp: Out = ReLU(In), plane by plane."""
    _in_out_plane_kernel(m, Name, "KerReLU_fp", Bindings(4,
        K_Arg("In", KER_ARG_TILE), K_Arg("In", KER_ARG_TILE_W), K_Arg("In", KER_ARG_TILE_H),
        K_Arg("Out", KER_ARG_TILE)), InPlane, OutPlane, Width, Height)


def cnn_matrix_add_sw_fp(m, Name, InPlane, OutPlane, Width, Height):
    """CNN_MatrixAdd_SW_fp: Out += In, plane by plane."""
    _in_out_plane_kernel(m, Name, "KerAddFM_fp", Bindings(4,
        K_Arg("In", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE), K_Arg("In", KER_ARG_TILE_W),
        K_Arg("In", KER_ARG_TILE_H)), InPlane, OutPlane, Width, Height)


def _conv_names(FSc, ConvStride):
    return f"KerParConv{FSc}x{FSc}Stride{ConvStride}_fp"


def medium_par_out_feat_conv(m, Name, InFeat, OutFeat, Width, Height, FSc, ConvStride,
                             ConvDoPad, ConvDoReLU, FSp, PoolStride, PoolDoPad, PoolDoReLU,
                             DoPool):
    """MediumParOutFeatConvolutionPoolReLU_fp: output features tiled (KER_TILE), input
    features tiled inside (KER_TILE1), whole planes."""
    if DoPool == 0:
        FSp, PoolStride = 1, 1
    ConvKerName = _conv_names(FSc, ConvStride)
    PoolKerName = "KerParMaxPool2x2Stride2_fp"
    PadInp = v4s(0, 0, 0, 0)
    if ConvDoPad:
        PadInc = v4s((FSc - 1) // 2, FSc // 2, (FSc - 1) // 2, FSc // 2)
        Wc = (Width - FSc + ((FSc - 1) // 2) + (FSc // 2)) // ConvStride + 1
        Hc = (Height - FSc + ((FSc - 1) // 2) + (FSc // 2)) // ConvStride + 1
    else:
        PadInc = v4s(0, 0, 0, 0)
        Wc = (Width - FSc) // ConvStride + 1
        Hc = (Height - FSc) // ConvStride + 1
    if DoPool:
        Wo, Ho = (Wc - FSp) // PoolStride + 1, (Hc - FSp) // PoolStride + 1
        if ConvDoPad:
            PadInp = v4s(0, 0, (FSp - 1) // 2, FSp // 2)
            Wo = (Wc - FSp + ((FSp - 1) // 2) + (FSp // 2)) // PoolStride + 1
            Ho = (Hc - FSp + ((FSp - 1) // 2) + (FSp // 2)) // PoolStride + 1
    else:
        Wo, Ho = Wc, Hc
    out = "ConvOut" if DoPool else "Out"
    m.UserKernel(Name,
        KernelDimensionsAndUserSymbols(InFeat, Width, Height, OutFeat,
            KerDynamicSymbols(4, S_Dyn("Wo", Wo), S_Dyn("Ho", Ho), S_Dyn("Wc", Wc),
                              S_Dyn("Hc", Hc))),
        KernelIterationOrder(KER_DIM3, KER_TILE, KER_TILE1),
        TILE_HOR,
        CArgs(5,
              TCArg("short int * __restrict__", "In"),
              TCArg("short int * __restrict__", "Filter"),
              TCArg("short int * __restrict__", "Out"),
              TCArg("unsigned int", "Norm"),
              TCArg("short int * __restrict__", "Bias")),
        Calls(3,
            Call("KerParSetBias_fp", LOC_INNER_LOOP1_PROLOG, Bindings(5,
                K_Arg(out, KER_ARG_TILE), UserSymb("Wo"), UserSymb("Ho"),
                K_Arg(out, KER_ARG_TILE_H), K_Arg("Bias", KER_ARG_TILE))),
            Call(ConvKerName, LOC_INNER_LOOP1, Bindings(17,
                K_Arg("In", KER_ARG_TILE), KerDim(K_W), KerDim(K_H),
                K_Arg("In", KER_ARG_TILE_H), K_Arg(out, KER_ARG_TILE_H),
                K_Arg("In", KER_ARG_TILE_BASE), K_Arg("Filter", KER_ARG_TILE),
                K_Arg(out, KER_ARG_TILE), C_Arg("Norm"), KerDim(K_INP), Imm(0),
                AT_IGNORE_ARG_BINDING, Imm(PadInc), AT_IGNORE_ARG_BINDING,
                AT_IGNORE_ARG_BINDING, AT_IGNORE_ARG_BINDING, AT_IGNORE_ARG_BINDING)),
            Call("KerParReLU_fp", LOC_INNER_LOOP1_EPILOG, Bindings(5,
                K_Arg(out, KER_ARG_TILE), UserSymb("Wc"), UserSymb("Hc"),
                K_Arg(out, KER_ARG_TILE_H), K_Arg("Out", KER_ARG_TILE)))
            if ConvDoReLU else
            (Call(PoolKerName, LOC_INNER_LOOP1_EPILOG, Bindings(7,
                K_Arg("ConvOut", KER_ARG_TILE), UserSymb("Wc"), UserSymb("Hc"),
                K_Arg("ConvOut", KER_ARG_TILE_H), K_Arg("Out", KER_ARG_TILE), Imm(PadInp),
                Imm(PoolDoReLU))) if DoPool else AT_NO_CALL)),
        KerArgs(5,
            KerArg("In", OBJ_IN_DB | O_TILE1, Width * Height, InFeat, 2, 0, 0, 0, "In", 0),
            KerArg("Filter", OBJ_IN_DB, InFeat, OutFeat, FSc * FSc * 2, 0, 0, 8, "Filter", 0),
            KerArg("Bias", OBJ_BUFFER_IN, 1, OutFeat, 2, 0, 0, 0, "Bias", 0),
            KerArg("Out", OBJ_OUT_DB, Wo * Ho, OutFeat, 2, 0, 0, 0, "Out", 0),
            KerArg("ConvOut", OBJ_BUFFER_ONETILE, Wc * Hc, OutFeat, 2, 0, 0, 0, "", 0)
            if DoPool else AT_NO_KER_ARG))


def large_par_out_feat_conv_hor(m, Name, InFeat, OutFeat, Width, Height, FSc, ConvStride,
                                ConvDoPad, ConvDoReLU, FSp, PoolStride, PoolDoPad, PoolDoReLU,
                                DoPool):
    """LargeParOutFeatConvolutionPoolReLU_Hor_fp: lines of every feature plane tiled
    (KER_TILE, 2-D strided arguments, the input padded), output features inside (KER_TILE1)."""
    if DoPool == 0:
        FSp, PoolStride = 1, 1
    TileCons = ConvStride * PoolStride
    Overlap = FSc + ConvStride * (FSp - PoolStride - 1)
    ConvKerName = _conv_names(FSc, ConvStride)
    PadInp = v4s(0, 0, 0, 0)
    if ConvDoPad:
        PadTc, PadBc = (FSc - 1) // 2, FSc // 2
        Wc = (Width - FSc + ((FSc - 1) // 2) + (FSc // 2)) // ConvStride + 1
        Hc = (Height - FSc + ((FSc - 1) // 2) + (FSc // 2)) // ConvStride + 1
    else:
        PadTc, PadBc = 0, 0
        Wc = (Width - FSc) // ConvStride + 1
        Hc = (Height - FSc) // ConvStride + 1
    if DoPool:
        if ConvDoPad:
            PadTp, PadBp = (FSp - 1) // 2, FSp // 2
            PadInp = v4s(0, 0, PadTp, PadBp)
            Wo = (Wc - FSp + ((FSp - 1) // 2) + (FSp // 2)) // PoolStride + 1
            Ho = (Hc - FSp + ((FSp - 1) // 2) + (FSp // 2)) // PoolStride + 1
        else:
            Wo, Ho = (Wc - FSp) // PoolStride + 1, (Hc - FSp) // PoolStride + 1
    else:
        Wo, Ho = Wc, Hc
    out = "ConvOut" if DoPool else "Out"
    m.UserKernel(Name,
        KernelDimensionsAndUserSymbols(InFeat, Width, Height, OutFeat,
            KerDynamicSymbols(4, S_Dyn("Wo", Wo), S_Dyn("Ho", Ho), S_Dyn("Wc", Wc),
                              S_Dyn("Hc", Hc))),
        KernelIterationOrder(KER_DIM3, KER_TILE, KER_TILE1),
        TILE_HOR,
        CArgs(5,
              TCArg("short int * __restrict__", "In"),
              TCArg("short int * __restrict__", "Filter"),
              TCArg("short int * __restrict__", "Out"),
              TCArg("unsigned int", "Norm"),
              TCArg("short int * __restrict__", "Bias")),
        Calls(3,
            Call("KerParSetBias_fp", LOC_INNER_LOOP1_PROLOG, Bindings(5,
                K_Arg(out, KER_ARG_TILE), UserSymb("Wc"), K_Arg(out, KER_ARG_TILE_H),
                KerDim(K_OUTP), K_Arg("Bias", KER_ARG_TILE))),
            Call(ConvKerName, LOC_INNER_LOOP1, Bindings(17,
                K_Arg("In", KER_ARG_TILE), KerDim(K_W), K_Arg("In", KER_ARG_TILE_H),
                KerDim(K_INP), K_Arg("Filter", KER_ARG_TILE_H),
                K_Arg("Filter", KER_ARG_TILE_BASE), K_Arg("Filter", KER_ARG_TILE),
                K_Arg(out, KER_ARG_TILE), C_Arg("Norm"), K_Arg("In", KER_ARG_TILEINDEX),
                K_Arg("In", KER_ARG_NTILES), Imm(1), K_Arg("In", KER_ARG_PAD),
                K_Arg("In", KER_ARG_TILE_H0), K_Arg("In", KER_ARG_H),
                AT_IGNORE_ARG_BINDING, AT_IGNORE_ARG_BINDING)),
            Call("KerParReLU_fp", LOC_INNER_LOOP1_EPILOG, Bindings(5,
                K_Arg(out, KER_ARG_TILE), UserSymb("Wc"), K_Arg(out, KER_ARG_TILE_H),
                KerDim(K_OUTP), K_Arg("Out", KER_ARG_TILE)))
            if ConvDoReLU else
            (Call("KerParMaxPool2x2Stride2_fp", LOC_INNER_LOOP1_EPILOG, Bindings(7,
                K_Arg("ConvOut", KER_ARG_TILE), UserSymb("Wc"), K_Arg("ConvOut", KER_ARG_TILE_H),
                KerDim(K_OUTP), K_Arg("Out", KER_ARG_TILE), Imm(PadInp), Imm(PoolDoReLU)))
             if DoPool else AT_NO_CALL)),
        KerArgs(5,
            KerArg2DP("In", OBJ_IN_DB, Width * InFeat, Height, Width, 0, 0, PadTc, PadBc, 2,
                      Overlap, OBJ_CONSTRAINTS_PAD_REM if ConvDoPad else OBJ_CONSTRAINTS_DROP_REM,
                      TileCons, "In", 0)
            if ConvDoPad else
            KerArg2D("In", OBJ_IN_DB, Width * InFeat, Height, Width, 2, Overlap,
                     OBJ_CONSTRAINTS_DROP_REM, TileCons, "In", 0),
            KerArg("Filter", OBJ_IN_DB | O_TILE1, InFeat, OutFeat, FSc * FSc * 2, 0, 0, 8,
                   "Filter", 0),
            KerArg("Bias", OBJ_BUFFER_IN_NTILED, 1, OutFeat, 2, 0, 0, 0, "Bias", 0),
            KerArg2D("Out", OBJ_OUT_DB, Wo * OutFeat, Ho, Wo, 2, 0, 0, 0, "Out", 0),
            KerArg("ConvOut", OBJ_BUFFER_ONETILE, Wc * OutFeat, Hc, 2, 0, 0, 0, "", 0)
            if DoPool else AT_NO_KER_ARG))


# -- newer generation -----------------------------------------------------------------------

def par_mat_mult_generator(m, Name, LineM1, ColM1, LineM2, ColM2, Type=1):
    """ParMatMultGenerator, 16-bit (Type 1): Out = M1 x M2; M1's and Out's lines in Tile1,
    M2's columns in Tile0 (vertical)."""
    LineO, ColO = LineM1, ColM2
    DataType, DataSize, MatKer = "short int * __restrict__", 2, "KerMatMultParallel16"
    m.UserKernel(Name,
        KernelIterSpace(2, IterTiledSpace(T1), IterTiledSpace(T0)),
        TILE_HOR,
        CArgs(4,
              TCArg(DataType, "M1"),
              TCArg(DataType, "M2"),
              TCArg(DataType, "Out"),
              TCArg("unsigned int", "Norm")),
        Calls(1,
            Call(MatKer, LOC_LOOP, Bindings(10,
                K_Arg("M1", KER_ARG_TILE), K_Arg("M1", KER_ARG_TILE_W), K_Arg("M1", KER_ARG_TILE_H),
                K_Arg("M2", KER_ARG_TILE), K_Arg("M2", KER_ARG_TILE_W),
                K_Arg("Out", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE_W),
                K_Arg("M2", KER_ARG_TILE_BASE),
                AT_IGNORE_ARG_BINDING,
                C_Arg("Norm")))),
        KerArgs(3,
            KerArg("M1", KerArgSpace(1, T1), O_IN | O_DB, ColM1, LineM1, DataSize, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "M1"),
            KerArg("M2", KerArgSpace(1, T0), O_IN | O_DB, ColM2, LineM2, DataSize, 0,
                   OBJ_CONSTRAINTS_TILE_VER | OBJ_CONSTRAINTS_PAD_REM, 0, "M2"),
            KerArg("Out", KerArgSpace(1, T1), O_OUT | O_DB, ColO, LineO, DataSize, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "Out")))


def par_vect_mat_mult_generator(m, Name, LineM1, ColM1, LineM2, ColM2, Type=1):
    """ParVectMatMultGenerator, 16-bit: as ParMatMult plus a KerBuff of two M1 lines in
    Tile0. M2 is declared (ColM2, LineM2) as the generated file moves it (150 columns of 70
    lines); the generator at the SDK's head declares (LineM2, ColM2)."""
    LineO, ColO = LineM1, ColM2
    DataType, DataSize, MatKer, Nbuff = ("short int * __restrict__", 2,
                                         "KerMatMultParallelVectorial16_v2", 2)
    m.UserKernel(Name,
        KernelIterSpace(2, IterTiledSpace(T1), IterTiledSpace(T0)),
        TILE_HOR,
        CArgs(4,
              TCArg(DataType, "M1"),
              TCArg(DataType, "M2"),
              TCArg(DataType, "Out"),
              TCArg("unsigned int", "Norm")),
        Calls(1,
            Call(MatKer, LOC_LOOP, Bindings(10,
                K_Arg("M1", KER_ARG_TILE), K_Arg("M1", KER_ARG_TILE_W), K_Arg("M1", KER_ARG_TILE_H),
                K_Arg("M2", KER_ARG_TILE), K_Arg("M2", KER_ARG_TILE_W),
                K_Arg("Out", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE_W),
                K_Arg("M2", KER_ARG_TILE_BASE),
                K_Arg("KerBuff", KER_ARG_TILE),
                C_Arg("Norm")))),
        KerArgs(4,
            KerArg("KerBuff", KerArgSpace(1, T0), O_BUFF | O_NTILED, Nbuff * ColM1, 1, DataSize,
                   0, 0, 0, 0),
            KerArg("M1", KerArgSpace(1, T1), O_IN | O_DB, ColM1, LineM1, DataSize, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "M1"),
            KerArg("M2", KerArgSpace(1, T0), O_IN | O_DB, ColM2, LineM2, DataSize, 0,
                   OBJ_CONSTRAINTS_TILE_VER | OBJ_CONSTRAINTS_PAD_REM, 0, "M2"),
            KerArg("Out", KerArgSpace(1, T1), O_OUT | O_DB, ColO, LineO, DataSize, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "Out")))


def cnn_linear_relu(m, Name, In_Q, Filter_Q, Bias_Q, Out_Q, InDim, OutDim, relu):
    """CNN_LinearReLU's first form (16-bit, parallel features): every output in one
    parametric space D0, the input a buffer in Tile0."""
    OutLB, OutUB = (0, 32767) if relu else (-32768, 32767)
    LinearKerName = "KerParLinearLayerReLU_fp"
    m.UserKernel(Name,
        KernelIterSpace(2, IterParSpace(D0, OutDim, 8), IterTiledSpace(T0)),
        TILE_HOR,
        CArgs(4, TCArg(S16, "In"), TCArg(S16, "Filter"), TCArg(S16, "Bias"), TCArg(S16, "Out")),
        Calls(1,
            Call(LinearKerName, LOC_LOOP, Bindings(11,
                K_Arg("In", KER_ARG_TILE),
                Imm(InDim),
                Imm(InDim),
                K_ArgPar("Out", KER_ARG_PARTILE_SIZE, D0),
                K_Arg("Filter", KER_ARG_TILE),
                K_Arg("Bias", KER_ARG_TILE),
                K_Arg("Out", KER_ARG_TILE),
                Imm(Filter_Q + In_Q - Out_Q),
                Imm(Filter_Q + In_Q - Bias_Q),
                Imm(OutLB),
                Imm(OutUB)))),
        KerArgs(4,
            KerArg("In", KerArgSpace(1, T0), O_IN | O_BUFF | O_NTILED, 1, 1, InDim * 2, 0, 0, 0,
                   "In"),
            KerArg("Filter", KerArgSpace(1, D0), OBJ_IN_DB | O_CONST, 1, 1, InDim * 2, 0, 0, 0,
                   "Filter"),
            KerArg("Bias", KerArgSpace(1, D0), OBJ_IN_DB | O_CONST, 1, 1, 2, 0, 0, 0, "Bias"),
            KerArg("Out", KerArgSpace(1, D0), OBJ_OUT_DB, 1, 1, 2, 0, 0, 0, "Out")))


def cnn_convolution_pool_relu(m, Name, In_Q, Filter_Q, Bias_Q, Out_Q, InFeat, OutFeat, Width,
                              Height, Fc, Sc, ConvPad, Fp, Sp, PoolPad, relu):
    """CNN_ConvolutionPoolReLU for a 16-bit convolution (dilation 1, balanced padding)
    followed by a max pooling with optional ReLU, parallel features."""
    Dc = Dp = 1
    OverlapC = (Dc * (Fc - 1) + 1) + Sc * ((Dp * (Fp - 1) + 1) - Sp - 1)
    OverlapP = (Dp * (Fp - 1) + 1) - Sp
    TileCons = Sc * Sp // _gcd(Sc, Sp)
    PadCw = PadCh = 0
    if ConvPad:
        PadCw = PadCh = max((Dc * (Fc - 1) + 1) - Sc, 0)
    PadInc = (PadCw - PadCw // 2, PadCw // 2, PadCh - PadCh // 2, PadCh // 2)
    Wc = (Width - (Dc * (Fc - 1) + 1) + PadCw) // Sc + 1
    Hc = (Height - (Dc * (Fc - 1) + 1) + PadCh) // Sc + 1
    PadPw = PadPh = 0
    if PoolPad:
        PadPw = max((Dp * (Fp - 1) + 1) - Sp, 0) if Wc % Sp == 0 else \
            max((Dp * (Fp - 1) + 1) - Wc % Sp, 0)
        PadPh = max((Dp * (Fp - 1) + 1) - Sp, 0) if Hc % Sp == 0 else \
            max((Dp * (Fp - 1) + 1) - Hc % Sp, 0)
    PadInp = (PadPw - PadPw // 2, PadPw // 2, PadPh - PadPh // 2, PadPh // 2)
    PadIncT = (PadInp[0] * Sc + PadInc[0], PadInp[1] * Sc + PadInc[1],
               PadInp[2] * Sc + PadInc[2], PadInp[3] * Sc + PadInc[3])
    Wo = (Wc - (Dp * (Fp - 1) + 1) + PadPw) // Sp + 1
    Ho = (Hc - (Dp * (Fp - 1) + 1) + PadPh) // Sp + 1
    UsedWc = (Wo - 1) * Sp + (Dp * (Fp - 1) + 1) - PadInp[0] - PadInp[1]
    UsedHc = (Ho - 1) * Sp + (Dp * (Fp - 1) + 1) - PadInp[2] - PadInp[3]
    UsedWidth = (UsedWc - 1) * Sc + (Dc * (Fc - 1) + 1) - PadInc[0] - PadInc[1]
    UsedHeight = (UsedHc - 1) * Sc + (Dc * (Fc - 1) + 1) - PadInc[2] - PadInc[3]
    Wc, Hc = UsedWc, UsedHc
    InTileCons = 2  # Filter_DataSize 2
    OutLB, OutUB = (0, 32767) if relu else (-32768, 32767)
    m.UserKernel(Name,
        KernelIterSpace(3, IterParSpace(D1, OutFeat, 8), IterTiledSpace(T0),
                        IterParSpace(D0, InFeat, InTileCons)),
        TILE_HOR,
        CArgs(4, TCArg(S16, "In"), TCArg(S16, "Filter"), TCArg(S16, "Bias"), TCArg(S16, "Out")),
        Calls(4,
            Call("KerParSetBias_fp", LOC_D0_PROLOG, Bindings(6,
                K_Arg("ConvOut", KER_ARG_TILE),
                K_Arg("ConvOut", KER_ARG_TILE_W),
                K_Arg("ConvOut", KER_ARG_TILE_H),
                K_ArgPar("ConvOut", KER_ARG_PARTILE_SIZE, D1),
                K_Arg("Bias", KER_ARG_TILE),
                AT_IGNORE_ARG_BINDING)),
            Call(f"KerParConv{Fc}x{Fc}Stride{Sc}_fp", LOC_D0, Bindings(20,
                K_Arg("In", KER_ARG_TILE),
                K_Arg("In", KER_ARG_TILE_W),
                K_Arg("In", KER_ARG_TILE_USEDW),
                K_Arg("In", KER_ARG_TILE_H),
                K_Arg("In", KER_ARG_TILE_USEDH),
                K_ArgPar("Filter", KER_ARG_PARTILE_SIZE, D0),
                K_ArgPar("ConvOut", KER_ARG_PARTILE_SIZE, D1),
                K_Arg("Filter", KER_ARG_TILE),
                AT_IGNORE_ARG_BINDING,
                K_Arg("ConvOut", KER_ARG_TILE),
                Imm(Filter_Q + In_Q - Out_Q),
                K_ArgPar("Filter", KER_ARG_LOADEDPARTILE_SIZE, D0),
                K_Arg("In", KER_ARG_TILE_PAD),
                Imm(1),
                *[AT_IGNORE_ARG_BINDING] * 6)),
            AT_NO_CALL,
            Call(f"KerParPool{Fp}x{Fp}Stride{Sp}_fp", LOC_D0_EPILOG, Bindings(18,
                K_Arg("ConvOut", KER_ARG_TILE),
                K_Arg("ConvOut", KER_ARG_TILE_W),
                K_Arg("ConvOut", KER_ARG_TILE_USEDW),
                K_Arg("ConvOut", KER_ARG_TILE_H),
                K_Arg("ConvOut", KER_ARG_TILE_USEDH),
                K_ArgPar("ConvOut", KER_ARG_PARTILE_SIZE, D1),
                K_Arg("Out", KER_ARG_TILE),
                K_Arg("ConvOut", KER_ARG_TILE_PAD),
                AT_IGNORE_ARG_BINDING, AT_IGNORE_ARG_BINDING,
                Imm(1),
                Imm(1 if relu else 0),
                *[AT_IGNORE_ARG_BINDING] * 4,
                Imm(OutLB),
                Imm(OutUB)))),
        KerArgs(5,
            KerArgP("In", KerArgSpace(2, D0, T0), O_IN | O_DB, Width, Height, UsedWidth,
                    UsedHeight, PadIncT, PadInc, 2, OverlapC, 0, TileCons, "In"),
            KerArg("Bias", KerArgSpace(1, D1), O_IN | O_DB | O_CONST, 1, 1, 2, 0, 0, 0, "Bias"),
            KerArg("Filter", KerArgSpace(2, D1, D0), O_IN | O_DB | O_CONST, 1, 1, Fc * Fc * 2, 0,
                   0, 0, "Filter"),
            KerArg("Out", KerArgSpace(2, D1, T0), O_OUT | O_DB, Wo, Ho, 2, 0, 0, 0, "Out"),
            KerArgP("ConvOut", KerArgSpace(2, D1, T0), O_BUFF | O_ONETILE, Wc, Hc, UsedWc, UsedHc,
                    PadInp, PadInp, 2, OverlapP, 0, 0, "")))


def _gcd(a, b):
    while b:
        a, b = b, a % b
    return a


def encoder_gru_generator(m, Name, Neuroni, in_step, rec2_buffer=False):
    """EncoderGRUGenerator, 16-bit: Rec_Kernel's 2N columns in Tile0, Rec_Kernel2's N columns
    in Tile1 (``rec2_buffer``: Rec_Kernel2 a whole input buffer and no Tile2), the rest one
    line each in the outermost space."""
    W = 2 * Neuroni
    DataType, DataType2, DataSize = S16, "int * __restrict__", 2
    if rec2_buffer:
        iters, Out = KernelIterSpace(2, IterTiledSpace(T1), IterTiledSpace(T0)), T1
        Rec2 = KerArg("Rec_Kernel2", KerArgSpace(1, T1), OBJ_BUFFER_IN_NTILED, Neuroni, Neuroni,
                      DataSize, 0, OBJ_CONSTRAINTS_TILE_VER | OBJ_CONSTRAINTS_PAD_REM, 0,
                      "Rec_Kernel2")
    else:
        iters, Out = KernelIterSpace(3, IterTiledSpace(T2), IterTiledSpace(T1),
                                     IterTiledSpace(T0)), T2
        Rec2 = KerArg("Rec_Kernel2", KerArgSpace(1, T1), O_IN | O_DB, Neuroni, Neuroni, DataSize,
                      0, OBJ_CONSTRAINTS_TILE_VER | OBJ_CONSTRAINTS_PAD_REM, 0, "Rec_Kernel2")
    m.UserKernel(Name,
        iters,
        TILE_HOR,
        CArgs(13,
              TCArg(DataType, "In"),
              TCArg("unsigned int", "Iterazione"),
              TCArg(DataType, "H_0"),
              TCArg(DataType, "Kernel"),
              TCArg(DataType, "Rec_Kernel"),
              TCArg(DataType2, "Bias"),
              TCArg(DataType, "Kernel2"),
              TCArg(DataType, "Rec_Kernel2"),
              TCArg(DataType2, "Bias2"),
              TCArg(DataType, "Z"),
              TCArg(DataType, "prod1"),
              TCArg(DataType2, "prod2"),
              TCArg("unsigned int", "Norm")),
        Calls(3,
            Call("KerZEnc16", LOC_INNER_LOOP, Bindings(11,
                K_Arg("In", KER_ARG_TILE), C_Arg("Iterazione"),
                K_Arg("H_0", KER_ARG_TILE), K_Arg("H_0", KER_ARG_TILE_W),
                K_Arg("Kernel", KER_ARG_TILE),
                K_Arg("Rec_Kernel", KER_ARG_TILE), K_Arg("Rec_Kernel", KER_ARG_TILE_W),
                K_Arg("Bias", KER_ARG_TILE), K_Arg("Z", KER_ARG_TILE),
                K_Arg("Rec_Kernel", KER_ARG_TILE_BASE), C_Arg("Norm"))),
            Call("KerProd16", LOC_INNER_LOOP_EPILOG, Bindings(6,
                K_Arg("Z", KER_ARG_TILE),
                K_Arg("H_0", KER_ARG_TILE), K_Arg("H_0", KER_ARG_TILE_W),
                K_Arg("prod1", KER_ARG_TILE), K_Arg("prod2", KER_ARG_TILE), C_Arg("Norm"))),
            Call("KerGRUEnclayer16", LOC_INNER_LOOP_EPILOG, Bindings(13,
                K_Arg("Z", KER_ARG_TILE), K_Arg("In", KER_ARG_TILE), C_Arg("Iterazione"),
                K_Arg("H_0", KER_ARG_TILE), K_Arg("H_0", KER_ARG_TILE_W),
                K_Arg("Kernel2", KER_ARG_TILE),
                K_Arg("Rec_Kernel2", KER_ARG_TILE), K_Arg("Rec_Kernel2", KER_ARG_TILE_W),
                K_Arg("Bias2", KER_ARG_TILE), K_Arg("prod1", KER_ARG_TILE),
                K_Arg("prod2", KER_ARG_TILE),
                K_Arg("Rec_Kernel2", KER_ARG_TILE_BASE), C_Arg("Norm")))),
        KerArgs(11,
            KerArg("In", KerArgSpace(1, Out), O_IN | O_DB, in_step, 1, DataSize, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "In"),
            KerArg("H_0", KerArgSpace(1, Out), O_IN | O_OUT | O_DB, Neuroni, 1, DataSize, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "H_0"),
            KerArg("Kernel", KerArgSpace(1, Out), O_IN | O_DB, W, 1, DataSize, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "Kernel"),
            KerArg("Rec_Kernel", KerArgSpace(1, T0), O_IN | O_DB, W, Neuroni, DataSize, 0,
                   OBJ_CONSTRAINTS_TILE_VER | OBJ_CONSTRAINTS_PAD_REM, 0, "Rec_Kernel"),
            KerArg("Bias", KerArgSpace(1, Out), O_IN | O_DB, W, 1, DataSize * 2, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "Bias"),
            KerArg("Kernel2", KerArgSpace(1, Out), O_IN | O_DB, Neuroni, 1, DataSize, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "Kernel2"),
            Rec2,
            KerArg("Bias2", KerArgSpace(1, Out), O_IN | O_DB, Neuroni, 1, DataSize * 2, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "Bias2"),
            KerArg("Z", KerArgSpace(1, Out), O_OUT | O_DB, W, 1, DataSize, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "Z"),
            KerArg("prod1", KerArgSpace(1, Out), O_OUT | O_DB, Neuroni, 1, DataSize, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "prod1"),
            KerArg("prod2", KerArgSpace(1, Out), O_OUT | O_DB, Neuroni, 1, DataSize * 2, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "prod2")))


def decoder_gru_generator(m, Name, Neuroni, out_step, rec2_buffer=False):
    """DecoderGRUGenerator, 16-bit: the encoder's spaces without its input, and a dense layer
    writing ``out_step`` outputs."""
    W = 2 * Neuroni
    DataType, DataType2, DataSize = S16, "int * __restrict__", 2
    if rec2_buffer:
        iters, Out = KernelIterSpace(2, IterTiledSpace(T1), IterTiledSpace(T0)), T1
        Rec2 = KerArg("Rec_Kernel2", KerArgSpace(1, T1), OBJ_BUFFER_IN_NTILED, Neuroni, Neuroni,
                      DataSize, 0, OBJ_CONSTRAINTS_TILE_VER | OBJ_CONSTRAINTS_PAD_REM, 0,
                      "Rec_Kernel2")
    else:
        iters, Out = KernelIterSpace(3, IterTiledSpace(T2), IterTiledSpace(T1),
                                     IterTiledSpace(T0)), T2
        Rec2 = KerArg("Rec_Kernel2", KerArgSpace(1, T1), O_IN | O_DB, Neuroni, Neuroni, DataSize,
                      0, OBJ_CONSTRAINTS_TILE_VER | OBJ_CONSTRAINTS_PAD_REM, 0, "Rec_Kernel2")
    m.UserKernel(Name,
        iters,
        TILE_HOR,
        CArgs(13,
              TCArg("unsigned int", "Iterazione"),
              TCArg(DataType, "H_0"),
              TCArg(DataType, "Rec_Kernel"),
              TCArg(DataType2, "Bias"),
              TCArg(DataType, "Rec_Kernel2"),
              TCArg(DataType2, "Bias2"),
              TCArg(DataType, "Dense_Kernel"),
              TCArg(DataType2, "Dense_Bias"),
              TCArg(DataType, "Out"),
              TCArg(DataType, "Z"),
              TCArg(DataType, "prod1"),
              TCArg(DataType2, "prod2"),
              TCArg("unsigned int", "Norm")),
        Calls(4,
            Call("KerZDec16", LOC_INNER_LOOP, Bindings(8,
                K_Arg("H_0", KER_ARG_TILE), K_Arg("H_0", KER_ARG_TILE_W),
                K_Arg("Rec_Kernel", KER_ARG_TILE), K_Arg("Rec_Kernel", KER_ARG_TILE_W),
                K_Arg("Bias", KER_ARG_TILE), K_Arg("Z", KER_ARG_TILE),
                K_Arg("Rec_Kernel", KER_ARG_TILE_BASE), C_Arg("Norm"))),
            Call("KerProd16", LOC_INNER_LOOP_EPILOG, Bindings(6,
                K_Arg("Z", KER_ARG_TILE),
                K_Arg("H_0", KER_ARG_TILE), K_Arg("H_0", KER_ARG_TILE_W),
                K_Arg("prod1", KER_ARG_TILE), K_Arg("prod2", KER_ARG_TILE), C_Arg("Norm"))),
            Call("KerGRUDeclayer16", LOC_INNER_LOOP_EPILOG, Bindings(10,
                K_Arg("Z", KER_ARG_TILE),
                K_Arg("H_0", KER_ARG_TILE), K_Arg("H_0", KER_ARG_TILE_W),
                K_Arg("Rec_Kernel2", KER_ARG_TILE), K_Arg("Rec_Kernel2", KER_ARG_TILE_W),
                K_Arg("Bias2", KER_ARG_TILE), K_Arg("prod1", KER_ARG_TILE),
                K_Arg("prod2", KER_ARG_TILE),
                K_Arg("Rec_Kernel2", KER_ARG_TILE_BASE), C_Arg("Norm"))),
            Call("KerDENSElayer16", LOC_INNER_LOOP_EPILOG, Bindings(7,
                K_Arg("H_0", KER_ARG_TILE), K_Arg("H_0", KER_ARG_TILE_W),
                K_Arg("Dense_Kernel", KER_ARG_TILE), K_Arg("Dense_Bias", KER_ARG_TILE),
                C_Arg("Norm"), K_Arg("Out", KER_ARG_TILE), C_Arg("Iterazione")))),
        KerArgs(11,
            KerArg("H_0", KerArgSpace(1, Out), O_IN | O_OUT | O_DB, Neuroni, 1, DataSize, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "H_0"),
            KerArg("Rec_Kernel", KerArgSpace(1, T0), O_IN | O_DB, W, Neuroni, DataSize, 0,
                   OBJ_CONSTRAINTS_TILE_VER | OBJ_CONSTRAINTS_PAD_REM, 0, "Rec_Kernel"),
            KerArg("Bias", KerArgSpace(1, Out), O_IN | O_DB, W, 1, DataSize * 2, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "Bias"),
            Rec2,
            KerArg("Bias2", KerArgSpace(1, Out), O_IN | O_DB, Neuroni, 1, DataSize * 2, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "Bias2"),
            KerArg("Dense_Kernel", KerArgSpace(1, Out), O_IN | O_DB, Neuroni, 1, DataSize, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "Dense_Kernel"),
            KerArg("Dense_Bias", KerArgSpace(1, Out), O_IN | O_DB, 1, 1, DataSize * 2, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "Dense_Bias"),
            KerArg("Z", KerArgSpace(1, Out), O_OUT | O_DB, W, 1, DataSize, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "Z"),
            KerArg("Out", KerArgSpace(1, Out), O_OUT | O_DB, out_step, 1, DataSize, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "Out"),
            KerArg("prod1", KerArgSpace(1, Out), O_OUT | O_DB, Neuroni, 1, DataSize, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "prod1"),
            KerArg("prod2", KerArgSpace(1, Out), O_OUT | O_DB, Neuroni, 1, DataSize * 2, 0,
                   OBJ_CONSTRAINTS_PAD_REM, 0, "prod2")))
