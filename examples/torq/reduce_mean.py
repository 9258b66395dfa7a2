"""The Torq compiler's mean over the height of a ``[1, C, H, W]`` bfloat16 tensor (its
ReduceMeanPattern), written with the Torq EasyKernel names: blocks of the ALU's width
along each row, summed down the rows as ``x * w`` (``w = 1/H``, one bfloat16 weight) in
float32, then the float bias added and the result clamped (Torq's float Act has no scale).

    out[c, j] = bfloat16(clamp(sum over h of x[c, h, j] * w + bias, lo, hi))

As in the pattern, rows are read in whole blocks (``row_stride`` apart) and the output
holds whole blocks: lanes past ``W`` are computed from what follows each row (here the
rows' padding), so the input buffer reaches one block past its last row.

Run: python examples/torq/reduce_mean.py
"""

import ml_dtypes
import numpy as np

import npukit as nk

BF16 = ml_dtypes.bfloat16
LO, HI = -6.0, 6.0


@nk.kernel
def reduce_mean(s, input, weight, bias_scale, output, *, channels, height, width, row_stride):
    block = s.alu.iWidth(input.dtype, weight.dtype)
    blocks = -(-width // block)
    x = input.setShape([channels, (height, row_stride), blocks, block])
    act_w = s.act.width(input.dtype, weight.dtype)
    out = output.setShape([channels, blocks, block // act_w, act_w])
    bdata = s.bram.load(bias_scale)
    wdata = s.wram.load(weight)
    for c in s.iterate(channels):
        for b in s.iterate(blocks):
            for u in s.iterate(height):
                pdata = s.alu.scalarProductAccumulate(s.iram.load(x[c][u][b]), wdata)
            for a in s.iterate(block // act_w):
                s.store(out[c][b][a], s.act.rescaleClamp(pdata[a], bdata, 0, 0, LO, HI))


rng = np.random.default_rng(15)
C, H, W, STRIDE, BLOCK = 3, 8, 40, 48, 16      # rows of 40 values, 48 apart: 3 blocks of 16
buf = (rng.integers(-128, 128, C * H * STRIDE) / 4).astype(BF16)  # dyadic: exact sums
weight, bias = np.array([1 / H], BF16), np.array([0.75], np.float32)
prog = nk.build(reduce_mean, target="torq", input=nk.spec(buf.shape, BF16),
                weight=nk.spec((1,), BF16), bias_scale=nk.spec((1,), "float32"),
                output=nk.spec((C * 3 * BLOCK,), BF16), channels=C, height=H, width=W,
                row_stride=STRIDE)
rows = buf.reshape(C, H, STRIDE).astype(np.float32) * np.float32(1 / H)
mean = np.add.accumulate(rows, axis=1)[:, -1]            # float32 sums in order of h
want = np.clip(mean + np.float32(0.75), LO, HI).astype(BF16).reshape(-1)
assert (want == HI).any() and (want == LO).any()
for backend in ("sim", "c"):
    out = np.full(C * 3 * BLOCK, np.nan, BF16)
    prog.run(backend, input=buf, weight=weight, bias_scale=bias, output=out)
    print(backend, "means:", out[:5], "matches numpy:", out.tobytes() == want.tobytes())
    assert out.tobytes() == want.tobytes()
