"""A standalone C project for an imported model: the graph's C file and flash file (the
constants), a header, a ``main.c`` that reads each input from a ``.npy`` file, runs the graph
(``<Graph>_Construct``, ``<Graph>``, ``<Graph>_Destruct``) and writes each output as a
``.npy`` file, and a ``Makefile``:

    make            # builds ./model with the system compiler
    make run        # ./model inputs outputs: reads inputs/<name>.npy, writes outputs/<name>.npy
    make check      # run, then compare outputs/ with expected/ byte for byte (cmp)

``expected/`` holds what npukit's own C back end computed for the inputs in ``inputs/``; the
compiler flags keep float32 arithmetic as npukit compiles it (``-ffp-contract=off``), so the
outputs are identical.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from ..c.code import Writer
from ..cdecl import c_string
from ..errors import NpukitError

NPY_DESCR = {"float32": "<f4", "float64": "<f8", "float16": "<f2", "bool": "|b1",
             "int8": "|i1", "uint8": "|u1", "int16": "<i2", "uint16": "<u2", "int32": "<i4",
             "uint32": "<u4", "int64": "<i8", "uint64": "<u8"}

_NPY_C = r"""
/* ---- Reading and writing .npy files (NumPy's format, version 1 to 3) ----
   A file is the magic "\x93NUMPY", two version bytes, the header length (2 bytes in version
   1, 4 after), a Python dict header ('descr', 'fortran_order', 'shape'), then the raw
   little-endian values in row-major order. */
static long npy_read(const char *Path, const char *Descr, void *Data, long Bytes, long Count)
{
    unsigned char Pre[10];
    char Header[4096], Want[64];
    unsigned long Len;
    size_t Elems = 1, Dim;
    long Got;
    const char *S;
    FILE *F = fopen(Path, "rb");
    if (!F) { fprintf(stderr, "cannot open %s\n", Path); return -1; }
    if (fread(Pre, 1, 8, F) != 8 || memcmp(Pre, "\x93NUMPY", 6) != 0) {
        fprintf(stderr, "%s is not a .npy file\n", Path);
        fclose(F);
        return -1;
    }
    if (Pre[6] == 1) {
        if (fread(Pre + 8, 1, 2, F) != 2) { fclose(F); return -1; }
        Len = Pre[8] | (unsigned long)Pre[9] << 8;
    } else {
        unsigned char L4[4];
        if (fread(L4, 1, 4, F) != 4) { fclose(F); return -1; }
        Len = L4[0] | (unsigned long)L4[1] << 8 | (unsigned long)L4[2] << 16 |
              (unsigned long)L4[3] << 24;
    }
    if (Len >= sizeof Header || fread(Header, 1, Len, F) != Len) {
        fprintf(stderr, "%s: header too long\n", Path);
        fclose(F);
        return -1;
    }
    Header[Len] = 0;
    snprintf(Want, sizeof Want, "'descr': '%s'", Descr);
    if (!strstr(Header, Want) || strstr(Header, "'fortran_order': True")) {
        fprintf(stderr, "%s: expected C-ordered %s values, header %s\n", Path, Descr, Header);
        fclose(F);
        return -1;
    }
    S = strstr(Header, "'shape': (");
    if (!S) { fclose(F); return -1; }
    /* The product of the dims, in size_t: a dim or a product past SIZE_MAX is refused
       before it is computed (no wrap-around can make a hostile shape match Count). */
    for (S += 10; *S && *S != ')'; S++) {
        if (*S < '0' || *S > '9') continue;
        for (Dim = 0; *S >= '0' && *S <= '9'; S++) {
            if (Dim > (SIZE_MAX - (size_t)(*S - '0')) / 10) break;
            Dim = Dim * 10 + (size_t)(*S - '0');
        }
        if ((*S >= '0' && *S <= '9') || (Dim != 0 && Elems > SIZE_MAX / Dim)) {
            fprintf(stderr, "%s: the shape in the header has more values than a size_t "
                    "counts\n", Path);
            fclose(F);
            return -1;
        }
        Elems *= Dim;
        S--;
    }
    if (Elems != (size_t)Count) {
        fprintf(stderr, "%s: %lu values, the model's input has %ld\n", Path,
                (unsigned long)Elems, Count);
        fclose(F);
        return -1;
    }
    Got = (long)fread(Data, 1, (size_t)Bytes, F);
    fclose(F);
    if (Got != Bytes) { fprintf(stderr, "%s: file too short\n", Path); return -1; }
    return 0;
}

static int npy_write(const char *Path, const char *Descr, const char *Shape, const void *Data,
                     long Bytes)
{
    char Header[256];
    int N = snprintf(Header, sizeof Header, "{'descr': '%s', 'fortran_order': False, "
                     "'shape': %s, }", Descr, Shape);
    int Total = (10 + N + 1 + 63) / 64 * 64;  /* the header ends with a newline, padded */
    unsigned char Pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
    FILE *F = fopen(Path, "wb");
    if (!F) { fprintf(stderr, "cannot write %s\n", Path); return -1; }
    Pre[8] = (unsigned char)((Total - 10) & 255);
    Pre[9] = (unsigned char)((Total - 10) >> 8);
    fwrite(Pre, 1, 10, F);
    fwrite(Header, 1, (size_t)N, F);
    for (int i = 10 + N; i < Total - 1; i++) fputc(' ', F);
    fputc('\n', F);
    fwrite(Data, 1, (size_t)Bytes, F);
    return fclose(F);
}

/* FNV-1a over the bytes: a short fingerprint of an output. */
static unsigned long fnv1a(const void *Data, long Bytes)
{
    const unsigned char *P = (const unsigned char *)Data;
    unsigned long H = 2166136261ul;
    for (long i = 0; i < Bytes; i++) H = ((H ^ P[i]) * 16777619ul) & 0xFFFFFFFFul;
    return H;
}
"""


def fnv1a(data: bytes) -> int:
    """The fingerprint main.c prints for an output (FNV-1a, 32 bits)."""
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def write_npy(path, a: np.ndarray) -> None:
    """A .npy file with exactly the bytes main.c's ``npy_write`` produces for ``a``."""
    a = np.ascontiguousarray(a)
    text = (f"{{'descr': '{NPY_DESCR[a.dtype.name]}', 'fortran_order': False, "
            f"'shape': {_shape(a.shape)}, }}")
    total = (10 + len(text) + 1 + 63) // 64 * 64
    head = b"\x93NUMPY\x01\x00" + (total - 10).to_bytes(2, "little")
    body = text.encode() + b" " * (total - 10 - len(text) - 1) + b"\n"
    from ..files import write_new
    write_new(path, head + body + a.astype(a.dtype.newbyteorder("<")).tobytes(), "--emit")


def _shape(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def main_c(g) -> str:
    """``main.c``: read the inputs, construct, run, destruct, write the outputs."""
    ports = {p.cname: (name, p) for name, p in list(g.inputs.items()) + list(g.outputs.items())}
    stems = npy_stems(g)
    args = [t for t in g.graph.args]
    name = g.name
    w = Writer()
    w.lines += [f"/* Runs graph {name} (imported by npukit from an ONNX model) on .npy inputs.",
                " * Usage: ./model [INPUT_DIR [OUTPUT_DIR]] (default: inputs outputs); the flash",
                f" * file {name}_L3_Flash_Const.dat is read from the current directory. */",
                "#include <stdint.h>", "#include <stdio.h>", "#include <stdlib.h>",
                "#include <string.h>",
                f'#include "{name}Kernels.h"', _NPY_C]
    w.line("int main(int argc, char **argv)")
    with w.block():
        w.line('const char *InDir = argc > 1 ? argv[1] : "inputs";')
        w.line('const char *OutDir = argc > 2 ? argv[2] : "outputs";')
        w.line("char Path[4096];")
        w.line("int Rc;")
        for t in args:
            onnx_name, p = ports[t.name]
            ctype = t.ctype.replace("*", "").replace("__restrict__", "").strip()
            w.comment(f"{'Input' if onnx_name in g.inputs else 'Output'} {onnx_name!r}: "
                      f"{p.dtype.name} {list(p.shape)}")
            w.line(f"{ctype} *{t.name} = ({ctype} *) malloc({max(t.size, 1)});")
            w.line(f"if (!{t.name}) return 1;")
            if onnx_name in g.inputs:
                w.line(f'snprintf(Path, sizeof Path, "%s/%s.npy", InDir, '
                       f"{c_string(stems[onnx_name])});")
                w.line(f'if (npy_read(Path, "{NPY_DESCR[p.dtype.name]}", {t.name}, {t.size}, '
                       f"{t.count}) != 0) return 1;")
        w.comment("Construct (allocate L1/L2/L3, open the flash file, copy the promoted "
                  "constants), run, destruct.")
        if g.graph.constants:
            w.line('npk_host_flash_dir(".");')
        w.line(f"Rc = {name}_Construct();")
        w.line(f'if (Rc) {{ fprintf(stderr, "{name}_Construct failed: %d\\n", Rc); return 1; }}')
        w.line(f"Rc = {name}({', '.join(t.name for t in args)});")
        w.line(f"{name}_Destruct();")
        w.line(f'if (Rc) {{ fprintf(stderr, "{name} failed: %d\\n", Rc); return 1; }}')
        for t in args:
            onnx_name, p = ports[t.name]
            if onnx_name not in g.outputs:
                continue
            w.line(f'snprintf(Path, sizeof Path, "%s/%s.npy", OutDir, '
                   f"{c_string(stems[onnx_name])});")
            w.line(f'if (npy_write(Path, "{NPY_DESCR[p.dtype.name]}", "{_shape(p.shape)}", '
                   f"{t.name}, {t.size}) != 0) return 1;")
            w.line(f'printf("%s %s fnv1a %08lx\\n", {c_string(onnx_name)}, "{p.dtype.name} '
                   f'{_shape(p.shape)}", fnv1a({t.name}, {t.size}));')
        for t in args:
            w.line(f"free({t.name});")
        w.line("return 0;")
    return w.text() + "\n"


def npy_stems(g) -> dict[str, str]:
    """The name of each input's and output's ``.npy`` file without ``.npy``, by ONNX name:
    the name with anything but ASCII letters, digits, ``.``, ``-`` and ``_`` replaced by
    ``_``; one that would then be taken (also by one differing only in case) gets ``_2``,
    ``_3``, ... in the order the model lists its inputs, then its outputs.

    >>> from types import SimpleNamespace as NS
    >>> npy_stems(NS(inputs={"x": 0}, outputs={"y 1": 0, "y_1": 0, "Y_1": 0}))
    {'x': 'x', 'y 1': 'y_1', 'y_1': 'y_1_2', 'Y_1': 'Y_1_3'}
    """
    import re
    out: dict[str, str] = {}
    taken: set[str] = set()
    for name in dict.fromkeys([*g.inputs, *g.outputs]):
        base = re.sub(r"[^A-Za-z0-9._-]", "_", name) or "_"
        stem, k = base, 1
        while stem.casefold() in taken:
            k += 1
            stem = f"{base}_{k}"
        taken.add(stem.casefold())
        out[name] = stem
    return out


def header(g) -> str:
    """``<Graph>Kernels.h``: the graph's entry points."""
    name = g.name
    args = ", ".join(f"{t.ctype} {t.name}" if t.ctype.endswith("*") else f"{t.ctype} *{t.name}"
                     for t in g.graph.args)
    flash = "void npk_host_flash_dir(const char *Dir);\n" if g.graph.constants else ""
    return (f"/* Entry points of graph {name} (generated by npukit). */\n"
            f"#ifndef {name.upper()}_KERNELS_H\n#define {name.upper()}_KERNELS_H\n"
            f"{flash}"
            f"int {name}_Construct(void);\n"
            f"int {name}({args});\n"
            f"int {name}_Destruct(void);\n#endif\n")


MAKEFILE = """\
# Builds and runs graph {name} (generated by npukit from an ONNX model).
# The .npy file of each input (in inputs/) and output (in outputs/ and expected/):
{files}
# -ffp-contract=off keeps every float32 operation rounded on its own, as npukit compiles it.
CC ?= cc
CFLAGS ?= -O2
CFLAGS += -std=c99 -ffp-contract=off -fno-trapping-math

model: main.c {name}Kernels.c {name}Kernels.h
\t$(CC) $(CFLAGS) -o $@ main.c {name}Kernels.c

run: model
\tmkdir -p outputs
\t./model inputs outputs

check: run
{checks}
\t@echo "outputs identical to expected/"

clean:
\trm -f model
\trm -rf outputs

.PHONY: run check clean
"""


def emit(g, directory, inputs: dict[str, np.ndarray] | None = None,
         expected: dict[str, np.ndarray] | None = None) -> Path:
    """Write the project for OnnxGraph ``g`` into ``directory``; ``inputs`` (by ONNX name)
    go to ``inputs/``, and what npukit's C back end computes for them to ``expected/``
    (``expected`` gives them when already computed). Returns the directory."""
    from ..files import make_folder, new_folder, write_new
    from .check import random_inputs

    for n, p in list(g.inputs.items()) + list(g.outputs.items()):  # before writing anything
        if p.dtype.name not in NPY_DESCR:
            raise NpukitError(f"--emit {str(directory)!r}: {'input' if n in g.inputs else 'output'}"
                              f" {n!r} is {p.dtype.name}; the emitted main.c reads and writes "
                              f"{', '.join(NPY_DESCR)}")
    inputs = inputs if inputs is not None else random_inputs(g)
    if expected is None:
        expected = g.run("c", **inputs).outputs
    # A new or empty folder, every file created (never replaced, no link followed).
    folder = make_folder(directory, "--emit")
    with tempfile.TemporaryDirectory() as tmp:  # the C and flash files, then copied in
        for f in g.graph.write(tmp, f"{g.name}Kernels.c"):
            write_new(folder / f.name, f.read_bytes(), "--emit")
    write_new(folder / f"{g.name}Kernels.h", header(g), "--emit")
    write_new(folder / "main.c", main_c(g), "--emit")
    stems = npy_stems(g)
    for sub, arrays in (("inputs", inputs), ("expected", expected)):
        new_folder(folder / sub, "--emit")
        for n, a in arrays.items():
            write_npy(folder / sub / f"{stems[n]}.npy", a)
    checks = "\n".join(f"\tcmp outputs/{stems[n]}.npy expected/{stems[n]}.npy"
                       for n in g.outputs)
    listing = "\n".join(f"#   {stems[n]}.npy: {'input' if n in g.inputs else 'output'} "
                        f"{ascii(n)}" for n in stems)
    write_new(folder / "Makefile", MAKEFILE.format(name=g.name, checks=checks, files=listing),
              "--emit")
    return folder
