"""Choosing tile sizes under an L1 budget (the GAP AutoTiler).

The rules, in the order the solver applies them (docs/tiler.md gives the evidence for each,
from the AutoTiler's documentation and from files the real tool generated):

1. **Proportional tiles.** Every argument a tiled space cuts is cut into the same number of
   tiles. With ``E_a = extent_a + pad_top + pad_bottom - overlap_a`` lines and ``E =
   min_a E_a``, argument ``a`` moves ``k_a = E_a // E`` lines per reference line: a tile
   of ``T`` reference lines holds ``k_a·T + overlap_a`` lines and tile ``i`` starts at line
   ``k_a·T·i - pad_top``. A remainder ``E_a - k_a·E`` is refused unless the argument says
   ``OBJ_CONSTRAINTS_PAD_REM`` (its last tile takes it) or ``OBJ_CONSTRAINTS_DROP_REM``.
2. **Whole-object promotion.** Unless turned off (``SetKernelOpts(KER_OPT_NONE,
   KER_OPT_BUFFER_PROMOTE)``), when every argument fits L1 whole, every argument is one
   buffer: read once before the loops, written once after them.
3. **Tile sizes.** Constraints (even, odd, preferred multiple) apply to the lines a tile
   adds, ``k_a·T``, when there is more than one tile; ``OBJ_CONSTRAINTS_ONEPREFTILE`` keeps
   one tile. With one tiled space the largest admissible ``T`` that fits wins. With nested
   tiled spaces, a kernel of the older generation fixes the outer space first (the largest
   that fits with each inner one at two lines, or its smallest admissible size if larger),
   then the inner one. One of the newer generation shares the budget out between its
   tiled spaces (``_partition``): each space's share is in proportion to what its
   arguments take, each tiled one at the space's smallest size or largest preferred
   multiple in lines of its own (AutoTiler 3.0 adds 4 bytes per kernel argument), capped
   at what they take whole (3.0: plus 4 bytes per kernel argument for each of them), what
   the capped ones do not use going to the others in proportion; then, outermost first,
   each space takes the largest admissible size whose arguments (3.0: and 4 bytes per
   kernel argument) fit its share (what the outermost of three leaves goes to the next
   one). Parametric spaces (``IterParSpace``) stay whole unless nothing fits: the spaces
   are then cut from the innermost out, a parametric one to the largest multiple of its
   preferred divider that divides it and fits, the tiled ones together as above; plain
   dimensions take one item per iteration.
4. **Slots.** An argument moved by DMA takes one slot when it is single buffered or moved
   once in the whole kernel (the older generation, and the newer one from AutoTiler 4;
   AutoTiler 3.0 keeps a double-buffered one that moves once in its two or three slots),
   three when it is read and written (``OBJ_IN_OUT_DB``: the next tile comes in while the
   current one is computed and the previous one goes out), else two. Buffers
   (``O_BUFF``) are whole in L1 (one slot), one-tile buffers one tile, dyn-tile buffers
   one line per tile. A multi-slot argument's slots start 4-byte aligned.
5. **Placement.** Arguments are placed by tiled space, outermost first, in declaration
   order within one, each start 4-byte aligned; ``l1_used`` is the end of the last, rounded
   up to 4 bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from types import MappingProxyType

from ..errors import TilingError
from .api import (
    KER_IN_PLANE,
    KER_OUT_PLANE,
    KER_TILE,
    OBJ_CONSTRAINTS_DROP_REM,
    OBJ_CONSTRAINTS_EVEN,
    OBJ_CONSTRAINTS_ODD,
    OBJ_CONSTRAINTS_ONEPREFTILE,
    OBJ_CONSTRAINTS_PAD_REM,
    KerArgT,
    Obj,
)
from .spaces import Frame, Space

ALIGN = 4
_EVEN, _ODD = int(OBJ_CONSTRAINTS_EVEN), int(OBJ_CONSTRAINTS_ODD)
_OLD_ITERS = {"Tile0": KER_TILE, "InPlane": KER_IN_PLANE, "OutPlane": KER_OUT_PLANE}


def align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@dataclass(frozen=True)
class ArgPlacement:
    """Where an argument lives in L1: byte ``offset``, ``size`` bytes per slot, ``slots``,
    ``pitch`` bytes from one slot to the next (``size`` rounded up to 4 when there are
    several slots)."""

    offset: int
    size: int
    slots: int
    pitch: int = 0

    @property
    def footprint(self) -> int:
        return self.size if self.slots == 1 else self.pitch * self.slots


@dataclass(frozen=True)
class SpaceTiling:
    """A space solved: ``extent`` reference lines (tiled) or items, ``tile`` per full tile,
    ``count`` tiles (iterations), ``last`` in the last one."""

    key: str
    kind: str
    extent: int
    tile: int
    count: int
    last: int


@dataclass(frozen=True)
class ArgGeometry:
    """How one argument is cut. ``residency``: "tile" (tiles move through its slots),
    "whole" (the whole argument sits in L1), "onetile" (an L1 buffer of one tile) or "dyn"
    (one line per tile); ``tiled``: tiles of it move or sit in L1 (its tile pointer walks
    its tiled space). For the line dimension: ``k`` lines per reference line, ``lines``
    per full tile and ``last_lines`` in the last (virtual lines: pads included), ``step``
    lines between tile starts, ``pad`` (top, bottom) virtual lines outside the plane,
    ``extent`` real lines. ``tile_shape`` / ``last_shape``: the L1 tile, dense, outer to
    inner, in elements. ``loops``: the kernel spaces its accesses are counted over (outer
    to inner), ``accesses`` their product."""

    arg: KerArgT
    frame: Frame
    residency: str
    horizontal: bool
    tiled: bool
    k: int
    lines: int
    last_lines: int
    step: int
    pad: tuple[int, int]
    extent: int
    line_elems: int
    tile_shape: tuple[int, ...]
    last_shape: tuple[int, ...]
    loops: tuple[str, ...]
    accesses: int
    iterators: tuple = ()  # the older generation's names of its spaces (compatibility)
    planes: int = 1
    tiles: tuple[tuple[int, int, int, int], ...] = ()  # per tile: see ``line_tiles``


@dataclass(frozen=True)
class Tiling:
    """The solved tiling of a user kernel. ``n_tiles``, ``tile`` and ``last_tile`` are those
    of its first tiled space (1, 1, 1 without one); ``spaces`` has every space."""

    kernel: str
    n_tiles: int
    tile: int
    last_tile: int
    args: Mapping[str, ArgPlacement]
    geometry: Mapping[str, ArgGeometry]
    l1_used: int
    l1_budget: int
    spaces: Mapping[str, SpaceTiling] = field(default_factory=lambda: MappingProxyType({}))
    promoted: bool = False

    def __str__(self) -> str:
        tiles = ", ".join(f"{s.key} {s.count} x {s.tile} (last {s.last})"
                          for s in self.spaces.values() if s.kind != "fixed")
        lines = [f"{self.kernel}: {tiles or 'no tiled space'}, L1 {self.l1_used} of "
                 f"{self.l1_budget} B" + (", promoted to buffers" if self.promoted else "")]
        for name, p in self.args.items():
            lines.append(f"  {name:<10} offset {p.offset:>6}  {p.size:>6} B x {p.slots}"
                         f"  ({self.geometry[name].residency})")
        return "\n".join(lines)


def moves(a: KerArgT) -> bool:
    """Arguments with a home outside L1 are moved by DMA: every argument but the buffers,
    and buffers that are inputs or outputs (moved once, whole)."""
    return not a.has(Obj.O_BUFF) or a.has(Obj.O_IN) or a.has(Obj.O_OUT)


def residency(a: KerArgT, promoted: bool) -> str:
    if a.has(Obj.O_DYNTILE):
        return "dyn"
    if a.has(Obj.O_BUFF) and a.has(Obj.O_ONETILE):
        return "onetile" if not promoted else "whole"
    if promoted or a.has(Obj.O_BUFF):
        return "whole"
    return "tile"


@dataclass(frozen=True)
class Problem:
    """What the solver needs: the kernel's name, spaces (outer to inner), argument frames,
    budget, whether whole-object promotion is allowed, which API generation wrote the
    kernel ("old" or "new") and which AutoTiler version's rules apply ("3.0" or "4")."""

    name: str
    spaces: tuple[Space, ...]
    frames: tuple[Frame, ...]
    budget: int
    promote: bool = True
    style: str = "old"
    version: str = "4"


def solve(p: Problem) -> Tiling:
    """Pick every tiled space's tile size and place the arguments in L1."""
    # The tiling depends on everything but the kernel's name: a network's repeated layers,
    # and a layer built again under its own name after a trial (``_fewest_cycles``), are
    # solved once. A refusal (each begins "{name}: ") gets the kernel's name back; a problem
    # that is no value (a list in an argument) is solved each time.
    try:
        hash(p)
    except TypeError:
        return _solve(p)
    try:
        return replace(_solved(replace(p, name="")), kernel=p.name)
    except TilingError as exc:
        if str(exc).startswith(": "):
            raise type(exc)(f"{p.name}{exc}") from None
        raise


@lru_cache(maxsize=1 << 10)
def _solved(p: Problem) -> Tiling:
    return _solve(p)


def _solve(p: Problem) -> Tiling:
    if p.budget < 1:
        raise TilingError(f"{p.name}: L1 budget must be positive, got {p.budget}")
    ratios = _ratios(p)
    refs = {s.key: (min(e for e, _ in ratios[s.key].values()) if ratios.get(s.key) else 1)
            for s in p.spaces if s.kind == "tiled"}
    full = {key: ref for key, ref in refs.items()}
    if p.promote:
        whole = _layout(p, ratios, refs, full, promoted=True)
        if whole[2] <= p.budget:
            return _tiling(p, refs, full, whole, promoted=True)
    pars = {s.key: _par_sizes(s) for s in p.spaces if s.kind == "par"}
    # Before enumerating: an argument whose smallest tile, one slot of it, is over budget
    # fails every tiling (a huge tensor has millions of tile sizes to try).
    _never_fits(p, ratios, refs, {**{key: _smallest(p, ratios, key, refs[key]) for key in refs},
                                  **{key: c[-1] for key, c in pars.items()}}, one_slot=True)
    choices = {key: _sizes(p, ratios, key, refs[key]) for key in refs}
    choices.update(pars)
    smallest = None
    if _growing(p, choices):
        tiles, layout, smallest = _bisected(p, ratios, refs, choices)
        if tiles is not None:
            return _tiling(p, refs, tiles, layout, promoted=False)
    else:
        for tiles in _candidates(p, choices):
            layout = _layout(p, ratios, refs, tiles, promoted=False)
            if layout[2] <= p.budget:
                return _tiling(p, refs, tiles, layout, promoted=False)
            smallest = layout[2] if smallest is None else min(smallest, layout[2])
    _never_fits(p, ratios, refs, {k: (c[-1] if c else 1) for k, c in choices.items()})
    need = f"; the smallest admissible tiling needs {smallest} B" if smallest else \
        "; no tile size satisfies the constraints"
    raise TilingError(f"{p.name}: nothing fits the L1 budget of {p.budget} B{need}")


def _ratios(p: Problem) -> dict[str, dict[str, tuple[int, int]]]:
    """Per tiled space, per argument it cuts: (effective extent E_a, remainder allowed)."""
    out: dict[str, dict[str, tuple[int, int]]] = {}
    for f in p.frames:
        if f.tiled is None:
            continue
        a = f.arg
        pad_t, pad_b = _pads(f)
        eff = f.dims[f.line].extent + pad_t + pad_b - a.TileOverlap
        if eff < 1:
            raise TilingError(f"{p.name}: argument {a.KerArgName!r} has overlap {a.TileOverlap}, "
                              f"not smaller than its extent {eff + a.TileOverlap}")
        out.setdefault(f.tiled, {})[a.KerArgName] = (eff, a.Constraint)
    for key, args in out.items():
        ref = min(e for e, _ in args.values())
        for n, (e, c) in args.items():
            if e % ref and not c & (OBJ_CONSTRAINTS_PAD_REM | OBJ_CONSTRAINTS_DROP_REM):
                raise TilingError(f"{p.name}: argument {n!r} spans {e} lines, not a multiple of "
                                  f"the reference extent {ref} of {key}: tiles cannot stay in "
                                  f"proportion (OBJ_CONSTRAINTS_PAD_REM or DROP_REM accept a "
                                  f"remainder)")
    return out


def _pads(f: Frame) -> tuple[int, int]:
    """Virtual lines of padding before and after the line dimension."""
    left, right, top, bottom = f.arg.Pad
    return (top, bottom) if f.horizontal else (left, right)


def _sizes(p: Problem, ratios, key: str, ref: int) -> list[int]:
    """Admissible tile sizes of a tiled space, largest first (constraints hold on the lines
    each tile adds when there is more than one tile)."""
    frames = [f for f in p.frames if f.tiled == key]
    if any(f.arg.Constraint & OBJ_CONSTRAINTS_ONEPREFTILE for f in frames):
        return [ref]
    out = []
    for t in range(ref, 0, -1):
        if math.ceil(ref / t) == 1 or all(
                _admissible(f.arg, ratios[key][f.arg.KerArgName][0] // ref * t) for f in frames):
            out.append(t)
    return out


def _smallest(p: Problem, ratios, key: str, ref: int) -> int:
    """The smallest admissible tile size of a tiled space (the last of ``_sizes``; 1 when
    none is), found from 1 up."""
    frames = [f for f in p.frames if f.tiled == key]
    if any(f.arg.Constraint & OBJ_CONSTRAINTS_ONEPREFTILE for f in frames):
        return ref
    return next((t for t in range(1, ref + 1) if math.ceil(ref / t) == 1 or all(
        _admissible(f.arg, ratios[key][f.arg.KerArgName][0] // ref * t) for f in frames)), 1)


def _admissible(a: KerArgT, step: int) -> bool:
    c = int(a.Constraint)  # plain ints: IntFlag's & is slow, and this runs per tile size
    if c & _EVEN and step % 2:
        return False
    if c & _ODD and not step % 2:
        return False
    return not (a.PreferedTileSize and step % a.PreferedTileSize)


def _par_sizes(s: Space) -> list[int]:
    """Tiles of a parametric space, largest first: whole, then the multiples of its
    preferred divider that divide it."""
    return [s.count] + [t for t in range(s.count - 1, 0, -1)
                        if t % s.pref == 0 and s.count % t == 0]


def _candidates(p: Problem, choices: dict[str, list[int]]):
    """Tile sizes to try, best first (rule 3): the first that fits wins."""
    keys = [s.key for s in p.spaces if s.kind == "tiled"]
    if any(not choices[k] for k in keys):
        return
    if p.style == "old" and len(keys) > 1:
        yield from _outer_first(p, keys, choices, {})
        return
    # Innermost space first: a parametric space is cut only when the spaces inside it at
    # their smallest leave nothing that fits; nested tiled spaces share the budget out.
    order = [s.key for s in p.spaces if s.kind in ("tiled", "par")]
    sizes = {k: choices[k][0] for k in order}
    tiled_done = False
    for key in reversed(order):
        if key in keys:
            if tiled_done:
                continue
            tiled_done = True
            if len(keys) == 1:
                for t in choices[key]:
                    yield {**sizes, key: t}
            else:
                tiles = _partition(p, keys, choices, sizes)
                if tiles is not None:
                    yield tiles
            sizes.update({k: choices[k][-1] for k in keys})
        else:
            for t in choices[key]:
                yield {**sizes, key: t}
            sizes[key] = choices[key][-1]
    if not order:
        yield {}


def _growing(p: Problem, choices: dict[str, list[int]]) -> bool:
    """Whether the kernel's only space with a choice is one tiled space over which the L1
    bytes grow with the tile below the whole space: no padding, remainder taken by the last
    tile, one-line-per-tile buffer or alias among its arguments. A tile of ``t`` reference
    lines then holds ``min(k·t + overlap, extent)`` lines of each argument it cuts (the
    first tile's), in the same slots for every ``t`` that leaves two tiles or more."""
    if len(choices) != 1 or any(s.kind == "par" for s in p.spaces):
        return False
    key, = choices
    return len(choices[key]) > 2 and not any(
        f.arg.has(Obj.O_DYNTILE) or f.arg.Alias is not None or
        f.tiled == key and (any(_pads(f)) or f.arg.Constraint & OBJ_CONSTRAINTS_PAD_REM)
        for f in p.frames)


def _bisected(p: Problem, ratios, refs, choices: dict[str, list[int]]):
    """``_candidates``' first fit for a ``_growing`` kernel, found by bisection: the whole
    space (its arguments may move once, in one slot), else the largest smaller tile that
    fits. Returns (tiles, layout) or (None, None), and the fewest bytes seen (the smallest
    tile's, when none fits)."""
    key, = choices
    sizes = choices[key]

    def layout(i: int):
        return _layout(p, ratios, refs, {key: sizes[i]}, promoted=False)
    whole = layout(0)
    if whole[2] <= p.budget:
        return {key: sizes[0]}, whole, whole[2]
    least = layout(len(sizes) - 1)
    if least[2] > p.budget:
        return None, None, min(whole[2], least[2])
    lo, hi = 1, len(sizes) - 1  # sizes[hi] fits: find the first (the largest) that does
    found = least
    while lo < hi:
        mid = (lo + hi) // 2
        got = layout(mid)
        if got[2] <= p.budget:
            hi, found = mid, got
        else:
            lo = mid + 1
    return {key: sizes[hi]}, found, found[2]


def _partition(p: Problem, keys: list[str], choices, base: dict[str, int]):
    """The newer generation's nested tiled spaces (rule 3): the budget shared out between
    them, then each one's largest admissible size in its share, outermost first. ``base``
    holds the parametric spaces' sizes. None when a share cannot hold its space's
    smallest tile."""
    ratios, refs = _ratios(p), _refs(p)
    members = {k: [f for f in p.frames if f.group == k and f.arg.Alias is None] for k in keys}
    least = {k: choices[k][-1] for k in keys}
    geometry, smallest, _ = _layout(p, ratios, refs, {**base, **least}, promoted=False)
    _, whole, _ = _layout(p, ratios, refs, {**base, **refs}, promoted=False)
    outside = sum(align(smallest[f.arg.KerArgName].footprint) for f in p.frames
                  if f.group not in members and f.arg.Alias is None)
    per_arg = 4 * len(p.frames) if p.version == "3.0" else 0
    # A space's arguments at its smallest size or its largest preferred multiple, in lines
    # of their own (whatever lines each moves per reference line).
    lines = {k: max([least[k]] + [f.arg.PreferedTileSize for f in members[k]]) for k in keys}
    need = {k: sum(_need(geometry[f.arg.KerArgName], smallest[f.arg.KerArgName], lines[k])
                   for f in members[k]) + per_arg for k in keys}
    # Whole, a space takes at least its arguments' aligned slots.
    cap = {k: max(_raw(whole, members[k]) + per_arg * len(members[k]),
                  sum(align(whole[f.arg.KerArgName].footprint) for f in members[k]))
           for k in keys}
    share = _shares(need, cap, p.budget - outside)
    tiles, carry = dict(base), 0
    for i, k in enumerate(keys):
        inner = dict.fromkeys(keys[i + 1:], 1)  # a space's arguments do not walk inner ones
        avail = share[k] + carry
        t = _largest(p, {**tiles, **inner}, k, choices[k], members[k], avail - per_arg)
        if t is None:
            return None
        tiles[k] = t
        # What the outermost of three tiled spaces leaves goes to the next one in.
        _, places, _ = _layout(p, ratios, refs, {**tiles, **inner}, promoted=False)
        used = sum(align(places[f.arg.KerArgName].footprint) for f in members[k])
        carry = (avail - used) // ALIGN * ALIGN if i + 2 < len(keys) else 0
    return tiles


def _largest(p: Problem, tiles: dict[str, int], key: str, sizes: list[int], frames,
             room: int) -> int | None:
    """The largest of ``sizes`` (largest first) for space ``key`` at which the arguments
    ``frames`` take at most ``room`` bytes before alignment, by bisection: what they take
    grows with the size, but for the whole size (their slots may drop). None if none."""
    ratios, refs = _ratios(p), _refs(p)

    def fits(t: int) -> bool:
        _, places, _ = _layout(p, ratios, refs, {**tiles, key: t}, promoted=False)
        return _raw(places, frames) <= room
    if fits(sizes[0]):
        return sizes[0]
    lo, hi = 1, len(sizes)  # sizes[lo - 1] does not fit: find the first that does
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(sizes[mid]):
            hi = mid
        else:
            lo = mid + 1
    return sizes[lo] if lo < len(sizes) else None


def _shares(need: dict[str, int], cap: dict[str, int], budget: int) -> dict[str, int]:
    """Each space's share of ``budget`` in proportion to ``need``; a share over its ``cap``
    is cut to it and the excess goes to the others, in proportion (one pass)."""
    total = sum(need.values()) or 1
    first = {k: budget * n // total for k, n in need.items()}
    capped = {k for k in need if first[k] > cap[k]}
    excess = sum(first[k] - cap[k] for k in capped)
    rest = sum(n for k, n in need.items() if k not in capped)
    return {k: cap[k] if k in capped else math.floor(first[k] + excess * need[k] / rest)
            for k in need}


def _need(g: ArgGeometry, pl: ArgPlacement, lines: int) -> int:
    """Bytes an argument takes in its slots at ``lines`` of its own lines when tiles of it
    move (whatever lines it moves per reference line), else whole."""
    if g.residency != "tile" or not g.tiled:
        return pl.size * pl.slots
    return pl.size // g.tile_shape[g.frame.line] * lines * pl.slots


def _raw(places, frames) -> int:
    """Bytes the arguments ``frames`` take in their slots, before any alignment."""
    return sum(places[f.arg.KerArgName].size * places[f.arg.KerArgName].slots for f in frames)


def _outer_first(p, keys, choices, fixed):
    """The older generation: the outer space the largest that fits with each inner one at
    two lines (or its smallest admissible size, if larger), then the next one in."""
    if len(fixed) == len(keys):
        yield dict(fixed)
        return
    key = keys[len(fixed)]
    inner = {k: _at_least(choices[k], 2) for k in keys[len(fixed) + 1:]}
    for t in choices[key]:
        layout = _layout(p, _ratios(p), _refs(p), {**fixed, key: t, **inner}, promoted=False)
        if layout[2] <= p.budget or t == choices[key][-1]:
            yield from _outer_first(p, keys, choices, {**fixed, key: t})
            return


def _at_least(sizes: list[int], n: int) -> int:
    """The smallest admissible size of at least ``n`` (the smallest one, when all are less)."""
    return min((t for t in sizes if t >= n), default=sizes[0])


def _refs(p: Problem) -> dict[str, int]:
    ratios = _ratios(p)
    return {s.key: (min(e for e, _ in ratios[s.key].values()) if ratios.get(s.key) else 1)
            for s in p.spaces if s.kind == "tiled"}


def _space_tilings(p: Problem, refs, tiles) -> dict[str, SpaceTiling]:
    out = {}
    for s in p.spaces:
        if s.kind == "tiled":
            ref, t = refs[s.key], tiles[s.key]
            n = math.ceil(ref / t)
            out[s.key] = SpaceTiling(s.key, s.kind, ref, t, n, ref - (n - 1) * t)
        elif s.kind == "par":
            t = tiles.get(s.key, s.count)
            n = math.ceil(s.count / t)
            out[s.key] = SpaceTiling(s.key, s.kind, s.count, t, n, s.count - (n - 1) * t)
        else:
            out[s.key] = SpaceTiling(s.key, s.kind, s.count, 1, s.count, 1)
    return out


def _layout(p: Problem, ratios, refs, tiles, promoted: bool):
    """(geometry, placements, bytes used) for the given tile sizes."""
    sp = _space_tilings(p, refs, tiles)
    order = [s.key for s in p.spaces]
    tiled_order = [k for k in order if sp[k].kind == "tiled"]
    geometry = {f.arg.KerArgName: _geometry(p, f, sp, ratios, order, promoted) for f in p.frames}
    rank = {k: i for i, k in enumerate(tiled_order)}
    placed = sorted(p.frames, key=lambda f: rank.get(f.group, 0))
    places, offset = {}, 0
    for f in placed:
        if f.arg.Alias is not None:  # shares its target's memory (placed below)
            continue
        g = geometry[f.arg.KerArgName]
        size = math.prod(g.tile_shape) * f.elem + sum(f.arg.Buffers) * f.arg.ItemSize
        slots = _slots(f.arg, g, p.version if p.style == "new" else "4")
        offset = align(offset)
        pl = ArgPlacement(offset, size, slots, align(size) if slots > 1 else size)
        places[f.arg.KerArgName] = pl
        offset += pl.footprint
    for f in p.frames:
        if f.arg.Alias is not None:
            places[f.arg.KerArgName] = _aliased(p, f, geometry, places)
    places = {f.arg.KerArgName: places[f.arg.KerArgName] for f in p.frames}
    return geometry, places, align(offset)  # the real tool reports L1 used 4-byte aligned


def _aliased(p: Problem, f: Frame, geometry, places) -> ArgPlacement:
    """An aliased argument's placement: its target's, when it walks the same spaces and its
    tile fits the target's slot."""
    a, target = f.arg, places.get(f.arg.Alias)
    if target is None:
        raise TilingError(f"{p.name}: KerArgAliased {a.KerArgName!r} aliases {a.Alias!r}, which "
                          f"is not a placed argument of the kernel")
    g, tg = geometry[a.KerArgName], geometry[a.Alias]
    size = math.prod(g.tile_shape) * f.elem
    if g.frame.spaces != tg.frame.spaces or g.residency != tg.residency or size > target.size:
        raise TilingError(f"{p.name}: KerArgAliased {a.KerArgName!r} ({size} B per tile, spaces "
                          f"{g.frame.spaces}) does not fit the memory of {a.Alias!r} "
                          f"({target.size} B, spaces {tg.frame.spaces})")
    return target


def _slots(a: KerArgT, g: ArgGeometry, version: str) -> int:
    """Rule 4; ``version`` "3.0" keeps a double-buffered argument moved once in its slots."""
    if g.residency in ("whole", "dyn") or not a.has(Obj.O_DB):
        return 1
    if g.accesses == 1 and version != "3.0":
        return 1
    if g.residency == "onetile":
        return 2
    return 3 if a.has(Obj.O_IN) and a.has(Obj.O_OUT) else 2


def _geometry(p: Problem, f: Frame, sp: dict[str, SpaceTiling], ratios, order,
              promoted: bool) -> ArgGeometry:
    a = f.arg
    res = residency(a, promoted)
    line = f.dims[f.line]
    pad = _pads(f)
    k, lines, last, step, tiles = 1, line.extent, line.extent, 0, ((0, line.extent, 0,
                                                                     line.extent),)
    if f.tiled is not None:
        s = sp[f.tiled]
        eff = ratios[f.tiled][a.KerArgName][0]
        k = eff // s.extent
        lines, step = k * s.tile + a.TileOverlap, k * s.tile
        tiles = line_tiles(a, lines, step, s.count, k * s.last + a.TileOverlap,
                           eff - k * s.extent, pad, line.extent)
        last = tiles[-1][1]
    walks = f.tiled is not None and res in ("tile", "onetile")
    shape, last_shape = [], []
    for i, d in enumerate(f.dims):
        if res == "whole" or d.space is None:
            full = part = d.extent
        elif i == f.line:
            full, part = max(t[3] for t in tiles), tiles[-1][3]
        elif sp[d.space].kind == "par":
            full, part = sp[d.space].tile, sp[d.space].last
        else:
            full = part = 1
        shape.append(full)
        last_shape.append(part)
    row = math.prod(d.extent for d in f.dims if d.role in ("row", "item"))
    # An argument whose own spaces have one tile each never changes: it moves once.
    its = f.spaces if res == "tile" and math.prod(sp[s].count for s in f.spaces) > 1 else ()
    if res == "dyn":
        n = sp[f.group].count if f.group in sp else 1
        shape = last_shape = [n, row]
        its = (f.group,) if f.group in sp else ()
    loops: tuple[str, ...] = ()
    if its:
        inner = max(order.index(s) for s in its)
        loops = tuple(order[: inner + 1])
    accesses = math.prod(sp[s].count for s in loops) if res == "tile" else 1
    planes = math.prod(sp[s].count for s in its if sp[s].kind != "tiled")
    return ArgGeometry(a, f, res, f.horizontal, walks, k, lines, last, step, pad, line.extent,
                       row, tuple(shape), tuple(last_shape), loops, accesses,
                       tuple(_OLD_ITERS[s] for s in its if s in _OLD_ITERS), planes, tiles)


def line_tiles(a: KerArgT, lines: int, step: int, n: int, last: int, rem: int,
               pad: tuple[int, int], extent: int) -> tuple[tuple[int, int, int, int], ...]:
    """Per tile of the line dimension: (virtual start, virtual lines, real start, real
    lines). Virtual lines count the padding; real ones are the plane's lines a tile moves.
    The last tile holds its share of the reference extent; with padding it reaches the
    padded extent's end (at most a full tile), with OBJ_CONSTRAINTS_PAD_REM it takes the
    remainder too."""
    return _line_tiles(lines, step, n, last + (rem if a.Constraint & OBJ_CONSTRAINTS_PAD_REM
                                               else 0), pad, extent)


# A pure function of ints: the solver's searches, a layer's arguments and a network's layers
# of the same shapes ask for the same tiles of lines again and again.
@lru_cache(maxsize=1 << 12)
def _line_tiles(lines: int, step: int, n: int, last: int, pad: tuple[int, int],
                extent: int) -> tuple[tuple[int, int, int, int], ...]:
    pad_t, pad_b = pad
    out = []
    for i in range(n):
        v = i * step
        if i < n - 1:
            c = lines
        elif sum(pad):
            c = min(lines, extent + pad_t + pad_b - v)
        else:
            c = last
        lo, hi = max(v - pad_t, 0), min(v - pad_t + c, extent)
        out.append((v, c, lo, max(hi - lo, 0)))
    return tuple(out)


def _tiling(p: Problem, refs, tiles, layout, promoted: bool) -> Tiling:
    geometry, places, used = layout
    sp = _space_tilings(p, refs, tiles)
    first = next((s for s in sp.values() if s.kind == "tiled"), None)
    n, t, last = (first.count, first.tile, first.last) if first else (1, 1, 1)
    if promoted:
        n, t, last = 1, (first.extent if first else 1), (first.extent if first else 1)
        sp = {k: (SpaceTiling(k, s.kind, s.extent, s.extent, 1, s.extent)
                  if s.kind == "tiled" else s) for k, s in sp.items()}
    return Tiling(p.name, n, t, last, MappingProxyType(places), MappingProxyType(geometry), used,
                  p.budget, MappingProxyType(sp), promoted)


def _never_fits(p: Problem, ratios, refs, smallest: dict[str, int],
                one_slot: bool = False) -> None:
    """An argument whose smallest tile alone is over budget is named with its numbers (with
    ``one_slot``, one slot of it: a bound no tiling can beat)."""
    geometry, places, _ = _layout(p, ratios, refs, smallest, promoted=False)
    for f in p.frames:
        pl, g = places[f.arg.KerArgName], geometry[f.arg.KerArgName]
        slots = 1 if one_slot else pl.slots
        if (pl.size if one_slot else pl.footprint) > p.budget:
            raise TilingError(
                f"{p.name}: argument {f.arg.KerArgName!r} can never fit: its smallest tile, "
                f"{g.tile_shape[f.line] if g.residency != 'dyn' else g.lines} line(s) of "
                f"{g.line_elems} x {f.elem} B = {pl.size} B x {slots} slot(s), exceeds the "
                f"L1 budget of {p.budget} B")
