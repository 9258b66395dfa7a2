"""Grouped convolutions on the host against ONNX Runtime at one thread: regnet_x_400mf's
blocks (torchvision's ResBottleneckBlock at bottleneck ratio 1: a 1x1 convolution, a 3x3
convolution of groups of 16 channels, a 1x1 convolution, each with batch normalization,
ReLU and the residual join), float32 and int8 QDQ (ONNX Runtime's quantization tool,
per-channel weights), random weights, built with onnx.helper. npukit runs each model's host
C (``run("c")``); medians of interleaved repetitions, with the same block, its grouped
filters expanded to dense ones mostly zeros (as npukit ran them before: ``dense ms``), in
the same loop. npukit lowers a grouped convolution as one convolution per group: the
MACs it computes are printed beside the model's real ones, and each goal as met or not: the
MACs computed are the real ones; float32 within 1.5x of ONNX Runtime and int8 at or below
1.0x (issue 40's goals for the models people use).

Run: python benchmarks/grouped_conv.py [--rounds 7] [--size 56]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

# (input channels, width, stride) of a block of each of regnet_x_400mf's four stages
STAGES = ((32, 32, 2), (64, 64, 2), (160, 160, 2), (400, 400, 2))
GROUP_WIDTH = 16


def regnet_block(cin: int, width: int, stride: int, size: int, seed: int = 0,
                 group_width: int = GROUP_WIDTH):
    """One ResBottleneckBlock of RegNetX (input 1 x cin x size x size, output ``y``): 1x1
    conv, BatchNormalization, ReLU; 3x3 conv at ``stride`` in groups of ``group_width``
    channels, BatchNormalization, ReLU; 1x1 conv, BatchNormalization; plus the input (through
    a strided 1x1 conv and BatchNormalization where the shape changes); ReLU."""
    from onnx import TensorProto
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(seed)
    nodes, inits = [], {}

    def conv_bn(x, ci, co, k, s, name, group=1, relu=True):
        inits[f"{name}_w"] = (rng.normal(size=(co, ci // group, k, k)) *
                              np.sqrt(2 / (k * k * ci // group))).astype(np.float32)
        for p, v in (("g", rng.uniform(0.5, 1.5, co)), ("b", rng.normal(0, 0.1, co)),
                     ("m", rng.normal(0, 0.1, co)), ("v", rng.uniform(0.5, 1.5, co))):
            inits[f"{name}_{p}"] = v.astype(np.float32)
        nodes.extend([
            h.make_node("Conv", [x, f"{name}_w"], [f"{name}_c"], kernel_shape=[k, k],
                        pads=[k // 2] * 4, strides=[s, s], group=group),
            h.make_node("BatchNormalization", [f"{name}_c"] + [f"{name}_{p}" for p in "gbmv"],
                        [f"{name}_n" if relu else name], epsilon=1e-5)])
        if relu:
            nodes.append(h.make_node("Relu", [f"{name}_n"], [name]))
        return name

    a = conv_bn("x", cin, width, 1, 1, "a")
    b = conv_bn(a, width, width, 3, stride, "b", group=width // group_width)
    c = conv_bn(b, width, width, 1, 1, "c", relu=False)
    skip = "x" if (cin, stride) == (width, 1) else conv_bn("x", cin, width, 1, stride, "p",
                                                           relu=False)
    nodes += [h.make_node("Add", [c, skip], ["sum"]), h.make_node("Relu", ["sum"], ["y"])]
    out = -(-size // stride)
    g = h.make_graph(nodes, "regnet_block",
                     [h.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, size, size])],
                     [h.make_tensor_value_info("y", TensorProto.FLOAT, [1, width, out, out])],
                     [nh.from_array(v, k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)])


def densified(m):
    """``m`` with each grouped convolution's filters expanded to a dense filter, zero where
    an output channel does not see an input channel (how npukit ran them before)."""
    import onnx
    from onnx import numpy_helper as nh

    out = onnx.ModelProto()
    out.CopyFrom(m)
    inits = {t.name: t for t in out.graph.initializer}
    for n in out.graph.node:
        group = next((a for a in n.attribute if a.name == "group"), None)
        if n.op_type != "Conv" or group is None or group.i == 1:
            continue
        w = nh.to_array(inits[n.input[1]])
        o, cg = w.shape[:2]
        dense = np.zeros((o, cg * group.i, *w.shape[2:]), w.dtype)
        og = o // group.i
        for g in range(group.i):
            dense[g * og:(g + 1) * og, g * cg:(g + 1) * cg] = w[g * og:(g + 1) * og]
        inits[n.input[1]].CopyFrom(nh.from_array(dense, n.input[1]))
        group.i = 1
    return out


def macs(m) -> tuple[int, int]:
    """The real multiply-accumulates of a model's convolutions and those of their dense
    expansion (every group seeing every input channel), from ONNX shape inference."""
    import onnx

    typed = onnx.shape_inference.infer_shapes(m)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(typed.graph.value_info) + list(typed.graph.output)}
    weights = {t.name: list(t.dims) for t in m.graph.initializer}
    real = dense = 0
    for n in m.graph.node:
        if n.op_type == "Conv":
            o = shapes[n.output[0]]
            w = weights[n.input[1]]
            group = next((a.i for a in n.attribute if a.name == "group"), 1)
            each = int(np.prod(o)) * int(np.prod(w[2:]))
            real += each * w[1]
            dense += each * w[1] * group
    return real, dense


def main(size: int, rounds: int) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
    import harness
    from onnx_helpers import quantize_qdq

    import npukit.onnx
    from npukit.onnx.check import ort_session

    os.environ["NPUKIT_THREADS"] = "1"  # one thread, as ONNX Runtime's session
    rows, goals = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for k, (cin, width, stride) in enumerate(STAGES):
            s = max(size >> k, 4)
            m = regnet_block(cin, width, stride, s, seed=k)
            r = np.random.default_rng(k)
            x = r.uniform(-1, 1, (1, cin, s, s)).astype(np.float32)
            calib = [{"x": r.uniform(-1, 1, x.shape).astype(np.float32)} for _ in range(4)]
            folder = Path(tmp) / f"b{k}"
            folder.mkdir()
            q = quantize_qdq(m, calib, folder, act="s8", per_channel=True)
            real, dense = macs(m)
            qd = quantize_qdq(densified(m), calib, folder, act="s8", per_channel=True)
            for kind, model, dense_model in (("float32", m, densified(m)), ("int8", q, qd)):
                g, gd = npukit.onnx.load(model), npukit.onnx.load(dense_model)
                outs = {k: np.empty(p.shape, p.dtype) for k, p in g.outputs.items()}
                sess = ort_session(model, 1, int8_fused=False)
                t = harness.interleaved(
                    {"npukit": lambda g=g, x=x, outs=outs: g.run("c", x=x, **outs),
                     "dense": lambda g=gd, x=x, outs=outs: g.run("c", x=x, **outs),
                     "ort": lambda sess=sess, x=x: sess.run(None, {"x": x})}, rounds)
                computed = sum(g.model._cnn_ops[i.name] for i in g.layers
                               if i.ops.startswith(("Conv", "QLinearConv")))
                ratio = t["npukit"] / t["ort"]
                label = f"stage {k + 1} {cin}->{width} s{stride} {s}x{s} {kind}"
                rows.append((label, width // GROUP_WIDTH, real, dense, computed, t["dense"],
                             t["npukit"], t["ort"], ratio))
                goals.append((f"{label}: MACs computed {computed} = real {real}",
                              computed == real))
                bound = 1.5 if kind == "float32" else 1.0
                goals.append((f"{label}: {ratio:.2f}x ONNX Runtime (goal {bound:g}x)",
                              ratio <= bound))
    print(f"{'block':<34} {'groups':>6} {'real MACs':>10} {'dense MACs':>11} "
          f"{'computed':>10} {'dense ms':>8} {'npukit ms':>9} {'ORT ms':>7} {'ratio':>6}")
    for label, groups, real, dense, comp, td, tn, to, ratio in rows:
        print(f"{label:<34} {groups:>6} {real:>10} {dense:>11} {comp:>10} {td * 1e3:>8.3f} "
              f"{tn * 1e3:>9.3f} {to * 1e3:>7.3f} {ratio:>6.2f}")
    for text, met in goals:
        print(f"{'met    ' if met else 'NOT met'}  {text}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=56, help="the first stage's input size")
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    main(a.size, a.rounds)
