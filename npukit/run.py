"""``Program.run(backend="sim", ...)``: check the arrays against the parameter specs, run
the simulator's functional model on images of them, write the outputs back into the arrays
it is given, and return a ``Result`` with the cycle model's report. Registered with the IR
as the back end ``"sim"`` when npukit is imported."""

from __future__ import annotations

import time

import numpy as np

from . import ir
from .layout import Layout
from .poison import poison
from .result import Result, check_arrays
from .sim.functional import Machine
from .sim.timing import timeline

__all__ = ["Result", "check_arrays"]  # where they were first defined; kept importable here


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


def _run_sim(prog: ir.Program, arrays: dict) -> Result:
    arrs = check_arrays(prog, arrays)
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


ir.register_backend("sim", _run_sim)
