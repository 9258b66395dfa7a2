"""int8 activations (ONNX Runtime's quantize_static with activation_type=QInt8) bit for bit:
a SqueezeNet-style model per tensor and an Inception-style block per channel give the int8
outputs of ONNX Runtime's integer operators (the QDQ groups fused, as ONNX Runtime runs them
on ARM and with ``session.qdqisint8allowed`` on x86), on the simulator and in C."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_helpers import expose, model, node, quantize_qdq

import npukit.onnx
from npukit.onnx.check import ort_run


def _conv(nodes, inits, r, x, cin, cout, k, name, relu=True, stride=1):
    inits[f"{name}_w"] = (r.normal(size=(cout, cin, k, k)) * np.sqrt(2 / (k * k * cin))
                          ).astype(np.float32)
    inits[f"{name}_b"] = (r.normal(size=cout) * 0.1).astype(np.float32)
    out = f"{name}_c" if relu else name
    nodes.append(node("Conv", [x, f"{name}_w", f"{name}_b"], [out], kernel_shape=[k, k],
                      pads=[k // 2] * 4, strides=[stride, stride]))
    if relu:
        nodes.append(node("Relu", [out], [name]))
    return name


def squeeze_like(r):
    """A strided stem, two fire modules (1x1 squeeze; 1x1 and 3x3 expands concatenated) with
    a max pooling between, a 1x1 classifier, global average pooling."""
    nodes, inits = [], {}
    x = _conv(nodes, inits, r, "x", 3, 16, 3, "stem", stride=2)

    def fire(x, cin, s, e, name):
        sq = _conv(nodes, inits, r, x, cin, s, 1, f"{name}_s")
        a = _conv(nodes, inits, r, sq, s, e, 1, f"{name}_e1")
        b = _conv(nodes, inits, r, sq, s, e, 3, f"{name}_e3")
        nodes.append(node("Concat", [a, b], [name], axis=1))
        return name
    x = fire(x, 16, 8, 16, "f1")
    nodes.append(node("MaxPool", [x], ["p1"], kernel_shape=[2, 2], strides=[2, 2]))
    x = fire("p1", 32, 8, 24, "f2")
    x = _conv(nodes, inits, r, x, 48, 10, 1, "cls")
    nodes += [node("GlobalAveragePool", [x], ["g"]), node("Flatten", ["g"], ["y"])]
    return nodes, inits, (1, 3, 64, 64)


def inception_like(r):
    """An Inception-v1 block: 1x1; 1x1 then 3x3; 1x1 then 5x5; 3x3 max pooling then 1x1;
    concatenated."""
    nodes, inits = [], {}
    a = _conv(nodes, inits, r, "x", 12, 8, 1, "b1")
    b = _conv(nodes, inits, r, _conv(nodes, inits, r, "x", 12, 6, 1, "b2r"), 6, 10, 3, "b2")
    c = _conv(nodes, inits, r, _conv(nodes, inits, r, "x", 12, 4, 1, "b3r"), 4, 6, 5, "b3")
    nodes.append(node("MaxPool", ["x"], ["mp"], kernel_shape=[3, 3], strides=[1, 1],
                      pads=[1, 1, 1, 1]))
    d = _conv(nodes, inits, r, "mp", 12, 6, 1, "b4")
    nodes.append(node("Concat", [a, b, c, d], ["y"], axis=1))
    return nodes, inits, (1, 12, 28, 28)


@pytest.mark.slow
@pytest.mark.parametrize("build, per_channel", [(squeeze_like, False), (inception_like, True)])
def test_int8_activations_are_bit_exact(build, per_channel, tmp_path):
    r = np.random.default_rng(21)
    nodes, inits, shape = build(r)
    x = r.uniform(-1, 1, shape).astype(np.float32)
    m = model(nodes, {"x": x}, ["y"], inits, opset=13)
    calib = [{"x": r.uniform(-1, 1, shape).astype(np.float32)} for _ in range(8)]
    qm = quantize_qdq(m, calib, tmp_path, act="s8", per_channel=per_channel)
    # every int8 tensor between layers an output too, so each integer layer is checked
    qs = [n.output[0] for n in qm.graph.node if n.op_type == "QuantizeLinear"]
    qm = expose(qm, qs)
    g = npukit.onnx.load(qm, l1_budget=8000)
    assert any(info.ops.startswith("QLinearConv") for info in g.layers)
    assert {p.dtype for o, p in g.outputs.items() if o in qs} == {np.dtype("int8")}
    for seed in range(4):
        xs = {"x": np.random.default_rng(seed).uniform(-1.2, 1.2, shape).astype(np.float32)}
        ref, _ = ort_run(qm, xs)
        for backend in ("sim", "c"):
            out = g.run(backend, **xs).outputs
            for o in qs:
                assert out[o].tobytes() == ref[o].tobytes(), f"{o} on {backend}"
                assert len(np.unique(out[o])) > 8  # not a saturated or constant tensor
