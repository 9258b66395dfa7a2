"""Basic kernels along one axis of groups of values (the arguments of the layer softmax: ``G``
groups of ``D`` float32 values, group g's at ``g*Sg + i*Sd``), each C next to its numpy
reference:

- ``hardmax``: ONNX's Hardmax, 1 at the first maximum of each group, 0 elsewhere. As ONNX
  Runtime: a value replaces the maximum so far only when it is greater, so the first of
  equal maxima wins and a later NaN is skipped; a group whose first value is NaN has that
  NaN as its maximum, which no value equals: all zeros.
- ``cumsum``: ONNX's CumSum, the running sums in order (``reverse``: from the last value;
  ``exclusive``: each sum without its own value, the first 0), one float32 rounding per
  addition as ONNX Runtime adds them."""

from __future__ import annotations

from functools import cache

import numpy as np

from ...costs import Work
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

    return BasicKernel(name, args, True, src, reference,
                       lambda G, D, **_: Work("other", 3 * G * D))


@cache
def cumsum(exclusive: bool, reverse: bool) -> BasicKernel:
    """``Out`` the running sums of each group of ``D`` values (group g's at ``g*Sg + i*Sd``),
    from the first value or (``reverse``) the last, each with (or, ``exclusive``, without)
    its own value; the groups are shared among the cores."""
    name = f"KerCumSumNpk{'Excl' if exclusive else ''}{'Rev' if reverse else ''}_fl"
    args = (("const float *__restrict__", "In"), ("float *__restrict__", "Out"), ("int", "G"),
            ("int", "Sg"), ("int", "D"), ("int", "Sd"))
    at = "(D - 1 - i)" if reverse else "i"
    step = (f"Y[{at} * Sd] = S;\n            S = S + X[{at} * Sd];" if exclusive else
            f"S = S + X[{at} * Sd];\n            Y[{at} * Sd] = S;")
    src = f"""\
void {name}({c_signature(args)})
{{
    /* Out = running sums of each group of D values{', from the last' if reverse else ''}
       {'(each without its own value)' if exclusive else '(each with its own value)'}, in
       order. The groups are shared among the cores. */
    int Rows = G;
{share_rows()}
    for (int g = First; g < Last; g++) {{
        const float *X = In + g * Sg;
        float *Y = Out + g * Sg, S = 0.0f;
        for (int i = 0; i < D; i++) {{
            {step}
        }}
    }}
}}"""

    def reference(In, Out, G, Sg, D, Sd, *, core_id, core_count):
        if core_id or G <= 0:
            return
        idx = np.arange(G)[:, None] * Sg + np.arange(D)[None, :] * Sd
        if reverse:
            idx = idx[:, ::-1]
        x, s = In[idx], np.zeros(G, np.float32)
        out = np.empty_like(x)
        for i in range(D):
            if exclusive:
                out[:, i], s = s, s + x[:, i]
            else:
                s = s + x[:, i]
                out[:, i] = s
        Out[idx] = out

    return BasicKernel(name, args, True, src, reference,
                       lambda G, D, **_: Work("other", 2 * G * D))
