"""The demo's sections on programs written elsewhere (npukit.demo_models): the network
blocks are checked against ONNX Runtime for real, and the public-style Compass DSL example
kernel is right for every length, writing nothing past it."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest

from npukit import demo_models
from npukit.dsl import BuildManager

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "dsl" / "relu_add_int8.py"


@pytest.mark.slow
def test_blocks_hold_and_fail_when_onnx_runtime_disagrees(monkeypatch, capsys):
    pytest.importorskip("onnxruntime")
    assert [c.ok for c in demo_models.blocks()] == [True] * 4
    import npukit.onnx.check as check

    real = check.ort_run

    def off(model, inputs, *a, **kw):  # ONNX Runtime's output moved by 1e-3 of its range
        outs, t = real(model, inputs, *a, **kw)
        return {k: v + 1e-3 * np.abs(v).max() for k, v in outs.items()}, t

    monkeypatch.setattr(check, "ort_run", off)
    checks = {c.name: c.ok for c in demo_models.blocks()}
    assert checks == {"MobileNetV3 block: C = ONNX Runtime": False,
                      "MobileNetV3 block: C = sim": True,
                      "encoder block: C = ONNX Runtime": False, "encoder block: C = sim": True}
    assert capsys.readouterr().out.count("DIFFERS") == 2


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 31, 33, 128, 129, 4 * 4096 + 77])
def test_the_public_style_example_kernel_for_every_length(n):
    kernel = runpy.run_path(str(EXAMPLE))["relu_add_int8"]
    r = np.random.default_rng(n)
    a = r.integers(-128, 128, n, dtype=np.int8)
    b = r.integers(-128, 128, n, dtype=np.int8)
    a[:2], b[:2] = (100, -100), (100, -100)  # one sum saturates high, one low then ReLU
    want = np.maximum(np.clip(a.astype(np.int16) + b, -128, 127), 0).astype(np.int8)
    ex = BuildManager(target="X2_1204").build(kernel)
    for run in (kernel, ex):
        out = np.full(n + 16, 77, np.int8)  # canaries past n
        run(a, b, out[:n], n)
        assert (out[:n] == want).all() and (out[n:] == 77).all()
    assert want[0] == 127 and want[1] == 0
