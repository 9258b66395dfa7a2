"""``fma_f32`` (numpy) and ``npk_fmaf`` (C), the float32 fused multiply-add of ONNX Runtime's
QLinearAdd, against exact rational arithmetic: rounded once, ties to even, also where the
float64 sum lands on a float32 rounding boundary that the exact sum is not on."""

import ctypes
from fractions import Fraction

import numpy as np

from npukit.c.toolchain import library
from npukit.tiler.basic_kernels.common import HELPERS, fma_f32


def exact_f32(x, y, z) -> np.float32:
    """``x*y + z`` rounded once to float32, ties to even, by rational arithmetic."""
    v = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
    f = np.float32(float(v))
    near = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    dist = [abs(Fraction(float(c)) - v) for c in near]
    best = [c for c, d in zip(near, dist) if d == min(dist)]
    return min(best, key=lambda c: int(np.array(c).view(np.int32)) & 1)


def cases():
    r = np.random.default_rng(0)
    n = 3000
    x = r.integers(-255, 256, n).astype(np.float32)
    y = (r.integers(1, 2**24, n) * 2.0 ** -r.integers(20, 40, n)).astype(np.float32)
    z = (r.integers(-2**24, 2**24, n) * 2.0 ** -r.integers(10, 60, n)).astype(np.float32)
    # the float64 sum on a float32 midpoint, the exact one just off it (either side)
    t = np.float32(1 + 2**-12)
    x = np.append(x, [t, t, -t, t]).astype(np.float32)
    y = np.append(y, [t, t, t, -t]).astype(np.float32)
    z = np.append(z, [2.0**-60, -2.0**-60, 2.0**-60, -2.0**-60]).astype(np.float32)
    return x, y, z


def test_fma_f32_rounds_once():
    x, y, z = cases()
    want = np.array([exact_f32(*v) for v in zip(x, y, z)], np.float32)
    assert (fma_f32(x, y, z).view(np.int32) == want.view(np.int32)).all()
    # where the exact sum lies beyond the midpoint, away from the even neighbour, the float64
    # sum rounded to float32 is one step off
    plain = (x.astype(np.float64) * y + z).astype(np.float32)
    assert (plain[[-4, -1]] != want[[-4, -1]]).all()


def test_c_fma_equals_numpy():
    lib = library(HELPERS + """
void fma_all(const float *X, const float *Y, const float *Z, float *Out, int N)
{
    for (int i = 0; i < N; i++) Out[i] = npk_fmaf(X[i], Y[i], Z[i]);
}""")
    x, y, z = cases()
    out = np.zeros_like(x)
    p = ctypes.POINTER(ctypes.c_float)
    lib.fma_all(*(a.ctypes.data_as(p) for a in (x, y, z, out)), len(x))
    assert (out.view(np.int32) == fma_f32(x, y, z).view(np.int32)).all()
