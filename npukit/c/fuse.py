"""Streaming loops without the copies into internal memories.

An innermost loop whose body loads vectors of tensors into internal buffers, runs lane-wise
instructions on them and stores or appends the result — the shape of every elementwise
kernel — computes each element independently of the others. When nothing reads those
internal buffers after the loop, the copies into them cannot change the result, so the
loop and its lanes run as one C loop over elements, ``e = width·i + lane``, reading and
writing the parameter pointers directly; gcc vectorises it, and the host's threads share
the elements (``npukit.c.threads``: each element is computed on its own, so the result does
not depend on how many threads there are). Lanes past the data (junk, to the simulator) are
computed from the poison value wherever the IR stores them.

A loop is fused only when all of this holds; otherwise the literal reading is emitted:

- its body holds loads (tensor -> internal), ALU instructions without accumulation, at most
  one Act instruction (``rescale_clamp``, ``clamp`` or a LUT instruction reading a constant
  table) and one store or append (internal -> tensor), possibly inside loops over
  sub-vectors (``for av in s.iterate(p.dim(PData.Vectors))``: sub-vector ``v`` of width
  ``w`` is lanes ``w·v .. w·v + w - 1`` of the whole vector, so the loop reads as its
  statements on the whole vector);
- each instruction reads lanes written earlier in the same iteration through the same view,
  except an Act's (bias, scale) pair, which no statement of the body writes;
- no tensor is both read and written in the body, no internal buffer it writes is read
  outside it;
- every tensor access steps ``width`` elements per iteration, one run per vector, and all
  loads keep the same valid lanes, which the output keeps or extends with junk;
- an append lands at ``cursor + e`` on an evenly spaced output, or at a closed-form position
  when each iteration of the loops since the cursor's reset appends the same count.

Lanes are carried in the narrowest C type that holds them exactly: an integer whose range
is known (from its load's dtype, through ALU results and the Act's clamp) in int8, int16 or
int32 (int8 x int8 products in 16-bit lanes), a float16 as its exact value in a float (its
bits are read and rounded with integer arithmetic, which gcc vectorises where it does not
vectorise ``_Float16`` conversions); a store skips the saturation a known range cannot
reach.

A LUT instruction whose only input is one tensor of 8 or 16 bits (float16, bfloat16,
int16, ...) is a function of those bits alone: when the loop has at least as many elements
as there are bit patterns, the whole chain is computed once per process for every pattern
into a table (``npk_tab<k>``, by the same C code), and each element is one read of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .. import ir
from ..arith import act_bounds
from ..dtypes import int_range
from ..layout import Layout
from . import arith as A
from .access import Access, affine_c, coalesced, join_sum, key, scaled
from .code import Writer
from .ctype import c_type, poison_literal


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
    store: str = "{target} = {value};"  # how an output step writes its value


@dataclass
class _Table:
    """A chain of one 8- or 16-bit input tabulated over every bit pattern (module doc)."""

    name: str  # the static array, npk_tab<k>
    bits: int
    ctype: str  # its element type
    key: str  # the bits of input element e, as an index
    load: str  # the load step's value for bit pattern {k}
    value: str  # the output's value as a table element
    store: str  # the output step with value npk_tab[key]
    gather: str = ""  # reads sixteen entries at once (AVX-512), when input and output are dense
    key_at: str = ""  # with gather: the address of input element e
    pad: int = 0  # entries past the last: a gather reads 4 bytes at each entry


@dataclass
class _Plan:
    loop: ir.Loop
    width: int
    lanes: ir.Lanes | None
    steps: list[_Step] = field(default_factory=list)
    skipped: list[ir.Buffer] = field(default_factory=list)
    invariants: list[str] = field(default_factory=list)  # C declarations before the loop
    read: list[ir.Buffer] = field(default_factory=list)  # internal buffers the invariants read
    out: object = None  # the store or append
    junk_out: bool = False  # the output also writes lanes past the data
    fast_checks: list[str] = field(default_factory=list)  # when all hold, 32-bit lanes are exact
    table: _Table | None = None


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
        return st.reads()
    return []


def _internal(v: ir.View) -> bool:
    return v.buffer.role == "internal"


def _lane_view(v: ir.View, width: int) -> bool:
    """An internal view whose lane ``l`` is element ``l`` of one fixed run."""
    return _internal(v) and not v.offset.terms and v.size == width and \
        coalesced(v.layout) in (((width, 1),), ()) and len(v.shape) <= 1


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
    var = loop.var
    if var.trips is not None or loop.cores:
        return None  # element e = width·i + lane needs every iteration
    body = _flat_body(loop.body)
    if not body or not all(isinstance(s, (ir.Copy, ir.Compute, ir.Append)) for s in body):
        return None
    if any(s.op in ("vgather", "vscatter") for s in body if isinstance(s, ir.Compute)):
        return None  # a table indexed by lanes is no lane
    written = {s.dst.buffer.name for s in body if _internal(s.dst)}
    tensors_read = {v.buffer.name for s in body for v in _reads(s) if not _internal(v)}
    tensors_written = {s.dst.buffer.name for s in body if not _internal(s.dst)}
    inside = {id(s) for s in _statements(loop.body)}  # as the IR has them
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
            value, how = _stored(em, x, st.src.dtype, st.dst.dtype, ranges.get(st.src.buffer.name))
            plan.steps.append(_Step(st, target, value, "", store=how))
            continue
        if not _lane_view(st.dst, width):
            return None
        dt = st.dst.dtype
        ctype = _lane_type(dt)
        if isinstance(st, ir.Copy):
            s = _stream(em, st.src, var, width)
            if s is None or st.src.size != width or len(st.src.shape) > 1:
                return None
            x = _lane_convert(em, _read(em, s.ptr, _index(em, s, em.e), st.src.dtype),
                              st.src.dtype, dt)
            junk, fast = f"{poison_literal(dt)} /* junk lane: the simulator's poison */", ""
            if dt.kind in "iu" and dt.itemsize <= 4:
                ranges[st.dst.buffer.name] = int_range(dt)
        elif isinstance(st, ir.Compute) and not st.acc and "records" not in dict(st.attrs):
            srcs = list(st.srcs)  # (per-item bias records index by lane: not hoisted here)
            pair = srcs.pop() if st.unit == "act" and st.op == "rescale_clamp" else None
            table = srcs.pop() if st.unit == "act" and st.op in _LUT_OPS else None
            if table is not None and table.buffer.role != "const":
                return None
            xs = [lane(v) for v in srcs]
            if None in xs or (pair is not None and pair.buffer.name in written):
                return None
            if pair is not None and pair.buffer not in plan.read:
                plan.read.append(pair.buffer)
            decl = Writer()
            x, x_dt = em.lane_value(st, xs + ["<pair>"] * (pair is not None)
                                    + ["<table>"] * (table is not None), decl)
            plan.invariants += decl.lines
            x = junk = fast = _lane_convert(em, x, x_dt, dt)
            known = [ranges.get(v.buffer.name) for v in srcs]
            got = None
            if st.unit == "alu" and x_dt.kind == "i" and None not in known:
                got = A.int_value_range(st.op, known)
                got = got if x_dt == dt else None
                exact = None if got is None else _exact_alu(st.op, xs, got)
                if exact is not None:
                    x = junk = fast = exact  # no wrap-around to spell out: narrow lanes
            elif st.unit == "act" and st.op in ("rescale_clamp", "clamp") and x_dt == dt and \
                    x_dt.kind == "i" and dict(st.attrs).get("mode") != "F2I":  # float bounds
                lo, hi = act_bounds(st.attr("lo"), st.attr("hi"))
                got = (min(lo, hi), hi)  # lo > hi: every lane ends at hi (lo, then hi)
            if pair is not None and x_dt.kind == "i" and known[0] and pair.dtype.kind in "iu":
                quick = A.rescale_clamp_fast(em.h, xs[0], known[0], dict(st.attrs),
                                             em.prog.target.arith.rounding)
                if quick is not None:
                    fast = A.convert(em.h, quick[0], x_dt, dt)
                    plan.fast_checks.append(quick[1])
            if got is not None:
                ranges[st.dst.buffer.name] = got
                ctype = _narrow(got)
        else:
            return None
        name = local(st.dst.buffer)
        plan.steps.append(_Step(st, name, x, junk, ctype, fast))
        values[st.dst.buffer.name] = (st.dst, name)
    plan.skipped = [b for b in em.prog.buffers if b.name in written]
    plan.table = _tabulate(em, plan, loads, acts)
    return plan


_LUT_OPS = ("lookup", "linear_approx")


def _statements(body):
    for st in body:
        yield st
        for body in ir.bodies(st):
            yield from _statements(body)
_F16 = np.dtype("float16")
_F32 = np.dtype("float32")


def _flat_body(body) -> tuple | None:
    """``body`` with each loop over sub-vectors (of a vector written earlier in ``body``)
    replaced by its statements on the whole vector; None when a loop is not of that form."""
    out, whole = [], {}  # whole: buffer name -> the view of it written earlier in body
    for st in body:
        if not isinstance(st, ir.Loop):
            out.append(st)
            if isinstance(st, (ir.Copy, ir.Compute)) and _internal(st.dst):
                whole[st.dst.buffer.name] = st.dst
            continue
        flat = _widen(st, whole)
        if flat is None:
            return None
        out += flat
    return tuple(out)


def _widen(loop: ir.Loop, whole: dict) -> list | None:
    """The statements of a loop over sub-vectors ``v`` of width ``w`` on the whole vectors:
    a view at ``w·v`` into a vector written before the loop is that vector; a vector the loop
    writes (at a fixed place) grows to the whole width; an output's valid lanes and position
    ``w·v`` later widen likewise. None when the loop is of another form."""
    v, m = loop.var, loop.var.count
    if v.trips is not None or loop.cores or loop.parallel:
        return None
    own: dict[str, int] = {}  # buffers the loop writes -> their sub-vector width
    out = []

    def src(x: ir.View) -> ir.View | None:
        if not _internal(x):
            return None if v in x.offset.vars else x  # a constant table
        if x.buffer.name in own:
            return _grown(x, m) if v not in x.offset.vars else None
        w = x.size
        full = whole.get(x.buffer.name)
        if full is None or _coeff(x.offset, v) != w or full.size != m * w or \
                coalesced(full.layout) not in (((m * w, 1),), ()) or \
                coalesced(x.layout) not in (((w, 1),), ()) or \
                x.offset - v * w + x.layout.offset != full.offset + full.layout.offset:
            return x if v not in x.offset.vars else None  # a pair read whole, or refused
        return full

    for st in loop.body:
        if isinstance(st, ir.Compute) and not st.acc and _internal(st.dst):
            srcs = [src(x) for x in st.srcs]
            if None in srcs or v in st.dst.offset.vars:
                return None
            own[st.dst.buffer.name] = st.dst.size
            out.append(replace(st, srcs=tuple(srcs), dst=_grown(st.dst, m)))
        elif isinstance(st, (ir.Append, ir.Copy)) and not _internal(st.dst):
            got = src(st.src)
            valid = st.valid
            if got is None or st.src.buffer.name not in own:
                return None
            if valid is not None:
                w = valid.width
                if _coeff(valid.start, v) != w:
                    return None
                valid = ir.Lanes(valid.total, valid.start - v * w, m * w)
            dst = st.dst if isinstance(st, ir.Append) else _grown_output(st.dst, v, m)
            if dst is None or (isinstance(st, ir.Append) and v in st.dst.offset.vars):
                return None
            out.append(replace(st, src=got, dst=dst, valid=valid))
        else:
            return None
    return out


def _grown(x: ir.View, m: int) -> ir.View:
    """A lane view ``m`` times as wide, at the same place (the fused loop only names it)."""
    return ir.View(x.buffer, Layout((m * x.size,), x.dtype, None, x.layout.offset), x.offset)


def _grown_output(x: ir.View, v: ir.Var, m: int) -> ir.View | None:
    """A tensor view ``ptr[base + c·v + s·k]``, k < w, with ``c = w·s``: the view of all ``m``
    sub-vectors, ``ptr[base + s·k]``, k < m·w."""
    dims = coalesced(x.layout)
    w, s = (dims[0] if dims else (x.size, 1))
    if len(dims) > 1 or _coeff(x.offset, v) != w * s:
        return None
    return ir.View(x.buffer, Layout((m * w,), x.dtype, (s,), x.layout.offset),
                   x.offset - v * (w * s))


def _lane_type(dt: np.dtype) -> str:
    """The C type of a lane of ``dt``: a float16 lane is its exact value in a float."""
    return "float" if dt == _F16 else c_type(dt)


def _read(em, ptr: str, idx: str, dt: np.dtype) -> str:
    """Element ``ptr[idx]`` of a tensor, a float16 read as its bits (a float)."""
    if dt == _F16:
        return f"{em.h.use('npk_f16_load')}(&{ptr}[{idx}])"
    return f"{ptr}[{idx}]"


def _lane_convert(em, x: str, src: np.dtype, dst: np.dtype) -> str:
    """``arith.convert`` on lanes: float32 to float16 rounds with integer arithmetic."""
    if dst == _F16 and src == _F32:
        return f"{em.h.use('npk_f16_round')}({x})"
    return A.convert(em.h, x, src, dst)


def _stored(em, x: str, src: np.dtype, dst: np.dtype, known) -> tuple[str, str]:
    """(value, statement format) of lane ``x`` stored into a ``dst`` tensor element: a
    float16 element is written as bits; an integer whose known range fits ``dst`` needs no
    saturation."""
    if dst == _F16 and src in (_F16, _F32):
        return x, f"{em.h.use('npk_f16_store')}(&{{target}}, {{value}});"
    if known is not None and dst.kind in "iu" and \
            int_range(dst)[0] <= known[0] and known[1] <= int_range(dst)[1]:
        return f"({c_type(dst)})({x})", "{target} = {value};"
    return A.convert(em.h, x, src, dst), "{target} = {value};"


def _exact_alu(op: str, xs: list[str], got: tuple[int, int]) -> str | None:
    """An integer ALU lane whose result range ``got`` is known: the exact C expression in
    the narrowest type holding it (no wrap-around can happen)."""
    t = c_type(np.dtype(_narrow_dtype(got)))
    a = [f"(int32_t){x}" for x in xs]
    if op == "pass":
        return f"({t})({a[0]})"
    if op in ("mul", "add", "sub"):
        return f"({t})({a[0]} {A._SYMBOL[op]} {a[1]})"
    return None  # max and min stay as they are


def _narrow_dtype(r: tuple[int, int]) -> str:
    for name in ("int8", "uint8", "int16", "uint16"):
        lo, hi = int_range(np.dtype(name))
        if lo <= r[0] and r[1] <= hi:
            return name
    return "int32"


def _narrow(r: tuple[int, int]) -> str:
    """The C type of the narrowest integer lane holding range ``r``."""
    return c_type(np.dtype(_narrow_dtype(r)))


def _tabulate(em, plan: _Plan, loads: list, acts: list) -> _Table | None:
    """The table of a LUT chain on one 8- or 16-bit input (module doc), or None."""
    if len(loads) != 1 or not acts or acts[0].op not in _LUT_OPS or plan.invariants:
        return None
    src, out = loads[0].src.dtype, plan.out
    bits = 8 * src.itemsize
    elements = plan.loop.var.count * plan.width  # at most, per run of the loop
    if plan.lanes is not None:
        elements = min(elements, plan.lanes.total)
    if bits > 16 or src.kind not in "iuf" and src.name != "bfloat16" or \
            elements < 2 ** bits or out.dst.dtype.kind == "c":
        return None
    name = em.h.fresh("npk_tab")
    unsigned = f"uint{bits}_t"
    pattern = f"({unsigned}){{k}}"  # bit pattern {k}, named when the table is filled
    if src == _F16:
        raw = f"{em.h.use('npk_f16_from_bits')}({pattern})"
        key = f"{em.h.use('npk_f16_load_bits')}(&{{ptr}}[{{idx}}])"
    else:
        raw = pattern if src.kind == "u" or src.name == "bfloat16" else \
            f"({c_type(src)}){pattern}"
        key = f"({unsigned}){{ptr}}[{{idx}}]"
    s = _stream(em, loads[0].src, plan.loop.var, plan.width)
    key = key.format(ptr=s.ptr, idx=_index(em, s, em.e))
    load = A.convert(em.h, raw, src, loads[0].dst.dtype)
    last = plan.steps[-1]
    dst = out.dst.dtype
    if dst == _F16:
        ctype = "uint16_t"
        value = f"{em.h.use('npk_f16_to_bits')}({last.expr})"
        store = f"{em.h.use('npk_f16_store_bits')}(&{{target}}, {{value}});"
    else:
        ctype, value, store = c_type(dst), last.expr, "{target} = {value};"
    table = _Table(name, bits, ctype, key, load, value, store)
    if s.stride == 1 and dst.itemsize in (1, 2, 4) and _out_stride(em, plan, plan.out) == 1:
        table = replace(table, gather=_gather_helper(em.h, bits, dst.itemsize),
                        key_at=f"&{s.ptr}[{_index(em, s, em.e)}]", pad=4 // dst.itemsize - 1)
    return table


def _out_stride(em, plan: _Plan, st) -> int | None:
    """How far apart the output's elements ``e`` and ``e + 1`` land: a store's stream
    stride, an evenly spaced append's dim stride; None otherwise (a closed form)."""
    if isinstance(st, ir.Copy):
        s = _stream(em, st.dst, plan.loop.var, plan.width)
        return None if s is None else s.stride
    a = em.acc(st.dst)
    return None if len(a.dims) > 1 else a.dims[0][1] if a.dims else 1


def _gather_helper(h, key_bits: int, size: int) -> str:
    """The helper reading sixteen table entries of ``size`` bytes at ``key_bits``-bit keys
    with one AVX-512 gather. A 16-bit table (128 KiB) does not fit the first-level cache,
    and scalar code is bound by its loads; the gather reads sixteen at once (the float16
    SiLU on 16M elements: 7.6 ms instead of 8.7 on one thread here). Where gathers are slow
    (CPUs with the Gather Data Sampling microcode mitigation), ``-DNPK_NO_GATHER`` added to
    ``NPUKIT_CFLAGS`` keeps the scalar loop."""
    name = f"npk_gather16_k{key_bits}_e{size}"
    widen = {16: "_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)key))",
             8: "_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)key))"}[key_bits]
    store = {4: "_mm512_storeu_si512(out, v)",
             2: "_mm256_storeu_si256((__m256i *)out, _mm512_cvtepi32_epi16(v))",
             1: "_mm_storeu_si128((__m128i *)out, _mm512_cvtepi32_epi8(v))"}[size]
    low = "" if size == 4 else \
        f",\n   keeping the low {size * 8} bits of each (the table is padded past its end)"
    return h.define(name, f"""\
#if defined(__AVX512F__) && !defined(NPK_NO_GATHER)
#include <immintrin.h>
/* out[i] = table[key[i]] for sixteen {key_bits}-bit keys and {size}-byte entries: one AVX-512
   gather of 32-bit words at byte offsets {size}*key{low}. */
static inline void {name}(const void *key, void *out, const void *table)
{{
    const __m512i k = {widen};
    const __m512i v = _mm512_i32gather_epi32(k, table, {size});
    {store};
}}
#endif""")


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
    stride = _out_stride(em, plan, st)
    if stride is not None:  # evenly spaced: position cursor + e
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


# The fewest elements a thread takes: below this, waking a second thread costs more than
# the elements it would compute (NPUKIT_GRAIN overrides it at run time, see npukit.c.threads).
GRAIN = 1 << 17


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
    threaded = not em.in_task
    with w.block():
        if plan.junk_out or not threaded:
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
        if plan.table is not None:
            _table_init(em, plan)
            w.line(f"npk_once(&{plan.table.name}_once, {plan.table.name}_init);"
                   f"  /* {plan.table.name}: every lane this loop can store */")
        if threaded:
            body = Writer(1)
            for line in plan.invariants:
                body.line(line.strip())
            _main_loops(body, plan, e, "begin", "end")
            # internal memories are locals of the entry function: the task gets the ones
            # its invariants and its streams read (lsram filled before the loop, say)
            steps = _flat_body(loop.body)
            made = {st.dst.buffer.name for st in steps}
            streamed = [st.src.buffer for st in steps if isinstance(st, ir.Copy) and
                        _internal(st.src) and st.src.buffer.name not in made]
            seen = {key(b): b for b in plan.read + streamed}
            extra = [(f"const {c_type(b.dtype)} *", em.ptr[k]) for k, b in seen.items()]
            extra += [("int64_t ", cursor)] if cursor is not None else []
            w.comment("The elements are shared among the host's threads: each is computed on "
                      "its own, so the result does not depend on how they are shared.")
            em.run_task(f"fused loop {loop.var.name}: elements [begin, end) of it, on one "
                        f"thread.", extra, body, end_main, GRAIN, w)
        else:
            _main_loops(w, plan, e, "0", end_main)
        if plan.junk_out:
            w.comment("Lanes past the data: the IR stores them too, computed from the poison "
                      "the simulator leaves in junk lanes.")
            _element_loop(w, plan, e, end_main, end_all, junk=True)
        if cursor is not None:
            w.line(f"{cursor} += {em.n};")


def _table_init(em, plan: _Plan) -> None:
    """The static table of a tabulated loop and the function that fills it: the loop's own
    steps on every bit pattern of its input."""
    t, e = plan.table, em.e
    src = plan.steps[0].stmt.src
    out = Writer()
    out.comment(f"Table of fused loop {plan.loop.var.name}: the value it stores for each of "
                f"the {2 ** t.bits} bit patterns of its input (tensor {src.buffer.name}, "
                f"{src.dtype.name}), computed by the loop's own code, once per process "
                f"({t.name}_init). The loop then reads one entry per element.")
    out.line(f"static {t.ctype} {t.name}[{2 ** t.bits}{f' + {t.pad}' if t.pad else ''}];")
    out.line(f"static npk_once_t {t.name}_once = NPK_ONCE_INIT;")
    out.line()
    out.line(f"static void {t.name}_init(void)")
    with out.block():
        with out.block(f"for (int64_t {e} = 0; {e} < {2 ** t.bits}; {e}++)"):
            for k, s in enumerate(plan.steps[:-1]):
                if s.stmt.label:
                    out.comment(s.stmt.label)
                value = t.load.replace("{k}", e) if k == 0 else s.expr
                out.line(f"const {s.ctype} {s.target} = {value};")
            out.line(f"{t.name}[{e}] = {t.value};")
    em.tasks.append(out.text())


def _main_loops(w: Writer, plan: _Plan, e: str, start: str, end: str) -> None:
    """The loop over elements ``e`` = ``start .. end - 1`` (those that hold data): one read
    of the table when the loop has one (sixteen at a time where the target has AVX-512), in
    32-bit lanes when the run-time checks allow it, else in the exact wide arithmetic."""
    if plan.table is not None:
        t, out = plan.table, plan.steps[-1]
        with w.block():
            w.line(f"int64_t {e} = {start};")
            if t.gather:
                w.line("#if defined(__AVX512F__) && !defined(NPK_NO_GATHER)")
                w.comment("Sixteen elements a step, one gather of table entries: the reads of "
                          "the loop below.")
                with w.block(f"for (; {e} + 16 <= {end}; {e} += 16)"):
                    w.line(f"{t.gather}({t.key_at}, &{out.target}, {t.name});")
                w.line("#endif")
            with w.block(f"for (; {e} < {end}; {e}++)"):
                if out.stmt.label:
                    w.comment(out.stmt.label)
                w.line(t.store.format(target=out.target, value=f"{t.name}[{t.key}]"))
        return
    if plan.fast_checks:
        with w.block(f"if ({' && '.join(plan.fast_checks)})"):
            w.comment("32-bit lanes: exact for this bias and scale (see "
                      "npk_rescale_fits_int32).")
            _element_loop(w, plan, e, start, end, fast=True)
        with w.block("else", attach=True):
            _element_loop(w, plan, e, start, end)
    else:
        _element_loop(w, plan, e, start, end)


def _element_loop(w: Writer, plan: _Plan, e: str, start: str, end: str, junk: bool = False,
                  fast: bool = False) -> None:
    with w.block(f"for (int64_t {e} = {start}; {e} < {end}; {e}++)"):
        for s in plan.steps:
            value = s.junk if junk and s.junk else s.fast if fast and s.fast else s.expr
            if s.stmt.label:
                w.comment(s.stmt.label)
            if s.ctype:
                w.line(f"const {s.ctype} {s.target} = {value};")
            else:
                w.line(s.store.format(target=s.target, value=value))
