"""A Program as one self-contained C99 translation unit.

The entry function takes one pointer per kernel parameter: the address of the tensor's
element [0, ..., 0], laid out as its spec says. Internal memories (IRAM, WRAM, ...) become
local arrays of the buffers the target places there; every statement of the IR becomes a
commented block that reads top to bottom: a data flow is a ``memcpy`` when both sides are
contiguous and a strided loop otherwise, a vector instruction is a loop over its lanes in
the target's exact arithmetic (``npukit.c.arith``), a hardware loop is a C loop.

With ``fuse=True`` an innermost loop that streams tensors through internal buffers runs as
one loop over elements straight from the parameter pointers (``npukit.c.fuse``). The LUT
instructions are helper functions reading their table's ``static const`` image
(``npukit.c.lut``); calls of basic kernels carry the kernels' own C and run parallel ones on
each core in turn (``npukit.c.calls``), and so does a core loop (the Compass DSL's cores).
A loop whose trip count is known at run time only counts to it. A parallel loop
(``ir.Loop(parallel=True)``) that calls basic kernels on tensors becomes a task function
whose iteration range the host's threads share (``npukit.c.threads``).

>>> import npukit as nk
>>> from npukit import kernels as K
>>> prog = nk.build(K.mul_vectorized, target="torq", input1=nk.spec((100,), "int8"),
...                 input2=nk.spec((100,), "int8"), bias_scale=nk.spec((2,), "int32"),
...                 output=nk.spec((100,), "int8"), shift=8, out_min=-128, out_max=127)
>>> "void npukit_mul_vectorized(" in c_source(prog)
True
"""

from __future__ import annotations

import functools
import re
from contextlib import nullcontext

import numpy as np

from .. import ir
from ..cdecl import C_KEYWORDS, comment_text
from ..dtypes import is_float
from . import arith as A
from . import pieces, preamble
from .access import (
    Access,
    Names,
    access,
    affine_c,
    element,
    index,
    injective,
    key,
    safe_name,
)
from .calls import PRELUDE_NAMES, ArgStruct, defined_names, emit_call, extern_sources, prelude
from .code import Writer, wrap
from .copies import (
    POISON,
    emit_copy,
    lanes_c,
    read_only_copies,
    written_whole_first,
)
from .ctype import TYPEDEFS, c_type, literal, poison_literal
from .fuse import ProgramInfo, fused_loop
from .indexed import emit_scatter, gather_lane
from .lut import lut_lane
from .threads import FEATURE_MACRO
from .threads import SOURCE as THREADS_SOURCE

# C keywords, the standard names the generated code uses, and its own locals.
_RESERVED = C_KEYWORDS | frozenset({
    "memcpy", "memset", "size_t", "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t",
    "uint32_t", "int64_t", "uint64_t", "bias", "scale",
    "arg", "ctx", "begin", "end",  # the locals of task functions (npukit.c.threads)
})


def c_source(prog: ir.Program, *, fuse: bool = True) -> str:
    """The C translation unit of ``prog``; its entry function is ``entry_name(prog)``.
    ``fuse=False`` keeps every copy into internal memories (the literal reading)."""
    return _Emitter(prog, fuse).source()


def c_unit(progs: list[ir.Program], entries: list[str], *, header: str, tail: str = "",
           includes: tuple[str, ...] = (), fuse: bool = True) -> str:
    """Several programs as one translation unit: one function per program, named
    ``entries[k]`` (each after its program's header comment), sharing the helpers, types and
    basic kernels they use; ``header`` (a comment) first, ``includes`` added to the standard
    headers, ``tail`` (more C) last. Programs must not define constants of one name."""
    helpers = A.Helpers()
    ems = [_Emitter(p, fuse, helpers, e) for p, e in zip(progs, entries)]
    return _unit(ems, header, tail, includes)


def piece_unit(progs: list[ir.Program], entries: list[str], fuse: bool = True,
               poison: bool = True) -> tuple[str, list[str], list[list[str]]]:
    """Programs as one piece of C compiled in pieces (``npukit.c.pieces``): (the unit, the
    prototype of each entry function, each program's basic-kernel sources). The unit
    declares the kernels and the threads runtime that other pieces define (poisoning none
    of its internal memories or junk rows when ``poison`` is False: the same output bytes)."""
    helpers = A.Helpers()
    ems = [_Emitter(p, fuse, helpers, e, poison) for p, e in zip(progs, entries)]
    header = ems[0]._header() if len(ems) == 1 else \
        f"/* Functions {', '.join(entries)}: a piece of a program compiled in pieces. */"
    return (_unit(ems, header, shared=True), [em._signature() + ";" for em in ems],
            [em.sources for em in ems])


def _unit(ems: list[_Emitter], header: str, tail: str = "",
          includes: tuple[str, ...] = (), shared: bool = False) -> str:
    funcs = [em.function() for em in ems]
    consts = "\n\n".join(c for c in (em._constants() for em in ems) if c)
    helpers = ems[0].h.source()
    tasks = [x for em in ems for x in em.tasks]
    code = "\n".join([consts, helpers, *tasks, *funcs, tail])
    sources = list(dict.fromkeys(x for em in ems for x in em.sources))
    kernels = "\n\n".join(sources)
    out = Writer()
    out.lines.append(header)
    out.line()
    if tasks and not shared:
        out.lines.extend(FEATURE_MACRO.splitlines())
    if re.search(r"\b(NAN|INFINITY|rintf?|fabsf|floorf)\b|"
                 r"\b(exp2?|log|tanh|sin|cos|sqrt|erf|floor|ceil)\(", code):
        out.line("#include <math.h>")
    out.line("#include <stdint.h>")
    for inc in includes:
        out.line(f"#include <{inc}>")
    if ("memcpy(" in code or "memset(" in code) and "string.h" not in includes:
        out.line("#include <string.h>")
    out.line()
    out.lines.extend(preamble.PORTABILITY.splitlines())
    dtypes = dict.fromkeys(b.dtype for em in ems for b, _ in em.prog.params if b.dtype.itemsize > 1)
    anys = [f"typedef {c_type(dt)} {_elem_type(dt)} NPK_ANY_ADDRESS;" for dt in dtypes]
    named = _typedefs_named(kernels)
    for name, text in TYPEDEFS.items():
        if name in named or re.search(rf"\b{name}\b", "\n".join([code, *anys])):
            out.line()
            out.lines.extend(text.splitlines())
    out.lines.extend(anys)
    for part in (consts, helpers):
        if part:
            out.line()
            out.lines.extend(part.splitlines())
    if sources:
        out.line()
        out.lines.extend(preamble.HIDDEN[0].splitlines())
        out.line()
        text = prelude(ems[0].prog.target.cores)
        out.lines.extend((pieces.shared_prelude(text) if shared else text).splitlines())
        for text in sources:
            out.line()
            out.comment("Basic kernel source, as given (c_source=)." if not shared else
                        "Basic kernel source, its interface: its functions declared "
                        "(defined in a piece of their own), its static ones left out.")
            out.lines.extend((pieces.interface_only(text) if shared else text).splitlines())
        out.line()
        out.lines.extend(preamble.HIDDEN[1].splitlines())
    if tasks:
        out.line()
        out.lines.extend((pieces.THREADS_DECLARATIONS if shared else THREADS_SOURCE)
                         .splitlines())
        for text in tasks:
            out.line()
            out.lines.extend(text.splitlines())
    for em, func in zip(ems, funcs):
        out.line()
        if len(ems) > 1:
            out.lines.append(em._header())
        out.lines.extend(func.splitlines())
    if tail:
        out.line()
        out.lines.extend(tail.splitlines())
    return out.text() + "\n"


@functools.lru_cache(maxsize=64)
def _typedefs_named(kernels: str) -> frozenset[str]:
    """The names of ``TYPEDEFS`` the basic kernels' C uses (looked for once per text)."""
    return frozenset(n for n in TYPEDEFS if re.search(rf"\b{n}\b", kernels))


def param_type(dt: np.dtype) -> str:
    """The element type an entry function's pointer parameters of ``dt`` have."""
    return _elem_type(np.dtype(dt))


def entry_name(prog: ir.Program) -> str:
    """``npukit_<kernel name>``: the entry function's name.

    >>> import npukit as nk
    >>> from npukit import kernels as K
    >>> entry_name(nk.build(K.reduce_rows, input=nk.spec((4, 8), "int8"),
    ...                     output=nk.spec((8,), "int8")))
    'npukit_reduce_rows'
    """
    return "npukit_" + re.sub(r"[^A-Za-z0-9_]", "_", prog.name)


def c_header(prog: ir.Program) -> str:
    """A C header declaring the entry function of ``c_source(prog)``, each parameter with its
    dtype, shape, strides and direction; include it where the entry function is called.

    >>> import npukit as nk
    >>> from npukit import kernels as K
    >>> h = c_header(nk.build(K.reduce_rows, input=nk.spec((4, 8), "int8"),
    ...                       output=nk.spec((8,), "int8")))
    >>> print(h[h.index("void"):h.index("\\n\\n#endif")])
    void npukit_reduce_rows(
        const int8_t *restrict input,  /* int8[4, 8], strides (8, 1) elements: read */
        int8_t *restrict output);      /* int8[8], strides (1,) elements: written */
    """
    return _Emitter(prog, fuse=False).header()


class _Emitter:
    def __init__(self, prog: ir.Program, fuse: bool, helpers: A.Helpers | None = None,
                 entry: str | None = None, poison: bool = True):
        self.prog, self.fuse, self.h, self.poisons = prog, fuse, helpers or A.Helpers(), poison
        self.entry = entry or entry_name(prog)
        for buf, _ in prog.params:
            c_type(buf.dtype, f"tensor {buf.name!r}")
        for buf in prog.buffers:
            c_type(buf.dtype, f"{buf.memory} buffer {buf.name!r}")
        self.sources = extern_sources(prog)  # basic kernels' C, checked
        taken = set(_RESERVED)
        if self.sources:  # names the basic kernels define: never shadowed
            taken |= PRELUDE_NAMES.union(*(defined_names(x) for x in self.sources))
        # A parameter and an internal buffer may share a name (the AutoTiler's L1 copy of
        # tensor In1 is also In1): both maps are keyed by ``key(buffer)``.
        self.ptr: dict[tuple[str, bool], str] = {}  # buffer -> C identifier
        self.origin: dict[tuple[str, bool], int] = {}  # element the identifier points at
        for buf, spec in prog.params:
            self.ptr[key(buf)] = _ident(buf.name, taken)
            self.origin[key(buf)] = spec.offset
        # (C pointer type, name) of every tensor, the fields a task may take; by name, its
        # place among them
        self.tensor_fields = [(f"{'const ' if b.role == 'in' else ''}{_elem_type(b.dtype)} *",
                               self.ptr[key(b)]) for b, _ in prog.params]
        self.tensor_at = {f: i for i, (_, f) in enumerate(self.tensor_fields)}
        for buf in prog.buffers:
            # Buffers the front end placed (AutoTiler L1/L2 slots) are named by memory.
            placed = buf.slot_len or buf.address is not None
            self.ptr[key(buf)] = _ident(f"{buf.memory}_{buf.name}" if placed else buf.name,
                                        taken)
            self.origin[key(buf)] = 0
        # Internal buffers read in place of the tensor they copy: buffer name -> (the copies,
        # the name of the local array used when the tensor's block is not aligned)
        self.in_place = {name: (sts, _ident(f"{self.ptr[key(sts[0].dst.buffer)]}_mem", taken))
                         for name, sts in read_only_copies(prog).items()}
        # (C pointer type, name) of the internal memories: locals a parallel call's task
        # may read
        self.internal_fields = [(f"{c_type(b.dtype)} *", self.ptr[key(b)])
                                for b in prog.buffers if b.role == "internal"]
        self.internal_at = {f: i for i, (_, f) in enumerate(self.internal_fields)}
        cursors = dict.fromkeys(st.cursor for st, _ in prog.walk()
                                if isinstance(st, (ir.ResetCursor, ir.Append)))
        self.cursor = {c: _ident(c, taken) for c in cursors}
        self.k, self.n, self.live, self.e, self.tmp = (
            _ident(x, taken) for x in ("k", "n", "live", "e", "tmp"))
        self.names = Names(taken)
        self.taken = self.names.taken  # loop variables and later names share one set
        self.info = ProgramInfo(prog) if fuse else None
        self.used: set[str] = set()  # internal buffers the emitted code touches
        self.loops: list[ir.Var] = []
        self.structs: list[ArgStruct] = []  # argument structs of parallel basic kernels
        self.lut_names: dict[tuple, str] = {}  # LUT instruction -> its helper's name
        self.tasks: list[str] = []  # task functions and tables' code, in emission order
        self.splits = False  # a task may run on several threads: the call wakes the workers
        self.in_task = False  # emitting the body of a parallel loop
        # loop variables of the copies made run by run (copies.py), one per dim
        ranks = [len(st.dst.shape) for st, _ in prog.walk() if isinstance(st, ir.Copy)]
        self.dim_names = [_ident(f"{self.k}{d}", self.taken) for d in range(max(ranks, default=0))]

    # -- helpers used by the statement emitters and by fuse.py ---------------------------

    def acc(self, view: ir.View) -> Access:
        if view.buffer.role in ("internal", "const"):
            self.used.add(view.buffer.name)
        ptr = self.ptr[key(view.buffer)]
        if view.cast and view.dtype != view.buffer.dtype:   # Torq's setElementType: same bytes
            ptr = f"(({c_type(view.dtype)} *){ptr})"
        return access(view, ptr, self.origin[key(view.buffer)])

    def el(self, a: Access, k: str) -> str:
        return element(a, k, self.names, self.h)

    def at(self, a: Access, k: str = "0") -> str:
        """Address of element ``k``: ``ptr + index``."""
        idx = index(a, k, self.names, self.h)
        return a.ptr if idx == "0" else f"{a.ptr} + {idx}"

    def start(self, a: Access) -> str:
        """Address of the lowest element of a view whose strides are not negative."""
        base = self.affine(a.base)
        return a.ptr if base == "0" else f"{a.ptr} + {base}"

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
        return _unit([self], self._header())

    def function(self) -> str:
        """The entry function: its signature, internal memories and statements."""
        body, decls = Writer(1), Writer(1)
        self.block(self.prog.body, body)
        self._declarations(decls)
        out = Writer()
        out.lines.extend(self._signature().splitlines())
        with out.block():
            if self.tasks:
                out.line(f"npk_read_env({int(self.splits)});  /* NPUKIT_THREADS, NPUKIT_GRAIN: "
                         f"for this call{'; the workers woken for its loops' * self.splits} */")
            out.extend(decls)
            out.extend(body)
        return out.text()

    def _header(self) -> str:
        p, t = self.prog, self.prog.target
        rows = [(f"Generated by npukit from kernel `{p.name}` for target {t.name} "
                 f"({t.description})."), "",
                f"Entry: void {self.entry}({', '.join(self.ptr[key(b)] for b, _ in p.params)})"]
        for buf, spec in p.params:
            access_kind = {"in": "read", "out": "written", "inout": "read and written"}[buf.role]
            rows.append(f"  {self.ptr[key(buf)]:<12} {spec.dtype.name}{list(spec.shape)}, strides "
                        f"{spec.strides} elements, {access_kind}")
        rows += ["Each pointer is the address of the tensor's element [0, ..., 0], laid out as",
                 "its spec says. Pointers need no alignment; tensors must not overlap.", "",
                 "Statements run in the order of the kernel, as the simulator reads the IR.",
                 "Internal memories are local arrays that start poisoned (0xA5 bytes, NaN) and",
                 "junk lanes are poisoned, as in the simulator, so even values computed from",
                 "unwritten lanes agree with it. Build with -ffp-contract=off: every float",
                 "operation rounds once (no fused multiply-add), as in npukit.arith."]
        if not self.poisons:  # (a graph's compiled pieces: its c_source poisons them)
            rows[-4:-1] = ["Internal memories and junk rows are not poisoned: no element is read "
                           "unwritten. Build with -ffp-contract=off: every float"]
        if self.sources:
            rows += ["", f"Basic kernels are called as the AutoTiler's generated code calls them; "
                         f"their C is the c_source given for them, quoted as is. A parallel one "
                         f"runs on each of the {t.cores} cores of {t.name} in turn, core 0 "
                         f"first (see the prelude before them). Pointers the kernels get to "
                         f"tensors must be aligned for their element type."]
        rows = [x for r in rows for x in (wrap(r).splitlines() or [""])]
        if p.source:
            rows += ["", "Kernel source:"] + ["  " + x for x in p.source.rstrip().splitlines()]
        return "/* " + "\n".join((" * " + comment_text(r)).rstrip() for r in rows)[3:] + "\n */"

    def _signature(self) -> str:
        args = []
        for buf, _ in self.prog.params:
            const = "const " if buf.role == "in" else ""
            args.append(f"{const}{_elem_type(buf.dtype)} *restrict {self.ptr[key(buf)]}")
        head = f"void {self.entry}("
        return head + (",\n" + " " * len(head)).join(args) + ")"

    def header(self) -> str:
        """``c_header``: the entry function's prototype with what it needs to compile."""
        p, t = self.prog, self.prog.target
        name = entry_name(p)
        guard = f"{name.upper()}_H"
        rows = [f"{name}: generated by npukit from kernel `{p.name}` for target {t.name}; "
                f"defined in the C file generated with this header.", "",
                "Each pointer is the address of the tensor's element [0, ..., 0], laid out as "
                "its spec says (strides in elements). Pointers need no alignment; tensors must "
                "not overlap. Compile that C file as C99 with -ffp-contract=off (every float "
                "operation rounds once, as npukit's simulator)."]
        rows = [x for r in rows for x in (wrap(r).splitlines() or [""])]
        out = Writer()
        out.lines.append("/* " + "\n".join((" * " + comment_text(r)).rstrip()
                                           for r in rows)[3:] + "\n */")
        out.line(f"#ifndef {guard}")
        out.line(f"#define {guard}")
        out.line()
        out.line("#include <stdint.h>")
        out.line()
        out.lines.extend(preamble.ANY_ADDRESS.splitlines())
        types = " ".join(c_type(b.dtype) for b, _ in p.params)
        for tname, text in TYPEDEFS.items():
            if re.search(rf"\b{tname}\b", types):
                out.lines.extend(preamble.once(f"NPK_TYPE_{tname}", text).splitlines())
        for dt in dict.fromkeys(b.dtype for b, _ in p.params if b.dtype.itemsize > 1):
            elem = _elem_type(dt)
            out.lines.extend(preamble.once(f"NPK_TYPE_{elem}",
                                   f"typedef {c_type(dt)} {elem} NPK_ANY_ADDRESS;").splitlines())
        out.line()
        args = []
        for k, (buf, spec) in enumerate(p.params):
            const = "const " if buf.role == "in" else ""
            end = ");" if k == len(p.params) - 1 else ","
            access_kind = {"in": "read", "out": "written", "inout": "read and written"}[buf.role]
            args.append((f"{const}{_elem_type(buf.dtype)} *restrict {self.ptr[key(buf)]}{end}",
                         f"/* {spec.dtype.name}{list(spec.shape)}, strides {spec.strides} "
                         f"elements: {access_kind} */"))
        width = max(len(a) for a, _ in args)
        out.line(f"void {name}(")
        for a, c in args:
            out.line(f"    {a:<{width}}  {c}")
        out.line()
        out.line(f"#endif /* {guard} */")
        return out.text() + "\n"

    def _constants(self) -> str:
        """The constants the code reads, as file-scope ``static const`` arrays."""
        out = Writer()
        for b in self.prog.buffers:
            if b.role == "const" and b.name in self.used:
                if out.lines:
                    out.line()
                out.comment(f"Constant {b.name} ({b.size} x {b.dtype.name}), in {b.memory} "
                            f"before the program starts.")
                values = [literal(v, b.dtype) for v in b.values().tolist()]
                out.line(f"static const {c_type(b.dtype)} {self.ptr[key(b)]}[{b.size}] = {{")
                for k in range(0, len(values), 12):
                    out.line("    " + ", ".join(values[k:k + 12]) + ",")
                out.line("};")
        return out.text()

    def _declarations(self, out: Writer) -> None:
        used = [b for b in self.prog.buffers if b.name in self.used and b.role == "internal"]
        if used:
            out.comment("Internal memories: one local array per buffer the target places there.")
        for mem in dict.fromkeys(b.memory for b in used):
            bufs = [b for b in used if b.memory == mem]
            size = self.prog.target.memories[mem].size
            parts = ", ".join(f"{b.name} {b.nbytes} B" for b in bufs)
            out.comment(f"{mem}: {size} B on {self.prog.target.name}; holds {parts}")
            for b in bufs:
                name = self.in_place[b.name][1] if b.name in self.in_place else self.ptr[key(b)]
                decl = f"{c_type(b.dtype, b.name)} {name}[{b.size}] NPK_ALIGNED;"
                where = [] if b.address is None else [f"{mem}_Memory + {b.address}"]
                if b.slot_len:
                    where.append(f"{b.slots} slot{'s' if b.slots > 1 else ''} of {b.slot_len}")
                out.line(decl + (f"  /* {comment_text(', '.join(where))} */" if where else ""))
        for b in used:
            if b.name in self.in_place:
                sts, store = self.in_place[b.name]
                what = "the whole" if len(sts) == 1 and not sts[0].src.offset.terms else \
                    "each tile"
                out.comment(f"{self.ptr[key(b)]}: {what} of tensor {sts[0].src.buffer.name} it "
                            f"would copy, read where it is when it is aligned as a local array "
                            f"is (nothing writes either), else from {store}; set at each "
                            f"copy.")
                out.line(f"{c_type(b.dtype)} *{self.ptr[key(b)]} = {store};")
        whole = written_whole_first(self.prog)
        for b in used if self.poisons else ():  # (else none: see _header)
            if b.name in whole:
                out.comment(f"{self.ptr[key(b)]}: not poisoned, its first statement writes "
                            f"every element.")
            elif is_float(b.dtype) or b.dtype == np.bool_:
                with out.block(f"for (int64_t {self.k} = 0; {self.k} < {b.size}; {self.k}++)"):
                    out.line(f"{self.ptr[key(b)]}[{self.k}] = {poison_literal(b.dtype)};"
                             f"  /* {POISON} */")
            else:
                out.line(f"memset({self.ptr[key(b)]}, 0xA5, sizeof {self.ptr[key(b)]});"
                         f"  /* {POISON} */")
        for c, name in self.cursor.items():
            out.line(f"int64_t {name} = 0;  /* append cursor {comment_text(repr(c))}: elements "
                     f"written so far */")
        for s in self.structs:
            out.line(f"{s.ctype} {s.store}, *{s.name} = &{s.store};")
        for s in self.structs:
            if s.invariant:
                out.comment(f"Kernel invariant arguments of {s.name}.")
                for name, value in s.invariant:
                    out.line(f"{s.name}->{name} = {value};")
        out.line()

    # -- arguments of basic kernels (npukit.c.calls) -------------------------------------

    def arg_struct(self, ctype: str) -> ArgStruct:
        """A new argument struct ``KerArg<n>`` for one call site."""
        k = len(self.structs)
        s = ArgStruct(ctype, _ident(f"KerArg{k}", self.taken), _ident(f"S_KerArg{k}", self.taken))
        self.structs.append(s)
        return s

    def arg_value(self, a) -> str:
        """C value of a basic kernel's argument: the address of a view's first element, an
        index expression or valid count, or the element a view starts at."""
        if isinstance(a, ir.Val):
            if isinstance(a.expr, ir.Lanes):
                return lanes_c(a.expr, self.names, self.h)
            return self.affine(a.expr)
        acc = self.acc(a.view)
        if isinstance(a, ir.Deref):
            return f"{acc.ptr}[{self.affine(acc.base)}]"
        base = self.affine(acc.base)
        return acc.ptr if base == "0" else f"{acc.ptr} + {base}"

    # -- statements ----------------------------------------------------------------------

    def block(self, body, w: Writer) -> None:
        for st in body:
            kind = type(st).__name__
            if kind not in _STATEMENTS:
                raise NotImplementedError(f"C back end: no rule for IR statement {kind} "
                                          f"(`{getattr(st, 'label', '')}`)")
            getattr(self, _STATEMENTS[kind])(st, w)

    def branch(self, st: ir.Branch, w: Writer) -> None:
        w.banner(f"Branch on {self.describe(st.cond)} (a condition known at run time)",
                 st.label)
        with w.block(f"if ({self.el(self.acc(st.cond), '0')})"):
            self.block(st.then, w)
        if st.orelse:
            with w.block("else", attach=True):
                self.block(st.orelse, w)

    def repeat(self, st: ir.Repeat, w: Writer) -> None:
        w.banner(f"Repeat while {self.describe(st.cond)} (a condition known at run time)",
                 st.label)
        with w.block(f"while ({self.el(self.acc(st.cond), '0')})"):
            self.block(st.body, w)

    def loop(self, st: ir.Loop, w: Writer) -> None:
        if st.parallel and not self.in_task:
            self.parallel_loop(st, w)
            return
        if self.fuse and fused_loop(self, st, w):
            return
        name = self.names.bind(st.var)
        count = st.var.count
        if st.cores:
            title = f"Core loop {name}: core {name} of {count} runs the body (its local id); " \
                    f"the cores take turns, core 0 first, as parallel work runs on a host"
        else:
            title = f"Loop {name}: {count} iterations"
        head = f"for (int64_t {name} = 0; {name} < {count}; {name}++)"
        end = None
        if st.var.trips is not None:  # the trip count is known at run time only
            end = _ident(f"{name}_end", self.taken)
            trips = self.affine(st.var.trips)
            title += f", of which {trips} run"
            head = f"for (int64_t {name} = 0, {end} = {self.h.use('npk_clamp64')}({trips}, 0, " \
                   f"{count}); {name} < {end}; {name}++)"
        w.banner(title, st.label)
        with w.block(head):
            self.loops.append(st.var)
            self.block(st.body, w)
            self.loops.pop()
        self.names.release(st.var)
        if end is not None:
            self.taken.discard(end)

    def parallel_loop(self, st: ir.Loop, w: Writer) -> None:
        """The loop's body as a task function over an iteration range, and a call of
        ``npk_parallel_for`` that shares the range among the host's threads. The task gets
        the tensors' pointers and the enclosing loop variables in a context struct; its
        body may only call basic kernels on tensors (a thread has no internal memories of
        its own)."""
        _check_parallel_body(st)
        name = self.names.bind(st.var)
        body = Writer(2)
        self.in_task = True
        self.loops.append(st.var)
        self.block(st.body, body)
        self.loops.pop()
        self.in_task = False
        loop = Writer(1)
        with loop.block(f"for (int64_t {name} = begin; {name} < end; {name}++)"):
            loop.extend(body)
        self.names.release(st.var)
        w.banner(f"Loop {name}: {st.var.count} iterations in parallel on the host's threads",
                 st.label)
        with w.block():
            self.run_task(f"parallel loop {name} ({st.var.count} iterations): iterations "
                          f"[begin, end) of it, on one thread." +
                          (f" {st.label}" if st.label else ""), [], loop, str(st.var.count),
                          1, w)

    def run_task(self, what: str, extra: list[tuple[str, str]], body: Writer, count: str,
                 grain: int, w: Writer) -> None:
        """A task function ``npk_task<k>(arg, begin, end)`` running ``body`` (code at depth 1
        over ``begin``/``end``), and on ``w`` the call of ``npk_parallel_for`` that shares
        ``[0, count)`` among the host's threads, at least ``grain`` iterations each. The task
        sees the tensors' pointers, the enclosing loop variables and ``extra`` — (C type,
        name) of locals of the entry function, copied into its context struct — under their
        names in the entry function."""
        fn = self.h.fresh("npk_task")
        self.splits |= not (count.isdigit() and grain >= int(count))
        ctx_t, ctx = f"{fn}_ctx", fn.replace("npk_task", "npk_ctx")
        # What the body uses, of the tensors, the loop variables and ``extra`` (a comment
        # naming one is no use): looked up from the body's words, so that the work grows
        # with the body, not with every tensor per task (a concat of n inputs has n tasks).
        code = re.sub(r"/\*.*?\*/", "", "\n".join(body.lines), flags=re.S)
        words = set(re.findall(r"\w+", code))
        tensors = [self.tensor_fields[i] for i in sorted(
            self.tensor_at[w] for w in words if w in self.tensor_at)]
        fields = tensors + [(t, f) for t, f in [("int64_t ", self.names.of[v])
                                                for v in self.loops] + list(extra)
                            if f in words]
        task = Writer()
        task.comment(f"Task of {what}")
        with task.block("typedef struct", attach=False):
            for t, f in fields:
                task.line(f"{t}{f};")
        task.lines[-1] += f" {ctx_t};"
        task.line()
        # The work takes the tensors as restrict parameters of a function gcc does not
        # inline: it honours restrict there, not on locals, and without it cannot tell the
        # tensors apart in a loop of byte copies (float16 lanes), which it then leaves
        # scalar. Tensors never overlap: restrict, as in the entry function.
        params = [f"{'' if '*' in t else 'const '}{t}{'restrict ' * ((t, f) in tensors)}{f}"
                  for t, f in fields]
        head = f"static NPK_NOINLINE void {fn}_run("
        for k, line in enumerate(params + ["int64_t begin", "int64_t end)"]):
            task.line((" " * len(head) if k else head) + line + ("," if ")" not in line else ""))
        with task.block():
            task.extend(body)
        task.line()
        task.line(f"static void {fn}(void *arg, int64_t begin, int64_t end)")
        with task.block():
            task.line(f"const {ctx_t} *ctx = (const {ctx_t} *)arg;")
            args = [f"ctx->{f}" for _, f in fields] + ["begin", "end"]
            task.line(f"{fn}_run({', '.join(args)});")
        self.tasks.append(task.text())
        w.line(f"{ctx_t} {ctx} = {{{', '.join(f for _, f in fields)}}};")
        w.line(f"npk_parallel_for({count}, {grain}, {fn}, &{ctx});")

    def call(self, st: ir.Call, w: Writer) -> None:
        emit_call(self, st, w)

    def reset_cursor(self, st: ir.ResetCursor, w: Writer) -> None:
        w.banner(f"Reset append cursor {st.cursor!r}", st.label)
        w.line(f"{self.cursor[st.cursor]} = 0;")

    def copy(self, st: ir.Copy, w: Writer) -> None:
        emit_copy(self, st, w)

    def poison(self, dt: np.dtype) -> str:
        """The poison value of ``dt`` as a C expression."""
        if dt.kind == "c":
            return f"{self.h.use('npk_poison_' + dt.name)}()"
        return poison_literal(dt)

    def via_tmp(self, w: Writer, dst: Access, dt: np.dtype, count: str, value: str,
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
        if st.op == "vscatter":
            emit_scatter(self, st, w)
            return
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
        tmp = any(key(v.buffer) == key(st.dst.buffer) for v in st.srcs) or \
            not injective(dst.dims)
        with w.block() if decls.lines or tmp else nullcontext():
            for line in decls.lines:
                w.line(line)
            if tmp:
                self.via_tmp(w, dst, st.dst.dtype, str(st.dst.size), value, st.dst.size)
            else:
                with w.block(f"for (int64_t {k} = 0; {k} < {st.dst.size}; {k}++)"):
                    w.line(f"{self.el(dst, k)} = {value};")

    def lane_value(self, st: ir.Compute, lanes: list[str], w: Writer) -> tuple[str, np.dtype]:
        """One lane of ``st`` from its operand lanes, and the dtype of the result; an Act
        reads its (bias, scale) pair once, into locals declared on ``w``."""
        dts = [v.dtype for v in st.srcs]
        if st.op == "vgather":
            return gather_lane(self, st, lanes), st.dst.dtype
        if st.op in A.VEC_OPS:
            return A.vec_expr(self.h, st.op, dict(st.attrs), list(zip(lanes, dts)),
                              st.dst.dtype), st.dst.dtype
        if st.unit == "alu":
            acc_dt = np.dtype("float32") if is_float(st.dst.dtype) else np.dtype("int32")
            return A.alu_expr(self.h, st.op, list(zip(lanes, dts)), st.dst.dtype), acc_dt
        p_dt = dts[0]
        out_dt = np.dtype("float32") if is_float(p_dt) else np.dtype("int32")
        attrs = dict(st.attrs)
        if st.op in ("lookup", "linear_approx"):
            return self._lut(st, lanes[0])
        if st.op == "clamp":  # Torq's I2F and F2I modes change the type
            out_dt = {"I2F": np.dtype("float32"), "F2I": np.dtype("int32")}.get(
                attrs.get("mode"), out_dt)
            return A.clamp_expr(self.h, lanes[0], p_dt, attrs), out_dt
        if st.op == "to_fixed":
            return A.to_fixed_expr(self.h, lanes[0], attrs["shift"]), np.dtype("int32")
        if st.op == "rescale_clamp":
            bs = st.srcs[1]
            pair = self.acc(bs)
            t, t_dt = ("float", out_dt) if is_float(p_dt) else ("int64_t", np.dtype("int64"))
            recs = attrs.get("records")   # Torq's per-item records: lane k reads k % recs
            width = bs.size // recs if recs else bs.size
            idx = [f"({self.k} % {recs}) * {width} + {x}" if recs else x for x in "01"[:width]]
            b_, s_ = ([A.convert(self.h, self.el(pair, x), bs.dtype, t_dt)
                       if bs.dtype.name == "bfloat16" else f"({t}){self.el(pair, x)}"
                       for x in idx] + ["1.0f"])[:2]  # a float bias alone: scale 1
            if recs:
                return A.rescale_clamp_expr(self.h, lanes[0], p_dt, f"({b_})", f"({s_})", attrs,
                                            self.prog.target.arith.rounding), out_dt
            w.line(f"const {t} bias = {b_}, scale = {s_};")
            return A.rescale_clamp_expr(self.h, lanes[0], p_dt, "bias", "scale", attrs,
                                        self.prog.target.arith.rounding), out_dt
        raise NotImplementedError(f"C back end: no rule for {st.unit}.{st.op} (`{st.label}`)")

    def _lut(self, st: ir.Compute, p: str) -> tuple[str, np.dtype]:
        """One lane of a LUT instruction: a call of its own helper (``npukit.c.lut``)."""
        tv = st.srcs[1]
        table = self.acc(tv)
        if table.base.terms or table.run != 1:
            raise NotImplementedError(f"C back end: `{st.label}` reads its table through a "
                                      f"moving or strided view")
        which = (tv.buffer.name, table.base.const, st.op, st.attrs, st.srcs[0].dtype.name,
                 st.label)
        if which not in self.lut_names:
            self.lut_names[which] = _ident(f"npk_{st.op}_{table.ptr}", self.taken,
                                           prefix_ok=True)
        return lut_lane(self.h, st, p, table.ptr, table.base.const, self.lut_names[which])


_STATEMENTS = {"Loop": "loop", "Copy": "copy", "Append": "append", "ResetCursor": "reset_cursor",
               "Fill": "fill", "Compute": "compute", "Call": "call", "Branch": "branch",
               "Repeat": "repeat"}

def _check_parallel_body(st: ir.Loop) -> None:
    """A parallel loop's body in C: loops and calls of basic kernels (without argument
    structs) on tensors and constants, nothing that lives in the entry function."""
    def bad(what: str) -> NotImplementedError:
        return NotImplementedError(f"C back end: parallel loop {st.var.name} (`{st.label}`) "
                                   f"{what}; a parallel loop may only call basic kernels on "
                                   f"tensors")

    def visit(body) -> None:
        for x in body:
            if isinstance(x, ir.Loop):
                visit(x.body)
            elif not isinstance(x, ir.Call):
                raise bad(f"holds a {type(x).__name__}")
            elif x.fn.arg_type:
                raise bad(f"calls {x.fn.name} with an argument struct")
            elif any(isinstance(a, (ir.Ptr, ir.Deref)) and a.view.buffer.role == "internal"
                     for a in x.args):
                raise bad(f"passes an internal buffer to {x.fn.name}")
    visit(st.body)


def _elem_type(dt: np.dtype) -> str:
    return c_type(dt) if dt.itemsize == 1 else f"npk_{dt.name}_any"


def _ident(name: str, taken: set[str], prefix_ok: bool = False) -> str:
    """A C identifier for ``name`` (``safe_name``), distinct from every name in ``taken``
    (then taken)."""
    base = safe_name(name, prefix_ok)
    out, k = base, 1
    while out in taken:
        k += 1
        out = f"{base}_{k}"
    taken.add(out)
    return out
