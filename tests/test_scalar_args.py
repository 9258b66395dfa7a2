# ruff: noqa: F403, F405  (the AutoTiler's star-import vocabulary, as in test_tiler.py)
"""Scalar C arguments of AutoTiler programs passed as Python or numpy numbers: a number of
the argument's kind is accepted (an integer for an integer type, an integer or a float for a
float type), anything else — a float or a bool for an integer, a string — is refused with
``DTypeError`` before either back end runs, and an integer out of the type's range with
``ShapeError``; nothing is truncated."""

from __future__ import annotations

import numpy as np
import pytest

import npukit as nk
from npukit.tiler import *

KER_AFFINE_C = """
void KerAffine(float * __restrict__ Out, unsigned int W, unsigned int H, float Mul, int Add,
               unsigned int Shift)
{
    for (unsigned int i = 0; i < W * H; i++)
        Out[i] = Out[i] * Mul + (float)(Add >> Shift);
}
"""


def ker_affine(Out, W, H, Mul, Add, Shift):
    o = Out[: W * H]
    o[...] = (o * np.float32(Mul)).astype(np.float32) + np.float32(Add >> Shift)


@pytest.fixture(scope="module")
def prog():
    m = Model(target="gap8", l1_budget=4000)
    m.LibKernel("KerAffine", CALL_SEQUENTIAL,
                CArgs(TCArg("float * __restrict__", "Out"), TCArg("unsigned int", "W"),
                      TCArg("unsigned int", "H"), TCArg("float", "Mul"), TCArg("int", "Add"),
                      TCArg("unsigned int", "Shift")),
                c_source=KER_AFFINE_C, reference=ker_affine)
    m.UserKernel("Affine", KernelDimensions(1, 16, 40, 1), KernelIterationOrder(KER_DIM2, KER_TILE),
                 TILE_HOR,
                 CArgs(TCArg("float *", "Out"), TCArg("float", "Mul"), TCArg("int", "Add"),
                       TCArg("unsigned int", "Shift")),
                 Calls(Call("KerAffine", LOC_INNER_LOOP,
                            Bindings(K_Arg("Out", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE_W),
                                     K_Arg("Out", KER_ARG_TILE_H), C_Arg("Mul"), C_Arg("Add"),
                                     C_Arg("Shift")))),
                 KerArgs(KerArg("Out", OBJ_IN_OUT_DB, 16, 40, 4, 0, 0, 0, "Out", 0)))
    return m.program("Affine")


def _x():
    return (np.arange(640, dtype=np.float32).reshape(40, 16) - 300) / 8


@pytest.mark.parametrize("scalars", [
    dict(Mul=1.5, Add=-37, Shift=2),
    dict(Mul=2, Add=np.int16(5), Shift=np.uint8(1)),
    dict(Mul=np.float32(0.25), Add=np.int64(-2**31), Shift=31),
    dict(Mul=np.float64(-3.0), Add=2**31 - 1, Shift=np.uint32(24)),
])
def test_numbers_of_the_arguments_kind_are_accepted(prog, scalars):
    want = _x()
    ker_affine(want.reshape(-1), 16, 40, **{k: int(v) if k != "Mul" else float(v)
                                            for k, v in scalars.items()})
    for backend in ("sim", "c"):
        out = _x()
        prog.run(backend, Out=out, **scalars)
        assert np.array_equal(out, want), backend
    assert len(np.unique(want)) > 100


@pytest.mark.parametrize("name, value", [
    ("Add", 3.7), ("Add", 3.0), ("Add", "3"), ("Add", True), ("Add", np.float32(2)),
    ("Add", np.bool_(False)), ("Shift", 2.5), ("Shift", "1"), ("Mul", "1.5"), ("Mul", True),
    ("Mul", 1j),
])
def test_other_kinds_are_refused_before_running(prog, name, value):
    scalars = {**dict(Mul=1.0, Add=1, Shift=0), name: value}
    for backend in ("sim", "c"):
        out = _x()
        with pytest.raises(nk.DTypeError, match=f"scalar argument '{name}': {value!r:.5}"):
            prog.run(backend, Out=out, **scalars)
        assert np.array_equal(out, _x())


@pytest.mark.parametrize("name, value", [
    ("Shift", -1), ("Shift", 2**32), ("Add", 2**31), ("Add", -2**31 - 1),
    ("Add", np.int64(2**40)), ("Shift", np.int64(-3)),
])
def test_integers_out_of_range_are_refused(prog, name, value):
    scalars = {**dict(Mul=1.0, Add=1, Shift=0), name: value}
    with pytest.raises(nk.ShapeError, match=f"'{name}': {value} does not fit"):
        prog.run("c", Out=_x(), **scalars)
