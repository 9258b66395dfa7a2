"""The float32 feature tile's register blocks (``convolution.layer_conv(planes=True)``,
AVX-512): several output features' accumulators in registers at once, so that each input
vector loaded serves all of them. Each accumulator still adds the input features in order,
each one's taps in (fy, fx) order, a multiply then an add (no fused multiply-add), a tap on
padding masked off its lane: the bits of the one-feature loops.
"""

from __future__ import annotations

from .common import LANES, c_filter_rows, c_signature

# Output features a block holds, the most first, then fewer for the rest (the features a
# core takes need not be a multiple of 4), times up to ``ROW_VECTORS`` vectors of a row's
# columns or ``VECTORS`` vectors of a flattened plane: at most 16 accumulators of the 32
# registers, the input vectors and broadcast weights beside them. (Rows: 8 accumulators
# leave the compiler room for the masked adds' operands; 16 measured slower.)
FEATURES = (4, 2)
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
    (void)Zin;
    (void)Zw;
    for (int y = 0; y < OutRows; y++) {{
        int P0 = (OutRow0 + y) * Sy, Fy0 = 0, Fy1;
        float *A = Acc + o * Plane + y * Wo;
{c_filter_rows(line_ok, "        ")}
        for (int x = 0; x < Wo;)
{blocks}
    }}
}}
#endif"""


def _block(n: int, max_fx: int, feats: int) -> str:
    """One block: ``n`` vectors of columns from x of ``feats`` features."""
    fs, vecs = range(feats), range(n)
    live = [f"__mmask16 K{k} = npk_cols(x + {k * LANES}, Wo);" for k in vecs]
    masks = [f"__mmask16 T{k}[{max_fx}], Lo{k}[{max_fx}], Hi{k}[{max_fx}];" for k in vecs] + [
        f"for (int fx = 0; fx < Fx; fx++) {{\n"
        f"    int C = x * Sx - PadL + fx * Dx + {k * LANES} * Sx;  /* lane 0's column */\n"
        f"    T{k}[fx] = K{k} & npk_cols_step(C, W, Sx);\n"
        f"    Lo{k}[fx] = npk_cols(C, W);  /* at stride 2, the 32 columns to load */\n"
        f"    Hi{k}[fx] = npk_cols(C + {LANES}, W);\n"
        f"}}" for k in vecs]
    loads, inputs, terms, stores = _vector_ops(fs, vecs, "A + {r} * Plane + x", "T{k}[fx]",
                                               "Line + C", "fx", strided=True)
    return f"""\
        /* Columns x .. x+{n * LANES - 1} (those below Wo) of the {feats} features: \
{n * feats} vectors of
           accumulators; the tap masks, the same for every input feature, once per block. */
        {{
{lines("            ", live + masks + loads)}
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
    (void)Zin;
    (void)Zw;
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
        int q0 = b * {LANES}, Live[{max_taps}], Off[{max_taps}], Lives = 0, o = First;
        for (int t = 0; t < Fy * Fx; t++)
            if (Whole ? {" | ".join(f"T[b + {k}][t]" for k in range(VECTORS))} : T[b][t]) {{
                Live[Lives] = t;
                Off[Lives++] = t / Fx * W + t % Fx;  /* the tap's input, from lane 0's */
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
#endif"""


def _flat_block(feats: int, vectors: int) -> str:
    """``feats`` output features from o over the block of ``vectors`` vectors from b."""
    fs, vecs = range(feats), range(vectors)
    live = [f"__mmask16 K{k} = npk_cols(q0 + {k * LANES}, N);" for k in vecs]
    loads, inputs, terms, stores = _vector_ops(fs, vecs, "Acc + (o + {r}) * N + q0",
                                               "T[b + {k}][t]", "Line", "t")
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


def _vector_ops(fs, vecs, acc: str, tap_mask: str, line: str, tap: str, strided=False):
    """The C lines of a block of features ``fs`` x vectors ``vecs`` (accumulators S{r}{k}
    at ``acc`` + 16 k, ``acc`` naming feature r's first column): their loads; each tap's
    input vectors (lanes ``tap_mask`` of vector k, from ``line`` + 16 k; ``strided``: at
    column stride Sx 2, the even lanes of the 32 columns from ``line`` + 32 k, loading
    lanes Lo{k}[fx] and Hi{k}[fx]); each feature's masked product-then-add with its weight
    F[r * Step + ``tap``]; their stores."""
    loads = [f"__m512 S{r}{k} = _mm512_maskz_loadu_ps(K{k}, {acc.format(r=r)} + {k * LANES});"
             for r in fs for k in vecs]
    inputs = [f"__m512 V{k} = _mm512_maskz_loadu_ps({tap_mask.format(k=k)}, {line} + "
              f"{k * LANES});" for k in vecs]
    if strided:
        inputs = [f"__m512 V{k} = Sx == 1 ? _mm512_maskz_loadu_ps({tap_mask.format(k=k)}, "
                  f"{line} + {k * LANES}) : npk_even_ps({line} + {2 * k * LANES}, Lo{k}[fx], "
                  f"Hi{k}[fx]);" for k in vecs]
    terms = [f"S{r}{k} = _mm512_mask_add_ps(S{r}{k}, {tap_mask.format(k=k)}, S{r}{k}, "
             f"_mm512_mul_ps(V{k}, _mm512_set1_ps(F[{r} * Step + {tap}])));"
             for r in fs for k in vecs]
    stores = [f"_mm512_mask_storeu_ps({acc.format(r=r)} + {k * LANES}, K{k}, S{r}{k});"
              for r in fs for k in vecs]
    return loads, inputs, terms, stores


def lines(margin: str, rows) -> str:
    """C statements ``rows``, one a line, each after ``margin`` (the template's spaces)."""
    return "\n".join(margin + r for r in rows)
