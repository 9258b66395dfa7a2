"""The plan cache (``npukit.onnx.plan_cache``): a second load of the same model under the same
target, budgets and options reads the plan back instead of planning; a change of budget,
weights or target plans anew; a corrupt entry is ignored and rewritten; a plan read back
runs in C to the same bytes as a plan made afresh, and agrees with ONNX Runtime."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from onnx_helpers import model, node, small_cnn

import npukit.onnx
import npukit.onnx.lowering
from npukit.onnx import plan_cache
from npukit.onnx.check import ort_run

BUDGETS = dict(l1_budget=16000, l2_budget=64 * 1024)
CANARY = np.float32(-7.25e30)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache directory with the plan cache on; ``planned`` counts the lowerings
    (one a target plan, one a host plan: a plan made, not read back)."""
    monkeypatch.setenv("NPUKIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("NPUKIT_PLAN_CACHE", "1")
    planned = []
    lower = npukit.onnx.lowering.lower

    def counting(net, alias, m, gname, host=False):
        planned.append("host" if host else "target")
        return lower(net, alias, m, gname, host=host)

    monkeypatch.setattr(npukit.onnx.lowering, "lower", counting)
    return tmp_path / plan_cache.PLANS, planned


def run_c(g, x):
    y = np.full(g.outputs["y"].shape, CANARY, np.float32)
    g.run("c", x=x, y=y)
    assert (y != CANARY).all(), "an output element the C left unwritten"
    return y


def test_second_load_reads_the_plan_back(cache):
    folder, planned = cache
    m, x = small_cnn()
    first = npukit.onnx.load(m, **BUDGETS)
    # the OnnxGraph and its target plan (apart: a run in C reads only the host plan)
    assert planned == ["target"] and len(list(folder.glob("*.plan"))) == 2
    text = first.summary()  # the cycle model is kept too
    assert len(list(folder.glob("*.plan"))) == 3
    ours = run_c(first, x)  # and the host plan
    assert planned == ["target", "host"] and len(list(folder.glob("*.plan"))) == 4
    again = npukit.onnx.load(m, **BUDGETS)
    assert again.summary() == text
    cached = run_c(again, x)
    assert planned == ["target", "host"]  # nothing planned: both plans read back
    assert cached.tobytes() == ours.tobytes()
    ref = ort_run(m, {"x": x})[0]["y"]
    np.testing.assert_allclose(cached, ref, rtol=1e-5, atol=1e-6)


def test_a_changed_budget_weight_or_target_plans_anew(cache):
    folder, planned = cache
    m, _ = small_cnn()
    npukit.onnx.load(m, **BUDGETS)
    npukit.onnx.load(m, **{**BUDGETS, "l2_budget": 48 * 1024})
    gap8 = npukit.target("gap8")
    npukit.onnx.load(m, target=replace(gap8, cores=gap8.cores // 2), **BUDGETS)
    w0 = np.random.default_rng(0).normal(size=(8, 3, 3, 3)) * 0.4
    w0[2, 1, 0, 2] = np.nextafter(np.float32(w0[2, 1, 0, 2]), np.float32(9))  # one weight
    npukit.onnx.load(small_cnn(w0=w0)[0], **BUDGETS)
    assert planned == ["target"] * 4 and len(list(folder.glob("*.plan"))) == 8
    npukit.onnx.load(m, **{**BUDGETS, "l2_budget": 48 * 1024})  # each kept apart
    assert planned == ["target"] * 4


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("damage", ["garbage", "truncated", "flipped", "empty"])
def test_a_corrupt_entry_is_planned_again_and_rewritten(cache, damage, which):
    """Either entry a load writes (the OnnxGraph, its target plan) damaged: planned again."""
    folder, planned = cache
    m, _ = small_cnn()
    fresh = str(npukit.onnx.load(m, **BUDGETS))
    entry = sorted(folder.glob("*.plan"))[which]
    data = entry.read_bytes()
    entry.write_bytes({"garbage": b"\x80not a plan\n" * 50, "truncated": data[:len(data) // 2],
                       "flipped": data[:-100] + bytes([data[-100] ^ 1]) + data[-99:],
                       "empty": b""}[damage])
    assert str(npukit.onnx.load(m, **BUDGETS)) == fresh
    assert planned == ["target", "target"]
    assert str(npukit.onnx.load(m, **BUDGETS)) == fresh  # the rewritten entry read
    assert planned == ["target", "target"]


def test_off_plans_every_time(cache, monkeypatch):
    folder, planned = cache
    monkeypatch.setenv("NPUKIT_PLAN_CACHE", "0")
    m, _ = small_cnn()
    npukit.onnx.load(m, **BUDGETS)
    npukit.onnx.load(m, **BUDGETS)
    assert planned == ["target", "target"] and not folder.exists()


def test_arrays_equal_in_bytes_are_pickled_once():
    """The pickler keeps one copy of a large array the plan holds twice (a layer's weights
    as lowered and as the graph's constants), whatever its shape; arrays equal in value but
    not in bytes (0.0 and -0.0) stay apart."""
    import pickle

    a = np.random.default_rng(1).normal(size=(64, 64, 8)).astype(np.float32)
    z = np.zeros(a.size, np.float32)
    neg = -z
    obj = {"a": a, "flat": a.reshape(-1).copy(), "z": z, "neg": neg}
    data = plan_cache.dumps(obj)
    assert len(data) < a.nbytes * 3 + 10_000
    back = pickle.loads(data)
    assert back["flat"].shape == (a.size,) and back["flat"].tobytes() == a.tobytes()
    assert back["a"].tobytes() == a.tobytes()
    assert np.signbit(back["neg"]).all() and not np.signbit(back["z"]).any()


def test_cache_info_counts_the_plans_and_clear_removes_them(cache):
    from npukit.c import cache as compile_cache

    folder, _ = cache
    npukit.onnx.load(small_cnn()[0], **BUDGETS)
    entries = list(folder.glob("*.plan"))
    got = compile_cache.info(folder.parent)
    assert got["plans"] == 2 and got["bytes"] == sum(p.stat().st_size for p in entries)
    (folder / "notes.txt").write_text("not npukit's")
    assert compile_cache.clear(folder.parent) == (2, got["bytes"])
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]


def test_repeated_layers_are_timed_once_and_planned_the_same(monkeypatch):
    """Convolutions of the same arguments are tiled the way the first was timed to be best
    (``layer_generators_conv._fewest_of``): the plan is the one timing each layer gives."""
    import npukit.tiler.layer_generators_conv as G

    r = np.random.default_rng(3)
    inits = {f"w{k}": (r.normal(size=(16, 16, 3, 3)) * 0.2).astype(np.float32) for k in range(3)}
    nodes = [node("Conv", ["x" if k == 0 else f"r{k - 1}", f"w{k}"], [f"c{k}"],
                  pads=[1, 1, 1, 1], kernel_shape=[3, 3]) for k in range(3)]
    nodes = [n for k, c in enumerate(nodes) for n in (c, node("Relu", [f"c{k}"], [f"r{k}"]))]
    m = model(nodes, {"x": np.zeros((1, 16, 24, 24), np.float32)}, ["r2"], inits, opset=13)
    budgets = dict(l1_budget=12000, l2_budget=96 * 1024)
    timed = []
    fewest = G._fewest_cycles

    def counting(m, name, ways):
        timed.append(name)
        return fewest(m, name, ways)

    monkeypatch.setattr(G, "_fewest_cycles", counting)
    once = npukit.onnx.load(m, **budgets).summary()
    assert len(timed) == 1
    monkeypatch.setattr(G, "_fewest_of", lambda m, name, ways, same: counting(m, name, ways))
    assert npukit.onnx.load(m, **budgets).summary() == once and len(timed) == 4


def test_a_model_with_external_data_is_planned_every_time(cache, tmp_path):
    """Its .onnx file's bytes do not hold its weights: nothing is kept."""
    import onnx

    folder, planned = cache
    m, x = small_cnn()
    path = tmp_path / "external.onnx"
    onnx.save_model(m, path, save_as_external_data=True, location="weights.bin",
                    size_threshold=0)
    for _ in range(2):
        npukit.onnx.load(path, **BUDGETS)
    assert planned == ["target", "target"] and not folder.exists()
