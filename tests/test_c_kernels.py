"""The C back end against the simulator on the six seed-000 kernels.

Rule for floats, as for integers: bit-identical results. The C is built with
``-ffp-contract=off`` and without fast-math, so every float32 operation rounds once, as in
``npukit.arith``; only NaN payloads may differ (any NaN matches any NaN).

Every case runs the simulator, the fused C and the literal C (``fuse=False``) with the
output a strided sub-view of a larger canary-filled buffer, twice with different canaries:
the whole buffers must agree bit for bit, nothing outside the view may change and every
element inside must be written (it is the same under both canaries).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import npukit as nk
from npukit import ir
from npukit import kernels as K
from npukit.c import run_c
from npukit.machine import Arith
from npukit.run import check_arrays

SETTINGS = settings(max_examples=7, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
CANARIES = {"int8": (0x5A, -0x3B), "uint8": (0x5A, 0xC5), "int16": (0x5A5A, -0x1234),
            "int32": (0x5A5A5A5A, -7),
            "int64": (0x5A5A5A5A5A5A, -9), "float32": (1234.5, -0.0), "float16": (1234.0, -0.0),
            "bfloat16": (1232.0, -0.0)}
ACT_WIDTH = {"int8": 16, "int16": 4, "float32": 8}


def same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    """Bit-identical, except that any NaN matches any NaN."""
    if x.dtype.kind != "f" and x.dtype.name != "bfloat16":
        return bool(np.array_equal(x, y))
    nan = np.isnan(x.astype(np.float32)) & np.isnan(y.astype(np.float32))
    u = f"u{x.dtype.itemsize}"
    return bool((nan | (x.view(u) == y.view(u))).all())


def strided(shape, dtype, gaps, offset, fill, step=1):
    """A view of ``shape`` inside a larger buffer filled with ``fill``: the innermost dim
    steps ``step`` elements, each other dim skips ``gaps[d]`` more than its rows span, the
    view starts ``offset`` elements in. Returns (buffer, view, spec)."""
    dt = np.dtype(dtype)
    strides, acc = [0] * len(shape), 0
    for d in reversed(range(len(shape))):
        strides[d] = step if d == len(shape) - 1 else acc + gaps[d]
        acc = strides[d] * shape[d]
    strides = tuple(strides)
    span = offset + sum((n - 1) * s for n, s in zip(shape, strides)) + 1 + 3
    big = np.full(span, fill, dt)
    view = np.lib.stride_tricks.as_strided(big[offset:], shape,
                                           tuple(s * dt.itemsize for s in strides))
    return big, view, nk.spec(shape, dt, strides, offset)


def inside_mask(big: np.ndarray, view: np.ndarray) -> np.ndarray:
    idx = np.arange(big.size)
    start = view.__array_interface__["data"][0] - big.__array_interface__["data"][0]
    strides = tuple(s // big.itemsize * idx.itemsize for s in view.strides)
    pos = np.lib.stride_tricks.as_strided(idx[start // big.itemsize:], view.shape, strides)
    mask = np.zeros(big.size, bool)
    mask[pos.reshape(-1)] = True
    return mask


def check_against_sim(build, inputs: dict, out_name: str, out_shape, dtype, gaps=None, offset=3,
                      step=1):
    """Build with ``build(out_spec)`` and compare simulator, fused C and literal C outputs
    (see the module docstring). Returns the simulator's output buffer."""
    gaps = gaps or (0,) * len(out_shape)
    prog = None
    got = {}
    for canary in CANARIES[np.dtype(dtype).name]:
        for mode in ("sim", "c", "literal"):
            big, view, spec = strided(out_shape, dtype, gaps, offset, canary)
            prog = prog or build(spec)
            arrays = check_arrays(prog, dict(inputs, **{out_name: view}))
            if mode == "sim":
                prog.run("sim", **arrays)
            else:
                run_c(prog, arrays, fuse=mode == "c")
            got[canary, mode] = (big, view)
    for canary in CANARIES[np.dtype(dtype).name]:
        sim_big, sim_view = got[canary, "sim"]
        inside = inside_mask(sim_big, sim_view)
        for mode in ("c", "literal"):
            big, _ = got[canary, mode]
            assert same_bits(big, sim_big), f"{mode} differs from the simulator"
            assert same_bits(big[~inside], np.full((~inside).sum(), canary, big.dtype))
    a, b = (got[c, "c"][0] for c in CANARIES[np.dtype(dtype).name])
    inside = inside_mask(*got[CANARIES[np.dtype(dtype).name][0], "c"])
    assert same_bits(a[inside], b[inside]), "some element of the output view was not written"
    return got[CANARIES[np.dtype(dtype).name][0], "sim"][1]


def rand(rng, shape, dtype) -> np.ndarray:
    """Random values over the dtype's range (never all zero)."""
    dt = np.dtype(dtype)
    if dt.kind == "f" or dt.name == "bfloat16":
        x = (rng.standard_normal(shape) * 3).astype(dt)
    else:
        info = np.iinfo(dt)
        x = rng.integers(info.min, info.max, shape, endpoint=True).astype(dt)
    x.flat[0] = 7
    return x


def bias_scale(rng, dtype, wide: bool) -> np.ndarray:
    """A (bias, scale) pair: small (the 32-bit fast path) or over all int32 (64-bit)."""
    if dtype == "float32":
        return np.array([rng.uniform(-2, 2), rng.uniform(-3, 3)], np.float32)
    if wide:
        return rng.integers(-2**31, 2**31, 2).astype(np.int32)
    return np.array([rng.integers(-500, 500), rng.integers(-300, 300)], np.int32)


def mul_attrs(rng, dtype) -> dict:
    if dtype == "float32":
        lo = float(rng.uniform(-10, 0))
        return {"shift": 0, "out_min": lo, "out_max": lo + float(rng.uniform(0, 20))}
    info = np.iinfo(dtype)
    lo = int(rng.integers(info.min, 0))
    hi = int(rng.integers(lo, info.max))
    return {"shift": int(rng.integers(0, 24)), "out_min": lo, "out_max": hi}


def bs_spec(dtype):
    return nk.spec((2,), "float32" if dtype == "float32" else "int32")


# -- 1-D kernels -------------------------------------------------------------------------


@pytest.mark.slow
@SETTINGS
@given(n=st.integers(1, 90), dtype=st.sampled_from(["int8", "int16"]), wide=st.booleans(),
       step=st.integers(1, 3), seed=st.integers(0, 2**31))
@example(n=64, dtype="int8", wide=False, step=1, seed=1).via("a multiple of the vector width")
@example(n=33, dtype="int16", wide=True, step=2, seed=2).via("not a multiple, every other")
@pytest.mark.parametrize("kern", [K.mul_vanilla, K.mul_vectorized, K.mul_vectorized_store])
def test_mul_1d(kern, n, dtype, wide, step, seed):
    if kern is K.mul_vectorized_store:
        step = 1  # its output is vectorized: dense
    rng = np.random.default_rng(seed)
    w = ACT_WIDTH[dtype]
    # The vectorized store writes whole vectors: its output is padded to a multiple.
    out_n = -(-n // w) * w if kern is K.mul_vectorized_store else n
    inputs = {"input1": rand(rng, n, dtype), "input2": rand(rng, n, dtype),
                  "bias_scale": bias_scale(rng, dtype, wide)}
    attrs = mul_attrs(rng, dtype)

    def build(out_spec):
        return nk.build(kern, target="torq", input1=nk.spec((n,), dtype),
                        input2=nk.spec((n,), dtype), bias_scale=bs_spec(dtype), output=out_spec,
                        **attrs)
    check_against_sim(build, inputs, "output", (out_n,), dtype, step=step)


# -- n-d kernels -------------------------------------------------------------------------


@st.composite
def nd_case(draw):
    """Output shape, input2's broadcast shape, and gaps that make outer dims non-dense."""
    shape = tuple(draw(st.lists(st.integers(1, 7), min_size=1, max_size=4)))
    b_shape = tuple(1 if draw(st.booleans()) else n for n in shape)

    def gaps():
        return tuple(draw(st.integers(0, 3)) for _ in shape[:-1]) + (0,)
    return shape, b_shape, gaps(), gaps()


SEED_SHAPES = [((2, 5, 7), (1, 1, 1)), ((2, 5, 7), (2, 1, 7)), ((2, 5, 7), (1, 5, 1)),
               ((5, 3, 3, 2), (5, 3, 3, 2))]


@pytest.mark.slow
@SETTINGS
@given(case=nd_case(), dtype=st.sampled_from(["int8", "int16"]), wide=st.booleans(),
       seed=st.integers(0, 2**31))
@example(case=(SEED_SHAPES[0][0], SEED_SHAPES[0][1], (0, 0, 0), (0, 0, 0)), dtype="int8",
         wide=False, seed=3)
@example(case=(SEED_SHAPES[1][0], SEED_SHAPES[1][1], (0, 0, 0), (5, 3, 0)), dtype="int16",
         wide=False, seed=4)
@example(case=(SEED_SHAPES[2][0], SEED_SHAPES[2][1], (2, 0, 0), (0, 3, 0)), dtype="int8",
         wide=True, seed=5)
@example(case=(SEED_SHAPES[3][0], SEED_SHAPES[3][1], (0, 1, 0, 0), (1, 0, 2, 0)),
         dtype="int8", wide=False, seed=6)
@pytest.mark.parametrize("kern", [K.mul, K.mul_ndim])
def test_mul_nd(kern, case, dtype, wide, seed):
    shape, b_shape, in_gaps, out_gaps = case
    if kern is K.mul_ndim:
        b_shape = shape  # mul_ndim does not broadcast
    rng = np.random.default_rng(seed)
    _, a, a_spec = strided(shape, dtype, in_gaps, 1, 0)
    a[...] = rand(rng, shape, dtype)
    b = rand(rng, b_shape, dtype)
    inputs = {"input1": a, "input2": b, "bias_scale": bias_scale(rng, dtype, wide)}
    attrs = mul_attrs(rng, dtype)

    def build(out_spec):
        return nk.build(kern, target="torq", input1=a_spec, input2=nk.spec(b_shape, dtype),
                        bias_scale=bs_spec(dtype), output=out_spec, **attrs)
    check_against_sim(build, inputs, "output", shape, dtype, out_gaps)


# -- reduce ------------------------------------------------------------------------------


@SETTINGS
@given(rows=st.integers(1, 12), cols=st.integers(1, 150), dtype=st.sampled_from(["int8", "int16"]),
       vector=st.sampled_from(["alu", "act"]), gap=st.integers(0, 5), seed=st.integers(0, 2**31))
@example(rows=40, cols=70, dtype="int8", vector="alu", gap=0, seed=0).via("saturates")
@example(rows=4, cols=70, dtype="int16", vector="alu", gap=1, seed=0).via("4 rows, 4 vectors")
def test_reduce_rows(rows, cols, dtype, vector, gap, seed):
    rng = np.random.default_rng(seed)
    _, x, x_spec = strided((rows, cols), dtype, (gap, 0), 2, 0)
    x[...] = rand(rng, (rows, cols), dtype)

    def build(out_spec):
        return nk.build(K.reduce_rows, target="torq", input=x_spec, output=out_spec, vector=vector)
    out = check_against_sim(build, {"input": x}, "output", (cols,), dtype)
    info = np.iinfo(dtype)
    assert (out == np.clip(x.astype(np.int64).sum(axis=0), info.min, info.max)).all()


# -- float32 -----------------------------------------------------------------------------


SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-40, -1e-42, 3e38, -3e38, 1.5],
                   np.float32)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the simulator's
@SETTINGS
@given(case=nd_case(), specials=st.booleans(), seed=st.integers(0, 2**31))
@example(case=((1000,), (1000,), (0,), (0,)), specials=False, seed=1)
@pytest.mark.parametrize("kern", [K.mul, K.mul_vectorized])
def test_float32_bit_identical(kern, case, specials, seed):
    shape, b_shape, _, out_gaps = case
    if kern is K.mul_vectorized:
        shape = b_shape = (int(np.prod(shape)),)
        out_gaps = (0,)
    rng = np.random.default_rng(seed)
    a, b = rand(rng, shape, "float32"), rand(rng, b_shape, "float32")
    if specials:  # NaN, infinities, signed zeros, subnormals, overflow to inf
        a.flat[rng.integers(0, a.size, a.size // 2 + 1)] = rng.choice(SPECIAL, a.size // 2 + 1)
    inputs = {"input1": a, "input2": b, "bias_scale": bias_scale(rng, "float32", False)}
    attrs = mul_attrs(rng, "float32")

    def build(out_spec):
        return nk.build(kern, target="torq", input1=nk.spec(shape, "float32"),
                        input2=nk.spec(b_shape, "float32"), bias_scale=bs_spec("float32"),
                        output=out_spec, **attrs)
    out = check_against_sim(build, inputs, "output", shape, "float32", out_gaps)
    if not specials:  # and numpy's own reading of the formula, with no tolerance at all
        f = np.float32
        t = (np.broadcast_to(a * b, shape) + inputs["bias_scale"][0]) * inputs["bias_scale"][1]
        want = np.clip(t + f(0), f(attrs["out_min"]), f(attrs["out_max"]))
        assert same_bits(out, want)


# -- the target's rounding, zero points and the 32-bit fast path ---------------------------


@nk.kernel
def mul_zero_point(s, input1, input2, bias_scale, output, *, shift, zero_point, out_min, out_max):
    """``mul_vectorized`` with a zero point."""
    n = s.act.width(input1.dtype, input2.dtype)
    input1, input2 = input1.vectorize(n), input2.vectorize(n)
    bdata = s.bram.load(bias_scale)
    for i in s.iterate(input1.dim(0)):
        data1 = s.iram.load(input1[i])
        data2 = s.wram.load(input2[i])
        pdata = s.alu.elementwise_product_accumulate(data1, data2)
        res = s.act.rescale_clamp(pdata, bdata, shift, zero_point, out_min, out_max)
        s.append(output, res)


def reference(a, b, bias, scale, shift, zp, lo, hi, mode):
    """Rounding by Python integers, independent of the shift-based spelling."""
    out = []
    for x, y in zip(a.tolist(), b.tolist()):
        t = (x * y + bias) * scale
        q, r = divmod(t, 1 << shift)
        half = (1 << shift) // 2 if shift else 1
        if shift and (r > half or (r == half and (mode == "half_up" or q % 2))):
            q += mode != "floor"
        out.append(min(max(q + zp, lo), hi))
    return np.array(out)


@pytest.mark.slow
@settings(max_examples=6, deadline=None, derandomize=True)
@given(shift=st.integers(0, 4), zp=st.integers(-20, 20), wide=st.booleans(),
       seed=st.integers(0, 2**31))
@pytest.mark.parametrize("mode", ["half_up", "half_even", "floor"])
def test_rounding_modes_and_zero_point(mode, shift, zp, wide, seed):
    """Small products hit every rounding tie; a small scale runs the 32-bit lanes, a wide
    one the 64-bit lanes."""
    tgt = dataclasses.replace(nk.target("torq"), arith=Arith(mode, True))
    rng = np.random.default_rng(seed)
    n = 100
    a, b = rng.integers(-12, 12, n).astype(np.int8), rng.integers(-12, 12, n).astype(np.int8)
    bs = np.array([rng.integers(-8, 8), 2**30 + 1 if wide else rng.integers(1, 4)], np.int32)
    attrs = {"shift": shift, "zero_point": zp, "out_min": -2**31, "out_max": 2**31 - 1}

    def build(out_spec):
        return nk.build(mul_zero_point, target=tgt, input1=nk.spec((n,), "int8"),
                        input2=nk.spec((n,), "int8"), bias_scale=nk.spec((2,), "int32"),
                        output=out_spec, **attrs)
    inputs = {"input1": a, "input2": b, "bias_scale": bs}
    out = check_against_sim(build, inputs, "output", (n,), "int32")
    want = reference(a, b, int(bs[0]), int(bs[1]), shift, zp, -2**31, 2**31 - 1, mode)
    assert (out == np.clip(want, -2**31, 2**31 - 1)).all()


@pytest.mark.parametrize("mode", ["half_up", "half_even", "floor"])
@pytest.mark.parametrize("step", [-1, 0, 1])
def test_fast_path_boundary(mode, step):
    """Scales at the edge of what 32-bit lanes hold for int8 x int8 partials (at most
    16384): one below, the largest exact one, one past it. Each agrees with the simulator:
    the run-time check takes the 32-bit lanes only when they are exact."""
    tgt = dataclasses.replace(nk.target("torq"), arith=Arith(mode, True))
    n = 40
    a = np.full(n, -128, np.int8)
    a[::2] = 127
    bias, shift, zp = 5, 5, 3
    rnd = 0 if mode == "floor" else 1 << (shift - 1)
    scale = (2**31 - 1 - rnd) // (16384 + bias) + step
    bs = np.array([bias, scale], np.int32)
    attrs = {"shift": shift, "zero_point": zp, "out_min": -2**31, "out_max": 2**31 - 1}

    def build(out_spec):
        return nk.build(mul_zero_point, target=tgt, input1=nk.spec((n,), "int8"),
                        input2=nk.spec((n,), "int8"), bias_scale=nk.spec((2,), "int32"),
                        output=out_spec, **attrs)
    out = check_against_sim(build, {"input1": a, "input2": a, "bias_scale": bs}, "output", (n,),
                            "int32")
    want = reference(a, a, bias, scale, shift, zp, -2**31, 2**31 - 1, mode)
    assert (out == want).all() and len(set(out.tolist())) == 2


# -- arrays the caller passes ------------------------------------------------------------


def mul_prog(n=300, dtype="int16", out_spec=None, **spec):
    return nk.build(K.mul, target="torq", input1=spec.get("input1", nk.spec((n,), dtype)),
                    input2=nk.spec((n,), dtype), bias_scale=nk.spec((2,), "int32"),
                    output=out_spec or nk.spec((n,), dtype), shift=3, out_min=-30000,
                    out_max=30000)


def test_output_overlapping_an_input_runs_on_copies():
    """Output and input1 share memory: the result is the simulator's, which reads every
    input from its own image."""
    rng = np.random.default_rng(11)
    prog = mul_prog()
    a, b = rand(rng, 300, "int16"), rand(rng, 300, "int16")
    bs = np.array([3, 5], np.int32)
    want = a.copy()
    prog.run("sim", input1=a.copy(), input2=b, bias_scale=bs, output=want)
    for shift in (0, 1, -1):  # the same, one element later and one earlier
        buf = np.zeros(302, np.int16)
        buf[1:301] = a
        inp, out = buf[1:301], buf[1 + shift:301 + shift]
        prog.run("c", input1=inp, input2=b, bias_scale=bs, output=out)
        assert (out == want).all()


def test_unaligned_arrays():
    """numpy arrays need not be aligned: int32, int16 and float32 data at odd addresses."""
    rng = np.random.default_rng(12)
    raw = np.zeros(4000, np.uint8)

    def odd(x):
        v = raw[1 + odd.at:1 + odd.at + x.nbytes].view(x.dtype)
        odd.at += x.nbytes + 8
        v[...] = x
        return v
    odd.at = 0
    prog = mul_prog()
    arrays = {"input1": odd(rand(rng, 300, "int16")), "input2": odd(rand(rng, 300, "int16")),
              "bias_scale": odd(np.array([3, 5], np.int32)),
              "output": odd(np.zeros(300, np.int16))}
    assert not arrays["bias_scale"].flags.aligned
    want = np.zeros(300, np.int16)
    prog.run("sim", **dict(arrays, output=want))
    prog.run("c", **arrays)
    assert (arrays["output"] == want).all()


def test_new_arrays_each_call():
    """The pointer cache follows the arrays: a call with new arrays, then with the old
    ones changed in place, gives fresh results each time."""
    rng = np.random.default_rng(13)
    prog = mul_prog()
    bs = np.array([3, 5], np.int32)
    for _ in range(3):
        a, b, out = rand(rng, 300, "int16"), rand(rng, 300, "int16"), np.zeros(300, np.int16)
        want = np.zeros(300, np.int16)
        prog.run("sim", input1=a, input2=b, bias_scale=bs, output=want)
        prog.run("c", input1=a, input2=b, bias_scale=bs, output=out)
        assert (out == want).all()
        a[:] = rand(rng, 300, "int16")
        prog.run("sim", input1=a, input2=b, bias_scale=bs, output=want)
        r = prog.run("c", input1=a, input2=b, bias_scale=bs, output=out)
        assert (out == want).all() and r.outputs["output"] is out
        assert r.cycles is None and r.report is None and r.wall_time > 0


# -- every ALU operation, and accumulation by max and min -------------------------------


@nk.kernel
def binary(s, input1, input2, output, *, op, lo, hi):
    """``clamp(op(input1, input2), lo, hi)`` element by element."""
    n = s.act.width(input1.dtype, input2.dtype)
    input1, input2 = input1.vectorize(n), input2.vectorize(n)
    for i in s.iterate(input1.dim(0)):
        data1 = s.iram.load(input1[i])
        data2 = s.wram.load(input2[i])
        pdata = getattr(s.alu, f"elementwise_{op}")(data1, data2)
        res = s.act.clamp(pdata, lo, hi)
        s.append(output, res)


@nk.kernel
def reduce_extreme(s, input, output, *, op, lo, hi):
    """Column-wise max or min of [N, M] rows: partials start at the identity (-inf, the
    dtype's minimum, ...) and combine by ``op``."""
    x = input.vectorize(s.act.width(input.dtype, None))
    for c in s.iterate(x.dim(1)):
        for r in s.iterate(x.dim(0)):
            idata = s.iram.load(x[r][c])
            pdata = getattr(s.alu, f"elementwise_{op}")(idata, idata)
        res = s.act.clamp(pdata, lo, hi)
        s.append(output, res)


def with_specials(rng, shape, dtype):
    x = rand(rng, shape, dtype)
    if dtype == "float32":
        x.flat[rng.integers(0, x.size, x.size // 3 + 1)] = rng.choice(SPECIAL, x.size // 3 + 1)
    return x


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("dtype", ["int8", "int16", "float32"])
@pytest.mark.parametrize("op", ["add", "sub", "max", "min"])
def test_alu_operations(op, dtype):
    """NaN, infinities and signed zeros included: numpy's maximum/minimum propagate NaN and
    give the second operand of equal ones; clamps keep a value equal to a bound."""
    rng = np.random.default_rng(21)
    n = 77
    a, b = with_specials(rng, n, dtype), with_specials(rng, n, dtype)
    b[:5] = a[:5]  # equal operands
    if dtype == "float32":
        a[5], b[5], a[6], b[6] = -0.0, 0.0, 0.0, -0.0
    lo, hi = (-5.0, 0.0) if dtype == "float32" else (-1000, 1000)

    def build(out_spec):
        return nk.build(binary, target="torq", input1=nk.spec((n,), dtype),
                        input2=nk.spec((n,), dtype), output=out_spec, op=op, lo=lo, hi=hi)
    check_against_sim(build, {"input1": a, "input2": b}, "output", (n,), dtype)


@pytest.mark.parametrize("dtype", ["int8", "int16", "float32"])
@pytest.mark.parametrize("op", ["max", "min"])
def test_accumulate_max_min(op, dtype):
    rng = np.random.default_rng(22)
    x = with_specials(rng, (6, 21), dtype)
    lo, hi = (-1e30, 1e30) if dtype == "float32" else (-100, 100)

    def build(out_spec):
        return nk.build(reduce_extreme, target="torq", input=nk.spec(x.shape, dtype),
                        output=out_spec, op=op, lo=lo, hi=hi)
    out = check_against_sim(build, {"input": x}, "output", (21,), dtype)
    if dtype != "float32":
        want = np.clip(x.max(axis=0) if op == "max" else x.min(axis=0), lo, hi)
        assert (out == want).all()


# -- IR no front end writes yet ----------------------------------------------------------


def test_overlapping_views_of_one_buffer():
    """Hand-written IR: a widening load, an ALU add whose destination overlaps its sources,
    an accumulation, a move within one buffer and a store of two rows per iteration. Every
    lane of an instruction is read before any is written, as the simulator reads it."""
    from npukit.layout import Layout

    i8, i32 = np.dtype("int8"), np.dtype("int32")
    x = ir.Buffer("x", "LRAM", i8, 48, "in")
    p = ir.Buffer("pdata", "PRAM", i32, 40)
    i = ir.Var("i0", 2)
    pair = ("pair", ("int32", None))

    def pv(n, off, stride=1):
        return ir.View(p, Layout((n,), i32, (stride,)), ir.affine(off))

    def build(spec):
        y = ir.Buffer("y", "LRAM", i32, spec.footprint()[1], "out")
        rows = ir.View(y, Layout((2, 13), i32, (spec.strides[0], 1), spec.offset),
                       i * 2 * spec.strides[0])
        body = (
            ir.Fill(pv(40, 0), 3, "fill"),
            ir.Loop(i, (
                ir.Copy(pv(24, 0), ir.View(x, Layout((24,), i8), i * 24), "ndl_i", None, "widen"),
                ir.Compute("alu", "add", pv(16, 4), (pv(16, 0), pv(16, 8)),
                           attrs=(("combine", "add"), pair), label="overlap"),
                ir.Compute("alu", "sub", pv(8, 30), (pv(8, 1, 2), pv(8, 0)), acc=True,
                           attrs=(("combine", "max"), pair), label="acc"),
                ir.Copy(pv(20, 2), pv(20, 0), "ndl_q", None, "move within"),
                ir.Copy(rows, pv(26, 1), "ndl_q", None, "store"),
            ), "loop"),
        )
        return ir.Program("overlaps", nk.target("torq"), ((x, nk.spec((48,), i8)), (y, spec)),
                          (p,), body)
    rng = np.random.default_rng(31)
    check_against_sim(build, {"x": rand(rng, 48, "int8")}, "y", (4, 13), "int32", (2, 0))


def test_constant_buffer():
    """A constant (``role="const"``) is a static const array in C, read like a tensor."""
    from npukit.layout import Layout

    i16, i32 = np.dtype("int16"), np.dtype("int32")
    table = np.array([(-1) ** k * (k * 997 % 30011) for k in range(24)], i16)
    x = ir.Buffer("x", "LRAM", i16, 24, "in")
    c = ir.Buffer("table", "LRAM", i16, 24, "const", data=table.tobytes())
    idata, wdata = ir.Buffer("idata", "IRAM", i16, 8), ir.Buffer("wdata", "WRAM", i16, 8)
    pdata, qdata = ir.Buffer("pdata", "PRAM", i32, 8), ir.Buffer("qdata", "ACT", i32, 8)
    i = ir.Var("i0", 3)

    def v(buf, off=0, dt=i16):
        return ir.View(buf, Layout((8,), dt), ir.affine(off))

    def build(spec):
        y = ir.Buffer("y", "LRAM", i16, spec.footprint()[1], "out")
        body = (ir.Loop(i, (
            ir.Copy(v(idata), v(x, i * 8), "ndl_i", None, "data = load(x[i])"),
            ir.Copy(v(wdata), v(c, i * 8), "ndl_w", None, "table = load(table[i])"),
            ir.Compute("alu", "add", v(pdata, 0, i32), (v(idata), v(wdata)),
                       attrs=(("combine", "add"), ("pair", ("int16", "int16"))), label="add"),
            ir.Compute("act", "clamp", v(qdata, 0, i32), (v(pdata, 0, i32),),
                       attrs=(("hi", 20000), ("lo", -20000), ("pair", ("int16", "int16"))),
                       label="clamp"),
            ir.Copy(ir.View(y, Layout((8,), i16, (spec.strides[0],), spec.offset),
                            i * 8 * spec.strides[0]), v(qdata, 0, i32), "ndl_q", None, "store"),
        ), "loop"),)
        return ir.Program("lookup_add", nk.target("torq"), ((x, nk.spec((24,), i16)), (y, spec)),
                          (c, idata, wdata, pdata, qdata), body)
    a = rand(np.random.default_rng(32), 24, "int16")
    out = check_against_sim(build, {"x": a}, "y", (24,), "int16", step=2)
    assert (out == np.clip(a.astype(int) + table, -20000, 20000)).all()
    assert "static const int16_t table[24] = {" in build(nk.spec((24,), i16)).c_source()
