"""The integer matrix product of 8-bit operands in AVX-512 vectors (``matmul_int``, through
``linear.matmul``: a QDQ classifier) against an oracle written here (numpy int64 products of
``A - Za`` and ``B - Zb`` plus the bias, wrapped to int32, then ONNX Runtime's requantisation
in float32 with numpy's round-half-even) and against the plain loop (flags without AVX-512):
column counts around the 64-column blocks, a bias per column or one, a scale per column or
one, zero points 0, 128 and odd ones, sums that wrap, 1 and 8 cores sharing the columns,
canaries on both sides of the outputs."""

from __future__ import annotations

import numpy as np
import pytest
from test_basic_kernels_conv import FLAGS, cflags

from npukit.tiler.basic_kernels import host, linear

CANARY = 0x5A


def oracle(a, b, c, scale, za, zb, zout, lo, hi):
    acc = c.astype(np.int64) + (a.astype(np.int64) - za) @ (b.astype(np.int64) - zb)
    acc = ((acc + 2**31) % 2**32 - 2**31).astype(np.int32)
    v = np.clip(acc.astype(np.float32) * scale.astype(np.float32), np.float32(lo - zout),
                np.float32(hi - zout))
    return np.rint(v).astype(np.int64) + zout


@pytest.mark.parametrize("flags", ["native", "plain"])
@pytest.mark.parametrize("a_dt, za, zout", [("uint8", 0, 0), ("uint8", 131, 128),
                                            ("int8", -128, 5), ("int8", 3, -7)])
@pytest.mark.parametrize("K, Wn, steps, cores", [
    (1280, 100, (1, 1), 8), (7, 13, (0, 0), 1), (64, 64, (1, 0), 8), (300, 129, (0, 1), 1)])
def test_matmul_matches_the_oracle(flags, a_dt, za, zout, K, Wn, steps, cores):
    rng = np.random.default_rng(K + Wn)
    info = np.iinfo(a_dt)
    a = rng.integers(info.min, info.max + 1, K).astype(a_dt)
    b = rng.integers(-128, 128, (K, Wn)).astype(np.int8)
    zb = 0 if K > 100 else 5
    cstep, sstep = steps
    c = rng.integers(-4000 * K, 4000 * K, Wn if cstep else 1).astype(np.int32)
    # sums of about sqrt(K) * 147 * 74 to about 40 steps of the output
    scale = (rng.uniform(2e-5, 2e-4, Wn if sstep else 1) * np.sqrt(1280 / K)).astype(np.float32)
    out_info = np.iinfo(a_dt)
    lo, hi = (zout, out_info.max) if zout < 100 else (out_info.min, out_info.max)
    buf = np.full(Wn + 128, CANARY, a_dt)
    kernel = linear.matmul(a_dt, "int8", a_dt, 16)
    given = dict(A=a, K=K, B=b.ravel(), Wn=Wn, C=c, CStep=cstep, HasC=1, Out=buf[64:], Za=za,
                 Zb=zb, Scale=scale, ScaleStep=sstep, Zout=zout, Lo=lo, Hi=hi)
    with cflags(FLAGS[flags]):
        fn = host.c_function(kernel, cores)
    fn(*[given[n] for _, n in kernel.args])
    cols = np.arange(Wn)
    want = oracle(a, b, c[cols * cstep], scale[cols * sstep], za, zb, zout, lo, hi)
    assert (buf[:64] == CANARY).all() and (buf[64 + Wn:] == CANARY).all(), "written outside"
    assert np.array_equal(buf[64:64 + Wn], want)
    assert len(np.unique(want)) > min(Wn // 4, 12)
