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


def test_cast_like_to_the_same_type_is_a_view_and_to_another_is_a_cast():
    x = RNG.normal(size=(2, 7)).astype(np.float32)
    m = model([node("CastLike", ["x", "x"], ["c"]), node("Exp", ["c"], ["y"])], {"x": x},
              ["y"], opset=15)
    g, out, _ = check_ops(m, {"x": x})
    assert [info.ops for info in g.layers] == ["Exp"]
    m = model([node("CastLike", ["x", "k"], ["y"], name="cl")], {"x": x * 50}, ["y"],
              {"k": np.array([1], np.int8)}, opset=15)
    g, out, ref = check_ops(m, {"x": x * 50})
    assert [info.ops for info in g.layers] == ["CastLike"]
    assert np.array_equal(out["y"], ref["y"]) and np.abs(out["y"]).max() > 10
    m = model([node("CastLike", ["x", "k"], ["y"], name="cl")], {"x": x}, ["y"],
              {"k": np.array(["a"], object)}, opset=15)
    with pytest.raises(ModelError, match=r"^node 'cl' \(CastLike\): output 'y' has element type "
                                         r"string; npukit computes on float32"):
        npukit.onnx.load(m)


def ints(*v):
    return np.array(v, np.int64)


def test_slice_with_negative_and_clamped_bounds_and_split_in_parts():
    x = RNG.normal(size=(3, 10, 5)).astype(np.float32)
    nodes = [node("Slice", ["x", "st", "en"], ["y0"]),
             node("Slice", ["x", "st2", "en2", "ax2", "one"], ["y1"]),
             node("Split", ["x"], ["a", "b"], axis=1),
             node("Split", ["x", "sp"], ["c", "d", "e"], axis=-1)]
    inits = {"st": ints(1, 2), "en": ints(3, -1), "st2": ints(-4), "en2": ints(100),
             "ax2": ints(1), "one": ints(1), "sp": ints(1, 3, 1)}
    outs = ["y0", "y1", "a", "b", "c", "d", "e"]
    g, out, _ = check_ops(model(nodes, {"x": x}, outs, inits, opset=13), {"x": x},
                          l1_budget=900)
    want = {"y0": x[1:3, 2:-1], "y1": x[:, -4:], "a": x[:, :5], "b": x[:, 5:],
            "c": x[..., :1], "d": x[..., 1:4], "e": x[..., 4:]}
    for k, w in want.items():
        assert np.array_equal(out[k], w), k
    # (each Split one layer reading x once)
    assert [info.ops for info in g.layers] == ["Slice"] * 3 + ["Split"] * 2


def test_slice_attributes_split_num_outputs_and_int8_data():
    q = RNG.integers(-128, 128, size=(2, 7, 4)).astype(np.int8)
    m = model([node("Slice", ["q"], ["s"], starts=[1, -3], ends=[2, 1000], axes=[0, 1])],
              {"q": q}, ["s"], opset=9)
    _, out, _ = check_ops(m, {"q": q})
    assert np.array_equal(out["s"], q[1:2, -3:])
    m = model([node("Split", ["q"], ["a", "b", "c"], axis=1, num_outputs=3)], {"q": q},
              ["a", "b", "c"], opset=18)
    _, out, _ = check_ops(m, {"q": q})
    assert [out[k].shape[1] for k in "abc"] == [3, 3, 1]
    assert np.array_equal(np.concatenate([out[k] for k in "abc"], axis=1), q)


def test_a_pad_value_the_model_computes_is_refused_by_name():
    """It was a KeyError once a CastLike before it became a view."""
    x = RNG.normal(size=(2, 3)).astype(np.float32)
    v = np.array([0.5], np.float32)
    m = model([node("CastLike", ["v", "x"], ["vc"]), node("Reshape", ["vc", "sh"], ["vs"]),
               node("Pad", ["x", "p", "vs"], ["y"], name="pad1")], {"x": x, "v": v}, ["y"],
              {"p": ints(0, 1, 0, 1), "sh": np.zeros(0, np.int64)}, opset=15)
    with pytest.raises(ModelError, match=r"^node 'pad1' \(Pad\): its constant_value 'vs' must "
                                         r"be a constant .* from the graph inputs \['v'\]"):
        npukit.onnx.load(m)


def test_gather_with_constant_indices_scalar_negative_and_nested():
    x = RNG.normal(size=(2, 5, 3)).astype(np.float32)
    idx = {"i0": np.array(0, np.int64), "i1": ints(4, -1, 2, 0).reshape(2, 2),
           "i2": ints(2, 0), "i3": ints(1)}
    nodes = [node("Gather", ["x", "i0"], ["y0"], axis=1),
             node("Gather", ["x", "i1"], ["y1"], axis=1),
             node("Gather", ["x", "i2"], ["y2"], axis=-1),
             node("Gather", ["x", "i3"], ["y3"], axis=0)]
    g, out, _ = check_ops(model(nodes, {"x": x}, ["y0", "y1", "y2", "y3"], idx), {"x": x})
    assert np.array_equal(out["y0"], x[:, 0])
    assert np.array_equal(out["y1"], np.take(x, [[4, -1], [2, 0]], axis=1))
    assert np.array_equal(out["y2"], x[..., [2, 0]])
    assert np.array_equal(out["y3"], x[1:2])
    q = RNG.integers(-128, 128, size=(3, 4)).astype(np.int8)
    m = model([node("Gather", ["q", "i"], ["y"], name="g1", axis=1)], {"q": q}, ["y"],
              {"i": ints(3, 1)})
    _, out, _ = check_ops(m, {"q": q})
    assert np.array_equal(out["y"], q[:, [3, 1]])


def test_depth_to_space_both_modes_and_space_to_depth():
    x = RNG.normal(size=(2, 8, 3, 2)).astype(np.float32)
    nodes = [node("DepthToSpace", ["x"], ["d"], blocksize=2),
             node("DepthToSpace", ["x"], ["c"], blocksize=2, mode="CRD"),
             node("SpaceToDepth", ["d"], ["s"], blocksize=2)]
    g, out, _ = check_ops(model(nodes, {"x": x}, ["d", "c", "s"], opset=13), {"x": x})
    n, c, h, w, b = 2, 8, 3, 2, 2
    dcr = x.reshape(n, b, b, c // 4, h, w).transpose(0, 3, 4, 1, 5, 2)
    crd = x.reshape(n, c // 4, b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    assert np.array_equal(out["d"], dcr.reshape(n, c // 4, h * b, w * b))
    assert np.array_equal(out["c"], crd.reshape(n, c // 4, h * b, w * b))
    assert np.array_equal(out["s"], x)  # SpaceToDepth undoes DCR
    # opset 24's CRD SpaceToDepth undoes CRD (ONNX Runtime 1.32 refuses its mode
    # attribute: the onnx package's reference evaluator is the oracle)
    from onnx.reference import ReferenceEvaluator

    m = model([node("DepthToSpace", ["x"], ["c"], blocksize=2, mode="CRD"),
               node("SpaceToDepth", ["c"], ["s"], blocksize=2, mode="CRD")], {"x": x},
              ["c", "s"], opset=24)
    got = npukit.onnx.load(m).run("c", x=x).outputs
    want = ReferenceEvaluator(m).run(None, {"x": x})
    assert np.array_equal(got["c"], want[0]) and np.array_equal(got["s"], x)
