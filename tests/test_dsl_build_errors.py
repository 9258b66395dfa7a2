"""``BuildManager.build`` refuses at build, as the public Compass DSL's build does, the
kernels npukit cannot run: the error goes to stderr and is raised as a ``RuntimeError``
that is an ``NpukitError`` naming the builtin and the types (or number) involved."""

from __future__ import annotations

import numpy as np
import pytest

import npukit as nk
from npukit.dsl import BuildManager
from npukit.dsl import script as S
from npukit.errors import CompassBuildError, DTypeError, KernelError


def _refused(func, capfd, *words: str) -> CompassBuildError:
    """``func`` refused by ``BuildManager().build``: every word in the message and on
    stderr."""
    with pytest.raises(RuntimeError) as info:
        BuildManager().build(func)
    exc = info.value
    assert isinstance(exc, CompassBuildError) and isinstance(exc, nk.NpukitError)
    err = capfd.readouterr().err
    for w in words:
        assert w in str(exc), (w, str(exc))
        assert w in err, (w, err)
    return exc


def test_operands_that_differ_in_sign_are_refused_at_build(capfd):
    @S.prim_func
    def mixed(a: S.ptr("i8x32", "global"), b: S.ptr("u8x32", "global"),
              c: S.ptr("i8x32", "global")):
        c[0] = S.vmaxh(a[0], b[0])

    exc = _refused(mixed, capfd, "S.vmaxh", "int8x32", "uint8x32",
                   "The sign of operands is different")
    assert isinstance(exc.__cause__, DTypeError)


@pytest.mark.parametrize("imm, refused", [
    (300, True), (-129, True), pytest.param(255, False, marks=pytest.mark.slow),
    pytest.param(-128, False, marks=pytest.mark.slow)])
def test_an_immediate_must_fit_the_lane_width_signed_or_unsigned(capfd, imm, refused):
    @S.prim_func
    def sub_imm(a: S.ptr("int8x32", "global"), c: S.ptr("uint8x32", "global")):
        c[0] = S.vsub(a[0], imm, out_sign="u")

    if refused:
        _refused(sub_imm, capfd, "S.vsub", f"{imm} fits no 8-bit lane",
                 f'Can\'t broadcast "{imm}" to any of "(int8x32, uint8x32)"')
        return
    a = np.arange(-16, 16, dtype=np.int8) * 7
    want = ((a.astype(np.int64) - imm) & 0xFF).astype(np.uint8)  # the low bits, unsigned
    ex = BuildManager().build(sub_imm)
    for run in (sub_imm, ex):
        out = np.full(32, 0xA5, np.uint8)
        run(a, out)
        np.testing.assert_array_equal(out, want)


def test_fused_multiply_adds_take_their_float_types(capfd):
    @S.prim_func
    def fma16(a: S.ptr("fp16x16", "global"), c: S.ptr("fp16x16", "global")):
        c[0] = S.fma(c[0], a[0], a[0])

    @S.prim_func
    def fmae_int(a: S.ptr("i16x16", "global"), c: S.ptr("fp32x8", "global")):
        c[0] = S.vfmae(c[0], a[0], a[0])

    _refused(fma16, capfd, "S.fma", "float16x16", "expects float32 lanes")
    _refused(fmae_int, capfd, "S.vfmae", "Argument type mismatch", '"float32x8"',
             '"int16x16"')


def test_python_max_and_min_are_refused_for_the_dsl_ones(capfd):
    @S.prim_func
    def py_max(a: S.int8, b: S.int8, c: S.ptr("int8", "global")):
        c[0] = max(a, b)

    @S.prim_func
    def dsl_min(a: S.ptr("int8x32", "global"), c: S.ptr("int8x32", "global")):
        c[0] = S.min(a[0], S.max(a[0], 3))

    exc = _refused(py_max, capfd, "py_max", 'please use "S.max"')
    assert isinstance(exc.__cause__, KernelError)
    a = (np.arange(32, dtype=np.int8) - 9) * 3
    out = np.full(32, 99, np.int8)
    BuildManager().build(dsl_min)(a, out)  # S.max / S.min: no refusal
    np.testing.assert_array_equal(out, a)


def test_a_kernel_is_built_once_for_its_c_and_its_calls():
    @S.prim_func
    def half(a: S.ptr("int32", "global"), b: S.ptr("int32", "global")):
        for i in range(4):  # writes b[0:4] of a longer array: the rest keeps its contents
            b[i] = a[i] + 1

    ex = BuildManager().build(half)
    assert "half" in ex.c_code  # before any call
    a, b = np.arange(8, dtype=np.int32) * 5, np.full(8, -7, np.int32)
    ex(a, b)
    np.testing.assert_array_equal(b, [1, 6, 11, 16, -7, -7, -7, -7])
