"""C sources of the TPP primitives, generated per primitive and variant.

The TPP tensor compiler JIT-generates machine code per primitive and shape; npukit generates
C per primitive and variant, and the C back end compiles it (cached on disk) inside the
translation unit of each operation, where the operation's constant shapes and leading
dimensions reach it as call arguments the compiler can propagate. Every function works on
column-major blocks as the TPP text does: element ``(i, j)`` of an ``m x n`` block with
leading dimension ``ld`` is ``p[i + j * ld]``.

- unary ``f``: ``B = f(A)``, or ``B = f(A)^T`` for the transposed variant (``trans_b``),
  in 16 x 16 tiles so that both sides stream;
- binary ``op``: ``C = op(A, B)``;
- gemm / brgemm: ``C += sum_r A_r B_r`` over ``br`` pairs ``A_r = a + r * br_stride_a``,
  ``B_r = b + r * br_stride_b``, by packing blocks of A and B into contiguous panels and
  running a register-blocked micro-kernel on them (BLIS-style loops: ``NC`` columns of C,
  ``KC`` steps of k, ``MC`` rows of C, then ``MR x NR`` register tiles). The micro-kernel
  is written for AVX-512 (32 x 12 tile), AVX2 with FMA (16 x 6) and, anywhere else, gcc
  vector extensions without FMA (8 x 4); the preprocessor picks one from the flags.

Every float operation rounds once as written (``-ffp-contract=off``) except the
micro-kernels' explicit fused multiply-adds.

>>> "tpp_relu" in unary_source("relu", False)
True
"""

from __future__ import annotations

import numpy as np

from ..c.ctype import TYPEDEFS, literal
from ..dtypes import FACTS
from ..lut.sigmoid import SIGMOID_TABLE, TAYLOR_CONSTANTS
from .formulas import LIBXSMM_BINARY, LIBXSMM_REDUCE, LIBXSMM_UNARY

F32 = np.dtype("float32")

# One line of C per unary operation on the float ``x``; the interpolated sigmoid needs a
# few statements and its table (see _interp_sigmoid).
UNARY_EXPR = {
    "zero": "0.0f",
    "identity": "x",
    "relu": "(x > 0.0f || x != x) ? x : 0.0f",  # max(x, 0) as numpy's maximum: NaN kept
    "square": "x * x",
    "reciprocal": "1.0f / x",  # IEEE: 1/0 = inf, 1/-0 = -inf
    "increment": "x + 1.0f",
    "decrement": "x - 1.0f",
    "fast_sigmoid": "0.5f * (x / (1.0f + fabsf(x)) + 1.0f)",
} | {name: f.c("x") for name, f in LIBXSMM_UNARY.items()}  # in double, rounded once
UNARY_DOC = {
    "zero": "B = 0",
    "identity": "B = A",
    "relu": "B = max(A, 0), NaN kept",
    "square": "B = A * A",
    "reciprocal": "B = 1 / A, IEEE division (1/0 = inf, 1/-0 = -inf, 1/nan = nan)",
    "increment": "B = A + 1",
    "decrement": "B = A - 1",
    "fast_sigmoid": "B = 0.5 (A / (1 + |A|) + 1)",
    "taylor_sigmoid": "B = 0.5 + 0.25 A - 0.020833 A^3 + 0.002083 A^5",
    "interp_sigmoid": "B = the 33-entry sigmoid table over [-8, 8], linearly interpolated",
} | {name: f.doc for name, f in LIBXSMM_UNARY.items()}
BINARY_EXPR = {
    "add": "x + y",
    "sub": "x - y",
    "mul": "x * y",
    "div": "x / y",  # IEEE: x/0 = +-inf, 0/0 = nan
    "min": "(x < y || x != x) ? x : y",  # numpy's minimum: a NaN in either gives NaN
    "max": "(x > y || x != x) ? x : y",
} | {name: f.c("x", "y") for name, f in LIBXSMM_BINARY.items()}

# Includes a primitive needs, outside any visibility pragma of the translation unit (a
# declaration made under "visibility push(hidden)" would bind malloc to a hidden symbol).
_INCLUDES = """\
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif
{includes}
#if defined(__GNUC__)
#pragma GCC visibility pop
#endif"""


def c_name(name: str, trans: bool = False) -> str:
    """The C function of a unary or binary primitive: ``tpp_relu``, ``tpp_relu_trans``."""
    return f"tpp_{name}" + ("_trans" if trans else "")


def _includes(*headers: str) -> str:
    return _INCLUDES.format(includes="\n".join(f"#include <{h}>" for h in headers))


def _op_function(name: str) -> str:
    """``static inline float tpp_<name>_op(float x)``: the operation on one element."""
    head = f"static inline float tpp_{name}_op(float x)"
    if name == "taylor_sigmoid":
        c0, c1, c3, c5 = (literal(float(v), F32) for v in TAYLOR_CONSTANTS)
        return f"""{head}
{{
    /* The 5th Taylor polynomial with the TPP text's rounded constants, summed in the
       kernel's order: (0.5 + 0.25 x) + (-0.020833 x^3) + 0.002083 x^5. */
    const float x2 = x * x, x3 = x2 * x, x5 = x3 * x2;
    return (({c0} + {c1} * x) + {c3} * x3) + {c5} * x5;
}}"""
    if name == "interp_sigmoid":
        return _interp_sigmoid(head)
    body = f"    (void)x;\n    return {UNARY_EXPR[name]};" if name == "zero" else \
        f"    return {UNARY_EXPR[name]};"
    return f"{head}\n{{\n{body}\n}}"


def _interp_sigmoid(head: str) -> str:
    values = [literal(float(v), F32) for v in SIGMOID_TABLE]
    rows = ",\n".join("    " + ", ".join(values[k:k + 7]) for k in range(0, len(values), 7))
    return f"""/* The TPP text's sig_table[33]: sigmoid at -8.0, -7.5, ..., 8.0 (npukit.lut). */
static const float tpp_interp_sigmoid_table[33] = {{
{rows}
}};

{head}
{{
    /* Steps 1-7 of the TPP text: clamp to [-8, 8], index i = min(2 (x + 8), 31), then
       T[floor(i)] + (i - floor(i)) (T[floor(i) + 1] - T[floor(i)]). A NaN input gives NaN
       (its index is clamped to 31 first, so the table is never read out of range). */
    const float xc = x < -8.0f ? -8.0f : (x > 8.0f ? 8.0f : x);
    float i = (xc + 8.0f) * 2.0f;
    i = i < 31.0f ? i : 31.0f;
    const float whole = floorf(i);
    const float frac = i - whole;
    const int k = (int)whole;
    const float lo = tpp_interp_sigmoid_table[k], hi = tpp_interp_sigmoid_table[k + 1];
    const float v = lo + frac * (hi - lo);
    return x == x ? v : x;
}}"""


_INTERP_V16 = """\
#if defined(__AVX512F__)
/* 16 elements at once, bit for bit the steps above: the table sits in registers and is
   read by permutation (T[k] from entries 0..31, T[k + 1] from entries 1..32). For every
   number the min/max clamps give the scalar clamps' index; a NaN is put back at the end. */
static inline void tpp_interp_sigmoid_v16(const float *x, float *y)
{
    const float *t = tpp_interp_sigmoid_table;
    const __m512 v = _mm512_loadu_ps(x);
    const __m512 xc = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-8.0f)),
                                    _mm512_set1_ps(8.0f));
    const __m512 i = _mm512_min_ps(_mm512_mul_ps(_mm512_add_ps(xc, _mm512_set1_ps(8.0f)),
                                                 _mm512_set1_ps(2.0f)), _mm512_set1_ps(31.0f));
    const __m512 whole = _mm512_roundscale_ps(i, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m512 frac = _mm512_sub_ps(i, whole);
    const __m512i k = _mm512_cvttps_epi32(whole);
    const __m512 lo = _mm512_permutex2var_ps(_mm512_loadu_ps(t), k, _mm512_loadu_ps(t + 16));
    const __m512 hi = _mm512_permutex2var_ps(_mm512_loadu_ps(t + 1), k,
                                             _mm512_loadu_ps(t + 17));
    const __m512 val = _mm512_add_ps(lo, _mm512_mul_ps(frac, _mm512_sub_ps(hi, lo)));
    _mm512_storeu_ps(y, _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), val, v));
}
#endif"""

# Loops of the primitives use 512-bit vectors where the CPU has them: gcc's tuning for
# recent Intel CPUs prefers 256-bit ones, and divisions and memory-bound loops gain.
_WIDE = """\
#ifndef NPK_TPP_WIDE
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#define NPK_TPP_WIDE __attribute__((target("prefer-vector-width=512")))
#else
#define NPK_TPP_WIDE
#endif
#endif"""


def _row_function(name: str) -> str:
    """``tpp_<name>_row(x, y, m)``: y[i] = f(x[i]) for i < m, x == y allowed."""
    vector = ""
    if name == "interp_sigmoid":
        vector = """#if defined(__AVX512F__)
    for (; i + 16 <= m; i += 16)
        tpp_interp_sigmoid_v16(x + i, y + i);
#endif
"""
    return f"""/* y[i] = f(x[i]) for i < m; in place (x == y) through one pointer, so that the loop
   vectorises without an overlap check. */
static inline void tpp_{name}_row(const float *x, float *y, int64_t m)
{{
    int64_t i = 0;
{vector}    if (x == y) {{
        for (; i < m; i++)
            y[i] = tpp_{name}_op(y[i]);
        return;
    }}
    for (; i < m; i++)
        y[i] = tpp_{name}_op(x[i]);
}}"""


def unary_source(name: str, trans: bool) -> str:
    """C of unary primitive ``name``: ``void tpp_<name>[_trans](const float *a, float *b,
    int64_t m, int64_t n, int64_t lda, int64_t ldb)``."""
    fn = c_name(name, trans)
    head = (f"NPK_TPP_WIDE static void {fn}(const float *a, float *b, int64_t m, int64_t n,\n"
            f"{' ' * (26 + len(fn))}int64_t lda, int64_t ldb)")
    what = UNARY_DOC[name]
    if trans:
        body = f"""/* One block of the transposition, in tiles of 8 x 8: each row of B's tile is 8
   contiguous elements, one from each of 8 columns of A. */
static inline void tpp_{name}_trans_block(const float *a, float *b, int64_t m, int64_t n,
{' ' * (41 + len(name))}int64_t lda, int64_t ldb)
{{
    for (int64_t i0 = 0; i0 < m; i0 += 8) {{
        const int64_t ni = m - i0 < 8 ? m - i0 : 8;
        for (int64_t j0 = 0; j0 < n; j0 += 8) {{
            const int64_t nj = n - j0 < 8 ? n - j0 : 8;
            for (int64_t i = 0; i < ni; i++) {{
                for (int64_t j = 0; j < nj; j++)
                    b[j0 + j + (i0 + i) * ldb] = tpp_{name}_op(a[i0 + i + (j0 + j) * lda]);
            }}
        }}
    }}
}}

/* TPP unary primitive {name}, transposed: B (n x m, leading dimension ldb) =
   f(A)^T for A (m x n, leading dimension lda), f: {what}. In blocks of 128 x 128, whose
   lines stay in cache while they are read across and written along. */
{head}
{{
    for (int64_t j1 = 0; j1 < n; j1 += 128) {{
        const int64_t nj = n - j1 < 128 ? n - j1 : 128;
        for (int64_t i1 = 0; i1 < m; i1 += 128) {{
            const int64_t ni = m - i1 < 128 ? m - i1 : 128;
            tpp_{name}_trans_block(a + i1 + j1 * lda, b + j1 + i1 * ldb, ni, nj, lda, ldb);
        }}
    }}
}}"""
    else:
        body = f"""/* TPP unary primitive {name}: B = f(A) on an m x n block, A and B column-major
   with leading dimensions lda and ldb; f: {what}. */
{head}
{{
    for (int64_t j = 0; j < n; j++)
        tpp_{name}_row(a + j * lda, b + j * ldb, m);
}}"""
    libm = "sigmoid" in name or name in LIBXSMM_UNARY
    headers = ("stdint.h", "math.h") if libm else ("stdint.h",)
    parts = [_includes(*headers), _WIDE, _op_function(name)]
    if trans:
        return "\n\n".join(parts + [body])
    if name == "interp_sigmoid":
        parts += ["#if defined(__AVX512F__)\n" + _includes("immintrin.h") + "\n#endif",
                  _INTERP_V16]
    return "\n\n".join(parts + [_row_function(name), body])


def binary_source(name: str) -> str:
    """C of binary primitive ``name``: ``void tpp_<name>(const float *a, const float *b,
    float *c, int64_t m, int64_t n, int64_t lda, int64_t ldb, int64_t ldc)``."""
    fn = c_name(name)
    what = LIBXSMM_BINARY[name].doc if name in LIBXSMM_BINARY else \
        "C = " + BINARY_EXPR[name].replace("x", "A").replace("y", "B")
    return f"""{_includes("stdint.h")}

{_WIDE}

static inline float tpp_{name}_op(float x, float y)
{{
    return {BINARY_EXPR[name]};
}}

/* TPP binary primitive {name}: {what} elementwise on an m x n block; A, B, C
   column-major with leading dimensions lda, ldb, ldc (0 repeats one column). */
NPK_TPP_WIDE static void {fn}(const float *a, const float *b, float *c, int64_t m,
{" " * (26 + len(fn))}int64_t n, int64_t lda, int64_t ldb, int64_t ldc)
{{
    for (int64_t j = 0; j < n; j++) {{
        const float *x = a + j * lda, *y = b + j * ldb;
        float *z = c + j * ldc;
        for (int64_t i = 0; i < m; i++)
            z[i] = tpp_{name}_op(x[i], y[i]);
    }}
}}"""


def bias_source() -> str:
    """C of the bias load: ``void tpp_bias(const float *a, float *b, int64_t m, int64_t n,
    int64_t inca, int64_t lda, int64_t ldb)``, ``B(i, j) = A[i * inca + j * lda]`` (the
    ``identity`` operation; a stride of 0 broadcasts)."""
    return f"""{_includes("stdint.h")}

{_WIDE}

{_op_function("identity")}

/* TPP bias load (libxsmm's identity with a broadcast): B = A on an m x n block, B
   column-major with leading dimension ldb, A(i, j) at a[i * inca + j * lda]: inca = 0
   repeats one row (a value per column), lda = 0 one column (a value per row), both 0 one
   value. */
NPK_TPP_WIDE static void tpp_bias(const float *a, float *b, int64_t m, int64_t n,
                                  int64_t inca, int64_t lda, int64_t ldb)
{{
    for (int64_t j = 0; j < n; j++) {{
        const float *x = a + j * lda;
        float *y = b + j * ldb;
        for (int64_t i = 0; i < m; i++)
            y[i] = tpp_identity_op(x[i * inca]);
    }}
}}"""


def reduce_name(name: str, cols: bool) -> str:
    """The C function of a reduction: ``tpp_reduce_add_rows``, ``tpp_reduce_max_cols``."""
    return f"tpp_{name}_{'cols' if cols else 'rows'}"


def reduce_source(name: str, cols: bool) -> str:
    """C of reduction ``name`` (``npukit.tpp.formulas.LIBXSMM_REDUCE``) over the rows of a
    block (one result per column, libxsmm's REDUCE_ROWS) or over its columns (one per row,
    REDUCE_COLS): ``void tpp_<name>_<rows|cols>(const float *a, float *b, int64_t m,
    int64_t n, int64_t lda)``."""
    r, fn = LIBXSMM_REDUCE[name], reduce_name(name, cols)
    init, step = r.init.c("x"), r.step.c("acc", "x")
    head = f"NPK_TPP_WIDE static void {fn}(const float *a, float *b, int64_t m, int64_t n, " \
           f"int64_t lda)"
    if cols:
        body = f"""/* TPP reduction {name} over the columns ({r.libxsmm}, REDUCE_COLS): b[i] =
   the {r.doc} over row i of the m x n block A (leading dimension lda), folded from column
   0 to column n - 1; b holds m values. */
{head}
{{
    for (int64_t i = 0; i < m; i++) {{
        const float x = a[i];
        b[i] = {init};
    }}
    for (int64_t j = 1; j < n; j++) {{
        for (int64_t i = 0; i < m; i++) {{
            const float acc = b[i], x = a[i + j * lda];
            b[i] = {step};
        }}
    }}
}}"""
    else:
        body = f"""/* TPP reduction {name} over the rows ({r.libxsmm}, REDUCE_ROWS): b[j] = the
   {r.doc} over column j of the m x n block A (leading dimension lda), folded from row 0
   to row m - 1; b holds n values. */
{head}
{{
    for (int64_t j = 0; j < n; j++) {{
        const float *col = a + j * lda;
        float x = col[0];
        float acc = {init};
        for (int64_t i = 1; i < m; i++) {{
            x = col[i];
            acc = {step};
        }}
        b[j] = acc;
    }}
}}"""
    return "\n\n".join([_includes("stdint.h", "math.h"), _WIDE, body])


# -- GEMM ------------------------------------------------------------------------------------

# (#if condition, comment, vector type, lanes, vectors per column of the tile, NR, blocking
# MC, KC, NC, load, store, broadcast, fma, add, zero): the micro-kernel of each instruction
# set. The tile is (vectors x lanes) rows by NR columns of C, all in registers.
_ISAS = (
    ("defined(__AVX512F__)", "AVX-512: 16 floats per vector, a 32 x 12 tile in 24 registers",
     "__m512", 16, 2, 12, (256, 384, 3072),
     "_mm512_loadu_ps({p})", "_mm512_storeu_ps({p}, {v})", "_mm512_set1_ps({x})",
     "_mm512_fmadd_ps({a}, {b}, {c})", "_mm512_add_ps({a}, {b})", "_mm512_setzero_ps()"),
    ("defined(__AVX2__) && defined(__FMA__)",
     "AVX2 with FMA: 8 floats per vector, a 16 x 6 tile in 12 registers",
     "__m256", 8, 2, 6, (192, 256, 3072),
     "_mm256_loadu_ps({p})", "_mm256_storeu_ps({p}, {v})", "_mm256_set1_ps({x})",
     "_mm256_fmadd_ps({a}, {b}, {c})", "_mm256_add_ps({a}, {b})", "_mm256_setzero_ps()"),
    ("1", "anywhere else: gcc vector extensions of 4 floats, an 8 x 4 tile, no FMA",
     "npk_v4f", 4, 2, 4, (128, 256, 2048),
     "npk_v4f_load({p})", "npk_v4f_store({p}, {v})", "npk_v4f_set1({x})",
     "(({c}) + ({a}) * ({b}))", "(({a}) + ({b}))", "npk_v4f_set1(0.0f)"),
)

_GENERIC_VECTOR = """\
typedef float npk_v4f __attribute__((vector_size(16)));
static inline npk_v4f npk_v4f_load(const float *p)
{
    npk_v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void npk_v4f_store(float *p, npk_v4f v)
{
    memcpy(p, &v, sizeof v);
}
static inline npk_v4f npk_v4f_set1(float x)
{
    npk_v4f v = {x, x, x, x};
    return v;
}"""


def _micro_kernel(isa: tuple) -> str:
    """The micro-kernel of one instruction set, fully unrolled over its register tile."""
    (_, what, vt, lanes, mv, nr, blocking, load, store, bcast, fma, add, zero) = isa
    mr = mv * lanes
    acc = [[f"c{v}_{j}" for j in range(nr)] for v in range(mv)]
    lines = [f"#define NPK_MR {mr}", f"#define NPK_NR {nr}",
             f"#define NPK_MC {blocking[0]}", f"#define NPK_KC {blocking[1]}",
             f"#define NPK_NC {blocking[2]}"]
    if vt == "npk_v4f":
        lines.append(_GENERIC_VECTOR)
    lines += [
        f"/* C[mr x nr] += Ap Bp: Ap is {mr} x kc (column by column), Bp is kc x {nr} (row by",
        f"   row), both packed; the {mr} x {nr} sum stays in registers until the end. A partial",
        "   tile (mr < NPK_MR or nr < NPK_NR, at the edges of C) goes through a local tile. */",
        "static void npk_tpp_ukr(int64_t kc, const float *restrict ap, const float *restrict "
        "bp,",
        "                        float *restrict c, int64_t ldc, int64_t mr, int64_t nr)",
        "{"]
    lines.append(f"    const {vt} zero = {zero};")
    for v in range(mv):
        for j in range(0, nr, 6):
            lines.append(f"    {vt} " + ", ".join(f"{x} = zero" for x in acc[v][j:j + 6]) + ";")
    lines += ["    for (int64_t p = 0; p < kc; p++) {"]
    lines.append("        const " + vt + " " + ", ".join(
        f"a{v} = {load.format(p=f'ap + {v * lanes}')}" for v in range(mv)) + ";")
    for j in range(nr):
        lines.append(f"        const {vt} b{j} = {bcast.format(x=f'bp[{j}]')};")
        for v in range(mv):
            lines.append(f"        {acc[v][j]} = {fma.format(a=f'a{v}', b=f'b{j}', c=acc[v][j])};")
    lines += [f"        ap += {mr};", f"        bp += {nr};", "    }",
              f"    if (mr == {mr} && nr == {nr}) {{"]
    for j in range(nr):
        for v in range(mv):
            p = f"c + {j} * ldc + {v * lanes}".replace("c + 0 * ldc + ", "c + ") \
                .replace(" + 0", "")
            total = add.format(a=load.format(p=p), b=acc[v][j])
            lines.append(f"        {store.format(p=p, v=total)};")
    lines += ["        return;", "    }",
              f"    float t[{mr * nr}] NPK_TPP_ALIGNED;"]
    for j in range(nr):
        for v in range(mv):
            lines.append(f"    {store.format(p=f't + {j * mr + v * lanes}', v=acc[v][j])};")
    lines += ["    for (int64_t j = 0; j < nr; j++) {",
              "        for (int64_t i = 0; i < mr; i++)",
              f"            c[i + j * ldc] += t[i + j * {mr}];",
              "    }", "}"]
    return "\n".join(lines)


def _gemm_kernel_block() -> str:
    """The micro-kernel and blocking of every instruction set, defined once per translation
    unit (several GEMM primitives may share one)."""
    parts = ["/* ---- TPP GEMM micro-kernel and cache blocking, once per translation unit ----",
             "   NPK_MR x NPK_NR: the register tile; NPK_MC x NPK_KC: the packed block of A (kept",
             "   in L2), NPK_KC x NPK_NC: the packed block of B. */",
             "#ifndef NPK_TPP_GEMM_KERNEL", "#define NPK_TPP_GEMM_KERNEL",
             "#if defined(__GNUC__)", "#define NPK_TPP_ALIGNED __attribute__((aligned(64)))",
             "#else", "#define NPK_TPP_ALIGNED", "#endif"]
    for k, isa in enumerate(_ISAS):
        cond = isa[0]
        parts.append(("#if " if k == 0 else "#else" if cond == "1" else "#elif ") +
                     ("" if cond == "1" else cond))
        parts.append(f"/* {isa[1]}. */")
        parts.append(_micro_kernel(isa))
    parts += ["#endif", "#endif /* NPK_TPP_GEMM_KERNEL */"]
    return "\n".join(parts)


GEMM_DTYPES = ("float32", "bfloat16", "float16")
# How a gemm reads one element of A or B into float (its C type: ``npukit.dtypes.FACTS``).
_TO_FLOAT = {"float32": "{x}", "bfloat16": "tpp_bf16_to_f32({x})", "float16": "(float)({x})"}


def gemm_name(trans_a: bool, trans_b: bool, dtype: str, blocking=None, br: bool = False) -> str:
    """``tpp_gemm_nn_float32``, ``tpp_brgemm_tn_bfloat16``, ... (``_b<MC>_<KC>_<NC>`` with
    an explicit blocking)."""
    flags = ("t" if trans_a else "n") + ("t" if trans_b else "n")
    tail = "" if blocking is None else "_b" + "_".join(str(int(x)) for x in blocking)
    return f"tpp_{'brgemm' if br else 'gemm'}_{flags}_{dtype}{tail}"


# A C template over 120 lines: the packed, blocked GEMM of one variant reads top to bottom as
# the C it writes (pack A, pack B, micro-kernel, edges), so it stays one function.
def gemm_source(trans_a: bool, trans_b: bool, dtype: str = "float32", blocking=None) -> str:
    """C of the gemm and brgemm primitives of one variant (one text defines both):

    ``void tpp_brgemm_<v>(const T *a, const T *b, float *c, int64_t m, int64_t n, int64_t k,
    int64_t br, int64_t lda, int64_t ldb, int64_t ldc, int64_t br_stride_a,
    int64_t br_stride_b)`` and ``void tpp_gemm_<v>(a, b, c, m, n, k, lda, ldb, ldc)``.
    A is m x k (``trans_a``: stored as its k x m transpose), B is k x n (``trans_b``: stored
    n x k), C is m x n, all column-major; T is float, or bfloat16 / float16 read into
    float32 as they are packed. ``blocking`` = (MC, KC, NC) replaces the instruction set's.
    """
    elem, conv = FACTS[dtype].c_type, _TO_FLOAT[dtype]
    fn = gemm_name(trans_a, trans_b, dtype, blocking, br=True)
    gemm = gemm_name(trans_a, trans_b, dtype, blocking)
    a_at = "a[p + i * lda]" if trans_a else "a[i + p * lda]"
    a_block = "pc + ic * lda" if trans_a else "ic + pc * lda"  # where block (ic, pc) starts
    b_block = "jc + pc * ldb" if trans_b else "pc + jc * ldb"
    b_at = "b[j + p * ldb]" if trans_b else "b[p + j * ldb]"
    mc, kc, nc = ("NPK_MC", "NPK_KC", "NPK_NC") if blocking is None else \
        tuple(str(int(x)) for x in blocking)
    if blocking is not None:
        mc = f"(({mc} + NPK_MR - 1) / NPK_MR * NPK_MR)"
        nc = f"(({nc} + NPK_NR - 1) / NPK_NR * NPK_NR)"
    # Pack loops read the source contiguously: down columns of A unless it is transposed.
    if trans_a:
        pack_a = f"""        for (int64_t i = 0; i < mr; i++) {{
            for (int64_t p = 0; p < kc; p++)
                ap[p * NPK_MR + i] = {conv.format(x=a_at)};
        }}
        for (int64_t i = mr; i < NPK_MR; i++) {{
            for (int64_t p = 0; p < kc; p++)
                ap[p * NPK_MR + i] = 0.0f;
        }}"""
    else:
        pack_a = f"""        for (int64_t p = 0; p < kc; p++) {{
            for (int64_t i = 0; i < mr; i++)
                ap[p * NPK_MR + i] = {conv.format(x=a_at)};
            for (int64_t i = mr; i < NPK_MR; i++)
                ap[p * NPK_MR + i] = 0.0f;
        }}"""
    if trans_b:
        pack_b = f"""        for (int64_t p = 0; p < kc; p++) {{
            for (int64_t j = 0; j < nr; j++)
                bp[p * NPK_NR + j] = {conv.format(x=b_at)};
            for (int64_t j = nr; j < NPK_NR; j++)
                bp[p * NPK_NR + j] = 0.0f;
        }}"""
    else:
        pack_b = f"""        for (int64_t j = 0; j < nr; j++) {{
            for (int64_t p = 0; p < kc; p++)
                bp[p * NPK_NR + j] = {conv.format(x=b_at)};
        }}
        for (int64_t j = nr; j < NPK_NR; j++) {{
            for (int64_t p = 0; p < kc; p++)
                bp[p * NPK_NR + j] = 0.0f;
        }}"""
    bf16 = ""
    if dtype == "bfloat16":
        bf16 = """#ifndef NPK_TPP_BF16
#define NPK_TPP_BF16
/* bfloat16 -> float32: the 16 bits are the top half of the float32. */
static inline float tpp_bf16_to_f32(npk_bfloat16 h)
{
    union { uint32_t u; float f; } v;
    v.u = (uint32_t)h << 16;
    return v.f;
}
#endif
"""
    tr = ("A stored transposed (k x m)" if trans_a else "A column-major (m x k)") + ", " + \
        ("B stored transposed (n x k)" if trans_b else "B column-major (k x n)")
    return f"""{_includes("stdint.h", "stdlib.h", "string.h")}
#if defined(__AVX512F__) || defined(__AVX2__)
{_includes("immintrin.h")}
#endif

{_gemm_kernel_block()}

{bf16}/* ---- TPP primitives brgemm and gemm, {tr}, {dtype} ---- */

/* Pack rows [0, mc) x steps [0, kc) of A (already offset to the block) into panels of
   NPK_MR rows, each stored step by step, rows past mc zero. */
static void {fn}_pack_a(const {elem} *a, int64_t lda, int64_t mc, int64_t kc,
{" " * (20 + len(fn))}float *restrict ap)
{{
    for (int64_t i0 = 0; i0 < mc; i0 += NPK_MR, a += {"NPK_MR * lda" if trans_a else "NPK_MR"}) {{
        const int64_t mr = mc - i0 < NPK_MR ? mc - i0 : NPK_MR;
{pack_a}
        ap += NPK_MR * kc;
    }}
}}

/* Pack steps [0, kc) x columns [0, nc) of B into panels of NPK_NR columns, each stored
   step by step, columns past nc zero. */
static void {fn}_pack_b(const {elem} *b, int64_t ldb, int64_t kc, int64_t nc,
{" " * (20 + len(fn))}float *restrict bp)
{{
    for (int64_t j0 = 0; j0 < nc; j0 += NPK_NR, b += {"NPK_NR" if trans_b else "NPK_NR * ldb"}) {{
        const int64_t nr = nc - j0 < NPK_NR ? nc - j0 : NPK_NR;
{pack_b}
        bp += NPK_NR * kc;
    }}
}}

/* C += sum_r A_r B_r with blocks of mcb rows, kcb steps and ncb columns, packing into ap
   (mcb x kcb floats) and bp (kcb x ncb floats). Every element of C gets its products in
   order of r, then k, each block of k summed in registers and then added to C, whatever
   the block of C it falls in. */
static void {fn}_blocked(const {elem} *a, const {elem} *b, float *c,
{" " * (21 + len(fn))}int64_t m, int64_t n, int64_t k, int64_t br,
{" " * (21 + len(fn))}int64_t lda, int64_t ldb, int64_t ldc,
{" " * (21 + len(fn))}int64_t br_stride_a, int64_t br_stride_b,
{" " * (21 + len(fn))}int64_t mcb, int64_t kcb, int64_t ncb,
{" " * (21 + len(fn))}float *restrict ap, float *restrict bp)
{{
    for (int64_t r = 0; r < br; r++) {{
        const {elem} *ar = a + r * br_stride_a, *brr = b + r * br_stride_b;
        for (int64_t jc = 0; jc < n; jc += ncb) {{
            const int64_t nc = n - jc < ncb ? n - jc : ncb;
            for (int64_t pc = 0; pc < k; pc += kcb) {{
                const int64_t kc = k - pc < kcb ? k - pc : kcb;
                {fn}_pack_b(brr + {b_block}, ldb, kc, nc, bp);
                for (int64_t ic = 0; ic < m; ic += mcb) {{
                    const int64_t mc = m - ic < mcb ? m - ic : mcb;
                    {fn}_pack_a(ar + {a_block}, lda, mc, kc, ap);
                    for (int64_t jr = 0; jr < nc; jr += NPK_NR) {{
                        const int64_t nr = nc - jr < NPK_NR ? nc - jr : NPK_NR;
                        for (int64_t ir = 0; ir < mc; ir += NPK_MR) {{
                            const int64_t mr = mc - ir < NPK_MR ? mc - ir : NPK_MR;
                            npk_tpp_ukr(kc, ap + ir * kc, bp + jr * kc,
                                        c + (ic + ir) + (jc + jr) * ldc, ldc, mr, nr);
                        }}
                    }}
                }}
            }}
        }}
    }}
}}

/* TPP primitive brgemm: C (m x n, ldc) += sum over r < br of A_r B_r, A_r = a + r *
   br_stride_a (m x k, lda), B_r = b + r * br_stride_b (k x n, ldb). The packing buffers
   come from the heap; if it has no room, small buffers on the stack and a small blocking
   do the same work more slowly. */
static void {fn}(const {elem} *a, const {elem} *b, float *c,
{" " * (13 + len(fn))}int64_t m, int64_t n, int64_t k, int64_t br,
{" " * (13 + len(fn))}int64_t lda, int64_t ldb, int64_t ldc,
{" " * (13 + len(fn))}int64_t br_stride_a, int64_t br_stride_b)
{{
    /* Blocks no larger than the operands (rounded up to whole register tiles). */
    const int64_t mcb = m < {mc} ? (m + NPK_MR - 1) / NPK_MR * NPK_MR : {mc};
    const int64_t ncb = n < {nc} ? (n + NPK_NR - 1) / NPK_NR * NPK_NR : {nc};
    const int64_t kcb = k < {kc} ? k : {kc};
    char *mem = (char *)malloc((size_t)((mcb + ncb) * kcb) * sizeof(float) + 128);
    if (mem == NULL) {{
        float ap[NPK_MR * 64] NPK_TPP_ALIGNED, bp[NPK_NR * 64] NPK_TPP_ALIGNED;
        {fn}_blocked(a, b, c, m, n, k, br, lda, ldb, ldc,
{" " * (len(fn) + 17)}br_stride_a, br_stride_b, NPK_MR, 64, NPK_NR, ap, bp);
        return;
    }}
    float *ap = (float *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);  /* 64-byte aligned */
    float *bp = ap + (mcb * kcb + 15) / 16 * 16;
    {fn}_blocked(a, b, c, m, n, k, br, lda, ldb, ldc,
{" " * (len(fn) + 13)}br_stride_a, br_stride_b, mcb, kcb, ncb, ap, bp);
    free(mem);
}}

/* TPP primitive gemm: C (m x n, ldc) += A (m x k, lda) B (k x n, ldb); brgemm with br = 1. */
static void {gemm}(const {elem} *a, const {elem} *b, float *c, int64_t m, int64_t n,
{" " * (13 + len(gemm))}int64_t k, int64_t lda, int64_t ldb, int64_t ldc)
{{
    {fn}(a, b, c, m, n, k, 1, lda, ldb, ldc, 0, 0);
}}"""


def standalone(source: str, dtypes: tuple[str, ...] = ()) -> str:
    """A primitive's source compiled on its own: the typedefs its element types need."""
    head = ["#include <stdint.h>"]
    for dt in dtypes:
        name = FACTS[dt].c_type
        if name in TYPEDEFS:
            head.append(TYPEDEFS[name])
    return "\n".join(head) + "\n\n" + source
