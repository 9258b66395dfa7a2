"""Elementwise basic kernels of the layer kernels, each C template next to its numpy
reference: activations, quantize/dequantize (``unary``), 256-entry tables (``lut``) and
broadcasting binary operations (``binary``). Arithmetic: see ``common``.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from ...costs import Work
from ...dtypes import int_range, is_float
from .common import (
    HELPERS,
    BasicKernel,
    activate,
    bits_f32,
    c_signature,
    c_unused,
    fma_f32,
    layer_c_type,
    layer_suffix,
    quantize,
    requant,
    rne,
    share_rows,
)
from .qadd_rows import qadd_rows

# Unary operations beyond the activations.
UN_QUANT, UN_DEQUANT = 6, 7
# Binary operations.
BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV, BIN_QADD, BIN_QMUL = range(6)


# -- elementwise ------------------------------------------------------------------------------

@cache
def unary(in_dt: str, out_dt: str, width: int) -> BasicKernel:
    """``Out[i] = f(In[i])`` for ``N`` values. float32 -> float32: the activations ``ACT_*``
    (parameters ``P0``, ``P1`` as bits). float32 -> integer (``UN_QUANT``): ONNX Runtime's
    QuantizeLinear with scale ``P0`` (bits) and zero point ``P1``. Integer -> float32
    (``UN_DEQUANT``): ``(float)(In - P1) * P0``. Integer -> integer: ``clamp(In, P0, P1)``
    (ReLU and Clip on quantized data)."""
    fi, fo = is_float(in_dt), is_float(out_dt)
    name = f"KerUnaryNpk_{layer_suffix(in_dt, out_dt)}"
    ti, to = layer_c_type(in_dt), layer_c_type(out_dt)
    args = ((f"const {ti} *__restrict__", "In"), ("int", "W"), ("int", "H"),
            (f"{to} *__restrict__", "Out"), ("int", "Op"), ("int", "P0"), ("int", "P1"))
    if fi and fo:
        body = ("    float A0 = npk_f32(P0), A1 = npk_f32(P1);\n"
                "    for (int i = First; i < Last; i++) Out[i] = npk_act(In[i], Op, A0, A1);")
    elif fi:
        lo, hi = int_range(out_dt)
        body = (f"    float Sc = npk_f32(P0), Lf = (float)({lo} - P1), Hf = (float)({hi} - P1);\n"
                f"    (void)Op;\n"
                f"    for (int i = First; i < Last; i++) {{\n"
                f"        float V = In[i] / Sc;\n"
                f"        V = V < Lf ? Lf : V > Hf ? Hf : V;\n"
                f"        Out[i] = ({to})((int)npk_rne(V) + P1);\n"
                f"    }}")
    elif fo:
        body = ("    float Sc = npk_f32(P0);\n    (void)Op;\n"
                "    for (int i = First; i < Last; i++) Out[i] = (float)((int)In[i] - P1) * Sc;")
    else:
        body = ("    (void)Op;\n"
                f"    for (int i = First; i < Last; i++) Out[i] = ({to})(In[i] < P0 ? P0 : "
                f"In[i] > P1 ? P1 : In[i]);")
    src = f"""\
{HELPERS}
void {name}({c_signature(args)})
{{
    /* Out[i] = f(In[i]) for the W*H values (see the module's unary()); they are shared among
       the cores. */
    int Rows = W * H;
{share_rows()}
{body}
}}"""

    def reference(In, W, H, Out, Op, P0, P1, *, core_id, core_count):
        N = W * H
        if core_id or N <= 0:
            return
        x = In[:N]
        if fi and fo:
            Out[:N] = activate(x, Op, P0, P1)
        elif fi:
            Out[:N] = quantize(x, bits_f32(P0), P1, *int_range(out_dt))
        elif fo:
            Out[:N] = (x.astype(np.int64) - P1).astype(np.float32) * bits_f32(P0)
        else:
            Out[:N] = np.clip(x.astype(np.int64), P0, P1)

    return BasicKernel(name, args, True, src, reference,
                       lambda W, H, **_: Work(
                           "elementwise", math.ceil(W * H / width) * (20 if fi and fo else 2)))


@cache
def lut(in_dt: str, out_dt: str) -> BasicKernel:
    """``Out[i] = Table[In[i] + Offset]``: a 256-entry table of an 8-bit function (ONNX
    Runtime's QLinearLookupBase and QLinearConcat build the same tables), read as
    ``npukit.lut.parallel_lookup``."""
    name = f"KerLutNpk_{layer_suffix(in_dt, out_dt)}"
    ti, to = layer_c_type(in_dt), layer_c_type(out_dt)
    args = ((f"const {ti} *__restrict__", "In"), ("int", "W"), ("int", "H"),
            (f"const {to} *__restrict__", "Table"), (f"{to} *__restrict__", "Out"),
            ("int", "Offset"))
    src = f"""\
void {name}({c_signature(args)})
{{
    /* Out[i] = Table[In[i] + Offset] for the W*H values; they are shared among the cores. */
    int Rows = W * H;
{share_rows()}
    for (int i = First; i < Last; i++) Out[i] = Table[In[i] + Offset];
}}"""

    def reference(In, W, H, Table, Out, Offset, *, core_id, core_count):
        from ...lut import Lut, parallel_lookup
        N = W * H
        if core_id or N <= 0:
            return
        signed = np.dtype(in_dt).kind == "i"
        Out[:N] = parallel_lookup(Lut(np.asarray(Table[:256])), In[:N], 0,
                                  Offset if signed else 0)

    return BasicKernel(name, args, True, src, reference,
                       lambda W, H, **_: Work("elementwise", W * H))


# The float operations of ``binary`` (BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV) and the activations
# of ``npk_act`` whose row loops ``_float_rows`` writes out (none, ReLU, leaky ReLU, clip: the
# ones a compiler vectorises; sigmoid and tanh take the plain loop).
FLOAT_OPS = 4
ROW_ACTS = 4


def _float_rows(name: str) -> str:
    """C of ``{name}_Op(X, Y, Op)`` (the float operation) and of ``int {name}_Row(A, B, Out,
    N, BCol, Op, Act, A0, A1)``: ``Out[c] = npk_act(op(A[c], B[c * BCol]), Act, A0, A1)``
    for c < N, with B along the row (BCol 1) or one value (BCol 0); returns N. One loop per
    operation, activation and B's stride, constants there, so that the compiler vectorises
    them (the plain loop, its switches inside, ran 5x ONNX Runtime's time on a residual
    Add + ReLU); the same functions, the same values."""
    cases = "\n".join(
        f"    case {(op * ROW_ACTS + act) * 2 + bcast}: for (int c = 0; c < N; c++) Out[c] = "
        f"npk_act({name}_Op(A[c], B[{'0' if bcast else 'c'}], {op}), {act}, A0, A1); break;"
        for op in range(FLOAT_OPS) for act in range(ROW_ACTS) for bcast in (0, 1))
    return f"""
static inline float {name}_Op(float X, float Y, int Op)
{{
    switch (Op) {{
    case 0: return X + Y;
    case 1: return X - Y;
    case 2: return X * Y;
    default: return X / Y;
    }}
}}
static int {name}_Row(const float *__restrict__ A, const float *__restrict__ B,
                      float *__restrict__ Out, int N, int BCol, int Op, int Act, float A0,
                      float A1)
{{
    if (Op < 0 || Op >= {FLOAT_OPS} || Act < 0 || Act >= {ROW_ACTS})
        return 0;  /* the plain loop */
    switch ((Op * {ROW_ACTS} + Act) * 2 + (BCol == 0)) {{
{cases}
    }}
    return N;
}}"""


_Q_ARGS = "Ra, Rb, F, Za, Zb, Zout, Lo, Hi"


def _int_rows(name: str, ta: str, tb: str, to: str) -> str:
    """C of ``{name}_Q(X, Y, Op, AFirst, ...)`` (one integer output of ``binary``) and of
    ``int {name}_Row(A, B, Out, N, BCol, Op, ...)``: ``Out[c] = {name}_Q(A[c], B[c * BCol],
    Op, 0, ...)`` for c < N (A along the row: ``AFirst`` is 0); returns N. One loop per
    operation (QLinearAdd, QLinearMul) and B's stride, constants there, so that the compiler
    vectorises them (the plain loop, its branches inside, ran 15x ONNX Runtime's time on a
    QDQ Add); the same function, the same values."""
    cases = "\n".join(
        f"    case {k}: for (int c = 0; c < N; c++) Out[c] = {name}_Q(A[c], "
        f"B[{'0' if k % 2 else 'c'}], {4 if k >= 2 else 0}, 0, {_Q_ARGS}); break;"
        for k in range(4))
    vectors, hand = qadd_rows(name, ta, tb, to)
    return f"""{vectors}
static inline {to} {name}_Q(int X, int Y, int Op, int AFirst, float Ra, float Rb, float F,
                            int Za, int Zb, int Zout, int Lo, int Hi)
{{
    int Q;
    if (Op == 4) {{
        float V = AFirst ? npk_fmaf((float)Y, Rb, npk_fmaf((float)X, Ra, F))
                         : npk_fmaf((float)X, Ra, npk_fmaf((float)Y, Rb, F));
        V = npk_rne(V);
        V = V < -1e9f ? -1e9f : V > 1e9f ? 1e9f : V;
        Q = (int)V;
    }} else {{
        Q = npk_requant((X - Za) * (Y - Zb), Ra, Zout, Lo, Hi);
    }}
    return ({to})(Q < Lo ? Lo : Q > Hi ? Hi : Q);
}}
static int {name}_Row(const {ta} *__restrict__ A, const {tb} *__restrict__ B,
                      {to} *__restrict__ Out, int N, int BCol, int Op, float Ra, float Rb,
                      float F, int Za, int Zb, int Zout, int Lo, int Hi)
{{
{hand}    switch ((Op == 4) * 2 + (BCol == 0)) {{
{cases}
    }}
    return N;
}}"""


@cache
def binary(a_dt: str, b_dt: str, out_dt: str, width: int) -> BasicKernel:
    """``Out[r][c] = op(A[r*ARow + c*ACol], B[r*BRow + c*BCol])`` over ``Rows`` x ``Cols``
    (a stride 0 broadcasts). float32: ``BIN_ADD``, ``BIN_SUB``, ``BIN_MUL``, ``BIN_DIV`` then
    the activation ``Act`` (``P0``, ``P1``). Integers, ONNX Runtime's QLinearAdd (its AVX2
    kernel, ``qladd_avx2.cpp``: ``fma(a, rA, fma(b, rB, F))`` with ``rA``, ``rB``, ``F`` in
    ``P0``..``P2``, each fma rounded once; ``fma(b, rB, fma(a, rA, F))`` where ``A`` is
    broadcast along a row, ``ACol == 0 != BCol``, as its scalar-A path folds ``a`` into
    ``F`` first) or QLinearMul (``requant((a - Za)*(b - Zb), P0, Zout)``), clamped to
    ``[Lo, Hi]``."""
    flt = is_float(out_dt)
    name = f"KerBinaryNpk_{layer_suffix(a_dt, b_dt, out_dt)}"
    ta, tb, to = layer_c_type(a_dt), layer_c_type(b_dt), layer_c_type(out_dt)
    args = ((f"const {ta} *__restrict__", "A"), (f"const {tb} *__restrict__", "B"),
            (f"{to} *__restrict__", "Out"), ("int", "Rows"), ("int", "Cols"), ("int", "ARow"),
            ("int", "ACol"), ("int", "BRow"), ("int", "BCol"), ("int", "Op"), ("int", "Act"),
            ("int", "P0"), ("int", "P1"), ("int", "P2"), ("int", "Za"), ("int", "Zb"),
            ("int", "Zout"), ("int", "Lo"), ("int", "Hi"))
    rows, first = "", ""
    if flt:
        pre = ("    float A0 = npk_f32(P0), A1 = npk_f32(P1);\n"
               + c_unused("P2", "Za", "Zb", "Zout", "Lo", "Hi"))
        loop = """\
            float X = A[r * ARow + c * ACol], Y = B[r * BRow + c * BCol];
            Out[r * Cols + c] = npk_act(NAME_Op(X, Y, Op), Act, A0, A1);""".replace("NAME", name)
        rows = _float_rows(name)
        first = (f"        int c = 0;\n        if (ACol == 1 && (BCol == 1 || BCol == 0))\n"
                 f"            c = {name}_Row(A + r * ARow, B + r * BRow, Out + r * Cols, Cols, "
                 f"BCol, Op, Act, A0, A1);\n        for (; c < Cols; c++) {{")
    else:
        pre = ("    float Ra = npk_f32(P0), Rb = npk_f32(P1), F = npk_f32(P2);\n"
               "    int AFirst = ACol == 0 && BCol != 0;\n"
               + c_unused("Act"))
        loop = (f"            Out[r * Cols + c] = {name}_Q(A[r * ARow + c * ACol], "
                f"B[r * BRow + c * BCol], Op, AFirst, {_Q_ARGS});")
        rows = _int_rows(name, ta, tb, to)
        first = (f"        int c = 0;\n        if (ACol == 1 && (BCol == 1 || BCol == 0))\n"
                 f"            c = {name}_Row(A + r * ARow, B + r * BRow, Out + r * Cols, Cols, "
                 f"BCol, Op, {_Q_ARGS});\n        for (; c < Cols; c++) {{")
    src = f"""\
{HELPERS}{rows}
void {name}({c_signature(args)})
{{
    /* Out[r][c] = op(A[r*ARow + c*ACol], B[r*BRow + c*BCol]) (see the module's binary());
       rows are shared among the cores. */
{pre}{share_rows()}
    for (int r = First; r < Last; r++) {{
{first or "        for (int c = 0; c < Cols; c++) {"}
{loop}
        }}
    }}
}}"""

    def reference(A, B, Out, Rows, Cols, ARow, ACol, BRow, BCol, Op, Act, P0, P1, P2, Za, Zb,
                  Zout, Lo, Hi, *, core_id, core_count):
        if core_id or Rows <= 0:
            return
        r, c = np.arange(Rows)[:, None], np.arange(Cols)[None, :]
        x, y = A[r * ARow + c * ACol], B[r * BRow + c * BCol]
        out = Out[:Rows * Cols].reshape(Rows, Cols)
        if flt:
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                v = {BIN_ADD: np.add, BIN_SUB: np.subtract, BIN_MUL: np.multiply,
                     BIN_DIV: np.divide}[Op](x, y)
            out[...] = activate(v.astype(np.float32), Act, P0, P1)
            return
        x, y = x.astype(np.int64), y.astype(np.int64)
        if Op == BIN_QADD:
            fx, fy = x.astype(np.float32), y.astype(np.float32)
            ra, rb, fixed = bits_f32(P0), bits_f32(P1), bits_f32(P2)
            if ACol == 0 and BCol != 0:
                v = rne(fma_f32(fy, rb, fma_f32(fx, ra, fixed)))
            else:
                v = rne(fma_f32(fx, ra, fma_f32(fy, rb, fixed)))
            q = np.clip(v, np.float32(-1e9), np.float32(1e9)).astype(np.int64)
        else:
            q = requant((x - Za) * (y - Zb), bits_f32(P0), Zout, Lo, Hi)
        out[...] = np.clip(q, Lo, Hi)

    return BasicKernel(name, args, True, src, reference,
                       lambda Rows, Cols, **_: Work(
                           "elementwise", math.ceil(Rows * Cols / width) * 2, Rows, chunks=Rows))
