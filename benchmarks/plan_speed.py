"""Planning speed: CPU seconds of ``npukit.onnx.load`` (the target's plan) and of the host
plan (``OnnxGraph.host_graph()``), by phase (reading and normalizing the ONNX graph, lowering
it to layers with the tile solver and the trials of each convolution's tilings, the graph's
programs, cycle estimates and memory plan, then the host plan), the plan cache off, for
ResNet-18, MobileNet-v2 and DenseNet-121 shaped models (``benchmarks/first_result.py``) and
their int8 QDQ versions. Each model is planned in a new process after importing npukit and
onnx (and the modules whose functions the phases time: ``npukit.onnx.lowering``,
``npukit.tiler.graph``), then again in the same process (``again``).

With ``--before DIR`` (an earlier npukit, e.g. ``git archive REV | tar -x -C DIR``) the same
is measured with that version, the runs of the two interleaved; medians of ``--reps`` runs.
CPU times (the machine may be shared: the load average is printed).

Run: python benchmarks/plan_speed.py [--models resnet18,mobilenet_v2,densenet121] [--qdq]
     [--before DIR] [--reps 3]

Goals (issue 40; reported, not asserted): load and host plan, first in a process, within
0.5 s of CPU for resnet18, 0.7 s for mobilenet_v2, 3 s for densenet121, the same for their
QDQ versions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import goal, machine

GOALS = {"resnet18": 0.5, "mobilenet_v2": 0.7, "densenet121": 3.0}
PHASES = ("read", "lower", "graph", "host")
HERE = Path(__file__).resolve().parent


def worker(path: str) -> dict:
    """The CPU seconds of each phase of two plans of the model at ``path`` (this process's
    first, then another)."""
    os.environ["NPUKIT_PLAN_CACHE"] = "0"
    import onnx  # noqa: F401  (imported before the clock starts, as npukit run has it)
    from first_result import BUDGETS

    import npukit.onnx
    import npukit.onnx.lowering as lowering
    from npukit.tiler.graph import GraphModel

    spent = dict.fromkeys(PHASES, 0.0)
    stage = ["target"]

    def timed(owner, name: str, phase) -> None:
        fn = getattr(owner, name)

        def run(*args, **kwargs):
            t = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent["host" if stage[0] == "host" else phase] += time.process_time() - t
        setattr(owner, name, run)

    timed(npukit.onnx, "_imported", "read")
    timed(lowering, "lower", "lower")
    timed(GraphModel, "graph", "graph")
    out = {}
    for run in ("first", "again"):
        spent.update(dict.fromkeys(PHASES, 0.0))
        t = time.process_time()
        g = npukit.onnx.load(path, **BUDGETS)
        load = time.process_time() - t
        stage[0] = "host"
        t = time.process_time()
        g.host_graph()
        host = time.process_time() - t
        stage[0] = "target"
        spent["host"] = host
        out[run] = {**spent, "load": load, "total": load + host}
    return out


def measure(root: Path, path: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{HERE}"}
    got = subprocess.run([sys.executable, str(HERE / "plan_speed.py"), "--worker", str(path)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(got.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="resnet18,mobilenet_v2,densenet121")
    ap.add_argument("--qdq", action="store_true", help="the int8 QDQ versions too")
    ap.add_argument("--before", type=Path, help="an earlier npukit's folder, to compare")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        print(json.dumps(worker(a.worker)))
        return
    import onnx
    from first_result import build

    print(machine())
    names = a.models.split(",")
    names += [n + "-qdq" for n in names] if a.qdq else []
    versions = {"before": a.before, "after": HERE.parent} if a.before else {"now": HERE.parent}
    folder = Path(tempfile.mkdtemp())
    for name in names:
        path = folder / f"{name}.onnx"
        model = build(name)
        if isinstance(model, (str, Path)):
            path = Path(model)
        else:
            onnx.save(model, path)
        runs = {v: [] for v in versions}
        for _ in range(a.reps):  # interleaved: the versions see the same load
            for v, root in versions.items():
                runs[v].append(measure(root, path))
        print(f"\n{name} (CPU s, median of {a.reps}; load average "
              f"{os.getloadavg()[0]:.1f})")
        print(f"  {'version':<8}{'run':<7}" + "".join(f"{p:>8}" for p in PHASES) +
              f"{'load':>8}{'total':>8}")
        medians = {}
        for v in versions:
            for run in ("first", "again"):
                med = {k: statistics.median(r[run][k] for r in runs[v])
                       for k in (*PHASES, "load", "total")}
                medians[v, run] = med
                print(f"  {v:<8}{run:<7}" + "".join(f"{med[p]:8.3f}" for p in PHASES) +
                      f"{med['load']:8.3f}{med['total']:8.3f}")
        now = list(versions)[-1]
        if a.before:
            for run in ("first", "again"):
                b, n = medians["before", run]["total"], medians[now, run]["total"]
                print(f"  {run}: {b / max(n, 1e-9):.2f}x faster")
        bound = GOALS.get(name.removesuffix("-qdq"))
        if bound:
            took = medians[now, "first"]["total"]
            print(goal(f"{name}: load + host plan, first in a process, within {bound} s CPU "
                       f"({took:.2f} s)", took <= bound))


if __name__ == "__main__":
    main()
