"""EasyKernel in Python (the Torq EasyKernel guide): a kernel is one sequential program over tensor
views; every data flow is derived from it.

>>> @kernel
... def mul(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
...     bdata = s.bram.load(bias_scale)
...     for i in s.iterate(input1.dim(0)):
...         d1 = s.iram.load(input1[i])
...         d2 = s.wram.load(input2[i])
...         p = s.alu.elementwise_product_accumulate(d1, d2)
...         q = s.act.rescale_clamp(p, bdata, shift, 0, out_min, out_max)
...         s.store(output[i], q)

``for i in s.iterate(n)`` runs its body once, at build time, and records one hardware loop,
exactly as the guide's uppercase ``For``. Tensor views are immutable: write
``x = x.vectorize(16)`` where the guide writes ``x.vectorize(16);``.
"""

from __future__ import annotations

import difflib
import inspect
import linecache
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from . import arith, ir
from .dtypes import dtype as _dtype
from .dtypes import int_range, is_float
from .errors import (
    CapacityError,
    DTypeError,
    KernelAttributeError,
    KernelError,
    LutError,
    OutOfBoundsError,
    ShapeError,
    TargetError,
)
from .layout import Layout, as_int, as_shape
from .machine import Target
from .machine import target as _target
from .machine import targets as _targets

# -- user-facing values -------------------------------------------------------------------

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
        return [n for n in dir(type(self)) if not n.startswith("_")]

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
                "broadcast_as", "permute", "layout", "name"]

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
        return replace(self, layout=self.layout.fuse(k))

    def broadcast_as(self, other: LData | Layout | Sequence[int]) -> LData:
        return replace(self, layout=self.layout.broadcast_as(
            other.layout if isinstance(other, LData) else other))

    def permute(self, order: Sequence[int]) -> LData:
        return replace(self, layout=self.layout.permute(order))

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
                                           self.layout.strides, self.layout.offset), self.offset)


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

    def __getitem__(self, av) -> Data:
        """``pdata[av]``: the Act-width sub-vector ``av``."""
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
        used = self.producer.stmt.dst.size if self.producer else nv * w  # lanes the ALU wrote
        return replace(self, view=sub, lanes=_sub_lanes(self.lanes, used, idx, w))


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


# -- the recording builder ----------------------------------------------------------------

class _AluNode:
    """An ALU instruction whose accumulation is known only when its consumer appears."""

    def __init__(self, stmt: ir.Compute, loops: tuple, fill_site: list, fill_index: int):
        self.stmt, self.loops = stmt, loops
        self.block, self.index = fill_site, fill_index
        self.acc_loops: tuple = ()


class _LoopNode:
    def __init__(self, var: ir.Var, label: str):
        self.var, self.label, self.body = var, label, []


def _label() -> str:
    """The kernel source line that called into the builder; ``file line N`` when the
    source is not at hand (a kernel typed in a REPL, read from stdin, made by ``exec``)."""
    f = sys._getframe(2)
    while f is not None and f.f_globals.get("__name__") == __name__:
        f = f.f_back
    if f is None:
        return ""
    line = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    return line or f"{f.f_code.co_filename} line {f.f_lineno}"


def _source(fn: Callable) -> str:
    """The kernel's source text, or a note saying why it is missing."""
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):  # no file behind it: a REPL, stdin, exec, a builtin
        return (f"# the source of kernel {getattr(fn, '__name__', fn)!r} is not available "
                f"(defined in an interactive session, read from stdin or made by exec)\n")


class _Unit(_Suggests):
    def __init__(self, s: Slice, name: str):
        self.s, self.name = s, name
        self.unit = s.target.units[name]
        self._owner = f"s.{name}"


class _Load(_Suggests):
    def __init__(self, s: Slice, memory: str, kind: str):
        self.s, self.memory, self.kind = s, memory, kind
        self._owner = f"s.{memory.lower()}"

    def load(self, x: LData) -> Data:
        """Bring view ``x`` from the home memory into this internal memory."""
        s = self.s
        if not isinstance(x, LData):
            raise KernelError(f"{self.memory}.load expects a tensor view, got {type(x).__name__}")
        if self.memory in s.loaded:
            raise KernelError(f"kernel structure: at most one load into {self.memory} per kernel "
                              f"(already loaded at: {s.loaded[self.memory]})")
        label = _label()
        s.loaded[self.memory] = label
        x = _whole_vectors(x)
        buf = s.buffer(self.memory, x.dtype, x.layout.size, self.kind)
        dst = ir.View(buf, Layout(x.shape, x.dtype))
        s.emit(ir.Copy(dst, x.view(), s.target.engine(s.target.home, self.memory).name,
                       x.lanes, label))
        s.reads.add(x.buffer.name)
        return Data(dst, x.lanes, self.kind)


def _whole_vectors(x: LData) -> LData:
    """A view that is all vector dims (``[q, n]`` of a vectorized tensor, loaded whole) as
    its ``q·n`` lanes in a row, the first ``valid`` holding data: the load then fetches only
    those, as it does for one indexed vector (junk lanes may lie past the tensor)."""
    lay = x.layout
    if x.lanes is not None or lay.valid is None or lay.rank != lay.vdims:
        return x
    n, s = lay.shape[-1], lay.strides[-1]
    flat = Layout((lay.size,), lay.dtype, (s,), lay.offset)
    if lay.strides[0] != n * s:
        return x
    return replace(x, layout=flat, lanes=ir.Lanes(lay.valid, ir.Affine(), lay.size))


class _Alu(_Unit):
    def i_width(self, in_dtype, w_dtype=None) -> int:
        """Max input vector size of the ALU for ``in_dtype`` x ``w_dtype`` (None: no weights)."""
        return self.unit.width(in_dtype, w_dtype)

    def elementwise_product_accumulate(self, a: Data, b: Data) -> Data:
        """Partials ``+= a * b`` lane by lane."""
        return self._op("mul", "add", a, b)

    def scalar_product_accumulate(self, scalar: Data, b: Data) -> Data:
        """Partials ``+= scalar * b``: ``scalar`` holds one value, broadcast to every lane."""
        if scalar.size != 1:
            raise ShapeError(f"scalar_product_accumulate: the scalar operand holds {scalar.size} "
                             f"values, expected 1")
        wide = ir.View(scalar.view.buffer, Layout((b.size,), scalar.dtype, (0,),
                                                  scalar.view.layout.offset), scalar.view.offset)
        return self._op("mul", "add", replace(scalar, view=wide, lanes=b.lanes), b, order=(1, 0))

    def accumulate(self, a: Data) -> Data:
        """Partials ``+= a``."""
        return self._op("pass", "add", a)

    def elementwise_add(self, a: Data, b: Data) -> Data:
        return self._op("add", "add", a, b)

    def elementwise_sub(self, a: Data, b: Data) -> Data:
        return self._op("sub", "add", a, b)

    def elementwise_max(self, a: Data, b: Data) -> Data:
        """Partials ``= max(partials, max(a, b))`` when accumulated."""
        return self._op("max", "max", a, b)

    def elementwise_min(self, a: Data, b: Data) -> Data:
        return self._op("min", "min", a, b)

    def _op(self, op: str, combine: str, a: Data, b: Data | None = None, order=(0, 1)) -> Data:
        s = self.s
        if s.alu_node is not None:
            raise KernelError(f"kernel structure: one ALU instruction per kernel (already: "
                              f"{s.alu_node.stmt.label})")
        label = _label()
        srcs = (a,) if b is None else (a, b)
        for d in srcs:
            if not isinstance(d, Data) or d.kind not in ("IData", "WData", "BData"):
                raise KernelError(f"ALU operands come from IRAM/WRAM/BRAM loads; got {d!r:.80}")
        if b is not None and a.size != b.size:
            raise ShapeError(f"ALU {op}: operands hold {a.size} and {b.size} elements")
        in_dt = srcs[order[0]].dtype.name
        w_dt = None if b is None else srcs[order[1]].dtype.name
        width = self.unit.width(in_dt, w_dt)
        if a.size > width:
            raise KernelError(f"ALU {op}: {a.size} lanes of {in_dt} x {w_dt or 'none'} exceed the "
                              f"ALU width {width}; vectorize by s.alu.i_width(...)")
        acc_dt = "float32" if is_float(a.dtype) else "int32"
        act_w = min(s.target.units["act"].width(in_dt, w_dt), a.size)
        nv = math.ceil(a.size / act_w)
        buf = s.buffer("PRAM", acc_dt, nv * act_w, "PData")
        dst = ir.View(buf, Layout((nv, act_w), acc_dt))
        flat = ir.View(buf, Layout((a.size,), acc_dt))
        stmt = ir.Compute("alu", op, flat, tuple(d.view for d in srcs),
                          attrs=(("combine", combine), ("pair", (in_dt, w_dt))), label=label)
        node = _AluNode(stmt, s.loops, s.block, len(s.block))
        s.block.append(node)
        s.alu_node = node
        lanes = a.lanes or (b.lanes if b is not None else None)
        return Data(dst, lanes, "PData", (in_dt, w_dt), node)


class _Act(_Unit):
    def width(self, in_dtype, w_dtype=None) -> int:
        """Max vector size of the Act for ``in_dtype`` x ``w_dtype`` (None: no weights)."""
        return self.unit.width(in_dtype, w_dtype)

    def rescale_clamp(self, p: Data, b: Data, shift: int, zero_point: int, lo, hi) -> Data:
        """``clamp((((p + bias) * scale + r) >> shift) + zero_point, lo, hi)`` in 64-bit
        integers, ``r`` the target's rounding term; ``b`` holds one (bias, scale) pair. On
        float partials: ``clamp((p + bias) * scale + zero_point, lo, hi)`` in float32.
        ``shift`` is an integer in 0..62 (0 on float partials); ``zero_point``, ``lo`` and
        ``hi`` are integers on integer partials, numbers on float ones (``KernelError`` for
        a float or bool where an integer is needed: nothing is truncated). The integer
        result is int32: a bound beyond int32 acts as the int32 limit, and bounds holding no
        int32 value raise ``KernelError``."""
        if not isinstance(b, Data) or b.kind != "BData" or b.size != 2:
            raise KernelError("rescale_clamp: b must be a BData holding one (bias, scale) pair")
        shift = as_int(shift, "s.act.rescale_clamp: shift", KernelError)
        if shift < 0 or shift > 62:
            raise KernelError(f"rescale_clamp: shift {shift} outside 0..62")
        if is_float(p.dtype) and shift:
            raise KernelError(f"rescale_clamp: shift {shift} on float partials; use scale")
        return self._op("rescale_clamp", p, (b,), shift=int(shift), zero_point=zero_point,
                        lo=lo, hi=hi)

    def clamp(self, p: Data, lo, hi) -> Data:
        """``clamp(p, lo, hi)`` of the partials ``p``: int32 results from integer partials
        (``lo``, ``hi`` integers, as for ``rescale_clamp``), float32 from float partials
        (``lo``, ``hi`` numbers; a NaN passes)."""
        return self._op("clamp", p, (), lo=lo, hi=hi)

    def lookup(self, p: Data, lut, step_bits: int | None = None, bias: int | None = None,
               oor: str | None = None) -> Data:
        """Direct table lookup, the AIE API's ``parallel_lookup`` indexed by the integer
        partials ``p`` (int32) themselves::

            raw   = p >> step_bits                        (arithmetic shift: floor)
            index = clamp(raw + bias, 0, N - 1)            oor="saturate" (default)
            index = ((raw mod N) + (bias mod N)) mod N     oor="truncate" (N a power of two)
            q     = offsets[index]

        widened exactly to int32 (integer tables) or float32 (float16, bfloat16, float32
        tables). ``lut`` is a ``npukit.lut.Lut`` without slopes (values int8, uint8, int16,
        uint16, int32, float16, bfloat16 or float32), ``N`` its entries; or a direct
        ``Design``, which brings ``step_bits`` and ``bias`` (pass neither): for input tensors
        holding ``design.quantize(x)``, ``q`` is ``design.evaluate(x)``, times
        ``2**out_frac_bits`` for integer outputs. The AIE API's rules (``LutError``): ``0 <=
        step_bits < 32``, ``bias`` 0 or a power of two. The table's memory image for the
        target's ``lut.banks`` parallel accesses is a constant of the program, in the
        target's ``lut.memory`` (``CapacityError`` when it does not fit). With a Design, an
        integer ``q`` holds the int32 values of ``design.output_range()``: a store or append
        of it into a tensor that cannot hold them raises ``LutError`` (it would saturate
        them)."""
        self._partials("lookup", p)
        table, d = self._table("lookup", lut, "direct")
        if d is not None:
            if step_bits is not None or bias is not None:
                raise LutError("Act lookup: a Design brings its own step_bits and bias; pass "
                               "the design alone")
            step_bits, bias = d.step_bits, d.bias
        step_bits = 0 if step_bits is None else step_bits
        bias = 0 if bias is None else bias
        oor = "saturate" if oor is None else oor
        if is_float(p.dtype):
            raise LutError(f"Act lookup indexes the table with integer partials; the ALU reads "
                           f"{p.in_pair[0]} data, which makes {p.dtype} partials")
        self._input_fits("lookup", p, d)
        from .lut import parallel_lookup

        parallel_lookup(table, np.zeros(1, np.int32), step_bits, bias, oor)  # the AIE API's rules
        q = self._table_op("lookup", p, table, arith.act_result_dtype(table.offset_dtype),
                           step_bits=int(step_bits), bias=int(bias), oor=oor)
        return replace(q, design=d)

    def linear_approx(self, p: Data, lut, step_bits: int | None = None,
                      bias: int | None = None, shift_offset: int | None = None, *,
                      clamp: tuple | None = None, scale_exp: int | None = None) -> Data:
        """Linear approximation, the AIE API's ``linear_approx`` on the partials ``p``. First the
        input is conditioned (``lo, hi = clamp``, either may be ``None``)::

            x = p;  x = lo if x < lo;  x = hi if x > hi         (a NaN passes)
            float partials:   x = x * 2**scale_exp              (float32; exact)
            integer partials: x = saturate(x, in)               (in = int8 or int16)

        then, with ``N`` entries, ``index`` clamped to ``[0, N - 1]``::

            integer: index = (x >> step_bits) + bias
                     q = slope[index] * (x & ((1 << step_bits) - 1))
                         + (offset[index] << shift_offset)        (int32 or int64)
            float:   index = (int(floor(x)) >> step_bits) + bias
                     q = slope[index] * x + offset[index]          (float32)

        Integer tables are the AIE API's rows (int8/int8/int8 with int8 input and an int32
        result; int16/int16/int16 and int16/int32/int32 with int16 input and an int64
        result); the data the ALU reads must fit ``in``. A float table (float32 offsets,
        bfloat16 slopes) takes the float32 partial (``npukit.lut.EXTENDED_LINEAR_TYPES``):
        the product is exact for partials of bfloat16 or float16 data times a power of
        two, so only the sum rounds (to nearest even); a float16 partial keeps all its
        bits, which a bfloat16 input would not.

        An integer ``q`` is the accumulator (int32 for int8 tables, int64 for int16 and
        int32 tables), far wider than the table's offsets (it adds ``offset <<
        shift_offset``): a store into a narrower tensor saturates it. So with a Design, whose
        ``q`` holds ``y * 2**out_frac_bits``, a store or append into a tensor that cannot hold
        ``design.output_range()`` raises ``LutError``.

        ``lut`` is a ``npukit.lut.Lut`` with slopes, or a linear ``Design``, which brings
        ``step_bits``, ``bias``, ``shift_offset``, its ``clamp`` and, for bfloat16 input,
        ``scale_exp = in_frac_bits`` (an integer input already holds ``x *
        2**in_frac_bits``, so its clamp is scaled instead); pass none of them. For input
        tensors holding ``design.quantize(x)``, ``q`` is then ``design.evaluate(x)`` (times
        ``2**out_frac_bits`` for integer outputs), bit for bit. ``LutError`` for a rule of
        the AIE API (minimum ``step_bits``, ``shift_offset`` range, ...), mixed integer and
        float operands, or data that does not fit the table's input type."""
        self._partials("linear_approx", p)
        table, d = self._table("linear_approx", lut, "linear")
        if d is not None:
            given = [n for n, v in (("step_bits", step_bits), ("bias", bias),
                                    ("shift_offset", shift_offset), ("clamp", clamp),
                                    ("scale_exp", scale_exp)) if v is not None]
            if given:
                raise LutError(f"Act linear_approx: a Design brings its own {', '.join(given)}; "
                               "pass the design alone")
            step_bits, bias, shift_offset = d.step_bits, d.bias, d.shift_offset
            if is_float(d.in_dtype):
                clamp, scale_exp = d.clamp, d.in_frac_bits
            else:
                clamp = tuple(int(math.ldexp(c, d.in_frac_bits)) for c in d.clamp)
        if step_bits is None:
            raise LutError("Act linear_approx: step_bits is required with a Lut (the AIE API's "
                           "linear_approx has no default)")
        bias = 0 if bias is None else bias
        shift_offset = 0 if shift_offset is None else shift_offset
        scale_exp = 0 if scale_exp is None else scale_exp
        lo, hi = (None, None) if clamp is None else clamp
        floating = is_float(p.dtype)
        in_dt = self._linear_input(table, p)
        if floating:   # the bounds as the float32 values the instruction compares with
            lo, hi = (None if v is None else float(np.float32(v)) for v in (lo, hi))
            if isinstance(scale_exp, bool) or not isinstance(scale_exp, (int, np.integer)) \
                    or not -126 <= scale_exp <= 126:
                raise LutError(f"Act linear_approx: scale_exp={scale_exp!r} must be an integer "
                               "in [-126, 126] (an exact float32 scaling)")
        else:
            if scale_exp:
                raise LutError(f"Act linear_approx: scale_exp={scale_exp} scales float inputs "
                               f"only; integer partials already hold the input's fixed-point "
                               f"value")
            for name, v in (("lo", lo), ("hi", hi)):
                if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer))):
                    raise LutError(f"Act linear_approx: clamp {name}={v!r} must be an integer "
                                   f"for integer partials")
            lo, hi = (None if v is None else int(v) for v in (lo, hi))
        if any(isinstance(v, float) and math.isnan(v) for v in (lo, hi)) or \
                (lo is not None and hi is not None and not lo <= hi):
            raise LutError(f"Act linear_approx: clamp ({lo}, {hi}) needs lo <= hi")
        self._input_fits("linear_approx", p, d, in_dt)
        from .lut import linear_approx

        probe = linear_approx(table, np.zeros(1, in_dt), step_bits, bias, shift_offset,
                              extended=True)  # the AIE API's rules, with their numbers
        q = self._table_op("linear_approx", p, table, probe.dtype, step_bits=int(step_bits),
                           bias=int(bias), shift_offset=int(shift_offset), lo=lo, hi=hi,
                           scale_exp=int(scale_exp), in_dtype=in_dt.name)
        return replace(q, design=d)

    @staticmethod
    def _partials(op: str, p) -> None:
        if not isinstance(p, Data) or p.kind != "PData":
            raise KernelError(f"Act {op} reads ALU partials (PData), got {getattr(p, 'kind', p)}")

    @staticmethod
    def _table(op: str, lut, kind: str):
        """``(Lut, Design or None)`` from what the kernel passed."""
        from .lut import Design, Lut

        if isinstance(lut, Design):
            if lut.kind != kind:
                other = "lookup" if lut.kind == "direct" else "linear_approx"
                raise LutError(f"Act {op}: this Design is {lut.kind}; use s.act.{other}")
            return lut.lut, lut
        if not isinstance(lut, Lut):
            raise LutError(f"Act {op}: expected a npukit.lut.Lut or Design, got "
                           f"{type(lut).__name__}")
        if (lut.slopes is not None) != (kind == "linear"):
            raise LutError(f"Act {op}: " + ("this Lut holds slopes: use s.act.linear_approx"
                                            if kind == "direct" else
                                            "this Lut holds no slopes: use s.act.lookup"))
        odt = lut.offset_dtype
        if odt.name not in arith.LUT_VALUE_DTYPES:
            raise LutError(f"Act {op}: table values of {odt} do not widen to the Act's int32 "
                           f"or float32 results; use one of {', '.join(arith.LUT_VALUE_DTYPES)}")
        return lut, None

    @staticmethod
    def _linear_input(table, p: Data) -> np.dtype:
        """The input type of the table's row: int8 or int16 for integer tables, float32 (the
        partial itself) for float ones."""
        from .lut import EXTENDED_LINEAR_TYPES, LINEAR_TYPES

        floating = is_float(p.dtype)
        rows = EXTENDED_LINEAR_TYPES if floating else \
            tuple(r for r in LINEAR_TYPES if r.accumulator != "accfloat")
        odt = table.offset_dtype
        row = next((r for r in rows if r.offset == odt.name), None)
        if row is None:
            kinds = ", ".join(f"{r.offset} offsets" for r in rows)
            raise LutError(f"Act linear_approx on {p.dtype} partials (from {p.in_pair[0]} data) "
                           f"needs a table of {kinds}; this table has {odt} offsets")
        return _dtype(row.input)

    def _input_fits(self, op: str, p: Data, d, in_dt: np.dtype | None = None) -> None:
        """The data the ALU reads must be a design's input type, or fit the table's."""
        data = _dtype(p.in_pair[0])
        if d is not None and data != d.in_dtype:
            raise LutError(f"Act {op}: the design takes {d.in_dtype} input (design.quantize), "
                           f"but the ALU reads {data} data")
        if in_dt is not None and not is_float(in_dt) and not np.can_cast(data, in_dt):
            lo, hi = int_range(in_dt)
            raise LutError(f"Act {op}: the table's input type is {in_dt} ({lo}..{hi}); the "
                           f"ALU reads {data} data, which does not fit")

    def _table_op(self, op: str, p: Data, table, out_dt, **attrs) -> Data:
        p, label = self._begin(op, p)
        t = self.s.target
        if t.lut.memory is None:
            raise KernelError(f"`{label}`: target {t.name!r} has no table memory (lut.memory)")
        if t.lut.banks not in (1, 2, 4):
            raise LutError(f"target {t.name!r}: lut.banks = {t.lut.banks}; the AIE API's tables "
                           f"take 1, 2 or 4 parallel accesses")
        image, desc = arith.lut_image(table, t.lut.banks, t.lut.bank_bits)
        # "lut.table": no tensor can take the name (parameters are Python identifiers).
        buf = self.s.const(t.lut.memory, image, "lut.table", label,
                           f"a table of {table.size} entries ({desc['parallel']}-access image)")
        view = ir.View(buf, Layout((buf.size,), buf.dtype))
        return self._emit(op, p, label, out_dt, (view,), {**attrs, **desc})

    def _begin(self, op: str, p: Data) -> tuple[Data, str]:
        s = self.s
        if s.act_label is not None:
            raise KernelError(f"kernel structure: one Act instruction per kernel (already: "
                              f"{s.act_label})")
        if not isinstance(p, Data) or p.kind != "PData":
            raise KernelError(f"Act {op} reads ALU partials (PData), got {getattr(p, 'kind', p)}")
        label = _label()
        s.act_label = label
        width = self.unit.width(*p.in_pair)
        if p.view.layout.rank == 2:
            if p.shape[0] != 1:
                raise KernelError(f"Act {op}: the partials hold {p.shape[0]} vectors of {width}; "
                                  f"iterate over pdata.dim(PData.Vectors) and pass pdata[av]")
            p = p[0]
        s.consume(p.producer)
        if p.producer is not None:
            p = replace(p, lanes=_accumulated_lanes(p.lanes, p.producer.acc_loops, label))
        return p, label

    def _emit(self, op: str, p: Data, label: str, out_dt, extra: tuple, vals: dict) -> Data:
        s = self.s
        n = p.size
        buf = s.buffer("ACT", out_dt, n, "QData")
        dst = ir.View(buf, Layout((n,), buf.dtype))
        vals = {**vals, "pair": p.in_pair}
        s.emit(ir.Compute("act", op, dst, (p.view,) + extra, attrs=tuple(sorted(vals.items())),
                          label=label))
        return Data(dst, p.lanes, "QData")

    def _op(self, op: str, p: Data, extra: tuple, **attrs) -> Data:
        p, label = self._begin(op, p)
        out_dt = "float32" if is_float(p.dtype) else "int32"
        vals = {k: _attr_value(f"`{label}`: {op}'s {k}", v, is_float(p.dtype))
                for k, v in attrs.items()}
        if not is_float(p.dtype):
            _act_bounds_reach_int32(f"`{label}`: Act {op}", vals["lo"], vals["hi"])
        return self._emit(op, p, label, out_dt, tuple(d.view for d in extra), vals)


# What the Torq EasyKernel guide's logical Slice is made of: a target without them cannot
# run an EasyKernel kernel.
SLICE_UNITS = ("alu", "act")
SLICE_MEMORIES = ("IRAM", "WRAM", "BRAM", "PRAM", "ACT")


def _slice_parts_missing(tgt: Target) -> list[str]:
    return [f"unit {u!r}" for u in SLICE_UNITS if u not in tgt.units] + \
        [f"memory {m}" for m in SLICE_MEMORIES if m not in tgt.memories]


def _check_slice_target(tgt: Target) -> None:
    """``TargetError`` when ``tgt`` lacks a unit or memory of the logical Slice."""
    missing = _slice_parts_missing(tgt)
    if missing:
        have = [n for n in _targets() if not _slice_parts_missing(_target(n))]
        raise TargetError(f"target {tgt.name!r} has no {', '.join(missing)}: EasyKernel kernels "
                          f"run on a Slice with units {', '.join(SLICE_UNITS)} and memories "
                          f"{', '.join(SLICE_MEMORIES)}; built-in targets that have them: "
                          f"{', '.join(have) or 'none'}")


def _attr_value(what: str, v, floating: bool) -> int | float:
    """An Act constant: an int for integer partials, a float for float partials; bools,
    strings and floats where an integer is needed are refused rather than truncated."""
    if floating and isinstance(v, (float, np.floating)):
        return float(v)
    if floating:
        return float(as_int(v, f"{what} (a number)", KernelError))
    return as_int(v, f"{what} (integer partials)", KernelError)


def _act_bounds_reach_int32(what: str, lo: int, hi: int) -> None:
    """The integer Act's result is int32: bounds beyond int32 act as its limits
    (``arith.act_bounds``), but a range with no int32 value cannot be met."""
    i32 = (-2**31, 2**31 - 1)
    if lo > i32[1] or hi < i32[0]:
        raise KernelError(f"{what}: clamp bounds lo={lo}, hi={hi} hold no int32 value, but the "
                          f"Act's integer result is int32 ({i32[0]}..{i32[1]}); bounds beyond "
                          f"int32 act as its limits (out_max=2**64-1 clamps at {i32[1]})")


class Slice:
    """The logical Slice of the Torq EasyKernel guide while a kernel is being recorded."""

    def __init__(self, tgt: Target):
        _check_slice_target(tgt)
        self.target = tgt
        self.iram = _Load(self, "IRAM", "IData")
        self.wram = _Load(self, "WRAM", "WData")
        self.bram = _Load(self, "BRAM", "BData")
        self.alu = _Alu(self, "alu")
        self.act = _Act(self, "act")
        self.alu_node: _AluNode | None = None  # the ALU instruction, once recorded
        self.act_label: str | None = None  # the Act instruction's source line, once recorded
        self.loaded: dict[str, str] = {}
        self.buffers: list[ir.Buffer] = []
        self.root: list = []
        self.block = self.root
        self.loops: tuple[ir.Var, ...] = ()
        self.nloops = 0
        self.nodes: list[_LoopNode] = []
        self.stored: str | None = None
        self.reads: set[str] = set()
        self.writes: set[str] = set()

    # A misspelt method (s.stor) names the right one.
    _owner = "s"
    __getattr__ = _Suggests.__getattr__

    def _public(self) -> list[str]:
        return ["iram", "wram", "bram", "alu", "act", "iterate", "store", "append", "target"]

    def buffer(self, memory: str, dt, size: int, kind: str) -> ir.Buffer:
        buf = ir.Buffer(f"{kind.lower()}", memory, _dtype(dt), size)
        cap = self.target.memories[memory].size
        if buf.nbytes > cap:
            raise CapacityError(f"{memory} holds {cap} B but `{_label()}` places {kind} of "
                                f"{size} x {buf.dtype.name} = {buf.nbytes} B there")
        self.buffers.append(buf)
        return buf

    def const(self, memory: str, values: np.ndarray, name: str, label: str,
              what: str) -> ir.Buffer:
        """A constant of the program (``role="const"``) holding ``values`` in ``memory``."""
        buf = ir.Buffer(name, memory, values.dtype, values.size, role="const",
                        data=np.ascontiguousarray(values).tobytes())
        cap = self.target.memories[memory].size
        if buf.nbytes > cap:
            raise CapacityError(f"{memory} holds {cap} B but `{label}` places {what} there: "
                                f"{buf.size} x {buf.dtype.name} = {buf.nbytes} B")
        self.buffers.append(buf)
        return buf

    def emit(self, stmt) -> None:
        self.block.append(stmt)

    def iterate(self, counts) -> Iterator:
        """``for i in s.iterate(n)``: one hardware loop of ``n`` iterations; a list of
        counts nests one loop per count and yields a multi-index; ``[]`` is no loop. Each
        count is a positive integer (``KernelError`` for 0, floats and bools)."""
        multi = isinstance(counts, (list, tuple))
        label = _label()
        vs = []
        for n in (counts if multi else [counts]):
            if as_int(n, "iterate: a loop count", KernelError) < 1:
                raise KernelError(f"iterate: loop count must be a positive int, got {n!r}")
            # Unique names: sibling loops with equal counts must stay distinct variables.
            v = ir.Var(f"i{self.nloops}", int(n))
            self.nloops += 1
            node = _LoopNode(v, label)
            self.block.append(node)
            self.nodes.append(node)
            self.block, self.loops = node.body, self.loops + (v,)
            vs.append(v)
        yield MultiIndex(vs) if multi else vs[0]
        for _ in vs:
            self.nodes.pop()
            self.loops = self.loops[:-1]
            self.block = self.nodes[-1].body if self.nodes else self.root

    def consume(self, node: _AluNode | None) -> None:
        """The Act reads the partials: loops around the ALU but not the Act accumulate."""
        if node is None:
            return
        common = 0
        while (common < min(len(node.loops), len(self.loops))
               and node.loops[common] == self.loops[common]):
            common += 1
        node.acc_loops = node.loops[common:]
        if node.acc_loops:
            # Start fresh before the outermost accumulation loop, at each consumer iteration.
            outer = node.acc_loops[0]
            block = self.root if common == 0 else self._node_of(node.loops[common - 1]).body
            at = next(k for k, x in enumerate(block)
                      if isinstance(x, _LoopNode) and x.var == outer)
            combine = dict(node.stmt.attrs)["combine"]
            block.insert(at, ir.Fill(node.stmt.dst, _identity(combine, node.stmt.dst.dtype),
                                     f"start of accumulation over {outer} for: {node.stmt.label}"))

    def _node_of(self, var: ir.Var) -> _LoopNode:
        def find(block):
            for x in block:
                if isinstance(x, _LoopNode):
                    if x.var == var:
                        return x
                    got = find(x.body)
                    if got:
                        return got
            return None
        return find(self.root)

    def store(self, view: LData, q: Data) -> None:
        """Write all lanes of ``q`` to ``view`` (a store past the tensor's end is an error)."""
        self._check_out("store", view, q)
        lanes = view.lanes
        if lanes is None and view.layout.valid is not None:
            lanes = ir.Lanes(view.layout.valid, ir.Affine(), view.layout.size)
        if lanes is not None and lanes.total - lanes.start.bounds()[1] < lanes.width:
            first = lanes.start.bounds()[1]
            raise OutOfBoundsError(
                f"store into {view.name!r}: the vector at elements "
                f"{first}..{first + lanes.width - 1}"
                f" passes the end of the vectorized dim ({lanes.total} elements); its junk "
                f"lanes would overwrite what follows. Pad the output to a multiple of "
                f"{lanes.width} or use s.append")
        if view.layout.size != q.size:
            raise ShapeError(f"store into {view.name!r}: view holds {view.layout.size} elements, "
                             f"the result {q.size} lanes")
        self.emit(ir.Copy(view.view(), q.view, self.target.engine("ACT", self.target.home).name,
                          None, _label()))

    def append(self, view: LData, q: Data) -> None:
        """Append the valid lanes of ``q`` to what earlier appends wrote into ``view``; the
        cursor starts at 0 in each iteration of the innermost loop that selects ``view``,
        and an append never writes past the view's end."""
        self._check_out("append", view, q)
        keys = set(view.offset.vars)
        inner = max((k for k, v in enumerate(self.loops) if v in keys), default=-1)
        stray = [v for v in self.loops[: inner + 1] if v not in keys]
        if stray:
            raise KernelError(f"append into {view.name!r}: loop {stray[0]} encloses the loop "
                              f"that selects the subtensor but does not index it; the appends "
                              f"of its iterations would overwrite each other")
        cursor = "cursor"
        block = self.root if inner < 0 else self._node_of(self.loops[inner]).body
        block.insert(0, ir.ResetCursor(cursor, f"start of appends into {view.name}"))
        self.emit(ir.Append(view.view(), q.view, self.target.engine("ACT", self.target.home).name,
                            cursor, q.lanes, _label()))

    def _check_out(self, what: str, view: LData, q: Data) -> None:
        if self.stored is not None:
            raise KernelError(f"kernel structure: one store or append per kernel (already: "
                              f"{self.stored})")
        if not isinstance(view, LData) or not isinstance(q, Data) or q.kind != "QData":
            raise KernelError(f"{what}(view, q): q must be an Act result (QData)")
        if is_float(q.dtype) and not is_float(view.dtype):
            raise DTypeError(f"{what} into {view.name!r}: float results into a "
                             f"{view.dtype.name} tensor")
        if q.design is not None:  # a LUT result of a Design: the tensor must hold its range
            q.design.check_store(view.dtype, view.name, what)
        self.stored = _label()
        self.writes.add(view.buffer.name)

    def freeze(self) -> tuple:
        if self.alu_node is None or self.act_label is None or self.stored is None:
            missing = [n for n, x in (("ALU", self.alu_node), ("Act", self.act_label),
                                      ("store/append", self.stored)) if x is None]
            raise KernelError(f"kernel structure: a kernel needs one ALU instruction, one Act "
                              f"instruction and one store or append; missing {', '.join(missing)}")

        def conv(block):
            out = []
            for x in block:
                if isinstance(x, _LoopNode):
                    out.append(ir.Loop(x.var, conv(x.body), x.label))
                elif isinstance(x, _AluNode):
                    out.append(replace(x.stmt, acc=bool(x.acc_loops)))
                else:
                    out.append(x)
            return tuple(out)
        return conv(self.root)


def _accumulated_lanes(lanes: ir.Lanes | None, acc_loops: tuple[ir.Var, ...],
                       label: str) -> ir.Lanes | None:
    """The lanes of partials accumulated over ``acc_loops``: a lane holds data only if it
    did in every contribution, so the vector's start takes its largest value over those
    loops (valid lanes ``clamp(total - start, 0, width)`` shrink as the start grows). The
    result no longer depends on the accumulation loops, which do not enclose the Act.
    ``None`` when every lane holds data."""
    if lanes is None or not set(acc_loops) & set(lanes.start.vars):
        return lanes
    worst = ir.Affine(lanes.start.const)
    for atom, c in lanes.start.terms:
        if isinstance(atom, ir.Var) and atom in acc_loops:
            worst += max(0, c * (atom.count - 1))
        elif set(ir.affine(atom).vars) & set(acc_loops):
            raise KernelError(f"`{label}`: the valid lanes of the partials vary with the "
                              f"accumulation loop through {atom}; npukit cannot tell which "
                              f"lanes hold data")
        else:
            worst += c * atom
    if worst.bounds()[1] <= lanes.total - lanes.width:
        return None
    return ir.Lanes(lanes.total, worst, lanes.width)


def _identity(combine: str, dt: np.dtype):
    if combine == "add":
        return 0
    if is_float(dt):
        return -np.inf if combine == "max" else np.inf
    lo, hi = int_range(dt)
    return lo if combine == "max" else hi


# -- kernels and build --------------------------------------------------------------------

@dataclass(frozen=True)
class Kernel:
    """A kernel function: ``fn(s, *tensors, **attrs)``; see ``npukit.build``."""

    fn: Callable
    name: str
    tensors: tuple[str, ...]
    attrs: tuple[str, ...]
    optional: tuple[str, ...] = ()  # attributes with a default

    def __call__(self, *a, **k):
        return self.fn(*a, **k)


def kernel(fn: Callable) -> Kernel:
    """Mark ``fn(s, tensor, ..., *, attr, ...)`` as an EasyKernel kernel."""
    params = list(inspect.signature(fn).parameters.values())
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if not params or params[0].kind not in positional:
        raise KernelError(f"kernel {fn.__name__}: first parameter must be the Slice")
    tensors = tuple(p.name for p in params[1:] if p.kind == p.POSITIONAL_OR_KEYWORD)
    attrs = tuple(p.name for p in params[1:] if p.kind == p.KEYWORD_ONLY)
    optional = tuple(p.name for p in params[1:] if p.kind == p.KEYWORD_ONLY
                     and p.default is not p.empty)
    return Kernel(fn, fn.__name__, tensors, attrs, optional)


def build(k: Kernel, target: str | Target | None = None, /, **specs_and_attrs) -> ir.Program:
    """Record kernel ``k`` for ``target`` (default ``"torq"``) with a ``spec`` per tensor and
    a value per attribute, check it, and return the ``Program``::

        prog = nk.build(mul, target="torq", input1=nk.spec((1000,), "int8"), ...)

    The kernel and the target are positional-only, so a kernel parameter may take any name,
    ``k`` and ``target`` included. When the kernel has a parameter named ``target``,
    ``target=`` goes to the kernel and the build target is given positionally::

        prog = nk.build(kern, "torq", x=nk.spec((64,), "int8"), target=nk.spec((64,), "int8"))

    (``KernelError`` when that keyword holds a target name and no target is given
    positionally: which one was meant is ambiguous.)"""
    from .passes import check

    if not isinstance(k, Kernel):
        raise KernelError(f"build: {k!r} is not a kernel; decorate it with @npukit.kernel")
    if "target" not in k.tensors + k.attrs and "target" in specs_and_attrs:
        if target is not None:
            raise KernelError(f"build {k.name}: the target is given twice, {target!r} and "
                              f"target={specs_and_attrs['target']!r}")
        target = specs_and_attrs.pop("target")
    elif target is None and isinstance(specs_and_attrs.get("target"), (str, Target)):
        raise KernelError(f"build {k.name}: the kernel has a parameter named 'target', so "
                          f"target={specs_and_attrs['target']!r} is that parameter; give the "
                          f"build target positionally: npukit.build({k.name}, \"torq\", "
                          f"target=...)")
    tgt = _target("torq" if target is None else target)
    missing = [n for n in k.tensors + k.attrs if n not in specs_and_attrs and n not in k.optional]
    extra = [n for n in specs_and_attrs if n not in k.tensors + k.attrs]
    if missing or extra:
        raise KernelError(f"build {k.name}: missing {missing}, unexpected {extra}")
    s = Slice(tgt)
    datas = []
    for name in k.tensors:
        lay = specs_and_attrs[name]
        if not isinstance(lay, Layout):
            raise KernelError(f"build {k.name}: tensor {name!r} needs npukit.spec(...), "
                              f"got {lay!r}")
        if 0 in lay.shape:
            raise ShapeError(f"build {k.name}: tensor {name!r} has no elements (dim "
                             f"{lay.shape.index(0)} of shape {lay.shape} is 0); a kernel needs "
                             f"at least one element in every tensor")
        buf = ir.Buffer(name, tgt.home, lay.dtype, lay.footprint()[1], role="in")
        datas.append(LData(buf, Layout(lay.shape, lay.dtype, lay.strides, lay.offset),
                           ir.Affine(), None, name))
    attrs = {n: specs_and_attrs[n] for n in k.attrs if n in specs_and_attrs}
    k.fn(s, *datas, **attrs)
    body = s.freeze()
    params = []
    for d in datas:
        written, read = d.buffer.name in s.writes, d.buffer.name in s.reads
        partial = getattr(specs_and_attrs[d.name], "partial", False)
        if partial and not written:
            raise KernelError(f"build {k.name}: tensor {d.name!r} is only read; partial=True "
                              f"is for outputs the kernel fills in part")
        # A partial output keeps what the kernel does not write: it is read, in effect.
        role = ("inout" if read or partial else "out") if written else "in"
        params.append((replace(d.buffer, role=role), specs_and_attrs[d.name]))
    # views point at the parameter buffers with their final roles
    final = {b.name: b for b, _ in params}
    body = ir.map_buffers(body, lambda b: final[b.name] if b.name in final and
                          b.role != "internal" else b)
    prog = ir.Program(k.name, tgt, tuple(params), tuple(s.buffers), body,
                      tuple(sorted(attrs.items())), _source(k.fn))
    return check(prog)
