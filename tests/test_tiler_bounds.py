# ruff: noqa: F403, F405  (the AutoTiler's star-import vocabulary, as in test_tiler.py)
"""Values a basic kernel accepts (``TCArg(..., bounds=(lo, hi))``): immediates are checked
when the program is made, values passed at run time before either back end runs; and the
CNN convolution example, whose ``Norm`` is bounded and whose C accumulates in 64 bits,
agrees with its numpy reading on int16 extremes."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest

import npukit as nk
from npukit.tiler import *

EX = Path(__file__).parent.parent / "examples" / "tiler"

KER_SHIFT_C = """
void KerShift(int * __restrict__ Out, unsigned int W, unsigned int H, unsigned int Shift,
              int Add)
{
    for (unsigned int i = 0; i < W * H; i++)
        Out[i] = (Out[i] >> Shift) + Add;
}
"""


def ker_shift(Out, W, H, Shift, Add):
    Out[: W * H] = (Out[: W * H] >> Shift) + Add


def shift_model(shift_bounds=(2, 31), add=None):
    """Out = (Out >> Shift) + Add on a 8 x 12 int plane, in 3 tiles: ``Add`` is the
    immediate ``add``, or ``Adds[Tile]``."""
    m = Model(target="gap8", l1_budget=4 * 8 * 4)  # 4 lines of 8 ints: 3 tiles
    m.LibKernel("KerShift", CALL_SEQUENTIAL,
                CArgs(TCArg("int * __restrict__", "Out"), TCArg("unsigned int", "W"),
                      TCArg("unsigned int", "H"), TCArg("unsigned int", "Shift", bounds=(0, 7)),
                      TCArg("int", "Add", bounds=(-100, 100))),
                c_source=KER_SHIFT_C, reference=ker_shift)
    add_arg = Imm(add) if add is not None else C_ArgIndex("Adds", KER_TILE, 1)
    m.UserKernel("Shift", KernelDimensions(1, 8, 12, 1), KernelIterationOrder(KER_DIM2, KER_TILE),
                 TILE_HOR,
                 CArgs(TCArg("int *", "Out"),
                       TCArg("unsigned int", "Shift", bounds=shift_bounds),
                       TCArg("int *", "Adds", shape=(3,))),
                 Calls(Call("KerShift", LOC_INNER_LOOP,
                            Bindings(K_Arg("Out", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE_W),
                                     K_Arg("Out", KER_ARG_TILE_H), C_Arg("Shift"), add_arg))),
                 KerArgs(KerArg("Out", OBJ_IN_OUT, 8, 12, 4, 0, 0, 0, "Out", 0)))
    return m


def test_bounds_of_kernel_and_basic_kernel_meet():
    m = shift_model()
    assert m.tiling("Shift").n_tiles == 3
    prog = m.program("Shift")
    assert prog.bounds == (("Shift", 2, 7), ("Adds", -100, 100))
    x = np.arange(96, dtype=np.int32).reshape(12, 8) * 1000 - 40000
    adds = np.array([-100, 7, 100], np.int32)
    want = (x >> 5) + np.repeat(adds, 4)[:, None]
    for backend in ("sim", "c"):
        out = x.copy()
        prog.run(backend, Out=out, Shift=5, Adds=adds)
        assert np.array_equal(out, want), backend


@pytest.mark.parametrize("args, message", [
    (dict(Shift=8), "argument 'Shift': 8 is outside 2..7"),
    (dict(Shift=1), "argument 'Shift': 1 is outside 2..7"),
    (dict(Adds=np.array([0, 101, 0], np.int32)), "argument 'Adds': 101 is outside -100..100"),
    (dict(Adds=np.array([-2**31, 0, 0], np.int32)), "'Adds': -2147483648 is outside"),
])
def test_values_outside_are_refused_before_running(args, message):
    prog = shift_model().program("Shift")
    for backend in ("sim", "c"):
        out = np.full((12, 8), 1234, np.int32)
        arrays = {"Out": out, "Shift": 3, "Adds": np.zeros(3, np.int32), **args}
        with pytest.raises(nk.ShapeError, match=message):
            prog.run(backend, **arrays)
        assert (out == 1234).all()


def test_immediates_are_checked_when_the_program_is_made():
    assert shift_model(add=100).program("Shift").bounds == (("Shift", 2, 7),)
    with pytest.raises(nk.TilingError, match="KerShift argument 'Add' gets the immediate 101, "
                                             "outside -100..100"):
        shift_model(add=101).program("Shift")


def test_bounds_that_leave_no_value_are_refused():
    with pytest.raises(nk.TilingError, match="'Shift' must lie in 0..7 and in 8..9"):
        shift_model(shift_bounds=(8, 9)).program("Shift")


@pytest.mark.parametrize("ctype, bounds, message", [
    ("int *", (0, 3), "integer scalar arguments"),
    ("float", (0, 3), "integer scalar arguments"),
    ("int", (3, 0), "lo <= hi"),
    ("int", (0.0, 3), "two integers"),
    ("int", (True, 3), "two integers"),
    ("int", [0, 3], "two integers"),
])
def test_bounds_are_two_integers_on_an_integer_scalar(ctype, bounds, message):
    with pytest.raises(nk.TilingError, match=f"C argument 'N'.*{message}"):
        TCArg(ctype, "N", bounds=bounds)


# -- the CNN convolution example on int16 extremes ----------------------------------------


@pytest.fixture(scope="module")
def cnn():
    ex = runpy.run_path(str(EX / "cnn_conv5x5.py"))
    return ex, ex["model"](l1_budget=4000, InPlane=3, OutPlane=2, W=13, H=11).program(
        "CnnConv5x5")


def _extremes(rng, shape):
    lo, hi = -2**15, 2**15 - 1
    patterns = [np.full(shape, lo), np.full(shape, hi), rng.choice([lo, hi], shape),
                np.where(np.indices(shape).sum(0) % 2, lo, hi)]
    return [p.astype(np.int16) for p in patterns]


def test_cnn_agrees_with_numpy_on_int16_extremes(cnn):
    ex, prog = cnn
    rng = np.random.default_rng(7)
    xs, fs = _extremes(rng, (3, 11, 13)), _extremes(rng, (2, 3, 5, 5))
    cases = [(x, f) for x in xs for f in fs]
    seen = set()
    for k, (x, f) in enumerate(cases):
        bias = np.array([[-2**15, 2**15 - 1], [2**15 - 1, -2**15], [0, 5]][k % 3], np.int16)
        norm = (0, 13, 31)[k % 3]
        want = ex["reference"](x, f, bias, norm)
        for backend in ("sim", "c"):
            out = np.full((2, 7, 9), 99, np.int16)
            prog.run(backend, In=x, Filter=f, Out=out, Norm=norm, Bias=bias)
            assert np.array_equal(out, want), (k, backend)
        seen |= set(want.ravel().tolist())
    assert {-2**15, 2**15 - 1} <= seen and len(seen) > 4


@pytest.mark.parametrize("norm", [32, 63, 2**32 - 1])
def test_cnn_norm_outside_0_31_is_refused(cnn, norm):
    _, prog = cnn
    x = np.ones((3, 11, 13), np.int16)
    for backend in ("sim", "c"):
        out = np.full((2, 7, 9), 99, np.int16)
        with pytest.raises(nk.ShapeError, match=f"argument 'Norm': {norm} is outside 0..31"):
            prog.run(backend, In=x, Filter=np.ones((2, 3, 5, 5), np.int16), Out=out,
                     Norm=norm, Bias=np.zeros(2, np.int16))
        assert (out == 99).all()
