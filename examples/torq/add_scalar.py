"""The Torq compiler's add of a constant to a dense tensor (its AddPattern, scalar case),
written with the Torq EasyKernel names: the input goes through the ALU times a one-byte
weight, and the Act adds the constant as the bias and rescales.

    out = clamp((((x * w + bias) * scale + 2**(shift-1)) >> shift) + zero_point, lo, hi)

Run: python examples/torq/add_scalar.py
"""

import numpy as np

import npukit as nk
from npukit.easy import PData

SHIFT, ZP, LO, HI = 4, 3, -128, 127


@nk.kernel
def add_scalar(s, input, weights, bias_scale, output):
    wdata = s.wram.load(weights)
    bdata = s.bram.load(bias_scale)
    dense = min(input.denseDims(), output.denseDims())
    x = input.fuse(dense).vectorize(s.alu.iWidth(input.dtype, weights.dtype))
    out = output.fuse(dense)
    for ndd in s.iterate(x.dims(0, -2)):
        for iv in s.iterate(x.dim(-2)):
            pdata = s.alu.scalarProductAccumulate(s.iram.load(x[ndd][iv]), wdata)
            for av in s.iterate(pdata.dim(PData.Vectors)):
                s.append(out[ndd], s.act.rescaleClamp(pdata[av], bdata, SHIFT, ZP, LO, HI))


shape = (3, 70)
rng = np.random.default_rng(5)
x = rng.integers(-128, 128, shape).astype(np.int8)
w = np.array([16], np.int8)            # the input scaled up by 2**4 before the bias joins
bias_scale = np.array([-300, 1], np.int32)  # adds -300 / 16 = -18.75

prog = nk.build(add_scalar, target="torq", input=nk.spec(shape, "int8"),
                weights=nk.spec((1,), "int8"), bias_scale=nk.spec((2,), "int32"),
                output=nk.spec(shape, "int8"))
t = (x.astype(np.int64) * 16 - 300) * 1
want = np.clip(((t + (1 << (SHIFT - 1))) >> SHIFT) + ZP, LO, HI)
for backend in ("sim", "c"):
    out = np.full(shape, 99, np.int8)
    prog.run(backend, input=x, weights=w, bias_scale=bias_scale, output=out)
    print(backend, "first outputs:", out[0, :6], "matches numpy:", bool((out == want).all()))
    assert (out == want).all()
