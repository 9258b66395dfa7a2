"""ONNX's GridSample of 2-D planes (float32) as a basic kernel, its C next to its numpy
reference, computed as ONNX Runtime computes it: the grid's normalized location denormalized
(``align_corners``: [-1, 1] to [0, L - 1]; else to [-0.5, L - 0.5]); ``nearest``: rounded
half to even; ``linear``: the four pixels around it, ``dy2 * (dx2 * p11 + dx1 * p12) + dy1 *
(dx2 * p21 + dx1 * p22)`` (with zeros padding and no aligned corners ONNX Runtime's fast
path: ``w11 * p11 + w12 * p12 + w21 * p21 + w22 * p22``, the weights products first, 0 when
no pixel is inside); ``cubic``: the 4x4 pixels around it and Keys' weights (a = -0.75), rows
first. Each pixel index outside the plane reads 0 (``zeros``), the nearest edge (``border``)
or is reflected at [-0.5, L - 0.5] (at [0, L - 1] with aligned corners: ``reflection``, then
truncated to an index). Denormalized locations are clamped to +-2**22 (beyond, ONNX
Runtime's integer conversions are undefined; a NaN location reads as -2**22)."""

from __future__ import annotations

from functools import cache

import numpy as np

from ...costs import Work
from .common import BasicKernel, c_signature, rne, share_rows

F = np.float32
FAR = F(4194304.0)  # 2**22
# Keys' cubic weights with a = -0.75, as ONNX Runtime writes them; the constants 5a, 8a, 4a,
# a + 2, a + 3 are exact in float32.
CUBIC_C = """\
static inline void npk_gs_cubic(float X, float *W)
{
    float S1 = X + 1.0f, S2 = 1.0f - X, S3 = 2.0f - X;
    W[0] = ((-0.75f * S1 + 3.75f) * S1 - 6.0f) * S1 + 3.0f;
    W[1] = (1.25f * X - 2.25f) * X * X + 1.0f;
    W[2] = (1.25f * S2 - 2.25f) * S2 * S2 + 1.0f;
    W[3] = ((-0.75f * S3 + 3.75f) * S3 - 6.0f) * S3 + 3.0f;
}"""


def cubic_weights(x: np.ndarray) -> list[np.ndarray]:
    s1, s2, s3 = x + F(1), F(1) - x, F(2) - x
    return [((F(-0.75) * s1 + F(3.75)) * s1 - F(6)) * s1 + F(3),
            (F(1.25) * x - F(2.25)) * x * x + F(1),
            (F(1.25) * s2 - F(2.25)) * s2 * s2 + F(1),
            ((F(-0.75) * s3 + F(3.75)) * s3 - F(6)) * s3 + F(3)]


def _reflect(x: np.ndarray, lo: np.float32, hi: np.float32) -> np.ndarray:
    """ONNX Runtime's ``GsReflect``: reflected by the nearer border until within them."""
    span = hi - lo
    below, above = x < lo, x > hi
    d = np.where(below, lo - x, np.where(above, x - hi, F(0))).astype(F)
    k = (d / span).astype(np.int64)
    r = (d - k.astype(F) * span).astype(F)
    even = k % 2 == 0
    out = np.where(below, np.where(even, lo + r, hi - r), np.where(even, hi - r, lo + r))
    return np.where(below | above, out, x).astype(F)


@cache
def grid_sample(mode: str, padding: str, align: bool) -> BasicKernel:
    """``Out[r][c]`` for the ``Rows`` output rows from ``Row0`` of a plane ``Wo`` wide: the
    plane ``In`` ([H, W]) sampled at ``Grid[2 * ((Row0 + r) * Wo + c)]`` (x, then y); the
    rows are shared among the cores."""
    name = f"KerGridSampleNpk_{mode}_{padding}{'_align' if align else ''}_fl"
    args = (("const float *__restrict__", "In"), ("int", "W"), ("int", "H"),
            ("float *__restrict__", "Out"), ("int", "Wo"), ("int", "Row0"), ("int", "Rows"),
            ("const float *__restrict__", "Grid"))
    lo = "0.0f" if align else "-0.5f"
    hi = "(float)(L - 1)" if align else "((float)L - 0.5f)"
    fetch = {
        "zeros": "return (X >= 0 && X < W && Y >= 0 && Y < H) ? In[Y * W + X] : 0.0f;",
        "border": "X = X < 0 ? 0 : (X >= W ? W - 1 : X);\n"
                  "    Y = Y < 0 ? 0 : (Y >= H ? H - 1 : Y);\n    return In[Y * W + X];",
        "reflection": "X = npk_gs_index(X, W);\n    Y = npk_gs_index(Y, H);\n"
                      "    return In[Y * W + X];"}[padding]
    denorm = ("((V + 1.0f) / 2.0f) * (float)(L - 1)" if align
              else "((V + 1.0f) * (float)L - 1.0f) / 2.0f")
    fast = mode == "linear" and padding == "zeros" and not align
    body = {
        "nearest": "Out[r * Wo + c] = npk_gs_pixel(In, W, H, (int)npk_gs_rne(X), "
                   "(int)npk_gs_rne(Y));",
        "linear": """\
int X1 = (int)npk_gs_floor(X), Y1 = (int)npk_gs_floor(Y), X2 = X1 + 1, Y2 = Y1 + 1;
            float P11 = npk_gs_pixel(In, W, H, X1, Y1), P12 = npk_gs_pixel(In, W, H, X2, Y1);
            float P21 = npk_gs_pixel(In, W, H, X1, Y2), P22 = npk_gs_pixel(In, W, H, X2, Y2);
            float Dx2 = (float)X2 - X, Dx1 = X - (float)X1, Dy2 = (float)Y2 - Y,
                  Dy1 = Y - (float)Y1;
            """ + ("""\
int Inside = X2 >= 0 && X1 < W && Y2 >= 0 && Y1 < H;  /* any of the four pixels */
            Out[r * Wo + c] = Inside ? Dy2 * Dx2 * P11 + Dy2 * Dx1 * P12 + Dy1 * Dx2 * P21 +
                                       Dy1 * Dx1 * P22 : 0.0f;""" if fast else """\
Out[r * Wo + c] = Dy2 * (Dx2 * P11 + Dx1 * P12) + Dy1 * (Dx2 * P21 + Dx1 * P22);"""),
        "cubic": """\
int X0 = (int)npk_gs_floor(X) - 1, Y0 = (int)npk_gs_floor(Y) - 1;
            float Wx[4], Wy[4], Row[4];
            npk_gs_cubic(X - (float)X0 - 1.0f, Wx);
            npk_gs_cubic(Y - (float)Y0 - 1.0f, Wy);
            for (int i = 0; i < 4; i++)
                Row[i] = Wx[0] * npk_gs_pixel(In, W, H, X0, Y0 + i) +
                       Wx[1] * npk_gs_pixel(In, W, H, X0 + 1, Y0 + i) +
                       Wx[2] * npk_gs_pixel(In, W, H, X0 + 2, Y0 + i) +
                       Wx[3] * npk_gs_pixel(In, W, H, X0 + 3, Y0 + i);
            Out[r * Wo + c] = Wy[0] * Row[0] + Wy[1] * Row[1] + Wy[2] * Row[2] +
                              Wy[3] * Row[3];"""}[mode]
    src = f"""\
#ifndef NPK_GS_HELPERS
#define NPK_GS_HELPERS
/* Round to nearest, ties to even, for |V| < 2^22. */
static inline float npk_gs_rne(float V)
{{
    return (V + 12582912.0f) - 12582912.0f;
}}
/* floor for |V| <= 2^22 */
static inline float npk_gs_floor(float V)
{{
    float T = (float)(int)V;
    return T > V ? T - 1.0f : T;
}}
/* A denormalized location clamped to +-2^22 (a NaN to -2^22). */
static inline float npk_gs_near(float V)
{{
    return !(V >= -4194304.0f) ? -4194304.0f : (V > 4194304.0f ? 4194304.0f : V);
}}
{CUBIC_C}
#endif
/* GridSample's padding {padding!r}{' (aligned corners)' if align else ''}: the reflection
   of an index, as ONNX Runtime's GsReflect, truncated and kept in the plane. */
static inline int npk_gs_index_{name}(int I, int L)
{{
    float X = (float)I, Lo = {lo}, Hi = {hi}, Span = Hi - Lo, D, R;
    int K;
    if (X < Lo) {{
        D = Lo - X; K = (int)(D / Span); R = D - (float)K * Span;
        X = K % 2 == 0 ? Lo + R : Hi - R;
    }} else if (X > Hi) {{
        D = X - Hi; K = (int)(D / Span); R = D - (float)K * Span;
        X = K % 2 == 0 ? Hi - R : Lo + R;
    }}
    I = (int)X;
    return I < 0 ? 0 : (I >= L ? L - 1 : I);
}}
#define npk_gs_index npk_gs_index_{name}
static inline float npk_gs_pixel_{name}(const float *In, int W, int H, int X, int Y)
{{
    {fetch}
}}
#define npk_gs_pixel npk_gs_pixel_{name}

void {name}({c_signature(args)})
{{
    /* GridSample ({mode}, padding {padding}{', aligned corners' if align else ''}): output
       row Row0 + r, column c samples In at the grid's (x, y) there, as ONNX Runtime. Rows
       are shared among the cores. */
{share_rows()}
    for (int r = First; r < Last; r++)
        for (int c = 0; c < Wo; c++) {{
            const float *G = Grid + 2 * ((Row0 + r) * Wo + c);
            float V, X, Y;
            int L;
            V = G[0]; L = W; X = npk_gs_near({denorm});
            V = G[1]; L = H; Y = npk_gs_near({denorm});
            {body}
        }}
}}
#undef npk_gs_index
#undef npk_gs_pixel"""

    def denormalize(v, length):
        with np.errstate(all="ignore"):
            x = ((v + F(1)) / F(2) * F(length - 1) if align
                 else ((v + F(1)) * F(length) - F(1)) / F(2)).astype(F)
        return np.where(x >= -FAR, np.minimum(x, FAR), -FAR).astype(F)

    def pixel(img, w, h, x, y):
        """The pixels at integer indices x, y (arrays), with the padding."""
        if padding == "zeros":
            inside = (x >= 0) & (x < w) & (y >= 0) & (y < h)
            return np.where(inside, img[np.clip(y, 0, h - 1), np.clip(x, 0, w - 1)], F(0))
        if padding == "reflection":
            def index(i, n):
                lo_, hi_ = (F(0), F(n - 1)) if align else (F(-0.5), F(n) - F(0.5))
                return np.clip(_reflect(i.astype(F), lo_, hi_).astype(np.int64), 0, n - 1)
            x, y = index(x, w), index(y, h)
        return img[np.clip(y, 0, h - 1), np.clip(x, 0, w - 1)]

    def reference(In, W, H, Out, Wo, Row0, Rows, Grid, *, core_id, core_count):
        if core_id or Rows <= 0:
            return
        img = np.asarray(In[:W * H], F).reshape(H, W)
        g = np.asarray(Grid, F)[2 * Row0 * Wo:2 * (Row0 + Rows) * Wo].reshape(Rows, Wo, 2)
        x, y = denormalize(g[..., 0], W), denormalize(g[..., 1], H)
        if mode == "nearest":
            v = pixel(img, W, H, rne(x).astype(np.int64), rne(y).astype(np.int64))
        elif mode == "linear":
            x1, y1 = np.floor(x).astype(np.int64), np.floor(y).astype(np.int64)
            x2, y2 = x1 + 1, y1 + 1
            p11, p12 = pixel(img, W, H, x1, y1), pixel(img, W, H, x2, y1)
            p21, p22 = pixel(img, W, H, x1, y2), pixel(img, W, H, x2, y2)
            dx2, dx1 = x2.astype(F) - x, x - x1.astype(F)
            dy2, dy1 = y2.astype(F) - y, y - y1.astype(F)
            if fast:
                inside = (x2 >= 0) & (x1 < W) & (y2 >= 0) & (y1 < H)
                s = dy2 * dx2 * p11 + dy2 * dx1 * p12 + dy1 * dx2 * p21 + dy1 * dx1 * p22
                v = np.where(inside, s, F(0))
            else:
                v = dy2 * (dx2 * p11 + dx1 * p12) + dy1 * (dx2 * p21 + dx1 * p22)
        else:
            x0, y0 = np.floor(x).astype(np.int64) - 1, np.floor(y).astype(np.int64) - 1
            wx = cubic_weights((x - x0.astype(F) - F(1)).astype(F))
            wy = cubic_weights((y - y0.astype(F) - F(1)).astype(F))
            rows = []
            for i in range(4):
                p = [pixel(img, W, H, x0 + j, y0 + i) for j in range(4)]
                rows.append(wx[0] * p[0] + wx[1] * p[1] + wx[2] * p[2] + wx[3] * p[3])
            v = wy[0] * rows[0] + wy[1] * rows[1] + wy[2] * rows[2] + wy[3] * rows[3]
        Out[:Rows * Wo] = np.asarray(v, F).reshape(-1)

    cost = {"nearest": 6, "linear": 20, "cubic": 80}[mode]
    return BasicKernel(name, args, True, src, reference,
                       lambda Wo, Rows, **_: Work("other", Wo * Rows * cost))
