"""What a program writes into its outputs: the closed forms of ``npukit.coverage`` against
the simulator (which elements really change), and the build-time check that every output
element is written and no append drops data."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import npukit as nk
from npukit import coverage, ir, passes
from npukit import kernels as K
from npukit.layout import Layout
from npukit.sim.functional import Machine

PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CANARY = 7


def offsets_of(boxes) -> set[int]:
    return {int(o) for b in boxes for chunk in b.offsets(chunk=7) for o in chunk}


def brute(base, dims) -> set[int]:
    out = {base}
    for n, s in dims:
        out = {o + k * s for o in out for k in range(n)}
    return out if all(n for n, _ in dims) else set()


dims_st = st.lists(st.tuples(st.integers(0, 4), st.integers(-6, 12)), max_size=4)


@pytest.mark.slow
@PROPS
@given(base=st.integers(0, 50), dims=dims_st)
def test_box_is_the_same_set(base, dims):
    b = coverage.box(base, dims)
    assert (offsets_of([b]) if b else set()) == brute(base, dims)
    if b is not None:
        assert all(n > 1 and s > 0 for n, s in b.dims)
        assert list(b.dims) == sorted(b.dims, key=lambda d: d[1])


@pytest.mark.slow
@PROPS
@given(parts=st.lists(st.tuples(st.integers(0, 40), dims_st), min_size=1, max_size=5))
def test_merge_keeps_the_union(parts):
    boxes = [b for b in (coverage.box(base, d) for base, d in parts) if b is not None]
    want = set().union(*(brute(base, d) for base, d in parts))
    assert offsets_of(coverage.merge(boxes)) == want


def test_merge_joins_a_partial_last_vector():
    full = coverage.box(0, [(3, 16), (16, 1)])         # vectors 0..2
    last = coverage.box(48, [(8, 1)])                   # 8 valid lanes of vector 3
    assert coverage.merge([last, full]) == [coverage.box(0, [(56, 1)])]
    rows = coverage.box(5, [(4, 10), (6, 1)])           # rows of a strided 2-D view
    extra = coverage.box(45, [(6, 1)])                  # one more row
    assert coverage.merge([rows, extra]) == [coverage.box(5, [(5, 10), (6, 1)])]


@pytest.mark.slow
@PROPS
@given(shape=st.lists(st.integers(1, 4), max_size=3), data=st.data())
def test_prefix_is_the_first_elements(shape, data):
    strides = [data.draw(st.integers(1, 9)) for _ in shape]
    count = data.draw(st.integers(0, int(np.prod(shape)) + 2))
    idx = np.indices(shape).reshape(len(shape), -1) if shape else np.zeros((0, 1), int)
    flat = 3 + (np.array(strides, int)[:, None] * idx).sum(0) if shape else np.array([3])
    assert offsets_of(coverage.prefix(3, tuple(shape), tuple(strides), count)) == \
        {int(o) for o in flat[:count]}


# -- closed forms against the simulator --------------------------------------------------

def run_written(stmt_of, loops, keys: int, size: int) -> set[int]:
    """Offsets of an int8 tensor of ``size`` elements that the simulator changes when it
    runs the statement ``stmt_of(src)`` inside ``loops`` (the outer ``keys`` of which
    select an append's subtensor; the cursor is reset inside them)."""
    src = ir.Buffer("src", "ACT", np.dtype("int8"), 64)
    stmt = stmt_of(src)
    body: tuple = (stmt,)
    for k in reversed(range(len(loops))):
        if isinstance(stmt, ir.Append) and k == keys - 1:  # atop the innermost key loop
            body = (ir.ResetCursor("cursor"),) + body
        body = (ir.Loop(loops[k], body),)
    if isinstance(stmt, ir.Append) and keys == 0:
        body = (ir.ResetCursor("cursor"),) + body
    out = ir.Buffer("out", "LRAM", np.dtype("int8"), size, role="out")
    prog = ir.Program("p", nk.target("torq"), ((out, Layout((size,), "int8")),), (src,), body)
    img = np.full(size, CANARY, np.int8)
    Machine(prog, {"out": img}).run()
    return {int(o) for o in np.flatnonzero(img != CANARY)}


@st.composite
def loop_nests(draw, max_loops=3):
    n = draw(st.integers(0, max_loops))
    return tuple(ir.Var(f"v{k}", draw(st.integers(1, 4))) for k in range(n))


@st.composite
def views(draw, loops, size_limit=None):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=0, max_size=2)))
    strides = tuple(draw(st.integers(1, 6)) for _ in shape)
    coeffs = [draw(st.sampled_from([0, 0, 1, 2, 5, 16])) for _ in loops]
    off = ir.Affine(draw(st.integers(0, 5)))
    for v, c in zip(loops, coeffs):
        off = off + v * c
    return Layout(shape, "int8", strides, draw(st.integers(0, 3))), off


@st.composite
def lanes(draw, loops, width):
    if draw(st.booleans()):
        return None
    start = ir.Affine(draw(st.integers(-3, 10)))
    for v in loops:
        if draw(st.integers(0, 2)) == 0:
            start = start + v * draw(st.sampled_from([1, 2, 4, 8]))
    # A valid count may cover fewer rows than the view has (a sub-vector's lanes).
    return ir.Lanes(draw(st.integers(0, 40)), start, draw(st.sampled_from([width, width - 1])))


def span(lay: Layout, off: ir.Affine) -> int:
    return lay.footprint()[1] + off.bounds()[1] + 1


@PROPS
@given(data=st.data())
@pytest.mark.slow
def test_copy_writes_what_the_simulator_writes(data):
    loops = data.draw(loop_nests())
    lay, off = data.draw(views(loops))
    valid = data.draw(lanes(loops, lay.shape[0] if lay.shape else 1))
    size = span(lay, off)
    out = ir.Buffer("out", "LRAM", np.dtype("int8"), size, role="out")
    view = ir.View(out, lay, off)

    def stmt(src):
        return ir.Copy(view, ir.View(src, Layout(lay.shape, "int8")), "e", valid)
    want = run_written(stmt, loops, 0, size)
    closed = coverage.copy_writes(view, valid, loops)
    if closed is not None:
        assert offsets_of(closed) == want
    got = coverage.enumerate_writes(stmt(ir.Buffer("src", "ACT", np.dtype("int8"), 64)),
                                    loops, 10**6)
    assert {int(o) for o in got} == want


@PROPS
@given(data=st.data())
@pytest.mark.slow
def test_append_writes_what_the_simulator_writes(data):
    loops = data.draw(loop_nests())
    keys = data.draw(st.integers(0, len(loops)))
    lay, off = data.draw(views(loops[:keys]))
    # Every key loop indexes the view (the append rule): a zero coefficient would not.
    off = off + sum((v * 50 for v in loops[:keys] if v not in off.vars), ir.Affine())
    width = data.draw(st.integers(1, 6))
    valid = data.draw(lanes(loops, width))
    size = span(lay, off)
    view = ir.View(ir.Buffer("out", "LRAM", np.dtype("int8"), size, role="out"), lay, off)

    def stmt(src):
        return ir.Append(view, ir.View(src, Layout((width,), "int8")), "e", "cursor", valid)
    want = run_written(stmt, loops, keys, size)
    closed = coverage.append_writes(stmt(ir.Buffer("src", "ACT", np.dtype("int8"), 64)), loops)
    if closed is not None:
        assert offsets_of(closed) == want
    got = coverage.enumerate_writes(stmt(ir.Buffer("src", "ACT", np.dtype("int8"), 64)),
                                    loops, 10**6)
    assert {int(o) for o in got} == want


@pytest.mark.slow
@PROPS
@given(data=st.data())
def test_lane_sum_counts_valid_lanes(data):
    loops = data.draw(loop_nests())
    width = data.draw(st.integers(1, 20))
    valid = data.draw(lanes(loops, data.draw(st.integers(1, 20))))
    got = coverage.lane_sum(valid, width, loops)
    env = ir.iteration_space(loops)
    if valid is None:
        want = width * ir.points(loops)
    else:
        per = np.broadcast_to(np.minimum(valid.eval(env), width), (ir.points(loops),))
        want = int(per.sum())
    assert got is None or got == want
    if valid is None or len(valid.start.vars) <= 1:
        assert got is not None  # one loop in the start: always a closed form


# -- the build-time check ----------------------------------------------------------------

MUL = dict(bias_scale=nk.spec((2,), "int32"), shift=0, out_min=-128, out_max=127)


def build_mul(kern, n_in, out):
    return nk.build(kern, input1=nk.spec(n_in, "int8"), input2=nk.spec(n_in, "int8"),
                    output=out, **MUL)


@pytest.mark.parametrize("kern", [K.mul_vanilla, K.mul_vectorized])
def test_output_larger_than_written(kern):
    with pytest.raises(nk.ShapeError, match=r"'output': the kernel writes 50 of its 64 "
                                            r"elements \(shape \(64,\)\); the first unwritten "
                                            r"is output\[50\]\. Written by `s\.(store|append)"):
        build_mul(kern, 50, nk.spec(64, "int8"))


def test_output_rows_wider_than_written():
    """Row sums of 16-lane vectors over 40 columns leave 8 lanes per row: an output of 16
    per row is half unwritten; the index names the row and column."""
    @nk.kernel
    def k(s, x, output):
        x = x.vectorize(16)
        for r in s.iterate(x.dim(0)):
            for c in s.iterate(x.dim(1)):
                acc = s.alu.accumulate(s.iram.load(x[r][c]))
            s.append(output[r], s.act.clamp(acc, -128, 127))
    with pytest.raises(nk.ShapeError, match=r"writes 24 of its 48 elements \(shape \(3, 16\)\); "
                                            r"the first unwritten is output\[0, 8\]"):
        nk.build(k, x=nk.spec((3, 40), "int8"), output=nk.spec((3, 16), "int8"))
    with pytest.raises(nk.OutOfBoundsError, match=r"each \(4,\) subtensor of tensor 'output' "
                                                  r"holds 4 elements but receives 8"):
        nk.build(k, x=nk.spec((3, 40), "int8"), output=nk.spec((3, 4), "int8"))
    prog = nk.build(k, x=nk.spec((3, 40), "int8"), output=nk.spec((3, 16), "int8",
                                                                   partial=True))
    for backend in ("sim", "c"):
        out = np.full((3, 16), 99, np.int8)
        x = np.ones((3, 40), np.int8)
        prog.run(backend, x=x, output=out)
        assert (out[:, :8] == 3).all() and (out[:, 8:] == 99).all()


def test_strided_output_rows_fully_written():
    """An output whose rows have gaps is full when every row is: the gaps are no elements."""
    out = nk.spec((3, 40), "int8", (47, 1), 2)
    prog = nk.build(K.mul, input1=nk.spec((3, 40), "int8"), input2=nk.spec((3, 40), "int8"),
                    output=out, **MUL)
    assert prog.param("output")[0].role == "out"


def test_fallback_enumerates_modular_indices(monkeypatch):
    """``output[i % 5]``: no closed form; element by element every element is written (twice)
    with 10 iterations, not with 4 of 5 residues."""
    def make(mod):
        @nk.kernel
        def k(s, x, output):
            for i in s.iterate(10):
                p = s.alu.accumulate(s.iram.load(x[i]))
                s.store(output[i % mod], s.act.clamp(p, -128, 127))
        return k
    out = np.zeros(5, np.int8)
    prog = nk.build(make(5), x=nk.spec(10, "int8"), output=nk.spec(5, "int8"))
    prog.run(x=np.arange(10, dtype=np.int8), output=out)
    assert out.tolist() == [5, 6, 7, 8, 9]
    with pytest.raises(nk.ShapeError, match=r"writes 4 of its 5 .*first unwritten is output\[4\]"):
        nk.build(make(4), x=nk.spec(10, "int8"), output=nk.spec(5, "int8"))
    monkeypatch.setattr(passes, "ENUMERATE_LIMIT", 9)
    with pytest.raises(nk.ShapeError, match=r"cannot show that `s.store.*loop nest is too large "
                                            r"to enumerate.*partial=True"):
        nk.build(make(5), x=nk.spec(10, "int8"), output=nk.spec(5, "int8"))
    monkeypatch.setattr(passes, "EXACT_LIMIT", 4)
    with pytest.raises(nk.ShapeError, match=r"cannot show that .*no closed form applies.*"
                                            r"partial=True"):
        nk.build(make(5), x=nk.spec(10, "int8"), output=nk.spec(5, "int8"))
    nk.build(make(5), x=nk.spec(10, "int8"), output=nk.spec(5, "int8", partial=True))


def test_large_outputs_take_the_closed_form(monkeypatch):
    """Outputs of the guide's kernels are shown full without enumerating a single element."""
    def refuse(*a, **k):
        raise AssertionError("enumerated")
    monkeypatch.setattr(coverage, "enumerate_writes", refuse)
    monkeypatch.setattr(coverage, "row_major", refuse)
    n = 1 << 20
    build_mul(K.mul_vectorized, n, nk.spec(n, "int8"))
    build_mul(K.mul_vanilla, 1000, nk.spec(1000, "int8"))
    nk.build(K.mul, input1=nk.spec((7, 3, 1000), "int8"), input2=nk.spec((1,), "int8"),
             output=nk.spec((7, 3, 1000), "int8"), **MUL)
    nk.build(K.reduce_rows, input=nk.spec((5, 4001), "int8"), output=nk.spec(4001, "int8"))
    nk.build(K.reduce_cols, input=nk.spec((4001, 5), "int8"), output=nk.spec(4001, "int8"))
    with pytest.raises(nk.ShapeError, match="cannot show"):  # too big to count
        monkeypatch.setattr(passes, "EXACT_LIMIT", 1000)
        build_mul(K.mul_vectorized, n, nk.spec(n + 1, "int8"))


def test_partial_is_for_outputs():
    with pytest.raises(nk.KernelError, match=r"'input1' is only read; partial=True"):
        nk.build(K.mul_vectorized, input1=nk.spec(8, "int8", partial=True),
                 input2=nk.spec(8, "int8"), output=nk.spec(8, "int8"), **MUL)
    with pytest.raises(nk.ShapeError, match="partial must be True or False"):
        nk.spec(8, "int8", partial="yes")
    part = nk.spec((2, 8), "int8", partial=True)
    assert isinstance(part, nk.Layout) and part.partial and "partial=True" in repr(part)
    assert part.vectorize(4) == nk.spec((2, 8), "int8").vectorize(4)


def test_loops_with_run_time_trip_counts_write_only_the_iterations_that_run():
    """A loop that runs ``trips`` of its ``count`` iterations (a Compass DSL core's share)
    writes nothing in the others: no closed form claims them, enumeration leaves them out."""
    core = ir.Var("tec", 4)
    i = ir.Var("i", 3, trips=ir.affine(core) * -1 + 3)  # TEC t runs 3 - t iterations
    out = ir.Buffer("out", "global", np.dtype("int16"), 48, role="out")
    src = ir.Buffer("buf", "lsram", np.dtype("int16"), 4)
    st = ir.Copy(ir.View(out, nk.Layout((4,), "int16"), core * 12 + i * 4),
                 ir.View(src, nk.Layout((4,), "int16")), "dma")
    assert coverage.copy_writes(st.dst, None, (core, i)) is None
    written = np.sort(coverage.enumerate_writes(st, (core, i), 1 << 20))
    want = np.sort(np.concatenate([t * 12 + np.arange(4 * (3 - t)) for t in range(4)]))
    assert (written == want).all()
