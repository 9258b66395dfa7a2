"""Evaluating one node whose inputs are all constants (the reader's constant folding), with the
implementation npukit runs the operator with when it is not folded, or numpy with ONNX's
exact semantics, so a folded model computes what the same model fed as inputs computes:

- the elementwise operators on integers and bool (``Cast``, integer arithmetic, comparisons,
  logic, ``Where``, ...): the numpy twins of ``basic_kernels.integer``'s kernels;
- ``QuantizeLinear`` to 8 bits: ``basic_kernels.common.quantize`` (the reference evaluator
  wraps what overflows int32 instead of saturating it);
- ``Slice`` (ONNX's clamping of starts and ends, which numpy's slices do not share),
  ``Shape``'s start and end (the reference evaluator keeps a dimension where ONNX Runtime
  keeps none), ``Reshape`` and ``Expand`` (a shape that does not fit refused by name),
  ``Gather`` and ``GatherElements`` (indices from the end when negative, an index out of
  range refused by name; ``GatherElements``' indices may be shorter than the data along
  every axis, as ONNX Runtime takes them) and ``Range`` (float ones accumulated in their
  type, as ONNX Runtime's loop does);
- every other operator by the onnx package's reference evaluator (float32 arithmetic and
  ``Sqrt`` there correctly rounded, as ONNX Runtime folds them: a scale such as
  ``1 / Sqrt(head size)`` must be ONNX Runtime's for a quantized model to stay bit-exact).

A failure is a ``ModelError`` of one line naming the node."""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..tiler.basic_kernels import common, integer
from .operands import where

# Operators of ``basic_kernels.integer`` with the same name in ONNX and a bool output.
_TO_BOOL = ("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor",
            "Not", "IsNaN")
_SAME = ("Add", "Sub", "Mul", "Div", "Neg", "Abs", "Sign", "BitwiseAnd", "BitwiseOr",
         "BitwiseXor", "BitwiseNot")


def _attrs(node) -> dict:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def dequantize(node, values: list) -> np.ndarray:
    """DequantizeLinear of a constant: ``(x - zero_point) * scale``, per tensor or along
    ``axis``."""
    x = np.asarray(values[0])
    scale = np.asarray(values[1], np.float32)
    zp = np.asarray(values[2]) if len(values) > 2 and values[2] is not None else \
        np.zeros(scale.shape, x.dtype)
    axis = _attrs(node).get("axis", 1) % max(x.ndim, 1)
    if scale.size > 1:
        shape = [1] * x.ndim
        shape[axis] = scale.size
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    return ((x.astype(np.int64) - zp.astype(np.int64)).astype(np.float32) * scale).astype(
        np.float32)


def _castable(src: np.dtype, dst: np.dtype) -> bool:
    """Whether npukit's ``Cast`` kernel converts ``src`` to ``dst`` (numbers and bool; bfloat16
    is the onnx package's own type there)."""
    return {src.kind, dst.kind} <= set("iubf") and "bfloat16" not in (src.name, dst.name)


def cast(x: np.ndarray, dtype) -> np.ndarray:
    """``x`` converted to ``dtype`` as npukit's ``Cast`` kernel converts it (ONNX Runtime's
    x86 conversions), numpy's ``astype`` for the types that kernel does not take."""
    x, dtype = np.asarray(x), np.dtype(dtype)
    if _castable(x.dtype, dtype):
        with np.errstate(all="ignore"):
            return np.asarray(integer.OPS["Cast"].ref(x, dtype)).astype(dtype)
    return x.astype(dtype)


def _quantize(node, values: list) -> np.ndarray | None:
    """QuantizeLinear to int8 or uint8 as npukit's quantize kernel computes it (ONNX
    Runtime's: ``x / scale`` clamped, rounded to nearest even, plus the zero point), per
    tensor or per slice along ``axis``; None for the other forms."""
    x, scale = np.asarray(values[0], np.float32), np.asarray(values[1], np.float32)
    zp = np.asarray(values[2]) if len(values) > 2 and values[2] is not None else \
        np.zeros(scale.shape, np.uint8)
    a = _attrs(node)
    if zp.dtype not in (np.int8, np.uint8) or a.get("block_size") or a.get("output_dtype") \
            or x.dtype != np.float32 or scale.size != zp.size:
        return None
    info = np.iinfo(zp.dtype)
    axis = a.get("axis", 1) % max(x.ndim, 1)
    scale, zp = scale.reshape(-1), zp.reshape(-1).astype(np.int64)
    if scale.size == 1:
        return common.quantize(x, scale[0], int(zp[0]), info.min, info.max).astype(info.dtype)
    if x.ndim == 0 or scale.size != x.shape[axis]:
        return None
    parts = [common.quantize(np.take(x, [k], axis=axis), scale[k], int(zp[k]), info.min,
                             info.max) for k in range(scale.size)]
    return np.concatenate(parts, axis=axis).astype(info.dtype)


def _typed_key(node, xs: list[np.ndarray]) -> tuple[str, np.dtype] | None:
    """(``basic_kernels.integer`` operation, output dtype) of an elementwise node npukit runs
    with a typed kernel, or None."""
    op, a = node.op_type, _attrs(node)
    kinds = {x.dtype.kind for x in xs}
    if op == "Cast":
        from onnx import helper

        out = np.dtype(helper.tensor_dtype_to_np_dtype(a["to"]))
        return ("Cast", out) if _castable(xs[0].dtype, out) else None
    if op == "Where":
        return ("Where", xs[1].dtype) if xs[0].dtype == np.bool_ else None
    if op in _TO_BOOL:
        return (op, np.dtype(bool)) if kinds <= set("iubf") else None
    if not kinds <= set("iu") or len({x.dtype for x in xs}) > 1:
        return None  # float arithmetic: numpy's float32 is IEEE's, as the evaluator computes
    if op in _SAME or (op in ("Max", "Min") and len(xs) == 2):
        return op, xs[0].dtype
    if op == "Mod":
        return ("Mod1" if a.get("fmod", 0) else "Mod"), xs[0].dtype
    if op == "Clip" and len(xs) == 3:
        return "Clip", xs[0].dtype
    return None


def _indices(node, idx: np.ndarray, size: int, axis: int) -> np.ndarray:
    """``idx`` counted from the end where negative; ``ModelError`` when one is outside
    ``[-size, size)``."""
    idx = np.asarray(idx).astype(np.int64)
    bad = (idx < -size) | (idx >= size)
    if bad.any():
        raise ModelError(f"{where(node)}: index {int(idx[bad][0])} along axis {axis} of size "
                         f"{size} is outside [{-size}, {size - 1}]")
    return np.where(idx < 0, idx + size, idx)


def _gather(node, data: np.ndarray, idx: np.ndarray) -> np.ndarray:
    axis = _attrs(node).get("axis", 0)
    if not -data.ndim <= axis < data.ndim:
        raise ModelError(f"{where(node)}: axis {axis} of a rank-{data.ndim} input")
    axis %= data.ndim
    return np.take(data, _indices(node, idx, data.shape[axis], axis), axis=axis)


def _gather_elements(node, data: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``out[i..] = data[i.. with idx[i..] at axis]``: ``data`` cut to ``idx``'s extent on the
    other axes."""
    axis = _attrs(node).get("axis", 0)
    if idx.ndim != data.ndim or not -data.ndim <= axis < data.ndim:
        raise ModelError(f"{where(node)}: indices of shape {list(idx.shape)} and axis {axis} for "
                         f"data of shape {list(data.shape)}; GatherElements takes indices of "
                         f"the data's rank")
    axis %= data.ndim
    over = [d for d in range(data.ndim) if d != axis and idx.shape[d] > data.shape[d]]
    if over:
        raise ModelError(f"{where(node)}: indices of shape {list(idx.shape)} exceed data of "
                         f"shape {list(data.shape)} along axis {over[0]}")
    cut = data[tuple(slice(None) if d == axis else slice(0, idx.shape[d])
                     for d in range(data.ndim))]
    return np.take_along_axis(cut, _indices(node, idx, data.shape[axis], axis), axis=axis)


def _slice(node, x: np.ndarray, starts, ends, axes=None, steps=None) -> np.ndarray:
    """ONNX's Slice: negative starts and ends count from the end, then clamp to [0, d] (to
    [0, d - 1] and [-1, d - 1] for a negative step), where numpy's slices clamp otherwise."""
    starts, ends = (np.asarray(v).reshape(-1).tolist() for v in (starts, ends))
    axes = list(range(len(starts))) if axes is None else np.asarray(axes).reshape(-1).tolist()
    steps = [1] * len(starts) if steps is None else np.asarray(steps).reshape(-1).tolist()
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ModelError(f"{where(node)}: starts, ends, axes and steps of lengths "
                         f"{len(starts)}, {len(ends)}, {len(axes)}, {len(steps)}")
    seen = set()
    for b, e, a, step in zip(starts, ends, axes, steps):
        if not -x.ndim <= a < x.ndim or a % x.ndim in seen or step == 0:
            raise ModelError(f"{where(node)}: axis {a} step {step} for a rank-{x.ndim} input "
                             f"(each axis once, steps not 0)")
        a %= x.ndim
        seen.add(a)
        d = x.shape[a]
        b, e = b + d if b < 0 else b, e + d if e < 0 else e
        lo, hi = (0, d) if step > 0 else (-1, d - 1)
        b, e = min(max(b, 0), hi), min(max(e, lo), hi)
        x = np.take(x, np.arange(b, e, step, dtype=np.int64), axis=a)
    return x


def _reshape(node, x: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """ONNX's Reshape: a 0 copies the input's dimension (unless ``allowzero``), one -1 takes
    what is left; a shape that does not hold the input's elements is refused by name."""
    want = [int(d) for d in np.asarray(shape).reshape(-1)]
    keep = not _attrs(node).get("allowzero", 0)
    out = [x.shape[k] if d == 0 and keep and k < x.ndim else d for k, d in enumerate(want)]
    known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
    if out.count(-1) == 1 and known > 0 and x.size % known == 0:
        out[out.index(-1)] = x.size // known
    if min(out, default=0) < 0 or int(np.prod(out, dtype=np.int64)) != x.size or (
            keep and 0 in want[x.ndim:]):
        raise ModelError(f"{where(node)}: shape {want} cannot hold the {x.size} elements of "
                         f"its input of shape {list(x.shape)}")
    return x.reshape(out)


def _expand(node, x: np.ndarray, shape: np.ndarray) -> np.ndarray:
    want = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    try:
        out = np.broadcast_shapes(x.shape, want)
    except ValueError:
        raise ModelError(f"{where(node)}: shape {list(want)} does not broadcast with its "
                         f"input's {list(x.shape)}") from None
    return np.broadcast_to(x, out).copy()


def _range(node, start, limit, delta) -> np.ndarray:
    """ONNX Runtime's Range: ``ceil((limit - start) / delta)`` values, each the previous plus
    ``delta`` in the inputs' type."""
    start, limit, delta = (np.asarray(v).reshape(-1)[0] for v in (start, limit, delta))
    if delta == 0:
        raise ModelError(f"{where(node)}: delta is 0")
    dt = np.asarray(start).dtype
    if dt.kind in "iu":
        return np.arange(int(start), int(limit), int(delta), dtype=np.int64).astype(dt)
    with np.errstate(all="ignore"):
        n = max(int(np.ceil(float(np.asarray(limit - start, dt)) / float(delta))), 0)
    return np.cumsum(np.concatenate([[start], np.full(n - 1, delta, dt)]), dtype=dt)[:n] \
        if n else np.zeros(0, dt)


def _own(node, values: list) -> list[np.ndarray] | None:
    """The node by npukit's own implementation, or None where the evaluator computes it."""
    op, xs = node.op_type, [np.asarray(v) for v in values if v is not None]
    if node.domain not in ("", "ai.onnx"):
        return None
    if op == "DequantizeLinear" and not _attrs(node).get("block_size"):
        return [dequantize(node, values)]
    if op == "QuantizeLinear" and (q := _quantize(node, values)) is not None:
        return [q]
    if op == "Slice" and len(values) >= 3:  # axes and steps may be absent
        return [_slice(node, *(None if v is None else np.asarray(v) for v in values))]
    if len(xs) != len(values):
        return None
    if op == "Shape" and len(xs) == 1:  # python's slice clamps start and end as ONNX does
        a = _attrs(node)
        return [np.array(xs[0].shape, np.int64)[a.get("start", 0):a.get("end", xs[0].ndim)]]
    if op == "Gather" and len(xs) == 2:
        return [_gather(node, *xs)]
    if op == "GatherElements" and len(xs) == 2:
        return [_gather_elements(node, *xs)]
    if op == "Reshape" and len(xs) == 2:
        return [_reshape(node, *xs)]
    if op == "Expand" and len(xs) == 2:
        return [_expand(node, *xs)]
    if op == "Range" and len(xs) == 3:
        return [_range(node, *xs)]
    key = _typed_key(node, xs) if xs else None
    if key is None:
        return None
    spec, out = integer.OPS[key[0]], key[1]
    if spec.arity != len(xs):
        return None
    with np.errstate(all="ignore"):
        return [np.asarray(spec.ref(*xs, out)).astype(out)]


def evaluate(node, values: list, opsets) -> list[np.ndarray]:
    """The outputs of ``node`` (an ``onnx.NodeProto``) on constant ``values`` (None for an
    absent optional input)."""
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    own = _own(node, values)
    if own is not None:
        return own
    names = [f"in{k}" for k in range(len(values))]
    n = helper.make_node(node.op_type, [names[k] if x else "" for k, x in enumerate(node.input)],
                         [f"out{k}" for k in range(len(node.output))], domain=node.domain)
    n.attribute.extend(node.attribute)
    inits = [numpy_helper.from_array(np.asarray(v), names[k]) for k, v in enumerate(values)
             if v is not None]
    g = helper.make_graph([n], "fold", [], [helper.make_value_info(o, helper.TypeProto())
                                            for o in n.output], inits)
    m = helper.make_model(g, opset_imports=opsets)
    try:
        return [np.asarray(v) for v in ReferenceEvaluator(m).run(None, {})]
    except Exception as exc:
        shapes = ", ".join(f"{np.asarray(v).dtype}{list(np.shape(v))}" for v in values
                           if v is not None)
        reason = " ".join(str(exc).split())[:160]
        raise ModelError(f"{where(node)}: its inputs are constants ({shapes}) but ONNX's "
                         f"reference evaluator failed on them ({type(exc).__name__}: "
                         f"{reason})") from None
