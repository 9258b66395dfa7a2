"""Random QDQ models (tests/onnx_fuzz.py) against ONNX Runtime: 60 models of Conv, Gemm,
MatMul, Add, Softmax, pooling, Tanh, deep residual chains, Swish and global-average-pooling
heads, quantized by ONNX Runtime's own tool with int8 or uint8 activations and per-tensor or
per-channel weights; every quantized output bit-exact, a float one within tolerance.
benchmarks/qdq_fuzz.py runs hundreds."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_fuzz import check, generate, quantized  # noqa: E402

MODELS = range(1000, 1060)


@pytest.mark.slow
def test_random_qdq_models_bit_exact_against_onnx_runtime():
    cases = [generate(k) for k in MODELS]
    # the generator covers what it claims: every operation, both activation types, both
    # weight granularities
    ops = {op.split("(")[0] for c in cases for op in c.ops}
    assert {"Conv", "Gemm", "MatMul", "Add", "Softmax", "MaxPool", "AveragePool",
            "Tanh", "Mul", "Sigmoid", "GlobalAveragePool"} <= ops
    # deep residual chains: 8 joins or more in some model
    assert max(sum(op == "Add" for op in c.ops) for c in cases) >= 8
    assert {c.activations for c in cases} == {"u8", "s8"}
    assert {c.per_channel for c in cases} == {True, False}
    results = [(c, r) for c in cases for r in check(c)]
    bad = [f"{c.describe()}: {r}" for c, r in results
           if not r.within or (quantized(r) and r.exact < 1.0)]
    assert not bad, "\n".join(bad)
    # dequantized outputs, compared in steps (a last pooling may stay in float)
    assert sum(bool(r.step) for _, r in results) >= 0.8 * len(results)
    # the float outputs (a last Tanh in float) round differently from ONNX Runtime's MLAS
    assert np.mean([r.exact for _, r in results]) >= 0.9
