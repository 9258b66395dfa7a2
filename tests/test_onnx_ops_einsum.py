"""Einsum of one or two float32 operands (sums, transposes, reshapes and one MatMul) against
ONNX Runtime and numpy's einsum, with poisoned outputs; the refusals."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ops_helpers import check_ops, model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402

RNG = np.random.default_rng(73)
FORMS = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bhid,bhjd->bhij", [(2, 2, 3, 4), (2, 2, 5, 4)]),  # attention scores
    ("bhij,bhjd->bhid", [(1, 2, 3, 5), (1, 2, 5, 4)]),  # attention values
    ("bij,jk->bki", [(2, 3, 4), (4, 5)]),
    ("ij,kj", [(3, 4), (5, 4)]),  # implicit output: ik
    ("i,j->ij", [(3,), (4,)]),
    ("i,i", [(5,), (5,)]),
    ("abc,cd->", [(2, 3, 4), (4, 5)]),
    ("ijk->kj", [(2, 3, 4)]),
    ("ij->i", [(3, 4)]),
]


@pytest.mark.slow
@pytest.mark.parametrize("eq,shapes", FORMS)
def test_common_forms_are_numpys_einsum(eq, shapes):
    xs = {f"x{i}": RNG.normal(size=s).astype(np.float32) for i, s in enumerate(shapes)}
    m = model([node("Einsum", list(xs), ["y"], equation=eq)], xs, ["y"], opset=12)
    _, out, _ = check_ops(m, xs)
    want = np.einsum(eq, *(x.astype(np.float64) for x in xs.values()))
    assert out["y"].shape == want.shape
    assert np.abs(out["y"] - want).max() <= 1e-5 * max(np.abs(want).max(), 1)


@pytest.mark.parametrize("eq,shapes,match", [
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)], "without ellipses"),
    ("ii->i", [(3, 3)], "none repeated"),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], "one or two operands"),
])
def test_refusals_name_the_equation(eq, shapes, match):
    xs = {f"x{i}": RNG.normal(size=s).astype(np.float32) for i, s in enumerate(shapes)}
    m = model([node("Einsum", list(xs), ["y"], equation=eq)], xs, ["y"], opset=12)
    with pytest.raises(ModelError, match=match):
        npukit.onnx.load(m)
