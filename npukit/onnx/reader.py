"""Reading an ONNX model into a ``Net``: concrete input shapes, shape inference, constant
folding (``Constant``, ``ConstantOfShape``, ``Shape``-derived values, initializers feeding
``Reshape``/``Unsqueeze``: every node whose inputs are all known is evaluated by
``npukit.onnx.folding``), the weights a ``DequantizeLinear`` reads kept as
integers with their scale and zero point, and the shape and type of every other tensor."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ..dtypes import dtype as np_dtype
from ..errors import ModelError
from .budget import check_unroll
from .control import names_in, unroll
from .folding import cast, evaluate
from .functions import expand as expand_functions
from .operands import TYPE_ONLY, operands_known, where
from .sequences import resolve as resolve_sequences

# ONNX element types npukit's layers compute on, by dtype name (``np_dtype`` resolves them;
# bfloat16's ml_dtypes is imported only then); others may appear in folded constants only.
DTYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
          7: "int64", 9: "bool", 12: "uint32", 13: "uint64", 10: "float16", 11: "float64",
          16: "bfloat16"}
COMPUTED = ", ".join(DTYPES.values())
ONNX_TYPE_NAMES = {0: "undefined", 1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16",
                   6: "int32", 7: "int64", 8: "string", 9: "bool", 10: "float16", 11: "double",
                   12: "uint32", 13: "uint64", 16: "bfloat16"}
MS_DOMAIN = "com.microsoft"
SAME_SHAPE_OPS = ("GroupNormalization",)
# The largest constant npukit computes while folding (docs/onnx.md): a node whose output
# would be larger is refused before anything is allocated.
MAX_FOLDED_BYTES = 256 << 20
# Float tensors of more elements than this are weights, whose values ONNX shape inference
# never reads: the operands it reads (Reshape's shape, Resize's scales, Slice's starts,
# Range's bounds) hold one value per dimension or a scalar. They reach it as their type and
# dims only, which spares it serialising every weight (the 46 MB of a ResNet-18) each call.
SHAPE_ONLY_ELEMENTS = 1024
SHAPE_ONLY_TYPES = {np.dtype(np.float16): 10, np.dtype(np.float32): 1, np.dtype(np.float64): 11}


@dataclass(frozen=True)
class TInfo:
    """A tensor's shape and element type."""

    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass(frozen=True)
class QConst:
    """A constant integer tensor and the ``DequantizeLinear`` parameters that read it."""

    values: np.ndarray
    scale: np.ndarray  # float32, one value or one per slice along ``axis``
    zero_point: np.ndarray  # same shape as scale, the values' dtype
    axis: int


@dataclass
class Node:
    """A node left after folding: ``inputs`` are tensor names ("" for an absent optional
    input), ``attrs`` plain Python values."""

    op: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict
    domain: str = ""

    def where(self) -> str:
        return f"node {self.name!r} ({self.op})"


@dataclass
class Net:
    name: str
    opset: int
    inputs: list[str]
    outputs: list[str]
    info: dict[str, TInfo]
    consts: dict[str, np.ndarray]
    qconsts: dict[str, QConst]
    nodes: list[Node]
    doc: dict = field(default_factory=dict)


def _attrs(node) -> dict:
    from onnx import helper

    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode() for x in v]
        out[a.name] = v
    return out


def _load(model):
    import onnx

    if isinstance(model, onnx.ModelProto):
        out = onnx.ModelProto()
        out.CopyFrom(model)
        return out
    if isinstance(model, (str, os.PathLike)):
        try:
            return onnx.load(os.fspath(model))
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot read the ONNX model {os.fspath(model)!r}: {exc}") from None
        except Exception as exc:  # protobuf's DecodeError and friends
            raise ModelError(f"{os.fspath(model)!r} is not an ONNX model: {exc}") from None
    raise ModelError(f"npukit.onnx.load takes a path or an onnx.ModelProto, got "
                     f"{type(model).__name__}")


def shape_operands(model) -> list[str]:
    """The graph inputs of ``model`` (a path or an ``onnx.ModelProto``) whose values only
    select shapes (``npukit.onnx.operands.shape_operands``)."""
    from .operands import shape_operands as find

    return find(_load(model).graph)


def constant_operands(model) -> list[str]:
    """The graph inputs of ``model`` npukit needs as constants
    (``npukit.onnx.operands.constant_operands``)."""
    from .operands import constant_operands as find

    return find(_load(model).graph)


def _bind_constants(model, constants: dict) -> None:
    """Graph inputs given values (``load(constants=...)``) become initializers, checked
    against the input's element type and shape."""
    from onnx import helper, numpy_helper

    g = model.graph
    inputs = {vi.name: vi for vi in g.input}
    for t in g.initializer:
        inputs.pop(t.name, None)
    for name, value in constants.items():
        if name not in inputs:
            raise ModelError(f"constants names {name!r}, which is not an input of the model "
                             f"({', '.join(inputs) or 'none'})")
        if not inputs[name].type.HasField("tensor_type"):
            raise ModelError(f"constants[{name!r}]: the model's input is a "
                             f"{inputs[name].type.WhichOneof('value')}, not a tensor; npukit "
                             f"takes tensors as constants")
        try:
            value = np.asarray(value)
        except ValueError as exc:  # a ragged list
            raise ModelError(f"constants[{name!r}]: not an array ({exc})") from None
        tt = inputs[name].type.tensor_type
        want = helper.tensor_dtype_to_np_dtype(tt.elem_type) if tt.elem_type else value.dtype
        if value.dtype != want:
            raise ModelError(f"constants[{name!r}]: {value.dtype} values, the model's input is "
                             f"{want}")
        dims = _dims(inputs[name])
        if dims is not None and (len(dims) != value.ndim or any(
                isinstance(d, int) and d and d != v for d, v in zip(dims, value.shape))):
            raise ModelError(f"constants[{name!r}]: shape {list(value.shape)}, the model's "
                             f"input has {dims}")
        g.initializer.append(numpy_helper.from_array(value, name))


def _dims(vi) -> list:
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in t.shape.dim]


def _fix_inputs(model, inputs, input_shapes: dict | None) -> None:
    """Give every graph input concrete dimensions: the ones given, else the model's (a
    symbolic or missing dimension becomes 1)."""
    given = dict(input_shapes or {})
    unread = _unread(model.graph)
    for vi in inputs:
        dims = _dims(vi)
        if vi.name in given:
            want = tuple(int(d) for d in given.pop(vi.name))
            if dims is not None and len(dims) != len(want):
                raise ModelError(f"input {vi.name!r}: shape {want} given but the model says "
                                 f"rank {len(dims)} ({dims})")
            if 0 in want:
                raise ModelError(f"input {vi.name!r}: input_shapes gives dimension "
                                 f"{want.index(0)} as 0 ({list(want)}), an empty tensor; npukit "
                                 f"computes on non-empty ones")
        elif dims is None:
            raise ModelError(f"input {vi.name!r}: the model gives no shape; pass "
                             f"input_shapes={{{vi.name!r}: (...)}}")
        elif 0 in dims and vi.name not in unread:
            raise ModelError(f"input {vi.name!r}: dimension {dims.index(0)} is 0 ({dims}), an "
                             f"empty tensor; npukit computes on non-empty ones (input_shapes "
                             f"gives other dimensions)")
        else:
            want = tuple(d if isinstance(d, int) and d > 0 else 1 for d in dims)
        shape = vi.type.tensor_type.shape
        shape.ClearField("dim")
        for d in want:
            shape.dim.add().dim_value = d
    if given:
        raise ModelError(f"input_shapes names {sorted(given)}, which are not inputs of the "
                         f"model ({', '.join(vi.name for vi in inputs)})")
    # Shapes recorded for the symbolic ones are inferred again from the concrete inputs.
    del model.graph.value_info[:]
    for vi in model.graph.output:
        vi.type.tensor_type.ClearField("shape")


def _unread(g) -> set[str]:
    """The graph inputs whose values no node reads: read only for their type or shape
    (``TYPE_ONLY``: CastLike's target, of shape [0] in ONNX's tests) or not at all, so they
    may be empty."""
    reads: dict[str, set[bool]] = {}
    for node in g.node:
        for k, t in enumerate(node.input):
            reads.setdefault(t, set()).add(TYPE_ONLY.get(node.op_type) == k)
    return {vi.name for vi in g.input} - {t for t, how in reads.items() if False in how}


def _infer(model):
    """ONNX shape inference, completed for the ONNX Runtime operators of the com.microsoft
    domain npukit reads (the onnx package has no shapes for them) and for the operators of
    ``SAME_SHAPE_OPS`` where it gives up (GroupNormalization-21: its output is its input's
    shape)."""
    from onnx import helper, shape_inference

    if any(node.op_type in SAME_SHAPE_OPS for node in model.graph.node):
        _same_shapes(model, shape_inference)
    for _ in range(len(model.graph.node) + 1):
        try:
            model = _infer_once(model, shape_inference)
        except Exception as exc:
            raise ModelError(f"ONNX shape inference failed on the model: "
                             f"{str(exc).splitlines()[0]}") from None
        known = _infos(model)
        added = False
        for node in model.graph.node:
            if node.domain != MS_DOMAIN or all(known.get(o, (0, None))[1] is not None
                                                for o in node.output):
                continue
            out = _ms_shape(node, known, {t.name: t for t in model.graph.initializer})
            if out is not None:
                et, dims = out
                model.graph.value_info.append(
                    helper.make_tensor_value_info(node.output[0], et, dims))
                added = True
        if not added:
            return model
    return model


def _same_shapes(model, shape_inference) -> None:
    """Value infos for the outputs of ``SAME_SHAPE_OPS``, their input's type and shape, added
    to ``model`` before the strict inference (which refuses a reader of a tensor without a
    type)."""
    from onnx import helper

    for _ in range(len(model.graph.node)):
        known = _infos(shape_inference.infer_shapes(model, strict_mode=False, data_prop=True))
        added = False
        for node in model.graph.node:
            et, dims = known.get(node.input[0] if node.input else "", (0, None))
            if node.op_type in SAME_SHAPE_OPS and dims is not None and \
                    known.get(node.output[0], (0, None))[1] is None:
                model.graph.value_info.append(
                    helper.make_tensor_value_info(node.output[0], et, dims))
                added = True
        if not added:
            return


def _pool_size(size: int, k: int, s: int, d: int, pads: tuple[int, int], ceil: bool) -> int:
    """Output length of a pooling window, as ONNX Runtime computes it: with ceil_mode a last
    window that would start in the end padding is dropped."""
    span = size + pads[0] + pads[1] - d * (k - 1) - 1
    if not ceil:
        return span // s + 1
    out = -(-span // s) + 1
    return out - 1 if (out - 1) * s >= size + pads[0] else out


def _ceil_pools(model) -> list[int]:
    """Indices of the MaxPool and AveragePool nodes with ceil_mode=1 and explicit pads."""
    return [k for k, node in enumerate(model.graph.node)
            if node.op_type in ("MaxPool", "AveragePool") and
            _attrs(node).get("ceil_mode", 0) and
            _attrs(node).get("auto_pad", "NOTSET") in ("NOTSET", "")]


def _infer_once(model, shape_inference):
    """Strict ONNX shape inference, with ONNX Runtime's lengths for pooling with ceil_mode=1
    (ONNX shape inference keeps a last window that would start in the end padding; ONNX
    Runtime drops it): such pools are inferred as ceil_mode=0 with the end pads that give
    ONNX Runtime's length, then get their attributes back. Pools in a chain are settled one
    after the other from the input."""
    pools = _ceil_pools(model)
    if not pools:
        return shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    work = type(model)()
    work.CopyFrom(model)
    ms = {o for node in model.graph.node if node.domain == MS_DOMAIN for o in node.output}
    kept = [vi for vi in work.graph.value_info if vi.name in ms]  # shapes npukit gave
    del work.graph.value_info[:]
    work.graph.value_info.extend(kept)
    for o in work.graph.output:  # shapes ONNX shape inference wrote, inferred again
        o.type.tensor_type.ClearField("shape")
    for _ in range(len(pools)):
        known = _infos(shape_inference.infer_shapes(work, strict_mode=False, data_prop=True))
        if not any([_as_ort_pool(model.graph.node[k], work.graph.node[k], known)
                    for k in pools]):
            break
    typed = shape_inference.infer_shapes(work, strict_mode=True, data_prop=True)
    for k in pools:
        del typed.graph.node[k].attribute[:]
        typed.graph.node[k].attribute.extend(model.graph.node[k].attribute)
    return typed


def _as_ort_pool(node, target, known: dict) -> bool:
    """Sets ``target`` (a copy of the pooling ``node``) to ceil_mode=0 with the end pads
    that give ONNX Runtime's output length, once its input shape is known; True if that
    changed it."""
    from onnx import helper

    x = known.get(node.input[0], (0, None))[1]
    if x is None or not all(isinstance(d, int) for d in x):
        return False
    a = _attrs(node)
    k = a["kernel_shape"]
    n = len(k)
    st, dil = a.get("strides", [1] * n), a.get("dilations", [1] * n)
    pads = list(a.get("pads", [0] * 2 * n))
    ends = []
    for i in range(n):
        out = _pool_size(x[2 + i], k[i], st[i], dil[i], (pads[i], pads[i + n]), True)
        # the end padding with which the floor formula gives ``out``
        ends.append(max((out - 1) * st[i] + dil[i] * (k[i] - 1) + 1 - x[2 + i] - pads[i], 0))
    attrs = {**_attrs(target), "ceil_mode": 0, "pads": pads[:n] + ends}
    if attrs == _attrs(target):
        return False
    del target.attribute[:]
    target.attribute.extend(helper.make_attribute(key, v) for key, v in attrs.items())
    return True


def _ms_shape(node, known: dict, inits: dict):
    """(element type, dims) of the output of a com.microsoft quantized operator, from its
    inputs' shapes; None while they are unknown."""

    def shape(k):
        t = node.input[k]
        if t in inits:
            return inits[t].data_type, list(inits[t].dims)
        et, dims = known.get(t, (0, None))
        return (et, dims) if dims is not None and all(isinstance(d, int) for d in dims) else \
            (et, None)

    op, a = node.op_type, _attrs(node)
    et, x = shape(0) if node.input else (0, None)
    if op in ("QLinearAdd", "QLinearMul"):
        _, y = shape(3)
        if x is None or y is None:
            return None
        return et, list(np.broadcast_shapes(tuple(x), tuple(y)))
    if op in ("QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax"):
        return None if x is None else (et, x)
    if op == "QLinearGlobalAveragePool":
        return None if x is None else (et, x[:2] + [1] * (len(x) - 2))
    if op == "QLinearAveragePool":
        if x is None:
            return None
        k = a["kernel_shape"]
        n = len(k)
        st, pads = a.get("strides", [1] * n), a.get("pads", [0] * 2 * n)
        auto = a.get("auto_pad", "NOTSET")
        dims = []
        for i in range(n):
            if auto in ("SAME_UPPER", "SAME_LOWER"):
                dims.append(-(-x[2 + i] // st[i]))
            else:
                p = (0, 0) if auto == "VALID" else (pads[i], pads[i + n])
                dims.append(_pool_size(x[2 + i], k[i], st[i], 1, p, bool(a.get("ceil_mode", 0))))
        return et, x[:2] + dims
    if op == "QLinearConcat":
        parts = [shape(k) for k in range(2, len(node.input), 3)]
        if any(p[1] is None for p in parts):
            return None
        axis = a.get("axis", 0) % len(parts[0][1])
        out = list(parts[0][1])
        out[axis] = sum(p[1][axis] for p in parts)
        return parts[0][0], out
    if op == "QGemm":
        _, b = shape(3)
        if x is None or b is None:
            return None
        m = x[1] if a.get("transA", 0) else x[0]
        nn = b[0] if a.get("transB", 0) else b[1]
        et_y = shape(8)[0] if len(node.input) > 8 and node.input[8] else 1
        return et_y, [m, nn]
    return None


def _infos(model) -> dict[str, tuple]:
    """(element type, dims) of every tensor the model describes (the most complete
    description when several do)."""
    out = {}
    for vi in list(model.graph.input) + list(model.graph.output) + list(model.graph.value_info):
        t = vi.type.tensor_type
        dims = _dims(vi)
        if vi.name not in out or out[vi.name][1] is None or not out[vi.name][0]:
            out[vi.name] = (t.elem_type, dims)
    return out


def _qconst(node, values: list) -> QConst | None:
    """The integer weights a DequantizeLinear of a constant reads."""
    x = values[0]
    if x.dtype not in (np.int8, np.uint8, np.int32):
        return None
    scale = np.asarray(values[1], np.float32)
    zp = np.asarray(values[2] if len(values) > 2 and values[2] is not None
                    else np.zeros(scale.shape, x.dtype))
    axis = 1
    for a in node.attribute:
        if a.name == "axis":
            axis = a.i
        if a.name == "block_size" and a.i:
            return None
    return QConst(x, scale, zp, axis % max(x.ndim, 1))


def _foldable(node, values: list, infos: dict) -> None:
    """Refuse a node whose constant output would exceed ``MAX_FOLDED_BYTES``, from its
    inferred shape or, for the operators that make large tensors from small ones, from its
    inputs' values (before anything is allocated)."""
    from onnx import helper

    for k, out in enumerate(node.output):
        et, dims = infos.get(out, (0, None))
        if et and dims is not None and all(isinstance(d, int) for d in dims):
            made = dims, helper.tensor_dtype_to_np_dtype(et).itemsize
        else:
            made = _made_shape(node, values) if k == 0 else None
        if made is None:
            continue
        size = int(np.prod(made[0], dtype=object)) * made[1]
        if size > MAX_FOLDED_BYTES:
            raise ModelError(f"{where(node)}: its "
                             f"constant output {out!r} of shape {list(made[0])} would take "
                             f"{size} B, over the {MAX_FOLDED_BYTES} B npukit folds")


def _large_constants(g, consts: dict) -> None:
    """Refuse an over-large ConstantOfShape, Expand, Tile or Range of initializers and
    ``Constant`` values before shape inference, whose data propagation would materialize
    it."""
    from onnx import numpy_helper

    known = dict(consts)
    for node in g.node:
        if node.op_type == "Constant":
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None:
                known[node.output[0]] = numpy_helper.to_array(value)
        elif node.input and all(x in known for x in node.input if x):
            _foldable(node, [known.get(x) for x in node.input], {})


def _made_shape(node, values: list) -> tuple[list, int] | None:
    """(output shape, bytes per element) of ConstantOfShape, Expand, Tile or Range on
    constant inputs."""
    from onnx import numpy_helper

    if node.op_type not in ("ConstantOfShape", "Expand", "Tile", "Range"):
        return None
    try:
        if node.op_type == "Range":
            return [_range_length(*(np.asarray(v).reshape(-1)[0] for v in values[:3]))], \
                np.asarray(values[0]).itemsize
        if node.op_type == "ConstantOfShape":
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            item = 4 if value is None else numpy_helper.to_array(value).itemsize
            return [int(d) for d in np.asarray(values[0]).reshape(-1)], item
        x = np.asarray(values[0])
        if node.op_type == "Expand":
            return list(np.broadcast_shapes(x.shape, tuple(
                int(d) for d in np.asarray(values[1]).reshape(-1)))), x.itemsize
        return [int(a) * int(b) for a, b in zip(x.shape, np.asarray(values[1]).reshape(-1))
                ], x.itemsize  # Tile
    except (ValueError, IndexError, TypeError):  # the evaluator names the problem
        return None


def _range_length(start, limit, delta) -> int:
    """The number of values ``Range(start, limit, delta)`` makes, without making them: a
    non-finite bound or step counts as more than any budget (refused, not materialized)."""
    import math

    if not all(math.isfinite(float(v)) for v in (start, limit, delta)) or delta == 0:
        return 1 << 62
    if all(isinstance(v, (int, np.integer)) for v in (start, limit, delta)):
        return max(-(-(int(limit) - int(start)) // int(delta)), 0)
    return max(math.ceil((float(limit) - float(start)) / float(delta)), 0)


def _initializer(t) -> np.ndarray:
    """An initializer's values; ``ModelError`` when their count does not fill its dims."""
    from onnx import helper, numpy_helper

    if t.data_location == 1:  # EXTERNAL, not read: never from the current directory
        where = next((e.value for e in t.external_data if e.key == "location"), "?")
        raise ModelError(f"initializer {t.name!r}: its values are in the external file "
                         f"{where!r}, which was not read; pass the model's path (its external "
                         f"data is read from the model's folder) or a model loaded with "
                         f"onnx.load")
    try:
        return numpy_helper.to_array(t)
    except ValueError:
        if t.HasField("raw_data"):
            held = len(t.raw_data) // helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        else:
            held = len(getattr(t, helper.tensor_dtype_to_field(t.data_type)))
        raise ModelError(f"initializer {t.name!r}: dims {list(t.dims)} need "
                         f"{int(np.prod(t.dims, dtype=np.int64))} values, it holds {held}"
                         ) from None


def _for_inference(name: str, value: np.ndarray):
    """The initializer shape inference is given for the constant ``value``: a large float
    tensor as its type and dims only (``SHAPE_ONLY_ELEMENTS``), any other one whole."""
    from onnx import TensorProto, numpy_helper

    et = SHAPE_ONLY_TYPES.get(value.dtype, 0)
    if _shape_only(et, value.shape):
        return TensorProto(name=name, data_type=et, dims=value.shape)
    return numpy_helper.from_array(value, name)


def _shape_only(et: int, dims) -> bool:
    """Whether shape inference is given a tensor of ONNX element type ``et`` and these dims
    without its values (``SHAPE_ONLY_ELEMENTS``)."""
    return et in SHAPE_ONLY_TYPES.values() and \
        int(np.prod(dims, dtype=np.int64)) > SHAPE_ONLY_ELEMENTS


def _static(infos: dict, t: str) -> tuple | None:
    """(element type, dims) of ``t`` when its dims are all known numbers."""
    et, dims = infos.get(t, (0, None))
    return (et, dims) if dims is not None and all(isinstance(d, int) for d in dims) else None


def _of_known_shape(node, consts: dict, infos: dict) -> bool:
    """Whether ``node`` computes a constant from what ``infos`` knows of a tensor that is not
    one: a ``Shape`` or ``Size`` of a tensor of static shape, a ``CastLike`` of a constant to
    a tensor's known type."""
    ins = [x for x in node.input if x]
    if node.op_type in ("Shape", "Size"):
        return bool(ins) and ins[0] not in consts and _static(infos, ins[0]) is not None
    if node.op_type == "CastLike":
        return len(ins) == 2 and ins[0] in consts and infos.get(ins[1], (0, None))[0] > 0
    return False


# Operators whose outputs differ at every run: never folded into constants, never run.
RANDOM_OPS = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
              "Multinomial", "Bernoulli"}


def _fold(nodes, consts: dict, qconsts: dict, infos: dict, opsets) -> list:
    """The nodes left after evaluating every node whose inputs are constants (its outputs
    join ``consts``; a DequantizeLinear of integers also ``qconsts``) or whose output only
    depends on what ``infos`` knows (``_of_known_shape``)."""
    from onnx import helper

    versions = {o.domain or "": o.version for o in opsets}
    opset = versions.get("", versions.get("ai.onnx", 0))
    kept = []
    work = list(nodes)
    taken = names_in(work) | set(consts) | set(infos)
    k = 0
    while k < len(work):
        node = work[k]
        k += 1
        if any(a.type in (5, 10) for a in node.attribute):  # graphs: If, Loop, Scan
            check_unroll(node, consts, len(work), len(nodes))  # the budget, before writing
            work[k:k] = unroll(node, consts, infos, opset, taken)  # decided now, or refused
            continue
        if node.op_type in RANDOM_OPS and node.domain in ("", "ai.onnx"):
            raise ModelError(f"{where(node)}: draws new "
                             f"random numbers at every run; npukit's programs are "
                             f"deterministic (feed the numbers as an input)")
        ins = [x for x in node.input if x]
        if _of_known_shape(node, consts, infos):
            if node.op_type == "CastLike":
                like = helper.tensor_dtype_to_np_dtype(infos[ins[1]][0])
                consts[node.output[0]] = cast(consts[ins[0]], like)
                continue
            dims = _static(infos, ins[0])[1]
            if node.op_type == "Size":
                consts[node.output[0]] = np.array(int(np.prod(dims)), np.int64)
                continue
            a = _attrs(node)
            lo, hi = a.get("start", 0), a.get("end", len(dims))
            consts[node.output[0]] = np.array(dims, np.int64)[lo:hi]
            continue
        if all(x in consts for x in ins):
            values = [consts[x] if x else None for x in node.input]
            _foldable(node, values, infos)
            outs = evaluate(node, values, opsets)
            for name, v in zip(node.output, outs):
                consts[name] = v
            if node.op_type == "DequantizeLinear":
                q = _qconst(node, values)
                if q is not None:
                    qconsts[node.output[0]] = q
            continue
        kept.append(node)
    return kept


def _single_writers(g) -> None:
    """Refuse a tensor two nodes write (ONNX graphs are in SSA form: each name is written
    once), or a node writes over a graph input or initializer, in ``g`` and its subgraphs."""
    writer = {vi.name: "the graph's input" for vi in g.input}
    writer.update({t.name: "an initializer" for t in g.initializer})
    for node in g.node:
        for t in node.output:
            if t and t in writer:
                raise ModelError(f"tensor {t!r} is written by {writer[t]} and by "
                                 f"{where(node)}; ONNX writes each tensor once")
            writer[t] = where(node)
        for a in node.attribute:
            for sub in ([a.g] if a.type == 5 else list(a.graphs) if a.type == 10 else []):
                _single_writers(sub)


def read(model, input_shapes: dict | None = None, constants: dict | None = None,
         native: frozenset[str] | None = None) -> Net:
    """The ``Net`` of an ONNX model (a path or a ``ModelProto``); ``input_shapes`` overrides
    input dimensions (symbolic ones become 1 otherwise); ``constants`` gives graph inputs
    fixed values (folded like initializers); operators not in ``native`` are expanded into
    their ONNX function bodies where they have one (``npukit.onnx.functions``; None: none
    are)."""
    from onnx import TensorProto, helper
    from onnx.defs import onnx_opset_version

    model = _load(model)
    _single_writers(model.graph)
    _bind_constants(model, constants or {})
    if native is not None:
        model = expand_functions(model, native)
    opsets = list(model.opset_import)
    versions = {o.domain or "": o.version for o in opsets}
    opset = versions.get("", versions.get("ai.onnx", 0))
    newest = onnx_opset_version()
    if opset > newest:
        raise ModelError(f"the model imports opset {opset} of the ONNX operators; the newest "
                         f"this onnx package defines is {newest}")
    g = model.graph
    seen = set()
    for vi in g.output:
        if vi.name in seen:
            raise ModelError(f"output {vi.name!r} is listed twice among the graph's outputs")
        seen.add(vi.name)
    consts = {t.name: _initializer(t) for t in g.initializer}
    inputs = [vi for vi in g.input if vi.name not in consts]
    _fix_inputs(model, inputs, input_shapes)
    consts.update(resolve_sequences(model))
    _large_constants(g, consts)
    # ``model`` is read's own copy and its initializers' values are in ``consts``: the
    # weights, whose values shape inference does not read, are left as type and dims.
    for t in g.initializer:
        if _shape_only(t.data_type, t.dims):
            t.CopyFrom(TensorProto(name=t.name, data_type=t.data_type, dims=t.dims))
    infos = _infos(_infer(model))
    qconsts: dict[str, QConst] = {}
    # Fold, infer the shapes again with the folded values as initializers, and fold what
    # those shapes make known (a Shape of a tensor whose shape a folded value decides),
    # until nothing more folds.
    nodes = list(g.node)
    while True:
        kept = _fold(nodes, consts, qconsts, infos, opsets)
        rebuilt = helper.make_graph(
            kept, g.name or "model", [vi for vi in g.input if vi.name not in consts],
            list(g.output),
            [_for_inference(n, np.asarray(v)) for n, v in consts.items()])
        m2 = helper.make_model(rebuilt, opset_imports=opsets)
        # IR version 4 lets initializers be other than graph inputs (before it, shape
        # inference reads no initializer that is not also an input, and the folded values
        # are not).
        m2.ir_version = max(model.ir_version, 4)
        infos = _infos(_infer(m2))
        if len(kept) == len(nodes) or not any(_of_known_shape(n, consts, infos) for n in kept):
            break
        nodes = kept
    producer = {t: node for node in g.node for t in node.output}
    for node in kept:
        operands_known(node, consts, producer, {vi.name for vi in inputs})
    info: dict[str, TInfo] = {}
    for name, (et, dims) in infos.items():
        if name in consts:
            continue
        if dims is None or not all(isinstance(d, int) for d in dims):
            continue
        if et not in DTYPES:
            continue
        info[name] = TInfo(tuple(int(d) for d in dims), np_dtype(DTYPES[et]))
    # An optional output nothing reads (Dropout's mask before opset 10, which ONNX shape
    # inference leaves without a shape) needs neither a shape nor a type npukit computes on.
    read_or_out = {t for node in kept for t in node.input} | {vi.name for vi in g.output}
    nodes = []
    for k, node in enumerate(kept):
        name = node.name or f"{node.op_type}_{k}"
        n = Node(node.op_type, name, list(node.input), list(node.output), _attrs(node),
                 node.domain or "")
        for t in n.outputs:
            if not t or (t not in read_or_out and t != n.outputs[0]):
                continue
            et, dims = infos.get(t, (0, None))
            if et and et not in DTYPES:
                raise ModelError(f"{n.where()}: output {t!r} has element type "
                                 f"{ONNX_TYPE_NAMES.get(et, et)}; npukit computes on "
                                 f"{COMPUTED}")
            if t not in info:
                raise ModelError(f"{n.where()}: the shape of output {t!r} is unknown after "
                                 f"shape inference ({dims})")
            if 0 in info[t].shape:
                raise ModelError(f"{n.where()}: output {t!r} has shape {list(info[t].shape)}, "
                                 f"an empty tensor; npukit computes on non-empty ones")
        nodes.append(n)
    for vi in g.output:
        if vi.name not in info and vi.name not in consts:
            raise ModelError(f"output {vi.name!r}: its shape is unknown after shape inference")
        if vi.name in consts and consts[vi.name].size == 0:
            raise ModelError(f"output {vi.name!r}: a constant of shape "
                             f"{list(consts[vi.name].shape)}, an empty tensor; npukit computes "
                             f"on non-empty ones")
    for vi in inputs:
        et = vi.type.tensor_type.elem_type
        if et not in DTYPES:
            raise ModelError(f"input {vi.name!r} has element type {ONNX_TYPE_NAMES.get(et, et)}; "
                             f"npukit takes {COMPUTED} inputs")
    return Net(g.name or "model", opset, [vi.name for vi in inputs], [vi.name for vi in g.output],
               info, consts, qconsts, nodes)
