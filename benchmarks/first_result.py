"""Time to the first result: from an ONNX file to the first inference on the C back end,
with an empty compile cache (``NPUKIT_CACHE_DIR`` pointed at a new folder), by phase:
import of npukit, import and plan of the model, the host plan, the C compile, the first
inference; then the second load of the same model (a new ``OnnxGraph``, the compile cache
and the plan cache warm), in the same process and in a new one (``2nd proc``: from the
interpreter's start, as a user's second run: whether it imported onnx, and its compiler runs).
CPU seconds of the process beside wall seconds (the machine may be shared). The two processes
share a folder of Python bytecode (``PYTHONPYCACHEPREFIX``, bytecode written whatever
``PYTHONDONTWRITEBYTECODE`` says), filled before the first (``compileall`` of npukit, and an
import of onnx and ONNX Runtime), as an installed package has it: the first result pays for
the C compile, not for Python's. With ``--plan``: ``npukit run MODEL --plan`` (the plan, tiles
and predicted cycles; nothing compiled), wall and CPU seconds, with an empty plan cache and
with the model's plan cached (the bytecode filled likewise, the budgets of the first result),
medians of ``--reps`` runs. The models are built in code
(random weights): ResNet-18, MobileNet-v2 and DenseNet-121 shaped, float32, and their int8
QDQ versions (ONNX Runtime's quantization tool) with ``--qdq``.

Run: python benchmarks/first_result.py [--models resnet18,mobilenet_v2,densenet121] [--qdq]
[--flags "-O2 -march=native,-O3 -march=native"] [--size 224] [--plan] [--reps 3]

Goals (reported, not asserted): resnet18 within 3 s, mobilenet_v2 within 4 s, densenet121
within 15 s; the second load of a compiled model within 1 s; ``--plan`` on resnet18 within
1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

GOALS = {"resnet18": 3.0, "mobilenet_v2": 4.0, "densenet121": 15.0}
SECOND_LOAD = 1.0
PLAN_ONLY = {"resnet18": 1.0}
BUDGETS = dict(l1_budget=48000, l2_budget=512 * 1024, l3_budget=64 << 20,
               l3_flash_budget=64 << 20)


class Net:
    """A model under construction: nodes and initializers with random weights."""

    def __init__(self, rng_seed: int):
        self.rng, self.nodes, self.inits, self.k = np.random.default_rng(rng_seed), [], {}, 0

    def name(self, what: str) -> str:
        self.k += 1
        return f"{what}{self.k}"

    def conv(self, x, cin, cout, k, stride=1, group=1, relu=True, relu6=False):
        from onnx import helper as h

        n = self.name("conv")
        w = self.rng.normal(size=(cout, cin // group, k, k)) * np.sqrt(2 / (k * k * cin // group))
        self.inits[f"{n}_w"] = w.astype(np.float32)
        self.inits[f"{n}_b"] = (self.rng.normal(size=cout) * 0.05).astype(np.float32)
        self.nodes.append(h.make_node("Conv", [x, f"{n}_w", f"{n}_b"], [n], kernel_shape=[k, k],
                                      pads=[k // 2] * 4, strides=[stride] * 2, group=group))
        if relu6:
            self.nodes.append(h.make_node("Clip", [n, "zero", "six"], [n + "_r"]))
            return n + "_r"
        if relu:
            self.nodes.append(h.make_node("Relu", [n], [n + "_r"]))
            return n + "_r"
        return n

    def op(self, op, ins, **attrs):
        from onnx import helper as h

        n = self.name(op.lower())
        self.nodes.append(h.make_node(op, ins, [n], **attrs))
        return n

    def head(self, x, c, classes=1000):
        from onnx import helper as h

        self.inits["fc_w"] = (self.rng.normal(size=(classes, c)) * 0.02).astype(np.float32)
        self.inits["fc_b"] = np.zeros(classes, np.float32)
        g = self.op("GlobalAveragePool", [x])
        f = self.op("Flatten", [g])
        self.nodes.append(h.make_node("Gemm", [f, "fc_w", "fc_b"], ["logits"], transB=1))

    def model(self, size, name):
        # onnx imported here, not at the top: the worker's import of npukit is timed without it
        from onnx import TensorProto
        from onnx import helper as h
        from onnx import numpy_helper as nh

        self.inits["zero"] = np.array(0, np.float32)
        self.inits["six"] = np.array(6, np.float32)
        g = h.make_graph(self.nodes, name, [h.make_tensor_value_info(
            "x", TensorProto.FLOAT, [1, 3, size, size])],
            [h.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])],
            [nh.from_array(v, k) for k, v in self.inits.items()])
        return h.make_model(g, opset_imports=[h.make_opsetid("", 13)])


def resnet18(size=224, rng_seed=0):
    net = Net(rng_seed)
    x = net.conv("x", 3, 64, 7, stride=2)
    x = net.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    c = 64
    for stage, width in enumerate((64, 128, 256, 512)):
        for b in range(2):
            stride = 2 if stage and not b else 1
            y = net.conv(net.conv(x, c, width, 3, stride), width, width, 3, relu=False)
            sc = net.conv(x, c, width, 1, stride, relu=False) if (stride > 1 or c != width) else x
            x = net.op("Relu", [net.op("Add", [y, sc])])
            c = width
    net.head(x, c)
    return net.model(size, "resnet18")


def mobilenet_v2(size=224, rng_seed=1):
    net = Net(rng_seed)
    x, c = net.conv("x", 3, 32, 3, stride=2, relu6=True), 32
    for t, width, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                           (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            stride = s if i == 0 else 1
            hid = c * t
            y = net.conv(x, c, hid, 1, relu6=True) if t != 1 else x
            y = net.conv(y, hid, hid, 3, stride, group=hid, relu6=True)
            y = net.conv(y, hid, width, 1, relu=False)
            x = net.op("Add", [x, y]) if stride == 1 and c == width else y
            c = width
    x = net.conv(x, c, 1280, 1, relu6=True)
    net.head(x, 1280)
    return net.model(size, "mobilenet_v2")


def build(name: str, size: int = 224):
    """Model ``name`` (float32; ``<name>-qdq``: int8 QDQ, uint8 activations)."""
    if name.endswith("-qdq"):
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from onnx_helpers import quantize_qdq
        m = build(name[:-4], size)
        rng = np.random.default_rng(5)
        calib = [{"x": rng.normal(size=(1, 3, size, size)).astype(np.float32)}
                 for _ in range(2)]
        return quantize_qdq(m, calib, Path(tempfile.mkdtemp()), "u8")
    if name == "densenet121":
        from onnx_plan import densenet
        return densenet(size)[0]
    return {"resnet18": resnet18, "mobilenet_v2": mobilenet_v2}[name](size)


def worker(path: str, runs: int) -> dict:
    """In a fresh process (the cache directory in NPUKIT_CACHE_DIR): the phases of the
    first result, then a second load of the same file, then ``runs`` timed inferences."""
    import npukit.onnx
    from npukit.c import toolchain
    started = float(os.environ.get("NPK_FIRST_RESULT_START", time.time()))
    calls = []
    compile_one = toolchain.run_compiler

    def counting(cmd):
        calls.append(cmd[-1])
        return compile_one(cmd)

    toolchain.run_compiler = counting
    out = {"import": time.time() - started,  # from the interpreter's start
           "import cpu": time.process_time()}

    def phase(name: str, fn):
        t, c = time.perf_counter(), time.process_time()
        got = fn()
        out[name], out[name + " cpu"] = time.perf_counter() - t, time.process_time() - c
        return got

    def first(prefix: str):
        g = phase(prefix + "plan", lambda: npukit.onnx.load(path, **BUDGETS))
        hg = phase(prefix + "host plan", g.host_graph)
        n, cc = len(calls), resource.getrusage(resource.RUSAGE_CHILDREN)
        phase(prefix + "compile", lambda: hg.compile("c"))
        out[prefix + "cc calls"] = len(calls) - n
        # The compilers' CPU (children's rusage): the compile's wall time on a shared
        # machine says as much about the other jobs.
        now = resource.getrusage(resource.RUSAGE_CHILDREN)
        out[prefix + "cc cpu"] = now.ru_utime + now.ru_stime - cc.ru_utime - cc.ru_stime
        x = np.random.default_rng(0).normal(size=g.inputs["x"].shape).astype(np.float32)
        phase(prefix + "infer", lambda: g.run("c", x=x))
        return g, x

    g, x = first("")
    first("warm ")
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        g.run("c", x=x)
        times.append(time.perf_counter() - t)
    out["run median"] = statistics.median(times) if times else float("nan")
    # A second process (the model's plan cached) should import no onnx (nor ml_dtypes).
    out["onnx imported"] = "onnx" in sys.modules
    return out


def flag_sets(path: Path, sets: list[str], rounds: int) -> dict:
    """In one process, for each set of compiler flags: the graph's host C compiled in an
    empty cache (wall seconds, and the CPU seconds of the compilers), and the inference's
    median over interleaved rounds (NPUKIT_THREADS=1), the sets in the same loop."""

    from harness import interleaved

    import npukit.onnx
    from npukit.c import toolchain
    from npukit.tiler.graph_c import CompiledGraph

    g = npukit.onnx.load(str(path), **BUDGETS)
    hg = g.host_graph()
    x = np.random.default_rng(0).normal(size=g.inputs["x"].shape).astype(np.float32)
    arrays = {g.inputs["x"].cname: x} | {p.cname: np.empty(p.shape, p.dtype)
                                         for p in g.outputs.values()}
    saved = {k: os.environ.get(k) for k in ("NPUKIT_CFLAGS", "NPUKIT_CACHE_DIR",
                                             "NPUKIT_THREADS")}
    out, handles = {}, {}
    try:
        os.environ["NPUKIT_THREADS"] = "1"
        for flags in sets:
            os.environ["NPUKIT_CFLAGS"] = flags
            os.environ["NPUKIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="npukit-flags-")
            cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            handles[flags] = CompiledGraph(hg)
            wall = time.perf_counter() - t
            now = resource.getrusage(resource.RUSAGE_CHILDREN)
            out[flags] = {"compile": wall, "compile cpu": now.ru_utime + now.ru_stime -
                          cpu.ru_utime - cpu.ru_stime}
        # The same graph as one translation unit (as before the pieces), the last flags.
        os.environ["NPUKIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="npukit-flags-")
        cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        toolchain.library(hg.c_source(), private=True)
        wall = time.perf_counter() - t
        now = resource.getrusage(resource.RUSAGE_CHILDREN)
        single = {"compile": wall, "run": float("nan"),
                  "compile cpu": now.ru_utime + now.ru_stime - cpu.ru_utime - cpu.ru_stime}
        medians = interleaved({f: (lambda h=h: h(**arrays)) for f, h in handles.items()},
                              rounds)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    for flags in sets:
        out[flags]["run"] = medians[flags]
    out[f"{sets[-1]} (one unit)"] = single
    return out


def _bytecode(env: dict) -> dict:
    """``env`` with a folder of Python bytecode of its own (``PYTHONPYCACHEPREFIX``, written
    whatever ``PYTHONDONTWRITEBYTECODE`` says), filled as an installed package has it:
    npukit's modules compiled, onnx and ONNX Runtime imported once."""
    import npukit
    env = dict(env, PYTHONPYCACHEPREFIX=tempfile.mkdtemp(prefix="npukit-pyc-"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(npukit.__file__).parent)],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, "-c", "import onnx, onnxruntime"], env=env, check=True)
    return env


def measure(path: Path, cflags: str | None, runs: int) -> tuple[dict, dict]:
    """The worker's phases with empty caches, then in a second process (caches warm)."""
    env = _bytecode(dict(os.environ, NPUKIT_CACHE_DIR=tempfile.mkdtemp(prefix="npukit-first-"),
                         NPUKIT_THREADS="1"))
    if cflags:
        env["NPUKIT_CFLAGS"] = cflags
    got = []
    for _ in range(2):
        env["NPK_FIRST_RESULT_START"] = repr(time.time())
        res = subprocess.run([sys.executable, __file__, "--worker", str(path), "--runs",
                              str(runs)], env=env, capture_output=True, text=True, check=False)
        if res.returncode:
            raise SystemExit(f"{path.name}: the worker failed:\n{res.stderr[-3000:]}")
        got.append(json.loads(res.stdout.strip().splitlines()[-1]))
    return got[0], got[1]


def plan_only(path: Path, reps: int) -> dict:
    """``npukit run PATH --plan`` with an empty plan cache, then with its plan cached: the
    medians of ``reps`` runs of each, wall and CPU seconds (the child's)."""

    times = {"cold": [], "warm": []}
    compiled = _bytecode(dict(os.environ))
    for _ in range(reps):
        env = dict(compiled, NPUKIT_CACHE_DIR=tempfile.mkdtemp(prefix="npukit-plan-"))
        for kind in ("cold", "warm"):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            res = subprocess.run([sys.executable, "-m", "npukit.cli", "run", str(path),
                                  "--plan", "--l1", str(BUDGETS["l1_budget"]), "--l2",
                                  str(BUDGETS["l2_budget"]), "--l3", str(BUDGETS["l3_budget"]),
                                  "--flash", str(BUDGETS["l3_flash_budget"])], env=env,
                                 capture_output=True, text=True, check=False)
            wall = time.perf_counter() - t
            now = resource.getrusage(resource.RUSAGE_CHILDREN)
            if res.returncode:
                raise SystemExit(f"{path.name}: npukit run --plan failed:\n{res.stderr[-3000:]}")
            times[kind].append((wall, now.ru_utime + now.ru_stime - before.ru_utime -
                                before.ru_stime))
    return {k: tuple(statistics.median(x[i] for x in v) for i in (0, 1))
            for k, v in times.items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="resnet18,mobilenet_v2,densenet121")
    ap.add_argument("--qdq", action="store_true", help="the int8 QDQ versions too")
    ap.add_argument("--flags", default="-O2 -march=native,-O3 -march=native",
                    help="compiler flag sets to compare (comma-separated)")
    ap.add_argument("--runs", type=int, default=5, help="timed inferences after the first")
    ap.add_argument("--size", type=int, default=224, help="input height and width")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--compare-flags", action="store_true",
                    help="only compare the flag sets: compile time and run time")
    ap.add_argument("--plan", action="store_true",
                    help="only time `npukit run MODEL --plan`, plan cache empty and warm")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of --plan (medians)")
    a = ap.parse_args(argv)
    if a.worker:
        print(json.dumps(worker(a.worker, a.runs)))
        return
    import ml_dtypes
    import onnx
    from harness import goal, machine
    print(f"machine: {machine()}; onnx {onnx.__version__}, ml_dtypes {ml_dtypes.__version__}")
    names = a.models.split(",")
    names += [n + "-qdq" for n in names] if a.qdq else []
    folder = Path(tempfile.mkdtemp(prefix="npukit-models-"))
    if a.compare_flags:
        print(f"{'model':<18}{'flags (pieces unless said)':<38}{'compile s':>10}"
              f"{'cc CPU s':>10}{'run ms':>9}")
        for name in names:
            path = folder / f"{name}.onnx"
            onnx.save(build(name, a.size), path)
            for flags, r in flag_sets(path, a.flags.split(","), a.runs).items():
                print(f"{name:<18}{flags:<38}{r['compile']:>10.2f}{r['compile cpu']:>10.2f}"
                      f"{r['run'] * 1e3:>9.2f}")
        return
    if a.plan:
        print(f"{'model':<18}{'cold s':>8}{'cold CPU':>10}{'cached s':>10}{'cached CPU':>12}"
              f"  goals (npukit run MODEL --plan, medians of {a.reps})")
        for name in names:
            path = folder / f"{name}.onnx"
            onnx.save(build(name, a.size), path)
            r = plan_only(path, a.reps)
            bound = PLAN_ONLY.get(name)
            marks = [goal(f"--plan within {bound:g} s, {kind}", r[kind][0] <= bound)
                     for kind in ("cold", "warm")] if bound else []
            print(f"{name:<18}{r['cold'][0]:>8.2f}{r['cold'][1]:>10.2f}{r['warm'][0]:>10.2f}"
                  f"{r['warm'][1]:>12.2f}  " + "; ".join(marks))
        return
    cols = ["import", "plan", "host plan", "compile", "infer"]
    print(f"{'model':<18}{'flags':<20}" + "".join(f"{c:>10}" for c in cols) +
          f"{'total':>8}{'CPU':>6}{'cc':>5}{'warm cc':>8}{'2nd load':>9}{'2nd proc':>9}"
          f"{'run':>8}  goals")
    for name in names:
        path = folder / f"{name}.onnx"
        onnx.save(build(name, a.size), path)
        bound = GOALS.get(name.removesuffix("-qdq"))
        for cflags in a.flags.split(","):
            r, r2 = measure(path, cflags, a.runs)
            total = sum(r[c] for c in cols)
            cpu = sum(r[c + " cpu"] for c in cols)
            second = sum(r["warm " + c] for c in cols[1:])
            proc = sum(r2[c] for c in cols)
            marks = [goal(f"first result within {bound:g} s", total <= bound)] if bound else []
            marks.append(goal(f"second load within {SECOND_LOAD:g} s", second <= SECOND_LOAD))
            print(f"{name:<18}{cflags:<20}" + "".join(f"{r[c]:>10.2f}" for c in cols) +
                  f"{total:>8.2f}{cpu:>6.2f}{r['cc calls']:>5}{r['warm cc calls']:>8}"
                  f"{second:>9.2f}{proc:>9.2f}{r['run median'] * 1e3:>6.1f}ms  " +
                  "; ".join(marks))
            print(f"{'':<38}CPU s: " + ", ".join(f"{c} {r[c + ' cpu']:.2f}" for c in cols) +
                  f"; the compilers {r['cc cpu']:.2f}")
            for what, q, pre in (("second load", r, "warm "), ("2nd proc", r2, "")):
                print(f"{'':<38}{what}: " + ", ".join(
                    f"{c} {q[pre + c]:.2f} s ({q[pre + c + ' cpu']:.2f} CPU)"
                    for c in cols if pre + c in q and pre + c + " cpu" in q))
            print(f"{'':<38}2nd proc: onnx imported: {'yes' if r2['onnx imported'] else 'no'}, "
                  f"compiler runs: {r2['cc calls']}; "
                  + goal(f"2nd proc within {SECOND_LOAD:g} s", proc <= SECOND_LOAD))


if __name__ == "__main__":
    main()
