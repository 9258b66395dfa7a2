"""RMSNormalization (opset 23; its ONNX function body: x / sqrt(mean(x * x) + epsilon) *
scale) against ONNX Runtime and float64 numpy, with poisoned outputs; the refusals."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ops_helpers import check_ops, model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402

RNG = np.random.default_rng(71)


@pytest.mark.slow
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_rms_norm_over_the_trailing_axes_with_a_scale_input(axis):
    x = (RNG.normal(size=(2, 3, 6)) * 2 + 0.5).astype(np.float32)
    w = RNG.normal(size=(2, 3, 6)[axis:]).astype(np.float32)
    m = model([node("RMSNormalization", ["x", "w"], ["y"], axis=axis, epsilon=0.05)],
              {"x": x, "w": w}, ["y"], opset=23)
    _, out, _ = check_ops(m, {"x": x, "w": w})
    axes = tuple(range(axis % 3, 3))
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 * x64).mean(axes, keepdims=True) + 0.05) * w
    assert np.abs(out["y"] - want).max() <= 1e-5 * np.abs(want).max()


@pytest.mark.parametrize("attrs,match", [(dict(axis=3), r"\(RMSNormalization\): axis=3 for a "
                                                           r"rank-3 input"),
                                         (dict(stash_type=0), r"\(RMSNormalization\): operator "
                                                              r"'RMSNormalization' is not "
                                                              r"supported")])
def test_refusals_name_the_attribute(attrs, match):
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    m = model([node("RMSNormalization", ["x", "w"], ["y"], **attrs)], {"x": x}, ["y"],
              {"w": np.ones(4, np.float32)}, opset=23)
    with pytest.raises(ModelError, match=match):
        npukit.onnx.load(m)
