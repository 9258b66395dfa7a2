"""The layer convolution's C (``basic_kernels.convolution.layer_conv``), compiled alone, against
an independent reading of its definition (Python loops, one output at a time, float32
rounding after each product and each sum) and against its numpy reference: float32 bit for
bit, integers exactly; widths that are not a multiple of its vector blocks, strides 1-3,
dilations, padding on every side, 1x1 and 3x3 filters (the specialised copies) and others,
rows shared among 1 or 8 cores; with the host's flags (AVX-512 register blocks where the host
has it) and with flags that leave only the plain loops. Accumulators outside the tile are
poisoned and must stay as they were."""

from __future__ import annotations

import contextlib
import os
from functools import cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npukit import DTypeError, ShapeError
from npukit.c import toolchain
from npukit.tiler.basic_kernels import common, convolution, host

# the host's flags (-march=native: AVX-512 blocks where the host has them), and flags for a
# plain x86-64 / any target without AVX-512 (the loops every compiler takes)
FLAGS = {"native": toolchain.DEFAULT_CFLAGS, "plain": "-O2"}
POISON = {"float32": np.float32(np.nan).view(np.int32) | 0x5A5, "int32": 0x5A5A5A5A}


@contextlib.contextmanager
def cflags(flags: str):
    old = os.environ.get("NPUKIT_CFLAGS")
    os.environ["NPUKIT_CFLAGS"] = flags
    try:
        yield
    finally:
        if old is None:
            del os.environ["NPUKIT_CFLAGS"]
        else:
            os.environ["NPUKIT_CFLAGS"] = old


@cache
def compiled(in_dt: str, w_dt: str, cores: int, flags: str):
    with cflags(FLAGS[flags]):
        return host.c_function(convolution.layer_conv(in_dt, w_dt, 8), cores)


def wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def definition(In, W, InRow0, InRows, Hreal, PadT, Filter, Acc, Wo, OutRow0, OutRows, Fx, Fy,
               Sx, Sy, Dx, Dy, PadL, Zin, Zw):
    """The docstring's sum, output by output: taps in (fy, fx) order, those on padding
    skipped; float32 rounding after each product and each sum, integers wrapping at 32 bits."""
    out = Acc[:OutRows * Wo].copy()
    flt = Acc.dtype == np.float32
    for y in range(OutRows):
        for x in range(Wo):
            a = out[y * Wo + x] if flt else int(out[y * Wo + x])
            for fy in range(Fy):
                p = (OutRow0 + y) * Sy + fy * Dy
                line = p - InRow0
                if not (0 <= p - PadT < Hreal and 0 <= line < InRows):
                    continue
                for fx in range(Fx):
                    col = x * Sx - PadL + fx * Dx
                    if not 0 <= col < W:
                        continue
                    v, f = In[line * W + col], Filter[fy * Fx + fx]
                    if flt:
                        a = np.float32(a + np.float32(v * f))
                    else:
                        a = wrap32(a + (int(v) - Zin) * (int(f) - Zw))
            out[y * Wo + x] = a
    return out


def values(rng, dt, n):
    """Data with exact zeros and (float32) negative zeros among ordinary values."""
    if dt == "float32":
        v = rng.normal(size=n).astype(np.float32)
        v[rng.random(n) < 0.1] = np.float32(-0.0)
        v[rng.random(n) < 0.1] = np.float32(0.0)
        return v
    lo, hi = (-128, 128) if dt == "int8" else (0, 256)
    return rng.integers(lo, hi, n).astype(dt)


TYPES = [("float32", "float32"), ("int8", "int8"), ("uint8", "uint8"), ("uint8", "int8")]


@st.composite
def cases(draw):
    in_dt, w_dt = draw(st.sampled_from(TYPES))
    F = draw(st.sampled_from([1, 1, 3, 3, 3, 2, 5]))
    Fx, Fy = F, draw(st.sampled_from([F, F, 1, 2]))
    p = dict(W=draw(st.integers(1, 70)), Fx=Fx, Fy=Fy, Sx=draw(st.sampled_from([1, 1, 1, 2, 3])),
             Sy=draw(st.integers(1, 2)), Dx=draw(st.sampled_from([1, 1, 2])),
             Dy=draw(st.sampled_from([1, 1, 2])), PadL=draw(st.integers(0, 3)),
             PadT=draw(st.integers(0, 2)), Hreal=draw(st.integers(1, 8)),
             InRow0=draw(st.integers(0, 3)), InRows=draw(st.integers(1, 9)),
             OutRow0=draw(st.integers(0, 3)), OutRows=draw(st.integers(1, 7)))
    # output columns up to one past those with a tap (a column right of every tap keeps
    # its accumulator)
    reach = (p["W"] - 1 + p["PadL"]) // p["Sx"] + 2
    p["Wo"] = draw(st.integers(1, max(1, reach)))
    flt = in_dt == "float32"
    # zero points of ONNX's types, the extremes the 16-bit products take (+-32512) and beyond
    # (the plain loops)
    p["Zin"] = 0 if flt else draw(st.sampled_from([0, 3, -128, 128, 127, -32512, 32513]))
    p["Zw"] = 0 if flt else draw(st.sampled_from([0, 1, 255, -128, 32512, -32513]))
    return in_dt, w_dt, p, draw(st.sampled_from([1, 8])), draw(st.sampled_from(list(FLAGS))), \
        draw(st.integers(0, 2**32 - 1))


def arguments(in_dt, w_dt, p, seed):
    rng = np.random.default_rng(seed)
    acc_dt = "float32" if in_dt == "float32" else "int32"
    tile = p["OutRows"] * p["Wo"]
    acc = np.full(tile + 37, POISON[acc_dt], np.int32).view(acc_dt)
    acc[:tile] = values(rng, "float32", tile) if acc_dt == "float32" else \
        rng.integers(-2**31, 2**31, tile)
    In, Filter = values(rng, in_dt, p["InRows"] * p["W"]), values(rng, w_dt, p["Fx"] * p["Fy"])
    names = [n for _, n in convolution.layer_conv(in_dt, w_dt, 8).args]
    given_ = dict(p, In=In, Filter=Filter, Acc=acc)
    return [given_[n] for n in names], acc, tile


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_layer_conv_c_is_its_definition_bit_for_bit(case):
    in_dt, w_dt, p, cores, flags, seed = case
    args, acc, tile = arguments(in_dt, w_dt, p, seed)
    In, Filter, before = args[0].copy(), args[6].copy(), acc.copy()
    want = definition(*args)
    ref = acc.copy()
    convolution.layer_conv(in_dt, w_dt, 8).reference(*args[:7], ref, *args[8:], core_id=0,
                                                     core_count=cores)
    compiled(in_dt, w_dt, cores, flags)(*args)
    bits = np.int32
    assert np.array_equal(acc[:tile].view(bits), want.view(bits)), (p, flags)
    assert np.array_equal(ref[:tile].view(bits), want.view(bits)), p
    assert np.array_equal(acc[tile:].view(bits), before[tile:].view(bits))  # canaries
    assert np.array_equal(args[0], In) and np.array_equal(args[6], Filter)


@pytest.mark.parametrize("flags", list(FLAGS))
@pytest.mark.parametrize("cores", [1, 8])
@pytest.mark.parametrize("Wo", [1, 7, 15, 16, 17, 32, 33, 48, 49, 64, 65, 100, 130])
def test_every_block_size_and_tail_of_a_padded_3x3_row(flags, cores, Wo):
    """A 'same' 3x3 convolution at every width around the vector blocks (16, 32, 48, 64
    columns), a core having one row or several: the border columns'
    padding taps add nothing, negative zeros stay."""
    p = dict(W=Wo, Fx=3, Fy=3, Sx=1, Sy=1, Dx=1, Dy=1, PadL=1, PadT=1, Hreal=5, InRow0=0,
             InRows=7, OutRow0=0, OutRows=5, Wo=Wo, Zin=0, Zw=0)
    args, acc, tile = arguments("float32", "float32", p, Wo)
    acc[:tile:3] = np.float32(-0.0)
    before = acc.copy()
    want = definition(*args)
    compiled("float32", "float32", cores, flags)(*args)
    assert np.array_equal(acc[:tile].view(np.int32), want.view(np.int32))
    assert np.array_equal(acc[tile:].view(np.int32), before[tile:].view(np.int32))
    assert not np.array_equal(acc[:tile], before[:tile])


@pytest.mark.parametrize("flags", list(FLAGS))
@pytest.mark.parametrize("types, zin, zw", [(("float32", "float32"), 0, 0),
                                            (("uint8", "int8"), 255, -3),
                                            (("int8", "int8"), -128, 127)])
@pytest.mark.parametrize("F, PadL", [(3, 1), (5, 2), (3, 0)])
@pytest.mark.parametrize("Wo", [1, 7, 16, 17, 32, 33, 48, 49, 64, 65])
def test_every_block_size_and_tail_of_a_row_at_column_stride_2(flags, types, zin, zw, F, PadL,
                                                               Wo):
    """Column and row stride 2 (a 3x3 'same' filter: the specialised copy; 5x5 and an
    unpadded 3x3: the general one) at every width around the vector blocks, the input one
    or two columns wider than the outputs read: a lane takes every second input column
    (the even lanes of 32), the taps on padding or past the row add nothing; float32 bit
    for bit (negative zeros kept), integers exact; canaries kept, 8 cores sharing rows."""
    in_dt, w_dt = types
    W = 2 * (Wo - 1) + F - 2 * PadL + Wo % 2  # 'same' width, or one column more
    p = dict(W=max(W, 1), Fx=F, Fy=3, Sx=2, Sy=2, Dx=1, Dy=1, PadL=PadL, PadT=1, Hreal=9,
             InRow0=0, InRows=11, OutRow0=0, OutRows=5, Wo=Wo, Zin=zin, Zw=zw)
    args, acc, tile = arguments(in_dt, w_dt, p, Wo * F)
    if in_dt == "float32":
        acc[:tile:3] = np.float32(-0.0)
    before = acc.copy()
    want = definition(*args)
    compiled(in_dt, w_dt, 8, flags)(*args)
    bits = np.int32
    assert np.array_equal(acc[:tile].view(bits), want.view(bits))
    assert np.array_equal(acc[tile:].view(bits), before[tile:].view(bits))
    assert not np.array_equal(acc[:tile], before[:tile])


@pytest.mark.parametrize("flags", list(FLAGS))
@pytest.mark.parametrize("types, zin, zw", [
    (("int8", "int8"), -128, 0), (("int8", "int8"), 127, -128), (("uint8", "int8"), 255, 0),
    (("uint8", "uint8"), 0, 255), (("int8", "int8"), 32512, -32512)])
@pytest.mark.parametrize("Wo", [7, 16, 33, 64, 70])
def test_integer_blocks_at_the_extremes_of_values_and_zero_points(flags, types, zin, zw, Wo):
    """A padded 3x3 integer row with inputs and weights at their type's ends (and between),
    zero points at ONNX's ends and at the largest the 16-bit products take: exact, the
    canaries kept."""
    in_dt, w_dt = types
    p = dict(W=Wo, Fx=3, Fy=3, Sx=1, Sy=1, Dx=1, Dy=1, PadL=1, PadT=1, Hreal=5, InRow0=0,
             InRows=7, OutRow0=0, OutRows=5, Wo=Wo, Zin=zin, Zw=zw)
    args, acc, tile = arguments(in_dt, w_dt, p, Wo)
    rng = np.random.default_rng(Wo)
    for i, dt in ((0, in_dt), (6, w_dt)):
        lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
        args[i][rng.random(args[i].size) < 0.6] = lo
        args[i][rng.random(args[i].size) < 0.3] = hi
    before = acc.copy()
    want = definition(*args)
    compiled(in_dt, w_dt, 1, flags)(*args)
    assert np.array_equal(acc[:tile], want)
    assert np.array_equal(acc[tile:], before[tile:])
    assert not np.array_equal(acc[:tile], before[:tile])


def test_the_native_flags_take_the_avx512_blocks_where_the_host_has_them():
    """The blocks are compiled in exactly when the compiler targets AVX-512 (F, BW, VL)."""
    src = f"{common.AVX512_HELPERS}\nint npk_probe(void) {{ return NPK_AVX512 + 0; }}"
    with cflags("-O2"):
        with pytest.raises(Exception, match="NPK_AVX512"):
            toolchain.function(src, "npk_probe", 0)
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    if all(f in flags for f in ("avx512f", "avx512bw", "avx512vl")):
        toolchain.function(src, "npk_probe", 0)  # compiles: the blocks are in


def test_host_function_refuses_arrays_of_the_wrong_type_or_layout():
    fn = host.c_function(convolution.set_bias("float32", "float32"))
    out = np.zeros(4, np.float32)
    with pytest.raises(DTypeError, match="Bias.*float32.*float64"):
        fn(out, 2, 2, np.ones(2), 0, 0)
    with pytest.raises(ShapeError, match="Out.*C-contiguous"):
        fn(np.zeros(8, np.float32)[::2], 2, 2, np.ones(2, np.float32), 0, 0)
    with pytest.raises(ShapeError, match="6 arguments"):
        fn(out, 2, 2)


# -- the convolution's output: activation or requantisation, then pooling ---------------------

def out_definition(acc, Wc, AccRow0, Hc, Wo, OutRow0, OutRows, Fx, Fy, Sx, Sy, Oper, rest, flt):
    """Each accumulator activated (float32) or requantised (integers), then the max (Oper 1)
    or average (Oper 2) of the window's existing ones, in (fy, fx) order; Oper 0 the one."""
    if flt:
        v = common.activate(acc, *rest)
    else:
        scale, index, zout, lo, hi = rest
        v = common.requant(acc, scale[index], zout, lo, hi)
    out = []
    for y in range(OutRows):
        for x in range(Wo):
            win = [v[(cy - AccRow0) * Wc + cx]
                   for cy in range((OutRow0 + y) * Sy, (OutRow0 + y) * Sy + Fy) if cy < Hc
                   for cx in range(x * Sx, x * Sx + Fx) if cx < Wc]
            if Oper == common.POOL_AVG:
                s = np.float32(0)
                for w in win:
                    s = np.float32(s + w)
                out.append(np.float32(s / np.float32(len(win))))
            else:
                out.append(max(win) if Oper == common.POOL_MAX else win[0])
    return np.array(out)


@st.composite
def out_cases(draw):
    out_dt = draw(st.sampled_from(["float32", "int8", "uint8"]))
    flt = out_dt == "float32"
    pool = draw(st.booleans())
    Fx, Fy = (draw(st.integers(1, 3)), draw(st.integers(1, 3))) if pool else (1, 1)
    Sx, Sy = (draw(st.integers(1, Fx)), draw(st.integers(1, Fy))) if pool else (1, 1)
    Oper = draw(st.sampled_from([1, 2] if flt else [1])) if pool else 0
    Wo, OutRows, OutRow0 = draw(st.integers(1, 45)), draw(st.integers(1, 6)), draw(
        st.integers(0, 3))
    # every window's first accumulator exists; some windows are cut at the right and bottom
    Wc = (Wo - 1) * Sx + 1 + draw(st.integers(0, Fx - 1))
    Hc = (OutRow0 + OutRows - 1) * Sy + 1 + draw(st.integers(0, Fy - 1))
    AccRow0 = draw(st.integers(0, OutRow0 * Sy))
    return out_dt, dict(Wc=Wc, AccRow0=AccRow0, Hc=Hc, Wo=Wo, OutRow0=OutRow0, OutRows=OutRows,
                        Fx=Fx, Fy=Fy, Sx=Sx, Sy=Sy, Oper=Oper), \
        draw(st.sampled_from([1, 8])), draw(st.sampled_from(list(FLAGS))), \
        draw(st.sampled_from([0, 1, 3])), draw(st.integers(0, 2**32 - 1))


@cache
def out_compiled(acc_dt: str, out_dt: str, cores: int, flags: str):
    with cflags(FLAGS[flags]):
        return host.c_function(convolution.conv_out(acc_dt, out_dt), cores)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(out_cases())
def test_conv_out_c_is_its_definition_bit_for_bit(case):
    out_dt, p, cores, flags, act, seed = case
    flt = out_dt == "float32"
    acc_dt = "float32" if flt else "int32"
    rng = np.random.default_rng(seed)
    lines = p["Hc"] - p["AccRow0"]
    acc = values(rng, "float32", lines * p["Wc"]) if flt else \
        rng.integers(-3000, 3000, lines * p["Wc"]).astype(np.int32)
    if flt:
        rest = [act, int(common.f32_bits(0.125)), int(common.f32_bits(0.5))]
    else:
        lo, hi = (-128, 127) if out_dt == "int8" else (0, 255)
        rest = [rng.uniform(0.01, 0.2, 4).astype(np.float32), 2, int(rng.integers(-5, 6)),
                lo + act, hi - act]
    tile = p["OutRows"] * p["Wo"]
    out = np.full(tile + 29, 0x5A if not flt else POISON["float32"],
                  np.int32 if flt else np.uint8).view(np.float32 if flt else out_dt)
    before = out.copy()
    want = out_definition(acc, *p.values(), rest, flt).astype(out_dt)
    kernel = convolution.conv_out(acc_dt, out_dt)
    ref = out.copy()
    kernel.reference(acc, *list(p.values())[:3], ref, *list(p.values())[3:], *rest, core_id=0,
                     core_count=cores)
    args = [acc, p["Wc"], p["AccRow0"], p["Hc"], out, *list(p.values())[3:], *rest]
    out_compiled(acc_dt, out_dt, cores, flags)(*args)
    bits = np.int32 if flt else np.uint8
    assert np.array_equal(out[:tile].view(bits), want.view(bits)), (p, flags)
    assert np.array_equal(ref[:tile].view(bits), want.view(bits)), p
    assert np.array_equal(out[tile:].view(bits), before[tile:].view(bits))


def test_an_average_of_negative_zeros_is_positive_zero_in_c_and_reference():
    """The average pooling sums from +0 (as ONNX Runtime): -0 + -0 = -0, but 0 + -0 = +0."""
    kernel = convolution.conv_out("float32", "float32")
    acc = np.full(4, -0.0, np.float32)
    args = [acc, 2, 0, 2, None, 1, 0, 1, 2, 2, 2, 2, common.POOL_AVG, common.ACT_NONE, 0, 0]
    c, ref = np.full(1, np.nan, np.float32), np.full(1, np.nan, np.float32)
    out_compiled("float32", "float32", 1, "native")(*args[:4], c, *args[5:])
    kernel.reference(*args[:4], ref, *args[5:], core_id=0, core_count=1)
    assert c.view(np.int32)[0] == ref.view(np.int32)[0] == 0


def test_the_host_modules_example_runs():
    import doctest

    result = doctest.testmod(host, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize("flags", list(FLAGS))
@pytest.mark.parametrize("Sx", [1, 2])
@pytest.mark.parametrize("out_dt", ["int8", "uint8"])
def test_requantised_lanes_at_the_extremes_are_the_definition(flags, Sx, out_dt):
    """The integer output's 16-lane blocks (and the plain loop after them): accumulators at
    int32's ends and at ties of the rounding (x.5 after the scale), zero points at the type's
    ends, a clamp narrower than the type, 2x2 max pooling at strides 1 and 2."""
    rng = np.random.default_rng(Sx)
    Wo, rows = 37, 3
    Wc, Hc = (Wo - 1) * Sx + 2, rows + 1
    ends = np.array([-2**31, 2**31 - 1, -2**31 + 1, 0, 1, -1, 5, -5, 3, -3], np.int64)
    acc = np.where(rng.random(Hc * Wc) < 0.3, rng.choice(ends, Hc * Wc),
                   rng.integers(-3000, 3000, Hc * Wc)).astype(np.int32)
    lo, hi = (-128, 127) if out_dt == "int8" else (0, 255)
    cases = [(lo, 0.5, 0), (hi, 0.5, 0), (3, 0.013, 7), (-7 if lo else 9, 1e9, 0)]
    for zout, scale, clamp in cases:
        p = dict(Wc=Wc, AccRow0=0, Hc=Hc, Wo=Wo, OutRow0=0, OutRows=rows, Fx=2, Fy=2, Sx=Sx,
                 Sy=1, Oper=common.POOL_MAX)
        rest = [np.array([9.0, scale], np.float32), 1, zout, lo + clamp, hi - clamp]
        want = out_definition(acc, *p.values(), rest, False).astype(out_dt)
        out = np.full(rows * Wo + 5, 0x5A, np.uint8).view(out_dt)
        before = out.copy()
        out_compiled("int32", out_dt, 8, flags)(acc, Wc, 0, Hc, out, *list(p.values())[3:],
                                                *rest)
        assert np.array_equal(out[:rows * Wo], want), (zout, scale)
        assert np.array_equal(out[rows * Wo:], before[rows * Wo:])
        assert len(np.unique(want)) > 2


# -- a tile of features: several input planes into several planes of accumulators -----------

@cache
def planes_compiled(in_dt: str, w_dt: str, cores: int, flags: str):
    with cflags(FLAGS[flags]):
        return host.c_function(convolution.layer_conv(in_dt, w_dt, 8, planes=True), cores)


@st.composite
def flat_cases(draw):
    """Planes the feature tile's kernel flattens (rows narrower than 32, as wide as the input,
    stride 1, no dilation), whole or a tile of their rows."""
    in_dt, w_dt, p, cores, flags, seed = draw(cases())
    W = draw(st.integers(1, 31))
    p = dict(p, W=W, Wo=W, Sx=1, Sy=1, Dx=1, Dy=1, PadL=draw(st.integers(0, p["Fx"] - 1)))
    return in_dt, w_dt, p, cores, flags, seed


def features_definition(p, In, Filter, acc, in_feat: int, out_feat: int) -> np.ndarray:
    """The one-plane definition over a feature tile: output feature o adds input features
    0, 1, ... in order, its filter [o][i] on input plane i."""
    plane, taps, tile = p["InRows"] * p["W"], p["Fx"] * p["Fy"], p["OutRows"] * p["Wo"]
    names = [n for _, n in convolution.layer_conv("float32", "float32", 8).args]  # any types
    want = acc[:out_feat * tile].copy()
    for o in range(out_feat):
        for i in range(in_feat):
            given_ = dict(p, In=In[i * plane:(i + 1) * plane],
                          Filter=Filter[(o * in_feat + i) * taps:][:taps],
                          Acc=want[o * tile:(o + 1) * tile])
            want[o * tile:(o + 1) * tile] = definition(*[given_[n] for n in names])
    return want


@st.composite
def feature_block_cases(draw):
    """Float32 tiles of features at column stride 1 or 2 (the register blocks of several
    output features): rows of 17 to 80 outputs, or planes of 1x1 to 31x31 flattened into
    vectors; any padding, row tiles (InRow0 > 0, Hreal below the rows), row strides 1 and 2;
    1-17 output features (not a multiple of the blocks' 4), 1-9 input features."""
    _, _, p, _, flags, seed = draw(cases())
    p = dict(p, Sx=1, Fx=draw(st.sampled_from([1, 3, 3, 2])), Fy=draw(st.sampled_from([1, 3, 3])))
    if draw(st.booleans()):  # rows
        Sx = draw(st.sampled_from([1, 1, 2]))
        W = draw(st.integers(17 * Sx, 80 * Sx))
        p = dict(p, W=W, Sx=Sx, OutRows=draw(st.integers(1, 3)), Hreal=draw(st.integers(1, 9)))
        p["PadL"] = draw(st.integers(0, p["Fx"]))
        p["Wo"] = draw(st.integers(17, (W - 1 + p["PadL"]) // Sx + 2))
    else:  # a plane flattened, whole or a tile of its rows
        W, pad = draw(st.integers(1, 31)), draw(st.integers(0, 1))
        rows = draw(st.integers(1, 9))
        p = dict(p, W=W, Wo=W, Sy=1, Dx=1, Dy=1, PadL=pad * (p["Fx"] // 2), PadT=pad,
                 OutRow0=draw(st.integers(0, 2)), OutRows=rows, InRow0=draw(st.integers(0, 2)),
                 InRows=rows + 2, Hreal=draw(st.integers(1, rows + 2)))
    return p, draw(st.sampled_from([1, 1, 8])), flags, seed, draw(st.integers(1, 9)), \
        draw(st.integers(1, 17))


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(feature_block_cases())
def test_float_feature_tile_blocks_of_output_features(case):
    """Several output features' accumulators in registers at once, each input vector loaded
    serving them all: every output feature is still the one-plane definition over its input
    features, bit for bit, with infinities and negative zeros among the inputs (infinity
    times a zero weight: NaN); the accumulators after the last plane untouched."""
    p, cores, flags, seed, in_feat, out_feat = case
    rng = np.random.default_rng(seed)
    plane, taps, tile = p["InRows"] * p["W"], p["Fx"] * p["Fy"], p["OutRows"] * p["Wo"]
    _, acc, _ = arguments("float32", "float32", dict(p, OutRows=p["OutRows"] * out_feat), seed)
    In = values(rng, "float32", in_feat * plane)
    In[rng.random(In.size) < 0.02] = np.float32(np.inf)
    Filter = values(rng, "float32", out_feat * in_feat * taps)
    want = features_definition(p, In, Filter, acc, in_feat, out_feat)
    kernel = convolution.layer_conv("float32", "float32", 8, planes=True)
    given_ = dict(p, In=In, Filter=Filter, Acc=acc, InFeat=in_feat, OutFeat=out_feat)
    before = acc.copy()
    planes_compiled("float32", "float32", cores, flags)(*[given_[n] for _, n in kernel.args])
    n = out_feat * tile
    assert np.array_equal(acc[:n].view(np.int32), want.view(np.int32)), (p, flags, in_feat,
                                                                         out_feat)
    assert np.array_equal(acc[n:].view(np.int32), before[n:].view(np.int32))


@pytest.mark.parametrize("flags", list(FLAGS))
@pytest.mark.parametrize("F, PadL", [(3, 1), (2, 0), (5, 2)])
@pytest.mark.parametrize("Wo", [7, 16, 17, 33, 40])
@pytest.mark.parametrize("out_feat", [1, 7])
def test_feature_blocks_at_column_stride_2(flags, F, PadL, Wo, out_feat):
    """A tile of features at column and row stride 2 (a strided stem: 3 input features),
    blocks of 4, 2 and 1 output features over 1 or 2 vectors of columns: each output
    feature is the one-plane definition over its input features, bit for bit; the
    accumulators after the tile untouched."""
    W = 2 * (Wo - 1) + F - 2 * PadL + Wo % 2
    p = dict(W=W, Fx=F, Fy=3, Sx=2, Sy=2, Dx=1, Dy=1, PadL=PadL, PadT=1, Hreal=9, InRow0=0,
             InRows=11, OutRow0=0, OutRows=3, Wo=Wo, Zin=0, Zw=0)
    in_feat, seed = 3, Wo * F + out_feat
    rng = np.random.default_rng(seed)
    plane, taps, tile = p["InRows"] * W, F * 3, p["OutRows"] * Wo
    _, acc, _ = arguments("float32", "float32", dict(p, OutRows=p["OutRows"] * out_feat), seed)
    In = values(rng, "float32", in_feat * plane)
    Filter = values(rng, "float32", out_feat * in_feat * taps)
    want = features_definition(p, In, Filter, acc, in_feat, out_feat)
    kernel = convolution.layer_conv("float32", "float32", 8, planes=True)
    given_ = dict(p, In=In, Filter=Filter, Acc=acc, InFeat=in_feat, OutFeat=out_feat)
    before = acc.copy()
    planes_compiled("float32", "float32", 1, flags)(*[given_[n] for _, n in kernel.args])
    n = out_feat * tile
    assert np.array_equal(acc[:n].view(np.int32), want.view(np.int32))
    assert np.array_equal(acc[n:].view(np.int32), before[n:].view(np.int32))
    assert not np.array_equal(acc[:n], before[:n])


@pytest.mark.parametrize("rows, cols", [(1, 1), (1, 2), (2, 1), (2, 2), (1, 3), (4, 1), (1, 4)])
@pytest.mark.parametrize("F, pad", [(3, 1), (1, 0), (2, 1), (3, 0)])
@pytest.mark.parametrize("in_feat, out_feat", [(3, 8), (16, 17), (33, 40)])
@pytest.mark.parametrize("types, zin, zw", [(("float32", "float32"), 0, 0),
                                            (("uint8", "int8"), 131, -5),
                                            (("int8", "int8"), -32512, 32512)])
def test_small_planes_take_16_features_a_vector(rows, cols, F, pad, in_feat, out_feat, types,
                                                zin, zw):
    """Planes of up to 4 outputs (a small image's last layers; float32 from 2 outputs) with 8
    output features or more: 16 features to a vector, the filters transposed 16 input
    features at a time (chunks of 16 and a rest; groups of 16 features and a rest): every
    output feature is the one-plane definition over its input features, float32 bit for
    bit with infinities among the inputs, integers exact at the ends of the zero points the
    16-bit products take; taps on padding add nothing; a tile of rows of a taller plane
    too."""
    in_dt, w_dt = types
    flt = in_dt == "float32"
    for in_row0, out_row0, hreal in ((0, 0, rows), (1, 1, rows + 2)):
        p = dict(W=cols, Wo=cols, Fx=F, Fy=F, Sx=1, Sy=1, Dx=1, Dy=1, PadL=pad, PadT=pad,
                 Hreal=hreal, InRow0=in_row0, InRows=rows + F - 1, OutRow0=out_row0,
                 OutRows=rows, Zin=zin, Zw=zw)
        seed = rows * 1000 + cols * 100 + F * 10 + in_feat + out_row0
        rng = np.random.default_rng(seed)
        plane, taps, tile = p["InRows"] * cols, F * F, rows * cols
        _, acc, _ = arguments(in_dt, w_dt, dict(p, OutRows=rows * out_feat), seed)
        In = values(rng, in_dt, in_feat * plane)
        if flt:
            In[rng.random(In.size) < 0.02] = np.float32(np.inf)
        Filter = values(rng, w_dt, out_feat * in_feat * taps)
        with np.errstate(invalid="ignore"):  # infinity times a zero weight: NaN
            want = features_definition(p, In, Filter, acc, in_feat, out_feat)
        kernel = convolution.layer_conv(in_dt, w_dt, 8, planes=True)
        given_ = dict(p, In=In, Filter=Filter, Acc=acc, InFeat=in_feat, OutFeat=out_feat)
        before = acc.copy()
        planes_compiled(in_dt, w_dt, 1, "native")(*[given_[n] for _, n in kernel.args])
        n = out_feat * tile
        assert np.array_equal(acc[:n].view(np.int32), want.view(np.int32)), (p, in_feat)
        assert np.array_equal(acc[n:].view(np.int32), before[n:].view(np.int32))
        assert not np.array_equal(acc[:n], before[:n])

@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(cases(), flat_cases()), st.integers(1, 4), st.integers(1, 17))
def test_a_feature_tile_is_the_one_plane_definition_over_its_features(case, in_feat, out_feat):
    """``KerParConvNpk``: output feature o adds input features 0, 1, ... in order, each one's
    taps as the one-plane definition adds them; output feature counts 1-9 (not a multiple of
    the 8 cores), every tap geometry of the one-plane test, and small planes (flattened into
    vectors); canaries after the last plane."""
    in_dt, w_dt, p, cores, flags, seed = case
    rng = np.random.default_rng(seed)
    plane, taps, tile = p["InRows"] * p["W"], p["Fx"] * p["Fy"], p["OutRows"] * p["Wo"]
    one, acc, _ = arguments(in_dt, w_dt, dict(p, OutRows=p["OutRows"] * out_feat), seed)
    In, Filter = values(rng, in_dt, in_feat * plane), values(rng, w_dt, out_feat * in_feat * taps)
    want = features_definition(p, In, Filter, acc, in_feat, out_feat)
    kernel = convolution.layer_conv(in_dt, w_dt, 8, planes=True)
    given_ = dict(p, In=In, Filter=Filter, Acc=acc, InFeat=in_feat, OutFeat=out_feat)
    args = [given_[n] for _, n in kernel.args]
    ref, before = acc.copy(), acc.copy()
    kernel.reference(*[ref if n == "Acc" else given_[n] for _, n in kernel.args], core_id=0,
                     core_count=cores)
    planes_compiled(in_dt, w_dt, cores, flags)(*args)
    n, bits = out_feat * tile, np.int32
    assert np.array_equal(acc[:n].view(bits), want.view(bits)), (p, flags, in_feat, out_feat)
    assert np.array_equal(ref[:n].view(bits), want.view(bits))
    assert np.array_equal(acc[n:].view(bits), before[n:].view(bits))  # canaries


@pytest.mark.slow
@pytest.mark.parametrize("flags", list(FLAGS))
@pytest.mark.parametrize("types", TYPES)
@pytest.mark.parametrize("size, f", [(7, 3), (14, 3), (5, 1), (9, 5), (28, 3), (31, 3),
                                     (40, 1), (37, 3)])
def test_same_planes_of_a_feature_tile(flags, types, size, f):
    """'Same' convolutions, 5 input and 3 output features, as a CNN's layers have them: small
    planes (7x7 to 31x31: flattened into vectors), wider ones (rows in blocks, 1x1 too): the
    one-plane definition over the features."""
    in_dt, w_dt = types
    pad = f // 2
    p = dict(W=size, Fx=f, Fy=f, Sx=1, Sy=1, Dx=1, Dy=1, PadL=pad, PadT=pad, Hreal=size,
             InRow0=0, InRows=size + 2 * pad, OutRow0=0, OutRows=size, Wo=size,
             Zin=0 if in_dt == "float32" else 5, Zw=0 if in_dt == "float32" else -3)
    in_feat, out_feat, rng = 5, 3, np.random.default_rng(size)
    plane, taps, tile = p["InRows"] * size, f * f, size * size
    _, acc, _ = arguments(in_dt, w_dt, dict(p, OutRows=size * out_feat), size)
    In, Filter = values(rng, in_dt, in_feat * plane), values(rng, w_dt, out_feat * in_feat * taps)
    want = features_definition(p, In, Filter, acc, in_feat, out_feat)
    kernel = convolution.layer_conv(in_dt, w_dt, 8, planes=True)
    given_ = dict(p, In=In, Filter=Filter, Acc=acc, InFeat=in_feat, OutFeat=out_feat)
    before = acc.copy()
    planes_compiled(in_dt, w_dt, 8, flags)(*[given_[n] for _, n in kernel.args])
    n = out_feat * tile
    assert np.array_equal(acc[:n].view(np.int32), want.view(np.int32))
    assert np.array_equal(acc[n:].view(np.int32), before[n:].view(np.int32))


# -- the integer feature tile's VNNI form (byte quads by vpdpbusd) ---------------------------

# The host's flags (the VNNI form where the host has AVX-512 VNNI and VBMI), the same without
# VNNI (the AVX-512 blocks), and the plain loops.
VNNI_FLAGS = dict(FLAGS, novnni=f"{toolchain.DEFAULT_CFLAGS} -mno-avx512vnni")


def extreme_values(rng, dt, n):
    """Integers of ``dt`` over its whole range, its two ends frequent."""
    lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
    v = rng.integers(lo, hi + 1, n)
    v[rng.random(n) < 0.25] = lo
    v[rng.random(n) < 0.25] = hi
    return v.astype(dt)


@st.composite
def vnni_cases(draw):
    """Integer feature tiles: int8/uint8 activations with zero points at the type's ends and
    between, int8 weights with Zw 0 (uint8 ones with Zw 128: both signed bytes, the VNNI form)
    or another Zw (a weight outside -128..127: the other loops); filters 1-16 wide, column
    strides and dilations 1 (some 2: the other loops), pads on every side, row tiles, planes
    as wide as their input."""
    in_dt = draw(st.sampled_from(["int8", "uint8"]))
    w_dt = draw(st.sampled_from(["int8", "int8", "uint8"]))
    lo, hi = np.iinfo(in_dt).min, np.iinfo(in_dt).max
    Fx = draw(st.sampled_from([1, 1, 2, 3, 3, 3, 4, 5, 7, 16]))
    Fy = draw(st.sampled_from([1, 1, 2, 3, 3, 5]))
    p = dict(W=draw(st.integers(1, 70)), Fx=Fx, Fy=Fy, Sx=draw(st.sampled_from([1, 1, 1, 2])),
             Sy=draw(st.integers(1, 2)), Dx=draw(st.sampled_from([1, 1, 1, 2])),
             Dy=draw(st.integers(1, 2)), PadL=draw(st.integers(0, Fx)),
             PadT=draw(st.integers(0, Fy)), Hreal=draw(st.integers(1, 10)),
             InRow0=draw(st.integers(0, 3)), InRows=draw(st.integers(1, 10)),
             OutRow0=draw(st.integers(0, 3)), OutRows=draw(st.integers(1, 6)),
             Zin=draw(st.sampled_from([lo, hi, (lo + hi + 1) // 2, lo + 3])),
             Zw=draw(st.sampled_from([0, 0, 0, 5] if w_dt == "int8" else [128, 128, 0, 127])))
    p["Wo"] = draw(st.integers(1, (p["W"] - 1 + p["PadL"]) // p["Sx"] + 2))
    if draw(st.booleans()):  # as wide as the input at row stride 1 (as CNNs have them)
        p.update(Wo=p["W"], Sy=1)
    return (in_dt, w_dt, p, draw(st.integers(1, 9)), draw(st.integers(1, 17)),
            draw(st.sampled_from([1, 8])), draw(st.sampled_from(list(VNNI_FLAGS))),
            draw(st.integers(0, 2**32 - 1)))


def run_feature_tile(in_dt, w_dt, p, in_feat, out_feat, cores, flags, seed):
    """The compiled feature tile on data at the types' ends, its accumulators between
    poisoned canaries: (the accumulators it wrote, the numpy reference's)."""
    rng = np.random.default_rng(seed)
    plane, taps, tile = p["InRows"] * p["W"], p["Fx"] * p["Fy"], p["OutRows"] * p["Wo"]
    n = out_feat * tile
    buf = np.full(n + 64, POISON["int32"], np.int32)
    acc = buf[29:29 + n]  # canaries on both sides
    acc[:] = rng.integers(-2**31, 2**31, n)
    In = extreme_values(rng, in_dt, in_feat * plane)
    Filter = extreme_values(rng, w_dt, out_feat * in_feat * taps)
    kernel = convolution.layer_conv(in_dt, w_dt, 8, planes=True)
    given_ = dict(p, In=In, Filter=Filter, Acc=acc, InFeat=in_feat, OutFeat=out_feat)
    ref, before, inputs = acc.copy(), buf.copy(), (In.copy(), Filter.copy())
    kernel.reference(*[ref if n == "Acc" else given_[n] for _, n in kernel.args], core_id=0,
                     core_count=cores)
    with cflags(VNNI_FLAGS[flags]):
        fn = host.c_function(kernel, cores)
    fn(*[given_[n] for _, n in kernel.args])
    assert np.array_equal(buf[:29], before[:29]) and np.array_equal(buf[29 + n:],
                                                                     before[29 + n:])
    assert np.array_equal(In, inputs[0]) and np.array_equal(Filter, inputs[1])
    return acc, ref


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(vnni_cases())
def test_integer_feature_tiles_are_exact_in_the_vnni_form_and_without_it(case):
    """Input features 1-9, output features 1-17 (not multiples of the 8-feature blocks),
    widths around the 32-pixel blocks: the reference's wrapping int32 sums exactly, with
    VNNI, with AVX-512 only and with the plain loops; canaries on both sides kept."""
    acc, ref = run_feature_tile(*case)
    assert np.array_equal(acc, ref), case


@pytest.mark.parametrize("flags", list(VNNI_FLAGS))
@pytest.mark.parametrize("in_dt, zin, zw", [("int8", -128, 0), ("int8", 127, 0),
                                            ("uint8", 0, 0), ("uint8", 255, 0),
                                            ("int8", 0, 1)])
@pytest.mark.parametrize("W, InRow0", [(37, 2), (14, 2), (7, 0)])
def test_a_same_3x3_row_tile_at_the_ends_of_the_zero_points(flags, in_dt, zin, zw, W, InRow0):
    """A 'same' 3x3 feature tile of rows InRow0 .. InRow0+3 of a 9-row plane (the filter's
    bottom row on the tile's last line; at InRow0 0 its top row on padding), 11 output features
    (a block of 8, then 2 and 1), 37 columns (a 32-pixel block and a 16-pixel one) or 14 and
    7 (the outputs flattened: 56 and 28 of them in 32- and 16-output blocks); Zw 1 takes the
    other loops (a weight -128 - 1 is no signed byte)."""
    p = dict(W=W, Fx=3, Fy=3, Sx=1, Sy=1, Dx=1, Dy=1, PadL=1, PadT=1, Hreal=9, InRow0=InRow0,
             InRows=6, OutRow0=InRow0, OutRows=4, Wo=W, Zin=zin, Zw=zw)
    acc, ref = run_feature_tile(in_dt, "int8", p, 24, 11, 1, flags, 7)
    assert np.array_equal(acc, ref)
    assert len(np.unique(acc)) > 100


@pytest.mark.parametrize("flags", list(VNNI_FLAGS))
@pytest.mark.parametrize("in_dt, zin", [("int8", -128), ("int8", 127), ("uint8", 255)])
@pytest.mark.parametrize("W, PadL", [(40, 0), (13, 0), (37, 2)])
def test_1x1_feature_tiles_take_input_features_four_at_a_time(flags, in_dt, zin, W, PadL):
    """1x1 filters (a quad holds 4 input features' bytes of a pixel): 1, 3, 5, 8, 9 and 27 input
    features (a group of 4 cut short), rows of 40 and 37 columns (a 32- and a 16-pixel block,
    padding at the left) and 13-wide planes (flattened at 27 input features), rows 1-4 of a
    tile."""
    p = dict(W=W, Fx=1, Fy=1, Sx=1, Sy=1, Dx=1, Dy=1, PadL=PadL, PadT=0, Hreal=W, InRow0=1,
             InRows=5, OutRow0=1, OutRows=4, Wo=W, Zin=zin, Zw=0)
    for in_feat in (1, 3, 5, 8, 9, 27):
        acc, ref = run_feature_tile(in_dt, "int8", p, in_feat, 11, 1, flags, in_feat)
        assert np.array_equal(acc, ref), in_feat


@pytest.mark.parametrize("flags", list(VNNI_FLAGS))
@pytest.mark.parametrize("in_dt, zin", [("int8", -128), ("uint8", 255)])
@pytest.mark.parametrize("W, F", [(37, 3), (70, 3), (9, 1), (40, 5)])
def test_a_row_at_column_stride_2(flags, in_dt, zin, W, F):
    """Column (and row) stride 2, 'same' padding: lane t takes the bytes at column 2t (in
    blocks of 16 outputs: 19, 35, 5 and 20 of them), a 1x1 filter one tap a quad."""
    Wo = (W + 2 * (F // 2) - F) // 2 + 1
    p = dict(W=W, Fx=F, Fy=F, Sx=2, Sy=2, Dx=1, Dy=1, PadL=F // 2, PadT=F // 2, Hreal=9,
             InRow0=0, InRows=9, OutRow0=0, OutRows=4, Wo=Wo, Zin=zin, Zw=0)
    acc, ref = run_feature_tile(in_dt, "int8", p, 6, 11, 1, flags, W)
    assert np.array_equal(acc, ref)


@pytest.mark.slow
@pytest.mark.parametrize("Fx, Fy, in_feat", [(16, 16, 17), (13, 11, 30)])
def test_input_features_beyond_one_packed_table_come_in_chunks(Fx, Fy, in_feat):
    """Filters whose quads for every input feature outnumber one packed table (1024 quads:
    16 input features of a 16x16 filter, 23 of a 13x11 one): the input features in chunks,
    each chunk's sums added to the accumulators the last one left."""
    p = dict(W=40, Fx=Fx, Fy=Fy, Sx=1, Sy=1, Dx=1, Dy=1, PadL=Fx // 2, PadT=Fy // 2, Hreal=4,
             InRow0=0, InRows=4 + Fy // 2 * 2, OutRow0=0, OutRows=4, Wo=40, Zin=-7, Zw=0)
    acc, ref = run_feature_tile("int8", "int8", p, in_feat, 3, 1, "native", 3)
    assert np.array_equal(acc, ref)


def test_the_native_flags_take_the_vnni_form_where_the_host_has_it():
    """The VNNI form is compiled in exactly when the compiler targets AVX-512 with VNNI and
    VBMI."""
    from npukit.tiler.basic_kernels import conv_int

    src = (f"{common.AVX512_HELPERS}\n{conv_int.VNNI_HELPERS}\n"
           f"int npk_probe(void) {{ return NPK_VNNI + 0; }}")
    with cflags(VNNI_FLAGS["novnni"]):
        with pytest.raises(Exception, match="NPK_VNNI"):
            toolchain.function(src, "npk_probe", 0)
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    if all(f in flags for f in ("avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                                "avx512_vbmi")):
        toolchain.function(src, "npk_probe", 0)  # compiles: the form is in


@pytest.mark.parametrize("separate", [True, False])
def test_a_call_picks_the_copy_of_its_shape_and_passes_the_rest_as_given(separate):
    """``common.c_pick_copy``: the first shape whose values the arguments have runs with
    those constants (as a separate copy, ``common.c_copies``, or inlined), any other call as
    it is; an argument given as an expression is passed as that expression. The C function
    packs what ``Fn`` received into one number, checked against the same packing in Python."""
    import ctypes

    params = (("int", "Fx"), ("int", "Sx"), ("int", "P"))
    shapes = (("one", dict(Fx=1, Sx=1)), ("three", dict(Fx=3, Sx=2)))
    source = f"""\
#define NPK_NOINLINE __attribute__((noinline))
#define NPK_ALWAYS_INLINE __attribute__((always_inline))
static inline NPK_ALWAYS_INLINE int Fn(int Fx, int Sx, int P)
{{
    return Fx * 10000 + Sx * 100 + P;
}}
{common.c_copies("Fn", params, shapes, "int") if separate else ""}
int Pick(int Fx, int Sx, int P)
{{
{common.c_pick_copy("Fn", params, shapes, "    ", dict(P="P + 7"), "int", separate)}
}}"""
    pick = ctypes.CDLL(str(toolchain.build(source))).Pick
    pick.restype = ctypes.c_int
    pick.argtypes = [ctypes.c_int] * 3
    for fx, sx, p in [(1, 1, 5), (3, 2, 4), (3, 1, 9), (1, 2, 3), (5, 5, 1)]:
        assert pick(fx, sx, p) == fx * 10000 + sx * 100 + p + 7
    assert ("Fn_three(" in source) == separate
