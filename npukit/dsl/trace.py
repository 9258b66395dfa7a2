"""Tracing a Compass DSL kernel into the IR.

``S.build`` runs the kernel's Python body once, on stand-in values, with a ``Tracer``
recording every device operation as an IR statement:

- ``Index``: a run-time integer (the local id, a loop variable, and expressions of them
  built with + - * // % and ``S.min``/``S.max``/``S.clip``/``S.ceildiv``): an ``ir.Affine``
  index expression. Kernel arguments such as ``n: S.i32`` are plain ints: the program is
  specialised for them at build time.
- ``Scalar``: a typed constant known at build time (``S.fp32(510) / 20``), computed with
  the type's rounding.
- ``Vec``: a vector value: an internal buffer in the target's ``vreg`` memory, written by
  one IR statement (a load, a splat ``Fill`` or a ``Compute`` of the ``vec`` unit).
- ``Ptr``: a pointer into a tensor (scope ``global``), an ``S.alloc`` buffer (``lsram``) or
  an ``S.alloc_const`` table (``constant``), with an element offset.

A Python ``for`` over ``range`` inside a kernel is a device loop: its body runs once at
build time with the loop variable as an ``Index`` and becomes an ``ir.Loop`` (with a
run-time trip count when the range depends on run-time values). Values carried from one
iteration to the next must be vectors: a vector name reassigned in the body is written back
to its register at the end of each iteration; any other reassignment is a ``KernelError``.
The whole body runs inside the core loop whose variable is ``S.get_local_id()``.

Every pointer access is checked at build time over the iterations that run: an index
outside a buffer is an ``OutOfBoundsError`` naming the pointer, the index and the extent.
"""

from __future__ import annotations

import linecache
import re
import sys
from dataclasses import replace

import numpy as np

from .. import ir
from ..dtypes import is_float
from ..errors import CapacityError, DTypeError, KernelError, OutOfBoundsError
from ..layout import Layout
from ..poison import poison
from .types import DType

# the values, defined in npukit.dsl.values; importable from here too, as before (__all__)
from .values import (
    Index,
    Ptr,
    Scalar,
    Vec,
    _convert,
    _describe,
    as_affine,
    ceildiv,
    check_immediate,
    differ_in_sign,
    imax,
    imin,
    index,
    make_value,
    sign_note,
    tracer,
)

MAX_POINTS = 1 << 23  # iterations a build-time check may enumerate


# -- the tracer --------------------------------------------------------------------------

_TARGET_LINE = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)")
_FOR_LINE = re.compile(r"^\s*for\s+([A-Za-z_]\w*)\s+in\s+(?:\w+\.)?(?:tec_)?range\b")


class Tracer:
    """Records a kernel's device operations (see the module docstring)."""

    def __init__(self, target, name: str):
        self.tgt, self.name = target, name
        for mem in ("lsram", "constant", "vreg"):
            if mem not in target.memories:
                raise KernelError(f"target {target.name!r} has no memory {mem!r}, which the "
                                  f"Compass DSL needs (scopes lsram/constant and vector "
                                  f"registers); use target='compass'")
        if "vec" not in target.units:
            raise KernelError(f"target {target.name!r} has no unit 'vec' (the Compass DSL's "
                              f"vector unit); use target='compass'")
        self.blocks: list[list] = [[]]
        self.loops: list[ir.Var] = []
        self.serials: list[int] = []  # id of each open loop (what a Vec remembers)
        self.serial = 0
        self.points: list[tuple[dict, int]] = [({}, 1)]  # iterations that run, per level
        self.buffers: list[ir.Buffer] = []  # internal and constant buffers, in order
        self.taken: set[str] = set()
        self.reg_names: dict[str, str] = {}  # register id -> name from the source
        self.last_reg: tuple | None = None  # (frame, line, register id) of the last one
        self.last_hint = ""
        self.code: set = set()  # code objects of the kernel and its subroutines
        # pointer parameters: name -> extent (None: inferred), hi (highest element touched
        # + 1), read, written, dtype
        self.params: dict[str, dict] = {}
        self.broken: str | None = None
        self.count = 0
        # registers that hold a constant mask: name -> its lanes (a masked load reads no
        # lane past the last active one: the Compass DSL does not read masked-off lanes)
        self.const_masks: dict[str, tuple[bool, ...]] = {}
        self.core_var: ir.Var | None = None  # the core loop's variable: the local id
        self.fixed_id: int | None = None  # the local id when traced once per TEC
        self.funcs: list = []  # the Python functions traced, kernel first
        self.arms = 0  # arms of run-time ifs being traced (npukit.dsl.branches)

    def local_id(self):
        """``S.get_local_id()``: the core loop's variable, or this trace's TEC."""
        return self.fixed_id if self.fixed_id is not None else index(self.core_var * 1)

    def enter(self, fn) -> None:
        """Trace Python function ``fn``: its lines label the statements it records and its
        source goes with the program."""
        self.code.add(fn.__code__)
        if fn not in self.funcs:
            self.funcs.append(fn)

    # -- where we are in the source ------------------------------------------------------

    def site(self):
        """(frame, line number, source line) of the innermost kernel code running."""
        f = sys._getframe(1)
        while f is not None and f.f_code not in self.code:
            f = f.f_back
        if f is None:
            return None, 0, ""
        return f, f.f_lineno, linecache.getline(f.f_code.co_filename, f.f_lineno).strip()

    def label(self) -> str:
        return self.site()[2]

    def fresh(self, base: str) -> str:
        base = re.sub(r"\W", "_", base) or "t"
        name, k = base, 1
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

    # -- emitting ------------------------------------------------------------------------

    def emit(self, st) -> None:
        self.blocks[-1].append(st)

    def new_vec(self, type_: DType, hint: str) -> Vec:
        """A fresh register for a ``type_`` value, named after the variable the source line
        assigns (the last value a line computes is the one it assigns), else ``hint``."""
        self.count += 1
        rid = f"%{self.count}"
        frame, line, text = self.site()
        m = _TARGET_LINE.match(text)
        self.reg_names[rid] = hint
        if m:
            if self.last_reg and self.last_reg[:2] == (id(frame), line):
                self.reg_names[self.last_reg[2]] = self.last_hint  # an intermediate
            self.reg_names[rid] = m.group(1)
        self.last_hint = hint
        self.last_reg = (id(frame), line, rid)
        buf = ir.Buffer(rid, "vreg", type_.elem, type_.lanes)
        self.buffers.append(buf)
        return Vec(buf, type_, tuple(self.serials))

    def splat(self, type_: DType, value) -> Vec:
        """A vector with every lane ``value`` (a ``Fill``)."""
        if isinstance(value, Index):
            raise KernelError(f"S.{type_}({value}): a vector of a run-time integer is not "
                              f"supported; build it from constants")
        v = _convert(value, type_.element_of, f"S.{type_}({value!r})")
        text = str(v.item()).removesuffix(".0").replace("-", "m").replace(".", "_")
        out = self.new_vec(type_, f"k_{text}")
        self.emit(ir.Fill(out.view, v.item(), self.label()))
        return out

    def compute(self, op: str, type_: DType, srcs: list, attrs: dict | None = None) -> Vec:
        """One instruction of the ``vec`` unit writing a new ``type_`` register."""
        views = [s.view if isinstance(s, Vec) else s for s in srcs]
        out = self.new_vec(type_, f"t_{op[1:]}")
        widest = max([out.view.dtype] + [v.dtype for v in views if v.buffer.role != "const"],
                     key=lambda d: (d != np.bool_, d.itemsize))
        a = dict(attrs or {}, pair=(widest.name, None))
        self.emit(ir.Compute("vec", op, out.view, tuple(views), attrs=tuple(sorted(a.items())),
                             label=self.label()))
        return out

    def lane(self, v: Vec, i) -> Vec:
        """Lane ``i`` (a constant) of ``v``: a one-lane register (``v[0]``)."""
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)) or \
                not -v.type.lanes <= i < v.type.lanes:
            raise KernelError(f"`{self.label()}`: lane {i!r} of a {v.type} vector: a lane is "
                              f"a constant 0..{v.type.lanes - 1}")
        out = self.new_vec(v.type.element_of, "lane")
        at = Layout((1,), v.type.elem, None, int(i) % v.type.lanes)
        self.emit(ir.Copy(out.view, ir.View(v.buf, at), self.tgt.engine("vreg", "vreg").name,
                          label=self.label()))
        return out

    def set_lane(self, v: Vec, i, value) -> None:
        """``v[i] = value``: lane ``i`` (a constant or run-time index inside the vector) of
        register ``v`` set to a number, typed scalar or one-lane value."""
        what = self.label()
        at = as_affine(i, f"`{what}`: lane index")
        lo, hi = at.bounds()
        if lo < 0 or hi >= v.type.lanes:
            raise KernelError(f"`{what}`: lane {lo}..{hi} of a {v.type} vector: a lane is "
                              f"0..{v.type.lanes - 1}")
        lane = ir.View(v.buf, Layout((1,), v.type.elem), at)
        if isinstance(value, Vec):
            if value.type != v.type.element_of:
                raise DTypeError(f"`{what}`: a {value.type} value into a lane of {v.type}")
            self.emit(ir.Copy(lane, value.view, self.tgt.engine("vreg", "vreg").name,
                              label=what))
            return
        elem = _convert(value, v.type.element_of, f"`{what}`")
        self.emit(ir.Fill(lane, elem.item(), what))

    def spread(self, x: Vec, lanes: int) -> Vec:
        """A ``lanes``-lane vector with every lane the one lane of ``x``."""
        out = self.new_vec(x.type.with_lanes(lanes), "bcast")
        every = ir.View(x.buf, Layout((lanes,), x.type.elem, (0,)))
        self.emit(ir.Copy(out.view, every, self.tgt.engine("vreg", "vreg").name,
                          label=self.label()))
        return out

    # -- operands ------------------------------------------------------------------------

    def coerce(self, x, like: DType, what: str) -> Vec:
        """``x`` as a ``like`` vector: a vector of that type, or a number or typed scalar
        spread over every lane."""
        if isinstance(x, Vec):
            if x.type.lanes == 1 < like.lanes and x.type == like.element_of:  # spread it
                return self.spread(x, like.lanes)
            if x.type != like:
                raise DTypeError(f"{what}: vector type mismatch: {like} and {x.type}"
                                 f"{sign_note(like, x.type)}")
            return x
        check_immediate(x, like, what)
        if isinstance(x, Scalar) and x.type != like.element_of:
            # a typed scalar of the same kind converts to the lanes' type (an integer must
            # fit it; a float no wider than the lanes rounds), as the Compass DSL promotes
            # S.i8 into int16 lanes and S.fp16 into float32 lanes
            if is_float(x.type.elem) != is_float(like.elem) or like.elem == np.bool_ or \
                    is_float(like.elem) and x.type.elem.itemsize > like.elem.itemsize:
                raise DTypeError(f"{what}: type mismatch: {x.type} scalar with a {like} "
                                 f"vector")
            x = Scalar(like.element_of, x.value if is_float(like.elem) else int(x.value))
        if isinstance(x, (Index, Ptr)) or not isinstance(x, (Scalar, int, float, bool,
                                                             np.number, np.bool_)):
            raise KernelError(f"{what}: {_describe(x)} cannot meet a {like} vector (only "
                              f"vectors, numbers and typed constants can)")
        return self.splat(like, x)

    def vector_type(self, what: str, *xs) -> DType:
        vecs = [x for x in xs if isinstance(x, Vec)]
        if vecs:  # a one-lane value (a lane of a vector) meets the others' lanes
            return max(vecs, key=lambda v: v.type.lanes).type
        raise KernelError(f"{what}: needs a vector operand, got "
                          f"{', '.join(_describe(x) for x in xs)}")

    def arith(self, op: str, a, b, what: str) -> Vec:
        t = self.vector_type(what, a, b)
        va, vb = self.coerce(a, t, what), self.coerce(b, t, what)
        if t.elem == np.bool_:
            raise DTypeError(f"{what} on {t} masks: combine masks with S.vand/S.vor/S.vxor")
        if op == "vdiv" and t.elem.kind in "iu":
            # the Compass DSL's integer `/` truncates toward zero (as C) and saturates
            op = "vquot"
        return self.compute(op, t, [va, vb])

    def unary(self, op: str, a, what: str) -> Vec:
        t = self.vector_type(what, a)
        if t.elem == np.bool_:
            raise DTypeError(f"{what} on {t} masks: use S.vnot")
        if op == "vrint" and not is_float(t.elem):
            raise DTypeError(f"S.vrint of {t}: rounding applies to float vectors")
        return self.compute(op, t, [a])

    def logic(self, op: str, a, b, what: str) -> Vec:
        t = self.vector_type(what, a, b)
        if is_float(t.elem):
            raise DTypeError(f"{what} on {t}: logic operations take masks or integer vectors")
        srcs = [self.coerce(a, t, what)] + ([] if b is None else [self.coerce(b, t, what)])
        return self.compute(op, t, srcs)

    def compare(self, cmp: str, a, b) -> Vec:
        what = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}[cmp]
        t = self.vector_type(what, a, b)
        return self.compute("vcmp", DType("bool").with_lanes(t.lanes),
                            [self.coerce(a, t, what), self.coerce(b, t, what)], {"cmp": cmp})

    def mask(self, m, lanes: int, what: str) -> Vec:
        """A mask operand: a bool vector of ``lanes`` lanes, or a list of bools / a string
        such as ``"3T5F"`` (a constant)."""
        if isinstance(m, str):
            m = _parse_mask(m, lanes, what)
        if isinstance(m, (list, tuple, np.ndarray)):
            bits = np.asarray(m, bool).reshape(-1)
            if bits.size > lanes:
                raise DTypeError(f"{what}: a mask of {bits.size} lanes for {lanes}-lane vectors")
            bits = np.concatenate([bits, np.zeros(lanes - bits.size, bool)])  # the rest False
            data = self.const_buffer("mask", bits)
            out = self.new_vec(DType("bool").with_lanes(lanes), "mask")
            self.emit(ir.Copy(out.view, ir.View(data, Layout((lanes,), np.bool_)),
                              self.tgt.engine("constant", "vreg").name, label=self.label()))
            self.const_masks[out.buf.name] = tuple(bits.tolist())
            return out
        if not isinstance(m, Vec) or m.type.elem != np.bool_:
            raise DTypeError(f"{what}: mask must be a bool vector (a comparison), got "
                             f"{_describe(m)}")
        if m.type.lanes != lanes:
            raise DTypeError(f"{what}: vector type mismatch: mask {m.type} for {lanes}-lane "
                             f"vectors")
        return m

    def select(self, m: Vec, a, b, what: str) -> Vec:
        t = self.vector_type(what, a, b)
        m = self.mask(m, t.lanes, what)
        return self.compute("vsel", t, [m, self.coerce(a, t, what), self.coerce(b, t, what)])

    def masked(self, result: Vec, mask, r, what: str) -> Vec:
        """The Compass DSL's mask convention: lanes where ``mask`` is false take ``r``
        (undefined when ``r`` is None: npukit poisons them)."""
        if mask is None:
            if r is not None:
                raise KernelError(f"{what}: r= gives the inactive lanes; it needs a mask=")
            return result
        if r is None:
            r = poison(result.type.elem, ()).item()
        return self.select(mask, result, r, what)

    # -- memory --------------------------------------------------------------------------

    def const_buffer(self, base: str, data: np.ndarray) -> ir.Buffer:
        used = sum(b.nbytes for b in self.buffers if b.memory == "constant")
        size = self.tgt.memories["constant"].size
        if used + data.nbytes > size:
            raise CapacityError(f"S.alloc_const `{base}` ({data.size} x {data.dtype.name} = "
                                f"{data.nbytes} B): constant memory holds {size} B and "
                                f"{used} B are already taken")
        buf = ir.Buffer(self.fresh(base), "constant", data.dtype, data.size, role="const",
                        data=np.ascontiguousarray(data).tobytes())
        self.buffers.append(buf)
        return buf

    def alloc(self, shape, dtype, scope: str) -> Ptr:
        """A buffer in memory ``scope``: "lsram" (each TEC's own) or "shared" (one for the
        core's TECs, which npukit runs in turns between barriers)."""
        t = DType(dtype)
        if scope not in ("lsram", "shared"):
            raise KernelError(f"S.alloc(..., scope={scope!r}): npukit's Compass DSL allocates "
                              f"in 'lsram' (each TEC's local SRAM) or 'shared' (the core's)")
        n = int(np.prod(_shape(shape, "S.alloc")))
        _, _, text = self.site()
        m = _TARGET_LINE.match(text)
        name = m.group(1) if m else f"{scope}_buf"
        nbytes = n * t.lanes * t.elem.itemsize
        used = [b for b in self.buffers if b.memory == scope]
        size = self.tgt.memories[scope].size
        if sum(b.nbytes for b in used) + nbytes > size:
            taken = ", ".join(f"{b.name} {b.nbytes} B" for b in used) or "nothing"
            whose = "per TEC" if scope == "lsram" else "for the core's TECs"
            raise CapacityError(f"S.alloc of `{name}` ({n} x {t} = {nbytes} B) does not fit "
                                f"the {scope}: it holds {size} B {whose} on {self.tgt.name} "
                                f"and already holds {taken}")
        buf = ir.Buffer(self.fresh(name), scope, t.elem, n * t.lanes)
        self.buffers.append(buf)
        return Ptr(buf, t, ir.Affine(), scope, buf.name)

    def alloc_const(self, shape, dtype, data) -> Ptr:
        t = DType(dtype)
        shp = _shape(shape, "S.alloc_const")
        try:
            arr = np.asarray(data, dtype=t.elem)
        except (TypeError, ValueError) as exc:
            raise DTypeError(f"S.alloc_const: the data do not convert to {t}: {exc}") from exc
        if arr.size != int(np.prod(shp)) * t.lanes:
            raise KernelError(f"S.alloc_const: shape {tuple(shp)} of {t} needs "
                              f"{int(np.prod(shp)) * t.lanes} values, the data hold {arr.size}")
        _, _, text = self.site()
        m = _TARGET_LINE.match(text)
        buf = self.const_buffer(m.group(1) if m else "const", arr.reshape(-1))
        return Ptr(buf, t, ir.Affine(), "constant", buf.name)

    def extent(self, p: Ptr) -> int | None:
        """Elements of ``p``'s buffer, or None for a tensor whose extent the build infers."""
        info = self.params.get(p.buf.name)
        return p.buf.size if info is None else info["extent"]

    def check(self, p: Ptr, start: ir.Affine, count, what: str, write: bool) -> None:
        """Build-time bounds check of elements ``[start, start + count)`` of ``p``'s buffer
        over every iteration that runs (``count`` an int or index expression)."""
        env, n = self.points[-1]
        lo = np.broadcast_to(np.asarray(start.eval(env), np.int64), (n,))
        cnt = np.broadcast_to(np.asarray(ir.affine(count).eval(env), np.int64), (n,))
        live = cnt > 0
        if live.any():
            ext = self.extent(p)
            hi = lo + cnt
            bad = live & ((lo < 0) | (hi > ext if ext is not None else False))
            if bad.any():
                k = int(np.argmax(bad))
                at = ", ".join(f"{v.name}={int(np.broadcast_to(env[v], (n,))[k])}"
                               for v in self.loops)
                size = "" if ext is None else f"{ext} x "
                why = f"index {int(lo[k])} is before its first element" if lo[k] < 0 else \
                    f"index {int(hi[k]) - 1} is past its extent of {ext} elements " \
                    f"(0..{ext - 1})"
                raise OutOfBoundsError(
                    f"pointer {p.name!r} ({p.scope}, {size}{p.buf.dtype.name}): `{what}` "
                    f"{'writes' if write else 'reads'} elements {int(lo[k])}..{int(hi[k]) - 1} "
                    f"({at}): {why}")
            if p.buf.name in self.params and ext is None:
                info = self.params[p.buf.name]
                info["hi"] = max(info["hi"], int(hi[live].max()))
        if p.buf.name in self.params:
            self.params[p.buf.name]["written" if write else "read"] = True

    def element_run(self, p: Ptr, i) -> tuple[ir.Affine, DType, int]:
        """Where ``p[i]`` starts (in ``p``'s buffer), its type and the step between lanes:
        numpy's values of a slice ``p[a:b:step]`` as lanes (constant length and step)."""
        if not isinstance(i, slice):
            return p.offset + as_affine(i, f"{p.name}[...]") * p.type.lanes, p.type, 1
        a = as_affine(0 if i.start is None else i.start, f"{p.name}[a:b]")
        n = as_affine(i.stop, f"{p.name}[a:b]") - a if i.stop is not None else None
        step = 1 if i.step is None else i.step
        if not isinstance(step, (int, np.integer)) or step < 1 or step > 1 and \
                p.type.is_vector or n is None or n.terms or n.const < 1:
            raise KernelError(f"{p.name}[{i.start}:{i.stop}:{step}]: a slice of a pointer "
                              f"with a constant length (b - a) and step > 0 (1 for a vector "
                              f"pointer) loads its values as lanes; {p.name} is {p.type}*")
        lanes = -(-n.const // int(step)) * p.type.lanes
        return p.offset + a * p.type.lanes, p.type.with_lanes(lanes), int(step)

    def load(self, p: Ptr, i) -> Vec:
        return self.load_run(p, *self.element_run(p, i))

    def load_run(self, p: Ptr, start: ir.Affine, t: DType, stride: int = 1) -> Vec:
        """A ``t`` register loaded from ``p``'s buffer, lane k from element
        ``start + k * stride`` (one lane: a run-time scalar)."""
        what = self.label()
        self.check(p, start, (t.lanes - 1) * stride + 1, what, False)
        view = ir.View(p.buf, Layout((t.lanes,), t.elem, (stride,)), start)
        out = self.new_vec(t, f"{p.name}_v")
        self.emit(ir.Copy(out.view, view, self.tgt.engine(p.buf.memory, "vreg").name,
                          label=what))
        return out

    def store(self, p: Ptr, i, value) -> None:
        start, t, step = self.element_run(p, i)
        if isinstance(value, Scalar) and t.lanes == 1 and is_float(value.type.elem) and \
                is_float(t.elem):  # a float constant rounds into any float element, as a
            value = value.value    # number does (S.rint(1.234) into a float16*)
        if isinstance(value, Vec) and differ_in_sign(value.type, t):  # its bits are
            value = self.compute("vbitcast", t, [value])              # stored, as C does
        elif isinstance(value, Scalar) and t.lanes == 1 and value.type != t:
            value = value.converted(t)  # a typed scalar converts into a scalar element
        self.store_run(p, start, self.coerce(value, t, f"`{self.label()}`: storing into "
                                                     f"{t}* {p.name}"), step)

    def store_run(self, p: Ptr, start: ir.Affine, v: Vec, stride: int = 1) -> None:
        """Register ``v`` stored into ``p``'s buffer, lane k at ``start + k * stride``."""
        what = self.label()
        if p.scope == "constant":
            raise KernelError(f"`{what}`: {p.name} is constant data (S.alloc_const): "
                              f"read-only")
        self.check(p, start, (v.type.lanes - 1) * stride + 1, what, True)
        view = ir.View(p.buf, Layout((v.type.lanes,), v.type.elem, (stride,)), start)
        self.emit(ir.Copy(view, v.view, self.tgt.engine("vreg", p.buf.memory).name,
                          label=what))

    def dma_copy(self, dst: Ptr, src: Ptr, width, src_stride=None, times=1,
                 dst_stride=None) -> None:
        what = self.label()
        for name, p in (("dst", dst), ("src", src)):
            if not isinstance(p, Ptr):
                raise KernelError(f"`{what}`: S.dma_copy {name} must be a pointer, got "
                                  f"{_describe(p)}")
        if dst.type != src.type:
            raise DTypeError(f"`{what}`: S.dma_copy needs pointers of one type: dst is "
                             f"{dst.type}*, src is {src.type}*")
        if "constant" in (dst.scope, src.scope) or dst.scope == src.scope == "lsram":
            raise KernelError(f"`{what}`: S.dma_copy moves data between global memory and "
                              f"lsram or within global memory, not from {src.scope} to "
                              f"{dst.scope}")
        if (src_stride, times, dst_stride) != (None, 1, None):
            self.dma_rows(dst, src, width, src_stride, times, dst_stride, what)
            return
        count = as_affine(width, "S.dma_copy width") * dst.type.lanes
        env, n = self.points[-1]
        vals = np.broadcast_to(np.asarray(count.eval(env), np.int64), (n,))
        if (vals < 0).any():
            k = int(np.argmax(vals < 0))
            at = ", ".join(f"{v.name}={int(np.broadcast_to(env[v], (n,))[k])}"
                           for v in self.loops)
            raise KernelError(f"`{what}`: S.dma_copy of {int(vals[k]) // dst.type.lanes} "
                              f"x {dst.type} ({at}): a count is never negative")
        top = int(vals.max()) if n else 0
        if top == 0:
            return  # no iteration that runs moves anything
        self.check(src, src.offset, count, what, False)
        self.check(dst, dst.offset, count, what, True)
        valid = None if not count.terms else ir.Lanes(count.const, -(count - count.const), top)
        lay = Layout((top,), dst.type.elem)
        self.emit(ir.Copy(ir.View(dst.buf, lay, dst.offset), ir.View(src.buf, lay, src.offset),
                          self.tgt.engine(src.buf.memory, dst.buf.memory).name, valid, what))

    def dma_rows(self, dst: Ptr, src: Ptr, width, src_stride, times, dst_stride,
                 what: str) -> None:
        """``times`` rows of ``width`` values, row ``r`` from ``src + r * src_stride`` to
        ``dst + r * dst_stride`` (strides default to ``width``; all constants)."""
        src_stride = width if src_stride is None else src_stride
        dst_stride = width if dst_stride is None else dst_stride
        sizes = (width, src_stride, times, dst_stride)
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                   for v in sizes):
            raise KernelError(f"`{what}`: a strided S.dma_copy takes constant width, "
                              f"strides and times, got {sizes}")
        if width < 0 or times < 0 or src_stride < width or dst_stride < width:
            raise KernelError(f"`{what}`: S.dma_copy(width={width}, src_stride={src_stride}, "
                              f"times={times}, dst_stride={dst_stride}): strides are at "
                              f"least the width, counts never negative")
        if width == 0 or times == 0:
            return
        k = dst.type.lanes  # values of a vector pointer hold k elements
        views = []
        for p, stride, write in ((src, src_stride, False), (dst, dst_stride, True)):
            self.check(p, p.offset, ((times - 1) * stride + width) * k, what, write)
            lay = Layout((times, width * k), p.type.elem, (stride * k, 1))
            views.append(ir.View(p.buf, lay, p.offset))
        self.emit(ir.Copy(views[1], views[0],
                          self.tgt.engine(src.buf.memory, dst.buf.memory).name, label=what))

    def dma_memset(self, p: Ptr, value, num) -> None:
        """``num`` elements at ``p`` set to ``value`` (a constant count of scalars, whatever
        ``p`` points at; a number or a run-time scalar)."""
        what = self.label()
        if not isinstance(p, Ptr) or p.scope == "constant":
            raise KernelError(f"`{what}`: S.dma_memset sets global memory or lsram through "
                              f"a pointer, got {_describe(p)}")
        if isinstance(num, bool) or not isinstance(num, (int, np.integer)) or num < 0:
            raise KernelError(f"`{what}`: S.dma_memset count {num!r}: npukit takes a "
                              f"constant count >= 0")
        n = int(num)
        if n == 0:
            return
        dst = ir.View(p.buf, Layout((n,), p.type.elem), p.offset)
        if isinstance(value, Vec) and value.type.lanes == 1:  # a run-time scalar (a[0])
            x = self.coerce(value, p.type.element_of, f"`{what}`: S.dma_memset value")
            self.check(p, p.offset, n, what, True)
            every = ir.View(x.buf, Layout((n,), p.type.elem, (0,)))  # its one lane, n times
            self.emit(ir.Copy(dst, every, self.tgt.engine("vreg", p.buf.memory).name,
                              label=what))
            return
        if isinstance(value, (Vec, Index, Ptr)):
            raise KernelError(f"`{what}`: S.dma_memset of {_describe(value)}: npukit takes a "
                              f"number or a scalar")
        v = _convert(value, p.type.element_of, f"`{what}`: S.dma_memset value")
        self.check(p, p.offset, n, what, True)
        self.emit(ir.Fill(dst, v.item(), what))

    def table(self, p: Ptr, builtin: str, what: str) -> ir.View:
        """Everything from ``p`` to the end of its buffer, which lane indices address (a
        gather reads it, a scatter reads and writes it)."""
        ext = self.extent(p)
        if ext is None or p.offset.terms:
            raise KernelError(f"`{what}`: {builtin} needs a table of known extent at a fixed "
                              f"address (S.alloc_const, S.alloc_buffer, or a tensor given a "
                              f"size); {p.name} + {p.offset} is not")
        if p.buf.name in self.params:
            self.params[p.buf.name]["read"] = True
        start = p.offset.const
        return ir.View(p.buf, Layout((max(ext - start, 0),), p.buf.dtype), ir.affine(start))

    def gather(self, p: Ptr, idx: Vec, mask) -> Vec:
        what = self.label()
        if not isinstance(p, Ptr):  # a vector pointer's indices count elements too
            raise KernelError(f"`{what}`: S.vload_gather reads through a pointer, got "
                              f"{_describe(p)}")
        if not isinstance(idx, Vec) or idx.type.elem.kind not in "iu" or \
                idx.type.elem.itemsize != 2:
            raise DTypeError(f"`{what}`: S.vload_gather indices must be a 16-bit integer "
                             f"vector (int16xN or uint16xN), got {_describe(idx)}")
        table = self.table(p, "S.vload_gather", what)
        srcs = [table, idx] + ([] if mask is None else
                               [self.mask(mask, idx.type.lanes, "S.vload_gather")])
        return self.compute("vgather", p.type.element_of.with_lanes(idx.type.lanes), srcs)

    def scatter(self, value: Vec, p: Ptr, idx: Vec, mask) -> None:
        what = self.label()
        if not isinstance(p, Ptr) or p.scope == "constant":
            raise KernelError(f"`{what}`: S.vstore_scatter writes through a pointer to global "
                              f"memory or lsram, got {_describe(p)}")
        if not isinstance(value, Vec) or value.type.elem != p.type.elem:
            raise DTypeError(f"`{what}`: S.vstore_scatter of {_describe(value)} through a "
                             f"{p.type} pointer: the element types must match")
        if not isinstance(idx, Vec) or idx.type.elem.kind not in "iu" or \
                idx.type.elem.itemsize != 2 or idx.type.lanes != value.type.lanes:
            raise DTypeError(f"`{what}`: S.vstore_scatter indices must be a 16-bit integer "
                             f"vector of the value's {value.type.lanes} lanes, got "
                             f"{_describe(idx)}")
        table = self.table(p, "S.vstore_scatter", what)
        if p.buf.name in self.params:  # the elements not stored keep their values
            self.params[p.buf.name]["written"] = True
        srcs = (value.view, idx.view) + (() if mask is None else
                                         (self.mask(mask, idx.type.lanes, what).view,))
        self.emit(ir.Compute("vec", "vscatter", table, srcs,
                             attrs=(("pair", (value.type.elem.name, None)),), label=what))

    def barrier(self) -> None:
        """``S.barrier()``: the core loop ends here and a new one begins (see
        ``npukit.dsl.memory.barrier``)."""
        label = self.label()
        if len(self.loops) != 1 or self.arms:
            where = "an if on a run-time value" if self.arms else "a device loop"
            raise KernelError(f"`{label}`: S.barrier inside {where}; npukit takes "
                              f"barriers in the kernel's straight-line code")
        self.close(f"{self.name}: each TEC runs up to `{label}`", cores=True)
        self.open(self.core_var)

    # -- loops ---------------------------------------------------------------------------

    def open(self, var: ir.Var) -> None:
        env, n = self.points[-1]
        counts = np.broadcast_to(np.asarray(var.running(env), np.int64), (n,))
        total = int(counts.sum())
        if total > MAX_POINTS:
            raise KernelError(f"loop {var.name}: {total} iterations in all, more than the "
                              f"{MAX_POINTS} the build-time checks enumerate")
        rows = np.repeat(np.arange(n), counts)
        new = {v: np.broadcast_to(a, (n,))[rows] for v, a in env.items()}
        new[var] = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        self.points.append((new, total))
        self.blocks.append([])
        self.loops.append(var)
        self.serial += 1
        self.serials.append(self.serial)

    def close(self, label: str, cores: bool = False) -> None:
        var = self.loops.pop()
        self.serials.pop()
        self.points.pop()
        body = self.blocks.pop()
        self.emit(ir.Loop(var, tuple(body), label, cores))

    def loop(self, frame, start, stop, step: int, label: str):
        """A device loop (the generator ``range`` returns inside a kernel)."""
        m = _FOR_LINE.match(label)
        name = self.fresh(m.group(1) if m else "i")
        a, b = as_affine(start, "range"), as_affine(stop, "range")
        trips = (b - a + (step - 1)) // step if (b - a).terms else \
            ir.affine(max(0, -(-((b - a).const) // step)))
        env, n = self.points[-1]
        runs = np.broadcast_to(np.asarray(trips.eval(env), np.int64), (n,))
        count = max(0, int(runs.max())) if n else 0
        if count == 0:
            return iter(())
        limited = trips.terms and (runs != count).any()  # else every run takes them all
        var = ir.Var(name, count, trips if limited else None)
        return self._iterate(frame, var, index(a + var * step), label, m and m.group(1))

    def _iterate(self, frame, var: ir.Var, value, label: str, target: str | None):
        if frame.f_code.co_name.startswith("<"):
            raise KernelError(f"`{label}`: a device loop inside a comprehension or generator "
                              f"is not supported; write a for statement")
        before = dict(frame.f_locals)
        self.open(var)
        serial = self.serial
        done = False
        try:
            yield value
            done = True
        finally:
            if done:
                self._carry(frame, before, target, serial, label)
            elif self.broken is None:
                self.broken = label
            if self.serials and self.serials[-1] == serial:
                self.close(label)

    def _carry(self, frame, before: dict, target: str | None, serial: int, label: str) -> None:
        """Values reassigned in the loop body: vectors are carried to the next iteration
        (written back to their register at the end of the body); others are errors."""
        after = frame.f_locals
        for name, old in before.items():
            new = after.get(name, old)
            if name == target or new is old:
                continue
            if isinstance(old, Vec) and isinstance(new, Vec):
                if new.type != old.type:
                    raise DTypeError(f"`{name}` changes type in the loop `{label}`: "
                                     f"{old.type} before, {new.type} after")
                self.emit(ir.Copy(old.view, new.view, self.tgt.engine("vreg", "vreg").name,
                                  label=f"{name} carried to the next iteration of `{label}`"))
                self.const_masks.pop(old.buf.name, None)  # no longer constant
                if serial in new.loops:  # made in the body: later uses read the carried one
                    new.buf = old.buf
            elif isinstance(old, (Vec, Index, Scalar, Ptr, int, float)) and \
                    not _same(old, new):
                raise KernelError(
                    f"`{name}` is reassigned in the device loop `{label}`: the body runs once "
                    f"at build time, so only vectors can carry a value from one iteration to "
                    f"the next; write it as an expression of the loop variable")


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, Index):
        return a.expr == b.expr
    if isinstance(a, Scalar):
        return a.type == b.type and a.value.tobytes() == b.value.tobytes()
    if isinstance(a, Ptr):
        return (a.buf.name, a.type, a.offset) == (b.buf.name, b.type, b.offset)
    if isinstance(a, Vec):
        return False
    return a == b


def _shape(shape, what: str) -> tuple[int, ...]:
    shp = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if not all(isinstance(s, (int, np.integer)) and s > 0 for s in shp):
        raise KernelError(f"{what}: the shape must be positive constants, got {shape!r}")
    return tuple(int(s) for s in shp)


def _parse_mask(text: str, lanes: int | None, what: str) -> list[bool]:
    """The Compass DSL's mask strings: ``"3T5F"`` is three lanes True then five False; a
    count repeats the whole pattern after it (``"4TF"`` is TFTFTFTF, ``"2FT2TF"`` is
    FTFTTFTF); ``_`` separates patterns (``"3T_F"``); lanes past the pattern are False
    (``lanes=None``: the pattern's own lanes)."""
    groups = re.findall(r"(\d*)([TF]+)_?", text)
    if not groups or "".join(f"{c}{p}" for c, p in groups) != text.replace("_", "") or \
            text.endswith("_") or "__" in text or any(c and int(c) == 0 for c, _ in groups):
        raise DTypeError(f"{what}: mask {text!r} is not a pattern of counts and T/F "
                         f"such as '3T5F' or '4TF'")
    bits = [ch == "T" for c, p in groups for _ in range(int(c or 1)) for ch in p]
    if lanes is None:
        return bits
    if len(bits) > lanes:
        raise DTypeError(f"{what}: mask {text!r} has {len(bits)} lanes, more than the "
                         f"{lanes} of the vectors")
    return bits + [False] * (lanes - len(bits))


def run_guarded(tr: Tracer, body: tuple, loops=()) -> tuple:
    """The statements with a guard on each data flow whose static footprint (over every
    iteration of its loops, run or not) would leave its buffer: the flow's count then drops
    to 0 in iterations that do not run, so the build-time checks of ``npukit.passes`` see
    what the kernel really touches."""
    from ..passes import view_range

    out = []
    for st in body:
        if isinstance(st, ir.Loop):
            out.append(replace(st, body=run_guarded(tr, st.body, loops + (st.var,))))
            continue
        if isinstance(st, ir.Branch):
            out.append(replace(st, then=run_guarded(tr, st.then, loops),
                               orelse=run_guarded(tr, st.orelse, loops)))
            continue
        if isinstance(st, ir.Copy):
            over = any(view_range(v, st.valid, loops)[0] < 0 or
                       view_range(v, st.valid, loops)[1] > v.buffer.size
                       for v in (st.src, st.dst))
            if over:
                st = replace(st, valid=_guard(st.valid, st.dst.shape[0], loops))
        out.append(st)
    return tuple(out)


def _guard(valid: ir.Lanes | None, width: int, loops) -> ir.Lanes:
    """``valid`` (or all ``width`` lanes) limited to 0 where an enclosing loop of run-time
    trip count has run out: ``min(count, width · min_L(trips_L - var_L))``."""
    count = ir.affine(width) if valid is None else -valid.start + valid.total
    for v in loops:
        if v.trips is not None:
            left = (v.trips - v) * width
            count = count - ir.affine(ir.Clamp(count - left, 0, None))
    return ir.Lanes(count.const, -(count - count.const), width)


def error_site(exc: BaseException, code: set) -> str:
    """``file:line`` of the innermost kernel frame of a traceback."""
    tb, where = exc.__traceback__, ""
    while tb is not None:
        if tb.tb_frame.f_code in code:
            where = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


__all__ = ["Index", "Ptr", "Scalar", "Tracer", "Vec", "ceildiv",
           "imax", "imin", "index", "make_value", "tracer"]
