"""A planned graph as the C a GAP8 user deploys with the GAP SDK: the files the GAP
AutoTiler's graph mode writes, with the same plan, tiles and transfers as npukit's simulator
runs (each layer's lowered IR program, as ``graph_c`` reads it).

- ``<Name>Kernels.c`` / ``.h``: one function per layer (its tiles' loops, ``AT_L2_COPY`` /
  ``AT_L2_COPY2D`` / ``AT_L2_WAIT`` on ``AT_L2_EVENT`` s, ``AT_HYPERRAM_CL_COPY`` for the
  operands the plan streams from L3, parallel basic kernels through
  ``AT_FORK(gap_ncore(), (void *) Ker_Par, (void *) KerArg)``), ``<Name>CNN_Construct`` /
  ``<Name>CNN_Destruct`` (0 on success; 1 flash or L3 open, 2 L3, 3 L2, 4 L1 allocation
  failed), the runner ``<Name>CNN``, the arenas ``<Name>_L1_Memory``, ``<Name>_L2_Memory``
  (promoted constants), ``<Name>_L2_Memory_Dyn`` (activations) and ``AT_GraphPerf`` (each
  layer's cycles when built with ``-DPERF``);
- ``npukit_BasicKernels.c`` / ``.h``: npukit's basic kernels (their ``c_source``), each
  parallel one with its argument struct ``<Ker>_ArgT`` and entry ``<Ker>_Par``;
- ``npukit_at_emul.h`` (``gap_sdk_emul``), ``main.c``, ``Makefile``: the host build
  (``make emul``, ``make check``); ``<Name>_L3_Flash_Const.dat``: the constants.

``write(g, directory, inputs, expected)`` writes them all.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

import numpy as np

from .. import ir
from ..c.calls import externs
from ..c.preamble import PORTABILITY
from ..cdecl import c_string, comment_text, parse_ctype
from ..errors import NpukitError, TilingError
from .gap_c import KernelC, _writer
from .gap_sdk_emul import HEADER as EMUL_HEADER
from .gap_sdk_emul import MAKEFILE, _is_input, main_c

KERNELS = "npukit_BasicKernels"


def _counter(g):
    from ..sim.timing import Timeline

    class Counting(Timeline):
        """The simulator's timeline, counting the transfers it starts."""

        n = 0

        def step(self, st) -> None:
            if isinstance(st, (ir.Copy, ir.Append)):
                k = self.ix[f"busy:{st.engine}"]
                before = int(self.s[k])
                super().step(st)
                self.n += int(self.s[k]) != before
            else:
                super().step(st)
    return Counting


def transfer_counts(g) -> list[int]:
    """The transfers the simulator's timeline starts in each layer of graph ``g`` (the
    fetches issued before a layer counted with it), every iteration walked."""
    prog, segments = g.program()
    tl = _counter(g)(prog, fast_forward=False)
    out = []
    for fetch, body in segments:
        n0 = tl.n
        tl.block(fetch)
        tl.block(body)
        out.append(tl.n - n0)
    return out


class LayerC(KernelC):
    """Layer ``i`` of graph ``g`` as a user kernel of the AutoTiler's generated code."""

    def __init__(self, g, i: int):
        layer = g.layers[i]
        super().__init__(g.model, layer.name)
        self.g, self.layer = g, layer
        self.prog = layer.program
        self.l1 = f"{g.name}_L1_Memory"
        self.l3_events: dict[str, str] = {}  # event -> its type, for L3 transfers
        self.flash_params = {c for c, t in layer.bindings.items()
                             if g.read_location(i, t)[0] == "L3_FLASH"}
        # Where each C argument outside L2 lives: a basic kernel cannot address it there.
        self.external = {c: g.read_location(i, t)[0] for c, t in layer.bindings.items()
                         if g.read_location(i, t)[0] in ("L3", "L3_DYN", "L3_FLASH")}
        self.structs_used: set[str] = set()
        self.par_calls: dict[int, tuple[ir.Call, ir.Call]] = {}

    def address(self, view: ir.View) -> str:
        b = view.buffer
        if b.role == "internal" and b.memory != "L1":  # an L3 stream buffer in dynamic L2
            by = (view.offset + view.layout.offset) * b.dtype.itemsize
            return f"({self.g.name}_L2_Memory_Dyn+{b.address}+{self.affine(by)})"
        return super().address(view)

    def copy(self, st: ir.Copy, w) -> None:
        """The tiler's transfer. One between L3 and an L2 stream buffer goes through the
        calls of its device, ``AT_HYPERRAM_CL_COPY*`` for L3 RAM or
        ``AT_HYPERFLASH_FS_CL_COPY*`` (offsets in the flash file) for flash, on an event of
        its own, and is waited for at once: the L2-to-L1 transfer that reads the buffer is
        issued right after it."""
        if "micro" not in st.engine:
            super().copy(st, w)
            return
        inbound = st.src.buffer.role != "internal"
        ext, loc = (st.src, st.dst) if inbound else (st.dst, st.src)
        size, stride, length = self.chunks(st, ext, loc)
        if size == "0" or self.guard == "0":
            return
        arg = comment_text(st.label.split()[-1])
        flash = ext.buffer.name in self.flash_params
        dev, ty, cast = ("HyperFlash", "AT_HYPERFLASH_FS", " (uintptr_t)") if flash else \
            ("HyperRam", "AT_HYPERRAM", "")
        key = ("L3R:" if inbound else "L3W:") + arg
        evt = self.events.setdefault(key, f"Uchan{'HF' if flash else 'HR'}"
                                          f"{sum(k.startswith('L3') for k in self.events) + 1}")
        self.l3_events[evt] = f"{ty}_CL_EVENT"
        w.line(f"/* {comment_text(st.label)}, {'from' if inbound else 'to'} "
               f"{'flash' if flash else 'L3 RAM'} */")
        ext_c = f"(({ty}_EXT_ADDR_TYPE){cast} {self.address(ext)})"
        loc_c = f"(({ty}_INT_ADDR_TYPE) {self.address(loc)})"
        d = int(not inbound)
        call = f"{ty}_CL_COPY(&{dev}, {ext_c}, {loc_c}, {size}, {d}, &{evt});" if stride is None \
            else f"{ty}_CL_COPY2D(&{dev}, {ext_c}, {loc_c}, {size}, {stride}, {length}, {d}, " \
                 f"&{evt});"
        cond = self.guard or ("" if size.isdigit() else size)
        wait = f"{ty}_CL_WAIT(&{dev}, &{evt});"
        if cond:
            w.line(f"if (({cond}) > 0) {{")
            w.line(f"\t{call}")
            w.line(f"\t{wait} /* Wait L3 {'read' if inbound else 'write'} {arg} */")
            w.line("}")
        else:
            w.line(call)
            w.line(f"{wait} /* Wait L3 {'read' if inbound else 'write'} {arg} */")

    def chunks(self, st: ir.Copy, ext: ir.View, loc: ir.View):
        """The tiler's (bytes, stride, chunk bytes); besides, a gather of single elements
        (one dimension moved, packed on the local side, strided on the external one: a column
        of a matrix) as a 2-D copy of one-element lines."""
        try:
            return super().chunks(st, ext, loc)
        except TilingError:
            moved = [i for i, n in enumerate(loc.shape) if n != 1]
            if not moved:  # one element
                return str(loc.buffer.dtype.itemsize), None, None
            if len(moved) != 1 or loc.layout.strides[moved[0]] != 1 or \
                    (st.valid is not None and loc.shape[0] != 1):
                raise
            el, i = loc.buffer.dtype.itemsize, moved[0]
            return str(loc.shape[i] * el), str(ext.layout.strides[i] * el), str(el)

    def call(self, st: ir.Call, w) -> None:
        fn = st.fn
        for a in st.args:  # a table an embedding's kernel reads where the graph keeps it
            name = a.view.buffer.name if isinstance(a, (ir.Ptr, ir.Deref)) and \
                a.view.buffer.role != "internal" else None
            if name in self.external:
                t = self.g.tensors[self.layer.bindings[name]]
                raise TilingError(
                    f"layer {self.layer.name}: basic kernel {fn.name} reads {t.name} "
                    f"({t.size} B) through a pointer where the plan keeps it "
                    f"({self.external[name]}), which GAP's cluster cannot address; for the GAP "
                    f"SDK it must live in L2: give an L2 budget that holds it, or run the graph "
                    f"on npukit's back ends")
        if fn.parallel and not fn.arg_type:  # npukit's kernel: through its struct and entry
            self.structs_used.add(fn.name)
            # one replaced call per call site, kept: the struct of a site is found by its id
            st = self.par_calls.setdefault(id(st), (st, replace(st, fn=replace(
                fn, name=f"{fn.name}_Par", arg_type=f"{fn.name}_ArgT"))))[1]
        start = len(w.lines)
        super().call(st, w)
        w.lines[start:] = [x for x in w.lines[start:] if "__CALL(" not in x]

    def lines(self) -> list[str]:
        """The function's lines, leaving out a loop variable never used (a space of one
        iteration) and declaring the L3 transfers' events as the HyperRAM's."""
        text = self.text()
        body = "\n".join(text)
        out = []
        for x in text:
            s = x.strip()
            if s.startswith("int ") and s.endswith(";") and " " not in s[4:-1] and \
                    len(re.findall(rf"\b{re.escape(s[4:-1])}\b", body)) == 1:
                continue
            if s.startswith("AT_L2_EVENT ") and s[len("AT_L2_EVENT "):-1] in self.l3_events:
                x = x.replace("AT_L2_EVENT", self.l3_events[s[len("AT_L2_EVENT "):-1]])
            out.append(x)
        return out


# -- the basic kernels ------------------------------------------------------------------------

def basic_kernels(g) -> tuple[str, str]:
    """``npukit_BasicKernels.h`` and ``.c``: every kernel the layers call."""
    fns: dict[str, ir.Extern] = {}
    for layer in g.layers:
        for fn in externs(layer.program):
            fns.setdefault(fn.name, fn)
    h = [f"/* {KERNELS}.h: npukit's basic kernels (generated by npukit). A parallel kernel",
         " * runs on every core of the cluster, gap_coreid() saying which; it is forked",
         " * through its entry <Kernel>_Par, which takes its arguments in a <Kernel>_ArgT. */",
         f"#ifndef {KERNELS.upper()}_H", f"#define {KERNELS.upper()}_H",
         "#ifdef __EMUL__", '#include "npukit_at_emul.h"', "#else", '#include "Gap.h"',
         "#endif", ""]
    c = [f"/* {KERNELS}.c: npukit's basic kernels, their C as npukit's C back end compiles "
         "it. */", f'#include "{KERNELS}.h"', PORTABILITY, ""]
    for src in dict.fromkeys(fn.c_source.strip() for fn in fns.values() if fn.c_source.strip()):
        c += [src, ""]
    for fn in fns.values():
        args = ", ".join(f"{parse_ctype(t)} {n}" for t, n in fn.args) or "void"
        h.append(f"void {fn.name}({args});")
        if not fn.parallel or fn.arg_type:
            continue
        h.append(f"/* The arguments of {fn.name}, one field each. */")
        h.append("typedef struct {")
        h += [f"    {parse_ctype(t)} {n};" for t, n in fn.args]
        h.append(f"}} {fn.name}_ArgT;")
        h.append(f"void {fn.name}_Par({fn.name}_ArgT *Arg);")
        h.append("")
        c.append(f"/* {fn.name} on this core, its arguments from the struct AT_FORK passes. */")
        c.append(f"void {fn.name}_Par({fn.name}_ArgT *Arg)")
        c.append("{")
        c.append(f"    {fn.name}({', '.join(f'Arg->{n}' for _, n in fn.args)});")
        c.append("}")
        c.append("")
    h += ["#endif", ""]
    return "\n".join(h), "\n".join(c)


# -- the graph --------------------------------------------------------------------------------

class GraphC:
    """The kernels file and header of graph ``g``."""

    def __init__(self, g):
        self.g, self.n = g, g.name
        m = g.memory
        self.S, self.D = m["L2"].static, m["L2"].dynamic
        self.L3S, self.L3D = m["L3"].static, m["L3"].dynamic
        self.L1 = m["L1"].dynamic
        self.flash = bool(g.constants)
        self.ram = bool(self.L3S or self.L3D or any(layer.streamed for layer in g.layers))
        from .graph_c import _Names
        self.flash_file = _Names(g).flash_file
        report = g.report()
        self.cycles = [report.layers[layer.name] for layer in g.layers]
        costs = g.target.costs
        self.caveat = costs.caveat() if hasattr(costs, "caveat") else "npukit's cycle model"
        self.layers = [LayerC(g, i) for i in range(len(g.layers))]
        self.bodies = [lc.lines() for lc in self.layers]

    def where(self, area: str, offset: int, tensor: str) -> str:
        n = self.n
        if area == "ARG":
            return tensor
        if area == "L3_FLASH":  # an offset in the flash file, carried by a pointer
            return f"(uintptr_t) ({n}_L3_Flash+{offset})"
        base = {"L2": "L2_Memory", "L2_DYN": "L2_Memory_Dyn", "L3": "L3_Memory",
                "L3_DYN": "L3_Memory_Dyn"}[area]
        return f"({n}_{base}+{offset})"

    def describe(self, area: str, offset: int) -> str:
        return {"ARG": "graph argument", "L2": f"L2 at {offset}", "L2_DYN": f"dynamic L2 at "
                f"{offset}", "L3": f"L3 RAM at {offset}", "L3_DYN": f"dynamic L3 RAM at "
                f"{offset}", "L3_FLASH": f"flash at {offset}"}[area]

    def args(self) -> list[str]:
        return [f"{t.ctype if '*' in t.ctype else t.ctype + ' *'} {t.name}" for t in self.g.args]

    # -- the header ------------------------------------------------------------------------

    def header(self) -> str:
        g, n = self.g, self.n
        guard = f"__{n.upper()}KERNELS_H__"
        lines = [f"#ifndef {guard}", f"#define {guard}", "",
                 "/* The GAP SDK's API on GAP8; npukit's emulation of it on a host "
                 "(-D__EMUL__). */",
                 "#ifdef __EMUL__", '#include "npukit_at_emul.h"', "#else", '#include "Gap.h"',
                 '#include "at_api.h"', "/* Layer hooks of the host emulation: nothing on GAP8. */",
                 "#define NPK_LAYER_BEGIN(Layer) ((void) 0)",
                 "#define NPK_LAYER_END(Layer, Cycles) ((void) 0)", "#endif",
                 f'#include "{KERNELS}.h"', "",
                 f"#define _{n}_L1_Memory_SIZE {self.L1}",
                 f"#define _{n}_L2_Memory_SIZE {self.S}",
                 f"#define _{n}_L2_Memory_Dyn_SIZE {self.D}",
                 f"#define _{n}_L3_Memory_SIZE {self.L3S + self.L3D}",
                 f"#define {n}_LAYERS {len(g.layers)}",
                 f"extern AT_L1_POINTER {n}_L1_Memory; /* Size given for generation: "
                 f"{g.memory['L1'].budget} bytes, used: {self.L1} bytes */",
                 f"extern AT_L2_POINTER {n}_L2_Memory; /* promoted constants: {self.S} bytes */",
                 f"extern AT_L2_POINTER {n}_L2_Memory_Dyn; /* activations, fetched constants, "
                 f"L3 stream buffers: {self.D} bytes */"]
        if self.ram:
            lines.append(f"extern AT_HYPERRAM_POINTER {n}_L3_Memory;")
        lines.append("")
        for lc in self.layers:
            w = _writer()
            w.line(f"extern void {lc.name}(")
            from .gap_c import _signature
            _signature(lc.uk, w)
            lines += w.lines[:-1] + [w.lines[-1] + ";"]
        lines += ["", f"extern int {n}CNN_Construct(void);", f"extern int {n}CNN_Destruct(void);",
                  f"extern int {n}CNN(", "\t\t" + ",\n\t\t".join(self.args()) + ");",
                  f"extern unsigned int AT_GraphPerf[{len(g.layers)}];",
                  f"extern unsigned int AT_GraphOperInfosNames[{len(g.layers)}];",
                  f"extern char *AT_GraphNodeNames[{len(g.layers)}];",
                  f"extern const unsigned int {n}_Predicted_Cycles[{len(g.layers)}];",
                  f"extern const char *{n}_Cycle_Model;", "", f"#endif /* {guard} */", ""]
        return "\n".join(lines)

    # -- the kernels file --------------------------------------------------------------------

    def source(self) -> str:
        g, n = self.g, self.n
        m = g.memory
        rows = [f"{n}Kernels.c: graph {n}, generated by npukit for target {g.target.name} as "
                f"the GAP AutoTiler's graph mode writes it (the same plan, tiles and transfers "
                f"as npukit's simulator runs).",
                f"L1: {self.L1} B of {m['L1'].budget} B; L2: {self.S} B static (promoted "
                f"constants) + {self.D} B dynamic of {m['L2'].budget} B; L3 RAM: "
                f"{self.L3S} B static + {self.L3D} B dynamic; flash {self.flash_file}: "
                f"{m['L3_FLASH'].static} B.",
                f"Predicted cycles per layer: npukit's cycle model ({self.caveat})."]
        for t in g.tensors.values():
            where = "a graph argument" if t.memory == "ARG" else \
                f"{t.memory} {t.area or 'home'} at {t.offset}"
            rows.append(f"  {t.name}: {t.size} B, {where}, layers {t.live[0]}..{t.live[1]}")
        out = ["/*"] + [" * " + comment_text(r) for r in rows] + [" */",
                                                                  f'#include "{n}Kernels.h"', ""]
        out += [f"L1_CL_MEM AT_L1_POINTER {n}_L1_Memory;", f"L2_MEM AT_L2_POINTER {n}_L2_Memory;",
                f"L2_MEM AT_L2_POINTER {n}_L2_Memory_Dyn;"]
        if self.ram:
            out += ["static AT_HYPERRAM_T HyperRam;", f"AT_HYPERRAM_POINTER {n}_L3_Memory;",
                    f"AT_HYPERRAM_POINTER {n}_L3_Memory_Dyn;"]
        if self.flash:
            out += ["static AT_HYPERFLASH_FS_T HyperFlash;",
                    f"/* Offsets in the flash file {self.flash_file} start at 0. */",
                    f"static const AT_HYPERFLASH_FS_EXT_ADDR_TYPE {n}_L3_Flash = 0;"]
        out += ["/* A tile's valid lines: clamp(v, 0, hi). */",
                "#define AT_CLAMP(v, hi) ((v) < 0 ? 0 : ((v) > (hi) ? (hi) : (v)))", ""]
        for i, body in enumerate(self.bodies):
            layer = g.layers[i]
            out.append(f"/* Layer {i}: {comment_text(layer.name)}, {layer.tiling.n_tiles} "
                       f"tile(s), L1 {layer.tiling.l1_used} B, predicted {self.cycles[i]} "
                       f"cycles */")
            out += body
        out += self.construct() + self.destruct() + self.tables() + self.runner()
        return "\n".join(out) + "\n"

    def _flash_copy(self, name: str, src_off: int, dst: str, size: int, fc: str) -> str:
        return (f"AT_HYPERFLASH_FS_{fc}_COPY(&HyperFlash, ((AT_HYPERFLASH_FS_EXT_ADDR_TYPE) "
                f"{self.n}_L3_Flash + {src_off}), ((AT_HYPERFLASH_FS_INT_ADDR_TYPE) {dst}), "
                f"{size}, 0, &UchanHF1);")

    def construct(self) -> list[str]:
        n, g = self.n, self.g
        w = _writer()
        w.line(f"int {n}CNN_Construct(void)")
        w.line("{")
        with w.indented():
            if self.flash:
                w.line("AT_HYPERFLASH_FS_FC_EVENT UchanHF1;")
                w.line("AT_HYPERFLASH_FS_CONF_T HyperFlashConf;")
            if self.ram:
                w.line("AT_HYPERRAM_CONF_T HyperRamConf;")
            if self.flash or self.ram:
                w.line("int Error;")
            if self.flash:
                w.line("/* Open the flash file of the constants */")
                w.line("AT_HYPERFLASH_FS_CONF_INIT(&HyperFlashConf, AT_MEM_L3_HFLASH, 0);")
                w.line(f"AT_HYPERFLASH_FS_OPEN(&HyperFlash, &HyperFlashConf, "
                       f"{c_string(self.flash_file)}, &Error);")
                w.line("if (Error) return 1;")
            if self.ram:
                w.line("/* Open the L3 RAM and allocate its areas */")
                w.line("AT_HYPERRAM_CONF_INIT(&HyperRamConf, AT_MEM_L3_HRAM, 0);")
                w.line("AT_HYPERRAM_OPEN(&HyperRam, &HyperRamConf, &Error);")
                w.line("if (Error) return 1;")
                for var, size in ((f"{n}_L3_Memory", self.L3S), (f"{n}_L3_Memory_Dyn", self.L3D)):
                    w.line(f"{var} = (AT_HYPERRAM_POINTER) AT_HYPERRAM_ALLOC(&HyperRam, "
                           f"{max(size, 4)});")
                    w.line(f"if ({var} == 0) return 2;")
            for var, size, code, what in (
                    (f"{n}_L2_Memory", self.S, 3, "L2, permanent: the promoted constants"),
                    (f"{n}_L2_Memory_Dyn", self.D, 3, "L2, dynamic: activations, fetches"),
                    (f"{n}_L1_Memory", self.L1, 4, "L1: the largest layer's tiles")):
                kind = "L1" if code == 4 else "L2"
                w.line(f"/* Allocate {what} ({size} bytes) */")
                w.line(f"{var} = (AT_{kind}_POINTER) AT_{kind}_ALLOC(0, {max(size, 4)});")
                w.line(f"if ({var} == 0) return {code};")
            order = [t for layer in g.layers for t in layer.bindings.values()]
            for name in sorted(g.promoted, key=order.index):
                t = g.tensors[name]
                area, off = g.home(name)
                dst = self.where(area, off, name)
                w.line(f"/* Static Moving {comment_text(name)}, size {t.size} from HyperFlash at "
                       f"{t.flash} to (size {t.size}) {self.describe(area, off)} */")
                w.line(self._flash_copy(name, t.flash, dst, t.size, "FC"))
                w.line("AT_HYPERFLASH_FS_FC_WAIT(&HyperFlash, &UchanHF1);")
            w.line("return 0;")
        w.line("}")
        w.line()
        return w.lines

    def destruct(self) -> list[str]:
        n = self.n
        w = _writer()
        w.line(f"int {n}CNN_Destruct(void)")
        w.line("{")
        with w.indented():
            w.line("/* Free the arenas, close the L3 devices */")
            w.line(f"AT_L2_FREE(0, {n}_L2_Memory_Dyn, {max(self.D, 4)});")
            w.line(f"AT_L2_FREE(0, {n}_L2_Memory, {max(self.S, 4)});")
            w.line(f"AT_L1_FREE(0, {n}_L1_Memory, {max(self.L1, 4)});")
            if self.ram:
                w.line(f"AT_HYPERRAM_FREE(&HyperRam, {n}_L3_Memory, {max(self.L3S, 4)});")
                w.line(f"AT_HYPERRAM_FREE(&HyperRam, {n}_L3_Memory_Dyn, {max(self.L3D, 4)});")
                w.line("AT_HYPERRAM_CLOSE(&HyperRam);")
            if self.flash:
                w.line("AT_HYPERFLASH_FS_CLOSE(&HyperFlash);")
            w.line("return 0;")
        w.line("}")
        w.line()
        return w.lines

    def tables(self) -> list[str]:
        g, n = self.g, self.n
        k = len(g.layers)
        out = ["/* Cycles of each layer, measured when built with -DPERF (AT_GRAPH_PERF) */",
               f"unsigned int AT_GraphPerf[{k}];",
               "/* Operations (multiply-accumulates) of each layer; 0 where unknown */",
               f"unsigned int AT_GraphOperInfosNames[{k}] = {{"]
        out += [f"\t{g.model._cnn_ops.get(layer.name, 0)}," for layer in g.layers] + ["};"]
        out += [f"char *AT_GraphNodeNames[{k}] = {{"]
        out += [f"\t{c_string(layer.name)}," for layer in g.layers] + ["};"]
        out += ["/* The cycles npukit's cycle model predicts for each layer */",
                f"const unsigned int {n}_Predicted_Cycles[{k}] = {{"]
        out += [f"\t{c}, /* {comment_text(layer.name)} */"
                for c, layer in zip(self.cycles, g.layers)] + ["};"]
        out += [f"const char *{n}_Cycle_Model = {c_string(self.caveat)};", ""]
        return out

    def runner(self) -> list[str]:
        g, n = self.g, self.n
        w = _writer()
        w.line(f"int {n}CNN(")
        w.line("\t\t" + ",\n\t\t".join(self.args()) + ")")
        w.line("{")
        _, fetches = g.moves()
        with w.indented():
            kinds = {g.tensors[name].memory for moves in fetches for name, *_ in moves}
            if "L3_FLASH" in kinds:
                w.line("AT_HYPERFLASH_FS_CL_EVENT UchanHF1;")
            if kinds - {"L3_FLASH"}:
                w.line("AT_HYPERRAM_CL_EVENT UchanHR1;")
            for i, layer in enumerate(g.layers):
                w.line(f"/* Layer {i}: {comment_text(layer.name)}, predicted {self.cycles[i]} "
                       f"cycles */")
                w.line("#ifdef PERF")
                w.line(f"AT_GraphPerf[{i}] = gap_cl_readhwtimer();")
                w.line("#endif")
                w.line(f"NPK_LAYER_BEGIN({i});")
                for name, src, so, dst, do in fetches[i]:
                    t = g.tensors[name]
                    target = self.where(dst, do, name)
                    w.line(f"/* Fetching {comment_text(name)}, size {t.size} from "
                           f"{self.describe(src, so)} to dynamic L2 at {do} */")
                    if src == "L3_FLASH":
                        w.line(self._flash_copy(name, so, target, t.size, "CL"))
                        w.line("AT_HYPERFLASH_FS_CL_WAIT(&HyperFlash, &UchanHF1);")
                    else:
                        w.line(f"AT_HYPERRAM_CL_COPY(&HyperRam, ((AT_HYPERRAM_EXT_ADDR_TYPE) "
                               f"{self.where(src, so, name)}), ((AT_HYPERRAM_INT_ADDR_TYPE) "
                               f"{target}), {t.size}, 0, &UchanHR1);")
                        w.line("AT_HYPERRAM_CL_WAIT(&HyperRam, &UchanHR1);")
                types = {c.ArgName: str(parse_ctype(c.ArgType)) for c in
                         g.model.kernels[layer.name].cargs}
                w.line(f"{layer.name}(")
                items = list(layer.bindings.items())
                for k, (carg, tensor) in enumerate(items):
                    area, off = g.read_location(i, tensor)
                    end = "," if k < len(items) - 1 else ""
                    w.line(f"\t(({types[carg]}) {self.where(area, off, tensor)}){end} "
                           f"/* {comment_text(carg)}: {comment_text(tensor)}, "
                           f"{self.describe(area, off)} */")
                w.line(");")
                w.line(f"NPK_LAYER_END({i}, {self.cycles[i]});")
                w.line("#ifdef PERF")
                w.line(f"AT_GraphPerf[{i}] = gap_cl_readhwtimer() - AT_GraphPerf[{i}];")
                w.line("#endif")
            w.line("return 0;")
        w.line("}")
        return w.lines


# -- writing ----------------------------------------------------------------------------------

def _prepare(directory) -> Path:
    """``directory``, created; refused unless new or empty, or when a symbolic link (as
    ``--emit`` treats its folder: ``npukit.files.make_folder``)."""
    try:
        from ..files import make_folder
    except ImportError:  # pragma: no cover - the same rules, here
        folder = Path(directory)
        if folder.is_symlink() or (folder.exists() and (not folder.is_dir() or
                                                        any(folder.iterdir()))):
            raise NpukitError(f"--emit {str(directory)!r}: the folder is not empty or is a "
                              f"symbolic link; npukit replaces nothing: give a new or empty "
                              f"folder") from None
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    return make_folder(directory, "--emit")


def _write(path: Path, data: bytes | str) -> None:
    """Create ``path`` holding ``data``; refused when anything (a file, a symbolic link) is
    there already: a link planted in the folder is never followed."""
    try:
        from ..files import write_new
    except ImportError:  # pragma: no cover - the same rules, here
        raw = data.encode() if isinstance(data, str) else data
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL |
                     getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        return
    write_new(path, data, "--emit")


def write(g, directory, inputs: dict[str, np.ndarray], expected: dict[str, np.ndarray],
          stems: dict[str, str] | None = None) -> Path:
    """Write graph ``g`` as GAP SDK C into ``directory`` (see the module docstring):
    ``inputs`` and ``expected`` (by graph argument name) go to ``inputs/<stem>.bin`` and
    ``expected/<stem>.bin``, ``stems`` naming the files (default: the argument names).
    Returns the directory."""
    folder = _prepare(directory)
    stems = stems or {t.name: t.name for t in g.args}
    gc = GraphC(g)
    bk_h, bk_c = basic_kernels(g)
    files = {f"{g.name}Kernels.c": gc.source(), f"{g.name}Kernels.h": gc.header(),
             f"{KERNELS}.c": bk_c, f"{KERNELS}.h": bk_h, "npukit_at_emul.h": EMUL_HEADER,
             "main.c": main_c(g, stems)}
    outs = [t.name for t in g.args if not _is_input(g, t.name)]
    checks = "\n".join(f"\tcmp outputs/{stems[o]}.bin expected/{stems[o]}.bin" for o in outs)
    files["Makefile"] = MAKEFILE.format(name=g.name, flash=gc.flash_file, checks=checks,
                                        files=", ".join(sorted(files)))
    for name, text in files.items():
        _write(folder / name, text)
    if g.constants:
        _write(folder / gc.flash_file, g.flash_image())
    for sub, arrays in (("inputs", inputs), ("expected", expected)):
        (folder / sub).mkdir()
        for name, a in arrays.items():
            _write(folder / sub / f"{stems[name]}.bin", np.ascontiguousarray(a).tobytes())
    return folder


__all__ = ["write", "transfer_counts", "basic_kernels", "GraphC", "LayerC"]
