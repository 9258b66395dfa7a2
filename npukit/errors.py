"""The errors a user can cause. Every message names the tensor, dimension, sizes and budget
involved, so the fix is obvious without a debugger."""


class NpukitError(Exception):
    """Base of every error npukit raises because of what the user passed."""


class ShapeError(NpukitError, ValueError):
    """Shapes, strides or ranks that do not fit the operation."""


class OutOfBoundsError(NpukitError, IndexError):
    """An index, a view or a write that would leave its tensor or buffer."""


class DTypeError(NpukitError, TypeError):
    """A dtype the operation or the target does not support."""


class CapacityError(NpukitError):
    """Data placed in an internal memory exceeds its size."""


class TilingError(NpukitError):
    """No tiling satisfies the memory budget and constraints."""


class LutError(NpukitError, ValueError):
    """A lookup table or lookup parameters that break a rule of the LUT semantics."""


class TargetError(NpukitError):
    """A malformed or unknown target description."""


class CalibrationError(NpukitError, ValueError):
    """A table of measured cycles, or a layer it describes, that ``npukit calibrate`` cannot
    use (``npukit.calibration``)."""


class KernelError(NpukitError):
    """A kernel that breaks the structure rules of its front end."""


class ZeroDivisorError(KernelError, ZeroDivisionError):
    """An integer division the simulator finds dividing by zero where the kernel asked for
    the check (the Compass DSL's ``S.ceildiv``); a ``ZeroDivisionError`` too, as the public
    Compass DSL's simulation raises one."""


class CompassBuildError(KernelError, RuntimeError):
    """A Compass DSL kernel that ``BuildManager.build`` refuses; a ``RuntimeError`` too, as
    the public Compass DSL's build raises one. Its cause is the error the build met."""


class KernelAttributeError(KernelError, AttributeError):
    """A misspelt kernel-language method (``s.alu.add``); the message suggests the right
    name. An ``AttributeError`` too, so ``hasattr`` keeps working."""


class ModelError(NpukitError, ValueError):
    """A model (an ONNX file) npukit cannot import: an unsupported operator, attribute value,
    data type or shape, named with its node."""


class CompilerError(NpukitError):
    """The C compiler is missing or rejected the generated source."""


class NoCompilerError(CompilerError):
    """There is no C compiler to run (``NPUKIT_CC`` or ``cc`` is not on PATH)."""
