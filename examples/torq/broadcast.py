"""The Torq compiler's broadcast (its BroadcastPattern), written with the Torq EasyKernel
names: the input gets a size-1 dim for each broadcast dim of the output (``insertDim``),
``broadcastAs`` stretches those with stride 0, and every vector passes through the ALU
and the Act unchanged (``alu.load``).

    out[i, j, k] = x[i, k]

Run: python examples/torq/broadcast.py
"""

import numpy as np

import npukit as nk


@nk.kernel
def broadcast(s, input, output, *, dimensions):
    for d in dimensions:  # the output dims the input lacks, in increasing order
        input = input.insertDim(d, 1)
    input = input.broadcastAs(output)
    dense = min(input.denseDims(), output.denseDims())
    x, out = input.fuse(dense).vectorize(s.act.width(input.dtype)), output.fuse(dense)
    for ndd in s.iterate(x.dims(0, -2)):
        for iv in s.iterate(x.dim(-2)):
            pdata = s.alu.load(s.iram.load(x[ndd][iv]))
            s.append(out[ndd], s.act.load(pdata))


rng = np.random.default_rng(3)
x = rng.integers(-128, 128, (3, 37)).astype(np.int8)
prog = nk.build(broadcast, target="torq", input=nk.spec(x.shape, "int8"),
                output=nk.spec((3, 4, 37), "int8"), dimensions=[1])
want = np.broadcast_to(x[:, None, :], (3, 4, 37))
for backend in ("sim", "c"):
    out = np.full(want.shape, 55, np.int8)
    prog.run(backend, input=x, output=out)
    print(backend, "first outputs:", out[1, 2, :6], "matches numpy:", bool((out == want).all()))
    assert (out == want).all()
