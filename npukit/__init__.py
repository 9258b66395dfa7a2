"""npukit: write, tile, verify and generate compute kernels for NPUs.

>>> import npukit as nk
>>> nk.Layout((2, 5, 7), "int8").vectorize(16).shape
(2, 5, 1, 16)
"""

from .dtypes import dtype
from .errors import (
    CapacityError,
    CompilerError,
    DTypeError,
    KernelError,
    LutError,
    NpukitError,
    OutOfBoundsError,
    ShapeError,
    TargetError,
    TilingError,
)
from .layout import Layout
from .machine import Target, load_target, target, targets

__all__ = [
    "CapacityError", "CompilerError", "DTypeError", "KernelError", "Layout", "LutError",
    "NpukitError", "OutOfBoundsError", "ShapeError", "Target", "TargetError", "TilingError",
    "dtype", "load_target", "target", "targets",
]

from .easy import LData, MultiIndex, build, kernel, spec  # noqa: E402
from .ir import Program  # noqa: E402
from .run import Result  # noqa: E402
from .transfers import Transfer  # noqa: E402

__all__ += ["LData", "MultiIndex", "Program", "Result", "Transfer", "build", "kernel", "spec"]
