"""The host schedule (``OnnxGraph.run("c", schedule="host")``: tiles of up to 1 MiB, a small
layer whole) against the target's tile schedule and the simulator: the same bytes, float and
quantized, on models whose target plan cuts layers into several L1 tiles."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx_fuzz import generate, quantize
from onnx_helpers import model, node, quantize_qdq

import npukit.onnx
from npukit import NpukitError
from npukit.onnx import HOST_L1
from npukit.onnx.check import compare, ort_run

CANARY = {np.dtype("float32"): np.float32(-7.25e30), np.dtype("int8"): 77,
          np.dtype("uint8"): 201}


def cnn(size: int, seed: int = 0):
    """Two 3x3 convolutions with ReLU, a max pooling, a global average pooling, a Gemm and
    a softmax: outputs ``logits`` and ``prob``."""
    r = np.random.default_rng(seed)
    inits = {"w0": r.normal(size=(8, 3, 3, 3)) * 0.4, "b0": r.normal(size=8) * 0.1,
             "w1": r.normal(size=(12, 8, 3, 3)) * 0.2, "b1": r.normal(size=12) * 0.1,
             "fw": r.normal(size=(12, 10)) * 0.3, "fb": r.normal(size=10) * 0.1}
    inits = {k: v.astype(np.float32) for k, v in inits.items()}
    nodes = [node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             node("Relu", ["c0"], ["r0"]),
             node("MaxPool", ["r0"], ["p0"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Conv", ["p0", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             node("Relu", ["c1"], ["r1"]),
             node("GlobalAveragePool", ["r1"], ["g"]),
             node("Flatten", ["g"], ["f"]),
             node("Gemm", ["f", "fw", "fb"], ["logits"]),
             node("Softmax", ["logits"], ["prob"], axis=1)]
    x = r.uniform(-1, 1, (1, 3, size, size)).astype(np.float32)
    return model(nodes, {"x": x}, ["logits", "prob"], inits, opset=13), x


def runs(g, x: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
    """Every output on the simulator, the host schedule and the tile schedule, each written
    over a canary fill."""
    got = {}
    for name, kw in (("sim", dict(backend="sim")), ("host", dict(backend="c")),
                     ("tiles", dict(backend="c", schedule="tiles"))):
        outs = {o: np.full(p.shape, CANARY[p.dtype], p.dtype) for o, p in g.outputs.items()}
        g.run(**kw, x=x, **outs)
        got[name] = outs
    return got


def assert_same_bytes(got: dict) -> None:
    for o, sim in got["sim"].items():
        assert (sim != CANARY[sim.dtype]).all(), f"{o}: an element the simulator left"
        for name in ("host", "tiles"):
            assert got[name][o].tobytes() == sim.tobytes(), f"{o}: {name} C != simulator"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["float", "qdq-u8", "qdq-s8-channel"])
def test_the_host_schedule_gives_the_tile_schedules_bytes(kind, tmp_path):
    m, x = cnn(28)
    if kind != "float":
        r = np.random.default_rng(3)
        calib = [{"x": r.uniform(-1, 1, x.shape).astype(np.float32)} for _ in range(4)]
        m = quantize_qdq(m, calib, tmp_path, act=kind.split("-")[1],
                         per_channel=kind.endswith("channel"))
    g = npukit.onnx.load(m, l1_budget=6000, l2_budget=200_000)
    tiled = [layer.tiling.n_tiles for layer in g.graph.layers]
    host = g.host_graph()
    assert max(tiled) > 1  # the target's plan does cut layers into tiles
    assert [layer.tiling.n_tiles for layer in host.layers] == [1] * len(host.layers)
    # (a layer whose rows do not fit L1 whole gets its padding as a layer of its own)
    assert len(host.layers) <= len(g.graph.layers)
    assert host.memory["L1"].dynamic <= HOST_L1
    got = runs(g, x)
    assert_same_bytes(got)
    ref, _ = ort_run(m, {"x": x})
    for o in ref:
        c = compare(o, got["host"][o], ref[o], g.output_steps.get(o))
        assert c.within, str(c)


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(number=st.integers(0, 10_000))
def test_random_quantized_models_on_both_schedules(number, tmp_path_factory):
    case = generate(number)
    qm = quantize(case, tmp_path_factory.mktemp("q"))
    g = npukit.onnx.load(qm, l1_budget=3000)
    assert_same_bytes(runs(g, case.inputs["x"]))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["float", "qdq-u8"])
def test_a_layer_over_the_hosts_l1_runs_in_large_tiles(kind, tmp_path):
    """A first convolution of a 3x320x320 float32 input (1.2 MiB): more than the host's
    L1, so a few tiles (its tiles live on the C stack), the same bytes. Neither convolution's
    accumulators fit L1 whole (8 x 320 x 320 and 12 x 160 x 160 float32 or int32: 3.3 and
    1.2 MB): each runs on tiles of features in bands of rows, every output feature and every
    input feature of a band in one tile (not plane by plane); float32 and quantized."""
    m, x = cnn(320)
    if kind != "float":
        r = np.random.default_rng(5)
        calib = [{"x": r.uniform(-1, 1, x.shape).astype(np.float32)} for _ in range(2)]
        m = quantize_qdq(m, calib, tmp_path, act="u8")
    g = npukit.onnx.load(m)
    host = g.host_graph()
    assert max(layer.tiling.n_tiles for layer in host.layers) > 1
    convs = [layer.tiling.spaces for layer in host.layers if layer.name.endswith("_Conv")]
    assert len(convs) == 2
    for spaces in convs:
        assert spaces["D1"].count == 1 and spaces["D0"].count == 1, spaces
        assert spaces["Tile0"].count > 1, spaces
    assert host.memory["L1"].dynamic <= HOST_L1
    assert_same_bytes(runs(g, x))



@pytest.mark.slow
@pytest.mark.parametrize("kind, cin, cout", [("float", 128, 256), ("qdq-s8", 256, 512)])
def test_a_filter_over_the_hosts_l1_is_cut_by_output_features(kind, cin, cout, tmp_path):
    """A 3x3 convolution of a small plane whose filter (1.2 MB: 256x128 float32, 512x256
    int8) does not fit the host's L1 with every feature: the host schedule cuts the output
    features (each tile of the filter one block of it, read where it is) and keeps every
    input feature in one call, rows whole; the same bytes as the simulator and the tile
    schedule, ONNX Runtime's values (not the simulator: its plane-by-plane run of 1.2M
    weights takes minutes; the tile schedule's C is the simulator's bytes in the tests
    above)."""
    r = np.random.default_rng(11)
    inits = {"w": (r.normal(size=(cout, cin, 3, 3)) * np.sqrt(2 / (9 * cin))).astype(
        np.float32), "b": (r.normal(size=cout) * 0.1).astype(np.float32)}
    nodes = [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             node("Relu", ["c"], ["y"])]
    x = r.uniform(-1, 1, (1, cin, 3, 3)).astype(np.float32)
    m = model(nodes, {"x": x}, ["y"], inits, opset=13)
    if kind != "float":
        calib = [{"x": r.uniform(-1, 1, x.shape).astype(np.float32)} for _ in range(2)]
        m = quantize_qdq(m, calib, tmp_path, act="s8")
    g = npukit.onnx.load(m)
    host = g.host_graph()
    (conv,) = [layer for layer in host.layers if layer.name.endswith("_Conv")]
    spaces = conv.tiling.spaces
    assert spaces["D1"].count > 1 and spaces["D0"].count == 1, spaces
    assert spaces["Tile0"].count == 1, spaces
    assert re.search(r"L1_Filter = \(\w+ \*\)\(Filter \+ \d+ \* D0 \+ \d+ \* D1\);",
                     host.c_source())
    assert host.memory["L1"].dynamic <= HOST_L1
    got = {}
    for schedule in ("host", "tiles"):
        y = np.full((1, cout, 3, 3), CANARY[g.outputs["y"].dtype], g.outputs["y"].dtype)
        g.run("c", schedule=schedule, x=x, y=y)
        assert (y != CANARY[y.dtype]).all(), schedule
        got[schedule] = y
    assert got["host"].tobytes() == got["tiles"].tobytes()
    ref, _ = ort_run(m, {"x": x})
    c = compare("y", got["host"], ref["y"], g.output_steps.get("y"))
    assert c.within, str(c)



@pytest.mark.slow
def test_a_host_layer_runs_alone():
    """One layer of the host schedule, its IR program run on its own (as a user inspects a
    layer): the C builds and links (the vector kernels' system header declared outside
    their hidden block, so the C library's functions it declares bind) and gives the
    simulator's bytes, canaries around the output."""
    m, x = cnn(16)
    g = npukit.onnx.load(m)
    (prog,) = [layer.program for layer in g.host_graph().layers
               if layer.name.endswith("_Conv")][1:2]
    rng = np.random.default_rng(2)
    ins = {b.name: rng.uniform(-1, 1, spec.shape).astype(np.float32)
           for b, spec in prog.params if b.role == "in"}
    shapes = {b.name: spec.shape for b, spec in prog.params if b.role != "in"}
    got = {}
    for backend in ("sim", "c"):
        outs = {k: np.full(np.prod(shape) + 8, CANARY[np.dtype("float32")], np.float32)
                for k, shape in shapes.items()}
        prog.run(backend, **ins, **{k: v[4:-4].reshape(shapes[k]) for k, v in outs.items()})
        for v in outs.values():
            assert (v[:4] == CANARY[v.dtype]).all() and (v[-4:] == CANARY[v.dtype]).all()
            assert (v[4:-4] != CANARY[v.dtype]).all()
        got[backend] = outs
    for k in got["c"]:
        assert got["c"][k].tobytes() == got["sim"][k].tobytes(), k

def test_a_schedule_is_host_or_tiles():
    m, x = cnn(8)
    g = npukit.onnx.load(m)
    with pytest.raises(NpukitError, match=r"schedule='fast': use 'host' .* or 'tiles'"):
        g.run("c", schedule="fast", x=x)


@pytest.mark.slow
def test_the_compiled_host_graph_reused_on_other_inputs():
    """One compiled handle of the host schedule, constructed once, called on three inputs in
    turn (the first again last): each call gives the simulator's bytes for its own input,
    every output element written over a canary, nothing left of the call before."""
    m, x = cnn(12)
    g = npukit.onnx.load(m)
    handle = g.host_graph().compile("c")
    constructs = []
    real = handle.construct
    handle.construct = lambda *a: constructs.append(a) or real(*a)
    r = np.random.default_rng(8)
    results = []
    for xi in (x, r.uniform(-2, 2, x.shape).astype(np.float32), x):
        sim, host = ({o: np.full(p.shape, CANARY[p.dtype], p.dtype)
                      for o, p in g.outputs.items()} for _ in range(2))
        g.run("sim", x=xi, **sim)
        g.run("c", x=xi, **host)
        for o in host:
            assert (host[o] != CANARY[host[o].dtype]).all()
            assert host[o].tobytes() == sim[o].tobytes(), o
        results.append(host)
    assert g.host_graph().compile("c") is handle and len(constructs) == 1
    assert results[0]["logits"].tobytes() != results[1]["logits"].tobytes()
    assert results[0]["logits"].tobytes() == results[2]["logits"].tobytes()
