"""Data-movement basic kernels of the layer kernels, each C template next to its numpy
reference: padding one axis (``pad_axis``, ONNX Pad's modes), 2-D copies (``copy2d``),
transposition (``transpose``) and values picked by run-time indices (``gather_elements``;
Gather and GatherND fetch rows from the table's home: ``rowfetch``).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ...costs import Work
from ...dtypes import is_float
from .common import (
    HELPERS,
    BasicKernel,
    bits_f32,
    c_signature,
    layer_c_type,
    layer_suffix,
    share_rows,
)

# Padding modes (ONNX Pad).
PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP = range(4)


# -- data movement ----------------------------------------------------------------------------

@cache
def pad_axis(dt: str) -> BasicKernel:
    """``N`` vectors of ``Len`` values (element stride ``Stride``; vector starts ``InStep``
    apart) become vectors of ``Len2`` (starts ``OutStep`` apart): ``Out[i] = In[i - PadBegin]``
    inside, else by ``Mode``: ``PAD_CONSTANT`` (``Value``: bits for float32), ``PAD_REFLECT``
    (mirror without repeating the edge), ``PAD_EDGE``, ``PAD_WRAP`` — ONNX Pad's modes. A
    negative ``PadBegin`` crops."""
    flt = is_float(dt)
    name = f"KerPadAxisNpk_{layer_suffix(dt)}"
    t = layer_c_type(dt)
    args = ((f"const {t} *__restrict__", "In"), (f"{t} *__restrict__", "Out"), ("int", "N"),
            ("int", "Len"), ("int", "Len2"), ("int", "Stride"), ("int", "InStep"),
            ("int", "OutStep"), ("int", "PadBegin"), ("int", "Mode"), ("int", "Value"))
    value = "npk_f32(Value)" if flt else f"({t})Value"
    src = f"""\
{HELPERS}
void {name}({c_signature(args)})
{{
    /* Out[v][i] = In[v][i - PadBegin] inside the input, else the mode's value (0 constant,
       1 reflect, 2 edge, 3 wrap); the vectors are shared among the cores. */
    {t} Fill = {value};
    int Rows = N;
{share_rows()}
    for (int v = First; v < Last; v++)
        for (int i = 0; i < Len2; i++) {{
            int S = i - PadBegin;
            if (S < 0 || S >= Len) {{
                if (Mode == 0) {{
                    Out[v * OutStep + i * Stride] = Fill;
                    continue;
                }}
                if (Mode == 2) S = S < 0 ? 0 : Len - 1;
                else if (Mode == 3) S = ((S % Len) + Len) % Len;
                else if (Len == 1) S = 0;
                else while (S < 0 || S >= Len) S = S < 0 ? -S : 2 * (Len - 1) - S;
            }}
            Out[v * OutStep + i * Stride] = In[v * InStep + S * Stride];
        }}
}}"""

    def reference(In, Out, N, Len, Len2, Stride, InStep, OutStep, PadBegin, Mode, Value, *,
                  core_id, core_count):
        if core_id or N <= 0:
            return
        s = np.arange(Len2) - PadBegin
        inside = (s >= 0) & (s < Len)
        if Mode == PAD_EDGE:
            s = np.clip(s, 0, Len - 1)
        elif Mode == PAD_WRAP:
            s = s % Len
        elif Mode == PAD_REFLECT and Len == 1:
            s = np.zeros_like(s)
        elif Mode == PAD_REFLECT:
            while ((s < 0) | (s >= Len)).any():
                s = np.where(s < 0, -s, np.where(s >= Len, 2 * (Len - 1) - s, s))
        s = np.clip(s, 0, max(Len - 1, 0))
        v = np.arange(N)[:, None]
        vals = In[v * InStep + s[None, :] * Stride]
        if Mode == PAD_CONSTANT:
            fill = bits_f32(Value) if flt else Value
            vals = np.where(inside[None, :], vals, fill)
        Out[v * OutStep + np.arange(Len2)[None, :] * Stride] = vals

    return BasicKernel(name, args, True, src, reference,
                       lambda N, Len2, **_: Work("other", N * Len2, N))


@cache
def copy2d(dt: str) -> BasicKernel:
    """``Out[(RowOff + r)*OutPitch + ColOff + c] = In[r*InPitch + c]`` for a ``Rows`` x
    ``Cols`` block (a concatenation's input placed in its output tile)."""
    return _block2d(dt, into=True)


@cache
def crop2d(dt: str) -> BasicKernel:
    """``Out[r*OutPitch + c] = In[(RowOff + r)*InPitch + ColOff + c]`` for a ``Rows`` x
    ``Cols`` block (a split's output taken from its input tile: ``copy2d``'s converse)."""
    return _block2d(dt, into=False)


def _block2d(dt: str, into: bool) -> BasicKernel:
    """``copy2d`` (``into``: the block goes to (RowOff, ColOff) of Out) or ``crop2d`` (the
    block is taken from (RowOff, ColOff) of In)."""
    name = f"Ker{'Copy' if into else 'Crop'}2DNpk_{layer_suffix(dt)}"
    t = layer_c_type(dt)
    args = ((f"const {t} *__restrict__", "In"), ("int", "Rows"), ("int", "Cols"),
            ("int", "InPitch"), (f"{t} *__restrict__", "Out"), ("int", "OutPitch"),
            ("int", "RowOff"), ("int", "ColOff"))
    placed, plain = "(RowOff + r) * {} + ColOff + c", "r * {} + c"
    out_at = (placed if into else plain).format("OutPitch")
    in_at = (plain if into else placed).format("InPitch")
    what = ("The Rows x Cols block In goes to Out at (RowOff, ColOff)" if into else
            "The Rows x Cols block of In at (RowOff, ColOff) goes to Out")
    what += "; rows are shared among the"
    src = f"""\
void {name}({c_signature(args)})
{{
    /* {what}
       cores. */
    int N = Rows;
{share_rows("N")}
    for (int r = First; r < Last; r++)
        for (int c = 0; c < Cols; c++)
            Out[{out_at}] = In[{in_at}];
}}"""

    def reference(In, Rows, Cols, InPitch, Out, OutPitch, RowOff, ColOff, *, core_id,
                  core_count):
        if core_id or Rows <= 0 or Cols <= 0:
            return
        r, c = np.arange(Rows)[:, None], np.arange(Cols)[None, :]
        if into:
            Out[(RowOff + r) * OutPitch + ColOff + c] = In[r * InPitch + c]
        else:
            Out[r * OutPitch + c] = In[(RowOff + r) * InPitch + ColOff + c]

    return BasicKernel(name, args, True, src, reference,
                       lambda Rows, Cols, **_: Work("other", Rows * Cols))


@cache
def transpose(dt: str) -> BasicKernel:
    """``Out[b][a*I + i] = In[a][b*I + i]``: an ``A`` x ``B`` block of ``I``-value items
    transposed (In row pitch ``B*I``, Out row pitch ``A*I``)."""
    name = f"KerTransposeNpk_{layer_suffix(dt)}"
    t = layer_c_type(dt)
    args = ((f"const {t} *__restrict__", "In"), ("int", "A"), ("int", "B"), ("int", "I"),
            (f"{t} *__restrict__", "Out"))
    src = f"""\
void {name}({c_signature(args)})
{{
    /* Out[b][a][i] = In[a][b][i]; the output rows are shared among the cores. */
    int N = B;
{share_rows("N")}
    for (int b = First; b < Last; b++)
        for (int a = 0; a < A; a++)
            for (int i = 0; i < I; i++) Out[(b * A + a) * I + i] = In[(a * B + b) * I + i];
}}"""

    def reference(In, A, B, I, Out, *, core_id, core_count):  # noqa: E741
        if core_id or A <= 0 or B <= 0:
            return
        Out[:A * B * I] = In[:A * B * I].reshape(A, B, I).transpose(1, 0, 2).reshape(-1)

    return BasicKernel(name, args, True, src, reference,
                       lambda A, B, I, **_: Work("other", A * B * I))  # noqa: E741


@cache
def gather_elements(dt: str, idx_dt: str) -> BasicKernel:
    """ONNX's GatherElements on a tile of ``Rows`` rows, ``W`` wide: ``Out[r][c] =
    In[i][c]`` with ``i = Idx[r][c]`` (the tile of indices matching the output's) — negative
    counts from the end, plus ``D`` — then clamped to ``[0, D - 1]``: an index outside the
    axis (which ONNX Runtime refuses at run time) reads the nearest row, never outside the
    tensor."""
    name = f"KerGatherElementsNpk_{layer_suffix(dt, idx_dt)}"
    t, ti = layer_c_type(dt), layer_c_type(idx_dt)
    args = ((f"const {t} *__restrict__", "In"), ("int", "D"), ("int", "W"),
            (f"const {ti} *__restrict__", "Idx"), (f"{t} *__restrict__", "Out"),
            ("int", "Rows"))
    src = f"""\
void {name}({c_signature(args)})
{{
    /* GatherElements: Out[r][c] is In[Idx[r][c]][c] (negative from the end, then clamped
       to the D rows); rows are shared among the cores. */
{share_rows()}
    for (int r = First; r < Last; r++)
        for (int c = 0; c < W; c++) {{
            long long I = Idx[r * W + c];
            if (I < 0) I += D;
            I = I < 0 ? 0 : I > D - 1 ? D - 1 : I;
            Out[r * W + c] = In[I * W + c];
        }}
}}"""

    def reference(In, D, W, Idx, Out, Rows, *, core_id, core_count):
        if core_id or Rows <= 0:
            return
        i = Idx[:Rows * W].reshape(Rows, W).astype(np.int64)
        i = np.clip(np.where(i < 0, i + D, i), 0, D - 1)
        plane = In[:D * W].reshape(D, W)
        Out[:Rows * W].reshape(Rows, W)[...] = plane[i, np.arange(W)[None, :]]

    return BasicKernel(name, args, True, src, reference,
                       lambda Rows, W, **_: Work("other", Rows * W, 4 * Rows))
