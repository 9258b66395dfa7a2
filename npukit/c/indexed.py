"""The vector unit's instructions that index a table by lanes, in C: ``vgather`` (lane ``k``
reads ``table[indices[k]]``) and ``vscatter`` (lane ``k`` is written to ``table[indices[k]]``),
for ``npukit.c.emit``'s ``Emitter`` (passed as ``em``)."""

from __future__ import annotations

from .. import ir
from . import arith as A
from .code import Writer


def gather_lane(em, st: ir.Compute, lanes: list[str]) -> str:
    """One lane of ``vgather``: the table element at the lane's index, clamped into the
    table (the simulator reports an index outside it); 0 where the mask is false."""
    table = st.srcs[0]
    idx = f"{em.h.use('npk_clamp64')}((int64_t){lanes[1]}, 0, {max(table.size - 1, 0)})"
    value = em.el(em.acc(table), idx)
    return f"({lanes[2]} ? {value} : 0)" if len(lanes) > 2 else value


def emit_scatter(em, st: ir.Compute, w: Writer) -> None:
    """``vscatter``: each active lane, in order, to the table element at its index; a lane
    whose index lies outside the table writes nothing (the simulator reports it)."""
    table, k = em.acc(st.dst), em.k
    vals, idx = (em.acc(v) for v in st.srcs[:2])
    w.banner(f"Vec vscatter {em.describe(st.srcs[0])} -> {em.describe(st.dst)} at the "
             f"indices {em.describe(st.srcs[1])}, lanes in order", st.label)
    with w.block(f"for (int64_t {k} = 0; {k} < {st.srcs[0].size}; {k}++)"):
        i = f"(int64_t){em.el(idx, k)}"
        cond = f"{i} >= 0 && {i} < {st.dst.size}"
        if len(st.srcs) > 2:
            cond = f"{em.el(em.acc(st.srcs[2]), k)} && {cond}"
        value = A.convert(em.h, em.el(vals, k), st.srcs[0].dtype, st.dst.dtype)
        with w.block(f"if ({cond})"):
            w.line(f"{em.el(table, i)} = {value};")
