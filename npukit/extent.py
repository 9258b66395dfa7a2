"""Closed forms over loop nests, from the index expressions: how far a view reaches (the
bounds checks of ``npukit.passes``) and where a valid count changes along a loop (the
steady states of the cycle model). Both cost time in the number of loops, not in their
trip counts: a build at 2**28 elements must stay fast.

Along a loop variable ``u`` that enters an expression as a plain term (``b·u``, not inside
a floordiv, mod or clamp), a valid count ``clamp(total - start, 0, width)`` is ``width``
up to some ``u``, then ``total - start`` (linear in ``u``), then 0. The lowest and highest
element a view reaches are linear in ``u`` on each of these pieces, so their extremes lie
at the pieces' ends; the count changes exactly where the pieces say. Variables that enter
an expression otherwise are enumerated, in chunks of bounded memory.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from . import ir

CHUNK = 1 << 16  # index points evaluated at once where a closed form does not reach
_BIG = np.iinfo(np.int64).max


def _tangled(expr: ir.Affine) -> set[ir.Var]:
    """The variables of ``expr`` that occur inside an atom (floordiv, mod, clamp)."""
    return {v for a, _ in expr.terms if not isinstance(a, ir.Var) for v in a.expr.vars}


def _plain(expr: ir.Affine) -> dict[ir.Var, int]:
    """The coefficient of each variable that occurs as a plain term of ``expr``."""
    return {a: c for a, c in expr.terms if isinstance(a, ir.Var)}


# A pure function of values (frozen views, counts, loop variables): the checks of a model's
# kernels ask for the same views again and again (repeated layers, the tilings a layer tries).
@lru_cache(maxsize=1 << 12)
def view_range(view: ir.View, valid: ir.Lanes | None, loops: tuple[ir.Var, ...]) -> tuple[int, int]:
    """(lowest, one past highest) element a view touches over its loop nest, counting only
    the first ``valid`` indices of dim 0 when given; with no valid index in any iteration,
    ``(lo, lo)`` where ``lo`` is the view's lowest bound. Exact: the loops that enter the
    offset alone add their range, one loop of the valid count's start is solved in closed
    form (see the module docstring), any other is enumerated."""
    if valid is None or view.size == 0:
        return view.bounds()
    nothing = (view.bounds()[0],) * 2
    start, off, lay = valid.start, view.offset, view.layout
    space = tuple(v for v in loops if v in set(start.vars + off.vars))
    rows, s0 = (lay.shape[0], lay.strides[0]) if lay.shape else (1, 0)
    width = min(valid.width, rows)
    if width <= 0 or any(v.count == 0 for v in space):
        return nothing
    tangled = _tangled(start) | _tangled(off)
    a_of, b_of = _plain(off), _plain(start)
    free = [v for v in space if v not in tangled and v not in start.vars]
    u = max((v for v in space if v not in tangled and v in b_of), key=lambda v: v.count,
            default=None)
    walked = tuple(v for v in space if v not in free and v is not u)
    zero = dict.fromkeys(free + ([u] if u is not None else []), 0)
    # Dims 1.. are whole in every row; dim 0 reaches rows 0..r-1.
    rest = list(zip(lay.shape[1:], lay.strides[1:]))
    lo_fix = lay.offset + sum(min(0, s * (n - 1)) for n, s in rest) + \
        sum(min(0, a_of[v] * (v.count - 1)) for v in free)
    hi_fix = lay.offset + sum(max(0, s * (n - 1)) for n, s in rest) + \
        sum(max(0, a_of[v] * (v.count - 1)) for v in free)
    lo, hi = _BIG, -_BIG
    for env in ir.iteration_chunks(walked, CHUNK):
        env.update(zero)
        T = valid.total - np.asarray(start.eval(env), np.int64).reshape(-1)
        B = np.asarray(off.eval(env), np.int64).reshape(-1)
        T, B = np.broadcast_arrays(T, B)
        got = _along(T, B, a_of.get(u, 0), b_of.get(u, 0), u.count if u else 1, width, s0)
        if got is not None:
            lo, hi = min(lo, got[0]), max(hi, got[1])
    if lo == _BIG:
        return nothing
    return int(lo + lo_fix), int(hi + hi_fix) + 1


def _along(T: np.ndarray, B: np.ndarray, a: int, b: int, n: int, width: int,
           s0: int) -> tuple[int, int] | None:
    """Over ``u < n`` and every point, the extremes of ``B + a·u + min(0, s0·(r - 1))``
    (lowest) and ``B + a·u + max(0, s0·(r - 1))`` (highest) where ``r = clamp(T - b·u, 0,
    width) >= 1``; None when ``r`` is 0 everywhere."""
    if b < 0:  # walk u backwards: u = n - 1 - u'
        T, B, a, b = T - b * (n - 1), B + a * (n - 1), -a, -b
    if b == 0:
        full = np.where(T >= width, n, 0)
        live = np.where(T >= 1, n, 0)
    else:  # r = width for u < full, T - b·u for full <= u < live, 0 after
        full = np.clip((T - width) // b + 1, 0, n)
        live = np.clip((T - 1) // b + 1, 0, n)
    lo, hi = np.full(T.shape, _BIG), np.full(T.shape, -_BIG)
    for u in (np.zeros_like(full), full - 1, full, live - 1):
        ok = (u >= 0) & (u < live)
        r1 = np.clip(T - b * u, 0, width) - 1
        base = B + a * u
        lo = np.where(ok, np.minimum(lo, base + np.minimum(0, s0 * r1)), lo)
        hi = np.where(ok, np.maximum(hi, base + np.maximum(0, s0 * r1)), hi)
    if not (live > 0).any():
        return None
    return int(lo.min()), int(hi.max())


class Changes:
    """The iterations ``k`` of a loop at which something differs from iteration ``k - 1``,
    as sorted disjoint closed intervals."""

    def __init__(self, spans):
        merged: list[list[int]] = []
        for lo, hi in sorted(spans):
            if lo > hi:
                continue
            if merged and lo <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        self.spans = [tuple(s) for s in merged]

    def any_in(self, lo: int, hi: int) -> bool:
        """True when some change lies in ``lo..hi``."""
        return any(a <= hi and b >= lo for a, b in self.spans)

    def next_after(self, k: int, end: int) -> int:
        """The first change after ``k``, or ``end`` when there is none before it."""
        for a, b in self.spans:
            if b > k:
                return min(max(a, k + 1), end)
        return end


def changes(expr: ir.Lanes | ir.Affine, var: ir.Var, inner: tuple[ir.Var, ...],
            env: dict) -> list[tuple[int, int]]:
    """Where the values of ``expr`` over the points of the ``inner`` loops (a valid count,
    clamped; a trip count, as it is) differ between iterations ``k - 1`` and ``k`` of
    ``var``, the other variables fixed by ``env``: closed intervals of ``k``."""
    aff = expr.start if isinstance(expr, ir.Lanes) else expr
    used = tuple(v for v in inner if v in aff.vars)
    # Remembered by value (the cycle model asks again each time it enters a loop): the
    # answer depends on the expression, the loops and the values of its other variables.
    try:
        fixed = tuple((v, env[v]) for v in aff.vars if v != var and (v in env or v not in used))
        return list(_changes_at(expr, var, used, fixed))
    except (KeyError, TypeError):  # a variable env lacks, or array values: as it is
        return _changes(expr, var, used, env)


@lru_cache(maxsize=1 << 12)
def _changes_at(expr, var: ir.Var, used: tuple[ir.Var, ...], fixed: tuple) -> tuple:
    return tuple(_changes(expr, var, used, dict(fixed)))


def _changes(expr, var: ir.Var, used: tuple[ir.Var, ...], env: dict) -> list[tuple[int, int]]:
    lanes = isinstance(expr, ir.Lanes)
    aff = expr.start if lanes else expr
    n = var.count
    if n < 2 or any(v.count == 0 for v in used):
        return []
    plain = _plain(aff)
    if var in _tangled(aff) or var not in plain or any(v in _tangled(aff) for v in used):
        return _enumerated(expr, var, used, env)
    b = plain[var]
    if not lanes:  # a trip count that moves with var changes at every iteration
        return [(1, n - 1)]
    if expr.width <= 0:
        return []
    # The start at var = 0 over the inner points; each takes the pieces of the module
    # docstring, and changes from where its count drops below width to where it reaches 0.
    values = set()
    for e in ir.iteration_chunks(used, CHUNK):
        e.update(env)
        e[var] = 0
        values.update(np.unique(np.asarray(aff.eval(e), np.int64)).tolist())
    flip = b < 0
    if flip:  # walk var backwards: k = n - 1 - k'
        values, b = {s + b * (n - 1) for s in values}, -b
    spans = []
    for s in values:
        T = expr.total - s
        lo, hi = max((T - expr.width) // b + 1, 1), min(-(-T // b), n - 1)
        if flip:
            lo, hi = n - hi, n - lo
        spans.append((lo, hi))
    return spans


def _enumerated(expr, var: ir.Var, used: tuple[ir.Var, ...], env: dict) -> list[tuple[int, int]]:
    """``changes`` by evaluating ``expr`` at every point, a chunk of iterations at a time."""
    per = ir.points(used)
    step = max(1, CHUNK // max(per, 1))
    out, prev = [], None
    for k0 in range(0, var.count, step):
        k1 = min(k0 + step, var.count)
        idx = np.indices((k1 - k0,) + tuple(v.count for v in used), dtype=np.int64)
        idx = idx.reshape(len(used) + 1, -1)
        e = {**env, **dict(zip(used, idx[1:])), var: idx[0] + k0}
        rows = np.broadcast_to(np.asarray(expr.eval(e)), (idx.shape[1],)).reshape(k1 - k0, per)
        if prev is not None:
            rows = np.concatenate([prev, rows])
        first = k0 if prev is not None else 1  # the iteration of the second row
        out += [(k, k) for k in (np.flatnonzero((rows[1:] != rows[:-1]).any(axis=1)) + first)
                .tolist()]
        prev = rows[-1:]
    return out
