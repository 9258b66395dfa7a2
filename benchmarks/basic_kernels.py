"""The layer basic kernels' C, compiled alone (``basic_kernels.host``), on the shapes an
imported CNN gives them, against their numpy references (the simulator's arithmetic).

    python benchmarks/basic_kernels.py [--rounds N]

Each row is one call as a graph makes it: one input plane's 3x3 (or 1x1) contribution to a
tile of accumulators, the output of a tile (ReLU, max pooling, int8 requantisation), a
matrix-product column block; its rows shared among GAP8's 8 cores, which run one after the
other. Its scalar arguments are constants in the C, as a graph's calls write them (the
compiler specialises the kernel to them). Times are medians of ``--rounds`` interleaved
rounds; each C sample repeats the call in C over about 4M multiply-adds or elements (the
column "G/s" counts them), so that Python's share of a sample is small. Every C result is
checked equal to the reference, bit for bit, first.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from npukit.tiler.basic_kernels import common, convolution, host, linear

CORES = 8
RELU = (common.ACT_RELU, 0, 0)


def conv_case(dt: str, wo: int, rows: int, f: int):
    """One input plane's taps into ``rows`` x ``wo`` accumulators, 'same' padding."""
    rng = np.random.default_rng(wo)
    flt = dt == "float32"
    In = (rng.normal(size=(rows + f - 1) * wo).astype(np.float32) if flt
          else rng.integers(-128, 128, (rows + f - 1) * wo).astype(np.int8))
    Filter = (rng.normal(size=f * f).astype(np.float32) if flt
              else rng.integers(-128, 128, f * f).astype(np.int8))
    Acc = (rng.normal(size=rows * wo).astype(np.float32) if flt
           else rng.integers(-1000, 1000, rows * wo).astype(np.int32))
    pad = f // 2
    args = [In, wo, 0, rows + f - 1, rows, pad, Filter, Acc, wo, 0, rows, f, f, 1, 1, 1, 1, pad,
            0 if flt else 3, 0 if flt else 1]
    return convolution.layer_conv(dt, dt, 16), args, 7, rows * wo * f * f


def out_case(dt: str, wo: int, rows: int, pool: int):
    """A tile's accumulators to its outputs: ReLU (float32) or requantised to int8, then a
    ``pool`` x ``pool`` max pooling at stride ``pool`` (1: none)."""
    rng = np.random.default_rng(wo)
    flt = dt == "float32"
    Acc = (rng.normal(size=rows * wo).astype(np.float32) if flt
           else rng.integers(-3000, 3000, rows * wo).astype(np.int32))
    out = np.zeros((rows // pool) * (wo // pool), np.float32 if flt else np.int8)
    tail = list(RELU) if flt else [np.full(1, 0.02, np.float32), 0, -3, -128, 127]
    args = [Acc, wo, 0, rows, out, wo // pool, 0, rows // pool, pool, pool, pool, pool,
            common.POOL_MAX if pool > 1 else common.POOL_NONE, *tail]
    k = convolution.conv_out("float32" if flt else "int32", dt)
    return k, args, 4, rows * wo


def matmul_case(dt: str, k: int, n: int):
    """One row of a Gemm: ``n`` columns of ``B`` (k x n) times ``A`` (k), plus a bias."""
    rng = np.random.default_rng(k)
    flt = dt == "float32"
    A = rng.normal(size=k).astype(np.float32) if flt else rng.integers(-128, 128, k).astype(
        np.int8)
    B = (rng.normal(size=k * n).astype(np.float32) if flt
         else rng.integers(-128, 128, k * n).astype(np.int8))
    C = rng.normal(size=n).astype(np.float32) if flt else rng.integers(-99, 99, n).astype(
        np.int32)
    out = np.zeros(n, np.float32 if flt else np.int8)
    one = common.f32_bits(1.0)
    tail = ([one, one, *RELU] if flt
            else [0, 0, np.full(n, 0.01, np.float32), 1, 0, -128, 127])
    return linear.matmul(dt, dt, dt, 16), [A, k, B, n, C, 1, 1, out, *tail], 7, k * n


CASES = {
    "conv 3x3 float32 224x8": conv_case("float32", 224, 8, 3),
    "conv 3x3 float32 56x16": conv_case("float32", 56, 16, 3),
    "conv 3x3 float32 28x28": conv_case("float32", 28, 28, 3),
    "conv 3x3 float32 14x14": conv_case("float32", 14, 14, 3),
    "conv 3x3 float32 7x7": conv_case("float32", 7, 7, 3),
    "conv 1x1 float32 56x16": conv_case("float32", 56, 16, 1),
    "conv 3x3 int8 224x8": conv_case("int8", 224, 8, 3),
    "conv 3x3 int8 28x28": conv_case("int8", 28, 28, 3),
    "conv 3x3 int8 7x7": conv_case("int8", 7, 7, 3),
    "conv output ReLU float32 56x16": out_case("float32", 56, 16, 1),
    "conv output ReLU+max 2x2 float32 56x16": out_case("float32", 56, 16, 2),
    "conv output requantised int8 56x16": out_case("int8", 56, 16, 1),
    "conv output requantised+max 2x2 int8 56x16": out_case("int8", 56, 16, 2),
    "matmul float32 256x1000": matmul_case("float32", 256, 1000),
    "matmul int8 256x1000": matmul_case("int8", 256, 1000),
}


def fresh(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def checked(kernel, args, out: int) -> None:
    """The C result equals the reference's, bit for bit (the output argument ``out``)."""
    c_args, ref_args = fresh(args), fresh(args)
    host.c_function(kernel, CORES)(*c_args)
    kernel.reference(*ref_args, core_id=0, core_count=CORES)
    if c_args[out].tobytes() != ref_args[out].tobytes():
        raise SystemExit(f"{kernel.name}: C and reference differ")


def timed(fn, *args, **kwargs) -> float:
    t = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    rounds = ap.parse_args().rounds
    print(f"{'kernel (call as a graph makes it)':40s} {'C us':>9s} {'numpy us':>9s} "
          f"{'numpy/C':>8s} {'C G/s':>7s}")
    for label, (kernel, args, out, work) in CASES.items():
        checked(kernel, args, out)
        constants = {n: a for (_, n), a in zip(kernel.args, args) if isinstance(a, int)}
        repeat = max(10, 4_000_000 // work)
        many = host.c_function(kernel, CORES, repeat, constants)
        c_args, ref_args = fresh(args), fresh(args)
        c, ref = [], []
        for _ in range(rounds):
            c.append(timed(many, *c_args) / repeat)
            ref.append(timed(kernel.reference, *ref_args, core_id=0, core_count=CORES))
        tc, tr = statistics.median(c), statistics.median(ref)
        print(f"{label:40s} {tc * 1e6:9.2f} {tr * 1e6:9.1f} {tr / tc:8.0f} "
              f"{work / tc / 1e9:7.2f}")


if __name__ == "__main__":
    main()
