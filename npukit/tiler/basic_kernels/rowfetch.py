"""Rows fetched by index from a table that stays in its home memory (L2, L3 RAM or flash):
the basic kernel of an embedding lookup (ONNX's ``Gather`` on axis 0, and on any axis as
``Planes`` tables), its C template next to its numpy reference.

The table is never brought into L1 whole: the kernel gets a pointer to the table where the
graph keeps it (the GAP AutoTiler's ``C_Arg`` binding, a pointer to the data plane) and
issues one transfer per run of consecutive indices into the L1 tile of output rows, as an
AutoTiler basic kernel does with its own DMA commands. The tiler moves the tile of indices in
and the tile of rows out, double-buffered, so the fetches of one tile overlap the write-back
of the one before.
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
def fetch_rows(dt: str, idx_dt: str) -> BasicKernel:
    """``Out[r][c] = Table[Plane][i][c]`` for the ``Rows`` rows of a tile, ``W`` wide, with
    ``i = Idx[r]`` read as ONNX's Gather reads it: a negative index counts from the end
    (plus ``D``). An index still outside ``[0, D)``, which ONNX Runtime refuses when it runs,
    is clamped to the nearest row by both back ends (as npukit's other gathers do): no read
    leaves the table."""
    name = f"KerFetchRowsNpk_{layer_suffix(dt, idx_dt)}"
    t, ti = layer_c_type(dt), layer_c_type(idx_dt)
    args = ((f"const {t} *__restrict__", "Table"), ("int", "D"), ("int", "W"), ("int", "Plane"),
            (f"const {ti} *__restrict__", "Idx"), (f"{t} *__restrict__", "Out"),
            ("int", "Rows"))
    src = f"""\
static long long {name}_Row(long long I, int D)
{{
    /* ONNX's Gather: a negative index counts from the end; one still outside the D rows
       (an error for ONNX Runtime) is clamped, so no read leaves the table. */
    if (I < 0) I += D;
    return I < 0 ? 0 : I > D - 1 ? D - 1 : I;
}}

void {name}({c_signature(args)})
{{
    /* Output row r of the tile is row Idx[r] of table Plane, fetched from the table's home:
       one transfer per run of consecutive indices. */
    const {t} *Base = Table + (long long)Plane * D * W;
    for (int r = 0; r < Rows; ) {{
        long long I = {name}_Row(Idx[r], D);
        int Run = 1;
        while (r + Run < Rows && {name}_Row(Idx[r + Run], D) == I + Run) Run++;
        /* Fetch rows I .. I + Run - 1 */
        memcpy(&Out[(long long)r * W], &Base[I * W], (size_t)Run * W * sizeof({t}));
        r += Run;
    }}
}}"""
    return BasicKernel(name, args, False, src, _reference, _cost)


def _reference(Table, D, W, Plane, Idx, Out, Rows):
    if Rows <= 0:
        return
    i = Idx[:Rows].astype(np.int64)
    plane = Table[Plane * D * W:(Plane + 1) * D * W].reshape(D, W)
    Out[:Rows * W].reshape(Rows, W)[...] = plane[np.clip(np.where(i < 0, i + D, i), 0, D - 1)]


def _cost(Rows, W, **_):
    """Every element copied, and a transfer's set-up per row."""
    return Work("other", Rows * W, ROW_SETUP * Rows)
