"""``tpp.einsum`` equals ``numpy.einsum`` (exactly, on dyadic data) for contractions,
permutations, sums, diagonals, views, given outputs, low-precision inputs and chains of
operands; each pair of operands runs as one optimized TensorOperation; bad subscripts and
arrays raise npukit errors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from tpp_helpers import DYADIC

from npukit import tpp

CASES = [
    ("abk,kc->abc", [(2, 5, 7), (7, 3)]),
    ("ki,kj->ij", [(17, 33), (17, 19)]),
    ("bik,bkj->ijb", [(3, 5, 6), (3, 6, 4)]),
    ("ij->ji", [(40, 30)]),
    ("ij->i", [(40, 30)]),
    ("ii->i", [(7, 7)]),
    ("i,i->", [(10,), (10,)]),
    ("ij,jk,kl->il", [(4, 5), (5, 6), (6, 3)]),
]


def _arrays(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.choice(DYADIC, s).astype(np.float32) for s in shapes]


@pytest.mark.parametrize("spec,shapes", CASES)
def test_einsum_equals_numpy(spec, shapes):
    arrays = _arrays(shapes)
    want = np.einsum(spec, *[a.astype(np.float64) for a in arrays])
    got = tpp.einsum(spec, *arrays)
    assert got.dtype == np.float32 and np.array_equal(got, want)


def test_views_and_a_given_output_are_read_and_written_in_place():
    a = _arrays([(20, 40)])[0][:, ::2]
    b = _arrays([(80, 30)], 1)[0][::4, 1:]
    want = a.astype(np.float64) @ b
    base = np.full((40, 29), -7, np.float32)
    out = base[::2]
    assert tpp.einsum("ik,kj->ij", a, b, out=out) is out
    assert np.array_equal(out, want) and np.all(base[1::2] == -7)
    out_t = np.zeros((29, 20), np.float32).T  # no unit stride along i: a transposed write
    tpp.einsum("ik,kj->ij", a, b, out=out_t)
    assert np.array_equal(out_t, want)


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
def test_low_precision_operands_sum_in_float32(dtype):
    a, b = (x.astype(dtype) for x in _arrays([(9, 13), (13, 6)], 2))
    got = tpp.einsum("ik,kj->ij", a, b)
    assert got.dtype == np.float32
    assert np.array_equal(got, a.astype(np.float64) @ b.astype(np.float64))


def test_einsum_operation_shows_the_optimized_operation():
    op = tpp.einsum_operation("abk,kc->abc", np.ones((2, 8, 32), np.float32),
                              np.ones((32, 24), np.float32), threads=1)
    # a and b fuse into one m of 16 rows; out has unit stride along c: C^T is computed.
    assert op.prim_main == "gemm" and op.roles.swap
    assert sorted(op.dim_sizes) == [16, 24, 32]
    assert "einsum 'abk,kc->abc'" in str(op) and "fused" in str(op)


@pytest.mark.parametrize("args,error,message", [
    (("ij,jk", np.ones((2, 3), np.float32)), tpp.WrongDimensionError, "2 operand"),
    (("ij,jk->ik", np.ones((2, 3), np.float32), np.ones((4, 5), np.float32)),
     tpp.WrongDimensionError, "letter 'j' has size 3 and 4"),
    (("...i->i", np.ones(3, np.float32)), tpp.WrongDimensionError, "no '...'"),
    (("ij->ij", np.ones(3, np.float32)), tpp.WrongDimensionError, "1 dimension"),
    (("ij->k", np.ones((2, 2), np.float32)), tpp.WrongDimensionError, "output letter"),
    (("i->i", np.ones(3)), tpp.WrongDtypeError, "float64"),
    (("i,i->", np.ones(3, np.float32), np.ones(3, np.float16)), tpp.WrongDtypeError,
     "dtypes"),
    ((5, np.ones(3, np.float32)), tpp.WrongDimensionError, "must be a string"),
    (("i->i", [1.0]), tpp.WrongDtypeError, "numpy array"),
])
def test_einsum_errors(args, error, message):
    with pytest.raises(error, match=message):
        tpp.einsum(*args)


def test_empty_operands_give_zeros():
    got = tpp.einsum("ik,kj->ij", np.ones((3, 0), np.float32), np.ones((0, 2), np.float32))
    assert got.shape == (3, 2) and not got.any()
