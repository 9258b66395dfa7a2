"""The expansion budget (``npukit.onnx.budget``): nested loops, local functions that call each
other and a ``Range`` of constants are sized before they are written out, inlined or
materialized by shape inference, and refused in one line past the budget."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit.errors import ModelError  # noqa: E402
from npukit.onnx.budget import MAX_EXPANDED_NODES  # noqa: E402


def _vi(name, t, shape):
    return h.make_tensor_value_info(name, t, shape)


def nested_loops(levels: int, trip: int = 256):
    """``levels`` Loops nested in each other, each of ``trip`` iterations, around v + 1."""
    body = h.make_graph([h.make_node("Add", ["v0", "one"], ["w0"]),
                         h.make_node("Identity", ["c0"], ["d0"])], "b0",
                        [_vi("i0", T.INT64, []), _vi("c0", T.BOOL, []), _vi("v0", T.FLOAT, [1])],
                        [_vi("d0", T.BOOL, []), _vi("w0", T.FLOAT, [1])])
    for k in range(1, levels):
        body = h.make_graph([h.make_node("Loop", ["n", "", f"v{k}"], [f"w{k}"], body=body),
                             h.make_node("Identity", [f"c{k}"], [f"d{k}"])], f"b{k}",
                            [_vi(f"i{k}", T.INT64, []), _vi(f"c{k}", T.BOOL, []),
                             _vi(f"v{k}", T.FLOAT, [1])],
                            [_vi(f"d{k}", T.BOOL, []), _vi(f"w{k}", T.FLOAT, [1])])
    g = h.make_graph([h.make_node("Loop", ["n", "", "x"], ["y"], body=body)], "g",
                     [_vi("x", T.FLOAT, [1])], [_vi("y", T.FLOAT, [1])],
                     [nh.from_array(np.array(trip, np.int64), "n"),
                      nh.from_array(np.array([1], np.float32), "one")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def test_one_loop_of_256_iterations_is_written_out():
    g = npukit.onnx.load(nested_loops(1))
    assert g.run("sim", x=np.zeros(1, np.float32)).outputs["y"][0] == 256


@pytest.mark.parametrize("levels", [2, 4])
def test_nested_loops_are_refused_before_they_are_written_out(levels):
    t0 = time.perf_counter()
    with pytest.raises(ModelError, match=f"at most {MAX_EXPANDED_NODES} nodes") as e:
        npukit.onnx.load(nested_loops(levels))
    assert "\n" not in str(e.value) and time.perf_counter() - t0 < 30


def function_bomb(levels: int):
    """Local functions f_k = f_{k-1}(f_{k-1}(x)): 2**levels Relus from a few KB."""
    ops = [h.make_opsetid("", 17), h.make_opsetid("local", 1)]
    fs = [h.make_function("local", "f0", ["a"], ["b"], [h.make_node("Relu", ["a"], ["t"]),
                                                         h.make_node("Relu", ["t"], ["b"])],
                          ops[:1])]
    for k in range(1, levels):
        fs.append(h.make_function("local", f"f{k}", ["a"], ["b"], [
            h.make_node(f"f{k - 1}", ["a"], ["t"], domain="local"),
            h.make_node(f"f{k - 1}", ["t"], ["b"], domain="local")], ops))
    g = h.make_graph([h.make_node(f"f{levels - 1}", ["x"], ["y"], domain="local")], "g",
                     [_vi("x", T.FLOAT, [1, 4])], [_vi("y", T.FLOAT, [1, 4])])
    return h.make_model(g, opset_imports=ops, functions=fs)


def test_local_functions_are_sized_before_they_are_inlined():
    g = npukit.onnx.load(function_bomb(3))  # 8 Relus
    x = np.linspace(-1, 1, 4, dtype=np.float32).reshape(1, 4)
    assert np.array_equal(g.run("sim", x=x).outputs["y"], np.maximum(x, 0))
    m = function_bomb(24)
    assert len(m.SerializeToString()) < 3000
    t0 = time.perf_counter()
    with pytest.raises(ModelError, match=r"16777216 nodes.*at most") as e:
        npukit.onnx.load(m)
    assert "\n" not in str(e.value) and time.perf_counter() - t0 < 10


def test_a_function_that_calls_itself_is_refused():
    f = h.make_function("local", "f", ["a"], ["b"], [h.make_node("f", ["a"], ["b"],
                                                                 domain="local")],
                        [h.make_opsetid("local", 1)])
    g = h.make_graph([h.make_node("f", ["x"], ["y"], domain="local")], "g",
                     [_vi("x", T.FLOAT, [1])], [_vi("y", T.FLOAT, [1])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("local", 1)],
                     functions=[f])
    with pytest.raises(ModelError, match="calls itself"):
        npukit.onnx.load(m)


@pytest.mark.parametrize("limit", [10**12, np.inf])
def test_a_huge_range_is_refused_before_shape_inference(limit):
    dt = np.float32 if np.isinf(limit) else np.int64
    g = h.make_graph([h.make_node("Range", ["s", "l", "d"], ["r"]),
                      h.make_node("Cast", ["r"], ["y"], to=1)], "g",
                     [_vi("x", T.FLOAT, [1])], [_vi("y", T.FLOAT, None)],
                     [nh.from_array(np.array(0, dt), "s"), nh.from_array(np.array(limit, dt), "l"),
                      nh.from_array(np.array(1, dt), "d")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    with pytest.raises(ModelError, match=r"Range.*over the \d+ B npukit folds"):
        npukit.onnx.load(m)
