"""A Program as one self-contained C99 translation unit.

The entry function takes one pointer per kernel parameter: the address of the tensor's
element [0, ..., 0], laid out as its spec says. Internal memories (IRAM, WRAM, ...) become
local arrays of the buffers the target places there; every statement of the IR becomes a
commented block that reads top to bottom: a data flow is a ``memcpy`` when both sides are
contiguous and a strided loop otherwise, a vector instruction is a loop over its lanes in
the target's exact arithmetic (``npukit.c.arith``), a hardware loop is a C loop.

With ``fuse=True`` an innermost loop that streams tensors through internal buffers runs as
one loop over elements straight from the parameter pointers (``npukit.c.fuse``).

>>> import npukit as nk
>>> from npukit import kernels as K
>>> prog = nk.build(K.mul_vectorized, target="torq", input1=nk.spec((100,), "int8"),
...                 input2=nk.spec((100,), "int8"), bias_scale=nk.spec((2,), "int32"),
...                 output=nk.spec((100,), "int8"), shift=8, out_min=-128, out_max=127)
>>> "void npukit_mul_vectorized(" in c_source(prog)
True
"""

from __future__ import annotations

import re
from contextlib import nullcontext

import numpy as np

from .. import ir
from . import arith as A
from .access import Access, Names, access, affine_c, element, index, injective
from .code import Writer, comment_text, wrap
from .ctype import c_type, is_float, literal, poison_literal
from .fuse import ProgramInfo, fused_loop

# C99 keywords, the standard names the generated code uses, and its own locals.
_RESERVED = frozenset({
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "_Bool", "_Complex", "_Imaginary",
    "memcpy", "memset", "size_t", "NAN", "INFINITY", "INT32_MIN", "INT32_MAX", "INT64_MIN",
    "INT64_C", "UINT64_C", "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t",
    "int64_t", "uint64_t", "bias", "scale",
})


def c_source(prog: ir.Program, *, fuse: bool = True) -> str:
    """The C translation unit of ``prog``; its entry function is ``entry_name(prog)``.
    ``fuse=False`` keeps every copy into internal memories (the literal reading)."""
    return _Emitter(prog, fuse).source()


def entry_name(prog: ir.Program) -> str:
    """``npukit_<kernel name>``: the entry function's name.

    >>> import npukit as nk
    >>> from npukit import kernels as K
    >>> entry_name(nk.build(K.reduce_rows, input=nk.spec((4, 8), "int8"),
    ...                     output=nk.spec((8,), "int8")))
    'npukit_reduce_rows'
    """
    return "npukit_" + re.sub(r"\W", "_", prog.name)


def valid_count(lanes: ir.Lanes, view: ir.View, names: Names, h: A.Helpers) -> str:
    """C expression of how many elements of ``view`` hold data: the first ``valid`` indices
    of its dim 0, each as many elements as one index of dim 0 spans."""
    rows = view.shape[0] if view.shape else 1
    inner = view.size // rows if rows else 0
    left = affine_c(lanes.start * -1 + lanes.total, names, h)
    count = f"{h.use('npk_clamp64')}({left}, 0, {min(lanes.width, rows)})"
    return count if inner == 1 else f"{count} * {inner}"


class _Emitter:
    def __init__(self, prog: ir.Program, fuse: bool):
        self.prog, self.fuse, self.h = prog, fuse, A.Helpers()
        for buf, _ in prog.params:
            c_type(buf.dtype, f"tensor {buf.name!r}")
        for buf in prog.buffers:
            c_type(buf.dtype, f"{buf.memory} buffer {buf.name!r}")
        taken = set(_RESERVED)
        self.ptr: dict[str, str] = {}  # buffer name -> C identifier
        self.origin: dict[str, int] = {}  # buffer element the C identifier points at
        for buf, spec in prog.params:
            self.ptr[buf.name] = _ident(buf.name, taken)
            self.origin[buf.name] = spec.offset
        for buf in prog.buffers:
            self.ptr[buf.name] = _ident(buf.name, taken)
            self.origin[buf.name] = 0
        cursors = dict.fromkeys(st.cursor for st, _ in prog.walk()
                                if isinstance(st, (ir.ResetCursor, ir.Append)))
        self.cursor = {c: _ident(c, taken) for c in cursors}
        self.k, self.n, self.live, self.e, self.tmp = (
            _ident(x, taken) for x in ("k", "n", "live", "e", "tmp"))
        self.names = Names(taken)
        self.info = ProgramInfo(prog) if fuse else None
        self.used: set[str] = set()  # internal buffers the emitted code touches
        self.loops: list[ir.Var] = []

    # -- helpers used by the statement emitters and by fuse.py ---------------------------

    def acc(self, view: ir.View) -> Access:
        if view.buffer.role in ("internal", "const"):
            self.used.add(view.buffer.name)
        return access(view, self.ptr[view.buffer.name], self.origin[view.buffer.name])

    def el(self, a: Access, k: str) -> str:
        return element(a, k, self.names, self.h)

    def at(self, a: Access, k: str = "0") -> str:
        """Address of element ``k``: ``ptr + index``."""
        idx = index(a, k, self.names, self.h)
        return a.ptr if idx == "0" else f"{a.ptr} + {idx}"

    def affine(self, a: ir.Affine) -> str:
        return affine_c(a, self.names, self.h)

    def describe(self, view: ir.View) -> str:
        """``IRAM idata (16 x int8)`` or ``tensor input1``."""
        b = view.buffer
        if b.role == "internal":
            return f"{b.memory} {b.name} ({view.size} x {b.dtype.name})"
        return f"constant {b.name}" if b.role == "const" else f"tensor {b.name}"

    # -- the translation unit ------------------------------------------------------------

    def source(self) -> str:
        body, decls = Writer(1), Writer(1)
        self.block(self.prog.body, body)
        self._declarations(decls)
        helpers, code = self.h.source(), decls.text() + body.text()
        out = Writer()
        out.lines.append(self._header())
        out.line()
        if "NAN" in code + helpers or "INFINITY" in code + helpers:
            out.line("#include <math.h>")
        out.line("#include <stdint.h>")
        if "memcpy(" in code or "memset(" in code:
            out.line("#include <string.h>")
        out.line()
        out.lines.extend(_PORTABILITY.splitlines())
        for dt in dict.fromkeys(b.dtype for b, _ in self.prog.params if b.dtype.itemsize > 1):
            out.line(f"typedef {c_type(dt)} {_elem_type(dt)} NPK_ANY_ADDRESS;")
        if helpers:
            out.line()
            out.lines.extend(helpers.splitlines())
        out.line()
        out.lines.extend(self._signature().splitlines())
        with out.block():
            out.extend(decls)
            out.extend(body)
        return out.text() + "\n"

    def _header(self) -> str:
        p, t = self.prog, self.prog.target
        rows = [(f"Generated by npukit from kernel `{p.name}` for target {t.name} "
                 f"({t.description})."), "",
                f"Entry: void {entry_name(p)}({', '.join(self.ptr[b.name] for b, _ in p.params)})"]
        for buf, spec in p.params:
            access_kind = {"in": "read", "out": "written", "inout": "read and written"}[buf.role]
            rows.append(f"  {self.ptr[buf.name]:<12} {spec.dtype.name}{list(spec.shape)}, strides "
                        f"{spec.strides} elements, {access_kind}")
        rows += ["Each pointer is the address of the tensor's element [0, ..., 0], laid out as",
                 "its spec says. Pointers need no alignment; tensors must not overlap.", "",
                 "Statements run in the order of the kernel, as the simulator reads the IR.",
                 "Internal memories are local arrays that start poisoned (0xA5 bytes, NaN) and",
                 "junk lanes are poisoned, as in the simulator, so even values computed from",
                 "unwritten lanes agree with it. Build with -ffp-contract=off: every float",
                 "operation rounds once (no fused multiply-add), as in npukit.arith."]
        rows = [x for r in rows for x in (wrap(r).splitlines() or [""])]
        if p.source:
            rows += ["", "Kernel source:"] + ["  " + x for x in p.source.rstrip().splitlines()]
        return "/* " + "\n".join((" * " + comment_text(r)).rstrip() for r in rows)[3:] + "\n */"

    def _signature(self) -> str:
        args = []
        for buf, spec in self.prog.params:
            const = "const " if buf.role == "in" else ""
            args.append(f"{const}{_elem_type(buf.dtype)} *restrict {self.ptr[buf.name]}")
        head = f"void {entry_name(self.prog)}("
        return head + (",\n" + " " * len(head)).join(args) + ")"

    def _declarations(self, out: Writer) -> None:
        for b in self.prog.buffers:
            if b.role == "const" and b.name in self.used:
                out.comment(f"Constant {b.name} ({b.size} x {b.dtype.name}), in {b.memory} "
                            f"before the program starts.")
                values = [literal(v, b.dtype) for v in b.values().tolist()]
                out.line(f"static const {c_type(b.dtype)} {self.ptr[b.name]}[{b.size}] = {{")
                for k in range(0, len(values), 12):
                    out.line("    " + ", ".join(values[k:k + 12]) + ",")
                out.line("};")
        used = [b for b in self.prog.buffers if b.name in self.used and b.role == "internal"]
        if used:
            out.comment("Internal memories: one local array per buffer the target places there.")
        for mem in dict.fromkeys(b.memory for b in used):
            bufs = [b for b in used if b.memory == mem]
            size = self.prog.target.memories[mem].size
            parts = ", ".join(f"{b.name} {b.nbytes} B" for b in bufs)
            out.comment(f"{mem}: {size} B on {self.prog.target.name}; holds {parts}")
            for b in bufs:
                out.line(f"{c_type(b.dtype, b.name)} {self.ptr[b.name]}[{b.size}] NPK_ALIGNED;")
        for b in used:
            if is_float(b.dtype):
                with out.block(f"for (int64_t {self.k} = 0; {self.k} < {b.size}; {self.k}++)"):
                    out.line(f"{self.ptr[b.name]}[{self.k}] = {poison_literal(b.dtype)};"
                             f"  /* {_POISON} */")
            else:
                out.line(f"memset({self.ptr[b.name]}, 0xA5, sizeof {self.ptr[b.name]});"
                         f"  /* {_POISON} */")
        for c, name in self.cursor.items():
            out.line(f"int64_t {name} = 0;  /* append cursor {c!r}: elements written so far */")
        out.line()

    # -- statements ----------------------------------------------------------------------

    def block(self, body, w: Writer) -> None:
        for st in body:
            kind = type(st).__name__
            if kind not in _STATEMENTS:
                raise NotImplementedError(f"C back end: no rule for IR statement {kind} "
                                          f"(`{getattr(st, 'label', '')}`)")
            getattr(self, _STATEMENTS[kind])(st, w)

    def loop(self, st: ir.Loop, w: Writer) -> None:
        if self.fuse and fused_loop(self, st, w):
            return
        name = self.names.bind(st.var)
        w.banner(f"Loop {name}: {st.var.count} iterations", st.label)
        with w.block(f"for (int64_t {name} = 0; {name} < {st.var.count}; {name}++)"):
            self.loops.append(st.var)
            self.block(st.body, w)
            self.loops.pop()
        self.names.release(st.var)

    def reset_cursor(self, st: ir.ResetCursor, w: Writer) -> None:
        w.banner(f"Reset append cursor {st.cursor!r}", st.label)
        w.line(f"{self.cursor[st.cursor]} = 0;")

    def copy(self, st: ir.Copy, w: Writer) -> None:
        src, dst = self.acc(st.src), self.acc(st.dst)
        sdt, ddt = st.src.dtype, st.dst.dtype
        kind = {(False, True): "Load", (True, False): "Store"}.get(
            (_internal(st.src), _internal(st.dst)), "Move")
        what = f"{kind} {self.describe(st.src)} -> {self.describe(st.dst)}"
        w.banner(what + (", valid lanes only" if st.valid else ""), st.label)
        same = st.src.buffer.name == st.dst.buffer.name
        k = self.k
        with w.block() if st.valid is not None or same else nullcontext():
            n_src = n_dst = str(st.dst.size)
            if st.valid is not None:
                n_src = valid_count(st.valid, st.src, self.names, self.h)
                n_dst = valid_count(st.valid, st.dst, self.names, self.h)
                w.line(f"const int64_t {self.live} = {n_dst};  /* elements that hold data */")
                n_src = self.live if n_src == n_dst else n_src
                n_dst = self.live
            value = A.convert(self.h, self.el(src, k), sdt, ddt)
            if n_src != n_dst:  # the views split their valid rows differently
                junk = A.convert(self.h, poison_literal(sdt), sdt, ddt)
                value = f"{k} < {n_src} ? {value} : {junk}"
            if same:
                self._via_tmp(w, dst, ddt, n_dst, value, st.dst.size)
            elif sdt == ddt and src.run == 1 and dst.run == 1 and n_src == n_dst:
                count = n_dst if n_dst.isdigit() else f"(size_t){n_dst}"
                w.line(f"memcpy({self.at(dst)}, {self.at(src)}, {count} * sizeof({c_type(ddt)}));")
            else:
                with w.block(f"for (int64_t {k} = 0; {k} < {n_dst}; {k}++)"):
                    w.line(f"{self.el(dst, k)} = {value};")
            if st.valid is not None and _internal(st.dst):
                w.comment("Junk lanes: poisoned, as in the simulator.")
                with w.block(f"for (int64_t {k} = {n_dst}; {k} < {st.dst.size}; {k}++)"):
                    w.line(f"{self.el(dst, k)} = {poison_literal(ddt)};  /* {_POISON} */")

    def _via_tmp(self, w: Writer, dst: Access, dt: np.dtype, count: str, value: str,
                 size: int) -> None:
        """Compute every lane into a local array before writing any to ``dst``."""
        k, tmp = self.k, self.tmp
        w.line(f"{c_type(dt)} {tmp}[{max(size, 1)}];")
        with w.block(f"for (int64_t {k} = 0; {k} < {count}; {k}++)"):
            w.line(f"{tmp}[{k}] = {value};")
        with w.block(f"for (int64_t {k} = 0; {k} < {count}; {k}++)"):
            w.line(f"{self.el(dst, k)} = {tmp}[{k}];")

    def append(self, st: ir.Append, w: Writer) -> None:
        src, dst = self.acc(st.src), self.acc(st.dst)
        cur, k, n = self.cursor[st.cursor], self.k, self.n
        w.banner(f"Append {self.describe(st.src)} -> {self.describe(st.dst)} at cursor "
                 f"{st.cursor!r}", st.label)
        want = str(st.src.size) if st.valid is None else \
            f"{self.h.use('npk_clamp64')}(" \
            f"{self.affine(st.valid.start * -1 + st.valid.total)}, 0, {st.valid.width})"
        with w.block():
            w.line(f"const int64_t {n} = {self.h.use('npk_min64')}({want}, {st.dst.size} - {cur});"
                   "  /* never past the end */")
            with w.block(f"for (int64_t {k} = 0; {k} < {n}; {k}++)"):
                value = A.convert(self.h, self.el(src, k), st.src.dtype, st.dst.dtype)
                w.line(f"{self.el(dst, f'{cur} + {k}')} = {value};")
            w.line(f"{cur} += {n};")

    def fill(self, st: ir.Fill, w: Writer) -> None:
        dst = self.acc(st.dst)
        w.banner(f"Fill {self.describe(st.dst)} with {st.value}", st.label)
        k = self.k
        with w.block(f"for (int64_t {k} = 0; {k} < {st.dst.size}; {k}++)"):
            w.line(f"{self.el(dst, k)} = {literal(st.value, st.dst.dtype)};")

    def compute(self, st: ir.Compute, w: Writer) -> None:
        dst = self.acc(st.dst)
        k = self.k
        title = f"{st.unit.upper() if st.unit == 'alu' else st.unit.capitalize()} {st.op} -> " \
                f"{self.describe(st.dst)}"
        if st.acc:
            title += f", accumulating ({st.attr('combine')})"
        w.banner(title, st.label)
        decls = Writer()
        value, x_dt = self.lane_value(st, [self.el(self.acc(v), k) for v in st.srcs], decls)
        if st.acc:
            value = A.combine_expr(self.h, st.attr("combine"), self.el(dst, k), value, x_dt)
        value = A.convert(self.h, value, x_dt, st.dst.dtype)
        # Every lane is read before any is written when the destination may alias a source.
        tmp = any(v.buffer.name == st.dst.buffer.name for v in st.srcs) or \
            not injective(dst.dims)
        with w.block() if decls.lines or tmp else nullcontext():
            for line in decls.lines:
                w.line(line)
            if tmp:
                self._via_tmp(w, dst, st.dst.dtype, str(st.dst.size), value, st.dst.size)
            else:
                with w.block(f"for (int64_t {k} = 0; {k} < {st.dst.size}; {k}++)"):
                    w.line(f"{self.el(dst, k)} = {value};")

    def lane_value(self, st: ir.Compute, lanes: list[str], w: Writer) -> tuple[str, np.dtype]:
        """One lane of ``st`` from its operand lanes, and the dtype of the result; an Act
        reads its (bias, scale) pair once, into locals declared on ``w``."""
        dts = [v.dtype for v in st.srcs]
        if st.unit == "alu":
            acc_dt = np.dtype("float32") if is_float(st.dst.dtype) else np.dtype("int32")
            return A.alu_expr(self.h, st.op, list(zip(lanes, dts)), st.dst.dtype), acc_dt
        p_dt = dts[0]
        out_dt = np.dtype("float32") if p_dt == np.float32 else np.dtype("int32")
        attrs = dict(st.attrs)
        if st.op == "clamp":
            return A.clamp_expr(self.h, lanes[0], p_dt, attrs), out_dt
        if st.op == "rescale_clamp":
            bs = st.srcs[1]
            if bs.size < 2:
                raise NotImplementedError(f"C back end: `{st.label}` reads (bias, scale) from a "
                                          f"view of {bs.size} element(s)")
            pair = self.acc(bs)
            t = "float" if p_dt == np.float32 else "int64_t"
            w.line(f"const {t} bias = ({t}){self.el(pair, '0')}, "
                   f"scale = ({t}){self.el(pair, '1')};")
            return A.rescale_clamp_expr(self.h, lanes[0], p_dt, "bias", "scale", attrs,
                                        self.prog.target.arith.rounding), out_dt
        raise NotImplementedError(f"C back end: no rule for {st.unit}.{st.op} (`{st.label}`)")


_POISON = "poison, as in the simulator"
_STATEMENTS = {"Loop": "loop", "Copy": "copy", "Append": "append", "ResetCursor": "reset_cursor",
               "Fill": "fill", "Compute": "compute"}

_PORTABILITY = """\
/* Tensor elements may sit at any address (numpy arrays need not be aligned); internal
   arrays are aligned for vector loads. */
#if defined(__GNUC__)
#define NPK_ALIGNED __attribute__((aligned(64)))
#define NPK_ANY_ADDRESS __attribute__((aligned(1)))
#else
#define NPK_ALIGNED
#define NPK_ANY_ADDRESS
#endif"""


def _internal(v: ir.View) -> bool:
    return v.buffer.role == "internal"


def _elem_type(dt: np.dtype) -> str:
    return c_type(dt) if dt.itemsize == 1 else f"npk_{dt.name}_any"


def _ident(name: str, taken: set[str]) -> str:
    """A C identifier for ``name``, distinct from every name in ``taken`` (then taken)."""
    base = re.sub(r"\W", "_", name)
    if not base or base[0].isdigit() or base.startswith("npk_"):
        base = "t_" + base
    out, k = base, 1
    while out in taken:
        k += 1
        out = f"{base}_{k}"
    taken.add(out)
    return out
