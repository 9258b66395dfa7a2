"""LUT instructions in kernels: ``s.act.lookup`` and ``s.act.linear_approx`` on the simulator
equal ``npukit.lut``'s semantics (and ``Design.evaluate``) bit for bit; the table is program
data (a constant buffer holding its memory image); seed 004's SiLU stays within the error
its table spacing and float16 rounding allow; misuse fails at build time with numbers."""

from __future__ import annotations

import math
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import npukit as nk
from npukit import arith, ir
from npukit import kernels as K
from npukit.easy import PData
from npukit.lut import Lut, design, linear_approx, parallel_lookup
from npukit.machine import LutBanks
from npukit.passes import check

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
BF16 = np.dtype(ml_dtypes.bfloat16)
TORQ = nk.target("torq")
CANARY = {np.dtype("int32"): 0x5A5A5A5A, np.dtype("int64"): 0x5A5A5A5A5A5A5A5A,
          np.dtype("float32"): 1234.5, np.dtype("float16"): 1234.0,
          np.dtype("int16"): 0x5A5A, np.dtype("uint16"): 0xA5A5}


def _dt(name):
    return BF16 if name == "bfloat16" else np.dtype(name)


# -- kernels and harness ----------------------------------------------------------------------

@nk.kernel
def lookup_kernel(s, input, output, *, lut, vector="alu", step_bits=None, bias=None,
                  oor=None):
    """n-d input, innermost dim vectorized by the ALU (or Act) width; the Act looks up one
    Act-width sub-vector at a time; results are appended (junk lanes dropped)."""
    width = s.alu.i_width(input.dtype) if vector == "alu" else s.act.width(input.dtype)
    x = input.vectorize(width)
    for i in s.iterate(x.dims(0, -1)):
        p = s.alu.accumulate(s.iram.load(x[i]))
        for av in s.iterate(p.dim(PData.Vectors)):
            s.append(output, s.act.lookup(p[av], lut, step_bits, bias, oor))


@nk.kernel
def linear_kernel(s, input, output, *, lut, vector="alu", step_bits=None, bias=None,
                  shift_offset=None, clamp=None, scale_exp=None, to_vector=None):
    width = s.alu.i_width(input.dtype) if vector == "alu" else s.act.width(input.dtype)
    x = input.vectorize(width)
    for i in s.iterate(x.dims(0, -1)):
        p = s.alu.accumulate(s.iram.load(x[i]))
        for av in s.iterate(p.dim(PData.Vectors)):
            s.append(output, s.act.linear_approx(p[av], lut, step_bits, bias, shift_offset,
                                                 clamp=clamp, scale_exp=scale_exp,
                                                 to_vector=to_vector))


def strided_output(shape, dtype, stride, gap=2, pad=3):
    """A view with inner stride ``stride`` (and ``gap`` elements between rows) inside a
    canary-filled buffer: (big, view, spec, mask of the view's elements in big)."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    dt = np.dtype(dtype)
    strides = (stride,) if len(shape) == 1 else ((shape[1] - 1) * stride + 1 + gap, stride)
    idx = pad + sum(np.arange(n).reshape((-1,) + (1,) * (len(shape) - 1 - k)) * st
                    for k, (n, st) in enumerate(zip(shape, strides)))
    big = np.full(int(idx.max()) + 1 + pad, CANARY[dt], dt)
    view = np.lib.stride_tricks.as_strided(big[pad:], shape, tuple(st * dt.itemsize
                                                                   for st in strides))
    inside = np.zeros(big.size, bool)
    inside[idx.reshape(-1)] = True
    return big, view, nk.spec(shape, dt, strides), inside


def run_table(kern, x, out_dtype, stride, target=TORQ, **attrs):
    """Build ``kern`` for x, run it on the simulator into a strided canary output that must
    stay untouched outside the view; returns (program, result, output view)."""
    big, out, out_spec, inside = strided_output(x.shape, out_dtype, stride)
    prog = nk.build(kern, target=target, input=nk.spec(x.shape, x.dtype), output=out_spec,
                    **attrs)
    res = prog.run(input=x, output=out)
    assert (big[~inside] == CANARY[big.dtype]).all()
    return prog, res, out


def ints(rng, n, dtype):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, int(info.max) + 1, n).astype(dtype)
    x.flat[0] = info.min        # never all zero, always both extremes
    x.flat[-1] = info.max
    return x


def random_values(rng, n, dtype):
    dt = _dt(dtype)
    if dt.kind in "iu":
        return ints(rng, n, dt)
    v = rng.normal(size=n) * 50
    v[0] = 1.5
    return v.astype(dt)


# -- lookup -------------------------------------------------------------------------------------

@SETTINGS
@given(n=st.integers(1, 200), data=st.sampled_from(["int8", "uint8", "int16"]),
       values=st.sampled_from(["int8", "uint8", "int16", "uint16", "int32", "float16",
                               "bfloat16", "float32"]),
       size=st.integers(1, 80), step_bits=st.integers(0, 6), bias_log=st.integers(-1, 7),
       oor=st.sampled_from(["saturate", "truncate"]), vector=st.sampled_from(["alu", "act"]),
       stride=st.integers(1, 3), seed=st.integers(0, 2**31))
def test_lookup_equals_parallel_lookup(n, data, values, size, step_bits, bias_log, oor,
                                       vector, stride, seed):
    rng = np.random.default_rng(seed)
    if oor == "truncate":
        size = 1 << (size.bit_length() - 1)             # truncate keeps low bits
    bias = 0 if bias_log < 0 else 1 << bias_log
    lut = Lut(random_values(rng, size, values))
    x = ints(rng, n, data)
    out_dt = "float32" if _dt(values).kind == "f" or values == "bfloat16" else "int32"
    _, res, out = run_table(lookup_kernel, x, out_dt, stride, lut=lut, vector=vector,
                            step_bits=step_bits, bias=bias, oor=oor)
    want = parallel_lookup(lut, x.astype(np.int32), step_bits, bias, oor)
    assert out.tobytes() == want.astype(out_dt).tobytes()
    # Also the library on the data's own type (the partial holds the same value).
    if data != "uint8" or bias == 0:
        assert np.array_equal(out, parallel_lookup(lut, x, step_bits, bias, oor).astype(out_dt))
    assert res.cycles > 0


def test_lookup_by_hand():
    t = Lut(np.array([10, 11, 12, 13], np.int16))
    x = np.array([-3, 0, 1, 7, -128, 127], np.int8)
    _, _, out = run_table(lookup_kernel, x, "int32", 1, lut=t, step_bits=1, bias=2)
    assert out.tolist() == [10, 12, 12, 13, 10, 13]
    _, _, out = run_table(lookup_kernel, x, "int32", 1, lut=t, step_bits=1, bias=2,
                             oor="truncate")
    assert out.tolist() == [10, 12, 12, 11, 12, 11]      # -128 >> 1 = -64: (-64 + 2) mod 4


@pytest.mark.slow
@SETTINGS
@given(rows=st.integers(1, 5), cols=st.integers(1, 40), linear=st.booleans(),
       stride=st.integers(1, 2), seed=st.integers(0, 2**31))
def test_rows_with_junk_lanes_inside(rows, cols, linear, stride, seed):
    """Every row ends in a partial vector: its junk lanes sit between rows of the output,
    so only the valid lanes (propagated from the load to the Act result) may be appended."""
    rng = np.random.default_rng(seed)
    if linear:
        x = (rng.normal(size=(rows, cols)) * 3).astype(np.float16)
        lut = Lut(rng.normal(size=40).astype(np.float32), rng.normal(size=40).astype(BF16))
        _, _, out = run_table(linear_kernel, x, "float32", stride, lut=lut, step_bits=0,
                              bias=20, scale_exp=2)
        u = np.ldexp(x.astype(np.float32), 2).astype(np.float32)
        want = linear_approx(lut, u, 0, 20, extended=True)
    else:
        x = ints(rng, (rows, cols), "int16")
        lut = Lut(rng.integers(-1000, 1000, 300).astype(np.int32))
        _, _, out = run_table(lookup_kernel, x, "int32", stride, lut=lut, step_bits=8,
                              bias=128)
        want = parallel_lookup(lut, x, 8, 128)
    assert out.tobytes() == np.ascontiguousarray(want).tobytes()


# -- linear_approx: integer rows -----------------------------------------------------------------

INT_ROWS = [("int8", "int8", "int32"), ("int16", "int16", "int64"), ("int16", "int32", "int64")]


@SETTINGS
@given(n=st.integers(1, 150), row=st.sampled_from(INT_ROWS), size=st.integers(1, 60),
       step=st.integers(0, 20), bias=st.integers(-40, 40), shift=st.integers(0, 60),
       clamp=st.booleans(), vector=st.sampled_from(["alu", "act"]), stride=st.integers(1, 3),
       seed=st.integers(0, 2**31))
def test_linear_approx_integer_equals_library(n, row, size, step, bias, shift, clamp, vector,
                                               stride, seed):
    rng = np.random.default_rng(seed)
    data, values, acc = row
    lut = Lut(ints(rng, size, values), ints(rng, size, values))
    bits = np.dtype(data).itemsize * 8
    min_step = {"int8": 2, "int16": 3 if values == "int16" else 4}[data]
    step_bits = min_step + step % (bits - min_step)
    most = np.dtype(acc).itemsize * 8 - np.dtype(values).itemsize * 8 - 1
    shift_offset = shift % (most + 1)
    x = ints(rng, n, data)
    lo, hi = (int(v) for v in np.sort(rng.integers(-200, 200, 2))) if clamp else (None, None)
    _, _, out = run_table(linear_kernel, x, acc, stride, lut=lut, vector=vector,
                          step_bits=step_bits, bias=bias, shift_offset=shift_offset,
                          clamp=(lo, hi) if clamp else None)
    info = np.iinfo(data)       # clamp, then saturate to the row's input type
    xc = x if not clamp else np.clip(np.clip(x.astype(np.int64), lo, hi), info.min,
                                     info.max).astype(data)
    want = linear_approx(lut, xc, step_bits, bias, shift_offset)
    assert want.dtype == np.dtype(acc)
    assert out.tobytes() == want.tobytes()


def test_linear_approx_integer_by_hand():
    # index = (x >> 2) + 1, remainder = x & 3, out = slope * rem + (offset << 3)
    lut = Lut(np.array([-10, 20, 30], np.int8), np.array([5, -6, 7], np.int8))
    x = np.array([-5, -4, -1, 0, 3, 4, 127, -128], np.int8)
    _, _, out = run_table(linear_kernel, x, "int32", 2, lut=lut, step_bits=2, bias=1,
                             shift_offset=3)
    assert out.tolist() == [5 * 3 - 80, -80, 5 * 3 - 80, 160, -6 * 3 + 160, 240,
                            7 * 3 + 240, -80]


# -- linear_approx: float tables ----------------------------------------------------------------

def float_inputs(rng, n, dtype, step_bits, bias, size, scale_exp):
    span = float((size + 4) << step_bits) / 2.0**scale_exp
    base = -bias * float(1 << step_bits) / 2.0**scale_exp
    v = base + rng.uniform(-0.2, 1.0, n) * span
    v[0] = base + 0.5 * 2.0**-scale_exp
    if n > 3:
        v[1], v[2] = 1e4, -1e4                          # far outside: saturated index
    return v.astype(_dt(dtype))


def ref_float(lut, x32, step_bits, bias):
    """Scalar reading of the float formula on float32 input: floor, shift, clamp; the
    product rounds to float32, then the sum."""
    out = []
    for v in x32.tolist():
        fl = min(max(math.floor(v), -(2**31)), 2**31 - 1)
        i = min(max((fl >> step_bits) + bias, 0), lut.size - 1)
        prod = np.float32(np.float32(float(lut.slopes[i])) * np.float32(v))
        out.append(np.float32(prod + lut.offsets[i]))
    return np.array(out, np.float32)


@pytest.mark.slow
@SETTINGS
@given(n=st.integers(1, 120), data=st.sampled_from(["bfloat16", "float16", "float32"]),
       size=st.integers(1, 60), step_bits=st.integers(0, 4), bias=st.integers(-20, 60),
       scale_exp=st.integers(0, 5), clamp=st.booleans(), vector=st.sampled_from(["alu", "act"]),
       stride=st.integers(1, 3), seed=st.integers(0, 2**31))
def test_linear_approx_float_equals_library(n, data, size, step_bits, bias, scale_exp, clamp,
                                            vector, stride, seed):
    rng = np.random.default_rng(seed)
    lut = Lut((rng.normal(size=size) * 4).astype(np.float32),
              rng.normal(size=size).astype(BF16))
    x = float_inputs(rng, n, data, step_bits, bias, size, scale_exp)
    bounds = np.sort(rng.normal(size=2) * 8).astype(BF16).astype(float)  # bfloat16 values
    lo, hi = (float(v) for v in bounds) if clamp else (None, None)
    _, _, out = run_table(linear_kernel, x, "float32", stride, lut=lut, vector=vector,
                          step_bits=step_bits, bias=bias, scale_exp=scale_exp,
                          clamp=(lo, hi) if clamp else None)
    u = x.astype(np.float32)
    if clamp:
        u = np.clip(u, np.float32(lo), np.float32(hi))
    u = np.ldexp(u, scale_exp).astype(np.float32)
    want = linear_approx(lut, u, step_bits, bias, extended=True)
    assert out.tobytes() == want.tobytes()
    assert out.tobytes() == ref_float(lut, u, step_bits, bias).tobytes()
    if data == "bfloat16":      # seed 002's own bfloat16 row gives the same bits
        assert out.tobytes() == linear_approx(lut, u.astype(BF16), step_bits, bias).tobytes()


# -- designs ---------------------------------------------------------------------------------------

DESIGNS = [
    ("sigmoid", -8, 8, 64, {"kind": "direct", "in_dtype": "int8", "out_dtype": "int16"}),
    ("tanh", -4, 4, 256, {"kind": "direct", "in_dtype": "int16", "out_dtype": "bfloat16"}),
    ("reciprocal", 1, 2, 64, {"kind": "direct", "in_dtype": "uint8", "out_dtype": "float16"}),
    ("sigmoid", -8, 8, 33, {"kind": "linear", "in_dtype": "int8", "out_dtype": "int8"}),
    ("gelu_tanh", -4, 4, 64, {"kind": "linear", "in_dtype": "int16", "out_dtype": "int16",
                                  "method": "minimax"}),
    ("silu", -8, 8, 128, {"kind": "linear", "in_dtype": "int16", "out_dtype": "int32"}),
    ("sigmoid", -8, 8, 33, {"kind": "linear"}),
    ("tanh", -3, 3, 200, {"kind": "linear", "method": "minimax"}),
]


@pytest.mark.parametrize("fn, lo, hi, entries, kw", DESIGNS,
                         ids=[f"{d[0]}-{d[4]['kind']}-{d[4].get('in_dtype', 'bf16')}"
                              for d in DESIGNS])
def test_kernel_computes_design_evaluate(fn, lo, hi, entries, kw):
    d = design(fn, lo, hi, entries, **kw)
    reals = d.sweep(301)                                 # the range and an eighth beyond
    q = d.quantize(reals)
    assert len(np.unique(q)) > 50
    if d.kind == "direct":
        acc = "float32" if d.out_frac_bits is None else "int32"
        _, _, out = run_table(lookup_kernel, q, acc, 2, lut=d)
    else:
        acc = "float32" if d.out_frac_bits is None else \
            str(linear_approx(d.lut, q[:1], d.step_bits, d.bias, d.shift_offset).dtype)
        _, _, out = run_table(linear_kernel, q, acc, 2, lut=d)
    want = d.evaluate(reals)
    if d.out_frac_bits is not None:
        want = np.ldexp(want, d.out_frac_bits)
    assert np.array_equal(out.astype(np.float64), want)


# -- the table is program data ---------------------------------------------------------------

def _table_buffer(prog):
    consts = [b for b in prog.buffers if b.role == "const"]
    assert len(consts) == 1
    return consts[0]


@pytest.mark.parametrize("banks", [1, 2, 4])
@pytest.mark.parametrize("linear", [False, True])
def test_the_program_carries_the_table_image(banks, linear):
    rng = np.random.default_rng(banks)
    target = replace(TORQ, lut=LutBanks(banks, 128, "LUT"))
    if linear:
        lut = Lut(rng.integers(-100, 100, 37).astype(np.int16),
                  rng.integers(-100, 100, 37).astype(np.int16))
        kern, attrs, op = linear_kernel, {"step_bits": 3}, "linear_approx"
    else:
        lut = Lut(rng.integers(-100, 100, 37).astype(np.int8))
        kern, attrs, op = lookup_kernel, {}, "lookup"
    x = ints(rng, 50, "int16")
    prog, res, _out = run_table(kern, x, "int64" if linear else "int32", 1, target, lut=lut,
                                  **attrs)
    buf = _table_buffer(prog)
    image = lut.layout(banks, 128)
    image = np.concatenate(image) if banks == 4 else image
    assert (buf.memory, buf.role, buf.data) == ("LUT", "const", image.tobytes())
    assert buf.nbytes == image.nbytes and buf.dtype == np.dtype("int16")
    (st,) = [s for s, _ in prog.walk() if isinstance(s, ir.Compute) and s.unit == "act"]
    assert st.op == op and st.srcs[1].buffer == buf
    a = dict(st.attrs)
    assert (a["entries"], a["parallel"], a["bank_bits"]) == (37, banks, 128)
    assert arith.lut_from_image(buf.values(), a) == lut
    assert res.report.peak["LUT"] == image.nbytes


def test_the_simulator_reads_the_table_from_the_program():
    """Swap the constant's bytes for another table's image: the result follows the data."""
    rng = np.random.default_rng(3)
    a, b = (Lut(rng.integers(-30000, 30000, 64).astype(np.int16)) for _ in range(2))
    x = ints(rng, 100, "int8")
    prog, _, out = run_table(lookup_kernel, x, "int32", 1, lut=a, bias=32)
    assert np.array_equal(out, parallel_lookup(a, x, 0, 32))
    old = _table_buffer(prog)
    new = replace(old, data=b.layout(TORQ.lut.banks, TORQ.lut.bank_bits).tobytes())
    body = tuple(_swap(st, new) for st in prog.body)
    prog2 = replace(prog, buffers=tuple(new if x.name == new.name else x for x in prog.buffers),
                    body=body)
    out2 = np.zeros(100, np.int32)
    prog2.run(input=x, output=out2)
    assert np.array_equal(out2, parallel_lookup(b, x, 0, 32))
    assert not np.array_equal(out2, out)


def _swap(st, new):
    if isinstance(st, ir.Loop):
        return replace(st, body=tuple(_swap(x, new) for x in st.body))
    if isinstance(st, ir.Compute):
        return replace(st, srcs=tuple(replace(v, buffer=new) if v.buffer.name == new.name
                                      else v for v in st.srcs))
    return st


def test_constants_are_read_only():
    prog = nk.build(lookup_kernel, input=nk.spec((20,), "int8"), output=nk.spec((20,), "int32"),
                    lut=Lut(np.arange(8, dtype=np.int16)))
    buf = _table_buffer(prog)
    (st,) = [s for s, _ in prog.walk() if isinstance(s, ir.Compute) and s.unit == "act"]
    bad = replace(st, dst=ir.View(buf, nk.Layout((16,), buf.dtype)))
    with pytest.raises(nk.KernelError, match="writes constant 'lut.table'"):
        check(replace(prog, body=(bad,)))
    with pytest.raises(ValueError, match="data holds 3 B"):
        ir.Buffer("t", "LUT", np.dtype("int16"), 2, role="const", data=b"abc")
    with pytest.raises(ValueError, match="const buffer needs data"):
        ir.Buffer("t", "LUT", np.dtype("int16"), 2, role="const")


def test_act_timing_uses_the_pair_width_and_lanes_propagate():
    x = ints(np.random.default_rng(4), 70, "int8")     # 2 ALU vectors of 64: 8 Act vectors
    _, res, out = run_table(lookup_kernel, x, "int32", 1,
                            lut=Lut(np.arange(-128, 128, dtype=np.int16) * 5), bias=128)
    act = TORQ.units["act"]
    per = act.latency + math.ceil(16 / act.width("int8"))
    assert res.report.busy["act"] == 8 * per
    assert np.array_equal(out, x.astype(np.int32) * 5)     # the 58 junk lanes never land


# -- seed 004's SiLU ------------------------------------------------------------------------------

def silu64(x):
    x = np.asarray(x, np.float64)
    with np.errstate(over="ignore"):
        return x / (1 + np.exp(-x))


def half_ulp_f16(v):
    """Half a float16 ulp at magnitude ``v`` (subnormals: 2**-25)."""
    e = np.floor(np.log2(np.maximum(np.abs(v), 2.0**-14)))
    return np.ldexp(1.0, (e - 11).astype(int))


def silu_reading(x):
    """numpy's reading of the SiLU kernel: clamp below, scale, linear_approx, float16."""
    lut, p = K.silu_table()
    u = np.ldexp(np.maximum(x.astype(np.float32), np.float32(p["clamp"][0])), p["scale_exp"])
    return linear_approx(lut, u.astype(np.float32), p["step_bits"], p["bias"],
                         extended=True).astype(np.float16)


def silu_error_bound():
    """The interpolation error E of the float32 result (before the float16 store), derived:

    - chords over cells of width h = 1/16 err at most h**2/8 max|silu''| (max|silu''| = 1/2,
      at 0; checked numerically here);
    - the slope is rounded to bfloat16 (nearest: half an ulp, at most 2**-8 relative) and the
      line pivots at the cell's start, so it moves by at most 2**-8 h max|silu'| inside it;
    - float32: the offset (|o| < 32) and the sum (|y| < 16) round, < 2**-20 + 2**-21.
    """
    t = np.linspace(-10, 10, 400001)
    s = 1 / (1 + np.exp(-t))
    d1 = np.abs(s * (1 + t * (1 - s))).max()
    d2 = np.abs(s * (1 - s) * (2 + t - 2 * t * s)).max()
    assert abs(d2 - 0.5) < 1e-9 and 1.09 < d1 < 1.1
    h = 1 / 16
    return h * h / 8 * d2 + 2.0**-8 * h * d1 + 2.0**-20 + 2.0**-21


def test_silu_every_float16_input():
    every = np.arange(0x10000, dtype=np.uint32).astype(np.uint16).view(np.float16)
    x = every[np.isfinite(every)]
    out = np.zeros_like(x)
    runs = K.silu_fp16_on_cores(x, out)
    assert [r[1] for r in runs] == [(0, 31744), (31744, 63488)]
    assert np.array_equal(out, silu_reading(x))                 # bit for bit
    xf = x.astype(np.float64)
    ref = silu64(xf)
    err = np.abs(out.astype(np.float64) - ref)
    big_e = silu_error_bound()
    inside = np.abs(xf) <= 10
    # Pointwise: the float32 result is within E of silu, the store adds half a float16 ulp.
    assert (err[inside] <= half_ulp_f16(np.abs(ref[inside]) + big_e) + big_e).all()
    # Below the range: the value at -10 (the seed's clamp); silu(-10) is within 4.6e-4 of 0.
    below = xf < -10
    assert (out[below] == out[xf == -10][0]).all()
    assert abs(float(out[xf == -10][0]) - silu64(-10.0)) <= half_ulp_f16(4.6e-4) + big_e
    # From 10 up: x itself (the seed's mask), within 10 sigma(-10) < 4.6e-4 of silu.
    above = xf >= 10
    assert np.array_equal(out[above], x[above])
    # Everywhere: half a float16 ulp below 16 (2**-8) plus E.
    assert err.max() <= 2.0**-8 + big_e
    assert err.max() > 2.0**-10                       # float16 rounding does show


def test_silu_table_follows_seed_004():
    lut, p = K.silu_table()
    assert lut.size == 512 and p == {"step_bits": 0, "bias": 160, "clamp": (-10.0, None),
                                         "scale_exp": 4}
    slopes = lut.slopes.astype(np.float64)
    assert (slopes[320:] == 2.0**-4).all() and (lut.offsets[320:] == 0).all()
    # Entry c is the chord of cell [(c - 160) / 16, (c - 159) / 16]: it meets silu at both ends.
    c = np.arange(320)
    u0 = (c - 160).astype(np.float64)
    left = slopes[:320] * u0 + lut.offsets[:320]
    right = slopes[:320] * (u0 + 1) + lut.offsets[:320]
    assert np.abs(left - silu64(u0 / 16)).max() < 1e-5
    # The right end misses by the bfloat16 slope's rounding: 2**-8 h max|silu'| at most.
    assert np.abs(right - silu64((u0 + 1) / 16)).max() < 2.0**-8 / 16 * 1.1 + 1e-5


@SETTINGS
@given(n=st.integers(1, 300), stride=st.integers(1, 3), seed=st.integers(0, 2**31))
@pytest.mark.slow
def test_silu_any_length_over_cores(n, stride, seed):
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=n) * 6).astype(np.float16)
    x[0] = 11.5
    big, out, _, inside = strided_output(n, "float16", stride)
    runs = K.silu_fp16_on_cores(x, out)
    per = -(-n // TORQ.cores)
    assert [r[1] for r in runs] == [(c * per, min(n, (c + 1) * per))
                                    for c in range(TORQ.cores) if c * per < n]
    assert np.array_equal(out, silu_reading(x))
    assert (big[~inside] == CANARY[big.dtype]).all()
    for _, (lo, hi), _prog, res in runs:                # Act: 3 cycles per 8 lanes
        vectors = -(-(hi - lo) // 16) * 2
        assert res.report.busy["act"] == vectors * (TORQ.units["act"].latency + 1)


def test_demo_section_runs(capsys):
    from npukit.demo import silu

    silu()
    out = capsys.readouterr().out
    assert "SiLU" in out and "match numpy: True" in out


# -- misuse ------------------------------------------------------------------------------------

def build_err(kern, data="int8", out="int32", n=40, target=TORQ, **attrs):
    return nk.build(kern, target=target, input=nk.spec((n,), data),
                    output=nk.spec((n,), out), **attrs)


LIN16 = Lut(np.ones(8, np.int16), np.ones(8, np.int16))
LIN8 = Lut(np.ones(8, np.int8), np.ones(8, np.int8))
FLT = Lut(np.ones(8, np.float32), np.ones(8, BF16))


@pytest.mark.parametrize("kern, data, attrs, error, words", [
    (linear_kernel, "float32", {"lut": Lut(np.ones(1025, np.float32), np.ones(1025, BF16)),
                                    "step_bits": 0},
     nk.CapacityError, ["LUT holds 16384 B", "1025 entries", "16416 B"]),
    (lookup_kernel, "float16", {"lut": Lut(np.arange(8, dtype=np.int16))},
     nk.LutError, ["integer partials", "float16 data", "float32 partials"]),
    (linear_kernel, "int16", {"lut": LIN8, "step_bits": 2},
     nk.LutError, ["input type is int8 (-128..127)", "int16 data"]),
    (linear_kernel, "int8", {"lut": LIN8, "step_bits": 1},
     nk.LutError, ["step_bits=1", "[2, 8)", "minimum step_bits of the AIE API's table is 2"]),
    (linear_kernel, "int16", {"lut": LIN16, "step_bits": 3, "shift_offset": 48},
     nk.LutError, ["shift_offset=48", "[0, 47]"]),
    (linear_kernel, "int16", {"lut": LIN16}, nk.LutError, ["step_bits is required"]),
    (linear_kernel, "int8", {"lut": FLT, "step_bits": 0},
     nk.LutError, ["int32 partials", "int8 data", "int8 offsets", "float32 offsets"]),
    (linear_kernel, "float16", {"lut": LIN16, "step_bits": 3},
     nk.LutError, ["float32 partials", "float16 data", "needs a table of float32 offsets",
                   "int16 offsets"]),
    (linear_kernel, "int16", {"lut": LIN16, "step_bits": 3, "scale_exp": 2},
     nk.LutError, ["scale_exp=2", "float inputs only"]),
    (linear_kernel, "float16", {"lut": FLT, "step_bits": 0, "scale_exp": 200},
     nk.LutError, ["scale_exp=200", "[-126, 126]"]),
    (linear_kernel, "int16", {"lut": LIN16, "step_bits": 3, "clamp": (5, -5)},
     nk.LutError, ["clamp (5, -5)", "lo <= hi"]),
    (linear_kernel, "int16", {"lut": LIN16, "step_bits": 3, "clamp": (0.5, 9)},
     nk.LutError, ["lo=0.5", "integer"]),
    (lookup_kernel, "int8", {"lut": Lut(np.arange(8, dtype=np.int16)), "bias": 3},
     nk.LutError, ["bias=3", "power of two"]),
    (lookup_kernel, "int8", {"lut": Lut(np.arange(8, dtype=np.int16)), "bias": 2**63},
     nk.LutError, ["bias=9223372036854775808", "below 2**32"]),
    (lookup_kernel, "int8", {"lut": Lut(np.arange(8, dtype=np.int16)), "step_bits": 2.0},
     nk.LutError, ["step_bits must be an integer; got 2.0"]),
    (linear_kernel, "int16", {"lut": LIN16, "step_bits": 3, "bias": 2**63},
     nk.LutError, ["bias=9223372036854775808", "32-bit int"]),
    (lookup_kernel, "int8", {"lut": Lut(np.arange(6, dtype=np.int16)), "oor": "truncate"},
     nk.LutError, ["truncate", "power of two", "size 6"]),
    (lookup_kernel, "int8", {"lut": Lut(np.arange(6, dtype=np.int16)), "step_bits": 32},
     nk.LutError, ["step_bits=32", "[0, 32)"]),
    (lookup_kernel, "int8", {"lut": LIN16}, nk.LutError, ["holds slopes", "linear_approx"]),
    (linear_kernel, "int8", {"lut": Lut(np.arange(8, dtype=np.int8)), "step_bits": 2},
     nk.LutError, ["no slopes", "s.act.lookup"]),
    (lookup_kernel, "int8", {"lut": Lut(np.arange(8, dtype=np.int64))},
     nk.LutError, ["int64", "int32 or float32"]),
    (lookup_kernel, "int8", {"lut": np.arange(8)}, nk.LutError, ["Lut or Design", "ndarray"]),
    (lookup_kernel, "int16", {"lut": design("tanh", -4, 4, 64, in_dtype="int8")},
     nk.LutError, ["design takes int8 input", "int16 data"]),
    (linear_kernel, "float16", {"lut": design("tanh", -4, 4, 64, kind="linear")},
     nk.LutError, ["design takes bfloat16 input", "float16 data"]),
    (linear_kernel, "bfloat16", {"lut": design("tanh", -4, 4, 64, kind="linear"),
                                     "step_bits": 1, "bias": 2},
     nk.LutError, ["brings its own step_bits, bias", "design alone"]),
    (lookup_kernel, "int8", {"lut": design("tanh", -4, 4, 64, kind="linear")},
     nk.LutError, ["Design is linear", "s.act.linear_approx"]),
    (linear_kernel, "int8", {"lut": LIN8, "step_bits": 2}, None, []),    # the control
])
def test_misuse_fails_at_build_time_with_numbers(kern, data, attrs, error, words):
    if error is None:           # the control: the same kernel builds with good arguments
        build_err(kern, data, **attrs)
        return
    with pytest.raises(error) as err:
        build_err(kern, data, "float32" if "float" in data else "int32", **attrs)
    for word in words:
        assert word in str(err.value), (word, str(err.value))


@nk.kernel
def two_acts(s, input, output, *, lut):
    x = input.vectorize(16)
    for i in s.iterate(x.dim(0)):
        p = s.alu.accumulate(s.iram.load(x[i]))
        s.act.lookup(p, lut)
        s.append(output, s.act.clamp(p, 0, 1))


@nk.kernel
def lookup_on_idata(s, input, output, *, lut):
    x = input.vectorize(16)
    for i in s.iterate(x.dim(0)):
        d = s.iram.load(x[i])
        s.alu.accumulate(d)
        s.append(output, s.act.lookup(d, lut))


@nk.kernel
def table_named(s, table, output, *, lut):
    lookup_kernel.fn(s, table, output, lut=lut)


def test_kernel_structure_errors():
    lut = Lut(np.arange(8, dtype=np.int16))
    with pytest.raises(nk.KernelError, match="one Act instruction per kernel"):
        build_err(two_acts, lut=lut)
    with pytest.raises(nk.KernelError, match=r"Act lookup reads ALU partials \(PData\), got IData"):
        build_err(lookup_on_idata, lut=lut)
    # The constant's name is no Python identifier: a tensor may be called anything.
    prog = nk.build(table_named, table=nk.spec((40,), "int8"), output=nk.spec((40,), "int32"),
                    lut=lut)
    x = np.arange(-20, 20, dtype=np.int8)
    out = np.zeros(40, np.int32)
    prog.run(table=x, output=out)
    assert np.array_equal(out, parallel_lookup(lut, x))
    no_memory = replace(TORQ, lut=LutBanks(2, 128, None))
    with pytest.raises(nk.KernelError, match="target 'torq' has no table memory"):
        build_err(lookup_kernel, target=no_memory, lut=lut)
    three = replace(TORQ, lut=LutBanks(3, 128, "LUT"))
    with pytest.raises(nk.LutError, match=r"lut.banks = 3.*1, 2 or 4"):
        build_err(lookup_kernel, target=three, lut=lut)


def test_silu_kernel_checks_its_tensors():
    with pytest.raises(nk.DTypeError, match="float16, got bfloat16"):
        nk.build(K.silu_fp16, input=nk.spec((10,), "bfloat16"), output=nk.spec((10,), "float16"))
    with pytest.raises(nk.ShapeError, match=r"\(10,\) and \(11,\)"):
        nk.build(K.silu_fp16, input=nk.spec((10,), "float16"), output=nk.spec((11,), "float16"))


def test_lut_memory_in_targets_is_data(tmp_path):
    assert TORQ.lut.memory == "LUT" and TORQ.memories["LUT"].size == 16384
    assert nk.target("gap8").lut.memory == "L1"
    with open(TORQ.path) as f:
        text = f.read().replace('memory = "LUT"', 'memory = "NOPE"')
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(nk.TargetError, match="lut.memory.*NOPE"):
        nk.load_target(path)


# -- what an integer LUT result holds, and where it may be stored -----------------------------

STORES = [
    # (design arguments, output dtypes that hold every value, ones that would saturate)
    (("sigmoid", -8, 8, 33, {"kind": "linear", "in_dtype": "int16", "out_dtype": "int16"}),
     ["int32", "int64"], ["int16", "int8", "uint16", "float16"]),
    (("tanh", -4, 4, 64, {"kind": "linear", "in_dtype": "int16", "out_dtype": "int32"}),
     ["int64"], ["int32", "int16"]),
    (("sigmoid", -8, 8, 33, {"kind": "linear", "in_dtype": "int8", "out_dtype": "int8"}),
     ["int16", "uint16", "int32", "float16"], ["int8", "uint8"]),
    (("tanh", -4, 4, 64, {"in_dtype": "int8", "out_dtype": "int16"}),
     ["int16", "int32"], ["int8", "uint16"]),
]


@pytest.mark.parametrize("args, fit, narrow", STORES, ids=lambda v: str(v)[:40])
def test_a_design_result_goes_only_where_it_fits(args, fit, narrow):
    """The Act result of a Design is y * 2**out_frac_bits in the accumulator, far wider than
    the table's offsets: a store into a tensor that cannot hold every value it takes is a
    LutError at build time (it used to saturate every value); one that holds them runs and
    equals the design, value for value."""
    fn, lo, hi, entries, kw = args
    d = design(fn, lo, hi, entries, **kw)
    reals = d.sweep(257)
    q = d.quantize(reals)
    want = np.ldexp(d.evaluate(reals), d.out_frac_bits)
    kern = linear_kernel if d.kind == "linear" else lookup_kernel
    vlo, vhi = d.output_range()
    for dt in fit:
        _, _, out = run_table(kern, q, dt, 2, lut=d)
        assert np.array_equal(out, want.astype(dt))     # exact, or float16 rounding
    for dt in narrow:
        with pytest.raises(nk.LutError) as err:
            nk.build(kern, input=nk.spec(q.shape, q.dtype), output=nk.spec(q.shape, dt), lut=d)
        msg = str(err.value)
        for part in ("append into 'output'", f"'output' is {dt}", f"values {vlo}..{vhi}",
                     f"y * 2**{d.out_frac_bits}", str(d.result_dtype), "or wider"):
            assert part in msg, (part, msg)


@nk.kernel
def store_kernel(s, input, output, *, lut, step_bits=None):
    """One Act-width vector, stored (not appended)."""
    p = s.alu.accumulate(s.iram.load(input))
    s.store(output, s.act.linear_approx(p, lut, step_bits))


def test_store_is_checked_like_append_and_raw_tables_still_saturate():
    d = design("sigmoid", -8, 8, 33, kind="linear", in_dtype="int16", out_dtype="int16")
    specs = {"input": nk.spec((4,), "int16"), "output": nk.spec((4,), "int16")}
    with pytest.raises(nk.LutError, match=r"store into 'output'.*int16 \(-32768\.\.32767\)"):
        nk.build(store_kernel, **specs, lut=d)
    # A bare Lut has no meaning attached: its result is stored saturated, as documented.
    prog = nk.build(store_kernel, **specs, lut=d.lut, step_bits=d.step_bits)
    q = np.array([-32768, 100, 4000, 32767], np.int16)
    out = np.zeros(4, np.int16)
    prog.run(input=q, output=out)
    acc = linear_approx(d.lut, q, d.step_bits)
    assert acc.max() > 32767 and out.tolist() == np.clip(acc, -32768, 32767).tolist()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fn=st.sampled_from(["sigmoid", "tanh", "silu", "gelu_tanh", "exp"]),
       row=st.sampled_from([("direct", "int8", "int16"), ("direct", "int16", "int8"),
                            ("direct", "uint8", "uint16"), ("linear", "int8", "int8"),
                            ("linear", "int16", "int16"), ("linear", "int16", "int32")]),
       entries=st.integers(9, 200), method=st.sampled_from(["sample", "minimax"]))
def test_output_range_is_every_value_the_output_takes(fn, row, entries, method):
    """Oracle: a linear design evaluated on every value its input type holds (it clamps
    any other partial into that range); a direct design looked up by int32 partials from
    below its first cell to past its last (a partial of summed data reaches every entry)."""
    kind, in_dt, out_dt = row
    lo, hi = (0.0, 4.0) if in_dt == "uint8" else (-4.0, 4.0) if fn != "exp" else (-8.0, 0.0)
    if in_dt == "uint8" and fn == "exp":
        lo, hi = 0.0, 2.0
    d = design(fn, lo, hi, entries, kind=kind, in_dtype=in_dt, out_dtype=out_dt, method=method)
    if kind == "linear":
        info = np.iinfo(in_dt)
        every = np.arange(info.min, int(info.max) + 1).astype(in_dt)
        values = np.ldexp(d.evaluate(d.dequantize(every)), d.out_frac_bits)
    else:
        cells = np.arange(-d.bias - 2, d.lut.size + 2) << d.step_bits
        values = parallel_lookup(d.lut, cells.astype(np.int32), d.step_bits, d.bias)
    assert d.output_range() == (int(values.min()), int(values.max()))
    assert d.result_dtype == np.dtype({"direct": out_dt, "linear": "int32" if in_dt == "int8"
                                       else "int64"}[kind])
    text = d.describe()
    assert f"output  {d.result_dtype}" in text and f"values {values.min():.0f}.." in text


@pytest.mark.parametrize("lut, data, to_vector, words", [
    (Lut(np.ones(8, np.int8), np.ones(8, np.int8)), "int8", ("uint32", 2),
     ["to_vector dtype uint32", "int32"]),
    (Lut(np.ones(8, np.int8), np.ones(8, np.int8)), "int8", ("int8", 32),
     ["shift=32", "[0, 32)", "acc32"]),
    (Lut(np.ones(8, np.int16), np.ones(8, np.int16)), "int16", ("int8", 3, "nearest"),
     ["rounding='nearest'"]),
    (Lut(np.ones(8, np.int8), np.ones(8, np.int8)), "int8", ["int8"], ["must be a tuple"]),
    (Lut(np.ones(8, np.float32), np.ones(8, BF16)), "bfloat16", ("int8",),
     ["integer accumulator"]),
])
def test_linear_approx_to_vector_rules(lut, data, to_vector, words):
    with pytest.raises(nk.LutError) as err:
        nk.build(linear_kernel, TORQ, input=nk.spec((64,), _dt(data)),
                 output=nk.spec((64,), "int32"), lut=lut, step_bits=3, to_vector=to_vector)
    for word in words:
        assert word in str(err.value)


def test_linear_approx_to_vector_refuses_a_design():
    d = design("sigmoid", -8, 8, 33, kind="linear", in_dtype="int16", out_dtype="int16")
    with pytest.raises(nk.LutError, match="a Design's result already has its meaning"):
        nk.build(linear_kernel, TORQ, input=nk.spec((64,), np.int16),
                 output=nk.spec((64,), "int32"), lut=d, to_vector=("int8", 4))
