"""Hostile input to every public entry of ``npukit.lut``: each call either works or raises
an ``NpukitError`` (mostly ``LutError``) naming what is wrong, never a raw ``TypeError``,
``ValueError``, ``IndexError``, ``OverflowError`` or ``AttributeError``; plus the specific
cases that used to escape raw, each checked for its message."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import npukit.lut as L
from npukit import NpukitError
from npukit.errors import LutError

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

# Values a careless or hostile caller may pass where a number, an array or a name is meant.
HOSTILE = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.integers(-3, 40),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4),
    st.complex_numbers(allow_nan=False, max_magnitude=10), st.lists(st.integers(-5, 5), max_size=4),
    st.sampled_from([np.array([1.5, np.nan]), np.array([[1, 2], [3, 4]], np.int8),
                     np.array([], np.int16), np.array(["a"]), object(), [[1], [2, 3]],
                     np.int64(2**62), np.uint64(2**64 - 1), np.float32("nan"), 2**63, "int8",
                     "bfloat16", "int7", "float64", "uint16", np.arange(5, dtype=np.int8)]))
NAMES = st.one_of(st.sampled_from(sorted(L.FUNCTIONS)), st.sampled_from(["sigmod", "tan", ""]),
                  HOSTILE)


def survives(call, *args, **kwargs):
    """Call, and accept a result or an NpukitError; anything else fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # overflow warnings of hostile floats are fine
        try:
            return call(*args, **kwargs)
        except NpukitError:
            return None


def _fns():
    """Callables of every wrong shape and kind, and well-behaved ones."""
    return st.sampled_from([
        lambda x: 1.0, lambda x: x[:3], lambda x: np.stack([x, x]), lambda x: list(x),
        lambda x: "a", lambda x: None, lambda x: x + 1j, lambda x: 1 / 0, lambda x: x * np.nan,
        lambda x: 1e300 * x, lambda x: 1e-300 * x, lambda x: np.zeros_like(x), np.sin,
        lambda x: x.astype(np.float32), lambda x: x > 0, lambda x: [[1]], lambda x: {x.size},
    ])


@SETTINGS
@given(fn=st.one_of(NAMES, _fns()), lo=st.one_of(HOSTILE, st.floats(-10, 10)),
       hi=st.one_of(HOSTILE, st.floats(-10, 10)), entries=st.one_of(HOSTILE, st.integers(-2, 300)),
       kind=st.one_of(st.sampled_from(["direct", "linear"]), HOSTILE),
       in_dtype=st.one_of(st.sampled_from([None, "int8", "int16", "uint8", "bfloat16"]), HOSTILE),
       out_dtype=st.one_of(st.sampled_from([None, "int8", "int16", "int32", "float32"]), HOSTILE),
       method=st.one_of(st.sampled_from(["sample", "minimax"]), HOSTILE))
@pytest.mark.slow
def test_design_never_raises_raw(fn, lo, hi, entries, kind, in_dtype, out_dtype, method):
    survives(L.design, fn, lo, hi, entries, kind, in_dtype, out_dtype, method)


DESIGNS = [L.design("tanh", -4, 4, 64), L.design("sigmoid", -8, 8, 33, kind="linear"),
           L.design("silu", -8, 8, 40, kind="linear", in_dtype="int16", out_dtype="int16"),
           L.design("reciprocal", 1, 2, 20, in_dtype="uint8", out_dtype="int8")]


@SETTINGS
@given(d=st.sampled_from(DESIGNS), x=HOSTILE, points=HOSTILE)
@pytest.mark.slow
def test_design_methods_never_raise_raw(d, x, points):
    for method in (d.quantize, d.dequantize, d.evaluate, d.reference, d.ulp, d.sweep):
        survives(method, x)
    survives(d.check_store, x, "t")
    survives(d.check_store, "int8", x)
    survives(d.error, x=x)
    if not isinstance(points, int) or abs(points) < 10**5:     # a valid huge sweep is slow
        survives(d.error, points)


TABLES = [L.Lut(np.arange(8, dtype=np.int16)), L.Lut(np.arange(5, dtype=np.int8)),
          L.Lut(np.ones(8, np.int16), np.ones(8, np.int16)),
          L.Lut(np.ones(4, np.float32), np.ones(4, L.design("tanh", -1, 1, 4,
                                                            kind="linear").lut.slopes.dtype))]


@SETTINGS
@given(lut=st.one_of(st.sampled_from(TABLES), HOSTILE), x=st.one_of(HOSTILE, st.sampled_from(
           [np.array([-3, 0, 7], np.int8), np.array([1, 9], np.int16),
            np.array([2**64 - 1], np.uint64), np.array([-2**63], np.int64)])),
       step=HOSTILE, bias=HOSTILE, extra=HOSTILE)
@pytest.mark.slow
def test_semantics_never_raise_raw(lut, x, step, bias, extra):
    survives(L.parallel_lookup, lut, x, step, bias, extra)
    survives(L.parallel_lookup, lut, x, 0, bias)
    survives(L.linear_approx, lut, x, step, bias, extra)
    survives(L.linear_approx, lut, x, 3, bias, 0, extra is True)
    survives(L.linear_type, lut, x)


@SETTINGS
@given(a=HOSTILE, b=HOSTILE, c=HOSTILE, d=HOSTILE)
def test_tables_never_raise_raw(a, b, c, d):
    t = survives(L.Lut, a, b)
    for lut in TABLES + ([t] if t is not None else []):
        survives(lut.layout, a, b)
        survives(lut.layout, 2, c)
        survives(L.Lut.from_layout, a, b, offset_dtype=c, parallel=d)
        image = survives(lut.layout, 4)
        if image is not None:
            survives(L.Lut.from_layout, image[0], lut.size, offset_dtype=c, slope_dtype=d)
            survives(L.Lut.from_layout, image, lut.size, offset_dtype=lut.offset_dtype,
                     slope_dtype=lut.slope_dtype, parallel=4, bank_bits=a)


@SETTINGS
@given(x=HOSTILE)
def test_functions_never_raise_raw(x):
    for fn in (L.erf, L.erfc, L.fast_sigmoid, L.taylor_sigmoid, L.table_sigmoid, L.function,
               L.format_errors, *L.FUNCTIONS.values()):
        survives(fn, x)
    if not isinstance(x, int) or abs(x) < 10**4:
        survives(L.sigmoid_errors, x)
    survives(L.sigmoid_errors, 11, {"mine": x})
    survives(L.sigmoid_errors, 11, {"mine": lambda v: x})
    survives(L.Function, x, np.sin, (-1, 1), "")
    survives(L.Function, "f", np.sin, x, "")


# -- the cases that used to escape raw, with their messages --------------------------------------

@pytest.mark.parametrize("fn, words", [
    (lambda x: 1.0, ["returned shape ()", "input of shape (4097,)", "np.full_like"]),
    (lambda x: x[:3], ["returned shape (3,)", "(4097,)"]),
    (lambda x: np.stack([x, x]), ["returned shape (2, 4097)"]),
    (lambda x: x + 1j, ["complex128", "real numbers"]),
    (lambda x: None, ["returned shape ()"]),
    (lambda x: 1 / 0, ["raised ZeroDivisionError", "4097 values from -1 to 1", "division by zero"]),
    (lambda x: 1e300 * x, ["values reach 1e+300", "largest bfloat16"]),
])
def test_design_names_a_bad_function(fn, words):
    with pytest.raises(LutError) as err:
        L.design(fn, -1, 1, 16)
    assert "fn <lambda>" in str(err.value)
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_design_rules_for_hostile_arguments():
    cases = [
        (("sigmod", -1, 1, 16), {}, ["did you mean 'sigmoid'?"]),
        (("tanh", "-1", 1, 16), {}, ["lo='-1' must be a real number"]),
        (("tanh", -1, None, 16), {}, ["hi=None must be a real number"]),
        (("tanh", math.nan, 1, 16), {}, ["finite with lo < hi"]),
        (("tanh", -1e308, 1e308, 16), {}, ["too wide"]),
        (("tanh", -1, 1, 10**30), {}, ["[2, 65536]"]),
        (("tanh", -1, 1, 16.0), {}, ["entries=16.0"]),
        (("tanh", -1, 1, -4), {}, ["entries=-4"]),
        ((lambda x: 1e300 * x, -1, 1, 16), {"kind": "linear"}, ["slopes reach", "bfloat16"]),
    ]
    for args, kwargs, words in cases:
        with pytest.raises(LutError) as err:
            L.design(*args, **kwargs)
        for word in words:
            assert word in str(err.value), (word, str(err.value))


def test_bias_beyond_an_unsigned_int_is_a_lut_error():
    t = L.Lut(np.arange(8, dtype=np.int16))
    x = np.array([-3, 5], np.int8)
    for bias in (2**63, 2**70, np.uint64(2**63), 2**32):
        with pytest.raises(LutError, match=r"power of two below 2\*\*32"):
            L.parallel_lookup(t, x, 0, bias)
    assert L.parallel_lookup(t, x, 0, 2**31).tolist() == [7, 7]      # saturated, and legal
    with pytest.raises(LutError, match="lut must be a npukit.lut.Lut; got ndarray"):
        L.parallel_lookup(np.arange(8), x)
    with pytest.raises(LutError, match="lut must be a npukit.lut.Lut; got int"):
        L.linear_approx(3, x, 2)


def test_quantize_refuses_nan_for_integer_inputs_and_values_must_be_numbers():
    d = L.design("tanh", -4, 4, 64, in_dtype="int8")
    with pytest.raises(LutError, match=r"x holds NaN \(at flat index 1\); an int8 input"):
        d.quantize([0.5, math.nan])
    with pytest.raises(LutError, match="x must be real numbers"):
        d.evaluate("1.0")
    with pytest.raises(LutError, match="x must be real numbers"):
        d.error(x=[[1.0], [2.0, 3.0]])
    assert d.quantize([math.inf, -math.inf]).tolist() == [127, -128]  # infinities saturate
    f = L.design("tanh", -4, 4, 64, kind="linear")
    assert np.isnan(f.evaluate(math.nan))                     # bfloat16 input keeps NaN


def test_table_sigmoid_keeps_nan_and_errors_name_their_arguments():
    out = L.table_sigmoid([math.nan, 0.0, math.inf])
    assert np.isnan(out[0]) and out[1] == np.float32(0.5) and out[2] == np.float32(0.999447)
    with pytest.raises(LutError, match=r"points=0 must be an integer in \[2, "):
        L.sigmoid_errors(0)
    with pytest.raises(LutError, match="approximation 'mine' must be a callable"):
        L.sigmoid_errors(11, {"mine": 3})
    with pytest.raises(LutError, match="approximation 'mine' returned shape"):
        L.sigmoid_errors(11, {"mine": lambda x: x[:2]})
    with pytest.raises(LutError, match="format_errors takes the rows of sigmoid_errors"):
        L.format_errors(3)
