"""``npukit run MODEL.onnx``: the plan, the layers, the host run, ``--check`` against ONNX
Runtime, ``--emit`` (a C project that builds with make and reproduces the outputs bit for
bit), ``--trace``, ``--input``, and one line for a model npukit cannot import."""

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx_helpers import model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit.cli import main  # noqa: E402
from npukit.onnx.cli import size  # noqa: E402
from npukit.onnx.emit import fnv1a  # noqa: E402

RNG = np.random.default_rng(4)


@pytest.fixture
def small(tmp_path):
    """A small CNN saved as small.onnx, and an input for it saved as x.npy."""
    x = RNG.normal(size=(1, 3, 8, 8)).astype(np.float32)
    inits = {"w": (RNG.normal(size=(4, 3, 3, 3)) * 0.3).astype(np.float32),
             "b": RNG.normal(size=4).astype(np.float32),
             "fw": (RNG.normal(size=(64, 5)) * 0.2).astype(np.float32)}
    nodes = [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["r"]),
             node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Flatten", ["p"], ["f"]), node("MatMul", ["f", "fw"], ["z"]),
             node("Softmax", ["z"], ["y"])]
    m = model(nodes, {"x": x}, ["y", "p"], inits, opset=13)
    onnx.save(m, tmp_path / "small.onnx")
    np.save(tmp_path / "x.npy", x)
    return tmp_path, x


def test_run_prints_the_plan_the_layers_and_the_check(small, capsys):
    d, _ = small
    assert main(["run", str(d / "small.onnx"), "--l1", "2K", "--check"]) == 0
    out = capsys.readouterr().out
    assert "Memory plan of graph m on gap8:" in out and "(budget 2048 B)" in out
    assert "Out_y" in out and "('y')" in out
    assert "L0_Conv" in out and "Conv+Relu+MaxPool" in out and "cycles" in out
    assert "Host run (C back end):" in out and "ONNX Runtime (1 thread):" in out
    assert out.count("(within <= 0.0001 relative)") == 2


@pytest.mark.slow
def test_run_with_an_input_file_emit_and_trace(small, tmp_path, capsys):
    d, x = small
    proj, trace = tmp_path / "proj", tmp_path / "run.json"
    assert main(["run", str(d / "small.onnx"), "--input", f"x={d / 'x.npy'}", "--emit",
                 str(proj), "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert f"C project written to {proj}" in out
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("ph") == "X" for e in events)
    # The project holds the given input and what the C back end computed for it.
    assert np.load(proj / "inputs" / "x.npy").tobytes() == x.tobytes()
    want = npukit.onnx.load(d / "small.onnx").run("c", x=x).outputs
    for name in ("y", "p"):
        assert np.load(proj / "expected" / f"{name}.npy").tobytes() == want[name].tobytes()
    for f in ("main.c", "Makefile", "mKernels.c", "mKernels.h", "m_L3_Flash_Const.dat"):
        assert (proj / f).exists(), f


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None or shutil.which("cc") is None,
                    reason="needs make and a C compiler")
def test_the_emitted_project_builds_with_make_and_reproduces_the_outputs(small, tmp_path):
    d, x = small
    proj = tmp_path / "fresh"
    assert main(["run", str(d / "small.onnx"), "--no-cycles", "--emit", str(proj)]) == 0
    # A fresh directory: only what --emit wrote. Warnings are errors for main.c too.
    r = subprocess.run(["make", "-C", str(proj), "check",
                        "CFLAGS=-O1 -Wall -Wextra -Werror"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "outputs identical to expected/" in r.stdout
    g = npukit.onnx.load(d / "small.onnx")
    inputs = {"x": np.load(proj / "inputs" / "x.npy")}
    want = g.run("c", **inputs).outputs
    for name, a in want.items():
        got = np.load(proj / "outputs" / f"{name}.npy")
        assert got.tobytes() == a.tobytes() and got.shape == a.shape
        assert f"{name} float32 {got.shape} fnv1a {fnv1a(a.tobytes()):08x}" in r.stdout


def test_an_unsupported_operator_is_one_line_and_a_nonzero_exit(tmp_path, capsys):
    m = model([node("Relu", ["x"], ["r"]), node("Det", ["r"], ["y"], name="my_det")],
              {"x": np.zeros((1, 4, 4), np.float32)}, ["y"])
    onnx.save(m, tmp_path / "bad.onnx")
    assert main(["run", str(tmp_path / "bad.onnx")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1
    assert "node 'my_det' (Det)" in lines[0]
    assert "operator 'Det' is not supported" in lines[0]


def test_check_fails_past_the_tolerance(small, capsys, monkeypatch):
    import npukit.onnx.check as check

    d, _ = small
    monkeypatch.setattr(check, "FLOAT_TOL", 0.0)  # every float sum order then fails
    assert main(["run", str(d / "small.onnx"), "--no-cycles", "--check"]) == 1
    assert "OUTSIDE" in capsys.readouterr().out


def test_bad_arguments_are_one_line(small, capsys):
    d, _ = small
    assert main(["run", str(d / "small.onnx"), "--input", "nope=x.npy"]) == 2
    assert "--input 'nope=x.npy': give NAME=FILE.npy with NAME one of ['x']" in \
        capsys.readouterr().err
    assert main(["run", str(d / "missing.onnx")]) == 2
    assert "cannot read the ONNX model" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", str(d / "small.onnx"), "--l2", "lots"])


def test_sizes_read_as_bytes_with_binary_suffixes():
    assert (size("48000"), size("300K"), size("8M"), size("1g"), size("64KB")) == (
        48000, 300 * 1024, 8 << 20, 1 << 30, 64 << 10)


def test_a_quantized_output_is_judged_in_lsb_by_compare_as_by_the_cli(tmp_path, capsys):
    """A float output a DequantizeLinear makes: ``g.compare`` and ``--check`` print the
    same line, within 1 LSB of its scale; the plain float tolerance would say 1e-4."""
    from npukit.onnx.check import compare, ort_run, random_inputs

    inits = {"xs": np.float32(0.05), "xz": np.uint8(128), "ys": np.float32(0.02),
             "yz": np.uint8(100), "hw": np.array([2, 3], np.int64)}
    nodes = [node("QuantizeLinear", ["x", "xs", "xz"], ["q"]),
             node("DequantizeLinear", ["q", "xs", "xz"], ["d"]),
             node("ReduceMean", ["d", "hw"], ["r"], keepdims=0),
             node("QuantizeLinear", ["r", "ys", "yz"], ["rq"]),
             node("DequantizeLinear", ["rq", "ys", "yz"], ["y"])]
    onnx.save(model(nodes, {"x": np.zeros((1, 4, 5, 5), np.float32)}, ["y"], inits, opset=18),
              tmp_path / "q.onnx")
    g = npukit.onnx.load(tmp_path / "q.onnx")
    x = random_inputs(g)
    ours = g.run("c", **x).outputs["y"]
    ref, _ = ort_run(tmp_path / "q.onnx", x)
    line = str(g.compare("y", ours, ref["y"]))
    assert "LSB of 0.02" in line and line.endswith("(within <= 1 LSB)")
    assert "relative)" in str(compare("y", ours, ref["y"]))  # without the output's step
    assert main(["run", str(tmp_path / "q.onnx"), "--check", "--no-cycles"]) == 0
    assert line in capsys.readouterr().out


def test_the_plan_shows_whole_onnx_names(tmp_path):
    """A tensor's C name keeps 40 characters of its ONNX name; the plan shows the whole ONNX
    name beside it."""
    x = RNG.normal(size=(1, 3, 8, 8)).astype(np.float32)
    mid = "a_rather_long_intermediate_tensor_name_from_an_exporter/Conv_output_0"
    inits = {"w": (RNG.normal(size=(4, 3, 3, 3)) * 0.3).astype(np.float32),
             "w2": (RNG.normal(size=(4, 4, 3, 3)) * 0.3).astype(np.float32)}
    nodes = [node("Conv", ["x", "w"], [mid], pads=[1, 1, 1, 1]),
             node("Conv", [mid, "w2"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["r"]),
             node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    onnx.save(model(nodes, {"x": x}, ["y"], inits, opset=13), tmp_path / "m.onnx")
    g = npukit.onnx.load(str(tmp_path / "m.onnx"), target="gap8")
    text = str(g)
    assert f"({mid!r})" in text
    assert [info.ops for info in g.layers] == ["Conv", "Conv+Relu+MaxPool"]
    assert re.search(r"^  L1_\w+ +Conv\+Relu\+MaxPool +\d+ x \d+ ", text, re.M), text
