"""The vector unit's bit, shift, widening and math instructions, in numpy: what each computes,
bit for bit (the element-wise ``Compute`` ops of ``npukit.ir`` beyond ``arith.VEC_OPS``; the
C back end spells out the same formulas in ``npukit.c.arith_vec``).

A shift count is a lane of an integer vector of the shifted lane's width, read as unsigned
(a negative count is a huge one), as the Compass DSL's ``S.vsl``/``S.vsr`` read it.

>>> x = np.array([-9, 8, 7, 5], np.int8)
>>> vec_op_more("vshr", [x, np.array([1, 3, 1, 2], np.int8)], np.dtype("int8"), {"round": True})
array([-4,  1,  4,  1], dtype=int8)
"""

from __future__ import annotations

import math

import numpy as np

from .dtypes import is_float
from .floats import to_float

MORE_OPS = ("vshl", "vshr", "vclz", "vcls", "vpopcnt", "vbitrev", "vrotr", "vbitcast",
            "vmulhi", "vquot", "vrem", "vfma", "vmath", "vpow", "vdot")
MATH_FNS = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "tanh": np.tanh, "sin": np.sin,
    "cos": np.cos, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "erf": np.vectorize(math.erf, otypes=[np.float64]), "floor": np.floor, "ceil": np.ceil,
}
ROUND_SHIFT_CAP = 40  # a rounded right shift of a 32-bit lane by 40 or more gives 0


def shift_count(s: np.ndarray) -> np.ndarray:
    """The lanes of a shift-count vector read as unsigned, as int64."""
    return s.view(np.dtype(f"uint{8 * s.dtype.itemsize}")).astype(np.int64)


def shift_left(x: np.ndarray, s: np.ndarray, dt: np.dtype, saturate: bool) -> np.ndarray:
    """``x · 2^s`` exactly; ``saturate``: clamped to ``dt``'s range, else its low bits."""
    bits = 8 * dt.itemsize
    big = s >= bits
    x64 = x.astype(np.int64)
    r = np.where(big, 0, x64 << np.where(big, 0, s))  # |x| < 2^32, s < 32: fits int64
    if not saturate:
        return r.astype(dt)  # numpy narrows integers modulo 2^bits, as C does
    info = np.iinfo(dt)
    r = np.where(big & (x64 > 0), int(info.max), np.where(big & (x64 < 0), int(info.min), r))
    return np.clip(r, int(info.min), int(info.max)).astype(dt)


def shift_right(x: np.ndarray, s: np.ndarray, dt: np.dtype, rnd: bool) -> np.ndarray:
    """``floor(x / 2^s)`` (arithmetic for signed lanes, logical for unsigned);
    ``rnd``: ``x / 2^s`` rounded to nearest, ties to even."""
    x64 = x.astype(np.int64)
    if not rnd:
        s = np.minimum(s, 63)  # every lane has < 64 bits: a shift of 63 empties it
        return (x64 >> s).astype(dt)
    s = np.minimum(s, ROUND_SHIFT_CAP)
    q = x64 >> s
    rem = x64 - (q << s)
    half = np.where(s > 0, np.int64(1) << np.maximum(s - 1, 0), 1)
    up = (rem > half) | ((rem == half) & (q % 2 == 1))
    return (q + up).astype(dt)


def count_leading_zeros(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Zero bits above the highest set bit of each lane (the lane's width for 0)."""
    bits = 8 * x.dtype.itemsize
    u = x.view(np.dtype(f"uint{bits}")).astype(np.float64)  # exact below 2^53
    return (bits - np.frexp(u)[1]).astype(dt)


def _unsigned_bits(x: np.ndarray) -> tuple[np.ndarray, int]:
    bits = 8 * x.dtype.itemsize
    return x.view(np.dtype(f"uint{bits}")).astype(np.uint64), bits


def count_leading_sign_bits(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Bits below the top bit equal to it (``clz`` of ``x ^ (x >> 1)``, less one), for
    signed and unsigned lanes alike."""
    bits = 8 * x.dtype.itemsize
    s = x.view(np.dtype(f"int{bits}")).astype(np.int64)
    u = ((s ^ (s >> 1)) & ((1 << bits) - 1)).astype(np.float64)
    return (bits - np.frexp(u)[1] - 1).astype(dt)


def count_ones(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Set bits of each lane, counted over its bytes (numpy 1 has no ``bitwise_count``)."""
    lanes = np.ascontiguousarray(x).reshape(-1, 1).view(np.uint8)
    return np.unpackbits(lanes, axis=1).sum(axis=1).reshape(x.shape).astype(dt)


def reverse_bits(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """The lane's bits in reverse order (bit 0 becomes the top bit)."""
    u, bits = _unsigned_bits(x)
    r = np.zeros_like(u)
    for k in range(bits):
        r |= ((u >> np.uint64(k)) & np.uint64(1)) << np.uint64(bits - 1 - k)
    return r.astype(np.dtype(f"uint{bits}")).view(dt)


def rotate_right(x: np.ndarray, s: np.ndarray, dt: np.dtype) -> np.ndarray:
    """The lane's bits rotated right by ``s mod width``."""
    u, bits = _unsigned_bits(x)
    s = (s % bits).astype(np.uint64)
    r = (u >> s) | (u << (np.uint64(bits) - s))  # s = 0: the second term is shifted out
    r &= np.uint64((1 << bits) - 1)
    return r.astype(np.dtype(f"uint{bits}")).view(dt)


def mul_high(x: np.ndarray, y: np.ndarray, dt: np.dtype) -> np.ndarray:
    """The upper half (bits w..2w-1) of the exact product of lanes of width w, each operand
    read in its own signedness."""
    bits = 8 * dt.itemsize
    if x.dtype.kind == "u" and y.dtype.kind == "u":  # the product may need all 64 bits
        p = x.astype(np.uint64) * y.astype(np.uint64)
        return (p >> np.uint64(bits)).astype(dt)
    p = x.astype(np.int64) * y.astype(np.int64)  # |p| < 2^63 once one operand is signed
    return (p >> bits).astype(dt)


def quotient(x: np.ndarray, y: np.ndarray, dt: np.dtype) -> np.ndarray:
    """``x / y`` of integer lanes truncated toward zero, 0 where ``y`` is 0, the one
    overflow (the most negative value / -1) saturated to the greatest value."""
    a, b = x.astype(np.int64), y.astype(np.int64)
    q = np.abs(a) // np.where(b == 0, 1, np.abs(b))
    q = np.where((a < 0) != (b < 0), -q, q)
    return np.where(b == 0, 0, np.minimum(q, int(np.iinfo(dt).max))).astype(dt)


def remainder(x: np.ndarray, y: np.ndarray, dt: np.dtype) -> np.ndarray:
    """``|x| mod |y|`` with the sign of ``x`` (C's ``%``), 0 where ``y`` is 0."""
    a, b = x.astype(np.int64), y.astype(np.int64)
    r = np.abs(a) % np.where(b == 0, 1, np.abs(b))
    return np.where(b == 0, 0, np.where(a < 0, -r, r)).astype(dt)


def dot_sum(srcs: list[np.ndarray], dt: np.dtype) -> np.ndarray:
    """``acc + Σ x_i·y_i`` over the terms ``(m_i, x_i, y_i)`` whose mask lane is true, in
    order: integers exactly (int64), then clamped to ``dt``'s range; floats in float64, left
    to right, then rounded once to ``dt``."""
    wide = np.float64 if is_float(dt) else np.int64
    acc = srcs[0].astype(wide)
    for m, x, y in zip(srcs[1::3], srcs[2::3], srcs[3::3]):
        acc = np.where(m.astype(bool), acc + x.astype(wide) * y.astype(wide), acc)
    if is_float(dt):
        return to_float(acc, dt)  # a sum beyond the float range is infinite
    return np.clip(acc, int(np.iinfo(dt).min), int(np.iinfo(dt).max)).astype(dt)


def math_fn(fn: str, x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """``fn`` of each float lane computed in float64, rounded to float32, then to ``dt``; a
    NaN result is the positive quiet NaN (libraries differ in the sign they give it)."""
    with np.errstate(all="ignore"):
        r = np.asarray(MATH_FNS[fn](x.astype(np.float64)))
    with np.errstate(over="ignore"):  # beyond float32: infinity
        return to_float(np.where(np.isnan(r), np.nan, r).astype(np.float32), dt)


def power(x: np.ndarray, y: np.ndarray, dt: np.dtype) -> np.ndarray:
    """``x ** y`` of float lanes as ``math_fn``: in float64, rounded to float32, then to
    ``dt``, a NaN as the positive quiet NaN."""
    with np.errstate(all="ignore"):
        r = np.power(x.astype(np.float64), y.astype(np.float64))
    with np.errstate(over="ignore"):
        return to_float(np.where(np.isnan(r), np.nan, r).astype(np.float32), dt)


def vec_op_more(op: str, srcs: list[np.ndarray], dt: np.dtype, attrs: dict) -> np.ndarray:
    """One instruction of ``MORE_OPS`` on operand arrays (any leading batch dims)."""
    if op == "vshl":
        return shift_left(srcs[0], shift_count(srcs[1]), dt, bool(attrs.get("saturate")))
    if op == "vshr":
        return shift_right(srcs[0], shift_count(srcs[1]), dt, bool(attrs.get("round")))
    if op == "vclz":
        return count_leading_zeros(srcs[0], dt)
    if op == "vcls":
        return count_leading_sign_bits(srcs[0], dt)
    if op == "vpopcnt":
        return count_ones(srcs[0], dt)
    if op == "vbitrev":
        return reverse_bits(srcs[0], dt)
    if op == "vrotr":
        return rotate_right(srcs[0], shift_count(srcs[1]), dt)
    if op == "vquot":
        return quotient(srcs[0], srcs[1], dt)
    if op == "vrem":
        return remainder(srcs[0], srcs[1], dt)
    if op == "vbitcast":
        return np.ascontiguousarray(srcs[0]).view(dt)
    if op == "vmulhi":
        return mul_high(srcs[0], srcs[1], dt)
    if op == "vfma":  # acc + x * y in float64, rounded once
        acc, x, y = (v.astype(np.float64) for v in srcs)
        return to_float(acc + x * y, dt)
    if op == "vdot":
        return dot_sum(srcs, dt)
    if op == "vmath" and is_float(dt):
        return math_fn(attrs["fn"], srcs[0], dt)
    if op == "vpow" and is_float(dt):
        return power(srcs[0], srcs[1], dt)
    raise KeyError(f"no vector instruction {op!r} on {dt.name}")
