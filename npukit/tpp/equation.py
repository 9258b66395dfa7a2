"""libxsmm's matrix equations: a tree of unary, binary and ternary operations over matrix
arguments, compiled as one fused kernel.

libxsmm builds an equation with ``libxsmm_meqn_create`` and then pushes its nodes in
prefix order (``libxsmm_meqn_push_back_unary_op`` / ``_binary_op`` / ``_ternary_op`` /
``_arg``): each operation takes the next nodes pushed as its operands, left to right.
``Equation`` keeps those names (``push_back_unary_op``, ...) with npukit's names for the
kinds (``tpp.LIBXSMM_NAMES`` maps libxsmm's enum names to them; either is accepted).
``dispatch(m, n, ld)`` compiles the whole tree, the shape of its output given, into one
``EquationKernel``: one IR program calling one generated C function whose loop nests
compute every node, never one call per node.

Matrices are column-major as in libxsmm: element ``(i, j)`` of an ``m x n`` argument with
leading dimension ``ld`` is ``a[i + j * ld]``. A broadcast flag on an operand reads it as a
scalar (element ``(0, 0)``), a row (``(0, j)``: one value per column, libxsmm's BCAST_ROW)
or a column (``(i, 0)``: one value per row, libxsmm's BCAST_COL).

>>> import numpy as np
>>> from npukit import tpp
>>> eq = tpp.Equation()
>>> eq.push_back_binary_op("add").push_back_arg(0, 3, 2).push_back_unary_op("exp") \\
...   .push_back_arg(1, 3, 2)  # doctest: +ELLIPSIS
<npukit.tpp.equation.Equation object at ...>
>>> k = eq.dispatch(3, 2)
>>> a, b = np.ones(6, np.float32), np.zeros(6, np.float32)
>>> k([a, b], out := np.empty(6, np.float32)).tolist()
[2.0, 2.0, 2.0, 2.0, 2.0, 2.0]
"""

from __future__ import annotations

from dataclasses import replace

from .equation_kernel import EquationKernel
from .equation_tree import (
    ALPHA,
    EQ_BINARY,
    EQ_REDUCE,
    EQ_TERNARY,
    EQ_UNARY,
    Arg,
    Node,
    bcasts,
    kind_name,
    value_shape,
)
from .errors import OperationNotSupportedError, WrongDimensionError


class Equation:
    """libxsmm's ``libxsmm_meqn``: push nodes in prefix order, then ``dispatch``.

    ``push_back_unary_op(kind, reduce=None, bitmask=False, op_arg=-1, dtype="float32")``:
    ``reduce`` is
    ``"rows"`` or ``"cols"`` for a reduction (libxsmm's REDUCE_ROWS: one value per column;
    REDUCE_COLS: one per row); ``bitmask`` makes a ReLU write its mask too (libxsmm's
    BITMASK flag); ``dump`` copies its operand into the operation argument ``op_arg``;
    ``dtype="bfloat16"`` rounds the operation's result to bfloat16 (libxsmm's IDENTITY with
    a BF16 datatype is that rounding); ``bcast_in0`` reads the operand as a row, a column
    or a scalar, the result ``shape=(m, n)`` given with it (libxsmm's unary BCAST flags;
    REPLICATE_COL_VAR is the identity with ``bcast_in0="col"``, its column count fixed
    here rather than at each call); ``init_acc=True`` makes an add reduction at the root
    fold onto the output's old values (libxsmm's REDUCE_INIT_ACC).
    ``push_back_binary_op(kind, bcast_in0=None, bcast_in1=None)`` and
    ``push_back_ternary_op(kind, bcast_in0=..., bcast_in1=..., bcast_in2=...)``: each
    broadcast ``"scalar"``, ``"row"`` or ``"col"``. ``push_back_arg(index, m, n, ld=m,
    dtype="float32", count=1, stride=0, vnni=False)``: an argument leaf (``Arg``).
    """

    def __init__(self):
        self._stack: list[list] = []     # open operations: [arity, kind, kwargs, children]
        self._root: Node | None = None

    def _push(self, arity: int, kind: str, **kw) -> Equation:
        if self._root is not None:
            raise WrongDimensionError("the equation is complete: its root has every operand")
        self._stack.append([arity, kind, kw, []])
        return self

    def _close(self, node) -> None:
        while self._stack:
            top = self._stack[-1]
            top[3].append(node)
            if len(top[3]) < top[0]:
                return
            self._stack.pop()
            arity, kind, kw, kids = top
            node = Node(arity, kind, tuple(kids), **kw)
            node = replace(node, shape=value_shape(node))
        self._root = node

    def push_back_unary_op(self, kind: str, reduce: str | None = None, bitmask: bool = False,
                           op_arg: int = -1, dtype: str = "float32",
                           alpha: float | None = None, bcast_in0: str | None = None,
                           shape: tuple[int, int] | None = None,
                           init_acc: bool = False) -> Equation:
        kind = kind_name(kind, EQ_UNARY + EQ_REDUCE, "unary")
        if (kind in EQ_REDUCE) != (reduce in ("rows", "cols")):
            raise OperationNotSupportedError(
                f"{kind}: reduce={reduce!r}; a reduction needs reduce='rows' or 'cols', any "
                "other unary kind none")
        if bitmask and kind not in ("relu", "leaky_relu"):
            raise OperationNotSupportedError(f"{kind}: only relu and leaky_relu write a "
                                             "bitmask")
        _check_alpha(kind, alpha)
        if (kind == "dump") != (op_arg >= 0):
            raise OperationNotSupportedError(f"{kind}: op_arg={op_arg}; a dump needs the "
                                             "operation argument it writes, no other kind")
        if dtype not in ("float32", "bfloat16"):
            raise OperationNotSupportedError(f"{kind}: dtype {dtype!r}; float32 or bfloat16")
        if (bcast_in0 is None) != (shape is None) or bcast_in0 and kind in EQ_REDUCE:
            raise OperationNotSupportedError(
                f"{kind}: bcast_in0={bcast_in0!r}, shape={shape!r}; a broadcast unary kind "
                "(not a reduction) needs the (m, n) of its result, no other kind")
        if init_acc and kind not in ("reduce_add", "reduce_x2_add", "reduce_x_x2_add"):
            raise OperationNotSupportedError(f"{kind}: init_acc (libxsmm's REDUCE_INIT_ACC) "
                                             "is for the add reductions")
        return self._push(1, kind, bcast=bcasts(kind, bcast_in0), reduce=reduce or "",
                          bitmask=bitmask, op_arg=op_arg, dtype=dtype,
                          alpha=float(alpha or 0.0), shape=tuple(shape or (0, 0)),
                          init_acc=init_acc)

    def push_back_binary_op(self, kind: str, bcast_in0: str | None = None,
                            bcast_in1: str | None = None,
                            alpha: float | None = None) -> Equation:
        kind = kind_name(kind, EQ_BINARY, "binary")
        _check_alpha(kind, alpha)
        return self._push(2, kind, bcast=bcasts(kind, bcast_in0, bcast_in1),
                          alpha=float(alpha or 0.0))

    def push_back_ternary_op(self, kind: str, bcast_in0: str | None = None,
                             bcast_in1: str | None = None,
                             bcast_in2: str | None = None) -> Equation:
        kind = kind_name(kind, EQ_TERNARY, "ternary")
        return self._push(3, kind, bcast=bcasts(kind, bcast_in0, bcast_in1, bcast_in2))

    def push_back_arg(self, index: int, m: int, n: int, ld: int | None = None,
                      dtype: str = "float32", count: int = 1, stride: int = 0,
                      vnni: bool = False) -> Equation:
        ld = m if ld is None else ld
        if self._root is not None:
            raise WrongDimensionError("the equation is complete: its root has every operand")
        if min(m, n, count) < 1 or index < 0 or stride < 0:
            raise WrongDimensionError(f"argument {index}: m = {m}, n = {n}, count = {count} "
                                      f"must be at least 1, index and stride {stride} >= 0")
        if dtype != "bitmask" and ld < m or dtype == "bitmask" and (ld < m or ld % 8):
            raise WrongDimensionError(f"argument {index}: ld = {ld} below m = {m}" +
                                      (" or not a multiple of 8 bits" if dtype == "bitmask"
                                       else ""))
        if dtype not in ("float32", "bfloat16", "bitmask") or vnni and (
                dtype != "bfloat16" or n % 2):
            raise WrongDimensionError(
                f"argument {index}: dtype {dtype!r}{' with vnni' if vnni else ''}; float32, "
                "bfloat16 or bitmask, and vnni only for bfloat16 with an even n")
        self._close(Arg(index, m, n, ld, dtype, count, stride, vnni))
        return self

    @property
    def root(self) -> Node | Arg:
        if self._root is None:
            raise WrongDimensionError(f"the equation is incomplete: {len(self._stack)} "
                                      "operations still wait for operands")
        return self._root

    def dispatch(self, m: int, n: int, ld: int | None = None, dtype: str = "float32",
                 target: str = "torq") -> EquationKernel:
        """The whole equation as one fused kernel writing an ``m x n`` output with leading
        dimension ``ld`` (libxsmm's ``libxsmm_dispatch_meqn``); ``dtype="bfloat16"``
        stores it rounded to bfloat16, to nearest even; ``dtype="bitmask"`` stores bit
        ``i % 8`` of byte ``i // 8 + j * (ld // 8)`` (``ld`` in bits), set where the value is
        not 0 (libxsmm's comparisons with BITMASK_2BYTEMULT)."""
        if dtype not in ("float32", "bfloat16", "bitmask"):
            raise OperationNotSupportedError(f"output dtype {dtype!r}; float32, bfloat16 or "
                                             "bitmask")
        return EquationKernel(self.root, m, n, m if ld is None else ld, dtype, target)


def _check_alpha(kind: str, alpha) -> None:
    if (kind in ALPHA) != (alpha is not None):
        raise OperationNotSupportedError(
            f"{kind}: alpha={alpha!r}; {', '.join(ALPHA)} take libxsmm's alpha, no other kind")


__all__ = ["Equation"]
