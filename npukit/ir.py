"""The one IR every front end lowers to and every back end reads.

A ``Program`` is a tree of statements over buffers that live in named memories:

- ``Loop``: a hardware loop; its ``Var`` runs 0..count-1, or only its first ``trips``
  iterations when the trip count is known at run time alone (``Var.trips``, an index
  expression of the enclosing loops' variables; ``count`` is then its static bound). A
  loop marked ``cores`` runs one iteration per core of the target, its variable is the
  core id (the Compass DSL's ``get_local_id()``): each core owns its internal memories
  and the cores run at the same time (the timing model overlaps them); functionally the
  iterations run in order, core 0 first, as parallel work runs on a host.
  A ``parallel`` loop promises that its iterations are independent (no iteration
  reads what another writes, and none write the same element), so back ends may run
  them at once on the target's cores; the sequential reading stays valid.
- ``Copy``: a data flow between memories (one transfer engine), optionally only the first
  ``valid`` indices of dim 0 (lanes of a vector, rows of a tile; the rest is junk).
- ``Append``: copy the first ``valid`` lanes of a vector to the row-major position
  ``cursor`` of a destination (sub)tensor, advance the cursor, never write past the end.
- ``ResetCursor``: start an append cursor at 0 (at the top of the loop that selects the
  destination subtensor).
- ``Fill``: set a buffer to a constant (the start of an accumulation, a splat).
- ``Compute``: one vector instruction of a unit; with ``acc`` its result is combined into
  the destination instead of replacing it.
- ``Call``: an opaque call of an ``Extern`` function (a basic kernel) with pointer and
  scalar arguments.
- ``Branch``: ``then`` runs when the one ``bool`` element ``cond`` views is true, ``orelse``
  when it is false (a condition known only at run time: the Compass DSL's ``if S.vall(m):``).
  What a branch writes is written only when it runs, so it counts for no output's coverage;
  the cycle model, which does not see data, costs both branches one after the other.
- ``Repeat``: ``body`` runs again and again while the one ``bool`` element ``cond`` views is
  true, checked before each run (the Compass DSL's ``while`` on a run-time value; the body
  recomputes ``cond``). Like a branch's, what it writes counts for no output's coverage;
  the cycle model costs the body once.

Constant data (a lookup table's memory image) is a ``Buffer`` with ``role="const"`` whose
``data`` the program carries; instructions read it through ordinary views.

Index arithmetic is affine in loop variables (``Affine``) with quasi-affine atoms:
``FloorDiv`` and ``Mod`` by a positive constant, and ``Clamp`` (``min(max(e, lo), hi)``,
either bound optional: run-time ``min``/``max``/``clip`` of indices); the valid lane count
of a vector is ``Lanes``: ``clamp(total - start, 0, width)``. The semantics are
sequential: statements run in order, loop bodies once per iteration. Back ends must agree
with that reading.

Element-wise vector instructions (``Compute`` ops named ``v*``, on any unit): every
operand view has the destination's size; lane ``k`` of the result depends on lane ``k``
of the operands only. The arithmetic is the operands' dtype (``npukit.arith.vec_op`` is
the reference):

- ``vadd``, ``vsub``, ``vmul``, ``vdiv`` (floats only), ``vmax``, ``vmin`` on two operands
  of the destination's dtype, ``vneg``, ``vabs`` on one: floats compute the exact result
  rounded once to the dtype (float16 by way of float32, which is exact for these
  operations), ``vmax``/``vmin`` return a NaN first operand, else the greater (lesser)
  value, the second on ties; integers wrap around modulo 2^bits. Integer ``vadd``,
  ``vsub``, ``vmul`` also take operands of the destination's width but either sign (each
  read in its own sign); ``vadd``/``vsub`` with attr ``saturate=True`` clamp the exact
  result to the destination's range.
- ``vcmp`` (attr ``cmp``: ``eq ne lt le gt ge``): a ``bool`` mask; comparisons with NaN
  are false except ``ne``.
- ``vsel``: ``(mask, a, b)`` -> ``where(mask, a, b)``.
- ``vand``, ``vor``, ``vxor``, ``vnot``: logical on ``bool`` masks, bitwise on integers.
- ``vrint``: a float rounded to the nearest integer, ties to even, in its own dtype.
- ``vcast``: the operand converted to the destination's dtype. To a float, rounded once to
  nearest even from the exact value (``npukit.floats``; bfloat16 and float16 included).
  Float to integer truncates toward zero, NaN gives 0, saturates to the int32 range, then
  narrows to the destination by keeping the low bits (attr ``saturate=True``: saturating
  to the destination's range instead). Integer to integer keeps the low bits (or saturates);
  ``bool`` converts to 0/1 and anything nonzero to ``True``.
- ``vshl`` (attr ``saturate``), ``vshr`` (attr ``round``): ``(x, shift)``, integer lanes
  shifted by the lanes of an integer ``shift`` of their width read as unsigned: left, the
  low bits of ``x·2^s`` (saturated: clamped to the range); right, ``floor(x / 2^s)``
  (rounded: to nearest, ties to even). ``vrotr``: ``(x, shift)``, the bits rotated right
  by ``shift mod width``. ``vclz``: leading zero bits of each lane; ``vcls``: the bits
  below the top bit equal to it; ``vpopcnt``: one bits; ``vbitrev``: the bits reversed.
  ``vbitcast``: the lane's bits read as the destination's dtype of the same width.
  ``vquot``, ``vrem``: ``(x, y)`` integers, the quotient truncated toward zero (the most
  negative value / -1 saturates) and the remainder with the sign of ``x``; 0 where ``y``
  is 0 (attr ``checked``: a zero ``y`` is an error the simulator reports, a
  ``ZeroDivisorError``; generated C gives 0). ``vfma``: ``(acc, x, y)`` floats,
  ``acc + x·y`` in float64 rounded once to the dtype. ``vmulhi``: ``(x, y)``, the upper
  half of the exact product of lanes of the destination's width, each operand in its own
  sign. ``vmath`` (attr ``fn``: ``exp exp2 log tanh sin cos sqrt rsqrt erf floor
  ceil``): the function of a float lane in float64, rounded to float32, then to the
  dtype, a NaN as the positive quiet NaN (``npukit.arith_vec`` is the reference);
  ``vpow``: ``(x, y)`` floats, ``x ** y`` the same way. ``vdot``: ``(acc, m1, x1, y1, ...,
  mk, xk, yk)``, ``acc + Σ xi·yi`` over the terms whose mask lane ``mi`` is true, in order: integers
  (``x``, ``y`` of at most 16 bits, ``acc`` of at most 32) exactly, then clamped to the
  destination's range; floats in float64 left to right, rounded once to the destination.
- ``vgather``: ``(table, indices[, mask])`` -> ``table[indices]``: ``table`` is any view
  (the whole view is addressable), ``indices`` an integer vector; lanes whose mask is
  false read nothing and give 0. An index outside the table is an error the simulator
  reports (``OutOfBoundsError`` naming the table, the index and its extent); generated C
  clamps it and never reads outside.
- ``vscatter``: ``dst`` is a table (any view, the whole view addressable), ``srcs`` are
  ``(values, indices[, mask])``: lane ``k`` of ``values`` is written to
  ``table[indices[k]]`` where the mask is true, lanes in order (a later lane wins); the
  other elements keep their values, so the table is read as well as written
  (``Compute.reads``). An index outside the table is an error the simulator reports;
  generated C skips that lane and never writes outside.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from .errors import KernelError, NpukitError
from .layout import Layout

# -- index expressions --------------------------------------------------------------------

@dataclass(frozen=True)
class Var:
    """A loop variable running 0..count-1; with ``trips`` (an index expression of outer
    loop variables) only 0..clamp(trips, 0, count)-1 run: ``count`` bounds it statically."""

    name: str
    count: int
    trips: Affine | None = None

    def running(self, env) -> np.ndarray | int:
        """How many iterations run for outer variables ``env`` (ints or arrays)."""
        if self.trips is None:
            return self.count
        return np.clip(self.trips.eval(env), 0, self.count)

    def __add__(self, o):
        return affine(self) + o

    __radd__ = __add__

    def __mul__(self, k: int):
        return affine(self) * k

    __rmul__ = __mul__

    def __floordiv__(self, m: int):
        return affine(self) // m

    def __mod__(self, m: int):
        return affine(self) % m

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Affine:
    """``const + Σ coeff·atom``; an atom is a loop ``Var`` or a ``FloorDiv``/``Mod`` of an
    Affine by a positive constant (quasi-affine, as in MLIR affine maps). Terms are sorted,
    with no zero coefficients."""

    const: int = 0
    terms: tuple[tuple[object, int], ...] = ()

    def __add__(self, o) -> Affine:
        o = affine(o)
        coeffs = dict(self.terms)
        for v, c in o.terms:
            coeffs[v] = coeffs.get(v, 0) + c
        terms = sorted(((v, c) for v, c in coeffs.items() if c), key=lambda t: repr(t[0]))
        return Affine(self.const + o.const, tuple(terms))

    __radd__ = __add__

    def __neg__(self) -> Affine:
        return self * -1

    def __sub__(self, o) -> Affine:
        return self + -affine(o)

    def __mul__(self, k: int) -> Affine:
        k = int(k)
        return Affine(self.const * k, tuple((v, c * k) for v, c in self.terms if c * k))

    __rmul__ = __mul__

    def __floordiv__(self, m: int) -> Affine:
        return affine(FloorDiv(self, int(m)))

    def __mod__(self, m: int) -> Affine:
        return affine(Mod(self, int(m)))

    @property
    def vars(self) -> tuple[Var, ...]:
        """Every loop variable the expression depends on, atoms included."""
        out: list[Var] = []
        for a, _ in self.terms:
            for v in (a.expr.vars if isinstance(a, (FloorDiv, Mod, Clamp)) else (a,)):
                if v not in out:
                    out.append(v)
        return tuple(out)

    def bounds(self) -> tuple[int, int]:
        """Lowest and highest value over the ranges of its variables (exact for affine
        expressions, an enclosing range with atoms)."""
        lo = hi = self.const
        for a, c in self.terms:
            alo, ahi = _atom_bounds(a)
            lo += min(c * alo, c * ahi)
            hi += max(c * alo, c * ahi)
        return lo, hi

    def eval(self, env):
        """Value with ``env[var]`` ints or numpy arrays (broadcast)."""
        out = self.const
        for a, c in self.terms:
            out = out + c * _atom_eval(a, env)
        return out

    def __repr__(self) -> str:
        parts = [f"{c}*{v}" if c != 1 else f"{v}" for v, c in self.terms]
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts)


@dataclass(frozen=True)
class FloorDiv:
    expr: Affine
    m: int

    def __repr__(self) -> str:
        return f"({self.expr}) floordiv {self.m}"


@dataclass(frozen=True)
class Mod:
    expr: Affine
    m: int

    def __repr__(self) -> str:
        return f"({self.expr}) mod {self.m}"


@dataclass(frozen=True)
class Clamp:
    """``min(max(expr, lo), hi)``; a bound of ``None`` does not limit (``S.min(a, b)`` is
    ``a - Clamp(a - b, 0, None)``)."""

    expr: Affine
    lo: int | None = None
    hi: int | None = None

    def __repr__(self) -> str:
        return f"clamp({self.expr}, {self.lo}, {self.hi})"


def _atom_eval(a, env):
    if isinstance(a, Var):
        return env[a]
    x = a.expr.eval(env)
    if isinstance(a, Clamp):
        lo = x if a.lo is None else np.maximum(x, a.lo)
        return lo if a.hi is None else np.minimum(lo, a.hi)
    return x // a.m if isinstance(a, FloorDiv) else x % a.m


def _atom_bounds(a) -> tuple[int, int]:
    if isinstance(a, Var):
        return 0, a.count - 1
    lo, hi = a.expr.bounds()
    if isinstance(a, Clamp):
        def cl(x):
            x = x if a.lo is None else max(x, a.lo)
            return x if a.hi is None else min(x, a.hi)
        return cl(lo), cl(hi)
    if isinstance(a, FloorDiv):
        return lo // a.m, hi // a.m
    return (lo % a.m, hi % a.m) if hi - lo < a.m and lo % a.m <= hi % a.m else (0, a.m - 1)


def affine(x) -> Affine:
    """Lift an int, a Var, an atom or an Affine to an Affine."""
    if isinstance(x, Affine):
        return x
    if isinstance(x, (Var, FloorDiv, Mod, Clamp)):
        return Affine(0, ((x, 1),))
    return Affine(int(x))


@dataclass(frozen=True)
class Lanes:
    """How many leading indices of a view's dim 0 hold data: ``clamp(total - start, 0,
    width)`` — the valid lanes of a vector, or the valid rows of a partial last tile."""

    total: int
    start: Affine
    width: int

    def eval(self, env):
        return np.clip(self.total - self.start.eval(env), 0, self.width)

    def sub(self, first: Affine | int, width: int) -> Lanes:
        """The lanes of a sub-vector that begins at lane ``first``."""
        return Lanes(self.total, self.start + first, width)


# -- buffers and views --------------------------------------------------------------------

@dataclass(frozen=True)
class Buffer:
    """A flat array of ``size`` elements in ``memory``. Parameters (``role`` in/out/inout)
    are the kernel's tensors; internal buffers (``role="internal"``) live on the unit.

    A constant (``role="const"``) is program data: ``data`` holds its ``size`` elements
    (the raw bytes, native byte order, of a ``dtype`` array); it sits in ``memory`` before
    the program starts and is never written (a C back end emits it as a ``static const``
    array). The LUT instructions read their table images from constants."""

    name: str
    memory: str
    dtype: np.dtype
    size: int
    role: str = "internal"
    slots: int = 1  # copies kept in memory (2 = double buffered)
    slot_len: int = 0  # elements per slot when views address slots explicitly, else 0
    address: int | None = None  # byte offset in its memory, when the front end places it
    data: bytes | None = field(default=None, repr=False)  # contents of a constant

    def __post_init__(self):
        if (self.role == "const") != (self.data is not None):
            raise ValueError(f"buffer {self.name!r}: a const buffer needs data, and only a "
                             f"const buffer has data (role {self.role!r})")
        if self.data is not None and len(self.data) != self.nbytes:
            raise ValueError(f"buffer {self.name!r}: data holds {len(self.data)} B, "
                             f"{self.size} x {self.dtype.name} take {self.nbytes} B")

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def values(self) -> np.ndarray:
        """The contents of a constant as a read-only ``dtype`` array of ``size`` elements."""
        if self.data is None:
            raise ValueError(f"buffer {self.name!r} ({self.role}) is not a constant")
        return np.frombuffer(self.data, self.dtype)


@dataclass(frozen=True)
class View:
    """Elements of ``buffer`` at ``layout.offset + offset(vars) + Σ idx·strides``. With
    ``cast``, the elements are read and written as ``layout.dtype`` (of the buffer's item
    size), their bytes unchanged: Torq's ``setElementType``."""

    buffer: Buffer
    layout: Layout
    offset: Affine = field(default_factory=Affine)
    cast: bool = False

    @property
    def shape(self) -> tuple[int, ...]:
        return self.layout.shape

    @property
    def dtype(self) -> np.dtype:
        return self.layout.dtype if self.cast else self.buffer.dtype

    @property
    def size(self) -> int:
        return self.layout.size

    def element_offsets(self) -> np.ndarray:
        """Offsets of the elements (row-major) relative to the symbolic base, as int64."""
        idx = np.zeros((), np.int64) + self.layout.offset
        for n, s in zip(self.layout.shape, self.layout.strides):
            idx = idx[..., None] + np.arange(n, dtype=np.int64) * s
        return idx.reshape(-1)

    def bounds(self) -> tuple[int, int]:
        """(lowest, one past highest) element touched over all values of the loop vars."""
        lo, hi = self.layout.footprint()
        olo, ohi = self.offset.bounds()
        if self.size == 0:
            return lo + olo, lo + olo
        return lo + olo, hi + ohi


# -- statements ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Loop:
    var: Var
    body: tuple[Stmt, ...]
    label: str = ""
    cores: bool = False  # one iteration per core of the target; var is the core id
    parallel: bool = False  # iterations independent: they may run at once on the cores


@dataclass(frozen=True)
class Copy:
    dst: View
    src: View
    engine: str
    valid: Lanes | None = None
    label: str = ""


@dataclass(frozen=True)
class Append:
    dst: View
    src: View
    engine: str
    cursor: str
    valid: Lanes | None = None
    label: str = ""


@dataclass(frozen=True)
class ResetCursor:
    cursor: str
    label: str = ""


@dataclass(frozen=True)
class Fill:
    dst: View
    value: int | float
    label: str = ""


@dataclass(frozen=True)
class Compute:
    """``dst = f(srcs)`` or, with ``acc``, ``dst = combine(dst, f(srcs))``. ``attrs`` are the
    instruction's constants (shift, clamp bounds, ...) as sorted (name, value) pairs."""

    unit: str
    op: str
    dst: View
    srcs: tuple[View, ...]
    acc: bool = False
    attrs: tuple[tuple[str, object], ...] = ()
    label: str = ""

    def attr(self, name: str):
        return dict(self.attrs)[name]

    def reads(self) -> list[View]:
        """The views the instruction reads: its sources, and its destination when it
        accumulates into it or scatters into part of it."""
        return list(self.srcs) + ([self.dst] if self.acc or self.op == "vscatter" else [])


@dataclass(frozen=True)
class Ptr:
    """A pointer argument: the address of ``view``'s first element."""

    view: View


@dataclass(frozen=True)
class Val:
    """A scalar argument: an index expression or a valid count."""

    expr: Affine | Lanes


@dataclass(frozen=True)
class Deref:
    """A scalar argument read from memory: the element ``view`` starts at."""

    view: View


@dataclass(frozen=True)
class Extern:
    """A function the program calls but does not describe: its C source for host back ends,
    a numpy ``reference`` for the simulator, and a ``cost`` in cycles for the timing model.
    ``args`` are (C type, name) pairs; ``parallel`` functions split their work over the
    target's cores (the reference gets ``core_id`` and ``core_count``)."""

    name: str
    args: tuple[tuple[str, str], ...]
    parallel: bool
    c_source: str = ""
    reference: object = None
    cost: object = None
    arg_type: str = ""

    def __getstate__(self) -> dict:
        """Pickle saves ``reference`` and ``cost`` by their module and name, so each must be
        a module-level function; a lambda or a nested function is refused here, naming it."""
        for what in ("reference", "cost"):
            fn = getattr(self, what)
            if fn is None:
                continue
            try:
                pickle.dumps(fn)
            except (pickle.PicklingError, AttributeError, TypeError) as exc:
                raise KernelError(
                    f"cannot pickle basic kernel {self.name!r}: its {what}= "
                    f"{getattr(fn, '__qualname__', type(fn).__name__)} is not a module-level "
                    f"function that pickle can find by name ({exc}); define it with def at "
                    f"the top level of an importable module") from exc
        return dict(self.__dict__)


@dataclass(frozen=True)
class Call:
    fn: Extern
    args: tuple[Ptr | Val | Deref, ...]
    label: str = ""


@dataclass(frozen=True)
class Branch:
    """``if cond: then else: orelse`` on a run-time value: ``cond`` views one ``bool``
    element (a lane of a register)."""

    cond: View
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()
    label: str = ""


@dataclass(frozen=True)
class Repeat:
    """``while cond: body`` on a run-time value: ``cond`` views one ``bool`` element, which
    the body recomputes."""

    cond: View
    body: tuple[Stmt, ...]
    label: str = ""


Stmt = Loop | Copy | Append | ResetCursor | Fill | Compute | Call | Branch | Repeat


def bodies(st) -> tuple[tuple[Stmt, ...], ...]:
    """The statement lists nested in ``st``: a loop's body, a branch's two arms."""
    if isinstance(st, (Loop, Repeat)):
        return (st.body,)
    if isinstance(st, Branch):
        return (st.then, st.orelse)
    return ()


def walk(body: tuple[Stmt, ...], loops: tuple[Var, ...] = ()
         ) -> Iterator[tuple[Stmt, tuple[Var, ...]]]:
    """Every statement of ``body`` at any depth in program order, with the loop variables
    enclosing it (a branch's arms run inside the same loops)."""
    for s in body:
        yield s, loops
        for arm in bodies(s):
            yield from walk(arm, loops + (s.var,) if isinstance(s, Loop) else loops)


def map_views(body: tuple[Stmt, ...], fn: Callable[[View], View]) -> tuple[Stmt, ...]:
    """``body`` with every view of every statement replaced by ``fn(view)``: the operands
    of copies, appends, fills and instructions, the pointer and dereferenced arguments of
    calls, in loop bodies at any depth. Everything else (loops' variables and flags, labels,
    lanes, attributes) is kept."""
    def arg(a):
        return a if isinstance(a, Val) else replace(a, view=fn(a.view))

    def stmt(st):
        if isinstance(st, Loop):
            return replace(st, body=map_views(st.body, fn))
        if isinstance(st, Branch):
            return replace(st, cond=fn(st.cond), then=map_views(st.then, fn),
                           orelse=map_views(st.orelse, fn))
        if isinstance(st, Repeat):
            return replace(st, cond=fn(st.cond), body=map_views(st.body, fn))
        if isinstance(st, (Copy, Append)):
            return replace(st, dst=fn(st.dst), src=fn(st.src))
        if isinstance(st, Fill):
            return replace(st, dst=fn(st.dst))
        if isinstance(st, Compute):
            return replace(st, dst=fn(st.dst), srcs=tuple(fn(v) for v in st.srcs))
        if isinstance(st, Call):
            return replace(st, args=tuple(arg(a) for a in st.args))
        if isinstance(st, ResetCursor):
            return st
        raise TypeError(f"map_views: {type(st).__name__} is not an IR statement")
    return tuple(stmt(st) for st in body)


def map_buffers(body: tuple[Stmt, ...], fn: Callable[[Buffer], Buffer]) -> tuple[Stmt, ...]:
    """``body`` with the buffer of every view replaced by ``fn(buffer)`` (``map_views``)."""
    return map_views(body, lambda v: replace(v, buffer=fn(v.buffer)))


@dataclass(frozen=True, repr=False)
class Program:
    """A kernel lowered to the IR: parameters, internal buffers, body, target, attributes.
    ``print(prog)`` shows it as indented text (``npukit.ir_text``); ``repr`` is one line.
    ``bounds`` holds ``(parameter, lo, hi)``: every value of that parameter must lie in
    ``lo..hi`` (a basic kernel's shift count), which ``Program.run`` checks before any back
    end runs."""

    name: str
    target: object  # npukit.machine.Target
    params: tuple[tuple[Buffer, Layout], ...]  # each parameter with the layout it is given as
    buffers: tuple[Buffer, ...]
    body: tuple[Stmt, ...]
    attrs: tuple[tuple[str, object], ...] = ()
    source: str = ""
    bounds: tuple[tuple[str, int, int], ...] = ()

    def __str__(self) -> str:
        return _RENDERERS["text"](self)

    def __repr__(self) -> str:
        count = sum(1 for _ in self.walk())
        return (f"<Program {self.name!r} for {self.target.name}: {len(self.params)} parameters, "
                f"{len(self.buffers)} buffers, {count} statements; print() shows the IR>")

    def __getstate__(self) -> dict:
        """The fields, without what a back end keeps on the program (a compiled handle)."""
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def param(self, name: str) -> tuple[Buffer, Layout]:
        for b, lay in self.params:
            if b.name == name:
                return b, lay
        raise KeyError(name)

    def walk(self) -> Iterator[tuple[Stmt, tuple[Var, ...]]]:
        """Every statement in program order with the loop variables enclosing it."""
        return walk(self.body)

    def transfers(self):
        """One ``npukit.Transfer`` per data flow (``npukit.transfers``)."""
        return _RENDERERS["transfers"](self)

    def run(self, backend: str = "sim", **arrays):
        """Run on ``backend`` ("sim": the simulator with its cycle model; "c": the generated
        C) with one array per parameter by name, outputs written in place; returns a
        ``Result`` (``outputs``, ``cycles``, ``report``, ``wall_time``; docs/kernel-language.md)."""
        b = _BACKENDS.get(backend)
        if b is None:
            raise NpukitError(f"unknown backend {backend!r}; use "
                              f"{' or '.join(map(repr, _BACKENDS))}")
        return b.run(self, arrays)

    def compile(self, backend: str = "c", *, fuse: bool = True):
        """This program compiled for ``backend`` ("c"): a handle to call as ``fn(**arrays)``
        or ``fn(a, b, ...)`` in parameter order, with less overhead per call than ``run``
        (``npukit.c.runtime.Compiled``); kept for the life of the program."""
        b = _BACKENDS.get(backend)
        if b is None or b.compile is None:
            compilers = " or ".join(repr(n) for n, c in _BACKENDS.items() if c.compile)
            raise NpukitError(f"compile {self.name}: backend {backend!r} has nothing to "
                              f"compile; use {compilers} (or run on the simulator with "
                              f"prog.run('sim', ...))")
        return b.compile(self, fuse)

    def c_source(self) -> str:
        """The program as one C99 translation unit (``npukit.c.c_source``)."""
        return _RENDERERS["c_source"](self)


# -- back ends and renderers --------------------------------------------------------------
# The IR imports nothing above it. The modules that run a program and render it register
# themselves here when npukit is imported (npukit/__init__.py imports them all), so the
# methods of Program work whichever module a user imports first.

@dataclass(frozen=True)
class Backend:
    """What ``Program.run(name, ...)`` calls: ``run(prog, arrays)`` returns a
    ``npukit.Result``; a back end that compiles also has ``compile(prog, fuse)``, the
    handle ``Program.compile`` returns."""

    run: Callable
    compile: Callable | None = None


_BACKENDS: dict[str, Backend] = {}
_RENDERERS: dict[str, Callable] = {}


def register_backend(name: str, run: Callable, compile: Callable | None = None) -> None:
    """Make ``name`` a back end of ``Program.run`` (and of ``Program.compile`` when it has
    ``compile``)."""
    _BACKENDS[name] = Backend(run, compile)


def register_renderer(kind: str, fn: Callable) -> None:
    """Make ``fn(prog)`` what a Program gives as ``kind``: ``"text"`` (``str(prog)``),
    ``"c_source"`` (``prog.c_source()``) or ``"transfers"`` (``prog.transfers()``)."""
    _RENDERERS[kind] = fn


def iteration_space(loops: tuple[Var, ...]) -> dict[Var, np.ndarray]:
    """Every point of a loop nest in row-major order: ``{var: int64 array}`` (memory grows
    with the nest: see ``iteration_chunks``)."""
    counts = [v.count for v in loops]
    grids = np.indices(counts, dtype=np.int64).reshape(len(counts), -1) if counts else None
    return {v: grids[k] for k, v in enumerate(loops)} if counts else {}


def iteration_chunks(loops: tuple[Var, ...], chunk: int = 1 << 16) -> Iterator[dict]:
    """The points of a loop nest in row-major order, at most ``chunk`` at a time: an
    iterator of ``{var: int64 array}``, so memory stays bounded whatever the trip counts."""
    total = points(loops)
    if not loops:
        yield {}
        return
    counts = tuple(v.count for v in loops)
    for k in range(0, total, chunk):
        idx = np.unravel_index(np.arange(k, min(k + chunk, total), dtype=np.int64), counts)
        yield dict(zip(loops, idx))


def points(loops: tuple[Var, ...]) -> int:
    return math.prod(v.count for v in loops)
