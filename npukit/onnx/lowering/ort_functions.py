"""ONNX Runtime's float32 ``Tanh`` and ``Sigmoid`` on x86 (MLAS's FMA3 kernels
``TanhKernelFma3.S`` and ``LogisticKernelFma3.S``, the coefficients of ``tanh.cpp`` and
``logistic.cpp``): a rational function of ``x`` clamped to a range, its polynomials in
``x**2`` evaluated by Horner's rule with one fused multiply-add a step. The quantized tables
of ``Tanh`` (DequantizeLinear, Tanh, QuantizeLinear) and ``Sigmoid`` (QLinearSigmoid's
table) are built from them, so each entry is ONNX Runtime's bit for bit.

>>> float(ort_tanh(np.float32(0.5)))
0.46211716532707214
"""

from __future__ import annotations

import numpy as np

from ...tiler.basic_kernels.common import fma_f32

_F = np.float32
TANH_P = tuple(_F(c) for c in (-2.76076847742355e-16, 2.00018790482477e-13,
                               -8.60467152213735e-11, 5.12229709037114e-08,
                               1.48572235717979e-05, 6.37261928875436e-04,
                               4.89352455891786e-03))
TANH_Q = tuple(_F(c) for c in (1.19825839466702e-06, 1.18534705686654e-04,
                               2.26843463243900e-03, 4.89352518554385e-03))
LOGISTIC_P = tuple(_F(c) for c in (4.37031012579801e-11, 1.15627324459942e-07,
                                   6.08574864600143e-05, 8.51377133304701e-03,
                                   2.48287947061529e-01))
LOGISTIC_Q = tuple(_F(c) for c in (6.10247389755681e-13, 5.76102136993427e-09,
                                   6.29106785017040e-06, 1.70198817374094e-03,
                                   1.16817656904453e-01, 9.93151921023180e-01))


def _horner(s: np.ndarray, coefs) -> np.ndarray:
    """``((c0*s + c1)*s + c2)...`` with each step one fused multiply-add."""
    p = fma_f32(s, coefs[0], coefs[1])
    for c in coefs[2:]:
        p = fma_f32(p, s, c)
    return p


def _rational(x, bound: float, num, den) -> tuple[np.ndarray, np.ndarray]:
    x = np.minimum(np.maximum(np.asarray(x, np.float32), _F(-bound)), _F(bound))
    s = x * x
    return _horner(s, num) * x, _horner(s, den)


def ort_tanh(x) -> np.ndarray:
    """``tanh(x)`` as MLAS computes it: ``x`` clamped to [-9, 9], ``x*P(x**2) / Q(x**2)``."""
    p, q = _rational(x, 9.0, TANH_P, TANH_Q)
    return (p / q).astype(np.float32)


def ort_logistic(x) -> np.ndarray:
    """``1 / (1 + e**-x)`` as MLAS computes it: ``x`` clamped to [-18, 18],
    ``max(x*P(x**2) / Q(x**2) + 0.5, 0)`` (no upper clamp: 1.0000001 can come out)."""
    p, q = _rational(x, 18.0, LOGISTIC_P, LOGISTIC_Q)
    return np.maximum(p / q + _F(0.5), _F(0)).astype(np.float32)
