"""HardSwish and HardSigmoid fused into the layer before them, on a mobilenet_v3_large-shaped
block (torchvision's InvertedResidual 112 -> 672 -> 112 at 14x14: 1x1 expansion + HardSwish,
3x3 depthwise + HardSwish, squeeze-excite (GlobalAveragePool, 1x1 to 168 + ReLU, 1x1 to 672
+ HardSigmoid, Mul), 1x1 projection, residual Add), random weights, built with onnx.helper,
float32, written as the dynamo exporter does (opset 17: ``HardSwish``) and as torch.onnx did
before opset 14 (``x * HardSigmoid(x)``). npukit runs each model's host C at one thread;
``unfused`` is the same model lowered as npukit did before (the activations layers of their
own, squeeze-excite's 1x1 convolutions of the pooled pixel through the convolution kernel
rather than as matrix-vector products), timed in the same loop with ONNX Runtime (medians
of interleaved repetitions, wall and CPU). Prints the layers of each and each goal as met
or not: fewer layers, faster than unfused, float32 within 1.5x of ONNX Runtime's CPU time.

Run: python benchmarks/act_fusions.py [--rounds 21]
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np

CIN, EXPAND, SQUEEZE, SIZE = 112, 672, 168, 14


def block(opset: int, seed: int = 0):
    """The InvertedResidual block (input ``x`` 1 x CIN x SIZE x SIZE, output ``y``)."""
    from onnx import TensorProto
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(seed)
    nodes, inits = [], {}

    def conv(x, cin, cout, k, name, group=1):
        inits[f"{name}_w"] = (rng.normal(size=(cout, cin // group, k, k)) *
                              np.sqrt(2 / (k * k * cin // group))).astype(np.float32)
        inits[f"{name}_b"] = rng.normal(0, 0.1, cout).astype(np.float32)
        nodes.append(h.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [name],
                                 pads=[k // 2] * 4, group=group))
        return name

    def hardswish(x):
        if opset >= 14:
            nodes.append(h.make_node("HardSwish", [x], [f"{x}_hs"]))
        else:
            nodes.extend([h.make_node("HardSigmoid", [x], [f"{x}_hsig"], alpha=1 / 6),
                          h.make_node("Mul", [x, f"{x}_hsig"], [f"{x}_hs"])])
        return f"{x}_hs"

    e = hardswish(conv("x", CIN, EXPAND, 1, "expand"))
    d = hardswish(conv(e, EXPAND, EXPAND, 3, "dw", group=EXPAND))
    nodes.append(h.make_node("GlobalAveragePool", [d], ["pooled"]))
    s = conv("pooled", EXPAND, SQUEEZE, 1, "se1")
    nodes.append(h.make_node("Relu", [s], ["se1_relu"]))
    nodes.append(h.make_node("HardSigmoid", [conv("se1_relu", SQUEEZE, EXPAND, 1, "se2")],
                             ["gate"], alpha=1 / 6))
    nodes.append(h.make_node("Mul", [d, "gate"], ["excited"]))
    nodes.append(h.make_node("Add", [conv("excited", EXPAND, CIN, 1, "project"), "x"], ["y"]))
    shape = [1, CIN, SIZE, SIZE]
    g = h.make_graph(nodes, f"mbv3_opset{opset}",
                     [h.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                     [h.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                     [nh.from_array(v, k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])


@contextmanager
def unfused():
    """Lowering as npukit did before the hard activations fused: neither is an activation a
    layer absorbs, ``x * HardSigmoid(x)`` stays two operations, and a 1x1 convolution of a
    1x1 plane is a convolution layer."""
    from npukit.onnx import normalize
    from npukit.onnx.lowering import context
    from npukit.onnx.lowering import conv as lowering_conv

    saved = {k: context.ACTS.pop(k) for k in ("HardSigmoid", "HardSwish")}
    rewrite, pixel = normalize.hard_swish_of_mul, lowering_conv.one_pixel
    normalize.hard_swish_of_mul = lambda net: None
    lowering_conv.one_pixel = lambda *shape: False
    try:
        yield
    finally:
        context.ACTS.update(saved)
        normalize.hard_swish_of_mul, lowering_conv.one_pixel = rewrite, pixel


def main(rounds: int) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    import harness
    from grouped_conv import timed

    import npukit.onnx
    from npukit.onnx.check import ort_session

    os.environ["NPUKIT_THREADS"] = "1"  # one thread, as ONNX Runtime's session
    os.environ["NPUKIT_PLAN_CACHE"] = "0"  # both lowerings planned here, from the same bytes
    x = np.random.default_rng(1).uniform(-1, 1, (1, CIN, SIZE, SIZE)).astype(np.float32)
    rows, goals = [], []
    for opset in (17, 13):
        m = block(opset)
        g = npukit.onnx.load(m)
        with unfused():
            gu = npukit.onnx.load(m)
        y = np.empty((1, CIN, SIZE, SIZE), np.float32)
        sess = ort_session(m, 1)
        ref = sess.run(None, {"x": x})[0]
        for graph in (g, gu):
            graph.run("c", x=x, y=y)
            assert np.abs(y - ref).max() <= 1e-4 * np.abs(ref).max()
        wall, cpu = timed(harness, {
            "npukit": lambda g=g, y=y: g.run("c", x=x, y=y),
            "unfused": lambda g=gu, y=y: g.run("c", x=x, y=y),
            "ort": lambda sess=sess: sess.run(None, {"x": x})}, rounds)
        label = f"opset {opset} ({'HardSwish' if opset >= 14 else 'x * HardSigmoid(x)'})"
        rows.append((label, len(gu.layers), len(g.layers), wall, cpu))
        goals += [(f"{label}: {len(g.layers)} layers, unfused {len(gu.layers)}",
                   len(g.layers) < len(gu.layers)),
                  (f"{label}: {cpu['npukit'] * 1e3:.3f} ms CPU, unfused "
                   f"{cpu['unfused'] * 1e3:.3f}", cpu["npukit"] < cpu["unfused"]),
                  (f"{label}: {cpu['npukit'] / cpu['ort']:.2f}x ONNX Runtime's CPU time "
                   f"(goal 1.5x)", cpu["npukit"] <= 1.5 * cpu["ort"])]
    print(f"{'block':<30} {'layers':>7} | {'unfused':>8} {'npukit':>7} {'ORT':>7} {'ratio':>5} "
          f"(ms wall) | {'unfused':>8} {'npukit':>7} {'ORT':>7} {'ratio':>5} (ms CPU)")
    for label, lu, ln, wall, cpu in rows:
        print(f"{label:<30} {lu:>3}->{ln:<3} | " + " | ".join(
            f"{t['unfused'] * 1e3:>8.3f} {t['npukit'] * 1e3:>7.3f} {t['ort'] * 1e3:>7.3f} "
            f"{t['npukit'] / t['ort']:>5.2f}" + " " * 10 for t in (wall, cpu)))
    for text, met in goals:
        print(f"{'met    ' if met else 'NOT met'}  {text}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=21)
    main(ap.parse_args().rounds)
