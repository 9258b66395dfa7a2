"""design(): parameters, error bounds derived from the mathematics, out-of-range handling,
and the rules it enforces."""

import dataclasses
import math

import ml_dtypes
import numpy as np
import pytest

from npukit.errors import LutError
from npukit.lut import FUNCTIONS, design, linear_approx, parallel_lookup

# Bounds on derivatives, from calculus (not from running the code):
#   sigmoid' <= 1/4;  |sigmoid''| <= 1/(6 sqrt 3) at x = ln(2 +- sqrt 3)
#   tanh'    <= 1;    |tanh''|    <= 4/(3 sqrt 3) at tanh x = 1/sqrt 3
M1 = {"sigmoid": 0.25, "tanh": 1.0}
M2 = {"sigmoid": 1 / (6 * math.sqrt(3)), "tanh": 4 / (3 * math.sqrt(3))}
RANGE = {"sigmoid": (-8.0, 8.0), "tanh": (-4.0, 4.0)}


def _cell(d):
    return math.ldexp(1.0, d.step_bits - d.in_frac_bits)


@pytest.mark.parametrize("name", ["sigmoid", "tanh"])
@pytest.mark.parametrize("entries", [33, 129])
def test_float_linear_errors_obey_the_interpolation_bounds(name, entries):
    # Chord error <= h^2/8 max|f''|; on a segment where f'' keeps its sign (the inflection
    # at 0 is a cell boundary here) the best line errs half that. A bfloat16 slope moves the
    # line by at most 2**-8 relative per unit of the scaled input (cell width 1 there) for
    # the chord and half that after refitting the offset; float32 rounding adds ~1e-7.
    lo, hi = RANGE[name]
    sample = design(name, lo, hi, entries, kind="linear")
    best = design(name, lo, hi, entries, kind="linear", method="minimax")
    h = _cell(sample)
    assert sample.in_frac_bits == -math.log2(h) and sample.step_bits == 0
    slope_step = 2.0**-8 * M1[name] * h
    assert sample.error().max_abs <= h * h / 8 * M2[name] + slope_step + 1e-6
    assert best.error().max_abs <= h * h / 16 * M2[name] + slope_step / 2 + 1e-6
    assert best.error().max_abs < sample.error().max_abs


def test_seed_003_grid_is_what_design_picks_for_33_entries():
    d = design("sigmoid", -8, 8, 33, kind="linear")
    assert (d.step_bits, d.bias, d.in_frac_bits, d.used) == (0, 16, 1, (0, 31))
    # the 33rd entry holds sigmoid(8) flat: slope 0
    assert float(d.lut.slopes[32]) == 0.0
    assert abs(float(d.lut.offsets[32]) - 1 / (1 + math.exp(-8))) < 1e-7


@pytest.mark.parametrize("in_dtype, out_dtype", [("int8", "int8"), ("int16", "int16"),
                                                 ("int16", "int32")])
@pytest.mark.parametrize("method", ["sample", "minimax"])
def test_integer_linear_errors_obey_bounds_with_quantisation(in_dtype, out_dtype, method):
    d = design("sigmoid", -8, 8, 65, kind="linear", in_dtype=in_dtype, out_dtype=out_dtype,
               method=method)
    h = _cell(d)
    fit = h * h / (8 if method == "sample" else 16) * M2["sigmoid"]
    offset_step = math.ldexp(1.0, d.shift_offset - d.out_frac_bits)
    slope_step = math.ldexp(1.0, d.step_bits - d.out_frac_bits)   # one slope unit x rem
    # one input step may be lost at hi (the clamp), worth at most M1 * 2**-in_frac_bits
    top = M1["sigmoid"] * math.ldexp(1.0, -d.in_frac_bits)
    bound = fit + offset_step / 2 + slope_step + top
    e = d.error()
    assert e.max_abs <= bound
    assert e.max_ulp == pytest.approx(e.max_abs / offset_step)


def test_integer_linear_parameters_follow_the_fixed_point_rules():
    d = design("sigmoid", -8, 8, 33, kind="linear", in_dtype="int8", out_dtype="int8")
    assert d.in_frac_bits == 4                 # Q3.4: -8 * 16 = -128, 8 * 16 saturates
    assert d.step_bits == 3 and d.bias == 16   # cells of 2**(3-4) = 0.5
    # offsets use int8 fully: max |offset| ~ 1 -> 2**6; shift_offset makes up the rest
    assert d.out_frac_bits - d.shift_offset == 6
    assert int(np.max(np.abs(d.lut.offsets.astype(int)))) <= 127
    assert int(np.max(np.abs(d.lut.slopes.astype(int)))) >= 64     # slopes use their range


@pytest.mark.parametrize("name", ["sigmoid", "tanh"])
@pytest.mark.parametrize("method, factor", [("sample", 1.0), ("minimax", 0.5)])
def test_direct_errors_obey_the_mean_value_bound(name, method, factor):
    # |f(x) - f(left end)| <= M1 * h; the midrange halves it. float32 output rounding adds
    # at most 2**-24 relative.
    lo, hi = RANGE[name]
    d = design(name, lo, hi, 256, in_dtype="int16", out_dtype="float32", method=method)
    h = _cell(d)
    assert d.error().max_abs <= factor * M1[name] * h + 2.0**-23


def test_direct_signed_design_uses_a_power_of_two_bias_and_saturation():
    d = design("tanh", -3, 5, 256, in_dtype="int16", out_dtype="float32")
    assert d.bias & (d.bias - 1) == 0 and d.bias > 0
    x = np.array([-1e6, -50.0, -3.0, 5.0, 60.0, 1e6])
    y = d.evaluate(x)
    assert y[0] == y[1] and y[4] == y[5]
    assert abs(y[0] - math.tanh(-3)) <= M1["tanh"] * _cell(d)
    assert abs(y[5] - math.tanh(5)) <= M1["tanh"] * _cell(d)


def test_unsigned_direct_design_has_no_bias():
    d = design("reciprocal", 1, 2, 128, in_dtype="uint16", out_dtype="float16",
               method="minimax")
    assert d.bias == 0 and d.in_frac_bits == 15 and d.used == (64, 127)
    # 64 cells of width 1/64 over [1, 2]: |1/x'| <= 1 so the midrange errs <= 1/128,
    # plus float16 rounding of values below 1 (2**-12)
    assert d.error().max_abs <= 1 / 128 + 2.0**-12


@pytest.mark.parametrize("kwargs", [
    {"kind": "linear"},
    {"kind": "linear", "in_dtype": "int8", "out_dtype": "int8"},
    {"kind": "linear", "in_dtype": "int16", "out_dtype": "int32", "method": "minimax"},
    {"kind": "direct", "in_dtype": "int8", "out_dtype": "bfloat16"},
])
def test_out_of_range_inputs_get_the_edge_values(kwargs):
    d = design("silu", -6, 6, 48, **kwargs)
    inside = d.evaluate(np.array([-6.0, 6.0]))
    below = d.evaluate(np.array([-6.001, -7.0, -100.0, -1e9]))
    above = d.evaluate(np.array([6.001, 7.5, 100.0, 1e9]))
    assert np.all(below == below[0]) and np.all(above == above[0])
    if d.kind == "linear":
        assert below[0] == inside[0] and above[0] == inside[1]
    assert d.reference(np.array([1e9]))[0] == pytest.approx(6 / (1 + math.exp(-6)))


def test_evaluate_goes_through_the_exact_semantics():
    d = design("gelu_tanh", -4, 4, 65, kind="linear", in_dtype="int16", out_dtype="int16")
    x = np.linspace(-4, 4, 1001)
    q = np.clip(np.rint(x * 2.0**d.in_frac_bits), -32768, 32767).astype(np.int16)
    acc = linear_approx(d.lut, q, d.step_bits, d.bias, d.shift_offset)
    assert d.evaluate(x).tolist() == np.ldexp(acc.astype(float), -d.out_frac_bits).tolist()
    f = design("exp", -8, 0, 64, in_dtype="int8", out_dtype="int8")
    q8 = f.quantize(np.linspace(-9, 1, 101))
    out = parallel_lookup(f.lut, q8, f.step_bits, f.bias)
    assert f.evaluate(np.linspace(-9, 1, 101)).tolist() == \
        np.ldexp(out.astype(float), -f.out_frac_bits).tolist()


def test_float_linear_kernel_scales_the_bfloat16_input_by_a_power_of_two():
    d = design("tanh", -4, 4, 129, kind="linear")
    x = np.array([-3.3, 0.7, 2.0])
    xs = (x.astype(ml_dtypes.bfloat16).astype(float) * 2.0**d.in_frac_bits).astype(
        ml_dtypes.bfloat16)
    assert d.evaluate(x).tolist() == linear_approx(d.lut, xs, d.step_bits, d.bias).astype(
        float).tolist()


def test_ulp_is_the_spacing_of_the_output_type():
    d = design("sigmoid", -8, 8, 64, in_dtype="int16", out_dtype="float32")
    y = np.array([0.3, 0.5, 0.99, 1e-30])
    assert d.ulp(y).tolist() == np.spacing(y.astype(np.float32)).astype(float).tolist()
    b = design("sigmoid", -8, 8, 64, in_dtype="int16", out_dtype="bfloat16")
    assert b.ulp(np.array([0.75]))[0] == 2.0**-8     # bfloat16: 8 significant bits
    e = b.error()
    assert e.max_ulp >= e.max_abs / 2.0**-8 * 0.99


def test_catalogue_functions_design_within_their_default_ranges():
    for name, f in FUNCTIONS.items():
        lo, hi = f.default_range
        d = design(name, lo, hi, 129, kind="linear", method="minimax")
        ref = f(np.linspace(lo, hi, 1001))
        # a 129-entry linear table of a smooth function: error well below the range of f
        assert d.error(4097).max_abs < 1e-2 * (np.max(ref) - np.min(ref)), name


def test_callable_functions_are_accepted():
    d = design(np.sin, 0, 3, 64, kind="linear", method="minimax")
    h = _cell(d)
    assert d.function.name == "sin"
    assert d.error().max_abs <= h * h / 8 + 2.0**-8 * h + 1e-6


def test_design_is_immutable_and_describes_itself():
    d = design("silu", -8, 8, 129, kind="linear", in_dtype="int16", out_dtype="int32")
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.bias = 0
    with pytest.raises(ValueError):
        d.lut.offsets[0] = 1
    text = d.describe()
    for part in (f"step_bits={d.step_bits}", f"bias={d.bias}", f"shift_offset={d.shift_offset}",
                 f"in_frac_bits={d.in_frac_bits}", f"out_frac_bits={d.out_frac_bits}",
                 "clamp input to [-8, 7.99975586]", "int16", "int32"):
        assert part in text


@pytest.mark.parametrize("args, kwargs, words", [
    (("softplus", -1, 1, 8), {}, ["softplus", "catalogue", "sigmoid"]),
    ((42, -1, 1, 8), {}, ["fn must be a catalogue name or a callable", "42"]),
    (("tanh", 1, 1, 8), {}, ["[lo, hi] = [1.0, 1.0]", "lo < hi"]),
    (("tanh", -1, math.inf, 8), {}, ["finite"]),
    (("tanh", -1, 1, 1), {}, ["entries=1", "[2, 65536]"]),
    (("tanh", -1, 1, 8), {"kind": "cubic"}, ["kind='cubic'", "direct", "linear"]),
    (("tanh", -1, 1, 8), {"method": "chebyshev"}, ["method='chebyshev'", "minimax"]),
    (("tanh", -1, 1, 8), {"in_dtype": "float32"}, ["in_dtype float32", "integers"]),
    (("tanh", -1, 1, 8), {"in_dtype": "int64"}, ["in_dtype int64", "8, 16 or 32 bits"]),
    (("tanh", -1, 1, 8), {"out_dtype": "uint8"}, ["out_dtype uint8", "tanh", "< 0"]),
    (("tanh", -1, 1, 8), {"kind": "linear", "in_dtype": "int8", "out_dtype": "int16"},
     ["in_dtype int8, out_dtype int16", "(int16, int32)", "(bfloat16, float32)"]),
    (("rsqrt", -1, 4, 8), {}, ["rsqrt", "finite", "x = -1"]),
    (("tanh", -1, 1, 8), {"in_dtype": "uint8"}, ["uint8", "cannot hold", "[-1, 1]"]),
    (("tanh", -1, 1, 8), {"out_dtype": "complex64"}, ["complex64", "integer or float"]),
])
def test_design_rules(args, kwargs, words):
    with pytest.raises(LutError) as err:
        design(*args, **kwargs)
    for word in words:
        assert word in str(err.value)


def test_error_rejects_bad_points():
    d = design("tanh", -1, 1, 8)
    with pytest.raises(LutError, match=r"points=1 must be an integer in \[2, 16777216\]"):
        d.error(1)
    with pytest.raises(LutError, match="x is empty"):
        d.error(x=[])
