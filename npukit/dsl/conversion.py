"""The Compass DSL's ``S.cast`` with its whole vocabulary: a part of a vector to wider lanes,
a tuple of vectors merged into narrower lanes, a narrowing that changes the lane count, and
vector literals. Each case is lane moves (``npukit.dsl.builtins_lanes``) around one
lane-for-lane conversion (``npukit.dsl.ops.cast``, ``npukit.arith.vec_cast``).

>>> import numpy as np, npukit.dsl as S
>>> @S.prim_func
... def narrow(a: S.ptr("i32x8", "global"), out: S.ptr("i16x16", "global")):
...     out[0] = S.cast((a[0], a[0] + 1), "int16")          # (i32x8, i32x8) -> i16x16
>>> prog = S.build(narrow, target="compass")
>>> out = np.zeros(16, np.int16)
>>> _ = prog.run("sim", a=np.arange(8, dtype=np.int32), out=out)
>>> out[6:10].tolist()
[6, 7, 1, 2]
"""

from __future__ import annotations

from ..errors import DTypeError, KernelError
from . import ops
from .builtins_lanes import _lanes, _move, native_lanes, vconcat
from .types import DType, register_value_maker
from .values import Scalar, Vec, _describe, make_value, tracer

# part -> (index of the piece, number of pieces) of the lanes a widening cast converts
_PIECES = {"all": (0, 1), "low": (0, 2), "high": (1, 2), "even": (0, -2), "odd": (1, -2),
           "ll": (0, 4), "lh": (1, 4), "hl": (2, 4), "hh": (3, 4)}


def cast(x, dtype, part: str = "all", saturate: bool | None = None):
    """``x`` converted to ``dtype``, as the Compass DSL's ``S.cast``:

    - a number, typed scalar or vector lane for lane (a scalar ``dtype`` keeps the lanes);
    - ``part`` of a native vector to wider lanes: ``"low"``/``"high"``/``"even"``/``"odd"``
      (half the lanes, twice the bits), ``"ll"``/``"lh"``/``"hl"``/``"hh"`` (a quarter of
      the lanes, four times the bits): ``S.cast(i8x32, "int16", "high")`` is ``i16x16``;
    - a tuple of vectors of one type to 1/2 or 1/4 of their bits, their lanes one after the
      other: ``S.cast((f32x8, f32x8), "fp16")`` is ``fp16x16``;
    - a narrowing to a type with more lanes (``S.cast(i32x8, "int8x32")``): the converted
      lanes repeated until the lanes are filled, as numpy's ``resize``;
    - a tuple of numbers or one-lane values: a vector of them (``S.cast((1, 2), "i8")``).

    ``saturate`` as ``npukit.dsl.ops.cast``."""
    t = DType(dtype)
    if part not in _PIECES:
        raise KernelError(f"S.cast: part={part!r}; use one of {', '.join(_PIECES)}")
    if isinstance(x, (list, tuple)):
        return _merged(list(x), t, part, saturate)
    if not isinstance(x, Vec) or x.type.lanes == 1:
        if part != "all":
            raise KernelError(f"S.cast(..., part={part!r}): a part of a vector; got "
                              f"{_describe(x)}")
        if isinstance(x, Vec) and t.lanes > 1:  # a one-lane value spread over the lanes
            return tracer().spread(ops.cast(x, t.element_of, saturate), t.lanes)
        return ops.cast(x, t, saturate)
    bits, to_bits = x.type.elem.itemsize * 8, t.elem.itemsize * 8
    if part != "all":
        return ops.cast(_piece(x, part, to_bits // bits if to_bits > bits else 0), t.element_of,
                        saturate)
    if t.lanes in (1, x.type.lanes):
        return ops.cast(x, t, saturate)
    if to_bits >= bits:
        raise DTypeError(f"S.cast of {x.type} to {t}: only a narrowing changes the lanes "
                         f"(give part= to widen a part of the vector)")
    _native(x.type, t, "S.cast")
    return _resized(ops.cast(x, t.element_of, saturate), t.lanes)


def _piece(x: Vec, part: str, ratio: int) -> Vec:
    """The lanes of native vector ``x`` that ``part`` selects, for lanes ``ratio`` times as
    wide."""
    k, n = _PIECES[part]
    if abs(n) != ratio:
        raise DTypeError(f"S.cast of {x.type}, part={part!r}: this part widens lanes "
                         f"{abs(n)} times; the cast asks {ratio or 'no widening'}")
    _native(x.type, x.type, "S.cast")
    count = x.type.lanes // abs(n)
    out = tracer().new_vec(x.type.with_lanes(count), "part")
    src = _lanes(x, k, count, 2) if n < 0 else _lanes(x, k * count, count)
    _move(out, 0, 1, src)
    return out


def _merged(xs: list, t: DType, part: str, saturate) -> Vec:
    """A tuple's cast: the vector literal of its scalars, or its vectors' lanes one after
    the other narrowed to ``t`` (1/2 or 1/4 of their bits)."""
    if len(xs) < 2:
        raise KernelError(f"S.cast: a tuple of 2 or more values, got {len(xs)}")
    if not _any_vector(xs):
        return _literal(xs, t)
    first = xs[0]
    if not all(isinstance(v, Vec) and v.type == first.type for v in xs) or first.type.lanes < 2:
        raise DTypeError(f"S.cast of a tuple: the items must be vectors of one type, got "
                         f"{', '.join(_describe(v) for v in xs)}")
    ratio = first.type.elem.itemsize // t.elem.itemsize
    if ratio not in (2, 4) or part != "all":
        raise DTypeError(f"S.cast of {len(xs)} x {first.type} to {t}: a tuple narrows to 1/2 "
                         f"or 1/4 of the bits, part='all'")
    lanes = t.lanes if t.lanes > 1 else first.type.lanes * len(xs)
    _native(first.type, t.with_lanes(lanes), "S.cast")
    return _resized(ops.cast(vconcat(xs), t.element_of, saturate), lanes)


def _any_vector(xs: list) -> bool:
    return any(isinstance(v, Vec) and v.type.lanes > 1 for v in xs)


def _literal(xs: list, t: DType) -> Vec:
    """A ``t`` vector of the numbers, typed scalars or one-lane values ``xs``."""
    if t.lanes not in (1, len(xs)):
        raise DTypeError(f"S.cast of {len(xs)} values to {t}: the lanes must be {len(xs)}")
    tr = tracer()
    out = tr.new_vec(t.with_lanes(len(xs)), "lit")
    for k, v in enumerate(xs):
        if isinstance(v, (Vec, Scalar)):
            v = ops.cast(v, t.element_of)
        tr.set_lane(out, k, v)
    return out


def _resized(v: Vec, lanes: int) -> Vec:
    """``v``'s lanes repeated into ``lanes`` lanes (numpy's ``resize``)."""
    if lanes == v.type.lanes:
        return v
    out = tracer().new_vec(v.type.with_lanes(lanes), "resize")
    for start in range(0, lanes, v.type.lanes):
        n = min(v.type.lanes, lanes - start)
        _move(out, start, 1, _lanes(v, 0, n))
    return out


def _native(src: DType, dst: DType, what: str) -> None:
    """The Compass DSL changes lanes only between native (one register) vector types."""
    for x in (src, dst):
        if x.lanes != native_lanes(x):
            raise DTypeError(f"{what} of {src} to {dst}: a cast that changes the lanes takes "
                             f"and gives native vectors ({x.element_of}x{native_lanes(x)}), "
                             f"got {x}")


def rebits(x: Vec, t: DType) -> Vec:
    """The bytes of vector ``x`` read as vector type ``t`` of the same total bits and lanes
    of another width, as a C union of the two on the little-endian NPU does: widening, lane
    ``j`` of the result holds lanes ``j*r .. j*r + r-1`` of ``x``, the first in its low
    bits; narrowing, lane ``j`` of ``x`` spreads over lanes ``j*r ..`` of the result from
    its low bits up. Built from same-width bit casts, lane moves, shifts and ``|``."""
    if x.type.is_bool or t.is_bool or x.type.total_bits != t.total_bits:
        raise DTypeError(f"S.reinterpret of {x.type} as {t}: the total bits must be the same "
                         f"({x.type.total_bits} and {t.total_bits}) and neither a mask")
    tr, src, dst = tracer(), x.type.bits, t.bits
    u = x if x.type.is_uint else tr.compute("vbitcast", x.type.with_uint(), [x])
    out_u = t.with_uint()
    if dst > src:  # r narrow lanes make one wide lane
        r, acc = dst // src, None
        for k in range(r):
            piece = tr.new_vec(u.type.with_lanes(t.lanes), "piece")
            _move(piece, 0, 1, _lanes(u, k, t.lanes, r))
            wide = ops.cast(piece, out_u) << (src * k)  # unsigned: zero-extended
            acc = wide if acc is None else acc | wide
    else:  # one wide lane makes r narrow lanes
        r, acc = src // dst, tr.new_vec(out_u, "bytes")
        for k in range(r):
            _move(acc, k, r, ops.cast(u >> (dst * k) if k else u,
                                      out_u.with_lanes(u.type.lanes)).view)
    return acc if t == out_u else tr.compute("vbitcast", t, [acc])


def _typed(type_: DType, value):
    """``S.<type>(value)``: as the Compass DSL's type constructors, ``S.cast(value, type)``
    for a vector or a tuple (``S.u32x8(i32x8)`` converts lane for lane, ``S.i32(i16x16)`` is
    ``i32x16``, ``S.i8x4((1, 2, 3, 4))`` a vector literal); a number or typed scalar as
    ``npukit.dsl.values.make_value``."""
    if isinstance(value, (Vec, list, tuple)):
        return cast(value, type_)
    return make_value(type_, value)


register_value_maker(_typed)

__all__ = ["cast", "rebits"]
