"""ONNX control flow decided when the model is read: If on a constant condition, Loop with
a constant trip count, Scan over a sequence of known length become straight-line operators,
checked against ONNX Runtime (fed the same constants) and numpy, simulator == C; control
flow that depends on run-time values is refused by name."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402
from npukit.onnx.check import ort_run  # noqa: E402

RNG = np.random.default_rng(51)
F = TensorProto.FLOAT


def vi(name, shape, t=F):
    return h.make_tensor_value_info(name, t, shape)


def _run(m, consts: dict, data: dict, want: dict):
    """npukit (C and simulator) with ``consts`` as constants against ONNX Runtime fed
    everything, and against ``want`` (numpy)."""
    ref, _ = ort_run(m, {**consts, **data})
    g = npukit.onnx.load(m, constants=consts)
    c = g.run("c", **data).outputs
    s = g.run("sim", **data).outputs
    for k, v in want.items():
        np.testing.assert_allclose(c[k], v, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(c[k], ref[k], rtol=1e-6, atol=1e-6)
        assert c[k].tobytes() == s[k].tobytes()
    return g


def _if_model(nested: bool = False):
    """y = x * 2 + b (then, b an initializer of the branch) or tanh(x) (else); nested: the
    then-branch is itself an If on a second condition."""
    b = nh.from_array(np.array([0.5, -1, 2], np.float32), "b")
    then = h.make_graph([h.make_node("Mul", ["x", "two"], ["m"]),
                         h.make_node("Add", ["m", "b"], ["t_out"])], "then", [],
                        [vi("t_out", [3])], [b])
    orelse = h.make_graph([h.make_node("Tanh", ["x"], ["e_out"])], "else", [],
                          [vi("e_out", [3])])
    if nested:
        inner = h.make_node("If", ["c2"], ["n_out"], then_branch=then, else_branch=orelse)
        then = h.make_graph([inner], "outer_then", [], [vi("n_out", [3])])
    g = h.make_graph([h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=orelse)],
                     "m", [vi("c", [], TensorProto.BOOL), vi("x", [3]),
                           *([vi("c2", [], TensorProto.BOOL)] if nested else [])],
                     [vi("y", [3])], [nh.from_array(np.array(2, np.float32), "two")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


@pytest.mark.slow
@pytest.mark.parametrize("cond", [True, False])
def test_if_on_a_constant_condition_is_the_branch_it_takes(cond):
    x = RNG.normal(size=3).astype(np.float32)
    m = _if_model()
    assert npukit.onnx.constant_operands(m) == ["c"]
    want = x * 2 + np.array([0.5, -1, 2], np.float32) if cond else np.tanh(x)
    g = _run(m, {"c": np.array(cond)}, {"x": x}, {"y": want})
    assert all("If" not in info.ops for info in g.layers)


@pytest.mark.slow
def test_a_nested_if_reads_the_enclosing_branch():
    x = RNG.normal(size=3).astype(np.float32)
    _run(_if_model(nested=True), {"c": np.array(True), "c2": np.array(False)}, {"x": x},
         {"y": np.tanh(x)})


@pytest.mark.slow
@pytest.mark.parametrize("trip", [1, 4])
def test_loop_with_a_constant_trip_count_is_written_out(trip):
    """y_{i+1} = y_i * 0.5 + x[i] (x read from the enclosing graph, the iteration number
    selecting the row), the running values stacked as the scan output."""
    body = h.make_graph(
        [h.make_node("Identity", ["cond_in"], ["cond_out"]),
         h.make_node("Gather", ["x", "i"], ["row"], axis=0),
         h.make_node("Mul", ["y_in", "half"], ["h"]),
         h.make_node("Add", ["h", "row"], ["y_out"]),
         h.make_node("Identity", ["y_out"], ["s_out"])], "body",
        [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("y_in", [2])],
        [vi("cond_out", [], TensorProto.BOOL), vi("y_out", [2]), vi("s_out", [2])],
        [nh.from_array(np.array(0.5, np.float32), "half")])
    g = h.make_graph([h.make_node("Loop", ["M", "cond", "y0"], ["y", "s"], body=body)], "m",
                     [vi("M", [], TensorProto.INT64), vi("cond", [], TensorProto.BOOL),
                      vi("y0", [2])], [vi("y", [2]), vi("s", [trip, 2])],
                     [nh.from_array(RNG.normal(size=(4, 2)).astype(np.float32), "x")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    assert npukit.onnx.constant_operands(m) == ["M", "cond"]
    x = np.asarray(nh.to_array(g.initializer[0]))
    y0 = RNG.normal(size=2).astype(np.float32)
    ys, y = [], y0
    for i in range(trip):
        y = (y * np.float32(0.5) + x[i]).astype(np.float32)
        ys.append(y)
    _run(m, {"M": np.array(trip, np.int64), "cond": np.array(True)}, {"y0": y0},
         {"y": y, "s": np.stack(ys)})


@pytest.mark.slow
@pytest.mark.parametrize("reverse,out_axis", [(0, 0), (1, 1), (0, -1)])
def test_scan_over_a_known_length_is_written_out(reverse, out_axis):
    """A running sum and a running maximum over the rows of x (forward or reverse), the sums
    stacked along ``out_axis``."""
    body = h.make_graph(
        [h.make_node("Add", ["sum_in", "row"], ["sum_out"]),
         h.make_node("Max", ["max_in", "row"], ["max_out"]),
         h.make_node("Identity", ["sum_out"], ["scan_out"])], "body",
        [vi("sum_in", [3]), vi("max_in", [3]), vi("row", [3])],
        [vi("sum_out", [3]), vi("max_out", [3]), vi("scan_out", [3])])
    g = h.make_graph([h.make_node("Scan", ["s0", "m0", "x"], ["s", "mx", "all"], body=body,
                                  num_scan_inputs=1, scan_input_directions=[reverse],
                                  scan_output_axes=[out_axis])], "m",
                     [vi("s0", [3]), vi("m0", [3]), vi("x", [5, 3])],
                     [vi("s", [3]), vi("mx", [3]), vi("all", None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    x = RNG.normal(size=(5, 3)).astype(np.float32)
    s0 = RNG.normal(size=3).astype(np.float32)
    m0 = np.full(3, -10, np.float32)
    rows = x[::-1] if reverse else x
    sums = np.cumsum(np.vstack([s0, rows]), axis=0, dtype=np.float32)[1:]
    _run(m, {}, {"s0": s0, "m0": m0, "x": x},
         {"s": sums[-1], "mx": np.maximum(m0, x.max(0)),
          "all": np.stack(list(sums), axis=out_axis)})


def _data_condition_loop():
    """A loop whose body's condition depends on its data (y_in > 0)."""
    body = h.make_graph([h.make_node("ReduceMax", ["y_in"], ["m"], keepdims=0),
                         h.make_node("Greater", ["m", "zero"], ["cond_out"]),
                         h.make_node("Identity", ["y_in"], ["y_out"])], "body",
                        [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL),
                         vi("y_in", [2])],
                        [vi("cond_out", [], TensorProto.BOOL), vi("y_out", [2])],
                        [nh.from_array(np.array(0, np.float32), "zero")])
    g = h.make_graph([h.make_node("Loop", ["M", "", "y0"], ["y"], body=body)], "m",
                     [vi("y0", [2])], [vi("y", [2])],
                     [nh.from_array(np.array(3, np.int64), "M")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def test_control_flow_known_only_at_run_time_is_refused_by_name():
    with pytest.raises(ModelError, match=r"node 'If' \(If\): its condition 'c' must be a "
                                         r"constant to decide the control flow.*constants="):
        npukit.onnx.load(_if_model())

    def loop(cond_op: str, trip: int):
        body = h.make_graph([h.make_node(cond_op, ["cond_in"], ["cond_out"]),
                             h.make_node("Identity", ["y_in"], ["y_out"])], "body",
                            [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL),
                             vi("y_in", [2])],
                            [vi("cond_out", [], TensorProto.BOOL), vi("y_out", [2])])
        g = h.make_graph([h.make_node("Loop", ["M", "cond", "y0"], ["y"], body=body)], "m",
                         [vi("y0", [2])], [vi("y", [2])],
                         [nh.from_array(np.array(trip, np.int64), "M"),
                          nh.from_array(np.array(True), "cond")])
        return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])

    # Not(cond_in) folds (the condition input is a constant): the loop stops after one
    # iteration, as in ONNX Runtime; a condition of the data is refused.
    y0 = np.array([1.5, -2.0], np.float32)
    assert np.array_equal(npukit.onnx.load(loop("Not", 3)).run("sim", y0=y0).outputs["y"], y0)
    with pytest.raises(ModelError, match=r"\(Loop\): the loop's condition is computed by its "
                                         r"body from values known only at run time"):
        npukit.onnx.load(_data_condition_loop())
    with pytest.raises(ModelError, match=r"\(Loop\): 100000 iterations; npukit writes out loops "
                                         r"of 1 to 256"):
        npukit.onnx.load(loop("Identity", 100_000))
