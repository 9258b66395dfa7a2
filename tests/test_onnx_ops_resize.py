"""Resize and Upsample (nearest and bilinear, every coordinate transformation mode npukit
takes) against ONNX Runtime and the onnx package's reference evaluator, with poisoned
outputs; int8 nearest; the refusals."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx.reference import ReferenceEvaluator  # noqa: E402
from ops_helpers import check_ops, model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402

RNG = np.random.default_rng(24)
MODES = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
         "asymmetric"]
SCALES = [[1, 1, 2, 1.5], [1, 1, 0.6, 0.5], [1, 1, 3, 2.3]]


@pytest.mark.parametrize("kind", ["nearest", "linear"])
def test_every_coordinate_mode_and_rounding_up_and_down(kind):
    x = RNG.normal(size=(2, 3, 5, 7)).astype(np.float32)
    nodes, outs, inits = [], [], {}
    hows = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"] if kind == "nearest" \
        else ["round_prefer_floor"]
    for mode in MODES:
        for how in hows:
            for sc in SCALES:
                i = len(outs)
                inits[f"s{i}"] = np.array(sc, np.float32)
                nodes.append(node("Resize", ["x", "", f"s{i}"], [f"y{i}"], mode=kind,
                                  coordinate_transformation_mode=mode, nearest_mode=how))
                outs.append(f"y{i}")
    i = len(outs)
    inits["sz"] = np.array([2, 3, 9, 4], np.int64)
    nodes.append(node("Resize", ["x", "", "", "sz"], [f"y{i}"], mode=kind))
    outs.append(f"y{i}")
    m = model(nodes, {"x": x}, outs, inits, opset=19)
    g, out, _ = check_ops(m, {"x": x}, l1_budget=4000)
    if kind == "linear":
        # The onnx package's reference (float64), where it agrees with ONNX Runtime: for
        # align_corners with scales, and half_pixel_symmetric when downsampling, the two
        # differ (npukit computes as ONNX Runtime, checked above).
        ref = dict(zip(outs, ReferenceEvaluator(m).run(None, {"x": x})))
        for k, mode in zip(outs, [mo for mo in MODES for _ in SCALES] + ["half_pixel"]):
            if mode in ("half_pixel", "pytorch_half_pixel", "asymmetric"):
                assert np.abs(out[k] - ref[k]).max() <= 1e-6 * np.abs(ref[k]).max(), k
    else:  # a copy of values of the same plane (its ties ONNX Runtime's, checked above)
        for k in outs:
            for p in np.ndindex(2, 3):
                assert np.isin(out[k][p], x[p]).all(), k
    assert out[f"y{i}"].shape == (2, 3, 9, 4)
    assert {info.ops for info in g.layers} == {"Resize"}


def test_nearest_on_int8_upsample_and_resize_10_and_axes():
    q = RNG.integers(-128, 128, size=(1, 2, 3, 4)).astype(np.int8)
    m = model([node("Resize", ["q", "", "s"], ["y"], mode="nearest")], {"q": q}, ["y"],
              {"s": np.array([1, 1, 2, 2], np.float32)}, opset=13)
    _, out, _ = check_ops(m, {"q": q})
    assert np.array_equal(out["y"], q.repeat(2, axis=2).repeat(2, axis=3))
    x = RNG.normal(size=(1, 2, 4, 6)).astype(np.float32)
    m = model([node("Upsample", ["x", "s"], ["y"], mode="nearest")], {"x": x}, ["y"],
              {"s": np.array([1, 1, 2, 3], np.float32)}, opset=9)
    _, out, _ = check_ops(m, {"x": x})
    assert np.array_equal(out["y"], x.repeat(2, axis=2).repeat(3, axis=3))
    m = model([node("Resize", ["x", "s"], ["y"], mode="nearest")], {"x": x}, ["y"],
              {"s": np.array([1, 1, 0.5, 0.6], np.float32)}, opset=10)  # down: ceil
    check_ops(m, {"x": x})
    m = model([node("Resize", ["x", "", "s"], ["y"], mode="linear", axes=[3, 2])], {"x": x},
              ["y"], {"s": np.array([1.5, 2], np.float32)}, opset=18)
    _, out, _ = check_ops(m, {"x": x})
    assert out["y"].shape == (1, 2, 8, 9)


@pytest.mark.parametrize("attrs,match", [
    (dict(mode="cubic"), r"mode='cubic'; npukit resizes with 'nearest' or 'linear'"),
    (dict(mode="linear", antialias=1), r"antialias=1 is not supported"),
    (dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize"),
     r"coordinate_transformation_mode='tf_crop_and_resize'; npukit takes"),
])
def test_refusals_name_the_node_and_the_attribute(attrs, match):
    x = RNG.normal(size=(1, 1, 4, 4)).astype(np.float32)
    m = model([node("Resize", ["x", "roi", "s"], ["y"], name="rs", **attrs)], {"x": x}, ["y"],
              {"s": np.array([1, 1, 2, 2], np.float32),
               "roi": np.array([0, 0, 0, 0, 1, 1, 1, 1], np.float32)}, opset=19)
    with pytest.raises(ModelError, match=r"^node 'rs' \(Resize\): " + match):
        npukit.onnx.load(m)


def test_resizing_the_channels_is_refused():
    x = RNG.normal(size=(1, 2, 3, 3)).astype(np.float32)
    m = model([node("Resize", ["x", "", "s"], ["y"], name="rc")], {"x": x}, ["y"],
              {"s": np.array([1, 2, 1, 1], np.float32)}, opset=13)
    with pytest.raises(ModelError, match=r"^node 'rc' \(Resize\): resizes \[1, 2, 3, 3\] to "
                                         r"\[1, 4, 3, 3\]; npukit resizes the last two axes"):
        npukit.onnx.load(m)
