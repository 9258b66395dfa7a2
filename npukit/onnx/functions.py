"""Operators npukit has no layer for, written out as their ONNX function bodies when the model
is read: the ONNX standard defines many operators (``Attention``, ``RMSNormalization``,
``RotaryEmbedding``, ``GroupNormalization``, ``SoftmaxCrossEntropyLoss``...) as functions of
simpler ones, and ONNX Runtime runs them the same way when it has no kernel of its own. The
onnx package's inliner (``onnx.inliner``) expands them, the model's own local functions
too; what the bodies compute on shapes is folded like any shape computation."""

from __future__ import annotations

from ..errors import ModelError
from .budget import check_inlining, check_total
from .operands import where

# Operators with a function body that is never expanded: Range's body is a Loop (it is
# folded when its inputs are constants), SequenceMap's a subgraph, Bernoulli draws random
# numbers (refused by name), CastLike is folded or a name for the same bytes.
KEEP = frozenset({"Range", "SequenceMap", "Bernoulli", "CastLike"})
ONNX_DOMAINS = ("", "ai.onnx")


def _schema(op: str, version: int):
    """The operator's schema at the model's opset, None when there is none."""
    from onnx import defs

    try:
        return defs.get_schema(op, version, "")
    except Exception:  # noqa: BLE001 - an operator unknown at this opset: refused later
        return None


def _has_body(op: str, version: int) -> bool:
    schema = _schema(op, version)
    return schema is not None and (schema.has_function or schema.has_context_dependent_function)


def _check_axis(node, rank: int | None) -> None:
    """Refuse an ``axis`` outside the first input's rank: a body would compute something
    (over no axis) where ONNX Runtime refuses the node."""
    for a in node.attribute:
        if a.name == "axis" and rank is not None and not -rank <= a.i < rank:
            raise ModelError(f"{where(node)}: axis={a.i} "
                             f"for a rank-{rank} input")


def _with_defaults(model, ops: list[str], version: int) -> None:
    """Write out the default of every attribute the nodes of ``ops`` leave unset (a body
    that refers to an attribute, ``MeanVarianceNormalization``'s axes, gets no value from
    the inliner otherwise, and silently computes something else), and drop the empty names
    of optional inputs left out at the end (the inliner asks for their type)."""
    g = model.graph
    ranks = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in [*g.input, *g.value_info]
             if vi.type.tensor_type.HasField("shape")}
    for node in g.node:
        if node.op_type not in ops or node.domain not in ONNX_DOMAINS:
            continue
        _check_axis(node, ranks.get(node.input[0]) if node.input else None)
        while node.input and not node.input[-1]:  # optional inputs left out at the end
            node.input.pop()
        given = {a.name for a in node.attribute}
        for name, attr in _schema(node.op_type, version).attributes.items():
            if name not in given and attr.default_value.name:
                node.attribute.append(attr.default_value)


def _inferred(model):
    """``model`` with the type of every tensor recorded (the inliner reads a body's input
    types there): ONNX shape inference's, and the initializers' own."""
    from onnx import helper, shape_inference

    try:
        model = shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - reported when the model is read
        pass
    g = model.graph
    typed = {vi.name for vi in [*g.input, *g.value_info, *g.output]}
    g.value_info.extend(helper.make_tensor_value_info(t.name, t.data_type, t.dims)
                        for t in g.initializer if t.name not in typed)
    return model


def _without_shadows(model, version: int):
    """``model`` without its local functions named like an ONNX operator of its opset in
    the ONNX domain: ONNX Runtime runs the operator there, never the function (a copy;
    ``model`` itself when there is none)."""
    shadows = [f for f in model.functions
               if f.domain in ONNX_DOMAINS and _schema(f.name, version) is not None]
    if not shadows:
        return model
    out = type(model)()
    out.CopyFrom(model)
    del out.functions[:]
    out.functions.extend(f for f in model.functions if f not in shadows)
    return out


def expand(model, native: frozenset[str]):
    """``model`` with its local functions inlined and every ONNX operator that is not in
    ``native`` (npukit's layers) and has a function body expanded, repeatedly (a body may
    call other such operators). Returns the model (a new one when anything was expanded)."""
    from onnx import inliner

    versions = {o.domain or "": o.version for o in model.opset_import}
    version = versions.get("", versions.get("ai.onnx", 0))
    base = len(model.graph.node)
    try:
        if model.functions:
            model = _without_shadows(model, version)
            check_inlining(model)  # the node budget, before anything is inlined
            model = inliner.inline_local_functions(model)
        for _ in range(8):  # bodies nest a few levels at most
            ops = {n.op_type for n in model.graph.node if n.domain in ONNX_DOMAINS}
            todo = sorted(op for op in ops - native - KEEP if _has_body(op, version))
            if not todo:
                break
            # A body that depends on its inputs' types (Attention's) reads them from the
            # model: inferred first.
            model = _inferred(model)
            _with_defaults(model, todo, version)
            model = inliner.inline_selected_functions(
                model, [("", op) for op in todo], exclude=False, inline_schema_functions=True)
            check_total(model, base)
    except ModelError:
        raise
    except Exception as exc:  # noqa: BLE001 - the inliner's own message, on one line
        raise ModelError(f"expanding the ONNX function bodies of the model failed: "
                         f"{str(exc).splitlines()[0]}") from None
    return model
