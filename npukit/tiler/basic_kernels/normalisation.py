"""Normalisation basic kernels of the layer kernels, C template next to its numpy reference:
local response normalisation (``lrn``). Arithmetic: see ``common``.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .common import HELPERS, BasicKernel, bits_f32, c_signature, exp2_f32, log2_f32, share_rows


@cache
def lrn() -> BasicKernel:
    """Local response normalisation across the ``C`` rows of a ``C`` x ``Wn`` block, as ONNX:
    ``Out = In * (Bias + AlphaOverSize * sum In**2)**(-Beta)``, the sum over rows
    ``c - Lo .. c + Hi`` inside ``[0, C)`` in order, the power ``exp2_f32(-Beta *
    log2_f32(base))``."""
    name = "KerLrnNpk_fl"
    args = (("const float *__restrict__", "In"), ("float *__restrict__", "Out"), ("int", "C"),
            ("int", "Wn"), ("int", "Lo"), ("int", "Hi"), ("int", "AlphaOverSize"),
            ("int", "Beta"), ("int", "Bias"))
    src = f"""\
{HELPERS}
void {name}({c_signature(args)})
{{
    /* Out[c][j] = In[c][j] * (Bias + AlphaOverSize * sum of In[c'][j]^2 for c' in
       [c - Lo, c + Hi])^-Beta; the columns are shared among the cores. */
    float Al = npk_f32(AlphaOverSize), Be = npk_f32(Beta), Bi = npk_f32(Bias);
    int Rows = Wn;
{share_rows()}
    for (int c = 0; c < C; c++) {{
        int C0 = c - Lo < 0 ? 0 : c - Lo, C1 = c + Hi > C - 1 ? C - 1 : c + Hi;
        for (int j = First; j < Last; j++) {{
            float S = 0.0f, Base;
            for (int k = C0; k <= C1; k++) S = S + In[k * Wn + j] * In[k * Wn + j];
            Base = Bi + Al * S;
            Base = Base < 1.17549435e-38f ? 1.17549435e-38f : Base;
            Out[c * Wn + j] = In[c * Wn + j] * npk_exp2(-Be * npk_log2(Base));
        }}
    }}
}}"""

    def reference(In, Out, C, Wn, Lo, Hi, AlphaOverSize, Beta, Bias, *, core_id, core_count):
        if core_id or Wn <= 0:
            return
        x = In[:C * Wn].reshape(C, Wn)
        out = Out[:C * Wn].reshape(C, Wn)
        al, be, bi = bits_f32(AlphaOverSize), bits_f32(Beta), bits_f32(Bias)
        for c in range(C):
            s = np.zeros(Wn, np.float32)
            for k in range(max(0, c - Lo), min(C - 1, c + Hi) + 1):
                s = s + x[k] * x[k]
            base = np.maximum(bi + al * s, np.float32(1.17549435e-38))
            out[c] = x[c] * exp2_f32(-be * log2_f32(base))

    return BasicKernel(name, args, True, src, reference,
                       lambda C, Wn, **_: C * Wn * 80)
