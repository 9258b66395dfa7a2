"""Hardmax (a basic kernel along an axis) against ONNX Runtime and numpy, with poisoned
outputs: every axis (opset 13), the flattened trailing axes (opset 11), ties (the first
maximum wins), infinities and NaN as ONNX Runtime takes them."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ops_helpers import check_ops, model, node  # noqa: E402

RNG = np.random.default_rng(67)


def first_max_one_hot(x, axis):
    """1 at the first maximum along ``axis`` (numpy's argmax), 0 elsewhere."""
    i = np.expand_dims(np.argmax(x, axis=axis), axis)
    out = np.zeros_like(x)
    np.put_along_axis(out, i, 1, axis=axis)
    return out


@pytest.mark.slow
def test_every_axis_with_ties_and_infinities():
    x = RNG.integers(-3, 4, size=(3, 4, 5)).astype(np.float32)  # many ties
    x[0, 1, 2], x[2, 3, 0], x[1, 0, 4] = np.inf, -np.inf, np.inf
    axes = [0, 1, 2, -1]
    m = model([node("Hardmax", ["x"], [f"y{i}"], axis=a) for i, a in enumerate(axes)],
              {"x": x}, [f"y{i}" for i in range(len(axes))], opset=13)
    g, out, _ = check_ops(m, {"x": x})
    for i, a in enumerate(axes):
        assert (out[f"y{i}"] == first_max_one_hot(x, a)).all(), a
    assert {info.ops for info in g.layers} == {"Hardmax"}


@pytest.mark.slow
def test_opset_11_flattens_the_trailing_axes_and_nan_is_never_a_maximum():
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    x[0, 0, 0] = np.nan  # first of its row: the maximum no value equals, all zeros
    x[1, 2, 1] = np.nan  # later: skipped
    m = model([node("Hardmax", ["x"], ["y"], axis=1)], {"x": x}, ["y"], opset=11)
    _, out, ref = check_ops(m, {"x": x})
    flat = out["y"].reshape(2, 12)
    assert (flat[0] == 0).all() and flat[1].sum() == 1
    rest = x.reshape(2, 12)[1]
    assert flat[1, np.nanargmax(rest)] == 1
