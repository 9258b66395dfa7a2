"""GAP-ready C: the user kernels of a model written in the structure and naming of the GAP
AutoTiler's generated code (``<Name>Kernels.c`` / ``.h``), from the IR and the tiling.

What a GAP developer finds where the real tool puts it: the L1 and L2 areas as
``AT_L1_POINTER`` / ``AT_L2_POINTER`` symbols (``SetSymbolNames``), one function per user
kernel with the C arguments of its template, the "Ker Arg Iter Spaces" comment (tile sizes,
counts, L1 offsets, slots), the kernel argument structs filled once with what never
changes ("Call Kernel, Invariant assignment"), ``AT_L2_COPY`` / ``AT_L2_COPY2D`` transfers
with one event per argument and ``AT_L2_WAIT`` before an event is reused, loops
``for (T0Ind=0; T0Ind<N; T0Ind++)`` over the kernel's spaces, and parallel basic kernels
dispatched with ``AT_FORK(gap_ncore(), ...)``. L1 addresses are ``L1_Memory + offset``.

The same files compile and run on a host: ``at_host.h`` (written next to them) maps the
``AT_*`` macros to ``memcpy`` and runs a parallel basic kernel on each core in turn, as
npukit's C back end does; ``Kernels.h`` includes it when ``AT_HOST`` is defined, the GAP
SDK's headers otherwise. ``host_kernels.c`` holds the basic kernels' C given to
``LibKernel(c_source=...)``; ``Kernels.c`` includes it on a host: ``cc -DAT_HOST -c
GenKernels.c`` builds the kernels. ``Model.emit(directory, style="gap")`` writes them all.
"""

from __future__ import annotations

from pathlib import Path

from .. import ir
from ..c.code import Writer
from ..cdecl import comment_text, parse_ctype
from ..errors import TilingError
from .lower import VAR_NAMES

HOST_HEADER = r"""/* at_host.h: the GAP AutoTiler's generated-code macros on a host (npukit).
   Transfers are memcpy (complete when issued: a wait has nothing to wait for); a
   parallel basic kernel runs on each core in turn, core 0 first, so a kernel must not rely
   on its cores running at the same time. */
#ifndef AT_HOST_H
#define AT_HOST_H
#include <stdint.h>
#include <string.h>

typedef signed char Word8;
typedef unsigned char Wordu8;
typedef short int Word16;
typedef unsigned short int Wordu16;
typedef int Word32;
typedef unsigned int Wordu32;
typedef signed char v4s __attribute__((vector_size(4)));

typedef char *AT_L1_POINTER;
typedef char *AT_L2_POINTER;
typedef char *AT_L2_EXT_ADDR_TYPE;
typedef char *AT_L2_INT_ADDR_TYPE;
typedef int AT_L2_EVENT;
#define L1_CL_MEM
#define L2_MEM

#ifndef AT_HOST_CORES
#define AT_HOST_CORES 8
#endif
static int at_host_core;
static inline int gap_coreid(void) { return at_host_core; }
static inline int gap_ncore(void) { return AT_HOST_CORES; }
static inline void gap_waitbarrier(int barrier) { (void)barrier; }

/* Size bytes: chunks of Length bytes, Stride bytes apart at the external side, packed at
   the local side; Dir 0 moves external -> local, 1 local -> external. */
static inline void at_host_copy(char *Ext, char *Loc, int Size, int Stride, int Length, int Dir)
{
    for (int Done = 0; Done < Size; Done += Length, Ext += Stride, Loc += Length) {
        int Chunk = Size - Done < Length ? Size - Done : Length;
        if (Dir) memcpy(Ext, Loc, (size_t)Chunk);
        else memcpy(Loc, Ext, (size_t)Chunk);
    }
}
#define AT_L2_COPY(Dev, Ext, Loc, Size, Dir, Evt) \
    at_host_copy((char *)(Ext), (char *)(Loc), (Size), (Size), (Size) > 0 ? (Size) : 1, (Dir))
#define AT_L2_COPY2D(Dev, Ext, Loc, Size, Stride, Len, Dir, Evt) \
    at_host_copy((char *)(Ext), (char *)(Loc), (Size), (Stride), (Len), (Dir))
#define AT_L2_WAIT(Dev, Evt) ((void)(Evt))
#define AT_L3_COPY(Dev, Ext, Loc, Size, Dir, Evt) AT_L2_COPY(Dev, Ext, Loc, Size, Dir, Evt)
#define AT_L3_COPY2D(Dev, Ext, Loc, Size, Stride, Len, Dir, Evt) \
    AT_L2_COPY2D(Dev, Ext, Loc, Size, Stride, Len, Dir, Evt)
#define AT_L3_WAIT(Dev, Evt) ((void)(Evt))
/* A parallel basic kernel, given as the GAP runtime's team fork takes it (a function of
   one pointer), run on each core in turn. */
static inline void at_host_fork(int Cores, void *Fn, void *Arg)
{
    void (*Entry)(void *);
    memcpy(&Entry, &Fn, sizeof Entry);
    for (at_host_core = 0; at_host_core < Cores; at_host_core++) Entry(Arg);
    at_host_core = 0;
}
#define AT_FORK(Cores, Fn, Arg) at_host_fork((Cores), (Fn), (Arg))
#define __CALL(Fn, Arg) ((void)0)
#endif
"""

_VAR = {"Tile0": "T0Ind", "Tile1": "T1Ind", "Tile2": "T2Ind"}


def emit(model, directory) -> dict[str, Path]:
    """Write the model's user kernels as GAP C into ``directory``: the files
    ``SetGeneratedFilesNames`` names (``GenKernels.c`` / ``.h`` by default),
    ``at_host.h`` and ``host_kernels.c``. Returns {file name: path}."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    c_name, h_name = files(model)
    texts = {c_name: kernels_c(model), h_name: kernels_h(model), "at_host.h": HOST_HEADER,
             "host_kernels.c": host_kernels(model)}
    paths = {}
    for name, text in texts.items():
        paths[name] = out / name
        paths[name].write_text(text)
    return paths


def files(model) -> tuple[str, str]:
    """The kernels' .c and .h names: ``SetGeneratedFilesNames``'s, else ``GenKernels.c`` /
    ``.h``."""
    return model.settings.files or ("GenKernels.c", "GenKernels.h")


def _guard(name: str) -> str:
    return "__" + "".join(c if c.isalnum() else "_" for c in name.upper()) + "__"


def kernels_h(model) -> str:
    s = model.settings
    h_name = files(model)[1]
    lines = [f"#ifndef {_guard(h_name)}", f"#define {_guard(h_name)}", "",
             "#ifdef AT_HOST", '#include "at_host.h"', "#else",
             f'#include "{s.std_types or "AutoTilerLibTypes.h"}"']
    lines += [f'#include "{h}"' for h in s.headers]
    lines += ["#endif", ""] + declarations(model)
    lines += ["", f"#endif /* {_guard(h_name)} */", ""]
    return "\n".join(lines)


def declarations(model) -> list[str]:
    """The L1 / L2 symbols' sizes and externs, and the user kernels' prototypes."""
    s = model.settings
    used = l1_used(model)
    l1 = f"AT_L1_POINTER {s.l1_symbol}" if s.dynamic else \
        f"char {s.l1_symbol}[_{s.l1_symbol}_SIZE]"
    lines = [f"#define _{s.l1_symbol}_SIZE {used}", f"#define _{s.l2_symbol}_SIZE 0",
             f"extern {l1}; /* Size given for generation: {model.l1_budget} bytes, used: "
             f"{used} bytes */",
             f"extern AT_L2_POINTER {s.l2_symbol}; /* Size used for generation: 0 bytes */"]
    for name, k in list(model.kernels.items()) + list(model.groups.items()):
        w = _writer()
        w.line(f"extern void {name}(")
        _signature(k, w)
        lines += w.lines[:-1] + [w.lines[-1] + ";"]
    return lines


def l1_used(model) -> int:
    return max((model.tiling(k).l1_used for k in model.kernels), default=0)


def _writer() -> Writer:
    """A writer of the AutoTiler's layout: tab indentation, long lines kept whole."""
    return Writer(tab="\t", breaks=False)


def _signature(uk, w: Writer) -> None:
    """The C arguments after ``void name(``, one a line (``void)`` when there are none)."""
    if not uk.cargs:
        w.line("void)")
    with w.indented(2):
        for k, c in enumerate(uk.cargs):
            w.line(f"{parse_ctype(c.ArgType)} {c.ArgName}" +
                   ("," if k < len(uk.cargs) - 1 else ")"))


def _head(name: str, uk) -> Writer:
    """A function's head as the AutoTiler writes it, up to its body's ``{``."""
    w = _writer()
    w.line(f"void {name}(")
    _signature(uk, w)
    w.line()
    w.line("{")
    return w


def host_kernels(model) -> str:
    """The basic kernels' C (``LibKernel(c_source=...)``), for a host build."""
    seen, parts = set(), ["/* The basic kernels' C (npukit LibKernel c_source), for a host build: "
                          "included by the kernels' .c when AT_HOST is defined. */",
                          '#include "at_host.h"', ""]
    for lib in model.libs.values():
        if lib.c_source and lib.c_source not in seen:
            seen.add(lib.c_source)
            parts.append(lib.c_source.strip("\n"))
    return "\n".join(parts) + "\n"


def kernels_c(model) -> str:
    s = model.settings
    h_name = files(model)[1]
    lines = [f'#include "{h_name}"', "#ifdef AT_HOST",
             '#include "host_kernels.c" /* on a host: the basic kernels\' C, given to LibKernel */',
             "#endif"]
    if s.dynamic:
        lines += [f"L1_CL_MEM AT_L1_POINTER {s.l1_symbol};", f"L2_MEM AT_L2_POINTER {s.l2_symbol};"]
    else:
        lines += [f"L1_CL_MEM char {s.l1_symbol}[_{s.l1_symbol}_SIZE];",
                  f"L2_MEM AT_L2_POINTER {s.l2_symbol};"]
    lines += ["/* A tile's valid lines: clamp(v, 0, hi). */",
              "#define AT_CLAMP(v, hi) ((v) < 0 ? 0 : ((v) > (hi) ? (hi) : (v)))", ""]
    for name in model.kernels:
        lines += KernelC(model, name).text()
    for name in model.groups:
        lines += group_c(model, name)
    return "\n".join(lines) + "\n"


def group_c(model, name: str) -> list[str]:
    """A kernel group: its user kernels called in order with their bindings."""
    g = model.groups[name]
    w = _head(name, g)
    with w.indented():
        for c in g.calls:
            args = [b.name if b.kind == "c_arg" else str(b.value) for b in c.BindingList]
            w.line(f"{c.CallName}({', '.join(args)});")
    w.line("}")
    w.line()
    return w.lines


class KernelC:
    """One user kernel as the AutoTiler writes it."""

    def __init__(self, model, name: str):
        self.m, self.name = model, name
        self.uk = model.kernels[name]
        self.t = model.tiling(name)
        self.prog = model.program(name)
        self.l1 = model.settings.l1_symbol
        # IR loop variables are named for their space (npukit.tiler.lower.VAR_NAMES).
        by_var = {VAR_NAMES.get(k, k): k for k in self.t.spaces}
        self.var_names = {v: _VAR.get(k, k + "Ind") for v, k in by_var.items()}
        self.spaces = by_var
        self.events: dict[str, str] = {}
        self.busy: set[str] = set()  # events of writes waited for only before the next one
        self.structs: dict[int, tuple[str, str]] = {}  # call id -> (struct type, name)
        self.invariant: list[str] = []
        self.l2_offsets = {}
        off = 0
        for b in self.prog.buffers:
            if b.memory == "L2":
                self.l2_offsets[b.name] = off
                off += -(-b.nbytes // 4) * 4

    # -- expressions -------------------------------------------------------------------------

    def affine(self, a: ir.Affine) -> str:
        parts, const = [], a.const
        for atom, c in a.terms:
            if not isinstance(atom, ir.Var) and not atom.expr.terms:  # a constant atom
                const += c * int(ir.affine(atom).eval({}))
                continue
            if isinstance(atom, ir.Var):
                x = self.var_names.get(atom.name, atom.name)
            else:
                op = "/" if isinstance(atom, ir.FloorDiv) else "%"
                x = f"(({self.affine(atom.expr)}){op}{atom.m})"
            parts.append(x if c == 1 else f"{c}*{x}")
        if const or not parts:
            parts.append(str(const))
        return "+".join(parts).replace("+-", "-")

    def count(self, v) -> str:
        if isinstance(v, ir.Lanes):
            start = self.affine(v.start)
            if not v.start.terms:
                return str(max(0, min(v.total - v.start.const, v.width)))
            return f"AT_CLAMP({v.total}-({start}), {v.width})"
        return self.affine(v)

    def address(self, view: ir.View) -> str:
        """A C expression of the view's first element's address."""
        b = view.buffer
        off = view.offset + view.layout.offset
        if b.memory == "L1":
            by = off * b.dtype.itemsize
            return f"({self.l1}+{b.address}+{self.affine(by)})".replace("+0)", ")")
        if b.role == "internal":
            by = off * b.dtype.itemsize
            return f"({self.m.settings.l2_symbol}+{self.l2_offsets[b.name]}+{self.affine(by)})"
        return f"({b.name}+{self.affine(off)})" if off.terms or off.const else b.name

    # -- statements ----------------------------------------------------------------------

    def text(self) -> list[str]:
        body = _writer()
        with body.indented():
            self.block(self.prog.body, body)
            for arg, e in self.events.items():
                if e in self.busy:
                    body.line(f"if ({e}_Busy) AT_L2_WAIT(0, &{e}); /* Wait DMA write "
                              f"{arg[2:]} */")
        w = _head(self.name, self.uk)
        l2 = sum(b.nbytes for b in self.prog.buffers if b.memory == "L2")
        with w.indented():
            w.line(f"/* Shared L1: {self.t.l1_used} bytes, L2 buffer: {l2} bytes */")
            w.line("/* Local variables used by this kernel */")
            for e in self.events.values():
                w.line(f"AT_L2_EVENT {e};")
            for e in sorted(self.busy):
                w.line(f"int {e}_Busy = 0;")
            for ty, n in self.structs.values():
                w.line(f"{ty} S_{n}, *{n} = &S_{n};")
        w.line()
        with w.indented():
            w.line("/* Iteration space related variables */")
            for v in self.var_names.values():
                w.line(f"int {v};")
            self.spaces_comment(w)
            if self.invariant:
                w.line("/*=========================== Call Kernel, Invariant assignment "
                       "=====================*/")
                for x in self.invariant:
                    w.line(x)
        w.extend(body)
        w.line("}")
        w.line()
        return w.lines

    def spaces_comment(self, w: Writer) -> None:
        t = self.t
        w.line("/*============================= Ker Arg Iter Spaces "
               "=========================================")
        w.line("User Kernel Iteration Space:")
        with w.indented():
            w.line("".join(f"[{k} Dim: {s.count}]" if s.kind != "par" else
                           f"[{k} Dim: Init: {s.extent}, Tiled: {s.count}]"
                           for k, s in t.spaces.items()))
        for name, p in t.args.items():
            g = t.geometry[name]
            space = g.frame.tiled or ("Buffer" if g.residency != "tile" else "-")
            shape = "x".join(str(n) for n in g.tile_shape)
            w.line(f"Ker Arg: {comment_text(name)}, Tiled Space: {comment_text(space)}, "
                   f"{g.residency}, tile "
                   f"[{shape}] elements, L1 offset {p.offset}, {p.size} B x {p.slots} "
                   f"slot(s){f' {p.pitch} B apart' if p.slots > 1 else ''}")
        w.line("======================== End Ker Arg Iter Spaces "
               "=========================================*/")

    def block(self, body, w: Writer) -> None:
        for st in body:
            if isinstance(st, ir.Loop):
                v, space = self.var_names[st.var.name], comment_text(self.spaces[st.var.name])
                w.line(f"for ({v}=0; {v}<{st.var.count}; {v}++) {{ /* Iteration on "
                       f"{space} */")
                with w.indented():
                    self.block(st.body, w)
                w.line(f"}} /* End iteration on {space} */")
            elif isinstance(st, ir.Copy):
                self.copy(st, w)
            elif isinstance(st, ir.Call):
                self.call(st, w)
            else:
                raise TilingError(f"{self.name}: GAP C cannot write a {type(st).__name__}")

    def copy(self, st: ir.Copy, w: Writer) -> None:
        """One transfer on its argument's event. A read waits for the event's previous
        transfer before it is issued, and is waited for at once unless it fills a slot used
        later (the first or the next tile); a tile written from one of several slots is
        waited for before the next write (``Busy``: one is in flight), others at once."""
        inbound = st.dst.buffer.memory == "L1" or st.src.buffer.role != "internal"
        ext, loc = (st.src, st.dst) if inbound else (st.dst, st.src)
        size, stride, length = self.chunks(st, ext, loc)
        if size == "0" or self.guard == "0":  # a case of this transfer that moves nothing here
            return
        arg = comment_text(st.label.split()[-1])  # a KerArg's name: only in comments
        key = ("R:" if inbound else "W:") + arg
        seen = key in self.events
        evt = self.events.setdefault(key, f"Dma{'R' if inbound else 'W'}_Evt"
                                          f"{sum(k[0] == key[0] for k in self.events) + 1}")
        lvl = "L3" if "micro" in st.engine else "L2"
        what = "read" if inbound else "write"
        slots = loc.buffer.slots if loc.buffer.memory == "L1" else 1
        later = st.label.startswith(("Read Next Tile", "Read First Tile")) if inbound else \
            st.label.startswith("Write Tile") and slots > 1
        w.line(f"/* {comment_text(st.label)} */")
        if inbound and seen:
            w.line(f"AT_{lvl}_WAIT(0, &{evt}); /* Wait previous DMA {what} {arg} */")
        elif later and not inbound:
            self.busy.add(evt)
            w.line(f"if ({evt}_Busy) AT_{lvl}_WAIT(0, &{evt}); /* Wait previous DMA "
                       f"{what} {arg} */")
        ext_c = f"((AT_L2_EXT_ADDR_TYPE) {self.address(ext)})"
        loc_c = f"((AT_L2_INT_ADDR_TYPE) {self.address(loc)})"
        if stride is None:
            call = f"AT_{lvl}_COPY(0, {ext_c}, {loc_c}, {size}, {int(not inbound)}, &{evt});"
        else:
            call = (f"AT_{lvl}_COPY2D(0, {ext_c}, {loc_c}, {size}, {stride}, {length}, "
                    f"{int(not inbound)}, &{evt});")
        cond = self.guard or ("" if size.isdigit() else size)
        w.line(f"if (({cond}) > 0) {call}" if cond else call)
        if later and not inbound:
            w.line(f"{evt}_Busy = 1;")
        elif not later:
            w.line(f"AT_{lvl}_WAIT(0, &{evt}); /* Wait DMA {what} {arg} */")

    def chunks(self, st: ir.Copy, ext: ir.View, loc: ir.View):
        """(bytes, external stride or None, chunk bytes) of a copy between a home view and
        a packed local one: its dims in the local side's order, the contiguous ones merged
        into the chunk; a valid line count makes that dim's extent a C expression."""
        el = loc.buffer.dtype.itemsize
        dims = sorted(range(len(loc.shape)), key=lambda i: -loc.layout.strides[i])
        extent = {i: str(loc.shape[i]) for i in dims}
        self.guard = ""
        if st.valid is not None:
            n = self.count(st.valid)
            if loc.shape[0] == 1 and not n.isdigit():
                self.guard = n  # a single line, moved or not: a condition, not a size
            else:
                extent[0] = n if n.isdigit() else f"({n})"
        inner = dims[-1]
        if loc.layout.strides[inner] != 1 or ext.layout.strides[inner] != 1:
            raise TilingError(f"{self.name}: `{st.label}`: GAP C needs rows contiguous on both "
                              f"sides of a transfer")
        run, k = [extent[inner]], len(dims) - 1
        span = loc.shape[inner]
        while k > 0 and extent[dims[k]].isdigit() and \
                ext.layout.strides[dims[k - 1]] == span == loc.layout.strides[dims[k - 1]]:
            k -= 1
            run.insert(0, extent[dims[k]])
            span *= loc.shape[dims[k]]
        outer = [i for i in dims[:k] if extent[i] != "1"]
        chunk = _product(run + [str(el)])
        if not outer:
            return chunk, None, None
        if len(outer) > 1:
            raise TilingError(f"{self.name}: `{st.label}`: a transfer with more than one outer "
                              f"dimension is not written as GAP C")
        stride = ext.layout.strides[outer[0]] * el
        return _product([extent[outer[0]], chunk]), str(stride), chunk

    def call(self, st: ir.Call, w: Writer) -> None:
        fn = st.fn
        if fn.parallel and not fn.arg_type:
            raise TilingError(f"{self.name}: parallel basic kernel {fn.name} has no argument "
                              f"struct (ParArgTypeName): GAP C dispatches it with one")
        w.line(f"/*====================== {comment_text(st.label.split(':')[0])} "
                   f"=========================*/")
        values = [f"({parse_ctype(ctype)}) ({self.value(a)})" for a, (ctype, _) in
                  zip(st.args, fn.args)]
        if fn.parallel and fn.arg_type:
            sid = id(st)
            if sid not in self.structs:
                self.structs[sid] = (fn.arg_type, f"KerArg{len(self.structs)}")
            _, name = self.structs[sid]
            for a, (_, field), v in zip(st.args, fn.args, values):
                line = f"{name}->{field} = {v};"
                if _invariant(a):
                    self.invariant.append(line)
                else:
                    w.line(line)
            w.line(f"AT_FORK(gap_ncore(), (void *) {fn.name}, (void *) {name});")
            w.line(f"__CALL({fn.name}, {name});")
        else:
            w.line(f"{fn.name}(")
            with w.indented():
                for k, v in enumerate(values):
                    w.line(v + ("," if k < len(values) - 1 else ""))
            w.line(");")

    def value(self, a) -> str:
        if isinstance(a, ir.Val):
            return self.count(a.expr)
        if isinstance(a, ir.Ptr):
            return self.address(a.view)
        v = a.view  # Deref: a C argument's value or element
        off = v.offset + v.layout.offset
        return v.buffer.name if self.prog.param(v.buffer.name)[1].shape == () else \
            f"{v.buffer.name}[{self.affine(off)}]"


def _invariant(a) -> bool:
    if isinstance(a, ir.Val):
        e = a.expr
        return not (e.terms if isinstance(e, ir.Affine) else e.start.terms)
    return isinstance(a, ir.Ptr) and not a.view.offset.terms


def _product(factors: list[str]) -> str:
    """``a*b*...`` with the constant factors multiplied out."""
    const, rest = 1, []
    for f in factors:
        if f.isdigit():
            const *= int(f)
        else:
            rest.append(f)
    if not rest:
        return str(const)
    return "*".join(rest + ([str(const)] if const != 1 else []))


def host_function(model, name: str):
    """The user kernel ``name`` of the emitted GAP C, compiled for the host: a function
    taking numpy arrays by C argument name (scalars as 0-d arrays)."""
    import numpy as np

    from ..c import toolchain

    uk = model.kernels[name] if name in model.kernels else model.groups[name]
    s = model.settings
    h_name = files(model)[1]
    body = kernels_c(model).replace(f'#include "{h_name}"', "").replace(
        '#include "host_kernels.c"', "")
    lib = host_kernels(model).replace('#include "at_host.h"', "")
    size = l1_used(model)
    params = ", ".join(f"void *a{k}" for k in range(len(uk.cargs)))
    call = ", ".join(f"({parse_ctype(c.ArgType)}) a{k}" if c.is_pointer else
                     f"*({parse_ctype(c.ArgType)} *) a{k}" for k, c in enumerate(uk.cargs))
    l1 = (f"static char NpkL1[{size} + 64];\n"
          f"void npk_entry({params}) {{ {s.l1_symbol} = NpkL1; {name}({call}); }}\n"
          if s.dynamic else f"void npk_entry({params}) {{ {name}({call}); }}\n")
    source = "\n".join([HOST_HEADER, lib] + declarations(model) + [body, l1])
    fn = toolchain.function(source, "npk_entry", len(uk.cargs))

    def run(**arrays):
        """Call the kernel on numpy arrays (by C argument name); outputs are written back."""
        images = []
        for c in uk.cargs:
            a = arrays[c.ArgName]
            if not c.is_pointer:
                images.append(np.asarray(a, parse_ctype(c.ArgType).dtype).reshape(1))
            else:
                images.append(np.ascontiguousarray(a))
        fn(*[im.ctypes.data for im in images])
        for c, im in zip(uk.cargs, images):
            a = arrays[c.ArgName]
            if c.is_pointer and isinstance(a, np.ndarray) and a.flags.writeable and \
                    not np.shares_memory(a, im):
                a[...] = im.reshape(a.shape)
    return run


__all__ = ["emit", "kernels_c", "kernels_h", "host_function", "HOST_HEADER"]
