"""Basic kernels for the real AutoTiler cases: npukit's own implementations (numpy for the
simulator, C for the C back end) with the argument lists the ported generators bind, under
the names the GAP SDK's CNN libraries give them. Their arithmetic is npukit's: 16-bit
fixed point, convolutions accumulated exactly and shifted by ``Norm`` per input feature
then saturated (so a result does not depend on how input features are tiled), as the
oracles in ``cases.py`` compute it with numpy.

A parallel kernel splits its work over the cores by output feature (C); its numpy
reference does all of it on core 0.
"""

from __future__ import annotations

import numpy as np

from npukit.tiler import CALL_PARALLEL, CArgs, TCArg

S16, U16, S32 = "short int *", "unsigned short int", "int"


def sat16(x):
    return np.clip(x, -32768, 32767).astype(np.int16)


def conv_plane(x, f, stride, pads):
    """Correlation of one (H, W) plane with one (F, F) filter, or with a stack (n, F, F) of
    them (then (n, Ho, Wo)), zero padding (left, right, top, bottom), exact in int64."""
    left, right, top, bottom = pads
    xp = np.pad(x.astype(np.int64), ((top, bottom), (left, right)))
    F = f.shape[-1]
    ho, wo = (xp.shape[0] - F) // stride + 1, (xp.shape[1] - F) // stride + 1
    win = np.lib.stride_tricks.sliding_window_view(xp, (F, F))[::stride, ::stride][:ho, :wo]
    return np.einsum("yxij,...ij->...yx", win, f.astype(np.int64))


def maxpool2(x):
    h, w = x.shape[-2] // 2, x.shape[-1] // 2
    x = x[..., : 2 * h, : 2 * w]
    return np.maximum(np.maximum(x[..., 0::2, 0::2], x[..., 0::2, 1::2]),
                      np.maximum(x[..., 1::2, 0::2], x[..., 1::2, 1::2]))


def v4s(v: int) -> tuple[int, int, int, int]:
    """A packed v4s (left, right, top, bottom), as the AutoTiler passes paddings."""
    return tuple((v >> (8 * i)) & 0xFF for i in range(4))


PRELUDE_C = r"""
static short NpkSat16(long long v) { return v > 32767 ? 32767 : (v < -32768 ? -32768 : (short)v); }
/* Feature f's share of a parallel loop over n features: f = core, core + cores, ... */
#define NPK_FEATURES(f, n) for (int f = gap_coreid(); f < (int)(n); f += gap_ncore())
/* Out[y][x] = sat(Out + (sum of In (*) Filt >> Norm)); In holds rows Rows of a plane whose
   virtual rows start PadT above it; columns padded PadL left and PadR right. */
static void NpkConvFeature(const short *In, int W, int Rows, int PadT, int PadL, int PadR,
                           int F, int S, const short *Filt, short *Out, int Wo, int Ho, int Norm)
{
    for (int y = 0; y < Ho; y++)
        for (int x = 0; x < Wo; x++) {
            long long Acc = 0;
            for (int i = 0; i < F; i++) {
                int r = y * S + i - PadT;
                if (r < 0 || r >= Rows) continue;
                for (int j = 0; j < F; j++) {
                    int c = x * S + j - PadL;
                    if (c < 0 || c >= W) continue;
                    Acc += (long long)In[r * W + c] * Filt[i * F + j];
                }
            }
            Out[y * Wo + x] = NpkSat16(Out[y * Wo + x] + (Acc >> Norm));
        }
    (void)PadR;
}
"""

# -- the older CNN library (pulp-platform/autotiler, CNN_Generator.c's basic kernels) -----

OLD_C = PRELUDE_C + r"""
typedef struct { short int *In; int W; int H; short int *Out; } KerReLUMaxPool2x2_fpT;
void KerReLU_fp(KerReLUMaxPool2x2_fpT *Arg)
{
    int n = Arg->W * Arg->H, chunk = (n + gap_ncore() - 1) / gap_ncore();
    int first = gap_coreid() * chunk, last = first + chunk < n ? first + chunk : n;
    for (int i = first; i < last; i++) Arg->Out[i] = Arg->In[i] > 0 ? Arg->In[i] : 0;
}

typedef struct { Word16 *In; Word16 *Out; int W; int H; } KerAddFM_fpT;
void KerAddFM_fp(KerAddFM_fpT *Arg)
{
    int n = Arg->W * Arg->H, chunk = (n + gap_ncore() - 1) / gap_ncore();
    int first = gap_coreid() * chunk, last = first + chunk < n ? first + chunk : n;
    for (int i = first; i < last; i++) Arg->Out[i] = NpkSat16((int)Arg->Out[i] + Arg->In[i]);
}

typedef struct {
    short int *Out; unsigned short int W; unsigned short int H; unsigned short int OutFeatures;
    short int *Bias;
} KerParSetBias_fp_T;
void KerParSetBias_fp(KerParSetBias_fp_T *Arg)
{
    int n = Arg->W * Arg->H;
    NPK_FEATURES(f, Arg->OutFeatures)
        for (int i = 0; i < n; i++) Arg->Out[f * n + i] = Arg->Bias[f];
}

typedef struct {
    short int *In; unsigned short int W; unsigned short int H; unsigned short int InFeatures;
    unsigned short int OutFeatures; unsigned short int BaseOutFeature; short int *Filter;
    short int *Out; unsigned short int Norm; unsigned short int TileIndex;
    unsigned short int NTile; unsigned short int Orientation; int Pad;
    unsigned short int TileSize; unsigned short int TotalSize; unsigned short int N;
    unsigned short int S;
} KerParConv_fp_T;
/* NTile == 0 (MediumPar...): In holds InFeatures whole W x H planes, the features Base..;
   Filter's rows hold TileIndex (all) input features each; Out the tile's OutFeatures
   planes. NTile > 0 (LargePar...): In holds every input feature, H virtual rows of tile
   TileIndex of NTile; Filter the out features Base.. ; Out every out feature, rows of this
   tile. Pad: (left, right, top, bottom). */
static void NpkParConv(KerParConv_fp_T *Arg, int F, int S)
{
    int Pad = Arg->Pad, L = Pad & 0xFF, R = (Pad >> 8) & 0xFF, T = (Pad >> 16) & 0xFF,
        B = (Pad >> 24) & 0xFF;
    int W = Arg->W;
    if (Arg->NTile == 0) {
        int H = Arg->H, Wo = (W + L + R - F) / S + 1, Ho = (H + T + B - F) / S + 1;
        NPK_FEATURES(of, Arg->OutFeatures)
            for (int i = 0; i < Arg->InFeatures; i++)
                NpkConvFeature(Arg->In + i * W * H, W, H, T, L, R, F, S, Arg->Filter
                               + (of * Arg->TileIndex + Arg->BaseOutFeature + i) * F * F,
                               Arg->Out + of * Wo * Ho, Wo, Ho, Arg->Norm);
    } else {
        int Top = Arg->TileIndex == 0 ? T : 0, Bot = Arg->TileIndex == Arg->NTile - 1 ? B : 0;
        int Rows = Arg->H - Top - Bot, Ho = (Arg->H - F) / S + 1;
        int Wo = (W + (F - 1) / 2 + F / 2 - F) / S + 1; /* columns padded "same" */
        NPK_FEATURES(of, Arg->OutFeatures)
            for (int i = 0; i < Arg->InFeatures; i++)
                NpkConvFeature(Arg->In + i * W * Rows, W, Rows, Top, (F - 1) / 2, F / 2, F, S,
                               Arg->Filter + (of * Arg->InFeatures + i) * F * F,
                               Arg->Out + (Arg->BaseOutFeature + of) * Wo * Ho, Wo, Ho, Arg->Norm);
    }
}
void KerParConv1x1Stride1_fp(KerParConv_fp_T *Arg) { NpkParConv(Arg, 1, 1); }
void KerParConv1x1Stride2_fp(KerParConv_fp_T *Arg) { NpkParConv(Arg, 1, 2); }
void KerParConv3x3Stride1_fp(KerParConv_fp_T *Arg) { NpkParConv(Arg, 3, 1); }
void KerParConv3x3Stride2_fp(KerParConv_fp_T *Arg) { NpkParConv(Arg, 3, 2); }
void KerParConv5x5Stride2_fp(KerParConv_fp_T *Arg) { NpkParConv(Arg, 5, 2); }

typedef struct {
    short int *In; unsigned short int W; unsigned short int H; unsigned short int OutFeatures;
    short int *Out; int Pad; unsigned short int DoReLU;
} KerParReLUMaxPool_fp_T;
void KerParReLU_fp(KerParReLUMaxPool_fp_T *Arg)
{
    int n = Arg->W * Arg->H;
    NPK_FEATURES(f, Arg->OutFeatures)
        for (int i = 0; i < n; i++) {
            short v = Arg->In[f * n + i];
            Arg->Out[f * n + i] = v > 0 ? v : 0;
        }
}
void KerParMaxPool2x2Stride2_fp(KerParReLUMaxPool_fp_T *Arg)
{
    int W = Arg->W, H = Arg->H, Wo = W / 2, Ho = H / 2;
    NPK_FEATURES(f, Arg->OutFeatures)
        for (int y = 0; y < Ho; y++)
            for (int x = 0; x < Wo; x++) {
                const short *p = Arg->In + f * W * H + 2 * y * W + 2 * x;
                short m = p[0];
                if (p[1] > m) m = p[1];
                if (p[W] > m) m = p[W];
                if (p[W + 1] > m) m = p[W + 1];
                if (Arg->DoReLU && m < 0) m = 0;
                Arg->Out[f * Wo * Ho + y * Wo + x] = m;
            }
}
"""


def ker_relu(In, W, H, Out, *, core_id, core_count):
    if core_id == 0:
        Out[: W * H] = np.maximum(In[: W * H], 0)


def ker_add_fm(In, Out, W, H, *, core_id, core_count):
    if core_id == 0:
        Out[: W * H] = sat16(Out[: W * H].astype(np.int64) + In[: W * H])


def ker_par_set_bias(Out, W, H, OutFeatures, Bias, *, core_id, core_count):
    if core_id == 0:
        Out[: OutFeatures * W * H].reshape(OutFeatures, W * H)[...] = Bias[:OutFeatures, None]


def par_conv(F, S):
    """The numpy reference of KerParConv{F}x{F}Stride{S}_fp (see the C's comment)."""
    def ker(In, W, H, InFeatures, OutFeatures, BaseOutFeature, Filter, Out, Norm, TileIndex,
            NTile, Orientation, Pad, TileSize, TotalSize, N, S_, *, core_id, core_count):
        if core_id:
            return
        left, right, top, bottom = v4s(Pad)
        if NTile == 0:
            wo, ho = (W + left + right - F) // S + 1, (H + top + bottom - F) // S + 1
            x = In[: InFeatures * W * H].reshape(InFeatures, H, W)
            filt = Filter[: OutFeatures * TileIndex * F * F].reshape(OutFeatures, TileIndex, F, F)
            out = Out[: OutFeatures * wo * ho].reshape(OutFeatures, ho, wo)
            for i in range(InFeatures):  # every output feature at once, input by input
                acc = conv_plane(x[i], filt[:, BaseOutFeature + i], S, (left, right, top, bottom))
                out[...] = sat16(out.astype(np.int64) + (acc >> Norm))
            return
        t = top if TileIndex == 0 else 0
        b = bottom if TileIndex == NTile - 1 else 0
        rows, ho = H - t - b, (H - F) // S + 1
        wo = (W + (F - 1) // 2 + F // 2 - F) // S + 1  # columns padded "same"
        x = In[: InFeatures * W * rows].reshape(InFeatures, rows, W)
        filt = Filter[: OutFeatures * InFeatures * F * F].reshape(OutFeatures, InFeatures, F, F)
        out = Out[BaseOutFeature * wo * ho:][: OutFeatures * wo * ho].reshape(OutFeatures, ho, wo)
        for i in range(InFeatures):
            acc = conv_plane(x[i], filt[:, i], S, ((F - 1) // 2, F // 2, t, b))[:, :ho]
            out[...] = sat16(out.astype(np.int64) + (acc >> Norm))
    return ker


def ker_par_relu(In, W, H, OutFeatures, Out, *, core_id, core_count):
    if core_id == 0:
        n = OutFeatures * W * H
        Out[:n] = np.maximum(In[:n], 0)


def ker_par_maxpool(In, W, H, OutFeatures, Out, Pad, DoReLU, *, core_id, core_count):
    if core_id == 0:
        m = maxpool2(In[: OutFeatures * W * H].reshape(OutFeatures, H, W))
        Out[: m.size] = (np.maximum(m, 0) if DoReLU else m).reshape(-1)


def load_old_cnn_library(m) -> None:
    """The basic kernels the older CNN generators call (CNN_LoadSoftwareKernelLibrary)."""
    m.LibKernel("KerReLU_fp", CALL_PARALLEL, CArgs(4, TCArg(S16, "In"), TCArg(S32, "W"),
                TCArg(S32, "H"), TCArg(S16, "Out")), "KerReLUMaxPool2x2_fpT",
                c_source=OLD_C, reference=ker_relu, cost=lambda W, H, **_: W * H)
    m.LibKernel("KerAddFM_fp", CALL_PARALLEL, CArgs(4, TCArg("Word16 *", "In"),
                TCArg("Word16 *", "Out"), TCArg(S32, "W"), TCArg(S32, "H")), "KerAddFM_fpT",
                c_source=OLD_C, reference=ker_add_fm, cost=lambda W, H, **_: W * H)
    m.LibKernel("KerParSetBias_fp", CALL_PARALLEL, CArgs(5, TCArg(S16, "Out"), TCArg(U16, "W"),
                TCArg(U16, "H"), TCArg(U16, "OutFeatures"), TCArg(S16, "Bias")),
                "KerParSetBias_fp_T", c_source=OLD_C, reference=ker_par_set_bias)
    conv_args = CArgs(17, TCArg(S16, "In"), TCArg(U16, "W"), TCArg(U16, "H"),
                      TCArg(U16, "InFeatures"), TCArg(U16, "OutFeatures"),
                      TCArg(U16, "BaseOutFeature"), TCArg(S16, "Filter"), TCArg(S16, "Out"),
                      TCArg(U16, "Norm", bounds=(0, 31)), TCArg(U16, "TileIndex"),
                      TCArg(U16, "NTile"), TCArg(U16, "Orientation"), TCArg(S32, "Pad"),
                      TCArg(U16, "TileSize"), TCArg(U16, "TotalSize"), TCArg(U16, "N"),
                      TCArg(U16, "S"))
    for F, S in ((1, 1), (1, 2), (3, 1), (3, 2), (5, 2)):
        m.LibKernel(f"KerParConv{F}x{F}Stride{S}_fp", CALL_PARALLEL, conv_args,
                    "KerParConv_fp_T", c_source=OLD_C, reference=par_conv(F, S))
    pool_args = (TCArg(S16, "In"), TCArg(U16, "W"), TCArg(U16, "H"), TCArg(U16, "OutFeatures"),
                 TCArg(S16, "Out"))
    m.LibKernel("KerParReLU_fp", CALL_PARALLEL, CArgs(5, *pool_args), "KerParReLUMaxPool_fp_T",
                c_source=OLD_C, reference=ker_par_relu)
    m.LibKernel("KerParMaxPool2x2Stride2_fp", CALL_PARALLEL,
                CArgs(7, *pool_args, TCArg(S32, "Pad"), TCArg(U16, "DoReLU")),
                "KerParReLUMaxPool_fp_T", c_source=OLD_C, reference=ker_par_maxpool)


# -- the newer CNN library and the MatMult generator's kernels (GAP SDK) -------------------

NEW_C = PRELUDE_C + r"""
typedef struct {
    short int *Out; unsigned short int W; unsigned short int H; unsigned short int Feat;
    short int *Bias; int NormBias;
} KerSetBias_fp_T;
void KerParSetBias_fp(KerSetBias_fp_T *Arg)
{
    int n = Arg->W * Arg->H;
    NPK_FEATURES(f, Arg->Feat)
        for (int i = 0; i < n; i++) Arg->Out[f * n + i] = Arg->Bias[f];
}

typedef struct {
    short int *In; unsigned short int W; unsigned short int UsedW; unsigned short int H;
    unsigned short int UsedH; unsigned short int InFeatures; unsigned short int OutFeatures;
    short int *Filter; short int *Bias; short int *Out; unsigned char Norm;
    short int TotalInFeatures; int Pad; unsigned char Orientation; int Fx; int Sx; int Dx;
    int Fy; int Sy; int Dy;
} KerConv_fp_T;
/* In: InFeatures planes of W x H (tile rows); Filter: OutFeatures x InFeatures 5x5;
   Out: OutFeatures planes, accumulated feature by feature. */
void KerParConv5x5Stride1_fp(KerConv_fp_T *Arg)
{
    int Pad = Arg->Pad, L = Pad & 0xFF, R = (Pad >> 8) & 0xFF, T = (Pad >> 16) & 0xFF,
        B = (Pad >> 24) & 0xFF;
    int W = Arg->W, H = Arg->H, Wo = W + L + R - 4, Ho = H + T + B - 4;
    NPK_FEATURES(of, Arg->OutFeatures)
        for (int i = 0; i < Arg->InFeatures; i++)
            NpkConvFeature(Arg->In + i * W * H, W, H, T, L, R, 5, 1,
                           Arg->Filter + (of * Arg->TotalInFeatures + i) * 25,
                           Arg->Out + of * Wo * Ho, Wo, Ho, Arg->Norm);
}

typedef struct {
    short int *In; unsigned short int W; unsigned short int UsedW; unsigned short int H;
    unsigned short int UsedH; unsigned short int Feat; short int *Out; int Pad; int Fx;
    int Sx; unsigned char Orientation; unsigned char Oper; int Dx; int Fy; int Sy; int Dy;
    int LB; int UB;
} KerReLUPool_fp_T;
void KerParPool2x2Stride2_fp(KerReLUPool_fp_T *Arg)
{
    int W = Arg->W, H = Arg->H, Wo = W / 2, Ho = H / 2;
    NPK_FEATURES(f, Arg->Feat)
        for (int y = 0; y < Ho; y++)
            for (int x = 0; x < Wo; x++) {
                const short *p = Arg->In + f * W * H + 2 * y * W + 2 * x;
                int m = p[0];
                if (p[1] > m) m = p[1];
                if (p[W] > m) m = p[W];
                if (p[W + 1] > m) m = p[W + 1];
                m = m < Arg->LB ? Arg->LB : (m > Arg->UB ? Arg->UB : m);
                Arg->Out[f * Wo * Ho + y * Wo + x] = (short)m;
            }
}

typedef struct {
    short int *In; unsigned short int InSize; unsigned short int TotalInSize;
    unsigned short int OutSize; short int *Filter; short int *Bias; short int *Out;
    signed char Norm; signed char NormBias; int LB; int UB;
} KerLinearLayerReLU_fp_T;
/* Out[o] = clamp((In . Filter[o] + (Bias[o] << NormBias)) >> Norm, LB, UB) */
void KerParLinearLayerReLU_fp(KerLinearLayerReLU_fp_T *Arg)
{
    NPK_FEATURES(o, Arg->OutSize) {
        long long Acc = (long long)Arg->Bias[o] * (1LL << Arg->NormBias);
        for (int i = 0; i < Arg->InSize; i++)
            Acc += (long long)Arg->In[i] * Arg->Filter[o * Arg->TotalInSize + i];
        Acc >>= Arg->Norm;
        Arg->Out[o] = (short)(Acc < Arg->LB ? Arg->LB : (Acc > Arg->UB ? Arg->UB : Acc));
    }
}

typedef struct {
    short int *In1; unsigned int W_In1; unsigned int H_In1; short int *In2; unsigned int W_In2;
    short int *Out; unsigned int W_Out; unsigned int OutFirstCol; short int *BufferColIn2;
    unsigned int Norm;
} KerMatMultParallel16_ArgT;
/* Out[i][OutFirstCol + j] = sat((In1[i] . In2 column j) >> Norm); In2 holds W_In1 rows of
   W_In2 columns. */
void KerMatMultParallel16(KerMatMultParallel16_ArgT *Arg)
{
    NPK_FEATURES(i, Arg->H_In1)
        for (unsigned int j = 0; j < Arg->W_In2; j++) {
            long long Acc = 0;
            for (unsigned int k = 0; k < Arg->W_In1; k++)
                Acc += (long long)Arg->In1[i * Arg->W_In1 + k] * Arg->In2[k * Arg->W_In2 + j];
            Arg->Out[i * Arg->W_Out + Arg->OutFirstCol + j] = NpkSat16(Acc >> Arg->Norm);
        }
}
void KerMatMultParallelVectorial16_v2(KerMatMultParallel16_ArgT *Arg) { KerMatMultParallel16(Arg); }
"""


def ker_set_bias(Out, W, H, Feat, Bias, NormBias, *, core_id, core_count):
    if core_id == 0:
        Out[: Feat * W * H].reshape(Feat, W * H)[...] = Bias[:Feat, None]


def ker_conv5x5(In, W, UsedW, H, UsedH, InFeatures, OutFeatures, Filter, Bias, Out, Norm,
                TotalInFeatures, Pad, Orientation, Fx, Sx, Dx, Fy, Sy, Dy, *, core_id,
                core_count):
    if core_id:
        return
    left, right, top, bottom = v4s(Pad)
    wo, ho = W + left + right - 4, H + top + bottom - 4
    x = In[: InFeatures * W * H].reshape(InFeatures, H, W)
    filt = Filter[: OutFeatures * TotalInFeatures * 25].reshape(OutFeatures, TotalInFeatures, 5, 5)
    out = Out[: OutFeatures * wo * ho].reshape(OutFeatures, ho, wo)
    for i in range(InFeatures):
        acc = conv_plane(x[i], filt[:, i], 1, (left, right, top, bottom))
        out[...] = sat16(out.astype(np.int64) + (acc >> Norm))


def ker_pool2x2(In, W, UsedW, H, UsedH, Feat, Out, Pad, Fx, Sx, Orientation, Oper, Dx, Fy, Sy,
                Dy, LB, UB, *, core_id, core_count):
    if core_id == 0:
        m = maxpool2(In[: Feat * W * H].reshape(Feat, H, W))
        Out[: m.size] = np.clip(m, LB, UB).reshape(-1)


def ker_linear(In, InSize, TotalInSize, OutSize, Filter, Bias, Out, Norm, NormBias, LB, UB, *,
               core_id, core_count):
    if core_id == 0:
        w = Filter[: OutSize * TotalInSize].reshape(OutSize, TotalInSize)[:, :InSize]
        acc = w.astype(np.int64) @ In[:InSize].astype(np.int64)
        acc = (acc + Bias[:OutSize].astype(np.int64) * (1 << NormBias)) >> Norm
        Out[:OutSize] = np.clip(acc, LB, UB)


def ker_matmult(In1, W_In1, H_In1, In2, W_In2, Out, W_Out, OutFirstCol, BufferColIn2, Norm, *,
                core_id, core_count):
    if core_id == 0:
        a = In1[: W_In1 * H_In1].reshape(H_In1, W_In1).astype(np.int64)
        b = In2[: W_In1 * W_In2].reshape(W_In1, W_In2).astype(np.int64)
        o = Out[: H_In1 * W_Out].reshape(H_In1, W_Out)
        o[:, OutFirstCol:OutFirstCol + W_In2] = sat16((a @ b) >> Norm)


def ker_matmult_vect(In1, W_In1, H_In1, In2, W_In2, Out, W_Out, OutFirstCol, BufferColIn2, Norm,
                     *, core_id, core_count):
    ker_matmult(In1, W_In1, H_In1, In2, W_In2, Out, W_Out, OutFirstCol, BufferColIn2, Norm,
                core_id=core_id, core_count=core_count)


def load_new_cnn_library(m) -> None:
    """The basic kernels the newer CNN generators call, under their names."""
    m.LibKernel("KerParSetBias_fp", CALL_PARALLEL, CArgs(6, TCArg(S16, "Out"), TCArg(U16, "W"),
                TCArg(U16, "H"), TCArg(U16, "Feat"), TCArg(S16, "Bias"), TCArg(S32, "NormBias")),
                "KerSetBias_fp_T", c_source=NEW_C, reference=ker_set_bias)
    m.LibKernel("KerParConv5x5Stride1_fp", CALL_PARALLEL, CArgs(
        20, TCArg(S16, "In"), TCArg(U16, "W"), TCArg(U16, "UsedW"), TCArg(U16, "H"),
        TCArg(U16, "UsedH"), TCArg(U16, "InFeatures"), TCArg(U16, "OutFeatures"),
        TCArg(S16, "Filter"), TCArg(S16, "Bias"), TCArg(S16, "Out"),
        TCArg("unsigned char", "Norm", bounds=(0, 31)), TCArg("short int", "TotalInFeatures"),
        TCArg(S32, "Pad"), TCArg("unsigned char", "Orientation"),
        *[TCArg(S32, n) for n in ("Fx", "Sx", "Dx", "Fy", "Sy", "Dy")]),
        "KerConv_fp_T", c_source=NEW_C, reference=ker_conv5x5)
    m.LibKernel("KerParPool2x2Stride2_fp", CALL_PARALLEL, CArgs(
        18, TCArg(S16, "In"), TCArg(U16, "W"), TCArg(U16, "UsedW"), TCArg(U16, "H"),
        TCArg(U16, "UsedH"), TCArg(U16, "Feat"), TCArg(S16, "Out"), TCArg(S32, "Pad"),
        TCArg(S32, "Fx"), TCArg(S32, "Sx"), TCArg("unsigned char", "Orientation"),
        TCArg("unsigned char", "Oper"), *[TCArg(S32, n) for n in ("Dx", "Fy", "Sy", "Dy")],
        TCArg(S32, "LB"), TCArg(S32, "UB")), "KerReLUPool_fp_T", c_source=NEW_C,
        reference=ker_pool2x2)
    m.LibKernel("KerParLinearLayerReLU_fp", CALL_PARALLEL, CArgs(
        11, TCArg(S16, "In"), TCArg(U16, "InSize"), TCArg(U16, "TotalInSize"),
        TCArg(U16, "OutSize"), TCArg(S16, "Filter"), TCArg(S16, "Bias"), TCArg(S16, "Out"),
        TCArg("signed char", "Norm", bounds=(0, 31)), TCArg("signed char", "NormBias",
                                                           bounds=(0, 31)),
        TCArg(S32, "LB"), TCArg(S32, "UB")), "KerLinearLayerReLU_fp_T", c_source=NEW_C,
        reference=ker_linear)


def load_matmult_library(m) -> None:
    """The MatMult generator's kernels (MatMultBasicKernels), 16-bit."""
    args = CArgs(10, TCArg(S16, "In1"), TCArg("unsigned int", "W_In1"),
                 TCArg("unsigned int", "H_In1"), TCArg(S16, "In2"),
                 TCArg("unsigned int", "W_In2"), TCArg(S16, "Out"),
                 TCArg("unsigned int", "W_Out"), TCArg("unsigned int", "OutFirstCol"),
                 TCArg(S16, "BufferColIn2"), TCArg("unsigned int", "Norm", bounds=(0, 31)))
    m.LibKernel("KerMatMultParallel16", CALL_PARALLEL, args, "KerMatMultParallel16_ArgT",
                c_source=NEW_C, reference=ker_matmult)
    m.LibKernel("KerMatMultParallelVectorial16_v2", CALL_PARALLEL, args,
                "KerMatMultParallel16_ArgT", c_source=NEW_C, reference=ker_matmult_vect)


# -- the GRU encoder's kernels (CappelDen's Seq2Seq models on GAPuino) ---------------------
# npukit's own arithmetic on the generator's bindings: Z = sat16((In[It]·Kernel + H·Rec_Kernel
# + Bias) >> Norm) for a tile of columns; prod1 = sat16((Z[N:] · H) >> Norm); prod2 = ((In[It]
# ·Kernel2 + prod1·Rec_Kernel2 + Bias2) >> Norm) + Z[:N] for a tile of columns (the decoder:
# without the In terms); the decoder's Out[k], k <= It, = sat16((H · Dense_Kernel rotated by
# k + Dense_Bias) >> Norm). H is read only, so every tile of every space computes the same
# values whatever the tiling.

GRU_BODY = PRELUDE_C + r"""
/* Z[c] for the tile's columns c = OutFirstCol + j, j = J0, J0 + DJ, ...; Rec_Kernel holds
   W_H rows of the tile's W_Rec_Kernel columns. */
static void NpkZEnc(short *In, unsigned It, short *H_0, unsigned W_H, short *Kernel,
                    short *Rec_Kernel, unsigned W_Rec_Kernel, int *Bias, short *Z,
                    unsigned OutFirstCol, unsigned Norm, unsigned J0, unsigned DJ)
{
    for (unsigned j = J0; j < W_Rec_Kernel; j += DJ) {
        int c = OutFirstCol + j;
        long long Acc = (long long)In[It] * Kernel[c] + Bias[c];
        for (unsigned r = 0; r < W_H; r++)
            Acc += (long long)H_0[r] * Rec_Kernel[r * W_Rec_Kernel + j];
        Z[c] = NpkSat16(Acc >> Norm);
    }
}
static void NpkProd(short *Z, short *H_0, unsigned W_H, short *prod1, unsigned Norm,
                    unsigned J0, unsigned DJ)
{
    for (unsigned r = J0; r < W_H; r += DJ)
        prod1[r] = NpkSat16(((long long)Z[W_H + r] * H_0[r]) >> Norm);
}
static void NpkGRUEnc(short *Z, short *In, unsigned It, unsigned W_H, short *Kernel,
                      short *Rec_Kernel, unsigned W_Rec_Kernel, int *Bias, short *prod1,
                      int *prod2, unsigned OutFirstCol, unsigned Norm, unsigned J0, unsigned DJ)
{
    for (unsigned j = J0; j < W_Rec_Kernel; j += DJ) {
        int c = OutFirstCol + j;
        long long Acc = (long long)In[It] * Kernel[c] + Bias[c];
        for (unsigned r = 0; r < W_H; r++)
            Acc += (long long)prod1[r] * Rec_Kernel[r * W_Rec_Kernel + j];
        prod2[c] = (int)(Acc >> Norm) + Z[c];
    }
}
/* The decoder: Z and prod2 as the encoder's without the input term; Out[k] for k <= It the
   dense layer on H with its filter rotated by k. */
static void NpkZDec(short *H_0, unsigned W_H, short *Rec_Kernel, unsigned W_Rec_Kernel,
                    int *Bias, short *Z, unsigned OutFirstCol, unsigned Norm, unsigned J0,
                    unsigned DJ)
{
    for (unsigned j = J0; j < W_Rec_Kernel; j += DJ) {
        int c = OutFirstCol + j;
        long long Acc = Bias[c];
        for (unsigned r = 0; r < W_H; r++)
            Acc += (long long)H_0[r] * Rec_Kernel[r * W_Rec_Kernel + j];
        Z[c] = NpkSat16(Acc >> Norm);
    }
}
static void NpkGRUDec(short *Z, unsigned W_H, short *Rec_Kernel, unsigned W_Rec_Kernel,
                      int *Bias, short *prod1, int *prod2, unsigned OutFirstCol, unsigned Norm,
                      unsigned J0, unsigned DJ)
{
    for (unsigned j = J0; j < W_Rec_Kernel; j += DJ) {
        int c = OutFirstCol + j;
        long long Acc = Bias[c];
        for (unsigned r = 0; r < W_H; r++)
            Acc += (long long)prod1[r] * Rec_Kernel[r * W_Rec_Kernel + j];
        prod2[c] = (int)(Acc >> Norm) + Z[c];
    }
}
static void NpkDense(short *In, unsigned InSize, short *Filter, int *Bias, unsigned Norm,
                     short *Out, unsigned It, unsigned J0, unsigned DJ)
{
    for (unsigned k = J0; k <= It; k += DJ) {
        long long Acc = Bias[0];
        for (unsigned r = 0; r < InSize; r++) Acc += (long long)In[r] * Filter[(r + k) % InSize];
        Out[k] = NpkSat16(Acc >> Norm);
    }
}
"""

# The 8-core variant calls them with an argument structure, on every core.
GRU_PARALLEL_C = GRU_BODY + r"""
typedef struct {
    short int *In; unsigned int Iterazione; short int *H_0; unsigned int W_H; short int *Kernel;
    short int *Rec_Kernel; unsigned int W_Rec_Kernel; int *Bias; short int *Z;
    unsigned int OutFirstCol; unsigned int Norm;
} KerZEnc16_ArgT;
void KerZEnc16(KerZEnc16_ArgT *A)
{
    NpkZEnc(A->In, A->Iterazione, A->H_0, A->W_H, A->Kernel, A->Rec_Kernel, A->W_Rec_Kernel,
            A->Bias, A->Z, A->OutFirstCol, A->Norm, gap_coreid(), gap_ncore());
}
typedef struct {
    short int *Z; short int *H_0; unsigned int W_H; short int *prod1; int *prod2;
    unsigned int Norm;
} KerProd16_ArgT;
void KerProd16(KerProd16_ArgT *A)
{
    NpkProd(A->Z, A->H_0, A->W_H, A->prod1, A->Norm, gap_coreid(), gap_ncore());
}
typedef struct {
    short int *Z; short int *In; unsigned int Iterazione; short int *H_0; unsigned int W_H;
    short int *Kernel; short int *Rec_Kernel; unsigned int W_Rec_Kernel; int *Bias;
    short int *prod1; int *prod2; unsigned int OutFirstCol; unsigned int Norm;
} KerGRUEnclayer16_ArgT;
void KerGRUEnclayer16(KerGRUEnclayer16_ArgT *A)
{
    NpkGRUEnc(A->Z, A->In, A->Iterazione, A->W_H, A->Kernel, A->Rec_Kernel, A->W_Rec_Kernel,
              A->Bias, A->prod1, A->prod2, A->OutFirstCol, A->Norm, gap_coreid(), gap_ncore());
}
typedef struct {
    short int *H_0; unsigned int W_H; short int *Rec_Kernel; unsigned int W_Rec_Kernel;
    int *Bias; short int *Z; unsigned int OutFirstCol; unsigned int Norm;
} KerZDec16_ArgT;
void KerZDec16(KerZDec16_ArgT *A)
{
    NpkZDec(A->H_0, A->W_H, A->Rec_Kernel, A->W_Rec_Kernel, A->Bias, A->Z, A->OutFirstCol,
            A->Norm, gap_coreid(), gap_ncore());
}
typedef struct {
    short int *Z; short int *H_0; unsigned int W_H; short int *Rec_Kernel;
    unsigned int W_Rec_Kernel; int *Bias; short int *prod1; int *prod2;
    unsigned int OutFirstCol; unsigned int Norm;
} KerGRUDeclayer16_ArgT;
void KerGRUDeclayer16(KerGRUDeclayer16_ArgT *A)
{
    NpkGRUDec(A->Z, A->W_H, A->Rec_Kernel, A->W_Rec_Kernel, A->Bias, A->prod1, A->prod2,
              A->OutFirstCol, A->Norm, gap_coreid(), gap_ncore());
}
typedef struct {
    short int *In; unsigned int InSize; short int *Filter; int *Bias; unsigned int Norm;
    short int *Out; unsigned int Iterazione;
} KerDENSElayer16_ArgT;
void KerDENSElayer16(KerDENSElayer16_ArgT *A)
{
    NpkDense(A->In, A->InSize, A->Filter, A->Bias, A->Norm, A->Out, A->Iterazione,
             gap_coreid(), gap_ncore());
}
"""

# The one-core variant calls them with their arguments, once.
GRU_SEQUENTIAL_C = GRU_BODY + r"""
void KerZEnc16(short *In, unsigned It, short *H_0, unsigned W_H, short *Kernel,
               short *Rec_Kernel, unsigned W_Rec_Kernel, int *Bias, short *Z,
               unsigned OutFirstCol, unsigned Norm)
{
    NpkZEnc(In, It, H_0, W_H, Kernel, Rec_Kernel, W_Rec_Kernel, Bias, Z, OutFirstCol, Norm, 0, 1);
}
void KerProd16(short *Z, short *H_0, unsigned W_H, short *prod1, int *prod2, unsigned Norm)
{
    NpkProd(Z, H_0, W_H, prod1, Norm, 0, 1);
    (void)prod2;
}
void KerGRUEnclayer16(short *Z, short *In, unsigned It, short *H_0, unsigned W_H,
                      short *Kernel, short *Rec_Kernel, unsigned W_Rec_Kernel, int *Bias,
                      short *prod1, int *prod2, unsigned OutFirstCol, unsigned Norm)
{
    NpkGRUEnc(Z, In, It, W_H, Kernel, Rec_Kernel, W_Rec_Kernel, Bias, prod1, prod2, OutFirstCol,
              Norm, 0, 1);
    (void)H_0;
}
void KerZDec16(short *H_0, unsigned W_H, short *Rec_Kernel, unsigned W_Rec_Kernel, int *Bias,
               short *Z, unsigned OutFirstCol, unsigned Norm)
{
    NpkZDec(H_0, W_H, Rec_Kernel, W_Rec_Kernel, Bias, Z, OutFirstCol, Norm, 0, 1);
}
void KerGRUDeclayer16(short *Z, short *H_0, unsigned W_H, short *Rec_Kernel,
                      unsigned W_Rec_Kernel, int *Bias, short *prod1, int *prod2,
                      unsigned OutFirstCol, unsigned Norm)
{
    NpkGRUDec(Z, W_H, Rec_Kernel, W_Rec_Kernel, Bias, prod1, prod2, OutFirstCol, Norm, 0, 1);
    (void)H_0;
}
void KerDENSElayer16(short *In, unsigned InSize, short *Filter, int *Bias, unsigned Norm,
                     short *Out, unsigned It)
{
    NpkDense(In, InSize, Filter, Bias, Norm, Out, It, 0, 1);
}
"""


def _gru_columns(rows, Rec_Kernel, W_Rec_Kernel, Bias, OutFirstCol, W_H):
    """(columns, rows·Rec_Kernel + Bias) for a tile of columns, in int64."""
    cols = slice(OutFirstCol, OutFirstCol + W_Rec_Kernel)
    rec = Rec_Kernel[: W_H * W_Rec_Kernel].reshape(W_H, W_Rec_Kernel).astype(np.int64)
    return cols, rows[:W_H].astype(np.int64) @ rec + Bias[cols].astype(np.int64)


def _input_term(In, Iterazione, Kernel, cols):
    return np.int64(In[Iterazione]) * Kernel[cols].astype(np.int64)


def ker_z_enc(In, Iterazione, H_0, W_H, Kernel, Rec_Kernel, W_Rec_Kernel, Bias, Z, OutFirstCol,
              Norm, *, core_id=0, core_count=1):
    if core_id == 0:
        cols, acc = _gru_columns(H_0, Rec_Kernel, W_Rec_Kernel, Bias, OutFirstCol, W_H)
        Z[cols] = sat16((acc + _input_term(In, Iterazione, Kernel, cols)) >> Norm)


def ker_prod(Z, H_0, W_H, prod1, prod2, Norm, *, core_id=0, core_count=1):
    if core_id == 0:
        prod1[:W_H] = sat16((Z[W_H:2 * W_H].astype(np.int64) * H_0[:W_H]) >> Norm)


def ker_gru_enc(Z, In, Iterazione, H_0, W_H, Kernel, Rec_Kernel, W_Rec_Kernel, Bias, prod1,
                prod2, OutFirstCol, Norm, *, core_id=0, core_count=1):
    if core_id == 0:
        cols, acc = _gru_columns(prod1, Rec_Kernel, W_Rec_Kernel, Bias, OutFirstCol, W_H)
        prod2[cols] = ((acc + _input_term(In, Iterazione, Kernel, cols)) >> Norm) + Z[cols]


def ker_z_dec(H_0, W_H, Rec_Kernel, W_Rec_Kernel, Bias, Z, OutFirstCol, Norm, *, core_id=0,
              core_count=1):
    if core_id == 0:
        cols, acc = _gru_columns(H_0, Rec_Kernel, W_Rec_Kernel, Bias, OutFirstCol, W_H)
        Z[cols] = sat16(acc >> Norm)


def ker_gru_dec(Z, H_0, W_H, Rec_Kernel, W_Rec_Kernel, Bias, prod1, prod2, OutFirstCol, Norm,
                *, core_id=0, core_count=1):
    if core_id == 0:
        cols, acc = _gru_columns(prod1, Rec_Kernel, W_Rec_Kernel, Bias, OutFirstCol, W_H)
        prod2[cols] = (acc >> Norm) + Z[cols]


def ker_dense(In, InSize, Filter, Bias, Norm, Out, Iterazione, *, core_id=0, core_count=1):
    if core_id == 0:
        x, f = In[:InSize].astype(np.int64), Filter[:InSize].astype(np.int64)
        for k in range(Iterazione + 1):
            Out[k] = sat16((x @ np.roll(f, -k) + np.int64(Bias[0])) >> Norm)


def load_gru_library(m, call_type) -> None:
    """The GRU encoder generator's basic kernels (``LoadEncoderDecoderLibrary``), with the
    call type of its variant (CALL_PARALLEL for 8 cores, CALL_SEQUENTIAL for one)."""
    S, S32R, U = "short int * __restrict__", "int * __restrict__", "unsigned int"
    c = GRU_PARALLEL_C if call_type == CALL_PARALLEL else GRU_SEQUENTIAL_C
    it = TCArg(U, "Iterazione", bounds=(0, 26))
    norm = TCArg(U, "Norm", bounds=(0, 31))
    m.LibKernel("KerZEnc16", call_type, CArgs(
        11, TCArg(S, "In"), it, TCArg(S, "H_0"), TCArg(U, "W_H"), TCArg(S, "Kernel"),
        TCArg(S, "Rec_Kernel"), TCArg(U, "W_Rec_Kernel"), TCArg(S32R, "Bias"), TCArg(S, "Z"),
        TCArg(U, "OutFirstCol"), norm), "KerZEnc16_ArgT", c_source=c, reference=ker_z_enc)
    m.LibKernel("KerProd16", call_type, CArgs(
        6, TCArg(S, "Z"), TCArg(S, "H_0"), TCArg(U, "W_H"), TCArg(S, "prod1"), TCArg(S32R, "prod2"),
        norm), "KerProd16_ArgT", c_source=c, reference=ker_prod)
    m.LibKernel("KerGRUEnclayer16", call_type, CArgs(
        13, TCArg(S, "Z"), TCArg(S, "In"), it, TCArg(S, "H_0"), TCArg(U, "W_H"),
        TCArg(S, "Kernel"), TCArg(S, "Rec_Kernel"), TCArg(U, "W_Rec_Kernel"), TCArg(S32R, "Bias"),
        TCArg(S, "prod1"), TCArg(S32R, "prod2"), TCArg(U, "OutFirstCol"), norm),
        "KerGRUEnclayer16_ArgT", c_source=c, reference=ker_gru_enc)
    m.LibKernel("KerZDec16", call_type, CArgs(
        8, TCArg(S, "H_0"), TCArg(U, "W_H"), TCArg(S, "Rec_Kernel"), TCArg(U, "W_Rec_Kernel"),
        TCArg(S32R, "Bias"), TCArg(S, "Z"), TCArg(U, "OutFirstCol"), norm), "KerZDec16_ArgT",
        c_source=c, reference=ker_z_dec)
    m.LibKernel("KerGRUDeclayer16", call_type, CArgs(
        10, TCArg(S, "Z"), TCArg(S, "H_0"), TCArg(U, "W_H"), TCArg(S, "Rec_Kernel"),
        TCArg(U, "W_Rec_Kernel"), TCArg(S32R, "Bias"), TCArg(S, "prod1"), TCArg(S32R, "prod2"),
        TCArg(U, "OutFirstCol"), norm), "KerGRUDeclayer16_ArgT", c_source=c,
        reference=ker_gru_dec)
    m.LibKernel("KerDENSElayer16", call_type, CArgs(
        7, TCArg(S, "In"), TCArg(U, "InSize"), TCArg(S, "Filter"), TCArg(S32R, "Bias"), norm,
        TCArg(S, "Out"), TCArg(U, "Iterazione", bounds=(0, 8))), "KerDENSElayer16_ArgT",
        c_source=c, reference=ker_dense)
