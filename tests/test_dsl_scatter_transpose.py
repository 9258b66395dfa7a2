"""``S.vstore_scatter`` (lanes stored at run-time indices, in lane order) and
``S.dma_transpose2d`` (a strided matrix written transposed by DMA), against numpy readings of
their definitions; outputs start as canary, so what the kernel does not write must keep it;
the simulator and the generated C agree bit for bit.

(No ``from __future__ import annotations``: the kernels' annotations use local type names.)"""

import functools

import numpy as np
import pytest
from dsl_check import bits, canary, run_both

import npukit as nk
import npukit.dsl as S

rng = np.random.default_rng(2390)


# -- vstore_scatter --------------------------------------------------------------------------

@functools.cache
def scatter_program(vtype: str, n: int, rounds: int, into_lsram: bool):
    t = S.DType(vtype)

    @S.prim_func
    def scatter(v: S.ptr(vtype, "global"), idx: S.ptr(f"i16x{t.lanes}", "global"),
                m: S.ptr(f"i16x{t.lanes}", "global"), out: S.ptr(t.element_of, "global")):
        if into_lsram:
            buf = S.alloc_buffer(n, t.element_of, "lsram")
            S.dma_copy(buf, out, n)
            for r in range(rounds):
                S.vstore_scatter(v[r], buf, idx[r], m[r] > 0)
            S.dma_copy(out, buf, n)
        else:
            for r in range(rounds):
                S.vstore_scatter(v[r], out, idx[r], m[r] > 0)

    k = rounds * t.lanes
    return S.build(scatter, target="compass", v=k, idx=k, m=k, out=n)


def flat(**arrays) -> dict:
    return {k: np.ravel(a) for k, a in arrays.items()}


def expected_scatter(out, v, idx, m):
    """Sequential stores: rounds in order, then lanes in order (a later store wins)."""
    want = out.copy()
    for r in range(v.shape[0]):
        for k in range(v.shape[1]):
            if m[r, k] > 0:
                want[idx[r, k]] = v[r, k]
    return want


@pytest.mark.parametrize("into_lsram", [False, True])
@pytest.mark.parametrize("vtype", ["int8x32", "uint16x16", "float32x8"])
def test_vstore_scatter_stores_active_lanes_in_order_and_nothing_else(vtype, into_lsram):
    t, n, rounds = S.DType(vtype), 100, 3
    prog = scatter_program(vtype, n, rounds, into_lsram)
    v = (rng.integers(1, 100, (rounds, t.lanes)) * (1 if t.is_integer else 0.5)).astype(t.elem)
    idx = rng.integers(10, n, (rounds, t.lanes)).astype(np.int16)  # 7 and 9: below
    idx[0, :3] = 7  # lanes 0..2 all to element 7: lane 2 wins
    idx[1, 0] = 7  # then the next round overwrites it
    idx[2, 1], idx[2, 2] = 9, 9  # lane 2 is masked off: lane 1 stays
    m = (rng.random((rounds, t.lanes)) < 0.8).astype(np.int16)
    m[0, :3], m[1, 0], m[2, 1], m[2, 2] = 1, 1, 1, 0
    got = run_both(prog, flat(v=v, idx=idx, m=m), {"out": (n, t.element_of)})["out"]
    want = expected_scatter(canary(n, t.element_of), v, idx, m)
    assert np.array_equal(bits(got), bits(want))
    assert got[7] == v[1, 0] and got[9] == v[2, 1]
    untouched = np.setdiff1d(np.arange(n), idx[m > 0])
    assert untouched.size and np.array_equal(bits(got[untouched]),
                                             bits(canary(n, t.element_of)[untouched]))


@functools.cache
def tail_scatter_program(dtype: str, n: int, count: int):
    """The public Compass DSL's composite scatter: whole vectors, then the tail under
    ``S.tail_mask`` (a constant mask: ``count`` is fixed at build time)."""
    lanes = S.hw_native_vdtype(dtype).lanes

    @S.prim_func
    def scatter(value: S.ptr(dtype, "global"), idx: S.ptr("u16", "global"),
                out: S.ptr(dtype, "global")):
        for i in range(count // lanes):
            S.vstore_scatter(S.vload(value + i * lanes), out,
                             S.vload(idx + i * lanes, lanes=lanes))
        tail = count % lanes
        if tail:
            mask = S.tail_mask(tail, lanes)
            va = S.vload(value + count - tail, lanes=lanes, mask=mask)
            indices = S.vload(idx + count - tail, lanes=lanes, mask=mask)
            S.vstore_scatter(va, out, indices, mask)

    return S.build(scatter, target="compass", value=count, idx=count, out=n)


@pytest.mark.parametrize("dtype, count", [("int8", 80), ("uint8", 80), ("int8", 48),
                                          ("int16", 24), ("float32", 12)])
def test_vstore_scatter_under_a_tail_mask_leaves_the_masked_off_lanes(dtype, count):
    """The masked-off lanes load as 0 with index 0: C wrote them to element 0. (gcc 12 with
    AVX-512 folded the copy of the constant tail mask, 16 lanes true of 32, into 32 true
    lanes; constants are now copied through an opaque pointer.)"""
    n = 200
    prog = tail_scatter_program(dtype, n, count)
    value = rng.integers(1, 100, count).astype(dtype)
    idx = (rng.permutation(n - 1)[:count] + 1).astype(np.uint16)  # never element 0
    got = run_both(prog, dict(value=value, idx=idx), {"out": (n, dtype)})["out"]
    want = canary(n, dtype)
    want[idx] = value
    assert np.array_equal(bits(got), bits(want))


@pytest.mark.parametrize("lanes, true", [(32, 16), (64, 32), (64, 48), (64, 16)])
def test_a_constant_mask_of_a_run_of_true_lanes_selects_as_it_says(lanes, true):
    """The pattern gcc 12 folded into a broadcast of its first byte: 16 (or 32) equal bytes,
    then zeros, copied from a constant into a vector register."""
    mask = f"{true}T{lanes - true}F"

    @S.prim_func
    def select(a: S.ptr(f"int8x{lanes}", "global"), b: S.ptr(f"int8x{lanes}", "global"),
               out: S.ptr(f"int8x{lanes}", "global")):
        out[0] = S.vsel(a[0], b[0], mask)

    prog = S.build(select, target="compass")
    a, b = np.full(lanes, 1, np.int8), np.full(lanes, 2, np.int8)
    got = run_both(prog, {"a": a, "b": b}, {"out": (lanes, "int8")})["out"]
    literal = canary(lanes, "int8")  # not fused: the mask goes through a vreg array
    prog.compile("c", fuse=False)(a=a, b=b, out=literal)
    want = np.where(np.arange(lanes) < true, a, b)
    assert np.array_equal(got, want) and np.array_equal(literal, want)


def test_vstore_scatter_outside_its_destination_is_reported_and_never_written_in_c():
    prog = scatter_program("int32x8", 20, 1, False)
    v = np.arange(1, 9, dtype=np.int32).reshape(1, 8)
    idx = np.array([[0, 1, 2, 3, 4, 5, 6, 25]], np.int16)
    m = np.ones((1, 8), np.int16)
    with pytest.raises(nk.OutOfBoundsError, match=r"index 25 in lane 7 .*, outside its "
                                                  r"extent 0\.\.19"):
        prog.run("sim", **flat(v=v, idx=idx, m=m), out=canary(20, "int32"))
    room = canary(40, "int32")  # the output is the first half: the rest must stay canary
    prog.run("c", **flat(v=v, idx=idx, m=m), out=room[:20])
    assert room[:7].tolist() == list(range(1, 8))
    assert np.array_equal(room[7:], canary(33, "int32"))


def test_vstore_scatter_costs_cycles_by_its_lanes_not_its_destination():
    small = scatter_program("int32x8", 20, 1, False)
    big = scatter_program("int32x8", 4000, 1, False)
    args = dict(v=np.ones(8, np.int32), idx=np.arange(8, dtype=np.int16), m=np.ones(8, np.int16))
    c_small = small.run("sim", **args, out=np.zeros(20, np.int32)).cycles
    c_big = big.run("sim", **args, out=np.zeros(4000, np.int32)).cycles
    assert 0 < c_small == c_big


def test_vstore_scatter_refuses_indices_of_another_width():
    @S.prim_func
    def bad(v: S.ptr("int32x8", "global"), idx: S.ptr("int32x8", "global"),
            out: S.ptr("int32", "global")):
        S.vstore_scatter(v[0], out, idx[0])

    with pytest.raises(nk.DTypeError, match="16-bit integer vector of the value's 8 lanes"):
        S.build(bad, target="compass", out=16)


# -- dma_transpose2d -------------------------------------------------------------------------

@functools.cache
def transpose_program(dtype: str, row: int, col: int, dst_stride, src_stride, via_lsram: bool):
    s_stride = col if src_stride is None else src_stride
    d_stride = row if dst_stride is None else dst_stride
    n_src, n_dst = (row - 1) * s_stride + col, (col - 1) * d_stride + row

    @S.prim_func
    def transpose(a: S.ptr(dtype, "global"), b: S.ptr(dtype, "global")):
        if via_lsram:
            buf = S.alloc_buffer(n_dst, dtype, "lsram")
            S.dma_copy(buf, b, n_dst)
            S.dma_transpose2d(buf, a, row, col, dst_stride, src_stride)
            S.dma_copy(b, buf, n_dst)
        else:
            S.dma_transpose2d(b, a, row, col, dst_stride, src_stride)

    spec = nk.spec((n_dst,), S.DType(dtype).elem, partial=True)
    return S.build(transpose, target="compass", a=n_src, b=spec), n_src, n_dst


@pytest.mark.parametrize("dtype, row, col, dst_stride, src_stride, via_lsram", [
    ("int8", 8, 8, None, None, False),
    ("int16", 3, 5, 4, 6, False),
    ("float32", 4, 8, 5, 10, True),
    ("uint8", 1, 7, None, None, True),
])
def test_dma_transpose2d_writes_the_transposed_rows_and_leaves_the_gaps(
        dtype, row, col, dst_stride, src_stride, via_lsram):
    prog, n_src, n_dst = transpose_program(dtype, row, col, dst_stride, src_stride, via_lsram)
    a = (rng.integers(1, 120, n_src)).astype(dtype)
    got = run_both(prog, dict(a=a), {"b": (n_dst, dtype)})["b"]
    s_stride = col if src_stride is None else src_stride
    d_stride = row if dst_stride is None else dst_stride
    want = canary(n_dst, dtype)
    for i in range(row):
        for j in range(col):
            want[j * d_stride + i] = a[i * s_stride + j]
    assert np.array_equal(bits(got), bits(want))


def test_dma_transpose2d_reports_cycles_and_refuses_a_stride_below_the_row():
    prog, n_src, n_dst = transpose_program("int16", 3, 5, None, None, False)
    res = prog.run("sim", a=np.ones(n_src, np.int16), b=np.zeros(n_dst, np.int16))
    assert res.cycles > 0

    @S.prim_func
    def bad(a: S.ptr("int8", "global"), b: S.ptr("int8", "global")):
        S.dma_transpose2d(b, a, 4, 8, 3)

    with pytest.raises(nk.NpukitError, match="dst_stride at least row"):
        S.build(bad, target="compass")
