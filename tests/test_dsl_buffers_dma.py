"""Buffers in the Compass DSL's DMA: ``S.dma_copy`` takes a buffer (``S.match_buffer``,
``S.alloc_buffer`` of more than one dimension) for its first value's address, and
``buf.addr_of([i, j])`` takes a list as well as a tuple. Simulator and C against numpy,
canaries on what is not written."""

import numpy as np
import pytest
from dsl_check import host_and_c

from npukit.dsl import script as S


@pytest.mark.slow
def test_a_2d_block_moved_between_buffers():
    rows, cols = 5, 7

    @S.prim_func
    def shifted_sum(a_ptr: S.ptr("int16", "global"), out_ptr: S.ptr("int16", "global")):
        a = S.match_buffer(a_ptr, shape=(rows, cols))
        out = S.match_buffer(out_ptr, shape=(rows, cols))
        local = S.alloc_buffer((rows - 1, cols - 2), "int16", scope="lsram")
        # rows 1.. and columns 2.. of a, packed into local
        S.dma_copy(local, a.addr_of([1, 2]), cols - 2, cols, rows - 1)
        for i in range(rows - 1):
            for j in range(cols - 2):
                local[i, j] = local[i, j] * 3 - 5
        # back into out's rows 0.. columns 0.., its row stride kept
        S.dma_copy(out, local, cols - 2, cols - 2, rows - 1, cols)

    a = (np.arange(rows * cols) * 37 - 500).astype(np.int16)
    want = np.full((rows, cols), 1234, np.int16)
    block = a.reshape(rows, cols)[1:, 2:].astype(np.int64) * 3 - 5
    want[:rows - 1, :cols - 2] = block.astype(np.int16)
    for _, out in host_and_c(shifted_sum, a, np.full(rows * cols, 1234, np.int16)):
        np.testing.assert_array_equal(out.reshape(rows, cols), want)


@pytest.mark.slow
def test_a_whole_buffer_copied_by_its_name():
    @S.prim_func
    def twice(a_ptr: S.ptr("int32", "global"), out_ptr: S.ptr("int32", "global")):
        a = S.match_buffer(a_ptr, shape=(3, 4))
        out = S.match_buffer(out_ptr, shape=(3, 4))
        local = S.alloc_buffer((3, 4), "int32", scope="lsram")
        S.dma_copy(local, a, 12)
        for i in range(3):
            for j in range(4):
                local[i, j] = local[i, j] + local[i, j]
        S.dma_copy(out, local, 12)

    a = np.arange(12, dtype=np.int32) * -1001 + 7
    for _, out in host_and_c(twice, a, np.full(12, 99, np.int32)):
        np.testing.assert_array_equal(out, a * 2)
