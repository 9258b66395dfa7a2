"""``TensorOperation``: the TPP text's configuration and checks, the first and last touch
semantics, the lowering to the one IR (loops, parallel loops, peeled k loops, calls of the
generated primitives), the C back end against an independent numpy oracle, results that do
not depend on the thread count, and no raw exception on hostile input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tpp_helpers import data, operations, oracle

import npukit as nk
from npukit import ir, tpp

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def gemm_op(m=64, n=64, k=64, first="zero", last="relu", **kw):
    """The DESIGN example: C (m x n) = relu(A B), all column-major."""
    cfg = dict(dtype="float32", prim_first=first, prim_main="gemm", prim_last=last,
               dim_types=("m", "n", "k"), exec_types=("prim", "prim", "prim"),
               dim_sizes=(m, n, k), strides_in0=(1, 0, m), strides_in1=(0, k, 1),
               strides_out=(1, m, 0))
    cfg.update(kw)
    return tpp.TensorOperation(**cfg)


def test_design_example_against_numpy():
    op = gemm_op()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 64), dtype=np.float32)  # read as flat column-major buffers
    b = rng.standard_normal((64, 64), dtype=np.float32)
    out = np.full((64, 64), np.nan, np.float32)
    op.optimize()(a, b, out)
    want = np.maximum(a.T.astype(np.float64) @ b.T.astype(np.float64), 0).T  # column-major
    assert np.abs(out - want).max() < 64 * 2**-24 * (np.abs(a.T) @ np.abs(b.T)).max()


def test_configuration_reads_back_with_the_tpp_names():
    op = gemm_op()
    assert (op.dtype, op.prim_first, op.prim_main, op.prim_last) == \
        ("float32", "zero", "gemm", "relu")
    assert op.dim_types == ("m", "n", "k") and op.exec_types == ("prim",) * 3
    assert op.dim_sizes == (64, 64, 64) and op.strides_out == (1, 64, 0)
    assert tpp.TensorOperation(**op.config()).config() == op.config()
    text = str(op)
    assert "first zero, main gemm, last relu" in text and "  2  k     prim" in text


# -- touches --------------------------------------------------------------------------------

def test_touches_run_once_per_output_block_around_split_k_loops():
    """k split into two seq loops (3 x 2) around a prim k of 4: the first touch
    (increment) runs once before the first main call of a block, the last touch (square)
    once after the last: out = (out + 1 + A B)^2. Running them at every k step would
    give another number."""
    m, n = 5, 3
    op = tpp.TensorOperation(
        "float32", "increment", "gemm", "square",
        dim_types=("k", "n", "k", "m", "n", "k"),
        exec_types=("seq", "seq", "seq", "prim", "prim", "prim"),
        dim_sizes=(3, 2, 2, m, n, 4),
        strides_in0=(8 * m, 0, 4 * m, 1, 0, m), strides_in1=(8, 24 * n, 4, 0, 24, 1),
        strides_out=(0, m * n, 0, 1, m, 0))
    rng = np.random.default_rng(1)
    in0, in1, out = data(rng, op)
    want = oracle(op, in0, in1, out)
    op(in0, in1, out)
    assert np.array_equal(out, want)
    # The first k iteration holds the first touch, the last one the last touch.
    labels = [st.label for st, _ in op.program().walk() if isinstance(st, ir.Call)]
    assert sum(x.startswith("first touch") for x in labels) == 1
    assert sum(x.startswith("last touch") for x in labels) == 1


@pytest.mark.parametrize("first", ["none", "zero", "relu", "square", "reciprocal",
                                   "increment", "decrement"])
def test_every_first_touch_on_the_simulator(first):
    op = gemm_op(6, 5, 3, first=first, last="none")
    in0, in1, out = data(np.random.default_rng(2), op)
    res = op.program().run("sim", in0=in0[:op.extent("in0")], in1=in1[:op.extent("in1")],
                           out=out[:op.extent("out")].copy())
    assert np.array_equal(res.outputs["out"], oracle(op, in0, in1, out)[:op.extent("out")])


@pytest.mark.parametrize("last", ["none", "relu", "square", "reciprocal", "increment",
                                  "decrement", "fast_sigmoid", "taylor_sigmoid",
                                  "interp_sigmoid"])
def test_every_last_touch_on_the_simulator(last):
    op = gemm_op(6, 5, 3, first="zero", last=last)
    in0, in1, out = data(np.random.default_rng(3), op)
    res = op.program().run("sim", in0=in0[:op.extent("in0")], in1=in1[:op.extent("in1")],
                           out=out[:op.extent("out")].copy())
    assert np.array_equal(res.outputs["out"], oracle(op, in0, in1, out)[:op.extent("out")])


# -- the C back end on operations of every kind ----------------------------------------------

CASES = {
    "transposed identity with shared and seq loops": dict(
        prim_main="identity", prim_last="relu", dim_types=("c", "c", "c"),
        exec_types=("shared", "prim", "prim"), dim_sizes=(3, 17, 13),
        strides_in0=(17 * 13, 1, 17), strides_in1=(0, 0, 0),
        strides_out=(17 * 14, 14, 1)),
    "binary add with a broadcast column": dict(
        prim_main="add", dim_types=("m", "n", "c"), exec_types=("prim", "prim", "seq"),
        dim_sizes=(19, 7, 3), strides_in0=(1, 19, 133), strides_in1=(1, 0, 19),
        strides_out=(1, 20, 140)),
    "brgemm with gaps in out": dict(
        prim_first="zero", prim_main="brgemm", prim_last="fast_sigmoid",
        dim_types=("n", "k", "m", "n", "k"), exec_types=("shared", "prim", "prim", "prim",
                                                          "prim"),
        dim_sizes=(2, 3, 33, 13, 9), strides_in0=(0, 33 * 9, 1, 0, 33),
        strides_in1=(3 * 9 * 13, 9, 0, 27, 1), strides_out=(40 * 13, 0, 1, 40, 0)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_c_back_end_against_the_oracle_with_canaries(name):
    """Out is a buffer with gaps between its columns and a tail: the canary in both stays
    bit for bit; every element of the operation's blocks equals the oracle."""
    op = tpp.TensorOperation(**CASES[name])
    rng = np.random.default_rng(4)
    in0, in1, out = data(rng, op)
    out[:] = np.uint32(0x7FC12345).view(np.float32) if op.prim_first == "zero" else out
    want = oracle(op, in0, in1, out)
    got = op(in0, in1, out.copy())
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_c_matches_the_simulator_and_costs_cycles():
    op = tpp.TensorOperation(**CASES["brgemm with gaps in out"])
    in0, in1, out = data(np.random.default_rng(5), op)
    c = op(in0, in1, out.copy())
    sim = op.program("torq").run("sim", in0=in0[:op.extent("in0")],
                                 in1=in1[:op.extent("in1")], out=out[:op.extent("out")].copy())
    assert np.array_equal(sim.outputs["out"], c[:op.extent("out")])
    # Cost from the ALU's float32 width (8): ceil(33 / 8) * 13 * 9 * 3 per brgemm call, two
    # shared iterations on the two cores of torq at once.
    assert sim.cycles >= 5 * 13 * 9 * 3
    on_gap8 = op.program("gap8").run("sim", in0=in0[:op.extent("in0")],
                                     in1=in1[:op.extent("in1")],
                                     out=out[:op.extent("out")].copy())
    assert on_gap8.cycles > sim.cycles  # one float32 per instruction on a GAP8 core


def test_results_do_not_depend_on_the_thread_count(monkeypatch):
    """The same operation with 1 and 2 threads, and the operations the optimizer makes for
    1 and 2 threads, give the same bits (random float data: no exact sums to hide a
    different summation order)."""
    op = gemm_op(256, 256, 512, last="taylor_sigmoid")  # 67 MFLOP: worth two threads
    rng = np.random.default_rng(6)
    a, b = (rng.standard_normal(op.extent(t)).astype(np.float32) for t in ("in0", "in1"))
    results = []
    shared = op.optimize(threads=2)
    assert shared.exec_types[0] == "shared"
    for threads in ("1", "2"):
        monkeypatch.setenv("NPUKIT_THREADS", threads)
        for o in (shared, op.optimize(threads=1)):
            results.append(o(a, b, np.zeros(op.extent("out"), np.float32)))
    assert all(np.array_equal(r.view(np.uint32), results[0].view(np.uint32)) for r in results)


def test_lowering_is_loops_around_calls():
    op = tpp.TensorOperation(**CASES["transposed identity with shared and seq loops"])
    prog = op.program()
    loops = [st for st, _ in prog.walk() if isinstance(st, ir.Loop)]
    assert len(loops) == 1 and loops[0].parallel and loops[0].var.count == 3
    calls = [st for st, _ in prog.walk() if isinstance(st, ir.Call)]
    assert [c.fn.name for c in calls] == ["tpp_identity_trans", "tpp_relu"]
    src = op.c_source()
    assert "npk_parallel_for(3, 1, npk_task0" in src and "tpp_identity_trans(" in src


def test_in1_may_be_none_for_a_unary_main():
    op = tpp.TensorOperation(prim_main="identity", prim_last="square", dim_types=("c", "c"),
                             exec_types=("prim", "prim"), dim_sizes=(4, 2),
                             strides_in0=(1, 4), strides_in1=(0, 0), strides_out=(1, 4))
    out = np.zeros(8, np.float32)
    op(np.arange(8, dtype=np.float32), None, out)
    assert out.tolist() == [float(x * x) for x in range(8)]


# -- checks and errors ----------------------------------------------------------------------

ERRORS = [
    (dict(dtype="float64"), tpp.WrongDtypeError, "dtype 'float64' is not supported"),
    (dict(dtype="bfloat16", prim_main="identity", dim_types=("c", "c"),
          strides_in0=(1, 4)), tpp.WrongDtypeError, "only for a gemm or brgemm"),
    (dict(prim_first="identity"), tpp.WrongPrimitiveError, "prim_first 'identity' is not"),
    (dict(prim_last="zero"), tpp.WrongPrimitiveError, "prim_last 'zero' is not allowed"),
    (dict(prim_main="relu"), tpp.WrongPrimitiveError, "prim_main 'relu' is not allowed"),
    (dict(exec_types=("prim", "prim", "seq")), tpp.WrongExecTypeError,
     "gemm needs exactly 3 .m, n, k. prim dimensions; got 2"),
    (dict(dim_types=("m", "m", "k")), tpp.WrongDimensionError, "dimension 1 .m, size 4.: in1"),
    (dict(exec_types=("prim", "prim", "shared"), dim_types=("m", "n", "k")),
     tpp.WrongExecTypeError, "gemm needs exactly 3"),
    (dict(dim_sizes=(4, 0, 4)), tpp.WrongDimensionError, "dimension 1 .n.: size 0"),
    (dict(strides_out=(1, 4, 4)), tpp.WrongDimensionError,
     "dimension 2 .k, size 4.: out stride 4"),
    (dict(strides_out=(1, 2, 0)), tpp.WrongDimensionError,
     "dimension 1 .n, size 4.: out stride 2 overlaps dimension 0"),
    (dict(strides_in0=(4, 0, 4)), tpp.WrongDimensionError, "in0: strides 4 along dimension 0"),
    (dict(strides_out=(4, 16, 0)), tpp.WrongDimensionError, "out strides 4 and 16; the gemm"),
    (dict(dim_types=("m", "n")), tpp.WrongDimensionError, "one entry per dimension"),
    (dict(dim_types="mnk"), tpp.WrongDimensionError, "dim_types must be a list"),
    (dict(exec_types=("prim", "prim", "para")), tpp.WrongExecTypeError,
     "dimension 2 .k.: execution type 'para'"),
    (dict(strides_in1=(0, -4, 1)), tpp.WrongDimensionError, "in1 stride -4"),
    (dict(prim_main="add", exec_types=("prim", "prim", "seq")), tpp.WrongDimensionError,
     "a k dimension sums products; main primitive add has none"),
    (dict(prim_main="add", dim_types=("m", "n", "c"), exec_types=("prim", "prim", "seq"),
          strides_in0=(1, 4, 16), strides_in1=(1, 4, 16), strides_out=(4, 1, 16)),
     tpp.OperationNotSupportedError, "Transposition for add primitive is not supported"),
    (dict(prim_main="identity", dim_types=("c", "c", "c"), exec_types=("prim", "prim", "prim")),
     tpp.WrongExecTypeError, "identity needs exactly 2"),
]


@pytest.mark.parametrize("change,error,message", ERRORS)
def test_each_check_raises_its_error_naming_the_dimension(change, error, message):
    cfg = dict(dtype="float32", prim_first="zero", prim_main="gemm", prim_last="relu",
               dim_types=("m", "n", "k"), exec_types=("prim", "prim", "prim"),
               dim_sizes=(4, 4, 4), strides_in0=(1, 0, 4), strides_in1=(0, 4, 1),
               strides_out=(1, 4, 0))
    cfg.update(change)
    with pytest.raises(error, match=message):
        tpp.TensorOperation(**cfg)


def test_k_dimension_must_not_be_shared():
    with pytest.raises(tpp.WrongExecTypeError, match="k dimension must not be shared"):
        gemm_op(dim_types=("m", "n", "k", "k"), exec_types=("prim", "prim", "prim", "shared"),
                dim_sizes=(4, 4, 4, 2), strides_in0=(1, 0, 4, 16), strides_in1=(0, 4, 1, 16),
                strides_out=(1, 4, 0, 0))


def test_call_checks_its_arrays():
    op = gemm_op(4, 4, 4)
    ok = np.zeros(16, np.float32)
    with pytest.raises(nk.OutOfBoundsError, match="in0 holds 15 elements"):
        op(np.zeros(15, np.float32), ok, ok.copy())
    with pytest.raises(tpp.WrongDtypeError, match="in1 has dtype float64"):
        op(ok, np.zeros(16), ok.copy())
    with pytest.raises(tpp.WrongDtypeError, match="in0 must be a numpy array"):
        op([0.0] * 16, ok, ok.copy())


_JUNK = st.one_of(st.integers(-3, 70), st.sampled_from(["c", "m", "n", "k", "seq", "prim",
                                                        "shared", "x", ""]),
                  st.none(), st.floats(allow_nan=True), st.booleans(), st.just(2**80))


@FUZZ
@given(main=st.one_of(st.sampled_from(tpp.PRIMITIVES + ("none",)), _JUNK),
       first=st.one_of(st.sampled_from(["none", "zero", "relu"]), _JUNK),
       last=st.one_of(st.sampled_from(["none", "relu"]), _JUNK),
       dtype=st.one_of(st.sampled_from(["float32", "bfloat16"]), _JUNK),
       lists=st.lists(st.one_of(st.lists(_JUNK, max_size=4), _JUNK), min_size=6, max_size=6))
@pytest.mark.slow
def test_hostile_configurations_raise_only_npukit_errors(main, first, last, dtype, lists):
    try:
        op = tpp.TensorOperation(dtype, first, main, last, *lists)
    except nk.NpukitError:
        return
    op.program()  # a valid operation always lowers
    op.optimize(threads=2).program()


@pytest.mark.slow
@PROPS
@given(op=operations())
def test_random_valid_operations_lower_and_match_the_oracle_on_the_simulator(op):
    in0, in1, out = data(np.random.default_rng(7), op)
    args = {"in0": in0, "in1": in1, "out": out.copy()}
    prog = op.program()
    res = prog.run("sim", **{b.name: args[b.name][:lay.shape[0]] for b, lay in prog.params})
    want = oracle(op, in0, in1, out)[:op.extent("out")]
    assert np.array_equal(res.outputs["out"].view(np.uint32), want.view(np.uint32))


@settings(max_examples=4, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(op=operations(mains=["gemm", "brgemm", "identity", "add"], max_size=9))
def test_random_operations_on_the_c_back_end_equal_the_simulator(op):
    """The generated C of a few random operations (a fixed set, so the compile cache keeps
    them) computes the simulator's bits."""
    in0, in1, out = data(np.random.default_rng(9), op)
    c = op(in0, in1, out.copy())[:op.extent("out")]
    args = {"in0": in0, "in1": in1, "out": out.copy()}
    prog = op.program()
    sim = prog.run("sim", **{b.name: args[b.name][:lay.shape[0]] for b, lay in prog.params})
    assert np.array_equal(c.view(np.uint32), sim.outputs["out"].view(np.uint32))


def test_repeated_calls_see_new_data_and_new_flags():
    """A call on the arrays of the last call reuses their checked flat views: it still reads
    their current contents, and a flag changed since is checked again."""
    op = tpp.TensorOperation(prim_main="identity", prim_last="increment", dim_types=("c", "c"),
                             exec_types=("prim", "prim"), dim_sizes=(3, 2),
                             strides_in0=(1, 3), strides_in1=(0, 0), strides_out=(1, 3))
    a, out = np.zeros(6, np.float32), np.zeros(6, np.float32)
    assert op(a, None, out).tolist() == [1.0] * 6
    a[:] = 5
    assert op(a, None, out).tolist() == [6.0] * 6
    other = np.full(6, 2, np.float32)
    assert op(other, None, out).tolist() == [3.0] * 6
    out.flags.writeable = False
    with pytest.raises(tpp.WrongDimensionError, match="read-only"):
        op(other, None, out)
