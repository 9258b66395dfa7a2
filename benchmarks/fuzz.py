"""The differential fuzzer at full size: what it finds comes with the case that shows it.

Random EasyKernel programs run on the simulator, the fused C and the literal C, compared
bit for bit and against numpy (see tests/fuzz_kernels.py); with --family conversions,
random Compass DSL kernels of casts between every pair of its types and of masked
scatters, and the kernel language's conversions between every pair of its dtypes,
against an exact oracle (see tests/fuzz_conversions.py).

Run:    python benchmarks/fuzz.py --cases 3000 --seed 100000 --time-budget 900
        python benchmarks/fuzz.py --family conversions --cases 2000
Replay: python benchmarks/fuzz.py --replay 100123          (prints the kernel and outcomes)
Memory errors in the generated C: add --sanitize (AddressSanitizer and UBSan builds).
A known bug's fix: add --unsteer NAME (a key of fuzz_kernels.KNOWN) or --unsteer all.

Case number k is the program that the random seed k generates (k = S, S+1, ... for
--seed S); each runs on --data data sets. The table counts programs generated, built and
refused at build (by error class), data sets run, agreed and failed (with the cases that
show it); it exits 1 when anything failed.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import fuzz_conversions  # noqa: E402
import fuzz_kernels  # noqa: E402
from fuzz_kernels import FAILURES, KNOWN  # noqa: E402

FAMILIES = {"kernels": fuzz_kernels, "conversions": fuzz_conversions}


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", choices=sorted(FAMILIES), default="kernels",
                    help="EasyKernel programs, or conversions and masked scatters")
    ap.add_argument("--cases", type=int, default=2000, help="programs to generate")
    ap.add_argument("--seed", dest="first", type=int, default=100_000,
                    help="the first case number")
    ap.add_argument("--data", type=int, default=3, help="data sets per program")
    ap.add_argument("--time-budget", type=float, default=None, metavar="SEC",
                    help="stop generating after SEC seconds")
    ap.add_argument("--replay", type=int, default=None, metavar="CASE",
                    help="print one case's kernel and outcomes")
    ap.add_argument("--sanitize", action="store_true",
                    help="compile the C with AddressSanitizer and UBSan")
    ap.add_argument("--unsteer", action="append", default=[], metavar="NAME",
                    choices=sorted(KNOWN) + ["all"],
                    help="generate the programs of a KNOWN bug again (to check its fix)")
    return ap.parse_args(argv)


def replay(family, number: int, data: int) -> int:
    case = family.generate(number)
    print(case.describe())
    if case.hostile:
        print(f"# built on purpose against a rule: {case.hostile}")
    outs = family.check(case, range(data))
    for o in outs:
        print(o)
    return int(any(o.status in FAILURES for o in outs))


def fuzz(args) -> int:
    family = FAMILIES[args.family]
    t0 = time.perf_counter()
    programs = built = runs = agreed = 0
    refused: collections.Counter = collections.Counter()
    failures: dict[str, list] = collections.defaultdict(list)
    slowest = (0.0, None)
    for number in range(args.first, args.first + args.cases):
        if args.time_budget is not None and time.perf_counter() - t0 > args.time_budget:
            break
        programs += 1
        if programs % 250 == 0:
            print(f"  ... {programs} programs, {sum(map(len, failures.values()))} failures, "
                  f"{time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        t1 = time.perf_counter()
        try:
            outs = family.check(family.generate(number), range(args.data))
        except Exception as exc:  # noqa: BLE001 - a bug of the fuzzer itself: report it
            failures["generator"].append(f"case {number}: {type(exc).__name__}: {exc}")
            continue
        slowest = max(slowest, (time.perf_counter() - t1, number))
        first = outs[0]
        if first.status == "refused":
            refused[first.error] += 1
            continue
        if first.data_seed is None:  # failed at build (raw) or built when it must not
            failures[first.status].append(str(first))
            continue
        built += 1
        for o in outs:
            runs += 1
            if o.status == "agree":
                agreed += 1
            else:
                failures[o.status].append(str(o))
    elapsed = time.perf_counter() - t0
    report(args, programs, built, refused, runs, agreed, failures, elapsed, slowest)
    return int(bool(failures))


def report(args, programs, built, refused, runs, agreed, failures, elapsed, slowest) -> None:
    first = args.first
    rows = [("programs generated", programs, f"cases {first}..{first + programs - 1}"),
            ("built", built, ""),
            ("refused at build", sum(refused.values()),
             ", ".join(f"{k} {v}" for k, v in refused.most_common()))]
    rows += [("data sets run", runs, f"{args.data} per program"), ("agreed", agreed, "")]
    for status in FAILURES + ("generator",):
        items = failures.get(status, [])
        cases = sorted({int(x.split()[1].rstrip(":")) for x in items})
        rows.append((status, len(items), " ".join(map(str, cases[:30]))
                     + (" ..." if len(cases) > 30 else "")))
    width = max(len(r[0]) for r in rows)
    print(f"\nnpukit differential fuzzer, {args.family}: {programs} programs in {elapsed:.0f} s "
          f"({'sanitized C' if args.sanitize else 'C'} vs simulator vs numpy)")
    for name, n, note in rows:
        print(f"  {name:<{width}}  {n:>7}  {note}")
    print(f"  slowest program: {slowest[0]:.1f} s (case {slowest[1]})")
    print(f"  steered around (KNOWN): {', '.join(KNOWN) or 'nothing'}")
    for status, items in failures.items():
        print(f"\n{status}:")
        for x in items[:10]:
            print("  " + x)


def main(argv=None) -> int:
    args = parse(argv)
    for name in args.unsteer:
        for k in list(KNOWN) if name == "all" else [name]:
            KNOWN.pop(k, None)
    if args.sanitize and os.environ.get("NPUKIT_SANITIZE") != "1":
        from npukit.c import sanitizer_env

        env = dict(os.environ, **sanitizer_env())
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    if args.replay is not None:
        return replay(FAMILIES[args.family], args.replay, args.data)
    return fuzz(args)


if __name__ == "__main__":
    sys.exit(main())
