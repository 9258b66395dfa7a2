"""The Compass DSL's dot products (``npukit.dsl.builtins_dot``): ``vdot``/``vqdot``,
``vdpa``/``vqdpa`` and the 4x4 matrix products ``vmml``/``vmma``, against readings of their
definitions in Python integers (clamped to the result's range) and float64 (rounded once to
float32). Masks are run-time comparisons; lanes without an active input hold npukit's poison;
the simulator and the generated C agree bit for bit.

(No ``from __future__ import annotations``: the kernels' annotations use local type names.)"""

import functools

import ml_dtypes
import numpy as np
import pytest
from dsl_check import assert_lanes, run_both
from hypothesis import given, settings
from hypothesis import strategies as st

import npukit as nk
import npukit.dsl as S

rng = np.random.default_rng(2327)
NATIVE = {"int8": 32, "uint8": 32, "int16": 16, "uint16": 16, "int32": 8, "uint32": 8,
          "float16": 16, "bfloat16": 16, "float32": 8}


def vt(dtype: str, lanes: int | None = None) -> str:
    return f"{dtype}x{lanes or NATIVE[dtype]}"


def ints(dtype: str, n: int) -> np.ndarray:
    """Random lanes of ``dtype`` with its bounds in the first four lanes (so sums of
    products reach the result's bounds)."""
    info = np.iinfo(dtype)
    v = rng.integers(int(info.min), int(info.max) + 1, n, dtype=np.int64)
    v[:4] = [info.min, info.min, info.max, info.max][:n]
    return np.where(v == 0, 3, v).astype(dtype)


def clip(v: int, dtype: str) -> int:
    info = np.iinfo(dtype)
    return min(max(v, int(info.min)), int(info.max))


def result_type(x: str, y: str, factor: int) -> str:
    bits = 8 * np.dtype(x).itemsize * factor
    return f"{'u' if x[0] == 'u' and y[0] == 'u' else ''}int{bits}"


# -- vdot / vqdot ----------------------------------------------------------------------------

@functools.cache
def dot_program(name: str, x_t: str, y_t: str, out_t: str):
    fn = getattr(S, name)
    xv, yv, ov = vt(x_t), vt(y_t), vt(out_t, NATIVE[x_t] * 8 * np.dtype(x_t).itemsize //
                                     (8 * np.dtype(out_t).itemsize))
    mv = vt(x_t)

    @S.prim_func
    def dot(x: S.ptr(xv, "global"), y: S.ptr(yv, "global"), m: S.ptr(mv, "global"),
            out: S.ptr(ov, "global"), whole: S.ptr(ov, "global")):
        out[0] = fn(x[0], y[0], m[0] > 0)
        whole[0] = fn(x[0], y[0])

    return S.build(dot, target="compass"), S.DType(ov).lanes


def expected_dot(x, y, m, group: int, out_t: str) -> tuple[list, list]:
    """Integer sums of products per group of ``group`` lanes (the active ones), clamped;
    and which result lanes have an active input."""
    n = len(x) // group
    sums, active = [], []
    for g in range(n):
        lanes = range(group * g, group * g + group)
        sums.append(clip(sum(int(x[i]) * int(y[i]) for i in lanes if m[i]), out_t))
        active.append(any(m[i] for i in lanes))
    return sums, active


@pytest.mark.parametrize("name, group, bits", [("vdot", 2, 8), ("vdot", 2, 16),
                                               ("vqdot", 4, 8)])
@pytest.mark.parametrize("signs", ["ii", "iu", "ui", "uu"])
def test_integer_dot_products_saturate_to_twice_or_four_times_the_bits(name, group, bits,
                                                                       signs):
    x_t, y_t = (f"{'u' if s == 'u' else ''}int{bits}" for s in signs)
    out_t = result_type(x_t, y_t, group)
    prog, out_n = dot_program(name, x_t, y_t, out_t)
    n = NATIVE[x_t]
    x, y = ints(x_t, n), ints(y_t, n)
    m = (rng.random(n) < 0.7).astype(x_t)
    m[:group] = 1  # the first group whole: its products of the bounds saturate
    m[group:2 * group] = 0  # the second group has no active lane: undefined
    got = run_both(prog, dict(x=x, y=y, m=m), {"out": (out_n, out_t), "whole": (out_n, out_t)})
    sums, active = expected_dot(x, y, m, group, out_t)
    assert_lanes(got["out"], np.array(sums, np.int64), active)
    assert not active[1]
    full, _ = expected_dot(x, y, np.ones(n, bool), group, out_t)
    assert_lanes(got["whole"], np.array(full, np.int64))
    if signs in ("ii", "uu") and group == 2:  # min·min (max·max) twice leaves the range
        assert max(full[:2]) == np.iinfo(out_t).max


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_vqdot_of_16_bit_floats_sums_in_float64_into_the_even_float32_lanes(dtype):
    prog, out_n = dot_program("vqdot", dtype, dtype, "float32")
    n = NATIVE[dtype]
    x = rng.normal(0, 300, n).astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    y = rng.normal(0, 300, n).astype(x.dtype)
    x[:4], y[:4] = [3000, -3000, 1, 0.25], [3000, 3000, 1, 0.25]  # cancels to 1.0625
    m = (rng.random(n) < 0.7).astype(np.float16 if dtype == "float16" else x.dtype)
    m[:4] = 1
    m[8:12] = 0  # the third group has no active lane
    got = run_both(prog, dict(x=x, y=y, m=m), {"out": (out_n, "float32"),
                                                "whole": (out_n, "float32")})
    want = np.zeros(out_n)
    active = np.zeros(out_n, bool)
    for g in range(n // 4):
        for i in range(4 * g, 4 * g + 4):
            if m[i] > 0:
                want[2 * g] += float(x[i]) * float(y[i])
                active[2 * g] = True
    assert_lanes(got["out"], want.astype(np.float32), active)
    assert got["out"][0] == np.float32(1.0625) and not active[4]


def test_dot_products_report_cycles_for_one_instruction_per_builtin():
    prog, _ = dot_program("vdot", "int16", "int16", "int32")
    n = 16
    res = prog.run("sim", x=ints("int16", n), y=ints("int16", n), m=np.ones(n, np.int16),
                   out=np.zeros(8, np.int32), whole=np.zeros(8, np.int32))
    assert res.cycles > 0
    assert sum(1 for st, _ in prog.walk() if getattr(st, "op", None) == "vdot") == 2


# -- vdpa / vqdpa ----------------------------------------------------------------------------

@functools.cache
def dpa_program(name: str, x_t: str, y_t: str, acc_t: str, acc_lanes: int):
    fn = getattr(S, name)
    xv, yv, av = vt(x_t), vt(y_t), vt(acc_t, acc_lanes)

    @S.prim_func
    def dpa(acc: S.ptr(av, "global"), x: S.ptr(xv, "global"), y: S.ptr(yv, "global"),
            m: S.ptr(xv, "global"), out: S.ptr(av, "global")):
        out[0] = fn(acc[0], x[0], y[0], m[0] != 0)

    return S.build(dpa, target="compass")


@pytest.mark.parametrize("name, group, bits", [("vdpa", 2, 8), ("vdpa", 2, 16),
                                               ("vqdpa", 4, 8)])
@pytest.mark.parametrize("signs", ["ii", "iu", "ui", "uu"])
def test_integer_accumulations_saturate_the_exact_sum(name, group, bits, signs):
    x_t, y_t = (f"{'u' if s == 'u' else ''}int{bits}" for s in signs)
    acc_t = result_type(x_t, y_t, group)
    n = NATIVE[x_t]
    prog = dpa_program(name, x_t, y_t, acc_t, n // group)
    x, y = ints(x_t, n), ints(y_t, n)
    acc = ints(acc_t, n // group)
    info = np.iinfo(acc_t)
    # lane 1: acc at the top plus the greatest products (clamped); lane 2: acc at the
    # bottom plus random products
    acc[1], acc[2] = info.max, info.min
    x[group:2 * group], y[group:2 * group] = np.iinfo(x_t).max, np.iinfo(y_t).max
    m = (rng.random(n) < 0.75).astype(x_t)
    m[group:3 * group] = 1
    got = run_both(prog, dict(acc=acc, x=x, y=y, m=m), {"out": (n // group, acc_t)})
    want = [clip(int(acc[g]) + sum(int(x[i]) * int(y[i]) for i in range(group * g,
                                                                        group * (g + 1))
                                   if m[i]), acc_t) for g in range(n // group)]
    assert_lanes(got["out"], np.array(want, np.int64))
    assert want[1] == info.max


@pytest.mark.slow
@given(st.lists(st.integers(-32768, 32767), min_size=32, max_size=32),
       st.lists(st.integers(-2**31, 2**31 - 1), min_size=8, max_size=8))
@settings(max_examples=25, deadline=None)
def test_vdpa_of_int16_is_the_clamped_exact_sum(vals, accs):
    prog = dpa_program("vdpa", "int16", "int16", "int32", 8)
    x, y = np.array(vals[:16], np.int16), np.array(vals[16:], np.int16)
    acc, m = np.array(accs, np.int32), np.ones(16, np.int16)
    out = np.zeros(8, np.int32)
    prog.run("sim", acc=acc, x=x, y=y, m=m, out=out)
    want = [clip(accs[g] + vals[2 * g] * vals[16 + 2 * g] +
                 vals[2 * g + 1] * vals[17 + 2 * g], "int32") for g in range(8)]
    assert out.tolist() == want


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_vqdpa_of_16_bit_floats_adds_to_the_even_lanes_and_keeps_the_odd(dtype):
    prog = dpa_program("vqdpa", dtype, dtype, "float32", 8)
    np_t = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16
    x, y = rng.normal(0, 30, 16).astype(np_t), rng.normal(0, 30, 16).astype(np_t)
    acc = rng.normal(0, 1000, 8).astype(np.float32)
    m = (rng.random(16) < 0.7).astype(np_t)
    m[4:8] = 0
    got = run_both(prog, dict(acc=acc, x=x, y=y, m=m), {"out": (8, "float32")})
    want = acc.astype(np.float64)
    for i in range(16):
        if m[i] != 0:
            want[(i // 4) * 2] += float(x[i]) * float(y[i])
    assert_lanes(got["out"], want.astype(np.float32))
    assert got["out"][2] == acc[2] and got["out"][1] == acc[1]


# -- vmml / vmma -----------------------------------------------------------------------------

@functools.cache
def matmul_program(name: str, dtype: str, into_register: bool):
    fn = getattr(S, name)
    v = vt(dtype)

    if into_register:
        @S.prim_func
        def matmul(x: S.ptr(v, "global"), y: S.ptr(v, "global"), c: S.ptr("fp32x8", "global"),
                   out: S.ptr("fp32x8", "global")):
            acc = S.vconcat((c[0], c[1]))
            fn(acc.addr, x[0], y[0])
            lo, hi = S.vsplit(acc)
            out[0] = lo
            out[1] = hi
    else:
        @S.prim_func
        def matmul(x: S.ptr(v, "global"), y: S.ptr(v, "global"), c: S.ptr("fp32", "global"),
                   out: S.ptr("fp32", "global")):
            for i in range(16):
                out[i] = c[i]
            fn(out, x[0], y[0])

    return S.build(matmul, target="compass")


@pytest.mark.parametrize("into_register", [True, False])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["vmml", "vmma"])
def test_4x4_matrix_products_round_the_float64_sums_once(name, dtype, into_register):
    prog = matmul_program(name, dtype, into_register)
    np_t = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16
    x, y = rng.normal(0, 20, 16).astype(np_t), rng.normal(0, 20, 16).astype(np_t)
    c = rng.normal(0, 100, 16).astype(np.float32)
    got = run_both(prog, dict(x=x, y=y, c=c), {"out": (16, "float32")})
    a, b = x.astype(np.float64).reshape(4, 4), y.astype(np.float64).reshape(4, 4)
    want = a @ b.T  # y holds its matrix by columns: row j of y is column j
    if name == "vmma":
        want = (c.astype(np.float64).reshape(4, 4) + want)
    # float64 sums of exact products: the order cannot change them by more than a rounding
    # of float64, far below float32's
    assert_lanes(got["out"], want.reshape(-1).astype(np.float32))


# -- refusals --------------------------------------------------------------------------------

def refused(body, x_t: str, y_t: str, out_t: str):
    @S.prim_func
    def bad(x: S.ptr(x_t, "global"), y: S.ptr(y_t, "global"), out: S.ptr(out_t, "global")):
        body(x, y, out)

    with pytest.raises(nk.NpukitError) as e:
        S.build(bad, target="compass")
    return str(e.value)


@pytest.mark.parametrize("name, x_t, y_t, words", [
    ("vdot", "int8x32", "int16x16", "Argument type mismatch: x is int8x32, y is int16x16"),
    ("vdot", "int32x8", "int32x8", "Only supports 8-bit or 16-bit integer"),
    ("vdot", "float16x16", "float16x16", "Only supports 8-bit or 16-bit integer"),
    ("vqdot", "int16x16", "int16x16", "Only supports 8-bit integer instruction or 16-bit"),
    ("vqdot", "float16x16", "bfloat16x16", "Argument type mismatch"),
    ("vdot", "int8x35", "int8x35", "multiple of the native 32"),
])
def test_dot_products_refuse_other_types_naming_them(name, x_t, y_t, words):
    def body(x, y, out):
        out[0] = getattr(S, name)(x[0], y[0])

    assert words in refused(body, x_t, y_t, "int32x8")


@pytest.mark.parametrize("name, x_t, acc_t", [("vdpa", "int8x32", "int32x8"),
                                              ("vdpa", "int32x8", "int8x32"),
                                              ("vqdpa", "int8x32", "int16x16"),
                                              ("vqdpa", "float32x8", "float16x16")])
def test_accumulations_refuse_an_accumulator_of_the_wrong_width(name, x_t, acc_t):
    def body(x, y, out):
        out[0] = getattr(S, name)(out[0], x[0], y[0])

    msg = refused(body, x_t, x_t, acc_t)
    assert "Argument type mismatch" in msg and acc_t in msg and x_t in msg


def test_matrix_products_refuse_a_non_float32_destination():
    def body(x, y, out):
        S.vmml(out, x[0], y[0])

    assert "float32 pointer" in refused(body, "float16x16", "float16x16", "int32")
