"""The host schedule's fast C paths (benchmarks/host_speed.py measures them) give the
simulator's bytes and ONNX Runtime's values: a float convolution's outputs activated a row
at a time (``conv_features.act_row``) for each activation the convolution carries, beside a
window pooled after it (the plain loop), on rows wider and narrower than a vector; 3x3
rows wider than 32 columns in blocks of 8 output features (``conv_features.ROW_FEATURES``);
every output element written over a canary."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper as nh
from onnx_helpers import model, node, quantize_qdq

import npukit.onnx
from npukit.onnx.check import compare, ort_run

CANARY = np.float32(-7.25e30)

# Each branch: a convolution of x, then these nodes (their attributes); its output "y<i>".
ACTIVATIONS = [("Relu", {}), ("LeakyRelu", {"alpha": 0.1}), ("Clip", {}), ("Sigmoid", {}),
               ("Tanh", {}), (None, {})]


def branches(cin: int, h: int, w: int, k: int, seed: int = 0):
    """One convolution per activation of ``ACTIVATIONS`` (k x k, padding k // 2, bias), and
    one followed by ReLU and a 2x2 max pooling, all reading x (1 x cin x h x w)."""
    r = np.random.default_rng(seed)
    inits, nodes, outs = {"lo": np.float32(-0.5), "hi": np.float32(0.75)}, [], []
    for i, (op, attrs) in enumerate([*ACTIVATIONS, ("pool", {})]):
        cout = 5 + i
        inits[f"w{i}"] = (r.normal(size=(cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(
            np.float32)
        inits[f"b{i}"] = (r.normal(size=cout) * 0.2).astype(np.float32)
        conv = node("Conv", ["x", f"w{i}", f"b{i}"], [f"c{i}" if op else f"y{i}"],
                    kernel_shape=[k, k], pads=[k // 2] * 4)
        nodes.append(conv)
        if op == "pool":
            nodes += [node("Relu", [f"c{i}"], [f"r{i}"]),
                      node("MaxPool", [f"r{i}"], [f"y{i}"], kernel_shape=[2, 2], strides=[2, 2])]
        elif op == "Clip":
            nodes.append(node("Clip", [f"c{i}", "lo", "hi"], [f"y{i}"]))
        elif op:
            nodes.append(node(op, [f"c{i}"], [f"y{i}"], **attrs))
        outs.append(f"y{i}")
    x = r.normal(size=(1, cin, h, w)).astype(np.float32)
    return model(nodes, {"x": x}, outs, inits), x


@pytest.mark.parametrize("cin,h,w,k", [(4, 5, 37, 1), (3, 6, 19, 3), (5, 4, 41, 3)])
def test_float_convolutions_activated_by_rows_match_the_simulator(cin, h, w, k):
    m, x = branches(cin, h, w, k)
    g = npukit.onnx.load(m, l1_budget=48000, l2_budget=300 * 1024)
    ref, _ = ort_run(m, {"x": x})
    got = {}
    for name, kw in (("sim", dict(backend="sim")), ("host", dict(backend="c")),
                     ("tiles", dict(backend="c", schedule="tiles"))):
        outs = {o: np.full(p.shape, CANARY, p.dtype) for o, p in g.outputs.items()}
        g.run(**kw, x=x, **outs)
        got[name] = outs
    for o, sim in got["sim"].items():
        assert (sim != CANARY).all(), f"{o}: an element the simulator left"
        for name in ("host", "tiles"):
            assert got[name][o].tobytes() == sim.tobytes(), f"{o}: {name} C != simulator"
        c = compare(o, got["host"][o], ref[o], None)
        assert c.within, str(c)
        assert np.abs(got["host"][o] - ref[o]).max() <= 1e-4 * np.abs(ref[o]).max(), o


def binaries(c: int, h: int, w: int, seed: int = 1):
    """Float binary operations a row at a time: Add + ReLU (a residual join), Sub + Clip,
    Mul by one value per channel (B broadcast along the row), Div + LeakyRelu, Add +
    Sigmoid (the plain loop), each an output."""
    r = np.random.default_rng(seed)
    a, b = (r.normal(size=(1, c, h, w)).astype(np.float32) for _ in range(2))
    inits = {"s": (r.normal(size=(1, c, 1, 1)) + 0.1).astype(np.float32),
             "lo": np.float32(-0.5), "hi": np.float32(0.75)}
    nodes = [node("Add", ["a", "b"], ["s0"]), node("Relu", ["s0"], ["y0"]),
             node("Sub", ["a", "b"], ["s1"]), node("Clip", ["s1", "lo", "hi"], ["y1"]),
             node("Mul", ["a", "s"], ["y2"]),
             node("Div", ["a", "s"], ["s3"]), node("LeakyRelu", ["s3"], ["y3"], alpha=0.2),
             node("Add", ["b", "s"], ["s4"]), node("Sigmoid", ["s4"], ["y4"])]
    return model(nodes, {"a": a, "b": b}, [f"y{i}" for i in range(5)], inits), {"a": a, "b": b}


@pytest.mark.parametrize("c,h,w", [(3, 4, 37), (5, 7, 9)])
def test_float_binary_operations_by_rows_match_the_simulator(c, h, w):
    m, x = binaries(c, h, w)
    g = npukit.onnx.load(m, l1_budget=48000, l2_budget=300 * 1024)
    ref, _ = ort_run(m, x)
    got = {}
    for name, kw in (("sim", dict(backend="sim")), ("host", dict(backend="c"))):
        outs = {o: np.full(p.shape, CANARY, p.dtype) for o, p in g.outputs.items()}
        g.run(**kw, **x, **outs)
        got[name] = outs
    for o, sim in got["sim"].items():
        assert (sim != CANARY).all(), f"{o}: an element the simulator left"
        assert got["host"][o].tobytes() == sim.tobytes(), f"{o}: host C != simulator"
        assert np.abs(got["host"][o] - ref[o]).max() <= 1e-4 * np.abs(ref[o]).max(), o


def assert_integer_run(q, x: dict) -> None:
    """QDQ model ``q`` on inputs ``x``: every output element written by the simulator over
    a canary, the host C's bytes equal to the simulator's, both within ONNX Runtime's 1 LSB."""
    g = npukit.onnx.load(q, l1_budget=48000, l2_budget=300 * 1024)
    ref, _ = ort_run(q, x)
    got = {}
    for name in ("sim", "c"):
        outs = {o: np.full(p.shape, CANARY, p.dtype) for o, p in g.outputs.items()}
        g.run(name, **x, **outs)
        got[name] = outs
    for o, sim in got["sim"].items():
        assert (sim != CANARY).all(), f"{o}: an element the simulator left"
        assert got["c"][o].tobytes() == sim.tobytes(), f"{o}: host C != simulator"
        c = compare(o, got["c"][o], ref[o], g.output_steps.get(o))
        assert c.within, str(c)


@pytest.mark.parametrize("act", ["u8", "s8"])
def test_qdq_add_and_mul_by_rows_match_the_simulator_and_onnx_runtime(act, tmp_path):
    """QLinearAdd (a residual Add + ReLU, an Add of one value per channel) and QLinearMul
    (by a channel's value) a row at a time (``elementwise._int_rows``): the simulator's
    bytes, ONNX Runtime's integer operators' values."""
    r = np.random.default_rng(2)
    a, b = (r.normal(size=(1, 3, 5, 37)).astype(np.float32) for _ in range(2))
    s = (r.normal(size=(1, 3, 1, 1)) + 0.2).astype(np.float32)
    nodes = [node("Add", ["a", "b"], ["s0"]), node("Relu", ["s0"], ["y0"]),
             node("Mul", ["a", "s"], ["y1"]), node("Add", ["b", "s"], ["y2"])]
    m = model(nodes, {"a": a, "b": b}, ["y0", "y1", "y2"], {"s": s})
    calib = [{"a": r.normal(size=a.shape).astype(np.float32),
              "b": r.normal(size=b.shape).astype(np.float32)} for _ in range(2)]
    q = quantize_qdq(m, calib, tmp_path, act)
    x = {"a": a, "b": b}
    assert_integer_run(q, x)


@pytest.mark.parametrize("act", ["u8", "s8"])
def test_qdq_convolutions_output_in_one_run_match_the_simulator(act, tmp_path):
    """QDQ convolutions (1x1 and 3x3, with ReLU, Clip or none, one pooled after), their
    requantised outputs in one run of a plane's rows (``conv_requant.requant_one_run``): the
    simulator's bytes, ONNX Runtime's integer operators' values."""
    m, x = branches(4, 6, 19, 3, seed=3)
    keep = {"y0", "y2", "y5", "y6"}  # ReLU, Clip, none, pooled: what QDQ keeps integer
    del m.graph.output[:]
    m = model([n for n in m.graph.node if n.output[0] in keep or n.op_type == "Conv" and
               n.output[0] in {"c0", "c2", "y5", "c6"} or n.output[0] == "r6"],
              {"x": x}, sorted(keep), {i.name: nh.to_array(i) for i in m.graph.initializer})
    r = np.random.default_rng(4)
    q = quantize_qdq(m, [{"x": r.normal(size=x.shape).astype(np.float32)} for _ in range(2)],
                     tmp_path, act)
    assert_integer_run(q, {"x": x})


@pytest.mark.parametrize("act", ["u8", "s8"])
def test_qdq_pointwise_convolutions_match_the_simulator(act, tmp_path):
    """QDQ 1x1 convolutions at stride 1 (their outputs one run of the inputs: the VNNI run
    form, ``conv_int._run_block``), and at stride 2 (inputs gathered into runs first), 13
    input features, widths 37 and 19: the simulator's bytes, ONNX Runtime's values."""
    r = np.random.default_rng(5)
    x = r.normal(size=(1, 13, 6, 37)).astype(np.float32)
    inits = {"w0": (r.normal(size=(10, 13, 1, 1)) / 3.6).astype(np.float32),
             "w1": (r.normal(size=(7, 10, 1, 1)) / 3.2).astype(np.float32),
             "b0": (r.normal(size=10) * 0.2).astype(np.float32)}
    nodes = [node("Conv", ["x", "w0", "b0"], ["c0"]), node("Relu", ["c0"], ["y0"]),
             node("Conv", ["y0", "w1"], ["y1"], strides=[2, 2])]
    m = model(nodes, {"x": x}, ["y0", "y1"], inits)
    q = quantize_qdq(m, [{"x": r.normal(size=x.shape).astype(np.float32)} for _ in range(2)],
                     tmp_path, act)
    assert_integer_run(q, {"x": x})
