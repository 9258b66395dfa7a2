"""The AIE API's ``accum::to_vector<T>(shift)`` for integer accumulators, bit-exact: the
accumulator is shifted right by ``shift`` bits, rounded by an ``aie::rounding_mode`` and
narrowed to ``T`` by an ``aie::saturation_mode`` — the step that turns ``linear_approx``'s
accumulator (acc32, acc64) into a vector.

With ``t`` the accumulator value (an exact integer) and ``q = t / 2**shift``:

- rounding (the AIE API's names): ``floor`` and ``ceil``; ``symmetric_floor`` (towards zero)
  and ``symmetric_ceil`` (away from zero); to the nearest integer, a tie going towards
  ``positive_inf``, ``negative_inf``, ``symmetric_inf`` (away from zero), ``symmetric_zero``
  (towards zero), ``conv_even`` (the even integer) or ``conv_odd`` (the odd one);
- saturation: ``none`` keeps the low bits of the result (two's complement wrap),
  ``saturate`` clamps to ``T``'s range, ``symmetric`` to ``[-max, max]`` (signed ``T`` only).
"""

from __future__ import annotations

import numpy as np

from ..errors import LutError

ROUNDING_MODES = ("floor", "ceil", "symmetric_floor", "symmetric_ceil", "positive_inf",
                  "negative_inf", "symmetric_inf", "symmetric_zero", "conv_even", "conv_odd")
SATURATION_MODES = ("none", "saturate", "symmetric")
# The vectors an integer accumulator converts to.
VECTOR_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32")
ACCUMULATORS = {"int32": "acc32", "int64": "acc64"}


def _rounding_up(mode: str, t: np.ndarray, floor: np.ndarray, rem: np.ndarray,
                 shift: int) -> np.ndarray:
    """Whether ``mode`` takes ``floor + 1`` rather than ``floor`` (``rem``: the dropped bits,
    0 <= rem < 2**shift)."""
    inexact = rem != 0
    if mode == "floor" or shift == 0:  # nothing dropped, nothing to round
        return np.zeros(t.shape, bool)
    if mode == "ceil":
        return inexact
    if mode == "symmetric_floor":
        return inexact & (t < 0)
    if mode == "symmetric_ceil":
        return inexact & (t >= 0)
    half = np.int64(1) << np.int64(shift - 1)
    tie_up = {"positive_inf": np.ones(t.shape, bool), "negative_inf": np.zeros(t.shape, bool),
              "symmetric_inf": t >= 0, "symmetric_zero": t < 0,
              "conv_even": (floor & 1) == 1, "conv_odd": (floor & 1) == 0}[mode]
    return (rem > half) | ((rem == half) & tie_up)


def to_vector(acc, dtype, shift: int = 0, rounding: str = "floor",
              saturation: str = "none") -> np.ndarray:
    """``acc.to_vector<dtype>(shift)`` of the AIE API under ``rounding`` and ``saturation``.

    ``acc`` holds an int32 (acc32) or int64 (acc64) accumulator; ``dtype`` is one of
    ``VECTOR_DTYPES``; ``0 <= shift <`` the accumulator's bits. The defaults are the AIE
    API's (``rounding_mode::floor``, ``saturation_mode::none``).

    >>> acc = np.array([5, 6, 7, -6, 1000], np.int32)
    >>> to_vector(acc, "int8", 2, "conv_even", "saturate").tolist()
    [1, 2, 2, -2, 127]
    >>> to_vector(acc, "int8", 2, "symmetric_inf").tolist()
    [1, 2, 2, -2, -6]
    """
    acc = np.asarray(acc)
    if acc.dtype.name not in ACCUMULATORS:
        raise LutError(f"to_vector reads an integer accumulator held as int32 (acc32) or "
                       f"int64 (acc64); got {acc.dtype}")
    out = np.dtype(dtype)
    if out.name not in VECTOR_DTYPES:
        raise LutError(f"to_vector converts an integer accumulator to one of {VECTOR_DTYPES}; "
                       f"got dtype {out}")
    bits = acc.dtype.itemsize * 8
    if isinstance(shift, bool) or not isinstance(shift, (int, np.integer)) or \
            not 0 <= shift < bits:
        raise LutError(f"shift={shift!r} must be an integer in [0, {bits}) for the "
                       f"{ACCUMULATORS[acc.dtype.name]} accumulator")
    if rounding not in ROUNDING_MODES:
        raise LutError(f"rounding={rounding!r} must be one of the AIE API's rounding modes "
                       f"{ROUNDING_MODES}")
    if saturation not in SATURATION_MODES:
        raise LutError(f"saturation={saturation!r} must be one of the AIE API's saturation "
                       f"modes {SATURATION_MODES}")
    if saturation == "symmetric" and out.kind == "u":
        raise LutError(f"saturation='symmetric' is for signed types; dtype {out} is unsigned")
    t = acc.astype(np.int64)
    shift = int(shift)
    floor = t >> np.int64(shift)
    rem = t & np.int64((1 << shift) - 1)
    # floor + 1 cannot overflow: floor is the int64 maximum only when shift is 0 (rem 0).
    q = floor + _rounding_up(rounding, t, floor, rem, shift).astype(np.int64)
    info = np.iinfo(out)
    if saturation == "saturate":
        q = np.clip(q, int(info.min), int(info.max))
    elif saturation == "symmetric":
        q = np.clip(q, -int(info.max), int(info.max))
    return q.astype(out)  # saturation "none": the low bits, a two's complement wrap


# The vectors a kernel's Act converts to: its result is int32.
KERNEL_VECTOR_DTYPES = ("int8", "uint8", "int16", "uint16", "int32")


def kernel_to_vector(args, acc: np.ndarray) -> tuple:
    """``s.act.linear_approx``'s ``to_vector=(dtype, shift, rounding, saturation)`` checked
    against the accumulator ``acc`` (a probe of its dtype) and completed with the defaults:
    ``(dtype name, shift, rounding, saturation)``."""
    if not isinstance(args, tuple) or not 1 <= len(args) <= 4:
        raise LutError(f"to_vector={args!r} must be a tuple (dtype, shift, rounding, "
                       f"saturation), trailing items optional")
    full = tuple(args) + (0, "floor", "none")[len(args) - 1:]
    if acc.dtype.kind == "f":
        raise LutError("to_vector converts an integer accumulator; a float linear_approx's "
                       "result is rounded by the store into its tensor")
    to_vector(acc, *full)  # the AIE API's rules, with their numbers
    name = np.dtype(full[0]).name
    if name not in KERNEL_VECTOR_DTYPES:
        raise LutError(f"to_vector dtype {name}: a kernel's Act result is int32, so it takes "
                       f"{KERNEL_VECTOR_DTYPES}")
    return (name, int(full[1]), full[2], full[3])
