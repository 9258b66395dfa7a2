"""Memory planning for a graph of layers, as the GAP AutoTiler's "AT Graph Tensors
Allocation" describes it. Pure functions of the graph's tensors, layers and budgets.

- An activation (a local) lives from the layer that writes it to the last layer that reads
  it. Locals live in the dynamic L2 area; each gets an offset that overlaps no local live at
  the same time. The area's size is the peak of the bytes live at once whenever the
  allocator reaches it (always for chains: successive tensors alternate between the
  bottom and the top of the area).
- When the dynamic area does not fit the L2 budget, locals move to L3 RAM, the largest
  first; a layer then streams them through L2 buffers of two tiles each ("staging"),
  reserved in the dynamic area while the layer runs. The plan is the first state of that
  sequence that fits every budget, so shrinking a budget never turns a refusal into a plan.
- Constants are promoted to the static L2 area in decreasing size while the L2 budget allows
  (unless promotion is disabled or capped), then to a static L3 RAM area within its budget
  (default 0); the rest stay in flash. A constant that is not promoted is fetched whole into
  the dynamic L2 area before its first use when space allows, as early as needed for the
  transfer to be covered by the layers in between (estimated cycles); otherwise its layers
  stream it from L3.
- The flash image holds every constant: the promoted ones first, at their static L2 offsets,
  then the others in decreasing size.

Offsets are aligned to ``ALIGN`` bytes; an area's size is the end of its last tensor.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

import numpy as np

from ..errors import CapacityError

ALIGN = 4


def _up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@dataclass(frozen=True)
class Tensor:
    """A graph tensor: ``kind`` "arg", "const" or "local"; ``l3`` forces it (an argument's
    home, a local's execution location) into L3."""

    name: str
    size: int
    kind: str
    l3: bool = False


@dataclass(frozen=True)
class Layer:
    """A layer: the tensors it reads and writes, and the L2 staging bytes each needs when it
    is streamed from L3 (two tiles, from the layer's tiling)."""

    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    staging: Mapping[str, int]

    @property
    def operands(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.reads + self.writes))


@dataclass(frozen=True)
class Budgets:
    l2: int
    l3: int
    flash: int
    l2_static: int | None = None  # AT_GRAPH_L2_STATIC_MEMORY_BUDGET
    l3_static: int = 0  # AT_GRAPH_L3_STATIC_MEMORY_BUDGET
    promote: bool = True  # not AT_GRAPH_DISABLE_CONST_L2_PROMOTION
    fetch: bool = True  # not AT_GRAPH_CONST_EXEC_FROM_FLASH


@dataclass(frozen=True)
class Placement:
    """Where a tensor lives: ``memory`` "L2", "L3", "L3_FLASH" or "ARG"; ``area`` "static"
    or "dynamic" (L2 and L3 RAM); ``offset`` in that area (in the flash image for a constant
    left in flash); ``size`` its bytes; ``flash`` its offset in the flash image (constants);
    ``live`` the first and last layer using it. A graph's tensors (``GraphTensor``) are
    placements with their C declaration added."""

    name: str
    memory: str
    area: str | None
    offset: int | None
    size: int
    flash: int | None
    live: tuple[int, int]


@dataclass(frozen=True)
class Fetch:
    """A constant copied whole from ``source`` (its L3 home) into the dynamic L2 area at
    ``offset``, issued before layer ``at`` and live until ``until``."""

    tensor: str
    source: str
    at: int
    until: int
    offset: int
    size: int


@dataclass(frozen=True)
class Area:
    static: int = 0
    dynamic: int = 0
    budget: int = 0

    @property
    def total(self) -> int:
        return self.static + self.dynamic


@dataclass(frozen=True)
class Plan:
    tensors: Mapping[str, Placement]
    memory: Mapping[str, Area]
    promoted: tuple[str, ...]  # constants copied into static L2 (then L3) by the constructor
    fetches: tuple[Fetch, ...]
    streamed: tuple[frozenset[str], ...]  # per layer: operands streamed from L3
    staging: tuple[tuple[int, int], ...]  # per layer: (offset, bytes) in the dynamic L2 area


# -- interval allocation -----------------------------------------------------------------

@dataclass(frozen=True)
class Item:
    key: str
    first: int
    last: int
    size: int


def peak(items: list[Item]) -> int:
    """The most bytes live at once (sizes rounded to the alignment)."""
    if not items:
        return 0
    # Bytes live at each layer: an item adds its bytes from its first layer to its last
    # (the items read in one pass: a graph's plan takes the peak of ~1,000 items ~1,000 times).
    first, last, size = np.array([(it.first, it.last, it.size) for it in items], np.int64).T
    size = -(-size // ALIGN) * ALIGN  # _up
    diff = np.zeros(int(max(last.max(), first.max())) + 2, np.int64)
    np.add.at(diff, first, size)
    np.add.at(diff, last + 1, -size)
    return max(0, int(np.cumsum(diff).max()))


def least(items: list[Item]) -> int:
    """The fewest bytes an allocation of ``items`` can take (a lower bound of ``allocate``'s
    size): the items live at the peak lie at aligned offsets without overlapping, so all but
    the highest take their aligned size."""
    return peak(items) - (ALIGN - 1)


@dataclass(frozen=True)
class Allocation:
    """One run of ``allocate``: the items in the order placed, the offset and end of each,
    the cap (the peak), and after each item the items placed that may still be live. A run
    over items that differ in a few places (``allocate(items, base=...)``) starts again at
    the first difference and takes this run's placements from where its state meets this
    one's again."""

    order: tuple[Item, ...]
    offsets: tuple[int, ...]
    ends: tuple[int, ...]
    cap: int
    states: tuple[tuple[tuple[Item, int], ...], ...]

    @property
    def size(self) -> int:
        return max(self.ends, default=0)


def allocate(items: list[Item], limit: int | None = None,
             base: Allocation | None = None) -> tuple[dict[str, int], int]:
    """Offsets for items live over inclusive layer ranges, no two live at once overlapping;
    returns (offsets, size). Items are placed by start time within the peak, each on the
    side (bottom or top) opposite to the last placed item it overlaps in time; what cannot
    be placed within the peak goes at the lowest free offset above. With ``limit``, stops
    as soon as the size passes it (the offsets so far, a size over ``limit``); ``base``: a
    run over similar items to resume (``run``)."""
    got, size = run(items, limit, base)
    if got is None:
        return {}, size
    return {it.key: o for it, o in zip(got.order, got.offsets)}, size


def run(items: list[Item], limit: int | None = None, base: Allocation | None = None,
        cap: int | None = None) -> tuple[Allocation | None, int]:
    """``allocate``'s run: (the Allocation, its size), or (None, a size over ``limit``) when
    it stops there. ``cap``: ``peak(items)``, when known."""
    order = tuple(sorted((i for i in items if i.size > 0),
                         key=lambda i: (i.first, -i.size, i.key)))
    cap = peak(items) if cap is None else cap
    offsets: list[int] = []
    ends: list[int] = []
    states: list[tuple[tuple[Item, int], ...]] = []
    placed: list[tuple[Item, int]] = []
    start, same_tail, top = 0, 0, 0
    if base is not None and base.cap == cap:
        n = min(len(order), len(base.order))
        while start < n and order[start] == base.order[start]:
            start += 1
        if start == len(order) == len(base.order):
            return base, base.size
        while same_tail < n - start and order[-1 - same_tail] == base.order[-1 - same_tail]:
            same_tail += 1
        offsets, ends = list(base.offsets[:start]), list(base.ends[:start])
        states = list(base.states[:start])
        placed = list(states[-1]) if start else []
        top = max(ends, default=0)
    else:
        base = None
    shift = len(base.order) - len(order) if base is not None else 0
    for j in range(start, len(order)):
        it = order[j]
        placed, off = _place(placed, it, cap)
        offsets.append(off)
        ends.append(off + it.size)
        states.append(tuple(placed))
        top = max(top, off + it.size)
        if limit is not None and top > limit:
            return None, top
        # Past the last difference, the base's run goes on as this one would once the
        # items that may still be live lie where they lie in it.
        if base is not None and j + 1 < len(order) and j + 1 >= len(order) - same_tail:
            after = order[j + 1].first
            before = base.states[j + shift] if j + shift >= 0 else ()
            # (Whole items: a stream buffer or a fetched copy keeps its key as it changes.)
            if {(p, o) for p, o in placed if p.last >= after} == \
                    {(p, o) for p, o in before if p.last >= after}:
                rest = slice(j + shift + 1, None)
                offsets += base.offsets[rest]
                ends += base.ends[rest]
                states += base.states[rest]
                top = max(ends, default=0)
                if limit is not None and top > limit:
                    return None, top
                break
    return Allocation(order, tuple(offsets), tuple(ends), cap, tuple(states)), top


def _place(placed: list[tuple[Item, int]], it: Item, cap: int) -> tuple[list, int]:
    """One step of ``allocate``: item ``it`` placed among those ``placed`` before it;
    returns the items placed that may still be live, ``it`` included, and its offset."""
    size = _up(it.size)
    # Items come by first layer: one placed before overlaps this one unless it ended
    # before this one starts, and then it overlaps none of those to come.
    placed = [(p, o) for p, o in placed if p.last >= it.first]
    busy = [(o, o + _up(p.size)) for p, o in placed]
    free = _Gaps(busy, size)
    bottoms = sorted({0, *(hi for _, hi in busy)})
    tops = sorted({cap - size, *(_down(lo - size) for lo, _ in busy)}, reverse=True)
    low = next((o for o in bottoms if o + size <= cap and free(o)), None)
    high = next((o for o in tops if o + size <= cap and free(o)), None)
    last = max(placed, key=lambda po: (po[0].first, po[0].key), default=None)
    prefer_top = last is not None and last[1] + _up(last[0].size) / 2 <= cap / 2
    off = (high if high is not None else low) if prefer_top else \
        (low if low is not None else high)
    if off is None:
        off = next(o for o in bottoms if free(o))
    return placed + [(it, off)], off


class _Gaps:
    """Whether ``size`` bytes at an offset overlap none of the ``busy`` ranges: the ranges
    merged and sorted once, each offset looked up by bisection."""

    def __init__(self, busy: list[tuple[int, int]], size: int):
        merged: list[list[int]] = []
        for lo, hi in sorted(busy):
            if merged and lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        self.los = [lo for lo, _ in merged]
        self.his = [hi for _, hi in merged]
        self.size = size

    def __call__(self, o: int) -> bool:
        k = bisect.bisect_right(self.his, o)  # the first range ending after o
        return o >= 0 and (k == len(self.los) or o + self.size <= self.los[k])


def _down(n: int) -> int:
    return (n // ALIGN) * ALIGN


def _what(key: str, layers: list[Layer]) -> str:
    """An allocation item in words: a tensor, a fetched copy or a layer's stream buffers."""
    if key.startswith("@staging"):
        return f"the L3 stream buffers of {layers[int(key[8:])].name!r}"
    return f"the copy of {key[:-3]}" if key.endswith("@L2") else key


@dataclass(frozen=True)
class _Bytes:
    """A state's L2 bytes at each layer: its tensors' and fetched copies' (``spans``) and
    its layers' stream buffers (``stage``); ``peak(l2_items(s))`` is the most of their sum.
    The plan's steps update it (``_Planner._span``, ``_Planner._streams``) instead of
    building the items again."""

    spans: np.ndarray
    stage: np.ndarray

    def peak(self) -> int:
        return int((self.spans + self.stage).max(initial=0))


# -- the plan ------------------------------------------------------------------------------

@dataclass
class _State:
    l3_locals: set[str] = field(default_factory=set)
    l2_consts: list[str] = field(default_factory=list)  # promoted, in static order
    l3_consts: list[str] = field(default_factory=list)
    fetches: dict[str, tuple[int, int]] = field(default_factory=dict)  # const -> (at, until)


class _Planner:
    def __init__(self, name: str, tensors: list[Tensor], layers: list[Layer], budgets: Budgets,
                 estimate: Callable[[int], int] | None,
                 transfer: Callable[[int, str], int] | None):
        self.name, self.budgets = name, budgets
        self.tensors = {t.name: t for t in tensors}
        self.layers = layers
        self.estimate, self.transfer = estimate, transfer
        self.uses: dict[str, list[int]] = {t.name: [] for t in tensors}
        for i, layer in enumerate(layers):
            for t in layer.operands:
                self.uses[t].append(i)
        self.consts = [t.name for t in tensors if t.kind == "const" and self.uses[t.name]]
        self.locals = [t.name for t in tensors if t.kind == "local" and self.uses[t.name]]
        # Per tensor: the layers using it and the L2 staging bytes each takes to stream it.
        self._stage = {t: (np.array(u, np.int64),
                           np.array([_up(layers[i].staging.get(t, 0)) for i in u], np.int64))
                       for t, u in self.uses.items()}
        self._fits: dict[tuple, bool] = {}  # a state's key -> whether it fits
        self._base: Allocation | None = None  # the last L2 allocation run whole
        self._l3: dict[frozenset, int] = {}  # the locals in L3 -> their dynamic L3 bytes

    def live(self, t: str) -> tuple[int, int]:
        u = self.uses[t]
        return (min(u), max(u)) if u else (0, 0)

    # -- what a state costs ----------------------------------------------------------------

    def streamed(self, s: _State, i: int) -> frozenset[str]:
        out = set()
        for t in self.layers[i].operands:
            tt = self.tensors[t]
            if tt.kind == "arg" and tt.l3 or tt.kind == "local" and t in s.l3_locals:
                out.add(t)
            elif tt.kind == "const" and t not in s.l2_consts:
                at = s.fetches.get(t)
                if at is None or not at[0] <= i <= at[1]:
                    out.add(t)
        return frozenset(out)

    def staging(self, s: _State, i: int) -> int:
        return sum(_up(self.layers[i].staging.get(t, 0)) for t in self.streamed(s, i))

    def l2_items(self, s: _State, stage: np.ndarray | None = None) -> list[Item]:
        """State ``s``'s L2 items (``stage``: its layers' stream buffer bytes, when known)."""
        items = [Item(t, *self.live(t), self.tensors[t].size) for t in self.locals
                 if t not in s.l3_locals]
        items += [Item(f"{t}@L2", at, until, self.tensors[t].size)
                  for t, (at, until) in s.fetches.items()]
        sizes = [self.staging(s, i) for i in range(len(self.layers))] if stage is None else \
            stage.tolist()
        items += [Item(f"@staging{i}", i, i, n) for i, n in enumerate(sizes)]
        return items

    def l2_bytes(self, s: _State) -> _Bytes:
        """State ``s``'s L2 bytes at each layer, from scratch."""
        spans = np.zeros(len(self.layers), np.int64)
        for t in self.locals:
            if t not in s.l3_locals:
                first, last = self.live(t)
                spans[first:last + 1] += _up(self.tensors[t].size)
        for t, (at, until) in s.fetches.items():
            spans[at:until + 1] += _up(self.tensors[t].size)
        stage = np.array([self.staging(s, i) for i in range(len(self.layers))], np.int64)
        return _Bytes(spans, stage)

    def _span(self, b: _Bytes, t: str, first: int, last: int, sign: int) -> _Bytes:
        """``b`` with tensor ``t`` (or a copy of it) in L2 from layer ``first`` to ``last``
        (``sign`` 1) or no longer (-1)."""
        spans = b.spans.copy()
        spans[first:last + 1] += sign * _up(self.tensors[t].size)
        return _Bytes(spans, b.stage)

    def _streams(self, b: _Bytes, t: str, sign: int,
                 window: tuple[int, int] | None = None) -> _Bytes:
        """``b`` with tensor ``t``'s stream buffers added (``sign`` 1) or taken away (-1) at
        the layers using it, but those in ``window`` (the life of its fetched copy)."""
        idx, nbytes = self._stage[t]
        if window is not None:
            keep = (idx < window[0]) | (idx > window[1])
            idx, nbytes = idx[keep], nbytes[keep]
        stage = b.stage.copy()
        stage[idx] += sign * nbytes
        return _Bytes(b.spans, stage)

    def _unfetched(self, s: _State, b: _Bytes, t: str) -> _Bytes:
        """``b`` (state ``s``'s) without constant ``t``'s copy in L2 and its streams: the
        bytes of everything else, as when ``t`` is promoted."""
        window = s.fetches.get(t)
        if window is not None:
            b = self._span(b, t, *window, -1)
        return self._streams(b, t, -1, window)

    def _within(self, b: _Bytes, static: int) -> bool:
        """The necessary condition of ``fits`` that ``b`` decides: the least an allocation
        of the L2 items takes (``least``) within the L2 budget after ``static`` bytes."""
        return static + b.peak() - (ALIGN - 1) <= self.budgets.l2

    def l3_items(self, s: _State) -> list[Item]:
        return [Item(t, *self.live(t), self.tensors[t].size) for t in self.locals
                if t in s.l3_locals]

    def static(self, names: list[str]) -> int:
        off = 0
        for t in names:
            off = _up(off) + self.tensors[t].size
        return off

    def fits(self, s: _State, items: list[Item] | None = None) -> bool:
        """Whether state ``s`` fits every budget (``items``: its L2 items, when known)."""
        key = (frozenset(s.l3_locals), tuple(s.l2_consts), tuple(s.l3_consts),
               tuple(sorted(s.fetches.items())))
        got = self._fits.get(key)
        if got is None:
            b = self.budgets
            l3_dyn = self._l3.get(key[0])
            if l3_dyn is None:
                l3_dyn = self._l3[key[0]] = allocate(self.l3_items(s))[1]
            items = self.l2_items(s) if items is None else items
            static = self.static(s.l2_consts)
            got = self.static(s.l3_consts) + l3_dyn <= b.l3
            cap = peak(items) if got else 0
            got = got and static + cap - (ALIGN - 1) <= b.l2  # least(items): cap - (ALIGN - 1)
            if got:
                # Successive states differ in a few tensors: the last full run resumed.
                done, size = run(items, b.l2 - static, self._base, cap)
                self._base = done or self._base
                got = static + size <= b.l2
            self._fits[key] = got
        return got

    # -- the sequence of states, then improvements -----------------------------------------

    def plan(self) -> Plan:
        flash = self.static(sorted(self.consts, key=lambda t: -self.tensors[t].size))
        if flash > self.budgets.flash:
            raise CapacityError(f"graph {self.name!r}: its constants need {flash} B of flash "
                                f"({', '.join(self.consts)}), over the flash budget of "
                                f"{self.budgets.flash} B: {flash - self.budgets.flash} B missing")
        forced = {t for t in self.locals if self.tensors[t].l3}
        movable = sorted((t for t in self.locals if t not in forced),
                         key=lambda t: (-self.tensors[t].size, t))
        # A constant no bigger than its staging buffers is cheaper copied whole just before
        # its layers than streamed.
        jit = {t: self.live(t) for t in self.consts
               if self.tensors[t].size <= max(self.layers[i].staging.get(t, 0)
                                              for i in self.uses[t])} if self.budgets.fetch else {}
        states = [_State(forced | set(movable[:k]), fetches=dict(jit))
                  for k in range(len(movable) + 1)]
        # The first state that fits: the states whose L2 items surely do not fit (their
        # live bytes, updated as each local moves to L3, over the budget) are passed over.
        state, b = None, self.l2_bytes(states[0])
        for k, s in enumerate(states):
            if k:
                t = movable[k - 1]
                b = self._streams(self._span(b, t, *self.live(t), -1), t, 1)
            if self._within(b, 0) and self.fits(s, self.l2_items(s, b.stage)):
                state = s
                break
        if state is None:
            raise CapacityError(self._refusal(states))
        for t in reversed([t for t in movable if t in state.l3_locals]):
            trial = replace(state, l3_locals=state.l3_locals - {t})
            back = self._streams(self._span(b, t, *self.live(t), 1), t, -1)
            if self._within(back, 0) and self.fits(trial, self.l2_items(trial, back.stage)):
                state, b = trial, back
        state, b = self._promote(state, b)
        state = self._fetch(state, b)
        return self._result(state)

    def _refusal(self, states: list[_State]) -> str:
        b = self.budgets
        s = states[-1]  # everything that may go to L3 is there: the least L2
        items = self.l2_items(s)
        dyn = allocate(items)[1]
        l3 = allocate(self.l3_items(s))[1]
        if dyn > b.l2:
            t = max(range(len(self.layers)),
                    key=lambda i: sum(it.size for it in items if it.first <= i <= it.last))
            live = [f"{_what(it.key, self.layers)} {it.size} B"
                    for it in items if it.first <= t <= it.last and it.size]
            return (f"graph {self.name!r}: no memory plan fits the L2 budget of {b.l2} B: with "
                    f"every activation that can move in L3, layer {self.layers[t].name!r} "
                    f"still needs {dyn} B of dynamic L2 ({', '.join(live)}): "
                    f"{dyn - b.l2} B missing")
        s0 = states[0]
        need = allocate(self.l3_items(states[-1]))[1]
        return (f"graph {self.name!r}: no memory plan fits: the activations do not fit the L2 "
                f"budget of {b.l2} B (the dynamic area needs "
                f"{allocate(self.l2_items(s0))[1]} B with all of them in L2), and moving them "
                f"to L3 RAM needs {max(need, l3)} B of L3 ({', '.join(sorted(s.l3_locals))}), "
                f"over its budget of {b.l3} B: {max(need, l3) - b.l3} B missing")

    def _promote(self, s: _State, now: _Bytes) -> tuple[_State, _Bytes]:
        """Constants into static L2, the largest first, then static L3, while they fit;
        returns the state and its L2 bytes (``now``: ``s``'s)."""
        b = self.budgets
        order = sorted(self.consts, key=lambda t: (-self.tensors[t].size, t))
        if b.promote:
            for t in order:
                trial = replace(s, l2_consts=s.l2_consts + [t],
                                fetches={k: v for k, v in s.fetches.items() if k != t})
                static = self.static(trial.l2_consts)
                if b.l2_static is not None and static > b.l2_static:
                    continue
                after = self._unfetched(s, now, t)
                if self._within(after, static) and \
                        self.fits(trial, self.l2_items(trial, after.stage)):
                    s, now = trial, after
        for t in order:
            if t in s.l2_consts:
                continue
            trial = replace(s, l3_consts=s.l3_consts + [t])
            if self.static(trial.l3_consts) <= b.l3_static and \
                    self.fits(trial, self.l2_items(trial, now.stage)):
                s = trial
        return s, now

    def _fetch(self, s: _State, now: _Bytes) -> _State:
        """Each constant not promoted, by first use, fetched into dynamic L2 as late as still
        covers its transfer with the estimated cycles of the layers in between, among the
        starts that fit; else as early as fits (``now``: ``s``'s L2 bytes)."""
        if not self.budgets.fetch:
            return s
        rest = [t for t in self.consts if t not in s.l2_consts]
        for t in sorted(rest, key=lambda t: (self.live(t)[0], t)):
            first, last = self.live(t)
            source = "L3" if t in s.l3_consts else "L3_FLASH"
            need = self.transfer(self.tensors[t].size, source) if self.transfer else 0
            covered = first  # the latest start whose layers cover the transfer
            if self.estimate and need:
                covered, cycles = -1, 0
                for at in range(first - 1, -1, -1):
                    cycles += self.estimate(at)
                    if cycles >= need:
                        covered = at
                        break

            # The L2 items but this constant's copy do not depend on when it is fetched
            # (its layers read the copy whichever start), and the least an allocation takes
            # only grows as the copy starts earlier: the starts before the earliest within
            # the budget by that bound cannot fit.
            rest_b = self._unfetched(s, now, t)
            others = [it for it in self.l2_items(replace(s, fetches={**s.fetches,
                                                                     t: (first, last)}),
                                                 rest_b.stage)
                      if it.key != f"{t}@L2"]
            size, static = self.tensors[t].size, self.static(s.l2_consts)

            def items(at: int, t=t, last=last, size=size, others=others) -> list[Item]:
                return others + [Item(f"{t}@L2", at, last, size)]
            lo, hi = 0, first + 1  # the earliest start within that bound, by bisection
            while lo < hi:
                mid = (lo + hi) // 2
                if self._within(self._span(rest_b, t, mid, last, 1), static):
                    hi = mid
                else:
                    lo = mid + 1

            def fits(at: int, s=s, t=t, last=last, earliest=lo) -> bool:
                return at >= earliest and self.fits(
                    replace(s, fetches={**s.fetches, t: (at, last)}), items(at))
            # The latest covered start that fits; else the earliest start that fits (the
            # starts before a covered one are covered too).
            at = next((a for a in range(covered, lo - 1, -1) if fits(a)), None)
            if at is None:
                at = next((a for a in range(max(covered + 1, lo), first + 1) if fits(a)), None)
            if at is not None:
                s = replace(s, fetches={**s.fetches, t: (at, last)})
                now = self._span(rest_b, t, at, last, 1)
        return s

    def _result(self, s: _State) -> Plan:
        b = self.budgets
        l2_off, l2_dyn = allocate(self.l2_items(s))
        l3_off, l3_dyn = allocate(self.l3_items(s))
        places: dict[str, Placement] = {}
        flash_order = s.l2_consts + sorted((t for t in self.consts if t not in s.l2_consts),
                                           key=lambda t: (-self.tensors[t].size, t))
        flash, off = {}, 0
        for t in flash_order:
            off = _up(off)
            flash[t] = off
            off += self.tensors[t].size
        static = {}
        for names, mem in ((s.l2_consts, "L2"), (s.l3_consts, "L3")):
            off = 0
            for t in names:
                off = _up(off)
                static[t] = (mem, off)
                off += self.tensors[t].size
        for name, t in self.tensors.items():
            live = self.live(name)
            if t.kind == "arg":
                places[name] = Placement(name, "ARG", None, None, t.size, None, live)
            elif t.kind == "const":
                mem, o = static.get(name, ("L3_FLASH", flash.get(name)))
                area = "static" if name in static else None
                places[name] = Placement(name, mem, area, o, t.size, flash.get(name), live)
            elif name in s.l3_locals:
                places[name] = Placement(name, "L3", "dynamic", l3_off.get(name), t.size, None,
                                         live)
            else:
                places[name] = Placement(name, "L2", "dynamic", l2_off.get(name), t.size, None,
                                         live)
        fetches = tuple(Fetch(t, "L3" if t in s.l3_consts else "L3_FLASH", at, until,
                              l2_off[f"{t}@L2"], self.tensors[t].size)
                        for t, (at, until) in sorted(s.fetches.items(), key=lambda x: x[1]))
        n = len(self.layers)
        memory = {
            "L2": Area(self.static(s.l2_consts), l2_dyn, b.l2),
            "L3": Area(self.static(s.l3_consts), l3_dyn, b.l3),
            "L3_FLASH": Area(self.static(flash_order), 0, b.flash),
        }
        return Plan(MappingProxyType(places), MappingProxyType(memory),
                    tuple(s.l2_consts + s.l3_consts), fetches,
                    tuple(self.streamed(s, i) for i in range(n)),
                    tuple((l2_off.get(f"@staging{i}", 0), self.staging(s, i)) for i in range(n)))


def plan(name: str, tensors: list[Tensor], layers: list[Layer], budgets: Budgets,
         estimate: Callable[[int], int] | None = None,
         transfer: Callable[[int, str], int] | None = None) -> Plan:
    """The memory plan of a graph; ``estimate(i)`` gives layer ``i``'s cycles and
    ``transfer(bytes, source)`` a whole-tensor copy's cycles (both used to time fetches).
    ``CapacityError`` naming the layer, the tensors and the bytes missing when no plan fits.

    >>> t = [Tensor("x", 100, "arg"), Tensor("a", 400, "local"), Tensor("w", 1000, "const"),
    ...      Tensor("y", 100, "arg")]
    >>> L = [Layer("l0", ("x", "w"), ("a",), {"w": 64}), Layer("l1", ("a",), ("y",), {})]
    >>> p = plan("g", t, L, Budgets(l2=2000, l3=0, flash=4096))
    >>> p.tensors["w"].memory, p.memory["L2"].static, p.memory["L2"].dynamic
    ('L2', 1000, 400)
    """
    return _Planner(name, tensors, layers, budgets, estimate, transfer).plan()
