"""The VNNI form of the integer feature-tile convolution (``convolution.layer_conv(...,
planes=True)`` on int8 or uint8 activations, the host schedule's): the C of a part its kernel
calls first where the compiler targets AVX-512 VNNI and VBMI, which computes the same
wrapping int32 sums with ``vpdpbusd`` (four unsigned-byte by signed-byte products added to a
32-bit lane). The one-plane kernel (a depthwise convolution's plane) calls the same form for
its core's rows, one input and one output feature (``one_plane_call``): a 3-wide filter row
a quad instead of a ``vpmaddwd`` per tap.

Integer sums are exact in any order, so the form reorders freely:

- an activation ``x`` enters as the unsigned byte ``x + Off`` (``Off`` 128 for int8: ``x ^
  0x80``; 0 for uint8), a tap on padding as the byte ``Zin + Off``; each output subtracts
  ``(Zin + Off) * sum(weights of its taps)`` once, so that every tap adds ``(x - Zin) * (w -
  Zw)`` and one on padding nothing;
- the weights ``w - Zw`` are signed bytes (the form is taken only when every one fits, e.g.
  ONNX Runtime's symmetric int8 weights), four taps of a filter row to a 32-bit quad (the
  fourth of a 3-wide row 0), packed per call, 16 quads a vector;
- a lane of 16 holds an output pixel, its quad the 4 input bytes at its columns ``x - PadL +
  4g .. +3``: one masked load of the input line and one ``vpermb`` per 16 pixels; every
  filter row is fed, the pad byte where its line is outside the tile or the plane;
- registers hold up to 8 output features x 32 pixels of accumulators across the input
  features and taps, each quad of weights a broadcast from the packed table;
- 1x1 filters take 4 input features to a quad instead (the bytes of a pixel in 4 planes, by
  ``vpermt2b``); where the outputs are one run of the inputs (stride 1, no padding, rows as
  wide as the input's, every line in the tile: a pointwise convolution), 64 outputs of up to 4
  features a block, the quads made by two rounds of byte and word unpacks (``_run_block``);
- planes narrower than 32 outputs have their outputs flattened, 16 to a vector, each lane's
  bytes outside its row or the tile the pad byte (a mask per vector and quad), where the
  call has enough pairs of features to pay for the masks;
- 3x3 filters run a copy whose tap counts are constants.

Elsewhere (column stride above 2, column dilation above 1, filters wider or taller than 16,
zero points outside the byte range, a weight outside -128..127, no VNNI) the kernel's other
loops run.
"""

from __future__ import annotations

import numpy as np

from .common import LANES, c_copies, c_pick_copy, c_signature, layer_c_type, share_rows

# Weight quads one packed table holds (int32 x the features of a block: 32 KB of stack); more
# input features are done in chunks that fit.
VNNI_QUADS = 1024
# Output features of a register block (the most first), and the widest filter it takes.
VNNI_FEATURES = (8, 4, 2, 1)
VNNI_MAX_F = 16
# Planes narrower than 32 outputs, as wide as their input, of at most VNNI_FLAT outputs and
# filters of at most VNNI_FLAT_QUADS quads: their outputs flattened, 16 to a vector (rows of
# their own would leave lanes empty).
VNNI_FLAT, VNNI_FLAT_QUADS = 1024, 4
# The fewest pairs of output and input features a call flattens (its lane masks, about 12
# operations an output, are then a small part of the call).
VNNI_FLAT_PAIRS = 256
# The fewest outputs a plane takes the pointwise run form with for a call of 8 features or
# more (fewer leave a quarter of its last block's lanes empty: 7x7 and 14x14 planes ran 25-40%
# slower than in the blocks of 8 features, kernel alone).
RUN_MIN = 512
# Bytes of the stack buffer a strided pointwise convolution gathers its inputs into (a chunk
# of input features at a time; at most this many outputs a plane).
RUN_GATHER = 32768
# The filters a copy of the VNNI form is made for, its tap counts constants (any stride).
_SHAPES = (("3x3", dict(Fx=3, Fy=3)),)

VNNI_HELPERS = """\
#ifndef NPK_VNNI_HELPERS
#define NPK_VNNI_HELPERS
/* ---- AVX-512 VNNI (vpdpbusd) and VBMI (vpermb) for the integer convolution, when the
   compiler targets them; the other loops otherwise. ---- */
#if defined(NPK_AVX512) && defined(__AVX512VNNI__) && defined(__AVX512VBMI__)
#define NPK_VNNI 1
/* The bytes i of a vector at columns C .. C+63 of a row of N bytes for which 0 <= C+i < N. */
static inline __mmask64 npk_bytes(int C, int N)
{
    int Lo = C < 0 ? -C : 0, Hi = N - C;
    Lo = Lo < 64 ? Lo : 64;
    Hi = Hi < Lo ? Lo : Hi < 64 ? Hi : 64;
    return (Hi == 64 ? ~0ULL : (1ULL << Hi) - 1ULL) & ~(Lo == 64 ? ~0ULL : (1ULL << Lo) - 1ULL);
}
#endif
#endif"""


def _quad_index(first: int, stride: int = 1) -> str:
    """``_mm512_set_epi32`` of the vpermb indices giving lane t the bytes first+stride*t ..
    first+stride*t+3 of a 64-byte vector."""
    words = [sum((first + stride * t + b) << (8 * b) for b in range(4)) for t in range(LANES)]
    return "_mm512_set_epi32(" + ", ".join(f"0x{w:08x}" for w in reversed(words)) + ")"


def _feature_index(first: int) -> str:
    """``_mm512_set_epi32`` of the vpermt2b indices giving lane t the bytes s, 32+s, 64+s,
    96+s (s = first + t) of two vectors each holding two 32-byte runs: pixel s of 4 planes."""
    words = [sum((32 * b + first + t) << (8 * b) for b in range(4)) for t in range(LANES)]
    return "_mm512_set_epi32(" + ", ".join(f"0x{w:08x}" for w in reversed(words)) + ")"


def _block(name: str, ti: str, signed: bool, r: int, p: int, flat: bool) -> str:
    """C of one register block: output features 0 .. r-1 (planes ``A + k*Tile``) at outputs
    ``x .. x + 16p - 1`` below ``Wo`` of one output row, or (``flat``) of a plane's outputs
    flattened (``x`` a flat output index, ``Wo`` their count)."""
    vecs = [(k, j) for k in range(r) for j in range(p)]
    load = "_mm512_mask_loadu_epi8(Pad, M[fy * G + g], Line + C0 + 4 * g)"
    row = f"_mm512_xor_si512({load}, Flip)" if signed else load
    loads = "\n".join(
        f"    __m512i S{k}_{j} = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(K{j}, A + {k} * Tile "
        f"+ x + {j * LANES}), _mm512_set1_epi32((int)Corr[{k}]));" for k, j in vecs)
    terms = "\n".join(f"                    S{k}_{j} = _mm512_dpbusd_epi32(S{k}_{j}, X{j}, "
                      f"_mm512_set1_epi32(Qk[{k} * NQ]));" for k, j in vecs)
    stores = "\n".join(f"    _mm512_mask_storeu_epi32(A + {k} * Tile + x + {j * LANES}, K{j}, "
                       f"S{k}_{j});" for k, j in vecs)
    masks = ", ".join(f"K{j} = npk_cols(x + {j * LANES}, Wo)" for j in range(p))
    idx = "\n".join(f"    const __m512i Idx{j} = {_quad_index(j * LANES)};" for j in range(p))
    if p == 1 and not flat:  # a row at column stride 2 takes these blocks: lane t at 2t
        idx = f"    const __m512i Idx0 = Sx == 1 ? {_quad_index(0)} :\n        {_quad_index(0, 2)};"
    flip = "\n    const __m512i Flip = _mm512_set1_epi8((char)0x80);" if signed else ""
    fidx = "\n".join(f"        const __m512i Fdx{j} = {_feature_index(j * LANES)};"
                     for j in range(p))
    flip2 = ("\n            Ab = _mm512_xor_si512(Ab, Flip);\n"
             "            Cd = _mm512_xor_si512(Cd, Flip);") if signed else ""
    fterms = terms.replace("                    S", "            S")
    if flat:
        fperms = "\n".join(f"            __m512i X{j} = _mm512_mask_blend_epi8(T[{j}], PadU, "
                           f"_mm512_permutex2var_epi8(Ab, Fdx{j}, Cd));" for j in range(p))
        fq_inside = "(__mmask32)npk_bytes(Top + C0, Plane)"
        perms = "\n".join(f"                    __m512i X{j} = _mm512_mask_permutexvar_epi8(PadU, "
                          f"T[({j} * Fy + fy) * G + g], Idx{j}, Row);" for j in range(p))
        what = """\
       of a plane's outputs flattened (W == Wo, Sy 1): lane t's quad g is the bytes at
       Line + C0 + 4g + t .. +3 (Line: filter row fy's line for output 0, less PadL, at Top +
       fy*Dy*W in its plane; C0 = x), unsigned; T[(j*Fy + fy)*G + g]: the bytes of vector j's
       lanes whose row and column are inside the tile, the others the pad byte."""
        pad_u = (f"\n    const __m512i PadU = {'_mm512_xor_si512(Pad, Flip)' if signed else 'Pad'};"
                 "\n    (void)Sx;")
        inside = "npk_bytes(Top + fy * Dy * W + C0 + 4 * g, Plane)"
        unused = "    (void)RowsOk;"
    else:
        fperms = "\n".join(f"            __m512i X{j} = _mm512_permutex2var_epi8(Ab, Fdx{j}, Cd);"
                           for j in range(p))
        fq_inside = "RowsOk & 1 ? (__mmask32)Cols[0] : 0"
        perms = "\n".join(f"                    __m512i X{j} = _mm512_permutexvar_epi8(Idx{j}, "
                          f"Row);" for j in range(p))
        what = """\
       of one row: lane t's quad g is the bytes at input columns C0 + 4g + Sx*t .. +3 (C0 =
       x*Sx - PadL; Sx 2 in blocks of 16 only), unsigned, the pad byte outside the line and
       for the filter rows fy whose line is outside the tile or the plane (bit fy of RowsOk
       0)."""
        pad_u = ""
        inside = "RowsOk >> fy & 1 ? Cols[g] : 0"
        unused = f"""\
    __mmask64 Cols[{VNNI_MAX_F // 4}];  /* quad g's bytes inside the line */
    (void)Sx;
    (void)T;
    (void)Top;
    (void)Plane;
    for (int g = 0; g < G; g++)
        Cols[g] = npk_bytes(C0 + 4 * g, W);"""
    return f"""\
static inline NPK_ALWAYS_INLINE void {name}_Vnni{'Flat' if flat else ''}{r}x{p}(const {ti} *In,
    int Base, int Plane, int W, int Feat, int Fy, int Dy, int G, const int *Q, int NQ,
    const unsigned int *Corr, int *A, int Tile, int x, int Wo, int C0, int Top,
    unsigned int RowsOk, int Fq, int Sx, __m512i Pad, const __mmask64 *T)
{{
    /* Output features 0 .. {r - 1} (accumulator planes A + k*Tile), outputs x .. x+{p * LANES - 1}
       (those below Wo) in {r * p} vectors of accumulators in registers across the Feat input
       features (lines In + Base + i*Plane + fy*Dy*W), their filter rows fy and quads g,
{what}
       Qk[k*NQ]: the quad's weights of feature k. Each accumulator starts less Corr[k].
       Fq (1x1 filters): quad g is input features 4g .. 4g+3 at the lane's pixel instead. */
    __mmask16 {masks};
    __mmask64 M[{VNNI_MAX_F * VNNI_MAX_F // 4}];  /* quad g of filter row fy: its bytes inside */
{idx}{flip}{pad_u}
{loads}
{unused}
    if (Fq) {{
        /* 32 pixels of each of 4 planes (the pad byte outside the line or past Feat): Ab
           holds planes 4g, 4g+1, Cd planes 4g+2, 4g+3; vpermt2b makes the lanes' quads. */
        const __m256i Pad8 = _mm512_castsi512_si256(Pad);
        __mmask32 Mq = {fq_inside};
{fidx}
        for (int i = 0, g = 0; i < Feat; i += 4, g++) {{
            const {ti} *Line = In + Base + i * Plane + C0;
            const int *Qk = Q + g;
            __m512i Ab = _mm512_inserti64x4(_mm512_castsi256_si512(
                _mm256_mask_loadu_epi8(Pad8, Mq, Line)),
                _mm256_mask_loadu_epi8(Pad8, i + 1 < Feat ? Mq : 0, Line + Plane), 1);
            __m512i Cd = _mm512_inserti64x4(_mm512_castsi256_si512(
                _mm256_mask_loadu_epi8(Pad8, i + 2 < Feat ? Mq : 0, Line + 2 * Plane)),
                _mm256_mask_loadu_epi8(Pad8, i + 3 < Feat ? Mq : 0, Line + 3 * Plane), 1);{flip2}
{fperms}
{fterms}
        }}
    }} else {{
        for (int fy = 0; fy < Fy; fy++)
            for (int g = 0; g < G; g++)
                M[fy * G + g] = {inside};
        for (int i = 0; i < Feat; i++)
            for (int fy = 0; fy < Fy; fy++) {{
                const {ti} *Line = In + Base + i * Plane + fy * Dy * W;
                const int *Qk = Q + (i * Fy + fy) * G;
                for (int g = 0; g < G; g++, Qk++) {{
                    __m512i Row = {row};
{perms}
{terms}
                }}
            }}
    }}
{stores}
}}"""


def _pack(name: str, tw: str) -> str:
    """C of ``{name}_Pack``: a feature's filter rows as quads of signed bytes, and their sum."""
    return f"""\
static inline NPK_ALWAYS_INLINE unsigned int {name}_Pack(const {tw} *F, int Rows, int Fx,
                                                          int G, int Zw, int *Q)
{{
    /* Rows filter rows of Fx weights (F): Q[r*G + g], quad g of row r, holds the weights
       4g .. 4g+3 less Zw as signed bytes (0 past Fx: the fourth of a 3-wide row); returns
       the sum of the weights less Zw (wrapping). Fx <= 4: 16 rows to a vector, by vpermb. */
    unsigned int Sum = 0;
    if (G == 1) {{
        const __m512i Idx = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_set_epi32(
            15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
            _mm512_set1_epi32(Fx * 0x01010101)), _mm512_set1_epi32(0x03020100));
        const __mmask64 Keep = _mm512_cmplt_epu8_mask(_mm512_set1_epi32(0x03020100),
                                                      _mm512_set1_epi8((char)Fx));
        const __m512i Ones = _mm512_set1_epi8(1), Zv = _mm512_set1_epi8((char)Zw);
        __m512i Sums = _mm512_setzero_si512();
        for (int r = 0; r < Rows; r += {LANES}) {{
            int N = Rows - r < {LANES} ? Rows - r : {LANES};
            /* lane q: bytes q*Fx + b of the rows' weights, less Zw (wrapping to the byte:
               the value is a signed byte) */
            __m512i V = _mm512_maskz_sub_epi8(Keep & npk_bytes(0, 4 * N),
                _mm512_permutexvar_epi8(Idx, _mm512_maskz_loadu_epi8(npk_bytes(0, N * Fx),
                                                                       F + r * Fx)), Zv);
            _mm512_mask_storeu_epi32(Q + r, npk_cols(0, N), V);
            Sums = _mm512_dpbusd_epi32(Sums, Ones, V);
        }}
        return (unsigned int)_mm512_reduce_add_epi32(Sums);
    }}
    for (int r = 0; r < Rows; r++)
        for (int g = 0; g < G; g++) {{
            unsigned int Quad = 0;
            for (int b = 0; b < 4 && 4 * g + b < Fx; b++) {{
                int V = (int)F[r * Fx + 4 * g + b] - Zw;
                Quad |= (unsigned int)(V & 0xFF) << (8 * b);
                Sum += (unsigned int)V;
            }}
            Q[r * G + g] = (int)Quad;
        }}
    return Sum;
}}"""


def _pack_run(name: str, tw: str) -> str:
    """C of ``{name}_PackRun``: a 1x1 filter's weights, 4 input features to a quad."""
    return f"""\
static inline NPK_ALWAYS_INLINE unsigned int {name}_PackRun(const {tw} *F, int N, int Zw,
                                                             int *Q)
{{
    /* N weights (F) less Zw as signed bytes, 4 to a quad (0 past N), 64 at a time; returns
       their sum (wrapping). */
    const __m512i Ones = _mm512_set1_epi8(1), Zv = _mm512_set1_epi8((char)Zw);
    __m512i Sums = _mm512_setzero_si512();
    for (int r = 0; r < N; r += 64) {{
        __mmask64 K = npk_bytes(0, N - r);
        __m512i V = _mm512_maskz_sub_epi8(K, _mm512_maskz_loadu_epi8(K, F + r), Zv);
        _mm512_mask_storeu_epi32(Q + r / 4, npk_cols(0, (N - r + 3) / 4), V);
        Sums = _mm512_dpbusd_epi32(Sums, Ones, V);
    }}
    return (unsigned int)_mm512_reduce_add_epi32(Sums);
}}"""


def _run_block(name: str, ti: str, signed: bool, r: int) -> str:
    """C of ``{name}_VnniRun{r}``: ``r`` output features of a pointwise convolution whose
    outputs are one run of ``N`` inputs in each plane, 64 outputs a block."""
    vecs = [(k, v) for k in range(r) for v in range(4)]
    flip_set = "\n    const __m512i Flip = _mm512_set1_epi8((char)0x80);" if signed else ""
    starts = "\n".join(f"        __m512i S{k}_{v} = _mm512_set1_epi32(-(int)Corr[{k}]);"
                       for k, v in vecs)
    flip = "".join(f"\n            P{b} = _mm512_xor_si512(P{b}, Flip);" for b in range(4)) \
        if signed else ""
    terms = "\n".join(f"            S{k}_{v} = _mm512_dpbusd_epi32(S{k}_{v}, X{v}, "
                       f"_mm512_set1_epi32(Q[{k} * NQ + g]));" for k, v in vecs)
    stores = "\n".join(f"""\
        {{
            /* S{k}_v's 128-bit block m holds outputs 16m + 4v .. +3: block v of vector m */
            __m512i T0 = _mm512_shuffle_i32x4(S{k}_0, S{k}_1, 0x44),
                    T1 = _mm512_shuffle_i32x4(S{k}_0, S{k}_1, 0xEE),
                    T2 = _mm512_shuffle_i32x4(S{k}_2, S{k}_3, 0x44),
                    T3 = _mm512_shuffle_i32x4(S{k}_2, S{k}_3, 0xEE);
            __m512i O[4] = {{_mm512_shuffle_i32x4(T0, T2, 0x88),
                            _mm512_shuffle_i32x4(T0, T2, 0xDD),
                            _mm512_shuffle_i32x4(T1, T3, 0x88),
                            _mm512_shuffle_i32x4(T1, T3, 0xDD)}};
            int *Ak = A + {k} * Tile + x;
            for (int m = 0; m < 4; m++) {{
                __mmask16 K = npk_cols(x + 16 * m, N);
                _mm512_mask_storeu_epi32(Ak + 16 * m, K, _mm512_add_epi32(
                    _mm512_maskz_loadu_epi32(K, Ak + 16 * m), O[m]));
            }}
        }}""" for k in range(r))
    return f"""\
static inline NPK_ALWAYS_INLINE void {name}_VnniRun{r}(const {ti} *In, int Plane, int InFeat,
    int N, const int *Q, int NQ, const unsigned int *Corr, int *A, int Tile)
{{
    /* Output features 0 .. {r - 1} (accumulators A + k*Tile) of N outputs, output q adding
       input q of each of the InFeat planes (In + i*Plane), 64 outputs a block in {4 * r}
       vectors of accumulators, each starting at less Corr[k]. Quad g of an output: its bytes
       in planes 4g .. 4g+3 (byte 0 past InFeat or N), unsigned; Q[k*NQ + g] the feature's
       weights of those planes. */{flip_set}
    for (int x = 0; x < N; x += 64) {{
        const __mmask64 Mb = npk_bytes(x, N);
{starts}
        for (int i = 0, g = 0; i < InFeat; i += 4, g++) {{
            const {ti} *Line = In + i * Plane + x;
            __m512i P0 = _mm512_maskz_loadu_epi8(Mb, Line),
                    P1 = _mm512_maskz_loadu_epi8(i + 1 < InFeat ? Mb : 0, Line + Plane),
                    P2 = _mm512_maskz_loadu_epi8(i + 2 < InFeat ? Mb : 0, Line + 2 * Plane),
                    P3 = _mm512_maskz_loadu_epi8(i + 3 < InFeat ? Mb : 0, Line + 3 * Plane);{flip}
            /* In each 128-bit block m: byte pairs of planes 4g, 4g+1 (and 4g+2, 4g+3) at
               outputs 16m .. 16m+7 (L) and 16m+8 .. 16m+15 (H); then their quads, 4 outputs
               to a block of X0 .. X3. */
            __m512i L01 = _mm512_unpacklo_epi8(P0, P1), H01 = _mm512_unpackhi_epi8(P0, P1),
                    L23 = _mm512_unpacklo_epi8(P2, P3), H23 = _mm512_unpackhi_epi8(P2, P3);
            __m512i X0 = _mm512_unpacklo_epi16(L01, L23), X1 = _mm512_unpackhi_epi16(L01, L23),
                    X2 = _mm512_unpacklo_epi16(H01, H23), X3 = _mm512_unpackhi_epi16(H01, H23);
{terms}
        }}
{stores}
    }}
}}"""


def _runs(name: str, ti: str, tw: str, signed: bool) -> str:
    """C of ``{name}_VnniRuns``: output features First .. Last-1 of a pointwise convolution
    whose outputs are one run of its inputs, in blocks of up to 4 features."""
    blocks = "\n\n".join(_run_block(name, ti, signed, r) for r in (4, 3, 2, 1))
    calls = "\n".join(f"        {'if' if r == 4 else 'else if'} (R == {r})\n"
                       f"            {name}_VnniRun{r}(In, Plane, InFeat, N, Q, NQ, Corr, "
                       f"Acc + o * N, N);" for r in (4, 3, 2))
    return f"""\
{blocks}

static inline NPK_ALWAYS_INLINE void {name}_VnniRuns(const {ti} *In, int Plane, int InFeat,
    int N, const {tw} *Filter, int Stride, int *Acc, int First, int Last, int Zw, int Byte)
{{
    /* Output features First .. Last-1 in blocks of R (4, then 3, 2 or 1), their weights
       (feature o's InFeat at Filter + o*Stride) packed 4 input features to a quad (NQ <=
       {VNNI_QUADS}: the caller's check); each output subtracts Byte times the sum of its
       weights (Byte: the bytes of Zin). */
    int Q[{VNNI_QUADS} * 4], NQ = (InFeat + 3) / 4;
    unsigned int Corr[4];
    for (int o = First; o < Last;) {{
        int R = Last - o >= 4 ? 4 : Last - o;
        for (int k = 0; k < R; k++)
            Corr[k] = (unsigned int)Byte * {name}_PackRun(Filter + (o + k) * Stride, InFeat,
                                                          Zw, Q + k * NQ);
{calls}
        else
            {name}_VnniRun1(In, Plane, InFeat, N, Q, NQ, Corr, Acc + o * N, N);
        o += R;
    }}
}}

static inline NPK_ALWAYS_INLINE void {name}_VnniStrided(const {ti} *In, int Plane, int W,
    int Line0, int InFeat, int Wo, int OutRows, int Sy, const {tw} *Filter, int *Acc,
    int First, int Last, int Zw, int Byte)
{{
    /* A pointwise convolution at column stride 2 without padding, every line in the tile:
       output (y, x) of plane i reads line Line0 + y*Sy, column 2x. The inputs it reads are
       gathered, {RUN_GATHER} bytes at a time (a chunk of input features), into runs of
       OutRows*Wo bytes (32 outputs a step: the low bytes of 32 16-bit words), which
       {name}_VnniRuns adds. */
    {ti} Runs[{RUN_GATHER}];
    int Tile = OutRows * Wo, Chunk = {RUN_GATHER} / Tile;
    for (int i0 = 0; i0 < InFeat; i0 += Chunk) {{
        int Feat = InFeat - i0 < Chunk ? InFeat - i0 : Chunk;
        for (int i = 0; i < Feat; i++)
            for (int y = 0; y < OutRows; y++) {{
                const {ti} *Src = In + (i0 + i) * Plane + (Line0 + y * Sy) * W;
                for (int x = 0; x < Wo; x += 32)
                    _mm256_mask_storeu_epi8(Runs + i * Tile + y * Wo + x,
                        (__mmask32)npk_bytes(x, Wo), _mm512_cvtepi16_epi8(
                            _mm512_maskz_loadu_epi8(npk_bytes(2 * x, W), Src + 2 * x)));
            }}
        {name}_VnniRuns(Runs, Tile, Feat, Tile, Filter + i0, InFeat, Acc, First, Last, Zw,
                        Byte);
    }}
}}"""


def _args(in_dt: str, w_dt: str):
    """The parameters of ``{name}_Vnni``: the feature-tile kernel's, then the output features
    ``First .. Last-1`` it computes."""
    ti, tw = layer_c_type(in_dt), layer_c_type(w_dt)
    return ((f"const {ti} *__restrict__", "In"), ("int", "W"), ("int", "InRow0"),
            ("int", "InRows"), ("int", "Hreal"), ("int", "PadT"), ("int", "InFeat"),
            (f"const {tw} *__restrict__", "Filter"), ("int *__restrict__", "Acc"), ("int", "Wo"),
            ("int", "OutRow0"), ("int", "OutRows"), ("int", "OutFeat"), ("int", "Fx"),
            ("int", "Fy"), ("int", "Sx"), ("int", "Sy"), ("int", "Dx"), ("int", "Dy"),
            ("int", "PadL"), ("int", "Zin"), ("int", "Zw"), ("int", "First"), ("int", "Last"))


def vnni_call(name: str, in_dt: str, w_dt: str, given: dict | None = None) -> str:
    """The C call of ``{name}_Vnni``, each argument its parameter's name or the expression
    ``given`` names for it."""
    given = given or {}
    return f"{name}_Vnni({', '.join(given.get(n, n) for _, n in _args(in_dt, w_dt))})"


def _applies(signed: bool) -> str:
    """The C condition, on the kernel's arguments, under which the VNNI form applies to any
    weights less Zw that are signed bytes (``_fits``)."""
    return (f"Sx <= 2 && Dx == 1 && Fx <= {VNNI_MAX_F} && Fy <= {VNNI_MAX_F} && "
            f"Zin + {128 if signed else 0} >= 0 && Zin + {128 if signed else 0} <= 255")


def _fits(w_dt: str) -> str:
    """The C condition under which every weight less Zw is a signed byte whatever the
    weights (int8 with Zw 0, uint8 with Zw 128)."""
    return "Zw == 0" if np.dtype(w_dt) == np.int8 else "Zw == 128" if np.dtype(w_dt) == \
        np.uint8 else "0"


# A plane of fewer outputs than this is done by one core's call (the others have none): a
# call's set-up (the weights packed, the masks) costs more than a share of a row or two, and
# the host runs such a plane's cores on one thread (npukit.c.calls: work under its grain).
SMALL_PLANE = 1024


def one_plane_call(name: str, in_dt: str, w_dt: str) -> str:
    """C of the one-plane integer kernel's entry taking the VNNI form where it applies (a
    depthwise convolution's plane: one input and one output feature, this core's rows
    First .. Last-1; a plane under ``SMALL_PLANE`` outputs core 0's), returning when it
    did."""
    call = vnni_call(name, in_dt, w_dt, dict(
        InFeat="1", OutFeat="1", Acc="Acc + First * Wo", OutRow0="OutRow0 + First",
        OutRows="Last - First", First="0", Last="1"))
    return f"""\
#ifdef NPK_VNNI
    {{
        /* This core's rows in the VNNI form where it applies (3 byte taps of a filter row
           to a vpdpbusd quad instead of a vpmaddwd per tap). */
{share_rows("OutRows").replace("    ", "        ", 3)}
        /* A small plane: every row core 0's, where the form surely applies (its call
           returns 1, the others' nothing to do). */
        if (OutRows * Wo < {SMALL_PLANE} && {_fits(w_dt)} &&
            {_applies(np.dtype(in_dt) == np.int8)}) {{
            First = gap_coreid() ? OutRows : 0;
            Last = OutRows;
        }}
        if (First >= Last || {call})
            return;
    }}
#endif
"""


def _calls(name: str, flat: bool) -> str:
    """C choosing the register block of R features at output x (32 outputs, or 16 at the
    end)."""
    kind, args, end = ("Flat", "A, Tile, x, Tile, x, Top, 0, Fq, 1, Pad, T + x / 16 * Fy * G",
                       "Tile") if flat else \
        ("", "A, Tile, x, Wo, x * Sx - PadL, 0, RowsOk, Fq, Sx, Pad, T", "Wo && Sx == 1")
    at = "                    "  # inside the loop over x
    return "\n".join(
        f"{at}{'if' if n == 0 else 'else if'} (R == {r} && x + {LANES} < {end})\n"
        f"{at}    {name}_Vnni{kind}{r}x2(In, Base, Plane, W, Feat, Fy, Dy, G, Q, NQ, Corr, "
        f"{args});\n"
        f"{at}else if (R == {r})\n"
        f"{at}    {name}_Vnni{kind}{r}x1(In, Base, Plane, W, Feat, Fy, Dy, G, Q, NQ, Corr, "
        f"{args});"
        for n, r in enumerate(VNNI_FEATURES))


def vnni_conv(name: str, in_dt: str, w_dt: str) -> str:
    """C of ``{name}_Vnni``: output features First .. Last-1 of the feature-tile convolution
    in the VNNI form (the module's docstring), returning 1; or 0, having written nothing, where
    the form does not apply. Defined only where the compiler targets VNNI (``NPK_VNNI``)."""
    ti, tw = layer_c_type(in_dt), layer_c_type(w_dt)
    signed = np.dtype(in_dt) == np.int8
    off = 128 if signed else 0
    blocks = "\n\n".join(_block(name, ti, signed, r, p, flat) for flat in (False, True)
                         for r in VNNI_FEATURES for p in (2, 1))
    most = VNNI_FEATURES[0]
    line_ok = "P - PadT >= 0 && P - PadT < Hreal && P - InRow0 >= 0 && P - InRow0 < InRows"
    # Weights whose every value less Zw is a signed byte: int8 with Zw 0, uint8 with Zw 128.
    fits = _fits(w_dt)
    pick = " : ".join(f"Last - o >= {r} ? {r}" for r in VNNI_FEATURES[:-1]) + " : 1"
    return f"""\
{VNNI_HELPERS}
#ifdef NPK_VNNI
{_pack(name, tw)}

{_pack_run(name, tw)}

{blocks}

{_runs(name, ti, tw, signed)}

static inline NPK_ALWAYS_INLINE int {name}_VnniAny({c_signature(_args(in_dt, w_dt))})
{{
    /* Output features First .. Last-1 in blocks of R (8, 4, 2, 1), the input features in
       chunks whose quads fit Q (Q + k*NQ: feature o + k's); each output row (or the plane's
       outputs flattened: Flat) in register blocks of 32 (or 16) outputs (16 at column
       stride 2). Dx == 1 only. */
    int G = (Fx + 3) / 4, Byte = Zin + {off}, Lo = 0, Hi = 0, Fq = Fx == 1 && Fy == 1 && Sx == 1;
    int Plane = InRows * W, Tile = OutRows * Wo, Chunk;
    int Q[{VNNI_QUADS} * {most}];
    unsigned int Corr[{most}];
    __m512i Pad = _mm512_set1_epi8((char)Zin);
    int Flat = Wo < 32 && Wo == W && Sx == 1 && Sy == 1 && Tile <= {VNNI_FLAT} &&
               Fy * G <= {VNNI_FLAT_QUADS} && (Last - First) * InFeat >= {VNNI_FLAT_PAIRS},
        Top = (OutRow0 - InRow0) * W - PadL;
    __mmask64 T[{VNNI_FLAT // LANES * VNNI_FLAT_QUADS}];
    (void)OutFeat;
    if (!({_applies(np.dtype(in_dt) == np.int8)}))
        return 0;
    if (OutRows <= 0 || Wo <= 0 || First >= Last)
        return 1;  /* nothing to add (a core without rows or features) */
    /* Every weight w - Zw of these features must be a signed byte ({fits} whatever the
       weights: the check is skipped, a pass over every weight at each call). */
    for (int k = First * InFeat * Fy * Fx; k < ({fits} ? 0 : Last * InFeat * Fy * Fx); k++) {{
        int V = (int)Filter[k] - Zw;
        Lo = V < Lo ? V : Lo;
        Hi = V > Hi ? V : Hi;
    }}
    if (Lo < -128 || Hi > 127)
        return 0;
    /* A pointwise convolution whose outputs are one run of its inputs: every line inside the
       tile and the plane, rows as wide as the input's, no padding; where its blocks of 64
       outputs fill their lanes or the call has too few features for blocks of 8. */
    if (Fq && Sy == 1 && PadL == 0 && Wo == W && InFeat <= 4 * {VNNI_QUADS} &&
        (Tile >= {RUN_MIN} || Last - First < {VNNI_FEATURES[0]}) &&
        OutRow0 - PadT >= 0 && OutRow0 + OutRows - PadT <= Hreal && OutRow0 - InRow0 >= 0 &&
        OutRow0 + OutRows - InRow0 <= InRows) {{
        {name}_VnniRuns(In + (OutRow0 - InRow0) * W, Plane, InFeat, Tile, Filter, InFeat, Acc,
                        First, Last, Zw, Byte);
        return 1;
    }}
    /* The same at column stride 2, its inputs gathered into runs first. */
    if (Fx == 1 && Fy == 1 && Sx == 2 && PadL == 0 && InFeat <= 4 * {VNNI_QUADS} &&
        Tile <= {RUN_GATHER} && OutRow0 * Sy - PadT >= 0 &&
        (OutRow0 + OutRows - 1) * Sy - PadT < Hreal && OutRow0 * Sy - InRow0 >= 0 &&
        (OutRow0 + OutRows - 1) * Sy - InRow0 < InRows) {{
        {name}_VnniStrided(In, Plane, W, OutRow0 * Sy - InRow0, InFeat, Wo, OutRows, Sy,
                           Filter, Acc, First, Last, Zw, Byte);
        return 1;
    }}
    Chunk = Fq ? 4 * {VNNI_QUADS} : {VNNI_QUADS} / (Fy * G);
    if (Flat) {{
        /* T[(v*Fy + fy)*G + g] bit 4t + b: output q = 16v + t exists, filter row fy's line
           for it is inside the tile and the plane, and its column x - PadL + 4g + b inside the
           row (x, y: q's column and row). */
        /* (Nib[x*G + g]: the bits b of column x's quad g inside the row; Rows[y] bit fy:
           filter row fy's line for output row y inside the tile and the plane; a nibble
           per output, rather than a test per byte, at each of the cores' calls.) */
        int x = 0, y = 0;
        unsigned char Nib[32 * {VNNI_FLAT_QUADS}];
        unsigned short Rows[{VNNI_FLAT}];
        for (int v = 0; v < (Tile + {LANES - 1}) / {LANES} * Fy * G; v++) T[v] = 0;
        for (int c = 0; c < Wo * 4 * G; c++) {{  /* (1x1: byte c is feature c's) */
            int Col = c / (4 * G) - PadL + (Fq ? 0 : c % (4 * G));
            if (c % 4 == 0) Nib[c / 4] = 0;
            if (Col >= 0 && Col < W) Nib[c / 4] |= (unsigned char)(1u << c % 4);
        }}
        for (y = 0; y < OutRows; y++) {{
            Rows[y] = 0;
            for (int fy = 0; fy < Fy; fy++) {{
                int P = OutRow0 + y + fy * Dy;
                if ({line_ok}) Rows[y] |= (unsigned short)(1u << fy);
            }}
        }}
        y = 0;
        for (int q = 0; q < Tile; q++) {{
            for (int fy = 0; fy < Fy; fy++)
                if (Rows[y] >> fy & 1)
                    for (int g = 0; g < G; g++)
                        T[(q / {LANES} * Fy + fy) * G + g] |=
                            (unsigned long long)Nib[x * G + g] << (q % {LANES} * 4);
            if (++x == Wo) {{
                x = 0;
                y++;
            }}
        }}
    }}
    for (int o = First; o < Last;) {{
        int R = {pick};
        for (int i0 = 0; i0 < InFeat; i0 += Chunk) {{
            int Feat = InFeat - i0 < Chunk ? InFeat - i0 : Chunk;
            int NQ = Fq ? (Feat + 3) / 4 : Feat * Fy * G;
            /* Every filter row is fed (the pad byte where its line is outside the tile): each
               output subtracts (Zin + {off}) times the sum of all its weights. (1x1: a
               feature's weights one row of Feat.) */
            for (int k = 0; k < R; k++)
                Corr[k] = (unsigned int)Byte * (Fq ?
                    {name}_PackRun(Filter + (o + k) * InFeat + i0, Feat, Zw, Q + k * NQ) :
                    {name}_Pack(Filter + ((o + k) * InFeat + i0) * Fy * Fx, Feat * Fy, Fx, G, Zw,
                                Q + k * NQ));
            if (Flat) {{
                int Base = i0 * Plane + Top, *A = Acc + o * Tile;
                for (int x = 0; x < Tile; x += {2 * LANES})
{_calls(name, True)}
                continue;
            }}
            for (int y = 0; y < OutRows; y++) {{
                int P0 = (OutRow0 + y) * Sy, Base = (i0 * InRows + P0 - InRow0) * W;
                int *A = Acc + o * Tile + y * Wo;
                unsigned int RowsOk = 0;  /* bit fy: filter row fy's line is in the tile */
                for (int fy = 0; fy < Fy; fy++) {{
                    int P = P0 + fy * Dy;
                    if ({line_ok}) RowsOk |= 1u << fy;
                }}
                if (!RowsOk)
                    continue;  /* no tap: the accumulators stay */
                for (int x = 0; x < Wo; x += Sx == 1 ? {2 * LANES} : {LANES})
{_calls(name, False)}
            }}
        }}
        o += R;
    }}
    return 1;
}}

{c_copies(f"{name}_VnniAny", _args(in_dt, w_dt), _SHAPES, "int")}
static inline NPK_ALWAYS_INLINE int {name}_Vnni({c_signature(_args(in_dt, w_dt))})
{{
    /* 3x3 filters (most of a CNN's) run a copy whose tap counts are constants. */
{c_pick_copy(f"{name}_VnniAny", _args(in_dt, w_dt), _SHAPES, "    ", ret="int")}
}}
#endif"""
