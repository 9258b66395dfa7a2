"""``S.dma_memset`` as the Compass DSL defines it: ``num`` counts scalar elements (also
through a vector pointer) and the value may be a run-time scalar (``a[3]``). Simulator and
C against numpy, canaries around what is set."""

import numpy as np
import pytest
from dsl_check import host_and_c

from npukit.dsl import script as S


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["int8", "uint16", "float16", "float32"])
def test_a_run_time_value_is_set(dtype):
    @S.prim_func
    def fill(a: S.ptr(dtype, "global"), b: S.ptr(dtype, "global")):
        S.dma_memset(b + 2, a[3], 20)

    a = np.array([1, 2, 3, -9.5 if dtype.startswith("f") else 77, 5], dtype)
    canary = np.array(42, dtype)
    want = np.full(30, canary)
    want[2:22] = a[3]
    for _, b in host_and_c(fill, a, np.full(30, canary)):
        np.testing.assert_array_equal(b.view(f"u{a.itemsize}"), want.view(f"u{a.itemsize}"))


@pytest.mark.slow
def test_the_count_is_of_elements_through_a_vector_pointer():
    @S.prim_func
    def fill(out: S.ptr("int16x16", "global")):
        S.dma_memset(out + 1, -300, 24)  # 24 elements: one vector and half of the next

    want = np.full(64, 9, np.int16)
    want[16:40] = -300
    for (out,) in host_and_c(fill, np.full(64, 9, np.int16)):
        np.testing.assert_array_equal(out, want)


@pytest.mark.slow
def test_a_loop_reading_local_memory_set_before_it():
    # long enough that the C shares the loop's elements among threads: the task reads the
    # local memory too
    n = 6001

    @S.prim_func
    def add_set(a: S.ptr("int16", "global"), b: S.ptr("int16", "global")):
        local = S.alloc_buffer([n], "int16", scope="lsram")
        S.dma_memset(local, 1000, n)
        for i in range(n):
            b[i] = a[i] + local[i]

    a = (np.arange(n) * 13 - 30000).astype(np.int16)
    want = (a.astype(np.int64) + 1000).astype(np.int16)  # wraps as int16 lanes do
    for _, b in host_and_c(add_set, a, np.full(n, 5, np.int16)):
        np.testing.assert_array_equal(b, want)
