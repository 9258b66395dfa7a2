"""``validate`` and ``sweep`` say what they computed: a model's external data read from the
model's folder (never the current directory's file of the same name), configurations that
failed to compute reported as such (not "does not fit") with exit status 1, negative counts
refused."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError, NpukitError  # noqa: E402
from npukit.cli import main  # noqa: E402
from npukit.onnx.check import ort_run  # noqa: E402

W = np.arange(1, 65, dtype=np.float32).reshape(8, 8) / 8
X = [{"x": np.random.default_rng(i).uniform(-1, 1, (2, 8)).astype(np.float32)}
     for i in range(3)]


def _model(w: np.ndarray) -> onnx.ModelProto:
    g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["y"])], "m",
                     [h.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                     [h.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
                     [nh.from_array(w, "w")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


@pytest.fixture
def external(tmp_path, monkeypatch):
    """m.onnx with its weights in w.bin beside it; the current directory holds another
    w.bin of the same size. Returns (model path, the model with the weights inside)."""
    folder, elsewhere = tmp_path / "model", tmp_path / "cwd"
    folder.mkdir()
    elsewhere.mkdir()
    m = _model(W)
    onnx.save_model(m, folder / "m.onnx", save_as_external_data=True, location="w.bin",
                    size_threshold=0)
    (elsewhere / "w.bin").write_bytes((-W).tobytes())
    monkeypatch.chdir(elsewhere)
    return folder / "m.onnx", _model(W)


def test_validate_reads_external_data_from_the_models_folder(external):
    path, inside = external
    v = npukit.onnx.validate(path, X, inside, workers=1)  # the reference holds W itself
    assert v.within
    ref = [s for s in v.outputs if s.against == "reference"]
    assert ref and all(s.max_abs <= 1e-5 for s in ref), [str(s) for s in ref]


def test_sweep_reads_external_data_from_the_models_folder(external, capsys):
    path, _ = external
    (path.parent.parent / "cwd" / "w.bin").unlink()  # none in the current directory
    s = npukit.onnx.sweep(path, [48000], [64 * 1024], workers=1)
    assert [r.fits for r in s.rows] == [True], str(s)


def test_a_model_whose_external_data_was_not_read_is_refused(external):
    path, _ = external
    m = onnx.load(path, load_external_data=False)
    with pytest.raises(ModelError, match=r"^initializer 'w': its values are in the external "
                                         r"file 'w.bin', which was not read"):
        npukit.onnx.load(m)
    # The path itself: the data from the model's folder, as ONNX Runtime reads it.
    g = npukit.onnx.load(path)
    want, _ = ort_run(onnx.load(path), X[0])
    np.testing.assert_allclose(g.run("c", **X[0]).outputs["y"], want["y"], rtol=1e-6)


def test_a_sweep_configuration_that_failed_to_compute_says_so_and_exits_1(tmp_path, capsys):
    """A model npukit refuses (a ModelError in every configuration) is not a configuration
    that does not fit."""
    g = h.make_graph([h.make_node("Det", ["x"], ["y"])], "m",
                     [h.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
                     [h.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    path = tmp_path / "det.onnx"
    onnx.save_model(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), path)
    s = npukit.onnx.sweep(path, [48000], [64 * 1024], workers=1)
    assert [r.failed for r in s.rows] == [True] and not s.rows[0].fits
    assert "FAILED to compute: ModelError" in str(s)
    assert main(["sweep", str(path), "--l1", "48000", "--l2", "64K", "--workers", "1",
                 "--csv", str(tmp_path / "s.csv")]) == 1
    err = capsys.readouterr().err
    assert "1 of 1 configurations failed to compute" in err
    assert "failed" in (tmp_path / "s.csv").read_text().splitlines()[0]
    # A configuration that does not fit is no failure.
    tight = npukit.onnx.sweep(_mm_path(tmp_path), [100], [64 * 1024], workers=1).rows[0]
    assert not tight.fits and not tight.failed, tight


def _mm_path(tmp_path):
    path = tmp_path / "mm.onnx"
    onnx.save_model(_model(W), path)
    return path


@pytest.mark.parametrize("count", [-1, 0])
def test_a_count_below_one_is_refused(tmp_path, capsys, count):
    with pytest.raises(NpukitError, match=rf"^--count {count}: give the number of inputs"):
        npukit.onnx.validate(_mm_path(tmp_path), X, count=count, workers=1)
    folder = tmp_path / "inputs"
    folder.mkdir()
    for i, x in enumerate(X):
        np.save(folder / f"{i}.npy", x["x"])
    assert main(["validate", str(_mm_path(tmp_path)), "--inputs", str(folder), "--count",
                 str(count)]) == 2
    assert f"--count {count}: give the number" in capsys.readouterr().err


def _die_on_zero(unit):
    import os
    import time

    if unit == 0:
        os._exit(3)
    time.sleep(0.2)
    return unit


@pytest.mark.slow  # a Dask cluster
def test_dask_units_that_never_started_are_reported_not_started():
    """Unit 0 kills its worker; unit 1, queued on that worker, never started: Dask calls
    both killed, npukit says which one never began."""
    distributed = pytest.importorskip("distributed")
    import dask

    from npukit.workers import run_units

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                     host="127.0.0.1", dashboard_address=None) as c:
        outcomes = run_units(_die_on_zero, list(range(4)), None, c.scheduler_address)
    assert outcomes[0].error.startswith("KilledWorker")
    assert outcomes[1].error.startswith("not started: ")
    assert [o.value for o in outcomes[2:]] == [2, 3]
