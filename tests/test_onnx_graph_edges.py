"""Graph shapes models written elsewhere have: outputs written by Identity, Dropout or
Constant, unused optional outputs, IR version 3 (initializers listed as graph inputs),
Clip bounds that are not constants, QOperator models ending in a softmax, and empty
tensors. Each is run against ONNX Runtime or refused with one line naming the node."""

import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402
from onnx_helpers import MS, against_ort, model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402

RNG = np.random.default_rng(20)


def randn(*shape):
    return RNG.normal(size=shape).astype(np.float32)


# -- graph outputs written by aliases and constants ---------------------------------------------

@pytest.mark.parametrize("op", ["Identity", "Dropout"])
def test_a_graph_output_written_by_identity_or_dropout(op):
    """The output's producer writes it (the tensor it renames is read by nothing else)."""
    x = randn(1, 3, 6, 6)
    m = model([node("Relu", ["x"], ["y"]), node(op, ["y"], ["r"])], {"x": x}, ["r"])
    g, _, outs = against_ort(m, {"x": x}, backends=("sim", "c"))
    assert np.array_equal(outs["c"]["r"], np.maximum(x, 0))
    assert [i.ops for i in g.layers] == ["Relu"]


def test_the_tensor_an_identity_output_renames_still_feeds_its_readers():
    x = randn(1, 3, 6, 6)
    m = model([node("Relu", ["x"], ["y"]), node("Identity", ["y"], ["r"]),
               node("Add", ["y", "y"], ["s"])], {"x": x}, ["r", "s"])
    g, _, outs = against_ort(m, {"x": x}, backends=("sim", "c"))
    assert [i.ops for i in g.layers] == ["Relu", "Add"]


def test_an_identity_output_between_conv_and_batchnorm_keeps_the_convolution():
    """The convolution's output is a graph output: BatchNormalization is not folded into it."""
    x = randn(1, 2, 5, 5)
    bn = {"sc": randn(3) + 2, "b": randn(3), "mu": randn(3), "var": np.abs(randn(3)) + 0.5}
    m = model([node("Conv", ["x", "w"], ["c"]), node("Identity", ["c"], ["r"]),
               node("BatchNormalization", ["c", "sc", "b", "mu", "var"], ["y"])],
              {"x": x}, ["r", "y"], {"w": randn(3, 2, 3, 3), **bn})
    against_ort(m, {"x": x})


def test_a_chain_of_identities_to_a_graph_output():
    x = randn(2, 8)
    m = model([node("Sigmoid", ["x"], ["y"]), node("Identity", ["y"], ["a"]),
               node("Dropout", ["a"], ["r"]), node("Relu", ["x"], ["s"])],
              {"x": x}, ["r", "s"])
    g, _, outs = against_ort(m, {"x": x}, backends=("sim", "c"))
    assert [i.ops for i in g.layers] == ["Sigmoid", "Relu"]
    assert np.allclose(outs["c"]["r"], 1 / (1 + np.exp(-x.astype(np.float64))), rtol=1e-6)


def test_a_graph_output_written_by_constant_is_its_value():
    x = randn(1, 4)
    c = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    m = model([node("Constant", [], ["r"], value=nh.from_array(c, "v")),
               node("Relu", ["x"], ["y"])], {"x": x}, ["r", "y"])
    g, _, outs = against_ort(m, {"x": x}, backends=("sim", "c"))
    assert g.outputs["r"].shape == (2, 3)
    assert np.array_equal(outs["c"]["r"], c)


@pytest.mark.parametrize("names", [["y", "z"], ["z", "y"]])
def test_two_graph_outputs_naming_the_same_tensor(names):
    """``y`` and ``Identity(y)`` both graph outputs, in either order: the layer writes one,
    a copy the other, from the first output's bytes."""
    x = randn(2, 8)
    m = model([node("Relu", ["x"], ["y"]), node("Identity", ["y"], ["z"])], {"x": x}, names)
    g, _, outs = against_ort(m, {"x": x}, backends=("sim", "c"))
    for k in names:
        assert np.array_equal(outs["c"][k], np.maximum(x, 0))
    assert [i.ops for i in g.layers] == ["Relu", "Copy"]


def test_two_identity_outputs_of_one_tensor_and_of_a_graph_input():
    """Two Identity outputs of one computed tensor, and a graph input that is also an
    output through Identity."""
    x = randn(2, 8)
    m = model([node("Relu", ["x"], ["y"]), node("Identity", ["y"], ["a"]),
               node("Identity", ["y"], ["b"]), node("Identity", ["x"], ["xi"])],
              {"x": x}, ["a", "b", "xi"])
    _, _, outs = against_ort(m, {"x": x}, backends=("sim", "c"))
    assert np.array_equal(outs["c"]["a"], np.maximum(x, 0))
    assert np.array_equal(outs["c"]["b"], outs["c"]["a"])
    assert np.array_equal(outs["c"]["xi"], x)


# -- Clip bounds ---------------------------------------------------------------------------------

def test_clip_bounds_as_graph_inputs_are_one_clip_layer():
    x = randn(1, 8)
    inputs = {"x": x, "lo": np.array(-0.5, np.float32), "hi": np.array(0.5, np.float32)}
    m = model([node("Clip", ["x", "lo", "hi"], ["y"], name="clip")], inputs, ["y"])
    g, _, outs = against_ort(m, inputs, backends=("sim", "c"))
    assert np.array_equal(outs["c"]["y"], np.clip(x, -0.5, 0.5))
    assert [info.ops for info in g.layers] == ["Clip"]


def test_clip_bounds_as_initializers_are_taken():
    x = randn(1, 8)
    m = model([node("Clip", ["x", "lo", "hi"], ["y"])], {"x": x}, ["y"],
              {"lo": np.array(-0.5, np.float32), "hi": np.array(0.5, np.float32)})
    _, _, outs = against_ort(m, {"x": x})
    assert np.array_equal(outs["c"]["y"], np.clip(x, -0.5, 0.5))


# -- unused optional outputs ---------------------------------------------------------------------

@pytest.mark.parametrize("opset", [7, 9, 10])
def test_an_unused_dropout_mask_needs_no_shape(opset):
    """Before opset 10 ONNX shape inference gives Dropout's mask no shape (SqueezeNet, AlexNet
    and VGG from the model zoos have one nothing reads)."""
    x = randn(1, 2, 6, 6)
    m = model([node("Conv", ["x", "w"], ["c"]), node("Dropout", ["c"], ["d", "mask"], ratio=0.5),
               node("Relu", ["d"], ["y"])], {"x": x}, ["y"], {"w": randn(3, 2, 3, 3)},
              opset=opset)
    g, _, _ = against_ort(m, {"x": x})
    assert [i.ops for i in g.layers] == ["Conv+Relu"]



# -- QOperator models ending in a softmax ----------------------------------------------------

def qlinear_softmax(dt, opset: int, attr_opset: int) -> onnx.ModelProto:
    x = np.zeros((2, 10), dt)
    n = h.make_node("QLinearSoftmax", ["x", "xs", "xz", "ys", "yz"], ["y"], name="sm",
                    domain="com.microsoft", opset=attr_opset, axis=-1 if opset >= 13 else 1)
    zy = np.array(np.iinfo(dt).min, dt)
    m = model([n], {"x": x}, ["y"], {"xs": np.float32(0.07), "xz": np.array(3, dt),
                                     "ys": np.float32(1 / 256), "yz": zy},
              opset=opset, extra_opsets=[MS])
    et = TensorProto.UINT8 if dt == np.uint8 else TensorProto.INT8
    m.graph.output[0].CopyFrom(h.make_tensor_value_info("y", et, x.shape))
    return m


@pytest.mark.parametrize("dt,opset", [(np.uint8, 13), (np.int8, 13), (np.uint8, 11)])
def test_qlinear_softmax_is_bit_exact(dt, opset):
    x = RNG.integers(np.iinfo(dt).min, np.iinfo(dt).max, (2, 10), dtype=dt, endpoint=True)
    g, stats, _ = against_ort(qlinear_softmax(dt, opset, opset), {"x": x},
                              backends=("sim", "c"))
    assert stats["c"]["y"].exact == 1.0
    assert [i.ops for i in g.layers] == ["QLinearSoftmax"]


def test_qlinear_softmax_with_another_opsets_axis_semantics_is_refused():
    with pytest.raises(ModelError, match=r"^node 'sm' \(QLinearSoftmax\): opset=11 in a model "
                                         r"of opset 13"):
        npukit.onnx.load(qlinear_softmax(np.uint8, 13, 11))


def test_a_qoperator_model_from_quantize_static_ending_in_softmax(tmp_path):
    """ONNX Runtime's quantization tool in its QOperator format writes QLinearSoftmax."""
    import logging

    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    x = randn(1, 2, 6, 6)
    m = model([node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
               node("Relu", ["c"], ["r"]), node("Flatten", ["r"], ["f"]),
               node("Gemm", ["f", "wg", "bg"], ["g"], transB=1),
               node("Softmax", ["g"], ["y"], axis=-1)], {"x": x}, ["y"],
              {"w": randn(3, 2, 3, 3) * 0.3, "b": randn(3) * 0.1, "wg": randn(10, 108) * 0.2,
               "bg": randn(10)}, opset=13)

    class Calibration(CalibrationDataReader):
        def __init__(self):
            self.data = iter([{"x": randn(1, 2, 6, 6)} for _ in range(8)])

        def get_next(self):
            return next(self.data, None)

    logging.getLogger().setLevel(logging.ERROR)  # the tool's advice to pre-process
    onnx.save(m, tmp_path / "float.onnx")
    quantize_static(str(tmp_path / "float.onnx"), str(tmp_path / "q.onnx"), Calibration(),
                    quant_format=QuantFormat.QOperator, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8)
    q = onnx.load(tmp_path / "q.onnx")
    assert "QLinearSoftmax" in [n.op_type for n in q.graph.node]
    g, stats, _ = against_ort(q, {"x": x}, backends=("sim", "c"))
    assert stats["c"]["y"].exact == 1.0
    assert "QLinearSoftmax" in [i.ops for i in g.layers]


# -- IR version 3: initializers listed as graph inputs ------------------------------------------

@pytest.mark.slow  # plans and runs a 26-layer model (~35 s)
def test_light_squeezenet_of_the_onnx_wheel_in_ir_version_3():
    """Its weights are initializers that are also graph inputs; after folding, shape
    inference still sees them (every Conv was 'shape unknown')."""
    from pathlib import Path

    from npukit.onnx.check import ort_run

    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    from onnx_light import with_random_weights

    path = Path(onnx.__file__).parent / "backend/test/data/light/light_squeezenet.onnx"
    if not path.exists():
        pytest.skip("this onnx wheel ships no light_squeezenet.onnx")
    m = with_random_weights(onnx.load(path), np.random.default_rng(0))
    assert m.ir_version == 3
    x = np.random.default_rng(1).uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)
    ref, _ = ort_run(m, {"data_0": x})
    g = npukit.onnx.load(m, l1_budget=48000, l2_budget=512 * 1024, l3_budget=64 << 20,
                         l3_flash_budget=1 << 30)
    out = np.full(g.outputs["softmaxout_1"].shape, np.nan, np.float32)  # canary
    g.run("c", data_0=x, softmaxout_1=out)
    r = ref["softmaxout_1"]
    assert np.abs(out - r).max() <= 1e-4 * np.abs(r).max()
    assert out.argmax() == r.argmax()


# -- empty tensors -----------------------------------------------------------------------------

def test_a_zero_dimension_in_input_shapes_is_refused_naming_the_input():
    m = model([node("Relu", ["x"], ["y"])], {"x": randn(1, 4, 8)}, ["y"])
    with pytest.raises(ModelError, match=r"^input 'x': input_shapes gives dimension 1 as 0 "
                                         r"\(\[1, 0, 8\]\), an empty tensor"):
        npukit.onnx.load(m, input_shapes={"x": (1, 0, 8)})


@pytest.mark.parametrize("case", ["reshape", "slice"])
def test_an_empty_intermediate_tensor_is_refused_naming_the_node(case):
    x = randn(1, 4, 8)
    first = {"reshape": (node("Reshape", ["x", "s"], ["y"], allowzero=1, name="n"),
                         {"s": np.array([0, 32], np.int64)}, r"\[0, 32\]"),
             "slice": (node("Slice", ["x", "s", "e", "a"], ["y"], name="n"),
                       {"s": np.array([2], np.int64), "e": np.array([2], np.int64),
                        "a": np.array([1], np.int64)}, r"\[1, 0, 8\]")}[case]
    m = model([first[0], node("Relu", ["y"], ["r"])], {"x": x}, ["r"], first[1])
    with pytest.raises(ModelError, match=rf"^node 'n' \({first[0].op_type}\): output 'y' has "
                                         rf"shape {first[2]}, an empty tensor"):
        npukit.onnx.load(m)


def test_an_empty_constant_graph_output_is_refused_naming_it():
    m = model([node("Constant", [], ["e"], value=nh.from_array(np.zeros((2, 0), np.float32))),
               node("Relu", ["x"], ["y"])], {"x": randn(1, 4)}, ["e", "y"])
    with pytest.raises(ModelError, match=r"^output 'e': a constant of shape \[2, 0\], an empty"):
        npukit.onnx.load(m)


def test_an_empty_initializer_a_concat_reads_adds_nothing():
    x = randn(1, 4, 8)
    m = model([node("Concat", ["x", "w"], ["y"], axis=1), node("Relu", ["y"], ["r"])],
              {"x": x}, ["r"], {"w": np.zeros((1, 0, 8), np.float32)})
    _, _, outs = against_ort(m, {"x": x}, backends=("sim", "c"))
    assert np.array_equal(outs["c"]["r"], np.maximum(x, 0))


# -- planning refusals name the ONNX nodes --------------------------------------------------------

def test_a_layer_the_planner_refuses_is_named_by_its_onnx_nodes():
    x = randn(1, 2, 6, 6)
    m = model([node("Conv", ["x", "w"], ["c"], name="conv"),
               node("Relu", ["c"], ["y"], name="act")], {"x": x}, ["y"], {"w": randn(4, 2, 3, 3)})
    with pytest.raises(npukit.NpukitError, match=r"^nodes 'conv', 'act' \(Conv\+Relu\), layer "
                                                 r"L0_Conv\w*: argument 'In' \(.*\) is larger "
                                                 r"than the largest memory of gap8"):
        npukit.onnx.load(m, input_shapes={"x": (1, 2, 2 ** 15, 2 ** 15)})
    one = model([node("Relu", ["x"], ["y"], name="r")], {"x": randn(1, 4)}, ["y"])
    with pytest.raises(npukit.NpukitError, match=r"^node 'r' \(Relu\), layer L0_Relu: "):
        npukit.onnx.load(one, input_shapes={"x": (1, 2 ** 31)})
