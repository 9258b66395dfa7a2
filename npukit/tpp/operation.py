"""``TensorOperation``: a loop nest over typed dimensions around TPP primitives.

A dimension has a type (``c``: in every tensor, ``m``: in in0 and out, ``n``: in in1 and
out, ``k``: in in0 and in1, summed), an execution type (``seq``: a loop, ``prim``: inside
the primitive, ``shared``: a loop whose iterations the host's threads share), a size and
a stride (in elements) in each of in0, in1 and out. The loops run in the order the
dimensions are given, outermost first, around one call of the main primitive on the block
the prim dimensions span; the first touch runs on an output block before its first main
call, the last touch after its last one (after the last step of every ``k`` loop), as in
the TPP text's ``TensorOperation``.

The checks are the TPP text's (each an ``NpukitError`` subclass named after its
``error_t``): the dtype, the primitive allowed for each touch, the number of prim
dimensions the main primitive needs (gemm 3, brgemm 4, unary and binary 2), no
transposition for binary primitives; and the ones its loop semantics needs: equal list
lengths, sizes of at least 1, strides of at least 0, ``k`` dimensions only for gemm,
brgemm and the reductions (one prim ``k``), never ``shared``, with out stride 0; no output
element written by two iterations; prim dimensions the primitive can address (unit stride
along one of them, see ``docs/tpp.md``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import ir
from ..c.threads import host_threads
from ..dtypes import dtype as _dtype
from ..errors import DTypeError
from ..layout import Layout
from ..machine import target as _target
from .errors import (
    OperationNotSupportedError,
    WrongDimensionError,
    WrongDtypeError,
    WrongExecTypeError,
    WrongPrimitiveError,
)
from .formulas import LIBXSMM_BINARY, LIBXSMM_REDUCE, LIBXSMM_UNARY
from .primitives import BINARY, REDUCE

DIM_TYPES = ("c", "m", "n", "k")
EXEC_TYPES = ("seq", "prim", "shared")
DTYPES = ("float32", "bfloat16", "float16")
SIGMOIDS = ("fast_sigmoid", "taylor_sigmoid", "interp_sigmoid")
# The TPP text's allowed primitives per touch (section 7.3.3), with its sigmoids (7.4.2)
# added where an activation belongs: as the main primitive and as the last touch.
# "bias": out's block loaded from a fourth tensor, ``bias``, read through ``strides_bias``
# (libxsmm's identity with a broadcast: a stride 0 repeats the bias along that dimension).
# libxsmm's kinds beyond the text's (npukit.tpp.formulas) join them where their kind
# belongs: every unary one as a touch or the main primitive, every binary one and every
# reduction (over its one k dimension, a prim one) as the main.
FIRST_TOUCH = ("none", "zero", "bias", "relu", "square", "reciprocal", "increment",
               "decrement") + tuple(LIBXSMM_UNARY)
MAIN = ("none", "identity", "brgemm", "gemm", "add", "sub", "mul", "div", "min", "max") + \
    SIGMOIDS + tuple(LIBXSMM_UNARY) + tuple(LIBXSMM_BINARY) + tuple(LIBXSMM_REDUCE)
LAST_TOUCH = ("none", "relu", "square", "reciprocal", "increment", "decrement") + SIGMOIDS + \
    tuple(LIBXSMM_UNARY)
PRIM_COUNT = {"gemm": 3, "brgemm": 4}  # every other main: 2
_MAX_SIZE = 1 << 31
_MAX_STRIDE = 1 << 40


@dataclass(frozen=True)
class Dim:
    """One dimension: type, execution type, size and its stride in in0, in1, out and the
    bias of a ``bias`` first touch."""

    type: str
    exec: str
    size: int
    in0: int
    in1: int
    out: int
    bias: int = 0

    def stride(self, tensor: str) -> int:
        return getattr(self, tensor)


@dataclass(frozen=True)
class Roles:
    """Where the primitive's block comes from: dimension indices by role (``M``, ``N``
    for unary, binary and touches-only operations; ``m``, ``n``, ``k`` and ``br`` for
    gemm/brgemm), and how the primitive reads them. ``rows`` is the prim dimension along
    which out has unit stride (the rows of the touches' block), ``cols`` the other."""

    prims: tuple[tuple[str, int], ...]
    trans: bool = False  # unary main: out is the transposed block
    swap: bool = False  # gemm: computes C^T = B^T A^T (out has unit stride along n)
    reduce_cols: bool = False  # a reduction whose in0 has unit stride along the kept dim
    trans_a: bool = False
    trans_b: bool = False
    rows: int = -1
    cols: int = -1

    def __getitem__(self, role: str) -> int:
        return dict(self.prims)[role]


def dims_table(dims, bias: bool = False) -> str:
    """Dimensions as a table: index, type, execution type, size, strides (the bias's too
    with ``bias``)."""
    head = f"  {'dim':>3}  {'type':<4}  {'exec':<6}  {'size':>6}  {'in0':>7}  {'in1':>7}  " \
           f"{'out':>7}" + (f"  {'bias':>7}" if bias else "")
    return "\n".join([head] + [f"  {k:>3}  {d.type:<4}  {d.exec:<6}  {d.size:>6}  {d.in0:>7}  "
                                f"{d.in1:>7}  {d.out:>7}" + (f"  {d.bias:>7}" if bias else "")
                                for k, d in enumerate(dims)])


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _seq(name: str, value) -> tuple:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or \
            not hasattr(value, "__iter__"):
        raise WrongDimensionError(f"{name} must be a list or tuple, one entry per dimension; "
                                  f"got {value!r}")
    return tuple(value)


# The passes over an operation (npukit.tpp.optimizer: "optimize"; npukit.tpp.lower: "lower",
# "run") import this module; they register here when npukit.tpp is imported, so that this
# module imports neither of them.
_PASSES: dict[str, Callable] = {}


def register_pass(name: str, fn: Callable) -> None:
    """Make ``fn`` the operation's pass ``name`` (called by the modules that define them)."""
    _PASSES[name] = fn


class TensorOperation:
    """A tensor operation of the TPP tensor compiler (see the module docstring and
    ``docs/tpp.md``).

    >>> import numpy as np
    >>> op = TensorOperation(dtype="float32", prim_first="zero", prim_main="gemm",
    ...                      prim_last="relu", dim_types=("m", "n", "k"),
    ...                      exec_types=("prim", "prim", "prim"), dim_sizes=(4, 3, 2),
    ...                      strides_in0=(1, 0, 4), strides_in1=(0, 2, 1),
    ...                      strides_out=(1, 4, 0))
    >>> a = np.arange(8, dtype=np.float32) - 4   # 4 x 2, column-major
    >>> b = np.ones(6, np.float32)               # 2 x 3
    >>> c = np.full(12, np.nan, np.float32)      # 4 x 3
    >>> op(a, b, c)[:4].tolist()                 # relu(a[:, 0] + a[:, 1])
    [0.0, 0.0, 0.0, 2.0]
    """

    def __init__(self, dtype: str = "float32", prim_first: str = "none",
                 prim_main: str = "none", prim_last: str = "none", dim_types=(),
                 exec_types=(), dim_sizes=(), strides_in0=(), strides_in1=(),
                 strides_out=(), strides_bias=None, *, _history: tuple = ()):
        self.dtype = _check_dtype(dtype, prim_main)
        self.prim_first, self.prim_main, self.prim_last = _check_primitives(
            prim_first, prim_main, prim_last)
        if (strides_bias is None) != (prim_first != "bias"):
            raise WrongDimensionError("TensorOperation: strides_bias goes with "
                                      "prim_first='bias' (the bias tensor's strides), and "
                                      f"only with it; prim_first is {prim_first!r}")
        self.dims = _check_dims(dim_types, exec_types, dim_sizes, strides_in0, strides_in1,
                                strides_out, strides_bias)
        self.roles = _check_structure(self)
        self.history = _history  # (table before an optimize, its decisions) per optimize
        self._programs: dict[str, ir.Program] = {}
        self._last_call = None  # the arrays of the last call and their flat views

    # -- the TPP text's configuration, as given ----------------------------------------------

    @property
    def dim_types(self) -> tuple[str, ...]:
        return tuple(d.type for d in self.dims)

    @property
    def exec_types(self) -> tuple[str, ...]:
        return tuple(d.exec for d in self.dims)

    @property
    def dim_sizes(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.dims)

    @property
    def strides_in0(self) -> tuple[int, ...]:
        return tuple(d.in0 for d in self.dims)

    @property
    def strides_in1(self) -> tuple[int, ...]:
        return tuple(d.in1 for d in self.dims)

    @property
    def strides_out(self) -> tuple[int, ...]:
        return tuple(d.out for d in self.dims)

    @property
    def strides_bias(self) -> tuple[int, ...] | None:
        return tuple(d.bias for d in self.dims) if self.prim_first == "bias" else None

    def config(self) -> dict:
        """The constructor's arguments: ``TensorOperation(**op.config())`` rebuilds it."""
        return dict(dtype=self.dtype, prim_first=self.prim_first, prim_main=self.prim_main,
                    prim_last=self.prim_last, dim_types=self.dim_types,
                    exec_types=self.exec_types, dim_sizes=self.dim_sizes,
                    strides_in0=self.strides_in0, strides_in1=self.strides_in1,
                    strides_out=self.strides_out) | \
            ({"strides_bias": self.strides_bias} if self.prim_first == "bias" else {})

    @property
    def inputs(self) -> tuple[str, ...]:
        """The tensors the main primitive reads: ``("in0", "in1")``, ``("in0",)`` or ()."""
        if self.prim_main in ("gemm", "brgemm") or self.prim_main in BINARY:
            return ("in0", "in1")
        return () if self.prim_main == "none" else ("in0",)

    def extent(self, tensor: str) -> int:
        """Elements of ``tensor``'s flat buffer the operation touches: 1 + the largest
        offset."""
        return 1 + sum((d.size - 1) * d.stride(tensor) for d in self.dims)

    def flops(self) -> int:
        """Floating-point operations of the main primitive over the whole operation:
        2 per multiply-add of gemm/brgemm, 1 per output element otherwise."""
        points = math.prod(d.size for d in self.dims)
        if self.prim_main in ("gemm", "brgemm"):
            return 2 * points
        return points if self.prim_main != "none" else 0

    # -- showing it --------------------------------------------------------------------------

    def table(self) -> str:
        """The dimensions as a table: type, execution type, size and strides."""
        return dims_table(self.dims, self.prim_first == "bias")

    def __str__(self) -> str:
        title = f"TensorOperation {self.dtype}: first {self.prim_first}, main " \
                f"{self.prim_main}, last {self.prim_last}"
        parts = []
        for before, decisions in self.history:
            parts += ["before optimize:", before, "optimizer decisions:"] + \
                [f"  - {d}" for d in decisions] + ["after:"]
        return "\n".join([title] + parts + [self.table()])

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items())
        return f"TensorOperation({args})"

    # -- transformations ---------------------------------------------------------------------

    def optimize(self, threads: int | None = None, min_kernel_size: int = 16,
                 max_kernel_size: int | None = None) -> TensorOperation:
        """A new operation computing the same result faster: the TPP tensor compiler's
        optimizer (``npukit.tpp.optimizer``). Its decisions print with the operation."""
        return _PASSES["optimize"](self, threads=threads, min_kernel_size=min_kernel_size,
                        max_kernel_size=max_kernel_size)

    # -- the IR ------------------------------------------------------------------------------

    def program(self, target="torq") -> ir.Program:
        """The operation lowered to the IR for ``target`` (a name or a ``Target``): flat
        parameters in0/in1/out, loops for the seq and shared dimensions (shared ones
        ``parallel``), calls of the generated primitives; cached per target name."""
        key = target if isinstance(target, str) else target.name
        prog = self._programs.get(key)
        if prog is None:
            tgt = _target(target) if isinstance(target, str) else target
            prog = self._programs[key] = _PASSES["lower"](self, tgt)
        return prog

    def c_source(self, target="torq") -> str:
        """The C translation unit the C back end compiles for this operation."""
        return self.program(target).c_source()

    def __call__(self, in0, in1, out, bias=None) -> np.ndarray:
        """Run the operation on the C back end: ``in0``, ``in1``, ``out`` (and ``bias`` for
        a ``bias`` first touch) are any numpy arrays read as flat element buffers
        (contiguous, at least ``extent`` elements; an input the main primitive does not
        read may be None); ``out`` is written in place and returned."""
        return _PASSES["run"](self, in0, in1, out, bias)


# -- checks --------------------------------------------------------------------------------

def _check_dtype(dtype, main) -> str:
    try:  # a name or anything numpy reads as a dtype (np.float32, np.dtype("f4"), ...)
        name = None if dtype is None or isinstance(dtype, bool) else _dtype(dtype).name
    except (DTypeError, TypeError, ValueError):
        name = None
    if name not in DTYPES:
        raise WrongDtypeError(f"TensorOperation: dtype {dtype!r} is not supported; the TPP "
                              f"tensor compiler takes {', '.join(DTYPES)}")
    if name != "float32" and main not in ("gemm", "brgemm"):
        raise WrongDtypeError(f"TensorOperation: dtype {name} only for a gemm or brgemm main "
                              f"primitive (inputs {name}, float32 out); main {main!r} takes "
                              f"float32")
    return name


def _check_primitives(first, main, last) -> tuple[str, str, str]:
    for what, value, allowed in (("prim_first", first, FIRST_TOUCH),
                                 ("prim_main", main, MAIN), ("prim_last", last, LAST_TOUCH)):
        if not isinstance(value, str) or value not in allowed:
            raise WrongPrimitiveError(f"TensorOperation: {what} {value!r} is not allowed; the "
                                      f"TPP tensor compiler allows {', '.join(allowed)}")
    return first, main, last


def _check_dims(dim_types, exec_types, dim_sizes, s0, s1, so, sb=None) -> tuple[Dim, ...]:
    lists = {"dim_types": dim_types, "exec_types": exec_types, "dim_sizes": dim_sizes,
             "strides_in0": s0, "strides_in1": s1, "strides_out": so,
             "strides_bias": (0,) * len(_seq("dim_types", dim_types)) if sb is None else sb}
    lists = {k: _seq(k, v) for k, v in lists.items()}
    lengths = {k: len(v) for k, v in lists.items()}
    if len(set(lengths.values())) != 1 or lengths["dim_types"] == 0:
        raise WrongDimensionError(f"TensorOperation: every list needs one entry per dimension "
                                  f"(at least one); lengths {lengths}")
    dims = []
    for k, (t, e, n, a, b, c, z) in enumerate(zip(*lists.values())):
        if not isinstance(t, str) or t not in DIM_TYPES:
            raise WrongDimensionError(f"dimension {k}: type {t!r} is not one of "
                                      f"{', '.join(DIM_TYPES)}")
        if not isinstance(e, str) or e not in EXEC_TYPES:
            raise WrongExecTypeError(f"dimension {k} ({t}): execution type {e!r} is not one of "
                                     f"{', '.join(EXEC_TYPES)}")
        if not _is_int(n) or not 1 <= n <= _MAX_SIZE:
            raise WrongDimensionError(f"dimension {k} ({t}): size {n!r} must be an integer in "
                                      f"[1, 2^31]")
        for name, s in (("in0", a), ("in1", b), ("out", c), ("bias", z)):
            if not _is_int(s) or not 0 <= s <= _MAX_STRIDE:
                raise WrongDimensionError(f"dimension {k} ({t}): {name} stride {s!r} must be an "
                                          f"integer in [0, 2^40] (elements)")
        if t == "k" and z != 0 and n > 1:
            raise WrongDimensionError(f"dimension {k} (k): bias stride {z}, but the bias of "
                                      f"an output block cannot move along a summed dimension")
        dims.append(Dim(t, e, int(n), int(a), int(b), int(c), int(z)))
    return tuple(dims)


def _name(k: int, d: Dim) -> str:
    return f"dimension {k} ({d.type}, size {d.size})"


def _check_structure(op: TensorOperation) -> Roles:
    """The TPP text's structural checks and the loop semantics' ones; the prim roles."""
    main, dims = op.prim_main, op.dims
    gemm = main in ("gemm", "brgemm")
    summing = gemm or main in REDUCE  # k dimensions allowed
    prims = [k for k, d in enumerate(dims) if d.exec == "prim"]
    need = PRIM_COUNT.get(main, 2)
    if len(prims) != need:
        what = {"gemm": "3 (m, n, k)", "brgemm": "4 (m, n, and two k: batch-reduce, then k)"} \
            .get(main, "2 (the rows and columns of the block)")
        raise WrongExecTypeError(f"main primitive {main} needs exactly {what} prim dimensions; "
                                 f"got {len(prims)}: dimensions {prims}")
    for k, d in enumerate(dims):
        if d.type == "k" and not summing:
            raise WrongDimensionError(f"{_name(k, d)}: a k dimension sums products; main "
                                      f"primitive {main} has none (use c, m or n)")
        if d.type == "k" and d.exec == "shared":
            raise WrongExecTypeError(f"{_name(k, d)}: a k dimension must not be shared (threads "
                                     f"would add into the same output)")
        if d.type == "k" and d.out != 0 and d.size > 1:
            raise WrongDimensionError(f"{_name(k, d)}: out stride {d.out}, but out does not "
                                      f"move along a k dimension (stride 0)")
        if gemm and d.type == "m" and d.in1 != 0 and d.size > 1:
            raise WrongDimensionError(f"{_name(k, d)}: in1 stride {d.in1}, but in1 does not "
                                      f"move along an m dimension (stride 0)")
        if gemm and d.type == "n" and d.in0 != 0 and d.size > 1:
            raise WrongDimensionError(f"{_name(k, d)}: in0 stride {d.in0}, but in0 does not "
                                      f"move along an n dimension (stride 0)")
    _check_out_disjoint(dims)
    if main in REDUCE:
        return _reduce_roles(op, prims)
    return _gemm_roles(op, prims) if gemm else _block_roles(op, prims)


def _check_out_disjoint(dims: tuple[Dim, ...]) -> None:
    """No two iterations of the non-k dimensions may write the same output element
    (sufficient test: sorted by stride, each stride clears the extent of the ones inside)."""
    extent, inner = 0, None
    for k, d in sorted(((k, d) for k, d in enumerate(dims) if d.type != "k" and d.size > 1),
                       key=lambda x: x[1].out):
        if d.out <= extent:
            other = f" overlaps {_name(*inner)}" if inner else " is 0"
            raise WrongDimensionError(f"{_name(k, d)}: out stride {d.out}{other} (out reaches "
                                      f"{extent} elements along the dimensions inside): two "
                                      f"iterations would write the same output element")
        extent += (d.size - 1) * d.out
        inner = (k, d)


def _unit(d: Dim, tensor: str) -> bool:
    return d.size == 1 or d.stride(tensor) == 1


def _block_roles(op: TensorOperation, prims: list[int]) -> Roles:
    """Rows M and columns N of a unary, binary or touches-only block: every input has unit
    stride along M; out too, or (a unary main's transposition) along N."""
    dims, main = op.dims, op.prim_main
    p, q = prims
    pairs = [(mi, ni) for mi, ni in ((p, q), (q, p))
             if all(_unit(dims[mi], t) for t in op.inputs)]
    for mi, ni in pairs:
        if _unit(dims[mi], "out"):
            return Roles((("M", mi), ("N", ni)), rows=mi, cols=ni)
    for mi, ni in pairs:
        if op.inputs and _unit(dims[ni], "out"):
            if main in BINARY:
                raise OperationNotSupportedError(
                    f"Transposition for {main} primitive is not supported: out has unit "
                    f"stride along {_name(ni, dims[ni])}, the inputs along "
                    f"{_name(mi, dims[mi])}")
            return Roles((("M", mi), ("N", ni)), trans=True, rows=ni, cols=mi)
    tensors = ", ".join(op.inputs + ("out",))
    raise WrongDimensionError(
        f"prim dimensions {p} and {q} ({dims[p].type} {dims[p].size}, {dims[q].type} "
        f"{dims[q].size}): the {main} primitive reads column-major blocks, so {tensors} need "
        f"unit stride along one prim dimension, the same one for every input (out may use "
        f"the other for a unary main: a transposition); strides in0 "
        f"({dims[p].in0}, {dims[q].in0}), in1 ({dims[p].in1}, {dims[q].in1}), out "
        f"({dims[p].out}, {dims[q].out})")


def _reduce_roles(op: TensorOperation, prims: list[int]) -> Roles:
    """A reduction's block: its one k dimension (prim: the primitive reduces within a
    block) and the kept prim dimension, along which out has unit stride; in0 has unit
    stride along k (libxsmm's REDUCE_ROWS) or along the kept one (REDUCE_COLS). The
    touches' block is the out vector: ``cols`` is -1."""
    dims, main = op.dims, op.prim_main
    ks = [k for k in prims if dims[k].type == "k"]
    loops = [k for k, d in enumerate(dims) if d.type == "k" and k not in prims and d.size > 1]
    if len(ks) != 1 or loops:
        raise WrongExecTypeError(f"main primitive {main} reduces one k dimension, a prim one "
                                 f"(the primitive reduces within its block); prim k dimensions "
                                 f"{ks}, k loops {loops}")
    ki = ks[0]
    ji = next(k for k in prims if k != ki)
    kept, red = dims[ji], dims[ki]
    if not _unit(kept, "out"):
        raise WrongDimensionError(f"{_name(ji, kept)}: out stride {kept.out}; the {main} "
                                  f"primitive writes its results contiguously, so out needs "
                                  f"unit stride along the kept prim dimension")
    if _unit(red, "in0"):
        return Roles((("M", ki), ("N", ji)), rows=ji, cols=-1)
    if _unit(kept, "in0"):
        return Roles((("M", ji), ("N", ki)), reduce_cols=True, rows=ji, cols=-1)
    raise WrongDimensionError(f"in0: strides {red.in0} along {_name(ki, red)} and {kept.in0} "
                              f"along {_name(ji, kept)}; the {main} primitive reads a "
                              f"column-major block, so in0 needs unit stride along one of them")


def _gemm_roles(op: TensorOperation, prims: list[int]) -> Roles:
    """m, n, k (and br) of a gemm/brgemm block and how the primitive reads them."""
    dims, main = op.dims, op.prim_main
    by_type: dict[str, list[int]] = {}
    for k in prims:
        by_type.setdefault(dims[k].type, []).append(k)
    want = {"m": 1, "n": 1, "k": 2 if main == "brgemm" else 1}
    for t, count in want.items():
        if len(by_type.get(t, [])) != count:
            got = ", ".join(f"{dims[k].type} (dimension {k})" for k in prims)
            raise WrongExecTypeError(f"main primitive {main} needs prim dimensions m, n and "
                                     f"{'two k' if count == 2 else 'k'}; got {got}")
    mi, ni = by_type["m"][0], by_type["n"][0]
    ks = by_type["k"]
    ki, bri = ks[-1], (ks[0] if main == "brgemm" else -1)  # the outer prim k is the batch
    m, n, k = dims[mi], dims[ni], dims[ki]
    if _unit(m, "out"):
        swap, rows, cols = False, mi, ni
    elif _unit(n, "out"):
        swap, rows, cols = True, ni, mi
    else:
        raise WrongDimensionError(
            f"{_name(mi, m)} and {_name(ni, n)}: out strides {m.out} and {n.out}; the {main} "
            f"primitive writes a column-major block, so out needs unit stride along the prim m "
            f"or n dimension")
    for t, (x, y) in (("in0", (mi, ki)), ("in1", (ki, ni))):
        if not (_unit(dims[x], t) or _unit(dims[y], t)):
            raise WrongDimensionError(
                f"{t}: strides {dims[x].stride(t)} along {_name(x, dims[x])} and "
                f"{dims[y].stride(t)} along {_name(y, dims[y])}; the {main} primitive reads "
                f"{t} column-major or transposed, so it needs unit stride along one of them")
    # Without swap: A = in0 (m x k), B = in1 (k x n); with swap: A = in1^T, B = in0^T.
    if not swap:
        trans_a, trans_b = not _unit(m, "in0"), not _unit(k, "in1")
    else:
        trans_a, trans_b = not _unit(n, "in1"), not _unit(k, "in0")
    roles = (("m", mi), ("n", ni), ("k", ki)) + ((("br", bri),) if bri >= 0 else ())
    return Roles(roles, swap=swap, trans_a=trans_a, trans_b=trans_b, rows=rows, cols=cols)


def as_flat(a, name: str, dt: np.dtype, need: int, *, write: bool = False) -> np.ndarray:
    """``a`` as the first ``need`` elements of its flat buffer, checked."""
    if not isinstance(a, np.ndarray):
        raise WrongDtypeError(f"{name} must be a numpy array, got {type(a).__name__}")
    if a.dtype != dt:
        raise WrongDtypeError(f"{name} has dtype {a.dtype}; the operation reads {dt.name}")
    if a.flags.c_contiguous:
        flat = a.reshape(-1)
    elif a.flags.f_contiguous:
        flat = a.T.reshape(-1)
    else:
        raise WrongDimensionError(f"{name} (shape {a.shape}, strides {a.strides} B) is not "
                                  f"contiguous; the operation reads it as a flat element buffer")
    if flat.size < need:
        from ..errors import OutOfBoundsError
        raise OutOfBoundsError(f"{name} holds {flat.size} elements; the operation's strides "
                               f"reach element {need - 1}")
    if write and not a.flags.writeable:
        raise WrongDimensionError(f"{name} is read-only, but the operation writes it")
    return flat[:need]


def strides_of(a: np.ndarray, axes: str, dims: str) -> tuple[int, ...]:
    """The strides, in elements of ``a``'s flat buffer, of an operation's dimensions:
    ``axes`` names each axis of ``a`` by a letter, ``dims`` each dimension of the operation
    (its ``strides_in0``, ``strides_in1`` or ``strides_out``); a letter ``a`` lacks has
    stride 0 (the dimension does not move in ``a``). Row-major numpy arrays need no
    transposing by hand: the TPP text's column-major strides are these numbers.

    >>> a = np.zeros((64, 32), np.float32)                 # A[m, k], row-major
    >>> strides_of(a, "mk", "mnk")
    (32, 0, 1)
    >>> strides_of(a.T, "km", "mnk")                       # a transposed view: the same
    (32, 0, 1)
    """
    if not isinstance(a, np.ndarray):
        raise WrongDtypeError(f"strides_of takes a numpy array, got {type(a).__name__}")
    if not isinstance(axes, str) or len(axes) != a.ndim or len(set(axes)) != a.ndim:
        raise WrongDimensionError(f"strides_of: axes {axes!r} must name each of the {a.ndim} "
                                  f"axes of an array of shape {a.shape} by its own letter")
    if not (a.flags.c_contiguous or a.flags.f_contiguous):
        raise WrongDimensionError(f"strides_of: the array (shape {a.shape}, strides "
                                  f"{a.strides} B) is not contiguous; the operation reads "
                                  f"arrays as flat element buffers")
    missing = sorted(set(axes) - set(dims))
    if missing:
        raise WrongDimensionError(f"strides_of: axes {', '.join(missing)} of {axes!r} are no "
                                  f"dimension of {dims!r}")
    step = dict(zip(axes, (s // a.itemsize for s in a.strides)))
    return tuple(step.get(d, 0) for d in dims)


def spec(dt: str, size: int) -> Layout:
    return Layout((size,), _dtype(dt))


__all__ = ["DIM_TYPES", "DTYPES", "Dim", "EXEC_TYPES", "FIRST_TOUCH", "LAST_TOUCH", "MAIN",
           "Roles", "TensorOperation", "dims_table", "host_threads", "strides_of"]
