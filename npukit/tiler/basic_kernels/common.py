"""The helpers every basic kernel shares: the ``BasicKernel`` record, GAP's type codes and
C type spellings, fixed-point arithmetic (GAP's ``AT_NORM``, bias alignment, ONNX Runtime's
requantisation, rounding to nearest even) and float32 arithmetic without libm (``exp2``,
``log2``, sigmoid, tanh, the activations), each as a numpy function next to the C helper that
computes the same values.

Two families of basic kernels use them:

- **the CNN library kernels** of the GAP AutoTiler (``npukit.tiler.cnn``), fixed point as
  GAP's ``CNN_BasicKernels*.c``: products summed in a 32-bit accumulator that wraps;
  ``AT_NORM(x, n) = (x + 2**(n-1)) >> n``; a bias in Q``b`` aligned to the accumulator's
  Q``(i+w)`` by a shift of ``i+w-b`` (rounded, ``AT_NORM``, when negative); results clipped to
  ``[LB, UB]`` as ``CNN_SetUpperLowerBounds`` sets them; taps outside the input read 0. Types
  ``CODES``: ``fp`` int16, ``fps`` int8, ``fpd`` int32, ``fl`` float32.
- **the layer kernels** (``npukit.tiler.layer_generators``, the ONNX lowering), float32, int8
  or uint8: float32 operations round to float32 in a stated order (the C is compiled with
  ``-ffp-contract=off``); integer products of zero-point-corrected values are summed in a
  wrapping int32 accumulator and requantised as ONNX Runtime's ``MlasRequantizeOutput``:
  ``q = clamp(rne(float(acc) * scale)) + zero_point``. Float parameters travel as their
  IEEE-754 bits in ``int`` arguments (``f32_bits``). Types ``LAYER_CODES``: ``fl`` float32,
  ``fps`` int8, ``u8`` uint8, ``fpd`` int32 (and, for a model's integer and bool tensors,
  ``fp`` int16, ``u16`` uint16, ``u32`` uint32, ``i64`` int64, ``u64`` uint64, ``b`` bool,
  and for casts ``f16`` float16, ``bf16`` bfloat16, ``fd`` float64); their C helpers
  (``HELPERS``) are defined once behind an include guard.

A kernel is named like GAP's (``KerConvDP_fp``; mixed types list each operand's code). Every
kernel is self-contained C, so a translation unit carries only the kernels it calls.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...c.ctype import hex_float
from ...dtypes import FACTS
from ...errors import DTypeError

# GAP's type codes: the CNN library kernels (Q-format fixed point, float32) ...
CODES = {"int8": "fps", "int16": "fp", "int32": "fpd", "float32": "fl"}
# ... and npukit's layer kernels (scale and zero point, float32).
LAYER_CODES = {"int8": "fps", "uint8": "u8", "int16": "fp", "uint16": "u16", "int32": "fpd",
               "uint32": "u32", "int64": "i64", "uint64": "u64", "bool": "b", "float32": "fl",
               "float16": "f16", "bfloat16": "bf16", "float64": "fd"}

# Activation codes (float layers; integer layers fold their activation into a clamp).
ACT_NONE, ACT_RELU, ACT_LEAKY, ACT_CLIP, ACT_SIGMOID, ACT_TANH, ACT_HSIGMOID, ACT_HSWISH = \
    range(8)
# Pooling operations (the CNN library's and the layers').
POOL_NONE, POOL_MAX, POOL_AVG = 0, 1, 2
# log2(m) = T * sum_k c_k S**k with T = (m-1)/(m+1), S = T*T: c_k = (2 / ln 2) / (2k + 1).
LOG2_POLY = tuple(np.float32(2 / math.log(2) / (2 * k + 1)) for k in range(8))
TANH_POLY = (np.float32(-1 / 3), np.float32(2 / 15), np.float32(-17 / 315))
RNE_MAGIC = np.float32(12582912.0)  # 1.5 * 2**23


@dataclass(frozen=True)
class BasicKernel:
    """A basic kernel as ``Model.LibKernel`` takes it."""

    name: str
    args: tuple[tuple[str, str], ...]  # (C type, C name)
    parallel: bool
    c_source: str
    reference: Callable
    cost: Callable
    # The reference over a tile of planes at once (``parallel.planes``): (the pointers'
    # strides from plane to plane it assumes, fn(*args, Feat)), or None (plane by plane).
    planes_reference: tuple | None = None


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


def layer_code(dt) -> str:
    """The layer kernels' GAP type code of ``dt`` (``LAYER_CODES``)."""
    name = np.dtype(dt).name
    if name not in LAYER_CODES:
        raise DTypeError(f"npukit layers: no kernels for {name}; "
                         f"supported: {list(LAYER_CODES)}")
    return LAYER_CODES[name]


def layer_suffix(*dtypes) -> str:
    """The layer kernels' GAP type suffix: one code when every operand has the same type, else
    one each."""
    codes = [layer_code(d) for d in dtypes]
    return codes[0] if len(set(codes)) == 1 else "_".join(codes)


def layer_c_type(dt) -> str:
    """The GAP spelling of ``dt``'s C type (``npukit.dtypes.FACTS``) for the types the layer
    kernels support."""
    layer_code(dt)
    return FACTS[np.dtype(dt).name].gap_c_type


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


def share_rows(core_var: str = "Rows") -> str:
    """C lines sharing ``Rows`` rows among the cores: ``First`` .. ``Last`` for this core."""
    return (f"    int Chunk = ({core_var} + gap_ncore() - 1) / gap_ncore();\n"
            f"    int First = gap_coreid() * Chunk;\n"
            f"    int Last = First + Chunk < {core_var} ? First + Chunk : {core_var};")


def zero_window(x: np.ndarray, top: int, left: int, rows: int, cols: int) -> np.ndarray:
    """``x`` placed at (top, left) in a zero array of at least rows x cols (zero padding)."""
    h, w = x.shape
    out = np.zeros((max(rows, top + h), max(cols, left + w)), x.dtype)
    out[top:top + h, left:left + w] = x
    return out

# -- float32 exp, shared by the softmaxes and the layer helpers ----------------------------

# 2**f on [0, 1): the degree-8 Taylor polynomial of e**(f ln 2), float32 coefficients.
EXP2_POLY = tuple(np.float32(math.log(2) ** n / math.factorial(n)) for n in range(9))
LOG2E = np.float32(1 / math.log(2))
# The largest float32 below 128: exp2's argument is clipped to it (2**127.99 is finite).
EXP2_TOP = np.nextafter(np.float32(128), np.float32(0))


def exp2_f32(t: np.ndarray) -> np.ndarray:
    """``2**t`` in float32: ``2**floor(t)`` from its bits times the polynomial of the
    fraction; 0 below -126, infinity from 128. The float exp of every basic kernel (the C
    helpers ``npk_exp2`` and the softmax's ``EXP_F32`` compute the same)."""
    t = np.asarray(t, np.float32)
    with np.errstate(invalid="ignore"):
        return _exp2(t)


def _exp2(t: np.ndarray) -> np.ndarray:
    k = np.floor(np.clip(t, np.float32(-126), EXP2_TOP))
    f = np.clip(t, np.float32(-126), EXP2_TOP) - k
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


# -- layer arithmetic: numpy twins of the C helpers (HELPERS) --------------------------------

def f32_bits(v: float) -> int:
    """The IEEE-754 bits of ``float32(v)`` as a signed int (how a float parameter travels)."""
    return int(np.array(v, np.float32).view(np.int32))


def bits_f32(b: int) -> np.float32:
    """The float32 whose IEEE-754 bits are ``b`` (``f32_bits`` inverted)."""
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


def fma_f32(x, y, z) -> np.ndarray:
    """float32 ``fma(x, y, z)``: ``x*y + z`` rounded once to float32 (``npk_fmaf`` in C).

    Exact for a result in float32's normal range. Proof: ``p = x*y`` in float64 is exact
    (24 + 24 significant bits <= 53); ``s = p + z`` rounded to float64 and TwoSum's ``e`` give
    ``p + z = s + e`` exactly. Rounding ``s`` to float32 rounds ``p + z`` correctly unless
    ``s`` lies on a float32 rounding boundary (a midpoint: its 29 bits below float32's
    precision are ``1000...0``): any boundary strictly between ``s`` and ``p + z`` would be a
    float64 nearer to ``p + z`` than ``s``. On a midpoint with ``e != 0``, ``s`` moved one
    float64 step towards ``e`` is off the boundary on the side of ``p + z``."""
    x, y, z = (np.asarray(v, np.float32).astype(np.float64) for v in (x, y, z))
    p = x * y
    s = np.asarray(p + z)
    b = s - p
    e = (p - (s - b)) + (z - b)
    bits = s.view(np.int64)
    mid = (bits & 0x1FFFFFFF) == 0x10000000
    step = np.where((e > 0) == (s > 0), 1, -1)
    bits = np.where(mid & (e != 0), bits + step, bits)
    return bits.view(np.float64).astype(np.float32)


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
    e = exp2_f32(-np.where(x < 0, -x, x) * LOG2E)  # as the C's |x| (a NaN keeps its sign)
    r = np.float32(1) / (np.float32(1) + e)
    return np.where(x >= 0, r, e / (np.float32(1) + e)).astype(np.float32)


def tanh_f32(x: np.ndarray) -> np.ndarray:
    """``tanh``: an odd Taylor polynomial below 1/16, ``(1 - e) / (1 + e)`` with
    ``e = e**(-2|x|)`` above."""
    x = np.asarray(x, np.float32)
    a = np.where(x < 0, -x, x)  # as the C's |x| (a NaN keeps its sign)
    s = x * x
    p = TANH_POLY[2]
    p = TANH_POLY[1] + s * p
    p = TANH_POLY[0] + s * p
    small = x + x * (s * p)
    e = exp2_f32(-(a + a) * LOG2E)
    big = (np.float32(1) - e) / (np.float32(1) + e)
    big = np.where(x < 0, -big, big)
    small = np.where(x == 0, x, small)  # tanh(-0) = -0
    return np.where(a < np.float32(0.0625), small, big).astype(np.float32)


def activate(v: np.ndarray, act: int, p0: int, p1: int) -> np.ndarray:
    """A float activation (``ACT_*``) with its parameters as bits."""
    v = np.asarray(v, np.float32)
    if act == ACT_RELU:  # NaN and -0 pass, as ONNX Runtime's Relu
        return np.where(v < 0, np.float32(0), v)
    if act == ACT_LEAKY:
        return np.where(v >= 0, v, v * bits_f32(p0))
    if act == ACT_CLIP:
        lo, hi = bits_f32(p0), bits_f32(p1)
        return np.where(v < lo, lo, np.where(v > hi, hi, v)).astype(np.float32)
    if act == ACT_SIGMOID:
        return sigmoid_f32(v)
    if act == ACT_TANH:
        return tanh_f32(v)
    if act in (ACT_HSIGMOID, ACT_HSWISH):  # ONNX's HardSigmoid(alpha, beta), x * it
        h = bits_f32(p0) * v + bits_f32(p1)
        h = np.where(h > 1, np.float32(1), np.where(h < 0, np.float32(0), h))
        return (h if act == ACT_HSIGMOID else v * h).astype(np.float32)
    return v


def horner_c(coefs, var: str, acc: str) -> str:
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
/* float32 fma(X, Y, Z) without libm, as fma_f32 computes it: X*Y exact in double, P + Z
   rounded to double with TwoSum's error E, and a double on a float32 midpoint moved one step
   towards E before the rounding to float32. */
static inline float npk_fmaf(float X, float Y, float Z)
{{
    union {{ double D; long long I; }} S;
    double P = (double)X * (double)Y, B, E;
    S.D = P + (double)Z;
    B = S.D - P;
    E = (P - (S.D - B)) + ((double)Z - B);
    if ((S.I & 0x1FFFFFFFLL) == 0x10000000LL && E != 0.0)
        S.I += (E > 0.0) == (S.D > 0.0) ? 1 : -1;
    return (float)S.D;
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
   infinity from 128 (T clipped to [-126, 128)). */
static inline float npk_exp2(float T)
{{
    union {{ unsigned int U; float F; }} S;
    float C = T < -126.0f ? -126.0f : T > {hex_float(EXP2_TOP)} ? {hex_float(EXP2_TOP)} : T;
    float K = (float)(int)C, F, P;
    if (K > C) K = K - 1.0f;
    F = C - K;
    {horner_c(EXP2_POLY, "F", "P")}
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
    {horner_c(LOG2_POLY, "S", "P")}
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
    if (X == 0.0f) return X; /* tanh(-0) = -0 */
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
/* A float activation: 0 none, 1 ReLU (NaN and -0 pass), 2 LeakyReLU(P0), 3 clip to
   [P0, P1], 4 sigmoid, 5 tanh, 6 hard sigmoid (P0 * V + P1 clipped to [0, 1]; NaN stays
   NaN), 7 hard swish (V times the hard sigmoid). */
static inline float npk_act(float V, int Act, float P0, float P1)
{{
    switch (Act) {{
    case 1: return V < 0.0f ? 0.0f : V;
    case 2: return V >= 0.0f ? V : V * P0;
    case 3: return V < P0 ? P0 : V > P1 ? P1 : V;
    case 4: return npk_sigmoid(V);
    case 5: return npk_tanh(V);
    case 6: {{ float H = P0 * V + P1; return H > 1.0f ? 1.0f : H < 0.0f ? 0.0f : H; }}
    case 7: {{ float H = P0 * V + P1; return V * (H > 1.0f ? 1.0f : H < 0.0f ? 0.0f : H); }}
    default: return V;
    }}
}}
#endif"""


# -- C text shared by the kernels' templates -------------------------------------------------

def c_signature(args) -> str:
    """A C parameter list from ``(C type, C name)`` pairs."""
    return ", ".join(f"{t} {n}" for t, n in args)


def c_unused(*names: str) -> str:
    """C statements marking parameters a variant of a kernel does not read."""
    return "".join(f"    (void){n};\n" for n in names)


# The filter shapes a convolution kernel runs a copy of its loops for, its tap counts and
# strides constants (most of a CNN's: 3x3 and 1x1 at stride 1, 3x3 at stride 2, without
# dilation), rather than leaving it to the compiler's cloning, which a larger file can change.
CONV_3X3 = ("3x3", dict(Fx=3, Fy=3, Sx=1, Sy=1, Dx=1, Dy=1))
CONV_SHAPES = (CONV_3X3,
               ("1x1", dict(Fx=1, Fy=1, Sx=1, Sy=1, Dx=1, Dy=1)),
               ("3x3s2", dict(Fx=3, Fy=3, Sx=2, Sy=2, Dx=1, Dy=1)))


def c_copies(fn: str, params, shapes, ret: str = "void") -> str:
    """C of the copies of always-inline function ``fn`` (parameters ``params``, (C type, name)
    pairs; returning ``ret``) that ``c_pick_copy(separate=True)`` calls: ``{fn}_{tag}`` for
    each ``(tag, constants)`` of ``shapes``, calling ``fn`` with those parameters constant,
    and ``{fn}_Any``, as it is.

    Each copy is a function of its own, not inlined: a kernel that inlined its copies was one
    function of all their code, on which gcc's data-flow and register allocation passes take
    time growing faster than its size (the cnn10 float32 model's host C,
    benchmarks/onnx_cnn.py at 32x32: 8.1 s to compile with them inline, 4.3 s as functions
    of their own)."""
    def copy(tag: str, constants: dict) -> str:
        call = ", ".join(str(constants.get(n, n)) for _, n in params)
        unused = c_unused(*(n for _, n in params if n in constants))
        result = "" if ret == "void" else "return "
        return c_skippable(f"{fn}_{tag}", f"static NPK_NOINLINE {ret} {fn}_{tag}("
                           f"{c_signature(params)})\n{{\n{unused}    {result}{fn}({call});\n}}")
    return "\n\n".join(copy(tag, constants) for tag, constants in (*shapes, ("Any", {})))


def c_skippable(name: str, text: str, otherwise: str = "", when: str = "") -> str:
    """``text`` (C lines) between the guards by which ``npukit.c.pieces.prune`` leaves out
    the code of copy ``name`` of a kernel where no call of the program can reach it
    (``otherwise``: what stands in for it then; ``when``: a C condition on the kernel's
    parameters without which the code is not reached); compiled whole elsewhere."""
    rest = f"#else\n{otherwise}\n" if otherwise else ""
    note = f" /* when: {when} */" if when else ""
    return f"#ifndef NPK_SKIP_{name}{note}\n{text}\n{rest}#endif /* NPK_SKIP_{name} */"


def c_pick_copy(fn: str, params, shapes, margin: str, given=None, ret: str = "void",
                separate: bool = True, otherwise: str = "", when: str = "",
                then: str = "") -> str:
    """C calling always-inline function ``fn`` (parameters ``params``) with the constants of
    the first of ``shapes`` whose values the arguments have, else as it is; each argument is
    its parameter's name unless ``given``; returning the call's value unless ``ret`` is void;
    each line after ``margin``. ``separate``: through the copies ``c_copies`` defines, else
    ``fn`` itself, inlined with the constants (for a small kernel called many times on small
    tiles, whose callers' constant arguments gcc then specialises it to as a whole: the
    GAP tile schedule of cnn10 at 224x224 ran 8% slower through separate copies). ``then``:
    a statement after each call (``return;``).

    Each shape's test and call is ``c_skippable`` (named ``{fn}_{tag}``; ``when``: the C
    condition under which the caller reaches these lines): a program none of whose calls
    can pass that shape is compiled without it, its arguments going on to the next test.
    ``otherwise``: a statement that may stand in for the call as it is (code computing the
    same another way), which makes that call skippable too."""
    given = given or {}
    result = "" if ret == "void" else "return "
    after = f"\n{margin}    {then}" if then else ""

    def call(tag: str, constants: dict) -> str:
        if separate:
            return f"{result}{fn}_{tag}({', '.join(given.get(n, n) for _, n in params)});"
        args = ", ".join(str(constants.get(n, given.get(n, n))) for _, n in params)
        return f"{result}{fn}({args});"
    blocks = []
    for tag, constants in shapes:
        test = " && ".join(f"{n} == {v}" for n, v in constants.items())
        opened, closed = (" {", "} ") if then else ("", "")
        blocks.append(c_skippable(f"{fn}_{tag}", f"{margin}if ({test}){opened}\n{margin}    "
                                  f"{call(tag, constants)}{after}\n{margin}{closed}else",
                                  when=when))
    last = margin + call("Any", {}) + (f"\n{margin}{then}" if then else "")
    blocks.append(c_skippable(f"{fn}_Any", last, margin + otherwise, when) if otherwise
                  else last)
    return "\n".join(blocks)


def _ceil_div_pos(a: int, b: int) -> int:
    return -(-a // b)


def tap_range(W: int, Wo: int, S: int, off: int) -> tuple[int, int]:
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


def c_filter_rows(line_ok: str, margin: str) -> str:
    """C finding, for an output row whose first filter row reads padded input row ``P0``, the
    filter rows ``Fy0 <= fy < Fy1`` whose input line exists (``line_ok`` of ``P`` and ``L``,
    its line in the tile); each line starts with ``margin``, the template's spaces there."""
    return "\n".join(margin + line for line in f"""\
/* The filter rows Fy0 <= fy < Fy1 whose input line exists (p grows with fy, so
   they follow each other); the others add nothing. */
for (; Fy0 < Fy; Fy0++) {{
    int P = P0 + Fy0 * Dy, L = P - InRow0;
    if ({line_ok}) break;
}}
for (Fy1 = Fy0; Fy1 < Fy; Fy1++) {{
    int P = P0 + Fy1 * Dy, L = P - InRow0;
    if (!({line_ok})) break;
}}""".splitlines())



# float32 or int32 lanes of an AVX-512 register: the columns a layer kernel's vector covers.
LANES = 16

AVX512_HELPERS = f"""\
#ifndef NPK_AVX512_HELPERS
#define NPK_AVX512_HELPERS
/* ---- AVX-512 (F, BW, VL) for the layer kernels' register blocks, when the compiler targets
   it (-march=native on such a host); the plain loops otherwise. A lane computes what the plain
   loop computes for its element, in the same order; masked lanes are neither read nor
   written. ---- */
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
/* (Declared with default visibility: inside the basic kernels' hidden block, the C library
   functions this header declares, getenv among them, would bind to hidden symbols.) */
#pragma GCC visibility push(default)
#include <immintrin.h>
#pragma GCC visibility pop
#define NPK_AVX512 1
#define NPK_ALWAYS_INLINE __attribute__((always_inline))
/* The lanes i of a vector at columns C .. C+{LANES - 1} of a row of N elements for which
   0 <= C + i < N. */
static inline __mmask16 npk_cols(int C, int N)
{{
    int Lo = C < 0 ? -C : 0, Hi = N - C;
    Lo = Lo < {LANES} ? Lo : {LANES};
    Hi = Hi < Lo ? Lo : Hi < {LANES} ? Hi : {LANES};
    return (__mmask16)(((1u << Hi) - 1u) & ~((1u << Lo) - 1u));
}}
/* The lanes i of a vector reading every S-th column from C (C, C+S, ..., C+{LANES - 1}S) of a
   row of N elements for which 0 <= C + S*i < N. */
static inline __mmask16 npk_cols_step(int C, int N, int S)
{{
    int Lo = C < 0 ? (S - 1 - C) / S : 0, Hi = N > C ? (N - C + S - 1) / S : 0;
    Lo = Lo < {LANES} ? Lo : {LANES};
    Hi = Hi < Lo ? Lo : Hi < {LANES} ? Hi : {LANES};
    return (__mmask16)(((1u << Hi) - 1u) & ~((1u << Lo) - 1u));
}}
/* Lane i: P[2i], the even lanes of P[0 .. 31], Lo and Hi the lanes of P[0 .. 15] and
   P[16 .. 31] to read (the others 0). */
static inline __m512 npk_even_ps(const float *P, __mmask16 Lo, __mmask16 Hi)
{{
    const __m512i Even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                           28, 30);
    return _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(Lo, P), Even,
                                  _mm512_maskz_loadu_ps(Hi, P + {LANES}));
}}
/* Byte i: P[2i], the low byte of each 16-bit pair of P[0 .. 31], Lo and Hi the bytes of
   P[0 .. 15] and P[16 .. 31] to read (the others 0). */
static inline __m128i npk_even_epi8(const void *P, __mmask16 Lo, __mmask16 Hi)
{{
    return _mm256_cvtepi16_epi8(_mm256_maskz_loadu_epi8((__mmask32)Lo | (__mmask32)Hi << {LANES},
                                                        P));
}}
#elif defined(__GNUC__)
#define NPK_ALWAYS_INLINE __attribute__((always_inline))
#else
#define NPK_ALWAYS_INLINE
#endif
#endif"""
