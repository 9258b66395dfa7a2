"""MobileNet-v2 QDQ (uint8 and int8 activations, ``host_speed.model``) at one thread on the
host, with and without the int8 host kernels of issue 40's MobileNet work in the same
process: the one-pass depthwise layers (``depthwise_int``), QLinearAdd rows in vectors
(``qadd_rows``) and the integer matmul in vectors (``matmul_int``); "without" switches the
generator's choice and the two C hooks off (the plane-by-plane depthwise schedule and the
plain loops). The same inputs, the same bytes checked, then CPU medians of interleaved
rounds (npukit runs on the calling thread) with ONNX Runtime's default one-thread session
in the same loop, wall beside them. Goal (issue 40): int8 at or below 1.0x ONNX Runtime,
printed as met or not on the CPU ratio.

Run: python benchmarks/mobilenet_int8_kernels.py [--kinds u8,s8] [--rounds 21]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import harness
import host_speed
import numpy as np

os.environ["NPUKIT_PLAN_CACHE"] = "0"  # each variant planned, not read back


def load(path: Path, kernels: bool):
    """The model's graph with its host plan made with the kernels or without them."""
    import npukit.onnx
    from npukit.tiler import layer_generators_conv as gc
    from npukit.tiler.basic_kernels import elementwise, linear

    saved = (gc.fused_applies, elementwise.qadd_rows, linear.matmul_vectors)
    if not kernels:
        gc.fused_applies = lambda *a: False
        elementwise.qadd_rows = lambda *a: ("", "")
        linear.matmul_vectors = lambda *a: ("", "    int Done = First;")
    elementwise.binary.cache_clear()
    linear.matmul.cache_clear()
    try:
        g = npukit.onnx.load(path, **host_speed.BUDGETS)
        g.host_graph()
        return g
    finally:
        gc.fused_applies, elementwise.qadd_rows, linear.matmul_vectors = saved
        elementwise.binary.cache_clear()
        linear.matmul.cache_clear()


def measure(kind: str, rounds: int) -> tuple[str, str]:
    """(The table's row, the goal's line) for ``kind`` activations."""
    import onnx

    from npukit.onnx.check import ort_session, random_inputs

    tmp = Path(tempfile.mkdtemp())
    path = tmp / f"mobilenet_v2-{kind}.onnx"
    onnx.save(host_speed.model("mobilenet_v2", kind, 224, tmp), path)
    old, new = load(path, False), load(path, True)
    x = random_inputs(new)
    want = {k: v.copy() for k, v in old.run("c", **x).outputs.items()}
    got = new.run("c", **x).outputs
    assert all(want[k].tobytes() == got[k].tobytes() for k in want), f"{kind}: bytes differ"
    session = ort_session(path, 1, int8_fused=False)
    names = [o.name for o in session.get_outputs()]
    outs = {k: np.empty(p.shape, p.dtype) for k, p in new.outputs.items()}
    with harness.threads(1):
        wall, cpu = host_speed.interleaved_cpu({
            "without": lambda: old.run("c", **x, **outs),
            "with": lambda: new.run("c", **x, **outs),
            "ORT": lambda: session.run(names, x)}, rounds)
    before, after = cpu["without"] / cpu["ORT"], cpu["with"] / cpu["ORT"]
    row = (f"| {kind} | {cpu['without'] * 1e3:.2f} | {cpu['with'] * 1e3:.2f} | "
           f"{cpu['ORT'] * 1e3:.2f} | {before:.2f}x | {after:.2f}x | "
           f"{wall['without'] * 1e3:.1f} / {wall['with'] * 1e3:.1f} / {wall['ORT'] * 1e3:.1f} |")
    return row, harness.goal(f"mobilenet_v2 {kind} at 1 thread within 1.0x of ONNX Runtime "
                             f"(CPU, {after:.2f}x)", after <= 1.0)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kinds", default="u8,s8")
    ap.add_argument("--rounds", type=int, default=21)
    a = ap.parse_args(argv)
    os.environ["NPUKIT_THREADS"] = "1"
    print(f"machine: {harness.machine()}")
    print("| kind | without ms CPU | with ms CPU | ONNX Runtime ms CPU | without / ORT | "
          "with / ORT | wall ms without / with / ORT |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    goals = []
    for kind in a.kinds.split(","):
        row, goal = measure(kind, a.rounds)
        print(row, flush=True)
        goals.append(goal)
    print("\n".join(goals))


if __name__ == "__main__":
    main()
