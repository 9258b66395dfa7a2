"""The tiler's internal picture of a user kernel, shared by both API generations.

A kernel iterates over ``Space``s, outermost first: tiled spaces (``Tile0``.. ``Tile2``,
whose tile sizes the solver picks), plain dimensions (the older generation's out-, in- and
in-out planes, the newer ``IterFixedSpace``) and parametric dimensions (``IterParSpace``).
Each kernel argument has a ``Frame``: its dimensions in memory (outer to inner, in C
elements) and the space that walks each of them, if any. The older generation's
``KernelIterationOrder`` and object types (``O_3D``, ``O_4D``, ``O_TILE1``, ``KerArg2D``) and
the newer ``KernelIterSpace`` / ``KerArgSpace`` both come down to these.

>>> from npukit.tiler import *
>>> from npukit.tiler.spaces import kernel_spaces
>>> [s.key for s in kernel_spaces(KernelIterationOrder(KER_DIM4, KER_OUT_PLANE, KER_TILE,
...                                                    KER_IN_PLANE), KernelDimensions(3, 8, 8, 2))]
['OutPlane', 'Tile0', 'InPlane']
"""

from __future__ import annotations

from dataclasses import dataclass

from ..cdecl import parse_ctype
from ..errors import TilingError
from .api import (
    KER_IN_OUT_PLANE,
    KER_IN_PLANE,
    KER_OUT_PLANE,
    KER_TILE,
    KER_TILE1,
    OBJ_CONSTRAINTS_TILE_HOR,
    OBJ_CONSTRAINTS_TILE_VER,
    TILE_HOR,
    KerArgT,
    Obj,
)

# The older generation's iterators, as generated code names their loops.
OLD_KEYS = {KER_TILE: "Tile0", KER_TILE1: "Tile1", KER_OUT_PLANE: "OutPlane",
            KER_IN_PLANE: "InPlane", KER_IN_OUT_PLANE: "InOutPlane"}


@dataclass(frozen=True)
class Space:
    """One space of a kernel's iteration: ``kind`` "tiled" (its tile size is solved),
    "fixed" (``count`` items, one per iteration) or "par" (``count`` items, tiled by
    multiples of ``pref``; kept whole)."""

    key: str
    kind: str
    count: int = 0
    pref: int = 1


@dataclass(frozen=True)
class Dim:
    """One dimension of an argument in memory: ``extent`` elements; walked by kernel space
    ``space`` (None: whole in every tile); ``role`` "plane", "line" (the tiled dimension
    of the data plane), "row" (the other one) or "item" (the C elements of an item);
    ``step``: planes per iteration (NextPlaneUpdate)."""

    space: str | None
    extent: int
    role: str
    step: int = 1


@dataclass(frozen=True)
class Frame:
    """A kernel argument laid out: ``dims`` outer to inner (a dense C array of them is its
    home), ``tiled`` the tiled space cutting its line dimension (None: not tiled), ``group``
    the tiled space it is placed with in L1, ``elem`` bytes per element."""

    arg: KerArgT
    dims: tuple[Dim, ...]
    tiled: str | None
    group: str | None
    horizontal: bool
    elem: int

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.extent for d in self.dims)

    @property
    def home_shape(self) -> tuple[int, ...]:
        """The shape of the tensor the argument's C argument points to: its dims, the C
        elements of an item merged into its rows (3D: planes x H x W; 4D: Nop x Nip x H x W)."""
        shape = list(self.shape)
        if self.dims[-1].role == "item":
            k = shape.pop()
            shape[-1] *= k
        return tuple(shape)

    @property
    def line(self) -> int:
        """Index of the line dimension (the one a tiled space cuts)."""
        return next(i for i, d in enumerate(self.dims) if d.role == "line")

    @property
    def spaces(self) -> tuple[str, ...]:
        """The kernel spaces walking this argument, outer to inner."""
        return tuple(d.space for d in self.dims if d.space is not None)


def kernel_spaces(order: tuple, dims, iter_space=None) -> tuple[Space, ...]:
    """The spaces of a kernel: from the newer ``KernelIterSpace`` when given, else from the
    older iteration order and kernel dimensions."""
    if iter_space is not None:
        return tuple(Space(s.space.key, s.kind, s.dim, s.pref) for s in iter_space.spaces)
    out = []
    for it in order:
        key = OLD_KEYS[it]
        if it in (KER_TILE, KER_TILE1):
            out.append(Space(key, "tiled"))
        else:
            out.append(Space(key, "fixed", dims.InPlanes if it == KER_IN_PLANE else dims.OutPlanes))
    if any(it == KER_IN_OUT_PLANE for it in order) and dims.InPlanes != dims.OutPlanes:
        raise TilingError(f"KER_IN_OUT_PLANE walks in and out planes together: InPlanes="
                          f"{dims.InPlanes} and OutPlanes={dims.OutPlanes} must be equal")
    return tuple(out)


def orientation(a: KerArgT, kernel_orientation: str) -> bool:
    """True when the argument is tiled horizontally (its own constraint overrides)."""
    if a.Constraint & OBJ_CONSTRAINTS_TILE_VER:
        return False
    if a.Constraint & OBJ_CONSTRAINTS_TILE_HOR:
        return True
    return kernel_orientation == TILE_HOR


def item_elems(name: str, a: KerArgT, elem: int) -> int:
    """C elements per item: an item may hold several (a 5x5 filter as one 50-byte item)."""
    if a.ItemSize % elem:
        raise TilingError(f"{name}: KerArg {a.KerArgName!r} has item size {a.ItemSize} B, not a "
                          f"whole number of its C elements ({elem} B)")
    return a.ItemSize // elem


def frame(kernel: str, a: KerArgT, spaces: tuple[Space, ...], order: tuple, dims,
          kernel_orientation: str, elem: int) -> Frame:
    """The frame of one argument (``elem``: bytes of the C element its pointer has)."""
    hor = orientation(a, kernel_orientation)
    k = item_elems(kernel, a, elem)
    if a.Space is not None:
        return _frame_new(kernel, a, spaces, hor, k, elem)
    keys = {s.key for s in spaces}
    tiled_key = "Tile1" if a.has(Obj.O_TILE1) else "Tile0"
    tiled = tiled_key in keys and a.has(Obj.O_TILED) and not a.has(Obj.O_DYNTILE)
    planes: list[Dim] = []
    step = max(a.NextPlaneUpdate, 1)
    if a.has(Obj.O_4D):
        planes = [Dim("OutPlane" if "OutPlane" in keys else None, dims.OutPlanes, "plane"),
                  Dim("InPlane" if "InPlane" in keys else None, dims.InPlanes, "plane")]
    elif a.has(Obj.O_3D):
        if "InOutPlane" in keys:
            key, n = "InOutPlane", dims.OutPlanes
        elif a.has(Obj.O_IN) or not a.has(Obj.O_OUT):
            key, n = "InPlane", dims.InPlanes
        else:
            key, n = "OutPlane", dims.OutPlanes
        planes = [Dim(key if key in keys else None, n * step, "plane", step)]
    if a.Stride2D:
        planes.append(Dim(None, a.W // a.Stride2D, "plane"))
    w = a.Stride2D or a.W
    return Frame(a, tuple(planes) + _plane(tiled_key if tiled else None, hor, a.H, w, k),
                 tiled_key if tiled else None, tiled_key, hor, elem)


def _plane(space: str | None, hor: bool, h: int, w: int, k: int) -> tuple[Dim, ...]:
    """The data plane: H rows of W items of k elements; the line dimension is H when tiled
    horizontally, W when vertically."""
    rows = Dim(space if hor else None, h, "line" if hor else "row")
    cols = Dim(None if hor else space, w, "row" if hor else "line")
    return (rows, cols) + ((Dim(None, k, "item"),) if k > 1 else ())


def _frame_new(kernel: str, a: KerArgT, spaces: tuple[Space, ...], hor: bool, k: int,
               elem: int) -> Frame:
    by_key = {s.key: s for s in spaces}
    for key in a.Space:
        if key not in by_key:
            raise TilingError(f"{kernel}: KerArg {a.KerArgName!r} walks space {key}, which the "
                              f"kernel's KernelIterSpace does not have ({sorted(by_key)})")
    tiled_at = [i for i, key in enumerate(a.Space) if by_key[key].kind == "tiled"]
    if len(tiled_at) > 1:
        raise TilingError(f"{kernel}: KerArg {a.KerArgName!r}: only its innermost space may "
                          f"be a tiled one, {a.Space[tiled_at[0]]} is not innermost")
    if tiled_at and tiled_at[0] < len(a.Space) - 1:
        return _frame_lines_outer(kernel, a, by_key, tiled_at[0], hor, k, elem)
    *outer, last = a.Space
    planes = tuple(Dim(key, by_key[key].count, "plane") for key in outer)
    if by_key[last].kind == "tiled":
        tiled = None if a.has(Obj.O_NTILED) or a.has(Obj.O_DYNTILE) else last
        return Frame(a, planes + _plane(tiled, hor, a.H, a.W, k), tiled, last, hor, elem)
    planes += (Dim(last, by_key[last].count, "plane"),)
    return Frame(a, planes + _plane(None, hor, a.H, a.W, k), None, None, hor, elem)


def _frame_lines_outer(kernel: str, a: KerArgT, by_key: dict, t: int, hor: bool, k: int,
                       elem: int) -> Frame:
    """``KerArgSpace(T0, D0)``: the tiled lines outermost in memory, the fixed spaces after
    the tiled one walking planes inside each line (an HWC-like home: a [Lines, D0, W] array
    whose tile is a few lines of one D0 plane, one 2-D transfer). Only a horizontally tiled
    argument has its lines outermost."""
    inner = a.Space[t + 1:]
    if any(by_key[key].kind != "fixed" for key in inner) or not hor:
        raise TilingError(f"{kernel}: KerArg {a.KerArgName!r} walks {a.Space}: after its tiled "
                          f"space only fixed spaces may come, and the argument must be tiled "
                          f"horizontally (its lines outermost)")
    tiled = None if a.has(Obj.O_NTILED) or a.has(Obj.O_DYNTILE) else a.Space[t]
    planes = tuple(Dim(key, by_key[key].count, "plane") for key in a.Space[:t])
    rows, cols, *item = _plane(tiled, hor, a.H, a.W, k)
    within = tuple(Dim(key, by_key[key].count, "plane") for key in inner)
    return Frame(a, planes + (rows,) + within + (cols, *item), tiled, a.Space[t], hor, elem)


def elem_size(cargs: dict, a: KerArgT) -> int:
    """Bytes of the C element an argument's pointer has (its item size when it is bound to
    no pointer); ``cargs`` maps the kernel's C argument names to them."""
    c = cargs.get(a.CArgName)
    return parse_ctype(c.ArgType).dtype.itemsize if c is not None and c.is_pointer else \
        a.ItemSize


def kernel_frames(uk) -> tuple[tuple[Space, ...], tuple[Frame, ...]]:
    """A user kernel's spaces and its arguments' frames, whichever generation wrote it."""
    spaces = kernel_spaces(uk.order, uk.dims, uk.iter_space)
    cargs = {c.ArgName: c for c in reversed(uk.cargs)}  # the first of a name, as C binds
    return spaces, tuple(frame(uk.name, a, spaces, uk.order, uk.dims, uk.orientation,
                               elem_size(cargs, a)) for a in uk.kerargs)
