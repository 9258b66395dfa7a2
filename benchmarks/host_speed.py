"""npukit's host schedule against ONNX Runtime on torchvision-shaped CNNs at 224x224, one
thread, wall time, medians of interleaved rounds: resnet18, mobilenet_v2 and squeezenet1_1
(built in code with onnx.helper, random weights: ``first_result.resnet18``,
``first_result.mobilenet_v2``, ``sim_speed.squeezenet1_1``), float32 and int8 QDQ with uint8
and with int8 activations (ONNX Runtime's quantization tool, per-tensor). ONNX Runtime runs
its default session (``intra_op_num_threads=1``, ``inter_op_num_threads=1``), as a user runs
it. Beside the wall times, the CPU times of the same calls (both on the calling thread): on a
shared machine under load they are the steadier figure. Goals (issue 40): float32 within
1.5x of ONNX Runtime, int8 at or below 1.0x, on wall time; each is printed as met or not.

``--profile`` adds, per model, where npukit's time goes: each host layer's program compiled
alone and timed on random data (medians of interleaved rounds), the layers sorted by CPU
time, with their share of the sum.

Run: python benchmarks/host_speed.py [--models resnet18,mobilenet_v2,squeezenet1_1]
[--kinds f32,u8,s8] [--rounds 7] [--profile] [--top 12] [--size 224]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import harness
import numpy as np

GOALS = {"f32": 1.5, "u8": 1.0, "s8": 1.0}
BUDGETS = dict(l1_budget=48000, l2_budget=512 * 1024, l3_budget=64 << 20,
               l3_flash_budget=64 << 20)


def model(name: str, kind: str, size: int, folder: Path):
    """Model ``name`` as float32 (``kind`` "f32") or int8 QDQ with "u8" / "s8" activations."""
    from first_result import mobilenet_v2, resnet18
    from sim_speed import images, squeezenet1_1

    m = {"resnet18": resnet18, "mobilenet_v2": mobilenet_v2,
         "squeezenet1_1": squeezenet1_1}[name](size)
    if kind == "f32":
        return m
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from onnx_helpers import quantize_qdq
    return quantize_qdq(m, images(size, 2), folder, act=kind)


def random_array(layout, rng) -> np.ndarray:
    """An array for one parameter of ``layout`` (its strides honoured), random values."""
    dt = np.dtype(layout.dtype)
    span = 1 + sum((n - 1) * s for n, s in zip(layout.shape, layout.strides))
    if dt.kind == "f":
        flat = rng.uniform(-1, 1, layout.offset + span).astype(dt)
    else:
        info = np.iinfo(dt)
        flat = rng.integers(max(info.min, -100), min(info.max, 100) + 1,
                            layout.offset + span).astype(dt)
    return np.lib.stride_tricks.as_strided(
        flat[layout.offset:], layout.shape, [s * dt.itemsize for s in layout.strides])


def profile(hg, rounds: int, top: int) -> list[str]:
    """Each layer of host graph ``hg`` timed alone (its program, compiled): rows of a table
    sorted by CPU time (on a machine others load, wall times swing several-fold), the wall
    time beside it."""
    rng = np.random.default_rng(0)
    cases = {}
    for layer in hg.layers:
        fn = layer.program.compile("c")
        arrays = {b.name: random_array(lay, rng) for b, lay in layer.program.params}
        cases[layer.name] = (lambda f=fn, a=arrays: f(**a))
    wall, cpu = interleaved_cpu(cases, rounds)
    total = sum(cpu.values())
    rows = [f"    sum of layers alone {total * 1e3:.2f} ms of CPU "
            f"({sum(wall.values()) * 1e3:.2f} ms wall)"]
    for name, t in sorted(cpu.items(), key=lambda kv: -kv[1])[:top]:
        rows.append(f"    {name:<48} {t * 1e3:8.3f} ms CPU {100 * t / total:5.1f}% "
                    f"({wall[name] * 1e3:.3f} ms wall)")
    return rows


def interleaved_cpu(cases: dict, rounds: int) -> tuple[dict, dict]:
    """Medians of wall and of CPU seconds (this process's: both run on this thread) per
    case over ``rounds`` rounds of every case once, in a rotating order, after a warm-up
    round. On a machine others load, the CPU seconds say what the wall seconds cannot."""
    names = list(cases)
    wall, cpu = {n: [] for n in names}, {n: [] for n in names}
    for r in range(rounds + 1):
        for n in names[r % len(names):] + names[:r % len(names)]:
            w0, c0 = time.perf_counter(), time.process_time()
            cases[n]()
            if r:
                wall[n].append(time.perf_counter() - w0)
                cpu[n].append(time.process_time() - c0)
    return ({n: statistics.median(v) for n, v in wall.items()},
            {n: statistics.median(v) for n, v in cpu.items()})


def measure(name: str, kind: str, size: int, rounds: int, folder: Path, want_profile: bool,
            top: int) -> tuple[str, str, list[str]]:
    import onnx

    import npukit.onnx
    from npukit.onnx.check import compare, ort_run, ort_session, random_inputs

    path = folder / f"{name}-{kind}.onnx"
    onnx.save(model(name, kind, size, folder), path)
    g = npukit.onnx.load(path, **BUDGETS)
    x = random_inputs(g)
    outs = {k: np.empty(p.shape, p.dtype) for k, p in g.outputs.items()}
    got = {k: v.copy() for k, v in g.run("c", **x).outputs.items()}
    ref, _ = ort_run(path, x, threads=1)
    check = "; ".join(str(compare(k, got[k], ref[k], g.output_steps.get(k))) for k in ref)
    session = ort_session(path, 1, int8_fused=False)
    names = [o.name for o in session.get_outputs()]
    with harness.threads(1):
        med, cpu = interleaved_cpu({"npukit": lambda: g.run("c", **x, **outs),
                                    "ORT": lambda: session.run(names, x)}, rounds)
    ratio = med["npukit"] / med["ORT"]
    row = (f"| {name} | {kind} | {med['npukit'] * 1e3:.2f} | {med['ORT'] * 1e3:.2f} | "
           f"{ratio:.2f}x | {cpu['npukit'] * 1e3:.2f} | {cpu['ORT'] * 1e3:.2f} | "
           f"{cpu['npukit'] / cpu['ORT']:.2f}x | {'met' if ratio <= GOALS[kind] else 'NOT met'} |")
    goal = harness.goal(f"{name} {kind} {size}x{size} at 1 thread within {GOALS[kind]}x of "
                        f"ONNX Runtime ({ratio:.2f}x)", ratio <= GOALS[kind])
    detail = [f"  {name} {kind}: vs ONNX Runtime {check}"]
    if want_profile:
        with harness.threads(1):
            detail += profile(g.host_graph(), max(3, rounds // 2), top)
    return row, goal, detail


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="resnet18,mobilenet_v2,squeezenet1_1")
    ap.add_argument("--kinds", default="f32,u8,s8")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args(argv)
    os.environ["NPUKIT_THREADS"] = "1"
    print(f"machine: {harness.machine()}")
    rows, goals, details = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.models.split(","):
            for kind in a.kinds.split(","):
                row, goal, detail = measure(name, kind, a.size, a.rounds, Path(tmp),
                                            a.profile, a.top)
                rows.append(row)
                goals.append(goal)
                details += detail
                print("\n".join(detail), flush=True)
    print("| model | kind | npukit ms | ONNX Runtime ms | npukit / ORT | npukit CPU ms | "
          "ORT CPU ms | CPU ratio | goal (wall) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    print("\n".join(rows))
    print("\n".join(goals))


if __name__ == "__main__":
    main()
