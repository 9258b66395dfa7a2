"""The target schedule's convolutions and poolings in tiles of features, as the GAP SDK's
generators tile them, chosen by predicted cycles: the simulator and the C of the plan equal
ONNX Runtime, whichever tiles the budget forces, and the plan is never a DMA-bound sliver."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_helpers import against_ort

import npukit.onnx
import npukit.tiler.layer_generators_conv as G
from npukit.calibration import layer_model
from npukit.errors import TilingError
from npukit.sim.timing import timeline


def int8_input(m, seed=0):
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    return {"x": np.random.default_rng(seed).integers(-120, 120, shape).astype(np.int8)}


def spaces(g) -> str:
    """The tiling of the graph's one layer, as the tiler prints it."""
    (layer,) = g.graph.layers
    return str(g.graph.model.tiling(layer.name))


@pytest.mark.parametrize("l1", [2000, 6000, 40000])
@pytest.mark.parametrize("spec", ["op=dwconv in=24x13x9 k=3x3 pad=1 relu=1",
                                  "op=dwconv in=16x14x10 k=3x3 stride=2 pad=1",
                                  "op=dwconv in=16x11x11 k=5x5 pad=2"])
def test_depthwise_tiles_of_features_equal_onnx_runtime(spec, l1):
    m = layer_model(spec)
    g, _, _ = against_ort(m, int8_input(m), backends=("sim", "c"), target="gap8",
                          l1_budget=l1)
    assert g.graph.model.tiling(g.graph.layers[0].name).l1_used <= l1


@pytest.mark.parametrize("l1", [1500, 5000, 40000])
@pytest.mark.parametrize("spec", ["op=maxpool in=20x12x12 k=2x2 stride=2",
                                  "op=avgpool in=20x12x12 k=3x3 stride=2 pad=1",
                                  "op=avgpool in=40x7x7 k=7x7"])
def test_poolings_in_tiles_of_features_equal_onnx_runtime(spec, l1):
    m = layer_model(spec)
    g, _, _ = against_ort(m, int8_input(m, 1), backends=("sim", "c"), target="gap8",
                          l1_budget=l1)
    assert "D1" in spaces(g)  # the features are a space of their own: one call per tile


def test_a_global_pooling_keeps_every_core_busy():
    """One output row per plane: the cores share the rows of all the planes of a tile."""
    g = npukit.onnx.load(layer_model("op=avgpool in=64x25x5 k=25x5"), target="gap8",
                         l1_budget=46736)
    busy = g.report().timeline.busy["core"]
    one_core = npukit.onnx.load(layer_model("op=avgpool in=64x25x5 k=25x5"),
                                target=_cores(g.target, 1), l1_budget=46736)
    assert busy < one_core.report().timeline.busy["core"] / 4


def _cores(t, n):
    import dataclasses
    return dataclasses.replace(t, cores=n)


@pytest.mark.parametrize("spec", ["op=conv in=32x56x56 out=64 k=1x1 relu=1",
                                  "op=conv in=172x25x5 out=172 k=1x1 relu=1",
                                  "op=conv in=256x4x4 out=256 k=1x1 relu=1",
                                  "op=dwconv in=172x25x5 k=3x3 pad=1 relu=1"])
def test_pointwise_and_depthwise_layers_are_not_dma_bound(spec):
    """The KWS DS-CNN M pointwise layers and MobileNet's last 256 -> 256 at 4x4, under the
    GAP AutoTiler document's L1 budget: the cores, not the DMA, bound the layer, in tiles
    that take most of L1."""
    g = npukit.onnx.load(layer_model(spec), target="gap8", l1_budget=46736,
                         l2_budget=400 * 1024)
    t = g.report().timeline
    assert t.transfer_bound < t.compute_bound / 2, (t.busy, spaces(g))
    assert g.graph.model.tiling(g.graph.layers[0].name).l1_used > 46736 // 2


def test_the_plan_takes_the_way_of_fewest_predicted_cycles(monkeypatch):
    """Each way the generator offers, built alone and timed by the cycle model (a way the
    budget cannot tile passed over): the layer it planned has the fewest cycles of them."""
    seen = {}
    fewest = G._fewest_cycles

    def spy(m, name, ways):
        seen["m"], seen["name"], seen["ways"] = m, name, ways
        fewest(m, name, ways)

    monkeypatch.setattr(G, "_fewest_cycles", spy)
    npukit.onnx.load(layer_model("op=conv in=32x28x28 out=64 k=3x3 pad=1"), target="gap8",
                     l1_budget=30000)
    m, name, ways = seen["m"], seen["name"], seen["ways"]
    chosen = timeline(m.program(name)).cycles
    others = []
    for k, way in enumerate(ways):
        way(f"check{k}")
        try:
            others.append(timeline(m.program(f"check{k}")).cycles)
        except TilingError:
            pass
    assert len(ways) >= 3 and len(others) >= 2 and chosen == min(others)
