"""dtype names as numpy spells them, plus the ml_dtypes formats NPUs use, and one table of
what npukit knows about each element type it stores (``FACTS``).

>>> FACTS["int8"].c_type, FACTS["int8"].gap_c_type, FACTS["int8"].range
('int8_t', 'signed char', (-128, 127))
>>> FACTS["bfloat16"].is_float, FACTS["bfloat16"].itemsize
(True, 2)
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass

import numpy as np

from .errors import DTypeError


def _lazy(name: str):
    """Module ``name``, loaded when one of its attributes is first read
    (``importlib.util.LazyLoader``)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# ml_dtypes takes longer to import than the rest of npukit together, and most programs use
# none of its formats: modules that name them import it from here, loaded on first use.
ml_dtypes = _lazy("ml_dtypes")
# The ml_dtypes formats by name.
_EXTRA = ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def dtype(spec) -> np.dtype:
    """Resolve a dtype name or object: ``dtype("int8")``, ``dtype("bfloat16")``."""
    if isinstance(spec, str) and spec in _EXTRA:
        return np.dtype(getattr(ml_dtypes, spec))
    try:
        return np.dtype(spec)
    except (TypeError, ValueError, SyntaxError) as exc:  # numpy parses odd strings ("0:", "01")
        raise DTypeError(f"unknown dtype {spec!r}; use a numpy name or one of "
                         f"{sorted(_EXTRA)}") from exc


def is_float(dt) -> bool:
    """True for IEEE-style floats, ml_dtypes formats (bfloat16, float8) included; ``dt`` is a
    dtype or its name: ``is_float("bfloat16") and not is_float("int32")``."""
    dt = dtype(dt)
    return dt.kind == "f" or dt.name in _EXTRA


def int_range(dt) -> tuple[int, int]:
    """The representable range of an integer dtype (or its name):
    ``int_range("int8") == (-128, 127)``."""
    info = np.iinfo(dtype(dt))
    return int(info.min), int(info.max)


@dataclass(frozen=True)
class DTypeFacts:
    """One element type as the back ends spell it: ``c_type`` the C99 type npukit's C
    declares an element with, ``gap_c_type`` the spelling of the GAP AutoTiler's generated code
    and of npukit's layer kernels (``None`` where neither has kernels for it; GAP has no
    64-bit, bool or 16-bit float kernels, npukit's layers spell them ``long long int``,
    ``unsigned long long int``, ``_Bool`` (one byte holding 0 or 1), ``double``,
    ``npk_float16``, ``npk_bfloat16``)."""

    name: str
    c_type: str
    gap_c_type: str | None = None

    @property
    def dtype(self) -> np.dtype:
        return dtype(self.name)

    @property
    def is_float(self) -> bool:
        return is_float(self.dtype)

    @property
    def range(self) -> tuple[int, int] | None:
        """``int_range`` of an integer type, ``None`` for floats, complex and bool."""
        return int_range(self.dtype) if self.dtype.kind in "iu" else None

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize


FACTS = {f.name: f for f in (
    DTypeFacts("int8", "int8_t", "signed char"),
    DTypeFacts("uint8", "uint8_t", "unsigned char"),
    DTypeFacts("int16", "int16_t", "short int"),
    DTypeFacts("uint16", "uint16_t", "unsigned short int"),
    DTypeFacts("int32", "int32_t", "int"),
    DTypeFacts("uint32", "uint32_t", "unsigned int"),
    DTypeFacts("int64", "int64_t", "long long int"),
    DTypeFacts("uint64", "uint64_t", "unsigned long long int"),
    DTypeFacts("float16", "npk_float16", "npk_float16"),  # gcc's _Float16 (npukit.c.ctype)
    DTypeFacts("bfloat16", "npk_bfloat16", "npk_bfloat16"),  # its 16 bits in a uint16_t
    DTypeFacts("float32", "float", "float"),
    DTypeFacts("float64", "double", "double"),
    DTypeFacts("complex64", "float _Complex"),
    DTypeFacts("complex128", "double _Complex"),
    DTypeFacts("bool", "uint8_t", "_Bool"),  # a mask lane: 0 or 1 in one byte
)}
