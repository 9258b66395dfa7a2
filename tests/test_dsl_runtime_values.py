"""Run-time values where the Compass DSL takes them: a one-lane value (``a[0] + a[1]``) as
a subroutine's scalar argument, converted to its annotated type as C converts; a strided
``S.dma_copy`` whose width and destination stride are known only at run time (npukit copies
its rows one by one). Simulator and C against numpy, canaries on what is not written."""

import numpy as np
import pytest
from dsl_check import host_and_c

from npukit.dsl import script as S


@S.prim_func
def _twice(val: S.int32) -> S.int32:
    return val + val


@pytest.mark.slow
def test_a_run_time_uint32_passed_to_an_int32_parameter():
    @S.prim_func
    def sums(arr: S.ptr("int32", "global"), out: S.ptr("int32", "global")):
        total = S.u32(arr[0])  # a run-time value: the loop carries it
        for i in range(5):
            total += S.u32(arr[i + 1])
        out[0] = _twice(total)
        out[1] = total

    arr = np.array([7, -3000, 2**30, 5, 2**30, -11], np.int32)
    total = arr.astype(np.int64).sum()
    wrap = np.array([total * 2, total]).astype(np.uint64).astype(np.uint32).view(np.int32)
    for _, out in host_and_c(sums, arr, np.full(3, 77, np.int32)):
        np.testing.assert_array_equal(out, [*wrap, 77])


@pytest.mark.slow
def test_a_strided_copy_of_run_time_width_and_stride():
    rows, cols, tile = 3, 11, 4  # tiles of 4 columns: 4, 4, then 3

    @S.prim_func
    def tiles(a: S.ptr("int16", "global"), out: S.ptr("int16", "global")):
        local = S.alloc(rows * tile, "int16", scope="lsram")
        for t in range(S.ceildiv(cols, tile)):
            width = S.min(cols - t * tile, tile)
            # rows of `width` values, packed `width` apart in local
            S.dma_copy(local, a + t * tile, width, cols, rows, width)
            # and back, each tile's rows laid out one after another
            S.dma_copy(out + t * tile * rows, local, width * rows)

    a = (np.arange(rows * cols) * 91 - 1500).astype(np.int16)
    grid = a.reshape(rows, cols)
    want = np.concatenate([grid[:, c:c + tile].reshape(-1) for c in range(0, cols, tile)])
    for _, out in host_and_c(tiles, a, np.full(rows * cols + 5, -7, np.int16)):
        np.testing.assert_array_equal(out, np.concatenate([want, np.full(5, -7)]))
