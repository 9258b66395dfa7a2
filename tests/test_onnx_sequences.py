"""ONNX sequences whose length and positions are known when the model is read: every
sequence operator becomes the tensor operators it selects, checked against ONNX Runtime with
poisoned outputs, simulator == C; what cannot be resolved is refused by name."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ops_helpers import check_ops, model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402

RNG = np.random.default_rng(31)


def _with_int64_inputs(m, values: dict):
    """``m`` with the initializers named in ``values`` made int64 scalar graph inputs."""
    from onnx import TensorProto, helper

    keep = [t for t in m.graph.initializer if t.name not in values]
    del m.graph.initializer[:]
    m.graph.initializer.extend(keep)
    m.graph.input.extend(helper.make_tensor_value_info(k, TensorProto.INT64, [])
                         for k in values)
    return m


def _xyz(*shapes):
    return {k: RNG.normal(size=s).astype(np.float32) for k, s in zip("xyz", shapes)}


@pytest.mark.slow
@pytest.mark.parametrize("pos_at", [0, 1, 2, 3, -1, -4])
def test_insert_then_at_chooses_the_tensor_onnx_runtime_chooses(pos_at):
    ins = _xyz((2, 3), (1, 3), (3, 3))
    nodes = [node("SequenceEmpty", [], ["s0"], dtype=1),
             node("SequenceInsert", ["s0", "x"], ["s1"]),
             node("SequenceInsert", ["s1", "y"], ["s2"]),
             node("SequenceInsert", ["s2", "z", "p"], ["s3"]),
             node("SequenceInsert", ["s3", "y", "q"], ["s4"]),
             node("SequenceAt", ["s4", "a"], ["t"]), node("Relu", ["t"], ["out"])]
    inits = {"p": np.array(1, np.int64), "q": np.array(-1, np.int64),
             "a": np.array(pos_at, np.int64)}
    m = model(nodes, ins, ["out"], inits)
    _, c, ref = check_ops(m, ins)
    # s4 is [x, z, y, y]: checked without ONNX Runtime too
    order = [ins["x"], ins["z"], ins["y"], ins["y"]]
    np.testing.assert_array_equal(c["out"], np.maximum(order[pos_at], 0))


@pytest.mark.slow
def test_erase_construct_and_positions_given_as_constants():
    ins = _xyz((2, 4), (2, 4), (2, 4))
    nodes = [node("SequenceConstruct", ["x", "y", "z"], ["s1"]),
             node("SequenceErase", ["s1", "e"], ["s2"]),
             node("SequenceErase", ["s2"], ["s3"]),  # no position: the last
             node("SequenceAt", ["s3", "a"], ["t"]), node("Neg", ["t"], ["out"])]
    for e, want in ((0, "y"), (1, "x"), (-3, "y")):
        pos = {"e": np.array(e, np.int64), "a": np.array(0, np.int64)}
        m = _with_int64_inputs(model(nodes, ins, ["out"], pos), pos)
        assert npukit.onnx.shape_operands(m) == ["e", "a"]
        g = npukit.onnx.load(m, constants=pos)
        assert g.unused == tuple(k for k in "xyz" if k != want)
        out = g.run("c", **ins).outputs["out"]  # unused inputs are taken and ignored
        np.testing.assert_array_equal(out, -ins[want])
        assert out.tobytes() == g.run("sim", **ins).outputs["out"].tobytes()


@pytest.mark.parametrize("axis,new_axis", [(1, 0), (0, 0), (-1, 1), (0, 1), (1, 1)])
def test_concat_from_sequence_concatenates_or_stacks(axis, new_axis):
    ins = _xyz((2, 3, 4), (2, 3, 4), (2, 3, 4))
    nodes = [node("SequenceConstruct", ["x", "y", "z"], ["s"]),
             node("ConcatFromSequence", ["s"], ["out"], axis=axis, new_axis=new_axis)]
    _, c, _ = check_ops(model(nodes, ins, ["out"]), ins)
    parts = [ins[k] for k in "xyz"]
    want = np.stack(parts, axis) if new_axis else np.concatenate(parts, axis)
    np.testing.assert_array_equal(c["out"], want)


@pytest.mark.slow
@pytest.mark.parametrize("opset", [11, 17])
@pytest.mark.parametrize("split,keepdims,axis", [(None, 1, 0), (None, 0, 1), (2, 1, 1),
                                                  ([1, 3, 1], 1, 1), (None, 0, -1)])
def test_split_to_sequence_then_at_and_concat(opset, split, keepdims, axis):
    x = RNG.normal(size=(3, 5, 2)).astype(np.float32)
    inits = {} if split is None else {"sp": np.array(split, np.int64)}
    nodes = [node("SplitToSequence", ["x", *(["sp"] if split is not None else [])], ["s"],
                  axis=axis, keepdims=keepdims),
             node("SequenceAt", ["s", "a"], ["first"]),
             node("SequenceAt", ["s", "b"], ["last"]),
             node("ConcatFromSequence", ["s"], ["whole"], axis=axis,
                  new_axis=int(split is None and not keepdims))]
    inits.update(a=np.array(0, np.int64), b=np.array(-1, np.int64))
    _, c, _ = check_ops(model(nodes, {"x": x}, ["first", "last", "whole"], inits, opset=opset),
                        {"x": x})
    np.testing.assert_array_equal(c["whole"], x)  # cut and glued back: the same tensor
    ax = axis % 3
    if split is None:
        first = np.take(x, [0], axis=ax) if keepdims else np.take(x, 0, axis=ax)
    else:
        first = np.take(x, range(split if np.ndim(split) == 0 else split[0]), axis=ax)
    np.testing.assert_array_equal(c["first"], first)


def test_what_cannot_be_resolved_is_refused_by_name():
    x = RNG.normal(size=(2, 3)).astype(np.float32)
    seq_out = model([node("SequenceConstruct", ["x", "x"], ["s"])], {"x": x}, [])
    seq_out.graph.output.add().name = "s"
    with pytest.raises(ModelError, match=r"output 's' is a sequence of tensors"):
        npukit.onnx.load(seq_out)
    p = {"p": np.array(0, np.int64)}
    at = _with_int64_inputs(model([node("SequenceConstruct", ["x", "x"], ["s"]),
                                   node("SequenceAt", ["s", "p"], ["y"])], {"x": x}, ["y"], p), p)
    with pytest.raises(ModelError, match=r"node 'SequenceAt' \(SequenceAt\): its position 'p' "
                                         r"must be a constant.*constants="):
        npukit.onnx.load(at)
    with pytest.raises(ModelError, match=r"position 2 is outside -2..1 for a sequence of 2"):
        npukit.onnx.load(at, constants={"p": np.array(2, np.int64)})


def test_a_sequence_input_is_no_constant_operand_and_not_taken_as_one():
    """A sequence graph input (ONNX's expanded SequenceMap cases) feeding a Loop's trip
    count is not listed, and given as a constant it is refused in one line (it used to be
    numpy's ValueError on the ragged list)."""
    from onnx import TensorProto, helper

    seq = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)
    g = helper.make_graph([node("SequenceLength", ["s"], ["n"])], "m", [seq],
                          [helper.make_tensor_value_info("n", TensorProto.INT64, [])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    assert npukit.onnx.constant_operands(m) == [] and npukit.onnx.shape_operands(m) == []
    ragged = [np.zeros(2, np.float32), np.zeros(3, np.float32)]
    with pytest.raises(ModelError, match=r"^constants\['s'\]: the model's input is a "
                                         r"sequence_type, not a tensor"):
        npukit.onnx.load(m, constants={"s": ragged})
