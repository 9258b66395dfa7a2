"""HardSwish and HardSigmoid absorbed by the layer before them (a convolution: dense, grouped,
depthwise; a Gemm; an Add), torch.onnx's pre-opset-14 ``x * HardSigmoid(x)`` read as one
HardSwish, and a HardSwish after a max pooling left a layer of its own (it dips below zero
before it grows, so it does not commute with the max); squeeze-excite's 1x1 convolutions of
a 1x1 plane as matrix-vector products. Float32 within 1e-5 (of the largest
output) of ONNX Runtime and of numpy in float64; the simulator's bytes the host C's over two
canary fills of the output (every element written)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_helpers import model, node

import npukit.onnx
from npukit.onnx.check import ort_run

CANARIES = (np.float32(-7.25e30), np.float32(3.5e-3))


def hsig64(v, alpha=1 / 6, beta=0.5):
    return np.clip(alpha * v + beta, 0.0, 1.0)


def conv64(x, w, b, group=1, pad=1):
    """A stride-1 convolution in float64 (the oracle), group by group."""
    C, H, W = x.shape[1:]
    O, cg, kh, kw = w.shape  # noqa: E741
    xp = np.pad(x[0].astype(np.float64), ((0, 0), (pad, pad), (pad, pad)))
    ho, wo = H + 2 * pad - kh + 1, W + 2 * pad - kw + 1
    out = np.empty((O, ho, wo))
    for o in range(O):
        g = o // (O // group)
        win = np.lib.stride_tricks.sliding_window_view(xp[g * cg:(g + 1) * cg], (kh, kw),
                                                       axis=(1, 2))
        out[o] = np.einsum("cyxij,cij->yx", win, w[o].astype(np.float64)) + b[o]
    return out[None]


def outputs(g, x: dict, shapes: dict) -> dict:
    """Each output from the simulator and the host C, over two canary fills: the same bytes."""
    got = {}
    for be in ("sim", "c"):
        each = []
        for canary in CANARIES:
            ys = {k: np.full(s, canary, np.float32) for k, s in shapes.items()}
            g.run(be, **x, **ys)
            each.append(ys)
        for k in shapes:
            assert each[0][k].tobytes() == each[1][k].tobytes(), f"{be} {k}: left unwritten"
        got[be] = each[0]
    for k in shapes:
        assert got["c"][k].tobytes() == got["sim"][k].tobytes(), f"{k}: simulator and C differ"
    return got["c"]


def close(got, ref, want) -> None:
    top = np.abs(want).max()
    assert np.abs(got - ref).max() <= 1e-5 * top
    assert np.abs(got - want).max() <= 1e-5 * top
    assert np.unique(got).size > got.size // 3


@pytest.mark.parametrize("opset", [13, 14])
def test_convolutions_absorb_hard_swish_and_hard_sigmoid(opset):
    """A dense 3x3, a grouped 3x3 (2 groups) and a depthwise 3x3 convolution each followed by
    HardSwish (at opset 13 written x * HardSigmoid(x)), a 1x1 one by HardSigmoid(0.3, 0.4)."""
    r = np.random.default_rng(opset)
    x = r.uniform(-2, 2, (1, 4, 7, 9)).astype(np.float32)
    inits = {"w0": r.normal(0, 0.6, (6, 4, 3, 3)), "w1": r.normal(0, 0.6, (6, 2, 3, 3)),
             "w2": r.normal(0, 0.6, (4, 1, 3, 3)), "w3": r.normal(0, 0.6, (5, 4, 1, 1))}
    inits.update({f"b{k}": r.normal(0, 0.5, inits[f"w{k}"].shape[0]) for k in range(4)})
    inits = {k: v.astype(np.float32) for k, v in inits.items()}
    nodes, groups = [], [1, 2, 4]
    for k, group in enumerate(groups):
        nodes.append(node("Conv", ["x", f"w{k}", f"b{k}"], [f"c{k}"], pads=[1, 1, 1, 1],
                          group=group))
        if opset >= 14:
            nodes.append(node("HardSwish", [f"c{k}"], [f"y{k}"]))
        else:  # the Mul's operands in either order
            nodes += [node("HardSigmoid", [f"c{k}"], [f"h{k}"], alpha=1 / 6),
                      node("Mul", [f"h{k}", f"c{k}"] if k % 2 else [f"c{k}", f"h{k}"],
                           [f"y{k}"])]
    nodes += [node("Conv", ["x", "w3", "b3"], ["c3"]),
              node("HardSigmoid", ["c3"], ["y3"], alpha=0.3, beta=0.4)]
    names = [f"y{k}" for k in range(4)]
    m = model(nodes, {"x": x}, names, inits, opset=opset)
    g = npukit.onnx.load(m)
    assert [info.ops for info in g.layers] == ["Conv+HardSwish"] * 3 + ["Conv+HardSigmoid"]
    ref = ort_run(m, {"x": x})[0]
    got = outputs(g, {"x": x}, {k: ref[k].shape for k in names})
    for k, group in enumerate(groups):
        c = conv64(x, inits[f"w{k}"], inits[f"b{k}"], group)
        close(got[f"y{k}"], ref[f"y{k}"], c * hsig64(c))
    close(got["y3"], ref["y3"], hsig64(conv64(x, inits["w3"], inits["b3"], pad=0), 0.3, 0.4))


def test_gemm_and_add_absorb_hard_swish_a_max_pooling_does_not():
    r = np.random.default_rng(5)
    x = r.uniform(-3, 3, (1, 3, 8, 8)).astype(np.float32)
    v = r.uniform(-3, 3, (2, 16)).astype(np.float32)
    inits = {"w": r.normal(0, 0.5, (3, 3, 3, 3)).astype(np.float32),
             "fw": r.normal(0, 0.5, (16, 5)).astype(np.float32),
             "fb": r.normal(0, 0.5, 5).astype(np.float32),
             "a": r.uniform(-3, 3, (2, 16)).astype(np.float32)}
    nodes = [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             node("HardSwish", ["p"], ["y0"]),
             node("Gemm", ["v", "fw", "fb"], ["f"]), node("HardSwish", ["f"], ["y1"]),
             node("Add", ["v", "a"], ["s"]), node("HardSwish", ["s"], ["y2"])]
    m = model(nodes, {"x": x, "v": v}, ["y0", "y1", "y2"], inits, opset=14)
    g = npukit.onnx.load(m)
    ops = [info.ops for info in g.layers]
    assert "Conv+MaxPool" in ops and "HardSwish" in ops
    assert "Gemm+HardSwish" in ops and "Add+HardSwish" in ops
    ref = ort_run(m, {"x": x, "v": v})[0]
    got = outputs(g, {"x": x, "v": v}, {k: ref[k].shape for k in ref})
    c = conv64(x, inits["w"], np.zeros(3))
    p = c.reshape(1, 3, 4, 2, 4, 2).max(axis=(3, 5))
    f = v.astype(np.float64) @ inits["fw"] + inits["fb"]
    s = v.astype(np.float64) + inits["a"]
    for k, want in (("y0", p * hsig64(p)), ("y1", f * hsig64(f)), ("y2", s * hsig64(s))):
        close(got[k], ref[k], want)
    # the pooled values reach HardSwish's dip (below -1.5 and between it and 0)
    assert (p < -1.5).any() and ((p > -1.5) & (p < 0)).any()


@pytest.mark.parametrize("l1", [None, 1200])
def test_squeeze_excite_convolutions_of_one_pixel_are_matrix_vector_products(l1):
    """GlobalAveragePool, 1x1 to 12 + ReLU, 1x1 to 40 + HardSigmoid, Mul: the convolutions
    of the pooled pixel as [1, C] x [C, O] + bias (at a 1200-byte L1 with K in tiles)."""
    r = np.random.default_rng(11)
    x = r.uniform(-2, 2, (1, 40, 5, 7)).astype(np.float32)
    inits = {"w1": r.normal(0, 0.4, (12, 40, 1, 1)), "b1": r.normal(0, 0.3, 12),
             "w2": r.normal(0, 0.6, (40, 12, 1, 1)), "b2": r.normal(0, 0.3, 40)}
    inits = {k: v.astype(np.float32) for k, v in inits.items()}
    nodes = [node("GlobalAveragePool", ["x"], ["p"]), node("Conv", ["p", "w1", "b1"], ["c1"]),
             node("Relu", ["c1"], ["r1"]), node("Conv", ["r1", "w2", "b2"], ["c2"]),
             node("HardSigmoid", ["c2"], ["gate"], alpha=1 / 6), node("Mul", ["x", "gate"], ["y"])]
    m = model(nodes, {"x": x}, ["y"], inits, opset=14)
    g = npukit.onnx.load(m, **({} if l1 is None else {"l1_budget": l1}))
    convs = [info for info in g.layers if info.ops.startswith("Conv")]
    assert [c.ops for c in convs] == ["Conv+Relu", "Conv+HardSigmoid"]
    assert all("as [1, " in c.detail for c in convs)
    ref = ort_run(m, {"x": x})[0]
    got = outputs(g, {"x": x}, {"y": x.shape})
    p = x.astype(np.float64).mean(axis=(2, 3))[0]
    h = np.maximum(inits["w1"][:, :, 0, 0] @ p + inits["b1"], 0)
    gate = hsig64(inits["w2"][:, :, 0, 0] @ h + inits["b2"])
    close(got["y"], ref["y"], x * gate[None, :, None, None])


@pytest.mark.parametrize("dt", ["int8", "uint8"])
def test_qlinearconv_of_one_pixel_is_bit_exact(dt):
    """QLinearConv 1x1 of a 1x1 plane (per-channel weight scales, a bias) as a quantized
    matrix-vector product: the convolution's int32 sums and requantisation, bit for bit."""
    r = np.random.default_rng(3)
    info = np.iinfo(dt)
    mid = 0 if dt == "int8" else 128
    x = r.integers(info.min, info.max + 1, (1, 48, 1, 1)).astype(dt)
    inits = {"w": r.integers(-100, 101, (20, 48, 1, 1)).astype(np.int8),
             "ws": r.uniform(0.002, 0.02, 20).astype(np.float32),
             "wz": np.zeros(20, np.int8), "b": r.integers(-4000, 4000, 20).astype(np.int32),
             "xs": np.float32(0.03), "xz": np.array(mid + 3, dt),
             "ys": np.float32(0.15), "yz": np.array(mid - 6, dt)}
    m = model([node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                    ["y"])], {"x": x}, ["y"], inits, opset=13)
    g = npukit.onnx.load(m)
    assert "as [1, 48] x [48, 20]" in g.layers[0].detail
    ref = ort_run(m, {"x": x})[0]["y"]
    for be in ("sim", "c"):
        each = [np.full(ref.shape, fill, ref.dtype) for fill in (info.min + 5, info.max - 9)]
        for y in each:
            g.run(be, x=x, y=y)
        assert each[0].tobytes() == each[1].tobytes() == ref.tobytes(), be
    assert np.unique(ref).size > 10
