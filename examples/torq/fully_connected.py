"""The Torq compiler's fully connected layer (its FCToHw lowering), written with the Torq
EasyKernel names: for each block of output channels the ALU sums, over the input
channels, one input value times the block's weights (the weights are pre-arranged as
``[OC / block, IC, block]``), and the Act rescales each group of lanes with per-item
(bias, scale) records, one per output channel (``act.width(..., per_item=True)``).

    out[n, o] = clamp((((sum_i x[n, i] w[o, i] + bias[o]) * scale[o] + r) >> shift) + zp,
                      lo, hi),   r = 2**(shift - 1)

The output channels fill whole blocks here: with a part block Torq's append discards the
lanes past the output's end, which npukit refuses (an ``OutOfBoundsError`` at build: a
computed value would be dropped).

Run: python examples/torq/fully_connected.py
"""

import numpy as np

import npukit as nk
from npukit.easy import PData

SHIFT, ZP, LO, HI = 5, -2, -128, 127


@nk.kernel
def fully_connected(s, input, weight, bias_scale, output):
    weight_vect = weight.dim(2)                                  # output channels per block
    act_vect = min(weight_vect, s.act.width(weight.dtype, input.dtype, per_item=True))
    width = 1 if np.dtype(input.dtype).kind == "f" else 2        # Torq's biasScaleWidth
    bias = bias_scale.reshapeDim(0, [-1, -(-weight_vect // act_vect), act_vect, width], True)
    for batch in s.iterate(input.dim(0)):
        for ocv in s.iterate(weight.dim(0)):
            for icv in s.iterate(input.dim(1)):
                fc_weights = s.iram.load(weight[ocv][icv])
                fc_input = s.wram.load(input[batch][icv])
                pdata = s.alu.scalarProductAccumulate(fc_weights, fc_input)
            for av in s.iterate(pdata.dim(PData.Vectors)):
                bdata = s.bram.load(bias[ocv][av])
                s.append(output[batch], s.act.rescaleClamp(pdata[av], bdata, SHIFT, ZP, LO, HI))


rng = np.random.default_rng(17)
N, IC, OC, BLOCK = 3, 10, 32, 16                  # two blocks of 16 output channels
blocks = -(-OC // BLOCK)
w = rng.integers(-20, 20, (OC, IC)).astype(np.int8)
arranged = np.zeros((blocks * BLOCK, IC), np.int8)
arranged[:OC] = w
arranged = np.ascontiguousarray(arranged.reshape(blocks, BLOCK, IC).transpose(0, 2, 1))
x = rng.integers(-128, 128, (N, IC)).astype(np.int8)
pairs = np.zeros((blocks * BLOCK, 2), np.int32)
pairs[:OC] = np.stack([rng.integers(-300, 300, OC), rng.integers(1, 6, OC)], 1)
prog = nk.build(fully_connected, target="torq", input=nk.spec(x.shape, "int8"),
                weight=nk.spec(arranged.shape, "int8"), bias_scale=nk.spec((pairs.size,), "int32"),
                output=nk.spec((N, OC), "int8"))
acc = x.astype(np.int64) @ w.T.astype(np.int64)
want = np.clip((((acc + pairs[:OC, 0]) * pairs[:OC, 1] + (1 << (SHIFT - 1))) >> SHIFT) + ZP,
               LO, HI)
assert (want == LO).any() and (want == HI).any()
for backend in ("sim", "c"):
    out = np.where(want == 99, -99, 99).astype(np.int8)   # a canary unlike every result
    prog.run(backend, input=x, weight=arranged, bias_scale=pairs.reshape(-1), output=out)
    print(backend, "first outputs:", out[0, :6], "matches numpy:", bool((out == want).all()))
    assert (out == want).all()
