"""The float32 feature tile's faster blocks (``conv_features``): a 1x1 filter over whole rows
as one run of outputs (``pointwise``: 8 output features x 2 vectors, no tap masks), and a
row's blocks loading their inputs unmasked where the vectors lie inside the tile (the lanes
off the tap's row read, never added). Each output is checked against two oracles written
here: the sums of float32 products taken in the definition's order in numpy (input
features in order, each one's taps in (fy, fx) order: the simulator's bits, compared bit
for bit with the C and with the kernel's numpy reference), and the same sums in float64
(within float32 rounding). Odd sizes: rows not a multiple of the vectors, output features
not a multiple of the blocks, tiles of rows, padding, stride 2; canaries after the last
plane, every output written.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from npukit.tiler.basic_kernels import convolution, host

CANARY = np.float32(-7.25e30)


@cache
def compiled(cores: int):
    return host.c_function(convolution.layer_conv("float32", "float32", 8, planes=True), cores)


def windows(p, In, in_feat: int):
    """The tap windows of the tile: ``[i, fy, fx, y, x]``, the input of output (y, x) for
    tap (fy, fx) of input feature i, and whether it is a real input (taps on padding or off
    the tile add nothing)."""
    H, W, ho, wo = p["InRows"], p["W"], p["OutRows"], p["Wo"]
    planes = In[:in_feat * H * W].reshape(in_feat, H, W)
    y = np.arange(ho)[:, None]
    x = np.arange(wo)[None, :]
    vals = np.zeros((in_feat, p["Fy"], p["Fx"], ho, wo), np.float32)
    live = np.zeros((p["Fy"], p["Fx"], ho, wo), bool)
    for fy in range(p["Fy"]):
        for fx in range(p["Fx"]):
            row = (p["OutRow0"] + y) * p["Sy"] + fy * p["Dy"]  # a row of the padded plane
            col = x * p["Sx"] - p["PadL"] + fx * p["Dx"]
            line = row - p["InRow0"]
            ok = ((row - p["PadT"] >= 0) & (row - p["PadT"] < p["Hreal"]) & (line >= 0) &
                  (line < H) & (col >= 0) & (col < W))
            live[fy, fx] = ok
            vals[:, fy, fx] = np.where(ok, planes[:, np.clip(line, 0, H - 1),
                                                  np.clip(col, 0, W - 1)], 0)
    return vals, live


def oracles(p, In, Filter, acc, in_feat: int, out_feat: int):
    """The definition's float32 sums (in order) and the float64 sums of the same products."""
    vals, live = windows(p, In, in_feat)
    taps, tile = p["Fx"] * p["Fy"], p["OutRows"] * p["Wo"]
    f = Filter[:out_feat * in_feat * taps].reshape(out_feat, in_feat, p["Fy"], p["Fx"])
    want = acc[:out_feat * tile].reshape(out_feat, p["OutRows"], p["Wo"]).copy()
    exact = want.astype(np.float64)
    for i in range(in_feat):
        for fy in range(p["Fy"]):
            for fx in range(p["Fx"]):
                w = f[:, i, fy, fx][:, None, None]
                on = live[fy, fx]
                want = np.where(on, want + vals[i, fy, fx] * w, want)  # float32, one by one
                exact = exact + np.where(on, vals[i, fy, fx].astype(np.float64) * w, 0.0)
    return want.reshape(-1), exact.reshape(-1)


def run(p, in_feat: int, out_feat: int, cores: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    taps, tile = p["Fx"] * p["Fy"], p["OutRows"] * p["Wo"]
    In = rng.uniform(-1, 1, in_feat * p["InRows"] * p["W"]).astype(np.float32)  # exact size
    Filter = rng.uniform(-1, 1, out_feat * in_feat * taps).astype(np.float32)
    acc = np.full(out_feat * tile + 40, CANARY)
    acc[:out_feat * tile] = rng.uniform(-1, 1, out_feat * tile)  # the partial sums so far
    want, exact = oracles(p, In, Filter, acc, in_feat, out_feat)
    kernel = convolution.layer_conv("float32", "float32", 8, planes=True)
    given = dict(p, In=In, Filter=Filter, InFeat=in_feat, OutFeat=out_feat)
    ref = acc.copy()
    kernel.reference(*[ref if n == "Acc" else given[n] for _, n in kernel.args], core_id=0,
                     core_count=cores)
    compiled(cores)(*[acc if n == "Acc" else given[n] for _, n in kernel.args])
    n = out_feat * tile
    assert np.array_equal(acc[:n].view(np.int32), want.view(np.int32)), (p, in_feat, out_feat)
    assert np.array_equal(ref[:n].view(np.int32), want.view(np.int32))
    assert np.all(acc[n:] == CANARY)  # nothing written past the last plane
    scale = 1 + np.abs(exact).max()
    assert np.max(np.abs(acc[:n] - exact)) <= 1e-5 * scale * in_feat * taps


def tile(W, Wo, rows, F, S=1, pad=0, in_row0=0, out_row0=0, hreal=None, in_rows=None):
    """A tile's geometry: ``rows`` output rows of width ``Wo`` from output row ``out_row0``,
    an F x F filter at stride S, padding ``pad``, input lines from ``in_row0``."""
    in_rows = in_rows if in_rows is not None else (rows - 1) * S + F
    return dict(W=W, Wo=Wo, InRow0=in_row0, InRows=in_rows,
                Hreal=hreal if hreal is not None else in_row0 + in_rows - pad,
                PadT=pad, OutRow0=out_row0, OutRows=rows, Fx=F, Fy=F, Sx=S, Sy=S, Dx=1, Dy=1,
                PadL=pad, Zin=0, Zw=0)


@pytest.mark.parametrize("W, rows, in_feat, out_feat, cores", [
    (56, 3, 24, 17, 1),  # 168 outputs: 5 blocks of 32 and a vector of 8 lanes
    (7, 7, 13, 9, 1),    # 49 outputs; 9 features: 8 then 1
    (33, 1, 3, 15, 2),   # 15 features: 8, 4, 2, 1; two cores
    (40, 2, 5, 22, 8),   # 80 outputs: blocks of 32 and a vector of 16; 8 cores
])
def test_pointwise_rows_as_one_run(W, rows, in_feat, out_feat, cores):
    """A 1x1 filter over whole rows (``conv_features.pointwise``): each output the
    definition's sum bit for bit (the C and the numpy reference), within float32 rounding
    of the float64 sum; a tile of rows further down the plane reads its own lines."""
    run(tile(W, W, rows, 1), in_feat, out_feat, cores, seed=W * rows + out_feat)
    run(tile(W, W, rows, 1, in_row0=2, out_row0=3, in_rows=rows + 2), in_feat, out_feat,
        cores, seed=W + in_feat)


@pytest.mark.slow
@pytest.mark.parametrize("W, rows, F, S, pad, out_feat", [
    (56, 2, 3, 1, 1, 11),   # a row of 56: blocks of 32 and of 24 columns
    (37, 3, 3, 1, 1, 8),    # 37 columns, the last block's vectors 5 lanes
    (50, 2, 5, 1, 2, 3),    # 5x5, padding 2: taps off both ends of the row
    (64, 2, 3, 2, 1, 5),    # stride 2: the even lanes of 32 columns a vector
    (33, 4, 1, 1, 0, 9),    # 1x1 on a tile whose rows are not all real (the row blocks)
])
def test_row_blocks_load_unmasked_inside_the_tile(W, rows, F, S, pad, out_feat):
    """A row's blocks (``conv_features._vector_ops``) load the vectors inside the tile
    unmasked, whatever their lanes off the tap's row, and add unmasked the vectors whose
    every output takes the tap: the definition's sums bit for bit on the first rows of a
    plane (the top padding), its last (input exactly as large as the tile), and a tile in
    its middle; taps off the row add nothing."""
    Wo = (W + 2 * pad - F) // S + 1
    run(tile(W, Wo, rows, F, S, pad), 4, out_feat, 1, seed=W + F)
    mid = tile(W, Wo, rows, F, S, pad, in_row0=4 * S, out_row0=4, hreal=12)
    if F == 1:  # rows past the plane's real rows: not one run, the row blocks
        mid = dict(mid, Hreal=mid["OutRow0"] + 1)
    run(mid, 3, out_feat, 1, seed=W * F + S)


def pooled(acc, Wc, AccRow0, Hc, Wo, OutRow0, OutRows, F, S):
    """The definition of a ReLU then an F x F max pooling at stride S over the existing
    accumulators: each window's taps in (fy, fx) order, M = V > M ? V : M from the first."""
    v = np.where(acc < 0, np.float32(0), acc)  # ReLU as npk_act: V < 0 ? 0 : V (NaN kept)
    out = np.empty(OutRows * Wo, np.float32)
    for y in range(OutRows):
        for x in range(Wo):
            m = None
            for cy in range((OutRow0 + y) * S, (OutRow0 + y) * S + F):
                for cx in range(x * S, x * S + F):
                    if cy < Hc and cx < Wc:
                        w = v[(cy - AccRow0) * Wc + cx]
                        m = w if m is None or w > m else m
            out[y * Wo + x] = m
    return out


@pytest.mark.slow
@pytest.mark.parametrize("Wo, S, cut", [(70, 2, 1), (131, 1, 2), (9, 2, 0)])
def test_max_pooling_rows_in_vectors(Wo, S, cut):
    """A convolution's output pass max pooling (``conv_features._max_row``): rows of 64
    outputs and more (chunks and a rest), windows cut at the right and the bottom (the
    plain loop's), NaN and negative zeros among the accumulators: the definition bit for
    bit; canaries after the outputs."""
    F, rows, row0 = 3, 3, 1
    Wc = (Wo - 1) * S + F - cut
    Hc = (row0 + rows - 1) * S + F - 1  # the last output row's window: one row short
    acc_row0 = row0 * S
    rng = np.random.default_rng(Wo)
    acc = rng.uniform(-1, 1, (Hc - acc_row0) * Wc).astype(np.float32)
    acc[rng.random(acc.size) < 0.03] = np.float32(np.nan)
    acc[rng.random(acc.size) < 0.05] = np.float32(-0.0)
    out = np.full(rows * Wo + 20, CANARY)
    fn = host.c_function(convolution.conv_out("float32", "float32"), 1)
    fn(acc, Wc, acc_row0, Hc, out, Wo, row0, rows, F, F, S, S, 1, 1, 0, 0)
    want = pooled(acc, Wc, acc_row0, Hc, Wo, row0, rows, F, S)
    assert np.array_equal(out[:rows * Wo].view(np.int32), want.view(np.int32))
    assert np.all(out[rows * Wo:] == CANARY)
