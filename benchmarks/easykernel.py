"""The Torq EasyKernel guide's cycle-model claims, and the simulator's own speed.

Run: python benchmarks/easykernel.py
"""

from __future__ import annotations

import time

import numpy as np

import npukit as nk
from npukit import kernels as K


def mul(kern, shape, dtype="int8", **kw):
    return nk.build(kern, target="torq", input1=nk.spec(shape, dtype), input2=nk.spec(shape, dtype),
                    bias_scale=nk.spec((2,), "int32"), output=nk.spec(shape, dtype),
                    shift=8, out_min=-128, out_max=127, **kw)


def cycles(prog) -> tuple[int, int]:
    from npukit.sim.timing import timeline
    rep = timeline(prog)
    return rep.cycles, rep.roofline_cycles


def main() -> None:
    rows = []
    van = cycles(mul(K.mul_vanilla, (4096,)))
    vec = cycles(mul(K.mul_vectorized, (4096,)))
    rows.append(("mul 4096 int8: vanilla", *van, ""))
    rows.append(("mul 4096 int8: vectorized", *vec,
                 f"{van[0] / vec[0]:.1f}x fewer (the guide: ~10x, goal >= 8x)"))
    v16 = cycles(mul(K.mul_vectorized, (4096,), "int16"))
    van16 = cycles(mul(K.mul_vanilla, (4096,), "int16"))[0]
    rows.append(("mul 4096 int16: vectorized", *v16, f"{van16 / v16[0]:.1f}x fewer than vanilla"))
    unf = cycles(mul(K.mul, (5, 3, 3, 2), fuse=False))
    fus = cycles(mul(K.mul, (5, 3, 3, 2)))
    rows.append(("mul [5,3,3,2]: not fused", *unf, ""))
    rows.append(("mul [5,3,3,2]: fused", *fus, f"{unf[0] / fus[0]:.1f}x fewer"))
    red = {v: cycles(nk.build(K.reduce_rows, input=nk.spec((64, 1024), "int8"),
                              output=nk.spec((1024,), "int8"), vector=v)) for v in ("act", "alu")}
    rows.append(("reduce [64,1024]: Act-width", *red["act"], ""))
    rows.append(("reduce [64,1024]: ALU-width", *red["alu"],
                 f"{red['act'][0] / red['alu'][0]:.1f}x fewer"))
    print("simulated cycles and the roofline bound (the busiest unit's work), both in cycles")
    print(f"{'kernel':<30}{'cycles':>10}{'roofline':>10}  note")
    for name, c, r, note in rows:
        print(f"{name:<30}{c:>10}{r:>10}  {note}")

    n = 16 * 2**20
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, n, dtype=np.int8)
    b = rng.integers(-128, 128, n, dtype=np.int8)
    out = np.empty(n, np.int8)
    t0 = time.perf_counter()
    prog = mul(K.mul_vectorized, (n,))
    t1 = time.perf_counter()
    res = prog.run(input1=a, input2=b, bias_scale=np.array([3, 2], np.int32), output=out)
    t2 = time.perf_counter()
    print(f"\nsimulating vectorized mul on {n} int8 elements: build {t1 - t0:.2f} s, "
          f"functional {res.wall_time:.2f} s, run incl. cycle model {t2 - t1:.2f} s "
          f"(goal: functional < 2 s); {res.cycles} simulated cycles, roofline "
          f"{res.report.roofline_cycles} cycles "
          f"({res.cycles / res.report.roofline_cycles:.3f}x)")


if __name__ == "__main__":
    main()
