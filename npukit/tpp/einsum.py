"""``einsum``: contractions and permutations as one optimized ``TensorOperation``.

numpy's subscripts (``"abk,kc->abc"``; without ``->`` the output is the letters that
appear once, sorted, as in numpy; a letter repeated in one operand reads its diagonal).
A letter is a dimension typed by where it appears: in both inputs and the output ``c``, in
the first input and the output ``m``, in the second and the output ``n``, in the inputs
only ``k`` (summed; a letter of only one input is summed with the other input's stride 0).
Arrays are read in place through their strides (views work); one whose layout the
primitive cannot address (no unit stride along a dimension it needs) is first copied
into a layout it can. The output is float32; inputs are float32, or bfloat16 / float16 for
a contraction (summed in float32).

One operand: a permutation (the ``identity`` primitive, transposed when the output's
unit-stride dimension differs) or, when letters are summed, a gemm with a vector of ones.
Two operands: a gemm with first touch ``zero``. More operands: contracted left to right,
keeping the letters later operands or the output need.

Epilogues: ``bias=`` (an array numpy broadcasts to the output's shape) becomes the
contraction's ``bias`` first touch, read with stride 0 along the broadcast axes (a row, a
column or a scalar, no copy made), and ``activation=`` (a unary primitive: ``relu``,
``gelu``, ``sigmoid``, ...) its last touch; with more operands both go to the last
contraction.

>>> import numpy as np
>>> a = np.arange(6, dtype=np.float32).reshape(2, 3)
>>> b = np.ones((3, 2), np.float32)
>>> einsum("ik,kj->ij", a, b).tolist()
[[3.0, 3.0], [12.0, 12.0]]
>>> einsum("ij->ji", a).tolist()
[[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
>>> einsum("ik,kj->ij", a, b, bias=np.array([-4.0, 1.0], np.float32),
...        activation="relu").tolist()
[[0.0, 4.0], [8.0, 13.0]]
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from .errors import (
    OperationNotSupportedError,
    TppError,
    WrongDimensionError,
    WrongDtypeError,
    WrongPrimitiveError,
)
from .operation import LAST_TOUCH, Dim, TensorOperation, dims_table, host_threads
from .optimizer import plan
from .primitives import UNARY_REF

_ONES = np.ones(1, np.float32)  # the second input of a sum over one operand's letters


def _parse(spec, count: int) -> tuple[list[str], str]:
    if not isinstance(spec, str):
        raise WrongDimensionError(f"einsum: subscripts must be a string, got {spec!r}")
    text = spec.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    ins = lhs.split(",")
    if "..." in text or not all(c.isalpha() for c in "".join(ins) + rhs) or "->" in rhs:
        raise WrongDimensionError(f"einsum {spec!r}: subscripts are letters, operands split "
                                  f"by ',' and the output after '->' (no '...')")
    if len(ins) != count:
        raise WrongDimensionError(f"einsum {spec!r}: {len(ins)} operand(s) in the subscripts, "
                                  f"{count} array(s) given")
    counts = Counter("".join(ins))
    if not arrow:
        rhs = "".join(sorted(c for c, n in counts.items() if n == 1))
    if len(set(rhs)) != len(rhs) or any(c not in counts for c in rhs):
        raise WrongDimensionError(f"einsum {spec!r}: every output letter must appear once in "
                                  f"the output and in some operand")
    return ins, rhs


def _sizes(spec: str, ins: list[str], arrays) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for k, (letters, a) in enumerate(zip(ins, arrays)):
        if a.ndim != len(letters):
            raise WrongDimensionError(f"einsum {spec!r}: operand {k} has {a.ndim} dimension(s), "
                                      f"its subscripts {letters!r} name {len(letters)}")
        for c, n in zip(letters, a.shape):
            if sizes.setdefault(c, n) != n:
                raise WrongDimensionError(f"einsum {spec!r}: letter {c!r} has size {sizes[c]} "
                                          f"and {n} (operand {k})")
    return sizes


def _strides(a: np.ndarray, letters: str) -> dict[str, int] | None:
    """Element strides by letter (a repeated letter: the sum, its diagonal), or None when
    the array's strides are negative or not whole elements."""
    out: dict[str, int] = {}
    for c, n, s in zip(letters, a.shape, a.strides):
        if n == 1:
            s = 0
        if s < 0 or s % a.itemsize:
            return None
        out[c] = out.get(c, 0) + s // a.itemsize
    return out


def _flat(a: np.ndarray, strides: dict[str, int], sizes: dict[str, int]) -> np.ndarray:
    """The flat element buffer from ``a``'s first element to the last its strides reach."""
    extent = 1 + sum((sizes[c] - 1) * s for c, s in strides.items())
    return np.lib.stride_tricks.as_strided(a, (extent,), (a.itemsize,))


def _canonical(a: np.ndarray, letters: str, order: str) -> tuple[np.ndarray, str]:
    """A contiguous copy of ``a`` (its diagonal for a repeated letter) with its axes in
    ``order``."""
    keep = "".join(c for c in order if c in letters)
    strides = [sum(s for x, s in zip(letters, a.strides) if x == c) for c in keep]
    shape = [a.shape[letters.index(c)] for c in keep]
    view = np.lib.stride_tricks.as_strided(a, shape, strides, writeable=False)
    return np.ascontiguousarray(view), keep


class _Job:
    """One TensorOperation and its flat buffers for a one- or two-operand einsum, with its
    epilogue: ``bias`` (None, or an array broadcast to ``bias_letters``, the output's
    letters) and ``activation`` (a last touch)."""

    def __init__(self, spec, ins: list[str], out_letters: str, arrays: list[np.ndarray],
                 out: np.ndarray, sizes: dict[str, int], threads: int,
                 epilogue: tuple = (None, "", "none")):
        self.spec, self.threads = spec, threads
        self.ins, self.out_letters, self.sizes = ins, out_letters, sizes
        self.arrays, self.out = arrays, out
        self.bias, self.bias_letters, self.activation = epilogue

    def build(self) -> tuple[TensorOperation, list[np.ndarray]]:
        strides = [_strides(a, s) for a, s in zip(self.arrays + [self.out],
                                                   self.ins + [self.out_letters])]
        if any(s is None for s in strides):
            raise TppError("negative strides")
        *ins_s, out_s = strides
        flats = [_flat(a, s, self.sizes) for a, s in zip(self.arrays, ins_s)]
        out_flat = _flat(self.out, out_s, self.sizes)
        dt = self.arrays[0].dtype.name
        la = self.ins[0]
        lb = self.ins[1] if len(self.ins) == 2 else ""
        summed = set(la) - set(self.out_letters)
        if len(self.ins) == 1 and not summed:
            if self.bias is not None:
                raise OperationNotSupportedError(
                    f"einsum {self.spec!r}: a bias needs a contraction (two operands, or "
                    f"summed letters); this one only permutes its operand")
            base = dict(dtype="float32", prim_first="none", prim_main="identity",
                        prim_last=self.activation)
            dims = [Dim("c", "seq", self.sizes[c], ins_s[0][c], 0, out_s[c])
                    for c in self.out_letters]
            return self._plan(base, dims), [flats[0], None, out_flat]
        if len(self.ins) == 1:  # a sum over letters: a gemm with a vector of ones
            ins_s.append({})
            flats.append(_ONES)
        bias_s: dict[str, int] = {}
        if self.bias is not None:
            bias_s = _strides(self.bias, self.bias_letters)
            flats.append(_flat(self.bias, bias_s, self.sizes))
        base = dict(dtype=dt, prim_first="zero" if self.bias is None else "bias",
                    prim_main="gemm", prim_last=self.activation)
        dims = []
        for c in dict.fromkeys(la + lb + self.out_letters):
            a, b, o = c in la, c in lb, c in self.out_letters
            t = "c" if a and b and o else "m" if a and o else "n" if b and o else "k"
            dims.append(Dim(t, "seq", self.sizes[c], ins_s[0].get(c, 0), ins_s[1].get(c, 0),
                            out_s.get(c, 0), bias_s.get(c, 0)))
        return self._plan(base, dims), [flats[0], flats[1], out_flat] + flats[2:]

    def _plan(self, base: dict, dims: list[Dim]) -> TensorOperation:
        """The optimized operation, planned once per layout (and its compiled program
        with it): einsum on arrays laid out as before costs a dictionary lookup."""
        key = (self.spec, tuple(base.items()), tuple(dims), self.threads)
        if key not in _PLANS:
            if len(_PLANS) >= 256:
                _PLANS.clear()
            try:
                _PLANS[key] = plan(base, dims, threads=self.threads, min_kernel_size=16,
                                   max_kernel_size=None,
                                   before=f"einsum {self.spec!r}:\n{dims_table(dims)}")
            except TppError as exc:
                _PLANS[key] = exc
        got = _PLANS[key]
        if isinstance(got, TppError):
            raise got
        return got


_PLANS: dict[tuple, TensorOperation | TppError] = {}


def _operation(spec, ins, out_letters, arrays, out, sizes, threads, epilogue=(None, "", "none")):
    """The optimized operation, its buffers, and the array it writes (``out`` or a
    temporary to copy into ``out``)."""
    job = _Job(spec, ins, out_letters, list(arrays), out, sizes, threads, epilogue)
    try:
        return (*job.build(), out)
    except TppError:
        pass
    # A layout the primitive cannot address: contiguous copies whose last axes are the
    # ones the primitive needs with unit stride (k last in the inputs, m then n last in the
    # output).
    la = ins[0]
    lb = ins[1] if len(ins) == 2 else ""
    kinds = {c: ("c" if c in la and c in lb and c in out_letters else
                 "m" if c in la and c in out_letters else
                 "n" if c in lb and c in out_letters else "k")
             for c in dict.fromkeys(la + lb + out_letters)}
    order = "".join(sorted(kinds, key=lambda c: "cmnk".index(kinds[c])))
    fixed, letters = zip(*(_canonical(a, s, order) for a, s in zip(arrays, ins)))
    tmp_letters = "".join(c for c in order if c in out_letters)
    tmp = np.empty([sizes[c] for c in tmp_letters], np.float32)
    job = _Job(spec, list(letters), tmp_letters, list(fixed), tmp, sizes, threads, epilogue)
    op, flats = job.build()
    perm = [tmp_letters.index(c) for c in out_letters]
    return op, flats, tmp.transpose(perm)


def _check_arrays(spec, arrays, out):
    for k, a in enumerate(arrays):
        if not isinstance(a, np.ndarray):
            raise WrongDtypeError(f"einsum {spec!r}: operand {k} must be a numpy array, got "
                                  f"{type(a).__name__}")
    dts = {a.dtype.name for a in arrays}
    allowed = ("float32", "bfloat16", "float16") if len(arrays) == 2 else ("float32",)
    if len(dts) != 1 or next(iter(dts)) not in allowed:
        raise WrongDtypeError(f"einsum {spec!r}: operands have dtypes {sorted(dts)}; it takes "
                              f"{' or '.join(allowed)} operands of one dtype")
    if out is not None and (not isinstance(out, np.ndarray) or out.dtype != np.float32
                            or not out.flags.writeable):
        raise WrongDtypeError(f"einsum {spec!r}: out must be a writable float32 numpy array")


def _epilogue(spec, shape: tuple[int, ...], out_letters: str, bias, activation) -> tuple:
    """``(bias broadcast to the output, its letters, last touch)``, checked."""
    allowed = [x for x in LAST_TOUCH if x != "none"]
    if activation is not None and (not isinstance(activation, str) or
                                   activation not in allowed):
        raise WrongPrimitiveError(f"einsum {spec!r}: activation {activation!r} is not a last "
                                  f"touch; the TPP tensor compiler allows {', '.join(allowed)}")
    act = activation or "none"
    if bias is None:
        return None, "", act
    if not isinstance(bias, (np.ndarray, np.float32)) or bias.dtype != np.float32:
        got = f"dtype {bias.dtype}" if isinstance(bias, np.generic | np.ndarray) else \
            type(bias).__name__
        raise WrongDtypeError(f"einsum {spec!r}: bias must be a float32 numpy array (or "
                              f"np.float32 scalar), got {got}")
    try:
        view = np.broadcast_to(np.ascontiguousarray(bias), shape)
    except ValueError:
        raise WrongDimensionError(f"einsum {spec!r}: bias of shape {bias.shape} does not "
                                  f"broadcast to the output's shape {shape}") from None
    return view, out_letters, act


def einsum(spec: str, *arrays: np.ndarray, out: np.ndarray | None = None,
           threads: int | None = None, bias: np.ndarray | None = None,
           activation: str | None = None) -> np.ndarray:
    """``numpy.einsum(spec, *arrays)`` computed by one optimized ``TensorOperation`` per
    pair of operands (see the module docstring); writes ``out`` when given, and returns
    the result. ``threads`` is what the optimizer plans for (default: the host's).
    ``activation(result + bias)`` with the epilogues: ``bias`` broadcast to the output as
    numpy does (a first touch), ``activation`` a unary primitive's name (a last touch)."""
    if not arrays:
        raise WrongDimensionError(f"einsum {spec!r}: no operands")
    ins, out_letters = _parse(spec, len(arrays))
    _check_arrays(spec, arrays, out)
    sizes = _sizes(spec, ins, arrays)
    threads = host_threads() if threads is None else threads
    if len(arrays) > 2:  # left to right, keeping what later operands and the output need
        later = "".join(ins[2:]) + out_letters
        keep = "".join(c for c in dict.fromkeys(ins[0] + ins[1]) if c in later)
        first = einsum(f"{ins[0]},{ins[1]}->{keep}", arrays[0], arrays[1], threads=threads)
        rest = ",".join([keep] + ins[2:])
        return einsum(f"{rest}->{out_letters}", first, *arrays[2:], out=out, threads=threads,
                      bias=bias, activation=activation)
    shape = tuple(sizes[c] for c in out_letters)
    epilogue = _epilogue(spec, shape, out_letters, bias, activation)
    if out is None:
        out = np.empty(shape, np.float32)
    elif out.shape != shape:
        raise WrongDimensionError(f"einsum {spec!r}: out has shape {out.shape}, the result "
                                  f"{shape}")
    if out.size == 0 or any(a.size == 0 for a in arrays):  # an empty sum: the epilogue of 0
        out[...] = 0 if epilogue[0] is None else epilogue[0]
        if epilogue[2] != "none":
            out[...] = UNARY_REF[epilogue[2]](out)
        return out
    op, flats, target = _operation(spec, ins, out_letters, list(arrays), out, sizes, threads,
                                   epilogue)
    op(*flats)
    if target is not out:
        out[...] = target
    return out


def einsum_operation(spec: str, *arrays: np.ndarray, threads: int | None = None,
                     bias: np.ndarray | None = None, activation: str | None = None
                     ) -> TensorOperation:
    """The optimized ``TensorOperation`` ``einsum`` runs for one or two operands laid out
    as ``arrays`` (for a fresh, C-ordered output, and the epilogues given): print it to
    see the optimizer's decisions.

    >>> import numpy as np
    >>> op = einsum_operation("ik,kj->ij", np.ones((64, 32), np.float32),
    ...                       np.ones((32, 48), np.float32), threads=1)
    >>> op.prim_main, op.dim_sizes
    ('gemm', (64, 48, 32))
    """
    if not 1 <= len(arrays) <= 2:
        raise WrongDimensionError(f"einsum_operation {spec!r}: one or two operands, got "
                                  f"{len(arrays)}")
    ins, out_letters = _parse(spec, len(arrays))
    _check_arrays(spec, arrays, None)
    sizes = _sizes(spec, ins, arrays)
    out = np.empty(tuple(sizes[c] for c in out_letters), np.float32)
    epilogue = _epilogue(spec, out.shape, out_letters, bias, activation)
    threads = host_threads() if threads is None else threads
    return _operation(spec, ins, out_letters, list(arrays), out, sizes, threads, epilogue)[0]


__all__ = ["einsum", "einsum_operation"]
