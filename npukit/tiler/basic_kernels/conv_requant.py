"""The integer output pass of the convolution layers (``convolution.conv_out`` and
``conv_out_planes`` with int8 or uint8 outputs): ONNX Runtime's requantisation
(``common.requant``: ``float(acc) * scale`` clamped, rounded to nearest even, plus the zero
point) 16 lanes at a time where the compiler targets AVX-512, each lane computing what the
plain loop (``npk_requant``) computes for its output; the same bytes."""

from __future__ import annotations

from .common import LANES, c_signature
from .conv_int import SMALL_PLANE


def requant_vectors(name: str, args, to: str) -> str:
    """C of the integer ``conv_out``'s AVX-512 part: the outputs of row ``y`` whose windows
    lie inside the row, 16 at a time, each lane computing what the plain loop computes for its
    output (``npk_requant``'s float steps, then the max as ``V > M ? V : M``). Returns how
    many outputs it wrote: 0 at column strides above 2. (A float output's plain loop is left
    to the compiler, which vectorises it in a graph's call, its arguments constants.)"""
    params = c_signature(args) + ", int y"
    return f"""\
#ifdef NPK_AVX512
static inline NPK_ALWAYS_INLINE int {name}_Vectors({params})
{{
    /* Outputs x < Xv have every column of their window below Wc: 16 lanes at a time. */
    int Xv = Wc < Fx ? 0 : (Wc - Fx) / Sx + 1;
    const __m512i Even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4,
                                          2, 0);
    __m512 Scv = _mm512_set1_ps(Scale[Index]), Lv = _mm512_set1_ps((float)(Lo - Zout)),
           Hv = _mm512_set1_ps((float)(Hi - Zout)), Rne = _mm512_set1_ps(12582912.0f);
    __m512i Zv = _mm512_set1_epi32(Zout);
    (void)Oper;
    (void)OutRows;
    Xv = Xv < Wo ? Xv : Wo;
    if (Sx > 2) return 0;
    for (int x = 0; x < Xv; x += {LANES}) {{
        __mmask16 K = npk_cols(x, Xv);
        __m512i M = _mm512_setzero_si512(), V;
        int N = 0;
        for (int fy = 0; fy < Fy; fy++) {{
            int cy = (OutRow0 + y) * Sy + fy;
            const int *Line;
            if (cy >= Hc) break;
            Line = Acc + (cy - AccRow0) * Wc;
            for (int fx = 0; fx < Fx; fx++) {{
                int C = x * Sx + fx;  /* the column of lane 0 */
                __m512 F, Q;
                if (Sx == 1)
                    V = _mm512_maskz_loadu_epi32(K, Line + C);
                else  /* the even lanes of 32 columns */
                    V = _mm512_permutex2var_epi32(
                        _mm512_maskz_loadu_epi32(npk_cols(C, Wc), Line + C), Even,
                        _mm512_maskz_loadu_epi32(npk_cols(C + {LANES}, Wc), Line + C + {LANES}));
                /* npk_requant, lane by lane */
                F = _mm512_mul_ps(_mm512_cvtepi32_ps(V), Scv);
                Q = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(F, Hv, _CMP_GT_OQ), F, Hv);
                Q = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(F, Lv, _CMP_LT_OQ), Q, Lv);
                Q = _mm512_sub_ps(_mm512_add_ps(Q, Rne), Rne);
                V = _mm512_add_epi32(_mm512_cvttps_epi32(Q), Zv);
                M = N == 0 ? V : _mm512_max_epi32(V, M);
                N++;
            }}
        }}
        _mm512_mask_cvtepi32_storeu_epi8((void *)(Out + y * Wo + x), K, M);  /* ({to})M */
    }}
    return Xv;
}}
#endif"""


def requant_one_run(name: str, to: str) -> str:
    """C opening the integer ``conv_out``'s loop: where each output's window is one
    accumulator, a plane as wide as its accumulators (``Wc == Wo``: rows follow each other)
    and every row exists, this core's rows as one run of ``Out[i] = npk_requant(Acc[i],
    ...)`` (``{name}_RunVectors`` with AVX-512). Small planes (7x7, 14x14) otherwise pay a
    row's set-up for a few outputs; and the compiler's own vectorisation of the run left up
    to 95 outputs to its scalar loop, most of a 7x7 or 14x14 plane's (the output pass was a
    third of an int8 MobileNet-v2's C time)."""
    return f"""\
    /* A window of one accumulator, rows as wide as the accumulators', every row existing:
       this core's rows as one run (a plane under {SMALL_PLANE} outputs: core 0's). */
    if (Rows * Wo < {SMALL_PLANE}) {{
        First = gap_coreid() ? Rows : 0;
        Last = Rows;
    }}
    if (Fx == 1 && Fy == 1 && Sx == 1 && Sy == 1 && Wc == Wo && Oper != 2 && First < Last &&
        OutRow0 + Last <= Hc) {{
        const int *Run = Acc + (OutRow0 + First - AccRow0) * Wc;
        {to} *Dst = Out + First * Wo;
        int N = (Last - First) * Wo, i = 0;
#ifdef NPK_AVX512
        i = {name}_RunVectors(Run, Dst, N, Sc, Zout, Lo, Hi);
#endif
        for (; i < N; i++)
            Dst[i] = ({to})npk_requant(Run[i], Sc, Zout, Lo, Hi);
        return;
    }}
"""


def requant_run(name: str, to: str, size: int) -> str:
    """C of ``{name}_RunVectors``: ``Out[i] = npk_requant(Acc[i], Sc, Zout, Lo, Hi)`` for a
    run of ``N`` accumulators, 4 vectors of 16 lanes a step, then one, the last masked (no
    scalar tail); each lane ``npk_requant``'s float steps. Returns ``N``. (``size``: the
    output's bytes; its values are within Lo..Hi, so keeping their low bytes is exact.)"""
    store = {1: "_mm512_mask_cvtepi32_storeu_epi8", 2: "_mm512_mask_cvtepi32_storeu_epi16",
             4: "_mm512_mask_storeu_epi32"}[size]

    def one(k: int, mask: str) -> str:
        return f"""\
        {{
            __m512 F = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32({mask}, \
Acc + i + {k * LANES})), Scv), Q;
            Q = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(F, Hv, _CMP_GT_OQ), F, Hv);
            Q = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(F, Lv, _CMP_LT_OQ), Q, Lv);
            Q = _mm512_sub_ps(_mm512_add_ps(Q, Rne), Rne);
            {store}((void *)(Out + i + {k * LANES}), {mask}, \
_mm512_add_epi32(_mm512_cvttps_epi32(Q), Zv));
        }}"""
    steps = "\n".join(one(k, "All") for k in range(4))
    return f"""\
#ifdef NPK_AVX512
static inline NPK_ALWAYS_INLINE int {name}_RunVectors(const int *__restrict__ Acc,
    {to} *__restrict__ Out, int N, float Sc, int Zout, int Lo, int Hi)
{{
    /* npk_requant lane by lane (as {name}_Vectors computes it) */
    const __m512 Scv = _mm512_set1_ps(Sc), Lv = _mm512_set1_ps((float)(Lo - Zout)),
                 Hv = _mm512_set1_ps((float)(Hi - Zout)), Rne = _mm512_set1_ps(12582912.0f);
    const __m512i Zv = _mm512_set1_epi32(Zout);
    const __mmask16 All = (__mmask16)0xFFFF;
    int i = 0;
    for (; i + {4 * LANES} <= N; i += {4 * LANES}) {{
{steps}
    }}
    for (; i < N; i += {LANES}) {{
        const __mmask16 K = npk_cols(i, N);
{one(0, "K")}
    }}
    return N;
}}
#endif"""


def planes_runs(name: str, to: str) -> str:
    """C for the integer ``conv_out_planes`` (``name``: its one-plane ``conv_out``), a window
    of one accumulator and planes as wide as their accumulators: each plane one run
    (``{name}_RunVectors``), the planes shared among the cores (a core's share of a 7x7 or
    14x14 plane's rows is a row or two, each a call of its own)."""
    return f"""\
    if (Fx == 1 && Fy == 1 && Sx == 1 && Sy == 1 && Wc == Wo && Oper != 2 && OutRows > 0 &&
        OutRow0 + OutRows <= Hc) {{
        int Chunk = (Feat + gap_ncore() - 1) / gap_ncore(), F0 = gap_coreid() * Chunk;
        int F1 = F0 + Chunk < Feat ? F0 + Chunk : Feat;
        for (int o = F0; o < F1; o++) {{
            const int *Run = Acc + (o * AccRows + OutRow0 - AccRow0) * Wc;
            {to} *Dst = Out + o * OutRows * Wo;
            int N = OutRows * Wo, i = 0;
#ifdef NPK_AVX512
            i = {name}_RunVectors(Run, Dst, N, Scale[o], Zout, Lo, Hi);
#endif
            for (; i < N; i++)
                Dst[i] = ({to})npk_requant(Run[i], Scale[o], Zout, Lo, Hi);
        }}
        return;
    }}"""
