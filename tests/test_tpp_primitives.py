"""The TPP primitives' generated C equals their numpy references: bit for bit for the unary
and binary ones (every M, N from 1 to 17, odd leading dimensions, IEEE special values),
within the documented summation bound for gemm and brgemm (exactly on integer data), and
never writes outside its output block (canary-poisoned buffers). Bad calls raise the TPP
tensor compiler's errors."""

from __future__ import annotations

import platform
import zlib

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npukit import OutOfBoundsError, tpp
from npukit.tpp import primitives as P
from npukit.tpp.csource import gemm_source

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CANARY = np.uint32(0x7FC12345)  # a NaN payload no operation produces
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e38, 3.3e38, 8.0, -8.0,
                    7.75, 2.0, -2.0], np.float32)


def _data(rng, n: int) -> np.ndarray:
    """Normal values scaled past the sigmoids' table range, with IEEE special values."""
    x = (rng.standard_normal(n) * 6).astype(np.float32)
    mask = rng.random(n) < 0.15
    x[mask] = rng.choice(SPECIAL, size=int(mask.sum()))
    return x


def _canary(n: int) -> np.ndarray:
    return np.full(n, CANARY, np.uint32).view(np.float32)


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint32)


def _run_unary(name, trans, m, n, lda, ldb, rng):
    p = tpp.Primitive(name, trans_b=trans)
    a = _data(rng, P.footprint(m, n, lda) + 3)
    rows, cols = (n, m) if trans else (m, n)
    got = _canary(P.footprint(rows, cols, ldb) + 5)
    want = got.copy()
    p(a, got, m=m, n=n, lda=lda, ldb=ldb)
    p.reference(a, want, m=m, n=n, lda=lda, ldb=ldb)
    return got, want


@pytest.mark.slow
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("name", tpp.UNARY)
def test_unary_every_remainder_bit_exact(name, trans):
    """M and N from 1 to 17 (every remainder of the TPP text's 16-element main loop), odd
    leading dimensions: C and reference agree on every bit of the buffer, the canary past
    the block and between its columns included, and every block element was written."""
    rng = np.random.default_rng(zlib.crc32(f"{name}{trans}".encode()))
    for m in range(1, 18):
        for n in range(1, 18):
            lda = m + 2 * (n % 3) + 1
            ldb = (n if trans else m) + 2 * (m % 2) + 1
            got, want = _run_unary(name, trans, m, n, lda, ldb, rng)
            assert np.array_equal(_bits(got), _bits(want)), (name, trans, m, n)
            # The block is fully written (the reference writes every element of it).
            rows, cols = (n, m) if trans else (m, n)
            block = [i + j * ldb for j in range(cols) for i in range(rows)]
            if name != "zero":
                assert not np.any(_bits(got)[block] == CANARY)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(tpp.UNARY), trans=st.booleans(), m=st.integers(1, 40),
       n=st.integers(1, 40), pa=st.integers(0, 9), pb=st.integers(0, 9),
       seed=st.integers(0, 2**32 - 1))
def test_unary_hypothesis_shapes(name, trans, m, n, pa, pb, seed):
    rng = np.random.default_rng(seed)
    got, want = _run_unary(name, trans, m, n, m + pa, (n if trans else m) + pb, rng)
    assert np.array_equal(_bits(got), _bits(want))


@pytest.mark.slow
@pytest.mark.parametrize("name", tpp.BINARY)
def test_binary_every_remainder_bit_exact(name):
    rng = np.random.default_rng(7)
    p = tpp.Primitive(name)
    for m in range(1, 18):
        for n in range(1, 18):
            lda, ldb, ldc = m + 1, m + 2 * (n % 2), m + 3
            a = _data(rng, P.footprint(m, n, lda))
            b = _data(rng, P.footprint(m, n, ldb))
            rng.shuffle(b)
            got = _canary(P.footprint(m, n, ldc) + 4)
            want = got.copy()
            p(a, b, got, m=m, n=n, lda=lda, ldb=ldb, ldc=ldc)
            p.reference(a, b, want, m=m, n=n, lda=lda, ldb=ldb, ldc=ldc)
            assert np.array_equal(_bits(got), _bits(want)), (name, m, n)


def test_binary_leading_dimension_zero_repeats_a_column():
    """ldb = 0: the same column of B for every column (a broadcast bias)."""
    a = np.arange(12, dtype=np.float32)
    bias = np.array([10, 20, 30], np.float32)
    c = np.zeros(12, np.float32)
    tpp.Primitive("add")(a, bias, c, m=3, n=4, lda=3, ldb=0, ldc=3)
    assert c.tolist() == (a.reshape(4, 3) + bias).reshape(-1).tolist()


def test_ieee_division_and_nan():
    x = np.array([0.0, -0.0, 2.0, np.nan], np.float32)
    out = np.zeros(4, np.float32)
    tpp.Primitive("reciprocal")(x, out, m=4, n=1)
    assert out[0] == np.inf and out[1] == -np.inf and out[2] == 0.5 and np.isnan(out[3])
    tpp.Primitive("div")(np.array([1, -1, 0, 3], np.float32), np.zeros(4, np.float32), out,
                         m=4, n=1)
    assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2]) and out[3] == np.inf
    for name in ("relu", "interp_sigmoid", "fast_sigmoid"):
        tpp.Primitive(name)(np.array([np.nan] * 4, np.float32), out, m=4, n=1)
        assert np.isnan(out).all(), name
    tpp.Primitive("max")(np.array([np.nan, 1, 2, -0.0], np.float32),
                         np.array([1, np.nan, 3, 0.0], np.float32), out, m=4, n=1)
    assert np.isnan(out[:2]).all() and out[2] == 3


def test_sigmoids_are_the_lut_modules_approximations():
    """The C sigmoids compute exactly npukit.lut's float32 versions of the TPP text's."""
    from npukit.lut import sigmoid as S
    x = np.linspace(-12, 12, 4001, dtype=np.float32)
    for name, ref in (("fast_sigmoid", S.fast_sigmoid), ("taylor_sigmoid", S.taylor_sigmoid),
                      ("interp_sigmoid", S.table_sigmoid)):
        out = np.empty_like(x)
        tpp.Primitive(name)(x, out, m=x.size, n=1)
        assert np.array_equal(out, ref(x)), name


def test_in_place_unary_is_a_touch():
    x = np.array([-1.0, 2.0, -3.0, 4.0, 5.0, -6.0], np.float32)
    tpp.Primitive("relu")(x, x, m=3, n=2)
    assert x.tolist() == [0.0, 2.0, 0.0, 4.0, 5.0, 0.0]


# -- gemm and brgemm ------------------------------------------------------------------------

def _gemm_case(p, m, n, k, br, rng, pad=(1, 2, 3), ints=False):
    s = dict(m=m, n=n, k=k)
    a_rows, a_cols = (k, m) if p.trans_a else (m, k)
    b_rows, b_cols = (n, k) if p.trans_b else (k, n)
    s.update(lda=a_rows + pad[0], ldb=b_rows + pad[1], ldc=m + pad[2])
    if p.name == "brgemm":
        s.update(br=br, br_stride_a=P.footprint(a_rows, a_cols, s["lda"]) + 1,
                 br_stride_b=P.footprint(b_rows, b_cols, s["ldb"]) + 2)
    span = p.spans(**p.defaults(**s))
    draw = (lambda n_: rng.integers(-4, 5, n_).astype(np.float32)) if ints else \
        (lambda n_: rng.standard_normal(n_).astype(np.float32))
    a, b = draw(span["a"]), draw(span["b"])
    c0 = _canary(span["c"] + 7)
    block = np.zeros(c0.size, bool)
    for j in range(n):
        block[j * s["ldc"]: j * s["ldc"] + m] = True
    c0[block] = draw(int(block.sum()))
    got = c0.copy()
    p(a.astype(P._dtype(p.dtype)), b.astype(P._dtype(p.dtype)), got, **s)
    # Oracle: float64 products of the (rounded) inputs.
    a64 = a.astype(P._dtype(p.dtype)).astype(np.float64)
    b64 = b.astype(P._dtype(p.dtype)).astype(np.float64)
    exact, bound = c0.astype(np.float64).copy(), np.abs(c0.astype(np.float64))
    for r in range(br if p.name == "brgemm" else 1):
        ar = a64[r * s.get("br_stride_a", 0):]
        bb = b64[r * s.get("br_stride_b", 0):]
        A = P._view(ar, m, k, s["lda"], 1) if p.trans_a else P._view(ar, m, k, 1, s["lda"])
        B = P._view(bb, k, n, s["ldb"], 1) if p.trans_b else P._view(bb, k, n, 1, s["ldb"])
        C = P._view(exact, m, n, 1, s["ldc"])
        C += A @ B
        Cb = P._view(bound, m, n, 1, s["ldc"])
        Cb += np.abs(A) @ np.abs(B)
    return got, exact, bound, block, k * (br if p.name == "brgemm" else 1)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gemm", "brgemm"])
@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
@SETTINGS
@given(m=st.integers(1, 70), n=st.integers(1, 30), k=st.integers(1, 40), br=st.integers(1, 3),
       seed=st.integers(0, 2**32 - 1))
def test_gemm_within_the_summation_bound(name, ta, tb, m, n, k, br, seed):
    """Every register-tile remainder (M up to 70 crosses two 32-row tiles, N up to 30 two
    12-column tiles): within (k' + 2) u (|c0| + sum |a||b|) of the exact sum, and the
    canary around and between the columns of C untouched."""
    p = tpp.Primitive(name, trans_a=ta, trans_b=tb)
    got, exact, bound, block, terms = _gemm_case(p, m, n, k, br, np.random.default_rng(seed))
    assert np.all(_bits(got)[~block] == CANARY)
    tol = (terms + 2) * 2.0**-24 * bound[block]
    assert np.all(np.abs(got[block] - exact[block]) <= tol)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gemm", "brgemm"])
def test_gemm_every_remainder_exact_on_integers(name):
    """M and N from 1 to 17 with odd leading dimensions: exact on integer data, the canary
    around and between the columns of C untouched."""
    rng = np.random.default_rng(11)
    for ta, tb in [(False, False), (True, True)]:
        p = tpp.Primitive(name, trans_a=ta, trans_b=tb)
        for m in range(1, 18):
            for n in range(1, 18):
                got, exact, _, block, _ = _gemm_case(p, m, n, 3 + (m * n) % 5, 2, rng,
                                                     ints=True)
                assert np.array_equal(got[block], exact[block].astype(np.float32)), (m, n)
                assert np.all(_bits(got)[~block] == CANARY)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, True)])
def test_gemm_block_loops_with_a_small_blocking(ta, tb):
    """A blocking of 32 x 8 x 12 runs every loop of the packed GEMM (several MC, KC and NC
    blocks, partial ones included); on integer data the result is exact."""
    p = tpp.Primitive("brgemm", trans_a=ta, trans_b=tb, blocking=(32, 8, 12))
    rng = np.random.default_rng(3)
    for m, n, k, br in [(70, 30, 37, 2), (33, 13, 8, 1), (1, 1, 1, 1), (64, 24, 17, 3)]:
        got, exact, _, block, _ = _gemm_case(p, m, n, k, br, rng, ints=True)
        assert np.array_equal(got[block], exact[block].astype(np.float32))
        assert np.all(_bits(got)[~block] == CANARY)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_gemm_low_precision_inputs_accumulate_in_float32(dtype):
    p = tpp.Primitive("gemm", dtype=dtype)
    rng = np.random.default_rng(4)
    got, exact, _, block, _ = _gemm_case(p, 37, 14, 29, 1, rng, ints=True)
    assert np.array_equal(got[block], exact[block].astype(np.float32))


def _cpu_has(flag: str) -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return f" {flag}" in f.read()
    except OSError:
        return False


@pytest.mark.parametrize("flags", ["-O2 -mavx2 -mfma", "-O2"])
def test_gemm_every_instruction_set_branch(flags, monkeypatch):
    """The AVX2 micro-kernel (16 x 6) and the portable one (8 x 4, no FMA) give the same
    exact results as the AVX-512 one on integer data."""
    if platform.machine() not in ("x86_64", "AMD64") or not _cpu_has("avx2"):
        pytest.skip("needs an x86-64 CPU with AVX2")
    monkeypatch.setenv("NPUKIT_CFLAGS", flags)
    monkeypatch.setattr(P, "_COMPILED", {})
    p = tpp.Primitive("gemm")
    rng = np.random.default_rng(5)
    for m, n, k in [(37, 14, 29), (8, 4, 3), (17, 7, 1)]:
        got, exact, _, block, _ = _gemm_case(p, m, n, k, 1, rng, ints=True)
        assert np.array_equal(got[block], exact[block].astype(np.float32))
        assert np.all(_bits(got)[~block] == CANARY)


def test_gemm_source_names_its_variant():
    src = gemm_source(True, False, "bfloat16")
    assert "tpp_gemm_tn_bfloat16" in src and "tpp_brgemm_tn_bfloat16" in src
    assert "#if defined(__AVX512F__)" in src and "npk_tpp_ukr" in src


# -- errors ---------------------------------------------------------------------------------

def test_primitive_errors_name_what_is_wrong():
    with pytest.raises(tpp.WrongPrimitiveError, match="unknown TPP primitive 'nope'"):
        tpp.Primitive("nope")
    with pytest.raises(tpp.OperationNotSupportedError,
                       match="Transposition for sub primitive is not supported"):
        tpp.Primitive("sub", trans_b=True)
    with pytest.raises(tpp.WrongDtypeError, match="relu: dtype 'bfloat16'"):
        tpp.Primitive("relu", dtype="bfloat16")
    p = tpp.Primitive("relu")
    with pytest.raises(OutOfBoundsError, match="a holds 5 elements but the block needs 6"):
        p(np.zeros(5, np.float32), np.zeros(6, np.float32), m=3, n=2)
    with pytest.raises(tpp.WrongDtypeError, match="float64"):
        p(np.zeros(6), np.zeros(6, np.float32), m=3, n=2)
    with pytest.raises(tpp.WrongDimensionError, match="ldb = 2 is below its 3 rows"):
        p(np.zeros(6, np.float32), np.zeros(9, np.float32), m=3, n=2, ldb=2)
    with pytest.raises(tpp.WrongDimensionError, match="not contiguous"):
        p(np.zeros((6, 2), np.float32)[:, 0], np.zeros(6, np.float32), m=3, n=2)
    with pytest.raises(tpp.WrongDimensionError, match="m = 0"):
        p(np.zeros(6, np.float32), np.zeros(6, np.float32), m=0, n=2)
    with pytest.raises(tpp.WrongDimensionError, match="give the block size k="):
        tpp.Primitive("gemm")(*(np.zeros(4, np.float32),) * 3, m=2, n=2)
    ro = np.zeros(6, np.float32)
    ro.flags.writeable = False
    with pytest.raises(tpp.WrongDimensionError, match="read-only"):
        p(np.zeros(6, np.float32), ro, m=3, n=2)


def test_overlapping_output_reads_the_inputs_first():
    """An output that overlaps an input gets the result of the inputs as they were."""
    x = np.arange(8, dtype=np.float32)
    want = x[:4].reshape(2, 2).T.reshape(-1) * 1  # transposed 2 x 2 block
    tpp.Primitive("identity", trans_b=True)(x, x[2:], m=2, n=2)
    assert x[2:6].tolist() == want.tolist()


def test_bfloat16_array_dtype_is_checked():
    a = np.zeros(4, ml_dtypes.bfloat16)
    with pytest.raises(tpp.WrongDtypeError, match="a has dtype bfloat16"):
        tpp.Primitive("gemm")(a, a, np.zeros(4, np.float32), m=2, n=2, k=2)
