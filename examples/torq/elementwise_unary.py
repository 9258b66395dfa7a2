"""The Torq compiler's elementwise bitwise and logical NOT (its ElementWiseUnaryPattern),
written with the Torq EasyKernel names: the tensor is seen as blocks of the Act's width,
each block goes through the ALU in mode BNOT (``~x``) or NOT (``x == 0``) and is stored.

    out = ~x            (BITWISE_NOT)
    out = (x == 0)      (LOGICAL_NOT: 1 or 0)

As in the pattern, the output holds whole blocks (the last block's lanes past the data are
computed from whatever follows it in the input buffer, which reaches a whole block).

Run: python examples/torq/elementwise_unary.py
"""

import numpy as np

import npukit as nk
from npukit.easy import ALUOp1Mode


@nk.kernel
def elementwise_unary(s, input, output, *, numel, op):
    mode = {"BITWISE_NOT": ALUOp1Mode.BNOT, "LOGICAL_NOT": ALUOp1Mode.NOT}[op]
    block = s.act.width(input.dtype)
    blocks = -(-numel // block)
    x, out = input.setShape([blocks, block]), output.setShape([blocks, block])
    for b in s.iterate(blocks):
        pdata = s.alu.accumulate(s.iram.load(x[b]), mode)
        s.store(out[b], s.act.load(pdata))


rng = np.random.default_rng(13)
N, PADDED = 70, 80                      # 70 values in blocks of 16: the buffers hold 80
x = rng.integers(-128, 128, PADDED).astype(np.int8)
x[::5] = 0
for op, ref in (("BITWISE_NOT", np.invert), ("LOGICAL_NOT", lambda v: (v == 0).astype(v.dtype))):
    prog = nk.build(elementwise_unary, target="torq", input=nk.spec((PADDED,), "int8"),
                    output=nk.spec((PADDED,), "int8"), numel=N, op=op)
    want = ref(x)
    for backend in ("sim", "c"):
        out = np.where(want == 77, -77, 77).astype(np.int8)   # a canary unlike every result
        prog.run(backend, input=x, output=out)
        print(op, backend, out[:8], "matches numpy:", bool((out == want).all()))
        assert (out == want).all()
