"""``while`` on a value known only at run time, as the Compass DSL runs it: the body runs
again while the test holds, each name it assigns one variable from one run to the next
(npukit: an ``ir.Repeat`` over registers). Simulator and C against the same loop in Python,
for inputs that run the body no, one and several times; canaries on what is not written."""

import numpy as np
import pytest
from dsl_check import host_and_c

import npukit as nk
from npukit.dsl import script as S


@S.prim_func
def _after_an_if(arr: S.ptr("int32", "global"), out: S.ptr("int32", "global")):
    a = 1
    if arr[0] == 2:
        a = 2
    else:
        a = 3
    while a < arr[1]:
        a += 2
    out[0] = a


@S.prim_func
def _counted(arr: S.ptr("int32", "global"), out: S.ptr("int32", "global")):
    x = arr[0]
    steps = 0
    v = S.vload(arr + 8)  # int32x8, doubled each run
    while x > 1:
        x = x - 3
        steps += 1
        v = v * 2
    out[0] = x
    out[1] = steps
    S.vstore(v, out + 8)


@pytest.mark.parametrize("first,limit", [(2, 10), (5, 10), (2, -4)])
def test_a_while_after_an_if_on_run_time_values(first, limit):
    a = 2 if first == 2 else 3
    while a < limit:
        a += 2
    arr = np.array([first, limit], np.int32)
    for _, out in host_and_c(_after_an_if, arr, np.full(2, 77, np.int32)):
        np.testing.assert_array_equal(out, [a, 77])


@pytest.mark.slow
@pytest.mark.parametrize("start", [1, 2, 17])
def test_numbers_and_vectors_carried_from_run_to_run(start):
    arr = np.concatenate([[start], np.zeros(7), np.arange(8) * 37 - 100]).astype(np.int32)
    x, steps, v = start, 0, arr[8:].astype(np.int64)
    while x > 1:
        x, steps, v = x - 3, steps + 1, v * 2
    want = np.full(17, 55, np.int32)
    want[:2], want[8:16] = [x, steps], v
    for _, out in host_and_c(_counted, arr, np.full(17, 55, np.int32)):
        np.testing.assert_array_equal(out, want)


@pytest.mark.slow
def test_leaving_the_body_early_is_refused():
    @S.prim_func
    def early(arr: S.ptr("int32", "global"), out: S.ptr("int32", "global")):
        x = arr[0]
        while x > 1:
            x = x - 1
            if x == 5:
                break
        out[0] = x

    with pytest.raises(nk.KernelError, match="a while on a value known only at run time "
                                             "leaves its body early"):
        early(np.array([9], np.int32), np.zeros(1, np.int32))


@pytest.mark.slow
def test_a_while_inside_a_device_loop():
    @S.prim_func
    def halvings(arr: S.ptr("int32", "global"), out: S.ptr("int32", "global")):
        for i in range(24):
            x = arr[i]
            n = 0
            while x > 0:
                x = x - 7
                n += 1
            out[i] = n

    arr = (np.arange(24) * 13 - 40).astype(np.int32)
    want = np.array([max(0, -(-int(v) // 7)) for v in arr] + [-9], np.int32)
    for _, out in host_and_c(halvings, arr, np.full(25, -9, np.int32)):
        np.testing.assert_array_equal(out, want)
