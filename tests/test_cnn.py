"""The CNN generators of the GAP AutoTiler (``CNN_ConvolutionPoolReLU``, ``CNN_LinearReLU``,
``CNN_SoftMax``) as user kernels: tiled by the solver, run on the simulator (the basic
kernels' numpy references) and in C (their C sources), against an independent numpy reading
of the fixed-point semantics docs/graph.md states, computed on whole planes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from npukit import TilingError
from npukit.dtypes import int_range
from npukit.tiler import *
from npukit.tiler.basic_kernels import common, softmax

# -- the semantics, independently -----------------------------------------------------------


def wrap32(x):
    return (np.asarray(x, np.int64) + 2**31) % 2**32 - 2**31


def rnd(x, n):
    """Round half up after a right shift by n (n = 0: unchanged)."""
    x = np.asarray(x, np.int64)
    return x if n == 0 else np.floor_divide(x + 2 ** (n - 1), 2**n)


def shift(x, n):
    return np.asarray(x, np.int64) * 2**n if n >= 0 else rnd(x, -n)


def pads(size, f, s):
    total = max(f - s, 0) if size % s == 0 else max(f - size % s, 0)
    return total - total // 2, total // 2


def windows(x, f, s, d, pad):
    """[..., out_y, out_x, fy, fx] windows of the last two axes, zero padded as GAP pads."""
    (t, b), (left, r) = pad
    x = np.pad(x, [(0, 0)] * (x.ndim - 2) + [(t, b), (left, r)])
    fe = [d[k] * (f[k] - 1) + 1 for k in range(2)]
    oh, ow = (x.shape[-2] - fe[0]) // s[0] + 1, (x.shape[-1] - fe[1]) // s[1] + 1
    ys = (np.arange(oh) * s[0])[:, None] + np.arange(f[0]) * d[0]
    xs = (np.arange(ow) * s[1])[:, None] + np.arange(f[1]) * d[1]
    return x[..., ys[:, None, :, None], xs[None, :, None, :]]


def conv_layer(x, w, b, c):
    """Convolution, bias, normalisation, activation, pooling on whole planes."""
    flt = c["dt"] == "float32"
    fy, fx = w.shape[2:]
    dy, dx, sy, sx = c["D"], c["D"], c["S"], c["S"]
    pc = (pads(x.shape[1], dy * (fy - 1) + 1, sy), pads(x.shape[2], dx * (fx - 1) + 1, sx)) \
        if c["pad"] else ((0, 0), (0, 0))
    win = windows(x.astype(np.float64 if flt else np.int64), (fy, fx), (sy, sx), (dy, dx), pc)
    ww = w.astype(np.float64 if flt else np.int64)
    qi, qw, qb, qo = c["Q"]
    if flt:
        v = np.einsum("cyxij,ocij->oyx", win, ww) + b[:, None, None]
    elif c["dp"]:
        acc = shift(b, qi + qw - qb)[:, None, None] + np.einsum("cyxij,ocij->oyx", win, ww)
        v = rnd(wrap32(acc), qi + qw - qo)
    else:  # single precision: normalise and saturate after each input plane
        lo, hi = int_range(c["dt"])
        v = np.clip(shift(b, qo - qb), lo, hi)[:, None, None] * np.ones(win.shape[1:3], np.int64)
        for ci in range(win.shape[0]):
            s = np.einsum("yxij,oij->oyx", win[ci], ww[:, ci])
            v = np.clip(rnd(wrap32(v * 2 ** (qi + qw - qo) + s), qi + qw - qo), lo, hi)
    lo, hi = (0, np.inf) if flt else int_range(c["dt"])
    if c["act"] == KOP_RELU:
        lo = 0
    elif c["act"] == KOP_RELUN:
        lo, hi = 0, 6 << qo
    v = np.clip(v, lo, hi) if (c["act"] != KOP_NONE or not flt) else v
    return pool_layer(v, c)


def pool_layer(v, c):
    """The pooling of activated planes v (GAP's zero padding; integer averages by
    PoolFactor, 2**16 / window, rounded)."""
    flt = c["dt"] == "float32"
    if c["pool"] == KOP_NONE:
        return v
    f, s = c["pf"], c["ps"]
    pp = (pads(v.shape[1], f, s), pads(v.shape[2], f, s)) if c["ppad"] else ((0, 0), (0, 0))
    pw = windows(v, (f, f), (s, s), (1, 1), pp)
    if c["pool"] == KOP_MAXPOOL:
        return pw.max(axis=(-1, -2))
    if flt:
        return pw.sum(axis=(-1, -2)) / (f * f)
    return np.clip(rnd(pw.sum(axis=(-1, -2)) * ((1 << 16) // (f * f)), 16),
                   *int_range(c["dt"]))


# -- random layers ----------------------------------------------------------------------------

@st.composite
def conv_cases(draw):
    dt = draw(st.sampled_from(["int16", "int8", "float32"]))
    f = draw(st.integers(1, 4))
    case = dict(dt=dt, dp=draw(st.booleans()), pad=draw(st.booleans()),
                S=draw(st.integers(1, 2)), D=draw(st.integers(1, 2)), F=f,
                pool=draw(st.sampled_from([KOP_NONE, KOP_MAXPOOL, KOP_AVGPOOL])),
                pf=draw(st.integers(1, 3)), ps=draw(st.integers(1, 2)),
                ppad=draw(st.booleans()),
                act=draw(st.sampled_from([KOP_NONE, KOP_RELU] + ([] if dt == "float32"
                                                                 else [KOP_RELUN]))),
                nip=draw(st.integers(1, 3)), nop=draw(st.integers(1, 3)),
                H=draw(st.integers(4, 13)), W=draw(st.integers(4, 13)),
                L1=draw(st.integers(700, 6000)), seed=draw(st.integers(0, 2**16)))
    qi, qw = (draw(st.integers(4, 10)), draw(st.integers(4, 10))) if dt != "int8" else \
        (draw(st.integers(2, 5)), draw(st.integers(2, 5)))
    case["Q"] = (qi, qw, draw(st.integers(0, qi + qw)), draw(st.integers(0, qi + qw)))
    return case


def build_conv(c):
    m = Model(target="gap8", l1_budget=c["L1"])
    m.LoadCNNLibrary()
    size = "float32" if c["dt"] == "float32" else np.dtype(c["dt"]).itemsize
    qi, qw, qb, qo = c["Q"]
    pool = c["pool"]
    pf, ps = (c["pf"], c["ps"]) if pool != KOP_NONE else (1, 1)
    m.CNN_ConvolutionPoolReLU("L", 0, size, size, size, size, qi, qw, qb, qo, 0, 0, 0, 0,
                              c["nip"], c["nop"], c["W"], c["H"],
                              KOP_CONV_DP if c["dp"] else KOP_CONV, c["F"], c["F"], c["D"],
                              c["D"], c["S"], c["S"], int(c["pad"]),
                              pool, pf, pf, 1, 1, ps, ps, int(c["ppad"]), c["act"])
    return m


def data(c, rng):
    dt = np.dtype(c["dt"])
    fshape = (c["nop"], c["nip"], c["F"], c["F"])
    if dt.kind == "f":
        return (rng.standard_normal((c["nip"], c["H"], c["W"])).astype(dt),
                rng.standard_normal(fshape).astype(dt), rng.standard_normal(c["nop"]).astype(dt))
    lim = 2000 if dt == np.int16 else 40
    wl = 300 if dt == np.int16 else 20
    return (rng.integers(-lim, lim, (c["nip"], c["H"], c["W"])).astype(dt),
            rng.integers(-wl, wl, fshape).astype(dt), rng.integers(-lim, lim, c["nop"]).astype(dt))


def run_layer(m, name, backend, **arrays):
    prog = m.program(name)
    outs = {b.name: np.full(spec.shape, 7, b.dtype) for b, spec in prog.params if b.role == "out"}
    prog.run(backend, **arrays, **outs)
    return outs


def compare(got, want, dt):
    if np.dtype(dt).kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    else:
        assert np.array_equal(got.astype(np.int64), want)


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(conv_cases())
def test_convolution_layers_match_numpy(c):
    try:
        m = build_conv(c)
        t = m.tiling("L")
    except TilingError:
        assume(False)
    x, w, b = data(c, np.random.default_rng(c["seed"]))
    want = conv_layer(x, w, b, c)
    got = run_layer(m, "L", "sim", In=x, Filter=w, Bias=b.reshape(1, -1))["Out"]
    assert got.shape == want.shape
    compare(got, want, c["dt"])
    fe = c["D"] * (c["F"] - 1) + 1
    conv_pad = c["pad"] and any(pads(n, fe, c["S"]) != (0, 0) for n in (c["H"], c["W"]))
    pool_pad = c["ppad"] and c["pool"] != KOP_NONE and \
        any(pads(n, c["pf"], c["ps"]) != (0, 0)
            for n in conv_layer(x, w, b, dict(c, pool=KOP_NONE)).shape[1:])
    if conv_pad or pool_pad:
        assert t.n_tiles == 1  # zero padding keeps the whole plane in one tile


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(conv_cases())
@pytest.mark.slow
def test_convolution_layers_in_c_equal_the_simulator(c):
    try:
        m = build_conv(c)
        m.tiling("L")
    except TilingError:
        assume(False)
    x, w, b = data(c, np.random.default_rng(c["seed"]))
    sim = run_layer(m, "L", "sim", In=x, Filter=w, Bias=b.reshape(1, -1))["Out"]
    cc = run_layer(m, "L", "c", In=x, Filter=w, Bias=b.reshape(1, -1))["Out"]
    assert sim.tobytes() == cc.tobytes()


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(conv_cases())
def test_pooling_layers_match_numpy(c):
    """CNN_PoolReLU: the pooling and activation of CNN_ConvolutionPoolReLU alone, feature by
    feature (In_Q = Out_Q), on the simulator and in C."""
    dt = np.dtype(c["dt"])
    size = "float32" if dt.kind == "f" else dt.itemsize
    q = c["Q"][0]
    pool = c["pool"]
    pf, ps = (c["pf"], c["ps"]) if pool != KOP_NONE else (1, 1)
    m = Model(target="gap8", l1_budget=c["L1"])
    m.LoadCNNLibrary()
    try:
        m.CNN_PoolReLU("P", 0, size, size, q, q, 0, 0, c["nip"], c["nip"], c["W"], c["H"], pool,
                       pf, pf, 1, 1, ps, ps, int(c["ppad"]), c["act"])
        m.tiling("P")
    except TilingError:
        assume(False)
    rng = np.random.default_rng(c["seed"])
    x = (rng.standard_normal((c["nip"], c["H"], c["W"])) if dt.kind == "f" else
         rng.integers(-3000, 3000, (c["nip"], c["H"], c["W"]))).astype(dt)
    lo, hi = (-np.inf, np.inf) if dt.kind == "f" else int_range(dt)
    if c["act"] == KOP_RELU:
        lo = 0
    elif c["act"] == KOP_RELUN:
        lo, hi = 0, 6 << q
    v = x.astype(np.float64 if dt.kind == "f" else np.int64)
    want = pool_layer(np.clip(v, lo, hi), dict(c, pool=pool, pf=pf, ps=ps))
    for backend in ("sim", "c"):
        got = run_layer(m, "P", backend, In=x)["Out"]
        compare(got, want, c["dt"])


@pytest.mark.parametrize("dt", ["int16", "int8", "float32"])
def test_matrix_addition_saturates(dt):
    """CNN_MatAdd: Out = In1 + In2 saturated to the type, tiled over features and rows."""
    rng = np.random.default_rng(4)
    dtype = np.dtype(dt)
    size = "float32" if dtype.kind == "f" else dtype.itemsize
    m = Model(target="gap8", l1_budget=1200 * dtype.itemsize)  # several tiles
    m.LoadCNNLibrary()
    m.CNN_MatAdd("A", 0, size, size, size, 7, 7, 7, 0, 0, 0, 3, 3, 17, 9, KOP_MATADD)
    assert m.tiling("A").n_tiles > 1
    if dtype.kind == "f":
        x, y = (rng.standard_normal((3, 9, 17)).astype(dtype) for _ in range(2))
        want = x + y  # one float32 addition each
    else:
        lo, hi = int_range(dt)
        x, y = (rng.integers(lo, hi, (3, 9, 17), endpoint=True).astype(dtype) for _ in range(2))
        want = np.clip(x.astype(np.int64) + y, lo, hi)
        assert (want == lo).any() and (want == hi).any()  # both saturations exercised
    for backend in ("sim", "c"):
        got = run_layer(m, "A", backend, In1=x, In2=y)["Out"]
        assert got.tobytes() == want.astype(dtype).tobytes(), backend
    with pytest.raises(TilingError, match="one data size"):
        m.CNN_MatAdd("B", 0, 2, 1, 2, 7, 7, 7, 0, 0, 0, 3, 3, 17, 9, KOP_MATADD)
    with pytest.raises(TilingError, match="OutFeat"):
        m.CNN_MatAdd("B", 0, 2, 2, 2, 7, 7, 7, 0, 0, 0, 3, 4, 17, 9, KOP_MATADD)


@pytest.mark.slow
@pytest.mark.parametrize("dt,dp", [("int16", True), ("int16", False), ("int8", True),
                                   ("float32", True)])
def test_every_space_cut(dt, dp):
    """Output features, rows and input features all in several tiles (gap_sdk 4.x's spaces
    D1, Tile0, D0): the accumulators carry over the input feature tiles, the bias is set once
    per output tile, and both back ends equal the whole-plane oracle."""
    c = dict(dt=dt, dp=dp, pad=False, S=1, D=1, F=3, pool=KOP_MAXPOOL, pf=2, ps=2, ppad=False,
             act=KOP_RELU, nip=8, nop=16, H=20, W=20, L1=4000,
             Q=(4, 4, 4, 4) if dt == "int8" else (12, 14, 14, 12))
    m = build_conv(c)
    sp = m.tiling("L").spaces
    assert sp["Tile0"].count > 1 and sp["D0"].count > 1 and (sp["D1"].count > 1 or not dp)
    x, w, b = data(c, np.random.default_rng(9))
    want = conv_layer(x, w, b, c)
    for backend in ("sim", "c"):
        compare(run_layer(m, "L", backend, In=x, Filter=w, Bias=b.reshape(1, -1))["Out"], want,
                dt)


@pytest.mark.parametrize("F,S,pf,ps,H", [(1, 3, 1, 1, 10), (1, 1, 1, 2, 9), (2, 3, 1, 2, 13)])
def test_strides_beyond_the_window(F, S, pf, ps, H):
    """A stride longer than its window skips rows (gap_sdk's overlap turns negative): the
    plane stays in one tile and the skipped rows are read nowhere."""
    c = dict(dt="int16", dp=True, pad=False, S=S, D=1, F=F,
             pool=KOP_MAXPOOL if ps > 1 else KOP_NONE, pf=pf, ps=ps, ppad=False, act=KOP_RELU,
             nip=3, nop=2, H=H, W=7, L1=20000, Q=(12, 14, 14, 12))
    m = build_conv(c)
    sp = m.tiling("L").spaces
    assert m.kernels["L"].iter_space is not None and sp["Tile0"].count == 1
    x, w, b = data(c, np.random.default_rng(3))
    want = conv_layer(x, w, b, c)
    for backend in ("sim", "c"):
        compare(run_layer(m, "L", backend, In=x, Filter=w, Bias=b.reshape(1, -1))["Out"], want,
                "int16")


def test_several_tiles_overlap_by_the_receptive_field():
    c = dict(dt="int16", dp=True, pad=False, S=1, D=1, F=5, pool=KOP_MAXPOOL, pf=2, ps=2,
             ppad=False, act=KOP_RELU, nip=2, nop=2, H=28, W=28, L1=3000, Q=(12, 14, 14, 12),
             seed=5)
    m = build_conv(c)
    t = m.tiling("L")
    assert t.n_tiles > 1 and t.geometry["In"].lines == 2 * t.tile + 4
    x, w, b = data(c, np.random.default_rng(5))
    want = conv_layer(x, w, b, c)
    for backend in ("sim", "c"):
        compare(run_layer(m, "L", backend, In=x, Filter=w, Bias=b.reshape(1, -1))["Out"], want,
                "int16")


@pytest.mark.parametrize("dt", ["int16", "int8", "float32"])
def test_linear_layer(dt):
    rng = np.random.default_rng(2)
    m = Model(target="gap8", l1_budget=800 * np.dtype(dt).itemsize)  # several tiles
    m.LoadCNNLibrary()
    size = "float32" if dt == "float32" else np.dtype(dt).itemsize
    q = (7, 6, 5, 4) if dt == "int8" else (12, 12, 8, 11)
    m.CNN_LinearReLU("Lin", 0, size, size, size, size, *q, 0, 0, 0, 0, 100, 13, KOP_LINEAR,
                     KOP_RELU)
    assert m.tiling("Lin").n_tiles > 1
    if dt == "float32":
        x, w, b = (rng.standard_normal(s).astype(np.float32) for s in (100, (13, 100), 13))
        want = np.maximum(w.astype(np.float64) @ x + b, 0)
    else:
        lim = 3000 if dt == "int16" else 60
        x = rng.integers(-lim, lim, 100).astype(dt)
        w = rng.integers(-lim, lim, (13, 100)).astype(dt)
        b = rng.integers(-lim, lim, 13).astype(dt)
        acc = shift(b, q[0] + q[1] - q[2]) + w.astype(np.int64) @ x.astype(np.int64)
        want = np.clip(rnd(wrap32(acc), q[0] + q[1] - q[3]), 0, int_range(dt)[1])
    outs = [run_layer(m, "Lin", be, In=x.reshape(1, -1), Filter=w, Bias=b.reshape(-1, 1))["Out"]
            for be in ("sim", "c")]
    assert outs[0].tobytes() == outs[1].tobytes()
    compare(outs[0].reshape(-1), want, dt)


def test_exp_q15_is_within_one_lsb_everywhere():
    x = -np.arange(0, 13 * 2**15, dtype=np.int64)
    err = np.abs(softmax.exp_q15(x) - np.exp(x / 2**15) * 2**15)
    assert err.max() <= 1 and softmax.exp_q15(np.zeros(1, np.int64))[0] == 2**15


def test_exp_f32_is_close_to_exp():
    """Relative error below 2e-7 (1 + |x|): the float32 rounding of x * log2(e) grows with
    |x|; results below 2**-125 are 0."""
    x = np.linspace(-90, 0, 100001).astype(np.float32)
    got = softmax.exp_f32(x).astype(np.float64)
    want = np.exp(x.astype(np.float64))
    assert (np.abs(got - want) <= 2e-7 * (1 + np.abs(x)) * want + 2.0**-124).all()


def test_the_two_float_exps_differ_only_in_where_they_flush_to_0():
    """One exp2 polynomial (``exp2_f32``, the layer kernels' ``npk_exp2``) serves both
    softmaxes; the GAP library's (``exp_f32``) flushes to 0 from ``floor(t) < -125``, the
    layer kernels' only below ``t = -126``: on ``t`` in [-126, -125) they differ (a kept
    drift: each equals its C)."""
    x = (np.linspace(-130, 0, 130001) / np.log2(np.e)).astype(np.float32)
    t = x * common.LOG2E  # in float32, as exp_f32 takes it
    gap, layer = softmax.exp_f32(x), common.exp2_f32(t)
    want = 2.0 ** t.astype(np.float64)  # the float64 oracle
    kept = np.floor(t) >= -125
    assert np.array_equal(gap[kept], layer[kept])
    assert (np.abs(gap[kept] - want[kept]) <= 1e-6 * want[kept]).all()
    assert (gap[~kept] == 0).all()
    band = (t >= -126) & ~kept
    assert band.sum() > 900 and (np.abs(layer[band] - want[band]) <= 1e-6 * want[band]).all()
    assert (layer[t < -126] == 0).all()


@pytest.mark.slow
@pytest.mark.parametrize("dt,in_q,out_q", [("int16", 11, 15), ("int16", 15, 15),
                                           ("int16", 18, 15), ("int8", 4, 7)])
def test_softmax_is_within_its_bound(dt, in_q, out_q):
    rng = np.random.default_rng(3)
    m = Model(target="gap8")
    m.LoadCNNLibrary()
    size = np.dtype(dt).itemsize
    n = 10
    m.CNN_SoftMax("Sm", 0, size, size, in_q, out_q, 0, 0, n, KOP_SOFTMAX)
    lo, hi = int_range(dt)
    worst = 0.0
    for k in range(20):
        x = rng.integers(lo // (1 if k % 2 else 8), hi // (1 if k % 2 else 8), n).astype(dt)
        outs = [run_layer(m, "Sm", be, In=x.reshape(1, -1))["Out"] for be in ("sim", "c")]
        assert outs[0].tobytes() == outs[1].tobytes()
        y = x.astype(np.float64) / 2**in_q
        want = np.exp(y - y.max()) / np.exp(y - y.max()).sum()
        worst = max(worst, np.abs(outs[0].reshape(-1) / 2**out_q - want).max())
    # docs/graph.md: (eps (N + 1) + 2.5) LSB of Q15 with eps = 1; an int8 output's own
    # rounding (half an LSB of Q7) on top.
    bound = (1 * (n + 1) + 2.5) / 2**15 + (0.5 / 2**out_q if out_q < 15 else 0)
    assert worst <= bound


def test_float_softmax():
    m = Model(target="gap8")
    m.LoadCNNLibrary()
    m.CNN_SoftMax("Sm", 0, "float32", "float32", 0, 0, 0, 0, 7, KOP_SOFTMAX)
    x = np.array([-3, 0.5, 2, 2, -100, 7.25, 1e-3], np.float32)
    outs = [run_layer(m, "Sm", be, In=x.reshape(1, -1))["Out"] for be in ("sim", "c")]
    assert outs[0].tobytes() == outs[1].tobytes()
    want = np.exp(x - x.max()) / np.exp(x.astype(np.float64) - x.max()).sum()
    np.testing.assert_allclose(outs[0].reshape(-1), want, rtol=1e-5, atol=1e-9)


def test_generator_errors_name_the_argument():
    m = Model(target="gap8")
    with pytest.raises(TilingError, match="LoadCNNLibrary"):
        m.CNN_SoftMax("S", 0, 2, 2, 15, 15, 0, 0, 10, KOP_SOFTMAX)
    m.LoadCNNLibrary()
    conv = ["C", 0, 2, 2, 2, 2, 12, 14, 14, 12, 0, 0, 0, 0, 1, 4, 8, 8, KOP_CONV_DP, 3, 3, 1, 1,
            1, 1, 0, KOP_MAXPOOL, 2, 2, 1, 1, 2, 2, 0, KOP_RELU]
    for k, v, msg in [(2, 3, "1, 2 or 4 bytes"), (2, "float64", "float32"),
                      (5, "float32", "every operand"), (9, 30, "negative"),
                      (18, KOP_MAXPOOL, "ConvOper"), (14, 0, "InFeat"),
                      (34, KOP_SOFTMAX, "activation"), (19, 9, "does not fit")]:
        args = list(conv)
        args[k] = v
        with pytest.raises(TilingError, match=msg):
            m.CNN_ConvolutionPoolReLU(*args)
    with pytest.raises(TilingError, match="Ctrl"):
        m.CNN_LinearReLU("Lin", {"TileOrientation": 1}, 2, 2, 2, 2, 12, 12, 8, 11, 0, 0, 0, 0,
                         16, 4, KOP_LINEAR, KOP_NONE)
    with pytest.raises(TilingError, match="Out_Q"):
        m.CNN_SoftMax("S", 0, 2, 1, 15, 9, 0, 0, 10, KOP_SOFTMAX)


def test_in_l3_flags_give_an_l3_home_when_tiled_alone():
    m = Model(target="gap8", l1_budget=4000)
    m.LoadCNNLibrary()
    m.CNN_ConvolutionPoolReLU("C", 0, 2, 2, 2, 2, 12, 14, 14, 12, 1, 0, 0, 1, 2, 3, 10, 10,
                              KOP_CONV_DP, 3, 3, 1, 1, 1, 1, 0, KOP_NONE, 1, 1, 1, 1, 1, 1, 0,
                              KOP_RELU)
    prog = m.program("C")
    homes = {b.name: b.memory for b, _ in prog.params}
    assert homes == {"In": "L3_RAM", "Filter": "L2", "Bias": "L2", "Out": "L3_RAM"}
    rng = np.random.default_rng(0)
    c = dict(dt="int16", dp=True, pad=False, S=1, D=1, F=3, pool=KOP_NONE, pf=1, ps=1,
             ppad=False, act=KOP_RELU, nip=2, nop=3, H=10, W=10, L1=4000, Q=(12, 14, 14, 12))
    x, w, b = data(c, rng)
    res = prog.run("sim", In=x, Filter=w, Bias=b.reshape(1, -1),
                   Out=np.zeros((3, 8, 8), np.int16))
    compare(res.outputs["Out"], conv_layer(x, w, b, c), "int16")
    assert res.report.bytes_moved["L3_RAM"] > 0
    assert math.isfinite(res.cycles)
