"""The operands npukit needs as constants to plan a node: those that only select a shape
(``SHAPE_OPERANDS``: a Reshape's shape, axes, pads, starts and ends, scales, sizes, repeats)
and those it compiles in (``VALUE_OPERANDS``: weights, quantization parameters, a Pad's fill
value). A graph input in such a place is given to ``npukit.onnx.load`` as a
constant (``constants=``); ``shape_operands`` lists the graph inputs that only select
shapes, ``constant_operands`` every graph input npukit needs as a constant."""

from __future__ import annotations

from ..errors import ModelError

# Operands that only select a shape (an axis, a size, a padding, a count). Operator ->
# {input index: operand name}.
_REDUCE = {1: "axes"}
SHAPE_OPERANDS = {
    "Reshape": {1: "shape"}, "Expand": {1: "shape"}, "ConstantOfShape": {0: "input"},
    "Unsqueeze": {1: "axes"}, "Squeeze": {1: "axes"}, "Pad": {1: "pads", 3: "axes"},
    "Slice": {1: "starts", 2: "ends", 3: "axes", 4: "steps"}, "Tile": {1: "repeats"},
    "Split": {1: "split"}, "Resize": {1: "roi", 2: "scales", 3: "sizes"},
    "Upsample": {1: "scales"}, "TopK": {1: "K"}, "OneHot": {1: "depth"},
    "Range": {0: "start", 1: "limit", 2: "delta"}, "CumSum": {1: "axis"}, "Trilu": {1: "k"},
    "CenterCropPad": {1: "shape"},
    # A position in a sequence chooses which tensor, so which shape (npukit.onnx.sequences).
    "SequenceAt": {1: "position"}, "SequenceInsert": {2: "position"},
    "SequenceErase": {1: "position"}, "SplitToSequence": {1: "split"},
    **{op: {0: "size"} for op in ("HannWindow", "HammingWindow", "BlackmanWindow")},
    # Control flow decided when the model is read (npukit.onnx.control).
    "If": {0: "condition"}, "Loop": {0: "trip count", 1: "condition"},
    "AffineGrid": {1: "size"},
    **{op: _REDUCE for op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin",
                              "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
                              "ReduceLogSumExp", "ReduceSumSquare")},
}
# Operands npukit compiles into the program as constants (weights in flash, quantization
# parameters folded into the integer arithmetic, clamp bounds): a deployed model has them
# fixed. Operator -> {input index: operand name}.
_Q = {1: "scale", 2: "zero point"}
VALUE_OPERANDS = {
    "Conv": {1: "weights", 2: "bias"}, "ConvTranspose": {1: "weights", 2: "bias"},
    "CausalConvWithState": {1: "weights", 2: "bias"},
    "BatchNormalization": {1: "scale", 2: "B", 3: "mean",
                                                                4: "var"},
    "QuantizeLinear": _Q, "DequantizeLinear": _Q,
    "QLinearConv": {1: "x scale", 2: "x zero point", 3: "weights", 4: "w scale",
                    5: "w zero point", 6: "y scale", 7: "y zero point", 8: "bias"},
    "QLinearMatMul": {1: "a scale", 2: "a zero point", 4: "b scale", 5: "b zero point",
                      6: "y scale", 7: "y zero point"},
    "Pad": {2: "constant_value"},
}
# Inputs whose values an operator does not read (only their shape or element type).
TYPE_ONLY = {"Shape": 0, "Size": 0, "CastLike": 1}


def where(node) -> str:
    """``node 'name' (Op)``: how a refusal names an ``onnx.NodeProto`` (its operator when it
    has no name)."""
    return f"node {node.name or node.op_type!r} ({node.op_type})"


def _slots(node) -> dict[int, str]:
    """The operands of ``node`` npukit needs as constants: ``SHAPE_OPERANDS`` and
    ``VALUE_OPERANDS``."""
    if node.domain not in ("", "ai.onnx"):
        return {}
    return {**SHAPE_OPERANDS.get(node.op_type, {}), **VALUE_OPERANDS.get(node.op_type, {})}


def constant_operands(g) -> list[str]:
    """The graph inputs of ``g`` (an ``onnx.GraphProto``) npukit needs as constants to compile
    it: those that select a shape somewhere (also when read as data elsewhere: a window
    operator's size is both its length and a term of its values), and those read directly
    as a ``VALUE_OPERANDS`` operand (a Conv's weights, a quantization scale)."""
    valued = {t for node in g.node for k, t in enumerate(node.input)
              if node.domain in ("", "ai.onnx") and k in VALUE_OPERANDS.get(node.op_type, {})}
    return [t for t, r in _roles(g).items() if t in valued or "shape" in r]


def _roles(g) -> dict[str, set[str]]:
    """What the values of each graph input become (a subset of {"shape", "data"}): "shape"
    when some use, directly or through the nodes that compute on it, ends in an operand of
    ``SHAPE_OPERANDS``, "data" when some use ends anywhere else but in an operand whose
    values are not read (``TYPE_ONLY``: a ``Shape``, ``Size``, ``CastLike``'s target)."""
    # Nodes are in topological order, so walking them backwards sees every reader of a
    # node's outputs before the node.
    roles: dict[str, set[str]] = {o.name: {"data"} for o in g.output}
    for node in reversed(g.node):
        made = set().union(*(roles.get(o, set()) for o in node.output if o))
        if any(a.type in (5, 10) for a in node.attribute):  # subgraphs may read anything
            made.add("data")
        onnx_op = node.domain in ("", "ai.onnx")
        shape = SHAPE_OPERANDS.get(node.op_type, {}) if onnx_op else {}
        for k, t in enumerate(node.input):
            if not t:
                continue
            if k in shape:
                role = {"shape"}
            elif onnx_op and TYPE_ONLY.get(node.op_type) == k:
                role = set()  # its values are not read
            else:
                role = made
            roles.setdefault(t, set()).update(role)
    inits = {t.name for t in g.initializer}
    inputs = [vi.name for vi in g.input  # a sequence or optional input is no constant
              if vi.name not in inits and vi.type.HasField("tensor_type")]
    return {t: roles.get(t, set()) for t in inputs}


def shape_operands(g) -> list[str]:
    """The graph inputs of ``g`` (an ``onnx.GraphProto``) whose values only select shapes:
    every use of them ends in an operand of ``SHAPE_OPERANDS`` or in one whose values are
    not read, at least one in the former (``_roles``)."""
    return [t for t, r in _roles(g).items() if r == {"shape"}]


def _from_inputs(t: str, producer: dict, inputs: set[str]) -> list[str]:
    """The graph inputs whose values tensor ``t`` is computed from (not through an input
    whose values are not read, ``TYPE_ONLY``)."""
    seen, todo, found = set(), [t], []
    while todo:
        u = todo.pop()
        if u in seen or not u:
            continue
        seen.add(u)
        if u in inputs:
            found.append(u)
        node = producer.get(u)
        if node is not None:
            todo.extend(x for k, x in enumerate(node.input) if TYPE_ONLY.get(node.op_type) != k)
    return sorted(found)


def operands_known(node, consts: dict, producer: dict, inputs: set[str]) -> None:
    """Refuse a node left after folding whose shape-selecting operand (or a Pad's fill value)
    is not a constant, saying which graph inputs it comes from."""
    for k, what in _slots(node).items():
        if k >= len(node.input) or not node.input[k] or node.input[k] in consts:
            continue
        t = node.input[k]
        srcs = _from_inputs(t, producer, inputs)
        how = f"the graph input {t!r}" if srcs == [t] else \
            f"computed from the graph inputs {srcs}" if srcs else "computed at run time"
        give = f": give {', '.join(repr(s) for s in srcs)} to npukit.onnx.load(..., " \
            f"constants=...) if fixed" if srcs else ""
        raise ModelError(f"{where(node)}: its {what} "
                         f"{t!r} must be a constant to plan the node; it is {how}{give}")
