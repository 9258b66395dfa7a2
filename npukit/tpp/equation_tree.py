"""The tree of a libxsmm matrix equation: argument leaves (``Arg``), operation nodes
(``Node``) with the shape of their value, and the kinds a node may be.

>>> Arg(0, 4, 3, 5).footprint()
14
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import OperationNotSupportedError, WrongDimensionError, WrongPrimitiveError
from .formulas import LIBXSMM_BINARY, LIBXSMM_NAMES, LIBXSMM_REDUCE, LIBXSMM_UNARY

# The kinds an equation node may be (npukit's names; libxsmm's enum names map onto them).
EQ_UNARY = ("identity", "zero", "square", "relu", "increment", "decrement", "reciprocal",
            *LIBXSMM_UNARY, "leaky_relu", "elu", "dump")
ALPHA = ("leaky_relu", "elu", "leaky_relu_inv", "elu_inv")   # kinds with libxsmm's alpha
EQ_REDUCE = (*LIBXSMM_REDUCE, "reduce_x_x2_add")
EQ_BINARY = ("add", "sub", "mul", "div", "min", "max", *LIBXSMM_BINARY, "muladd", "relu_inv",
             "leaky_relu_inv", "elu_inv", "matmul", "brgemm")
EQ_TERNARY = ("muladd", "nmuladd", "select", "matmul", "brgemm")
BCASTS = (None, "scalar", "row", "col")

_U, _B, _T = "LIBXSMM_MELTW_TYPE_UNARY_", "LIBXSMM_MELTW_TYPE_BINARY_", \
    "LIBXSMM_MELTW_TYPE_TERNARY_"
# libxsmm's names of the equation-only kinds, beside tpp.LIBXSMM_NAMES.
EQUATION_NAMES = {
    _U + "DUMP": "dump", _U + "REDUCE_X_X2_OP_ADD": "reduce_x_x2_add",
    _U + "LEAKY_RELU": "leaky_relu", _U + "ELU": "elu",
    # libxsmm's backward ReLUs are unary kinds with a second input (the mask, or ELU's
    # forward output); in an equation they are binary: in1 is that input.
    _U + "RELU_INV": "relu_inv", _U + "LEAKY_RELU_INV": "leaky_relu_inv",
    _U + "ELU_INV": "elu_inv",
    _B + "MULADD": "muladd", _B + "MATMUL": "matmul", _B + "BRGEMM": "brgemm",
    _B + "BRGEMM_A_VNNI": "brgemm",
    _T + "MULADD": "muladd", _T + "NMULADD": "nmuladd", _T + "SELECT": "select",
    _T + "MATMUL": "matmul", _T + "BRGEMM": "brgemm", _T + "BRGEMM_A_VNNI": "brgemm",
}


@dataclass(frozen=True)
class Arg:
    """An argument leaf: input ``index``, an ``m x n`` block with leading dimension ``ld``
    of ``dtype`` (``"float32"``; ``"bfloat16"`` for a matmul operand; ``"bitmask"`` for a
    select's condition: bit ``i % 8`` of byte ``i // 8 + j * (ld // 8)``, ``ld`` in bits).
    A set (``count`` > 1: a batch-reduce GEMM's operand) holds ``count`` blocks ``stride``
    elements apart; ``vnni`` stores a bfloat16 ``m x n`` block as pairs of columns
    (libxsmm's VNNI-2 layout: element ``(i, j)`` at ``(j // 2) * 2 * ld + 2 * i + j % 2``)."""

    index: int
    m: int
    n: int
    ld: int
    dtype: str = "float32"
    count: int = 1
    stride: int = 0
    vnni: bool = False

    @property
    def shape(self) -> tuple[int, int]:
        return (self.m, self.n)

    def footprint(self) -> int:
        """Elements (bytes for a bitmask) of the buffer the leaf reads."""
        if self.dtype == "bitmask":
            return (self.m - 1) // 8 + (self.n - 1) * (self.ld // 8) + 1
        if self.vnni:
            last = ((self.n - 1) // 2) * 2 * self.ld + 2 * (self.m - 1) + 1 + 1
        else:
            last = (self.m - 1) + (self.n - 1) * self.ld + 1
        return last + (self.count - 1) * self.stride


@dataclass(frozen=True)
class Node:
    """One operation: ``arity`` operands, a kind, per-operand broadcasts, and its
    parameters: ``reduce`` (``"rows"`` or ``"cols"``), ``bitmask`` (a ReLU also writes
    its mask), ``op_arg`` (a dump's buffer), ``alpha`` (a leaky ReLU's slope, ELU's
    scale), ``init_acc`` (an add reduction folds onto the old output), ``dtype``
    (libxsmm's datatype of a unary
    operation: ``"bfloat16"`` rounds its result to bfloat16, to nearest even)."""

    arity: int
    kind: str
    children: tuple = ()
    bcast: tuple = ()
    reduce: str = ""
    bitmask: bool = False
    op_arg: int = -1
    dtype: str = "float32"
    alpha: float = 0.0
    init_acc: bool = False
    shape: tuple[int, int] = (0, 0)


def kind_name(name: str, table: tuple[str, ...], what: str) -> str:
    name = EQUATION_NAMES.get(name, LIBXSMM_NAMES.get(name, name))
    if name not in table:
        raise WrongPrimitiveError(f"{name!r} is no {what} kind of an equation; the kinds are "
                                  f"{', '.join(table)}")
    return name


def value_shape(node: Node) -> tuple[int, int]:
    """The node's value shape from its operands', checked against its broadcasts."""
    kids = [c.shape for c in node.children]
    if node.arity == 1:
        m, n = kids[0]
        if node.bcast[0]:   # a broadcast unary: the result's shape given with it
            _check_operands(node, kids, *node.shape)
            return node.shape
        if node.kind in EQ_REDUCE:
            if node.kind == "reduce_x_x2_add":  # two outputs: the sums, then the squares
                return (2, n) if node.reduce == "rows" else (m, 2)
            return (1, n) if node.reduce == "rows" else (m, 1)
        return (m, n)
    if node.kind in ("matmul", "brgemm"):
        (m, k), (k2, n) = kids[0], kids[1]
        if k != k2 or (node.arity == 3 and kids[2] != (m, n)):
            raise WrongDimensionError(
                f"{node.kind}: A is {m} x {k}, B {k2} x {n}" +
                (f", C {kids[2][0]} x {kids[2][1]}" if node.arity == 3 else "") +
                f"; A's columns must equal B's rows and C be {m} x {n}")
        return (m, n)
    full = [s for pos, (s, b) in enumerate(zip(kids, node.bcast))
            if b is None and not (node.kind == "select" and pos == 2)]
    if not full:
        raise WrongDimensionError(f"{node.kind}: every operand is broadcast; one must give the "
                                  "shape of the result")
    _check_operands(node, kids, *full[0])
    return full[0]


def _check_operands(node: Node, kids: list, m: int, n: int) -> None:
    """Each operand covers an m x n result as its broadcast reads it: whole, a row (one
    value per column), a column (one per row) or a scalar."""
    for pos, (s, b) in enumerate(zip(kids, node.bcast)):
        ok = {None: s == (m, n), "scalar": True, "row": s[1] == n, "col": s[0] == m}[b]
        if not ok:
            raise WrongDimensionError(
                f"{node.kind}: operand {pos} is {s[0]} x {s[1]} but the result is {m} x {n}"
                + (f" and it is read as a {b} broadcast" if b else ""))


def bcasts(kind: str, *flags) -> tuple:
    for pos, b in enumerate(flags):
        if b not in BCASTS:
            raise OperationNotSupportedError(f"{kind}: bcast_in{pos}={b!r}; one of "
                                             "'scalar', 'row', 'col' or None")
    if kind in ("matmul", "brgemm") and any(flags):
        raise OperationNotSupportedError(f"{kind}: its operands are never broadcast")
    return tuple(flags)


__all__ = ["Arg", "BCASTS", "EQUATION_NAMES", "EQ_BINARY", "EQ_REDUCE", "EQ_TERNARY",
           "EQ_UNARY", "ALPHA", "Node", "bcasts", "kind_name", "value_shape"]
