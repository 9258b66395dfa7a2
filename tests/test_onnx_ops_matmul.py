"""MatMul with batched operands (numpy's matmul broadcasting of the leading dimensions),
float32, against ONNX Runtime and float64 with poisoned outputs."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ops_helpers import check_ops, model, node  # noqa: E402

RNG = np.random.default_rng(23)


def randn(*shape):
    return RNG.normal(size=shape).astype(np.float32)


@pytest.mark.slow
def test_batched_and_broadcast_operands():
    ins = {"a": randn(2, 3, 4, 5), "b": randn(2, 3, 5, 6), "b1": randn(3, 5, 2),
           "c": randn(4, 5), "v": randn(5), "a2": randn(2, 1, 4, 5), "a3": randn(2, 1, 3, 4, 5),
           "b3": randn(2, 1, 5, 6)}
    pairs = [("a", "b"), ("a", "b1"), ("c", "b1"), ("v", "b1"), ("a2", "b1"), ("a3", "b3")]
    nodes = [node("MatMul", list(p), [f"y{i}"]) for i, p in enumerate(pairs)]
    g, out, _ = check_ops(model(nodes, ins, [f"y{i}" for i in range(len(pairs))]), ins,
                          l1_budget=2000)
    for i, (x, y) in enumerate(pairs):
        want = np.matmul(ins[x].astype(np.float64), ins[y].astype(np.float64))
        assert out[f"y{i}"].shape == want.shape
        assert np.abs(out[f"y{i}"] - want).max() <= 1e-6 * np.abs(want).max(), (x, y)
    # Each a layer iterating its products in one or two batch spaces (a (2, 3) batch of a
    # times a (3,) batch of b1: a's matrices walk both, b1's the inner one) ...
    assert [(info.ops, info.detail.split(" of ")[0]) for info in g.layers[:5]] == \
        [("MatMul", f"{k} products") for k in (6, 6, 3, 3, 6)]
    # ... but a batch of three dimensions of alternating operands: twelve products, each
    # operand matrix cropped once per product
    assert [info.ops for info in g.layers[5:]] == ["Slice", "Slice", "MatMul"] * 12 + ["MatMul"]


def test_attention_scores_and_weighted_values():
    """softmax(Q K^T / sqrt(d)) V over 2 heads, as an attention block writes it."""
    q, k, v = randn(1, 2, 6, 4), randn(1, 2, 6, 4), randn(1, 2, 6, 4)
    nodes = [node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             node("MatMul", ["q", "kt"], ["s"]), node("Mul", ["s", "scale"], ["ss"]),
             node("Softmax", ["ss"], ["p"], axis=-1), node("MatMul", ["p", "v"], ["y"])]
    ins = {"q": q, "k": k, "v": v}
    _, out, _ = check_ops(model(nodes, ins, ["y"], {"scale": np.array(0.5, np.float32)}), ins)
    s = np.matmul(q.astype(np.float64), np.swapaxes(k, -1, -2)) * 0.5
    p = np.exp(s - s.max(-1, keepdims=True))
    want = np.matmul(p / p.sum(-1, keepdims=True), v)
    assert np.abs(out["y"] - want).max() <= 1e-6 * np.abs(want).max()


@pytest.mark.slow
@pytest.mark.parametrize("act", ["u8", "s8"])
def test_attention_quantized_by_onnx_runtime(act, tmp_path):
    """QDQ from ONNX Runtime's quantize_static: both MatMuls have two quantized activations,
    so each becomes a batched QLinearMatMul layer (integers, ONNX Runtime's requantisation),
    within one step of the output scale."""
    from onnx_helpers import quantize_qdq

    from npukit.onnx.check import compare

    shape = (1, 2, 6, 4)
    ins = {k: randn(*shape) for k in ("q", "k", "v")}
    nodes = [node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             node("MatMul", ["q", "kt"], ["s"]), node("Softmax", ["s"], ["p"], axis=-1),
             node("MatMul", ["p", "v"], ["y"])]
    cal = [{k: randn(*shape) for k in ins} for _ in range(8)]
    qm = quantize_qdq(model(nodes, ins, ["y"]), cal, tmp_path, act=act)
    g, out, ref = check_ops(qm, ins)
    ops = [info.ops for info in g.layers]
    assert ops.count("QLinearMatMul") == 2 and "MatMul" not in ops  # one layer each
    cmp = compare("y", out["y"], ref["y"], g.output_steps["y"])
    assert cmp.exact >= 0.9, str(cmp)
