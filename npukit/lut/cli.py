"""``npukit lut FUNC``: design a table, print its parameters and errors, optionally plot it.

    npukit lut sigmoid --entries 33 --range -8 8 --kind linear --method minimax --plot s.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import NpukitError
from .catalogue import FUNCTIONS, function
from .design import KINDS, METHODS, Design, design


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``lut`` subcommand to an ``argparse`` subparsers object.

    >>> parser = argparse.ArgumentParser(prog="npukit")
    >>> _ = register(parser.add_subparsers())
    >>> parser.parse_args(["lut", "tanh", "--entries", "64"]).entries
    64
    """
    p = subparsers.add_parser(
        "lut", help="design a lookup table for a function and print its error",
        description="Design a lookup table (the AIE API's semantics) approximating FUNC and print "
                    "its parameters and its error against float64.")
    p.add_argument("function", metavar="FUNC", help=f"one of: {', '.join(FUNCTIONS)}")
    p.add_argument("--entries", type=int, default=257, help="table entries (default 257)")
    p.add_argument("--range", nargs=2, type=float, metavar=("LO", "HI"),
                   help="input range (default: the function's catalogue range)")
    p.add_argument("--kind", choices=KINDS, default="direct",
                   help="direct (parallel_lookup) or linear (linear_approx); default direct")
    p.add_argument("--method", choices=METHODS, default="sample",
                   help="sample the function or fit each entry minimax; default sample")
    p.add_argument("--in-dtype", help="input dtype (default int16 direct, bfloat16 linear)")
    p.add_argument("--out-dtype", help="output dtype (default bfloat16 direct, float32 linear)")
    p.add_argument("--points", type=int, default=65537, help="inputs in the error sweep")
    p.add_argument("--plot", metavar="OUT.png", help="draw function, approximation and error")
    p.set_defaults(func=run)
    return p


def error_table(d: Design, points: int = 65537) -> str:
    """The errors of ``d`` below, inside and above its range, and over the whole sweep.

    >>> print(error_table(design("exp", -8, 0, 64, in_dtype="int8"), 101))
    ... # doctest: +ELLIPSIS
    inputs      points    max_abs   mean_abs    max_ulp
    ...
    """
    x = d.sweep(points)
    parts = [("x < lo", x[x < d.lo]), ("[lo, hi]", x[(x >= d.lo) & (x <= d.hi)]),
             ("x > hi", x[x > d.hi]), ("all", x)]
    lines = [f"{'inputs':<10}{'points':>8}{'max_abs':>11}{'mean_abs':>11}{'max_ulp':>11}"]
    for label, xs in parts:
        e = d.error(x=xs)
        lines.append(f"{label:<10}{e.points:>8}{e.max_abs:>11.3g}{e.mean_abs:>11.3g}"
                     f"{e.max_ulp:>11.3g}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Carry out ``npukit lut`` for parsed ``args``; returns the exit code: 2 for a bad
    argument (unknown function, a design rule, a plot path that cannot be written)."""
    try:
        f = function(args.function)
        lo, hi = args.range if args.range else f.default_range
        d = design(f, lo, hi, args.entries, kind=args.kind,
                   in_dtype=args.in_dtype, out_dtype=args.out_dtype, method=args.method)
        print(d.describe())
        print()
        print(error_table(d, args.points))
        if args.plot:
            plot(d, args.plot, args.points)
            print(f"\nplot written to {args.plot}")
    except ImportError:
        print("npukit lut: error: --plot needs matplotlib; install it with "
              "pip install 'npukit[plot]'", file=sys.stderr)
        return 1
    except NpukitError as exc:
        print(f"npukit lut: error: {exc}", file=sys.stderr)
        return 2
    return 0


def plot(d: Design, path: str, points: int = 65537) -> None:
    """Draw the reference, the approximation and the error of ``d`` into ``path`` (PNG),
    creating its directory when missing.

    Raises ``ImportError`` when matplotlib is missing, ``NpukitError`` when ``path`` cannot
    be written.
    """
    from matplotlib.figure import Figure

    x = d.sweep(points)[:-2]
    ref, approx = d.reference(x), d.evaluate(x)
    fig = Figure(figsize=(8, 6), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    top.plot(x, ref, label=f"{d.function.name} (float64, clamped to [lo, hi])")
    top.plot(x, approx, "--", label=f"{d.kind} {d.method}, {d.entries} entries")
    top.legend()
    top.set_title(f"{d.function.name} on [{d.lo:g}, {d.hi:g}]")
    bottom.plot(x, approx - ref)
    bottom.axhline(0.0, color="grey", linewidth=0.5)
    bottom.set_ylabel("approximation - reference")
    bottom.set_xlabel("x")
    for ax in (top, bottom):
        ax.axvspan(d.lo, d.hi, color="grey", alpha=0.08)
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=100, format="png")  # the path as given, no suffix added
    except OSError as exc:
        raise NpukitError(f"cannot write the plot to {str(path)!r}: "
                          f"{exc.strerror or exc}") from exc
