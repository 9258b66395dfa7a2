"""The Compass DSL's arithmetic builtins with its public names and keywords: ``abs``,
``max``/``min``, ``rint``, ``vinv``, shifts (``vsl``, ``vsr``, ``vnsr``), widening
multiplies (``vmull``, ``vmulh``), pairwise ``vaddh``/``vsubh``/``vmaxh``/``vminh``, widening
``vxtl``/``vxth``, ``clz``, ``reinterpret`` and the math functions (``exp``, ``tanh``, ...).

Each is one or a few instructions of the ``vec`` unit (``npukit.ir``'s element-wise ops; the
bit, shift and math ones are defined in ``npukit.arith_vec``). ``mask``/``r`` follow the
convention of ``S.vadd``: lanes where the mask is False take ``r``, or are undefined (npukit
poisons them) when there is no ``r``.

>>> import npukit.dsl as S
>>> @S.prim_func
... def halve(a: S.ptr("i16x16", "global"), out: S.ptr("i16x16", "global")):
...     out[0] = S.vsr(a[0], 1, with_round=True)
>>> out = np.zeros(16, np.int16)
>>> _ = S.build(halve, target="compass").run("sim", a=np.arange(16, dtype=np.int16), out=out)
>>> out[:6].tolist()
[0, 0, 1, 2, 2, 2]
"""

from __future__ import annotations

import numpy as np

from .. import arith, ir
from ..arith_vec import MATH_FNS
from ..dtypes import is_float
from ..errors import DTypeError, KernelError
from . import ops
from .builtins_lanes import _lanes, _move, vzip
from .conversion import rebits
from .types import DType
from .values import Scalar, Vec, _describe, tracer


def _vec(x, what: str, kinds: str = "iuf") -> Vec:
    """``x`` as a vector whose lanes are of one of ``kinds`` ("i", "u", "f")."""
    if not isinstance(x, Vec) or x.type.elem == np.bool_:
        raise KernelError(f"{what}: expects a vector of numbers, got {_describe(x)}")
    kind = "f" if _is_float(x.type) else x.type.elem.kind
    if kind not in kinds:
        want = {"iu": "integer", "f": "float", "i": "signed integer"}.get(kinds, "number")
        raise DTypeError(f"{what} of {x.type}: expects {want} lanes")
    return x


def _is_float(t: DType) -> bool:
    return is_float(t.elem)


def _masked(out: Vec, mask, r, what: str) -> Vec:
    return tracer().masked(out, mask, r, what)


def _signed(t: DType, out_sign: str | None, what: str) -> DType:
    """``t`` with the signedness ``out_sign`` asks ("s", "u"; None keeps it)."""
    if out_sign is None:
        return t
    if out_sign not in ("s", "u"):
        raise KernelError(f"{what}: out_sign={out_sign!r}; use 's', 'u' or None")
    bits = 8 * t.elem.itemsize
    return DType(f"{'u' if out_sign == 'u' else ''}int{bits}").with_lanes(t.lanes)


def _integer_operand(x, like: DType, what: str) -> Vec:
    """``x`` as an integer vector of ``like``'s lanes and lane width (either sign); numbers
    are spread as ``like``."""
    if isinstance(x, Vec):
        _vec(x, what, "iu")
        if x.type.lanes != like.lanes or x.type.elem.itemsize != like.elem.itemsize:
            raise DTypeError(f"{what}: {x.type} does not match {like} (lanes and lane width)")
        return x
    return tracer().coerce(x, like, what)


# -- renamed and extended forms of npukit's operations ---------------------------------------

def abs(x, mask=None, saturate: bool = False):  # noqa: A001 - the Compass DSL's name
    """``|x|`` lane by lane (or of a typed scalar); integers wrap (the most negative value
    stays) unless ``saturate`` (then it gives the greatest value); masked-off lanes are
    undefined."""
    if isinstance(x, Scalar):
        return Scalar(x.type, np.abs(x.value))
    tr = tracer()
    x = _vec(x, "S.abs")
    if saturate and _is_float(x.type):
        raise DTypeError(f"S.abs(..., saturate=True) of {x.type}: saturation applies to "
                         f"integers")
    out = tr.unary("vabs", x, "S.abs")
    if saturate and x.type.elem.kind == "i":  # only the most negative value overflows
        top = np.iinfo(x.type.elem)
        out = tr.select(tr.compare("eq", x, int(top.min)), int(top.max), out, "S.abs")
    return _masked(out, mask, None, "S.abs")


def max(x, y, mask=None, r=None):  # noqa: A001 - the Compass DSL's name
    """The greater of ``x`` and ``y`` (vectors lane by lane, with ``mask``/``r``; integers,
    typed scalars)."""
    if mask is None and r is None:
        return ops.max(x, y)
    return ops.vmax(x, y, mask, r)


def min(x, y, mask=None, r=None):  # noqa: A001 - the Compass DSL's name
    """The lesser of ``x`` and ``y`` (vectors lane by lane, with ``mask``/``r``; integers,
    typed scalars)."""
    if mask is None and r is None:
        return ops.min(x, y)
    return ops.vmin(x, y, mask, r)


def rint(x, mask=None):
    """Each float lane (or a float scalar) rounded to the nearest integer, ties to even;
    masked-off lanes are undefined."""
    if not isinstance(x, Vec):
        return Scalar(DType("float32"), np.rint(np.float32(x))) if isinstance(
            x, (int, float)) else ops.vrint(x)
    return _masked(ops.vrint(_vec(x, "S.rint", "f")), mask, None, "S.rint")


def vinv(x, mask=None):
    """Bitwise NOT of each integer lane, or NOT of a mask (npukit's ``S.vnot``); lanes where
    ``mask`` is False are undefined, or False when ``x`` is a mask."""
    tr = tracer()
    out = ops.vnot(x)
    if mask is None:
        return out
    if isinstance(x, Vec) and x.type.elem == np.bool_:
        return tr.logic("vand", out, tr.mask(mask, x.type.lanes, "S.vinv"), "S.vinv")
    return _masked(out, mask, None, "S.vinv")


# -- shifts ----------------------------------------------------------------------------------

def vsl(x, shift, mask=None, saturate: bool = False, r=None) -> Vec:
    """``x`` shifted left by ``shift`` bits (a number or an integer vector of ``x``'s lane
    width, read as unsigned): the low bits of ``x · 2^shift``, or with ``saturate`` (signed
    ``x``) the value clamped to the type's range."""
    tr = tracer()
    x = _vec(x, "S.vsl", "iu")
    if saturate and x.type.elem.kind != "i":
        raise DTypeError(f"S.vsl(..., saturate=True) of {x.type}: saturation applies to "
                         f"signed integers")
    s = _integer_operand(shift, x.type, "S.vsl")
    out = tr.compute("vshl", x.type, [x, s], {"saturate": True} if saturate else {})
    return _masked(out, mask, r, "S.vsl")


def vsr(x, shift, mask=None, with_round: bool = False, r=None) -> Vec:
    """``x`` shifted right by ``shift`` bits (read as unsigned): arithmetic for signed
    lanes, logical for unsigned; ``with_round``: ``x / 2^shift`` rounded to nearest, ties to
    even."""
    tr = tracer()
    x = _vec(x, "S.vsr", "iu")
    s = _integer_operand(shift, x.type, "S.vsr")
    out = tr.compute("vshr", x.type, [x, s], {"round": True} if with_round else {})
    return _masked(out, mask, r, "S.vsr")


def vnsr(x, shift, mask=None, saturate: bool = False, out_sign=None, with_round: bool = False,
         to_h: bool = False) -> Vec:
    """``S.vsr`` of 16- or 32-bit lanes narrowed to 8 bits (``to_h``: 32 to 16 bits),
    keeping the low bits or, with ``saturate``, clamping to the narrow type (of sign
    ``out_sign``). The results stay at their lanes' places in the same 256 bits: lane ``k``
    lands at narrow lane ``k · ratio``; the lanes between, and masked-off lanes, are 0."""
    tr = tracer()
    x = _vec(x, "S.vnsr", "iu")
    bits = 8 * x.type.elem.itemsize
    if bits not in (16, 32) or (to_h and bits != 32):
        raise DTypeError(f"S.vnsr of {x.type}: expects 16- or 32-bit lanes (to_h=True: "
                         f"32-bit)")
    narrow = 16 if to_h else 8
    ratio = bits // narrow
    kind = "u" if x.type.elem.kind == "u" else ""
    t = _signed(DType(f"{kind}int{narrow}").with_lanes(x.type.lanes), out_sign, "S.vnsr")
    s = _integer_operand(shift, x.type, "S.vnsr")
    wide = tr.compute("vshr", x.type, [x, s], {"round": True} if with_round else {})
    if mask is not None:
        wide = tr.select(mask, wide, 0, "S.vnsr")
    small = tr.compute("vcast", t, [wide], {"saturate": True} if saturate else {})
    out = tr.new_vec(t.with_lanes(x.type.lanes * ratio), "narrow")
    tr.emit(ir.Fill(out.view, 0, tr.label()))
    _move(out, 0, ratio, _lanes(small, 0, x.type.lanes))
    return out


def vnsrsr(x, shift, mask=None, out_sign=None, to_h: bool = False) -> Vec:
    """``S.vnsr`` with ``saturate=True`` and ``with_round=True``."""
    return vnsr(x, shift, mask, True, out_sign, True, to_h)


# -- the integer arithmetic's saturate= and out_sign= ----------------------------------------

def _number_type(v, t: DType) -> DType:
    """The type a number operand takes, as the Compass DSL spreads numbers: ``t``, or ``t``
    of the other sign when only that holds it (``S.vadd(int8x32, 252, out_sign="u")``)."""
    if not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_)):
        return t
    info = np.iinfo(t.elem)
    if info.min <= v <= info.max:
        return t
    return _signed(t, "s" if t.elem.kind == "u" else "u", "S.vadd")


def _int_arith(op: str, x, y, mask, saturate: bool, out_sign, r, what: str) -> Vec:
    """``op`` of integer vectors of one lane width (either sign): the exact result's low
    bits, or with ``saturate`` the result clamped to the type ``out_sign`` gives."""
    tr = tracer()
    t = tr.vector_type(what, x, y)
    if _is_float(t) or t.elem == np.bool_:
        if saturate or out_sign is not None:
            raise DTypeError(f"{what} of {t}: saturate= and out_sign= apply to integers")
        return getattr(ops, op)(x, y, mask, r)
    if isinstance(x, Vec) and isinstance(y, Vec) and (x.type.lanes != y.type.lanes or
                                                      x.type.bits != y.type.bits):
        # the public DSL's words, which its tests look for
        raise DTypeError(f'{what}: Argument type mismatch: 0-th: "{x.type}" vs. 1-th: '
                         f'"{y.type}" (the lanes and the lane width must match)')
    a, b = (_integer_operand(v, _number_type(v, t), what) for v in (x, y))
    if out_sign is None and a.type != b.type:
        raise DTypeError(f"{what}: vector type mismatch: {a.type} and {b.type} (out_sign= "
                         f"says the result's sign when they differ)")
    out_t = _signed(a.type, out_sign, what)
    out = tr.compute(op, out_t, [a, b], {"saturate": True} if saturate else {})
    return _masked(out, mask, r, what)


def vadd(x, y, mask=None, saturate: bool = False, out_sign=None, r=None) -> Vec:
    """``x + y`` lane by lane; integers wrap, or with ``saturate`` clamp to the result type
    (``out_sign`` "s"/"u" picks its sign; the operands may then differ in sign); where
    ``mask`` is False the lane is ``r`` (undefined without)."""
    return _int_arith("vadd", x, y, mask, saturate, out_sign, r, "S.vadd")


def vsub(x, y, mask=None, saturate: bool = False, out_sign=None, r=None) -> Vec:
    """``x - y`` lane by lane, with the keywords of ``S.vadd``."""
    return _int_arith("vsub", x, y, mask, saturate, out_sign, r, "S.vsub")


def vmul(x, y, mask=None, out_sign=None, r=None) -> Vec:
    """``x * y`` lane by lane (integers: the low bits of the exact product), with the
    keywords of ``S.vadd``."""
    return _int_arith("vmul", x, y, mask, False, out_sign, r, "S.vmul")


# -- widening --------------------------------------------------------------------------------

def _wider(t: DType, lanes: int, out_sign, what: str) -> DType:
    bits = 8 * t.elem.itemsize
    kind = "u" if t.elem.kind == "u" else ""
    return _signed(DType(f"{kind}int{2 * bits}").with_lanes(lanes), out_sign, what)


def _widening_mul(x, y, mask, out_sign, r, high: bool, what: str) -> Vec:
    """The exact products of the low (``high``: high) half of the lanes of ``x`` and
    ``y``, as lanes of twice the width; 32-bit lanes give each 64-bit product as two 32-bit
    lanes, low word first."""
    tr = tracer()
    x = _vec(x, what, "iu")
    y = _integer_operand(y, x.type, what)
    n, bits = x.type.lanes // 2, 8 * x.type.elem.itemsize
    first = n if high else 0
    if bits == 32:
        t = _signed(x.type, out_sign, what)
        if out_sign is None and x.type != y.type:
            t = _signed(x.type, "s", what)
        lo = tr.compute("vmul", t.with_lanes(n), [_lanes(x, first, n), _lanes(y, first, n)])
        hi = tr.compute("vmulhi", t.with_lanes(n),
                        [_lanes(x, first, n), _lanes(y, first, n)])
        out = vzip(lo, hi)
        if mask is not None:  # a product's mask covers both its words
            m = tr.mask(mask, x.type.lanes, what)
            m = vzip(_half(m, first, n), _half(m, first, n))
            out = tr.masked(out, m, r, what)
        return out
    t = _wider(x.type, n, out_sign, what)
    a = tr.compute("vcast", t, [_lanes(x, first, n)])
    b = tr.compute("vcast", t, [_lanes(y, first, n)])
    out = tr.compute("vmul", t, [a, b])
    if mask is None:
        return _masked(out, None, r, what)
    return tr.masked(out, _half(tr.mask(mask, x.type.lanes, what), first, n), r, what)


def _half(m: Vec, first: int, n: int) -> Vec:
    """Lanes ``first .. first + n - 1`` of mask ``m`` as a mask of ``n`` lanes."""
    out = tracer().new_vec(m.type.with_lanes(n), "mask_half")
    _move(out, 0, 1, _lanes(m, first, n))
    return out


def vmull(x, y, mask=None, out_sign=None, r=None) -> Vec:
    """The exact products of the low half of the lanes (8 -> 16, 16 -> 32 bits; 32-bit
    lanes give 64-bit products as low and high words); ``out_sign`` picks the result's
    sign."""
    return _widening_mul(x, y, mask, out_sign, r, False, "S.vmull")


def vmulh(x, y, mask=None, out_sign=None, r=None) -> Vec:
    """``S.vmull`` of the high half of the lanes."""
    return _widening_mul(x, y, mask, out_sign, r, True, "S.vmulh")


def _extend(x, high: bool, what: str) -> Vec:
    tr = tracer()
    x = _vec(x, what, "iu")
    if x.type.elem.itemsize > 2:
        raise DTypeError(f"{what} of {x.type}: expects 8- or 16-bit lanes (no 64-bit lanes)")
    n = x.type.lanes // 2
    return tr.compute("vcast", _wider(x.type, n, None, what), [_lanes(x, n if high else 0, n)])


def vxtl(x) -> Vec:
    """The low half of the lanes of ``x`` widened to twice the bits (sign kept)."""
    return _extend(x, False, "S.vxtl")


def vxth(x) -> Vec:
    """The high half of the lanes of ``x`` widened to twice the bits (sign kept)."""
    return _extend(x, True, "S.vxth")


# -- pairwise --------------------------------------------------------------------------------

def _pairwise(op: str, x, y, attrs: dict, what: str) -> Vec:
    """Lane ``i`` of the first half is ``x[2i] op x[2i+1]``, of the second half
    ``y[2i] op y[2i+1]``."""
    tr = tracer()
    x, y = (tr.coerce(v, tr.vector_type(what, x, y), what) for v in (x, y))
    _vec(x, what, "iuf" if op in ("vmax", "vmin") else "iu")
    n = x.type.lanes // 2
    out = tr.new_vec(x.type, what[2:])
    for k, v in enumerate((x, y)):
        part = tr.compute(op, x.type.with_lanes(n), [_lanes(v, 0, n, 2), _lanes(v, 1, n, 2)],
                          attrs)
        _move(out, k * n, 1, part.view)
    return out


def vaddh(x, y) -> Vec:
    """Sums of neighbouring lanes, saturated: ``x0+x1, x2+x3, ..., y0+y1, ...``."""
    return _pairwise("vadd", x, y, {"saturate": True}, "S.vaddh")


def vsubh(x, y) -> Vec:
    """Differences of neighbouring lanes, saturated: ``x0-x1, x2-x3, ..., y0-y1, ...``."""
    return _pairwise("vsub", x, y, {"saturate": True}, "S.vsubh")


def vmaxh(x, y) -> Vec:
    """The greater of neighbouring lanes: ``max(x0, x1), ..., max(y0, y1), ...``."""
    return _pairwise("vmax", x, y, {}, "S.vmaxh")


def vminh(x, y) -> Vec:
    """The lesser of neighbouring lanes: ``min(x0, x1), ..., min(y0, y1), ...``."""
    return _pairwise("vmin", x, y, {}, "S.vminh")


# -- bits ------------------------------------------------------------------------------------

def clz(x, mask=None):
    """Leading zero bits of each integer lane (its width for 0), or of an integer scalar;
    masked-off lanes are undefined."""
    if isinstance(x, Scalar):
        bits = 8 * x.type.elem.itemsize
        u = int(np.array(x.value).view(f"uint{bits}"))
        return Scalar(x.type, bits - u.bit_length())
    x = _vec(x, "S.clz", "iu")
    return _masked(tracer().compute("vclz", x.type, [x]), mask, None, "S.clz")


def reinterpret(x, dtype):
    """The bits of ``x`` read as ``dtype``: lane for lane at the same lane width
    (``int32x8`` as ``float32x8``; a scalar type keeps the lanes), or a vector type of the
    same total bits with lanes of another width, its bytes as a C union's
    (``uint8x32`` as ``int32x8``: ``npukit.dsl.conversion.rebits``). A Python number is a
    32-bit constant: a float a float32, an integer an int32 (a uint32 past its range)."""
    t = DType(dtype)
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        x = Scalar(DType("float32" if isinstance(x, float) else
                         "int32" if x < 2 ** 31 else "uint32"), x)
    if isinstance(x, Scalar):
        if t.elem.itemsize != x.type.elem.itemsize:
            raise DTypeError(f"S.reinterpret of {x.type} as {t}: the widths differ")
        return Scalar(t.element_of, np.array(x.value).view(t.elem)[()])
    x = _vec(x, "S.reinterpret")
    to = t.element_of.with_lanes(x.type.lanes)
    if t.is_vector and t.bits != x.type.bits:
        return rebits(x, t)
    if t.lanes not in (1, x.type.lanes) or t.elem.itemsize != x.type.elem.itemsize:
        raise DTypeError(f"S.reinterpret of {x.type} as {t}: npukit reinterprets lanes of "
                         f"one width ({x.type.elem.itemsize * 8} bits), lane for lane")
    return x if to == x.type else tracer().compute("vbitcast", to, [x])


# -- math ------------------------------------------------------------------------------------

def _math(fn: str):
    if fn not in MATH_FNS:
        raise KeyError(fn)

    def apply(x):
        x = _vec(x, f"S.{fn}", "f")
        return tracer().compute("vmath", x.type, [x], {"fn": fn})

    apply.__name__ = apply.__qualname__ = fn
    apply.__doc__ = (f"``{fn}`` of each float lane (float16, bfloat16, float32), computed in "
                     f"float64 and rounded to float32, then to the lane type.")
    return apply


exp, exp2, log, tanh = _math("exp"), _math("exp2"), _math("log"), _math("tanh")
sin, cos, sqrt, rsqrt = _math("sin"), _math("cos"), _math("sqrt"), _math("rsqrt")
erf, floor, ceil = _math("erf"), _math("floor"), _math("ceil")


def pow(x, exponent):  # noqa: A001 - the Compass DSL's name
    """``x ** exponent`` of float lanes (float16, bfloat16, float32), as ``**``: computed in
    float64, rounded to float32, then to the lane type; a number or one-lane value meets the
    vector. Of two scalars (numbers: float32), a typed scalar."""
    if isinstance(x, Vec) or isinstance(exponent, Vec):
        tr = tracer()
        t = tr.vector_type("S.pow", x, exponent)
        a, b = (_vec(tr.coerce(v, t, "S.pow"), "S.pow", "f") for v in (x, exponent))
        return tr.compute("vpow", t, [a, b])
    typed = [v.type for v in (x, exponent) if isinstance(v, Scalar)]
    t = typed[0] if typed else DType("float32")
    if any(u != t for u in typed) or not is_float(t.elem):
        raise DTypeError(f"S.pow({_describe(x)}, {_describe(exponent)}): takes float "
                         f"vectors or scalars of one type")
    a, b = (np.array([v.value if isinstance(v, Scalar) else Scalar(t, v).value], t.elem)
            for v in (x, exponent))
    return Scalar(t, arith.vec_op("vpow", [a, b], t.elem, {})[0])


# -- comparisons with a mask, bit counts and rotations ---------------------------------------

def _compare(cmp: str, x, y, mask, what: str) -> Vec:
    """A comparison whose lanes where ``mask`` is False are False."""
    tr = tracer()
    hit = tr.compare(cmp, x, y)
    if mask is None:
        return hit
    return tr.logic("vand", hit, tr.mask(mask, hit.type.lanes, what), what)


def vceq(x, y, mask=None) -> Vec:
    """``x == y`` lane by lane; lanes where ``mask`` is False are False."""
    return _compare("eq", x, y, mask, "S.vceq")


def vcneq(x, y, mask=None) -> Vec:
    """``x != y``, as ``S.vceq``."""
    return _compare("ne", x, y, mask, "S.vcneq")


def vcge(x, y, mask=None) -> Vec:
    """``x >= y``, as ``S.vceq``."""
    return _compare("ge", x, y, mask, "S.vcge")


def vcgt(x, y, mask=None) -> Vec:
    """``x > y``, as ``S.vceq``."""
    return _compare("gt", x, y, mask, "S.vcgt")


def vcle(x, y, mask=None) -> Vec:
    """``x <= y``, as ``S.vceq``."""
    return _compare("le", x, y, mask, "S.vcle")


def vclt(x, y, mask=None) -> Vec:
    """``x < y``, as ``S.vceq``."""
    return _compare("lt", x, y, mask, "S.vclt")


def _count(op: str, x, mask, out_sign, what: str) -> Vec:
    x = _vec(x, what, "iu")
    out = tracer().compute(op, _signed(x.type, out_sign, what), [x])
    return _masked(out, mask, None, what)


def vpcnt(x, mask=None, out_sign=None) -> Vec:
    """The one bits of each integer lane (``out_sign`` picks the result's sign); masked-off
    lanes are undefined."""
    return _count("vpopcnt", x, mask, out_sign, "S.vpcnt")


def vcls(x, mask=None, out_sign=None) -> Vec:
    """The bits below the top bit that equal it, in each integer lane, as ``S.vpcnt``."""
    return _count("vcls", x, mask, out_sign, "S.vcls")


def vbrevs(x, mask=None) -> Vec:
    """The bits of each integer lane in reverse order; masked-off lanes are undefined."""
    x = _vec(x, "S.vbrevs", "iu")
    return _masked(tracer().compute("vbitrev", x.type, [x]), mask, None, "S.vbrevs")


def vror(x, shift, mask=None) -> Vec:
    """The bits of each integer lane rotated right by ``shift`` (a number or an integer
    vector, read as unsigned) modulo the lane width; masked-off lanes are undefined."""
    x = _vec(x, "S.vror", "iu")
    s = _integer_operand(shift, x.type, "S.vror")
    return _masked(tracer().compute("vrotr", x.type, [x, s]), mask, None, "S.vror")


# -- division, clip and logic with masks -----------------------------------------------------

def vdiv(x, y, mask=None):
    """``x / y`` lane by lane: floats round once; integers truncate toward zero, give 0
    where ``y`` is 0, and saturate the one overflow (the most negative value / -1);
    masked-off lanes are undefined."""
    tr = tracer()
    t = tr.vector_type("S.vdiv", x, y)
    if _is_float(t):
        return ops.vdiv(x, y, mask)
    a, b = (tr.coerce(v, t, "S.vdiv") for v in (x, y))
    _vec(a, "S.vdiv", "iu")
    return _masked(tr.compute("vquot", t, [a, b]), mask, None, "S.vdiv")


def vmod(x, y, mask=None):
    """The remainder of integer ``x / y`` with the sign of ``x`` (0 where ``y`` is 0);
    masked-off lanes are undefined."""
    tr = tracer()
    t = tr.vector_type("S.vmod", x, y)
    a, b = (tr.coerce(v, t, "S.vmod") for v in (x, y))
    _vec(a, "S.vmod", "iu")
    return _masked(tr.compute("vrem", t, [a, b]), mask, None, "S.vmod")


def clip(x, min_val, max_val, mask=None):
    """``min(max(x, min_val), max_val)`` (a NaN lane stays NaN); lanes where ``mask`` is
    False keep ``x``."""
    out = ops.clip(x, min_val, max_val)
    return out if mask is None else tracer().select(mask, out, x, "S.clip")


def _logic(op: str, x, y, mask, what: str) -> Vec:
    tr = tracer()
    out = tr.logic(op, x, y, what)
    if mask is None:
        return out
    if out.type.elem == np.bool_:  # masks: the inactive lanes are False
        return tr.logic("vand", out, tr.mask(mask, out.type.lanes, what), what)
    return _masked(out, mask, None, what)


def vand(x, y, mask=None) -> Vec:
    """AND of two masks, or bitwise of integer vectors; lanes where ``mask`` is False are
    False for masks, undefined for integers."""
    return _logic("vand", x, y, mask, "S.vand")


def vor(x, y, mask=None) -> Vec:
    """OR, as ``S.vand``."""
    return _logic("vor", x, y, mask, "S.vor")


def vxor(x, y, mask=None) -> Vec:
    """XOR, as ``S.vand``."""
    return _logic("vxor", x, y, mask, "S.vxor")


def _classify(x, mask, test, what: str):
    if isinstance(x, Scalar):
        return bool(test(np.float64(x.value)))
    x = _vec(x, what, "f")
    tr = tracer()
    if test is np.isnan:  # only NaN differs from itself
        hit = tr.compare("ne", x, x)
    else:  # |x| == inf, or |x| < inf (false for NaN)
        hit = tr.compare("eq" if test is np.isinf else "lt", tr.unary("vabs", x, what), np.inf)
    if mask is None:
        return hit
    return tr.logic("vand", hit, tr.mask(mask, x.type.lanes, what), what)


def isnan(x, mask=None):
    """A mask of the NaN lanes of a float vector (lanes where ``mask`` is False are False),
    or a bool for a typed scalar."""
    return _classify(x, mask, np.isnan, "S.isnan")


def isinf(x, mask=None):
    """A mask of the infinite lanes, as ``S.isnan``."""
    return _classify(x, mask, np.isinf, "S.isinf")


def isfinite(x, mask=None):
    """A mask of the finite lanes (neither infinite nor NaN), as ``S.isnan``."""
    return _classify(x, mask, np.isfinite, "S.isfinite")


def _resigned(x, sign: str, what: str):
    """``x`` as the integer type of its width with sign ``sign``: the same bits."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        x = Scalar(DType("int32"), x)  # npukit's int32 values are ints
    if isinstance(x, Scalar):
        if x.type.elem.kind not in "iu":
            raise DTypeError(f"{what} of a {x.type} scalar: expects an integer")
        t = _signed(x.type, sign, what)
        v = np.array(x.value).view(t.elem)[()]
        return int(v) if t == "int32" else Scalar(t, v)
    x = _vec(x, what, "iu")
    t = _signed(x.type, sign, what)
    return x if t == x.type else tracer().compute("vbitcast", t, [x])


def i(x):
    """``x`` (an integer vector or scalar) as the signed type of its width: the same bits
    (``S.i(u8x32)`` is ``int8x32``)."""
    return _resigned(x, "s", "S.i")


def u(x):
    """``x`` as the unsigned type of its width: the same bits."""
    return _resigned(x, "u", "S.u")


# -- multiply-add ----------------------------------------------------------------------------

def fma(acc, x, y, mask=None):
    """``acc + x · y`` of float32 lanes (or float32 scalars) rounded once; lanes where
    ``mask`` is False keep ``acc``."""
    if not any(isinstance(v, Vec) for v in (acc, x, y)):
        a, b, c = (np.float64(v.value if isinstance(v, Scalar) else v) for v in (acc, x, y))
        return Scalar(DType("float32"), np.float32(a + b * c))
    tr = tracer()
    t = tr.vector_type("S.fma", acc, x, y)
    if t.elem != np.float32:
        raise DTypeError(f"S.fma of {t}: expects float32 lanes. Only support float32 "
                         f"instruction (the Compass DSL's words)")
    a, b, c = (tr.coerce(v, t, "S.fma") for v in (acc, x, y))
    out = tr.compute("vfma", t, [a, b, c])
    return out if mask is None else tr.select(mask, out, a, "S.fma")


def _fma_half(acc, x, y, mask, first: int, what: str) -> Vec:
    """``acc + x · y`` on the even (``first`` 0) or odd lanes of 16-bit float ``x``, ``y``
    widened to float32: the product and the sum each rounded to float32."""
    tr = tracer()
    acc = _vec(acc, what)
    x, y = (tr.coerce(v, tr.vector_type(what, x, y), what) for v in (x, y))
    n = acc.type.lanes
    if acc.type.elem != np.float32 or not _is_float(x.type) or x.type.elem.itemsize != 2 \
            or x.type.lanes != 2 * n:
        raise DTypeError(f'{what}: expects a float32 accumulator of n lanes and 16-bit float '
                         f'operands of 2n lanes. Argument type mismatch: 0-th: "{acc.type}" '
                         f'vs. 1-th: "{x.type}"')
    wide = [tr.compute("vcast", acc.type, [_lanes(v, first, n, 2)]) for v in (x, y)]
    out = tr.arith("vadd", acc, tr.arith("vmul", *wide, what), what)
    return out if mask is None else tr.select(mask, out, acc, what)


def vfmae(acc, x, y, mask=None) -> Vec:
    """``acc + x · y`` on the even lanes of float16/bfloat16 ``x`` and ``y`` into float32
    ``acc`` (each operation rounded to float32); lanes where ``mask`` is False keep
    ``acc``."""
    return _fma_half(acc, x, y, mask, 0, "S.vfmae")


def vfmao(acc, x, y, mask=None) -> Vec:
    """``S.vfmae`` on the odd lanes."""
    return _fma_half(acc, x, y, mask, 1, "S.vfmao")


# -- what npukit does not model --------------------------------------------------------------

def asm(*args, **kwargs):
    """Refused: inline assembly of the Zhouyi NPU is not modelled (a ``KernelError``)."""
    raise KernelError("S.asm: npukit does not model inline assembly of the Zhouyi NPU; "
                      "write the operation with the DSL's builtins")
