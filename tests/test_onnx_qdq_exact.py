"""Quantized networks bit-exact against ONNX Runtime at any depth: QDQ models quantized by
ONNX Runtime's own tool (uint8 and int8 activations) whose every output element equals ONNX
Runtime's, on the simulator and the C: a deep residual chain (Add of convolution outputs),
a broadcast Add, a Mul chain, an average-pool and a global-average-pool head, Sigmoid and
Tanh. ONNX Runtime's session fuses the QDQ groups into its integer kernels (QLinearAdd's
fused multiply-adds, QLinearMul, QLinearAveragePool, QLinearGlobalAveragePool, the lookup
tables), which npukit computes in the same order and rounding."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_helpers import against_ort, model, node, quantize_qdq  # noqa: E402

ACTS = ["u8", "s8"]


def _conv(nodes, inits, x, c, k, r, name):
    inits[f"{name}_w"] = (r.normal(size=(c, c, 3, 3)) * 0.25).astype(np.float32)
    inits[f"{name}_b"] = (r.normal(size=c) * 0.1).astype(np.float32)
    nodes.append(node("Conv", [x, f"{name}_w", f"{name}_b"], [name], kernel_shape=[3, 3],
                      pads=[1, 1, 1, 1]))
    return name


def _check(m, shape, tmp_path, act, seed=0):
    r = np.random.default_rng(seed)
    cal = [{"x": r.uniform(-1, 1, shape).astype(np.float32)} for _ in range(8)]
    qm = quantize_qdq(m, cal, tmp_path, act)
    x = {"x": r.uniform(-1, 1, shape).astype(np.float32)}
    _, stats, _ = against_ort(qm, x, backends=("sim", "c"), exact=True)
    return stats


def residual_chain(joins: int, c: int = 4, seed: int = 0):
    """``joins`` residual blocks ``x = x + Relu(Conv(x))``, then a convolution out."""
    r = np.random.default_rng(seed)
    nodes, inits, x = [], {}, "x"
    for k in range(joins):
        y = _conv(nodes, inits, x, c, 3, r, f"conv{k}")
        nodes.append(node("Relu", [y], [f"relu{k}"]))
        nodes.append(node("Add", [x, f"relu{k}"], [f"add{k}"]))
        x = f"add{k}"
    nodes.append(node("Conv", [x, "wo"], ["y"], kernel_shape=[1, 1]))
    inits["wo"] = (r.normal(size=(c, c, 1, 1)) * 0.3).astype(np.float32)
    shape = (1, c, 8, 8)
    return model(nodes, {"x": np.zeros(shape, np.float32)}, ["y"], inits, opset=13), shape


@pytest.mark.parametrize("act", ACTS)
def test_deep_residual_chain_bit_exact(tmp_path, act):
    m, shape = residual_chain(18)
    _check(m, shape, tmp_path, act)


@pytest.mark.parametrize("act", ACTS)
def test_broadcast_add_bit_exact(tmp_path, act):
    # per-channel constants on either side: ONNX Runtime's scalar-A and scalar-B paths
    r = np.random.default_rng(3)
    shape = (1, 6, 5, 7)
    nodes, inits = [], {}
    y = _conv(nodes, inits, "x", 6, 3, r, "conv")
    inits["cb"] = (r.normal(size=(1, 6, 1, 1))).astype(np.float32)
    nodes.append(node("Add", [y, "cb"], ["a1"]))
    nodes.append(node("Add", ["cb", "a1"], ["a2"]))
    nodes.append(node("Add", ["a2", "x"], ["y"]))
    m = model(nodes, {"x": np.zeros(shape, np.float32)}, ["y"], inits, opset=13)
    _check(m, shape, tmp_path, act)


@pytest.mark.parametrize("act", ACTS)
def test_mul_sigmoid_tanh_chain_bit_exact(tmp_path, act):
    r = np.random.default_rng(4)
    shape = (1, 4, 6, 6)
    nodes, inits, x = [], {}, "x"
    for k in range(6):
        y = _conv(nodes, inits, x, 4, 3, r, f"conv{k}")
        nodes.append(node("Sigmoid", [y], [f"sig{k}"]))
        nodes.append(node("Mul", [y, f"sig{k}"], [f"mul{k}"]))
        nodes.append(node("Tanh", [f"mul{k}"], [f"tanh{k}"]))
        x = f"tanh{k}"
    inits["wo"] = (r.normal(size=(4, 4, 1, 1)) * 0.3).astype(np.float32)
    nodes.append(node("Conv", [x, "wo"], ["y"], kernel_shape=[1, 1]))
    m = model(nodes, {"x": np.zeros(shape, np.float32)}, ["y"], inits, opset=13)
    _check(m, shape, tmp_path, act)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("head", ["AveragePool", "GlobalAveragePool"])
def test_pooling_head_bit_exact(tmp_path, act, head):
    r = np.random.default_rng(5)
    shape = (1, 8, 9, 9)
    nodes, inits = [], {}
    y = _conv(nodes, inits, "x", 8, 3, r, "conv")
    nodes.append(node("Relu", [y], ["relu"]))
    attrs = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]) \
        if head == "AveragePool" else {}
    nodes.append(node(head, ["relu"], ["pool"], **attrs))
    nodes.append(node("Flatten", ["pool"], ["flat"]))
    k = 8 * (25 if head == "AveragePool" else 1)
    inits["wg"] = (r.normal(size=(k, 10)) / np.sqrt(k)).astype(np.float32)
    nodes.append(node("MatMul", ["flat", "wg"], ["y"]))
    m = model(nodes, {"x": np.zeros(shape, np.float32)}, ["y"], inits, opset=13)
    _check(m, shape, tmp_path, act)
