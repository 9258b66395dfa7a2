"""Linear and matrix-product basic kernels, each C template next to its numpy reference: the
CNN library's fully connected layer (``linear``) and the layer kernels' matrix product
(``matmul``). Arithmetic: see ``common``.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from ...arith import wrap32
from ...costs import Work
from ...dtypes import is_float
from .common import (
    C_ALIGN,
    HELPERS,
    BasicKernel,
    activate,
    align,
    at_norm,
    bits_f32,
    c_signature,
    c_type,
    layer_c_type,
    layer_suffix,
    requant,
    share_rows,
    suffix,
)
from .matmul_int import matmul_vectors

# -- linear layer ---------------------------------------------------------------------------

@cache
def linear(in_dt: str, filter_dt: str, bias_dt: str, out_dt: str, width: int) -> BasicKernel:
    """``OutSize`` outputs of a linear layer: ``Out[o] = clip(AT_NORM(acc, Norm), LB, UB)``
    with ``acc = (Bias[o] << NormBias) + sum_i In[i] * Filter[o][i]`` in a 32-bit
    accumulator, as GAP's ``KerParLinearLayerReLU_fp``. float32: ``acc = Bias[o]`` then
    ``acc + In[i] * Filter[o][i]`` in order, ReLU when ``LB >= 0``."""
    flt = is_float(out_dt)
    name = f"KerLinear_{suffix(in_dt, filter_dt, bias_dt, out_dt)}"
    ti, tf, tb, to = (c_type(d) for d in (in_dt, filter_dt, bias_dt, out_dt))
    args = ((f"const {ti} * __restrict__", "In"), ("int", "InSize"),
            (f"const {tf} * __restrict__", "Filter"), (f"const {tb} * __restrict__", "Bias"),
            (f"{to} * __restrict__", "Out"), ("int", "OutSize"), ("int", "Norm"),
            ("int", "NormBias"), ("int", "LB"), ("int", "UB"))
    if flt:
        body = """\
        float Acc = Bias[o];
        for (int i = 0; i < InSize; i++) Acc = Acc + In[i] * Filter[o * InSize + i];
        Out[o] = LB >= 0 && !(Acc > 0.0f) ? 0.0f : Acc;"""
        unused = "    (void)Norm;\n    (void)NormBias;\n    (void)UB;\n"
    else:
        b = C_ALIGN.format(b="Bias[o]")
        body = f"""\
        long long Acc = {b};
        for (int i = 0; i < InSize; i++) Acc += (long long)In[i] * Filter[o * InSize + i];
        Acc = (int)(unsigned int)Acc;  /* a 32-bit accumulator */
        Acc = Norm > 0 ? (Acc + (1LL << (Norm - 1))) >> Norm : Acc;
        Out[o] = ({to})(Acc < LB ? LB : Acc > UB ? UB : Acc);"""
        unused = ""
    src = f"""\
void {name}({', '.join(f'{t} {n}' for t, n in args)})
{{
    /* Out[o] = Bias[o] + sum over i of In[i] * Filter[o][i], normalised and clipped. The
       outputs are shared among the cores. */
{unused}    int Rows = OutSize;
{share_rows()}
    for (int o = First; o < Last; o++) {{
{body}
    }}
}}"""

    def reference(In, InSize, Filter, Bias, Out, OutSize, Norm, NormBias, LB, UB, *, core_id,
                  core_count):
        if core_id or OutSize <= 0:
            return
        f = Filter[:OutSize * InSize].reshape(OutSize, InSize)
        if flt:
            terms = np.concatenate([Bias[:OutSize, None], In[None, :InSize] * f], axis=1)
            acc = np.cumsum(terms, axis=1, dtype=np.float32)[:, -1]  # in order, like C
            Out[:OutSize] = np.where((LB >= 0) & ~(acc > 0), np.float32(0), acc)
            return
        acc = align(Bias[:OutSize], NormBias) + f.astype(np.int64) @ In[:InSize].astype(np.int64)
        Out[:OutSize] = np.clip(at_norm(wrap32(acc), Norm), LB, UB)

    def cost(InSize, OutSize, **_):
        return Work("linear", math.ceil(InSize * OutSize / width), 4 * OutSize, chunks=OutSize)

    return BasicKernel(name, args, True, src, reference, cost)


# -- matrix products --------------------------------------------------------------------------

def _float_out_c(acc: str) -> str:
    """C: ``Out[j] = act(Alpha * acc[j] (+ Beta * C[j*CStep]))`` over this core's columns."""
    return f"""\
    for (int j = First; j < Last; j++) {{
        float V = Al * {acc}[j];
        if (HasC) V = V + Be * C[j * CStep];
        Out[j] = npk_act(V, Act, A0, A1);
    }}"""

def _columns_c(name: str, args, comment: str, body: str, helpers: bool = False,
               before: str = "") -> str:
    """A basic kernel's C whose ``body`` runs over columns ``First`` .. ``Last`` of ``Wn``,
    shared among the cores (``comment`` says what it computes; ``helpers``: with the layer
    kernels' helpers before it; ``before``: C the body calls)."""
    return f"""\
{HELPERS if helpers else ''}{chr(10) if helpers else ''}{before}{chr(10) if before else ''}\
void {name}({c_signature(args)})
{{
    /* {comment} */
    int Rows = Wn;
{share_rows()}
{body}
}}"""


@cache
def matmul(a_dt: str, b_dt: str, out_dt: str, width: int) -> BasicKernel:
    """One output row block: ``Out[j] = sum_k A[k] * B[k][j]`` for the ``Wn`` columns of the
    block (``B`` row pitch ``Wn``), k in order. float32: ``Alpha * acc`` (``+ Beta * C[j*CStep]``
    when ``HasC``) then the activation. Integers: ``C[j*CStep]`` (the int32 bias, when
    ``HasC``) plus ``sum (A - Za)(B - Zb)`` in a wrapping int32, requantised with
    ``Scale[j*ScaleStep]`` and ``Zout`` into ``[Lo, Hi]``."""
    flt = is_float(out_dt)
    name = f"KerMatMulNpk_{layer_suffix(a_dt, b_dt, out_dt)}"
    ta, tb, to = layer_c_type(a_dt), layer_c_type(b_dt), layer_c_type(out_dt)
    tc = "float" if flt else "int"
    args = [(f"const {ta} *__restrict__", "A"), ("int", "K"), (f"const {tb} *__restrict__", "B"),
            ("int", "Wn"), (f"const {tc} *__restrict__", "C"), ("int", "CStep"), ("int", "HasC"),
            (f"{to} *__restrict__", "Out")]
    if flt:
        args += [("int", "Alpha"), ("int", "Beta"), ("int", "Act"), ("int", "P0"), ("int", "P1")]
        body = f"""\
    float Al = npk_f32(Alpha), Be = npk_f32(Beta), A0 = npk_f32(P0), A1 = npk_f32(P1);
    for (int j = First; j < Last; j++) Out[j] = 0.0f;
    for (int k = 0; k < K; k++) {{
        float Ak = A[k];
        const float *Bk = B + k * Wn;
        for (int j = First; j < Last; j++) Out[j] = Out[j] + Ak * Bk[j];
    }}
{_float_out_c("Out")}"""
    else:
        args += [("int", "Za"), ("int", "Zb"), ("const float *__restrict__", "Scale"),
                 ("int", "ScaleStep"), ("int", "Zout"), ("int", "Lo"), ("int", "Hi")]
        vectors, hand = matmul_vectors(name, ta, tb, to)
        body = f"""\
{hand}
    for (int j0 = Done; j0 < Last; j0 += 64) {{
        int Acc[64], J1 = j0 + 64 < Last ? j0 + 64 : Last;
        for (int j = j0; j < J1; j++) Acc[j - j0] = HasC ? C[j * CStep] : 0;
        for (int k = 0; k < K; k++) {{
            int Ak = (int)A[k] - Za;
            const {tb} *Bk = B + k * Wn;
            for (int j = j0; j < J1; j++)
                Acc[j - j0] = (int)((unsigned int)Acc[j - j0] +
                                    (unsigned int)(Ak * ((int)Bk[j] - Zb)));  /* wraps */
        }}
        for (int j = j0; j < J1; j++)
            Out[j] = ({to})npk_requant(Acc[j - j0], Scale[j * ScaleStep], Zout, Lo, Hi);
    }}"""
    args = tuple(args)
    src = _columns_c(name, args, "Out[j] = A . B[:, j] for the Wn columns of the block (see the "
                     "module's matmul()); the\n       columns are shared among the cores.", body,
                     helpers=True, before="" if flt else vectors)

    def reference(A, K, B, Wn, C, CStep, HasC, Out, *rest, core_id, core_count):
        if core_id or Wn <= 0:
            return
        b = B[:K * Wn].reshape(K, Wn)
        cols = np.arange(Wn)
        if flt:
            alpha, beta, act, p0, p1 = rest
            acc = np.zeros(Wn, np.float32)
            for k in range(K):
                acc = acc + A[k] * b[k]
            v = bits_f32(alpha) * acc
            if HasC:
                v = v + bits_f32(beta) * C[cols * CStep]
            Out[:Wn] = activate(v, act, p0, p1)
            return
        za, zb, scale, sstep, zout, lo, hi = rest
        acc = C[cols * CStep].astype(np.int64) if HasC else np.zeros(Wn, np.int64)
        acc = acc + (A[:K].astype(np.int64) - za) @ (b.astype(np.int64) - zb)
        Out[:Wn] = requant(wrap32(acc), scale[cols * sstep], zout, lo, hi)

    return BasicKernel(name, args, True, src, reference,
                       lambda K, Wn, **_: Work("linear", math.ceil(K * Wn / width), 4 * Wn))


# -- matrix products with the reduction dimension in tiles -----------------------------------
# A product whose rows of K do not fit L1 walks K in tiles: ``matmul_acc_start`` fills an
# L1 accumulator before the first K tile, ``matmul_acc`` adds each tile's products to it,
# ``matmul_acc_out`` scales, adds C, activates (float32) or requantises (integers) after the
# last one. Each column's sum runs over k in ascending order in one float32 accumulator,
# exactly as ``matmul`` does, so the results do not depend on the K tile. B arrives
# transposed: a tile holds ``Wn`` rows (output columns) of ``K`` values.

@cache
def matmul_acc_start(acc_dt: str) -> BasicKernel:
    """``Acc[j] = C[j*CStep]`` when ``HasC``, else 0, for the ``Wn`` columns of the block."""
    name = f"KerMatMulAccStartNpk_{layer_suffix(acc_dt)}"
    t = layer_c_type(acc_dt)
    args = ((f"{t} *__restrict__", "Acc"), ("int", "Wn"), (f"const {t} *__restrict__", "C"),
            ("int", "CStep"), ("int", "HasC"))
    src = _columns_c(name, args, "The accumulator of a K-tiled product before its first K "
                     "tile; the columns are shared\n       among the cores.",
                     "    for (int j = First; j < Last; j++) Acc[j] = HasC ? C[j * CStep] : 0;")

    def reference(Acc, Wn, C, CStep, HasC, *, core_id, core_count):
        if core_id or Wn <= 0:
            return
        Acc[:Wn] = C[np.arange(Wn) * CStep] if HasC else 0

    return BasicKernel(name, args, True, src, reference,
                       lambda Wn, **_: Work("conv_out", Wn))


@cache
def matmul_acc(a_dt: str, b_dt: str, acc_dt: str, width: int) -> BasicKernel:
    """``Acc[j] += sum_k A[k] * Bt[j][k]`` over the ``K`` values of one K tile (``Bt`` row
    pitch ``K``), k ascending; integers ``(A[k] - Za) * (Bt[j][k] - Zb)`` in a wrapping
    int32."""
    flt = is_float(acc_dt)
    name = f"KerMatMulAccNpk_{layer_suffix(a_dt, b_dt, acc_dt)}"
    ta, tb, tc = layer_c_type(a_dt), layer_c_type(b_dt), layer_c_type(acc_dt)
    args = [(f"const {ta} *__restrict__", "A"), ("int", "K"), (f"const {tb} *__restrict__", "Bt"),
            ("int", "Wn"), (f"{tc} *__restrict__", "Acc")]
    if flt:
        step = "S = S + A[k] * Bj[k];"
    else:
        args += [("int", "Za"), ("int", "Zb")]
        step = ("S = (int)((unsigned int)S + (unsigned int)(((int)A[k] - Za) * "
                "((int)Bj[k] - Zb)));  /* wraps */")
    args = tuple(args)
    src = _columns_c(name, args, "One K tile of a K-tiled product added to the accumulator of "
                     "each of the Wn columns;\n       the columns are shared among the cores.",
                     f"""\
    for (int j = First; j < Last; j++) {{
        const {tb} *Bj = Bt + j * K;
        {tc} S = Acc[j];
        for (int k = 0; k < K; k++) {step}
        Acc[j] = S;
    }}""")

    def reference(A, K, Bt, Wn, Acc, *zps, core_id, core_count):
        if core_id or Wn <= 0 or K <= 0:
            return
        b = Bt[:Wn * K].reshape(Wn, K)
        if flt:  # float32 products, then a sum in order (numpy's accumulate is sequential)
            terms = np.concatenate([Acc[:Wn, None], A[None, :K] * b], axis=1)
            Acc[:Wn] = np.add.accumulate(terms, axis=1, dtype=np.float32)[:, -1]
            return
        za, zb = zps
        s = (b.astype(np.int64) - zb) @ (A[:K].astype(np.int64) - za)
        Acc[:Wn] = wrap32(Acc[:Wn].astype(np.int64) + s)

    return BasicKernel(name, args, True, src, reference,
                       lambda K, Wn, **_: Work("linear", math.ceil(K * Wn / width), 4 * Wn))


@cache
def matmul_acc_out(acc_dt: str, out_dt: str) -> BasicKernel:
    """The last step of a K-tiled product, as ``matmul`` ends: float32 ``Out[j] =
    act(Alpha * Acc[j] (+ Beta * C[j*CStep]))``; integers ``Out[j] = requant(Acc[j],
    Scale[j*ScaleStep], Zout, Lo, Hi)``."""
    flt = is_float(out_dt)
    name = f"KerMatMulAccOutNpk_{layer_suffix(acc_dt, out_dt)}"
    ta, to = layer_c_type(acc_dt), layer_c_type(out_dt)
    args = [(f"const {ta} *__restrict__", "Acc"), ("int", "Wn"), (f"{to} *__restrict__", "Out")]
    if flt:
        args += [(f"const {ta} *__restrict__", "C"), ("int", "CStep"), ("int", "HasC"),
                 ("int", "Alpha"), ("int", "Beta"), ("int", "Act"), ("int", "P0"), ("int", "P1")]
        body = f"""\
    float Al = npk_f32(Alpha), Be = npk_f32(Beta), A0 = npk_f32(P0), A1 = npk_f32(P1);
{_float_out_c("Acc")}"""
    else:
        args += [("const float *__restrict__", "Scale"), ("int", "ScaleStep"), ("int", "Zout"),
                 ("int", "Lo"), ("int", "Hi")]
        body = f"""\
    for (int j = First; j < Last; j++)
        Out[j] = ({to})npk_requant(Acc[j], Scale[j * ScaleStep], Zout, Lo, Hi);"""
    args = tuple(args)
    src = _columns_c(name, args, "The accumulators of a K-tiled product after its last K tile, "
                     "into the output; the\n       columns are shared among the cores.", body,
                     helpers=True)

    def reference(Acc, Wn, Out, *rest, core_id, core_count):
        if core_id or Wn <= 0:
            return
        cols = np.arange(Wn)
        if flt:
            c, cstep, has_c, alpha, beta, act, p0, p1 = rest
            v = bits_f32(alpha) * Acc[:Wn]
            if has_c:
                v = v + bits_f32(beta) * c[cols * cstep]
            Out[:Wn] = activate(v, act, p0, p1)
            return
        scale, sstep, zout, lo, hi = rest
        Out[:Wn] = requant(Acc[:Wn], scale[cols * sstep], zout, lo, hi)

    return BasicKernel(name, args, True, src, reference,
                       lambda Wn, **_: Work("conv_out", 0, 4 * Wn))
