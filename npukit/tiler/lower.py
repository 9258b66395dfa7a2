"""Lowering a solved user kernel to the IR (iteration order 2):

    <LOC_PROLOG>            read first tiles of multi-buffered arguments
    for Op:                 (3D output / 4D kernels)
      <LOC_INNER_LOOP_PROLOG>
      for Tile:
        read next tiles (into the other slot); read single-buffered tiles
        <LOC_IN_PLANE_PROLOG>
        for Ip:             (3D input / 4D kernels)
          read next / read;  <LOC_INNER_LOOP>;  write tiles of per-plane outputs
        <LOC_IN_PLANE_EPILOG>
        write tiles
      <LOC_INNER_LOOP_EPILOG>
    <LOC_EPILOG>

Each argument moved by DMA is read or written where its data changes: in the body of the
innermost loop it varies with. Its accesses are numbered ``k`` in loop order over the loops
from the outermost to that one; access ``k`` sits in slot ``k mod slots`` and the read of
access ``k+1`` is issued while access ``k`` is computed on. A read past the last access, or
the part of a last tile past the plane's end, moves nothing: its valid line count is 0.
Arguments with an L3 home pass through two slots in L2 on their way to and from L1.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from .. import ir
from ..cdecl import parse_ctype
from ..errors import TilingError
from ..layout import Layout
from .api import (
    KER_IN_PLANE,
    KER_OUT_PLANE,
    KER_TILE,
    LOC_EPILOG,
    LOC_IN_PLANE_EPILOG,
    LOC_IN_PLANE_PROLOG,
    LOC_INNER_LOOP,
    LOC_INNER_LOOP_EPILOG,
    LOC_INNER_LOOP_PROLOG,
    LOC_PROLOG,
    KerArgSel,
    KerArgT,
    KernelDimensionT,
    Obj,
)
from .solver import Tiling, arg_iterators, moves

_NAMES = {KER_OUT_PLANE: "Op", KER_TILE: "Tile", KER_IN_PLANE: "Ip"}


def c_dtype(ctype: str) -> np.dtype:
    """The numpy dtype of a C type (pointers: of what they point to)."""
    return parse_ctype(ctype).dtype


def home_shape(a: KerArgT, dims: KernelDimensionT, order: tuple) -> tuple[int, ...]:
    """The shape of the tensor a kernel argument's C argument points to: its W x H plane,
    times the planes it has (3D: one per in- or out-plane; 4D: Nop x Nip)."""
    if a.has(Obj.O_4D):
        return (dims.OutPlanes, dims.InPlanes, a.H, a.W)
    if a.has(Obj.O_3D):
        counts = {KER_IN_PLANE: dims.InPlanes, KER_OUT_PLANE: dims.OutPlanes}
        its = [i for i in arg_iterators(a, order) if i in counts]
        planes = math.prod(counts[i] for i in its) if its else \
            (dims.InPlanes if a.has(Obj.O_IN) else dims.OutPlanes)
        return (planes * max(a.NextPlaneUpdate, 1), a.H, a.W)
    return (a.H, a.W)


@dataclass
class Lowered:
    params: dict = field(default_factory=dict)  # C name -> (Buffer, spec Layout)
    buffers: list = field(default_factory=list)
    body: list = field(default_factory=list)
    bounds: dict = field(default_factory=dict)  # C name -> (lo, hi) its values must lie in


def add_bounds(out: Lowered, target: str | int, bounds: tuple[int, int] | None, what: str) -> None:
    """Values passed to ``what`` must lie in ``bounds`` (``TCArg(..., bounds=...)``): an
    immediate ``target`` is checked now, a parameter's values when the program runs."""
    if bounds is None:
        return
    lo, hi = bounds
    if isinstance(target, int):
        if not lo <= target <= hi:
            raise TilingError(f"{what} gets the immediate {target}, outside {lo}..{hi}")
        return
    old_lo, old_hi = out.bounds.get(target, bounds)
    new = (max(lo, old_lo), min(hi, old_hi))
    if new[0] > new[1]:
        raise TilingError(f"{what}: {target!r} must lie in {lo}..{hi} and in {old_lo}..{old_hi} "
                          f"(another argument it is passed to): no value does")
    out.bounds[target] = new


class KernelLowering:
    """Lowers one user kernel; ``cargs`` maps its C argument names to the program's
    parameter names (or to an int, for a group's ``Imm`` binding)."""

    def __init__(self, uk, tiling: Tiling, libs: dict, target, l3: str, out: Lowered,
                 cargs: dict | None = None, prefix: str = "", lib_bounds: dict | None = None):
        self.uk, self.t, self.libs, self.target, self.l3 = uk, tiling, libs, target, l3
        self.lib_bounds = lib_bounds or {}  # basic kernel -> bounds of each argument
        self.out, self.prefix = out, prefix
        self.cmap = cargs or {c.ArgName: c.ArgName for c in uk.cargs}
        self.counts = {KER_OUT_PLANE: uk.dims.OutPlanes, KER_TILE: tiling.n_tiles,
                       KER_IN_PLANE: uk.dims.InPlanes}
        self.vars = {it: ir.Var(_NAMES[it], self.counts[it]) for it in uk.order}
        self.l1: dict[str, ir.Buffer] = {}
        self.l2: dict[str, ir.Buffer] = {}
        self.home: dict[str, ir.Buffer] = {}
        self.carg = {c.ArgName: c for c in uk.cargs}
        self._params()
        self._buffers()

    # -- buffers -----------------------------------------------------------------------------

    def _params(self) -> None:
        for c in self.uk.cargs:
            target_name = self.cmap.get(c.ArgName)
            add_bounds(self.out, target_name, c.bounds, f"{self.uk.name}: C argument {c.ArgName!r}")
            if not isinstance(target_name, str):
                continue
            dt = c_dtype(c.ArgType)
            bound = [a for a in self.uk.kerargs if a.CArgName == c.ArgName]
            if not c.is_pointer:
                shape = ()
            elif bound:
                shape = home_shape(bound[0], self.uk.dims, self.uk.order)
            elif c.shape is not None:
                shape = tuple(c.shape)
            else:
                raise TilingError(f"{self.uk.name}: C argument {c.ArgName!r} is a pointer bound "
                                  f"to no kernel argument; give its shape: TCArg({c.ArgType!r}, "
                                  f"{c.ArgName!r}, shape=(...))")
            if target_name in self.out.params:
                self._same_tensor(target_name, c.ArgName, shape, dt)
                self._widen_role(target_name, c.ArgName)
                continue
            memory = self.l3 if bound and bound[0].has(Obj.O_L2DB) else self.target.home
            spec = Layout(shape, dt)
            buf = ir.Buffer(target_name, memory, dt, max(spec.size, 1), self._role(c.ArgName))
            self.out.params[target_name] = (buf, spec)

    def _same_tensor(self, name: str, carg: str, shape: tuple, dt: np.dtype) -> None:
        """Kernels of a group that share a tensor declare it alike: a kernel that declares a
        smaller plane would silently leave part of it out, a larger one read past it."""
        buf, spec = self.out.params[name]
        if spec.shape != shape or spec.dtype != dt:
            raise TilingError(f"{self.uk.name}: C argument {carg!r} is group argument {name!r}, "
                              f"which an earlier user kernel of the group declared as "
                              f"{spec.shape} {spec.dtype}; this one declares {shape} {dt} "
                              f"(its KerArg W, H, planes or TCArg shape)")

    def _role(self, carg: str) -> str:
        bound = [a for a in self.uk.kerargs if a.CArgName == carg]
        if not bound:
            # A basic kernel may write through a pointer it is given, unless C says const.
            c = self.carg[carg]
            return "inout" if c.is_pointer and not c.ctype.const else "in"
        a = bound[0]
        return {(True, False): "in", (False, True): "out"}.get(
            (a.has(Obj.O_IN), a.has(Obj.O_OUT)), "inout")

    def _widen_role(self, name: str, carg: str) -> None:
        """A group parameter used by several kernels is read if any reads it, and so on."""
        buf, spec = self.out.params[name]
        roles = {buf.role, self._role(carg)}
        role = roles.pop() if len(roles) == 1 else "inout"
        self.out.params[name] = (ir.Buffer(buf.name, buf.memory, buf.dtype, buf.size, role), spec)

    def _buffers(self) -> None:
        for a in self.uk.kerargs:
            p = self.t.args[a.KerArgName]
            c = self.carg.get(a.CArgName) if a.CArgName else None
            dt = c_dtype(c.ArgType) if c else self._seen_as(a)
            slot = p.size // a.ItemSize
            buf = ir.Buffer(f"{self.prefix}{a.KerArgName}", "L1", dt, slot * p.slots,
                            slots=p.slots, slot_len=slot, address=p.offset)
            self.l1[a.KerArgName] = buf
            self.out.buffers.append(buf)
            if a.has(Obj.O_L2DB) and moves(a):
                l2 = ir.Buffer(f"{self.prefix}{a.KerArgName}.L2", "L2", dt, slot * 2, slots=2,
                               slot_len=slot)
                self.l2[a.KerArgName] = l2
                self.out.buffers.append(l2)

    def _seen_as(self, a) -> np.dtype:
        """A buffer bound to no C argument holds what the basic kernels it is passed to
        point to (a float accumulator), else integers of its item size."""
        for call in self.uk.calls:
            lib = self.libs.get(call.CallName)
            for b, (ctype, _) in zip(call.BindingList, lib.args if lib else ()):
                if b.kind == "k_arg" and b.name == a.KerArgName and \
                        b.what == KerArgSel.KER_ARG_TILE:
                    dt = c_dtype(ctype)
                    if dt.itemsize == a.ItemSize:
                        return dt
        return np.dtype(f"int{8 * a.ItemSize}")

    # -- accesses ------------------------------------------------------------------------

    def _loops_of(self, a) -> tuple:
        """Loops over which an argument's accesses are numbered (outermost to innermost)."""
        its = self.t.geometry[a.KerArgName].iterators
        if not its:
            return ()
        inner = max(self.uk.order.index(i) for i in its)
        return self.uk.order[: inner + 1]

    def _access(self, a, nxt: bool):
        """(index expression per iterator, access number, accesses, valid lines) of the
        current access or of the next one."""
        loops = self._loops_of(a)
        counts = [self.counts[i] for i in loops]
        strides = [math.prod(counts[j + 1:]) for j in range(len(counts))]
        k = sum((self.vars[i] * s for i, s in zip(loops, strides)), ir.Affine())
        total = math.prod(counts)
        g = self.t.geometry[a.KerArgName]
        if not nxt:
            idx = {i: ir.affine(self.vars[i]) for i in loops}
            past = ir.Affine()
        else:
            acc = k + 1
            idx = {i: (acc // s) % c if j else acc // s
                   for j, (i, s, c) in enumerate(zip(loops, strides, counts))}
            past = (acc // total) * g.extent  # pushes the start past the plane: 0 lines
        t = idx.get(KER_TILE, ir.Affine())
        valid = ir.Lanes(g.extent, t * g.step + past, g.lines)
        return idx, k, total, valid

    def _home_view(self, a, idx) -> ir.View:
        g = self.t.geometry[a.KerArgName]
        buf, _ = self.out.params[self.cmap[a.CArgName]]
        plane = a.H * a.W * max(a.NextPlaneUpdate, 1)
        ip, op = idx.get(KER_IN_PLANE, ir.Affine()), idx.get(KER_OUT_PLANE, ir.Affine())
        if a.has(Obj.O_4D):
            pnum = op * self.uk.dims.InPlanes + ip
        elif a.has(Obj.O_3D):
            pnum = ip if KER_IN_PLANE in g.iterators else op
        else:
            pnum = ir.Affine()
        t = idx.get(KER_TILE, ir.Affine())
        if not g.tiled or g.horizontal:
            lay = Layout((g.lines, a.W), buf.dtype)
            off = pnum * plane + t * (g.step * a.W)
        else:
            lay = Layout((g.lines, a.H), buf.dtype, (1, a.W))
            off = pnum * plane + t * g.step
        return ir.View(buf, lay, off)

    def _l1_view(self, a, k, buf: ir.Buffer | None = None) -> ir.View:
        g = self.t.geometry[a.KerArgName]
        buf = buf or self.l1[a.KerArgName]
        slot = (ir.affine(k) % buf.slots) * buf.slot_len if buf.slots > 1 else ir.Affine()
        if not g.tiled or g.horizontal:
            lay = Layout((g.lines, g.line_elems), buf.dtype)
        else:
            lay = Layout((g.lines, a.H), buf.dtype, (1, g.lines))
        return ir.View(buf, lay, slot)

    def _read(self, a, nxt: bool, label: str) -> list:
        idx, k, _, valid = self._access(a, nxt)
        k1 = k + 1 if nxt else k
        return self._moves(self._home_view(a, idx), self._l1_view(a, k1), a, k1, valid, label,
                           inbound=True)

    def _write(self, a, label: str) -> list:
        idx, k, _, valid = self._access(a, False)
        return self._moves(self._home_view(a, idx), self._l1_view(a, k), a, k, valid, label,
                           inbound=False)

    def _moves(self, home: ir.View, l1: ir.View, a, k, valid, label: str, inbound: bool) -> list:
        valid = valid if self.t.geometry[a.KerArgName].tiled or self._loops_of(a) else None
        hops = [home, l1]
        if a.KerArgName in self.l2:
            hops = [home, self._l1_view(a, k, self.l2[a.KerArgName]), l1]
        if not inbound:
            hops = hops[::-1]
        return [ir.Copy(dst, src, self.target.engine(src.buffer.memory, dst.buffer.memory).name,
                        valid, f"{label} {a.KerArgName}")
                for src, dst in itertools.pairwise(hops)]

    # -- calls ---------------------------------------------------------------------------

    def _calls(self, loc) -> list:
        return [self._call(c) for c in self.uk.calls if c.CallLocation == loc]

    def _call(self, c) -> ir.Call:
        # validate.check_calls has checked the basic kernel and every binding.
        lib = self.libs[c.CallName]
        bounds = self.lib_bounds.get(c.CallName) or (None,) * len(lib.args)
        args = []
        for b, (_, name), bnd in zip(c.BindingList, lib.args, bounds):
            what = f"{self.uk.name}: {c.CallName} argument {name!r}"
            if b.kind == "imm":
                add_bounds(self.out, b.value, bnd, what)
            elif b.kind in ("c_arg", "c_arg_index"):
                add_bounds(self.out, self.cmap.get(b.name), bnd, what)
            args.append(self._bind(b))
        return ir.Call(lib, tuple(args), f"Call Kernel {c.CallLocation.name}: {c.CallName}")

    def _it(self, it) -> ir.Affine:
        return ir.affine(self.vars[it]) if it in self.vars else ir.Affine()

    def _bind(self, b):
        if b.kind == "imm":
            return ir.Val(ir.affine(b.value))
        if b.kind == "iter_index":
            return ir.Val(self._it(b.what))
        if b.kind in ("c_arg", "c_arg_index"):
            target_name = self.cmap.get(b.name)
            if isinstance(target_name, int):
                return ir.Val(ir.affine(target_name))
            buf, _ = self.out.params[target_name]
            off = self._it(b.what) * b.value if b.kind == "c_arg_index" else ir.Affine()
            view = ir.View(buf, Layout((1,), buf.dtype), off)
            if b.kind == "c_arg_index" or not self.carg[b.name].is_pointer:
                return ir.Deref(view)
            return ir.Ptr(view)
        a = next(x for x in self.uk.kerargs if x.KerArgName == b.name)
        g = self.t.geometry[a.KerArgName]
        t = self._it(KER_TILE) if KER_TILE in g.iterators or a.has(Obj.O_DYNTILE) else ir.Affine()
        sel = KerArgSel(b.what)
        lines = ir.Lanes(g.extent, t * g.step, g.lines) if g.tiled else ir.affine(g.lines)
        if sel == KerArgSel.KER_ARG_TILE:
            if a.has(Obj.O_DYNTILE):
                buf = self.l1[a.KerArgName]
                return ir.Ptr(ir.View(buf, Layout((1,), buf.dtype), t * g.line_elems))
            _, k, _, _ = self._access(a, False) if moves(a) else (None, t, None, None)
            return ir.Ptr(self._l1_view(a, k))
        if sel == KerArgSel.KER_ARG:
            if moves(a) and g.tiled:
                idx, _, _, _ = self._access(a, False)
                return ir.Ptr(self._home_view(a, {i: v for i, v in idx.items() if i != KER_TILE}))
            _, k, _, _ = self._access(a, False) if moves(a) else (None, ir.Affine(), None, None)
            return ir.Ptr(self._l1_view(a, k))
        full = ir.affine(g.lines)
        table = {
            KerArgSel.KER_ARG_TILE_W: (a.W if g.horizontal else lines),
            KerArgSel.KER_ARG_TILE_H: (lines if g.horizontal else a.H),
            KerArgSel.KER_ARG_TILE_W0: (a.W if g.horizontal else full),
            KerArgSel.KER_ARG_TILE_H0: (full if g.horizontal else a.H),
            KerArgSel.KER_ARG_NTILES: self.t.n_tiles,
            KerArgSel.KER_ARG_TILEINDEX: t,
            KerArgSel.KER_ARG_TILEOFFSET: t * g.step,
        }
        v = table[sel]
        return ir.Val(v if isinstance(v, ir.Lanes) else ir.affine(v))

    # -- the loop nest -------------------------------------------------------------------

    def lower(self) -> None:
        moved = [a for a in self.uk.kerargs if moves(a)]
        reads = [a for a in moved if a.has(Obj.O_IN)]
        writes = [a for a in moved if a.has(Obj.O_OUT)]
        multi = {a.KerArgName for a in moved if self.t.args[a.KerArgName].slots > 1}
        top: list = []
        for a in reads:
            if not self._loops_of(a):
                top += self._read(a, False, "Read")
            elif a.KerArgName in multi:
                top += self._read_first(a)
        top += self._calls(LOC_PROLOG)
        top += self._nest(0, reads, writes, multi)
        top += self._calls(LOC_EPILOG)
        for a in writes:
            if not self._loops_of(a):
                top += self._write(a, "Write")
        self.out.body += top

    def _read_first(self, a) -> list:
        """Access 0, before any loop: every loop variable is 0."""
        idx = {i: ir.Affine() for i in self._loops_of(a)}
        g = self.t.geometry[a.KerArgName]
        valid = ir.Lanes(g.extent, ir.Affine(), g.lines)
        return self._moves(self._home_view(a, idx), self._l1_view(a, 0), a, 0, valid,
                           "Read First Tile", inbound=True)

    def _nest(self, depth: int, reads, writes, multi) -> list:
        order = self.uk.order
        if depth == len(order):
            return self._calls(LOC_INNER_LOOP)
        it = order[depth]
        body: list = []
        for a in reads:
            loops = self._loops_of(a)
            if loops and loops[-1] == it:
                body += self._read(a, a.KerArgName in multi,
                                   "Read Next Tile" if a.KerArgName in multi else "Read Tile")
        pro, epi = {KER_OUT_PLANE: (LOC_INNER_LOOP_PROLOG, LOC_INNER_LOOP_EPILOG),
                    KER_TILE: (LOC_IN_PLANE_PROLOG, LOC_IN_PLANE_EPILOG)}.get(it, (None, None))
        inner = self._nest(depth + 1, reads, writes, multi)
        body += (self._calls(pro) if pro else []) + inner + (self._calls(epi) if epi else [])
        for a in writes:
            loops = self._loops_of(a)
            if loops and loops[-1] == it:
                body += self._write(a, "Write Tile")
        loop = ir.Loop(self.vars[it], tuple(body), f"{_NAMES[it]} loop of {self.uk.name}")
        if it == KER_TILE and KER_OUT_PLANE not in order:
            # Without an out-plane loop the inner-loop prolog and epilog wrap the tile loop.
            return self._calls(LOC_INNER_LOOP_PROLOG) + [loop] + self._calls(LOC_INNER_LOOP_EPILOG)
        return [loop]
