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
from .api import KerArgSpaceT, KerArgT, KerIter, _counted, _space, integer, kerarg


@dataclass(frozen=True)
class IterSpaceT:
    """One space of a kernel's iteration: ``kind`` "tiled" (the tool chooses its tiles),
    "fixed" (``dim`` items, one per iteration) or "par" (``dim`` items the tool may group
    into tiles of a multiple of ``pref``; whole when everything fits)."""

    space: KerIter
    kind: str
    dim: int = 0
    pref: int = 1


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
