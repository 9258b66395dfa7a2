"""The Compass DSL's lane builtins: functions that move lanes between vectors (concatenate,
split, interleave, broadcast, compact), build masks, and reduce a vector to one lane.

Each lowers to copies between registers through strided views (``ir.Copy`` in the ``vreg``
memory) and element-wise instructions on sub-views, so the simulator and the C back end read
the same statements. A register's native width is the target's: the ``vec`` unit's lanes per
instruction (``int8x32``, ``int16x16``, ``float32x8`` ... on ``compass``).

>>> import npukit.dsl as S
>>> @S.prim_func
... def pairs(a: S.ptr("i32x8", "global"), out: S.ptr("i32x16", "global")):
...     out[0] = S.vzip(a[0], a[0] + 100)
>>> prog = S.build(pairs, target="compass")
>>> out = np.zeros(16, np.int32)
>>> _ = prog.run("sim", a=np.arange(8, dtype=np.int32), out=out)
>>> out[:6].tolist()
[0, 100, 1, 101, 2, 102]
"""

from __future__ import annotations

import numpy as np

from .. import ir
from ..dtypes import is_float
from ..errors import DTypeError, KernelError
from ..layout import Layout
from ..poison import poison
from .trace import _parse_mask
from .types import DType
from .values import ParamInt, Scalar, Vec, _clamp_atom, _describe, as_affine, tracer

PARTS = ("all", "low", "high", "even", "odd")


# -- moving lanes ----------------------------------------------------------------------------

def _lanes(v: Vec, start: int, count: int, step: int = 1) -> ir.View:
    """Lanes ``start, start + step, ...`` (``count`` of them) of register ``v``."""
    return ir.View(v.buf, Layout((count,), v.type.elem, (step,), start))


def _move(dst: Vec, start: int, step: int, src: ir.View) -> None:
    """Copy ``src`` into lanes ``start, start + step, ...`` of register ``dst``."""
    tr = tracer()
    tr.emit(ir.Copy(_lanes(dst, start, src.size, step), src,
                    tr.tgt.engine("vreg", "vreg").name, label=tr.label()))


def native_lanes(t: DType) -> int:
    """Lanes of one register of ``t``'s element type on the target (``vec`` unit width)."""
    return tracer().tgt.units["vec"].width(t.elem)


def _vectors(xs, what: str) -> list[Vec]:
    """The operands as vectors of one type: numbers and typed scalars are spread over the
    lanes of the vector operands."""
    tr = tracer()
    t = tr.vector_type(what, *xs)
    return [tr.coerce(x, t, what) for x in xs]


def _part(part: str, lanes: int, what: str) -> tuple[int, int, int]:
    """(first lane, count, step) of the lanes a ``part`` selects from one operand."""
    if part not in PARTS:
        raise KernelError(f"{what}: part={part!r}; use one of {', '.join(PARTS)}")
    half = lanes // 2
    return {"all": (0, lanes, 1), "low": (0, half, 1), "high": (half, half, 1),
            "even": (0, half, 2), "odd": (1, half, 2)}[part]


def vconcat(inps, part: str = "all") -> Vec:
    """The operands' lanes one after the other: all of them (``part="all"``), or the
    ``"low"``/``"high"`` half or the ``"even"``/``"odd"`` lanes of each; numbers are spread.
    ``S.vconcat((x, y), "even")`` of ``i32x8`` is ``x0 x2 x4 x6 y0 y2 y4 y6``."""
    if not isinstance(inps, (list, tuple)) or len(inps) < 2:
        raise KernelError(f"S.vconcat: expects a list or tuple of 2 or more vectors, got "
                          f"{_describe(inps)}")
    xs = _vectors(inps, "S.vconcat")
    start, count, step = _part(part, xs[0].type.lanes, "S.vconcat")
    out = tracer().new_vec(xs[0].type.with_lanes(count * len(xs)), "cat")
    for k, x in enumerate(xs):
        _move(out, k * count, 1, _lanes(x, start, count, step))
    return out


def vsplit(x: Vec) -> tuple[Vec, ...]:
    """``x`` cut into registers of the target's native width, lowest lanes first:
    ``S.vsplit(i32x24)`` gives three ``i32x8``."""
    if not isinstance(x, Vec) or x.type.elem == np.bool_:
        raise KernelError(f"S.vsplit: expects a vector of numbers, got {_describe(x)}")
    n = native_lanes(x.type)
    if x.type.lanes % n or x.type.lanes == n:
        raise DTypeError(f"S.vsplit of {x.type}: the lanes must be a multiple (2 or more) of "
                         f"the native {n}")
    parts = []
    for k in range(x.type.lanes // n):
        part = tracer().new_vec(x.type.with_lanes(n), "part")
        _move(part, 0, 1, _lanes(x, k * n, n))
        parts.append(part)
    return tuple(parts)


def vzip(x, y, part: str = "all") -> Vec:
    """The lanes of ``x`` and ``y`` interleaved, ``x`` first: all of them (twice the lanes),
    or the selected ``part`` of each (``"low"``, ``"high"``, ``"even"``, ``"odd"``: the lanes
    of one operand). ``S.vzip(x, y, "high")`` of ``i32x8`` is ``x4 y4 x5 y5 x6 y6 x7 y7``."""
    x, y = _vectors([x, y], "S.vzip")
    start, count, step = _part(part, x.type.lanes, "S.vzip")
    out = tracer().new_vec(x.type.with_lanes(2 * count), "zip")
    _move(out, 0, 2, _lanes(x, start, count, step))
    _move(out, 1, 2, _lanes(y, start, count, step))
    return out


def vbcast(x, mask=None, lanes=None) -> Vec:
    """A vector with every lane ``x``: a typed scalar (``S.i16(5)``), a Python int (an
    int32), a lane of a vector (``v[0]``) or, with ``lanes``, a Python bool (a mask). It
    has the target's native lanes unless ``lanes`` says; lanes where ``mask`` is False are
    undefined (npukit poisons them)."""
    tr = tracer()
    if isinstance(x, (bool, np.bool_)):
        if lanes is None or mask is not None:
            raise KernelError("S.vbcast of a bool: give lanes=, and no mask")
        return tr.mask([bool(x)] * lanes, lanes, "S.vbcast")
    if isinstance(x, Vec) and x.type.lanes == 1:
        t = x.type
    elif isinstance(x, Scalar):
        t = x.type
    elif isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        x, t = Scalar(DType("int32"), x), DType("int32")  # npukit's int32 values are ints
    else:
        raise KernelError(f"S.vbcast: expects a typed scalar (S.i16(5), S.cast(x, 'int8')) "
                          f"or a lane of a vector (v[0]), got {_describe(x)}")
    n = native_lanes(t) if lanes is None else lanes
    if not isinstance(n, (int, np.integer)) or n < 2:
        raise KernelError(f"S.vbcast: lanes={lanes!r}; a vector has 2 or more lanes")
    out = tr.spread(x, n) if isinstance(x, Vec) else tr.splat(t.with_lanes(n), x.value)
    return tr.masked(out, mask, None, "S.vbcast")


# -- masks -----------------------------------------------------------------------------------

def const_mask(x) -> Vec:
    """A constant mask from bools (a list, tuple or array) or a mask string (``"4T4F"``,
    ``"2FT2TF"``: a count repeats the pattern after it); it has as many lanes as the
    values."""
    tr = tracer()
    if isinstance(x, str):
        x = _parse_mask(x, None, "S.const_mask")
    if isinstance(x, (list, tuple, np.ndarray)) and len(x) > 1:
        return tr.mask(list(x), len(x), "S.const_mask")
    raise KernelError(f"S.const_mask: expects bools or a mask string of 2 or more lanes, got "
                      f"{_describe(x)}")


def tail_mask(n, lanes: int) -> Vec:
    """A ``boolx<lanes>`` mask whose first ``n`` lanes are True (``n`` may be a run-time
    integer: then below 0 counts as 0, above ``lanes`` as ``lanes``)."""
    tr = tracer()
    if not isinstance(lanes, (int, np.integer)) or lanes < 2:
        raise KernelError(f"S.tail_mask: lanes={lanes!r}; a mask has 2 or more lanes")
    count = as_affine(n, "S.tail_mask")
    if not count.terms:
        if not 0 <= count.const <= lanes:
            raise KernelError(f"S.tail_mask({count.const}, {lanes}): n must lie in 0..{lanes}")
        return tr.mask([k < count.const for k in range(lanes)], lanes, "S.tail_mask")
    # lanes True then lanes False, read from lane (lanes - n): the first n lanes are True
    steps = tr.const_buffer("tail_steps", np.arange(2 * lanes) < lanes)
    at = ir.affine(lanes) - _clamp_atom(count, 0, lanes)
    out = tr.new_vec(DType(f"boolx{lanes}"), "tail")
    tr.emit(ir.Copy(out.view, ir.View(steps, Layout((lanes,), np.bool_), at),
                    tr.tgt.engine("constant", "vreg").name, label=tr.label()))
    return out


# -- reductions ------------------------------------------------------------------------------

def _tree(op: str, v: Vec, start: int, count: int) -> Vec:
    """``op`` over lanes ``start .. start + count - 1`` of ``v`` (a power of two) as a
    balanced tree of neighbours: ``((l0 op l1) op (l2 op l3)) op ...``; a one-lane vector."""
    tr = tracer()
    level, first = v, start
    while count > 1:
        count //= 2
        level = tr.compute(op, level.type.with_lanes(count),
                           [_lanes(level, first, count, 2), _lanes(level, first + 1, count, 2)])
        first = 0
    if level is v:  # a one-lane input: its lane
        level = tr.lane(v, start)
    return level


def _reduce(op: str, x, mask, neutral, what: str, acc_type: DType | None = None) -> Vec:
    """``op`` over the active lanes of ``x``, one native register at a time (the registers'
    results combined in order), in lane 0 of a vector of ``out_type``; the other lanes are
    undefined (npukit poisons them)."""
    tr = tracer()
    if not isinstance(x, Vec) or x.type.elem == np.bool_:
        raise KernelError(f"{what}: expects a vector of numbers, got {_describe(x)}")
    t, n = x.type, native_lanes(x.type)
    if t.lanes % n:
        raise DTypeError(f"{what} of {t}: the lanes must be a multiple of the native {n}")
    if mask is not None:
        x = tr.select(mask, x, neutral(t.elem), what)
    if acc_type is not None and acc_type != t.element_of:
        x = tr.compute("vcast", acc_type.with_lanes(t.lanes), [x])
    acc = None
    for k in range(t.lanes // n):
        part = _tree(op, x, k * n, n)
        acc = part if acc is None else tr.compute(op, part.type, [acc, part])
    lanes = t.lanes // 2 if acc.type.elem.itemsize > t.elem.itemsize else t.lanes
    out = tr.new_vec(acc.type.with_lanes(lanes), what[2:])
    tr.emit(ir.Fill(out.view, poison(out.type.elem, ()).item(), tr.label()))
    _move(out, 0, 1, acc.view)
    return out


def _all_lanes(op: str, mask, what: str) -> Vec:
    """``op`` ("vand", "vor") over every lane of a bool vector, halving it each step: a
    one-lane bool value, which an ``if`` may test at run time."""
    tr = tracer()
    if not isinstance(mask, Vec) or not mask.type.is_bool:
        raise DTypeError(f"{what}: expects a bool vector (a mask), got {_describe(mask)}")
    level = mask
    while level.type.lanes > 1:
        n = level.type.lanes
        half = n // 2
        out = tr.compute(op, DType("bool").with_lanes(half),
                         [_lanes(level, 0, half), _lanes(level, half, half)])
        if n % 2:  # the odd lane out joins lane 0
            last = tr.compute(op, DType("bool"), [_lanes(out, 0, 1), _lanes(level, n - 1, 1)])
            _move(out, 0, 1, last.view)
        level = out
    return level


def vall(mask) -> Vec:
    """Whether every lane of the mask is True: a bool value known at run time (``if
    S.vall(m):`` branches on it)."""
    return _all_lanes("vand", mask, "S.vall")


def vany(mask) -> Vec:
    """Whether any lane of the mask is True: a bool value known at run time."""
    return _all_lanes("vor", mask, "S.vany")


def _lowest(dt: np.dtype):
    return -np.inf if is_float(dt) else np.iinfo(dt).min


def _highest(dt: np.dtype):
    return np.inf if is_float(dt) else np.iinfo(dt).max


def vrpadd(x: Vec, mask=None) -> Vec:
    """The sum of the active lanes of ``x`` in lane 0 (other lanes undefined). Integers wrap
    in their type; float16/bfloat16 lanes are summed in float32 (the result is a float32
    vector of half the lanes); floats add neighbours in a balanced tree per native register
    (``(l0 + l1) + (l2 + l3)`` ...), then the registers' sums in order."""
    is16f = isinstance(x, Vec) and x.type.elem.name in ("float16", "bfloat16")
    return _reduce("vadd", x, mask, lambda dt: 0, "S.vrpadd",
                   DType("float32") if is16f else None)


def vrpmax(x: Vec, mask=None, return_idx: bool = False) -> Vec:
    """The greatest active lane of ``x`` in lane 0 (other lanes undefined); a NaN lane wins.
    ``return_idx``: lane 1 holds the index of the first active lane equal to it, its low
    bits in the lane's type."""
    return _extreme("vmax", x, mask, return_idx, _lowest, "S.vrpmax")


def vrpmin(x: Vec, mask=None, return_idx: bool = False) -> Vec:
    """The least active lane of ``x`` in lane 0 (other lanes undefined), as ``S.vrpmax``."""
    return _extreme("vmin", x, mask, return_idx, _highest, "S.vrpmin")


def _extreme(op: str, x, mask, return_idx: bool, neutral, what: str) -> Vec:
    out = _reduce(op, x, mask, neutral, what)
    if not return_idx:
        return out
    tr = tracer()
    t = x.type
    idx_t = DType(f"uint{8 * t.elem.itemsize}x{t.lanes}")
    hit = tr.compare("eq", x, tr.lane(out, 0))
    if mask is not None:
        hit = tr.logic("vand", hit, tr.mask(mask, t.lanes, what), what)
    iota = tr.const_buffer("lane_ids", np.arange(t.lanes, dtype=idx_t.elem))
    ids = tr.new_vec(idx_t, "lane_ids")
    tr.emit(ir.Copy(ids.view, ir.View(iota, Layout((t.lanes,), idx_t.elem)),
                    tr.tgt.engine("constant", "vreg").name, label=tr.label()))
    first = _reduce("vmin", tr.select(hit, ids, int(np.iinfo(idx_t.elem).max), what), None,
                    None, what)
    _move(out, 1, 1, tr.compute("vbitcast", t.element_of, [_lanes(first, 0, 1)]).view)
    return out


# -- lane permutations -----------------------------------------------------------------------

def _window(v: Vec, at, lanes: int, what: str) -> Vec:
    """``lanes`` lanes of ``v`` from lane ``at`` (a constant or run-time index)."""
    tr = tracer()
    out = tr.new_vec(v.type.with_lanes(lanes), what[2:])
    start = as_affine(at, what)
    lo, hi = start.bounds()
    if lo < 0 or hi + lanes > v.type.lanes:
        raise KernelError(f"{what}: lanes {lo}..{hi + lanes - 1} of a {v.type} vector")
    src = ir.View(v.buf, Layout((lanes,), v.type.elem), start)
    tr.emit(ir.Copy(out.view, src, tr.tgt.engine("vreg", "vreg").name, label=tr.label()))
    return out


def vrevs(x: Vec) -> Vec:
    """The lanes of ``x`` (numbers or a mask) in reverse order."""
    if not isinstance(x, Vec):
        raise KernelError(f"S.vrevs: expects a vector, got {_describe(x)}")
    tr, n = tracer(), x.type.lanes
    out = tr.new_vec(x.type, "rev")
    _move(out, 0, 1, ir.View(x.buf, Layout((n,), x.type.elem, (-1,), n - 1)))
    return out


def _shift_count(shift, lanes: int, what: str):
    if isinstance(shift, (int, np.integer)) and not 0 <= shift < lanes:
        raise KernelError(f"{what}: shift {shift} must lie in 0..{lanes - 1}")
    return shift


def vshfl(x: Vec, shift) -> Vec:
    """The lanes of ``x`` rotated down by ``shift`` (0..lanes-1): ``x[shift:] + x[:shift]``."""
    n = x.type.lanes
    return _window(vconcat((x, x)), _shift_count(shift, n, "S.vshfl"), n, "S.vshfl")


def vsldl(x, y, shift) -> Vec:
    """``x`` moved down by ``shift`` lanes, filled from the bottom of ``y``:
    ``x[shift:] + y[:shift]``."""
    x, y = _vectors([x, y], "S.vsldl")
    n = x.type.lanes
    return _window(vconcat((x, y)), _shift_count(shift, n + 1, "S.vsldl"), n, "S.vsldl")


class ConstantIndexError(KernelError):
    """An index the Compass DSL takes only as a constant given as a variable (``S.vreplic``
    of a vector other than one whole register): refused by its kind alone, whatever its value, so
    ``BuildManager.build`` finds it before the call."""


def vreplic(x: Vec, index=0) -> Vec:
    """Lane ``index`` of ``x`` in every lane; of a vector other than one whole register,
    ``index`` must be a constant (``ConstantIndexError``), as in the Compass DSL."""
    n = x.type.lanes
    native = tracer().tgt.units["vec"].width(x.type.elem)
    if n != native and (isinstance(index, (bool, np.bool_, ParamInt)) or
                        not isinstance(index, (int, np.integer))):
        raise ConstantIndexError(f"S.vreplic of a {x.type} vector (not one register of "
                                 f"{native} lanes) with a variable index (a scalar parameter "
                                 f"or a run-time value): The arg \"index\" expects an integer "
                                 f"constant value.")
    lane = _window(x, _shift_count(index, n, "S.vreplic"), 1, "S.vreplic")
    return tracer().spread(lane, n)


def vtbl(table, indices: Vec) -> Vec:
    """Lane ``k`` is lane ``indices[k]`` of the 2 to 4 vectors of ``table`` one after the
    other, or 0 where the index is outside them (negative or past the end)."""
    tr = tracer()
    if not isinstance(table, (list, tuple)) or not 2 <= len(table) <= 4:
        raise KernelError(f"S.vtbl: table must be 2 to 4 vectors, got {_describe(table)}")
    if not isinstance(indices, Vec) or indices.type.elem.kind not in "iu":
        raise DTypeError(f"S.vtbl: indices must be an integer vector, got "
                         f"{_describe(indices)}")
    whole = vconcat(tuple(table))
    inside = tr.logic("vand", tr.compare("ge", indices, 0),
                      tr.compare("lt", indices, min(whole.type.lanes,
                                                    int(np.iinfo(indices.type.elem).max))),
                      "S.vtbl")
    if whole.type.lanes > np.iinfo(indices.type.elem).max:  # every index is inside
        inside = tr.compare("ge", indices, 0)
    t = whole.type.with_lanes(indices.type.lanes)
    return tr.compute("vgather", t, [whole.view, indices, inside])


# -- compaction ------------------------------------------------------------------------------

def _compact(x: Vec, m: Vec, what: str) -> Vec:
    """The lanes of ``x`` where ``m`` is True, packed at the bottom in order; the rest 0.
    Output lane ``j`` gathers lane ``i``, the first whose running count of active lanes
    reaches ``j + 1``: a log-step prefix sum gives the counts, a binary search (one gather
    per step) finds ``i``, lanes past the last active one gather nothing (0)."""
    tr = tracer()
    n = x.type.lanes
    t = DType(f"int16x{n}")  # lane numbers, -1 .. n
    count = tr.select(m, t(1), 0, what)
    step = 1
    while step < n:  # inclusive prefix sum: add the counts step lanes below
        below = tr.new_vec(t, "below")
        tr.emit(ir.Fill(below.view, 0, tr.label()))
        _move(below, step, 1, _lanes(count, 0, n - step))
        count = tr.compute("vadd", t, [count, below])
        step *= 2
    wanted = tr.new_vec(t, "wanted")  # j + 1 in lane j
    tr.emit(ir.Copy(wanted.view, ir.View(tr.const_buffer("lane_rank", np.arange(1, n + 1,
                                                                            dtype=np.int16)),
                                         Layout((n,), np.int16)),
                    tr.tgt.engine("constant", "vreg").name, label=tr.label()))
    last = t(-1)  # the last lane known to count fewer than j + 1
    step = 1 << n.bit_length()  # the steps add up to n or more: lane n is reachable
    while step > 1:
        step //= 2
        probe = tr.compute("vmin", t, [tr.arith("vadd", last, step, what), t(n - 1)])
        seen = tr.compute("vgather", t, [count.view, probe])
        last = tr.select(tr.compare("lt", seen, wanted), probe, last, what)
        first = tr.arith("vadd", last, 1, what)
    inside = tr.compare("lt", first, n)
    return tr.compute("vgather", x.type, [x.view, first, inside])


def vcompt(x: Vec, mask) -> Vec:
    """The active lanes of ``x`` packed into the lowest lanes, in order; the rest are 0."""
    if not isinstance(x, Vec) or x.type.elem == np.bool_:
        raise KernelError(f"S.vcompt: expects a vector of numbers, got {_describe(x)}")
    return _compact(x, tracer().mask(mask, x.type.lanes, "S.vcompt"), "S.vcompt")


def vcompc(x, y, mask) -> Vec:
    """The active lanes of ``x`` packed into the lowest lanes, then the lowest lanes of
    ``y`` fill the rest."""
    tr = tracer()
    x, y = _vectors([x, y], "S.vcompc")
    n = x.type.lanes
    m = vconcat((tr.mask(mask, n, "S.vcompc"), tr.mask([True] * n, n, "S.vcompc")))
    packed = _compact(vconcat((x, y)), m, "S.vcompc")
    return _window(packed, 0, n, "S.vcompc")
