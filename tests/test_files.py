"""``npukit.files``: inputs are regular files, outputs are created and never replace anything
nor follow a link, arrays are read header first within a budget; malformed files are one-line
``FileRefused`` errors."""

from __future__ import annotations

import io
import os
import zipfile

import numpy as np
import pytest

from npukit import NpukitError
from npukit.files import (
    FileRefused,
    check_folder,
    check_output,
    make_folder,
    new_file,
    read_arrays,
    regular_file,
    write_new,
)


def _one_line(exc) -> str:
    text = str(exc.value)
    assert "\n" not in text and isinstance(exc.value, NpukitError)
    return text


def test_special_files_are_refused_without_opening_them(tmp_path):
    fifo = tmp_path / "x.npy"
    os.mkfifo(fifo)  # opening it would block: refused from its stat
    with pytest.raises(FileRefused) as e:
        read_arrays(fifo, "--input")
    assert "a FIFO" in _one_line(e) and "x.npy" in str(e.value)
    with pytest.raises(FileRefused, match="character device"):
        regular_file("/dev/zero", "MODEL.onnx")
    with pytest.raises(FileRefused, match="a folder"):
        regular_file(tmp_path, "MODEL.onnx")


def test_outputs_are_created_never_replaced_and_links_not_followed(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(b"model")
    with pytest.raises(FileRefused, match="is the model"):
        check_output(model, "--json", {model: "the model"})
    with pytest.raises(FileRefused, match="exists already"):
        check_output(model, "--json")
    with pytest.raises(FileRefused, match="does not exist"):
        check_output(tmp_path / "no" / "out.json", "--json")
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    os.symlink(outside, tmp_path / "link.json")
    with pytest.raises(FileRefused, match="exists already"):
        write_new(tmp_path / "link.json", "x", "--json")
    assert outside.read_text() == "keep" and model.read_bytes() == b"model"
    with new_file(tmp_path / "t.json", "--trace") as tmp:
        open(tmp, "w").write("{}")
    assert (tmp_path / "t.json").read_text() == "{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "m.onnx",
                                                          "outside.txt", "t.json"]


def test_an_output_folder_is_new_or_empty(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "Makefile").write_text("mine")
    with pytest.raises(FileRefused, match="not empty"):
        check_folder(tmp_path / "full", "--emit")
    os.symlink(tmp_path / "full", tmp_path / "ln")
    with pytest.raises(FileRefused, match="symbolic link"):
        check_folder(tmp_path / "ln", "--emit")
    assert make_folder(tmp_path / "a" / "b", "--emit").is_dir()


def _npz_bytes(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def test_a_huge_npz_header_is_refused_before_its_data_is_read(tmp_path):
    # A 2^40-element header in a tiny file; and 1 GiB of zeros that deflate to ~1 MB.
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "<f4", "fortran_order": False,
                                                "shape": (1 << 40,)})
    with zipfile.ZipFile(tmp_path / "big.npz", "w") as z:
        z.writestr("x.npy", head.getvalue())
    with pytest.raises(FileRefused, match="above the budget") as e:
        read_arrays(tmp_path / "big.npz", "--inputs", budget=1 << 20)
    _one_line(e)
    with zipfile.ZipFile(tmp_path / "bomb.npz", "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("x.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False,
                                                     "shape": (1 << 28,)})
            zeros = bytes(1 << 24)
            for _ in range(64):
                f.write(zeros)
    assert (tmp_path / "bomb.npz").stat().st_size < 4 << 20
    with pytest.raises(FileRefused, match="above the budget"):
        read_arrays(tmp_path / "bomb.npz", "--inputs", budget=1 << 20)


def test_malformed_npz_files_are_one_line(tmp_path):
    (tmp_path / "obj.npz").write_bytes(b"")
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.array([{}, 1], dtype=object), allow_pickle=True)
    with zipfile.ZipFile(tmp_path / "obj.npz", "w") as z:
        z.writestr("x.npy", buf.getvalue())
    with pytest.raises(FileRefused, match="Python objects") as e:
        read_arrays(tmp_path / "obj.npz", "--inputs")
    _one_line(e)
    good = _npz_bytes(x=np.arange(1000, dtype=np.float32))
    at = good.index(b"\x00\x00\x80\x3f")  # the value 1.0: flip a byte of the data
    bad = good[:at] + b"\x01" + good[at + 1:]
    (tmp_path / "crc.npz").write_bytes(bad)
    with pytest.raises(FileRefused, match="not a readable .npz") as e:
        read_arrays(tmp_path / "crc.npz", "--inputs")
    _one_line(e)
    (tmp_path / "nozip.npz").write_bytes(b"PK\x03\x04 not a zip at all")
    with pytest.raises(FileRefused) as e:
        read_arrays(tmp_path / "nozip.npz", "--inputs")
    _one_line(e)
    (tmp_path / "short.npy").write_bytes(b"\x93NUMPY\x01\x00")
    with pytest.raises(FileRefused, match="not a .npy array") as e:
        read_arrays(tmp_path / "short.npy", "--inputs")
    _one_line(e)


def test_arrays_read_back_as_numpy_writes_them(tmp_path):
    a, b = np.arange(12, dtype=np.int16).reshape(3, 4), np.asfortranarray(np.eye(3))
    (tmp_path / "ab.npz").write_bytes(_npz_bytes(a=a, b=b))
    got = read_arrays(tmp_path / "ab.npz", "--inputs")
    assert np.array_equal(got["a"], a) and np.array_equal(got["b"], b)
    np.save(tmp_path / "b.npy", b)
    seen = []
    got = read_arrays(tmp_path / "b.npy", "--input", check=lambda *h: seen.append(h))
    assert np.array_equal(got[""], b) and seen == [("", (3, 3), np.dtype("float64"))]


def test_a_subfolder_is_created_not_taken_over(tmp_path):
    from npukit.files import new_folder

    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "inputs")
    with pytest.raises(FileRefused, match="exists already"):
        new_folder(tmp_path / "inputs", "--emit")
    assert new_folder(tmp_path / "expected", "--emit").is_dir()


def test_the_python_api_reads_no_fifo_as_a_model(tmp_path):
    from npukit.onnx.validation import model_bytes

    os.mkfifo(tmp_path / "m.onnx")
    with pytest.raises(FileRefused, match="a FIFO"):
        model_bytes(tmp_path / "m.onnx")


def test_a_fifo_swapped_in_after_the_check_does_not_block(tmp_path, monkeypatch):
    import npukit.files as files

    os.mkfifo(tmp_path / "x.npy")
    monkeypatch.setattr(files, "regular_file", lambda path, option: path)  # the race lost
    with pytest.raises(FileRefused, match="a FIFO"):
        files.read_arrays(tmp_path / "x.npy", "--input")
