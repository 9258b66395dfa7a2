"""The conversion fuzzer at test-suite size (``fuzz_conversions``): every dtype conversion
of the Compass DSL (``S.cast``, every pair of its types) and of the kernel language (a
transfer into a tensor of another dtype, every pair), and ``S.vstore_scatter`` under every
kind of mask, on the simulator, the fused C and the literal C, bit for bit, and against
an exact oracle; then the bugs it found, each as a minimal regression test.
``benchmarks/fuzz.py --family conversions`` runs thousands of fresh seeds.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
from fuzz_conversions import (
    DSL_TYPES,
    KERNEL_TYPES,
    Cast,
    CopyCase,
    DslCase,
    Scatter,
    all_casts,
    check,
    generate,
)
from fuzz_kernels import FAILURES

from npukit import arith, passes
from npukit.c import run_c
from npukit.run import check_arrays
from npukit.sim.functional import Machine

PROGRAMS = 120


def failures(outcomes) -> list[str]:
    return [str(o) for o in outcomes if o.status in FAILURES]


def test_every_dsl_cast_agrees_with_c_and_the_oracle():
    """One kernel casts between every pair of the DSL's types (and bool), with and
    without saturation, on data at every rounding edge."""
    outs = check(all_casts(8), range(3))
    assert not failures(outs) and {o.status for o in outs} == {"agree"}


def test_every_kernel_language_conversion_agrees_and_float_to_int_is_refused():
    """Every pair of the kernel language's dtypes through a transfer; building a float to
    integer transfer must be refused (``CopyCase.build`` checks each such pair)."""
    case = CopyCase(0)
    assert len(case.pairs()) + len(case.refused()) == len(KERNEL_TYPES) * (len(KERNEL_TYPES) - 1)
    outs = check(case, range(3))
    assert not failures(outs) and {o.status for o in outs} == {"agree"}


def test_the_harness_sees_a_simulator_that_rounds_float_to_int(monkeypatch):
    """The fuzzer's own check: a simulator that rounds ``S.cast`` of floats to the nearest
    integer (as npukit did before) disagrees with the C, which truncates."""
    cast = arith.vec_cast

    def rounding(x, dt, saturate=False):
        return cast(np.rint(x.astype(np.float64)) if x.dtype.kind == "f" else x, dt, saturate)

    monkeypatch.setattr(arith, "vec_cast", rounding)
    case = DslCase(1, (Cast("float32", "int32", 8, None),))
    assert [o.status for o in check(case, [0])] == ["disagree"]


def test_the_harness_sees_a_scatter_that_writes_masked_off_lanes(monkeypatch):
    """A simulator that stores every lane of ``S.vstore_scatter`` writes where the C and
    the oracle keep the output's contents."""
    indices = Machine._indices

    def every_lane(self, st, table, what, verb):
        idx, active = indices(self, st, table, what, verb)
        return idx, np.ones_like(active)

    monkeypatch.setattr(Machine, "_indices", every_lane)
    bits = tuple(k < 16 for k in range(32))
    case = DslCase(2, (Scatter("int8", 32, 1, 100, "uint16", "S.tail_mask(16, 32)", bits,
                               False, True),))
    assert [o.status for o in check(case, [0])] == ["disagree"]


@pytest.fixture(scope="module")
def outcomes() -> dict[int, list]:
    return {seed: check(generate(seed), range(2)) for seed in range(PROGRAMS)}


@pytest.mark.slow  # builds and runs PROGRAMS random programs (about 20 s)
def test_random_programs_agree(outcomes):
    bad = [x for outs in outcomes.values() for x in failures(outs)]
    assert not bad, "\n".join(bad[:20])


@pytest.mark.slow
def test_the_fuzzer_covers_every_conversion_and_mask(outcomes):
    """The random programs reach every DSL cast pair but a few, constant and run-time
    masks, zeroed masked-off lanes, lsram, flexible lane counts; almost all build."""
    cases = [generate(s) for s, outs in outcomes.items() if outs[0].status != "refused"]
    assert len(cases) >= 0.9 * PROGRAMS
    sts = [s for c in cases if isinstance(c, DslCase) for s in c.statements]
    pairs = {(s.src, s.dst) for s in sts if isinstance(s, Cast)}
    assert len(pairs) >= 0.8 * len(DSL_TYPES) * (len(DSL_TYPES) + 1)
    scatters = [s for s in sts if isinstance(s, Scatter)]
    kinds = collections.Counter(s.mask.split("(")[0][:6] for s in scatters)
    assert {"", "{m} > ", "S.vnot", "S.vand", "S.tail"} <= set(kinds), kinds
    assert any(s.bits is not None and not s.mask.startswith("S.") for s in scatters)
    assert any(s.zeroed for s in scatters) and any(s.lsram for s in scatters)
    assert {s.dtype for s in scatters} == set(DSL_TYPES)
    assert {s.lanes for s in sts} - {8, 16, 32}  # vectors of other lane counts too


# -- regressions found by the fuzzer -------------------------------------------------------


@pytest.mark.parametrize("dst", ["int8", "uint32", "int64"])
def test_a_store_from_uint64_past_int64_saturates_to_the_maximum(dst):
    """Both back ends read a uint64 as int64 before clamping: 2**64 - 1 became -1, so into
    int8 it gave -128 (and into int64, -1) where saturation gives the maximum."""
    x = np.array([2**64 - 1, 2**63, 2**63 - 1, 5, 0], np.uint64)
    want = np.minimum(x, np.uint64(np.iinfo(dst).max)).astype(dst)
    case = CopyCase(0)
    prog = passes.check(case.program([("uint64", dst)]))
    for backend in ("sim", "c"):
        out = np.zeros(case.n, dst)
        arrays = {"x_uint64": np.resize(x, case.n), f"y_uint64_{dst}": out}
        if backend == "sim":
            prog.run("sim", **arrays)
        else:
            run_c(prog, check_arrays(prog, arrays), fuse=True)
        assert out[:5].tolist() == want.tolist(), backend
