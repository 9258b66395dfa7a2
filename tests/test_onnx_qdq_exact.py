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


def residual_chain(joins: int, c: int = 8, size: int = 24, seed: int = 0):
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
    shape = (1, c, size, size)
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


# One quantized operation between DequantizeLinear and QuantizeLinear, with scales and zero
# points drawn at random (ties of ONNX Runtime's float32 arithmetic come up about once in
# 10^4 elements, so each case runs 4 x 2048 elements or more): ONNX Runtime fuses it into
# its integer kernel (QLinearAdd, QLinearMul, QLinearAveragePool, QLinearGlobalAveragePool,
# QLinearSigmoid, QLinearLeakyRelu) or runs it in float32 (Sub, Tanh).
OPS = {
    "Add": ("Add", [[1, 8, 16, 16], [1, 8, 16, 16]], {}),
    "Add-broadcast-b": ("Add", [[1, 8, 16, 16], [1, 8, 1, 1]], {}),
    "Add-broadcast-a": ("Add", [[1, 8, 1, 1], [1, 8, 16, 16]], {}),
    "Add-scalar": ("Add", [[1, 8, 16, 16], [1]], {}),
    "Add-broadcast-both": ("Add", [[1, 8, 16, 1], [1, 1, 1, 16]], {}),
    "Add-broadcast-outer": ("Add", [[1, 1, 16, 16], [1, 8, 16, 16]], {}),
    "Sub": ("Sub", [[1, 8, 16, 16], [1, 8, 16, 16]], {}),
    "Mul": ("Mul", [[1, 8, 16, 16], [1, 8, 16, 16]], {}),
    "Mul-broadcast": ("Mul", [[1, 8, 16, 16], [1, 8, 1, 1]], {}),
    "GlobalAveragePool": ("GlobalAveragePool", [[1, 128, 13, 13]], {}),
    "AveragePool": ("AveragePool", [[1, 8, 15, 15]],
                    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    "AveragePool-include-pad": ("AveragePool", [[1, 8, 15, 15]],
                                dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                     count_include_pad=1)),
    "Sigmoid": ("Sigmoid", [[1, 8, 16, 16]], {}),
    "Tanh": ("Tanh", [[1, 8, 16, 16]], {}),
    "LeakyRelu": ("LeakyRelu", [[1, 8, 16, 16]], dict(alpha=0.1)),
}


def _qdq_op(dt, op, shapes, attrs, scales, zps):
    import onnx
    from onnx import helper as h
    from onnx import numpy_helper as nh

    T = h.np_dtype_to_tensor_dtype(np.dtype(dt))
    nodes, inits, ins = [], [], []
    for i, shape in enumerate(shapes):
        ins.append(h.make_tensor_value_info(f"q{i}", T, shape))
        inits += [nh.from_array(np.array(scales[i], np.float32), f"s{i}"),
                  nh.from_array(np.array(zps[i], dt), f"z{i}")]
        nodes.append(node("DequantizeLinear", [f"q{i}", f"s{i}", f"z{i}"], [f"f{i}"]))
    nodes.append(node(op, [f"f{i}" for i in range(len(shapes))], ["fy"], **attrs))
    inits += [nh.from_array(np.array(scales[-1], np.float32), "sy"),
              nh.from_array(np.array(zps[-1], dt), "zy")]
    nodes.append(node("QuantizeLinear", ["fy", "sy", "zy"], ["y"]))
    g = h.make_graph(nodes, "g", ins, [onnx.ValueInfoProto(name="y")], inits)
    return onnx.shape_inference.infer_shapes(
        h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))


@pytest.mark.parametrize("dt", ["uint8", "int8"])
@pytest.mark.parametrize("case", list(OPS))
def test_quantized_operation_bit_exact(case, dt):
    op, shapes, attrs = OPS[case]
    r = np.random.default_rng(sorted(OPS).index(case))
    info = np.iinfo(dt)
    for _ in range(4):
        scales = [np.float32(r.integers(1, 256)) / np.float32(255) *
                  np.float32(r.choice([0.02, 0.05, 0.1])) for _ in range(len(shapes) + 1)]
        zps = [int(r.integers(info.min, info.max + 1)) for _ in range(len(shapes) + 1)]
        if op in ("Sigmoid", "Tanh"):  # the output ranges quantize_static gives them
            scales[-1] = np.float32(1 / 256 if op == "Sigmoid" else 2 / 255)
            zps[-1] = info.min if op == "Sigmoid" else (info.min + info.max + 1) // 2
        m = _qdq_op(dt, op, shapes, attrs, scales, zps)
        x = {f"q{i}": r.integers(info.min, info.max + 1, s).astype(dt)
             for i, s in enumerate(shapes)}
        against_ort(m, x, backends=("sim", "c"), exact=True)
