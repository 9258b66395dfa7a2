"""The Torq EasyKernel guide's "n-dimensional tensor multiplication (optimized)": broadcast the
inputs to the output's shape, fuse the dense inner dims, vectorize.

Run: python examples/mul_fused_broadcast.py
"""

import numpy as np

import npukit as nk
from npukit.kernels import mul


def run(s1, s2, so, **kw):
    rng = np.random.default_rng(4)
    a = rng.integers(-128, 128, s1, dtype=np.int8)
    b = rng.integers(-128, 128, s2, dtype=np.int8)
    prog = nk.build(mul, target="torq", input1=nk.spec(s1, "int8"), input2=nk.spec(s2, "int8"),
                    bias_scale=nk.spec((2,), "int32"), output=nk.spec(so, "int8"),
                    shift=7, out_min=-128, out_max=127, **kw)
    out = np.zeros(so, np.int8)
    res = prog.run(input1=a, input2=b, bias_scale=np.array([3, 1], np.int32), output=out)
    want = np.clip((a.astype(np.int64) * b + 3 + 64) >> 7, -128, 127)
    ok = bool((out == want).all())
    print(f"{s1} x {s2} -> {so} {kw or ''}: matches numpy {ok}, cycles {res.cycles}, "
          f"input1 transfer counts {prog.transfers()[1].counts}")
    assert ok
    return res.cycles


run((2, 5, 7), (1, 1, 1), (2, 5, 7))
run((2, 5, 7), (5, 1), (2, 5, 7))
fused = run((5, 3, 3, 2), (5, 3, 3, 2), (5, 3, 3, 2))
unfused = run((5, 3, 3, 2), (5, 3, 3, 2), (5, 3, 3, 2), fuse=False)
print(f"fusing [5, 3, 3, 2]: {unfused / fused:.1f}x fewer cycles")
