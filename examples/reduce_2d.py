"""The Torq EasyKernel guide's "2-dimensional reduce": sum the rows of [N, M] into [M], saturating.
The ALU accumulates ALU-width column vectors over the rows; the Act clamps Act-width
sub-vectors of the partials (PData.Vectors), overlapping with the next accumulation.

Run: python examples/reduce_2d.py
"""

import numpy as np

import npukit as nk
from npukit.kernels import reduce_rows

rng = np.random.default_rng(5)
x = rng.integers(-128, 128, (32, 300), dtype=np.int8)
want = np.clip(x.astype(np.int64).sum(axis=0), -128, 127)
cycles = {}
for vector in ("alu", "act"):
    prog = nk.build(reduce_rows, target="torq", input=nk.spec((32, 300), "int8"),
                    output=nk.spec((300,), "int8"), vector=vector)
    out = np.zeros(300, np.int8)
    res = prog.run(input=x, output=out)
    cycles[vector] = res.cycles
    print(f"{vector}-width vectors: matches numpy {bool((out == want).all())}, "
          f"cycles {res.cycles}")
    assert (out == want).all()
print(prog.transfers()[0])
print(f"ALU-width accumulation: {cycles['act'] / cycles['alu']:.1f}x fewer cycles")
