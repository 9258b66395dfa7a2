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
WHOLE = [1, 1, 0.4, 3]  # align_corners: lengths 2 and 21, whole


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["nearest", "linear"])
def test_every_coordinate_mode_and_rounding_up_and_down(kind):
    x = RNG.normal(size=(2, 3, 5, 7)).astype(np.float32)
    nodes, outs, inits = [], [], {}
    hows = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"] if kind == "nearest" \
        else ["round_prefer_floor"]
    for mode in MODES:
        for how in hows:
            for sc in SCALES if mode != "align_corners" else [WHOLE]:
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
        # The onnx package's reference (float64); for half_pixel_symmetric downsampling it
        # differs from ONNX Runtime (npukit computes as ONNX Runtime, checked above).
        ref = dict(zip(outs, ReferenceEvaluator(m).run(None, {"x": x})))
        modes = [mo for mo in MODES for _ in (SCALES if mo != "align_corners" else [0])]
        for k, mode in zip(outs, modes + ["half_pixel"]):
            if mode != "half_pixel_symmetric":
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
    (dict(mode="area"), r"mode='area'; npukit resizes with 'nearest', 'linear' or 'cubic'"),
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


def test_align_corners_with_a_fractional_length_is_refused():
    """ONNX aligns the corners of scale * length, ONNX Runtime those of the integer length
    it makes: the two disagree, so npukit asks for sizes."""
    x = RNG.normal(size=(1, 1, 2, 4)).astype(np.float32)
    m = model([node("Resize", ["x", "", "s"], ["y"], name="ra", mode="linear",
                    coordinate_transformation_mode="align_corners")], {"x": x}, ["y"],
              {"s": np.array([1, 1, 0.6, 0.6], np.float32)}, opset=13)
    with pytest.raises(ModelError, match=r"^node 'ra' \(Resize\): align_corners with scale 0.6 "
                                         r"on axis 2 of size 2 \(1.2 rows or columns, 1 made\)"):
        npukit.onnx.load(m)


def test_resizing_the_channels_is_refused():
    x = RNG.normal(size=(1, 2, 3, 3)).astype(np.float32)
    m = model([node("Resize", ["x", "", "s"], ["y"], name="rc")], {"x": x}, ["y"],
              {"s": np.array([1, 2, 1, 1], np.float32)}, opset=13)
    with pytest.raises(ModelError, match=r"^node 'rc' \(Resize\): resizes \[1, 2, 3, 3\] to "
                                         r"\[1, 4, 3, 3\]; npukit resizes the last two axes"):
        npukit.onnx.load(m)
