"""An equation compiled as one fused kernel: one generated C function, its numpy
reference beside it, one IR program that calls it.

The tree is cut into stages, run in post-order: every reduction, every (batch-reduce)
matmul, every operand read with a broadcast (unless it is an argument) and the root get a
stage; a stage is one loop nest over its domain that evaluates the operations below it
element by element into locals and stores its value (reductions fold into theirs). Later
stages read earlier ones from temporaries. The C (``_CWriter``) and the reference
(``_NumpyWriter``) walk the same stages and apply the same float32 operations in the same
order (each rounded once, reductions and GEMM sums folded in index order, libxsmm's
transcendental kinds in float64 rounded once), so the simulator and the C agree bit for bit.
"""

from __future__ import annotations

import hashlib
import math
import re
import weakref
from dataclasses import dataclass

import numpy as np

from .. import ir
from ..c.runtime import run_c
from ..dtypes import FACTS
from ..dtypes import dtype as _dtype
from ..errors import CapacityError
from ..layout import Layout
from ..machine import target as _target
from . import csource
from .equation_tree import EQ_REDUCE, Arg, Node
from .errors import WrongDimensionError
from .formulas import LIBXSMM_BINARY, LIBXSMM_REDUCE, LIBXSMM_UNARY
from .formulas import exp as _exp
from .operation import as_flat
from .primitives import BINARY_REF, UNARY_REF

TEMP_BUDGET = 256 * 1024   # bytes of temporaries a kernel may keep on the C stack
_IDX = {None: ("i", "j"), "scalar": ("0", "0"), "row": ("0", "j"), "col": ("i", "0")}


def _stages(root: Node | Arg) -> list[Node | Arg]:
    """The nodes that get a stage, in post-order (the root last)."""
    out: list = []

    def walk(node, bcast) -> None:
        if isinstance(node, Arg):
            return
        for kid, b in zip(node.children, node.bcast or (None,) * node.arity):
            walk(kid, b)
        gemm = node.kind in ("matmul", "brgemm")
        if gemm and node.arity == 3 and isinstance(node.children[2], Node):
            out.append(node.children[2])     # a batch-reduce GEMM's C, computed first
        if node.kind in EQ_REDUCE or gemm or bcast:
            out.append(node)

    walk(root, None)
    if not out or out[-1] is not root:
        out.append(root)
    return out


def _mask_ld(ld: int) -> int:
    """Bytes per column of a ReLU's bitmask: libxsmm's ``LIBXSMM_UPDIV(ld, 16) * 2``."""
    return -(-ld // 16) * 2


@dataclass(frozen=True)
class Plan:
    """What the fused kernel computes: the tree, the output block, and the buffer each
    argument index and dump reads or writes (an argument read from a dump's buffer when the
    caller passes one array for both, as libxsmm's softmax does)."""

    root: object
    m: int
    n: int
    ld: int
    dtype: str = "float32"                    # of the output
    alias: tuple[tuple[int, int], ...] = ()   # (argument index, op_arg it reads)

    def arg_buffer(self, index: int) -> str:
        return f"op{dict(self.alias)[index]}" if index in dict(self.alias) else f"arg{index}"

    def nodes(self):
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            if isinstance(node, Node):
                stack.extend(node.children)

    def params(self) -> dict[str, tuple[str, int, str]]:
        """name -> (dtype, elements, role), in the C function's argument order."""
        out: dict[str, list] = {}
        for node in self.nodes():
            if isinstance(node, Arg):
                dt = "uint8" if node.dtype == "bitmask" else node.dtype
                name = self.arg_buffer(node.index)
                cur = out.setdefault(name, [dt, 0, "in"])
                if cur[0] != dt:
                    raise WrongDimensionError(f"argument {node.index} is read as {cur[0]} and "
                                              f"as {dt}")
                cur[1] = max(cur[1], node.footprint())
            elif node.kind == "dump":
                m, n = node.shape
                cur = out.setdefault(f"op{node.op_arg}", ["float32", 0, "out"])
                cur[1], cur[2] = max(cur[1], m * n), "out"
        for name, cur in out.items():
            if name.startswith("op") and any(name == self.arg_buffer(i) for i, _ in self.alias):
                cur[2] = "inout"
        if any(isinstance(x, Node) and x.bitmask for x in self.nodes()):
            out["mask"] = ["uint8", self.n * _mask_ld(self.ld), "inout"]
        if self.dtype == "bitmask":
            out["out"] = ["uint8", (self.m - 1) // 8 + (self.n - 1) * (self.ld // 8) + 1, "inout"]
        else:
            out["out"] = [self.dtype, (self.m - 1) + (self.n - 1) * self.ld + 1, "inout"]
        return {k: tuple(v) for k, v in sorted(out.items(), key=lambda kv: _order(kv[0]))}

    def check(self) -> None:
        if self.root.shape != (self.m, self.n):
            raise WrongDimensionError(f"the equation's root is {self.root.shape[0]} x "
                                      f"{self.root.shape[1]}, the output {self.m} x {self.n}")
        if self.ld < self.m or self.dtype == "bitmask" and self.ld % 8:
            raise WrongDimensionError(f"output ld = {self.ld} below m = {self.m}" + (
                " or not a multiple of 8 bits" if self.dtype == "bitmask" else ""))
        for node in self.nodes():
            if isinstance(node, Node) and node.init_acc and (
                    node is not self.root or self.dtype != "float32"):
                raise WrongDimensionError(f"{node.kind} with init_acc folds onto the output: "
                                          "it must be the equation's root, the output float32")
            if isinstance(node, Node) and node.kind == "muladd" and node.arity == 2 and (
                    node is not self.root or self.dtype != "float32"):
                raise WrongDimensionError("the binary muladd adds into the output: it must be "
                                          "the equation's root, the output float32")
        for node in self.nodes():
            if isinstance(node, Node) and node.bitmask and node.shape != (self.m, self.n):
                raise WrongDimensionError(f"a relu with a bitmask is {node.shape[0]} x "
                                          f"{node.shape[1]}; its mask has the output's shape "
                                          f"{self.m} x {self.n}")
            if isinstance(node, Node) and node.kind in ("matmul", "brgemm") and not all(
                    isinstance(c, Arg) for c in node.children[:2]):
                raise WrongDimensionError(f"{node.kind} reads its A and B from arguments "
                                          "(push_back_arg for each)")
        stages = _stages(self.root)
        temps = sum(4 * math.prod(s.shape) for s in
                    (stages if _copies(self.root) else stages[:-1]))
        if temps > TEMP_BUDGET:
            raise CapacityError(f"the equation's intermediate stages need {temps} bytes, over "
                                f"the kernel's budget of {TEMP_BUDGET} bytes of temporaries")

    def reference(self, *arrays: np.ndarray) -> None:
        """The kernel in numpy, on flat buffers in ``params`` order (the simulator's call)."""
        _NumpyWriter(self, dict(zip(self.params(), arrays))).run()

    def c_source(self, name: str) -> str:
        return _CWriter(self).function(name)


def _order(name: str) -> tuple:
    head = {"arg": 0, "op": 1, "mask": 2, "out": 3}[re.sub(r"\d+", "", name)]
    return (head, int(re.sub(r"\D", "", name) or 0))


class _Walk:
    """The stages of a plan, evaluated by a writer: ``leaf`` reads an argument at (i, j),
    ``temp`` an earlier stage, ``op`` applies one operation to its operands' values."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.stages = _stages(plan.root)
        self.stage_of = {id(s): k for k, s in enumerate(self.stages)}

    def value(self, node, at: tuple[str, str], current: int):
        """``node``'s value at index ``at`` inside stage ``current``."""
        if isinstance(node, Arg):
            return self.leaf(node, at)
        k = self.stage_of.get(id(node))
        if k is not None and k != current:
            return self.temp(k, node.shape, at)
        kids = [self.value(c, _IDX[b] if b else at, current)
                for c, b in zip(node.children, node.bcast)]
        return self.op(node, kids, at)


class _CWriter(_Walk):
    def __init__(self, plan: Plan):
        super().__init__(plan)
        self.lines: list[str] = []
        self.count = 0
        self.scalar = False     # a reduction: the function is kept from gcc's vectoriser

    def local(self, expr: str) -> str:
        self.count += 1
        self.lines.append(f"        const float v{self.count} = {expr};")
        return f"v{self.count}"

    def leaf(self, a: Arg, at) -> str:
        i, j = at
        buf = self.plan.arg_buffer(a.index)
        if a.dtype == "bitmask":
            return f"(({buf}[({i}) / 8 + ({j}) * {a.ld // 8}] >> (({i}) % 8)) & 1)"
        v = f"{buf}[({i}) + ({j}) * {a.ld}]"
        return self.local(f"tpp_eq_bf16({v})" if a.dtype == "bfloat16" else v)

    def temp(self, k: int, shape, at) -> str:
        return self.local(f"t{k}[({at[0]}) + ({at[1]}) * {shape[0]}]")

    def op(self, node: Node, kids: list[str], at) -> str:
        k = node.kind
        if k == "dump":
            self.lines.append(f"        op{node.op_arg}[i + j * {node.shape[0]}] = {kids[0]};")
            return kids[0]
        if k in LIBXSMM_UNARY:
            v = self.local(LIBXSMM_UNARY[k].c(kids[0]))
        elif k in csource.UNARY_EXPR:
            v = self.local(re.sub(r"\bx\b", kids[0], csource.UNARY_EXPR[k]))
        elif k in LIBXSMM_BINARY:
            v = self.local(LIBXSMM_BINARY[k].c(*kids))
        elif k in csource.BINARY_EXPR:
            v = self.local(re.sub(r"\by\b", kids[1],
                                  re.sub(r"\bx\b", kids[0], csource.BINARY_EXPR[k])))
        elif k == "muladd" and node.arity == 2:   # libxsmm's BINARY_MULADD: out += in0 in1
            prod = self.local(f"{kids[0]} * {kids[1]}")
            v = self.local(f"{prod} + out[i + j * {self.plan.ld}]")
        elif k in _ALPHA_C:
            v = self.local(_ALPHA_C[k].format(*kids, a=_alpha(node.alpha)))
        elif k == "muladd":
            v = self.local(f"{self.local(f'{kids[0]} * {kids[1]}')} + {kids[2]}")
        elif k == "nmuladd":
            v = self.local(f"{kids[2]} - {self.local(f'{kids[0]} * {kids[1]}')}")
        else:  # select: libxsmm's bit 0 takes in0, bit 1 in1
            v = self.local(f"{kids[2]} ? {kids[1]} : {kids[0]}")
        if node.dtype == "bfloat16":
            v = self.local(f"tpp_eq_round_bf16({v})")
        if node.bitmask:  # bit i % 8 of byte i / 8: set where the input is not <= 0
            self.lines.append(
                f"        {{ uint8_t *b = &mask[i / 8 + j * {_mask_ld(self.plan.ld)}]; "
                f"*b = (uint8_t)((*b & ~(1u << (i % 8))) | ((unsigned)!({kids[0]} <= 0.0f) "
                "<< (i % 8))); }")
        return v

    def _loop(self, m: int, n: int, body: list[str], comment: str) -> list[str]:
        return [f"    /* {comment} */", f"    for (int64_t j = 0; j < {n}; ++j) {{",
                f"      for (int64_t i = 0; i < {m}; ++i) {{", *body, "      }", "    }"]

    def _reduction(self, k: int, node: Node) -> list[str]:
        """A reduction's loop nest. Each result folds from the identity of its step
        (``_IDENTITY``: the same value as libxsmm's first element, exactly) or, with
        init_acc, from the old output. Over the rows the accumulators are locals of the
        column loop; over the columns an array set before the loops. A function with a
        reduction is not vectorised (``NPK_TPP_EQ_SCALAR``): gcc 12 at -O3 -march=native
        (znver3) vectorised a fold down each column across the columns keeping the sums in
        double between steps, which changes the rounding."""
        kid = node.children[0]
        x = self.value(kid, ("i", "j"), k)
        m, n = kid.shape
        rows, ld, parts = node.reduce == "rows", self.plan.ld, _parts(node, m)
        accs, starts = [], []
        for p, (kind, step, off) in enumerate(parts):
            accs.append(f"acc{p}" if rows else f"t{k}[i * {step} + {off}]")
            old = f"out[{p} + j * {ld}]" if rows else f"out[i + {p * ld}]"
            starts.append(old if node.init_acc else _IDENTITY[kind])
        folds = [f"        {a} = {LIBXSMM_REDUCE[kind].step.c(a, x)};"
                 for a, (kind, _, _) in zip(accs, parts)]
        head = f"    /* stage {k}: {node.kind} over the {node.reduce} of a {m} x {n} " \
            "block, folded in order */"
        self.scalar = True
        if rows:
            return [head, f"    for (int64_t j = 0; j < {n}; ++j) {{",
                    *[f"      float {a} = {v};" for a, v in zip(accs, starts)],
                    f"      for (int64_t i = 0; i < {m}; ++i) {{", *self.lines, *folds,
                    "      }", *[f"      t{k}[j * {step} + {off}] = {a};"
                                 for a, (_, step, off) in zip(accs, parts)], "    }"]
        return [head, f"    for (int64_t i = 0; i < {m}; ++i) {{",
                *[f"      {a} = {v};" for a, v in zip(accs, starts)], "    }",
                *self._loop(m, n, [*self.lines, *folds], "the fold")]

    def _gemm(self, k: int, node: Node) -> list[str]:
        a, b = node.children[:2]
        (m, kk), n = a.shape, b.n
        self.lines = []
        c = self.value(node.children[2], ("i", "j"), k) if node.arity == 3 else "0.0f"
        lines = list(self.lines)

        def elem(x: Arg, i: str, j: str) -> str:
            buf = self.plan.arg_buffer(x.index)
            at = f"({j} / 2) * {2 * x.ld} + 2 * ({i}) + {j} % 2" if x.vnni else \
                f"({i}) + ({j}) * {x.ld}"
            v = f"{buf}[r * {x.stride} + {at}]"
            return f"tpp_eq_bf16({v})" if x.dtype == "bfloat16" else v

        body = [*lines, f"        float acc = {c};",
                f"        for (int64_t r = 0; r < {a.count}; ++r)",
                f"          for (int64_t p = 0; p < {kk}; ++p)",
                f"            acc = acc + {elem(a, 'i', 'p')} * {elem(b, 'p', 'j')};",
                f"        t{k}[i + j * {m}] = acc;"]
        return self._loop(m, n, body, f"stage {k}: {node.kind} {m} x {n}, k = {kk}, "
                          f"batch {a.count}, sums in index order")

    def _stage(self, k: int, node, last: bool) -> list[str]:
        self.lines = []
        if isinstance(node, Node) and node.kind in ("matmul", "brgemm"):
            return self._gemm(k, node)
        if isinstance(node, Node) and node.kind in EQ_REDUCE:
            return self._reduction(k, node)
        v = self.value(node, ("i", "j"), k)
        m, n = node.shape
        self.lines.append(self._store(v) if last else f"        t{k}[i + j * {m}] = {v};")
        what = "the output" if last else "an operand read with a broadcast"
        return self._loop(m, n, self.lines, f"stage {k}: {what}, {m} x {n}")

    def function(self, name: str) -> str:
        params = self.plan.params()
        args = ", ".join(f"{'const ' if role == 'in' else ''}{FACTS[dt].c_type} *{p}"
                         for p, (dt, _, role) in params.items())
        copy = _copies(self.plan.root)
        temps = self.stages if copy else self.stages[:-1]
        body = [f"    float t{k}[{math.prod(s.shape)}];" for k, s in enumerate(temps)]
        for k, s in enumerate(self.stages):
            body += self._stage(k, s, not copy and k == len(self.stages) - 1)
        if copy:
            k, (m, n) = len(self.stages) - 1, self.plan.root.shape
            body += self._loop(m, n, [self._store(f"t{k}[i + j * {m}]")], "the output")
        scalar = "NPK_TPP_EQ_SCALAR " if self.scalar else ""
        return "\n".join([_PRELUDE, f"/* libxsmm equation, fused: {len(self.stages)} "
                          "stage(s) in one function */", f"static void {scalar}{name}({args})",
                          "{", *body, "}", ""])

    def _store(self, v: str) -> str:
        """The statement writing value ``v`` to the output at (i, j)."""
        ld = self.plan.ld
        if self.plan.dtype == "bitmask":   # bit i % 8 of byte i / 8 + j * ld / 8: v != 0
            return (f"        {{ uint8_t *b = &out[i / 8 + j * {ld // 8}]; *b = (uint8_t)((*b "
                    f"& ~(1u << (i % 8))) | ((unsigned)({v} != 0.0f) << (i % 8))); }}")
        conv = f"tpp_eq_to_bf16({v})" if self.plan.dtype == "bfloat16" else v
        return f"        out[i + j * {ld}] = {conv};"


def _copies(root) -> bool:
    """A reduction or GEMM root is computed into a temporary, then copied out."""
    return isinstance(root, Node) and root.kind in (*EQ_REDUCE, "matmul", "brgemm")


def _parts(node: Node, m: int) -> list[tuple[str, int, int]]:
    """(reduction, step, offset): the result element of index ``idx`` (a row for
    REDUCE_COLS, a column for REDUCE_ROWS) is at ``idx * step + offset``; reduce_x_x2_add
    has two: the sums and the sums of squares (m x 2 over the columns, 2 x n over the
    rows)."""
    if node.kind != "reduce_x_x2_add":
        return [(node.kind, 1, 0)]
    if node.reduce == "rows":
        return [("reduce_add", 2, 0), ("reduce_x2_add", 2, 1)]
    return [("reduce_add", 1, 0), ("reduce_x2_add", 1, m)]


# The identity of each reduction's step: folding from it gives libxsmm's first element
# exactly (-0 + x = x for every x, -0 and NaN included; max(-inf, x) = x; ...).
_IDENTITY = {"reduce_add": "-0.0f", "reduce_x2_add": "-0.0f", "reduce_mul": "1.0f",
             "reduce_max": "-HUGE_VALF", "reduce_min": "HUGE_VALF",
             "reduce_absmax": "-HUGE_VALF"}


def _alpha(a: float) -> str:
    """libxsmm's alpha, a float32, as a C float literal of exactly that value."""
    return f"{float(np.float32(a))!r}f"


# The kinds with an alpha (libxsmm's eltwise_unary_relu.c): C over floats, and numpy, the
# same float32 operations; ELU's exponential in float64, rounded once, like the formulas.
_ALPHA_C = {
    "leaky_relu": "({0} <= 0.0f) ? {a} * {0} : {0}",
    "elu": "({0} <= 0.0f) ? (float)((double){a} * (exp((double){0}) - 1.0)) : {0}",
    "relu_inv": "({1} > 0) ? {0} : 0.0f",
    "leaky_relu_inv": "({1} > 0) ? {0} : {a} * {0}",
    "elu_inv": "({1} > 0.0f) ? {0} : {0} * ({1} + {a})",
}
_ALPHA_REF = {
    "leaky_relu": lambda x, a: np.where(x <= 0, a * x, x),
    "elu": lambda x, a: np.where(x <= 0, (np.float64(a) * (_exp(x) - 1.0)).astype(np.float32),
                                 x),
    "relu_inv": lambda d, c, a: np.where(c > 0, d, np.float32(0)),
    "leaky_relu_inv": lambda d, c, a: np.where(c > 0, d, a * d),
    "elu_inv": lambda d, f, a: np.where(f > 0, d, d * (f + a)),
}


_PRELUDE = csource._includes("math.h") + """
#ifndef NPK_TPP_EQ_BF16
#define NPK_TPP_EQ_BF16
#if defined(__GNUC__) && !defined(__clang__)
#define NPK_TPP_EQ_SCALAR __attribute__((optimize("no-tree-vectorize")))
#else
#define NPK_TPP_EQ_SCALAR
#endif
/* bfloat16 -> float32: the 16 bits are the top half of the float32. */
static inline float tpp_eq_bf16(npk_bfloat16 h)
{
    union { uint32_t u; float f; } v;
    v.u = (uint32_t)h << 16;
    return v.f;
}
/* float32 rounded to bfloat16, to nearest even (NaN stays a quiet NaN). */
static inline uint32_t tpp_eq_bf16_bits(float f)
{
    union { uint32_t u; float f; } v;
    v.f = f;
    if (f != f)
        return (v.u | 0x00400000u) & 0xFFFF0000u;
    return (v.u + 0x7FFFu + ((v.u >> 16) & 1u)) & 0xFFFF0000u;
}
static inline float tpp_eq_round_bf16(float f)
{
    union { uint32_t u; float f; } v;
    v.u = tpp_eq_bf16_bits(f);
    return v.f;
}
static inline npk_bfloat16 tpp_eq_to_bf16(float f)
{
    return (npk_bfloat16)(tpp_eq_bf16_bits(f) >> 16);
}
#endif"""


class _NumpyWriter(_Walk):
    """The same stages in numpy: a stage's value is a float32 array over its domain; an
    index ``at`` of ``_IDX`` reads a temporary or an argument broadcast over it."""

    def __init__(self, plan: Plan, arrays: dict[str, np.ndarray]):
        super().__init__(plan)
        self.arrays = arrays
        self.temps: dict[int, np.ndarray] = {}
        self.domain = (1, 1)

    def _spread(self, block: np.ndarray, at) -> np.ndarray:
        """``block`` (m' x n') read at ``at`` over the current domain."""
        rows = slice(0, 1) if at[0] == "0" else slice(None)
        cols = slice(0, 1) if at[1] == "0" else slice(None)
        part = block[rows, cols]
        return np.broadcast_to(part, self.domain) if part.shape != self.domain else part

    def _matrix(self, a: Arg, r: int = 0) -> np.ndarray:
        """Argument ``a`` (block ``r`` of a set) as an m x n array (float32, or the
        bitmask's bits)."""
        flat = self.arrays[self.plan.arg_buffer(a.index)]
        i, j = np.meshgrid(np.arange(a.m), np.arange(a.n), indexing="ij")
        if a.dtype == "bitmask":
            return (flat[i // 8 + j * (a.ld // 8)] >> (i % 8)) & 1
        at = (j // 2) * 2 * a.ld + 2 * i + j % 2 if a.vnni else i + j * a.ld
        return flat[r * a.stride + at].astype(np.float32)

    def leaf(self, a: Arg, at):
        return self._spread(self._matrix(a), at)

    def temp(self, k: int, shape, at):
        return self._spread(self.temps[k], at)

    def op(self, node: Node, kids: list, at):
        k = node.kind
        with np.errstate(all="ignore"):
            if k == "dump":
                m = node.shape[0]
                i, j = np.meshgrid(np.arange(self.domain[0]), np.arange(self.domain[1]),
                                   indexing="ij")
                self.arrays[f"op{node.op_arg}"][i + j * m] = kids[0]
                return kids[0]
            if k in UNARY_REF:
                v = UNARY_REF[k](np.ascontiguousarray(kids[0]))
            elif k in BINARY_REF:
                v = BINARY_REF[k](*kids).astype(np.float32)
            elif k == "muladd" and node.arity == 2:
                i, j = np.meshgrid(np.arange(self.domain[0]), np.arange(self.domain[1]),
                                   indexing="ij")
                v = kids[0] * kids[1] + self.arrays["out"][i + j * self.plan.ld]
            elif k in _ALPHA_REF:
                v = _ALPHA_REF[k](*kids, np.float32(node.alpha))
            elif k == "muladd":
                v = kids[0] * kids[1] + kids[2]
            elif k == "nmuladd":
                v = kids[2] - kids[0] * kids[1]
            else:
                v = np.where(kids[2] != 0, kids[1], kids[0])
        if node.dtype == "bfloat16":
            v = np.asarray(v, np.float32).astype(_dtype("bfloat16")).astype(np.float32)
        if node.bitmask:
            self._bits(np.logical_not(kids[0] <= 0))
        return np.asarray(v, np.float32)

    def _bits(self, bits: np.ndarray, name: str = "mask", mld: int = 0) -> None:
        mask, mld = self.arrays[name], mld or _mask_ld(self.plan.ld)
        for (i, j), bit in np.ndenumerate(bits):
            pos = i // 8 + j * mld
            mask[pos] = (int(mask[pos]) & ~(1 << (i % 8)) & 0xFF) | (int(bit) << (i % 8))

    def _gemm(self, node: Node) -> np.ndarray:
        a, b = node.children[:2]
        self.domain = node.shape
        acc = np.array(np.broadcast_to(self.value(node.children[2], ("i", "j"), -1),
                                       node.shape)) if node.arity == 3 else \
            np.zeros((a.m, b.n), np.float32)
        for r in range(a.count):
            ma, mb = self._matrix(a, r), self._matrix(b, r)
            for p in range(a.n):
                acc = acc + ma[:, p:p + 1] * mb[p:p + 1, :]
        return acc

    def _fold(self, red, x: np.ndarray, axis: int, part: int) -> np.ndarray:
        """A reduction folded onto the old output (REDUCE_INIT_ACC): row (or column)
        ``part`` of the output block."""
        m, n, ld = *self.plan.root.shape, self.plan.ld
        at = part + np.arange(n) * ld if axis == 0 else np.arange(m) + part * ld
        acc = self.arrays["out"][at].astype(np.float32)
        for row in np.moveaxis(x, axis, 0):
            acc = red.step.reference(acc, row)
        return acc

    def stage(self, k: int, node) -> np.ndarray:
        if isinstance(node, Node) and node.kind in ("matmul", "brgemm"):
            return self._gemm(node)
        if isinstance(node, Node) and node.kind in EQ_REDUCE:
            kid = node.children[0]
            self.domain = kid.shape
            x = np.broadcast_to(self.value(kid, ("i", "j"), k), kid.shape)
            axis = 0 if node.reduce == "rows" else 1
            parts = [self._fold(LIBXSMM_REDUCE[kind], x, axis, part) if node.init_acc else
                     LIBXSMM_REDUCE[kind].reference(x, axis)
                     for part, (kind, *_) in enumerate(_parts(node, 0))]
            return np.stack(parts, axis=axis) if len(parts) == 2 else \
                parts[0].reshape(node.shape)
        self.domain = node.shape
        return np.array(np.broadcast_to(self.value(node, ("i", "j"), k), node.shape))

    def run(self) -> None:
        for k, node in enumerate(self.stages):
            self.temps[k] = self.stage(k, node)
        res, (m, n), ld = self.temps[len(self.stages) - 1], self.plan.root.shape, self.plan.ld
        if self.plan.dtype == "bitmask":
            self._bits(res != 0, "out", ld // 8)
            return
        i, j = np.meshgrid(np.arange(m), np.arange(n), indexing="ij")
        self.arrays["out"][i + j * ld] = res.astype(self.arrays["out"].dtype)


@dataclass(frozen=True)
class _Steps:
    """The fused call's cost on the simulator's unit: ``ceil(m / width) * n`` vector steps
    per stage (a GEMM stage times its k and batch)."""

    steps: int

    def __call__(self, *_, **__) -> int:
        return self.steps


class EquationKernel:
    """A dispatched equation: ``kernel(args, out, op_args=None, mask=None)`` runs the
    generated C (``args``: one numpy array per argument index, read as a flat buffer;
    ``op_args``: dump buffers by position; ``mask``: a ReLU's bitmask, uint8, libxsmm's
    ``ceil(ld / 16) * 2`` bytes per column), writes ``out`` and returns it;
    ``run(backend, ...)`` runs the same program on ``"sim"`` or ``"c"`` and returns the
    ``Result``. An argument passed as the very array of a dump reads what the dump wrote
    (the dump's stage runs first)."""

    def __init__(self, root, m: int, n: int, ld: int, dtype: str = "float32",
                 target: str = "torq"):
        self.root, self.m, self.n, self.ld, self.dtype = root, m, n, ld, dtype
        self.target = _target(target) if isinstance(target, str) else target
        Plan(root, m, n, ld, dtype).check()
        self._programs: dict[tuple, ir.Program] = {}
        self._last_call = None   # (key, weak references, program, flat arrays)

    def plan(self, alias: tuple = ()) -> Plan:
        return Plan(self.root, self.m, self.n, self.ld, self.dtype, alias)

    def stages(self) -> int:
        """Loop nests of the fused function (one per reduction, GEMM, broadcast operand and
        the output)."""
        return len(_stages(self.root)) + int(_copies(self.root))

    def program(self, alias: tuple = ()) -> ir.Program:
        """The IR: one parameter per buffer, one ``Call`` of the fused function."""
        prog = self._programs.get(alias)
        if prog is None:
            prog = self._programs[alias] = _lower(self.plan(alias), self.target)
        return prog

    def c_source(self, alias: tuple = ()) -> str:
        return self.plan(alias).c_source("tpp_equation")

    def _arrays(self, args, out, op_args, mask) -> tuple[ir.Program, dict]:
        args, op_args = list(args), dict(op_args or {})
        alias = tuple(sorted((i, p) for i, a in enumerate(args) for p, b in op_args.items()
                             if a is b))
        prog = self.program(alias)
        given = {f"arg{i}": a for i, a in enumerate(args)} | \
            {f"op{p}": b for p, b in op_args.items()} | {"out": out, "mask": mask}
        arrays = {}
        for buf, _ in prog.params:
            if given.get(buf.name) is None:
                raise WrongDimensionError(f"the equation reads or writes {buf.name} "
                                          f"({buf.size} elements of {buf.dtype}); none given")
            arrays[buf.name] = as_flat(given[buf.name], buf.name, buf.dtype, buf.size,
                                       write=buf.role != "in")
        return prog, arrays

    def __call__(self, args, out, op_args=None, mask=None) -> np.ndarray:
        """Run the C. Called again on the very arrays of the last call, the checks and
        flat views are not redone (weak references tell that the arrays are the same),
        which keeps a call on small blocks cheap."""
        given = (*args, *(op_args or {}).values(), out, mask)
        key = (len(args), tuple(op_args or {}), tuple(
            None if a is None else (a.dtype, a.shape, a.strides, a.flags.writeable)
            for a in given if a is None or isinstance(a, np.ndarray)))
        last = self._last_call
        if last is not None and last[0] == key and len(last[1]) == len(given) and all(
                (r is None and a is None) or (r is not None and r() is a)
                for r, a in zip(last[1], given)):
            run_c(last[2], last[3])
            return out
        prog, arrays = self._arrays(args, out, op_args, mask)
        refs = tuple(None if a is None else weakref.ref(a) for a in given)
        self._last_call = (key, refs, prog, arrays)
        run_c(prog, arrays)
        return out

    def run(self, backend: str, args, out, op_args=None, mask=None):
        prog, arrays = self._arrays(args, out, op_args, mask)
        return prog.run(backend, **arrays)


def _lower(plan: Plan, tgt) -> ir.Program:
    params = plan.params()
    bufs = [ir.Buffer(name, tgt.home, _dtype(dt), size, role)
            for name, (dt, size, role) in params.items()]
    name = "tpp_equation_" + hashlib.sha1(plan.c_source("_").encode()).hexdigest()[:12]
    width = next(iter(tgt.units.values())).width("float32", None)
    steps = 0
    for s in _stages(plan.root):
        gemm = isinstance(s, Node) and s.kind in ("matmul", "brgemm")
        steps += math.ceil(s.shape[0] / width) * s.shape[1] * (
            s.children[0].n * s.children[0].count if gemm else 1)
    ext = ir.Extern(name, tuple((("const " if r == "in" else "") + FACTS[dt].c_type + " *", p)
                                for p, (dt, _, r) in params.items()), False,
                    plan.c_source(name), plan.reference, _Steps(steps))
    call = ir.Call(ext, tuple(ir.Ptr(ir.View(b, Layout((1,), b.dtype), ir.Affine()))
                              for b in bufs),
                   f"libxsmm equation fused into one function ({steps} vector steps)")
    return ir.Program(name, tgt, tuple((b, Layout((b.size,), b.dtype)) for b in bufs),
                      (), (call,), source=f"libxsmm equation {plan.m} x {plan.n}")
