"""The public Compass DSL's type helpers that its tests import, by the same names
(``from npukit.dsl.utils import double_elem_width``): the result type of a widening
instruction and of a binary operation on scalars.

>>> from npukit.dsl.utils import double_elem_width, get_binary_op_result_type
>>> double_elem_width("int8x32"), get_binary_op_result_type("int8", "uint16")
('int16x16', 'uint16')
"""

from __future__ import annotations

from .types import DType


def double_elem_width(vdtype) -> DType:
    """``vdtype`` with lanes twice as wide, in at most one 256-bit register: ``int8x32`` ->
    ``int16x16``, ``uint8x8`` -> ``uint16x8``; 32-bit lanes have no wider type and stay."""
    t = DType(vdtype)
    if t.bits == 32:
        return t
    lanes = t.lanes // 2 if 2 * t.bits * t.lanes > 256 else t.lanes
    return t.with_bits(2 * t.bits).with_lanes(lanes)


def _kind(t: DType) -> str:
    if t.is_bfloat16:
        return "bfloat"
    return "float" if t.is_float else "int" if t.is_int else "uint" if t.is_uint else "bool"


def _fits(value: int, t: DType) -> bool:
    lo, hi = (0, 2 ** t.bits - 1) if t.is_uint else (-2 ** (t.bits - 1), 2 ** (t.bits - 1) - 1)
    return t.is_integer and lo <= value <= hi


def _operand(x) -> DType | int:
    """A type name or ``DType`` as a ``DType``; a Python float is float32, a bool is bool,
    an integer literal stays a number (its type depends on the other operand)."""
    if isinstance(x, bool):
        return DType("bool")
    if isinstance(x, float):
        return DType("float32")
    return x if isinstance(x, int) else DType(x)


def get_binary_op_result_type(lhs, rhs) -> DType:
    """The scalar type of ``lhs op rhs``, each a type (name) or a Python number, by the
    Compass DSL's rules: an integer literal takes the other operand's integer type when it
    fits it (else int32); same kinds widen to the wider; a float (then a bfloat16) operand
    makes the result its type; integers of mixed sign give the wider, and at equal width
    the unsigned one."""
    a, b = _operand(lhs), _operand(rhs)
    if isinstance(a, int) and isinstance(b, int):
        return DType("int32")
    if isinstance(a, int):
        a = b.element_of if _fits(a, b) else DType("int32")
    if isinstance(b, int):
        b = a.element_of if _fits(b, a) else DType("int32")
    a, b = a.element_of, b.element_of
    ka, kb = _kind(a), _kind(b)
    if a == b:
        return a
    if ka == kb:
        return a if a.bits > b.bits else b
    for kind in ("float", "bfloat"):
        if kind in (ka, kb):
            return a if ka == kind else b
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    return a if ka == "uint" else b
