"""Quantized models against ONNX Runtime: QLinearConv, QLinearMatMul, QLinearAdd and
QLinearMul (int8 and uint8, per-tensor and per-channel scales), and QDQ models made by ONNX
Runtime's own quantization tool (``quantize_static``) on a calibration set generated here.
Integer outputs must lie within 1 LSB of ONNX Runtime's; the fraction of bit-exact
elements is asserted high (an off-by-one rounding rule would drop it far below)."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_helpers import MS, against_ort, expose, model, node, quantize_qdq  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit.onnx.check import compare, ort_run  # noqa: E402

RNG = np.random.default_rng(5)


def ints(dt, shape, lo=None, hi=None):
    info = np.iinfo(dt)
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    return RNG.integers(lo, hi + 1, shape).astype(dt)


def zero(dt, v):
    """A zero point ``v`` for int8, moved to the middle of the range for uint8."""
    return np.array(v if dt == np.int8 else v + 128, dt)


@pytest.mark.parametrize("xdt,wdt", [(np.uint8, np.uint8), (np.uint8, np.int8),
                                     (np.int8, np.int8)], ids=["u8u8", "u8s8", "s8s8"])
@pytest.mark.slow
def test_qlinearconv_per_tensor_per_channel_strides_pads_groups(xdt, wdt):
    nodes, inits, outs = [], {}, []
    cases = [(False, [1, 1, 1, 1], [1, 1], 1), (True, [1, 1, 1, 1], [1, 1], 1),
             (True, [0, 1, 2, 0], [2, 1], 1), (False, [1, 1, 1, 1], [1, 1], 4),
             (True, [1, 0, 1, 0], [1, 1], 2)]
    for i, (per_channel, pads, strides, group) in enumerate(cases):
        o = 4 if group == 4 else 6
        w = ints(wdt, (o, 4 // group, 3, 3), *((-100, 100) if wdt == np.int8 else (0, 255)))
        n = o if per_channel else 1
        ws = RNG.uniform(0.002, 0.01, n).astype(np.float32).reshape(-1 if per_channel else ())
        wz = np.zeros(n if per_channel else (), wdt) if wdt == np.int8 else \
            np.full(n if per_channel else (), 128, wdt)
        inits.update({f"w{i}": w, f"ws{i}": ws, f"wz{i}": wz,
                      f"b{i}": RNG.integers(-2000, 2000, o).astype(np.int32)})
        nodes.append(node("QLinearConv", ["x", "xs", "xz", f"w{i}", f"ws{i}", f"wz{i}", "ys",
                                          "yz", f"b{i}"], [f"y{i}"], pads=pads, strides=strides,
                          group=group, kernel_shape=[3, 3]))
        outs.append(f"y{i}")
    inits.update(xs=np.float32(0.02), xz=zero(xdt, 10), ys=np.float32(0.05), yz=zero(xdt, -5))
    x = ints(xdt, (1, 4, 9, 10))
    m = model(nodes, {"x": x}, outs, inits, opset=13)
    _, stats, _ = against_ort(m, {"x": x}, ("c", "sim"), l1_budget=1200)
    assert min(c.exact for c in stats["c"].values()) >= 0.99


@pytest.mark.parametrize("dt", [np.uint8, np.int8], ids=["u8", "s8"])
def test_qlinearmatmul_qlinearadd_qlinearmul(dt):
    a, b, c = ints(dt, (5, 12)), ints(dt, (12, 7)), ints(dt, (5, 1))
    w = ints(np.int8, (12, 7), -100, 100) if dt == np.int8 else ints(np.uint8, (12, 7))
    inits = dict(sa=np.float32(0.03), za=zero(dt, 3), sb=np.float32(0.02), zb=zero(dt, -7),
                 sy=np.float32(0.4), zy=zero(dt, 1), w=w,
                 sw=RNG.uniform(0.01, 0.03, 7).astype(np.float32),
                 zw=np.zeros(7, w.dtype) if w.dtype == np.int8 else np.full(7, 128, np.uint8),
                 sy2=np.float32(0.05), sc=np.float32(0.011), zc=zero(dt, -7))
    nodes = [node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["m1"]),
             node("QLinearMatMul", ["a", "sa", "za", "w", "sw", "zw", "sy", "zy"], ["m2"]),
             node("QLinearAdd", ["a", "sa", "za", "c", "sc", "zc", "sy2", "zy"], ["a1"],
                  domain="com.microsoft"),
             node("QLinearAdd", ["a", "sa", "za", "a", "sa", "za", "sy2", "zy"], ["a2"],
                  domain="com.microsoft"),
             node("QLinearMul", ["a", "sa", "za", "c", "sc", "zc", "sy2", "zy"], ["a3"],
                  domain="com.microsoft")]
    ins = {"a": a, "b": b, "c": c}
    m = model(nodes, ins, ["m1", "m2", "a1", "a2", "a3"], inits, opset=13, extra_opsets=[MS])
    _, stats, _ = against_ort(m, ins, ("c", "sim"), l1_budget=600)
    assert min(s.exact for s in stats["c"].values()) >= 0.99


# -- QDQ models from ONNX Runtime's quantization tool --------------------------------------

def float_cnn():
    """A float CNN of the operators a QDQ model quantizes: Conv+Relu, MaxPool, depthwise Conv,
    residual Add, Sigmoid, Tanh, LeakyRelu, Clip, Concat, Pad, AveragePool,
    GlobalAveragePool, Transpose, Reshape, Gemm, Mul, Softmax."""
    r = np.random.default_rng(3)

    def w(*s, scale=0.3):
        return (r.normal(size=s) * scale).astype(np.float32)

    inits = dict(w1=w(8, 3, 3, 3), b1=w(8, scale=0.1), w2=w(8, 8, 3, 3, scale=0.15),
                 b2=w(8, scale=0.1), w3=w(8, 1, 3, 3), w4=w(10, 8 * 2), b4=w(10, scale=0.1),
                 lo=np.float32(-0.3), hi=np.float32(0.6), sc=np.float32(1.7),
                 pads=np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             node("Relu", ["c1"], ["r1"]),
             node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             node("Relu", ["c2"], ["r2"]),
             node("Conv", ["r2", "w3"], ["c3"], pads=[1, 1, 1, 1], group=8),
             node("Add", ["c3", "p1"], ["a"]), node("Sigmoid", ["a"], ["s"]),
             node("Tanh", ["a"], ["t"]), node("LeakyRelu", ["t"], ["l"], alpha=0.1),
             node("Clip", ["s", "lo", "hi"], ["k"]), node("Concat", ["l", "k"], ["cc"], axis=1),
             node("Pad", ["cc", "pads"], ["pd"]),
             node("AveragePool", ["pd"], ["ap"], kernel_shape=[3, 3], strides=[2, 2]),
             node("GlobalAveragePool", ["ap"], ["g"]),
             node("Transpose", ["g"], ["tr"], perm=[0, 2, 3, 1]), node("Flatten", ["tr"], ["f"]),
             node("Gemm", ["f", "w4", "b4"], ["z"], transB=1), node("Mul", ["z", "sc"], ["zz"]),
             node("Softmax", ["zz"], ["y"])]
    return model(nodes, {"x": np.zeros((1, 3, 16, 16), np.float32)}, ["y"], inits, opset=13)


@pytest.fixture(scope="module")
def qdq_models(tmp_path_factory):
    """The float CNN quantized by onnxruntime.quantization.quantize_static (QDQ format) with
    a calibration reader over 16 random inputs, in two flavours."""
    r = np.random.default_rng(7)
    data = [{"x": r.uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32)} for _ in range(16)]
    d = tmp_path_factory.mktemp("qdq")
    out = {}
    for name, act, per_channel in (("u8-per-tensor", "u8", False),
                                   ("s8-per-channel", "s8", True)):
        out[name] = quantize_qdq(float_cnn(), data, d, act, per_channel)
    return out


@pytest.mark.parametrize("flavour", ["u8-per-tensor", "s8-per-channel"])
@pytest.mark.slow
def test_qdq_cnn_from_quantize_static_runs_in_integers(qdq_models, flavour):
    qm = qdq_models[flavour]
    x = {"x": np.random.default_rng(99).uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32)}
    g, _, _ = against_ort(qm, x, ("c",), l1_budget=3000)
    ops = [info.ops for info in g.layers]
    # The model computes in integers between its first QuantizeLinear and the softmax.
    assert ops[0] == "QuantizeLinear"
    assert {"QLinearConv+MaxPool", "QLinearConv", "QLinearAdd", "QLinearMatMul",
            "QLinearMul", "Sigmoid (table)", "Tanh (table)", "LeakyRelu (table)",
            "QAveragePool", "QGlobalAveragePool"} <= set(ops)
    assert not any(op in ("Conv", "Gemm", "MatMul", "Add") for op in ops)
    # Every quantized tensor an output too: each integer layer is checked (as outputs, they
    # are no longer fused with what reads them).
    exposed = expose(qm, [n.output[0] for n in qm.graph.node if n.op_type == "QuantizeLinear"])
    _, stats, _ = against_ort(exposed, x, ("c", "sim"), l1_budget=3000)
    quantized = [c for c in stats["c"].values() if c.integer]
    assert len(quantized) >= 15
    assert min(c.exact for c in quantized) >= 0.95
    assert np.mean([c.exact for c in quantized]) >= 0.99


@pytest.mark.slow
def test_qdq_model_as_written_in_float32(qdq_models):
    """dtype="float32": the QuantizeLinear and DequantizeLinear nodes stay layers around
    float operations, as ONNX Runtime runs the model without its graph optimizations."""
    import onnxruntime as ort

    qm = qdq_models["u8-per-tensor"]
    x = {"x": np.random.default_rng(98).uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32)}
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(qm.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    ref = sess.run(["y"], x)[0]
    g = npukit.onnx.load(qm, dtype="float32", l1_budget=3000)
    assert sum(info.ops == "QuantizeLinear" for info in g.layers) > 10
    assert "QLinearConv" not in [info.ops for info in g.layers]
    out = g.run("c", **x).outputs["y"]
    # Float sums in another order may move a value across a rounding boundary of the next
    # QuantizeLinear: one output step (1/256 for the uint8 softmax) at most.
    assert np.abs(out - ref).max() <= 1 / 256 + 1e-6


def test_quantized_tables_are_the_function_rounded_once():
    """QDQ Sigmoid and Tanh become 256-entry tables (npukit.lut) of quantize(f(dequantize)),
    independent of ONNX Runtime: every entry is the float64 function rounded once."""
    xs, xz, ys, yz = np.float32(0.05), 128, np.float32(1 / 256), 0
    inits = dict(xs=xs, xz=np.uint8(xz), ys=ys, yz=np.uint8(yz))
    nodes = [node("DequantizeLinear", ["x", "xs", "xz"], ["d"]), node("Sigmoid", ["d"], ["s"]),
             node("QuantizeLinear", ["s", "ys", "yz"], ["y"])]
    x = np.arange(256, dtype=np.uint8).reshape(1, 256)
    m = model(nodes, {"x": x}, ["y"], inits, opset=13)
    g = npukit.onnx.load(m)
    assert [info.ops for info in g.layers] == ["Sigmoid (table)"]
    assert "256-entry table of Sigmoid, max error" in g.layers[0].detail
    out = g.run("c", x=x).outputs["y"].astype(np.int64).reshape(-1)
    real = (x.reshape(-1).astype(np.float64) - xz) * float(xs)
    want = np.clip(1 / (1 + np.exp(-real)) / float(ys), 0, 255)  # saturated at 255
    assert np.abs(out - want).max() <= 0.5 + 1e-6  # rounded to the nearest step
    ref, _ = ort_run(m, {"x": x})
    assert compare("y", out.astype(np.uint8).reshape(1, 256), ref["y"]).within


def quantize(m, inputs, act, tmp_path):
    """``m`` quantized by ONNX Runtime's quantize_static (QDQ format) on 8 random inputs."""
    r = np.random.default_rng(7)
    return quantize_qdq(m, [{k: r.uniform(-2, 2, v.shape).astype(np.float32)
                             for k, v in inputs.items()} for _ in range(8)], tmp_path, act)


@pytest.mark.parametrize("act", ["u8", "s8"])
def test_qdq_softmax_over_an_axis_of_one_value(act, tmp_path):
    """Each softmax normalizes a single value: ONNX Runtime's QLinearSoftmax gives
    floor(1 / y_scale) (its table times that overflows float32; the quotient first does not)."""
    x = np.random.default_rng(1).uniform(-1, 1, (1, 9)).astype(np.float32)
    m = quantize(model([node("Softmax", ["x"], ["y"], axis=0)], {"x": x}, ["y"], opset=13),
                 {"x": x}, act, tmp_path)
    g, stats, _ = against_ort(m, {"x": x}, ("c", "sim"))
    assert "QLinearSoftmax" in [info.ops for info in g.layers]
    assert stats["c"]["y"].exact == 1.0


@pytest.mark.slow
@pytest.mark.parametrize("alpha,beta,bias", [(0.7, 1.0, True), (0.7, 0.5, True),
                                             (1.0, 0.5, True), (1.0, 1.0, True),
                                             (0.7, 1.0, False)])
@pytest.mark.parametrize("act", ["u8", "s8"])
def test_qdq_gemm_alpha_beta_bit_exact(alpha, beta, bias, act, tmp_path):
    """ONNX Runtime computes alpha * (A B) + C: a bias scaled by alpha with the product
    (11-16 steps off before) is wrong; every output matches ONNX Runtime's exactly. Without
    a bias alpha goes into the integer layer's scale."""
    r = np.random.default_rng(3)
    x = r.uniform(-1, 1, (6, 8)).astype(np.float32)
    w, b = r.normal(size=(8, 5)).astype(np.float32), r.normal(size=5).astype(np.float32)
    m = model([node("Gemm", ["x", "w", "b"] if bias else ["x", "w"], ["y"], alpha=alpha,
                    beta=beta)], {"x": x}, ["y"], dict(w=w, b=b) if bias else dict(w=w),
              opset=13)
    g, stats, _ = against_ort(quantize(m, {"x": x}, act, tmp_path), {"x": x}, ("c", "sim"))
    assert ("QLinearMatMul" in [info.ops for info in g.layers]) == (alpha == 1 or not bias)
    assert stats["c"]["y"].exact == 1.0


@pytest.mark.parametrize("tail", ["Relu", "Clip"])
@pytest.mark.parametrize("act", ["u8", "s8"])
def test_qdq_softmax_then_relu_or_clip(tail, act, tmp_path):
    """ONNX Runtime's tool folds a Relu or Clip after a Softmax into the softmax's output
    scale (below 1/256); over 3 values the largest table entry times 1/y_scale
    overflows float32, which gave 0 (up to 255 steps off) before. Every element matches
    ONNX Runtime's QLinearSoftmax exactly."""
    x = np.random.default_rng(6).uniform(-3, 3, (4, 3)).astype(np.float32)
    x[0] = [4, -4, -4]  # one value carries the whole sum
    nodes = [node("Softmax", ["x"], ["s"], axis=-1)]
    inits = {}
    if tail == "Relu":
        nodes.append(node("Relu", ["s"], ["y"]))
    else:
        nodes.append(node("Clip", ["s", "lo", "hi"], ["y"]))
        inits = dict(lo=np.float32(0.0), hi=np.float32(0.3))
    m = quantize(model(nodes, {"x": x}, ["y"], inits, opset=13), {"x": x / 8}, act, tmp_path)
    g, stats, _ = against_ort(m, {"x": x}, ("c", "sim"))
    assert "QLinearSoftmax" in [info.ops for info in g.layers]
    assert g.output_steps["y"] < 1 / 256
    assert stats["c"]["y"].exact == 1.0


@pytest.mark.parametrize("dt", [np.uint8, np.int8], ids=["u8", "s8"])
def test_qdq_clip_with_min_above_max_gives_max(dt):
    """ONNX's Clip is min(max(x, lo), hi): with lo > hi every value is hi, in a QDQ model
    too (a clamp to the quantized hi, or a table when the output parameters differ)."""
    zp = 128 if dt == np.uint8 else 0
    inits = dict(s=np.float32(0.02), z=np.array(zp, dt), s2=np.float32(0.01),
                 z2=np.array(zp, dt), lo=np.float32(0.5), hi=np.float32(-0.2))
    nodes = [node("DequantizeLinear", ["x", "s", "z"], ["d"]),
             node("Clip", ["d", "lo", "hi"], ["c"]),
             node("QuantizeLinear", ["c", "s", "z"], ["y"]),
             node("Clip", ["d", "lo", "hi"], ["c2"]),
             node("QuantizeLinear", ["c2", "s2", "z2"], ["y2"])]
    x = ints(dt, (2, 50))
    m = model(nodes, {"x": x}, ["y", "y2"], inits, opset=13)
    g, stats, outs = against_ort(m, {"x": x}, ("c", "sim"))
    assert {"QuantizeLinear", "DequantizeLinear"}.isdisjoint(info.ops for info in g.layers)
    assert (outs["c"]["y"].astype(int) == zp - 10).all()  # -0.2 / 0.02
    assert (outs["c"]["y2"].astype(int) == zp - 20).all()
    assert min(c.exact for c in stats["c"].values()) == 1.0


@pytest.mark.parametrize("count_pad", [0, 1])
def test_qlinearaveragepool_ceil_mode_shape(count_pad):
    """ONNX Runtime's QLinearAveragePool with ceil_mode=1 drops a last window that would
    start in the end padding: H=3, pads 1, kernel 2, stride 2 gives 2 rows."""
    x = ints(np.uint8, (1, 3, 3, 9))
    inits = dict(xs=np.float32(0.03), xz=np.uint8(120), ys=np.float32(0.02), yz=np.uint8(125))
    m = model([node("QLinearAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"],
                    domain="com.microsoft", kernel_shape=[2, 2], strides=[2, 2],
                    pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=count_pad)],
              {"x": x}, ["y"], inits, opset=13, extra_opsets=[MS])
    _, stats, outs = against_ort(m, {"x": x}, ("c", "sim"))
    assert outs["c"]["y"].shape == (1, 3, 2, 5)
    assert stats["c"]["y"].exact >= 0.9
