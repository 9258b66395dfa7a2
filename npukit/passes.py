"""Build-time checks every Program passes before a back end sees it: accesses stay inside
their buffers, every element of every output is written and no append discards data,
internal memories hold their buffers, dtype conversions are defined. The pass also decides
which internal buffers are double buffered."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from . import coverage, ir
from .dtypes import is_float
from .errors import CapacityError, DTypeError, KernelError, OutOfBoundsError, ShapeError
from .extent import view_range
from .layout import Layout

# Elements an output may have for an element-by-element check of what the program writes,
# when the closed form does not settle it, and the loop iterations (times elements per
# iteration) a statement may have to be evaluated one by one for it.
EXACT_LIMIT = 1 << 24
ENUMERATE_LIMIT = 1 << 22


def check(prog: ir.Program) -> ir.Program:
    """Run every check; return the program with buffer slots decided."""
    for st, loops in prog.walk():
        dst = getattr(st, "dst", None)
        if dst is not None and dst.buffer.role == "const":
            raise KernelError(f"`{st.label}` writes constant {dst.buffer.name!r}: program data "
                              f"is read-only")
        if isinstance(st, (ir.Copy, ir.Append)):
            _check_bounds(st.src, st.valid, loops, st.label)
            _check_bounds(st.dst, None if isinstance(st, ir.Append) else st.valid, loops, st.label)
            _check_conversion(st)
        elif isinstance(st, ir.Compute):
            for v in (st.dst, *st.srcs):
                _check_bounds(v, None, loops, st.label)
            if st.op == "rescale_clamp":
                _check_bias_scale(prog, st)
        elif isinstance(st, ir.Fill):
            _check_bounds(st.dst, None, loops, st.label)
        elif isinstance(st, ir.Call):  # the element or tile each argument points at
            for a in st.args:
                if not isinstance(a, ir.Val):
                    _check_bounds(a.view, None, loops, st.label)
        if isinstance(st, ir.Append):
            _check_append_keeps_data(st, loops)
    _check_outputs_written(prog)
    return _with_slots(prog)


def _check_append_keeps_data(st: ir.Append, loops) -> None:
    """An append never writes past its (sub)tensor's end: it drops what does not fit. That
    is right for the junk lanes of a last vector, which the valid lane count already leaves
    out; valid lanes dropped are results lost because the output is too small. (Checked in
    closed form, or by counting when the loop nest is small; otherwise not checked.)"""
    keys, pushed = coverage.append_pushes(st, loops)
    if pushed is None:
        if ir.points(tuple(loops)) > ENUMERATE_LIMIT:
            return
        n = ir.points(tuple(loops))
        env = ir.iteration_space(tuple(loops))
        want = np.broadcast_to(np.asarray(st.valid.eval(env)) if st.valid is not None else
                               st.src.size, (n,)) * coverage.running(loops, env, n)
        pushed = int(want.reshape(ir.points(keys), -1).sum(axis=1).max())
    size = st.dst.size
    if pushed > size:
        what = f"each {st.dst.shape} subtensor of tensor" if keys else "tensor"
        raise OutOfBoundsError(
            f"`{st.label}`: {what} {st.dst.buffer.name!r} holds {size} elements but receives "
            f"{pushed} computed values: the last {pushed - size} would be dropped. Give the "
            f"output {pushed} elements, or slice the inputs so that only {size} values are "
            f"computed (lanes past a vectorized dim's end are junk, and appends drop those)")


def _check_outputs_written(prog: ir.Program) -> None:
    """Every element of every parameter with role ``"out"`` is written by the program's
    data flows (Copy, Append, Fill into it; a ``vscatter`` writes elements known only at run
    time and a ``Branch`` arm may not run, so they count for none), or ``ShapeError``: an
    unwritten element would hold poison on the simulator and the array's old contents in C.
    Checked in closed form (``npukit.coverage``), else element by element up to
    ``EXACT_LIMIT`` elements.

    Not checked: parameters a basic kernel gets a pointer to (``ir.Call`` with ``ir.Ptr``,
    in AutoTiler programs), which code npukit cannot see writes, and outputs built with
    ``npukit.spec(..., partial=True)`` (role ``"inout"``: unwritten elements keep the
    array's contents)."""
    pointed = {a.view.buffer.name for st, _ in prog.walk() if isinstance(st, ir.Call)
               for a in st.args if isinstance(a, ir.Ptr)}
    maybe = {id(s) for st, _ in prog.walk() if isinstance(st, (ir.Branch, ir.Repeat))
             for arm in ir.bodies(st) for s, _ in ir.walk(arm)}
    writers: dict[str, list] = {}
    for st, loops in prog.walk():
        dst = getattr(st, "dst", None)
        if dst is not None and dst.buffer.role == "out" and id(st) not in maybe and \
                getattr(st, "op", "") != "vscatter":
            writers.setdefault(dst.buffer.name, []).append((st, loops))
    for buf, spec in prog.params:
        if buf.role == "out" and buf.name not in pointed:
            _check_written(buf.name, spec, writers.get(buf.name, []))


def _writes(st, loops) -> list[coverage.Box] | None:
    if isinstance(st, ir.Append):
        return coverage.append_writes(st, loops)
    return coverage.copy_writes(st.dst, getattr(st, "valid", None), loops)


def _check_written(name: str, spec: Layout, writers: list) -> None:
    boxes = [_writes(st, loops) for st, loops in writers]
    whole = coverage.box(spec.offset, list(zip(spec.shape, spec.strides)))
    if None not in boxes and coverage.merge([b for bs in boxes for b in bs]) == [whole]:
        return
    labels = ", ".join(f"`{st.label}`" for st, _ in writers) or "no statement"
    lo, hi = spec.footprint()
    if spec.size > EXACT_LIMIT or hi - lo > 2 * EXACT_LIMIT:
        why = "no closed form applies" if None in boxes else \
            f"in closed form its writes ({sum(b.points for bs in boxes for b in bs)} element " \
            f"writes) do not make up the output"
        raise ShapeError(
            f"output {name!r} ({spec.size} elements): npukit cannot show that {labels} "
            f"writes every element ({why}, and the output is over {EXACT_LIMIT} elements "
            f"for an element-by-element check); build with npukit.spec(..., partial=True) "
            f"to accept elements the kernel may leave unwritten")
    hit = np.zeros(hi - lo, bool)
    for (st, loops), bs in zip(writers, boxes):
        chunks = (o for b in bs for o in b.offsets()) if bs is not None else \
            [coverage.enumerate_writes(st, loops, ENUMERATE_LIMIT)]
        for p in chunks:
            if p is None:
                raise ShapeError(
                    f"output {name!r}: npukit cannot show that `{st.label}` writes every "
                    f"element (its loop nest is too large to enumerate); build with "
                    f"npukit.spec(..., partial=True) to accept elements the kernel may leave "
                    f"unwritten")
            p = p[(p >= lo) & (p < hi)]
            hit[p - lo] = True
    first, missing = None, 0
    for start, offs in coverage.row_major(spec.offset, spec.shape, spec.strides):
        miss = ~hit[offs - lo]
        if first is None and miss.any():
            first = start + int(np.argmax(miss))
        missing += int(miss.sum())
    if missing:
        index = ", ".join(map(str, np.unravel_index(first, spec.shape)))
        raise ShapeError(
            f"output {name!r}: the kernel writes {spec.size - missing} of its {spec.size} "
            f"elements (shape {spec.shape}); the first unwritten is {name}[{index}]. Written "
            f"by {labels}. Give the output the shape the kernel writes, or build with "
            f"npukit.spec(..., partial=True) to leave the rest unwritten (it keeps the "
            f"array's contents)")


def _check_bounds(view: ir.View, valid, loops, label: str) -> None:
    lo, hi = view_range(view, valid, loops)
    size = view.buffer.size
    if lo < 0 or hi > size:
        what = {"internal": f"{view.buffer.memory} buffer",
                "const": f"{view.buffer.memory} constant"}.get(view.buffer.role, "tensor")
        raise OutOfBoundsError(
            f"{what} {view.buffer.name!r}: `{label}` touches elements {lo}..{hi - 1} but the "
            f"{what} spans elements 0..{size - 1} (view shape {view.shape}, strides "
            f"{view.layout.strides}, offset {view.layout.offset} + {view.offset})")


def _check_conversion(st) -> None:
    src, dst = st.src.dtype, st.dst.dtype
    if is_float(src) and not is_float(dst):
        raise DTypeError(f"`{st.label}`: moving {src.name} into {dst.name} tensor "
                         f"{st.dst.buffer.name!r} would need a float-to-int conversion")


def _check_bias_scale(prog: ir.Program, st: ir.Compute) -> None:
    """Integer partials rescale by an integer (bias, scale) pair: a float pair would need a
    float-to-int conversion, which the target does not define."""
    p, pair = st.srcs[0].dtype, st.srcs[1].dtype
    if is_float(pair) and not is_float(p):
        src = next((c.src.buffer.name for c, _ in prog.walk() if isinstance(c, ir.Copy)
                    and c.dst.buffer.name == st.srcs[1].buffer.name), st.srcs[1].buffer.name)
        raise DTypeError(f"`{st.label}`: rescale_clamp of {p.name} partials reads its (bias, "
                         f"scale) pair from {pair.name} tensor {src!r}; integer partials need "
                         f"an integer pair (int32 in the Torq EasyKernel guide)")


def _with_slots(prog: ir.Program) -> ir.Program:
    """Internal buffers written inside a loop get two slots (double buffering) when every
    such buffer of their memory fits twice; buffers whose slots the front end placed keep
    them. Then check each memory holds its buffers (placed ones by their address range:
    buffers of successive kernels of a group reuse the same addresses)."""
    in_loop = {st.dst.buffer.name for st, loops in prog.walk()
               if loops and isinstance(st, (ir.Copy, ir.Compute, ir.Fill))}
    tgt = prog.target
    new = []
    for mem in dict.fromkeys(b.memory for b in prog.buffers):
        bufs = [b for b in prog.buffers if b.memory == mem]
        free = [b for b in bufs if not b.slot_len]
        size = tgt.memories[mem].size
        double = sum(b.nbytes * (2 if b.name in in_loop else 1) for b in free) <= size
        for b in bufs:
            new.append(b if b.slot_len else
                       replace(b, slots=2 if double and b.name in in_loop else 1))
        used = memory_use([b for b in new if b.memory == mem])
        if used > size:
            parts = ", ".join(f"{b.name} {b.nbytes} B" for b in bufs)
            raise CapacityError(f"{mem} holds {size} B but kernel {prog.name!r} places "
                                f"{used} B there ({parts})")
    slots = {b.name: b.slots for b in new}
    return _map_buffers(replace(prog, buffers=tuple(new)),
                        lambda b: replace(b, slots=slots[b.name]) if b.name in slots else b)


def memory_use(bufs) -> int:
    """Bytes a memory must hold for these buffers: slots included; buffers the front end
    placed at an address count by the highest address they reach."""
    used = sum(b.nbytes * b.slots for b in bufs if not b.slot_len)
    used += max([b.address + b.nbytes for b in bufs if b.slot_len and b.address is not None]
                or [0])
    return used + sum(b.nbytes for b in bufs if b.slot_len and b.address is None)


def _map_buffers(prog: ir.Program, fn) -> ir.Program:
    """``prog`` with ``ir.map_buffers(prog.body, fn)`` (npukit.tiler.graph places and renames
    a layer's buffers with it)."""
    return replace(prog, body=ir.map_buffers(prog.body, fn))
