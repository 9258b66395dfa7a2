"""The LUT section of ``npukit demo``: the TPP tensor compiler's sigmoid approaches and the
Compass DSL tutorial's 512-entry SiLU table, designed and measured through the exact
semantics of the AIE API's lookup tables."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .design import Design, design
from .sigmoid import format_errors, sigmoid_errors


class JudgedError(NamedTuple):
    """A design's errors against its float64 function, in terms a reader can judge."""

    max_abs: float  # in the function's units
    worst_x: float  # where max_abs occurs
    of_range: float  # max_abs over (max - min) of the function on [lo, hi]
    ulps: float  # max_abs in units in the last place of the output type at f(worst_x)
    mean_abs: float
    points: int


def judged_errors(d: Design, points: int = 16385) -> JudgedError:
    """Errors of ``d`` over ``d.sweep(points)`` (``Design.error``), with the largest also
    relative to the output's range and in ulps of the output type near where it occurs.

    >>> e = judged_errors(design("sigmoid", -8, 8, 33, kind="linear"), 1025)
    >>> round(e.max_abs, 4), round(e.of_range, 4), e.points
    (0.003, 0.003, 1027)
    """
    e = d.error(points)
    y = d.reference(np.linspace(d.lo, d.hi, points))
    at = d.reference(np.array([e.worst_x]))
    return JudgedError(e.max_abs, e.worst_x, e.max_abs / float(y.max() - y.min()),
                       e.max_abs / float(d.ulp(at)[0]), e.mean_abs, e.points)


def demo() -> list[tuple[str, bool]]:
    """Print the LUT section (well under a second) and return its checks as
    ``(name, held)`` pairs (``npukit demo`` reports them with its own).

    >>> checks = demo()  # doctest: +ELLIPSIS
    <BLANKLINE>
    == Lookup tables (the AIE API, the TPP tensor compiler, the Compass DSL) ...
    >>> [held for _, held in checks]
    [True, True]
    """
    print("\n== Lookup tables (the AIE API, the TPP tensor compiler, the Compass DSL) " + "=" * 3)
    print("The TPP tensor compiler's three sigmoid approaches, max |error| against float64 "
          "sigmoid:")
    rows = sigmoid_errors(4001)
    for line in format_errors(rows).splitlines():
        print("  " + line)
    table = max(r.max_abs for r in rows if r.approach == "table")
    holds = table <= 0.01
    print(f"  its claim, 33-entry interpolation within about 0.01 everywhere: "
          f"{'holds' if holds else 'FAILS'} ({table:.2g})")
    print("\nThe Compass DSL tutorial's SiLU on [-10, 10] with 512 entries, as an AIE API "
          "linear_approx table\n(bfloat16 in, float32 out):")
    designs = {m: design("silu", -10, 10, 512, kind="linear", method=m)
               for m in ("sample", "minimax")}
    for line in designs["minimax"].describe().splitlines():
        print("  " + line)
    print(f"  {'method':<9}{'max |error|':>12}{'at x':>9}{'/ range':>10}"
          f"{'ulps':>10}{'mean |error|':>14}")
    errors = {m: judged_errors(d) for m, d in designs.items()}
    for method, e in errors.items():
        print(f"  {method:<9}{e.max_abs:>12.3g}{e.worst_x:>9.4g}{e.of_range:>10.3g}"
              f"{e.ulps:>10.3g}{e.mean_abs:>14.3g}")
    d = designs["sample"]
    margin = (d.hi - d.lo) / 8
    span = np.ptp(d.reference(np.linspace(d.lo, d.hi, 16385)))
    print(f"  |error|: against float64 SiLU, in its units, over {errors['sample'].points} inputs "
          f"in [{d.lo - margin:g}, {d.hi + margin:g}];\n  / range: over SiLU's range on "
          f"[{d.lo:g}, {d.hi:g}] ({span:.4g}); ulps: float32 steps at SiLU's value at x")
    better = errors["minimax"].max_abs < errors["sample"].max_abs
    print(f"  minimax errs less than sampling: {better}")
    return [("LUT: 33-entry sigmoid table within 0.01", holds),
            ("LUT: minimax SiLU table errs less than the sampled one", better)]
