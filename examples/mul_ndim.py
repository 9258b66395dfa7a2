"""The Torq EasyKernel guide's "n-dimensional tensor multiplication (vectorized)": one
multi-iterator over all dims but the last, whatever the rank; outer dims need not be dense.

Run: python examples/mul_ndim.py
"""

import numpy as np

import npukit as nk
from npukit.kernels import mul_ndim

rng = np.random.default_rng(3)
shape = (3, 4, 37)
a = rng.integers(-3000, 3000, shape, dtype=np.int16)
b = rng.integers(-3000, 3000, shape, dtype=np.int16)
# The output is a sub-view of a larger buffer: rows 40 apart, starting at element 5.
big = np.full(5 + 3 * 4 * 40, 0x5A5A, np.int16)
out = big[5:].reshape(3, 4, 40)[:, :, :37]
prog = nk.build(mul_ndim, target="torq", input1=nk.spec(shape, "int16"),
                input2=nk.spec(shape, "int16"), bias_scale=nk.spec((2,), "int32"),
                output=nk.spec(shape, "int16", strides=(160, 40, 1)),
                shift=12, out_min=-32768, out_max=32767)
for t in prog.transfers():
    print(t)
res = prog.run(input1=a, input2=b, bias_scale=np.array([0, 1], np.int32), output=out)
want = np.clip((a.astype(np.int64) * b + (1 << 11)) >> 12, -32768, 32767)
gaps = np.ones(big.size, bool)
gaps[5:].reshape(3, 4, 40)[:, :, :37] = False
print("matches numpy:", bool((out == want).all()),
      "| canaries between rows intact:", bool((big[gaps] == 0x5A5A).all()))
print("cycles", res.cycles)
assert (out == want).all() and (big[gaps] == 0x5A5A).all()
