"""The vector unit's bit, shift, widening and math instructions as C (``npukit.arith_vec``
is the reference): one lane as a C expression, with the ``static inline`` helpers it calls.

``npukit.c.arith.vec_expr`` calls ``vec_expr_more`` for these instructions, passing its
``Helpers`` and ``convert`` (this module sits below it).

>>> from npukit.c.arith import Helpers, convert
>>> vec_expr_more(Helpers(), "vclz", {}, [("x", np.dtype("int8"))], np.dtype("int8"), convert)
'(int8_t)npk_clz((uint64_t)(uint8_t)(x), 8)'
"""

from __future__ import annotations

import numpy as np

from ..arith_vec import ROUND_SHIFT_CAP
from .ctype import c_type, int_literal

_F64 = np.dtype("float64")
_HELPERS = {
    "npk_shl": """\
/* x * 2^s kept to its low bits (the conversion to the lane type wraps). */
static inline int64_t npk_shl(int64_t x, uint64_t s, int bits)
{
    return s >= (uint64_t)bits ? 0 : (int64_t)((uint64_t)x << s);
}""",
    "npk_shl_sat": """\
/* x * 2^s clamped to [lo, hi] (|x| < 2^32 and s < 32 keep the product inside int64). */
static inline int64_t npk_shl_sat(int64_t x, uint64_t s, int bits, int64_t lo, int64_t hi)
{
    if (x == 0)
        return 0;
    if (s >= (uint64_t)bits)
        return x < 0 ? lo : hi;
    int64_t r = x * ((int64_t)1 << s);
    return r < lo ? lo : r > hi ? hi : r;
}""",
    "npk_shr": """\
/* floor(x / 2^s): an arithmetic shift of the sign-extended lane (a count of 63 empties it). */
static inline int64_t npk_shr(int64_t x, uint64_t s)
{
    return x >> (s > 63 ? 63 : s);
}""",
    "npk_shr_round": f"""\
/* x / 2^s rounded to nearest, ties to even (a count of {ROUND_SHIFT_CAP} or more gives 0 for
   any 32-bit lane, so it is capped there). */
static inline int64_t npk_shr_round(int64_t x, uint64_t s)
{{
    if (s > {ROUND_SHIFT_CAP})
        s = {ROUND_SHIFT_CAP};
    if (s == 0)
        return x;
    int64_t q = x >> s, rem = x - q * ((int64_t)1 << s), half = (int64_t)1 << (s - 1);
    return q + (rem > half || (rem == half && (q & 1)));
}}""",
    "npk_nan_canon": """\
/* A math function's NaN as the positive quiet NaN (libm may give either sign). */
static inline double npk_nan_canon(double x) { return x != x ? (double)NAN : x; }""",
    "npk_cls": """\
/* Bits below the sign bit of a bits-wide lane that equal it. */
static inline int npk_cls(int64_t x, int bits)
{
    uint64_t u = (uint64_t)(x ^ (x >> 1)) & (bits == 64 ? ~0ull : (1ull << bits) - 1);
    return (u ? __builtin_clzll(u) - (64 - bits) : bits) - 1;
}""",
    "npk_bitrev": """\
/* The bits of a bits-wide lane in reverse order. */
static inline uint64_t npk_bitrev(uint64_t u, int bits)
{
    uint64_t r = 0;
    for (int k = 0; k < bits; k++)
        r |= (u >> k & 1u) << (bits - 1 - k);
    return r;
}""",
    "npk_rotr": """\
/* The bits of a bits-wide lane rotated right by s mod bits. */
static inline uint64_t npk_rotr(uint64_t u, uint64_t s, int bits)
{
    s %= (uint64_t)bits;
    return s ? (u >> s | u << (bits - s)) & ((1ull << bits) - 1) : u;
}""",
    "npk_quot": """\
/* x / y truncated toward zero, 0 for y = 0, saturated to hi (the most negative / -1). */
static inline int64_t npk_quot(int64_t x, int64_t y, int64_t hi)
{
    if (y == 0)
        return 0;
    int64_t q = x / y;
    return q > hi ? hi : q;
}""",
    "npk_rem": """\
/* C's remainder (the sign of x), 0 for y = 0. */
static inline int64_t npk_rem(int64_t x, int64_t y) { return y == 0 ? 0 : x % y; }""",
    "npk_clz": """\
/* Zero bits above the highest set bit of a bits-wide lane (bits for 0). */
static inline int npk_clz(uint64_t u, int bits)
{
    return u ? __builtin_clzll(u) - (64 - bits) : bits;
}""",
}
# float64 C function of each math function of the vector unit (arith_vec.MATH_FNS)
_MATH = {"exp": "exp({})", "exp2": "exp2({})", "log": "log({})", "tanh": "tanh({})",
         "sin": "sin({})", "cos": "cos({})", "sqrt": "sqrt({})", "rsqrt": "1.0 / sqrt({})",
         "erf": "erf({})", "floor": "floor({})", "ceil": "ceil({})"}


def _unsigned(x: str, dt: np.dtype) -> str:
    """A lane read as unsigned of its width, widened to 64 bits."""
    return f"(uint64_t)(uint{8 * dt.itemsize}_t)({x})"


def _helper(h, name: str) -> str:
    return h.define(name, _HELPERS[name])


def _bitcast(h, x: str, src: np.dtype, dst: np.dtype) -> str:
    """The lane's bits as ``dst`` (a union: no conversion of the value)."""
    name = f"npk_bitcast_{src.name}_{dst.name}"
    s, d = c_type(src), c_type(dst)
    text = (f"/* The bits of a {src.name} lane read as {dst.name}. */\n"
            f"static inline {d} {name}({s} x)\n{{\n    union {{ {s} a; {d} b; }} u;\n"
            f"    u.a = x;\n    return u.b;\n}}")
    return f"{h.define(name, text)}({x})"


def _dot(h, srcs: list[tuple[str, np.dtype]], dst: np.dtype, convert) -> str:
    """``vdot``: a helper per term count and kind adds the terms whose mask is set, in order,
    in int64 (exact) or double; the result is saturated (integers) or rounded once."""
    k, flt = (len(srcs) - 1) // 3, dst.kind == "f" or dst.name == "bfloat16"
    w = "double" if flt else "int64_t"
    name = f"npk_vdot_{'f64' if flt else 'i64'}_{k}"
    params = ", ".join(f"int m{i}, {w} x{i}, {w} y{i}" for i in range(k))
    adds = "".join(f"    if (m{i})\n        acc += x{i} * y{i};\n" for i in range(k))
    text = (f"/* acc + the products x_i * y_i whose mask m_i is set, in order, in {w}. */\n"
            f"static inline {w} {name}({w} acc, {params})\n{{\n{adds}    return acc;\n}}")
    wd = _F64 if flt else np.dtype("int64")
    args = [convert(h, e, d, wd) if i % 3 != 1 else f"({e} != 0)" for i, (e, d) in
            enumerate(srcs)]
    total = f"{h.define(name, text)}({', '.join(args)})"
    return convert(h, total, _F64, dst) if flt else f"{h.use('npk_sat_' + dst.name)}({total})"


def vec_expr_more(h, op: str, attrs: dict, srcs: list[tuple[str, np.dtype]], dst: np.dtype,
                  convert) -> str:
    """One lane of an instruction of ``arith_vec.MORE_OPS`` as a C expression of ``dst``
    (``h``: the translation unit's ``Helpers``; ``convert``: ``npukit.c.arith.convert``)."""
    (x, x_dt), *rest = srcs
    t = c_type(dst)
    bits = 8 * dst.itemsize
    if op == "vshl":
        s = _unsigned(rest[0][0], rest[0][1])
        if attrs.get("saturate"):
            lo, hi = (int_literal(v) for v in (np.iinfo(dst).min, np.iinfo(dst).max))
            return f"({t}){_helper(h, 'npk_shl_sat')}((int64_t)({x}), {s}, {bits}, {lo}, {hi})"
        return f"({t})(uint64_t){_helper(h, 'npk_shl')}((int64_t)({x}), {s}, {bits})"
    if op == "vshr":
        s = _unsigned(rest[0][0], rest[0][1])
        fn = _helper(h, "npk_shr_round" if attrs.get("round") else "npk_shr")
        return f"({t}){fn}((int64_t)({x}), {s})"
    if op == "vclz":
        return f"({t}){_helper(h, 'npk_clz')}({_unsigned(x, x_dt)}, {bits})"
    if op == "vcls":
        w = 8 * x_dt.itemsize  # the lane's bits read as signed: its top bit repeats
        return f"({t}){_helper(h, 'npk_cls')}((int64_t)(int{w}_t)({x}), {w})"
    if op == "vpopcnt":
        return f"({t})__builtin_popcountll({_unsigned(x, x_dt)})"
    if op == "vbitrev":
        return f"({t}){_helper(h, 'npk_bitrev')}({_unsigned(x, x_dt)}, {bits})"
    if op == "vrotr":
        s = _unsigned(rest[0][0], rest[0][1])
        return f"({t}){_helper(h, 'npk_rotr')}({_unsigned(x, x_dt)}, {s}, {bits})"
    if op in ("vquot", "vrem"):
        y = f"(int64_t)({rest[0][0]})"
        if op == "vrem":
            return f"({t}){_helper(h, 'npk_rem')}((int64_t)({x}), {y})"
        hi = int_literal(np.iinfo(dst).max)
        return f"({t}){_helper(h, 'npk_quot')}((int64_t)({x}), {y}, {hi})"
    if op == "vbitcast":
        return _bitcast(h, x, x_dt, dst)
    if op == "vmulhi":
        y, y_dt = rest[0]
        wide = "uint64_t" if x_dt.kind == "u" and y_dt.kind == "u" else "int64_t"
        return f"({t})((({wide})({x}) * ({wide})({y})) >> {bits})"
    if op == "vfma":  # float64 products of float32 lanes are exact; one rounding at the end
        acc, x64, y64 = (convert(h, e, d, _F64) for e, d in srcs)
        return convert(h, f"({acc} + {x64} * {y64})", _F64, dst)
    if op == "vdot":
        return _dot(h, srcs, dst, convert)
    if op == "vmath":
        arg = convert(h, x, x_dt, _F64)
        f32 = f"(float){_helper(h, 'npk_nan_canon')}({_MATH[attrs['fn']].format(arg)})"
        return convert(h, f32, np.dtype("float32"), dst)
    if op == "vpow":  # as vmath: float64, rounded to float32, then to the lane type
        base, expo = (convert(h, e, d, _F64) for e, d in srcs)
        f32 = f"(float){_helper(h, 'npk_nan_canon')}(pow({base}, {expo}))"
        return convert(h, f32, np.dtype("float32"), dst)
    raise NotImplementedError(f"C back end: no rule for vector instruction {op!r}")
