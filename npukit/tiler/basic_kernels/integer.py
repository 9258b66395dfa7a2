"""Elementwise basic kernels on every element type of a model (integers, bool, float32; casts
also of float16, bfloat16, float64), each operation's C expression next to its numpy twin (``OPS``):

- ``Cast``: conversions as ONNX Runtime's ``Cast`` gives them on x86 (its vectorised loop):
  float to integer truncates toward zero; NaN and values outside int32 (int64 for int64)
  give int32's (int64's) minimum, of which narrower types keep the low bits; uint32 takes
  ``[2**31, 2**32)`` as ``x - 2**31`` with the top bit set, so from ``2**32`` on gives 0
  (from float16 and bfloat16, converted one by one, the low bits of the int64 conversion),
  uint64 ``[2**63, 2**64)`` as ``x - 2**63`` with the top bit set;
  float16 and bfloat16 values are widened to float32 exactly, and rounded to from float32
  (bfloat16: as ml_dtypes, to nearest even) or, float16, from float64 directly;
  integers narrow by keeping their low bits; anything to bool is ``!= 0`` (NaN is true).
- integer arithmetic in two's complement, wrapping (``Add``, ``Sub``, ``Mul``, ``Neg``,
  ``Abs``); ``Div`` truncates toward zero, ``Mod`` takes the divisor's sign (``Mod1``, ONNX's
  ``fmod=1``: the dividend's); a zero divisor gives 0 (ONNX leaves it undefined) and
  ``MIN / -1`` wraps to ``MIN``;
- comparisons of any numeric type to bool (NaN compares false), ``And``, ``Or``, ``Xor``,
  ``Not`` on bool, the bitwise operations, ``BitShift`` (opset 28's signed types too: a
  shift by a negative amount or the width or more gives 0, or a right shift the sign's
  fill), ``Max``, ``Min``, ``Clip`` (``min(max(x, lo), hi)``, NaN kept), ``Sign``, ``IsNaN``,
  ``IsInf``, and ``Where``.

Operands broadcast by strides as ``elementwise.binary``'s: ``X_k[r*R_k + c*C_k]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from ...costs import Work
from ...dtypes import dtype as np_dtype
from ...dtypes import is_float
from .common import BasicKernel, c_signature, layer_c_type, layer_suffix, share_rows

CAST_HELPERS = """\
#ifndef NPK_CAST_HELPERS
#define NPK_CAST_HELPERS
/* float -> int32 and int64 as x86's truncating conversions: NaN and values out of range give
   the minimum (C leaves them undefined, so the range is tested first). */
static inline int npk_cvt32(float X)
{
    return X >= -2147483648.0f && X < 2147483648.0f ? (int)X : (int)(-2147483647 - 1);
}
static inline long long npk_cvt64(float X)
{
    return X >= -9223372036854775808.0f && X < 9223372036854775808.0f ? (long long)X
                                                                       : -9223372036854775807LL - 1;
}
static inline int npk_cvt32d(double X)
{
    return X >= -2147483648.0 && X < 2147483648.0 ? (int)X : (int)(-2147483647 - 1);
}
static inline long long npk_cvt64d(double X)
{
    return X >= -9223372036854775808.0 && X < 9223372036854775808.0 ? (long long)X
                                                                     : -9223372036854775807LL - 1;
}
/* float32 <-> bfloat16 bits: rounded to nearest even, NaN to the quiet 0x7FC0 (sign kept). */
static inline npk_bfloat16 npk_bf16_from_f32(float F)
{
    union { float f; unsigned int u; } V;
    V.f = F;
    if ((V.u & 0x7FFFFFFFu) > 0x7F800000u)
        return (npk_bfloat16)((V.u >> 16 & 0x8000u) | 0x7FC0u);
    return (npk_bfloat16)((V.u + 0x7FFFu + (V.u >> 16 & 1u)) >> 16);
}
static inline float npk_bf16_to_f32(npk_bfloat16 B)
{
    union { unsigned int u; float f; } V;
    V.u = (unsigned int)B << 16;
    return V.f;
}
#endif"""


@dataclass(frozen=True)
class Op:
    """An operation of ``arity`` operands: ``c(types, out)`` its C expression over ``X0``..
    (``types`` the operands' numpy dtypes, ``out`` the result's), ``ref`` its numpy twin on
    the operand arrays and the result's dtype."""

    arity: int
    c: object
    ref: object


def _wrap(expr: str, out: np.dtype) -> str:
    """A 64-bit two's-complement result kept to ``out``'s bits."""
    return f"({layer_c_type(out)})({expr})"


def _u(x: str) -> str:
    return f"(unsigned long long){x}"


def _cast_c(ts, out) -> str:
    src = ts[0]
    x = "npk_bf16_to_f32(X0)" if src.name == "bfloat16" else \
        "(float)X0" if src.name == "float16" else "X0"  # exact
    if out == np.bool_:
        return f"{x} != 0"
    if is_float(src) and out.kind in "iu":
        d = "d" if src == np.float64 else ""
        if out == np.uint64:  # [2**63, 2**64) as x - 2**63 with the top bit set
            two63 = "9223372036854775808.0" + ("" if d else "f")
            return _wrap(f"{x} >= {two63} ? (unsigned long long)npk_cvt64{d}({x} - {two63}) "
                         f"^ 0x8000000000000000ull : (unsigned long long)npk_cvt64{d}({x})", out)
        if out.itemsize == 8:
            return f"npk_cvt64{d}({x})"
        if out == np.uint32 and src.itemsize == 2:  # ONNX Runtime's scalar loop
            return _wrap(f"npk_cvt64({x})", out)
        if out == np.uint32:
            two31 = "2147483648.0" + ("" if d else "f")
            return _wrap(f"{x} >= {two31} ? (unsigned int)npk_cvt32{d}({x} - {two31}) "
                         f"^ 0x80000000u : (unsigned int)npk_cvt32{d}({x})", out)
        return _wrap(f"npk_cvt32{d}({x})", out)
    if out.name == "bfloat16":  # through float32, as ml_dtypes rounds
        return f"npk_bf16_from_f32((float){x})"
    return _wrap(x, out)


def _cast_ref(x, out):
    if is_float(x.dtype) and out != np.float64:
        x64 = x.astype(np.float64)
    else:
        x64 = x
    if out == np.bool_:
        return x64 != 0
    if is_float(x.dtype) and out.kind in "iu":
        def cvt(v, bits):
            ok = (v >= -2.0 ** (bits - 1)) & (v < 2.0 ** (bits - 1))
            return np.where(ok, np.where(ok, v, 0).astype(np.int64), -2 ** (bits - 1))
        if out == np.uint64:
            high = x64 >= 2.0 ** 63
            return np.where(high, cvt(x64 - 2.0 ** 63, 64).astype(out) ^ np.uint64(1 << 63),
                            cvt(x64, 64).astype(out))
        if out.itemsize == 8:
            return cvt(x64, 64)
        if out == np.uint32 and x.dtype.itemsize == 2:
            return cvt(x64, 64).astype(out)
        if out == np.uint32:
            high = x64 >= 2.0 ** 31
            return np.where(high, cvt(x64 - 2.0 ** 31, 32).astype(out) ^ np.uint32(1 << 31),
                            cvt(x64, 32).astype(out))
        return cvt(x64, 32).astype(out)
    if out.name == "bfloat16":
        return x.astype(np.float32).astype(out)
    return x.astype(out)


def _safe(y):
    """The divisor where it is neither 0 nor -1 (the cases the kernels answer alone)."""
    return np.where((y == 0) | (y == -1) if y.dtype.kind == "i" else y == 0, 1, y).astype(y.dtype)


def _div_ref(x, y, out):
    s = _safe(y)
    q = (x - np.fmod(x, s)) // s  # exact: the truncated quotient
    if y.dtype.kind == "i":
        q = np.where(y == -1, np.negative(x), q)
    return np.where(y == 0, 0, q).astype(out)


def _mod_ref(fmod: bool):
    def ref(x, y, out):
        s = _safe(y)
        r = np.fmod(x, s) if fmod else np.mod(x, s)
        return np.where(s == y, r, 0).astype(out)
    return ref


def _div_c(ts, out) -> str:
    if ts[0].kind == "u":
        return _wrap("X1 == 0 ? 0 : X0 / X1", out)
    return _wrap(f"X1 == 0 ? 0 : X1 == -1 ? 0ULL - {_u('X0')} : {_u('(X0 / X1)')}", out)


def _mod_c(fmod: bool):
    def c(ts, out) -> str:
        if ts[0].kind == "u":
            return _wrap("X1 == 0 ? 0 : X0 % X1", out)
        # C's % takes the dividend's sign; ONNX's fmod=0 the divisor's.
        r = "(X0 % X1)"
        fix = "" if fmod else f" + ({r} != 0 && ({r} < 0) != (X1 < 0) ? X1 : 0)"
        return _wrap(f"X1 == 0 || X1 == -1 ? 0 : {r}{fix}", out)
    return c


def _shift(left: bool):
    """ONNX's BitShift: a shift by a negative amount or the width or more gives 0 (right,
    signed: the sign's fill, -1 or 0); signed right shifts are arithmetic."""
    def c(ts, out) -> str:
        bits = 8 * ts[0].itemsize
        signed = ts[0].kind == "i"
        out_of_range = f"X1 < 0 || X1 >= {bits}" if signed else f"X1 >= {bits}"
        if left:
            return _wrap(f"{out_of_range} ? 0 : {_u('X0')} << X1", out)
        fill = "(X0 < 0 ? -1 : 0)" if signed else "0"
        return _wrap(f"{out_of_range} ? {fill} : X0 >> X1", out)

    def ref(x, y, out):
        bits = 8 * x.dtype.itemsize
        bad = (y < 0) | (y >= bits)
        s = np.where(bad, 0, y).astype(x.dtype)
        if left:
            return np.where(bad, 0, np.left_shift(x, s)).astype(out)
        fill = np.where(x < 0, -1, 0).astype(x.dtype)  # (uint64 with int64 would be float)
        return np.where(bad, fill, np.right_shift(x, s)).astype(out)
    return Op(2, c, ref)


def _arith(c_op: str, np_fn) -> Op:
    return Op(2, lambda ts, out: _wrap(f"{_u('X0')} {c_op} {_u('X1')}", out),
              lambda x, y, out: np_fn(x, y).astype(out))


def _simple(arity: int, expr: str, np_fn) -> Op:
    return Op(arity, lambda ts, out: _wrap(expr, out),
              lambda *a: np_fn(*a[:-1]).astype(a[-1]))


FLT_MAX = "3.40282347e38f"
OPS = {
    "Cast": Op(1, _cast_c, _cast_ref),
    "Add": _arith("+", np.add), "Sub": _arith("-", np.subtract),
    "Mul": _arith("*", np.multiply),
    "Div": Op(2, _div_c, _div_ref), "Mod": Op(2, _mod_c(False), _mod_ref(False)),
    "Mod1": Op(2, _mod_c(True), _mod_ref(True)),
    "Neg": Op(1, lambda ts, out: _wrap(f"0ULL - {_u('X0')}", out),
              lambda x, out: np.negative(x).astype(out)),
    "Abs": Op(1, lambda ts, out: _wrap(f"X0 < 0 ? 0ULL - {_u('X0')} : {_u('X0')}", out)
              if ts[0].kind == "i" else _wrap("X0", out), lambda x, out: np.abs(x).astype(out)),
    "Sign": _simple(1, "(X0 > 0) - (X0 < 0)", np.sign),
    "Max": _simple(2, "X0 > X1 ? X0 : X1", np.maximum),
    "Min": _simple(2, "X0 < X1 ? X0 : X1", np.minimum),
    "Equal": _simple(2, "X0 == X1", np.equal), "Less": _simple(2, "X0 < X1", np.less),
    "LessOrEqual": _simple(2, "X0 <= X1", np.less_equal),
    "Greater": _simple(2, "X0 > X1", np.greater),
    "GreaterOrEqual": _simple(2, "X0 >= X1", np.greater_equal),
    "And": _simple(2, "X0 && X1", np.logical_and), "Or": _simple(2, "X0 || X1", np.logical_or),
    "Xor": _simple(2, "X0 != X1", np.logical_xor), "Not": _simple(1, "!X0", np.logical_not),
    "BitwiseAnd": _simple(2, "X0 & X1", np.bitwise_and),
    "BitwiseOr": _simple(2, "X0 | X1", np.bitwise_or),
    "BitwiseXor": _simple(2, "X0 ^ X1", np.bitwise_xor),
    "BitwiseNot": _simple(1, "~X0", np.invert),
    "ShiftLeft": _shift(True), "ShiftRight": _shift(False),
    "IsNaN": _simple(1, "X0 != X0", np.isnan),
    "IsPosInf": _simple(1, f"X0 > {FLT_MAX}", np.isposinf),
    "IsNegInf": _simple(1, f"X0 < -{FLT_MAX}", np.isneginf),
    "IsInf": _simple(1, f"X0 > {FLT_MAX} || X0 < -{FLT_MAX}", np.isinf),
    "Where": _simple(3, "X0 ? X1 : X2", np.where),
    "Clip": _simple(3, "(X0 < X1 ? X1 : X0) > X2 ? X2 : (X0 < X1 ? X1 : X0)",
                    lambda x, lo, hi: np.where(np.where(x < lo, lo, x) > hi, hi,
                                               np.where(x < lo, lo, x))),
}


@cache
def elementwise(op: str, in_dts: tuple[str, ...], out_dt: str, width: int) -> BasicKernel:
    """``Out[r][c] = OPS[op](X0[r*R0 + c*C0], ...)`` over ``Rows`` x ``Cols`` (a stride 0
    broadcasts); rows are shared among the cores."""
    spec = OPS[op]
    ts, out = tuple(np_dtype(d) for d in in_dts), np_dtype(out_dt)
    name = f"KerEltNpk_{op}_{layer_suffix(*in_dts, out_dt)}"
    ins = [f"X{k}" for k in range(spec.arity)]
    args = tuple((f"const {layer_c_type(t)} *__restrict__", f"In{k}")
                 for k, t in enumerate(ts)) + (
        (f"{layer_c_type(out)} *__restrict__", "Out"), ("int", "Rows"), ("int", "Cols")) + \
        tuple(("int", f"{a}{k}") for k in range(spec.arity) for a in "RC")
    reads = "\n".join(f"            {layer_c_type(t)} X{k} = In{k}[r * R{k} + c * C{k}];"
                      for k, t in enumerate(ts))
    src = f"""\
{CAST_HELPERS}
void {name}({c_signature(args)})
{{
    /* Out[r][c] = {op}({', '.join(ins)}) with X_k = In_k[r*R_k + c*C_k]; rows are shared
       among the cores. */
{share_rows()}
    for (int r = First; r < Last; r++)
        for (int c = 0; c < Cols; c++) {{
{reads}
            Out[r * Cols + c] = {spec.c(ts, out)};
        }}
}}"""

    def reference(*a, core_id, core_count):
        arrays, (o, rows, cols), strides = a[:spec.arity], a[spec.arity:spec.arity + 3], \
            a[spec.arity + 3:]
        if core_id or rows <= 0:
            return
        r, c = np.arange(rows)[:, None], np.arange(cols)[None, :]
        xs = [x[r * strides[2 * k] + c * strides[2 * k + 1]] for k, x in enumerate(arrays)]
        with np.errstate(all="ignore"):
            o[:rows * cols].reshape(rows, cols)[...] = spec.ref(*xs, out)

    return BasicKernel(name, args, True, src, reference,
                       lambda Rows, Cols, **_: Work(
                           "elementwise", math.ceil(Rows * Cols / width) * 2, Rows, chunks=Rows))
