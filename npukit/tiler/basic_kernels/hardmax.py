"""ONNX's Hardmax as a basic kernel, its C next to its numpy reference: 1 at the first
maximum of each group of values, 0 elsewhere. As ONNX Runtime: a value replaces the maximum
so far only when it is greater, so the first of equal maxima wins and a later NaN is
skipped; a group whose first value is NaN has that NaN as its maximum, which no value equals:
all zeros."""

from __future__ import annotations

from functools import cache

import numpy as np

from .common import BasicKernel, c_signature, share_rows


@cache
def hardmax() -> BasicKernel:
    """``G`` groups of ``D`` float32 values, group g's at ``g*Sg + i*Sd``: ``Out`` 1.0 at the
    first maximum of each group, 0.0 elsewhere; the groups are shared among the cores."""
    name = "KerHardmaxNpk_fl"
    args = (("const float *__restrict__", "In"), ("float *__restrict__", "Out"), ("int", "G"),
            ("int", "Sg"), ("int", "D"), ("int", "Sd"))
    src = f"""\
void {name}({c_signature(args)})
{{
    /* Out = one-hot of the first maximum of each group of D values (a value wins only when
       greater than the maximum so far). The groups are shared among the cores. */
    int Rows = G;
{share_rows()}
    for (int g = First; g < Last; g++) {{
        const float *X = In + g * Sg;
        float *Y = Out + g * Sg, M = X[0];
        int Best = 0;
        for (int i = 1; i < D; i++)
            if (X[i * Sd] > M) {{
                M = X[i * Sd];
                Best = i;
            }}
        if (M != M) Best = -1; /* a NaN first: no value equals the maximum */
        for (int i = 0; i < D; i++) Y[i * Sd] = i == Best ? 1.0f : 0.0f;
    }}
}}"""

    def reference(In, Out, G, Sg, D, Sd, *, core_id, core_count):
        if core_id or G <= 0:
            return
        idx = np.arange(G)[:, None] * Sg + np.arange(D)[None, :] * Sd
        x = In[idx]
        best, m = np.zeros(G, np.int64), x[:, 0].copy()
        for i in range(1, D):
            greater = x[:, i] > m
            best, m = np.where(greater, i, best), np.where(greater, x[:, i], m)
        best = np.where(np.isnan(m), -1, best)
        Out[idx] = (np.arange(D)[None, :] == best[:, None]).astype(np.float32)

    return BasicKernel(name, args, True, src, reference, lambda G, D, **_: 3 * G * D)
