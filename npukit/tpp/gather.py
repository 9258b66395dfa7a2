"""libxsmm's GATHER and SCATTER kinds (``samples/eltwise/eltwise_unary_gather_scatter.c``):
an ``m x n`` block copied through an index list, as one IR program calling one generated C
function (its numpy reference beside it).

- ``by="cols"``: gather ``out(i, c) = in(i, idx[c])``; scatter ``out(i, idx[c]) = in(i, c)``;
- ``by="rows"``: gather ``out(r, j) = in(idx[r], j)``; scatter ``out(idx[r], j) = in(r, j)``;
- ``by="offs"``: gather ``out(i, j) = in_flat[idx[i + j * m]]``; scatter
  ``out_flat[idx[i + j * m]] = in(i, j)``;

where ``m x n`` is the block of the side that is not indexed (the output of a gather, the
input of a scatter). Indices are libxsmm's unsigned 4- or 8-byte integers (``uint32`` or
``uint64``); every index is checked against the indexed array before anything runs, so no
index can make the kernel read or write outside it. Elements are float32 or bfloat16.

>>> import numpy as np
>>> from npukit import tpp
>>> src = np.arange(12, dtype=np.float32)            # 3 x 4, ld 3
>>> out = np.zeros(6, np.float32)
>>> tpp.gather(src, np.array([3, 0], np.uint32), out, m=3, n=2, by="cols").tolist()
[9.0, 10.0, 11.0, 0.0, 1.0, 2.0]
"""

from __future__ import annotations

import numpy as np

from .. import ir
from ..c.runtime import run_c
from ..dtypes import FACTS
from ..errors import OutOfBoundsError
from ..layout import Layout
from ..machine import target as _target
from .errors import OperationNotSupportedError, WrongDimensionError, WrongDtypeError
from .operation import as_flat

GATHER_MODES = ("rows", "cols", "offs")


def _c_source(name: str, gather: bool, by: str, m: int, n: int, ld_in: int, ld_out: int,
              elem: str, index: str) -> str:
    ld_idx, ld_plain = (ld_in, ld_out) if gather else (ld_out, ld_in)
    indexed = {"cols": f"i + (int64_t)idx[j] * {ld_idx}",
               "rows": f"(int64_t)idx[i] + j * {ld_idx}",
               "offs": f"(int64_t)idx[i + j * {m}]"}[by]
    plain = f"i + j * {ld_plain}"
    dst, src = ("out[" + plain + "]", "in[" + indexed + "]") if gather else \
        ("out[" + indexed + "]", "in[" + plain + "]")
    what = "gather" if gather else "scatter"
    return "\n".join([
        f"/* libxsmm {what.upper()} by {by}: the {m} x {n} block, indices checked before the "
        "call */",
        f"static void {name}(const {elem} *in, const {index} *idx, {elem} *out)", "{",
        f"    for (int64_t j = 0; j < {n}; ++j)",
        f"        for (int64_t i = 0; i < {m}; ++i)",
        f"            {dst} = {src};", "}", ""])


class _Reference:
    """The same copy in numpy (the simulator's call)."""

    def __init__(self, gather: bool, by: str, m: int, n: int, ld_in: int, ld_out: int):
        self.args = (gather, by, m, n, ld_in, ld_out)

    def __call__(self, inp, idx, out) -> None:
        gather, by, m, n, ld_in, ld_out = self.args
        i, j = np.meshgrid(np.arange(m), np.arange(n), indexing="ij")
        ld_idx, ld_plain = (ld_in, ld_out) if gather else (ld_out, ld_in)
        ix = idx.astype(np.int64)
        if by == "cols":
            indexed = i + ix[j] * ld_idx
        elif by == "rows":
            indexed = ix[i] + j * ld_idx
        else:
            indexed = ix[i + j * m]
        plain = i + j * ld_plain
        if gather:
            out[plain] = inp[indexed]
        else:
            out[indexed] = inp[plain]


def _move(gather: bool, inp, idx, out, m: int, n: int, ld_in: int | None,
          ld_out: int | None, by: str, backend: str, target: str):
    if by not in GATHER_MODES:
        raise OperationNotSupportedError(f"by={by!r}; libxsmm gathers and scatters by "
                                         f"{', '.join(GATHER_MODES)}")
    if min(m, n) < 1:
        raise WrongDimensionError(f"the block is {m} x {n}; both at least 1")
    ld_in, ld_out = ld_in or m, ld_out or m
    if ld_in < m or ld_out < m:
        raise WrongDimensionError(f"ld_in = {ld_in}, ld_out = {ld_out}: below m = {m}")
    for name, a in (("in", inp), ("out", out), ("idx", idx)):
        if not isinstance(a, np.ndarray):
            raise WrongDtypeError(f"{name} must be a numpy array, got {type(a).__name__}")
    if idx.dtype not in (np.uint32, np.uint64):
        raise WrongDtypeError(f"idx has dtype {idx.dtype}; libxsmm's indices are uint32 or "
                              "uint64 (IDX_SIZE_4BYTES, IDX_SIZE_8BYTES)")
    dt = inp.dtype
    if dt.name not in ("float32", "bfloat16") or out.dtype != dt:
        raise WrongDtypeError(f"in is {dt}, out {out.dtype}; both float32 or both bfloat16")
    count = {"cols": n, "rows": m, "offs": m * n}[by]
    ld_idx, ld_plain = (ld_in, ld_out) if gather else (ld_out, ld_in)
    plain_size = (m - 1) + (n - 1) * ld_plain + 1
    indexed_arr = inp if gather else out
    flat_idx = as_flat(idx, "idx", idx.dtype, count)
    # The indexed array's extent: the largest index reaches this element.
    top = int(flat_idx.max())
    reach = {"cols": (m - 1) + top * ld_idx, "rows": top + (n - 1) * ld_idx,
             "offs": top}[by] + 1
    if reach > indexed_arr.size:
        pos = int(np.argmax(flat_idx))
        raise OutOfBoundsError(
            f"idx[{pos}] = {top} reaches element {reach - 1} of "
            f"{'in' if gather else 'out'}, which holds {indexed_arr.size} elements "
            f"({by}, block {m} x {n}, ld {ld_idx})")
    sizes = (reach, plain_size) if gather else (plain_size, reach)
    elem, index = FACTS[dt.name].c_type, FACTS[idx.dtype.name].c_type
    name = f"tpp_{'gather' if gather else 'scatter'}_{by}"
    prog = one_call(name, target, (("in", dt, sizes[0], "in"), ("idx", idx.dtype, count, "in"),
                                   ("out", dt, sizes[1], "inout")),
                    _c_source(name, gather, by, m, n, ld_in, ld_out, elem, index),
                    _Reference(gather, by, m, n, ld_in, ld_out), m * n,
                    f"libxsmm {name[4:]} {m} x {n}")
    arrays = {"in": as_flat(inp, "in", dt, sizes[0]), "idx": flat_idx,
              "out": as_flat(out, "out", dt, sizes[1], write=True)}
    if backend == "c":
        run_c(prog, arrays)
        return out
    return prog.run(backend, **arrays)


class _Count:
    """A call's cost: ``steps`` on the simulator's unit."""

    def __init__(self, steps: int):
        self.steps = steps

    def __call__(self, *_, **__) -> int:
        return self.steps


def one_call(name: str, target, params, c_source: str, reference, steps: int,
             label: str) -> ir.Program:
    """A program of one call of one generated C function: ``params`` are (name, dtype,
    elements, role), the function's arguments in order."""
    tgt = _target(target)
    bufs = tuple(ir.Buffer(p, tgt.home, np.dtype(dt), size, role) for p, dt, size, role in params)
    ext = ir.Extern(name, tuple((("const " if b.role == "in" else "") +
                                 f"{FACTS[b.dtype.name].c_type} *", b.name) for b in bufs),
                    False, c_source, reference, _Count(steps))
    call = ir.Call(ext, tuple(ir.Ptr(ir.View(b, Layout((1,), b.dtype), ir.Affine()))
                              for b in bufs), label)
    return ir.Program(name, tgt, tuple((b, Layout((b.size,), b.dtype)) for b in bufs), (),
                      (call,), source=label)


def gather(inp: np.ndarray, idx: np.ndarray, out: np.ndarray, *, m: int, n: int,
           ld_in: int | None = None, ld_out: int | None = None, by: str = "rows",
           backend: str = "c", target: str = "torq"):
    """libxsmm's GATHER into the ``m x n`` block of ``out`` (see the module). With
    ``backend="c"`` writes ``out`` and returns it; ``"sim"`` returns the ``Result``."""
    return _move(True, inp, idx, out, m, n, ld_in, ld_out, by, backend, target)


def scatter(inp: np.ndarray, idx: np.ndarray, out: np.ndarray, *, m: int, n: int,
            ld_in: int | None = None, ld_out: int | None = None, by: str = "rows",
            backend: str = "c", target: str = "torq"):
    """libxsmm's SCATTER of the ``m x n`` block of ``inp`` into ``out`` (see the module);
    elements of ``out`` no index names keep their values."""
    return _move(False, inp, idx, out, m, n, ld_in, ld_out, by, backend, target)


__all__ = ["GATHER_MODES", "gather", "one_call", "scatter"]
