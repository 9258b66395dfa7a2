"""Imported convolutions of every shape the layer convolution's register blocks meet (1 to 5
channels, depthwise, 1x1 and other filters, strides 1 and 2, dilations, padding on each
side, widths around the vector blocks), float32 and QLinearConv with int8 and uint8 data:
the host C (each layer whole and the target's tiles) gives the simulator's bytes; each run
is made over two canary fills, which must give the same bytes (every element written)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx_helpers import model, node

import npukit.onnx
from npukit import TilingError

CANARIES = {np.dtype("float32"): (np.float32(-7.25e30), np.float32(3.5e-3)),
            np.dtype("int8"): (77, -3), np.dtype("uint8"): (201, 6)}


@st.composite
def convolutions(draw):
    cin = draw(st.integers(1, 5))
    depthwise = draw(st.booleans())
    cout, group = (cin, cin) if depthwise else (draw(st.integers(1, 5)), 1)
    k = draw(st.sampled_from([(1, 1), (3, 3), (3, 3), (2, 3), (5, 5)]))
    s, d = draw(st.sampled_from([1, 1, 2])), draw(st.sampled_from([1, 1, 2]))
    pads = [draw(st.integers(0, min(2, k[i % 2] - 1))) for i in range(4)]
    h = draw(st.integers(d * (k[0] - 1) + 1, 12))
    w = draw(st.sampled_from([d * (k[1] - 1) + 1, 7, 15, 16, 17, 31, 33, 49, 65]))
    w = max(w, d * (k[1] - 1) + 1)
    quant = draw(st.sampled_from(["float32", "int8", "uint8"]))
    return dict(cin=cin, cout=cout, group=group, k=k, s=s, d=d, pads=pads, h=h, w=w,
                quant=quant, seed=draw(st.integers(0, 2**32 - 1)))


def conv_model(c):
    r = np.random.default_rng(c["seed"])
    attrs = dict(kernel_shape=list(c["k"]), strides=[c["s"]] * 2, dilations=[c["d"]] * 2,
                 pads=c["pads"], group=c["group"])
    wshape = (c["cout"], c["cin"] // c["group"], *c["k"])
    shape = (1, c["cin"], c["h"], c["w"])
    if c["quant"] == "float32":
        x = r.normal(size=shape).astype(np.float32)
        inits = {"w": r.normal(size=wshape).astype(np.float32),
                 "b": r.normal(size=c["cout"]).astype(np.float32)}
        nodes = [node("Conv", ["x", "w", "b"], ["y"], **attrs)]
        return model(nodes, {"x": x}, ["y"], inits, opset=13), x
    dt = np.dtype(c["quant"])
    lo, hi = (-128, 127) if dt == np.int8 else (0, 255)
    x = r.integers(lo, hi + 1, shape).astype(dt)
    inits = {"xs": np.float32(0.05), "xz": dt.type(r.integers(lo // 2, hi // 2)),
             "w": r.integers(-127, 128, wshape).astype(np.int8),
             "ws": np.float32(0.02), "wz": np.int8(0),
             "ys": np.float32(0.1), "yz": dt.type(r.integers(lo // 2, hi // 2)),
             "b": r.integers(-500, 500, c["cout"]).astype(np.int32)}
    nodes = [node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
                  **attrs)]
    return model(nodes, {"x": x}, ["y"], inits, opset=13), x


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(convolutions())
def test_host_c_of_a_convolution_is_the_simulators_bytes(c):
    m, x = conv_model(c)
    try:  # small tiles, so that the target's plan cuts the layer
        g = npukit.onnx.load(m, l1_budget=5000, l2_budget=200_000)
    except TilingError:  # a wide dilated window whose smallest tile needs more
        g = npukit.onnx.load(m, l1_budget=48000, l2_budget=200_000)
    out = g.outputs["y"]
    got = {}
    for name, kw in (("sim", dict(backend="sim")), ("host", dict(backend="c")),
                     ("tiles", dict(backend="c", schedule="tiles"))):
        runs = []
        for canary in CANARIES[out.dtype]:
            y = np.full(out.shape, canary, out.dtype)
            g.run(**kw, x=x, y=y)
            runs.append(y.tobytes())
        assert runs[0] == runs[1], f"{name}: an element left as it was"
        got[name] = runs[0]
    assert got["host"] == got["sim"], c
    assert got["tiles"] == got["sim"], c
