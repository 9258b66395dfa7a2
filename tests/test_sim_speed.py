"""The simulator's array-speed references: a tile of convolution features computed at once
(``conv_reference.feature_tile``) against the one-plane reference run over every pair of
output and input features in order (what the simulator ran before, element by element) and
against the convolution's formula in int64; and SqueezeNet 1.1's first layers, int8 QDQ, on
the simulator against its C (bytes) and ONNX Runtime, its cycle count against the cycle
model stepping every iteration. (``benchmarks/sim_speed.py`` runs the simulator as it ran
before and as it runs now on the same model at 224x224: the same bytes, the same cycles.)"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import npukit.onnx
from npukit.dtypes import int_range
from npukit.sim.timing import Timeline
from npukit.tiler.basic_kernels import conv_reference

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import sim_speed  # noqa: E402

CANARY = 7  # accumulators past the tile: never written


def _tile(rng, in_dt, w_dt, in_feat, out_feat, k, stride, dil, pad, in_row0, out_rows, W):
    """Arguments of a feature tile (``layer_conv(planes=True)``'s order) with random data and
    an accumulator image ``CANARY`` elements longer than the tile."""
    fx = fy = k
    wo = (W + 2 * pad - dil * (k - 1) - 1) // stride + 1
    in_rows = (out_rows - 1) * stride + dil * (k - 1) + 1
    hreal = in_row0 + in_rows - pad  # the tile ends at the image's last real row
    if np.dtype(in_dt).kind == "f":
        x = rng.normal(size=in_feat * in_rows * W).astype(np.float32)
        f = rng.normal(size=out_feat * in_feat * k * k).astype(np.float32)
        acc = rng.normal(size=out_feat * out_rows * wo + CANARY).astype(np.float32)
        zin = zw = 0
    else:
        lo, hi = int_range(in_dt)
        x = rng.integers(lo, hi + 1, in_feat * in_rows * W).astype(in_dt)
        f = rng.integers(-128, 128, out_feat * in_feat * k * k).astype(w_dt)
        acc = rng.integers(-2**31, 2**31, out_feat * out_rows * wo + CANARY).astype(np.int32)
        zin, zw = int(rng.integers(lo, hi + 1)), int(rng.integers(-20, 21))
    args = (x, W, in_row0, in_rows, hreal, pad, in_feat, f, acc, wo, in_row0 // stride,
            out_rows, out_feat, fx, fy, stride, stride, dil, dil, pad, zin, zw)
    return args


def _formula(x, W, in_row0, in_rows, hreal, pad, in_feat, f, acc, wo, out_row0, out_rows,
             out_feat, fx, fy, sx, sy, dx, dy, padl, zin, zw):
    """The integer convolution's definition in int64, tap by tap, wrapped to int32."""
    xs = x.astype(np.int64).reshape(in_feat, in_rows, W) - zin
    fs = f.astype(np.int64).reshape(out_feat, in_feat, fy, fx) - zw
    out = acc[:out_feat * out_rows * wo].astype(np.int64).reshape(out_feat, out_rows, wo)
    for y in range(out_rows):
        for c in range(wo):
            for ky in range(fy):
                p = (out_row0 + y) * sy + ky * dy
                if not (0 <= p - pad < hreal and 0 <= p - in_row0 < in_rows):
                    continue
                for kx in range(fx):
                    col = c * sx + kx * dx - padl
                    if 0 <= col < W:
                        out[:, y, c] += fs[:, :, ky, kx] @ xs[:, p - in_row0, col]
    return out.astype(np.uint32).view(np.int32).reshape(-1)


CASES = [  # in_dt, w_dt, in_feat, out_feat, k, stride, dilation, pad, in_row0, out_rows, W
    ("int8", "int8", 3, 5, 3, 1, 1, 1, 0, 4, 9),
    ("uint8", "int8", 4, 3, 3, 2, 1, 1, 2, 3, 11),
    ("int8", "int8", 5, 4, 1, 1, 1, 0, 3, 2, 7),
    ("int16", "int8", 2, 3, 3, 1, 2, 2, 0, 3, 10),
    ("float32", "float32", 3, 4, 3, 1, 1, 1, 0, 4, 9),
    ("float32", "float32", 2, 3, 3, 2, 1, 1, 2, 3, 12),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_feature_tile_is_the_one_plane_reference_over_every_feature(case):
    in_dt, w_dt, *shape = case
    args = _tile(np.random.default_rng(len(shape) + sum(shape)), in_dt, w_dt, *shape)
    acc = args[8]
    start, want = acc.copy(), acc.copy()
    sim_speed.one_plane_pairs(in_dt == "float32", *args[:8], want, *args[9:])
    conv_reference.feature_tile(in_dt == "float32", *args)
    assert acc.tobytes() == want.tobytes()
    assert acc[-CANARY:].tobytes() == start[-CANARY:].tobytes()  # past the tile: untouched
    assert not np.array_equal(acc, start)
    if in_dt != "float32":
        assert (acc[:-CANARY] == _formula(*args[:8], start, *args[9:])).all()


def test_squeezenet_int8_on_the_simulator_is_its_c_and_its_cycles_are_the_stepped_ones(
        tmp_path, monkeypatch):
    from onnx_helpers import against_ort

    from npukit.sim import timing

    size = 32
    m = sim_speed.int8_model(lambda n: sim_speed.squeezenet1_1(n, classes=10, fires=2), size,
                             tmp_path)
    x = sim_speed.images(size, 1, seed=9)[0]
    g, _, outs = against_ort(m, x, backends=("sim", "c"))
    assert np.abs(outs["sim"]["logits"]).max() > 0
    fast = g.report().cycles
    stepped = Timeline.__init__
    monkeypatch.setattr(timing.Timeline, "__init__",
                        lambda self, prog, fast_forward=True: stepped(self, prog, False))
    assert npukit.onnx.load(m).report().cycles == fast


@pytest.mark.parametrize("case", [
    ("int8", "int8", 4, 4, 3, 2, 1, 1, 1, 3, 10), ("uint8", "int8", 3, 3, 3, 1, 1, 1, 0, 4, 8),
    ("float32", "float32", 3, 3, 3, 1, 2, 2, 0, 3, 9)], ids=lambda c: "-".join(map(str, c)))
def test_depthwise_planes_are_the_one_plane_reference_plane_by_plane(case):
    """``conv_reference.planes`` (each plane its own filter) against the one-plane reference
    run plane after plane, through ``parallel.planes`` as a depthwise layer calls it."""
    from npukit.tiler.basic_kernels import parallel
    from npukit.tiler.basic_kernels.convolution import layer_conv

    in_dt, w_dt, feat, _, *shape = case
    rng = np.random.default_rng(sum(shape))
    x, W, in_row0, in_rows, hreal, pad, _, f, acc, wo, out_row0, out_rows, _, *rest = _tile(
        rng, in_dt, w_dt, feat, 1, *shape)
    f = (rng.normal(size=feat * shape[0] ** 2).astype(np.float32) if in_dt == "float32" else
         rng.integers(-128, 128, feat * shape[0] ** 2).astype(w_dt))
    acc = np.concatenate([acc[:-CANARY]] * feat + [acc[-CANARY:]])
    args = (x, W, in_row0, in_rows, hreal, pad, f, acc, wo, out_row0, out_rows, *rest)
    start, want = acc.copy(), acc.copy()
    sim_speed.plane_by_plane(in_dt == "float32", *args[:7], want, *args[8:], feat)
    k = parallel.planes(layer_conv(in_dt, w_dt, 8), conv_reference.PLANE_STRIDES)
    k.reference(*args, feat, core_id=0, core_count=1)
    assert acc.tobytes() == want.tobytes()
    assert acc[-CANARY:].tobytes() == start[-CANARY:].tobytes()
    assert not np.array_equal(acc, start)


@pytest.mark.parametrize("dt,oper,count_pad", [("float32", 1, 0), ("float32", 2, 1),
                                               ("int8", 1, 0), ("uint8", 2, 0)])
def test_pooling_all_planes_at_once_is_plane_by_plane(dt, oper, count_pad):
    """``pooling.pool``'s reference over a tile of 5 planes (3x3 windows, stride 2, padded,
    the tile's first line below the padding) against the same reference called for each
    plane alone."""
    from npukit.tiler.basic_kernels.common import f32_bits
    from npukit.tiler.basic_kernels.pooling import pool

    ref = pool(dt).reference
    rng = np.random.default_rng(oper + count_pad)
    feat, W, in_rows, out_rows, wo = 5, 9, 7, 3, 5
    x = (rng.normal(size=feat * in_rows * W).astype(np.float32) if dt == "float32" else
         rng.integers(*int_range(dt), feat * in_rows * W, endpoint=True).astype(dt))
    out = np.zeros(feat * out_rows * wo + CANARY, x.dtype) + x.dtype.type(3)
    want = out.copy()
    # In, W, InRow0, InRows, Hreal, PadT | Wo, OutRow0, OutRows, Fx, Fy, Sx, Sy, Dx, Dy,
    # PadL, PadB, PadR, Oper, CountPad, InScale, InZp, OutScale, OutZp
    head = (W, 1, in_rows, 8, 1)
    tail = (wo, 1, out_rows, 3, 3, 2, 2, 1, 1, 1, 1, 1, oper, count_pad,
            f32_bits(0.05), 3, f32_bits(0.04), -2)
    ref(x, *head, out, *tail, feat, core_id=0, core_count=1)
    for f in range(feat):
        ref(x[f * in_rows * W:], *head, want[f * out_rows * wo:], *tail, 1, core_id=0,
            core_count=1)
    assert out.tobytes() == want.tobytes()
    assert (out[-CANARY:] == 3).all() and np.unique(out[:-CANARY]).size > 5
