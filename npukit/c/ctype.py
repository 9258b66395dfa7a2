"""numpy dtypes as C99 types and C constants: every value the generated code spells out.

>>> c_type(np.dtype("int16")), literal(-3, np.dtype("int64")), literal(2.5, np.dtype("float32"))
('int16_t', '-3', '2.5f')
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import DTypeError

_C_TYPES = {
    "int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "uint16": "uint16_t",
    "int32": "int32_t", "uint32": "uint32_t", "int64": "int64_t", "uint64": "uint64_t",
    "float32": "float", "float64": "double",
}


def c_type(dt: np.dtype, what: str = "") -> str:
    """The C type holding one element of ``dt``; ``DTypeError`` for dtypes the C back end
    does not support (``what`` names the tensor or buffer in the message)."""
    try:
        return _C_TYPES[dt.name]
    except KeyError:
        where = f" ({what})" if what else ""
        raise DTypeError(f"C back end: no C type for dtype {dt.name}{where}; supported: "
                         f"{', '.join(_C_TYPES)}") from None


def is_float(dt: np.dtype) -> bool:
    return dt.kind == "f"


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
    """The C constant of ``v`` rounded to ``dt`` (float32 or float64), exact."""
    x = dt.type(v)
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


def literal(v, dt: np.dtype) -> str:
    """A C constant of ``v`` converted to ``dt`` the way ``np.full(..., v, dt)`` does."""
    if is_float(dt):
        return float_literal(float(v), dt)
    return int_literal(int(np.array(v).astype(dt)))


def poison_literal(dt: np.dtype) -> str:
    """The simulator's poison value of ``dt``: NaN for floats, 0xA5 in every byte else."""
    if is_float(dt):
        return float_literal(float("nan"), dt)
    return int_literal(int(np.full(dt.itemsize, 0xA5, np.uint8).view(dt)[0]))


def int_range(dt: np.dtype) -> tuple[int, int]:
    info = np.iinfo(dt)
    return int(info.min), int(info.max)
