"""Reductions along the last dim of a tensor (row sums) on the simulator and C, against
numpy: an accumulation over an inner loop whose result an outer loop appends."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_c_kernels import SETTINGS, check_against_sim, rand

import npukit as nk
from npukit import kernels as K


def lane_sums(vec: int, appended: str):
    """Row ``r`` of x, cut into ``vec``-lane vectors over its columns; the ALU adds the
    vectors of a row lane by lane and the Act saturates to int8. ``vec=0``: no vectors, a
    scalar row sum."""
    @nk.kernel
    def k(s, x, output):
        if vec:
            x = x.vectorize(vec)
        for r in s.iterate(x.dim(0)):
            for c in s.iterate(x.dim(1)):
                acc = s.alu.accumulate(s.iram.load(x[r][c]))
            q = s.act.clamp(acc, -128, 127)
            s.append(output[r] if appended == "row" else output, q)
    return k


def lane_sums_ref(x: np.ndarray, vec: int) -> np.ndarray:
    """[rows, lanes]: lane k of row r sums x[r, c*vec + k] over every vector c; only the
    lanes that hold data in every vector (the last vector's valid ones) are results."""
    rows, cols = x.shape
    if not vec:
        return np.clip(x.astype(np.int64).sum(axis=1, keepdims=True), -128, 127)
    q = -(-cols // vec)
    valid = cols - (q - 1) * vec
    padded = np.zeros((rows, q * vec), np.int64)
    padded[:, :cols] = x
    return np.clip(padded.reshape(rows, q, vec).sum(axis=1)[:, :valid], -128, 127)


@SETTINGS
@given(rows=st.integers(1, 9), cols=st.integers(1, 150), vec=st.sampled_from([0, 4, 16]),
       appended=st.sampled_from(["row", "flat"]), seed=st.integers(0, 2**31))
def test_accumulate_then_append_in_outer_loop(rows, cols, vec, appended, seed):
    """Was ``KeyError: i1``: the partials' valid lanes named the inner loop, which does not
    enclose the append."""
    rng = np.random.default_rng(seed)
    x = rand(rng, (rows, cols), "int8")
    want = lane_sums_ref(x, vec)
    shape = want.shape if appended == "row" else (want.size,)
    got = check_against_sim(
        lambda spec: nk.build(lane_sums(vec, appended), x=nk.spec(x.shape, "int8"),
                              output=spec),
        {"x": x}, "output", shape, "int8", gaps=(2, 0)[:len(shape)])
    assert (got.reshape(want.shape) == want).all()


def test_accumulated_lanes_shrink_to_the_last_vector():
    """40 columns in vectors of 16: lanes 8..15 of the last vector are junk, so only 8 lanes
    of the sums hold data; the append writes 8 per row."""
    prog = nk.build(lane_sums(16, "row"), x=nk.spec((3, 40), "int8"),
                    output=nk.spec((3, 8), "int8"))
    (app,) = [st for st, _ in prog.walk() if isinstance(st, nk.ir.Append)]
    assert app.valid is not None and not app.valid.start.vars
    assert app.valid.total - app.valid.start.const == 8
    full = nk.build(lane_sums(8, "row"), x=nk.spec((3, 40), "int8"),
                    output=nk.spec((3, 8), "int8"))
    (app,) = [st for st, _ in full.walk() if isinstance(st, nk.ir.Append)]
    assert app.valid is None  # 40 = 5 x 8: every lane of every vector holds data


def test_store_after_accumulation_agrees_with_append():
    @nk.kernel
    def k(s, x, output):
        x = x.vectorize(4)
        for r in s.iterate(x.dim(0)):
            for c in s.iterate(x.dim(1)):
                acc = s.alu.accumulate(s.iram.load(x[r][c]))
            s.store(output[r], s.act.clamp(acc, -128, 127))
    x = np.arange(-40, 40, dtype=np.int8).reshape(4, 20)
    prog = nk.build(k, x=nk.spec((4, 20), "int8"), output=nk.spec((4, 4), "int8"))
    for backend in ("sim", "c"):
        out = np.zeros((4, 4), np.int8)
        prog.run(backend, x=x, output=out)
        assert (out == lane_sums_ref(x, 4)).all()


def test_accumulation_lanes_through_floordiv_refused():
    @nk.kernel
    def k(s, x, output):
        x = x.vectorize(4)
        for c in s.iterate(4):
            acc = s.alu.accumulate(s.iram.load(x[c // 2]))
        s.append(output, s.act.clamp(acc, -128, 127))
    with pytest.raises(nk.KernelError, match="vary with the accumulation loop"):
        nk.build(k, x=nk.spec((6,), "int8"), output=nk.spec((2,), "int8"))


# -- row sums by strided ("transposed") vector loads: npukit.kernels.reduce_cols ----------

def strided_input(rng, shape, dtype, row_gap: int, col_step: int):
    """[N, M] values inside a bigger buffer: rows ``row_gap`` elements apart beyond their
    span, columns ``col_step`` apart. Returns (view, spec)."""
    n, m = shape
    strides = (m * col_step + row_gap, col_step)
    flat = rand(rng, (n - 1) * strides[0] + (m - 1) * strides[1] + 1, dtype)
    it = flat.itemsize
    view = np.lib.stride_tricks.as_strided(flat, shape, (strides[0] * it, strides[1] * it))
    return view, nk.spec(shape, dtype, strides)


def row_sums_ref(x: np.ndarray) -> np.ndarray:
    info = np.iinfo(x.dtype)
    return np.clip(x.astype(np.int64).sum(axis=1), info.min, info.max)


@SETTINGS
@given(n=st.integers(1, 200), m=st.integers(1, 40), dtype=st.sampled_from(["int8", "int16"]),
       vector=st.sampled_from(["alu", "act"]), row_gap=st.integers(0, 3),
       col_step=st.integers(1, 2), seed=st.integers(0, 2**31))
def test_reduce_cols_matches_numpy(n, m, dtype, vector, row_gap, col_step, seed):
    rng = np.random.default_rng(seed)
    x, x_spec = strided_input(rng, (n, m), dtype, row_gap, col_step)
    got = check_against_sim(
        lambda spec: nk.build(K.reduce_cols, input=x_spec, output=spec, vector=vector),
        {"input": x}, "output", (n,), dtype)
    assert (got == row_sums_ref(x)).all()


def test_reduce_cols_saturates_and_uses_alu_width():
    x = np.full((70, 9), 100, np.int8)
    x[1] = -100
    x[2] = [5, -3, 0, 1, 2, -1, 4, 0, 0]
    x[69] = -x[2]
    prog = nk.build(K.reduce_cols, input=nk.spec(x.shape, "int8"), output=nk.spec(70, "int8"))
    for backend in ("sim", "c"):
        out = np.zeros(70, np.int8)
        prog.run(backend, input=x, output=out)
        assert (out[0], out[1], out[2], out[69]) == (127, -128, 8, -8)
        assert (out == row_sums_ref(x)).all()
    (t,) = [t for t in prog.transfers() if t.tensor == "input"]
    assert t.counts == (2, 9, 64)  # blocks of 64 rows (ALU width), columns, lanes


@pytest.mark.parametrize("shape, strides", [((100, 7), None), ((5, 3), (8, 2)),
                                            ((64, 4), None), ((1, 1), None)])
def test_reduce_cols_transfer_reads_each_element_once(shape, strides):
    """The strided load's descriptor: lanes step one row (the row stride in bytes), and
    its data elements (``valid_mask``) are exactly the tensor's, each once; the junk lanes
    of the last block, which lie past the tensor's end, are marked as such."""
    spec = nk.spec(shape, "int16", strides)
    prog = nk.build(K.reduce_cols, input=spec, output=nk.spec(shape[0], "int16"))
    (t,) = [t for t in prog.transfers() if t.tensor == "input"]
    assert (t.src, t.dst, t.elem_bytes) == ("LRAM", "IRAM", 2)
    assert t.strides[-1] == spec.strides[0] * 2 and t.strides[1] == spec.strides[1] * 2
    mask = t.valid_mask()
    idx = np.indices(shape).reshape(2, -1)
    want = (idx[0] * spec.strides[0] + idx[1] * spec.strides[1]) * 2
    assert (np.sort(t.addresses()[mask]) == np.sort(want)).all()
    assert (t.addresses()[~mask] > want.max()).all()
    assert mask.all() == (shape[0] % 16 == 0)
