"""Tensor layouts: immutable (dtype, shape, strides, offset) values, like a numpy view or an
MLIR memref. Strides and offset count elements. Every operation is a pure function that
returns a new Layout; its docstring states the mapping.

A layout made by ``vectorize`` remembers how many of its trailing elements are data
(``valid``) and over how many trailing dims that count runs (``vdims``): lanes past the
end of the vectorized dimension are junk that later steps must not store.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .dtypes import dtype as _dtype
from .errors import OutOfBoundsError, ShapeError


def as_int(value, what: str, error: type[Exception] = ShapeError) -> int:
    """``value`` as a Python int: ints and numpy integers pass; bools, floats (even ``2.0``),
    strings and anything else raise ``error`` naming ``what`` the value is for, because a
    silent ``int()`` would truncate ``2.5`` to 2.

    >>> as_int(np.int64(3), "vectorize: the vector size")
    3
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        shown = value.item() if isinstance(value, np.generic) else value
        raise error(f"{what} must be an integer, got {shown!r} ({type(value).__name__})")
    return int(value)


def as_shape(shape, what: str = "shape") -> tuple[int, ...]:
    """A shape as a tuple of ints; an int ``n`` is ``(n,)`` as in numpy
    (``np.zeros(37).shape == (37,)``). ``ShapeError`` for anything that is not integers."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, (bool, np.bool_)):
        return (int(shape),)
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise ShapeError(f"{what} must be a sequence of integers, got {shape!r}")
    shape = tuple(shape)
    return tuple(as_int(n, f"{what} {shape}: dim {k}") for k, n in enumerate(shape))


def dense_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides of ``shape``: ``dense_strides((2, 3, 4)) == (12, 4, 1)``."""
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return tuple(reversed(strides))


def chains(outer: tuple[int, int], inner: tuple[int, int]) -> bool:
    """Dims ``outer = (m, t)`` and ``inner = (n, s)`` walk what the one dim ``(m·n, s)``
    walks when ``t == n·s``: the outer stride steps over the whole inner dim."""
    return outer[1] == inner[0] * inner[1]


def coalesce(shape: Sequence[int], strides: Sequence[int]) -> tuple[tuple[int, ...],
                                                                      tuple[int, ...]]:
    """The (shape, strides) with the fewest dims that walks the same offsets in the same
    (row-major) order, CuTe's ``coalesce``: size-1 dims dropped, then, from the innermost
    dim out, dim ``i`` merged into dim ``i+1`` as ``(shape[i]·shape[i+1], strides[i+1])``
    when ``strides[i] == shape[i+1]·strides[i+1]`` (``chains``). No dims is one offset.

    >>> coalesce((2, 1, 3, 4), (12, 9, 4, 1))
    ((24,), (1,))
    >>> coalesce((2, 5, 7), (100, 7, 1))
    ((2, 35), (100, 1))
    """
    merged: list[tuple[int, int]] = []  # innermost first
    for dim in reversed([d for d in zip(shape, strides) if d[0] != 1]):
        if merged and chains(dim, merged[-1]):
            merged[-1] = (dim[0] * merged[-1][0], merged[-1][1])
        else:
            merged.append(dim)
    return tuple(n for n, _ in reversed(merged)), tuple(s for _, s in reversed(merged))


@dataclass(frozen=True)
class Layout:
    """An n-d view of a flat buffer: element ``idx`` lives at ``offset + Σ idx[k]·strides[k]``.

    >>> Layout((2, 5, 7), "int8").vectorize(4)
    Layout(int8[2, 5, 2, 4], strides=(35, 7, 4, 1), offset=0, valid=7 of last 2 dims)
    """

    shape: tuple[int, ...]
    dtype: np.dtype
    strides: tuple[int, ...] = None  # type: ignore[assignment]
    offset: int = 0
    valid: int | None = field(default=None, kw_only=True)
    vdims: int = field(default=0, kw_only=True)

    def __post_init__(self):
        shape = as_shape(self.shape, "layout: shape")
        strides = dense_strides(shape) if self.strides is None else \
            as_shape(self.strides, "layout: strides")
        if len(strides) != len(shape):
            raise ShapeError(f"layout: {len(strides)} strides {strides} for {len(shape)} dims "
                             f"{shape}")
        if any(n < 0 for n in shape):
            raise ShapeError(f"layout: negative dimension in shape {shape}")
        offset = as_int(self.offset, "layout: offset")
        if offset < 0:
            raise ShapeError(f"layout: negative offset {offset}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "strides", strides)
        object.__setattr__(self, "offset", offset)
        object.__setattr__(self, "dtype", _dtype(self.dtype))

    # -- queries -------------------------------------------------------------------------

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def size(self) -> int:
        """Number of elements, junk lanes included."""
        return math.prod(self.shape)

    def _axis(self, i: int, what: str = "dim") -> int:
        i = as_int(i, what, OutOfBoundsError)
        if not -self.rank <= i < self.rank:
            raise OutOfBoundsError(f"{what} {i} out of range for rank-{self.rank} layout "
                                   f"{self.shape}")
        return i % self.rank

    def dim(self, i: int) -> int:
        """Element count of dimension ``i`` (negative counts from the end)."""
        return self.shape[self._axis(i)]

    def dims(self, begin: int = 0, end: int | None = None) -> tuple[int, ...]:
        """Counts of dims ``begin`` (included) to ``end`` (excluded), numpy-style negatives:
        ``Layout((5, 3, 3, 2), "int8").dims(0, -1) == (5, 3, 3)``."""
        begin = as_int(begin, "dims: begin")
        end = None if end is None else as_int(end, "dims: end")
        return self.shape[slice(begin, end)]

    def dense_dims(self) -> int:
        """How many innermost dims have natural (row-major, unit innermost) strides.
        Size-1 dims are dense whatever their stride, as in numpy's contiguity rule."""
        expect, count = 1, 0
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and s != expect:
                break
            expect *= n
            count += 1
        return count

    def is_dense(self) -> bool:
        """True when the whole layout is row-major contiguous."""
        return self.dense_dims() == self.rank

    def footprint(self) -> tuple[int, int]:
        """(lowest, one past highest) element offset touched; (offset, offset) when empty."""
        if self.size == 0:
            return self.offset, self.offset
        lo = self.offset + sum(min(0, (n - 1) * s) for n, s in zip(self.shape, self.strides))
        hi = self.offset + sum(max(0, (n - 1) * s) for n, s in zip(self.shape, self.strides))
        return lo, hi + 1

    def valid_count(self) -> int:
        """Data elements in the layout: the product of outer dims times ``valid``."""
        if self.valid is None:
            return self.size
        return math.prod(self.shape[: self.rank - self.vdims]) * self.valid

    # -- transformations -----------------------------------------------------------------

    def _with(self, shape, strides, offset=None, *, valid=None, vdims=0) -> Layout:
        return Layout(shape, self.dtype, strides, self.offset if offset is None else offset,
                      valid=valid, vdims=vdims)

    def _refuse_vector_dims(self, dims: range, op: str) -> None:
        """Regrouping ``dims`` must leave the vectorized dims alone: it would mix junk lanes
        with data."""
        if self.valid is not None and dims and dims[-1] >= self.rank - self.vdims:
            raise ShapeError(f"{op}: cannot regroup the vectorized dims {self.shape[-self.vdims:]} "
                             f"(valid {self.valid}) of layout {self.shape}")

    def fuse(self, k: int) -> Layout:
        """Fuse the ``k`` innermost dims into one of their product (they must be dense):
        ``[.., n_{r-k}, .., n_{r-1}] -> [.., Π n]``; ``k <= 1`` is the identity."""
        k = as_int(k, "fuse: the number of dims")
        if k <= 1:
            return self
        if k > self.rank:
            raise ShapeError(f"fuse({k}) of a rank-{self.rank} layout {self.shape}")
        if self.dense_dims() < k:
            raise ShapeError(f"fuse({k}): only the {self.dense_dims()} innermost dims of "
                             f"{self.shape} with strides {self.strides} are dense")
        self._refuse_vector_dims(range(self.rank - k, self.rank), "fuse")
        n = math.prod(self.shape[-k:])
        return self._with(self.shape[:-k] + (n,), self.strides[:-k] + (1,))

    def vectorize(self, n: int, *, strided: bool = False) -> Layout:
        """Split the last dim N (stride s) into ``[ceil(N/n), n]`` vectors with strides
        ``(n·s, s)``; lanes past N are junk, recorded as ``valid=N`` over the last 2 dims.
        The last dim must be dense (stride 1) or broadcast (stride 0), as the Torq
        EasyKernel guide requires, unless ``strided=True``: then any stride is taken and
        each vector gathers ``n`` elements ``s`` apart (the transfer engines take any
        stride). With ``permute`` this is a transposed load: ``x.permute((1, 0))
        .vectorize(16, strided=True)`` of an [M, N] tensor is [N, ceil(M/16), 16], vectors
        of 16 rows' elements of one column.

        >>> Layout((3, 5), "int8").permute((1, 0)).vectorize(2, strided=True)
        Layout(int8[5, 2, 2], strides=(1, 10, 5), offset=0, valid=3 of last 2 dims)
        """
        n = as_int(n, "vectorize: the vector size")
        if not isinstance(strided, (bool, np.bool_)):
            raise ShapeError(f"vectorize: strided must be True or False, got {strided!r}")
        if n < 1:
            raise ShapeError(f"vectorize({n}): vector size must be >= 1")
        if self.rank == 0:
            raise ShapeError(f"vectorize({n}) of a rank-0 layout")
        if self.valid is not None:
            raise ShapeError(f"vectorize({n}): layout {self.shape} is already vectorized")
        last, s = self.shape[-1], self.strides[-1]
        if s not in (0, 1) and last != 1 and not strided:
            raise ShapeError(f"vectorize({n}): last dim ({last} elements) has stride {s}; "
                             f"it must be dense (stride 1) or broadcast (stride 0), or ask "
                             f"for a strided load: vectorize({n}, strided=True)")
        s = s if last != 1 else 1
        q = -(-last // n)
        return self._with(self.shape[:-1] + (q, n), self.strides[:-1] + (n * s, s),
                          valid=last, vdims=2)

    def broadcast_as(self, other: Layout | Sequence[int]) -> Layout:
        """numpy broadcasting to exactly ``other``'s shape: dims are aligned from the end,
        new leading dims and size-1 dims that grow get stride 0."""
        target = other.shape if isinstance(other, Layout) else as_shape(other, "broadcast_as")
        if self.valid is not None:
            raise ShapeError(f"broadcast_as: layout {self.shape} is vectorized; broadcast first")
        if self.rank > len(target):
            raise ShapeError(f"cannot broadcast shape {self.shape} to {target}: rank "
                             f"{self.rank} > {len(target)}")
        lead = len(target) - self.rank
        strides = [0] * lead
        for k, (n, s) in enumerate(zip(self.shape, self.strides)):
            want = target[lead + k]
            if n == want:
                strides.append(s)
            elif n == 1:
                strides.append(0)
            else:
                raise ShapeError(f"cannot broadcast shape {self.shape} to {target}: dim {k} has "
                                 f"{n} elements, target has {want}")
        return self._with(target, strides)

    def permute(self, order: Sequence[int]) -> Layout:
        """Reorder dims like ``np.transpose``: new dim k is old dim ``order[k]``."""
        given = as_shape(order, "permute: order")
        # Only -rank <= o < rank count from the end; larger ones must not wrap around.
        order = tuple(o % self.rank if -self.rank <= o < self.rank else o for o in given)
        if sorted(order) != list(range(self.rank)):
            raise ShapeError(f"permute{given} is not a permutation of {self.rank} dims")
        vec = tuple(range(self.rank - self.vdims, self.rank))
        if self.valid is not None and order[-self.vdims:] != vec:
            raise ShapeError(f"permute{order} moves the vectorized dims of layout {self.shape}")
        return self._with(tuple(self.shape[o] for o in order),
                          tuple(self.strides[o] for o in order),
                          valid=self.valid, vdims=self.vdims)

    def split(self, dim: int, factor: int) -> Layout:
        """Split dim N (stride s) into ``[N/factor, factor]`` with strides ``[factor·s, s]``."""
        d = self._axis(dim, "split: dim")
        factor = as_int(factor, "split: factor")
        n, s = self.shape[d], self.strides[d]
        if factor < 1 or n % factor:
            raise ShapeError(f"split: dim {d} of {self.shape} has {n} elements, not a multiple "
                             f"of factor {factor}")
        self._refuse_vector_dims(range(d, d + 1), "split")
        return self._with(self.shape[:d] + (n // factor, factor) + self.shape[d + 1:],
                          self.strides[:d] + (factor * s, s) + self.strides[d + 1:],
                          valid=self.valid, vdims=self.vdims)

    def reshape(self, shape: Sequence[int]) -> Layout:
        """A view of the same elements in row-major order with a new shape, possible when each
        group of old dims that maps onto a group of new dims is contiguous within itself
        (numpy's no-copy rule); ``ShapeError`` when the data would have to be copied."""
        shape = as_shape(shape, "reshape")
        if math.prod(shape) != self.size:
            raise ShapeError(f"cannot reshape {self.shape} ({self.size} elements) to {shape}")
        self._refuse_vector_dims(range(self.rank), "reshape")
        if self.size == 0:
            return self._with(shape, dense_strides(shape))
        old = [(n, s) for n, s in zip(self.shape, self.strides) if n != 1]
        new = list(shape)
        strides = [0] * len(new)
        i = j = 0
        while i < len(old) and j < len(new):
            # Skip size-1 new dims: any stride works.
            if new[j] == 1:
                j += 1
                continue
            i0, j0 = i, j
            po, pn = old[i][0], new[j]
            while po != pn:
                if po < pn:
                    i += 1
                    po *= old[i][0]
                else:
                    j += 1
                    pn *= new[j]
            for k in range(i0, i):
                if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                    raise ShapeError(f"cannot reshape {self.shape} with strides {self.strides} "
                                     f"to {shape} without a copy: dims of sizes {old[k][0]} and "
                                     f"{old[k + 1][0]} are not contiguous")
            # Assign strides to new dims j0..j from the innermost old stride outward.
            s = old[i][1]
            for k in range(j, j0 - 1, -1):
                strides[k] = s
                s *= new[k]
            i += 1
            j += 1
        return self._with(shape, strides)

    # -- indexing ------------------------------------------------------------------------

    def __getitem__(self, key) -> Layout:
        """numpy basic indexing: ints drop a dim (negative from the end), slices make
        sub-views; a tuple applies them to leading dims in turn."""
        keys = key if isinstance(key, tuple) else (key,)
        if len(keys) > self.rank:
            raise OutOfBoundsError(f"{len(keys)} indices for rank-{self.rank} layout {self.shape}")
        shape, strides, offset = [], [], self.offset
        valid, vdims = self.valid, self.vdims
        first_vec = self.rank - self.vdims if self.valid is not None else self.rank
        for d, k in enumerate(keys):
            n, s = self.shape[d], self.strides[d]
            if isinstance(k, slice):
                for part in (k.start, k.stop, k.step):
                    if part is not None:
                        as_int(part, f"slice {k} of dim {d}", OutOfBoundsError)
                start, stop, step = k.indices(n)
                count = len(range(start, stop, step))
                if d >= first_vec:
                    if d > first_vec or step != 1:
                        raise ShapeError(f"slice {k} of vectorized dim {d} of layout "
                                         f"{self.shape}: only unit-step slices of the outer "
                                         f"vector dim are allowed")
                    lane = math.prod(self.shape[d + 1:])
                    valid = max(0, min(valid - start * lane, count * lane))
                offset += start * s if count else 0
                shape.append(count)
                strides.append(s * step)
            else:
                if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
                    raise ShapeError(f"layout index must be an int or a slice, got {k!r}")
                i = int(k)
                if not -n <= i < n:
                    raise OutOfBoundsError(f"index {i} out of range for dim {d} with {n} "
                                           f"elements (layout {self.shape})")
                i %= n
                offset += i * s
                if d >= first_vec:
                    lane = math.prod(self.shape[d + 1:])
                    valid = max(0, min(valid - i * lane, lane))
                    vdims -= 1
        shape += self.shape[len(keys):]
        strides += self.strides[len(keys):]
        if valid is None or vdims == 0:
            valid, vdims = (None, 0) if valid is None or valid > 0 else (0, 0)
        return Layout(tuple(shape), self.dtype, tuple(strides), offset, valid=valid, vdims=vdims)

    # -- numpy ---------------------------------------------------------------------------

    def view(self, buffer: np.ndarray) -> np.ndarray:
        """The numpy view of flat ``buffer`` through this layout (``as_strided``); broadcast
        views are read-only. ``OutOfBoundsError`` if the footprint leaves the buffer."""
        buf = np.asarray(buffer)
        if buf.ndim != 1:
            raise ShapeError(f"view: buffer must be flat, got shape {buf.shape}")
        lo, hi = self.footprint()
        if lo < 0 or hi > buf.size:
            raise OutOfBoundsError(f"view: layout {self.shape} strides {self.strides} offset "
                                   f"{self.offset} touches elements [{lo}, {hi}) of a buffer of "
                                   f"{buf.size}")
        if buf.dtype.itemsize != self.itemsize:
            raise ShapeError(f"view: buffer of {buf.dtype} for a layout of {self.dtype}")
        step = buf.strides[0]
        overlap = any(s == 0 and n > 1 for n, s in zip(self.shape, self.strides))
        # as_strided goes through __array_interface__, which cannot spell some ml_dtypes
        # formats (float8_e5m2 is '<f1'): stride raw bytes of the same size, then retype.
        raw = (buf[self.offset:] if self.size else buf[:0]).view(f"V{buf.dtype.itemsize}")
        return np.lib.stride_tricks.as_strided(
            raw, self.shape, tuple(s * step for s in self.strides),
            writeable=not overlap and buf.flags.writeable).view(buf.dtype)

    def __repr__(self) -> str:
        dims = ", ".join(map(str, self.shape))
        vec = f", valid={self.valid} of last {self.vdims} dims" if self.valid is not None else ""
        return (f"Layout({self.dtype.name}[{dims}], strides={self.strides}, "
                f"offset={self.offset}{vec})")

