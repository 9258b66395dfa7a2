"""Data movement operators beyond the layout ones: Expand (a broadcasting layer) and CastLike
to the same type (a name for the same bytes), against ONNX Runtime with poisoned outputs."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ops_helpers import check_ops, model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402

RNG = np.random.default_rng(22)


def test_expand_broadcasts_to_a_larger_rank_and_in_the_middle():
    x = RNG.normal(size=(3, 1)).astype(np.float32)
    v = RNG.normal(size=(2, 1, 5)).astype(np.float32)
    shapes = {"s0": [2, 1, 6], "s1": [3, 1], "s2": [2, 4, 5], "s3": [4, 1, 1, 1]}
    nodes = [node("Expand", ["x", "s0"], ["y0"]), node("Expand", ["x", "s1"], ["y1"]),
             node("Expand", ["v", "s2"], ["y2"]), node("Expand", ["v", "s3"], ["y3"])]
    inits = {k: np.array(s, np.int64) for k, s in shapes.items()}
    ins = {"x": x, "v": v}
    g, out, _ = check_ops(model(nodes, ins, ["y0", "y1", "y2", "y3"], inits), ins,
                          l1_budget=900)
    assert np.array_equal(out["y0"], np.broadcast_to(x, (2, 3, 6)))
    assert np.array_equal(out["y1"], x)  # the same shape: a copy of the same bytes
    assert np.array_equal(out["y2"], np.broadcast_to(v, (2, 4, 5)))
    assert np.array_equal(out["y3"], np.broadcast_to(v, (4, 2, 1, 5)))
    assert [info.ops for info in g.layers].count("Expand") == 3


def test_cast_like_to_the_same_type_is_a_view_and_to_another_is_refused():
    x = RNG.normal(size=(2, 7)).astype(np.float32)
    m = model([node("CastLike", ["x", "x"], ["c"]), node("Exp", ["c"], ["y"])], {"x": x},
              ["y"], opset=15)
    g, out, _ = check_ops(m, {"x": x})
    assert [info.ops for info in g.layers] == ["Exp"]
    m = model([node("CastLike", ["x", "k"], ["y"], name="cl")], {"x": x}, ["y"],
              {"k": np.array([1], np.int8)}, opset=15)
    with pytest.raises(ModelError, match=r"^node 'cl' \(CastLike\): casts float32 to int8; "
                                         r"npukit keeps each tensor's type"):
        npukit.onnx.load(m)
