"""The optimizer: on random valid operations its result computes the same bits as its input
(on the simulator, dyadic data so that every sum is exact), and its printed decisions
follow the TPP text's rules — small contiguous dimensions fused, a split only when both
parts reach ``min_kernel_size``, prim dimensions innermost — and npukit's for threads."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tpp_helpers import data, operations, oracle

from npukit import tpp
from npukit.tpp.optimizer import PARALLEL_MIN_FLOPS

PROPS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _sim(op, in0, in1, out):
    prog = op.program()
    args = {"in0": in0, "in1": in1, "out": out.copy()}
    res = prog.run("sim", **{b.name: args[b.name][:lay.shape[0]] for b, lay in prog.params})
    return res.outputs["out"]


def _contiguous(op, i, j) -> bool:
    """Dims i (outer) and j (inner) of one type step as one dimension in every tensor the
    operation touches."""
    a, b = op.dims[i], op.dims[j]
    tensors = op.inputs + ("out",)
    return a.type == b.type and all(a.stride(t) == b.size * b.stride(t) for t in tensors)


def check_rules(op, threads: int, lo: int, hi: int | None) -> None:
    """The optimized ``op`` and its last decisions against the optimizer's rules."""
    decisions = op.history[-1][1]
    splits = [tuple(map(int, m.groups())) for d in decisions
              for m in [re.search(r"split prim \w \d+ \(.*?\) into (\d+) x (\d+)", d)] if m]
    for d in decisions:
        m = re.search(r"into (\d+) x (\d+) \(max_kernel_size", d)
        if m:  # a kernel split: the TPP text's rule, both parts at least min_kernel_size
            assert int(m[1]) >= lo and int(m[2]) >= lo, d
        m = re.search(r"into (\d+) x (\d+) for (\d+) threads", d)
        if m:  # a thread split: the prim part at least min_kernel_size, few shared blocks
            assert int(m[2]) >= lo and int(m[1]) <= 4 * threads, d
    # Fusion is complete: a contiguous pair left over is a split the optimizer made.
    for i, a in enumerate(op.dims):
        for j, b in enumerate(op.dims):
            if i != j and a.size > 1 and b.size > 1 and _contiguous(op, i, j):
                assert (a.size, b.size) in splits, (decisions, op.table())
    # Order: shared, then seq (non-k by decreasing out stride, then k), then prim.
    rank = {"shared": 0, "seq": 1, "prim": 2}
    execs = [rank[d.exec] for d in op.dims]
    assert execs == sorted(execs)
    seq = [d for d in op.dims if d.exec == "seq"]
    assert [d.type == "k" for d in seq] == sorted(d.type == "k" for d in seq)
    outs = [d.out for d in seq if d.type != "k"]
    assert outs == sorted(outs, reverse=True)
    shared = [d for d in op.dims if d.exec == "shared"]
    assert all(d.type != "k" for d in shared)
    if threads == 1:
        assert not shared
    if hi is not None:
        assert all(d.size <= hi or any(d.size == s[0] * s[1] for s in splits) or
                   "kept prim" in " ".join(decisions) for d in op.dims if d.exec == "prim")
    assert all(d.size > 1 for d in op.dims if d.exec != "prim")


@PROPS
@given(op=operations(), threads=st.integers(1, 3), lo=st.integers(1, 6),
       hi=st.one_of(st.none(), st.integers(6, 12)))
@pytest.mark.slow
def test_optimized_operations_compute_the_same_bits(op, threads, lo, hi):
    opt = op.optimize(threads=threads, min_kernel_size=lo, max_kernel_size=hi)
    check_rules(opt, threads, lo, hi)
    in0, in1, out = data(np.random.default_rng(8), op)
    before = _sim(op, in0, in1, out)
    after = _sim(opt, in0, in1, out)
    assert np.array_equal(before.view(np.uint32), after.view(np.uint32))
    assert np.array_equal(after.view(np.uint32),
                          oracle(op, in0, in1, out)[:op.extent("out")].view(np.uint32))


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
def test_big_gemm_gets_one_block_per_thread(threads):
    op = tpp.TensorOperation("float32", "zero", "gemm", "relu", ("m", "n", "k"),
                             ("prim",) * 3, (1024, 1024, 1024), (1, 0, 1024), (0, 1024, 1),
                             (1, 1024, 0))
    opt = op.optimize(threads=threads)
    check_rules(opt, threads, 16, None)
    shared = [d for d in opt.dims if d.exec == "shared"]
    if threads == 1:
        assert not shared and opt.dim_sizes == (1024, 1024, 1024)
    else:
        assert len(shared) == 1 and shared[0].type == "n"
        assert shared[0].size == {2: 2, 3: 8, 4: 4}[threads]  # 3 threads: 3, 3, 2 blocks
        assert opt.exec_types[1:] == ("prim",) * 3
    text = str(opt)
    assert "before optimize:" in text and "optimizer decisions:" in text and "after:" in text


def test_small_contiguous_dimensions_fuse():
    """Three m dimensions of 4, 2 and 8 rows, contiguous in in0 and out, become one m of 64
    (the TPP text: a dimension below min_kernel_size is fused with another)."""
    op = tpp.TensorOperation("float32", "none", "gemm", "none",
                             ("m", "m", "m", "n", "k"), ("seq", "seq", "prim", "prim", "prim"),
                             (4, 2, 8, 5, 3), (16, 8, 1, 0, 64), (0, 0, 0, 3, 1),
                             (16, 8, 1, 64, 0))
    opt = op.optimize(threads=1)
    assert [(d.type, d.size) for d in opt.dims] == [("m", 64), ("n", 5), ("k", 3)]
    fused = [d for d in opt.history[-1][1] if d.startswith("fused")]
    assert len(fused) == 2 and "below min_kernel_size 16" in fused[0]


def test_kernel_splits_need_both_parts_at_least_min_kernel_size():
    """max_kernel_size 16, min_kernel_size 8: 64 splits into 8 x 8 (both parts at least 8);
    40 stays (4 x 10 and 8 x 5 each leave a part below 8)."""
    op = tpp.TensorOperation("float32", "none", "identity", "none", ("c", "c"),
                             ("prim", "prim"), (64, 40), (1, 70), (0, 0), (1, 70))
    split = op.optimize(threads=1, min_kernel_size=8, max_kernel_size=16)
    assert sorted(split.dim_sizes) == [8, 8, 40]
    decisions = " ".join(split.history[-1][1])
    assert "split prim c 64" in decisions and "into 8 x 8" in decisions
    assert "kept prim c 40" in decisions


def test_small_work_stays_on_one_thread():
    op = tpp.TensorOperation("float32", "zero", "gemm", "none", ("m", "n", "k"), ("prim",) * 3,
                             (64, 64, 64), (1, 0, 64), (0, 64, 1), (1, 64, 0))
    assert 2 * 64**3 < PARALLEL_MIN_FLOPS
    opt = op.optimize(threads=2)
    assert "shared" not in opt.exec_types
    assert any("below" in d and "pays for starting threads" in d for d in opt.history[-1][1])


def test_optimize_checks_its_arguments():
    op = tpp.TensorOperation("float32", "none", "identity", "none", ("c", "c"),
                             ("prim", "prim"), (4, 4), (1, 4), (0, 0), (1, 4))
    for kw in (dict(threads=0), dict(min_kernel_size="8"), dict(max_kernel_size=2),
               dict(threads=True)):
        with pytest.raises(tpp.WrongDimensionError, match="optimize"):
            op.optimize(**kw)
