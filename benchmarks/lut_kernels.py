"""LUT kernels on the C back end: the Compass DSL tutorial's SiLU on float16 and the LUT
sigmoid (bfloat16 in, float32 out), against torch and a hand-written gather loop.

    python benchmarks/lut_kernels.py [--rounds N] [--sizes 16M,256M]

For each size and thread count (1 and 2), medians of interleaved runs in one process of:
npukit (the program's compiled handle, ``prog.compile("c")``); torch's own SiLU / sigmoid at
the same thread count, when torch is installed (a different arithmetic: its error against
float64 is printed beside npukit's); a hand-written C gather loop giving npukit's bits — a
65536-entry table of the kernel's result for every 16-bit input pattern (computed by the
simulator), read once per element, compiled with the back end's compiler and flags, on two
threads as two halves; numpy reading the same table (``np.take``, one thread). The first
size is 16M elements; the second, when memory allows, a working set beyond the
last-level cache (each table says which). Every output is preallocated and touched before
timing; npukit, the gather loop and numpy are checked to give the same bits.

Goals (reported, not asserted), at 16M elements: npukit at least as fast as torch at the
same thread count; without torch, within 1.2x of the gather loop.
"""

from __future__ import annotations

import argparse
import ctypes

import ml_dtypes
import numpy as np
from harness import (
    at_threads,
    c_function,
    goal,
    machine,
    sizes,
    split_in_two,
    torch,
    where,
)

import npukit as nk
from npukit import kernels as K
from npukit.easy import PData
from npukit.lut import design

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32 = np.dtype("float16"), np.dtype("float32")

GATHER_C = """
#include <stdint.h>
void gather16(const uint16_t *restrict in, uint16_t *restrict out,
              const uint16_t *restrict table, int64_t begin, int64_t end)
{
    for (int64_t i = begin; i < end; i++)
        out[i] = table[in[i]];
}
void gather32(const uint16_t *restrict in, uint32_t *restrict out,
              const uint32_t *restrict table, int64_t begin, int64_t end)
{
    for (int64_t i = begin; i < end; i++)
        out[i] = table[in[i]];
}
"""


@nk.kernel
def lut_sigmoid(s, input, output, *, lut):
    """bfloat16 in, float32 out: ALU-width vectors to float32 partials, the Act's
    ``linear_approx`` one Act-width sub-vector at a time, appended."""
    x = input.vectorize(s.alu.i_width(input.dtype))
    for i in s.iterate(x.dim(0)):
        p = s.alu.accumulate(s.iram.load(x[i]))
        for av in s.iterate(p.dim(PData.Vectors)):
            s.append(output, s.act.linear_approx(p[av], lut))


def every_pattern(dt: np.dtype) -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dt)


def case(kind: str, n: int):
    """(program, input, output dtype, torch function or None, numpy reference in float64)."""
    rng = np.random.default_rng(1)
    if kind == "silu":
        x = (rng.standard_normal(n) * 4).astype(F16)
        prog = nk.build(K.silu_fp16, target="torq", input=nk.spec((n,), F16),
                        output=nk.spec((n,), F16))
        ref = lambda v: v / (1 + np.exp(-v))  # noqa: E731
        return prog, x, F16, "silu", ref
    x = (rng.standard_normal(n) * 4).astype(BF16)
    prog = nk.build(lut_sigmoid, target="torq", input=nk.spec((n,), BF16),
                    output=nk.spec((n,), F32),
                    lut=design("sigmoid", -8, 8, 256, kind="linear"))
    return prog, x, F32, "sigmoid", lambda v: 1 / (1 + np.exp(-v))


def table_of(kind: str, in_dt: np.dtype, out_dt: np.dtype) -> np.ndarray:
    """The kernel's result for every input bit pattern, by the simulator: the table the
    hand-written gather loop reads (as raw bits)."""
    prog, *_ = case(kind, 1 << 16)
    out = np.zeros(1 << 16, out_dt)
    prog.run("sim", input=every_pattern(in_dt), output=out)
    return out.view(f"u{out_dt.itemsize}")


def measure(kind: str, n: int, rounds: int) -> dict:
    prog, x, out_dt, torch_name, ref = case(kind, n)
    fn = prog.compile("c")
    table = table_of(kind, x.dtype, out_dt)
    outs = {k: np.ones(n, out_dt) for k in ("npukit", "gather", "numpy", "torch")}
    u = f"u{out_dt.itemsize}"
    gather = c_function(GATHER_C, f"gather{8 * out_dt.itemsize}",
                        [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2)
    ptrs = (x.ctypes.data, outs["gather"].ctypes.data, table.ctypes.data)

    def hand(begin, end, keep=(x, outs, table)):  # the arrays live as long as the closure
        gather(*ptrs, begin, end)

    xt = ot = None
    if torch is not None:
        xt = torch.from_numpy(x.view(np.int16)).view(torch.float16 if kind == "silu"
                                                     else torch.bfloat16)
        ot = torch.from_numpy(outs["torch"])

    def torch_run():
        if kind == "silu":
            torch.ops.aten.silu.out(xt, out=ot)
        else:  # bfloat16 in, float32 out, no temporary: widen into the output, then sigmoid
            ot.copy_(xt)
            torch.sigmoid(ot, out=ot)

    def cases_for(t):
        got = {"npukit": lambda: fn(x, outs["npukit"]),
               "gather": split_in_two(hand, n) if t == 2 else lambda: hand(0, n)}
        if torch is not None:
            got["torch"] = torch_run
        if t == 1:
            got["numpy"] = lambda: np.take(table, x.view(np.uint16), out=outs["numpy"].view(u))
        return got
    times = at_threads(cases_for, (1, 2), rounds)
    same = all(np.array_equal(outs["npukit"].view(u), outs[k].view(u))
               for k in ("gather", "numpy"))
    sample = slice(0, n, max(1, n // 100000))
    want = ref(x[sample].astype(np.float64))
    errors = {"npukit": float(np.max(np.abs(outs["npukit"][sample].astype(np.float64) - want)))}
    if torch is not None:
        errors["torch"] = float(np.max(np.abs(outs["torch"][sample].astype(np.float64) - want)))
    nbytes = n * (x.itemsize + out_dt.itemsize)
    return {"times": times, "same": same, "errors": errors, "nbytes": nbytes}


def report(kind: str, n: int, got: dict) -> list[str]:
    title = {"silu": "SiLU float16 -> float16 (Compass DSL tutorial, 512-entry table)",
             "sigmoid": "sigmoid bfloat16 -> float32 (linear_approx, 256 entries)"}[kind]
    print(f"\n{title}, {n >> 20}M elements: {got['nbytes'] >> 20} MiB moved per run, "
          f"{where(got['nbytes'])}")
    print(f"npukit = gather loop = numpy, bit for bit: {got['same']}; max |error| vs float64: "
          + ", ".join(f"{k} {v:.2e}" for k, v in got["errors"].items()))
    head = f"{'threads':>8}{'npukit ms':>11}{'torch ms':>10}{'gather ms':>11}{'numpy ms':>10}" \
           f"{'vs torch':>10}{'vs gather':>11}"
    print(head)
    print("-" * len(head))
    goals = []
    for t, times in got["times"].items():
        npk = times["npukit"]
        row = f"{t:>8}{npk * 1e3:>11.2f}"
        row += f"{times['torch'] * 1e3:>10.2f}" if "torch" in times else f"{'-':>10}"
        row += f"{times['gather'] * 1e3:>11.2f}"
        row += f"{times['numpy'] * 1e3:>10.2f}" if "numpy" in times else f"{'-':>10}"
        row += f"{npk / times['torch']:>9.2f}x" if "torch" in times else f"{'-':>10}"
        row += f"{npk / times['gather']:>10.2f}x"
        print(row)
        if n == 16 << 20:
            if "torch" in times:
                goals.append(goal(f"{kind} at 16M, {t} thread(s), at least as fast as torch "
                                  f"({npk / times['torch']:.2f}x its time)",
                                  npk <= times["torch"]))
            elif t == 1:
                goals.append(goal(f"{kind} at 16M, 1 thread, within 1.2x of the gather loop "
                                  f"({npk / times['gather']:.2f}x)", npk <= 1.2 * times["gather"]))
    return goals


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9, help="interleaved rounds per size")
    ap.add_argument("--sizes", default=None,
                    help="element counts, e.g. 16M,256M (default: 16M and a working set "
                         "beyond the last-level cache, when memory allows)")
    args = ap.parse_args(argv)
    print(machine())
    goals = []  # moved: float16 in and out; held: the input and four outputs of 4 bytes
    for n in sizes(args.sizes, 2 + 2, 2 + 4 * 4):
        for kind in ("silu", "sigmoid"):
            goals += report(kind, n, measure(kind, n, args.rounds))
    print()
    for g in goals:
        print(g)


if __name__ == "__main__":
    main()
