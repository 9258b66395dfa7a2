"""Local memory and vectors across ``S.barrier``, as the Compass DSL defines them: each TEC
has its own, so what a TEC wrote before a barrier it reads (and updates) after it. npukit
runs the TECs in turns between barriers and gives such a buffer a copy per TEC; copies that
do not fit the memory are a ``KernelError`` naming the buffer and the bytes. Simulator and
C against numpy, canaries on what is not written."""

import numpy as np
import pytest
from dsl_check import host_and_c

import npukit as nk
from npukit.dsl import script as S


@pytest.mark.slow
def test_each_tec_updates_its_own_local_data_after_a_barrier():
    @S.prim_func
    def scaled(a: S.ptr("int32", "global"), out: S.ptr("int32", "global")):
        tid = S.get_local_id()
        buf = S.alloc_buffer([6], "int32", scope="lsram")
        S.dma_copy(buf, a + tid * 6, 6)
        w = S.vload(a + tid * 8) + 5  # a vector of each TEC's own
        S.barrier()
        for i in range(6):
            buf[i] = buf[i] * 3 + 1
        S.dma_copy(out + tid * 6, buf, 6)
        S.vstore(w, out + 24 + tid * 8)

    a = (np.arange(32) * 7919 - 100000).astype(np.int32)
    want = np.concatenate([a[:24] * 3 + 1, a + 5])
    for _, out in host_and_c(scaled, a, np.full(24 + 32 + 3, -5, np.int32)):
        np.testing.assert_array_equal(out, np.concatenate([want, [-5, -5, -5]]))


@pytest.mark.slow
def test_copies_that_do_not_fit_the_local_memory():
    n = 3 * 1024  # 12 KiB of int32: four copies need 48 KiB of the 32 KiB lsram

    @S.prim_func
    def big(a: S.ptr("int32", "global"), out: S.ptr("int32", "global")):
        buf = S.alloc_buffer([n], "int32", scope="lsram")
        S.dma_copy(buf, a + S.get_local_id() * n, n)
        S.barrier()
        S.dma_copy(out + S.get_local_id() * n, buf, n)

    with pytest.raises(nk.KernelError, match=r"`buf`.* copies need 49152 B of the 32768 B "
                                             r"lsram"):
        big(np.arange(4 * n, dtype=np.int32), np.zeros(4 * n, np.int32))
