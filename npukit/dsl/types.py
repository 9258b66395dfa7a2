"""The Compass DSL's types: scalars (``S.fp16``, ``"float16"``), vectors (``S.fp16x16``,
``"float16x16"``) and pointers (``S.ptr(dtype, scope)``).

A type is a ``DType``: a ``str`` holding its full name (``"float16x16"``), so a type and its
name are interchangeable, as in the Compass DSL, with ``elem`` (its numpy element dtype)
and ``lanes`` (1 for a scalar).

>>> t = DType("fp16x16")
>>> t, t.lanes, t.elem.name, t == "float16x16", DType("u16").lanes
('float16x16', 16, 'float16', True, 1)
"""

from __future__ import annotations

import re

import numpy as np

from ..dtypes import dtype
from ..errors import DTypeError

# The Compass DSL's element types and their short names (language_basics/types.md).
ALIASES = {"i8": "int8", "u8": "uint8", "i16": "int16", "u16": "uint16", "i32": "int32",
           "u32": "uint32", "fp16": "float16", "fp32": "float32", "bf16": "bfloat16",
           "bool": "bool"}
ELEMENTS = tuple(ALIASES.values())
SCOPES = ("global", "lsram", "shared", "constant", "private")
_NAME = re.compile(r"^(.*?)(?:x([0-9]+))?$")


class DType(str):
    """A scalar or vector type of the Compass DSL, spelled ``"float16"``, ``"fp16"``,
    ``"float16x16"`` or ``"fp16x16"``; calling it makes a value of the type (a constant
    scalar, or a vector with every lane set: ``S.u16x16(510)``)."""

    elem: np.dtype
    lanes: int

    def __new__(cls, spec) -> DType:
        if isinstance(spec, DType):
            return spec
        if isinstance(spec, np.dtype) or (isinstance(spec, type) and issubclass(spec, np.generic)):
            spec = np.dtype(spec).name
        m = _NAME.match(spec) if isinstance(spec, str) else None
        base = m and ALIASES.get(m.group(1), m.group(1))
        if not m or base not in ELEMENTS or m.group(2) in ("0", "1"):
            raise DTypeError(f"unknown Compass DSL type {spec!r}: use one of "
                             f"{', '.join(ELEMENTS)} (or {', '.join(ALIASES)}), or a vector "
                             f"such as float16x16 / fp16x16")
        lanes = int(m.group(2) or 1)
        obj = super().__new__(cls, base if lanes == 1 else f"{base}x{lanes}")
        obj.elem = dtype(base)
        obj.lanes = lanes
        return obj

    @property
    def is_vector(self) -> bool:
        return self.lanes > 1

    @property
    def element_of(self) -> DType:
        """The scalar type of the lanes: ``DType("fp16x16").element_of == "float16"``."""
        return DType(self.elem.name)

    def with_lanes(self, lanes: int) -> DType:
        return DType(self.elem.name if lanes == 1 else f"{self.elem.name}x{lanes}")

    # The questions the Compass DSL's DataType answers, by the same names: "float" is
    # float16/float32, "floating" counts bfloat16 too.
    is_scalar = property(lambda self: self.lanes == 1)
    is_bool = property(lambda self: self.elem == np.bool_)
    is_float = property(lambda self: self.elem.kind == "f")
    is_floating = property(lambda self: self.is_float or self.is_bfloat16)
    is_float16 = property(lambda self: self.elem == np.float16)
    is_floating16 = property(lambda self: self.is_floating and self.bits == 16)
    is_float32 = is_floating32 = property(lambda self: self.elem == np.float32)
    is_integer = property(lambda self: self.elem.kind in "iu")
    is_int = is_signed = property(lambda self: self.elem.kind == "i")
    is_uint = is_unsigned = property(lambda self: self.elem.kind == "u")
    is_bfloat = is_bfloat16 = property(lambda self: self.elem.name == "bfloat16")
    is_bfloat16_scalar = property(lambda self: self.is_bfloat16 and self.is_scalar)
    is_int16 = property(lambda self: self.elem == np.int16)
    is_int32 = property(lambda self: self.elem == np.int32)
    is_uint16 = property(lambda self: self.elem == np.uint16)
    is_uint32 = property(lambda self: self.elem == np.uint32)
    is_bool_vector = property(lambda self: self.is_bool and self.is_vector)
    is_float_vector = property(lambda self: self.is_float and self.is_vector)
    is_floating16_vector = property(lambda self: self.is_floating16 and self.is_vector)
    is_integer_vector = property(lambda self: self.is_integer and self.is_vector)
    is_integer_scalar = property(lambda self: self.is_integer and self.is_scalar)
    is_float_scalar = property(lambda self: self.is_float and self.is_scalar)
    is_floating_scalar = property(lambda self: self.is_floating and self.is_scalar)
    bits = property(lambda self: 8 * self.elem.itemsize if not self.is_bool else 1)
    bytes = itemsize = property(lambda self: self.elem.itemsize)
    total_bits = property(lambda self: self.bits * self.lanes)
    total_bytes = property(lambda self: self.elem.itemsize * self.lanes)

    def with_bits(self, bits: int) -> DType:
        """The same kind of number in ``bits`` bits: ``DType("int8x32").with_bits(16)`` is
        ``int16x32``."""
        kind = "float" if self.is_floating else {"i": "int", "u": "uint"}[self.elem.kind]
        return DType(f"{kind}{bits}").with_lanes(self.lanes)

    def with_int(self) -> DType:
        """The signed integer type of the same width and lanes (``float16x16`` ->
        ``int16x16``)."""
        return DType(f"int{self.bits}").with_lanes(self.lanes)

    def with_uint(self) -> DType:
        """The unsigned integer type of the same width and lanes."""
        return DType(f"uint{self.bits}").with_lanes(self.lanes)

    def __call__(self, value=0):
        return _make_value(self, value)

    def __reduce__(self):
        return DType, (str(self),)


_make_value = None  # what calling a type does: set by register_value_maker


def register_value_maker(fn) -> None:
    """Make ``fn(type, value)`` what calling a type does: ``npukit.dsl.conversion``
    registers its ``S.cast``-based maker (it imports this module, which therefore cannot
    import it back)."""
    global _make_value
    _make_value = fn


def is_type_name(value) -> bool:
    """True for a plain string naming a type (``"float16"``, ``"fp16x16"``)."""
    if type(value) is not str:
        return False
    try:
        DType(value)
    except DTypeError:
        return False
    return True


def is_vector_name(value) -> bool:
    """True for a string naming a vector type (``"float16x16"``): a module-level constant a
    kernel may use as a type (``vdtype.lanes``)."""
    return is_type_name(value) and DType(value).is_vector


class PtrType:
    """``S.ptr(dtype, scope)``: the type of a pointer parameter; ``dtype`` may be a vector
    type (the pointer then steps by whole vectors). The scope is ``"private"`` (a TEC's own
    variables: a register's ``v.addr``) unless given, as in the Compass DSL; a kernel's
    tensors are ``"global"``."""

    def __init__(self, dtype, scope: str = "private"):
        if scope not in SCOPES:
            raise DTypeError(f"S.ptr: unknown scope {scope!r}; npukit's Compass DSL supports "
                             f"{', '.join(SCOPES)}")
        self.dtype = DType(dtype)
        self.scope = scope

    def __repr__(self) -> str:
        return f"S.ptr({str(self.dtype)!r}, {self.scope!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, PtrType) and (self.dtype, self.scope) == (other.dtype,
                                                                           other.scope)

    __hash__ = object.__hash__


def ptr(dtype, scope: str = "private") -> PtrType:
    """The type of a pointer argument: ``in0: S.ptr("float16", "global")``; a sub-function's
    ``x: S.ptr("int32x8")`` takes a register's address (``v.addr``)."""
    return PtrType(dtype, scope)
