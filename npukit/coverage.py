"""Which elements of a tensor a program's data flows write, in closed form.

A set of element offsets is a union of boxes ``base + Σ idx_k·stride_k`` (``0 <= idx_k <
count_k``). A box is kept canonical, as CuTe's ``coalesce`` keeps a layout: dims of count 1
and stride 0 dropped (they do not change the set), negative strides flipped, dims sorted by
stride and merged when one continues the other (``(n1, s1), (n2, n1·s1) -> (n1·n2, s1)``).
Two canonical boxes that are equal describe the same set, so a tensor is fully written when
the boxes its writers cover merge into the box of its spec. The writers of one statement
are boxes over its loop nest: a ``Copy`` writes its view once per iteration (the rows its
valid count allows), an ``Append`` the first ``min(pushed, size)`` elements of its view in
row-major order per iteration of the loops that select the view. Everything here costs
time in the number of loops and dims, not in the number of elements: a build at 2**28
elements must stay fast. When no closed form applies (loops through floordiv/mod, valid
counts that vary in several loops at once, loops whose trip count is known at run time
only), ``None`` says so and the caller enumerates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import ir
from .layout import coalesce

MAX_PIECES = 64  # boxes one statement may split into before enumeration takes over


@dataclass(frozen=True)
class Box:
    """The offsets ``base + Σ idx_k·dims[k][1]`` for ``idx_k < dims[k][0]``; canonical
    when made by ``box``."""

    base: int
    dims: tuple[tuple[int, int], ...]

    @property
    def points(self) -> int:
        """Index points (the elements, when no two points share an offset)."""
        return math.prod(n for n, _ in self.dims)

    def offsets(self, chunk: int = 1 << 20):
        """The offsets in chunks of at most ``chunk`` (an iterator of int64 arrays)."""
        for _, offs in row_major(self.base, [n for n, _ in self.dims],
                                 [s for _, s in self.dims], chunk):
            yield offs


def row_major(base: int, shape, strides, chunk: int = 1 << 20):
    """``(k, offsets)``: the offsets ``base + Σ idx_d·strides[d]`` of the points ``idx`` of
    ``shape`` in row-major order, in chunks of at most ``chunk``; ``k`` is the flat index of
    the chunk's first point. Memory stays bounded whatever the shape."""
    if not len(shape):
        yield 0, np.array([base], np.int64)
        return
    total = math.prod(shape)
    for k in range(0, total, chunk):
        idx = np.unravel_index(np.arange(k, min(k + chunk, total), dtype=np.int64), shape)
        yield k, base + sum(i * s for i, s in zip(idx, strides))


def box(base: int, dims) -> Box | None:
    """The canonical box of ``base + Σ idx_k·s_k`` over ``dims`` = [(count, stride)], or
    None when it is empty (a count of 0)."""
    if any(n == 0 for n, _ in dims):
        return None
    out = []
    for n, s in dims:
        if n == 1 or s == 0:
            continue
        if s < 0:  # the same offsets walked the other way
            base += (n - 1) * s
            s = -s
        out.append((n, s))
    out.sort(key=lambda d: d[1])
    outer_first = out[::-1]
    counts, strides = coalesce([n for n, _ in outer_first], [s for _, s in outer_first])
    return Box(base, tuple(zip(counts[::-1], strides[::-1])))


def _concat(a: Box, b: Box) -> Box | None:
    """``a ∪ b`` as one box when ``b`` continues ``a`` along one of ``a``'s dims: ``a`` with
    that dim's count ``n`` grown by ``m``, where ``b`` is the same box moved ``n`` steps."""
    for j, (n, s) in enumerate(a.dims):
        rest = a.points // n
        if b.points % rest:
            continue
        m = b.points // rest
        dims = list(a.dims)
        dims[j] = (m, s)
        if box(a.base + n * s, dims) == b:
            dims[j] = (n + m, s)
            return box(a.base, dims)
    # A single offset (no dims) followed by a run that starts one stride later.
    if not a.dims and len(b.dims) == 1 and b.base == a.base + b.dims[0][1]:
        return box(a.base, [(b.dims[0][0] + 1, b.dims[0][1])])
    return None


def merge(boxes: list[Box]) -> list[Box]:
    """Merge boxes that continue one another until none does; equal boxes count once."""
    todo = list(dict.fromkeys(boxes))
    changed = True
    while changed and len(todo) > 1:
        changed = False
        for i in range(len(todo)):
            for j in range(len(todo)):
                if i == j:
                    continue
                got = _concat(todo[i], todo[j])
                if got is not None:
                    todo = [b for k, b in enumerate(todo) if k not in (i, j)] + [got]
                    todo = list(dict.fromkeys(todo))
                    changed = True
                    break
            if changed:
                break
    return todo


def prefix(base: int, shape, strides, count: int) -> list[Box]:
    """The first ``count`` elements (row-major) of a view as at most ``rank`` boxes."""
    out, count = [], min(count, math.prod(shape))
    for d in range(len(shape)):
        inner = math.prod(shape[d + 1:])
        q, count = divmod(count, inner)
        b = box(base, [(q, strides[d])] + list(zip(shape[d + 1:], strides[d + 1:])))
        if b is not None:
            out.append(b)
        base += q * strides[d]
        if not count:
            break
    if not shape and count:
        out.append(box(base, []))
    return out


def _single_var(expr: ir.Affine) -> tuple[ir.Var, int] | None | bool:
    """(var, coefficient) when ``expr`` is ``const + c·var``; False when it has no var;
    None otherwise (atoms or several vars)."""
    if not expr.terms:
        return False
    if len(expr.terms) == 1 and isinstance(expr.terms[0][0], ir.Var):
        return expr.terms[0]
    return None


def _split_rows(total: int, c: int, b: int, n: int, rows: int) -> tuple[int, int]:
    """For ``u < n``, the rows ``clamp(total - c - b·u, 0, rows)`` (``b > 0``: they never
    grow): ``(u_full, u_zero)`` where every u < u_full has all rows, every u in u_full ..
    u_zero - 1 the partial ``total - c - b·u`` rows, and every u from u_zero on none."""
    u_full = min(max((total - c - rows) // b + 1, 0), n)
    u_zero = min(max(-(-(total - c) // b), 0), n)
    return u_full, max(u_zero, u_full)


def copy_writes(view: ir.View, valid: ir.Lanes | None, loops) -> list[Box] | None:
    """The offsets a Copy (or Fill) writes into ``view``'s buffer over its loop nest: all of
    the view in every iteration, or its first ``valid`` rows (dim 0). None: no closed form."""
    if _trips(loops) or any(not isinstance(a, ir.Var) for a, _ in view.offset.terms):
        return None
    coeff = dict(view.offset.terms)
    base = view.layout.offset + view.offset.const
    shape, strides = list(view.shape) or [1], list(view.layout.strides) or [0]
    if valid is None:
        return _nonempty([box(base, _loop_dims(loops, coeff) + list(zip(shape, strides)))])
    single = _single_var(valid.start)
    rows = min(valid.width, shape[0])
    if single is False:
        r = min(max(valid.total - valid.start.const, 0), rows)
        return _nonempty([box(base, _loop_dims(loops, coeff) + _rows(shape, strides, r))])
    if single is None or single[1] < 0:
        return None
    u, b = single
    u_full, u_zero = _split_rows(valid.total, valid.start.const, b, u.count, rows)
    if u_zero - u_full > MAX_PIECES:
        return None
    partial = [(k, valid.total - valid.start.const - b * k) for k in range(u_full, u_zero)]
    others = [v for v in loops if v != u]
    out = [box(base, [(u_full, coeff.get(u, 0))] + _loop_dims(others, coeff)
               + _rows(shape, strides, rows))]
    out += [box(base + coeff.get(u, 0) * k, _loop_dims(others, coeff) + _rows(shape, strides, r))
            for k, r in partial]
    return _nonempty(out)


def _rows(shape, strides, r: int) -> list[tuple[int, int]]:
    return [(r, strides[0])] + list(zip(shape[1:], strides[1:]))


def _loop_dims(loops, coeff) -> list[tuple[int, int]]:
    return [(v.count, coeff.get(v, 0)) for v in loops]


def _trips(loops) -> bool:
    """True when a loop runs a trip count known at run time only (``Var.trips``): the
    closed forms assume every iteration of ``count`` runs."""
    return any(v.trips is not None for v in loops)


def running(loops, env, n: int) -> np.ndarray:
    """[n] mask of the points of ``env`` (an iteration space of ``loops``) whose every
    loop variable is below its loop's run-time trip count."""
    alive = np.ones(n, bool)
    for v in loops:
        if v.trips is not None:
            alive &= np.broadcast_to(np.asarray(env[v]) < v.running(env), (n,))
    return alive


def _nonempty(boxes) -> list[Box]:
    return [b for b in boxes if b is not None]


def lane_sum(lanes: ir.Lanes | None, width: int, loops) -> int | None:
    """Σ over the iterations of ``loops`` of the lanes a vector of ``width`` lanes holds
    (``lanes`` valid ones, or all ``width``). None: no closed form."""
    if _trips(loops):
        return None
    if lanes is None:
        return width * ir.points(loops)
    if any(not isinstance(a, ir.Var) for a, _ in lanes.start.terms):
        return None
    used = set(lanes.start.vars)
    if not used <= set(loops):
        return None
    free = ir.points(tuple(v for v in loops if v not in used))
    # The starts over the used loops, coalesced (a bijection of their index points, so the
    # multiset of starts is kept): one (count, stride) dim means c, c + b, c + 2b, ... once.
    if any(v.count == 0 for v in loops):
        return 0
    coeff = dict(lanes.start.terms)
    canon = box(0, [(v.count, coeff[v]) for v in loops if v in used])
    c = lanes.start.const + canon.base
    w = min(lanes.width, width)
    if not canon.dims:
        return free * min(max(lanes.total - c, 0), w)
    if len(canon.dims) != 1:
        return None
    (n, b), = canon.dims
    u_full, u_zero = _split_rows(lanes.total, c, b, n, w)
    k = u_zero - u_full  # the partial ones: Σ (total - c - b·u) over u_full <= u < u_zero
    return free * (u_full * w + k * (lanes.total - c) - b * (u_full + u_zero - 1) * k // 2)


def append_pushes(st: ir.Append, loops) -> tuple[tuple[ir.Var, ...], int | None]:
    """(the loops that select the append's subtensor, the lanes pushed into each
    subtensor, or None when they vary from one subtensor to another or have no closed
    form)."""
    keys = tuple(v for v in loops if v in set(st.dst.offset.vars))
    inner = tuple(v for v in loops if v not in keys)
    if st.valid is not None and set(st.valid.start.vars) & set(keys):
        return keys, None
    return keys, lane_sum(st.valid, st.src.size, inner)


def append_writes(st: ir.Append, loops) -> list[Box] | None:
    """The offsets an Append writes: per subtensor, its first ``min(pushed, size)``
    elements in row-major order. None: no closed form."""
    keys, pushed = append_pushes(st, loops)
    if pushed is None or any(not isinstance(a, ir.Var) for a, _ in st.dst.offset.terms):
        return None
    coeff = dict(st.dst.offset.terms)
    key_dims = _loop_dims(keys, coeff)
    base = st.dst.layout.offset + st.dst.offset.const
    return _nonempty([box(p.base, key_dims + list(p.dims))
                      for p in prefix(base, st.dst.shape, st.dst.layout.strides, pushed)])


def enumerate_writes(st, loops, limit: int) -> np.ndarray | None:
    """Every offset ``st`` writes, by evaluating its loop nest; None when the loops that
    matter have more than ``limit`` iterations."""
    if isinstance(st, ir.Append) or _trips(loops):
        used = tuple(loops)
    else:
        valid = getattr(st, "valid", None)
        names = set(st.dst.offset.vars) | (set(valid.start.vars) if valid else set())
        used = tuple(v for v in loops if v in names)
    if ir.points(used) * max(st.dst.size, 1) > limit:
        return None
    env = ir.iteration_space(used)
    n = ir.points(used)
    base = np.broadcast_to(np.asarray(st.dst.offset.eval(env), np.int64), (n,))
    offs = st.dst.element_offsets()
    alive = running(used, env, n)
    if isinstance(st, ir.Append):
        want = np.broadcast_to(np.asarray(st.valid.eval(env)) if st.valid is not None
                               else st.src.size, (n,)).astype(np.int64) * alive
        keys = tuple(v for v in loops if v in set(st.dst.offset.vars))
        per_key = want.reshape(ir.points(keys), -1).sum(axis=1)
        first = base.reshape(ir.points(keys), -1)[:, 0]
        live = np.arange(offs.size)[None, :] < per_key[:, None]
        return (first[:, None] + offs[None, :])[live]
    valid = getattr(st, "valid", None)
    pos = base[:, None] + offs[None, :]
    if valid is None:
        return pos[alive].reshape(-1)
    rows = np.broadcast_to(np.asarray(valid.eval(env), np.int64), (n,)) * alive
    inner = max(1, st.dst.size // (st.dst.shape[0] if st.dst.shape else 1))
    return pos[(np.arange(offs.size) // inner)[None, :] < rows[:, None]]
