"""The ``npukit`` command: ``npukit demo``, ``npukit targets``, and one subcommand per
capability that offers one."""

from __future__ import annotations

import argparse
import os
import sys

from . import machine as _target


def _targets(args: argparse.Namespace) -> int:
    for name in _target.targets():
        t = _target.target(name)
        print(f"{t.name}: {t.description}")
        print(f"  cores {t.cores}, clock {t.clock_mhz:g} MHz, parameters live in {t.home}, "
              f"rounding {t.arith.rounding}, LUT {t.lut.banks} bank(s) x {t.lut.bank_bits} bits")
        print(f"  {'memory':<10}{'size (B)':>10}")
        for m in t.memories.values():
            print(f"  {m.name:<10}{m.size:>10}")
        # Columns as wide as their longest entry (and never narrower than before).
        src = max([23, *(len(",".join(e.src)) for e in t.engines.values())]) + 1
        dst = max([15, *(len(",".join(e.dst)) for e in t.engines.values())]) + 1
        print(f"  {'engine':<13}{'from':<{src}}{'to':<{dst}}{'B/cycle':>8}{'latency':>9}")
        for e in t.engines.values():
            print(f"  {e.name:<13}{','.join(e.src):<{src}}{','.join(e.dst):<{dst}}"
                  f"{e.bandwidth:>8g}{e.latency:>9}")
        for u in t.units.values():
            widths = "  ".join(f"{a}x{b}={w}" for (a, b), w in u.widths.items())
            print(f"  unit {u.name} (latency {u.latency}): {widths}")
        print(f"  {t.costs.caveat()}")
        print()
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demo import demo, sections

    if args.list:
        print(sections())
        return 0
    return 1 if any(c.ok is False for c in demo([args.section] if args.section else None)) \
        else 0


def version() -> str:
    """The installed package's version, from its metadata."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("npukit")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed: pip install -e .)"


class _Version(argparse.Action):
    """``--version``, argparse's, but the installed metadata read only when asked for (it
    costs every other command's start 25 ms of CPU)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="show program's version number and exit"):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"npukit {version()}")
        parser.exit()


# What ``npukit --help`` says first: plain text, as argparse prints it.
DESCRIPTION = ("Write, tile, verify and generate compute kernels for NPUs. 'npukit demo' tours "
               "every capability; 'npukit COMMAND --help' describes each command.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="npukit", description=DESCRIPTION)
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True)
    from .demo import SECTIONS

    demo = sub.add_parser(
        "demo", help="show what npukit does, section by section",
        description="A tour of every capability, each section checking its own results "
                    "(against numpy, the simulator, ONNX Runtime) and the run ending with a "
                    "summary of the checks; exit status 1 when one failed. Without SECTION, "
                    "every section in order.")
    demo.add_argument("section", nargs="?", choices=list(SECTIONS), metavar="SECTION",
                      help="run only this section (--list names them)")
    demo.add_argument("--list", action="store_true", help="list the sections and exit")
    demo.set_defaults(func=_demo)
    sub.add_parser("targets", help="list the built-in targets").set_defaults(func=_targets)
    from .lut.cli import register as register_lut

    register_lut(sub)
    from .cli_build import register as register_build

    register_build(sub)
    from .c.cache import register as register_cache

    register_cache(sub)
    from .onnx.cli import register as register_run

    register_run(sub)
    from .onnx.cli_jobs import register as register_jobs

    register_jobs(sub)
    from .cli_calibrate import register as register_calibrate

    register_calibrate(sub)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        # The reader went away (`npukit targets | head -1`): not an error of ours. Point
        # stdout at /dev/null so that Python's flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
