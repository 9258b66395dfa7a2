"""ONNX's float32 reductions (npukit.tiler.basic_kernels.reduction): every operator over
neighbouring and separated axes, with and without keepdims, in one tile and in many, against
ONNX Runtime and float64 numpy; the simulator against the C bit for bit; outputs poisoned."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ops_helpers import check_ops, model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402

RNG = np.random.default_rng(21)


def logsumexp(x, axis, keepdims):
    m = x.max(axis=axis, keepdims=True)
    out = np.log(np.exp(x - m).sum(axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis)


ORACLES = {
    "ReduceSum": lambda x, a, k: x.sum(axis=a, keepdims=k),
    "ReduceMean": lambda x, a, k: x.mean(axis=a, keepdims=k),
    "ReduceMax": lambda x, a, k: x.max(axis=a, keepdims=k),
    "ReduceMin": lambda x, a, k: x.min(axis=a, keepdims=k),
    "ReduceProd": lambda x, a, k: x.prod(axis=a, keepdims=k),
    "ReduceL1": lambda x, a, k: np.abs(x).sum(axis=a, keepdims=k),
    "ReduceL2": lambda x, a, k: np.sqrt((x * x).sum(axis=a, keepdims=k)),
    "ReduceLogSum": lambda x, a, k: np.log(x.sum(axis=a, keepdims=k)),
    "ReduceLogSumExp": logsumexp,
    "ReduceSumSquare": lambda x, a, k: (x * x).sum(axis=a, keepdims=k),
}
AXES = [[1], [0, 2], [1, 3], [], [2, 3], [-1], [0, 1, 2, 3], [0, 3]]


@pytest.mark.slow
@pytest.mark.parametrize("l1", [48000, 1400], ids=["one-tile", "many-tiles"])
def test_every_reduction_over_any_axes_matches_onnx_runtime_and_float64(l1):
    x = RNG.normal(size=(2, 3, 5, 7)).astype(np.float32)
    pos = (np.abs(x) + 0.1).astype(np.float32)  # ReduceLogSum's domain
    small = (1 + 0.3 * x).astype(np.float32)  # products of moderate size
    nodes, outs, inits, cases = [], [], {}, []
    for op in ORACLES:
        src = {"ReduceLogSum": "p", "ReduceProd": "s"}.get(op, "x")
        for j, axes in enumerate(AXES):
            i, keep = len(outs), j % 2
            ins = [src]
            if axes:
                inits[f"a{i}"] = np.array(axes, np.int64)
                ins.append(f"a{i}")
            nodes.append(node(op, ins, [f"y{i}"], keepdims=keep))
            outs.append(f"y{i}")
            cases.append((op, src, axes, keep))
    inputs = {"x": x, "p": pos, "s": small}
    g, c, ref = check_ops(inputs=inputs, m=model(nodes, inputs, outs, inits, opset=18),
                          l1_budget=l1)
    for i, (op, src, axes, keep) in enumerate(cases):
        a = tuple(range(4)) if not axes else tuple(sorted(v % 4 for v in axes))
        want = ORACLES[op](inputs[src].astype(np.float64), a, bool(keep))
        got = c[f"y{i}"]
        assert got.shape == want.shape, (op, axes)
        assert np.abs(got - want).max() <= 2e-6 * np.abs(want).max(), (op, axes)
    # Separated axes go through transposes; neighbouring ones do not.
    moved = {info.detail.split(":")[0] for info in g.layers if info.ops == "Transpose"}
    assert moved == {"perm [1, 3, 0, 2]", "perm [0, 2, 1, 3]", "perm [1, 2, 0, 3]"}
    assert len([info for info in g.layers if info.ops.startswith("Reduce")]) == len(cases)


def test_attribute_axes_default_axes_and_noop_with_empty_axes():
    """Opset 13: axes as an attribute (ReduceSum's as an input); no axes reduce every axis,
    or none with noop_with_empty_axes (opset 18), each value alone: ReduceL2 gives |x|."""
    x = RNG.normal(size=(3, 4, 6)).astype(np.float32)
    nodes = [node("ReduceMax", ["x"], ["y0"], axes=[0, 2], keepdims=0),
             node("ReduceMean", ["x"], ["y1"]),
             node("ReduceSum", ["x", "ax"], ["y2"], keepdims=1)]
    m = model(nodes, {"x": x}, ["y0", "y1", "y2"], {"ax": np.array([-2], np.int64)}, opset=13)
    _, c, _ = check_ops(m, {"x": x})
    assert np.allclose(c["y0"], x.max(axis=(0, 2)), rtol=0, atol=0)
    assert np.allclose(c["y1"], x.mean(keepdims=True), rtol=1e-5, atol=1e-6)
    assert np.allclose(c["y2"], x.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-5)
    m = model([node("ReduceL2", ["x"], ["y"], noop_with_empty_axes=1), node("Neg", ["y"],
                                                                            ["z"])],
              {"x": x}, ["z"], opset=18)
    g, c, _ = check_ops(m, {"x": x})
    assert [info.ops for info in g.layers] == ["ReduceL2", "Neg"]
    assert np.allclose(c["z"], -np.abs(x), rtol=2.5e-7, atol=0)  # sqrt(x * x): 1 ulp


def test_a_reduce_mean_over_the_spatial_axes_stays_a_global_pooling():
    x = RNG.normal(size=(1, 4, 5, 6)).astype(np.float32)
    m = model([node("ReduceMean", ["x", "ax"], ["y"])], {"x": x}, ["y"],
              {"ax": np.array([2, 3], np.int64)}, opset=18)
    g, _, _ = check_ops(m, {"x": x})
    assert [info.ops for info in g.layers] == ["GlobalAveragePool"]
    x2 = np.concatenate([x, x * 2])  # batch 2: a reduction
    m = model([node("ReduceMean", ["x", "ax"], ["y"])], {"x": x2}, ["y"],
              {"ax": np.array([2, 3], np.int64)}, opset=18)
    g, c, _ = check_ops(m, {"x": x2})
    assert [info.ops for info in g.layers] == ["ReduceMean"]
    assert np.allclose(c["y"], x2.mean(axis=(2, 3), keepdims=True), atol=1e-6)


def test_integer_data_is_refused_by_name():
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    q = (x * 10).astype(np.int8)
    m = model([node("ReduceMax", ["q"], ["y"], name="r2", axes=[1])], {"q": q}, ["y"])
    with pytest.raises(ModelError, match=r"^node 'r2' \(ReduceMax\): ReduceMax of int8 data "
                                         r"is not supported \(float32 only\)$"):
        npukit.onnx.load(m)
