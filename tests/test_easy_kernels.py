"""The six seed-000 kernels against numpy on the simulator, over many shapes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_helpers import canary_output, outside_untouched, rescale_ref

import npukit as nk
from npukit import kernels as K

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
ATTRS = dict(shift=6, out_min=-100, out_max=110)
ATTRS_REF = dict(shift=ATTRS["shift"], lo=ATTRS["out_min"], hi=ATTRS["out_max"])


def run_mul(kern, a, b, out_shape, rng, backend="sim", **extra):
    dt = a.dtype
    bias, scale = int(rng.integers(-50, 50)), int(rng.integers(1, 9))
    bs = np.array([bias, scale], np.int32)
    big, out, out_spec = canary_output(out_shape, dt, rng)
    prog = nk.build(kern, target="torq", input1=nk.spec(a.shape, dt), input2=nk.spec(b.shape, dt),
                    bias_scale=nk.spec((2,), "int32"), output=out_spec, **ATTRS, **extra)
    res = prog.run(backend, input1=a, input2=b, bias_scale=bs, output=out)
    want = rescale_ref(np.broadcast_to(a, out_shape), np.broadcast_to(b, out_shape), bias, scale,
                       ATTRS["shift"], ATTRS["out_min"], ATTRS["out_max"])
    return res, out, want, big


def rand(rng, shape, dtype):
    lo, hi = (-128, 128) if dtype == "int8" else (-3000, 3000)
    x = rng.integers(lo, hi, shape).astype(dtype)
    x.flat[0] = lo + 1  # never all zero, always one extreme
    return x


@pytest.mark.slow
@SETTINGS
@given(n=st.integers(1, 300), dtype=st.sampled_from(["int8", "int16"]), seed=st.integers(0, 2**31))
@pytest.mark.parametrize("kern", [K.mul_vanilla, K.mul_vectorized])
def test_1d_mul(kern, n, dtype, seed):
    rng = np.random.default_rng(seed)
    a, b = rand(rng, (n,), dtype), rand(rng, (n,), dtype)
    res, out, want, big = run_mul(kern, a, b, (n,), rng)
    assert (out == want).all()
    assert outside_untouched(big, out)
    assert res.cycles > 0


@pytest.mark.slow
@SETTINGS
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=4),
       dtype=st.sampled_from(["int8", "int16"]), seed=st.integers(0, 2**31))
@pytest.mark.parametrize("kern", [K.mul_ndim, K.mul])
def test_ndim_mul_strided_output(kern, shape, dtype, seed):
    rng = np.random.default_rng(seed)
    shape = tuple(shape)
    a, b = rand(rng, shape, dtype), rand(rng, shape, dtype)
    res, out, want, big = run_mul(kern, a, b, shape, rng)
    assert (out == want).all()
    assert outside_untouched(big, out)


@st.composite
def broadcast_pair(draw):
    out = tuple(draw(st.lists(st.integers(1, 7), min_size=1, max_size=4)))
    def shrink(shape):
        rank = draw(st.integers(0, len(shape)))
        return tuple(1 if draw(st.booleans()) else n for n in shape[len(shape) - rank:])
    return shrink(out), shrink(out), out


@pytest.mark.slow
@SETTINGS
@given(shapes=broadcast_pair(), seed=st.integers(0, 2**31))
def test_fused_broadcast_mul(shapes, seed):
    s1, s2, so = shapes
    rng = np.random.default_rng(seed)
    a, b = rand(rng, s1, "int8"), rand(rng, s2, "int8")
    res, out, want, big = run_mul(K.mul, a, b, so, rng)
    assert (out == want).all()
    assert outside_untouched(big, out)


@pytest.mark.parametrize("s1,s2", [((2, 5, 7), (1, 1, 1)), ((2, 5, 7), (5, 1)),
                                   ((2, 1, 7), (1, 5, 1)), ((5, 3, 3, 2), (5, 3, 3, 2))])
def test_seed_shapes(s1, s2):
    rng = np.random.default_rng(7)
    out_shape = np.broadcast_shapes(s1, s2)
    a, b = rand(rng, s1, "int8"), rand(rng, s2, "int8")
    _, out, want, big = run_mul(K.mul, a, b, out_shape, rng)
    assert (out == want).all() and outside_untouched(big, out)


def test_non_dense_outer_dims_input():
    """Inputs that are sub-views with gaps between rows: only the innermost dim is dense."""
    rng = np.random.default_rng(3)
    base1, base2 = rand(rng, (4, 13), "int8"), rand(rng, (4, 13), "int8")
    a, b = base1[:, 2:11], base2[:, 1:10]
    bs = np.array([5, 3], np.int32)
    out = np.zeros((4, 9), np.int8)
    prog = nk.build(K.mul_ndim, input1=nk.spec((4, 9), "int8", (13, 1), 2),
                    input2=nk.spec((4, 9), "int8", (13, 1), 1), bias_scale=nk.spec((2,), "int32"),
                    output=nk.spec((4, 9), "int8"), **ATTRS)
    prog.run(input1=a, input2=b, bias_scale=bs, output=out)
    assert (out == rescale_ref(a, b, 5, 3, **ATTRS_REF)).all()


def test_vectorized_store_needs_padding():
    """Seed: storing vectorized results into an unpadded output is a build-time error;
    a padded output works, the junk lanes landing in the padding."""
    specs = dict(input1=nk.spec((1000,), "int8"), input2=nk.spec((1000,), "int8"),
                 bias_scale=nk.spec((2,), "int32"), **ATTRS)
    with pytest.raises(nk.OutOfBoundsError, match=r"'output'.*992\.\.1007.*1000 elements"):
        nk.build(K.mul_vectorized_store, output=nk.spec((1000,), "int8"), **specs)
    rng = np.random.default_rng(1)
    a, b = rand(rng, (1000,), "int8"), rand(rng, (1000,), "int8")
    prog = nk.build(K.mul_vectorized_store, output=nk.spec((1008,), "int8"), **specs)
    out = np.zeros(1008, np.int8)
    prog.run(input1=a, input2=b, bias_scale=np.array([1, 2], np.int32), output=out)
    assert (out[:1000] == rescale_ref(a, b, 1, 2, **ATTRS_REF)).all()


@pytest.mark.slow
@SETTINGS
@given(rows=st.integers(1, 40), cols=st.integers(1, 200), dtype=st.sampled_from(["int8", "int16"]),
       vector=st.sampled_from(["alu", "act"]), seed=st.integers(0, 2**31))
def test_reduce(rows, cols, dtype, vector, seed):
    rng = np.random.default_rng(seed)
    x = rand(rng, (rows, cols), dtype)
    big, out, out_spec = canary_output((cols,), dtype, rng)
    prog = nk.build(K.reduce_rows, input=nk.spec((rows, cols), dtype), output=out_spec,
                    vector=vector)
    prog.run(input=x, output=out)
    info = np.iinfo(dtype)
    assert (out == np.clip(x.astype(np.int64).sum(axis=0), info.min, info.max)).all()
    assert outside_untouched(big, out)


def test_reduce_saturates():
    x = np.full((40, 20), 100, np.int8)
    x[:, 3] = -100
    out = np.zeros(20, np.int8)
    nk.build(K.reduce_rows, input=nk.spec((40, 20), "int8"),
             output=nk.spec((20,), "int8")).run(input=x, output=out)
    assert out[0] == 127 and out[3] == -128


def test_reduce_when_rows_equal_act_subvectors():
    """4 rows and 4 Act sub-vectors: the row loop and the sub-vector loop have equal counts
    at equal depths and must still be distinct loops (accumulation over rows only)."""
    x = np.full((4, 1), -100, np.int8)
    out = np.zeros(1, np.int8)
    nk.build(K.reduce_rows, input=nk.spec((4, 1), "int8"),
             output=nk.spec((1,), "int8")).run(input=x, output=out)
    assert out[0] == -128


@pytest.mark.parametrize("key", [
    (slice(None), slice(1, 5)), (slice(1, 3), 2), (2, slice(None), 1), (slice(None), 3, 0),
    (slice(None, None, 2), slice(1, None), slice(None, 1)), (-1, slice(2, 4), -2),
    (slice(1, 4), slice(None), 1),
])
def test_tensor_views_index_like_numpy(key):
    """A tuple key applies each part to the next dim, as numpy does: a slice keeps its
    dim, so x[:, 1:5] slices dim 1 (it once sliced dim 0 twice)."""
    from npukit import ir
    from npukit.easy import LData

    a = np.arange(4 * 10 * 3).reshape(4, 10, 3)
    buf = ir.Buffer("x", "LRAM", np.dtype("int64"), a.size, role="in")
    x = LData(buf, nk.Layout(a.shape, "int64"), ir.Affine(), None, "x")[key]
    lay = nk.Layout(x.shape, "int64", x.layout.strides, x.layout.offset + x.offset.const)
    assert not x.offset.terms
    np.testing.assert_array_equal(lay.view(a.reshape(-1)), a[key])


@pytest.mark.parametrize("n", [12, 11, 7, 6, 1])
def test_sub_vectors_of_a_vector_wider_than_the_act_hold_only_its_lanes(n):
    """An int16 vector of 6 lanes is two Act sub-vectors of 4: the second has 2 lanes the
    ALU wrote and 2 junk ones, which an append must not write (it once wrote them)."""
    from npukit.easy import PData

    @nk.kernel
    def copy6(s, x, out, *, lo, hi):
        x = x.vectorize(6)
        for b in s.iterate(x.dim(0)):
            p = s.alu.accumulate(s.iram.load(x[b]))
            for av in s.iterate(p.dim(PData.Vectors)):
                s.append(out, s.act.clamp(p[av], lo, hi))

    prog = nk.build(copy6, x=nk.spec((n,), "int16"), out=nk.spec((n,), "int16"),
                    lo=-32768, hi=32767)
    x = (np.arange(n) * 7 - 20).astype(np.int16)
    for backend in ("sim", "c"):
        buf, out, _ = canary_output((n,), np.int16, np.random.default_rng(n))
        prog.run(backend, x=x, out=out)
        np.testing.assert_array_equal(out, x)
        assert outside_untouched(buf, out)


@pytest.mark.parametrize("n", [5, 16, 40])
def test_a_whole_vectorized_tensor_loads_only_its_data(n):
    """``s.iram.load(x[m])`` with ``m`` from ``s.iterate([])`` loads every vector of x; its
    junk lanes past the tensor's end are not fetched (it was refused as out of bounds)."""
    from npukit.easy import PData

    @nk.kernel
    def whole(s, x, out, *, lo, hi):
        x = x.vectorize(16)
        for m in s.iterate([]):
            p = s.alu.accumulate(s.iram.load(x[m]))
            for av in s.iterate(p.dim(PData.Vectors)):
                s.append(out, s.act.clamp(p[av], lo, hi))

    prog = nk.build(whole, x=nk.spec((n,), "int8"), out=nk.spec((n,), "int8"), lo=-100,
                    hi=100)
    x = (np.arange(n) * 13 - 120).astype(np.int8)
    for backend in ("sim", "c"):
        buf, out, _ = canary_output((n,), np.int8, np.random.default_rng(n))
        prog.run(backend, x=x, out=out)
        np.testing.assert_array_equal(out, np.clip(x, -100, 100))
        assert outside_untouched(buf, out)
