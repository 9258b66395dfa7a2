"""Masked loads read no lane past the last active one of a constant mask (a list shorter
than the lanes, a string, or ``S.tail_mask`` of a number), so a tail may end where its
tensor ends, as in the Compass DSL; ``S.vload_gather`` reads elements through a vector
pointer too. Simulator and C against numpy, canaries around what is written."""

import numpy as np
import pytest

from npukit.dsl import BuildManager
from npukit.dsl import script as S
from npukit.errors import OutOfBoundsError

N = 35  # one 32-lane vector and a tail of 3


def _tail_kernel(mask_of):
    @S.prim_func
    def add(a: S.ptr("int8", "global"), b: S.ptr("int8", "global"), c: S.ptr("int8", "global")):
        S.vstore(S.vload(a) + S.vload(b), c)
        m = mask_of()
        S.vstore(S.vload(a + 32, mask=m) + S.vload(b + 32, mask=m), c + 32, mask=m)

    return add


@pytest.mark.slow
@pytest.mark.parametrize("mask_of", [lambda: [True] * 3, lambda: "3T29F",
                                     lambda: S.tail_mask(3, 32)],
                         ids=["short-list", "string", "tail_mask"])
def test_a_tail_ends_where_its_tensor_ends(mask_of):
    add = _tail_kernel(mask_of)
    a = (np.arange(N) * 37 - 100).astype(np.int8)
    b = (np.arange(N) * -11 + 60).astype(np.int8)
    want = (a.astype(np.int64) + b).astype(np.int8)  # wraps, as int8 lanes do
    for run in (add, BuildManager().build(add)):
        c = np.full(N, 55, np.int8)
        run(a, b, c)
        np.testing.assert_array_equal(c, want)


def test_an_active_lane_past_the_end_is_still_refused():
    add = _tail_kernel(lambda: [True] * 4)  # lane 3 reads element 35 of 35
    a = np.ones(N, np.int8)
    with pytest.raises(OutOfBoundsError, match="index 35 is past its extent of 35"):
        add(a, a, np.zeros(N, np.int8))


@pytest.mark.slow
def test_gather_through_a_vector_pointer_counts_elements():
    @S.prim_func
    def gather(a: S.ptr("int16x16", "global"), idx: S.ptr("u16", "global"),
               c: S.ptr("int16x16", "global")):
        c[1] = S.vload_gather(a, S.vload(idx, lanes=16))

    a = (np.arange(64) * 517 - 9000).astype(np.int16)
    idx = np.array([63, 0, 17, 16, 1, 40, 40, 2, 33, 62, 5, 31, 32, 9, 48, 15], np.uint16)
    want = np.concatenate([np.full(16, -3, np.int16), a[idx.astype(np.int64)],
                           np.full(16, -3, np.int16)])
    for run in (gather, BuildManager().build(gather)):
        c = np.full(48, -3, np.int16)
        run(a, idx, c)
        np.testing.assert_array_equal(c, want)
