"""The Torq compiler's fused multiply-add by a constant (its FMAPattern), written with the
Torq EasyKernel names: each Act-width vector is multiplied by the one weight in the ALU,
and the Act adds the bias, rescales and clamps.

    out = clamp((((x * w + bias) * scale + 2**(shift-1)) >> shift) + zero_point, lo, hi)

Run: python examples/torq/fma.py
"""

import numpy as np

import npukit as nk

SHIFT, ZP, LO, HI = 10, 2, -32768, 32767


@nk.kernel
def fma(s, input, weights, bias_scale, output):
    dense = min(input.denseDims(), output.denseDims())
    x = input.fuse(dense).vectorize(s.act.width(input.dtype, weights.dtype))
    out = output.fuse(dense)
    wdata = s.wram.load(weights)
    bdata = s.bram.load(bias_scale)
    for b in s.iterate(x.dims(0, -2)):
        for iv in s.iterate(x.dim(-2)):
            pdata = s.alu.scalarProductAccumulate(s.iram.load(x[b][iv]), wdata)
            s.append(out[b], s.act.rescaleClamp(pdata, bdata, SHIFT, ZP, LO, HI))


rng = np.random.default_rng(6)
x = rng.integers(-30000, 30000, (4, 3, 11)).astype(np.int16)
w = np.array([-1234], np.int16)
bias_scale = np.array([5000, 1], np.int32)
prog = nk.build(fma, target="torq", input=nk.spec(x.shape, "int16"),
                weights=nk.spec((1,), "int16"), bias_scale=nk.spec((2,), "int32"),
                output=nk.spec(x.shape, "int16"))
t = (x.astype(np.int64) * -1234 + 5000) * 1
want = np.clip(((t + (1 << (SHIFT - 1))) >> SHIFT) + ZP, LO, HI)
assert (want == LO).any() and ((want > LO) & (want < HI)).any()
for backend in ("sim", "c"):
    out = np.full(x.shape, 4321, np.int16)
    prog.run(backend, input=x, weights=w, bias_scale=bias_scale, output=out)
    print(backend, "first outputs:", out[0, 0, :6], "matches numpy:", bool((out == want).all()))
    assert (out == want).all()
