"""numpy dtypes as C99 types and C constants: every value the generated code spells out.

float16 is gcc's ``_Float16`` (``npk_float16``), bfloat16 travels as its 16 bits in a
``uint16_t`` (``npk_bfloat16``, converted by the helpers in ``npukit.c.arith``), complex64
is ``float _Complex``.

>>> c_type(np.dtype("int16")), literal(-3, np.dtype("int64")), literal(2.5, np.dtype("float32"))
('int16_t', '-3', '2.5f')
>>> literal(1.0, dtype("bfloat16")), literal(0.1, np.dtype("float16"))
('0x3F80', '0.099975586f')
"""

from __future__ import annotations

import math

import numpy as np

from ..dtypes import FACTS, dtype, is_float
from ..errors import DTypeError
from ..floats import to_float

# The typedefs the C types of ``npukit.dtypes.FACTS`` need, emitted once before their first use.
TYPEDEFS = {
    "npk_float16": """\
/* float16: gcc's _Float16 (IEEE binary16; conversions round to nearest even). */
#if defined(__GNUC__)
__extension__ typedef _Float16 npk_float16;
#endif""",
    "npk_bfloat16": """\
/* bfloat16: the top 16 bits of a float32, kept as bits (npk_bf16_from_f32 / _to_f32). */
typedef uint16_t npk_bfloat16;""",
}


def c_type(dt: np.dtype, what: str = "") -> str:
    """The C type holding one element of ``dt``; ``DTypeError`` for dtypes the C back end
    does not support (``what`` names the tensor or buffer in the message)."""
    try:
        return FACTS[dt.name].c_type
    except KeyError:
        where = f" ({what})" if what else ""
        raise DTypeError(f"C back end: no C type for dtype {dt.name}{where}; supported: "
                         f"{', '.join(FACTS)}") from None


def is_bf16(dt: np.dtype) -> bool:
    return dt.name == "bfloat16"


def int_literal(v: int) -> str:
    """A C integer constant of value ``v`` (int64 range, or uint64 above it)."""
    v = int(v)
    if -2**31 < v < 2**31:
        return str(v)
    if v == -2**63:
        return "INT64_MIN"
    if -2**63 < v < 2**63:
        return f"INT64_C({v})"
    if 2**63 <= v < 2**64:
        return f"UINT64_C({v})"
    raise DTypeError(f"C back end: constant {v} outside the 64-bit range")


def float_literal(v: float, dt: np.dtype) -> str:
    """The C constant of ``v`` rounded to ``dt`` (float16, float32 or float64), exact; a
    float16 value is spelled as the float32 constant it converts from exactly."""
    x = dt.type(v)
    if dt.name == "float16":
        x, dt = np.float32(x), np.dtype("float32")
    suffix = "f" if dt.name == "float32" else ""
    cast = "" if suffix else "(double)"
    if math.isnan(x):
        return f"{cast}NAN"
    if math.isinf(x):
        return f"{cast}INFINITY" if x > 0 else f"-{cast}INFINITY"
    text = repr(float(x)) if suffix == "" else str(x)  # shortest text that reads back as x
    if not any(c in text for c in ".en"):
        text += ".0"
    return text + suffix


def bf16_bits(v) -> int:
    """The bits of ``v`` rounded once to bfloat16, nearest even (``floats.to_float``)."""
    return int(to_float(np.array(v), dtype("bfloat16")).view(np.uint16))


def literal(v, dt: np.dtype) -> str:
    """A C constant of ``v`` converted to ``dt`` the way ``np.full(..., v, dt)`` does."""
    if is_bf16(dt):
        return f"0x{bf16_bits(v):04X}"
    if is_float(dt):
        return float_literal(float(v), dt)
    if dt.kind == "c":
        raise DTypeError(f"C back end: no constant of {dt.name} (value {v!r})")
    return int_literal(int(np.array(v).astype(dt)))


def poison_literal(dt: np.dtype) -> str:
    """The simulator's poison value of ``dt``: NaN for floats, 0xA5 in every byte else
    (complex values have no literal: ``npukit.c.emit`` poisons them with memset)."""
    if is_float(dt):
        return literal(float("nan"), dt)
    if dt == np.bool_:
        return "1"  # the simulator poisons masks with True
    if dt.kind == "c":
        raise DTypeError(f"C back end: no poison literal for {dt.name}; use memset 0xA5")
    return int_literal(int(np.full(dt.itemsize, 0xA5, np.uint8).view(dt)[0]))


def hex_float(v: float) -> str:
    """The float32 C constant of ``v`` in C99's exact hexadecimal notation:
    ``hex_float(0.75) == '0x1.8000000000000p-1f'``."""
    return float(v).hex() + "f"
