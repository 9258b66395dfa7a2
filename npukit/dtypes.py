"""dtype names as numpy spells them, plus the ml_dtypes formats NPUs use."""

import ml_dtypes
import numpy as np

from .errors import DTypeError

_EXTRA = {
    "bfloat16": ml_dtypes.bfloat16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
}


def dtype(spec) -> np.dtype:
    """Resolve a dtype name or object: ``dtype("int8")``, ``dtype("bfloat16")``."""
    if isinstance(spec, str) and spec in _EXTRA:
        return np.dtype(_EXTRA[spec])
    try:
        return np.dtype(spec)
    except (TypeError, ValueError, SyntaxError) as exc:  # numpy parses odd strings ("0:", "01")
        raise DTypeError(f"unknown dtype {spec!r}; use a numpy name or one of "
                         f"{sorted(_EXTRA)}") from exc


def is_float(dt: np.dtype) -> bool:
    """True for IEEE-style floats, ml_dtypes formats included."""
    return dt.kind == "f" or dt.name in _EXTRA


def int_range(dt: np.dtype) -> tuple[int, int]:
    """The representable range of an integer dtype: ``int_range(dtype("int8")) == (-128, 127)``."""
    info = np.iinfo(dt)
    return int(info.min), int(info.max)
