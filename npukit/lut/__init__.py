"""Lookup tables (the AIE API's ``aie::lut``, ``parallel_lookup``, ``linear_approx``, the
accumulator's ``to_vector``), their
design for common activations, and the TPP tensor compiler's sigmoid approximations."""

from .accum import ROUNDING_MODES, SATURATION_MODES, to_vector
from .catalogue import FUNCTIONS, Function, function
from .design import Design, ErrorStats, design
from .semantics import (
    EXTENDED_LINEAR_TYPES,
    LINEAR_TYPES,
    LinearType,
    linear_approx,
    linear_type,
    parallel_lookup,
)
from .sigmoid import fast_sigmoid, format_errors, sigmoid_errors, table_sigmoid, taylor_sigmoid
from .special import erf, erfc
from .table import Lut

__all__ = [
    "EXTENDED_LINEAR_TYPES", "FUNCTIONS", "LINEAR_TYPES", "Design", "ErrorStats", "Function",
    "LinearType", "Lut", "ROUNDING_MODES", "SATURATION_MODES", "design", "erf", "erfc",
    "fast_sigmoid", "format_errors", "function", "linear_approx", "linear_type",
    "parallel_lookup", "sigmoid_errors", "table_sigmoid", "taylor_sigmoid", "to_vector",
]
