"""The target's exact arithmetic, in numpy: what each vector instruction computes, bit for
bit. The simulator calls these; the C back end spells out the same formulas.

Integer ALU results are int32 partials with two's-complement wrap-around (sums and products
are formed in int64 and wrapped), float ALU results are float32 with one rounding per
operation (no fused multiply-add). Act results are int32 or float32 values already clamped
to [lo, hi] (integer bounds beyond int32 act as the int32 limits: ``act_bounds``; a
``linear_approx`` on an int16 table returns its int64 accumulator); a store
narrows them to the tensor's dtype, saturating integers to its range and rounding floats
once to nearest even (``npukit.floats``, which bfloat16 results come from too).
"""

from __future__ import annotations

import numpy as np

from .arith_vec import MORE_OPS, vec_op_more
from .dtypes import is_float
from .floats import to_float

ALU_OPS = {
    "mul": lambda a, b: a * b,
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "max": np.maximum,
    "min": np.minimum,
    "pass": lambda a: a,
    "bnot": np.invert,                                # Torq's BNOT (integers only)
    "lnot": lambda a: (a == 0).astype(a.dtype),        # Torq's NOT: 1 where a is 0, else 0
}
# How the ALU folds a result into its partials (the Torq ALU's accumulate modes ACC, MAX,
# MIN, MUL, BAND, BOR, BXOR); the bitwise ones take integer partials only.
COMBINE = {"add": lambda acc, x: acc + x, "max": np.maximum, "min": np.minimum,
           "mul": lambda acc, x: acc * x, "and": np.bitwise_and, "or": np.bitwise_or,
           "xor": np.bitwise_xor}


def wrap32(x) -> np.ndarray:
    """Integers (an array, a numpy or Python scalar within int64) reduced modulo 2**32 to
    int32, the 32-bit two's-complement wrap-around of the target's and GAP's accumulators:
    ``wrap32(2**31 + 5) == -2**31 + 5``. A scalar gives an ``np.int32``."""
    out = np.asarray(x, np.int64).astype(np.uint32).view(np.int32)
    return out if out.ndim else out[()]


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


def act_bounds(lo: int, hi: int) -> tuple[int, int]:
    """The bounds an integer Act clamp applies: ``lo`` and ``hi`` saturated to int32, the
    type of its result. Clamping to them gives the value clamped to [lo, hi], saturated
    to int32 (a bound beyond int32 — ``out_max=2**64 - 1`` for a uint64 output — is the
    int32 limit; ``npukit.easy`` refuses bounds that leave no int32 value)."""
    return _saturate(lo, 32), _saturate(hi, 32)


def _saturate(v: int, bits: int) -> int:
    """Integer ``v`` saturated to the range of a ``bits``-bit signed integer."""
    return min(max(int(v), -2**(bits - 1)), 2**(bits - 1) - 1)


def rescale_clamp(p: np.ndarray, bias, scale, shift: int, zero_point, lo, hi, mode: str):
    """Act ``rescale_clamp``: int ``clamp(shift_round((p + bias) * scale, shift) +
    zero_point, lo, hi)`` in int64, the bounds those of ``act_bounds``; float ``clamp((p +
    bias) * scale + zero_point, lo, hi)`` in float32."""
    if p.dtype == np.float32:
        f = np.float32
        t = ((p + f(bias)).astype(f) * f(scale)).astype(f) + f(zero_point)
        return clamp(t.astype(f), lo, hi)
    t = (p.astype(np.int64) + np.int64(bias)) * np.int64(scale)
    t = shift_round(t, shift, mode) + np.int64(zero_point)
    return np.clip(t, *act_bounds(lo, hi)).astype(np.int32)


def clamp(p: np.ndarray, lo, hi) -> np.ndarray:
    """Act ``clamp``: ``x = lo if x < lo``, then ``x = hi if x > hi``. On float32 a NaN
    compares false: a NaN partial stays NaN, a NaN bound clamps nothing (``np.clip`` would
    make every result NaN), and a value equal to a bound is kept (-0.0 at a bound 0.0). The
    bounds of integer partials are those of ``act_bounds``."""
    if p.dtype == np.float32:
        f = np.float32
        x = np.where(p < f(lo), f(lo), p)
        return np.where(x > f(hi), f(hi), x).astype(f)
    return np.clip(p.astype(np.int64), *act_bounds(lo, hi)).astype(np.int32)


# Torq's Act modes (ACTMode), applied to the partials before the clamp.
ACT_MODES = ("ACT", "ABS", "NEG", "CLZ", "CEL", "FLR", "I2F", "F2I")


def act_mode(p: np.ndarray, mode: str) -> np.ndarray:
    """Torq's Act mode on the partials: ``ABS``/``NEG`` (int64 on integer partials, so
    ``-(-2**31)`` is not wrapped; float32 otherwise), ``CLZ`` (leading zeros of the int32
    as 32 bits, 32 for 0), ``CEL``/``FLR`` (float32 ceiling and floor), ``I2F`` (int32 to
    float32, nearest even); ``ACT`` and ``F2I`` pass the partials unchanged (``F2I``
    converts after the clamp: ``act_clamp``)."""
    if mode == "I2F":
        return p.astype(np.float32)
    if p.dtype == np.float32:
        fn = {"ABS": np.abs, "NEG": np.negative, "CEL": np.ceil, "FLR": np.floor}.get(mode)
        return p if fn is None else fn(p).astype(np.float32)
    if mode == "CLZ":
        return 32 - np.frexp(p.astype(np.int64) & 0xFFFFFFFF)[1].astype(np.int64)
    fn = {"ABS": np.abs, "NEG": np.negative}.get(mode)
    return p if fn is None else fn(p.astype(np.int64))


def act_clamp(p: np.ndarray, lo, hi, mode: str = "ACT") -> np.ndarray:
    """Act ``clamp`` in Torq's ``mode``: ``clamp(act_mode(p), lo, hi)``; for ``F2I`` the
    float32 partials are clamped, then truncated towards zero to int32, saturating, NaN
    to 0 (``to_fixed`` of the truncated value: its floor is itself)."""
    x = clamp(act_mode(p, mode), lo, hi)
    return to_fixed(np.trunc(x), 0) if mode == "F2I" else x


def to_fixed(p: np.ndarray, shift: int) -> np.ndarray:
    """Act ``to_fixed`` (the AIE API's ``aie::to_fixed<int32>(v, shift)`` as AIE-ML rounds
    it): ``floor(p * 2**shift)`` of float32 partials, saturated to int32, NaN to 0."""
    with np.errstate(invalid="ignore"):
        t = np.floor(p.astype(np.float64) * 2.0 ** shift)
    t = np.where(np.isnan(t), 0.0, np.clip(t, -2.0 ** 31, 2.0 ** 31 - 1))
    return t.astype(np.int32)


def convert(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """A transfer into a tensor of dtype ``dt``: saturate integers, round floats once to
    nearest even (``floats.to_float``)."""
    if x.dtype == dt:
        return x
    if dt.kind in "iu":
        info = np.iinfo(dt)
        if x.dtype == np.uint64:  # past int64's range is past every limit below uint64's
            x = np.minimum(x, np.uint64(2**63 - 1))
        return np.clip(x.astype(np.int64), info.min, info.max).astype(dt)
    return to_float(x, dt) if is_float(dt) else x.astype(dt)


# -- LUT instructions (Act lookup / linear_approx) -----------------------------------------
#
# A table travels in the program as the flat image of the AIE API's memory layout (``Lut.layout``
# for the target's ``lut.banks`` parallel accesses): one scalar per entry of a direct table
# (8-bit values widened to 16 bits), two adjacent scalars (slope, then offset) per entry of a
# linear table, the two images of ``parallel=4`` one after the other. ``lut_image`` writes it,
# ``lut_from_image`` reads it back (checking the copies agree); the simulator executes the
# instruction on what it reads back, through ``npukit.lut``'s semantics.

LUT_VALUE_DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "float16", "bfloat16",
                    "float32")


def lut_image(lut, parallel: int, bank_bits: int) -> tuple[np.ndarray, dict]:
    """The flat scalar image of ``lut`` for ``parallel`` accesses with ``bank_bits`` banks,
    and the attributes that describe it (``entries``, ``offset_dtype``, ``slope_dtype``,
    ``parallel``, ``bank_bits``)."""
    image = lut.layout(parallel, bank_bits)
    if parallel == 4:
        image = np.concatenate(image)
    storage = lut.storage_dtype()
    if storage.names:  # (slope, offset) records of one scalar type: two scalars per entry
        image = np.ascontiguousarray(image).view(storage["offset"])
    attrs = {"entries": lut.size, "offset_dtype": lut.offset_dtype.name,
             "slope_dtype": None if lut.slopes is None else lut.slope_dtype.name,
             "parallel": parallel, "bank_bits": bank_bits}
    return image, attrs


def lut_from_image(values: np.ndarray, attrs: dict):
    """The ``Lut`` a flat image holds (the inverse of ``lut_image``)."""
    from .dtypes import dtype
    from .lut import Lut
    from .lut.table import entry_dtype

    odt = dtype(attrs["offset_dtype"])
    sdt = None if attrs["slope_dtype"] is None else dtype(attrs["slope_dtype"])
    storage = entry_dtype(odt, sdt)
    image = np.ascontiguousarray(values)
    if storage.names:
        image = image.view(storage)
    if attrs["parallel"] == 4:
        half = image.size // 2
        image = (image[:half], image[half:])
    return Lut.from_layout(image, attrs["entries"], offset_dtype=odt, slope_dtype=sdt,
                           parallel=attrs["parallel"], bank_bits=attrs["bank_bits"])


def act_result_dtype(values: np.dtype) -> np.dtype:
    """The Act result type for values of ``values``' type: int32 or float32 (exact)."""
    return np.dtype(np.float32) if is_float(values) else np.dtype(np.int32)


def linear_bounds(lo: int | None, hi: int | None) -> tuple[int | None, int | None]:
    """The clamp bounds of ``linear_approx`` on integer partials, saturated to int64: the
    clamps compare int64 values, so the result is the same as with the exact bounds."""
    return tuple(None if v is None else _saturate(v, 64) for v in (lo, hi))


def act_lookup(p: np.ndarray, lut, step_bits: int, bias: int, oor: str) -> np.ndarray:
    """Act ``lookup``: ``parallel_lookup`` indexed by the int32 partials themselves, the
    values widened exactly to int32 or float32."""
    from .lut import parallel_lookup

    out = parallel_lookup(lut, p, step_bits, bias, oor)
    return out.astype(act_result_dtype(out.dtype))


def act_linear_approx(p: np.ndarray, lut, step_bits: int, bias: int, shift_offset: int,
                      lo, hi, scale_exp: int, in_dtype, to_vector=None) -> np.ndarray:
    """Act ``linear_approx``: condition the partial, then ``linear_approx``.

    Float32 partials: ``x = p``; ``x = lo if x < lo``; ``x = hi if x > hi`` (NaN passes);
    ``x = x * 2**scale_exp`` in float32 (exact, or inf); then the float formula on float32
    input (``EXTENDED_LINEAR_TYPES``). Integer partials: the same clamps in 64 bits (a bound
    beyond int64 acts as the int64 limit: ``linear_bounds``), then saturation to
    ``in_dtype`` (int8 or int16, the table's input type), then the integer formula. Returns
    the accumulator: float32, int32 (acc32) or int64 (acc64); with ``to_vector`` (dtype,
    shift, rounding, saturation), ``npukit.lut.to_vector`` of it in int32."""
    from .lut import linear_approx
    from .lut import to_vector as convert_acc

    if p.dtype == np.float32:
        x = p
        if lo is not None:
            x = np.where(x < np.float32(lo), np.float32(lo), x)
        if hi is not None:
            x = np.where(x > np.float32(hi), np.float32(hi), x)
        if scale_exp:
            with np.errstate(over="ignore", invalid="ignore"):  # inf and NaN are results
                x = np.ldexp(x, np.int32(scale_exp)).astype(np.float32)
        return linear_approx(lut, x.astype(np.float32), step_bits, bias, extended=True)
    x = p.astype(np.int64)
    lo, hi = linear_bounds(lo, hi)
    if lo is not None:
        x = np.where(x < lo, np.int64(lo), x)
    if hi is not None:
        x = np.where(x > hi, np.int64(hi), x)
    acc = linear_approx(lut, convert(x, np.dtype(in_dtype)), step_bits, bias, shift_offset)
    return acc if to_vector is None else convert_acc(acc, *to_vector).astype(np.int32)


# -- element-wise vector instructions (the Compass DSL's vector builtins) -------------------
#
# The reference of the ``v*`` Compute ops (see ``npukit.ir``): each lane computes in its
# operands' dtype. Floats compute the exact result rounded once to that dtype: 16-bit floats
# by way of float32, which rounds the same for +, -, *, / (float32 holds more than 2 x 11 + 2
# significant bits, so the double rounding is innocuous); integers wrap modulo 2^bits. The C
# back end spells out the same formulas lane by lane (``npukit.c.arith.vec_expr``).

VEC_OPS = ("vadd", "vsub", "vmul", "vdiv", "vmax", "vmin", "vneg", "vabs", "vcmp", "vsel",
           "vand", "vor", "vxor", "vnot", "vrint", "vcast", "vgather") + MORE_OPS
CMP_OPS = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
           "gt": np.greater, "ge": np.greater_equal}
_INT32 = (-2**31, 2**31 - 1)


def _float_op(op: str, xs: list[np.ndarray], dt: np.dtype) -> np.ndarray:
    """A float op computed in float32 (float64 for float64 data), rounded once to ``dt``."""
    wide = np.float64 if dt == np.float64 else np.float32
    a = [x.astype(wide) for x in xs]
    with np.errstate(all="ignore"):
        if op in ("vadd", "vsub", "vmul", "vdiv"):
            r = {"vadd": np.add, "vsub": np.subtract, "vmul": np.multiply,
                 "vdiv": np.divide}[op](a[0], a[1])
        elif op == "vmax":  # a NaN first operand wins, else the greater, ties give b
            r = np.where(a[0] != a[0], a[0], np.where(a[0] > a[1], a[0], a[1]))
        elif op == "vmin":
            r = np.where(a[0] != a[0], a[0], np.where(a[0] < a[1], a[0], a[1]))
        elif op == "vneg":
            r = -a[0]
        elif op == "vabs":
            r = np.abs(a[0])
        else:  # vrint: nearest integer, ties to even
            r = np.rint(a[0])
        return to_float(r, dt)


def _int_op(op: str, xs: list[np.ndarray], dt: np.dtype, saturate: bool = False) -> np.ndarray:
    """An integer op in int64 on operands each read in its own signedness, wrapped to ``dt``
    (two's complement; ``saturate``: clamped to its range)."""
    a = [x.astype(np.int64) for x in xs]
    r = {"vadd": lambda: a[0] + a[1], "vsub": lambda: a[0] - a[1], "vmul": lambda: a[0] * a[1],
         "vmax": lambda: np.maximum(a[0], a[1]), "vmin": lambda: np.minimum(a[0], a[1]),
         "vneg": lambda: -a[0], "vabs": lambda: np.abs(a[0]),
         "vand": lambda: a[0] & a[1], "vor": lambda: a[0] | a[1], "vxor": lambda: a[0] ^ a[1],
         "vnot": lambda: ~a[0]}[op]()
    if saturate:
        info = np.iinfo(dt)
        return np.clip(r, int(info.min), int(info.max)).astype(dt)
    return wrap_to(r, dt)


def wrap_to(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """int64 values narrowed to integer ``dt`` keeping the low bits (two's complement)."""
    return x.astype(np.int64).astype(dt)  # numpy narrows integers as C does: modulo 2^bits


def vec_cast(x: np.ndarray, dt: np.dtype, saturate: bool = False) -> np.ndarray:
    """``vcast`` (see ``npukit.ir``): the Compass DSL's conversion, as its Python simulator
    reads ``S.cast``. To a float: rounded once to nearest even (``floats.to_float``). Float
    to integer: truncated toward zero (its simulator's ``np.array(x, int)``), NaN -> 0,
    saturated to int32, then the low bits of the destination (``saturate``: clamped to its
    range)."""
    src = x.dtype
    if dt == np.bool_:
        return x != 0
    if is_float(dt):
        return to_float(x, dt)
    if src == np.bool_:
        return x.astype(dt)
    if is_float(src):
        with np.errstate(invalid="ignore"):
            t = np.trunc(x.astype(np.float64))
            t = np.clip(np.where(np.isnan(t), 0.0, t), *_INT32).astype(np.int64)
    else:
        t = x.astype(np.int64)
    if saturate:
        info = np.iinfo(dt)
        return np.clip(t, int(info.min), int(info.max)).astype(dt)
    return wrap_to(t, dt)


def vec_op(op: str, srcs: list[np.ndarray], dt: np.dtype, attrs: dict) -> np.ndarray:
    """One element-wise vector instruction on operand arrays (any leading batch dims); the
    result has dtype ``dt``. ``vgather`` is the simulator's (it checks bounds)."""
    if op == "vcmp":
        with np.errstate(invalid="ignore"):
            return CMP_OPS[attrs["cmp"]](srcs[0], srcs[1])
    if op == "vsel":
        return np.where(srcs[0].astype(bool), srcs[1], srcs[2]).astype(dt)
    if op == "vcast":
        return vec_cast(srcs[0], dt, bool(attrs.get("saturate", False)))
    if dt == np.bool_:
        a = [s.astype(bool) for s in srcs]
        return {"vand": lambda: a[0] & a[1], "vor": lambda: a[0] | a[1],
                "vxor": lambda: a[0] ^ a[1], "vnot": lambda: ~a[0]}[op]()
    if op in MORE_OPS:
        return vec_op_more(op, srcs, dt, attrs)
    if is_float(dt):
        return _float_op(op, srcs, dt)
    return _int_op(op, srcs, dt, bool(attrs.get("saturate", False)))
