"""Limits and malformed models of the ONNX front end: each refused at once with a
``NpukitError`` that names the tensor or node and the sizes involved, never a raw exception
or minutes of work; and the ``npukit run`` arguments checked before anything is planned."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx_helpers import against_ort, model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import CapacityError, ModelError  # noqa: E402
from npukit.cli import main  # noqa: E402
from npukit.onnx.check import compare, ort_run  # noqa: E402

RNG = np.random.default_rng(19)


def test_an_initializer_with_too_few_values_is_named_with_its_dims_and_count():
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 4])
    w.float_data.extend([1.5, -2.0])
    g = h.make_graph([h.make_node("Add", ["x", "w"], ["y"])], "m",
                     [h.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
                     [h.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])], [w])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    with pytest.raises(ModelError, match=r"initializer 'w': dims \[4, 4\] need 16 values, "
                                         r"it holds 2"):
        npukit.onnx.load(m)


@pytest.fixture
def relu(tmp_path):
    """relu.onnx: Relu of x [2, 8] (float32), and an input for it."""
    x = RNG.uniform(-1, 1, (2, 8)).astype(np.float32)
    onnx.save(model([node("Relu", ["x"], ["y"])], {"x": x}, ["y"]), tmp_path / "relu.onnx")
    return tmp_path, x


def test_run_reads_an_input_from_an_npz_file_by_name_or_its_only_array(relu, capsys):
    d, x = relu
    np.savez(d / "named.npz", other=-x, x=x)
    np.savez(d / "only.npz", values=x)
    for f in ("named.npz", "only.npz"):
        assert main(["run", str(d / "relu.onnx"), "--no-cycles", "--input",
                     f"x={d / f}"]) == 0
        out = capsys.readouterr().out
        first = np.array2string(np.maximum(x, 0).reshape(-1)[:4], precision=5, separator=", ")
        assert f"y: float32 [2, 8], min 0, max {np.maximum(x, 0).max():.6g}, first {first}" \
            in out
    np.savez(d / "two.npz", a=x, b=x)
    assert main(["run", str(d / "relu.onnx"), "--input", f"x={d / 'two.npz'}"]) == 2
    assert "holds ['a', 'b'], none named 'x'" in capsys.readouterr().err


def test_run_checks_inputs_before_planning(relu, capsys):
    d, x = relu
    np.save(d / "wrong.npy", x.reshape(4, 4))
    assert main(["run", str(d / "relu.onnx"), "--input", f"x={d / 'wrong.npy'}"]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""  # no plan, no layers, no simulation printed before the refusal
    err = cap.err.strip().splitlines()
    assert len(err) == 1
    assert "input 'x' is float32 (2, 8), the file holds float32 (4, 4)" in err[0]
    assert main(["run", str(d / "relu.onnx"), "--input", f"z={d / 'wrong.npy'}"]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and "with NAME one of ['x']" in cap.err


def test_equal_nan_and_infinity_positions_compare_as_equal():
    ref = np.array([[1.0, np.nan, -np.inf], [np.inf, 2.0, -4.0]], np.float32)
    c = compare("y", ref.copy(), ref)
    assert c.within and c.max_abs == 0 and c.max_rel == 0 and c.exact == 1
    near = ref.copy()
    near[1, 2] = -4.0002  # the finite part sets the scale: 4 * 1e-4 allows 0.0004
    assert compare("y", near, ref).within
    for k, v in ((1, 3.0), (2, np.inf), (3, np.nan), (0, np.nan)):
        moved = ref.copy()
        moved.reshape(-1)[k] = v
        assert not compare("y", moved, ref).within, (k, v)


def test_a_negative_dequantize_scale_steps_by_its_magnitude():
    x = RNG.uniform(-1, 1, (4, 8)).astype(np.float32)
    m = model([node("QuantizeLinear", ["x", "s", "z"], ["q"]),
               node("DequantizeLinear", ["q", "s", "z"], ["d"]), node("Relu", ["d"], ["r"]),
               node("QuantizeLinear", ["r", "s2", "z"], ["q2"]),
               node("DequantizeLinear", ["q2", "s2", "z"], ["y"])], {"x": x}, ["y"],
              {"s": np.float32(-0.01), "s2": np.float32(-0.02), "z": np.int8(3)}, opset=13)
    g, stats, _ = against_ort(m, {"x": x})  # asserts every output within one step
    assert g.output_steps["y"] == pytest.approx(-0.02)
    c = stats["c"]["y"]
    assert c.step == pytest.approx(0.02) and "of 0.02)" in str(c)
    ref, _ = ort_run(m, {"x": x})
    off = ref["y"] + np.float32(0.03)  # 1.5 steps off everywhere
    assert not compare("y", off, ref["y"], g.output_steps["y"]).within


FOLD_K = np.array([1.5], np.float32)


@pytest.mark.parametrize("nodes, inits, what", [
    ([node("ConstantOfShape", ["s"], ["e"])], {"s": np.array([2 ** 31], np.int64)},
     r"node 'ConstantOfShape' \(ConstantOfShape\): its constant output 'e' of shape "
     r"\[2147483648\] would take 8589934592 B, over the 268435456 B"),
    ([node("Expand", ["k", "s"], ["e"])], {"k": FOLD_K, "s": np.array([65536] * 2, np.int64)},
     r"node 'Expand' \(Expand\): its constant output 'e' of shape \[65536, 65536\] would "
     r"take 17179869184 B"),
    # The shape is itself folded first: refused from the inferred shape, in the folding.
    ([node("Concat", ["a", "b"], ["s"], axis=0), node("Expand", ["k", "s"], ["e"])],
     {"k": FOLD_K, "a": np.array([65536], np.int64), "b": np.array([65536], np.int64)},
     r"\(Expand\): its constant output 'e' of shape \[65536, 65536\] would take 17179869184"),
    ([node("Tile", ["k", "s"], ["e"])], {"k": FOLD_K, "s": np.array([2 ** 27], np.int64)},
     r"\(Tile\): its constant output 'e' of shape \[134217728\] would take 536870912 B"),
])
def test_a_folded_constant_over_the_limit_is_refused_before_it_is_allocated(nodes, inits,
                                                                               what):
    import tracemalloc

    x = np.zeros((1,), np.float32)
    m = model([*nodes, node("Add", ["x", "e"], ["y"])], {"x": x}, ["y"], inits)
    tracemalloc.start()
    try:
        with pytest.raises(ModelError, match=what):
            npukit.onnx.load(m)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20  # nothing near the constant's size was allocated


def test_a_folded_constant_under_the_limit_still_folds():
    x = RNG.uniform(-1, 1, (1, 3)).astype(np.float32)
    m = model([node("ConstantOfShape", ["s"], ["c"], value=onnx.numpy_helper.from_array(
        np.array([0.25], np.float32))), node("Add", ["x", "c"], ["y"])], {"x": x}, ["y"],
        {"s": np.array([2, 3], np.int64)})
    g, _, outs = against_ort(m, {"x": x})
    np.testing.assert_array_equal(outs["c"]["y"], np.broadcast_to(x + np.float32(0.25), (2, 3)))


def test_a_relu_over_the_largest_memory_is_refused_at_once():
    m = model([node("Relu", ["x"], ["y"])], {"x": np.zeros((1, 4), np.float32)}, ["y"])
    with pytest.raises(CapacityError, match=r"L0_Relu: argument 'In' \(.* = 8589934592 B\) is "
                                            r"larger than the largest memory of gap8"):
        npukit.onnx.load(m, input_shapes={"x": (1, 2 ** 31)})


def concat_model(n: int) -> onnx.ModelProto:
    ins = {f"x{i}": np.zeros((1, 4), np.float32) for i in range(n)}
    return model([node("Concat", list(ins), ["y"], axis=1)], ins, ["y"])


@pytest.mark.slow
def test_a_concat_of_many_inputs_builds_in_work_linear_in_their_count():
    import cProfile
    import pstats

    def calls(n: int) -> int:
        """Python function calls to import a concat of n inputs and generate its C."""
        m = concat_model(n)
        prof = cProfile.Profile()
        prof.enable()
        npukit.onnx.load(m).c_source()
        prof.disable()
        return pstats.Stats(prof).total_calls

    calls(8)  # first-use work (imports, caches) out of the way
    w = [calls(n) for n in (40, 80, 120)]
    # Linear work grows by the same amount from 80 to 120 inputs as from 40 to 80; work
    # per task over every tensor (before) grew by 26% more.
    assert w[2] - w[1] <= 1.02 * (w[1] - w[0]), w


def test_a_concat_of_many_inputs_matches_onnx_runtime():
    ins = {f"x{i}": RNG.uniform(-1, 1, (1, 3)).astype(np.float32) for i in range(64)}
    m = model([node("Concat", list(ins), ["y"], axis=1)], ins, ["y"])
    _, _, outs = against_ort(m, ins)
    np.testing.assert_array_equal(outs["c"]["y"], np.concatenate(list(ins.values()), axis=1))


def _relu4(x):
    return model([node("Relu", ["x"], ["y"])], {"x": x}, ["y"])


def _duplicate_output(m):
    m.graph.output.append(m.graph.output[0])


def _opset_99(m):
    m.opset_import[0].version = 99


def _empty_batch(m):
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 0


@pytest.mark.parametrize("spoil, what", [
    (_duplicate_output, r"output 'y' is listed twice among the graph's outputs"),
    (_opset_99, r"the model imports opset 99 of the ONNX operators; the newest this onnx "
                r"package defines is \d+"),
    (_empty_batch, r"input 'x': dimension 0 is 0 \(\[0, 3, 4, 4\]\), an empty tensor"),
])
def test_what_the_onnx_specification_refuses_is_refused_with_its_name(spoil, what):
    m = _relu4(np.ones((1, 3, 4, 4), np.float32))
    spoil(m)
    with pytest.raises(ModelError, match=what):
        npukit.onnx.load(m)


def test_lrn_of_size_0_is_refused_with_its_node():
    m = model([node("LRN", ["x"], ["y"], size=0)], {"x": np.ones((1, 3, 4, 4), np.float32)},
              ["y"])
    with pytest.raises(ModelError, match=r"node 'LRN_0' \(LRN\): size=0; ONNX's LRN sums over "
                                         r"size >= 1 channels"):
        npukit.onnx.load(m)


def test_check_reports_onnx_runtimes_refusal_in_one_line(tmp_path, capsys):
    m = _relu4(RNG.uniform(-1, 1, (1, 3, 4, 4)).astype(np.float32))
    m.ir_version = 99  # npukit reads it; ONNX Runtime loads IR versions it knows only
    onnx.save(m, tmp_path / "ir99.onnx")
    assert main(["run", str(tmp_path / "ir99.onnx"), "--no-cycles", "--check"]) == 1
    cap = capsys.readouterr()
    assert "Host run (C back end):" in cap.out and "y: float32 [1, 3, 4, 4]" in cap.out
    err = cap.err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("npukit run: --check: ONNX Runtime refused the model: ")
    assert "Unsupported model IR version: 99" in err[0]
