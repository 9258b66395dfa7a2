"""The Torq compiler's reduction along one axis (its ReducePattern, sum mode), written
with the Torq EasyKernel names: the ALU accumulates the rows of the reduced axis vector by
vector, and the Act passes each Act-width part of the sums through (``act.load``).

    out[b, i] = sum over r of x[b, r, i]       (int32 sums)

Run: python examples/torq/reduce_sum.py
"""

import numpy as np

import npukit as nk
from npukit.easy import PData


@nk.kernel
def reduce_sum(s, input, output, *, axis):
    dense = min(input.denseDims(), output.denseDims(), input.rank - axis - 1)
    x = input.fuse(dense).vectorize(s.alu.iWidth(input.dtype))
    for b in s.iterate(x.dims(0, axis)):
        for i in s.iterate(x.dims(axis + 1, -2)):
            for rv in s.iterate(x.dim(-2)):
                for r in s.iterate(x.dim(axis)):
                    pdata = s.alu.accumulate(s.iram.load(x[b][r][i][rv]))
                for av in s.iterate(pdata.dim(PData.Vectors)):
                    s.append(output[b][i], s.act.load(pdata[av]))


rng = np.random.default_rng(9)
x = rng.integers(-128, 128, (3, 10, 40)).astype(np.int8)
prog = nk.build(reduce_sum, target="torq", input=nk.spec(x.shape, "int8"),
                output=nk.spec((3, 40), "int32"), axis=1)
want = x.astype(np.int64).sum(axis=1)
for backend in ("sim", "c"):
    out = np.full(want.shape, -999999, np.int32)
    prog.run(backend, input=x, output=out)
    print(backend, "first outputs:", out[0, :6], "matches numpy:", bool((out == want).all()))
    assert (out == want).all()
