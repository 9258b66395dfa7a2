"""libxsmm's elementwise kinds, each written once as a Python function read two ways.

A formula is a function of ``x`` (unary) or ``x, y`` (binary) using ``+ - * /``, unary
minus, the comparisons, ``where``, ``sqrt``, ``exp``, ``tanh`` and ``erf``. Called on
numpy float64 arrays it is the numpy reference; called on ``CExpr`` values it writes the
same operations, in the same order, as one C expression over ``double``. Both evaluate in
float64 and round once to float32, and both call the C library's ``exp``, ``tanh`` and
``erf`` (the reference through Python's ``math`` module), so the C and the reference agree
bit for bit, even where a formula cancels (``1 - tanh(x)^2`` near 1).

The formulas are libxsmm's reference semantics (``samples/eltwise``): sigmoid is
``(tanh(x / 2) + 1) / 2``, its ``_inv`` (backward) form ``s (1 - s)``, gelu the erf form.

>>> LIBXSMM_UNARY["negate"].c("a")
'(float)(-(double)a)'
>>> LIBXSMM_UNARY["sqrt"].reference(np.array([4.0, 2.0], np.float32)).tolist()
[2.0, 1.4142135381698608]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


class CExpr:
    """The C text of a ``double`` expression; arithmetic on it writes C."""

    def __init__(self, text: str):
        self.text = text

    def _op(self, op: str, other, swap: bool = False) -> CExpr:
        a, b = (_c(other), self.text) if swap else (self.text, _c(other))
        return CExpr(f"({a} {op} {b})")

    def __add__(self, o): return self._op("+", o)
    def __radd__(self, o): return self._op("+", o, True)
    def __sub__(self, o): return self._op("-", o)
    def __rsub__(self, o): return self._op("-", o, True)
    def __mul__(self, o): return self._op("*", o)
    def __rmul__(self, o): return self._op("*", o, True)
    def __truediv__(self, o): return self._op("/", o)
    def __rtruediv__(self, o): return self._op("/", o, True)
    def __neg__(self): return CExpr(f"(-{self.text})")
    def __gt__(self, o): return self._op(">", o)
    def __ge__(self, o): return self._op(">=", o)
    def __lt__(self, o): return self._op("<", o)
    def __le__(self, o): return self._op("<=", o)
    def __eq__(self, o): return self._op("==", o)  # a comparison written in C, not equality
    def __ne__(self, o): return self._op("!=", o)

    __hash__ = None


def _c(v) -> str:
    """A value as C: an expression's text, or a float constant as a double literal."""
    return v.text if isinstance(v, CExpr) else repr(float(v))


def _libm(fn: Callable) -> Callable:
    """A float64 function of the C library (``math.exp``, ...) on numpy arrays: numpy's own
    differ from it in the last bit, which a formula like ``1 - tanh(x)^2`` magnifies."""
    return np.vectorize(fn, otypes=[np.float64])


def _math_exp(v: float) -> float:
    """``math.exp`` with C's overflow to infinity (Python raises instead)."""
    try:
        return math.exp(v)
    except OverflowError:
        return math.inf


def _function(c_name: str, numpy_fn: Callable) -> Callable:
    def fn(v):
        return CExpr(f"{c_name}({v.text})") if isinstance(v, CExpr) else numpy_fn(v)
    fn.__name__ = c_name
    return fn


sqrt = _function("sqrt", np.sqrt)
fabs = _function("fabs", np.abs)
exp = _function("exp", _libm(_math_exp))
tanh = _function("tanh", _libm(math.tanh))
erf = _function("erf", _libm(math.erf))


def where(cond, a, b):
    """``cond ? a : b``."""
    if isinstance(cond, CExpr):
        return CExpr(f"({cond.text} ? {_c(a)} : {_c(b)})")
    return np.where(cond, a, b)


@dataclass(frozen=True)
class Formula:
    """One libxsmm kind: its enum name, the formula and what it computes, in words."""

    libxsmm: str
    fn: Callable
    doc: str

    def c(self, *names: str) -> str:
        """The C expression, a float, of the formula on the float variables ``names``."""
        return f"(float){_c(self.fn(*(CExpr(f'(double){n}') for n in names)))}"

    def reference(self, *xs: np.ndarray) -> np.ndarray:
        """The formula on float32 arrays (or scalars): in float64, rounded once to
        float32."""
        with np.errstate(all="ignore"):
            y = self.fn(*(np.asarray(x, np.float64) for x in xs))
            return np.broadcast_to(np.asarray(y, np.float64), np.shape(xs[0])) \
                .astype(np.float32)


def _sigmoid(x):
    return (tanh(x / 2.0) + 1.0) / 2.0


_U = "LIBXSMM_MELTW_TYPE_UNARY_"
_B = "LIBXSMM_MELTW_TYPE_BINARY_"
_ROOT_HALF_PI = math.sqrt(2.0 * math.pi)

LIBXSMM_UNARY = {
    "negate": Formula(_U + "NEGATE", lambda x: -x, "B = -A"),
    "sqrt": Formula(_U + "SQRT", sqrt, "B = sqrt(A)"),
    "rsqrt": Formula(_U + "RECIPROCAL_SQRT", lambda x: 1.0 / sqrt(x), "B = 1 / sqrt(A)"),
    "exp": Formula(_U + "EXP", exp, "B = exp(A)"),
    "tanh": Formula(_U + "TANH", tanh, "B = tanh(A)"),
    "tanh_inv": Formula(_U + "TANH_INV", lambda x: 1.0 - tanh(x) * tanh(x),
                        "B = 1 - tanh(A)^2 (tanh's derivative at A)"),
    "sigmoid": Formula(_U + "SIGMOID", _sigmoid, "B = (tanh(A / 2) + 1) / 2"),
    "sigmoid_inv": Formula(_U + "SIGMOID_INV", lambda x: _sigmoid(x) * (1.0 - _sigmoid(x)),
                           "B = s (1 - s), s = sigmoid(A) (sigmoid's derivative at A)"),
    "gelu": Formula(_U + "GELU", lambda x: (erf(x / math.sqrt(2.0)) + 1.0) * 0.5 * x,
                    "B = (erf(A / sqrt 2) + 1) A / 2"),
    "gelu_inv": Formula(_U + "GELU_INV",
                        lambda x: 0.5 + 0.5 * erf(x / math.sqrt(2.0))
                        + x / _ROOT_HALF_PI * exp(-0.5 * x * x),
                        "B = (1 + erf(A / sqrt 2)) / 2 + A exp(-A^2 / 2) / sqrt(2 pi) "
                        "(gelu's derivative at A)"),
}

LIBXSMM_BINARY = {
    f"compare_{op}": Formula(_B + f"CMP_OP_{op.upper()}", fn, f"C = 1 if A {sym} B else 0")
    for op, sym, fn in (
        ("gt", ">", lambda x, y: where(x > y, 1.0, 0.0)),
        ("ge", ">=", lambda x, y: where(x >= y, 1.0, 0.0)),
        ("lt", "<", lambda x, y: where(x < y, 1.0, 0.0)),
        ("le", "<=", lambda x, y: where(x <= y, 1.0, 0.0)),
        ("eq", "==", lambda x, y: where(x == y, 1.0, 0.0)),
        ("ne", "!=", lambda x, y: where(x != y, 1.0, 0.0)))
}

@dataclass(frozen=True)
class Reduction:
    """One libxsmm reduction: its enum name, the first element's value ``init(x)`` and the
    step ``step(acc, x)`` that folds in each next one, in order (both formulas)."""

    libxsmm: str
    init: Formula
    step: Formula
    doc: str

    def reference(self, x: np.ndarray, axis: int) -> np.ndarray:
        """The reduction of float32 ``x`` along ``axis``, folded in order as the C does."""
        x = np.moveaxis(x, axis, 0)
        acc = self.init.reference(x[0])
        for row in x[1:]:
            acc = self.step.reference(acc, row)
        return acc


def _reduction(op: str, init, step, doc: str) -> Reduction:
    return Reduction(_U + f"REDUCE_X{op}", Formula("", init, ""), Formula("", step, ""), doc)


LIBXSMM_REDUCE = {
    "reduce_add": _reduction("_OP_ADD", lambda x: x, lambda a, x: a + x, "sum of A"),
    "reduce_x2_add": _reduction("2_OP_ADD", lambda x: x * x, lambda a, x: a + x * x,
                                "sum of A^2 (each square exact, each sum rounded once)"),
    "reduce_mul": _reduction("_OP_MUL", lambda x: x, lambda a, x: a * x, "product of A"),
    "reduce_max": _reduction("_OP_MAX", lambda x: x, lambda a, x: where(a > x, a, x),
                             "max of A (acc > x ? acc : x, libxsmm's MAX)"),
    "reduce_min": _reduction("_OP_MIN", lambda x: x, lambda a, x: where(a < x, a, x),
                             "min of A (acc < x ? acc : x, libxsmm's MIN)"),
    "reduce_absmax": _reduction("_OP_ABSMAX", fabs, lambda a, x: where(a > fabs(x), a, fabs(x)),
                                "max of |A|"),
}


# libxsmm's enum name of every kind npukit has, with npukit's name; the TPP text's names
# (square for X2, increment for INC, zero for XOR) stay.
LIBXSMM_NAMES = {
    _U + "IDENTITY": "identity",
    _U + "XOR": "zero",
    _U + "X2": "square",
    _U + "RELU": "relu",
    _U + "INC": "increment",
    _U + "RECIPROCAL": "reciprocal",
    _B + "ADD": "add",
    _B + "SUB": "sub",
    _B + "MUL": "mul",
    _B + "DIV": "div",
    _B + "MAX": "max",
    _B + "MIN": "min",
} | {f.libxsmm: name for name, f in (LIBXSMM_UNARY | LIBXSMM_BINARY | LIBXSMM_REDUCE).items()}
