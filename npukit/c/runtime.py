"""Running a Program's compiled C on numpy arrays: the compiled handle.

``prog.compile("c")`` returns a ``Compiled``: the program's entry function, compiled (or
found in the cache) once, with what checking an array against each parameter's spec needs
worked out once — dtype, shape, byte strides, whether it is written. A call checks each
array with a few comparisons (any mismatch goes through ``npukit.result.check_arrays``, which
raises the error naming the tensor), takes the arrays' data pointers (cached while the
same arrays are passed again: numpy takes about a microsecond to report one), and calls the
entry function. A scalar parameter passed as a Python ``int`` or ``float`` is written into
a buffer the handle keeps (one per thread), so it allocates nothing. ``Program.run(
backend="c", ...)`` calls the program's handle; it is kept for the life of the Program.
"""

from __future__ import annotations

import threading
import time
import weakref

import numpy as np

from .. import ir
from ..dtypes import int_range, is_float
from ..errors import NpukitError
from ..layout import Layout
from ..result import Result, check_arrays
from . import toolchain
from .emit import c_source, entry_name


class _Param:
    """What a call checks of one parameter's array, worked out once."""

    def __init__(self, buf: ir.Buffer, spec: Layout):
        self.name, self.dtype, self.shape = buf.name, spec.dtype, spec.shape
        self.strides = tuple(s * spec.dtype.itemsize for s in spec.strides)
        self.written = buf.role != "in"
        self.scalar = spec.shape == ()
        # the Python numbers a scalar parameter takes without allocating: ints in range
        # for an integer type, ints and floats for a float type
        self.numbers = (int,) if spec.dtype.kind in "iu" else \
            (int, float) if is_float(spec.dtype) else ()
        self.range = int_range(spec.dtype) if spec.dtype.kind in "iu" else None

    def number(self, a) -> bool:
        """True when ``a`` is a Python number this scalar parameter takes as is."""
        if not self.scalar or type(a) not in self.numbers:
            return False
        return self.range is None or type(a) is not int or self.range[0] <= a <= self.range[1]


def _checker(params: list[_Param]):
    """``check(arrays, refs)``: the arrays (a dict by parameter name) in parameter order
    and whether each is the array ``refs`` (weak references) refers to, or None when one is
    not a numpy array with exactly its spec's dtype, shape, byte strides and (when written)
    writability. Generated once per handle as straight-line Python: a loop over the
    parameters costs about a microsecond more per call."""
    env = {"ndarray": np.ndarray}
    lines = ["def check(arrays, refs):"]
    for k, p in enumerate(params):
        env[f"dt{k}"] = p.dtype
        a = f"a{k}"
        test = (f"type({a}) is not ndarray or ({a}.dtype is not dt{k} and {a}.dtype != dt{k})"
                f" or {a}.shape != {p.shape!r} or {a}.strides != {p.strides!r}")
        if p.written:
            test += f" or not {a}.flags.writeable"
        lines += [f"    {a} = arrays.get({p.name!r})", f"    if {test}:", "        return None"]
    names = [f"a{k}" for k in range(len(params))]
    same = " and ".join(f"refs[{k}]() is a{k}" for k in range(len(params))) or "True"
    lines.append(f"    return [{', '.join(names)}], {same}")
    exec("\n".join(lines), env)  # noqa: S102 - code from the specs' numbers, names as reprs
    return env["check"]


class Compiled:
    """A Program compiled to C, callable on arrays: ``fn(**arrays)`` by parameter name, or
    ``fn(a, b, ...)`` in parameter order (or both). Outputs are written in place; the
    result is a ``Result`` whose ``wall_time`` is the entry function's call.

    >>> import numpy as np, npukit as nk
    >>> from npukit import kernels as K
    >>> prog = nk.build(K.mul, target="torq", input1=nk.spec((4,), "int8"),
    ...                 input2=nk.spec((4,), "int8"), bias_scale=nk.spec((2,), "int32"),
    ...                 output=nk.spec((4,), "int8"), shift=0, out_min=-128, out_max=127)
    >>> fn = prog.compile("c")
    >>> out = np.zeros(4, np.int8)
    >>> res = fn(np.arange(4, dtype=np.int8), np.full(4, 3, np.int8),
    ...          np.array([1, 2], np.int32), out)
    >>> out.tolist(), res.outputs["output"] is out
    ([2, 8, 14, 20], True)
    """

    def __init__(self, prog: ir.Program, fuse: bool = True):
        self.prog = prog
        self.fn = toolchain.function(c_source(prog, fuse=fuse), entry_name(prog),
                                     len(prog.params))
        self.params = [_Param(b, spec) for b, spec in prog.params]
        self.names = [p.name for p in self.params]
        self.check = _checker(self.params)
        self.written = [k for k, p in enumerate(self.params) if p.written]
        # Tensors a basic kernel gets a pointer to: it reads them as plain C types, which
        # must be aligned (the generated code itself needs no alignment).
        pointed = {a.view.buffer.name for st, _ in prog.walk() if isinstance(st, ir.Call)
                   for a in st.args if isinstance(a, ir.Ptr)}
        self.aligned = [(k, b.dtype.itemsize) for k, (b, _) in enumerate(prog.params)
                        if b.name in pointed]
        # (weak references to the arrays, their data pointers, whether they overlap),
        # replaced as a whole so that threads sharing the handle never mix two calls.
        self.last: tuple[tuple, list[int], bool] = ((_gone,) * len(self.params), [], False)
        self.local = threading.local()  # this thread's buffers for scalars passed as numbers

    def __call__(self, *args, **arrays) -> Result:
        if args:
            arrays = dict(zip(self.names, args)) if not arrays and \
                len(args) == len(self.names) else self._by_name(args, arrays)
        res = self._fast(arrays)
        return res if res is not None else self._slow(arrays)

    def run(self, arrays: dict[str, np.ndarray]) -> Result:
        """Run on ``arrays`` already checked against the specs (``check_arrays``)."""
        return self._call([arrays[n] for n in self.names], None)

    def _fast(self, arrays: dict) -> Result | None:
        """The call, when every array is exactly as its spec says; else None."""
        last = self.last
        got = self.check(arrays, last[0]) if len(arrays) == len(self.params) else None
        if got is None:
            return None
        if self.prog.bounds:
            check_arrays(self.prog, arrays)  # the values a parameter may take
        return self._call(got[0], last if got[1] else None)

    def _slow(self, arrays: dict) -> Result:
        """A call the generated check did not accept as it is: Python numbers for scalar
        parameters go into this thread's scalar buffers (then it usually is); anything else
        goes through ``check_arrays``, which accepts it (a size-1 dim with another stride,
        an array subclass, ...) or raises the error naming the tensor."""
        numbers = {p.name: self._scalar(p, arrays[p.name]) for p in self.params
                   if p.number(arrays.get(p.name))}
        if numbers:
            arrays = {**arrays, **numbers}
            res = self._fast(arrays)
            if res is not None:
                return res
        return self.run(check_arrays(self.prog, arrays))

    def _by_name(self, args: tuple, arrays: dict) -> dict:
        """Arrays passed in parameter order, joined to those passed by name."""
        if len(args) > len(self.names):
            raise NpukitError(f"run {self.prog.name}: {len(args)} arrays passed in order, "
                              f"but it has {len(self.names)} parameters {self.names}")
        twice = [n for n in self.names[:len(args)] if n in arrays]
        if twice:
            raise NpukitError(f"run {self.prog.name}: {twice} passed both in order and by name")
        arrays.update(zip(self.names, args))
        return arrays

    def _scalar(self, p: _Param, value) -> np.ndarray:
        """This thread's 0-d buffer of parameter ``p``, holding ``value``."""
        bufs = getattr(self.local, "scalars", None)
        if bufs is None:
            bufs = self.local.scalars = {}
        buf = bufs.get(p.name)
        if buf is None:
            buf = bufs[p.name] = np.zeros((), p.dtype)
        buf[()] = value
        return buf

    def _call(self, arrs: list[np.ndarray], last) -> Result:
        """Call the entry function on ``arrs``; ``last`` is ``self.last`` when it holds
        their pointers (the same arrays as a call before), else None."""
        if last is None:
            overlap = any(np.may_share_memory(arrs[k], b)
                          for k in self.written for j, b in enumerate(arrs) if j != k)
            overlap = overlap or any(arrs[k].ctypes.data % size for k, size in self.aligned)
            last = (tuple(weakref.ref(a) for a in arrs), [a.ctypes.data for a in arrs], overlap)
            self.last = last
        ptrs = last[1]
        images = None
        if last[2]:  # a written array overlaps another, or a basic kernel needs alignment:
            # run on private copies laid out as the specs say, as the simulator does
            images = [_image(a, spec) for a, (_, spec) in zip(arrs, self.prog.params)]
            ptrs = [img.ctypes.data for img, _ in images]
        t0 = time.perf_counter()
        self.fn(*ptrs)
        wall = time.perf_counter() - t0
        if images is not None:
            for k in self.written:  # in parameter order, as the simulator writes back
                arrs[k][...] = images[k][1]
        return Result({self.names[k]: arrs[k] for k in self.written}, None, None, wall)


def _gone():
    """A dead weak reference: no array is cached before the first call."""
    return None


def compiled(prog: ir.Program, fuse: bool = True) -> Compiled:
    """The handle of ``prog``, compiled on first use and kept on the program (a memo that
    lives and dies with it, and that pickling leaves behind)."""
    memo = prog.__dict__.get(_MEMO)
    if memo is None:
        memo = prog.__dict__.setdefault(_MEMO, {})
    got = memo.get(fuse)
    if got is None:
        got = memo[fuse] = Compiled(prog, fuse)
    return got


_MEMO = "_compiled_c"  # npukit.ir.Program.__getstate__ leaves it out


def run_c(prog: ir.Program, arrays: dict, *, fuse: bool = True) -> Result:
    """Run ``prog`` compiled to C on ``arrays`` (checked against the parameter specs, as
    ``Program.run`` does); outputs are written in place. ``wall_time`` is the time of the
    compiled function's call; ``cycles`` and ``report`` are None.

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
    memo = prog.__dict__.get(_MEMO)
    if memo is None or fuse not in memo:  # bad arrays are named before anything compiles
        arrays = check_arrays(prog, arrays)
    return compiled(prog, fuse)(**arrays)


def _image(a: np.ndarray, spec: Layout) -> tuple[np.ndarray, np.ndarray]:
    """A private copy of ``a`` laid out as its spec says: (flat image, view of it)."""
    lay = Layout(spec.shape, spec.dtype, spec.strides, 0)
    flat = np.empty(lay.footprint()[1], a.dtype)
    view = np.lib.stride_tricks.as_strided(flat, lay.shape,
                                           tuple(s * a.itemsize for s in lay.strides))
    view[...] = a
    return flat, view
