"""Lowering a solved user kernel to the IR.

The loop nest follows the kernel's spaces, outermost first (iteration order 2 for the
older generation: out-planes, tiles, in-planes; the newer ``KernelIterSpace`` as given):

    read whole arguments and the first tiles of multi-buffered ones; <LOC_PROLOG>
    for each space s (outer to inner):
      <before s's loop>                    LOC_INNER_LOOP_PROLOG, LOC_LOOP_PROLOG, LOC_D0_PROLOG
      loop over s:
        read the tiles that change with s (the next one into the next slot)
        <begin of s's body>                LOC_IN_PLANE_PROLOG (Tile0)
        ... the next space in ...
        <s's body>                         LOC_INNER_LOOP, LOC_LOOP, LOC_D0, LOC_INNER_LOOP1
        <end of s's body>                  LOC_IN_PLANE_EPILOG (Tile0)
        write the tiles that change with s
      <after s's loop>                     LOC_INNER_LOOP_EPILOG, LOC_LOOP_EPILOG, LOC_D0_EPILOG
    <LOC_EPILOG>; write whole arguments

Each argument moved by DMA is read or written where its data changes: in the body of the
innermost loop it varies with. Its accesses are numbered ``k`` in loop order over the loops
from the outermost to that one; access ``k`` sits in slot ``k mod slots`` and the read of
access ``k+1`` is issued while access ``k`` is computed on. A read past the last access, or
the lines of a tile outside the plane, move nothing: their valid line count is 0. A tile is
dense in L1 (a narrower last tile has a narrower pitch, as the AutoTiler's 2-D transfers
have); when that changes its layout, or padding shifts its first tile, the tile's transfer
is split into cases whose line counts are 0 outside the tiles they serve. Arguments with an
L3 home pass through two slots in L2 on their way to and from L1.
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
from .api import K_H, K_INP, K_OUTP, K_W, KerArgSel, KerIter, Loc, Obj
from .solver import ArgGeometry, Tiling, moves
from .spaces import OLD_KEYS

VAR_NAMES = {"Tile0": "Tile", "OutPlane": "Op", "InPlane": "Ip", "InOutPlane": "IOp"}

# Where each call location puts a call: (space, part) with part "before" / "after" its loop,
# "begin" / "body" / "end" of its loop body; (None, ...) is outside every loop.
_LOCATIONS = {
    Loc.LOC_PROLOG: (None, "before"), Loc.LOC_EPILOG: (None, "after"),
    Loc.LOC_INNER_LOOP_PROLOG: ("Tile0", "before"), Loc.LOC_INNER_LOOP_EPILOG: ("Tile0", "after"),
    Loc.LOC_IN_PLANE_PROLOG: ("Tile0", "begin"), Loc.LOC_IN_PLANE_EPILOG: ("Tile0", "end"),
    Loc.LOC_INNER_LOOP1: ("Tile1", "body"), Loc.LOC_INNER_LOOP1_PROLOG: ("Tile1", "before"),
    Loc.LOC_INNER_LOOP1_EPILOG: ("Tile1", "after"),
}
for _i, _key in enumerate(("Tile0", "Tile1", "Tile2")):
    _sfx = str(_i) if _i else ""
    _LOCATIONS[Loc[f"LOC_LOOP{_sfx}"]] = (_key, "body")
    _LOCATIONS[Loc[f"LOC_LOOP{_sfx}_PROLOG"]] = (_key, "before")
    _LOCATIONS[Loc[f"LOC_LOOP{_sfx}_EPILOG"]] = (_key, "after")
for _i in range(4):
    _LOCATIONS[Loc[f"LOC_D{_i}"]] = (f"D{_i}", "body")
    _LOCATIONS[Loc[f"LOC_D{_i}_PROLOG"]] = (f"D{_i}", "before")
    _LOCATIONS[Loc[f"LOC_D{_i}_EPILOG"]] = (f"D{_i}", "after")


def c_dtype(ctype: str) -> np.dtype:
    """The numpy dtype of a C type (pointers: of what they point to)."""
    return parse_ctype(ctype).dtype


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


def dense(shape) -> tuple[int, ...]:
    """Row-major strides of a shape, in elements."""
    return tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))


def first_of(i: ir.Affine, n: int) -> ir.Affine:
    """1 when tile index ``i`` (in 0..n-1) is 0, else 0."""
    if n == 1:
        return ir.affine(1)
    at_least_1 = ir.affine(i) if n == 2 else (i + (n - 1)) // n
    return ir.affine(1) - at_least_1


def last_of(i: ir.Affine, n: int) -> ir.Affine:
    """1 when tile index ``i`` (in 0..n-1) is n-1, else 0."""
    return ir.affine(i) if n == 2 else i // (n - 1) if n > 1 else ir.affine(1)


class KernelLowering:
    """Lowers one user kernel; ``cargs`` maps its C argument names to the program's
    parameter names (or to an int, for a group's ``Imm`` binding)."""

    def __init__(self, uk, tiling: Tiling, libs: dict, target, l3: str, out: Lowered,
                 cargs: dict | None = None, prefix: str = "", lib_bounds: dict | None = None):
        self.uk, self.t, self.libs, self.target, self.l3 = uk, tiling, libs, target, l3
        self.lib_bounds = lib_bounds or {}  # basic kernel -> bounds of each argument
        self.out, self.prefix = out, prefix
        self.cmap = cargs or {c.ArgName: c.ArgName for c in uk.cargs}
        self.sp = dict(tiling.spaces)
        self.order = tuple(self.sp)
        self.vars = {k: ir.Var(VAR_NAMES.get(k, k), s.count) for k, s in self.sp.items()}
        self.args = {a.KerArgName: a for a in uk.kerargs}
        self.l1: dict[str, ir.Buffer] = {}
        self.l2: dict[str, ir.Buffer] = {}
        self.carg = {c.ArgName: c for c in uk.cargs}
        self.bound: dict[str, list] = {}  # C argument -> the KerArgs bound to it
        for a in uk.kerargs:
            self.bound.setdefault(a.CArgName, []).append(a)
        self._params()
        self._buffers()

    def geo(self, a) -> ArgGeometry:
        return self.t.geometry[a.KerArgName]

    # -- buffers -----------------------------------------------------------------------------

    def _params(self) -> None:
        for c in self.uk.cargs:
            target_name = self.cmap.get(c.ArgName)
            add_bounds(self.out, target_name, c.bounds, f"{self.uk.name}: C argument {c.ArgName!r}")
            if not isinstance(target_name, str):
                continue
            dt = c_dtype(c.ArgType)
            bound = [a for a in self.bound.get(c.ArgName, ()) if moves(a)]
            if not c.is_pointer:
                shape = ()
            elif bound:
                shape = self._declared(c, self.geo(bound[0]).frame.home_shape)
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

    def _declared(self, c, home: tuple) -> tuple:
        """The shape of a bound C argument's tensor: the ``shape`` its TCArg declares (the
        same elements, checked by ``validate``), else its kernel argument's home."""
        return home if c.shape is None else tuple(c.shape)

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
        bound = self.bound.get(carg, [])
        if not bound:
            # A basic kernel may write through a pointer it is given, unless C says const.
            c = self.carg[carg]
            return "inout" if c.is_pointer and not c.ctype.const else "in"
        ins = any(a.has(Obj.O_IN) for a in bound)
        outs = any(a.has(Obj.O_OUT) for a in bound)
        return {(True, False): "in", (False, True): "out"}.get((ins, outs), "inout")

    def _widen_role(self, name: str, carg: str) -> None:
        """A group parameter used by several kernels is read if any reads it, and so on."""
        buf, spec = self.out.params[name]
        roles = {buf.role, self._role(carg)}
        role = roles.pop() if len(roles) == 1 else "inout"
        self.out.params[name] = (ir.Buffer(buf.name, buf.memory, buf.dtype, buf.size, role), spec)

    def _dtype(self, a) -> np.dtype:
        c = self.carg.get(a.CArgName) if a.CArgName else None
        return c_dtype(c.ArgType) if c else self._seen_as(a)

    def _buffers(self) -> None:
        for a in self.uk.kerargs:
            p = self.t.args[a.KerArgName]
            dt = self._dtype(a)
            if a.Alias is not None:
                continue
            slot = (p.pitch if p.slots > 1 else p.size) // dt.itemsize
            buf = ir.Buffer(f"{self.prefix}{a.KerArgName}", "L1", dt, slot * p.slots,
                            slots=p.slots, slot_len=slot, address=p.offset)
            self.l1[a.KerArgName] = buf
            self.out.buffers.append(buf)
            if a.has(Obj.O_L2DB) and moves(a):
                size = math.prod(self.geo(a).tile_shape)
                l2 = ir.Buffer(f"{self.prefix}{a.KerArgName}.L2", "L2", dt, size * 2, slots=2,
                               slot_len=size)
                self.l2[a.KerArgName] = l2
                self.out.buffers.append(l2)
        for a in self.uk.kerargs:
            if a.Alias is not None:
                self.l1[a.KerArgName] = self.l1[a.Alias]  # a name: Model.UserKernel

    def _seen_as(self, a) -> np.dtype:
        """A buffer bound to no C argument holds what the basic kernels it is passed to
        point to (a float accumulator), else integers of its item size."""
        for call in self.uk.calls:
            lib = self.libs.get(call.CallName)
            for b, (ctype, _) in zip(call.BindingList, lib.args if lib else ()):
                if b.kind == "k_arg" and b.name == a.KerArgName and \
                        b.what == KerArgSel.KER_ARG_TILE:
                    dt = c_dtype(ctype)
                    if dt.itemsize == self.geo(a).frame.elem:
                        return dt
        return np.dtype(f"int{8 * self.geo(a).frame.elem}")

    # -- accesses ------------------------------------------------------------------------

    def _access(self, g: ArgGeometry, nxt: bool):
        """(index per space, access number, accesses, past-the-end flag) of the current
        access or of the next one."""
        loops = g.loops
        counts = [self.sp[s].count for s in loops]
        strides = [math.prod(counts[j + 1:]) for j in range(len(counts))]
        k = sum((self.vars[s] * st for s, st in zip(loops, strides)), ir.Affine())
        total = math.prod(counts)
        if not nxt:
            return {s: ir.affine(self.vars[s]) for s in loops}, k, total, ir.Affine()
        acc = k + 1

        def digit(j, st, c):  # loop j's index in access acc (no division or modulo by 1)
            q = acc // st if st > 1 else acc
            return ir.Affine() if j and c == 1 else q % c if j else q
        idx = {s: digit(j, st, c) for j, (s, st, c) in enumerate(zip(loops, strides, counts))}
        return idx, k, total, acc // total

    def _starts(self, g: ArgGeometry, idx: dict) -> list:
        """Per dimension of the argument, the (affine) start of the tile at home, in
        elements along that dimension; the line dimension's start is the real one."""
        f = g.frame
        out = []
        for i, d in enumerate(f.dims):
            if d.space is None or d.space not in idx:
                out.append(ir.Affine())
            elif i == f.line and f.tiled is not None:
                # The real first line: step*t - pad_top, the first tile starting at line 0.
                t = idx[d.space]
                first = first_of(t, self.sp[d.space].count)
                out.append(t * g.step - (ir.affine(1) - first) * g.pad[0])
            elif self.sp[d.space].kind == "par":
                out.append(idx[d.space] * self.sp[d.space].tile)
            else:
                out.append(idx[d.space] * d.step)
        return out

    def _cases(self, g: ArgGeometry, idx: dict, past: ir.Affine):
        """The transfer cases of a tile: (tile shape in L1, home start per dim, valid lines
        of the line dim). Their valid counts are 0 outside the tiles each serves."""
        f = g.frame
        starts = self._starts(g, idx)
        ln = f.line
        big = g.extent + max(g.tile_shape[ln], 1) + 1
        if g.residency == "whole" or not g.tiled:
            shape = g.tile_shape
            valid = ir.Lanes(shape[ln], past * big, shape[ln]) if g.loops else None
            return [(shape, starts, valid)]
        key = f.dims[ln].space
        n = self.sp[key].count
        t = idx.get(key, ir.Affine())  # an argument moved once has no loop index
        real = [(lo, cnt) for _, _, lo, cnt in g.tiles]
        full = g.tile_shape[ln]

        def formula(i):  # the middle tiles: real start step*i - pad_top, clamped count
            start = i * g.step - g.pad[0]
            return (start, max(0, min(g.extent - start, full)))
        special_first = n > 1 and real[0] != formula(0)
        layout_differs = any(g.tile_shape[j] > 1 for j in range(ln))
        special_last = n > 1 and (real[-1] != formula(n - 1) or (
            layout_differs and real[-1][1] != full))
        if n == 1:
            lo, cnt = real[0]
            shape = _with(g.tile_shape, ln, cnt)
            return [(shape, _with(starts, ln, ir.affine(lo)), ir.Lanes(cnt, past * big, cnt))]
        for i in range(1 if special_first else 0, n - 1 if special_last else n):
            if real[i] != formula(i):
                raise TilingError(f"{self.uk.name}: argument {f.arg.KerArgName!r}: tile {i} of "
                                  f"{n} cannot be moved ({real[i]} lines of the plane)")
        cases = []
        first, last = first_of(t, n), last_of(t, n)
        if special_first:
            lo, cnt = real[0]
            cases.append((_with(g.tile_shape, ln, cnt), _with(starts, ln, ir.affine(lo)),
                          ir.Lanes(cnt, (ir.affine(1) - first) * big + past * big, cnt)))
        if special_last:
            lo, cnt = real[-1]
            cases.append((_with(g.tile_shape, ln, cnt), starts,
                          ir.Lanes(cnt, (ir.affine(1) - last) * big + past * big, cnt)))
        middle = range(1 if special_first else 0, n - 1 if special_last else n)
        if len(middle):
            off = (first if special_first else ir.Affine()) + (last if special_last else
                                                                ir.Affine())
            start = starts[ln]
            cases.append((g.tile_shape, starts,
                          ir.Lanes(g.extent, start + off * big + past * big, full)))
        return cases

    def _home_view(self, g: ArgGeometry, shape, starts) -> ir.View:
        a = g.arg
        buf, _ = self.out.params[self.cmap[a.CArgName]]
        strides = dense(g.frame.shape)
        off = sum((s * st for s, st in zip(starts, strides)), ir.Affine())
        return _permuted(buf, shape, strides, off, g.frame.line)

    def _slot_view(self, g: ArgGeometry, buf: ir.Buffer, shape, k, lead: int = 0) -> ir.View:
        slot = (ir.affine(k) % buf.slots) * buf.slot_len if buf.slots > 1 else ir.Affine()
        return _permuted(buf, shape, dense(shape), slot + lead, g.frame.line)

    def _transfer(self, a, nxt: bool, label: str, inbound: bool) -> list:
        g = self.geo(a)
        idx, k, _, past = self._access(g, nxt)
        k1 = k + 1 if nxt else k
        lead = a.Buffers[0] * (a.ItemSize // g.frame.elem)
        out = []
        for shape, starts, valid in self._cases(g, idx, past):
            hops = [self._home_view(g, shape, starts),
                    self._slot_view(g, self.l1[a.KerArgName], shape, k1, lead)]
            if a.KerArgName in self.l2:
                hops.insert(1, self._slot_view(g, self.l2[a.KerArgName], shape, k1))
            if not inbound:
                hops = hops[::-1]
            out += [ir.Copy(dst, src, self.target.engine(src.buffer.memory,
                                                         dst.buffer.memory).name,
                            valid, f"{label} {a.KerArgName}")
                    for src, dst in itertools.pairwise(hops)]
        return out

    def _read_first(self, a) -> list:
        """Access 0, before any loop: every loop variable is 0."""
        g = self.geo(a)
        zero = {s: ir.Affine() for s in g.loops}
        lead = a.Buffers[0] * (a.ItemSize // g.frame.elem)
        out = []
        for shape, starts, valid in self._cases(g, zero, ir.Affine()):
            hops = [self._home_view(g, shape, starts),
                    self._slot_view(g, self.l1[a.KerArgName], shape, 0, lead)]
            if a.KerArgName in self.l2:
                hops.insert(1, self._slot_view(g, self.l2[a.KerArgName], shape, 0))
            out += [ir.Copy(dst, src, self.target.engine(src.buffer.memory,
                                                         dst.buffer.memory).name,
                            _constant(valid), f"Read First Tile {a.KerArgName}")
                    for src, dst in itertools.pairwise(hops)]
        return out

    # -- calls ---------------------------------------------------------------------------

    def _calls(self, key, part) -> list:
        return [self._call(c) for c in self.uk.calls if self._where(c) == (key, part)]

    def _where(self, c) -> tuple:
        loc = c.CallLocation
        if loc == Loc.LOC_INNER_LOOP:
            return (self.order[-1] if self.order else None, "body")
        if loc not in _LOCATIONS:
            raise TilingError(f"{self.uk.name}: call {c.CallName} at {loc.name}: not a location "
                              f"of a user kernel")
        key, part = _LOCATIONS[loc]
        if key is not None and key not in self.sp:
            if loc in (Loc.LOC_IN_PLANE_PROLOG, Loc.LOC_IN_PLANE_EPILOG,
                       Loc.LOC_INNER_LOOP_PROLOG, Loc.LOC_INNER_LOOP_EPILOG):
                raise TilingError(f"{self.uk.name}: call {c.CallName} at {loc.name} needs a "
                                  f"KER_TILE space")
            raise TilingError(f"{self.uk.name}: call {c.CallName} at {loc.name}: the kernel has "
                              f"no {key} space ({list(self.sp)})")
        return (key, part)

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
        key = it.key if isinstance(it, KerIter) else OLD_KEYS.get(it)
        return ir.affine(self.vars[key]) if key in self.vars else ir.Affine()

    def _bind(self, b):
        if b.kind == "imm":
            return ir.Val(ir.affine(b.value))
        if b.kind == "ignore":
            return ir.Val(ir.Affine())
        if b.kind == "usymb":  # validate.check_kernel has checked it is declared
            return ir.Val(ir.affine(dict(self.uk.dims.symbols)[b.name]))
        if b.kind == "kdim":
            d = self.uk.dims
            return ir.Val(ir.affine({K_INP: d.InPlanes, K_OUTP: d.OutPlanes, K_W: d.W,
                                     K_H: d.H}[b.value]))
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
        return self._karg(self.args[b.name], KerArgSel(b.what), b.space)

    def _tile_index(self, g: ArgGeometry):
        key = g.frame.tiled
        if g.residency == "dyn":
            key = g.frame.group
        if key in self.vars:
            return key, ir.affine(self.vars[key]), self.sp[key].count
        return None, ir.Affine(), 1

    def _pointer(self, a, g: ArgGeometry) -> ir.Ptr:
        buf = self.l1[a.KerArgName]
        lead = a.Buffers[0] * (a.ItemSize // g.frame.elem)
        if g.residency == "dyn":
            _, t, _ = self._tile_index(g)
            return ir.Ptr(ir.View(buf, Layout((1,), buf.dtype), t * g.line_elems))
        if g.residency == "whole":
            idx = {s: ir.affine(self.vars[s]) for s in g.frame.spaces if s in self.vars}
            starts = self._starts(g, idx)
            off = sum((s * st for s, st in zip(starts, dense(g.frame.shape))), ir.Affine())
            return ir.Ptr(ir.View(buf, Layout((1,), buf.dtype), off + lead))
        if moves(a):
            _, k, _, _ = self._access(g, False)
        else:
            _, k, _ = self._tile_index(g)
        slot = (ir.affine(k) % buf.slots) * buf.slot_len if buf.slots > 1 else ir.Affine()
        shape = g.tile_shape if len(g.tile_shape) != 2 or g.horizontal else g.tile_shape[::-1]
        return ir.Ptr(ir.View(buf, Layout(tuple(shape), buf.dtype), slot + lead))

    def _karg(self, a, sel: KerArgSel, space):
        g = self.geo(a)
        key, t, n = self._tile_index(g)
        if sel == KerArgSel.KER_ARG_TILE:
            return self._pointer(a, g)
        if sel == KerArgSel.KER_ARG:
            if moves(a) and g.residency != "whole" and a.CArgName:
                idx, _, _, _ = self._access(g, False)
                starts = self._starts(g, {s: v for s, v in idx.items() if s != key})
                buf, _ = self.out.params[self.cmap[a.CArgName]]
                off = sum((s * st for s, st in zip(starts, dense(g.frame.shape))), ir.Affine())
                return ir.Ptr(ir.View(buf, Layout((1,), buf.dtype), off))
            buf = self.l1[a.KerArgName]  # the L1 buffer itself
            return ir.Ptr(ir.View(buf, Layout((1,), buf.dtype)))
        first, last = first_of(t, n), last_of(t, n)
        lines = self._lines(g, t, n)
        full = g.lines if g.frame.tiled else g.extent
        plane_w = a.Stride2D or a.W
        used_w, used_h = a.Used or (plane_w, a.H)
        pad_l, pad_r, pad_t, pad_b = a.Pad
        bottom = 0
        if g.frame.tiled and g.tiles:
            v, c = g.tiles[-1][:2]
            bottom = max(0, v - pad_t + c - g.extent)
        tile_pad = ir.affine(pad_l) + pad_r * 256 + first * (pad_t << 16) + last * (bottom << 24)
        table = {
            KerArgSel.KER_ARG_TILE_W: (plane_w if g.horizontal else lines),
            KerArgSel.KER_ARG_TILE_H: (lines if g.horizontal else a.H),
            KerArgSel.KER_ARG_TILE_USEDW: (used_w if g.horizontal else lines),
            KerArgSel.KER_ARG_TILE_USEDH: (lines if g.horizontal else used_h),
            KerArgSel.KER_ARG_TILE_W0: (plane_w if g.horizontal else full),
            KerArgSel.KER_ARG_TILE_H0: (full if g.horizontal else a.H),
            KerArgSel.KER_ARG_W: plane_w,
            KerArgSel.KER_ARG_H: a.H,
            KerArgSel.KER_ARG_NTILES: n if key else self.t.n_tiles,
            KerArgSel.KER_ARG_TILEINDEX: t,
            KerArgSel.KER_ARG_TILEOFFSET: t * g.step,
            KerArgSel.KER_ARG_TILE_BASE: t * g.step,
            # The padding the tiles use: the last tile may need less than declared.
            KerArgSel.KER_ARG_PAD: pad_l + (pad_r << 8) + (pad_t << 16) + (
                (bottom if g.frame.tiled and g.tiles else pad_b) << 24),
            KerArgSel.KER_ARG_TILE_PAD: tile_pad,
            KerArgSel.KER_ARG_TILEFIRST: first,
            KerArgSel.KER_ARG_TILELAST: last,
        }
        if sel in (KerArgSel.KER_ARG_PARTILE_SIZE, KerArgSel.KER_ARG_LOADEDPARTILE_SIZE):
            s = self.sp[space.key]  # validate.check_kernel: a space of the kernel, not tiled
            return ir.Val(ir.affine(s.tile if s.kind == "par" else 1))
        v = table[sel]
        return ir.Val(v if isinstance(v, ir.Lanes) else ir.affine(v))

    def _lines(self, g: ArgGeometry, t: ir.Affine, n: int) -> ir.Affine:
        """Virtual lines of the current tile (padding included)."""
        if g.frame.tiled is None or g.residency == "whole" and n == 1:
            return ir.affine(g.extent if g.residency == "whole" else g.lines)
        full, last = g.tiles[0][1], g.tiles[-1][1]
        total = g.extent + sum(g.pad)
        if all(c == max(0, min(full, total - v)) for v, c, _, _ in g.tiles):
            return ir.Lanes(total, t * g.step, full)  # clamp(total - start, 0, full)
        return ir.affine(full) - last_of(t, n) * (full - last) if n > 1 else ir.affine(last)

    # -- the loop nest -------------------------------------------------------------------

    def lower(self) -> None:
        moved = [a for a in self.uk.kerargs if moves(a)]
        geos = {a.KerArgName: self.geo(a) for a in moved}
        once = [a for a in moved if geos[a.KerArgName].residency == "whole"
                or not geos[a.KerArgName].loops]
        once_names = {a.KerArgName for a in once}  # a set: a kernel may have thousands
        tiled = [a for a in moved if a.KerArgName not in once_names]
        reads = [a for a in tiled if a.has(Obj.O_IN)]
        writes = [a for a in tiled if a.has(Obj.O_OUT)]
        multi = {a.KerArgName for a in tiled if self.t.args[a.KerArgName].slots > 1}
        top: list = []
        for a in once:
            if a.has(Obj.O_IN):
                top += self._transfer(a, False, "Read", inbound=True)
        for a in reads:
            if a.KerArgName in multi:
                top += self._read_first(a)
        top += self._calls(None, "before")
        top += self._nest(0, reads, writes, multi)
        top += self._calls(None, "after")
        for a in once:
            if a.has(Obj.O_OUT):
                top += self._transfer(a, False, "Write", inbound=False)
        self.out.body += top

    def _nest(self, depth: int, reads, writes, multi) -> list:
        if depth == len(self.order):
            return []
        key = self.order[depth]
        body: list = []
        for a in reads:
            if self.geo(a).loops[-1] == key:
                body += self._transfer(a, a.KerArgName in multi,
                                       "Read Next Tile" if a.KerArgName in multi else "Read Tile",
                                       inbound=True)
        body += self._calls(key, "begin")
        body += self._nest(depth + 1, reads, writes, multi)
        body += self._calls(key, "body")
        body += self._calls(key, "end")
        for a in writes:
            if self.geo(a).loops[-1] == key:
                body += self._transfer(a, False, "Write Tile", inbound=False)
        loop = ir.Loop(self.vars[key], tuple(body),
                       f"{VAR_NAMES.get(key, key)} loop of {self.uk.name}")
        return self._calls(key, "before") + [loop] + self._calls(key, "after")


def _with(seq, i: int, value) -> tuple:
    out = list(seq)
    out[i] = value
    return tuple(out)


def _permuted(buf: ir.Buffer, shape, strides, offset, line: int) -> ir.View:
    """A view of ``shape`` (strides per dim) with the line dimension first, so that a valid
    line count bounds it."""
    order = [line] + [i for i in range(len(shape)) if i != line]
    lay = Layout(tuple(shape[i] for i in order), buf.dtype, tuple(strides[i] for i in order))
    return ir.View(buf, lay, ir.affine(offset))


def _constant(valid):
    """A first read's valid count, every loop variable 0."""
    if valid is None:
        return None
    env = {v: 0 for v in valid.start.vars}
    count = int(valid.eval(env))
    return ir.Lanes(valid.width, ir.affine(valid.width - count), valid.width)

