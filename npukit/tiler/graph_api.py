"""The GAP AutoTiler's graph vocabulary (``AutoTilerLib.h``): memory locations, graph
controls, C arguments with location information, constant descriptors and node bindings.
The model-level calls (``CreateGraph``, ``AddNode``, ...) are ``Model`` methods."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

import numpy as np

from ..cdecl import identifier, parse_ctype
from ..errors import TilingError


class AT_MemLocation(IntEnum):
    """Memory devices and levels (GAP's ``AT_MemLocation_T``)."""

    AT_MEM_UNDEF = 0
    AT_MEM_L3_HRAM = 1
    AT_MEM_L3_QSPIRAM = 2
    AT_MEM_L3_OSPIRAM = 3
    AT_MEM_L3_DEFAULTRAM = 4
    AT_MEM_L3_HFLASH = 5
    AT_MEM_L3_QSPIFLASH = 6
    AT_MEM_L3_OSPIFLASH = 7
    AT_MEM_L3_MRAMFLASH = 8
    AT_MEM_L3_DEFAULTFLASH = 9
    AT_MEM_L2 = 10
    AT_MEM_L1 = 11
    AT_MEM_L3_PRI1 = 12
    AT_MEM_L3_PRI2 = 13


globals().update({m.name: m for m in AT_MemLocation})
L3_RAMS = frozenset({AT_MemLocation.AT_MEM_L3_HRAM, AT_MemLocation.AT_MEM_L3_QSPIRAM,
                     AT_MemLocation.AT_MEM_L3_OSPIRAM, AT_MemLocation.AT_MEM_L3_DEFAULTRAM})
L3_FLASHES = frozenset({AT_MemLocation.AT_MEM_L3_HFLASH, AT_MemLocation.AT_MEM_L3_QSPIFLASH,
                        AT_MemLocation.AT_MEM_L3_OSPIFLASH, AT_MemLocation.AT_MEM_L3_MRAMFLASH,
                        AT_MemLocation.AT_MEM_L3_DEFAULTFLASH})

# Each L3 device as the generated code names it: (C variable, macro prefix, event prefix).
DEVICES = {
    AT_MemLocation.AT_MEM_L3_HRAM: ("HyperRam", "AT_HYPERRAM", "UchanHR"),
    AT_MemLocation.AT_MEM_L3_QSPIRAM: ("QspiRam", "AT_QSPIRAM", "UchanQR"),
    AT_MemLocation.AT_MEM_L3_OSPIRAM: ("OspiRam", "AT_OSPIRAM", "UchanOR"),
    AT_MemLocation.AT_MEM_L3_DEFAULTRAM: ("DefaultRam", "AT_DEFAULTRAM", "UchanHR"),
    AT_MemLocation.AT_MEM_L3_HFLASH: ("HyperFlash", "AT_HYPERFLASH_FS", "UchanHF"),
    AT_MemLocation.AT_MEM_L3_QSPIFLASH: ("QspiFlash", "AT_QSPIFLASH_FS", "UchanQF"),
    AT_MemLocation.AT_MEM_L3_OSPIFLASH: ("OspiFlash", "AT_OSPIFLASH_FS", "UchanOF"),
    AT_MemLocation.AT_MEM_L3_MRAMFLASH: ("MramFlash", "AT_EMRAMFLASH_FS", "UchanMF"),
    AT_MemLocation.AT_MEM_L3_DEFAULTFLASH: ("DefaultFlash", "AT_DEFAULTFLASH_FS", "UchanHF"),
}


class AT_GraphCtrl(IntEnum):
    """The code generation options of ``AT_SetGraphCtrl`` (GAP's ``AT_GraphCtrl_T``)."""

    AT_KERNEL_BUFFER_PROMOTE = 0
    AT_KERNEL_PARTIAL_BUFFER_PROMOTE = 1
    AT_KERNEL_NOSOLUTION_ERROR = 2
    AT_GRAPH_MONITOR_CYCLES = 3
    AT_GRAPH_MONITOR_CVAR_NAME = 4
    AT_GRAPH_PRODUCE_NODE_NAMES = 5
    AT_GRAPH_PRODUCE_NODE_CVAR_NAME = 6
    AT_GRAPH_PRODUCE_OPERINFOS = 7
    AT_GRAPH_PRODUCE_OPERINFOS_CVAR_NAME = 8
    AT_GRAPH_REORDER_CONSTANT_IN = 9
    AT_GRAPH_TRACE_EXEC = 10
    AT_GRAPH_NOINLINE_NODE = 11
    AT_GRAPH_PREF_L3_EXEC = 12
    AT_GRAPH_CONST_EXEC_FROM_FLASH = 13
    AT_GRAPH_PREF_L3_HOME = 14
    AT_GRAPH_PRIVILEGED_L3_HOME = 15
    AT_GRAPH_DUMP_TENSOR = 16
    AT_GRAPH_DUMP_TENSOR_TO_FILE = 17
    AT_GRAPH_DUMP_ONE_NODE = 18
    AT_GRAPH_ARG2STRUCT = 19
    AT_GRAPH_SIZE_OPT = 20
    AT_GRAPH_WARM_CONSTRUCT = 21
    AT_GRAPH_CHECKSUM = 22
    AT_GRAPH_GROUP_WEIGHTS = 23
    AT_GRAPH_ASYNC_FORK = 24
    AT_GRAPH_DUMP_GRAPH_OUTPUTS = 25
    AT_GRAPH_RUNNER_RE_ENTRANT = 26
    AT_GRAPH_L1_PROMOTION = 27
    AT_GRAPH_DISABLE_CONST_L2_PROMOTION = 28
    AT_GRAPH_USE_MERGED_DMA = 29
    AT_GRAPH_L2_STATIC_MEMORY_BUDGET = 30
    AT_GRAPH_L3_STATIC_MEMORY_BUDGET = 31


globals().update({c.name: c for c in AT_GraphCtrl})

# The controls npukit implements, with their defaults (the document's).
GRAPH_CTRL_DEFAULTS = {
    AT_GraphCtrl.AT_GRAPH_TRACE_EXEC: 1,
    AT_GraphCtrl.AT_GRAPH_WARM_CONSTRUCT: 0,
    AT_GraphCtrl.AT_GRAPH_DISABLE_CONST_L2_PROMOTION: 0,
    AT_GraphCtrl.AT_GRAPH_CONST_EXEC_FROM_FLASH: 0,
    AT_GraphCtrl.AT_GRAPH_L2_STATIC_MEMORY_BUDGET: None,
    AT_GraphCtrl.AT_GRAPH_L3_STATIC_MEMORY_BUDGET: 0,
    AT_GraphCtrl.AT_GRAPH_PREF_L3_EXEC: None,
    AT_GraphCtrl.AT_GRAPH_PREF_L3_HOME: None,
    AT_GraphCtrl.AT_GRAPH_PRODUCE_NODE_NAMES: 0,
    AT_GraphCtrl.AT_GRAPH_PRODUCE_NODE_CVAR_NAME: "AT_GraphNodeNames",
    AT_GraphCtrl.AT_GRAPH_PRODUCE_OPERINFOS: 0,
    AT_GraphCtrl.AT_GRAPH_PRODUCE_OPERINFOS_CVAR_NAME: "AT_GraphOperInfosNames",
    # Lays constants out tile by tile so their tiles move in 1-D transfers. npukit keeps every
    # constant in its own row-major layout: the values are the same either way and a
    # transfer's modelled cost counts bytes, not rows, so ON and OFF give the same results,
    # plan and cycles; accepted so that models which set it run.
    AT_GraphCtrl.AT_GRAPH_REORDER_CONSTANT_IN: 1,
}

AT_OPT_ON, AT_OPT_OFF = 1, 0


def AT_OPT_VAL(Val):
    """A control's value (``AT_OPT_VAL(WARM_ALL)``)."""
    return Val


WARM_DISABLED, WARM_L1, WARM_L2_DYN_L1, WARM_ALL = 0, 1, 2, 3


class AT_MEM_TYPE(IntEnum):
    """What ``<Graph>_Memory(Which)`` reports."""

    AT_L1_MEM = 0
    AT_L2_MEM = 1
    AT_L2_DYN_MEM = 2
    AT_L3_MEM = 3
    AT_L3_DYN_MEM = 4
    AT_CTXT_MEM = 5


globals().update({m.name: m for m in AT_MEM_TYPE})


class ArgScope(IntEnum):
    ARG_SCOPE_UNDEF = 0
    ARG_SCOPE_ARG = 1
    ARG_SCOPE_ARG_ALLOC = 2
    ARG_SCOPE_GLOBAL = 3
    ARG_SCOPE_LOCAL = 4


class ArgDirection(IntEnum):
    ARG_DIR_UNDEF = 0
    ARG_DIR_IN = 1
    ARG_DIR_CONSTIN = 2
    ARG_DIR_OUT = 3
    ARG_DIR_INOUT = 4


class GNodeArgType(IntEnum):
    GNA_UNDEF = 0
    GNA_IN = 1
    GNA_OUT = 2
    GNA_INOUT = 3


globals().update({m.name: m for e in (ArgScope, ArgDirection, GNodeArgType) for m in e})

@dataclass(frozen=True)
class ConstInitT:
    """A constant's initial values: ``source`` a numpy array or a file path. ``Format`` 0:
    floating point values, converted to fixed point with ``Fract`` fraction bits (kept as is
    for a float tensor); 1: values already in fixed point. ``Binary`` 1: a binary file of
    little-endian values (``Size``-bit integers for fixed point, float32 for floating
    point); 0: a text file of numbers separated by spaces, commas or new lines. ``Size``:
    the fixed point container's bits (must match the tensor's C type)."""

    source: object
    Format: int
    Binary: int
    Size: int
    Fract: int

    def values(self, tensor: str, dtype: np.dtype, count: int, const_dir: str | None) -> np.ndarray:
        """The ``count`` values of the tensor as ``dtype``; ``TilingError`` naming the tensor
        for a missing file, a size or format mismatch, or a value the type cannot hold."""
        dtype = np.dtype(dtype)
        what = f"ConstInfo of {tensor!r}"
        if dtype.kind != "f" and self.Size != 8 * dtype.itemsize:
            raise TilingError(f"{what}: Size {self.Size} bits but the tensor is {dtype.name}")
        if isinstance(self.source, (str, Path)):
            raw = self._read(what, dtype, const_dir)
        else:
            raw = np.asarray(self.source)
        if raw.size != count:
            raise TilingError(f"{what}: {raw.size} values but the tensor has {count} elements")
        raw = raw.reshape(-1)
        if dtype.kind == "f" or raw.dtype == dtype and self.Format == 1:
            return raw.astype(dtype)  # integers of the tensor's type as given (int64 whole)
        if self.Format == 0:
            scaled = np.floor(raw.astype(np.float64) * 2.0 ** self.Fract + 0.5)
        else:
            scaled = raw.astype(np.float64)
            if not np.array_equal(scaled, np.round(scaled)):
                raise TilingError(f"{what}: Format 1 (fixed point) but the values are not "
                                  f"integers")
        info = np.iinfo(dtype)
        bad = (scaled < info.min) | (scaled > info.max)
        if bad.any():
            k = int(np.argmax(bad))
            raise TilingError(f"{what}: value {raw[k]} (element {k}) does not fit {dtype.name} "
                              f"in Q{self.Fract if self.Format == 0 else 0}")
        return scaled.astype(dtype)

    def _read(self, what: str, dtype: np.dtype, const_dir: str | None) -> np.ndarray:
        path = Path(self.source)
        if not path.is_absolute() and const_dir is not None:
            path = Path(const_dir) / path
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise TilingError(f"{what}: cannot read {str(path)!r}: {exc.strerror}") from None
        if self.Binary:
            fmt = np.dtype("<f4") if self.Format == 0 or dtype.kind == "f" else \
                np.dtype(f"<i{self.Size // 8}")
            if len(data) % fmt.itemsize:
                raise TilingError(f"{what}: {str(path)!r} holds {len(data)} B, not a whole "
                                  f"number of {fmt.itemsize}-byte values")
            return np.frombuffer(data, fmt)
        try:
            return np.array([float(x) for x in re.split(r"[\s,]+", data.decode()) if x])
        except ValueError as exc:
            raise TilingError(f"{what}: {str(path)!r} is not a text file of numbers: "
                              f"{exc}") from None


def ConstInfo(FileName, Format: int, Binary: int, Size: int, Fract: int) -> ConstInitT:
    """A descriptor for an initialised constant: ``FileName`` a path (relative to
    ``Model.SetConstDir``'s folder, else to the working directory) or a numpy array.
    ``Size`` 8, 16 or 32 bits as the GAP AutoTiler takes, or 64 (npukit's int64 tensors)."""
    if int(Size) not in (8, 16, 32, 64):
        raise TilingError(f"ConstInfo: Size must be 8, 16, 32 or 64 bits, got {Size}")
    return ConstInitT(FileName, int(Format), int(Binary), int(Size), int(Fract))


@dataclass(frozen=True)
class TCArgInfoT:
    """A graph C argument: its C type and name, scope (argument, global constant or local),
    direction, home and execution locations, and its initial values (constants)."""

    ArgType: str
    ArgName: str
    Scope: ArgScope
    Dir: ArgDirection
    HomeLoc: AT_MemLocation
    ExecLoc: AT_MemLocation
    ConstInit: ConstInitT | None

    @property
    def kind(self) -> str:
        """"arg", "const" or "local"."""
        return {ArgScope.ARG_SCOPE_LOCAL: "local", ArgScope.ARG_SCOPE_GLOBAL: "const"}.get(
            self.Scope, "arg")

    @property
    def in_l3(self) -> bool:
        """Its home or execution location is an L3 device."""
        return bool({self.HomeLoc, self.ExecLoc} & (L3_RAMS | L3_FLASHES))


def TCArgInfo(ArgType: str, ArgName: str, Scope: int, Dir: int, HomeLoc: int, ExecLoc: int,
              ConstInit: ConstInitT | int | None = None) -> TCArgInfoT:
    """A C argument with location information (``ConstInit`` 0 when none)."""
    identifier(ArgName, "TCArgInfo: argument name")
    if not parse_ctype(ArgType, f"TCArgInfo {ArgName!r}").pointer:
        raise TilingError(f"TCArgInfo {ArgName!r}: type {ArgType!r} must be a pointer type")
    init = ConstInit or None
    if init is not None and not isinstance(init, ConstInitT):
        raise TilingError(f"TCArgInfo {ArgName!r}: the last argument must be ConstInfo(...) "
                          f"or 0")
    return TCArgInfoT(ArgType, ArgName, ArgScope(Scope), ArgDirection(Dir),
                      AT_MemLocation(HomeLoc), AT_MemLocation(ExecLoc), init)


@dataclass(frozen=True)
class GNodeArgT:
    Type: GNodeArgType
    ArgName: str
    AliasedArgName: str | None


def GNodeArg(Type: int, ArgName: str, AliasedArgName=None) -> GNodeArgT:
    """Binds a node's C argument, in order, to graph tensor ``ArgName`` (``GNA_IN``,
    ``GNA_OUT`` or ``GNA_INOUT``); aliasing (``AliasedArgName``) is not supported."""
    if AliasedArgName:
        raise TilingError(f"GNodeArg {ArgName!r}: aliasing ({AliasedArgName!r}) is not "
                          f"supported")
    return GNodeArgT(GNodeArgType(Type), ArgName, None)


__all__ = (["AT_MemLocation", "AT_GraphCtrl", "AT_MEM_TYPE", "ArgScope", "ArgDirection",
            "GNodeArgType", "AT_OPT_ON", "AT_OPT_OFF", "AT_OPT_VAL", "WARM_DISABLED", "WARM_L1",
            "WARM_L2_DYN_L1", "WARM_ALL", "ConstInfo", "TCArgInfo", "GNodeArg", "ConstInitT",
            "TCArgInfoT", "GNodeArgT"]
           + [m.name for e in (AT_MemLocation, AT_GraphCtrl, AT_MEM_TYPE, ArgScope, ArgDirection,
                               GNodeArgType) for m in e])
