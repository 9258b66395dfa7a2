"""The state a lowering builds: the graph's tensor declarations (``Decl``), its layers
(``LayerInfo``) and the ``Lowering`` context the operator handlers of
``npukit.onnx.lowering`` write into; the fusion checks they share; the graph's declaration on
the AutoTiler model at the end."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ...cdecl import C_KEYWORDS
from ...errors import ModelError
from ...tiler import layer_generators as G
from ...tiler.basic_kernels import common
from ...tiler.basic_kernels.common import f32_bits
from ...tiler.graph_api import (
    ArgDirection,
    ArgScope,
    AT_GraphCtrl,
    AT_MemLocation,
    ConstInfo,
    GNodeArg,
    GNodeArgType,
    TCArgInfo,
)
from ...tiler.model import Model
from ..normalize import _clip_bounds
from ..reader import Net, Node

ACTS = {"Relu": common.ACT_RELU, "LeakyRelu": common.ACT_LEAKY, "Clip": common.ACT_CLIP,
        "Sigmoid": common.ACT_SIGMOID, "Tanh": common.ACT_TANH,
        "HardSigmoid": common.ACT_HSIGMOID, "HardSwish": common.ACT_HSWISH}
VIEW_OPS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")
MAX_COLS = 1024  # the longest row an elementwise layer's view gets


@dataclass
class Decl:
    """A graph tensor: C name, kind ("in", "out", "inout", "const", "local"), dtype, the
    ONNX tensor it holds (an output's name) and a constant's values."""

    cname: str
    kind: str
    dtype: np.dtype
    size: int
    onnx: str | None = None
    values: np.ndarray | None = None


@dataclass
class LayerInfo:
    """One layer: its user kernel, what it computes (the ONNX operations fused into it), the
    ONNX nodes it stands for and its bindings (GNodeArg direction, tensor)."""

    name: str
    ops: str
    nodes: tuple[str, ...]
    detail: str
    bindings: list = field(default_factory=list)


def c_name(text: str, prefix: str, taken: set[str]) -> str:
    """A C identifier for ``text``: ``prefix`` + its letters, digits and underscores, unique
    in ``taken`` (which it joins)."""
    base = prefix + re.sub(r"[^A-Za-z0-9_]", "_", text)[:40]
    base = re.sub(r"__+", "_", base)
    name, k = base, 1
    while name in taken or name in C_KEYWORDS:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name




def int_list(node: Node, key: str, n: int, default: int) -> list[int]:
    v = list(node.attrs.get(key, [default] * n))
    if len(v) != n:
        raise ModelError(f"{node.where()}: attribute {key}={v} has {len(v)} values, the "
                         f"operation has {n} spatial dimensions")
    return [int(x) for x in v]


def rows_cols(n: int, max_cols: int = MAX_COLS) -> tuple[int, int]:
    """A [rows, cols] view of ``n`` values: the longest row up to ``max_cols`` that divides
    n."""
    for c in range(min(n, max_cols), 0, -1):
        if n % c == 0:
            return n // c, c
    return n, 1



class Lowering:
    """What the operator handlers build on a model from a normalized ``Net``: the graph's
    tensor declarations, its layers and the fusion checks they share."""

    def __init__(self, net: Net, alias: dict[str, str], model: Model, graph_name: str,
                 host: bool = False):
        self.net, self.m, self.gname = net, model, graph_name
        self.host = host  # planned for the host schedule
        self.alias = alias
        self.decls: dict[str, Decl] = {}
        self.of: dict[str, str] = {}  # ONNX tensor -> C name
        self.layers: list[LayerInfo] = []
        self.steps: dict[str, float] = {}  # dequantized tensor -> its scale
        self.taken: set[str] = {graph_name}
        self.done: set[int] = set()
        self.consumers: dict[str, list[Node]] = {}
        for n in net.nodes:
            for t in n.inputs:
                if t:
                    self.consumers.setdefault(t, []).append(n)
        # Layout operations name the same bytes: a graph output reached through them is
        # written directly by the layer that makes their first input.
        parent = {n.outputs[0]: n.inputs[0] for n in net.nodes if n.op in VIEW_OPS}
        self.output_of_root: dict[str, str] = {}
        for o in net.outputs:
            r = self.alias.get(o, o)
            while r in parent:
                r = parent[r]
            self.output_of_root.setdefault(r, o)
        self.read_later = {t for n in net.nodes for t in n.inputs if t}
        # Elementwise rows short enough that four of them (two slots in, two out) take at
        # most an eighth of L1.
        self.max_cols = max(1, min(MAX_COLS, self.m.l1_budget // 128))

    # -- tensors -----------------------------------------------------------------------------

    def info(self, t: str):
        t = self.alias.get(t, t)
        if t in self.net.info:
            return self.net.info[t]
        raise ModelError(f"tensor {t!r}: unknown shape")

    def shape(self, t: str) -> tuple[int, ...]:
        t = self.alias.get(t, t)
        if t in self.net.consts:
            return tuple(self.net.consts[t].shape)
        return self.info(t).shape

    def dtype(self, t: str) -> np.dtype:
        t = self.alias.get(t, t)
        if t in self.net.consts:
            return self.net.consts[t].dtype
        return self.info(t).dtype

    def const_input(self, n: Node, k: int, what: str) -> np.ndarray | None:
        """Input ``k`` of ``n`` as a constant's flat values; None when it is absent or
        empty. A tensor the model computes is refused, naming it as ``what``."""
        if k >= len(n.inputs) or not n.inputs[k]:
            return None
        t = self.alias.get(n.inputs[k], n.inputs[k])
        if t not in self.net.consts:
            raise ModelError(f"{n.where()}: {what} {n.inputs[k]!r} is computed by the model; "
                             f"npukit needs it as a constant")
        v = self.net.consts[t].reshape(-1)
        return v if v.size else None

    def const(self, values: np.ndarray, hint: str) -> str:
        """A new graph constant holding ``values``."""
        values = np.ascontiguousarray(values)
        if values.dtype.name not in common.LAYER_CODES:
            raise ModelError(f"constant {hint!r}: dtype {values.dtype} cannot be a graph tensor")
        name = c_name(hint, "W_", self.taken)
        self.decls[name] = Decl(name, "const", values.dtype, values.size, None, values)
        return name

    def tensor(self, t: str) -> str:
        """The graph tensor holding ONNX tensor ``t`` (a constant is declared on first use)."""
        t = self.alias.get(t, t)
        if t in self.of:
            return self.of[t]
        if t in self.net.consts:
            v = self.net.consts[t]
            if v.dtype == np.float64:
                v = v.astype(np.float32)
            self.of[t] = self.const(v, t)
            return self.of[t]
        if t in self.net.inputs:
            i = self.net.info[t]
            name = c_name(t, "In_", self.taken)
            self.decls[name] = Decl(name, "in", i.dtype, i.size, t)
            self.of[t] = name
            return name
        raise ModelError(f"tensor {t!r} is read before any layer writes it")

    def output(self, t: str, dtype=None, size: int | None = None) -> str:
        """Declare the tensor a layer writes for ONNX tensor ``t``: a graph output argument
        when it is one (or names one's bytes), else a local."""
        t = self.alias.get(t, t)
        dtype = np.dtype(dtype if dtype is not None else self.info(t).dtype)
        size = size if size is not None else self.info(t).size
        onnx_out = self.output_of_root.get(t)
        if onnx_out is not None and not any(d.onnx == onnx_out for d in self.decls.values()):
            name = c_name(onnx_out, "Out_", self.taken)
            kind = "inout" if t in self.read_later or onnx_out != t else "out"
            self.decls[name] = Decl(name, kind, dtype, size, onnx_out)
        else:
            name = c_name(t, "T_", self.taken)
            self.decls[name] = Decl(name, "local", dtype, size, None)
        self.of[t] = name
        return name

    def local(self, hint: str, dtype, size: int) -> str:
        name = c_name(hint, "T_", self.taken)
        self.decls[name] = Decl(name, "local", np.dtype(dtype), size, None)
        return name

    def layer(self, op: str) -> str:
        """A new layer's user kernel name: ``L<k>_<op>``."""
        return c_name(f"{len(self.layers)}_{op}", "L", self.taken)

    def add(self, name: str, ops: str, nodes: list[Node], detail: str, ins: list[str],
            outs: list[str]) -> None:
        binds = [(GNodeArgType.GNA_IN, t) for t in ins] + [(GNodeArgType.GNA_OUT, t) for t in outs]
        names = tuple(x for n in nodes for x in [n.name, *n.attrs.get("_folded", [])])
        self.layers.append(LayerInfo(name, ops, names, detail, binds))
        for n in nodes:
            self.done.add(id(n))

    # -- helpers -----------------------------------------------------------------------------

    def only_reader(self, t: str) -> Node | None:
        r = self.consumers.get(t, [])
        if len(r) != 1 or t in self.net.outputs or any(
                self.alias.get(o, o) == t for o in self.net.outputs):
            return None
        return r[0] if id(r[0]) not in self.done else None

    def chw(self, node: Node, t: str) -> tuple[int, int, int]:
        s = self.shape(t)
        if len(s) not in (3, 4):
            raise ModelError(f"{node.where()}: input {t!r} has shape {s}; npukit's spatial "
                             f"layers take [N, C, W] or [N, C, H, W]")
        if s[0] != 1:
            raise ModelError(f"{node.where()}: input {t!r} has batch {s[0]}; npukit's spatial "
                             f"layers run one image (batch 1): export the model with batch 1")
        return (s[1], 1, s[2]) if len(s) == 3 else (s[1], s[2], s[3])

    def act_params(self, a: Node) -> tuple[int, tuple[int, int]]:
        """A float activation node as (code, parameter bits)."""
        code = ACTS[a.op]
        if a.op == "LeakyRelu":
            return code, (f32_bits(a.attrs.get("alpha", 0.01)), 0)
        if a.op == "Clip":
            lo, hi = _clip_bounds(self.net, a)
            big = float(np.finfo(np.float32).max)  # an absent bound, as ONNX Runtime's
            return code, (f32_bits(-big if lo is None else lo),
                          f32_bits(big if hi is None else hi))
        if a.op == "HardSigmoid":
            return code, (f32_bits(a.attrs.get("alpha", 0.2)), f32_bits(a.attrs.get("beta", 0.5)))
        if a.op == "HardSwish":
            return code, (f32_bits(1 / 6), f32_bits(0.5))
        return code, (0, 0)

    def fusable_act(self, t: str, quant: bool) -> Node | None:
        a = self.only_reader(t)
        if a is None or quant or a.op not in ACTS:
            return None
        if a.op == "Clip":
            try:
                _clip_bounds(self.net, a)
            except ModelError:
                return None
        return a

    def with_float_act(self, n: Node) -> tuple[list[Node], str, str, int, tuple[int, int]]:
        """A float layer for ``n`` with the activation it absorbs, if any: (nodes, operators,
        tensor written, activation code, its parameter bits)."""
        act = self.fusable_act(n.outputs[0], False)
        if act is None:
            return [n], n.op, n.outputs[0], common.ACT_NONE, (0, 0)
        code, ap = self.act_params(act)
        return [n, act], f"{n.op}+{act.op}", act.outputs[0], code, ap

    def fusable_pool(self, t: str, quant: bool) -> Node | None:
        p = self.only_reader(t)
        if p is None or p.op not in ("MaxPool", "AveragePool") or (quant and p.op != "MaxPool"):
            return None
        if self.dtype(p.inputs[0]) != self.dtype(p.outputs[0]):
            return None
        k = p.attrs.get("kernel_shape", [])
        if len(k) != 2 or len(p.outputs) > 1 and p.outputs[1]:
            return None
        pads = p.attrs.get("pads", [0] * 4)
        strides = p.attrs.get("strides", [1, 1])
        if any(pads) or any(d != 1 for d in p.attrs.get("dilations", [1, 1])) or \
                p.attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID") or \
                any(kk < s for kk, s in zip(k, strides)):
            return None
        return p

    def finish_output(self, o: str) -> None:
        """A graph output whose bytes no layer writes into an output argument gets a copy."""
        if any(d.onnx == o and d.kind in ("out", "inout") for d in self.decls.values()):
            return
        src = self.tensor(o)
        d = self.decls[src]
        if d.kind == "out":  # another graph output's bytes (y and Identity(y)): the copy reads it
            d.kind = "inout"
        name = c_name(o, "Out_", self.taken)
        self.decls[name] = Decl(name, "out", d.dtype, d.size, o)
        rows, cols = rows_cols(d.size, self.max_cols)
        lname = self.layer("Copy")
        if d.dtype == np.float32:
            G.unary(self.m, lname, in_dt=d.dtype, out_dt=d.dtype, Rows=rows, Cols=cols,
                    Op=common.ACT_NONE)
        else:
            G.typed(self.m, lname, op="Cast", in_dts=(d.dtype,), out_dt=d.dtype, Planes=1,
                    Rows=rows, Cols=cols, fulls=((False, rows > 1, cols > 1),))
        self.add(lname, "Copy", [], f"{d.size} values to output {o!r}", [src], [name])



    def declare(self) -> None:
        """CreateGraph, AddNode and CloseGraph on the model."""
        def info(d: Decl):
            ctype = common.layer_c_type(d.dtype) + " *"
            big = d.size * d.dtype.itemsize > self.m.l2_budget // 2
            l3 = AT_MemLocation.AT_MEM_L3_DEFAULTRAM if big else AT_MemLocation.AT_MEM_L2
            if d.kind == "const":
                bits = 8 * d.dtype.itemsize
                return TCArgInfo(ctype, d.cname, ArgScope.ARG_SCOPE_GLOBAL,
                                 ArgDirection.ARG_DIR_CONSTIN, AT_MemLocation.AT_MEM_L3_HFLASH,
                                 AT_MemLocation.AT_MEM_UNDEF,
                                 ConstInfo(d.values, 0 if d.dtype.kind == "f" else 1, 1, bits,
                                           0))
            if d.kind == "local":
                return TCArgInfo(ctype, d.cname, ArgScope.ARG_SCOPE_LOCAL,
                                 ArgDirection.ARG_DIR_INOUT, AT_MemLocation.AT_MEM_UNDEF,
                                 AT_MemLocation.AT_MEM_UNDEF, 0)
            direction = {"in": ArgDirection.ARG_DIR_IN, "out": ArgDirection.ARG_DIR_OUT,
                         "inout": ArgDirection.ARG_DIR_INOUT}[d.kind]
            return TCArgInfo(ctype, d.cname, ArgScope.ARG_SCOPE_ARG, direction, l3,
                             AT_MemLocation.AT_MEM_UNDEF, 0)

        used = {t for layer in self.layers for _, t in layer.bindings}
        args = [info(d) for d in self.decls.values() if d.kind != "local" and d.cname in used]
        locals_ = [info(d) for d in self.decls.values() if d.kind == "local" and d.cname in used]
        self.m.AT_SetGraphCtrl(AT_GraphCtrl.AT_GRAPH_TRACE_EXEC, 0)
        self.m.CreateGraph(self.gname, tuple(args), tuple(locals_))
        for layer in self.layers:
            self.m.AddNode(layer.name, tuple(GNodeArg(k, t) for k, t in layer.bindings))
        self.m.CloseGraph()
