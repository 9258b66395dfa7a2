"""ONNX's rules where breaking them computed silently wrong results: the names npukit gives
written-out control flow never collide with the model's, a tensor written twice is refused,
a model-local function named like an ONNX operator loses to the operator (as in ONNX
Runtime), a loop whose body computes its condition is never run for the full trip count.
Checked against ONNX Runtime on the simulator and the C."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402
from onnx_helpers import against_ort  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402

F = TensorProto.FLOAT
X = np.array([1.0, -2.0, 3.5], np.float32)


def vi(name, shape, t=F):
    return h.make_tensor_value_info(name, t, shape)


def c(name, v):
    return nh.from_array(np.asarray(v, np.float32), name)


def test_names_of_a_written_out_branch_never_collide_with_the_models():
    """The branch's ``t`` would be written out as ``If__then__t``, a tensor the model already
    has (x + 100): ONNX Runtime gives (x + 1) + (x + 100) + ..."""
    then = h.make_graph([h.make_node("Add", ["x", "one"], ["t"]),
                         h.make_node("Add", ["t", "one"], ["u"])], "then", [], [vi("u", [3])])
    orelse = h.make_graph([h.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", [3])])
    g = h.make_graph(
        [h.make_node("Add", ["x", "hundred"], ["If__then__t"]),
         h.make_node("If", ["cond"], ["b"], then_branch=then, else_branch=orelse),
         h.make_node("Add", ["b", "If__then__t"], ["y"]),
         h.make_node("Identity", ["If__then__t"], ["If__then__u"]),
         h.make_node("Add", ["If__then__u", "y"], ["z"])],
        "m", [vi("x", [3])], [vi("y", [3]), vi("z", [3])],
        [c("one", 1.0), c("hundred", 100.0), nh.from_array(np.array(True), "cond")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    _, _, outs = against_ort(m, {"x": X}, backends=("sim", "c"))
    np.testing.assert_array_equal(outs["c"]["y"], 2 * X + 102)


def test_names_of_a_written_out_loop_never_collide_with_the_models_nor_a_nested_graphs():
    """The loop's second ``y_out`` would be ``Loop__it1__y_out``, a tensor of the model; a
    name inside another node's subgraph counts too."""
    body = h.make_graph([h.make_node("Identity", ["cond_in"], ["cond_out"]),
                         h.make_node("Add", ["y_in", "one"], ["y_out"])], "body",
                        [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL),
                         vi("y_in", [3])], [vi("cond_out", [], TensorProto.BOOL),
                                            vi("y_out", [3])])
    then = h.make_graph([h.make_node("Add", ["x", "hundred"], ["Loop__it0__y_out"]),
                         h.make_node("Identity", ["Loop__it0__y_out"], ["r"])], "then", [],
                        [vi("r", [3])])
    g = h.make_graph(
        [h.make_node("Loop", ["M", "", "x"], ["l"], body=body),
         h.make_node("If", ["cond"], ["b0"], then_branch=then, else_branch=then),
         h.make_node("Identity", ["b0"], ["Loop__it1__y_out"]),
         h.make_node("Identity", ["Loop__it1__y_out"], ["b"]),
         h.make_node("Add", ["l", "b"], ["y"])],
        "m", [vi("x", [3])], [vi("y", [3])],
        [c("one", 1.0), c("hundred", 100.0), nh.from_array(np.array(True), "cond"),
         nh.from_array(np.array(2, np.int64), "M")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    _, _, outs = against_ort(m, {"x": X}, backends=("sim", "c"))
    np.testing.assert_array_equal(outs["c"]["y"], 2 * X + 102)


def test_a_tensor_written_by_two_nodes_is_refused_naming_both():
    g = h.make_graph([h.make_node("Relu", ["x"], ["t"], name="first"),
                      h.make_node("Neg", ["x"], ["t"], name="second"),
                      h.make_node("Abs", ["t"], ["y"])],
                     "m", [vi("x", [3])], [vi("y", [3])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    with pytest.raises(ModelError, match=r"^tensor 't' is written by node 'first' \(Relu\) "
                                         r"and by node 'second' \(Neg\); ONNX writes each "
                                         r"tensor once$"):
        npukit.onnx.load(m)
    g = h.make_graph([h.make_node("Relu", ["x"], ["x"], name="over")],
                     "m", [vi("x", [3])], [vi("x", [3])])
    with pytest.raises(ModelError, match=r"^tensor 'x' is written by the graph's input and by "
                                         r"node 'over' \(Relu\)"):
        npukit.onnx.load(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))


def test_a_local_function_named_like_an_onnx_operator_loses_to_the_operator():
    """ONNX Runtime runs the standard Relu, never the model's function of that name."""
    f = h.make_function("", "Relu", ["X"], ["Y"], [h.make_node("Neg", ["X"], ["Y"])],
                        [h.make_opsetid("", 17)])
    g2 = h.make_function("local", "Twice", ["X"], ["Y"],
                         [h.make_node("Add", ["X", "X"], ["Y"])], [h.make_opsetid("", 17)])
    g = h.make_graph([h.make_node("Relu", ["x"], ["r"]),
                      h.make_node("Twice", ["r"], ["y"], domain="local")],
                     "m", [vi("x", [3])], [vi("y", [3])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("local", 1)],
                     functions=[f, g2])
    _, _, outs = against_ort(m, {"x": X}, backends=("sim", "c"))
    np.testing.assert_array_equal(outs["c"]["y"], 2 * np.maximum(X, 0))


def _loop(cond_input: str, cond_body):
    """y = x + 1 per iteration, trip count 5; the body's condition ``cond_body``."""
    body = h.make_graph([*cond_body,
                         h.make_node("Add", ["y_in", "one"], ["y_out"])], "body",
                        [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL),
                         vi("y_in", [3])], [vi("cond_out", [], TensorProto.BOOL),
                                            vi("y_out", [3])])
    g = h.make_graph([h.make_node("Loop", ["M", cond_input, "x"], ["y"], body=body)],
                     "m", [vi("x", [3])], [vi("y", [3])],
                     [c("one", 1.0), nh.from_array(np.array(5, np.int64), "M"),
                      nh.from_array(np.array(True), "cond")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


@pytest.mark.parametrize("cond_input", ["", "cond"], ids=["no-condition-input", "condition"])
def test_a_loop_stops_on_its_bodys_condition_as_onnx_runtime(cond_input):
    """ONNX Runtime stops the loop when the body's condition is false, condition input or
    not: i < 2 ends it after 3 of its 5 iterations (it ran all 5)."""
    stop = [h.make_node("Less", ["i", "two"], ["cond_out"])]
    m = _loop(cond_input, stop)
    m.graph.initializer.append(nh.from_array(np.array(2, np.int64), "two"))
    _, _, outs = against_ort(m, {"x": X}, backends=("sim", "c"))
    np.testing.assert_array_equal(outs["c"]["y"], X + 3)


def test_a_loop_whose_condition_is_known_only_at_run_time_is_refused():
    stop = [h.make_node("ReduceMax", ["y_in"], ["m"], keepdims=0),
            h.make_node("Less", ["m", "ten"], ["cond_out"])]
    m = _loop("", stop)
    m.graph.initializer.append(nh.from_array(np.array(10, np.float32), "ten"))
    with pytest.raises(ModelError, match=r"^node 'Loop' \(Loop\): the loop's condition is "
                                         r"computed by its body from values known only at "
                                         r"run time"):
        npukit.onnx.load(m)


def test_a_loop_whose_body_makes_its_condition_true_runs_its_trip_count():
    true = [h.make_node("Constant", [], ["cond_out"],
                        value=nh.from_array(np.array(True), "v"))]
    _, _, outs = against_ort(_loop("", true), {"x": X}, backends=("sim", "c"))
    np.testing.assert_array_equal(outs["c"]["y"], X + 5)


def test_a_while_loop_of_huge_trip_count_stacks_the_iterations_it_ran():
    """``for i in range(2**63 - 1) while i < 3``: 4 iterations, its scan output 4 rows."""
    body = h.make_graph([h.make_node("Less", ["i", "three"], ["cond_out"]),
                         h.make_node("Add", ["y_in", "one"], ["y_out"]),
                         h.make_node("Mul", ["y_out", "two"], ["s_out"])], "body",
                        [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL),
                         vi("y_in", [3])], [vi("cond_out", [], TensorProto.BOOL),
                                            vi("y_out", [3]), vi("s_out", [3])])
    g = h.make_graph([h.make_node("Loop", ["M", "", "x"], ["y", "s"], body=body)],
                     "m", [vi("x", [3])], [vi("y", [3]), vi("s", None)],
                     [c("one", 1.0), c("two", 2.0),
                      nh.from_array(np.array(2 ** 63 - 1, np.int64), "M"),
                      nh.from_array(np.array(3, np.int64), "three")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    _, _, outs = against_ort(m, {"x": X}, backends=("sim", "c"))
    np.testing.assert_array_equal(outs["c"]["y"], X + 4)
    np.testing.assert_array_equal(outs["c"]["s"], 2 * (X + np.arange(1, 5)[:, None]))


def test_names_of_resolved_sequences_never_collide_with_the_models():
    """SplitToSequence's pieces of ``s`` would be ``s__0``, ``s__1``: the model has an
    ``s__0`` of its own (x + 100)."""
    g = h.make_graph(
        [h.make_node("Add", ["x", "hundred"], ["s__0"]),
         h.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=1),
         h.make_node("SequenceAt", ["s", "zero"], ["first"]),
         h.make_node("Add", ["first", "s__0"], ["y"])],
        "m", [vi("x", [3])], [vi("y", [3])],
        [c("hundred", 100.0), nh.from_array(np.array(0, np.int64), "zero")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    _, _, outs = against_ort(m, {"x": X}, backends=("sim", "c"))
    np.testing.assert_array_equal(outs["c"]["y"], X[0] + X + 100)
