"""A graph's basic kernels compiled without the copies of their code no call of the graph can
reach (``npukit.c.pieces.unreachable`` and ``prune``, over the guards of
``npukit.tiler.basic_kernels.common.c_skippable``): the pieces leave out a copy the graph
cannot call, and a pruned build writes the bytes of the build with every copy, float32 and
int8, also where a call's shape reaches a copy that was left out (its fallback runs)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_helpers import model, node, quantize_qdq

import npukit.onnx
from npukit.c import pieces
from npukit.c.pieces import evaluate, prune, reach, unreachable
from npukit.tiler.basic_kernels.common import CONV_SHAPES, c_copies, c_pick_copy
from npukit.tiler.graph_c import CompiledGraph, c_pieces

BUDGETS = dict(l1_budget=48000, l2_budget=256 * 1024, l3_budget=8 << 20,
               l3_flash_budget=8 << 20)
CONV = "KerParConvNpk_fl"


def test_evaluate_is_three_valued_c():
    assert evaluate("Wo < 32 && Wo == W", {"Wo": 56}) is False
    assert evaluate("Wo < 32 && Wo == W", {"Wo": 7}) is None  # W not known
    assert evaluate("Wo < 32 && Wo == W", {"Wo": 7, "W": 7}) is True
    assert evaluate("(Sx == 1 || Sx == 2) && (Fx * Fy > 1 || InFeat > 1)",
                    {"Sx": 2, "Fx": 1, "Fy": 1}) is None
    assert evaluate("(Sx == 1 || Sx == 2) && (Fx * Fy > 1 || InFeat > 1)",
                    {"Sx": 2, "Fx": 1, "Fy": 1, "InFeat": 8}) is True
    assert evaluate("(Sx == 1 || Sx == 2) && Fx <= 16", {"Sx": 3}) is False
    assert evaluate("!(A == 1) || B - 2 >= 0", {"A": 1, "B": 1}) is False


PARAMS = tuple(("int", n) for n in ("Fx", "Fy", "Sx", "Sy", "Dx", "Dy", "Wo"))


def kernel(otherwise: str = "", when: str = "") -> str:
    """A kernel ``K`` choosing among the copies of ``K_Body`` by shape, as the convolutions
    do (``c_copies``, ``c_pick_copy``)."""
    call = c_pick_copy("K_Body", PARAMS, CONV_SHAPES, "        ", otherwise=otherwise,
                       when=when)
    return f"""\
static inline void K_Body(int Fx, int Fy, int Sx, int Sy, int Dx, int Dy, int Wo) {{ }}
{c_copies("K_Body", PARAMS, CONV_SHAPES)}
void K(int Fx, int Fy, int Sx, int Sy, int Dx, int Dy, int Wo)
{{
    for (int k = 0; k < 2; k++)
{call}
}}
"""


S3 = dict(Fx=3, Fy=3, Sx=1, Sy=1, Dx=1, Dy=1)


def test_unreachable_copies_follow_the_tests_in_order():
    src = kernel(otherwise="break;")
    names = {f"K_Body_{t}" for t in ("3x3", "1x1", "3x3s2", "Any")}
    # A 3x3 call reaches its copy only; a 7x7 one the generic copy only.
    assert unreachable(src, [S3]) == names - {"K_Body_3x3"}
    assert unreachable(src, [{**S3, "Fx": 7, "Fy": 7}]) == names - {"K_Body_Any"}
    # An argument known only at run time: every copy it could pass stays.
    assert unreachable(src, [{**S3, "Sx": None, "Sy": None}]) == {"K_Body_1x1"}
    assert unreachable(src, [{}]) == set()
    # Without a stand-in the generic copy is not a candidate: always compiled.
    assert unreachable(kernel(), [S3]) == names - {"K_Body_3x3", "K_Body_Any"}
    # A condition the call's arguments contradict: nothing of the site is reached.
    assert unreachable(kernel("break;", "Wo < 32"), [{**S3, "Wo": 56}]) == names
    assert unreachable(kernel("break;", "Wo < 32"), [{**S3, "Wo": 7}]) == \
        names - {"K_Body_3x3"}


def test_a_chain_after_a_return_its_runs_take_is_not_reached():
    early = "    if (Wo < 8 && Fx == 3) {\n        /* small */\n        return;\n    }\n"
    src = kernel(otherwise="break;").replace("{\n    for (int k", "{\n" + early + "    for (int k")
    names = {f"K_Body_{t}" for t in ("3x3", "1x1", "3x3s2", "Any")}
    assert unreachable(src, [{**S3, "Wo": 4}]) == names
    assert unreachable(src, [{**S3, "Wo": 4}, {**S3, "Wo": 9}]) == names - {"K_Body_3x3"}
    # A return compiled only under a preprocessor condition the chain is not under: the
    # chain is reached where that return is not compiled.
    guarded = src.replace(early, f"#ifdef NPK_FAST\n{early}#endif\n")
    assert unreachable(guarded, [{**S3, "Wo": 4}]) == names - {"K_Body_3x3"}
    assert reach(guarded, [{**S3, "Wo": 4}])["K_Body_3x3"] == "!(defined(NPK_FAST))"
    kept = prune(guarded, reach(guarded, [{**S3, "Wo": 4}]))
    assert "#if !(defined(NPK_FAST))\n#ifndef NPK_SKIP_K_Body_3x3" in kept
    # A block that does not end in its return may fall through.
    falls = src.replace("        return;\n    }", "        if (Sx) return;\n        Wo++;\n    }")
    assert unreachable(falls, [{**S3, "Wo": 4}]) == names - {"K_Body_3x3"}


def test_prune_leaves_out_the_copies_and_their_calls():
    src = kernel(otherwise="break;")
    out = prune(src, unreachable(src, [S3]))
    assert "K_Body_3x3(" in out and "K_Body_Any" not in out and "K_Body_1x1" not in out
    assert "break;" in out  # what stands in for the generic copy
    # A copy the remaining code still calls is kept, whatever it was asked.
    plain = kernel()
    assert "K_Body_Any(" in prune(plain, {"K_Body_Any", "K_Body_1x1"})
    assert "K_Body_1x1" not in prune(plain, {"K_Body_Any", "K_Body_1x1"})


def conv_net(size: int = 12, seed: int = 0, strided: bool = False):
    """Conv 3x3 + Relu, then Conv 1x1 (``strided``: Conv 3x3 at stride 2, then a 5x5 one),
    a residual Add where the shapes allow it."""
    rng = np.random.default_rng(seed)
    inits = {"w1": rng.normal(size=(8, 3, 3, 3)).astype(np.float32) * 0.3,
             "b1": rng.normal(size=8).astype(np.float32) * 0.1,
             "w2": rng.normal(size=(8, 8, 1, 1)).astype(np.float32) * 0.3,
             "b2": rng.normal(size=8).astype(np.float32) * 0.1}
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1] * 4),
             node("Relu", ["c1"], ["r1"])]
    if strided:
        inits["w2"] = rng.normal(size=(8, 8, 3, 3)).astype(np.float32) * 0.3
        inits["w3"] = rng.normal(size=(5, 8, 5, 5)).astype(np.float32) * 0.1
        nodes += [node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], pads=[1] * 4,
                       strides=[2, 2]),
                  node("Conv", ["c2", "w3"], ["y"], kernel_shape=[5, 5], pads=[2] * 4)]
    else:
        nodes += [node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[1, 1]),
                  node("Add", ["c2", "r1"], ["y"])]
    x = rng.normal(size=(1, 3, size, size)).astype(np.float32)
    return model(nodes, {"x": x}, ["y"], inits), x


def conv_definitions(hg) -> set[str]:
    """The copies of the float convolution the graph's kernel pieces define."""
    import re
    units, _ = c_pieces(hg)
    return {m for what, text, _ in units if what.startswith("basic kernels")
            for m in re.findall(rf"NPK_NOINLINE void ({CONV}_\w+)\(.*\)\n\{{", text)}


def test_a_graphs_pieces_leave_out_the_copies_it_cannot_call():
    m, _ = conv_net()
    hg = npukit.onnx.load(m, **BUDGETS).host_graph()
    defined = conv_definitions(hg)
    # 3x3 and 1x1 at stride 1, 12 columns, 8 features: the 3x3 copies; none of stride 2, no
    # generic one but the last fallback; no 1x1 feature blocks (every run of the 1x1 layer
    # takes the pointwise form, which returns before them).
    assert {f"{CONV}_Feats8_3x3", f"{CONV}_Flat_3x3", f"{CONV}_Rows_Any"} <= defined
    assert not {f"{CONV}_Feats8_3x3s2", f"{CONV}_Rows_3x3s2", f"{CONV}_Feats8_Any",
                f"{CONV}_Feats8_1x1"} & defined
    # The graph's single unit keeps them all.
    assert f"{CONV}_Rows_3x3s2(" in hg.c_source()


def outputs(g, x, tmp_path, monkeypatch, calls=...):
    """The output of graph ``g``'s C compiled in pieces in a cache of its own, over a canary;
    ``calls``: what the pruning is told the graph calls (None: every copy compiled)."""
    if calls is not ...:
        monkeypatch.setattr(pieces, "program_calls", lambda progs: calls)
    monkeypatch.setenv("NPUKIT_CACHE_DIR", str(tmp_path / f"cache{len(list(tmp_path.iterdir()))}"))
    hg = g.host_graph()
    out = g.outputs["y"]
    canary = np.array(-7.25e30 if out.dtype == np.float32 else 77, out.dtype)
    arrays = {g.inputs["x"].cname: x, out.cname: np.full(out.shape, canary)}
    CompiledGraph(hg)(**arrays)
    monkeypatch.undo()
    got = arrays[out.cname]
    assert np.abs(got.astype(np.float64)).max() > 0
    return got, canary


def check_same_bytes(m, x, tmp_path, monkeypatch):
    g = npukit.onnx.load(m, **BUDGETS)
    whole, _ = outputs(g, x, tmp_path, monkeypatch, calls=None)
    pruned, canary = outputs(g, x, tmp_path, monkeypatch)
    # Told the graph calls 1x1 filters only: its 3x3 calls reach no copy of their shape
    # (the feature blocks break off to the generic loops).
    only = {CONV: [dict(Fx=1, Fy=1, Sx=1, Sy=1, Dx=1, Dy=1, W=64, Wo=64)]}
    fallback, _ = outputs(g, x, tmp_path, monkeypatch, calls=only)
    assert not (whole == canary).any()
    assert pruned.tobytes() == whole.tobytes()
    assert fallback.tobytes() == whole.tobytes()


def test_pruned_float_pieces_write_the_bytes_of_every_copy(tmp_path, monkeypatch):
    m, x = conv_net()
    check_same_bytes(m, x, tmp_path, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("strided", [False, True])
def test_pruned_int8_pieces_write_the_bytes_of_every_copy(tmp_path, monkeypatch, strided):
    m, x = conv_net(size=20, strided=strided)
    rng = np.random.default_rng(3)
    (tmp_path / "q").mkdir()
    q = quantize_qdq(m, [{"x": rng.normal(size=x.shape).astype(np.float32)}
                         for _ in range(2)], tmp_path / "q", "u8")
    check_same_bytes(q, x, tmp_path, monkeypatch)


@pytest.mark.slow
def test_pruned_float_pieces_of_many_shapes_write_the_bytes_of_every_copy(tmp_path,
                                                                          monkeypatch):
    m, x = conv_net(size=40, strided=True)
    check_same_bytes(m, x, tmp_path, monkeypatch)
