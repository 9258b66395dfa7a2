"""Real AutoTiler cases (real_cases.py): npukit's tiler reproduces the tiling the real tool wrote
into each generated file — tile sizes and counts per space, last tiles, L1 offsets, slot
sizes and counts, L1 used — and the ported model runs equal to numpy on the simulator and
on the C back end. A case the rules do not reproduce is an expected failure with its
reason."""

from __future__ import annotations

import numpy as np
import pytest
import real_cases as C

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
