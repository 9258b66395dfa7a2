"""``npukit run --plan`` (the plan, tiles and predicted cycles, no C compiled), the CLI's trace
as the report's, every built-in target run or refused in one line by every command, ``--l1``
above the chip refused at argument time, budget help, microseconds beside cycles."""

import json
import re

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx_helpers import model, node  # noqa: E402

import npukit as nk  # noqa: E402
import npukit.onnx  # noqa: E402
from npukit.cli import main  # noqa: E402

RNG = np.random.default_rng(7)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A small CNN saved as small.onnx, and two input sets stacked in inputs.npz."""
    d = tmp_path_factory.mktemp("plan")
    x = RNG.normal(size=(1, 3, 8, 8)).astype(np.float32)
    inits = {"w": (RNG.normal(size=(4, 3, 3, 3)) * 0.3).astype(np.float32),
             "fw": (RNG.normal(size=(64, 5)) * 0.2).astype(np.float32)}
    nodes = [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["r"]),
             node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Flatten", ["p"], ["f"]), node("MatMul", ["f", "fw"], ["y"])]
    onnx.save(model(nodes, {"x": x}, ["y"], inits, opset=13), d / "small.onnx")
    np.savez(d / "inputs.npz", x=np.stack([x, -x]))
    return d


def _one_line_refusal(command: str, err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"npukit {command}: ") and "Traceback" not in err
    return lines[0]


# -- A: every built-in target, every command ----------------------------------------------

def _argv(command: str, d, target: str) -> list[str]:
    path = str(d / "small.onnx")
    return {"run": ["run", path, "--target", target],
            "validate": ["validate", path, "--inputs", str(d / "inputs.npz"), "--target",
                         target, "--workers", "1"],
            "sweep": ["sweep", path, "--l1", "8K", "--l2", "64K", "--target", target,
                      "--workers", "1"]}[command]


@pytest.mark.parametrize("command", ["run", "validate", "sweep"])
@pytest.mark.parametrize("target", nk.targets())
def test_every_builtin_target_runs_or_is_refused_in_one_line(small, command, target, capsys):
    rc = main(_argv(command, small, target))
    out, err = capsys.readouterr()
    tiler_memories = {"L1", "L2"} <= set(nk.target(target).memories)
    if tiler_memories:
        assert rc == 0, err
        assert "Traceback" not in err
    else:
        assert rc == 2 and out == ""
        line = _one_line_refusal(command, err)
        assert f"target {target!r} has no memory named L1 or L2" in line
        assert "plan on gap8" in line


def test_the_refusal_is_an_npukit_error_from_python_too():
    with pytest.raises(nk.NpukitError, match="target 'torq' has no memory named L1 or L2"):
        npukit.onnx.sweep(b"not even a model", [8000], [64 * 1024], targets=["gap8", "torq"])


# -- B: the CLI's trace is the report's ---------------------------------------------------

def test_the_trace_of_run_is_the_trace_of_the_report(small, tmp_path, capsys):
    cli, api = tmp_path / "cli.json", tmp_path / "api.json"
    assert main(["run", str(small / "small.onnx"), "--plan", "--trace", str(cli)]) == 0
    assert f"timeline written to {cli}" in capsys.readouterr().out
    g = npukit.onnx.load(small / "small.onnx")
    x = np.load(small / "inputs.npz")["x"][0]
    g.run("sim", x=x).report.save_trace(str(api))
    assert json.loads(cli.read_text()) == json.loads(api.read_text())
    events = json.loads(cli.read_text())["traceEvents"]
    rows = {e["args"]["name"]: e["tid"] for e in events if e["ph"] == "M"}
    spans = {e["name"] for e in events if e["ph"] == "X" and e["tid"] == rows["layers"]}
    assert spans == {info.name for info in g.layers}  # the per-layer row


# -- C: plan only, without a C compiler ---------------------------------------------------

def test_plan_prints_tiles_and_cycles_and_compiles_nothing(small, tmp_path, capsys,
                                                            monkeypatch):
    import npukit.c.toolchain as toolchain

    def no_compiling(*args, **kw):
        raise AssertionError("--plan compiled C")

    monkeypatch.setattr(toolchain, "build", no_compiling)
    monkeypatch.setattr(toolchain, "run_compiler", no_compiling)
    monkeypatch.setattr(toolchain, "load", no_compiling)
    monkeypatch.setenv("NPUKIT_CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("NPUKIT_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["run", str(small / "small.onnx"), "--l1", "2K", "--plan"]) == 0
    out = capsys.readouterr().out
    g = npukit.onnx.load(small / "small.onnx", l1_budget=2048)
    report = g.report()
    assert "Memory plan of graph m on gap8:" in out and "Host run" not in out
    for info, layer in zip(g.layers, g.graph.layers):
        t = layer.tiling
        cycles = report.layers[info.name]
        us = f"{cycles / g.target.clock_mhz:.1f}"
        assert re.search(rf"^  {info.name} +{re.escape(info.ops)} +{t.n_tiles} x {t.tile} +"
                         rf"{t.l1_used} +{cycles} +{re.escape(us)}  ", out, re.M), out
    assert f"simulated: {report.cycles} cycles ({report.microseconds:.1f} us at 175 MHz)" in out
    assert g.summary() in out  # the Python API's text is the command's


def test_plan_refuses_the_options_that_need_a_run(small, capsys):
    assert main(["run", str(small / "small.onnx"), "--plan", "--check"]) == 2
    line = _one_line_refusal("run", capsys.readouterr().err)
    assert "--plan compiles and runs nothing; --check needs a run" in line


# -- D: budgets, help, microseconds -------------------------------------------------------

@pytest.mark.parametrize("command", ["run", "validate", "sweep"])
def test_l1_above_the_chip_is_refused_before_the_model_is_read(small, command, capsys):
    argv = _argv(command, small, "gap8")
    argv[1] = str(small / "missing.onnx")  # refused before the model is read
    argv += ["--l1", "0.5M"] if command != "sweep" else []
    if command == "sweep":
        argv[argv.index("--l1") + 1] = "8K,0.5M"
    assert main(argv) == 2
    line = _one_line_refusal(command, capsys.readouterr().err)
    assert "--l1 524288: above the L1 memory of target 'gap8' (65536 B)" in line


def _help(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as err:
        main([*argv, "--help"])
    assert err.value.code == 0
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("command", ["run", "validate", "sweep"])
def test_every_budget_option_says_what_it_takes(command, capsys):
    text = _help([command], capsys)
    for option in ("--l1", "--l2", "--l3"):
        assert re.search(rf"{option} [A-Z0-9,.]+ +(?!-)\S", text), (option, text)
    assert "K, M, G suffixes are powers of 1024" in text


def test_a_graph_report_gives_microseconds_beside_cycles(small):
    g = npukit.onnx.load(small / "small.onnx")
    r = g.report()
    assert r.microseconds == r.cycles / g.target.clock_mhz
    text = str(r)
    assert text.startswith(f"{r.cycles} cycles, {r.microseconds:.1f} us at 175 MHz")
    for name, cycles in r.layers.items():
        assert re.search(rf"{name} +{cycles} cycles +{cycles / 175:.1f} us", text), text
