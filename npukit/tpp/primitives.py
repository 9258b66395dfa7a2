"""The TPP primitives: generated C, a numpy reference, and a call on numpy arrays.

A primitive works on column-major blocks given by a pointer and a leading dimension, as in
the TPP text: element ``(i, j)`` of an ``m x n`` block ``a`` with leading dimension ``lda``
is ``a[i + j * lda]`` of the flat buffer.

- unary (``UNARY``): ``b = f(a)``, or with ``trans_b`` ``b = f(a)^T`` (``b`` is ``n x m``);
  arguments ``(a, b, m, n, lda, ldb)``;
- binary (``BINARY``): ``c = op(a, b)``; arguments ``(a, b, c, m, n, lda, ldb, ldc)``;
  never transposed (the TPP text: "Transposition for add primitive is not supported");
- ``gemm``: ``c += a b`` (``a`` m x k, ``b`` k x n, ``c`` m x n); arguments
  ``(a, b, c, m, n, k, lda, ldb, ldc)``; ``trans_a`` / ``trans_b`` read ``a`` / ``b``
  stored transposed; float32, bfloat16 or float16 inputs, float32 ``c``;
- ``bias``: ``b = a`` read with a row stride too: ``b(i, j) = a[i * inca + j * lda]``
  (libxsmm's identity with a broadcast flag: ``inca = 0`` repeats a row, ``lda = 0`` a
  column, both a scalar); arguments ``(a, b, m, n, inca, lda, ldb)``;
- reduction (``REDUCE``, libxsmm's REDUCE_X kinds): ``b[j]`` = the reduction of column
  ``j`` of ``a`` over its ``m`` rows (libxsmm's REDUCE_ROWS), or with ``reduce_cols``
  ``b[i]`` = that of row ``i`` over its ``n`` columns; arguments ``(a, b, m, n, lda)``;
- ``brgemm``: ``c += sum_r a_r b_r`` over ``br`` pairs ``a_r = a + r * br_stride_a``,
  ``b_r = b + r * br_stride_b``; arguments ``(a, b, c, m, n, k, br, lda, ldb, ldc,
  br_stride_a, br_stride_b)``.

Numerics: every unary and binary primitive computes in float32 exactly as its reference
(bit for bit: each operation rounds once, ``-ffp-contract=off``), with IEEE division
(``1/0 = inf``, ``1/-0 = -inf``, ``0/0 = nan``) and NaN kept by ``relu``, ``min`` and
``max`` as numpy's ``maximum``/``minimum`` keep it. gemm sums with fused multiply-adds in
blocks of k; its error against the exact sum is within the usual bound
``|c - c_exact| <= (k' + 2) u (|c0| + sum |a||b|)``, ``u = 2^-24``, ``k'`` the products
per element (``k * br``).

>>> import numpy as np
>>> relu = Primitive("relu")
>>> a = np.array([-1.0, 2.0, -3.0, 4.0], np.float32)
>>> b = np.zeros(4, np.float32)
>>> relu(a, b, m=2, n=2).tolist()
[0.0, 2.0, 0.0, 4.0]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import ir
from ..c import toolchain
from ..dtypes import FACTS
from ..dtypes import dtype as _dtype
from ..errors import OutOfBoundsError
from ..lut import sigmoid as _sig
from . import csource
from .errors import (
    OperationNotSupportedError,
    WrongDimensionError,
    WrongDtypeError,
    WrongPrimitiveError,
)
from .formulas import LIBXSMM_BINARY, LIBXSMM_REDUCE, LIBXSMM_UNARY

UNARY = tuple(csource.UNARY_DOC)
BINARY = tuple(csource.BINARY_EXPR)
REDUCE = tuple(LIBXSMM_REDUCE)
GEMMS = ("gemm", "brgemm")
PRIMITIVES = UNARY + BINARY + REDUCE + GEMMS + ("bias",)

_F32 = np.float32


def _interp_sigmoid(x: np.ndarray) -> np.ndarray:
    """The table sigmoid of ``npukit.lut``, with NaN in giving NaN out."""
    nan = np.isnan(x)
    return np.where(nan, x, _sig.table_sigmoid(np.where(nan, _F32(0), x)))


UNARY_REF = {
    "zero": lambda x: np.zeros_like(x),
    "identity": lambda x: x.copy(),
    "relu": lambda x: np.maximum(x, _F32(0)),
    "square": lambda x: x * x,
    "reciprocal": lambda x: _F32(1) / x,
    "increment": lambda x: x + _F32(1),
    "decrement": lambda x: x - _F32(1),
    "fast_sigmoid": _sig.fast_sigmoid,
    "taylor_sigmoid": _sig.taylor_sigmoid,
    "interp_sigmoid": _interp_sigmoid,
} | {name: f.reference for name, f in LIBXSMM_UNARY.items()}
BINARY_REF = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
              "min": np.minimum, "max": np.maximum} | \
    {name: f.reference for name, f in LIBXSMM_BINARY.items()}

_SCALARS = {
    "unary": ("m", "n", "lda", "ldb"),
    "bias": ("m", "n", "inca", "lda", "ldb"),
    "reduce": ("m", "n", "lda"),
    "binary": ("m", "n", "lda", "ldb", "ldc"),
    "gemm": ("m", "n", "k", "lda", "ldb", "ldc"),
    "brgemm": ("m", "n", "k", "br", "lda", "ldb", "ldc", "br_stride_a", "br_stride_b"),
}
_ARRAYS = {"unary": ("a", "b"), "bias": ("a", "b"), "reduce": ("a", "b"),
           "binary": ("a", "b", "c"),
           "gemm": ("a", "b", "c"),
           "brgemm": ("a", "b", "c")}


def kind(name: str) -> str:
    """``"unary"``, ``"binary"``, ``"reduce"``, ``"bias"``, ``"gemm"`` or ``"brgemm"``;
    ``WrongPrimitiveError`` for a name that is no TPP primitive."""
    if not isinstance(name, str) or name not in PRIMITIVES:
        raise WrongPrimitiveError(f"unknown TPP primitive {name!r}; the primitives are "
                                  f"{', '.join(PRIMITIVES)}")
    return "unary" if name in UNARY else "binary" if name in BINARY else \
        "reduce" if name in REDUCE else name


def _view(flat: np.ndarray, rows: int, cols: int, row_stride: int, col_stride: int):
    """The ``rows x cols`` matrix of ``flat`` with element (i, j) at
    ``i * row_stride + j * col_stride``."""
    s = flat.itemsize
    return np.lib.stride_tricks.as_strided(flat, (rows, cols), (row_stride * s, col_stride * s))


def footprint(rows: int, cols: int, ld: int) -> int:
    """Elements a column-major ``rows x cols`` block with leading dimension ``ld`` spans."""
    return (rows - 1) + (cols - 1) * ld + 1


@dataclass(frozen=True)
class Primitive:
    """One TPP primitive and variant. ``trans_b`` transposes a unary primitive's output, or
    reads gemm's ``b`` stored transposed; ``trans_a`` reads gemm's ``a`` stored transposed;
    ``dtype`` is the input dtype (bfloat16 and float16 only for gemm and brgemm, which then
    accumulate in float32); ``blocking`` = (MC, KC, NC) overrides gemm's cache blocking;
    ``reduce_cols`` makes a reduction run over the columns (one result per row).

    >>> Primitive("add", trans_b=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    npukit.tpp.errors.OperationNotSupportedError: Transposition for add primitive is not ...
    """

    name: str
    trans_a: bool = False
    trans_b: bool = False
    dtype: str = "float32"
    blocking: tuple[int, int, int] | None = None
    reduce_cols: bool = False

    def __post_init__(self):
        k = kind(self.name)
        for flag in ("trans_a", "trans_b", "reduce_cols"):
            if not isinstance(getattr(self, flag), (bool, np.bool_)):
                raise OperationNotSupportedError(f"primitive {self.name}: {flag} must be True "
                                                 f"or False, got {getattr(self, flag)!r}")
        if k == "binary" and self.trans_b:
            raise OperationNotSupportedError(f"Transposition for {self.name} primitive is not "
                                             f"supported (binary primitives are never "
                                             f"transposed)")
        if k == "bias" and self.trans_b:
            raise OperationNotSupportedError("Transposition for bias primitive is not "
                                             "supported (its strides say where it reads)")
        if k == "reduce" and (self.trans_a or self.trans_b):
            raise OperationNotSupportedError(f"Transposition for {self.name} primitive is not "
                                             f"supported (reduce_cols picks the direction)")
        if k != "reduce" and self.reduce_cols:
            raise OperationNotSupportedError(f"primitive {self.name} has no reduce_cols: only "
                                             f"the reductions ({', '.join(REDUCE)}) take it")
        if k in ("unary", "binary", "bias") and self.trans_a:
            raise OperationNotSupportedError(f"primitive {self.name} has no trans_a: only gemm "
                                             f"and brgemm read a transposed input a")
        allowed = csource.GEMM_DTYPES if k in GEMMS else ("float32",)
        if not isinstance(self.dtype, str) or self.dtype not in allowed:
            raise WrongDtypeError(f"primitive {self.name}: dtype {self.dtype!r} is not "
                                  f"supported; it takes {', '.join(allowed)}")
        if self.blocking is not None:
            ok = k in GEMMS and isinstance(self.blocking, tuple) and len(self.blocking) == 3 \
                and all(isinstance(x, int) and 1 <= x <= 1 << 20 for x in self.blocking)
            if not ok:
                raise WrongDimensionError(f"primitive {self.name}: blocking must be None or "
                                          f"(MC, KC, NC), each 1..2^20, for gemm and brgemm "
                                          f"only; got {self.blocking!r}")

    # -- what it is ----------------------------------------------------------------------

    @property
    def kind(self) -> str:
        return kind(self.name)

    @property
    def c_name(self) -> str:
        """The C function: ``tpp_relu_trans``, ``tpp_gemm_nt_float32``, ..."""
        if self.kind in GEMMS:
            return csource.gemm_name(self.trans_a, self.trans_b, self.dtype, self.blocking,
                                     br=self.kind == "brgemm")
        if self.kind == "reduce":
            return csource.reduce_name(self.name, self.reduce_cols)
        return csource.c_name(self.name, self.trans_b)

    @property
    def c_source(self) -> str:
        """The C that defines ``c_name`` (and, for gemm/brgemm, its sibling)."""
        if self.kind in GEMMS:
            return csource.gemm_source(self.trans_a, self.trans_b, self.dtype, self.blocking)
        if self.kind == "unary":
            return csource.unary_source(self.name, self.trans_b)
        if self.kind == "bias":
            return csource.bias_source()
        if self.kind == "reduce":
            return csource.reduce_source(self.name, self.reduce_cols)
        return csource.binary_source(self.name)

    @property
    def arrays(self) -> tuple[str, ...]:
        return _ARRAYS[self.kind]

    @property
    def scalars(self) -> tuple[str, ...]:
        return _SCALARS[self.kind]

    @property
    def c_args(self) -> tuple[tuple[str, str], ...]:
        """(C type, name) of each argument, in order."""
        elem = FACTS[self.dtype].c_type
        if self.kind in ("unary", "bias", "reduce"):
            ptrs = (("const float *", "a"), ("float *", "b"))
        else:
            ptrs = ((f"const {elem} *", "a"), (f"const {elem} *", "b"), ("float *", "c"))
        return ptrs + tuple(("int64_t", s) for s in self.scalars)

    def flops(self, **scalars: int) -> int:
        """Floating-point operations of one call: 2 m n k br for gemm, m n otherwise."""
        m, n = scalars["m"], scalars["n"]
        if self.kind in GEMMS:
            return 2 * m * n * scalars["k"] * scalars.get("br", 1)
        return m * n

    def defaults(self, **scalars: int) -> dict[str, int]:
        """``scalars`` completed with the dense leading dimensions and batch strides."""
        s = dict(scalars)
        m, n = s["m"], s["n"]
        if self.kind == "unary":
            s.setdefault("lda", m)
            s.setdefault("ldb", n if self.trans_b else m)
        elif self.kind == "reduce":
            s.setdefault("lda", m)
        elif self.kind == "bias":
            s.setdefault("inca", 1)
            s.setdefault("lda", m)
            s.setdefault("ldb", m)
        elif self.kind == "binary":
            for ld in ("lda", "ldb", "ldc"):
                s.setdefault(ld, m)
        else:
            k = s.setdefault("k", 1)
            s.setdefault("lda", k if self.trans_a else m)
            s.setdefault("ldb", n if self.trans_b else k)
            s.setdefault("ldc", m)
            if self.kind == "brgemm":
                s.setdefault("br", 1)
                s.setdefault("br_stride_a", s["lda"] * (m if self.trans_a else k))
                s.setdefault("br_stride_b", s["ldb"] * (k if self.trans_b else n))
        return s

    def spans(self, **scalars: int) -> dict[str, int]:
        """Elements each array must hold for a call with ``scalars`` (all given)."""
        s = scalars
        m, n = s["m"], s["n"]
        if self.kind == "unary":
            out = (n, m) if self.trans_b else (m, n)
            return {"a": footprint(m, n, s["lda"]), "b": footprint(*out, s["ldb"])}
        if self.kind == "bias":
            return {"a": (m - 1) * s["inca"] + (n - 1) * s["lda"] + 1,
                    "b": footprint(m, n, s["ldb"])}
        if self.kind == "reduce":
            return {"a": footprint(m, n, s["lda"]), "b": m if self.reduce_cols else n}
        if self.kind == "binary":
            return {x: footprint(m, n, s[f"ld{x}"]) for x in "abc"}
        k, br = s["k"], s.get("br", 1)
        a_shape = (k, m) if self.trans_a else (m, k)
        b_shape = (n, k) if self.trans_b else (k, n)
        return {"a": (br - 1) * s.get("br_stride_a", 0) + footprint(*a_shape, s["lda"]),
                "b": (br - 1) * s.get("br_stride_b", 0) + footprint(*b_shape, s["ldb"]),
                "c": footprint(m, n, s["ldc"])}

    # -- the numpy reference -------------------------------------------------------------

    def reference(self, *arrays: np.ndarray, **scalars: int) -> np.ndarray:
        """The primitive in numpy on flat buffers (written in place; returns the output).
        gemm sums in float64 and rounds once."""
        s = self.defaults(**scalars)
        m, n = s["m"], s["n"]
        with np.errstate(all="ignore"):
            if self.kind == "unary":
                a, b = arrays
                x = _view(a, m, n, 1, s["lda"])
                y = _view(b, m, n, s["ldb"], 1) if self.trans_b else _view(b, m, n, 1, s["ldb"])
                y[...] = UNARY_REF[self.name](x)
                return b
            if self.kind == "bias":
                a, b = arrays
                _view(b, m, n, 1, s["ldb"])[...] = UNARY_REF["identity"](
                    _view(a, m, n, s["inca"], s["lda"]))
                return b
            if self.kind == "reduce":
                a, b = arrays
                x = _view(a, m, n, 1, s["lda"])
                out = LIBXSMM_REDUCE[self.name].reference(x, 1 if self.reduce_cols else 0)
                b[:out.size] = out
                return b
            if self.kind == "binary":
                a, b, c = arrays
                _view(c, m, n, 1, s["ldc"])[...] = BINARY_REF[self.name](
                    _view(a, m, n, 1, s["lda"]), _view(b, m, n, 1, s["ldb"]))
                return c
            a, b, c = arrays
            k = s["k"]
            acc = np.zeros((m, n), np.float64)
            for r in range(s.get("br", 1)):
                ar = a[r * s.get("br_stride_a", 0):]
                br_ = b[r * s.get("br_stride_b", 0):]
                x = _view(ar, m, k, s["lda"], 1) if self.trans_a else _view(ar, m, k, 1, s["lda"])
                y = _view(br_, k, n, 1, s["ldb"]) if not self.trans_b else \
                    _view(br_, k, n, s["ldb"], 1)
                acc += x.astype(np.float64) @ y.astype(np.float64)
            cv = _view(c, m, n, 1, s["ldc"])
            cv[...] = (cv.astype(np.float64) + acc).astype(np.float32)
            return c

    def _positional_reference(self, *args) -> None:
        """``reference`` with the C argument order (what the simulator calls)."""
        na = len(self.arrays)
        self.reference(*args[:na], **dict(zip(self.scalars, (int(x) for x in args[na:]))))

    # -- the IR and the C back end -------------------------------------------------------

    def extern(self, target) -> ir.Extern:
        """The primitive as an ``ir.Extern`` for ``target``: its C, its numpy reference, and
        its cost on the target's first compute unit (the one the cycle model runs calls
        on): ``ceil(m / width) * n`` instructions, times ``k * br`` for gemm, ``width`` the
        unit's vector width for the dtypes."""
        unit = next(iter(target.units.values()))
        pair = (self.dtype, None) if self.kind in ("unary", "bias", "reduce") else \
            (self.dtype, self.dtype)
        width = unit.width(*pair)
        gemm = self.kind in GEMMS

        def cost(m=1, n=1, k=1, br=1, **_):
            return math.ceil(m / width) * n * (k * br if gemm else 1)

        return ir.Extern(self.c_name, self.c_args, False, self.c_source,
                         self._positional_reference, cost)

    def __call__(self, *arrays: np.ndarray, **scalars: int) -> np.ndarray:
        """Run the compiled primitive on ``arrays`` (any numpy arrays, read as flat element
        buffers; the output is written in place and returned). Leading dimensions default
        to the dense ones. An output that overlaps an input is computed from a copy of
        the inputs."""
        s = self._check(arrays, scalars)
        flats = [_flat(a, x) for a, x in zip(arrays, self.arrays)]
        out = flats[-1]
        # A unary primitive on one array with one leading dimension works in place (a
        # touch); any other overlap of the output with an input reads a copy of the input.
        if self.kind == "unary" and arrays[0] is arrays[-1] and s["lda"] == s["ldb"] and \
                not self.trans_b:
            flats[0] = out
        elif any(np.may_share_memory(out, x) for x in flats[:-1]):
            flats[:-1] = [x.copy() for x in flats[:-1]]
        work = [np.require(x, requirements="A") for x in flats]
        _compiled(self)(*[x.ctypes.data for x in work], *[s[x] for x in self.scalars])
        if work[-1] is not out:
            out[...] = work[-1]
        return arrays[-1]

    def _check(self, arrays, scalars) -> dict[str, int]:
        names = self.arrays
        if len(arrays) != len(names):
            raise WrongDimensionError(f"primitive {self.name} takes {len(names)} arrays "
                                      f"({', '.join(names)}), got {len(arrays)}")
        unknown = sorted(set(scalars) - set(self.scalars))
        if unknown:
            raise WrongDimensionError(f"primitive {self.name}: unknown arguments {unknown}; "
                                      f"it takes {', '.join(self.scalars)}")
        for x in ("m", "n") + (("k",) if self.kind in GEMMS else ()):
            if x not in scalars:
                raise WrongDimensionError(f"primitive {self.name}: give the block size {x}=")
        for x, v in scalars.items():
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise WrongDimensionError(f"primitive {self.name}: {x} must be an integer, "
                                          f"got {v!r}")
        s = {x: int(v) for x, v in self.defaults(**scalars).items()}
        for x, v in s.items():
            low = 1 if x in ("m", "n", "k", "br") else 0
            if not low <= v < 1 << 40:
                raise WrongDimensionError(f"primitive {self.name}: {x} = {v} is outside "
                                          f"[{low}, 2^40)")
        rows = s["n"] if self.kind == "unary" and self.trans_b else s["m"]
        ld_out = "ldb" if self.kind in ("unary", "bias") else "ldc"
        cols = s["m"] if self.kind == "unary" and self.trans_b else s["n"]
        if self.kind != "reduce" and cols > 1 and s[ld_out] < rows:
            raise WrongDimensionError(f"primitive {self.name}: output leading dimension "
                                      f"{ld_out} = {s[ld_out]} is below its {rows} rows: "
                                      f"columns would overlap")
        for (name, need), a in zip(self.spans(**s).items(), arrays):
            want = "float32" if name == names[-1] or self.kind != "binary" and \
                self.kind not in GEMMS else self.dtype
            if not isinstance(a, np.ndarray):
                raise WrongDtypeError(f"primitive {self.name}: {name} must be a numpy array, "
                                      f"got {type(a).__name__}")
            if a.dtype != _dtype(want):
                raise WrongDtypeError(f"primitive {self.name}: {name} has dtype {a.dtype}, "
                                      f"the primitive reads {want}")
            if a.size < need:
                given = ", ".join(f"{x}={v}" for x, v in s.items())
                raise OutOfBoundsError(f"primitive {self.name}: {name} holds {a.size} elements "
                                       f"but the block needs {need} ({given})")
        if not arrays[-1].flags.writeable:
            raise WrongDimensionError(f"primitive {self.name}: output {names[-1]} is read-only")
        return s


def _flat(a: np.ndarray, name: str) -> np.ndarray:
    """``a`` as the flat buffer of its elements in memory order (a view)."""
    if a.flags.c_contiguous:
        return a.reshape(-1)
    if a.flags.f_contiguous:
        return a.T.reshape(-1)
    raise WrongDimensionError(f"array {name} (shape {a.shape}, strides {a.strides}) is not "
                              f"contiguous: a TPP primitive reads it as a flat element buffer")


_COMPILED: dict[Primitive, object] = {}


def _compiled(p: Primitive):
    """The compiled primitive behind an exported wrapper, loaded once per variant."""
    fn = _COMPILED.get(p)
    if fn is None:
        args = ", ".join(f"{t} {n}" for t, n in p.c_args)
        call = ", ".join(n for _, n in p.c_args)
        src = csource.standalone(p.c_source, (p.dtype,)) + \
            f"\n\nvoid npk_export({args})\n{{\n    {p.c_name}({call});\n}}\n"
        fn = toolchain.function(src, "npk_export", len(p.arrays), len(p.scalars))
        _COMPILED[p] = fn
    return fn
