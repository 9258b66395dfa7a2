"""The Torq compiler's elementwise multiplication with implicit broadcasting (its
MulPattern), written with the Torq EasyKernel names.

    out = clamp((((a * b + bias) * scale + 2**(shift-1)) >> shift) + zero_point, lo, hi)

with ``a`` and ``b`` broadcast numpy-style to the output's shape.

Run: python examples/torq/mul.py
"""

import numpy as np

import npukit as nk

SHIFT, ZP, LO, HI = 7, -5, -100, 100


@nk.kernel
def mul(s, input1, input2, bias_scale, output):
    input1, input2 = input1.broadcastAs(output), input2.broadcastAs(output)
    dense = min(input1.denseDims(), input2.denseDims(), output.denseDims())
    n = s.act.width(input1.dtype, input2.dtype)
    a, b = input1.fuse(dense).vectorize(n), input2.fuse(dense).vectorize(n)
    out = output.fuse(dense)
    bdata = s.bram.load(bias_scale)
    for ndd in s.iterate(a.dims(0, -2)):
        for i in s.iterate(a.dim(-2)):
            pdata = s.alu.elementwiseProductAccumulate(s.iram.load(a[ndd][i]),
                                                       s.wram.load(b[ndd][i]))
            s.append(out[ndd], s.act.rescaleClamp(pdata, bdata, SHIFT, ZP, LO, HI))


rng = np.random.default_rng(8)
a = rng.integers(-128, 128, (4, 1, 21)).astype(np.int8)
b = rng.integers(-128, 128, (1, 6, 21)).astype(np.int8)
bias_scale = np.array([40, 3], np.int32)
prog = nk.build(mul, target="torq", input1=nk.spec(a.shape, "int8"),
                input2=nk.spec(b.shape, "int8"), bias_scale=nk.spec((2,), "int32"),
                output=nk.spec((4, 6, 21), "int8"))
t = (a.astype(np.int64) * b + 40) * 3
want = np.clip(((t + (1 << (SHIFT - 1))) >> SHIFT) + ZP, LO, HI)
for backend in ("sim", "c"):
    out = np.full(want.shape, 123, np.int8)
    prog.run(backend, input1=a, input2=b, bias_scale=bias_scale, output=out)
    print(backend, "first outputs:", out[0, 0, :6], "matches numpy:", bool((out == want).all()))
    assert (out == want).all()
