"""The new operators inside models quantized by ONNX Runtime's quantize_static (QDQ, uint8
and int8 activations): what ONNX Runtime runs in float32 between a DequantizeLinear and a
QuantizeLinear runs so here too, and the model matches within one step of its output
scale."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_helpers import quantize_qdq  # noqa: E402
from ops_helpers import check_ops, model, node  # noqa: E402

RNG = np.random.default_rng(25)


@pytest.mark.slow
@pytest.mark.parametrize("act", ["u8", "s8"])
def test_a_conv_upsample_layer_norm_block(act, tmp_path):
    """Conv, a nearest Resize, LayerNorm written out (ReduceMean, Sub, Pow, Sqrt, Div),
    HardSwish, Erf."""
    x = RNG.normal(size=(1, 3, 6, 6)).astype(np.float32)
    inits = {"w": (RNG.normal(size=(4, 3, 3, 3)) * 0.3).astype(np.float32),
             "s": np.array([1, 1, 2, 2], np.float32), "ax": np.array([-1], np.int64),
             "two": np.array(2, np.float32), "eps": np.array(1e-5, np.float32)}
    nodes = [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             node("Resize", ["c", "", "s"], ["r"], mode="nearest"),
             node("ReduceMean", ["r", "ax"], ["m"]), node("Sub", ["r", "m"], ["d"]),
             node("Pow", ["d", "two"], ["d2"]), node("ReduceMean", ["d2", "ax"], ["v"]),
             node("Add", ["v", "eps"], ["ve"]), node("Sqrt", ["ve"], ["sd"]),
             node("Div", ["d", "sd"], ["n"]), node("HardSwish", ["n"], ["h"]),
             node("Erf", ["h"], ["y"])]
    m = model(nodes, {"x": x}, ["y"], inits, opset=18)
    cal = [{"x": RNG.normal(size=x.shape).astype(np.float32)} for _ in range(8)]
    qm = quantize_qdq(m, cal, tmp_path, act=act)
    g, out, ref = check_ops(qm, {"x": x})
    ops = [info.ops for info in g.layers]
    assert "QLinearConv" in ops and ops.count("ReduceMean") == 2 and "Resize" in ops
    assert np.unique(out["y"]).size > 20
