"""Checks of an AutoTiler model that need no tiling, made when the model is written:

- ``check_lib`` when a basic kernel is declared (``LibKernel``);
- ``check_kernel`` when a user kernel is declared (``UserKernel``): its C arguments, kernel
  arguments and bindings, and its calls of the basic kernels declared so far;
- ``check_calls`` when it is tiled (``Model.tiling``): every call, now that the model may
  have declared its basic kernels after the user kernel (the AutoTiler allows either order);
- ``check_group`` when a group's calls are given (``UserKernelGroup``).

Both generations of the model are checked alike: a newer generation's kernel (a
``KernelIterSpace``, every argument a ``KerArgSpace``) by its spaces where an older one is
checked by its ``KernelDimensions`` and ``KernelIterationOrder``.

Each error names the user kernel, the call, the binding and the values involved.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from .. import ir
from ..errors import TilingError
from .api import (
    ITEM_SIZES,
    ORDER_2,
    TILE_HOR,
    TILE_VER,
    Binding,
    CallT,
    KerArgSel,
    KerArgT,
    KerIter,
    KernelDimensionT,
    Obj,
    TCArg,
)
from .lower import c_dtype
from .solver import moves
from .spaces import OLD_KEYS, Frame, Space, elem_size, frame, kernel_spaces

# Selectors that read a tile's place in the plane: meaningless on an argument that is not cut
# into tiles (its index and offset are always 0, its count is not its own).
_TILE_PLACE = (KerArgSel.KER_ARG_NTILES, KerArgSel.KER_ARG_TILEINDEX,
               KerArgSel.KER_ARG_TILEOFFSET)
_POINTER_SELECTORS = (KerArgSel.KER_ARG_TILE, KerArgSel.KER_ARG)
# Selectors of a parametric space's tile: K_ArgPar(Name, Sel, Space) names the space.
_PAR_SELECTORS = (KerArgSel.KER_ARG_PARTILE_SIZE, KerArgSel.KER_ARG_LOADEDPARTILE_SIZE)


def show(b: Binding) -> str:
    """A binding as the model spells it: ``K_Arg('In', KER_ARG_TILE)``."""
    if b.kind == "k_arg" and b.space is not None:
        return f"K_ArgPar({b.name!r}, {KerArgSel(b.what).name}, {b.space.name})"
    if b.kind == "k_arg":
        return f"K_Arg({b.name!r}, {KerArgSel(b.what).name})"
    if b.kind == "c_arg":
        return f"C_Arg({b.name!r})"
    if b.kind == "c_arg_index":
        return f"C_ArgIndex({b.name!r}, {b.what.name}, {b.value})"
    if b.kind == "iter_index":
        return f"Ker_IteratorIndex({b.what.name})"
    if b.kind == "usymb":
        return f"UserSymb({b.name!r})"
    if b.kind == "kdim":
        return f"KerDim({('K_INP', 'K_OUTP', 'K_W', 'K_H')[b.value]})"
    if b.kind == "ignore":
        return "AT_IGNORE_ARG_BINDING"
    return f"Imm({b.value})"


def _known_dtype(ctype: str) -> np.dtype | None:
    """The element type of a C type, or None for one the tiler does not know (a struct)."""
    try:
        return c_dtype(ctype)
    except TilingError:
        return None


def _cargs(what: str, cargs) -> dict[str, TCArg]:
    """The C arguments by name; ``TilingError`` for a non-TCArg, a bad field or a duplicate."""
    out: dict[str, TCArg] = {}
    for c in cargs:
        if not isinstance(c, TCArg):
            raise TilingError(f"{what}: C arguments are TCArg(type, name), got {c!r:.80}")
        if not (isinstance(c.ArgType, str) and isinstance(c.ArgName, str) and c.ArgName):
            raise TilingError(f"{what}: TCArg({c.ArgType!r}, {c.ArgName!r}) needs a C type and "
                              f"a name, both strings")
        if c.ArgName in out:
            raise TilingError(f"{what}: C argument {c.ArgName!r} is declared twice")
        if c.shape is not None:
            shape = c.shape
            if not isinstance(shape, (tuple, list)) or not shape or any(
                    isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1
                    for n in shape):
                raise TilingError(f"{what}: C argument {c.ArgName!r} has shape {c.shape!r}; a "
                                  f"shape is a tuple of positive ints")
            if not c.is_pointer:
                raise TilingError(f"{what}: C argument {c.ArgName!r} ({c.ArgType}) is no "
                                  f"pointer; only pointers take a shape")
        out[c.ArgName] = c
    return out


def check_lib(name, call_type_ok: bool, cargs, par_arg_type, c_source, reference,
              cost) -> None:
    """A basic kernel's declaration."""
    if not isinstance(name, str) or not name:
        raise TilingError(f"LibKernel: KernelName must be a non-empty string, got {name!r}")
    what = f"LibKernel {name!r}"
    if not call_type_ok:
        raise TilingError(f"{what}: CallType must be CALL_PARALLEL or CALL_SEQUENTIAL")
    _cargs(what, cargs)
    for field, v in (("ParArgTypeName", par_arg_type), ("c_source", c_source)):
        if not isinstance(v, str):
            raise TilingError(f"{what}: {field} must be a string, got {v!r:.60}")
    for field, v in (("reference", reference), ("cost", cost)):
        if v is not None and not callable(v):
            raise TilingError(f"{what}: {field} must be a function (or None), got {v!r:.60}")


def check_kernel(uk, libs: Mapping[str, ir.Extern]) -> None:
    """A user kernel's declaration, and its calls of basic kernels already declared."""
    what = f"UserKernel {uk.name!r}"
    if uk.iter_space is None:
        if not isinstance(uk.dims, KernelDimensionT):
            raise TilingError(f"{what}: KerDim must come from KernelDimensions(...), got "
                              f"{uk.dims!r:.60}")
        if uk.order not in ORDER_2.values():
            raise TilingError(f"{what}: KerIter must come from KernelIterationOrder(...), got "
                              f"{uk.order!r:.60}")
    if uk.orientation not in (TILE_HOR, TILE_VER):
        raise TilingError(f"{what}: Orientation must be TILE_HOR or TILE_VER, got "
                          f"{uk.orientation!r}")
    cargs = _cargs(what, uk.cargs)
    kerargs: dict[str, KerArgT] = {}
    for a in uk.kerargs:
        if not isinstance(a, KerArgT):
            raise TilingError(f"{what}: KerArgs holds KerArg values; got {a!r:.80}")
        if a.KerArgName in kerargs:
            raise TilingError(f"{what}: kernel argument {a.KerArgName!r} is declared twice")
        if (a.Space is None) != (uk.iter_space is None):
            raise TilingError(f"{what}: KerArg {a.KerArgName!r} mixes the two generations: a "
                              f"KernelIterSpace kernel gives every argument a KerArgSpace, a "
                              f"KernelIterationOrder one none")
        kerargs[a.KerArgName] = a
    for a in uk.kerargs:
        if a.Alias is not None:
            alias_target(uk.name, uk.kerargs, a)
    spaces = kernel_spaces(uk.order, uk.dims, uk.iter_space)
    frames: dict[str, Frame] = {}
    bound: dict[str, str] = {}
    for a in uk.kerargs:
        if a.CArgName:
            _check_bound(what, a, cargs, bound)
        elif moves(a):
            raise TilingError(f"{what}: KerArg {a.KerArgName!r} (ObjType {a.ObjType:#x}) is "
                              f"moved to and from L1, so its home is a C argument: name it "
                              f"(CArgName), or make the argument a buffer (OBJ_BUFFER...)")
        elif a.ItemSize not in ITEM_SIZES:
            raise TilingError(f"{what}: KerArg {a.KerArgName!r} is bound to no C argument, so "
                              f"its items are C scalars: ItemSize {a.ItemSize} is not the size "
                              f"of one {ITEM_SIZES}")
        f = frame(uk.name, a, spaces, uk.order, uk.dims, uk.orientation, elem_size(cargs, a))
        frames[a.KerArgName] = f
        c = cargs.get(a.CArgName)
        # A declared shape sees the argument's elements as the caller's tensor (GAP's
        # AddKernelArgDim): the same elements, any dimensions.
        if c is not None and c.shape is not None and moves(a) and \
                math.prod(c.shape) != math.prod(f.home_shape):
            raise TilingError(f"{what}: C argument {c.ArgName!r} declares shape "
                              f"{tuple(c.shape)} but KerArg {a.KerArgName!r} makes it "
                              f"{f.home_shape} (planes x H x W): {math.prod(c.shape)} elements "
                              f"for {math.prod(f.home_shape)}; drop the shape or make them agree")
    for call in uk.calls:
        if not isinstance(call, CallT):
            raise TilingError(f"{what}: Calls holds Call values; got {call!r:.80}")
        for k, b in enumerate(call.BindingList):
            _check_binding(uk, call, k, b, cargs, frames, spaces)
        if call.CallName in libs:
            _check_call(uk, call, libs[call.CallName], cargs, kerargs)


def alias_target(kernel: str, kerargs: tuple, a: KerArgT) -> str:
    """The name of the argument whose memory ``KerArgAliased`` argument ``a`` shares (its
    Alias is a name or a position in ``KerArgs``)."""
    names = [x.KerArgName for x in kerargs]
    target = names[a.Alias] if isinstance(a.Alias, int) and 0 <= a.Alias < len(names) else a.Alias
    if target not in names or target == a.KerArgName:
        raise TilingError(f"UserKernel {kernel!r}: KerArgAliased {a.KerArgName!r} aliases "
                          f"{a.Alias!r}, not another argument of the kernel ({names})")
    return target


def _check_bound(what: str, a: KerArgT, cargs: dict, bound: dict) -> None:
    """A kernel argument bound to a C argument: a pointer to items of one or more of its
    elements, bound once."""
    if a.CArgName not in cargs:
        raise TilingError(f"{what}: KerArg {a.KerArgName!r} is bound to unknown C argument "
                          f"{a.CArgName!r} (C arguments: {list(cargs)})")
    if a.CArgName in bound:
        raise TilingError(f"{what}: KerArgs {bound[a.CArgName]!r} and {a.KerArgName!r} are both "
                          f"bound to C argument {a.CArgName!r}; bind each C argument once "
                          f"(an argument read and written is OBJ_IN_OUT...)")
    bound[a.CArgName] = a.KerArgName
    c = cargs[a.CArgName]
    if not c.is_pointer:
        raise TilingError(f"{what}: KerArg {a.KerArgName!r} is bound to C argument "
                          f"{c.ArgName!r} of type {c.ArgType!r}, which is no pointer")
    dt = c_dtype(c.ArgType)
    if a.ItemSize % dt.itemsize:
        raise TilingError(f"{what}: KerArg {a.KerArgName!r} has ItemSize {a.ItemSize} but C "
                          f"argument {c.ArgName!r} ({c.ArgType}) points to {dt.name} "
                          f"({dt.itemsize} B); an item is one of them or several")


def _loops(uk, spaces: tuple[Space, ...]) -> str:
    if uk.iter_space is not None:
        return ", ".join(f"KER_ITER_{s.key.upper()}" for s in spaces)
    return ", ".join(i.name for i in uk.order)


def _walks(uk, spaces: tuple[Space, ...], it) -> bool:
    """Whether the kernel has the loop ``it`` (an older iterator or a newer space)."""
    key = it.key if isinstance(it, KerIter) else OLD_KEYS.get(it)
    if uk.iter_space is None and not isinstance(it, KerIter):
        return it in uk.order
    return key in {s.key for s in spaces}


def _check_binding(uk, call: CallT, k: int, b: Binding, cargs: dict, frames: dict,
                   spaces: tuple[Space, ...]) -> None:
    """One binding against the user kernel's own names (no basic kernel needed)."""
    where = (f"UserKernel {uk.name!r}, call {call.CallName} ({call.CallLocation.name}), "
             f"binding {k} {show(b)}")
    if b.kind == "k_arg":
        if b.name not in frames:
            raise TilingError(f"{where}: no kernel argument {b.name!r} (KerArgs: "
                              f"{list(frames)})")
        f = frames[b.name]
        a = f.arg
        cut = a.has(Obj.O_TILED) or a.has(Obj.O_DYNTILE) if a.Space is None else \
            f.group is not None
        if b.what in _TILE_PLACE and not cut:
            raise TilingError(f"{where}: {b.name!r} is not tiled (ObjType {a.ObjType:#x} has "
                              f"no O_TILED{'' if a.Space is None else ', no tiled space'}): it "
                              f"has no tile count, index or offset of its own")
        if b.what in _PAR_SELECTORS:
            par = {s.key for s in spaces if s.kind != "tiled"}
            if b.space is None or b.space.key not in par:
                raise TilingError(f"{where}: {KerArgSel(b.what).name} is the tile of a "
                                  f"parametric space of the kernel, named by K_ArgPar(Name, "
                                  f"Sel, Space) (its untiled spaces: "
                                  f"{sorted(par) or 'none'})")
    elif b.kind in ("c_arg", "c_arg_index"):
        if b.name not in cargs:
            raise TilingError(f"{where}: no C argument {b.name!r} (CArgs: {list(cargs)})")
        if b.kind == "c_arg_index":
            if not cargs[b.name].is_pointer:
                raise TilingError(f"{where}: C argument {b.name!r} ({cargs[b.name].ArgType}) is "
                                  f"no pointer; C_ArgIndex subscripts a pointer")
            if not _walks(uk, spaces, b.what):
                raise TilingError(f"{where}: the kernel iterates over {_loops(uk, spaces)}, "
                                  f"not {b.what.name}: the index would always be 0")
    elif b.kind == "usymb":
        symbols = dict(uk.dims.symbols)
        if b.name not in symbols:
            raise TilingError(f"{where}: no user symbol {b.name!r} (declared with "
                              f"KernelDimensionsAndUserSymbols: {sorted(symbols) or 'none'})")


def _is_pointer_binding(b: Binding, cargs: dict) -> bool:
    if b.kind == "k_arg":
        return b.what in _POINTER_SELECTORS
    return b.kind == "c_arg" and cargs[b.name].is_pointer


def _check_call(uk, call: CallT, lib: ir.Extern, cargs: dict, kerargs: dict) -> None:
    """A call against its basic kernel: argument count, pointer or scalar, pointee size,
    immediates that fit their C type."""
    head = f"UserKernel {uk.name!r}, call {call.CallName} ({call.CallLocation.name})"
    if len(call.BindingList) != len(lib.args):
        raise TilingError(f"{head}: basic kernel {lib.name} takes {len(lib.args)} arguments "
                          f"({', '.join(n for _, n in lib.args)}), the call binds "
                          f"{len(call.BindingList)}")
    for k, (b, (ctype, pname)) in enumerate(zip(call.BindingList, lib.args)):
        if b.kind == "ignore":  # AT_IGNORE_ARG_BINDING leaves the argument unset
            continue
        where = f"{head}, binding {k} {show(b)} for {pname} ({ctype})"
        pointer = "*" in ctype
        if pointer != _is_pointer_binding(b, cargs):
            raise TilingError(f"{where}: passes {'a scalar' if pointer else 'a pointer'} to "
                              f"{'a pointer' if pointer else 'a scalar'} argument")
        want = _known_dtype(ctype)
        if want is None:
            continue
        if pointer:
            size = elem_size(cargs, kerargs[b.name]) if b.kind == "k_arg" else \
                c_dtype(cargs[b.name].ArgType).itemsize
            if size != want.itemsize:
                raise TilingError(f"{where}: points to items of {size} B, but {pname} points "
                                  f"to {want.name} ({want.itemsize} B)")
        elif b.kind == "imm" and want.kind in "iu":
            info = np.iinfo(want)
            if not info.min <= b.value <= info.max:
                raise TilingError(f"{where}: {b.value} does not fit {want.name} "
                                  f"({info.min}..{info.max})")


def check_calls(uk, libs: Mapping[str, ir.Extern]) -> None:
    """Every call of a user kernel names a declared basic kernel and fits it."""
    cargs = {c.ArgName: c for c in uk.cargs}
    kerargs = {a.KerArgName: a for a in uk.kerargs}
    for call in uk.calls:
        if call.CallName not in libs:
            raise TilingError(f"UserKernel {uk.name!r}, call {call.CallName} "
                              f"({call.CallLocation.name}): unknown basic kernel "
                              f"{call.CallName!r}; declare it with LibKernel (basic kernels: "
                              f"{sorted(libs)})")
        _check_call(uk, call, libs[call.CallName], cargs, kerargs)


def check_group(name: str, members: tuple[str, ...], cargs, calls, kernels: Mapping) -> None:
    """A group's C arguments and its calls of its user kernels: each call binds every C
    argument of the kernel, a pointer to a group pointer of the same element type."""
    what = f"UserKernelGroup {name!r}"
    group = _cargs(what, cargs)
    for call in calls:
        if not isinstance(call, CallT):
            raise TilingError(f"{what}: Calls holds UserKernelCall values; got {call!r:.80}")
        if call.CallName not in members:
            raise TilingError(f"{what}: {call.CallName!r} is not a user kernel of the group "
                              f"{list(members)}")
        uk = kernels[call.CallName]
        head = f"{what}, call {call.CallName}"
        if len(call.BindingList) != len(uk.cargs):
            raise TilingError(f"{head}: {uk.name} takes {len(uk.cargs)} C arguments "
                              f"({', '.join(c.ArgName for c in uk.cargs)}), the call binds "
                              f"{len(call.BindingList)}")
        for k, (b, c) in enumerate(zip(call.BindingList, uk.cargs)):
            where = f"{head}, binding {k} {show(b)} for {c.ArgName} ({c.ArgType})"
            if b.kind == "imm":
                if c.is_pointer:
                    raise TilingError(f"{where}: an immediate for a pointer argument")
                continue
            if b.name not in group:
                raise TilingError(f"{where}: no group C argument {b.name!r} (CArgs: "
                                  f"{list(group)})")
            g = group[b.name]
            if g.is_pointer != c.is_pointer:
                raise TilingError(f"{where}: group argument {g.ArgName!r} ({g.ArgType}) is "
                                  f"{'a pointer' if g.is_pointer else 'no pointer'}, "
                                  f"{c.ArgName} is {'a pointer' if c.is_pointer else 'not'}")
            mine, theirs = _known_dtype(c.ArgType), _known_dtype(g.ArgType)
            if c.is_pointer and mine is not None and theirs is not None and mine != theirs:
                raise TilingError(f"{where}: group argument {g.ArgName!r} points to "
                                  f"{theirs.name}, {c.ArgName} to {mine.name}")
