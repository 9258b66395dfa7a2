"""Malformed operands that once raised a Python traceback are one-line ``ModelError``s naming
the node; ``--emit`` of models with int64, bool, int16 and uint64 inputs and outputs writes a
project whose ``make check`` reproduces the outputs."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

pytest.importorskip("onnx")
import onnx  # noqa: E402
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx_helpers import model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit.cli import main  # noqa: E402
from npukit.errors import ModelError  # noqa: E402

X = np.ones((1, 4), np.float32)


def _refused(m, text):
    with pytest.raises(ModelError, match=text) as e:
        npukit.onnx.load(m)
    assert "\n" not in str(e.value)


def test_if_with_an_empty_condition():
    then = h.make_graph([node("Identity", ["x"], ["a"])], "t", [],
                        [h.make_tensor_value_info("a", T.FLOAT, [1, 4])])
    els = h.make_graph([node("Neg", ["x"], ["b"])], "e", [],
                       [h.make_tensor_value_info("b", T.FLOAT, [1, 4])])
    m = model([node("If", ["c"], ["y"], then_branch=then, else_branch=els)], {"x": X}, ["y"],
              {"c": np.zeros((0,), bool)})
    _refused(m, r"condition 'c' holds 0 values")


def test_sequence_at_with_an_empty_position():
    m = model([node("SequenceConstruct", ["x", "x"], ["s"]), node("SequenceAt", ["s", "p"], ["y"])],
              {"x": X}, ["y"], {"p": np.zeros((0,), np.int64)})
    _refused(m, r"position 'p' holds 0 values")


def test_split_to_sequence_with_split_0():
    m = model([node("SplitToSequence", ["x", "sp"], ["s"], axis=1),
               node("SequenceAt", ["s", "p"], ["y"])], {"x": X}, ["y"],
              {"sp": np.array(0, np.int64), "p": np.array(0, np.int64)})
    _refused(m, r"split 0")


@pytest.mark.parametrize("bad", [np.inf, np.nan, -2.0])
def test_resize_with_a_non_finite_scale(bad):
    x = np.ones((1, 1, 4, 4), np.float32)
    m = model([node("Resize", ["x", "", "sc"], ["y"], mode="nearest")], {"x": x}, ["y"],
              {"sc": np.array([1, 1, bad, 1], np.float32)})
    _refused(m, r"scales .*finite number above 0")


@pytest.mark.parametrize("dt", [np.int64, np.bool_, np.int16, np.uint64])
def test_emit_of_other_input_and_output_types(tmp_path, capsys, dt):
    x = (np.arange(8).reshape(2, 4) % 2).astype(dt)
    op = "Not" if dt == np.bool_ else "Neg" if dt in (np.int64, np.int16) else "Identity"
    m = model([node(op, ["x"], ["y"]), node("Cast", ["y"], ["z"], to=1)], {"x": x}, ["y", "z"])
    onnx.save(m, tmp_path / "m.onnx")
    assert main(["run", str(tmp_path / "m.onnx"), "--emit", str(tmp_path / "e")]) == 0
    if shutil.which("make") and shutil.which("cc"):
        r = subprocess.run(["make", "-s", "-C", str(tmp_path / "e"), "check"],
                           capture_output=True, text=True)
        assert r.returncode == 0 and "outputs identical" in r.stdout, r.stderr


@pytest.mark.parametrize("which", ["trip", "cond"])
def test_loop_with_an_empty_trip_count_or_condition(which):
    body = h.make_graph([node("Identity", ["c_in"], ["c_out"]), node("Neg", ["v_in"], ["v_out"])],
                        "b", [h.make_tensor_value_info("i", T.INT64, []),
                              h.make_tensor_value_info("c_in", T.BOOL, []),
                              h.make_tensor_value_info("v_in", T.FLOAT, [1, 4])],
                        [h.make_tensor_value_info("c_out", T.BOOL, []),
                         h.make_tensor_value_info("v_out", T.FLOAT, [1, 4])])
    trip = np.zeros((0,), np.int64) if which == "trip" else np.array(3, np.int64)
    cond = np.zeros((0,), bool) if which == "cond" else np.array(True)
    m = model([node("Loop", ["n", "c", "x"], ["y"], body=body)], {"x": X}, ["y"],
              {"n": trip, "c": cond})
    _refused(m, r"holds 0 values|differ in rank")  # ONNX shape inference may say it first
