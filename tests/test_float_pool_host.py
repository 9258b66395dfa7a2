"""The float32 standalone max pooling on the host (``pooling.pool``'s C, a row of vectors at a
time where the compiler targets AVX-512) against the simulator's reference byte for byte, and
its values against a float64 numpy oracle: NaN taps that never win, -0.0 and 0.0 ties (the
first tap in (fy, fx) order stays), odd widths around the 16-lane vectors, stride 1 and 2,
2x2 and 3x3 windows, padding, windows wholly outside the row, canaries around every output."""

from __future__ import annotations

import numpy as np
import pytest
from test_basic_kernels_conv import cflags

from npukit.c import toolchain
from npukit.tiler.basic_kernels import host, pooling

CANARY = 23
LOWEST = np.float32(-3.40282347e+38)


def awkward(rng, n):
    """float32 values with NaN, -0.0, 0.0, infinities and the lowest float frequent."""
    v = rng.standard_normal(n).astype(np.float32)
    pick = rng.random(n)
    v[pick < 0.15] = np.nan
    v[(pick >= 0.15) & (pick < 0.3)] = -0.0
    v[(pick >= 0.3) & (pick < 0.4)] = 0.0
    v[(pick >= 0.4) & (pick < 0.43)] = -np.inf
    v[(pick >= 0.43) & (pick < 0.45)] = LOWEST
    v[(pick >= 0.45) & (pick < 0.47)] = np.inf
    return v


def max_oracle(x, f, stride, pad, rows, wo):
    """float64 numpy: output (y, c) is the largest non-NaN of x at rows (row0 + y)*stride +
    fy - pad and columns c*stride + fx - pad inside the plane, the lowest float where none is
    (and where every tap is below it)."""
    h, w = x.shape
    row0, n = rows
    out = np.full((n, wo), float(LOWEST))
    for fy in range(f):
        for fx in range(f):
            r = (row0 + np.arange(n)) * stride + fy - pad
            c = np.arange(wo) * stride + fx - pad
            ok = ((r >= 0) & (r < h))[:, None] & ((c >= 0) & (c < w))[None, :]
            v = x[np.clip(r, 0, h - 1)[:, None], np.clip(c, 0, w - 1)[None, :]]
            out = np.where(ok & ~np.isnan(v), np.fmax(out, v.astype(np.float64)), out)
    return out


@pytest.mark.parametrize("W, f, stride, pad, extra, cores", [
    (37, 3, 2, 1, 1, 4), (19, 2, 1, 0, 2, 1), (33, 3, 1, 1, 0, 2), (16, 2, 2, 1, 1, 1)])
def test_float_max_pooling_matches_the_simulator_bytes(W, f, stride, pad, extra, cores):
    """Max pooling of 3 float32 planes, output rows from 1 of the plane, ``extra`` outputs
    past the usual width (windows partly or wholly past the row): the C's bytes are the
    simulator's, its values the oracle's."""
    rng = np.random.default_rng(W * 10 + f)
    H, feat = 9, 3
    wo = (W + 2 * pad - f) // stride + 1 + extra
    ho = (H + 2 * pad - f) // stride + 1
    row0, n = 1, ho - 1
    x = awkward(rng, feat * H * W).reshape(feat, H, W)
    size = feat * n * wo
    outs = []
    for run in ("c", "simulator"):
        out = np.full(size + 2 * CANARY, 0x7FA5A5A5, np.uint32).view(np.float32)
        given = dict(In=x.ravel(), W=W, InRow0=pad, InRows=H, Hreal=H, PadT=pad,
                     Out=out[CANARY:CANARY + size], Wo=wo, OutRow0=row0, OutRows=n, Fx=f,
                     Fy=f, Sx=stride, Sy=stride, Dx=1, Dy=1, PadL=pad, PadB=pad,
                     PadR=pad + extra * stride, Oper=1, CountPad=0, InScale=0, InZp=0,
                     OutScale=0, OutZp=0, Feat=feat)
        kernel = pooling.pool("float32")
        values = [given[k] for _, k in kernel.args]
        if run == "c":
            with cflags(toolchain.DEFAULT_CFLAGS):
                host.c_function(kernel, cores)(*values)
        else:
            kernel.reference(*values, core_id=0, core_count=1)
        bits = out.view(np.uint32)
        assert (bits[:CANARY] == 0x7FA5A5A5).all() and (bits[CANARY + size:] == 0x7FA5A5A5).all()
        outs.append(bits[CANARY:CANARY + size].copy())
    assert np.array_equal(outs[0], outs[1])
    got = outs[0].view(np.float32).reshape(feat, n, wo)
    want = np.stack([max_oracle(x[o], f, stride, pad, (row0, n), wo) for o in range(feat)])
    assert np.array_equal(got.astype(np.float64), want)
    # The data's awkward cases reach the outputs: zeros (their ties), and with extra outputs
    # windows with no real tap.
    assert (got == 0).any() and (got == LOWEST).any() == bool(extra)
