"""The GAP AutoTiler's "User kernel example - CNN convolution layer": InPlane input planes of W x H
Q-format shorts, OutPlane outputs of (W-4) x (H-4), a 5x5 filter per (out, in) plane pair.
Tiles of the input overlap by 4 lines; the filter is untiled; each output tile is set to
its plane's bias in the in-plane prolog, then every input plane's convolution is added:

    Out[op] = sat16(Bias[op] + sum over ip of ((In[ip] (*) Filter[op][ip]) >> Norm))

with the sum saturated to int16 after each input plane (as the fixed-point kernel does).

The convolution accumulates its 25 products in 64 bits: products of int16 extremes reach
2^30 each, so a 32-bit accumulator (GAP's kernels use one) would overflow on such inputs —
undefined behaviour in C. In 64 bits the sum is exact, and the C, the simulator's numpy
reference and the float64 reading below agree on every input. ``Norm`` shifts that sum: it
is declared ``bounds=(0, 31)`` (a normalisation of 16-bit fixed-point products, and what a
32-bit shift allows), so a run with ``Norm`` outside 0..31 raises ``ShapeError`` before
either back end runs.

Run: python examples/tiler/cnn_conv5x5.py
"""

import numpy as np

from npukit.tiler import *

KERNELS_C = """
void KerSetInBias(short int * __restrict__ Out, unsigned int W, unsigned int H, short int Bias)
{
    for (unsigned int i = 0; i < W * H; i++) Out[i] = Bias;
}

typedef struct {
    short int * __restrict__ In;
    unsigned int W;
    unsigned int H;
    short int * __restrict__ Filter;
    short int * __restrict__ Out;
    unsigned int Norm;
} KerConv_fp_T;

void KerDirectConv5x5_fp(KerConv_fp_T *Arg)
{
    unsigned int Wo = Arg->W - 4, Ho = Arg->H - 4;
    unsigned int CoreId = gap_coreid(), Cores = gap_ncore();
    unsigned int Chunk = (Ho + Cores - 1) / Cores;
    unsigned int First = CoreId * Chunk, Last = First + Chunk < Ho ? First + Chunk : Ho;
    for (unsigned int y = First; y < Last; y++)
        for (unsigned int x = 0; x < Wo; x++) {
            int64_t Acc = 0;  /* 25 products of up to 2^30: exact in 64 bits */
            for (unsigned int i = 0; i < 5; i++)
                for (unsigned int j = 0; j < 5; j++)
                    Acc += Arg->In[(y + i) * Arg->W + x + j] * Arg->Filter[i * 5 + j];
            int64_t V = Arg->Out[y * Wo + x] + (Acc >> Arg->Norm);  /* Norm in 0..31 */
            Arg->Out[y * Wo + x] = V > 32767 ? 32767 : (V < -32768 ? -32768 : V);
        }
    gap_waitbarrier(0);
}
"""


def ker_set_in_bias(Out, W, H, Bias):
    Out[: W * H] = Bias


def ker_direct_conv5x5(In, W, H, Filter, Out, Norm, *, core_id, core_count):
    if core_id:  # the numpy reference does every core's rows at once
        return
    wo, ho = W - 4, H - 4
    x = In[: W * H].reshape(H, W).astype(np.int64)
    f = Filter[:25].reshape(5, 5).astype(np.int64)
    acc = sum(x[i:i + ho, j:j + wo] * f[i, j] for i in range(5) for j in range(5))
    o = Out[: wo * ho].reshape(ho, wo)
    o[...] = np.clip(o + (acc >> Norm), -32768, 32767)


def generate_cnn_conv5x5(m, Name, InPlane, OutPlane, W, H):
    m.UserKernel(Name,
        KernelDimensions(InPlane, W, H, OutPlane),
        KernelIterationOrder(KER_DIM4, KER_OUT_PLANE, KER_TILE, KER_IN_PLANE),
        TILE_HOR,
        CArgs(5,
            TCArg("short int * __restrict__", "In"),
            TCArg("short int * __restrict__", "Filter"),
            TCArg("short int * __restrict__", "Out"),
            TCArg("unsigned int", "Norm"),
            TCArg("short int * __restrict__", "Bias", shape=(OutPlane,)),
        ),
        Calls(2,
            Call("KerSetInBias", LOC_IN_PLANE_PROLOG,
                Bindings(4,
                    K_Arg("Out", KER_ARG_TILE),
                    K_Arg("Out", KER_ARG_TILE_W),
                    K_Arg("Out", KER_ARG_TILE_H),
                    C_ArgIndex("Bias", KER_OUT_PLANE, 1))),
            Call("KerDirectConv5x5_fp", LOC_INNER_LOOP,
                Bindings(6,
                    K_Arg("In", KER_ARG_TILE),
                    K_Arg("In", KER_ARG_TILE_W),
                    K_Arg("In", KER_ARG_TILE_H),
                    K_Arg("Filter", KER_ARG_TILE),
                    K_Arg("Out", KER_ARG_TILE),
                    C_Arg("Norm"))),
        ),
        KerArgs(3,
            KerArg("In", OBJ_IN_DB_3D, W, H, 2, 5 - 1, 0, 0, "In", 0),
            KerArg("Filter", OBJ_IN_DB_NTILED_4D, 5, 5, 2, 0, 0, 0, "Filter", 0),
            KerArg("Out", OBJ_OUT_DB_3D, W - 5 + 1, H - 5 + 1, 2, 0, 0, 0, "Out", 0),
        ),
    )


def model(l1_budget=8000, InPlane=3, OutPlane=2, W=40, H=40):
    m = Model(target="gap8", l1_budget=l1_budget)
    m.LibKernel("KerSetInBias", CALL_SEQUENTIAL,
        CArgs(4, TCArg("short int * __restrict__", "Out"), TCArg("unsigned int", "W"),
              TCArg("unsigned int", "H"), TCArg("short int", "Bias")),
        "", c_source=KERNELS_C, reference=ker_set_in_bias, cost=lambda W, H, **_: W * H)
    m.LibKernel("KerDirectConv5x5_fp", CALL_PARALLEL,
        CArgs(6, TCArg("short int * __restrict__", "In"), TCArg("unsigned int", "W"),
              TCArg("unsigned int", "H"), TCArg("short int * __restrict__", "Filter"),
              TCArg("short int * __restrict__", "Out"),
              TCArg("unsigned int", "Norm", bounds=(0, 31))),
        "KerConv_fp_T", reference=ker_direct_conv5x5,
        cost=lambda W, H, **_: 25 * (W - 4) * (H - 4))
    generate_cnn_conv5x5(m, "CnnConv5x5", InPlane, OutPlane, W, H)
    return m


def reference(x, f, bias, norm):
    """Independent float64 reading: correlate each plane, shift, saturate per plane."""
    nop, nip = f.shape[:2]
    ho, wo = x.shape[1] - 4, x.shape[2] - 4
    out = np.empty((nop, ho, wo), np.int64)
    for op in range(nop):
        acc = np.full((ho, wo), bias[op], np.int64)
        for ip in range(nip):
            win = np.lib.stride_tricks.sliding_window_view(x[ip].astype(np.int64), (5, 5))
            conv = np.einsum("yxij,ij->yx", win, f[op, ip].astype(np.int64))
            acc = np.clip(acc + np.floor_divide(conv, 2 ** norm), -32768, 32767)
        out[op] = acc
    return out


if __name__ == "__main__":
    m = model()
    print(m.tiling("CnnConv5x5"))
    prog = m.program("CnnConv5x5")
    rng = np.random.default_rng(3)
    x = rng.integers(-2000, 2000, (3, 40, 40), dtype=np.int16)
    f = rng.integers(-300, 300, (2, 3, 5, 5), dtype=np.int16)
    bias = np.array([1000, -500], np.int16)
    out = np.zeros((2, 36, 36), np.int16)
    res = prog.run(In=x, Filter=f, Out=out, Norm=10, Bias=bias)
    ok = bool((out == reference(x, f, bias, 10)).all())
    print("matches numpy:", ok)
    print(res.report)
    assert ok
