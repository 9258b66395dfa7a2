"""ONNX models in, planned and tiled AutoTiler graphs out (the GAP AutoTiler "is part of the
GapFlow to convert ONNX and TFlite models onto GAP code").

>>> import npukit.onnx                                   # doctest: +SKIP
>>> g = npukit.onnx.load("model.onnx", target="gap8", l1_budget=48000,
...                      l2_budget=300 * 1024, l3_budget=8 << 20)
>>> res = g.run(backend="c", input=x)                  # outputs allocated when not passed
>>> res.outputs["output"]                              # every graph output, by ONNX name

``load`` reads the model with the ``onnx`` package (``pip install "npukit[onnx]"``), runs
shape inference, folds constants, folds BatchNormalization into convolutions, drops
Dropout and Identity, turns quantized operations into integer layers and builds the graph
the AutoTiler-graph API builds: one layer per fused group, placed by the graph planner,
tiled by the tiler, run by the simulator and the C back end. docs/onnx.md lists the
operators, attributes and numerics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from ..errors import DTypeError, ModelError, NpukitError, ShapeError
from ..run import Result

__all__ = ["load", "OnnxGraph", "Port", "validate", "sweep", "shape_operands",
           "constant_operands"]

@dataclass(frozen=True)
class Port:
    """A graph input or output: its C argument, ONNX shape and dtype."""

    cname: str
    shape: tuple[int, ...]
    dtype: np.dtype


class OnnxGraph:
    """An ONNX model as an AutoTiler graph: ``graph`` (the ``npukit.tiler.Graph``: its
    ``tensors``, ``memory``, ``layers``), ``model`` (the ``npukit.tiler.Model``), ``inputs``
    and ``outputs`` (``Port`` by ONNX name; ``unused``: the inputs nothing reads, taken and
    ignored by ``run``), ``layers`` (what each layer computes, the ONNX
    nodes it stands for); ``run``, ``c_source``, ``write``, ``emit``, ``report``."""

    def __init__(self, model, graph, lowering, net, qdq: bool, host_plan=None):
        self._model, self._graph = model, graph
        # How a plan read back from the plan cache gets its target plan (``_graph``,
        # ``_model``: an entry of their own, read when first asked for).
        self._target_plan = None
        self._host_plan, self._host = host_plan, None
        self._report_key = None  # the plan cache's entry of the cycle model (``report``)
        # Whether ``load`` read this plan back from the plan cache (``npukit.onnx.plan_cache``).
        self.from_plan_cache = False
        self.name = graph.name
        self.layers = tuple(lowering.layers)
        self.qdq = qdq
        decl = lowering.decls
        self.inputs = {d.onnx: Port(d.cname, net.info[d.onnx].shape, d.dtype)
                       for d in decl.values() if d.kind == "in"}
        # Inputs no layer reads (the tensors a SequenceAt did not choose) are taken and
        # ignored, as ONNX Runtime takes them.
        self.unused = tuple(t for t in net.inputs if t not in self.inputs)
        self.outputs = {}
        for o in net.outputs:
            d = next(d for d in decl.values() if d.onnx == o and d.kind in ("out", "inout"))
            # An output the model computes from constants alone (a Constant node) is folded.
            shape = net.consts[o].shape if o in net.consts else net.info[o].shape
            self.outputs[o] = Port(d.cname, tuple(shape), d.dtype)
        self.target = graph.target
        # Each planned tensor's ONNX name: a C name keeps only 40 characters of it.
        self.onnx_names = {c: o for o, c in lowering.of.items()}
        # The LSB of each float output a DequantizeLinear makes from integers.
        self.output_steps = {o: lowering.steps[lowering.alias.get(o, o)] for o in net.outputs
                             if lowering.alias.get(o, o) in lowering.steps}

    # -- views of the plan -------------------------------------------------------------------

    @property
    def graph(self):
        """The target's plan (``npukit.tiler.Graph``). A plan read back from the plan cache
        reads it when first asked for: running in C on the host needs only the host plan."""
        return self._planned()[1]

    @property
    def model(self):
        """The ``npukit.tiler.Model`` the target's plan was made in."""
        return self._planned()[0]

    def _planned(self):
        if self._graph is None:
            self._model, self._graph = self._target_plan()
        return self._model, self._graph

    @property
    def tensors(self):
        return self.graph.tensors

    @property
    def memory(self):
        return self.graph.memory

    def report(self):
        """The simulator's cycle model of a run (``npukit.tiler.graph.GraphReport``), kept in
        the plan cache beside the plan when ``load`` kept the plan there."""
        if self.graph._report is None and self._report_key is not None:
            from ..tiler.graph import GraphReport
            from . import plan_cache

            cached = plan_cache.fetch(self._report_key)
            if isinstance(cached, GraphReport):
                self.graph._report = cached
            else:
                plan_cache.store(self._report_key, self.graph.report())
        return self.graph.report()

    def compare(self, name: str, ours: np.ndarray, ref: np.ndarray):
        """Output ``name`` against ONNX Runtime's ``ref`` as ``npukit run --check`` compares
        it (``npukit.onnx.check.compare``): integers and the float outputs a
        DequantizeLinear makes within 1 LSB, other floats within 1e-4 relative."""
        from .check import compare

        return compare(name, ours, ref, self.output_steps.get(name))

    def summary(self, cycles: bool = True) -> str:
        """The memory plan and the layers with their tiles; with ``cycles``, each layer's
        predicted cycles and microseconds at the target's clock and the totals (the cycle
        model, ``report()``). What ``npukit run --plan`` prints: nothing is compiled or run.

        >>> print(g.summary())                               # doctest: +SKIP
        """
        from .cli import summary
        return summary(self, self.report() if cycles else None)

    def __str__(self) -> str:
        """The memory plan and the layers (as ``npukit run`` prints them, without cycles)."""
        return self.summary(cycles=False)

    # -- running -----------------------------------------------------------------------------

    def run(self, backend: str = "c", schedule: str = "host", **arrays) -> Result:
        """Run on ``backend`` ("c" or "sim") with the inputs by ONNX name; outputs passed
        are written, missing ones allocated. ``Result.outputs`` holds every graph output by
        its ONNX name, in its ONNX shape.

        ``schedule`` (C only): ``"host"`` runs each layer in tiles of up to 1 MiB (a small
        layer whole; ``host_graph``), every tensor in host memory: the same basic kernels on
        the same data in the same order, so the same bytes as the simulator, in tiles large
        enough to share among threads; ``"tiles"`` runs the C of
        the target's plan, every L1 tile and transfer as ``c_source`` shows them. The
        simulator always runs the target's plan."""
        if schedule not in ("host", "tiles"):
            raise NpukitError(f"schedule={schedule!r}: use 'host' (tiles of up to 1 MiB) or "
                              f"'tiles' (the target's L1 tiles)")
        args, outs = self._arrays(arrays)
        graph = self.host_graph() if backend == "c" and schedule == "host" else self.graph
        res = graph.run(backend, **args)
        return Result(outs, res.cycles, res.report, res.wall_time)

    def host_graph(self):
        """The graph planned for the host (``run(schedule="host")``): the same layers on a
        copy of the target with an L1 of 1 MiB and an L2 that holds every tensor
        (``host_target``). Planned on first use."""
        if self._host is None:
            if self._host_plan is None:
                raise NpukitError(f"graph {self.name!r}: unpickled without its host plan; "
                                  f"npukit.onnx.load the model again to run it in C")
            self._host = self._host_plan()
        return self._host

    def __getstate__(self) -> dict:
        """The plan (read now if it was not yet), without the way to make the host plan
        (``npukit.onnx.plan_cache`` keeps that as an entry of its own)."""
        return _state(self) | {"_model": self.model, "_graph": self.graph}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _host_plan=None, _host=None, _target_plan=None)

    def _arrays(self, arrays: dict) -> tuple[dict, dict]:
        """The graph's arrays by C name, and the outputs by ONNX name (allocated when not
        given)."""
        known = set(self.inputs) | set(self.outputs) | set(self.unused)
        extra = sorted(k for k in arrays if k not in known)
        missing = sorted(k for k in self.inputs if k not in arrays)
        if extra or missing:
            raise ShapeError(f"graph {self.name!r}: missing inputs {missing}, unknown arrays "
                             f"{extra} (inputs: {list(self.inputs)}, outputs: "
                             f"{list(self.outputs)})")
        args, outs = {}, {}
        for name, port in list(self.inputs.items()) + list(self.outputs.items()):
            a = arrays.get(name)
            if a is None:
                a = np.empty(port.shape, port.dtype)
            elif not isinstance(a, np.ndarray):
                raise ShapeError(f"tensor {name!r}: expected a numpy array, got "
                                 f"{type(a).__name__}")
            if a.dtype != port.dtype:
                raise DTypeError(f"tensor {name!r}: {a.dtype} array, the model's tensor is "
                                 f"{port.dtype}")
            if a.shape != port.shape:
                raise ShapeError(f"tensor {name!r}: shape {a.shape}, the model's tensor is "
                                 f"{port.shape}")
            args[port.cname] = a
            if name in self.outputs:
                outs[name] = a
        return args, outs

    def c_source(self) -> str:
        """The graph's C translation unit (``npukit.tiler.Graph.c_source``)."""
        return self.graph.c_source()

    def write(self, directory):
        """The C file and the flash file, as ``npukit.tiler.Graph.write``."""
        return self.graph.write(directory)

    def emit(self, directory, inputs: dict[str, np.ndarray] | None = None):
        """A standalone C project in ``directory`` (see ``npukit.onnx.emit``)."""
        from .emit import emit
        return emit(self, directory, inputs)


def _is_float32(dtype) -> bool:
    try:
        return np.dtype(dtype) == np.float32
    except TypeError:
        return False


def load(model, target="gap8", l1_budget: int | None = None, l2_budget: int | None = None,
         l3_budget: int | None = None, dtype=None, *, l3_flash_budget: int | None = None,
         input_shapes: dict | None = None, constants: dict | None = None) -> OnnxGraph:
    """An ONNX model (a path or an ``onnx.ModelProto``) as a planned ``OnnxGraph`` for
    ``target`` under the budgets (bytes; the target's memory sizes by default).

    ``dtype``: None runs each operation in the model's types, quantized ones (QLinear* and
    the DequantizeLinear/op/QuantizeLinear patterns) in integers as ONNX Runtime's CPU
    kernels do; ``"float32"`` leaves QDQ models as written (QuantizeLinear and
    DequantizeLinear layers around float32 operations). ``input_shapes`` gives dimensions
    the model leaves symbolic (1 otherwise). ``constants`` gives graph inputs fixed values
    by name (numpy arrays of the input's type and shape), folded like initializers: an
    operand that only selects a shape (a Reshape's shape, axes, pads, starts and ends,
    scales; ``shape_operands(model)`` lists the graph inputs in such places), and one it
    compiles in (weights, quantization parameters; ``constant_operands(model)`` lists every
    graph input npukit needs as a constant) must be a constant for npukit to plan the node.
    ``ModelError`` names the node, operator, attribute and value npukit cannot import.

    The plan is kept in the plan cache (``npukit.onnx.plan_cache``, beside the compile
    cache): loading the same model again under the same target, budgets and options reads
    it back instead of planning (``NPUKIT_PLAN_CACHE=0`` turns that off)."""
    from . import plan_cache

    if dtype is not None and not _is_float32(dtype):
        raise ModelError(f"dtype={dtype!r}: npukit runs a model in its own types (None) or, for "
                         f"a QDQ model, in float32 as written ('float32')")
    l3 = dict(l3_budget=l3_budget, l3_flash_budget=l3_flash_budget)
    options = (input_shapes, constants, dtype)
    key = _plan_key(model, target, (l1_budget, l2_budget, l3_budget, l3_flash_budget),
                    options)
    budgets = (l1_budget, l2_budget, l3)
    if key is not None:
        state = plan_cache.fetch(key.digest("target"))
        if isinstance(state, dict) and state.get("_format") == _STATE:
            g = object.__new__(OnnxGraph)
            g.__setstate__(state)
            g._target_plan = partial(_cached_target_plan, key, model, g, target, budgets,
                                     options)
            g._host_plan = partial(_cached_host_plan, key, model, g, options, l3)
            g._report_key = key.digest("report")
            g.from_plan_cache = True
            return g
    net, alias, gname = _imported(model, options)
    # The host plan lowers its own copy of the tables: a lowering adds the tensors it derives.
    tables = replace(net, info=dict(net.info), consts=dict(net.consts),
                     qconsts=dict(net.qconsts), doc=dict(net.doc))
    m, low, graph = _target_plan(net, alias, gname, target, budgets, key)
    host = partial(_host_plan, tables, alias, m.target, gname, low.layers, l3, key)
    g = OnnxGraph(m, graph, low, net, dtype is None, host)
    if key is not None:
        plan_cache.store(key.digest("target"), _state(g) | {"_model": None, "_graph": None})
        g._report_key = key.digest("report")
    return g


# The plan cache's entry "target" holds an OnnxGraph's state without its target plan (the
# model and the graph: entry "graph"), tagged with this.
_STATE = "OnnxGraph/1"


def _state(g: OnnxGraph) -> dict:
    """``g``'s attributes but the ways to make its plans."""
    return {k: v for k, v in vars(g).items() if k not in ("_host_plan", "_host",
                                                          "_target_plan")} | {"_format": _STATE}


def _target_plan(net, alias, gname: str, target, budgets, key):
    """The model ``net`` lowered and planned for ``target`` under ``budgets`` (l1, l2, the
    L3 budgets): (the ``Model``, the lowering, the ``Graph``); kept in the plan cache under
    ``key`` (when not None)."""
    from ..tiler.model import Model
    from . import plan_cache
    from .lowering import lower

    l1, l2, l3 = budgets
    m = Model(target, l1, l2, **l3)
    low = lower(net, alias, m, gname)
    graph = _planned(m, gname, low.layers)
    if key is not None:
        plan_cache.store(key.digest("graph"), (m, graph))
    return m, low, graph


def _cached_target_plan(key, model, g: OnnxGraph, target, budgets, options):
    """The target plan of ``g``, a plan from the plan cache: its entry, else ``model`` read
    again (``plan_cache.model_again``) and planned."""
    from ..tiler.graph import Graph
    from ..tiler.model import Model
    from . import plan_cache

    plan = plan_cache.fetch(key.digest("graph"))
    if isinstance(plan, tuple) and len(plan) == 2 and isinstance(plan[0], Model) and \
            isinstance(plan[1], Graph):
        return plan
    g.from_plan_cache = False
    net, alias, gname = _imported(plan_cache.model_again(model, key.model), options)
    m, _, graph = _target_plan(net, alias, gname, target, budgets, key)
    return m, graph


def _plan_key(model, target, budgets, options):
    """The plan cache's ``Key``, or None when the plan cache is off or cannot hold this
    model (``npukit.onnx.plan_cache``)."""
    from ..tiler.model import tiler_target
    from . import plan_cache
    from .lowering import HANDLERS

    digest = plan_cache.model_digest(model) if plan_cache.enabled() else None
    if digest is None:
        return None
    try:
        resolved = tiler_target(target)
    except NpukitError:  # refused below, in the order load refuses things
        return None
    return plan_cache.Key(digest, resolved, budgets, *options, frozenset(HANDLERS))


def _imported(model, options):
    """The model read and normalized: (its ``Net``, the aliases, the graph's C name)."""
    from .lowering import HANDLERS, c_name
    from .normalize import normalize
    from .reader import read

    input_shapes, constants, dtype = options
    net = read(model, input_shapes, constants, native=frozenset(HANDLERS))
    alias = normalize(net, fuse_qdq=dtype is None)
    base = net.name if re.match(r"[A-Za-z]", net.name or "") else f"Model_{net.name}"
    # Not a name the C library or the emitted main.c defines.
    gname = c_name(base, "", {"main", "malloc", "free", "exit", "abort", "printf", "memcpy",
                              "memset", "fopen", "fclose", "fread", "fwrite", "snprintf"})
    return net, alias, gname


def _host_plan(net, alias, target, gname: str, layers, l3: dict, key):
    """The graph ``net`` planned on ``host_target(target)``, kept in the plan cache under
    ``key`` (when not None)."""
    from ..tiler.model import Model
    from . import plan_cache
    from .lowering import lower

    h = Model(host_target(target), **l3)
    lower(net, alias, h, gname, host=True)
    graph = _planned(h, gname, layers)
    if key is not None:
        plan_cache.store(key.digest("host"), graph)
        _known(graph, key)
    return graph


def _known(graph, key) -> None:
    """Tell the C back end the host plan's C is decided by its plan cache key: a later
    process finds its compiled C without generating it (``npukit.tiler.graph_link.known_as``)."""
    from ..tiler.graph_link import known_as

    known_as(graph, key.digest("host"))


def _cached_host_plan(key, model, g: OnnxGraph, options, l3: dict):
    """The host plan of ``g``, a plan from the plan cache: its entry, else ``model`` read
    again (``plan_cache.model_again``) and planned for the host."""
    from ..tiler.graph import Graph
    from . import plan_cache

    graph = plan_cache.fetch(key.digest("host"))
    if isinstance(graph, Graph):
        _known(graph, key)
        return graph
    net, alias, _ = _imported(plan_cache.model_again(model, key.model), options)
    return _host_plan(net, alias, g.model.target, g.name, g.layers, l3, key)


def _planned(m, gname: str, layers):
    """``m.graph(gname)``; a refusal of the planner or the tiler, which begins with a layer's
    name, names the ONNX nodes the layer stands for too."""
    try:
        return m.graph(gname)
    except NpukitError as exc:
        text = str(exc)
        for info in layers:
            if text.startswith(f"{info.name}:") and info.nodes:
                what = "node" if len(info.nodes) == 1 else "nodes"
                names = ", ".join(repr(n) for n in info.nodes)
                raise type(exc)(f"{what} {names} ({info.ops}), layer {text}") from None
        raise


# L2 on the host: room for every tensor (the generated code allocates what the plan uses, not
# this). L1 on the host: the generated code holds a layer's L1 tiles in local arrays, on the
# C stack (8 MiB for a main thread), so its tiles are large but bounded: a layer of up to
# HOST_L1 bytes runs whole, a larger one in a few tiles.
HOST_L2 = 1 << 40
HOST_L1 = 1 << 20


def host_target(target):
    """``target`` with an L1 of ``HOST_L1`` and an L2 of ``HOST_L2`` bytes: the target a graph
    is planned on to run on the host in large tiles (``OnnxGraph.run(schedule="host")``)."""
    from ..machine import FrozenMap, Memory

    sizes = {"L1": HOST_L1, "L2": HOST_L2}
    grown = {k: Memory(k, max(v.size, sizes[k])) if k in sizes else v
             for k, v in target.memories.items()}
    return replace(target, memories=FrozenMap(grown))


def shape_operands(model) -> list[str]:
    """The graph inputs of ``model`` that only select a shape (a Reshape's shape, axes, pads,
    starts and ends, scales, sizes, repeats): ``load`` needs their values as ``constants``."""
    from .reader import shape_operands as find

    return find(model)


def constant_operands(model) -> list[str]:
    """The graph inputs of ``model`` that ``load`` needs as ``constants``: those that only
    select a shape (``shape_operands``) and those npukit compiles in (a Conv's weights and
    bias, quantization scales and zero points, a Pad's fill value)."""
    from .reader import constant_operands as find

    return find(model)


def validate(model, inputs, reference=None, **kw):
    """A model validated on a data set against ONNX Runtime, on local processes or a Dask
    cluster (``npukit.onnx.validation.validate``)."""
    from .validation import validate as run

    return run(model, inputs, reference, **kw)


def sweep(model, l1, l2, l3=(None,), targets=("gap8",), **kw):
    """A model planned under every combination of budgets (``npukit.onnx.sweeps.sweep``)."""
    from .sweeps import sweep as run

    return run(model, l1, l2, l3, targets, **kw)
