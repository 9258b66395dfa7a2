"""What the C back end does with copies and basic-kernel calls to save host time without
changing a byte: a copy between two views of the same dense dims is one ``memcpy``; an
internal memory whose first statement writes all of it is not poisoned first; a parallel
kernel's cores are shared among the host's threads when the call's work (its ``cost``)
pays for waking them, and the bytes do not depend on the thread count."""

from __future__ import annotations

import ctypes
import os
from itertools import permutations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import npukit as nk
from npukit import ir
from npukit.c import toolchain
from npukit.c.calls import CALL_WORK, call_work
from npukit.c.emit import entry_name
from npukit.layout import Layout

F32 = np.dtype("float32")
CANARY = np.float32(-6.5e29)


def _copy_program(shape, order, partial: bool) -> ir.Program:
    """x -> L1 buffer t through a view of ``shape`` whose dims step in ``order`` (a
    permutation: both views the same dense dims), then t -> y whole. With ``partial``, u
    gets the first half of x only, and y2 all of u (its other half the simulator's junk)."""
    n = int(np.prod(shape))
    strides, step = [0] * len(shape), 1
    for d in order:  # innermost first
        strides[d], step = step, step * shape[d]
    tgt = nk.target("gap8")
    x = ir.Buffer("x", "L2", F32, n, "in")
    y = ir.Buffer("y", "L2", F32, n, "out")
    t = ir.Buffer("t", "L1", F32, n)
    perm = Layout(tuple(shape), F32, tuple(strides))
    flat = Layout((n,), F32)
    body = [ir.Copy(ir.View(t, perm), ir.View(x, perm), "cluster_dma", None, "load"),
            ir.Copy(ir.View(y, flat), ir.View(t, flat), "cluster_dma", None, "store")]
    params = [(x, flat), (y, flat)]
    buffers = [t]
    if partial:
        u = ir.Buffer("u", "L1", F32, n)
        y2 = ir.Buffer("y2", "L2", F32, n, "out")
        half = Layout((n // 2,), F32)
        body += [ir.Copy(ir.View(u, half), ir.View(x, half), "cluster_dma", None, "half"),
                 ir.Copy(ir.View(y2, flat), ir.View(u, flat), "cluster_dma", None, "all")]
        params.append((y2, flat))
        buffers.append(u)
    return ir.Program("dense_copy", tgt, tuple(params), tuple(buffers), tuple(body))


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(shape=st.lists(st.integers(2, 5), min_size=2, max_size=4), data=st.data())
def test_a_copy_of_one_dense_block_in_any_order_is_one_memcpy(shape, data):
    order = data.draw(st.sampled_from(list(permutations(range(len(shape))))))
    prog = _copy_program(shape, order, partial=True)
    src = prog.c_source()
    load = src[src.index("==== load"):src.index("==== store")]
    assert "memcpy(t, x," in load and "for (" not in load
    row_major = tuple(reversed(range(len(shape))))  # one run: a memcpy before this too
    assert ("copied whole" in load) == (tuple(order) != row_major)
    assert "t: not poisoned" in src  # its first statement writes every element
    assert "u: not poisoned" not in src  # written by half first: poisoned, as before
    n = int(np.prod(shape))
    x = (np.arange(n, dtype=np.float32) * 1.25 - 7).astype(np.float32)
    got = {}
    for backend in ("sim", "c"):
        y, y2 = np.full(n, CANARY, F32), np.full(n, CANARY, F32)
        prog.run(backend, x=x, y=y, y2=y2)
        got[backend] = (y, y2)
    assert np.array_equal(got["c"][0], x)  # numpy: the data, every element written
    assert np.array_equal(got["c"][1][:n // 2], x[:n // 2])
    assert np.isnan(got["c"][1][n // 2:]).all()  # u's junk half: the poison
    for a, b in zip(got["c"], got["sim"]):
        assert a.tobytes() == b.tobytes()


def test_a_copy_of_a_strided_view_moves_row_by_row():
    """Two views with the same dims that leave gaps are not one block: copied one row (a
    run consecutive in both) at a time, the gaps untouched."""
    tgt = nk.target("gap8")
    x = ir.Buffer("x", "L2", F32, 40, "in")
    y = ir.Buffer("y", "L2", F32, 40, "out")
    t = ir.Buffer("t", "L1", F32, 40)
    gaps = Layout((4, 5), F32, (10, 1))  # rows of 5 out of 10
    prog = ir.Program("gaps", tgt, ((x, Layout((40,), F32)), (y, Layout((40,), F32))), (t,),
                      (ir.Copy(ir.View(t, gaps), ir.View(x, gaps), "cluster_dma", None, "load"),
                       ir.Copy(ir.View(y, gaps), ir.View(t, gaps), "cluster_dma", None,
                               "store")))
    src = prog.c_source()
    assert "copied whole" not in src and "t: not poisoned" not in src
    assert src.count("Runs of 5 elements, consecutive in both views") == 2
    x_ = np.linspace(-3, 5, 40).astype(np.float32)
    outs = {}
    for backend in ("sim", "c"):
        outs[backend] = np.full(40, CANARY, F32)
        prog.run(backend, x=x_, y=outs[backend])
    c, sim = (outs[b].reshape(4, 10) for b in ("c", "sim"))
    assert c[:, :5].tobytes() == sim[:, :5].tobytes()
    assert np.array_equal(c[:, :5], x_.reshape(4, 10)[:, :5])
    assert (c[:, 5:] == CANARY).all()  # the gaps untouched (the simulator poisons them)


def test_a_memory_written_whole_first_inside_a_loop_is_not_poisoned():
    """A tile loop whose first statement copies a whole tile into t each time (a filter
    tile on the host schedule), then a kernel reads it: t is not poisoned first (nobody
    could read the poison); the same copy inside a loop that may not run: poisoned."""
    tgt = nk.target("gap8")
    fn = twice_fn("const float * __restrict__")
    x = ir.Buffer("x", "L2", F32, 60, "in")
    y = ir.Buffer("y", "L2", F32, 60, "out")
    t, u = ir.Buffer("t", "L1", F32, 20), ir.Buffer("u", "L1", F32, 20)
    tile = ir.Var("Tile", 3)
    row, flat = Layout((20,), F32), Layout((60,), F32)

    def program(inner: ir.Var | None) -> ir.Program:
        load = ir.Copy(ir.View(t, row), ir.View(x, row, ir.affine(tile) * 20), "cluster_dma",
                       None, "load")
        body = (ir.Loop(tile, (
            load if inner is None else ir.Loop(inner, (load,)),
            ir.Call(fn, (ir.Ptr(ir.View(t, row)), ir.Ptr(ir.View(u, row)),
                         ir.Val(ir.affine(20))), "twice"),
            ir.Copy(ir.View(y, row, ir.affine(tile) * 20), ir.View(u, row), "cluster_dma",
                    None, "store")), "tiles"),)
        return ir.Program("tiles", tgt, ((x, flat), (y, flat)), (t, u), body)

    prog = program(None)
    assert "t: not poisoned" in prog.c_source()
    xs = (np.arange(60, dtype=np.float32) * -1.5 + 4).astype(np.float32)
    for backend in ("sim", "c"):
        big = np.full(66, CANARY, F32)
        prog.run(backend, x=xs, y=big[3:-3])
        assert np.array_equal(big[3:-3], xs * np.float32(2) + np.float32(1)), backend
        assert (big[:3] == CANARY).all() and (big[-3:] == CANARY).all()
    maybe = ir.Var("Maybe", 1, ir.affine(tile) - 1)  # no iteration when Tile == 0
    assert "t: not poisoned" not in program(maybe).c_source()



@pytest.mark.parametrize("kernel_in, one_block, in_place", [
    ("const float * __restrict__", True, True),  # each tile one block of x
    ("float * __restrict__", True, False),  # the kernel might write the tile
    ("const float * __restrict__", False, False)])  # a tile of two runs, 32 apart
def test_tiles_copied_whole_and_only_read_are_read_in_place(kernel_in, one_block, in_place):
    """A loop copying tile after tile of input x into t, a kernel reading t by a pointer
    to const: each tile is read where it is in x when it sits on a 64-byte boundary
    (t points at it), else copied into t; a kernel that may write t, or a tile that is not
    one block of x, keeps the copy. Numpy's values and the simulator's bytes, with x
    aligned and not, canaries around y."""
    tgt = nk.target("gap8")
    fn = twice_fn(kernel_in)
    x = ir.Buffer("x", "L2", F32, 64, "in")
    y = ir.Buffer("y", "L2", F32, 64, "out")
    t, u = ir.Buffer("t", "L1", F32, 16), ir.Buffer("u", "L1", F32, 16)
    tile = ir.Var("Tile", 4)
    row, flat = Layout((16,), F32), Layout((64,), F32)
    # tile k: x[16k:16k+16], or two runs of 8: x[8k:8k+8] and x[32+8k:40+8k]
    src = row if one_block else Layout((2, 8), F32, (32, 1))
    dst = row if one_block else Layout((2, 8), F32)
    body = (ir.Loop(tile, (
        ir.Copy(ir.View(t, dst), ir.View(x, src, ir.affine(tile) * (16 if one_block else 8)),
                "cluster_dma", None, "load"),
        ir.Call(fn, (ir.Ptr(ir.View(t, row)), ir.Ptr(ir.View(u, row)), ir.Val(ir.affine(16))),
                "twice"),
        ir.Copy(ir.View(y, row, ir.affine(tile) * 16), ir.View(u, row), "cluster_dma",
                None, "store")), "tiles"),)
    prog = ir.Program("tiles", tgt, ((x, flat), (y, flat)), (t, u), body)
    c = prog.c_source()
    assert ("t = (float *)(x + 16 * Tile);" in c) == in_place
    assert ("if ((uintptr_t)t % 64 != 0)" in c) == in_place
    base = (np.arange(64, dtype=np.float32) * -0.75 + 3).astype(np.float32)
    order = base if one_block else base.reshape(2, 4, 8).transpose(1, 0, 2).reshape(64)
    want = order * np.float32(2) + np.float32(1)
    for shift in (0, 1):  # x on a 64-byte boundary (every tile is), then not (none is)
        mem = np.zeros(64 + 32, np.float32)
        at = (-mem.ctypes.data % 64) // 4 + shift
        xs = mem[at:at + 64]
        xs[...] = base
        got = {}
        for backend in ("sim", "c"):
            big = np.full(70, CANARY, F32)
            prog.run(backend, x=xs, y=big[3:-3])
            assert (big[:3] == CANARY).all() and (big[-3:] == CANARY).all()
            got[backend] = big[3:-3]
        assert np.array_equal(got["c"], want), shift
        assert got["c"].tobytes() == got["sim"].tobytes()


# -- the split rule ---------------------------------------------------------------------

_SPLIT_C = """\
void FillCores(float * __restrict__ Out, int N, int Scale)
{
    /* Core c writes its share of Out: Out[i] = i * Scale + c. */
    int Chunk = (N + gap_ncore() - 1) / gap_ncore();
    int Core = gap_coreid();
    int First = Core * Chunk;
    int Last = First + Chunk < N ? First + Chunk : N;
    for (int i = First; i < Last; i++) Out[i] = (float)(i * Scale + Core);
}"""


def fill_cores(Out, N, Scale, *, core_id, core_count):
    chunk = -(-N // core_count)
    lo, hi = core_id * chunk, min(N, (core_id + 1) * chunk)
    Out[lo:hi] = np.arange(lo, hi) * Scale + core_id


def fill_cost(N, Scale, **_):
    return N * Scale


def _split_program(n: int, scale: int, tiles: int = 1) -> ir.Program:
    """FillCores on ``tiles`` tiles of ``n`` elements, the last one shorter by 3."""
    tgt = nk.target("gap8")
    fn = ir.Extern("FillCores", (("float * __restrict__", "Out"), ("int", "N"),
                                 ("int", "Scale")), True, _SPLIT_C, fill_cores, fill_cost)
    out = ir.Buffer("out", "L2", F32, n * tiles, "out")
    t = ir.Var("Tile", tiles)
    size = ir.affine(n) - ir.affine(ir.Clamp(ir.affine(t) - (tiles - 1), 0, 1)) * 3
    call = ir.Call(fn, (ir.Ptr(ir.View(out, Layout((n,), F32), t * n)), ir.Val(size),
                        ir.Val(ir.affine(scale))), "fill")
    return ir.Program("split", tgt, ((out, Layout((n * tiles,), F32)),), (),
                      (ir.Loop(t, (call,), "tiles"),))


def test_call_work_is_the_cost_at_the_largest_arguments():
    prog = _split_program(1000, 7, tiles=3)
    (call,) = [s for s, _ in prog.walk() if isinstance(s, ir.Call)]
    assert call_work(call) == 1000 * 7  # the first tiles' N, not the last one's 997


@pytest.mark.parametrize("scale, split", [(CALL_WORK // 4000 + 1, True),
                                          (CALL_WORK // 4000 - 1, False)])
def test_a_call_is_split_among_threads_when_its_work_pays(scale, split):
    src = _split_program(4000, scale).c_source()
    assert ("npk_parallel_for(8, 1, npk_task0" in src) == split
    assert ("npk_parallel_for(8, 8, npk_task0" in src) == (not split)
    assert f"its work, {4000 * scale} cycles" in src


@pytest.mark.slow
def test_a_split_call_writes_the_same_bytes_at_1_2_and_3_threads(monkeypatch):
    """Called straight (not through the suite's 1-and-2-thread wrapper), with the default
    grain: the call's cores spread over up to 1, 2 and 3 threads (the host's CPUs cap it),
    every element written once, the simulator's bytes."""
    n, scale = 4003, CALL_WORK // 4000 + 1
    prog = _split_program(n, scale, tiles=2)
    assert "npk_parallel_for(8, 1, npk_task0" in prog.c_source()
    lib = toolchain.library(prog.c_source())
    entry = lib[entry_name(prog)]
    entry.argtypes, entry.restype = [ctypes.c_void_p], None
    want = np.full(2 * n, CANARY, F32)
    prog.run("sim", out=want)
    assert (want != CANARY).all()
    monkeypatch.delenv("NPUKIT_GRAIN", raising=False)
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("NPUKIT_THREADS", threads)
        big = np.full(2 * n + 8, CANARY, F32)
        entry(big[4:-4].ctypes.data)
        assert big[4:-4].tobytes() == want.tobytes(), f"{threads} threads"
        assert (big[:4] == CANARY).all() and (big[-4:] == CANARY).all()
    assert os.environ["NPUKIT_THREADS"] == "3"


# -- transposed walks ------------------------------------------------------------------

def _columns_program(rows: int, cols: int, tiles: int) -> ir.Program:
    """x (``cols`` x ``rows``, row-major) read as views of shape (rows, cols) whose dim 0
    steps by one element — a transposed walk — in ``tiles`` tiles of rows, the last one
    partial (valid rows only), into a double-buffered L1 buffer, then stored back the same
    way into y."""
    tgt = nk.target("gap8")
    per = -(-rows // tiles)
    x = ir.Buffer("x", "L2", F32, rows * cols, "in")
    y = ir.Buffer("y", "L2", F32, rows * cols, "out")
    t = ir.Buffer("t", "L1", F32, 2 * per * cols, slots=2, slot_len=per * cols)
    tile = ir.Var("Tile", tiles)
    outer = Layout((per, cols), F32, (1, rows))
    inner = Layout((per, cols), F32, (1, per))
    lanes = ir.Lanes(rows, ir.affine(tile) * per, per)
    body = (ir.Loop(tile, (
        ir.Copy(ir.View(t, inner, (ir.affine(tile) % 2) * (per * cols)),
                ir.View(x, outer, ir.affine(tile) * per), "cluster_dma", lanes, "load"),
        ir.Copy(ir.View(y, outer, ir.affine(tile) * per),
                ir.View(t, inner, (ir.affine(tile) % 2) * (per * cols)), "cluster_dma",
                lanes, "store")), "tiles"),)
    flat = Layout((rows * cols,), F32)
    return ir.Program("columns", tgt, ((x, flat), (y, flat)), (t,), body)


@pytest.mark.parametrize("rows, cols, tiles", [(10, 7, 3), (9, 4, 1), (64, 5, 5)])
def test_a_transposed_copy_moves_run_by_run(rows, cols, tiles):
    """Views whose dim 0 is the one that steps by one element are copied run by run along
    it (one memcpy per column), valid rows only in the last tile: the simulator's bytes,
    numpy's data, every element written."""
    prog = _columns_program(rows, cols, tiles)
    src = prog.c_source()
    assert src.count(f"Runs of {-(-rows // tiles)} elements, consecutive in both views") == 2
    x = (np.arange(rows * cols, dtype=np.float32) * 0.75 - 11).astype(np.float32)
    got = {}
    for backend in ("sim", "c"):
        big = np.full(rows * cols + 6, CANARY, F32)
        prog.run(backend, x=x, y=big[3:-3])
        assert (big[:3] == CANARY).all() and (big[-3:] == CANARY).all()
        got[backend] = big[3:-3]
    assert np.array_equal(got["c"], x)
    assert got["c"].tobytes() == got["sim"].tobytes()


def test_a_copy_in_any_dim_order_moves_runs():
    """A block of a 4-D tensor (the input features 5..9 of a [4, 20, 3, 3] filter) walked
    with its filter row outermost, as a tiler writes a filter tile: its dims taken in the
    destination's memory order and merged, the copy is 4 memcpys of 45 elements, not a
    loop over 180 elements; the simulator's bytes, numpy's block, every element written."""
    tgt = nk.target("gap8")
    x = ir.Buffer("x", "L2", F32, 720, "in")
    y = ir.Buffer("y", "L2", F32, 180, "out")
    t = ir.Buffer("t", "L1", F32, 180)
    walk = (3, 4, 5, 3)  # (fy, out, in, fx)
    body = (ir.Copy(ir.View(t, Layout(walk, F32, (3, 45, 9, 1))),
                    ir.View(x, Layout(walk, F32, (3, 180, 9, 1)), ir.affine(45)),
                    "cluster_dma", None, "load"),
            ir.Copy(ir.View(y, Layout((180,), F32)), ir.View(t, Layout((180,), F32)),
                    "cluster_dma", None, "store"))
    flat = Layout((720,), F32)
    prog = ir.Program("block", tgt, ((x, flat), (y, Layout((180,), F32))), (t,), body)
    src = prog.c_source()
    assert "Runs of 45 elements, consecutive in both views" in src
    assert "< 180; k++" not in src  # no element-by-element loop, no poison fill
    xs = (np.arange(720, dtype=np.float32) * 0.5 - 100).astype(np.float32)
    want = xs.reshape(4, 20, 9)[:, 5:10].ravel()
    got = {}
    for backend in ("sim", "c"):
        big = np.full(180 + 6, CANARY, F32)
        prog.run(backend, x=xs, y=big[3:-3])
        assert (big[:3] == CANARY).all() and (big[-3:] == CANARY).all()
        got[backend] = big[3:-3]
    assert np.array_equal(got["c"], want)
    assert got["c"].tobytes() == got["sim"].tobytes()


# -- internal memories read in place -----------------------------------------------------

_TWICE_C = """\
void Twice(IN_TYPE In, float * __restrict__ Out, int N)
{
    /* Out = 2 In + 1 */
    for (int i = 0; i < N; i++) Out[i] = In[i] * 2.0f + 1.0f;
}"""


def twice(In, Out, N):
    Out[:N] = In[:N] * np.float32(2) + np.float32(1)


def twice_fn(in_type: str) -> ir.Extern:
    """``Twice(In, Out, N)``, its input passed as ``in_type``."""
    return ir.Extern("Twice", ((in_type, "In"), ("float * __restrict__", "Out"), ("int", "N")),
                     False, _TWICE_C.replace("IN_TYPE", in_type), twice, lambda N, **_: N)


def _in_place_program(in_type: str, rewrite: bool) -> ir.Program:
    """x copied whole into L1 buffer t, ``Twice(t, u)`` (t passed as ``in_type``), u stored
    to y; with ``rewrite``, t is written again (a fill of its first element) before the
    call."""
    tgt = nk.target("gap8")
    fn = twice_fn(in_type)
    x = ir.Buffer("x", "L2", F32, 48, "in")
    y = ir.Buffer("y", "L2", F32, 48, "out")
    t, u = ir.Buffer("t", "L1", F32, 48), ir.Buffer("u", "L1", F32, 48)
    flat = Layout((48,), F32)
    grid = Layout((6, 8), F32, (1, 6))  # a transposed walk of the same block
    body = [ir.Copy(ir.View(t, grid), ir.View(x, grid), "cluster_dma", None, "load")]
    if rewrite:
        body.append(ir.Fill(ir.View(t, Layout((1,), F32)), 5.0, "rewrite"))
    body += [ir.Call(fn, (ir.Ptr(ir.View(t, flat)), ir.Ptr(ir.View(u, flat)),
                          ir.Val(ir.affine(48))), "twice"),
             ir.Copy(ir.View(y, flat), ir.View(u, flat), "cluster_dma", None, "store")]
    return ir.Program("in_place", tgt, ((x, flat), (y, flat)), (t, u), tuple(body))


@pytest.mark.parametrize("in_type, rewrite, in_place", [
    ("const float * __restrict__", False, True),
    ("float * __restrict__", False, False),  # the kernel might write it
    ("const float * __restrict__", True, False)])  # written after its copy
def test_a_buffer_copied_whole_and_only_read_is_read_in_place(in_type, rewrite, in_place):
    """An internal buffer whose first statement copies an input whole and that nothing
    writes after is the input itself when the input sits on a 64-byte boundary, else its
    copy: the simulator's bytes and numpy's values either way, aligned or not."""
    prog = _in_place_program(in_type, rewrite)
    src = prog.c_source()
    assert ("t = (float *)(x);" in src) == in_place
    assert ("if ((uintptr_t)t % 64 != 0)" in src) == in_place
    base = (np.arange(64, dtype=np.float32) * 0.5 - 9).astype(np.float32)
    for shift in (0, 1):  # x on a 64-byte boundary, then not
        big = np.zeros(64 + 32, np.float32)
        at = (-big.ctypes.data % 64) // 4 + shift
        x = big[at:at + 48]
        x[...] = base[:48]
        assert (x.ctypes.data % 64 == 0) == (shift == 0)
        got = {}
        for backend in ("sim", "c"):
            got[backend] = np.full(48, CANARY, F32)
            prog.run(backend, x=x, y=got[backend])
        want = base[:48] * np.float32(2) + np.float32(1)
        if rewrite:
            want[0] = np.float32(11)
        assert np.array_equal(got["c"], want)
        assert got["c"].tobytes() == got["sim"].tobytes()
