"""The Compass DSL's vector operations against numpy, with hypothesis: the mask convention
of the arithmetic (``S.vadd(a, b, mask=m, r=y)`` is ``where(m, a + b, y)``), gather bounds,
and casts. Each kernel loads one vector per TEC, so a run covers 4 vectors; the simulator
and the C back end must both match.

(No ``from __future__ import annotations`` here: the kernels' annotations use the factory's
local type names.)"""

import functools

import numpy as np
import pytest
from dsl_check import bits, canary
from float_oracle import rounded
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import npukit as nk
import npukit.dsl as S

SETTINGS = settings(max_examples=20, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])
TYPES = ["fp16x16", "fp32x8", "i16x16", "u16x16", "i32x8", "u8x32"]
BACKENDS = ("sim", "c")


def _elems(vt: str) -> tuple[np.dtype, int]:
    t = S.DType(vt)
    return t.elem, 4 * t.lanes  # one vector per TEC


def _values(dt: np.dtype, n: int):
    if dt.kind == "f":
        return arrays(dt, n, elements=st.floats(width=8 * dt.itemsize, allow_nan=True,
                                                allow_infinity=True))
    return arrays(dt, n, elements=st.integers(int(np.iinfo(dt).min), int(np.iinfo(dt).max)))


# -- the mask convention -------------------------------------------------------------------

@functools.cache
def masked_program(op: str, vt: str, with_r: bool):
    fn = getattr(S, op)

    @S.prim_func
    def masked(a: S.ptr(vt, "global"), b: S.ptr(vt, "global"), r: S.ptr(vt, "global"),
               m: S.ptr(vt, "global"), out: S.ptr(vt, "global")):
        tid = S.get_local_id()
        mask = m[tid] > 0
        if with_r:  # a build-time choice: plain Python around the kernel's operations
            out[tid] = fn(a[tid], b[tid], mask=mask, r=r[tid])
        else:
            out[tid] = fn(a[tid], b[tid], mask=mask)

    return S.build(masked, target="compass")


def _greater(a, b):
    """vmax: a NaN first operand wins, else the greater, the second one on ties."""
    return a if a != a or a > b else b


def _lesser(a, b):
    return a if a != a or a < b else b


def op_reading(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The operation in numpy's own arithmetic of the dtype (float16 numpy rounds each
    operation to float16; integers wrap)."""
    with np.errstate(all="ignore"):
        if op in ("vmax", "vmin"):
            pick = _greater if op == "vmax" else _lesser
            return np.array([pick(x, y) for x, y in zip(a, b)], a.dtype)
        return {"vadd": np.add, "vsub": np.subtract, "vmul": np.multiply}[op](a, b)


@pytest.mark.parametrize("vt", [pytest.param(t, marks=pytest.mark.slow) if t == "fp16x16" else t
                                for t in TYPES])  # float16 below: the poisoned-lanes test
@pytest.mark.parametrize("op", ["vadd", "vsub", "vmul", "vmax", "vmin"])
@SETTINGS
@given(data=st.data())
def test_masked_arithmetic_is_where_mask_op_else_r(op, vt, data):
    dt, n = _elems(vt)
    a, b, r = (data.draw(_values(dt, n)) for _ in range(3))
    m = data.draw(arrays(dt, n, elements=st.sampled_from([0, 1])))
    want = np.where(m > 0, op_reading(op, a, b), r).astype(dt)
    prog = masked_program(op, vt, True)
    outs = {}
    for backend in BACKENDS:
        out = outs[backend] = np.zeros(n, dt)
        prog.run(backend, a=a, b=b, r=r, m=m, out=out)
        # Which NaN an operation of two NaNs returns is the arithmetic's choice (numpy on
        # x86 keeps one operand's, the simulator the other's): a NaN lane is any NaN here.
        nan = np.isnan(want) & (m > 0) if dt.kind == "f" else np.zeros(n, bool)
        assert out[~nan].tobytes() == want[~nan].tobytes(), backend
        assert np.isnan(out[nan]).all(), backend
    # The back ends give the same bits except where both operands are NaN: a C compiler may
    # swap the operands of a commutative vector add, and x86 keeps the first one's NaN.
    both = (np.isnan(a) & np.isnan(b) & (m > 0)) if dt.kind == "f" else np.zeros(n, bool)
    assert outs["sim"][~both].tobytes() == outs["c"][~both].tobytes()


@pytest.mark.slow
@pytest.mark.parametrize("vt", ["fp16x16", "i32x8"])
@SETTINGS
@given(data=st.data())
def test_masked_lanes_without_r_are_poisoned(vt, data):
    """Without r the inactive lanes are undefined (the Compass DSL): npukit poisons them."""
    dt, n = _elems(vt)
    a, b = (data.draw(_values(dt, n)) for _ in range(2))
    m = data.draw(arrays(dt, n, elements=st.sampled_from([0, 1])))
    poison = np.full(1, 0xA5, np.uint8).repeat(dt.itemsize).view(dt)[0] if dt.kind != "f" \
        else np.nan
    want = np.where(m > 0, op_reading("vadd", a, b), dt.type(poison))
    for backend in BACKENDS:
        out = np.zeros(n, dt)
        # r is never read: its extent, what the kernel touches, is 0 elements.
        masked_program("vadd", vt, False).run(backend, a=a, b=b, r=np.zeros(0, dt), m=m,
                                              out=out)
        np.testing.assert_array_equal(out, want.astype(dt))


# -- gathers -------------------------------------------------------------------------------

@functools.cache
def gather_program(size: int):
    table = (np.arange(size) * 0.25 - 3).astype(np.float16)

    @S.prim_func
    def gather(idx: S.ptr("u16x16", "global"), m: S.ptr("u16x16", "global"),
               out: S.ptr("fp16x16", "global")):
        tab = S.alloc_const((size,), "fp16", table)
        tid = S.get_local_id()
        out[tid] = S.vload_gather(tab, idx[tid], mask=m[tid] > 0)

    return S.build(gather, target="compass"), table


@SETTINGS
@given(size=st.sampled_from([1, 7, 512]), data=st.data())
def test_gather_reads_the_table_and_checks_its_bounds(size, data):
    idx = data.draw(arrays(np.uint16, 64, elements=st.integers(0, 2 * size + 3)))
    m = data.draw(arrays(np.uint16, 64, elements=st.sampled_from([0, 1])))
    prog, table = gather_program(size)
    active = m > 0
    bad = active & (idx >= size)
    if bad.any():
        k = int(np.argmax(bad))
        with pytest.raises(nk.OutOfBoundsError) as err:
            prog.run("sim", idx=idx, m=m, out=np.zeros(64, np.float16))
        msg = str(err.value)
        assert f"'tab' ({size} x float16) reads index {idx[k]} in lane {k % 16}" in msg
        assert f"outside its extent 0..{size - 1}" in msg and f"tec={k // 16}" in msg
        # Generated C never reads outside the table: it clamps the index.
        out = np.zeros(64, np.float16)
        prog.run("c", idx=idx, m=m, out=out)
        want = np.where(active, table[np.minimum(idx, size - 1)], np.float16(0))
        assert out.tobytes() == want.tobytes()
        return
    want = np.where(active, table[np.where(active, idx, 0)], np.float16(0))
    for backend in BACKENDS:
        out = np.full(64, np.nan, np.float16)
        prog.run(backend, idx=idx, m=m, out=out)
        assert out.tobytes() == want.tobytes(), backend


# -- casts ---------------------------------------------------------------------------------

@functools.cache
def cast_program(src: str, dst: str, saturate):
    lanes = S.DType(src).lanes
    out_t = f"{dst}x{lanes}"

    @S.prim_func
    def cast(a: S.ptr(src, "global"), out: S.ptr(out_t, "global")):
        tid = S.get_local_id()
        out[tid] = S.cast(a[tid], dst, saturate=saturate)

    return S.build(cast, target="compass")


def cast_reading(x: np.ndarray, dst: np.dtype, saturate: bool) -> np.ndarray:
    """The Compass DSL's S.cast, read from its Python simulator: float to integer truncates
    toward zero (``np.array(x, int)``), NaN is 0, the value saturates to int32, then keeps
    the destination's low bits (or saturates to it); to a float, one rounding to nearest
    even from the exact value (numpy's, but for bfloat16 the exact ``float_oracle``)."""
    if dst.name == "bfloat16":
        return rounded(x, dst.name)
    if dst.kind == "f":
        with np.errstate(over="ignore"):  # too large for the type: infinity
            return x.astype(dst)
    if x.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            r = np.trunc(x.astype(np.float64))
        r = np.where(np.isnan(r), 0, r)
        v = [int(min(max(t, -2**31), 2**31 - 1)) for t in r]
    else:
        v = [int(t) for t in x]
    lo, hi = int(np.iinfo(dst).min), int(np.iinfo(dst).max)
    bits = 8 * dst.itemsize
    if saturate:
        v = [min(max(t, lo), hi) for t in v]
    else:
        v = [(t - lo) % (1 << bits) + lo for t in v]  # the low bits, read in dst's range
    return np.array(v, dst)


CASTS = [("fp32x8", "u16"), ("fp32x8", "i16"), ("fp32x8", "i32"), ("fp32x8", "u8"),
         ("fp32x8", "i8"), ("fp32x8", "fp16"), ("fp16x16", "fp32"), ("fp16x16", "i32"),
         ("i32x8", "fp32"), ("i32x8", "fp16"), ("i32x8", "i16"), ("i32x8", "u8"),
         ("u16x16", "i16"), ("i16x16", "u32"), ("fp32x8", "bf16"), ("i32x8", "bf16"),
         ("u32x8", "bf16"), ("fp16x16", "bf16")]


@pytest.mark.parametrize("src, dst", [pytest.param(s, d, marks=pytest.mark.slow)
                                      if s == "fp16x16" else (s, d) for s, d in CASTS])
@pytest.mark.parametrize("saturate", [None, True])
@SETTINGS
@given(data=st.data())
def test_cast_matches_the_compass_reading(src, dst, saturate, data):
    to = S.DType(dst).elem
    if saturate and to.kind not in "iu":
        return  # saturation is an integer option
    dt, n = _elems(src)
    if dt.kind == "f":  # plenty of ties (k + 0.5), NaN, infinities, out-of-range values
        lim = 2047 if dt.itemsize == 2 else 140000  # halves float16 holds exactly up to 1024
        halves = st.integers(-lim, lim).map(lambda k: k / 2)
        x = data.draw(arrays(dt, n, elements=st.one_of(
            halves, st.floats(width=8 * dt.itemsize, allow_nan=True, allow_infinity=True))))
    else:
        x = data.draw(_values(dt, n))
    want = cast_reading(x, to, bool(saturate))
    prog = cast_program(src, dst, saturate)
    for backend in BACKENDS:
        out = np.zeros(n, to)
        prog.run(backend, a=x, out=out)
        assert out.tobytes() == want.tobytes(), (backend, x[out != want], out[out != want])


def test_vrint_ties_to_even_and_u16_of_negative_and_nan():
    """The reading documented for the tutorial's S.vrint and S.cast(..., "u16")."""
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -1.0, np.nan, 70000.0], np.float32)

    @S.prim_func
    def k(a: S.ptr("fp32x8", "global"), r: S.ptr("fp32x8", "global"),
          u: S.ptr("u16x8", "global")):
        v = a[0]
        r[0] = S.vrint(v)
        u[0] = S.cast(v, "u16")

    prog = S.build(k, target="compass")
    for backend in BACKENDS:
        r, u = np.zeros(8, np.float32), np.zeros(8, np.uint16)
        prog.run(backend, a=x, r=r, u=u)
        np.testing.assert_array_equal(r, [0, 2, 2, -0.0, -2, -1, np.nan, 70000])
        assert u.tolist() == [0, 1, 2, 0, 65535, 65535, 0, 70000 - 65536]  # truncated


@functools.cache
def lanes_cast_program(src: str, dst: str, lanes: int, saturate):
    @S.prim_func
    def cast(a: S.ptr(f"{src}x{lanes}", "global"), out: S.ptr(f"{dst}x{lanes}", "global")):
        out[0] = S.cast(a[0], dst, saturate=saturate)

    return S.build(cast, target="compass")


def run_cast(src: str, dst: str, x: np.ndarray, saturate=None) -> np.ndarray:
    """``S.cast`` of ``x`` (one vector of its size) on both back ends, outputs canary
    first: their results, bit for bit the same."""
    prog = lanes_cast_program(src, dst, x.size, saturate)
    outs = []
    for backend in BACKENDS:
        out = canary(x.size, dst)
        prog.run(backend, a=x, out=out)
        outs.append(out)
    assert np.array_equal(bits(outs[0]), bits(outs[1])), (outs[0], outs[1])
    return outs[0]


@pytest.mark.parametrize("lanes", [5, 8, 16, 32, 35])
@pytest.mark.parametrize("src", ["float32", "int32", "uint32", "int16"])
def test_cast_to_bfloat16_rounds_once_at_every_lane_count(src, lanes):
    """C stored the integer part of each lane as bfloat16 bits (1.0 became 0x0001) at every
    lane count; int32 lanes beyond 2^24 round once (2^24 + 2^16 + 1: 0x4B81, not float32's
    0x4B80)."""
    dt = np.dtype(src)
    pool = [1, 2, 3, 7, 100, 255, 2**15 - 1, -1, -300]
    if dt.kind == "f":
        pool += [2**24 + 2**16 + 1, 0.5, -2.75, 1 + 2**-8, 1 + 2**-8 + 2**-20, 3.4e38, -0.0,
                 np.inf, np.nan]
    else:
        info = np.iinfo(dt)
        big = [2**24 + 2**16 + 1, 2**24 + 3 * 2**16] if dt.itemsize == 4 else []
        pool = [v for v in pool + big if info.min <= v <= info.max] + [info.min, info.max]
    x = np.resize(np.array(pool, dt), lanes)
    got = run_cast(src, "bfloat16", x)
    assert np.array_equal(bits(got), bits(rounded(x, "bfloat16")))


@pytest.mark.parametrize("dst", ["int32", "int8", "uint16"])
@pytest.mark.parametrize("saturate", [None, True])
def test_cast_float_to_int_truncates_toward_zero(dst, saturate):
    """As the Compass DSL's simulator (``np.array(x, int)``) and its tests read S.cast:
    2.7 -> 2, -2.7 -> -2, ties too (2.5 -> 2, -0.5 -> 0); NaN -> 0; beyond int32 the int32
    limits, then the destination's low bits (``saturate=True``: its limits)."""
    x = np.array([2.7, -2.7, 2.5, -0.5, 0.99, -1.5, 1e10, -1e10, np.nan, np.inf, -np.inf,
                  300.9, -129.5, 65535.9, 70000.4, 2147483520.0], np.float32)
    got = run_cast("float32", dst, x, saturate)
    t = np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=2.0**31, neginf=-2.0**31))
    t = np.clip(t, -2**31, 2**31 - 1).astype(np.int64)
    info = np.iinfo(dst)
    want = np.clip(t, info.min, info.max) if saturate else t
    assert got.tolist() == want.astype(dst).tolist()
    assert got[:6].tolist() == [2, -2, 2, 0, 0, -1] or dst == "uint16"
