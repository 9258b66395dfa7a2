"""The values an EasyKernel kernel handles: parameter specs (``spec``), tensor views in
the home memory (``LData``) and data held in the Slice's internal memories (``Data``, named
``IData``, ``WData``, ``BData``, ``PData``, ``QData`` in the Torq EasyKernel guide)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from .. import ir
from ..dtypes import dtype as _dtype
from ..errors import KernelAttributeError, KernelError, OutOfBoundsError, ShapeError
from ..layout import Layout, as_int, as_shape


@dataclass(frozen=True, repr=False)
class Spec(Layout):
    """A parameter's layout that also carries ``partial``, an option only a parameter has;
    ``spec(..., partial=True)`` makes one. It is a ``Layout`` everywhere else (its
    transformations return plain Layouts)."""

    partial: bool = field(default=False, kw_only=True)

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f", partial={self.partial})"


def spec(shape: Sequence[int], dtype, strides: Sequence[int] | None = None,
         offset: int = 0, *, partial: bool = False) -> Layout:
    """Describe a kernel parameter: ``spec((1000,), "int8")``; an int shape is 1-D as in
    numpy (``spec(1000, "int8")``). Strides and offset count elements from the start of the
    tensor's buffer; strides must be non-negative. Shape, strides and offset are integers
    (numpy integers too): ``ShapeError`` for floats and bools, which would be truncated.

    Every element of an output must be written by the kernel, or ``build`` raises
    ``ShapeError`` naming the first unwritten one. ``partial=True`` accepts an output the
    kernel fills only in part: its unwritten elements keep the array's contents on every
    back end (the parameter becomes read-and-written, role ``"inout"``)::

        out = nk.spec((100,), "int8", partial=True)   # the kernel writes out[:64] only

    It returns a ``Spec``, a Layout with the flag."""
    lay = Layout(as_shape(shape, "spec: shape"), dtype,
                 None if strides is None else as_shape(strides, "spec: strides"),
                 as_int(offset, "spec: offset"))
    if any(s < 0 for s in lay.strides):
        raise ShapeError(f"spec: negative strides {lay.strides} are not supported")
    if not isinstance(partial, (bool, np.bool_)):
        raise ShapeError(f"spec: partial must be True or False, got {partial!r}")
    if partial:
        return Spec(lay.shape, lay.dtype, lay.strides, lay.offset, partial=True)
    return lay


def _no_such(owner: str, name: str, public) -> KernelAttributeError:
    """The error for ``owner.name``: the closest public names first, then the rest."""
    close = difflib.get_close_matches(name, public, n=3, cutoff=0.5)
    close += [p for p in public if name.lower() in p and p not in close]
    hint = f"did you mean {' or '.join(f'{owner}.{c}' for c in close[:3])}? " if close else ""
    return KernelAttributeError(f"{owner} has no method {name!r}; {hint}it has: "
                                f"{', '.join(public)}")


class _Suggests:
    """Mixin: a misspelt method name (``s.alu.add``) raises ``KernelError`` naming the right
    one. ``_owner`` names the object as a kernel spells it."""

    _owner = ""

    def _public(self) -> list[str]:
        # camelCase aliases (Torq's spelling) stay out: one suggestion per method.
        return [n for n in dir(type(self)) if not n.startswith("_") and n == n.lower()]

    def __getattr__(self, name: str):
        if name.startswith("_"):  # copy, pickle and friends probe private names
            raise AttributeError(name)
        raise _no_such(self._owner, name, self._public())


class MultiIndex(tuple):
    """The index of a multi-iterator: one loop variable per dimension it consumes."""


@dataclass(frozen=True)
class LData(_Suggests):
    """A tensor in the home memory (LRAM), seen through a layout; indexing with loop
    variables makes a view whose position moves with the loop."""

    buffer: ir.Buffer
    layout: Layout
    offset: ir.Affine
    lanes: ir.Lanes | None = None
    name: str = ""

    # Queries, as in the guide.
    @property
    def shape(self) -> tuple[int, ...]:
        return self.layout.shape

    @property
    def dtype(self) -> np.dtype:
        return self.layout.dtype

    @property
    def rank(self) -> int:
        return self.layout.rank

    def dim(self, i: int) -> int:
        return self.layout.dim(i)

    def dims(self, begin: int = 0, end: int | None = None) -> tuple[int, ...]:
        return self.layout.dims(begin, end)

    def dense_dims(self) -> int:
        return self.layout.dense_dims()

    @property
    def _owner(self) -> str:
        return self.name or "tensor"

    def _public(self) -> list[str]:
        return ["shape", "dtype", "rank", "dim", "dims", "dense_dims", "vectorize", "fuse",
                "broadcast_as", "permute", "subview_dim", "reshape_dim", "insert_dim",
                "erase_dim", "move_dim", "set_shape", "set_element_type",
                "partition_by_index_parity_1d", "partition_by_index_parity_2d", "layout", "name"]

    # Tensor editing: each returns a new LData.
    def vectorize(self, n: int, *, strided: bool = False) -> LData:
        """Split the last dim into vectors of ``n`` lanes (``Layout.vectorize``); the last
        dim must be dense or broadcast, or any stride with ``strided=True`` (a strided,
        e.g. transposed, load). Row sums of an [M, N] ``x``, 16 rows at a time::

            xt = x.permute((1, 0)).vectorize(16, strided=True)   # [N, ceil(M/16), 16]
            for rv in s.iterate(xt.dim(1)):
                for c in s.iterate(xt.dim(0)):
                    p = s.alu.accumulate(s.iram.load(xt[c][rv]))
                ...                                               # Act, then append

        (``npukit.kernels.reduce_cols``)."""
        return replace(self, layout=self.layout.vectorize(n, strided=strided))

    def fuse(self, k: int) -> LData:
        """The ``k`` innermost (dense) dims as one (``Layout.fuse``); ``fuse(0)`` and
        ``fuse(1)`` change nothing, so a broadcast last dim still vectorizes. (Torq's
        ``fuse(0)`` appends a one-element dim instead: ``insert_dim(rank, 1, 1)``.)"""
        return replace(self, layout=self.layout.fuse(k))

    def broadcast_as(self, other: LData | Layout | Sequence[int], num_dims: int = -1) -> LData:
        """numpy broadcasting to ``other``'s shape (``Layout.broadcast_as``). With
        ``num_dims >= 0`` (Torq's ``broadcastAs(other, numDims)``) only the first
        ``num_dims`` dims take ``other``'s sizes; the rest keep their own (the ranks must
        then be equal)."""
        target = other.shape if isinstance(other, (LData, Layout)) else tuple(other)
        num_dims = as_int(num_dims, f"tensor {self._owner}: broadcast_as num_dims")
        if num_dims >= 0:
            if len(target) != self.rank:
                raise ShapeError(f"tensor {self._owner}: broadcast_as({target}, {num_dims}) "
                                 f"needs the rank of {self.shape}")
            target = tuple(target[:num_dims]) + self.shape[num_dims:]
        return replace(self, layout=self.layout.broadcast_as(target))

    def permute(self, order: Sequence[int]) -> LData:
        return replace(self, layout=self.layout.permute(order))

    # The Torq EasyKernel dimension editors, in its operand order; each is a layout
    # transform (no data moves), so every back end runs it unchanged.
    def _axis(self, d: int, op: str, rank: int | None = None) -> int:
        rank = self.rank if rank is None else rank
        d = as_int(d, f"tensor {self._owner}: {op} dim")
        if not -rank <= d < rank:
            raise ShapeError(f"tensor {self._owner}: {op} dim {d} out of range for shape "
                             f"{self.shape}")
        return d % rank

    def _plain(self, op: str, last: int | None = None) -> Layout:
        """The layout, refused when vectorized unless the edit touches only dims up to
        ``last``, all in front of the vector dims: moving those would mix junk lanes in
        (Torq's SegmentationPattern reshapes rows of a vectorized tensor)."""
        lay = self.layout
        if lay.valid is not None and (last is None or last >= lay.rank - lay.vdims):
            raise ShapeError(f"tensor {self._owner}: {op} of a vectorized layout {self.shape}"
                             f" touching its vector dims; edit dims before vectorize")
        return lay

    def _with_dims(self, shape, strides, offset: int | None = None) -> LData:
        """The same tensor with new dims in front of its vector dims (if any)."""
        lay = self.layout
        return replace(self, layout=Layout(tuple(shape), lay.dtype, tuple(strides),
                                           lay.offset if offset is None else offset,
                                           valid=lay.valid, vdims=lay.vdims))

    def subview_dim(self, dim: int, offset: int, count: int) -> LData:
        """Torq's ``subviewDim``: elements ``offset .. offset+count-1`` of dim ``dim``."""
        d = self._axis(dim, "subview_dim")
        lay = self._plain("subview_dim", d)
        offset, count = as_int(offset, "subview_dim: offset"), as_int(count, "subview_dim: count")
        if offset < 0 or count < 0 or offset + count > lay.shape[d]:
            raise OutOfBoundsError(f"tensor {self._owner}: subview_dim({d}, {offset}, {count}) "
                                   f"leaves dim {d} of {lay.shape} ({lay.shape[d]} elements)")
        return replace(self, layout=lay[(slice(None),) * d + (slice(offset, offset + count),)])

    def reshape_dim(self, dim: int, sizes: Sequence[int], allow_non_multiple: bool = False
                    ) -> LData:
        """Torq's ``reshapeDim``: dim ``dim`` becomes the row-major dims ``sizes`` (one of
        them may be -1, inferred). With ``allow_non_multiple`` (Torq's ``allowNonMultiple``)
        the sizes may cover more or fewer elements than the dim holds: a -1 becomes
        ``ceil(n / product of the others)`` (the last rows run past the dim's end, into
        whatever follows it: a load of them past the buffer is an ``OutOfBoundsError``),
        and explicit sizes may cover fewer than ``n`` (the rest is left out)."""
        d = self._axis(dim, "reshape_dim")
        lay = self._plain("reshape_dim", d)
        sizes = [as_int(n, "reshape_dim: size") for n in sizes]
        n, known = lay.shape[d], int(np.prod([k for k in sizes if k != -1]))
        if sizes.count(-1) > 1 or any(k < -1 or k == 0 for k in sizes):
            raise ShapeError(f"tensor {self._owner}: reshape_dim sizes {sizes}: positive, at "
                             f"most one -1")
        inferred = -1 in sizes and (n % known == 0 or allow_non_multiple)
        if inferred:
            sizes[sizes.index(-1)] = -(-n // known)
        total = int(np.prod(sizes))
        if -1 in sizes or not inferred and (total > n if allow_non_multiple else total != n):
            raise ShapeError(f"tensor {self._owner}: reshape_dim({d}, {sizes}): dim {d} of "
                             f"{lay.shape} has {n} elements"
                             + ("" if allow_non_multiple else
                                " (allow_non_multiple=True takes a non-multiple)"))
        strides, step = [], lay.strides[d]
        for k in reversed(sizes):
            strides.insert(0, step)
            step *= k
        return self._with_dims(lay.shape[:d] + tuple(sizes) + lay.shape[d + 1:],
                               lay.strides[:d] + tuple(strides) + lay.strides[d + 1:])

    def set_shape(self, dims: Sequence) -> LData:
        """Torq's ``setShape``: the tensor seen through new dims, each a count (natural
        stride: the product of the counts inside it, times the next explicit stride) or a
        ``(count, stride)`` pair, strides in elements, outermost first; the offset stays.
        The Torq compiler's Im2ColPattern reads overlapping windows of a ``[C, W]`` input
        this way: ``x.set_shape([(ow, stride), (c, w), (kw, dilation)])``. Reads outside
        the buffer are ``OutOfBoundsError`` when the kernel loads them."""
        lay = self._plain("set_shape")
        shape, strides, step = [], [], 1
        for item in reversed(list(dims)):
            count, stride = (item, None) if not isinstance(item, (tuple, list)) else item
            count = as_int(count, f"tensor {self._owner}: set_shape count")
            if stride is not None:
                step = as_int(stride, f"tensor {self._owner}: set_shape stride")
            if count < 0 or step < 0:
                raise ShapeError(f"tensor {self._owner}: set_shape({list(dims)}): counts and "
                                 f"strides are non-negative")
            shape.insert(0, count)
            strides.insert(0, step)
            step *= count
        return replace(self, layout=Layout(tuple(shape), lay.dtype, tuple(strides), lay.offset))

    def insert_dim(self, dim: int, size: int, stride: int = 0) -> LData:
        """Torq's ``insertDim``: a new dim of ``size`` elements at index ``dim`` (0..rank),
        ``stride`` apart (0, the default, repeats the data: a broadcast)."""
        d = self._axis(dim, "insert_dim", self.rank + 1)
        lay = self._plain("insert_dim", d - 1)
        size, stride = as_int(size, "insert_dim: size"), as_int(stride, "insert_dim: stride")
        return self._with_dims(lay.shape[:d] + (size,) + lay.shape[d:],
                               lay.strides[:d] + (stride,) + lay.strides[d:])

    def erase_dim(self, dim: int) -> LData:
        """Torq's ``eraseDim``: drop dim ``dim``, keeping its first element."""
        d = self._axis(dim, "erase_dim")
        lay = self._plain("erase_dim", d)
        return self._with_dims(lay.shape[:d] + lay.shape[d + 1:],
                               lay.strides[:d] + lay.strides[d + 1:])

    def move_dim(self, src: int, dst: int) -> LData:
        """Torq's ``moveDim``: dim ``src`` moves to index ``dst``, counted after removing it."""
        self._plain("move_dim")
        s = self._axis(src, "move_dim")
        order = [k for k in range(self.rank) if k != s]
        order.insert(self._axis(dst, "move_dim", self.rank), s)
        return self.permute(order)

    def partition_by_index_parity_1d(self) -> LData:
        """Torq's ``partitionByIndexParity1D``: the last dim (``n`` elements, even, dense,
        of 1- or 2-byte elements) is memory holding the elements of even index, then those
        of odd index; the view reads them back in their natural order as dims ``(..., n/2,
        2)``, element ``[j, p]`` (index ``2 j + p``) at memory position ``j + p n/2``."""
        lay = self._parity("partition_by_index_parity_1d", 1)
        half = lay.shape[-1] // 2
        return self._with_dims(lay.shape[:-1] + (half, 2), lay.strides[:-1] + (1, half))

    def partition_by_index_parity_2d(self) -> LData:
        """Torq's ``partitionByIndexParity2D``: the last two dims (``h x w``, both even,
        dense, of 1- or 2-byte elements) are memory holding four quadrants of ``h/2 x w/2``
        (``q = h w / 4`` elements each), rows and columns even-even, even-odd, odd-even,
        odd-odd; the view reads them back in their natural order as dims ``(..., h/2, 2,
        w/2, 2)``: element ``[i, p, j, r]`` (row ``2 i + p``, column ``2 j + r``) at memory
        position ``i w/2 + j + (2 p + r) q``. Appending rows in natural order to it writes
        the quadrants (the Torq compiler's SegmentationPattern)."""
        lay = self._parity("partition_by_index_parity_2d", 2)
        h, w = lay.shape[-2:]
        q = h * w // 4
        return self._with_dims(lay.shape[:-2] + (h // 2, 2, w // 2, 2),
                               lay.strides[:-2] + (w // 2, 2 * q, 1, q))

    def _parity(self, op: str, k: int) -> Layout:
        lay = self._plain(op)
        if lay.rank < k or any(n % 2 for n in lay.shape[-k:]):
            raise ShapeError(f"tensor {self._owner}: {op} needs {k} last dim(s) of even size "
                             f"(equal even and odd blocks); shape {lay.shape}")
        if lay.dense_dims() < k:
            raise ShapeError(f"tensor {self._owner}: {op} needs {k} dense last dim(s); shape "
                             f"{lay.shape}, strides {lay.strides}")
        if lay.itemsize > 2:
            raise ShapeError(f"tensor {self._owner}: {op} takes 1- or 2-byte elements (Torq's "
                             f"rule); this tensor holds {lay.dtype}")
        return lay

    # camelCase aliases, so a Torq pattern's body reads as in C++.
    partitionByIndexParity1D = partition_by_index_parity_1d
    partitionByIndexParity2D = partition_by_index_parity_2d
    subviewDim, reshapeDim, insertDim = subview_dim, reshape_dim, insert_dim
    setShape = set_shape
    eraseDim, moveDim, broadcastAs, denseDims = erase_dim, move_dim, broadcast_as, dense_dims

    def __getitem__(self, key) -> LData:
        """numpy basic indexing, keys taken left to right: an index (an int, a loop
        variable or an affine expression of them) drops its dim, a slice keeps it, so the
        next key applies to the next dim: ``x[:, 1:5]`` slices dim 1, ``x[i, :, j]``."""
        keys = key if isinstance(key, tuple) else (key,)
        out, kept = self, 0  # dims kept by the slices so far: the next key's dim
        for k in keys:
            out = out._index_at(kept, k)
            kept += isinstance(k, slice)
        return out

    def _index_at(self, d: int, k) -> LData:
        """Key ``k`` on dim ``d`` (the slices before it kept the dims in front)."""
        lay = self.layout
        if d >= lay.rank:
            raise OutOfBoundsError(f"tensor {self.name!r}: too many indices for its shape "
                                   f"{lay.shape}")
        if isinstance(k, slice):
            return replace(self, layout=lay[(slice(None),) * d + (k,)])
        vector = lay.valid is not None and d >= lay.rank - lay.vdims
        if vector and d > 0:
            raise KernelError(f"tensor {self.name!r}: index the vector dims of {lay.shape} "
                              f"before slicing the dims in front of them")
        n = lay.shape[d]
        if not isinstance(k, (ir.Var, ir.Affine)):
            k = as_int(k, f"tensor {self.name!r}: an index", OutOfBoundsError)
            if not -n <= k < n:
                raise OutOfBoundsError(f"tensor {self.name!r}: index {k} out of range for dim "
                                       f"{d} of {lay.shape} ({n} elements)")
            k = int(k) % n
        idx = ir.affine(k)
        lo, hi = idx.bounds()
        if lo < 0 or hi >= n:
            raise OutOfBoundsError(f"tensor {self.name!r}: index {idx} takes values {lo}..{hi} "
                                   f"but dim {d} of {lay.shape} has {n} elements")
        lanes, valid, vdims = self.lanes, lay.valid, lay.vdims
        if vector:
            if lay.rank == 1:
                raise KernelError(f"tensor {self.name!r}: indexing single lanes of a vector")
            # Indexing the vector dim: lanes past the vectorized dimension's end are junk.
            lanes = ir.Lanes(valid, idx * lay.shape[1], lay.shape[1])
            valid, vdims = None, 0
        rest = Layout(lay.shape[:d] + lay.shape[d + 1:], lay.dtype,
                      lay.strides[:d] + lay.strides[d + 1:], lay.offset, valid=valid,
                      vdims=vdims)
        return replace(self, layout=rest, offset=self.offset + idx * lay.strides[d], lanes=lanes)

    def view(self) -> ir.View:
        return ir.View(self.buffer, Layout(self.layout.shape, self.layout.dtype,
                                           self.layout.strides, self.layout.offset), self.offset,
                       cast=self.layout.dtype != self.buffer.dtype)

    def set_element_type(self, dtype) -> LData:
        """Torq's ``setElementType``: the same bytes read and written as ``dtype``, as a C
        cast would (no conversion), e.g. bfloat16 data moved as int16 by a pure copy, or
        int8 read as uint8. ``dtype`` has the tensor's item size (``ShapeError``
        otherwise: the counts and strides would no longer match the bytes)."""
        dt = np.dtype(dtype) if not isinstance(dtype, str) else _dtype(dtype)
        if dt.itemsize != self.dtype.itemsize:
            raise ShapeError(f"tensor {self._owner}: set_element_type({dt.name}) of "
                             f"{self.dtype.name} data: the item sizes differ ({dt.itemsize} B "
                             f"and {self.dtype.itemsize} B)")
        lay = self.layout
        return replace(self, layout=Layout(lay.shape, dt, lay.strides, lay.offset,
                                           valid=lay.valid, vdims=lay.vdims))

    setElementType = set_element_type


@dataclass(frozen=True)
class Data:
    """A value held in an internal memory (IData, WData, BData, PData, QData in the guide).
    ``in_pair`` is the (input, weight) dtype pair an ALU result came from."""

    view: ir.View
    lanes: ir.Lanes | None
    kind: str
    in_pair: tuple[str, str | None] = ("", None)
    producer: object = None  # the _AluNode that made a PData
    design: object = None  # the npukit.lut.Design a QData of a LUT instruction computes

    Vectors = 0  # PData.Vectors: the dim that counts Act-width sub-vectors

    @property
    def shape(self) -> tuple[int, ...]:
        return self.view.shape

    @property
    def dtype(self) -> np.dtype:
        return self.view.dtype

    @property
    def size(self) -> int:
        return self.view.size

    def dim(self, i: int) -> int:
        return self.view.layout.dim(i)

    def repeat(self, count: int) -> Data:
        """Torq's ``IData::repeat``: each element of the loaded vector read ``count`` times
        in a row (``[a, b]`` repeated 2 is ``[a, a, b, b]``), as the ALU sees it; no data
        moves. IRAM data of 1-byte elements only (Torq's rule). Its ResizeNearestNeighbor
        pattern doubles a row this way."""
        count = as_int(count, "IData.repeat: count", KernelError)
        if self.kind != "IData" or self.view.dtype.itemsize != 1 or count < 1:
            raise KernelError(f"IData.repeat({count}): repeats IRAM data of 1-byte elements a "
                              f"positive number of times; this is {self.kind} of "
                              f"{self.view.dtype}")
        v = self.view
        if v.layout.rank != 1:
            raise KernelError(f"IData.repeat: the data is already {v.layout.shape}; repeat once")
        twice = Layout((v.size, count), v.dtype, (v.layout.strides[0], 0), v.layout.offset)
        lanes = self.lanes and ir.Lanes(self.lanes.total * count, self.lanes.start * count,
                                        self.lanes.width * count)
        return replace(self, view=ir.View(v.buffer, twice, v.offset), lanes=lanes)

    def __getitem__(self, av) -> Data:
        """``pdata[av]``: the Act-width sub-vector ``av``; of the ``[m, vectors, width]``
        partials of an outer or multi-scalar product, ``pdata[m]`` is row ``m``'s."""
        if self.kind == "PData" and self.view.layout.rank == 3:
            return self._row(av)
        if self.kind != "PData" or self.view.layout.rank != 2:
            raise KernelError(f"only PData is indexed by PData.Vectors; this is {self.kind}")
        nv, w = self.view.shape
        if not isinstance(av, (ir.Var, ir.Affine)):
            av = as_int(av, "PData sub-vector index", OutOfBoundsError)
        idx = ir.affine(av)
        lo, hi = idx.bounds()
        if lo < 0 or hi >= nv:
            raise OutOfBoundsError(f"PData sub-vector index {idx} takes values {lo}..{hi} but "
                                   f"the partials hold {nv} vectors of {w}")
        v = self.view
        sub = ir.View(v.buffer, Layout((w,), v.dtype, (1,), v.layout.offset), v.offset + idx * w)
        # lanes the ALU wrote (in each row of an outer product)
        used = self.producer.stmt.dst.shape[-1] if self.producer else nv * w
        return replace(self, view=sub, lanes=_sub_lanes(self.lanes, used, idx, w))


    def _row(self, m) -> Data:
        rows, nv, w = self.view.shape
        if not isinstance(m, (ir.Var, ir.Affine)):
            m = as_int(m, "PData row index", OutOfBoundsError)
        idx = ir.affine(m)
        lo, hi = idx.bounds()
        if lo < 0 or hi >= rows:
            raise OutOfBoundsError(f"PData row index {idx} takes values {lo}..{hi} but the "
                                   f"partials hold {rows} rows")
        v = self.view
        row = ir.View(v.buffer, Layout((nv, w), v.dtype, (w, 1), v.layout.offset),
                      v.offset + idx * nv * w)
        return replace(self, view=row)


IData = WData = BData = PData = QData = Data


def _sub_lanes(lanes: ir.Lanes | None, used: int, idx: ir.Affine, w: int) -> ir.Lanes | None:
    """The valid lanes of sub-vector ``idx`` (``w`` lanes) of partials whose first ``used``
    lanes the ALU wrote (``lanes`` of them valid, or all): ``clamp(min(valid, used) -
    idx·w, 0, w)``. When ``used`` is not a multiple of ``w`` the last sub-vector has junk
    lanes past ``used`` even if the vector had none."""
    if used % w == 0:
        return lanes.sub(idx * w, w) if lanes else None
    if lanes is None:
        return ir.Lanes(used, idx * w, w)
    # min(total - start, used) = used - max(start + used - total, 0): a Clamp atom.
    cut = ir.affine(ir.Clamp(lanes.start + (used - lanes.total), 0, None))
    return ir.Lanes(used, cut + idx * w, w)
