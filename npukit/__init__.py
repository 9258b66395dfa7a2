"""npukit: write, tile, verify and generate compute kernels for NPUs.

>>> import npukit as nk
>>> nk.Layout((2, 5, 7), "int8").vectorize(16).shape
(2, 5, 1, 16)
"""

from .dtypes import dtype
from .easy import LData, MultiIndex, build, kernel, spec
from .errors import (
    CalibrationError,
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
from .result import Result
from .sequencing import sequence
from .transfers import Transfer

# The modules that run and render a Program register themselves with the IR when imported
# (npukit.ir imports nothing above it): the back ends of Program.run and compile, the
# simulator ("sim", the default) first, then C ("c"); str(prog), prog.c_source() and
# prog.transfers() (npukit.transfers, imported above).
# isort: off
from . import run  # noqa: F401
from . import c, ir_text  # noqa: F401
# isort: on

__all__ = [
    "CalibrationError", "CapacityError", "CompilerError", "DTypeError", "KernelError", "LData",
    "Layout", "LutError", "ModelError", "MultiIndex", "NoCompilerError", "NpukitError",
    "OutOfBoundsError", "Program", "Result", "ShapeError", "Target", "TargetError", "TilingError",
    "Transfer", "build", "dtype", "kernel", "load_target", "sequence", "spec", "target", "targets",
]
