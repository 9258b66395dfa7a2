"""GridSample of 2-D planes (a basic kernel computing as ONNX Runtime does) against ONNX
Runtime bit for bit, with poisoned outputs and C == simulator bytes: every mode, padding and
align_corners, locations inside and outside the plane; the refusals."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ops_helpers import check_ops, model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402

RNG = np.random.default_rng(83)
CASES = [(m, p, a) for m in ("nearest", "linear", "cubic")
         for p in ("zeros", "border", "reflection") for a in (0, 1)]


@pytest.mark.slow
def test_every_mode_padding_and_alignment_as_onnx_runtime():
    x = RNG.normal(size=(1, 3, 5, 6)).astype(np.float32)
    grid = RNG.uniform(-2.6, 2.6, size=(1, 4, 7, 2)).astype(np.float32)
    grid[0, 0, :3] = [[-1, -1], [1, 1], [0, 0]]  # the corners and the centre
    grid[0, 1, :2] = [[-1.9, 0.2], [1.8, -1.9]]  # far outside: every pixel read is padding
    nodes = [node("GridSample", ["x", "g"], [f"y{i}"], mode=m, padding_mode=p,
                  align_corners=a) for i, (m, p, a) in enumerate(CASES)]
    outs = [f"y{i}" for i in range(len(CASES))]
    md = model(nodes, {"x": x, "g": grid}, outs, opset=20)
    g, out, ref = check_ops(md, {"x": x, "g": grid}, l1_budget=8000)
    for k, (m, p, a) in zip(outs, CASES):
        # the same float32 operations in the same order: ONNX Runtime's bytes
        assert out[k].tobytes() == ref[k].tobytes(), (m, p, a)
        if p == "zeros":  # the far locations read zeros only
            assert (out[k][0, :, 1, :2] == 0).all() and (out[k] != 0).mean() > 0.25
    assert {info.ops for info in g.layers} == {"GridSample"}


@pytest.mark.slow
def test_opset_16_names_and_a_constant_grid():
    x = RNG.normal(size=(1, 2, 4, 4)).astype(np.float32)
    grid = RNG.uniform(-1, 1, size=(1, 3, 5, 2)).astype(np.float32)
    m = model([node("GridSample", ["x", "g"], ["y"], mode="bicubic", align_corners=1)],
              {"x": x}, ["y"], {"g": grid}, opset=16)
    _, out, _ = check_ops(m, {"x": x})
    assert out["y"].shape == (1, 2, 3, 5)


@pytest.mark.parametrize("xs,gs,match", [
    ((2, 1, 4, 4), (2, 3, 3, 2), "batch 1"),
    ((1, 1, 2, 3, 3), (1, 2, 2, 2, 3), "2-D, batch 1"),
])
def test_refusals_name_the_shapes(xs, gs, match):
    x = RNG.normal(size=xs).astype(np.float32)
    grid = RNG.uniform(-1, 1, size=gs).astype(np.float32)
    m = model([node("GridSample", ["x", "g"], ["y"])], {"x": x, "g": grid}, ["y"], opset=20)
    with pytest.raises(ModelError, match=match):
        npukit.onnx.load(m)
