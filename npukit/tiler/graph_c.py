"""A graph as the C the GAP AutoTiler generates for it: one function per layer (the user
kernel's IR program, by ``npukit.c``), then ``<Name>_Construct``, the runner ``<Name>``,
``<Name>_Destruct`` and ``<Name>_Memory``, with the warm variants of the constructor and
destructor the document shows (``AT_GRAPH_WARM_CONSTRUCT`` 0..3).

On the host the GAP runtime calls the code makes are defined before the graph functions:
L1, L2 and L3 RAM are heap blocks, the flash is the constants file (written next to the
generated C) read whole when it is opened, copies are ``memcpy`` and waits do nothing.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import threading
import time
import warnings
import weakref
from pathlib import Path

import numpy as np

from ..c import cache, pieces, preamble, toolchain
from ..c.calls import prelude
from ..c.code import Writer, wrap
from ..c.ctype import TYPEDEFS, c_type
from ..c.emit import c_unit, param_type, piece_unit
from ..cdecl import c_string, comment_text, file_name
from ..errors import CompilerError, NpukitError
from ..run import Result
from . import graph_link
from .graph_api import DEVICES, L3_FLASHES, L3_RAMS, ArgDirection, AT_GraphCtrl, AT_MemLocation

_HOST = """\
/* ---- The GAP runtime calls the graph code makes, on the host ----
   L1, L2 and L3 RAM are heap blocks; an L3 flash is its constants file, read whole when it
   is opened; a copy from flash or L3 is a memcpy and waiting for it has nothing to wait for.
   npk_host_flash_dir() says which folder holds the constants files. */
typedef char *AT_L1_POINTER;
typedef char *AT_L2_POINTER;
typedef enum {
    AT_MEM_UNDEF, AT_MEM_L3_HRAM, AT_MEM_L3_QSPIRAM, AT_MEM_L3_OSPIRAM, AT_MEM_L3_DEFAULTRAM,
    AT_MEM_L3_HFLASH, AT_MEM_L3_QSPIFLASH, AT_MEM_L3_OSPIFLASH, AT_MEM_L3_MRAMFLASH,
    AT_MEM_L3_DEFAULTFLASH, AT_MEM_L2, AT_MEM_L1
} AT_MemLocation_T;
typedef enum {
    AT_L1_MEM, AT_L2_MEM, AT_L2_DYN_MEM, AT_L3_MEM, AT_L3_DYN_MEM, AT_CTXT_MEM
} AT_MEM_TYPE;

/* A heap block on a 64-byte boundary, as the layers' local arrays are: a layer then reads
   a tensor it would copy whole where it is (the address malloc gave is kept just before). */
static void *npk_host_alloc(size_t Size)
{
    char *Raw = (char *) malloc(Size + 64 + sizeof(void *)), *Block;
    if (!Raw) return 0;
    Block = Raw + sizeof(void *);
    Block += (64 - (uintptr_t) Block % 64) % 64;
    ((void **) Block)[-1] = Raw;
    return Block;
}
static void npk_host_free(void *Block) { if (Block) free(((void **) Block)[-1]); }
#define AT_L1_ALLOC(Cid, Size) ((AT_L1_POINTER) npk_host_alloc(Size))
#define AT_L1_FREE(Cid, Ptr, Size) npk_host_free(Ptr)
#define AT_L2_ALLOC(Cid, Size) ((AT_L2_POINTER) npk_host_alloc(Size))
#define AT_L2_FREE(Cid, Ptr, Size) npk_host_free(Ptr)"""

_FILE = """\
/* An L3 flash: the bytes of its constants file. */
typedef struct { char *Data; size_t Size; } npk_flash_T;
static char npk_flash_dir[4096] = ".";

/* The folder of the constants files (copied: the caller's string need not outlive this). */
void npk_host_flash_dir(const char *Dir)
{
    size_t N = strlen(Dir);
    if (N < sizeof npk_flash_dir) memcpy(npk_flash_dir, Dir, N + 1);
}

static void npk_flash_open(npk_flash_T *Fs, const char *Name, int *Error)
{
    char Path[4096];
    FILE *F;
    long N;
    *Error = 1;
    Fs->Data = 0;
    Fs->Size = 0;
    if (snprintf(Path, sizeof Path, "%s/%s", npk_flash_dir, Name) >= (int)sizeof Path) return;
    F = fopen(Path, "rb");
    if (!F) return;
    if (fseek(F, 0, SEEK_END) == 0 && (N = ftell(F)) >= 0 && fseek(F, 0, SEEK_SET) == 0) {
        Fs->Data = (char *) npk_host_alloc((size_t) N);
        if (Fs->Data && fread(Fs->Data, 1, (size_t) N, F) == (size_t) N) {
            Fs->Size = (size_t) N;
            *Error = 0;
        }
    }
    fclose(F);
    if (*Error) {
        npk_host_free(Fs->Data);
        Fs->Data = 0;
    }
}

static void npk_flash_close(npk_flash_T *Fs)
{
    npk_host_free(Fs->Data);
    Fs->Data = 0;
    Fs->Size = 0;
}

/* Dir 0: from flash offset Ext to Int; a read past the file's end is an error. */
static void npk_flash_copy(npk_flash_T *Fs, size_t Ext, char *Int, size_t Size, int Dir)
{
    if (Dir != 0 || Ext > Fs->Size || Size > Fs->Size - Ext) {
        fprintf(stderr, "npukit: flash copy of %lu B at %lu outside the %lu B file\\n",
                (unsigned long) Size, (unsigned long) Ext, (unsigned long) Fs->Size);
        abort();
    }
    memcpy(Int, Fs->Data + Ext, Size);
}"""


def _flash_macros(p: str) -> str:
    return f"""\
typedef npk_flash_T {p}_T;
typedef int {p}_CONF_T;
typedef int {p}_FC_EVENT;
typedef int {p}_CL_EVENT;
typedef size_t {p}_EXT_ADDR_TYPE;
typedef char *{p}_INT_ADDR_TYPE;
#define {p}_CONF_INIT(Conf, Dev, Flag) (*(Conf) = (int) (Dev) + (Flag))
#define {p}_OPEN(Fs, Conf, Name, Error) ((void) (Conf), npk_flash_open((Fs), (Name), (Error)))
#define {p}_CLOSE(Fs) npk_flash_close(Fs)
#define {p}_FC_COPY(Fs, Ext, Int, Size, Dir, Event) \\
    ((void) (Event), npk_flash_copy((Fs), (Ext), (Int), (Size), (Dir)))
#define {p}_FC_WAIT(Fs, Event) ((void) (Fs), (void) (Event))
#define {p}_CL_COPY {p}_FC_COPY
#define {p}_CL_WAIT {p}_FC_WAIT"""


def _ram_macros(p: str) -> str:
    return f"""\
/* An L3 RAM: heap blocks. */
typedef int {p}_T;
typedef int {p}_CONF_T;
typedef int {p}_CL_EVENT;
typedef char *{p}_POINTER;
typedef char *{p}_EXT_ADDR_TYPE;
typedef char *{p}_INT_ADDR_TYPE;
#define {p}_CONF_INIT(Conf, Dev, Flag) (*(Conf) = (int) (Dev) + (Flag))
#define {p}_OPEN(Ram, Conf, Error) (*(Ram) = *(Conf), *(Error) = 0)
#define {p}_CLOSE(Ram) ((void) (Ram))
#define {p}_ALLOC(Ram, Size) ((void) (Ram), ({p}_POINTER) npk_host_alloc(Size))
#define {p}_FREE(Ram, Ptr, Size) ((void) (Ram), npk_host_free(Ptr))
#define {p}_CL_COPY(Ram, Ext, Int, Size, Dir, Event) \\
    ((void) (Ram), (void) (Event), \\
     (Dir) ? memcpy((Ext), (Int), (Size)) : memcpy((Int), (Ext), (Size)))
#define {p}_CL_WAIT(Ram, Event) ((void) (Ram), (void) (Event))"""



def trace_line(graph: str, index: int, node: str) -> str:
    """What the runner prints before each layer when AT_GRAPH_TRACE_EXEC is on (the C
    prints it, and so does the simulator's run)."""
    return f"{graph}: layer {index} {node}"

class _Names:
    """The C names a graph's code uses: memory base names, devices, the flash file."""

    def __init__(self, g):
        dev = g.model._devices
        self.l1 = dev.get(AT_MemLocation.AT_MEM_L1, (0, "", ""))[1] or "L1_Memory"
        self.l2 = dev.get(AT_MemLocation.AT_MEM_L2, (0, "", ""))[1] or "L2_Memory"
        ram = g.ctrl[AT_GraphCtrl.AT_GRAPH_PREF_L3_EXEC] or next(
            (d for d in dev if d in L3_RAMS), AT_MemLocation.AT_MEM_L3_DEFAULTRAM)
        flash = g.ctrl[AT_GraphCtrl.AT_GRAPH_PREF_L3_HOME] or next(
            (d for d in dev if d in L3_FLASHES), AT_MemLocation.AT_MEM_L3_DEFAULTFLASH)
        self.l3 = dev.get(ram, (0, "", ""))[1] or "L3_Memory"
        self.ram, self.ram_macro, self.ram_event = DEVICES[ram]
        self.flash, self.flash_macro, self.flash_event = DEVICES[flash]
        self.ram_loc, self.flash_loc = ram.name, flash.name
        self.flash_file = dev.get(flash, (0, "", ""))[2] or f"{g.name}_L3_Flash_Const.dat"


def c_source(g) -> str:
    """The graph's translation unit (see the module docstring)."""
    return _Generator(g).source()


def c_pieces(g) -> tuple[list[tuple[str, str, str]], str]:
    """The graph's C in pieces (``npukit.c.pieces``): ``([(what, unit, optimisation level),
    ...], main)``, one unit per group of layers, per basic-kernel source (without the code
    no call of the graph reaches: ``npukit.c.pieces.prune``) and for the threads runtime,
    each at its kind's level (``npukit.c.pieces.LEVELS``); ``main`` holds
    the rest of ``c_source``'s unit (the host's memories, the constructor, the runner, the
    destructor) and declares the layers' functions."""
    return _Generator(g).pieces()


_INCLUDES = ("stddef.h", "stdint.h", "stdio.h", "stdlib.h", "string.h")
# Layers compiled in one piece: about _GROUP on average, at most _MAX_GROUP (a compile
# spends about 0.1 s on the headers basic kernels include, more than a small layer's code).
_GROUP, _MAX_GROUP = 4, 8


def _groups(names: list[str]) -> list[list[int]]:
    """The layers (by index) of each piece: a piece ends after a layer whose name's hash
    is 0 modulo ``_GROUP`` (or at ``_MAX_GROUP`` layers), so that a layer changed, added
    or removed changes its own piece and leaves the others as they were."""
    out: list[list[int]] = [[]]
    for i, name in enumerate(names):
        out[-1].append(i)
        if len(out[-1]) == _MAX_GROUP or \
                hashlib.sha256(name.encode()).digest()[0] % _GROUP == 0:
            out.append([])
    return [x for x in out if x]


class _Generator:
    def __init__(self, g):
        self.g, self.n = g, _Names(g)
        self.warm = g.ctrl[AT_GraphCtrl.AT_GRAPH_WARM_CONSTRUCT]
        m = g.memory
        self.S, self.D = m["L2"].static, m["L2"].dynamic
        self.L3S, self.L3D = m["L3"].static, m["L3"].dynamic
        self.L1 = m["L1"].dynamic
        self.has_flash = bool(g.constants)
        self.has_ram = bool(self.L3S or self.L3D)
        self.dyn = f"{self.n.l2}_Dyn"

    # -- pointers --------------------------------------------------------------------------

    def where(self, area: str, offset: int, tensor: str) -> str:
        """A C pointer expression for ``tensor`` found at (area, offset)."""
        n = self.n
        if area == "ARG":
            return tensor
        if area == "L2":
            return f"({n.l2} + {offset})"
        if area == "L2_DYN":
            return f"({n.l2} + {self.S + offset})" if self.warm == 1 else f"({self.dyn} + {offset})"
        if area == "L3":
            return f"({n.l3} + {offset})"
        if area == "L3_DYN":
            return f"({n.l3}_Dyn + {offset})"
        return f"({n.flash}.Data + {offset})"

    def describe(self, area: str, offset: int) -> str:
        return {"ARG": "argument", "L2": f"L2 at {offset}", "L2_DYN": f"dynamic L2 at {offset}",
                "L3": f"L3 at {offset}", "L3_DYN": f"dynamic L3 at {offset}",
                "L3_FLASH": f"{self.n.flash} at {offset}"}[area]

    # -- the translation unit --------------------------------------------------------------

    def source(self) -> str:
        g = self.g
        progs = [layer.program for layer in g.layers]
        tail = "\n\n".join(x for x in (self.host(), self.globals(), self.arrays(),
                                       self.construct(), self.destruct(), self.runner(),
                                       self.memory()) if x)
        return c_unit(progs, [layer.name for layer in g.layers], header=self.header(),
                      tail=tail, includes=_INCLUDES)

    def pieces(self) -> tuple[list[tuple[str, str, str]], str]:
        g = self.g
        units, protos, sources = [], [], []
        for group in _groups([layer.name for layer in g.layers]):
            layers = [g.layers[i] for i in group]
            # Not poisoned: a run's time goes to the layers' work, not to filling their
            # tiles (c_source, the graph's C as one unit, poisons them as the simulator).
            text, group_protos, srcs = piece_unit([x.program for x in layers],
                                                  [x.name for x in layers], poison=False)
            units.append((", ".join(f"layer {i} ({x.name})" for i, x in zip(group, layers)),
                          text, pieces.LEVELS["layers"]))
            protos += [f"/* Layer {i}: {comment_text(x.name)} (compiled apart) */\n{proto}"
                       for i, x, proto in zip(group, layers, group_protos)]
            sources += srcs
        cores = g.layers[0].program.target.cores if g.layers else 1
        # The compiles start in the pieces' order, one per CPU: the longest first, so that
        # the last to finish is a short one. The basic kernels' own C (hand-vectorised,
        # specialised by shape: seconds for a convolution's) outweighs any layer's, whose
        # cost grows with its length.
        units.sort(key=lambda x: -len(x[1]))
        # Each kernel without the copies of its code no call of the graph can reach.
        units[:0] = pieces.kernel_units(sources, prelude(cores), pieces.program_calls(
            [layer.program for layer in g.layers]))
        units.append(("the threads runtime", pieces.runtime_unit(), pieces.LEVELS["runtime"]))
        dtypes = dict.fromkeys(b.dtype for layer in g.layers for b, _ in layer.program.params
                               if b.dtype.itemsize > 1)
        code = "\n\n".join([*protos, *(x for x in (self.host(), self.globals(), self.arrays(),
                                                 self.construct(), self.destruct(),
                                                 self.runner(), self.memory()) if x)])
        anys = [f"typedef {c_type(dt)} {param_type(dt)} NPK_ANY_ADDRESS;" for dt in dtypes]
        types = [t for name, t in TYPEDEFS.items()
                 if re.search(rf"\b{name}\b", "\n".join([code, *anys]))] + anys
        main = "\n".join([self.header(), "", *(f"#include <{h}>" for h in _INCLUDES), "",
                          preamble.PORTABILITY, *types, "", code, ""])
        return units, main

    def header(self) -> str:
        g, m = self.g, self.g.memory
        rows = [f"Generated by npukit from graph {g.name} (the GAP AutoTiler's graph mode) for "
                f"target {g.target.name} ({g.target.description}).", "",
                "Memory plan:",
                f"  L1: {m['L1'].dynamic} B of {m['L1'].budget} B (the largest layer's tiles)",
                f"  L2: {self.S} B static (promoted constants) + {self.D} B dynamic "
                f"(activations, fetched constants, L3 stream buffers) of {m['L2'].budget} B",
                f"  L3 RAM: {self.L3S} B static + {self.L3D} B dynamic of {m['L3'].budget} B",
                f"  Flash image {self.n.flash_file}: {m['L3_FLASH'].static} B"]
        for t in g.tensors.values():
            where = "a graph argument" if t.memory == "ARG" else \
                f"{t.memory} {t.area or 'home'} at {t.offset}"
            rows.append(f"    {t.name}: {t.size} B, {where}, layers {t.live[0]}..{t.live[1]}")
        rows += ["", f"Entry points: {g.name}_Construct, {g.name}, {g.name}_Destruct, "
                 f"{g.name}_Memory (and npk_host_flash_dir, the folder of the flash file, "
                 f"on the host). Each layer is a function of its user kernel's C arguments; "
                 f"the runner calls them with pointers into the memory areas the plan "
                 f"assigns."]
        lines = [x for r in rows for x in (wrap(comment_text(r), 88).splitlines() or [""])]
        return "/*\n" + "\n".join((" * " + x).rstrip() for x in lines) + "\n */"

    def host(self) -> str:
        parts = [_HOST]
        if self.has_flash:
            parts += [_FILE, _flash_macros(self.n.flash_macro)]
        if self.has_ram:
            parts.append(_ram_macros(self.n.ram_macro))
        return "\n\n".join(parts)

    def globals(self) -> str:
        n, w = self.n, Writer()
        w.comment(f"---- Graph {self.g.name} ----")
        w.line(f"static AT_L1_POINTER {n.l1};")
        w.line(f"static AT_L2_POINTER {n.l2};")
        if self.warm != 1:
            w.line(f"static AT_L2_POINTER {self.dyn};")
        if self.has_ram:
            w.line(f"static {n.ram_macro}_T {n.ram};")
            w.line(f"static {n.ram_macro}_POINTER {n.l3};")
            w.line(f"static {n.ram_macro}_POINTER {n.l3}_Dyn;")
        if self.has_flash:
            w.line(f"static {n.flash_macro}_T {n.flash};")
        return w.text()

    def arrays(self) -> str:
        g, w = self.g, Writer()
        if g.ctrl[AT_GraphCtrl.AT_GRAPH_PRODUCE_NODE_NAMES]:
            name = g.ctrl[AT_GraphCtrl.AT_GRAPH_PRODUCE_NODE_CVAR_NAME]
            w.comment("The name of each graph node (AT_GRAPH_PRODUCE_NODE_NAMES).")
            w.line(f"const char *{name}[{len(g.layers)}] = {{")
            for layer in g.layers:
                w.line(f"    {c_string(layer.name)},")
            w.line("};")
        if g.ctrl[AT_GraphCtrl.AT_GRAPH_PRODUCE_OPERINFOS]:
            name = g.ctrl[AT_GraphCtrl.AT_GRAPH_PRODUCE_OPERINFOS_CVAR_NAME]
            w.comment("Operations (multiply-accumulates) of each node "
                      "(AT_GRAPH_PRODUCE_OPERINFOS); 0 for a user kernel no CNN generator made.")
            w.line(f"const unsigned int {name}[{len(g.layers)}] = {{")
            for layer in g.layers:
                w.line(f"    {g.model._cnn_ops.get(layer.name, 0)},  "
                       f"/* {comment_text(layer.name)} */")
            w.line("};")
        return w.text()

    # -- constructor and destructor ---------------------------------------------------------

    def _open_l3(self, w: Writer) -> None:
        n = self.n
        if self.has_flash:
            w.line(f"{n.flash_macro}_CONF_T {n.flash}Conf;")
        if self.has_ram:
            w.line(f"{n.ram_macro}_CONF_T {n.ram}Conf;")
        if not (self.has_flash or self.has_ram):
            return
        w.line()
        w.line("int Error;")
        if self.has_flash:
            w.line(f"{n.flash_macro}_CONF_INIT(&{n.flash}Conf, {n.flash_loc}, 0);")
            w.line(f"{n.flash_macro}_OPEN(&{n.flash}, &{n.flash}Conf, {c_string(n.flash_file)}, "
                   f"&Error);")
            w.line("if (Error) return 1;")
        if self.has_ram:
            w.line(f"{n.ram_macro}_CONF_INIT(&{n.ram}Conf, {n.ram_loc}, 0);")
            w.line(f"{n.ram_macro}_OPEN(&{n.ram}, &{n.ram}Conf, &Error);")
            w.line("if (Error) return 1;")

    def _alloc_l3(self, w: Writer) -> None:
        n = self.n
        for var, size in ((n.l3, self.L3S), (f"{n.l3}_Dyn", self.L3D)):
            if self.has_ram:
                w.line(f"{var} = ({n.ram_macro}_POINTER) {n.ram_macro}_ALLOC(&{n.ram}, {size});")
                w.line(f"if ({var} == 0) return 2;")

    def _alloc(self, w: Writer, what: str) -> None:
        n = self.n
        if what == "L2":
            size = self.S + self.D if self.warm == 1 else self.S
            w.line(f"{n.l2} = (AT_L2_POINTER) AT_L2_ALLOC(0, {size});")
            w.line(f"if ({n.l2} == 0) return 3;")
        elif what == "L2_DYN":
            w.line(f"{self.dyn} = (AT_L2_POINTER) AT_L2_ALLOC(0, {self.D});")
            w.line(f"if ({self.dyn} == 0) return 3;")
        else:
            w.line(f"{n.l1} = (AT_L1_POINTER) AT_L1_ALLOC(0, {self.L1});")
            w.line(f"if ({n.l1} == 0) return 4;")

    def _promotions(self, w: Writer, static: bool) -> None:
        """The constructor's copies of promoted constants, in the order the layers use them."""
        g, n = self.g, self.n
        order = [t for layer in g.layers for t in layer.bindings.values()]
        promoted = sorted(g.promoted, key=order.index)
        if not promoted:
            return
        ev = n.flash_event + "1"
        w.line(f"{n.flash_macro}_FC_EVENT _{ev}, *{ev} = &_{ev};")
        for name in promoted:
            t = g.tensors[name]
            area, off = g.home(name)
            level = "L2" if area == "L2" else "L3"
            via = "" if level == "L2" else " (on GAP, through an L2 buffer)"
            # One line, as the document shows it.
            w.line(f"/* {'Static ' if static else ''}Moving {name}, size {t.size} from {n.flash} "
                   f"at {t.flash} to (size {t.size}) {level} at {off}..{off + t.size - 1}{via} */")
            base = n.l2 if level == "L2" else n.l3
            w.line(f"{n.flash_macro}_FC_COPY(&{n.flash}, (({n.flash_macro}_EXT_ADDR_TYPE) 0 + "
                   f"{t.flash}), (({n.flash_macro}_INT_ADDR_TYPE) {base} + {off}), {t.size}, 0, "
                   f"{ev});")
            w.line(f"{n.flash_macro}_FC_WAIT(&{n.flash}, {ev});")

    def construct(self) -> str:
        g, w, warm = self.g, Writer(), self.warm
        name = g.name
        if warm == 3:
            w.line(f"int {name}_Construct(int DoL1Alloc, int DoL2Alloc, int DoL2DynAlloc, "
                   f"int DoL3Init, int DoL3Alloc, int DoPromotion)")
            with w.block():
                if self.has_flash or self.has_ram:
                    with w.block("if (DoL3Init)"):
                        self._open_l3(w)
                else:
                    w.line("(void) DoL3Init;")
                if self.has_ram:
                    with w.block("if (DoL3Alloc)"):
                        self._alloc_l3(w)
                else:
                    w.line("(void) DoL3Alloc;")
                with w.block("if (DoL2Alloc)"):
                    self._alloc(w, "L2")
                with w.block("if (DoL2DynAlloc)"):
                    self._alloc(w, "L2_DYN")
                with w.block("if (DoL1Alloc)"):
                    self._alloc(w, "L1")
                if g.promoted:
                    with w.block("if (DoPromotion)"):
                        self._promotions(w, False)
                else:
                    w.line("(void) DoPromotion;")
                w.line("return 0;")
            return w.text()
        w.line(f"int {name}_Construct({'int Warm' if warm else 'void'})")
        with w.block():
            if warm:
                w.comment("Warm: only the L1 (and, with WARM_L2_DYN_L1, the dynamic L2) "
                          "are allocated.")
                with w.block("if (Warm)"):
                    self._alloc(w, "L1")
                    if warm == 2:
                        with w.block("if (Warm == 2)"):
                            self._alloc(w, "L2_DYN")
                    w.line("return 0;")
            self._open_l3(w)
            w.line()
            self._alloc_l3(w)
            self._alloc(w, "L2")
            if warm != 1:
                self._alloc(w, "L2_DYN")
            self._alloc(w, "L1")
            self._promotions(w, True)
            w.line("return 0;")
        return w.text()

    def _free(self, w: Writer, what: str) -> None:
        n = self.n
        if what == "L2":
            w.line(f"AT_L2_FREE(0, {n.l2}, {self.S + self.D if self.warm == 1 else self.S});")
        elif what == "L2_DYN":
            w.line(f"AT_L2_FREE(0, {self.dyn}, {self.D});")
        elif what == "L1":
            w.line(f"AT_L1_FREE(0, {n.l1}, {self.L1});")
        elif what == "L3":
            w.line(f"{n.ram_macro}_FREE(&{n.ram}, {n.l3}, {self.L3S});")
            w.line(f"{n.ram_macro}_FREE(&{n.ram}, {n.l3}_Dyn, {self.L3D});")
        else:
            if self.has_flash:
                w.line(f"{n.flash_macro}_CLOSE(&{n.flash});")
            if self.has_ram:
                w.line(f"{n.ram_macro}_CLOSE(&{n.ram});")

    def destruct(self) -> str:
        g, w, warm = self.g, Writer(), self.warm
        if warm == 3:
            w.line(f"int {g.name}_Destruct(int DoL1Dealloc, int DoL2Dealloc, int DoL2DynDealloc, "
                   f"int DoL3Dealloc, int DoL3DeInit)")
            with w.block():
                for flag, what in (("DoL2Dealloc", "L2"), ("DoL2DynDealloc", "L2_DYN"),
                                   ("DoL1Dealloc", "L1")):
                    with w.block(f"if ({flag})"):
                        self._free(w, what)
                if self.has_ram:
                    with w.block("if (DoL3Dealloc)"):
                        self._free(w, "L3")
                else:
                    w.line("(void) DoL3Dealloc;")
                if self.has_flash or self.has_ram:
                    with w.block("if (DoL3DeInit)"):
                        self._free(w, "close")
                else:
                    w.line("(void) DoL3DeInit;")
                w.line("return 0;")
            return w.text()
        w.line(f"int {g.name}_Destruct({'int Warm' if warm else 'void'})")
        with w.block():
            if warm:
                with w.block("if (Warm)"):
                    self._free(w, "L1")
                    if warm == 2:
                        with w.block("if (Warm == 2)"):
                            self._free(w, "L2_DYN")
                    w.line("return 0;")
            self._free(w, "L2")
            if warm != 1:
                self._free(w, "L2_DYN")
            self._free(w, "L1")
            if self.has_ram:
                self._free(w, "L3")
            self._free(w, "close")
            w.line("return 0;")
        return w.text()

    # -- the runner ------------------------------------------------------------------------

    def runner(self) -> str:
        g, n, w = self.g, self.n, Writer()
        args = [f"{t.ctype} {t.name}" for t in g.args]
        if self.warm == 3:
            args.append("void * _L1_Memory")
        w.line(f"int {g.name}(")
        w.line("        " + ",\n        ".join(args) + ")")
        with w.block():
            if self.warm == 3:
                w.line(f"if (_L1_Memory) {n.l1} = (AT_L1_POINTER) _L1_Memory;")
            _, fetches = g.moves()
            events = {}
            for moves in fetches:
                for name, *_ in moves:
                    prefix = n.flash_event if g.tensors[name].memory == "L3_FLASH" else n.ram_event
                    events[name] = f"{prefix}{len(events) + 1}"
            for name, ev in events.items():
                macro = n.flash_macro if g.tensors[name].memory == "L3_FLASH" else n.ram_macro
                w.line(f"{macro}_CL_EVENT _{ev}, *{ev} = &_{ev};")
            waits = {f.tensor: f.tensor for f in g.fetches}
            for i, layer in enumerate(g.layers):
                for name, src, so, dst, do in fetches[i]:
                    t = g.tensors[name]
                    macro = n.flash_macro if src == "L3_FLASH" else n.ram_macro
                    dev = n.flash if src == "L3_FLASH" else n.ram
                    ext = f"(({macro}_EXT_ADDR_TYPE) 0 + {so})" if src == "L3_FLASH" else \
                        f"(({macro}_EXT_ADDR_TYPE) {self.where(src, so, name)})"
                    w.comment(f"Fetching {name}, size {t.size} from {self.describe(src, so)} to "
                              f"dynamic L2 at {do}..{do + t.size - 1}, for layer "
                              f"{g.layers[g.tensors[name].live[0]].name}")
                    w.line(f"{macro}_CL_COPY(&{dev}, {ext}, (({macro}_INT_ADDR_TYPE) "
                           f"{self.where(dst, do, name)}), {t.size}, 0, {events[name]});")
                for t in list(waits):
                    if g.tensors[t].live[0] == i:
                        macro = n.flash_macro if g.tensors[t].memory == "L3_FLASH" else n.ram_macro
                        dev = n.flash if g.tensors[t].memory == "L3_FLASH" else n.ram
                        w.line(f"{macro}_CL_WAIT(&{dev}, {events[t]}); /* Wait for {t} */")
                        del waits[t]
                self._call(w, i, layer)
            if self.warm == 3:
                w.line(f"if (_L1_Memory) {n.l1} = 0;")
            w.line("return 0;")
        return w.text()

    def _call(self, w: Writer, i: int, layer) -> None:
        g = self.g
        streams = f"; streams {', '.join(sorted(layer.streamed))} from L3" if layer.streamed \
            else ""
        w.comment(f"Layer {i}: {layer.name}, {layer.tiling.n_tiles} tile(s) of "
                  f"{layer.tiling.tile} line(s), L1 {layer.tiling.l1_used} B{streams}")
        if g.ctrl[AT_GraphCtrl.AT_GRAPH_TRACE_EXEC]:
            w.line(f'printf("%s\\n", {c_string(trace_line(g.name, i, layer.name))});')
            w.line("fflush(stdout);")
        params = {b.name: b for b, _ in layer.program.params}
        lines = []
        for carg, tensor in layer.bindings.items():
            area, off = g.read_location(i, tensor)
            ptr = self.where(area, off, tensor)
            lines.append((f"({param_type(params[carg].dtype)} *) {ptr}",
                          f"{carg}: {tensor}, {self.describe(area, off)}"))
        w.line(f"{layer.name}(")
        for k, (value, note) in enumerate(lines):
            end = "," if k < len(lines) - 1 else ""
            w.line(f"    {value}{end}  /* {note} */")
        w.line(");")

    def memory(self) -> str:
        w = Writer()
        w.line(f"int {self.g.name}_Memory(AT_MEM_TYPE Which)")
        with w.block():
            with w.block("switch (Which)"):
                for case, value, what in (("AT_L1_MEM", self.L1, "L1 Memory"),
                                          ("AT_L2_MEM", self.S, "L2 Memory, permanent"),
                                          ("AT_L2_DYN_MEM", self.D, "L2 Memory, dynamic"),
                                          ("AT_L3_MEM", self.L3S, "L3 Memory, permanent"),
                                          ("AT_L3_DYN_MEM", self.L3D, "L3 Memory, dynamic"),
                                          ("AT_CTXT_MEM", 0, "no context: not re-entrant")):
                    w.line(f"case {case + ':':<15}return {value}; /* {what} */")
            w.line("return 0;")
        return w.text()


# -- running on the host --------------------------------------------------------------------

def write(g, directory: str | os.PathLike, c_name: str | None = None) -> tuple[Path, Path]:
    """Write the graph's C file and its flash file into ``directory``: (C path, flash path)."""
    folder = Path(directory)
    c_path = folder / file_name(c_name or f"{g.name}Kernels.c", "C file name")
    folder.mkdir(parents=True, exist_ok=True)
    c_path.write_text(g.c_source())
    flash = folder / _Names(g).flash_file
    flash.write_bytes(g.flash_image())
    return c_path, flash


def linked(g) -> bool:
    """Whether graph ``g``'s compiled C would be found without generating it: ``g`` is known
    by a key (``graph_link.known_as``: ``npukit.onnx.load``'s host plans) and the compile
    cache's link for it leads to an entry that passes every check."""
    key = graph_link.link_key(g)
    flash = _Names(g).flash_file if g.constants else None
    return key is not None and cache.linked(toolchain.cache_dir(), key, flash) is not None


def _destruct(lock: threading.Lock, live: list[bool], destruct) -> None:
    with lock:
        if live[0]:
            destruct()
            live[0] = False


def run_c(g, args: dict[str, np.ndarray]) -> Result:
    """Run graph ``g``'s C on arrays already checked, through its handle
    (``g.compile("c")``: built and constructed on the first run)."""
    return g.compile("c").run(args)


def _library(g):
    """The graph's C compiled in pieces and loaded (a private copy). When the pieces fail
    (a basic kernel's C defines data or functions the split cannot share) a warning says
    which piece and why, and the graph's single unit is built: its errors, if it fails
    too, are the ones raised."""
    units, main = c_pieces(g)
    try:
        return toolchain.library_in_pieces(units, main, private=True)
    except toolchain.CompileTimeoutError:
        raise
    except CompilerError as exc:
        warnings.warn(f"graph {g.name!r}: its C compiled in pieces failed, so it is compiled "
                      f"as one unit instead (slower: one compiler process, nothing shared "
                      f"with other graphs): {exc}", RuntimeWarning, stacklevel=3)
        return toolchain.library(g.c_source(), private=True)


class CompiledGraph:
    """A planned graph's C, compiled, loaded and constructed once (``Graph.compile("c")``):
    ``h(**arrays)`` checks the arrays and makes one C call, the runner: no planning, no
    code generation, no construction (the promotions from flash are made once). The handle
    loads a copy of the library of its own, so its memories are its alone (another graph
    with the same C but other constants has its own). ``close()``, leaving a ``with``
    block or dropping the handle calls the destructor; a later call constructs again."""

    def __init__(self, g):
        self.g = g
        lib, flash = graph_link.loaded(g, _library,
                                       _Names(g).flash_file if g.constants else None)
        warm = g.ctrl[AT_GraphCtrl.AT_GRAPH_WARM_CONSTRUCT]
        self.construct, self.runner = lib[f"{g.name}_Construct"], lib[g.name]
        destruct = lib[f"{g.name}_Destruct"]
        for f in (self.construct, self.runner, destruct):
            f.restype = ctypes.c_int
        self.c_args = {0: (), 1: (0,), 2: (0,), 3: (1,) * 6}[warm]
        d_args = {0: (), 1: (0,), 2: (0,), 3: (1,) * 5}[warm]
        self.construct.argtypes = [ctypes.c_int] * len(self.c_args)
        destruct.argtypes = [ctypes.c_int] * len(d_args)
        self.runner.argtypes = [ctypes.c_void_p] * (len(g.args) + (warm == 3))
        self.l1_arg = [None] if warm == 3 else []
        if flash is not None:
            lib.npk_host_flash_dir.argtypes = [ctypes.c_char_p]
            lib.npk_host_flash_dir(str(flash).encode())
        self.lock = threading.Lock()  # one call at a time: the memories are shared
        # Whether constructed, and how to destruct: not the handle itself, which the
        # finalizer (destructing when the handle is dropped) must not hold.
        self.destroy = (self.lock, [False], lambda: destruct(*d_args))
        weakref.finalize(self, _destruct, *self.destroy)

    def __call__(self, **arrays) -> Result:
        return self.run(self.g.check_arrays(arrays))

    def run(self, args: dict[str, np.ndarray]) -> Result:
        """Run on arrays already checked (``Graph.check_arrays``)."""
        g = self.g
        copies = {n: np.ascontiguousarray(a) if a.flags.c_contiguous and
                  a.ctypes.data % a.itemsize == 0 else np.array(a, order="C")
                  for n, a in args.items()}
        ptrs = [copies[t.name].ctypes.data for t in g.args] + self.l1_arg
        live = self.destroy[1]
        with self.lock:
            if not live[0]:
                rc = self.construct(*self.c_args)
                if rc:
                    raise NpukitError(f"graph {g.name!r}: {g.name}_Construct returned {rc} "
                                      f"(1: flash or L3 open failed, 2: L3, 3: L2, 4: L1 "
                                      f"allocation failed)")
                live[0] = True
            t0 = time.perf_counter()
            rc = self.runner(*ptrs)
            wall = time.perf_counter() - t0
        if rc:
            raise NpukitError(f"graph {g.name!r}: the runner returned {rc}")
        outputs = {}
        for n, a in args.items():
            if g.spec.args[n].Dir != ArgDirection.ARG_DIR_IN:
                if copies[n] is not a:
                    a[...] = copies[n].reshape(a.shape)
                outputs[n] = a
        return Result(outputs, None, None, wall)

    def close(self) -> None:
        """Call the destructor now (if constructed); a later call constructs again."""
        _destruct(*self.destroy)

    def __enter__(self) -> CompiledGraph:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
