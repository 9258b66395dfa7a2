"""ONNX sequences resolved when the model is read: a sequence whose length and positions
are known at build time is a list of tensors, so every sequence operator becomes the
tensor operators it selects (``SequenceAt`` an ``Identity`` of one element,
``ConcatFromSequence`` a ``Concat``, ``SplitToSequence`` a ``Split``, ``SequenceLength`` a
constant) and no sequence is left for the planner. Positions given as graph inputs are
shape operands (``npukit.onnx.operands``): pass them to ``load(..., constants=...)``."""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from .control import names_in
from .operands import where

SEQUENCE_OPS = {"SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase",
                "SequenceAt", "SequenceLength", "ConcatFromSequence", "SplitToSequence"}



def _position(node, k: int, consts: dict, length: int, insert: bool) -> int | None:
    """The position operand ``k`` of ``node`` as an index into a sequence of ``length``
    (``None`` when absent: the end); ONNX allows ``-length..length-1`` (``length`` too when
    inserting)."""
    if k >= len(node.input) or not node.input[k]:
        return None
    t = node.input[k]
    if t not in consts:
        raise ModelError(f"{where(node)}: its position {t!r} must be a constant to choose the "
                         f"tensor at build time; give it to npukit.onnx.load(..., "
                         f"constants=...) if it is a graph input")
    value = np.asarray(consts[t])
    if value.size != 1:
        raise ModelError(f"{where(node)}: its position {t!r} holds {value.size} values "
                         f"{list(value.shape)}; give one integer")
    p = int(value.reshape(-1)[0])
    hi = length if insert else length - 1
    if not -length <= p <= hi:
        raise ModelError(f"{where(node)}: position {p} is outside -{length}..{hi} for a "
                         f"sequence of {length} tensors")
    return p + length if p < 0 else p


def resolve(model) -> dict[str, np.ndarray]:
    """Rewrite ``model``'s sequence operators in place into tensor operators; positions and
    split sizes must be initializers or ``Constant`` nodes. Returns the initializers added
    (axes and split sizes) by name."""
    from onnx import helper, numpy_helper, shape_inference

    g = model.graph
    if not any(n.op_type in SEQUENCE_OPS and n.domain in ("", "ai.onnx") for n in g.node):
        return {}
    for vi in g.input:
        if vi.type.HasField("sequence_type"):
            raise ModelError(f"input {vi.name!r} is a sequence of tensors; npukit's inputs are "
                             f"tensors")
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    consts.update({n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in g.node
                   if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value"})
    versions = {o.domain or "": o.version for o in model.opset_import}
    # Before opset 13, Split, Squeeze and Unsqueeze take their sizes and axes as attributes.
    as_inputs = versions.get("", versions.get("ai.onnx", 0)) >= 13
    shapes = {}
    try:  # SplitToSequence needs its input's rank and size along the axis
        inferred = shape_inference.infer_shapes(model).graph
        for vi in [*inferred.input, *inferred.value_info, *inferred.output]:
            t = vi.type.tensor_type
            if vi.type.HasField("tensor_type") and t.HasField("shape"):
                shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else None
                                   for d in t.shape.dim]
    except Exception:  # noqa: BLE001 - the model's own error is reported when it is read
        pass
    seqs: dict[str, list[str]] = {}
    nodes, inits = [], []
    taken = names_in(g.node) | set(consts) | {vi.name for vi in g.input}

    def fresh(name: str) -> str:
        """``name``, or ``name_1``, ``name_2``...: the first no tensor of the model has."""
        out, k = name, 0
        while out in taken:
            k += 1
            out = f"{name}_{k}"
        taken.add(out)
        return out

    def const(name: str, value) -> str:
        name = fresh(name)
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def axes_node(op: str, x: str, y: str, axis: int):
        """``op`` (Squeeze or Unsqueeze) of ``x`` at ``axis`` into ``y``."""
        if as_inputs:
            return helper.make_node(op, [x, const(f"{y}__axes", np.array([axis], np.int64))],
                                    [y])
        return helper.make_node(op, [x], [y], axes=[axis])

    for node in g.node:
        op = node.op_type if node.domain in ("", "ai.onnx") else ""
        if op not in SEQUENCE_OPS:
            if any(t in seqs for t in node.input):
                raise ModelError(f"{where(node)}: reads a sequence; npukit resolves sequences "
                                 f"only through the sequence operators")
            nodes.append(node)
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        out = node.output[0]
        if op == "SequenceEmpty":
            seqs[out] = []
        elif op == "SequenceConstruct":
            seqs[out] = list(node.input)
        elif op in ("SequenceInsert", "SequenceErase", "SequenceAt", "SequenceLength",
                    "ConcatFromSequence"):
            items = list(seqs[node.input[0]])
            if op == "SequenceInsert":
                p = _position(node, 2, consts, len(items), insert=True)
                items.insert(len(items) if p is None else p, node.input[1])
                seqs[out] = items
            elif op == "SequenceErase":
                if not items:
                    raise ModelError(f"{where(node)}: erases from an empty sequence")
                del items[-1 if (p := _position(node, 1, consts, len(items), False)) is None
                           else p]
                seqs[out] = items
            elif op == "SequenceAt":
                if not items:
                    raise ModelError(f"{where(node)}: reads from an empty sequence")
                p = _position(node, 1, consts, len(items), insert=False)
                nodes.append(helper.make_node("Identity", [items[p]], [out], name=node.name))
            elif op == "SequenceLength":
                nodes.append(helper.make_node("Constant", [], [out], name=node.name,
                                              value=numpy_helper.from_array(
                                                  np.array(len(items), np.int64))))
            else:
                if not items:
                    raise ModelError(f"{where(node)}: concatenates an empty sequence")
                axis = int(attrs["axis"])
                if attrs.get("new_axis", 0):
                    parts = [fresh(f"{out}__{k}") for k in range(len(items))]
                    nodes += [axes_node("Unsqueeze", t, u, axis)
                              for t, u in zip(items, parts)]
                    items = parts
                nodes.append(helper.make_node("Concat", items, [out], name=node.name,
                                              axis=axis))
        else:  # SplitToSequence
            x = node.input[0]
            dims = shapes.get(x)
            axis = int(attrs.get("axis", 0))
            if dims is None or not -len(dims) <= axis < len(dims) or \
                    dims[axis % len(dims)] is None:
                raise ModelError(f"{where(node)}: the size of {x!r} along axis {axis} is "
                                 f"unknown when the model is read")
            size = dims[axis % len(dims)]
            split = None
            if len(node.input) > 1 and node.input[1]:
                if node.input[1] not in consts:
                    raise ModelError(f"{where(node)}: its split {node.input[1]!r} must be a "
                                     f"constant; give it to npukit.onnx.load(..., "
                                     f"constants=...) if it is a graph input")
                split = np.asarray(consts[node.input[1]]).astype(np.int64)
            if split is None:
                sizes = [1] * size
            elif split.ndim == 0 and int(split) <= 0:
                raise ModelError(f"{where(node)}: split {int(split)}: a scalar split is the "
                                 f"size of each piece, at least 1")
            elif split.ndim == 0:
                sizes = [int(split)] * (size // int(split)) + \
                    ([size % int(split)] if size % int(split) else [])
            else:
                sizes = [int(s) for s in split]
            if sum(sizes) != size or min(sizes, default=0) < 0:
                raise ModelError(f"{where(node)}: split sizes {sizes} do not cut the "
                                 f"{size} elements of {x!r} along axis {axis}")
            parts = [fresh(f"{out}__{k}") for k in range(len(sizes))]
            keep = split is not None or attrs.get("keepdims", 1)
            cut = parts if keep else [fresh(f"{p}__kept") for p in parts]
            if as_inputs:
                nodes.append(helper.make_node(
                    "Split", [x, const(f"{out}__split", np.array(sizes, np.int64))], cut,
                    name=node.name, axis=axis))
            else:
                nodes.append(helper.make_node("Split", [x], cut, name=node.name, axis=axis,
                                              split=sizes))
            if not keep:
                nodes += [axes_node("Squeeze", c, p, axis) for c, p in zip(cut, parts)]
            seqs[out] = parts
    for vi in g.output:
        if vi.name in seqs:
            raise ModelError(f"output {vi.name!r} is a sequence of tensors; npukit's outputs "
                             f"are tensors (take them out with SequenceAt or "
                             f"ConcatFromSequence)")
    del g.node[:]
    g.node.extend(nodes)
    g.initializer.extend(inits)
    del g.value_info[:]  # the sequence types recorded for the rewritten tensors
    return {t.name: numpy_helper.to_array(t) for t in inits}
