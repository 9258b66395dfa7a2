"""Planning time at model-zoo scale: a DenseNet-121-style model (four dense blocks of 6, 12,
24 and 16 layers, each a 1x1 and a 3x3 convolution whose output is concatenated to all
before it; transitions of a 1x1 convolution and an average pooling) built in code, imported
and planned with the GAP AutoTiler document's budgets, timed by phase (read and rewrite,
lowering and tiling, the graph planner).

Run: python benchmarks/onnx_plan.py [--size 224] [--blocks 6,12,24,16]

Goal (reported, not asserted): the 120-layer model plans in under a minute.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import numpy as np
from harness import goal, machine

BUDGETS = dict(l1_budget=48000, l2_budget=512 * 1024, l3_budget=64 << 20,
               l3_flash_budget=64 << 20)


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


def main(argv=None) -> None:
    import npukit.onnx

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--blocks", default="6,12,24,16")
    ap.add_argument("--profile", action="store_true", help="print the 15 costliest functions")
    a = ap.parse_args(argv)
    m, convs = densenet(a.size, tuple(int(b) for b in a.blocks.split(",")))
    print(f"machine: {machine()}")
    prof = cProfile.Profile() if a.profile else None
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    g = npukit.onnx.load(m, **BUDGETS)
    if prof:
        prof.disable()
    wall = time.perf_counter() - t0
    print(f"DenseNet-style, {a.size}x{a.size}, {convs} convolutions: {len(g.layers)} layers, "
          f"{len(g.tensors)} tensors; import and plan {wall:.1f} s; L2 "
          f"{g.memory['L2'].static} B static + {g.memory['L2'].dynamic} B dynamic, L3 "
          f"{g.memory['L3'].dynamic} B")
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    print(goal(f"{len(g.layers)} layers plan in under a minute ({wall:.1f} s)", wall < 60))


if __name__ == "__main__":
    main()
