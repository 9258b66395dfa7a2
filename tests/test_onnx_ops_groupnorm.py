"""GroupNormalization (whose output shape ONNX shape inference leaves unknown: npukit infers
it) against ONNX Runtime and a float64 numpy reference, with poisoned outputs, followed by
another layer; the refusals."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ops_helpers import check_ops, model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402

RNG = np.random.default_rng(53)


def group_norm(x, groups, scale, bias, eps):
    """float64: each image's groups of channels normalised, then per channel scale, bias."""
    n, c = x.shape[:2]
    g = x.astype(np.float64).reshape(n, groups, -1)
    g = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)
    shape = (1, c) + (1,) * (x.ndim - 2)
    return g.reshape(x.shape) * scale.reshape(shape) + bias.reshape(shape)


@pytest.mark.slow
@pytest.mark.parametrize("groups", [1, 2, 6])
def test_group_norm_then_a_relu(groups):
    """Opset 21 (one scale per channel), a graph-input scale, batch 2, then Relu: the
    output shape comes from npukit, since ONNX shape inference gives none."""
    x = (RNG.normal(size=(2, 6, 3, 5)) * 3 + 1).astype(np.float32)
    scale = RNG.normal(size=6).astype(np.float32)
    bias = RNG.normal(size=6).astype(np.float32)
    m = model([node("GroupNormalization", ["x", "s", "b"], ["t"], num_groups=groups,
                    epsilon=1e-3),
               node("Relu", ["t"], ["y"])], {"x": x, "s": scale}, ["y"], {"b": bias},
              opset=21)
    g, out, _ = check_ops(m, {"x": x, "s": scale})
    want = np.maximum(group_norm(x, groups, scale, bias, 1e-3), 0)
    assert np.abs(out["y"] - want).max() <= 1e-5 * np.abs(want).max()
    assert [info.ops for info in g.layers][:3] == ["GroupNormalization (rows)",
                                                   "GroupNormalization (scale)",
                                                   "GroupNormalization (shift)"]


@pytest.mark.parametrize("groups,scale,match", [
    (4, 6, "num_groups=4 does not divide the 6 channels"),
    (2, 3, "one per channel"),
])
def test_refusals_name_the_groups_and_the_scale(groups, scale, match):
    x = RNG.normal(size=(1, 6, 2, 2)).astype(np.float32)
    s = RNG.normal(size=scale).astype(np.float32)
    m = model([node("GroupNormalization", ["x", "s", "s"], ["y"], num_groups=groups)],
              {"x": x}, ["y"], {"s": s}, opset=21)
    with pytest.raises(ModelError, match=match):
        npukit.onnx.load(m)
