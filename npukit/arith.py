"""The target's exact arithmetic, in numpy: what each vector instruction computes, bit for
bit. The simulator calls these; the C back end spells out the same formulas.

Integer ALU results are int32 partials with two's-complement wrap-around (sums and products
are formed in int64 and wrapped), float ALU results are float32 with one rounding per
operation (no fused multiply-add). Act results are int32 or float32 values already clamped
to [lo, hi]; a store narrows them to the tensor's dtype, saturating integers to its range
and rounding floats to nearest even.
"""

from __future__ import annotations

import numpy as np

from .dtypes import is_float

ALU_OPS = {
    "mul": lambda a, b: a * b,
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "max": np.maximum,
    "min": np.minimum,
    "pass": lambda a: a,
}
COMBINE = {"add": lambda acc, x: acc + x, "max": np.maximum, "min": np.minimum}


def wrap32(x: np.ndarray) -> np.ndarray:
    """int64 -> int32 two's-complement wrap-around."""
    return x.astype(np.int64).astype(np.uint32).view(np.int32) if x.ndim else \
        np.int64(x).astype(np.uint32).view(np.int32)


def alu(op: str, srcs: list[np.ndarray], acc_dtype: np.dtype) -> np.ndarray:
    """One ALU instruction on operand arrays (any leading batch dims)."""
    if is_float(acc_dtype):
        return ALU_OPS[op](*(s.astype(np.float32) for s in srcs)).astype(np.float32)
    return wrap32(ALU_OPS[op](*(s.astype(np.int64) for s in srcs)))


def combine(how: str, acc: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Accumulate ``x`` into partials ``acc`` (int32 wrap-around or float32)."""
    if acc.dtype == np.float32:
        return COMBINE[how](acc, x).astype(np.float32)
    return wrap32(COMBINE[how](acc.astype(np.int64), x.astype(np.int64)))


def rounding_term(mode: str, shift: int) -> int:
    """The constant added before ``>> shift``: half_up adds half an LSB."""
    if shift == 0 or mode == "floor":
        return 0
    return 1 << (shift - 1)


def shift_round(t: np.ndarray, shift: int, mode: str) -> np.ndarray:
    """``t >> shift`` with the target's rounding, on int64 (arithmetic shift = floor).
    half_up: ``(t + 2^(s-1)) >> s``; floor: ``t >> s``; half_even: ties go to the even
    result."""
    if shift == 0:
        return t
    out = (t + rounding_term(mode, shift)) >> shift
    if mode == "half_even":
        tie = (t & ((1 << shift) - 1)) == (1 << (shift - 1))
        out = np.where(tie & (out & 1).astype(bool), out - 1, out)
    return out


def rescale_clamp(p: np.ndarray, bias, scale, shift: int, zero_point, lo, hi, mode: str):
    """Act ``rescale_clamp``: int ``clamp(shift_round((p + bias) * scale, shift) +
    zero_point, lo, hi)`` in int64; float ``clamp((p + bias) * scale + zero_point, lo, hi)``
    in float32."""
    if p.dtype == np.float32:
        f = np.float32
        t = ((p + f(bias)).astype(f) * f(scale)).astype(f) + f(zero_point)
        return np.clip(t.astype(f), f(lo), f(hi)).astype(f)
    t = (p.astype(np.int64) + np.int64(bias)) * np.int64(scale)
    t = shift_round(t, shift, mode) + np.int64(zero_point)
    return np.clip(t, lo, hi).astype(np.int32)


def clamp(p: np.ndarray, lo, hi) -> np.ndarray:
    """Act ``clamp``."""
    if p.dtype == np.float32:
        return np.clip(p, np.float32(lo), np.float32(hi)).astype(np.float32)
    return np.clip(p.astype(np.int64), lo, hi).astype(np.int32)


def convert(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """A transfer into a tensor of dtype ``dt``: saturate integers, round floats to nearest."""
    if x.dtype == dt:
        return x
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.clip(x.astype(np.int64), info.min, info.max).astype(dt)
    return x.astype(dt)
