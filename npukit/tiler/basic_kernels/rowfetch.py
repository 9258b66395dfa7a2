"""Rows fetched by index from a table that stays in its home memory (L2, L3 RAM or flash):
the basic kernel of an embedding lookup (ONNX's ``Gather`` on axis 0, and on any axis as
``Planes`` tables), its C template next to its numpy reference.

The table is never brought into L1 whole: the kernel gets a pointer to the table where the
graph keeps it (the GAP AutoTiler's ``C_Arg`` binding, a pointer to the data plane) and
issues one transfer per run of consecutive indices into the L1 tile of output rows, as an
AutoTiler basic kernel does with its own DMA commands. The tiler moves the tile of indices in
and the tile of rows out, double-buffered, so the fetches of one tile overlap the write-back
of the one before. ``fetch_cols`` fetches a tile of the columns of one row, for rows wider
than L1.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ...costs import Work
from .common import BasicKernel, c_signature, layer_c_type, layer_suffix

# Set-up operations priced per fetched row: the cycle model does not see the index values,
# so every row is priced as its own transfer command (a run of consecutive indices is one
# command in the kernel, so this is the worst case).
ROW_SETUP = 16


@cache
def fetch_rows(dt: str, idx_dt: str, nd: bool = False) -> BasicKernel:
    """``Out[r][c] = Table[Plane][i][c]`` for the ``Rows`` rows of a tile, ``W`` wide, with
    ``i = Idx[r]`` as ONNX's Gather reads it: a negative index counts from the end (plus
    ``D``). With ``nd`` (ONNX's GatherND) row ``r`` is at the ``R`` coordinates ``Idx[r*R +
    k]`` along the axes ``Dims`` of the table's leading dimensions (``D`` their product),
    each negative one counted from the end of its axis. An index still outside its axis,
    which ONNX Runtime refuses when it runs, is clamped to the nearest row by both back ends
    (as npukit's other gathers do): no read leaves the table."""
    name = f"KerFetch{'ND' if nd else 'Rows'}Npk_{layer_suffix(dt, idx_dt)}"
    t, ti = layer_c_type(dt), layer_c_type(idx_dt)
    args = ((f"const {t} *__restrict__", "Table"), ("int", "D"), ("int", "W"), ("int", "Plane"),
            (f"const {ti} *__restrict__", "Idx"),
            *((("int", "R"), ("const int *__restrict__", "Dims")) if nd else ()),
            (f"{t} *__restrict__", "Out"), ("int", "Rows"))

    def row(j: str) -> str:  # the table row output row j names
        return f"{name}_Row(&Idx[({j}) * R], R, Dims)" if nd else f"{name}_Row(Idx[{j}], D)"
    helper = f"""\
static long long {name}_Row(const {ti} *C, int R, const int *Dims)
{{
    /* ONNX's GatherND: the row at R coordinates, each negative one from the end of its
       axis; one still outside its axis (an error for ONNX Runtime) is clamped, so no read
       leaves the table. */
    long long Row = 0;
    for (int k = 0; k < R; k++) {{
        long long I = C[k];
        if (I < 0) I += Dims[k];
        I = I < 0 ? 0 : I > Dims[k] - 1 ? Dims[k] - 1 : I;
        Row = Row * Dims[k] + I;
    }}
    return Row;
}}""" if nd else f"""\
static long long {name}_Row(long long I, int D)
{{
    /* ONNX's Gather: a negative index counts from the end; one still outside the D rows
       (an error for ONNX Runtime) is clamped, so no read leaves the table. */
    if (I < 0) I += D;
    return I < 0 ? 0 : I > D - 1 ? D - 1 : I;
}}"""
    src = f"""\
{helper}

void {name}({c_signature(args)})
{{
    /* Output row r of the tile is the row its index names in table Plane, fetched from the
       table's home: one transfer per run of consecutive rows. */
    const {t} *Base = Table + (long long)Plane * D * W;
    for (int r = 0; r < Rows; ) {{
        long long I = {row("r")};
        int Run = 1;
        while (r + Run < Rows && {row("r + Run")} == I + Run) Run++;
        /* Fetch rows I .. I + Run - 1 */
        memcpy(&Out[(long long)r * W], &Base[I * W], (size_t)Run * W * sizeof({t}));
        r += Run;
    }}
}}"""
    return BasicKernel(name, args, False, src, _reference_nd if nd else _reference,
                       _cost)


@cache
def fetch_cols(dt: str, idx_dt: str, nd: bool = False) -> BasicKernel:
    """``Out[c] = Table[Plane][i][C0 + c]`` for the ``Cw`` columns of one fetched row: the
    row ``fetch_rows`` reads (the same index rules, ``Idx`` that row's index or its ``R``
    coordinates), cut in tiles of columns when one whole row does not fit L1 (Swin's q, k,
    v selected by a scalar ``Gather`` of a [3, ..] tensor of 301,056 values a row)."""
    rows = fetch_rows(dt, idx_dt, nd)
    name = f"KerFetch{'ND' if nd else 'Rows'}ColsNpk_{layer_suffix(dt, idx_dt)}"
    t, ti = layer_c_type(dt), layer_c_type(idx_dt)
    args = ((f"const {t} *__restrict__", "Table"), ("int", "D"), ("int", "W"), ("int", "Plane"),
            (f"const {ti} *__restrict__", "Idx"),
            *((("int", "R"), ("const int *__restrict__", "Dims")) if nd else ()),
            (f"{t} *__restrict__", "Out"), ("int", "C0"), ("int", "Cw"))
    row = f"{name}_Row(Idx, R, Dims)" if nd else f"{name}_Row(Idx[0], D)"
    # fetch_rows's index rules under this kernel's name: both may be in one C file.
    helper = rows.c_source[:rows.c_source.index(f"void {rows.name}(")].rstrip().replace(
        f"{rows.name}_Row", f"{name}_Row")
    src = f"""{helper}

void {name}({c_signature(args)})
{{
    /* Columns C0 .. C0 + Cw - 1 of the row the index names in table Plane: one transfer
       from the table's home. */
    long long I = {row};
    memcpy(Out, &Table[((long long)Plane * D + I) * W + C0], (size_t)Cw * sizeof({t}));
}}"""
    return BasicKernel(name, args, False, src, _cols_nd if nd else _cols, _cols_cost)


def _cols(Table, D, W, Plane, Idx, Out, C0, Cw):
    i = int(Idx[0])
    i = min(max(i + D if i < 0 else i, 0), D - 1)
    start = (Plane * D + i) * W + C0
    Out[:Cw] = Table[start:start + Cw]


def _cols_nd(Table, D, W, Plane, Idx, R, Dims, Out, C0, Cw):
    row = 0
    for k in range(R):
        d, i = int(Dims[k]), int(Idx[k])
        row = row * d + min(max(i + d if i < 0 else i, 0), d - 1)
    start = (Plane * D + row) * W + C0
    Out[:Cw] = Table[start:start + Cw]


def _cols_cost(Cw, **_):
    """Every element copied, and one transfer's set-up."""
    return Work("other", Cw, ROW_SETUP)


def _fetch(Table, D, W, Plane, Out, rows: np.ndarray) -> None:
    plane = Table[Plane * D * W:(Plane + 1) * D * W].reshape(D, W)
    Out[:rows.size * W].reshape(rows.size, W)[...] = plane[rows]


def _reference(Table, D, W, Plane, Idx, Out, Rows):
    if Rows > 0:
        i = Idx[:Rows].astype(np.int64)
        _fetch(Table, D, W, Plane, Out, np.clip(np.where(i < 0, i + D, i), 0, D - 1))


def _reference_nd(Table, D, W, Plane, Idx, R, Dims, Out, Rows):
    if Rows <= 0:
        return
    dims = Dims[:R].astype(np.int64)
    i = Idx[:Rows * R].reshape(Rows, R).astype(np.int64)
    i = np.clip(np.where(i < 0, i + dims, i), 0, dims - 1)
    rows = np.zeros(Rows, np.int64)
    for k in range(R):
        rows = rows * dims[k] + i[:, k]
    _fetch(Table, D, W, Plane, Out, rows)


def _cost(Rows, W, **_):
    """Every element copied, and a transfer's set-up per row."""
    return Work("other", Rows * W, ROW_SETUP * Rows)
