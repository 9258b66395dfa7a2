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


# The epilogues: activation(result + bias), bias broadcast as numpy does.
EPILOGUE_CASES = [
    ("ik,kj->ij", [(24, 16), (16, 20)], (20,)),          # a value per column (row bias)
    ("ik,kj->ij", [(24, 16), (16, 20)], (24, 1)),        # a value per row
    ("ik,kj->ij", [(24, 16), (16, 20)], ()),             # a scalar
    ("ik,kj->ij", [(24, 16), (16, 20)], (24, 20)),       # a full tensor
    ("bik,kj->bij", [(3, 8, 6), (6, 5)], (3, 1, 5)),     # batch and column
    ("ij,jk,kl->il", [(4, 5), (5, 6), (6, 3)], (3,)),    # the last contraction's epilogue
    ("ij->i", [(9, 7)], (9,)),                           # a sum
]


@pytest.mark.parametrize("spec, shapes, bias_shape", EPILOGUE_CASES)
def test_bias_and_activation_epilogues_equal_numpy(spec, shapes, bias_shape):
    """Exactly numpy's einsum + bias, then relu, on dyadic data; the output's canary (NaN)
    all overwritten; the operation's first touch is the bias, its last the activation."""
    arrays = _arrays(shapes, seed=4)
    bias = np.random.default_rng(5).choice(DYADIC, bias_shape).astype(np.float32)
    want = np.maximum(np.einsum(spec, *arrays) + bias, 0)
    out = np.full(want.shape, np.nan, np.float32)
    tpp.einsum(spec, *arrays, out=out, bias=bias, activation="relu")
    assert np.array_equal(out, want)
    assert 0 < (want == 0).sum() < want.size                 # relu did something, not all
    if len(arrays) <= 2:
        op = tpp.einsum_operation(spec, *arrays, threads=1, bias=bias, activation="relu")
        assert (op.prim_first, op.prim_last) == ("bias", "relu")


@pytest.mark.parametrize("activation", ["gelu", "sigmoid", "tanh", "exp"])
def test_activation_epilogue_is_the_libxsmm_kind(activation):
    """A libxsmm activation as einsum's last touch, against numpy float64 on the exact
    result (within 2 float32 ulps); a transposed, negative-stride view of the weights too
    (copied first), with a row bias."""
    import math
    rng = np.random.default_rng(5)
    x = rng.choice(DYADIC, (12, 8)).astype(np.float32) / 4
    w = rng.choice(DYADIC, (10, 8)).astype(np.float32)[::-1].T / 4
    b = rng.choice(DYADIC, 10).astype(np.float32) / 4
    z = x.astype(np.float64) @ w + b                          # exact: dyadic sums
    erf = np.vectorize(math.erf)
    f = {"gelu": lambda v: v * 0.5 * (1 + erf(v / np.sqrt(2))),
         "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "tanh": np.tanh, "exp": np.exp}
    want = f[activation](z)
    got = tpp.einsum("ik,kj->ij", x, w, bias=b, activation=activation)
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    assert (np.abs(got - want) <= 2 * ulp).all()


def test_epilogue_errors_name_what_is_wrong():
    x, w = np.ones((6, 5), np.float32), np.ones((5, 4), np.float32)
    with pytest.raises(tpp.WrongDimensionError, match=r"bias of shape \(5,\) does not "
                                                      r"broadcast to the output's shape \(6, 4\)"):
        tpp.einsum("ik,kj->ij", x, w, bias=np.ones(5, np.float32))
    with pytest.raises(tpp.WrongPrimitiveError, match="activation 'softmax' is not a last "
                                                      "touch.*gelu"):
        tpp.einsum("ik,kj->ij", x, w, activation="softmax")
    with pytest.raises(tpp.WrongDtypeError, match="bias must be a float32 .* got dtype "
                                                  "float64"):
        tpp.einsum("ik,kj->ij", x, w, bias=np.ones(4))
    with pytest.raises(tpp.OperationNotSupportedError, match="a bias needs a contraction"):
        tpp.einsum("ij->ji", x, bias=np.ones(6, np.float32))
    assert np.array_equal(tpp.einsum("ij->ji", x - 2, activation="relu"), np.zeros((5, 6)))
