"""Softmax basic kernels, each C template next to its numpy reference: the CNN library's
fixed-point/float32 softmax (``softmax``, GAP's ``KerParSoftMax_fp`` with its Q15 exp), and
the layer kernels' float32 softmax (``layer_softmax``) and int8/uint8 softmax through a
256-entry exp table (``qsoftmax``, ``qsoftmax_table``). Arithmetic: see ``common``.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from ...c.ctype import hex_float
from ...costs import Work
from ...dtypes import int_range, is_float
from .common import (
    EXP2_POLY,
    HELPERS,
    LOG2E,
    BasicKernel,
    align,
    at_norm,
    bits_f32,
    c_signature,
    c_type,
    exp2_f32,
    exp_f32,
    layer_c_type,
    layer_suffix,
    log2_f32,
    rne,
    share_rows,
    suffix,
)

# -- softmax --------------------------------------------------------------------------------

EXP_TAYLOR = tuple(round(32768 / math.factorial(n)) for n in range(9))  # Q15 1/n!
EXP_INT = tuple(round(math.exp(-k) * 2**30) for k in range(12))  # Q30 e^-k


def exp_q15(x: np.ndarray) -> np.ndarray:
    """``e**(x / 2**15) * 2**15`` for ``x <= 0`` (int64, Q15), as GAP's ``Exp_fp_17_15``
    computes it: ``e**-k`` for the integer part from a table (Q30 here), the fraction, taken
    within 1/2 of the nearest integer, by an 8-term Taylor series in Q15 with rounded
    products; 0 below ``-11.5``."""
    y = -np.asarray(x, np.int64)
    k, f = y >> 15, y & 0x7FFF
    up = f >= 0x4000
    k, f = k + up, f - up * 0x8000
    z = -f
    term, acc = z, np.zeros_like(z)
    for c in EXP_TAYLOR[1:]:
        acc = acc + term * c
        term = at_norm(term * z, 15)
    p = at_norm(acc, 15) + EXP_TAYLOR[0]
    table = np.array(EXP_INT + (0,), np.int64)
    return np.where(k < 12, at_norm(p * table[np.minimum(k, 12)], 30), 0)


@cache
def softmax(in_dt: str, out_dt: str) -> BasicKernel:
    """A softmax over ``N`` inputs. Fixed point, as GAP's ``KerParSoftMax_fp``: the inputs,
    Q``Norm``, minus their maximum, become Q15; ``e_i = exp_q15`` (see ``exp_q15``);
    ``InvSum = 2**30 / sum e_i`` (truncated); ``Out[i] = AT_NORM(e_i * InvSum, 30 - OutQ)``
    saturated (GAP stores 32768 as -32768 then takes its absolute value, which wraps; npukit
    saturates to 32767). float32: ``exp_f32(In[i] - max) / sum``, the sum taken in order."""
    flt = is_float(in_dt)
    name = f"KerSoftMax_{suffix(in_dt, out_dt)}"
    ti, to = c_type(in_dt), c_type(out_dt)
    args = ((f"const {ti} * __restrict__", "In"), ("int", "N"), ("int", "Norm"),
            (f"{to} * __restrict__", "Out"), ("int", "OutQ"))
    if flt:
        poly = "P"
        for c in EXP2_POLY[-2::-1]:
            poly = f"({hex_float(c)} + F * {poly})" if poly != "P" else f"({hex_float(c)} + F * P)"
        helper = f"""\
    /* e**x for x <= 0: 2**T with T = x * log2(e) = K + F, K = floor(T): 2**F by a
       polynomial, 2**K from its float bits; 0 when K < -125. */
#define NPK_EXP_F32(X, R) do {{ \\
        float T = (X) * {hex_float(LOG2E)}; \\
        T = T > -200.0f ? T : -200.0f; \\
        float K = (float)(int)T; \\
        if (K > T) K = K - 1.0f; \\
        float F = T - K, P = {hex_float(EXP2_POLY[-1])}; \\
        union {{ unsigned int U; float V; }} S; \\
        P = {poly}; \\
        S.U = (unsigned int)((int)K + 127 > 0 ? (int)K + 127 : 0) << 23; \\
        (R) = K < -125.0f ? 0.0f : P * S.V; \\
    }} while (0)"""
        body = f"""\
{helper}
    (void)Norm;
    (void)OutQ;
    float M = In[0], Sum = 0.0f;
    for (int i = 1; i < N; i++) M = In[i] > M ? In[i] : M;
    for (int i = 0; i < N; i++) {{
        float E;
        NPK_EXP_F32(In[i] - M, E);
        Sum = Sum + E;
    }}
    for (int i = 0; i < N; i++) {{
        float E;
        NPK_EXP_F32(In[i] - M, E);
        Out[i] = E / Sum;
    }}
#undef NPK_EXP_F32"""
    else:
        hi = int_range(out_dt)[1]
        taylor = ", ".join(str(c) for c in EXP_TAYLOR)
        ints = ", ".join(str(c) for c in EXP_INT)
        body = f"""\
    /* exp in Q15 of X <= 0 (Q15): e**-K from a Q30 table times an 8-term Taylor series of
       the fraction, taken within 1/2 of the nearest integer; 0 below -11.5. */
    static const long long Taylor[9] = {{{taylor}}};
    static const long long IntExp[12] = {{{ints}}};
#define NPK_EXP_Q15(X, R) do {{ \\
        long long Y = -(X), K = Y >> 15, F = Y & 0x7FFF, Z, Term, Acc = 0; \\
        if (F >= 0x4000) {{ F -= 0x8000; K++; }} \\
        Z = -F; Term = Z; \\
        for (int n = 1; n < 9; n++) {{ \\
            Acc += Term * Taylor[n]; \\
            Term = (Term * Z + (1LL << 14)) >> 15; \\
        }} \\
        Acc = ((Acc + (1LL << 14)) >> 15) + Taylor[0]; \\
        (R) = K < 12 ? (Acc * IntExp[K] + (1LL << 29)) >> 30 : 0; \\
    }} while (0)"""
        body += f"""
    long long M = In[0], Sum = 0, InvSum;
    for (int i = 1; i < N; i++) M = In[i] > M ? In[i] : M;
    for (int i = 0; i < N; i++) {{
        long long D = In[i] - M, X, E;
        X = Norm <= 15 ? D * (1LL << (15 - Norm)) : (D + (1LL << (Norm - 16))) >> (Norm - 15);
        NPK_EXP_Q15(X, E);
        Sum += E;
    }}
    InvSum = (1LL << 30) / Sum;
    for (int i = 0; i < N; i++) {{
        long long D = In[i] - M, X, E, O;
        X = Norm <= 15 ? D * (1LL << (15 - Norm)) : (D + (1LL << (Norm - 16))) >> (Norm - 15);
        NPK_EXP_Q15(X, E);
        O = (E * InvSum + (1LL << (29 - OutQ))) >> (30 - OutQ);
        Out[i] = ({to})(O > {hi} ? {hi} : O);
    }}
#undef NPK_EXP_Q15"""
    src = f"""\
void {name}({', '.join(f'{t} {n}' for t, n in args)})
{{
    /* Out = softmax(In): the maximum first, exp of each input minus it, their sum, then
       each exp over the sum. Sequential: N is small. */
{body}
}}"""

    def reference(In, N, Norm, Out, OutQ):
        x = In[:N]
        if flt:
            e = exp_f32(x - x.max())
            total = np.cumsum(np.concatenate([[np.float32(0)], e]), dtype=np.float32)[-1]
            Out[:N] = e / total
            return
        d = x.astype(np.int64) - int(x.max())
        q = align(d, 15 - Norm)
        e = exp_q15(q)
        inv = (1 << 30) // int(e.sum())
        Out[:N] = np.minimum(at_norm(e * inv, 30 - OutQ), int_range(out_dt)[1])

    return BasicKernel(name, args, False, src, reference,
                       lambda N, **_: Work("softmax", 60 * N))


# -- softmax, LRN -----------------------------------------------------------------------------

def _exp_sums(In, G: int, Sg: int, D: int, Sd: int):
    """The float softmaxes' first passes: (indices of the groups' values, each value minus
    its group's maximum, their exps ``exp2_f32``, the exps summed in order)."""
    idx = np.arange(G)[:, None] * Sg + np.arange(D)[None, :] * Sd
    x = In[idx]
    # A masked score (-inf, finfo(float32).min) overflows to -inf here and exps to 0, as in
    # C; a row masked whole with -inf is NaN, as ONNX Runtime's: no warning for either.
    with np.errstate(over="ignore", invalid="ignore"):
        d = x - x.max(axis=1, keepdims=True)
        e = exp2_f32(d * LOG2E)
    s = np.zeros(G, np.float32)
    for i in range(D):
        s = s + e[:, i]
    return idx, d, e, s


@cache
def layer_softmax(dt: str) -> BasicKernel:
    """``G`` softmaxes of ``D`` values each: group g's values at ``g*Sg + i*Sd``. The maximum,
    then ``e_i = 2**((x_i - max) * log2(e))`` (``exp2_f32``) summed in order, then
    ``e_i / sum``."""
    name = f"KerSoftmaxNpk_{layer_suffix(dt)}"
    args = (("const float *__restrict__", "In"), ("float *__restrict__", "Out"), ("int", "G"),
            ("int", "Sg"), ("int", "D"), ("int", "Sd"))
    src = f"""\
{HELPERS}
void {name}({c_signature(args)})
{{
    /* Out = softmax of each group of D values: the maximum, exp of each value minus it, their
       sum, then each exp over the sum. The groups are shared among the cores. */
    int Rows = G;
{share_rows()}
    for (int g = First; g < Last; g++) {{
        const float *X = In + g * Sg;
        float *Y = Out + g * Sg, M = X[0], S = 0.0f;
        for (int i = 1; i < D; i++) M = X[i * Sd] > M ? X[i * Sd] : M;
        for (int i = 0; i < D; i++) {{
            Y[i * Sd] = npk_exp2((X[i * Sd] - M) * {hex_float(LOG2E)});
            S = S + Y[i * Sd];
        }}
        for (int i = 0; i < D; i++) Y[i * Sd] = Y[i * Sd] / S;
    }}
}}"""

    def reference(In, Out, G, Sg, D, Sd, *, core_id, core_count):
        if core_id or G <= 0:
            return
        idx, _, e, s = _exp_sums(In, G, Sg, D, Sd)
        Out[idx] = e / s[:, None]

    return BasicKernel(name, args, True, src, reference,
                       lambda G, D, **_: Work("softmax", 60 * G * D, chunks=G))


@cache
def layer_log_softmax(dt: str) -> BasicKernel:
    """ONNX's LogSoftmax of ``G`` groups of ``D`` values (group g's at ``g*Sg + i*Sd``): the
    maximum M, ``S`` the sum in order of ``2**((x_i - M) * log2(e))`` (``exp2_f32``), then
    ``(x_i - M) - log2(S) * ln 2`` (``log2_f32``; S >= 1)."""
    name = f"KerLogSoftmaxNpk_{layer_suffix(dt)}"
    args = (("const float *__restrict__", "In"), ("float *__restrict__", "Out"), ("int", "G"),
            ("int", "Sg"), ("int", "D"), ("int", "Sd"))
    ln2 = np.float32(math.log(2))
    src = f"""\
{HELPERS}
void {name}({c_signature(args)})
{{
    /* Out = log softmax of each group of D values: the maximum, the sum of the exps of the
       values minus it, then each value minus the maximum minus the log of the sum. The
       groups are shared among the cores. */
    int Rows = G;
{share_rows()}
    for (int g = First; g < Last; g++) {{
        const float *X = In + g * Sg;
        float *Y = Out + g * Sg, M = X[0], S = 0.0f, L;
        for (int i = 1; i < D; i++) M = X[i * Sd] > M ? X[i * Sd] : M;
        for (int i = 0; i < D; i++) S = S + npk_exp2((X[i * Sd] - M) * {hex_float(LOG2E)});
        L = npk_log2(S) * {hex_float(ln2)};
        for (int i = 0; i < D; i++) Y[i * Sd] = (X[i * Sd] - M) - L;
    }}
}}"""

    def reference(In, Out, G, Sg, D, Sd, *, core_id, core_count):
        if core_id or G <= 0:
            return
        idx, d, _, s = _exp_sums(In, G, Sg, D, Sd)
        Out[idx] = d - (log2_f32(s) * ln2)[:, None]

    return BasicKernel(name, args, True, src, reference,
                       lambda G, D, **_: Work("softmax", 60 * G * D, chunks=G))


@cache
def qsoftmax(dt: str) -> BasicKernel:
    """ONNX Runtime's QLinearSoftmax: ``G`` groups of ``D`` integers (group g at ``g*Sg + i*Sd``):
    with M the group's maximum, ``e_i = Table[255 - (M - x_i)]`` (``Table[k] = exp((k - 255 +
    shift) * x_scale)`` in float32), ``S`` their sum in order, ``y_i = rne(e_i * Ys / S) + Zp``
    with ``Ys = floor(1 / y_scale)`` (bits), saturated; ``rne(e_i / S * Ys)`` where ``e_i * Ys``
    overflows."""
    name = f"KerQSoftmaxNpk_{layer_suffix(dt)}"
    t = layer_c_type(dt)
    lo, hi = int_range(dt)
    args = ((f"const {t} *__restrict__", "In"), (f"{t} *__restrict__", "Out"), ("int", "G"),
            ("int", "Sg"), ("int", "D"), ("int", "Sd"), ("const float *__restrict__", "Table"),
            ("int", "Ys"), ("int", "Zp"))
    src = f"""\
{HELPERS}
void {name}({c_signature(args)})
{{
    /* Out = the quantized softmax of each group of D values (ONNX Runtime's QLinearSoftmax):
       exp from the table, shifted so that the maximum reads its last entry, their sum, then
       each over the sum. The groups are shared among the cores. */
    float Y = npk_f32(Ys);
    int Rows = G;
{share_rows()}
    for (int g = First; g < Last; g++) {{
        const {t} *X = In + g * Sg;
        {t} *O = Out + g * Sg;
        int M = X[0];
        float S = 0.0f;
        for (int i = 1; i < D; i++) M = X[i * Sd] > M ? X[i * Sd] : M;
        for (int i = 0; i < D; i++) S = S + Table[255 - (M - X[i * Sd])];
        for (int i = 0; i < D; i++) {{
            /* E * Y overflows float when one value carries most of the sum and Y is large
               (a group of one; a Relu or Clip after the softmax narrows y_scale): then E / S
               first, which gives ONNX Runtime's result. */
            float E = Table[255 - (M - X[i * Sd])], P = E * Y;
            int Q = (int)npk_rne(P <= 3.40282347e38f ? P / S : (E / S) * Y) + Zp;
            O[i * Sd] = ({t})(Q < {lo} ? {lo} : Q > {hi} ? {hi} : Q);
        }}
    }}
}}"""

    def reference(In, Out, G, Sg, D, Sd, Table, Ys, Zp, *, core_id, core_count):
        if core_id or G <= 0:
            return
        idx = np.arange(G)[:, None] * Sg + np.arange(D)[None, :] * Sd
        x = In[idx].astype(np.int64)
        e = Table[255 - (x.max(axis=1, keepdims=True) - x)]
        s = np.zeros(G, np.float32)
        for i in range(D):
            s = s + e[:, i]
        with np.errstate(over="ignore", invalid="ignore"):
            p = e * bits_f32(Ys)
            q = np.where(np.isfinite(p), p / s[:, None], (e / s[:, None]) * bits_f32(Ys))
        q = rne(q).astype(np.int64) + Zp
        Out[idx] = np.clip(q, lo, hi)

    return BasicKernel(name, args, True, src, reference,
                       lambda G, D, **_: Work("softmax", 8 * G * D, chunks=G))


def qsoftmax_table(x_scale: float, d: int) -> np.ndarray:
    """ONNX Runtime's QLinearSoftmax table: ``exp((k - 255 + shift) * x_scale)`` in double,
    stored as float32, ``shift = max(0, ln(FLT_MAX / d) - 5) / x_scale`` keeping the sum of d
    values finite."""
    fmax = float(np.finfo(np.float32).max)
    shift = max(0.0, math.log(np.float32(fmax / d)) - 5) / float(np.float32(x_scale))
    k = np.arange(256, dtype=np.float64)
    return np.exp((k - 255 + shift) * float(np.float32(x_scale))).astype(np.float32)
