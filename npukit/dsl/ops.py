"""The Compass DSL's built-in functions, as npukit reads them (see ``npukit.dsl``)."""

from __future__ import annotations

import builtins

import numpy as np

from .. import arith, ir
from ..errors import DTypeError, KernelError
from ..layout import Layout
from .types import DType
from .utils import get_binary_op_result_type
from .values import Index, Ptr, Scalar, Vec, _describe, imax, imin, tracer
from .values import ceildiv as _ceildiv

# -- cores ---------------------------------------------------------------------------------


def get_local_size() -> int:
    """How many TECs run the kernel: the target's ``cores`` (4 on ``compass``)."""
    return tracer().tgt.cores


def get_local_id() -> Index:
    """This TEC's id, 0..get_local_size()-1: the variable of the core loop."""
    return tracer().local_id()


# -- integers ------------------------------------------------------------------------------


def ceildiv(a, b):
    """``ceil(a / b)`` of integers: of run-time integers (``b`` a positive constant), or, as
    the Compass DSL computes it, of one-lane values and vectors: both converted to the type
    they meet in (``get_binary_op_result_type``), then ``(a + b - 1) / b`` with the sum
    wrapping in that type and the quotient truncated toward zero. A zero divisor is a
    ``ZeroDivisorError`` (a ``ZeroDivisionError``) in the simulator, as in the Compass
    DSL's; generated C, which cannot raise, gives 0."""
    if not any(isinstance(x, Vec) for x in (a, b)):
        return _ceildiv(a, b)
    t = get_binary_op_result_type(*(x.type.element_of if isinstance(x, (Vec, Scalar)) else x
                                    for x in (a, b)))
    if t.elem.kind not in "iu":
        raise DTypeError(f"S.ceildiv({_describe(a)}, {_describe(b)}): takes integers, "
                         f"they meet in {t}")
    x, y = (cast(v, t.with_lanes(v.type.lanes)) if isinstance(v, Vec)
            else cast(v, t) if isinstance(v, Scalar) else Scalar(t, v) for v in (a, b))
    num, tr = x + y - 1, tracer()
    return tr.compute("vquot", num.type, [num, tr.coerce(y, num.type, "S.ceildiv")],
                      {"checked": True})


def min(a, b):  # noqa: A001 - the Compass DSL's name
    """The lesser of two integers, typed scalars or vectors (lane by lane: ``vmin``)."""
    return _pick("vmin", a, b, "S.min")


def max(a, b):  # noqa: A001 - the Compass DSL's name
    """The greater of two integers, typed scalars or vectors (lane by lane: ``vmax``)."""
    return _pick("vmax", a, b, "S.max")


def clip(x, min_val=None, max_val=None):
    """``min(max(x, min_val), max_val)`` of integers, typed scalars or vectors; a NaN lane
    stays NaN."""
    if min_val is not None:
        x = max(x, min_val)
    return x if max_val is None else min(x, max_val)


def _pick(op: str, a, b, what: str):
    if isinstance(a, Vec) or isinstance(b, Vec):
        return tracer().arith(op, a, b, what)
    if isinstance(a, Scalar) or isinstance(b, Scalar):
        s = a if isinstance(a, Scalar) else b
        x, y = (v if isinstance(v, Scalar) else Scalar(s.type, v) for v in (a, b))
        if x.type != y.type:
            raise DTypeError(f"{what}: scalar type mismatch: {x.type} and {y.type}")
        return Scalar(x.type, arith.vec_op(op, [np.array([x.value]), np.array([y.value])],
                                           x.type.elem, {})[0])
    if isinstance(a, (float, np.floating)) or isinstance(b, (float, np.floating)):
        return (builtins.min if op == "vmin" else builtins.max)(a, b)
    return imin(a, b) if op == "vmin" else imax(a, b)


# -- vector arithmetic: lanes where mask is False take r (undefined without r) --------------


def vadd(x, y, mask=None, r=None) -> Vec:
    """``x + y`` lane by lane; where ``mask`` is False the lane is ``r`` (``None``:
    undefined, npukit poisons it)."""
    return _masked("vadd", x, y, mask, r, "S.vadd")


def vsub(x, y, mask=None, r=None) -> Vec:
    """``x - y`` lane by lane, with the mask convention of ``vadd``."""
    return _masked("vsub", x, y, mask, r, "S.vsub")


def vmul(x, y, mask=None, r=None) -> Vec:
    """``x * y`` lane by lane, with the mask convention of ``vadd``."""
    return _masked("vmul", x, y, mask, r, "S.vmul")


def vdiv(x, y, mask=None, r=None) -> Vec:
    """``x / y`` lane by lane (float vectors), with the mask convention of ``vadd``."""
    return _masked("vdiv", x, y, mask, r, "S.vdiv")


def vmax(x, y, mask=None, r=None) -> Vec:
    """The greater lane (a NaN in ``x`` wins), with the mask convention of ``vadd``."""
    return _masked("vmax", x, y, mask, r, "S.vmax")


def vmin(x, y, mask=None, r=None) -> Vec:
    """The lesser lane (a NaN in ``x`` wins), with the mask convention of ``vadd``."""
    return _masked("vmin", x, y, mask, r, "S.vmin")


def vabs(x, mask=None, r=None) -> Vec:
    """``|x|`` lane by lane (integers wrap: the most negative value stays), with the mask
    convention of ``vadd``."""
    tr = tracer()
    return tr.masked(tr.unary("vabs", x, "S.vabs"), mask, r, "S.vabs")


def _masked(op: str, x, y, mask, r, what: str) -> Vec:
    tr = tracer()
    return tr.masked(tr.arith(op, x, y, what), mask, r, what)


def vsel(x, y, mask) -> Vec:
    """Lane by lane ``x`` where ``mask`` is True, else ``y`` (either may be a number)."""
    return tracer().select(mask, x, y, "S.vsel")


def vand(x, y) -> Vec:
    """Lane by lane AND of two masks (bitwise on integer vectors)."""
    return tracer().logic("vand", x, y, "S.vand")


def vor(x, y) -> Vec:
    """Lane by lane OR of two masks (bitwise on integer vectors)."""
    return tracer().logic("vor", x, y, "S.vor")


def vxor(x, y) -> Vec:
    """Lane by lane XOR of two masks (bitwise on integer vectors)."""
    return tracer().logic("vxor", x, y, "S.vxor")


def vnot(x) -> Vec:
    """Lane by lane NOT of a mask (bitwise on integer vectors)."""
    return tracer().logic("vnot", x, None, "S.vnot")


def vrint(x):
    """Each lane rounded to the nearest integer, ties to even (a float result)."""
    if isinstance(x, Scalar):
        return Scalar(x.type, np.rint(x.value))
    return tracer().unary("vrint", x, "S.vrint")


def cast(x, dtype, saturate: bool | None = None):
    """``x`` converted to ``dtype`` (a scalar name keeps the vector's lanes: ``S.cast(v,
    "fp32")``). Float to integer truncates toward zero, NaN gives 0, the value saturates to
    int32, then the low bits are kept (``saturate=True``: saturates to ``dtype`` instead);
    anything to a float rounds once to nearest even (see ``npukit.arith.vec_cast``)."""
    t = DType(dtype)
    sat = bool(saturate)
    if saturate is not None and t.elem.kind not in "iu":
        raise KernelError(f"S.cast(..., {str(t)!r}, saturate=...): saturation applies to "
                          f"integer results")
    if isinstance(x, Vec):
        if t.is_vector and t.lanes != x.type.lanes:
            raise DTypeError(f"S.cast of {x.type} to {t}: the lanes must stay {x.type.lanes}")
        to = t.element_of.with_lanes(x.type.lanes)
        if to == x.type:
            return x
        attrs = {"saturate": True} if sat else {}
        return tracer().compute("vcast", to, [x], attrs)
    if isinstance(x, Index):
        if t == "int32":
            return x
        raise KernelError(f"S.cast({x}, {str(t)!r}): a run-time integer is an int32 index")
    value = x.value if isinstance(x, Scalar) else x
    if isinstance(value, Ptr) or not isinstance(value, (int, float, bool, np.number, np.bool_)):
        raise KernelError(f"S.cast: cannot convert {value!r}")
    v = arith.vec_cast(np.array([value]), t.elem, sat)[0]
    return t(v) if t.is_vector else int(v) if t == "int32" else Scalar(t, v)


# -- memory --------------------------------------------------------------------------------


def alloc(shape, dtype, scope: str = "lsram") -> Ptr:
    """A buffer of ``shape`` ``dtype`` values in memory ``scope`` (``lsram``, each TEC's;
    ``shared``, the core's), as a pointer to its first value; more than the target's memory
    holds is a ``CapacityError`` naming the buffer."""
    return tracer().alloc(shape, dtype, scope)


def alloc_const(shape, dtype, data) -> Ptr:
    """Constant data computed on the host at build time (``data``, converted to ``dtype``),
    in constant memory: a read-only pointer to it."""
    return tracer().alloc_const(shape, dtype, data)


def vstore_scatter(value: Vec, ptr: Ptr, indices: Vec, mask=None) -> None:
    """Lane ``k`` of ``value`` stored at ``ptr[indices[k]]`` (in elements; 16-bit integer
    indices) where ``mask`` is True, lanes in order (a later lane wins). An index outside
    the destination is an ``OutOfBoundsError`` of the simulator."""
    tracer().scatter(value, ptr, indices, mask)


def dma_transpose2d(dst: Ptr, src: Ptr, row, col, dst_stride=None, src_stride=None) -> None:
    """The ``row`` x ``col`` matrix at ``src`` (rows ``src_stride`` values apart, ``col`` by
    default) written transposed at ``dst`` (rows ``dst_stride`` apart, ``row`` by default)
    by DMA: ``dst[j·dst_stride + i] = src[i·src_stride + j]``; sizes and strides in values
    of the element type, all constants."""
    tr = tracer()
    what = tr.label()
    for name, p in (("dst", dst), ("src", src)):
        if not isinstance(p, Ptr) or p.scope == "constant" and name == "dst":
            raise KernelError(f"`{what}`: S.dma_transpose2d {name} must be a pointer to "
                              f"global memory or lsram, got {_describe(p)}")
    if dst.type.elem != src.type.elem:
        raise DTypeError(f"`{what}`: S.dma_transpose2d needs pointers of one element "
                         f"type: dst is {dst.type}*, src is {src.type}*")
    src_stride = col if src_stride is None else src_stride
    dst_stride = row if dst_stride is None else dst_stride
    sizes = dict(row=row, col=col, dst_stride=dst_stride, src_stride=src_stride)
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
               for v in sizes.values()):
        raise KernelError(f"`{what}`: S.dma_transpose2d takes constant sizes and strides, "
                          f"got {sizes}")
    if row < 0 or col < 0 or src_stride < col or dst_stride < row:
        raise KernelError(f"`{what}`: S.dma_transpose2d({sizes}): sizes are never "
                          f"negative, src_stride is at least col and dst_stride at least "
                          f"row")
    if row == 0 or col == 0:
        return
    tr.check(src, src.offset, (row - 1) * src_stride + col, what, False)
    tr.check(dst, dst.offset, (col - 1) * dst_stride + row, what, True)
    t = src.type.elem
    tr.emit(ir.Copy(ir.View(dst.buf, Layout((row, col), t, (1, dst_stride)), dst.offset),
                    ir.View(src.buf, Layout((row, col), t, (src_stride, 1)), src.offset),
                    tr.tgt.engine(src.buf.memory, dst.buf.memory).name, label=what))


def vload_gather(ptr: Ptr, indices: Vec, mask=None) -> Vec:
    """Lane ``k`` is ``ptr[indices[k]]`` (16-bit integer indices); lanes where ``mask`` is
    False read nothing and are 0. An index outside the table is an ``OutOfBoundsError`` of
    the simulator."""
    return tracer().gather(ptr, indices, mask)
