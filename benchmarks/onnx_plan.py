"""Planning time at model-zoo scale: models built in code with onnx.helper, imported and
planned with the GAP AutoTiler document's budgets, timed by stage (reading and rewriting the
ONNX graph, lowering it to layers, the tile solver, the graph's IR and cycle estimates, the
memory planner):

- a DenseNet-121-style model (four dense blocks of 6, 12, 24 and 16 layers, each a 1x1 and a
  3x3 convolution whose output is concatenated to all before it; transitions of a 1x1
  convolution and an average pooling);
- ViT-shaped models (a 16x16 patch convolution, 197 tokens, pre-norm encoder blocks whose
  attention multiplies batches of matrices): ViT-tiny (hidden 192, 3 heads) and ViT-B/16
  (hidden 768, 12 heads), 12 blocks each;
- swin_t's first stage (two Swin blocks, 56x56, dim 96, window 7, the second shifted:
  ``benchmarks/transformer_blocks.py``, q, k and v by ``Split``);
- the cost of doubling the layers: ViT-tiny-shaped models of N, 2N and 4N blocks.

Run: python benchmarks/onnx_plan.py [--models densenet,vit-tiny,vit-b16,swin,scaling] [--rounds 1]
     [--size 224] [--blocks 6,12,24,16] [--scale-blocks 3] [--profile]

Goals (reported, not asserted): the 120-layer DenseNet plans in under a minute, ViT-tiny in
under 2 minutes, ViT-B/16 in under 5 (wall time); doubling the blocks at most 2.3 times the
CPU time.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from contextlib import contextmanager

import numpy as np
from harness import goal, machine

BUDGETS = dict(l1_budget=48000, l2_budget=512 * 1024, l3_budget=64 << 20,
               l3_flash_budget=64 << 20)
VIT_BUDGETS = {**BUDGETS, "l3_budget": 1 << 30, "l3_flash_budget": 1 << 30}  # ViT-B: 346 MB


def densenet(size: int = 224, blocks=(6, 12, 24, 16), growth: int = 32, seed: int = 0):
    """The model and its number of convolutions."""
    from onnx import TensorProto
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(seed)
    nodes, inits, convs = [], {}, [0]

    def conv(x, cin, cout, k, stride=1):
        name = f"c{convs[0]}"
        convs[0] += 1
        inits[f"{name}_w"] = (rng.normal(size=(cout, cin, k, k)) *
                              np.sqrt(2 / (k * k * cin))).astype(np.float32)
        inits[f"{name}_b"] = (rng.normal(size=cout) * 0.05).astype(np.float32)
        nodes.extend([h.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_o"],
                                  kernel_shape=[k, k], pads=[k // 2] * 4,
                                  strides=[stride, stride]),
                      h.make_node("Relu", [f"{name}_o"], [name])])
        return name

    x, c = conv("x", 3, 64, 7, stride=2), 64
    nodes.append(h.make_node("MaxPool", [x], ["pool0"], kernel_shape=[2, 2], strides=[2, 2]))
    x = "pool0"
    for b, n in enumerate(blocks):
        for i in range(n):
            y = conv(conv(x, c, 4 * growth, 1), 4 * growth, growth, 3)
            cat = f"cat{b}_{i}"
            nodes.append(h.make_node("Concat", [x, y], [cat], axis=1))
            x, c = cat, c + growth
        if b < len(blocks) - 1:
            t = conv(x, c, c // 2, 1)
            c //= 2
            nodes.append(h.make_node("AveragePool", [t], [f"tp{b}"], kernel_shape=[2, 2],
                                     strides=[2, 2]))
            x = f"tp{b}"
    inits["fw"] = (rng.normal(size=(1000, c)) * 0.02).astype(np.float32)
    inits["fb"] = np.zeros(1000, np.float32)
    nodes += [h.make_node("GlobalAveragePool", [x], ["g"]),
              h.make_node("Flatten", ["g"], ["f"]),
              h.make_node("Gemm", ["f", "fw", "fb"], ["logits"], transB=1)]
    g = h.make_graph(nodes, "densenet", [h.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                   [1, 3, size, size])],
                     [h.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000])],
                     [nh.from_array(v, k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), convs[0]


def vit(size: int = 224, patch: int = 16, hidden: int = 768, heads: int = 12,
        blocks: int = 12, mlp: int = 4, classes: int = 1000, seed: int = 0):
    """A ViT-shaped model (ViT-B/16 by default): a patch convolution, a class token and
    position embeddings, ``blocks`` pre-norm encoder blocks (attention with batched
    ``MatMul`` and ``Softmax``, an MLP with GELU written with ``Erf``), a last
    ``LayerNormalization`` and the head on the class token. Random weights."""
    from onnx import TensorProto
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(seed)
    g, e, dh = size // patch, hidden, hidden // heads
    t = g * g + 1

    def w(*s):
        return (rng.normal(size=s) / np.sqrt(s[0])).astype(np.float32)

    inits = {"pw": w(e, 3, patch, patch) / patch, "pb": w(e) * 0.1, "cls": w(1, 1, e),
             "pos": w(1, t, e) * 0.1, "tokens": np.array([1, e, g * g], np.int64),
             "heads": np.array([1, t, heads, dh], np.int64),
             "flat": np.array([1, t, e], np.int64),
             "scale": np.array(1 / np.sqrt(dh), np.float32), "half": np.array(0.5, np.float32),
             "one": np.array(1.0, np.float32), "rsqrt2": np.array(1 / np.sqrt(2), np.float32),
             "first": np.array([0], np.int64), "second": np.array([1], np.int64),
             "axis1": np.array([1], np.int64)}
    n = h.make_node
    nodes = [n("Conv", ["x", "pw", "pb"], ["p0"], kernel_shape=[patch, patch],
               strides=[patch, patch]),
             n("Reshape", ["p0", "tokens"], ["p1"]),
             n("Transpose", ["p1"], ["p2"], perm=[0, 2, 1]),
             n("Concat", ["cls", "p2"], ["p3"], axis=1), n("Add", ["p3", "pos"], ["x0"])]
    x = "x0"

    def ln(x, name):
        inits[f"{name}_g"] = (1 + 0.1 * rng.normal(size=e)).astype(np.float32)
        inits[f"{name}_b"] = w(e) * 0.1
        nodes.append(n("LayerNormalization", [x, f"{name}_g", f"{name}_b"], [name], axis=-1,
                       epsilon=1e-6))
        return name

    def linear(x, name, cin, cout):
        inits[f"{name}_w"], inits[f"{name}_c"] = w(cin, cout), w(cout) * 0.1
        nodes.extend([n("MatMul", [x, f"{name}_w"], [f"{name}_m"]),
                      n("Add", [f"{name}_m", f"{name}_c"], [name])])
        return name

    for b in range(blocks):
        p = f"b{b}_"
        a = ln(x, p + "ln1")
        for q in "qkv":
            nodes.append(n("Reshape", [linear(a, p + q, e, e), "heads"], [p + q + "h"]))
        nodes += [n("Transpose", [p + "qh"], [p + "qt"], perm=[0, 2, 1, 3]),
                  n("Transpose", [p + "kh"], [p + "kt"], perm=[0, 2, 3, 1]),
                  n("Transpose", [p + "vh"], [p + "vt"], perm=[0, 2, 1, 3]),
                  n("MatMul", [p + "qt", p + "kt"], [p + "s0"]),
                  n("Mul", [p + "s0", "scale"], [p + "s"]),
                  n("Softmax", [p + "s"], [p + "sm"], axis=-1),
                  n("MatMul", [p + "sm", p + "vt"], [p + "a0"]),
                  n("Transpose", [p + "a0"], [p + "a1"], perm=[0, 2, 1, 3]),
                  n("Reshape", [p + "a1", "flat"], [p + "a2"])]
        nodes.append(n("Add", [x, linear(p + "a2", p + "o", e, e)], [p + "r"]))
        f = linear(ln(p + "r", p + "ln2"), p + "f1", e, mlp * e)
        nodes += [n("Mul", [f, "rsqrt2"], [p + "e0"]), n("Erf", [p + "e0"], [p + "e1"]),
                  n("Add", [p + "e1", "one"], [p + "e2"]), n("Mul", [f, p + "e2"], [p + "e3"]),
                  n("Mul", [p + "e3", "half"], [p + "gelu"])]
        nodes.append(n("Add", [p + "r", linear(p + "gelu", p + "f2", mlp * e, e)], [p + "y"]))
        x = p + "y"
    nodes.append(n("Slice", [ln(x, "lnf"), "first", "second", "axis1"], ["c0"]))
    linear("c0", "head", e, classes)
    graph = h.make_graph(nodes, "vit", [h.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                 [1, 3, size, size])],
                         [h.make_tensor_value_info("head", TensorProto.FLOAT, [1, 1, classes])],
                         [nh.from_array(v, k) for k, v in inits.items()])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


class Stages:
    """CPU seconds spent in each stage of ``npukit.onnx.load``, each stage's own (a stage
    called inside another, the solver inside the lowering, counts for itself only): on a
    shared machine, the work done, whatever the other jobs take."""

    HOOKS = (("npukit.onnx.reader", "read", "read"),
             ("npukit.onnx.normalize", "normalize", "rewrite"),
             ("npukit.onnx.lowering", "lower", "lower"),
             ("npukit.tiler.model", "solve", "solver"),
             ("npukit.tiler.graph", "GraphModel.graph", "graph IR"),  # and cycle estimates
             ("npukit.tiler.planner", "plan", "planner"))

    def __init__(self):
        self.own: dict[str, float] = {label: 0.0 for *_, label in self.HOOKS}
        self._nested: list[float] = []

    def _timed(self, label: str, fn):
        def run(*a, **k):
            t0 = time.process_time()
            self._nested.append(0.0)
            try:
                return fn(*a, **k)
            finally:
                dt = time.process_time() - t0
                self.own[label] += dt - self._nested.pop()
                if self._nested:
                    self._nested[-1] += dt
        return run

    @contextmanager
    def hooked(self):
        import importlib

        saved = []
        for mod, attr, label in self.HOOKS:
            owner = importlib.import_module(mod)
            *path, name = attr.split(".")
            for p in path:
                owner = getattr(owner, p)
            saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, self._timed(label, getattr(owner, name)))
        try:
            yield self
        finally:
            for owner, name, fn in saved:
                setattr(owner, name, fn)


def plan_once(case, profile: cProfile.Profile | None = None):
    """(graph, wall seconds, CPU seconds, Stages) of one import and plan of ``case``, a
    (model, budgets) pair."""
    import npukit.onnx

    stages = Stages()
    with stages.hooked():
        t0, c0 = time.perf_counter(), time.process_time()
        if profile:
            profile.enable()
        g = npukit.onnx.load(case[0], **case[1])
        if profile:
            profile.disable()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return g, wall, cpu, stages


def timed(cases: dict, rounds: int, profile=None) -> dict:
    """Per case: (graph, median wall seconds, median CPU seconds, the last round's Stages),
    the cases run in a rotating order each round."""
    names, walls, cpus, last = list(cases), {n: [] for n in cases}, {n: [] for n in cases}, {}
    for r in range(rounds if cases else 0):
        for n in names[r % len(names):] + names[:r % len(names)]:
            g, wall, cpu, st = plan_once(cases[n], profile)
            walls[n].append(wall)
            cpus[n].append(cpu)
            last[n] = (g, st)
    return {n: (last[n][0], statistics.median(walls[n]), statistics.median(cpus[n]),
                last[n][1]) for n in names}


def stage_table(results: dict) -> None:
    labels = [label for *_, label in Stages.HOOKS]
    print("seconds: wall and CPU of the whole import and plan, then each stage's CPU")
    print(f"{'model':<22}{'layers':>7}{'wall':>8}{'CPU':>8}" + "".join(f"{s:>10}" for s in labels))
    for name, (g, wall, cpu, st) in results.items():
        print(f"{name:<22}{len(g.layers):>7}{wall:>8.1f}{cpu:>8.1f}" +
              "".join(f"{st.own[s]:>10.1f}" for s in labels))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="densenet,vit-tiny,vit-b16,swin,scaling")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--blocks", default="6,12,24,16")
    ap.add_argument("--scale-blocks", type=int, default=3, help="N of the N, 2N, 4N models")
    ap.add_argument("--profile", action="store_true", help="print the 25 costliest functions")
    a = ap.parse_args(argv)
    wanted = a.models.split(",")
    print(f"machine: {machine()}")
    prof = cProfile.Profile() if a.profile else None
    cases, goals = {}, []
    if "densenet" in wanted:
        m, convs = densenet(a.size, tuple(int(b) for b in a.blocks.split(",")))
        cases[f"densenet ({convs} convs)"] = (m, BUDGETS)
    if "vit-tiny" in wanted:
        cases["vit-tiny"] = (vit(a.size, hidden=192, heads=3), VIT_BUDGETS)
    if "vit-b16" in wanted:
        cases["vit-b16"] = (vit(a.size), VIT_BUDGETS)
    if "swin" in wanted:  # swin_t's first stage: two blocks, the second shifted
        from transformer_blocks import swin

        cases["swin 2 blocks"] = (swin(select="split")[0], {**BUDGETS, "l1_budget": 65536})
    results = timed(cases, a.rounds, prof)
    scaled = {}
    if "scaling" in wanted:
        n = a.scale_blocks
        scaled = timed({f"vit-tiny {b} blocks": (vit(a.size, hidden=192, heads=3, blocks=b),
                                                  VIT_BUDGETS)
                        for b in (n, 2 * n, 4 * n)}, a.rounds, prof)
    stage_table({**results, **scaled})
    for name, (g, wall, _, _) in results.items():
        limit = {"vit-tiny": 120, "vit-b16": 300}.get(name, 60)
        goals.append(goal(f"{name}: {len(g.layers)} layers plan in under {limit} s "
                          f"({wall:.1f} s)", wall < limit))
    # The ratios of CPU time: wall time on a shared machine measures the other jobs too.
    times = [(len(g.layers), wall, cpu) for g, wall, cpu, _ in scaled.values()]
    for (n0, w0, c0), (n1, w1, c1) in zip(times, times[1:]):
        print(f"{n0} -> {n1} layers: {c1 / c0:.2f}x the CPU time ({w1 / w0:.2f}x the wall)")
        goals.append(goal(f"doubling the blocks ({n0} -> {n1} layers) at most 2.3x the CPU "
                          f"time ({c1 / c0:.2f}x)", c1 / c0 <= 2.3))
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    for line in goals:
        print(line)


if __name__ == "__main__":
    main()
