"""ONNX's float32 reductions (``ReduceSum``, ``ReduceMean``, ``ReduceMax``, ``ReduceMin``,
``ReduceProd``, ``ReduceL1``, ``ReduceL2``, ``ReduceLogSum``, ``ReduceLogSumExp``,
``ReduceSumSquare``) as one basic kernel each, defined once with the primitives of
``scalar`` for its C and its numpy reference.

``REDUCE[op]`` is ``(init, term, combine, final, two_pass)``: the accumulator starts at
``init``; for each value x in order ``acc = combine(m, acc, term(m, x, mx))``; the result is
``final(m, acc, n, mx)`` with ``n`` the count as a float; ``mx`` is the maximum of the
values, found by a first pass when ``two_pass`` (LogSumExp: ``log(sum exp(x - mx)) + mx``),
else 0. Sums run in order, one float32 rounding per addition.

``arg_reduce`` is ONNX's ``ArgMax`` and ``ArgMin`` on any element type: the int64 index of
the first extreme value (the last with ``select_last_index``), as ONNX Runtime's loop finds
it: a value replaces the best one only when strictly greater (smaller; or equal, for the
last), so a NaN is never taken unless it is the first value. ``top_k`` is ONNX's ``TopK``
(sorted): the K largest (smallest) values of each column and their int64 indices, a value
inserted only when strictly better, so ties keep the lower index first, as ONNX Runtime.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from ...costs import Work
from .common import HELPERS, BasicKernel, c_signature, layer_c_type, layer_suffix, share_rows
from .scalar import C_HELPERS, NUMPY, CBuilder, abs_, exp, log, maximum, minimum, sqrt


def _add(m, acc, v):
    return acc + v


def _x(m, x, mx):
    return x


def _acc(m, acc, n, mx):
    return acc


REDUCE = {
    "ReduceSum": (0.0, _x, _add, _acc, False),
    "ReduceMean": (0.0, _x, _add, lambda m, acc, n, mx: acc / n, False),
    "ReduceSumSquare": (0.0, lambda m, x, mx: x * x, _add, _acc, False),
    "ReduceL1": (0.0, lambda m, x, mx: abs_(m, x), _add, _acc, False),
    "ReduceL2": (0.0, lambda m, x, mx: x * x, _add, lambda m, acc, n, mx: sqrt(m, acc), False),
    "ReduceLogSum": (0.0, _x, _add, lambda m, acc, n, mx: log(m, acc), False),
    "ReduceLogSumExp": (0.0, lambda m, x, mx: exp(m, x - mx), _add,
                        lambda m, acc, n, mx: log(m, acc) + mx, True),
    "ReduceProd": (1.0, _x, lambda m, acc, v: acc * v, _acc, False),
    "ReduceMax": (-np.inf, _x, maximum, _acc, False),
    "ReduceMin": (np.inf, _x, minimum, _acc, False),
}


@cache
def reduce(op: str, width: int) -> BasicKernel:
    """``Out[v] = reduce(In[v*Sv + d*Sd] for d < D)`` for the ``N`` vectors v of a tile,
    ``reduce`` = ``REDUCE[op]``; the vectors are shared among the cores."""
    init, term, combine, final, two_pass = REDUCE[op]
    name = f"KerReduceNpk_{op[len('Reduce'):]}_fl"
    args = (("const float *__restrict__", "In"), ("float *__restrict__", "Out"), ("int", "N"),
            ("int", "Sv"), ("int", "D"), ("int", "Sd"))
    pre = CBuilder("M")
    mx_c = pre.result(maximum(pre, pre.var("Mx"), pre.var("X[d * Sd]"))) if two_pass else None
    loop = CBuilder("V")
    acc_c = loop.result(combine(loop, loop.var("Acc"),
                                term(loop, loop.var("X[d * Sd]"), loop.var("Mx"))))
    post = CBuilder("R")
    out_c = post.result(final(post, post.var("Acc"), post.var("(float)D"), post.var("Mx")))

    def block(b: CBuilder, indent: str) -> str:
        return "".join(f"{indent}{line}\n" for line in b.lines)

    first = (f"        for (int d = 0; d < D; d++) {{\n{block(pre, ' ' * 12)}"
             f"            Mx = {mx_c};\n        }}\n" if two_pass else "")
    src = f"""\
{HELPERS}
{C_HELPERS}
void {name}({c_signature(args)})
{{
    /* Out[v] = {op} of the D values In[v*Sv + d*Sd], in order of d, one statement per
       float32 operation as npukit.tiler.basic_kernels.reduction defines it. The vectors are
       shared among the cores. */
    int Rows = N;
{share_rows()}
    for (int v = First; v < Last; v++) {{
        const float *X = In + v * Sv;
        float Acc = {loop.result(init)}, Mx = {loop.result(-np.inf if two_pass else 0.0)};
        (void)Mx;
{first}        for (int d = 0; d < D; d++) {{
{block(loop, ' ' * 12)}            Acc = {acc_c};
        }}
{block(post, ' ' * 8)}        Out[v] = {out_c};
    }}
}}"""

    def reference(In, Out, N, Sv, D, Sd, *, core_id, core_count):
        if core_id or N <= 0:
            return
        x = In[np.arange(N)[:, None] * Sv + np.arange(D)[None, :] * Sd].astype(np.float32)
        with np.errstate(all="ignore"):
            mx = np.full(N, -np.inf if two_pass else 0.0, np.float32)
            if two_pass:
                for d in range(D):
                    mx = maximum(NUMPY, mx, x[:, d])
            acc = np.full(N, init, np.float32)
            for d in range(D):
                acc = np.asarray(combine(NUMPY, acc, term(NUMPY, x[:, d], mx)), np.float32)
            Out[:N] = final(NUMPY, acc, np.float32(D), mx)

    cost = len(loop.lines) + 1 + (len(pre.lines) + 1 if two_pass else 0)
    return BasicKernel(name, args, True, src, reference,
                       lambda N, D, **_: Work("other", math.ceil(N / width) * D * cost, N))


@cache
def arg_reduce(op: str, dt: str, last: bool) -> BasicKernel:
    """``Out[v] = argmax (ArgMax) or argmin (ArgMin) of In[v*Sv + d*Sd] over d < D``, the
    first index on ties (the last when ``last``), for the ``N`` vectors of a tile; int64
    results; the vectors are shared among the cores."""
    cmp = (">" if op == "ArgMax" else "<") + ("=" if last else "")
    name = f"KerArgNpk_{op[3:]}{'Last' if last else ''}_{layer_suffix(dt)}"
    t = layer_c_type(dt)
    args = ((f"const {t} *__restrict__", "In"), ("long long int *__restrict__", "Out"),
            ("int", "N"), ("int", "Sv"), ("int", "D"), ("int", "Sd"))
    src = f"""\
void {name}({c_signature(args)})
{{
    /* Out[v] = the index d of the {'largest' if op == 'ArgMax' else 'smallest'} In[v*Sv + d*Sd]
       ({'last' if last else 'first'} on ties): X[d] {cmp} Best replaces it. The vectors are
       shared among the cores. */
    int Rows = N;
{share_rows()}
    for (int v = First; v < Last; v++) {{
        const {t} *X = In + v * Sv;
        {t} Best = X[0];
        long long int Idx = 0;
        for (int d = 1; d < D; d++)
            if (X[d * Sd] {cmp} Best) {{ Best = X[d * Sd]; Idx = d; }}
        Out[v] = Idx;
    }}
}}"""
    better = {">": np.greater, "<": np.less, ">=": np.greater_equal,
              "<=": np.less_equal}[cmp]

    def reference(In, Out, N, Sv, D, Sd, *, core_id, core_count):
        if core_id or N <= 0:
            return
        x = In[np.arange(N)[:, None] * Sv + np.arange(D)[None, :] * Sd]
        best, idx = x[:, 0].copy(), np.zeros(N, np.int64)
        for d in range(1, D):
            take = better(x[:, d], best)
            best, idx = np.where(take, x[:, d], best), np.where(take, d, idx)
        Out[:N] = idx

    return BasicKernel(name, args, True, src, reference,
                       lambda N, D, **_: Work("other", N * D))


@cache
def top_k(dt: str, largest: bool) -> BasicKernel:
    """``Vals[k][c]``, ``Idx[k][c]``: the ``K`` largest (smallest) of the ``D`` values
    ``In[d][c]`` of each of the ``W`` columns, best first, the lower index first on ties;
    columns are shared among the cores."""
    cmp = ">" if largest else "<"
    name = f"KerTopKNpk_{'Largest' if largest else 'Smallest'}_{layer_suffix(dt)}"
    t = layer_c_type(dt)
    args = ((f"const {t} *__restrict__", "In"), ("int", "D"), ("int", "W"), ("int", "K"),
            (f"{t} *__restrict__", "Vals"), ("long long int *__restrict__", "Idx"))
    src = f"""\
void {name}({c_signature(args)})
{{
    /* TopK of each column: In[d][c] enters the sorted list Vals[..][c] when it is {cmp} its
       last, moving past every entry it is {cmp} (so ties keep the lower index first). */
{share_rows("W")}
    for (int c = First; c < Last; c++) {{
        int N = 0;
        for (int d = 0; d < D; d++) {{
            {t} X = In[d * W + c];
            int P;
            if (N < K) P = N++;
            else if (X {cmp} Vals[(K - 1) * W + c]) P = K - 1;
            else continue;
            for (; P > 0 && X {cmp} Vals[(P - 1) * W + c]; P--) {{
                Vals[P * W + c] = Vals[(P - 1) * W + c];
                Idx[P * W + c] = Idx[(P - 1) * W + c];
            }}
            Vals[P * W + c] = X;
            Idx[P * W + c] = d;
        }}
    }}
}}"""
    better = np.greater if largest else np.less

    def reference(In, D, W, K, Vals, Idx, *, core_id, core_count):
        if core_id or W <= 0:
            return
        x = In[:D * W].reshape(D, W)
        vals, idx = Vals[:K * W].reshape(K, W), Idx[:K * W].reshape(K, W)
        for c in range(W):  # the kernel's insertion, column by column
            n = 0
            for d in range(D):
                v = x[d, c]
                if n < K:
                    p, n = n, n + 1
                elif better(v, vals[K - 1, c]):
                    p = K - 1
                else:
                    continue
                while p > 0 and better(v, vals[p - 1, c]):
                    vals[p, c], idx[p, c] = vals[p - 1, c], idx[p - 1, c]
                    p -= 1
                vals[p, c], idx[p, c] = v, d

    return BasicKernel(name, args, True, src, reference,
                       lambda D, W, K, **_: Work("other", D * W * 2))
