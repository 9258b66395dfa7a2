"""Test helpers under the Compass DSL's names: ``rand`` makes test data of a type,
``assert_allclose`` compares results as the public DSL's tests do.

>>> import numpy as np
>>> from npukit.dsl.testing import rand, assert_allclose
>>> x = rand(100, "int8", low=-5, high=5)
>>> bool(x.min() >= -5 and x.max() <= 4), x.dtype.name
(True, 'int8')
>>> assert_allclose(np.float16([1, 2]), np.float16([1, 2]))
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..errors import DTypeError
from .types import DType


def get_range(dtype) -> tuple:
    """The least and greatest values of scalar type ``dtype``: ``get_range("int8") ==
    (-128, 127)``; for floats, the largest finite magnitudes."""
    t = DType(dtype).element_of
    if t.is_bool:
        return False, True
    info = (ml_dtypes.finfo if t.is_bfloat16 else np.finfo)(t.elem) if t.is_floating else \
        np.iinfo(t.elem)
    return float(info.min) if t.is_floating else int(info.min), \
        float(info.max) if t.is_floating else int(info.max)


def rand(shape, dtype, low=None, high=None, enable_corner_values=True,
         return_python_type=False):
    """Random ``dtype`` values in ``[low, high)`` (the type's whole range by default) drawn
    with numpy's global generator (so ``np.random.seed`` repeats them). With
    ``enable_corner_values`` the bounds (and 0 when inside) are placed at random positions
    when there is room. ``shape == 1`` gives one value."""
    t = DType(dtype)
    if t.is_vector:
        raise DTypeError(f"rand: {t} is a vector type; give its scalar type "
                         f"{t.element_of}")
    if t.is_bool:
        out = np.random.uniform(size=shape) < 0.5
    else:
        lo, hi = get_range(t)
        lo = lo if low is None else low
        if high is not None:  # excluded: the type's value just below it
            hi = np.nextafter(t.elem.type(high), t.elem.type(-np.inf)).item() \
                if t.is_floating else high - 1
        if lo > hi:
            raise DTypeError(f"rand: empty range [{low}, {high}) for {t}")
        if t.is_floating:  # a normal law around the middle gives values with fractions
            spread = min((float(hi) - lo) / 6, 700.0 if t.is_float16 else 1e6)
            out = np.random.normal((float(lo) + hi) / 2, spread, shape)
            out = np.clip(out, lo, hi).astype(t.elem)
        else:
            out = np.random.randint(lo, hi + 1, shape, dtype=np.int64).astype(t.elem)
        corners = [v for v in (lo, 0, hi) if lo <= v <= hi]
        if enable_corner_values and out.size > len(corners):
            places = np.random.choice(out.size, len(corners), replace=False)
            out.reshape(-1)[places] = corners
    out = out[0] if shape == 1 else out
    return out.tolist() if return_python_type else out


def assert_allclose(actual, desired, rtol=None, atol=None) -> None:
    """``actual`` equals ``desired`` within ``atol + rtol * |desired|`` (defaults: exact
    for integers, 1e-6 for floats, where values at most 2 units in the last place apart
    also pass and NaN matches NaN); the dtypes must be the same."""
    a, d = np.array(actual), np.array(desired)
    if a.dtype != d.dtype:
        raise AssertionError(f"dtype mismatch: actual {a.dtype}, desired {d.dtype}")
    rtol = 0 if rtol is None else rtol
    if a.dtype.kind == "V":  # bfloat16: exact, in float32 (numpy 1 cannot promote bfloat16)
        a, d = a.astype(np.float32), d.astype(np.float32)
        atol = 0 if atol is None else atol
    elif a.dtype.kind == "f":
        atol = 1e-6 if atol is None else atol
        if atol or rtol:
            bits = np.int16 if a.itemsize == 2 else np.int32 if a.itemsize == 4 else np.int64
            near = np.isfinite(a) & np.isfinite(d) & \
                (np.abs(a.view(bits).astype(np.int64) - d.view(bits).astype(np.int64)) <= 2)
            a = np.where(near, d, a)
    else:
        atol = 0 if atol is None else atol
    np.testing.assert_allclose(a, d, rtol=rtol, atol=atol, equal_nan=True)
