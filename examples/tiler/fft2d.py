"""The GAP AutoTiler's "User kernel group example, 2D FFT": a byte image of Dim x Dim (Dim a power
of two) expanded to complex, FFT'd along rows (horizontal tiles), then along columns
(vertical tiles), each pass decimated in frequency and reordered by a swap table. Radix 4
when log2(Dim) is even, else radix 2, as the AutoTiler's example selects.

This port uses float32 complex samples (C ``float _Complex``) instead of the example's Q15
I/Q pairs; the basic kernels' numpy references compute each 1-D transform with numpy and
store it in the digit-reversed order a DIF FFT produces, so the swap kernels have real work.
Their C versions (``FFT_KERNELS_C``, for ``backend="c"``) are in-place radix-2 and radix-4
decimation-in-frequency butterflies on the ``Twiddles`` table, giving the same order; their
float32 results differ from numpy's by rounding only (within 1e-5 of the largest
magnitude, see tests/test_c_tiler.py).

Run: python examples/tiler/fft2d.py
"""

import numpy as np

from npukit.errors import TilingError
from npukit.tiler import *

FFT_KERNELS_C = r"""
/* Each core takes a contiguous chunk of the N lines (rows or columns) of a tile. */
static void FFT_CoreChunk(unsigned int N, unsigned int *First, unsigned int *Last)
{
    unsigned int CoreId = gap_coreid(), Cores = gap_ncore();
    unsigned int Chunk = (N + Cores - 1) / Cores;
    *First = CoreId * Chunk < N ? CoreId * Chunk : N;
    *Last = *First + Chunk < N ? *First + Chunk : N;
}

void Image2Complex(Wordu8 * __restrict__ In, float _Complex * __restrict__ Out,
                   unsigned int W, unsigned int H)
{
    unsigned int First, Last;
    FFT_CoreChunk(H, &First, &Last);
    for (unsigned int i = First * W; i < Last * W; i++)
        Out[i] = (float)In[i];
    gap_waitbarrier(0);
}

/* -i z: the quarter turn of the forward transform, exact (C99 lays a complex out as an
   array of its real and imaginary parts). */
static float _Complex FFT_MinusI(float _Complex z)
{
    float _Complex r;
    float *Out = (float *)&r;
    const float *In = (const float *)&z;
    Out[0] = In[1];
    Out[1] = -In[0];
    return r;
}

/* In-place radix-2 decimation in frequency on the N samples Data[0], Data[Stride], ...:
   butterflies of span N/2, N/4, ..., 1; output position p holds frequency bitrev(p).
   Twiddles[k] = exp(-2 pi i k / N). */
static void Radix2FFT_DIF(float _Complex *Data, unsigned int Stride, unsigned int N,
                          const float _Complex *Twiddles)
{
    for (unsigned int Span = N / 2, Step = 1; Span >= 1; Span /= 2, Step *= 2)
        for (unsigned int Start = 0; Start < N; Start += 2 * Span)
            for (unsigned int j = 0; j < Span; j++) {
                float _Complex *A = Data + (Start + j) * Stride, *B = A + Span * Stride;
                float _Complex a = *A, b = *B;
                *A = a + b;
                *B = (a - b) * Twiddles[j * Step];
            }
}

/* In-place radix-4 decimation in frequency: butterflies of span N/4, N/16, ..., 1; output
   position p holds frequency p with its base-4 digits reversed. */
static void Radix4FFT_DIF(float _Complex *Data, unsigned int Stride, unsigned int N,
                          const float _Complex *Twiddles)
{
    for (unsigned int Span = N / 4, Step = 1; Span >= 1; Span /= 4, Step *= 4)
        for (unsigned int Start = 0; Start < N; Start += 4 * Span)
            for (unsigned int j = 0; j < Span; j++) {
                float _Complex *X0 = Data + (Start + j) * Stride;
                float _Complex *X1 = X0 + Span * Stride, *X2 = X1 + Span * Stride,
                               *X3 = X2 + Span * Stride;
                float _Complex a = *X0, b = *X1, c = *X2, d = *X3;
                float _Complex s02 = a + c, d02 = a - c, s13 = b + d, d13 = b - d;
                float _Complex r13 = FFT_MinusI(d13);
                *X0 = s02 + s13;
                *X1 = (d02 + r13) * Twiddles[j * Step];
                *X2 = (s02 - s13) * Twiddles[2 * j * Step];
                *X3 = (d02 - r13) * Twiddles[3 * j * Step];
            }
}

void Radix2FFT_DIF_2D_Horizontal(float _Complex * __restrict__ InOut,
                                 float _Complex * __restrict__ Twiddles,
                                 unsigned int W, unsigned int H)
{
    unsigned int First, Last;
    FFT_CoreChunk(H, &First, &Last);
    for (unsigned int r = First; r < Last; r++)
        Radix2FFT_DIF(InOut + r * W, 1, W, Twiddles);
    gap_waitbarrier(0);
}

void Radix2FFT_DIF_2D_Vertical(float _Complex * __restrict__ InOut,
                               float _Complex * __restrict__ Twiddles,
                               unsigned int H, unsigned int W)
{
    unsigned int First, Last;
    FFT_CoreChunk(W, &First, &Last);
    for (unsigned int c = First; c < Last; c++)
        Radix2FFT_DIF(InOut + c, W, H, Twiddles);
    gap_waitbarrier(0);
}

void Radix4FFT_DIF_2D_Horizontal(float _Complex * __restrict__ InOut,
                                 float _Complex * __restrict__ Twiddles,
                                 unsigned int W, unsigned int H)
{
    unsigned int First, Last;
    FFT_CoreChunk(H, &First, &Last);
    for (unsigned int r = First; r < Last; r++)
        Radix4FFT_DIF(InOut + r * W, 1, W, Twiddles);
    gap_waitbarrier(0);
}

void Radix4FFT_DIF_2D_Vertical(float _Complex * __restrict__ InOut,
                               float _Complex * __restrict__ Twiddles,
                               unsigned int H, unsigned int W)
{
    unsigned int First, Last;
    FFT_CoreChunk(W, &First, &Last);
    for (unsigned int c = First; c < Last; c++)
        Radix4FFT_DIF(InOut + c, W, H, Twiddles);
    gap_waitbarrier(0);
}

/* Samples i and SwapTable[i] trade places once (when SwapTable[i] > i): the table is a
   digit reversal, its own inverse. */
void SwapSamples_2D_Horizontal_Par(float _Complex * __restrict__ InOut,
                                   short int * __restrict__ SwapTable,
                                   unsigned int W, unsigned int H)
{
    unsigned int First, Last;
    FFT_CoreChunk(H, &First, &Last);
    for (unsigned int r = First; r < Last; r++)
        for (unsigned int i = 0; i < W; i++) {
            unsigned int s = (unsigned int)SwapTable[i];
            if (s > i) {
                float _Complex t = InOut[r * W + i];
                InOut[r * W + i] = InOut[r * W + s];
                InOut[r * W + s] = t;
            }
        }
    gap_waitbarrier(0);
}

void SwapSamples_2D_Vertical_Par(float _Complex * __restrict__ InOut,
                                 short int * __restrict__ SwapTable,
                                 unsigned int H, unsigned int W)
{
    unsigned int First, Last;
    FFT_CoreChunk(W, &First, &Last);
    for (unsigned int i = 0; i < H; i++) {
        unsigned int s = (unsigned int)SwapTable[i];
        if (s > i)
            for (unsigned int c = First; c < Last; c++) {
                float _Complex t = InOut[i * W + c];
                InOut[i * W + c] = InOut[s * W + c];
                InOut[s * W + c] = t;
            }
    }
    gap_waitbarrier(0);
}
"""


def digit_reverse(n: int, radix: int) -> np.ndarray:
    """Position p of a DIF FFT's output holds frequency digit_reverse(p)."""
    digits = round(np.log(n) / np.log(radix))
    p = np.arange(n)
    out = np.zeros(n, np.int64)
    for _ in range(digits):
        out = out * radix + p % radix
        p //= radix
    return out


def _fft_rows(x: np.ndarray, radix: int) -> np.ndarray:
    return np.fft.fft(x, axis=-1)[..., digit_reverse(x.shape[-1], radix)]


def image2complex(In, Out, W, H):
    Out[: W * H] = In[: W * H].astype(np.float32)


def fft_horizontal(radix):
    def kernel(InOut, Twiddles, W, H, *, core_id, core_count):
        if core_id == 0:
            t = InOut[: W * H].reshape(H, W)
            t[...] = _fft_rows(t, radix)
    return kernel


def fft_vertical(radix):
    def kernel(InOut, Twiddles, H, W, *, core_id, core_count):
        if core_id == 0:
            t = InOut[: W * H].reshape(H, W)
            t[...] = _fft_rows(t.T, radix).T
    return kernel


def swap_horizontal(InOut, SwapTable, W, H, *, core_id, core_count):
    if core_id == 0:
        t = InOut[: W * H].reshape(H, W)
        t[...] = t[:, SwapTable[:W].astype(np.int64)]


def swap_vertical(InOut, SwapTable, H, W, *, core_id, core_count):
    if core_id == 0:
        t = InOut[: W * H].reshape(H, W)
        t[...] = t[SwapTable[:H].astype(np.int64), :]


def fft_cost(W, H, **_):
    n = max(W, H)
    return 5 * W * H * int(np.log2(n)) // 2


def load_fft_library(m):
    cx = "float _Complex * __restrict__"
    m.LibKernel("Image2Complex", CALL_PARALLEL,
                CArgs(4, TCArg("Wordu8 * __restrict__", "In"), TCArg(cx, "Out"),
                      TCArg("unsigned int", "W"), TCArg("unsigned int", "H")),
                "", c_source=FFT_KERNELS_C,
                reference=lambda In, Out, W, H, core_id, core_count:
                    image2complex(In, Out, W, H) if core_id == 0 else None,
                cost=lambda W, H: W * H)
    for radix in (2, 4):
        m.LibKernel(f"Radix{radix}FFT_DIF_2D_Horizontal", CALL_PARALLEL,
                    CArgs(4, TCArg(cx, "InOut"), TCArg(cx, "Twiddles"),
                          TCArg("unsigned int", "W"), TCArg("unsigned int", "H")),
                    "", c_source=FFT_KERNELS_C, reference=fft_horizontal(radix), cost=fft_cost)
        m.LibKernel(f"Radix{radix}FFT_DIF_2D_Vertical", CALL_PARALLEL,
                    CArgs(4, TCArg(cx, "InOut"), TCArg(cx, "Twiddles"),
                          TCArg("unsigned int", "H"), TCArg("unsigned int", "W")),
                    "", c_source=FFT_KERNELS_C, reference=fft_vertical(radix), cost=fft_cost)
    m.LibKernel("SwapSamples_2D_Horizontal_Par", CALL_PARALLEL,
                CArgs(4, TCArg(cx, "InOut"), TCArg("short int * __restrict__", "SwapTable"),
                      TCArg("unsigned int", "W"), TCArg("unsigned int", "H")),
                "", c_source=FFT_KERNELS_C, reference=swap_horizontal, cost=lambda W, H: W * H)
    m.LibKernel("SwapSamples_2D_Vertical_Par", CALL_PARALLEL,
                CArgs(4, TCArg(cx, "InOut"), TCArg("short int * __restrict__", "SwapTable"),
                      TCArg("unsigned int", "H"), TCArg("unsigned int", "W")),
                "", c_source=FFT_KERNELS_C, reference=swap_vertical, cost=lambda W, H: W * H)


def FFT2D(m, Name, Dim, ForceRadix2=0):
    if Dim < 2 or Dim & (Dim - 1):
        raise TilingError(f"FFT2D: {Name}, Incorrect Dim: {Dim}, it has to be a power of 2")
    elif (Dim.bit_length() - 1) % 2 == 0 and not ForceRadix2:
        KerHorizontal, KerVertical = "Radix4FFT_DIF_2D_Horizontal", "Radix4FFT_DIF_2D_Vertical"
    else:
        KerHorizontal, KerVertical = "Radix2FFT_DIF_2D_Horizontal", "Radix2FFT_DIF_2D_Vertical"
    cx = "float _Complex * __restrict__"
    m.OpenKernelGroup(Name)
    m.UserKernel(Name + "Horizontal",
        KernelDimensions(1, Dim, Dim, 1),
        KernelIterationOrder(KER_DIM2, KER_TILE),
        TILE_HOR,
        CArgs(4,
            TCArg("Wordu8 * __restrict__", "In"),
            TCArg(cx, "Out"),
            TCArg(cx, "Twiddles", shape=(Dim,)),
            TCArg("short int * __restrict__", "SwapTable", shape=(Dim,)),
        ),
        Calls(3,
            Call("Image2Complex", LOC_INNER_LOOP,
                Bindings(4, K_Arg("In", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE),
                         K_Arg("In", KER_ARG_TILE_W), K_Arg("In", KER_ARG_TILE_H))),
            Call(KerHorizontal, LOC_INNER_LOOP,
                Bindings(4, K_Arg("Out", KER_ARG_TILE), C_Arg("Twiddles"),
                         K_Arg("Out", KER_ARG_TILE_W), K_Arg("Out", KER_ARG_TILE_H))),
            Call("SwapSamples_2D_Horizontal_Par", LOC_INNER_LOOP,
                Bindings(4, K_Arg("Out", KER_ARG_TILE), C_Arg("SwapTable"),
                         K_Arg("Out", KER_ARG_TILE_W), K_Arg("Out", KER_ARG_TILE_H))),
        ),
        KerArgs(2,
            KerArg("In", OBJ_IN_DB, Dim, Dim, 1, 0, 0, 0, "In", 0),
            KerArg("Out", OBJ_OUT_DB, Dim, Dim, 8, 0, 0, 8, "Out", 0),
        ),
    )
    m.UserKernel(Name + "Vertical",
        KernelDimensions(1, Dim, Dim, 1),
        KernelIterationOrder(KER_DIM2, KER_TILE),
        TILE_VER,
        CArgs(3,
            TCArg(cx, "InOut"),
            TCArg(cx, "Twiddles", shape=(Dim,)),
            TCArg("short int * __restrict__", "SwapTable", shape=(Dim,)),
        ),
        Calls(2,
            Call(KerVertical, LOC_INNER_LOOP,
                Bindings(4, K_Arg("InOut", KER_ARG_TILE), C_Arg("Twiddles"),
                         K_Arg("InOut", KER_ARG_TILE_H), K_Arg("InOut", KER_ARG_TILE_W))),
            Call("SwapSamples_2D_Vertical_Par", LOC_INNER_LOOP,
                Bindings(4, K_Arg("InOut", KER_ARG_TILE), C_Arg("SwapTable"),
                         K_Arg("InOut", KER_ARG_TILE_H), K_Arg("InOut", KER_ARG_TILE_W))),
        ),
        KerArgs(1,
            KerArg("InOut", OBJ_IN_OUT_DB, Dim, Dim, 8, 0, 0, 8, "InOut", 0),
        ),
    )
    m.CloseKernelGroup()
    m.UserKernelGroup(Name,
        CArgs(4,
            TCArg("Wordu8 * __restrict__", "In"),
            TCArg(cx, "Out"),
            TCArg(cx, "Twiddles", shape=(Dim,)),
            TCArg("short int * __restrict__", "SwapTable", shape=(Dim,)),
        ),
        Calls(2,
            UserKernelCall(Name + "Horizontal", LOC_GROUP,
                Bindings(4, C_Arg("In"), C_Arg("Out"), C_Arg("Twiddles"), C_Arg("SwapTable"))),
            UserKernelCall(Name + "Vertical", LOC_GROUP,
                Bindings(3, C_Arg("Out"), C_Arg("Twiddles"), C_Arg("SwapTable"))),
        ),
    )


def model(dim=256, l1_budget=51200):
    m = Model(target="gap8", l1_budget=l1_budget)
    load_fft_library(m)
    FFT2D(m, "FFT2D", dim)
    return m


def tables(dim):
    radix = 4 if (dim.bit_length() - 1) % 2 == 0 else 2
    twiddles = np.exp(-2j * np.pi * np.arange(dim) / dim).astype(np.complex64)
    # Swapping with the inverse permutation puts frequency k back at position k.
    swap = np.argsort(digit_reverse(dim, radix)).astype(np.int16)
    return twiddles, swap


if __name__ == "__main__":
    for dim in (256, 128):
        m = model(dim)
        print(m.tiling("FFT2DHorizontal"))
        print(m.tiling("FFT2DVertical"))
        prog = m.program("FFT2D")
        img = np.random.default_rng(4).integers(0, 256, (dim, dim), dtype=np.uint8)
        tw, swap = tables(dim)
        out = np.zeros((dim, dim), np.complex64)
        res = prog.run(In=img, Out=out, Twiddles=tw, SwapTable=swap)
        want = np.fft.fft2(img.astype(np.float64))
        err = float(np.abs(out - want).max() / np.abs(want).max())
        print(f"Dim {dim}: max relative error vs numpy fft2 {err:.2e}, cycles {res.cycles}")
        assert err < 1e-5
        prog.run("c", In=img, Out=out, Twiddles=tw, SwapTable=swap)  # FFT_KERNELS_C
        err = float(np.abs(out - want).max() / np.abs(want).max())
        print(f"Dim {dim}, backend='c': max relative error vs numpy fft2 {err:.2e}")
        assert err < 1e-5
