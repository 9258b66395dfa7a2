"""The planner's memos give what planning afresh gives (``Model.lowered``: a network's
repeated layers lowered once and renamed; ``Model.program``: a convolution's chosen trial
kept; ``Model.cycles``; ``planner.peak`` read in one pass): every kernel's program against
the same kernel lowered and checked without any memo, its cycles against the cycle model run
on that fresh program, and layers that differ in one parameter (stride, padding, kernel,
dilation, activation, L1 budget) never sharing a program."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

import npukit.onnx
from npukit.sim.timing import timeline
from npukit.tiler import planner as P
from npukit.tiler.lower import KernelLowering, Lowered

BUDGETS = dict(l1_budget=48000, l2_budget=512 * 1024, l3_budget=64 << 20,
               l3_flash_budget=64 << 20)
BASE = dict(k=3, stride=1, pad=1, dil=1, act="Relu")


def model(layers: list[dict], c: int = 8, size: int = 20, seed: int = 0):
    """A chain of convolutions of ``c`` features (each layer's parameters in a dict like
    ``BASE``), random weights: equal layers differ in their weights only."""
    rng = np.random.default_rng(seed)
    nodes, inits, x = [], [], "x"
    for i, p in enumerate(layers):
        w = rng.normal(size=(c, c, p["k"], p["k"])).astype(np.float32)
        inits += [nh.from_array(w, f"w{i}"),
                  nh.from_array(rng.normal(size=c).astype(np.float32), f"b{i}")]
        nodes.append(h.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"],
                                 kernel_shape=[p["k"]] * 2, pads=[p["pad"]] * 4,
                                 strides=[p["stride"]] * 2, dilations=[p["dil"]] * 2))
        x = f"c{i}"
        if p["act"]:
            nodes.append(h.make_node(p["act"], [x], [f"a{i}"]))
            x = f"a{i}"
    g = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", TensorProto.FLOAT,
                                                               [1, c, size, size])],
                     [h.make_tensor_value_info(x, TensorProto.FLOAT, None)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)])


def fresh(m, name: str):
    """Kernel ``name`` of model ``m`` lowered and checked as ``Model.program`` does, without
    its memos."""
    uk, out = m.kernels[name], Lowered()
    KernelLowering(uk, m.tiling(name), m.libs, m.target, m.l3, out,
                   lib_bounds=m.lib_bounds).lower()
    return m._checked(name, out, [c.ArgName for c in uk.cargs], m.l2_budget)


def assert_as_fresh(m) -> None:
    for name in m.kernels:
        got, want = m.program(name), fresh(m, name)
        assert got == want, name
        assert got.name == name and all(name in x.label for x in _loops(got.body))
        assert m.cycles(got) == timeline(want).cycles, name


def _loops(body):
    for x in body:
        if hasattr(x, "var"):
            yield x
            yield from _loops(x.body)


@pytest.fixture(scope="module")
def repeated():
    """Three equal layers between two others (a 1x1 and a strided one): the target's and
    the host's plans."""
    layers = [BASE, BASE, BASE, {**BASE, "k": 1, "pad": 0}, {**BASE, "stride": 2}]
    g = npukit.onnx.load(model(layers), **BUDGETS)
    return g.model, g.host_graph().model


def test_repeated_layers_lowered_once_and_as_fresh(repeated):
    for m in repeated:
        assert_as_fresh(m)
        convs = [n for n in m.kernels if "Conv" in n]
        progs = [m.program(n) for n in convs]
        # The three equal layers' programs are one lowering renamed (their buffers the same
        # objects); the others' their own.
        assert progs[0].buffers is progs[1].buffers is progs[2].buffers
        assert progs[3].buffers is not progs[0].buffers is not progs[4].buffers


def test_a_renamed_program_is_not_its_original(repeated):
    m = repeated[0]
    a, b = [n for n in m.kernels if "Conv" in n][:2]
    pa, pb = m.program(a), m.program(b)
    assert pa != pb and pa.body != pb.body  # the labels name each its own kernel
    assert {x.label.replace(a, b) for x in _loops(pa.body)} == \
        {x.label for x in _loops(pb.body)}


VARIANTS = {"stride": 2, "pad": 0, "k": 1, "dil": 2, "act": None}


@settings(max_examples=6, deadline=None)
@given(what=st.sampled_from(sorted(VARIANTS)), first=st.booleans(), size=st.sampled_from(
    [12, 17, 20]))
def test_layers_differing_in_one_parameter_share_nothing(what, first, size):
    other = {**BASE, what: VARIANTS[what]}
    layers = [other, BASE] if first else [BASE, other]
    m = npukit.onnx.load(model(layers + [BASE], size=size), **BUDGETS).model
    assert_as_fresh(m)


def test_a_new_l1_budget_lowers_again(repeated):
    layers = [BASE, BASE]
    m = npukit.onnx.load(model(layers), **BUDGETS).model
    name = next(n for n in m.kernels if "Conv" in n)
    before = m.program(name)
    m.SetL1MemorySize(6000)
    after = m.program(name)
    assert after == fresh(m, name) and after != before
    assert m.tiling(name).l1_budget == 6000


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 8), st.integers(0, 5000)),
                min_size=1, max_size=40))
def test_peak_is_the_most_bytes_live_at_one_layer(spans):
    items = [P.Item(f"t{k}", a, a + n, size) for k, (a, n, size) in enumerate(spans)]
    want = max(sum(-(-it.size // P.ALIGN) * P.ALIGN for it in items
                   if it.first <= layer <= it.last)
               for layer in range(max(it.last for it in items) + 1))
    assert P.peak(items) == want


def test_a_plan_read_from_the_plan_cache_has_no_memos(tmp_path, monkeypatch):
    monkeypatch.setenv("NPUKIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("NPUKIT_PLAN_CACHE", "1")
    onnx_model = model([BASE, BASE])
    first = npukit.onnx.load(onnx_model, **BUDGETS)
    again = npukit.onnx.load(onnx_model, **BUDGETS)
    assert again.from_plan_cache and first.model._shapes
    m = again.model
    assert m._programs == m._shapes == m._cycles == {}
    assert_as_fresh(m)
