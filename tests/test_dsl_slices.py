"""Slices of pointers as the Compass DSL reads them (numpy's rule): ``p[a:b:step]`` of a
scalar pointer is the values ``a, a + step, ... < b`` as the lanes of one vector, loaded or
stored; ``vp[a:b]`` of a vector pointer is ``b - a`` vectors as one. Simulator and C
against numpy slicing, canaries on every element not written."""

import numpy as np
import pytest
from dsl_check import host_and_c

from npukit.dsl import script as S


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["int8", "float16", "int32"])
def test_strided_slices_load_and_store(dtype):
    n = 64

    @S.prim_func
    def strided(a: S.ptr(dtype, "global"), out: S.ptr(dtype, "global")):
        out[3:40:3] = a[1:50:4]  # 13 lanes each
        out[41:46:2] = a[0]      # a number spread over 3 lanes

    a = (np.arange(n) * 7 - 100).astype(dtype)
    want = np.full(n, 9, dtype)
    want[3:40:3] = a[1:50:4]
    want[41:46:2] = a[0]
    for _, out in host_and_c(strided, a, np.full(n, 9, dtype)):
        np.testing.assert_array_equal(out, want)


@pytest.mark.slow
def test_a_slice_of_a_vector_pointer_is_its_vectors_as_one():
    @S.prim_func
    def moved(a: S.ptr("int16x16", "global"), out: S.ptr("int16x16", "global")):
        three = a[1:4]  # int16x48
        (out + 1)[:3] = three + 1

    a = (np.arange(80) * 311 - 9000).astype(np.int16)
    want = np.full(80, -1, np.int16)
    want[16:64] = a[16:64] + 1
    for _, out in host_and_c(moved, a, np.full(80, -1, np.int16)):
        np.testing.assert_array_equal(out, want)
