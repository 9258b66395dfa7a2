"""The LUT section of ``npukit demo``: seed 003's sigmoid approaches and seed 004's
512-entry SiLU table, designed and measured through seed 002's exact semantics."""

from __future__ import annotations

from .design import design
from .sigmoid import format_errors, sigmoid_errors


def demo() -> None:
    """Print the LUT section (well under a second).

    >>> demo()  # doctest: +ELLIPSIS
    <BLANKLINE>
    == Lookup tables (seeds 002, 003, 004) ...
    """
    print("\n== Lookup tables (seeds 002, 003, 004) " + "=" * 36)
    print("Seed 003's three sigmoid approaches, max |error| against float64 sigmoid:")
    rows = sigmoid_errors(4001)
    for line in format_errors(rows).splitlines():
        print("  " + line)
    table = max(r.max_abs for r in rows if r.approach == "table")
    verdict = "holds" if table <= 0.01 else "FAILS"
    print(f"  seed 003's claim, 33-entry interpolation within about 0.01 everywhere: "
          f"{verdict} ({table:.2g})")
    print("\nSeed 004's SiLU on [-10, 10] with 512 entries, as a linear_approx table "
          "(bfloat16 in, float32 out):")
    for method in ("sample", "minimax"):
        d = design("silu", -10, 10, 512, kind="linear", method=method)
        if method == "minimax":
            for line in d.describe().splitlines():
                print("  " + line)
        print(f"  {method:<8} {d.error(16385)}")
