"""float32 functions computed in float64 and rounded to float32 once: ``sin``, ``cos``,
``tan`` with an exact reduction of the argument by pi/2, ``sinh`` and ``cosh`` finite
wherever their float32 value is. Each is a numpy function next to the C helper that
computes the same float64 operations in the same order (the C is compiled with
``-ffp-contract=off``), so the simulator and the C agree bit for bit; no libm.

The reduction (Payne and Hanek's idea, in float64): ``2/pi`` is split into ``CHUNKS`` pieces
of 24 bits, so that ``x * piece`` is exact for a float32 ``x``; each product is taken modulo
4 (exact) and the pieces summed with the rounding error of every addition kept (TwoSum): the
quarter turns of ``x`` modulo 4, with some 100 correct bits, for every finite float32.

>>> float(trig_f32(np.float32(1e10), SIN))  # ONNX Runtime: -0.48750603
-0.48750603199005127
"""

from __future__ import annotations

import math

import numpy as np

SIN, COS, TAN = 0, 1, 2
SINH, COSH = 0, 1


def _two_over_pi_bits(bits: int) -> int:
    """floor(2/pi * 2**bits), from Machin's formula in integers."""
    one = 1 << (bits + 16)

    def atan_inv(n: int) -> int:
        total, term, k, sign = 0, one // n, 1, 1
        while term:
            total += sign * (term // k)
            term //= n * n
            k += 2
            sign = -sign
        return total

    pi = 16 * atan_inv(5) - 4 * atan_inv(239)
    return (2 * one << bits) // pi


CHUNKS = 10
_BITS = _two_over_pi_bits(24 * CHUNKS)
# 2/pi = sum of PIECES (each 24 bits of it, as an exact float64), to 2**-240.
PIECES = tuple(math.ldexp((_BITS >> (24 * (CHUNKS - 1 - i))) & 0xFFFFFF, -24 * (i + 1))
               for i in range(CHUNKS))
PIO2 = math.pi / 2
# sin t = t + t * s * SIN_POLY(s), cos t = 1 + s * COS_POLY(s), s = t*t, |t| <= pi/4:
# Taylor to t**17 and t**18 (remainders below 1e-18).
SIN_POLY = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(1, 9))
COS_POLY = tuple((-1) ** k / math.factorial(2 * k) for k in range(1, 10))
# e**y = 2**k * e**r, r = y - k*ln 2 in two parts (k * LN2_HI exact for k < 2**11), |r| <=
# 0.35: Taylor to r**14. sinh below 0.5: Taylor to x**17.
LN2_HI = float.fromhex("0x1.62e42fefa3800p-1")
LN2_LO = math.log(2) - LN2_HI
INV_LN2 = 1 / math.log(2)
EXP_POLY = tuple(1 / math.factorial(n) for n in range(15))
SINH_POLY = tuple(1 / math.factorial(2 * k + 1) for k in range(1, 9))
TINY = 2.0 ** -12  # below: sin x and tan x round to x, cos x to 1
HYP_MAX = 90.0  # from here sinh and cosh overflow float32


def _horner(s, coefs):
    p = coefs[-1]
    for c in coefs[-2::-1]:
        p = c + s * p
    return p


def _mod4(p):
    return p - 4.0 * np.floor(p * 0.25)


def trig_f32(x, which: int) -> np.ndarray:
    """sin (``SIN``), cos (``COS``) or tan (``TAN``) of float32 ``x``, computed in float64
    and rounded once: within 1e-15 of the exact value before the rounding."""
    x = np.asarray(x, np.float32)
    with np.errstate(all="ignore"):
        a = np.abs(x.astype(np.float64))
        ok = (a >= TINY) & (a < np.inf)
        a = np.where(ok, a, 1.0)
        hi = np.zeros_like(a)
        lo = np.zeros_like(a)
        for piece in PIECES:
            p = _mod4(a * piece)
            s = hi + p
            bb = s - hi
            lo = lo + ((hi - (s - bb)) + (p - bb))
            hi = _mod4(s)
        q = np.floor(hi + 0.5)
        t = ((hi - q) + lo) * PIO2
        q = q - 4.0 * np.floor(q * 0.25)
        s = t * t
        sin_t = t + t * (s * _horner(s, SIN_POLY))
        cos_t = 1.0 + s * _horner(s, COS_POLY)
        if which == COS:
            v = np.where(q == 0.0, cos_t, np.where(q == 1.0, -sin_t,
                                                   np.where(q == 2.0, -cos_t, sin_t)))
        else:
            v = np.where(q == 0.0, sin_t, np.where(q == 1.0, cos_t,
                                                   np.where(q == 2.0, -sin_t, -cos_t)))
            if which == TAN:
                c = np.where(q == 0.0, cos_t, np.where(q == 1.0, -sin_t,
                                                       np.where(q == 2.0, -cos_t, sin_t)))
                v = v / c
            v = np.where(x < 0, -v, v)
        v = v.astype(np.float32)
        edge = np.where(np.abs(x) < TINY, np.float32(1) if which == COS else x, x - x)
        return np.where(ok, v, edge).astype(np.float32)


def _exp(y):
    """e**y for 0 <= y < HYP_MAX in float64."""
    k = np.floor(y * INV_LN2 + 0.5)
    r = (y - k * LN2_HI) - k * LN2_LO
    scale = ((k.astype(np.int64) + 1023) << 52).view(np.float64)
    return _horner(r, EXP_POLY) * scale


def hyp_f32(x, which: int) -> np.ndarray:
    """sinh (``SINH``) or cosh (``COSH``) of float32 ``x``, computed in float64 and rounded
    once (infinite only where the float32 value is)."""
    x = np.asarray(x, np.float32)
    with np.errstate(all="ignore"):
        d = x.astype(np.float64)
        a = np.abs(d)
        ok = a < HYP_MAX
        e = _exp(np.where(ok, a, 0.0))
        if which == SINH:
            s = d * d
            small = d + d * (s * _horner(s, SINH_POLY))
            big = (e - 1.0 / e) * 0.5
            v = np.where(a < 0.5, small, np.where(d < 0, -big, big))
            edge = np.where(d < 0, -np.inf, np.inf)
        else:
            v = (e + 1.0 / e) * 0.5
            edge = np.full(d.shape, np.inf)
        v = np.where(ok, v, np.where(np.isnan(d), d, edge))
        return v.astype(np.float32)


def _d(v: float) -> str:
    """The float64 C constant of ``v``, exact (C99 hexadecimal)."""
    return float(v).hex()


def _horner_c(coefs, var: str, acc: str) -> str:
    """C statements: ``acc = c_n; acc = c_{n-1} + var * acc; ...`` (float64 Horner)."""
    lines = [f"{acc} = {_d(coefs[-1])};"]
    lines += [f"{acc} = {_d(c)} + {var} * {acc};" for c in coefs[-2::-1]]
    return "\n    ".join(lines)


_PIECES_C = ", ".join(_d(p) for p in PIECES)

C_HELPERS = f"""\
#ifndef NPK_DOUBLE_HELPERS
#define NPK_DOUBLE_HELPERS
/* ---- float32 functions computed in float64 and rounded once (the same operations as
   npukit.tiler.basic_kernels.double's numpy functions) ---- */
/* floor of a double without libm: exact (a double of magnitude 2^52 or more is an
   integer). */
static inline double npk_dfloor(double V)
{{
    double T;
    if (!(V < 4503599627370496.0 && V > -4503599627370496.0)) return V;
    T = (double)(long long)V;
    return T > V ? T - 1.0 : T;
}}
static inline double npk_dmod4(double P)
{{
    return P - 4.0 * npk_dfloor(P * 0.25);
}}
/* sin (Which 0), cos (1) or tan (2) of X: the quarter turns of |X| modulo 4 from 2/pi in
   24-bit pieces (each product exact), summed with their rounding errors; a Taylor
   polynomial of the remainder. */
static inline float npk_trig(float X, int Which)
{{
    static const double Pieces[{CHUNKS}] = {{{_PIECES_C}}};
    double A = X < 0.0f ? -(double)X : (double)X, Hi = 0.0, Lo = 0.0, Q, T, S, Ps, Pc;
    double SinT, CosT, V, C;
    if (!(A < 1.0 / 0.0)) return X - X; /* infinity or NaN: NaN */
    if (A < {_d(TINY)}) return Which == 1 ? 1.0f : X;
    for (int I = 0; I < {CHUNKS}; I++) {{
        double P = npk_dmod4(A * Pieces[I]), Sum = Hi + P, Bb = Sum - Hi;
        Lo = Lo + ((Hi - (Sum - Bb)) + (P - Bb));
        Hi = npk_dmod4(Sum);
    }}
    Q = npk_dfloor(Hi + 0.5);
    T = ((Hi - Q) + Lo) * {_d(PIO2)};
    Q = Q - 4.0 * npk_dfloor(Q * 0.25);
    S = T * T;
    {_horner_c(SIN_POLY, "S", "Ps")}
    {_horner_c(COS_POLY, "S", "Pc")}
    SinT = T + T * (S * Ps);
    CosT = 1.0 + S * Pc;
    C = Q == 0.0 ? CosT : Q == 1.0 ? -SinT : Q == 2.0 ? -CosT : SinT;
    if (Which == 1) return (float)C;
    V = Q == 0.0 ? SinT : Q == 1.0 ? CosT : Q == 2.0 ? -SinT : -CosT;
    if (Which == 2) V = V / C;
    return (float)(X < 0.0f ? -V : V);
}}
/* e^Y for 0 <= Y < {HYP_MAX:g}: 2^K from its bits times a Taylor polynomial of the remainder. */
static inline double npk_dexp(double Y)
{{
    union {{ long long I; double D; }} Scale;
    double K = npk_dfloor(Y * {_d(INV_LN2)} + 0.5), R, P;
    R = (Y - K * {_d(LN2_HI)}) - K * {_d(LN2_LO)};
    Scale.I = ((long long)K + 1023) << 52;
    {_horner_c(EXP_POLY, "R", "P")}
    return P * Scale.D;
}}
/* sinh (Which 0) or cosh (1) of X. */
static inline float npk_hyp(float X, int Which)
{{
    double D = (double)X, A = D < 0.0 ? -D : D, E, S, P, V;
    if (!(A < {_d(HYP_MAX)})) {{
        if (D != D) return X;
        return Which == 0 && D < 0.0 ? -(float)(1.0 / 0.0) : (float)(1.0 / 0.0);
    }}
    E = npk_dexp(A);
    if (Which == 1) return (float)((E + 1.0 / E) * 0.5);
    if (A < 0.5) {{
        S = D * D;
        {_horner_c(SINH_POLY, "S", "P")}
        return (float)(D + D * (S * P));
    }}
    V = (E - 1.0 / E) * 0.5;
    return (float)(D < 0.0 ? -V : V);
}}
#endif"""
