"""Every example script runs to completion. Each one asserts its own result against numpy
(an ``assert`` in the script), so a wrong result fails here."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").rglob("*.py"))


# The larger examples are in the slow set (pytest -m "not slow" leaves them out).
SLOW = {"mnist", "mnist_l2_budget", "gelu_fp16", "silu_fp16"}


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.slow) if p.stem in SLOW
                                  else p for p in EXAMPLES], ids=[p.stem for p in EXAMPLES])
def test_example_runs(path, capsys):
    runpy.run_path(str(path), run_name="__main__")
    assert "assert" in path.read_text()  # the script checks itself
    assert capsys.readouterr().out.strip()


def test_all_seed_examples_present():
    names = {p.stem for p in EXAMPLES}
    assert {"mul_vanilla", "mul_vectorized_store", "mul_vectorized", "mul_ndim",
            "mul_fused_broadcast", "reduce_2d", "matadd", "matmax", "my_favorite_kernel",
            "cnn_conv5x5", "fft2d", "mnist", "mnist_l2_budget"} <= names
