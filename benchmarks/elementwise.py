"""The C back end on large elementwise kernels, against numpy and this machine's memory
bandwidth.

Prints a STREAM-like copy and triad bandwidth (bytes read + written, one thread, best of
several), then for float32 ``clip((a*b + bias)*scale, lo, hi)`` on 16M elements and the
int8 rescale-clamp multiply of the Torq EasyKernel guide on 64M elements: numpy's fastest
spelling (ufuncs
writing into preallocated arrays), the C back end, their ratio, and the C back end's
effective bandwidth as a fraction of the measured copy and triad bandwidth. Every output
is preallocated and touched once before timing (the first touch of 64 MiB costs tens of
milliseconds). Targets, reported not asserted: fused float32 at least 2.5x faster than
numpy and at least 80% of the triad bandwidth.

Run: python benchmarks/elementwise.py [--repeat N]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

import npukit as nk
from npukit import kernels as K
from npukit.c import toolchain

TRIAD_C = """
#include <stdint.h>
void triad(float *restrict a, const float *restrict b, const float *restrict c, float s,
           int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        a[i] = b[i] + s * c[i];
}
"""


def best(fn: Callable[[], object], repeat: int) -> float:
    """Fastest of ``repeat`` timed calls, after one untimed warm-up call."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def stream(n: int, repeat: int) -> tuple[float, float]:
    """Copy (numpy ``copyto``) and triad (a hand-written C loop, the back end's compiler and
    flags) bandwidth in GB/s, counting bytes read and written."""
    import ctypes

    b = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    c, a = b[::-1].copy(), np.ones(n, np.float32)
    copy = 2 * b.nbytes / best(lambda: np.copyto(a, b), repeat) / 1e9
    fn = ctypes.CDLL(str(toolchain.build(TRIAD_C))).triad
    fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_float, ctypes.c_int64]
    ptrs = [x.ctypes.data for x in (a, b, c)]
    triad = 3 * b.nbytes / best(lambda: fn(*ptrs, 3.0, n), repeat) / 1e9
    return copy, triad


def mul_prog(n: int, dtype: str, bs_dtype: str, **attrs):
    return nk.build(K.mul, target="torq", input1=nk.spec((n,), dtype),
                    input2=nk.spec((n,), dtype), bias_scale=nk.spec((2,), bs_dtype),
                    output=nk.spec((n,), dtype), **attrs)


def float32_case(n: int, repeat: int) -> tuple[float, float, int]:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    bias, scale, lo, hi = np.float32(0.25), np.float32(1.5), -2.0, 2.0
    out_np, out_c = np.ones(n, np.float32), np.ones(n, np.float32)  # preallocated, touched

    def numpy_spelling():
        np.multiply(a, b, out=out_np)
        np.add(out_np, bias, out=out_np)
        np.multiply(out_np, scale, out=out_np)
        np.clip(out_np, lo, hi, out=out_np)

    prog = mul_prog(n, "float32", "float32", shift=0, out_min=lo, out_max=hi)
    bs = np.array([bias, scale], np.float32)
    t_np = best(numpy_spelling, repeat)
    t_c = best(lambda: prog.run("c", input1=a, input2=b, bias_scale=bs, output=out_c), repeat)
    assert np.array_equal(out_np, out_c)
    return t_np, t_c, 3 * a.nbytes


def int8_case(n: int, repeat: int) -> tuple[float, float, int]:
    """The Torq EasyKernel guide's multiply:
    clamp(((a*b + bias)*scale + 2^(shift-1)) >> shift, lo, hi)."""
    rng = np.random.default_rng(2)
    a, b = (rng.integers(-128, 128, n, dtype=np.int8) for _ in range(2))
    bias, scale, shift, lo, hi = 3, 100, 8, -128, 127
    out_np, out_c = np.ones(n, np.int8), np.ones(n, np.int8)
    p = np.ones(n, np.int32)  # numpy's int32 partials (exact for this bias and scale)

    def numpy_spelling():
        np.multiply(a, b, out=p, dtype=np.int32)
        np.add(p, bias, out=p)
        np.multiply(p, scale, out=p)
        np.add(p, 1 << (shift - 1), out=p)
        np.right_shift(p, shift, out=p)
        np.clip(p, lo, hi, out=p)
        np.copyto(out_np, p, casting="unsafe")

    prog = mul_prog(n, "int8", "int32", shift=shift, out_min=lo, out_max=hi)
    bs = np.array([bias, scale], np.int32)
    t_np = best(numpy_spelling, repeat)
    t_c = best(lambda: prog.run("c", input1=a, input2=b, bias_scale=bs, output=out_c), repeat)
    assert np.array_equal(out_np, out_c)
    return t_np, t_c, 3 * a.nbytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="timed runs per measurement")
    args = ap.parse_args()
    copy, triad = stream(16 << 20, args.repeat)
    print(f"compiler: {toolchain.compiler()} {' '.join(toolchain.flags())}")
    print(f"memory bandwidth, one thread, bytes read + written: copy {copy:.1f} GB/s "
          f"(numpy copyto), triad {triad:.1f} GB/s (C loop)")
    print("outputs preallocated and touched before timing; best of "
          f"{args.repeat} runs after a warm-up\n")
    head = (f"{'kernel':<44}{'numpy ms':>9}{'C ms':>8}{'speed-up':>9}{'C GB/s':>8}"
            f"{'of copy':>8}{'of triad':>9}")
    print(head)
    print("-" * len(head))
    cases = [("float32 clip((a*b+bias)*scale) 16M", float32_case(16 << 20, args.repeat)),
             ("int8 rescale-clamp mul (Torq EasyKernel) 64M", int8_case(64 << 20, args.repeat))]
    for name, (t_np, t_c, nbytes) in cases:
        gbs = nbytes / t_c / 1e9
        print(f"{name:<44}{t_np * 1e3:>9.1f}{t_c * 1e3:>8.1f}{t_np / t_c:>8.1f}x{gbs:>8.1f}"
              f"{gbs / copy:>8.0%}{gbs / triad:>9.0%}")
    t_np, t_c, nbytes = cases[0][1]
    ok = t_np / t_c >= 2.5 and nbytes / t_c / 1e9 >= 0.8 * triad
    print(f"\ntargets for fused float32: >= 2.5x numpy and >= 80% of triad: "
          f"{'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
