"""Elementwise float32 functions of ONNX (the math unaries and the activations beyond
``common``'s), each defined once with the primitives of ``scalar``; ``math_unary(op)`` is the
basic kernel computing one of them, its C and its numpy reference made from that definition.

``UNARY[op]`` is ``(definition, parameters)``: ``definition(m, x, a, b)`` of the operations
``m``, the input ``x`` and two float32 parameters; ``parameters`` names the ONNX attributes
giving ``a`` and ``b`` with their defaults. Accuracy (float32 input, against the exact
function, as ``|error| / max(1, |f(x)|)``, measured by tests/test_onnx_ops_math.py):
``Abs``, ``Neg``, ``Floor``, ``Ceil``, ``Round``, ``Sign``, ``ThresholdedRelu``, ``Shrink``
exact; ``Reciprocal`` correctly rounded; ``Sqrt`` within 1 ulp; ``Exp`` relative 1.3e-7 +
|x| * 6e-8; ``Log`` 1e-7; ``Sin``, ``Cos``, ``Tan``, ``Sinh``, ``Cosh`` computed in float64
and rounded once (``double``: an exact reduction by pi/2 for every finite float32, Sinh
and Cosh finite wherever their float32 value is), within 1 ulp; ``Asinh``, ``Acosh`` as
log(2x) from 4096; ``Erf`` 4e-7 (Abramowitz and Stegun 7.1.26, 1.5e-7, plus float32
rounding); the others up to 6e-7 (``Mish``). NaN, infinities and zeros as ONNX Runtime's:
NaN stays NaN (``HardSigmoid``, ``Celu``), an odd function keeps a zero's sign, ``Abs``
clears the sign bit, ``Sign``, ``Selu`` and ``Celu`` give +0 for -0.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from ...costs import Work
from .common import HELPERS, BasicKernel, c_signature, share_rows
from .double import COS, COSH, SIN, SINH, TAN
from .scalar import (
    C_HELPERS,
    NUMPY,
    CBuilder,
    abs_,
    ceil,
    exp,
    floor,
    log,
    maximum,
    minimum,
    pow_,
    round_even,
    sqrt,
)

PI = math.pi
LN2 = math.log(2)
BIG = 4096.0  # from here asinh x and acosh x are log(2x) to float32's precision
# asinh x = x + x * s * ASINH_POLY(s), s = x*x: (-1)^k (2k)! / (4^k (k!)^2 (2k+1)), k >= 1.
ASINH_POLY = tuple((-1) ** k * math.factorial(2 * k) / (4 ** k * math.factorial(k) ** 2
                                                         * (2 * k + 1)) for k in range(1, 5))
# Abramowitz and Stegun 7.1.26: erf(a) = 1 - t * P(t) * exp(-a*a), t = 1 / (1 + p*a).
ERF_P = 0.3275911
ERF_POLY = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def horner(x, coefs):
    """``coefs[0] + x * (coefs[1] + x * (...))``."""
    out = None
    for c in coefs[::-1]:
        out = c if out is None else c + x * out
    return out


def odd(m, x, v):
    """``v``, an odd function's value, with the sign of a zero ``x`` kept (``f(-0) = -0``)."""
    return m.where(x == 0.0, x, v)


def sin(m, x):
    return m.trig(x, SIN)


def cos(m, x):
    return m.trig(x, COS)


def tan(m, x):
    return m.trig(x, TAN)


def atan(m, x):
    """Reduced to |t| <= tan(pi/12) by 1/t and the addition formula at pi/6, then the
    series to t**13."""
    a = abs_(m, x)
    big = a > 1.0
    t = m.where(big, 1.0 / a, a)
    mid = t > 0.26794919
    r3 = 1 / math.sqrt(3)
    t = m.where(mid, (t - r3) / (1.0 + t * r3), t)
    s = t * t
    v = t + t * (s * horner(s, tuple((-1) ** k / (2 * k + 1) for k in range(1, 7))))
    v = m.where(mid, v + PI / 6, v)
    v = m.where(big, PI / 2 - v, v)
    return odd(m, x, m.where(x < 0.0, -v, v))


def asin(m, x):
    return odd(m, x, atan(m, x / sqrt(m, 1.0 - x * x)))


def acos(m, x):
    return PI / 2 - asin(m, x)


def sinh(m, x):
    return m.hyp(x, SINH)


def cosh(m, x):
    return m.hyp(x, COSH)


def asinh(m, x):
    """``log(a + sqrt(a*a + 1))``, ``log(a) + ln 2`` from ``BIG`` (no overflow of a*a), the
    Taylor series to x**9 below 1/8 (relative accuracy near 0)."""
    a = abs_(m, x)
    v = m.where(a < BIG, log(m, a + sqrt(m, a * a + 1.0)), log(m, a) + LN2)
    s = x * x
    small = x + x * (s * horner(s, ASINH_POLY))
    return odd(m, x, m.where(a < 0.125, small, m.where(x < 0.0, -v, v)))


def acosh(m, x):
    """``log(x + sqrt((x - 1) * (x + 1)))`` (x - 1 exact near 1, where x*x - 1 cancels),
    ``log(x) + ln 2`` from ``BIG``; NaN below 1."""
    v = m.where(x < BIG, log(m, x + sqrt(m, (x - 1.0) * (x + 1.0))), log(m, x) + LN2)
    return m.where(x < 1.0, np.nan, v)


def atanh(m, x):
    return odd(m, x, 0.5 * log(m, (1.0 + x) / (1.0 - x)))


def erf(m, x):
    a = abs_(m, x)
    t = 1.0 / (1.0 + ERF_P * a)
    v = 1.0 - t * horner(t, ERF_POLY) * exp(m, -(a * a))
    return odd(m, x, m.where(x < 0.0, -v, v))


def softplus(m, x):
    """``log(1 + e**x)`` as ``max(x, 0) + log(1 + e**-|x|)`` (no overflow)."""
    return m.where(x > 0.0, x, 0.0) + log(m, 1.0 + exp(m, -abs_(m, x)))


def sign(m, x):
    """1, -1, 0 for both zeros (ONNX Runtime's), NaN for NaN."""
    return m.where(x > 0.0, 1.0, m.where(x < 0.0, -1.0, m.where(x == 0.0, 0.0, x)))


def hard_sigmoid(m, x, a, b):
    """``a*x + b`` clipped to [0, 1]; NaN stays NaN (ONNX Runtime's)."""
    v = a * x + b
    return m.where(v > 1.0, 1.0, m.where(v < 0.0, 0.0, v))


def elu(m, x, a):
    return m.where(x < 0.0, a * (exp(m, x) - 1.0), x)


def selu(m, x, a, g):
    """``g * x`` above 0, ``g * a * (e**x - 1)`` else (ONNX Runtime's: Selu(-0) = 0)."""
    return g * m.where(x > 0.0, x, a * (exp(m, x) - 1.0))


def celu(m, x, a):
    """``max(0, x) + min(0, a * (e**(x/a) - 1))``: 0 for both zeros, NaN stays NaN."""
    return m.where(x < 0.0, a * (exp(m, x / a) - 1.0), m.where(x == 0.0, 0.0, x))


def gelu(m, x, approximate):
    if approximate == "tanh":
        inner = math.sqrt(2 / PI) * (x + 0.044715 * (x * (x * x)))
        return (0.5 * x) * (1.0 + m.tanh(inner))
    return (0.5 * x) * (1.0 + erf(m, x * (1 / math.sqrt(2))))


UNARY = {
    "Abs": (lambda m, x, a, b: m.fabs(x), ()),
    "Neg": (lambda m, x, a, b: -x, ()),
    "Reciprocal": (lambda m, x, a, b: 1.0 / x, ()),
    "Floor": (lambda m, x, a, b: floor(m, x), ()),
    "Ceil": (lambda m, x, a, b: ceil(m, x), ()),
    "Round": (lambda m, x, a, b: round_even(m, x), ()),
    "Sign": (lambda m, x, a, b: sign(m, x), ()),
    "Sqrt": (lambda m, x, a, b: sqrt(m, x), ()),
    "Exp": (lambda m, x, a, b: exp(m, x), ()),
    "Log": (lambda m, x, a, b: log(m, x), ()),
    "Sin": (lambda m, x, a, b: sin(m, x), ()),
    "Cos": (lambda m, x, a, b: cos(m, x), ()),
    "Tan": (lambda m, x, a, b: tan(m, x), ()),
    "Asin": (lambda m, x, a, b: asin(m, x), ()),
    "Acos": (lambda m, x, a, b: acos(m, x), ()),
    "Atan": (lambda m, x, a, b: atan(m, x), ()),
    "Sinh": (lambda m, x, a, b: sinh(m, x), ()),
    "Cosh": (lambda m, x, a, b: cosh(m, x), ()),
    "Asinh": (lambda m, x, a, b: asinh(m, x), ()),
    "Acosh": (lambda m, x, a, b: acosh(m, x), ()),
    "Atanh": (lambda m, x, a, b: atanh(m, x), ()),
    "Erf": (lambda m, x, a, b: erf(m, x), ()),
    "Elu": (lambda m, x, a, b: elu(m, x, a), (("alpha", 1.0),)),
    "Selu": (lambda m, x, a, b: selu(m, x, a, b),
             (("alpha", 1.67326319217681884765625), ("gamma", 1.05070102214813232421875))),
    "Celu": (lambda m, x, a, b: celu(m, x, a), (("alpha", 1.0),)),
    "HardSigmoid": (lambda m, x, a, b: hard_sigmoid(m, x, a, b),
                    (("alpha", 0.2), ("beta", 0.5))),
    "HardSwish": (lambda m, x, a, b: x * hard_sigmoid(m, x, 1 / 6, 0.5), ()),
    "Softplus": (lambda m, x, a, b: softplus(m, x), ()),
    "Softsign": (lambda m, x, a, b: x / (1.0 + abs_(m, x)), ()),
    "Mish": (lambda m, x, a, b: x * m.tanh(softplus(m, x)), ()),
    "ThresholdedRelu": (lambda m, x, a, b: m.where(x > a, x, 0.0), (("alpha", 1.0),)),
    "Shrink": (lambda m, x, a, b: m.where(x < -b, x + a, m.where(x > b, x - a, 0.0)),
               (("bias", 0.0), ("lambd", 0.5))),
    "Swish": (lambda m, x, a, b: x * m.sigmoid(a * x), (("alpha", 1.0),)),
    "Gelu": (lambda m, x, a, b: gelu(m, x, "none"), ()),
    "GeluTanh": (lambda m, x, a, b: gelu(m, x, "tanh"), ()),
}


@cache
def math_unary(op: str, width: int) -> BasicKernel:
    """``Out[i] = f(In[i], A, B)`` for the W*H float32 values, ``f`` = ``UNARY[op]`` and its
    parameters ``A``, ``B`` as the bits ``P0``, ``P1`` (``Op`` unused: the kernel computes
    one function)."""
    fn, _ = UNARY[op]
    name = f"KerMathNpk_{op}_fl"
    args = (("const float *__restrict__", "In"), ("int", "W"), ("int", "H"),
            ("float *__restrict__", "Out"), ("int", "Op"), ("int", "P0"), ("int", "P1"))
    b = CBuilder()
    res = b.result(fn(b, b.var("X"), b.var("A0"), b.var("A1")))
    body = "\n".join(f"        {line}" for line in b.lines)
    src = f"""\
{HELPERS}
{C_HELPERS}
void {name}({c_signature(args)})
{{
    /* Out[i] = {op}(In[i]) for the W*H values, one statement per float32 operation as
       npukit.tiler.basic_kernels.mathfn defines it; they are shared among the cores. */
    float A0 = npk_f32(P0), A1 = npk_f32(P1);
    int Rows = W * H;
{share_rows()}
    (void)Op;
    (void)A0;
    (void)A1;
    for (int i = First; i < Last; i++) {{
        float X = In[i];
{body}
        Out[i] = {res};
    }}
}}"""

    def reference(In, W, H, Out, Op, P0, P1, *, core_id, core_count):
        n = W * H
        if core_id or n <= 0:
            return
        a, b = (np.array([p], np.int32).view(np.float32)[0] for p in (P0, P1))
        with np.errstate(all="ignore"):
            Out[:n] = np.broadcast_to(fn(NUMPY, np.asarray(In[:n], np.float32), a, b), (n,))

    cost = max(1, len(b.lines))
    return BasicKernel(name, args, True, src, reference,
                       lambda W, H, **_: Work("elementwise", math.ceil(W * H / width) * cost))


# Binary float32 functions ``f(m, a, b)``, broadcast as ``elementwise.binary``'s operations.
BINARY = {
    "Max": maximum,
    "Min": minimum,
    "Pow": pow_,
    "PRelu": lambda m, x, slope: m.where(x < 0.0, x * slope, x),
    "Expand": lambda m, x, _: x,  # the first operand broadcast to the output's shape
}
# The arguments of ``elementwise.binary`` this kernel shares and ignores past the strides.
_BINARY_UNUSED = ("Op", "Act", "P0", "P1", "P2", "Za", "Zb", "Zout", "Lo", "Hi")


@cache
def math_binary(op: str, width: int) -> BasicKernel:
    """``Out[r][c] = f(A[r*ARow + c*ACol], B[r*BRow + c*BCol])`` over ``Rows`` x ``Cols``
    float32 values (a stride 0 broadcasts), ``f`` = ``BINARY[op]``; the arguments of
    ``elementwise.binary``, those after the strides unused."""
    fn = BINARY[op]
    name = f"KerMathBinaryNpk_{op}_fl"
    args = (("const float *__restrict__", "A"), ("const float *__restrict__", "B"),
            ("float *__restrict__", "Out"), ("int", "Rows"), ("int", "Cols"), ("int", "ARow"),
            ("int", "ACol"), ("int", "BRow"), ("int", "BCol"),
            *(("int", a) for a in _BINARY_UNUSED))
    b = CBuilder()
    res = b.result(fn(b, b.var("X"), b.var("Y")))
    body = "\n".join(f"            {line}" for line in b.lines)
    unused = "".join(f"    (void){a};\n" for a in _BINARY_UNUSED)
    src = f"""\
{HELPERS}
{C_HELPERS}
void {name}({c_signature(args)})
{{
    /* Out[r][c] = {op}(A[r*ARow + c*ACol], B[r*BRow + c*BCol]), one statement per float32
       operation as npukit.tiler.basic_kernels.mathfn defines it; rows are shared among the
       cores. */
{unused}{share_rows()}
    for (int r = First; r < Last; r++)
        for (int c = 0; c < Cols; c++) {{
            float X = A[r * ARow + c * ACol], Y = B[r * BRow + c * BCol];
{body}
            Out[r * Cols + c] = {res};
        }}
}}"""

    def reference(A, B, Out, Rows, Cols, ARow, ACol, BRow, BCol, *_, core_id, core_count):
        if core_id or Rows <= 0:
            return
        r, c = np.arange(Rows)[:, None], np.arange(Cols)[None, :]
        x = np.asarray(A[r * ARow + c * ACol], np.float32)
        y = np.asarray(B[r * BRow + c * BCol], np.float32)
        with np.errstate(all="ignore"):
            Out[:Rows * Cols] = np.broadcast_to(fn(NUMPY, x, y), (Rows, Cols)).reshape(-1)

    cost = max(1, len(b.lines))
    return BasicKernel(name, args, True, src, reference,
                       lambda Rows, Cols, **_: Work(
                           "elementwise", math.ceil(Rows * Cols / width) * cost, Rows))
