"""The demo's transformers section (npukit.demo_transformers): BERT- and GPT-2-like models
checked against ONNX Runtime for real, and the embedding lookup against numpy's rows."""

from __future__ import annotations

import numpy as np
import pytest

from npukit import demo_transformers


@pytest.mark.slow
def test_transformers_hold_and_fail_when_onnx_runtime_or_the_rows_disagree(monkeypatch,
                                                                           capsys):
    pytest.importorskip("onnxruntime")
    assert [c.ok for c in demo_transformers.transformers()] == [True] * 5
    out = capsys.readouterr().out
    assert "cycles from gap8 constants" in out and "kept in L3_FLASH" in out
    import npukit.onnx.check as check

    real = check.ort_run

    def off(model, inputs, *a, **kw):  # ONNX Runtime's output moved by 1e-3 of its range
        outs, t = real(model, inputs, *a, **kw)
        return {k: v + 1e-3 * np.abs(v).max() for k, v in outs.items()}, t

    monkeypatch.setattr(check, "ort_run", off)
    from npukit.tiler.basic_kernels import rowfetch

    fetch = rowfetch._fetch  # the simulator's row fetch, one row further on
    monkeypatch.setattr(rowfetch, "_fetch", lambda T, D, W, P, Out, rows:
                        fetch(T, D, W, P, Out, (rows + 1) % D))
    checks = {c.name: c.ok for c in demo_transformers.transformers()}
    assert checks == {"BERT-like: C = ONNX Runtime": False, "BERT-like: C = sim": False,
                      "GPT-2-like: C = ONNX Runtime": False, "GPT-2-like: C = sim": False,
                      "embedding: 30,522-row table left in flash, rows fetched": False}
    assert capsys.readouterr().out.count("DIFFERS") == 4
