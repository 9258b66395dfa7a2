"""The Torq compiler's reduction along one axis (its ReducePattern), written with the Torq
EasyKernel names: the ALU folds the rows of the reduced axis vector by vector in the
pattern's mode, and the Act passes each Act-width part of the result through
(``act.load``), or adds a per-channel float bias (a convolution's bias absorbed into the
reduce).

    reduce_sum/max/min/mul/and/or/xor:  out[b, i] = fold over r of x[b, r, i]
    with a float32 bias per channel:    out[n, c] = clamp(fold + bias[c], lo, hi)

int32 results wrap (sum, product); ``fake=True`` is the pattern's single-load kernel for
measuring transfers (its ``clTorqFakeReduce`` option): one vector of the input's first
element (every index 0, the vector's lane too), folded once.

Run: python examples/torq/reduce.py
"""

import numpy as np

import npukit as nk
from npukit.easy import ALUOp1Mode, PData

MODES = {"reduce_sum": ALUOp1Mode.ACC, "reduce_max": ALUOp1Mode.MAX,
         "reduce_min": ALUOp1Mode.MIN, "reduce_and": ALUOp1Mode.BAND,
         "reduce_or": ALUOp1Mode.BOR, "reduce_xor": ALUOp1Mode.BXOR,
         "reduce_mul": ALUOp1Mode.MUL}


@nk.kernel
def reduce(s, input, bias_scale, output, *, op, axis, lo=0, hi=0, fake=False):
    mode = MODES[op]
    dense = min(input.denseDims(), output.denseDims(), input.rank - axis - 1)
    # Torq's fuse(0) appends a one-element dim (a reduce over the last axis then takes one
    # element at a time); npukit's fuse(0) changes nothing, so that dim is inserted.
    x = input.fuse(dense) if dense else input.insertDim(input.rank, 1, 1)
    x = x.vectorize(s.alu.iWidth(input.dtype))
    if bias_scale.dtype == np.float32:
        per_channel_bias_reduce(s, x, bias_scale, output, axis, mode, lo, hi)
    elif fake:
        pdata = s.alu.accumulate(s.iram.load(x[(0,) * x.rank]), mode)
        s.append(output, s.act.load(pdata))
    else:
        for b in s.iterate(x.dims(0, axis)):
            for i in s.iterate(x.dims(axis + 1, -2)):
                for rv in s.iterate(x.dim(-2)):
                    for r in s.iterate(x.dim(axis)):
                        pdata = s.alu.accumulate(s.iram.load(x[b][r][i][rv]), mode)
                    for av in s.iterate(pdata.dim(PData.Vectors)):
                        s.append(output[b][i], s.act.load(pdata[av]))


def per_channel_bias_reduce(s, x, bias_scale, output, axis, mode, lo, hi):
    # The [C] bias along output dim 1, broadcast (stride 0) to the output's shape.
    bias = bias_scale.insertDim(0, 1)
    for _ in range(2, output.rank):
        bias = bias.insertDim(bias.rank, 1)
    bias = bias.broadcastAs(output)
    for b in s.iterate(x.dims(0, axis)):
        bdata = s.bram.load(bias[b])
        for i in s.iterate(x.dims(axis + 1, -2)):
            for rv in s.iterate(x.dim(-2)):
                for r in s.iterate(x.dim(axis)):
                    pdata = s.alu.accumulate(s.iram.load(x[b][r][i][rv]), mode)
                for av in s.iterate(pdata.dim(PData.Vectors)):
                    s.append(output[b][i], s.act.rescaleClamp(pdata[av], bdata, 0, 0, lo, hi))


def wrap32(v):
    return ((v + 2**31) % 2**32 - 2**31).astype(np.int64)


FOLDS = {"reduce_sum": np.add, "reduce_max": np.maximum, "reduce_min": np.minimum,
         "reduce_and": np.bitwise_and, "reduce_or": np.bitwise_or,
         "reduce_xor": np.bitwise_xor, "reduce_mul": np.multiply}
rng = np.random.default_rng(9)
x = rng.integers(-128, 128, (3, 10, 40)).astype(np.int8)
no_bias = np.array([0, 1], np.int32)
for op, fold in FOLDS.items():
    prog = nk.build(reduce, target="torq", input=nk.spec(x.shape, "int8"),
                    bias_scale=nk.spec((2,), "int32"), output=nk.spec((3, 40), "int32"),
                    op=op, axis=1)
    acc = x[:, 0].astype(np.int64)
    for r in range(1, 10):
        acc = wrap32(fold(acc, x[:, r]))    # int32 wrap-around at every step
    for backend in ("sim", "c"):
        out = np.full(acc.shape, -999999, np.int32)
        prog.run(backend, input=x, bias_scale=no_bias, output=out)
        print(op, backend, out[0, :5], "matches numpy:", bool((out == acc).all()))
        assert (out == acc).all()

# reduce_max over the last axis of [N, C, L] float32 data, a float32 bias per channel.
f = rng.uniform(-4, 4, (2, 5, 30)).astype(np.float32)
bias = rng.uniform(-1, 1, 5).astype(np.float32)
prog = nk.build(reduce, target="torq", input=nk.spec(f.shape, "float32"),
                bias_scale=nk.spec((5,), "float32"), output=nk.spec((2, 5), "float32"),
                op="reduce_max", axis=2, lo=-3.5, hi=3.5)
want = np.clip(f.max(2) + bias, np.float32(-3.5), np.float32(3.5))
for backend in ("sim", "c"):
    out = np.full(want.shape, np.nan, np.float32)
    prog.run(backend, input=f, bias_scale=bias, output=out)
    print("reduce_max + bias", backend, "matches numpy:", out.tobytes() == want.tobytes())
    assert out.tobytes() == want.tobytes()

# The single-load kernel: input[0, 0, 0] alone, folded once (the rest stays unwritten).
prog = nk.build(reduce, target="torq", input=nk.spec((2, 3, 70), "int8"),
                bias_scale=nk.spec((2,), "int32"),
                output=nk.spec((2, 70), "int32", partial=True), op="reduce_sum", axis=1,
                fake=True)
y = rng.integers(-128, 128, (2, 3, 70)).astype(np.int8)
for backend in ("sim", "c"):
    out = np.full((2, 70), -999999, np.int32)
    prog.run(backend, input=y, bias_scale=no_bias, output=out)
    print("fake reduce", backend, out[0, :3])
    assert out[0, 0] == y[0, 0, 0] and (out.reshape(-1)[1:] == -999999).all()
