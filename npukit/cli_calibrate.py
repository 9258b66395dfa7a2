"""``npukit calibrate TARGET MEASURED.csv -o T.toml``: fit a target's cost constants
(``npukit.costs``) to cycles measured on a board or a simulator, print each measurement's
predicted cycles before and after, and write the calibrated target file.

    npukit calibrate gap8 npukit/targets/gap8_cycles.csv -o my_gap8.toml

MEASURED.csv has the columns name, layer, cores, scope, cycles, source (and optionally l1,
l2: the budgets in bytes); a layer is described as "op=conv in=64x25x5 out=64 k=1x1
relu=1" (op: conv, dwconv, linear, maxpool, avgpool, softmax); scope is "layer" (the whole
layer with its transfers, as AT_GRAPH_PERF counts) or "kernel" (its basic kernels alone on
data in L1). Lines starting with # are comments. docs/targets.md describes the model.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .errors import NpukitError


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``calibrate`` to the ``npukit`` command's subparsers."""
    p = subparsers.add_parser(
        "calibrate", help="fit a target's cycle constants to measured cycles",
        description=__doc__.replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", help="a built-in target name or a target TOML file")
    p.add_argument("measured", metavar="MEASURED.csv", help="the measurements (see above)")
    p.add_argument("-o", "--output", required=True, metavar="T.toml",
                   help="the calibrated target file to write (never the target's own file)")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Carry out ``npukit calibrate`` for parsed ``args``; returns the exit code."""
    from .calibration import calibrate, read_measurements, write_target
    from .machine import target

    try:
        tgt = target(args.target)
        out = Path(args.output)
        if out.exists() and out.resolve() == Path(tgt.path).resolve():
            raise NpukitError(f"-o {out}: is the target file itself; write the calibrated "
                              f"target to another file")
        if out.is_dir() or not out.parent.is_dir():
            raise NpukitError(f"-o {out}: not a file in an existing folder")
        rows = read_measurements(args.measured)
        fit = calibrate(tgt, rows, Path(args.measured).name)
        print(fit.table())
        write_target(fit, out)
    except ImportError as exc:
        print(f"npukit calibrate: error: the layers are built as ONNX models: "
              f"pip install 'npukit[onnx]' ({exc})", file=sys.stderr)
        return 2
    except NpukitError as exc:
        print(f"npukit calibrate: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {out}: {fit.target.costs.caveat()}")
    return 0
