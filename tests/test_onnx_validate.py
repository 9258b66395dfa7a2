"""``npukit validate`` / ``npukit sweep`` and their engine: the same numbers from a plain loop
(npukit.onnx.load + ONNX Runtime, the oracle), the local process pool and a Dask
LocalCluster of two worker processes on loopback; a worker that dies loses no unit."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx_helpers import quantize_qdq

import npukit.onnx
from npukit.cli import main
from npukit.demo import _tiny_cnn
from npukit.onnx.check import compare, ort_run, random_inputs
from npukit.onnx.sweeps import Sweep, SweepRow
from npukit.onnx.validation import InputError, OutputStats, _stats, read_inputs
from npukit.workers import ATTEMPTS, run_units

N = 6
L1S, L2S = [8000, 12000], [32 * 1024, 48 * 1024, 64 * 1024]


def _xs(n, seed=10):
    return [{"x": np.random.default_rng(seed + i).uniform(-1, 1, (1, 3, 32, 32))
             .astype(np.float32)} for i in range(n)]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qdq")
    float_model = _tiny_cnn()
    qdq = quantize_qdq(float_model, _xs(8, seed=100), folder, act="u8")
    return folder / "float.onnx", folder / "qdq-u8-tensor.onnx", qdq


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")  # in the test extra: CI runs these
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as c:
        yield c.scheduler_address


@pytest.mark.slow
def test_validate_matches_a_plain_loop_bit_exact(models):
    float_path, qdq_path, qdq = models
    xs = _xs(N)
    v = npukit.onnx.validate(qdq_path, xs, float_path, l1_budget=8000, l2_budget=64 * 1024,
                             workers=2)
    # The oracle: each input by hand through npukit and ONNX Runtime.
    g = npukit.onnx.load(qdq, l1_budget=8000, l2_budget=64 * 1024)
    ours = [g.run("c", **x).outputs["y"].copy() for x in xs]
    ort = [ort_run(qdq, x)[0]["y"] for x in xs]
    ref = [ort_run(float_path, x)[0]["y"] for x in xs]
    model, against_ref = v.outputs
    assert (model.against, against_ref.against) == ("model", "reference")
    assert all(o.tobytes() == r.tobytes() for o, r in zip(ours, ort))  # uint8 QDQ: bit-exact
    assert model.exact == 1.0 and model.inputs_exact == 1.0 and model.max_abs == 0.0
    assert model.worst == () and "worst: none differ" in str(model)  # text and JSON agree
    assert v.within and v.count == N and not v.failed
    errs = [float(np.abs(o.astype(np.float64) - r).max()) for o, r in zip(ours, ref)]
    assert against_ref.max_abs == max(errs) > 0  # quantization error, seen apart
    assert against_ref.top1 == np.mean([np.argmax(o) == np.argmax(r) for o, r in zip(ours, ref)])
    worst = sorted(range(N), key=lambda i: (-errs[i], f"#{i}"))[:5]
    assert [n for n, _ in against_ref.worst] == [f"#{i}" for i in worst]
    rel = max(compare("y", o, r).max_rel for o, r in zip(ours, ref))
    assert against_ref.max_rel == rel


@pytest.mark.slow  # worker processes or a Dask cluster, models planned per budget
def test_validate_same_json_on_pool_loop_and_dask(models, cluster):
    float_path, qdq_path, _ = models
    kw = dict(l1_budget=8000, l2_budget=64 * 1024, backend="sim")
    runs = [npukit.onnx.validate(qdq_path, _xs(N), float_path, workers=w, **kw).to_json()
            for w in (1, 2)]
    runs.append(npukit.onnx.validate(qdq_path, _xs(N), float_path, scheduler=cluster,
                                     **kw).to_json())
    assert runs[0] == runs[1] == runs[2]
    assert json.loads(runs[0])["cycles"][0] > 0


@pytest.mark.slow  # worker processes or a Dask cluster, models planned per budget
def test_sweep_cycles_equal_load_and_sim_everywhere(models, cluster, tmp_path):
    _, qdq_path, qdq = models
    s = npukit.onnx.sweep(qdq_path, L1S, L2S, workers=2)
    assert len(s.rows) == 6 and all(r.fits for r in s.rows)
    for r in s.rows:
        g = npukit.onnx.load(qdq, l1_budget=r.l1_budget, l2_budget=r.l2_budget)
        assert r.cycles == g.run("sim", **random_inputs(g)).cycles
        assert r.l2_used == g.memory["L2"].static + g.memory["L2"].dynamic <= r.l2_budget
    assert npukit.onnx.sweep(qdq_path, L1S, L2S, scheduler=cluster) == s
    tight = npukit.onnx.sweep(qdq_path, [800], [32 * 1024], workers=1).rows[0]
    assert not tight.fits and "800" in tight.why_not and tight.cycles is None


@pytest.mark.slow  # worker processes or a Dask cluster, models planned per budget
def test_sweep_command_csv_and_plot(models, tmp_path, capsys):
    _, qdq_path, qdq = models
    out, png = tmp_path / "s.csv", tmp_path / "s.png"
    assert main(["sweep", str(qdq_path), "--l1", "8000,12000", "--l2", "32K,48K,64K",
                 "--workers", "2", "--csv", str(out), "--plot", str(png)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[-2:] == [f"rows written to {out}", f"plot written to {png}"]
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 6
    for r in rows:
        g = npukit.onnx.load(qdq, l1_budget=int(r["l1_budget"]), l2_budget=int(r["l2_budget"]))
        assert int(r["cycles"]) == g.run("sim", **random_inputs(g)).cycles
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow  # worker processes or a Dask cluster, models planned per budget
def test_validate_command_folder_and_stacked_npz_agree(models, tmp_path, capsys):
    _, qdq_path, _ = models
    xs = _xs(4)
    folder = tmp_path / "set"
    folder.mkdir()
    for i, x in enumerate(xs):
        np.save(folder / f"img{i}.npy", x["x"])
    np.savez(tmp_path / "stack.npz", x=np.stack([x["x"] for x in xs]))
    outs = []
    for path in (folder, tmp_path / "stack.npz"):
        js = tmp_path / f"{path.stem}.json"
        assert main(["validate", str(qdq_path), "--inputs", str(path), "--l1", "8000",
                     "--l2", "64K", "--workers", "2", "--json", str(js)]) == 0
        text = capsys.readouterr().out
        assert f"numbers written to {js}" in text
        outs.append(json.loads(js.read_text()))
        # Every input bit-exact: the text says none differ, and the JSON names none.
        assert "worst: none differ" in text and outs[-1]["outputs"][0]["worst"] == []
    assert outs[0]["outputs"][0]["exact"] == outs[1]["outputs"][0]["exact"] == 1.0
    assert outs[0]["count"] == outs[1]["count"] == 4
    names = [n for n, _ in read_inputs(tmp_path / "stack.npz", {"x": npukit.onnx.Port(
        "x", (1, 3, 32, 32), np.dtype(np.float32))})]
    assert names == [f"stack.npz[{i}]" for i in range(4)]


def test_validate_refuses_inputs_of_the_wrong_shape(models, tmp_path, capsys):
    _, qdq_path, _ = models
    np.savez(tmp_path / "bad.npz", x=np.zeros((3, 1, 3, 16, 16), np.float32))
    with pytest.raises(InputError, match=r"'x' is float32 \(1, 3, 32, 32\).*\(1, 3, 16, 16\)"):
        npukit.onnx.validate(qdq_path, tmp_path / "bad.npz")
    assert main(["validate", str(qdq_path), "--inputs", str(tmp_path / "bad.npz")]) == 2
    assert "(1, 3, 16, 16)" in capsys.readouterr().err


def test_worst_names_the_inputs_that_differ_in_the_text_and_the_json():
    ref = [np.array([1.0, 2.0], np.float32)] * 3
    ours = [ref[0], ref[1] + np.float32(1e-6), ref[2]]
    s = _stats("y", "model", ["a", "b", "c"], ours, ref, None, False)
    assert [n for n, _ in s.worst] == ["b"] and "worst: b (" in str(s)
    same = _stats("y", "model", ["a", "b", "c"], ref, ref, None, False)
    assert same.worst == () and "worst: none differ" in str(same)
    assert isinstance(same, OutputStats)


def _row(l1, l2, cycles):
    return SweepRow("gap8", l1, l2, None, True, "", 1, 1, 0, cycles, 0, cycles / 175)


def test_the_sweep_plot_has_a_log2_l2_axis_and_a_marker_per_series():
    pytest.importorskip("matplotlib")
    rows = [_row(l1, l2, 10_000 // (k + 1) + l1 // 100) for l1 in (4000, 8000, 12000)
            for k, l2 in enumerate((16 << 10, 32 << 10, 64 << 10))]
    fig = Sweep(tuple(rows)).figure()
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2
    series = [ln for ln in ax.get_lines() if not ln.get_label().startswith("Pareto")]
    assert len(series) == 3
    assert len({(ln.get_marker(), ln.get_linestyle()) for ln in series}) == 3
    assert all(ln.get_marker() not in (None, "None", "") for ln in series)


def test_a_sweep_prints_microseconds_beside_cycles():
    text = str(Sweep((_row(4000, 16 << 10, 1750),)))
    assert re.search(r"cycles +us", text) and re.search(r" 1750 +10\.0 ", text), text


@pytest.mark.slow  # two worker processes compile the model's C
def test_a_script_without_a_main_guard_validates_once(models, tmp_path):
    """docs/onnx.md's example saved as a script, no ``if __name__ == "__main__":``: the
    workers never run the script again, so it finishes and prints its result once."""
    _, qdq_path, _ = models
    script = tmp_path / "no_guard.py"
    script.write_text(f"""import numpy as np
import npukit.onnx

xs = [{{"x": np.full((1, 3, 32, 32), v, np.float32)}} for v in (-0.5, 0.0, 0.5)]
v = npukit.onnx.validate({str(qdq_path)!r}, xs, l1_budget=8000, l2_budget=64 * 1024,
                         workers=2)
print("validated", v.count, v.within)
""")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines() == ["validated 3 True"], r.stdout + r.stderr[-2000:]


# -- the engine: a worker that dies -------------------------------------------------------

def _square_or_die(unit):
    value, marker = unit
    if value == 3:
        os._exit(7)  # always: the unit kills each worker that runs it
    if value == 5 and not Path(marker).exists():  # once: the retry succeeds
        Path(marker).touch()
        os._exit(9)
    return value * value


@pytest.mark.slow
def test_a_dying_worker_loses_no_unit(tmp_path):
    marker = str(tmp_path / "died-once")
    outcomes = run_units(_square_or_die, [(v, marker) for v in range(8)], workers=2)
    assert [o.value for o in outcomes if o.ok] == [v * v for v in range(8) if v != 3]
    assert Path(marker).exists()  # 5 died once and was run again
    failed = outcomes[3]
    assert not failed.ok and "exit code 7" in failed.error and str(ATTEMPTS) in failed.error


def _raises(unit):
    raise ValueError(f"unit {unit} refused")


@pytest.mark.slow
def test_an_error_of_a_unit_is_its_outcome():
    outcomes = run_units(_raises, [1, 2], workers=1)
    assert [o.error for o in outcomes] == ["ValueError: unit 1 refused",
                                           "ValueError: unit 2 refused"]
