"""The C back end on large elementwise kernels, against numpy, torch, a hand-written C loop
and this machine's memory bandwidth.

    python benchmarks/elementwise.py [--rounds N] [--sizes 16M,256M]

Two kernels: float32 ``clip((a*b + bias)*scale, lo, hi)`` and the Torq EasyKernel guide's
int8 rescale-clamp multiply ``clamp(((a*b + bias)*scale + 2^(shift-1)) >> shift, lo, hi)``.
For each size and thread count (1 and 2), medians of interleaved runs in one process of:
npukit (the compiled handle, ``prog.compile("c")``), a hand-written C loop of the same
arithmetic compiled with the back end's compiler and flags (on two threads as two halves),
numpy's fastest spelling (ufuncs writing into preallocated arrays, whole or in chunks that
stay in cache, whichever is faster; one thread), torch when installed, and in the same
interleaving the copy (numpy ``copyto``) and triad (C loop) bandwidth. The first size is
16M elements; the second, when memory allows, the smallest power of two at which one run
moves twice the last-level cache (each table says where its working set lies). Every
output is preallocated and touched before timing, and all of them are checked to agree.

Goals (reported, not asserted), at 16M elements: the int8 multiply within 1.1x of the
hand-written loop on one thread and at least 1.7x faster on two threads than on one;
float32 within 1.1x of the hand-written loop on one thread and at least 2.5x faster than
numpy (the float32 kernel is bound by memory bandwidth: how much faster than numpy it can
be depends on how far numpy is from the bandwidth on the machine).
"""

from __future__ import annotations

import argparse
import ctypes

import numpy as np
from harness import (
    at_threads,
    c_function,
    goal,
    machine,
    sizes,
    split_in_two,
    stream_cases,
    torch,
    where,
)

import npukit as nk
from npukit import kernels as K

HAND_C = """
#include <stdint.h>
void mul_i8(const int8_t *restrict a, const int8_t *restrict b, int8_t *restrict out,
            int32_t bias, int32_t scale, int64_t begin, int64_t end)
{
    for (int64_t i = begin; i < end; i++) {
        int32_t t = ((a[i] * b[i] + bias) * scale + 128) >> 8;   /* shift 8, half up */
        t = t < -128 ? -128 : t;
        out[i] = (int8_t)(t > 127 ? 127 : t);
    }
}
void mul_f32(const float *restrict a, const float *restrict b, float *restrict out,
             float bias, float scale, float lo, float hi, int64_t begin, int64_t end)
{
    for (int64_t i = begin; i < end; i++) {
        float t = (a[i] * b[i] + bias) * scale;
        t = t < lo ? lo : t;
        out[i] = t > hi ? hi : t;
    }
}
"""
CHUNK = 1 << 14  # numpy's chunked spelling: temporaries that stay in the L1/L2 cache


def mul_prog(n: int, dtype: str, bs_dtype: str, **attrs):
    return nk.build(K.mul, target="torq", input1=nk.spec((n,), dtype),
                    input2=nk.spec((n,), dtype), bias_scale=nk.spec((2,), bs_dtype),
                    output=nk.spec((n,), dtype), **attrs)


def chunked(spelling, n: int):
    def run():
        for k in range(0, n, CHUNK):
            spelling(slice(k, min(n, k + CHUNK)))
    return run


def float32_case(n: int):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    bias, scale, lo, hi = np.float32(0.25), np.float32(1.5), -2.0, 2.0
    outs = {k: np.ones(n, np.float32) for k in ("npukit", "hand", "numpy", "chunks", "torch")}

    def numpy_spelling(s=slice(None), out=outs["numpy"]):
        o = out[s]
        np.multiply(a[s], b[s], out=o)
        np.add(o, bias, out=o)
        np.multiply(o, scale, out=o)
        np.clip(o, lo, hi, out=o)
    fn = mul_prog(n, "float32", "float32", shift=0, out_min=lo, out_max=hi).compile("c")
    bs = np.array([bias, scale], np.float32)
    hand = c_function(HAND_C, "mul_f32", [ctypes.c_void_p] * 3 + [ctypes.c_float] * 4 +
                      [ctypes.c_int64] * 2)
    ptrs = [x.ctypes.data for x in (a, b, outs["hand"])]  # a, b, outs live in the closures
    torch_run = None
    if torch is not None:
        ta, tb, to = (torch.from_numpy(x) for x in (a, b, outs["torch"]))

        def torch_run():
            torch.mul(ta, tb, out=to)
            to.add_(float(bias)).mul_(float(scale)).clamp_(lo, hi)
    return {"npukit": lambda: fn(a, b, bs, outs["npukit"]),
            "hand": lambda begin, end, keep=(a, b): hand(*ptrs, bias, scale, lo, hi, begin, end),
            "numpy": numpy_spelling,
            "chunks": chunked(lambda s: numpy_spelling(s, outs["chunks"]), n),
            "torch": torch_run}, outs, 3 * a.nbytes


def int8_case(n: int):
    rng = np.random.default_rng(2)
    a, b = (rng.integers(-128, 128, n, dtype=np.int8) for _ in range(2))
    bias, scale, shift, lo, hi = 3, 100, 8, -128, 127
    outs = {k: np.ones(n, np.int8) for k in ("npukit", "hand", "numpy", "chunks", "torch")}
    p = np.ones(n, np.int32)  # numpy's int32 partials (exact for this bias and scale)

    def numpy_spelling(s=slice(None), out=outs["numpy"]):
        q = p[s] if s != slice(None) else p
        np.multiply(a[s], b[s], out=q, dtype=np.int32)
        np.add(q, bias, out=q)
        np.multiply(q, scale, out=q)
        np.add(q, 1 << (shift - 1), out=q)
        np.right_shift(q, shift, out=q)
        np.clip(q, lo, hi, out=q)
        np.copyto(out[s], q, casting="unsafe")
    fn = mul_prog(n, "int8", "int32", shift=shift, out_min=lo, out_max=hi).compile("c")
    bs = np.array([bias, scale], np.int32)
    hand = c_function(HAND_C, "mul_i8", [ctypes.c_void_p] * 3 + [ctypes.c_int32] * 2 +
                      [ctypes.c_int64] * 2)
    ptrs = [x.ctypes.data for x in (a, b, outs["hand"])]  # a, b, outs live in the closures
    torch_run = None
    if torch is not None:
        ta, tb, tp, to = (torch.from_numpy(x) for x in (a, b, p, outs["torch"]))

        def torch_run():
            torch.mul(ta.to(torch.int32), tb, out=tp)
            tp.add_(bias).mul_(scale).add_(1 << (shift - 1)).bitwise_right_shift_(shift)
            to.copy_(tp.clamp_(lo, hi))
    return {"npukit": lambda: fn(a, b, bs, outs["npukit"]),
            "hand": lambda begin, end, keep=(a, b): hand(*ptrs, bias, scale, begin, end),
            "numpy": numpy_spelling,
            "chunks": chunked(lambda s: numpy_spelling(s, outs["chunks"]), n),
            "torch": torch_run}, outs, 3 * a.nbytes


def measure(make, n: int, rounds: int):
    fns, outs, nbytes = make(n)
    streams = {t: stream_cases(n, two=t == 2) for t in (1, 2)}

    def cases_for(t):
        got = {"npukit": fns["npukit"],
               "hand": split_in_two(fns["hand"], n) if t == 2 else lambda: fns["hand"](0, n)}
        if fns["torch"] is not None:
            got["torch"] = fns["torch"]
        if t == 1:
            got["numpy"], got["chunks"] = fns["numpy"], fns["chunks"]
            got["copy"] = streams[1][0]["copy"]
        got["triad"] = streams[t][0]["triad"]
        return got
    times = at_threads(cases_for, (1, 2), rounds)
    agree = all(np.array_equal(outs["npukit"], outs[k]) for k in outs
                if k != "torch" or fns["torch"] is not None)
    _, copy_bytes, triad_bytes = streams[1]
    return times, agree, nbytes, copy_bytes, triad_bytes


def report(name: str, n: int, got) -> list[str]:
    times, agree, nbytes, copy_bytes, triad_bytes = got
    copy = copy_bytes / times[1]["copy"] / 1e9
    print(f"\n{name}, {n >> 20}M elements: {nbytes >> 20} MiB moved per run, {where(nbytes)}; "
          f"all outputs agree: {agree}")
    print(f"copy {copy:.1f} GB/s (numpy copyto, 1 thread); triad "
          + ", ".join(f"{triad_bytes / times[t]['triad'] / 1e9:.1f} GB/s on {t}" for t in times)
          + " (C loop, bytes read + written)")
    head = (f"{'threads':>8}{'npukit ms':>11}{'hand ms':>9}{'numpy ms':>10}{'torch ms':>10}"
            f"{'vs hand':>9}{'vs numpy':>10}{'GB/s':>7}{'of triad':>10}")
    print(head)
    print("-" * len(head))
    for t, tm in times.items():
        npk = tm["npukit"]
        best_np = min(tm["numpy"], tm["chunks"]) if "numpy" in tm else None
        gbs = nbytes / npk / 1e9
        triad = triad_bytes / tm["triad"] / 1e9
        print(f"{t:>8}{npk * 1e3:>11.2f}{tm['hand'] * 1e3:>9.2f}"
              + (f"{best_np * 1e3:>10.2f}" if best_np else f"{'-':>10}")
              + (f"{tm['torch'] * 1e3:>10.2f}" if "torch" in tm else f"{'-':>10}")
              + f"{npk / tm['hand']:>8.2f}x"
              + (f"{best_np / npk:>9.1f}x" if best_np else f"{'-':>10}")
              + f"{gbs:>7.1f}{gbs / triad:>10.0%}")
    if n != 16 << 20:
        return []
    one, two = times[1]["npukit"], times[2]["npukit"]
    if name.startswith("int8"):
        return [goal(f"int8 mul at 16M within 1.1x of the hand loop on 1 thread "
                     f"({one / times[1]['hand']:.2f}x)", one <= 1.1 * times[1]["hand"]),
                goal(f"int8 mul at 16M at least 1.7x faster on 2 threads than on 1 "
                     f"({one / two:.2f}x)", one / two >= 1.7)]
    best_np = min(times[1]["numpy"], times[1]["chunks"])
    return [goal(f"float32 at 16M within 1.1x of the hand loop on 1 thread "
                 f"({one / times[1]['hand']:.2f}x)", one <= 1.1 * times[1]["hand"]),
            goal(f"float32 at 16M at least 2.5x faster than numpy ({best_np / one:.1f}x)",
                 best_np / one >= 2.5)]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9, help="interleaved rounds per size")
    ap.add_argument("--sizes", default=None,
                    help="element counts, e.g. 16M,256M (default: 16M and a working set "
                         "beyond the last-level cache, when memory allows)")
    args = ap.parse_args(argv)
    print(machine())
    cases = {"int8 rescale-clamp mul (Torq EasyKernel)": (int8_case, 3, 2 + 5 + 4),
             "float32 clip((a*b + bias)*scale)": (float32_case, 12, 8 + 5 * 4 + 4)}
    goals = []
    for title, (case, moved, held) in cases.items():  # bytes per element: moved by a run,
        # held by the inputs, every peer's output and numpy's partials
        for n in sizes(args.sizes, moved, held):
            goals += report(title, n, measure(case, n, args.rounds))
    print()
    for g in goals:
        print(g)


if __name__ == "__main__":
    main()
