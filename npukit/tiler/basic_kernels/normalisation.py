"""Normalisation basic kernels of the layer kernels: local response normalisation (``lrn``,
C template next to its numpy reference) and layer normalisation (``layer_norm``). Arithmetic:
see ``common`` and ``scalar``.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ...costs import Work
from .common import HELPERS, BasicKernel, bits_f32, c_signature, exp2_f32, log2_f32, share_rows
from .scalar import C_HELPERS, NUMPY, CBuilder, sqrt


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
                       lambda C, Wn, **_: Work("other", C * Wn * 80))


def layer_norm_row(m, acc_mean, acc_dev, n, eps):
    """ONNX's LayerNormalization statistics of a row from its sums: (mean, 1 / stddev) with
    ``mean = sum x / n``, ``var = sum (x - mean)**2 / n``, ``stddev = sqrt(var + eps)``."""
    return acc_mean / n, 1.0 / sqrt(m, acc_dev / n + eps)


@cache
def layer_norm() -> BasicKernel:
    """ONNX's LayerNormalization of ``N`` rows of ``D`` float32 values: the mean (sum in
    order over the count), the variance of the differences the same way, then ``Out = (x -
    mean) * inv_std * Scale + Bias``; each row's mean and ``inv_std`` written to ``Mean`` and
    ``InvStd``. Defined once with ``scalar``'s operations for the C and numpy."""
    name = "KerLayerNormNpk_fl"
    args = (("const float *__restrict__", "In"), ("const float *__restrict__", "Scale"),
            ("const float *__restrict__", "Bias"), ("float *__restrict__", "Out"),
            ("float *__restrict__", "Mean"), ("float *__restrict__", "InvStd"), ("int", "N"),
            ("int", "D"), ("int", "Eps"))
    b = CBuilder("S")
    mean_c, inv_c = layer_norm_row(b, b.var("Sum"), b.var("Dev"), b.var("(float)D"),
                                   b.var("E"))
    stats = "".join(f"        {line}\n" for line in b.lines)
    src = f"""\
{HELPERS}
{C_HELPERS}
void {name}({c_signature(args)})
{{
    /* Out[r] = (In[r] - mean) * inv_std * Scale + Bias for each of the N rows of D values
       (mean and inv_std of the row, also written to Mean[r] and InvStd[r]); the rows are
       shared among the cores. */
    float E = npk_f32(Eps);
    int Rows = N;
{share_rows()}
    for (int r = First; r < Last; r++) {{
        const float *X = In + r * D;
        float Sum = 0.0f, Dev = 0.0f, Mu, Inv;
        for (int d = 0; d < D; d++) Sum = Sum + X[d];
        Mu = Sum / (float)D;
        for (int d = 0; d < D; d++) Dev = Dev + (X[d] - Mu) * (X[d] - Mu);
{stats}        Mu = {b.result(mean_c)};
        Inv = {b.result(inv_c)};
        for (int d = 0; d < D; d++) Out[r * D + d] = (X[d] - Mu) * Inv * Scale[d] + Bias[d];
        Mean[r] = Mu;
        InvStd[r] = Inv;
    }}
}}"""

    def reference(In, Scale, Bias, Out, Mean, InvStd, N, D, Eps, *, core_id, core_count):
        if core_id or N <= 0:
            return
        x = np.asarray(In[:N * D], np.float32).reshape(N, D)
        s = np.zeros(N, np.float32)
        for d in range(D):
            s = s + x[:, d]
        mu = s / np.float32(D)
        dev = np.zeros(N, np.float32)
        for d in range(D):
            dev = dev + (x[:, d] - mu) * (x[:, d] - mu)
        with np.errstate(all="ignore"):
            mu, inv = layer_norm_row(NUMPY, s, dev, np.float32(D), bits_f32(Eps))
        y = (x - mu[:, None]) * inv[:, None] * Scale[:D][None, :] + Bias[:D][None, :]
        Out[:N * D] = y.astype(np.float32).reshape(-1)
        Mean[:N], InvStd[:N] = mu, inv

    return BasicKernel(name, args, True, src, reference,
                       lambda N, D, **_: Work("other", 40 * N * D))
