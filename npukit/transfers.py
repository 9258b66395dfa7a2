"""The transfer descriptors a program's data flows need: what the NDL (or DMA) engines
are programmed with, derived from the sequential description.

The address sequence of a ``Transfer`` is ``offset + Σ idx_k·strides[k]`` (bytes) for idx
in row-major order over ``counts``, cut after ``limit`` elements when it is set."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import ir
from .errors import KernelError


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

    def addresses(self) -> np.ndarray:
        """The byte addresses this transfer touches, in order."""
        addr = np.zeros((), np.int64) + self.offset
        for n, s in zip(self.counts, self.strides):
            addr = addr[..., None] + np.arange(n, dtype=np.int64) * s
        addr = addr.reshape(-1)
        return addr if self.limit is None else addr[: self.limit]


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
                    (view.layout.offset + view.offset.const) * eb, counts, strides, None, st.label)


def _describe_append(st: ir.Append, loops) -> Transfer:
    """Appends fill each selected subtensor in row-major order; the descriptor walks the
    selecting loops, then the subtensor, and stops after the elements really written."""
    keys = tuple(v for v in loops if v in set(st.dst.offset.vars))
    view, eb = st.dst, st.dst.dtype.itemsize
    env = ir.iteration_space(loops)
    n = ir.points(loops)
    want = np.broadcast_to(np.asarray(st.valid.eval(env)) if st.valid else st.src.size, (n,))
    per_key = want.reshape(ir.points(keys), -1).sum(axis=1)
    written = np.minimum(per_key, view.size)
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
