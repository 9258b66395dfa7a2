"""``Program.run``: check the arrays against the parameter specs, run a back end, and
return a ``Result``. Every back end writes into the arrays it is given."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import numpy as np

from . import ir
from .dtypes import int_range, is_float
from .errors import DTypeError, NpukitError, ShapeError
from .layout import Layout


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


def run(prog: ir.Program, backend: str, **arrays) -> Result:
    if backend == "c":  # the program's compiled handle checks the arrays (npukit.c.runtime)
        return _c().run_c(prog, arrays)
    arrs = check_arrays(prog, arrays)
    if backend == "sim":
        return _run_sim(prog, arrs)
    raise NpukitError(f"unknown backend {backend!r}; use 'sim' or 'c'")


def compile_program(prog: ir.Program, backend: str = "c", *, fuse: bool = True):
    """``prog`` compiled for ``backend`` ("c"): a handle called as ``fn(**arrays)`` or with
    the arrays in parameter order (``npukit.c.runtime.Compiled``)."""
    if backend != "c":
        raise NpukitError(f"compile {prog.name}: backend {backend!r} has nothing to compile; "
                          f"use 'c' (or run on the simulator with prog.run('sim', ...))")
    return _c().compiled(prog, fuse)


@functools.cache
def _c():
    """npukit.c, imported on first use (it imports this module)."""
    from . import c
    return c


def _store_input(spec: Layout, image: np.ndarray, a: np.ndarray) -> None:
    """Copy array ``a`` into the flat ``image`` as ``spec`` lays it out. A dim the spec
    broadcasts (stride 0) holds one value for all its indices: it is written once, from
    index 0, as C reads it."""
    keep = [d for d, (n, s) in enumerate(zip(spec.shape, spec.strides)) if s != 0 or n == 1]
    one = Layout(tuple(spec.shape[d] for d in keep), spec.dtype,
                 tuple(spec.strides[d] for d in keep), spec.offset)
    one.view(image)[...] = a[tuple(slice(None) if d in keep else 0 for d in range(spec.rank))]


def _flat(spec: Layout, buf: ir.Buffer, a: np.ndarray) -> bool:
    """True when array ``a`` is, element for element, the flat image of ``buf``."""
    return spec.is_dense() and spec.offset == 0 and spec.size == buf.size and \
        a.flags.c_contiguous


def _run_sim(prog: ir.Program, arrs: dict[str, np.ndarray]) -> Result:
    from .sim.functional import Machine, poison
    from .sim.timing import timeline

    written = {st.dst.buffer.name for st, _ in prog.walk() if hasattr(st, "dst")}
    images = {}
    for buf, spec in prog.params:
        a = arrs[buf.name]
        if buf.role == "in" and buf.name not in written and _flat(spec, buf, a):
            img = a.reshape(-1).view()  # read in place, never written: no copy
            img.flags.writeable = False
        else:
            img = poison(buf.dtype, (buf.size,))
            if buf.role != "out":
                _store_input(spec, img, a)
        images[buf.name] = img
    t0 = time.perf_counter()
    Machine(prog, images).run()
    wall = time.perf_counter() - t0
    outputs = {}
    for buf, spec in prog.params:
        if buf.role != "in":
            arrs[buf.name][...] = spec.view(images[buf.name])
            outputs[buf.name] = arrs[buf.name]
    report = timeline(prog)
    return Result(outputs, report.cycles, report, wall)
