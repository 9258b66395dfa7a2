"""Python numbers and type questions as the public Compass DSL reads them: a number given to
``S.reinterpret`` is a 32-bit constant (float32, int32, or uint32 past int32's range), and
``DataType``'s "float" means float16/float32 while "floating" counts bfloat16 too."""

import numpy as np
import pytest

from npukit.dsl import BuildManager, DataType
from npukit.dsl import script as S
from npukit.errors import NpukitError


@pytest.mark.slow
def test_reinterpret_reads_a_python_number_as_a_32_bit_constant():
    big, neg, frac = 3_000_000_000, -123_456_789, 0.1  # uint32 range; int32; a float64

    @S.prim_func
    def bits(f: S.ptr("float32", "global"), u: S.ptr("uint32", "global")):
        f[1] = S.reinterpret(big, "float32")
        u[1] = S.reinterpret(neg, "uint32")
        u[2] = S.reinterpret(frac, "uint32")   # rounded to float32 first

    want_f = np.array([7, big, 7], np.uint32).view(np.float32)
    want_f[[0, 2]] = 7.0
    want_u = np.array([9, neg & 0xFFFFFFFF, np.float32(frac).view(np.uint32), 9], np.uint32)
    for run in (bits, BuildManager().build(bits)):
        f, u = np.full(3, 7, np.float32), np.full(4, 9, np.uint32)
        run(f, u)
        np.testing.assert_array_equal(f.view(np.uint32), want_f.view(np.uint32))
        np.testing.assert_array_equal(u, want_u)


def test_reinterpret_refuses_a_number_no_32_bit_type_holds():
    @S.prim_func
    def too_big(u: S.ptr("uint32", "global")):
        u[0] = S.reinterpret(2 ** 32, "uint32")

    with pytest.raises(NpukitError, match="does not fit uint32"):
        BuildManager().build(too_big)


@pytest.mark.parametrize("name, float_, floating, float16, floating16", [
    ("float16x16", True, True, True, True), ("bfloat16x16", False, True, False, True),
    ("float32", True, True, False, False), ("bfloat16", False, True, False, True),
    ("int16x16", False, False, False, False)])
def test_float_and_floating_types(name, float_, floating, float16, floating16):
    t = DataType(name)
    assert (t.is_float, t.is_floating, t.is_float16, t.is_floating16) == \
        (float_, floating, float16, floating16)
    assert t.is_floating16_vector == (floating16 and t.is_vector)
    assert t.is_float_vector == (float_ and t.is_vector)
    assert t.is_bfloat == (floating and not float_)
