"""The Torq compiler's average pooling over a whole NHWC frame (its Avgpool2DPattern),
written with the Torq EasyKernel names: blocks of channels, each summed over the frame
as ``x * w`` with one weight, then rescaled and clamped by one (bias, scale) pair.

    out[c] = clamp((((sum over pixels p of x[p, c] * w + bias) * scale + r) >> shift)
                   + zero_point, lo, hi),   r = 2**(shift-1)

As in the pattern, the input is seen as ``frame`` rows of ``C`` channels read in blocks of
the ALU's width, and the output holds whole blocks: the lanes past ``C`` are computed from
whatever follows each row (the next pixel, then the buffer's tail), so the input buffer
reaches one block past its last row and the output holds ``blocks * block`` values.

Run: python examples/torq/avgpool.py
"""

import numpy as np

import npukit as nk

SHIFT, ZP, LO, HI = 6, 3, -128, 127


@nk.kernel
def avgpool(s, input, weights, bias_scale, output, *, frame, channels):
    block = s.alu.iWidth(input.dtype, weights.dtype)
    blocks = -(-channels // block)
    x = input.setShape([(frame, channels), blocks, block])
    act_w = s.act.width(input.dtype, weights.dtype)
    out = output.setShape([blocks, block // act_w, act_w])
    wdata = s.wram.load(weights)
    bdata = s.bram.load(bias_scale)
    for b in s.iterate(blocks):
        for u in s.iterate(frame):
            pdata = s.alu.scalarProductAccumulate(s.iram.load(x[u][b]), wdata)
        for a in s.iterate(block // act_w):
            s.store(out[b][a], s.act.rescaleClamp(pdata[a], bdata, SHIFT, ZP, LO, HI))


rng = np.random.default_rng(11)
H, W, C, BLOCK = 3, 5, 40, 64                # C = 40 channels: one block of 64 lanes
frame = H * W
buf = rng.integers(-128, 128, (frame - 1) * C + BLOCK).astype(np.int8)  # tail: 24 more
weights, bias_scale = np.array([5], np.int8), np.array([-70, 3], np.int32)
prog = nk.build(avgpool, target="torq", input=nk.spec(buf.shape, "int8"),
                weights=nk.spec((1,), "int8"), bias_scale=nk.spec((2,), "int32"),
                output=nk.spec((BLOCK,), "int8"), frame=frame, channels=C)
rows = np.lib.stride_tricks.as_strided(buf, (frame, BLOCK), (C, 1))   # row p: pixel p's block
t = (rows.astype(np.int64).sum(0) * 5 - 70) * 3
want = np.clip(((t + (1 << (SHIFT - 1))) >> SHIFT) + ZP, LO, HI)
assert (want > LO).any() and (want < HI).any() and 99 not in want   # 99: the canary
for backend in ("sim", "c"):
    out = np.full(BLOCK, 99, np.int8)
    prog.run(backend, input=buf, weights=weights, bias_scale=bias_scale, output=out)
    print(backend, "channel averages:", out[:6], "matches numpy:", bool((out == want).all()))
    assert (out == want).all()
