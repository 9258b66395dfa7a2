"""Every example script runs to completion; each asserts its own result against numpy."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(path, capsys):
    runpy.run_path(str(path), run_name="__main__")
    out = capsys.readouterr().out
    assert "numpy False" not in out and "numpy: False" not in out
    assert "numpy True" in out or "numpy: True" in out or "match numpy: True" in out


def test_all_seed_000_examples_present():
    names = {p.stem for p in EXAMPLES}
    assert {"mul_vanilla", "mul_vectorized_store", "mul_vectorized", "mul_ndim",
            "mul_fused_broadcast", "reduce_2d"} <= names
