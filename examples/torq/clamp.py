"""The Torq compiler's clamp activation (its ActPattern, weighted case; ReLU6-style
bounds), written with the Torq EasyKernel names: each Act-width vector of the input is
multiplied by a one-element weight in the ALU and clamped by the Act.

    out = clamp(x * w, lo, hi)

Run: python examples/torq/clamp.py
"""

import numpy as np

import npukit as nk

LO, HI = 0, 6000


@nk.kernel
def clamp(s, input, weights, output):
    n = min(s.act.width(input.dtype), s.act.width(output.dtype))
    dense = min(input.denseDims(), output.denseDims())
    x, out = input.fuse(dense).vectorize(n), output.fuse(dense)
    wdata = s.wram.load(weights)
    for ndd in s.iterate(x.dims(0, -2)):
        for iv in s.iterate(x.dim(-2)):
            pdata = s.alu.scalarProductAccumulate(s.iram.load(x[ndd][iv]), wdata)
            s.append(out[ndd], s.act.clamp(pdata, LO, HI))


shape = (2, 5, 9)
rng = np.random.default_rng(11)
x = rng.integers(-3000, 3000, shape).astype(np.int16)
w = np.array([3], np.int16)

prog = nk.build(clamp, target="torq", input=nk.spec(shape, "int16"),
                weights=nk.spec((1,), "int16"), output=nk.spec(shape, "int16"))
want = np.clip(x.astype(np.int64) * 3, LO, HI)
assert 0 < (want == HI).sum() and 0 < (want == LO).sum()  # both bounds are reached
for backend in ("sim", "c"):
    out = np.full(shape, -7, np.int16)
    prog.run(backend, input=x, weights=w, output=out)
    print(backend, "first outputs:", out[0, 0, :6], "matches numpy:", bool((out == want).all()))
    assert (out == want).all()
