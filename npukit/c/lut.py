"""The Act LUT instructions (``lookup``, ``linear_approx``) as C: one ``static inline``
function per instruction, constants spelled out, reading the table's memory image — the
``static const`` array of its ``role="const"`` buffer — exactly as the simulator does
(``npukit.arith.act_lookup`` / ``act_linear_approx`` on the table ``lut_from_image`` reads
back).

The image holds the table for ``parallel`` accesses with ``bank_bits`` banks
(``npukit.lut.table``): with S the bits of one stored scalar and w scalars per entry (1 for
a direct table, 2 — slope then offset — for a linear one), a bank block holds
``per = bank_bits / (S·w)`` entries and every block is stored twice (``parallel`` 2 or 4;
for 4 the second image repeats the first). Entry ``i`` therefore starts at scalar
``w·pos(i)``, ``pos(i) = i`` for one access and ``(i / per)·2·per + i % per`` otherwise.
An 8-bit value of a direct table is stored widened to 16 bits; a bfloat16 slope next to a
float32 offset is stored as float32 with its low 16 bits zero.

The index is computed in 32-bit integers whenever its range allows (always, for the
designs of ``npukit.lut``), and a float ``linear_approx`` floors and saturates its index in
float32 before converting it: branch-free code that gcc vectorises, reading the table with
gather instructions where the ISA has them (AVX2, AVX-512) — except a table of 8- or 16-bit
entries, which gcc does not gather (large loops on 8- and 16-bit inputs read a table of
results instead: ``npukit.c.fuse``).

>>> entry_position("i", 1, 8)
'i'
>>> entry_position("i", 2, 8)
'(i >> 3) * 16 + (i & 7)'
>>> entry_position("i", 2, 6)
'i / 6 * 12 + i % 6'
"""

from __future__ import annotations

import numpy as np

from .. import ir
from ..arith import linear_bounds
from ..dtypes import is_float
from ..errors import DTypeError
from .arith import Helpers, convert
from .code import block_comment
from .ctype import c_type, float_literal, int_literal

_F32, _I32, _I64 = np.dtype("float32"), np.dtype("int32"), np.dtype("int64")

_FLOOR_INDEX = """\
/* int(floor(x)) of linear_approx's float index as a 32-bit int: NaN gives 0 (its lane
   stays NaN through slope * x), values beyond int32 clamp (npukit.lut.linear_approx).
   Below 2^24 in magnitude t is exact in float; above, x is an integer and t == x. */
static inline int64_t npk_floor_index(float x)
{
    if (x != x)
        return 0;
    if (x < -2147483648.0f)
        return INT32_MIN;
    if (x >= 2147483648.0f)
        return INT32_MAX;
    int64_t t = (int64_t)x; /* truncates towards zero */
    return t - ((float)t > x);
}"""


def entry_position(i: str, parallel: int, per: int) -> str:
    """C expression of the image position (in entries) of entry ``i`` (never negative: a
    power-of-two block is a shift and a mask)."""
    if parallel == 1:
        return i
    if per & (per - 1) == 0:
        return f"({i} >> {per.bit_length() - 1}) * {2 * per} + ({i} & {per - 1})"
    return f"{i} / {per} * {2 * per} + {i} % {per}"


def _fits32(lo: int, hi: int) -> bool:
    return -2**31 <= lo and hi < 2**31


def _index_range(a: dict, lo: int, hi: int) -> tuple[int, int]:
    """Range of ``(x >> step_bits) + bias`` for x in [lo, hi]."""
    return (lo >> a["step_bits"]) + a["bias"], (hi >> a["step_bits"]) + a["bias"]


def _saturate32(i: str, n: int) -> list[str]:
    """``i`` saturated to [0, n - 1] in int32 (branch-free)."""
    return [f"{i} = {i} < 0 ? 0 : {i};", f"{i} = {i} > {n - 1} ? {n - 1} : {i};"]


def lut_lane(h: Helpers, st: ir.Compute, p: str, table: str, base: int, name: str,
             p_range: tuple[int, int] | None = None) -> tuple[str, np.dtype]:
    """One lane of Act ``lookup`` / ``linear_approx`` ``st`` on partial ``p``, reading the
    image from C array ``table`` starting at element ``base``: (C expression, result
    dtype). ``name`` is the helper's C name (unique per instruction); ``p_range``, when
    known, bounds an integer ``p`` more tightly than its dtype."""
    a = dict(st.attrs)
    tdt = st.srcs[1].dtype
    p_dt = st.srcs[0].dtype
    per_entry = 1 if st.op == "lookup" else 2
    per = a["bank_bits"] // (tdt.itemsize * 8 * per_entry)
    pos = entry_position("i", a["parallel"], per)
    at = f"{base} + " if base else ""
    desc = (f"table {table}: {a['entries']} entries of {a['offset_dtype']}"
            + (f" with {a['slope_dtype']} slopes" if a["slope_dtype"] else "")
            + f", stored as {tdt.name}")
    if a["parallel"] == 1:
        desc += ", one after the other"
    else:
        desc += (f", for {a['parallel']} parallel accesses: blocks of {per} entries "
                 f"({a['bank_bits']}-bit banks), each block twice")
    if st.op == "lookup":
        return _lookup(h, st, a, p, p_dt, table, at, pos, desc, name, p_range)
    if st.op == "linear_approx":
        return _linear(h, st, a, p, p_dt, table, at, pos, desc, name)
    raise NotImplementedError(f"C back end: no rule for act.{st.op} (`{st.label}`)")


def _floor_bounds(a: dict) -> tuple[int, int] | None:
    """[lo, hi] such that saturating floor(x) to it leaves the saturated index of
    ``linear_approx`` unchanged: below ``-bias·2^step_bits`` the index is 0, above
    ``(entries-1-bias)·2^step_bits`` it is the last entry (and int32 clamps the floor first);
    a negative step_bits bounds floor(x · 2^-step_bits) as step_bits 0 does floor(x).
    None when a bound is no float32 integer inside int32, or the bias is outside int32."""
    s, b, n = max(a["step_bits"], 0), a["bias"], a["entries"]
    lo, hi = max(-b * 2**s, -2**31), (n - 1 - b) * 2**s
    if not (_fits32(b, b) and _fits32(lo, hi)) or \
            any(float(np.float32(v)) != v for v in (lo, hi)):
        return None
    return lo, hi


def _index_line(a: dict, x: str) -> str:
    """``(x >> step_bits) + bias`` as C, without the parts that do nothing (a negative
    ``step_bits`` scales the float input instead: ``_index_input``)."""
    shifted = x if a["step_bits"] <= 0 else f"({x} >> {a['step_bits']})"
    return shifted if a["bias"] == 0 else f"{shifted} + {int_literal(a['bias'])}"


def _index_input(a: dict) -> tuple[str, list[str]]:
    """The float value whose floor indexes ``linear_approx``, and the C lines computing it:
    ``x``, or for a negative ``step_bits`` ``x * 2^-step_bits`` (exact in float32, or inf,
    which saturates the index like any large value)."""
    s = a["step_bits"]
    if s >= 0:
        return "x", []
    scale = float_literal(2.0 ** -s, _F32)
    return "xi", [f"float xi = x * {scale};  /* step_bits {s}: floor(x * 2^{-s}) indexes */"]


# When each aie::rounding_mode takes floor + 1, in C: t the accumulator, n = t >> shift,
# r = the dropped bits, h = half of the step (npukit.lut.accum).
_ROUND_UP = {"ceil": "r != 0", "symmetric_floor": "r != 0 && t < 0",
             "symmetric_ceil": "r != 0 && t >= 0", "positive_inf": "r >= h",
             "negative_inf": "r > h", "symmetric_inf": "r > h || (r == h && t >= 0)",
             "symmetric_zero": "r > h || (r == h && t < 0)",
             "conv_even": "r > h || (r == h && (n & 1))",
             "conv_odd": "r > h || (r == h && !(n & 1))"}


def _to_vector_lines(h: Helpers, tv: tuple) -> list[str]:
    """C lines returning ``to_vector(t, dtype, shift, rounding, saturation)`` in int32
    (``npukit.lut.to_vector``), from the accumulator ``t``."""
    dt, shift, rounding, saturation = tv
    info = np.iinfo(dt)
    if shift == 0:
        lines = ["int64_t n = t;"]
    elif rounding == "floor":
        lines = [f"int64_t n = t >> {shift};  /* rounded floor */"]
    else:
        up = _ROUND_UP[rounding]
        lines = [f"int64_t n = t >> {shift};",
                 f"const int64_t r = t & {int_literal((1 << shift) - 1)};  /* dropped bits */"]
        if "h" in up.split():
            lines.append(f"const int64_t h = {int_literal(1 << (shift - 1))};  /* a half */")
        lines.append(f"n += ({up});  /* rounded {rounding} */")
    if saturation == "none":  # the low bits: through the unsigned type, then two's complement
        ctype = c_type(np.dtype(dt))
        return lines + [f"return ({ctype})(u{ctype.lstrip('u')})(uint64_t)n;  /* wraps */"]
    lo = -int(info.max) if saturation == "symmetric" else int(info.min)
    return lines + [f"return (int32_t){h.use('npk_clamp64')}(n, {int_literal(lo)}, "
                    f"{int_literal(int(info.max))});  /* saturation {saturation} */"]


def _lookup(h, st, a, p, p_dt, table, at, pos, desc, name, p_range):
    if p_dt.kind not in "iu":
        raise DTypeError(f"C back end: `{st.label}` looks up {p_dt.name} partials; lookup "
                         f"indexes with integers")
    n = a["entries"]
    p_lo, p_hi = p_range or (int(np.iinfo(p_dt).min), int(np.iinfo(p_dt).max))
    if _fits32(*_index_range(a, p_lo, p_hi)) and _fits32(p_lo, p_hi):
        raw = _index_line(a, "(int32_t)p")
        index = [f"int32_t i = {raw};"]
        index += _saturate32("i", n) if a["oor"] == "saturate" else [f"i = i & {n - 1};"]
    else:  # the index needs 64 bits
        raw = _index_line(a, "(int64_t)p")
        index = [f"int64_t i = {h.use('npk_clamp64')}({raw}, 0, {n - 1});"
                 if a["oor"] == "saturate" else f"int64_t i = ({raw}) & {n - 1};"]
    rule = "saturated to the table" if a["oor"] == "saturate" else \
        f"its low bits kept (truncate: {n} is a power of two)"
    vdt = st.srcs[1].dtype
    out_dt = _F32 if is_float(vdt) else _I32
    value = convert(h, f"{table}[{at}{pos}]", vdt, out_dt)
    head = block_comment(f"Act lookup `{st.label}`: {desc}. index = "
                         f"{_index_line(a, 'p')}, {rule}; the value widened to {out_dt.name}.")
    lines = "\n".join("    " + x for x in index)
    text = f"""\
{head}
static inline {c_type(out_dt)} {name}({c_type(p_dt)} p)
{{
{lines}
    return {value};
}}"""
    return f"{h.define(name, text)}({p})", out_dt


def _linear(h, st, a, p, p_dt, table, at, pos, desc, name):
    n, tdt = a["entries"], st.srcs[1].dtype
    lo, hi = a["lo"], a["hi"]
    if is_float(p_dt):
        if p_dt != _F32:
            raise DTypeError(f"C back end: `{st.label}` reads {p_dt.name} partials; the Act "
                             f"reads float32 or integer partials")
        body = ["float x = p;"]
        if lo is not None:
            lo_c = float_literal(lo, _F32)
            body.append(f"x = x < {lo_c} ? {lo_c} : x;  /* clamp below (NaN passes) */")
        if hi is not None:
            hi_c = float_literal(hi, _F32)
            body.append(f"x = x > {hi_c} ? {hi_c} : x;  /* clamp above (NaN passes) */")
        if a["scale_exp"]:
            scale = float_literal(2.0 ** a["scale_exp"], _F32)
            body.append(f"x = x * {scale};  /* 2^{a['scale_exp']}: exact, as ldexp (or inf) */")
        slope = convert(h, f"{table}[{at}2 * pos]", tdt, _F32)
        offset = convert(h, f"{table}[{at}2 * pos + 1]", tdt, _F32)
        xi, scale_lines = _index_input(a)
        body += scale_lines
        bounds = _floor_bounds(a)
        if bounds is not None:
            fl, fh = (float_literal(v, _F32) for v in bounds)
            body += [block_comment(f"floor(x), saturated to the floors whose index lies in "
                                   f"the table; a NaN gives {fl} (its lane stays NaN through "
                                   f"slope * x, whichever entry it reads).", 88),
                     f"float f = floorf({xi});",
                     f"f = f > {fl} ? f : {fl};",
                     f"f = f < {fh} ? f : {fh};",
                     f"int32_t i = {_index_line(a, '(int32_t)f')};",
                     *_saturate32("i", n),
                     f"int32_t pos = {pos};"]
        else:  # floors beyond float32's exact integers or int32: in 64 bits
            raw = _index_line(a, f"{h.define('npk_floor_index', _FLOOR_INDEX)}({xi})")
            body += [f"int64_t i = {h.use('npk_clamp64')}({raw}, 0, {n - 1});",
                     f"int64_t pos = {pos};"]
        body += [f"float slope = {slope}, offset = {offset};",
                 "float product = slope * x;  /* rounds to float32, then the sum rounds */",
                 "return product + offset;"]
        out_dt = _F32
        rule = (f"index = {_index_line(a, f'floor({xi})')} saturated to the table; "
                f"slope * x + offset in float32")
    else:
        in_dt = np.dtype(a["in_dtype"])
        info = np.iinfo(in_dt)
        lo, hi = linear_bounds(lo, hi)
        body = ["int64_t x = p;"]
        if lo is not None:
            body.append(f"x = x < {int_literal(lo)} ? {int_literal(lo)} : x;")
        if hi is not None:
            body.append(f"x = x > {int_literal(hi)} ? {int_literal(hi)} : x;")
        body.append(f"x = {h.use('npk_clamp64')}(x, {info.min}, {info.max});  "
                    f"/* saturate to {in_dt.name}, the table's input */")
        mask = (1 << a["step_bits"]) - 1
        out_dt = _I32 if a["offset_dtype"] == "int8" else _I64  # acc32 / acc64
        if _fits32(*_index_range(a, int(info.min), int(info.max))):
            body += [f"const int32_t v = (int32_t)x;  /* {in_dt.name} */",
                     f"int32_t i = {_index_line(a, 'v')};", *_saturate32("i", n),
                     f"int32_t pos = {pos};"]
        else:
            body += ["const int64_t v = x;",
                     f"int64_t i = {h.use('npk_clamp64')}({_index_line(a, 'v')}, 0, {n - 1});",
                     f"int64_t pos = {pos};"]
        acc_name = "acc32" if out_dt == _I32 else "acc64"
        if out_dt == _I32:  # the low 32 bits of the 64-bit sum: unsigned 32-bit arithmetic
            k = a["shift_offset"]  # from 2^32 up, offset * 2^k has no low bits
            term = "" if k >= 32 else \
                f" + (uint32_t){table}[{at}2 * pos + 1]" + (f" * (1u << {k})" if k else "")
            body += [f"uint32_t acc = (uint32_t){table}[{at}2 * pos] * (uint32_t)(v & {mask})"
                     f"{term};",
                     f"return {h.use('npk_wrap32')}(acc);  /* acc32 */"]
        else:
            shift = f" * (INT64_C(1) << {a['shift_offset']})" if a["shift_offset"] else ""
            body += [f"int64_t acc = (int64_t){table}[{at}2 * pos] * (v & {mask}) + "
                     f"(int64_t){table}[{at}2 * pos + 1]{shift};",
                     "return acc;  /* acc64 */"]
        if a.get("to_vector") is not None:  # the accumulator goes on to to_vector
            body[-1] = body[-1].replace("return ", "const int64_t t = ", 1)
            body += _to_vector_lines(h, a["to_vector"])
            out_dt = _I32
        rule = (f"index = {_index_line(a, 'x')} saturated to the table; "
                f"slope * (x & {mask}) + offset * 2^{a['shift_offset']} "
                + ("in 64 bits (a multiplication: a negative offset cannot be shifted in C)"
                   if acc_name == "acc64" else
                   "modulo 2^32 (acc32: the low bits of the exact sum)"))
        if a.get("to_vector") is not None:
            dt, s_, rnd, sat = a["to_vector"]
            rule += (f"; then to_vector<{dt}>({s_}): rounded {rnd}, saturation {sat}, "
                     f"returned in int32")
    lines = "\n".join("    " + x for b in body for x in b.splitlines())
    head = block_comment(f"Act linear_approx `{st.label}`: {desc}. {rule}.")
    text = f"""\
{head}
static inline {c_type(out_dt)} {name}({c_type(p_dt)} p)
{{
{lines}
}}"""
    return f"{h.define(name, text)}({p})", out_dt

