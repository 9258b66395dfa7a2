"""Every operator npukit imports from ONNX, with its attribute variants, against ONNX Runtime
through the C back end (and the simulator, which must agree with the C bit for bit). Each
model carries several variants as separate outputs, so few programs are compiled. Float32
outputs must lie within 1e-4 of ONNX Runtime's, relative to the output's largest magnitude.
"""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_helpers import against_ort, model, node  # noqa: E402

RNG = np.random.default_rng(11)


def randn(*shape, scale=1.0):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


CONVS = [dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
         dict(kernel_shape=[3, 3], strides=[2, 2]),
         dict(kernel_shape=[3, 3], dilations=[2, 2], pads=[2, 0, 1, 3]),
         dict(kernel_shape=[1, 1]),
         dict(kernel_shape=[3, 3], group=4, pads=[1, 1, 1, 1]),  # depthwise
         dict(kernel_shape=[3, 3], group=2, auto_pad="SAME_UPPER", strides=[2, 2]),
         dict(kernel_shape=[5, 3], auto_pad="SAME_LOWER"),
         dict(kernel_shape=[3, 3], auto_pad="VALID", strides=[1, 2])]


def conv_model():
    x = randn(1, 4, 11, 13)
    nodes, inits, outs = [], {}, []
    for i, a in enumerate(CONVS):
        g = a.get("group", 1)
        o = 4 if g == 4 else 6
        inits[f"w{i}"] = randn(o, 4 // g, *a["kernel_shape"], scale=0.3)
        inits[f"b{i}"] = randn(o)
        nodes.append(node("Conv", ["x", f"w{i}", f"b{i}"], [f"y{i}"], **a))
        outs.append(f"y{i}")
    return model(nodes, {"x": x}, outs, inits), {"x": x}


@pytest.mark.parametrize("l1", [64000, 1500], ids=["whole-planes", "row-tiles"])
@pytest.mark.slow
def test_conv_pads_strides_dilations_groups_auto_pad(l1):
    m, x = conv_model()
    g, stats, _ = against_ort(m, x, ("c", "sim"), l1_budget=l1)
    # Small L1: inputs that need padding rows get a pad_axis layer and are read in row tiles.
    pad_rows = [info for info in g.layers if info.ops == "Pad rows"]
    assert bool(pad_rows) == (l1 == 1500)
    assert max(c.max_rel for c in stats["c"].values()) < 1e-5


def test_a_kernel_on_threads_is_called_with_its_argument_values():
    """The cores of a convolution's basic kernel (one plane's, a tile of features', a
    depthwise tile's) run on the host's threads; the task that runs them writes the call
    with its arguments' values, so a 3x3 filter's Fx and Fy stay
    the literal 3 that gcc specialises the kernel to (passed as variables through the
    task's context, they made the 224x224 CNN of benchmarks/onnx_cnn.py 2x slower)."""
    import re

    import npukit.onnx

    m, _ = conv_model()
    src = npukit.onnx.load(m).c_source()
    runs = re.findall(r"void npk_task\d+_run\((.*?)\)\n\{(.*?)\n\}", src, flags=re.S)
    convs = [(params, body) for params, body in runs
             if re.search(r"Ker(Par|Planes)?ConvNpk_fl\(", body)]
    assert len(convs) >= len(CONVS)
    for params, body in convs:
        assert re.search(r"\(int\)\d+, +/\* Fx \*/", body) and \
            re.search(r"\(int\)\d+, +/\* Fy \*/", body)
        assert "Fx" not in params and "npk_arg" not in params


@pytest.mark.slow
def test_conv_1d_grouped_and_fused_activation_pooling():
    x = randn(1, 4, 12, 12)
    x1 = randn(1, 3, 20)
    inits = {"w": randn(8, 4, 3, 3, scale=0.3), "b": randn(8), "wg": randn(6, 2, 3, 3),
             "w1": randn(5, 3, 4), "lo": np.float32(-0.5), "hi": np.float32(0.8)}
    nodes = [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             node("Relu", ["c"], ["r"]),
             node("MaxPool", ["r"], ["y0"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Conv", ["x", "w"], ["c2"]),
             node("MaxPool", ["c2"], ["p2"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
             node("LeakyRelu", ["p2"], ["y1"], alpha=0.1),
             node("Conv", ["x", "w", "b"], ["c3"], strides=[2, 2], pads=[1, 1, 1, 1]),
             node("Clip", ["c3", "lo", "hi"], ["k3"]),
             node("AveragePool", ["k3"], ["y2"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
             node("Conv", ["x", "wg"], ["y3"], group=2, pads=[0, 1, 0, 1]),
             node("Conv", ["x1", "w1"], ["c5"], pads=[2, 1], strides=[2]),
             node("Sigmoid", ["c5"], ["y4"]),
             node("Conv", ["x", "w"], ["c6"], pads=[1, 1, 1, 1]),
             node("Tanh", ["c6"], ["y5"])]
    m = model(nodes, {"x": x, "x1": x1}, ["y0", "y1", "y2", "y3", "y4", "y5"], inits)
    g, _, _ = against_ort(m, {"x": x, "x1": x1}, ("c", "sim"), l1_budget=3000)
    fused = {info.ops for info in g.layers}
    assert {"Conv+Relu+MaxPool", "Conv+MaxPool+LeakyRelu", "Conv+Clip+AveragePool",
            "Conv+Sigmoid", "Conv+Tanh"} <= fused
    assert len(g.layers[0].nodes) == 3  # one layer stands for Conv, Relu and MaxPool


POOLS = [("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
         ("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
         ("MaxPool", dict(kernel_shape=[3, 3], dilations=[2, 2], pads=[0, 1, 2, 1])),
         ("MaxPool", dict(kernel_shape=[3, 3], auto_pad="SAME_UPPER")),
         ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                              count_include_pad=1)),
         ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                              count_include_pad=0)),
         ("AveragePool", dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 0, 1],
                              ceil_mode=1, count_include_pad=1)),
         ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
         ("AveragePool", dict(kernel_shape=[2, 2], auto_pad="SAME_LOWER", strides=[2, 2])),
         ("GlobalAveragePool", {})]


@pytest.mark.parametrize("l1", [64000, 1200], ids=["whole-planes", "row-tiles"])
@pytest.mark.slow
def test_pooling_pads_ceil_mode_dilations_count_include_pad(l1):
    x = randn(1, 3, 11, 13)
    nodes = [node(op, ["x"], [f"y{i}"], **a) for i, (op, a) in enumerate(POOLS)]
    m = model(nodes, {"x": x}, [f"y{i}" for i in range(len(POOLS))])
    against_ort(m, {"x": x}, ("c", "sim"), l1_budget=l1)


@pytest.mark.slow
def test_activations_on_a_wide_range():
    x = np.concatenate([np.linspace(-30, 30, 601), RNG.normal(size=399) * 0.01]).astype(
        np.float32).reshape(1, 1000)
    inits = {"lo": np.float32(-0.5), "hi": np.float32(0.7), "lo2": np.float32(-2)}
    nodes = [node("Relu", ["x"], ["y0"]), node("LeakyRelu", ["x"], ["y1"], alpha=0.2),
             node("LeakyRelu", ["x"], ["y2"]), node("Clip", ["x", "lo", "hi"], ["y3"]),
             node("Clip", ["x", "lo2"], ["y4"]), node("Clip", ["x"], ["y5"]),
             node("Sigmoid", ["x"], ["y6"]), node("Tanh", ["x"], ["y7"])]
    m = model(nodes, {"x": x}, [f"y{i}" for i in range(8)], inits)
    _, stats, outs = against_ort(m, {"x": x}, ("c", "sim"))
    # Element by element too, wherever the value is not tiny.
    for k in ("y6", "y7"):
        want = {"y6": 1 / (1 + np.exp(-x.astype(np.float64))),
                "y7": np.tanh(x.astype(np.float64))}[k]
        big = np.abs(want) > 1e-3
        rel = np.abs(outs["c"][k] - want)[big] / np.abs(want[big])
        assert rel.max() < 1e-5, (k, rel.max())


def test_clip_with_attributes_in_opset_6():
    x = randn(1, 50)
    m = model([node("Clip", ["x"], ["y"], min=-0.3, max=0.4)], {"x": x}, ["y"], opset=6)
    against_ort(m, {"x": x})


@pytest.mark.slow
def test_gemm_and_matmul_variants():
    a, at = randn(6, 20), randn(20, 6)
    b, bt = randn(20, 9), randn(9, 20)
    inits = {"B": b, "Bt": bt, "C1": randn(9), "C2": randn(6, 9), "C3": randn(6, 1),
             "C4": np.float32(0.25), "C5": randn(1, 9)}
    nodes = [node("Gemm", ["a", "B"], ["g1"]),
             node("Gemm", ["a", "Bt", "C1"], ["g2"], transB=1, alpha=0.5, beta=2.0),
             node("Gemm", ["at", "B", "C2"], ["g3"], transA=1),
             node("Gemm", ["a", "B", "C3"], ["g4"], beta=0.3),
             node("Gemm", ["a", "B", "C4"], ["g5p"]), node("Relu", ["g5p"], ["g5"]),
             node("Gemm", ["a", "bdyn"], ["g6"]),
             node("Gemm", ["a", "btdyn", "C5"], ["g7"], transB=1),
             node("MatMul", ["a", "B"], ["m1"]), node("MatMul", ["a3", "B"], ["m2"]),
             node("MatMul", ["v", "B"], ["m3"]), node("MatMul", ["a", "bdyn"], ["m4"]),
             node("MatMul", ["a", "v"], ["m5"])]
    ins = {"a": a, "at": at, "a3": randn(2, 3, 20), "v": randn(20), "bdyn": b, "btdyn": bt}
    outs = ["g1", "g2", "g3", "g4", "g5", "g6", "g7", "m1", "m2", "m3", "m4", "m5"]
    m = model(nodes, ins, outs, inits)
    g, _, _ = against_ort(m, ins, ("c", "sim"), l1_budget=700)
    assert any(info.ops == "Gemm+Relu" for info in g.layers)


def test_elementwise_broadcasting():
    x = randn(1, 3, 5, 7)
    inits = {"c1": randn(3, 1, 1) + 3, "c2": randn(7), "c3": randn(1, 3, 5, 7),
             "c4": randn(5, 1), "s": np.float32(0.5), "c5": randn(3, 5, 1)}
    nodes = [node("Add", ["x", "c1"], ["y0"]), node("Sub", ["x", "c2"], ["y1"]),
             node("Mul", ["x", "c3"], ["y2"]), node("Div", ["x", "c1"], ["y3"]),
             node("Add", ["x", "c4"], ["y4"]), node("Mul", ["x", "x"], ["y5"]),
             node("Sum", ["x", "c1", "c2", "y5"], ["y6"]), node("Sub", ["c2", "x"], ["y7"]),
             node("Add", ["x", "s"], ["a9"]), node("Add", ["a9", "c3"], ["a10"]),
             node("Relu", ["a10"], ["y8"]), node("Div", ["c5", "c1"], ["k"]),
             node("Mul", ["x", "k"], ["y9"]), node("Sum", ["x"], ["y10"])]
    m = model(nodes, {"x": x}, [f"y{i}" for i in range(11)], inits)
    g, _, _ = against_ort(m, {"x": x}, ("c", "sim"), l1_budget=1000)
    assert any(info.ops == "Add+Relu" for info in g.layers)


@pytest.mark.slow
def test_concat_transpose_pad_and_views():
    x = randn(1, 3, 5, 7)
    inits = {"p1": np.array([0, 0, 1, 2, 0, 0, 3, 1], np.int64),
             "p2": np.array([0, 1, 0, 0, 0, 2, 0, 0], np.int64), "v": np.float32(1.5),
             "p3": np.array([0, 0, 2, 1, 0, 0, 1, 3], np.int64),
             "p4": np.array([0, 0, -1, 2, 0, 0, 1, -2], np.int64),
             "p5": np.array([2, 1], np.int64), "ax": np.array([3], np.int64),
             "shp": np.array([0, -1, 7], np.int64), "u": np.array([0], np.int64)}
    nodes = [node("Relu", ["x"], ["r"]),
             node("Concat", ["x", "r", "x"], ["y0"], axis=1),
             node("Concat", ["x", "r"], ["y1"], axis=3),
             node("Concat", ["r", "x"], ["y2"], axis=-2),
             node("Transpose", ["x"], ["y3"], perm=[0, 2, 3, 1]),
             node("Transpose", ["x"], ["y4"], perm=[0, 3, 2, 1]),
             node("Transpose", ["x"], ["y5"], perm=[0, 1, 3, 2]),
             node("Transpose", ["x"], ["y6"], perm=[2, 0, 1, 3]),
             node("Transpose", ["r"], ["y7"]),
             node("Pad", ["x", "p1"], ["y8"]), node("Pad", ["x", "p2", "v"], ["y9"]),
             node("Pad", ["x", "p3"], ["y10"], mode="reflect"),
             node("Pad", ["x", "p3"], ["y11"], mode="edge"),
             node("Pad", ["x", "p4"], ["y12"]),
             node("Pad", ["x", "p5", "v", "ax"], ["y13"], mode="constant"),
             node("Pad", ["x", "p3"], ["y14"], mode="wrap"),
             node("Flatten", ["r"], ["y15"], axis=2), node("Reshape", ["r", "shp"], ["y16"]),
             node("Unsqueeze", ["r", "u"], ["q"]), node("Squeeze", ["q", "u"], ["y17"]),
             node("Identity", ["x"], ["y18"])]
    m = model(nodes, {"x": x}, [f"y{i}" for i in range(19)], inits, opset=19)
    g, _, _ = against_ort(m, {"x": x}, ("c", "sim"), l1_budget=1000)
    # Views name the same bytes: the Relu writes y15 (a view of r) directly; y16 and y17, two
    # more views of the same bytes, and y18 (the input itself) are copied.
    assert sum(info.ops == "Copy" for info in g.layers) == 3


@pytest.mark.slow
def test_softmax_axes_lrn_and_batchnorm():
    x = randn(1, 4, 6, 5)
    inits = {"s": randn(4), "b": randn(4), "mu": randn(4), "var": RNG.uniform(
        0.5, 2, 4).astype(np.float32), "w": randn(4, 4, 1, 1)}
    nodes = [node("Softmax", ["x"], ["y0"], axis=1), node("Softmax", ["x"], ["y1"]),
             node("Softmax", ["x"], ["y2"], axis=2),
             node("LRN", ["x"], ["y3"], size=3, alpha=0.001, beta=0.75, bias=2.0),
             node("LRN", ["x"], ["y4"], size=5),
             node("BatchNormalization", ["x", "s", "b", "mu", "var"], ["y5"], epsilon=1e-3),
             node("Conv", ["x", "w"], ["c"]),
             node("BatchNormalization", ["c", "s", "b", "mu", "var"], ["y6"])]
    m = model(nodes, {"x": x}, [f"y{i}" for i in range(7)], inits, opset=13)
    g, _, _ = against_ort(m, {"x": x}, ("c", "sim"), l1_budget=2000)
    # The BatchNormalization after the Conv is folded into its weights; the other one is a
    # scale and a shift layer.
    conv = next(info for info in g.layers if info.ops.startswith("Conv"))
    assert conv.ops == "Conv+BatchNormalization" and len(conv.nodes) == 2
    assert [info.ops for info in g.layers if "BatchNormalization (" in info.ops] == [
        "BatchNormalization (scale)", "BatchNormalization (shift)"]
    old = model([node("Softmax", ["x"], ["y"], axis=2)], {"x": x}, ["y"], opset=11)
    against_ort(old, {"x": x})  # opset 11: softmax over the flattened trailing axes


@pytest.mark.parametrize("op,count_pad", [("MaxPool", 0), ("AveragePool", 0),
                                          ("AveragePool", 1)])
def test_ceil_mode_drops_the_window_that_starts_in_the_end_padding(op, count_pad):
    """H=3, pads 1, kernel 2, stride 2, ceil_mode=1: ONNX Runtime gives 2 rows (a third
    window would start in the end padding), not ONNX shape inference's 3."""
    x = np.random.default_rng(4).normal(size=(1, 3, 3, 9)).astype(np.float32)
    attrs = dict(count_include_pad=count_pad) if op == "AveragePool" else {}
    m = model([node(op, ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1],
                    ceil_mode=1, **attrs)], {"x": x}, ["y"])
    _, _, outs = against_ort(m, {"x": x}, ("c", "sim"))
    assert outs["c"]["y"].shape == (1, 3, 2, 5)


@pytest.mark.parametrize("opset", [11, 13])
def test_clip_with_min_above_max_gives_max(opset):
    """ONNX's Clip is min(max(x, lo), hi): with lo > hi every value is hi."""
    x = np.random.default_rng(5).normal(size=(1, 3, 4, 4)).astype(np.float32)
    m = model([node("Clip", ["x", "lo", "hi"], ["y"])], {"x": x}, ["y"],
              dict(lo=np.float32(0.5), hi=np.float32(-0.2)), opset=opset)
    _, _, outs = against_ort(m, {"x": x}, ("c", "sim"))
    assert (outs["c"]["y"] == np.float32(-0.2)).all()


def test_ceil_mode_pools_in_a_chain():
    """The second pooling reads the first's ONNX Runtime shape (2 rows, not 3) and drops a
    window of its own: [1, 2, 3, 9] -> [1, 2, 2, 5] -> [1, 2, 1, 3]."""
    x = np.random.default_rng(8).normal(size=(1, 2, 3, 9)).astype(np.float32)
    m = model([node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2],
                    pads=[1, 1, 1, 1], ceil_mode=1),
               node("AveragePool", ["p"], ["y"], kernel_shape=[2, 2], strides=[2, 2],
                    pads=[0, 0, 1, 1], ceil_mode=1, count_include_pad=1)], {"x": x}, ["y"])
    _, _, outs = against_ort(m, {"x": x}, ("c", "sim"))
    assert outs["c"]["y"].shape == (1, 2, 1, 3)
