"""Layout against numpy: every operation on random shapes, strides and offsets is compared
with the same numpy operation on an independently built strided view of a canary-free
buffer (``np.arange``), plus the seed's examples and every misuse with its numbers."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import NamedTuple

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import npukit as nk
from npukit import DTypeError, Layout, NpukitError, OutOfBoundsError, ShapeError
from npukit.layout import coalesce

PROPS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

BUFFER_DTYPES = [np.int16, np.int32, np.int64, np.float64]

# -- independent oracles ---------------------------------------------------------------------


def addresses(shape, strides, offset) -> np.ndarray:
    """Element address of every index, by brute force: offset + Σ idx[k]·strides[k]."""
    out = np.full(shape, offset, dtype=np.int64)
    for idx, s in zip(np.indices(shape, dtype=np.int64), strides):
        out += idx * s
    return out


def ref_dense_dims(shape, strides) -> int:
    """The largest k such that the k innermost dims, enumerated in row-major order from
    address 0, visit exactly 0, 1, 2, ... (size-1 dims therefore never matter)."""
    rank = len(shape)
    for k in range(rank, -1, -1):
        a = addresses(shape[rank - k:], strides[rank - k:], 0).ravel()
        if np.array_equal(a, np.arange(a.size)):
            return k
    raise AssertionError("k = 0 always qualifies")


def np_view(buf: np.ndarray, shape, strides, offset) -> np.ndarray:
    """The strided view built by numpy itself (which checks the bounds), not by Layout."""
    isz = buf.itemsize
    return np.ndarray(tuple(shape), buf.dtype, buffer=buf, offset=offset * isz,
                      strides=tuple(s * isz for s in strides))


def np_reshape_nocopy(arr: np.ndarray, shape):
    """numpy's reshape if it needs no copy, else None (setting .shape refuses to copy)."""
    v = arr.view()
    try:
        v.shape = tuple(shape)
    except AttributeError:
        return None
    return v


# -- strategies ------------------------------------------------------------------------------


class Spec(NamedTuple):
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    dtype: type
    size: int  # buffer length, >= one past the highest address

    def layout(self) -> Layout:
        return Layout(self.shape, np.dtype(self.dtype), self.strides, self.offset)

    def buffer(self, pad: int = 0) -> np.ndarray:
        return np.arange(self.size + pad).astype(self.dtype)

    def oracle(self, buf: np.ndarray) -> np.ndarray:
        return np_view(buf, self.shape, self.strides, self.offset)


dims_st = st.one_of(st.just(1), st.integers(1, 6))


@st.composite
def specs(draw, min_rank=0, max_rank=5, last=None, last_dim=dims_st):
    """Random layouts: dense runs, gaps, zero (broadcast) and negative strides, arbitrary
    (possibly overlapping) strides, size-1 dims with any stride, an offset, and a buffer a
    little larger than the footprint. ``last`` picks the innermost stride."""
    rank = draw(st.integers(min_rank, max_rank))
    shape = tuple(draw(st.lists(dims_st, min_size=rank, max_size=rank)))
    if rank:
        shape = shape[:-1] + (draw(last_dim),)
    strides, acc = [], 1
    for k, n in enumerate(reversed(shape)):
        before = acc
        kind = draw(st.sampled_from(["dense", "dense", "dense", "gap", "zero", "neg", "any"]))
        if k == 0 and last is not None:
            s = draw(st.sampled_from(last))
            acc = max(1, abs(s) * n)
        elif kind == "dense":
            s, acc = acc, acc * n
        elif kind == "gap":
            s = draw(st.sampled_from([acc + 1, 2 * acc]))
            acc = s * n
        elif kind == "zero":
            s = 0
        elif kind == "neg":
            s, acc = -acc, acc * n
        else:
            s = draw(st.integers(-7, 13))
            acc = max(acc, abs(s) * n)
        if n == 1:
            acc = before  # a size-1 dim never breaks a dense run, whatever its stride
        strides.append(s)
    strides = tuple(reversed(strides))
    lo = sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
    hi = sum(max(0, (n - 1) * s) for n, s in zip(shape, strides))
    offset = -lo + draw(st.integers(0, 3))
    size = offset + hi + 1 + draw(st.integers(0, 2))
    dtype = draw(st.sampled_from(BUFFER_DTYPES))
    if dtype is np.int16 and size + 64 > np.iinfo(np.int16).max:
        dtype = np.int32  # keep np.arange(size) free of repeated values
    return Spec(shape, strides, offset, dtype, size)


@st.composite
def index_keys(draw, shape):
    """A basic-indexing key for the leading dims: ints (negative too) and slices with
    steps, sometimes bare (not a tuple)."""
    m = draw(st.integers(0, len(shape)))
    keys = []
    for n in shape[:m]:
        if draw(st.booleans()):
            keys.append(draw(st.integers(-n, n - 1)))
        else:
            bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
            step = draw(st.sampled_from([None, 1, 2, 3, -1, -2]))
            keys.append(slice(draw(bound), draw(bound), step))
    if m == 1 and draw(st.booleans()):
        return keys[0]
    return tuple(keys)


def factorings(draw, size: int) -> list[int]:
    """A random ordered factorization of ``size`` (no 1s)."""
    dims = []
    while size > 1:
        d = draw(st.sampled_from([d for d in range(2, size + 1) if size % d == 0]))
        dims.append(d)
        size //= d
    return dims


@st.composite
def new_shapes(draw, shape):
    """Shapes with the same size: either any factorization, or the old dims merged into
    adjacent groups that are then re-split (the reshapes a strided view may allow)."""
    if draw(st.booleans()):
        dims = factorings(draw, math.prod(shape))
    else:
        dims, i = [], 0
        while i < len(shape):
            j = draw(st.integers(i + 1, len(shape)))
            dims += factorings(draw, math.prod(shape[i:j]))
            i = j
    for _ in range(draw(st.integers(0, 2))):
        dims.insert(draw(st.integers(0, len(dims))), 1)
    return tuple(dims)


def assert_view(lay: Layout, buf: np.ndarray, expected: np.ndarray) -> None:
    got = lay.view(buf)
    assert got.shape == np.shape(expected)
    assert got.dtype == buf.dtype
    np.testing.assert_array_equal(got, expected)


# -- properties ------------------------------------------------------------------------------


@pytest.mark.slow
@PROPS
@given(spec=specs())
def test_view_matches_numpy_and_brute_force(spec):
    buf = spec.buffer()
    arr = spec.oracle(buf)
    np.testing.assert_array_equal(arr, buf[addresses(spec.shape, spec.strides, spec.offset)])
    lay = spec.layout()
    assert (lay.shape, lay.strides, lay.offset, lay.rank) == (
        spec.shape, spec.strides, spec.offset, len(spec.shape))
    assert lay.size == arr.size
    assert_view(lay, buf, arr)
    assert np.shares_memory(lay.view(buf), buf)
    top = int(addresses(spec.shape, spec.strides, spec.offset).max())
    np.testing.assert_array_equal(lay.view(buf[:top + 1]), arr)  # exactly big enough
    with pytest.raises(OutOfBoundsError, match=f"of a buffer of {top}$"):
        lay.view(buf[:top])  # one element short


@pytest.mark.slow
@PROPS
@given(spec=specs())
def test_footprint_is_min_and_max_address(spec):
    a = addresses(spec.shape, spec.strides, spec.offset)
    assert spec.layout().footprint() == (int(a.min()), int(a.max()) + 1)


@pytest.mark.slow
@PROPS
@given(spec=specs())
def test_dense_dims_matches_reference(spec):
    lay = spec.layout()
    k = ref_dense_dims(spec.shape, spec.strides)
    assert lay.dense_dims() == k
    assert lay.is_dense() == (k == lay.rank)


@PROPS
@given(spec=specs(), data=st.data())
@pytest.mark.slow
def test_indexing_matches_numpy(spec, data):
    buf = spec.buffer()
    arr = spec.oracle(buf)
    key = data.draw(index_keys(spec.shape))
    assert_view(spec.layout()[key], buf, arr[key])


@PROPS
@given(spec=specs(min_rank=1), data=st.data())
@pytest.mark.slow
def test_chained_int_indexing_matches_multi_index(spec, data):
    buf = spec.buffer()
    arr = spec.oracle(buf)
    m = data.draw(st.integers(1, len(spec.shape)))
    idx = tuple(data.draw(st.integers(-n, n - 1)) for n in spec.shape[:m])
    chained = spec.layout()
    for i in idx:
        chained = chained[i]
    assert chained == spec.layout()[idx]
    assert_view(chained, buf, arr[idx])


@PROPS
@given(spec=specs(), data=st.data())
@pytest.mark.slow
def test_permute_is_transpose(spec, data):
    buf = spec.buffer()
    rank = len(spec.shape)
    order = data.draw(st.permutations(range(rank)))
    # Negative axes count from the end, as in numpy.
    order = [o - rank if data.draw(st.booleans()) else o for o in order]
    assert_view(spec.layout().permute(order), buf, np.transpose(spec.oracle(buf), order))


@PROPS
@given(spec=specs(min_rank=1), data=st.data())
@pytest.mark.slow
def test_split_is_reshape_of_one_axis(spec, data):
    buf = spec.buffer()
    rank = len(spec.shape)
    d = data.draw(st.integers(-rank, rank - 1))
    n = spec.shape[d]
    factor = data.draw(st.sampled_from([f for f in range(1, n + 1) if n % f == 0]))
    a = d % rank
    want = spec.oracle(buf).reshape(spec.shape[:a] + (n // factor, factor) + spec.shape[a + 1:])
    assert_view(spec.layout().split(d, factor), buf, want)


@PROPS
@given(spec=specs(), data=st.data())
@pytest.mark.slow
def test_reshape_exactly_when_numpy_needs_no_copy(spec, data):
    buf = spec.buffer()
    arr = spec.oracle(buf)
    shape = data.draw(new_shapes(spec.shape))
    want = np_reshape_nocopy(arr, shape)
    if want is None:
        with pytest.raises(ShapeError, match="without a copy"):
            spec.layout().reshape(shape)
    else:
        got = spec.layout().reshape(shape)
        assert got.shape == shape
        assert_view(got, buf, want)
        assert np.shares_memory(got.view(buf), buf)


@PROPS
@given(spec=specs(), data=st.data())
@pytest.mark.slow
def test_broadcast_as_is_broadcast_to(spec, data):
    buf = spec.buffer()
    lead = tuple(data.draw(st.lists(st.integers(1, 4), max_size=2)))
    grown = tuple(data.draw(st.integers(1, 4)) if n == 1 else n for n in spec.shape)
    target = lead + grown
    want = np.broadcast_to(spec.oracle(buf), target)
    lay = spec.layout()
    assert_view(lay.broadcast_as(target), buf, want)
    assert lay.broadcast_as(Layout(target, "int8")) == lay.broadcast_as(target)


@pytest.mark.slow
@PROPS
@given(spec=specs(), data=st.data())
def test_fuse_is_reshape_of_dense_inner_dims(spec, data):
    buf = spec.buffer()
    lay = spec.layout()
    rank = lay.rank
    k = data.draw(st.integers(0, rank + 1))
    if k <= 1:
        assert lay.fuse(k) == lay
    elif k > rank:
        with pytest.raises(ShapeError, match=rf"fuse\({k}\) of a rank-{rank} layout"):
            lay.fuse(k)
    elif ref_dense_dims(spec.shape, spec.strides) >= k:
        fused = lay.fuse(k)
        shape = spec.shape[:rank - k] + (math.prod(spec.shape[rank - k:]),)
        assert fused.shape == shape
        assert fused.dense_dims() >= 1
        assert_view(fused, buf, spec.oracle(buf).reshape(shape))
    else:
        with pytest.raises(ShapeError, match=rf"fuse\({k}\): only the \d+ innermost"):
            lay.fuse(k)


@PROPS
@given(spec=specs(min_rank=1, last=(1, 1, 0), last_dim=st.integers(1, 40)),
       n=st.integers(1, 12), data=st.data())
@pytest.mark.slow
def test_vectorize_valid_part_is_the_original(spec, n, data):
    buf = spec.buffer(pad=n)  # the last vector may run n - 1 elements past the data
    arr = spec.oracle(buf)
    lay = spec.layout()
    vec = lay.vectorize(n)
    big, q = spec.shape[-1], -(-spec.shape[-1] // n)
    outer = spec.shape[:-1]
    assert vec.shape == outer + (q, n)
    assert (vec.valid, vec.vdims) == (big, 2)
    assert vec.valid_count() == arr.size
    vv = vec.view(buf)
    np.testing.assert_array_equal(vv.reshape(outer + (q * n,))[..., :big], arr)
    lead = (slice(None),) * len(outer)
    for i in range(q):
        sub = vec[lead + (i,)]
        assert sub.valid == min(max(big - i * n, 0), n)
        assert sub.vdims == 1
        assert sub.valid_count() == math.prod(outer) * sub.valid
        assert_view(sub, buf, vv[..., i, :])
    a = data.draw(st.integers(0, q))
    b = data.draw(st.one_of(st.just(q), st.integers(a, q)))
    part = vec[lead + (slice(a, b),)]
    assert (part.valid, part.vdims) == (max(0, min(big - a * n, (b - a) * n)), 2)
    assert_view(part, buf, vv[..., a:b, :])
    if outer:
        # Indexing outer dims keeps the vector bookkeeping.
        assert (vec[0].valid, vec[0].vdims) == (big, 2)


@pytest.mark.slow
@PROPS
@given(spec=specs(min_rank=1, last=(2, 3, -1)), n=st.integers(1, 8))
def test_vectorize_refuses_a_strided_last_dim(spec, n):
    lay = spec.layout()
    big, s = spec.shape[-1], spec.strides[-1]
    if big == 1:
        assert lay.vectorize(n).valid == 1
    else:
        with pytest.raises(ShapeError, match=rf"last dim \({big} elements\) has stride {s};"):
            lay.vectorize(n)


@PROPS
@given(spec=specs(min_rank=1, last=(2, 3, 5), last_dim=st.integers(1, 30)),
       n=st.integers(1, 12))
@pytest.mark.slow
def test_strided_vectorize_valid_part_is_the_original(spec, n):
    """``vectorize(n, strided=True)``: lane k of vector i is element i*n + k of the last
    dim, whatever its stride; lanes past its end are junk (``valid``)."""
    big, s = spec.shape[-1], spec.strides[-1]
    buf = spec.buffer(pad=n * s)  # the last vector's junk lanes reach (n - 1) strides past
    arr = spec.oracle(buf)
    vec = spec.layout().vectorize(n, strided=True)
    q = -(-big // n)
    assert vec.shape == spec.shape[:-1] + (q, n)
    assert vec.strides[-2:] == ((n * s, s) if big > 1 else (n, 1))
    assert (vec.valid, vec.vdims) == (big, 2)
    got = vec.view(buf).reshape(spec.shape[:-1] + (q * n,))[..., :big]
    np.testing.assert_array_equal(got, arr)


def test_transposed_vectorize():
    x = np.arange(15, dtype=np.int8)  # [3, 5] row-major
    lay = Layout((3, 5), "int8").permute((1, 0)).vectorize(2, strided=True)
    assert lay.shape == (5, 2, 2) and lay.strides == (1, 10, 5)
    # column 1, first vector: rows 0 and 1 of column 1; second vector: row 2 and junk
    assert lay[1][0].view(x).tolist() == [1, 6]
    assert lay[1][1].valid == 1 and lay[1][1].view(np.arange(20, dtype=np.int8))[0] == 11
    with pytest.raises(ShapeError, match=r"strided must be True or False, got 'yes'"):
        Layout((3, 5), "int8").vectorize(2, strided="yes")


# Layouts from ``specs`` (dense runs, gaps, broadcast, negative and arbitrary strides) and
# from a few small strides, where equal, chaining and overlapping neighbours are common.
small_layouts = st.integers(0, 5).flatmap(lambda rank: st.tuples(
    st.lists(st.integers(0, 4), min_size=rank, max_size=rank),
    st.lists(st.sampled_from([-2, -1, 0, 1, 2, 3, 4, 6, 12]), min_size=rank, max_size=rank)))
layouts = st.one_of(specs(last_dim=st.integers(0, 6)).map(lambda s: (s.shape, s.strides)),
                    small_layouts)


@pytest.mark.slow
@PROPS
@given(layouts)
def test_coalesce_walks_the_same_addresses_in_the_same_order(layout):
    shape, strides = coalesce(*layout)
    want = addresses(tuple(layout[0]), layout[1], 5).ravel()
    assert addresses(shape, strides, 5).ravel().tolist() == want.tolist()


@pytest.mark.slow
@PROPS
@given(layouts)
def test_coalesce_leaves_no_size_1_dim_and_no_pair_that_chains(layout):
    shape, strides = coalesce(*layout)
    assert len(shape) == len(strides) <= len(layout[0])
    assert 1 not in shape
    assert not any(strides[i] == shape[i + 1] * strides[i + 1] for i in range(len(shape) - 1))
    assert coalesce(shape, strides) == (shape, strides)


def test_coalesce_examples():
    assert coalesce((2, 5, 7), (35, 7, 1)) == ((70,), (1,))  # dense: one run
    assert coalesce((2, 5, 7), (100, 7, 1)) == ((2, 35), (100, 1))  # a gap between rows
    assert coalesce((3, 4), (1, 3)) == ((3, 4), (1, 3))  # column-major: another order
    assert coalesce((4, 1, 3), (0, 9, 0)) == ((12,), (0,))  # broadcast dims chain too
    assert coalesce((1, 1), (5, 2)) == ((), ())  # one offset
    assert coalesce((2, 3), (4, 4)) == ((2, 3), (4, 4))  # overlapping dims stay apart


# -- the seed's examples ---------------------------------------------------------------------


def test_seed_vectorize_and_broadcast_2_5_7():
    x = Layout((2, 5, 7), "int8")
    assert x.strides == (35, 7, 1) and x.is_dense()
    v = x.vectorize(16)
    assert v.shape == (2, 5, 1, 16) and v.strides == (35, 7, 16, 1)
    assert (v.valid, v.vdims, v.valid_count()) == (7, 2, 70)
    v4 = x.vectorize(4)
    assert v4.shape == (2, 5, 2, 4) and v4.valid == 7
    assert v4[1, 2, 1].valid == 3  # the second vector holds lanes 4..6
    assert v4[1, 2, 0].valid == 4 and v4[1, 2, 0].vdims == 1
    assert (v4[:, :, 1:].valid, v4[:, :, 1:2].valid, v4[:, :, :1].valid) == (3, 3, 4)
    assert v4[:, :, 2:].valid == 0 and v4[:, :, 2:].shape == (2, 5, 0, 4)
    assert v4[:, :, -1:].valid == 3 and v4[:, :, 1:].valid_count() == 30

    buf = np.arange(1, 71, dtype=np.int16)
    one = Layout((1, 1, 1), "int16").broadcast_as(x)
    assert one.shape == (2, 5, 7) and one.strides == (0, 0, 0)
    np.testing.assert_array_equal(one.view(buf), np.full((2, 5, 7), 1, dtype=np.int16))
    assert not one.view(buf).flags.writeable
    row = Layout((5, 7), "int16").broadcast_as(Layout((2, 5, 7), "int16"))
    assert row.shape == (2, 5, 7) and row.strides == (0, 7, 1)
    np.testing.assert_array_equal(row.view(buf), np.broadcast_to(buf[:35].reshape(5, 7),
                                                                   (2, 5, 7)))
    vrow = row.vectorize(16)
    assert vrow.shape == (2, 5, 1, 16) and vrow.strides == (0, 7, 16, 1)
    np.testing.assert_array_equal(vrow.view(buf)[..., 0, :7], row.view(buf))
    vone = one.vectorize(16)
    assert vone.strides == (0, 0, 0, 0) and vone.valid == 7
    assert (vone.view(buf) == 1).all()


def test_seed_fuse_then_vectorize_5_3_3_2():
    y = Layout((5, 3, 3, 2), "int8")
    assert y.dense_dims() == 4
    assert y.dims(0, -1) == (5, 3, 3)
    assert y.dims() == (5, 3, 3, 2) and y.dims(1) == (3, 3, 2) and y.dims(-2) == (3, 2)
    assert y.dim(0) == 5 and y.dim(-1) == 2 and y.dim(-4) == 5
    f = y.fuse(y.dense_dims())
    assert f.shape == (90,) and f.strides == (1,)
    v = f.vectorize(16)
    assert v.shape == (6, 16) and v.valid == 90 and v.vdims == 2
    assert v[5].valid == 10 and v[0].valid == 16
    buf = np.arange(1, 97, dtype=np.int8)
    np.testing.assert_array_equal(v.view(buf).ravel()[:90], buf[:90])
    slow = y.vectorize(16)
    assert slow.shape == (5, 3, 3, 1, 16) and slow.valid == 2


def test_seed_dims_of_sub_views():
    y = Layout((5, 3, 3, 2), "int8")
    sub = y[1:4, :, ::2]
    assert sub.shape == (3, 3, 2, 2) and sub.strides == (18, 6, 4, 1)
    assert sub.offset == 18 and sub.dense_dims() == 1
    assert y[2].dims(0, -1) == (3, 3)


# -- dtypes ----------------------------------------------------------------------------------


NUMPY_NAMES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
               "float16", "float32", "float64"]
ML_NAMES = {"bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
            "float8_e5m2": ml_dtypes.float8_e5m2}


@pytest.mark.parametrize("name", NUMPY_NAMES + list(ML_NAMES))
def test_dtype_names(name):
    want = np.dtype(ML_NAMES.get(name, name))
    assert nk.dtype(name) == want and nk.dtype(name).name == name
    assert nk.dtype(want) == want
    lay = Layout((2, 3), name)
    assert lay.dtype == want and lay.itemsize == want.itemsize
    buf = (np.arange(1, 10) % 2 if name == "bool" else np.arange(1, 10)).astype(want)
    rev = Layout((2, 3), name, strides=(-3, 2), offset=4)  # rows 4.. and 1.., every 2nd
    np.testing.assert_array_equal(rev.view(buf).astype(np.float64),
                                  buf.astype(np.float64)[[[4, 6, 8], [1, 3, 5]]])


@pytest.mark.parametrize("bad", ["int9", "bfloat32", "float8", "nope"])
def test_unknown_dtype_names(bad):
    with pytest.raises(DTypeError, match=re.escape(repr(bad))) as err:
        nk.dtype(bad)
    assert "bfloat16" in str(err.value)  # names the extra formats it does accept
    assert isinstance(err.value, TypeError) and isinstance(err.value, NpukitError)
    with pytest.raises(DTypeError, match=re.escape(repr(bad))):
        Layout((3,), bad)


def test_view_refuses_a_buffer_of_another_item_size():
    with pytest.raises(ShapeError, match="view: buffer of int32 for a layout of int8"):
        Layout((4,), "int8").view(np.arange(1, 9, dtype=np.int32))
    with pytest.raises(ShapeError, match=r"buffer must be flat, got shape \(2, 4\)"):
        Layout((4,), "int8").view(np.arange(1, 9, dtype=np.int8).reshape(2, 4))


# -- misuse: the named error, with the numbers -----------------------------------------------


def test_constructor_errors():
    with pytest.raises(ShapeError, match=r"2 strides \(3, 1\) for 3 dims \(2, 3, 4\)"):
        Layout((2, 3, 4), "int8", strides=(3, 1))
    with pytest.raises(ShapeError, match=r"negative dimension in shape \(2, -3\)"):
        Layout((2, -3), "int8")
    with pytest.raises(ShapeError, match="negative offset -5"):
        Layout((2, 3), "int8", offset=-5)


def test_fuse_of_non_dense_dims():
    lay = Layout((4, 3, 2), "int16", strides=(8, 2, 1))
    assert lay.dense_dims() == 2
    assert lay.fuse(2).shape == (4, 6)
    with pytest.raises(ShapeError) as err:
        lay.fuse(3)
    msg = str(err.value)
    assert "fuse(3)" in msg and "only the 2 innermost" in msg
    assert "(4, 3, 2)" in msg and "(8, 2, 1)" in msg
    with pytest.raises(ShapeError, match=r"fuse\(4\) of a rank-3 layout \(4, 3, 2\)"):
        lay.fuse(4)


def test_size_1_dims_are_dense_whatever_their_stride():
    buf = np.arange(1, 30, dtype=np.int32)
    lay = Layout((3, 1, 2, 1), "int32", strides=(2, 99, 1, -7), offset=4)
    assert lay.dense_dims() == 4 and lay.is_dense()
    assert lay.footprint() == (4, 10)
    fused = lay.fuse(4)
    assert fused.shape == (6,) and fused.strides == (1,)
    np.testing.assert_array_equal(fused.view(buf), buf[4:10])
    np.testing.assert_array_equal(lay.fuse(2).view(buf), buf[4:10].reshape(3, 1, 2))
    v = Layout((4, 1), "int32", strides=(1, 5)).vectorize(3)
    assert v.strides == (1, 3, 1) and v.valid == 1


def test_vectorize_of_a_strided_last_dim():
    with pytest.raises(ShapeError, match=r"vectorize\(8\): last dim \(6 elements\) has stride 3"
                                         r".*vectorize\(8, strided=True\)"):
        Layout((4, 6), "int8", strides=(18, 3)).vectorize(8)
    with pytest.raises(ShapeError, match=r"vectorize\(0\): vector size must be >= 1"):
        Layout((4, 6), "int8").vectorize(0)
    with pytest.raises(ShapeError, match=r"vectorize\(4\) of a rank-0 layout"):
        Layout((), "int8").vectorize(4)
    with pytest.raises(ShapeError, match=r"layout \(4, 2, 4\) is already vectorized"):
        Layout((4, 6), "int8").vectorize(4).vectorize(4)


def test_broadcast_incompatible():
    with pytest.raises(ShapeError) as err:
        Layout((3, 4), "int8").broadcast_as((2, 5, 4))
    msg = str(err.value)
    assert "(3, 4)" in msg and "(2, 5, 4)" in msg
    assert "dim 0 has 3 elements, target has 5" in msg
    with pytest.raises(ShapeError, match=r"\(2, 3, 4\) to \(3, 4\): rank 3 > 2"):
        Layout((2, 3, 4), "int8").broadcast_as((3, 4))
    with pytest.raises(ShapeError, match=r"layout \(2, 2, 2\) is vectorized"):
        Layout((2, 3), "int8").vectorize(2).broadcast_as((4, 2, 2))


@pytest.mark.parametrize("key, dim, index, n", [
    ((1, 7), 1, 7, 5), ((4,), 0, 4, 4), ((0, -6), 1, -6, 5), (-5, 0, -5, 4)])
def test_index_out_of_range(key, dim, index, n):
    lay = Layout((4, 5), "int8")
    with pytest.raises(OutOfBoundsError) as err:
        lay[key]
    assert isinstance(err.value, IndexError)
    assert f"index {index} out of range for dim {dim} with {n} elements" in str(err.value)
    assert "(4, 5)" in str(err.value)
    with pytest.raises(IndexError):  # numpy agrees that it is an IndexError
        np.zeros((4, 5))[key]


def test_too_many_indices():
    with pytest.raises(OutOfBoundsError, match=r"3 indices for rank-2 layout \(4, 5\)") as err:
        Layout((4, 5), "int8")[1, 2, 0]
    assert isinstance(err.value, IndexError)
    with pytest.raises(OutOfBoundsError, match=r"1 indices for rank-0 layout \(\)"):
        Layout((), "int8")[0]


def test_bad_index_types():
    lay = Layout((4, 5), "int8")
    for key in (1.0, "1", None, True, [0, 1]):
        with pytest.raises(ShapeError, match="layout index must be an int or a slice"):
            lay[key]
    assert lay[np.int64(-1)] == lay[3]


def test_dim_out_of_range():
    with pytest.raises(OutOfBoundsError, match=r"dim 3 out of range for rank-3 layout"):
        Layout((2, 3, 4), "int8").dim(3)
    with pytest.raises(OutOfBoundsError, match=r"dim -4 out of range"):
        Layout((2, 3, 4), "int8").dim(-4)


def test_split_with_a_non_divisor():
    lay = Layout((4, 6), "int8")
    with pytest.raises(ShapeError) as err:
        lay.split(1, 4)
    assert "dim 1 of (4, 6) has 6 elements, not a multiple of factor 4" in str(err.value)
    with pytest.raises(ShapeError, match="dim 1 of .* factor 0"):
        lay.split(-1, 0)
    with pytest.raises(OutOfBoundsError, match="dim 2 out of range for rank-2"):
        lay.split(2, 2)
    assert lay.split(-1, 3).shape == (4, 2, 3)


def test_reshape_needing_a_copy():
    lay = Layout((4, 3), "int8", strides=(6, 1))
    with pytest.raises(ShapeError) as err:
        lay.reshape((12,))
    msg = str(err.value)
    assert "(4, 3) with strides (6, 1) to (12,) without a copy" in msg
    assert "sizes 4 and 3 are not contiguous" in msg
    with pytest.raises(ShapeError, match=r"cannot reshape \(4, 3\) \(12 elements\) to \(5, 2\)"):
        lay.reshape((5, 2))
    assert lay.reshape((2, 2, 3)).strides == (12, 6, 1)


def test_view_with_a_too_small_buffer():
    lay = Layout((3, 4), "int16", strides=(5, 1), offset=2)
    with pytest.raises(OutOfBoundsError) as err:
        lay.view(np.arange(1, 16, dtype=np.int16))
    msg = str(err.value)
    assert isinstance(err.value, IndexError)
    assert "touches elements [2, 16) of a buffer of 15" in msg
    assert "(3, 4)" in msg and "(5, 1)" in msg and "offset 2" in msg
    assert lay.view(np.arange(1, 17, dtype=np.int16))[2, 3] == 16
    neg = Layout((3,), "int16", strides=(-1,), offset=1)
    with pytest.raises(OutOfBoundsError, match=r"touches elements \[-1, 2\)"):
        neg.view(np.arange(1, 17, dtype=np.int16))


@pytest.mark.parametrize("order", [(0, 0), (0,), (0, 1, 2), (0, 2), (0, 3), (2, 1), (0, -3),
                                   (1, 5), (-3, 1)])
def test_permute_with_a_bad_order(order):
    with pytest.raises(ShapeError) as err:
        Layout((4, 5), "int8").permute(order)
    assert f"permute{order} is not a permutation of 2 dims" in str(err.value)
    with pytest.raises(ValueError):  # numpy refuses the same orders
        np.transpose(np.ones((4, 5)), order)


def test_regrouping_vectorized_dims():
    v = Layout((3, 4, 7), "int8").vectorize(4)  # (3, 4, 2, 4), valid 7
    for op in (lambda: v.fuse(2), lambda: v.reshape((12, 8)),
               lambda: v.reshape((3, 4, 8)), lambda: v.split(-1, 2), lambda: v.split(2, 2)):
        with pytest.raises(ShapeError, match=r"cannot regroup the vectorized dims \(2, 4\) "
                                             r"\(valid 7\) of layout \(3, 4, 2, 4\)"):
            op()
    with pytest.raises(ShapeError, match="moves the vectorized dims"):
        v.permute((0, 2, 1, 3))
    with pytest.raises(ShapeError, match="vectorized dim 3"):
        v[:, :, :, ::2]
    with pytest.raises(ShapeError, match="vectorized dim 2"):
        v[:, :, ::2]
    # What stays legal: outer dims are ordinary dims.
    assert v.split(0, 3).shape == (1, 3, 4, 2, 4) and v.split(0, 3).valid == 7
    p = v.permute((1, 0, 2, 3))
    assert p.shape == (4, 3, 2, 4) and (p.valid, p.vdims) == (7, 2)
    buf = np.arange(1, 90, dtype=np.int8)
    np.testing.assert_array_equal(p.view(buf), v.view(buf).transpose(1, 0, 2, 3))
    # One lane: a data element (no junk left to track) or a junk one (nothing valid).
    assert v[1, 2, 1, 2].valid is None and v[1, 2, 1, 2].valid_count() == 1
    assert v[1, 2, 1, 3].valid == 0 and v[1, 2, 1, 3].valid_count() == 0


# -- immutability ----------------------------------------------------------------------------


def test_layouts_are_immutable_values():
    lay = Layout((4, 6), "int16", strides=(8, 1), offset=3)
    before = Layout((4, 6), "int16", strides=(8, 1), offset=3)
    assert lay == before and hash(lay) == hash(before)
    for name in ("shape", "strides", "offset", "dtype", "valid", "vdims"):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(lay, name, getattr(lay, name))
    results = [lay.vectorize(4), lay.broadcast_as((2, 4, 6)), lay.permute((1, 0)),
               lay.split(1, 2), lay.reshape((2, 2, 6)), lay[1], lay[1:3, ::2], lay[-1, 2]]
    for r in results:
        assert r is not lay and r != lay
    assert Layout((4, 6), "int16").fuse(2) != Layout((4, 6), "int16")
    assert lay == before
    assert (lay.shape, lay.strides, lay.offset, lay.valid, lay.vdims) == ((4, 6), (8, 1), 3,
                                                                            None, 0)
    v = lay.vectorize(4)
    v_before = dataclasses.replace(v)
    _ = (v[0], v[1:], v.permute((0, 1, 2)), v.split(0, 2))
    assert v == v_before and v.valid == 6


def test_repr_names_the_numbers():
    r = repr(Layout((2, 5, 7), "int8").vectorize(4))
    assert r == "Layout(int8[2, 5, 2, 4], strides=(35, 7, 4, 1), offset=0, valid=7 of last 2 dims)"
