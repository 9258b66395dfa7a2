"""``if`` on a value known only at run time (``npukit.dsl.branches``, ``ir.Branch``):
``S.vall``/``S.vany``, lanes of masks and comparisons of one-lane values steer the arm the
simulator and the generated C take; the arms may store and compute for themselves; what
would need values merged after the branch is refused by name.

(No ``from __future__ import annotations``: the kernels' annotations use local type names.)"""

import functools

import numpy as np
import pytest
from dsl_check import bits, canary, run_both

import npukit as nk
import npukit.dsl as S
from npukit import ir
from npukit.ir_text import program_text

rng = np.random.default_rng(2341)


def partial(n: int, dtype: str):
    return nk.spec((n,), dtype, partial=True)


@functools.cache
def all_any_program():
    @S.prim_func
    def all_any(a: S.ptr("i16x16", "global"), b: S.ptr("i16x16", "global"),
                out: S.ptr("i16", "global")):
        m = a[0] > b[0]
        if S.vall(m):
            out[0] = 10
        else:
            out[0] = 20
        if S.vany(m):
            out[1] = 30
        out[2] = 40  # after the branches, on every path

    return S.build(all_any, target="compass", out=partial(4, "int16"))


@pytest.mark.parametrize("case", ["all", "some", "none"])
def test_vall_vany_steer_the_arm_taken_on_both_back_ends(case):
    a = rng.integers(-50, 50, 16).astype(np.int16)
    b = {"all": a - 1, "some": a + np.where(np.arange(16) == 5, -1, 1),
         "none": a + 1}[case].astype(np.int16)
    got = run_both(all_any_program(), dict(a=a, b=b), {"out": (4, "int16")})["out"]
    gt = a > b
    want = canary(4, "int16")
    want[0] = 10 if gt.all() else 20
    if gt.any():
        want[1] = 30
    want[2] = 40
    assert np.array_equal(bits(got), bits(want)), (got, want)


@functools.cache
def per_lane_program(dtype: str, lanes: int):
    @S.prim_func
    def classify(a: S.ptr(dtype, "global"), out: S.ptr("i8", "global")):
        for i in range(lanes):
            if S.isnan(a[i]):
                out[i] = 1
            elif a[i] > 0:
                out[i] = 2
            else:
                t = a[i] * 2  # a value the arm computes and uses itself
                if t < -10:
                    out[i] = 3
                else:
                    out[i] = 4

    return S.build(classify, target="compass", a=lanes, out=partial(lanes, "int8"))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_branches_inside_a_loop_decide_each_iteration_and_nest(dtype):
    n = 24
    a = rng.normal(0, 8, n).astype(dtype)
    a[[0, 5, 9]] = np.nan
    a[[1, 2]] = [-5, -6]  # 2·a = -10 (not below -10) and -12
    got = run_both(per_lane_program(dtype, n), dict(a=a), {"out": (n, "int8")})["out"]
    x = a.astype(np.float64)
    want = np.where(np.isnan(x), 1, np.where(x > 0, 2, np.where(2 * x < -10, 3, 4)))
    assert got.tolist() == want.tolist()
    assert {1, 2, 3, 4} <= set(got.tolist())


def test_a_branch_is_one_ir_statement_shown_in_the_program_text_and_costed_both_ways():
    prog = all_any_program()
    branches = [st for st, _ in prog.walk() if isinstance(st, ir.Branch)]
    assert len(branches) == 2 and branches[0].orelse and not branches[1].orelse
    # the statements keep the labels of their source lines (decorator included above them)
    assert [b.label for b in branches] == ["if S.vall(m):", "if S.vany(m):"]
    assert {st.label for st in branches[0].then} == {"out[0] = 10"}
    assert "if " in program_text(prog) and "else:" in program_text(prog)
    a = np.zeros(16, np.int16)
    c_all = prog.run("sim", a=a, b=a - 1, out=np.zeros(4, np.int16)).cycles
    c_none = prog.run("sim", a=a, b=a + 1, out=np.zeros(4, np.int16)).cycles
    assert c_all == c_none > 0  # the cycle model does not see data: both arms, always


def test_an_output_written_only_in_arms_needs_a_partial_spec():
    @S.prim_func
    def only_in_arms(a: S.ptr("i16x16", "global"), out: S.ptr("i16", "global")):
        if S.vany(a[0] > 0):
            out[0] = 1
        else:
            out[0] = 2

    with pytest.raises(nk.ShapeError, match="output 'out'"):
        S.build(only_in_arms, target="compass")


def test_host_calls_take_branches_as_the_public_dsl_runs_them():
    @S.prim_func
    def pick(a: S.ptr("i32x8", "global"), b: S.ptr("i32x8", "global"),
             out: S.ptr("i32", "global")):
        if a[0][3] > b[0][3]:
            out[0] = a[0][3]
        else:
            out[0] = b[0][3]

    a, b = np.arange(8, dtype=np.int32), np.full(8, 5, np.int32)
    out = np.zeros(1, np.int32)
    pick(a, b, out)  # the simulator
    assert out[0] == 5
    S.BuildManager().build(pick)(a + 10, b, out)  # the generated C
    assert out[0] == 13


def test_merged_values_run_and_arms_leaving_early_are_refused_by_name():
    @S.prim_func
    def merged(a: S.ptr("i16x16", "global"), out: S.ptr("i16x16", "global")):
        v = a[0]
        if S.vall(v > 0):
            v = v + 1
        out[0] = v  # the arm's value when it ran (tests/test_dsl_runtime_if.py has more)

    for a in (np.arange(1, 17, dtype=np.int16), np.arange(-1, 15, dtype=np.int16)):
        out = np.zeros(16, np.int16)
        merged(a, out)
        np.testing.assert_array_equal(out, a + 1 if (a > 0).all() else a)

    @S.prim_func
    def early(a: S.ptr("i16x16", "global"), out: S.ptr("i16x16", "global")):
        if S.vany(a[0] > 0):
            return
        out[0] = a[0]

    with pytest.raises(nk.KernelError, match="leaves its arm early"):
        S.build(early, target="compass", out=partial(16, "int16"))


def test_a_barrier_inside_an_arm_is_refused():
    @S.prim_func
    def sync_in_arm(a: S.ptr("i16x16", "global"), out: S.ptr("i16x16", "global")):
        if S.vany(a[0] > 0):
            S.barrier()
        out[0] = a[0]

    with pytest.raises(nk.KernelError, match="S.barrier inside an if on a run-time value"):
        S.build(sync_in_arm, target="compass")


def test_vall_refuses_a_vector_of_numbers():
    @S.prim_func
    def bad(a: S.ptr("i16x16", "global"), out: S.ptr("i16x16", "global")):
        if S.vall(a[0]):
            out[0] = a[0]

    with pytest.raises(nk.DTypeError, match=r"S\.vall: expects a bool vector"):
        S.build(bad, target="compass", out=partial(16, "int16"))


KERNEL_WITHOUT_A_FILE = """
import numpy as np
import npukit.dsl as S

@S.prim_func
def k(a: S.ptr("int32x8", "global"), out: S.ptr("int32x8", "global")):
    v = a[0]
    if S.vall(v > 0):
        out[0] = v

k(np.arange(1, 9, dtype=np.int32), np.zeros(8, np.int32))
"""


@pytest.mark.parametrize("how", ["-c", "stdin"])
def test_an_if_on_a_mask_without_a_source_file_says_why(how):
    """Typed at ``python -c`` or piped to ``python -``, a kernel has no source to rewrite:
    the error says so and what to do, instead of a vector's missing truth value."""
    import subprocess
    import sys

    argv = [sys.executable, "-c", KERNEL_WITHOUT_A_FILE] if how == "-c" else [sys.executable, "-"]
    r = subprocess.run(argv, input=None if how == "-c" else KERNEL_WITHOUT_A_FILE,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert "KernelError: `if` on a run-time value in k()" in last
    assert "keeps no source" in last and "put the kernel in a .py file" in last
