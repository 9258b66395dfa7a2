"""The Compass DSL's memory statements beyond pointers and ``S.dma_copy``: buffers
(``S.alloc_buffer``, ``S.match_buffer``), vector loads and stores through any pointer with
masks and strides (``S.vload``, ``S.vstore``), ``S.dma_memset``, asynchronous DMA with
events, and the native vector type of a scalar type (``hw_native_vdtype``).

>>> hw_native_vdtype("int8"), hw_native_vdtype("fp16").lanes
('int8x32', 16)
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import ir
from ..errors import DTypeError, KernelError
from ..layout import Layout
from ..machine import target as _target
from .trace import _parse_mask
from .types import DType
from .values import Index, Ptr, Vec, _describe, as_affine, index, tracer

# "private" is each TEC's stack; npukit places it, like "lsram", in the TEC's local SRAM.
# "shared" is the core's SRAM, one buffer for all its TECs.
_SCOPES = {"lsram": "lsram", "private": "lsram", "shared": "shared"}


def hw_native_vdtype(dtype, target="compass") -> DType:
    """The vector type of one 256-bit register of ``dtype`` lanes: ``int8x32``,
    ``float16x16``, ``int32x8`` (a vector type gives its element's)."""
    t = DType(dtype).element_of
    if t.is_bool:
        raise DTypeError("hw_native_vdtype: mask types have no native vector type; give an "
                         "integer or float type")
    return t.with_lanes(_target(target).units["vec"].width(t.elem))


def alloc_buffer(shape, dtype, scope: str = "private"):
    """A buffer of ``shape`` ``dtype`` values as a pointer to its first value, with
    ``buf.addr_of(i)`` the address of value ``i`` (for more than one dimension a ``Buffer``
    view, indexed ``buf[i, j]``, as ``S.match_buffer`` gives): in each TEC's local memory
    ("lsram", or "private", which npukit places there too), or one buffer of the core that
    its TECs share
    ("shared"; npukit runs the TECs in turns between barriers, so what each wrote before an
    ``S.barrier`` every one reads after it)."""
    if scope not in _SCOPES:
        raise KernelError(f"S.alloc_buffer(..., scope={scope!r}): the scopes are "
                          f"{', '.join(map(repr, _SCOPES))}")
    p = tracer().alloc(shape, dtype, _SCOPES[scope])
    dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return Buffer(p, tuple(int(d) for d in dims)) if len(dims) > 1 else p


def match_buffer(pointer: Ptr, shape):
    """The buffer at ``pointer`` with ``shape``: for one dimension the pointer itself, for
    more a ``Buffer`` view indexed with one index per dimension, row-major, as the Compass
    DSL's buffers are (``b[i, j]`` is ``pointer[i * shape[1] + j]``)."""
    if not isinstance(pointer, Ptr):
        raise KernelError(f"S.match_buffer takes a pointer, got {_describe(pointer)}")
    dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if not dims or not all(isinstance(d, (int, np.integer)) and d > 0 for d in dims):
        raise KernelError(f"S.match_buffer(..., {shape!r}): the shape must be positive "
                          f"integer constants")
    return pointer if len(dims) == 1 else Buffer(pointer, tuple(int(d) for d in dims))


class Buffer:
    """An N-dimensional view of the values at a pointer (``S.match_buffer``): ``b[i, j]``
    loads, ``b[i, j] = v`` stores, ``b.addr_of((i, j))`` is the pointer there."""

    __slots__ = ("pointer", "shape")

    def __init__(self, pointer: Ptr, shape: tuple[int, ...]):
        self.pointer, self.shape = pointer, shape

    @property
    def dtype(self) -> DType:
        return self.pointer.type

    def flat(self, indices) -> int | Index:
        """The row-major position of ``indices`` (one per dimension; a constant one must
        lie in its dimension)."""
        idx = tuple(indices) if isinstance(indices, (tuple, list)) else (indices,)
        if len(idx) != len(self.shape):
            raise KernelError(f"buffer {self.pointer.name} of shape {self.shape} takes "
                              f"{len(self.shape)} indices, got {len(idx)}")
        pos = ir.affine(0)
        for dim, (i, n) in enumerate(zip(idx, self.shape)):
            e = as_affine(i, f"index {dim} of buffer {self.pointer.name}")
            if not e.terms and not 0 <= e.const < n:
                raise KernelError(f"buffer {self.pointer.name}: index {e.const} of dimension "
                                  f"{dim} is outside its size {n}")
            pos = pos * n + e
        return index(pos)

    def addr_of(self, indices) -> Ptr:
        """The pointer at ``indices``, fewer of them than dimensions padded with zeros as
        the Compass DSL's ``addr_of`` pads them (``b.addr_of(i)`` is row ``i``'s start)."""
        idx = tuple(indices) if isinstance(indices, (tuple, list)) else (indices,)
        return self.pointer + self.flat(idx + (0,) * max(0, len(self.shape) - len(idx)))

    def __getitem__(self, indices):
        return self.pointer[self.flat(indices)]

    def __setitem__(self, indices, value):
        self.pointer[self.flat(indices)] = value

    def __repr__(self) -> str:
        return f"<buffer {self.pointer!r} of shape {self.shape}>"


def vload(ptr: Ptr, mask=None, lanes: int | None = None, stride: int = 1) -> Vec:
    """A vector read from ``ptr``: the native vector of its scalar type (or its vector
    type, or ``lanes`` lanes), lane ``k`` from value ``k * stride``; lanes where ``mask``
    is False are 0."""
    tr = tracer()
    t = _vector_type(ptr, lanes, "S.vload")
    step = _stride(stride, "S.vload")
    reach = _reach(mask, t.lanes)
    if reach < t.lanes:  # a constant mask: lanes after the last active one read nothing
        v = tr.splat(t, 0)
        part = tr.load_run(ptr, ptr.offset, t.with_lanes(reach), step)
        tr.emit(ir.Copy(ir.View(v.buf, Layout((reach,), t.elem)), part.view,
                        tr.tgt.engine("vreg", "vreg").name, label=tr.label()))
    else:
        v = tr.load_run(ptr, ptr.offset, t, step)
    return v if mask is None else tr.select(mask, v, 0, "S.vload")


def vstore(value: Vec, ptr: Ptr, mask=None, stride: int = 1) -> None:
    """Store vector ``value`` at ``ptr``, lane ``k`` at value ``k * stride``; lanes where
    ``mask`` is False leave memory as it was."""
    tr = tracer()
    if not isinstance(value, Vec):
        raise KernelError(f"S.vstore stores a vector, got {_describe(value)}")
    if not isinstance(ptr, Ptr) or ptr.type.elem != value.type.elem:
        raise DTypeError(f"S.vstore of a {value.type} vector through "
                         f"{_describe(ptr)}: the element types must agree")
    step = _stride(stride, "S.vstore")
    if mask is not None:  # memory keeps the masked-off lanes: read, select, write back
        reach = _reach(mask, value.type.lanes)  # up to the last active lane of a constant
        old = tr.load_run(ptr, ptr.offset, value.type.with_lanes(reach), step)
        keep = tr.select(_bits(mask, value.type.lanes)[:reach] if reach < value.type.lanes
                         else mask, _first(tr, value, reach), old, "S.vstore")
        tr.store_run(ptr, ptr.offset, keep, step)
        return
    tr.store_run(ptr, ptr.offset, value, step)


def _bits(mask, lanes: int):
    """A constant mask's lanes as a list of bools (a short list's missing lanes False), or
    None for a run-time mask."""
    if isinstance(mask, str):
        return _parse_mask(mask, lanes, "mask")
    if isinstance(mask, Vec):
        bits = tracer().const_masks.get(mask.buf.name)
        return None if bits is None else list(bits)
    if isinstance(mask, (list, tuple, np.ndarray)):
        bits = [bool(b) for b in np.asarray(mask).reshape(-1)]
        return bits + [False] * (lanes - len(bits))
    return None


def _reach(mask, lanes: int) -> int:
    """Lanes up to the last active one of a constant mask (all for a run-time one)."""
    bits = _bits(mask, lanes)
    if bits is None or len(bits) != lanes or not any(bits):
        return lanes
    return max(i for i, b in enumerate(bits) if b) + 1


def _first(tr, v: Vec, n: int) -> Vec:
    """The first ``n`` lanes of ``v`` (``v`` itself when it has no more)."""
    if n == v.type.lanes:
        return v
    out = tr.new_vec(v.type.with_lanes(n), "lanes")
    tr.emit(ir.Copy(out.view, ir.View(v.buf, Layout((n,), v.type.elem)),
                    tr.tgt.engine("vreg", "vreg").name, label=tr.label()))
    return out


def _vector_type(ptr, lanes, what: str) -> DType:
    if not isinstance(ptr, Ptr):
        raise KernelError(f"{what} reads through a pointer, got {_describe(ptr)}")
    if lanes is not None:
        if not isinstance(lanes, (int, np.integer)) or lanes < 1:
            raise KernelError(f"{what}(..., lanes={lanes!r}): a positive constant")
        return ptr.type.element_of.with_lanes(int(lanes))
    return ptr.type if ptr.type.is_vector else hw_native_vdtype(ptr.type,
                                                                tracer().tgt)


def _stride(stride, what: str) -> int:
    if isinstance(stride, (bool, np.bool_)) or not isinstance(stride, (int, np.integer)) \
            or stride < 1:
        raise KernelError(f"{what}(..., stride={stride!r}): npukit takes a constant stride "
                          f">= 1")
    return int(stride)


def dma_memset(ptr: Ptr, value, num) -> None:
    """Set ``num`` elements at ``ptr`` to ``value`` (a number, or a run-time scalar such as
    ``a[0]``); ``num`` counts scalar elements, also through a vector pointer, and is a
    constant."""
    tracer().dma_memset(ptr, value, num)


def async_dma_copy(dst: Ptr, src: Ptr, width, src_stride=None, times=1, dst_stride=None,
                   event=None) -> None:
    """``S.dma_copy`` that signals ``event`` when done. npukit's timing model already
    overlaps a DMA with the work that does not need its data, so the copy is recorded as
    ``S.dma_copy``; its data are there when ``S.wait_events`` returns, as the Compass DSL
    promises (reading them earlier is a race there, and sees the copied data here)."""
    if event is None:
        raise KernelError("S.async_dma_copy needs event= (from S.alloc_events)")
    dma_copy(dst, src, width, src_stride, times, dst_stride)


def dma_copy(dst, src, width, src_stride=None, times=1, dst_stride=None) -> None:
    """Copy ``width`` values (a run-time count allowed; never negative) from ``src`` to
    ``dst`` by DMA, between global memory and lsram; pointers of one type. With ``times``
    (and ``src_stride``/``dst_stride``, values between row starts, ``width`` by default):
    that many rows of ``width`` values (``times`` a constant; a width or stride known only
    at run time copies the rows one by one, row ``r`` at ``r * stride``). A buffer
    (``S.match_buffer``, ``S.alloc_buffer``) stands for its first value's address."""
    dst, src, tr = base(dst), base(src), tracer()
    sizes = (width, src_stride, dst_stride)
    plain = src_stride is None and dst_stride is None and isinstance(times, int) and times == 1
    if plain or all(v is None or isinstance(v, (int, np.integer)) for v in sizes):
        tr.dma_copy(dst, src, width, src_stride, times, dst_stride)
        return
    if isinstance(times, bool) or not isinstance(times, (int, np.integer)):
        raise KernelError(f"`{tr.label()}`: a strided S.dma_copy takes a constant times "
                          f"(npukit copies its rows one by one when the width or the "
                          f"strides are known only at run time), got times={times}")
    steps = [as_affine(width if s is None else s, "S.dma_copy stride")
             for s in (src_stride, dst_stride)]
    for r in range(int(times)):
        tr.dma_copy(dst + index(steps[1] * r), src + index(steps[0] * r), width)


def base(p):
    """A buffer's first value's address (the Compass DSL's DMA takes a buffer there, as
    ``buf.addr_of(0)``); anything else unchanged."""
    return p.pointer if isinstance(p, Buffer) else p


def alloc_events(count: int):
    """``count`` DMA events (one, or a tuple of ``count``) for ``S.async_dma_copy``."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise KernelError(f"S.alloc_events({count!r}): a positive constant")
    return 0 if count == 1 else tuple(range(count))


def wait_events(*events) -> None:
    """Wait for asynchronous copies: their data are in place (see ``async_dma_copy``)."""


def free_events(*events) -> None:
    """Give events back."""


def barrier() -> None:
    """Every TEC reaches this point before any goes on: what one TEC wrote to global memory
    before it, every TEC reads after it. npukit runs the TECs in turns between barriers;
    a TEC's local memory and vectors that live across one with data of its own (or updated
    after it) get a copy per TEC, as each TEC of the Compass DSL has its own
    (``KernelError`` when the copies do not fit the memory)."""
    tracer().barrier()


def per_tec_copies(body: tuple, buffers: list, tec: ir.Var, tgt) -> tuple[tuple, list]:
    """``body`` and ``buffers`` with a copy per TEC of each local buffer that lives across
    a barrier (``stale_across_barriers``): ``cores`` times its size, each view of it moved
    by ``tec`` times its size, so that each TEC's turn reads and writes its own."""
    stale = stale_across_barriers(body, tec)
    if not stale:
        return body, buffers
    grown = {b.name: replace(b, size=b.size * tgt.cores) for b in buffers if b.name in stale}
    for mem in {b.memory for b in grown.values()}:
        size = tgt.memories[mem].size
        used = sum(grown.get(b.name, b).nbytes for b in buffers if b.memory == mem)
        if used > size:
            name, why = next((n, w) for n, w in stale.items() if grown[n].memory == mem)
            raise KernelError(
                f"{why}: npukit runs the TECs in turns between barriers and would give each "
                f"of the {tgt.cores} TECs its own copy of {mem} `{name}`, but the copies need "
                f"{used} B of the {size} B {mem}; reload the data from global memory after "
                f"the barrier")

    def moved(v: ir.View) -> ir.View:
        b = grown.get(v.buffer.name)
        return v if b is None else \
            replace(v, buffer=b, offset=v.offset + ir.affine(tec) * v.buffer.size)

    return ir.map_views(body, moved), [grown.get(b.name, b) for b in buffers]


def stale_across_barriers(body: tuple, tec: ir.Var) -> dict[str, str]:
    """Between barriers (core loops one after another) the TECs run in turns, so one local
    memory or vector written before a barrier holds the last TEC's data after it. That is
    the TEC's own data when it does not depend on the local id ``tec`` (every TEC computed
    the same) and nobody updates it after the barrier; otherwise each buffer read after the
    barrier before it is written again is named, with why (the statement reading it)."""
    stale: dict[str, str] = {}
    per_tec: dict[str, str] = {}  # local buffer -> a statement giving it per-TEC data
    before: set[str] = set()  # local buffers written before the last barrier
    for seg in body:
        now: set[str] = set()  # written whole in this segment so far
        wrote: set[str] = set()
        # a buffer updated in place after a barrier: each TEC's turn would see the last's
        updated = {st.dst.buffer.name: st.label for st, _ in _flat(seg.body, ())
                   if getattr(st, "dst", None) is not None}
        for st, loops in _flat(seg.body, ()):
            dst = getattr(st, "dst", None)
            reads = [v for v in (getattr(st, "src", None), *getattr(st, "srcs", ()))
                     if v is not None] + ([dst] if getattr(st, "acc", False) else [])
            for v in reads:
                name = v.buffer.name
                if name in before and name not in now and (name in per_tec or
                                                           name in updated):
                    why = f"with data of each TEC's own (by `{per_tec[name]}`)" \
                        if name in per_tec else f"and updated after it (by `{updated[name]}`)"
                    stale.setdefault(name, f"`{st.label}` reads {v.buffer.memory} `{name}` "
                                           f"written before an S.barrier {why}")
            if dst is None or dst.buffer.memory not in ("lsram", "vreg"):
                continue
            wrote.add(dst.buffer.name)
            if not loops and dst.layout.size == dst.buffer.size and not dst.offset.terms \
                    and getattr(st, "valid", None) is None:
                now.add(dst.buffer.name)  # written whole: what was there is gone
            varies = any(tec in v.offset.vars for v in [dst, *reads]) or \
                any(lp.trips is not None and tec in lp.trips.vars for lp in loops) or \
                (getattr(st, "valid", None) is not None and tec in st.valid.start.vars) or \
                any(v.buffer.name in per_tec for v in reads)
            if varies:
                per_tec.setdefault(dst.buffer.name, st.label)
        before |= wrote
    return stale


_MAYBE = ir.Var("branch_arm", 1)


def _flat(body, loops: tuple):
    """Each statement with the loop variables around it."""
    for st in body:
        if isinstance(st, ir.Loop):
            yield from _flat(st.body, loops + (st.var,))
        elif isinstance(st, (ir.Branch, ir.Repeat)):  # may not run: a loop of unknown trips
            for arm in ir.bodies(st):
                yield from _flat(arm, loops + (_MAYBE,))
        else:
            yield st, loops
