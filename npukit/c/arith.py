"""The target's arithmetic (``npukit.arith``) as C: one lane of every instruction as a C
expression, and the small ``static inline`` helpers those expressions call.

Integer partials wrap around in 32 bits: sums and products are formed in ``uint32_t``,
whose arithmetic is modulo 2^32 like ``arith.wrap32``, and converted back to ``int32_t``
(gcc defines that conversion as modulo). ``rescale_clamp`` works in 64 bits, also with
unsigned wrap-around where numpy's int64 would wrap. Floats round once per operation: the
generated code must be compiled with ``-ffp-contract=off`` (no fused multiply-add).

>>> h = Helpers()
>>> alu_expr(h, "mul", [("a", np.dtype("int8")), ("b", np.dtype("int8"))], np.dtype("int32"))
'npk_wrap32((uint32_t)(a) * (uint32_t)(b))'
"""

from __future__ import annotations

import numpy as np

from ..arith import act_bounds
from ..arith_vec import MORE_OPS
from ..dtypes import int_range, is_float
from ..errors import DTypeError
from .arith_vec import vec_expr_more
from .ctype import c_type, float_literal, int_literal, is_bf16

_F32 = np.dtype("float32")

# name -> (C definition, helpers it calls). Emitted on demand, in this order.
_DEFS: dict[str, tuple[str, tuple[str, ...]]] = {
    "npk_wrap32": ("""\
/* int32 partials wrap around like the target's 32-bit adders (gcc converts modulo 2^32). */
static inline int32_t npk_wrap32(uint32_t x) { return (int32_t)x; }""", ()),
    "npk_u64_to_i64_sat": ("""\
/* uint64 -> int64, saturated: a value past INT64_MAX is past every bound a store into a
   narrower type or int64 clamps to (arith.convert). */
static inline int64_t npk_u64_to_i64_sat(uint64_t x)
{
    return x > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)x;
}""", ()),
    "npk_min64": ("""\
static inline int64_t npk_min64(int64_t a, int64_t b) { return a < b ? a : b; }""", ()),
    "npk_max64": ("""\
static inline int64_t npk_max64(int64_t a, int64_t b) { return a > b ? a : b; }""", ()),
    "npk_f2i32": ("""\
/* A float lane to int32 as the Compass DSL's S.cast reads it (arith.vec_cast): truncated
   toward zero (C's own conversion, defined once the value is inside int32), NaN -> 0,
   saturated to int32. */
static inline int32_t npk_f2i32(double x)
{
    if (x != x)
        return 0;
    return x <= -2147483648.0 ? INT32_MIN : x >= 2147483647.0 ? INT32_MAX : (int32_t)x;
}""", ()),
    "npk_f2i32_floor": ("""\
/* Act to_fixed (arith.to_fixed): floor(x * scale), NaN -> 0, saturated to int32. */
static inline int32_t npk_f2i32_floor(double x, double scale)
{
    double t = floor(x * scale);
    if (t != t)
        return 0;
    return t < -2147483648.0 ? INT32_MIN : t > 2147483647.0 ? INT32_MAX : (int32_t)t;
}""", ()),
    "npk_clamp64": ("""\
/* clamp(x, lo, hi) as numpy.clip: max with lo first, then min with hi. */
static inline int64_t npk_clamp64(int64_t x, int64_t lo, int64_t hi)
{
    x = x < lo ? lo : x;
    return x > hi ? hi : x;
}""", ()),
    "npk_clampf": ("""\
/* numpy.clip on float32: NaN stays NaN, a value equal to a bound is kept as is. */
static inline float npk_clampf(float x, float lo, float hi)
{
    x = x < lo ? lo : x;
    return x > hi ? hi : x;
}""", ()),
    "npk_maxf": ("""\
/* numpy.maximum on float32: NaN wins, equal values give the second operand. */
static inline float npk_maxf(float a, float b) { return a != a ? a : (a > b ? a : b); }""", ()),
    "npk_minf": ("""\
/* numpy.minimum on float32: NaN wins, equal values give the second operand. */
static inline float npk_minf(float a, float b) { return a != a ? a : (a < b ? a : b); }""", ()),
    "npk_floordiv": ("""\
/* Floor division and its non-negative remainder by a positive constant, as Python's. */
static inline int64_t npk_floordiv(int64_t a, int64_t m) { return a / m - (a % m < 0); }""", ()),
    "npk_mod": ("""\
static inline int64_t npk_mod(int64_t a, int64_t m) { return a % m + (a % m < 0 ? m : 0); }""",
                ()),
    "npk_bf16_from_f32": ("""\
/* float32 -> bfloat16 bits rounded to nearest even (a carry into the exponent gives the next
   power of two or infinity); a NaN becomes the quiet NaN 0x7FC0, sign kept. */
static inline npk_bfloat16 npk_bf16_from_f32(float f)
{
    union { float f; uint32_t u; } v;
    v.f = f;
    if ((v.u & 0x7FFFFFFFu) > 0x7F800000u)
        return (npk_bfloat16)((v.u >> 16 & 0x8000u) | 0x7FC0u);
    return (npk_bfloat16)((v.u + 0x7FFFu + (v.u >> 16 & 1u)) >> 16);
}""", ()),
    "npk_bf16_from_f64": ("""\
/* double -> bfloat16 bits rounded once to nearest even from the exact value, as
   floats.bfloat16_bits: the 53-bit significand m (value m * 2^(e-52)) cut at bfloat16's
   last place, 2^(e-7), or 2^-133 below its normal range; a carry out of the 8 kept bits
   steps into the next binade, past the largest finite value into infinity; a NaN becomes
   the quiet NaN 0x7FC0, sign kept. Integer arithmetic only: no float rounding mode or
   flush-to-zero can change it. */
static inline npk_bfloat16 npk_bf16_from_f64(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    const int64_t sign = (int64_t)(u >> 48 & 0x8000u), e64 = (int64_t)(u >> 52 & 0x7FFu);
    const int64_t mant = (int64_t)(u & 0xFFFFFFFFFFFFFu);
    if (e64 == 0x7FF)
        return (npk_bfloat16)(sign | (mant ? 0x7FC0 : 0x7F80));
    const int64_t m = e64 ? mant | (INT64_C(1) << 52) : mant, e = e64 ? e64 - 1023 : -1022;
    const int64_t ep = e > -126 ? e : -126, s = ep - e + 45 < 60 ? ep - e + 45 : 60;
    int64_t r = m >> s;
    const int64_t rem = m & ((INT64_C(1) << s) - 1), half = INT64_C(1) << (s - 1);
    r += rem > half || (rem == half && (r & 1));
    const int64_t bits = ((ep + 126) << 7) + r;
    return (npk_bfloat16)(sign | (bits < 0x7F80 ? bits : 0x7F80));
}""", ()),
    "npk_f64_odd_u64": ("""\
/* A 64-bit magnitude as a double rounded to odd (floats.exact_float64): exact below 2^53,
   else its top bits with the last one set when any bit below is, which rounds to
   bfloat16 as the integer itself does. */
static inline double npk_f64_odd_u64(uint64_t m)
{
    if (m >> 53)
        m = (m >> 11 | (uint64_t)((m & 0x7FFu) != 0)) << 11;
    return (double)m;
}""", ()),
    "npk_bf16_from_i64": ("""\
/* int64 -> bfloat16 bits, rounded once to nearest even. */
static inline npk_bfloat16 npk_bf16_from_i64(int64_t x)
{
    const double d = npk_f64_odd_u64(x < 0 ? 0u - (uint64_t)x : (uint64_t)x);
    return npk_bf16_from_f64(x < 0 ? -d : d);
}""", ("npk_f64_odd_u64", "npk_bf16_from_f64")),
    "npk_bf16_from_u64": ("""\
/* uint64 -> bfloat16 bits, rounded once to nearest even. */
static inline npk_bfloat16 npk_bf16_from_u64(uint64_t x)
{
    return npk_bf16_from_f64(npk_f64_odd_u64(x));
}""", ("npk_f64_odd_u64", "npk_bf16_from_f64")),
    "npk_bf16_to_f32": ("""\
/* bfloat16 bits -> float32: exact (the bits are the top half of the float32). */
static inline float npk_bf16_to_f32(npk_bfloat16 b)
{
    union { uint32_t u; float f; } v;
    v.u = (uint32_t)b << 16;
    return v.f;
}""", ()),
    "npk_f16_from_bits": ("""\
/* float16 bits -> float32, exact, in integer arithmetic (gcc vectorises it; it does not
   vectorise _Float16 conversions): a normal number's exponent is rebiased, a subnormal
   m * 2^-24 is computed from its integer m (no float32 subnormal is ever touched, so
   flush-to-zero modes cannot change it), infinities and NaNs keep their payload. */
static inline float npk_f16_from_bits(uint16_t h)
{
    const uint32_t em = (uint32_t)(h & 0x7FFFu) << 13; /* exponent and mantissa */
    uint32_t u = em >= 0x0F800000u ? em | 0x7F800000u : em + 0x38000000u;
    float f;
    memcpy(&f, &u, sizeof f);
    f = em < 0x00800000u ? (float)(int32_t)(h & 0x3FFu) * 5.9604644775390625e-8f : f;
    memcpy(&u, &f, sizeof u);
    u |= (uint32_t)(h & 0x8000u) << 16; /* the sign */
    memcpy(&f, &u, sizeof f);
    return f;
}""", ()),
    "npk_f16_to_bits": ("""\
/* float32 -> float16 bits, rounded to nearest even as a float16 conversion does (NaN: quiet,
   payload kept, sign kept), in integer arithmetic that gcc vectorises: a normal result is
   the rebiased exponent and mantissa plus half an ulp (ties to even), a subnormal one is
   the low bits of |f| + 0.5, rounded by the float addition itself. */
static inline uint16_t npk_f16_to_bits(float f)
{
    uint32_t x, t;
    memcpy(&x, &f, sizeof x);
    const uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7FFFFFFFu;
    float a;
    memcpy(&a, &x, sizeof a);
    a = a + 0.5f;
    memcpy(&t, &a, sizeof t);
    const uint32_t tiny = t - 0x3F000000u;                      /* |f| < 2^-14 */
    const uint32_t normal = (x - 0x37FFF001u + ((x >> 13) & 1u)) >> 13;
    const uint32_t big = x > 0x7F800000u ? 0x7E00u | ((x >> 13) & 0x3FFu) : 0x7C00u;
    const uint32_t h = x >= 0x47800000u ? big : x < 0x38800000u ? tiny : normal;
    return (uint16_t)(h | sign);
}""", ()),
    "npk_f16_round": ("""\
/* float32 rounded to float16 (nearest even), as a float: the value a float16 lane holds. */
static inline float npk_f16_round(float f) { return npk_f16_from_bits(npk_f16_to_bits(f)); }""",
                      ("npk_f16_from_bits", "npk_f16_to_bits")),
    "npk_f16_load_bits": ("""\
/* The bits of a float16 tensor element (any address). */
static inline uint16_t npk_f16_load_bits(const npk_float16_any *p)
{
    uint16_t h;
    memcpy(&h, (const void *)p, sizeof h);
    return h;
}""", ()),
    "npk_f16_load": ("""\
/* A float16 tensor element as its exact float32 value. */
static inline float npk_f16_load(const npk_float16_any *p)
{
    return npk_f16_from_bits(npk_f16_load_bits(p));
}""", ("npk_f16_from_bits", "npk_f16_load_bits")),
    "npk_f16_store_bits": ("""\
/* Write float16 bits into a tensor element (any address). */
static inline void npk_f16_store_bits(npk_float16_any *p, uint16_t h)
{
    memcpy((void *)p, &h, sizeof h);
}""", ()),
    "npk_f16_store": ("""\
/* Store a float32 into a float16 tensor element, rounded to nearest even. */
static inline void npk_f16_store(npk_float16_any *p, float f)
{
    npk_f16_store_bits(p, npk_f16_to_bits(f));
}""", ("npk_f16_to_bits", "npk_f16_store_bits")),
    "npk_opaque": ("""\
/* The address p, hidden from the optimiser, so that a memcpy out of a constant reads its
   bytes at run time: gcc 12.2 with AVX-512 (-march=native) folds a memcpy of 32 or 64
   constant bytes whose leading bytes repeat one value and whose others are zero into a
   broadcast of that value (wrong code: a 32-lane mask with its first 16 lanes true read
   as all true). */
static inline const void *npk_opaque(const void *p)
{
#if defined(__GNUC__)
    __asm__("" : "+r"(p));
#endif
    return p;
}""", ()),
    "npk_poison_complex64": ("""\
/* The simulator's poison for complex64 lanes: 0xA5 in every byte. */
static inline float _Complex npk_poison_complex64(void)
{
    union { unsigned char b[sizeof(float _Complex)]; float _Complex z; } v;
    for (unsigned k = 0; k < sizeof v.b; k++)
        v.b[k] = 0xA5;
    return v.z;
}""", ()),
    "npk_poison_complex128": ("""\
/* The simulator's poison for complex128 lanes: 0xA5 in every byte. */
static inline double _Complex npk_poison_complex128(void)
{
    union { unsigned char b[sizeof(double _Complex)]; double _Complex z; } v;
    for (unsigned k = 0; k < sizeof v.b; k++)
        v.b[k] = 0xA5;
    return v.z;
}""", ()),
}

_ROUNDING_DOC = {
    "half_up": "adds 2^(shift-1) first: ties round towards +inf",
    "half_even": "adds 2^(shift-1) first, then a tie that landed on an odd result steps back",
    "floor": "a plain arithmetic shift: rounds towards -inf",
}


def _shift_round_def(mode: str) -> str:
    body = {
        "floor": "    return t >> shift;",
        "half_up": """\
    int64_t round = shift ? (int64_t)1 << (shift - 1) : 0;
    return (int64_t)((uint64_t)t + (uint64_t)round) >> shift;""",
        "half_even": """\
    if (shift == 0)
        return t;
    int64_t half = (int64_t)1 << (shift - 1);
    int64_t out = (int64_t)((uint64_t)t + (uint64_t)half) >> shift;
    int64_t tie = (t & (((int64_t)1 << shift) - 1)) == half;
    return out - (tie & out & 1);""",
    }[mode]
    return (f"/* t >> shift rounded {mode}: {_ROUNDING_DOC[mode]} (arith.shift_round). */\n"
            f"static inline int64_t npk_shift_round_{mode}(int64_t t, int shift)\n{{\n"
            f"{body}\n}}")


def _rescale_def(mode: str) -> str:
    return f"""\
/* Act rescale_clamp on integer partials (arith.rescale_clamp), in 64 bits:
   clamp(shift_round((p + bias) * scale) + zero_point, lo, hi), wrapping around where
   numpy's int64 does. lo and hi lie in int32 (arith.act_bounds), so the result is exact in
   int32, the Act's output. */
static inline int32_t npk_rescale_clamp_{mode}(int64_t p, int64_t bias, int64_t scale,
                                               int shift, int64_t zero_point,
                                               int64_t lo, int64_t hi)
{{
    int64_t t = (int64_t)(((uint64_t)p + (uint64_t)bias) * (uint64_t)scale);
    t = npk_shift_round_{mode}(t, shift);
    t = (int64_t)((uint64_t)t + (uint64_t)zero_point);
    return (int32_t)npk_clamp64(t, lo, hi);
}}"""


def _rescale32_def(mode: str) -> str:
    body = {
        "floor": """\
    int32_t t = (p + bias) * scale;
    t = (t >> shift) + zero_point;""",
        "half_up": """\
    int32_t round = shift ? (int32_t)1 << (shift - 1) : 0;
    int32_t t = (p + bias) * scale;
    t = ((t + round) >> shift) + zero_point;""",
        "half_even": """\
    int32_t half = shift ? (int32_t)1 << (shift - 1) : 0;
    uint32_t mask = shift ? (1u << shift) - 1u : 0u;
    int32_t t = (p + bias) * scale;
    int32_t tie = shift != 0 && ((uint32_t)t & mask) == (uint32_t)half;
    int32_t out = (t + half) >> shift;
    t = out - (tie & out & 1) + zero_point;""",
    }[mode]
    return f"""\
/* rescale_clamp in 32-bit lanes: the same results as npk_rescale_clamp_{mode} whenever
   npk_rescale_fits_int32 holds for the partials' range and this bias and scale (nothing
   can overflow then), with twice the lanes per vector. */
static inline int32_t npk_rescale_clamp_{mode}_i32(int32_t p, int32_t bias, int32_t scale,
                                                   int shift, int32_t zero_point,
                                                   int32_t lo, int32_t hi)
{{
{body}
    t = t < lo ? lo : t;
    return t > hi ? hi : t;
}}"""


_FITS32 = """\
/* True when, for every partial p in [p_lo, p_hi], each step of rescale_clamp with this bias
   and scale stays inside int32: p + bias, (p + bias) * scale, that plus round (0 when
   rounding down), the shifted value (one less after a half_even tie) plus the zero point.
   The products are exact in int64 because both factors then fit int32. */
static inline int npk_rescale_fits_int32(int64_t p_lo, int64_t p_hi, int64_t bias,
                                         int64_t scale, int shift, int64_t round,
                                         int64_t zero_point)
{
    int64_t s_lo = p_lo + bias, s_hi = p_hi + bias;
    if (bias < INT32_MIN || bias > INT32_MAX || scale < INT32_MIN || scale > INT32_MAX ||
        s_lo < INT32_MIN || s_hi > INT32_MAX)
        return 0;
    int64_t a = s_lo * scale, b = s_hi * scale;
    int64_t t_lo = a < b ? a : b, t_hi = (a < b ? b : a) + round;
    if (t_lo < INT32_MIN || t_hi > INT32_MAX)
        return 0;
    return ((t_lo + round) >> shift) - 1 + zero_point >= INT32_MIN &&
           (t_hi >> shift) + zero_point <= INT32_MAX;
}"""


def _sat_def(dt: np.dtype) -> str:
    lo, hi = (int_literal(v) for v in int_range(dt))
    t = c_type(dt)
    head = (f"/* A store into {dt.name} saturates to [{lo}, {hi}]. */\n"
            f"static inline {t} npk_sat_{dt.name}(int64_t x)")
    if dt.name in ("int64", "uint64"):  # every int64 above the minimum fits
        return f"{head} {{ return ({t})(x < {lo} ? {lo} : x); }}"
    return f"{head}\n{{\n    return ({t})(x < {lo} ? {lo} : x > {hi} ? {hi} : x);\n}}"


class Helpers:
    """The set of helpers a translation unit uses; ``source()`` defines them in order."""

    def __init__(self) -> None:
        self.used: dict[str, str] = {}
        self.extra: dict[str, tuple[str, tuple[str, ...]]] = {}
        self.counts: dict[str, int] = {}

    def fresh(self, prefix: str) -> str:
        """``prefix`` numbered 0, 1, ... across the translation unit (task functions and
        tables of every program in it)."""
        k = self.counts.get(prefix, 0)
        self.counts[prefix] = k + 1
        return f"{prefix}{k}"

    def define(self, name: str, text: str, deps: tuple[str, ...] = ()) -> str:
        """Register a helper written for this translation unit (a LUT instruction's), then
        use it; ``name`` must not be taken by a different definition."""
        if self.extra.get(name, (text, deps)) != (text, deps):
            raise KeyError(f"helper {name} defined twice differently")
        self.extra[name] = (text, deps)
        return self.use(name)

    def use(self, name: str) -> str:
        if name not in self.used:
            if name in self.extra:
                text, deps = self.extra[name]
            elif name in _DEFS:
                text, deps = _DEFS[name]
            elif name.startswith("npk_shift_round_"):
                text, deps = _shift_round_def(name.removeprefix("npk_shift_round_")), ()
            elif name == "npk_rescale_fits_int32":
                text, deps = _FITS32, ()
            elif name.startswith("npk_rescale_clamp_") and name.endswith("_i32"):
                text, deps = _rescale32_def(name[len("npk_rescale_clamp_"):-4]), ()
            elif name.startswith("npk_rescale_clamp_"):
                mode = name.removeprefix("npk_rescale_clamp_")
                text = _rescale_def(mode)
                deps = ("npk_clamp64", f"npk_shift_round_{mode}")
            elif name.startswith("npk_sat_"):
                text, deps = _sat_def(np.dtype(name.removeprefix("npk_sat_"))), ()
            else:
                raise KeyError(name)
            for d in deps:
                self.use(d)
            self.used[name] = text
        return name

    def source(self) -> str:
        return "\n\n".join(self.used.values())


def convert(h: Helpers, expr: str, src: np.dtype, dst: np.dtype) -> str:
    """C expression of value ``expr`` (of dtype ``src``) stored into a ``dst`` element
    (``arith.convert``): integers saturate, int-to-float and float-to-float round once to
    nearest even (``npukit.floats``)."""
    if src == dst:
        return expr
    if is_bf16(dst):
        return to_bf16(h, expr, src)
    if is_bf16(src) and is_float(dst):
        f32 = f"{h.use('npk_bf16_to_f32')}({expr})"
        return f32 if dst == _F32 else f"({c_type(dst)})({f32})"
    if is_float(dst) or np.can_cast(src, dst, "safe"):
        return f"({c_type(dst)})({expr})"
    if is_float(src):
        raise DTypeError(f"C back end: {src.name} into {dst.name} needs a float-to-int "
                         f"conversion, which the target does not define")
    if src.name == "uint64":  # its values past int64's range are past every limit
        expr = f"{h.use('npk_u64_to_i64_sat')}({expr})"
    return f"{h.use('npk_sat_' + dst.name)}((int64_t)({expr}))"


def to_bf16(h: Helpers, expr: str, src: np.dtype) -> str:
    """C expression of ``expr`` (of dtype ``src``) rounded once to bfloat16 bits: from
    float32, or through it where it is exact (float16, integers of at most 16 bits), else
    from the double it is exactly (int32, uint32) or rounded to odd (64-bit integers)."""
    if src == _F32 or src.itemsize <= 2:  # bool, 8- and 16-bit integers, float16: exact
        f32 = expr if src == _F32 else f"(float)({expr})"
        return f"{h.use('npk_bf16_from_f32')}({f32})"
    wide = {"int64": "npk_bf16_from_i64", "uint64": "npk_bf16_from_u64"}.get(src.name)
    if wide:
        return f"{h.use(wide)}({expr})"
    return f"{h.use('npk_bf16_from_f64')}((double)({expr}))"


def alu_expr(h: Helpers, op: str, srcs: list[tuple[str, np.dtype]], acc: np.dtype) -> str:
    """One lane of ALU ``op`` (``arith.alu``): float32 arithmetic when the partials are
    float, else int32 wrap-around of the int64 result."""
    if is_float(acc):
        xs = [convert(h, e, dt, _F32) for e, dt in srcs]
        if op == "pass":
            return xs[0]
        if op in ("max", "min"):
            return f"{h.use('npk_' + op + 'f')}({xs[0]}, {xs[1]})"
        return f"{xs[0]} {_SYMBOL[op]} {xs[1]}"
    if op == "pass":
        return f"{h.use('npk_wrap32')}((uint32_t)({srcs[0][0]}))"
    if op == "bnot":
        return f"{h.use('npk_wrap32')}((uint32_t)~(int64_t)({srcs[0][0]}))"
    if op == "lnot":
        return f"(int32_t)(({srcs[0][0]}) == 0)"
    if op in ("max", "min"):
        a, b = (f"(int64_t)({e})" for e, _ in srcs)
        cmp = ">" if op == "max" else "<"
        return f"{h.use('npk_wrap32')}((uint32_t)({a} {cmp} {b} ? {a} : {b}))"
    a, b = (f"(uint32_t)({e})" for e, _ in srcs)
    return f"{h.use('npk_wrap32')}({a} {_SYMBOL[op]} {b})"


_SYMBOL = {"add": "+", "sub": "-", "mul": "*"}


def combine_expr(h: Helpers, how: str, acc: str, x: str, dt: np.dtype) -> str:
    """Accumulate lane ``x`` into partial ``acc`` (``arith.combine``). ``x`` is a whole
    ALU result (``a - b`` is added as one value: ``acc + (a - b)``, never ``acc + a - b``,
    which rounds differently)."""
    if is_float(dt):
        if how in ("add", "mul"):
            return f"{acc} {'+' if how == 'add' else '*'} ({x})"
        return f"{h.use('npk_' + how + 'f')}({acc}, {x})"
    if how in ("add", "mul"):  # modulo 2**32, in unsigned arithmetic (no signed overflow)
        op = "+" if how == "add" else "*"
        return f"{h.use('npk_wrap32')}((uint32_t)({acc}) {op} (uint32_t)({x}))"
    if how in ("and", "or", "xor"):
        return f"({acc} {dict(zip(('and', 'or', 'xor'), '&|^'))[how]} ({x}))"
    cmp = ">" if how == "max" else "<"
    return f"({acc} {cmp} {x} ? {acc} : {x})"


def rescale_clamp_expr(h: Helpers, p: str, p_dt: np.dtype, bias: str, scale: str,
                       attrs: dict, mode: str) -> str:
    """One lane of Act ``rescale_clamp`` (``arith.rescale_clamp``). ``bias``/``scale`` are
    C expressions already of type int64_t (integer partials) or float (float partials)."""
    if is_float(p_dt):
        zp = float_literal(attrs["zero_point"], _F32)
        lo, hi = (float_literal(attrs[k], _F32) for k in ("lo", "hi"))
        return f"{h.use('npk_clampf')}(({p} + {bias}) * {scale} + {zp}, {lo}, {hi})"
    args = [p, bias, scale] + [int_literal(attrs[k]) for k in ("shift", "zero_point")]
    args += [int_literal(v) for v in act_bounds(attrs["lo"], attrs["hi"])]
    return f"{h.use('npk_rescale_clamp_' + mode)}({', '.join(args)})"


def clamp_expr(h: Helpers, p: str, p_dt: np.dtype, attrs: dict) -> str:
    """One lane of Act ``clamp`` in Torq's mode (``arith.act_clamp``)."""
    mode = attrs.get("mode", "ACT")
    if mode == "I2F":
        p, p_dt = convert(h, p, np.dtype("int32"), _F32), _F32
    elif mode == "F2I":
        return to_fixed_expr(h, f"truncf({clamp_expr(h, p, p_dt, {**attrs, 'mode': 'ACT'})})",
                             0)
    elif is_float(p_dt) and mode != "ACT":
        p = {"ABS": "fabsf({})", "NEG": "(-({}))", "CEL": "ceilf({})",
             "FLR": "floorf({})"}[mode].format(p)
    elif mode != "ACT":
        u = f"(uint32_t)({p})"
        p = {"ABS": f"((int64_t)({p}) < 0 ? -(int64_t)({p}) : (int64_t)({p}))",
             "NEG": f"(-(int64_t)({p}))",
             "CLZ": f"({u} ? (int64_t)__builtin_clz({u}) : 32)"}[mode]
    if is_float(p_dt):
        lo, hi = (float_literal(attrs[k], _F32) for k in ("lo", "hi"))
        return f"{h.use('npk_clampf')}({p}, {lo}, {hi})"
    lo, hi = (int_literal(v) for v in act_bounds(attrs["lo"], attrs["hi"]))
    return f"(int32_t){h.use('npk_clamp64')}((int64_t)({p}), {lo}, {hi})"


def to_fixed_expr(h: Helpers, p: str, shift: int) -> str:
    """One lane of Act ``to_fixed`` (``arith.to_fixed``): the scale 2**shift is exact."""
    scale = float_literal(2.0 ** shift, np.dtype("float64"))
    return f"{h.use('npk_f2i32_floor')}((double)({p}), {scale})"


def int_value_range(op: str, ranges: list[tuple[int, int]]) -> tuple[int, int] | None:
    """Range of an integer ALU result from its operands' ranges, None when it can wrap."""
    if op == "pass":
        lo, hi = ranges[0]
    elif op == "bnot":                     # ~x = -x - 1 reverses the range
        lo, hi = -1 - ranges[0][1], -1 - ranges[0][0]
    elif op == "lnot":
        lo, hi = 0, 1
    elif op == "mul":
        ends = [a * b for a in ranges[0] for b in ranges[1]]
        lo, hi = min(ends), max(ends)
    elif op == "add":
        lo, hi = ranges[0][0] + ranges[1][0], ranges[0][1] + ranges[1][1]
    elif op == "sub":
        lo, hi = ranges[0][0] - ranges[1][1], ranges[0][1] - ranges[1][0]
    else:  # max, min
        fn = max if op == "max" else min
        lo, hi = fn(ranges[0][0], ranges[1][0]), fn(ranges[0][1], ranges[1][1])
    return (lo, hi) if -2**31 <= lo and hi < 2**31 else None


def rescale_clamp_fast(h: Helpers, p: str, p_range: tuple[int, int], attrs: dict,
                       mode: str) -> tuple[str, str] | None:
    """The 32-bit lane of an integer ``rescale_clamp`` and the run-time condition under
    which it equals the 64-bit one (``bias``/``scale`` locals), or None when the constants
    rule it out."""
    shift, zp = int(attrs["shift"]), int(attrs["zero_point"])
    lo, hi = act_bounds(attrs["lo"], attrs["hi"])
    if shift > 31 or not all(-2**31 <= v < 2**31 for v in (zp, lo, hi)):
        return None
    rnd = 1 << (shift - 1) if shift and mode != "floor" else 0
    cond = f"{h.use('npk_rescale_fits_int32')}({p_range[0]}, {p_range[1]}, bias, scale, " \
           f"{shift}, {rnd}, {zp})"
    args = [p, "(int32_t)bias", "(int32_t)scale"] + [int_literal(v) for v in (shift, zp, lo, hi)]
    return f"{h.use('npk_rescale_clamp_' + mode + '_i32')}({', '.join(args)})", cond


# -- element-wise vector instructions (arith.vec_op) ----------------------------------------

# The ops of npukit.arith.VEC_OPS this back end spells out (vgather: npukit.c.emit; the
# bit, shift and math instructions, MORE_OPS: npukit.c.arith_vec, through vec_expr).
VEC_OPS = ("vadd", "vsub", "vmul", "vdiv", "vmax", "vmin", "vneg", "vabs", "vcmp", "vsel",
           "vand", "vor", "vxor", "vnot", "vrint", "vcast", "vgather") + MORE_OPS
_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_BIN = {"vadd": "+", "vsub": "-", "vmul": "*", "vdiv": "/", "vand": "&", "vor": "|",
        "vxor": "^"}


def vec_cast_expr(h: Helpers, x: str, src: np.dtype, dst: np.dtype, saturate: bool) -> str:
    """One lane of ``vcast`` (``arith.vec_cast``)."""
    t = c_type(dst)
    if dst == np.bool_:
        return f"({x} != 0)"
    if is_float(dst):  # rounded once; a bfloat16 lane is bits, never a C conversion's value
        return convert(h, x, src, dst)
    if src == np.bool_ or src == dst:
        return f"({t})({x})"
    x64 = f"(int64_t){h.use('npk_f2i32')}((double)({x}))" if is_float(src) else f"(int64_t)({x})"
    if saturate:
        return f"{h.use('npk_sat_' + dst.name)}({x64})"
    return f"({t})(uint64_t)({x64})"  # keep the low bits


def vec_expr(h: Helpers, op: str, attrs: dict, srcs: list[tuple[str, np.dtype]],
             dst: np.dtype) -> str:
    """One lane of an element-wise vector instruction (``arith.vec_op``; not ``vgather``)
    from its operand lanes, as a C expression of ``dst``'s type."""
    xs = [e for e, _ in srcs]
    if op in MORE_OPS:
        return vec_expr_more(h, op, attrs, srcs, dst, convert)
    if any(is_bf16(dt) for _, dt in srcs) and op in ("vcmp", "vcast") or is_bf16(dst) and \
            op not in ("vsel", "vcast"):  # bfloat16 lanes are bits: computed on float32
        f32 = [(convert(h, e, dt, _F32), _F32) if is_bf16(dt) else (e, dt) for e, dt in srcs]
        if op in ("vcmp", "vcast"):
            return vec_expr(h, op, attrs, f32, dst)
        return convert(h, vec_expr(h, op, attrs, f32, _F32), _F32, dst)
    if op == "vcmp":
        return f"({xs[0]} {_CMP[attrs['cmp']]} {xs[1]})"
    if op == "vsel":
        return f"({xs[0]} ? {xs[1]} : {xs[2]})"
    if op == "vcast":
        return vec_cast_expr(h, xs[0], srcs[0][1], dst, bool(attrs.get("saturate", False)))
    t = c_type(dst)
    if dst == np.bool_:
        return f"(uint8_t)!{xs[0]}" if op == "vnot" else f"({xs[0]} {_BIN[op]} {xs[1]})"
    if is_float(dst):  # computed in float (exact for float16 operands), rounded once to dst
        f = [f"(float){x}" if dst != _F32 else x for x in xs]
        expr = {"vmax": lambda: f"{h.use('npk_maxf')}({f[0]}, {f[1]})",
                "vmin": lambda: f"{h.use('npk_minf')}({f[0]}, {f[1]})",
                "vneg": lambda: f"-{f[0]}", "vabs": lambda: f"fabsf({f[0]})",
                "vrint": lambda: f"rintf({f[0]})"}.get(op, lambda: f"{f[0]} {_BIN[op]} {f[1]}")()
        return expr if dst == _F32 else f"({t})({expr})"
    if attrs.get("saturate") and op in ("vadd", "vsub"):  # the exact int64 result, clamped
        return f"{h.use('npk_sat_' + dst.name)}((int64_t){xs[0]} {_BIN[op]} (int64_t){xs[1]})"
    u = "uint64_t" if dst.itemsize == 8 else "uint32_t"  # wrap-around: unsigned arithmetic
    if op in ("vmax", "vmin"):
        return f"({xs[0]} {'>' if op == 'vmax' else '<'} {xs[1]} ? {xs[0]} : {xs[1]})"
    if op == "vneg":
        return f"({t})(0u - ({u}){xs[0]})"
    if op == "vabs":
        return xs[0] if dst.kind == "u" else \
            f"({t})({xs[0]} < 0 ? 0u - ({u}){xs[0]} : ({u}){xs[0]})"
    if op == "vnot":
        return f"({t})~({u}){xs[0]}"
    return f"({t})(({u}){xs[0]} {_BIN[op]} ({u}){xs[1]})"
