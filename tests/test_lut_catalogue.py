"""The function catalogue and the numpy erf/erfc, against the standard library's math."""

import math

import numpy as np
import pytest

from npukit.errors import LutError
from npukit.lut import FUNCTIONS, erf, erfc, function


def _scalar(name, x):
    """The catalogue's formulas read one float at a time with math."""
    if name == "sigmoid":
        return 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))
    if name == "tanh":
        return math.tanh(x)
    if name == "silu":
        return x * _scalar("sigmoid", x)
    if name == "gelu_tanh":
        return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    if name == "gelu_erf":
        return 0.5 * x * math.erfc(-x / math.sqrt(2))
    if name == "exp":
        return math.exp(x)
    if name == "reciprocal":
        return 1 / x
    return 1 / math.sqrt(x)


def test_erf_matches_math_erf():
    x = np.concatenate([np.linspace(-7, 7, 20001), np.linspace(-1e-3, 1e-3, 101),
                        [1.9999999999, 2.0, 2.0000000001, -2.0, 30.0, -30.0, 5e-324]])
    ref = np.array([math.erf(v) for v in x])
    assert np.max(np.abs(erf(x) - ref)) <= 2e-15
    assert np.all(erf(-x) == -erf(x))


def test_erfc_matches_math_erfc_relatively_in_the_tail():
    x = np.linspace(-6, 26, 16001)
    ref = np.array([math.erfc(v) for v in x])
    normal = ref > 1e-300
    assert np.max(np.abs(erfc(x)[normal] - ref[normal]) / ref[normal]) <= 1e-12


def test_erf_special_values_and_shapes():
    assert erf(np.array([np.inf, -np.inf])).tolist() == [1.0, -1.0]
    assert np.isnan(erf(np.nan))
    assert float(erfc(np.inf)) == 0.0 and float(erfc(-np.inf)) == 2.0
    assert erf(np.ones((2, 3))).shape == (2, 3) and np.shape(erf(0.5)) == ()


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_catalogue_functions_match_their_formulas(name):
    f = FUNCTIONS[name]
    lo, hi = f.default_range
    x = np.linspace(lo - 1 if lo - 1 > 0 or name not in ("reciprocal", "rsqrt") else lo,
                    hi + 1, 2001)
    ref = np.array([_scalar(name, v) for v in x])
    got = f(x)
    # gelu's 1 + tanh(..) and 1 + erf(..) cancel for negative x in both readings
    assert np.all(np.abs(got - ref) <= 1e-12 * np.maximum(np.abs(ref), 1e-3)), name
    assert np.all(np.isfinite(f(np.linspace(lo, hi, 101))))


def test_sigmoid_and_silu_do_not_overflow():
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        assert FUNCTIONS["sigmoid"](np.array([-1000.0, 1000.0])).tolist() == [0.0, 1.0]
        assert FUNCTIONS["silu"](np.array([-1000.0])).tolist() == [-0.0]


def test_function_lookup():
    assert function("tanh") is FUNCTIONS["tanh"]
    assert function(FUNCTIONS["exp"]) is FUNCTIONS["exp"]
    wrapped = function(np.cos)
    assert wrapped.name == "cos" and float(wrapped(0.0)) == 1.0
    with pytest.raises(LutError) as err:
        function("softmax")
    assert "softmax" in str(err.value) and "gelu_erf" in str(err.value)
    with pytest.raises(LutError, match="catalogue name or a callable"):
        function(3.0)
