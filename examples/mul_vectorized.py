"""The Torq EasyKernel guide's vectorized multiplication with append(): any length, no padding.
Append drops the junk lanes of the last vector and never writes past the output's end.

Run: python examples/mul_vectorized.py
"""

import numpy as np

import npukit as nk
from npukit.kernels import mul_vanilla, mul_vectorized

N, SHIFT = 1000, 8
specs = dict(target="torq", input1=nk.spec((N,), "int8"), input2=nk.spec((N,), "int8"),
             bias_scale=nk.spec((2,), "int32"), output=nk.spec((N,), "int8"),
             shift=SHIFT, out_min=-128, out_max=127)
prog = nk.build(mul_vectorized, **specs)
for t in prog.transfers():
    print(t)
rng = np.random.default_rng(2)
a = rng.integers(-128, 128, N, dtype=np.int8)
b = rng.integers(-128, 128, N, dtype=np.int8)
out = np.zeros(N, np.int8)
res = prog.run(input1=a, input2=b, bias_scale=np.array([-5, 2], np.int32), output=out)
want = np.clip(((a.astype(np.int64) * b - 5) * 2 + (1 << (SHIFT - 1))) >> SHIFT, -128, 127)
vanilla = nk.build(mul_vanilla, **specs).run(input1=a, input2=b, output=np.zeros(N, np.int8),
                                             bias_scale=np.array([-5, 2], np.int32))
print("matches numpy:", bool((out == want).all()))
print(f"cycles {res.cycles} vs vanilla {vanilla.cycles}: {vanilla.cycles / res.cycles:.1f}x")
assert (out == want).all()
