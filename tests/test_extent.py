"""The closed forms of ``npukit.extent`` against enumeration of every iteration: how far a
view reaches over its loop nest (the bounds checks) and where a valid count changes along
a loop (the cycle model's steady states), on random index expressions with floordiv, mod
and clamp atoms, negative coefficients and empty loops."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npukit import extent, ir
from npukit.layout import Layout

PROPS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def range_by_enumeration(view: ir.View, valid: ir.Lanes | None, loops) -> tuple[int, int]:
    """Every iteration's offsets, every element's: the lowest and one past the highest."""
    if valid is None or view.size == 0:
        return view.bounds()
    used = set(valid.start.vars + view.offset.vars)
    env = ir.iteration_space(tuple(v for v in loops if v in used))
    base = np.asarray(view.offset.eval(env)).reshape(-1)
    count = np.asarray(valid.eval(env)).reshape(-1)
    base, count = np.broadcast_arrays(base, count)
    offs = view.element_offsets().reshape(view.shape[0] if view.shape else 1, -1)
    lo, hi = None, None
    for b, c in zip(base.tolist(), count.tolist()):
        if c > 0:
            rows = offs[:c]
            lo = b + int(rows.min()) if lo is None else min(lo, b + int(rows.min()))
            hi = b + int(rows.max()) if hi is None else max(hi, b + int(rows.max()))
    if lo is None:
        return view.bounds()[0], view.bounds()[0]
    return lo, hi + 1


def changes_by_enumeration(expr, var: ir.Var, inner, env) -> set[int]:
    used = expr.start.vars if isinstance(expr, ir.Lanes) else expr.vars
    vs = (var,) + tuple(v for v in used if v in inner)
    e = dict(env)
    e.update(ir.iteration_space(vs))
    rows = np.broadcast_to(np.asarray(expr.eval(e)), (ir.points(vs),)).reshape(var.count, -1)
    return {k for k in range(1, var.count) if (rows[k] != rows[k - 1]).any()}


@st.composite
def exprs(draw, loops, atoms=True):
    """A quasi-affine expression of ``loops``: plain terms, and sometimes an atom."""
    e = ir.Affine(draw(st.integers(-20, 40)))
    for v in loops:
        if draw(st.integers(0, 2)):
            e = e + v * draw(st.sampled_from([-16, -5, -3, -1, 1, 2, 3, 4, 8, 16]))
    if atoms and loops and draw(st.integers(0, 3)) == 0:
        inside = ir.affine(draw(st.sampled_from(loops))) * draw(st.sampled_from([1, 3, -2]))
        atom = draw(st.sampled_from([
            ir.FloorDiv(inside, draw(st.integers(1, 5))), ir.Mod(inside, draw(st.integers(1, 5))),
            ir.Clamp(inside, draw(st.sampled_from([None, 0, 2])),
                     draw(st.sampled_from([None, 3, 7])))]))
        e = e + ir.affine(atom) * draw(st.sampled_from([1, -2, 5]))
    return e


@st.composite
def loop_nests(draw, max_loops=3, empty=True):
    n = draw(st.integers(0, max_loops))
    lo = 0 if empty else 1
    return tuple(ir.Var(f"v{k}", draw(st.integers(lo, 7) if k else st.integers(lo, 40)))
                 for k in range(n))


@PROPS
@given(data=st.data())
@pytest.mark.slow
def test_view_range_is_the_enumerated_range(data):
    loops = data.draw(loop_nests())
    shape = tuple(data.draw(st.lists(st.integers(1, 5), max_size=3)))
    strides = tuple(data.draw(st.integers(-7, 9)) for _ in shape)
    lay = Layout(shape, "int8", strides, data.draw(st.integers(0, 60)))
    buf = ir.Buffer("t", "LRAM", np.dtype("int8"), 10_000, role="in")
    view = ir.View(buf, lay, data.draw(exprs(loops)))
    rows = shape[0] if shape else 1
    valid = ir.Lanes(data.draw(st.integers(-5, 120)), data.draw(exprs(loops)),
                     data.draw(st.integers(0, rows)))
    assert extent.view_range(view, valid, loops) == range_by_enumeration(view, valid, loops)


@pytest.mark.slow
@PROPS
@given(data=st.data())
def test_view_range_of_a_long_loop_is_exact_at_its_ends(data):
    """A loop of a million iterations (a vectorized dim of 16M elements): the valid count
    drops inside it; only a closed form answers in time, and it matches the few
    iterations where the extremes can lie, checked by enumerating around them."""
    n = data.draw(st.integers(1, 1 << 20))
    w = data.draw(st.sampled_from([1, 4, 16]))
    total = data.draw(st.integers(0, n * w + 40))
    i = ir.Var("i", n)
    a = data.draw(st.sampled_from([w, -w, 1, 0]))
    view = ir.View(ir.Buffer("t", "LRAM", np.dtype("int8"), 1, role="in"),
                   Layout((w,), "int8", (data.draw(st.sampled_from([1, -1, 2])),), 3),
                   ir.Affine(w * n) + i * a if a else ir.Affine(5))
    valid = ir.Lanes(total, i * w, w)
    # Enumerate over the iterations that matter: the first, the last whole one, the
    # partial ones, the last one with data (the rest are linear between them).
    near = sorted({0, n - 1} | {k for t in range(-2, 3) for k in
                                (total // w + t, (total - w) // w + t) if 0 <= k < n})
    lo = hi = None
    for k in near:
        r = min(max(total - w * k, 0), w)
        if r:
            offs = view.element_offsets()[:r] + view.offset.const + a * k
            lo = int(offs.min()) if lo is None else min(lo, int(offs.min()))
            hi = int(offs.max()) if hi is None else max(hi, int(offs.max()))
    want = (view.bounds()[0],) * 2 if lo is None else (lo, hi + 1)
    assert extent.view_range(view, valid, (i,)) == want


@PROPS
@given(data=st.data())
@pytest.mark.slow
def test_changes_are_the_enumerated_changes(data):
    loops = data.draw(loop_nests(max_loops=4))
    if not loops:
        loops = (ir.Var("v0", 5),)
    k = data.draw(st.integers(0, len(loops) - 1))
    var, inner, outer = loops[k], loops[k + 1:], loops[:k]
    env = {v: data.draw(st.integers(0, max(v.count - 1, 0))) for v in outer}
    start = data.draw(exprs(loops))
    if data.draw(st.booleans()):
        expr = ir.Lanes(data.draw(st.integers(-5, 200)), start, data.draw(st.integers(0, 20)))
    else:
        expr = start
    got = extent.Changes(extent.changes(expr, var, inner, env))
    want = changes_by_enumeration(expr, var, inner, env) if var.count else set()
    assert {k for k in range(1, var.count) if got.any_in(k, k)} == want
    for k in range(var.count):
        assert got.next_after(k, var.count) == min([c for c in want if c > k] + [var.count])
