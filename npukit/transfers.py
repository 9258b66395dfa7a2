"""The transfer descriptors a program's data flows need: what the NDL (or DMA) engines
are programmed with, derived from the sequential description.

The address sequence of a ``Transfer`` is ``offset + Σ idx_k·strides[k]`` (bytes) for idx
in row-major order over ``counts``, cut after ``limit`` elements when it is set. When a
transfer moves vectors whose last one is partial, ``valid`` says which elements hold data:
the junk lanes are never fetched (a strided vector's junk lanes may lie far past the
tensor's end)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import coverage, extent, ir
from .errors import KernelError


@dataclass(frozen=True)
class ValidLanes:
    """The elements of a transfer that hold data: ``idx`` (a multi-index over the
    transfer's ``counts``) moves data when ``idx[axis] < total - (start + Σ coeffs[k]·idx[k])``;
    the rest are junk lanes of a partial vector (or rows of a partial tile).

    For a vectorized dim of 20 elements loaded in vectors of 16 (counts ``(2, 16)``):
    ``ValidLanes(total=20, start=0, coeffs=(16, 0), axis=1)``."""

    total: int
    start: int
    coeffs: tuple[int, ...]
    axis: int


@dataclass(frozen=True)
class Transfer:
    tensor: str
    src: str
    dst: str
    elem_bytes: int
    offset: int
    counts: tuple[int, ...]
    strides: tuple[int, ...]
    limit: int | None = None
    label: str = ""
    valid: ValidLanes | None = None

    def addresses(self) -> np.ndarray:
        """The byte addresses this transfer touches, in order."""
        addr = np.zeros((), np.int64) + self.offset
        for n, s in zip(self.counts, self.strides):
            addr = addr[..., None] + np.arange(n, dtype=np.int64) * s
        addr = addr.reshape(-1)
        return addr if self.limit is None else addr[: self.limit]

    def valid_mask(self) -> np.ndarray:
        """One bool per element of ``addresses()``: True where the element holds data
        (``valid``), False for junk lanes an engine does not fetch."""
        if self.valid is None:
            return np.ones(self.addresses().size, bool)
        v = self.valid
        idx = np.indices(self.counts).reshape(len(self.counts), -1)
        start = v.start + (np.asarray(v.coeffs)[:, None] * idx).sum(axis=0)
        mask = idx[v.axis] < v.total - start
        return mask if self.limit is None else mask[: self.limit]


def transfers(prog: ir.Program) -> list[Transfer]:
    """One Transfer per data flow, in program order, described on its tensor's side."""
    out = []
    for st, loops in prog.walk():
        if isinstance(st, ir.Copy):
            view = st.dst if st.dst.buffer.role != "internal" else st.src
            out.append(_describe(st, view, loops))
        elif isinstance(st, ir.Append):
            out.append(_describe_append(st, loops))
    return out


def _describe(st, view: ir.View, loops) -> Transfer:
    eb = view.dtype.itemsize
    coeff = dict(view.offset.terms)
    counts = tuple(v.count for v in loops) + view.shape
    strides = tuple(coeff.get(v, 0) * eb for v in loops) + \
        tuple(s * eb for s in view.layout.strides)
    return Transfer(view.buffer.name, st.src.buffer.memory, st.dst.buffer.memory, eb,
                    (view.layout.offset + view.offset.const) * eb, counts, strides, None, st.label,
                    _valid(st.valid, loops, view))


def _valid(lanes: ir.Lanes | None, loops, view: ir.View) -> ValidLanes | None:
    """``lanes`` over dim 0 of ``view`` in the transfer's terms: the view's dim 0 is count
    ``len(loops)``. None when every element holds data, or when the valid count is not
    affine in the loop indices (an AutoTiler next-tile read through floordiv/mod)."""
    if lanes is None or not view.shape:
        return None
    start = lanes.start
    if any(not isinstance(a, ir.Var) for a, _ in start.terms):
        return None
    if lanes.total - start.bounds()[1] >= min(lanes.width, view.shape[0]):
        return None  # every vector is whole
    coeff = dict(start.terms)
    coeffs = tuple(coeff.get(v, 0) for v in loops) + (0,) * len(view.shape)
    return ValidLanes(lanes.total, start.const, coeffs, len(loops))


def _describe_append(st: ir.Append, loops) -> Transfer:
    """Appends fill each selected subtensor in row-major order; the descriptor walks the
    selecting loops, then the subtensor, and stops after the elements really written."""
    keys = tuple(v for v in loops if v in set(st.dst.offset.vars))
    view, eb = st.dst, st.dst.dtype.itemsize
    written = np.minimum(_pushed(st, loops, keys), view.size)
    limit = None
    if (written < view.size).any():
        if (written[:-1] < view.size).any():
            raise KernelError(f"`{st.label}` writes {written.min()} of the {view.size} elements of "
                              f"some {view.buffer.name} subtensors: not one transfer descriptor")
        limit = int(written.sum())
    coeff = dict(view.offset.terms)
    counts = tuple(v.count for v in keys) + view.shape
    strides = tuple(coeff[v] * eb for v in keys) + tuple(s * eb for s in view.layout.strides)
    return Transfer(view.buffer.name, st.src.buffer.memory, st.dst.buffer.memory, eb,
                    (view.layout.offset + view.offset.const) * eb, counts, strides, limit, st.label)


def _pushed(st: ir.Append, loops, keys) -> np.ndarray:
    """The lanes pushed per block of ``points(keys)`` consecutive iterations of ``loops``
    (per subtensor when the selecting loops are the outer ones): ``[points(keys)]`` int64.
    Every loop's full count runs (a descriptor does not know run-time trip counts)."""
    nkeys, n = ir.points(keys), ir.points(tuple(loops))
    if keys == tuple(loops[:len(keys)]) and not any(v.trips for v in loops):
        pushed = None
        inner = tuple(loops[len(keys):])
        if st.valid is None or not set(st.valid.start.vars) & set(keys):
            pushed = coverage.lane_sum(st.valid, st.valid.width if st.valid else st.src.size,
                                       inner)
        if pushed is not None:
            return np.full(nkeys, pushed, np.int64)
    if nkeys == 0:
        return np.zeros(0, np.int64)
    # No closed form: count iteration by iteration, a chunk at a time.
    out, block, k = np.zeros(nkeys, np.int64), n // nkeys, 0
    for env in ir.iteration_chunks(tuple(loops), extent.CHUNK):
        size = next(iter(env.values())).size if env else 1
        want = np.broadcast_to(np.asarray(st.valid.eval(env)) if st.valid else st.src.size,
                               (size,)).astype(np.int64)
        ids = np.arange(k, k + size) // block
        firsts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        out[ids[firsts]] += np.add.reduceat(want, firsts)
        k += size
    return out


ir.register_renderer("transfers", transfers)
