"""The Slice's units and memories as a kernel calls them: loads into the internal memories
(``s.iram.load``), the ALU (``s.alu``) and the activation unit (``s.act``), each recording
its instructions on the Slice."""

from __future__ import annotations

import linecache
import math
import sys
from dataclasses import replace

import numpy as np

from .. import arith, ir
from ..dtypes import dtype as _dtype
from ..dtypes import int_range, is_float
from ..errors import KernelError, LutError, ShapeError
from ..layout import Layout, as_int
from .values import Data, LData, _Suggests


class _AluNode:
    """An ALU instruction whose accumulation is known only when its consumer appears."""

    def __init__(self, stmt: ir.Compute, loops: tuple, fill_site: list, fill_index: int):
        self.stmt, self.loops = stmt, loops
        self.block, self.index = fill_site, fill_index
        self.acc_loops: tuple = ()
        # The instruction's name when its partials are one result, never summed (Torq's
        # alu.load, and accumulate in mode NOT or BNOT); "" otherwise.
        self.single = ""


def _label() -> str:
    """The kernel source line that called into the builder; ``file line N`` when the
    source is not at hand (a kernel typed in a REPL, read from stdin, made by ``exec``)."""
    f = sys._getframe(2)
    while f is not None and f.f_globals.get("__name__", "").startswith(__package__ + "."):
        f = f.f_back
    if f is None:
        return ""
    line = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()
    return line or f"{f.f_code.co_filename} line {f.f_lineno}"


class _Unit(_Suggests):
    def __init__(self, s, name: str):  # s: the Slice (npukit.easy.builder) recording it
        self.s, self.name = s, name
        self.unit = s.target.units[name]
        self._owner = f"s.{name}"


class _Load(_Suggests):
    def __init__(self, s, memory: str, kind: str):  # s: the Slice recording it
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

    def w_width(self, w_dtype=None) -> int:
        """Torq's ``alu.wWidth``: how many weights of ``w_dtype`` (None: 1-byte) one
        instruction reads, the target's ``[units.alu.sizes] weight_segment_bytes`` over
        their size (32 int8 weights on torq)."""
        size = 1 if w_dtype is None else _dtype(w_dtype).itemsize
        return self._size("weight_segment_bytes", "w_width") // size

    def ker_width(self) -> int:
        """Torq's ``alu.kerWidth``: the widest kernel row the ALU takes at once (the
        target's ``[units.alu.sizes] kernel_width``, 3 on torq)."""
        return self._size("kernel_width", "ker_width")

    def _size(self, key: str, what: str) -> int:
        if key not in self.unit.sizes:
            raise KernelError(f"s.alu.{what}: target {self.s.target.name!r} gives no "
                              f"[units.alu.sizes] {key}")
        return self.unit.sizes[key]

    def elementwise_product_accumulate(self, a: Data, b: Data, mode: str = "ACC") -> Data:
        """Partials ``= combine(partials, a * b)`` lane by lane; ``mode`` is Torq's
        accumulate mode (``ALUOp1Mode``): ``ACC`` adds, ``MAX``/``MIN``/``MUL``/``BAND``/
        ``BOR``/``BXOR`` fold the product in that way."""
        return self._op("mul", _combine(mode, a), a, b)

    def scalar_product_accumulate(self, scalar: Data, b: Data, mode: str = "ACC") -> Data:
        """Partials ``= combine(partials, scalar * b)``: ``scalar`` holds one value,
        broadcast to every lane (``mode`` as in ``elementwise_product_accumulate``).
        Torq's order, ``(idata, wdata)`` with the one value in ``wdata``, is also taken: the
        operand holding one value is the scalar."""
        if scalar.size != 1 and b.size == 1:
            scalar, b = b, scalar
        if scalar.size != 1:
            raise ShapeError(f"scalar_product_accumulate: the scalar operand holds {scalar.size} "
                             f"values, expected 1")
        wide = ir.View(scalar.view.buffer, Layout((b.size,), scalar.dtype, (0,),
                                                  scalar.view.layout.offset), scalar.view.offset)
        return self._op("mul", _combine(mode, b), replace(scalar, view=wide, lanes=b.lanes), b,
                        order=(1, 0))

    def accumulate(self, a: Data, mode: str = "ACC") -> Data:
        """Partials ``= combine(partials, a)``, ``mode`` Torq's ``ALUOp1Mode``: ``ACC``
        (``+``), ``MAX``, ``MIN``, ``MUL`` (int32 products wrap), ``BAND``, ``BOR``, ``BXOR``
        (bitwise, integer data); a fresh accumulation starts from the mode's identity (0,
        the type's lowest or highest value, 1, all ones), so ``BOR`` over one input is Torq's
        ``load``. ``NOT`` (1 where ``a`` is 0, else 0) and ``BNOT`` (``~a``) transform one
        input, never accumulated (``KernelError`` when a loop would fold them)."""
        if _mode_name(mode) in _UNARY:
            p = self._op(_UNARY[_mode_name(mode)], "add", _integer(a, mode), None)
            self.s.alu_node.single = f"alu.accumulate(..., {_mode_name(mode)})"
            return p
        return self._op("pass", _combine(mode, a), a)

    def load(self, a: Data) -> Data:
        """Torq's ``alu.load``: the partials are ``a`` itself. Its Act must read them in the
        loop that loads them (``KernelError`` otherwise: a loop between would sum)."""
        p = self._op("pass", "add", a)
        self.s.alu_node.single = "alu.load"
        return p

    # camelCase aliases, so a Torq pattern's body reads as in C++.
    iWidth, elementwiseProductAccumulate = i_width, elementwise_product_accumulate
    wWidth, kerWidth = w_width, ker_width
    scalarProductAccumulate = scalar_product_accumulate

    def elementwise_add(self, a: Data, b: Data) -> Data:
        return self._op("add", "add", a, b)

    def elementwise_sub(self, a: Data, b: Data) -> Data:
        return self._op("sub", "add", a, b)

    def elementwise_max(self, a: Data, b: Data) -> Data:
        """Partials ``= max(partials, max(a, b))`` when accumulated."""
        return self._op("max", "max", a, b)

    def elementwise_min(self, a: Data, b: Data) -> Data:
        return self._op("min", "min", a, b)

    def outer_product_accumulate(self, idata: Data, wdata: Data, mode: str = "ACC") -> Data:
        """Torq's ``outerProductAccumulate``: partials ``[m, n] = combine(partials, w[m] *
        x[n])`` for ``x`` of ``n`` inputs and ``w`` of ``m`` weights; the result is
        ``[m, ceil(n / aw), aw]`` (index ``pdata[m]`` first, then its Act-width parts).
        ``n`` up to the ALU width, ``m * n`` partials in the partials memory."""
        m, n = wdata.size, idata.size
        x = replace(idata, view=_broadcast(idata.view, (m, n), 0))
        w = replace(wdata, view=_broadcast(wdata.view, (m, n), 1), lanes=idata.lanes)
        return self._op("mul", _combine(mode, idata), x, w, rows=m)

    def multi_scalar_product_accumulate(self, idata: Data, wdata: Data,
                                        mode: str = "ACC") -> Data:
        """Torq's ``multiScalarProductAccumulate``: ``x`` of ``[m, n]`` inputs, ``w`` of
        ``m`` weights, partials ``[m, n] = combine(partials, w[m] * x[m, n])``, a scalar
        product per row; the result is ``[m, ceil(n / aw), aw]``."""
        if idata.view.layout.rank != 2 or idata.shape[0] != wdata.size:
            raise ShapeError(f"multi_scalar_product_accumulate: inputs of shape {idata.shape} "
                             f"and {wdata.size} weights; expected [m, n] and m")
        m, n = idata.shape
        if idata.lanes is not None:
            raise KernelError("multi_scalar_product_accumulate: the input rows hold junk lanes; "
                              "load whole rows")
        w = replace(wdata, view=_broadcast(wdata.view, (m, n), 1))
        return self._op("mul", _combine(mode, idata), idata, w, rows=m)

    outerProductAccumulate = outer_product_accumulate
    multiScalarProductAccumulate = multi_scalar_product_accumulate

    def _op(self, op: str, combine: str, a: Data, b: Data | None = None, order=(0, 1),
            rows: int = 0) -> Data:
        """One ALU instruction; ``rows`` > 0: ``a`` and ``b`` are ``[rows, n]`` and the
        partials ``[rows, ceil(n / aw), aw]`` (Torq's outer and multi-scalar products)."""
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
        n = a.size // max(rows, 1)
        if n > width:
            raise KernelError(f"ALU {op}: {n} lanes of {in_dt} x {w_dt or 'none'} exceed the "
                              f"ALU width {width}; vectorize by s.alu.i_width(...)")
        acc_dt = "float32" if is_float(a.dtype) else "int32"
        act_w = min(s.act_items or s.target.units["act"].width(in_dt, w_dt), n)
        nv = math.ceil(n / act_w)
        buf = s.buffer("PRAM", acc_dt, max(rows, 1) * nv * act_w, "PData")
        if rows:
            dst = ir.View(buf, Layout((rows, nv, act_w), acc_dt))
            flat = ir.View(buf, Layout((rows, n), acc_dt, (nv * act_w, 1)))
        else:
            dst = ir.View(buf, Layout((nv, act_w), acc_dt))
            flat = ir.View(buf, Layout((a.size,), acc_dt))
        stmt = ir.Compute("alu", op, flat, tuple(d.view for d in srcs),
                          attrs=(("combine", combine), ("pair", (in_dt, w_dt))), label=label)
        node = _AluNode(stmt, s.loops, s.block, len(s.block))
        s.block.append(node)
        s.alu_node = node
        lanes = a.lanes or (b.lanes if b is not None else None)
        return Data(dst, lanes, "PData", (in_dt, w_dt), node)


def _broadcast(v: ir.View, shape: tuple[int, int], axis: int) -> ir.View:
    """A 1-D view read as ``shape``, repeated along ``axis`` (stride 0)."""
    step = v.layout.strides[0] if v.layout.rank else 0
    strides = (0, step) if axis == 0 else (step, 0)
    return replace(v, layout=Layout(shape, v.layout.dtype, strides, v.layout.offset))


class ALUOp1Mode:
    """Torq's ALU accumulate modes (``torq_hw::ALUOp1Mode``), as a kernel names them:
    ``s.alu.accumulate(x, ALUOp1Mode.MAX)``; the plain strings (``"MAX"``) are the same."""

    ACC, MAX, MIN, MUL, BAND, BOR, BXOR, NOT, BNOT = (
        "ACC", "MAX", "MIN", "MUL", "BAND", "BOR", "BXOR", "NOT", "BNOT")


_COMBINES = {"ACC": "add", "MAX": "max", "MIN": "min", "MUL": "mul", "BAND": "and",
             "BOR": "or", "BXOR": "xor"}
_UNARY = {"NOT": "lnot", "BNOT": "bnot"}


def _mode_name(mode) -> str:
    name = getattr(mode, "name", mode)
    if not isinstance(name, str) or name not in {**_COMBINES, **_UNARY}:
        raise KernelError(f"ALU mode {mode!r}: Torq's accumulate modes here are "
                          f"{', '.join([*_COMBINES, *_UNARY])}")
    return name


def _integer(a: Data, mode) -> Data:
    if isinstance(a, Data) and is_float(a.dtype):
        raise KernelError(f"ALU mode {_mode_name(mode)} is bitwise: it takes integer data, "
                          f"not {a.dtype}")
    return a


def _combine(mode, a: Data) -> str:
    """The partials' fold for Torq's ``mode``; NOT and BNOT transform, never fold."""
    name = _mode_name(mode)
    if name in _UNARY:
        raise KernelError(f"ALU mode {name} transforms one input: use s.alu.accumulate(x, "
                          f"{name!r})")
    if name in ("BAND", "BOR", "BXOR"):
        _integer(a, mode)
    return _COMBINES[name]


class ACTMode:
    """Torq's Act modes (``torq_hw::ACTMode``), as a kernel names them:
    ``s.act.clamp(p, lo, hi, ACTMode.ABS)``; the plain strings are the same."""

    ACT, ABS, NEG, CLZ, CEL, FLR, I2F, F2I = arith.ACT_MODES


_ACT_FLOAT_MODES, _ACT_INT_MODES = ("CEL", "FLR", "F2I"), ("CLZ", "I2F")


class _Act(_Unit):
    def width(self, in_dtype, w_dtype=None, per_item: bool = False) -> int:
        """Max vector size of the Act for ``in_dtype`` x ``w_dtype`` (None: no weights).
        ``per_item=True`` (Torq's ``biasScalePerItem``): the lanes that can each take their
        own bias record, as many records as the bias memory holds: (bias, scale) pairs of
        two int32 for integer data, one float32 bias for float data (4 and 8 on torq)."""
        if per_item:   # the partials then split into vectors of this many (Torq's rule)
            self.s.act_items = self._records_max(is_float(_dtype(in_dtype)))
            return self.s.act_items
        return self.unit.width(in_dtype, w_dtype)

    def _records_max(self, floating: bool) -> int:
        return self.s.target.memories[self.s.bram.memory].size // (4 if floating else 8)

    def rescale_clamp(self, p: Data, b: Data, shift: int, zero_point: int, lo, hi) -> Data:
        """``clamp((((p + bias) * scale + r) >> shift) + zero_point, lo, hi)`` in 64-bit
        integers, ``r`` the target's rounding term; ``b`` holds one (bias, scale) pair. On
        float partials: ``clamp((p + bias) * scale + zero_point, lo, hi)`` in float32.
        ``shift`` is an integer in 0..62 (0 on float partials); ``zero_point``, ``lo`` and
        ``hi`` are integers on integer partials, numbers on float ones (``KernelError`` for
        a float or bool where an integer is needed: nothing is truncated). The integer
        result is int32: a bound beyond int32 acts as the int32 limit, and bounds holding no
        int32 value raise ``KernelError``. For float partials ``b`` may hold the bias alone
        (one float32 or bfloat16 value, scale 1): Torq's float types have no Act scale
        (``scaleBiasEntries`` is 1), as in its ReduceMeanPattern."""
        floating = is_float(p.dtype) if isinstance(p, Data) else False
        records = self._records(b, floating)
        if records is None and (not isinstance(b, Data) or b.kind != "BData" or
                                b.size not in ((1, 2) if floating else (2,))):
            raise KernelError("rescale_clamp: b must be a BData holding one (bias, scale) pair"
                              + (", or the bias alone for float partials" if floating else
                                 f"; got {getattr(b, 'size', b)} value(s)"))
        shift = as_int(shift, "s.act.rescale_clamp: shift", KernelError)
        if shift < 0 or shift > 62:
            raise KernelError(f"rescale_clamp: shift {shift} outside 0..62")
        if is_float(p.dtype) and shift:
            raise KernelError(f"rescale_clamp: shift {shift} on float partials; use scale")
        recs = {} if records is None else {"records": records}
        return self._op("rescale_clamp", p, (b,), shift=int(shift), zero_point=zero_point,
                        lo=lo, hi=hi, **recs)

    def _records(self, b, floating: bool) -> int | None:
        """Torq's per-item bias records: ``b`` of shape ``(R, 2)`` (integer partials:
        (bias, scale) pairs) or ``(R, 1)`` (float: biases), ``R`` a power of two up to
        ``width(..., per_item=True)``; lane ``i`` takes record ``i % R``. None for a 1-D
        ``b`` (one record)."""
        if not isinstance(b, Data) or b.kind != "BData" or b.view.layout.rank != 2:
            return None
        r, k = b.shape
        most = self._records_max(floating)
        if k != (1 if floating else 2) or r & (r - 1) or not 1 <= r <= most:
            raise KernelError(f"rescale_clamp: per-item bias records of shape {b.shape}; "
                              f"{'float' if floating else 'integer'} partials take (R, "
                              f"{1 if floating else 2}) with R a power of two up to {most}")
        return r

    def clamp(self, p: Data, lo, hi, mode: str = "ACT") -> Data:
        """``clamp(p, lo, hi)`` of the partials ``p``: int32 results from integer partials
        (``lo``, ``hi`` integers, as for ``rescale_clamp``), float32 from float partials
        (``lo``, ``hi`` numbers; a NaN passes). ``mode`` is Torq's ``ACTMode``, applied
        before the clamp: ``ABS``, ``NEG``, ``CLZ`` (leading zeros of the int32, 32 for 0;
        integer partials), ``CEL``, ``FLR`` (float partials), ``I2F`` (integer partials to
        float32, nearest even: float bounds, float32 results), ``F2I`` (float partials
        clamped by float bounds, then truncated towards zero to int32, saturating);
        ``arith.act_clamp`` is the formula."""
        name = getattr(mode, "name", mode)
        if name not in arith.ACT_MODES:
            raise KernelError(f"Act mode {mode!r}: Torq's modes are {', '.join(arith.ACT_MODES)}")
        floating = isinstance(p, Data) and is_float(p.dtype)
        if name in _ACT_FLOAT_MODES and not floating or name in _ACT_INT_MODES and floating:
            want = "float" if name in _ACT_FLOAT_MODES else "integer"
            raise KernelError(f"Act mode {name} takes {want} partials; these are "
                              f"{getattr(p, 'dtype', p)}")
        if name == "ACT":
            return self._op("clamp", p, (), lo=lo, hi=hi)
        return self._op("clamp", p, (), lo=lo, hi=hi, mode=name)

    def to_fixed(self, p: Data, shift: int = 0) -> Data:
        """Float partials to fixed point, the AIE API's ``aie::to_fixed<int32>(v, shift)``
        (``bfloat16_to_int(v, shift)``) as AIE-ML rounds it: ``floor(p * 2**shift)``,
        saturated to int32 (NaN gives 0); ``shift`` an integer in -126..126. A store into a
        narrower integer tensor then saturates. ``to_fixed(p, 8)`` of -1.3 is
        floor(-332.8) = -333, -1.3 in Q8.8."""
        if not isinstance(p, Data) or not is_float(p.dtype):
            raise KernelError(f"Act to_fixed converts float partials (from float data); got "
                              f"{getattr(p, 'dtype', p)} partials")
        shift = as_int(shift, "s.act.to_fixed: shift", KernelError)
        if not -126 <= shift <= 126:
            raise KernelError(f"Act to_fixed: shift {shift} outside -126..126")
        p, label = self._begin("to_fixed", p)
        return self._emit("to_fixed", p, label, "int32", (), {"shift": int(shift)})

    def load(self, p: Data) -> Data:
        """Torq's ``act.load``: the partials unchanged (int32 or float32), a clamp to the
        whole range of their type."""
        if not isinstance(p, Data):
            raise KernelError(f"s.act.load expects ALU partials, got {type(p).__name__}")
        if is_float(p.dtype):
            return self.clamp(p, -math.inf, math.inf)
        lo, hi = int_range(p.dtype)
        return self.clamp(p, lo, hi)

    rescaleClamp = rescale_clamp

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
        from ..lut import parallel_lookup

        parallel_lookup(table, np.zeros(1, np.int32), step_bits, bias, oor)  # the AIE API's rules
        q = self._table_op("lookup", p, table, arith.act_result_dtype(table.offset_dtype),
                           step_bits=int(step_bits), bias=int(bias), oor=oor)
        return replace(q, design=d)

    def linear_approx(self, p: Data, lut, step_bits: int | None = None,
                      bias: int | None = None, shift_offset: int | None = None, *,
                      clamp: tuple | None = None, scale_exp: int | None = None,
                      to_vector: tuple | None = None) -> Data:
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
        float operands, or data that does not fit the table's input type.

        ``to_vector=(dtype, shift, rounding, saturation)`` (trailing items may be left out)
        converts an integer ``q`` as the AIE API's ``compute(x).to_vector<dtype>(shift)``
        does: ``npukit.lut.to_vector(q, dtype, shift, rounding, saturation)``, every
        ``aie::rounding_mode`` and ``aie::saturation_mode``; ``dtype`` is int8, uint8, int16,
        uint16 or int32, and the result is its value in int32. With a ``Lut`` only."""
        self._partials("linear_approx", p)
        table, d = self._table("linear_approx", lut, "linear")
        if to_vector is not None and d is not None:
            raise LutError("Act linear_approx: to_vector converts a bare Lut's accumulator; a "
                           "Design's result already has its meaning (pass design.lut)")
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
        from ..lut import linear_approx

        probe = linear_approx(table, np.zeros(1, in_dt), step_bits, bias, shift_offset,
                              extended=True)  # the AIE API's rules, with their numbers
        out_dt = probe.dtype
        if to_vector is not None:
            from ..lut.accum import kernel_to_vector

            to_vector = kernel_to_vector(to_vector, probe)
            out_dt = np.dtype(np.int32)
        q = self._table_op("linear_approx", p, table, out_dt, step_bits=int(step_bits),
                           bias=int(bias), shift_offset=int(shift_offset), lo=lo, hi=hi,
                           scale_exp=int(scale_exp), in_dtype=in_dt.name,
                           **({} if to_vector is None else {"to_vector": to_vector}))
        return replace(q, design=d)

    @staticmethod
    def _partials(op: str, p) -> None:
        if not isinstance(p, Data) or p.kind != "PData":
            raise KernelError(f"Act {op} reads ALU partials (PData), got {getattr(p, 'kind', p)}")

    @staticmethod
    def _table(op: str, lut, kind: str):
        """``(Lut, Design or None)`` from what the kernel passed."""
        from ..lut import Design, Lut

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
        from ..lut import EXTENDED_LINEAR_TYPES, LINEAR_TYPES

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
        if p.view.layout.rank == 3:
            raise KernelError(f"Act {op}: the partials hold {p.shape[0]} rows (an outer or "
                              f"multi-scalar product); pass pdata[m][av]")
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
        mode, records = attrs.pop("mode", None), attrs.pop("records", None)
        # The bounds apply to the mode's result: float after I2F, float before F2I.
        floating = is_float(p.dtype) or mode == "I2F"
        out_dt = "float32" if floating and mode != "F2I" else "int32"
        vals = {k: _attr_value(f"`{label}`: {op}'s {k}", v, floating)
                for k, v in attrs.items()}
        if not floating:
            _act_bounds_reach_int32(f"`{label}`: Act {op}", vals["lo"], vals["hi"])
        if mode is not None:
            vals["mode"] = mode
        if records is not None:
            vals["records"] = records
        return self._emit(op, p, label, out_dt, tuple(d.view for d in extra), vals)


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
