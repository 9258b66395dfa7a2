"""Models as PyTorch's ONNX exporters write them. The dynamo exporter (the default since
torch 2.9) writes ``adaptive_avg_pool2d(x, 1)`` as ``ReduceMean`` over the spatial axes,
the TorchScript one as ``GlobalAveragePool``: both import, the first as a global average
pooling. ONNX Runtime is the oracle; the "From PyTorch" example of docs/onnx.md runs when
torch is installed."""

import re
import runpy
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_helpers import against_ort, model, node  # noqa: E402

RNG = np.random.default_rng(27)


def test_reduce_mean_over_the_spatial_axes_is_a_global_average_pooling():
    # Opset 18: the axes are an input (here negative, as the dynamo exporter writes them).
    x = (RNG.normal(size=(1, 6, 7, 5)) * 3 + 1).astype(np.float32)
    inits = {"hw": np.array([-1, -2], np.int64), "hw2": np.array([2, 3], np.int64)}
    nodes = [node("ReduceMean", ["x", "hw"], ["keep"], keepdims=1),
             node("ReduceMean", ["x", "hw2"], ["flat"], keepdims=0),
             node("Relu", ["flat"], ["y"])]
    m = model(nodes, {"x": x}, ["keep", "y"], inits, opset=18)
    g, _, outs = against_ort(m, {"x": x}, ("c", "sim"))
    assert [info.ops for info in g.layers].count("GlobalAveragePool") == 2
    assert outs["c"]["keep"].shape == (1, 6, 1, 1) and outs["c"]["y"].shape == (1, 6)
    want = x.astype(np.float64).mean(axis=(2, 3))  # [1, 6]
    np.testing.assert_allclose(outs["c"]["keep"].reshape(1, 6), want, rtol=1e-6)
    np.testing.assert_allclose(outs["c"]["y"], np.maximum(want, 0), rtol=1e-6)
    # Opset 13: the axes are an attribute.
    m13 = model([node("ReduceMean", ["x"], ["y"], axes=[3, 2], keepdims=0)], {"x": x}, ["y"],
                opset=13)
    g, _, outs = against_ort(m13, {"x": x}, ("c",))
    assert [info.ops for info in g.layers] == ["GlobalAveragePool"]
    np.testing.assert_allclose(outs["c"]["y"], want, rtol=1e-6)


@pytest.mark.parametrize("keepdims", [1, 0])
def test_quantized_reduce_mean_runs_in_integers(keepdims):
    """DequantizeLinear -> ReduceMean -> QuantizeLinear: a QLinearGlobalAveragePool."""
    x = RNG.integers(0, 256, (1, 5, 6, 6)).astype(np.uint8)
    inits = {"xs": np.float32(0.04), "xz": np.uint8(120), "ys": np.float32(0.01),
             "yz": np.uint8(100), "hw": np.array([2, 3], np.int64)}
    nodes = [node("DequantizeLinear", ["x", "xs", "xz"], ["d"]),
             node("ReduceMean", ["d", "hw"], ["r"], keepdims=keepdims),
             node("QuantizeLinear", ["r", "ys", "yz"], ["y"])]
    m = model(nodes, {"x": x}, ["y"], inits, opset=18)
    g, stats, outs = against_ort(m, {"x": x}, ("c", "sim"))
    assert [info.ops for info in g.layers] == ["QGlobalAveragePool"]
    assert stats["c"]["y"].integer and stats["c"]["y"].exact >= 0.8
    mean = ((x.astype(np.float64) - 120) * 0.04).mean(axis=(2, 3)) / 0.01 + 100
    assert np.abs(outs["c"]["y"].reshape(5) - np.clip(np.round(mean), 0, 255).reshape(5)
                  ).max() <= 1


@pytest.mark.parametrize("shape,axes", [((1, 4, 5, 6), [1]), ((1, 4, 5, 6), [1, 2, 3]),
                                        ((1, 4, 6), [2]), ((1, 4, 5, 6), [])])
def test_other_reduce_means_are_reductions(shape, axes):
    x = RNG.normal(size=shape).astype(np.float32)
    inits = {"ax": np.array(axes, np.int64)} if axes else {}
    n = node("ReduceMean", ["x", "ax"] if axes else ["x"], ["y"], name="mean_1")
    g, _, outs = against_ort(model([n], {"x": x}, ["y"], inits, opset=18), {"x": x})
    assert [info.ops for info in g.layers] == ["ReduceMean"]
    want = x.astype(np.float64).mean(axis=tuple(axes) or None, keepdims=True)
    assert np.abs(outs["c"]["y"] - want).max() < 1e-6


@pytest.mark.slow
def test_the_pytorch_example_of_the_docs(tmp_path, monkeypatch):
    """docs/onnx.md's pytorch_cnn.py: both exporters, both models within 1e-4 of torch."""
    pytest.importorskip("torch")
    pytest.importorskip("onnxscript")  # the dynamo exporter's
    text = (Path(__file__).parent.parent / "docs" / "onnx.md").read_text()
    code = re.search(r"```python pytorch_cnn.py\n(.*?)```", text, re.S).group(1)
    (tmp_path / "pytorch_cnn.py").write_text(code)
    monkeypatch.chdir(tmp_path)
    ns = runpy.run_path("pytorch_cnn.py")
    import onnx

    ops = {p: [n.op_type for n in onnx.load(tmp_path / p).graph.node]
           for p in ("net.onnx", "net_legacy.onnx")}
    assert "ReduceMean" in ops["net.onnx"] and "GlobalAveragePool" in ops["net_legacy.onnx"]
    assert ns["errors"].keys() == {"net.onnx", "net_legacy.onnx"}
    assert max(ns["errors"].values()) <= 1e-4
