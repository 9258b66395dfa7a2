"""libxsmm's REDUCE_COLS_IDX kinds (``samples/eltwise/eltwise_unary_reduce.c``): each row of
a column-major ``m x N`` block reduced over the columns an index list names, in the
list's order, as one IR program calling one generated C function (its numpy reference
beside it).

- ``op="add"``: ``out[i] = sum over the listed j of x(i, j)``, each addition rounded to
  float32, starting from 0 or, with ``accumulate=True`` (libxsmm's REDUCE_INIT_ACC), from
  ``out[i]``;
- ``op="max"`` / ``"min"``: the largest (smallest) listed value, starting from ``-FLT_MAX``
  (``FLT_MAX``: libxsmm's REDUCE_INF_ACC); with ``argop`` (libxsmm's RECORD_ARGOP) also the
  column it came from, the first one on ties (a row whose values never beat the start
  records the first listed column).

Indices and argop records are ``uint32`` or ``uint64``; every index is checked against
``x`` before anything runs.

>>> import numpy as np
>>> from npukit import tpp
>>> x = np.arange(12, dtype=np.float32)                # 3 x 4, ld 3
>>> out, arg = np.zeros(3, np.float32), np.zeros(3, np.uint32)
>>> tpp.reduce_cols_idx(x, np.array([2, 0], np.uint32), out, m=3, op="max", argop=arg).tolist()
[6.0, 7.0, 8.0]
>>> arg.tolist()
[2, 2, 2]
"""

from __future__ import annotations

import numpy as np

from ..c.runtime import run_c
from ..dtypes import FACTS
from ..errors import OutOfBoundsError
from .errors import OperationNotSupportedError, WrongDimensionError, WrongDtypeError
from .gather import one_call
from .operation import as_flat

REDUCE_IDX_OPS = ("add", "max", "min")
_FLT_MAX = float(np.finfo(np.float32).max)


class _Reference:
    """The reduction in numpy (the simulator's call), folded in the list's order."""

    def __init__(self, op: str, m: int, ld: int, count: int, accumulate: bool, argop: bool):
        self.args = (op, m, ld, count, accumulate, argop)

    def __call__(self, x, idx, out, arg=None) -> None:
        op, m, ld, count, accumulate, argop = self.args
        rows = np.arange(m)
        if op == "add":
            acc = out[:m].copy() if accumulate else np.zeros(m, np.float32)
        else:
            acc = np.full(m, -_FLT_MAX if op == "max" else _FLT_MAX, np.float32)
        best = np.full(m, idx[0], np.uint64)
        for jj in range(count):
            v = x[rows + int(idx[jj]) * ld]
            if op == "add":
                acc = acc + v
                continue
            better = v > acc if op == "max" else v < acc
            acc, best = np.where(better, v, acc), np.where(better, idx[jj], best)
        out[:m] = acc
        if argop:
            arg[:m] = best.astype(arg.dtype)


def _c_source(name: str, op: str, m: int, ld: int, count: int, accumulate: bool,
              index: str, argop: bool) -> str:
    start = {"add": "out[i]" if accumulate else "0.0f", "max": f"-{_FLT_MAX!r}f",
             "min": f"{_FLT_MAX!r}f"}[op]
    args = f"const float *x, const {index} *idx, float *out" + (f", {index} *arg" if argop
                                                                 else "")
    step = ["            acc = acc + v;"] if op == "add" else [
        f"            if (v {'>' if op == 'max' else '<'} acc) {{ acc = v; best = idx[jj]; }}"]
    return "\n".join([
        f"/* libxsmm REDUCE_COLS_IDX_OP_{op.upper()}: {m} rows over {count} listed columns, "
        "in the list's order */",
        f"static void {name}({args})", "{",
        f"    for (int64_t i = 0; i < {m}; ++i) {{",
        f"        float acc = {start};",
        f"        {index} best = idx[0];",
        f"        for (int64_t jj = 0; jj < {count}; ++jj) {{",
        f"            const float v = x[i + (int64_t)idx[jj] * {ld}];", *step, "        }",
        "        out[i] = acc;", "        " + ("arg[i] = best;" if argop else "(void)best;"),
        "    }", "}", ""])


def reduce_cols_idx(x: np.ndarray, idx: np.ndarray, out: np.ndarray, *, m: int,
                    ld: int | None = None, op: str = "add", argop: np.ndarray | None = None,
                    accumulate: bool = False, backend: str = "c", target: str = "torq"):
    """libxsmm's REDUCE_COLS_IDX_OP_ADD / _MAX / _MIN of the rows of ``x`` (column-major,
    leading dimension ``ld``) over the columns ``idx`` lists (see the module). With
    ``backend="c"`` writes ``out`` (and ``argop``) and returns ``out``; ``"sim"`` returns
    the ``Result``."""
    if op not in REDUCE_IDX_OPS:
        raise OperationNotSupportedError(f"op={op!r}; libxsmm reduces listed columns by "
                                         f"{', '.join(REDUCE_IDX_OPS)}")
    if accumulate and op != "add" or argop is not None and op == "add":
        raise OperationNotSupportedError(f"op={op!r}: accumulating into out is add's, "
                                         "recording the argop max's and min's")
    ld = ld or m
    if m < 1 or ld < m:
        raise WrongDimensionError(f"m = {m}, ld = {ld}: m at least 1, ld at least m")
    for name, a in (("x", x), ("idx", idx), ("out", out), ("argop", argop)):
        if a is not None and not isinstance(a, np.ndarray):
            raise WrongDtypeError(f"{name} must be a numpy array, got {type(a).__name__}")
    if idx.dtype not in (np.uint32, np.uint64) or argop is not None and argop.dtype != idx.dtype:
        raise WrongDtypeError(f"idx is {idx.dtype}, argop {getattr(argop, 'dtype', None)}: "
                              "uint32 or uint64 (libxsmm's IDX_SIZE_4BYTES / 8BYTES), the same")
    if x.dtype != np.float32 or out.dtype != np.float32:
        raise WrongDtypeError(f"x is {x.dtype}, out {out.dtype}: both float32")
    count = idx.size
    if count == 0:
        raise WrongDimensionError("idx lists no column; a reduction over every column is "
                                  "an equation's reduce_* kind with reduce='cols'")
    flat_idx = as_flat(idx, "idx", idx.dtype, count)
    top = int(flat_idx.max())
    if (m - 1) + top * ld + 1 > x.size:
        pos = int(np.argmax(flat_idx))
        raise OutOfBoundsError(f"idx[{pos}] = {top} reaches element {(m - 1) + top * ld} of x, "
                               f"which holds {x.size} elements (m = {m}, ld = {ld})")
    name = f"tpp_reduce_cols_idx_{op}"
    params = [("x", np.dtype(np.float32), (m - 1) + top * ld + 1, "in"),
              ("idx", idx.dtype, flat_idx.size, "in"), ("out", np.dtype(np.float32), m, "inout")]
    if argop is not None:
        params.append(("arg", idx.dtype, m, "inout"))
    prog = one_call(name, target, params,
                    _c_source(name, op, m, ld, count, accumulate, FACTS[idx.dtype.name].c_type,
                              argop is not None),
                    _Reference(op, m, ld, count, accumulate, argop is not None),
                    m * count, f"libxsmm reduce_cols_idx {op}, {m} rows")
    arrays = {"x": as_flat(x, "x", x.dtype, params[0][2]), "idx": flat_idx,
              "out": as_flat(out, "out", out.dtype, m, write=True)}
    if argop is not None:
        arrays["arg"] = as_flat(argop, "argop", argop.dtype, m, write=True)
    if backend == "c":
        run_c(prog, arrays)
        return out
    return prog.run(backend, **arrays)


__all__ = ["REDUCE_IDX_OPS", "reduce_cols_idx"]
