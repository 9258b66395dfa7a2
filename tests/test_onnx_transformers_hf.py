"""BERT-, DistilBERT- and GPT-2-like models (``npukit.transformer_models``: 2 layers, hidden 128,
sequence 32, int64 token ids and attention mask, the masks as PyTorch's exporters write them)
against ONNX Runtime: float32 within 1e-4 of the largest output, and quantized by ONNX
Runtime's ``quantize_static`` (QDQ, per-channel int8 weights, uint8 or int8 activations) bit
for bit on every quantized tensor, or refused by name where the calibration made a
non-finite scale (a ``-inf`` fill, or two ``finfo.min`` fills added)."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_helpers import against_ort, expose, quantize_qdq  # noqa: E402

import npukit.onnx  # noqa: E402
import npukit.transformer_models as tm  # noqa: E402
from npukit.errors import ModelError  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("name,mask", [("bert", "arith"), ("bert", "where"),
                                       ("distilbert", "where"), ("distilbert", "ninf"),
                                       ("gpt2", "arith"), ("gpt2", "where")])
def test_float_transformer_matches_onnx_runtime(name, mask):
    rng = np.random.default_rng(11)
    m = tm.BUILDERS[name](rng, mask)
    feed = tm.inputs(rng)
    g, stats, outs = against_ort(m, feed, ("sim",))
    assert stats["sim"]["y"].max_rel <= 1e-4
    assert np.isfinite(outs["sim"]["y"]).all() and np.std(outs["sim"]["y"]) > 0.5
    ops = {info.ops for info in g.layers}
    assert {"Softmax", "LayerNormalization", "Gather"} <= ops


@pytest.mark.slow
def test_bool_mask_transformer_on_the_c_equals_the_simulator():
    rng = np.random.default_rng(12)
    against_ort(tm.distilbert(rng, "where"), tm.inputs(rng, 9), ("c", "sim"))


def _quantized(name: str, mask: str, act: str, folder, per_channel: bool = True):
    rng = np.random.default_rng(13)
    m = tm.BUILDERS[name](rng, mask)
    qm = quantize_qdq(m, [tm.inputs(rng, p) for p in (0, 3, 7)], folder, act,
                      per_channel=per_channel)
    qs = [n.output[0] for n in qm.graph.node if n.op_type == "QuantizeLinear"]
    return expose(qm, qs), tm.inputs(rng)


@pytest.mark.slow
@pytest.mark.parametrize("name,mask,act,per_channel", [
    ("bert", "arith", "u8", True), ("bert", "where", "s8", True),
    ("distilbert", "where", "u8", True), ("distilbert", "arith", "s8", True),
    ("gpt2", "where", "s8", True), ("gpt2", "where", "u8", False)])
def test_qdq_transformer_is_onnx_runtimes_bit_for_bit(name, mask, act, per_channel, tmp_path):
    qm, feed = _quantized(name, mask, act, tmp_path, per_channel)
    g, stats, _ = against_ort(qm, feed, ("sim",))
    quantized = [c for c in stats["sim"].values() if c.integer]
    assert len(quantized) >= 60 and all(c.exact == 1.0 for c in quantized)
    assert stats["sim"]["y"].exact == 1.0
    assert {"QLinearMatMul", "QLinearSoftmax"} <= {info.ops for info in g.layers}


@pytest.mark.slow
@pytest.mark.parametrize("name,mask,act", [("distilbert", "ninf", "s8"),
                                           ("gpt2", "arith", "u8")])
def test_qdq_transformer_with_an_infinite_scale_is_refused_by_name(name, mask, act,
                                                                   tmp_path):
    qm, _ = _quantized(name, mask, act, tmp_path)
    with pytest.raises(ModelError, match=r"node '\w+_QuantizeLinear' \(QuantizeLinear\): "
                                         r"scale '\w+' is inf"):
        npukit.onnx.load(qm)


@pytest.mark.slow
def test_float_vit_matches_onnx_runtime():
    rng = np.random.default_rng(14)
    m = tm.vit(rng, layers=2, hidden=64, heads=2, image=32, patch=8)
    pixels = {"pixel_values": rng.normal(size=(1, 3, 32, 32)).astype(np.float32)}
    g, stats, _ = against_ort(m, pixels, ("sim",))
    assert stats["sim"]["y"].max_rel <= 1e-4
    assert {"Conv", "Softmax", "LayerNormalization"} <= {info.ops for info in g.layers}
