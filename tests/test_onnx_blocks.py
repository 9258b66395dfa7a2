"""A MobileNetV3 block and a squeeze-excite block written as PyTorch's exporters write them
(opset 13: HardSwish as HardSigmoid and Mul; opset 17: HardSwish; opset 18: ReduceMean with
its axes as an input), in float32 against ONNX Runtime and quantized by ONNX Runtime's own
tool (QDQ, uint8 and int8 activations, per tensor and per channel) bit for bit: every int8
tensor between layers is an output too, on the simulator and in C."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_helpers import expose, model, node, quantize_qdq  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit.onnx.check import ort_run  # noqa: E402


class Builder:
    """Nodes and initializers of a block, with random weights."""

    def __init__(self, seed: int, opset: int):
        self.r, self.opset, self.nodes, self.inits = np.random.default_rng(seed), opset, [], {}

    def conv(self, x, cin, cout, k, name, group=1, stride=1):
        fan = k * k * cin // group
        self.inits[f"{name}_w"] = (self.r.normal(size=(cout, cin // group, k, k)) *
                                   np.sqrt(2 / fan)).astype(np.float32)
        self.inits[f"{name}_b"] = (self.r.normal(size=cout) * 0.1).astype(np.float32)
        self.nodes.append(node("Conv", [x, f"{name}_w", f"{name}_b"], [name], pads=[k // 2] * 4,
                               group=group, strides=[stride] * 2))
        return name

    def linear(self, x, cin, cout, name):
        """nn.Linear as the dynamo exporter writes it: MatMul by the transposed weight, Add."""
        self.inits[f"{name}_wt"] = (self.r.normal(size=(cin, cout)) / np.sqrt(cin)
                                    ).astype(np.float32)
        self.inits[f"{name}_b"] = (self.r.normal(size=cout) * 0.1).astype(np.float32)
        self.nodes += [node("MatMul", [x, f"{name}_wt"], [f"{name}_mm"]),
                       node("Add", [f"{name}_mm", f"{name}_b"], [name])]
        return name

    def hardswish(self, x):
        out = f"{x}_hswish"
        if self.opset >= 14:
            self.nodes.append(node("HardSwish", [x], [out]))
        else:  # torch.onnx before opset 14: x * hardsigmoid(x), alpha 1/6
            self.nodes += [node("HardSigmoid", [x], [f"{x}_hsig"], alpha=1 / 6),
                           node("Mul", [x, f"{x}_hsig"], [out])]
        return out

    def mean_hw(self, x):
        """adaptive_avg_pool2d(1): GlobalAveragePool (legacy) or ReduceMean (dynamo)."""
        out = f"{x}_pooled"
        if self.opset == 13:
            self.nodes.append(node("GlobalAveragePool", [x], [out]))
        elif self.opset < 18:
            self.nodes.append(node("ReduceMean", [x], [out], axes=[2, 3], keepdims=1))
        else:
            self.inits["hw"] = np.array([-2, -1], np.int64)
            self.nodes.append(node("ReduceMean", [x, "hw"], [out], keepdims=1))
        return out


def mobilenet_v3_block(seed: int, opset: int):
    """torchvision's InvertedResidual with squeeze-excite and HardSwish: 1x1 expand, 3x3
    depthwise, SE (pool, 1x1 + ReLU, 1x1 + HardSigmoid, Mul), 1x1 project, residual Add."""
    b = Builder(seed, opset)
    e = b.hardswish(b.conv("x", 16, 48, 1, "expand"))
    d = b.hardswish(b.conv(e, 48, 48, 3, "dw", group=48))
    s = b.conv(b.mean_hw(d), 48, 12, 1, "se1")
    b.nodes.append(node("Relu", [s], ["se1_relu"]))
    b.nodes.append(node("HardSigmoid", [b.conv("se1_relu", 12, 48, 1, "se2")], ["gate"],
                        alpha=1 / 6))
    b.nodes.append(node("Mul", [d, "gate"], ["excited"]))
    b.nodes.append(node("Add", [b.conv("excited", 48, 16, 1, "project"), "x"], ["y"]))
    return b, (1, 16, 12, 12)


def squeeze_excite_block(seed: int, opset: int):
    """A conv + ReLU, then SE with linear layers: pool, flatten, Linear + ReLU, Linear +
    Sigmoid, reshape to [N, C, 1, 1], Mul."""
    b = Builder(seed, opset)
    c = b.conv("x", 8, 32, 3, "conv")
    b.nodes.append(node("Relu", [c], ["feat"]))
    b.nodes.append(node("Flatten", [b.mean_hw("feat")], ["flat"]))
    h = b.linear("flat", 32, 8, "fc1")
    b.nodes.append(node("Relu", [h], ["fc1_relu"]))
    b.nodes.append(node("Sigmoid", [b.linear("fc1_relu", 8, 32, "fc2")], ["gate"]))
    b.inits["shape"] = np.array([1, 32, 1, 1], np.int64)
    b.nodes += [node("Reshape", ["gate", "shape"], ["gate4"]),
                node("Mul", ["feat", "gate4"], ["y"])]
    return b, (1, 8, 10, 10)


BLOCKS = [(mobilenet_v3_block, 13), (mobilenet_v3_block, 17), (mobilenet_v3_block, 18),
          (squeeze_excite_block, 13), (squeeze_excite_block, 18)]


@pytest.mark.slow
@pytest.mark.parametrize("build,opset", BLOCKS)
def test_float32_matches_onnx_runtime(build, opset):
    b, shape = build(3, opset)
    x = np.random.default_rng(opset).uniform(-1, 1, shape).astype(np.float32)
    m = model(b.nodes, {"x": x}, ["y"], b.inits, opset=opset)
    ref, _ = ort_run(m, {"x": x})
    g = npukit.onnx.load(m, l1_budget=8000)
    c, sim = (g.run(be, x=x).outputs["y"].copy() for be in ("c", "sim"))
    assert c.tobytes() == sim.tobytes()
    assert np.abs(c - ref["y"]).max() <= 1e-5 * np.abs(ref["y"]).max()
    ops = " ".join(info.ops for info in g.layers)
    assert "GlobalAveragePool" in ops  # adaptive pooling, whichever way it was written
    if build is mobilenet_v3_block:
        # (before opset 14 torch.onnx writes x * HardSigmoid(x): one HardSwish all the same)
        assert "Conv+HardSwish" in ops and "Conv+HardSigmoid" in ops


@pytest.mark.slow
@pytest.mark.parametrize("build,opset", BLOCKS)
@pytest.mark.parametrize("act", ["u8", "s8"])
def test_qdq_int8_is_bit_exact(build, opset, act, tmp_path):
    b, shape = build(4, opset)
    r = np.random.default_rng(opset)
    x = r.uniform(-1, 1, shape).astype(np.float32)
    m = model(b.nodes, {"x": x}, ["y"], b.inits, opset=opset)
    calib = [{"x": r.uniform(-1, 1, shape).astype(np.float32)} for _ in range(8)]
    qm = quantize_qdq(m, calib, tmp_path, act=act, per_channel=act == "s8")
    qs = [n.output[0] for n in qm.graph.node if n.op_type == "QuantizeLinear"]
    qm = expose(qm, qs)
    g = npukit.onnx.load(qm, l1_budget=8000)
    assert any(info.ops.startswith("QLinearConv") for info in g.layers)
    xs = {"x": r.uniform(-1.2, 1.2, shape).astype(np.float32)}
    ref, _ = ort_run(qm, xs)
    outs = {be: g.run(be, **xs).outputs for be in ("sim", "c")}
    for k in qs:
        assert outs["c"][k].dtype == ref[k].dtype != np.float32
        assert outs["c"][k].tobytes() == outs["sim"][k].tobytes() == ref[k].tobytes(), k
    assert np.unique(outs["c"][qs[-1]]).size > 20
