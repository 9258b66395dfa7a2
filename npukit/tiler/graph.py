"""Graphs of user kernels, as the GAP AutoTiler's graph mode builds them: ``CreateGraph``,
``AddNode``, ``CloseGraph`` (``Model`` methods, ``GraphModel``), then ``Model.graph(name)``:
a ``Graph`` with its memory plan (``planner``), one IR program per layer (the user kernel
lowered with the plan's L3 streams) and the runs on both back ends.

A run is a sequence of IR programs over flat memory areas, as on GAP: the static and
dynamic L2 areas, the static and dynamic L3 RAM areas and the flash image; the constructor
copies promoted constants from flash into L2 (and L3), each layer's program reads and writes
its tensors where the plan put them, and a constant fetched early is copied into the dynamic
L2 area before the layer that issues it. The simulator runs each program on views of the
areas (tensors the plan overlaps share bytes, as they would in L2); the timeline runs all of
them as one program, a layer starting when the previous one has finished, so the report has
cycles per layer and the L3 traffic.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

import numpy as np

from .. import ir
from ..cdecl import file_name, identifier, parse_ctype
from ..errors import NpukitError, ShapeError, TilingError
from ..layout import Layout
from ..poison import poison
from ..result import Result
from . import planner as P
from .api import Obj, _enum, integer
from .graph_api import (
    GRAPH_CTRL_DEFAULTS,
    L3_FLASHES,
    L3_RAMS,
    ArgDirection,
    ArgScope,
    AT_GraphCtrl,
    AT_MemLocation,
    GNodeArgT,
    GNodeArgType,
    TCArgInfoT,
)
from .lower import c_dtype
from .solver import Tiling, moves

MEMORY = {"L2": "L2", "L3": "L3_RAM", "L3_FLASH": "L3_FLASH"}  # plan memory -> target memory


@dataclass(frozen=True)
class GraphSpec:
    name: str
    args: Mapping[str, TCArgInfoT]
    nodes: tuple[tuple[str, tuple[GNodeArgT, ...]], ...]


@dataclass(frozen=True)
class GraphTensor(P.Placement):
    """A tensor of the graph: where the plan put it (the fields of ``planner.Placement``:
    ``name``, ``memory``, ``area``, ``offset``, ``size``, ``flash``, ``live``) and how the
    graph declares it."""

    kind: str  # "arg", "const" or "local"
    ctype: str
    dtype: np.dtype
    count: int


@dataclass(frozen=True)
class GraphLayer:
    """One node: its user kernel's tiling, which tensor each C argument is bound to, the
    operands streamed from L3 and the IR program that runs it."""

    name: str
    tiling: Tiling
    bindings: Mapping[str, str]  # C argument -> tensor
    streamed: frozenset[str]
    program: ir.Program
    staging: tuple[int, int]  # (offset, bytes) of its L3 stream buffers in the dynamic L2 area


@dataclass(frozen=True)
class GraphReport:
    """The simulator's measurements of one run: total and per-layer cycles (the
    constructor's promotions apart), bytes moved per memory, and the whole timeline."""

    cycles: int
    layers: Mapping[str, int]
    construct_cycles: int
    timeline: object  # npukit.sim.timing.Report
    spans: Mapping[str, tuple[int, int]]  # each layer's (start, end) cycle on the timeline

    @property
    def bytes_moved(self) -> dict[str, int]:
        return dict(self.timeline.bytes_moved)

    def save_trace(self, path: str) -> None:
        """Write the run as Chrome trace-event JSON (open in Perfetto): one span per layer,
        named by the layer, on the first row; its tiles' transfers and compute steps on one
        row per unit beneath, 1 cycle = 1 µs of trace time."""
        self.timeline.save_trace(path, self._layer_events())

    def save_png(self, path: str) -> None:
        """Draw the run as a PNG: a row of layers above one row per unit; needs matplotlib
        (``npukit[plot]``)."""
        self.timeline.save_png(path, self._layer_events())

    def _layer_events(self) -> list[tuple[str, str, int, int]]:
        return [("layers", name, s, e) for name, (s, e) in self.spans.items()]

    @property
    def microseconds(self) -> float:
        """``cycles`` as time at the target's clock."""
        return self.cycles / self.timeline.clock_mhz

    def __str__(self) -> str:
        mhz = self.timeline.clock_mhz
        rows = [f"{self.cycles} cycles, {self.microseconds:.1f} us at {mhz:g} MHz "
                f"({self.construct_cycles} more cycles in the constructor)"]
        rows += [f"  {name:<28}{c:>10} cycles{c / mhz:>10.1f} us"
                 for name, c in self.layers.items()]
        rows += [f"  {m:<10} moved {b:>10} B" for m, b in self.bytes_moved.items()]
        rows.append(f"  ({self.timeline.costs})")
        return "\n".join(rows)


# -- the model-level calls ------------------------------------------------------------------

class GraphModel:
    """The graph calls of the GAP AutoTiler, as ``Model`` methods."""

    def _graph_state(self) -> None:
        self._devices: dict[AT_MemLocation, tuple[int, str, str]] = {}
        self._ctrl = dict(GRAPH_CTRL_DEFAULTS)
        self._const_dir: str | None = None
        self._graph_specs: dict[str, GraphSpec] = {}
        self._open_graph: list | None = None
        self._cnn_ops: dict[str, int] = {}

    def GenerateTilingCode(self, directory: str = ".") -> list:
        """Write every graph's C file and flash file into ``directory`` (the C file named by
        ``SetGeneratedFilesNames``, else ``<Graph>Kernels.c``); returns their paths."""
        from .graph_c import write

        out = []
        for name in self._graph_specs:
            files = self.settings.files  # SetGeneratedFilesNames (a Model method)
            c_name = files[0] if files and len(self._graph_specs) == 1 else None
            out += list(write(self.graph(name), directory, c_name))
        return out

    def SetMemoryDeviceInfos(self, Count: int, *Items) -> None:
        """``Count`` items of five: (location, available bytes, C base name, constant file
        name, externally managed). Sets the budgets and the generated code's names."""
        if len(Items) != 5 * Count:
            raise TilingError(f"SetMemoryDeviceInfos({Count}, ...) needs {5 * Count} values "
                              f"(5 per device), got {len(Items)}")
        for k in range(Count):
            loc, size, base, const_file, ext = Items[5 * k:5 * k + 5]
            loc = _enum("SetMemoryDeviceInfos", f"device {k}", AT_MemLocation, loc)
            if ext:
                raise TilingError(f"SetMemoryDeviceInfos: {loc.name} is managed externally "
                                  f"(ExtManaged={ext}); npukit generates the device code")
            if loc in (AT_MemLocation.AT_MEM_UNDEF, AT_MemLocation.AT_MEM_L3_PRI1,
                       AT_MemLocation.AT_MEM_L3_PRI2):
                raise TilingError(f"SetMemoryDeviceInfos: {loc.name} is not supported")
            size = integer("SetMemoryDeviceInfos", f"{loc.name} size", size, 0, 1 << 40)
            if base and base != "0":
                identifier(base, f"SetMemoryDeviceInfos: {loc.name} base name")
            if const_file:  # the constants file, read and written next to the graph's C
                file_name(const_file, f"SetMemoryDeviceInfos: {loc.name} constants file name")
            self._devices[loc] = (size, base if base and base != "0" else "",
                                  const_file or "")
            if loc == AT_MemLocation.AT_MEM_L1:
                self.l1_budget = size
            elif loc == AT_MemLocation.AT_MEM_L2:
                self.l2_budget = size
            elif loc in L3_RAMS:
                self.l3_budget = size
            else:
                self.l3_flash_budget = size
        self._tilings.clear()  # tilings depend on the L1 budget

    def AT_SetGraphCtrl(self, Ctrl: AT_GraphCtrl, Val) -> None:
        """Set a graph control (``AT_OPT_ON``, ``AT_OPT_OFF`` or ``AT_OPT_VAL(v)``). The
        controls npukit implements are listed in ``GRAPH_CTRL_DEFAULTS``; the others raise
        ``TilingError`` rather than being ignored."""
        ctrl = AT_GraphCtrl(Ctrl)
        if ctrl not in GRAPH_CTRL_DEFAULTS:
            supported = ", ".join(c.name for c in GRAPH_CTRL_DEFAULTS)
            raise TilingError(f"AT_SetGraphCtrl: {ctrl.name} is not supported by npukit; "
                              f"supported: {supported}")
        if ctrl == AT_GraphCtrl.AT_GRAPH_WARM_CONSTRUCT and Val not in (0, 1, 2, 3):
            raise TilingError(f"AT_SetGraphCtrl: AT_GRAPH_WARM_CONSTRUCT takes 0..3 "
                              f"(WARM_DISABLED, WARM_L1, WARM_L2_DYN_L1, WARM_ALL), got {Val}")
        if ctrl in (AT_GraphCtrl.AT_GRAPH_PREF_L3_EXEC, AT_GraphCtrl.AT_GRAPH_PREF_L3_HOME):
            loc = AT_MemLocation(Val)
            want = L3_RAMS if ctrl == AT_GraphCtrl.AT_GRAPH_PREF_L3_EXEC else L3_FLASHES
            if loc not in want:
                raise TilingError(f"AT_SetGraphCtrl: {ctrl.name} needs an L3 "
                                  f"{'RAM' if want is L3_RAMS else 'flash'} location, got "
                                  f"{loc.name}")
            Val = loc
        if ctrl.name.endswith("CVAR_NAME"):
            identifier(Val, f"AT_SetGraphCtrl: {ctrl.name}")
        elif ctrl.name.endswith("BUDGET") and (not isinstance(Val, int) or Val < 0):
            raise TilingError(f"AT_SetGraphCtrl: {ctrl.name} takes a number of bytes, got {Val!r}")
        self._ctrl[ctrl] = Val

    def SetConstDir(self, DirName: str) -> None:
        """The folder relative ``ConstInfo`` file names are read from."""
        self._const_dir = str(DirName)

    def CreateGraph(self, GraphName: str, CArgs: tuple, Locals: tuple = ()) -> None:
        """Open graph ``GraphName``: ``CArgs`` its arguments and global constants,
        ``Locals`` the tensors between its layers."""
        identifier(GraphName, "CreateGraph: graph name")
        if self._open_graph is not None:
            raise TilingError(f"CreateGraph {GraphName!r}: graph {self._open_graph[0]!r} is "
                              f"still open; call CloseGraph() first")
        if GraphName in self._graph_specs or GraphName in self.kernels:
            raise TilingError(f"CreateGraph {GraphName!r}: the name is already used")
        args: dict[str, TCArgInfoT] = {}
        for a in tuple(CArgs) + tuple(Locals):
            if not isinstance(a, TCArgInfoT):
                raise TilingError(f"CreateGraph {GraphName!r}: arguments are TCArgInfo(...), "
                                  f"got {a!r}")
            if a.ArgName in args:
                raise TilingError(f"CreateGraph {GraphName!r}: tensor {a.ArgName!r} is "
                                  f"declared twice")
            args[a.ArgName] = a
        for a in CArgs:
            if a.Scope == ArgScope.ARG_SCOPE_GLOBAL:
                if a.Dir != ArgDirection.ARG_DIR_CONSTIN or a.ConstInit is None:
                    raise TilingError(f"CreateGraph {GraphName!r}: global {a.ArgName!r} must be "
                                      f"ARG_DIR_CONSTIN with a ConstInfo(...)")
            elif a.Scope != ArgScope.ARG_SCOPE_ARG or a.Dir not in (
                    ArgDirection.ARG_DIR_IN, ArgDirection.ARG_DIR_OUT, ArgDirection.ARG_DIR_INOUT):
                raise TilingError(f"CreateGraph {GraphName!r}: {a.ArgName!r} must be an "
                                  f"argument (ARG_SCOPE_ARG, in/out) or a global constant "
                                  f"(ARG_SCOPE_GLOBAL, ARG_DIR_CONSTIN)")
        for a in Locals:
            if a.Scope != ArgScope.ARG_SCOPE_LOCAL:
                raise TilingError(f"CreateGraph {GraphName!r}: local {a.ArgName!r} must have "
                                  f"ARG_SCOPE_LOCAL")
        self._open_graph = [GraphName, args, [], set()]  # the set: the nodes' names

    def AddNode(self, NodeName: str, BindingList: tuple) -> None:
        """A layer: user kernel ``NodeName`` called with its C arguments bound, in order, to
        graph tensors (``Bindings(n, GNodeArg(...), ...)``)."""
        if self._open_graph is None:
            raise TilingError(f"AddNode {NodeName!r}: no graph is open; call CreateGraph first")
        name, args, nodes, named = self._open_graph
        if NodeName not in self.kernels:
            what = "a kernel group (not supported in graphs)" if NodeName in self.groups else \
                "not a user kernel"
            raise TilingError(f"AddNode {NodeName!r}: {what}; user kernels: "
                              f"{sorted(self.kernels)}")
        if NodeName in named:
            raise TilingError(f"AddNode {NodeName!r}: the node is already in graph {name!r}")
        binds = tuple(BindingList)
        uk = self.kernels[NodeName]
        if len(binds) != len(uk.cargs):
            raise TilingError(f"AddNode {NodeName!r}: the user kernel takes {len(uk.cargs)} C "
                              f"arguments ({', '.join(c.ArgName for c in uk.cargs)}), "
                              f"{len(binds)} are bound")
        for c, b in zip(uk.cargs, binds):
            if not isinstance(b, GNodeArgT):
                raise TilingError(f"AddNode {NodeName!r}: bind {c.ArgName!r} with GNodeArg(...), "
                                  f"got {b!r}")
            if b.ArgName not in args:
                raise TilingError(f"AddNode {NodeName!r}: {c.ArgName!r} is bound to "
                                  f"{b.ArgName!r}, which is not a tensor of graph {name!r} "
                                  f"({', '.join(args)})")
            if not c.is_pointer:
                raise TilingError(f"AddNode {NodeName!r}: C argument {c.ArgName!r} is a scalar; "
                                  f"graph nodes bind tensors only")
            role = _carg_role(uk, c.ArgName)
            want = {"in": GNodeArgType.GNA_IN, "out": GNodeArgType.GNA_OUT}.get(
                role, GNodeArgType.GNA_INOUT)
            if b.Type != want:
                how = {"in": "read", "out": "written"}.get(role, "read and written")
                raise TilingError(f"AddNode {NodeName!r}: {c.ArgName!r} is {how} by the kernel: "
                                  f"bind it with {want.name}, not {b.Type.name}")
            a = args[b.ArgName]
            written = b.Type != GNodeArgType.GNA_IN
            if written and (a.kind == "const" or a.Dir == ArgDirection.ARG_DIR_IN):
                raise TilingError(f"AddNode {NodeName!r}: {c.ArgName!r} writes {b.ArgName!r}, "
                                  f"a graph input or constant")
            if b.Type != GNodeArgType.GNA_OUT and a.Dir == ArgDirection.ARG_DIR_OUT:
                raise TilingError(f"AddNode {NodeName!r}: {c.ArgName!r} reads {b.ArgName!r}, "
                                  f"a graph output")
        nodes.append((NodeName, binds))
        named.add(NodeName)

    def CloseGraph(self) -> None:
        """Close the open graph; ``Model.graph(name)`` then plans and lowers it."""
        if self._open_graph is None:
            raise TilingError("CloseGraph: no graph is open")
        name, args, nodes, _ = self._open_graph
        if not nodes:
            raise TilingError(f"CloseGraph {name!r}: the graph has no node")
        written: set[str] = set()
        for node, binds in nodes:
            for b in binds:
                a = args[b.ArgName]
                if b.Type != GNodeArgType.GNA_OUT and a.kind == "local" and \
                        b.ArgName not in written:
                    raise TilingError(f"CloseGraph {name!r}: node {node!r} reads local "
                                      f"{b.ArgName!r} before any node writes it")
            written |= {b.ArgName for b in binds if b.Type != GNodeArgType.GNA_IN}
        for a in args.values():
            if a.Dir == ArgDirection.ARG_DIR_OUT and a.ArgName not in written:
                raise TilingError(f"CloseGraph {name!r}: output {a.ArgName!r} is never written")
        self._graph_specs[name] = GraphSpec(name, MappingProxyType(dict(args)),
                                            tuple((n, b) for n, b in nodes))
        self._open_graph = None

    def graph(self, name: str) -> Graph:
        """Graph ``name`` planned under the model's budgets: tensors, memory, layers,
        ``run`` and ``c_source``."""
        if name not in self._graph_specs:
            raise TilingError(f"no graph {name!r}; graphs: {sorted(self._graph_specs)}")
        return Graph(self, self._graph_specs[name])


def _carg_role(uk, carg: str) -> str:
    bound = [a for a in uk.kerargs if a.CArgName == carg]
    if not bound:
        c = next(c for c in uk.cargs if c.ArgName == carg)
        return "in" if "const" in c.ArgType.split("*")[0] else "inout"
    a = bound[0]
    return {(True, False): "in", (False, True): "out"}.get(
        (a.has(Obj.O_IN), a.has(Obj.O_OUT)), "inout")


def lower_node(model, name: str, streamed_cargs: frozenset[str] = frozenset()) -> ir.Program:
    """User kernel ``name`` lowered alone, the kernel arguments bound to ``streamed_cargs``
    given an L3 home (streamed through L2) and every other one an L2 home."""
    uk = model.kernels[name]
    if not streamed_cargs and not any(a.has(Obj.O_L2DB) for a in uk.kerargs):
        # Every argument already has an L2 home: the kernel's own program, lowered once.
        return model.program(name)
    kerargs = tuple(replace(a, ObjType=(a.ObjType | Obj.O_L2DB) if a.CArgName in streamed_cargs
                            else a.ObjType & ~Obj.O_L2DB) for a in uk.kerargs)
    return model.lowered(replace(uk, kerargs=kerargs), model.tiling(name), "L3_RAM", None)


# -- the graph -----------------------------------------------------------------------------

class Graph:
    """A closed graph planned under its model's budgets.

    ``tensors[name]``: memory ("L2", "L3", "L3_FLASH", "ARG"), area, offset, size;
    ``memory[level]``: static and dynamic bytes ("L1", "L2", "L3", "L3_FLASH");
    ``layers``: each node's tiling, bindings, L3 streams and IR program; ``fetches``: the
    constants copied into L2 ahead of their layer; ``run(backend, **arrays)``,
    ``c_source()``, ``flash_image()``."""

    def __init__(self, model, spec: GraphSpec):
        self.model, self.spec, self.name, self.target = model, spec, spec.name, model.target
        self.ctrl = dict(model._ctrl)
        self._report: GraphReport | None = None
        self._c: str | None = None  # the generated C, made on first use
        self._compiled = None  # the C handle (compile), made on first use
        base = [lower_node(model, n) for n, _ in spec.nodes]
        info = self._tensor_info(base)
        from_flash = bool(self.ctrl[AT_GraphCtrl.AT_GRAPH_CONST_EXEC_FROM_FLASH])
        budgets = P.Budgets(
            l2=model.l2_budget, l3=model.l3_budget, flash=model.l3_flash_budget,
            l2_static=self.ctrl[AT_GraphCtrl.AT_GRAPH_L2_STATIC_MEMORY_BUDGET],
            l3_static=0 if from_flash else self.ctrl[AT_GraphCtrl.AT_GRAPH_L3_STATIC_MEMORY_BUDGET],
            promote=not (from_flash or self.ctrl[AT_GraphCtrl.AT_GRAPH_DISABLE_CONST_L2_PROMOTION]),
            fetch=not from_flash)
        layers = [self._plan_layer(n, binds) for n, binds in spec.nodes]
        estimates: dict[int, int] = {}

        def estimate(i: int) -> int:
            if i not in estimates:
                estimates[i] = model.cycles(base[i])
            return estimates[i]

        def transfer(nbytes: int, source: str) -> int:
            return self.target.engine(MEMORY[source], "L2").cycles(nbytes)

        tensors = [P.Tensor(n, info[n][2] * info[n][0].itemsize, spec.args[n].kind,
                            spec.args[n].in_l3) for n in spec.args]
        self.plan = P.plan(self.name, tensors, layers, budgets, estimate, transfer)
        self.tensors = MappingProxyType({
            n: GraphTensor(**vars(p), kind=spec.args[n].kind,
                           ctype=str(parse_ctype(spec.args[n].ArgType)), dtype=info[n][0],
                           count=info[n][2])
            for n, p in self.plan.tensors.items()})
        self.layers = tuple(self._layer(i, n, binds, base[i])
                            for i, (n, binds) in enumerate(spec.nodes))
        l1 = max(layer.tiling.l1_used for layer in self.layers)
        self.memory = MappingProxyType({"L1": P.Area(0, l1, model.l1_budget),
                                        **self.plan.memory})
        self.fetches = self.plan.fetches
        self.promoted = self.plan.promoted
        self.constants = MappingProxyType({
            n: spec.args[n].ConstInit.values(n, info[n][0], info[n][2], model._const_dir)
            for n in spec.args if spec.args[n].kind == "const"})

    # -- building ----------------------------------------------------------------------------

    def _tensor_info(self, base: list[ir.Program]) -> dict[str, tuple[np.dtype, tuple, int]]:
        """Each tensor's (dtype, shape of its first binding, elements), checked against every
        binding and its TCArgInfo type."""
        info: dict[str, tuple[np.dtype, tuple, int]] = {}
        for prog, (node, binds) in zip(base, self.spec.nodes):
            cargs = [c.ArgName for c in self.model.kernels[node].cargs]
            for carg, b in zip(cargs, binds):
                buf, spec = prog.param(carg)
                declared = c_dtype(self.spec.args[b.ArgName].ArgType)
                if declared != buf.dtype:
                    raise TilingError(f"graph {self.name!r}: tensor {b.ArgName!r} is "
                                      f"{self.spec.args[b.ArgName].ArgType!r} ({declared.name}) "
                                      f"but node {node!r} binds it to {carg!r}, "
                                      f"{buf.dtype.name}")
                got = (buf.dtype, spec.shape, spec.size)
                if b.ArgName in info and info[b.ArgName][2] != spec.size:
                    raise TilingError(f"graph {self.name!r}: tensor {b.ArgName!r} has "
                                      f"{info[b.ArgName][2]} elements {info[b.ArgName][1]} where "
                                      f"first bound, but node {node!r} binds it to {carg!r} of "
                                      f"{spec.size} elements {spec.shape}")
                info.setdefault(b.ArgName, got)
        unused = [n for n in self.spec.args if n not in info]
        if unused:
            raise TilingError(f"graph {self.name!r}: tensors {unused} are bound to no node")
        return info

    def _plan_layer(self, node: str, binds) -> P.Layer:
        uk = self.model.kernels[node]
        t = self.model.tiling(node)
        staging: dict[str, int] = {}
        for c, b in zip(uk.cargs, binds):
            for a in uk.kerargs:
                if a.CArgName == c.ArgName and moves(a):
                    staging[b.ArgName] = staging.get(b.ArgName, 0) + 2 * t.args[a.KerArgName].size
        reads = tuple(b.ArgName for b in binds if b.Type != GNodeArgType.GNA_OUT)
        writes = tuple(b.ArgName for b in binds if b.Type != GNodeArgType.GNA_IN)
        return P.Layer(node, reads, writes, MappingProxyType(staging))

    def _layer(self, i: int, node: str, binds, base: ir.Program) -> GraphLayer:
        """Layer ``i`` as planned: lowered again when it streams arguments (``base``: as
        lowered with none streamed)."""
        uk = self.model.kernels[node]
        streamed = self.plan.streamed[i]
        bindings = {c.ArgName: b.ArgName for c, b in zip(uk.cargs, binds)}
        cargs = frozenset(c for c, t in bindings.items() if t in streamed)
        prog = lower_node(self.model, node, cargs) if cargs else base
        offset = self.plan.staging[i][0]
        placed = {}
        for b in prog.buffers:  # the L3 stream buffers, where the plan reserved them
            if b.memory == "L2":
                placed[b.name] = replace(b, address=offset)
                offset += P._up(b.nbytes)
        prog = replace(prog, buffers=tuple(placed.get(b.name, b) for b in prog.buffers),
                       body=ir.map_buffers(prog.body, lambda b: placed.get(b.name, b)
                                           if b.role == "internal" else b))
        return GraphLayer(node, self.model.tiling(node), MappingProxyType(bindings),
                          streamed, prog, self.plan.staging[i])

    # -- views of the plan -------------------------------------------------------------------

    @property
    def args(self) -> list[GraphTensor]:
        """The graph's C arguments (inputs and outputs), in declaration order."""
        return [t for t in self.tensors.values() if t.kind == "arg"]

    def flash_image(self) -> bytes:
        """The flash file: every constant at its flash offset (zeros between them)."""
        image = bytearray(self.memory["L3_FLASH"].static)
        for n, v in self.constants.items():
            off = self.tensors[n].flash
            image[off:off + v.nbytes] = v.astype(v.dtype.newbyteorder("<")).tobytes()
        return bytes(image)

    def read_location(self, i: int, tensor: str) -> tuple[str, int]:
        """Where layer ``i`` finds ``tensor``: (area, byte offset), area one of "ARG",
        "L2", "L2_DYN", "L3", "L3_DYN", "L3_FLASH"."""
        t = self.tensors[tensor]
        if t.memory == "ARG":
            return "ARG", 0
        for f in self.fetches:
            if f.tensor == tensor and f.at <= i <= f.until:
                return "L2_DYN", f.offset
        return self.home(tensor)

    def home(self, tensor: str) -> tuple[str, int]:
        """The area and byte offset a tensor lives at (outside its fetched copies)."""
        t = self.tensors[tensor]
        if t.memory == "L3_FLASH":
            return "L3_FLASH", t.flash
        return (t.memory + ("_DYN" if t.area == "dynamic" else ""), t.offset)

    def __str__(self) -> str:
        m = self.memory
        names = max([len(t) for t in self.tensors] + [len("tensor")]) + 2
        rows = [f"graph {self.name} on {self.target.name}: L2 {m['L2'].static} B static + "
                f"{m['L2'].dynamic} B dynamic of {m['L2'].budget} B; L1 {m['L1'].dynamic} of "
                f"{m['L1'].budget} B; L3 {m['L3'].static} + {m['L3'].dynamic} B; flash "
                f"{m['L3_FLASH'].static} B",
                f"  {'tensor':<{names}}{'memory':<10}{'area':<9}{'offset':>8}{'size':>9}  layers"]
        for t in self.tensors.values():
            off = "" if t.offset is None else str(t.offset)
            live = f"{t.live[0]}" if t.live[0] == t.live[1] else f"{t.live[0]}..{t.live[1]}"
            rows.append(f"  {t.name:<{names}}{t.memory:<10}{t.area or '':<9}{off:>8}{t.size:>9}  "
                        f"{live}")
        for f in self.fetches:
            rows.append(f"  fetch {f.tensor} from {f.source} into dynamic L2 at {f.offset} "
                        f"before layer {f.at} ({self.layers[f.at].name})")
        width = max(len(layer.name) for layer in self.layers) + 2
        rows.append(f"  {'layer':<{width}}{'tiles':>14}{'L1 B':>9}")
        for layer in self.layers:
            tiles = f"{layer.tiling.n_tiles} x {layer.tiling.tile}"
            rows.append(f"  {layer.name:<{width}}{tiles:>14}{layer.tiling.l1_used:>9}")
        for layer in self.layers:
            if layer.streamed:
                rows.append(f"  layer {layer.name} streams {', '.join(sorted(layer.streamed))} "
                            f"from L3 through {layer.staging[1]} B of L2")
        return "\n".join(rows)

    # -- running -----------------------------------------------------------------------------

    def run(self, backend: str = "sim", **arrays) -> Result:
        """Run the graph on ``backend`` ("sim" or "c") with its inputs and outputs passed by
        name; outputs are written in place. The simulator's report gives the cycles of
        each layer."""
        args = self.check_arrays(arrays)
        if backend == "sim":
            return self._run_sim(args)
        if backend == "c":
            from . import graph_c
            return graph_c.run_c(self, args)  # looked up here: the entry of every graph C run
        raise NpukitError(f"unknown backend {backend!r}; use 'sim' or 'c'")

    def compile(self, backend: str = "c"):
        """The graph's C compiled, loaded and constructed once (made on first use, then
        kept, as ``c_source``): a handle (``npukit.tiler.graph_c.CompiledGraph``) whose call
        ``h(**arrays)`` is one C call of the runner. ``h.close()`` (or leaving a ``with``
        block) calls the destructor; a later call constructs again. ``run("c")`` calls it."""
        if backend != "c":
            raise NpukitError(f"a graph compiles for backend 'c', not {backend!r}")
        if self._compiled is None:
            from .graph_c import CompiledGraph
            self._compiled = CompiledGraph(self)
        return self._compiled

    def c_source(self) -> str:
        """The generated C of the graph: the layers' functions and
        ``<Name>_Construct``/``<Name>``/``<Name>_Destruct``/``<Name>_Memory`` (made once:
        a graph does not change once planned)."""
        if self._c is None:
            from .graph_c import c_source
            self._c = c_source(self)
        return self._c

    def write(self, directory, c_name: str | None = None):
        """Write the C file and the flash file (the constants) into ``directory``; returns
        their paths."""
        from .graph_c import write
        return write(self, directory, c_name)

    def check_arrays(self, arrays: dict) -> dict[str, np.ndarray]:
        """The graph arguments' arrays: each of the tensor's dtype and element count
        (any shape), outputs writable."""
        names = [t.name for t in self.args]
        missing = [n for n in names if n not in arrays]
        extra = [n for n in arrays if n not in names]
        if missing or extra:
            raise ShapeError(f"graph {self.name!r}: missing arrays {missing}, unexpected "
                             f"{extra} (its arguments: {names})")
        out = {}
        for n in names:
            a, t = arrays[n], self.tensors[n]
            if not isinstance(a, np.ndarray):
                raise ShapeError(f"tensor {n!r}: expected a numpy array, got {type(a).__name__}")
            if a.dtype != t.dtype or a.size != t.count:
                raise ShapeError(f"tensor {n!r}: {a.dtype.name} array of {a.size} elements "
                                 f"{a.shape}, the graph needs {t.count} x {t.dtype.name}")
            if self.spec.args[n].Dir != ArgDirection.ARG_DIR_IN and not a.flags.writeable:
                raise ShapeError(f"tensor {n!r} is written by graph {self.name!r} but its "
                                 f"array is read-only")
            out[n] = a
        return out

    def _areas(self) -> dict[str, np.ndarray]:
        """Fresh memory areas: L2 and L3 RAM poisoned (0xA5), the flash holding the image."""
        m = self.memory
        sizes = {"L2": m["L2"].static, "L2_DYN": m["L2"].dynamic, "L3": m["L3"].static,
                 "L3_DYN": m["L3"].dynamic}
        areas = {k: poison(np.dtype("uint8"), (v,)) for k, v in sizes.items()}
        areas["L3_FLASH"] = np.frombuffer(self.flash_image(), np.uint8).copy()
        return areas

    def moves(self) -> tuple[list[tuple], list[list[tuple]]]:
        """The graph-level copies: the constructor's (tensor, source area, offset, target
        area, offset) and, per layer, the fetches issued before it."""
        construct = []
        for n in self.promoted:
            t = self.tensors[n]
            construct.append((n, "L3_FLASH", t.flash, *self.home(n)))
        per_layer: list[list[tuple]] = [[] for _ in self.layers]
        for f in self.fetches:
            per_layer[f.at].append((f.tensor, *self.home(f.tensor), "L2_DYN", f.offset))
        return construct, per_layer

    def move_program(self, tensor: str, src: str, dst: str) -> ir.Program:
        """A whole-tensor copy from area ``src`` to area ``dst`` as an IR program."""
        t = self.tensors[tensor]
        mem = {"L3_FLASH": "L3_FLASH", "L3": "L3_RAM", "L3_DYN": "L3_RAM", "L2": "L2",
               "L2_DYN": "L2"}
        lay = Layout((t.count,), t.dtype)
        a = ir.Buffer("src", mem[src], t.dtype, t.count, "in")
        b = ir.Buffer("dst", mem[dst], t.dtype, t.count, "out")
        engine = self.target.engine(a.memory, b.memory).name
        copy = ir.Copy(ir.View(b, lay), ir.View(a, lay), engine,
                       label=f"Moving {tensor}, size {t.size} from {src} to {dst}")
        return ir.Program(f"{self.name}_Move_{tensor}", self.target, ((a, lay), (b, lay)), (),
                          (copy,))

    def _run_sim(self, args: dict[str, np.ndarray]) -> Result:
        from ..sim.functional import Machine

        areas = self._areas()
        flat = {n: np.ascontiguousarray(a).reshape(-1) for n, a in args.items()}

        def view(area: str, offset: int, t: GraphTensor) -> np.ndarray:
            if area == "ARG":
                return flat[t.name]
            return areas[area][offset:offset + t.size].view(t.dtype)

        construct, _ = self.moves()
        t0 = time.perf_counter()
        for n, src, so, dst, do in construct:
            t = self.tensors[n]
            Machine(self.move_program(n, src, dst), {"src": view(src, so, t),
                                                     "dst": view(dst, do, t)}).run()
        prog, segments = self.program()
        # The plan lets tensors whose lives do not overlap share bytes, and the simulator
        # gives each internal buffer storage of its own: so every placed tensor is run as a
        # parameter whose image is its bytes in the memory areas, shared as the plan shares
        # them (a plan that overlaps live tensors gives visibly wrong results).
        images = {b.name: flat[b.name] for b, _ in prog.params}
        placed = {}
        for b in prog.buffers:
            name, _, copy = b.name.partition("@")
            if name in self.tensors:
                placed[b.name] = replace(b, role="inout")
                area = copy.partition(":")[0] if copy else self.home(name)[0]
                images[b.name] = view(area, b.address, self.tensors[name])
        segments = [tuple(ir.map_buffers(part, lambda b: placed.get(b.name, b)) for part in seg)
                    for seg in segments]
        bound = ir.Program(prog.name, prog.target,
                           prog.params + tuple((b, Layout((b.size,), b.dtype))
                                               for b in placed.values()),
                           tuple(b for b in prog.buffers if b.name not in placed),
                           tuple(st for seg in segments for part in seg for st in part))
        machine = Machine(bound, images)
        trace = self.ctrl[AT_GraphCtrl.AT_GRAPH_TRACE_EXEC]
        for i, (fetch, body) in enumerate(segments):
            machine.block(fetch)  # the program's statements, a layer at a time
            if trace:
                from .graph_c import trace_line
                print(trace_line(self.name, i, self.layers[i].name), flush=True)
            machine.block(body)
        wall = time.perf_counter() - t0
        outputs = {}
        for n, a in args.items():
            if self.spec.args[n].Dir != ArgDirection.ARG_DIR_IN:
                if not np.shares_memory(flat[n], a):
                    a.reshape(-1)[...] = flat[n]  # a non-contiguous output gets its copy back
                outputs[n] = a
        report = self.report()
        return Result(outputs, report.cycles, report, wall)

    # -- the timeline ------------------------------------------------------------------------

    def report(self) -> GraphReport:
        """The cycle model over the constructor's copies and over the whole run (the same for
        every run: it depends on the plan, not on the data)."""
        if self._report is None:
            self._report = self._timeline()
        return self._report

    def _timeline(self) -> GraphReport:
        from ..sim.timing import TERM_SCALE, Timeline, timeline

        construct, fetches = self.moves()
        cc = sum(timeline(self.move_program(n, s, d)).cycles for n, s, _, d, _ in construct)
        prog, segments = self.program()
        tl = Timeline(prog)
        ix, s = tl.ix, tl.s
        setup = math.ceil(self.target.costs.layer)
        layers, spans, t0 = {}, {}, 0
        for (fetch, body), layer in zip(segments, self.layers):
            tl.block(fetch)
            pending = int(s[ix["end"]])
            # The layer's set-up (``costs.layer``) comes before its first step.
            for u in tl.units:
                s[ix[f"free:{u}"]] = max(s[ix[f"free:{u}"]], t0 + setup)
            s[ix["end"]] = t0 + setup
            s[ix["term:layer"]] += TERM_SCALE
            tl.block(body)
            t1 = int(s[ix["end"]])
            # The next layer starts when this one has finished (its fetches run on).
            for u in tl.units:
                s[ix[f"free:{u}"]] = max(s[ix[f"free:{u}"]], t1)
            s[ix["end"]] = max(t1, pending)
            layers[layer.name] = t1 - t0
            spans[layer.name] = (t0, t1)
            t0 = t1
        report = tl.report()
        return GraphReport(report.cycles, MappingProxyType(layers), cc, report,
                           MappingProxyType(spans))

    def program(self) -> tuple[ir.Program, list[tuple[tuple, tuple]]]:
        """The whole run as one IR program, every tensor but the graph's arguments a buffer
        placed where the plan put it; and its statements per layer (fetches, layer). The
        simulator runs it (``run("sim")``) and the cycle model times it (``report()``)."""
        bufs: dict[str, ir.Buffer] = {}
        params: dict[str, tuple[ir.Buffer, Layout]] = {}
        mem = {"L2": "L2", "L2_DYN": "L2", "L3": "L3_RAM", "L3_DYN": "L3_RAM",
               "L3_FLASH": "L3_FLASH"}

        def tensor_buffer(name: str, area: str, offset: int, role: str) -> ir.Buffer:
            t = self.tensors[name]
            if area == "ARG":
                if name not in params:
                    params[name] = (ir.Buffer(name, self.target.home, t.dtype, t.count, role),
                                    Layout((t.count,), t.dtype))
                return params[name][0]
            # A fetched copy is named for where it lies (a tensor may be fetched again).
            key = name if (area, offset) == self.home(name) else f"{name}@{area}:{offset}"
            if key not in bufs:
                bufs[key] = ir.Buffer(key, mem[area], t.dtype, t.count, address=offset)
            return bufs[key]

        segments = []
        _, fetches = self.moves()
        for i, layer in enumerate(self.layers):
            fetch = []
            for n, src, so, dst, do in fetches[i]:
                mp = self.move_program(n, src, dst)
                m = {"src": tensor_buffer(n, src, so, "in"), "dst": tensor_buffer(n, dst, do, "in")}
                fetch += ir.map_buffers(mp.body, lambda b, m=m: m[b.name])
            roles = {b.name: b.role for b, _ in layer.program.params}
            outer = {c: tensor_buffer(t, *self.read_location(i, t), roles[c])
                     for c, t in layer.bindings.items()}
            inner = {}
            for b in layer.program.buffers:
                inner[b.name] = bufs[f"{layer.name}.{b.name}"] = \
                    replace(b, name=f"{layer.name}.{b.name}")

            def rename(b, outer=outer, inner=inner):
                return inner[b.name] if b.role == "internal" else outer[b.name]
            segments.append((tuple(fetch), ir.map_buffers(layer.program.body, rename)))
        body = tuple(st for f, b in segments for st in f + b)
        prog = ir.Program(self.name, self.target, tuple(params.values()), tuple(bufs.values()),
                          body)
        return prog, segments


__all__ = ["Graph", "GraphModel", "GraphTensor", "GraphLayer", "GraphReport", "lower_node"]
