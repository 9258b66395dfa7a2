"""Lowering a normalized ``Net`` to an AutoTiler graph: one user kernel per layer (a fused
group of ONNX operations), made by the generators of ``npukit.tiler.layer_generators``; tensors
declared with ``TCArgInfo`` (graph inputs and outputs as arguments, weights as constants,
the rest as locals), the layers connected with ``AddNode``. The model's planner and tiler
do the rest, as for a hand-written AutoTiler model.

Fusion: a convolution absorbs the activation (Relu, LeakyRelu, Clip, Sigmoid, Tanh) and the
pooling without padding that alone read its output; a MatMul or Gemm, and an Add, the
activation that follows. Layout operations (Reshape, Flatten, Squeeze, Unsqueeze) are names
for the same bytes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from ..cdecl import C_KEYWORDS
from ..dtypes import int_range, is_float
from ..errors import ModelError
from ..tiler import layer_generators as G
from ..tiler.basic_kernels import common, elementwise, movement
from ..tiler.basic_kernels import softmax as softmax_kernels
from ..tiler.graph_api import (
    ArgDirection,
    ArgScope,
    AT_GraphCtrl,
    AT_MemLocation,
    ConstInfo,
    GNodeArg,
    GNodeArgType,
    TCArgInfo,
)
from ..tiler.model import Model
from .reader import Net, Node, QConst

ACTS = {"Relu": common.ACT_RELU, "LeakyRelu": common.ACT_LEAKY, "Clip": common.ACT_CLIP,
        "Sigmoid": common.ACT_SIGMOID, "Tanh": common.ACT_TANH}
BINARY = {"Add": elementwise.BIN_ADD, "Sub": elementwise.BIN_SUB, "Mul": elementwise.BIN_MUL,
          "Div": elementwise.BIN_DIV}
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


def _f(v) -> int:
    return common.f32_bits(v)


def _ints(node: Node, key: str, n: int, default: int) -> list[int]:
    v = list(node.attrs.get(key, [default] * n))
    if len(v) != n:
        raise ModelError(f"{node.where()}: attribute {key}={v} has {len(v)} values, the "
                         f"operation has {n} spatial dimensions")
    return [int(x) for x in v]


def _rows_cols(n: int, max_cols: int = MAX_COLS) -> tuple[int, int]:
    """A [rows, cols] view of ``n`` values: the longest row up to ``max_cols`` that divides
    n."""
    for c in range(min(n, max_cols), 0, -1):
        if n % c == 0:
            return n // c, c
    return n, 1


def broadcast_view(out: tuple, shapes: list[tuple], max_cols: int = MAX_COLS):
    """Numpy broadcasting of ``shapes`` to ``out`` as a [planes, rows, cols] view in which
    each operand varies along a dimension or is constant along it: returns the three sizes
    and, per operand, whether it varies along (planes, rows, cols); None when more than three
    groups of dimensions alternate."""
    rank = len(out)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    groups: list[list] = []  # [size, varies per operand]
    for d in range(rank):
        if out[d] == 1:
            continue
        cls = tuple(p[d] == out[d] for p in padded)
        if groups and groups[-1][1] == cls:
            groups[-1][0] *= out[d]
        else:
            groups.append([out[d], cls])
    if len(groups) > 3:
        return None
    if len(groups) < 3:
        size, cls = groups.pop() if groups else (1, tuple(True for _ in shapes))
        rows, cols = _rows_cols(size, max_cols)
        groups += [[rows, cls], [cols, cls]]
    while len(groups) < 3:
        groups.insert(0, [1, tuple(False for _ in shapes)])
    sizes = tuple(g[0] for g in groups)
    fulls = [tuple(g[1][k] and g[0] > 1 for g in groups) for k in range(len(shapes))]
    return sizes, fulls


class Lowering:
    """Builds the model, its graph declarations and layers from a normalized ``Net``."""

    def __init__(self, net: Net, alias: dict[str, str], model: Model, graph_name: str):
        self.net, self.m, self.gname = net, model, graph_name
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
            return code, (_f(a.attrs.get("alpha", 0.01)), 0)
        if a.op == "Clip":
            from .normalize import _clip_bounds
            lo, hi = _clip_bounds(self.net, a)
            return code, (_f(-np.inf if lo is None else lo), _f(np.inf if hi is None else hi))
        return code, (0, 0)

    def fusable_act(self, t: str, quant: bool) -> Node | None:
        a = self.only_reader(t)
        if a is None or quant or a.op not in ACTS:
            return None
        if a.op == "Clip":
            from .normalize import _clip_bounds
            try:
                _clip_bounds(self.net, a)
            except ModelError:
                return None
        return a

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

    # -- the nodes ---------------------------------------------------------------------------

    def run(self) -> None:
        for n in self.net.nodes:
            if id(n) in self.done:
                continue
            fn = getattr(self, f"op_{n.op}", None)
            if fn is None:
                raise ModelError(f"{n.where()}: operator {n.op!r} is not supported by npukit "
                                 f"(see docs/onnx.md for the supported operators)")
            fn(n)
        for o in self.net.outputs:
            self.finish_output(o)

    def finish_output(self, o: str) -> None:
        """A graph output whose bytes no layer writes into an output argument gets a copy."""
        if any(d.onnx == o and d.kind in ("out", "inout") for d in self.decls.values()):
            return
        src = self.tensor(o)
        d = self.decls[src]
        name = c_name(o, "Out_", self.taken)
        self.decls[name] = Decl(name, "out", d.dtype, d.size, o)
        rows, cols = _rows_cols(d.size, self.max_cols)
        lname = self.layer("Copy")
        if d.dtype == np.float32:
            G.unary(self.m, lname, in_dt=d.dtype, out_dt=d.dtype, Rows=rows, Cols=cols,
                    Op=common.ACT_NONE)
        else:
            lo, hi = int_range(d.dtype)
            G.unary(self.m, lname, in_dt=d.dtype, out_dt=d.dtype, Rows=rows, Cols=cols,
                    Op=0, P0=lo, P1=hi)
        self.add(lname, "Copy", [], f"{d.size} values to output {o!r}", [src], [name])

    # layout: names for the same bytes
    def _view(self, n: Node) -> None:
        src = self.tensor(n.inputs[0])
        self.of[self.alias.get(n.outputs[0], n.outputs[0])] = src
        self.done.add(id(n))

    op_Reshape = op_Flatten = op_Squeeze = op_Unsqueeze = op_Identity = _view

    # -- windowed layers ---------------------------------------------------------------------

    def _window(self, n: Node, rank: int, kernel: list[int], dilations: list[int],
                strides: list[int], H: int, W: int, Ho: int, Wo: int) -> tuple[int, int, int, int]:
        """ONNX pads (top, left, bottom, right) from ``pads`` or ``auto_pad``."""
        auto = n.attrs.get("auto_pad", "NOTSET")
        if auto in ("NOTSET", ""):
            p = _ints(n, "pads", 2 * rank, 0)
            pads = (0, p[0], 0, p[1]) if rank == 1 else (p[0], p[1], p[2], p[3])
        elif auto == "VALID":
            pads = (0, 0, 0, 0)
        elif auto in ("SAME_UPPER", "SAME_LOWER"):
            out = []
            for size, k, d, s in zip((H, W), (kernel[0], kernel[-1]), (dilations[0],
                                                                       dilations[-1]),
                                     (strides[0], strides[-1])):
                total = max((math.ceil(size / s) - 1) * s + d * (k - 1) + 1 - size, 0)
                first = total // 2 if auto == "SAME_UPPER" else total - total // 2
                out.append((first, total - first))
            pads = (out[0][0], out[1][0], out[0][1], out[1][1])
            if rank == 1:
                pads = (0, pads[1], 0, pads[3])
        else:
            raise ModelError(f"{n.where()}: auto_pad={auto!r} is not an ONNX value")
        if any(v < 0 for v in pads):
            raise ModelError(f"{n.where()}: negative pads {list(pads)} are not supported")
        return pads

    def _input_rows(self, n: Node, x: str, C: int, H: int, W: int, dt, pt: int, need: int,
                    zero: int, rest: int) -> tuple[str, bool, int]:
        """How a windowed layer reads its input: (tensor, tiled rows, physical height). Rows
        are tiled straight from the input when no padding row is needed; the whole plane is
        read when two planes take at most half the L1 budget and leave the ``rest`` the layer
        needs at its smallest tile (padding in the kernel); otherwise a pad_axis layer
        first makes the padded rows."""
        if pt == 0 and H >= need:
            return x, True, H
        planes = 2 * H * W * np.dtype(dt).itemsize
        if planes <= self.m.l1_budget // 2 and planes + rest <= self.m.l1_budget:
            return x, False, H
        hp = max(pt + H, need)
        name = self.layer("PadRows")
        G.pad_axis(self.m, name, dt=dt, Outer=C, D=H, Inner=W, PadBegin=pt,
                   PadEnd=hp - pt - H, Value=(0 if is_float(dt) else zero))
        out = self.local(f"{n.outputs[0]}_padrows", dt, C * hp * W)
        self.add(name, "Pad rows", [], f"{C}x{H}x{W} -> {C}x{hp}x{W} ({pt} above, "
                 f"{hp - pt - H} below) for {n.name}", [x], [out])
        return out, True, hp

    def op_Conv(self, n: Node) -> None:
        self._conv(n, quant=False)

    def op_QConv(self, n: Node) -> None:
        self._conv(n, quant=True)

    def _conv(self, n: Node, quant: bool) -> None:
        x = n.inputs[0]
        C, H, W = self.chw(n, x)
        rank = len(self.shape(x)) - 2
        if quant:
            wq: QConst = n.attrs["w"]
            w = wq.values
        else:
            if n.inputs[1] not in self.net.consts:
                raise ModelError(f"{n.where()}: the weights {n.inputs[1]!r} must be a constant")
            w = self.net.consts[n.inputs[1]].astype(np.float32)
        if w.ndim != rank + 2:
            raise ModelError(f"{n.where()}: weights of shape {w.shape} for a {rank}-D input")
        if rank == 1:
            w = w[:, :, None, :]
        O, Cg, kh, kw = w.shape  # noqa: E741
        ks = n.attrs.get("kernel_shape")
        if ks is not None and list(ks) != list(w.shape[2:] if rank == 2 else w.shape[3:]):
            raise ModelError(f"{n.where()}: kernel_shape={list(ks)} but the weights are "
                             f"{list(w.shape)}")
        dil = _ints(n, "dilations", rank, 1)
        st = _ints(n, "strides", rank, 1)
        (dy, dx), (sy, sx) = ((1, dil[0]), (1, st[0])) if rank == 1 else (dil, st)
        group = int(n.attrs.get("group", 1))
        if C % group or O % group or Cg != C // group:
            raise ModelError(f"{n.where()}: group={group} with {C} input channels and weights "
                             f"{list(w.shape)}")
        out_t = n.outputs[0]
        _, Hc, Wc = self.chw(n, out_t) if len(self.shape(out_t)) in (3, 4) else (0, 0, 0)
        pads = self._window(n, rank, [kh, kw], [dy, dx], [sy, sx], H, W, Hc, Wc)
        pt, pl, pb, pr = pads
        want_h = (H + pt + pb - (dy * (kh - 1) + 1)) // sy + 1
        want_w = (W + pl + pr - (dx * (kw - 1) + 1)) // sx + 1
        if (want_h, want_w) != (Hc, Wc):
            raise ModelError(f"{n.where()}: output {Hc}x{Wc} but the attributes give "
                             f"{want_h}x{want_w}")
        depthwise = group == C and O == C and Cg == 1 and group > 1
        zw = 0
        if quant:
            zps = np.unique(wq.zero_point)
            if zps.size != 1:
                raise ModelError(f"{n.where()}: per-channel weight zero points {zps.tolist()} "
                                 f"differ; npukit takes one zero point for the weights")
            zw = int(zps[0])
        if group > 1 and not depthwise:
            dense = np.full((O, C, kh, kw), zw, w.dtype) if quant else \
                np.zeros((O, C, kh, kw), np.float32)
            og = O // group
            for gi in range(group):
                dense[gi * og:(gi + 1) * og, gi * Cg:(gi + 1) * Cg] = w[gi * og:(gi + 1) * og]
            w = dense
        # Fusion: an activation and a pooling without padding that alone read the output.
        nodes, ops = [n], ["QLinearConv" if quant else "Conv"]
        if n.attrs.get("_folded"):
            ops[0] += "+BatchNormalization"
        t = out_t
        act = self.fusable_act(t, quant)
        if act is not None:
            nodes.append(act)
            ops.append(act.op)
            t = act.outputs[0]
        pool = self.fusable_pool(t, quant)
        if pool is not None:
            nodes.append(pool)
            ops.append(pool.op)
            t = pool.outputs[0]
            if act is None and pool.op == "MaxPool":
                a2 = self.fusable_act(t, quant)
                if a2 is not None and not (a2.op == "LeakyRelu" and
                                           a2.attrs.get("alpha", 0.01) < 0):
                    act = a2
                    nodes.append(a2)
                    ops.append(a2.op)
                    t = a2.outputs[0]
        if pool is not None:
            fpy, fpx = pool.attrs["kernel_shape"]
            spy, spx = pool.attrs.get("strides", [1, 1])
            _, Ho, Wo = self.chw(pool, pool.outputs[0])
            poper = common.POOL_MAX if pool.op == "MaxPool" else common.POOL_AVG
        else:
            fpy = fpx = spy = spx = 1
            Ho, Wo, poper = Hc, Wc, common.POOL_NONE
        fe = dy * (kh - 1) + 1
        need = sy * spy * Ho + max(sy * (fpy - spy - 1) + fe, 0)
        zx = n.attrs["x"][1] if quant else 0
        # L1 besides the input planes at one output row: filters (two slots), bias and
        # scale, an output row (two slots), the accumulator rows of one pooled row.
        rest = (2 * kh * kw * w.dtype.itemsize + 8 * O + 2 * Wo * self.dtype(x).itemsize
                + 4 * Wc * fpy + 32)
        src, tiled, hp = self._input_rows(n, self.tensor(x), C, H, W, self.dtype(x), pt, need,
                                          zx, rest)
        name = self.layer("Conv")
        params = dict(InFeat=C, OutFeat=O, Width=W, Height=hp, in_tiled=tiled, Hreal=H,
                      PadT=pt, PadL=pl, Fcx=kw, Fcy=kh, Dcx=dx, Dcy=dy, Scx=sx, Scy=sy, Wc=Wc,
                      Hc=Hc, depthwise=depthwise, PoolOper=poper, Fpx=fpx, Fpy=fpy, Spx=spx,
                      Spy=spy, Wo=Wo, Ho=Ho)
        wname = self.const(w, f"{n.name}_weights")
        if quant:
            sx_, zx = n.attrs["x"]
            sy_, zy = n.attrs["y"]
            sw = np.broadcast_to(np.asarray(wq.scale, np.float32).reshape(-1), (O,))
            scale = (np.float32(sx_) * sw.astype(np.float32)) / np.float32(sy_)
            bias = n.attrs.get("bias")
            bias = np.zeros(O, np.int32) if bias is None else np.asarray(bias, np.int32)
            lo, hi = n.attrs.get("lo"), n.attrs.get("hi")
            info = np.iinfo(self.dtype(t))
            lo = int(info.min) if lo is None else lo
            hi = int(info.max) if hi is None else hi
            G.conv_pool_act(self.m, name, in_dt=self.dtype(x), w_dt=w.dtype,
                            out_dt=self.dtype(t), Zin=zx, Zw=zw, Zout=zy, Lo=lo, Hi=hi, **params)
            ins = [src, wname, self.const(bias, f"{n.name}_bias"),
                   self.const(scale.astype(np.float32), f"{n.name}_scale")]
        else:
            bias = self.net.consts[n.inputs[2]].astype(np.float32) if len(n.inputs) > 2 and \
                n.inputs[2] else np.zeros(O, np.float32)
            if n.inputs[2:3] and n.inputs[2] and n.inputs[2] not in self.net.consts:
                raise ModelError(f"{n.where()}: the bias {n.inputs[2]!r} must be a constant")
            code, ap = self.act_params(act) if act is not None else (common.ACT_NONE, (0, 0))
            G.conv_pool_act(self.m, name, in_dt="float32", w_dt="float32", out_dt="float32",
                            Act=code, ActParams=ap, **params)
            ins = [src, wname, self.const(bias, f"{n.name}_bias")]
        kind = "depthwise " if depthwise else (f"grouped({group}) " if group > 1 else "")
        detail = (f"{kind}{kh}x{kw} s{sy}x{sx} d{dy}x{dx} pads {list(pads)}, {C}->{O} ch, "
                  f"{H}x{W} -> {Ho}x{Wo}" + ("" if tiled else ", whole input planes"))
        self.add(name, "+".join(ops), nodes, detail, ins, [self.output(t)])

    def _pool(self, n: Node, quant_avg: bool) -> None:
        x = n.inputs[0]
        C, H, W = self.chw(n, x)
        rank = len(self.shape(x)) - 2
        if len(n.outputs) > 1 and n.outputs[1]:
            raise ModelError(f"{n.where()}: the Indices output is not supported")
        kernel = list(n.attrs.get("kernel_shape", []))
        if len(kernel) != rank:
            raise ModelError(f"{n.where()}: kernel_shape={kernel} for a {rank}-D input")
        dil = _ints(n, "dilations", rank, 1)
        st = _ints(n, "strides", rank, 1)
        if rank == 1:
            kernel, dil, st = [1] + kernel, [1] + dil, [1] + st
        _, Ho, Wo = self.chw(n, n.outputs[0])
        pads = self._window(n, rank, kernel, dil, st, H, W, Ho, Wo)
        pt, pl, pb, pr = pads
        avg = n.op in ("AveragePool", "QAveragePool")
        if quant_avg and any(d != 1 for d in dil):
            raise ModelError(f"{n.where()}: dilations={dil} on a quantized average pooling")
        fe = dil[0] * (kernel[0] - 1) + 1
        need = st[0] * Ho + max(fe - st[0], 0)
        dt = self.dtype(x)
        zx = n.attrs["x"][1] if quant_avg else 0
        src, tiled, hp = self._input_rows(n, self.tensor(x), C, H, W, dt, pt, need, zx,
                                          2 * Wo * dt.itemsize + 16)
        name = self.layer("AvgPool" if avg else "MaxPool")
        q = {}
        if quant_avg:
            (xs, xz), (ys, yz) = n.attrs["x"], n.attrs["y"]
            q = dict(InScale=_f(xs), InZp=xz, OutScale=_f(ys), OutZp=yz)
        G.pool(self.m, name, dt=dt, C=C, Width=W, Height=hp, in_tiled=tiled, Hreal=H, PadT=pt,
               PadL=pl, PadB=pb, PadR=pr, Fx=kernel[1], Fy=kernel[0], Sx=st[1], Sy=st[0],
               Dx=dil[1], Dy=dil[0], Wo=Wo, Ho=Ho, Oper=common.POOL_AVG if avg else common.POOL_MAX,
               CountPad=int(n.attrs.get("count_include_pad", 0)), **q)
        detail = (f"{kernel[0]}x{kernel[1]} s{st[0]}x{st[1]} d{dil[0]}x{dil[1]} pads "
                  f"{list(pads)} ceil_mode={n.attrs.get('ceil_mode', 0)}, {C}x{H}x{W} -> "
                  f"{Ho}x{Wo}")
        self.add(name, n.op, [n], detail, [src], [self.output(n.outputs[0])])

    def op_MaxPool(self, n: Node) -> None:
        if n.attrs.get("storage_order", 0) and len(n.outputs) > 1 and n.outputs[1]:
            raise ModelError(f"{n.where()}: storage_order applies to the Indices output, which "
                             f"is not supported")
        self._pool(n, False)

    def op_AveragePool(self, n: Node) -> None:
        self._pool(n, False)

    def op_QAveragePool(self, n: Node) -> None:
        self._pool(n, True)

    def _global(self, n: Node, quant: bool) -> None:
        x = n.inputs[0]
        s = self.shape(x)
        if len(s) < 3 or s[0] != 1:
            raise ModelError(f"{n.where()}: input {x!r} of shape {s}: npukit takes [1, C, ...]")
        C, hw = s[1], int(np.prod(s[2:]))
        rows, cols = _rows_cols(hw, self.max_cols)
        dt = self.dtype(x)
        q = {}
        if quant:
            (xs, xz), (ys, yz) = n.attrs["x"], n.attrs["y"]
            q = dict(InZp=xz, Scale=_f(np.float32(xs) / (np.float32(ys) * np.float32(hw))),
                     OutZp=yz)
        name = self.layer("GlobalAvgPool")
        G.global_pool(self.m, name, dt=dt, C=C, Width=cols, Height=rows, **q)
        self.add(name, n.op, [n], f"{C} planes of {hw}", [self.tensor(x)],
                 [self.output(n.outputs[0])])

    def op_GlobalAveragePool(self, n: Node) -> None:
        self._global(n, False)

    def op_QGlobalAveragePool(self, n: Node) -> None:
        self._global(n, True)

    # -- elementwise -------------------------------------------------------------------------

    def _unary(self, n: Node, in_dt, out_dt, op: int, p0: int, p1: int, what: str) -> None:
        size = self.info(n.outputs[0]).size
        rows, cols = _rows_cols(size, self.max_cols)
        name = self.layer(n.op)
        G.unary(self.m, name, in_dt=in_dt, out_dt=out_dt, Rows=rows, Cols=cols, Op=op, P0=p0,
                P1=p1)
        self.add(name, n.op, [n], what, [self.tensor(n.inputs[0])], [self.output(n.outputs[0])])

    def _act(self, n: Node) -> None:
        dt = self.dtype(n.inputs[0])
        if n.op == "Relu" and dt in (np.int8, np.uint8):  # max(x, 0) on integers (opset 14)
            hi = int_range(dt)[1]
            return self._unary(n, dt, dt, 0, 0, hi, f"clamp to [0, {hi}]")
        if dt != np.float32:
            raise ModelError(f"{n.where()}: {n.op} on {self.dtype(n.inputs[0])} data outside a "
                             f"DequantizeLinear/QuantizeLinear pair is not supported")
        code, (p0, p1) = self.act_params(n)
        self._unary(n, "float32", "float32", code, p0, p1, f"{self.info(n.outputs[0]).size} "
                    f"values")

    op_Relu = op_LeakyRelu = op_Clip = op_Sigmoid = op_Tanh = _act

    def op_QClamp(self, n: Node) -> None:
        dt = self.dtype(n.inputs[0])
        self._unary(n, dt, dt, 0, n.attrs["lo"], n.attrs["hi"],
                    f"clamp to [{n.attrs['lo']}, {n.attrs['hi']}]")

    def _per_tensor(self, n: Node, what: str) -> tuple[np.float32, int]:
        s = np.asarray(self.net.consts.get(n.inputs[1]), np.float32) if n.inputs[1] in \
            self.net.consts else None
        if s is None:
            raise ModelError(f"{n.where()}: the scale {n.inputs[1]!r} must be a constant")
        z = self.net.consts[n.inputs[2]] if len(n.inputs) > 2 and n.inputs[2] else \
            np.zeros(1, self.dtype(n.outputs[0] if what == "quantize" else n.inputs[0]))
        if s.size != 1 or np.asarray(z).size != 1:
            raise ModelError(f"{n.where()}: axis={n.attrs.get('axis', 1)} with {s.size} scales: "
                             f"per-axis {what} of computed tensors is not supported (weights "
                             f"are folded)")
        if n.attrs.get("block_size", 0):
            raise ModelError(f"{n.where()}: block_size={n.attrs['block_size']} is not supported")
        return np.float32(s.reshape(-1)[0]), int(np.asarray(z).reshape(-1)[0])

    def op_QuantizeLinear(self, n: Node) -> None:
        s, z = self._per_tensor(n, "quantize")
        if n.attrs.get("saturate", 1) != 1:
            raise ModelError(f"{n.where()}: saturate=0 applies to float8 outputs only")
        out_dt = self.info(n.outputs[0]).dtype
        if out_dt not in (np.int8, np.uint8):
            raise ModelError(f"{n.where()}: output type {out_dt} (npukit quantizes to int8 and "
                             f"uint8)")
        self._unary(n, "float32", out_dt, elementwise.UN_QUANT, _f(s), z,
                    f"scale {s:g}, zero point {z}")

    def op_DequantizeLinear(self, n: Node) -> None:
        s, z = self._per_tensor(n, "dequantize")
        in_dt = self.dtype(n.inputs[0])
        if in_dt not in (np.int8, np.uint8):
            raise ModelError(f"{n.where()}: input type {in_dt} (npukit dequantizes int8 and "
                             f"uint8)")
        self.steps[n.outputs[0]] = float(s)
        self._unary(n, in_dt, "float32", elementwise.UN_DEQUANT, _f(s), z,
                    f"scale {s:g}, zero point {z}")

    def op_QLut(self, n: Node) -> None:
        """An 8-bit function as a 256-entry table (npukit.lut): entry x holds
        quantize(f(dequantize(x))), f in float64."""
        from ..lut import Lut

        in_dt, out_dt = self.dtype(n.inputs[0]), self.dtype(n.outputs[0])
        (xs, xz), (ys, yz) = n.attrs["x"], n.attrs["y"]
        info_in, info_out = np.iinfo(in_dt), np.iinfo(out_dt)
        xs_ = np.arange(info_in.min, info_in.max + 1)
        real = (xs_ - xz).astype(np.float32) * np.float32(xs)
        f = lut_function(n)
        y = np.asarray(f(real.astype(np.float64)), np.float64).astype(np.float32)
        table = common.quantize(y, ys, yz, int(info_out.min), int(info_out.max)).astype(out_dt)
        Lut(table)  # checks the table as npukit.lut does
        size = self.info(n.outputs[0]).size
        rows, cols = _rows_cols(size, self.max_cols)
        name = self.layer(f"Lut{n.attrs['fn']}")
        G.lut(self.m, name, in_dt=in_dt, out_dt=out_dt, Rows=rows, Cols=cols)
        err = float(np.abs((table.astype(np.float64) - yz) * float(ys) - f(real.astype(
            np.float64))).max())
        self.add(name, f"{n.attrs['fn']} (table)", [n],
                 f"256-entry table of {n.attrs['fn']}, max error {err:.3g} (output scale "
                 f"{float(ys):.3g})",
                 [self.tensor(n.inputs[0]), self.const(table, f"{n.name}_table")],
                 [self.output(n.outputs[0])])

    def _binary_layer(self, n: Node, a: str, b: str, out: str, nodes: list[Node], op: int,
                      ops: str, **kw) -> None:
        shapes = [self.shape(a), self.shape(b)]
        view = broadcast_view(self.info(out).shape, shapes, self.max_cols)
        if view is None:
            raise ModelError(f"{n.where()}: broadcasting {shapes[0]} with {shapes[1]} to "
                             f"{self.info(out).shape} alternates more than three groups of "
                             f"dimensions; npukit's broadcast views have three")
        (P, R, L), (fa, fb) = view
        name = self.layer(n.op)
        G.binary(self.m, name, a_dt=self.dtype(a), b_dt=self.dtype(b),
                 out_dt=self.info(out).dtype, Planes=P, Rows=R, Cols=L, a_full=fa, b_full=fb,
                 Op=op, **kw)
        self.add(name, ops, nodes, f"{shapes[0]} {n.op} {shapes[1]} -> {self.info(out).shape}",
                 [self.tensor(a), self.tensor(b)], [self.output(out)])

    def _float_binary(self, n: Node) -> None:
        for t in n.inputs:
            if self.dtype(t) != np.float32:
                raise ModelError(f"{n.where()}: {n.op} of {self.dtype(t)} tensors outside a "
                                 f"DequantizeLinear/QuantizeLinear pair is not supported")
        nodes, ops, out = [n], n.op, n.outputs[0]
        act = self.fusable_act(out, False)
        code, ap = common.ACT_NONE, (0, 0)
        if act is not None:
            code, ap = self.act_params(act)
            nodes.append(act)
            ops, out = f"{n.op}+{act.op}", act.outputs[0]
        self._binary_layer(n, n.inputs[0], n.inputs[1], out, nodes, BINARY[n.op], ops,
                           Act=code, P=(ap[0], ap[1], 0))

    op_Add = op_Sub = op_Mul = op_Div = _float_binary

    def op_Sum(self, n: Node) -> None:
        ins = [t for t in n.inputs if t]
        if len(ins) == 1:
            return self._view(Node("Identity", n.name, ins, n.outputs, {}))
        acc = ins[0]
        for k, t in enumerate(ins[1:]):
            last = k == len(ins) - 2
            out = n.outputs[0] if last else f"{n.outputs[0]}__sum{k}"
            if not last:
                self.net.info[out] = self.net.info[n.outputs[0]]
            step = Node("Add", f"{n.name}_{k}", [acc, t], [out], {})
            self._binary_layer(step, acc, t, out, [n] if last else [], elementwise.BIN_ADD, "Sum")
            acc = out

    def op_QAdd(self, n: Node) -> None:
        (sa, za), (sb, zb), (sy, zy) = n.attrs["a"], n.attrs["b"], n.attrs["y"]
        ra = np.float32(sa) / np.float32(sy)
        rb = np.float32(n.attrs.get("sign", 1)) * (np.float32(sb) / np.float32(sy))
        fixed = np.float32(zy) - (ra * np.float32(za) + rb * np.float32(zb))
        info = np.iinfo(self.dtype(n.outputs[0]))
        lo, hi = n.attrs.get("lo", int(info.min)), n.attrs.get("hi", int(info.max))
        a, b = (self._int_operand(n, t) for t in n.inputs)
        self._binary_layer(n, a, b, n.outputs[0], [n], elementwise.BIN_QADD, "QLinearAdd",
                           P=(_f(ra), _f(rb), _f(fixed)), Za=za, Zb=zb, Zout=zy, Lo=lo, Hi=hi)

    def op_QMul(self, n: Node) -> None:
        (sa, za), (sb, zb), (sy, zy) = n.attrs["a"], n.attrs["b"], n.attrs["y"]
        ratio = (np.float32(sa) * np.float32(sb)) / np.float32(sy)
        info = np.iinfo(self.dtype(n.outputs[0]))
        lo, hi = n.attrs.get("lo", int(info.min)), n.attrs.get("hi", int(info.max))
        a, b = (self._int_operand(n, t) for t in n.inputs)
        self._binary_layer(n, a, b, n.outputs[0], [n], elementwise.BIN_QMUL, "QLinearMul",
                           P=(_f(ratio), 0, 0), Za=za, Zb=zb, Zout=zy, Lo=lo, Hi=hi)

    def _int_operand(self, n: Node, t: str) -> str:
        """A quantized operand: a computed integer tensor, or a constant's integers."""
        q = self.net.qconsts.get(t)
        if q is not None:
            name = f"{t}__int"
            self.net.consts.setdefault(name, q.values)
            return name
        return t

    # -- matrix products ---------------------------------------------------------------------

    def _transposed(self, n: Node, t: str) -> str:
        """A 2-D tensor transposed by a layer (a constant is transposed here)."""
        if t in self.net.consts:
            name = f"{t}__T"
            self.net.consts[name] = np.ascontiguousarray(self.net.consts[t].T)
            return name
        r, c = self.shape(t)
        out = f"{t}__T_{n.name}"
        self.net.info[out] = type(self.info(t))((c, r), self.dtype(t))
        name = self.layer("Transpose")
        G.transpose(self.m, name, dt=self.dtype(t), Planes=1, A=r, B=c, I=1)
        self.add(name, "Transpose", [], f"[{r}, {c}] -> [{c}, {r}] for {n.name}",
                 [self.tensor(t)], [self.output(out)])
        return out

    def op_Gemm(self, n: Node) -> None:
        a, b = n.inputs[0], n.inputs[1]
        for t in (a, b):
            if len(self.shape(t)) != 2:
                raise ModelError(f"{n.where()}: input {t!r} has shape {self.shape(t)}; Gemm "
                                 f"takes 2-D matrices")
        if n.attrs.get("transA", 0):
            a = self._transposed(n, a)
        if n.attrs.get("transB", 0):
            b = self._transposed(n, b)
        c = n.inputs[2] if len(n.inputs) > 2 and n.inputs[2] else None
        self._matmul(n, a, b, c, float(n.attrs.get("alpha", 1.0)),
                     float(n.attrs.get("beta", 1.0)))

    def op_MatMul(self, n: Node) -> None:
        self._matmul(n, n.inputs[0], n.inputs[1], None, 1.0, 1.0)

    def _mk(self, n: Node, a_shape, b_shape) -> tuple[int, int, int]:
        if len(b_shape) == 1:
            b_shape = (b_shape[0], 1)
        if len(b_shape) > 2 and any(d != 1 for d in b_shape[:-2]):
            raise ModelError(f"{n.where()}: a batched right operand {list(b_shape)} is not "
                             f"supported (npukit multiplies by one [K, N] matrix)")
        k, nn = b_shape[-2], b_shape[-1]
        m = int(np.prod(a_shape[:-1])) if len(a_shape) > 1 else 1
        if a_shape[-1] != k:
            raise ModelError(f"{n.where()}: shapes {list(a_shape)} and {list(b_shape)} do not "
                             f"multiply")
        return m, k, nn

    def _c_kind(self, n: Node, c: str, M: int, N: int) -> str:
        s = self.shape(c)
        size = int(np.prod(s))
        if size == 1:
            return "scalar"
        s2 = (1,) * (2 - len(s)) + tuple(s)
        if len(s2) > 2:
            raise ModelError(f"{n.where()}: C of shape {list(s)} does not broadcast to [M, N]")
        if s2 == (1, N):
            return "column"
        if s2 == (M, 1):
            return "row"
        if s2 == (M, N):
            return "element"
        raise ModelError(f"{n.where()}: C of shape {list(s)} does not broadcast to [{M}, {N}]")

    def _matmul(self, n: Node, a: str, b: str, c: str | None, alpha: float, beta: float) -> None:
        for t in (a, b) + ((c,) if c else ()):
            if self.dtype(t) != np.float32:
                raise ModelError(f"{n.where()}: {n.op} of {self.dtype(t)} tensors outside a "
                                 f"DequantizeLinear/QuantizeLinear pair is not supported")
        M, K_, N = self._mk(n, self.shape(a), self.shape(b))
        nodes, ops, out = [n], n.op, n.outputs[0]
        act = self.fusable_act(out, False)
        code, ap = common.ACT_NONE, (0, 0)
        if act is not None:
            code, ap = self.act_params(act)
            nodes.append(act)
            ops, out = f"{n.op}+{act.op}", act.outputs[0]
        ckind = self._c_kind(n, c, M, N) if c else None
        name = self.layer(n.op)
        G.matmul(self.m, name, a_dt="float32", b_dt="float32", out_dt="float32", M=M, K_=K_, N=N,
                 c=ckind, Alpha=_f(alpha), Beta=_f(beta), Act=code, ActParams=ap)
        ins = [self.tensor(a), self.tensor(b)] + ([self.tensor(c)] if c else [])
        detail = f"[{M}, {K_}] x [{K_}, {N}]" + (f" + C ({ckind})" if c else "") + \
            (f", alpha {alpha:g}" if alpha != 1 else "") + (f", beta {beta:g}" if c and beta != 1
                                                             else "")
        self.add(name, ops, nodes, detail, ins, [self.output(out)])

    def op_QMatMul(self, n: Node) -> None:
        a = n.inputs[0]
        sa, za = n.attrs["a"]
        sy, zy = n.attrs["y"]
        alpha = np.float32(n.attrs.get("alpha", 1.0))
        if "w" in n.attrs:
            wq: QConst = n.attrs["w"]
            bvals = wq.values
            if bvals.ndim != 2:
                raise ModelError(f"{n.where()}: weights of shape {list(bvals.shape)}; npukit "
                                 f"multiplies by one [K, N] matrix")
            zps = np.unique(wq.zero_point)
            if zps.size != 1:
                raise ModelError(f"{n.where()}: per-column weight zero points differ "
                                 f"({zps.tolist()})")
            zb = int(zps[0])
            sb = np.asarray(wq.scale, np.float32).reshape(-1)
            b_name, b_shape = self.const(bvals, f"{n.name}_weights"), bvals.shape
            b_dt = bvals.dtype
        else:
            bt = n.inputs[1]
            sb_, zb = n.attrs["b"]
            sb = np.asarray([sb_], np.float32)
            b_name, b_shape, b_dt = self.tensor(bt), self.shape(bt), self.dtype(bt)
        M, K_, N = self._mk(n, self.shape(a), b_shape)
        scale = ((alpha * np.float32(sa)) * sb) / np.float32(sy) if alpha != 1 else \
            (np.float32(sa) * sb) / np.float32(sy)
        per_col = scale.size > 1
        if per_col and scale.size != N:
            raise ModelError(f"{n.where()}: {scale.size} weight scales for {N} columns")
        info = np.iinfo(self.dtype(n.outputs[0]))
        lo, hi = n.attrs.get("lo", int(info.min)), n.attrs.get("hi", int(info.max))
        bias = n.attrs.get("bias")
        ckind = None
        ins = [self.tensor(a), b_name]
        if bias is not None:
            bias = np.asarray(bias, np.int32)
            ckind = "scalar" if bias.size == 1 else ("column" if bias.size == N else None)
            if ckind is None:
                raise ModelError(f"{n.where()}: a bias of shape {list(bias.shape)} for {N} "
                                 f"columns")
            ins.append(self.const(bias.reshape(-1), f"{n.name}_bias"))
        ins.append(self.const(scale.astype(np.float32).reshape(-1), f"{n.name}_scale"))
        name = self.layer("QMatMul")
        G.matmul(self.m, name, a_dt=self.dtype(a), b_dt=b_dt, out_dt=self.dtype(n.outputs[0]),
                 M=M, K_=K_, N=N, c=ckind, Za=za, Zb=zb, scale_per_column=per_col, Zout=zy,
                 Lo=lo, Hi=hi)
        self.add(name, "QLinearMatMul", [n], f"[{M}, {K_}] x [{K_}, {N}]", ins,
                 [self.output(n.outputs[0])])

    # -- softmax, LRN ------------------------------------------------------------------------

    def op_Softmax(self, n: Node) -> None:
        self._softmax(n, quant=False)

    def op_QSoftmax(self, n: Node) -> None:
        self._softmax(n, quant=True)

    def _softmax(self, n: Node, quant: bool) -> None:
        x = n.inputs[0]
        if self.dtype(x) != np.float32 and not quant:
            raise ModelError(f"{n.where()}: Softmax of {self.dtype(x)} data outside a "
                             f"DequantizeLinear/QuantizeLinear pair is not supported")
        s = self.shape(x)
        axis = int(n.attrs.get("axis", -1 if self.net.opset >= 13 else 1))
        if not -len(s) <= axis < len(s):
            raise ModelError(f"{n.where()}: axis={axis} for a rank-{len(s)} input")
        axis %= len(s)
        outer = int(np.prod(s[:axis]))
        if self.net.opset >= 13:
            d, inner = s[axis], int(np.prod(s[axis + 1:]))
        else:
            d, inner = int(np.prod(s[axis:])), 1
        name = self.layer("Softmax")
        ins = [self.tensor(x)]
        if quant:
            (xs, _), (ys, yz) = n.attrs["x"], n.attrs["y"]
            ins.append(self.const(softmax_kernels.qsoftmax_table(xs, d), f"{n.name}_exp"))
            G.softmax(self.m, name, Outer=outer, D=d, Inner=inner, dt=self.dtype(x),
                      Ys=_f(np.floor(np.float32(1) / np.float32(ys))), Zp=yz)
        else:
            G.softmax(self.m, name, Outer=outer, D=d, Inner=inner)
        self.add(name, "QLinearSoftmax" if quant else "Softmax", [n],
                 f"{outer} x softmax over {d}" + (f" (stride {inner})" if inner > 1 else ""),
                 ins, [self.output(n.outputs[0])])

    def op_LRN(self, n: Node) -> None:
        x = n.inputs[0]
        s = self.shape(x)
        if self.dtype(x) != np.float32 or len(s) < 3 or s[0] != 1:
            raise ModelError(f"{n.where()}: LRN takes float32 [1, C, ...] data, got "
                             f"{self.dtype(x)} {list(s)}")
        if "size" not in n.attrs:
            raise ModelError(f"{n.where()}: the attribute size is required")
        size = int(n.attrs["size"])
        if size < 1:
            raise ModelError(f"{n.where()}: size={size}; ONNX's LRN sums over size >= 1 "
                             f"channels")
        alpha = np.float32(n.attrs.get("alpha", 1e-4))
        C, cols = s[1], int(np.prod(s[2:]))
        name = self.layer("LRN")
        G.lrn(self.m, name, Planes=1, C=C, Cols=cols, Lo=(size - 1) // 2, Hi=math.ceil(
            (size - 1) / 2), AlphaOverSize=_f(alpha / np.float32(size)),
            Beta=_f(n.attrs.get("beta", 0.75)), Bias=_f(n.attrs.get("bias", 1.0)))
        self.add(name, "LRN", [n], f"size {size} over {C} channels of {cols}", [self.tensor(x)],
                 [self.output(n.outputs[0])])

    def op_Cast(self, n: Node) -> None:
        raise ModelError(f"{n.where()}: to={n.attrs.get('to')} casts {self.dtype(n.inputs[0])} "
                         f"to {self.dtype(n.outputs[0])}; npukit keeps each tensor's type (a "
                         f"Cast to the same type is dropped)")

    def op_BatchNormalization(self, n: Node) -> None:
        if n.attrs.get("spatial", 1) != 1:
            raise ModelError(f"{n.where()}: spatial={n.attrs['spatial']} (statistics per "
                             f"element) is not supported")
        if n.attrs.get("training_mode", 0) or len([o for o in n.outputs if o]) > 1:
            raise ModelError(f"{n.where()}: training mode (running statistics outputs) is not "
                             f"supported")
        x = n.inputs[0]
        s = self.shape(x)
        if any(t not in self.net.consts for t in n.inputs[1:5]):
            raise ModelError(f"{n.where()}: scale, B, mean and var must be constants")
        scale, beta, mean, var = (self.net.consts[t].astype(np.float64) for t in n.inputs[1:5])
        a = scale / np.sqrt(var + n.attrs.get("epsilon", 1e-5))
        shape = (s[1],) + (1,) * (len(s) - 2)
        mul = f"{n.name}__bn_mul"
        self.net.info[mul] = self.net.info[n.outputs[0]]
        ka, kb = f"{n.name}__bn_a", f"{n.name}__bn_b"
        self.net.consts[ka] = a.astype(np.float32).reshape(shape)
        self.net.consts[kb] = (beta - mean * a).astype(np.float32).reshape(shape)
        self._binary_layer(Node("Mul", n.name, [x, ka], [mul], {}), x, ka, mul, [],
                           elementwise.BIN_MUL, "BatchNormalization (scale)")
        self._binary_layer(Node("Add", n.name, [mul, kb], n.outputs, {}), mul, kb,
                           n.outputs[0], [n], elementwise.BIN_ADD, "BatchNormalization (shift)")

    # -- data movement -----------------------------------------------------------------------

    def op_Concat(self, n: Node) -> None:
        ins = [t for t in n.inputs if t]
        out = n.outputs[0]
        s = self.info(out).shape
        axis = int(n.attrs.get("axis", 0 if self.net.opset < 4 else None))
        if not -len(s) <= axis < len(s):
            raise ModelError(f"{n.where()}: axis={axis} for rank {len(s)}")
        axis %= len(s)
        dts = {self.dtype(t) for t in ins}
        if len(dts) != 1:
            raise ModelError(f"{n.where()}: inputs of types {sorted(map(str, dts))}")
        outer, inner = int(np.prod(s[:axis])), int(np.prod(s[axis + 1:]))
        ds = tuple(self.shape(t)[axis] for t in ins)
        keep = [(t, d) for t, d in zip(ins, ds) if d > 0]
        name = self.layer("Concat")
        G.concat(self.m, name, dt=dts.pop(), Outer=outer, Ds=tuple(d for _, d in keep),
                 Inner=inner)
        self.add(name, "Concat", [n], f"{len(keep)} inputs along axis {axis} ({list(ds)})",
                 [self.tensor(t) for t, _ in keep], [self.output(out)])

    def op_Transpose(self, n: Node) -> None:
        x, out = n.inputs[0], n.outputs[0]
        s = self.shape(x)
        perm = list(n.attrs.get("perm", list(range(len(s)))[::-1]))
        if sorted(perm) != list(range(len(s))):
            raise ModelError(f"{n.where()}: perm={perm} is not a permutation of {len(s)} axes")
        steps = transpose_steps(s, perm)
        dt = self.dtype(x)
        cur = self.tensor(x)
        if not steps:
            return self._view(n)
        for k, (P, A, B, I) in enumerate(steps):  # noqa: E741
            last = k == len(steps) - 1
            name = self.layer("Transpose")
            G.transpose(self.m, name, dt=dt, Planes=P, A=A, B=B, I=I)
            dst = self.output(out) if last else self.local(f"{out}_step{k}", dt,
                                                           int(np.prod(s)))
            self.add(name, "Transpose", [n] if last else [],
                     f"perm {perm}: [{P}, {A}, {B}, {I}] -> [{P}, {B}, {A}, {I}]", [cur], [dst])
            cur = dst

    def op_Pad(self, n: Node) -> None:
        x, out = n.inputs[0], n.outputs[0]
        s = self.shape(x)
        rank = len(s)
        if "pads" in n.attrs:  # Pad-2
            pads = list(n.attrs["pads"])
            value = float(n.attrs.get("value", 0.0))
            axes = list(range(rank))
        else:
            if n.inputs[1] not in self.net.consts:
                raise ModelError(f"{n.where()}: pads {n.inputs[1]!r} must be a constant")
            pads = [int(v) for v in self.net.consts[n.inputs[1]].reshape(-1)]
            value = float(self.net.consts[n.inputs[2]].reshape(-1)[0]) \
                if len(n.inputs) > 2 and n.inputs[2] else 0.0
            if len(n.inputs) > 3 and n.inputs[3]:
                axes = [int(a) % rank for a in self.net.consts[n.inputs[3]].reshape(-1)]
            else:
                axes = list(range(rank))
        if len(pads) != 2 * len(axes):
            raise ModelError(f"{n.where()}: {len(pads)} pads for {len(axes)} axes")
        mode = n.attrs.get("mode", "constant")
        modes = {"constant": movement.PAD_CONSTANT, "reflect": movement.PAD_REFLECT,
                 "edge": movement.PAD_EDGE, "wrap": movement.PAD_WRAP}
        if mode not in modes:
            raise ModelError(f"{n.where()}: mode={mode!r}; npukit pads with {list(modes)}")
        dt = self.dtype(x)
        if is_float(dt):
            fill = _f(value)
        else:
            fill = int(n.attrs.get("qvalue", round(value)))
            lo_, hi_ = int_range(dt)
            if not lo_ <= fill <= hi_ or float(fill) != value and "qvalue" not in n.attrs:
                raise ModelError(f"{n.where()}: constant value {value} for {dt} data")
        todo = [(ax, pads[i], pads[i + len(axes)]) for i, ax in enumerate(axes)
                if pads[i] or pads[i + len(axes)]]
        cur, shape = self.tensor(x), list(s)
        if not todo:
            return self._view(n)
        for k, (ax, b, e) in enumerate(todo):
            if mode == "reflect" and (b >= shape[ax] or e >= shape[ax]):
                raise ModelError(f"{n.where()}: reflect pads {b}, {e} on axis {ax} of size "
                                 f"{shape[ax]} (ONNX: each must be smaller than the size)")
            if mode in ("reflect", "edge", "wrap") and (b < 0 or e < 0):
                raise ModelError(f"{n.where()}: negative pads with mode={mode!r}")
            outer, inner = int(np.prod(shape[:ax])), int(np.prod(shape[ax + 1:]))
            d = shape[ax]
            shape[ax] = d + b + e
            last = k == len(todo) - 1
            name = self.layer("Pad")
            G.pad_axis(self.m, name, dt=dt, Outer=outer, D=d, Inner=inner, PadBegin=b,
                       PadEnd=e, Mode=modes[mode], Value=fill)
            dst = self.output(out) if last else self.local(f"{out}_axis{ax}", dt,
                                                           int(np.prod(shape)))
            self.add(name, "Pad", [n] if last else [], f"axis {ax}: {b} before, {e} after, "
                     f"{mode}" + (f" {value:g}" if mode == "constant" else ""), [cur], [dst])
            cur = dst

    # -- the graph ---------------------------------------------------------------------------

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


def lut_function(n: Node):
    """The float64 function of a QLut node."""
    fn = n.attrs["fn"]
    if fn == "Sigmoid":
        return lambda x: 1 / (1 + np.exp(-x))
    if fn == "Tanh":
        return np.tanh
    if fn == "LeakyRelu":
        alpha = n.attrs.get("alpha", 0.01)
        return lambda x: np.where(x >= 0, x, alpha * x)
    if fn == "Relu":
        return lambda x: np.maximum(x, 0)
    if fn == "Clip":
        lo, hi = n.attrs.get("bounds") or (None, None)
        return lambda x: np.clip(x, -np.inf if lo is None else lo, np.inf if hi is None else hi)
    if fn == "Identity":
        return lambda x: x
    raise ModelError(f"{n.where()}: no table for {fn}")


def transpose_steps(shape, perm) -> list[tuple[int, int, int, int]]:
    """A permutation as swaps of two adjacent blocks of axes: each step is (P, A, B, I), the
    data viewed as [P, A, B, I] becoming [P, B, A, I]. Axes of size 1 are dropped and axes
    that stay neighbours are merged first."""
    keep = [a for a in perm if shape[a] != 1]
    order = sorted(keep)
    # Merge axes consecutive in both the source and the target order.
    groups: list[list[int]] = []
    for a in keep:
        if groups and order.index(a) == order.index(groups[-1][-1]) + 1:
            groups[-1].append(a)
        else:
            groups.append([a])
    size = {tuple(g): int(np.prod([shape[a] for a in g])) for g in groups}
    target = [tuple(g) for g in groups]
    cur = sorted(target)
    steps = []
    for i in range(len(target)):
        if cur[i] == target[i]:
            continue
        j = cur.index(target[i])
        P = int(np.prod([size[g] for g in cur[:i]]))
        A = int(np.prod([size[g] for g in cur[i:j]]))
        B = size[cur[j]]
        I = int(np.prod([size[g] for g in cur[j + 1:]]))  # noqa: E741
        steps.append((P, A, B, I))
        cur = cur[:i] + [cur[j]] + cur[i:j] + cur[j + 1:]
    return steps
