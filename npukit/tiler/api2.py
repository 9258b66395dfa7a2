"""The GAP AutoTiler's newer model generation: a user kernel's iteration space is a list of
spaces (``KernelIterSpace``) and each kernel argument names the spaces it walks
(``KerArgSpace``), as the GAP SDK's current generators (``CNN_Generators.c``,
``MatMultGenerator.c``) write their models. Both generations lower to the same tiler
internals (``npukit.tiler.spaces``) and the one IR.

>>> from npukit.tiler import *
>>> it = KernelIterSpace(2, IterTiledSpace(T1), IterTiledSpace(T0))
>>> [s.space.key for s in it.spaces]
['Tile1', 'Tile0']
>>> a = KerArg("M1", KerArgSpace(1, T1), O_IN | O_DB, 70, 200, 2, 0, 0, 0, "M1")
>>> a.Space, a.W, a.H
(('Tile1',), 70, 200)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import TilingError
from .api import KerArgT, KerIter, _counted, _kerarg, _pads, integer


@dataclass(frozen=True)
class IterSpaceT:
    """One space of a kernel's iteration: ``kind`` "tiled" (the tool chooses its tiles),
    "fixed" (``dim`` items, one per iteration) or "par" (``dim`` items the tool may group
    into tiles of a multiple of ``pref``; whole when everything fits)."""

    space: KerIter
    kind: str
    dim: int = 0
    pref: int = 1


def _space(what: str, IterSpace) -> KerIter:
    try:
        return KerIter(IterSpace)
    except ValueError:
        raise TilingError(f"{what}: {IterSpace!r} is not an iteration space (KER_ITER_TILE0.."
                          f"KER_ITER_TILE2, KER_ITER_D0..KER_ITER_D3)") from None


def IterTiledSpace(IterSpace: KerIter) -> IterSpaceT:
    """A tiled space over the basic data plane (``KER_ITER_TILE0`` .. ``KER_ITER_TILE2``)."""
    sp = _space("IterTiledSpace", IterSpace)
    if not sp.tiled:
        raise TilingError(f"IterTiledSpace({sp.name}): a tiled space is KER_ITER_TILE0..2")
    return IterSpaceT(sp, "tiled")


def _dim_space(what: str, IterSpace, Dim: int) -> tuple[KerIter, int]:
    sp = _space(what, IterSpace)
    if sp.tiled:
        raise TilingError(f"{what}({sp.name}, {Dim}): a tiled space takes IterTiledSpace")
    dim = integer(f"{what}({sp.name}, ...)", "Dim", Dim)
    if dim < 1:
        raise TilingError(f"{what}({sp.name}, {Dim}): the dimension must be >= 1")
    return sp, dim


def IterFixedSpace(IterSpace: KerIter, Dim: int) -> IterSpaceT:
    """A plain dimension of ``Dim`` items, one per iteration."""
    sp, dim = _dim_space("IterFixedSpace", IterSpace, Dim)
    return IterSpaceT(sp, "fixed", dim)


def IterParSpace(IterSpace: KerIter, Dim: int, PrefDiv: int) -> IterSpaceT:
    """A dimension of ``Dim`` items the tool may cut into tiles of a multiple of ``PrefDiv``
    (a parametric space; npukit keeps it whole, see docs/tiler.md)."""
    sp, dim = _dim_space("IterParSpace", IterSpace, Dim)
    pref = integer(f"IterParSpace({sp.name}, ...)", "PrefDiv", PrefDiv)
    if pref < 1:
        raise TilingError(f"IterParSpace({sp.name}, {Dim}, {PrefDiv}): PrefDiv must be >= 1")
    return IterSpaceT(sp, "par", dim, pref)


@dataclass(frozen=True)
class KernelIterSpaceT:
    spaces: tuple[IterSpaceT, ...]


def KernelIterSpace(*spaces) -> KernelIterSpaceT:
    """The kernel's iteration, outermost space first: ``KernelIterSpace(3, IterParSpace(D1,
    64, 8), IterTiledSpace(T0), IterParSpace(D0, 32, 2))``."""
    items = _counted("KernelIterSpace", spaces)
    for s in items:
        if not isinstance(s, IterSpaceT):
            raise TilingError(f"KernelIterSpace: give IterTiledSpace / IterFixedSpace / "
                              f"IterParSpace values, got {s!r:.60}")
    keys = [s.space for s in items]
    twice = sorted({k.name for k in keys if keys.count(k) > 1})
    if twice:
        raise TilingError(f"KernelIterSpace: {twice[0]} is listed twice")
    if not items:
        raise TilingError("KernelIterSpace: give at least one space")
    return KernelIterSpaceT(tuple(items))


@dataclass(frozen=True)
class KerArgSpaceT:
    spaces: tuple[KerIter, ...]


def KerArgSpace(*spaces) -> KerArgSpaceT:
    """The spaces a kernel argument walks, outer to inner; they order its dimensions in
    memory (``KerArgSpace(2, D1, T0)``: ``D1`` planes of the W x H data plane)."""
    items = tuple(_space("KerArgSpace", s) for s in _counted("KerArgSpace", spaces))
    if not items:
        raise TilingError("KerArgSpace: give at least one space")
    if len(set(items)) != len(items):
        raise TilingError(f"KerArgSpace{tuple(s.name for s in items)}: a space is listed twice")
    return KerArgSpaceT(items)


def _check_space(name: str, space) -> tuple[str, ...]:
    if not isinstance(space, KerArgSpaceT):
        raise TilingError(f"kernel argument {name!r}: the second argument is KerArgSpace(...), "
                          f"got {space!r:.60}")
    return tuple(s.key for s in space.spaces)


def kerarg(KerArgName: str, KerArgSpace: KerArgSpaceT, ObjType: int, W: int, H: int,
           ItemSize: int, TileOverlap: int = 0, Constraint: int = 0, PreferedTileSize: int = 0,
           CArgName: str | None = None) -> KerArgT:
    """``KerArg`` of the newer generation (what ``KerArg`` does given a ``KerArgSpace``)."""
    space = _check_space(KerArgName, KerArgSpace)
    return replace(_kerarg(KerArgName, ObjType, W, H, ItemSize, TileOverlap, Constraint,
                           PreferedTileSize, CArgName), Space=space)


def KerArgP(KerArgName: str, KerArgSpace: KerArgSpaceT, ObjType: int, W: int, H: int,
            UsedW: int, UsedH: int, PadTile, PadExec, ItemSize: int, TileOverlap: int = 0,
            Constraint: int = 0, PreferedTileSize: int = 0,
            CArgName: str | None = None) -> KerArgT:
    """A padded argument: tiles are cut as if ``PadTile`` (left, right, top, bottom) items
    surrounded the plane; lines outside it are not moved. ``UsedW`` x ``UsedH`` is the part
    the kernel reads."""
    a = kerarg(KerArgName, KerArgSpace, ObjType, W, H, ItemSize, TileOverlap, Constraint,
               PreferedTileSize, CArgName)
    used = (integer(f"KerArgP {KerArgName!r}", "UsedW", UsedW),
            integer(f"KerArgP {KerArgName!r}", "UsedH", UsedH))
    if not (0 < used[0] <= a.W and 0 < used[1] <= a.H):
        raise TilingError(f"KerArgP {KerArgName!r}: used {UsedW} x {UsedH} must lie in the "
                          f"{W} x {H} plane")
    _pads(f"KerArgP {KerArgName!r} PadExec", PadExec)
    return replace(a, Pad=_pads(f"KerArgP {KerArgName!r} PadTile", PadTile),
                   Used=used)


def KerArgPad(KerArgName: str, KerArgSpace: KerArgSpaceT, ObjType: int, W: int, H: int,
              BottomBuffer: int, TopBuffer: int, ItemSize: int, TileOverlap: int = 0,
              Constraint: int = 0, PreferedTileSize: int = 0,
              CArgName: str | None = None) -> KerArgT:
    """An argument whose L1 tile keeps ``BottomBuffer`` items before and ``TopBuffer`` after
    the data moved in (a delay line)."""
    what = f"KerArgPad {KerArgName!r}"
    buffers = (integer(what, "BottomBuffer", BottomBuffer), integer(what, "TopBuffer", TopBuffer))
    a = kerarg(KerArgName, KerArgSpace, ObjType, W, H, ItemSize, TileOverlap, Constraint,
               PreferedTileSize, CArgName)
    return replace(a, Buffers=buffers)


def KerArgAliased(KerArgName: str, KerArgSpace: KerArgSpaceT, Alias, ObjType: int, W: int,
                  H: int, ItemSize: int, TileOverlap: int = 0, Constraint: int = 0,
                  PreferedTileSize: int = 0, CArgName: str | None = None) -> KerArgT:
    """An argument that shares the L1 memory of another one: ``Alias`` is that argument's
    name or its position in ``KerArgs`` (the kernel writes its result where its input was)."""
    a = kerarg(KerArgName, KerArgSpace, ObjType, W, H, ItemSize, TileOverlap, Constraint,
               PreferedTileSize, CArgName)
    if not isinstance(Alias, (int, str)) or isinstance(Alias, bool):
        raise TilingError(f"KerArgAliased {KerArgName!r}: Alias is an argument's name or "
                          f"index, got {Alias!r}")
    return replace(a, Alias=Alias)


# Kernel options (SetKernelOpts) and inlining (SetInlineMode), as the AutoTiler names them.
KER_OPT_NONE, KER_OPT_BUFFER_PROMOTE, KER_OPT_PARTIAL_BUFFER_PROMOTE = 0, 1, 2
NEVER_INLINE, ALWAYS_INLINE, SINGLE_INLINE = 0, 1, 2
