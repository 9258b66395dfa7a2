"""The errors of the TPP tensor compiler's checks, as ``NpukitError`` subclasses.

The TPP tensor compiler's ``TensorOperation::setup`` answers a bad configuration with an
``error_t``: ``wrong_dtype``, ``wrong_dimension``, ``wrong_ptype``, ``wrong_exec_type``,
``operation_not_supported``. Each becomes a class here, with that name in ``code``; each
message names the offending dimension (or primitive) and the sizes involved.

>>> issubclass(WrongExecTypeError, NpukitError), WrongExecTypeError.code
(True, 'wrong_exec_type')
"""

from __future__ import annotations

from ..errors import DTypeError, KernelError, NpukitError, ShapeError


class TppError(NpukitError):
    """A tensor operation or primitive the TPP tensor compiler's rules reject."""

    code = ""


class WrongDtypeError(TppError, DTypeError):
    """``error_t::wrong_dtype``: a dtype the primitive or operation does not support."""

    code = "wrong_dtype"


class WrongDimensionError(TppError, ShapeError):
    """``error_t::wrong_dimension``: dimension lists of different lengths, sizes below 1,
    strides that do not fit the dimension types, outputs that overlap themselves."""

    code = "wrong_dimension"


class WrongPrimitiveError(TppError, KernelError, ValueError):
    """``error_t::wrong_ptype``: an unknown primitive, or one not allowed for its touch."""

    code = "wrong_ptype"


class WrongExecTypeError(TppError, KernelError, ValueError):
    """``error_t::wrong_exec_type``: the primitive dimensions do not fit the main primitive
    (three for gemm, four for brgemm, two for unary and binary ones), an unknown execution
    type, or a ``k`` dimension run ``shared``."""

    code = "wrong_exec_type"


class OperationNotSupportedError(TppError, KernelError):
    """``error_t::operation_not_supported``: a transposition the primitive cannot do
    (binary primitives are never transposed)."""

    code = "operation_not_supported"
