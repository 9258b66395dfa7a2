"""The Compass DSL's type rules for Python operators and ``S.cast`` (``npukit.dsl.operators``,
``npukit.dsl.conversion``) against numpy, on the simulator and the C back end (bit for
bit): mixed types promoted, integer ``/``, ``//``, ``%``, ``<<``/``>>``, ``**``, and the
casts that change lanes (parts, tuples, narrowing with repetition, vector literals).

(No ``from __future__ import annotations`` here: the kernels' annotations use the factory's
local type names.)"""

import numpy as np
import pytest
from dsl_check import canary, host_and_c, run_both

import npukit.dsl as S
from npukit.errors import DTypeError

RNG = np.random.default_rng(38)


def _ints(n: int, dtype: str, lo=None, hi=None) -> np.ndarray:
    info = np.iinfo(dtype)
    return RNG.integers(info.min if lo is None else lo, (info.max if hi is None else hi) + 1,
                        n, dtype=np.int64).astype(dtype)


def _trunc_div(a: np.ndarray, b: np.ndarray, dt: str) -> np.ndarray:
    """C's quotient (toward zero), saturated at the top of ``dt`` (the least value / -1)."""
    q = np.abs(a.astype(np.int64)) // np.abs(b.astype(np.int64)) * np.sign(a * 1.0 * b)
    return np.minimum(q, np.iinfo(dt).max).astype(np.int64).astype(dt)


def _build(func):
    return S.build(func, target="compass")


def test_mixed_types_meet_in_the_wider():
    @S.prim_func
    def f(a: S.ptr("i8x8", "global"), b: S.ptr("i32x8", "global"), c: S.ptr("u16x8", "global"),
          out: S.ptr("i32x8", "global"), out2: S.ptr("u16x8", "global")):
        out[0] = a[0] * b[0] - a[0]              # int8x8 and int32x8 meet in int32x8
        out2[0] = c[0] + a[0]                    # uint16 and int8: the wider, uint16

    a, b, c = _ints(8, "int8"), _ints(8, "int32", -1000, 1000), _ints(8, "uint16")
    got = run_both(_build(f), {"a": a, "b": b, "c": c}, {"out": (8, "int32"),
                                                          "out2": (8, "uint16")})
    a64 = a.astype(np.int64)
    assert np.array_equal(got["out"], (a64 * b - a64).astype(np.int32))
    assert np.array_equal(got["out2"], (c.astype(np.int64) + a64).astype(np.uint16))


@pytest.mark.parametrize("dt", ["int8", "uint16", "int32"])
def test_integer_division_remainder(dt):
    t = S.DType(dt).with_lanes(8)

    @S.prim_func
    def f(a: S.ptr(t, "global"), b: S.ptr(t, "global"), q: S.ptr(t, "global"),
          fq: S.ptr(t, "global"), r: S.ptr(t, "global")):
        q[0] = a[0] / b[0]
        fq[0] = a[0] // b[0]
        r[0] = a[0] % b[0]

    a, b = _ints(8, dt), _ints(8, dt)
    b[b == 0] = 3
    if dt == "int8":
        a[0], b[0] = -128, -1                    # the one overflow saturates
    got = run_both(_build(f), {"a": a, "b": b}, {k: (8, dt) for k in ("q", "fq", "r")})
    want = _trunc_div(a, b, dt)
    assert np.array_equal(got["q"], want) and np.array_equal(got["fq"], want)
    assert np.array_equal(got["r"], np.fmod(a.astype(np.int64), b).astype(dt))


def test_shifts_vectors_and_one_lane_values():
    @S.prim_func
    def f(a: S.ptr("i16x16", "global"), s: S.ptr("i16x16", "global"),
          one: S.ptr("int16", "global"), vl: S.ptr("i16x16", "global"),
          vr: S.ptr("i16x16", "global"), sl: S.ptr("int16", "global")):
        vl[0] = a[0] << s[0]
        vr[0] = a[0] >> s[0]
        sl[0] = one[0] << one[1]                 # two one-lane values: the count modulo 32

    a, s = _ints(16, "int16"), _ints(16, "int16", -20, 20)
    one = np.array([3, -30], np.int16)          # -30 mod 32 = 2; read as unsigned: 65506
    got = run_both(_build(f), {"a": a, "s": s, "one": one},
                   {"vl": (16, "int16"), "vr": (16, "int16"), "sl": (1, "int16")})
    count = s.view(np.uint16).astype(np.int64)   # a vector's count is read as unsigned
    a64 = a.astype(np.int64)
    want_l = np.where(count >= 16, 0, a64 << np.minimum(count, 16)).astype(np.int16)
    want_r = (a64 >> np.minimum(count, 63)).astype(np.int16)
    assert np.array_equal(got["vl"], want_l) and np.array_equal(got["vr"], want_r)
    assert got["sl"].tolist() == [3 << 2]


def test_power_of_floats_and_no_integer_power():
    @S.prim_func
    def f(a: S.ptr("fp32x8", "global"), b: S.ptr("fp32x8", "global"),
          out: S.ptr("fp32x8", "global")):
        out[0] = a[0] ** b[0]

    a = RNG.uniform(0.1, 4.0, 8).astype(np.float32)
    b = RNG.uniform(-3.0, 3.0, 8).astype(np.float32)
    got = run_both(_build(f), {"a": a, "b": b}, {"out": (8, "float32")})
    want = np.power(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(got["out"], want, rtol=2 ** -23)

    @S.prim_func
    def g(a: S.ptr("i32x8", "global"), out: S.ptr("i32x8", "global")):
        out[0] = a[0] ** a[0]

    with pytest.raises(DTypeError, match=r"\*\* on int32x8"):
        _build(g)


def test_casts_that_change_lanes():
    @S.prim_func
    def f(a: S.ptr("i8x32", "global"), w: S.ptr("i32x8", "global"),
          hi: S.ptr("i16x16", "global"), ev: S.ptr("i16x16", "global"),
          lh: S.ptr("i32x8", "global"), merged: S.ptr("i16x16", "global"),
          rep: S.ptr("i8x32", "global"), lit: S.ptr("i16x4", "global")):
        hi[0] = S.cast(a[0], "int16", "high")
        ev[0] = S.cast(a[0], "int16", "even")
        lh[0] = S.cast(a[0], "int32", "lh")
        merged[0] = S.cast((w[0], w[0] + 70000), "int16", saturate=True)
        rep[0] = S.cast(w[0], "int8x32")
        lit[0] = S.cast((1, -2, w[0][3], 4), "int16")

    a, w = _ints(32, "int8"), _ints(8, "int32", -100000, 100000)
    outs = {"hi": (16, "int16"), "ev": (16, "int16"), "lh": (8, "int32"),
            "merged": (16, "int16"), "rep": (32, "int8"), "lit": (4, "int16")}
    got = run_both(_build(f), {"a": a, "w": w}, outs)
    w64 = w.astype(np.int64)
    assert np.array_equal(got["hi"], a[16:].astype(np.int16))
    assert np.array_equal(got["ev"], a[::2].astype(np.int16))
    assert np.array_equal(got["lh"], a[8:16].astype(np.int32))
    both = np.concatenate([w64, w64 + 70000])
    assert np.array_equal(got["merged"], np.clip(both, -32768, 32767).astype(np.int16))
    assert np.array_equal(got["rep"], np.resize(w64.astype(np.int8), 32))
    assert got["lit"].tolist() == [1, -2, int(w64[3].astype(np.int16)), 4]


def test_cast_refuses_what_the_public_dsl_refuses():
    @S.prim_func
    def widen_two_parts(a: S.ptr("i8x32", "global"), out: S.ptr("i32x8", "global")):
        out[0] = S.cast(a[0], "int32", "low")        # a half is for twice the bits

    with pytest.raises(DTypeError, match="part='low'"):
        _build(widen_two_parts)


def test_one_lane_quotient_and_remainder():
    @S.prim_func
    def f(a: S.ptr("int32", "global"), out: S.ptr("int32", "global")):
        out[0] = a[0] // a[1]
        out[1] = a[0] % a[1]

    a = np.array([-17, 5], np.int32)
    got = run_both(_build(f), {"a": a}, {"out": (2, "int32")})
    assert got["out"].tolist() == [int(-17 / 5), int(np.fmod(-17, 5))]


def test_and_or_not_on_one_lane_bools():
    """``and``/``or``/``not`` of one-lane bools are the lanes' S.vand/S.vor/S.vnot, inside an
    ``if`` on a run-time value and in an assignment; on build-time values Python's own."""
    @S.prim_func
    def f(a: S.ptr("int16", "global"), out: S.ptr("int16", "global")):
        for i in range(8):
            if a[i] >= 1 and a[i] <= 5 and i != 99:
                out[i] = a[i]
            elif not a[i] < 1 or i < 0:
                out[i] = 5
            else:
                out[i] = 1
        m = a[0] > 0 or a[1] > 0
        if not m:
            out[8] = 7
        else:
            out[8] = 8

    a = np.array([-3, 0, 1, 3, 5, 6, 300, -300, 0], np.int16)
    want = np.where((a >= 1) & (a <= 5), a, np.where(a >= 1, 5, 1))
    want[8] = 8 if a[0] > 0 or a[1] > 0 else 7
    for _, out in host_and_c(f, a, canary(9, "int16")):  # the simulator, then the C
        assert out.tolist() == want.tolist()


def test_typed_scalars_meet_and_convert_on_return_and_store():
    """int8 + float16 is float16 (S.cast's conversion), a sub-function's result takes its
    annotated type, and a typed scalar stored into an int32 element converts (truncating)."""
    @S.prim_func
    def total(v0: S.i8, v2: S.fp16, v3: S.fp32) -> S.i32:
        return v0 + v2 + v3

    @S.prim_func
    def f(out: S.ptr("i32", "global")):
        out[0] = total(11, 2.75, 40.5)
        out[1] = S.i8(-7) + S.fp16(0.5)

    want = [int(np.float32(np.float16(11 + 2.75)) + np.float32(40.5)), int(-7 + 0.5)]
    for (out,) in host_and_c(f, canary(2, "int32")):
        assert out.tolist() == want


def test_docstring_examples():
    import doctest

    from npukit.dsl import conversion, operators

    for mod in (conversion, operators):
        result = doctest.testmod(mod)
        assert result.attempted > 0 and result.failed == 0, mod.__name__
