"""``design``: build a table and its lookup parameters that approximate a function on a range,
and measure the result through the exact semantics of ``semantics.py``.

Input format. An integer input holds ``q = round(x * 2**in_frac_bits)`` (saturated to its
dtype), with ``in_frac_bits`` the largest for which ``lo`` and ``hi`` fit (``hi`` may
saturate by one step, so ``[-8, 8]`` in int8 is Q3.4). A bfloat16 input is the value itself;
the kernel multiplies it by ``2**in_frac_bits`` (exact for a power of two) before
``linear_approx`` when the table's cells are narrower than 1.

Cells. Entry ``i`` serves the inputs with ``(q >> step_bits) + bias == i`` (for bfloat16,
``floor(x * 2**in_frac_bits) >> step_bits``): cells of width ``2**(step_bits -
in_frac_bits)``, the smallest power of two for which the cells covering ``[lo, hi]`` fit in
``entries`` under the rules of the AIE API (minimum ``step_bits`` of the linear type table;
``bias`` a power of two for a signed ``parallel_lookup``, 0 for an unsigned one).

Output format. A float output holds the value rounded to ``out_dtype``. An integer output
holds ``y * 2**out_frac_bits``; for ``linear_approx`` that is the accumulator (int32 for the
int8 row, int64 for the int16 rows), whose offsets are added as ``offset << shift_offset``
(``out_frac_bits`` as large as the slopes allow, ``shift_offset`` as small as the offsets
allow), so its values are far wider than ``out_dtype``: ``output_range`` gives them, and a
kernel refuses to store them into a tensor that cannot hold them (``check_store``).

Out of range. A ``linear`` design clamps its input to ``[lo, hi]`` before ``linear_approx``
(one vector max and min, as the TPP tensor compiler and the Compass DSL tutorial do; without it the
remainder of an integer input would saw-tooth on the edge entry). A ``direct`` design needs no
clamp: entries below and above the range hold ``fn(lo)`` and ``fn(hi)`` and ``parallel_lookup``
saturates. Either way an input outside ``[lo, hi]`` returns the edge value, so ``error`` measures
against ``fn(clamp(v, lo, hi))`` at the value ``v`` the input tensor holds (input quantisation is
the caller's; the clamp and the table are the design's).

Methods. ``sample`` stores samples: a direct entry holds ``fn`` at the cell's left end, a
linear entry the chord through the cell's two ends (the TPP tensor compiler's interpolation).
``minimax`` fits each entry so its error ripples evenly: a direct entry holds the midrange of ``fn``
over the cell, a linear entry the best uniform line over the inputs of its cell, fitted
independently per segment (each entry of ``linear_approx`` has its own slope and offset),
then quantised to the storage types, picking the rounding of the slope that errs least.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..dtypes import dtype as _dtype
from ..dtypes import int_range, is_float, ml_dtypes
from ..errors import LutError
from .catalogue import Function, function
from .fit import bf16_ceil, bf16_floor, midrange, minimax_slope
from .reals import reals
from .semantics import LINEAR_TYPES, LinearType, linear_approx, parallel_lookup
from .table import Lut

KINDS = ("direct", "linear")
METHODS = ("sample", "minimax")
DEFAULT_DTYPES = {"direct": ("int16", "bfloat16"), "linear": ("bfloat16", "float32")}
_GRID = 513             # points per cell for fitting: every input of a cell of up to 512
MAX_ENTRIES = 1 << 16   # every int16 input its own entry; far beyond any table memory
MAX_POINTS = 1 << 24    # inputs of an error sweep (a few float64 arrays of 128 MiB)


@dataclass(frozen=True)
class ErrorStats:
    """Errors of a design against its float64 reference over a sweep.

    ``max_ulp`` is the largest error in units of the output's last place at the reference
    value (for an integer output, one step of the stored offsets).

    >>> ErrorStats(0.01, 0.002, 3.5, 7.9, 1000).max_abs
    0.01
    """

    max_abs: float
    mean_abs: float
    max_ulp: float
    worst_x: float
    points: int

    def __str__(self) -> str:
        return (f"max_abs {self.max_abs:.3g} (at x = {self.worst_x:.6g})  mean_abs "
                f"{self.mean_abs:.3g}  max_ulp {self.max_ulp:.3g}  over {self.points} points")


@dataclass(frozen=True, eq=False)
class Design:
    """A table with the parameters that make it approximate ``function`` on ``[lo, hi]``.

    - ``lut``, ``step_bits``, ``bias``, ``shift_offset``: the arguments of
      ``parallel_lookup`` (``oor="saturate"``) or ``linear_approx``;
    - ``in_frac_bits``: an integer input holds ``x * 2**in_frac_bits``; a bfloat16 input is
      multiplied by ``2**in_frac_bits`` before ``linear_approx``;
    - ``out_frac_bits``: an integer output holds ``y * 2**out_frac_bits`` in
      ``result_dtype`` (the table's values for a direct design; the int32 or int64
      accumulator for a linear one, whose offsets hold ``y * 2**(out_frac_bits -
      shift_offset)``), values in ``output_range()``; ``None`` for float outputs;
    - ``clamp``: the range a linear design clamps its input to first (``None`` for direct);
    - ``used``: the first and last entry that inputs in ``[lo, hi]`` reach.

    >>> d = design("sigmoid", -8, 8, 33, kind="linear")
    >>> d.step_bits, d.bias, d.in_frac_bits
    (0, 16, 1)
    >>> float(d.evaluate(0.0))
    0.5
    """

    function: Function
    lo: float
    hi: float
    entries: int
    kind: str
    method: str
    in_dtype: np.dtype
    out_dtype: np.dtype
    lut: Lut
    step_bits: int
    bias: int
    shift_offset: int
    in_frac_bits: int
    out_frac_bits: int | None
    clamp: tuple[float, float] | None
    used: tuple[int, int]

    def __repr__(self) -> str:
        return (f"Design({self.function.name} on [{self.lo:g}, {self.hi:g}], {self.kind} "
                f"{self.method}, {self.lut!r}, step_bits={self.step_bits}, bias={self.bias}, "
                f"shift_offset={self.shift_offset}, in_frac_bits={self.in_frac_bits}, "
                f"out_frac_bits={self.out_frac_bits})")

    def quantize(self, x) -> np.ndarray:
        """The input tensor the kernel receives for real inputs ``x`` (``in_dtype``).

        >>> design("tanh", -4, 4, 64, in_dtype="int8").quantize([1.0, 100.0]).tolist()
        [32, 127]
        """
        x = reals(x)
        if is_float(self.in_dtype):
            return x.astype(self.in_dtype)
        if np.isnan(x).any():
            raise LutError(f"quantize: x holds NaN (at flat index "
                           f"{int(np.flatnonzero(np.isnan(x))[0])}); an {self.in_dtype} input "
                           f"has no value for it")
        qmin, qmax = int_range(self.in_dtype)
        return np.clip(np.rint(np.ldexp(x, self.in_frac_bits)), qmin, qmax).astype(self.in_dtype)

    def dequantize(self, q) -> np.ndarray:
        """The real value an input tensor element stands for (float64)."""
        v = reals(q, "q")
        return v if is_float(self.in_dtype) else np.ldexp(v, -self.in_frac_bits)

    def evaluate(self, x) -> np.ndarray:
        """The design's output (float64 real values) for real inputs ``x``, computed through
        ``parallel_lookup`` / ``linear_approx`` exactly as the kernel would.

        >>> d = design("silu", -8, 8, 257, kind="linear", method="minimax")
        >>> abs(float(d.evaluate(1.0)) - 0.7310585786) < 1e-4
        True
        """
        q = self.quantize(x)
        if self.kind == "direct":
            out = parallel_lookup(self.lut, q, self.step_bits, self.bias)
        elif is_float(self.in_dtype):
            xf = np.clip(q.astype(np.float64), *self.clamp)
            xs = np.ldexp(xf, self.in_frac_bits).astype(self.in_dtype)
            out = linear_approx(self.lut, xs, self.step_bits, self.bias)
        else:
            ulo, uhi = (int(np.ldexp(c, self.in_frac_bits)) for c in self.clamp)
            out = linear_approx(self.lut, np.clip(q, ulo, uhi), self.step_bits, self.bias,
                                self.shift_offset)
        out = out.astype(np.float64)
        return out if self.out_frac_bits is None else np.ldexp(out, -self.out_frac_bits)

    def reference(self, x) -> np.ndarray:
        """``fn(clamp(v, lo, hi))`` at the value ``v`` the input tensor holds for ``x``."""
        v = self.dequantize(self.quantize(x))
        return self.function(np.clip(v, self.lo, self.hi))

    def ulp(self, y) -> np.ndarray:
        """One unit in the last place of the output at values ``y``."""
        y = reals(y, "y")
        if self.out_frac_bits is not None:
            return np.full_like(y, math.ldexp(1.0, self.shift_offset - self.out_frac_bits))
        info = ml_dtypes.finfo(self.out_dtype)
        _, exp = np.frexp(y)
        return np.maximum(np.ldexp(float(info.eps), exp - 1), float(info.smallest_subnormal))

    def error(self, points: int = 65537, x=None) -> ErrorStats:
        """Errors over ``points`` inputs evenly spread over ``[lo, hi]`` widened by an eighth
        of its width on each side (out-of-range inputs included), plus ``lo`` and ``hi``; or
        over the inputs ``x`` when given.

        >>> design("sigmoid", -8, 8, 33, kind="linear").error().max_abs < 0.01
        True
        """
        if x is None:
            x = self.sweep(points)
        x = reals(x).reshape(-1)
        if x.size == 0:
            raise LutError("error needs at least one input; x is empty")
        ref = self.reference(x)
        err = np.abs(self.evaluate(x) - ref)
        worst = int(np.argmax(err))
        return ErrorStats(float(err[worst]), float(err.mean()),
                          float(np.max(err / self.ulp(ref))), float(x[worst]), int(x.size))

    def sweep(self, points: int = 65537) -> np.ndarray:
        """The inputs ``error`` uses by default: ``[lo, hi]`` widened by an eighth each side.

        >>> design("exp", -8, 0, 64, in_dtype="int8").sweep(5).tolist()
        [-9.0, -6.5, -4.0, -1.5, 1.0, -8.0, 0.0]
        """
        if isinstance(points, bool) or not isinstance(points, (int, np.integer)) or \
                not 2 <= points <= MAX_POINTS:
            raise LutError(f"points={points!r} must be an integer in [2, {MAX_POINTS}]")
        margin = (self.hi - self.lo) / 8
        return np.concatenate([np.linspace(self.lo - margin, self.hi + margin, points),
                               [self.lo, self.hi]])

    @property
    def result_dtype(self) -> np.dtype:
        """The dtype ``parallel_lookup`` / ``linear_approx`` return for this design: the
        table's value type for a direct design, the accumulator (int32 for the int8 row,
        int64 for the int16 rows, float32 for the bfloat16 row) for a linear one.

        >>> design("sigmoid", -8, 8, 33, kind="linear", in_dtype="int16",
        ...        out_dtype="int16").result_dtype
        dtype('int64')
        """
        if self.kind == "direct":
            return self.out_dtype
        row = next(r for r in LINEAR_TYPES if (r.input, r.offset) ==
                   (self.in_dtype.name, self.out_dtype.name))
        return row.acc_dtype

    def output_range(self) -> tuple[int, int] | None:
        """The smallest and largest integer the output holds (``y * 2**out_frac_bits``)
        over every input, out-of-range ones included; ``None`` for a float output. In a
        kernel the partial may be any int32 (summed data), so a direct design may reach
        every entry; a linear design clamps its input first. A tensor that stores the
        output unchanged must hold this range.

        >>> design("sigmoid", -8, 8, 33, kind="linear", in_dtype="int8",
        ...        out_dtype="int8").output_range()
        (0, 8213)
        """
        if self.out_frac_bits is None:
            return None
        if self.kind == "direct":   # saturation reaches every entry
            return int(self.lut.offsets.min()), int(self.lut.offsets.max())
        # The clamp bounds every input to [ulo, uhi]: at most 2**16 of them, all evaluated.
        ulo, uhi = (int(np.ldexp(c, self.in_frac_bits)) for c in self.clamp)
        out = linear_approx(self.lut, np.arange(ulo, uhi + 1).astype(self.in_dtype),
                            self.step_bits, self.bias, self.shift_offset)
        return int(out.min()), int(out.max())

    def check_store(self, dtype, tensor: str, what: str = "store") -> None:
        """Raise ``LutError`` when a tensor of ``dtype`` cannot hold every value of the
        integer output (``output_range``): storing the output into it would saturate them
        (or overflow a float16 to infinity). ``tensor`` and ``what`` ("store", "append")
        name the store in the message.

        >>> d = design("sigmoid", -8, 8, 33, kind="linear", in_dtype="int8", out_dtype="int8")
        >>> d.check_store("int16", "y")        # 0..8213 fits
        >>> d.check_store("int8", "y")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        npukit.errors.LutError: store into 'y': ... values 0..8213, but 'y' is int8 (-128..127)...
        """
        span = self.output_range()
        dt = _dtype(dtype)
        if span is None or not (dt.kind in "iu" or is_float(dt)):
            return
        lo, hi = span
        if dt.kind in "iu":
            tlo, thi = int_range(dt)
            limits, effect = f"{tlo}..{thi}", "saturate them"
        else:
            thi = float(ml_dtypes.finfo(dt).max)
            tlo, limits, effect = -thi, f"finite up to {thi:g}", "overflow them to infinity"
        if tlo <= lo and hi <= thi:
            return
        op = "lookup" if self.kind == "direct" else "linear_approx"
        acc = " accumulator" if self.kind == "linear" else ""
        other = (f"a direct design with out_dtype={dt.name!r} (its table holds y * 2**k in "
                 f"{dt.name})" if dt.kind in "iu" and dt.itemsize <= 4 else
                 "a design whose values it holds")
        raise LutError(
            f"{what} into {tensor!r}: the Act {op} of {self.function.name} on "
            f"[{self.lo:g}, {self.hi:g}] ({self.kind}, {self.in_dtype} -> {self.out_dtype}) "
            f"produces its {self.result_dtype}{acc} holding y * 2**{self.out_frac_bits}, "
            f"values {lo}..{hi}, but {tensor!r} is {dt.name} ({limits}): the {what} would "
            f"{effect}. Use an output tensor of {_narrowest(lo, hi)} or wider, or "
            f"{other}")

    def describe(self) -> str:
        """The design's parameters, one per line, for people.

        >>> print(design("exp", -8, 0, 64, in_dtype="int8", out_dtype="int8").describe())
        ... # doctest: +ELLIPSIS
        exp on [-8, 0]: direct table of 64 int8 entries, method sample
        ...
        """
        head = (f"{self.function.name} on [{self.lo:g}, {self.hi:g}]: {self.kind} table of "
                f"{self.entries} {_types(self.lut)} entries, method {self.method}")
        lines = [head]
        if is_float(self.in_dtype):
            scale = (f", scaled by 2**{self.in_frac_bits} before the lookup"
                     if self.in_frac_bits else "")
            lines.append(f"  input   {self.in_dtype}{scale}")
        else:
            lines.append(f"  input   {self.in_dtype} holding x * 2**{self.in_frac_bits} "
                         f"(in_frac_bits={self.in_frac_bits})")
        if self.out_frac_bits is None:
            lines.append(f"  output  {self.result_dtype}")
        else:
            lo, hi = self.output_range()
            what = " accumulator" if self.kind == "linear" else ""
            lines.append(f"  output  {self.result_dtype}{what} holding y * "
                         f"2**{self.out_frac_bits} (out_frac_bits={self.out_frac_bits}), "
                         f"values {lo}..{hi}")
            lines.append(f"          (a tensor of {_narrowest(lo, hi)} or wider holds them; a "
                         f"narrower one would saturate them)")
            if self.kind == "linear":
                lines.append(f"          offsets {self.out_dtype} holding y * "
                             f"2**{self.out_frac_bits - self.shift_offset}, added as offset "
                             f"<< {self.shift_offset}")
        if self.kind == "direct":
            lines.append(f"  parallel_lookup(step_bits={self.step_bits}, bias={self.bias}, "
                         "oor='saturate')")
        else:
            lines.append(f"  clamp input to [{self.clamp[0]:.9g}, {self.clamp[1]:.9g}], then "
                         f"linear_approx(step_bits={self.step_bits}, bias={self.bias}, "
                         f"shift_offset={self.shift_offset})")
        cell = math.ldexp(1.0, self.step_bits - self.in_frac_bits)
        lines.append(f"  cells of width {cell:g}; entries {self.used[0]}..{self.used[1]} "
                     f"serve [lo, hi]; out of range: clamped to the edge entries")
        return "\n".join(lines)


def _narrowest(lo: int, hi: int) -> str:
    """The narrowest signed integer type holding ``[lo, hi]``."""
    return next(t for t in ("int8", "int16", "int32", "int64")
                if int_range(np.dtype(t))[0] <= lo and hi <= int_range(np.dtype(t))[1])


def _types(lut: Lut) -> str:
    if lut.slopes is None:
        return str(lut.offset_dtype)
    return f"(offset {lut.offset_dtype}, slope {lut.slope_dtype})"


@dataclass(frozen=True)
class _Grid:
    """Where the cells lie. ``u`` is the input in lookup units: ``q`` for integers,
    ``x * 2**frac`` for bfloat16; cell ``c`` covers ``u`` in ``[c << step, (c + 1) << step)``
    and is entry ``c + bias``."""

    frac: int
    step: int
    bias: int
    u_lo: float         # smallest input served (representable)
    u_hi: float         # largest input served (representable)
    first: int          # entry of u_lo
    last: int           # entry of u_hi (after saturation)


def _next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def _integer_grid(lo: float, hi: float, entries: int, kind: str, dt: np.dtype,
                  min_step: int) -> _Grid:
    qmin, qmax = int_range(dt)
    bits = dt.itemsize * 8
    fmax = next((f for f in range(126, -127, -1)
                 if math.ldexp(lo, f) >= qmin and math.ldexp(hi, f) <= qmax + 1), None)
    if fmax is None:
        raise LutError(f"in_dtype {dt} (integers {qmin}..{qmax}) cannot hold [lo, hi] = "
                       f"[{lo:g}, {hi:g}] in any fixed-point format")
    d0 = math.floor(math.log2((hi - lo) / entries)) - 1
    for d in range(d0, d0 + 256):
        frac = min(fmax, bits - 1 - d)
        step = frac + d
        if step < min_step:
            continue
        u_lo = max(math.ceil(math.ldexp(lo, frac)), qmin)
        u_hi = min(math.floor(math.ldexp(hi, frac)), qmax)
        if u_lo > u_hi:
            continue
        a, b = u_lo >> step, u_hi >> step
        if kind == "linear":
            bias = -a
        elif dt.kind == "i":
            bias = 0 if a >= 0 else _next_pow2(-a)
        else:
            bias = 0
        # A range ending exactly on a cell boundary may give up that one point: saturation
        # folds it into the last entry (direct) or the clamp moves it one step (linear).
        if b + bias == entries and u_hi == b << step and u_hi > u_lo:
            b -= 1
            if kind == "linear":
                u_hi -= 1
        if a + bias >= 0 and b + bias <= entries - 1:
            return _Grid(frac, step, bias, u_lo, u_hi, a + bias, b + bias)
    raise LutError(f"no step_bits and bias fit [{lo:g}, {hi:g}] into {entries} entries "
                   f"with {dt} input")


def _bfloat16_grid(lo: float, hi: float, entries: int) -> _Grid:
    x_lo, x_hi = float(bf16_ceil(lo)), float(bf16_floor(hi))
    if x_lo > x_hi:
        raise LutError(f"no bfloat16 value lies in [{lo!r}, {hi!r}]")
    d0 = math.floor(math.log2((hi - lo) / entries)) - 1
    for d in range(d0, d0 + 256):
        frac, step = (0, d) if d >= 0 else (-d, 0)
        a = math.floor(math.ldexp(x_lo, -d))
        b_exact = math.ldexp(x_hi, -d)
        b = math.floor(b_exact)
        if b == b_exact and b > a:
            b -= 1          # the last cell's line extends to its closing point
        if b - a + 1 <= entries:
            return _Grid(frac, step, -a, math.ldexp(x_lo, frac), math.ldexp(x_hi, frac),
                         0, b - a)
    raise LutError(f"no step_bits and bias fit [{lo:g}, {hi:g}] into {entries} entries "
                   "with bfloat16 input")


def _cells(g: _Grid, closed: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per used entry: the cell start and the first and last input it serves (``u`` units).

    ``closed`` cells include the next cell's start (the continuous line of a bfloat16
    segment); others end one input step earlier."""
    idx = np.arange(g.first, g.last + 1)
    start = np.ldexp((idx - g.bias).astype(np.float64), g.step)
    end = start + math.ldexp(1.0, g.step) - (0 if closed else 1)
    left = np.maximum(start, g.u_lo)
    right = np.minimum(end, g.u_hi)
    right[-1] = g.u_hi      # the last entry also serves a saturated closing point
    return start, left, right


def _points(left: np.ndarray, right: np.ndarray, snap: Callable) -> np.ndarray:
    """``_GRID`` inputs per cell from ``left`` to ``right``, snapped to representable ones."""
    u = left[:, None] + (right - left)[:, None] * np.linspace(0.0, 1.0, _GRID)[None, :]
    u = np.clip(snap(u), left[:, None], right[:, None])
    u[:, 0], u[:, -1] = left, right
    return u


def design(fn: str | Callable | Function, lo: float, hi: float, entries: int,
           kind: str = "direct", in_dtype=None, out_dtype=None,
           method: str = "sample") -> Design:
    """Design a ``kind`` table of ``entries`` entries approximating ``fn`` on ``[lo, hi]``.

    ``fn`` is a catalogue name (``FUNCTIONS``) or a callable on float64 arrays. ``kind``:
    ``"direct"`` (``parallel_lookup``; integer ``in_dtype``, any ``out_dtype``; defaults
    int16 -> bfloat16) or ``"linear"`` (``linear_approx``; ``(in_dtype, out_dtype)`` one of
    the AIE API's rows: (int8, int8), (int16, int16), (int16, int32), (bfloat16, float32), the
    default). ``method``: ``"sample"`` or ``"minimax"`` (module docstring).

    >>> d = design("tanh", -4, 4, 256, in_dtype="int16", out_dtype="float32", method="minimax")
    >>> d.step_bits, d.bias, d.error().max_abs < 0.02
    (8, 128, True)
    """
    f = function(fn)
    if not isinstance(kind, str) or kind not in KINDS:
        raise LutError(f"kind={kind!r} must be one of {KINDS}")
    if not isinstance(method, str) or method not in METHODS:
        raise LutError(f"method={method!r} must be one of {METHODS}")
    for name, v in (("lo", lo), ("hi", hi)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise LutError(f"{name}={v!r} must be a real number")
    lo, hi = float(lo), float(hi)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise LutError(f"the range [lo, hi] = [{lo!r}, {hi!r}] must be finite with lo < hi")
    if not math.isfinite(hi - lo):
        raise LutError(f"the range [lo, hi] = [{lo!r}, {hi!r}] is too wide: hi - lo "
                       f"overflows a float64")
    if isinstance(entries, bool) or not isinstance(entries, (int, np.integer)) or \
            not 2 <= entries <= MAX_ENTRIES:
        raise LutError(f"entries={entries!r} must be an integer in [2, {MAX_ENTRIES}]")
    entries = int(entries)
    in_dt = _dtype(in_dtype if in_dtype is not None else DEFAULT_DTYPES[kind][0])
    out_dt = _dtype(out_dtype if out_dtype is not None else DEFAULT_DTYPES[kind][1])
    xs = np.linspace(lo, hi, 4097)
    bad = ~np.isfinite(f(xs))
    if np.any(bad):
        raise LutError(f"fn {f.name} must be finite on [lo, hi] = [{lo:g}, {hi:g}]; it is "
                       f"not at x = {xs[bad][0]:g}")
    if kind == "direct":
        return _direct(f, lo, hi, entries, method, in_dt, out_dt)
    row = next((r for r in LINEAR_TYPES if (r.input, r.offset) == (in_dt.name, out_dt.name)),
               None)
    if row is None:
        rows = ", ".join(f"({r.input}, {r.offset})" for r in LINEAR_TYPES)
        raise LutError(f"kind='linear' has no type row for in_dtype {in_dt}, out_dtype "
                       f"{out_dt}; the AIE API's rows (input, offset): {rows}")
    return _linear(f, lo, hi, entries, method, row)


def _direct(f: Function, lo: float, hi: float, entries: int, method: str,
            in_dt: np.dtype, out_dt: np.dtype) -> Design:
    if in_dt.kind not in "iu" or in_dt.itemsize > 4:
        raise LutError(f"kind='direct' indexes with integers of 8, 16 or 32 bits "
                       f"(parallel_lookup); in_dtype {in_dt} is not one")
    if not (out_dt.kind in "iu" or is_float(out_dt)):
        raise LutError(f"out_dtype {out_dt} must be an integer or float type")
    g = _integer_grid(lo, hi, entries, "direct", in_dt, 0)
    _, left, right = _cells(g, closed=False)
    # Real bounds of each entry's inputs; the edge entries also serve inputs beyond the
    # range, whose reference is fn(lo) or fn(hi).
    x_left = np.ldexp(left, -g.frac)
    x_right = np.ldexp(right, -g.frac)
    x_left[0], x_right[-1] = lo, hi
    if method == "sample":
        used = f(x_left)
    else:
        x = _points(x_left, x_right, lambda v: np.ldexp(np.rint(np.ldexp(v, g.frac)), -g.frac))
        used = midrange(f(x))
    values = np.concatenate([np.full(g.first, f(lo)), used,
                             np.full(entries - 1 - g.last, f(hi))])
    if is_float(out_dt):
        _check_fits(f, lo, hi, "values", values, out_dt)
        table, out_frac = values.astype(out_dt), None
    else:
        qmin, qmax = int_range(out_dt)
        if qmin == 0 and np.min(values) < 0:
            raise LutError(f"out_dtype {out_dt} cannot hold fn {f.name} on [{lo:g}, {hi:g}]: "
                           f"it reaches {np.min(values):.6g} < 0")
        out_frac = _frac_bits(np.max(np.abs(values)), qmax)
        table = np.clip(np.rint(np.ldexp(values, out_frac)), qmin, qmax).astype(out_dt)
    return Design(f, lo, hi, entries, "direct", method, in_dt, out_dt, Lut(table), g.step,
                  g.bias, 0, g.frac, out_frac, None, (g.first, g.last))


def _check_fits(f: Function, lo: float, hi: float, what: str, values: np.ndarray,
                dt) -> None:
    """A float table holds finite numbers: ``LutError`` when ``fn``'s ``values`` (or its
    slopes) overflow the storage type ``dt``."""
    with np.errstate(over="ignore", invalid="ignore"):
        bad = not np.isfinite(np.asarray(values).astype(dt).astype(np.float64)).all()
    if bad:
        big = float(np.max(np.abs(values)))
        top = float(ml_dtypes.finfo(dt).max)
        raise LutError(f"fn {f.name} on [{lo:g}, {hi:g}]: its {what} reach {big:.6g}, beyond "
                       f"the largest {np.dtype(dt)} ({top:.6g}); scale the function or narrow "
                       f"the range")


def _frac_bits(largest: float, limit: int) -> int:
    """The largest ``k`` with ``largest * 2**k <= limit``."""
    if largest == 0:
        return 0
    return math.floor(math.log2(limit / largest))


def _linear(f: Function, lo: float, hi: float, entries: int, method: str,
            row: LinearType) -> Design:
    in_dt, out_dt = _dtype(row.input), _dtype(row.offset)
    floating = row.accumulator == "accfloat"
    if floating:
        g = _bfloat16_grid(lo, hi, entries)

        def snap(u):
            x = np.ldexp(u, -g.frac).astype(ml_dtypes.bfloat16).astype(np.float64)
            return np.ldexp(x, g.frac)
    else:
        g = _integer_grid(lo, hi, entries, "linear", in_dt, row.min_step_bits)
        snap = np.rint
    start, left, right = _cells(g, closed=floating)
    u = _points(left, right, snap)
    y = f(np.ldexp(u, -g.frac))
    t = u - start[:, None]          # the remainder for integers, a local coordinate for floats
    if method == "sample":
        chord_right = np.minimum(start + math.ldexp(1.0, g.step), g.u_hi)
        y_left, y_right = f(np.ldexp(left, -g.frac)), f(np.ldexp(chord_right, -g.frac))
        width = chord_right - left
        slope = np.divide(y_right - y_left, width, out=np.zeros_like(width), where=width > 0)
        offset = y_left - slope * (left - start)
    else:
        slope = minimax_slope(t, y)
        offset = midrange(y - slope[:, None] * t)
    low, high = int(g.first), int(entries - 1 - g.last)
    edge_lo, edge_hi = float(f(lo)), float(f(hi))
    if floating:
        _check_fits(f, lo, hi, "slopes", slope, ml_dtypes.bfloat16)
        _check_fits(f, lo, hi, "values", y, np.float32)
        with np.errstate(over="ignore"):
            slopes, offsets = _quantize_float(t, y, start, slope, offset, method)
        _check_fits(f, lo, hi, "offsets", offsets, np.float32)
        pad_s = np.zeros(1, ml_dtypes.bfloat16)
        slopes = np.concatenate([np.repeat(pad_s, low), slopes, np.repeat(pad_s, high)])
        offsets = np.concatenate([np.full(low, edge_lo, np.float32), offsets,
                                  np.full(high, edge_hi, np.float32)])
        out_frac, shift = None, 0
    else:
        slopes, offsets, out_frac, shift = _quantize_int(t, y, slope, offset, method, row,
                                                         max(abs(edge_lo), abs(edge_hi)))
        odt = np.dtype(row.offset)
        edges = np.rint(np.ldexp(np.array([edge_lo, edge_hi]), out_frac - shift))
        edges = np.clip(edges, *int_range(odt)).astype(odt)
        slopes = np.concatenate([np.zeros(low, odt), slopes, np.zeros(high, odt)])
        offsets = np.concatenate([np.repeat(edges[:1], low), offsets,
                                  np.repeat(edges[1:], high)])
    clamp = (math.ldexp(g.u_lo, -g.frac), math.ldexp(g.u_hi, -g.frac))
    return Design(f, lo, hi, entries, "linear", method, in_dt, out_dt, Lut(offsets, slopes),
                  g.step, g.bias, shift, g.frac, out_frac, clamp, (g.first, g.last))


def _pick(t: np.ndarray, y: np.ndarray, candidates: list[tuple[np.ndarray, np.ndarray]]
          ) -> tuple[np.ndarray, np.ndarray]:
    """Per entry, the (slope, offset) candidate with the smallest uniform error on (t, y);
    slopes and offsets here are real values, offsets at ``t = 0``."""
    errors = [np.max(np.abs(y - s[:, None] * t - o[:, None]), axis=-1) for s, o in candidates]
    best = np.argmin(np.stack(errors), axis=0)
    rows = np.arange(t.shape[0])
    return (np.stack([s for s, _ in candidates])[best, rows],
            np.stack([o for _, o in candidates])[best, rows])


def _quantize_float(t, y, start, slope, offset, method):
    """bfloat16 slopes and float32 offsets for ``out = slope * u + offset`` (global ``u``)."""
    if method == "sample":
        s = bf16_floor(slope).astype(np.float64)
        up = bf16_ceil(slope).astype(np.float64)
        s = np.where(np.abs(up - slope) < np.abs(s - slope), up, s)
        local = [(s, offset)]       # the line pivots on its value at the cell's start
    else:
        local = []
        for s in (bf16_floor(slope).astype(np.float64), bf16_ceil(slope).astype(np.float64)):
            local.append((s, midrange(y - s[:, None] * t)))
    # Offsets are stored for the global coordinate: value at u = 0 is o - s * start, rounded
    # to float32; compare candidates after that rounding.
    rounded = [(s, (o - s * start).astype(np.float32).astype(np.float64) + s * start)
               for s, o in local]
    s, o = _pick(t, y, rounded)
    return s.astype(ml_dtypes.bfloat16), (o - s * start).astype(np.float32)


def _quantize_int(t, y, slope, offset, method, row: LinearType, edge: float):
    """Integer slopes and offsets with ``out_frac_bits`` and ``shift_offset``."""
    odt = np.dtype(row.offset)
    omin, omax = int_range(odt)
    acc_bits = row.acc_dtype.itemsize * 8
    most_shift = acc_bits - odt.itemsize * 8 - 1
    frac_o = _frac_bits(max(float(np.max(np.abs(offset))), edge), omax)
    frac_s = _frac_bits(float(np.max(np.abs(slope))), omax) if np.any(slope) else \
        frac_o + most_shift
    out_frac = min(frac_s, frac_o + most_shift)
    shift = max(0, out_frac - frac_o)
    unit, ounit = math.ldexp(1.0, -out_frac), math.ldexp(1.0, shift - out_frac)

    def stored_offset(o):
        return np.clip(np.rint(o / ounit), omin, omax) * ounit

    if method == "sample":
        candidates = [np.rint(slope / unit)]
    else:
        candidates = [np.floor(slope / unit), np.ceil(slope / unit)]
    options = []
    for c in candidates:
        s = np.clip(c, omin, omax) * unit
        o = offset if method == "sample" else midrange(y - s[:, None] * t)
        options.append((s, stored_offset(o)))
    s, o = _pick(t, y, options)
    return (np.rint(s / unit).astype(odt), np.rint(o / ounit).astype(odt), out_frac, shift)
