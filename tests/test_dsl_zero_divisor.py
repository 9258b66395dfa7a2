"""``S.ceildiv`` by zero (``npukit.dsl.ops``, the simulator's checked ``vquot``): the
simulator raises a ``ZeroDivisorError``, which is a ``ZeroDivisionError`` as in the public
Compass DSL's simulation, naming the statement and the lane; generated C, which cannot
raise, gives 0 and does not stop the process. Nonzero divisors against Python's integers."""

import numpy as np
import pytest
from dsl_check import canary

import npukit
import npukit.dsl as S
from npukit.errors import ZeroDivisorError


def _kernel():
    @S.prim_func
    def f(a: S.ptr("i16x16", "global"), d: S.ptr("i16x16", "global"),
          out: S.ptr("i16x16", "global")):
        out[0] = S.ceildiv(a[0], d[0])
    return f


def test_a_zero_lane_raises_in_the_simulator_and_gives_0_in_c():
    a = np.arange(1, 17, dtype="int16") * 7
    d = np.arange(1, 17, dtype="int16") % 5 + 1
    d[11] = 0
    f = _kernel()
    with pytest.raises(ZeroDivisorError) as exc:
        f(a, d, canary(16, "int16"))
    assert isinstance(exc.value, ZeroDivisionError) and isinstance(exc.value,
                                                                   npukit.NpukitError)
    msg = str(exc.value)
    assert "The 2nd arg can't be zero." in msg and "lane 11" in msg and "S.ceildiv" in msg
    out = canary(16, "int16")
    S.BuildManager().build(f)(a, d, out)
    want = [-(-int(x) // int(y)) if y else 0 for x, y in zip(a, d)]  # positive operands
    assert out.tolist() == want


def test_nonzero_divisors_agree_on_both_back_ends():
    a = np.arange(1, 17, dtype="int16") * 9
    d = np.arange(1, 17, dtype="int16") % 6 + 1
    f = _kernel()
    runs = []
    for run in (f, S.BuildManager().build(f)):
        out = canary(16, "int16")
        run(a, d, out)
        runs.append(out.tolist())
    assert runs[0] == runs[1] == [-(-int(x) // int(y)) for x, y in zip(a, d)]


def test_a_constant_zero_divisor_is_refused_at_build_time():
    @S.prim_func
    def f(out: S.ptr("int32", "global")):
        for i in range(4):
            out[i] = S.ceildiv(i + 4, 0)

    with pytest.raises(ZeroDivisorError, match="The 2nd arg can't be zero"):
        S.build(f, target="compass")
