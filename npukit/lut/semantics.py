"""Bit-exact semantics of the AIE API's ``aie::parallel_lookup`` and ``aie::linear_approx``,
vectorised over numpy arrays.

``parallel_lookup``: ``index = (x >> step_bits) + bias``, then the out-of-range policy, then
``out = offsets[index]``.

``linear_approx``, integer form::

    index = (x >> step_bits) + bias
    out   = slope[index] * (x & ((1 << step_bits) - 1)) + (offset[index] << shift_offset)

in the accumulator type; floating-point form::

    index = (int(floor(x)) >> step_bits) + bias
    out   = slope[index] * x + offset[index]

in ``accfloat``. The floating-point form also takes a negative ``step_bits`` (mlir-aie's
bfloat16 ``tanh`` uses -2): the AIE API converts the input to an integer with
``-step_bits`` fraction bits, so ``index = int(floor(x * 2**-step_bits)) + bias``: cells of
width ``2**step_bits``. ``>>`` is an arithmetic (flooring) shift. The index of ``linear_approx`` is
clamped to the table: the AIE API gives no policy for it, and clamping is ``parallel_lookup``'s
default.

``EXTENDED_LINEAR_TYPES`` holds npukit's one extension, used by kernels only when asked
(``extended=True``): float32 input with the AIE API's float table (float32 offsets, bfloat16
slopes), because an NPU's Act unit reads float32 partials. The formula is the float one;
the product rounds to float32 before the sum, which changes nothing for inputs of at most
16 significant bits (bfloat16 or float16 values, also scaled by a power of two): their
product with a bfloat16 slope is exact in float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dtypes import dtype as _dtype
from ..dtypes import ml_dtypes
from ..errors import LutError
from .reals import array
from .table import Lut

OOR_POLICIES = ("saturate", "truncate")


@dataclass(frozen=True)
class LinearType:
    """One row of the AIE API's ``linear_approx`` type table.

    >>> LINEAR_TYPES[0].input, LINEAR_TYPES[0].accumulator, LINEAR_TYPES[0].min_step_bits
    ('int8', 'acc32', 2)
    """

    input: str
    offset: str
    slope: str
    accumulator: str
    lanes: int
    min_step_bits: int

    @property
    def acc_dtype(self) -> np.dtype:
        """The numpy dtype that holds the accumulator: int32, int64 or float32."""
        return np.dtype({"acc32": np.int32, "acc64": np.int64, "accfloat": np.float32}[
            self.accumulator])

    def __str__(self) -> str:
        return f"{self.input}/{self.offset}/{self.slope} ({self.accumulator})"


# The float form's lowest step_bits: 2**-step_bits must be a float32, so that x * 2**-step_bits
# is exact in float32 (or overflows to inf, which saturates the index like any large value).
MIN_FLOAT_STEP_BITS = -127

LINEAR_TYPES = (
    LinearType("int8", "int8", "int8", "acc32", 32, 2),
    LinearType("int16", "int16", "int16", "acc64", 16, 3),
    LinearType("int16", "int32", "int32", "acc64", 16, 4),
    LinearType("bfloat16", "float32", "bfloat16", "accfloat", 16, 0),
)

# npukit's extension (module docstring): float32 input, the float row's table and formula.
EXTENDED_LINEAR_TYPES = (
    LinearType("float32", "float32", "bfloat16", "accfloat", 16, 0),
)


def _int_param(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise LutError(f"{name} must be an integer; got {value!r}")
    return int(value)


def _table(lut) -> Lut:
    if not isinstance(lut, Lut):
        raise LutError(f"lut must be a npukit.lut.Lut; got {type(lut).__name__} (wrap values "
                       f"as Lut(offsets, slopes))")
    return lut


def _index_input(x) -> np.ndarray:
    x = array(x)
    if x.dtype.kind not in "iu":
        raise LutError(f"parallel_lookup indexes with signed or unsigned integers of 8 bits or "
                       f"more; got input dtype {x.dtype}")
    return x


def parallel_lookup(lut: Lut, x, step_bits: int = 0, bias: int = 0,
                    oor: str = "saturate") -> np.ndarray:
    """Direct lookup ``lut.offsets[(x >> step_bits) + bias]`` with an out-of-range policy.

    ``x`` holds signed or unsigned integers (8 bits or more). ``step_bits`` low bits are
    dropped (a flooring shift, the default rounding mode). ``bias`` exists for signed inputs
    only and must be 0 or a power of two. ``oor="saturate"`` clamps the index to
    ``[0, size)``; ``oor="truncate"`` keeps the low bits of an unsigned index and wraps a
    signed one into ``[-bias, size - bias)`` before adding ``bias``, so the table size must
    be a power of two. The result has the offset dtype and the shape of ``x``.

    >>> t = Lut(np.array([10, 11, 12, 13], np.int16))
    >>> parallel_lookup(t, np.array([-3, 0, 1, 7], np.int8), step_bits=1, bias=2).tolist()
    [10, 12, 12, 13]
    >>> parallel_lookup(t, np.array([-3, 0, 1, 7], np.int8), 1, 2, oor="truncate").tolist()
    [10, 12, 12, 11]
    """
    x = _index_input(x)
    if _table(lut).is_linear:
        raise LutError("parallel_lookup reads a direct table; this Lut holds slopes for "
                       "linear_approx")
    step_bits = _int_param("step_bits", step_bits)
    bias = _int_param("bias", bias)
    bits = x.dtype.itemsize * 8
    if not 0 <= step_bits < bits:
        raise LutError(f"step_bits={step_bits} must lie in [0, {bits}) for {x.dtype} input: "
                       "at least one index bit must remain")
    signed = x.dtype.kind == "i"
    if not signed and bias != 0:
        raise LutError(f"bias={bias} is only available for signed inputs; {x.dtype} input "
                       "takes step_bits alone")
    if bias < 0 or (bias & (bias - 1)) or bias >= 1 << 32:
        raise LutError(f"bias={bias} must be 0 or a power of two below 2**32 (the AIE API: an "
                       f"unsigned int, for signed inputs)")
    if not isinstance(oor, str) or oor not in OOR_POLICIES:
        raise LutError(f"oor={oor!r} must be one of {OOR_POLICIES}")
    n = lut.size
    if oor == "truncate" and n & (n - 1):
        raise LutError(f"oor='truncate' keeps the low bits of the index, so the table size "
                       f"must be a power of two; got size {n}")
    if signed:
        raw = x.astype(np.int64) >> step_bits
        if oor == "saturate":
            # Clip first so raw + bias cannot overflow int64; the index is clamped anyway.
            index = np.clip(np.clip(raw, -(1 << 62), 1 << 62) + bias, 0, n - 1)
        else:
            index = (raw % n + bias % n) % n
    else:
        raw = x.astype(np.uint64) >> np.uint64(step_bits)
        index = np.minimum(raw, n - 1) if oor == "saturate" else raw & np.uint64(n - 1)
    return lut.offsets[index.astype(np.int64)]


def linear_type(lut: Lut, input_dtype, extended: bool = False) -> LinearType:
    """The row of ``LINEAR_TYPES`` that an input dtype and a table's types select; with
    ``extended``, the rows of ``EXTENDED_LINEAR_TYPES`` too.

    A float32 slope array is accepted for a bfloat16 slope when the low 16 mantissa bits of
    every slope are zero (the AIE API allows float storage under that rule).

    >>> t = Lut(np.zeros(4, np.int16) + 1, np.ones(4, np.int16))
    >>> str(linear_type(t, "int16"))
    'int16/int16/int16 (acc64)'
    """
    if not _table(lut).is_linear:
        raise LutError("linear_approx needs a table with slopes; this Lut holds offsets only")
    ind = _dtype(input_dtype)
    odt, sdt = lut.offset_dtype, lut.slope_dtype
    rows = LINEAR_TYPES + (EXTENDED_LINEAR_TYPES if extended else ())
    for row in rows:
        if (ind.name, odt.name) != (row.input, row.offset):
            continue
        if sdt.name == row.slope:
            return row
        if row.slope == "bfloat16" and sdt == np.float32:
            low = lut.slopes.view(np.uint32) & np.uint32(0xFFFF)
            if np.any(low):
                bad = int(np.flatnonzero(low)[0])
                raise LutError(f"slopes[{bad}] = {lut.slopes[bad]!r} breaks the rule: the low "
                               "16 mantissa bits of a float slope must be zero (the slope is "
                               "used as bfloat16)")
            return row
    names = ", ".join(str(r) for r in LINEAR_TYPES)
    more = ("; npukit adds " + ", ".join(str(r) for r in EXTENDED_LINEAR_TYPES)) if extended \
        else ""
    raise LutError(f"linear_approx has no type combination input {ind}, offset {odt}, slope "
                   f"{sdt}; the AIE API supports {names}{more}")


def linear_approx(lut: Lut, x, step_bits: int, bias: int = 0,
                  shift_offset: int = 0, extended: bool = False) -> np.ndarray:
    """Linear approximation ``slope * x + offset`` read from ``lut`` (the AIE API), bit-exact.

    Integer inputs (int8, int16) return the accumulator (int32 for acc32, int64 for acc64)::

        index = clamp((x >> step_bits) + bias, 0, size - 1)
        out   = slope[index] * (x & ((1 << step_bits) - 1)) + (offset[index] << shift_offset)

    bfloat16 input returns float32 (accfloat)::

        index = clamp((int(floor(x)) >> step_bits) + bias, 0, size - 1)
        out   = slope[index] * x + offset[index]

    where a negative ``step_bits`` indexes by ``int(floor(x * 2**-step_bits))`` (the AIE
    API's float-to-integer conversion with ``-step_bits`` fraction bits).

    The product of two bfloat16 values is exact in float32, so the one rounding is the
    float32 addition (round to nearest even). Rules (``LutError`` otherwise): the types form
    a row of ``LINEAR_TYPES``; ``step_bits`` is at least that row's minimum (for the float
    form ``MIN_FLOAT_STEP_BITS``) and leaves one index bit; ``bias`` fits a C ``int``;
    ``0 <= shift_offset`` and ``offset << shift_offset`` fits the accumulator with a sign
    bit to spare; ``shift_offset`` is 0 for bfloat16.
    ``extended=True`` also accepts float32 input (``EXTENDED_LINEAR_TYPES``): the same float
    formula, with the product rounded to float32 before the sum (exact for inputs of at most
    16 significant bits).

    >>> t = Lut(np.array([0, 8, 16], np.int8), np.array([2, 2, 0], np.int8))
    >>> linear_approx(t, np.array([0, 3, 5, 100], np.int8), step_bits=2).tolist()
    [0, 6, 10, 16]
    >>> f = Lut(np.arange(4, dtype=np.float32), np.zeros(4, ml_dtypes.bfloat16))
    >>> linear_approx(f, np.array([0.2, 0.25, 0.5, 0.75], ml_dtypes.bfloat16), -2).tolist()
    [0.0, 1.0, 2.0, 3.0]
    """
    x = array(x)
    row = linear_type(lut, x.dtype, extended)
    step_bits = _int_param("step_bits", step_bits)
    bias = _int_param("bias", bias)
    shift_offset = _int_param("shift_offset", shift_offset)
    floating = row.accumulator == "accfloat"
    bits = 32 if floating else x.dtype.itemsize * 8
    least = MIN_FLOAT_STEP_BITS if floating else row.min_step_bits
    if not least <= step_bits < bits:
        why = ("a negative step_bits indexes by floor(x * 2**-step_bits), and 2**-step_bits "
               "must be a float32" if floating else
               f"the minimum step_bits of the AIE API's table is {row.min_step_bits}")
        raise LutError(f"step_bits={step_bits} must lie in [{least}, {bits}) for {row}: "
                       f"{why}, and at least one index bit must remain")
    if not -(1 << 31) <= bias < (1 << 31):
        raise LutError(f"bias={bias} must fit a 32-bit int")
    n = lut.size
    if row.accumulator == "accfloat":
        if shift_offset != 0:
            raise LutError(f"shift_offset={shift_offset} must be 0 for {x.dtype} input: the "
                           "floating-point form adds the offset unshifted")
        xf = x.astype(np.float32)
        # x * 2**-step_bits for a negative step_bits is exact in float64.
        scaled = np.ldexp(xf.astype(np.float64), -min(step_bits, 0))
        floor = np.floor(scaled)
        # int(floor(x)) as a 32-bit int; NaN picks entry 0 and stays NaN through slope * x.
        floor = np.clip(np.nan_to_num(floor, nan=0.0), -(1 << 31), (1 << 31) - 1)
        index = np.clip((floor.astype(np.int64) >> max(step_bits, 0)) + bias, 0, n - 1)
        slope = lut.slopes[index].astype(ml_dtypes.bfloat16).astype(np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            return slope * xf + lut.offsets[index]
    acc_bits = row.acc_dtype.itemsize * 8
    offset_bits = lut.offset_dtype.itemsize * 8
    most = acc_bits - offset_bits - 1
    if not 0 <= shift_offset <= most:
        raise LutError(f"shift_offset={shift_offset} must lie in [0, {most}] for {row}: "
                       f"offset << shift_offset must fit the {acc_bits}-bit accumulator")
    xi = x.astype(np.int64)
    index = np.clip((xi >> step_bits) + bias, 0, n - 1)
    remainder = xi & ((1 << step_bits) - 1)
    out = (lut.slopes[index].astype(np.int64) * remainder
           + (lut.offsets[index].astype(np.int64) << shift_offset))
    return out.astype(row.acc_dtype)
