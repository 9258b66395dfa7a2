"""The integer depthwise convolution requantised in one pass (``depthwise_int.dw_conv_requant``,
the host schedule's kernel for a MobileNet's int8 / uint8 depthwise layers), compiled alone,
against an oracle written here (numpy int64 tap by tap on a zero-point-padded plane, then
ONNX Runtime's requantisation in float32 with numpy's round-half-even) and against its numpy
reference: zero points 0, 128 and odd ones, at the ends of the types, padding 0 to 2 on
every side, odd widths, flattened planes (7 and 14 columns) and rows of several vectors,
strides 1 and 2, a tile of rows in the middle of the plane, 1 and 8 cores (features or rows
shared), the VNNI form (the host's flags) and the plain loop; canaries around every output.
Then whole QDQ depthwise layers through ONNX import: the host C's bytes are the simulator's,
both within ONNX Runtime's 1 LSB."""

from __future__ import annotations

import numpy as np
import pytest
from onnx_helpers import model, node, quantize_qdq
from test_basic_kernels_conv import FLAGS, cflags
from test_host_speed_paths import assert_integer_run

from npukit.tiler.basic_kernels import host
from npukit.tiler.basic_kernels.depthwise_int import dw_conv_requant

CANARY = 0x5A


def oracle(x, f, bias, scale, zin, zw, zout, lo, hi, stride, pads, rows, wo):
    """Each feature's plane ``x`` [Feat, H, W] (real rows), padded by ``pads`` (top, left)
    with ``zin`` (a tap there adds nothing), ``(x - zin) * (f - zw)`` summed tap by tap in
    int64 plus the bias, wrapped to int32; output rows ``rows`` (first, count) of ``wo``
    columns; then ``clamp(float32(acc) * scale)`` rounded half to even, plus ``zout``."""
    feat, h, w = x.shape
    fy, fx = f.shape[1:]
    top, left = pads
    r0, n = rows
    xs = np.full((feat, h + top + fy + stride * n, w + left + fx + stride * wo), zin, np.int64)
    xs[:, top:top + h, left:left + w] = x
    acc = np.repeat(bias.astype(np.int64), n * wo).reshape(feat, n, wo)
    for i in range(fy):
        for j in range(fx):
            rr = (r0 + np.arange(n)) * stride + i
            cc = np.arange(wo) * stride + j
            acc += (xs[:, rr[:, None], cc[None, :]] - zin) * \
                (f[:, i, j].astype(np.int64) - zw)[:, None, None]
    acc = ((acc + 2**31) % 2**32 - 2**31).astype(np.int32)
    v = acc.astype(np.float32) * scale.astype(np.float32)[:, None, None]
    v = np.clip(v, np.float32(lo - zout), np.float32(hi - zout))
    return np.rint(v).astype(np.int64) + zout


def ends(rng, dt, shape, zp):
    """Integers of ``dt`` over its range, its ends and the zero point frequent."""
    info = np.iinfo(dt)
    v = rng.integers(info.min, info.max + 1, shape)
    for value in (info.min, info.max, zp):
        v[rng.random(shape) < 0.1] = value
    return v.astype(dt)


def run(in_dt, w_dt, out_dt, zin, zw, zout, W, H, k, stride, pad, feat, cores, flags,
        rows=None, seed=0):
    """The kernel on random planes; returns (its outputs, the oracle's, the reference's)."""
    rng = np.random.default_rng(seed)
    wo = (W + 2 * pad - k) // stride + 1
    ho = (H + 2 * pad - k) // stride + 1
    r0, n = rows or (0, ho)
    # the tile's input lines: those the rows read (padded rows r0*stride .. ), clipped
    p0 = max(r0 * stride, pad)
    p1 = min((r0 + n - 1) * stride + k, pad + H)
    x = ends(rng, in_dt, (feat, H, W), zin)
    f = ends(rng, w_dt, (feat, k, k), zw)
    bias = rng.integers(-2**14, 2**14, feat).astype(np.int32)
    scale = (rng.uniform(0.0005, 0.005, feat)).astype(np.float32)
    oinfo = np.iinfo(out_dt)
    relu = seed % 2 and zout < oinfo.max // 2  # a ReLU folded in the clamp
    lo, hi = (zout if relu else oinfo.min), oinfo.max
    tile = np.ascontiguousarray(x[:, p0 - pad:p1 - pad])
    size = feat * n * wo
    buf = np.full(size + 2 * 64, CANARY, out_dt)
    kernel = dw_conv_requant(in_dt, w_dt, out_dt, 8)
    given = dict(In=tile.ravel(), W=W, InRow0=p0, InRows=p1 - p0, Hreal=H, PadT=pad,
                 Filter=f.ravel(), Bias=bias, Scale=scale, Out=buf[64:64 + size], Wo=wo,
                 OutRow0=r0, OutRows=n, Feat=feat, Fx=k, Fy=k, Sx=stride, Sy=stride, Dx=1,
                 Dy=1, PadL=pad, Zin=zin, Zw=zw, Zout=zout, Lo=lo, Hi=hi)
    with cflags(FLAGS[flags]):
        fn = host.c_function(kernel, cores)
    fn(*[given[a] for _, a in kernel.args])
    assert (buf[:64] == CANARY).all() and (buf[64 + size:] == CANARY).all(), "written outside"
    want = oracle(x, f, bias, scale, zin, zw, zout, lo, hi, stride, (pad, pad), (r0, n), wo)
    ref = np.full(size, CANARY, out_dt)
    kernel.reference(*[ref if a == "Out" else given[a] for _, a in kernel.args], core_id=0,
                     core_count=1)
    return buf[64:64 + size].reshape(feat, n, wo), want, ref.reshape(feat, n, wo)


ZERO_POINTS = [("uint8", 0, 0), ("uint8", 128, 131), ("uint8", 255, 3), ("uint8", 77, 255),
               ("int8", 0, 0), ("int8", -128, 127), ("int8", 127, -128), ("int8", -3, 5)]


@pytest.mark.parametrize("flags", ["native", "plain"])
@pytest.mark.parametrize("dt, zin, zout", ZERO_POINTS)
@pytest.mark.parametrize("W, H, k, stride, pad, feat, cores", [
    (7, 7, 3, 1, 1, 9, 8), (14, 13, 3, 2, 1, 3, 8), (37, 6, 3, 1, 1, 2, 1),
    (19, 9, 3, 2, 0, 10, 8), (21, 5, 5, 1, 2, 4, 8), (66, 4, 3, 1, 1, 1, 8)])
def test_depthwise_requantised_matches_the_oracle(flags, dt, zin, zout, W, H, k, stride, pad,
                                                  feat, cores):
    got, want, ref = run(dt, "int8", dt, zin, 0, zout, W, H, k, stride, pad, feat, cores,
                         flags, seed=W + stride)
    assert np.array_equal(got, want)
    assert np.array_equal(ref, want)
    assert len(np.unique(want)) > 8  # neither constant nor saturated everywhere


@pytest.mark.parametrize("flags", ["native", "plain"])
@pytest.mark.parametrize("W, stride, rows", [(7, 1, (2, 3)), (40, 1, (1, 4)), (33, 2, (3, 2))])
def test_a_tile_of_rows_amid_the_plane(flags, W, stride, rows):
    """Output rows from ``rows[0]`` (not the first), the tile holding only the input lines
    they read: lines outside it are never read."""
    got, want, ref = run("uint8", "int8", "uint8", 131, 0, 7, W, 11, 3, stride, 1, 9, 8, flags,
                         rows=rows, seed=1)
    assert np.array_equal(got, want)
    assert np.array_equal(ref, want)


@pytest.mark.parametrize("w_dt, zw", [("uint8", 128), ("uint8", 100), ("int8", 3)])
def test_weight_zero_points(w_dt, zw):
    """uint8 weights with zero point 128 (signed bytes less it: the VNNI form), and zero
    points that leave weights outside -128..127 (the plain loop)."""
    got, want, ref = run("int8", w_dt, "int8", -5, zw, 2, 23, 8, 3, 1, 1, 9, 8, "native",
                         seed=zw)
    assert np.array_equal(got, want)
    assert np.array_equal(ref, want)


def depthwise(c, h, w, stride, seed=0):
    """A QDQ-able float model: 3x3 depthwise convolution (padding 1, bias), Clip(0, 6), as
    MobileNet-v2's; a second depthwise one without activation on its output."""
    r = np.random.default_rng(seed)
    x = r.normal(size=(1, c, h, w)).astype(np.float32)
    inits = {"w0": (r.normal(size=(c, 1, 3, 3)) / 3).astype(np.float32),
             "b0": (r.normal(size=c) * 0.2).astype(np.float32),
             "w1": (r.normal(size=(c, 1, 3, 3)) / 3).astype(np.float32),
             "b1": (r.normal(size=c) * 0.2).astype(np.float32),
             "lo": np.float32(0), "hi": np.float32(6)}
    nodes = [node("Conv", ["x", "w0", "b0"], ["c0"], kernel_shape=[3, 3], pads=[1] * 4,
                  strides=[stride, stride], group=c),
             node("Clip", ["c0", "lo", "hi"], ["y0"]),
             node("Conv", ["y0", "w1", "b1"], ["y1"], kernel_shape=[3, 3], pads=[1] * 4,
                  group=c)]
    return model(nodes, {"x": x}, ["y1"], inits), x


@pytest.mark.parametrize("act", ["u8", "s8"])
@pytest.mark.parametrize("c, h, w, stride", [
    (12, 14, 14, 1), (10, 15, 29, 2),
    (2, 740, 740, 2)])  # planes over the host's L1 (1 MiB with their outputs): rows in tiles
def test_qdq_depthwise_layers_match_the_simulator_and_onnx_runtime(act, c, h, w, stride,
                                                                    tmp_path):
    m, x = depthwise(c, h, w, stride)
    r = np.random.default_rng(5)
    q = quantize_qdq(m, [{"x": r.normal(size=x.shape).astype(np.float32)} for _ in range(2)],
                     tmp_path, act)
    assert_integer_run(q, {"x": x})
