"""Grouped convolutions as one layer (``conv_pool_act(Groups=...)``): groups of 2, 4 and 16,
one, three and sixteen input channels a group (never depthwise: more outputs than inputs),
strides, padding on each side, odd sizes. Float32 within 1e-4 (of the largest output) of
ONNX Runtime and of numpy in float64; QLinearConv (int8 and uint8, per-channel weight scales)
bit-exact with ONNX Runtime; the simulator's bytes the host C's and the target's tiled C's;
each run over two canary fills of the output, which must give the same bytes (every element
written)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_helpers import model, node

import npukit.onnx
from npukit.onnx.check import ort_run

CANARIES = {np.dtype("float32"): (np.float32(-7.25e30), np.float32(3.5e-3)),
            np.dtype("int8"): (77, -3), np.dtype("uint8"): (201, 6)}

# (groups, input channels a group, outputs a group, filter, stride, pads, height, width,
#  L1 budget of the target's plan: None for the default)
CASES = [(2, 16, 8, (3, 3), 2, [1, 1, 1, 1], 9, 7, None),
         (4, 3, 5, (3, 3), 1, [0, 1, 2, 1], 11, 6, 3000),
         (16, 1, 2, (3, 3), 2, [1, 1, 1, 1], 8, 9, None),
         (4, 1, 3, (1, 3), 1, [0, 1, 0, 0], 5, 7, 1500)]


def grouped_conv64(x, w, b, group, stride, pads):
    """The grouped convolution in float64, group by group (the oracle): output channel ``o``
    of group ``g = o // (O / group)`` sums input channels ``g*C/group`` onwards."""
    _, C, H, W = x.shape
    O, cg, kh, kw = w.shape  # noqa: E741
    og = O // group
    xp = np.zeros((C, H + pads[0] + pads[2], W + pads[1] + pads[3]))
    xp[:, pads[0]:pads[0] + H, pads[1]:pads[1] + W] = x[0]
    ho = (xp.shape[1] - kh) // stride + 1
    wo = (xp.shape[2] - kw) // stride + 1
    out = np.empty((O, ho, wo))
    for o in range(O):
        g = o // og
        for i in range(ho):
            for j in range(wo):
                win = xp[g * cg:(g + 1) * cg, i * stride:i * stride + kh,
                         j * stride:j * stride + kw]
                out[o, i, j] = (win * w[o]).sum() + b[o]
    return out[None]


def runs(g, x: dict, out):
    """The output bytes of each backend (the simulator, the host C, the target's tiled C),
    each over two canary fills that must give the same bytes."""
    got = {}
    for name, kw in (("sim", dict(backend="sim")), ("host", dict(backend="c")),
                     ("tiles", dict(backend="c", schedule="tiles"))):
        each = []
        for canary in CANARIES[out.dtype]:
            y = np.full(out.shape, canary, out.dtype)
            g.run(**kw, **x, y=y)
            each.append(y.copy())
        assert each[0].tobytes() == each[1].tobytes(), f"{name}: an element left as it was"
        got[name] = each[0]
    assert got["host"].tobytes() == got["sim"].tobytes()
    assert got["tiles"].tobytes() == got["sim"].tobytes()
    return got["host"]


def one_layer(g, group: int, macs: int) -> None:
    """The convolution is one layer, computing the real MACs only."""
    assert [info.detail.split()[0] for info in g.layers] == [f"grouped({group})"]
    assert g.model._cnn_ops[g.layers[0].name] == macs


@pytest.mark.parametrize("group,cg,og,k,stride,pads,h,w,l1", CASES)
def test_float32_grouped_conv(group, cg, og, k, stride, pads, h, w, l1):
    r = np.random.default_rng(group * 100 + cg)
    x = r.normal(size=(1, group * cg, h, w)).astype(np.float32)
    wt = r.normal(size=(group * og, cg, *k)).astype(np.float32)
    b = r.normal(size=group * og).astype(np.float32)
    m = model([node("Conv", ["x", "w", "b"], ["y"], group=group, strides=[stride] * 2,
                    pads=pads, kernel_shape=list(k))], {"x": x}, ["y"], {"w": wt, "b": b})
    g = npukit.onnx.load(m, **({} if l1 is None else {"l1_budget": l1}))
    want = grouped_conv64(x.astype(np.float64), wt.astype(np.float64), b.astype(np.float64),
                          group, stride, pads)
    got = runs(g, {"x": x}, np.empty(want.shape, np.float32))
    ref = ort_run(m, {"x": x})[0]["y"]
    top = np.abs(want).max()
    assert np.abs(got - ref).max() <= 1e-4 * top
    assert np.abs(got - want).max() <= 1e-4 * top
    assert np.unique(got).size > got.size // 2
    one_layer(g, group, got.size * cg * k[0] * k[1])


@pytest.mark.parametrize("dt", ["int8", "uint8"])
@pytest.mark.parametrize("case", [0, 1, 2])
def test_qlinearconv_grouped_is_bit_exact(dt, case):
    group, cg, og, k, stride, pads, h, w, l1 = CASES[case]
    r = np.random.default_rng(case)
    info = np.iinfo(dt)
    x = r.integers(info.min, info.max + 1, (1, group * cg, h, w)).astype(dt)
    wt = r.integers(-90, 91, (group * og, cg, *k)).astype(np.int8)
    ws = r.uniform(0.002, 0.02, group * og).astype(np.float32)
    mid = 0 if dt == "int8" else 128
    inits = {"w": wt, "ws": ws, "wz": np.zeros(group * og, np.int8),
             "b": r.integers(-3000, 3000, group * og).astype(np.int32),
             "xs": np.float32(0.03), "xz": np.array(mid + 7, dt),
             "ys": np.float32(0.2), "yz": np.array(mid - 4, dt)}
    m = model([node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
                    group=group, strides=[stride] * 2, pads=pads, kernel_shape=list(k))],
              {"x": x}, ["y"], inits, opset=13)
    g = npukit.onnx.load(m, **({} if l1 is None else {"l1_budget": l1}))
    ref = ort_run(m, {"x": x})[0]["y"]
    got = runs(g, {"x": x}, np.empty(ref.shape, ref.dtype))
    assert got.tobytes() == ref.tobytes()
    assert np.unique(got).size > 20
    one_layer(g, group, got.size * cg * k[0] * k[1])
