"""``npukit validate`` and ``npukit sweep``: the jobs of ``npukit.onnx.validate`` and
``npukit.onnx.sweep`` from the command line, on a local process pool (one worker per core by
default, ``--workers N``) or a running Dask cluster (``--scheduler tcp://HOST:PORT``).
Exit status: 2 when npukit refuses the model or the arguments, 1 when ``validate`` is
outside the tolerance (or an input failed to run), 0 otherwise.
"""

from __future__ import annotations

import argparse
import sys

from ..files import write_new
from ..workers import MAX_WORKERS, check_scheduler
from .cli import SIZE_HELP, check_paths, refusals_exit_2, refuse_budgets, size


def _sizes(text: str) -> list[int]:
    return [size(t) for t in text.split(",")]


def _workers(text: str) -> int:
    """``--workers N``: 1 to ``MAX_WORKERS`` local processes."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of workers") from None
    if not 1 <= n <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"{n}: give 1 to {MAX_WORKERS} worker processes "
                                         f"(leave --workers out for one per core)")
    return n


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL.onnx", help="the ONNX model file")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="run on this Dask "
                   "cluster (pip install \"npukit[cluster]\") instead of local processes")
    p.add_argument("--workers", type=_workers, help=f"local worker processes, 1 to "
                   f"{MAX_WORKERS} (default: one per core)")


def register(subparsers) -> None:
    """Add ``validate`` and ``sweep`` to the ``npukit`` command's subparsers."""
    v = subparsers.add_parser(
        "validate", help="run a model on a data set in npukit and ONNX Runtime, compare",
        description="Run every input through npukit and ONNX Runtime on the same model (and "
        "the float --reference model): per output the bit-exact fraction, max absolute and "
        "relative error, top-1 agreement and the worst inputs. Exit 1 outside the tolerance "
        "(integer and dequantized outputs bit-exact, float outputs within 1e-4 relative). "
        "--inputs: a folder of .npy/.npz files (one input set a file) or one .npz of "
        "stacked inputs (docs/onnx.md).")
    _common(v)
    v.add_argument("--inputs", required=True, metavar="PATH", help="a folder of .npy/.npz "
                   "files or one .npz of stacked inputs")
    v.add_argument("--reference", metavar="FLOAT.onnx", help="the float model too")
    v.add_argument("--count", type=int, help="the first N inputs only")
    v.add_argument("--backend", choices=["c", "sim"], default="c", help="sim adds cycles")
    v.add_argument("--target", default="gap8", help="a built-in target or a target TOML file "
                   "(default: gap8)")
    v.add_argument("--l1", type=size, help=f"L1 budget, at most the target's L1 ({SIZE_HELP}; "
                   f"default: the target's L1)")
    v.add_argument("--l2", type=size, help=f"L2 budget ({SIZE_HELP}; default: the target's L2)")
    v.add_argument("--l3", type=size, help=f"L3 RAM budget ({SIZE_HELP}; default: the "
                   f"target's)")
    v.add_argument("--json", metavar="OUT.json", help="write the numbers as JSON")
    v.set_defaults(func=refusals_exit_2(_validate))
    s = subparsers.add_parser(
        "sweep", help="plan a model under every combination of memory budgets",
        description="Plan and simulate the model under every L1 x L2 x L3 x target "
        "combination: fits or why not, bytes used, cycles, weights streamed.")
    _common(s)
    s.add_argument("--l1", type=_sizes, required=True, metavar="B,B,...", help="L1 budgets, "
                   f"each at most every target's L1 ({SIZE_HELP})")
    s.add_argument("--l2", type=_sizes, required=True, metavar="B,B,...", help="L2 budgets "
                   f"({SIZE_HELP})")
    s.add_argument("--l3", type=_sizes, metavar="B,B,...", help=f"L3 RAM budgets ({SIZE_HELP}; "
                   f"default: the target's)")
    s.add_argument("--target", default="gap8", metavar="T,T,...", help="built-in targets or "
                   "target TOML files (default: gap8)")
    s.add_argument("--csv", metavar="OUT.csv", help="write one row per combination as CSV")
    s.add_argument("--plot", metavar="OUT.png", help="plot cycles against L2 (log scale), "
                   "the Pareto front marked")
    s.set_defaults(func=refusals_exit_2(_sweep))


def _validate(args: argparse.Namespace) -> int:
    from .validation import validate

    refuse_budgets([args.target], [args.l1])
    check_scheduler(args.scheduler)
    check_paths(args)
    v = validate(args.model, args.inputs, args.reference, target=args.target,
                 l1_budget=args.l1, l2_budget=args.l2, l3_budget=args.l3,
                 backend=args.backend, count=args.count, workers=args.workers,
                 scheduler=args.scheduler)
    print(v)
    if args.json:
        write_new(args.json, v.to_json() + "\n", "--json")
        print(f"numbers written to {args.json}")
    return 0 if v.within else 1


def _sweep(args: argparse.Namespace) -> int:
    from .sweeps import sweep

    targets = args.target.split(",")
    refuse_budgets(targets, args.l1)
    check_scheduler(args.scheduler)
    check_paths(args)
    s = sweep(args.model, args.l1, args.l2, args.l3 or [None], targets,
              workers=args.workers, scheduler=args.scheduler)
    print(s)
    if args.csv:
        s.write_csv(args.csv)
        print(f"rows written to {args.csv}")
    if args.plot:
        s.plot(args.plot)
        print(f"plot written to {args.plot}")
    if s.failed:  # not computed is not "does not fit": the sweep failed
        print(f"npukit sweep: {len(s.failed)} of {len(s.rows)} configurations failed to "
              f"compute (FAILED rows)", file=sys.stderr)
        return 1
    return 0
