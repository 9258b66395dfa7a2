"""What one call of a compiled program costs beyond its arithmetic, on 16 elements.

    python benchmarks/overhead.py [--rounds N] [--batch N]

The program: the Torq EasyKernel guide's int8 multiply on 16 elements, four arrays
(input1, input2, bias_scale, output). Per call, medians over interleaved rounds (each a
batch of calls, timed together) of: its entry function called bare through ctypes on cached
pointers (the floor), a numpy ufunc on arrays of the same size (``np.add(a, b, out=o)``),
the compiled handle ``fn = prog.compile("c")`` called by name and in parameter order, and
``prog.run(backend="c", ...)``; then a program with two scalar parameters called with
Python numbers (an ``int`` and a ``float``), which go into a buffer the handle keeps.

Goals (reported, not asserted): ``fn(**arrays)`` at most 3 us per call, ``prog.run`` at most
8 us.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from harness import goal, interleaved, machine

import npukit as nk
from npukit import ir
from npukit import kernels as K
from npukit.layout import Layout

N = 16
SCALE_C = """
static void scale(float *out, const float *x, int k, float f)
{
    for (int i = 0; i < 16; i++)
        out[i] = x[i] * (float)k + f;
}
"""


def scalar_program() -> ir.Program:
    """out = x * k + f on 16 floats, k (int32) and f (float32) scalar parameters."""
    tgt, f32 = nk.target("torq"), np.dtype("float32")
    bufs = [ir.Buffer("out", tgt.home, f32, N, "out"), ir.Buffer("x", tgt.home, f32, N, "in"),
            ir.Buffer("k", tgt.home, np.dtype("int32"), 1, "in"),
            ir.Buffer("f", tgt.home, f32, 1, "in")]
    specs = [Layout((N,), f32), Layout((N,), f32), Layout((), "int32"), Layout((), f32)]
    fn = ir.Extern("scale", (("float *", "out"), ("const float *", "x"), ("int", "k"),
                             ("float", "f")), False, SCALE_C, None, lambda **_: 1)
    args = (ir.Ptr(ir.View(bufs[0], specs[0])), ir.Ptr(ir.View(bufs[1], specs[1])),
            ir.Deref(ir.View(bufs[2], Layout((1,), "int32"))),
            ir.Deref(ir.View(bufs[3], Layout((1,), f32))))
    return ir.Program("scale", tgt, tuple(zip(bufs, specs)), (), (ir.Call(fn, args, "scale"),))


def batched(fn, batch: int):
    def run():
        for _ in range(batch):
            fn()
    return run


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds")
    ap.add_argument("--batch", type=int, default=2000, help="calls timed together")
    args = ap.parse_args(argv)
    print(machine())
    prog = nk.build(K.mul, target="torq", input1=nk.spec((N,), "int8"),
                    input2=nk.spec((N,), "int8"), bias_scale=nk.spec((2,), "int32"),
                    output=nk.spec((N,), "int8"), shift=8, out_min=-128, out_max=127)
    fn = prog.compile("c")
    a, b = np.arange(N, dtype=np.int8), np.arange(N, dtype=np.int8)[::-1].copy()
    bs, out = np.array([3, 100], np.int32), np.zeros(N, np.int8)
    ptrs = [x.ctypes.data for x in (a, b, bs, out)]
    arrays = {"input1": a, "input2": b, "bias_scale": bs, "output": out}
    sprog = scalar_program()
    sfn = sprog.compile("c")
    x, sout = np.arange(N, dtype=np.float32), np.zeros(N, np.float32)
    cases = {
        "bare ctypes call of the entry function": lambda: fn.fn(*ptrs),
        "numpy ufunc, np.add(a, b, out=o)": lambda: np.add(a, b, out=out),
        "fn(**arrays)": lambda: fn(**arrays),
        "fn(a, b, bias_scale, out)": lambda: fn(a, b, bs, out),
        "prog.run('c', **arrays)": lambda: prog.run("c", **arrays),
        "scalars as numbers: sfn(out, x, 3, 0.5)": lambda: sfn(sout, x, 3, 0.5),
        "scalars as numbers: sprog.run('c', ...)":
            lambda: sprog.run("c", out=sout, x=x, k=3, f=0.5),
    }
    t0 = time.perf_counter()
    times = interleaved({k: batched(f, args.batch) for k, f in cases.items()}, args.rounds)
    print(f"{args.rounds} interleaved rounds of {args.batch} calls each "
          f"({time.perf_counter() - t0:.1f} s); 4 arrays of 16 elements\n")
    width = max(map(len, cases))
    print(f"{'call':<{width}}{'us per call':>13}")
    print("-" * (width + 13))
    per = {k: t / args.batch * 1e6 for k, t in times.items()}
    for k, us in per.items():
        print(f"{k:<{width}}{us:>13.2f}")
    assert sout.tolist() == [3 * v + 0.5 for v in range(N)]
    print()
    call, run = per["fn(**arrays)"], per["prog.run('c', **arrays)"]
    print(goal(f"fn(**arrays) at most 3 us ({call:.2f} us)", call <= 3))
    print(goal(f"prog.run at most 8 us ({run:.2f} us)", run <= 8))


if __name__ == "__main__":
    main()
