"""``npukit validate`` / ``npukit sweep`` and their engine: the same numbers from a plain loop
(npukit.onnx.load + ONNX Runtime, the oracle), the local process pool and a Dask
LocalCluster of two worker processes on loopback; a worker that dies loses no unit."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest
from onnx_helpers import quantize_qdq

import npukit.onnx
from npukit.cli import main
from npukit.demo import _tiny_cnn
from npukit.onnx.check import compare, ort_run, random_inputs
from npukit.onnx.validation import InputError
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
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 6
    for r in rows:
        g = npukit.onnx.load(qdq, l1_budget=int(r["l1_budget"]), l2_budget=int(r["l2_budget"]))
        assert int(r["cycles"]) == g.run("sim", **random_inputs(g)).cycles
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow  # worker processes or a Dask cluster, models planned per budget
def test_validate_command_folder_and_stacked_npz_agree(models, tmp_path):
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
        outs.append(json.loads(js.read_text()))
    assert outs[0]["outputs"][0]["exact"] == outs[1]["outputs"][0]["exact"] == 1.0
    assert outs[0]["count"] == outs[1]["count"] == 4
    assert [w[0] for w in outs[1]["outputs"][0]["worst"]][0].startswith("stack.npz[")


def test_validate_refuses_inputs_of_the_wrong_shape(models, tmp_path, capsys):
    _, qdq_path, _ = models
    np.savez(tmp_path / "bad.npz", x=np.zeros((3, 1, 3, 16, 16), np.float32))
    with pytest.raises(InputError, match=r"'x' is float32 \(1, 3, 32, 32\).*\(1, 3, 16, 16\)"):
        npukit.onnx.validate(qdq_path, tmp_path / "bad.npz")
    assert main(["validate", str(qdq_path), "--inputs", str(tmp_path / "bad.npz")]) == 2
    assert "(1, 3, 16, 16)" in capsys.readouterr().err


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
