"""The poison value: what unwritten memory and junk lanes hold in the simulator (so a
result computed from them shows), and what a front end gives where its source leaves a
value undefined."""

import numpy as np

from .dtypes import is_float


def poison(dt: np.dtype, shape) -> np.ndarray:
    """An array of the poison value: NaN for floats, True for masks, 0xA5 in every byte for
    integers."""
    if is_float(dt):
        return np.full(shape, np.nan, dtype=dt)
    if dt == np.bool_:
        return np.full(shape, True)
    n = int(np.prod(shape, dtype=np.int64))
    return np.full(n * dt.itemsize, 0xA5, np.uint8).view(dt).reshape(shape)
