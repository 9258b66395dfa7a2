"""The TPP tensor compiler: tensor operations built from processing primitives.

A ``TensorOperation`` is a loop nest over typed dimensions (``c``, ``m``, ``n``, ``k``)
around a generated primitive, with a first touch, a main primitive and a last touch;
``optimize()`` splits, fuses and reorders its dimensions and picks the ones the host's
threads share; ``einsum`` lowers contractions to one optimized operation; ``Equation`` is
libxsmm's matrix equation, a tree of operations compiled as one fused kernel. Every operation
lowers to the one IR (``npukit.ir``): the C back end runs it, the simulator costs it.
"""

# The optimizer and the lowering register themselves as the operation's passes.
# isort: off
from . import lower, optimizer  # noqa: F401
# isort: on
from .einsum import einsum, einsum_operation
from .equation import Equation
from .equation_kernel import EquationKernel
from .equation_tree import EQUATION_NAMES
from .errors import (
    OperationNotSupportedError,
    TppError,
    WrongDimensionError,
    WrongDtypeError,
    WrongExecTypeError,
    WrongPrimitiveError,
)
from .formulas import LIBXSMM_NAMES
from .gather import gather, scatter
from .operation import TensorOperation, strides_of
from .packing import decompose_bf16, unzip, zip_halves
from .primitives import BINARY, GEMMS, PRIMITIVES, REDUCE, UNARY, Primitive
from .reduce_idx import reduce_cols_idx

__all__ = [
    "BINARY", "EQUATION_NAMES", "Equation", "EquationKernel", "GEMMS", "LIBXSMM_NAMES",
    "OperationNotSupportedError", "PRIMITIVES", "Primitive", "REDUCE",
    "TensorOperation", "TppError", "UNARY", "WrongDimensionError", "WrongDtypeError",
    "WrongExecTypeError", "WrongPrimitiveError", "decompose_bf16", "einsum",
    "einsum_operation", "gather", "reduce_cols_idx", "scatter", "strides_of", "unzip",
    "zip_halves",
]
