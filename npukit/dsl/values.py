"""The values a Compass DSL kernel computes with while it is traced (``npukit.dsl.trace``
says how a kernel becomes IR):

- ``Index``: a run-time integer, an ``ir.Affine`` index expression;
- ``Scalar``: a typed constant known at build time, computed with the type's rounding;
- ``Vec``: a vector value in an internal buffer of the target's ``vreg`` memory;
- ``Ptr``: a pointer into a tensor, an ``S.alloc`` buffer or an ``S.alloc_const`` table.

Vectors and pointers record their operations on the tracer of the kernel being built
(``tracer()``)."""

from __future__ import annotations

import sys

import numpy as np

from .. import arith, ir
from ..dtypes import is_float
from ..errors import DTypeError, KernelError, ZeroDivisorError
from ..floats import to_float
from ..layout import Layout
from .types import DType

# the tracers of the kernels being built, innermost last (npukit.dsl.kernel pushes them)
_current: list = []


def tracer():
    """The ``Tracer`` of the kernel being built; ``KernelError`` outside ``S.build``."""
    if not _current:
        raise KernelError("this Compass DSL operation only runs inside a kernel being built "
                          "(npukit.dsl.build(kernel, ...)); it has no meaning on the host")
    return _current[-1]


# -- run-time integers -------------------------------------------------------------------

def as_affine(x, what: str = "index") -> ir.Affine:
    """An int, ``Index`` or integer ``Scalar`` as an index expression."""
    if isinstance(x, Index):
        return x.expr
    if isinstance(x, Scalar) and x.type.elem.kind in "iu":
        return ir.affine(int(x.value))
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise KernelError(f"{what}: expected an integer (a number, the local id or a loop "
                          f"variable), got {_describe(x)}")
    return ir.affine(int(x))


def index(a: ir.Affine) -> int | Index:
    """``a`` as a plain int when it is constant, else as an ``Index``."""
    return a.const if not a.terms else Index(a)


def imin(a, b):
    ea, eb = as_affine(a, "S.min"), as_affine(b, "S.min")
    if not ea.terms and not eb.terms:
        return min(ea.const, eb.const)
    d = ea - eb  # min(a, b) = a - clamp(a - b, 0, inf)
    return index(ea - _clamp_atom(d, 0, None))


def imax(a, b):
    ea, eb = as_affine(a, "S.max"), as_affine(b, "S.max")
    if not ea.terms and not eb.terms:
        return max(ea.const, eb.const)
    return index(eb + _clamp_atom(ea - eb, 0, None))


def _clamp_atom(e: ir.Affine, lo, hi) -> ir.Affine:
    """``clamp(e, lo, hi)`` as an index expression, folded when ``e``'s range allows."""
    elo, ehi = e.bounds()
    if (lo is None or elo >= lo) and (hi is None or ehi <= hi):
        return e
    if hi is not None and elo >= hi:
        return ir.affine(hi)
    if lo is not None and ehi <= lo:
        return ir.affine(lo)
    return ir.affine(ir.Clamp(e, lo, hi))


def ceildiv(a, b):
    """``ceil(a / b)`` for a positive constant ``b``."""
    ea, eb = as_affine(a, "S.ceildiv"), as_affine(b, "S.ceildiv")
    if not eb.terms and eb.const == 0:
        raise ZeroDivisorError(f"S.ceildiv({a}, 0): The 2nd arg can't be zero.")
    if eb.terms or eb.const <= 0:
        raise KernelError(f"S.ceildiv({a}, {b}): the divisor must be a positive constant")
    return index((ea + (eb.const - 1)) // eb.const) if ea.terms else -(-ea.const // eb.const)


class Index:
    """A run-time integer of a kernel (see the module docstring)."""

    __slots__ = ("expr",)

    def __init__(self, expr: ir.Affine):
        self.expr = expr

    def __add__(self, o):
        return NotImplemented if isinstance(o, (Ptr, Vec)) else \
            index(self.expr + as_affine(o, "+"))

    __radd__ = __add__

    def __sub__(self, o):
        return index(self.expr - as_affine(o, "-"))

    def __rsub__(self, o):
        return index(as_affine(o, "-") - self.expr)

    def __neg__(self):
        return index(-self.expr)

    def __mul__(self, o):
        k = as_affine(o, "*")
        if k.terms:
            raise KernelError(f"({self}) * ({o}): a product of two run-time integers is not an "
                              f"index expression npukit can track; multiply by a constant")
        return index(self.expr * k.const)

    __rmul__ = __mul__

    def __floordiv__(self, o):
        k = as_affine(o, "//")
        if k.terms or k.const <= 0:
            raise KernelError(f"({self}) // ({o}): divide by a positive constant")
        return index(self.expr // k.const)

    def __mod__(self, o):
        k = as_affine(o, "%")
        if k.terms or k.const <= 0:
            raise KernelError(f"({self}) % ({o}): the modulus must be a positive constant")
        return index(self.expr % k.const)

    def __truediv__(self, o):
        raise KernelError(f"({self}) / ({o}): a run-time integer divides with // or "
                          f"S.ceildiv")

    __rtruediv__ = __truediv__

    def _no_value(self, *_):
        raise KernelError(f"the run-time integer {self} has no value at build time: it cannot "
                          f"steer Python (int(), list indices); use S.min, S.max, S.clip or "
                          f"masks instead")

    __bool__ = __index__ = __int__ = __float__ = _no_value

    def _test(self, o, fn, op: str) -> bool:
        """A comparison steering ``if``/``while``: decided at build time when it comes out
        the same on every TEC and iteration that runs, else a ``KernelError``."""
        if not isinstance(o, (Index, int, np.integer, Scalar)):
            return NotImplemented
        tr = tracer()
        env, n = tr.points[-1]
        diff = self.expr - as_affine(o, op)
        got = np.broadcast_to(fn(np.asarray(diff.eval(env)), 0), (n,))
        if n and got.any() != got.all():
            if set(diff.vars) == {tr.core_var}:
                raise TecCondition(f"`{self} {op} {o}` depends on the local id")
            raise KernelError(f"`{self} {op} {o}` is true on some TECs or iterations and false "
                              f"on others: npukit decides a run-time condition at build time, "
                              f"so it must be the same on all of them; use masks, S.min, "
                              f"S.max or S.clip")
        return bool(got.all()) if n else False

    def __lt__(self, o):
        return self._test(o, np.less, "<")

    def __le__(self, o):
        return self._test(o, np.less_equal, "<=")

    def __gt__(self, o):
        return self._test(o, np.greater, ">")

    def __ge__(self, o):
        return self._test(o, np.greater_equal, ">=")

    def __eq__(self, o):
        return self._test(o, np.equal, "==")

    def __ne__(self, o):
        return self._test(o, np.not_equal, "!=")

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return str(self.expr)


class TecCondition(KernelError):
    """A condition that differs between TECs only: ``npukit.dsl.kernel`` then traces the
    kernel once per TEC, with the local id a constant."""


# -- build-time typed scalars ------------------------------------------------------------

class Scalar:
    """A typed constant (``S.fp32(510)``); arithmetic rounds to its type."""

    __slots__ = ("type", "value")

    def __init__(self, type_: DType, value):
        self.type = type_
        self.value = _convert(value, type_.element_of, "scalar")

    def _other(self, o, what: str):
        if isinstance(o, Scalar):
            if o.type != self.type:
                raise DTypeError(f"{what}: scalar type mismatch: {self.type} and {o.type}")
            return o.value
        if isinstance(o, (int, float, np.number, bool)):
            return _convert(o, self.type, what)
        return None

    def _op(self, o, fn, what: str, flip: bool = False):
        if isinstance(o, Scalar) and o.type != self.type and np.bool_ not in (o.type.elem,
                                                                            self.type.elem):
            # the Compass DSL's rule: both converted to the type they meet in (int8 and
            # float16 meet in float16), as S.cast converts
            t = _operators().meet(self.type, o.type)
            return self.converted(t)._op(o.converted(t), fn, what, flip)
        t = _operators().literal_meet(self.type, o)
        if t is not None and t != self.type:  # a number that moves the type (S.u8(9) + 300)
            return self.converted(t)._op(o, fn, what, flip)
        v = self._other(o, what)
        if v is None:
            return NotImplemented
        a, b = (v, self.value) if flip else (self.value, v)
        with np.errstate(all="ignore"):
            out = np.asarray(fn(np.asarray(a), np.asarray(b)))
        if self.type.elem.kind in "iu":
            return Scalar(self.type, arith.wrap_to(out.astype(np.int64), self.type.elem)[()])
        return Scalar(self.type, out.astype(self.type.elem)[()])

    def converted(self, t: DType) -> Scalar:
        """This value as a ``t`` scalar, as ``S.cast`` converts it."""
        return Scalar(t, arith.vec_cast(np.array([self.value]), t.elem, False)[0])

    def __add__(self, o):
        return self._op(o, np.add, "+")

    def __radd__(self, o):
        return self._op(o, np.add, "+", True)

    def __sub__(self, o):
        return self._op(o, np.subtract, "-")

    def __rsub__(self, o):
        return self._op(o, np.subtract, "-", True)

    def __mul__(self, o):
        return self._op(o, np.multiply, "*")

    def __rmul__(self, o):
        return self._op(o, np.multiply, "*", True)

    def __truediv__(self, o):
        return self._op(o, np.divide, "/")

    def __rtruediv__(self, o):
        return self._op(o, np.divide, "/", True)

    def __neg__(self):
        return Scalar(self.type, -self.value)

    def __float__(self):
        return float(self.value)

    def __int__(self):
        return int(self.value)

    def _cmp(self, o, fn):
        v = self._other(o, "comparison")
        return NotImplemented if v is None else bool(fn(self.value, v))

    def __lt__(self, o):
        return self._cmp(o, np.less)

    def __le__(self, o):
        return self._cmp(o, np.less_equal)

    def __gt__(self, o):
        return self._cmp(o, np.greater)

    def __ge__(self, o):
        return self._cmp(o, np.greater_equal)

    def __eq__(self, o):
        return self._cmp(o, np.equal)

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"{self.type}({self.value})"


class ParamScalar(Scalar):
    """A kernel's scalar parameter (``B: S.int16``): npukit specialises the kernel for its
    value, but in the Compass DSL it is a variable, which meets vector lanes by its type."""

    __slots__ = ()


class ParamInt(int):
    """A kernel's ``S.i32`` parameter: a plain int to Python (it may steer ``range`` and
    ``if``: npukit specialises the kernel for its value), marked so the builtins that take
    only constants in the Compass DSL, where it is a variable, can refuse it
    (``S.vreplic``). Arithmetic on it gives plain ints."""

    __slots__ = ()


def _convert(value, type_: DType, what: str):
    """A Python or numpy number as a value of ``type_``'s element type: floats round to
    nearest even; an integer type takes only integers it can hold."""
    dt = type_.elem
    if isinstance(value, Scalar):
        value = value.value
    if dt == np.bool_:
        if not isinstance(value, (bool, np.bool_)):
            raise DTypeError(f"{what}: a mask lane is True or False, got {value!r}")
        return np.bool_(value)
    if is_float(dt):
        return to_float(np.asarray(value), dt)[()]
    if isinstance(value, (float, np.floating)) and not float(value).is_integer():
        raise DTypeError(f"{what}: {value!r} is not an integer, so it has no {dt.name} "
                         f"value; cast it with S.cast")
    info = np.iinfo(dt)
    if not info.min <= int(value) <= info.max:
        raise DTypeError(f"{what}: {value!r} does not fit {dt.name} "
                         f"({info.min}..{info.max})")
    return dt.type(int(value))


def differ_in_sign(a: DType, b: DType) -> bool:
    """``a`` and ``b`` are integer types alike but for their sign (``int8x32``,
    ``uint8x32``)."""
    return a.lanes == b.lanes and a.elem.itemsize == b.elem.itemsize and \
        {a.elem.kind, b.elem.kind} == {"i", "u"}


def sign_note(a: DType, b: DType) -> str:
    """For a message about types ``a`` and ``b``: the Compass DSL's words when they differ
    only in sign, else nothing."""
    return ". The sign of operands is different: cast one with S.cast" \
        if differ_in_sign(a, b) else ""


class BroadcastError(DTypeError):
    """A scalar parameter whose type no lane type of the vector holds: refused by its type
    alone, whatever its value, so ``BuildManager.build`` finds it before the call."""


def check_immediate(value, like: DType, what: str) -> None:
    """An integer number meeting integer lanes must fit them, signed or unsigned: ``300``
    meets no 8-bit lanes; a scalar parameter's type must fit them (an ``S.int16``
    parameter meets no 8-bit lanes): the Compass DSL refuses both with these words."""
    if isinstance(value, ParamScalar) and like.elem.kind in "iu" and \
            value.type.elem.kind in "iu":
        got = np.iinfo(value.type.elem)
        if not any(np.iinfo(t.elem).min <= got.min and got.max <= np.iinfo(t.elem).max
                   for t in (like.with_int(), like.with_uint())):
            raise BroadcastError(f'{what}: the {value.type} parameter fits no '
                                 f'{like.bits}-bit lane. Can\'t broadcast "{value.type}" to '
                                 f'any of "({like.with_int()}, {like.with_uint()})".')
    if like.elem.kind not in "iu" or not isinstance(value, (int, np.integer)) or \
            isinstance(value, (bool, np.bool_)):
        return
    bits = 8 * like.elem.itemsize
    if not -2 ** (bits - 1) <= int(value) < 2 ** bits:
        raise DTypeError(f'{what}: {value} fits no {bits}-bit lane, signed or unsigned. '
                         f'Can\'t broadcast "{value}" to any of "({like.with_int()}, '
                         f'{like.with_uint()})".')


# -- vectors and pointers ----------------------------------------------------------------

_rules = []  # npukit.dsl.operators, the operators' type rules: set by register_operators


def register_operators(module) -> None:
    """Make ``module`` (``npukit.dsl.operators``, which imports this module and therefore
    cannot be imported by it) compute the vectors' Python operators."""
    _rules[:] = [module]


def _operators():
    return _rules[0]


_pointer_casts = []  # npukit.dsl.pointers.CastPtr: set by register_pointer_cast


def register_pointer_cast(cls) -> None:
    """Make ``cls(base, type)`` what ``ptr.as_ptr`` of another element type gives
    (``npukit.dsl.pointers``, which imports this module and therefore cannot be imported
    by it)."""
    _pointer_casts[:] = [cls]


class Vec:
    """A vector value: a register of the target's ``vreg`` memory (see the module
    docstring). Arithmetic operators and comparisons are the Compass DSL's."""

    __slots__ = ("buf", "type", "loops")

    def __init__(self, buf: ir.Buffer, type_: DType, loops: tuple[int, ...]):
        self.buf, self.type, self.loops = buf, type_, loops

    @property
    def view(self) -> ir.View:
        return ir.View(self.buf, Layout((self.type.lanes,), self.type.elem))

    @property
    def dtype(self) -> DType:
        return self.type

    @property
    def addr(self) -> Ptr:
        """The register's address, for the builtins that write through a pointer
        (``S.vmml(acc.addr, x, y)`` writes into ``acc``)."""
        return Ptr(self.buf, self.type, ir.affine(0), "private", self.buf.name)

    def __getitem__(self, i):
        return tracer().lane(self, i)

    def __setitem__(self, i, value):
        tracer().set_lane(self, i, value)

    def __add__(self, o):
        return _operators().arith("vadd", self, o, "+")

    def __radd__(self, o):
        return _operators().arith("vadd", o, self, "+")

    def __sub__(self, o):
        return _operators().arith("vsub", self, o, "-")

    def __rsub__(self, o):
        return _operators().arith("vsub", o, self, "-")

    def __mul__(self, o):
        return _operators().arith("vmul", self, o, "*")

    def __rmul__(self, o):
        return _operators().arith("vmul", o, self, "*")

    def __truediv__(self, o):
        return _operators().arith("vdiv", self, o, "/")

    def __rtruediv__(self, o):
        return _operators().arith("vdiv", o, self, "/")

    def __floordiv__(self, o):
        return _operators().integer("vquot", self, o, "//")

    def __rfloordiv__(self, o):
        return _operators().integer("vquot", o, self, "//")

    def __mod__(self, o):
        return _operators().integer("vrem", self, o, "%")

    def __rmod__(self, o):
        return _operators().integer("vrem", o, self, "%")

    def __pow__(self, o):
        return _operators().power(self, o)

    def __rpow__(self, o):
        return _operators().power(o, self)

    def __lshift__(self, o):
        return _operators().shift("vshl", self, o, "<<")

    def __rlshift__(self, o):
        return _operators().shift("vshl", o, self, "<<")

    def __rshift__(self, o):
        return _operators().shift("vshr", self, o, ">>")

    def __rrshift__(self, o):
        return _operators().shift("vshr", o, self, ">>")

    def __neg__(self):
        return tracer().unary("vneg", self, "-")

    def __and__(self, o):
        return tracer().logic("vand", *_operators().promoted(self, o), "&")

    __rand__ = __and__

    def __or__(self, o):
        return tracer().logic("vor", *_operators().promoted(self, o), "|")

    __ror__ = __or__

    def __xor__(self, o):
        return tracer().logic("vxor", *_operators().promoted(self, o), "^")

    __rxor__ = __xor__

    def __invert__(self):
        return tracer().logic("vnot", self, None, "~")

    def __lt__(self, o):
        return tracer().compare("lt", *_operators().promoted(self, o))

    def __le__(self, o):
        return tracer().compare("le", *_operators().promoted(self, o))

    def __gt__(self, o):
        return tracer().compare("gt", *_operators().promoted(self, o))

    def __ge__(self, o):
        return tracer().compare("ge", *_operators().promoted(self, o))

    def __eq__(self, o):
        return tracer().compare("eq", *_operators().promoted(self, o))

    def __ne__(self, o):
        return tracer().compare("ne", *_operators().promoted(self, o))

    __hash__ = object.__hash__

    def __bool__(self):
        caller = sys._getframe(1).f_code
        if self.type.lanes == 1 and caller.co_filename.startswith("<"):
            # The kernel was written where Python keeps no source (a REPL, ``python -c``,
            # ``python -``): its ``if`` statements could not be rewritten to trace both arms.
            raise KernelError(
                f"`if` on a run-time value in {caller.co_name}() ({caller.co_filename}): "
                f"npukit traces both arms of such an `if` by rewriting the kernel's source, "
                f"and Python keeps no source for code typed in an interactive session, "
                f"`python -c` or `python -`; put the kernel in a .py file (run or import it), "
                f"or select lanes with S.vsel instead of if")
        raise KernelError(f"a {self.type} vector has no truth value at build time: select "
                          f"lanes with a mask (S.vsel, mask=...) instead of if/and/or")

    def __repr__(self) -> str:
        return f"<{self.type} {self.buf.name}>"


class Ptr:
    """A pointer: ``buf`` (the tensor or buffer), ``type`` (what it points at: a scalar or
    a vector type), ``offset`` in elements of ``buf``, ``scope``; ``ptr + k`` steps ``k``
    values of ``type``, ``ptr[i]`` loads the ``i``-th vector, ``ptr[i] = v`` stores it."""

    __slots__ = ("buf", "type", "offset", "scope", "name")

    def __init__(self, buf: ir.Buffer, type_: DType, offset: ir.Affine, scope: str, name: str):
        self.buf, self.type, self.offset, self.scope, self.name = buf, type_, offset, scope, name

    @property
    def dtype(self) -> DType:
        return self.type

    def _moved(self, k, sign: int) -> Ptr:
        step = as_affine(k, "pointer arithmetic") * (sign * self.type.lanes)
        return Ptr(self.buf, self.type, self.offset + step, self.scope, self.name)

    def __add__(self, k):
        return self._moved(k, 1)

    __radd__ = __add__

    def __sub__(self, k):
        return self._moved(k, -1)

    def _addresses(self, o, what: str) -> tuple:
        """The two pointers' places in their one tensor or buffer (ints, or ``Index``es
        known at run time), to compare as the Compass DSL compares addresses."""
        if not isinstance(o, Ptr) or o.buf is not self.buf:
            raise KernelError(f"{self.name} {what} {_describe(o)}: npukit compares pointers "
                              f"into one tensor or buffer")
        return index(self.offset), index(o.offset)

    def __lt__(self, o):
        a, b = self._addresses(o, "<")
        return a < b

    def __le__(self, o):
        a, b = self._addresses(o, "<=")
        return a <= b

    def __gt__(self, o):
        a, b = self._addresses(o, ">")
        return a > b

    def __ge__(self, o):
        a, b = self._addresses(o, ">=")
        return a >= b

    def __eq__(self, o):
        if not isinstance(o, Ptr):
            return NotImplemented
        a, b = self._addresses(o, "==")
        return a == b

    def __ne__(self, o):
        if not isinstance(o, Ptr):
            return NotImplemented
        a, b = self._addresses(o, "!=")
        return a != b

    __hash__ = object.__hash__

    def as_ptr(self, dtype):
        """The same address as a pointer to ``dtype`` values: of the same element type a
        pointer (``lsram_ptr.as_ptr("float16")`` on a ``float16x16`` buffer), of another a
        ``npukit.dsl.pointers.CastPtr`` reading the elements' bytes (``as_ptr("u8x32")``
        of an ``int32`` buffer), as a C pointer cast."""
        t = DType(dtype)
        if t.elem != self.type.elem:
            return _pointer_casts[0](Ptr(self.buf, self.type.element_of, self.offset,
                                         self.scope, self.name), t)
        return Ptr(self.buf, t, self.offset, self.scope, self.name)

    def addr_of(self, k) -> Ptr:
        """``self + k``: the address of the ``k``-th value (a buffer's ``addr_of``)."""
        return self + k

    def __getitem__(self, i):
        return tracer().load(self, i)

    def __setitem__(self, i, value):
        tracer().store(self, i, value)

    def __repr__(self) -> str:
        return f"<{self.scope} {self.type}* {self.name} + {self.offset}>"


def make_value(type_: DType, value):
    """``S.<type>(value)``: a vector with every lane ``value``, a typed scalar, or (for
    ``S.i32``) an integer (run-time integers stay run-time); a vector or tuple is
    ``npukit.dsl.conversion``'s."""
    if type_.is_vector:
        return tracer().splat(type_, value)
    if type_ == "int32" and isinstance(value, (int, np.integer, Index)):
        return index(as_affine(value, "S.i32"))
    if isinstance(value, Index):
        raise KernelError(f"S.{type_}({value}): a run-time integer is an int32 index; only "
                          f"S.i32 takes it")
    return Scalar(type_, value)


def _describe(x) -> str:
    if isinstance(x, Vec):
        return f"a {x.type} vector"
    if isinstance(x, Ptr):
        return f"a pointer to {x.type}"
    return f"{type(x).__name__} {x!r}"
