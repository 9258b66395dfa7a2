"""An ``if`` on a value known only at run time that assigns names used after it, as the
Compass DSL runs it: one variable for both arms, its value after the ``if`` the one the arm
that ran left (npukit: a register both arms write). Each kernel runs with the condition
true and false, on the simulator and in C, against the same computation in Python."""

import numpy as np
import pytest
from dsl_check import host_and_c

import npukit as nk
from npukit.dsl import script as S


@S.prim_func
def _numbers(arr: S.ptr("int32", "global"), out: S.ptr("int32", "global")):
    a = 1
    if arr[0] == 2:
        a = 2
    else:
        a = -3000
    out[0] = a * 5 + arr[1]


@S.prim_func
def _each_arm_reads_the_value_before(arr: S.ptr("int32", "global"),
                                     out: S.ptr("int32", "global"), c: S.i32):
    x = arr[1]
    if arr[0] == 2:
        x = x + 10
        c += 2
    else:
        x = x * 3  # the value before the if, not the other arm's
        c += 7
    fresh = 0
    if arr[0] != 2:
        fresh = arr[1] - 1
    out[0] = x
    out[1] = c + fresh


@S.prim_func
def _vectors(a: S.ptr("int16x16", "global"), flag: S.ptr("int32", "global"),
             out: S.ptr("int16x16", "global")):
    v = a[0]
    if flag[0] > 0:
        w = v + 100
        v = w * 2
    else:
        w = a[1]
    out[0] = v
    out[1] = w


def _oracle(fn, *arrays):
    """What the kernel computes, in Python on the numbers (int32 wraps never reached)."""
    return fn(*[x.astype(np.int64) for x in arrays])


@pytest.mark.slow
@pytest.mark.parametrize("first", [2, 5])
def test_numbers_assigned_in_both_arms(first):
    arr = np.array([first, 4321], np.int32)
    a = 2 if first == 2 else -3000
    for _, out in host_and_c(_numbers, arr, np.full(2, 99, np.int32)):
        np.testing.assert_array_equal(out, [a * 5 + 4321, 99])


@pytest.mark.slow
@pytest.mark.parametrize("first", [2, -8])
def test_each_arm_starts_from_the_values_before_the_if(first):
    arr = np.array([first, 1234], np.int32)
    x, c = (1234 + 10, 40 + 2) if first == 2 else (1234 * 3, 40 + 7)
    fresh = 0 if first == 2 else 1233
    for _, out, _ in host_and_c(_each_arm_reads_the_value_before, arr,
                                np.full(3, 99, np.int32), np.int32(40)):
        np.testing.assert_array_equal(out, [x, c + fresh, 99])


@pytest.mark.slow
@pytest.mark.parametrize("flag", [1, 0])
def test_vectors_assigned_in_one_arm_or_both(flag):
    a = (np.arange(32) * 1111 - 17000).astype(np.int16)
    if flag:
        w = (a[:16].astype(np.int64) + 100).astype(np.int16)
        v = (w.astype(np.int64) * 2).astype(np.int16)  # wraps as int16 lanes do
    else:
        v, w = a[:16], a[16:]
    for _, _, out in host_and_c(_vectors, a, np.array([flag], np.int32),
                                np.full(40, 7, np.int16)):
        np.testing.assert_array_equal(out, np.concatenate([v, w, np.full(8, 7)]))


@pytest.mark.slow
def test_a_name_of_two_types_is_refused():
    @S.prim_func
    def two(a: S.ptr("int32", "global"), out: S.ptr("int32", "global")):
        v = S.vload(a)
        if a[0] > 0:
            v = S.cast(v, "int16")
        out[0] = v[0]

    with pytest.raises(nk.DTypeError, match=r"v is a int16x8 value in one arm .* int32x8"):
        two(np.arange(16, dtype=np.int32), np.zeros(1, np.int32))


@pytest.mark.slow
@pytest.mark.parametrize("first", [3, 0])
def test_a_one_lane_number_is_true_when_not_zero(first):
    @S.prim_func
    def nonzero(a: S.ptr("float32", "global"), out: S.ptr("float32", "global")):
        r = -1.5
        if a[0]:
            r = a[1] * 2
        out[0] = r

    a = np.array([first, 10.25], np.float32)
    for _, out in host_and_c(nonzero, a, np.full(2, 9, np.float32)):
        np.testing.assert_array_equal(out, [20.5 if first else -1.5, 9])


@S.prim_func
def _ternaries(a: S.ptr("int32", "global"), c: S.ptr("int32", "global")):
    a0, a1 = a[0], a[1]
    c[0] = a1 if a0 == 0 else 20
    c[1] = a[3] if 10 - a1 > a[0] else a[4] + a[2]
    c[2] = (a[3] if 30 + 3 > 11 else a[4]) + a[5]  # decided at build time
    fraction = 0.5 if a0 else -2.25  # numbers alone: a float32 value
    c[3] = S.cast(fraction * 4, "int32")
    vc = (c + 4).as_ptr("i32x8")
    vc[0] = a.as_ptr("i32x8")[0] if a0 == 0 else 10  # the number over every lane


@pytest.mark.slow
@pytest.mark.parametrize("first", [0, 6])
def test_ternaries_on_run_time_values(first):
    a = np.array([first, 3, -70, 400, 5000, -6, 7, 8], np.int32)
    x = [int(v) for v in a]
    want = [x[1] if x[0] == 0 else 20,
            x[3] if 10 - x[1] > x[0] else x[4] + x[2],
            x[3] + x[5],
            int((0.5 if x[0] else -2.25) * 4),
            *(x if x[0] == 0 else [10] * 8), 99]
    for _, c in host_and_c(_ternaries, a, np.full(13, 99, np.int32)):
        np.testing.assert_array_equal(c, want)
