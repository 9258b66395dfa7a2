"""The integer ``linear.matmul`` (a QDQ MatMul or Gemm: a classifier's 1280 x 1000) on 8-bit
operands in AVX-512 vectors: 64 output columns in 4 vectors of int32 accumulators held in
registers across k, each k one broadcast of ``A[k] - Za`` and, per vector, 16 bytes of
``B``'s row widened and multiplied by ``vpmaddwd`` (a lane holding ``B[k][j]`` sign-extended
times one holding ``A[k] - Za`` in its low 16 bits: the exact product, both within 16 bits
for zero points within +-32512, as ``convolution.layer_conv``'s integer blocks take them);
``Zb`` times the sum of ``A - Za`` subtracted once per column. Integer sums wrap in any order
to the plain loop's int32; each output is ``npk_requant``'s, lane by lane (vminps / vmaxps
with the value second so that NaN passes as its comparisons let it, vcvtps2dq rounding to
nearest even as npk_rne). The plain loop's compiled form was scalar: 0.7 ms for the 1.28 M
products of MobileNet-v2's classifier.
"""

from __future__ import annotations

from .common import AVX512_HELPERS, LANES

_WIDEN = {"unsigned char": "_mm512_cvtepu8_epi32", "signed char": "_mm512_cvtepi8_epi32"}
# Accumulator vectors a block of columns holds in registers.
VECTORS = 4


def matmul_vectors(name: str, ta: str, tb: str, to: str) -> tuple[str, str]:
    """(C of ``{name}_Vectors``, C setting ``Done``, the first column of this core's share the
    plain loop is left: ``First`` where the vectors do not apply), or ("", "int Done =
    First;") unless A, B and Out are 8-bit (C types ``ta``, ``tb``, ``to``)."""
    if not {ta, tb, to} <= set(_WIDEN):
        return "", "    int Done = First;"
    vs = range(VECTORS)
    masks = ", ".join(f"M{v} = npk_cols(j0 + {v * LANES}, Last)" for v in vs)
    starts = "\n".join(
        f"        __m512i S{v} = _mm512_sub_epi32(HasC ? (CStep ? _mm512_maskz_loadu_epi32("
        f"M{v}, C + j0 + {v * LANES}) : _mm512_set1_epi32(C[0])) : _mm512_setzero_si512(), "
        f"Corr);" for v in vs)
    terms = "\n".join(
        f"            S{v} = _mm512_add_epi32(S{v}, _mm512_madd_epi16({_WIDEN[tb]}("
        f"_mm_maskz_loadu_epi8(M{v}, Bk + {v * LANES})), Ak));" for v in vs)
    stores = "\n".join(
        f"        {name}_Out(Out + j0 + {v * LANES}, M{v}, S{v}, ScaleStep ? "
        f"_mm512_maskz_loadu_ps(M{v}, Scale + j0 + {v * LANES}) : _mm512_set1_ps(Scale[0]), "
        f"Lv, Hv, Zv);" for v in vs)
    code = f"""
{AVX512_HELPERS}
#ifdef NPK_AVX512
static inline NPK_ALWAYS_INLINE void {name}_Out({to} *Dst, __mmask16 K, __m512i S, __m512 Scv,
                                                __m512 Lv, __m512 Hv, __m512i Zv)
{{
    __m512 V = _mm512_max_ps(Lv, _mm512_min_ps(Hv, _mm512_mul_ps(_mm512_cvtepi32_ps(S), Scv)));
    _mm512_mask_cvtepi32_storeu_epi8((void *)Dst, K, _mm512_add_epi32(_mm512_cvt_roundps_epi32(
        V, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), Zv));
}}

static int {name}_Vectors(const {ta} *__restrict__ A, int K, const {tb} *__restrict__ B,
                          int Wn, const int *__restrict__ C, int CStep, int HasC,
                          {to} *__restrict__ Out, int Za, int Zb,
                          const float *__restrict__ Scale, int ScaleStep, int Zout, int Lo,
                          int Hi, int First, int Last)
{{
    /* Columns First .. Last-1 (see npukit.tiler.basic_kernels.matmul_int); returns the
       first column left to the plain loop: First where the vectors do not apply (a bias or
       scale step other than 0 and 1, Za beyond 16 bits). */
    const __m512 Lv = _mm512_set1_ps((float)(Lo - Zout)), Hv = _mm512_set1_ps((float)(Hi - Zout));
    const __m512i Zv = _mm512_set1_epi32(Zout);
    unsigned int SumA = 0;
    __m512i Corr;
    if ((CStep != 0 && CStep != 1) || (ScaleStep != 0 && ScaleStep != 1) || Za < -32512 ||
        Za > 32512)
        return First;
    for (int k = 0; k < K; k++)
        SumA += (unsigned int)((int)A[k] - Za);
    Corr = _mm512_set1_epi32((int)((unsigned int)Zb * SumA));  /* wraps */
    for (int j0 = First; j0 < Last; j0 += {VECTORS * LANES}) {{
        const __mmask16 {masks};
{starts}
        for (int k = 0; k < K; k++) {{
            const __m512i Ak = _mm512_set1_epi32(((int)A[k] - Za) & 0xFFFF);
            const {tb} *Bk = B + k * Wn + j0;
{terms}
        }}
{stores}
    }}
    return Last;
}}
#endif"""
    hand = f"""\
    int Done = First;
#ifdef NPK_AVX512
    Done = {name}_Vectors(A, K, B, Wn, C, CStep, HasC, Out, Za, Zb, Scale, ScaleStep, Zout, Lo,
                          Hi, First, Last);
#endif"""
    return code, hand
