"""The C of a data flow (``ir.Copy``) and what it may leave out without changing a byte:
a ``memcpy`` where both views are one run, one dense block visited in the same order, or
runs consecutive in both (the dims in any order); no poison in a memory its first statement
writes whole; no copy at all of an input a memory only reads (``read_only_copies``).
``emit_copy`` writes the C through the emitter of ``npukit.c.emit``."""

from __future__ import annotations

import math
import re
from contextlib import ExitStack, nullcontext

import numpy as np

from .. import ir
from . import arith as A
from .access import (
    Names,
    access,
    affine_c,
    coalesced,
    dense,
    injective,
    join_sum,
    key,
    scaled,
    simplify,
)
from .code import Writer
from .ctype import c_type

POISON = "poison, as in the simulator"


def _left(lanes: ir.Lanes, names: Names, h: A.Helpers) -> str:
    """``total - start`` as C text, ``start`` kept whole: ``300 - (10 * Tile + 10)``."""
    start = affine_c(lanes.start, names, h)
    single = not any(op in start for op in (" + ", " - "))
    return f"{lanes.total} - {start if single else f'({start})'}"


def valid_count(lanes: ir.Lanes, view: ir.View, names: Names, h: A.Helpers) -> str:
    """C expression of how many elements of ``view`` hold data: the first ``valid`` indices
    of its dim 0, each as many elements as one index of dim 0 spans."""
    rows = view.shape[0] if view.shape else 1
    inner = view.size // rows if rows else 0
    start = simplify(lanes.start)
    if not start.terms:
        return str(int(np.clip(lanes.total - start.const, 0, min(lanes.width, rows))) * inner)
    count = f"{h.use('npk_clamp64')}({_left(lanes, names, h)}, 0, {min(lanes.width, rows)})"
    return count if inner == 1 else f"{count} * {inner}"


def lanes_c(lanes: ir.Lanes, names: Names, h: A.Helpers) -> str:
    """C expression of ``clamp(total - start, 0, width)`` (a number when constant)."""
    start = simplify(lanes.start)
    if not start.terms:
        return str(int(np.clip(lanes.total - start.const, 0, lanes.width)))
    return f"{h.use('npk_clamp64')}({_left(lanes, names, h)}, 0, {lanes.width})"


def emit_copy(em, st: ir.Copy, w: Writer) -> None:
    held = em.in_place.get(st.dst.buffer.name) if internal(st.dst) else None
    if held is not None and any(c is st for c in held[0]):
        ptr, store = em.ptr[key(st.dst.buffer)], held[1]
        w.line(f"{ptr} = ({c_type(st.dst.dtype)} *)({em.start(em.acc(st.src))});  "
               f"/* read where it is */")
        with w.block(f"if ((uintptr_t){ptr} % 64 != 0)"):
            w.comment("Not aligned as a local array is: copied.")
            w.line(f"{ptr} = {store};")
            _copy(em, st, w)
    else:
        _copy(em, st, w)

def _copy(em, st: ir.Copy, w: Writer) -> None:
    src, dst = em.acc(st.src), em.acc(st.dst)
    sdt, ddt = st.src.dtype, st.dst.dtype
    kind = {(False, True): "Load", (True, False): "Store"}.get(
        (internal(st.src), internal(st.dst)), "Move")
    rows = "rows" if len(st.dst.shape) > 1 else "lanes"
    what = f"{kind} {em.describe(st.src)} -> {em.describe(st.dst)}"
    valid = st.valid
    if valid is not None and every_row(st):
        valid = None
    what += f", valid {rows} only" if valid is not None else ""
    if em.prog.source or not st.label:
        w.banner(what, st.label)
    else:  # a front end's block title ("Read Next Tile In1"), then what moves where
        w.banner(st.label, what)
    same = key(st.src.buffer) == key(st.dst.buffer)
    k = em.k
    with w.block() if valid is not None or same else nullcontext():
        n_src = n_dst = str(st.dst.size)
        if valid is not None:
            n_src = valid_count(valid, st.src, em.names, em.h)
            n_dst = valid_count(valid, st.dst, em.names, em.h)
            w.line(f"const int64_t {em.live} = {n_dst};  /* elements that hold data */")
            n_text = n_dst
            n_src = em.live if n_src == n_dst else n_src
            n_dst = em.live
        value = A.convert(em.h, em.el(src, k), sdt, ddt)
        if n_src != n_dst:  # the views split their valid rows differently
            junk = A.convert(em.h, em.poison(sdt), sdt, ddt)
            value = f"{k} < {n_src} ? {value} : {junk}"
        # No valid row: the views may lie past a tensor's end (the read after the last
        # tile), so nothing is addressed.
        empty = valid is not None and not (internal(st.src) and internal(st.dst)) and \
            (n_text == "0" or not n_text.isdigit() and
             simplify(valid.start).bounds()[1] >= valid.total)
        with w.block(f"if ({em.live} > 0)") if empty else nullcontext():
            if same:
                em.via_tmp(w, dst, ddt, n_dst, value, st.dst.size)
            elif sdt == ddt and src.run == 1 and dst.run == 1 and n_src == n_dst:
                count = n_dst if n_dst.isdigit() else f"(size_t){n_dst}"
                w.line(f"memcpy({em.at(dst)}, {_read_at(em, st.src, em.at(src))}, "
                       f"{count} * sizeof({c_type(ddt)}));")
            elif sdt == ddt and valid is None and src.dims == dst.dims and dense(dst.dims):
                # Both views visit one dense block in the same order: element k lands
                # where it sits, so the block moves as it is.
                w.comment("The same dense block in both: copied whole.")
                w.line(f"memcpy({em.start(dst)}, {_read_at(em, st.src, em.start(src))}, "
                       f"{st.dst.size} * sizeof({c_type(ddt)}));")
            elif sdt == ddt and n_src == n_dst and \
                    (loops := run_loops(st, valid is not None)) is not None:
                _copy_runs(em, st, loops, n_dst if valid is not None else None, w)
            else:
                with w.block(f"for (int64_t {k} = 0; {k} < {n_dst}; {k}++)"):
                    w.line(f"{em.el(dst, k)} = {value};")
        if valid is not None and internal(st.dst) and n_text != "0" and em.poisons:
            # A copy with no valid row moves nothing, and leaves memory as it was.
            w.comment(f"Junk {rows}: poisoned, as in the simulator.")
            with w.block(f"if ({n_dst} > 0)") if not n_text.isdigit() else nullcontext():
                with w.block(f"for (int64_t {k} = {n_dst}; {k} < {st.dst.size}; {k}++)"):
                    w.line(f"{em.el(dst, k)} = {em.poison(ddt)};  /* {POISON} */")

def _copy_runs(em, st: ir.Copy, loops: tuple[Dim, ...], live: str | None, w: Writer) -> None:
    """``st`` as ``loops`` (``run_loops``), the innermost moved with one memcpy: every
    element lands where the row-major loop puts it (the views' buffers differ and no two
    elements of ``dst`` share an address), in the destination's memory order. ``live``: the
    elements that hold data (the first rows of dim 0, a loop of its own), or None for all."""
    inner = math.prod(st.dst.shape[1:])
    names = em.dim_names

    def at(v: ir.View, side: int) -> str:
        base = em.affine(access(v, "", em.origin[key(v.buffer)]).base)
        terms = [base] + [scaled(names[j], d[side]) for j, d in enumerate(loops[:-1])]
        return f"{em.ptr[key(v.buffer)]} + {join_sum(terms)}"

    def count(d: Dim) -> str:
        if live is None or d[3] != 0:
            return str(d[0])
        return live if inner == 1 else f"{live} / {inner}"
    runs = loops[-1]
    w.comment(f"Runs of {runs[0]} elements, consecutive in both views, one memcpy each, in the "
              f"destination's memory order (the same elements).")
    with ExitStack() as nest:
        for j, d in enumerate(loops[:-1]):
            i = names[j]
            nest.enter_context(w.block(f"for (int64_t {i} = 0; {i} < {count(d)}; {i}++)"))
        n = count(runs)
        n = n if n.isdigit() else f"(size_t)({n})"
        src = _read_at(em, st.src, at(st.src, 1))
        w.line(f"memcpy({at(st.dst, 2)}, {src}, {n} * sizeof({c_type(st.dst.dtype)}));")


def _read_at(em, src: ir.View, addr: str) -> str:
    """The address a memcpy reads ``src`` at: a constant's through ``npk_opaque``, which
    keeps gcc from folding the copy into (sometimes wrong) immediate vectors."""
    if src.buffer.role != "const":
        return addr
    return f"{em.h.use('npk_opaque')}({addr})"


def every_row(st: ir.Copy) -> bool:
    """Whether each row of copy ``st`` holds data, in both views: it has no valid rows, or
    as many as rows, known at build time."""
    lanes = st.valid
    if lanes is None:
        return True
    start = simplify(lanes.start)
    return not start.terms and all(
        min(max(lanes.total - start.const, 0), lanes.width) >= (v.shape[0] if v.shape else 1)
        for v in (st.src, st.dst))


def written_whole_first(prog: ir.Program) -> set[str]:
    """The internal buffers whose first statement, in program order, writes each of their
    elements and reads none (a copy from another buffer, with no junk rows, or a fill), and
    runs whenever the program does: outside any loop, or inside loops that each run a fixed
    number of times, at least once, one iteration after another. Poisoning them first would
    change no byte anyone reads."""
    whole, seen = set(), set()

    def visit(body) -> None:
        for st in body:
            if isinstance(st, ir.Loop) and st.var.trips is None and st.var.count >= 1 and \
                    not (st.cores or st.parallel):
                visit(st.body)
                continue
            views: list[ir.View] = []
            ir.map_views((st,), lambda v, seen_here=views: seen_here.append(v) or v)
            if isinstance(st, ir.Fill) or isinstance(st, ir.Copy) and every_row(st):
                dst = st.dst
                b = dst.buffer
                reads = isinstance(st, ir.Copy) and key(st.src.buffer) == key(b)
                if internal(dst) and b.name not in seen and not reads and _all_of(dst):
                    whole.add(b.name)
            seen.update(v.buffer.name for v in views if internal(v))

    visit(prog.body)
    return whole


def read_only_copies(prog: ir.Program) -> dict[str, tuple[ir.Copy, ...]]:
    """The internal buffers a program may read in place of the input tensor they copy: the
    first statement of each copies it whole (``written_whole_first``); every statement that
    writes it copies all of it, as one block in the same order, from an input tensor of its
    dtype (the tensor whole, or one tile of it at a time), outside parallel loops (the
    copy's thread sets where the buffer is); and no basic kernel gets it but as a pointer
    to const (the input, being one, is never written): buffer name -> those copies, in
    program order."""
    whole = written_whole_first(prog)
    copies: dict[str, list[ir.Copy]] = {}
    others: set[str] = set()

    def visit(body, shared: bool) -> None:
        for st in body:
            for name in _written(st) & whole:
                if shared and isinstance(st, ir.Copy) and _one_block(st):
                    copies.setdefault(name, []).append(st)
                else:
                    others.add(name)
            for arm in ir.bodies(st):
                visit(arm, shared and not (isinstance(st, ir.Loop) and
                                           (st.cores or st.parallel)))

    visit(prog.body, True)
    return {name: tuple(sts) for name, sts in copies.items() if name not in others}


def _one_block(st: ir.Copy) -> bool:
    """Whether ``st`` copies an input tensor of its dtype into the whole of an internal
    buffer, element k of the buffer being element k of one block of the tensor's memory
    (the same dims, in the same order, from wherever the tile starts)."""
    src, dst = st.src, st.dst
    return every_row(st) and src.buffer.role == "in" and src.dtype == dst.dtype and \
        _all_of(dst) and coalesced(src.layout) == coalesced(dst.layout)


def _all_of(v: ir.View) -> bool:
    """Whether view ``v`` is its buffer's every element, each once, from its first."""
    return not v.offset.terms and v.layout.offset + v.offset.const == 0 and \
        v.size == v.buffer.size and dense(coalesced(v.layout))


def _written(st) -> set[str]:
    """The internal buffers statement ``st`` may write (a basic kernel: every one it gets a
    pointer to that is not a pointer to const)."""
    if isinstance(st, (ir.Copy, ir.Append, ir.Fill, ir.Compute)):
        return {st.dst.buffer.name} if internal(st.dst) else set()
    if isinstance(st, ir.Call):
        return {a.view.buffer.name for a, (ctype, _) in zip(st.args, st.fn.args)
                if isinstance(a, ir.Ptr) and internal(a.view) and
                not re.match(r"\s*const\b", ctype)}
    return set()


# A loop of a copy made run by run: (count, source stride, destination stride, the view's dim
# it walks, -1 for dims merged together).
Dim = tuple[int, int, int, int]


def run_loops(st: ir.Copy, rows_only: bool = False) -> tuple[Dim, ...] | None:
    """Copy ``st`` as nested loops whose innermost one moves a run of elements consecutive
    in both views: the dims sorted by the destination's stride (its memory order), each
    merged with the one inside it where both views step over it as one run. None when the
    copy may not move its elements in another order than the row-major one (one buffer, or
    two elements of ``dst`` at one address), when no run of two elements or more is
    consecutive in both, or when the whole copy is one run (a single memcpy). ``rows_only``:
    dim 0 keeps a loop of its own (the copy moves only its first rows)."""
    src, dst = st.src.layout, st.dst.layout
    if src.shape != dst.shape or key(st.src.buffer) == key(st.dst.buffer) or \
            not injective(coalesced(dst)):
        return None
    dims = sorted(((n, a, b, d) for d, (n, a, b) in
                   enumerate(zip(dst.shape, src.strides, dst.strides))
                   if n > 1 or rows_only and d == 0),
                  key=lambda t: -t[2])
    merged: list[Dim] = []
    for n, a, b, d in reversed(dims):  # innermost first
        if merged:
            m, a1, b1, d1 = merged[-1]
            if a == m * a1 and b == m * b1 and not (rows_only and 0 in (d, d1)):
                merged[-1] = (n * m, a1, b1, -1)
                continue
        merged.append((n, a, b, d))
    merged.reverse()
    if not merged or merged[-1][1:3] != (1, 1) or merged[-1][0] < 2 or len(merged) < 2:
        return None
    return tuple(merged)


def internal(v: ir.View) -> bool:
    return v.buffer.role == "internal"
