"""Sampled versus minimax tables: max |error| at equal entries, and their ratio.

    python benchmarks/lut.py [--kind linear] [--in-dtype bfloat16] [--out-dtype float32]

Goal (reported, not asserted): minimax at most 0.6x the sampled max error.
"""

from __future__ import annotations

import argparse

from npukit.lut import design

CASES = (("sigmoid", -8.0, 8.0), ("tanh", -4.0, 4.0), ("silu", -8.0, 8.0))
ENTRIES = (33, 65, 129, 257)
GOAL = 0.6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", default="linear", choices=("direct", "linear"))
    parser.add_argument("--in-dtype", default=None)
    parser.add_argument("--out-dtype", default=None)
    parser.add_argument("--points", type=int, default=65537)
    args = parser.parse_args(argv)
    sample = design("sigmoid", -8, 8, 33, kind=args.kind, in_dtype=args.in_dtype,
                    out_dtype=args.out_dtype)
    print(f"kind {args.kind}, {sample.in_dtype} -> {sample.out_dtype}, max |error| over "
          f"{args.points} inputs spanning [lo, hi] and an eighth beyond each side")
    print(f"{'function':<9}{'range':>10}{'entries':>9}{'sample':>12}{'minimax':>12}"
          f"{'ratio':>8}  goal <= {GOAL}")
    for name, lo, hi in CASES:
        for entries in ENTRIES:
            errors = [design(name, lo, hi, entries, kind=args.kind, in_dtype=args.in_dtype,
                             out_dtype=args.out_dtype, method=m).error(args.points).max_abs
                      for m in ("sample", "minimax")]
            ratio = errors[1] / errors[0]
            mark = "ok" if ratio <= GOAL else "MISSED"
            print(f"{name:<9}{f'[{lo:g}, {hi:g}]':>10}{entries:>9}{errors[0]:>12.3e}"
                  f"{errors[1]:>12.3e}{ratio:>8.3f}  {mark}")


if __name__ == "__main__":
    main()
