"""CumSum (float32; a basic kernel along the axis) against ONNX Runtime and numpy, with
poisoned outputs: every axis, exclusive, reverse; the refusals."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ops_helpers import check_ops, model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402

RNG = np.random.default_rng(79)


def running(x, axis, exclusive, reverse):
    """The running sums in float64 (numpy's cumsum), shifted for exclusive."""
    x = np.flip(x, axis) if reverse else x
    c = np.cumsum(x.astype(np.float64), axis)
    if exclusive:
        c = np.concatenate([np.zeros_like(np.take(c, [0], axis)), np.delete(c, -1, axis)],
                           axis)
    return np.flip(c, axis) if reverse else c


@pytest.mark.slow
def test_every_axis_exclusive_and_reverse():
    x = RNG.normal(size=(3, 4, 5)).astype(np.float32)
    cases = [(a, e, r) for a in (0, 1, -1) for e in (0, 1) for r in (0, 1)]
    nodes = [node("CumSum", ["x", f"a{i}"], [f"y{i}"], exclusive=e, reverse=r)
             for i, (_, e, r) in enumerate(cases)]
    inits = {f"a{i}": np.array(a, np.int64) for i, (a, _, _) in enumerate(cases)}
    m = model(nodes, {"x": x}, [f"y{i}" for i in range(len(cases))], inits, opset=14)
    _, out, _ = check_ops(m, {"x": x})
    for i, (a, e, r) in enumerate(cases):
        want = running(x, a, e, r)
        assert np.abs(out[f"y{i}"] - want).max() <= 1e-5 * np.abs(want).max(), (a, e, r)


def test_an_axis_the_model_computes_is_refused():
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    m = model([node("Cast", ["ai"], ["a"], to=7), node("CumSum", ["x", "a"], ["y"])],
              {"x": x, "ai": np.array([1], np.int8)}, ["y"], opset=14)
    with pytest.raises(ModelError, match="axis"):
        npukit.onnx.load(m)
