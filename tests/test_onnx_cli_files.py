"""The command line's files (``npukit.files``) against hostile paths: special files as
inputs, outputs that would replace the model or follow a planted link, a bad output path
found before the run, an inflating ``.npz``, ``--workers`` and ``--scheduler`` out of bounds,
names that carry terminal escapes."""

from __future__ import annotations

import io
import os
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
import onnx  # noqa: E402
from onnx_helpers import model, node  # noqa: E402

from npukit.cli import main  # noqa: E402
from npukit.workers import run_units  # noqa: E402


@pytest.fixture
def tiny(tmp_path):
    """A one-layer model (Relu of x) saved as m.onnx, and x.npy."""
    x = np.linspace(-1, 1, 2 * 3 * 4 * 4, dtype=np.float32).reshape(2, 3, 4, 4)
    onnx.save(model([node("Relu", ["x"], ["y"])], {"x": x}, ["y"]), tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", x)
    return tmp_path


def _refused(capsys, argv, text, quiet=False):
    """``npukit argv`` exits 2 with one line holding ``text``; ``quiet``: nothing ran (no
    output on stdout)."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and text in err, err
    assert not quiet or out == "", out
    return err


def test_special_files_as_the_model_or_an_input_are_refused_at_once(tiny, capsys):
    t0 = time.perf_counter()
    _refused(capsys, ["run", "/dev/zero", "--plan"], "character device")
    os.mkfifo(tiny / "fifo.onnx")
    _refused(capsys, ["run", str(tiny / "fifo.onnx"), "--plan"], "a FIFO")
    os.mkfifo(tiny / "in.npy")
    _refused(capsys, ["run", str(tiny / "m.onnx"), "--input", f"x={tiny / 'in.npy'}"],
             "a FIFO")
    assert time.perf_counter() - t0 < 60  # nothing read 1.7 GB, nothing blocked


def test_no_output_replaces_the_model_or_an_existing_file(tiny, capsys):
    before = (tiny / "m.onnx").read_bytes()
    _refused(capsys, ["run", str(tiny / "m.onnx"), "--plan", "--trace", str(tiny / "m.onnx")],
             "is the model")
    _refused(capsys, ["validate", str(tiny / "m.onnx"), "--inputs", str(tiny / "x.npy"),
                      "--json", str(tiny / "x.npy")], "--inputs")
    (tiny / "old.csv").write_text("mine")
    _refused(capsys, ["sweep", str(tiny / "m.onnx"), "--l1", "8000", "--l2", "64K",
                      "--csv", str(tiny / "old.csv")], "exists already")
    assert (tiny / "m.onnx").read_bytes() == before and (tiny / "old.csv").read_text() == "mine"


def test_a_bad_output_path_is_found_before_the_run(tiny, capsys):
    # The plot's folder is missing: refused before any plan runs (nothing on stdout).
    err = _refused(capsys, ["sweep", str(tiny / "m.onnx"), "--l1", "8000", "--l2", "64K",
                            "--plot", str(tiny / "no" / "p.png")], "does not exist", quiet=True)
    assert "--plot" in err
    _refused(capsys, ["validate", str(tiny / "m.onnx"), "--inputs", str(tiny / "x.npy"),
                      "--json", str(tiny / "no" / "v.json")], "does not exist")


def test_emit_never_follows_a_planted_link_nor_replaces_a_makefile(tiny, capsys):
    outside = tiny / "outside.c"
    outside.write_text("keep")
    proj = tiny / "proj"
    proj.mkdir()
    os.symlink(outside, proj / "mKernels.c")
    _refused(capsys, ["run", str(tiny / "m.onnx"), "--emit", str(proj)], "not empty")
    (proj / "mKernels.c").unlink()
    (proj / "Makefile").write_text("mine")
    _refused(capsys, ["run", str(tiny / "m.onnx"), "--emit", str(proj)], "not empty")
    assert outside.read_text() == "keep" and (proj / "Makefile").read_text() == "mine"


def test_emit_writes_a_new_folder(tiny, capsys):
    assert main(["run", str(tiny / "m.onnx"), "--emit", str(tiny / "new")]) == 0
    names = {p.name for p in (tiny / "new").iterdir()}
    assert {"Makefile", "main.c", "inputs", "expected"} <= names


def test_an_inflating_npz_is_refused_by_its_header(tiny, capsys):
    with zipfile.ZipFile(tiny / "bomb.npz", "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("x.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False,
                                                     "shape": (1 << 28,)})
            zeros = bytes(1 << 24)
            for _ in range(64):
                f.write(zeros)
    assert (tiny / "bomb.npz").stat().st_size < 4 << 20
    _refused(capsys, ["run", str(tiny / "m.onnx"), "--input", f"x={tiny / 'bomb.npz'}"],
             "float32 (1, 268435456)" if False else "holds float32")
    (tiny / "set").mkdir()
    os.replace(tiny / "bomb.npz", tiny / "set" / "a.npz")
    _refused(capsys, ["validate", str(tiny / "m.onnx"), "--inputs", str(tiny / "set")],
             "above the budget")


def test_malformed_npz_members_are_one_line(tiny, capsys):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.array([{}, 1], dtype=object), allow_pickle=True)
    with zipfile.ZipFile(tiny / "obj.npz", "w") as z:
        z.writestr("x.npy", buf.getvalue())
    _refused(capsys, ["run", str(tiny / "m.onnx"), "--input", f"x={tiny / 'obj.npz'}"],
             "Python objects")
    (tiny / "nozip.npz").write_bytes(b"PK\x03\x04" + bytes(100))
    _refused(capsys, ["validate", str(tiny / "m.onnx"), "--inputs", str(tiny / "nozip.npz")],
             "--inputs")


@pytest.mark.parametrize("bad", ["0", "-1", "100000"])
def test_workers_out_of_bounds_are_refused(tiny, capsys, bad):
    with pytest.raises(SystemExit) as e:
        main(["validate", str(tiny / "m.onnx"), "--inputs", str(tiny / "x.npy"),
              "--workers", bad])
    assert e.value.code == 2 and "--workers" in capsys.readouterr().err
    with pytest.raises(Exception, match="give 1 to"):
        run_units(abs, [1], workers=int(bad))


@pytest.mark.parametrize("bad", ["tcp://host", "localhost:8786", "tcp://h:99999", "tcp://:1"])
def test_a_malformed_scheduler_is_one_line(tiny, capsys, bad):
    _refused(capsys, ["validate", str(tiny / "m.onnx"), "--inputs", str(tiny / "x.npy"),
                      "--scheduler", bad], "--scheduler")


def test_validate_prints_names_escaped(tiny, capsys):
    (tiny / "set").mkdir()
    x = np.load(tiny / "x.npy")
    crafted = "a\x1b[2K\r  y within tolerance.npy"
    np.save(tiny / "set" / crafted, x)
    assert main(["validate", str(tiny / "m.onnx"), "--inputs", str(tiny / "set"),
                 "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out


_DIES = """
import os, sys
marker = {marker!r}
if os.path.exists(marker):  # the first worker to import this dies before its first unit
    os.remove(marker)
    os._exit(3)


def size(unit):
    return len(unit)
"""


def test_a_worker_that_dies_before_its_first_unit_loses_nothing(tmp_path, monkeypatch):
    (tmp_path / "dies_early.py").write_text(_DIES.format(marker=str(tmp_path / "marker")))
    monkeypatch.syspath_prepend(str(tmp_path))
    import dies_early
    (tmp_path / "marker").write_text("")
    units = [bytes(4 << 20), bytes(10), bytes(20)]  # the first past any pipe's buffer
    outcomes = run_units(dies_early.size, units, workers=1)
    assert [o.value for o in outcomes] == [4 << 20, 10, 20]
    assert not (tmp_path / "marker").exists()
    sys.modules.pop("dies_early", None)
    assert Path(dies_early.__file__).exists()


def test_a_corrupt_reference_or_one_with_other_outputs_is_refused_once(tiny, capsys):
    (tiny / "set").mkdir()
    os.replace(tiny / "x.npy", tiny / "set" / "x.npy")
    (tiny / "bad.onnx").write_bytes(b"\x08\x07garbage\xff\xff")
    _refused(capsys, ["validate", str(tiny / "m.onnx"), "--inputs", str(tiny / "set"),
                      "--reference", str(tiny / "bad.onnx")], "--reference")
    x = np.load(tiny / "set" / "x.npy")
    onnx.save(model([node("Relu", ["x"], ["z"])], {"x": x}, ["z"]), tiny / "other.onnx")
    _refused(capsys, ["validate", str(tiny / "m.onnx"), "--inputs", str(tiny / "set"),
                      "--reference", str(tiny / "other.onnx")], "not the model's ['y']")


def test_the_verdict_cannot_be_overprinted_by_a_crafted_name():
    from npukit.onnx.validation import OutputStats, Validation

    evil = "y\x1b[2K\r[within tolerance]"
    s = OutputStats(evil, "model", 0.5, 0.5, 1.0, 1.0, None, ((evil, 1.0),), False)
    text = str(Validation(2, (s,), ((evil, f"NpukitError: node {evil!r}\r"),), None))
    assert "\x1b" not in text and "\r" not in text
    assert text.endswith("OUTSIDE tolerance")


def test_cache_clear_on_a_read_only_cache_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NPUKIT_CACHE_DIR", str(tmp_path))
    (tmp_path / ("0" * 32 + ".json")).write_text("{}")

    def refuse(self, *a, **k):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(Path, "unlink", refuse)
    assert main(["cache", "clear"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Permission denied" in err


def test_a_compile_past_the_timeout_is_a_compiler_error_naming_the_file(monkeypatch):
    import subprocess

    from npukit.c import toolchain
    from npukit.errors import CompilerError

    def slow(cmd, **kw):
        raise subprocess.TimeoutExpired(cmd, kw.get("timeout"))
    monkeypatch.setattr(subprocess, "run", slow)
    with pytest.raises(CompilerError, match=r"past \d+ s compiling /x/graph\.c"):
        toolchain.run_compiler(["cc", "-O2", "-o", "/x/g.so", "/x/graph.c"])


def test_an_unusable_cache_is_one_refusal_before_any_worker(tmp_path, monkeypatch, capsys):
    x = np.linspace(-2, 2, 7 * 5, dtype=np.float32).reshape(7, 5)  # a graph of its own
    onnx.save(model([node("Neg", ["x"], ["n"]), node("Relu", ["n"], ["y"])], {"x": x}, ["y"]),
              tmp_path / "m.onnx")
    (tmp_path / "set").mkdir()
    for k in range(3):
        np.save(tmp_path / "set" / f"{k}.npy", x + k)
    (tmp_path / "cache").write_text("a file, not a folder")
    monkeypatch.setenv("NPUKIT_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["validate", str(tmp_path / "m.onnx"), "--inputs", str(tmp_path / "set"),
                 "--workers", "2"]) == 2
    out, err = capsys.readouterr()
    assert "FAILED" not in out and err.count("\n") == 1 and "cache" in err


def test_run_prints_a_crafted_output_name_escaped(tmp_path, capsys):
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    evil = "y\x1b[2K\r"
    onnx.save(model([node("Relu", ["x"], [evil])], {"x": x}, [evil]), tmp_path / "m.onnx")
    assert main(["run", str(tmp_path / "m.onnx"), "--check", "--no-cycles"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and repr(evil) in out


def test_an_input_is_read_alone_from_an_npz_holding_every_input(tmp_path, capsys):
    a = np.ones((1, 64), np.float32)
    b = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    onnx.save(model([node("Add", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"]),
              tmp_path / "m.onnx")
    np.savez(tmp_path / "all.npz", a=a, b=b)  # b: 64 times a's bytes and more
    assert main(["run", str(tmp_path / "m.onnx"), "--input", f"a={tmp_path / 'all.npz'}",
                 "--input", f"b={tmp_path / 'all.npz'}", "--no-cycles"]) == 0
    np.savez(tmp_path / "two.npz", c=a, d=b)
    _refused(capsys, ["run", str(tmp_path / "m.onnx"), "--input", f"a={tmp_path / 'two.npz'}"],
             "none named 'a'")


def test_a_sweep_of_a_file_that_is_no_model_is_one_refusal(tmp_path, capsys):
    (tmp_path / "m.onnx").write_bytes(b"\x08\x07garbage\xff\xff")
    _refused(capsys, ["sweep", str(tmp_path / "m.onnx"), "--l1", "4000,8000", "--l2",
                      "16K,64K", "--workers", "2"], "is not an ONNX model", quiet=True)


def test_a_trace_inside_the_emit_folder_is_refused_before_the_run(tiny, capsys):
    (tiny / "proj").mkdir()
    _refused(capsys, ["run", str(tiny / "m.onnx"), "--emit", str(tiny / "proj"), "--trace",
                      str(tiny / "proj" / "t.json")], "inside --emit", quiet=True)
    assert not any((tiny / "proj").iterdir())
