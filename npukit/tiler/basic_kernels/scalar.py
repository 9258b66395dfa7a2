"""float32 functions defined once, computed by numpy and written as C from that one definition.

A function is a Python function of an operations object ``m`` and float32 operands, written
with Python's arithmetic and comparison operators and ``m``'s primitives:

>>> def softsign(m, x):
...     return x / (1.0 + abs_(m, x))
>>> float(softsign(NUMPY, np.float32(3.0)))
0.75
>>> b = CBuilder()
>>> b.result(softsign(b, b.var("X")))
'V4'
>>> b.lines[-2:]
['float V3 = 0x1.0000000000000p+0f + V2;', 'float V4 = X / V3;']

``NUMPY`` evaluates it on float32 arrays, every operation rounded to float32; ``CBuilder``
records one C statement per operation, each rounded to float32 as the C is compiled
(``-ffp-contract=off``): the same operations in the same order, so the simulator (numpy) and
the C agree bit for bit. Both sides compute both branches of ``where`` (so a branch must
not read what it may not: ``trunc`` chooses its operand before converting it). The
primitives ``exp2``, ``log2``, ``sigmoid`` and ``tanh`` are the layer helpers of ``common``
(numpy twins of ``npk_exp2``...); everything else is built here from float32 arithmetic,
without libm.
"""

from __future__ import annotations

import math

import numpy as np

from ...c.ctype import hex_float
from .common import LOG2E, exp2_f32, f32_bits, log2_f32, rne, sigmoid_f32, tanh_f32
from .double import C_HELPERS as DOUBLE_HELPERS
from .double import hyp_f32, trig_f32

TWO23 = 8388608.0  # 2**23: every float32 of at least this magnitude is an integer
LN2 = math.log(2)


class NumpyOps:
    """The primitives on float32 numpy arrays."""

    def c(self, v) -> np.float32:
        return np.float32(v)

    def where(self, cond, a, b):
        return np.where(cond, a, b).astype(np.float32)

    def exp2(self, t):
        return exp2_f32(t)

    def log2(self, x):
        return log2_f32(x)

    def sigmoid(self, x):
        return sigmoid_f32(x)

    def tanh(self, x):
        return tanh_f32(x)

    def to_int(self, x):
        """``(int)x`` for |x| < 2**31 (truncation toward zero)."""
        return np.asarray(x, np.float32).astype(np.int32)

    def to_float(self, i):
        return np.asarray(i, np.int32).astype(np.float32)

    def bits(self, x):
        return np.asarray(x, np.float32).view(np.int32)

    def from_bits(self, i):
        return np.asarray(i, np.int32).view(np.float32)

    def rne(self, x):
        return rne(x)

    def fabs(self, x):
        """|x| by clearing the sign bit (|-0| = 0, a NaN's sign cleared)."""
        return (np.asarray(x, np.float32).view(np.int32) & np.int32(0x7FFFFFFF)).view(
            np.float32)

    def trig(self, x, which: int):
        return trig_f32(x, which)

    def hyp(self, x, which: int):
        return hyp_f32(x, which)


class CVal:
    """A C value a ``CBuilder`` statement made (or a parameter, or a literal)."""

    def __init__(self, b: CBuilder, text: str, ctype: str = "float"):
        self.b, self.text, self.ctype = b, text, ctype

    def __str__(self) -> str:
        return self.text

    def _lift(self, v) -> CVal:
        if isinstance(v, CVal):
            return v
        return CVal(self.b, str(int(v)), "int") if self.ctype == "int" else self.b.c(v)

    def _op(self, op: str, other, ctype: str | None = None, swap: bool = False) -> CVal:
        o = self._lift(other)
        a, b = (o, self) if swap else (self, o)
        return self.b.let(f"{a} {op} {b}", ctype or self.ctype)

    def __add__(self, o): return self._op("+", o)
    def __radd__(self, o): return self._op("+", o, swap=True)
    def __sub__(self, o): return self._op("-", o)
    def __rsub__(self, o): return self._op("-", o, swap=True)
    def __mul__(self, o): return self._op("*", o)
    def __rmul__(self, o): return self._op("*", o, swap=True)
    def __truediv__(self, o): return self._op("/", o)
    def __rtruediv__(self, o): return self._op("/", o, swap=True)
    def __rshift__(self, o): return self._op(">>", o)
    def __neg__(self): return self.b.let(f"-{self}", self.ctype)
    def __lt__(self, o): return self._op("<", o, "int")
    def __le__(self, o): return self._op("<=", o, "int")
    def __gt__(self, o): return self._op(">", o, "int")
    def __ge__(self, o): return self._op(">=", o, "int")
    def __eq__(self, o): return self._op("==", o, "int")  # type: ignore[override]
    def __ne__(self, o): return self._op("!=", o, "int")  # type: ignore[override]
    def __and__(self, o): return self._op("&&", o, "int")
    def __or__(self, o): return self._op("||", o, "int")
    def __invert__(self): return self.b.let(f"!{self}", "int")
    __hash__ = None  # type: ignore[assignment]


class CBuilder:
    """The primitives as C statements: ``lines`` holds one declaration per operation
    (``float V3 = V1 * V2;``)."""

    def __init__(self, prefix: str = "V"):
        self.lines: list[str] = []
        self.prefix = prefix

    def var(self, name: str, ctype: str = "float") -> CVal:
        """An existing C variable or parameter."""
        return CVal(self, name, ctype)

    def let(self, text: str, ctype: str = "float") -> CVal:
        name = f"{self.prefix}{len(self.lines)}"
        self.lines.append(f"{ctype} {name} = {text};")
        return CVal(self, name, ctype)

    def result(self, v) -> str:
        """The C text of a function's result (a literal when it is a constant)."""
        return str(v if isinstance(v, CVal) else self.c(v))

    def c(self, v) -> CVal:
        v = np.float32(v)
        text = hex_float(v) if np.isfinite(v) else f"npk_f32({f32_bits(v)})"
        return CVal(self, text)

    def _lift(self, v) -> CVal:
        return v if isinstance(v, CVal) else self.c(v)

    def where(self, cond, a, b) -> CVal:
        return self.let(f"{cond} ? {self._lift(a)} : {self._lift(b)}")

    def _call(self, fn: str, x, ctype: str = "float") -> CVal:
        return self.let(f"{fn}({x})", ctype)

    def exp2(self, t): return self._call("npk_exp2", t)
    def log2(self, x): return self._call("npk_log2", x)
    def sigmoid(self, x): return self._call("npk_sigmoid", x)
    def tanh(self, x): return self._call("npk_tanh", x)
    def to_int(self, x): return self._call("(int)", x, "int")
    def to_float(self, i): return self._call("(float)", i)
    def bits(self, x): return self._call("npk_bits", x, "int")
    def from_bits(self, i): return self._call("npk_f32", i)
    def rne(self, x): return self._call("npk_rne", x)
    def fabs(self, x): return self._call("npk_fabs", x)
    def trig(self, x, which: int): return self.let(f"npk_trig({x}, {which})")
    def hyp(self, x, which: int): return self.let(f"npk_hyp({x}, {which})")


NUMPY = NumpyOps()

# C helpers the statements call beyond common.HELPERS.
C_HELPERS = """\
#ifndef NPK_SCALAR_HELPERS
#define NPK_SCALAR_HELPERS
/* The IEEE-754 bits of a float as an int. */
static inline int npk_bits(float V)
{
    union { int I; float F; } U;
    U.F = V;
    return U.I;
}
/* |V| by clearing the sign bit (|-0| = 0, a NaN's sign cleared). */
static inline float npk_fabs(float V)
{
    union { unsigned int U; float F; } B;
    B.F = V;
    B.U &= 0x7FFFFFFFu;
    return B.F;
}
#endif
""" + DOUBLE_HELPERS


# -- the functions every definition builds on -----------------------------------------------

def abs_(m, x):
    """|x| (-0 stays -0, which compares equal to 0)."""
    return m.where(x < 0.0, -x, x)


def trunc(m, x):
    """x rounded toward zero: ``(int)x`` below 2**23, x itself above (and NaN); a zero keeps
    x's sign (as C compilers' ``roundss`` does, which they may use for the conversions)."""
    small = abs_(m, x) < TWO23
    t = m.to_float(m.to_int(m.where(small, x, 0.0)))
    return m.where(small, m.where(t == 0.0, x * 0.0, t), x)


def floor(m, x):
    t = trunc(m, x)
    return m.where(t > x, t - 1.0, t)


def ceil(m, x):
    t = trunc(m, x)
    return m.where(t < x, t + 1.0, t)


def round_even(m, x):
    """Round half to even (ONNX's Round): exact below 2**22 by ``npk_rne``; a zero result
    keeps x's sign (``Round(-0.3) = -0``)."""
    v = m.rne(x)
    return m.where(abs_(m, x) < TWO23 / 2, m.where(v == 0.0, x * 0.0, v), x)


def exp(m, x):
    """``e**x = 2**(x log2 e)``: relative error 1.3e-7 (exp2's) plus ``|x| * 6e-8`` (the
    rounding of the product: 3.7e-6 at |x| = 80); 0 below about -87.3, infinity above 88.7."""
    return m.exp2(x * LOG2E)


def log2(m, x):
    """``log2(x)``: ``npk_log2`` with subnormals scaled by 2**24 first; ``-inf`` at 0, NaN
    below, ``inf`` at ``inf``. Absolute error about 1.5e-7."""
    sub = x < 1.1754944e-38
    xs = m.where(sub, x * 16777216.0, x)
    pos = (xs > 0.0) & (xs < np.inf)
    v = m.log2(m.where(pos, xs, 1.0)) - m.where(sub, 24.0, 0.0)
    edge = m.where(x == 0.0, -np.inf, m.where(x == np.inf, np.inf, np.nan))
    return m.where(pos, v, edge)


def log(m, x):
    """Natural log: ``ln 2 * log2(x)``, absolute error about 1e-7."""
    return log2(m, x) * LN2


def pow_(m, x, y):
    """``x**y`` as ONNX's Pow: ``2**(y log2 |x|)`` (relative error about ``|y log2 x| * 1.2e-7``),
    exact squares (``y == 2``: ``x * x``), the sign of an odd integer power of a negative x,
    NaN for a negative x to a non-integer power, 1 for ``y == 0`` or ``x == 1``."""
    v = m.exp2(y * log2(m, abs_(m, x)))
    whole = trunc(m, y) == y
    odd = whole & (trunc(m, y * 0.5) != y * 0.5)
    v = m.where(x < 0.0, m.where(whole, m.where(odd, -v, v), np.nan), v)
    v = m.where(y == 2.0, x * x, v)
    return m.where((y == 0.0) | (x == 1.0), 1.0, v)


def sqrt(m, x):
    """``x**0.5``: an estimate from the bits, then three Newton steps (within 1 ulp of the
    rounded root); subnormals scaled by 2**64 first; NaN below 0."""
    sub = x < 1.1754944e-38
    ok = (x > 0.0) & (x < np.inf)
    xs = m.where(ok, m.where(sub, x * 1.8446744e19, x), 1.0)
    y = m.from_bits((m.bits(xs) >> 1) + 0x1FBD1DF5)
    for _ in range(3):
        y = 0.5 * (y + xs / y)
    y = m.where(sub, y * 2.3283064e-10, y)
    return m.where(ok, y, m.where((x == 0.0) | (x == np.inf), x, np.nan))


def maximum(m, a, b):
    """The larger; NaN when either is NaN (ONNX Runtime's Max)."""
    return m.where((a != a) | (a > b), a, b)


def minimum(m, a, b):
    return m.where((a != a) | (a < b), a, b)


__all__ = ["CBuilder", "CVal", "C_HELPERS", "NUMPY", "NumpyOps", "abs_", "ceil", "exp",
           "floor", "log", "log2", "maximum", "minimum", "pow_", "round_even", "sqrt", "trunc"]
