"""benchmarks/onnx_suites.py, the runner of ONNX's backend test suites, on a few cases: it
tells a pass from a wrong result, a refusal and a crash, compares as the onnx backend test
does, and counts per folder and operator."""

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
import onnx_suites as S  # noqa: E402

RNG = np.random.default_rng(22)


def write_case(folder: Path, nodes, inputs: dict, outputs: dict) -> S.Case:
    """A case folder as onnx's generators write one: model.onnx and test_data_set_0."""
    g = h.make_graph(nodes, folder.name,
                     [h.make_tensor_value_info(k, TensorProto.FLOAT, v.shape)
                      for k, v in inputs.items()],
                     [h.make_tensor_value_info(k, TensorProto.FLOAT, v.shape)
                      for k, v in outputs.items()])
    folder.mkdir(parents=True)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), folder / "model.onnx")
    s = folder / "test_data_set_0"
    s.mkdir()
    for kind, arrays in (("input", inputs), ("output", outputs)):
        for j, (k, v) in enumerate(arrays.items()):
            (s / f"{kind}_{j}.pb").write_bytes(nh.from_array(v, k).SerializeToString())
    return S.Case("node", folder.name, str(folder), nodes[0].op_type)


def test_a_right_a_wrong_a_refused_and_a_crashing_case(tmp_path, monkeypatch):
    x = RNG.uniform(-1, 1, (2, 8)).astype(np.float32)
    relu = [h.make_node("Relu", ["x"], ["y"])]
    right = write_case(tmp_path / "test_relu", relu, {"x": x}, {"y": np.maximum(x, 0)})
    off = np.maximum(x, 0)
    off[1, 3] += 0.01  # one element beyond rtol 1e-3
    wrong = write_case(tmp_path / "test_relu_off", relu, {"x": x}, {"y": off})
    det = write_case(tmp_path / "test_det", [h.make_node("Det", ["x3"], ["y"], name="e")],
                     {"x3": x.reshape(2, 2, 4)[:, :, :2].copy()}, {"y": x[:, 0]})
    got = {c.name: S.run_case((c, 60.0, True)) for c in (right, wrong, det)}
    assert (got["test_relu"].npukit, got["test_relu"].ort, got["test_relu"].sim) == \
        ("pass", True, True)
    assert got["test_relu_off"].npukit == "wrong" and not got["test_relu_off"].ort
    assert got["test_relu_off"].why == "output 'y': 1 of 16 elements differ"
    assert got["test_det"].npukit == "refused" and not got["test_det"].ort
    assert got["test_det"].why.startswith("node 'e' (Det): operator 'Det' is not supported")

    import npukit.onnx

    def broken(*a, **k):
        raise KeyError("value")

    monkeypatch.setattr(npukit.onnx, "load", broken)
    crash = S.run_case((right, 60.0, False))
    assert (crash.npukit, crash.why, crash.ort) == ("crash", "KeyError: 'value'", True)

    def long(*a, **k):  # a refusal is one line: a longer one counts as a crash
        raise npukit.NpukitError("cc failed\nerror: conflicting types")

    monkeypatch.setattr(npukit.onnx, "load", long)
    crash = S.run_case((right, 60.0, False))
    assert (crash.npukit, crash.why) == ("crash", "NpukitError of 2 lines: cc failed")


@pytest.mark.slow
def test_a_case_over_its_time_is_a_timeout(tmp_path, monkeypatch):
    x = RNG.uniform(-1, 1, (2, 8)).astype(np.float32)
    case = write_case(tmp_path / "test_relu", [h.make_node("Relu", ["x"], ["y"])], {"x": x},
                      {"y": np.maximum(x, 0)})
    import time

    import npukit.onnx

    monkeypatch.setattr(npukit.onnx, "load", lambda *a, **k: time.sleep(5))
    out = S.run_case((case, 0.5, False))
    assert (out.npukit, out.why) == ("timeout", "over 0.5 s")
    assert out.seconds < 4


@pytest.mark.parametrize("out, want, ok", [
    (np.float32([1.0, 2.0]), np.float32([1.0009, 2.0]), True),  # within rtol 1e-3
    (np.float32([1.0, 2.0]), np.float32([1.0011, 2.0]), False),
    (np.float32([0.0, np.nan]), np.float32([5e-8, np.nan]), True),  # atol 1e-7; NaN == NaN
    (np.float32([1.0]), np.float64([1.0]), False),  # the type must be the expected one
    (np.float32([[1.0]]), np.float32([1.0]), False),  # and the shape
    (np.int8([3]), np.int8([4]), False),
])
def test_outputs_are_compared_as_the_onnx_backend_test_compares_them(out, want, ok):
    assert (S.close(out, want, 1e-3, 1e-7) == "") == ok
    if out.shape == want.shape and out.dtype == want.dtype:
        try:
            np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-7)
            same = True
        except AssertionError:
            same = False
        assert same == ok


@pytest.mark.slow
def test_two_cases_of_the_wheel_through_the_worker_pool():
    """Two cases of the onnx wheel's simple/ on npukit.workers.run_units: the ReLU passes on
    the C and the simulator, the string operation is refused; ONNX Runtime passes both."""
    out = S.run(("simple",), workers=1, sim_every=1, timeout=120,
                only=("test_single_relu_model", "test_strnorm_model_nostopwords_nochangecase"))
    got = {o.case.name: o for o in out}
    assert len(out) == 2
    assert got["test_single_relu_model"].npukit == "pass" and got["test_single_relu_model"].sim
    assert got["test_strnorm_model_nostopwords_nochangecase"].npukit == "refused"
    assert all(o.ort for o in out)
    table = S.tables(out, markdown=True).splitlines()
    assert table[:3] == [
        "| suite | cases | pass | refused | wrong | crash | timeout | ONNX Runtime passes |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        "| simple | 2 | 1 | 1 | 0 | 0 | 0 | 2 |"]


@pytest.mark.slow
def test_the_node_cases_are_written_from_the_onnx_package(tmp_path):
    """Every node case of the installed onnx package, with its operator; an expanded case
    (the operator's function body) is counted under the operator, and a written case runs."""
    from onnx.backend.test.case import node

    S.write_node_cases(tmp_path)
    cases = S.collect(("node",), tmp_path)
    assert len(cases) == len(node.collect_testcases()) > 1000
    ops = {c.name: c.op for c in cases}
    assert ops["test_abs"] == "Abs" and ops["test_relu_expanded_ver18"] == "Relu"
    assert all(ops.values())
    relu = next(c for c in cases if c.name == "test_relu")
    out = S.run_case((relu, 60.0, True))
    assert (out.npukit, out.ort, out.sim) == ("pass", True, True)
