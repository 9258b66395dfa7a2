"""A 4-head transformer encoder block built with onnx.helper (an int64 token-id embedding
``Gather``, LayerNormalization, attention with batched MatMul and Softmax, GELU written with
Erf, residual Adds) against ONNX Runtime: float32 within 1e-5 of the largest output, and
quantized by ONNX Runtime's quantize_static (QDQ, uint8 and int8 activations) bit for bit on
every int8 tensor, the simulator equal to the C."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402
from onnx_helpers import against_ort, expose, quantize_qdq  # noqa: E402

VOCAB, T, E, HEADS, FF = 50, 8, 32, 4, 64


def encoder_block(rng):
    """y = x + FFN(LN2(x + Attn(LN1(x)))) for x = emb[ids] + pos, 4 heads, GELU by Erf."""
    dh = E // HEADS

    def w(*s):
        return (rng.normal(size=s) / np.sqrt(s[0])).astype(np.float32)

    inits = {"emb": rng.normal(size=(VOCAB, E)).astype(np.float32), "pos": w(T, E),
             "g1": (1 + 0.1 * rng.normal(size=E)).astype(np.float32), "b1": w(E) * 0.1,
             "g2": (1 + 0.1 * rng.normal(size=E)).astype(np.float32), "b2": w(E) * 0.1,
             **{f"w{p}": w(E, E) for p in "qkvo"}, **{f"b{p}": w(E) * 0.1 for p in "qkvo"},
             "w1": w(E, FF), "c1": w(FF) * 0.1, "w2": w(FF, E), "c2": w(E) * 0.1,
             "heads": np.array([1, T, HEADS, dh], np.int64),
             "flat": np.array([1, T, E], np.int64),
             "scale": np.array(1 / np.sqrt(dh), np.float32), "half": np.array(0.5, np.float32),
             "one": np.array(1.0, np.float32),
             "rsqrt2": np.array(1 / np.sqrt(2), np.float32)}
    n = h.make_node
    nodes = [n("Gather", ["emb", "ids"], ["x0"], axis=0), n("Add", ["x0", "pos"], ["x"]),
             n("LayerNormalization", ["x", "g1", "b1"], ["ln1"], axis=-1, epsilon=1e-5)]
    for p in "qkv":
        nodes += [n("MatMul", ["ln1", f"w{p}"], [f"{p}0"]),
                  n("Add", [f"{p}0", f"b{p}"], [f"{p}1"]),
                  n("Reshape", [f"{p}1", "heads"], [f"{p}2"])]
    nodes += [n("Transpose", ["q2"], ["q"], perm=[0, 2, 1, 3]),
              n("Transpose", ["k2"], ["kt"], perm=[0, 2, 3, 1]),
              n("Transpose", ["v2"], ["v"], perm=[0, 2, 1, 3]),
              n("MatMul", ["q", "kt"], ["s0"]), n("Mul", ["s0", "scale"], ["s"]),
              n("Softmax", ["s"], ["p"], axis=-1), n("MatMul", ["p", "v"], ["a0"]),
              n("Transpose", ["a0"], ["a1"], perm=[0, 2, 1, 3]),
              n("Reshape", ["a1", "flat"], ["a2"]), n("MatMul", ["a2", "wo"], ["o0"]),
              n("Add", ["o0", "bo"], ["o"]), n("Add", ["x", "o"], ["r1"]),
              n("LayerNormalization", ["r1", "g2", "b2"], ["ln2"], axis=-1, epsilon=1e-5),
              n("MatMul", ["ln2", "w1"], ["f0"]), n("Add", ["f0", "c1"], ["f1"]),
              n("Mul", ["f1", "rsqrt2"], ["e0"]), n("Erf", ["e0"], ["e1"]),
              n("Add", ["e1", "one"], ["e2"]), n("Mul", ["f1", "e2"], ["e3"]),
              n("Mul", ["e3", "half"], ["gelu"]), n("MatMul", ["gelu", "w2"], ["f2"]),
              n("Add", ["f2", "c2"], ["f3"]), n("Add", ["r1", "f3"], ["y"])]
    g = h.make_graph(nodes, "encoder", [h.make_tensor_value_info("ids", TensorProto.INT64,
                                                                 [1, T])],
                     [h.make_tensor_value_info("y", TensorProto.FLOAT, [1, T, E])],
                     [nh.from_array(v, k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def token_ids(rng):
    return {"ids": rng.integers(-VOCAB, VOCAB, (1, T)).astype(np.int64)}  # negatives wrap


@pytest.mark.slow
def test_float32_encoder_block_matches_onnx_runtime():
    rng = np.random.default_rng(5)
    m = encoder_block(rng)
    g, stats, outs = against_ort(m, token_ids(rng), ("c", "sim"))
    assert stats["c"]["y"].max_rel <= 1e-5
    ops = [info.ops for info in g.layers]
    assert ops[0] == "Gather" and "Softmax" in ops and "Erf" in ops
    assert ops.count("LayerNormalization") == 2 and np.std(outs["c"]["y"]) > 0.5


@pytest.mark.slow
@pytest.mark.parametrize("act", ["u8", "s8"])
def test_qdq_encoder_block_is_onnx_runtimes_bit_for_bit(act, tmp_path):
    rng = np.random.default_rng(6)
    m = encoder_block(rng)
    qm = quantize_qdq(m, [token_ids(rng) for _ in range(8)], tmp_path, act)
    # Every quantized tensor an output too: each integer layer is checked.
    qs = [n.output[0] for n in qm.graph.node if n.op_type == "QuantizeLinear"]
    g, stats, _ = against_ort(expose(qm, qs), token_ids(rng), ("c", "sim"))
    ops = [info.ops for info in g.layers]
    assert {"QLinearMatMul", "QLinearSoftmax", "QLinearAdd", "Gather"} <= set(ops)
    quantized = [c for c in stats["c"].values() if c.integer]
    assert len(quantized) >= 20 and all(c.exact == 1.0 for c in quantized)
    assert stats["c"]["y"].exact == 1.0
