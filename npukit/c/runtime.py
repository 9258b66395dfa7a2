"""Running a Program's compiled C on numpy arrays.

The compiled function is cached per Program (and per ``fuse`` choice) for the life of the
Program; the data pointers of the arrays last passed are cached while those arrays live,
because asking numpy for them costs microseconds per array.
"""

from __future__ import annotations

import time
import weakref

import numpy as np

from .. import ir
from ..layout import Layout
from ..run import Result
from . import toolchain
from .emit import c_source, entry_name


class _Kernel:
    """A Program's compiled entry function and the pointers of the arrays it last saw."""

    def __init__(self, prog: ir.Program, fuse: bool):
        self.fn = toolchain.function(c_source(prog, fuse=fuse), entry_name(prog),
                                     len(prog.params))
        self.written = [k for k, (b, _) in enumerate(prog.params) if b.role != "in"]
        # Tensors a basic kernel gets a pointer to: it reads them as plain C types, which
        # must be aligned (the generated code itself needs no alignment).
        pointed = {a.view.buffer.name for st, _ in prog.walk() if isinstance(st, ir.Call)
                   for a in st.args if isinstance(a, ir.Ptr)}
        self.aligned = [(k, b.dtype.itemsize) for k, (b, _) in enumerate(prog.params)
                        if b.name in pointed]
        # (weak references to the arrays, their data pointers, whether they overlap),
        # replaced as a whole so that threads sharing the kernel never mix two calls.
        self.last: tuple[tuple[weakref.ref, ...], list[int], bool] | None = None

    def pointers(self, arrs: list[np.ndarray]) -> list[int] | None:
        """The data pointers of ``arrs``, or None when a written array overlaps another
        (the kernel must then run on copies, as the simulator does) or a basic kernel would
        get a misaligned pointer (it then runs on aligned copies)."""
        last = self.last
        if last is None or any(r() is not a for r, a in zip(last[0], arrs)):
            overlap = any(np.may_share_memory(arrs[k], b)
                          for k in self.written for j, b in enumerate(arrs) if j != k)
            overlap = overlap or any(arrs[k].ctypes.data % size for k, size in self.aligned)
            last = (tuple(weakref.ref(a) for a in arrs), [a.ctypes.data for a in arrs], overlap)
            self.last = last
        return None if last[2] else last[1]


_KERNELS: dict[tuple[int, bool], tuple[weakref.ref, _Kernel]] = {}


def _kernel(prog: ir.Program, fuse: bool) -> _Kernel:
    key = (id(prog), fuse)
    got = _KERNELS.get(key)
    if got is None or got[0]() is not prog:
        got = (weakref.ref(prog, lambda _: _KERNELS.pop(key, None)), _Kernel(prog, fuse))
        _KERNELS[key] = got
    return got[1]


def run_c(prog: ir.Program, arrays: dict[str, np.ndarray], *, fuse: bool = True) -> Result:
    """Run ``prog`` compiled to C on ``arrays`` (already checked against the parameter
    specs, as ``Program.run`` does); outputs are written in place. ``wall_time`` is the time
    of the compiled function's call; ``cycles`` and ``report`` are None.

    >>> import numpy as np, npukit as nk
    >>> from npukit import kernels as K
    >>> prog = nk.build(K.mul_vectorized, target="torq", input1=nk.spec((5,), "int8"),
    ...                 input2=nk.spec((5,), "int8"), bias_scale=nk.spec((2,), "int32"),
    ...                 output=nk.spec((5,), "int8"), shift=0, out_min=-128, out_max=127)
    >>> out = np.zeros(5, np.int8)
    >>> r = prog.run(backend="c", input1=np.arange(5, dtype=np.int8),
    ...              input2=np.full(5, 3, np.int8), bias_scale=np.array([1, 2], np.int32),
    ...              output=out)
    >>> out.tolist()
    [2, 8, 14, 20, 26]
    """
    kernel = _kernel(prog, fuse)
    arrs = [arrays[b.name] for b, _ in prog.params]
    ptrs = kernel.pointers(arrs)
    images = None
    if ptrs is None:
        images = [_image(a, spec) for a, (_, spec) in zip(arrs, prog.params)]
        ptrs = [img.ctypes.data for img, _ in images]
    t0 = time.perf_counter()
    kernel.fn(*ptrs)
    wall = time.perf_counter() - t0
    if images is not None:
        for k in kernel.written:  # in parameter order, as the simulator writes back
            arrs[k][...] = images[k][1]
    outputs = {prog.params[k][0].name: arrs[k] for k in kernel.written}
    return Result(outputs, None, None, wall)


def _image(a: np.ndarray, spec: Layout) -> tuple[np.ndarray, np.ndarray]:
    """A private copy of ``a`` laid out as its spec says: (flat image, view of it)."""
    lay = Layout(spec.shape, spec.dtype, spec.strides, 0)
    flat = np.empty(lay.footprint()[1], a.dtype)
    view = np.lib.stride_tricks.as_strided(flat, lay.shape,
                                           tuple(s * a.itemsize for s in lay.strides))
    view[...] = a
    return flat, view
