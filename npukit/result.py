"""What every back end's run shares: the arrays checked against the program's parameter
specs (``check_arrays``), and the ``Result`` it returns."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import ir
from .dtypes import int_range, is_float
from .errors import DTypeError, NpukitError, ShapeError


@dataclass
class Result:
    """``outputs``: the output arrays (the ones passed in, now written); ``cycles`` and
    ``report`` from the simulator's cycle model (None on host back ends); ``wall_time`` in
    seconds for the back end's call."""

    outputs: dict[str, np.ndarray]
    cycles: int | None
    report: object
    wall_time: float


def check_arrays(prog: ir.Program, arrays: dict) -> dict[str, np.ndarray]:
    """Each parameter's array must match its spec: dtype, shape, strides (in elements),
    and outputs must be writable."""
    names = [b.name for b, _ in prog.params]
    missing = [n for n in names if n not in arrays]
    extra = [n for n in arrays if n not in names]
    if missing or extra:
        raise NpukitError(f"run {prog.name}: missing arrays {missing}, unexpected {extra}")
    out = {}
    for buf, spec in prog.params:
        a = arrays[buf.name]
        if spec.shape == () and np.isscalar(a):
            a = _scalar(buf.name, a, spec.dtype)  # a C scalar argument passed as a number
        if not isinstance(a, np.ndarray):
            raise ShapeError(f"tensor {buf.name!r}: expected a numpy array, got {type(a).__name__}")
        if a.dtype != spec.dtype:
            raise ShapeError(f"tensor {buf.name!r}: dtype {a.dtype} but the spec says {spec.dtype}")
        if a.shape != spec.shape:
            raise ShapeError(f"tensor {buf.name!r}: shape {a.shape} but the spec says {spec.shape}")
        for d, (n, s_arr, s_spec) in enumerate(zip(a.shape, a.strides, spec.strides)):
            if n > 1 and s_arr != s_spec * a.itemsize:
                raise ShapeError(f"tensor {buf.name!r}: dim {d} has stride {s_arr // a.itemsize} "
                                 f"elements ({s_arr} B) but the spec says {s_spec}")
        if buf.role != "in" and not a.flags.writeable:
            raise ShapeError(f"tensor {buf.name!r} is written by the kernel but its array is "
                             f"read-only")
        out[buf.name] = a
    for name, lo, hi in prog.bounds:
        a = out[name]
        if a.size and not lo <= int(a.min()) <= int(a.max()) <= hi:
            bad = int(a.min()) if int(a.min()) < lo else int(a.max())
            raise ShapeError(f"argument {name!r}: {bad} is outside {lo}..{hi}, the values the "
                             f"kernel accepts")
    return out


def _scalar(name: str, value, dt: np.dtype) -> np.ndarray:
    """``value`` as a 0-d array of ``dt``, when it is a number of ``dt``'s kind: an integer
    (never a bool, a float or a string) for an integer type, an integer or a float for a
    float type; ``DTypeError`` otherwise, ``ShapeError`` for an integer out of range."""
    kind = "a bool" if isinstance(value, (bool, np.bool_)) else \
        "an integer" if isinstance(value, (int, np.integer)) else \
        "a float" if isinstance(value, (float, np.floating)) else \
        "a complex number" if isinstance(value, (complex, np.complexfloating)) else \
        f"a {type(value).__name__}"
    accepted = ("a bool",) if dt.kind == "b" else ("an integer",) if dt.kind in "iu" else \
        ("an integer", "a float") if is_float(dt) else \
        ("an integer", "a float", "a complex number") if dt.kind == "c" else ()
    if kind not in accepted:
        raise DTypeError(f"scalar argument {name!r}: {value!r} is {kind}, but the argument is "
                         f"{dt}: pass {' or '.join(accepted) or 'an array'}")
    if dt.kind in "iu":
        lo, hi = int_range(dt)
        if not lo <= int(value) <= hi:
            raise ShapeError(f"tensor {name!r}: {value} does not fit {dt} ({lo}..{hi})")
    return np.asarray(value, dtype=dt)
