"""Random QDQ models against ONNX Runtime at full size (tests/onnx_fuzz.py builds them).

Run:    python benchmarks/qdq_fuzz.py --models 300 --seed 0 [--backend c]
Replay: python benchmarks/qdq_fuzz.py --replay 118         (prints the model and outcome)

Model number k is what the random seed k generates: a float model of Conv, Gemm, MatMul,
Add, Softmax, MaxPool/AveragePool, Tanh, deep residual chains, Swish and global-average-
pooling heads, quantized by ONNX Runtime's quantize_static (int8 or uint8 activations,
per-tensor or per-channel int8 weights). The table counts models, outputs, elements
bit-exact, quantized outputs wholly bit-exact, the largest error of a quantized output in
LSB and the time; every quantized output not bit-exact, every float output beyond its
tolerance and every model npukit refuses is listed (column failed), and the exit status is
then 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from onnx_fuzz import check, generate, lsb, quantized  # noqa: E402

from npukit import NpukitError  # noqa: E402


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=300, help="models to generate")
    ap.add_argument("--seed", dest="first", type=int, default=0, help="the first model number")
    ap.add_argument("--backend", default="sim", choices=("sim", "c"))
    ap.add_argument("--replay", type=int, default=None, metavar="MODEL",
                    help="print one model's operations and outcome")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    if args.replay is not None:
        case = generate(args.replay)
        print(case.describe())
        results = check(case, args.backend)
        for r in results:
            print(" ", r)
        return int(not all(r.within for r in results))
    t0 = time.perf_counter()
    outputs, exact, worst, bad, qexact, qcount = 0, [], 0.0, [], 0, 0
    by_act = {}
    for k in range(args.first, args.first + args.models):
        case = generate(k)
        try:
            results = check(case, args.backend)
        except NpukitError as e:  # a refusal or a shape unlike ONNX Runtime's
            bad.append(f"{case.describe()}: {type(e).__name__}: {e}")
            continue
        for r in results:
            outputs += 1
            exact.append(r.exact)
            by_act.setdefault(case.activations, []).append(r.exact)
            if quantized(r):
                worst = max(worst, lsb(r))
                qcount += 1
                qexact += r.exact == 1.0
            if not r.within or (quantized(r) and r.exact < 1.0):
                bad.append(f"{case.describe()}: {r}")
    took = time.perf_counter() - t0
    print(f"| models | outputs | bit-exact elements | quantized outputs bit-exact | "
          f"max error (quantized) | failed | time ({args.backend}) |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {args.models} | {outputs} | {100 * sum(exact) / len(exact):.2f}% | "
          f"{qexact} of {qcount} | {worst:.3g} LSB | {len(bad)} | {took:.1f} s |")
    for act, e in sorted(by_act.items()):
        print(f"  {act} activations: {len(e)} outputs, {100 * sum(e) / len(e):.2f}% bit-exact, "
              f"{sum(x == 1.0 for x in e)} wholly bit-exact")
    for line in bad:
        print(line)
    return int(bool(bad))


if __name__ == "__main__":
    sys.exit(main())
