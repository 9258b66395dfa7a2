"""The Torq EasyKernel guide's "1D tensor multiplication (vectorized)", first version: the output is
vectorized too, so it must be padded to a multiple of the vector size. Without padding
npukit refuses at build time; with padding the junk lanes land in the padding.

Run: python examples/mul_vectorized_store.py
"""

import numpy as np

import npukit as nk
from npukit.kernels import mul_vectorized_store

N, SHIFT = 1000, 8
specs = dict(target="torq", input1=nk.spec((N,), "int8"), input2=nk.spec((N,), "int8"),
             bias_scale=nk.spec((2,), "int32"), shift=SHIFT, out_min=-128, out_max=127)
try:
    nk.build(mul_vectorized_store, output=nk.spec((N,), "int8"), **specs)
except nk.OutOfBoundsError as e:
    print("unpadded output refused:", e)

width = nk.target("torq").units["act"].width("int8", "int8")
padded = -(-N // width) * width
prog = nk.build(mul_vectorized_store, output=nk.spec((padded,), "int8"), **specs)
rng = np.random.default_rng(1)
a = rng.integers(-128, 128, N, dtype=np.int8)
b = rng.integers(-128, 128, N, dtype=np.int8)
out = np.zeros(padded, np.int8)
res = prog.run(input1=a, input2=b, bias_scale=np.array([0, 1], np.int32), output=out)
want = np.clip((a.astype(np.int64) * b + (1 << (SHIFT - 1))) >> SHIFT, -128, 127)
print(f"padded to {padded}, first {N} elements match numpy:", bool((out[:N] == want).all()))
print("padding holds junk computed from poisoned lanes:", out[N:])
print("cycles", res.cycles)
assert (out[:N] == want).all()
