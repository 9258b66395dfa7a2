"""An oracle of conversions to the binary float formats that shares nothing with npukit,
numpy or ml_dtypes: the source's exact value as a ``Fraction``, rounded once to nearest
(ties to even) in Python's integer arithmetic, then encoded into bits by hand.

>>> hex(bits_of(2**24 + 2**16 + 1, "bfloat16")), hex(bits_of(-0.0, "float16"))
('0x4b81', '0x8000')
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np

# name -> (significand bits, hidden one included; least and greatest normal exponent; width)
FORMATS = {"bfloat16": (8, -126, 127, 16), "float16": (11, -14, 15, 16),
           "float32": (24, -126, 127, 32), "float64": (53, -1022, 1023, 64)}
# ml_dtypes stores bfloat16 here; none of its conversions is used
DTYPES = {"bfloat16": np.dtype(ml_dtypes.bfloat16), "float16": np.dtype("float16"),
          "float32": np.dtype("float32"), "float64": np.dtype("float64")}


def bits_of(x, fmt: str) -> int:
    """The bits of ``x`` (a Python int, float or Fraction) rounded once to ``fmt``: the
    exact value cut at the format's last place, ``2^(e - p + 1)`` for ``2^e <= |x|``
    (never below the least normal exponent: subnormals), to nearest, ties to even; past
    the greatest value, infinity; NaN, the quiet NaN with its sign."""
    p, emin, emax, width = FORMATS[fmt]
    inf = (emax - emin + 2) << (p - 1)  # the all-ones exponent, no fraction
    negative = math.copysign(1.0, x) < 0 if isinstance(x, float) else x < 0
    sign = 1 << (width - 1) if negative else 0
    if isinstance(x, float) and math.isnan(x):
        return sign | inf | 1 << (p - 2)
    if isinstance(x, float) and math.isinf(x):
        return sign | inf
    q = abs(Fraction(x))
    if q == 0:
        return sign
    e = q.numerator.bit_length() - q.denominator.bit_length()
    e -= Fraction(2) ** e > q  # now 2^e <= q < 2^(e+1)
    e = max(e, emin)
    r = round(q / Fraction(2) ** (e - p + 1))  # Fraction rounds half to even
    if r == 1 << p:  # carried into the next binade
        r, e = r >> 1, e + 1
    if e > emax:
        return sign | inf
    if r < 1 << (p - 1):  # subnormal
        return sign | r
    return sign | (e - emin + 1) << (p - 1) | (r - (1 << (p - 1)))


def exact(a: np.ndarray) -> list:
    """The elements of a numpy array as Python numbers holding their exact values (a
    bfloat16 through the float32 its bits are the top half of)."""
    if a.dtype.name == "bfloat16":
        a = (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return [int(v) if a.dtype.kind in "iub" else float(v) for v in a.reshape(-1).tolist()]


def rounded(a: np.ndarray, fmt: str) -> np.ndarray:
    """Every element of ``a`` rounded once to ``fmt``: an array of that dtype made from the
    bits of ``bits_of``."""
    width = FORMATS[fmt][3]
    out = np.array([bits_of(v, fmt) for v in exact(a)], f"uint{width}")
    return out.reshape(a.shape).view(DTYPES[fmt])
