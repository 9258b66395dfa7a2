"""The integer depthwise convolution of a tile of features in one call, requantised in the
same pass (``dw_conv_requant``): the host schedule's kernel for an int8 or uint8 depthwise
layer (a MobileNet's), where the GAP AutoTiler's generators make three calls a plane (bias,
one-plane convolution into int32 accumulators, requantisation of the accumulators).

Plane ``f`` of the tile: ``Out[f][y][x] = requant(Bias[f] + sum((In - Zin) * (Filter - Zw)),
Scale[f], Zout, Lo, Hi)``, the sum over the taps ``(fy, fx)`` that read the input (taps on
padding add nothing), wrapped to int32 as the one-plane kernel's accumulator; the same bytes
as ``convolution.set_bias`` + ``layer_conv`` + ``conv_out`` (integer sums are exact in any
order, the requantisation is ``npk_requant`` lane by lane).

Where the compiler targets AVX-512 VNNI and VBMI (``conv_int.VNNI_HELPERS``), the weights
less ``Zw`` signed bytes (int8 weights with ``Zw`` 0, ONNX Runtime's symmetric ones), the
column stride 1 or 2, no column dilation: 16 outputs a vector, a filter row's taps four to a
``vpdpbusd`` quad (the fourth weight 0), as ``conv_int``'s VNNI form:

- an input byte enters as ``x + Off`` (``Off`` 128 for int8: ``x ^ 0x80``), a tap on padding as
  ``Zin + Off``, and each output starts at ``Bias - (Zin + Off) * sum(Filter - Zw)``: every tap
  then adds ``(x - Zin) * (w - Zw)``, one on padding nothing, so the padding is the load's
  mask (bytes outside the row or the tile are the pad byte), never a copy;
- an output row in blocks of 32 outputs (two vectors): 64 bytes of each filter row's input
  line loaded once (stride 2: once per vector), ``vpermb`` giving lane ``t`` the bytes at
  columns ``Sx*t .. Sx*t + 3``;
- planes of at most ``FLAT_WIDEST`` columns at stride 1, as wide as their input: the outputs
  flattened, 16 to a vector whatever the rows (a 7 x 7 plane in 4 vectors, not 7), a lane's
  bytes outside its row the pad byte by a mask per vector and filter row made once per call;
- the features innermost, ``CHUNK`` at a time: a row's input lines and a block's load masks
  (or a flattened vector's) are found once for all of them, each feature's quads packed
  once per call;
- the requantisation on the vector of sums (``npk_requant``'s steps: vminps / vmaxps with the
  value second, vcvtps2dq rounding to nearest even), 16 bytes stored.

Elsewhere (no VNNI, another stride, a weight outside -128..127, a zero point outside the
byte range) the plain loop runs, output by output. A call shares the features among the
cores, or, with fewer features than cores, each feature's rows.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from ...errors import DTypeError
from . import conv_reference
from .common import (
    AVX512_HELPERS,
    HELPERS,
    LANES,
    BasicKernel,
    c_copies,
    c_pick_copy,
    c_signature,
    layer_c_type,
    layer_suffix,
    requant,
)
from .conv_int import VNNI_HELPERS, _fits, _quad_index
from .convolution import conv_work

# Flattened planes: at most FLAT_WIDEST columns (narrower rows would leave most lanes of a
# vector empty), FLAT_MAX outputs of a core's share (64 vectors) and filters of at most
# FLAT_QUADS quads (3x3: 3), so that the masks fit a table on the stack (2 KB).
FLAT_WIDEST, FLAT_MAX, FLAT_QUADS = 11, 1024, 4
# Features whose quads are packed at a time (the vectors of a row's block are found once
# for all of them).
CHUNK = 16
# The widest filter the VNNI form takes (4 quads a filter row).
MAX_FX = 16
# The filters a copy of the VNNI form is made for, its tap counts constants (either stride).
_SHAPES = (("3x3", dict(Fx=3, Fy=3, Dx=1, Dy=1)),)


def _args(in_dt: str, w_dt: str, out_dt: str):
    ti, tw, to = layer_c_type(in_dt), layer_c_type(w_dt), layer_c_type(out_dt)
    return ((f"const {ti} *__restrict__", "In"), ("int", "W"), ("int", "InRow0"),
            ("int", "InRows"), ("int", "Hreal"), ("int", "PadT"),
            (f"const {tw} *__restrict__", "Filter"), ("const int *__restrict__", "Bias"),
            ("const float *__restrict__", "Scale"), (f"{to} *__restrict__", "Out"),
            ("int", "Wo"), ("int", "OutRow0"), ("int", "OutRows"), ("int", "Feat"),
            ("int", "Fx"), ("int", "Fy"), ("int", "Sx"), ("int", "Sy"), ("int", "Dx"),
            ("int", "Dy"), ("int", "PadL"), ("int", "Zin"), ("int", "Zw"), ("int", "Zout"),
            ("int", "Lo"), ("int", "Hi"))


_SHARE = (("int", "F0"), ("int", "F1"), ("int", "Y0"), ("int", "Y1"))
_LINE_OK = "P - PadT >= 0 && P - PadT < Hreal && P - InRow0 >= 0 && P - InRow0 < InRows"


def _plain(name: str, args, ti: str, tw: str, to: str) -> str:
    """C of ``{name}_Plain``: features F0 .. F1-1, rows Y0 .. Y1-1, output by output."""
    return f"""\
static void {name}_Plain({c_signature(args + _SHARE)})
{{
    /* Each output: its bias plus (In - Zin) * (Filter - Zw) over the taps that read the
       input (wrapping, as the one-plane kernel's int32 accumulator), requantised. */
    for (int f = F0; f < F1; f++) {{
        const {ti} *Pl = In + f * InRows * W;
        const {tw} *Fl = Filter + f * Fy * Fx;
        float Sc = Scale[f];
        for (int y = Y0; y < Y1; y++)
            for (int x = 0; x < Wo; x++) {{
                unsigned int A = (unsigned int)Bias[f];
                for (int fy = 0; fy < Fy; fy++) {{
                    int P = (OutRow0 + y) * Sy + fy * Dy;
                    if (!({_LINE_OK}))
                        continue;
                    for (int fx = 0; fx < Fx; fx++) {{
                        int C = x * Sx - PadL + fx * Dx;
                        if (C >= 0 && C < W)
                            A += (unsigned int)((int)Pl[(P - InRow0) * W + C] - Zin) *
                                 (unsigned int)((int)Fl[fy * Fx + fx] - Zw);
                    }}
                }}
                Out[(f * OutRows + y) * Wo + x] = ({to})npk_requant((int)A, Sc, Zout, Lo, Hi);
            }}
    }}
}}"""


def _vnni(name: str, args, ti: str, tw: str, to: str, signed: bool) -> str:
    """C of ``{name}_VnniAny`` (the module's docstring) and its copies."""
    flip = "\n    Row = _mm512_xor_si512(Row, _mm512_set1_epi8((char)0x80));" if signed else ""
    off = 128 if signed else 0
    return f"""\
#ifdef NPK_VNNI
static inline NPK_ALWAYS_INLINE __m512i {name}_Row(const {ti} *Line, __mmask64 Inside,
                                                   __m512i PadRaw)
{{
    /* 64 bytes of an input line from Line, those not Inside the pad byte, as x + Off. */
    __m512i Row = _mm512_mask_loadu_epi8(PadRaw, Inside, Line);{flip}
    return Row;
}}

static inline NPK_ALWAYS_INLINE void {name}_Store({to} *Dst, __mmask16 K, __m512i S,
                                                  __m512 Scv, __m512 Lv, __m512 Hv, __m512i Zv)
{{
    /* npk_requant lane by lane: float(S) * Scale clamped to [Lo - Zout, Hi - Zout] (vminps
       and vmaxps return their second operand on NaN: V passes, as npk_requant's
       comparisons let it), rounded to nearest even (the rounding the instruction names, as
       npk_rne's), plus Zout; its low byte stored (the value is within Lo .. Hi). */
    __m512 V = _mm512_max_ps(Lv, _mm512_min_ps(Hv, _mm512_mul_ps(_mm512_cvtepi32_ps(S), Scv)));
    _mm512_mask_cvtepi32_storeu_epi8((void *)Dst, K, _mm512_add_epi32(_mm512_cvt_roundps_epi32(
        V, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), Zv));
}}

{_blocks(name, ti, to)}

static inline NPK_ALWAYS_INLINE void {name}_VnniAny({c_signature(args + _SHARE)})
{{
    /* Features F0 .. F1-1, rows Y0 .. Y1-1, in chunks of {CHUNK} features: 16 outputs a
       vector, each filter row's quads g (taps 4g .. 4g+3) by vpdpbusd. Where the vectors'
       input lines and masks are found (a row's, a block's), every feature of the chunk takes
       its vectors there in turn. Q[k*FG + fy*G + g]: feature k's quad of weights less Zw. */
    const int G = (Fx + 3) / 4, FG = Fy * G, Plane = InRows * W, OutPlane = OutRows * Wo;
    const int Byte = Zin + {off}, Q0 = Y0 * Wo, Q1 = Y1 * Wo;
    const int Flat = Wo <= {FLAT_WIDEST} && Wo == W && Sx == 1 && Sy == 1 &&
                     Q1 - Q0 <= {FLAT_MAX} && FG <= {FLAT_QUADS};
    const __m512i PadRaw = _mm512_set1_epi8((char)Zin), PadU = _mm512_set1_epi8((char)Byte);
    const __m512i Idx = Sx == 1 ? {_quad_index(0)} :
        {_quad_index(0, 2)};
    const __m512i Idx1 = {_quad_index(LANES)};  /* stride 1: the second vector's lanes */
    const __m512 Lv = _mm512_set1_ps((float)(Lo - Zout)), Hv = _mm512_set1_ps((float)(Hi - Zout));
    const __m512i Zv = _mm512_set1_epi32(Zout);
    __mmask64 T[{FLAT_MAX // LANES * FLAT_QUADS}];  /* Flat: the bytes inside, by vector, quad */
    __mmask64 Near[{MAX_FX * MAX_FX // 4}], Far[{MAX_FX * MAX_FX // 4}];
    int Off[{MAX_FX * MAX_FX // 4}];  /* a quad's first byte in its feature's plane */
    int Q[{CHUNK * MAX_FX * MAX_FX // 4}];
    unsigned int Init[{CHUNK}];
    if (Flat) {{
        /* T[v*FG + fy*G + g] bit 4t + b: output q = Q0 + 16v + t exists, the line of filter
           row fy for its row is inside the tile and the plane, and its column x - PadL + 4g
           + b inside the row (x: q's column). */
        for (int v = 0; v < (Q1 - Q0 + {LANES - 1}) / {LANES} * FG; v++)
            T[v] = 0;
        for (int q = Q0; q < Q1; q++) {{
            int y = q / Wo, x = q % Wo, v = (q - Q0) / {LANES}, t = (q - Q0) % {LANES};
            for (int fy = 0; fy < Fy; fy++) {{
                int P = OutRow0 + y + fy * Dy;
                if (!({_LINE_OK}))
                    continue;
                for (int g = 0; g < G; g++)
                    for (int b = 0; b < 4; b++) {{
                        int C = x - PadL + 4 * g + b;
                        if (C >= 0 && C < W)
                            T[v * FG + fy * G + g] |= 1ULL << (4 * t + b);
                    }}
            }}
        }}
    }}
    for (int f0 = F0; f0 < F1; f0 += {CHUNK}) {{
        const int Nf = F1 - f0 < {CHUNK} ? F1 - f0 : {CHUNK};
        /* Each feature's quads, and its start: Bias less (Zin + Off) times the sum of its
           weights less Zw (every tap is fed, the pad byte where it reads padding; wrapping). */
        for (int k = 0; k < Nf; k++) {{
            const {tw} *Fl = Filter + (f0 + k) * Fy * Fx;
            unsigned int Sum = 0;
            for (int fy = 0; fy < Fy; fy++)
                for (int g = 0; g < G; g++) {{
                    unsigned int Quad = 0;
                    for (int b = 0; b < 4 && 4 * g + b < Fx; b++) {{
                        int V = (int)Fl[fy * Fx + 4 * g + b] - Zw;
                        Quad |= (unsigned int)(V & 0xFF) << (8 * b);
                        Sum += (unsigned int)V;
                    }}
                    Q[k * FG + fy * G + g] = (int)Quad;
                }}
            Init[k] = (unsigned int)Bias[f0 + k] - (unsigned int)Byte * Sum;
        }}
        if (Flat) {{
            for (int q0 = Q0, v = 0; q0 < Q1; q0 += {LANES}, v++) {{
                for (int fy = 0; fy < Fy; fy++)
                    for (int g = 0; g < G; g++) {{
                        Off[fy * G + g] = (OutRow0 - InRow0 + fy * Dy) * W + q0 - PadL + 4 * g;
                        Near[fy * G + g] = npk_bytes(Off[fy * G + g], Plane);
                    }}
                for (int k = 0; k < Nf; k++) {{
                    const {ti} *Pl = In + (f0 + k) * Plane;
                    __m512i S = _mm512_set1_epi32((int)Init[k]);
                    for (int j = 0; j < FG; j++)
                        S = _mm512_dpbusd_epi32(S, _mm512_mask_permutexvar_epi8(PadU,
                            T[v * FG + j], Idx, {name}_Row(Pl + Off[j], Near[j], PadRaw)),
                            _mm512_set1_epi32(Q[k * FG + j]));
                    {name}_Store(Out + (f0 + k) * OutPlane + q0, npk_cols(q0, Q1), S,
                                 _mm512_set1_ps(Scale[f0 + k]), Lv, Hv, Zv);
                }}
            }}
            continue;
        }}
        for (int y = Y0; y < Y1; y++) {{
            int Line[{MAX_FX}];  /* filter row fy's line in the plane, -1 outside the tile */
            for (int fy = 0; fy < Fy; fy++) {{
                int P = (OutRow0 + y) * Sy + fy * Dy;
                Line[fy] = {_LINE_OK} ? (P - InRow0) * W : -1;
            }}
            /* Blocks of 32 outputs (two vectors), the last 16 alone. */
            for (int x0 = 0; x0 < Wo; x0 += {2 * LANES}) {{
                int Two = x0 + {LANES} < Wo;
                for (int fy = 0; fy < Fy; fy++)
                    for (int g = 0; g < G; g++) {{
                        int C = x0 * Sx - PadL + 4 * g, In0 = Line[fy] >= 0;
                        Off[fy * G + g] = In0 ? Line[fy] + C : 0;
                        Near[fy * G + g] = In0 ? npk_bytes(C, W) : 0;
                        Far[fy * G + g] = In0 && Two && Sx == 2 ?
                            npk_bytes(C + {2 * LANES}, W) : 0;
                    }}
                for (int k = 0; k < Nf; k++) {{
                    const {ti} *Pl = In + (f0 + k) * Plane;
                    {to} *O = Out + (f0 + k) * OutPlane + y * Wo + x0;
                    const int *Qk = Q + k * FG;
                    const __m512 Scv = _mm512_set1_ps(Scale[f0 + k]);
                    if (Two)
                        {name}_Block2(Pl, Off, Near, Far, FG, Sx, Qk, Init[k], Idx, Idx1,
                                      PadRaw, O, Wo - x0, Scv, Lv, Hv, Zv);
                    else
                        {name}_Block1(Pl, Off, Near, FG, Qk, Init[k], Idx, PadRaw, O,
                                      Wo - x0, Scv, Lv, Hv, Zv);
                }}
            }}
        }}
    }}
}}

{c_copies(f"{name}_VnniAny", args + _SHARE, _SHAPES)}
#endif"""


def _blocks(name: str, ti: str, to: str) -> str:
    """C of ``{name}_Block1`` and ``_Block2``: a feature's 16 or 32 outputs of a row, its
    quads ``j`` read at ``Pl + Off[j]`` (bytes ``Near[j]``; stride 2's second vector: 32
    columns on, bytes ``Far[j]``)."""
    return f"""\
static inline NPK_ALWAYS_INLINE void {name}_Block1(const {ti} *Pl, const int *Off,
    const __mmask64 *Near, int FG, const int *Qk, unsigned int Init, __m512i Idx,
    __m512i PadRaw, {to} *O, int Left, __m512 Scv, __m512 Lv, __m512 Hv, __m512i Zv)
{{
    __m512i S = _mm512_set1_epi32((int)Init);
    for (int j = 0; j < FG; j++)
        S = _mm512_dpbusd_epi32(S, _mm512_permutexvar_epi8(Idx, {name}_Row(Pl + Off[j],
                                Near[j], PadRaw)), _mm512_set1_epi32(Qk[j]));
    {name}_Store(O, npk_cols(0, Left), S, Scv, Lv, Hv, Zv);
}}

static inline NPK_ALWAYS_INLINE void {name}_Block2(const {ti} *Pl, const int *Off,
    const __mmask64 *Near, const __mmask64 *Far, int FG, int Sx, const int *Qk,
    unsigned int Init, __m512i Idx, __m512i Idx1, __m512i PadRaw, {to} *O, int Left,
    __m512 Scv, __m512 Lv, __m512 Hv, __m512i Zv)
{{
    __m512i S0 = _mm512_set1_epi32((int)Init), S1 = S0;
    for (int j = 0; j < FG; j++) {{
        __m512i Qv = _mm512_set1_epi32(Qk[j]);
        __m512i Row = {name}_Row(Pl + Off[j], Near[j], PadRaw);
        S0 = _mm512_dpbusd_epi32(S0, _mm512_permutexvar_epi8(Idx, Row), Qv);
        if (Sx == 1)
            S1 = _mm512_dpbusd_epi32(S1, _mm512_permutexvar_epi8(Idx1, Row), Qv);
        else  /* stride 2: its own 64 bytes, 32 columns on */
            S1 = _mm512_dpbusd_epi32(S1, _mm512_permutexvar_epi8(Idx, {name}_Row(
                Pl + Off[j] + {2 * LANES}, Far[j], PadRaw)), Qv);
    }}
    {name}_Store(O, npk_cols(0, Left), S0, Scv, Lv, Hv, Zv);
    {name}_Store(O + {LANES}, npk_cols({LANES}, Left), S1, Scv, Lv, Hv, Zv);
}}"""


@cache
def dw_conv_requant(in_dt: str, w_dt: str, out_dt: str, width: int) -> BasicKernel:
    """The kernel of the module's docstring for ``in_dt`` activations, ``w_dt`` weights and
    ``out_dt`` outputs (each int8 or uint8): ``Feat`` planes of ``In`` (``InRows`` x ``W``
    each, one after the other; line ``p - InRow0`` of a plane holds padded row ``p``, real
    row ``p - PadT`` of ``Hreal``), ``Filter`` (``Fy`` x ``Fx`` each), ``Bias`` and ``Scale``
    (one each) into ``Feat`` planes of ``Out`` (``OutRows`` x ``Wo``, rows from
    ``OutRow0``). ``width``: the target's vector width, which prices a call."""
    for dt in (in_dt, w_dt, out_dt):
        if np.dtype(dt) not in (np.int8, np.uint8):
            raise DTypeError(f"depthwise convolution requantised: {dt} operand; int8 or "
                             f"uint8 only")
    name = f"KerParDwConvReqNpk_{layer_suffix(in_dt, w_dt, out_dt)}"
    ti, tw, to = layer_c_type(in_dt), layer_c_type(w_dt), layer_c_type(out_dt)
    args = _args(in_dt, w_dt, out_dt)
    signed = np.dtype(in_dt) == np.int8
    call = ", ".join(n for _, n in args + _SHARE)
    src = f"""\
{HELPERS}
{AVX512_HELPERS}
{VNNI_HELPERS}
#ifndef NPK_KERNEL_{name}
#define NPK_KERNEL_{name}
{_plain(name, args, ti, tw, to)}

{_vnni(name, args, ti, tw, to, signed)}

void {name}({c_signature(args)})
{{
    /* This core's share: features F0 .. F1-1 (every row), or with fewer features than
       cores every feature's rows Y0 .. Y1-1. */
    int Many = Feat >= gap_ncore(), N = Many ? Feat : OutRows;
    int Chunk = (N + gap_ncore() - 1) / gap_ncore(), First = gap_coreid() * Chunk;
    int Last = First + Chunk < N ? First + Chunk : N;
    int F0 = Many ? First : 0, F1 = Many ? Last : Feat;
    int Y0 = Many ? 0 : First, Y1 = Many ? OutRows : Last;
    if (First >= Last)
        return;
#ifdef NPK_VNNI
    /* The VNNI form where it applies (the module's docstring). */
    if (Sx <= 2 && Dx == 1 && Fx <= {MAX_FX} && Fy <= {MAX_FX} && {_fits(w_dt)} &&
        Zin + {128 if signed else 0} >= 0 && Zin + {128 if signed else 0} <= 255) {{
{c_pick_copy(f"{name}_VnniAny", args + _SHARE, _SHAPES, "        ")}
        return;
    }}
#endif
    {name}_Plain({call});
}}
#endif"""

    def reference(In, W, InRow0, InRows, Hreal, PadT, Filter, Bias, Scale, Out, Wo, OutRow0,
                  OutRows, Feat, Fx, Fy, Sx, Sy, Dx, Dy, PadL, Zin, Zw, Zout, Lo, Hi, *,
                  core_id, core_count):
        if core_id or OutRows <= 0 or Feat <= 0:
            return
        acc = np.repeat(np.asarray(Bias[:Feat], np.int32), OutRows * Wo)
        conv_reference.planes(False, In, W, InRow0, InRows, Hreal, PadT, Filter, acc, Wo,
                              OutRow0, OutRows, Fx, Fy, Sx, Sy, Dx, Dy, PadL, Zin, Zw, Feat)
        out = requant(acc.reshape(Feat, -1), np.asarray(Scale[:Feat])[:, None], Zout, Lo, Hi)
        Out[:Feat * OutRows * Wo] = out.reshape(-1)

    def cost(Wo, OutRows, Feat, Fx, Fy, Sx, Sy, Dx, Dy, **_):
        # The taps, and per output its requantisation (priced as set-up operations).
        return conv_work(Feat * Wo * OutRows * Fx * Fy, width, (Fx, Fy, Sx, Sy, Dx, Dy),
                         Feat * (4 * OutRows * Fy + Wo * OutRows), Feat)

    return BasicKernel(name, args, True, src, reference, cost)
