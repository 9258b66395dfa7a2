"""Real AutoTiler cases (real_cases.py): npukit's tiler reproduces the tiling the real tool wrote
into each generated file — tile sizes and counts per space, last tiles, L1 offsets, slot
sizes and counts, L1 used — and the ported model runs equal to numpy on the simulator and
on the C back end. A case the rules do not reproduce is an expected failure with its
reason."""

from __future__ import annotations

import numpy as np
import pytest
import real_cases as C

from npukit.errors import TilingError
from npukit.tiler import *

CANARY = -12345


def params(case):
    return [pytest.param(c, id=c.name, marks=[pytest.mark.xfail(strict=True, reason=c.xfail)]
                         if c.xfail else []) for c in case]


def test_the_collection():
    """At least eight cases from at least three projects; at least three of the newer
    generation reproduced; every case names where its numbers come from."""
    done = [c for c in C.CASES if not c.xfail]
    assert len(C.CASES) >= 8 and len({c.project for c in C.CASES}) >= 3
    newer = [c for c in done if c.build()[0].kernels[c.build()[1]].iter_space is not None]
    assert len(newer) >= 3
    for c in C.CASES:
        for repo, path, commit in (c.generated, c.model):
            assert "/" in repo and path and len(commit) == 40


@pytest.mark.parametrize("case", params(C.CASES))
def test_tiling_matches_the_generated_file(case):
    m, kernel = case.build()
    t = m.tiling(kernel)
    assert {k: (s.tile, s.count, s.last) for k, s in t.spaces.items()} == case.expect
    assert {n: (p.offset, p.size, p.slots) for n, p in t.args.items()} == case.args
    assert t.l1_used == case.l1 <= m.l1_budget
    assert t.promoted == case.extra.get("promoted", False)
    for name, pitch in case.extra.get("pitch", {}).items():
        assert t.args[name].pitch == pitch
    for name, (full, first, last) in case.extra.get("lines", {}).items():
        g = t.geometry[name]
        assert (g.tile_shape[g.frame.line], g.tiles[0][3], g.tiles[-1][3]) == (full, first, last)
    for name, (first, last) in case.extra.get("virtual", {}).items():
        g = t.geometry[name]
        assert (g.tiles[0][1], g.tiles[-1][1]) == (first, last)


def test_the_version_picks_the_rules():
    """The GAPuino GRU encoder at N=60 in 45000 B: AutoTiler 3.0 keeps every double-buffered
    one-line argument in 2 slots (H_0 in 3), which leaves Tile0 a share of 20387 B: 84 of
    120 columns (the real file). AutoTiler 4 gives a single tile one slot: everything fits
    whole, 56 + 120 + 240 + 480 + 120 + 240 + 240 + 120 + 240 + 7200 + 14400 = 23456 B."""
    old = C.gru_build(60, 45000, call_type=C.CALL_SEQUENTIAL)()
    new = C.gru_build(60, 45000, call_type=C.CALL_SEQUENTIAL, version="4")()
    t3, t4 = (m.tiling(k) for m, k in (old, new))
    assert (t3.spaces["Tile0"].tile, t3.spaces["Tile0"].count, t3.l1_used) == (84, 2, 38392)
    assert (t4.spaces["Tile0"].tile, t4.spaces["Tile0"].count, t4.l1_used) == (120, 1, 23456)
    assert {n: p.slots for n, p in t4.args.items()} == dict.fromkeys(t4.args, 1)
    assert (t3.args["H_0"].slots, t3.args["In"].slots, t3.args["Rec_Kernel2"].slots) == (3, 2, 2)
    with pytest.raises(TilingError, match=r"autotiler_version='3'.*'3.0', '4'"):
        C.Model(autotiler_version="3")


def test_a_mixed_space_as_the_autotiler_library_tiles_it():
    """The AutoTiler 3.0.2 library (libtile.a in CappelDen/Univariate-time-series-forecasting-
    with-Seq2Seq-models-on-GAPuino- at 09cb0a619a555c3c5b2aef1afae28e90af4650b5,
    GAPuino_Code/autotiler_generators/tools/autotiler_v3/DaEliminare/lib), run on this model,
    printed the partitions and wrote the tiling asserted here. Tile1 mixes a one-line output,
    a 16-line output with a preferred multiple of 4 (16 lines per reference line), a
    16-column input and a buffer: it needs them at 4 lines of their own, 4 x (60 + 696 +
    216) + 168 + 24 = 4080 B (not 16 x 696 for A1), is capped at 14916 B and stays whole;
    Tile0 (8 columns of A2, 3808 B, and a 290-byte buffer) gets the rest, 30083 B: 56
    columns."""
    S, V, P = "short int *", OBJ_CONSTRAINTS_TILE_VER, OBJ_CONSTRAINTS_PAD_REM
    m = C.Model(target="gap8", l1_budget=45000, autotiler_version="3.0")
    m.SetKernelOpts(KER_OPT_NONE, KER_OPT_BUFFER_PROMOTE)
    m.LibKernel("Ker", CALL_PARALLEL, CArgs(1, TCArg(S, "A")), "Ker_T")
    m.UserKernel("K", KernelIterSpace(2, IterTiledSpace(T1), IterTiledSpace(T0)), TILE_HOR,
        CArgs(6, *[TCArg(S, f"A{i}") for i in range(6)]),
        Calls(1, Call("Ker", LOC_LOOP, Bindings(1, K_Arg("A3", KER_ARG_TILE)))),
        KerArgs(6,
            KerArg("A0", KerArgSpace(1, T1), O_OUT | O_DB, 15, 1, 2, 0, P, 0, "A0"),
            KerArg("A1", KerArgSpace(1, T1), O_OUT | O_DB, 174, 16, 2, 0, P, 4, "A1"),
            KerArg("A2", KerArgSpace(1, T0), O_IN | O_DB, 78, 119, 2, 0, V | P, 8, "A2"),
            KerArg("A3", KerArgSpace(1, T1), O_IN | O_DB, 16, 54, 2, 0, V | P, 0, "A3"),
            KerArg("A4", KerArgSpace(1, T1), O_BUFF | O_NTILED, 42, 1, 4, 0, 0, 0, 0),
            KerArg("A5", KerArgSpace(1, T0), O_BUFF | O_NTILED, 145, 1, 2, 0, 0, 0, 0)))
    t = m.tiling("K")
    assert {k: (s.tile, s.count, s.last) for k, s in t.spaces.items()} == {
        "Tile1": (1, 1, 1), "Tile0": (56, 2, 22)}
    assert {n: (p.offset, p.size, p.slots) for n, p in t.args.items()} == {
        "A0": (0, 30, 2), "A1": (64, 5568, 2), "A2": (14824, 13328, 2), "A3": (11200, 1728, 2),
        "A4": (14656, 168, 1), "A5": (41480, 290, 1)}
    assert t.l1_used == 41772


def canaried(arr):
    """``arr``'s shape inside a larger canary-filled buffer: (the whole, the view)."""
    big = np.full(arr.size + 64, CANARY, arr.dtype)
    view = big[32:32 + arr.size].reshape(arr.shape)
    view[...] = arr
    return big, view


def scalar(prog, name, value):
    return np.array(value, prog.param(name)[0].dtype)


@pytest.mark.parametrize("backend", ["sim", pytest.param("c", marks=pytest.mark.slow)])
@pytest.mark.parametrize("case", C.CASES, ids=[c.name for c in C.CASES])
def test_runs_equal_to_numpy(case, backend):
    """Every case runs right, the ones whose tiling the rules miss too (with npukit's)."""
    m, kernel = case.build()
    prog = m.program(kernel)
    ins, outs, want = case.data(np.random.default_rng(len(case.name)))
    arrays = {k: (scalar(prog, k, v) if np.ndim(v) == 0 else v) for k, v in ins.items()}
    bigs = {}
    for name, init in outs.items():
        # Pure outputs start as canaries: every element must be written.
        start = init if prog.param(name)[0].role == "inout" else np.full_like(init, CANARY)
        bigs[name], arrays[name] = canaried(start)
    prog.run(backend, **arrays)
    for name, expected in want.items():
        assert (arrays[name] == expected).all(), name
        assert (bigs[name][:32] == CANARY).all() and (bigs[name][-32:] == CANARY).all()
    assert all(len(np.unique(e)) > min(10, e.size // 2) for e in want.values())  # not trivial


BUILTIN = [c for c in C.CASES if c.name in C.MNIST_BUILTIN]


@pytest.mark.parametrize("case", BUILTIN, ids=[c.name for c in BUILTIN])
def test_builtin_generators_reproduce_the_mnist_file(case):
    """``m.CNN_ConvolutionPoolReLU`` / ``m.CNN_LinearReLU`` called with gap_sdk 4.8's
    MnistModel.c arguments give every number of its MnistKernels.c: tiles per space, L1
    offsets, slot sizes and counts, the L1 total."""
    m, kernel = C.mnist_builtin(case)
    t = m.tiling(kernel)
    assert {k: (s.tile, s.count, s.last) for k, s in t.spaces.items()} == case.expect
    assert {n: (p.offset, p.size, p.slots) for n, p in t.args.items()} == case.args
    assert t.l1_used == case.l1 and t.promoted == case.extra.get("promoted", False)
    for name, (full, first, last) in case.extra.get("lines", {}).items():
        g = t.geometry[name]
        assert (g.tile_shape[g.frame.line], g.tiles[0][3], g.tiles[-1][3]) == (full, first, last)


@pytest.mark.parametrize("backend", ["sim", pytest.param("c", marks=pytest.mark.slow)])
@pytest.mark.parametrize("case", BUILTIN, ids=[c.name for c in BUILTIN])
def test_builtin_generators_run_the_mnist_layers_equal_to_numpy(case, backend):
    """The same layers run on the built-ins' parallel-feature kernels equal the fixed-point
    oracle; every output element is written (canary fill), nothing around it."""
    m, kernel = C.mnist_builtin(case)
    prog = m.program(kernel)
    ins, outs, _ = case.data(np.random.default_rng(len(case.name)))
    want = C.builtin_oracle(case, ins)
    assert len(np.unique(want)) >= min(10, want.size) and (want != 0).mean() > 0.3  # not trivial
    arrays = {k: v.reshape(prog.param(k)[1].shape) for k, v in ins.items()}
    (name, init), = outs.items()
    big, arrays[name] = canaried(np.full(prog.param(name)[1].shape, CANARY, init.dtype))
    prog.run(backend, **arrays)
    assert (arrays[name].reshape(want.shape) == want).all()
    assert (big[:32] == CANARY).all() and (big[-32:] == CANARY).all()
