"""The GAP AutoTiler's model vocabulary, as Python values: the names, constants and
argument builders a GAP developer already knows, keyword arguments allowed everywhere. The
C style's leading counts (``CArgs(5, ...)``) are accepted and checked."""

from __future__ import annotations

from dataclasses import dataclass, replace
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
    KER_TILE1 = 13  # a second tiled space, inside KER_TILE (the older generators' CNNs)
    KER_IN_OUT_PLANE = 14  # in and out planes walked together (Nip == Nop)


KER_DIM2, KER_DIM3, KER_DIM4 = _Iter.KER_DIM2, _Iter.KER_DIM3, _Iter.KER_DIM4
KER_TILE, KER_IN_PLANE, KER_OUT_PLANE = _Iter.KER_TILE, _Iter.KER_IN_PLANE, _Iter.KER_OUT_PLANE
KER_TILE1, KER_IN_OUT_PLANE = _Iter.KER_TILE1, _Iter.KER_IN_OUT_PLANE


class KerIter(IntEnum):
    """The newer generation's iteration spaces (``KernelIteratorT``): three tiled spaces over
    the basic data plane and four plain dimensions."""
    KER_ITER_TILE0 = 100
    KER_ITER_TILE1 = 101
    KER_ITER_TILE2 = 102
    KER_ITER_D0 = 103
    KER_ITER_D1 = 104
    KER_ITER_D2 = 105
    KER_ITER_D3 = 106

    @property
    def key(self) -> str:
        """How generated code names the space: Tile0 .. Tile2, D0 .. D3."""
        return self.name.replace("KER_ITER_TILE", "Tile").replace("KER_ITER_", "")

    @property
    def tiled(self) -> bool:
        return self.value <= KerIter.KER_ITER_TILE2


globals().update({f.name: f for f in KerIter})
# The short names the SDK's generators define for them (``#define D0 KER_ITER_D0``).
T0, T1, T2 = KerIter.KER_ITER_TILE0, KerIter.KER_ITER_TILE1, KerIter.KER_ITER_TILE2
D0, D1, D2, D3 = (KerIter.KER_ITER_D0, KerIter.KER_ITER_D1, KerIter.KER_ITER_D2,
                  KerIter.KER_ITER_D3)

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
    # The older generators' second tiled space (KER_TILE1): its loop body, before, after.
    LOC_INNER_LOOP1 = 8
    LOC_INNER_LOOP1_PROLOG = 9
    LOC_INNER_LOOP1_EPILOG = 10
    # The newer generation: the body of / before / after each space's loop.
    LOC_LOOP = 20
    LOC_LOOP_PROLOG = 21
    LOC_LOOP_EPILOG = 22
    LOC_LOOP1 = 23
    LOC_LOOP1_PROLOG = 24
    LOC_LOOP1_EPILOG = 25
    LOC_LOOP2 = 26
    LOC_LOOP2_PROLOG = 27
    LOC_LOOP2_EPILOG = 28
    LOC_D0 = 29
    LOC_D0_PROLOG = 30
    LOC_D0_EPILOG = 31
    LOC_D1 = 32
    LOC_D1_PROLOG = 33
    LOC_D1_EPILOG = 34
    LOC_D2 = 35
    LOC_D2_PROLOG = 36
    LOC_D2_EPILOG = 37
    LOC_D3 = 38
    LOC_D3_PROLOG = 39
    LOC_D3_EPILOG = 40


globals().update({f.name: f for f in Loc})


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
    KER_ARG_TILE_BASE = 9  # first line (column) of the current tile in the plane
    KER_ARG_W = 10  # width and height of the whole data plane
    KER_ARG_H = 11
    KER_ARG_PAD = 12  # the argument's padding (left, right, top, bottom) as a v4s
    KER_ARG_TILE_PAD = 13  # the padding the current tile sees, as a v4s
    KER_ARG_TILE_USEDW = 14  # the current tile's width / height actually used
    KER_ARG_TILE_USEDH = 15
    KER_ARG_PARTILE_SIZE = 16  # items of a parametric space in the current tile
    KER_ARG_LOADEDPARTILE_SIZE = 17
    KER_ARG_TILEFIRST = 18  # predicates: the current tile is the first / the last
    KER_ARG_TILELAST = 19


globals().update({f.name: f for f in KerArgSel})

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
    # Newer properties (free bits here; the SDK's headers number them differently).
    O_ALIAS = 1 << 14  # another kernel argument's memory under a second name
    O_NALIAS = 1 << 15
    O_CONST = 1 << 18  # constant input
    O_TILE0 = 1 << 29  # which tiled space an argument walks (older generation)
    O_TILE1 = 1 << 30
    O_TILE2 = 1 << 31


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
    "OBJ_OUT_DB_ALIAS": Obj.O_OUT | Obj.O_DB | Obj.O_ALIAS | Obj.O_TILED,
    "OBJ_BUFFER_IN_L2DB": Obj.O_BUFF | Obj.O_IN | Obj.O_L2DB | Obj.O_TILED,
    "OBJ_BUFFER_OUT_L2DB": Obj.O_BUFF | Obj.O_OUT | Obj.O_L2DB | Obj.O_TILED,
    "OBJ_BUFFER_IN_OUT_L2DB": Obj.O_BUFF | Obj.O_IN | Obj.O_OUT | Obj.O_L2DB | Obj.O_TILED,
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
    # When an argument's extent is not a whole multiple of the reference extent: use the
    # last tile to recover the remainder, drop it, or size tiles at run time.
    OBJ_CONSTRAINTS_PAD_REM = 1 << 6
    OBJ_CONSTRAINTS_DROP_REM = 1 << 7
    OBJ_CONSTRAINTS_DYNAMIC = 1 << 8
    OBJ_CONSTRAINTS_2D = 1 << 9


globals().update({f.name: f for f in Constraint})
OBJ_CONSTRAINTS_NONE = Constraint(0)

# -- argument builders ---------------------------------------------------------------------


INT_MAX = (1 << 31) - 1  # sizes and counts reach the generated C as ints


def AppendNames(Name1: str, Name2: str) -> str:
    """The concatenation of two names, as the AutoTiler's ``AppendNames`` derives the names
    of the parts a generator creates: ``AppendNames("Conv0", "Body")`` is ``"Conv0Body"``."""
    for field, v in (("Name1", Name1), ("Name2", Name2)):
        if not isinstance(v, str):
            raise TilingError(f"AppendNames: {field} must be a string, got {v!r:.40}")
    return Name1 + Name2


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
    # AT_NO_CALL / AT_NO_KER_ARG hold a counted place that a generator leaves empty.
    return tuple(i for i in items if i is not None)


AT_NO_CALL = AT_NO_KER_ARG = None


@dataclass(frozen=True)
class TCArg:
    """A C argument ``<ArgType ArgName>``. A pointer not bound to a kernel argument needs
    its ``shape`` (its dimensions are not captured anywhere else, as the AutoTiler documentation
    says); a bound one may give it too, the same elements seen as the caller's tensor (as GAP's
    ``AddKernelArgDim`` declares it), else its kernel argument's dimensions are its shape. It is
    read and written unless its pointee is ``const`` (then the caller's array may be
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
    kind: str  # "k_arg", "c_arg", "c_arg_index", "imm", "iter_index", "usymb", "kdim", "ignore"
    name: str = ""
    what: object = None  # KerArgSel for k_arg, iterator for c_arg_index and iter_index
    value: int = 0  # immediate value or index factor
    space: object = None  # K_ArgPar: the parametric space (a KerIter)


def K_Arg(UserKernelArgName: str, Sel: KerArgSel) -> Binding:
    what = f"K_Arg({UserKernelArgName!r}, ...)"
    return Binding("k_arg", _name(what, "UserKernelArgName", UserKernelArgName),
                   _enum(what, "the selector", KerArgSel, Sel))


def C_Arg(ArgName: str) -> Binding:
    return Binding("c_arg", _name("C_Arg", "ArgName", ArgName))


def C_ArgIndex(ArgName: str, Iterator: _Iter, MultFactor: int = 1) -> Binding:
    """``ArgName[index * MultFactor]``, index the current in-plane, out-plane or tile (or,
    in the newer generation, the current index of any space: ``C_ArgIndex("Bias", D1, 1)``)."""
    what = f"C_ArgIndex({ArgName!r}, ...)"
    it = _iterator(what, Iterator)
    return Binding("c_arg_index", _name(what, "ArgName", ArgName), it,
                   integer(what, "MultFactor", MultFactor))


_LOOPS = (KER_TILE, KER_IN_PLANE, KER_OUT_PLANE, KER_TILE1, KER_IN_OUT_PLANE)


def _iterator(what: str, Iterator) -> _Iter | KerIter:
    """A loop a binding can take the index of: an older iterator (not a ``KER_DIM*``) or a
    newer space (``KER_ITER_*``)."""
    if isinstance(Iterator, KerIter):
        return Iterator
    it = _enum(what, "Iterator", _Iter, Iterator)
    if it not in _LOOPS:
        raise TilingError(f"{what}: Iterator must be KER_TILE, KER_IN_PLANE, KER_OUT_PLANE, "
                          f"KER_TILE1, KER_IN_OUT_PLANE or a KER_ITER_* space, got {it.name}")
    return it


def Imm(Value: int) -> Binding:
    """An immediate integer of 64 bits at most (the basic kernel's argument type may bound
    it further, checked when the call is)."""
    return Binding("imm", value=integer("Imm", "Value", Value, -(1 << 63), (1 << 64) - 1))


def Ker_IteratorIndex(Iterator: _Iter) -> Binding:
    """The current index of a kernel iterator (the out-plane, in-plane or tile number; in
    the newer generation, of any space)."""
    return Binding("iter_index", what=_iterator("Ker_IteratorIndex", Iterator))


def K_ArgPar(ArgName: str, Sel: KerArgSel, Space: KerIter) -> Binding:
    """A property of a parametric space of a kernel argument: ``KER_ARG_PARTILE_SIZE``, the
    items of ``Space`` in the current tile."""
    what = f"K_ArgPar({ArgName!r}, ...)"
    return Binding("k_arg", _name(what, "ArgName", ArgName),
                   _enum(what, "the selector", KerArgSel, Sel),
                   space=_enum(what, "Space", KerIter, Space))


def UserSymb(Name: str) -> Binding:
    """The value of a user symbol declared with ``KernelDimensionsAndUserSymbols``."""
    return Binding("usymb", identifier(Name, "user symbol"))


K_INP, K_OUTP, K_W, K_H = 0, 1, 2, 3


def KerDim(Dim: int) -> Binding:
    """One of the kernel dimensions: ``K_INP``, ``K_OUTP``, ``K_W``, ``K_H``."""
    if integer("KerDim", "Dim", Dim, -1) not in (K_INP, K_OUTP, K_W, K_H):
        raise TilingError(f"KerDim({Dim!r}): give K_INP, K_OUTP, K_W or K_H")
    return Binding("kdim", value=int(Dim))


# A basic kernel argument the call leaves unset (the generated code assigns nothing to it;
# npukit passes 0).
AT_IGNORE_ARG_BINDING = Binding("ignore")


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
    if _enum(what, "CallLocation", Loc, CallLocation) != Loc.LOC_GROUP:
        raise TilingError(f"UserKernelCall {CallName!r}: location must be LOC_GROUP")
    bad = [b for b in BindingList if b.kind not in ("c_arg", "imm")]
    if bad:
        raise TilingError(f"UserKernelCall {CallName!r}: only C_Arg and Imm bindings, got {bad[0]}")
    return CallT(CallName, Loc.LOC_GROUP, tuple(BindingList))


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
    # Additions beyond the documented KerArg (npukit.tiler.api_spaces and the 2-D variants):
    Pad: tuple[int, int, int, int] = (0, 0, 0, 0)  # left, right, top, bottom padding (items)
    Stride2D: int = 0  # KerArg2D: the data plane is W / Stride2D planes of Stride2D items
    Space: tuple | None = None  # newer generation: KerArgSpace, outer to inner
    Used: tuple[int, int] | None = None  # W, H actually used (KerArgP / KerArgPart)
    Buffers: tuple[int, int] = (0, 0)  # KerArgPad: items kept before / after each tile
    Alias: str | None = None  # KerArgAliased: the argument whose memory it shares

    def has(self, flag: int) -> bool:
        # int's own & (a plain int): IntFlag's __and__ builds a flag member, and the solver
        # asks this hundreds of thousands of times while planning a model.
        return bool(int.__and__(self.ObjType, flag))


ITEM_SIZES = (1, 2, 4, 8)  # bytes of the C scalar types an argument's items can be
_ALL_OBJ = sum(Obj)
_ALL_CONSTRAINTS = sum(Constraint)


def KerArg(KerArgName: str, ObjType: int, W: int, H: int, ItemSize: int, TileOverlap: int = 0,
           Constraint: int = 0, PreferedTileSize: int = 0, CArgName: str | None = None,
           NextPlaneUpdate: int = 0, *more) -> KerArgT:
    """A user kernel argument: a W x H data plane (x planes for 3D/4D) of ItemSize bytes
    (one C element of its C argument or several: a 5x5 filter may be one item). Every size
    is an int (``TilingError`` for a float, a bool or a string).

    The newer generation's ``KerArg(Name, KerArgSpace(...), ObjType, W, H, ItemSize,
    TileOverlap, Constraint, PreferedTileSize, CArgName)`` is accepted too: a
    ``KerArgSpace`` in second place selects it (``npukit.tiler.api_spaces``)."""
    if isinstance(ObjType, KerArgSpaceT):
        return kerarg(KerArgName, ObjType, W, H, ItemSize, TileOverlap, Constraint,
                           PreferedTileSize, CArgName, NextPlaneUpdate, *more)
    if more:
        raise TilingError(f"KerArg {KerArgName!r}: {len(more)} arguments too many (an older "
                          f"generation KerArg takes 10 at most)")
    return _kerarg(KerArgName, ObjType, W, H, ItemSize, TileOverlap, Constraint,
                   PreferedTileSize, CArgName, NextPlaneUpdate)


def _kerarg(KerArgName, ObjType, W, H, ItemSize, TileOverlap=0, Constraint=0,
            PreferedTileSize=0, CArgName=None, NextPlaneUpdate=0, **extra) -> KerArgT:
    """The fields every generation's kernel argument has, checked (the item size against
    its C argument's type when the user kernel is declared: ``validate``)."""
    what = f"KerArg {KerArgName!r}"
    _name("KerArg", "KerArgName", KerArgName)
    w, h, item = (integer(what, n, v, 1) for n, v in (("W", W), ("H", H),
                                                      ("ItemSize", ItemSize)))
    obj = integer(what, "ObjType", ObjType, 1, _ALL_OBJ)
    if obj & ~_ALL_OBJ or not obj & (Obj.O_IN | Obj.O_OUT | Obj.O_BUFF):
        raise TilingError(f"{what}: ObjType {obj:#x} is no combination of O_* flags with "
                          f"O_IN, O_OUT or O_BUFF (use a name such as OBJ_IN_DB)")
    cons = integer(what, "Constraint", Constraint)
    if cons & ~_ALL_CONSTRAINTS:
        raise TilingError(f"{what}: Constraint {cons:#x} is no combination of "
                          f"OBJ_CONSTRAINTS_* flags")
    if CArgName not in (None, 0, ""):  # the AutoTiler's models write 0 or "" for none
        _name(what, "CArgName", CArgName)
    return KerArgT(KerArgName, obj, w, h, item, integer(what, "TileOverlap", TileOverlap), cons,
                   integer(what, "PreferedTileSize", PreferedTileSize), CArgName or None,
                   integer(what, "NextPlaneUpdate", NextPlaneUpdate), **extra)


def _pads(what: str, pads) -> tuple[int, int, int, int]:
    ok = isinstance(pads, (tuple, list)) and len(pads) == 4
    pads = tuple(integer(what, f"padding {k}", p, -INT_MAX) for k, p in zip(
        ("left", "right", "top", "bottom"), pads)) if ok else pads
    if not ok or min(pads) < 0:
        raise TilingError(f"{what}: padding is (left, right, top, bottom), four counts >= 0, "
                          f"got {pads!r}")
    return pads


def KerArg2D(KerArgName: str, ObjType: int, W: int, H: int, Stride: int, ItemSize: int,
             TileOverlap: int = 0, Constraint: int = 0, PreferedTileSize: int = 0,
             CArgName: str | None = None, NextPlaneUpdate: int = 0) -> KerArgT:
    """A 2-D strided argument (the older CNN generators): its W x H plane is W / Stride
    planes of Stride x H items stored one after the other, a tile takes its lines from
    every plane (one 2-D transfer)."""
    stride = integer(f"KerArg2D {KerArgName!r}", "Stride", Stride, 1)
    a = _kerarg(KerArgName, ObjType, W, H, ItemSize, TileOverlap, Constraint,
                PreferedTileSize, CArgName, NextPlaneUpdate, Stride2D=stride)
    if a.W % stride:
        raise TilingError(f"KerArg2D {KerArgName!r}: W={W} is not a whole number of planes of "
                          f"Stride={Stride} items")
    return a


def KerArg2DP(KerArgName: str, ObjType: int, W: int, H: int, Stride: int, PadL: int,
              PadR: int, PadT: int, PadB: int, ItemSize: int, TileOverlap: int = 0,
              Constraint: int = 0, PreferedTileSize: int = 0, CArgName: str | None = None,
              NextPlaneUpdate: int = 0) -> KerArgT:
    """``KerArg2D`` with padding: the tiled dimension is read as if ``PadT`` lines of
    padding came before the plane and ``PadB`` after it; a tile's lines outside the plane
    are not moved (the basic kernel pads them, from ``KER_ARG_TILE_PAD``)."""
    a = KerArg2D(KerArgName, ObjType, W, H, Stride, ItemSize, TileOverlap, Constraint,
                 PreferedTileSize, CArgName, NextPlaneUpdate)
    return replace(a, Pad=_pads(f"KerArg2DP {KerArgName!r}", (PadL, PadR, PadT, PadB)))


def KerArgP(KerArgName: str, ObjType, W: int, H: int, *args) -> KerArgT:
    """A padded argument. Older form: ``KerArgP(Name, ObjType, W, H, PadL, PadR, PadT, PadB,
    ItemSize, TileOverlap, Constraint, PreferedTileSize, CArgName, NextPlaneUpdate)``; the
    newer one (a ``KerArgSpace`` second): ``KerArgP(Name, KerArgSpace, ObjType, W, H, UsedW,
    UsedH, PadTile, PadExec, ItemSize, ...)``."""
    if isinstance(ObjType, KerArgSpaceT):
        return _kerarg_p_spaces(KerArgName, ObjType, W, H, *args)
    if not 5 <= len(args) <= 10:
        raise TilingError(f"KerArgP {KerArgName!r}: give PadL, PadR, PadT, PadB, ItemSize and "
                          f"at most TileOverlap, Constraint, PreferedTileSize, CArgName, "
                          f"NextPlaneUpdate after H ({len(args)} given)")
    PadL, PadR, PadT, PadB, ItemSize, *rest = args
    a = _kerarg(KerArgName, ObjType, W, H, ItemSize, *rest)
    return replace(a, Pad=_pads(f"KerArgP {KerArgName!r}", (PadL, PadR, PadT, PadB)))


def KerArgPad(KerArgName: str, ObjType, W: int, H: int, *args) -> KerArgT:
    """An argument whose L1 tile keeps ``BottomBuffer`` items before and ``TopBuffer``
    items after the data moved in (a delay line, as a FIR needs). Older form:
    ``KerArgPad(Name, ObjType, W, H, BottomBuffer, TopBuffer, ItemSize, TileOverlap,
    Constraint, PreferedTileSize, CArgName, NextPlaneUpdate)``; a ``KerArgSpace`` second
    selects the newer one."""
    if isinstance(ObjType, KerArgSpaceT):
        return _kerarg_pad_spaces(KerArgName, ObjType, W, H, *args)
    if not 3 <= len(args) <= 8:
        raise TilingError(f"KerArgPad {KerArgName!r}: give BottomBuffer, TopBuffer, ItemSize "
                          f"and at most TileOverlap, Constraint, PreferedTileSize, CArgName, "
                          f"NextPlaneUpdate after H ({len(args)} given)")
    Bottom, Top, ItemSize, *rest = args
    what = f"KerArgPad {KerArgName!r}"
    buffers = (integer(what, "BottomBuffer", Bottom), integer(what, "TopBuffer", Top))
    a = _kerarg(KerArgName, ObjType, W, H, ItemSize, *rest)
    return replace(a, Buffers=buffers)


def KerArgs(*args: KerArgT) -> tuple[KerArgT, ...]:
    return _counted("KerArgs", args)


@dataclass(frozen=True)
class KernelDimensionT:
    InPlanes: int
    W: int
    H: int
    OutPlanes: int
    symbols: tuple[tuple[str, int], ...] = ()  # user symbols, for UserSymb bindings


def KernelDimensions(InPlanes: int, W: int, H: int, OutPlanes: int) -> KernelDimensionT:
    return KernelDimensionT(*(integer("KernelDimensions", n, v, 1) for n, v in (
        ("InPlanes", InPlanes), ("W", W), ("H", H), ("OutPlanes", OutPlanes))))


def S_Dyn(Name: str, Value: int) -> tuple[str, int]:
    """One user symbol and its value."""
    name = identifier(Name, "user symbol")
    return (name, integer(f"S_Dyn({name!r}, ...)", "Value", Value, -INT_MAX - 1))


def KerDynamicSymbols(*symbols) -> tuple[tuple[str, int], ...]:
    return _counted("KerDynamicSymbols", symbols)


def KernelDimensionsAndUserSymbols(InPlanes: int, W: int, H: int, OutPlanes: int,
                                   UserSymbols: tuple = ()) -> KernelDimensionT:
    """``KernelDimensions`` with user symbols (``KerDynamicSymbols(S_Dyn("Wo", 25), ...)``)
    that ``UserSymb("Wo")`` binds."""
    dims = KernelDimensions(InPlanes, W, H, OutPlanes)
    symbols = tuple(UserSymbols) if isinstance(UserSymbols, (tuple, list)) else None
    if symbols is None or not all(isinstance(s, tuple) and len(s) == 2 for s in symbols):
        raise TilingError(f"KernelDimensionsAndUserSymbols: UserSymbols is "
                          f"KerDynamicSymbols(S_Dyn(name, value), ...), got {UserSymbols!r:.60}")
    return replace(dims, symbols=symbols)


ORDER_2 = {
    (KER_DIM2, KER_TILE): (KER_TILE,),
    (KER_DIM3, KER_TILE, KER_IN_PLANE): (KER_TILE, KER_IN_PLANE),
    (KER_DIM3, KER_OUT_PLANE, KER_TILE): (KER_OUT_PLANE, KER_TILE),
    (KER_DIM4, KER_OUT_PLANE, KER_TILE, KER_IN_PLANE): (KER_OUT_PLANE, KER_TILE, KER_IN_PLANE),
    (KER_DIM3, KER_IN_OUT_PLANE, KER_TILE): (KER_IN_OUT_PLANE, KER_TILE),
    (KER_DIM2, KER_TILE, KER_TILE1): (KER_TILE, KER_TILE1),
    (KER_DIM3, KER_TILE, KER_TILE1): (KER_TILE, KER_TILE1),
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


# -- the newer generation's argument spaces (npukit.tiler.api_spaces holds the rest) ----

def _space(what: str, IterSpace) -> KerIter:
    try:
        return KerIter(IterSpace)
    except ValueError:
        raise TilingError(f"{what}: {IterSpace!r} is not an iteration space (KER_ITER_TILE0.."
                          f"KER_ITER_TILE2, KER_ITER_D0..KER_ITER_D3)") from None


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


def _kerarg_p_spaces(KerArgName: str, KerArgSpace: KerArgSpaceT, ObjType: int, W: int, H: int,
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


def _kerarg_pad_spaces(KerArgName: str, KerArgSpace: KerArgSpaceT, ObjType: int, W: int, H: int,
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
