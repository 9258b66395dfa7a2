"""The bias first touch of a TPP tensor operation and ``tpp.strides_of``: the ``bias``
primitive (the identity with a row stride: row, column and scalar broadcasts) in C against
its reference and numpy; ``prim_first="bias"`` with a GEMM and a ReLU against numpy
float64, optimized, on threads and on the simulator; strides derived from numpy arrays."""

import numpy as np
import pytest

from npukit import tpp

RNG = np.random.default_rng(27)
CANARY = np.float32(-999.0)


@pytest.mark.parametrize("inca,lda,want", [
    (1, 3, lambda a: a[:12].reshape(4, 3).T),             # a whole 3 x 4 block
    (0, 1, lambda a: np.broadcast_to(a[:4], (3, 4))),      # a row: one value per column
    (1, 0, lambda a: np.broadcast_to(a[:3, None], (3, 4))),  # a column: one value per row
    (0, 0, lambda a: np.full((3, 4), a[0])),               # a scalar
])
def test_the_bias_primitive_broadcasts_rows_columns_and_scalars(inca, lda, want):
    p = tpp.Primitive("bias")
    a = RNG.standard_normal(12).astype(np.float32)
    # b: 3 x 4 with leading dimension 5, inside canaries; rows 3..4 of each column untouched.
    b = np.full(5 * 4 + 2, CANARY, np.float32)
    p(a, b[1:], m=3, n=4, inca=inca, lda=lda, ldb=5)
    got = b[1:21].reshape(4, 5).T
    assert np.array_equal(got[:3], want(a))
    assert (got[3:] == CANARY).all() and b[0] == CANARY and b[-1] == CANARY
    ref = np.full(5 * 4, CANARY, np.float32)
    p.reference(a, ref, m=3, n=4, inca=inca, lda=lda, ldb=5)
    assert ref.tobytes() == b[1:21].tobytes()
    assert "tpp_bias" in p.c_source and "inca" in p.c_source


def gemm_bias(bias_axes, x, w, y, bias, **kw):
    dims = "mnk"
    strides_bias = tpp.strides_of(bias, bias_axes, dims) if bias_axes else (0, 0, 0)
    return tpp.TensorOperation("float32", "bias", "gemm", "relu", ("m", "n", "k"),
                               ("prim",) * 3, (48, 24, 40), tpp.strides_of(x, "mk", dims),
                               tpp.strides_of(w, "kn", dims), tpp.strides_of(y, "mn", dims),
                               strides_bias, **kw)


@pytest.mark.parametrize("kind", ["row", "column", "scalar", "full"])
def test_gemm_with_a_bias_first_touch_equals_numpy(kind):
    x = RNG.standard_normal((48, 40)).astype(np.float32)       # row-major numpy arrays
    w = RNG.standard_normal((40, 24)).astype(np.float32)
    bias, axes, b = {
        "row": (r := RNG.standard_normal(24).astype(np.float32), "n", r),
        "column": (c := RNG.standard_normal(48).astype(np.float32), "m", c[:, None]),
        "scalar": (s := np.array([0.75], np.float32), "", s[0]),
        "full": (f := RNG.standard_normal((48, 24)).astype(np.float32), "mn", f)}[kind]
    want = np.maximum(x.astype(np.float64) @ w + b, 0)
    op = gemm_bias(axes, x, w, np.empty((48, 24), np.float32), bias)
    bound = 42 * 2.0 ** -24 * (np.abs(x).astype(np.float64) @ np.abs(w) + np.abs(b)) + 1e-30
    for o in (op, op.optimize(threads=2, min_kernel_size=4, max_kernel_size=16)):
        y = np.full((48, 24), np.nan, np.float32)              # every element written
        o(x, w, y, bias)
        assert (np.abs(y - want) <= bound).all(), kind
    assert "bias" in str(op).splitlines()[1]                    # the table shows its strides
    sim = op.program("torq").run("sim", in0=x.reshape(-1), in1=w.reshape(-1),
                                 out=np.full(48 * 24, np.nan, np.float32),
                                 bias=bias.reshape(-1))
    assert (np.abs(sim.outputs["out"].reshape(48, 24) - want) <= bound).all()


def test_the_bias_is_loaded_once_before_a_sum_split_into_a_loop():
    """k as a seq loop around the prim k: the bias is the first touch of the first
    iteration only, not added again in later ones."""
    x = RNG.integers(-3, 4, (8, 12)).astype(np.float32)       # small integers: exact sums
    w = RNG.integers(-3, 4, (12, 6)).astype(np.float32)
    bias = RNG.integers(-5, 6, 6).astype(np.float32)
    y = np.full((8, 6), np.nan, np.float32)
    # k = 12 as 3 (seq) x 4 (prim): x[m, k] with k = 4 * k1 + k0.
    op = tpp.TensorOperation("float32", "bias", "gemm", "none", ("k", "m", "n", "k"),
                             ("seq", "prim", "prim", "prim"), (3, 8, 6, 4),
                             (4, 12, 0, 1), (24, 0, 1, 6), (0, 6, 1, 0), (0, 0, 1, 0))
    op(x, w, y, bias)
    assert np.array_equal(y, x @ w + bias)


def test_bias_configuration_errors_name_what_is_wrong():
    x, w, y = np.ones((48, 40), np.float32), np.ones((40, 24), np.float32), \
        np.ones((48, 24), np.float32)
    with pytest.raises(tpp.WrongDimensionError, match="strides_bias goes with "
                                                      "prim_first='bias'.*'zero'"):
        tpp.TensorOperation("float32", "zero", "gemm", "none", ("m", "n", "k"), ("prim",) * 3,
                            (48, 24, 40), (40, 0, 1), (0, 1, 24), (24, 1, 0), (0, 1, 0))
    with pytest.raises(tpp.WrongDimensionError, match="strides_bias goes with"):
        tpp.TensorOperation("float32", "bias", "gemm", "none", ("m", "n", "k"), ("prim",) * 3,
                            (48, 24, 40), (40, 0, 1), (0, 1, 24), (24, 1, 0))
    with pytest.raises(tpp.WrongDimensionError, match="dimension 2 \\(k\\): bias stride 1"):
        tpp.TensorOperation("float32", "bias", "gemm", "none", ("m", "n", "k"), ("prim",) * 3,
                            (48, 24, 40), (40, 0, 1), (0, 1, 24), (24, 1, 0), (0, 1, 1))
    op = gemm_bias("n", x, w, y, np.ones(24, np.float32))
    with pytest.raises(tpp.WrongDtypeError, match="bias must be a numpy array"):
        op(x, w, y)
    with pytest.raises(Exception, match="bias holds 10 elements"):
        op(x, w, y, np.ones(10, np.float32))


def test_strides_of_reads_numpy_layouts_as_the_tpp_strides():
    a = np.zeros((4, 5, 6), np.float32)
    assert tpp.strides_of(a, "bmk", "kbmn") == (1, 30, 6, 0)
    assert tpp.strides_of(np.asfortranarray(a), "bmk", "kbmn") == (20, 1, 4, 0)
    assert tpp.strides_of(a.T, "kmb", "kbmn") == (1, 30, 6, 0)  # a view of the same bytes
    # The strides address the flat buffer the operation reads: element (b, m, k) is there.
    flat = np.arange(a.size, dtype=np.float32)
    s = tpp.strides_of(a, "bmk", "bmk")
    assert flat[2 * s[0] + 3 * s[1] + 4 * s[2]] == flat.reshape(4, 5, 6)[2, 3, 4]
    with pytest.raises(tpp.WrongDimensionError, match="not contiguous"):
        tpp.strides_of(a[:, ::2], "bmk", "bmk")
    with pytest.raises(tpp.WrongDimensionError, match="axes 'bm' must name each of the 3"):
        tpp.strides_of(a, "bm", "bmk")
    with pytest.raises(tpp.WrongDimensionError, match="axes z of 'bmz' are no dimension"):
        tpp.strides_of(a, "bmz", "bmk")
