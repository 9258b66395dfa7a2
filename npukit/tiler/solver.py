"""Choosing tile sizes under an L1 budget (the GAP AutoTiler).

Every tiled argument is cut into the same number of tiles ``n`` along its tiled dimension
(rows for horizontal tiling, columns for vertical). Arguments may differ in extent: with
``E_a = extent_a - overlap_a`` and ``E = min_a E_a``, argument ``a`` moves ``k_a = E_a / E``
lines per reference line, so for a reference tile of ``T`` lines its tiles hold
``k_a·T + overlap_a`` lines and tile ``i`` starts at line ``k_a·T·i``. All tiles but the
last hold ``T`` reference lines; the last holds ``E - (n-1)·T``.

L1 holds, in declaration order (each start aligned to 4 bytes): every argument moved by
DMA (one slot, two when multi-buffered and its data changes during the kernel), untiled
arguments and buffers whole, one-tile buffers as one tile, and dyn-tile buffers as one line
per tile — a fixed point, since the tile count depends on the tile size. The solver picks
the largest ``T`` whose tiles satisfy every constraint (even, odd, preferred multiple, one
tile) and whose L1 footprint fits the budget. Vertical tiles of DMA'd arguments divide
the width exactly, so every L1 tile keeps the same row pitch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..errors import TilingError
from .api import (
    KER_IN_PLANE,
    KER_OUT_PLANE,
    KER_TILE,
    OBJ_CONSTRAINTS_EVEN,
    OBJ_CONSTRAINTS_ODD,
    OBJ_CONSTRAINTS_ONEPREFTILE,
    OBJ_CONSTRAINTS_TILE_HOR,
    OBJ_CONSTRAINTS_TILE_VER,
    TILE_HOR,
    KerArgT,
    Obj,
)

ALIGN = 4


@dataclass(frozen=True)
class ArgPlacement:
    """Where an argument lives in L1: byte ``offset``, ``size`` bytes per slot, ``slots``."""

    offset: int
    size: int
    slots: int


@dataclass(frozen=True)
class ArgGeometry:
    """How one argument is cut: ``lines`` per full tile and in the last tile, ``step``
    lines between tile starts, bytes per ``line``, and whether it is tiled at all."""

    arg: KerArgT
    horizontal: bool
    tiled: bool
    k: int
    lines: int
    last_lines: int
    step: int
    line_elems: int
    extent: int  # lines in the whole plane
    iterators: tuple  # kernel iterators its data varies with
    planes: int


@dataclass(frozen=True)
class Tiling:
    """The solved tiling of a user kernel."""

    kernel: str
    n_tiles: int
    tile: int
    last_tile: int
    args: Mapping[str, ArgPlacement]
    geometry: Mapping[str, ArgGeometry]
    l1_used: int
    l1_budget: int

    def __str__(self) -> str:
        lines = [(f"{self.kernel}: {self.n_tiles} tiles of {self.tile} lines (last "
                  f"{self.last_tile}), L1 {self.l1_used} of {self.l1_budget} B")]
        for name, p in self.args.items():
            lines.append(f"  {name:<10} offset {p.offset:>6}  {p.size:>6} B x {p.slots}")
        return "\n".join(lines)


def moves(a: KerArgT) -> bool:
    """Arguments with a home outside L1 are moved by DMA; buffers live in L1 only."""
    return not a.has(Obj.O_BUFF)


def arg_iterators(a: KerArgT, order: tuple) -> tuple:
    """The kernel iterators an argument's data changes with."""
    its = []
    if a.has(Obj.O_TILED) and not a.has(Obj.O_DYNTILE):
        its.append(KER_TILE)
    if a.has(Obj.O_4D):
        its += [KER_IN_PLANE, KER_OUT_PLANE]
    elif a.has(Obj.O_3D):
        its.append(KER_IN_PLANE if a.has(Obj.O_IN) or not a.has(Obj.O_OUT) else KER_OUT_PLANE)
    return tuple(i for i in order if i in its)


def solve(name: str, kerargs: tuple[KerArgT, ...], orientation: str, order: tuple,
          counts: Mapping, budget: int) -> Tiling:
    """Pick the tile size for a user kernel; ``counts`` maps in/out-plane iterators to Nip
    and Nop."""
    if budget < 1:
        raise TilingError(f"{name}: L1 budget must be positive, got {budget}")
    geo0 = {a.KerArgName: _orient(a, orientation) for a in kerargs}
    tiled = [a for a in kerargs if a.has(Obj.O_TILED) and not a.has(Obj.O_DYNTILE)]
    if not tiled:
        return _fit(name, kerargs, geo0, order, counts, budget, None, None, [1])
    eff = {a.KerArgName: _extent(a, geo0[a.KerArgName]) - a.TileOverlap for a in tiled}
    for a in tiled:
        if eff[a.KerArgName] < 1:
            raise TilingError(f"{name}: argument {a.KerArgName!r} has overlap {a.TileOverlap}, "
                              f"not smaller than its extent {eff[a.KerArgName] + a.TileOverlap}")
    ref = min(eff.values())
    for n, e in eff.items():
        if e % ref:
            raise TilingError(f"{name}: argument {n!r} spans {e} lines, not a multiple of the "
                              f"reference extent {ref}: tiles cannot stay in proportion")
    ks = {n: e // ref for n, e in eff.items()}
    one_tile = any(a.Constraint & OBJ_CONSTRAINTS_ONEPREFTILE for a in tiled)
    sizes = [ref] if one_tile else range(ref, 0, -1)
    if any(moves(a) and not geo0[a.KerArgName] for a in tiled):
        # A vertical tile is a block of columns stored densely in L1: a narrower last tile
        # would change its row pitch, so vertical tiles divide the width exactly.
        sizes = [t for t in sizes if ref % t == 0]
    return _fit(name, kerargs, geo0, order, counts, budget, ref, ks, sizes)


def _orient(a: KerArgT, orientation: str) -> bool:
    if a.Constraint & OBJ_CONSTRAINTS_TILE_VER:
        return False
    if a.Constraint & OBJ_CONSTRAINTS_TILE_HOR:
        return True
    return orientation == TILE_HOR


def _extent(a: KerArgT, horizontal: bool) -> int:
    return a.H if horizontal else a.W


def _admissible(a: KerArgT, lines: int) -> bool:
    c = a.Constraint
    if c & OBJ_CONSTRAINTS_EVEN and lines % 2:
        return False
    if c & OBJ_CONSTRAINTS_ODD and not lines % 2:
        return False
    return not (a.PreferedTileSize and lines % a.PreferedTileSize)


def _layout(kerargs, geo0, order, counts, ref, ks, t) -> tuple[dict, dict, int]:
    """Geometry and L1 placement of every argument for reference tile size ``t``."""
    n = 1 if ref is None else math.ceil(ref / t)
    last = None if ref is None else ref - (n - 1) * t
    geometry, places, offset = {}, {}, 0
    for a in kerargs:
        hor = geo0[a.KerArgName]
        line = (a.W if hor else a.H)
        its = arg_iterators(a, order)
        planes = math.prod(counts.get(i, 1) for i in its if i != KER_TILE)
        if a.has(Obj.O_DYNTILE):
            g = ArgGeometry(a, hor, False, 1, n, n, 1, line, n, its, planes)
        elif a.has(Obj.O_TILED):
            k = ks[a.KerArgName]
            g = ArgGeometry(a, hor, True, k, k * t + a.TileOverlap, k * last + a.TileOverlap,
                            k * t, line, _extent(a, hor), its, planes)
        else:
            ext = _extent(a, hor)
            g = ArgGeometry(a, hor, False, 1, ext, ext, 0, line, ext, its, planes)
        geometry[a.KerArgName] = g
        size = g.lines * line * a.ItemSize
        accesses = planes * (n if KER_TILE in its else 1)
        slots = 2 if a.has(Obj.O_DB) and accesses > 1 and (moves(a) or a.has(Obj.O_ONETILE)) else 1
        offset = -(-offset // ALIGN) * ALIGN
        places[a.KerArgName] = ArgPlacement(offset, size, slots)
        offset += size * slots
    return geometry, places, offset


def _fit(name, kerargs, geo0, order, counts, budget, ref, ks, sizes) -> Tiling:
    smallest = None
    for t in sizes:
        geometry, places, used = _layout(kerargs, geo0, order, counts, ref, ks, t)
        n = 1 if ref is None else math.ceil(ref / t)
        if n > 1 and not all(_admissible(g.arg, g.lines) for g in geometry.values() if g.tiled):
            continue
        if used <= budget:
            return Tiling(name, n, t if ref else 1, (ref - (n - 1) * t) if ref else 1,
                          MappingProxyType(places), MappingProxyType(geometry), used, budget)
        smallest = used if smallest is None else min(smallest, used)
    if ref is not None:
        geometry, places, _ = _layout(kerargs, geo0, order, counts, ref, ks, 1)
        for a in kerargs:
            p = places[a.KerArgName]
            if p.size * p.slots > budget:
                g = geometry[a.KerArgName]
                raise TilingError(
                    f"{name}: argument {a.KerArgName!r} can never fit: its smallest tile, "
                    f"{g.lines} line(s) of {g.line_elems} x {a.ItemSize} B = {p.size} B x "
                    f"{p.slots} slot(s), exceeds the L1 budget of {budget} B")
    need = f"; the smallest admissible tiling needs {smallest} B" if smallest else \
        "; no tile size satisfies the constraints"
    raise TilingError(f"{name}: nothing fits the L1 budget of {budget} B{need}")
