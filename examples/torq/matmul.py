"""The Torq compiler's matrix product (its MatMulPattern), written with the Torq
EasyKernel names: every operand becomes 3-D (``insertDim``: a batch in front, a column for
a matrix-vector product), the batches of A and B are broadcast to the output's
(``broadcastAs(output, 1)``), and for each row of A and vector of B's columns the ALU sums
one weight of A times a row vector of B over k before the Act rescales.

    out[b, m, n] = clamp((((sum_k a[b, m, k] x[b, k, n] + bias) * scale + r) >> shift) + zp,
                         lo, hi),  r = 2**(shift - 1)

Run: python examples/torq/matmul.py
"""

import numpy as np

import npukit as nk
from npukit.easy import PData

SHIFT, ZP, LO, HI = 4, 3, -128, 127


@nk.kernel
def matmul(s, input1, input2, bias_scale, output):
    a, b, c = input1, input2, output
    if b.rank == 1:   # a matrix-vector product: B is K x 1, C is M x 1
        b, c = b.insertDim(1, 1), c.insertDim(c.rank, 1)
    while a.rank < 3:
        a = a.insertDim(0, 1)
    while b.rank < 3:
        b = b.insertDim(0, 1)
    while c.rank < 3:
        c = c.insertDim(0, 1)
    a, b = a.broadcastAs(c, 1), b.broadcastAs(c, 1)     # the batch dim only
    b = b.vectorize(s.alu.iWidth(b.dtype, a.dtype))
    bdata = s.bram.load(bias_scale)
    for batch in s.iterate(a.dim(0)):
        for im in s.iterate(a.dim(1)):                  # rows of A
            for vn in s.iterate(b.dim(2)):              # vectors of B's columns
                for ik in s.iterate(a.dim(2)):          # k
                    wdata = s.wram.load(a[batch][im][ik])
                    idata = s.iram.load(b[batch][ik][vn])
                    pdata = s.alu.scalarProductAccumulate(idata, wdata)
                for av in s.iterate(pdata.dim(PData.Vectors)):
                    s.append(c[batch][im], s.act.rescaleClamp(pdata[av], bdata, SHIFT, ZP,
                                                              LO, HI))


def want(a, x, bias_scale) -> np.ndarray:
    """An independent numpy reading: int64 products and sums, the rescale, the clamp."""
    acc = np.matmul(a.astype(np.int64), x.astype(np.int64))
    bias, scale = (int(v) for v in bias_scale)
    return np.clip((((acc + bias) * scale + (1 << (SHIFT - 1))) >> SHIFT) + ZP, LO, HI)


rng = np.random.default_rng(13)
bias_scale = np.array([40, 3], np.int32)
cases = [((2, 7, 20), (1, 20, 90), (2, 7, 90)),      # B broadcast over the batch
         ((7, 20), (2, 20, 90), (2, 7, 90)),         # A 2-D, broadcast over the batch
         ((7, 20), (20,), (7,))]                     # a matrix-vector product
clamped = set()
for a_shape, x_shape, c_shape in cases:
    a = rng.integers(-20, 20, a_shape).astype(np.int8)
    x = rng.integers(-20, 20, x_shape).astype(np.int8)
    prog = nk.build(matmul, target="torq", input1=nk.spec(a_shape, "int8"),
                    input2=nk.spec(x_shape, "int8"), bias_scale=nk.spec((2,), "int32"),
                    output=nk.spec(c_shape, "int8"))
    expect = want(a, x, bias_scale) if x.ndim > 1 else want(a, x[:, None], bias_scale)[:, 0]
    expect = np.broadcast_to(expect, c_shape)
    clamped |= set(np.unique(expect)) & {LO, HI}
    canary = np.where(expect == 99, -99, 99).astype(np.int8)   # unlike every result
    for backend in ("sim", "c"):
        out = canary.copy()
        prog.run(backend, input1=a, input2=x, bias_scale=bias_scale, output=out)
        print(backend, a_shape, "x", x_shape, "matches numpy:", bool((out == expect).all()))
        assert (out == expect).all()
assert clamped == {LO, HI}   # both clamps act somewhere
