"""The kernels of seed 000 (EasyKernel), in Python. Each is a ``@kernel``: build it with
``npukit.build(k, target=..., name=npukit.spec(...), ..., attr=value)``."""

from __future__ import annotations

from .dtypes import int_range
from .easy import PData, kernel
from .errors import ShapeError


def _same_1d(input1, input2) -> None:
    if input1.rank != 1 or input2.rank != 1 or input1.dim(0) != input2.dim(0):
        raise ShapeError(f"mul: inputs must be 1-D of one length, got {input1.shape} and "
                         f"{input2.shape}")


@kernel
def mul_vanilla(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
    """Seed 000 "1D tensor multiplication (vanilla)": one element per iteration."""
    _same_1d(input1, input2)
    bdata = s.bram.load(bias_scale)
    for i in s.iterate(input1.dim(0)):
        data1 = s.iram.load(input1[i])
        data2 = s.wram.load(input2[i])
        pdata = s.alu.elementwise_product_accumulate(data1, data2)
        res = s.act.rescale_clamp(pdata, bdata, shift, 0, out_min, out_max)
        s.store(output[i], res)


@kernel
def mul_vectorized_store(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
    """Seed 000 "vectorized", first version: the output is vectorized too, so it must be
    padded to a multiple of the vector size (deprecated: see ``mul_vectorized``)."""
    _same_1d(input1, input2)
    n = s.act.width(input1.dtype, input2.dtype)
    input1, input2, output = input1.vectorize(n), input2.vectorize(n), output.vectorize(n)
    bdata = s.bram.load(bias_scale)
    for i in s.iterate(input1.dim(0)):
        data1 = s.iram.load(input1[i])
        data2 = s.wram.load(input2[i])
        pdata = s.alu.elementwise_product_accumulate(data1, data2)
        res = s.act.rescale_clamp(pdata, bdata, shift, 0, out_min, out_max)
        s.store(output[i], res)


@kernel
def mul_vectorized(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
    """Seed 000 "vectorized" with ``append``: any length, no padding."""
    _same_1d(input1, input2)
    n = s.act.width(input1.dtype, input2.dtype)
    input1, input2 = input1.vectorize(n), input2.vectorize(n)
    bdata = s.bram.load(bias_scale)
    for i in s.iterate(input1.dim(0)):
        data1 = s.iram.load(input1[i])
        data2 = s.wram.load(input2[i])
        pdata = s.alu.elementwise_product_accumulate(data1, data2)
        res = s.act.rescale_clamp(pdata, bdata, shift, 0, out_min, out_max)
        s.append(output, res)


@kernel
def mul_ndim(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
    """Seed 000 "n-dimensional (vectorized)": a multi-iterator over all dims but the last."""
    if input1.shape != input2.shape:
        raise ShapeError(f"mul: input shapes {input1.shape} and {input2.shape} differ")
    if min(input1.dense_dims(), input2.dense_dims(), output.dense_dims()) == 0:
        raise ShapeError("mul: the innermost dim of inputs and output must be dense")
    n = s.act.width(input1.dtype, input2.dtype)
    input1, input2 = input1.vectorize(n), input2.vectorize(n)
    bdata = s.bram.load(bias_scale)
    for i in s.iterate(input1.dims(0, -1)):
        data1 = s.iram.load(input1[i])
        data2 = s.wram.load(input2[i])
        pdata = s.alu.elementwise_product_accumulate(data1, data2)
        res = s.act.rescale_clamp(pdata, bdata, shift, 0, out_min, out_max)
        s.append(output, res)


@kernel
def mul(s, input1, input2, bias_scale, output, *, shift, out_min, out_max, fuse=True):
    """Seed 000 "n-dimensional (optimized)": broadcast, fuse dense inner dims, vectorize.
    ``fuse=False`` keeps the dims apart (to measure what fusing buys)."""
    input1, input2 = input1.broadcast_as(output), input2.broadcast_as(output)
    dense = min(input1.dense_dims(), input2.dense_dims(), output.dense_dims()) if fuse else 0
    n = s.act.width(input1.dtype, input2.dtype)
    input1, input2 = input1.fuse(dense).vectorize(n), input2.fuse(dense).vectorize(n)
    output = output.fuse(dense)
    bdata = s.bram.load(bias_scale)
    for i in s.iterate(input1.dims(0, -1)):
        data1 = s.iram.load(input1[i])
        data2 = s.wram.load(input2[i])
        pdata = s.alu.elementwise_product_accumulate(data1, data2)
        res = s.act.rescale_clamp(pdata, bdata, shift, 0, out_min, out_max)
        s.append(output, res)


@kernel
def reduce_rows(s, input, output, *, vector="alu"):
    """Seed 000 "2-dimensional reduce": sum the rows of [N, M] into [M], saturating to the
    output dtype. ``vector="alu"`` accumulates ALU-width vectors and splits the partials
    into Act-width sub-vectors (the seed's advice); ``"act"`` uses Act-width throughout."""
    rows, cols = 0, 1
    if input.rank != 2 or output.rank != 1 or input.dim(cols) != output.dim(0):
        raise ShapeError(f"reduce: input {input.shape} and output {output.shape} must be "
                         f"[N, M] and [M]")
    if input.dense_dims() == 0 or output.dense_dims() == 0:
        raise ShapeError("reduce: input rows and output must be dense")
    unit = s.alu.i_width if vector == "alu" else s.act.width
    x = input.vectorize(unit(input.dtype, None))
    lo, hi = int_range(output.dtype)
    for c in s.iterate(x.dim(cols)):
        for r in s.iterate(x.dim(rows)):
            idata = s.iram.load(x[r][c])
            pdata = s.alu.accumulate(idata)
        for av in s.iterate(pdata.dim(PData.Vectors)):
            res = s.act.clamp(pdata[av], lo, hi)
            s.append(output, res)
