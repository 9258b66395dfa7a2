"""What the LUT functions accept as real values: numbers, or arrays and nested lists of
them (bools, integers, floats, bfloat16 ...), converted to float64."""

from __future__ import annotations

import numpy as np

from ..dtypes import is_float
from ..errors import LutError


def reals(x, what: str = "x") -> np.ndarray:
    """``x`` as a float64 array; ``LutError`` naming ``what`` unless it holds real numbers.

    >>> reals([1, 2.5]).tolist()
    [1.0, 2.5]
    >>> reals("1.5")
    Traceback (most recent call last):
    npukit.errors.LutError: x must be real numbers (an array, a list or a number); got '1.5'
    """
    a = array(x, what)
    if not (a.dtype.kind in "biu" or is_float(a.dtype)):
        raise LutError(f"{what} must be real numbers (an array, a list or a number); got "
                       f"{x!r:.80}")
    return a.astype(np.float64)


def array(x, what: str = "x") -> np.ndarray:
    """``np.asarray(x)``; ``LutError`` naming ``what`` for what numpy cannot make an array of
    (ragged nested lists)."""
    try:
        return np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise LutError(f"{what} must be real numbers (an array, a list or a number); got "
                       f"{x!r:.80}") from exc
