"""ONNX's Resize of the last two axes (nearest and bilinear) as a basic kernel reading
precomputed tables: for output row ``oy`` the input rows ``Ys[2*oy]``, ``Ys[2*oy + 1]`` and
the fraction ``Fy[oy]`` of the second, the same for columns. Nearest: ``In[y0][x0]`` (any
element type). Linear (float32): ``lerp(lerp(a, b, fx), lerp(c, d, fx), fy)`` with
``lerp(u, v, f) = u + f * (v - u)``, defined once with ``scalar``'s operations.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ...costs import Work
from .common import BasicKernel, c_signature, layer_c_type, layer_suffix, share_rows
from .scalar import NUMPY, CBuilder


def lerp(m, u, v, f):
    return u + f * (v - u)


def bilinear(m, a, b, c, d, fx, fy):
    """``a``, ``b`` on the first row, ``c``, ``d`` on the second; fractions along x, y."""
    return lerp(m, lerp(m, a, b, fx), lerp(m, c, d, fx), fy)


@cache
def resize(dt: str, linear: bool) -> BasicKernel:
    """``Out[r][ox]`` for the ``Rows`` output rows from ``Row0`` of a plane ``Wo`` wide, the
    input plane ``In`` ``W`` wide; rows are shared among the cores."""
    t = layer_c_type(dt)
    name = f"KerResize{'Linear' if linear else 'Nearest'}Npk_{layer_suffix(dt)}"
    args = ((f"const {t} *__restrict__", "In"), ("int", "W"),
            (f"{t} *__restrict__", "Out"), ("int", "Wo"), ("int", "Row0"), ("int", "Rows"),
            ("const int *__restrict__", "Ys"), ("const float *__restrict__", "Fy"),
            ("const int *__restrict__", "Xs"), ("const float *__restrict__", "Fx"))
    if linear:
        b = CBuilder()
        v = bilinear(b, *(b.var(n) for n in ("A", "B", "C", "D", "X", "Y")))
        body = "\n".join(f"            {line}" for line in b.lines)
        inner = f"""\
            const {t} *R0 = In + Ys[2 * (Row0 + r)] * W, *R1 = In + Ys[2 * (Row0 + r) + 1] * W;
            float Y = Fy[Row0 + r], X = Fx[c];
            float A = R0[Xs[2 * c]], B = R0[Xs[2 * c + 1]], C = R1[Xs[2 * c]],
                  D = R1[Xs[2 * c + 1]];
{body}
            Out[r * Wo + c] = {b.result(v)};"""
    else:
        inner = """\
            (void)Fy;
            (void)Fx;
            Out[r * Wo + c] = In[Ys[2 * (Row0 + r)] * W + Xs[2 * c]];"""
    src = f"""\
void {name}({c_signature(args)})
{{
    /* Resize ({'bilinear' if linear else 'nearest'}): output row Row0 + r reads input rows
       Ys[2 * row] and Ys[2 * row + 1] (fraction Fy[row] of the second), column c columns
       Xs[2 * c], Xs[2 * c + 1] (fraction Fx[c]). Rows are shared among the cores. */
{share_rows()}
    for (int r = First; r < Last; r++)
        for (int c = 0; c < Wo; c++) {{
{inner}
        }}
}}"""

    def reference(In, W, Out, Wo, Row0, Rows, Ys, Fy, Xs, Fx, *, core_id, core_count):
        if core_id or Rows <= 0:
            return
        rows = Row0 + np.arange(Rows)
        y0, y1 = Ys[2 * rows][:, None], Ys[2 * rows + 1][:, None]
        x0, x1 = Xs[0:2 * Wo:2][None, :], Xs[1:2 * Wo:2][None, :]
        if linear:
            v = bilinear(NUMPY, In[y0 * W + x0], In[y0 * W + x1], In[y1 * W + x0],
                         In[y1 * W + x1], np.asarray(Fx[:Wo], np.float32)[None, :],
                         np.asarray(Fy, np.float32)[rows][:, None])
        else:
            v = In[y0 * W + x0]
        Out[:Rows * Wo] = np.asarray(v).reshape(-1)

    return BasicKernel(name, args, True, src, reference,
                       lambda Wo, Rows, **_: Work("other", Wo * Rows * (8 if linear else 1)))
