"""Batch > 1 for the spatial layers (Conv, pooling, LRN), which compute one image: cut into
images, lowered per image, put together; against ONNX Runtime with poisoned outputs, float32
and QDQ."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ops_helpers import check_ops, model, node  # noqa: E402

import npukit.onnx  # noqa: E402

RNG = np.random.default_rng(27)


def cnn(batch):
    rng = np.random.default_rng(28)  # the same weights whatever the batch
    inits = {"w": (rng.normal(size=(4, 3, 3, 3)) * 0.3).astype(np.float32),
             "b": rng.normal(size=4).astype(np.float32)}
    x = rng.normal(size=(batch, 3, 8, 8)).astype(np.float32)
    nodes = [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             node("Relu", ["c"], ["r"]),
             node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             node("LRN", ["p"], ["l"], size=3),
             node("AveragePool", ["l"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             node("GlobalAveragePool", ["a"], ["y"])]
    return model(nodes, {"x": x}, ["y", "p"], inits), {"x": x}


@pytest.mark.slow
def test_a_batch_of_three_images_as_one_each():
    m, ins = cnn(3)
    g, out, _ = check_ops(m, ins)
    m1, _ = cnn(1)
    g1 = npukit.onnx.load(m1)  # fused (Conv+Relu+MaxPool): sums in another order
    for i in range(3):  # each image as a batch of one
        one = g1.run("c", x=ins["x"][i:i + 1]).outputs
        for k in ("y", "p"):
            assert np.abs(one[k] - out[k][i:i + 1]).max() <= 1e-6 * np.abs(one[k]).max()
    ops = [info.ops for info in g.layers]
    assert ops.count("Slice") == 3 * 5 and ops.count("Conv") == 3 + 1  # and the gathering
    assert out["y"].std() > 0 and np.unique(out["y"]).size == out["y"].size


@pytest.mark.slow
@pytest.mark.parametrize("act", ["u8", "s8"])
def test_a_quantized_batch(act, tmp_path):
    from onnx_helpers import quantize_qdq

    m, ins = cnn(2)
    cal = [{"x": RNG.normal(size=(2, 3, 8, 8)).astype(np.float32)} for _ in range(4)]
    qm = quantize_qdq(m, cal, tmp_path, act=act)
    g, out, _ = check_ops(qm, ins)
    assert "QLinearConv" in [info.ops for info in g.layers]
