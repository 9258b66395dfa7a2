"""The recording builder: the logical Slice of the Torq EasyKernel guide, which runs a
kernel's body once at build time and records its loops, loads, instructions and stores as IR
statements."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from .. import ir
from ..dtypes import dtype as _dtype
from ..dtypes import int_range, is_float
from ..errors import (
    CapacityError,
    DTypeError,
    KernelError,
    OutOfBoundsError,
    ShapeError,
    TargetError,
)
from ..layout import Layout, as_int
from ..machine import Target
from ..machine import target as _target
from ..machine import targets as _targets
from .units import _Act, _Alu, _AluNode, _label, _Load
from .values import Data, LData, MultiIndex, _Suggests


class _LoopNode:
    def __init__(self, var: ir.Var, label: str):
        self.var, self.label, self.body = var, label, []


# What the Torq EasyKernel guide's logical Slice is made of: a target without them cannot
# run an EasyKernel kernel.
SLICE_UNITS = ("alu", "act")
SLICE_MEMORIES = ("IRAM", "WRAM", "BRAM", "PRAM", "ACT")


def _slice_parts_missing(tgt: Target) -> list[str]:
    return [f"unit {u!r}" for u in SLICE_UNITS if u not in tgt.units] + \
        [f"memory {m}" for m in SLICE_MEMORIES if m not in tgt.memories]


def _check_slice_target(tgt: Target) -> None:
    """``TargetError`` when ``tgt`` lacks a unit or memory of the logical Slice."""
    missing = _slice_parts_missing(tgt)
    if missing:
        have = [n for n in _targets() if not _slice_parts_missing(_target(n))]
        raise TargetError(f"target {tgt.name!r} has no {', '.join(missing)}: EasyKernel kernels "
                          f"run on a Slice with units {', '.join(SLICE_UNITS)} and memories "
                          f"{', '.join(SLICE_MEMORIES)}; built-in targets that have them: "
                          f"{', '.join(have) or 'none'}")


class Slice:
    """The logical Slice of the Torq EasyKernel guide while a kernel is being recorded."""

    def __init__(self, tgt: Target):
        _check_slice_target(tgt)
        self.target = tgt
        self.iram = _Load(self, "IRAM", "IData")
        self.wram = _Load(self, "WRAM", "WData")
        self.bram = _Load(self, "BRAM", "BData")
        self.alu = _Alu(self, "alu")
        self.act = _Act(self, "act")
        self.alu_node: _AluNode | None = None  # the ALU instruction, once recorded
        self.act_label: str | None = None  # the Act instruction's source line, once recorded
        # Torq's act.width(..., biasScalePerItem=true) makes the partials' Act vectors that wide
        self.act_items: int | None = None
        self.loaded: dict[str, str] = {}
        self.buffers: list[ir.Buffer] = []
        self.root: list = []
        self.block = self.root
        self.loops: tuple[ir.Var, ...] = ()
        self.nloops = 0
        self.nodes: list[_LoopNode] = []
        self.stored: str | None = None
        self.constant = False  # the store is of a constant (Torq's store(output, value))
        self.reads: set[str] = set()
        self.writes: set[str] = set()

    # A misspelt method (s.stor) names the right one.
    _owner = "s"
    __getattr__ = _Suggests.__getattr__

    def _public(self) -> list[str]:
        return ["iram", "wram", "bram", "alu", "act", "iterate", "store", "append", "target"]

    def buffer(self, memory: str, dt, size: int, kind: str) -> ir.Buffer:
        buf = ir.Buffer(f"{kind.lower()}", memory, _dtype(dt), size)
        cap = self.target.memories[memory].size
        if buf.nbytes > cap:
            raise CapacityError(f"{memory} holds {cap} B but `{_label()}` places {kind} of "
                                f"{size} x {buf.dtype.name} = {buf.nbytes} B there")
        self.buffers.append(buf)
        return buf

    def const(self, memory: str, values: np.ndarray, name: str, label: str,
              what: str) -> ir.Buffer:
        """A constant of the program (``role="const"``) holding ``values`` in ``memory``."""
        buf = ir.Buffer(name, memory, values.dtype, values.size, role="const",
                        data=np.ascontiguousarray(values).tobytes())
        cap = self.target.memories[memory].size
        if buf.nbytes > cap:
            raise CapacityError(f"{memory} holds {cap} B but `{label}` places {what} there: "
                                f"{buf.size} x {buf.dtype.name} = {buf.nbytes} B")
        self.buffers.append(buf)
        return buf

    def emit(self, stmt) -> None:
        self.block.append(stmt)

    def iterate(self, counts) -> Iterator:
        """``for i in s.iterate(n)``: one hardware loop of ``n`` iterations; a list of
        counts nests one loop per count and yields a multi-index; ``[]`` is no loop. Each
        count is a positive integer (``KernelError`` for 0, floats and bools)."""
        multi = isinstance(counts, (list, tuple))
        label = _label()
        vs = []
        for n in (counts if multi else [counts]):
            if as_int(n, "iterate: a loop count", KernelError) < 1:
                raise KernelError(f"iterate: loop count must be a positive int, got {n!r}")
            # Unique names: sibling loops with equal counts must stay distinct variables.
            v = ir.Var(f"i{self.nloops}", int(n))
            self.nloops += 1
            node = _LoopNode(v, label)
            self.block.append(node)
            self.nodes.append(node)
            self.block, self.loops = node.body, self.loops + (v,)
            vs.append(v)
        yield MultiIndex(vs) if multi else vs[0]
        for _ in vs:
            self.nodes.pop()
            self.loops = self.loops[:-1]
            self.block = self.nodes[-1].body if self.nodes else self.root

    def consume(self, node: _AluNode | None) -> None:
        """The Act reads the partials: loops around the ALU but not the Act accumulate."""
        if node is None:
            return
        common = 0
        while (common < min(len(node.loops), len(self.loops))
               and node.loops[common] == self.loops[common]):
            common += 1
        node.acc_loops = node.loops[common:]
        summed = [v for v in node.acc_loops if v.count > 1]
        if node.single and summed:
            raise KernelError(f"{node.single} `{node.stmt.label}`: the Act reads its partials "
                              f"outside loop {summed[0]} ({summed[0].count} iterations), so "
                              f"they would be summed; Torq's {node.single} holds one input: "
                              f"use accumulate")
        if node.acc_loops:
            # Start fresh before the outermost accumulation loop, at each consumer iteration.
            outer = node.acc_loops[0]
            block = self.root if common == 0 else self._node_of(node.loops[common - 1]).body
            at = next(k for k, x in enumerate(block)
                      if isinstance(x, _LoopNode) and x.var == outer)
            combine = dict(node.stmt.attrs)["combine"]
            block.insert(at, ir.Fill(node.stmt.dst, _identity(combine, node.stmt.dst.dtype),
                                     f"start of accumulation over {outer} for: {node.stmt.label}"))

    def _node_of(self, var: ir.Var) -> _LoopNode:
        def find(block):
            for x in block:
                if isinstance(x, _LoopNode):
                    if x.var == var:
                        return x
                    got = find(x.body)
                    if got:
                        return got
            return None
        return find(self.root)

    def store(self, view: LData, q: Data | int | float) -> None:
        """Write all lanes of ``q`` to ``view`` (a store past the tensor's end is an error);
        or, Torq's ``store(output, value)``, the constant ``q`` into the one element
        ``view`` holds, in a kernel with no ALU or Act instruction (its FillPattern)."""
        if not isinstance(q, Data):
            self._store_constant(view, q)
            return
        self._check_out("store", view, q)
        lanes = view.lanes
        if lanes is None and view.layout.valid is not None:
            lanes = ir.Lanes(view.layout.valid, ir.Affine(), view.layout.size)
        if lanes is not None and lanes.total - lanes.start.bounds()[1] < lanes.width:
            first = lanes.start.bounds()[1]
            raise OutOfBoundsError(
                f"store into {view.name!r}: the vector at elements "
                f"{first}..{first + lanes.width - 1}"
                f" passes the end of the vectorized dim ({lanes.total} elements); its junk "
                f"lanes would overwrite what follows. Pad the output to a multiple of "
                f"{lanes.width} or use s.append")
        if view.layout.size != q.size:
            raise ShapeError(f"store into {view.name!r}: view holds {view.layout.size} elements, "
                             f"the result {q.size} lanes")
        self.emit(ir.Copy(view.view(), q.view, self.target.engine("ACT", self.target.home).name,
                          None, _label()))

    def _store_constant(self, view: LData, value) -> None:
        if self.stored is not None:
            raise KernelError(f"kernel structure: one store or append per kernel (already: "
                              f"{self.stored})")
        if self.alu_node is not None or self.act_label is not None or self.loaded:
            raise KernelError("store(view, value): a kernel that stores a constant loads "
                              "nothing and has no ALU or Act instruction (Torq's rule)")
        if not isinstance(view, LData) or view.layout.size != 1:
            raise ShapeError(f"store(view, value): the view must hold one element (index "
                             f"every dim); got {getattr(view, 'shape', view)!r}")
        if is_float(view.dtype):
            if isinstance(value, (bool, np.bool_)) or \
                    not isinstance(value, (int, float, np.integer, np.floating)):
                raise KernelError(f"store into {view.name!r}: value {value!r} is not a number")
            value = float(value)
        else:
            value = as_int(value, "store: value (an integer tensor)", KernelError)
            lo, hi = int_range(view.dtype)
            if not lo <= value <= hi:
                raise KernelError(f"store into {view.name!r}: value {value} does not fit "
                                  f"{view.dtype.name} ({lo}..{hi})")
        self.stored, self.constant = _label(), True
        self.writes.add(view.buffer.name)
        self.emit(ir.Fill(view.view(), value, self.stored))

    def append(self, view: LData, q: Data) -> None:
        """Append the valid lanes of ``q`` to what earlier appends wrote into ``view``; the
        cursor starts at 0 in each iteration of the innermost loop that selects ``view``,
        and an append never writes past the view's end."""
        self._check_out("append", view, q)
        keys = set(view.offset.vars)
        inner = max((k for k, v in enumerate(self.loops) if v in keys), default=-1)
        # A loop of one iteration has no other iteration to overwrite (a size-1 batch dim
        # of stride 0, as insertDim makes, indexes nothing).
        stray = [v for v in self.loops[: inner + 1] if v not in keys and v.count > 1]
        if stray:
            self._append_continued(view, q, stray, keys)
            return
        cursor = "cursor"
        block = self.root if inner < 0 else self._node_of(self.loops[inner]).body
        block.insert(0, ir.ResetCursor(cursor, f"start of appends into {view.name}"))
        self.emit(ir.Append(view.view(), q.view, self.target.engine("ACT", self.target.home).name,
                            cursor, q.lanes, _label()))

    def _append_continued(self, view: LData, q: Data, stray: list, keys: set) -> None:
        """Torq's append goes on where the last append into the same subtensor stopped,
        across loops that do not select it (InterleavedInsertPattern: the row's vectors
        outside the positions that pick the row). When ``q`` is lanes of a vectorized row
        whose vector index is what those loops move, every earlier vector was whole, so
        the position is the first lane's index in the row: the append is a store of the
        valid lanes there (a 1-D subtensor only)."""
        lanes = q.lanes
        if view.layout.rank != 1 or lanes is None or lanes.total > view.layout.size or \
                not set(stray) <= set(lanes.start.vars) or set(lanes.start.vars) & keys:
            raise KernelError(f"append into {view.name!r}: loop {stray[0]} encloses the loop "
                              f"that selects the subtensor but does not index it; npukit "
                              f"continues such appends only into a 1-D subtensor, with vectors "
                              f"of a row (at most as long) that this loop moves along")
        (st,) = view.layout.strides
        whole = view.view()
        at = replace(whole, layout=Layout((q.size,), view.dtype, (st,), view.layout.offset),
                     offset=view.offset + lanes.start * st)
        self.emit(ir.Copy(at, q.view, self.target.engine("ACT", self.target.home).name,
                          lanes, _label()))

    def _check_out(self, what: str, view: LData, q: Data) -> None:
        if self.stored is not None:
            raise KernelError(f"kernel structure: one store or append per kernel (already: "
                              f"{self.stored})")
        if not isinstance(view, LData) or not isinstance(q, Data) or q.kind != "QData":
            raise KernelError(f"{what}(view, q): q must be an Act result (QData)")
        if is_float(q.dtype) and not is_float(view.dtype):
            raise DTypeError(f"{what} into {view.name!r}: float results into a "
                             f"{view.dtype.name} tensor")
        if q.design is not None:  # a LUT result of a Design: the tensor must hold its range
            q.design.check_store(view.dtype, view.name, what)
        self.stored = _label()
        self.writes.add(view.buffer.name)

    def freeze(self) -> tuple:
        if self.constant and (self.alu_node is not None or self.act_label is not None):
            raise KernelError("kernel structure: a kernel that stores a constant has no ALU or "
                              "Act instruction (Torq's rule)")
        if not self.constant and (self.alu_node is None or self.act_label is None or
                                  self.stored is None):
            missing = [n for n, x in (("ALU", self.alu_node), ("Act", self.act_label),
                                      ("store/append", self.stored)) if x is None]
            raise KernelError(f"kernel structure: a kernel needs one ALU instruction, one Act "
                              f"instruction and one store or append; missing {', '.join(missing)}")

        def conv(block):
            out = []
            for x in block:
                if isinstance(x, _LoopNode):
                    out.append(ir.Loop(x.var, conv(x.body), x.label))
                elif isinstance(x, _AluNode):
                    out.append(replace(x.stmt, acc=bool(x.acc_loops)))
                else:
                    out.append(x)
            return tuple(out)
        return conv(self.root)


def _identity(combine: str, dt: np.dtype):
    """The value a fresh accumulation starts from: folding it in changes nothing."""
    if combine in ("add", "or", "xor"):
        return 0
    if combine in ("mul", "and"):
        return 1 if combine == "mul" else -1
    if is_float(dt):
        return -np.inf if combine == "max" else np.inf
    lo, hi = int_range(dt)
    return lo if combine == "max" else hi
