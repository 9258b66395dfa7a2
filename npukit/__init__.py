"""npukit: write, tile, verify and generate compute kernels for NPUs.

>>> import npukit as nk
>>> nk.Layout((2, 5, 7), "int8").vectorize(16).shape
(2, 5, 1, 16)
"""

from .dtypes import dtype
from .easy import LData, MultiIndex, build, kernel, spec
from .errors import (
    CapacityError,
    CompilerError,
    DTypeError,
    KernelError,
    LutError,
    ModelError,
    NoCompilerError,
    NpukitError,
    OutOfBoundsError,
    ShapeError,
    TargetError,
    TilingError,
)
from .ir import Program
from .layout import Layout
from .machine import Target, load_target, target, targets
from .run import Result
from .sequencing import sequence
from .transfers import Transfer

__all__ = [
    "CapacityError", "CompilerError", "DTypeError", "KernelError", "LData", "Layout",
    "LutError", "ModelError", "MultiIndex", "NoCompilerError", "NpukitError", "OutOfBoundsError",
    "Program", "Result",
    "ShapeError", "Target", "TargetError", "TilingError", "Transfer", "build", "dtype",
    "kernel", "load_target", "sequence", "spec", "target", "targets",
]
