"""Each transfer descriptor's address sequence against the addresses the numpy reference
reads and writes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import npukit as nk
from npukit import kernels as K

ATTRS = dict(shift=4, out_min=-128, out_max=127)


def element_addresses(spec: nk.Layout) -> np.ndarray:
    """Byte addresses of a tensor's elements in row-major order, from its spec alone."""
    idx = np.indices(spec.shape).reshape(spec.rank, -1) if spec.rank else np.zeros((0, 1), int)
    return (spec.offset + (np.array(spec.strides)[:, None] * idx).sum(0)) * spec.itemsize


def valid_lanes_mask(t: nk.Transfer, n_valid: int) -> np.ndarray:
    """Lanes of a vectorized descriptor that hold data: the last two counts are (vectors,
    lanes) of a dim with ``n_valid`` elements."""
    q, w = t.counts[-2], t.counts[-1]
    lane = np.arange(q)[:, None] * w + np.arange(w)[None, :]
    return np.broadcast_to(lane < n_valid, t.counts).reshape(-1)


def build_mul(kern, s1, s2, so, out_strides=None, dtype="int8"):
    out = nk.spec(so, dtype, out_strides)
    prog = nk.build(kern, input1=nk.spec(s1, dtype), input2=nk.spec(s2, dtype),
                    bias_scale=nk.spec((2,), "int32"), output=out, **ATTRS)
    return prog, {t.tensor: t for t in prog.transfers()}, out


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=4), gap=st.integers(0, 3),
       dtype=st.sampled_from(["int8", "int16"]))
def test_ndim_mul_descriptors(shape, gap, dtype):
    shape = tuple(shape)
    strides = [1]
    for n in reversed(shape[1:]):
        strides.insert(0, strides[0] * n + gap)  # rows of the output have holes
    strides = tuple(strides)
    prog, ts, out = build_mul(K.mul_ndim, shape, shape, shape, strides, dtype)
    assert set(ts) == {"input1", "input2", "bias_scale", "output"}
    spec_in = nk.spec(shape, dtype)
    for name in ("input1", "input2"):
        t = ts[name]
        assert (t.src, t.dst, t.elem_bytes) == ("LRAM", "IRAM" if name == "input1" else "WRAM",
                                                np.dtype(dtype).itemsize)
        addr = t.addresses()[valid_lanes_mask(t, shape[-1])]
        assert (addr == element_addresses(spec_in)).all()
    t = ts["output"]
    assert (t.src, t.dst) == ("ACT", "LRAM")
    assert (t.addresses() == element_addresses(out)).all()
    assert ts["bias_scale"].counts == (2,) and ts["bias_scale"].strides == (4,)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 200))
def test_1d_descriptors(n):
    _, ts, out = build_mul(K.mul_vectorized, (n,), (n,), (n,))
    t = ts["input1"]
    assert t.counts == (-(-n // 16), 16) and t.strides == (16, 1)
    assert (t.addresses()[:n] == np.arange(n)).all()
    assert (ts["output"].addresses() == np.arange(n)).all()
    _, ts, _ = build_mul(K.mul_vanilla, (n,), (n,), (n,))
    assert ts["input1"].counts == (n,) and ts["output"].counts == (n,)


def test_broadcast_descriptor_repeats_elements():
    """input2 [5,1] broadcast to [2,5,7]: each of its 5 elements read 2*7 times."""
    _, ts, _ = build_mul(K.mul, (2, 5, 7), (5, 1), (2, 5, 7))
    t = ts["input2"]
    lanes = valid_lanes_mask(t, 7)
    addr = t.addresses()[lanes]
    ref = np.broadcast_to(np.arange(5)[:, None], (2, 5, 7)).reshape(-1)
    assert (addr == ref).all()


def test_fused_descriptor():
    _, ts, _ = build_mul(K.mul, (5, 3, 3, 2), (5, 3, 3, 2), (5, 3, 3, 2))
    assert ts["input1"].counts == (6, 16) and ts["output"].counts == (90,)


def test_reduce_descriptors_cover_each_element_once():
    prog = nk.build(K.reduce_rows, input=nk.spec((9, 150), "int16", (160, 1)),
                    output=nk.spec((150,), "int16"))
    ts = {t.tensor: t for t in prog.transfers()}
    t = ts["input"]
    assert t.counts[1] == 9 and t.strides[1] == 320  # rows inside column vectors
    q, w = t.counts[0], t.counts[2]
    lane = (np.arange(q)[:, None, None] * w + np.arange(w)[None, None, :])
    valid = np.broadcast_to(lane < 150, t.counts).reshape(-1)
    got = np.sort(t.addresses()[valid])
    assert (got == np.sort(element_addresses(nk.spec((9, 150), "int16", (160, 1))))).all()
    assert (ts["output"].addresses() == np.arange(150) * 2).all()


def test_append_limit_when_output_is_partial():
    """Appending 20 elements into a 40-element partial output: the descriptor stops after
    20 and the simulator writes exactly those."""
    prog = nk.build(K.mul_vectorized, input1=nk.spec((20,), "int8"), input2=nk.spec((20,), "int8"),
                    bias_scale=nk.spec((2,), "int32"), output=nk.spec(40, "int8", partial=True),
                    **ATTRS)
    (t,) = [t for t in prog.transfers() if t.tensor == "output"]
    assert t.limit == 20 and (t.addresses() == np.arange(20)).all()
    a = np.arange(1, 21, dtype=np.int8)
    out = np.full(40, 9, np.int8)
    prog.run(input1=a, input2=a, bias_scale=np.array([0, 1], np.int32), output=out)
    assert (out[:20] == np.clip((a.astype(int) ** 2 + 8) >> 4, -128, 127)).all()
    assert (out[20:] == 9).all()


def test_append_into_a_shorter_output_is_refused():
    """Appending 40 computed values into a 20-element output would drop 20 results."""
    with pytest.raises(nk.OutOfBoundsError, match=r"'output' holds 20 elements but receives 40 "
                                                  r"computed values: the last 20 would be dropped"):
        nk.build(K.mul_vectorized, input1=nk.spec((40,), "int8"), input2=nk.spec((40,), "int8"),
                 bias_scale=nk.spec((2,), "int32"), output=nk.spec((20,), "int8"), **ATTRS)
