"""QLinearAdd on rows of 8-bit integers in AVX-512 vectors (``qadd_rows``, through
``elementwise.binary``) against an oracle written here (two fused multiply-adds exact in
float64 with TwoSum, ``common.fma_f32``; numpy's round-half-even; the clamps) and against the
plain loop (flags without AVX-512): rows of odd lengths around the 16-lane vectors, B along
the row and broadcast, zero points and values at the types' ends, outputs saturating at both
ends, canaries around every row; an infinite scale (NaN and infinite sums) the same bytes in
both loops. The whole layer against the simulator and ONNX Runtime: tests/test_host_speed_paths
(QDQ Add + ReLU, Add of a channel's value)."""

from __future__ import annotations

import numpy as np
import pytest
from test_basic_kernels_conv import FLAGS, cflags

from npukit.tiler.basic_kernels import elementwise, host
from npukit.tiler.basic_kernels.common import f32_bits, fma_f32

CANARY = 0x5A


def oracle(a, b, ra, rb, f, lo, hi):
    """ONNX Runtime's QLinearAdd (A along the row): ``fma(a, ra, fma(b, rb, f))`` rounded
    half to even, clamped to +-1e9 then to [lo, hi]."""
    inner = fma_f32(b.astype(np.float32), np.float32(rb), np.float32(f))
    v = np.rint(fma_f32(a.astype(np.float32), np.float32(ra), inner))
    return np.clip(np.clip(v, -1e9, 1e9).astype(np.int64), lo, hi)


def run(dt, rows, cols, bcol, ra, rb, f, lo, hi, flags, seed=0):
    """``binary``'s QLinearAdd over rows x cols (rows padded by 64 canary bytes each side of
    every row's output); returns (A, B, the outputs, whether the canaries stayed)."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(dt)
    a = rng.integers(info.min, info.max + 1, (rows, cols)).astype(dt)
    b = rng.integers(info.min, info.max + 1, (rows, cols)).astype(dt)
    a[:, ::7], b[:, ::5] = info.max, info.min
    stride = cols + 128
    out = np.full(rows * stride, CANARY, dt)
    kernel = elementwise.binary(dt, dt, dt, 16)
    given = dict(A=a.ravel(), B=b.ravel(), Out=out[64:], Rows=rows, Cols=cols, ARow=cols,
                 ACol=1, BRow=cols if bcol else 1, BCol=bcol, Op=elementwise.BIN_QADD, Act=0,
                 P0=f32_bits(ra), P1=f32_bits(rb), P2=f32_bits(f), Za=0, Zb=0, Zout=0, Lo=lo,
                 Hi=hi)
    # Out rows are Cols apart in the kernel: one call per row, each into its padded slot
    with cflags(FLAGS[flags]):
        fn = host.c_function(kernel, 8)
    for r in range(rows):
        row = dict(given, A=a[r].copy(), B=(b[r] if bcol else b[r, :1]).copy(),
                   Out=out[r * stride + 64:], Rows=1, ARow=0, BRow=0)
        fn(*[row[k] for _, k in kernel.args])
    got = out.reshape(rows, stride)
    kept = (got[:, :64] == CANARY).all() and (got[:, 64 + cols:] == CANARY).all()
    return a, b, got[:, 64:64 + cols], kept


@pytest.mark.parametrize("flags", ["native", "plain"])
@pytest.mark.parametrize("dt", ["uint8", "int8"])
@pytest.mark.parametrize("cols, bcol", [(37, 1), (16, 1), (13, 1), (100, 0), (33, 0)])
def test_qlinearadd_rows_match_the_oracle(flags, dt, cols, bcol):
    # Scales of a residual join, the fixed part folding the zero points (saturates at both
    # ends for the types' extreme values); a ReLU folded in on uint8.
    ra, rb, f = 0.75, 0.7, -60.0 if dt == "uint8" else 10.0
    lo, hi = (9, 255) if dt == "uint8" else (-128, 127)
    a, b, got, kept = run(dt, 4, cols, bcol, ra, rb, f, lo, hi, flags, seed=cols)
    assert kept, "written outside the row"
    want = oracle(a, b if bcol else np.broadcast_to(b[:, :1], b.shape), ra, rb, f, lo, hi)
    assert np.array_equal(got, want)
    assert len(np.unique(want)) >= min(10, cols) and ((want == lo) | (want == hi)).any()


@pytest.mark.parametrize("dt", ["uint8", "int8"])
def test_an_infinite_scale_gives_the_plain_loops_bytes(dt):
    """fma(0, inf, ...) is NaN, fma(x, inf, ...) infinite: the vectors' clamps and
    truncation keep the plain loop's values."""
    lo, hi = (0, 255) if dt == "uint8" else (-128, 127)
    rows = [run(dt, 3, 45, 1, float("inf"), 0.5, 1.0, lo, hi, flags, seed=3)
            for flags in ("native", "plain")]
    assert rows[0][3] and rows[1][3]
    assert np.array_equal(rows[0][2], rows[1][2])
    assert len(np.unique(rows[0][2])) >= 2
