"""Tile, Slice with any steps (negative too) and Trilu: index tables read by one layer per
axis, against ONNX Runtime and numpy, with poisoned outputs; float32 and int8; the
refusals."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from ops_helpers import check_ops, model, node, run_poisoned  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402

RNG = np.random.default_rng(47)


def data(shape, dtype):
    if dtype == np.float32:
        return RNG.normal(size=shape).astype(np.float32)
    return RNG.integers(-128, 128, size=shape).astype(np.int8)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float32, np.int8])
def test_tile_repeats_every_axis_as_numpy(dtype):
    x = data((2, 3, 4), dtype)
    reps = np.array([2, 1, 3], np.int64)
    m = model([node("Tile", ["x", "r"], ["y"])], {"x": x}, ["y"], {"r": reps}, opset=13)
    g, out, _ = check_ops(m, {"x": x})
    assert (out["y"] == np.tile(x, reps)).all()
    assert [info.ops for info in g.layers] == ["Tile", "Tile"]


@st.composite
def slices(draw):
    shape = [draw(st.integers(1, 7)) for _ in range(draw(st.integers(1, 3)))]
    picked = draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape),
                           unique=True))
    rows = []
    for a in picked:
        d = shape[a]
        step = draw(st.sampled_from([-3, -2, -1, 1, 2, 3]))
        b = draw(st.integers(-d - 2, d + 2))
        e = draw(st.integers(-d - 2, d + 2))
        if len(range(d)[slice(b, e, step)]) == 0:
            b, e = (0, d) if step > 0 else (d - 1, -d - 1)
        rows.append((a, b, e, step))
    return shape, rows


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(slices(), st.sampled_from([np.float32, np.int8]))
def test_slice_with_any_steps_is_numpys_slicing(case, dtype):
    shape, rows = case
    x = data(shape, dtype)
    inits = {k: np.array([r[i] for r in rows], np.int64)
             for i, k in enumerate(["axes", "starts", "ends", "steps"])}
    m = model([node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])], {"x": x},
              ["y"], inits, opset=13)
    _, out, _ = check_ops(m, {"x": x})
    want = [slice(None)] * len(shape)
    for a, b, e, step in rows:
        want[a] = slice(b, e, step)
    assert out["y"].shape == x[tuple(want)].shape
    assert (out["y"] == x[tuple(want)]).all()


@pytest.mark.slow
def test_negative_steps_reverse_and_unit_steps_crop():
    x = data((6, 5, 4), np.float32)
    inits = {"b": np.array([-1, 1, 0], np.int64), "e": np.array([-7, 4, 10], np.int64),
             "a": np.array([0, 1, 2], np.int64), "s": np.array([-2, 1, 3], np.int64)}
    m = model([node("Slice", ["x", "b", "e", "a", "s"], ["y"])], {"x": x}, ["y"], inits,
              opset=13)
    g, out, _ = check_ops(m, {"x": x})
    assert (out["y"] == x[::-2, 1:4, ::3]).all()
    assert [info.ops for info in g.layers] == ["Slice", "Slice", "Slice"]


@pytest.mark.slow
def test_trilu_zeroes_everything_outside_even_inf_and_nan():
    x = data((2, 4, 5), np.float32)
    x[0, 3, 0], x[1, 0, 4], x[0, 1, 1] = np.inf, np.nan, -np.inf
    cases = [(u, k) for u in (0, 1) for k in (-2, 0, 1, 7)]
    nodes = [node("Trilu", ["x", f"k{i}"], [f"y{i}"], upper=u) for i, (u, _) in enumerate(cases)]
    m = model(nodes, {"x": x}, [f"y{i}" for i in range(len(cases))],
              {f"k{i}": np.array(k, np.int64) for i, (_, k) in enumerate(cases)}, opset=14)
    g, out, _ = check_ops(m, {"x": x})
    for i, (u, k) in enumerate(cases):
        keep = np.triu(np.ones((4, 5)), k) if u else np.tril(np.ones((4, 5)), k)
        want = np.where(keep, x, 0).astype(np.float32)
        assert out[f"y{i}"].tobytes() == want.tobytes(), (u, k)
    # tril with k=7 keeps everything: a copy to the output
    assert {info.ops for info in g.layers} == {"Trilu (zero column)", "Trilu", "Copy"}


@pytest.mark.slow
def test_trilu_of_int8_and_the_default_k():
    """ONNX Runtime has no int8 Trilu: numpy is the oracle."""
    x = data((3, 6), np.int8)
    m = model([node("Trilu", ["x"], ["y"], upper=0)], {"x": x}, ["y"], opset=14)
    g = npukit.onnx.load(m)
    c, sim = (run_poisoned(g, {"x": x}, be) for be in ("c", "sim"))
    assert c["y"].tobytes() == sim["y"].tobytes() == np.tril(x).tobytes()


@pytest.mark.parametrize("op,inits,match", [
    ("Tile", {"r": np.array([2, 2], np.int64)}, "repeats"),
    ("Tile", {"r": np.array([1, 0, 1], np.int64)}, "repeats|empty"),
    ("Slice", {"b": np.array([0], np.int64), "e": np.array([3], np.int64),
               "a": np.array([1], np.int64), "s": np.array([0], np.int64)}, "'step' cannot be 0"),
    ("Slice", {"b": np.array([1], np.int64), "e": np.array([3], np.int64),
               "a": np.array([1], np.int64), "s": np.array([-1], np.int64)}, "leave nothing|empty"),
])
def test_refusals_name_the_node_and_the_values(op, inits, match):
    x = data((2, 3, 4), np.float32)
    ins = ["x", *inits]
    m = model([node(op, ins, ["y"])], {"x": x}, ["y"], inits, opset=13)
    with pytest.raises(ModelError, match=match):
        npukit.onnx.load(m)


@pytest.mark.slow
@pytest.mark.parametrize("act", ["u8", "s8"])
def test_in_a_qdq_model_as_onnx_runtime_runs_it(act, tmp_path):
    """ONNX Runtime's quantize_static around a strided Slice, a Tile, a cubic Resize, a
    ConvTranspose and a Trilu: each runs in float32 between its DequantizeLinear and
    QuantizeLinear (as ONNX Runtime runs them), the int8 output ONNX Runtime's bytes."""
    from onnx_helpers import quantize_qdq

    x = RNG.normal(size=(1, 4, 8, 8)).astype(np.float32)
    inits = {"w": (RNG.normal(size=(6, 4, 3, 3)) * 0.3).astype(np.float32),
             "st": np.array([0, 7], np.int64), "en": np.array([6, -9], np.int64),
             "ax": np.array([1, 3], np.int64), "sp": np.array([2, -2], np.int64),
             "rep": np.array([1, 2, 1, 1], np.int64),
             "s": np.array([1, 1, 1.5, 1.5], np.float32),
             "wt": (RNG.normal(size=(6, 5, 3, 3)) * 0.3).astype(np.float32)}
    nodes = [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             node("Slice", ["c", "st", "en", "ax", "sp"], ["sl"]),
             node("Tile", ["sl", "rep"], ["t"]),
             node("Resize", ["t", "", "s"], ["rz"], mode="cubic"),
             node("ConvTranspose", ["rz", "wt"], ["ct"], strides=[2, 2]),
             node("Trilu", ["ct"], ["y"])]
    m = model(nodes, {"x": x}, ["y"], inits, opset=17)
    cal = [{"x": RNG.normal(size=x.shape).astype(np.float32)} for _ in range(4)]
    qm = quantize_qdq(m, cal, tmp_path, act=act)
    g, out, ref = check_ops(qm, {"x": x})
    ops = [info.ops for info in g.layers]
    assert {"Slice", "Tile", "Trilu", "InsertZeros", "Resize (rows last)"} <= set(ops)
    assert out["y"].tobytes() == ref["y"].tobytes()
