"""The differential fuzzer at test-suite size: random EasyKernel programs (``fuzz_kernels``)
on the simulator, the fused C and the literal C, bit for bit, and against numpy; then the
bugs it found, each as a minimal regression test.

The programs are the same on every run (seeds 0..PROGRAMS-1), so their compiled C stays in
the cache; each runs DATA_SETS data sets. ``benchmarks/fuzz.py`` runs thousands of fresh
seeds (``--seed``) and replays one (``--replay SEED``).
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
from fuzz_kernels import FAILURES, check, generate
from kernel_helpers import rescale_ref

import npukit as nk
from npukit import arith
from npukit import kernels as K
from npukit.sim.functional import Machine

PROGRAMS = 160
DATA_SETS = 3


@pytest.fixture(scope="module")
def outcomes() -> dict[int, list]:
    return {seed: check(generate(seed), range(DATA_SETS)) for seed in range(PROGRAMS)}


@pytest.mark.slow  # builds and runs the PROGRAMS random programs
def test_back_ends_agree_bit_for_bit(outcomes):
    """No program raises anything but an NpukitError at build, none fails to run, and on
    every data set the back ends agree with each other and with numpy."""
    bad = [str(o) for outs in outcomes.values() for o in outs if o.status in FAILURES]
    assert not bad, "\n".join(bad[:20])


@pytest.mark.slow
def test_the_fuzzer_covers_the_kernel_language(outcomes):
    """The generated programs reach every ALU and Act instruction and mode, store and append,
    sub-vector loops, accumulation, float and integer partials; most of them build and
    the refused ones are refused for several reasons."""
    built = {s for s, outs in outcomes.items() if outs[0].status != "refused"}
    refused = collections.Counter(outs[0].error for outs in outcomes.values()
                                  if outs[0].status == "refused")
    assert len(built) >= 0.75 * PROGRAMS and len(refused) >= 3
    sources = "\n".join(generate(s).source for s in built)
    for word in ("elementwise_product_accumulate", "scalar_product_accumulate", "accumulate(",
                 "elementwise_add", "elementwise_sub", "elementwise_max", "elementwise_min",
                 "rescale_clamp", "act.clamp", "act.lookup", "act.linear_approx", "s.store",
                 "s.append", "PData.Vectors", "s.iterate([", "fuse(", "broadcast_as",
                 "s.iram.load", "s.wram.load", "s.bram.load",
                 # Torq's accumulate modes and Act modes
                 "'MAX')", "'MIN')", "'MUL')", "'BAND')", "'BOR')", "'BXOR')",
                 "out_max, 'ABS')", "out_max, 'NEG')", "out_max, 'CLZ')"):
        assert word in sources, word
    cases = [generate(s) for s in built]
    assert any(c.logic.acc for c in cases) and any(not c.logic.acc for c in cases)
    assert any(c.logic.fold for c in cases) and any(c.init for c in cases)  # lane sums, inout
    dtypes = {o.dtype for c in cases for o in c.operands}
    assert {"int8", "int16", "float32", "bfloat16", "float16", "uint8"} <= dtypes


def agreeing(outcomes, word: str) -> int:
    """A program of the suite whose source says ``word``, on integer data into a signed
    output (an unsigned one may saturate every value to 0, hiding an off-by-one), that
    agreed."""
    for seed, outs in outcomes.items():
        case = generate(seed)
        if outs[0].status == "agree" and word in case.source and \
                case.operands[0].dtype.startswith(("int", "uint")) and \
                case.out.dtype.startswith("int"):
            return seed
    raise AssertionError(f"no program of the suite uses {word}")


@pytest.mark.slow
def test_the_harness_sees_a_wrong_simulator(outcomes, monkeypatch):
    """The fuzzer's own check: a simulator whose clamp is off by one disagrees with C."""
    seed = agreeing(outcomes, "act.clamp")
    clamp = arith.clamp
    monkeypatch.setattr(arith, "clamp", lambda p, lo, hi: clamp(p, lo, hi) + 1)
    got = check(generate(seed), [0])
    assert got[0].status == "disagree" and "!= sim" in got[0].detail, got


@pytest.mark.slow
def test_the_harness_sees_an_unwritten_output(outcomes, monkeypatch):
    """A simulator that appends nothing leaves its poison in the output: C differs."""
    seed = agreeing(outcomes, "s.append")
    monkeypatch.setattr(Machine, "append", lambda self, st: None)
    got = check(generate(seed), [0])
    assert got[0].status == "disagree", got


# -- regressions found by the fuzzer -------------------------------------------------------


@pytest.mark.parametrize("backend", ["sim", "c"])
def test_input_spec_that_broadcasts(backend):
    """A spec may broadcast an input (stride 0, as np.broadcast_to makes): the simulator
    copied it into its image through a read-only view and raised a raw ValueError."""
    rng = np.random.default_rng(5)
    row = rng.integers(-128, 128, 16).astype(np.int8)
    a = rng.integers(-128, 128, (4, 16)).astype(np.int8)
    prog = nk.build(K.mul, target="torq", input1=nk.spec((4, 16), "int8"),
                    input2=nk.spec((4, 16), "int8", (0, 1)), bias_scale=nk.spec((2,), "int32"),
                    output=nk.spec((4, 16), "int16"), shift=2, out_min=-30000, out_max=30000)
    out = np.full((4, 16), 0x5A5A, np.int16)
    prog.run(backend, input1=a, input2=np.broadcast_to(row, (4, 16)),
             bias_scale=np.array([3, 5], np.int32), output=out)
    assert (out == rescale_ref(a, row[None, :], 3, 5, 2, -30000, 30000)).all()


@nk.kernel
def clamp_f32(s, x, out, *, lo, hi):
    x = x.vectorize(8)
    for i in s.iterate(x.dim(0)):
        idata = s.iram.load(x[i])
        pdata = s.alu.accumulate(idata)
        res = s.act.clamp(pdata, lo, hi)
        s.append(out, res)


@pytest.mark.parametrize("lo, hi", [(-1.0, float("nan")), (float("nan"), 1.0),
                                    (float("nan"), float("nan")), (0.0, -0.0)])
def test_float_clamp_bounds_compare_like_c(lo, hi):
    """``x = lo if x < lo; x = hi if x > hi``: a NaN bound clamps nothing. The simulator
    used np.clip, which makes every result NaN for a NaN bound, while C compares."""
    x = np.array([np.nan, -np.inf, -2.0, -0.0, 0.0, 0.5, 3.0, np.inf, 1e-45, -1.0, 1.0],
                 np.float32)
    f = np.float32
    want = np.where(x < f(lo), f(lo), x)
    want = np.where(want > f(hi), f(hi), want)
    prog = nk.build(clamp_f32, target="torq", x=nk.spec(x.shape, "float32"),
                    out=nk.spec(x.shape, "float32"), lo=lo, hi=hi)
    for backend in ("sim", "c"):
        out = np.full(x.shape, 1234.5, np.float32)
        prog.run(backend, x=x, out=out)
        same = (np.isnan(out) & np.isnan(want)) | (out.view(np.uint32) == want.view(np.uint32))
        assert same.all(), (backend, out, want)


@pytest.mark.parametrize("pair", ["float32", "bfloat16", "float16"])
def test_float_bias_scale_for_integer_partials_is_refused(pair):
    """The simulator truncated a float (bias, scale) to int64, the C back end failed only
    when asked for its source (or cast NaN to int64: undefined). Refused at build now."""
    with pytest.raises(nk.DTypeError, match="bias_scale"):
        nk.build(K.mul_vectorized, target="torq", input1=nk.spec((20,), "int8"),
                 input2=nk.spec((20,), "int8"), bias_scale=nk.spec((2,), pair),
                 output=nk.spec((20,), "int8"), shift=1, out_min=-128, out_max=127)


@nk.kernel
def column_sums(s, a, b, out, *, op):
    """``out[c] = sum over rows r of op(a[r, c], b[r, c])``, accumulated by the ALU."""
    a, b = a.vectorize(8), b.vectorize(8)
    for c in s.iterate(a.dim(1)):
        for r in s.iterate(a.dim(0)):
            idata = s.iram.load(a[r][c])
            wdata = s.wram.load(b[r][c])
            pdata = getattr(s.alu, f"elementwise_{op}")(idata, wdata)
        res = s.act.clamp(pdata, -np.inf, np.inf)
        s.append(out, res)


@pytest.mark.parametrize("op, b1", [("sub", 1e8), ("add", -1e8)])
def test_float_accumulation_adds_the_whole_alu_result(op, b1):
    """Partials += (a - b): C summed ``acc + a - b``, i.e. ``(acc + a) - b``, which rounds
    differently: 1 + (1e8 - 1e8) is 1, (1 + 1e8) - 1e8 is 0 in float32."""
    a = np.array([[1.0] * 5, [1e8] * 5], np.float32)
    b = np.array([[0.0] * 5, [b1] * 5], np.float32)
    prog = nk.build(column_sums, target="torq", a=nk.spec(a.shape, "float32"),
                    b=nk.spec(b.shape, "float32"), out=nk.spec((5,), "float32"), op=op)
    for backend in ("sim", "c"):
        out = np.zeros(5, np.float32)
        prog.run(backend, a=a, b=b, out=out)
        assert (out == 1.0).all(), (backend, out)
