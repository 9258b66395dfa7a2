"""A model loaded again (``npukit.onnx.load``, the plan cache on) runs in C without planning
or generating C: its host plan is known by the plan cache's key (``graph_link.known_as``), and
the compile cache's link for that key (``npukit.c.cache.linked``) leads to the verified
shared object and flash file. The outputs are those of the first load's fresh compile, and
ONNX Runtime's; a damaged or stale link, entry, shared object or flash file, other flags or
other code mean the C is generated (and built when need be) again, never trusted."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from onnx_helpers import quantize_qdq, small_cnn

import npukit.onnx
import npukit.onnx.lowering
from npukit.c import cache as compile_cache
from npukit.c import toolchain
from npukit.onnx import plan_cache
from npukit.onnx.check import compare, ort_run
from npukit.tiler import graph_c, graph_link

BUDGETS = dict(l1_budget=16000, l2_budget=64 * 1024)
CANARY = np.float32(-7.25e30)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The float CNN and its int8 QDQ version (ONNX Runtime's quantization tool), by kind,
    each made when first asked for."""
    made = {}

    def model_of(kind: str):
        if kind not in made:
            m, x = small_cnn()
            if kind == "int8":
                r = np.random.default_rng(1)
                calib = [{"x": r.uniform(-1, 1, x.shape).astype(np.float32)} for _ in range(2)]
                m = quantize_qdq(m, calib, tmp_path_factory.mktemp("qdq"), "u8")
            made[kind] = (m, x)
        return made[kind]

    return model_of


class Counts:
    """What loads and runs did: plans made, C generated, compiler runs."""

    def __init__(self, monkeypatch):
        self.planned, self.generated, self.compiled = [], 0, 0
        lower, pieces, run = npukit.onnx.lowering.lower, graph_c.c_pieces, \
            toolchain.run_compiler

        def lowering(net, alias, m, gname, host=False):
            self.planned.append("host" if host else "target")
            return lower(net, alias, m, gname, host=host)

        def generating(g):
            self.generated += 1
            return pieces(g)

        def compiling(cmd):
            self.compiled += 1
            return run(cmd)

        monkeypatch.setattr(npukit.onnx.lowering, "lower", lowering)
        monkeypatch.setattr(graph_c, "c_pieces", generating)
        monkeypatch.setattr(toolchain, "run_compiler", compiling)


def run_c(m, x) -> np.ndarray:
    """``m`` loaded and run in C, its output over a canary (every element written)."""
    g = npukit.onnx.load(m, **BUDGETS)
    y = np.full(g.outputs["y"].shape, CANARY, np.float32)
    g.run("c", x=x, y=y)
    assert (y != CANARY).all(), "an output element the C left unwritten"
    return y


@pytest.fixture(scope="module")
def primed(models, tmp_path_factory):
    """By model kind, made when first asked for: a cache directory after a first load and
    run of the model (plans, entries, a link), and that run's output."""
    made = {}

    def prime(kind: str):
        if kind not in made:
            folder = tmp_path_factory.mktemp(f"primed-{kind}")
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("NPUKIT_CACHE_DIR", str(folder))
                mp.setenv("NPUKIT_PLAN_CACHE", "1")
                made[kind] = (folder, run_c(*models(kind)))
        return made[kind]

    return prime


@pytest.fixture
def cache(primed, tmp_path, monkeypatch):
    """``use(*kinds)``: a copy, this test's to damage, of the primed caches of the model
    kinds named, in use; returns (its folder, the first runs' outputs by kind, ``Counts``
    from now on)."""

    def use(*kinds):
        folder = tmp_path / "cache"
        for kind in kinds:
            shutil.copytree(primed(kind)[0], folder, dirs_exist_ok=True)
        monkeypatch.setenv("NPUKIT_CACHE_DIR", str(folder))
        monkeypatch.setenv("NPUKIT_PLAN_CACHE", "1")
        return folder, {kind: primed(kind)[1] for kind in kinds}, Counts(monkeypatch)

    return use


@pytest.mark.parametrize("kind", ["float32", "int8"])
def test_a_second_load_runs_without_planning_or_generating_c(models, cache, kind):
    folder, first, counts = cache(kind)
    m, x = models(kind)
    y = run_c(m, x)
    assert (counts.planned, counts.generated, counts.compiled) == ([], 0, 0)
    assert y.tobytes() == first[kind].tobytes()  # the fresh compile's bytes
    g = npukit.onnx.load(m, **BUDGETS)
    ref = ort_run(m, {"x": x})[0]["y"]
    got = compare("y", y, ref, g.output_steps.get("y"))
    assert got.within, str(got)
    assert len(list((folder / compile_cache.LINKS).glob("*.json"))) == 1


def test_without_a_plan_cache_key_the_c_is_generated(models, cache, monkeypatch):
    """No plan cache, no key: the C is generated (found in the compile cache by content)."""
    _, first, counts = cache("float32")
    monkeypatch.setenv("NPUKIT_PLAN_CACHE", "0")
    assert run_c(*models("float32")).tobytes() == first["float32"].tobytes()
    assert counts.planned == ["target", "host"] and counts.generated == 1
    assert counts.compiled == 0


def _link(folder, m) -> dict:
    """The link of model ``m``'s host plan (loaded now: its key is the graph's)."""
    g = npukit.onnx.load(m, **BUDGETS)
    key = graph_link.link_key(g.host_graph())
    return json.loads((folder / compile_cache.LINKS / f"{key}.json").read_text())


def _flip(path, at: int = -200) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x40
    path.write_bytes(bytes(data))


def _shared_object(folder, link: dict):
    meta = json.loads((folder / f"{link['entry']}.json").read_text())
    return folder / meta["so"]


def _flash(folder, link: dict, m):
    name = graph_c._Names(npukit.onnx.load(m, **BUDGETS).host_graph()).flash_file
    return folder / compile_cache.FLASH / link["flash"]["sha256"][:32] / name


@pytest.mark.parametrize("damage", ["shared object", "flash file", "link", "entry gone",
                                    "header"])
def test_a_damaged_link_or_what_it_names_is_not_followed(models, cache, damage):
    """The C is generated again and the outputs are the first run's; what was damaged is
    rebuilt or rewritten (the shared object compiled again), and the next load follows the
    link again."""
    folder, first, counts = cache("int8")
    m, x = models("int8")
    link = _link(folder, m)
    if damage == "shared object":
        _flip(_shared_object(folder, link))
    elif damage == "flash file":
        _flip(_flash(folder, link, m), 17)
    elif damage == "link":
        path = folder / compile_cache.LINKS / f"{link['key']}.json"
        path.write_text(json.dumps(link | {"entry": "0" * 32}))
    elif damage == "entry gone":
        (folder / f"{link['entry']}.json").unlink()
    else:  # a header the entry's compile read, changed since (its sidecar's record)
        sidecar = folder / f"{link['entry']}.json"
        meta = json.loads(sidecar.read_text())
        header = folder / "npk_test_header.h"
        header.write_text("/* changed */\n")
        meta["headers"] = {str(header): "0" * 64}
        sidecar.write_text(json.dumps(meta))
    assert run_c(m, x).tobytes() == first["int8"].tobytes()
    assert counts.planned == [] and counts.generated == 1
    rebuilt = damage in ("shared object", "entry gone", "header")
    assert (counts.compiled > 0) == rebuilt, counts.compiled
    assert run_c(m, x).tobytes() == first["int8"].tobytes()
    assert counts.generated == 1  # the link written again, and followed
    if damage == "flash file":
        assert compile_cache.linked(folder, link["key"], _flash(folder, link, m).name)


def test_other_flags_build_anew_and_keep_both(models, cache, monkeypatch):
    folder, first, counts = cache("float32")
    m, x = models("float32")
    monkeypatch.setenv("NPUKIT_CFLAGS", "-O1")
    assert run_c(m, x).tobytes() == first["float32"].tobytes()
    assert counts.generated == 1 and counts.compiled > 0
    compiled = counts.compiled
    assert run_c(m, x).tobytes() == first["float32"].tobytes()
    assert (counts.generated, counts.compiled) == (1, compiled)
    monkeypatch.delenv("NPUKIT_CFLAGS")
    run_c(m, x)
    assert (counts.generated, counts.compiled) == (1, compiled)  # the first link kept


def test_other_code_plans_and_generates_again(models, cache, monkeypatch):
    """npukit's files changed (their digest, which the plan cache's keys hash): planned and
    generated again, the compile cache found by the C's content."""
    _, first, counts = cache("float32")
    monkeypatch.setattr(plan_cache, "_CODE", ["another version of npukit"])
    assert run_c(*models("float32")).tobytes() == first["float32"].tobytes()
    assert counts.planned == ["target", "host"] and counts.generated == 1
    assert counts.compiled == 0


def test_a_plan_made_again_elsewhere_finds_no_link_to_other_addresses(models, cache):
    """The link's key holds where the plan put each tensor: a host plan under the same key
    that placed a tensor elsewhere does not follow it."""
    _, _, counts = cache("float32")
    m, _ = models("float32")
    g = npukit.onnx.load(m, **BUDGETS)
    host = g.host_graph()
    key = graph_link.link_key(host)
    name = next(n for n, t in host.tensors.items() if t.memory == "L2")
    moved = dict(host.tensors)
    moved[name] = moved[name].__class__(**{**vars(moved[name]),
                                           "offset": moved[name].offset + 64})
    host.tensors = moved
    assert graph_link.link_key(host) != key
    assert counts.generated == 0


def test_a_run_in_c_reads_no_target_plan_until_asked(models, cache, tmp_path):
    """The target's plan is an entry of its own, read when first asked for (a run on the
    host needs only the host plan); planned again from the file when that entry is lost,
    refused when the file's bytes changed meanwhile."""
    from npukit.errors import NpukitError

    _, _, counts = cache("float32")
    m, x = models("float32")
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    text = str(npukit.onnx.load(path, **BUDGETS))
    g = npukit.onnx.load(path, **BUDGETS)
    g.run("c", x=x)
    assert g._graph is None and g.from_plan_cache
    assert str(g) == text and g.graph.name == g.name and g.model.target == g.target
    for entry in (tmp_path / "cache" / plan_cache.PLANS).glob("*.plan"):
        entry.write_bytes(b"lost")
    g = npukit.onnx.load(path, **BUDGETS)  # planned: every entry lost
    h = npukit.onnx.load(path, **BUDGETS)
    assert h.from_plan_cache and counts.planned.count("target") == 1
    (tmp_path / "cache" / plan_cache.PLANS / f"{_graph_entry(h)}.plan").write_bytes(b"lost")
    assert str(h) == text and counts.planned.count("target") == 2 and not h.from_plan_cache
    k = npukit.onnx.load(path, **BUDGETS)
    (tmp_path / "cache" / plan_cache.PLANS / f"{_graph_entry(k)}.plan").write_bytes(b"lost")
    path.write_bytes(small_cnn(seed=5)[0].SerializeToString())
    with pytest.raises(NpukitError, match="its bytes changed since it was loaded"):
        str(k)  # the memory plan: the target plan, read


def _graph_entry(g) -> str:
    """The plan cache's key of ``g``'s target plan (a plan read back: its ``_target_plan``
    holds the key)."""
    return g._target_plan.args[0].digest("graph")


def test_cache_info_counts_links_and_constants_files_and_clear_removes_them(cache):
    folder, _, _ = cache("float32", "int8")
    got = compile_cache.info(folder)
    assert got["links"] == 2 and got["flash"] == 2 and got["unused_bytes"] == 0
    flash = list((folder / compile_cache.FLASH).rglob("*.dat"))
    assert len(flash) == 2 and got["bytes"] >= sum(p.stat().st_size for p in flash)
    (folder / compile_cache.FLASH / "notes.txt").write_text("not npukit's")
    count, size = compile_cache.clear(folder)
    assert size == got["bytes"] and compile_cache.info(folder)["bytes"] == 0
    assert [p.name for p in (folder / compile_cache.FLASH).iterdir()] == ["notes.txt"]
    assert list((folder / compile_cache.LINKS).iterdir()) == []
