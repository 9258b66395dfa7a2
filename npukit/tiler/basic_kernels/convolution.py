"""Convolution basic kernels, each C template next to its numpy reference: the CNN library's
bias set-up (``set_bias``) and fixed-point/float32 convolution (``conv``), and the layer
kernels' plane convolution (``layer_conv``) with its requantising or activating output
(``conv_out``). Arithmetic: see ``common``.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from ...arith import wrap32
from ...costs import Work
from ...dtypes import int_range, is_float
from . import conv_channels, conv_features, conv_reference
from .common import (
    AVX512_HELPERS,
    C_ALIGN,
    C_TAP_RANGE,
    CONV_3X3,
    CONV_SHAPES,
    HELPERS,
    LANES,
    POOL_AVG,
    BasicKernel,
    activate,
    align,
    at_norm,
    c_copies,
    c_filter_rows,
    c_pick_copy,
    c_signature,
    c_type,
    c_unused,
    layer_c_type,
    layer_suffix,
    requant,
    share_rows,
    suffix,
    tap_range,
    zero_window,
)
from .conv_int import one_plane_call, vnni_call, vnni_conv
from .conv_requant import planes_runs, requant_one_run, requant_run, requant_vectors

# The filters GAP's basic kernel libraries have vectorised kernels for (``KerParConv1x1``,
# ``3x3``, ``5x5``, ``7x7``, stride 1 or 2, no dilation); any other filter is priced as their
# generic ``NxM`` kernel, which works tap by tap.
VECTOR_FILTERS = (1, 3, 5, 7)


def conv_work(macs: int, width: int, shape: tuple, setup: int, rows: int) -> Work:
    """The work of a call computing ``macs`` multiply-accumulates with filter ``shape``
    (``Fx, Fy, Sx, Sy, Dx, Dy``): family ``conv`` for the filters of ``VECTOR_FILTERS`` at
    stride 1 or 2 without dilation, ``width`` of them an operation; else ``conv_nxm``, one
    each. ``setup`` operations, ``rows`` shared among the cores."""
    Fx, Fy, Sx, Sy, Dx, Dy = shape
    vector = Fx == Fy and Fx in VECTOR_FILTERS and Sx == Sy and Sx in (1, 2) and Dx == Dy == 1
    if vector:
        return Work("conv", math.ceil(macs / width), setup, chunks=rows)
    return Work("conv_nxm", macs, setup, chunks=rows)

# -- set bias -------------------------------------------------------------------------------

@cache
def set_bias(bias_dt: str, acc_dt: str) -> BasicKernel:
    """``Out[0 .. W*H) = Bias[Index]`` aligned to the accumulator: shifted by ``NormBias``
    and wrapped to int32 (double precision) or saturated to the output type; the cores share
    the rows."""
    name = f"KerSetBias_{suffix(bias_dt, acc_dt)}"
    tb, ta = c_type(bias_dt), c_type(acc_dt)
    args = ((f"{ta} * __restrict__", "Out"), ("int", "W"), ("int", "H"),
            (f"const {tb} * __restrict__", "Bias"), ("int", "Index"), ("int", "NormBias"))
    if is_float(acc_dt):
        value = "    float V = Bias[Index];\n    (void)NormBias;"
    else:
        b = C_ALIGN.format(b="Bias[Index]")
        if np.dtype(acc_dt).itemsize == 4:
            value = f"    long long B = {b};\n    {ta} V = ({ta})(unsigned int)B;  /* wraps */"
        else:
            lo, hi = int_range(acc_dt)
            value = (f"    long long B = {b};\n"
                     f"    {ta} V = ({ta})(B < {lo} ? {lo} : B > {hi} ? {hi} : B);")
    src = f"""\
void {name}({', '.join(f'{t} {n}' for t, n in args)})
{{
    /* Every element of the tile starts at the bias of output plane Index; the cores share
       the rows. */
{value}
{share_rows("H")}
    for (int i = First * W; i < Last * W; i++) Out[i] = V;
}}"""

    def reference(Out, W, H, Bias, Index, NormBias, *, core_id, core_count):
        if core_id:
            return
        if is_float(acc_dt):
            Out[:W * H] = Bias[Index]
            return
        v = align(np.int64(Bias[Index]), NormBias)
        if np.dtype(acc_dt).itemsize == 4:
            v = wrap32(v)
        else:
            v = np.clip(v, *int_range(acc_dt))
        Out[:W * H] = v

    return BasicKernel(name, args, True, src, reference,
                       lambda W, H, **_: Work("conv_out", W * H, chunks=H))


@cache
def set_bias_planes(acc_dt: str) -> BasicKernel:
    """``Out[o][0 .. W*H) = Bias[o]`` for the ``Feat`` planes of a tile of output features
    (float32 or int32 accumulators, the bias of the accumulator's type: ``set_bias`` without
    its alignment); the cores share the planes."""
    name = f"KerParSetBiasNpk_{layer_suffix(acc_dt)}"
    ta = layer_c_type(acc_dt)
    args = ((f"{ta} *__restrict__", "Out"), ("int", "W"), ("int", "H"), ("int", "Feat"),
            (f"const {ta} *__restrict__", "Bias"))
    src = f"""\
void {name}({c_signature(args)})
{{
    /* Each plane o of the tile starts at the bias of output feature o; the cores share the
       planes. */
{share_rows("Feat")}
    for (int o = First; o < Last; o++)
        for (int i = 0; i < W * H; i++) Out[o * W * H + i] = Bias[o];
}}"""

    def reference(Out, W, H, Feat, Bias, *, core_id, core_count):
        if core_id:
            return
        Out[:Feat * W * H] = np.repeat(Bias[:Feat], W * H)

    return BasicKernel(name, args, True, src, reference,
                       lambda W, H, Feat, **_: Work("conv_out", W * H * Feat, chunks=Feat))


# -- convolution ----------------------------------------------------------------------------

@cache
def conv(in_dt: str, filter_dt: str, acc_dt: str, width: int) -> BasicKernel:
    """One input plane's contribution to ``Hc`` rows of ``Wc`` accumulators. Double precision
    (``acc_dt`` int32): ``Out += sum`` wrapping at 32 bits. Single precision (``acc_dt`` the
    output type): ``Out = clip(AT_NORM((Out << Norm) + sum, Norm))``, the sum taken at 32 bits,
    as GAP's ``KerConv*_fp`` does. float32: ``Out += In * Filter`` tap by tap, in (fy, fx)
    order. Taps outside the ``H`` x ``W`` tile read 0."""
    dp = np.dtype(acc_dt).itemsize == 4 and not is_float(acc_dt)
    flt = is_float(acc_dt)
    kind = "" if flt else ("DP" if dp else "SP")
    name = f"KerConv{kind}_{suffix(in_dt, filter_dt) if dp else suffix(in_dt, filter_dt, acc_dt)}"
    ti, tf, ta = c_type(in_dt), c_type(filter_dt), c_type(acc_dt)
    args = ((f"const {ti} * __restrict__", "In"), ("int", "W"), ("int", "H"),
            (f"const {tf} * __restrict__", "Filter"), (f"{ta} * __restrict__", "Out"),
            ("int", "Wc"), ("int", "Hc"), ("int", "Fx"), ("int", "Fy"), ("int", "Sx"),
            ("int", "Sy"), ("int", "Dx"), ("int", "Dy"), ("int", "PadL"), ("int", "PadT"),
            ("int", "Norm"))
    if flt:
        acc_t, start = "float", "Out[y * Wc + x]"
        term, store = "Acc = Acc + V * Filter[fy * Fx + fx];", "Out[y * Wc + x] = Acc;"
        unused = "    (void)Norm;\n"
    elif dp:
        acc_t, start = "long long", "Out[y * Wc + x]"
        term = "Acc += (long long)V * Filter[fy * Fx + fx];"
        store = "Out[y * Wc + x] = (int)(unsigned int)Acc;  /* wraps at 32 bits */"
        unused = "    (void)Norm;\n"
    else:
        lo, hi = int_range(acc_dt)
        acc_t, start = "long long", "(long long)Out[y * Wc + x] * (1LL << Norm)"
        term = "Acc += (long long)V * Filter[fy * Fx + fx];"
        store = (f"long long A = (int)(unsigned int)Acc;  /* a 32-bit accumulator */\n"
                 f"                A = Norm > 0 ? (A + (1LL << (Norm - 1))) >> Norm : A;\n"
                 f"                Out[y * Wc + x] = ({ta})(A < {lo} ? {lo} : "
                 f"A > {hi} ? {hi} : A);")
        unused = ""
    zero = "0.0f" if flt else "0"
    src = f"""\
void {name}({', '.join(f'{t} {n}' for t, n in args)})
{{
    /* Out[y][x] accumulates In[y*Sy - PadT + fy*Dy][x*Sx - PadL + fx*Dx] * Filter[fy][fx]
       over the Fy x Fx taps; a tap outside the H x W tile reads 0. Rows are shared among
       the cores. */
{unused}    int Rows = Hc;
{share_rows()}
    for (int y = First; y < Last; y++)
        for (int x = 0; x < Wc; x++) {{
            {acc_t} Acc = {start};
            for (int fy = 0; fy < Fy; fy++) {{
                int iy = y * Sy - PadT + fy * Dy;
                for (int fx = 0; fx < Fx; fx++) {{
                    int ix = x * Sx - PadL + fx * Dx;
                    {ti} V = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? In[iy * W + ix] : {zero};
                    {term}
                }}
            }}
            {{
                {store}
            }}
        }}
}}"""

    def reference(In, W, H, Filter, Out, Wc, Hc, Fx, Fy, Sx, Sy, Dx, Dy, PadL, PadT, Norm, *,
                  core_id, core_count):
        if core_id or Hc <= 0 or Wc <= 0:
            return  # core 0 does every core's rows at once
        rows, cols = (Hc - 1) * Sy + (Fy - 1) * Dy + 1, (Wc - 1) * Sx + (Fx - 1) * Dx + 1
        x = In[:W * H].reshape(H, W)
        x = zero_window(x if flt else x.astype(np.int64), PadT, PadL, rows, cols)
        f = Filter[:Fy * Fx].reshape(Fy, Fx)
        out = Out[:Hc * Wc].reshape(Hc, Wc)
        acc = out.copy() if flt else (out.astype(np.int64) if dp else
                                      out.astype(np.int64) * (1 << Norm))
        for fy in range(Fy):
            for fx in range(Fx):
                win = x[fy * Dy:fy * Dy + (Hc - 1) * Sy + 1:Sy,
                        fx * Dx:fx * Dx + (Wc - 1) * Sx + 1:Sx]
                acc = acc + win * (f[fy, fx] if flt else np.int64(f[fy, fx]))
        if flt:
            out[...] = acc
        elif dp:
            out[...] = wrap32(acc)
        else:
            out[...] = np.clip(at_norm(wrap32(acc), Norm), *int_range(acc_dt))

    def cost(Wc, Hc, Fx, Fy, Sx, Sy, Dx, Dy, **_):
        return conv_work(Wc * Hc * Fx * Fy, width, (Fx, Fy, Sx, Sy, Dx, Dy), 4 * Hc, Hc)

    return BasicKernel(name, args, True, src, reference, cost)


# -- convolution ------------------------------------------------------------------------------

# Vectors of accumulators the layer convolution's largest register block holds.
CONV_VECTORS = 4
# The widest filter whose tap masks a feature tile's blocks hold (wider: the plain loops).
CONV_MAX_FX = 16
# The most outputs of a plane a feature tile's kernel flattens into vectors (a multiple of
# CONV_VECTORS vectors).
FLAT_MAX = 1024


@cache
def layer_conv(in_dt: str, w_dt: str, width: int, planes: bool = False) -> BasicKernel:
    """One input plane's contribution to ``OutRows`` rows of ``Wo`` accumulators:
    ``Acc[y][x] += In(p, x*Sx - PadL + fx*Dx) * Filter[fy][fx]`` over the taps in (fy, fx)
    order, ``p = (OutRow0 + y)*Sy + fy*Dy`` a row of the padded input (real row ``p - PadT``),
    found at line ``p - InRow0`` of the tile. Taps on padding (rows outside ``[0, Hreal)``,
    columns outside ``[0, W)``) add nothing. Integers: ``(In - Zin) * (Filter - Zw)`` summed
    in a wrapping int32 accumulator; float32: ``Acc + In * Filter`` tap by tap.

    Where the compiler targets AVX-512, a row at stride 1 of a filter with more than one tap
    is computed in register blocks of up to 4 vectors of ``common.LANES`` outputs, the taps
    innermost, a tap outside the row masked off its lane (integers: zero points within
    +-32512, the products by ``vpmaddwd``); elsewhere tap by tap across the rows. Each output
    adds its taps in (fy, fx) order either way: float32 results are the same bit for bit.

    ``planes``: the kernel of a tile of features (``KerParConvNpk``, GAP's ``KerParConv``
    iteration): ``InFeat`` input planes (``InRows`` x ``W`` each, one after the other) into
    ``OutFeat`` planes of accumulators, output feature ``o`` taking filter ``[o][i]`` for input
    feature ``i``; each accumulator adds the input features in order, each one's taps in
    (fy, fx) order (the sum the single-plane kernel makes over calls, in registers across the
    input features); the output features are shared among the cores. In float32 with
    AVX-512, blocks of several output features at once (``conv_features``: 8 on a row's
    columns, 6 on a flattened plane, 8 on a 1x1 filter's run of outputs; each input vector
    loaded serves them all), the same sums in the same order."""
    flt = is_float(in_dt)
    acc_dt = "float32" if flt else "int32"
    name = f"Ker{'Par' if planes else ''}ConvNpk_{layer_suffix(in_dt, w_dt)}"
    ti, tw, ta = layer_c_type(in_dt), layer_c_type(w_dt), layer_c_type(acc_dt)
    in_feat = (("int", "InFeat"),) if planes else ()
    out_feat = (("int", "OutFeat"),) if planes else ()
    args = ((f"const {ti} *__restrict__", "In"), ("int", "W"), ("int", "InRow0"),
            ("int", "InRows"), ("int", "Hreal"), ("int", "PadT"), *in_feat,
            (f"const {tw} *__restrict__", "Filter"), (f"{ta} *__restrict__", "Acc"),
            ("int", "Wo"), ("int", "OutRow0"), ("int", "OutRows"), *out_feat, ("int", "Fx"),
            ("int", "Fy"), ("int", "Sx"), ("int", "Sy"), ("int", "Dx"), ("int", "Dy"),
            ("int", "PadL"), ("int", "Zin"), ("int", "Zw"))
    # Where a tap's filter row and input line are: the one plane's, or input feature i's.
    f_row, in_line = ("(i * Fy + fy) * Fx", "i * InRows + ") if planes else ("fy * Fx", "")
    row_line = "(i * InRows + L)" if planes else "L"
    each_feature = "for (int i = 0; i < InFeat; i++)\n" if planes else ""
    widest = f" && Fx <= {CONV_MAX_FX}" if planes else ""
    # (A feature tile's 1x1 filter has a tap per input feature: its blocks pay.)
    several_taps = "(Fx * Fy > 1 || InFeat > 1)" if planes else "Fx * Fy > 1"
    if flt:
        wt, unused = "float Wt = F[fx];", c_unused("Zin", "Zw")
        term = "A[c] = A[c] + Row[c * Sx] * Wt;"
        vwt, vzin = "__m512 Wv = _mm512_set1_ps(F[fx]);", ""
        vload, vstore = "_mm512_maskz_loadu_ps(K{k}, A + x + {o})", "_mm512_mask_storeu_ps"
        vacc = "__m512"
        # A vector of inputs at column stride 1, and at stride 2 (``block``'s masks)
        vin = ("_mm512_maskz_loadu_ps(M, Line + C + {o})",
               "npk_even_ps(Line + C + 2 * {o}, Lo{k}[fx], Hi{k}[fx])")
        vterm = ("V = {load};\n"
                 "                        S{k} = _mm512_mask_add_ps(S{k}, M, S{k}, "
                 "_mm512_mul_ps(V, Wv));")
    else:
        wt, unused = "int Wt = (int)F[fx] - Zw;", ""
        term = ("A[c] = (int)((unsigned int)A[c] + (unsigned int)(((int)Row[c * Sx] - Zin) * "
                "Wt));  /* wraps */")
        # With zero points within +-32512 (every ONNX zero point), In - Zin and Filter - Zw
        # fit 16 bits: a lane holding In - Zin (its high 16 bits the sign) times one holding
        # the weight in its low 16 bits (high 16 bits 0), vpmaddwd gives the exact product,
        # at a fraction of vpmulld's cost.
        vwt = "__m512i Wv = _mm512_set1_epi32(((int)F[fx] - Zw) & 0xFFFF);"
        vzin = "\n        __m512i Zv = _mm512_set1_epi32(Zin);"
        vload, vstore = "_mm512_maskz_loadu_epi32(K{k}, A + x + {o})", "_mm512_mask_storeu_epi32"
        vacc = "__m512i"
        widen = "_mm512_cvtepi8_epi32" if np.dtype(in_dt) == np.int8 else "_mm512_cvtepu8_epi32"
        vin = ("_mm_maskz_loadu_epi8(M, Line + C + {o})",
               "npk_even_epi8(Line + C + 2 * {o}, Lo{k}[fx], Hi{k}[fx])")
        vterm = (f"V = _mm512_sub_epi32({widen}({{load}}), Zv);\n"
                 f"                        S{{k}} = _mm512_mask_add_epi32(S{{k}}, M, "
                 f"S{{k}}, _mm512_madd_epi16(V, Wv));  /* wraps */")
    line_ok = "P - PadT >= 0 && P - PadT < Hreal && L >= 0 && L < InRows"
    small_zero_points = "" if flt else (" && Zin >= -32512 && Zin <= 32512 && Zw >= -32512 && "
                                        "Zw <= 32512")

    def block(n: int) -> str:
        cols = n * LANES
        live = "\n".join(f"                __mmask16 K{k} = npk_cols(x + {k * LANES}, Wo);"
                         for k in range(n))
        loads = "\n".join(f"                {vacc} S{k} = {vload.format(k=k, o=k * LANES)};"
                          for k in range(n))
        # (The tap masks: once per block.)
        masks = "\n" + conv_features.lines("                ",
                                            conv_features.tap_masks(range(n), CONV_MAX_FX))
        terms = "\n".join(f"""\
                        M = T{k}[fx];
                        {vterm.replace("{load}", f"Sx == 1 ? {vin[0]} : {vin[1]}").format(
                            k=k, o=k * LANES)}""" for k in range(n))
        stores = "\n".join(f"                {vstore}(A + x + {k * LANES}, K{k}, S{k});"
                           for k in range(n))
        return f"""\
            /* Columns x .. x+{cols - 1} (those below Wo): {n} vector{'s' if n > 1 else ''} \
of accumulators
               in registers across the taps. */
            {{
{live}
{loads}
                __mmask16 M;
                {vacc} V;{masks}
{'                ' + each_feature if planes else ''}\
                for (int fy = Fy0; fy < Fy1; fy++) {{
                    const {tw} *F = Filter + {f_row};
                    const {ti} *Line = In + ({in_line}P0 + fy * Dy - InRow0) * W;
                    for (int fx = 0; fx < Fx; fx++) {{
                        int C = x * Sx - PadL + fx * Dx;  /* the input column of lane 0 */
                        {vwt}
{terms}
                    }}
                }}
{stores}
                x += {cols};
            }}"""

    blocks = "\n".join(f"            {'if' if n == CONV_VECTORS else 'else if'} "
                       f"(Wo - x > {(n - 1) * LANES})\n{block(n)}"
                       for n in range(CONV_VECTORS, 1, -1))
    blocks += f"\n            else\n{block(1)}"
    blocks = "\n".join("    " + line if line else line for line in blocks.splitlines())

    if planes:
        feats_when = f"(Sx == 1 || Sx == 2) && {several_taps}{widest}"
        feats = "" if not flt else f"""
#ifdef NPK_AVX512
    /* Float32 rows at column stride 1 or 2: {' or '.join(map(str, conv_features.ROW_FEATURES))} \
output features at a time (the rest one by one). */
    if ({feats_when}) {{""" + "".join(f"""
        for (; First + {n} <= Last; First += {n})
{c_pick_copy(f"{name}_Feats{n}", (*args, ("int", "o")), CONV_SHAPES, "            ",
             dict(o="First"), otherwise="break;  /* the rest by the loops below */",
             when=feats_when)}"""
                                                   for n in conv_features.ROW_FEATURES) + """
    }
#endif"""
        rows_doc = ("Input features in order,\n       each one's taps in (fy, fx) order; "
                    "every row (the output features are shared among the cores).")
        rows = "    int First = 0, Last = Rows;"
        vnni = "" if flt else f"""\
#ifdef NPK_VNNI
    if ({vnni_call(name, in_dt, w_dt)})  /* integers: the VNNI form where it applies */
        return;
#endif
"""
        here = dict(Filter="Filter + o * InFeat * Fy * Fx", Acc="Acc + o * OutRows * Wo")
        flat_when = (f"Wo < 32 && Wo == W && Sx == 1 && Sy == 1 && Dx == 1 && Dy == 1 && "
                     f"Fx * Fy <= {CONV_MAX_FX} && OutRows * Wo <= {FLAT_MAX}"
                     f"{small_zero_points}")
        narrow = conv_features.narrow_dispatch(name, args, flt,
                                               f"Fx * Fy <= {CONV_MAX_FX}{small_zero_points}")
        if flt:
            narrow += conv_channels.channels_dispatch(name, args)
        entry = f"""\
    /* Each output feature o of the tile in turn (the features shared among the cores), by
       the loops' copy for the filter's shape (its tap counts and strides constants: 3x3 and
       1x1 at stride 1, 3x3 at stride 2, without dilation), else the loops as written. */
{share_rows("OutFeat")}
{narrow}
{vnni}#ifdef NPK_AVX512
    /* Planes of rows narrower than 32 outputs, as wide as their input, at stride 1 without
       dilation: the plane's outputs flattened, 16 to a vector (rows of their own would
       leave lanes empty). */
    if ({flat_when}) {{
{c_pick_copy(f"{name}_Flat", (*args, ("int", "First"), ("int", "Last")), (CONV_3X3,),
             "        ", otherwise=";  /* the loops below compute the same */",
             when=flat_when, then="return;")}
    }}
#endif{feats}
    for (int o = First; o < Last; o++)
{c_pick_copy(f"{name}_Rows", args, CONV_SHAPES, "        ", here)}"""
    else:
        rows_doc = "Rows are shared among the cores."
        rows = share_rows()
        entry = ("" if flt else one_plane_call(name, in_dt, w_dt)) + f"""\
    /* The loops' copy for the filter's shape (its tap counts and strides constants: 3x3 and
       1x1 at stride 1, 3x3 at stride 2, without dilation), else the loops as written. */
{c_pick_copy(f"{name}_Rows", args, CONV_SHAPES, "    ", separate=False)}"""

    nv = CONV_VECTORS
    flat_k = "\n".join(f"            __mmask16 K{k} = npk_cols(q0 + {k * LANES}, N);"
                        for k in range(nv))
    flat_loads = "\n".join(f"            {vacc} S{k} = "
                            f"{vload.format(k=k, o=k * LANES).replace('A + x', 'A + q0')};"
                            for k in range(nv))
    flat_terms = "\n".join(f"""\
                        M = T[b + {k}][fy * Fx + fx];
                        {vterm.replace("{load}", vin[0]).format(k=k, o=k * LANES)}"""
                           for k in range(nv))
    flat_stores = "\n".join(f"            {vstore}(A + q0 + {k * LANES}, K{k}, S{k});"
                             for k in range(nv))
    flat = "" if not planes else conv_features.flat_of_features(
        name, args, FLAT_MAX, CONV_MAX_FX) if flt else f"""
#ifdef NPK_AVX512
static inline NPK_ALWAYS_INLINE void {name}_Flat({c_signature(args)}, int First, int Last)
{{
    /* Output features First .. Last-1, each plane's outputs flattened: output q = y*Wo + x
       adds, for input feature i and tap (fy, fx), input q + (OutRow0 - InRow0 + fy)*W -
       PadL + fx of plane i (stride 1, W == Wo), in that order; a lane takes a tap when its
       output exists and the tap's row and column are inside the tile (T: each vector's
       lanes, tap by tap, the same for every feature). {nv} vectors of accumulators in
       registers across the features and taps. */
    int N = OutRows * Wo, Blocks = (N + {LANES - 1}) / {LANES};
    __mmask16 T[{FLAT_MAX // LANES}][{CONV_MAX_FX}];{vzin.replace("        ", "    ")}
{c_unused("OutFeat", "Sx", "Sy", "Dx", "Dy")}
    for (int b = 0; b < (Blocks + {nv - 1}) / {nv} * {nv}; b++)
        for (int t = 0; t < Fy * Fx; t++) {{
            unsigned int Lanes = 0;
            for (int j = 0; j < {LANES}; j++) {{
                int q = b * {LANES} + j, P = OutRow0 + q / Wo + t / Fx, L = P - InRow0;
                int Col = q % Wo - PadL + t % Fx;
                if (q < N && {line_ok} && Col >= 0 && Col < W) Lanes |= 1u << j;
            }}
            T[b][t] = (__mmask16)Lanes;
        }}
    for (int o = First; o < Last; o++)
        for (int b = 0; b < Blocks; b += {nv}) {{
            int q0 = b * {LANES};
            {ta} *A = Acc + o * N;
            __mmask16 M;
            {vacc} V;
{flat_k}
{flat_loads}
            for (int i = 0; i < InFeat; i++)
                for (int fy = 0; fy < Fy; fy++) {{
                    const {tw} *F = Filter + ((o * InFeat + i) * Fy + fy) * Fx;
                    const {ti} *Line = In + (i * InRows + OutRow0 - InRow0 + fy) * W - PadL;
                    for (int fx = 0; fx < Fx; fx++) {{
                        int C = q0 + fx;  /* lane 0's input, from Line */
                        {vwt}
{flat_terms}
                    }}
                }}
{flat_stores}
        }}
}}

{c_copies(f"{name}_Flat", args + (("int", "First"), ("int", "Last")), (CONV_3X3,))}
#endif"""
    if planes and flt:
        flat += "".join(conv_features.rows_of_features(name, args, line_ok, CONV_MAX_FX, n)
                        for n in conv_features.ROW_FEATURES)
    if planes:
        flat += conv_features.narrow_of_features(name, args, CONV_MAX_FX, in_dt, w_dt)
        # (After the narrow form's: its 16 x 16 transpose serves the channels' filters.)
        flat += conv_channels.channels(name, args, line_ok) if flt else ""
    src = f"""\
{HELPERS}
{AVX512_HELPERS}{flat}{"" if flt else chr(10) + vnni_conv(name, in_dt, w_dt)}
static inline NPK_ALWAYS_INLINE void {name}_Rows({c_signature(args)})
{{
    /* Acc[y][x] accumulates the taps (fy, fx) in order: input row p = (OutRow0 + y)*Sy +
       fy*Dy of the padded plane (line p - InRow0 of the tile, real row p - PadT), column
       x*Sx - PadL + fx*Dx. Taps on padding add nothing. {rows_doc} */
{unused}{c_unused("OutFeat") if planes else ""}    int Rows = OutRows;
{rows}
#ifdef NPK_AVX512
    /* At column stride 1 or 2, each row in blocks of vectors (at stride 2 a vector's inputs
       are the even lanes of 32 columns); a lane is added a tap when its column is an output
       (below Wo) and the tap's column is inside the row. (A 1x1 filter's one pass over the
       row is faster as the plain loop.) */
    if ((Sx == 1 || Sx == 2) && {several_taps}{small_zero_points}{widest}) {{{vzin}
        for (int y = First; y < Last; y++) {{
            int P0 = (OutRow0 + y) * Sy, Fy0 = 0, Fy1;
            {ta} *A = Acc + y * Wo;
{c_filter_rows(line_ok, "            ")}
            for (int x = 0; x < Wo;)
{blocks}
        }}
        return;
    }}
#endif
    /* Otherwise tap by tap: each tap's columns inside the row (X0 .. X1), across the rows. */
{'    ' + each_feature if planes else ''}\
    for (int fy = 0; fy < Fy; fy++)
        for (int fx = 0; fx < Fx; fx++) {{
            const {tw} *F = Filter + {f_row};
            {wt}
{C_TAP_RANGE}
            for (int y = First; y < Last; y++) {{
                int P = (OutRow0 + y) * Sy + fy * Dy, L = P - InRow0;
                {ta} *A = Acc + y * Wo;
                const {ti} *Row;
                if (!({line_ok})) continue;
                Row = In + {row_line} * W + Off;
                for (int c = X0; c < X1; c++) {term}
            }}
        }}
}}
{chr(10) + c_copies(f"{name}_Rows", args, CONV_SHAPES) if planes else ""}
void {name}({c_signature(args)})
{{
{entry}
}}"""
    if planes:
        return _feature_tile(name, args, src, layer_conv(in_dt, w_dt, width), flt)

    def reference(In, W, InRow0, InRows, Hreal, PadT, Filter, Acc, Wo, OutRow0, OutRows, Fx,
                  Fy, Sx, Sy, Dx, Dy, PadL, Zin, Zw, *, core_id, core_count):
        if core_id or OutRows <= 0:
            return
        acc = Acc[:OutRows * Wo].reshape(OutRows, Wo)
        work = acc.copy() if flt else acc.astype(np.int64)
        x = In[:InRows * W].reshape(InRows, W)
        x = x if flt else x.astype(np.int64) - Zin
        f = Filter[:Fy * Fx].reshape(Fy, Fx)
        f = f if flt else f.astype(np.int64) - Zw
        ys = np.arange(OutRows)
        for fy in range(Fy):
            p = (OutRow0 + ys) * Sy + fy * Dy
            lines = p - InRow0
            ok = (p - PadT >= 0) & (p - PadT < Hreal) & (lines >= 0) & (lines < InRows)
            rows = ys[ok]
            for fx in range(Fx):
                x0, x1 = tap_range(W, Wo, Sx, fx * Dx - PadL)
                if x0 >= x1 or not rows.size:
                    continue
                cols = np.arange(x0, x1) * Sx + fx * Dx - PadL
                win = x[lines[ok][:, None], cols[None, :]]
                work[rows[:, None], np.arange(x0, x1)[None, :]] += win * f[fy, fx]
        acc[...] = work if flt else wrap32(work)

    def cost(Wo, OutRows, Fx, Fy, Sx, Sy, Dx, Dy, **_):
        return conv_work(Wo * OutRows * Fx * Fy, width, (Fx, Fy, Sx, Sy, Dx, Dy),
                         4 * OutRows * Fy, OutRows)

    def planes(*args):
        conv_reference.planes(flt, *args)

    return BasicKernel(name, args, True, src, reference, cost,
                       (conv_reference.PLANE_STRIDES, planes))


def _feature_tile(name: str, args, src: str, single: BasicKernel, flt: bool) -> BasicKernel:
    """``layer_conv(planes=True)``'s kernel: its reference computes what the one-plane
    reference makes over the output features and, for each, the input features in order, at
    array speed (``conv_reference.feature_tile``)."""
    def reference(*args, core_id, core_count):
        if not core_id:
            conv_reference.feature_tile(flt, *args)

    def cost(InFeat, OutFeat, **kw):
        # An output feature's rows are set up once for all its input features.
        one = single.cost(**kw)
        return Work(one.family, InFeat * OutFeat * one.ops, OutFeat * one.setup,
                    chunks=OutFeat)

    return BasicKernel(name, args, True, src, reference, cost)


@cache
def conv_out(acc_dt: str, out_dt: str) -> BasicKernel:
    """From a tile of convolution accumulators to output rows: each accumulator becomes
    ``act(acc)`` (float32) or ``requant(acc, Scale[Index], Zout, Lo, Hi)`` (integers, the
    activation folded in the clamp), then an optional pooling without padding (``Oper`` 1 max,
    2 average over the window's existing rows and columns, float32 only) over ``Fy`` x ``Fx``
    windows at strides ``Sy``, ``Sx``. Accumulator line ``c - AccRow0`` holds convolution row
    ``c``; rows from ``Hc`` on do not exist (a ceil-mode window's end).

    Integer outputs, where the compiler targets AVX-512: the outputs whose window lies
    inside the row (column strides 1 and 2) are computed 16 lanes at a time, each as the
    plain loop computes it (``conv_requant``: a window of one accumulator over whole rows
    as one run); the same bytes."""
    flt = is_float(acc_dt)
    name = f"KerConvOutNpk_{layer_suffix(acc_dt, out_dt)}"
    ta, to = layer_c_type(acc_dt), layer_c_type(out_dt)
    args = [(f"const {ta} *__restrict__", "Acc"), ("int", "Wc"), ("int", "AccRow0"),
            ("int", "Hc"), (f"{to} *__restrict__", "Out"), ("int", "Wo"), ("int", "OutRow0"),
            ("int", "OutRows"), ("int", "Fx"), ("int", "Fy"), ("int", "Sx"), ("int", "Sy"),
            ("int", "Oper")]
    if flt:
        args += [("int", "Act"), ("int", "P0"), ("int", "P1")]
        value = "float V = npk_act(Acc[L * Wc + cx], Act, A0, A1);"
        init = "float A0 = npk_f32(P0), A1 = npk_f32(P1);\n"
        decl, first = "float M = 0.0f, S = 0.0f;", "M = N == 0 || V > M ? V : M;\n" \
            "                        S = S + V;"
        store = "Out[y * Wo + x] = Oper == 2 ? S / (float)N : M;"
    else:
        args += [("const float *__restrict__", "Scale"), ("int", "Index"), ("int", "Zout"),
                 ("int", "Lo"), ("int", "Hi")]
        value = "int V = npk_requant(Acc[L * Wc + cx], Sc, Zout, Lo, Hi);"
        init = "float Sc = Scale[Index];\n    (void)Oper;\n"
        decl, first = "int M = 0;", "M = N == 0 || V > M ? V : M;"
        store = f"Out[y * Wo + x] = ({to})M;"
    args = tuple(args)
    vectors, row_close = "", ""
    row_open = ("    for (int y = First; y < Last; y++)\n"
                "        for (int x = 0; x < Wo; x++) {")
    if flt:  # a window of one accumulator at column stride 1: a row at a time
        vectors, row_open, row_close = conv_features.act_row(name)
    if not flt:
        vectors = (f"{AVX512_HELPERS}\n{requant_vectors(name, args, to)}\n"
                   f"{requant_run(name, to, np.dtype(out_dt).itemsize)}")
        row_open = (f"    for (int y = First; y < Last; y++) {{\n        int x = 0;\n"
                    f"#ifdef NPK_AVX512\n        x = {name}_Vectors("
                    f"{', '.join(n for _, n in args)}, y);\n#endif\n"
                    f"        /* The outputs left (all of them without AVX-512), one at a "
                    f"time. */\n"
                    f"        for (; x < Wo; x++) {{")
        row_close = "    }\n"
    vectors, row_open = conv_features.one_run(name, vectors, row_open) if flt else \
        (vectors, requant_one_run(name, to) + row_open)
    src = f"""\
{HELPERS}
#ifndef NPK_KERNEL_{name}
#define NPK_KERNEL_{name}
{vectors}
void {name}({c_signature(args)})
{{
    /* Out[y][x] pools (Oper 0: none, 1: max, 2: average) the activated accumulators of its
       window: convolution rows (OutRow0 + y)*Sy + fy below Hc, columns x*Sx + fx below Wc.
       Rows are shared among the cores. */
    {init}    int Rows = OutRows;
{share_rows()}
{row_open}
            {decl}
            int N = 0;
            for (int fy = 0; fy < Fy; fy++) {{
                int cy = (OutRow0 + y) * Sy + fy, L = cy - AccRow0;
                if (cy >= Hc) break;
                for (int fx = 0; fx < Fx; fx++) {{
                    int cx = x * Sx + fx;
                    if (cx < Wc) {{
                        {value}
                        {first}
                        N++;
                    }}
                }}
            }}
            {store}
        }}
{row_close}}}
#endif"""

    def reference(Acc, Wc, AccRow0, Hc, Out, Wo, OutRow0, OutRows, Fx, Fy, Sx, Sy, Oper, *rest,
                  core_id, core_count):
        if core_id or OutRows <= 0:
            return
        lines = min(Acc.size // Wc, (OutRow0 + OutRows - 1) * Sy + Fy - AccRow0)
        acc = Acc[:lines * Wc].reshape(lines, Wc)
        if flt:
            act, p0, p1 = rest
            v = activate(acc, act, p0, p1)
        else:
            scale, index, zout, lo, hi = rest
            v = requant(acc, scale[index], zout, lo, hi)
        out = Out[:OutRows * Wo].reshape(OutRows, Wo)
        m = s = None
        n = np.zeros((OutRows, Wo), np.int64)
        ys, xs = OutRow0 + np.arange(OutRows), np.arange(Wo)
        for fy in range(Fy):
            cy = ys * Sy + fy
            okr = cy < Hc
            for fx in range(Fx):
                cx = xs * Sx + fx
                okc = cx < Wc
                ok = okr[:, None] & okc[None, :]
                w = v[np.clip(cy - AccRow0, 0, lines - 1)[:, None], np.minimum(cx, Wc - 1)[None, :]]
                if m is None:
                    m, s = w.copy(), np.float32(0) + w  # the C sums from +0
                else:
                    m = np.where(ok & (w > m), w, m)
                    s = np.where(ok, s + w, s) if flt else s
                n += ok
        if flt and Oper == POOL_AVG:
            out[...] = s / n.astype(np.float32)
        else:
            out[...] = m

    def cost(Wo, OutRows, Fx, Fy, **_):
        return Work("conv_out", Wo * OutRows * Fx * Fy, 4 * Wo * OutRows, chunks=OutRows)

    return BasicKernel(name, args, True, src, reference, cost)


@cache
def conv_out_planes(acc_dt: str, out_dt: str) -> BasicKernel:
    """``conv_out`` of each of the ``Feat`` planes of a tile of output features: plane ``o``
    of ``AccRows`` accumulator lines into plane ``o`` of ``OutRows`` output rows (integers:
    ``Scale[o]``)."""
    flt = is_float(acc_dt)
    one = conv_out(acc_dt, out_dt)
    name = f"KerParConvOutNpk_{layer_suffix(acc_dt, out_dt)}"
    head, tail = one.args[:13], one.args[13:]
    tail = tail if flt else tuple(a for a in tail if a[1] != "Index")
    args = (*head[:4], ("int", "AccRows"), *head[4:8], ("int", "Feat"), *head[8:], *tail)
    call = ", ".join(
        {"Acc": "Acc + o * AccRows * Wc", "Out": "Out + o * OutRows * Wo", "Index": "o"}.get(n, n)
        for _, n in one.args)
    runs = "" if flt else "\n" + planes_runs(one.name, layer_c_type(out_dt))
    src = f"""\
{one.c_source}
void {name}({c_signature(args)})
{{
    /* Plane o of the tile: accumulators Acc + o*AccRows*Wc, outputs Out + o*OutRows*Wo
       (each plane's rows shared among the cores). */{runs}
    for (int o = 0; o < Feat; o++)
        {one.name}({call});
}}"""

    def reference(Acc, Wc, AccRow0, Hc, AccRows, Out, Wo, OutRow0, OutRows, Feat, *rest,
                  core_id, core_count):
        if core_id:
            return
        for o in range(Feat):
            more = rest if flt else (*rest[:6], o, *rest[6:])  # Scale, then Index o
            one.reference(Acc[o * AccRows * Wc:(o + 1) * AccRows * Wc], Wc, AccRow0, Hc,
                          Out[o * OutRows * Wo:(o + 1) * OutRows * Wo], Wo, OutRow0, OutRows,
                          *more, core_id=0, core_count=1)

    def cost(Feat, **kw):
        w = one.cost(**kw)
        return Work(w.family, Feat * w.ops, Feat * w.setup, chunks=Feat)

    return BasicKernel(name, args, True, src, reference, cost)
