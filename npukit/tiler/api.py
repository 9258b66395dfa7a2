"""The GAP AutoTiler's model vocabulary, as Python values: the names, constants and
argument builders a GAP developer already knows, keyword arguments allowed everywhere. The
C style's leading counts (``CArgs(5, ...)``) are accepted and checked."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, IntFlag

import numpy as np

from ..cdecl import CType, identifier, parse_ctype
from ..errors import TilingError

# -- call types, iteration spaces, orientation, locations ---------------------------------

CALL_SEQUENTIAL, CALL_PARALLEL = 0, 1


class _Iter(IntEnum):
    KER_DIM2 = 2
    KER_DIM3 = 3
    KER_DIM4 = 4
    KER_TILE = 10
    KER_IN_PLANE = 11
    KER_OUT_PLANE = 12


KER_DIM2, KER_DIM3, KER_DIM4 = _Iter.KER_DIM2, _Iter.KER_DIM3, _Iter.KER_DIM4
KER_TILE, KER_IN_PLANE, KER_OUT_PLANE = _Iter.KER_TILE, _Iter.KER_IN_PLANE, _Iter.KER_OUT_PLANE

TILE_HOR, TILE_VER = "TILE_HOR", "TILE_VER"


class Loc(IntEnum):
    LOC_PROLOG = 0
    LOC_INNER_LOOP_PROLOG = 1
    LOC_IN_PLANE_PROLOG = 2
    LOC_INNER_LOOP = 3
    LOC_IN_PLANE_EPILOG = 4
    LOC_INNER_LOOP_EPILOG = 5
    LOC_EPILOG = 6
    LOC_GROUP = 7


(LOC_PROLOG, LOC_INNER_LOOP_PROLOG, LOC_IN_PLANE_PROLOG, LOC_INNER_LOOP, LOC_IN_PLANE_EPILOG,
 LOC_INNER_LOOP_EPILOG, LOC_EPILOG, LOC_GROUP) = tuple(Loc)


class KerArgSel(IntEnum):
    KER_ARG = 0
    KER_ARG_TILE = 1
    KER_ARG_TILE_W = 2
    KER_ARG_TILE_W0 = 3
    KER_ARG_TILE_H = 4
    KER_ARG_TILE_H0 = 5
    KER_ARG_NTILES = 6
    KER_ARG_TILEINDEX = 7
    KER_ARG_TILEOFFSET = 8


(KER_ARG, KER_ARG_TILE, KER_ARG_TILE_W, KER_ARG_TILE_W0, KER_ARG_TILE_H, KER_ARG_TILE_H0,
 KER_ARG_NTILES, KER_ARG_TILEINDEX, KER_ARG_TILEOFFSET) = tuple(KerArgSel)

# -- kernel argument properties (values as in the GAP SDK's AutoTilerLibTypes.h) ----------


class Obj(IntFlag):
    O_IN = 1 << 0
    O_NIN = 1 << 1
    O_OUT = 1 << 2
    O_NOUT = 1 << 3
    O_BUFF = 1 << 4
    O_NBUFF = 1 << 5
    O_TILED = 1 << 6
    O_NTILED = 1 << 7
    O_ONETILE = 1 << 8
    O_NONETILE = 1 << 9
    O_DB = 1 << 10
    O_NDB = 1 << 11
    O_L2DB = 1 << 12
    O_NL2DB = 1 << 13
    O_DYNTILE = 1 << 16
    O_NDYNTILE = 1 << 17
    O_3D = 1 << 20
    O_4D = 1 << 21


globals().update({f.name: f for f in Obj})

_BASE = {
    "OBJ_IN": Obj.O_IN | Obj.O_TILED, "OBJ_IN_DB": Obj.O_IN | Obj.O_DB | Obj.O_TILED,
    "OBJ_IN_L2DB": Obj.O_IN | Obj.O_L2DB | Obj.O_TILED,
    "OBJ_IN_DB_L2DB": Obj.O_IN | Obj.O_DB | Obj.O_L2DB | Obj.O_TILED,
    "OBJ_OUT": Obj.O_OUT | Obj.O_TILED, "OBJ_OUT_DB": Obj.O_OUT | Obj.O_DB | Obj.O_TILED,
    "OBJ_OUT_L2DB": Obj.O_OUT | Obj.O_L2DB | Obj.O_TILED,
    "OBJ_OUT_DB_L2DB": Obj.O_OUT | Obj.O_DB | Obj.O_L2DB | Obj.O_TILED,
    "OBJ_IN_OUT": Obj.O_IN | Obj.O_OUT | Obj.O_TILED,
    "OBJ_IN_OUT_DB": Obj.O_IN | Obj.O_OUT | Obj.O_DB | Obj.O_TILED,
    "OBJ_IN_OUT_L2DB": Obj.O_IN | Obj.O_OUT | Obj.O_L2DB | Obj.O_TILED,
    "OBJ_IN_OUT_DB_L2DB": Obj.O_IN | Obj.O_OUT | Obj.O_DB | Obj.O_L2DB | Obj.O_TILED,
    "OBJ_BUFFER": Obj.O_BUFF | Obj.O_TILED, "OBJ_BUFFER_IN": Obj.O_BUFF | Obj.O_IN | Obj.O_TILED,
    "OBJ_BUFFER_OUT": Obj.O_BUFF | Obj.O_OUT | Obj.O_TILED,
    "OBJ_BUFFER_IN_OUT": Obj.O_BUFF | Obj.O_IN | Obj.O_OUT | Obj.O_TILED,
    "OBJ_BUFFER_ONETILE": Obj.O_BUFF | Obj.O_TILED | Obj.O_ONETILE,
    "OBJ_BUFFER_DYNTILE": Obj.O_BUFF | Obj.O_TILED | Obj.O_DYNTILE,
    "OBJ_BUFFER_DB_ONETILE": Obj.O_BUFF | Obj.O_DB | Obj.O_TILED | Obj.O_ONETILE,
}
_BASE["OBJ_BUFFER_DYN"] = _BASE["OBJ_BUFFER_DYNTILE"]  # the AutoTiler's older spelling
OBJ = {}
for _name, _flags in _BASE.items():
    OBJ[_name] = _flags
    if _flags & Obj.O_TILED and not _flags & (Obj.O_ONETILE | Obj.O_DYNTILE):
        OBJ[_name + "_NTILED"] = _flags & ~Obj.O_TILED
    for _suffix, _dims in (("_3D", Obj.O_3D), ("_4D", Obj.O_3D | Obj.O_4D)):
        for _n, _f in list(OBJ.items()):
            if _n.startswith(_name) and not _n.endswith(("_3D", "_4D")):
                OBJ[_n + _suffix] = _f | _dims
globals().update(OBJ)


class Constraint(IntFlag):
    OBJ_CONSTRAINTS_NONE = 0
    OBJ_CONSTRAINTS_EVEN = 1 << 1
    OBJ_CONSTRAINTS_ODD = 1 << 2
    OBJ_CONSTRAINTS_ONEPREFTILE = 1 << 3
    OBJ_CONSTRAINTS_TILE_HOR = 1 << 4
    OBJ_CONSTRAINTS_TILE_VER = 1 << 5


globals().update({f.name: f for f in Constraint})
OBJ_CONSTRAINTS_NONE = Constraint(0)

# -- argument builders ---------------------------------------------------------------------


INT_MAX = (1 << 31) - 1  # sizes and counts reach the generated C as ints


def integer(what: str, field: str, value, least: int = 0, most: int = INT_MAX) -> int:
    """A whole-number field of the model: an int (numpy's too), not a bool, a float or a
    string, in ``[least, most]``; ``TilingError`` naming ``what`` and ``field`` otherwise
    (C would have truncated 2.5 silently)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TilingError(f"{what}: {field} must be an integer, got {value!r} "
                          f"({type(value).__name__})")
    if not least <= value <= most:
        raise TilingError(f"{what}: {field} must be in [{least}, {most}], got {value}")
    return int(value)


def _enum(what: str, field: str, kind, value):
    """``kind(value)`` for an IntEnum, or ``TilingError`` listing the names it takes."""
    try:
        return kind(integer(what, field, value))
    except ValueError as exc:
        raise TilingError(f"{what}: {field} {value!r} is none of "
                          f"{', '.join(k.name for k in kind)}") from exc


def _name(what: str, field: str, value) -> str:
    if not isinstance(value, str) or not value:
        raise TilingError(f"{what}: {field} must be a non-empty string, got {value!r}")
    return value


def _counted(what: str, items: tuple) -> tuple:
    """Accept the C style's leading count, check it, and drop it."""
    if items and isinstance(items[0], int) and not isinstance(items[0], IntEnum):
        count, items = items[0], items[1:]
        if count != len(items):
            raise TilingError(f"{what}({count}, ...) lists {len(items)} items")
    return tuple(items)


@dataclass(frozen=True)
class TCArg:
    """A C argument ``<ArgType ArgName>``. A pointer not bound to a kernel argument needs
    its ``shape`` (its dimensions are not captured anywhere else, as the AutoTiler documentation
    says); it is read and written unless its pointee is ``const`` (then the caller's array may be
    read-only).

    ``ArgName`` must be a C identifier and ``ArgType`` one of the C types of
    ``npukit.cdecl`` (``TilingError`` otherwise): both are written into generated C.
    ``bounds=(lo, hi)`` (an integer scalar argument only; npukit's, not the AutoTiler's)
    says which values the kernel accepts: every value passed through the argument, at run
    time or as an immediate, is checked against it before either back end runs (a shift
    count: ``(0, 31)``)."""

    ArgType: str
    ArgName: str
    shape: tuple[int, ...] | None = None
    bounds: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        identifier(self.ArgName, "C argument name")
        ctype = parse_ctype(self.ArgType, f"C argument {self.ArgName!r}")
        if self.bounds is not None:
            what = f"C argument {self.ArgName!r}: bounds={self.bounds!r}"
            if ctype.pointer or ctype.dtype.kind not in "iu":
                raise TilingError(f"{what}: bounds apply to integer scalar arguments, this one "
                                  f"is {self.ArgType!r}")
            ok = isinstance(self.bounds, tuple) and len(self.bounds) == 2 and all(
                isinstance(v, int) and not isinstance(v, bool) for v in self.bounds)
            if not ok or self.bounds[0] > self.bounds[1]:
                raise TilingError(f"{what}: give (lo, hi), two integers with lo <= hi")

    @property
    def ctype(self) -> CType:
        """The parsed ``ArgType``."""
        return parse_ctype(self.ArgType)

    @property
    def is_pointer(self) -> bool:
        return self.ctype.pointer


def CArgs(*args: TCArg) -> tuple[TCArg, ...]:
    return _counted("CArgs", args)


@dataclass(frozen=True)
class Binding:
    kind: str  # "k_arg", "c_arg", "c_arg_index", "imm"
    name: str = ""
    what: object = None  # KerArgSel for k_arg, iterator for c_arg_index
    value: int = 0  # immediate value or index factor


def K_Arg(UserKernelArgName: str, Sel: KerArgSel) -> Binding:
    what = f"K_Arg({UserKernelArgName!r}, ...)"
    return Binding("k_arg", _name(what, "UserKernelArgName", UserKernelArgName),
                   _enum(what, "the selector", KerArgSel, Sel))


def C_Arg(ArgName: str) -> Binding:
    return Binding("c_arg", _name("C_Arg", "ArgName", ArgName))


def C_ArgIndex(ArgName: str, Iterator: _Iter, MultFactor: int = 1) -> Binding:
    """``ArgName[index * MultFactor]``, index the current in-plane, out-plane or tile."""
    what = f"C_ArgIndex({ArgName!r}, ...)"
    it = _enum(what, "Iterator", _Iter, Iterator)
    if it not in (KER_TILE, KER_IN_PLANE, KER_OUT_PLANE):
        raise TilingError(f"{what}: Iterator must be KER_TILE, KER_IN_PLANE or KER_OUT_PLANE, "
                          f"got {it.name}")
    return Binding("c_arg_index", _name(what, "ArgName", ArgName), it,
                   integer(what, "MultFactor", MultFactor))


def Imm(Value: int) -> Binding:
    """An immediate integer of 64 bits at most (the basic kernel's argument type may bound
    it further, checked when the call is)."""
    return Binding("imm", value=integer("Imm", "Value", Value, -(1 << 63), (1 << 64) - 1))


def Ker_IteratorIndex(Iterator: _Iter) -> Binding:
    """The current index of a kernel iterator (the out-plane, in-plane or tile number)."""
    return Binding("iter_index", what=_Iter(Iterator))


def Bindings(*items: Binding) -> tuple[Binding, ...]:
    return _counted("Bindings", items)


@dataclass(frozen=True)
class CallT:
    CallName: str
    CallLocation: Loc
    BindingList: tuple[Binding, ...]


def _bindings(what: str, items) -> tuple[Binding, ...]:
    items = tuple(items) if isinstance(items, (tuple, list)) else (items,)
    bad = [b for b in items if not isinstance(b, Binding)]
    if bad:
        raise TilingError(f"{what}: a binding list holds K_Arg, C_Arg, C_ArgIndex and Imm "
                          f"values; got {bad[0]!r}")
    return items


def Call(CallName: str, CallLocation: Loc, BindingList: tuple[Binding, ...]) -> CallT:
    what = f"Call({CallName!r}, ...)"
    return CallT(_name(what, "CallName", CallName), _enum(what, "CallLocation", Loc, CallLocation),
                 _bindings(what, BindingList))


def UserKernelCall(CallName: str, CallLocation: Loc, BindingList: tuple[Binding, ...]) -> CallT:
    """A call of a user kernel inside a group: location LOC_GROUP, C_Arg and Imm bindings."""
    what = f"UserKernelCall({CallName!r}, ...)"
    BindingList = _bindings(what, BindingList)
    if _enum(what, "CallLocation", Loc, CallLocation) != LOC_GROUP:
        raise TilingError(f"UserKernelCall {CallName!r}: location must be LOC_GROUP")
    bad = [b for b in BindingList if b.kind not in ("c_arg", "imm")]
    if bad:
        raise TilingError(f"UserKernelCall {CallName!r}: only C_Arg and Imm bindings, got {bad[0]}")
    return CallT(CallName, LOC_GROUP, tuple(BindingList))


def Calls(*calls: CallT) -> tuple[CallT, ...]:
    return _counted("Calls", calls)


@dataclass(frozen=True)
class KerArgT:
    KerArgName: str
    ObjType: int
    W: int
    H: int
    ItemSize: int
    TileOverlap: int = 0
    Constraint: int = 0
    PreferedTileSize: int = 0
    CArgName: str | None = None
    NextPlaneUpdate: int = 0

    def has(self, flag: int) -> bool:
        return bool(self.ObjType & flag)


ITEM_SIZES = (1, 2, 4, 8)  # bytes of the C scalar types an argument's items can be
_ALL_OBJ = sum(Obj)
_ALL_CONSTRAINTS = sum(Constraint)


def KerArg(KerArgName: str, ObjType: int, W: int, H: int, ItemSize: int, TileOverlap: int = 0,
           Constraint: int = 0, PreferedTileSize: int = 0, CArgName: str | None = None,
           NextPlaneUpdate: int = 0) -> KerArgT:
    """A user kernel argument: a W x H data plane (x planes for 3D/4D) of ItemSize bytes.
    Every size is an int (``TilingError`` for a float, a bool or a string)."""
    what = f"KerArg {KerArgName!r}"
    _name("KerArg", "KerArgName", KerArgName)
    w, h, item = (integer(what, n, v, 1) for n, v in (("W", W), ("H", H),
                                                      ("ItemSize", ItemSize)))
    if item not in ITEM_SIZES:
        raise TilingError(f"{what}: ItemSize {item} is not the size of a C scalar "
                          f"{ITEM_SIZES}")
    obj = integer(what, "ObjType", ObjType, 1)
    if obj & ~_ALL_OBJ or not obj & (Obj.O_IN | Obj.O_OUT | Obj.O_BUFF):
        raise TilingError(f"{what}: ObjType {obj:#x} is no combination of O_* flags with "
                          f"O_IN, O_OUT or O_BUFF (use a name such as OBJ_IN_DB)")
    cons = integer(what, "Constraint", Constraint)
    if cons & ~_ALL_CONSTRAINTS:
        raise TilingError(f"{what}: Constraint {cons:#x} is no combination of "
                          f"OBJ_CONSTRAINTS_* flags")
    if CArgName not in (None, 0):
        _name(what, "CArgName", CArgName)
    return KerArgT(KerArgName, obj, w, h, item, integer(what, "TileOverlap", TileOverlap), cons,
                   integer(what, "PreferedTileSize", PreferedTileSize), CArgName or None,
                   integer(what, "NextPlaneUpdate", NextPlaneUpdate))


def KerArgs(*args: KerArgT) -> tuple[KerArgT, ...]:
    return _counted("KerArgs", args)


@dataclass(frozen=True)
class KernelDimensionT:
    InPlanes: int
    W: int
    H: int
    OutPlanes: int


def KernelDimensions(InPlanes: int, W: int, H: int, OutPlanes: int) -> KernelDimensionT:
    return KernelDimensionT(*(integer("KernelDimensions", n, v, 1) for n, v in (
        ("InPlanes", InPlanes), ("W", W), ("H", H), ("OutPlanes", OutPlanes))))


ORDER_2 = {
    (KER_DIM2, KER_TILE): (KER_TILE,),
    (KER_DIM3, KER_TILE, KER_IN_PLANE): (KER_TILE, KER_IN_PLANE),
    (KER_DIM3, KER_OUT_PLANE, KER_TILE): (KER_OUT_PLANE, KER_TILE),
    (KER_DIM4, KER_OUT_PLANE, KER_TILE, KER_IN_PLANE): (KER_OUT_PLANE, KER_TILE, KER_IN_PLANE),
}


def KernelIterationOrder(Dim: _Iter, *Order: _Iter) -> tuple[_Iter, ...]:
    """The iteration space: order 2 (tiles outside in-planes) is supported; order 1 (in-planes
    outside tiles) raises ``TilingError``, as only order 2 is fully supported by the GAP
    AutoTiler."""
    key = tuple(_enum("KernelIterationOrder", "an iterator", _Iter, o) for o in (Dim, *Order))
    if key not in ORDER_2:
        raise TilingError(f"KernelIterationOrder{tuple(k.name for k in key)}: only iteration "
                          f"order 2 is supported (tiles outside in-planes): "
                          f"{[tuple(k.name for k in o) for o in ORDER_2]}")
    return ORDER_2[key]
