"""The Torq compiler's interleaved insert (its InterleavedInsertPattern, the upsampling step
of a transposed convolution), written with the Torq EasyKernel names: the output's rows are
split by ``reshapeDim`` into groups of ``stride``, and each input row is multiplied by the
one pattern weight of each position in its group (``[1, 0]``: the row, then a row of
zeros), clamped by the Act.

    out[n, c, stride * h + p, w] = clamp(x[n, c, h, w] * weights[p], lo, hi)

Run: python examples/torq/interleaved_insert.py
"""

import numpy as np

import npukit as nk
from npukit.easy import PData


@nk.kernel
def interleaved_insert(s, input, weights, output, *, stride, out_min, out_max):
    for _ in range(output.rank - input.rank):   # leading size-1 dims up to the output's rank
        input = input.insertDim(0, 1)
    x = input.vectorize(s.alu.iWidth(input.dtype, weights.dtype))
    out = output.reshapeDim(2, [output.dim(2) // stride, stride], True)   # N, C, H, stride, W
    for n in s.iterate(x.dim(0)):
        for c in s.iterate(x.dim(1)):
            for h in s.iterate(x.dim(2)):
                for iv in s.iterate(x.dim(3)):
                    idata = s.iram.load(x[n][c][h][iv])
                    for p in s.iterate(stride):
                        wdata = s.wram.load(weights[p])
                        pdata = s.alu.scalarProductAccumulate(idata, wdata)
                        for av in s.iterate(pdata.dim(PData.Vectors)):
                            # each row goes on where its last append stopped (Torq's cursor)
                            s.append(out[n][c][h][p], s.act.clamp(pdata[av], out_min, out_max))


rng = np.random.default_rng(11)
x = rng.integers(-128, 128, (3, 5, 70)).astype(np.int8)     # C, H, W: one dim short of NCHW
weights = np.array([1, 0], np.int8)
prog = nk.build(interleaved_insert, target="torq", input=nk.spec(x.shape, "int8"),
                weights=nk.spec((2,), "int8"), output=nk.spec((1, 3, 10, 70), "int8"),
                stride=2, out_min=-100, out_max=100)
want = np.zeros((1, 3, 10, 70), np.int64)                  # independent numpy reading
want[0, :, 0::2, :] = np.clip(x.astype(np.int64) * 1, -100, 100)
want[0, :, 1::2, :] = np.clip(x.astype(np.int64) * 0, -100, 100)
assert (np.abs(want[0, :, 0::2]) == 100).any()               # the clamp acts
for backend in ("sim", "c"):
    out = np.where(want == 77, -77, 77).astype(np.int8)   # a canary unlike every result
    prog.run(backend, input=x, weights=weights, output=out)
    print(backend, "rows 0 and 1 start:", out[0, 0, 0, :4], out[0, 0, 1, :4],
          "matches numpy:", bool((out == want).all()))
    assert (out == want).all()
