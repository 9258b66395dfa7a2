"""Shape and constant handling as ONNX Runtime does it: shape computations on static shapes
and constants are folded (again after shapes inferred from folded values become known),
graph inputs that only select a shape are given as ``constants=``, and a shape operand that
is not a constant is refused with one line naming the node, the operand and its inputs."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402
from onnx_helpers import against_ort, model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402
from npukit.onnx.check import ort_run  # noqa: E402

RNG = np.random.default_rng(21)
X = RNG.normal(size=(1, 3, 4, 5)).astype(np.float32)


def i64(*v):
    return np.array(v, np.int64)


# -- shape computations folded ----------------------------------------------------------------

CHAINS = {
    # PyTorch's flatten: Shape -> Gather -> Unsqueeze -> Concat -> Reshape
    "flatten": ([node("Shape", ["x"], ["s"]), node("Gather", ["s", "zero"], ["n"], axis=0),
                 node("Unsqueeze", ["n", "ax0"], ["nu"]),
                 node("Concat", ["nu", "m1"], ["shape"], axis=0),
                 node("Reshape", ["x", "shape"], ["y"])],
                {"zero": np.array(0, np.int64), "ax0": i64(0), "m1": i64(-1)}, (1, 60)),
    "shape_slices_and_product": ([node("Shape", ["x"], ["s"], start=2),
                                  node("ReduceProd", ["s"], ["p"], keepdims=1),
                                  node("Shape", ["x"], ["s01"], end=2),
                                  node("Concat", ["s01", "p"], ["shape"], axis=0),
                                  node("Reshape", ["x", "shape"], ["y"])], {}, (1, 3, 20)),
    "constant_of_shape": ([node("Shape", ["x"], ["s"]),
                           node("ConstantOfShape", ["s"], ["c"],
                                value=nh.from_array(np.array([0.5], np.float32))),
                           node("Add", ["x", "c"], ["y"])], {}, (1, 3, 4, 5)),
    "range_cast_arithmetic": ([node("Range", ["r0", "r1", "r2"], ["r"]),
                               node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
                               node("Div", ["rf", "four"], ["rd"]),
                               node("Mul", ["x", "rd"], ["y"])],
                              {"r0": np.array(0, np.int64), "r1": np.array(5, np.int64),
                               "r2": np.array(1, np.int64), "four": np.array(4, np.float32)},
                              (1, 3, 4, 5)),
    "squeeze_and_slice_of_shape": ([node("Shape", ["x"], ["s"]),
                                    node("Slice", ["s", "st", "en"], ["hw"]),
                                    node("Squeeze", ["x", "ax0"], ["xs"]),
                                    node("Concat", ["c3", "hw"], ["shape"], axis=0),
                                    node("Reshape", ["xs", "shape"], ["y"])],
                                   {"st": i64(2), "en": i64(4), "c3": i64(3), "ax0": i64(0)},
                                   (3, 4, 5)),
    "expand_to_shape": ([node("Shape", ["x"], ["s"]), node("Expand", ["b", "s"], ["e"]),
                         node("Mul", ["x", "e"], ["y"])],
                        {"b": RNG.normal(size=(3, 1, 1)).astype(np.float32)}, (1, 3, 4, 5)),
}


@pytest.mark.parametrize("case", sorted(CHAINS))
def test_shape_computations_on_static_shapes_are_folded(case):
    """No layer computes a shape: what is left is the data path, as ONNX Runtime gives it."""
    nodes, inits, shape = CHAINS[case]
    m = model(nodes, {"x": X}, ["y"], inits)
    g, _, outs = against_ort(m, {"x": X}, backends=("sim", "c"))
    assert outs["c"]["y"].shape == shape
    assert all(set(info.ops.split("+")) <= {"Copy", "Add", "Mul"} for info in g.layers)


def test_a_shape_known_only_after_folding_is_folded_in_a_second_round():
    """ONNX shape inference loses the shape of ``r`` (its Reshape target goes through an
    Identity), so ``Shape(r)`` folds only once the folded target is an initializer."""
    x = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    w = RNG.normal(size=(2, 12)).astype(np.float32)
    nodes = [node("Shape", ["x"], ["s"]), node("Identity", ["s"], ["si"]),
             node("Slice", ["si", "z", "one"], ["s0"]),
             node("Concat", ["s0", "m1"], ["shp"], axis=0),
             node("Reshape", ["x", "shp"], ["r"]),
             node("Shape", ["r"], ["rs"]), node("Reshape", ["w", "rs"], ["wr"]),
             node("Add", ["r", "wr"], ["y"])]
    m = model(nodes, {"x": x}, ["y"], {"z": i64(0), "one": i64(1), "m1": i64(-1), "w": w})
    typed = onnx.shape_inference.infer_shapes(m, data_prop=True)
    r = next(v for v in typed.graph.value_info if v.name == "r")
    assert not r.type.tensor_type.shape.dim[0].HasField("dim_value")  # onnx gave up
    g, _, outs = against_ort(m, {"x": x}, backends=("sim", "c"))
    assert [info.ops for info in g.layers] == ["Add"]
    assert np.array_equal(outs["c"]["y"], x.reshape(2, 12) + w)


def test_a_weight_given_to_shape_inference_without_its_values_keeps_its_shape_and_values():
    """Shape inference gets large float weights as type and dims only: a Reshape target
    taken from such a weight's shape is still inferred, and the weight's values are the
    model's."""
    from npukit.onnx.reader import SHAPE_ONLY_ELEMENTS

    x = RNG.normal(size=(4, 512)).astype(np.float32)
    w = RNG.normal(size=(32, 64)).astype(np.float32)
    assert w.size > SHAPE_ONLY_ELEMENTS
    nodes = [node("Shape", ["w"], ["s"]), node("Reshape", ["x", "s"], ["r"]),
             node("Add", ["r", "w"], ["y"])]
    m = model(nodes, {"x": x}, ["y"], {"w": w})
    _, _, outs = against_ort(m, {"x": x}, backends=("sim", "c"))
    assert np.array_equal(outs["c"]["y"], x.reshape(32, 64) + w)


def test_castlike_of_a_constant_takes_the_type_of_a_computed_tensor():
    """CastLike reads only its target's type: a constant cast like a computed tensor folds."""
    m = model([node("Relu", ["x"], ["r"]), node("CastLike", ["half", "r"], ["h"]),
               node("Mul", ["r", "h"], ["y"])], {"x": X}, ["y"],
              {"half": np.array(0.5, np.float64)})
    g, _, outs = against_ort(m, {"x": X})
    assert np.array_equal(outs["c"]["y"], np.maximum(X, 0) * np.float32(0.5))
    assert [info.ops for info in g.layers] == ["Relu", "Mul"]


# -- graph inputs that select a shape ----------------------------------------------------------

def with_inputs(nodes, data: dict, outputs: list[str], inits=None) -> onnx.ModelProto:
    """A model whose graph inputs are typed from ``data`` (int64 ones included)."""
    types = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("int64"): TensorProto.INT64}
    g = h.make_graph(nodes, "m", [h.make_tensor_value_info(k, types[v.dtype], v.shape)
                                  for k, v in data.items()],
                     [onnx.ValueInfoProto(name=o) for o in outputs],
                     [nh.from_array(v, k) for k, v in (inits or {}).items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)])


OPERANDS = {
    "Reshape": (node("Reshape", ["x", "shape"], ["y"], name="rs"), {"shape": i64(3, 20)},
                "shape", (3, 20)),
    "Unsqueeze": (node("Unsqueeze", ["x", "axes"], ["y"], name="un"), {"axes": i64(0, -1)},
                  "axes", (1, 1, 3, 4, 5, 1)),
    "Squeeze": (node("Squeeze", ["x", "axes"], ["y"], name="sq"), {"axes": i64(0)}, "axes",
                (3, 4, 5)),
    "Pad": (node("Pad", ["x", "pads"], ["y"], name="pd"), {"pads": i64(0, 0, 1, 2, 0, 0, 0, 1)},
            "pads", (1, 3, 5, 8)),
}


@pytest.mark.parametrize("op", sorted(OPERANDS))
def test_a_shape_operand_given_as_a_graph_input_is_taken_from_constants(op):
    n, given, operand, shape = OPERANDS[op]
    (name, value), = given.items()
    m = with_inputs([n], {"x": X, **given}, ["y"])
    assert npukit.onnx.shape_operands(m) == [name]
    with pytest.raises(ModelError, match=rf"^node '{n.name}' \({op}\): its {operand} "
                                         rf"'{name}' must be a constant to plan the node; it is "
                                         rf"the graph input '{name}': give '{name}' to "
                                         rf"npukit.onnx.load\(\.\.\., constants=\.\.\.\) if "
                                         rf"fixed$"):
        npukit.onnx.load(m)
    ref, _ = ort_run(m, {"x": X, **given})
    g = npukit.onnx.load(m, constants=given)
    assert list(g.inputs) == ["x"]
    for backend in ("sim", "c"):
        y = np.full(shape, np.nan, np.float32)  # canary: every element must be written
        g.run(backend, x=X, y=y)
        assert y.shape == ref["y"].shape and np.array_equal(y, ref["y"])


def test_an_input_reaching_a_shape_operand_through_arithmetic_only_selects_a_shape():
    """``n`` becomes the Reshape target through Add and Concat: it only selects a shape;
    ``x`` feeds the data and is not listed."""
    m = with_inputs([node("Add", ["n", "one"], ["n1"]),
                     node("Concat", ["n1", "m1"], ["shape"], axis=0),
                     node("Reshape", ["x", "shape"], ["y"], name="rs")],
                    {"x": X, "n": i64(2)}, ["y"], {"one": i64(1), "m1": i64(-1)})
    assert npukit.onnx.shape_operands(m) == ["n"]
    with pytest.raises(ModelError, match=r"^node 'rs' \(Reshape\): its shape 'shape' must be a "
                                         r"constant to plan the node; it is computed from the "
                                         r"graph inputs \['n'\]: give 'n' to"):
        npukit.onnx.load(m)
    g = npukit.onnx.load(m, constants={"n": i64(2)})
    res = g.run("c", x=X)
    assert np.array_equal(res.outputs["y"], X.reshape(3, 20))


def test_an_input_read_as_data_too_is_no_shape_operand():
    """``s`` is both a Reshape target and added to the data: npukit does not list it, and the
    refusal names it as the graph input the shape comes from."""
    m = with_inputs([node("Reshape", ["x", "s"], ["r"], name="rs"),
                     node("Cast", ["s"], ["sf"], to=TensorProto.FLOAT),
                     node("Add", ["r", "sf"], ["y"])],
                    {"x": X, "s": i64(3, 20)}, ["y"])
    assert npukit.onnx.shape_operands(m) == []
    with pytest.raises(ModelError, match=r"^node 'rs' \(Reshape\): its shape 's' must be a "
                                         r"constant"):
        npukit.onnx.load(m)


def test_a_pad_value_given_as_a_graph_input_is_refused_naming_the_node():
    """It used to be a KeyError."""
    m = with_inputs([node("Pad", ["x", "pads", "v"], ["y"], name="pd")],
                    {"x": X, "v": np.array(1.5, np.float32)}, ["y"],
                    {"pads": i64(0, 0, 1, 1, 0, 0, 1, 1)})
    assert npukit.onnx.shape_operands(m) == []
    with pytest.raises(ModelError, match=r"^node 'pd' \(Pad\): its constant_value 'v' must be a "
                                         r"constant to plan the node; it is the graph input 'v'"):
        npukit.onnx.load(m)


def test_weights_and_scales_given_as_graph_inputs_are_constant_operands():
    """ONNX's node tests feed a Conv's weights and a QuantizeLinear's scale as graph inputs;
    npukit compiles them in, so it lists them, refuses them without values naming the
    operand, and runs with them given as constants as ONNX Runtime runs them (a Clip bound
    given as an input stays a run-time input of its Clip layer)."""
    w = RNG.normal(size=(2, 3, 3, 3)).astype(np.float32)
    feeds = {"x": X, "w": w, "b": np.array([0.5, -0.25], np.float32),
             "lo": np.array(-0.5, np.float32), "s": np.array(0.02, np.float32),
             "shape": i64(1, -1)}
    nodes = [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             node("Clip", ["c", "lo"], ["k"]), node("Reshape", ["k", "shape"], ["f"]),
             node("QuantizeLinear", ["f", "s"], ["y"])]
    m = with_inputs(nodes, feeds, ["y"], {})
    assert npukit.onnx.constant_operands(m) == ["w", "b", "s", "shape"]
    assert npukit.onnx.shape_operands(m) == ["shape"]
    fixed = {k: v for k, v in feeds.items() if k not in ("x", "lo")}
    with pytest.raises(ModelError, match=r"^node 'conv' \(Conv\): its weights 'w' must be a "
                                         r"constant to plan the node; it is the graph input 'w'"):
        npukit.onnx.load(m, constants={k: v for k, v in fixed.items() if k != "w"})
    g = npukit.onnx.load(m, constants=fixed)
    assert list(g.inputs) == ["x", "lo"]
    want, _ = ort_run(m, feeds)
    out = g.run("c", x=X, lo=feeds["lo"]).outputs["y"]
    assert out.dtype == np.uint8 and len(np.unique(out)) > 10
    assert np.abs(out.astype(int) - want["y"]).max() <= 1  # the check's 1 LSB
    assert out.tobytes() == g.run("sim", x=X, lo=feeds["lo"]).outputs["y"].tobytes()


@pytest.mark.parametrize("constants, message", [
    ({"nope": i64(3, 20)}, r"constants names 'nope', which is not an input of the model "
                           r"\(x, shape\)"),
    ({"shape": np.array([3, 20], np.int32)}, r"constants\['shape'\]: int32 values, the "
                                             r"model's input is int64"),
    ({"shape": i64(3, 4, 5)}, r"constants\['shape'\]: shape \[3\], the model's input has \[2\]"),
])
def test_constants_that_do_not_match_the_model_are_refused(constants, message):
    m = with_inputs([node("Reshape", ["x", "shape"], ["y"])], {"x": X, "shape": i64(3, 20)},
                    ["y"])
    with pytest.raises(ModelError, match=f"^{message}$"):
        npukit.onnx.load(m, constants=constants)


def test_a_node_without_inputs_is_no_crash_while_folding():
    """A SequenceEmpty (no inputs) once crashed the check of what folding would allocate; the
    sequence now resolves to its one tensor, and another node without inputs is refused in
    one line."""
    m = h.make_model(h.make_graph(
        [node("SequenceEmpty", [], ["seq"], dtype=TensorProto.FLOAT),
         node("SequenceInsert", ["seq", "x"], ["s2"]), node("SequenceAt", ["s2", "zero"], ["y"])],
        "m", [h.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [nh.from_array(np.array(0, np.int64), "zero")]), opset_imports=[h.make_opsetid("", 18)])
    x = np.array([1.5, -2.25], np.float32)
    assert npukit.onnx.load(m).run("c", x=x).outputs["y"].tobytes() == x.tobytes()
    m = h.make_model(h.make_graph(
        [node("RandomNormal", [], ["r"], shape=[2]), node("Add", ["r", "x"], ["y"])],
        "m", [h.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, [2])]),
        opset_imports=[h.make_opsetid("", 18)])
    with pytest.raises(ModelError) as e:
        npukit.onnx.load(m)
    assert "\n" not in str(e.value) and "(RandomNormal): draws new random numbers" in str(e.value)
