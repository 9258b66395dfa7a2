"""ConvTranspose (1-D and 2-D; strides, pads, output_padding, dilations, groups, auto_pad,
output_shape) against ONNX Runtime and a float64 numpy scatter, with poisoned outputs; fused
with the BatchNormalization and activation after it; in QDQ models as ONNX Runtime runs them;
the refusals."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from onnx_helpers import quantize_qdq  # noqa: E402
from ops_helpers import check_ops, model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402

RNG = np.random.default_rng(31)


def scatter(x, w, b, group, strides, dil, pads, out_pad):
    """ConvTranspose by its definition, in float64: every input value times the kernel added
    at ``stride * i + dilation * k``, then the pads cut (an end pad below 0 adds zeros)."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    N, C = x.shape[:2]
    rank = x.ndim - 2
    og, cg = w.shape[1], C // group
    full = [s * (n - 1) + a + d * (k - 1) + 1 for n, s, a, d, k in
            zip(x.shape[2:], strides, out_pad, dil, w.shape[2:])]
    ends = [max(pads[rank + i], 0) for i in range(rank)]
    y = np.zeros((N, og * group, *[f - min(pads[rank + i], 0) for i, f in enumerate(full)]))
    for gi in range(group):
        xs = x[:, gi * cg:(gi + 1) * cg]
        for k in np.ndindex(*w.shape[2:]):
            tap = np.einsum("nc...,co->no...", xs, w[gi * cg:(gi + 1) * cg, :, *k])
            at = tuple(slice(d * kk, d * kk + s * (n - 1) + 1, s) for kk, d, s, n in
                       zip(k, dil, strides, x.shape[2:]))
            y[(slice(None), slice(gi * og, (gi + 1) * og), *at)] += tap
    y = y[(slice(None), slice(None),
           *[slice(pads[i], y.shape[2 + i] - ends[i]) for i in range(rank)])]
    return y + (0 if b is None else b.reshape(-1, *[1] * rank))


@st.composite
def transposed(draw):
    rank = draw(st.sampled_from([1, 2]))
    group = draw(st.sampled_from([1, 2, 3]))
    depthwise = draw(st.booleans())
    C = group * draw(st.integers(1, 2))
    og = 1 if depthwise else draw(st.integers(1, 3))
    if depthwise:
        group, C = C, C  # one input and one output plane per group
    sizes = [draw(st.integers(1, 6)) for _ in range(rank)]
    ks = [draw(st.integers(1, 4)) for _ in range(rank)]
    strides = [draw(st.integers(1, 3)) for _ in range(rank)]
    dil = [draw(st.integers(1, 2)) for _ in range(rank)]
    out_pad = [draw(st.integers(0, s - 1)) for s in strides]  # ONNX Runtime: below the stride
    full = [s * (n - 1) + a + d * (k - 1) + 1 for n, s, a, d, k in
            zip(sizes, strides, out_pad, dil, ks)]
    pads = [draw(st.integers(0, (f - 1) // 2)) for f in full for _ in range(2)]
    pads = pads[0::2] + pads[1::2]
    return dict(rank=rank, group=group, C=C, og=og, sizes=sizes, ks=ks, strides=strides,
                dil=dil, out_pad=out_pad, pads=pads, batch=draw(st.integers(1, 2)),
                bias=draw(st.booleans()))


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(transposed())
def test_any_attributes_match_onnx_runtime_and_the_definition(c):
    x = RNG.normal(size=(c["batch"], c["C"], *c["sizes"])).astype(np.float32)
    w = RNG.normal(size=(c["C"], c["og"], *c["ks"])).astype(np.float32)
    b = RNG.normal(size=(c["og"] * c["group"],)).astype(np.float32) if c["bias"] else None
    inits = {"w": w, **({"b": b} if c["bias"] else {})}
    attrs = dict(strides=c["strides"], dilations=c["dil"], group=c["group"], pads=c["pads"],
                 output_padding=c["out_pad"])
    m = model([node("ConvTranspose", ["x", "w"] + (["b"] if c["bias"] else []), ["y"],
                    **attrs)], {"x": x}, ["y"], inits)
    g, out, _ = check_ops(m, {"x": x}, l1_budget=8000)
    want = scatter(x, w, b, c["group"], c["strides"], c["dil"], c["pads"], c["out_pad"])
    assert out["y"].shape == want.shape
    assert np.abs(out["y"] - want).max() <= 1e-5 * max(np.abs(want).max(), 1)
    assert any(info.ops == "Conv" for info in g.layers)


@pytest.mark.slow
@pytest.mark.parametrize("attrs", [
    dict(strides=[2, 2], auto_pad="SAME_UPPER"),
    dict(strides=[3, 2], auto_pad="SAME_LOWER", dilations=[2, 1]),
    dict(strides=[2, 3], output_shape=[8, 11]),  # the totals odd: the extra pad first
    dict(strides=[2, 3], auto_pad="SAME_UPPER", output_shape=[8, 11]),
    dict(strides=[3, 2], output_shape=[13, 10]),  # longer than the attributes give
    dict(strides=[2, 2], pads=[5, 0, 0, 6]),  # pads beyond the kernel: crops
])
def test_auto_pad_and_output_shape_as_onnx_runtime(attrs):
    x = RNG.normal(size=(1, 2, 4, 4)).astype(np.float32)
    w = RNG.normal(size=(2, 3, 3, 3)).astype(np.float32)
    b = RNG.normal(size=(3,)).astype(np.float32)
    m = model([node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)], {"x": x}, ["y"],
              {"w": w, "b": b})
    _, out, ref = check_ops(m, {"x": x})
    assert out["y"].shape == ref["y"].shape


def test_the_onnx_documentations_example_and_the_layers():
    """ONNX's ConvTranspose example with strides [3, 2] and pads [1, 2, 1, 2]: ones as weights,
    so each output is a sum of the inputs whose windows cover it."""
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    w = np.ones((1, 2, 3, 3), np.float32)
    m = model([node("ConvTranspose", ["x", "w"], ["y"], strides=[3, 2], pads=[1, 2, 1, 2])],
              {"x": x}, ["y"], {"w": w})
    g, out, _ = check_ops(m, {"x": x})
    rows = [[1, 1, 3], [1, 1, 3], [7, 4, 9], [7, 4, 9], [7, 4, 9], [13, 7, 15], [13, 7, 15]]
    assert (out["y"] == np.array([rows, rows], np.float32)[None]).all()
    assert [info.ops for info in g.layers] == ["InsertZeros", "InsertZeros", "Crop", "Crop",
                                              "Conv"]


@pytest.mark.slow
def test_batch_norm_and_relu_fuse_into_the_convolution():
    x = RNG.normal(size=(1, 3, 5, 6)).astype(np.float32)
    inits = {"w": RNG.normal(size=(3, 4, 4, 4)).astype(np.float32),
             "s": RNG.uniform(0.5, 2, 4).astype(np.float32),
             "bb": RNG.normal(size=4).astype(np.float32),
             "mu": RNG.normal(size=4).astype(np.float32),
             "var": RNG.uniform(0.5, 2, 4).astype(np.float32)}
    m = model([node("ConvTranspose", ["x", "w"], ["t"], strides=[2, 2], pads=[1, 1, 1, 1]),
               node("BatchNormalization", ["t", "s", "bb", "mu", "var"], ["u"]),
               node("Relu", ["u"], ["y"])], {"x": x}, ["y"], inits)
    g, out, _ = check_ops(m, {"x": x})
    assert [info.ops for info in g.layers][-1] == "Conv+BatchNormalization+Relu"
    assert (out["y"] == 0).mean() > 0.2 and np.unique(out["y"]).size > 50


@pytest.mark.slow
@pytest.mark.parametrize("act,per_channel", [("u8", False), ("s8", True)])
def test_qdq_runs_the_float_convtranspose_between_its_q_and_dq(act, per_channel, tmp_path):
    """ONNX Runtime keeps a QDQ ConvTranspose in float (no integer kernel fuses it): so does
    npukit; the int8 outputs within one step, nearly all identical."""
    x = RNG.normal(size=(1, 4, 6, 6)).astype(np.float32)
    inits = {"w": (RNG.normal(size=(4, 3, 3, 3)) * 0.4).astype(np.float32),
             "b": RNG.normal(size=3).astype(np.float32)}
    m = model([node("ConvTranspose", ["x", "w", "b"], ["t"], strides=[2, 2],
                    pads=[1, 1, 1, 1], output_padding=[1, 1]),
               node("Relu", ["t"], ["y"])], {"x": x}, ["y"], inits)
    cal = [{"x": RNG.normal(size=x.shape).astype(np.float32)} for _ in range(8)]
    qm = quantize_qdq(m, cal, tmp_path, act=act, per_channel=per_channel)
    g, out, ref = check_ops(qm, {"x": x})
    ops = [info.ops for info in g.layers]
    k = ops.index("Conv")
    assert ops[k - 3:k + 2] == ["DequantizeLinear", "InsertZeros", "InsertZeros", "Conv",
                                "QuantizeLinear"], ops
    step = g.output_steps["y"]
    same = np.isclose(out["y"], ref["y"], rtol=0, atol=step / 4)
    assert same.mean() >= 0.999 and np.unique(out["y"]).size > 20


@pytest.mark.parametrize("attrs,inputs,match", [
    (dict(), {"w": (2, 3, 2, 2, 2)}, "3-D ConvTranspose"),
    (dict(strides=[2, 2], output_shape=[12, 9]), {}, "output size 12"),
    (dict(strides=[2, 2], output_padding=[2, 0]), {}, "output_padding 2"),
    (dict(group=3), {}, "group=3"),
])
def test_refusals_name_the_node_and_the_attribute(attrs, inputs, match):
    shape = inputs.get("w", (2, 3, 3, 3))
    x = RNG.normal(size=(1, 2, *[4] * (len(shape) - 2))).astype(np.float32)
    w = RNG.normal(size=shape).astype(np.float32)
    m = model([node("ConvTranspose", ["x", "w"], ["y"], **attrs)], {"x": x}, ["y"], {"w": w})
    with pytest.raises(ModelError, match=match):
        npukit.onnx.load(m)


def test_weights_given_as_a_graph_input_are_refused_without_a_value():
    x = RNG.normal(size=(1, 2, 4, 4)).astype(np.float32)
    w = RNG.normal(size=(2, 3, 3, 3)).astype(np.float32)
    m = model([node("ConvTranspose", ["x", "w"], ["y"])], {"x": x, "w": w}, ["y"])
    with pytest.raises(ModelError, match="its weights 'w' must be a constant"):
        npukit.onnx.load(m)
