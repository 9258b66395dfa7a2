"""The functions ``design`` knows by name, each a float64 reference with a default range.

>>> sorted(FUNCTIONS)[:3]
['exp', 'gelu_erf', 'gelu_tanh']
>>> float(function("silu")(np.array(1.0)))
0.7310585786300049
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from ..dtypes import is_float
from ..errors import LutError
from .reals import reals
from .special import erfc


def sigmoid(x) -> np.ndarray:
    """``1 / (1 + exp(-x))`` without overflow for large ``|x|``.

    >>> sigmoid(np.array([0.0, 1000.0, -1000.0])).tolist()
    [0.5, 1.0, 0.0]
    """
    x = reals(x)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def silu(x) -> np.ndarray:
    """``x * sigmoid(x)`` (the Compass DSL tutorial's activation).

    >>> float(silu(0.0))
    0.0
    """
    x = reals(x)
    return x * sigmoid(x)


def gelu_tanh(x) -> np.ndarray:
    """GELU, tanh form: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``.

    >>> round(float(gelu_tanh(1.0)), 6)
    0.841192
    """
    x = reals(x)
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def gelu_erf(x) -> np.ndarray:
    """GELU, erf form: ``0.5 x (1 + erf(x / sqrt 2))``, written with ``erfc`` so that the
    left tail keeps its relative accuracy.

    >>> round(float(gelu_erf(1.0)), 6)
    0.841345
    """
    x = reals(x)
    return 0.5 * x * erfc(-x / np.sqrt(2.0))


def _reciprocal(x) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return 1.0 / reals(x)


def _rsqrt(x) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 / np.sqrt(reals(x))


def _exp(x) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.exp(reals(x))


@dataclass(frozen=True)
class Function:
    """A catalogue entry: ``name``, the float64 reference ``fn``, a ``default_range`` and the
    ``formula`` in words. Calling it calls ``fn``.

    >>> FUNCTIONS["exp"].default_range
    (-8.0, 0.0)
    """

    name: str
    fn: Callable[[np.ndarray], np.ndarray]
    default_range: tuple[float, float]
    formula: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not callable(self.fn):
            raise LutError(f"Function needs a name (str) and a callable fn; got "
                           f"{self.name!r}, {self.fn!r}")
        span = reals(self.default_range, "default_range").reshape(-1)
        if span.size != 2 or not (np.isfinite(span).all() and span[0] < span[1]):
            raise LutError(f"Function {self.name}: default_range {self.default_range!r} must "
                           f"be two finite numbers lo < hi")

    def __call__(self, x) -> np.ndarray:
        """``fn`` on ``x`` as float64; ``LutError`` when ``fn`` raises or does not return
        real numbers of ``x``'s shape (it must work elementwise on arrays)."""
        x = reals(x)
        try:
            y = np.asarray(self.fn(x))
        except Exception as exc:  # the user's function: say which one and on what
            raise LutError(f"fn {self.name} raised {type(exc).__name__} on an array of "
                           f"{x.size} values from {x.min() if x.size else 0:g} to "
                           f"{x.max() if x.size else 0:g}: {exc}") from exc
        if y.shape != x.shape:
            raise LutError(f"fn {self.name} returned shape {y.shape} for an input of shape "
                           f"{x.shape}; it must work elementwise on a float64 array and "
                           f"return one value per input (e.g. np.full_like(x, c) for a "
                           f"constant)")
        if not (y.dtype.kind in "biu" or is_float(y.dtype)):
            raise LutError(f"fn {self.name} returned {y.dtype} values; it must return real "
                           f"numbers")
        return y.astype(np.float64)


FUNCTIONS: Mapping[str, Function] = MappingProxyType({f.name: f for f in (
    Function("sigmoid", sigmoid, (-8.0, 8.0), "1 / (1 + exp(-x))"),
    Function("tanh", np.tanh, (-4.0, 4.0), "tanh(x)"),
    Function("silu", silu, (-8.0, 8.0), "x * sigmoid(x)"),
    Function("gelu_tanh", gelu_tanh, (-4.0, 4.0),
             "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))"),
    Function("gelu_erf", gelu_erf, (-4.0, 4.0), "0.5 x (1 + erf(x / sqrt(2)))"),
    Function("exp", _exp, (-8.0, 0.0), "exp(x), on a bounded range (softmax after max)"),
    Function("reciprocal", _reciprocal, (1.0, 2.0), "1 / x"),
    Function("rsqrt", _rsqrt, (1.0, 4.0), "1 / sqrt(x)"),
)})


def function(fn: str | Callable | Function) -> Function:
    """A catalogue entry by name, or an ad-hoc entry wrapping a callable on float64 arrays.

    >>> function(np.sin).name
    'sin'
    """
    if isinstance(fn, Function):
        return fn
    if isinstance(fn, str):
        if fn not in FUNCTIONS:
            close = difflib.get_close_matches(fn, FUNCTIONS, n=2)
            hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
            raise LutError(f"fn={fn!r} is not in the catalogue; {hint}known: "
                           f"{', '.join(FUNCTIONS)}")
        return FUNCTIONS[fn]
    if not callable(fn):
        raise LutError(f"fn must be a catalogue name or a callable; got {fn!r}")
    return Function(getattr(fn, "__name__", "fn"), fn, (-1.0, 1.0), "user function")
