"""Basic kernels for the layers the GAP AutoTiler's CNN library lacks (``cnn_more``): each has
its C source, a numpy reference that computes the same values and a cost in cycles, in the
style of ``cnn_kernels``. Data are float32, int8 or uint8 (int32 accumulators and biases).

Arithmetic, the same in C and in numpy, operation for operation:

- **float32**: every operation rounds to float32 (the C is compiled with
  ``-ffp-contract=off``); sums run in the order the docstrings give; ``exp``, ``log`` and
  ``pow`` are the polynomials of ``exp2_f32`` and ``log2_f32`` (no libm), so the simulator and
  the C agree bit for bit.
- **integers**: products of zero-point-corrected 8-bit values are summed in an int32
  accumulator that wraps (unsigned arithmetic in C); requantisation is ONNX Runtime's CPU
  one (``MlasRequantizeOutput``): ``q = clamp(rne(float(acc) * scale)) + zero_point``, the
  product in float32 and the rounding to nearest, ties to even (``rne``).
- Float parameters (scales, activation constants) travel as their IEEE-754 bits in ``int``
  arguments (``f32_bits``), since immediates are integers.

Names follow GAP's (``KerConvNpk_fl``: ``fl`` float32, ``fps`` int8, ``u8`` uint8, ``fpd``
int32; mixed types list each operand's code). Every kernel is self-contained C; the helpers
they share are defined once behind an include guard.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from ..arith import wrap32
from ..c.ctype import hex_float
from ..dtypes import FACTS, int_range, is_float
from ..errors import DTypeError
from .cnn_kernels import EXP2_POLY, LOG2E, BasicKernel, _rows, exp2_f32

CODES = {"int8": "fps", "uint8": "u8", "int32": "fpd", "float32": "fl"}

# Activation codes (float layers; integer layers fold their activation into a clamp).
ACT_NONE, ACT_RELU, ACT_LEAKY, ACT_CLIP, ACT_SIGMOID, ACT_TANH = range(6)
# Unary operations beyond the activations.
UN_QUANT, UN_DEQUANT = 6, 7
# Binary operations.
BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV, BIN_QADD, BIN_QMUL = range(6)
# Pooling.
POOL_NONE, POOL_MAX, POOL_AVG = 0, 1, 2
# Padding modes (ONNX Pad).
PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP = range(4)

# log2(m) = T * sum_k c_k S**k with T = (m-1)/(m+1), S = T*T: c_k = (2 / ln 2) / (2k + 1).
LOG2_POLY = tuple(np.float32(2 / math.log(2) / (2 * k + 1)) for k in range(8))
TANH_POLY = (np.float32(-1 / 3), np.float32(2 / 15), np.float32(-17 / 315))
RNE_MAGIC = np.float32(12582912.0)  # 1.5 * 2**23


def code(dt) -> str:
    name = np.dtype(dt).name
    if name not in CODES:
        raise DTypeError(f"npukit layers: no kernels for {name}; supported: {list(CODES)}")
    return CODES[name]


def suffix(*dtypes) -> str:
    """GAP's type suffix: one code when every operand has the same type, else one each."""
    codes = [code(d) for d in dtypes]
    return codes[0] if len(set(codes)) == 1 else "_".join(codes)


def c_type(dt) -> str:
    """The GAP spelling of ``dt``'s C type (``npukit.dtypes.FACTS``) for the types these
    kernels support."""
    code(dt)
    return FACTS[np.dtype(dt).name].gap_c_type


# -- shared arithmetic: numpy twins of the C helpers ----------------------------------------

def f32_bits(v: float) -> int:
    """The IEEE-754 bits of ``float32(v)`` as a signed int (how a float parameter travels)."""
    return int(np.array(v, np.float32).view(np.int32))


def bits_f32(b: int) -> np.float32:
    return np.array(b, np.int32).view(np.float32)[()]


def rne(v: np.ndarray) -> np.ndarray:
    """Round to nearest, ties to even, in float32 (``(v + 1.5*2**23) - 1.5*2**23``; |v| < 2**22)."""
    v = np.asarray(v, np.float32)
    return (v + RNE_MAGIC) - RNE_MAGIC


def requant(acc: np.ndarray, scale, zp: int, lo: int, hi: int) -> np.ndarray:
    """ONNX Runtime's requantisation: ``clamp(float(acc) * scale, lo - zp, hi - zp)`` rounded
    to nearest even, plus ``zp`` (int64 result)."""
    v = np.asarray(acc, np.int64).astype(np.int32).astype(np.float32) * np.float32(scale)
    v = np.minimum(np.maximum(v, np.float32(lo - zp)), np.float32(hi - zp))
    return rne(v).astype(np.int64) + zp


def quantize(x: np.ndarray, scale, zp: int, lo: int, hi: int) -> np.ndarray:
    """ONNX Runtime's QuantizeLinear: ``x / scale`` clamped, rounded to nearest even, plus zp."""
    v = np.asarray(x, np.float32) / np.float32(scale)
    v = np.minimum(np.maximum(v, np.float32(lo - zp)), np.float32(hi - zp))
    return rne(v).astype(np.int64) + zp


def log2_f32(v: np.ndarray) -> np.ndarray:
    """``log2(v)`` for positive normal float32 ``v``: the exponent plus the atanh series of
    the mantissa taken in [sqrt(1/2), sqrt(2))."""
    v = np.asarray(v, np.float32)
    u = v.view(np.uint32)
    e = (u >> 23).astype(np.int32) - 127
    m = ((u & np.uint32(0x007FFFFF)) | np.uint32(0x3F800000)).view(np.float32)
    big = m > np.float32(1.41421356)
    m = np.where(big, m * np.float32(0.5), m)
    e = e + big
    t = (m - np.float32(1)) / (m + np.float32(1))
    s = t * t
    p = np.full(s.shape, LOG2_POLY[-1], np.float32)
    for c in LOG2_POLY[-2::-1]:
        p = c + s * p
    return (e.astype(np.float32) + t * p).astype(np.float32)


def sigmoid_f32(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + e**-x)`` with ``e**-|x|`` from ``exp2_f32``."""
    x = np.asarray(x, np.float32)
    e = exp2_f32(-np.abs(x) * LOG2E)
    r = np.float32(1) / (np.float32(1) + e)
    return np.where(x >= 0, r, e / (np.float32(1) + e)).astype(np.float32)


def tanh_f32(x: np.ndarray) -> np.ndarray:
    """``tanh``: an odd Taylor polynomial below 1/16, ``(1 - e) / (1 + e)`` with
    ``e = e**(-2|x|)`` above."""
    x = np.asarray(x, np.float32)
    a = np.abs(x)
    s = x * x
    p = TANH_POLY[2]
    p = TANH_POLY[1] + s * p
    p = TANH_POLY[0] + s * p
    small = x + x * (s * p)
    e = exp2_f32(-(a + a) * LOG2E)
    big = (np.float32(1) - e) / (np.float32(1) + e)
    big = np.where(x < 0, -big, big)
    return np.where(a < np.float32(0.0625), small, big).astype(np.float32)


def activate(v: np.ndarray, act: int, p0: int, p1: int) -> np.ndarray:
    """A float activation (``ACT_*``) with its parameters as bits."""
    v = np.asarray(v, np.float32)
    if act == ACT_RELU:
        return np.where(v > 0, v, np.float32(0))
    if act == ACT_LEAKY:
        return np.where(v >= 0, v, v * bits_f32(p0))
    if act == ACT_CLIP:
        lo, hi = bits_f32(p0), bits_f32(p1)
        return np.where(v < lo, lo, np.where(v > hi, hi, v)).astype(np.float32)
    if act == ACT_SIGMOID:
        return sigmoid_f32(v)
    if act == ACT_TANH:
        return tanh_f32(v)
    return v


def _horner(coefs, var: str, acc: str) -> str:
    """C statements: ``acc = c_n; acc = c_{n-1} + var * acc; ...`` (float32 Horner)."""
    lines = [f"{acc} = {hex_float(coefs[-1])};"]
    lines += [f"{acc} = {hex_float(c)} + {var} * {acc};" for c in coefs[-2::-1]]
    return " ".join(lines)


HELPERS = f"""\
#ifndef NPK_LAYER_HELPERS
#define NPK_LAYER_HELPERS
/* ---- Helpers of npukit's layer kernels (float32 only, no libm: the same operations as the
   numpy references) ---- */
/* A float parameter travels as its IEEE-754 bits in an int. */
static inline float npk_f32(int Bits)
{{
    union {{ int I; float F; }} U;
    U.I = Bits;
    return U.F;
}}
/* Round to nearest, ties to even, for |V| < 2^22: (V + 1.5*2^23) - 1.5*2^23. */
static inline float npk_rne(float V)
{{
    return (V + 12582912.0f) - 12582912.0f;
}}
/* ONNX Runtime's requantisation: clamp(float(Acc) * Scale, Lo - Zp, Hi - Zp), rounded to
   nearest even, plus Zp. */
static inline int npk_requant(int Acc, float Scale, int Zp, int Lo, int Hi)
{{
    float V = (float)Acc * Scale, L = (float)(Lo - Zp), H = (float)(Hi - Zp);
    V = V < L ? L : V > H ? H : V;
    return (int)npk_rne(V) + Zp;
}}
/* 2^T: 2^floor(T) from its bits times a degree-8 polynomial of the fraction; 0 below -126,
   infinity from 128. */
static inline float npk_exp2(float T)
{{
    union {{ unsigned int U; float F; }} S;
    float C = T < -126.0f ? -126.0f : T > 127.0f ? 127.0f : T, K = (float)(int)C, F, P;
    if (K > C) K = K - 1.0f;
    F = C - K;
    {_horner(EXP2_POLY, "F", "P")}
    S.U = (unsigned int)((int)K + 127) << 23;
    if (T < -126.0f) return 0.0f;
    if (T >= 128.0f) {{
        S.U = 0x7F800000u;
        return S.F;
    }}
    return P * S.F;
}}
/* log2(V) for a positive normal V: its exponent plus the atanh series of its mantissa in
   [sqrt(1/2), sqrt(2)). */
static inline float npk_log2(float V)
{{
    union {{ unsigned int U; float F; }} B;
    int E;
    float M, T, S, P;
    B.F = V;
    E = (int)(B.U >> 23) - 127;
    B.U = (B.U & 0x007FFFFFu) | 0x3F800000u;
    M = B.F;
    if (M > 1.41421356f) {{
        M = M * 0.5f;
        E = E + 1;
    }}
    T = (M - 1.0f) / (M + 1.0f);
    S = T * T;
    {_horner(LOG2_POLY, "S", "P")}
    return (float)E + T * P;
}}
static inline float npk_sigmoid(float X)
{{
    float A = X < 0.0f ? -X : X, E = npk_exp2(-A * {hex_float(LOG2E)});
    return X >= 0.0f ? 1.0f / (1.0f + E) : E / (1.0f + E);
}}
static inline float npk_tanh(float X)
{{
    float A = X < 0.0f ? -X : X, S = X * X, P, E, R;
    if (A < 0.0625f) {{
        P = {hex_float(TANH_POLY[2])};
        P = {hex_float(TANH_POLY[1])} + S * P;
        P = {hex_float(TANH_POLY[0])} + S * P;
        return X + X * (S * P);
    }}
    E = npk_exp2(-(A + A) * {hex_float(LOG2E)});
    R = (1.0f - E) / (1.0f + E);
    return X < 0.0f ? -R : R;
}}
/* A float activation: 0 none, 1 ReLU, 2 LeakyReLU(P0), 3 clip to [P0, P1], 4 sigmoid,
   5 tanh. */
static inline float npk_act(float V, int Act, float P0, float P1)
{{
    switch (Act) {{
    case 1: return V > 0.0f ? V : 0.0f;
    case 2: return V >= 0.0f ? V : V * P0;
    case 3: return V < P0 ? P0 : V > P1 ? P1 : V;
    case 4: return npk_sigmoid(V);
    case 5: return npk_tanh(V);
    default: return V;
    }}
}}
#endif"""


def _sig(args) -> str:
    return ", ".join(f"{t} {n}" for t, n in args)


def _unused(*names: str) -> str:
    return "".join(f"    (void){n};\n" for n in names)


def _ceil_div_pos(a: int, b: int) -> int:
    return -(-a // b)


def _tap_range(W: int, Wo: int, S: int, off: int) -> tuple[int, int]:
    """Output columns x with 0 <= x*S + off < W (off = fx*D - PadL)."""
    x0 = 0 if off >= 0 else _ceil_div_pos(-off, S)
    b = W - 1 - off
    x1 = 0 if b < 0 else min(Wo, b // S + 1)
    return x0, max(x0, x1)


C_TAP_RANGE = """\
            int Off = fx * Dx - PadL, X0, X1;
            X0 = Off >= 0 ? 0 : (-Off + Sx - 1) / Sx;
            X1 = W - 1 - Off < 0 ? 0 : (W - 1 - Off) / Sx + 1;
            X1 = X1 < Wo ? X1 : Wo;"""


# -- convolution ------------------------------------------------------------------------------

@cache
def conv(in_dt: str, w_dt: str, width: int) -> BasicKernel:
    """One input plane's contribution to ``OutRows`` rows of ``Wo`` accumulators:
    ``Acc[y][x] += In(p, x*Sx - PadL + fx*Dx) * Filter[fy][fx]`` over the taps in (fy, fx)
    order, ``p = (OutRow0 + y)*Sy + fy*Dy`` a row of the padded input (real row ``p - PadT``),
    found at line ``p - InRow0`` of the tile. Taps on padding (rows outside ``[0, Hreal)``,
    columns outside ``[0, W)``) add nothing. Integers: ``(In - Zin) * (Filter - Zw)`` summed
    in a wrapping int32 accumulator; float32: ``Acc + In * Filter`` tap by tap."""
    flt = is_float(in_dt)
    acc_dt = "float32" if flt else "int32"
    name = f"KerConvNpk_{suffix(in_dt, w_dt)}"
    ti, tw, ta = c_type(in_dt), c_type(w_dt), c_type(acc_dt)
    args = ((f"const {ti} *__restrict__", "In"), ("int", "W"), ("int", "InRow0"),
            ("int", "InRows"), ("int", "Hreal"), ("int", "PadT"),
            (f"const {tw} *__restrict__", "Filter"), (f"{ta} *__restrict__", "Acc"),
            ("int", "Wo"), ("int", "OutRow0"), ("int", "OutRows"), ("int", "Fx"), ("int", "Fy"),
            ("int", "Sx"), ("int", "Sy"), ("int", "Dx"), ("int", "Dy"), ("int", "PadL"),
            ("int", "Zin"), ("int", "Zw"))
    if flt:
        wt, term, unused = "float Wt = Filter[fy * Fx + fx];", "A[x] = A[x] + Row[x * Sx] * Wt;", \
            _unused("Zin", "Zw")
    else:
        wt = "int Wt = (int)Filter[fy * Fx + fx] - Zw;"
        term = ("A[x] = (int)((unsigned int)A[x] + (unsigned int)(((int)Row[x * Sx] - Zin) * "
                "Wt));  /* wraps */")
        unused = ""
    src = f"""\
{HELPERS}
void {name}({_sig(args)})
{{
    /* Acc[y][x] accumulates the taps (fy, fx) in order: input row p = (OutRow0 + y)*Sy +
       fy*Dy of the padded plane (line p - InRow0 of the tile, real row p - PadT), column
       x*Sx - PadL + fx*Dx. Taps on padding add nothing. Rows are shared among the cores. */
{unused}    int Rows = OutRows;
{_rows()}
    for (int fy = 0; fy < Fy; fy++)
        for (int fx = 0; fx < Fx; fx++) {{
            {wt}
{C_TAP_RANGE}
            for (int y = First; y < Last; y++) {{
                int P = (OutRow0 + y) * Sy + fy * Dy, L = P - InRow0;
                {ta} *A = Acc + y * Wo;
                const {ti} *Row;
                if (P - PadT < 0 || P - PadT >= Hreal || L < 0 || L >= InRows) continue;
                Row = In + L * W + Off;
                for (int x = X0; x < X1; x++) {term}
            }}
        }}
}}"""

    def reference(In, W, InRow0, InRows, Hreal, PadT, Filter, Acc, Wo, OutRow0, OutRows, Fx,
                  Fy, Sx, Sy, Dx, Dy, PadL, Zin, Zw, *, core_id, core_count):
        if core_id or OutRows <= 0:
            return
        acc = Acc[:OutRows * Wo].reshape(OutRows, Wo)
        work = acc.copy() if flt else acc.astype(np.int64)
        x = In[:InRows * W].reshape(InRows, W)
        x = x if flt else x.astype(np.int64) - Zin
        f = Filter[:Fy * Fx].reshape(Fy, Fx)
        f = f if flt else f.astype(np.int64) - Zw
        ys = np.arange(OutRows)
        for fy in range(Fy):
            p = (OutRow0 + ys) * Sy + fy * Dy
            lines = p - InRow0
            ok = (p - PadT >= 0) & (p - PadT < Hreal) & (lines >= 0) & (lines < InRows)
            rows = ys[ok]
            for fx in range(Fx):
                x0, x1 = _tap_range(W, Wo, Sx, fx * Dx - PadL)
                if x0 >= x1 or not rows.size:
                    continue
                cols = np.arange(x0, x1) * Sx + fx * Dx - PadL
                win = x[lines[ok][:, None], cols[None, :]]
                work[rows[:, None], np.arange(x0, x1)[None, :]] += win * f[fy, fx]
        acc[...] = work if flt else wrap32(work)

    def cost(Wo, OutRows, Fx, Fy, **_):
        return math.ceil(Wo * OutRows * Fx * Fy / width) + 4 * OutRows * Fy

    return BasicKernel(name, args, True, src, reference, cost)


@cache
def conv_out(acc_dt: str, out_dt: str) -> BasicKernel:
    """From a tile of convolution accumulators to output rows: each accumulator becomes
    ``act(acc)`` (float32) or ``requant(acc, Scale[Index], Zout, Lo, Hi)`` (integers, the
    activation folded in the clamp), then an optional pooling without padding (``Oper`` 1 max,
    2 average over the window's existing rows and columns, float32 only) over ``Fy`` x ``Fx``
    windows at strides ``Sy``, ``Sx``. Accumulator line ``c - AccRow0`` holds convolution row
    ``c``; rows from ``Hc`` on do not exist (a ceil-mode window's end)."""
    flt = is_float(acc_dt)
    name = f"KerConvOutNpk_{suffix(acc_dt, out_dt)}"
    ta, to = c_type(acc_dt), c_type(out_dt)
    args = [(f"const {ta} *__restrict__", "Acc"), ("int", "Wc"), ("int", "AccRow0"),
            ("int", "Hc"), (f"{to} *__restrict__", "Out"), ("int", "Wo"), ("int", "OutRow0"),
            ("int", "OutRows"), ("int", "Fx"), ("int", "Fy"), ("int", "Sx"), ("int", "Sy"),
            ("int", "Oper")]
    if flt:
        args += [("int", "Act"), ("int", "P0"), ("int", "P1")]
        value = "float V = npk_act(Acc[L * Wc + cx], Act, A0, A1);"
        init = "float A0 = npk_f32(P0), A1 = npk_f32(P1);\n"
        decl, first = "float M = 0.0f, S = 0.0f;", "M = N == 0 || V > M ? V : M;\n" \
            "                        S = S + V;"
        store = "Out[y * Wo + x] = Oper == 2 ? S / (float)N : M;"
    else:
        args += [("const float *__restrict__", "Scale"), ("int", "Index"), ("int", "Zout"),
                 ("int", "Lo"), ("int", "Hi")]
        value = "int V = npk_requant(Acc[L * Wc + cx], Sc, Zout, Lo, Hi);"
        init = "float Sc = Scale[Index];\n    (void)Oper;\n"
        decl, first = "int M = 0;", "M = N == 0 || V > M ? V : M;"
        store = f"Out[y * Wo + x] = ({to})M;"
    args = tuple(args)
    src = f"""\
{HELPERS}
void {name}({_sig(args)})
{{
    /* Out[y][x] pools (Oper 0: none, 1: max, 2: average) the activated accumulators of its
       window: convolution rows (OutRow0 + y)*Sy + fy below Hc, columns x*Sx + fx below Wc.
       Rows are shared among the cores. */
    {init}    int Rows = OutRows;
{_rows()}
    for (int y = First; y < Last; y++)
        for (int x = 0; x < Wo; x++) {{
            {decl}
            int N = 0;
            for (int fy = 0; fy < Fy; fy++) {{
                int cy = (OutRow0 + y) * Sy + fy, L = cy - AccRow0;
                if (cy >= Hc) break;
                for (int fx = 0; fx < Fx; fx++) {{
                    int cx = x * Sx + fx;
                    if (cx < Wc) {{
                        {value}
                        {first}
                        N++;
                    }}
                }}
            }}
            {store}
        }}
}}"""

    def reference(Acc, Wc, AccRow0, Hc, Out, Wo, OutRow0, OutRows, Fx, Fy, Sx, Sy, Oper, *rest,
                  core_id, core_count):
        if core_id or OutRows <= 0:
            return
        lines = min(Acc.size // Wc, (OutRow0 + OutRows - 1) * Sy + Fy - AccRow0)
        acc = Acc[:lines * Wc].reshape(lines, Wc)
        if flt:
            act, p0, p1 = rest
            v = activate(acc, act, p0, p1)
        else:
            scale, index, zout, lo, hi = rest
            v = requant(acc, scale[index], zout, lo, hi)
        out = Out[:OutRows * Wo].reshape(OutRows, Wo)
        m = s = None
        n = np.zeros((OutRows, Wo), np.int64)
        ys, xs = OutRow0 + np.arange(OutRows), np.arange(Wo)
        for fy in range(Fy):
            cy = ys * Sy + fy
            okr = cy < Hc
            for fx in range(Fx):
                cx = xs * Sx + fx
                okc = cx < Wc
                ok = okr[:, None] & okc[None, :]
                w = v[np.clip(cy - AccRow0, 0, lines - 1)[:, None], np.minimum(cx, Wc - 1)[None, :]]
                if m is None:
                    m, s = w.copy(), w.copy()
                else:
                    m = np.where(ok & (w > m), w, m)
                    s = np.where(ok, s + w, s) if flt else s
                n += ok
        if flt and Oper == POOL_AVG:
            out[...] = s / n.astype(np.float32)
        else:
            out[...] = m

    def cost(Wo, OutRows, Fx, Fy, **_):
        return Wo * OutRows * (Fx * Fy + 4)

    return BasicKernel(name, args, True, src, reference, cost)


# -- pooling ----------------------------------------------------------------------------------

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
    real taps or by ``Fx*Fy``, then ``clamp(rne(avg / OutScale + OutZp))``."""
    flt = is_float(dt)
    name = f"KerPoolNpk_{suffix(dt)}"
    t = c_type(dt)
    args = ((f"const {t} *__restrict__", "In"), ("int", "W"), ("int", "InRow0"),
            ("int", "InRows"), ("int", "Hreal"), ("int", "PadT"), (f"{t} *__restrict__", "Out"),
            ("int", "Wo"), ("int", "OutRow0"), ("int", "OutRows"), ("int", "Fx"), ("int", "Fy"),
            ("int", "Sx"), ("int", "Sy"), ("int", "Dx"), ("int", "Dy"), ("int", "PadL"),
            ("int", "PadB"), ("int", "PadR"), ("int", "Oper"), ("int", "CountPad"),
            ("int", "InScale"), ("int", "InZp"), ("int", "OutScale"), ("int", "OutZp"))
    if flt:
        low = "-3.40282347e+38f"
        body = f"""\
            float M = {low}, S = 0.0f;
            int N = 0, Nh = 0, Nw = 0;
            for (int fy = 0; fy < Fy; fy++) {{
                int P = (OutRow0 + y) * Sy + fy * Dy, R = P - PadT, L = P - InRow0;
                if (R < Hreal + PadB) Nh++;
                if (R < 0 || R >= Hreal || L < 0 || L >= InRows) continue;
                for (int fx = 0; fx < Fx; fx++) {{
                    int C = x * Sx - PadL + fx * Dx;
                    if (C < 0 || C >= W) continue;
                    M = In[L * W + C] > M ? In[L * W + C] : M;
                    S = S + In[L * W + C];
                    N++;
                }}
            }}
            for (int fx = 0; fx < Fx; fx++)
                if (x * Sx - PadL + fx * Dx < W + PadR) Nw++;
            if (Oper == 1) Out[y * Wo + x] = M;
            else Out[y * Wo + x] = N == 0 ? 0.0f : S / (float)(CountPad ? Nh * Nw : N);"""
        unused = _unused("InScale", "InZp", "OutScale", "OutZp")
    else:
        lo, hi = int_range(dt)
        body = f"""\
            int M = {lo}, N = 0;
            float S = 0.0f, Q;
            for (int fy = 0; fy < Fy; fy++) {{
                int P = (OutRow0 + y) * Sy + fy * Dy, R = P - PadT, L = P - InRow0;
                if (R < 0 || R >= Hreal || L < 0 || L >= InRows) continue;
                for (int fx = 0; fx < Fx; fx++) {{
                    int C = x * Sx - PadL + fx * Dx, V;
                    if (C < 0 || C >= W) continue;
                    V = In[L * W + C];
                    M = V > M ? V : M;
                    S = S + Xs * (float)(V - InZp);
                    N++;
                }}
            }}
            if (Oper == 1) {{
                Out[y * Wo + x] = ({t})M;
                continue;
            }}
            Q = npk_rne((N == 0 ? 0.0f : S / (float)(CountPad ? Fx * Fy : N)) / Ys + (float)OutZp);
            Q = Q < {lo}.0f ? {lo}.0f : Q > {hi}.0f ? {hi}.0f : Q;
            Out[y * Wo + x] = ({t})(int)Q;"""
        unused = (_unused("PadB", "PadR") +
                  "    float Xs = npk_f32(InScale), Ys = npk_f32(OutScale);\n")
    src = f"""\
{HELPERS}
void {name}({_sig(args)})
{{
    /* Out[y][x] = max or average of the taps of its window (see the module's pool()): padded
       row (OutRow0 + y)*Sy + fy*Dy, column x*Sx - PadL + fx*Dx. Rows are shared among the
       cores. */
{unused}    int Rows = OutRows;
{_rows()}
    for (int y = First; y < Last; y++)
        for (int x = 0; x < Wo; x++) {{
{body}
        }}
}}"""

    def reference(In, W, InRow0, InRows, Hreal, PadT, Out, Wo, OutRow0, OutRows, Fx, Fy, Sx, Sy,
                  Dx, Dy, PadL, PadB, PadR, Oper, CountPad, InScale, InZp, OutScale, OutZp, *,
                  core_id, core_count):
        if core_id or OutRows <= 0:
            return
        x = In[:InRows * W].reshape(InRows, W)
        out = Out[:OutRows * Wo].reshape(OutRows, Wo)
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
                v = x[np.clip(line, 0, InRows - 1)[:, None], np.clip(c, 0, W - 1)[None, :]]
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

    def cost(Wo, OutRows, Fx, Fy, **_):
        return Wo * OutRows * (Fx * Fy + 4)

    return BasicKernel(name, args, True, src, reference, cost)


@cache
def global_sum(dt: str) -> BasicKernel:
    """``Sum[0] = (Tile == 0 ? 0 : Sum[0]) + In[0] + ... + In[W*H-1]`` in order (float32), or
    the integer sum in a wrapping int32: a tile's contribution to a global average."""
    flt = is_float(dt)
    acc_dt = "float32" if flt else "int32"
    name = f"KerGlobalSumNpk_{suffix(dt)}"
    t, ta = c_type(dt), c_type(acc_dt)
    args = ((f"const {t} *__restrict__", "In"), ("int", "W"), ("int", "H"),
            (f"{ta} *__restrict__", "Sum"), ("int", "Tile"))
    add = "S = S + In[i];" if flt else "S = (int)((unsigned int)S + (unsigned int)In[i]);"
    src = f"""\
void {name}({_sig(args)})
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

    return BasicKernel(name, args, False, src, reference, lambda W, H, **_: W * H + 10)


@cache
def global_out(dt: str) -> BasicKernel:
    """The mean of ``Count`` values from their sum: float32 ``Sum / Count``; integers as ONNX
    Runtime's QLinearGlobalAveragePool, ``requant(Sum - InZp*Count, InScale / (OutScale *
    Count), OutZp)`` with the scale computed by the importer (``Scale`` bits)."""
    flt = is_float(dt)
    acc_dt = "float32" if flt else "int32"
    name = f"KerGlobalOutNpk_{suffix(dt)}"
    t, ta = c_type(dt), c_type(acc_dt)
    args = ((f"const {ta} *__restrict__", "Sum"), ("int", "Count"), (f"{t} *__restrict__", "Out"),
            ("int", "InZp"), ("int", "Scale"), ("int", "OutZp"))
    if flt:
        body = _unused("InZp", "Scale", "OutZp") + "    Out[0] = Sum[0] / (float)Count;"
    else:
        lo, hi = int_range(dt)
        body = (f"    Out[0] = ({t})npk_requant((int)((unsigned int)Sum[0] - (unsigned int)"
                f"(InZp * Count)), npk_f32(Scale), OutZp, {lo}, {hi});")
    src = f"""\
{HELPERS}
void {name}({_sig(args)})
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

    return BasicKernel(name, args, False, src, reference, lambda **_: 20)


# -- elementwise ------------------------------------------------------------------------------

@cache
def unary(in_dt: str, out_dt: str, width: int) -> BasicKernel:
    """``Out[i] = f(In[i])`` for ``N`` values. float32 -> float32: the activations ``ACT_*``
    (parameters ``P0``, ``P1`` as bits). float32 -> integer (``UN_QUANT``): ONNX Runtime's
    QuantizeLinear with scale ``P0`` (bits) and zero point ``P1``. Integer -> float32
    (``UN_DEQUANT``): ``(float)(In - P1) * P0``. Integer -> integer: ``clamp(In, P0, P1)``
    (ReLU and Clip on quantized data)."""
    fi, fo = is_float(in_dt), is_float(out_dt)
    name = f"KerUnaryNpk_{suffix(in_dt, out_dt)}"
    ti, to = c_type(in_dt), c_type(out_dt)
    args = ((f"const {ti} *__restrict__", "In"), ("int", "W"), ("int", "H"),
            (f"{to} *__restrict__", "Out"), ("int", "Op"), ("int", "P0"), ("int", "P1"))
    if fi and fo:
        body = ("    float A0 = npk_f32(P0), A1 = npk_f32(P1);\n"
                "    for (int i = First; i < Last; i++) Out[i] = npk_act(In[i], Op, A0, A1);")
    elif fi:
        lo, hi = int_range(out_dt)
        body = (f"    float Sc = npk_f32(P0), Lf = (float)({lo} - P1), Hf = (float)({hi} - P1);\n"
                f"    (void)Op;\n"
                f"    for (int i = First; i < Last; i++) {{\n"
                f"        float V = In[i] / Sc;\n"
                f"        V = V < Lf ? Lf : V > Hf ? Hf : V;\n"
                f"        Out[i] = ({to})((int)npk_rne(V) + P1);\n"
                f"    }}")
    elif fo:
        body = ("    float Sc = npk_f32(P0);\n    (void)Op;\n"
                "    for (int i = First; i < Last; i++) Out[i] = (float)((int)In[i] - P1) * Sc;")
    else:
        body = ("    (void)Op;\n"
                f"    for (int i = First; i < Last; i++) Out[i] = ({to})(In[i] < P0 ? P0 : "
                f"In[i] > P1 ? P1 : In[i]);")
    src = f"""\
{HELPERS}
void {name}({_sig(args)})
{{
    /* Out[i] = f(In[i]) for the W*H values (see the module's unary()); they are shared among
       the cores. */
    int Rows = W * H;
{_rows()}
{body}
}}"""

    def reference(In, W, H, Out, Op, P0, P1, *, core_id, core_count):
        N = W * H
        if core_id or N <= 0:
            return
        x = In[:N]
        if fi and fo:
            Out[:N] = activate(x, Op, P0, P1)
        elif fi:
            Out[:N] = quantize(x, bits_f32(P0), P1, *int_range(out_dt))
        elif fo:
            Out[:N] = (x.astype(np.int64) - P1).astype(np.float32) * bits_f32(P0)
        else:
            Out[:N] = np.clip(x.astype(np.int64), P0, P1)

    return BasicKernel(name, args, True, src, reference,
                       lambda W, H, **_: math.ceil(W * H / width) * (20 if fi and fo else 2))


@cache
def lut(in_dt: str, out_dt: str) -> BasicKernel:
    """``Out[i] = Table[In[i] + Offset]``: a 256-entry table of an 8-bit function (ONNX
    Runtime's QLinearLookupBase and QLinearConcat build the same tables), read as
    ``npukit.lut.parallel_lookup``."""
    name = f"KerLutNpk_{suffix(in_dt, out_dt)}"
    ti, to = c_type(in_dt), c_type(out_dt)
    args = ((f"const {ti} *__restrict__", "In"), ("int", "W"), ("int", "H"),
            (f"const {to} *__restrict__", "Table"), (f"{to} *__restrict__", "Out"),
            ("int", "Offset"))
    src = f"""\
void {name}({_sig(args)})
{{
    /* Out[i] = Table[In[i] + Offset] for the W*H values; they are shared among the cores. */
    int Rows = W * H;
{_rows()}
    for (int i = First; i < Last; i++) Out[i] = Table[In[i] + Offset];
}}"""

    def reference(In, W, H, Table, Out, Offset, *, core_id, core_count):
        from ..lut import Lut, parallel_lookup
        N = W * H
        if core_id or N <= 0:
            return
        signed = np.dtype(in_dt).kind == "i"
        Out[:N] = parallel_lookup(Lut(np.asarray(Table[:256])), In[:N], 0,
                                  Offset if signed else 0)

    return BasicKernel(name, args, True, src, reference, lambda W, H, **_: W * H)


@cache
def binary(a_dt: str, b_dt: str, out_dt: str, width: int) -> BasicKernel:
    """``Out[r][c] = op(A[r*ARow + c*ACol], B[r*BRow + c*BCol])`` over ``Rows`` x ``Cols``
    (a stride 0 broadcasts). float32: ``BIN_ADD``, ``BIN_SUB``, ``BIN_MUL``, ``BIN_DIV`` then
    the activation ``Act`` (``P0``, ``P1``). Integers, ONNX Runtime's QLinearAdd (its AVX2
    formula without fused multiply-adds: ``a*rA + (b*rB + F)`` with ``rA``, ``rB``, ``F`` in
    ``P0``..``P2``) or QLinearMul (``requant((a - Za)*(b - Zb), P0, Zout)``), clamped to
    ``[Lo, Hi]``."""
    flt = is_float(out_dt)
    name = f"KerBinaryNpk_{suffix(a_dt, b_dt, out_dt)}"
    ta, tb, to = c_type(a_dt), c_type(b_dt), c_type(out_dt)
    args = ((f"const {ta} *__restrict__", "A"), (f"const {tb} *__restrict__", "B"),
            (f"{to} *__restrict__", "Out"), ("int", "Rows"), ("int", "Cols"), ("int", "ARow"),
            ("int", "ACol"), ("int", "BRow"), ("int", "BCol"), ("int", "Op"), ("int", "Act"),
            ("int", "P0"), ("int", "P1"), ("int", "P2"), ("int", "Za"), ("int", "Zb"),
            ("int", "Zout"), ("int", "Lo"), ("int", "Hi"))
    if flt:
        pre = ("    float A0 = npk_f32(P0), A1 = npk_f32(P1);\n"
               + _unused("P2", "Za", "Zb", "Zout", "Lo", "Hi"))
        loop = """\
            float X = A[r * ARow + c * ACol], Y = B[r * BRow + c * BCol], V;
            switch (Op) {
            case 0: V = X + Y; break;
            case 1: V = X - Y; break;
            case 2: V = X * Y; break;
            default: V = X / Y; break;
            }
            Out[r * Cols + c] = npk_act(V, Act, A0, A1);"""
    else:
        pre = ("    float Ra = npk_f32(P0), Rb = npk_f32(P1), F = npk_f32(P2), V;\n"
               + _unused("Act"))
        loop = f"""\
            int X = A[r * ARow + c * ACol], Y = B[r * BRow + c * BCol], Q;
            if (Op == 4) {{
                V = npk_rne((float)X * Ra + ((float)Y * Rb + F));
                V = V < -1e9f ? -1e9f : V > 1e9f ? 1e9f : V;
                Q = (int)V;
            }} else {{
                Q = npk_requant((X - Za) * (Y - Zb), Ra, Zout, Lo, Hi);
            }}
            Out[r * Cols + c] = ({to})(Q < Lo ? Lo : Q > Hi ? Hi : Q);"""
    src = f"""\
{HELPERS}
void {name}({_sig(args)})
{{
    /* Out[r][c] = op(A[r*ARow + c*ACol], B[r*BRow + c*BCol]) (see the module's binary());
       rows are shared among the cores. */
{pre}{_rows()}
    for (int r = First; r < Last; r++)
        for (int c = 0; c < Cols; c++) {{
{loop}
        }}
}}"""

    def reference(A, B, Out, Rows, Cols, ARow, ACol, BRow, BCol, Op, Act, P0, P1, P2, Za, Zb,
                  Zout, Lo, Hi, *, core_id, core_count):
        if core_id or Rows <= 0:
            return
        r, c = np.arange(Rows)[:, None], np.arange(Cols)[None, :]
        x, y = A[r * ARow + c * ACol], B[r * BRow + c * BCol]
        out = Out[:Rows * Cols].reshape(Rows, Cols)
        if flt:
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                v = {BIN_ADD: np.add, BIN_SUB: np.subtract, BIN_MUL: np.multiply,
                     BIN_DIV: np.divide}[Op](x, y)
            out[...] = activate(v.astype(np.float32), Act, P0, P1)
            return
        x, y = x.astype(np.int64), y.astype(np.int64)
        if Op == BIN_QADD:
            v = rne(x.astype(np.float32) * bits_f32(P0)
                    + (y.astype(np.float32) * bits_f32(P1) + bits_f32(P2)))
            q = np.clip(v, np.float32(-1e9), np.float32(1e9)).astype(np.int64)
        else:
            q = requant((x - Za) * (y - Zb), bits_f32(P0), Zout, Lo, Hi)
        out[...] = np.clip(q, Lo, Hi)

    return BasicKernel(name, args, True, src, reference,
                       lambda Rows, Cols, **_: math.ceil(Rows * Cols / width) * 2 + Rows)


# -- matrix products --------------------------------------------------------------------------

@cache
def matmul(a_dt: str, b_dt: str, out_dt: str, width: int) -> BasicKernel:
    """One output row block: ``Out[j] = sum_k A[k] * B[k][j]`` for the ``Wn`` columns of the
    block (``B`` row pitch ``Wn``), k in order. float32: ``Alpha * acc`` (``+ Beta * C[j*CStep]``
    when ``HasC``) then the activation. Integers: ``C[j*CStep]`` (the int32 bias, when
    ``HasC``) plus ``sum (A - Za)(B - Zb)`` in a wrapping int32, requantised with
    ``Scale[j*ScaleStep]`` and ``Zout`` into ``[Lo, Hi]``."""
    flt = is_float(out_dt)
    name = f"KerMatMulNpk_{suffix(a_dt, b_dt, out_dt)}"
    ta, tb, to = c_type(a_dt), c_type(b_dt), c_type(out_dt)
    tc = "float" if flt else "int"
    args = [(f"const {ta} *__restrict__", "A"), ("int", "K"), (f"const {tb} *__restrict__", "B"),
            ("int", "Wn"), (f"const {tc} *__restrict__", "C"), ("int", "CStep"), ("int", "HasC"),
            (f"{to} *__restrict__", "Out")]
    if flt:
        args += [("int", "Alpha"), ("int", "Beta"), ("int", "Act"), ("int", "P0"), ("int", "P1")]
        body = """\
    float Al = npk_f32(Alpha), Be = npk_f32(Beta), A0 = npk_f32(P0), A1 = npk_f32(P1);
    for (int j = First; j < Last; j++) Out[j] = 0.0f;
    for (int k = 0; k < K; k++) {
        float Ak = A[k];
        const float *Bk = B + k * Wn;
        for (int j = First; j < Last; j++) Out[j] = Out[j] + Ak * Bk[j];
    }
    for (int j = First; j < Last; j++) {
        float V = Al * Out[j];
        if (HasC) V = V + Be * C[j * CStep];
        Out[j] = npk_act(V, Act, A0, A1);
    }"""
    else:
        args += [("int", "Za"), ("int", "Zb"), ("const float *__restrict__", "Scale"),
                 ("int", "ScaleStep"), ("int", "Zout"), ("int", "Lo"), ("int", "Hi")]
        body = f"""\
    for (int j0 = First; j0 < Last; j0 += 64) {{
        int Acc[64], J1 = j0 + 64 < Last ? j0 + 64 : Last;
        for (int j = j0; j < J1; j++) Acc[j - j0] = HasC ? C[j * CStep] : 0;
        for (int k = 0; k < K; k++) {{
            int Ak = (int)A[k] - Za;
            const {tb} *Bk = B + k * Wn;
            for (int j = j0; j < J1; j++)
                Acc[j - j0] = (int)((unsigned int)Acc[j - j0] +
                                    (unsigned int)(Ak * ((int)Bk[j] - Zb)));  /* wraps */
        }}
        for (int j = j0; j < J1; j++)
            Out[j] = ({to})npk_requant(Acc[j - j0], Scale[j * ScaleStep], Zout, Lo, Hi);
    }}"""
    args = tuple(args)
    src = f"""\
{HELPERS}
void {name}({_sig(args)})
{{
    /* Out[j] = A . B[:, j] for the Wn columns of the block (see the module's matmul()); the
       columns are shared among the cores. */
    int Rows = Wn;
{_rows()}
{body}
}}"""

    def reference(A, K, B, Wn, C, CStep, HasC, Out, *rest, core_id, core_count):
        if core_id or Wn <= 0:
            return
        b = B[:K * Wn].reshape(K, Wn)
        cols = np.arange(Wn)
        if flt:
            alpha, beta, act, p0, p1 = rest
            acc = np.zeros(Wn, np.float32)
            for k in range(K):
                acc = acc + A[k] * b[k]
            v = bits_f32(alpha) * acc
            if HasC:
                v = v + bits_f32(beta) * C[cols * CStep]
            Out[:Wn] = activate(v, act, p0, p1)
            return
        za, zb, scale, sstep, zout, lo, hi = rest
        acc = C[cols * CStep].astype(np.int64) if HasC else np.zeros(Wn, np.int64)
        acc = acc + (A[:K].astype(np.int64) - za) @ (b.astype(np.int64) - zb)
        Out[:Wn] = requant(wrap32(acc), scale[cols * sstep], zout, lo, hi)

    return BasicKernel(name, args, True, src, reference,
                       lambda K, Wn, **_: math.ceil(K * Wn / width) + 4 * Wn)


# -- softmax, LRN -----------------------------------------------------------------------------

@cache
def softmax(dt: str) -> BasicKernel:
    """``G`` softmaxes of ``D`` values each: group g's values at ``g*Sg + i*Sd``. The maximum,
    then ``e_i = 2**((x_i - max) * log2(e))`` (``exp2_f32``) summed in order, then
    ``e_i / sum``."""
    name = f"KerSoftmaxNpk_{suffix(dt)}"
    args = (("const float *__restrict__", "In"), ("float *__restrict__", "Out"), ("int", "G"),
            ("int", "Sg"), ("int", "D"), ("int", "Sd"))
    src = f"""\
{HELPERS}
void {name}({_sig(args)})
{{
    /* Out = softmax of each group of D values: the maximum, exp of each value minus it, their
       sum, then each exp over the sum. The groups are shared among the cores. */
    int Rows = G;
{_rows()}
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
        idx = np.arange(G)[:, None] * Sg + np.arange(D)[None, :] * Sd
        x = In[idx]
        e = exp2_f32((x - x.max(axis=1, keepdims=True)) * LOG2E)
        s = np.zeros(G, np.float32)
        for i in range(D):
            s = s + e[:, i]
        Out[idx] = e / s[:, None]

    return BasicKernel(name, args, True, src, reference, lambda G, D, **_: 60 * G * D)


@cache
def qsoftmax(dt: str) -> BasicKernel:
    """ONNX Runtime's QLinearSoftmax: ``G`` groups of ``D`` integers (group g at ``g*Sg + i*Sd``):
    with M the group's maximum, ``e_i = Table[255 - (M - x_i)]`` (``Table[k] = exp((k - 255 +
    shift) * x_scale)`` in float32), ``S`` their sum in order, ``y_i = rne(e_i * Ys / S) + Zp``
    with ``Ys = floor(1 / y_scale)`` (bits), saturated; ``rne(e_i / S * Ys)`` where ``e_i * Ys``
    overflows."""
    name = f"KerQSoftmaxNpk_{suffix(dt)}"
    t = c_type(dt)
    lo, hi = int_range(dt)
    args = ((f"const {t} *__restrict__", "In"), (f"{t} *__restrict__", "Out"), ("int", "G"),
            ("int", "Sg"), ("int", "D"), ("int", "Sd"), ("const float *__restrict__", "Table"),
            ("int", "Ys"), ("int", "Zp"))
    src = f"""\
{HELPERS}
void {name}({_sig(args)})
{{
    /* Out = the quantized softmax of each group of D values (ONNX Runtime's QLinearSoftmax):
       exp from the table, shifted so that the maximum reads its last entry, their sum, then
       each over the sum. The groups are shared among the cores. */
    float Y = npk_f32(Ys);
    int Rows = G;
{_rows()}
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

    return BasicKernel(name, args, True, src, reference, lambda G, D, **_: 8 * G * D)


def qsoftmax_table(x_scale: float, d: int) -> np.ndarray:
    """ONNX Runtime's QLinearSoftmax table: ``exp((k - 255 + shift) * x_scale)`` in double,
    stored as float32, ``shift = max(0, ln(FLT_MAX / d) - 5) / x_scale`` keeping the sum of d
    values finite."""
    fmax = float(np.finfo(np.float32).max)
    shift = max(0.0, math.log(np.float32(fmax / d)) - 5) / float(np.float32(x_scale))
    k = np.arange(256, dtype=np.float64)
    return np.exp((k - 255 + shift) * float(np.float32(x_scale))).astype(np.float32)


@cache
def lrn() -> BasicKernel:
    """Local response normalisation across the ``C`` rows of a ``C`` x ``Wn`` block, as ONNX:
    ``Out = In * (Bias + AlphaOverSize * sum In**2)**(-Beta)``, the sum over rows
    ``c - Lo .. c + Hi`` inside ``[0, C)`` in order, the power ``exp2_f32(-Beta *
    log2_f32(base))``."""
    name = "KerLrnNpk_fl"
    args = (("const float *__restrict__", "In"), ("float *__restrict__", "Out"), ("int", "C"),
            ("int", "Wn"), ("int", "Lo"), ("int", "Hi"), ("int", "AlphaOverSize"),
            ("int", "Beta"), ("int", "Bias"))
    src = f"""\
{HELPERS}
void {name}({_sig(args)})
{{
    /* Out[c][j] = In[c][j] * (Bias + AlphaOverSize * sum of In[c'][j]^2 for c' in
       [c - Lo, c + Hi])^-Beta; the columns are shared among the cores. */
    float Al = npk_f32(AlphaOverSize), Be = npk_f32(Beta), Bi = npk_f32(Bias);
    int Rows = Wn;
{_rows()}
    for (int c = 0; c < C; c++) {{
        int C0 = c - Lo < 0 ? 0 : c - Lo, C1 = c + Hi > C - 1 ? C - 1 : c + Hi;
        for (int j = First; j < Last; j++) {{
            float S = 0.0f, Base;
            for (int k = C0; k <= C1; k++) S = S + In[k * Wn + j] * In[k * Wn + j];
            Base = Bi + Al * S;
            Base = Base < 1.17549435e-38f ? 1.17549435e-38f : Base;
            Out[c * Wn + j] = In[c * Wn + j] * npk_exp2(-Be * npk_log2(Base));
        }}
    }}
}}"""

    def reference(In, Out, C, Wn, Lo, Hi, AlphaOverSize, Beta, Bias, *, core_id, core_count):
        if core_id or Wn <= 0:
            return
        x = In[:C * Wn].reshape(C, Wn)
        out = Out[:C * Wn].reshape(C, Wn)
        al, be, bi = bits_f32(AlphaOverSize), bits_f32(Beta), bits_f32(Bias)
        for c in range(C):
            s = np.zeros(Wn, np.float32)
            for k in range(max(0, c - Lo), min(C - 1, c + Hi) + 1):
                s = s + x[k] * x[k]
            base = np.maximum(bi + al * s, np.float32(1.17549435e-38))
            out[c] = x[c] * exp2_f32(-be * log2_f32(base))

    return BasicKernel(name, args, True, src, reference,
                       lambda C, Wn, **_: C * Wn * 80)


# -- data movement ----------------------------------------------------------------------------

@cache
def pad_axis(dt: str) -> BasicKernel:
    """``N`` vectors of ``Len`` values (element stride ``Stride``; vector starts ``InStep``
    apart) become vectors of ``Len2`` (starts ``OutStep`` apart): ``Out[i] = In[i - PadBegin]``
    inside, else by ``Mode``: ``PAD_CONSTANT`` (``Value``: bits for float32), ``PAD_REFLECT``
    (mirror without repeating the edge), ``PAD_EDGE``, ``PAD_WRAP`` — ONNX Pad's modes. A
    negative ``PadBegin`` crops."""
    flt = is_float(dt)
    name = f"KerPadAxisNpk_{suffix(dt)}"
    t = c_type(dt)
    args = ((f"const {t} *__restrict__", "In"), (f"{t} *__restrict__", "Out"), ("int", "N"),
            ("int", "Len"), ("int", "Len2"), ("int", "Stride"), ("int", "InStep"),
            ("int", "OutStep"), ("int", "PadBegin"), ("int", "Mode"), ("int", "Value"))
    value = "npk_f32(Value)" if flt else f"({t})Value"
    src = f"""\
{HELPERS}
void {name}({_sig(args)})
{{
    /* Out[v][i] = In[v][i - PadBegin] inside the input, else the mode's value (0 constant,
       1 reflect, 2 edge, 3 wrap); the vectors are shared among the cores. */
    {t} Fill = {value};
    int Rows = N;
{_rows()}
    for (int v = First; v < Last; v++)
        for (int i = 0; i < Len2; i++) {{
            int S = i - PadBegin;
            if (S < 0 || S >= Len) {{
                if (Mode == 0) {{
                    Out[v * OutStep + i * Stride] = Fill;
                    continue;
                }}
                if (Mode == 2) S = S < 0 ? 0 : Len - 1;
                else if (Mode == 3) S = ((S % Len) + Len) % Len;
                else if (Len == 1) S = 0;
                else while (S < 0 || S >= Len) S = S < 0 ? -S : 2 * (Len - 1) - S;
            }}
            Out[v * OutStep + i * Stride] = In[v * InStep + S * Stride];
        }}
}}"""

    def reference(In, Out, N, Len, Len2, Stride, InStep, OutStep, PadBegin, Mode, Value, *,
                  core_id, core_count):
        if core_id or N <= 0:
            return
        s = np.arange(Len2) - PadBegin
        inside = (s >= 0) & (s < Len)
        if Mode == PAD_EDGE:
            s = np.clip(s, 0, Len - 1)
        elif Mode == PAD_WRAP:
            s = s % Len
        elif Mode == PAD_REFLECT and Len == 1:
            s = np.zeros_like(s)
        elif Mode == PAD_REFLECT:
            while ((s < 0) | (s >= Len)).any():
                s = np.where(s < 0, -s, np.where(s >= Len, 2 * (Len - 1) - s, s))
        s = np.clip(s, 0, max(Len - 1, 0))
        v = np.arange(N)[:, None]
        vals = In[v * InStep + s[None, :] * Stride]
        if Mode == PAD_CONSTANT:
            fill = bits_f32(Value) if flt else Value
            vals = np.where(inside[None, :], vals, fill)
        Out[v * OutStep + np.arange(Len2)[None, :] * Stride] = vals

    return BasicKernel(name, args, True, src, reference, lambda N, Len2, **_: N * Len2 + N)


@cache
def copy2d(dt: str) -> BasicKernel:
    """``Out[(RowOff + r)*OutPitch + ColOff + c] = In[r*InPitch + c]`` for a ``Rows`` x
    ``Cols`` block (a concatenation's input placed in its output tile)."""
    name = f"KerCopy2DNpk_{suffix(dt)}"
    t = c_type(dt)
    args = ((f"const {t} *__restrict__", "In"), ("int", "Rows"), ("int", "Cols"),
            ("int", "InPitch"), (f"{t} *__restrict__", "Out"), ("int", "OutPitch"),
            ("int", "RowOff"), ("int", "ColOff"))
    src = f"""\
void {name}({_sig(args)})
{{
    /* The Rows x Cols block In goes to Out at (RowOff, ColOff); rows are shared among the
       cores. */
    int N = Rows;
{_rows("N")}
    for (int r = First; r < Last; r++)
        for (int c = 0; c < Cols; c++)
            Out[(RowOff + r) * OutPitch + ColOff + c] = In[r * InPitch + c];
}}"""

    def reference(In, Rows, Cols, InPitch, Out, OutPitch, RowOff, ColOff, *, core_id,
                  core_count):
        if core_id or Rows <= 0 or Cols <= 0:
            return
        r, c = np.arange(Rows)[:, None], np.arange(Cols)[None, :]
        Out[(RowOff + r) * OutPitch + ColOff + c] = In[r * InPitch + c]

    return BasicKernel(name, args, True, src, reference, lambda Rows, Cols, **_: Rows * Cols)


@cache
def transpose(dt: str) -> BasicKernel:
    """``Out[b][a*I + i] = In[a][b*I + i]``: an ``A`` x ``B`` block of ``I``-value items
    transposed (In row pitch ``B*I``, Out row pitch ``A*I``)."""
    name = f"KerTransposeNpk_{suffix(dt)}"
    t = c_type(dt)
    args = ((f"const {t} *__restrict__", "In"), ("int", "A"), ("int", "B"), ("int", "I"),
            (f"{t} *__restrict__", "Out"))
    src = f"""\
void {name}({_sig(args)})
{{
    /* Out[b][a][i] = In[a][b][i]; the output rows are shared among the cores. */
    int N = B;
{_rows("N")}
    for (int b = First; b < Last; b++)
        for (int a = 0; a < A; a++)
            for (int i = 0; i < I; i++) Out[(b * A + a) * I + i] = In[(a * B + b) * I + i];
}}"""

    def reference(In, A, B, I, Out, *, core_id, core_count):  # noqa: E741
        if core_id or A <= 0 or B <= 0:
            return
        Out[:A * B * I] = In[:A * B * I].reshape(A, B, I).transpose(1, 0, 2).reshape(-1)

    return BasicKernel(name, args, True, src, reference, lambda A, B, I, **_: A * B * I)  # noqa: E741
