"""Targets are data: TOML files under ``npukit/targets/`` describe memories, transfer
engines, compute units, arithmetic rules and LUT banks. Code reads these values and never
asks which target it runs on.

>>> t = target("torq")
>>> t.memories["IRAM"].size, t.units["act"].width("int8", "int8")
(288, 16)
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .costs import FAMILIES, CostModel
from .dtypes import dtype as _dtype
from .errors import DTypeError, TargetError

_BUILTIN = Path(__file__).parent / "targets"
ROUNDING_MODES = ("half_up", "half_even", "floor")


class FrozenMap(Mapping):
    """A read-only mapping that pickles (``types.MappingProxyType`` does not, and programs
    carry their target). Equal to any mapping with the same items.

    >>> m = FrozenMap({"IRAM": 288})
    >>> m["IRAM"], m == {"IRAM": 288}
    (288, True)
    """

    def __init__(self, items: Mapping | None = None):
        self._items = dict(items or {})

    def __getitem__(self, key):
        return self._items[key]

    def __iter__(self) -> Iterator:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"FrozenMap({self._items!r})"


@dataclass(frozen=True)
class Memory:
    name: str
    size: int  # bytes


@dataclass(frozen=True)
class Engine:
    """A transfer engine moving data from any of ``src`` to any of ``dst`` memories."""

    name: str
    src: tuple[str, ...]
    dst: tuple[str, ...]
    bandwidth: float  # bytes per cycle
    latency: int  # cycles to start one transfer

    def cycles(self, nbytes: int) -> int:
        """``latency + ceil(bytes / bandwidth)``: the cost of one transfer."""
        return self.latency + math.ceil(nbytes / self.bandwidth)


@dataclass(frozen=True)
class Unit:
    """A compute unit: vector width in elements per (input dtype, weight dtype) pair."""

    name: str
    widths: Mapping[tuple[str, str], int]
    latency: int
    # Other sizes of the unit a front end may ask for (``[units.NAME.sizes]``), e.g. the
    # Torq ALU's weight segment and kernel width.
    sizes: Mapping[str, int] = field(default_factory=lambda: FrozenMap({}))

    def width(self, in_dtype, w_dtype=None) -> int:
        """Elements per instruction for ``in_dtype`` x ``w_dtype`` (``None``: no weights)."""
        key = (_dtype(in_dtype).name, "none" if w_dtype is None else _dtype(w_dtype).name)
        if key not in self.widths:
            known = ", ".join(f"{a}x{b}" for a, b in self.widths)
            raise DTypeError(f"unit {self.name!r} has no width for {key[0]} x {key[1]}; "
                             f"it supports {known}")
        return self.widths[key]


@dataclass(frozen=True)
class Arith:
    rounding: str  # one of ROUNDING_MODES
    saturate: bool


@dataclass(frozen=True)
class LutBanks:
    """Table hardware: ``banks`` parallel table accesses (the AIE API's 1, 2 or 4: the memory
    image a table takes), ``bank_bits`` the bank width, ``memory`` the memory that holds
    tables (``None``: the target runs no LUT instructions)."""

    banks: int
    bank_bits: int
    memory: str | None = None


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    clock_mhz: float
    cores: int
    home: str  # memory where kernel parameters live
    memories: Mapping[str, Memory]
    engines: Mapping[str, Engine]
    units: Mapping[str, Unit]
    arith: Arith
    lut: LutBanks
    path: str
    costs: CostModel  # the prices of basic kernel calls (``npukit.costs``)

    def engine(self, src: str, dst: str) -> Engine:
        """The engine that moves data from memory ``src`` to ``dst``."""
        for e in self.engines.values():
            if src in e.src and dst in e.dst:
                return e
        raise TargetError(f"target {self.name!r} has no transfer engine from {src} to {dst} "
                          f"(engines: {', '.join(self.engines)})")


def targets() -> list[str]:
    """Names of the built-in targets: ``targets() == ['compass', 'gap8', 'torq']``."""
    return sorted(p.stem for p in _BUILTIN.glob("*.toml"))


def target(name: str | Path | Target) -> Target:
    """A target: a built-in one by name (``target("torq")``), a TOML file of your own by
    path (a ``pathlib.Path``, or a str ending in ``.toml``: ``target("my_npu.toml")``,
    see docs/targets.md), or a ``Target``, which passes through."""
    if isinstance(name, Target):
        return name
    if isinstance(name, Path) or (isinstance(name, str) and name.endswith(".toml")):
        return load_target(name)
    if isinstance(name, str) and name in targets():
        return load_target(_BUILTIN / f"{name}.toml")
    raise TargetError(f"unknown target {name!r}; built-in targets: {', '.join(targets())}; "
                      f"or the path of a target file of your own, ending in .toml "
                      f"(see docs/targets.md)")


def load_target(path: str | Path) -> Target:
    """Load and validate a target TOML file; errors name the file, the key and what was
    expected."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise TargetError(f"{path}: cannot read target: {exc}") from exc
    r = _Reader(path, raw)
    memories = {k: Memory(k, r.int(f"memories.{k}.size", minimum=1)) for k in r.table("memories")}
    engines = {}
    for k in r.table("engines"):
        key = f"engines.{k}"
        src, dst = r.names(f"{key}.src", memories), r.names(f"{key}.dst", memories)
        engines[k] = Engine(k, src, dst, r.number(f"{key}.bandwidth"), r.int(f"{key}.latency"))
    units = {}
    for k in r.table("units"):
        widths = {}
        for pair in r.table(f"units.{k}.width"):
            a, _, b = pair.partition(",")
            try:
                w = b.strip()
                key = (_dtype(a.strip()).name, "none" if w == "none" else _dtype(w).name)
            except DTypeError as exc:
                raise TargetError(f"{path}: key units.{k}.width.{pair!r}: expected "
                                  f"'<dtype>,<dtype or none>': {exc}") from exc
            widths[key] = r.int(f"units.{k}.width.{pair}", minimum=1,
                                raw_key=(f"units.{k}.width", pair))
        sizes = {n: r.int(f"units.{k}.sizes.{n}", minimum=1) for n in
                 (r.table(f"units.{k}.sizes") if "sizes" in r.raw["units"][k] else ())}
        units[k] = Unit(k, FrozenMap(widths), r.int(f"units.{k}.latency"), FrozenMap(sizes))
    rounding = r.get("arith.rounding", str)
    if rounding not in ROUNDING_MODES:
        raise TargetError(f"{path}: key arith.rounding: expected one of {ROUNDING_MODES}, "
                          f"got {rounding!r}")
    lut_memory = r.get("lut.memory", str) if "memory" in raw.get("lut", {}) else None
    if lut_memory is not None and lut_memory not in memories:
        raise TargetError(f"{path}: key lut.memory: expected a memory name "
                          f"({', '.join(memories)}), got {lut_memory!r}")
    home = r.get("home", str)
    if home not in memories:
        raise TargetError(f"{path}: key home: expected a memory name ({', '.join(memories)}), "
                          f"got {home!r}")
    return Target(
        name=r.get("name", str), description=r.get("description", str),
        clock_mhz=r.number("clock_mhz"), cores=r.int("cores", minimum=1), home=home,
        memories=FrozenMap(memories), engines=FrozenMap(engines),
        units=FrozenMap(units),
        arith=Arith(rounding, r.get("arith.saturate", bool)),
        lut=LutBanks(r.int("lut.banks", minimum=1), r.int("lut.bank_bits", minimum=8),
                     lut_memory),
        path=str(path.resolve()), costs=_costs(r, units))


def _costs(r: _Reader, units: Mapping[str, Unit]) -> CostModel:
    """The ``[costs]`` table (``npukit.costs``); without one, the default model, a call
    costing the first compute unit's latency. A family the table leaves out costs one cycle
    per operation."""
    call = next(iter(units.values())).latency if units else 1
    if "costs" not in r.raw:
        return CostModel.default(call)
    for key in r.table("costs"):
        if key not in ("calibration", "accuracy", "call", "fork", "layer", "op"):
            raise r._fail(f"costs.{key}", "one of calibration, accuracy, call, fork, layer, op",
                          key)
    given = r.table("costs.op") if "op" in r.raw["costs"] else []
    unknown = [f for f in given if f not in FAMILIES]
    if unknown:
        raise r._fail(f"costs.op.{unknown[0]}", f"a family from {list(FAMILIES)}", unknown[0])
    op = FrozenMap({f: r.price(f"costs.op.{f}") if f in given else 1.0 for f in FAMILIES})
    return CostModel(r.price("costs.call"), r.price("costs.fork"), r.price("costs.layer"), op,
                     r.get("costs.calibration", str), r.get("costs.accuracy", str))


class _Reader:
    """Typed access to dotted keys of a parsed TOML document, failing with the file and key."""

    def __init__(self, path: Path, raw: dict):
        self.path, self.raw = path, raw

    def _fail(self, key: str, expected: str, got: Any = None) -> TargetError:
        tail = "missing" if got is None else f"got {got!r}"
        return TargetError(f"{self.path}: key {key}: expected {expected}, {tail}")

    def get(self, key: str, kind: type, raw_key: tuple[str, str] | None = None) -> Any:
        node: Any = self.raw
        parts = [*raw_key[0].split("."), raw_key[1]] if raw_key else key.split(".")
        for part in parts:
            if not isinstance(node, dict) or part not in node:
                raise self._fail(key, kind.__name__)
            node = node[part]
        if kind is float and isinstance(node, int) and not isinstance(node, bool):
            node = float(node)
        if not isinstance(node, kind) or (kind is int and isinstance(node, bool)):
            raise self._fail(key, kind.__name__, node)
        return node

    def int(self, key: str, minimum: int = 0, raw_key=None) -> int:
        v = self.get(key, int, raw_key)
        if v < minimum:
            raise self._fail(key, f"an integer >= {minimum}", v)
        return v

    def number(self, key: str) -> float:
        v = self.get(key, float)
        if v <= 0:
            raise self._fail(key, "a positive number", v)
        return v

    def price(self, key: str) -> float:
        v = self.get(key, float)
        if not v >= 0 or math.isinf(v):
            raise self._fail(key, "a number of cycles >= 0", v)
        return v

    def table(self, key: str) -> list[str]:
        return list(self.get(key, dict))

    def names(self, key: str, memories: Mapping[str, Memory]) -> tuple[str, ...]:
        v = self.get(key, list)
        bad = [m for m in v if not isinstance(m, str) or m not in memories]
        if not v or bad:
            raise self._fail(key, f"a list of memory names from {list(memories)}", v)
        return tuple(v)
