"""The Compass DSL's dot products: ``vdot``/``vqdot`` (sums of products of two or four
neighbouring lanes), ``vdpa``/``vqdpa`` (the same added to an accumulator) and
``vmml``/``vmma`` (a 4x4 matrix product of float16 or bfloat16 lanes into float32).

Each is one ``vdot`` instruction of the ``vec`` unit (``npukit.ir``): lane ``g`` of the result
is ``acc[g] + Σ x[k·g + j]·y[k·g + j]`` over the lanes ``j`` whose mask is set, computed
exactly for integers and saturated to the result's range, in float64 for floats and rounded
once to float32. The operands' lanes of one lane width may differ in sign; the result is
signed when either is.

>>> import npukit.dsl as S
>>> @S.prim_func
... def dot(a: S.ptr("i8x32", "global"), b: S.ptr("u8x32", "global"),
...         out: S.ptr("i16x16", "global")):
...     out[0] = S.vdot(a[0], b[0])
>>> a, b = np.full(32, -128, np.int8), np.full(32, 255, np.uint8)
>>> out = np.zeros(16, np.int16)
>>> _ = S.build(dot, target="compass").run("sim", a=a, b=b, out=out)
>>> out[:2].tolist()   # -128·255·2 = -65280 saturates
[-32768, -32768]
"""

from __future__ import annotations

import numpy as np

from .. import ir
from ..errors import DTypeError, KernelError
from ..layout import Layout
from ..poison import poison
from .builtins_lanes import _lanes, _move, native_lanes
from .types import DType
from .values import Ptr, Vec, _describe, tracer


def _operands(x, y, what: str) -> tuple[Vec, Vec]:
    """``x`` and ``y`` as vectors of one lane count and width (a number is spread as the
    other operand's type); integers may differ in sign, floats may not."""
    tr = tracer()
    t = tr.vector_type(what, x, y)
    a, b = (v if isinstance(v, Vec) else tr.coerce(v, t, what) for v in (x, y))
    ta, tb = a.type, b.type
    if ta.is_bool or tb.is_bool or ta.lanes != tb.lanes or ta.bits != tb.bits or \
            ta.is_floating != tb.is_floating or ta.is_floating and ta != tb:
        raise DTypeError(f"{what}: Argument type mismatch: x is {ta}, y is {tb} (the lanes, "
                         f"lane width and kind must agree; integers may differ in sign)")
    native = native_lanes(ta)
    if ta.lanes % native:
        raise DTypeError(f"{what} of {ta}: the lanes must be a multiple of the native "
                         f"{native} (flexible-width vectors are not supported)")
    return a, b


def _kinds(a: Vec, ints: tuple[int, ...], floats: bool, what: str, rule: str) -> None:
    t = a.type
    if not (t.is_integer and t.bits in ints or floats and t.bits == 16 and t.is_floating):
        raise DTypeError(f"{what} of {t}: Only supports {rule}")


def _result(a: Vec, b: Vec, factor: int, lanes: int) -> DType:
    """The integer type ``factor`` times as wide as the operands, signed if either is."""
    sign = "" if a.type.is_int or b.type.is_int else "u"
    return DType(f"{sign}int{a.type.bits * factor}").with_lanes(lanes)


def _mask(mask, lanes: int, what: str) -> Vec:
    tr = tracer()
    if mask is None:
        return tr.splat(DType(f"boolx{lanes}"), True)
    return tr.mask(mask, lanes, what)


def _sums(acc: ir.View, a: Vec, b: Vec, m: Vec, group: int, out_t: DType) -> Vec:
    """Lane ``g``: ``acc[g] + Σ_j a[group·g + j]·b[group·g + j]`` over the set lanes of
    ``m`` (one ``vdot`` instruction)."""
    n = a.type.lanes // group
    srcs = [acc]
    for j in range(group):
        srcs += [_lanes(m, j, n, group), _lanes(a, j, n, group), _lanes(b, j, n, group)]
    return tracer().compute("vdot", out_t.with_lanes(n), srcs)


def _any_of(m: Vec, group: int) -> Vec:
    """Lane ``g``: whether any of mask lanes ``group·g .. group·g + group - 1`` is set."""
    tr = tracer()
    n = m.type.lanes // group
    out = _lanes(m, 0, n, group)
    for j in range(1, group):
        out = tr.compute("vor", DType(f"boolx{n}"), [out, _lanes(m, j, n, group)]).view
    res = tr.new_vec(DType(f"boolx{n}"), "active")
    _move(res, 0, 1, out)
    return res


def _dot(x, y, mask, group: int, what: str) -> Vec:
    tr = tracer()
    a, b = _operands(x, y, what)
    if group == 2:
        _kinds(a, (8, 16), False, what, "8-bit or 16-bit integer instruction")
    else:
        _kinds(a, (8,), True, what, "8-bit integer instruction or 16-bit floating instruction")
    m = _mask(mask, a.type.lanes, what)
    n = a.type.lanes // group
    if a.type.is_floating:  # float32 sums in the even lanes; the odd lanes are undefined
        out_t = DType(f"float32x{a.type.lanes // 2}")
        sums = _sums(tr.splat(out_t.with_lanes(n), 0.0).view, a, b, m, group, out_t)
    else:
        out_t = _result(a, b, group, n)
        sums = _sums(tr.splat(out_t, 0).view, a, b, m, group, out_t)
    if mask is not None:  # a lane none of whose inputs is active is undefined
        sums = tr.masked(sums, _any_of(m, group), None, what)
    if not a.type.is_floating:
        return sums
    out = tr.new_vec(out_t, what[2:])
    tr.emit(ir.Fill(out.view, poison(np.dtype("float32"), ()).item(), tr.label()))
    _move(out, 0, 2, sums.view)
    return out


def vdot(x, y, mask=None) -> Vec:
    """Sums of the products of neighbouring pairs of lanes, saturated to lanes of twice the
    bits: ``x0·y0 + x1·y1, x2·y2 + x3·y3, ...`` (8- or 16-bit integers; the result is signed
    when either operand is). A lane none of whose two inputs is active is undefined."""
    return _dot(x, y, mask, 2, "S.vdot")


def vqdot(x, y, mask=None) -> Vec:
    """Sums of the products of groups of four lanes: 8-bit integers give saturated 32-bit
    lanes; float16/bfloat16 give float32 sums (in float64, rounded once) in the even lanes,
    the odd lanes undefined. A lane none of whose inputs is active is undefined."""
    return _dot(x, y, mask, 4, "S.vqdot")


def _dpa(acc, x, y, mask, group: int, what: str) -> Vec:
    tr = tracer()
    if not isinstance(acc, Vec) or acc.type.is_bool:
        raise KernelError(f"{what}: the accumulator (1st argument) must be a vector, got "
                          f"{_describe(acc)}")
    a, b = _operands(x, y, what)
    t, xt = acc.type, a.type
    factor = 2 if xt.is_floating else group
    fits = t.bits == factor * xt.bits and xt.lanes == factor * t.lanes and (
        t.is_integer and xt.is_integer or group == 4 and t.is_float32 and xt.is_floating)
    if not fits:
        rule = "lanes of twice the bits and half the lanes" if group == 2 else \
            "int32/uint32 lanes for 8-bit x, float32 lanes (half as many) for 16-bit floats"
        raise DTypeError(f"{what}: Argument type mismatch: acc is {t}, x is {xt} (acc needs "
                         f"{rule})")
    m = _mask(mask, xt.lanes, what)
    if not xt.is_floating:
        return _sums(acc.view, a, b, m, group, t)
    n = xt.lanes // group  # float: the sums land in the even lanes, the odd keep acc
    sums = _sums(_lanes(acc, 0, n, 2), a, b, m, group, t)
    out = tr.new_vec(t, what[2:])
    _move(out, 0, 1, acc.view)
    _move(out, 0, 2, sums.view)
    return out


def vdpa(acc, x, y, mask=None) -> Vec:
    """``acc`` plus the products of neighbouring pairs of lanes, saturated: lane ``i`` is
    ``acc[i] + x[2i]·y[2i] + x[2i+1]·y[2i+1]`` over the active lanes (8- or 16-bit
    integers into ``acc``'s lanes of twice the bits)."""
    return _dpa(acc, x, y, mask, 2, "S.vdpa")


def vqdpa(acc, x, y, mask=None) -> Vec:
    """``acc`` plus the products of groups of four lanes: 8-bit integers into saturated
    32-bit lanes; float16/bfloat16 into the even lanes of a float32 ``acc`` (in float64,
    rounded once), whose odd lanes are kept."""
    return _dpa(acc, x, y, mask, 4, "S.vqdpa")


# -- 4x4 matrix products ---------------------------------------------------------------------

def _matmul(ptr, x, y, accumulate: bool, what: str) -> None:
    """``ptr[0:16] (+)= X·Yᵀ``: ``x`` holds a 4x4 matrix by rows, ``y`` one by columns, both
    float16x16 or bfloat16x16; ``ptr`` points at 16 float32 values (a buffer or a register's
    ``.addr``), written by rows."""
    tr = tracer()
    if not isinstance(ptr, Ptr) or not ptr.type.is_float32:
        raise KernelError(f"{what}: the 1st argument must be a float32 pointer, got "
                          f"{_describe(ptr)}")
    for k, v in ((2, x), (3, y)):
        if not isinstance(v, Vec) or v.type not in ("float16x16", "bfloat16x16"):
            raise DTypeError(f"{what}: argument {k} must be a float16x16 or bfloat16x16 "
                             f"vector (a 4x4 matrix), got {_describe(v)}")
    if x.type != y.type:
        raise DTypeError(f"{what}: Argument type mismatch: x is {x.type}, y is {y.type}")
    out_t = DType("float32x16")
    if ptr.buf.memory == "vreg":  # a register's address: the register itself
        reg = Vec(ptr.buf, DType(f"float32x{ptr.buf.size}"), ())
        start = ptr.offset.const
        if ptr.offset.terms or not 0 <= start <= ptr.buf.size - 16:
            raise KernelError(f"{what}: 16 float32 values from lane {ptr.offset} of a "
                              f"{reg.type} register do not fit it")
        acc = _lanes(reg, start, 16) if accumulate else None
    else:
        acc = tr.load_run(ptr, ptr.offset, out_t).view if accumulate else None
    if acc is None:
        acc = tr.splat(out_t, 0.0).view
    # lane 4i + j of the result: row i of x times column j of y (4 terms each)
    rows = [ir.View(x.buf, Layout((4, 4), x.type.elem, (4, 0), k)) for k in range(4)]
    cols = [ir.View(y.buf, Layout((4, 4), y.type.elem, (0, 4), k)) for k in range(4)]
    every = tr.splat(DType("boolx16"), True).view
    srcs = [ir.View(acc.buffer, Layout((4, 4), acc.dtype, (4, 1), acc.layout.offset))]
    for k in range(4):
        srcs += [ir.View(every.buffer, Layout((4, 4), np.bool_, (4, 1))), rows[k], cols[k]]
    res = tr.new_vec(out_t, what[2:])
    tr.emit(ir.Compute("vec", "vdot", ir.View(res.buf, Layout((4, 4), np.float32)),
                       tuple(srcs), attrs=(("pair", ("float32", None)),), label=tr.label()))
    if ptr.buf.memory == "vreg":
        _move(reg, start, 1, res.view)
    else:
        tr.store_run(ptr, ptr.offset, res)


def vmml(ptr, x, y) -> None:
    """The 4x4 matrix product of ``x`` (by rows) and ``y`` (by columns), float16 or
    bfloat16, written to ``ptr`` as 16 float32 values by rows: ``ptr[4i+j] = Σ_k
    x[4i+k]·y[4j+k]`` (in float64, rounded once)."""
    _matmul(ptr, x, y, False, "S.vmml")


def vmma(ptr, x, y) -> None:
    """``S.vmml`` added to the 16 float32 values at ``ptr``: ``ptr[4i+j] += Σ_k
    x[4i+k]·y[4j+k]`` (the sum in float64, rounded once)."""
    _matmul(ptr, x, y, True, "S.vmma")
