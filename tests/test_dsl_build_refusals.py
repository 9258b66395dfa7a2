"""What ``BuildManager.build`` refuses as the public Compass DSL does (``npukit.dsl.executable``,
``npukit.dsl.builtins_lanes``): ``S.vreplic`` of a vector wider than a register with a
variable index, and Python's ``print`` in a kernel; and what stays allowed (a variable
index into one register, a constant one into a wider vector), against numpy on the
simulator and the C back end."""

import numpy as np
import pytest

import npukit.dsl as S
from npukit.errors import CompassBuildError


def test_vreplic_of_a_wide_vector_needs_a_constant_index(capsys):
    @S.prim_func
    def wide(a: S.ptr("int32", "global"), idx: S.i32, out: S.ptr("int32", "global")):
        S.vstore(S.vreplic(S.vload(a, lanes=16), idx), out)

    with pytest.raises(CompassBuildError) as exc:
        S.BuildManager().build(wide)
    assert isinstance(exc.value, RuntimeError)
    assert 'The arg "index" expects an integer constant value.' in capsys.readouterr().err


@pytest.mark.parametrize("lanes,idx", [(8, 5), (16, 13)])
def test_vreplic_indices_that_stay_allowed(lanes, idx):
    if lanes == 8:  # one register: the index may be a variable (a scalar parameter)
        @S.prim_func
        def f(a: S.ptr("int32", "global"), k: S.i32, out: S.ptr("int32", "global")):
            S.vstore(S.vreplic(S.vload(a, lanes=8), k), out)
        args = (idx,)
    else:
        @S.prim_func
        def f(a: S.ptr("int32", "global"), out: S.ptr("int32", "global")):
            S.vstore(S.vreplic(S.vload(a, lanes=16), 13), out)
        args = ()
    a = np.arange(100, 100 + lanes, dtype=np.int32) * 7
    ex = S.BuildManager().build(f)
    for run in (f, ex):
        out = np.full(lanes, 0x5A5A5A5A, np.int32)
        run(a, *args, out)
        assert out.tolist() == [int(a[idx])] * lanes


def test_print_in_a_kernel_is_refused_naming_s_printf(capsys):
    @S.prim_func
    def f(a: S.ptr("i32", "global"), out: S.ptr("i32", "global")):
        out[0] = a[0]
        print(a[0])

    with pytest.raises(RuntimeError):
        S.BuildManager().build(f)
    assert 'The built-in "print" isn\'t supported, please use "S.printf".' in \
        capsys.readouterr().err
