"""How building and simulating scale with the tensor: ``nk.build`` and the simulator on the
Torq EasyKernel guide's int8 multiply at growing sizes.

    python benchmarks/scaling.py [--rounds N] [--sizes 1M,16M,256M] [--sim 16M]

Build: medians of interleaved ``nk.build`` calls of four kernels at each size (the bounds
checks and the output-coverage check run at build time), with the peak of the memory Python
and numpy allocate while building (``tracemalloc``; the build allocates no tensor), and of
the cycle model on the built programs. Simulation: the median time of
``prog.run("sim", ...)`` on inputs made before timing, then, in a separate run, the peak
memory it allocates beyond the arrays it is given.

Goals (reported, not asserted): build time per element does not grow with the size (the
256M build takes under 100 ms and under 100 MB); the simulator runs the 16M multiply in
under 1 s with under 2x the tensors' bytes of extra memory.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np
from harness import element_count, goal, interleaved, machine

import npukit as nk
from npukit import kernels as K
from npukit.sim.timing import timeline

MB = 1 << 20


def build(n: int, kern=K.mul):
    """The int8 multiply on ``n`` elements (``kern``: one of its spellings in the guide)."""
    return nk.build(kern, target="torq", input1=nk.spec((n,), "int8"),
                    input2=nk.spec((n,), "int8"), bias_scale=nk.spec((2,), "int32"),
                    output=nk.spec((n,), "int8"), shift=8, out_min=-128, out_max=127)


KERNELS = {  # name: build at n elements
    "mul (n-dimensional, vectorized)": build,
    "mul_vanilla (one element per iteration)": lambda n: build(n, K.mul_vanilla),
    "silu_fp16 (LUT, Act sub-vectors)":
        lambda n: nk.build(K.silu_fp16, target="torq", input=nk.spec((n,), "float16"),
                           output=nk.spec((n,), "float16")),
    "reduce_rows (int8 [n/1024, 1024] -> int32)":
        lambda n: nk.build(K.reduce_rows, target="torq", input=nk.spec((n >> 10, 1024), "int8"),
                           output=nk.spec((1024,), "int32")),
}


def peak_bytes(fn) -> int:
    """Peak bytes allocated while ``fn()`` runs, beyond what was allocated before."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak - base


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    ap.add_argument("--sizes", default="1M,16M,256M", help="element counts to build")
    ap.add_argument("--sim", default="16M", help="element count to simulate")
    args = ap.parse_args(argv)
    print(machine())
    sizes = [element_count(s) for s in args.sizes.split(",")]

    times = interleaved({(k, n): (lambda f=f, n=n: f(n)) for k, f in KERNELS.items()
                         for n in sizes}, args.rounds)
    progs = {(k, n): f(n) for k, f in KERNELS.items() for n in sizes}
    cycles = interleaved({kn: (lambda p=p: timeline(p)) for kn, p in progs.items()},
                         args.rounds)
    print(f"\nnk.build and the cycle model (npukit.sim.timing.timeline), medians of "
          f"{args.rounds} interleaved rounds\n")
    width = max(map(len, KERNELS))
    print(f"{'kernel':<{width}}{'elements':>12}{'build ms':>10}{'ns / element':>14}"
          f"{'peak MB':>9}{'cycle model ms':>16}")
    print("-" * (width + 61))
    big, ratios, worst, worst_mem = max(sizes), [], 0.0, 0
    for k, f in KERNELS.items():
        for n in sizes:
            mem = peak_bytes(lambda f=f, n=n: f(n))
            t = times[k, n]
            print(f"{k:<{width}}{n:>12}{t * 1e3:>10.2f}{t / n * 1e9:>14.4f}{mem / MB:>9.2f}"
                  f"{cycles[k, n] * 1e3:>16.2f}")
            if n == big:
                worst, worst_mem = max(worst, t), max(worst_mem, mem)
        # Linear or better: 16x the elements may cost up to 16x (plus noise), not more.
        ratios += [t[k, b] / t[k, a] / (b / a) for a, b in zip(sizes, sizes[1:])
                   for t in (times, cycles)]
    print()
    print(goal(f"build and cycle model time per element do not grow with the size (time "
               f"ratio / size ratio "
               f"between successive sizes, at most {max(ratios):.3f}; <= 1.2)",
               max(ratios) <= 1.2))
    print(goal(f"every build at {big} elements under 100 ms (at most {worst * 1e3:.1f} ms) and "
               f"100 MB (at most {worst_mem / MB:.1f} MB)", worst < 0.1 and worst_mem < 100 * MB))

    n = element_count(args.sim)
    prog = build(n)
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, n, dtype=np.int8)
    b = rng.integers(-128, 128, n, dtype=np.int8)
    bs, out = np.array([3, 100], np.int32), np.empty(n, np.int8)
    arrays = {"input1": a, "input2": b, "bias_scale": bs, "output": out}
    tensors = a.nbytes + b.nbytes + out.nbytes
    t = []
    for _ in range(max(3, args.rounds // 2)):
        t0 = time.perf_counter()
        prog.run("sim", **arrays)
        t.append(time.perf_counter() - t0)
    sim_s = float(np.median(t))
    extra = peak_bytes(lambda: prog.run("sim", **arrays))
    ref = np.clip(((a.astype(np.int64) * b + 3) * 100 + 128) >> 8, -128, 127)
    assert np.array_equal(out, ref), "the simulator disagrees with numpy"
    print(f"\nsimulator, int8 multiply on {n} elements (tensors {tensors / MB:.0f} MB): "
          f"{sim_s:.3f} s, {extra / MB:.1f} MB allocated beyond the arrays "
          f"({extra / tensors:.2f}x the tensors)")
    print(goal(f"simulate {n} elements in under 1 s ({sim_s:.3f} s)", sim_s < 1))
    print(goal(f"with under 2x the tensors' bytes of extra memory ({extra / tensors:.2f}x)",
               extra < 2 * tensors))


if __name__ == "__main__":
    main()
