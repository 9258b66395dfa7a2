"""ONNX Runtime's QLinearAdd on a row of 8-bit integers, 16 lanes a vector, where the compiler
targets AVX-512 (``elementwise.binary``'s integer rows: a MobileNet's or a ResNet's residual
Add). Each lane computes what ``{name}_Q`` computes for its element with A along the row:
``fma(a, rA, fma(b, rB, F))`` with the hardware's fused multiply-add (``vfmadd``: rounded once,
as ``npk_fmaf`` emulates it without libm), ``npk_rne``'s two additions, the clamp to
+-1e9 (``vmaxps`` / ``vminps`` with the value second: NaN passes, as the comparisons let it),
truncation, the clamp to ``[Lo, Hi]``; the low byte stored (the value is within Lo .. Hi).
The plain loop's compiled form emulates each fma in double precision, element by element.
"""

from __future__ import annotations

from .common import AVX512_HELPERS, LANES

# The widening of 16 bytes to int32 lanes, by the C type of the bytes.
_WIDEN = {"unsigned char": "_mm512_cvtepu8_epi32", "signed char": "_mm512_cvtepi8_epi32"}


def qadd_rows(name: str, ta: str, tb: str, to: str) -> tuple[str, str]:
    """(C of ``{name}_QAddVectors``, the C statement with which ``{name}_Row`` hands it a
    QLinearAdd row: returning what it did), or two empty strings unless A, B and Out are
    8-bit (C types ``ta``, ``tb``, ``to``)."""
    if not {ta, tb, to} <= set(_WIDEN):
        return "", ""

    def lanes(t: str, ptr: str, k: str) -> str:
        return f"_mm512_cvtepi32_ps({_WIDEN[t]}(_mm_maskz_loadu_epi8({k}, {ptr})))"

    code = f"""
{AVX512_HELPERS}
#ifdef NPK_AVX512
static inline int {name}_QAddVectors(const {ta} *__restrict__ A, const {tb} *__restrict__ B,
                                     {to} *__restrict__ Out, int N, int BCol, float Ra,
                                     float Rb, float F, int Lo, int Hi)
{{
    /* {name}_Q's QLinearAdd (A along the row, B along it or one value) lane by lane: see
       npukit.tiler.basic_kernels.qadd_rows. Returns N. */
    const __m512 Rav = _mm512_set1_ps(Ra), Rbv = _mm512_set1_ps(Rb), Fv = _mm512_set1_ps(F);
    const __m512 Rne = _mm512_set1_ps(12582912.0f), Top = _mm512_set1_ps(1e9f);
    const __m512 Bottom = _mm512_set1_ps(-1e9f);
    const __m512i Lov = _mm512_set1_epi32(Lo), Hiv = _mm512_set1_epi32(Hi);
    const __m512 One = _mm512_set1_ps(BCol || N <= 0 ? 0.0f : (float)B[0]);  /* BCol 0 */
    for (int c = 0; c < N; c += {LANES}) {{
        const __mmask16 K = npk_cols(c, N);
        __m512 Y = BCol ? {lanes(tb, "B + c", "K")} : One;
        __m512 V = _mm512_fmadd_ps({lanes(ta, "A + c", "K")}, Rav,
                                   _mm512_fmadd_ps(Y, Rbv, Fv));
        __m512i Q;
        V = _mm512_sub_ps(_mm512_add_ps(V, Rne), Rne);
        V = _mm512_min_ps(Top, _mm512_max_ps(Bottom, V));
        Q = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvttps_epi32(V), Lov), Hiv);
        _mm512_mask_cvtepi32_storeu_epi8((void *)(Out + c), K, Q);
    }}
    return N;
}}
#endif"""
    hand = f"""\
#ifdef NPK_AVX512
    if (Op == 4)  /* QLinearAdd: in vectors */
        return {name}_QAddVectors(A, B, Out, N, BCol, Ra, Rb, F, Lo, Hi);
#endif
"""
    return code, hand
