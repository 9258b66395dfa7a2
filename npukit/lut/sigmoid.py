"""The TPP tensor compiler's three sigmoid approximations (section 7.4.2), computed in float32 step
by step as its kernels do, and the table of their errors over the ranges it discusses.

- ``fast_sigmoid``: ``0.5 * (x / (1 + |x|) + 1)``;
- ``taylor_sigmoid``: the 5th-order Taylor polynomial with its rounded constants,
  ``0.5 + 0.25 x - 0.020833 x^3 + 0.002083 x^5``;
- ``table_sigmoid``: its 33-entry table over ``[-8, 8]`` (step 0.5) with linear
  interpolation: clamp ``x`` to ``[-8, 8]``, ``i = min(2 (x + 8), 31)``,
  ``T[floor(i)] + (i - floor(i)) (T[floor(i) + 1] - T[floor(i)])``. The clamp of the
  index to 31 makes ``[7.5, 8]`` return ``T[31]``, exactly as its kernel does. A NaN
  input gives NaN (the TPP tensor compiler does not say).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from ..errors import LutError
from .catalogue import sigmoid
from .reals import reals

# The TPP tensor compiler's sig_table[33]: sigmoid at -8.0, -7.5, ..., 8.0, to 6 decimals.
SIGMOID_TABLE = np.array([
    0.000335, 0.000553, 0.000911, 0.001503, 0.002473, 0.004070, 0.006693,
    0.011109, 0.017986, 0.029312, 0.047426, 0.075858, 0.119203, 0.182426,
    0.268941, 0.377541, 0.500000, 0.622459, 0.731059, 0.817574, 0.880797,
    0.924142, 0.952574, 0.970688, 0.982014, 0.988891, 0.993307, 0.995930,
    0.997527, 0.998497, 0.999089, 0.999447, 0.999665,
], dtype=np.float32)

TAYLOR_CONSTANTS = np.array([0.5, 0.25, -0.020833, 0.002083], dtype=np.float32)


def fast_sigmoid(x) -> np.ndarray:
    """The TPP tensor compiler's fast sigmoid ``0.5 * (x / (1 + |x|) + 1)`` in float32.

    >>> fast_sigmoid([0.0, 1.0]).tolist()
    [0.5, 0.75]
    """
    x = reals(x).astype(np.float32)
    one, half = np.float32(1), np.float32(0.5)
    return half * (x / (one + np.abs(x)) + one)


def taylor_sigmoid(x) -> np.ndarray:
    """The TPP tensor compiler's Taylor sigmoid ``0.5 + 0.25 x - 0.020833 x^3 + 0.002083 x^5`` in
    float32, summed in the kernel's order.

    >>> taylor_sigmoid([0.0]).tolist()
    [0.5]
    """
    x = reals(x).astype(np.float32)
    c0, c1, c3, c5 = TAYLOR_CONSTANTS
    x2 = x * x
    x3 = x2 * x
    x5 = x3 * x2
    return (c0 + c1 * x) + c3 * x3 + c5 * x5


def table_sigmoid(x) -> np.ndarray:
    """The TPP tensor compiler's 33-entry interpolated sigmoid in float32 (steps 1-7 of section
    7.4.2.3).

    >>> [round(float(v), 6) for v in table_sigmoid([0.0, 0.25, 100.0])]
    [0.5, 0.561229, 0.999447]
    """
    x = reals(x).astype(np.float32)
    x = np.minimum(np.maximum(x, np.float32(-8)), np.float32(8))
    i = np.minimum((x + np.float32(8)) * np.float32(2), np.float32(31))
    whole = np.floor(i)
    frac = i - whole                        # NaN for a NaN input, which the result keeps
    k = np.nan_to_num(whole).astype(np.int64)
    low, high = SIGMOID_TABLE[k], SIGMOID_TABLE[k + 1]
    return low + frac * (high - low)


APPROXIMATIONS: MappingProxyType = MappingProxyType({
    "fast": fast_sigmoid, "taylor": taylor_sigmoid, "table": table_sigmoid})

# The ranges the TPP tensor compiler talks about: the Taylor polynomial's [-2, 2], the tails
# [-8, -2] and [2, 8] where it adds interpolation, the table's [-8, 8], and the whole float
# range, here [-100, 100] (every approach is constant or monotone beyond).
RANGES = (
    ("[-2, 2]", ((-2.0, 2.0),)),
    ("[-8, -2] u [2, 8]", ((-8.0, -2.0), (2.0, 8.0))),
    ("[-8, 8]", ((-8.0, 8.0),)),
    ("[-100, 100]", ((-100.0, 100.0),)),
)


@dataclass(frozen=True)
class ApproxError:
    """Error of one approximation over one range (against float64 sigmoid).

    >>> ApproxError("table", "[-8, 8]", 0.003, 0.001).approach
    'table'
    """

    approach: str
    range: str
    max_abs: float
    mean_abs: float


def sigmoid_errors(points: int = 20001,
                   approximations: dict[str, Callable] | None = None) -> tuple[ApproxError, ...]:
    """The error of each approximation over each of ``RANGES``, ``points`` inputs per piece.

    >>> rows = sigmoid_errors(2001)
    >>> [r.range for r in rows if r.approach == "taylor"][0]
    '[-2, 2]'
    """
    if isinstance(points, bool) or not isinstance(points, (int, np.integer)) or \
            not 2 <= points <= 1 << 24:
        raise LutError(f"points={points!r} must be an integer in [2, {1 << 24}]")
    approximations = dict(APPROXIMATIONS if approximations is None else approximations)
    rows = []
    for name, approx in approximations.items():
        if not callable(approx):
            raise LutError(f"approximation {name!r} must be a callable on float32 arrays; got "
                           f"{approx!r:.60}")
        for label, pieces in RANGES:
            x = np.concatenate([np.linspace(a, b, points) for a, b in pieces])
            x = x.astype(np.float32)
            y = reals(approx(x), f"approximation {name!r}'s result")
            if y.shape != x.shape:
                raise LutError(f"approximation {name!r} returned shape {y.shape} for an input "
                               f"of shape {x.shape}; it must work elementwise")
            err = np.abs(y - sigmoid(x.astype(np.float64)))
            rows.append(ApproxError(name, label, float(err.max()), float(err.mean())))
    return tuple(rows)


def format_errors(rows: tuple[ApproxError, ...]) -> str:
    """``sigmoid_errors`` as a text table: one row per approach, max |error| per range.

    >>> print(format_errors(sigmoid_errors(101)).splitlines()[0])
    approach    [-2, 2]  [-8, -2] u [2, 8]    [-8, 8]  [-100, 100]
    """
    if not isinstance(rows, (tuple, list)) or not all(isinstance(r, ApproxError) for r in rows):
        raise LutError(f"format_errors takes the rows of sigmoid_errors() (ApproxError); got "
                       f"{rows!r:.60}")
    labels = list(dict.fromkeys(r.range for r in rows))
    names = list(dict.fromkeys(r.approach for r in rows))
    cell = {(r.approach, r.range): r.max_abs for r in rows}
    widths = [max(len(label), 9) for label in labels]
    head = "approach  " + "  ".join(f"{label:>{w}}" for label, w in zip(labels, widths))
    lines = [head]
    for name in names:
        lines.append(f"{name:<8}  " + "  ".join(
            f"{cell[name, label]:>{w}.3g}" for label, w in zip(labels, widths)))
    return "\n".join(lines)
