"""Resize in cubic mode (every coordinate transformation mode npukit takes, cubic_coeff_a,
exclude_outside, up and down) against ONNX Runtime and the onnx package's reference
evaluator, with poisoned outputs; a Relu after it fuses; the refusals."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx.reference import ReferenceEvaluator  # noqa: E402
from ops_helpers import check_ops, model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402

RNG = np.random.default_rng(61)
MODES = ["half_pixel", "pytorch_half_pixel", "asymmetric", "half_pixel_symmetric"]


@pytest.mark.slow
def test_every_mode_coefficient_and_exclusion_up_and_down():
    x = RNG.normal(size=(1, 2, 6, 7)).astype(np.float32)
    nodes, outs, inits = [], [], {}
    for mode in MODES:
        for a, exclude in ((-0.75, 0), (-0.5, 1)):
            for sc in ([1, 1, 1.5, 2.0], [1, 1, 0.5, 0.7]):
                i = len(outs)
                inits[f"s{i}"] = np.array(sc, np.float32)
                nodes.append(node("Resize", ["x", "", f"s{i}"], [f"y{i}"], mode="cubic",
                                  coordinate_transformation_mode=mode, cubic_coeff_a=a,
                                  exclude_outside=exclude))
                outs.append(f"y{i}")
    i = len(outs)
    inits["sz"] = np.array([1, 2, 11, 4], np.int64)  # sizes, align_corners
    nodes.append(node("Resize", ["x", "", "", "sz"], [f"y{i}"], mode="cubic",
                      coordinate_transformation_mode="align_corners"))
    outs.append(f"y{i}")
    m = model(nodes, {"x": x}, outs, inits, opset=19)
    g, out, _ = check_ops(m, {"x": x}, l1_budget=8000)
    ref = dict(zip(outs, ReferenceEvaluator(m).run(None, {"x": x})))
    for k in outs:  # the onnx package's reference, float64 weights
        assert np.abs(out[k] - ref[k]).max() <= 2e-5 * np.abs(ref[k]).max(), k
    assert {info.ops for info in g.layers} <= {"Resize", "Resize (rows last)",
                                               "Resize (rows back)"}


@pytest.mark.slow
def test_one_axis_alone_and_a_fused_relu():
    """A scale of 1 on the rows (half_pixel keeps them): only the column product, with the
    Relu after it fused."""
    x = RNG.normal(size=(2, 3, 4, 5)).astype(np.float32)
    m = model([node("Resize", ["x", "", "s"], ["r"], mode="cubic"), node("Relu", ["r"], ["y"])],
              {"x": x}, ["y"], {"s": np.array([1, 1, 1, 2.5], np.float32)}, opset=19)
    g, out, _ = check_ops(m, {"x": x})
    assert [info.ops for info in g.layers] == ["Resize+Relu"]
    assert (out["y"] >= 0).all() and (out["y"] > 0).mean() > 0.3


def test_antialias_and_integer_data_are_refused():
    x = RNG.normal(size=(1, 1, 4, 4)).astype(np.float32)
    s = {"s": np.array([1, 1, 0.5, 0.5], np.float32)}
    m = model([node("Resize", ["x", "", "s"], ["y"], mode="cubic", antialias=1)], {"x": x},
              ["y"], s, opset=19)
    with pytest.raises(ModelError, match="antialias=1"):
        npukit.onnx.load(m)
    q = RNG.integers(-9, 9, size=(1, 1, 4, 4)).astype(np.int8)
    m = model([node("Resize", ["x", "", "s"], ["y"], mode="cubic")], {"x": q}, ["y"], s,
              opset=19)
    with pytest.raises(ModelError, match="cubic resizing of int8 data"):
        npukit.onnx.load(m)
