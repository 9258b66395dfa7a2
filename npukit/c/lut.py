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

>>> entry_position("i", 1, 8)
'i'
>>> entry_position("i", 2, 8)
'i / 8 * 16 + i % 8'
"""

from __future__ import annotations

import numpy as np

from .. import ir
from ..arith import linear_bounds
from ..errors import DTypeError
from .arith import Helpers, convert
from .code import block_comment
from .ctype import c_type, float_literal, int_literal, is_float

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
    """C expression of the image position (in entries) of entry ``i``."""
    if parallel == 1:
        return i
    return f"{i} / {per} * {2 * per} + {i} % {per}"


def lut_lane(h: Helpers, st: ir.Compute, p: str, table: str, base: int, name: str,
             ) -> tuple[str, np.dtype]:
    """One lane of Act ``lookup`` / ``linear_approx`` ``st`` on partial ``p``, reading the
    image from C array ``table`` starting at element ``base``: (C expression, result
    dtype). ``name`` is the helper's C name (unique per instruction)."""
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
        return _lookup(h, st, a, p, p_dt, table, at, pos, desc, name)
    if st.op == "linear_approx":
        return _linear(h, st, a, p, p_dt, table, at, pos, desc, name)
    raise NotImplementedError(f"C back end: no rule for act.{st.op} (`{st.label}`)")


def _index_line(a: dict, x: str) -> str:
    """``(x >> step_bits) + bias`` as C, without the parts that do nothing."""
    shifted = x if a["step_bits"] == 0 else f"({x} >> {a['step_bits']})"
    return shifted if a["bias"] == 0 else f"{shifted} + {int_literal(a['bias'])}"


def _lookup(h, st, a, p, p_dt, table, at, pos, desc, name):
    if p_dt.kind not in "iu":
        raise DTypeError(f"C back end: `{st.label}` looks up {p_dt.name} partials; lookup "
                         f"indexes with integers")
    n = a["entries"]
    raw = _index_line(a, "(int64_t)p")
    if a["oor"] == "saturate":
        index = f"int64_t i = {h.use('npk_clamp64')}({raw}, 0, {n - 1});"
        rule = "saturated to the table"
    else:
        index = f"int64_t i = ({raw}) & {n - 1};"
        rule = f"its low bits kept (truncate: {n} is a power of two)"
    vdt = st.srcs[1].dtype
    out_dt = _F32 if is_float(vdt) else _I32
    value = convert(h, f"{table}[{at}{pos}]", vdt, out_dt)
    head = block_comment(f"Act lookup `{st.label}`: {desc}. index = "
                         f"{_index_line(a, 'p')}, {rule}; the value widened to {out_dt.name}.")
    text = f"""\
{head}
static inline {c_type(out_dt)} {name}({c_type(p_dt)} p)
{{
    {index}
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
        raw = _index_line(a, f"{h.define('npk_floor_index', _FLOOR_INDEX)}(x)")
        slope = convert(h, f"{table}[{at}2 * pos]", tdt, _F32)
        offset = convert(h, f"{table}[{at}2 * pos + 1]", tdt, _F32)
        body += [f"int64_t i = {h.use('npk_clamp64')}({raw}, 0, {n - 1});",
                 f"int64_t pos = {pos};",
                 f"float slope = {slope}, offset = {offset};",
                 "float product = slope * x;  /* rounds to float32, then the sum rounds */",
                 "return product + offset;"]
        out_dt = _F32
        rule = (f"index = {_index_line(a, 'floor(x)')} saturated to the table; "
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
        raw = _index_line(a, "x")
        mask = (1 << a["step_bits"]) - 1
        shift = f"(INT64_C(1) << {a['shift_offset']})" if a["shift_offset"] else ""
        offset = f"(int64_t){table}[{at}2 * pos + 1]" + (f" * {shift}" if shift else "")
        out_dt = _I32 if a["offset_dtype"] == "int8" else _I64  # acc32 / acc64
        body += [f"int64_t i = {h.use('npk_clamp64')}({raw}, 0, {n - 1});",
                 f"int64_t pos = {pos};",
                 f"int64_t acc = (int64_t){table}[{at}2 * pos] * (x & {mask}) + {offset};"]
        if out_dt == _I32:
            body.append(f"return {h.use('npk_wrap32')}((uint32_t)acc);  /* acc32 */")
        else:
            body.append("return acc;  /* acc64 */")
        rule = (f"index = {_index_line(a, 'x')} saturated to the table; "
                f"slope * (x & {mask}) + offset * 2^{a['shift_offset']} in 64 bits (a "
                f"multiplication: a negative offset cannot be shifted in C)")
    lines = "\n".join("    " + x for x in body)
    head = block_comment(f"Act linear_approx `{st.label}`: {desc}. {rule}.")
    text = f"""\
{head}
static inline {c_type(out_dt)} {name}({c_type(p_dt)} p)
{{
{lines}
}}"""
    return f"{h.define(name, text)}({p})", out_dt

