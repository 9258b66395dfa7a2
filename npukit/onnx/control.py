"""ONNX control flow decided when the model is read: an ``If`` whose condition is a constant
is the nodes of the branch it takes, a ``Loop`` whose trip count and condition are constants
and a ``Scan`` over a sequence of known length are their bodies written out once per
iteration (``MAX_ITERATIONS`` at most), so the planner sees straight-line operators. The
names a body defines get a prefix per iteration; names it reads from the enclosing graph
are kept."""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from .operands import where

MAX_ITERATIONS = 256  # a longer loop would make a program of that many copies of its body



def _attr(node, name: str, default=None):
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def names_in(nodes) -> set[str]:
    """Every name ``nodes`` use: their names, the tensors they read and write, and those of
    their subgraphs (nested to any depth)."""
    out: set[str] = set()
    for n in nodes:
        out.update((n.name, *n.input, *n.output))
        for a in n.attribute:
            for g in ([a.g] if a.type == 5 else list(a.graphs) if a.type == 10 else []):
                out.update(vi.name for vi in [*g.input, *g.output, *g.value_info])
                out.update(t.name for t in g.initializer)
                out |= names_in(g.node)
    out.discard("")
    return out


def _fresh_base(raw: str, taken: set[str]) -> str:
    """``raw``, or ``raw_1``, ``raw_2``...: the first that begins no name in ``taken``
    followed by ``__`` (every name a writer makes begins so)."""
    base, k = raw, 0
    while any(t.startswith(base + "__") for t in taken):
        k += 1
        base = f"{raw}_{k}"
    return base


class _Writer:
    """Copies of a body's nodes under fresh names, and the constants they need: every name
    begins with ``base__``, a prefix no name of the model (``taken``) begins with."""

    def __init__(self, node, consts: dict, taken: set[str], base: str | None = None):
        self.node, self.consts = node, consts
        raw = (node.name or node.op_type or "cf").replace("/", "_")
        self.base = base or _fresh_base(raw, taken | set(consts))
        self.nodes: list = []

    def const(self, name: str, value) -> str:
        name = f"{self.base}__{name}"
        self.consts[name] = np.asarray(value)
        return name

    def body(self, graph, inputs: dict[str, str], tag: str) -> dict[str, str]:
        """Write ``graph``'s nodes with its inputs bound to ``inputs`` (body name -> outer
        name); returns the outer name of every name the body defines."""
        from onnx import numpy_helper

        names = dict(inputs)
        for t in graph.initializer:
            names[t.name] = self.const(f"{tag}__{t.name}", numpy_helper.to_array(t))
        for n in graph.node:
            for o in n.output:
                if o:
                    names[o] = f"{self.base}__{tag}__{o}"
        for n in graph.node:
            copy = type(n)()
            copy.CopyFrom(n)
            copy.name = f"{self.base}__{tag}__{n.name or n.op_type}"
            _rename(copy, names)
            self.nodes.append(copy)
        return names

    def add(self, op: str, ins: list[str], out: str, **attrs) -> str:
        from onnx import helper

        self.nodes.append(helper.make_node(op, ins, [out], name=f"{out}__node", **attrs))
        return out

    def stack(self, parts: list[str], axis: int, out: str, opset: int) -> None:
        """``parts`` (one tensor per iteration) stacked along a new ``axis`` into ``out``."""
        ups = []
        for k, p in enumerate(parts):
            up = f"{out}__{k}__up"
            if opset >= 13:
                self.add("Unsqueeze", [p, self.const(f"{out}__axes", [axis])], up)
            else:
                self.add("Unsqueeze", [p], up, axes=[axis])
            ups.append(up)
        self.add("Concat", ups, out, axis=axis)


def _rename(node, names: dict[str, str]) -> None:
    """Rename what ``node`` reads and writes by ``names``, inside its own subgraphs too (a
    nested If or Loop, written out later, reads the enclosing body's names), except the
    names a subgraph defines itself."""
    node.input[:] = [names.get(t, t) if t else "" for t in node.input]
    node.output[:] = [names.get(t, t) if t else "" for t in node.output]
    for a in node.attribute:
        for g in ([a.g] if a.type == 5 else list(a.graphs) if a.type == 10 else []):
            own = {vi.name for vi in g.input} | {t.name for t in g.initializer} | \
                {o for n in g.node for o in n.output}
            inner = {k: v for k, v in names.items() if k not in own}
            for n in g.node:
                _rename(n, inner)
            for vi in g.output:
                vi.name = inner.get(vi.name, vi.name)


def _known(node, consts: dict, k: int, what: str):
    """Input ``k`` of ``node`` as a constant (None when the input is left out)."""
    if k >= len(node.input) or not node.input[k]:
        return None
    if node.input[k] not in consts:
        raise ModelError(f"{where(node)}: its {what} {node.input[k]!r} must be a constant to "
                         f"decide the control flow when the model is read; give it to "
                         f"npukit.onnx.load(..., constants=...) if it is a graph input")
    value = np.asarray(consts[node.input[k]])
    if value.size != 1:
        raise ModelError(f"{where(node)}: its {what} {node.input[k]!r} holds {value.size} "
                         f"values {list(value.shape)}; {node.op_type} takes one")
    return value


def _if(node, consts: dict, w: _Writer) -> None:
    cond = _known(node, consts, 0, "condition")
    branch = _attr(node, "then_branch" if bool(cond.reshape(-1)[0]) else "else_branch")
    names = w.body(branch, {}, "then" if bool(cond.reshape(-1)[0]) else "else")
    for out, res in zip(node.output, branch.output):
        if out:
            w.add("Identity", [names.get(res.name, res.name)], out)


def _passthrough(body, names_in: str) -> bool:
    """Whether ``body``'s condition output is its condition input (through Identity nodes)
    or a constant true: a loop that only its trip count ends."""
    made = {o: n for n in body.node for o in n.output}
    t = body.output[0].name
    while t in made and made[t].op_type == "Identity":
        t = made[t].input[0]
    if t in made and made[t].op_type == "Constant" and _attr(made[t], "value") is not None:
        from onnx import numpy_helper

        return bool(np.all(numpy_helper.to_array(_attr(made[t], "value"))))
    return t == names_in


def _loop(node, consts: dict, w: _Writer, opset: int) -> None:
    """A Loop of known trip count written out: at once when only the trip count ends it,
    else one iteration at a time (``_step``), each ending on the body's condition as
    ONNX Runtime does (condition input or not) once that condition has folded."""
    body = _attr(node, "body")
    trip = _known(node, consts, 0, "trip count")
    cond = _known(node, consts, 1, "condition")
    if trip is None:
        raise ModelError(f"{where(node)}: a loop without a trip count ends on a condition "
                         f"computed at run time; npukit writes out loops of known length")
    ends = len(body.input) > 1 and not _passthrough(body, body.input[1].name)
    count = 0 if cond is not None and not bool(cond.reshape(-1)[0]) else int(trip.reshape(-1)[0])
    if count <= 0 or (count > MAX_ITERATIONS and not ends):
        raise ModelError(f"{where(node)}: {count} iterations; npukit writes out loops of 1 to "
                         f"{MAX_ITERATIONS} iterations")
    carried = list(node.input[2:])
    cond_name = node.input[1] if len(node.input) > 1 and node.input[1] else \
        w.const("cond", np.array(True))
    if ends:
        _step(w, body, list(node.output), where(node), 0, count, carried, [], cond_name, opset)
        return
    scans: list[list[str]] = []
    for i in range(count):
        _, carried, scans = _iteration(w, body, i, carried, scans, cond_name)
    _loop_outputs(w, list(node.output), carried, scans, opset)


def _iteration(w: _Writer, body, i: int, carried: list[str], scans: list[list[str]],
               cond_name: str) -> tuple[str, list[str], list[list[str]]]:
    """Iteration ``i`` of a Loop's ``body`` written out: (its condition output, its carried
    values, the scan outputs of the iterations so far, one list per iteration)."""
    bound = {body.input[0].name: w.const(f"i{i}", np.array(i, np.int64))}
    if len(body.input) > 1:
        bound[body.input[1].name] = cond_name
    bound.update({vi.name: t for vi, t in zip(body.input[2:], carried)})
    names = w.body(body, bound, f"it{i}")
    out = [names.get(o.name, o.name) for o in body.output]
    return out[0], out[1:1 + len(carried)], [*scans, out[1 + len(carried):]]


def _loop_outputs(w: _Writer, outputs: list[str], carried: list[str],
                  scans: list[list[str]], opset: int) -> None:
    """A Loop's outputs: its last carried values, its scan outputs stacked."""
    for out, t in zip(outputs[:len(carried)], carried):
        if out:
            w.add("Identity", [t], out)
    for k, out in enumerate(outputs[len(carried):]):
        if out:
            w.stack([it[k] for it in scans], 0, out, opset)


NEXT = ("LoopNext", "npukit.control")  # the rest of a Loop, decided after an iteration


def _step(w: _Writer, body, outputs: list[str], who: str, i: int, count: int,
          carried: list[str], scans: list[list[str]], cond_name: str, opset: int) -> None:
    """Iteration ``i`` written out, then the Loop's outputs when it is the last of
    ``count``, else a ``NEXT`` node that ``_next`` reads once the iteration's condition has
    folded (its inputs: the condition and the carried values)."""
    if i >= MAX_ITERATIONS:
        raise ModelError(f"{who}: its condition is still true after {MAX_ITERATIONS} "
                         f"iterations; npukit writes out loops of 1 to {MAX_ITERATIONS} "
                         f"iterations")
    cond_out, carried, scans = _iteration(w, body, i, carried, scans, cond_name)
    if i + 1 == count:
        _loop_outputs(w, outputs, carried, scans, opset)
        return
    from onnx import AttributeProto, helper

    flat = [t for it in scans for t in it]
    nxt = helper.make_node(NEXT[0], [cond_out, *carried], outputs, name=f"{w.base}__next{i + 1}",
                           domain=NEXT[1], body=body, base=w.base, iteration=i + 1,
                           count=count, who=who)
    nxt.attribute.append(helper.make_attribute("scans", flat,
                                               attr_type=AttributeProto.STRINGS))
    w.nodes.append(nxt)


def _next(node, consts: dict, w: _Writer, opset: int) -> None:
    """The rest of a Loop after an iteration (a ``NEXT`` node of ``_step``): its outputs
    when the iteration's condition is false, else the next iteration."""
    a = {k: _attr(node, k) for k in ("body", "iteration", "count", "who", "scans")}
    who = a["who"].decode()
    if node.input[0] not in consts:
        raise ModelError(f"{who}: the loop's condition is computed by its body from values "
                         f"known only at run time; npukit writes out loops whose iterations "
                         f"are known when the model is read")
    carried = list(node.input[1:])
    body, i = a["body"], a["iteration"]
    per = len(body.output) - 1 - len(carried)
    flat = [t.decode() for t in a["scans"]]
    scans = [flat[k * per:(k + 1) * per] for k in range(i)]
    cond = np.asarray(consts[node.input[0]])
    if cond.size != 1:
        raise ModelError(f"{who}: the condition its body computes holds {cond.size} values "
                         f"{list(cond.shape)} after iteration {i}; Loop takes one boolean")
    if not bool(cond.reshape(-1)[0]):
        _loop_outputs(w, list(node.output), carried, scans, opset)
        return
    _step(w, body, list(node.output), who, i, a["count"], carried, scans, node.input[0], opset)


def _scan(node, consts: dict, w: _Writer, infos: dict, opset: int) -> None:
    if opset < 9:
        raise ModelError(f"{where(node)}: Scan-8 (with sequence_lens and a batch axis) is not "
                         f"supported; Scan-9 and later are")
    body = _attr(node, "body")
    m = int(_attr(node, "num_scan_inputs"))
    n = len(node.input) - m
    in_axes = list(_attr(node, "scan_input_axes", [0] * m))
    in_dirs = list(_attr(node, "scan_input_directions", [0] * m))
    k = len(body.output) - n
    out_axes = list(_attr(node, "scan_output_axes", [0] * k))
    out_dirs = list(_attr(node, "scan_output_directions", [0] * k))
    lengths = set()
    for x, ax in zip(node.input[n:], in_axes):
        dims = (infos.get(x) or (0, None))[1]
        if x in consts:
            dims = list(np.asarray(consts[x]).shape)
        if dims is None or not isinstance(dims[ax % len(dims)], int):
            raise ModelError(f"{where(node)}: the length of the scanned input {x!r} is unknown "
                             f"when the model is read")
        lengths.add(dims[ax % len(dims)])
    if len(lengths) != 1:
        raise ModelError(f"{where(node)}: its scanned inputs have lengths {sorted(lengths)}")
    length = lengths.pop()
    if not 0 < length <= MAX_ITERATIONS:
        raise ModelError(f"{where(node)}: {length} iterations; npukit writes out scans of 1 to "
                         f"{MAX_ITERATIONS} iterations")
    states = list(node.input[:n])
    scans: list[list[str]] = [[] for _ in range(k)]
    for i in range(length):
        bound = {vi.name: t for vi, t in zip(body.input[:n], states)}
        for j, (x, ax, d) in enumerate(zip(node.input[n:], in_axes, in_dirs)):
            at = length - 1 - i if d else i
            bound[body.input[n + j].name] = w.add(
                "Gather", [x, w.const(f"at{at}", np.array(at, np.int64))],
                f"{w.base}__x{j}__{at}", axis=ax)
        names = w.body(body, bound, f"it{i}")
        out = [names.get(o.name, o.name) for o in body.output]
        states = out[:n]
        for s, t in zip(scans, out[n:]):
            s.append(t)
    for out, t in zip(node.output[:n], states):
        if out:
            w.add("Identity", [t], out)
    for out, parts, ax, d in zip(node.output[n:], scans, out_axes, out_dirs):
        if out:  # a negative axis counts from the end of the stacked rank, as Unsqueeze's
            w.stack(parts[::-1] if d else parts, ax, out, opset)


def unroll(node, consts: dict, infos: dict, opset: int, taken: set[str]) -> list:
    """The straight-line nodes that compute ``node`` (an ``If``, ``Loop`` or ``Scan``); the
    constants they need join ``consts``. Their names begin with a prefix no name in
    ``taken`` (every name of the model, nested graphs included) begins with, and join it.
    ``ModelError`` when the control flow depends on values known only at run time."""
    nxt = (node.op_type, node.domain) == NEXT
    w = _Writer(node, consts, taken, _attr(node, "base").decode() if nxt else None)
    if nxt:
        _next(node, consts, w, opset)
    elif node.op_type == "If":
        _if(node, consts, w)
    elif node.op_type == "Loop":
        _loop(node, consts, w, opset)
    elif node.op_type == "Scan":
        _scan(node, consts, w, infos, opset)
    else:
        raise ModelError(f"{where(node)}: control flow (subgraphs) is not supported")
    taken |= names_in(w.nodes) | {t for t in consts if t.startswith(w.base + "__")}
    return w.nodes
