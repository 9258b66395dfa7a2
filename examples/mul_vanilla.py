"""The Torq EasyKernel guide's "1D tensor multiplication (vanilla)": the Slice as a scalar
processor.

    out[i] = clamp((((input1[i] * input2[i] + bias) * scale + 2**(shift-1)) >> shift), min, max)

Run: python examples/mul_vanilla.py
"""

import numpy as np

import npukit as nk
from npukit.kernels import mul_vanilla

N, SHIFT, LO, HI = 1000, 8, -128, 127
rng = np.random.default_rng(0)
a = rng.integers(-128, 128, N, dtype=np.int8)
b = rng.integers(-128, 128, N, dtype=np.int8)
bias_scale = np.array([100, 3], np.int32)

prog = nk.build(mul_vanilla, target="torq", input1=nk.spec((N,), "int8"),
                input2=nk.spec((N,), "int8"), bias_scale=nk.spec((2,), "int32"),
                output=nk.spec((N,), "int8"), shift=SHIFT, out_min=LO, out_max=HI)
for t in prog.transfers():
    print(t)
out = np.zeros(N, np.int8)
res = prog.run(input1=a, input2=b, bias_scale=bias_scale, output=out)
t = (a.astype(np.int64) * b + 100) * 3
want = np.clip((t + (1 << (SHIFT - 1))) >> SHIFT, LO, HI)
print("first outputs:", out[:8], "matches numpy:", bool((out == want).all()))
print(res.report)
assert (out == want).all()
