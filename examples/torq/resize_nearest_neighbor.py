"""The Torq compiler's 2x nearest-neighbour upscaling (its ResizeNearestNeighborPattern),
written with the Torq EasyKernel names. Every output row is an input row, each pixel
twice; the output is seen with its rows (and, for NHWC, columns) split as ``[-1, 2]`` so
each input vector is appended twice.

    out[n, c, 2h + i, 2w + j] = x[n, c, h, w]        i, j in {0, 1}

- NCHW: the ALU reads each loaded vector with every element twice (``IData.repeat``).
- NHWC: each pixel's channel vector is appended twice per row, each row twice. The
  pattern's second ``reshapeDim`` names ``In::W`` (dim 2), which after the first reshape
  is the row-copy dim of 2, so the output index it builds would leave that dim; here it
  reshapes the width, dim 3 by then, as the loops index it.

Run: python examples/torq/resize_nearest_neighbor.py
"""

import numpy as np

import npukit as nk

N, H, W = 0, 1, 2          # NHWC dims (NCHW: N, C, H, W = 0, 1, 2, 3)


@nk.kernel
def resize_nearest_neighbor(s, input, output):
    if input.dim(-1) == output.dim(-1):
        nhwc(s, input, output)
    else:
        nchw(s, input, output)


def nhwc(s, input, output, scale_up=2):
    x = input.vectorize(s.act.width(input.dtype))
    out = output.reshapeDim(H, [-1, scale_up])            # [N, H, 2, 2W, C]
    out = out.reshapeDim(W + 1, [-1, scale_up])           # [N, H, 2, W, 2, C]
    for batch in s.iterate(x.dim(N)):
        for h in s.iterate(x.dim(H)):
            for h_scale in s.iterate(scale_up):
                for w in s.iterate(x.dim(W)):
                    for w_scale in s.iterate(scale_up):
                        for iv in s.iterate(x.dim(-2)):
                            pdata = s.alu.load(s.iram.load(x[batch][h][w][iv]))
                            s.append(out[batch][h][h_scale][w][w_scale], s.act.load(pdata))


def nchw(s, input, output, scale_up=2):
    x = input.vectorize(s.act.width(input.dtype) // scale_up)
    out = output.reshapeDim(2, [-1, scale_up])            # [N, C, H, 2, 2W]
    for batch in s.iterate(x.dim(0)):
        for c in s.iterate(x.dim(1)):
            for h in s.iterate(x.dim(2)):
                for h_scale in s.iterate(scale_up):
                    for iv in s.iterate(x.dim(-2)):
                        idata = s.iram.load(x[batch][c][h][iv]).repeat(scale_up)
                        pdata = s.alu.load(idata)
                        s.append(out[batch][c][h][h_scale], s.act.load(pdata))


rng = np.random.default_rng(16)
for layout, shape, axes in (("NCHW", (2, 3, 4, 13), (2, 3)), ("NHWC", (1, 3, 5, 20), (1, 2))):
    x = rng.integers(-128, 128, shape).astype(np.int8)
    want = np.repeat(np.repeat(x, 2, axes[0]), 2, axes[1])
    prog = nk.build(resize_nearest_neighbor, target="torq", input=nk.spec(x.shape, "int8"),
                    output=nk.spec(want.shape, "int8"))
    for backend in ("sim", "c"):
        out = np.where(want == 99, -99, 99).astype(np.int8)   # a canary unlike every result
        prog.run(backend, input=x, output=out)
        print(layout, backend, "matches numpy:", bool((out == want).all()))
        assert (out == want).all()
