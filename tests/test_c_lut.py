"""The Act LUT instructions (``lookup``, ``linear_approx``) and constant tables in C, bit for
bit against the simulator: the kernels of tests/test_lut_kernels.py over every value type,
input type, out-of-range policy and bank layout (1, 2 and 4 parallel accesses), the table
designs, and seed 004's float16 SiLU on every finite float16 input."""

from __future__ import annotations

import os
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest
from test_c_kernels import check_against_sim
from test_lut_kernels import DESIGNS, ints, linear_kernel, lookup_kernel, random_values

import npukit as nk
from npukit import kernels as K
from npukit.c import c_source
from npukit.lut import ROUNDING_MODES, Lut, design, linear_approx, parallel_lookup, to_vector
from npukit.machine import LutBanks

BF16 = np.dtype(ml_dtypes.bfloat16)
TORQ = nk.target("torq")


def banks(n: int):
    return replace(TORQ, lut=LutBanks(n, 128, "LUT"))


def run(kern, x, out_dtype, target=TORQ, step=2, **attrs):
    """C (fused and literal readings) against the simulator on a strided canary output;
    returns the simulator's output."""
    def build(out_spec):
        return nk.build(kern, target=target, input=nk.spec(x.shape, x.dtype), output=out_spec,
                        **attrs)
    return check_against_sim(build, {"input": x}, "output", x.shape, out_dtype, step=step)


# value type, data type, oor, banks, vector: every value type once, the rest cycled through
LOOKUPS = [("int8", "int8", "saturate", 1, "alu"), ("uint8", "uint8", "truncate", 2, "act"),
           ("int16", "int16", "saturate", 4, "alu"), ("uint16", "int8", "truncate", 1, "act"),
           ("int32", "uint8", "saturate", 2, "alu"), ("float16", "int16", "truncate", 4, "act"),
           ("bfloat16", "int8", "saturate", 2, "alu"), ("float32", "int16", "saturate", 1, "act")]


@pytest.mark.parametrize("values, data, oor, nbanks, vector", LOOKUPS)
def test_lookup(values, data, oor, nbanks, vector):
    rng = np.random.default_rng(len(values) * 7 + nbanks)
    size = 64 if oor == "truncate" else 45
    lut = Lut(random_values(rng, size, values))
    x = ints(rng, 173, data)
    bias = 0 if data == "uint8" else 16
    out_dt = "float32" if values in ("float16", "bfloat16", "float32") else "int32"
    out = run(lookup_kernel, x, out_dt, banks(nbanks), lut=lut, vector=vector, step_bits=2,
              bias=bias, oor=oor)
    want = parallel_lookup(lut, x.astype(np.int32), 2, bias, oor).astype(out_dt)
    assert out.tobytes() == want.tobytes()


@pytest.mark.parametrize("nbanks", [1, 2, 4])
@pytest.mark.parametrize("data, values, acc", [("int8", "int8", "int32"),
                                               ("int16", "int16", "int64"),
                                               ("int16", "int32", "int64")])
def test_linear_approx_integer(data, values, acc, nbanks):
    rng = np.random.default_rng(nbanks)
    lut = Lut(ints(rng, 37, values), ints(rng, 37, values))
    x = ints(rng, 150, data)
    step_bits = {"int8": 3, "int16": 9}[data]
    shift = {"int32": 13, "int64": 20}[acc]
    clamp = (-100, 90) if nbanks == 2 else None
    out = run(linear_kernel, x, acc, banks(nbanks), lut=lut, step_bits=step_bits, bias=18,
              shift_offset=shift, clamp=clamp)
    xc = x if clamp is None else np.clip(x, *clamp).astype(data)
    assert out.tobytes() == linear_approx(lut, xc, step_bits, 18, shift).tobytes()


@pytest.mark.parametrize("nbanks", [1, 4])
@pytest.mark.parametrize("data", ["bfloat16", "float16", "float32"])
def test_linear_approx_float(data, nbanks):
    rng = np.random.default_rng(nbanks + len(data))
    lut = Lut((rng.normal(size=50) * 4).astype(np.float32), rng.normal(size=50).astype(BF16))
    x = (rng.normal(size=211) * 12).astype(BF16 if data == "bfloat16" else data)
    x[:6] = [np.inf, -np.inf, np.nan, 1e30 if data == "float32" else 60000, -0.0, 2.0**-20]
    clamp = (-6.0, 7.5) if nbanks == 4 else None
    out = run(linear_kernel, x, "float32", banks(nbanks), lut=lut, step_bits=1, bias=25,
              scale_exp=2, clamp=clamp)
    assert np.isnan(out[2]) and len(np.unique(out[6:])) > 50


@pytest.mark.slow
@pytest.mark.parametrize("rounding", ROUNDING_MODES)
@pytest.mark.parametrize("data, values, vector, shift, saturation", [
    ("int8", "int8", "int8", 2, "saturate"), ("int16", "int16", "int16", 3, "none"),
    ("int16", "int32", "uint8", 4, "saturate"), ("int8", "int8", "int8", 1, "symmetric"),
    ("int16", "int32", "int32", 0, "none")])
def test_linear_approx_to_vector(data, values, vector, shift, saturation, rounding):
    """compute(x).to_vector<vector>(shift) under every rounding mode: the simulator and both C
    readings equal npukit.lut.to_vector of the accumulator; ties and saturation occur."""
    rng = np.random.default_rng(shift + len(rounding))
    lut = Lut(ints(rng, 37, values), ints(rng, 37, values))
    x = ints(rng, 300, data)
    step_bits = {"int8": 3, "int16": 9}[data]
    out = run(linear_kernel, x, "int32", banks(2), lut=lut, step_bits=step_bits, bias=18,
              shift_offset=2, to_vector=(vector, shift, rounding, saturation))
    acc = linear_approx(lut, x, step_bits, 18, 2)
    assert out.tobytes() == to_vector(acc, vector, shift, rounding, saturation).astype(
        np.int32).tobytes()
    if shift:
        assert np.any((acc & ((1 << shift) - 1)) == 1 << (shift - 1))   # ties
    info = np.iinfo(vector)
    assert np.any(acc >> shift > info.max) or np.any(acc >> shift < info.min)  # out of range


@pytest.mark.parametrize("step_bits, bias, data", [(-2, 16, BF16), (-7, 300, BF16),
                                                    (-2, -(2**25), np.float32)])
def test_linear_approx_negative_step_bits(step_bits, bias, data):
    """index = floor(x * 2^-step_bits) + bias, saturated; the third case's table ends are no
    float32 integers, which takes the 64-bit index path (float32 partials near 2^23 step by
    1, so its floors step by 4)."""
    rng = np.random.default_rng(-step_bits)
    n = 64
    lut = Lut((rng.normal(size=n) * 4).astype(np.float32), rng.normal(size=n).astype(BF16))
    cells = rng.uniform(-bias - 3, n - bias + 3, 200)
    x = np.ldexp(cells, step_bits).astype(data)
    x[:7] = [np.inf, -np.inf, np.nan, 3e38, -0.0, np.ldexp(-bias, step_bits),
             np.ldexp(n - 1 - bias, step_bits)]
    out = run(linear_kernel, x, "float32", banks(4), lut=lut, step_bits=step_bits, bias=bias)
    # Independent reading in float64 and float32 (the bfloat16 product is exact in float32).
    with np.errstate(invalid="ignore", over="ignore"):
        floor = np.floor(np.nan_to_num(x.astype(np.float64), nan=0.0) * 2.0**-step_bits)
        index = np.clip(floor + bias, 0, n - 1).astype(np.int64)
        want = (lut.slopes[index].astype(np.float32) * x.astype(np.float32)
                + lut.offsets[index])
    assert out.tobytes() == want.tobytes()
    assert len(np.unique(index)) > n // 8  # the inputs reach much of the table


@pytest.mark.slow
@pytest.mark.parametrize("fn, lo, hi, entries, kw", DESIGNS,
                         ids=[f"{d[0]}-{d[4]['kind']}-{d[4].get('in_dtype', 'bf16')}"
                              for d in DESIGNS])
def test_designs(fn, lo, hi, entries, kw):
    d = design(fn, lo, hi, entries, **kw)
    q = d.quantize(d.sweep(301))
    if d.kind == "direct":
        acc = "float32" if d.out_frac_bits is None else "int32"
        out = run(lookup_kernel, q, acc, lut=d)
    else:
        acc = "float32" if d.out_frac_bits is None else \
            str(linear_approx(d.lut, q[:1], d.step_bits, d.bias, d.shift_offset).dtype)
        out = run(linear_kernel, q, acc, lut=d)
    want = d.evaluate(d.sweep(301))
    if d.out_frac_bits is not None:
        want = np.ldexp(want, d.out_frac_bits)
    assert np.array_equal(out.astype(np.float64), want)


def test_table_is_a_static_const_array_of_the_image():
    lut = Lut(np.array([-3, 5, 7, 100], np.int8))
    prog = nk.build(lookup_kernel, target=banks(2), input=nk.spec((20,), "int8"),
                    output=nk.spec((20,), "int32"), lut=lut)
    src = c_source(prog)
    image = ", ".join(str(v) for v in lut.layout(2, 128)[:12])  # 8 per block, twice
    assert image == "-3, 5, 7, 100, 0, 0, 0, 0, -3, 5, 7, 100"
    assert f"static const int16_t lut_table[16] = {{\n    {image}," in src
    # The index in 32 bits, saturated without branches; a block of 8 is a shift and a mask.
    assert "int32_t i = (int32_t)p;\n    i = i < 0 ? 0 : i;\n    i = i > 3 ? 3 : i;" in src
    assert "return (int32_t)(lut_table[(i >> 3) * 16 + (i & 7)]);" in src


def test_silu_every_float16_input():
    """Seed 004's SiLU in C on all 63488 finite float16 inputs, over the target's cores:
    bit for bit the simulator's result."""
    every = np.arange(0x10000, dtype=np.uint32).astype(np.uint16).view(np.float16)
    x = every[np.isfinite(every)]
    out = {}
    for backend in ("sim", "c"):
        out[backend] = np.full_like(x, 7.0)
        runs = K.silu_fp16_on_cores(x, out[backend], backend=backend)
        assert len(runs) == TORQ.cores
    assert out["c"].tobytes() == out["sim"].tobytes()
    assert len(np.unique(out["c"])) > 10000


@pytest.mark.slow
@pytest.mark.parametrize("threads", [1, 2])
def test_silu_cores_run_at_once_on_the_hosts_threads(threads, monkeypatch):
    """In C the cores of silu_fp16_on_cores run on up to NPUKIT_THREADS Python threads at
    once (each C call releases the GIL), writing the simulator's bytes."""
    import threading
    import time

    import npukit.c

    monkeypatch.setenv("NPUKIT_THREADS", str(threads))
    real, seen = npukit.c.run_c, []

    def slow(prog, arrays, **kw):
        seen.append(threading.get_ident())
        time.sleep(0.05)  # long enough for the other cores to start meanwhile
        return real(prog, arrays, **kw)
    monkeypatch.setattr(npukit.c, "run_c", slow)
    x = np.linspace(-9, 9, 5000).astype(np.float16)
    got, want = np.full_like(x, 3.0), np.full_like(x, 5.0)
    K.silu_fp16_on_cores(x, got, backend="c")
    K.silu_fp16_on_cores(x, want, backend="sim")
    assert got.tobytes() == want.tobytes()
    assert len(seen) == TORQ.cores
    assert len(set(seen)) == min(threads, TORQ.cores, os.cpu_count())
