"""The float32 feature tile vectorised across output features (``convolution.layer_conv(
planes=True)``, AVX-512), as ONNX Runtime's MLAS convolutions are: 16 output features to a
vector, the input broadcast, several outputs' vectors in registers. Where a plane's rows
are short (14x14, 7x7) or read at column stride 2, a vector of a row's outputs leaves most
of its lanes empty or loads its inputs through permutes; 16 features a vector fills every
lane whatever the plane.

Each output still adds the input features in order, each one's live taps in (fy, fx) order,
a multiply then an add (no fused multiply-add): the bits of the plain loops. A tap on
padding is not added (never an add of zero, which would turn a -0.0 into +0.0): the outputs
whose taps all lie inside the row run in blocks of ``PIXELS``, the others one at a time over
their own taps.

The accumulators of a band of rows are copied into ``S`` (output-major: an output's
features side by side, so that its vectors load whole) and back; the filters are
transposed into ``Wp`` (a tap's features side by side), ``CHAN_COLS`` columns (input
feature, tap) at a time, before the band's outputs read them. Both copies cost about one
element move per accumulator and per weight, against the ``OutRows * Wo`` multiply-adds
each weight takes.
"""

from __future__ import annotations

from .common import LANES, c_copies, c_filter_rows, c_pick_copy, c_signature, c_unused
from .conv_features import NARROW

# Output features of a group: ``GROUPS[0]`` vectors.
CHAN_FEATS = 64
# The columns (input feature, tap) of the filters transposed at a time: 16 input features of
# a 3x3 filter, 144 of a 1x1, 2 of a 7x7 (36 KiB on the stack); a filter of more taps is not
# taken.
CHAN_COLS = 144
# Outputs of a band of rows at most (its accumulators' copy: 64 KiB on the stack).
CHAN_PIX = 256
# Output features a core takes (a multiple of them): two vectors. The graph's calls give a
# core 4 or 8 features of a tile of 32 or 64. The kernel alone, 8 cores on one thread, 3x3
# layers of 64 features at 14x14 and 7x7, CPU against the rows' forms (interleaved, load
# 10-13): 16 a core 1.16x and 1.00x, 32 1.22-1.24x and 1.12-1.22x, 64 1.24-1.25x and
# 1.34-1.50x. 32 keeps two threads on a tile of 64 (at 64 one core, so one thread, would
# take it whole).
SPLIT = 32
# Vectors of output features (the most first; a group of up to 32 features takes 2, fewer
# than 17 too: a kernel of one vector's blocks cost compile time for the rest of a tile
# alone), and outputs of a row, a block holds: 6 x 4 = 24 accumulators of the 32 registers,
# the 4 weight vectors and a broadcast input beside them (MLAS's blocking); the outputs
# inside a row greedily in blocks of 6, 5, 4 (a 7x7 plane's row: 1 + 5 + 1).
GROUPS = (4, 2)
PIXELS = (6, 5, 4, 1)

# Chan's copies with the filter's shape constant: 3x3 at stride 1 alone (most of a CNN's
# work). Compile CPU of the float32 feature tile's kernel (cc -O3 -march=native -c, load
# 11-15): 6.1-6.9 s without Chan, 8.4-9.0 s with this copy, 10.0-10.9 s with 3x3 s2 and
# 1x1 s2 copies and one-vector groups too; the shapes without a copy run 6-15% slower than
# with one (kernel alone).
CHAN_SHAPES = (("3x3", dict(Fx=3, Fy=3, Sx=1, Sy=1, Dx=1, Dy=1)),)


def channels_dispatch(name: str, args) -> str:
    """C of a float32 feature tile's kernel (parameters ``args``) calling ``{name}_Chan(...,
    F0, F1)`` where it applies: 16 output features or more, planes of more than
    ``conv_features.NARROW`` outputs (fewer: the narrow form's), a filter of up to
    ``CHAN_COLS`` taps, rows of up to ``CHAN_PIX`` outputs. The cores share the output
    features in whole vectors (``SPLIT`` features a core, or a multiple), so that a core's
    vectors are full. Whether it applies depends on the call's arguments alone, never on the
    core, so that every core of a call shares the features the same way."""
    return f"""
#ifdef NPK_AVX512
    /* 16 output features to a vector (conv_channels), {SPLIT} or a multiple to a core. */
    if (OutFeat >= {LANES} && OutRows * Wo > {NARROW} && Fx * Fy <= {CHAN_COLS} &&
        Wo <= {CHAN_PIX}) {{
        int Per = ((OutFeat + gap_ncore() - 1) / gap_ncore() + {SPLIT - 1}) / {SPLIT} * {SPLIT};
        int F0 = gap_coreid() * Per, F1 = F0 + Per < OutFeat ? F0 + Per : OutFeat;
        if (F0 < F1) {{
{c_pick_copy(f"{name}_Chan", (*args, ("int", "First"), ("int", "Last")), CHAN_SHAPES,
             "            ", dict(First="F0", Last="F1"))}
        }}
        return;
    }}
#endif"""


def _run(name: str, pixels: int, groups: int) -> str:
    """C of ``{name}_Run{pixels}x{groups}``: ``pixels`` outputs of a row from the one whose
    input (tap (Fy0, 0) of input feature i0) is at ``Line``, ``groups`` vectors of features;
    each output's taps ``Fx0 <= fx < Fx1`` of filter rows ``0 .. Fyn`` (from ``Fy0``)."""
    ps, gs = range(pixels), range(groups)
    acc = [f"__m512 A{p}{g} = _mm512_load_ps(S + {p * CHAN_FEATS + g * LANES});"
           for p in ps for g in gs]
    weights = [f"__m512 W{g} = _mm512_load_ps(Wf + {g * LANES});" for g in gs]
    terms = []
    for p in ps:
        terms.append(f"B = _mm512_set1_ps(L[{p} * Sx + fx * Dx]);")
        terms += [f"A{p}{g} = _mm512_add_ps(A{p}{g}, _mm512_mul_ps(B, W{g}));" for g in gs]
    stores = [f"_mm512_store_ps(S + {p * CHAN_FEATS + g * LANES}, A{p}{g});"
              for p in ps for g in gs]
    m = "    "
    return f"""
static inline NPK_ALWAYS_INLINE void {name}_Run{pixels}x{groups}(
    const float *__restrict__ Line, int Sx, int Dx, int Fx, int Fx0, int Fx1, int Fyn,
    int RowStep, int Plane, int Ni, int Taps, const float *__restrict__ Wp,
    float *__restrict__ S)
{{
    /* Output p's input of tap (fy, fx), input feature i: Line[i * Plane + fy * RowStep +
       p * Sx + fx * Dx]; its features' weights: Wp[((i * Taps) + fy * Fx + fx) * {CHAN_FEATS}]. */
{m}{f"{chr(10)}{m}".join(acc)}
    for (int i = 0; i < Ni; i++)
        for (int fy = 0; fy < Fyn; fy++) {{
            const float *L = Line + i * Plane + fy * RowStep;
            const float *Wr = Wp + (i * Taps + fy * Fx) * {CHAN_FEATS};
            for (int fx = Fx0; fx < Fx1; fx++) {{
                const float *Wf = Wr + fx * {CHAN_FEATS};
                __m512 B;
                {f"{chr(10)}                ".join(weights + terms)}
            }}
        }}
{m}{f"{chr(10)}{m}".join(stores)}
}}"""


def channels(name: str, args, line_ok: str) -> str:
    """C of ``{name}_Chan_{{shape}}(..., First, Last)``: output features ``First .. Last-1``
    of a float32 feature tile, ``GROUPS`` vectors of 16 features at a time, each band of
    rows (up to ``CHAN_PIX`` outputs) in blocks of ``PIXELS`` outputs of a row."""
    runs = "".join(_run(name, p, g) for g in GROUPS for p in PIXELS)
    sig = c_signature(args)

    def call(p: int, x0: str, x1: str) -> str:
        run = ", ".join(("Row + x * Sx", "Sx", "Dx", "Fx", x0, x1, "Fy1 - Fy0", "Dy * W",
                         "InRows * W", "Ni", "Taps", "Wr", f"Sr + x * {CHAN_FEATS}"))
        return f"G == 4 ? {name}_Run{p}x4({run}) : {name}_Run{p}x2({run})"
    blocks = "".join(f"""\
                        {'if' if k == 0 else '} else if'} (x >= Xa && x + {p} <= Xb) {{
                            {call(p, "0", "Fx")};
                            x += {p};
""" for k, p in enumerate(PIXELS[:-1])) + f"""\
                        }} else {{
                            {call(1, "Fx0[x]", "Fx1[x]")};
                            x += 1;
                        }}"""
    return f"""
#ifdef NPK_AVX512{runs}

static inline NPK_ALWAYS_INLINE void {name}_Chan({sig}, int First, int Last)
{{
    /* Output features o .. o+63 at a time (16 to a vector, G vectors), rows in bands of
       {CHAN_PIX} outputs at most: the band's accumulators copied into S (output q's
       features at S[q * {CHAN_FEATS}]), then, for input features i0 .. i0+Chunk-1 in order,
       their filters transposed into Wp and each row's outputs run over them: those whose
       taps all lie inside the row ([Xa, Xb)) {' or '.join(map(str, PIXELS[:-1]))} at a \
time, the others alone over
       their live taps (Fx0[x] .. Fx1[x]); the filter rows Fy0 .. Fy1 whose line exists.
       Then S copied back. */
    int N = OutRows * Wo, Taps = Fx * Fy, Step = InFeat * Taps, Band = {CHAN_PIX} / Wo;
    int Xa = Wo, Xb = 0, Fx0[{CHAN_PIX}], Fx1[{CHAN_PIX}];
    int Chunk = {CHAN_COLS} / Taps;  /* the input features whose filters Wp holds */
    float S[{CHAN_PIX * CHAN_FEATS}] __attribute__((aligned(64)));
    float Wp[{CHAN_COLS * CHAN_FEATS}] __attribute__((aligned(64)));
{c_unused("Zin", "Zw", "OutFeat")}\
    for (int x = 0; x < Wo; x++) {{
        int f0 = 0, f1;
        while (f0 < Fx && x * Sx - PadL + f0 * Dx < 0) f0++;
        for (f1 = f0; f1 < Fx && x * Sx - PadL + f1 * Dx < W; f1++) {{}}
        Fx0[x] = f0;
        Fx1[x] = f1;
        if (f0 == 0 && f1 == Fx) {{  /* (these outputs follow each other) */
            Xa = x < Xa ? x : Xa;
            Xb = x + 1;
        }}
    }}
    for (int o = First; o < Last; o += {CHAN_FEATS}) {{
        int Nf = Last - o < {CHAN_FEATS} ? Last - o : {CHAN_FEATS};
        int G = Nf > 32 ? 4 : 2;  /* vectors of features */
        for (int y0 = 0; y0 < OutRows; y0 += Band) {{
            int y1 = y0 + Band < OutRows ? y0 + Band : OutRows, n = (y1 - y0) * Wo;
            /* S[q * {CHAN_FEATS} + f] = Acc[o + f][y0 * Wo + q]: 16 features x 16 outputs
               transposed at a time; the features past Nf zeros, never stored. */
            for (int g = 0; g < G; g++)
                for (int q0 = 0; q0 < n; q0 += {LANES}) {{
                    __mmask16 M = npk_cols(q0, n);
                    __m512 R[{LANES}];
                    for (int r = 0; r < {LANES}; r++)
                        R[r] = g * {LANES} + r < Nf ? _mm512_maskz_loadu_ps(
                            M, Acc + (o + g * {LANES} + r) * N + y0 * Wo + q0) :
                            _mm512_setzero_ps();
                    npk_transpose16_ps(R);
                    for (int j = 0; j < {LANES} && q0 + j < n; j++)
                        _mm512_store_ps(S + (q0 + j) * {CHAN_FEATS} + g * {LANES}, R[j]);
                }}
            for (int i0 = 0; i0 < InFeat; i0 += Chunk) {{
                int Ni = InFeat - i0 < Chunk ? InFeat - i0 : Chunk, Cols = Ni * Taps;
                /* Wp[c * {CHAN_FEATS} + f]: column c = i * Taps + t of feature o + f's filter. */
                for (int g = 0; g < G; g++)
                    for (int c = 0; c < Cols; c += {LANES}) {{
                        __mmask16 M = npk_cols(0, Cols - c);
                        __m512 R[{LANES}];
                        for (int r = 0; r < {LANES}; r++)
                            R[r] = g * {LANES} + r < Nf ? _mm512_maskz_loadu_ps(
                                M, Filter + (o + g * {LANES} + r) * Step + i0 * Taps + c) :
                                _mm512_setzero_ps();
                        npk_transpose16_ps(R);
                        for (int j = 0; j < {LANES} && c + j < Cols; j++)
                            _mm512_store_ps(Wp + (c + j) * {CHAN_FEATS} + g * {LANES}, R[j]);
                    }}
                for (int y = y0; y < y1; y++) {{
                    int P0 = (OutRow0 + y) * Sy, Fy0 = 0, Fy1;
                    const float *Row, *Wr;
                    float *Sr = S + (y - y0) * Wo * {CHAN_FEATS};
{c_filter_rows(line_ok, "                    ")}
                    if (Fy0 >= Fy1) continue;
                    Row = In + (i0 * InRows + P0 + Fy0 * Dy - InRow0) * W - PadL;
                    Wr = Wp + Fy0 * Fx * {CHAN_FEATS};
                    for (int x = 0; x < Wo;) {{
{blocks}
                    }}
                }}
            }}
            /* And back: output q's vectors transposed into the features' rows. */
            for (int g = 0; g < G; g++)
                for (int q0 = 0; q0 < n; q0 += {LANES}) {{
                    __mmask16 M = npk_cols(q0, n);
                    __m512 R[{LANES}];
                    for (int j = 0; j < {LANES}; j++)
                        R[j] = q0 + j < n ? _mm512_load_ps(
                            S + (q0 + j) * {CHAN_FEATS} + g * {LANES}) : _mm512_setzero_ps();
                    npk_transpose16_ps(R);
                    for (int r = 0; r < {LANES} && g * {LANES} + r < Nf; r++)
                        _mm512_mask_storeu_ps(Acc + (o + g * {LANES} + r) * N + y0 * Wo + q0, M,
                                              R[r]);
                }}
        }}
    }}
}}

{c_copies(f"{name}_Chan", (*args, ("int", "First"), ("int", "Last")), CHAN_SHAPES)}
#endif"""
