"""``Einsum`` of one or two float32 operands rewritten as the operations npukit lowers, before
the other rewrites of ``npukit.onnx.normalize``. Letters only one operand has and the output
lacks are summed first (``ReduceSum``); then each operand is transposed to [batch, own,
contracted] (the right one to [batch, contracted, own]) and reshaped to matrices, one
``MatMul`` (batched when batch letters exist) contracts them, and the product is reshaped to
[batch, left, right] and transposed to the output's order. One operand: sums and a
transpose. The products sum in MatMul's order (ONNX Runtime's Einsum also reduces to
matrix products, in its own order: results differ in the last bits). Refused: ellipses
(``...``), a letter repeated in one operand (diagonals), more than two operands."""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from .composites import _Rewrite
from .reader import Net, Node


def _terms(n: Node, ranks: list[int]) -> tuple[list[str], str]:
    eq = str(n.attrs.get("equation", "")).replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if "." in eq or len(terms) != len(ranks) or len(terms) > 2:
        raise ModelError(f"{n.where()}: equation {eq!r}; npukit takes one or two operands "
                         f"without ellipses")
    for t, r in zip(terms, ranks):
        if len(t) != r or len(set(t)) != len(t) or not t.isalpha():
            raise ModelError(f"{n.where()}: term {t!r} of {eq!r} for a rank-{r} operand "
                             f"(one letter per axis, none repeated)")
    if not arrow:  # implicit output: the letters seen once, in alphabetical order
        rhs = "".join(sorted(c for c in set(lhs) if c.isalpha() and lhs.count(c) == 1))
    if set(rhs) - set(lhs) or len(set(rhs)) != len(rhs):
        raise ModelError(f"{n.where()}: output {rhs!r} of {eq!r}")
    return terms, rhs


def _shape(dims: dict[str, int], letters) -> tuple[int, ...]:
    return tuple(dims[c] for c in letters)


def _arrange(r: _Rewrite, t: str, term: str, order: str, dims: dict[str, int]) -> str:
    """Operand ``t`` (letters ``term``) transposed to ``order``."""
    if term == order:
        return t
    return r.op("Transpose", [t], _shape(dims, order), perm=[term.index(c) for c in order])


def _reshape(r: _Rewrite, t: str, shape: tuple[int, ...], now: tuple[int, ...]) -> str:
    if shape == now:
        return t
    return r.op("Reshape", [t, r.const(f"shape{len(r.nodes)}", np.array(shape, np.int64))],
                shape)


def einsum(net: Net, n: Node) -> list[Node]:
    ins = n.inputs
    for t in ins:
        if t not in net.info or net.info[t].dtype != np.float32:
            if not (t in net.consts and net.consts[t].dtype == np.float32):
                raise ModelError(f"{n.where()}: Einsum takes float32 operands; {t!r} is not")
    shapes = [net.consts[t].shape if t in net.consts else net.info[t].shape for t in ins]
    terms, rhs = _terms(n, [len(s) for s in shapes])
    dims: dict[str, int] = {}
    for term, s in zip(terms, shapes):
        for c, d in zip(term, s):
            if dims.setdefault(c, d) != d:
                raise ModelError(f"{n.where()}: letter {c!r} has sizes {dims[c]} and {d}")
    r = _Rewrite(net, n)
    ops = list(ins)
    for k, term in enumerate(terms):  # letters only this operand has and the output lacks
        others = "".join(terms[:k] + terms[k + 1:]) + rhs
        lone = [i for i, c in enumerate(term) if c not in others]
        if lone:
            terms[k] = "".join(c for c in term if c in others)
            ops[k] = r.op("ReduceSum", [ops[k]], _shape(dims, terms[k]), axes=lone,
                          keepdims=0)
    if len(terms) == 1:
        _arrange(r, ops[0], terms[0], rhs, dims)
    else:
        a, b = terms
        batch = "".join(c for c in a if c in b and c in rhs)
        contr = "".join(c for c in a if c in b and c not in rhs)
        left, right = "".join(c for c in a if c not in b), "".join(c for c in b if c not in a)
        size = {k: int(np.prod(_shape(dims, v), dtype=np.int64)) for k, v in
                (("l", left), ("k", contr), ("r", right))}
        bs = _shape(dims, batch)
        x = _reshape(r, _arrange(r, ops[0], a, batch + left + contr, dims),
                     (*bs, size["l"], size["k"]), _shape(dims, batch + left + contr))
        y = _reshape(r, _arrange(r, ops[1], b, batch + contr + right, dims),
                     (*bs, size["k"], size["r"]), _shape(dims, batch + contr + right))
        prod = r.op("MatMul", [x, y], (*bs, size["l"], size["r"]))
        made = batch + left + right
        _arrange(r, _reshape(r, prod, _shape(dims, made), (*bs, size["l"], size["r"])),
                 made, rhs, dims)
    if not r.nodes:  # the equation leaves its operand as it is
        r.op("Identity", [ops[0]], _shape(dims, rhs))
    r.nodes[-1].outputs = [n.outputs[0]]
    return r.nodes


def einsum_as_layers(net: Net) -> None:
    """Every Einsum of ``net`` as the operations above."""
    nodes = []
    for n in net.nodes:
        nodes += einsum(net, n) if n.op == "Einsum" else [n]
    net.nodes = nodes
