"""A ``TensorOperation`` lowered to the IR, and run on the C back end.

The program has one flat parameter per tensor the operation touches (``in0``, ``in1``,
``out``, as long as the largest offset the strides reach). Its body is the loop nest: one
``Loop`` per seq dimension, one ``parallel`` ``Loop`` per run of adjacent shared
dimensions (their indices recovered by division and remainder), and at the innermost
point ``Call``s of the generated primitives on the block the prim dimensions span.

The first and last touches need to know whether an output block is visited for the first
or the last time: that is when every enclosing ``k`` loop is at its first (last)
iteration. The IR has no conditionals, so each ``k`` loop is peeled: its first iteration
(with the first touch), the middle ones, and its last iteration (with the last touch) are
separate statements.
"""

from __future__ import annotations

import math
import weakref

import numpy as np

from .. import ir
from ..c.runtime import run_c
from ..dtypes import dtype as _dtype
from ..layout import Layout
from .operation import Dim, TensorOperation, as_flat, register_pass
from .primitives import BINARY, REDUCE, Primitive


def primitives(op: TensorOperation) -> dict[str, Primitive]:
    """The primitives the operation calls, by role: ``first``, ``main``, ``last``."""
    out = {}
    if op.prim_first != "none":
        out["first"] = Primitive(op.prim_first)  # "bias": the identity with a row stride
    r = op.roles
    if op.prim_main in ("gemm", "brgemm"):
        out["main"] = Primitive(op.prim_main, trans_a=r.trans_a, trans_b=r.trans_b,
                                dtype=op.dtype)
    elif op.prim_main in REDUCE:
        out["main"] = Primitive(op.prim_main, reduce_cols=r.reduce_cols)
    elif op.prim_main != "none":
        out["main"] = Primitive(op.prim_main, trans_b=r.trans)
    if op.prim_last != "none":
        out["last"] = Primitive(op.prim_last)
    return out


def _main_scalars(op: TensorOperation) -> tuple[str, dict[str, int], tuple[str, str]]:
    """The main primitive's scalar arguments, and which tensors it gets as a and b."""
    d, r = op.dims, op.roles
    if op.prim_main in ("gemm", "brgemm"):
        m, n, k = d[r["m"]], d[r["n"]], d[r["k"]]
        if not r.swap:
            a, b, (rm, rn) = "in0", "in1", (m, n)
            lda = m.in0 if r.trans_a else k.in0
            ldb = k.in1 if r.trans_b else n.in1
            ldc = n.out
        else:  # C^T = in1^T in0^T
            a, b, (rm, rn) = "in1", "in0", (n, m)
            lda = n.in1 if r.trans_a else k.in1
            ldb = k.in0 if r.trans_b else m.in0
            ldc = m.out
        s = dict(m=rm.size, n=rn.size, k=k.size, lda=lda, ldb=ldb, ldc=ldc)
        if op.prim_main == "brgemm":
            bd = d[r["br"]]
            s.update(br=bd.size, br_stride_a=bd.stride(a), br_stride_b=bd.stride(b))
        return op.prim_main, s, (a, b)
    mi, ni = d[r["M"]], d[r["N"]]
    s = dict(m=mi.size, n=ni.size, lda=ni.in0)
    if op.prim_main in REDUCE:  # b: the out vector along the kept dimension
        return op.prim_main, s, ("in0", "in1")
    if op.prim_main in BINARY:
        s.update(ldb=ni.in1, ldc=ni.out)
    else:
        s.update(ldb=mi.out if r.trans else ni.out)
    return op.prim_main, s, ("in0", "in1")


def _touch_scalars(op: TensorOperation) -> dict[str, int]:
    """The touches' block: rows along out's unit stride, columns the other prim dim (and
    the bias's strides along them: ``inca``, ``bias_ld``)."""
    rows = op.dims[op.roles.rows]
    if op.roles.cols < 0:  # a reduction's out: one vector
        return dict(m=rows.size, n=1, lda=rows.size, ldb=rows.size, inca=rows.bias, bias_ld=0)
    cols = op.dims[op.roles.cols]
    return dict(m=rows.size, n=cols.size, lda=cols.out, ldb=cols.out, inca=rows.bias,
                bias_ld=cols.bias)


class _Lowering:
    def __init__(self, op: TensorOperation, tgt):
        self.op, self.tgt = op, tgt
        self.prims = primitives(op)
        self.externs = {role: p.extern(tgt) for role, p in self.prims.items()}
        dt = _dtype(op.dtype)
        self.params: dict[str, tuple[ir.Buffer, Layout]] = {}
        for name in op.inputs:
            self.params[name] = self._param(name, dt, "in")
        if op.prim_first == "bias":
            self.params["bias"] = self._param("bias", np.dtype("float32"), "in")
        # inout: touches and gemm read out, and elements between the blocks keep their values.
        self.params["out"] = self._param("out", np.dtype("float32"), "inout")
        self.main = _main_scalars(op) if "main" in self.prims else None
        self.touch = _touch_scalars(op)
        # Loops: the non-prim dimensions in order (size 1: no loop), adjacent shared ones
        # as one group.
        self.groups: list[list[int]] = []
        for k, d in enumerate(op.dims):
            if d.exec == "prim" or d.size == 1:
                continue
            if d.exec == "shared" and self.groups and \
                    op.dims[self.groups[-1][-1]].exec == "shared":
                self.groups[-1].append(k)
            else:
                self.groups.append([k])

    def _param(self, name: str, dt: np.dtype, role: str) -> tuple[ir.Buffer, Layout]:
        size = self.op.extent(name)
        return ir.Buffer(name, self.tgt.home, dt, size, role), Layout((size,), dt)

    def _ptr(self, tensor: str, idx: dict[int, ir.Affine]) -> ir.Ptr:
        buf, lay = self.params[tensor]
        off = ir.Affine()
        for k, e in idx.items():
            off = off + e * self.op.dims[k].stride(tensor)
        return ir.Ptr(ir.View(buf, Layout((1,), lay.dtype), off))

    def _calls(self, idx: dict[int, ir.Affine], first: bool, last: bool) -> list[ir.Stmt]:
        out = []
        where = ", ".join(f"{self.op.dims[k].type}{k}={e}" for k, e in idx.items())
        block = f"out block {self.touch['m']} x {self.touch['n']}" + (f" at {where}" if where
                                                                      else "")
        touch_args = (self._ptr("out", idx), self._ptr("out", idx)) + \
            tuple(ir.Val(ir.affine(self.touch[s])) for s in ("m", "n", "lda", "ldb"))
        if first and "first" in self.prims:
            args = touch_args
            if self.op.prim_first == "bias":
                args = (self._ptr("bias", idx), self._ptr("out", idx)) + tuple(
                    ir.Val(ir.affine(self.touch[s])) for s in ("m", "n", "inca", "bias_ld",
                                                                "ldb"))
            out.append(ir.Call(self.externs["first"], args,
                               f"first touch {self.op.prim_first} on {block}"))
        if self.main is not None:
            name, s, (a, b) = self.main
            p = self.prims["main"]
            ptrs = [self._ptr(a, idx)] + ([self._ptr(b, idx)] if p.kind not in
                                          ("unary", "reduce") else []) + [self._ptr("out", idx)]
            vals = [ir.Val(ir.affine(s[x])) for x in p.scalars]
            shape = " x ".join(str(s[x]) for x in ("m", "n", "k", "br") if x in s)
            out.append(ir.Call(self.externs["main"], tuple(ptrs + vals),
                               f"main {name} {shape}" + (f" at {where}" if where else "")))
        if last and "last" in self.prims:
            out.append(ir.Call(self.externs["last"], touch_args,
                               f"last touch {self.op.prim_last} on {block}"))
        return out

    def nest(self, level: int, idx: dict, first: bool, last: bool) -> list[ir.Stmt]:
        """Statements for the loop groups from ``level`` inward; ``first`` / ``last``: every
        enclosing k loop is at its first / last iteration."""
        if level == len(self.groups):
            return self._calls(idx, first, last)
        group = self.groups[level]
        dims = [self.op.dims[k] for k in group]
        if dims[0].exec == "shared":
            count = math.prod(d.size for d in dims)
            var = ir.Var("_".join(f"{d.type}{k}" for k, d in zip(group, dims)), count)
            inner, sub = count, dict(idx)
            for k, d in zip(group, dims):
                inner //= d.size
                sub[k] = (var // inner) % d.size if len(group) > 1 else ir.affine(var)
            label = f"shared dimension{'s' if len(group) > 1 else ''} " + \
                ", ".join(f"{k} ({d.type}, {d.size})" for k, d in zip(group, dims))
            return [ir.Loop(var, tuple(self.nest(level + 1, sub, first, last)), label,
                            parallel=True)]
        k, d = group[0], dims[0]
        name = f"{d.type}{k}"
        peel_first = d.type == "k" and first and "first" in self.prims
        peel_last = d.type == "k" and last and "last" in self.prims
        out: list[ir.Stmt] = []
        if peel_first:
            out += self.nest(level + 1, {**idx, k: ir.affine(0)}, first, False)
        lo, hi = int(peel_first), d.size - int(peel_last)
        if hi > lo:
            var = ir.Var(name, hi - lo)
            body = self.nest(level + 1, {**idx, k: var + lo},
                             first and not peel_first and d.type != "k",
                             last and not peel_last and d.type != "k")
            label = f"seq dimension {k} ({d.type}, {d.size})" + \
                (f", iterations {lo} to {hi - 1}" if (lo, hi) != (0, d.size) else "")
            out.append(ir.Loop(var, tuple(body), label))
        if peel_last:
            out += self.nest(level + 1, {**idx, k: ir.affine(d.size - 1)}, False, last)
        return out

    def program(self) -> ir.Program:
        body = self.nest(0, {}, True, True)
        name = f"tpp_{self.op.prim_first}_{self.op.prim_main}_{self.op.prim_last}"
        return ir.Program(name, self.tgt, tuple(self.params.values()), (), tuple(body),
                          source=str(self.op))


def lower(op: TensorOperation, tgt) -> ir.Program:
    """``op`` as an ``ir.Program`` for target ``tgt``."""
    return _Lowering(op, tgt).program()


def run(op: TensorOperation, in0, in1, out, bias=None) -> np.ndarray:
    """Run ``op`` on the C back end (see ``TensorOperation.__call__``). The flat views of
    the arrays last passed are kept (with weak references to the arrays): called again on
    the same arrays, the checks and views are not redone and the C back end finds their
    pointers in its own cache, which keeps a call of a small operation cheap."""
    prog = op.program()
    given = {"in0": in0, "in1": in1, "out": out, "bias": bias}
    names = [buf.name for buf, _ in prog.params]
    key = tuple((a.dtype, a.shape, a.strides, a.flags.writeable)
                if isinstance(a := given[n], np.ndarray) else None for n in names)
    last = op._last_call
    if last is None or last[1] != key or any(r() is not given[n] for r, n in zip(last[0], names)):
        arrays = {buf.name: as_flat(given[buf.name], buf.name, buf.dtype, lay.shape[0],
                                    write=buf.role != "in") for buf, lay in prog.params}
        refs = tuple(weakref.ref(given[n]) for n in names)
        op._last_call = last = (refs, key, arrays)
    run_c(prog, last[2])
    return out


__all__ = ["Dim", "lower", "primitives", "run"]


register_pass("lower", lower)
register_pass("run", run)
