"""LayerNormalization (npukit.tiler.basic_kernels.normalisation.layer_norm) against ONNX
Runtime and float64, with its optional Mean and InvStdDev outputs, poisoned outputs."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ops_helpers import check_ops, model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402

RNG = np.random.default_rng(26)


def layer_norm(x, w, b, axis, eps):
    axes = tuple(range(axis, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    inv = 1 / np.sqrt(((x - mean) ** 2).mean(axis=axes, keepdims=True) + eps)
    return (x - mean) * inv * w + b, mean, inv


@pytest.mark.parametrize("l1", [48000, 1000], ids=["one-tile", "many-tiles"])
def test_layer_norm_over_trailing_axes_with_its_statistics(l1):
    x = (RNG.normal(size=(2, 3, 8)) * 3 + 1).astype(np.float32)
    w, b = RNG.normal(size=8).astype(np.float32), RNG.normal(size=8).astype(np.float32)
    w2 = RNG.normal(size=(3, 8)).astype(np.float32)
    nodes = [node("LayerNormalization", ["x", "w", "b"], ["y0"]),
             node("LayerNormalization", ["x", "w2"], ["y1", "m1", "i1"], axis=1, epsilon=0.1)]
    ins = {"x": x, "w2": w2}  # a scale given as a graph input
    m = model(nodes, ins, ["y0", "y1", "m1", "i1"], {"w": w, "b": b}, opset=17)
    g, out, _ = check_ops(m, ins, l1_budget=l1)
    x64 = x.astype(np.float64)
    y0, _, _ = layer_norm(x64, w, b, 2, 1e-5)
    y1, m1, i1 = layer_norm(x64, w2, 0, 1, 0.1)
    for k, want in {"y0": y0, "y1": y1, "m1": m1, "i1": i1}.items():
        assert out[k].shape == want.shape
        assert np.abs(out[k] - want).max() <= 1e-6 * np.abs(want).max(), k
    assert [info.ops for info in g.layers] == ["LayerNormalization"] * 2


def test_a_scale_of_another_shape_is_refused_by_name():
    x = RNG.normal(size=(2, 6)).astype(np.float32)
    m = model([node("LayerNormalization", ["x", "w"], ["y"], name="ln")], {"x": x}, ["y"],
              {"w": np.ones((1,), np.float32)}, opset=17)
    with pytest.raises(ModelError, match=r"^node 'ln' \(LayerNormalization\): Scale 'w' of "
                                         r"shape \[1\] for the \[6\] normalised"):
        npukit.onnx.load(m)


def test_instance_norm_of_a_batch():
    x = (RNG.normal(size=(2, 4, 3, 5)) * 2 + 1).astype(np.float32)
    sc, b = RNG.normal(size=4).astype(np.float32), RNG.normal(size=4).astype(np.float32)
    m = model([node("InstanceNormalization", ["x", "sc", "b"], ["y"], epsilon=1e-3)],
              {"x": x, "b": b}, ["y"], {"sc": sc})  # B given as a graph input
    g, out, _ = check_ops(m, {"x": x, "b": b}, l1_budget=2000)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=(2, 3), keepdims=True)
    want = (x64 - mean) / np.sqrt(x64.var(axis=(2, 3), keepdims=True) + 1e-3)
    want = want * sc[:, None, None] + b[:, None, None]
    assert np.abs(out["y"] - want).max() <= 1e-6 * np.abs(want).max()
    assert [info.ops for info in g.layers] == [
        "InstanceNormalization (rows)", "InstanceNormalization (scale)",
        "InstanceNormalization (shift)"]
