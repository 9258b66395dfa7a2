"""``npukit_at_emul.h``: the GAP SDK's AutoTiler API (``AT_L2_COPY``, ``AT_FORK``,
``AT_HYPERRAM_*``, ``AT_HYPERFLASH_FS_*``, ``gap_coreid`` ...) on a host, written by npukit
from the API's documented semantics, for building the C of ``npukit.tiler.gap_sdk`` with a
system compiler (``make emul``).

What it adds to a plain emulation, for checking the generated code:

- every arena (``AT_L1_ALLOC``, ``AT_L2_ALLOC``, ``AT_HYPERRAM_ALLOC``) lies between two
  64-byte guards of a known pattern, and is filled with a poison byte; ``*_FREE`` (called by
  ``<Name>CNN_Destruct``) checks both guards and counts every one overwritten;
- every transfer (``AT_L2_COPY``/``COPY2D``, ``AT_HYPERRAM_CL_COPY``/``COPY2D``,
  ``AT_HYPERFLASH_FS_*_COPY``) is counted for the layer running (``NPK_LAYER_BEGIN``);
- the cluster timer (``gap_cl_readhwtimer``) reads a clock that ``NPK_LAYER_END`` advances
  by the cycles npukit's cycle model predicts for the layer, so the ``AT_GraphPerf`` table a
  ``-DPERF`` build prints holds the predicted cycles.

``main_c`` and ``MAKEFILE`` are the rest of the host build: the program that reads the
inputs, runs the graph and writes the outputs, and the ``emul`` / ``check`` / ``clean``
targets.

Variables shared by the translation units are defined in the one that defines
``NPK_AT_EMUL_IMPLEMENTATION`` before including the header (the generated ``main.c``).
"""

from __future__ import annotations

from ..cdecl import c_string, comment_text, parse_ctype

HEADER = r"""/* npukit_at_emul.h: the GAP SDK AutoTiler API on a host (written by npukit).
 *
 * Transfers are copies, complete when issued: an event is a flag set by a copy and
 * cleared by the wait on it. AT_L2_COPY2D(Dev, Ext, Loc, Size, Stride, Length, Dir, Event)
 * moves Size bytes as lines of Length bytes, Stride bytes apart on the external (L2) side
 * and packed on the local (L1) side; Dir 0 moves external to local, 1 local to external.
 * AT_FORK(Cores, Entry, Arg) runs Entry(Arg) once per core, core 0 first, gap_coreid()
 * saying which: a basic kernel must not rely on its cores running at the same time.
 * Arenas have guard bytes on both sides, checked when they are freed. */
#ifndef NPUKIT_AT_EMUL_H
#define NPUKIT_AT_EMUL_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef signed char Word8;
typedef unsigned char Wordu8;
typedef short int Word16;
typedef unsigned short int Wordu16;
typedef int Word32;
typedef unsigned int Wordu32;

#define L1_CL_MEM
#define L2_MEM

#ifndef NPK_EMUL_CORES
#define NPK_EMUL_CORES 8
#endif
#define NPK_EMUL_MAX_LAYERS 1024
#define NPK_EMUL_GUARD 64
#define NPK_EMUL_GUARD_BYTE 0xA5
#define NPK_EMUL_POISON_BYTE 0xCD

/* ---- State shared by every translation unit (defined in the one implementing it) ---- */
extern int npk_emul_core;                /* the core a forked basic kernel runs as */
extern int npk_emul_layer;               /* the layer running, -1 in the constructor */
extern unsigned long npk_emul_clock;     /* the emulated cluster timer, in cycles */
extern unsigned long npk_emul_transfers[NPK_EMUL_MAX_LAYERS + 1]; /* [0]: constructor */
extern unsigned long npk_emul_bytes[NPK_EMUL_MAX_LAYERS + 1];
extern int npk_emul_broken_guards;       /* guards found overwritten when freeing */

#ifdef NPK_AT_EMUL_IMPLEMENTATION
int npk_emul_core = 0;
int npk_emul_layer = -1;
unsigned long npk_emul_clock = 0;
unsigned long npk_emul_transfers[NPK_EMUL_MAX_LAYERS + 1];
unsigned long npk_emul_bytes[NPK_EMUL_MAX_LAYERS + 1];
int npk_emul_broken_guards = 0;
#endif

/* ---- Cluster ---- */
static inline int gap_coreid(void) { return npk_emul_core; }
static inline int gap_ncore(void) { return NPK_EMUL_CORES; }
static inline void gap_waitbarrier(int Barrier) { (void) Barrier; }
static inline unsigned int gap_cl_readhwtimer(void) { return (unsigned int) npk_emul_clock; }
static inline unsigned int gap_fc_readhwtimer(void) { return (unsigned int) npk_emul_clock; }
#define gap_cl_starttimer() ((void) 0)
#define gap_cl_resethwtimer() ((void) 0)

/* Entry(Arg) once per core, core 0 first. The entry travels as a void pointer, as the
   SDK's fork takes it; it is converted back through its bytes (no function pointer cast). */
static inline void npk_emul_fork(int Cores, void *Entry, void *Arg)
{
    void (*Fn)(void *);
    memcpy(&Fn, &Entry, sizeof Fn);
    for (npk_emul_core = 0; npk_emul_core < Cores; npk_emul_core++) Fn(Arg);
    npk_emul_core = 0;
}
#define AT_FORK(Cores, Entry, Arg) npk_emul_fork((Cores), (Entry), (Arg))
#define AT_FORK_WAIT() ((void) 0)

/* ---- Layers: which one runs (transfer counts), and its predicted cycles (the timer) ---- */
static inline void npk_emul_layer_begin(int Layer)
{
    npk_emul_layer = Layer < NPK_EMUL_MAX_LAYERS ? Layer : NPK_EMUL_MAX_LAYERS - 1;
}
static inline void npk_emul_layer_end(int Layer, unsigned long Cycles)
{
    (void) Layer;
    npk_emul_clock += Cycles;
    npk_emul_layer = -1;
}
#define NPK_LAYER_BEGIN(Layer) npk_emul_layer_begin(Layer)
#define NPK_LAYER_END(Layer, Cycles) npk_emul_layer_end((Layer), (Cycles))

/* ---- Arenas: Size bytes between two guards; the block's size is kept before them ---- */
static inline char *npk_emul_alloc(size_t Size)
{
    char *Raw = (char *) malloc(Size + 2 * NPK_EMUL_GUARD + 16);
    if (!Raw) return 0;
    memcpy(Raw, &Size, sizeof Size);
    memset(Raw + 16, NPK_EMUL_GUARD_BYTE, NPK_EMUL_GUARD);
    memset(Raw + 16 + NPK_EMUL_GUARD, NPK_EMUL_POISON_BYTE, Size);
    memset(Raw + 16 + NPK_EMUL_GUARD + Size, NPK_EMUL_GUARD_BYTE, NPK_EMUL_GUARD);
    return Raw + 16 + NPK_EMUL_GUARD;
}
static inline void npk_emul_free(char *Block, const char *What)
{
    char *Raw;
    size_t Size, K;
    int Before = 0, After = 0;
    if (!Block) return;
    Raw = Block - NPK_EMUL_GUARD - 16;
    memcpy(&Size, Raw, sizeof Size);
    for (K = 0; K < NPK_EMUL_GUARD; K++) {
        Before |= (unsigned char) Raw[16 + K] != NPK_EMUL_GUARD_BYTE;
        After |= (unsigned char) Block[Size + K] != NPK_EMUL_GUARD_BYTE;
    }
    if (Before || After) {
        fprintf(stderr, "npukit emulation: the guard %s the %s arena (%lu bytes) was "
                "overwritten\n", Before ? (After ? "before and after" : "before") : "after",
                What, (unsigned long) Size);
        npk_emul_broken_guards++;
    }
    free(Raw);
}

typedef char *AT_L1_POINTER;
typedef char *AT_L2_POINTER;
#define AT_L1_ALLOC(Dev, Size) ((void) (Dev), npk_emul_alloc((size_t) (Size)))
#define AT_L1_FREE(Dev, Ptr, Size) ((void) (Dev), (void) (Size), npk_emul_free((Ptr), "L1"))
#define AT_L2_ALLOC(Dev, Size) ((void) (Dev), npk_emul_alloc((size_t) (Size)))
#define AT_L2_FREE(Dev, Ptr, Size) ((void) (Dev), (void) (Size), npk_emul_free((Ptr), "L2"))

/* ---- Memory locations (the CONF_INIT argument) ---- */
enum {
    AT_MEM_UNDEF, AT_MEM_L3_HRAM, AT_MEM_L3_QSPIRAM, AT_MEM_L3_OSPIRAM, AT_MEM_L3_DEFAULTRAM,
    AT_MEM_L3_HFLASH, AT_MEM_L3_QSPIFLASH, AT_MEM_L3_OSPIFLASH, AT_MEM_L3_MRAMFLASH,
    AT_MEM_L3_DEFAULTFLASH, AT_MEM_L2, AT_MEM_L1
};

/* ---- Copies: Size bytes in lines of Length, Stride apart on the external side ---- */
static inline void npk_emul_copy(char *Ext, char *Loc, long Size, long Stride, long Length,
                                 int Dir)
{
    long Done, K;
    int Slot = npk_emul_layer + 1;
    if (Size <= 0) return;
    if (Length <= 0 || Length > Size) Length = Size;
    npk_emul_transfers[Slot]++;
    npk_emul_bytes[Slot] += (unsigned long) Size;
    for (Done = 0; Done < Size; Done += Length, Ext += Stride, Loc += Length) {
        long Chunk = Size - Done < Length ? Size - Done : Length;
        for (K = 0; K < Chunk; K++) {
            if (Dir) Ext[K] = Loc[K];
            else Loc[K] = Ext[K];
        }
    }
}

typedef unsigned int AT_L2_EVENT;
typedef char *AT_L2_EXT_ADDR_TYPE;
typedef char *AT_L2_INT_ADDR_TYPE;
#define AT_L2_EXT2LOC 0
#define AT_L2_LOC2EXT 1
#define AT_L2_COPY(Dev, Ext, Loc, Size, Dir, Event) \
    ((void) (Dev), *(Event) = 1, \
     npk_emul_copy((char *) (Ext), (char *) (Loc), (long) (Size), (long) (Size), \
                   (long) (Size), (Dir)))
#define AT_L2_COPY2D(Dev, Ext, Loc, Size, Stride, Length, Dir, Event) \
    ((void) (Dev), *(Event) = 1, \
     npk_emul_copy((char *) (Ext), (char *) (Loc), (long) (Size), (long) (Stride), \
                   (long) (Length), (Dir)))
#define AT_L2_WAIT(Dev, Event) ((void) (Dev), *(Event) = 0)

/* ---- L3 RAM (HyperRAM): heap arenas with guards ---- */
typedef int AT_HYPERRAM_T;
typedef int AT_HYPERRAM_CONF_T;
typedef unsigned int AT_HYPERRAM_CL_EVENT;
typedef unsigned int AT_HYPERRAM_FC_EVENT;
typedef char *AT_HYPERRAM_POINTER;
typedef char *AT_HYPERRAM_EXT_ADDR_TYPE;
typedef char *AT_HYPERRAM_INT_ADDR_TYPE;
#define AT_HYPERRAM_CONF_INIT(Conf, Type, Name) (*(Conf) = (int) (Type) + (Name))
#define AT_HYPERRAM_OPEN(Dev, Conf, Err) (*(Dev) = *(Conf), *(Err) = 0)
#define AT_HYPERRAM_CLOSE(Dev) ((void) (Dev))
#define AT_HYPERRAM_ALLOC(Dev, Size) ((void) (Dev), npk_emul_alloc((size_t) (Size)))
#define AT_HYPERRAM_FREE(Dev, Ptr, Size) \
    ((void) (Dev), (void) (Size), npk_emul_free((Ptr), "L3 RAM"))
#define AT_HYPERRAM_CL_COPY(Dev, Ext, Loc, Size, Dir, Event) \
    AT_L2_COPY(Dev, Ext, Loc, Size, Dir, Event)
#define AT_HYPERRAM_CL_COPY2D(Dev, Ext, Loc, Size, Stride, Length, Dir, Event) \
    AT_L2_COPY2D(Dev, Ext, Loc, Size, Stride, Length, Dir, Event)
#define AT_HYPERRAM_CL_WAIT(Dev, Event) AT_L2_WAIT(Dev, Event)
#define AT_HYPERRAM_FC_COPY AT_HYPERRAM_CL_COPY
#define AT_HYPERRAM_FC_WAIT AT_HYPERRAM_CL_WAIT

/* ---- L3 flash with a file system (HyperFlash FS): the constants file, read by offset ---- */
typedef FILE *AT_HYPERFLASH_FS_T;
typedef int AT_HYPERFLASH_FS_CONF_T;
typedef unsigned int AT_HYPERFLASH_FS_EXT_ADDR_TYPE;
typedef void *AT_HYPERFLASH_FS_INT_ADDR_TYPE;
typedef unsigned int AT_HYPERFLASH_FS_FC_EVENT;
typedef unsigned int AT_HYPERFLASH_FS_CL_EVENT;
#define AT_HYPERFLASH_FS_CONF_INIT(Conf, Type, Name) (*(Conf) = (int) (Type) + (Name))
#define AT_HYPERFLASH_FS_OPEN(File, Conf, Name, Err) \
    ((void) (Conf), *(File) = fopen((Name), "rb"), *(Err) = *(File) == NULL)
#define AT_HYPERFLASH_FS_CLOSE(File) ((void) (*(File) ? fclose(*(File)) : 0), *(File) = NULL)

/* Size bytes from flash offset Ext to Loc; a read past the file's end stops the program. */
static inline void npk_emul_flash_copy(FILE *File, unsigned int Ext, void *Loc, long Size,
                                       int Dir)
{
    int Slot = npk_emul_layer + 1;
    if (Size <= 0) return;
    if (Dir != 0 || fseek(File, (long) Ext, SEEK_SET) != 0 ||
            fread(Loc, 1, (size_t) Size, File) != (size_t) Size) {
        fprintf(stderr, "npukit emulation: flash read of %ld bytes at %u failed\n", Size, Ext);
        exit(2);
    }
    npk_emul_transfers[Slot]++;
    npk_emul_bytes[Slot] += (unsigned long) Size;
}
/* Size bytes in lines of Length bytes, Stride apart in the flash file, packed at Loc. */
static inline void npk_emul_flash_copy2d(FILE *File, unsigned int Ext, void *Loc, long Size,
                                         long Stride, long Length, int Dir)
{
    long Done;
    char *To = (char *) Loc;
    int Slot = npk_emul_layer + 1;
    if (Size <= 0) return;
    if (Length <= 0 || Length > Size) Length = Size;
    for (Done = 0; Done < Size; Done += Length, Ext += (unsigned int) Stride, To += Length) {
        long Chunk = Size - Done < Length ? Size - Done : Length;
        npk_emul_flash_copy(File, Ext, To, Chunk, Dir);
    }
    /* one transfer, not one a line */
    npk_emul_transfers[Slot] -= (unsigned long) ((Size + Length - 1) / Length) - 1;
}
#define AT_HYPERFLASH_FS_CL_COPY2D(File, Ext, Loc, Size, Stride, Length, Dir, Event) \
    (*(Event) = 1, npk_emul_flash_copy2d(*(File), (unsigned int) (Ext), (void *) (Loc), \
                                         (long) (Size), (long) (Stride), (long) (Length), \
                                         (Dir)))
#define AT_HYPERFLASH_FS_FC_COPY(File, Ext, Loc, Size, Dir, Event) \
    (*(Event) = 1, npk_emul_flash_copy(*(File), (unsigned int) (Ext), (void *) (Loc), \
                                       (long) (Size), (Dir)))
#define AT_HYPERFLASH_FS_CL_COPY AT_HYPERFLASH_FS_FC_COPY
#define AT_HYPERFLASH_FS_FC_WAIT(File, Event) ((void) (File), *(Event) = 0)
#define AT_HYPERFLASH_FS_CL_WAIT AT_HYPERFLASH_FS_FC_WAIT

#endif /* NPUKIT_AT_EMUL_H */
"""


# -- the host program and the Makefile ---------------------------------------------------------

def main_c(g, stems: dict[str, str]) -> str:
    """``main.c``: read ``inputs/<stem>.bin``, construct, run, destruct, write
    ``outputs/<stem>.bin``; print each layer's transfers and, with -DPERF, the cycles."""
    n = g.name
    from .gap_c import _writer

    w = _writer()
    w.lines += [f"/* main.c: runs graph {n} on the host through npukit's emulation of the GAP",
                " * SDK (generated by npukit). Usage: ./main_emul [INPUT_DIR [OUTPUT_DIR]]. */",
                "#define NPK_AT_EMUL_IMPLEMENTATION", f'#include "{n}Kernels.h"', "",
                "/* Exactly Size bytes of the file Dir/Name (Write 0) or into it (Write 1). */",
                "static int npk_file(const char *Dir, const char *Name, void *Data, long Size, "
                "int Write)",
                "{",
                "\tchar Path[4096];",
                "\tFILE *F;",
                "\tlong Got;",
                "\tint Extra = 0;",
                '\tif (snprintf(Path, sizeof Path, "%s/%s", Dir, Name) >= (int) sizeof Path) '
                "return 1;",
                '\tF = fopen(Path, Write ? "wb" : "rb");',
                '\tif (!F) { fprintf(stderr, "cannot open %s\\n", Path); return 1; }',
                "\tGot = Write ? (long) fwrite(Data, 1, (size_t) Size, F) : "
                "(long) fread(Data, 1, (size_t) Size, F);",
                "\tif (!Write) Extra = fgetc(F) != EOF;",
                "\tif (fclose(F) != 0 || Got != Size || Extra) {",
                '\t\tfprintf(stderr, "%s: expected %ld bytes\\n", Path, Size);',
                "\t\treturn 1;",
                "\t}",
                "\treturn 0;",
                "}", "",
                "int main(int argc, char **argv)", "{"]
    with w.indented():
        w.line('const char *InDir = argc > 1 ? argv[1] : "inputs";')
        w.line('const char *OutDir = argc > 2 ? argv[2] : "outputs";')
        w.line("int Rc, Layer;")
        for t in g.args:
            ctype = str(parse_ctype(t.ctype)).replace("__restrict__", "").replace("*", "").strip()
            kind = "input" if t.kind != "out" and t.name in stems and _is_input(g, t.name) else \
                "output"
            w.line(f"/* {comment_text(t.name)}: {t.size} bytes, {kind} */")
            w.line(f"{ctype} *{t.name} = ({ctype} *) malloc({max(t.size, 1)});")
            w.line(f"if (!{t.name}) return 1;")
            if kind == "input":
                w.line(f"if (npk_file(InDir, {c_string(stems[t.name] + '.bin')}, {t.name}, "
                       f"{t.size}, 0)) return 1;")
        w.line("/* Construct (open the flash, allocate the arenas, promote constants), run, "
               "destruct */")
        w.line(f"Rc = {n}CNN_Construct();")
        w.line(f'if (Rc) {{ fprintf(stderr, "{n}CNN_Construct failed: %d\\n", Rc); return 1; }}')
        w.line(f"Rc = {n}CNN({', '.join(t.name for t in g.args)});")
        w.line(f"{n}CNN_Destruct();")
        w.line(f'if (Rc) {{ fprintf(stderr, "{n}CNN failed: %d\\n", Rc); return 1; }}')
        for t in g.args:
            if not _is_input(g, t.name):
                w.line(f"if (npk_file(OutDir, {c_string(stems[t.name] + '.bin')}, {t.name}, "
                       f"{t.size}, 1)) return 1;")
        w.line("/* The transfers each layer issued (its fetches included) */")
        w.line('printf("transfers construct: %lu\\n", npk_emul_transfers[0]);')
        w.line(f"for (Layer = 0; Layer < {n}_LAYERS; Layer++)")
        w.line('\tprintf("transfers %s: %lu (%lu bytes)\\n", AT_GraphNodeNames[Layer], '
               "npk_emul_transfers[Layer + 1], npk_emul_bytes[Layer + 1]);")
        w.line("#ifdef PERF")
        w.line("{")
        with w.indented():
            w.line("unsigned long Total = 0;")
            w.line('printf("%-40s %12s %14s\\n", "Layer", "Cycles", "Operations");')
            w.line(f"for (Layer = 0; Layer < {n}_LAYERS; Layer++) {{")
            w.line('\tprintf("%-40s %12u %14u\\n", AT_GraphNodeNames[Layer], AT_GraphPerf[Layer], '
                   "AT_GraphOperInfosNames[Layer]);")
            w.line("\tTotal += AT_GraphPerf[Layer];")
            w.line("}")
            w.line('printf("%-40s %12lu\\n", "Total", Total);')
            w.line(f'printf("Cycles predicted by npukit\'s cycle model (emulation, not measured): '
                   f'%s\\n", {n}_Cycle_Model);')
        w.line("}")
        w.line("#endif")
        w.line("if (npk_emul_broken_guards) {")
        w.line('\tfprintf(stderr, "%d arena guard(s) overwritten\\n", npk_emul_broken_guards);')
        w.line("\treturn 3;")
        w.line("}")
        w.line('printf("arena guards intact\\n");')
        for t in g.args:
            w.line(f"free({t.name});")
        w.line("return 0;")
    w.line("}")
    return "\n".join(w.lines) + "\n"


def _is_input(g, name: str) -> bool:
    from .graph_api import ArgDirection
    return g.spec.args[name].Dir == ArgDirection.ARG_DIR_IN


MAKEFILE = """\
# Graph {name} as GAP SDK C (generated by npukit).
#   make emul    builds main_emul on this machine: {name}Kernels.c, npukit_BasicKernels.c and
#                main.c with npukit's emulation of the SDK's API (npukit_at_emul.h)
#   make check   runs it on inputs/ and compares outputs/ with expected/ (npukit's simulator),
#                byte for byte; cmp exits 1 on a difference (make then reports the error)
#   make clean
# On a GAP8 board, build {name}Kernels.c and npukit_BasicKernels.c in a GAP SDK application
# (APP_SRCS) with your own main, and copy {flash} to the board's flash (READFS_FILES).
# Files: {files}
CC ?= cc
CFLAGS ?= -O1 -std=c99 -Wall -Wextra -Werror
# Float operations rounded one at a time, as npukit's simulator computes them (for a 32-bit
# x86 build add -msse2 -mfpmath=sse to CC: the x87 unit keeps excess precision).
EXACT = -ffp-contract=off -fno-trapping-math
EMUL = -D__EMUL__ -DPERF
SRCS = main.c {name}Kernels.c npukit_BasicKernels.c
HDRS = {name}Kernels.h npukit_BasicKernels.h npukit_at_emul.h

emul: main_emul

main_emul: $(SRCS) $(HDRS)
\t$(CC) $(CFLAGS) $(EXACT) $(EMUL) -o $@ $(SRCS)

check: main_emul
\trm -rf outputs
\tmkdir outputs
\t./main_emul inputs outputs
{checks}
\t@echo "outputs identical to expected/ (npukit's simulator)"

clean:
\trm -f main_emul
\trm -rf outputs

.PHONY: emul check clean
"""
