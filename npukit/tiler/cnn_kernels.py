"""The CNN basic kernels of the GAP AutoTiler's CNN library, as npukit basic kernels: each has
its C source, a numpy reference that computes the same integers (or the same float32 values,
operation for operation) and a cost in cycles.

Fixed point follows GAP's CNN basic kernels (``CNN_BasicKernels*.c`` of the GAP SDK):

- products are summed in a 32-bit accumulator that wraps, as the cores' ``int`` does;
- ``AT_NORM(x, n)`` is GAP's ``gap_roundnorm``: ``(x + 2**(n-1)) >> n`` (round half up);
- a bias in Q``b`` is aligned to the accumulator's Q``(i+w)`` by a left shift of ``i+w-b``
  (npukit rounds, ``AT_NORM``, when the shift is negative; GAP's kernels only shift left);
- results are clipped to ``[LB, UB]``: the type's range, ``[0, max]`` after a ReLU,
  ``[0, 6 << Out_Q]`` after a ReLU6 (``KOP_RELUN``), as ``CNN_SetUpperLowerBounds`` sets them;
- average pooling multiplies the window sum by ``PoolFactor = (1 << 16) // (Fx*Fy)`` and
  normalises by 16 bits, as GAP's general average pooling does;
- taps outside the input (padding) read 0, as GAP's zero padding.

A kernel is named like GAP's (``KerConvDP_fp``: ``fp`` int16, ``fps`` int8, ``fpd`` int32,
``fl`` float32; mixed types list each operand's code). Every kernel is self-contained C,
so a translation unit carries only the kernels it calls.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np

from ..arith import wrap32
from ..c.ctype import hex_float
from ..dtypes import FACTS, int_range, is_float
from ..errors import DTypeError

CODES = {"int8": "fps", "int16": "fp", "int32": "fpd", "float32": "fl"}
POOL_NONE, POOL_MAX, POOL_AVG = 0, 1, 2


@dataclass(frozen=True)
class BasicKernel:
    """A basic kernel as ``Model.LibKernel`` takes it."""

    name: str
    args: tuple[tuple[str, str], ...]  # (C type, C name)
    parallel: bool
    c_source: str
    reference: Callable
    cost: Callable


def suffix(*dtypes: np.dtype) -> str:
    """GAP's type suffix: one code when every operand has the same type, else one each."""
    codes = [CODES[np.dtype(d).name] for d in dtypes]
    return codes[0] if len(set(codes)) == 1 else "_".join(codes)


def c_type(dt: np.dtype) -> str:
    """The GAP spelling of ``dt``'s C type (``npukit.dtypes.FACTS``) for the types these
    kernels support."""
    name = np.dtype(dt).name
    if name not in CODES:
        raise DTypeError(f"CNN basic kernels: no C type for {name}; supported: {list(CODES)}")
    return FACTS[name].gap_c_type


# -- fixed-point helpers, shared by every numpy reference ---------------------------------

def at_norm(x: np.ndarray, n: int) -> np.ndarray:
    """GAP's ``AT_NORM``: ``(x + 2**(n-1)) >> n`` for ``n > 0``, ``x`` for ``n == 0``."""
    x = np.asarray(x, np.int64)
    return (x + (1 << (n - 1))) >> n if n > 0 else x


def align(x: np.ndarray, shift: int) -> np.ndarray:
    """A value moved ``shift`` bits up (exact, ``* 2**shift``) or down (``AT_NORM``)."""
    x = np.asarray(x, np.int64)
    return x * (1 << shift) if shift >= 0 else at_norm(x, -shift)


C_ALIGN = ("(NormBias >= 0 ? (long long){b} * (1LL << NormBias)\n"
           "                     : ((long long){b} + (1LL << (-NormBias - 1))) >> -NormBias)")


def _rows(core_var: str = "Rows") -> str:
    """C lines sharing ``Rows`` rows among the cores: ``First`` .. ``Last`` for this core."""
    return (f"    int Chunk = ({core_var} + gap_ncore() - 1) / gap_ncore();\n"
            f"    int First = gap_coreid() * Chunk;\n"
            f"    int Last = First + Chunk < {core_var} ? First + Chunk : {core_var};")


def _window(x: np.ndarray, top: int, left: int, rows: int, cols: int) -> np.ndarray:
    """``x`` placed at (top, left) in a zero array of at least rows x cols (zero padding)."""
    h, w = x.shape
    out = np.zeros((max(rows, top + h), max(cols, left + w)), x.dtype)
    out[top:top + h, left:left + w] = x
    return out


# -- set bias -------------------------------------------------------------------------------

@cache
def set_bias(bias_dt: str, acc_dt: str) -> BasicKernel:
    """``Out[0 .. W*H) = Bias[Index]`` aligned to the accumulator: shifted by ``NormBias``
    and wrapped to int32 (double precision) or saturated to the output type."""
    name = f"KerSetBias_{suffix(bias_dt, acc_dt)}"
    tb, ta = c_type(bias_dt), c_type(acc_dt)
    args = ((f"{ta} * __restrict__", "Out"), ("int", "W"), ("int", "H"),
            (f"const {tb} * __restrict__", "Bias"), ("int", "Index"), ("int", "NormBias"))
    if is_float(acc_dt):
        value = "    float V = Bias[Index];\n    (void)NormBias;"
    else:
        b = C_ALIGN.format(b="Bias[Index]")
        if np.dtype(acc_dt).itemsize == 4:
            value = f"    long long B = {b};\n    {ta} V = ({ta})(unsigned int)B;  /* wraps */"
        else:
            lo, hi = int_range(acc_dt)
            value = (f"    long long B = {b};\n"
                     f"    {ta} V = ({ta})(B < {lo} ? {lo} : B > {hi} ? {hi} : B);")
    src = f"""\
void {name}({', '.join(f'{t} {n}' for t, n in args)})
{{
    /* Every element of the tile starts at the bias of output plane Index. */
{value}
    for (int i = 0; i < W * H; i++) Out[i] = V;
}}"""

    def reference(Out, W, H, Bias, Index, NormBias):
        if is_float(acc_dt):
            Out[:W * H] = Bias[Index]
            return
        v = align(np.int64(Bias[Index]), NormBias)
        if np.dtype(acc_dt).itemsize == 4:
            v = wrap32(v)
        else:
            v = np.clip(v, *int_range(acc_dt))
        Out[:W * H] = v

    return BasicKernel(name, args, False, src, reference, lambda W, H, **_: W * H)


# -- convolution ----------------------------------------------------------------------------

@cache
def conv(in_dt: str, filter_dt: str, acc_dt: str, width: int) -> BasicKernel:
    """One input plane's contribution to ``Hc`` rows of ``Wc`` accumulators. Double precision
    (``acc_dt`` int32): ``Out += sum`` wrapping at 32 bits. Single precision (``acc_dt`` the
    output type): ``Out = clip(AT_NORM((Out << Norm) + sum, Norm))``, the sum taken at 32 bits,
    as GAP's ``KerConv*_fp`` does. float32: ``Out += In * Filter`` tap by tap, in (fy, fx)
    order. Taps outside the ``H`` x ``W`` tile read 0."""
    dp = np.dtype(acc_dt).itemsize == 4 and not is_float(acc_dt)
    flt = is_float(acc_dt)
    kind = "" if flt else ("DP" if dp else "SP")
    name = f"KerConv{kind}_{suffix(in_dt, filter_dt) if dp else suffix(in_dt, filter_dt, acc_dt)}"
    ti, tf, ta = c_type(in_dt), c_type(filter_dt), c_type(acc_dt)
    args = ((f"const {ti} * __restrict__", "In"), ("int", "W"), ("int", "H"),
            (f"const {tf} * __restrict__", "Filter"), (f"{ta} * __restrict__", "Out"),
            ("int", "Wc"), ("int", "Hc"), ("int", "Fx"), ("int", "Fy"), ("int", "Sx"),
            ("int", "Sy"), ("int", "Dx"), ("int", "Dy"), ("int", "PadL"), ("int", "PadT"),
            ("int", "Norm"))
    if flt:
        acc_t, start = "float", "Out[y * Wc + x]"
        term, store = "Acc = Acc + V * Filter[fy * Fx + fx];", "Out[y * Wc + x] = Acc;"
        unused = "    (void)Norm;\n"
    elif dp:
        acc_t, start = "long long", "Out[y * Wc + x]"
        term = "Acc += (long long)V * Filter[fy * Fx + fx];"
        store = "Out[y * Wc + x] = (int)(unsigned int)Acc;  /* wraps at 32 bits */"
        unused = "    (void)Norm;\n"
    else:
        lo, hi = int_range(acc_dt)
        acc_t, start = "long long", "(long long)Out[y * Wc + x] * (1LL << Norm)"
        term = "Acc += (long long)V * Filter[fy * Fx + fx];"
        store = (f"long long A = (int)(unsigned int)Acc;  /* a 32-bit accumulator */\n"
                 f"                A = Norm > 0 ? (A + (1LL << (Norm - 1))) >> Norm : A;\n"
                 f"                Out[y * Wc + x] = ({ta})(A < {lo} ? {lo} : "
                 f"A > {hi} ? {hi} : A);")
        unused = ""
    zero = "0.0f" if flt else "0"
    src = f"""\
void {name}({', '.join(f'{t} {n}' for t, n in args)})
{{
    /* Out[y][x] accumulates In[y*Sy - PadT + fy*Dy][x*Sx - PadL + fx*Dx] * Filter[fy][fx]
       over the Fy x Fx taps; a tap outside the H x W tile reads 0. Rows are shared among
       the cores. */
{unused}    int Rows = Hc;
{_rows()}
    for (int y = First; y < Last; y++)
        for (int x = 0; x < Wc; x++) {{
            {acc_t} Acc = {start};
            for (int fy = 0; fy < Fy; fy++) {{
                int iy = y * Sy - PadT + fy * Dy;
                for (int fx = 0; fx < Fx; fx++) {{
                    int ix = x * Sx - PadL + fx * Dx;
                    {ti} V = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? In[iy * W + ix] : {zero};
                    {term}
                }}
            }}
            {{
                {store}
            }}
        }}
}}"""

    def reference(In, W, H, Filter, Out, Wc, Hc, Fx, Fy, Sx, Sy, Dx, Dy, PadL, PadT, Norm, *,
                  core_id, core_count):
        if core_id or Hc <= 0 or Wc <= 0:
            return  # core 0 does every core's rows at once
        rows, cols = (Hc - 1) * Sy + (Fy - 1) * Dy + 1, (Wc - 1) * Sx + (Fx - 1) * Dx + 1
        x = In[:W * H].reshape(H, W)
        x = _window(x if flt else x.astype(np.int64), PadT, PadL, rows, cols)
        f = Filter[:Fy * Fx].reshape(Fy, Fx)
        out = Out[:Hc * Wc].reshape(Hc, Wc)
        acc = out.copy() if flt else (out.astype(np.int64) if dp else
                                      out.astype(np.int64) * (1 << Norm))
        for fy in range(Fy):
            for fx in range(Fx):
                win = x[fy * Dy:fy * Dy + (Hc - 1) * Sy + 1:Sy,
                        fx * Dx:fx * Dx + (Wc - 1) * Sx + 1:Sx]
                acc = acc + win * (f[fy, fx] if flt else np.int64(f[fy, fx]))
        if flt:
            out[...] = acc
        elif dp:
            out[...] = wrap32(acc)
        else:
            out[...] = np.clip(at_norm(wrap32(acc), Norm), *int_range(acc_dt))

    def cost(Wc, Hc, Fx, Fy, **_):
        return math.ceil(Wc * Hc * Fx * Fy / width) + 4 * Hc

    return BasicKernel(name, args, True, src, reference, cost)


# -- reduction, activation and pooling ------------------------------------------------------

@cache
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
{_rows()}
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
            v = _window(c, PadT, PadL, rows, cols)
            if LB >= 0:
                v = np.where(v > 0, v, np.float32(0))
        else:
            v = np.clip(at_norm(_window(c.astype(np.int64), PadT, PadL, rows, cols), Norm), LB, UB)
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
                       lambda Wo, Ho, Fx, Fy, **_: Wo * Ho * (Fx * Fy + 2))


# -- linear layer ---------------------------------------------------------------------------

@cache
def linear(in_dt: str, filter_dt: str, bias_dt: str, out_dt: str, width: int) -> BasicKernel:
    """``OutSize`` outputs of a linear layer: ``Out[o] = clip(AT_NORM(acc, Norm), LB, UB)``
    with ``acc = (Bias[o] << NormBias) + sum_i In[i] * Filter[o][i]`` in a 32-bit
    accumulator, as GAP's ``KerParLinearLayerReLU_fp``. float32: ``acc = Bias[o]`` then
    ``acc + In[i] * Filter[o][i]`` in order, ReLU when ``LB >= 0``."""
    flt = is_float(out_dt)
    name = f"KerLinear_{suffix(in_dt, filter_dt, bias_dt, out_dt)}"
    ti, tf, tb, to = (c_type(d) for d in (in_dt, filter_dt, bias_dt, out_dt))
    args = ((f"const {ti} * __restrict__", "In"), ("int", "InSize"),
            (f"const {tf} * __restrict__", "Filter"), (f"const {tb} * __restrict__", "Bias"),
            (f"{to} * __restrict__", "Out"), ("int", "OutSize"), ("int", "Norm"),
            ("int", "NormBias"), ("int", "LB"), ("int", "UB"))
    if flt:
        body = """\
        float Acc = Bias[o];
        for (int i = 0; i < InSize; i++) Acc = Acc + In[i] * Filter[o * InSize + i];
        Out[o] = LB >= 0 && !(Acc > 0.0f) ? 0.0f : Acc;"""
        unused = "    (void)Norm;\n    (void)NormBias;\n    (void)UB;\n"
    else:
        b = C_ALIGN.format(b="Bias[o]")
        body = f"""\
        long long Acc = {b};
        for (int i = 0; i < InSize; i++) Acc += (long long)In[i] * Filter[o * InSize + i];
        Acc = (int)(unsigned int)Acc;  /* a 32-bit accumulator */
        Acc = Norm > 0 ? (Acc + (1LL << (Norm - 1))) >> Norm : Acc;
        Out[o] = ({to})(Acc < LB ? LB : Acc > UB ? UB : Acc);"""
        unused = ""
    src = f"""\
void {name}({', '.join(f'{t} {n}' for t, n in args)})
{{
    /* Out[o] = Bias[o] + sum over i of In[i] * Filter[o][i], normalised and clipped. The
       outputs are shared among the cores. */
{unused}    int Rows = OutSize;
{_rows()}
    for (int o = First; o < Last; o++) {{
{body}
    }}
}}"""

    def reference(In, InSize, Filter, Bias, Out, OutSize, Norm, NormBias, LB, UB, *, core_id,
                  core_count):
        if core_id or OutSize <= 0:
            return
        f = Filter[:OutSize * InSize].reshape(OutSize, InSize)
        if flt:
            terms = np.concatenate([Bias[:OutSize, None], In[None, :InSize] * f], axis=1)
            acc = np.cumsum(terms, axis=1, dtype=np.float32)[:, -1]  # in order, like C
            Out[:OutSize] = np.where((LB >= 0) & ~(acc > 0), np.float32(0), acc)
            return
        acc = align(Bias[:OutSize], NormBias) + f.astype(np.int64) @ In[:InSize].astype(np.int64)
        Out[:OutSize] = np.clip(at_norm(wrap32(acc), Norm), LB, UB)

    def cost(InSize, OutSize, **_):
        return math.ceil(InSize * OutSize / width) + 4 * OutSize

    return BasicKernel(name, args, True, src, reference, cost)


# -- softmax --------------------------------------------------------------------------------

EXP_TAYLOR = tuple(round(32768 / math.factorial(n)) for n in range(9))  # Q15 1/n!
EXP_INT = tuple(round(math.exp(-k) * 2**30) for k in range(12))  # Q30 e^-k
# 2**f on [0, 1): the degree-8 Taylor polynomial of e**(f ln 2), float32 coefficients.
EXP2_POLY = tuple(np.float32(math.log(2) ** n / math.factorial(n)) for n in range(9))
LOG2E = np.float32(1 / math.log(2))


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


def exp2_f32(t: np.ndarray) -> np.ndarray:
    """``2**t`` in float32: ``2**floor(t)`` from its bits times the polynomial of the
    fraction; 0 below -126, infinity from 128. The float exp of every basic kernel (the C
    helpers ``npk_exp2`` and the softmax's ``EXP_F32`` compute the same)."""
    t = np.asarray(t, np.float32)
    with np.errstate(invalid="ignore"):
        return _exp2(t)


def _exp2(t: np.ndarray) -> np.ndarray:
    k = np.floor(np.clip(t, np.float32(-126), np.float32(127)))
    f = np.clip(t, np.float32(-126), np.float32(127)) - k
    p = np.full(f.shape, EXP2_POLY[-1], np.float32)
    for c in EXP2_POLY[-2::-1]:
        p = c + f * p
    scale = ((k.astype(np.int32) + 127) << 23).view(np.float32)
    out = (p * scale).astype(np.float32)
    out = np.where(t < np.float32(-126), np.float32(0), out)
    return np.where(t >= np.float32(128), np.float32(np.inf), out).astype(np.float32)


def exp_f32(x: np.ndarray) -> np.ndarray:
    """``e**x`` for float32 ``x <= 0`` as the softmax computes it: ``exp2_f32(t)`` with
    ``t = x * log2(e)``, 0 when ``floor(t) < -125``."""
    t = np.maximum(np.asarray(x, np.float32) * LOG2E, np.float32(-200))
    return np.where(np.floor(t) < -125, np.float32(0), exp2_f32(t))


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

    return BasicKernel(name, args, False, src, reference, lambda N, **_: 60 * N)
