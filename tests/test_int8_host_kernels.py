"""The int8 host kernels' fast paths against numpy int64 / float32 oracles written here: the
one-plane integer convolution (a depthwise layer's plane) in the VNNI form, the requantising
output pass of a tile of planes (each plane one run, the planes shared among the cores), and
int8/uint8 max pooling a row of vectors at a time. Zero points at the types' ends, saturation
at both ends, odd sizes around the vector blocks, canaries on both sides of every output."""

from __future__ import annotations

import numpy as np
import pytest
from test_basic_kernels_conv import cflags

from npukit.c import toolchain
from npukit.tiler.basic_kernels import convolution, host, pooling

# The host's flags (the VNNI form where the host has AVX-512 VNNI and VBMI; the other loops
# are tested in test_basic_kernels_conv).
FLAGS = {"native": toolchain.DEFAULT_CFLAGS}
CANARY = 29


def ends(rng, dt, n):
    """Integers of ``dt`` over its whole range, its two ends frequent."""
    info = np.iinfo(dt)
    v = rng.integers(info.min, info.max + 1, n)
    v[rng.random(n) < 0.2] = info.min
    v[rng.random(n) < 0.2] = info.max
    return v.astype(dt)


def plane_oracle(x, f, acc, zin, zw, stride, pad, rows):
    """numpy int64: acc[y, c] + sum over taps of (x - zin) * (f - zw) at input row
    (row0 + y)*stride + fy - pad, column c*stride + fx - pad (taps outside the plane add
    nothing), wrapped to int32."""
    h, w = x.shape
    row0, n = rows
    xs = np.zeros((h + 2 * pad + 3, w + 2 * pad + 3), np.int64)
    xs[pad:pad + h, pad:pad + w] = x.astype(np.int64) - zin
    out = acc.astype(np.int64).copy()
    wo = out.shape[1]
    for fy in range(3):
        for fx in range(3):
            rr = (row0 + np.arange(n)) * stride + fy
            cc = np.arange(wo) * stride + fx
            out += xs[rr[:, None], cc[None, :]] * (int(f[fy, fx]) - zw)
    return ((out + 2**31) % 2**32 - 2**31).astype(np.int32)


@pytest.mark.parametrize("in_dt, w_dt, zin, zw", [
    ("uint8", "int8", 0, 0), ("uint8", "int8", 255, 0), ("int8", "int8", -128, 0),
    ("int8", "int8", 127, 0), ("uint8", "uint8", 255, 128)])
@pytest.mark.parametrize("W, stride, cores", [(7, 1, 8), (14, 2, 1), (37, 1, 1), (33, 2, 8)])
def test_a_depthwise_plane_is_exact_in_the_vnni_form(in_dt, w_dt, zin, zw, W, stride, cores):
    """A 'same'-padded 3x3 plane (7, 14, 33, 37 columns: a 16- or 32-output block and a tail),
    output rows from 1 (the tile: every line of the plane, the padded row 1 its first),
    at stride 1 and 2, one core or 8
    sharing the rows; the accumulators start at random int32 (sums wrap)."""
    rng = np.random.default_rng(W * 7 + stride)
    H = W
    wo = (W - 1) // stride + 1
    row0, n = 1, (H - 1) // stride
    x = ends(rng, in_dt, H * W).reshape(H, W)
    f = ends(rng, w_dt, 9).reshape(3, 3)
    acc0 = rng.integers(-2**31, 2**31, (n, wo)).astype(np.int32)
    buf = np.full(n * wo + 2 * CANARY, 0x5A5A5A5A, np.int32)
    buf[CANARY:CANARY + n * wo] = acc0.ravel()
    before = buf.copy()
    kernel = convolution.layer_conv(in_dt, w_dt, 8)
    given = dict(In=x.ravel(), W=W, InRow0=1, InRows=H, Hreal=H, PadT=1, Filter=f.ravel(),
                 Acc=buf[CANARY:CANARY + n * wo], Wo=wo, OutRow0=row0, OutRows=n, Fx=3, Fy=3,
                 Sx=stride, Sy=stride, Dx=1, Dy=1, PadL=1, Zin=zin, Zw=zw)
    with cflags(FLAGS["native"]):
        fn = host.c_function(kernel, cores)
    fn(*[given[k] for _, k in kernel.args])
    want = plane_oracle(x, f, acc0, zin, zw, stride, 1, (row0, n))
    assert np.array_equal(buf[CANARY:CANARY + n * wo].reshape(n, wo), want)
    assert np.array_equal(buf[:CANARY], before[:CANARY])
    assert np.array_equal(buf[CANARY + n * wo:], before[CANARY + n * wo:])
    assert len(np.unique(want)) > n * wo // 2  # not a constant plane


def requant_oracle(acc, scale, zp, lo, hi):
    """ONNX Runtime's requantisation in float32: float(acc) * scale clamped to [lo - zp,
    hi - zp], rounded to nearest even, plus zp."""
    v = acc.astype(np.float32) * np.float32(scale)
    v = np.minimum(np.maximum(v, np.float32(lo - zp)), np.float32(hi - zp))
    return np.rint(v).astype(np.int64) + zp


@pytest.mark.parametrize("out_dt, zout, clamp", [
    ("uint8", 0, (0, 255)), ("uint8", 255, (0, 255)), ("int8", -128, (-128, 127)),
    ("int8", 127, (-128, 127)), ("uint8", 3, (3, 200))])
@pytest.mark.parametrize("side, rows, feat, cores", [(7, (2, 5), 17, 8), (14, (0, 14), 3, 1),
                                                     (9, (1, 8), 11, 8), (67, (0, 1), 2, 1)])
def test_requantised_planes_as_runs(out_dt, zout, clamp, side, rows, feat, cores):
    """``conv_out_planes`` of int32 tiles of ``feat`` planes (7x7, 9x9, 14x14 and a 67-wide
    row: runs of 7 to 196 outputs around the 16- and 64-lane steps), output rows ``rows``
    (first, count) of accumulator lines from 0, a scale per plane; accumulators at int32's
    ends and around the clamp (saturation at both ends and ties); canaries around the
    outputs."""
    rng = np.random.default_rng(side * 31 + feat)
    row0, n = rows
    acc_rows = row0 + n
    acc = rng.integers(-2**31, 2**31, (feat, acc_rows, side)).astype(np.int32)
    near = rng.integers(-600, 600, acc.size)
    mask = rng.random(acc.size) < 0.6
    acc.ravel()[mask] = near[mask]
    acc.ravel()[::13] = np.iinfo(np.int32).max
    acc.ravel()[::17] = np.iinfo(np.int32).min
    scale = rng.uniform(0.1, 0.9, feat).astype(np.float32)
    scale[0] = np.float32(0.5)  # ties: odd accumulators end in .5
    lo, hi = clamp
    size = feat * n * side
    out = np.full(size + 2 * CANARY, 0x5A, np.uint8).view(out_dt)
    before = out.copy()
    kernel = convolution.conv_out_planes("int32", out_dt)
    given = dict(Acc=acc.ravel(), Wc=side, AccRow0=0, Hc=acc_rows, AccRows=acc_rows,
                 Out=out[CANARY:CANARY + size], Wo=side, OutRow0=row0, OutRows=n, Feat=feat,
                 Fx=1, Fy=1, Sx=1, Sy=1, Oper=0, Scale=scale, Zout=zout, Lo=lo, Hi=hi)
    with cflags(FLAGS["native"]):
        fn = host.c_function(kernel, cores)
    fn(*[given[k] for _, k in kernel.args])
    want = np.stack([requant_oracle(acc[o, row0:], scale[o], zout, lo, hi)
                     for o in range(feat)])
    got = out[CANARY:CANARY + size].astype(np.int64).reshape(feat, n, side)
    assert np.array_equal(got, want)
    assert np.array_equal(out[:CANARY], before[:CANARY])
    assert np.array_equal(out[CANARY + size:], before[CANARY + size:])
    assert (want == lo).any() and (want == hi).any() and ((want > lo) & (want < hi)).any()


def max_pool_oracle(x, f, stride, dil, pad, rows, wo, lo):
    """numpy: output (y, c) is the maximum of x at rows (row0 + y)*stride + fy*dil - pad and
    columns c*stride + fx*dil - pad inside the plane, ``lo`` where none is."""
    h, w = x.shape
    row0, n = rows
    out = np.full((n, wo), lo, np.int64)
    for fy in range(f):
        for fx in range(f):
            r = (row0 + np.arange(n)) * stride + fy * dil - pad
            c = np.arange(wo) * stride + fx * dil - pad
            ok = ((r >= 0) & (r < h))[:, None] & ((c >= 0) & (c < w))[None, :]
            v = x[np.clip(r, 0, h - 1)[:, None], np.clip(c, 0, w - 1)[None, :]].astype(np.int64)
            out = np.where(ok, np.maximum(out, v), out)
    return out


@pytest.mark.parametrize("dt", ["uint8", "int8"])
@pytest.mark.parametrize("W, f, stride, dil, cores", [(112, 3, 2, 1, 8), (9, 3, 1, 2, 1),
                                                      (70, 2, 2, 1, 1), (65, 5, 1, 1, 8)])
def test_int8_max_pooling_rows_in_vectors(dt, W, f, stride, dil, cores):
    """Max pooling of 3 int8/uint8 planes (ResNet's 3x3 stride-2 head at 112 columns, a
    dilated 3x3, 2x2 at stride 2, a 5x5 at 65 columns: 64- and 32-output vectors and their
    tails), 'same' padding (padding never wins, even over the type's lowest value), output
    rows from 1 of the plane; canaries around the outputs."""
    rng = np.random.default_rng(W + f)
    lo = np.iinfo(dt).min
    pad = (f - 1) * dil // 2
    H, feat = 11, 3
    wo = (W + 2 * pad - (f - 1) * dil - 1) // stride + 1
    ho = (H + 2 * pad - (f - 1) * dil - 1) // stride + 1
    row0, n = 1, ho - 1
    x = ends(rng, dt, feat * H * W).reshape(feat, H, W)
    size = feat * n * wo
    out = np.full(size + 2 * CANARY, 0x5A, np.uint8).view(dt)
    before = out.copy()
    kernel = pooling.pool(dt)
    given = dict(In=x.ravel(), W=W, InRow0=pad, InRows=H, Hreal=H, PadT=pad,
                 Out=out[CANARY:CANARY + size], Wo=wo, OutRow0=row0, OutRows=n, Fx=f, Fy=f,
                 Sx=stride, Sy=stride, Dx=dil, Dy=dil, PadL=pad, PadB=pad, PadR=pad, Oper=1,
                 CountPad=0, InScale=0, InZp=0, OutScale=0, OutZp=0, Feat=feat)
    with cflags(FLAGS["native"]):
        fn = host.c_function(kernel, cores)
    fn(*[given[k] for _, k in kernel.args])
    want = np.stack([max_pool_oracle(x[o], f, stride, dil, pad, (row0, n), wo, lo)
                     for o in range(feat)])
    assert np.array_equal(out[CANARY:CANARY + size].astype(np.int64).reshape(feat, n, wo), want)
    assert np.array_equal(out[:CANARY], before[:CANARY])
    assert np.array_equal(out[CANARY + size:], before[CANARY + size:])
