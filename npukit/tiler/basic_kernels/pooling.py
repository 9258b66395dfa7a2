"""Pooling basic kernels, each C template next to its numpy reference: the CNN library's
fused reduction, activation and pooling (``pool_act``, GAP's ``PoolFactor`` average), and the
layer kernels' windowed max/average pooling (``pool``) and global pooling (``global_sum``,
``global_out``). Arithmetic: see ``common``.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ...arith import wrap32
from ...costs import Work
from ...dtypes import int_range, is_float
from .common import (
    AVX512_HELPERS,
    HELPERS,
    LANES,
    POOL_AVG,
    POOL_MAX,
    BasicKernel,
    at_norm,
    bits_f32,
    c_signature,
    c_type,
    c_unused,
    layer_c_type,
    layer_suffix,
    requant,
    rne,
    share_rows,
    suffix,
    zero_window,
)

# -- reduction, activation and pooling ------------------------------------------------------

@cache
def pool_family(Oper: int) -> str:
    """The cost family of a pooling (``npukit.costs``): a max or an average (``Oper``)."""
    return "pool_max" if Oper == POOL_MAX else "pool_avg"


def pool_act(conv_dt: str, out_dt: str) -> BasicKernel:
    """From a tile of ``Hc`` x ``Wc`` convolution results to ``Ho`` x ``Wo`` outputs: each
    result is normalised and clipped (``clip(AT_NORM(v, Norm), LB, UB)``: the double
    precision reduction and the activation), then pooled over an ``Fy`` x ``Fx`` window
    (``Oper`` 0: none, 1: max, 2: average), positions outside the tile reading 0. float32:
    ``Relu`` != 0 maps v to ``v > 0 ? v : 0``; the average is the window sum / (Fx*Fy)."""
    flt = is_float(out_dt)
    name = f"KerPoolAct_{suffix(conv_dt, out_dt)}"
    tc, to = c_type(conv_dt), c_type(out_dt)
    args = ((f"const {tc} * __restrict__", "In"), ("int", "Wc"), ("int", "Hc"),
            (f"{to} * __restrict__", "Out"), ("int", "Wo"), ("int", "Ho"), ("int", "Fx"),
            ("int", "Fy"), ("int", "Sx"), ("int", "Sy"), ("int", "Dx"), ("int", "Dy"),
            ("int", "PadL"), ("int", "PadT"), ("int", "Oper"), ("int", "Norm"), ("int", "LB"),
            ("int", "UB"))
    if flt:
        body = """\
            float M = 0.0f, S = 0.0f;
            for (int fy = 0; fy < Fy; fy++) {
                int cy = y * Sy - PadT + fy * Dy;
                for (int fx = 0; fx < Fx; fx++) {
                    int cx = x * Sx - PadL + fx * Dx;
                    float V = (cy >= 0 && cy < Hc && cx >= 0 && cx < Wc) ? In[cy * Wc + cx] : 0.0f;
                    if (LB >= 0) V = V > 0.0f ? V : 0.0f;  /* ReLU */
                    M = (fy == 0 && fx == 0) || V > M ? V : M;
                    S = S + V;
                }
            }
            Out[y * Wo + x] = Oper == 2 ? S / (float)(Fx * Fy) : M;"""
        unused = "    (void)Norm;\n    (void)UB;\n"
    else:
        lo, hi = int_range(out_dt)
        body = f"""\
            long long M = 0, S = 0;
            for (int fy = 0; fy < Fy; fy++) {{
                int cy = y * Sy - PadT + fy * Dy;
                for (int fx = 0; fx < Fx; fx++) {{
                    int cx = x * Sx - PadL + fx * Dx;
                    long long V = (cy >= 0 && cy < Hc && cx >= 0 && cx < Wc) ? In[cy * Wc + cx] : 0;
                    V = Norm > 0 ? (V + (1LL << (Norm - 1))) >> Norm : V;
                    V = V < LB ? LB : V > UB ? UB : V;
                    M = (fy == 0 && fx == 0) || V > M ? V : M;
                    S += V;
                }}
            }}
            if (Oper == 2) {{
                S = (S * ((1 << 16) / (Fx * Fy)) + (1LL << 15)) >> 16;
                M = S < {lo} ? {lo} : S > {hi} ? {hi} : S;
            }}
            Out[y * Wo + x] = ({to})M;"""
        unused = ""
    src = f"""\
void {name}({', '.join(f'{t} {n}' for t, n in args)})
{{
    /* Out[y][x] pools the normalised, clipped In[y*Sy - PadT + fy*Dy][x*Sx - PadL + fx*Dx]
       of its window; a position outside the Hc x Wc tile reads 0. Rows are shared among
       the cores. */
{unused}    int Rows = Ho;
{share_rows()}
    for (int y = First; y < Last; y++)
        for (int x = 0; x < Wo; x++) {{
{body}
        }}
}}"""

    def reference(In, Wc, Hc, Out, Wo, Ho, Fx, Fy, Sx, Sy, Dx, Dy, PadL, PadT, Oper, Norm, LB,
                  UB, *, core_id, core_count):
        if core_id or Ho <= 0 or Wo <= 0:
            return
        rows, cols = (Ho - 1) * Sy + (Fy - 1) * Dy + 1, (Wo - 1) * Sx + (Fx - 1) * Dx + 1
        c = In[:Wc * Hc].reshape(Hc, Wc)
        if flt:
            v = zero_window(c, PadT, PadL, rows, cols)
            if LB >= 0:
                v = np.where(v > 0, v, np.float32(0))
        else:
            padded = zero_window(c.astype(np.int64), PadT, PadL, rows, cols)
            v = np.clip(at_norm(padded, Norm), LB, UB)
        m = s = None
        for fy in range(Fy):
            for fx in range(Fx):
                w = v[fy * Dy:fy * Dy + (Ho - 1) * Sy + 1:Sy,
                      fx * Dx:fx * Dx + (Wo - 1) * Sx + 1:Sx]
                m = w if m is None else np.where(w > m, w, m)
                s = w if s is None else s + w
        if Oper == POOL_AVG:
            if flt:
                res = s / np.float32(Fx * Fy)
            else:
                res = np.clip(at_norm(s * ((1 << 16) // (Fx * Fy)), 16), *int_range(out_dt))
        else:
            res = m
        Out[:Ho * Wo] = res.reshape(-1)

    return BasicKernel(name, args, True, src, reference,
                       lambda Wo, Ho, Fx, Fy, Oper, **_: Work(
                           pool_family(Oper), Wo * Ho * Fx * Fy, 2 * Wo * Ho, chunks=Ho))


# -- pooling ----------------------------------------------------------------------------------

def _pool_taps_f32(In: str, Out: str) -> str:
    """C of one float32 output of ``pool`` (input plane ``In``, output plane ``Out``): its
    taps' maximum and sum, the real taps (N) and those inside the padded plane (Nh rows, Nw
    columns)."""
    low = "-3.40282347e+38f"
    return f"""\
            float M = {low}, S = 0.0f;
            int N = 0, Nh = 0, Nw = 0;
            for (int fy = 0; fy < Fy; fy++) {{
                int P = (OutRow0 + y) * Sy + fy * Dy, R = P - PadT, L = P - InRow0;
                if (R < Hreal + PadB) Nh++;
                if (R < 0 || R >= Hreal || L < 0 || L >= InRows) continue;
                for (int fx = 0; fx < Fx; fx++) {{
                    int C = x * Sx - PadL + fx * Dx;
                    if (C < 0 || C >= W) continue;
                    M = {In}[L * W + C] > M ? {In}[L * W + C] : M;
                    S = S + {In}[L * W + C];
                    N++;
                }}
            }}
            for (int fx = 0; fx < Fx; fx++)
                if (x * Sx - PadL + fx * Dx < W + PadR) Nw++;
            if (Oper == 1) {Out}[y * Wo + x] = M;
            else {Out}[y * Wo + x] = N == 0 ? 0.0f : S / (float)(CountPad ? Nh * Nw : N);"""


def _pool_taps_int(dt: str, t: str, In: str, Out: str) -> str:
    """C of one int8/uint8 output of ``pool`` (input plane ``In``, output plane ``Out``):
    its taps' maximum, or their dequantized average requantised (ONNX Runtime's
    QLinearAveragePool)."""
    lo, hi = int_range(dt)
    return f"""\
            int M = {lo}, N = 0;
            float S = 0.0f, Q;
            for (int fy = 0; fy < Fy; fy++) {{
                int P = (OutRow0 + y) * Sy + fy * Dy, R = P - PadT, L = P - InRow0;
                if (R < 0 || R >= Hreal || L < 0 || L >= InRows) continue;
                for (int fx = 0; fx < Fx; fx++) {{
                    int C = x * Sx - PadL + fx * Dx, V;
                    if (C < 0 || C >= W) continue;
                    V = {In}[L * W + C];
                    M = V > M ? V : M;
                    S = S + Xs * (float)(V - InZp);
                    N++;
                }}
            }}
            if (Oper == 1) {{
                {Out}[y * Wo + x] = ({t})M;
                continue;
            }}
            Q = npk_rne((N == 0 ? 0.0f : S / (float)(CountPad ? Fx * Fy : N)) / Ys + (float)OutZp);
            Q = Q < {lo}.0f ? {lo}.0f : Q > {hi}.0f ? {hi}.0f : Q;
            {Out}[y * Wo + x] = ({t})(int)Q;"""


def _max_row_vectors(name: str, dt: str, t: str) -> str:
    """C of ``{name}_MaxRow``: one output row of an int8/uint8 max pooling at column stride 1
    (64 outputs a vector) or 2 (32: the even bytes of 64 columns), each byte the maximum of
    its taps; a tap's bytes outside the row, and its row outside the real data or the tile,
    are the type's lowest value, as the plain loop starts from it and skips them: the same
    bytes."""
    lo, _ = int_range(dt)
    mx = "_mm512_max_epi8" if dt == "int8" else "_mm512_max_epu8"
    return f"""
{AVX512_HELPERS}
#ifdef NPK_AVX512
/* The bytes i of a vector at columns C .. C+63 of a row of N bytes for which 0 <= C+i < N. */
static inline __mmask64 {name}_Bytes(int C, int N)
{{
    int Lo = C < 0 ? -C : 0, Hi = N - C;
    Lo = Lo < 64 ? Lo : 64;
    Hi = Hi < Lo ? Lo : Hi < 64 ? Hi : 64;
    return (Hi == 64 ? ~0ULL : (1ULL << Hi) - 1ULL) & ~(Lo == 64 ? ~0ULL : (1ULL << Lo) - 1ULL);
}}
static inline NPK_ALWAYS_INLINE void {name}_MaxRow(const {t} *PlaneIn, {t} *Row, int W,
    int InRow0, int InRows, int Hreal, int PadT, int Wo, int Y, int Fx, int Fy, int Sx,
    int Sy, int Dx, int Dy, int PadL)
{{
    /* Output row Y (Row), outputs x .. x+63 (x .. x+31 at stride 2) at a time: byte i of a
       tap's vector is column x*Sx - PadL + fx*Dx + i, so output x + i reads byte Sx*i. */
    const __m512i Low = _mm512_set1_epi8((char){lo});
    int Step = Sx == 1 ? 64 : 32;
    for (int x = 0; x < Wo; x += Step) {{
        __m512i M = Low;
        for (int fy = 0; fy < Fy; fy++) {{
            int P = Y * Sy + fy * Dy, R = P - PadT, L = P - InRow0;
            const {t} *Line;
            if (R < 0 || R >= Hreal || L < 0 || L >= InRows) continue;
            Line = PlaneIn + L * W;
            for (int fx = 0; fx < Fx; fx++) {{
                int C = x * Sx - PadL + fx * Dx;
                M = {mx}(M, _mm512_mask_loadu_epi8(Low, {name}_Bytes(C, W), Line + C));
            }}
        }}
        if (Sx == 1)
            _mm512_mask_storeu_epi8(Row + x, {name}_Bytes(x, Wo), M);
        else  /* the even bytes: the low byte of each 16-bit lane */
            _mm256_mask_storeu_epi8(Row + x, (__mmask32){name}_Bytes(x, Wo),
                                    _mm512_cvtepi16_epi8(M));
    }}
}}
#endif"""


def _max_row_vectors_f32(name: str) -> str:
    """C of ``{name}_MaxRow``: one output row of a float32 max pooling at column stride 1 or
    2, 16 outputs a vector (at stride 2 the even lanes of 32 columns). As the plain loop: the
    taps in (fy, fx) order, M = V > M ? V : M from the lowest float (``vmaxps`` of V and M
    gives M when either is NaN or they are equal, so a NaN tap never wins and of -0.0 and 0.0
    the first stays); a tap's lanes outside the row keep M, as the plain loop skips them. The
    plain loop took a sixth of squeezenet1_1's float32 time on the host."""
    return f"""
{AVX512_HELPERS}
#ifdef NPK_AVX512
static inline NPK_ALWAYS_INLINE void {name}_MaxRow(const float *PlaneIn, float *Row, int W,
    int InRow0, int InRows, int Hreal, int PadT, int Wo, int Y, int Fx, int Fy, int Sx,
    int Sy, int Dx, int Dy, int PadL)
{{
    /* Output row Y (Row), outputs x .. x+15 at a time: lane i of a tap reads column
       (x + i)*Sx - PadL + fx*Dx. */
    const __m512 Low = _mm512_set1_ps(-3.40282347e+38f);
    for (int x = 0; x < Wo; x += {LANES}) {{
        __m512 M = Low;
        for (int fy = 0; fy < Fy; fy++) {{
            int P = Y * Sy + fy * Dy, R = P - PadT, L = P - InRow0;
            const float *Line;
            if (R < 0 || R >= Hreal || L < 0 || L >= InRows) continue;
            Line = PlaneIn + L * W;
            for (int fx = 0; fx < Fx; fx++) {{
                int C = x * Sx - PadL + fx * Dx;
                __mmask16 K = Sx == 1 ? npk_cols(C, W) : npk_cols_step(C, W, 2);
                __m512 V = Sx == 1 ? _mm512_maskz_loadu_ps(K, Line + C)
                                   : npk_even_ps(Line + C, npk_cols(C, W),
                                                 npk_cols(C + {LANES}, W));
                M = _mm512_mask_max_ps(M, K, V, M);
            }}
        }}
        _mm512_mask_storeu_ps(Row + x, npk_cols(x, Wo), M);
    }}
}}
#endif"""


@cache
def pool(dt: str) -> BasicKernel:
    """Max (``Oper`` 1) or average (2) pooling over ``Fy`` x ``Fx`` taps at dilations ``Dy``,
    ``Dx``: tap (fy, fx) of output (y, x) reads padded row ``p = (OutRow0 + y)*Sy + fy*Dy``
    (tile line ``p - InRow0``, real row ``p - PadT``) and column ``x*Sx - PadL + fx*Dx``.
    Max takes the taps on real data (the type's lowest value when none is). float32 average,
    as ONNX Runtime: the sum in (fy, fx) order over real taps, divided by the real taps
    (``CountPad`` 0) or by the taps inside the padded plane (``CountPad`` 1: rows below
    ``Hreal + PadB``, columns below ``W + PadR``). Integer average, as ONNX Runtime's
    QLinearAveragePool: the dequantized taps ``InScale * (x - InZp)`` summed, divided by the
    real taps or by ``Fx*Fy``, then ``clamp(rne(avg / OutScale + OutZp))``.

    A call pools the ``Feat`` planes of a tile of features (``InRows`` x ``W`` inputs and
    ``OutRows`` x ``Wo`` outputs each, one after the other); the cores share the rows of all
    of them, so a global pooling's one row per plane still keeps every core busy."""
    flt = is_float(dt)
    name = f"KerPoolNpk_{layer_suffix(dt)}"
    t = layer_c_type(dt)
    args = ((f"const {t} *__restrict__", "In"), ("int", "W"), ("int", "InRow0"),
            ("int", "InRows"), ("int", "Hreal"), ("int", "PadT"), (f"{t} *__restrict__", "Out"),
            ("int", "Wo"), ("int", "OutRow0"), ("int", "OutRows"), ("int", "Fx"), ("int", "Fy"),
            ("int", "Sx"), ("int", "Sy"), ("int", "Dx"), ("int", "Dy"), ("int", "PadL"),
            ("int", "PadB"), ("int", "PadR"), ("int", "Oper"), ("int", "CountPad"),
            ("int", "InScale"), ("int", "InZp"), ("int", "OutScale"), ("int", "OutZp"),
            ("int", "Feat"))
    if flt:
        body = _pool_taps_f32("PlaneIn", "PlaneOut")
        unused = c_unused("InScale", "InZp", "OutScale", "OutZp")
        vectors = _max_row_vectors_f32(name)
    else:
        body = _pool_taps_int(dt, t, "PlaneIn", "PlaneOut")
        unused = (c_unused("PadB", "PadR") +
                  "    float Xs = npk_f32(InScale), Ys = npk_f32(OutScale);\n")
        vectors = _max_row_vectors(name, dt, t)
    max_rows = f"""
#ifdef NPK_AVX512
        if (Oper == 1 && (Sx == 1 || Sx == 2)) {{
            {name}_MaxRow(PlaneIn, PlaneOut + y * Wo, W, InRow0, InRows, Hreal, PadT, Wo,
                          OutRow0 + y, Fx, Fy, Sx, Sy, Dx, Dy, PadL);
            continue;
        }}
#endif"""
    src = f"""\
{HELPERS}{vectors}
void {name}({c_signature(args)})
{{
    /* Out[y][x] = max or average of the taps of its window (see the module's pool()): padded
       row (OutRow0 + y)*Sy + fy*Dy, column x*Sx - PadL + fx*Dx. The rows of the Feat planes
       (row g: row g % OutRows of plane g / OutRows) are shared among the cores. */
{unused}    int Rows = Feat * OutRows;
{share_rows()}
    for (int g = First; g < Last; g++) {{
        int y = g % OutRows, Plane = g / OutRows;
        const {t} *PlaneIn = In + Plane * InRows * W;
        {t} *PlaneOut = Out + Plane * OutRows * Wo;{max_rows}
        for (int x = 0; x < Wo; x++) {{
{body}
        }}
    }}
}}"""

    def reference(In, W, InRow0, InRows, Hreal, PadT, Out, Wo, OutRow0, OutRows, *rest,
                  core_id, core_count):
        *taps, feat = rest
        if core_id or OutRows <= 0 or feat <= 0:
            return
        planes(In, W, InRow0, InRows, Hreal, PadT, Out, Wo, OutRow0, OutRows, feat, *taps)

    def planes(In, W, InRow0, InRows, Hreal, PadT, Out, Wo, OutRow0, OutRows, feat, Fx, Fy,
               Sx, Sy, Dx, Dy, PadL, PadB, PadR, Oper, CountPad, InScale, InZp, OutScale,
               OutZp):
        """Every plane at once, tap by tap (each output's sums in the C's order)."""
        x = In[:feat * InRows * W].reshape(feat, InRows, W)
        out = Out[:feat * OutRows * Wo].reshape(feat, OutRows, Wo)
        ys, xs = OutRow0 + np.arange(OutRows), np.arange(Wo)
        if flt:
            m = np.full((OutRows, Wo), np.float32(-3.40282347e+38), np.float32)
            s = np.zeros((OutRows, Wo), np.float32)
        else:
            m = np.full((OutRows, Wo), int_range(dt)[0], np.int64)
            s = np.zeros((OutRows, Wo), np.float32)
            xs_, ys_ = bits_f32(InScale), bits_f32(OutScale)
        n = np.zeros((OutRows, Wo), np.int64)
        nh = np.zeros(OutRows, np.int64)
        nw = np.zeros(Wo, np.int64)
        for fy in range(Fy):
            p = ys * Sy + fy * Dy
            r, line = p - PadT, p - InRow0
            nh += r < Hreal + PadB
            okr = (r >= 0) & (r < Hreal) & (line >= 0) & (line < InRows)
            for fx in range(Fx):
                c = xs * Sx - PadL + fx * Dx
                if fy == 0:
                    nw += c < W + PadR
                ok = okr[:, None] & ((c >= 0) & (c < W))[None, :]
                v = x[:, np.clip(line, 0, InRows - 1)[:, None], np.clip(c, 0, W - 1)[None, :]]
                if flt:
                    m = np.where(ok & (v > m), v, m)
                    s = np.where(ok, s + v, s)
                else:
                    v = v.astype(np.int64)
                    m = np.where(ok & (v > m), v, m)
                    s = np.where(ok, s + xs_ * (v - InZp).astype(np.float32), s)
                n += ok
        if Oper == POOL_MAX:
            out[...] = m
        elif flt:
            div = (nh[:, None] * nw[None, :]) if CountPad else n
            out[...] = np.where(n == 0, np.float32(0), s / np.maximum(div, 1).astype(np.float32))
        else:
            div = np.full_like(n, Fx * Fy) if CountPad else n
            avg = np.where(n == 0, np.float32(0), s / np.maximum(div, 1).astype(np.float32))
            q = rne(avg / ys_ + np.float32(OutZp))
            lo, hi = int_range(dt)
            out[...] = np.clip(q, lo, hi).astype(np.int64)

    def cost(Wo, OutRows, Fx, Fy, Oper, Feat, **_):
        rows = Feat * OutRows
        return Work(pool_family(Oper), Wo * rows * Fx * Fy, 4 * Wo * rows, chunks=rows)

    return BasicKernel(name, args, True, src, reference, cost)


@cache
def global_sum(dt: str) -> BasicKernel:
    """``Sum[0] = (Tile == 0 ? 0 : Sum[0]) + In[0] + ... + In[W*H-1]`` in order (float32), or
    the integer sum in a wrapping int32: a tile's contribution to a global average."""
    flt = is_float(dt)
    acc_dt = "float32" if flt else "int32"
    name = f"KerGlobalSumNpk_{layer_suffix(dt)}"
    t, ta = layer_c_type(dt), layer_c_type(acc_dt)
    args = ((f"const {t} *__restrict__", "In"), ("int", "W"), ("int", "H"),
            (f"{ta} *__restrict__", "Sum"), ("int", "Tile"))
    add = "S = S + In[i];" if flt else "S = (int)((unsigned int)S + (unsigned int)In[i]);"
    src = f"""\
void {name}({c_signature(args)})
{{
    /* Sum[0] accumulates the W*H values of the tile in order; the first tile starts at 0. */
    {ta} S = Tile == 0 ? 0 : Sum[0];
    for (int i = 0; i < W * H; i++) {add}
    Sum[0] = S;
}}"""

    def reference(In, W, H, Sum, Tile):
        s = Sum[0] if Tile else (np.float32(0) if flt else 0)
        if flt:
            s = np.cumsum(np.concatenate([[s], In[:W * H]]), dtype=np.float32)[-1]
        else:
            s = int(wrap32(int(s) + int(In[:W * H].astype(np.int64).sum())))
        Sum[0] = s

    return BasicKernel(name, args, False, src, reference,
                       lambda W, H, **_: Work("pool_avg", W * H, 10))


@cache
def global_out(dt: str) -> BasicKernel:
    """The mean of ``Count`` values from their sum: float32 ``Sum / Count``; integers as ONNX
    Runtime's QLinearGlobalAveragePool, ``requant(Sum - InZp*Count, InScale / (OutScale *
    Count), OutZp)`` with the scale computed by the importer (``Scale`` bits)."""
    flt = is_float(dt)
    acc_dt = "float32" if flt else "int32"
    name = f"KerGlobalOutNpk_{layer_suffix(dt)}"
    t, ta = layer_c_type(dt), layer_c_type(acc_dt)
    args = ((f"const {ta} *__restrict__", "Sum"), ("int", "Count"), (f"{t} *__restrict__", "Out"),
            ("int", "InZp"), ("int", "Scale"), ("int", "OutZp"))
    if flt:
        body = c_unused("InZp", "Scale", "OutZp") + "    Out[0] = Sum[0] / (float)Count;"
    else:
        lo, hi = int_range(dt)
        body = (f"    Out[0] = ({t})npk_requant((int)((unsigned int)Sum[0] - (unsigned int)"
                f"(InZp * Count)), npk_f32(Scale), OutZp, {lo}, {hi});")
    src = f"""\
{HELPERS}
void {name}({c_signature(args)})
{{
    /* The average of Count values from their sum. */
{body}
}}"""

    def reference(Sum, Count, Out, InZp, Scale, OutZp):
        if flt:
            Out[0] = Sum[0] / np.float32(Count)
        else:
            Out[0] = requant(wrap32(int(Sum[0]) - InZp * Count), bits_f32(Scale), OutZp,
                             *int_range(dt))

    return BasicKernel(name, args, False, src, reference,
                       lambda **_: Work("pool_avg", 0, 20))
