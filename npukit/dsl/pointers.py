"""A pointer to values of another element type than its buffer's: the Compass DSL's
``ptr.as_ptr("u8x32")`` of an ``int32`` buffer, a C pointer cast. Each access loads or
stores whole elements of the buffer and reads their bytes as the pointer's type
(``npukit.dsl.conversion.rebits``), as the little-endian NPU does; ``as_ptr`` back to the
buffer's element type gives a plain pointer for the other builtins.

>>> import numpy as np, npukit.dsl as S
>>> @S.prim_func
... def bytes_of(out: S.ptr("i32x8", "global")):
...     u8 = out.as_ptr("u8x32")
...     u8[1] = S.u8x32(1)               # bytes 32..63: the int32 values 8..15
>>> out = np.zeros(16, np.int32)
>>> bytes_of(out)
>>> out[7:9].tolist() == [0, 0x01010101]
True
"""

from __future__ import annotations

from ..errors import DTypeError, KernelError
from .conversion import rebits
from .types import DType
from .values import Ptr, Vec, as_affine, register_pointer_cast, tracer


class CastPtr:
    """``base``'s address read as a pointer to ``type`` values (``type`` of whole elements
    of ``base``'s buffer: ``u8x32`` over ``int32`` is 8 of them); ``p + k`` steps ``k``
    values, ``p[i]`` / ``p[a:b]`` load, ``p[i] = v`` stores."""

    __slots__ = ("base", "type")

    def __init__(self, base: Ptr, type_: DType):
        item = base.type.elem.itemsize
        if type_.is_bool or type_.total_bytes % item:
            raise DTypeError(f"{base.name}.as_ptr({str(type_)!r}): a {type_} value is not "
                             f"whole {base.type} elements of {base.name} ({item} bytes "
                             f"each); npukit casts a pointer to vectors of whole elements")
        self.base, self.type = base, type_

    name = property(lambda self: self.base.name)
    dtype = property(lambda self: self.type)
    scope = property(lambda self: self.base.scope)

    def _span(self, count: int = 1) -> DType:
        """The buffer's elements that ``count`` values of the pointer's type cover."""
        return self.base.type.with_lanes(count * self.type.total_bytes //
                                         self.base.type.elem.itemsize)

    def _moved(self, k, sign: int) -> CastPtr:
        step = as_affine(k, "pointer arithmetic") * (sign * self._span().lanes)
        b = self.base
        return CastPtr(Ptr(b.buf, b.type, b.offset + step, b.scope, b.name), self.type)

    def __add__(self, k):
        return self._moved(k, 1)

    __radd__ = __add__

    def __sub__(self, k):
        return self._moved(k, -1)

    def as_ptr(self, dtype):
        """The same address as a pointer to ``dtype`` values."""
        return self.base.as_ptr(dtype)

    def _run(self, i) -> tuple:
        """(first element of the buffer, number of values) that ``p[i]`` accesses."""
        start, count = (0 if i.start is None else i.start, None) if isinstance(i, slice) \
            else (i, 1)
        if count is None:
            n = as_affine(i.stop, f"{self.name}[a:b]") - as_affine(start, f"{self.name}[a:b]")
            if i.step not in (None, 1) or n.terms or n.const < 1:
                raise KernelError(f"{self.name}[{i.start}:{i.stop}]: a slice of values "
                                  f"needs a constant length (b - a) and no step")
            count = n.const
        first = self.base.offset + as_affine(start, f"{self.name}[...]") * self._span().lanes
        return first, count

    def __getitem__(self, i) -> Vec:
        first, count = self._run(i)
        v = tracer().load_run(self.base, first, self._span(count))
        return _read_as(v, self.type.with_lanes(self.type.lanes * count))

    def __setitem__(self, i, value) -> None:
        first, count = self._run(i)
        tr = tracer()
        v = tr.coerce(value, self.type.with_lanes(self.type.lanes * count),
                      f"`{tr.label()}`: storing into {self.type}* {self.name}")
        tr.store_run(self.base, first, _read_as(v, self._span(count)))

    def __repr__(self) -> str:
        return f"<{self.scope} {self.type}* {self.name} (a {self.base.type} buffer)>"


def _read_as(v: Vec, t: DType) -> Vec:
    """Register ``v``'s bits as type ``t`` of the same total bits."""
    if v.type == t:
        return v
    if v.type.bits == t.bits:
        return tracer().compute("vbitcast", t, [v])
    return rebits(v, t)


register_pointer_cast(CastPtr)

__all__ = ["CastPtr"]
