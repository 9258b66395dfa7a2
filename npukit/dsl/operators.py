"""The Compass DSL's Python operators on vectors and one-lane values, by its type rules:

- operands of different types meet in the type of ``get_binary_op_result_type`` (the wider
  of one kind; a float, then a bfloat16, wins; at equal width the unsigned integer), each
  converted lane for lane as ``S.cast`` (``int8x8 + int32x8`` is ``int32x8``);
- ``/`` on integers truncates toward zero and saturates (the one overflow, the least value
  / -1), ``//`` is the same, ``%`` is C's remainder (the sign of the dividend);
- ``**`` takes floats, computed as ``S.exp`` and the other math functions are;
- ``<<`` and ``>>`` shift by the right operand converted to the left one's type, read as
  unsigned (a count of the lane width or more empties the lane; ``>>`` is arithmetic for
  signed lanes); between two one-lane values the count is taken modulo 32, as the scalar
  unit does. A number on the left takes the right operand's type.

>>> import numpy as np, npukit.dsl as S
>>> @S.prim_func
... def f(a: S.ptr("i8x8", "global"), b: S.ptr("i32x8", "global"), out: S.ptr("i32x8", "global")):
...     out[0] = (a[0] + b[0]) / 3 + (b[0] << a[0])
>>> prog = S.build(f, target="compass")
>>> out = np.zeros(8, np.int32)
>>> _ = prog.run("sim", a=np.arange(8, dtype=np.int8), b=np.full(8, -7, np.int32), out=out)
>>> out.tolist()
[-9, -16, -29, -57, -113, -224, -448, -896]
"""

from __future__ import annotations

import sys

import numpy as np

from ..dtypes import is_float
from ..errors import DTypeError
from . import ops
from .types import DType
from .utils import get_binary_op_result_type
from .values import Scalar, Vec, register_operators, tracer


def promoted(a, b) -> tuple:
    """``a`` and ``b`` converted to the type they meet in (``get_binary_op_result_type``)
    when they are typed (vectors, one-lane values, typed scalars) of different element
    types, or one is typed and the other a Python number that moves it: a float literal
    makes integer or float16 lanes float32 (``u8x32 + 5.3`` is ``float32x32``), an integer
    literal that does not fit integer lanes makes them int32 (``u8x32 + 300``), as the
    Compass DSL's operators do. A number stays a number (the operation converts it)."""
    typed = [x for x in (a, b) if isinstance(x, (Vec, Scalar))]
    if not typed or any(x.type.elem == np.bool_ for x in typed):
        return a, b  # masks meet only masks: the operation says so
    t = meet(typed[0].type, typed[1].type) if len(typed) == 2 else \
        literal_meet(typed[0].type, b if typed[0] is a else a)
    if t is None:
        return a, b
    return tuple(_to(x, t) if isinstance(x, (Vec, Scalar)) else x for x in (a, b))


def literal_meet(t: DType, x) -> DType | None:
    """The element type a ``t`` operand and Python number ``x`` meet in
    (``get_binary_op_result_type``); None when ``x`` is not a number."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return None
    return get_binary_op_result_type(t.element_of, x)


def meet(a: DType, b: DType) -> DType:
    """The element type two typed operands of types ``a`` and ``b`` meet in."""
    return get_binary_op_result_type(a.element_of, b.element_of)


def _to(x, t: DType):
    if x.type.element_of == t:
        return x
    if isinstance(x, Vec):
        return ops.cast(x, t.with_lanes(x.type.lanes))
    return ops.cast(x, t)


def arith(op: str, a, b, what: str) -> Vec:
    """``a <what> b`` with the operands promoted; integer ``/`` truncates and saturates."""
    a, b = promoted(a, b)
    return tracer().arith(op, a, b, what)


def integer(op: str, a, b, what: str) -> Vec:
    """``//`` (``vquot``) or ``%`` (``vrem``) of integer operands, promoted."""
    a, b = promoted(a, b)
    tr = tracer()
    t = tr.vector_type(what, a, b)
    if t.elem.kind not in "iu":
        raise DTypeError(f"{what} on {t}: the operator takes integers (use / for floats)")
    return tr.compute(op, t, [tr.coerce(a, t, what), tr.coerce(b, t, what)])


def power(a, b) -> Vec:
    """``a ** b`` of float operands, promoted (``vpow``: in float64, rounded to float32,
    then to the lane type); the Compass DSL has no integer power."""
    a, b = promoted(a, b)
    tr = tracer()
    t = tr.vector_type("**", a, b)
    if not is_float(t.elem):
        raise DTypeError(f"** on {t}: the power takes float16/bfloat16/float32 lanes")
    return tr.compute("vpow", t, [tr.coerce(a, t, "**"), tr.coerce(b, t, "**")])


def shift(op: str, x, s, what: str) -> Vec:
    """``x << s`` (``vshl``) or ``x >> s`` (``vshr``) by the Compass DSL's rules (module
    docstring)."""
    tr = tracer()
    if not isinstance(x, Vec):  # `k << v`: k takes v's type, as the Compass DSL does
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer, Scalar)):
            raise DTypeError(f"{what}: shifts take integers, got {x!r}")
        x = tr.coerce(ops.cast(x, s.type.element_of), s.type, what)
    if isinstance(s, Vec) and s.type.lanes > x.type.lanes:  # a one-lane value is spread
        x = tr.coerce(x, x.type.with_lanes(s.type.lanes), what)
    t = x.type
    if t.elem.kind not in "iu":
        raise DTypeError(f"{what} on {t}: shifts take integer lanes")
    if isinstance(s, (Vec, Scalar)):
        if s.type.elem.kind not in "iu":
            raise DTypeError(f"{what}: the shift count is a {s.type}; it must be an integer")
        s = ops.cast(s, t.element_of.with_lanes(s.type.lanes) if isinstance(s, Vec)
                     else t.element_of)
    elif isinstance(s, (int, np.integer)) and not isinstance(s, (bool, np.bool_)):
        s = ops.cast(Scalar(DType("int32"), int(s)), t.element_of)
    count = tr.coerce(s, t, what)
    if t.lanes == 1 and (not isinstance(s, Vec) or s.type.lanes == 1):
        count = tr.logic("vand", count, 31, what)  # the scalar unit shifts modulo 32
    return tr.compute(op, t, [x, count])


register_operators(sys.modules[__name__])
