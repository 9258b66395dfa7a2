"""LpNormalization, LpPool and GlobalLpPool (rewritten as reductions, a depthwise convolution
of ones and elementwise layers) against ONNX Runtime and float64 numpy, with poisoned
outputs; the refusals."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ops_helpers import check_ops, model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402

RNG = np.random.default_rng(59)


@pytest.mark.slow
def test_lp_normalization_p1_p2_every_axis_and_a_zero_vector():
    x = RNG.normal(size=(3, 4, 5)).astype(np.float32)
    x[1, :, 2] = 0  # a vector of zeros along axis 1: ONNX Runtime gives zeros
    cases = [(p, a) for p in (1, 2) for a in (0, 1, -1)]
    nodes = [node("LpNormalization", ["x"], [f"y{i}"], p=p, axis=a)
             for i, (p, a) in enumerate(cases)]
    m = model(nodes, {"x": x}, [f"y{i}" for i in range(len(cases))], opset=13)
    _, out, _ = check_ops(m, {"x": x})
    for i, (p, a) in enumerate(cases):
        norm = np.linalg.norm(x.astype(np.float64), ord=p, axis=a, keepdims=True)
        want = np.divide(x, norm, out=np.zeros(x.shape), where=norm > 0)
        assert np.abs(out[f"y{i}"] - want).max() <= 1e-6, (p, a)
    assert (out["y1"][1, :, 2] == 0).all()


def lp_pool_reference(x, p, k, strides, pads):
    """Sums of |x|^p over each window of the zero-padded input, to the 1/p, in float64."""
    xp = np.pad(np.abs(x.astype(np.float64)) ** p,
                ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    ho = (xp.shape[2] - k[0]) // strides[0] + 1
    wo = (xp.shape[3] - k[1]) // strides[1] + 1
    out = np.zeros(x.shape[:2] + (ho, wo))
    for i in range(ho):
        for j in range(wo):
            r, c = i * strides[0], j * strides[1]
            out[:, :, i, j] = xp[:, :, r:r + k[0], c:c + k[1]].sum((2, 3))
    return out ** (1 / p)


@pytest.mark.slow
@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_pool_windows_with_pads_and_strides(p):
    x = RNG.normal(size=(2, 3, 7, 6)).astype(np.float32)
    attrs = dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1], p=p)
    m = model([node("LpPool", ["x"], ["y"], **attrs)], {"x": x}, ["y"], opset=18)
    g, out, _ = check_ops(m, {"x": x})
    want = lp_pool_reference(x, p, [3, 2], [2, 1], [1, 0, 1, 1])
    assert np.abs(out["y"] - want).max() <= 1e-5 * np.abs(want).max()
    assert any(info.ops == "Conv" for info in g.layers)


@pytest.mark.slow
def test_global_lp_pool():
    x = RNG.normal(size=(2, 4, 5, 3)).astype(np.float32)
    m = model([node("GlobalLpPool", ["x"], ["y1"], p=1), node("GlobalLpPool", ["x"], ["y2"])],
              {"x": x}, ["y1", "y2"], opset=13)
    _, out, _ = check_ops(m, {"x": x})
    for p in (1, 2):
        want = np.linalg.norm(x.reshape(2, 4, -1).astype(np.float64), ord=p, axis=-1)
        assert np.abs(out[f"y{p}"].reshape(2, 4) - want).max() <= 1e-5 * want.max()


@pytest.mark.parametrize("op,shape,attrs,match", [
    ("LpNormalization", (2, 3), dict(p=3), "p=3"),
    ("LpPool", (1, 2, 3, 3, 3), dict(kernel_shape=[2, 2, 2]), "3-D LpPool"),
    ("LpPool", (1, 2, 5, 5), dict(kernel_shape=[2, 2], ceil_mode=1, strides=[2, 2]),
     "ceil_mode=1"),
])
def test_refusals_name_the_node_and_the_attribute(op, shape, attrs, match):
    x = RNG.normal(size=shape).astype(np.float32)
    m = model([node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"], opset=18)
    with pytest.raises(ModelError, match=match):
        npukit.onnx.load(m)
