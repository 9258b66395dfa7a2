"""The expansion budget of reading a model: what writing out control flow and function bodies
may make, checked before each step rather than found by running out of time or memory.

- **Nodes**: unrolling ``Loop``/``Scan`` bodies and inlining function bodies may add at most
  ``MAX_EXPANDED_NODES`` nodes to the model's own. A loop is sized before it is written out,
  with the loops nested in its body (their trip counts where they are constants), so
  ``Loop`` in ``Loop`` in ``Loop`` of 256 iterations each is refused at once; local functions
  are sized before they are inlined, calls of calls counted without expanding them.
- **Constant bytes**: a folded constant is at most ``reader.MAX_FOLDED_BYTES``, checked from
  its shape before it is computed; ``Range``, ``ConstantOfShape``, ``Expand`` and ``Tile``
  of constants are checked before ONNX shape inference, whose data propagation would
  otherwise materialize them.

    >>> from onnx import helper as h
    >>> expanded_nodes([h.make_node("Relu", ["x"], ["y"])], {})
    1
"""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from .control import MAX_ITERATIONS

# The most nodes unrolling and inlining may add to a model (docs/onnx.md, Reference).
MAX_EXPANDED_NODES = 1 << 14  # 16384 nodes: about 80 s of reading and planning


def _graphs(node) -> list:
    return [g for a in node.attribute
            for g in ([a.g] if a.type == 5 else list(a.graphs) if a.type == 10 else [])]


def _local_constants(graph, consts: dict) -> dict:
    """``consts`` and the values a subgraph defines itself: initializers and ``Constant``."""
    known = dict(consts)
    known.update({t.name: t for t in graph.initializer})
    for n in graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    known[n.output[0]] = a.t
    return known


def _trip(node, consts: dict) -> int:
    """A ``Loop``'s trip count where it is a constant of 1 to ``MAX_ITERATIONS``, else 1
    (the loop itself refuses another count when it is written out)."""
    from onnx import numpy_helper

    if node.op_type != "Loop" or not node.input or node.input[0] not in consts:
        return 1
    v = consts[node.input[0]]
    v = numpy_helper.to_array(v) if hasattr(v, "dims") else np.asarray(v)
    trip = int(v.reshape(-1)[0]) if v.size == 1 else 1
    return trip if 0 < trip <= MAX_ITERATIONS else 1  # else the loop refuses its count


def expanded_nodes(nodes, consts: dict, limit: int = MAX_EXPANDED_NODES) -> int:
    """The nodes ``nodes`` become once every ``Loop`` among them (nested in bodies too) is
    written out ``trip count`` times; counting stops once past ``limit``."""
    total = 0
    for n in nodes:
        bodies = _graphs(n)
        if not bodies:
            total += 1
        else:
            inner = max(expanded_nodes(g.node, _local_constants(g, consts), limit)
                        for g in bodies)
            total += 1 + _trip(n, consts) * inner
        if total > limit:
            return total
    return total


def check_unroll(node, consts: dict, written: int, base: int) -> None:
    """Refuse writing out control-flow ``node`` when the nodes written so far (``written``,
    of which ``base`` were the model's own) and what it expands to pass the budget."""
    from .operands import where

    room = base + MAX_EXPANDED_NODES - written
    need = expanded_nodes([node], consts, limit=max(room, 0)) - 1
    if need > room:
        raise ModelError(f"{where(node)}: writing it out (nested loops included) would add at "
                         f"least {need} nodes to the {written - base} added already; npukit "
                         f"adds at most {MAX_EXPANDED_NODES} nodes when it unrolls and "
                         f"inlines a model")


def inlined_nodes(model, limit: int = MAX_EXPANDED_NODES) -> int:
    """The nodes of ``model``'s graph once its local functions are inlined (calls of calls
    counted by multiplication, not expansion); ``ModelError`` for a function that calls
    itself."""
    funcs = {(f.domain, f.name): f for f in model.functions}
    memo: dict = {}

    def size(key, stack) -> int:
        if key in memo:
            return memo[key]
        if key in stack:
            raise ModelError(f"local function {key[1]!r} calls itself; ONNX functions do "
                             f"not recurse")
        memo[key] = sum(node_size(n, stack | {key}) for n in funcs[key].node)
        return memo[key]

    def node_size(n, stack) -> int:
        key = (n.domain, n.op_type)
        own = size(key, stack) if key in funcs else 1
        return own + sum(sum(node_size(m, stack) for m in g.node) for g in _graphs(n))

    return sum(node_size(n, frozenset()) for n in model.graph.node)


def check_inlining(model) -> None:
    """Refuse inlining ``model``'s local functions past the node budget."""
    base = len(model.graph.node)
    need = inlined_nodes(model)
    if need - base > MAX_EXPANDED_NODES:
        raise ModelError(f"inlining the model's local functions would make {need} nodes from "
                         f"{base}; npukit adds at most {MAX_EXPANDED_NODES} nodes when it "
                         f"unrolls and inlines a model")


def check_total(model, base: int) -> None:
    """Refuse a model grown past the budget by expanding operators' function bodies."""
    n = len(model.graph.node)
    if n - base > MAX_EXPANDED_NODES:
        raise ModelError(f"expanding the ONNX function bodies made {n} nodes from {base}; "
                         f"npukit adds at most {MAX_EXPANDED_NODES} nodes when it unrolls "
                         f"and inlines a model")
