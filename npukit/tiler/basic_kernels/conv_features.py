"""The float32 feature tile's register blocks (``convolution.layer_conv(planes=True)``,
AVX-512): several output features' accumulators in registers at once, so that each input
vector loaded serves all of them. Each accumulator still adds the input features in order,
each one's taps in (fy, fx) order, a multiply then an add (no fused multiply-add), a tap on
padding masked off its lane: the bits of the one-feature loops.
"""

from __future__ import annotations

from .common import (
    AVX512_HELPERS,
    CONV_3X3,
    CONV_SHAPES,
    LANES,
    c_copies,
    c_filter_rows,
    c_signature,
    c_unused,
    layer_c_type,
)

# Output features a flattened plane's block holds, the most first, then fewer for the rest
# (the features a core takes need not be a multiple of 6), times ``VECTORS`` vectors: up to
# 24 accumulators of the 32 registers, the 4 input vectors and a broadcast weight beside
# them. 6 features rather than 4: 3x3 layers at 28x28, 14x14 and 7x7 (benchmarks/
# host_speed.py's) 1.15-1.3x less CPU on this AMD EPYC (Zen 5), each input vector loaded
# serving 6.
FEATURES = (6, 4, 2)
# A row's blocks (``ROW_VECTORS`` vectors of its columns): 8 features first (16
# accumulators of 2 vectors), each input vector loaded
# serving twice as many as 4 did: 20-25% less CPU on 3x3 and 7x7 rows 56 to 112 wide
# (AMD EPYC with AVX-512, benchmarks/host_speed.py's layers).
ROW_FEATURES = (8, 4, 2)
ROW_VECTORS = 2
VECTORS = 4


def rows_of_features(name: str, args, line_ok: str, max_fx: int, feats: int) -> str:
    """C of ``{name}_Feats{feats}(..., o)``: output features ``o .. o + feats - 1`` of a
    float32 feature tile at column stride 1 or 2, each row in blocks of up to
    ``ROW_VECTORS`` vectors."""
    blocks = "\n".join(f"        {'if' if n == ROW_VECTORS else 'else if'} "
                       f"(Wo - x > {(n - 1) * LANES})\n{_block(n, max_fx, feats)}"
                       for n in range(ROW_VECTORS, 1, -1))
    blocks += f"\n        else\n{_block(1, max_fx, feats)}"
    blocks = "\n".join("    " + line if line else line for line in blocks.splitlines())
    return f"""
#ifdef NPK_AVX512
static inline NPK_ALWAYS_INLINE void {name}_Feats{feats}({c_signature(args)}, int o)
{{
    /* Output features o .. o+{feats - 1} together, at column stride 1 or 2: each row in
       blocks of up to {ROW_VECTORS} vectors of {LANES} columns of the {feats} features, in
       registers across the input features and taps; each input vector loaded (at stride 2
       the even lanes of 32 columns) serves the {feats} features (their weights broadcast
       from memory). Each accumulator adds the input features in order, each one's taps in
       (fy, fx) order, a multiply then an add; a lane takes a tap when its column is an
       output (below Wo) and the tap's column is inside the row. */
    int Plane = OutRows * Wo;  /* the accumulators of one output feature */
    int Step = InFeat * Fy * Fx;  /* the filters of one output feature */
{c_unused("Zin", "Zw", "OutFeat")}    for (int y = 0; y < OutRows; y++) {{
        int P0 = (OutRow0 + y) * Sy, Fy0 = 0, Fy1;
        float *A = Acc + o * Plane + y * Wo;
{c_filter_rows(line_ok, "        ")}
        for (int x = 0; x < Wo;)
{blocks}
    }}
}}

{c_copies(f"{name}_Feats{feats}", (*args, ("int", "o")), CONV_SHAPES)}
#endif"""


def _block(n: int, max_fx: int, feats: int) -> str:
    """One block: ``n`` vectors of columns from x of ``feats`` features."""
    fs, vecs = range(feats), range(n)
    live = [f"__mmask16 K{k} = npk_cols(x + {k * LANES}, Wo);" for k in vecs]
    masks = tap_masks(vecs, max_fx)
    loads, inputs, terms, stores = _vector_ops(fs, vecs, "A + {r} * Plane + x", "T{k}[fx]",
                                               "Line + C", "fx", "Safe[fx]", strided=True,
                                               rows=True)
    # The taps whose vectors lie inside the tile from the block's first line to its last
    # (lines Lo .. Hi of every input feature; at column stride 2, 32 columns a vector).
    safe = [f"int Safe[{max_fx}], Lo = P0 + Fy0 * Dy - InRow0, Hi = P0 + (Fy1 - 1) * Dy - "
            f"InRow0;",
            f"for (int fx = 0; fx < Fx; fx++) {{\n"
            f"    int C = x * Sx - PadL + fx * Dx;\n"
            f"    Safe[fx] = Lo * W + C >= 0 && Hi * W + C + {n * LANES} * Sx <= "
            f"InRows * W;\n}}"]
    return f"""\
        /* Columns x .. x+{n * LANES - 1} (those below Wo) of the {feats} features: \
{n * feats} vectors of
           accumulators; the tap masks, the same for every input feature, once per block. */
        {{
{lines("            ", live + masks + safe + loads)}
            for (int i = 0; i < InFeat; i++)
                for (int fy = Fy0; fy < Fy1; fy++) {{
                    const float *F = Filter + ((o * InFeat + i) * Fy + fy) * Fx;
                    const float *Line = In + (i * InRows + P0 + fy * Dy - InRow0) * W;
                    for (int fx = 0; fx < Fx; fx++) {{
                        int C = x * Sx - PadL + fx * Dx;  /* the input column of lane 0 */
{lines("                        ", inputs + terms)}
                    }}
                }}
{lines("            ", stores)}
            x += {n * LANES};
        }}"""


def flat_of_features(name: str, args, flat_max: int, max_taps: int) -> str:
    """C of ``{name}_Flat(..., First, Last)`` for float32: output features ``First .. Last-1``
    of planes narrower than 32 outputs, each plane's outputs flattened, 16 to a vector; blocks
    of ``VECTORS`` vectors, ``FEATURES`` output features at a time (the rest one by one), each
    block running only its live taps (a 1x1 plane with padding: its centre tap alone)."""
    def by_features(vectors: int) -> str:
        """The block's output features, ``FEATURES`` at a time, then one by one."""
        return "".join(f"""\
            for (; o + {n} <= Last; o += {n})
{_flat_block(n, vectors)}
""" for n in FEATURES) + f"""\
            for (; o < Last; o++)
{_flat_block(1, vectors)}"""
    return f"""
#ifdef NPK_AVX512
static inline NPK_ALWAYS_INLINE void {name}_Flat({c_signature(args)}, int First, int Last)
{{
    /* Each plane's outputs flattened: output q = y*Wo + x adds, for input feature i and tap
       t = (fy, fx), input q + (OutRow0 - InRow0 + fy)*W - PadL + fx of plane i (stride 1,
       W == Wo), in that order; a lane takes a tap when its output exists and the tap's row
       and column are inside the tile (T: each vector's lanes, tap by tap, the same for
       every feature). Blocks of {VECTORS} vectors while {VECTORS} remain, then single vectors (a
       plane of 16 outputs or fewer: one); per block, the taps with a lane in the block (Live,
       in order: the others add nothing); {" or ".join(map(str, FEATURES))} output features \
at a time, each input
       vector loaded serving them all, up to {VECTORS * FEATURES[0]} vectors of accumulators \
in registers across
       the input features and taps; the last feature alone. */
    int N = OutRows * Wo, Blocks = (N + {LANES - 1}) / {LANES};
    int Step = InFeat * Fy * Fx;  /* the filters of one output feature */
    __mmask16 T[{flat_max // LANES}][{max_taps}];
{c_unused("Zin", "Zw", "OutFeat", "Sx", "Sy", "Dx", "Dy")}\
    /* T: lane j of vector b is output q = b*{LANES} + j, at row Y = q / Wo (the quotient in
       float32: exact, q being below 2^20 and Wo below 32) and column X = q - Y*Wo; it takes
       tap (fy, fx) when q < N, its input row OutRow0 + Y + fy is a real row inside the tile
       (RowLo <= Y + fy < RowHi) and its input column X - PadL + fx is inside the row. */
    int RowLo = (PadT > InRow0 ? PadT : InRow0) - OutRow0;
    int RowHi = (PadT + Hreal < InRow0 + InRows ? PadT + Hreal : InRow0 + InRows) - OutRow0;
    for (int b = 0; b < (Blocks + {VECTORS - 1}) / {VECTORS} * {VECTORS}; b++) {{
        __m512i Q = _mm512_add_epi32(_mm512_set1_epi32(b * {LANES}),
                                     _mm512_setr_epi32({", ".join(map(str, range(LANES)))}));
        __m512i Y = _mm512_cvttps_epi32(_mm512_div_ps(_mm512_cvtepi32_ps(Q),
                                                      _mm512_set1_ps((float)Wo)));
        __m512i X = _mm512_sub_epi32(Q, _mm512_mullo_epi32(Y, _mm512_set1_epi32(Wo)));
        __mmask16 Outs = _mm512_cmplt_epi32_mask(Q, _mm512_set1_epi32(N));
        __mmask16 Rows[{max_taps}], Cols[{max_taps}];
        for (int fy = 0; fy < Fy; fy++)
            Rows[fy] = Outs & _mm512_cmpge_epi32_mask(Y, _mm512_set1_epi32(RowLo - fy)) &
                       _mm512_cmplt_epi32_mask(Y, _mm512_set1_epi32(RowHi - fy));
        for (int fx = 0; fx < Fx; fx++)
            Cols[fx] = _mm512_cmpge_epi32_mask(X, _mm512_set1_epi32(PadL - fx)) &
                       _mm512_cmplt_epi32_mask(X, _mm512_set1_epi32(W + PadL - fx));
        for (int t = 0; t < Fy * Fx; t++)
            T[b][t] = Rows[t / Fx] & Cols[t % Fx];
    }}
    for (int b = 0; b < Blocks;) {{
        int Whole = Blocks - b >= {VECTORS};  /* a block of {VECTORS} vectors, else of one */
        int q0 = b * {LANES}, Live[{max_taps}], Off[{max_taps}], Safe[{max_taps}], Lives = 0;
        int o = First, Base;
        for (int t = 0; t < Fy * Fx; t++)
            if (Whole ? {" | ".join(f"T[b + {k}][t]" for k in range(VECTORS))} : T[b][t]) {{
                Live[Lives] = t;
                Off[Lives] = t / Fx * W + t % Fx;  /* the tap's input, from lane 0's */
                /* Its vectors inside every input plane of the tile (see Plane below). */
                Base = (OutRow0 - InRow0) * W - PadL + q0 + Off[Lives];
                Safe[Lives++] = Base >= 0 && Base + (Whole ? {VECTORS * LANES} : {LANES}) \
<= InRows * W;
            }}
        if (Whole) {{
{by_features(VECTORS)}
            b += {VECTORS};
        }} else {{
{by_features(1)}
            b += 1;
        }}
    }}
}}

{c_copies(f"{name}_Flat", (*args, ("int", "First"), ("int", "Last")), (CONV_3X3,))}
#endif"""


def _flat_block(feats: int, vectors: int) -> str:
    """``feats`` output features from o over the block of ``vectors`` vectors from b."""
    fs, vecs = range(feats), range(vectors)
    live = [f"__mmask16 K{k} = npk_cols(q0 + {k * LANES}, N);" for k in vecs]
    loads, inputs, terms, stores = _vector_ops(fs, vecs, "Acc + (o + {r}) * N + q0",
                                               "T[b + {k}][t]", "Line", "t", "Safe[l]")
    return f"""\
            {{
{lines("                ", live + loads)}
                for (int i = 0; i < InFeat; i++) {{
                    const float *F = Filter + (o * InFeat + i) * Fy * Fx;
                    const float *Plane = In + (i * InRows + OutRow0 - InRow0) * W - PadL + q0;
                    for (int l = 0; l < Lives; l++) {{
                        int t = Live[l];
                        const float *Line = Plane + Off[l];  /* lane 0's input */
{lines("                        ", inputs + terms)}
                    }}
                }}
{lines("                ", stores)}
            }}"""


# Outputs of a plane the narrow form takes at most (a vector of accumulators each), and the
# input features whose filters it transposes at a time.
NARROW = 4
NARROW_IN = 16


def narrow_dispatch(name: str, args, flt: bool, fits: str) -> str:
    """C of a feature tile's kernel (parameters ``args``) calling ``{name}_Narrow(..., First,
    Last)`` where it applies (``fits``: the kernel's own conditions on its filter and zero
    points), then, in float32, ``{name}_Point`` (``pointwise_dispatch``). A float32
    1x1 plane is faster flattened (its centre tap alone, the filters' other taps not
    transposed); integers flattened feed every tap, so they take it from 1 output."""
    low = 2 if flt else 1
    return f"""
#ifdef NPK_AVX512
    /* Planes of {low} to {NARROW} outputs, 8 output features or more: 16 features to a vector,
       a vector per output (conv_features.narrow_of_features). */
    if (OutRows * Wo >= {low} && OutRows * Wo <= {NARROW} && Last - First >= 8 && {fits}) {{
        {name}_Narrow({", ".join(n for _, n in args)}, First, Last);
        return;
    }}
#endif""" + (pointwise_dispatch(name, args) if flt else "")


# The pointwise form's blocks: output features x vectors of 16 outputs in registers (the
# most features first, then fewer for the rest). 8 x 2 ran 1x1 layers at 67-98 GMAC/s of
# CPU where 4 x 4 ran 48-81 and 6 x 4 54-103 (this AMD EPYC, benchmarks/host_speed.py's
# layers; 6 x 4 lost on 16 output features and on 7x7 planes, blocks of 64 outputs
# leaving most of their lanes empty).
POINT_FEATURES = (8, 4, 2, 1)
POINT_VECTORS = 2


def pointwise_dispatch(name: str, args) -> str:
    """C of a float32 feature tile's kernel (parameters ``args``) calling
    ``{name}_Point(..., First, Last)`` where it applies: a 1x1 filter at stride 1 without
    column padding, rows as wide as the input's, every output row's input line a real row
    inside the tile."""
    return f"""
#ifdef NPK_AVX512
    /* A 1x1 filter over whole rows: the tile's outputs one run (conv_features.pointwise). */
    if (Fx == 1 && Fy == 1 && Sx == 1 && Sy == 1 && PadL == 0 && W == Wo &&
        OutRow0 - PadT >= 0 && OutRow0 + OutRows - PadT <= Hreal && OutRow0 >= InRow0 &&
        OutRow0 + OutRows <= InRow0 + InRows) {{
        {name}_Point({", ".join(n for _, n in args)}, First, Last);
        return;
    }}
#endif"""


def pointwise(name: str, args) -> str:
    """C of ``{name}_Point(..., First, Last)`` (float32; where ``pointwise_dispatch`` calls
    it): output features ``First .. Last-1`` of a 1x1 filter whose output rows read input
    lines that follow each other, so that output q of the tile (``y * Wo + x``) reads
    element q of each input plane from the first output row's line: every output one run
    of ``N = OutRows * Wo``, in blocks of ``POINT_VECTORS`` vectors of 16 outputs without
    tap masks, then single vectors, the last one's lanes past N masked. Each output adds
    the input features in order, a multiply then an add (the plain loops' sums). The blocks
    of outputs outermost, so that a block's inputs stay in the L1 cache across the output
    features."""
    def block(feats: int, vectors: int, masked: bool) -> str:
        vecs = range(vectors)

        def load(k: int, at: str) -> str:
            return f"_mm512_maskz_loadu_ps(K, {at})" if masked else f"_mm512_loadu_ps({at})"

        def store(r: int, k: int) -> str:
            at = f"Acc + (o + {r}) * N + q0 + {k * LANES}"
            return f"_mm512_mask_storeu_ps({at}, K, S{r}{k});" if masked else \
                f"_mm512_storeu_ps({at}, S{r}{k});"
        accs = [f"__m512 S{r}{k} = {load(k, f'Acc + (o + {r}) * N + q0 + {k * LANES}')};"
                for r in range(feats) for k in vecs]
        inputs = [f"__m512 V{k} = {load(k, f'Line + {k * LANES}')};" for k in vecs]
        terms = [f"S{r}{k} = _mm512_add_ps(S{r}{k}, _mm512_mul_ps(V{k}, "
                 f"_mm512_set1_ps(F[{r} * InFeat])));" for r in range(feats) for k in vecs]
        return f"""\
            for (; o + {feats} <= Last; o += {feats}) {{
{lines("                ", accs)}
                for (int i = 0; i < InFeat; i++) {{
                    const float *Line = Src + i * InRows * W + q0, *F = Filter + o * InFeat + i;
{lines("                    ", inputs + terms)}
                }}
{lines("                ", [store(r, k) for r in range(feats) for k in vecs])}
            }}"""

    def blocks(vectors: int, masked: bool) -> str:
        return "\n".join(block(n, vectors, masked) for n in POINT_FEATURES)
    whole = POINT_VECTORS * LANES
    return f"""
#ifdef NPK_AVX512
static NPK_NOINLINE void {name}_Point({c_signature(args)}, int First, int Last)
{{
    /* Output q = y*Wo + x of feature o adds In[i][OutRow0 - InRow0 + y][x] * Filter[o][i]
       for i = 0, 1, ... in order: element q of plane i from Src. Blocks of {whole} outputs
       unmasked (the lanes are outputs, their inputs inside the tile), then vectors of 16,
       the last one's lanes below N alone. */
    int N = OutRows * Wo, q0 = 0;
    const float *Src = In + (OutRow0 - InRow0) * W;
{c_unused("Zin", "Zw", "OutFeat", "Hreal", "PadT", "Fx", "Fy", "Sx", "Sy", "Dx", "Dy")}\
{c_unused("PadL")}\
    for (; q0 + {whole} <= N; q0 += {whole}) {{
        int o = First;
{blocks(POINT_VECTORS, False)}
    }}
    for (; q0 < N; q0 += {LANES}) {{
        int o = First;
        __mmask16 K = npk_cols(q0, N);
{blocks(1, True)}
    }}
}}
#endif"""


def narrow_of_features(name: str, args, max_taps: int, in_dt: str = "float32",
                       w_dt: str = "float32") -> str:
    """C of ``{name}_Narrow(..., First, Last)``: output features ``First .. Last-1`` of
    planes of at most ``NARROW`` outputs (a small image's last layers), 16 output features to
    a vector, a vector per output: where a flattened plane would fill 4 of a vector's 16
    lanes, every lane holds an output. The filters of 16 output features are transposed (16
    x 16 blocks in registers), ``NARROW_IN`` input features at a time, so that a tap's 16
    weights are one vector. Float32 keeps each output's order; integers (int8 or
    uint8 weights, zero points within +-32512) take each product by ``vpmaddwd``, as
    ``layer_conv``'s blocks do (integer sums are exact in any order). Float32: then
    ``{name}_Point`` (``pointwise``), which ``narrow_dispatch`` calls."""
    flt = w_dt == "float32"
    if flt:
        acc, vec, load, store, add = "float", "__m512", "_mm512_maskz_loadu_ps", \
            "_mm512_store_ps", "_mm512_add_ps"
        row = "_mm512_maskz_loadu_ps(M, F + r * Step)"
        weights = "_mm512_store_ps(Wt[c + j], R[j]);"
        term = "_mm512_mul_ps(_mm512_set1_ps(Plane[Src[{q}][l]]), _mm512_load_ps(Wi[Tap[{q}][l]]))"
        order = ("the input broadcast times the tap's weights, a multiply then an add (each "
                 "output's order)")
    else:
        widen = "_mm512_cvtepi8_epi32" if w_dt == "int8" else "_mm512_cvtepu8_epi32"
        acc, vec, load, store, add = "int", "__m512i", "_mm512_maskz_loadu_epi32", \
            "_mm512_store_si512", "_mm512_add_epi32"
        row = (f"_mm512_castsi512_ps(_mm512_sub_epi32({widen}(_mm_maskz_loadu_epi8(M, F + r * "
               f"Step)), _mm512_set1_epi32(Zw)))")
        weights = ("_mm512_store_si512(Wt[c + j], _mm512_and_si512(_mm512_castps_si512(R[j]), "
                   "_mm512_set1_epi32(0xFFFF)));  /* Filter - Zw in the low 16 bits */")
        term = ("_mm512_madd_epi16(_mm512_set1_epi32((int)Plane[Src[{q}][l]] - Zin), "
                "_mm512_load_si512(Wi[Tap[{q}][l]]))")
        order = ("(In - Zin) times the tap's Filter - Zw by vpmaddwd (both fit 16 bits), "
                 "added wrapping")
    sums = "\n".join(f"""\
                for (int l = 0; l < Lives[{q}]; l++)
                    S{q} = {add}(S{q}, {term.format(q=q)});""" for q in range(NARROW))
    return f"""
#ifdef NPK_AVX512
#ifndef NPK_TRANSPOSE16
#define NPK_TRANSPOSE16
/* R[0..15] transposed in place: lane r of R[j] becomes lane j of R[r]. */
static inline NPK_ALWAYS_INLINE void npk_transpose16_ps(__m512 R[16])
{{
    __m512 T[16];
    for (int p = 0; p < 8; p++) {{  /* rows 2p, 2p+1 interleaved, per 128-bit lane */
        T[2 * p] = _mm512_unpacklo_ps(R[2 * p], R[2 * p + 1]);
        T[2 * p + 1] = _mm512_unpackhi_ps(R[2 * p], R[2 * p + 1]);
    }}
    for (int i = 0; i < 4; i++) {{  /* R[4i + k], 128-bit lane m: column 4m + k of rows 4i.. */
        R[4 * i] = _mm512_shuffle_ps(T[4 * i], T[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        R[4 * i + 1] = _mm512_shuffle_ps(T[4 * i], T[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        R[4 * i + 2] = _mm512_shuffle_ps(T[4 * i + 1], T[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        R[4 * i + 3] = _mm512_shuffle_ps(T[4 * i + 1], T[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }}
    for (int k = 0; k < 4; k++) {{  /* 128-bit lanes 0, 2 and 1, 3 of rows 0-7, 8-15 */
        T[k] = _mm512_shuffle_f32x4(R[k], R[4 + k], _MM_SHUFFLE(2, 0, 2, 0));
        T[4 + k] = _mm512_shuffle_f32x4(R[k], R[4 + k], _MM_SHUFFLE(3, 1, 3, 1));
        T[8 + k] = _mm512_shuffle_f32x4(R[8 + k], R[12 + k], _MM_SHUFFLE(2, 0, 2, 0));
        T[12 + k] = _mm512_shuffle_f32x4(R[8 + k], R[12 + k], _MM_SHUFFLE(3, 1, 3, 1));
    }}
    for (int k = 0; k < 4; k++) {{  /* column 4m + k: its four 128-bit lanes gathered */
        R[k] = _mm512_shuffle_f32x4(T[k], T[8 + k], _MM_SHUFFLE(2, 0, 2, 0));
        R[8 + k] = _mm512_shuffle_f32x4(T[k], T[8 + k], _MM_SHUFFLE(3, 1, 3, 1));
        R[4 + k] = _mm512_shuffle_f32x4(T[4 + k], T[12 + k], _MM_SHUFFLE(2, 0, 2, 0));
        R[12 + k] = _mm512_shuffle_f32x4(T[4 + k], T[12 + k], _MM_SHUFFLE(3, 1, 3, 1));
    }}
}}
#endif
static NPK_NOINLINE void {name}_Narrow({c_signature(args)}, int First, int Last)
{{
    /* Planes of up to {NARROW} outputs: 16 output features to a vector, one vector per output q
       (S{{q}}, lane r: feature o + r). Output q adds, for each input feature in order, its
       live taps (Tap[q]: those whose row is a real row inside the tile and whose column is
       inside the row, in (fy, fx) order), {order}. Wt holds
       the filters of the 16 features for {NARROW_IN} input features, transposed:
       Wt[i * Taps + t] lane r is tap t of input feature i of feature o + r. */
    int N = OutRows * Wo, Taps = Fy * Fx, Step = InFeat * Taps;
    int Lives[{NARROW}] = {{0}}, Tap[{NARROW}][{max_taps}], Src[{NARROW}][{max_taps}];
    {acc} Wt[{NARROW_IN * max_taps}][16] __attribute__((aligned(64)));
    {acc} Q[{NARROW}][16] __attribute__((aligned(64)));
{c_unused(*(("Zin", "Zw") if flt else ()), "OutFeat")}\
    for (int q = 0; q < N; q++) {{
        int Y = q / Wo, X = q - Y * Wo;
        for (int t = 0; t < Taps; t++) {{
            int P = (OutRow0 + Y) * Sy + t / Fx * Dy, L = P - InRow0;
            int Col = X * Sx - PadL + t % Fx * Dx;
            if (P - PadT >= 0 && P - PadT < Hreal && L >= 0 && L < InRows && Col >= 0 &&
                Col < W) {{
                Tap[q][Lives[q]] = t;
                Src[q][Lives[q]++] = L * W + Col;  /* the input, in its plane */
            }}
        }}
    }}
    for (int o = First; o < Last; o += 16) {{
        int No = Last - o < 16 ? Last - o : 16;
        __mmask16 K = (__mmask16)((1u << No) - 1u);
        {vec} S0, S1, S2, S3;
        for (int q = 0; q < N; q++)
            for (int r = 0; r < No; r++) Q[q][r] = Acc[(o + r) * N + q];
        S0 = {load}(K, Q[0]);
        S1 = {load}(N > 1 ? K : 0, Q[1]);
        S2 = {load}(N > 2 ? K : 0, Q[2]);
        S3 = {load}(N > 3 ? K : 0, Q[3]);
        for (int i0 = 0; i0 < InFeat; i0 += {NARROW_IN}) {{
            int Ni = InFeat - i0 < {NARROW_IN} ? InFeat - i0 : {NARROW_IN}, Cols = Ni * Taps;
            for (int c = 0; c < Cols; c += 16) {{  /* 16 columns (i, t) at a time */
                __mmask16 M = npk_cols(0, Cols - c);
                const {layer_c_type(w_dt)} *F = Filter + o * Step + i0 * Taps + c;
                __m512 R[16];
                for (int r = 0; r < 16; r++)
                    R[r] = r < No ? {row} : _mm512_setzero_ps();
                npk_transpose16_ps(R);
                for (int j = 0; j < 16 && c + j < Cols; j++)
                    {weights}
            }}
            for (int i = 0; i < Ni; i++) {{
                const {layer_c_type(in_dt)} *Plane = In + (i0 + i) * InRows * W;
                const {acc} (*Wi)[16] = (const {acc} (*)[16])(Wt + i * Taps);
{sums}
            }}
        }}
        {store}(Q[0], S0);
        {store}(Q[1], S1);
        {store}(Q[2], S2);
        {store}(Q[3], S3);
        for (int q = 0; q < N; q++)
            for (int r = 0; r < No; r++) Acc[(o + r) * N + q] = Q[q][r];
    }}
}}
#endif""" + (pointwise(name, args) if flt else "")

def _vector_ops(fs, vecs, acc: str, tap_mask: str, line: str, tap: str, safe: str,
                strided=False, rows=False):
    """The C lines of a block of features ``fs`` x vectors ``vecs`` (accumulators S{r}{k}
    at ``acc`` + 16 k, ``acc`` naming feature r's first column): their loads; each tap's
    input vectors (lanes ``tap_mask`` of vector k, from ``line`` + 16 k; ``strided``: at
    column stride Sx 2, the even lanes of the 32 columns from ``line`` + 32 k, loading
    lanes Lo{k}[fx] and Hi{k}[fx]); each feature's masked product-then-add with its weight
    F[r * Step + ``tap``]; their stores.

    Where ``safe`` (C: the vectors lie inside the input tile, ``In[0 .. InFeat * InRows *
    W)``, whichever the input feature) the inputs are loaded unmasked: the lanes off the
    tap's row are read, never added. ``rows`` (a row's blocks): a vector whose every output
    takes the tap adds unmasked, its other lanes being no outputs (never stored). On this
    AMD EPYC (Zen 5) the masked loads and adds took a third of a 3x3 layer's time at 56x56
    (benchmarks/host_speed.py's layers); a flattened plane's vectors hold a row's ends (its
    taps' masks rarely full), where the test costs more than it saves."""
    loads = [f"__m512 S{r}{k} = _mm512_maskz_loadu_ps(K{k}, {acc.format(r=r)} + {k * LANES});"
             for r in fs for k in vecs]
    stores = [f"_mm512_mask_storeu_ps({acc.format(r=r)} + {k * LANES}, K{k}, S{r}{k});"
              for r in fs for k in vecs]

    def vin(k: int) -> str:
        one = f"_mm512_maskz_loadu_ps({tap_mask.format(k=k)}, {line} + {k * LANES})"
        return one if not strided else \
            f"Sx == 1 ? {one} : npk_even_ps({line} + {2 * k * LANES}, Lo{k}[fx], Hi{k}[fx])"
    inputs = [f"__m512 {', '.join(f'V{k}' for k in vecs)};",
              f"if ({safe}) {{  /* inside the tile: unmasked loads */"]
    even = ("_mm512_permutex2var_ps(_mm512_loadu_ps({at}), _mm512_setr_epi32("
            f"{', '.join(str(2 * j) for j in range(LANES))}), _mm512_loadu_ps({{at}} + {LANES}))")
    inputs += [f"    V{k} = _mm512_loadu_ps({line} + {k * LANES});" if not strided else
               f"    V{k} = Sx == 1 ? _mm512_loadu_ps({line} + {k * LANES}) : "
               f"{even.format(at=f'{line} + {2 * k * LANES}')};" for k in vecs]
    inputs += ["} else {"] + [f"    V{k} = {vin(k)};" for k in vecs] + ["}"]

    def add(r: int, k: int, masked: bool) -> str:
        product = f"_mm512_mul_ps(V{k}, _mm512_set1_ps(F[{r} * Step + {tap}]))"
        if masked:
            return (f"S{r}{k} = _mm512_mask_add_ps(S{r}{k}, {tap_mask.format(k=k)}, S{r}{k}, "
                    f"{product});")
        return f"S{r}{k} = _mm512_add_ps(S{r}{k}, {product});"
    if not rows:
        return loads, inputs, [add(r, k, True) for r in fs for k in vecs], stores
    terms = [f"if ({tap_mask.format(k=k)} == K{k}) {{  /* every output of vector {k} */\n"
             + "\n".join("    " + add(r, k, False) for r in fs)
             + "\n} else {\n"
             + "\n".join("    " + add(r, k, True) for r in fs) + "\n}" for k in vecs]
    return loads, inputs, terms, stores


def lines(margin: str, rows) -> str:
    """C statements ``rows``, one a line (or several), each line after ``margin`` (the
    template's spaces)."""
    return "\n".join(margin + line for r in rows for line in r.split("\n"))


def tap_masks(vecs, max_fx: int) -> list[str]:
    """C of the tap masks of a row block's vectors ``vecs``, the same for every filter row
    (and input feature): ``T{k}[fx]``, the lanes of vector k that are outputs (``K{k}``) and
    whose column of tap fx is inside the row; at column stride 2 also ``Lo{k}[fx]`` and
    ``Hi{k}[fx]``, the lanes of the 32 columns its inputs are loaded from."""
    return [f"__mmask16 T{k}[{max_fx}], Lo{k}[{max_fx}], Hi{k}[{max_fx}];" for k in vecs] + [
        f"for (int fx = 0; fx < Fx; fx++) {{\n"
        f"    int C = x * Sx - PadL + fx * Dx + {k * LANES} * Sx;  /* lane 0's column */\n"
        f"    T{k}[fx] = K{k} & npk_cols_step(C, W, Sx);\n"
        f"    Lo{k}[fx] = npk_cols(C, W);\n"
        f"    Hi{k}[fx] = npk_cols(C + {LANES}, W);\n"
        f"}}" for k in vecs]


# The activations ``npk_act`` numbers (0 none, 1 ReLU, 2 leaky ReLU, 3 clip, 4 sigmoid, 5 tanh,
# 6 hard sigmoid, 7 hard swish).
ACTS = 8


def act_row(name: str) -> tuple[str, str, str]:
    """For float ``KerConvOut`` ``name``: the C of ``int {name}_ActRow(Acc, Out, N, Act, A0,
    A1)`` (``Out[x] = npk_act(Acc[x], Act, A0, A1)`` for x < N; returns N), then the opening
    and the closing of the loop over a row's outputs that calls it first where the window is
    one accumulator at column stride 1 and not averaged (an average adds V to 0.0f: -0.0
    becomes +0.0), the plain loop finishing the row. One loop per activation, its number a
    constant there, so that the compiler vectorises the plain ones (a scalar call per
    output, the switch inside, cost a float 1x1 convolution two thirds of its time); the
    same function, the same values."""
    cases = "\n".join(f"    case {a}: for (int x = 0; x < N; x++) Out[x] = npk_act(Acc[x], {a}, "
                      f"A0, A1); break;" for a in range(ACTS))
    helper = f"""
static int {name}_ActRow(const float *__restrict__ Acc, float *__restrict__ Out, int N,
                         int Act, float A0, float A1)
{{
    switch (Act) {{
{cases}
    default: for (int x = 0; x < N; x++) Out[x] = npk_act(Acc[x], Act, A0, A1);
    }}
    return N;
}}""" + _max_row(name)
    row_open = f"""\
    for (int y = First; y < Last; y++) {{
        int x = 0;
        /* A window of one accumulator: the row's outputs a vector at a time. */
        if (Fx == 1 && Fy == 1 && Sx == 1 && Oper != 2 && (OutRow0 + y) * Sy < Hc)
            x = {name}_ActRow(Acc + ((OutRow0 + y) * Sy - AccRow0) * Wc, Out + y * Wo,
                              Wo < Wc ? Wo : Wc, Act, A0, A1);
#ifdef NPK_AVX512
        /* A max pooling window of up to 3x3 at column stride 1 or 2: vectors of outputs. */
        else if (Oper == 1 && Fx >= 1 && Fx <= 3 && Fy >= 1 && Fy <= 3 && (Sx == 1 || Sx == 2)
                 && (OutRow0 + y) * Sy < Hc)
            x = {name}_MaxRow(Acc + ((OutRow0 + y) * Sy - AccRow0) * Wc, Wc,
                              Hc - (OutRow0 + y) * Sy < Fy ? Hc - (OutRow0 + y) * Sy : Fy,
                              Out + y * Wo, Wo, Fx, Sx, Act, A0, A1);
#endif
        for (; x < Wo; x++) {{"""
    return helper, row_open, "    }\n"


def _max_row(name: str) -> str:
    """C of ``int {name}_MaxRow(Acc, Wc, Rows, Out, Wo, Fx, Sx, Act, A0, A1)``: the outputs
    of a row max pooling ``Rows`` (1-3) accumulator rows from ``Acc`` (``Wc`` apart), windows
    of ``Fx`` (1-3) columns at stride ``Sx`` (1 or 2), from output 0 while the window lies
    inside the row; returns how many (the plain loop does the rest). As the plain loop: each
    accumulator activated (``{name}_ActRow``, into a buffer of a chunk of 64 outputs'
    columns), the taps in (fy, fx) order, M = V > M ? V : M (``vmaxps`` of V and M gives M
    when either is NaN or they are equal, as the plain loop keeps M). The plain loop took
    five sixths of squeezenet1_1's first layer, its 3x3 max pooling fused."""
    even = ", ".join(str(2 * j) for j in range(LANES))
    return f"""
{AVX512_HELPERS}
#ifdef NPK_AVX512
static int {name}_MaxRow(const float *__restrict__ Acc, int Wc, int Rows,
                         float *__restrict__ Out, int Wo, int Fx, int Sx, int Act, float A0,
                         float A1)
{{
    /* R: the activated accumulators of a chunk's columns, 32 floats of slack for the last
       vector's loads (lanes past the chunk: computed, never stored). */
    float R[3][64 * 2 + 3 + 32] = {{{{0.0f}}}};
    const __m512i Even = _mm512_setr_epi32({even});
    int X1 = Wc < Fx ? 0 : (Wc - Fx) / Sx + 1;  /* the windows inside the row */
    X1 = X1 < Wo ? X1 : Wo;
    for (int x0 = 0; x0 < X1; x0 += 64) {{
        int N = X1 - x0 < 64 ? X1 - x0 : 64, Cols = (N - 1) * Sx + Fx;
        for (int fy = 0; fy < Rows; fy++)
            {name}_ActRow(Acc + fy * Wc + x0 * Sx, R[fy], Cols, Act, A0, A1);
        for (int j = 0; j < N; j += {LANES}) {{
            __m512 M = _mm512_setzero_ps();
            for (int fy = 0; fy < Rows; fy++)
                for (int fx = 0; fx < Fx; fx++) {{
                    const float *P = R[fy] + j * Sx + fx;
                    __m512 V = Sx == 1 ? _mm512_loadu_ps(P) : _mm512_permutex2var_ps(
                        _mm512_loadu_ps(P), Even, _mm512_loadu_ps(P + {LANES}));
                    M = fy == 0 && fx == 0 ? V : _mm512_max_ps(V, M);
                }}
            _mm512_mask_storeu_ps(Out + x0 + j, npk_cols(j, N), M);
        }}
    }}
    return X1;
}}
#endif"""


def one_run(name: str, vectors: str, row_open: str) -> tuple[str, str]:
    """Float32 ``KerConvOut`` ``name``'s helpers ``vectors`` and its loop's opening
    ``row_open`` with, before the loop, this core's rows as one run of outputs through
    ``{name}_ActRow`` where each output's window is one accumulator, a plane as wide as its
    accumulators (``Wc == Wo``: rows follow each other) and every row exists; the plain
    loop's values. Small planes (7x7, 14x14) otherwise pay a row's set-up for a few outputs.
    (Integer outputs take ``conv_requant.requant_one_run``.)"""
    run = f"""\
    /* A window of one accumulator, rows as wide as the accumulators', every row existing:
       this core's rows as one run. */
    if (Fx == 1 && Fy == 1 && Sx == 1 && Sy == 1 && Wc == Wo && Oper != 2 && First < Last &&
        OutRow0 + Last <= Hc) {{
        {name}_ActRow(Acc + (OutRow0 + First - AccRow0) * Wc, Out + First * Wo,
            (Last - First) * Wo, Act, A0, A1);
        return;
    }}
"""
    return vectors, run + row_open
