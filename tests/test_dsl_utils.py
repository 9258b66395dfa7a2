"""``npukit.dsl.utils``: the public Compass DSL's type helpers its tests import, each case
written out by hand from the rules of the Compass DSL's binary operations."""

import pytest

from npukit.dsl.utils import double_elem_width, get_binary_op_result_type


@pytest.mark.parametrize("vdtype, wide", [
    ("int8x32", "int16x16"), ("uint8x32", "uint16x16"), ("int16x16", "int32x8"),
    ("uint16x16", "uint32x8"), ("float16x16", "float32x8"),
    ("uint8x8", "uint16x8"),   # fits one register: the lanes stay
    ("int32x8", "int32x8"), ("float32x8", "float32x8"),   # no wider lane type
])
def test_double_elem_width(vdtype, wide):
    assert double_elem_width(vdtype) == wide


@pytest.mark.parametrize("lhs, rhs, out", [
    ("int8", "int8", "int8"), ("int8", "int16", "int16"), ("uint32", "uint8", "uint32"),
    ("float16", "float32", "float32"), ("int32", "float16", "float16"),
    ("bfloat16", "int8", "bfloat16"), ("float16", "bfloat16", "float16"),
    ("int8", "uint16", "uint16"), ("int32", "uint8", "int32"),   # mixed sign: the wider
    ("int16", "uint16", "uint16"), ("uint8", "int8", "uint8"),   # equal width: unsigned
    ("int8x32", "int16", "int16"),                               # lanes do not matter
    (3, 4, "int32"), ("uint8", 200, "uint8"), (-1, "uint8", "int32"),  # a literal that
    (32767, "int8", "int32"), (8, "int16", "int16"),                   # fits takes the type
    ("float16", 1.5, "float32"), (True, "bool", "bool"),
])
def test_binary_op_result_type(lhs, rhs, out):
    assert get_binary_op_result_type(lhs, rhs) == out
