"""Operators npukit has no layer for, expanded into their ONNX function bodies when the model
is read (and the model's own local functions inlined): checked against ONNX Runtime with
poisoned outputs and against numpy float64, simulator == C."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto  # noqa: E402
from onnx import helper as h  # noqa: E402
from ops_helpers import check_ops, model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402

RNG = np.random.default_rng(41)


@pytest.mark.slow
@pytest.mark.parametrize("axis", [-1, 1])
def test_rms_normalization_runs_as_its_function_body(axis):
    x = RNG.normal(size=(2, 3, 8)).astype(np.float32) * 3
    scale = RNG.uniform(0.5, 1.5, size=(3, 8)[axis:] if axis == 1 else (8,)).astype(np.float32)
    m = model([node("RMSNormalization", ["x", "s"], ["y"], axis=axis, epsilon=1e-5)],
              {"x": x}, ["y"], {"s": scale}, opset=23)
    g, c, _ = check_ops(m, {"x": x})
    axes = tuple(range(axis % 3, 3))
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 ** 2).mean(axis=axes, keepdims=True) + 1e-5) * scale
    np.testing.assert_allclose(c["y"], want, rtol=2e-6, atol=1e-6)
    assert all("RMSNormalization" not in info.ops for info in g.layers)


def test_an_attribute_left_to_its_default_reaches_the_body():
    """MeanVarianceNormalization's axes default to [0, 2, 3]; the onnx inliner alone drops
    a default the body refers to (normalizing over every axis instead)."""
    x = (RNG.normal(size=(2, 3, 4, 5)) + np.arange(3).reshape(1, 3, 1, 1)).astype(np.float32)
    m = model([node("MeanVarianceNormalization", ["x"], ["y"])], {"x": x}, ["y"], opset=13)
    _, c, _ = check_ops(m, {"x": x})
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=(0, 2, 3), keepdims=True)
    std = np.sqrt((x64 ** 2).mean(axis=(0, 2, 3), keepdims=True) - mean ** 2)
    np.testing.assert_allclose(c["y"], (x64 - mean) / (std + 1e-9), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_group_normalization_and_a_model_local_function():
    x = RNG.normal(size=(1, 6, 4, 4)).astype(np.float32)
    inits = {"sc": RNG.uniform(0.5, 1.5, 6).astype(np.float32),
             "bi": RNG.normal(size=6).astype(np.float32)}
    body = h.make_function("my.lib", "ScaledTanh", ["a"], ["b"],
                           [h.make_node("Tanh", ["a"], ["t"]),
                            h.make_node("Add", ["t", "t"], ["b"])],
                           [h.make_opsetid("", 21)])
    m = model([node("GroupNormalization", ["x", "sc", "bi"], ["n"], num_groups=3),
               h.make_node("ScaledTanh", ["n"], ["y"], domain="my.lib")],
              {"x": x}, ["y"], inits, opset=21, extra_opsets=[h.make_opsetid("my.lib", 1)])
    m.functions.append(body)
    m.graph.output[0].CopyFrom(h.make_tensor_value_info("y", TensorProto.FLOAT, x.shape))
    _, c, _ = check_ops(m, {"x": x})
    g = x.astype(np.float64).reshape(1, 3, 2 * 16)
    n = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    n = n.reshape(x.shape) * inits["sc"].reshape(1, 6, 1, 1) + inits["bi"].reshape(1, 6, 1, 1)
    np.testing.assert_allclose(c["y"], 2 * np.tanh(n), rtol=1e-5, atol=1e-5)


def test_an_operator_npukit_lowers_is_not_expanded():
    x = RNG.normal(size=(2, 8)).astype(np.float32)
    m = model([node("LayerNormalization", ["x", "s"], ["y"])], {"x": x}, ["y"],
              {"s": np.ones(8, np.float32)}, opset=17)
    g = npukit.onnx.load(m)
    assert [(info.ops, info.nodes) for info in g.layers] == [
        ("LayerNormalization", ("LayerNormalization_0",))]  # one layer, not its body


def test_a_random_operator_is_refused_not_expanded():
    x = RNG.uniform(size=(4,)).astype(np.float32)
    m = model([node("Bernoulli", ["x"], ["y"])], {"x": x}, ["y"], opset=15)
    with pytest.raises(ModelError, match=r"\(Bernoulli\): draws new random numbers"):
        npukit.onnx.load(m)


def test_a_window_whose_size_is_a_graph_input_is_planned_from_constants():
    """HannWindow's size selects its length: given as a constant, the window is its function
    body, folded."""
    from onnx import TensorProto

    m = h.make_model(h.make_graph(
        [h.make_node("HannWindow", ["n"], ["w"], periodic=0),
         h.make_node("Mul", ["w", "x"], ["y"])],
        "m", [h.make_tensor_value_info("n", TensorProto.INT64, []),
              h.make_tensor_value_info("x", TensorProto.FLOAT, [10])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, [10])]),
        opset_imports=[h.make_opsetid("", 17)])
    assert npukit.onnx.constant_operands(m) == ["n"]
    x = RNG.normal(size=10).astype(np.float32)
    g = npukit.onnx.load(m, constants={"n": np.array(10, np.int64)})
    out = g.run("c", x=x).outputs["y"]
    np.testing.assert_allclose(out, x * np.hanning(10), rtol=1e-6, atol=1e-6)
    assert out.tobytes() == g.run("sim", x=x).outputs["y"].tobytes()


def test_an_input_that_selects_a_shape_and_is_read_as_data_is_a_constant_operand():
    """A size that is both a Range's limit and a term of the values (a window written out):
    not only a shape operand, but npukit needs it as a constant all the same."""
    from onnx import TensorProto

    m = h.make_model(h.make_graph(
        [h.make_node("Range", ["zero", "n", "one"], ["r"]),
         h.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
         h.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
         h.make_node("Div", ["rf", "nf"], ["y"])],
        "m", [h.make_tensor_value_info("n", TensorProto.INT64, [])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [nh_scalar("zero", 0), nh_scalar("one", 1)]), opset_imports=[h.make_opsetid("", 17)])
    assert npukit.onnx.shape_operands(m) == [] and npukit.onnx.constant_operands(m) == ["n"]


def nh_scalar(name: str, v: int):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.array(v, np.int64), name)
