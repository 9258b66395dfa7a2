"""Streaming loops without the copies into internal memories.

An innermost loop whose body loads vectors of tensors into internal buffers, runs lane-wise
instructions on them and stores or appends the result — the shape of every elementwise
kernel — computes each element independently of the others. When nothing reads those
internal buffers after the loop, the copies into them cannot change the result, so the
loop and its lanes run as one C loop over elements, ``e = width·i + lane``, reading and
writing the parameter pointers directly; gcc vectorises it. Lanes past the data (junk, to
the simulator) are computed from the poison value wherever the IR stores them.

A loop is fused only when all of this holds; otherwise the literal reading is emitted:

- its body has no loops, only loads (tensor -> internal), ALU instructions without
  accumulation, Act instructions, and one store or append (internal -> tensor);
- each instruction reads lanes written earlier in the same iteration through the same view,
  except an Act's (bias, scale) pair, which no statement of the body writes;
- no tensor is both read and written in the body, no internal buffer it writes is read
  outside it;
- every tensor access steps ``width`` elements per iteration, one run per vector, and all
  loads keep the same valid lanes, which the output keeps or extends with junk;
- an append lands at ``cursor + e`` on an evenly spaced output, or at a closed-form position
  when each iteration of the loops since the cursor's reset appends the same count.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import ir
from . import arith as A
from .access import Access, affine_c, coalesce, join_sum, key, scaled
from .code import Writer
from .ctype import c_type, int_range, poison_literal


@dataclass
class _Stream:
    """A tensor access of the fused loop: element ``e`` at ``ptr[base + stride·e]``."""

    ptr: str
    base: ir.Affine
    stride: int


@dataclass
class _Step:
    """One statement of the body, as a line of the element loop."""

    stmt: object
    target: str  # the C local it defines, or the lvalue it stores to
    expr: str  # value from the tensors
    junk: str  # value in junk lanes (loads read poison there); "" as expr
    ctype: str = ""  # declares a local of this type, else assigns to target
    fast: str = ""  # value in 32-bit lanes, when the plan has a fast path


@dataclass
class _Plan:
    loop: ir.Loop
    width: int
    lanes: ir.Lanes | None
    steps: list[_Step] = field(default_factory=list)
    skipped: list[ir.Buffer] = field(default_factory=list)
    invariants: list[str] = field(default_factory=list)  # C declarations before the loop
    out: object = None  # the store or append
    junk_out: bool = False  # the output also writes lanes past the data
    fast_checks: list[str] = field(default_factory=list)  # when all hold, 32-bit lanes are exact


class ProgramInfo:
    """Who reads each internal buffer, where each cursor is reset and appended, statement
    order: what fusion needs to know about the rest of the program."""

    def __init__(self, prog: ir.Program):
        self.readers: dict[str, set[int]] = {}
        self.order: dict[int, int] = {}
        self.loops_of: dict[int, tuple[ir.Var, ...]] = {}
        self.resets: dict[str, list] = {}
        self.appends: dict[str, list] = {}
        for k, (st, loops) in enumerate(prog.walk()):
            self.order[id(st)] = k
            self.loops_of[id(st)] = loops
            for v in _reads(st):
                self.readers.setdefault(v.buffer.name, set()).add(id(st))
            if isinstance(st, ir.ResetCursor):
                self.resets.setdefault(st.cursor, []).append(st)
            if isinstance(st, ir.Append):
                self.appends.setdefault(st.cursor, []).append(st)


def _reads(st) -> list[ir.View]:
    if isinstance(st, ir.Call):  # opaque: reads (and may write) whatever it points at
        return [a.view for a in st.args if not isinstance(a, ir.Val)]
    if isinstance(st, (ir.Copy, ir.Append)):
        return [st.src]
    if isinstance(st, ir.Compute):
        return list(st.srcs) + ([st.dst] if st.acc else [])
    return []


def _internal(v: ir.View) -> bool:
    return v.buffer.role == "internal"


def _lane_view(v: ir.View, width: int) -> bool:
    """An internal view whose lane ``l`` is element ``l`` of one fixed run."""
    return _internal(v) and not v.offset.terms and v.size == width and \
        coalesce(v.layout) in (((width, 1),), ()) and len(v.shape) <= 1


def _coeff(a: ir.Affine, var: ir.Var) -> int | None:
    """Coefficient of ``var`` in ``a``; None when ``var`` also hides in a div/mod atom."""
    c = 0
    for atom, k in a.terms:
        if atom == var:
            c = k
        elif not isinstance(atom, ir.Var) and var in atom.expr.vars:
            return None
    return c


def fused_loop(em, loop: ir.Loop, w: Writer) -> bool:
    """Emit ``loop`` fused if it qualifies (see the module docstring); False otherwise."""
    helpers = dict(em.h.used)
    plan = _plan(em, loop)
    if plan is None:
        em.h.used = helpers  # a plan given up on leaves no helper behind
        return False
    _emit(em, plan, w)
    return True


def _plan(em, loop: ir.Loop) -> _Plan | None:
    body, var = loop.body, loop.var
    if not body or not all(isinstance(s, (ir.Copy, ir.Compute, ir.Append)) for s in body):
        return None
    if var.trips is not None or loop.cores or any(s.op == "vgather" for s in body
                                                  if isinstance(s, ir.Compute)):
        return None  # element e = width·i + lane needs every iteration; a table is no lane
    written = {s.dst.buffer.name for s in body if _internal(s.dst)}
    tensors_read = {v.buffer.name for s in body for v in _reads(s) if not _internal(v)}
    tensors_written = {s.dst.buffer.name for s in body if not _internal(s.dst)}
    inside = {id(s) for s in body}
    if tensors_read & tensors_written or \
            any(em.info.readers.get(b, set()) - inside for b in written):
        return None
    loads = [s for s in body if isinstance(s, ir.Copy) and not _internal(s.src)]
    outs = [s for s in body if not _internal(s.dst)]
    acts = [s for s in body if isinstance(s, ir.Compute) and s.unit == "act"]
    if len(outs) != 1 or not loads or any(not _internal(s.dst) for s in loads) or len(acts) > 1:
        return None  # one Act at most: its (bias, scale) become the loop's invariants
    width, lanes = loads[0].dst.size, loads[0].valid
    if any(s.valid != lanes for s in loads) or outs[0].valid not in (None, lanes):
        return None
    if lanes is not None and (lanes.width != width or _coeff(lanes.start, var) != width):
        return None
    plan = _Plan(loop, width, lanes, out=outs[0],
                 junk_out=lanes is not None and outs[0].valid is None)
    values: dict[str, tuple[ir.View, str]] = {}  # buffer -> (view written, its C local)
    ranges: dict[str, tuple[int, int]] = {}  # buffer -> range of its integer lanes, when known
    taken: set[str] = set()

    def local(buf: ir.Buffer) -> str:
        name, k = em.ptr[key(buf)], 1
        while name in taken:
            k += 1
            name = f"{em.ptr[key(buf)]}_{k}"
        taken.add(name)
        return name

    def lane(v: ir.View) -> str | None:
        got = values.get(v.buffer.name)
        return got[1] if got is not None and got[0] == v else None

    for st in body:
        if st is plan.out:
            x = lane(st.src)
            target = None if x is None else _out_target(em, plan, st)
            if target is None:
                return None
            plan.steps.append(_Step(st, target, A.convert(em.h, x, st.src.dtype, st.dst.dtype),
                                    ""))
            continue
        if not _lane_view(st.dst, width):
            return None
        dt = st.dst.dtype
        if isinstance(st, ir.Copy):
            s = _stream(em, st.src, var, width)
            if s is None or st.src.size != width or len(st.src.shape) > 1:
                return None
            x = A.convert(em.h, f"{s.ptr}[{_index(em, s, em.e)}]", st.src.dtype, dt)
            junk, fast = f"{poison_literal(dt)} /* junk lane: the simulator's poison */", ""
            if dt.kind in "iu" and dt.itemsize <= 4:
                ranges[st.dst.buffer.name] = int_range(dt)
        elif isinstance(st, ir.Compute) and not st.acc:
            srcs = list(st.srcs)
            pair = srcs.pop() if st.unit == "act" and st.op == "rescale_clamp" else None
            xs = [lane(v) for v in srcs]
            if None in xs or (pair is not None and pair.buffer.name in written):
                return None
            decl = Writer()
            x, x_dt = em.lane_value(st, xs + ["<pair>"] * (pair is not None), decl)
            plan.invariants += decl.lines
            x = junk = fast = A.convert(em.h, x, x_dt, dt)
            known = [ranges.get(v.buffer.name) for v in srcs]
            if st.unit == "alu" and x_dt.kind == "i" and None not in known:
                got = A.int_value_range(st.op, known)
                if got is not None and x_dt == dt:
                    ranges[st.dst.buffer.name] = got
            elif pair is not None and x_dt.kind == "i" and known[0] and pair.dtype.kind in "iu":
                got = A.rescale_clamp_fast(em.h, xs[0], known[0], dict(st.attrs),
                                           em.prog.target.arith.rounding)
                if got is not None:
                    fast = A.convert(em.h, got[0], x_dt, dt)
                    plan.fast_checks.append(got[1])
        else:
            return None
        name = local(st.dst.buffer)
        plan.steps.append(_Step(st, name, x, junk, c_type(dt), fast))
        values[st.dst.buffer.name] = (st.dst, name)
    plan.skipped = [b for b in em.prog.buffers if b.name in written]
    return plan


def _stream(em, view: ir.View, var: ir.Var, width: int) -> _Stream | None:
    a: Access = em.acc(view)
    c = _coeff(a.base, var)
    if c is None:
        return None
    if width == 1:
        stride = c
    elif len(a.dims) == 1 and a.dims[0][0] == width and c == width * a.dims[0][1]:
        stride = a.dims[0][1]
    else:
        return None
    return _Stream(a.ptr, a.base - var * c, stride)


def _index(em, s: _Stream, e: str) -> str:
    return join_sum([affine_c(s.base, em.names, em.h), scaled(e, s.stride)])


def _out_target(em, plan: _Plan, st) -> str | None:
    """The lvalue element ``e`` of the output goes to, or None when it has no simple form."""
    var, width = plan.loop.var, plan.width
    if isinstance(st, ir.Copy):
        s = _stream(em, st.dst, var, width)
        return None if s is None or st.dst.size != width else f"{s.ptr}[{_index(em, s, em.e)}]"
    a = em.acc(st.dst)
    if var in st.dst.offset.vars or (st.valid is not None and st.valid.width != width):
        return None
    if len(a.dims) <= 1:  # evenly spaced: position cursor + e
        stride = a.dims[0][1] if a.dims else 1
        pos = f"{em.cursor[st.cursor]} + {em.e}"
        return f"{a.ptr}[{join_sum([affine_c(a.base, em.names, em.h), scaled(pos, stride)])}]"
    return _closed_form(em, plan, st, a)


def _closed_form(em, plan: _Plan, st: ir.Append, a: Access) -> str | None:
    """Position of element ``e`` when the loops since the cursor's reset each append the
    same count ``m``: cursor = m·(row-major index of those loops), and the output's dims
    split into exactly those loop counts followed by ``m``."""
    info = em.info
    resets, appends = info.resets.get(st.cursor, []), info.appends.get(st.cursor, [])
    if len(resets) != 1 or len(appends) != 1:
        return None
    scope = info.loops_of[id(resets[0])]
    outer = tuple(em.loops)
    if any(v.trips is not None for v in outer):
        return None  # the closed form counts every iteration of the loops since the reset
    if outer[:len(scope)] != scope or info.order[id(resets[0])] > info.order[id(plan.loop)]:
        return None
    since = [v for v in outer[len(scope):] if v.count > 1]
    if any(v in st.dst.offset.vars for v in since):
        return None
    full = plan.loop.var.count * plan.width
    m = full if plan.lanes is None or plan.junk_out else _static_live(plan)
    if m is None or m == 0:
        return None
    strides = _split(a.dims, [v.count for v in since] + [m])
    if strides is None:
        return None
    terms = [affine_c(a.base, em.names, em.h)]
    terms += [scaled(em.names.of[v], s) for v, s in zip(since, strides)]
    terms.append(scaled(em.e, strides[-1]))
    return f"{a.ptr}[{join_sum(terms)}]"


def _static_live(plan: _Plan) -> int | None:
    """Elements of the loop that hold data, when that count is a constant."""
    k = plan.lanes.start - plan.loop.var * plan.width
    if k.terms:
        return None
    return int(np.clip(plan.lanes.total - k.const, 0, plan.loop.var.count * plan.width))


def _split(dims, counts: list[int]) -> list[int] | None:
    """Strides for ``counts`` (outermost first) when they split ``dims`` in order, each
    count inside one dim; None otherwise."""
    dims = [list(d) for d in dims]
    out: list[int] = []
    for c in reversed(counts):
        if not dims or dims[-1][0] % c:
            return None
        n, s = dims[-1]
        out.append(s)
        dims[-1] = [n // c, s * c]
        if dims[-1][0] == 1:
            dims.pop()
    return list(reversed(out)) if not dims else None


def _emit(em, plan: _Plan, w: Writer) -> None:
    loop, width, e = plan.loop, plan.width, em.e
    full = loop.var.count * width
    w.banner(f"Loop {loop.var.name}: {loop.var.count} iterations x {width} lanes, fused into "
             f"one loop over elements", loop.label)
    skipped = ", ".join(f"{b.memory} {b.name}" for b in plan.skipped)
    w.comment(f"Each element goes from the tensors through the instructions to "
              f"{plan.out.dst.buffer.name} without the copies into {skipped}: nothing reads "
              f"those buffers after the loop, so skipping the copies cannot change the result.")
    live = str(full)
    with w.block():
        for line in plan.invariants:
            w.line(line.strip())
        if plan.lanes is not None:
            k = plan.lanes.start - loop.var * width
            live = em.live
            count = str(_static_live(plan)) if not k.terms else \
                f"{em.h.use('npk_clamp64')}({affine_c(k * -1 + plan.lanes.total, em.names, em.h)}" \
                f", 0, {full})"
            w.line(f"const int64_t {live} = {count};  /* elements that hold data */")
        end_all = str(full) if plan.junk_out else live
        end_main = live
        cursor = em.cursor.get(plan.out.cursor) if isinstance(plan.out, ir.Append) else None
        if cursor is not None:
            room = f"{plan.out.dst.size} - {cursor}"
            w.line(f"const int64_t {em.n} = {em.h.use('npk_min64')}({end_all}, {room});"
                   f"  /* appended: never past the end */")
            end_main = f"{em.h.use('npk_min64')}({live}, {em.n})" if plan.junk_out else em.n
            end_all = em.n
        if plan.fast_checks:
            with w.block(f"if ({' && '.join(plan.fast_checks)})"):
                w.comment("32-bit lanes: exact for this bias and scale (see "
                          "npk_rescale_fits_int32).")
                _element_loop(w, plan, f"int64_t {e} = 0", f"{e} < {end_main}", fast=True)
            with w.block("else", attach=True):
                _element_loop(w, plan, f"int64_t {e} = 0", f"{e} < {end_main}")
        else:
            _element_loop(w, plan, f"int64_t {e} = 0", f"{e} < {end_main}")
        if plan.junk_out:
            w.comment("Lanes past the data: the IR stores them too, computed from the poison "
                      "the simulator leaves in junk lanes.")
            _element_loop(w, plan, f"int64_t {e} = {end_main}", f"{e} < {end_all}", junk=True)
        if cursor is not None:
            w.line(f"{cursor} += {em.n};")


def _element_loop(w: Writer, plan: _Plan, init: str, cond: str, junk: bool = False,
                  fast: bool = False) -> None:
    e = init.split()[1]
    with w.block(f"for ({init}; {cond}; {e}++)"):
        for s in plan.steps:
            value = s.junk if junk and s.junk else s.fast if fast and s.fast else s.expr
            if s.stmt.label:
                w.comment(s.stmt.label)
            if s.ctype:
                w.line(f"const {s.ctype} {s.target} = {value};")
            else:
                w.line(f"{s.target} = {value};")
