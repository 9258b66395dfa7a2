"""The kernel of the Torq compiler's Conv1D lowering "with reduce" (Conv1DPattern's
``transformWithReduce``; the file's other lowering programs registers directly), written
with the Torq EasyKernel names. For each output position it writes the ``K`` tap products
summed over the input channels, plus the channel's bias; a reduce over ``K`` (ReducePattern)
then finishes the convolution.

    out[n, o, w, k] = bfloat16(clamp(sum over c of x[n, c, w * stride + k] * wt[o, c, k]
                                     + bias[o], lo, hi))

As in the pattern, the tensors are seen through explicit dims (``setShape``) and each
position's taps are stored as whole Act vectors: the lanes past ``K`` land on the next
position's taps, written after them, or in a padding area after the output.

Run: python examples/torq/conv1d_reduce.py
"""

import ml_dtypes
import numpy as np

import npukit as nk

BF16 = ml_dtypes.bfloat16
LO, HI = -20.0, 20.0


@nk.kernel
def conv1d_reduce(s, input, weights, bias_scale, output, *, batches, channels, width,
                  out_channels, out_width, kernel_width, stride):
    block = min(s.alu.iWidth(input.dtype, weights.dtype), s.alu.wWidth(input.dtype),
                kernel_width)
    blocks = -(-kernel_width // block)
    act_block = min(s.act.width(input.dtype, weights.dtype), block)
    act_blocks = -(-block // act_block)
    x = input.setShape([(batches, channels * width), (channels, width), (out_width, stride),
                        blocks, block])
    out = output.setShape([(batches, out_channels * out_width * kernel_width),
                           (out_channels, out_width * kernel_width),
                           (out_width, kernel_width), blocks, act_blocks, act_block])
    wt = weights.setShape([out_channels, (channels, kernel_width), blocks, block])
    for batch in s.iterate(batches):
        for oc in s.iterate(out_channels):
            bdata = s.bram.load(bias_scale[oc])
            for ow in s.iterate(out_width):
                for b in s.iterate(blocks):
                    for ic in s.iterate(channels):
                        idata = s.iram.load(x[batch][ic][ow][b])
                        wdata = s.wram.load(wt[oc][ic][b])
                        pdata = s.alu.elementwiseProductAccumulate(idata, wdata)
                    for a in s.iterate(act_blocks):
                        s.store(out[batch][oc][ow][b][a],
                                s.act.rescaleClamp(pdata[a], bdata, 0, 0, LO, HI))


rng = np.random.default_rng(19)
N, C, W, OC, K, STRIDE = 2, 3, 30, 4, 12, 2      # K = 12 taps: Act vectors of 8, then 4 + junk
OW = (W - K) // STRIDE + 1
x = (rng.integers(-16, 16, (N, C, W)) / 4).astype(BF16)        # dyadic: exact float32 sums
wt = (rng.integers(-16, 16, (OC, C, K)) / 4).astype(BF16)
bias = (rng.integers(-8, 8, OC) / 2).astype(np.float32)
PAD = 4                                                       # the last position's junk lanes
prog = nk.build(conv1d_reduce, target="torq", input=nk.spec((x.size,), BF16),
                weights=nk.spec((wt.size,), BF16), bias_scale=nk.spec((OC,), "float32"),
                output=nk.spec((N * OC * OW * K + PAD,), BF16), batches=N, channels=C,
                width=W, out_channels=OC, out_width=OW, kernel_width=K, stride=STRIDE)
taps = np.stack([x[:, :, w * STRIDE:w * STRIDE + K] for w in range(OW)], 2)   # [N, C, OW, K]
sums = np.einsum("ncwk,ock->nowk", taps.astype(np.float64), wt.astype(np.float64))
want = np.clip(sums + bias[None, :, None, None], LO, HI).astype(np.float32).astype(BF16)
assert (want == HI).any() and (want == LO).any()
for backend in ("sim", "c"):
    out = np.full(N * OC * OW * K + PAD, np.nan, BF16)
    prog.run(backend, input=x.reshape(-1), weights=wt.reshape(-1), bias_scale=bias, output=out)
    got = out[:-PAD].reshape(want.shape)
    print(backend, "taps of output 0:", got[0, 0, 0, :5], "matches numpy:",
          got.tobytes() == want.tobytes())
    assert got.tobytes() == want.tobytes()
