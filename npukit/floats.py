"""Conversions into float dtypes, each rounded once to nearest even from the exact value of
the source, as hardware converters and ml_dtypes >= 0.7 round. npukit computes them itself,
from bits, and uses ml_dtypes only to store bfloat16: a result never depends on the
ml_dtypes version installed (before 0.7 it reached bfloat16 through float32, so an int32
or a float64 rounded twice: ``2**24 + 2**16 + 1`` became 0x4B80, rounded once it is 0x4B81).
``npukit.c.arith`` spells out the same formulas in C.

>>> to_float(np.array([2**24 + 2**16 + 1], np.int32), dtype("bfloat16")).view(np.uint16)
array([19329], dtype=uint16)
>>> to_float(np.array([1 + 2**-8 + 2**-30]), dtype("bfloat16")).view(np.uint16)  # up
array([16257], dtype=uint16)
"""

from __future__ import annotations

import numpy as np

from .dtypes import dtype


def __getattr__(name: str):
    """``BF16``, ml_dtypes' bfloat16 dtype, imported when first asked for (ml_dtypes takes
    longer to import than npukit)."""
    if name == "BF16":
        return dtype("bfloat16")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_bfloat16(dt: np.dtype) -> bool:
    """Whether ``dt`` is ml_dtypes' bfloat16 (by its name: asking imports no ml_dtypes)."""
    return np.dtype(dt).name == "bfloat16"


def to_float(x, dt: np.dtype) -> np.ndarray:
    """``x`` (an array or scalar of any integer, bool or float dtype) converted to float
    dtype ``dt``, rounded once to nearest even (beyond the range: infinity; NaN stays NaN,
    a bfloat16 NaN is the quiet 0x7FC0 with its sign). float16, float32 and float64
    results are numpy's own conversions, which round once (from a bfloat16 widened
    exactly)."""
    x = np.asarray(x)
    if x.dtype == dt:
        return x
    if is_bfloat16(dt):
        return bfloat16_bits(exact_float64(x)).view(dt)
    if is_bfloat16(x.dtype):
        x = widen_bfloat16(x)
    with np.errstate(over="ignore"):  # too large for the type: infinity
        return x.astype(dt)


def widen_bfloat16(x: np.ndarray) -> np.ndarray:
    """bfloat16 values as the float32 whose top half their bits are (exact, NaN payloads
    kept)."""
    return (x.view(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def exact_float64(x: np.ndarray) -> np.ndarray:
    """``x`` as float64: exactly, except a 64-bit integer beyond 2^53, rounded to odd (its
    top 43 to 53 bits with the last one set when any bit below is), which rounds to any
    format of at most 41 significant bits as the integer itself does."""
    if is_bfloat16(x.dtype):
        x = widen_bfloat16(x)
    if x.dtype.kind not in "iu" or x.dtype.itemsize < 8:
        return x.astype(np.float64)
    neg = x < 0
    u = x.view(np.uint64)
    m = np.where(neg, np.uint64(0) - u, u)  # the magnitude, INT64_MIN's included
    odd = ((m >> np.uint64(11)) | (m & np.uint64(0x7FF) != 0)) << np.uint64(11)
    d = np.where(m >> np.uint64(53) != 0, odd, m).astype(np.float64)  # < 2^53 units: exact
    return np.where(neg, -d, d)


def bfloat16_bits(d: np.ndarray) -> np.ndarray:
    """The bits of float64 values rounded once to bfloat16, nearest even: the 53-bit
    significand ``m`` (value ``m·2^(e-52)``) cut at bfloat16's last place, ``2^(e-7)``, or
    ``2^-133`` below its normal range (subnormals); a carry out of the 8 kept bits steps
    into the next binade, past the largest finite value into infinity."""
    u = np.asarray(d, np.float64).view(np.int64)
    sign = np.where(u < 0, 0x8000, 0)
    e64, mant = (u >> 52) & 0x7FF, u & ((1 << 52) - 1)
    m = np.where(e64 == 0, mant, mant | (1 << 52))
    e = np.where(e64 == 0, -1022, e64 - 1023)  # the exponent of m's bit 52
    ep = np.maximum(e, -126)  # that of the result's leading bit
    s = np.minimum(ep - e + 45, 60)  # bits of m below the last kept; from 55 on all are
    r = m >> s
    rem, half = m & ((1 << s) - 1), 1 << (s - 1)
    r += (rem > half) | ((rem == half) & (r & 1 == 1))
    bits = np.minimum(((ep + 126) << 7) + r, 0x7F80)  # r = 2^8 carries into the exponent
    bits = np.where(e64 == 0x7FF, np.where(mant != 0, 0x7FC0, 0x7F80), bits)
    return (bits | sign).astype(np.uint16)
