"""The kernels of the Torq EasyKernel guide, in Python, and the Compass DSL tutorial's SiLU.
Each is a ``@kernel``: build it with ``npukit.build(k, target=..., name=npukit.spec(...),
..., attr=value)``."""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .c.threads import host_threads
from .dtypes import int_range
from .easy import PData, build, kernel, spec
from .errors import DTypeError, ShapeError
from .machine import target as _target


def _same_1d(input1, input2) -> None:
    if input1.rank != 1 or input2.rank != 1 or input1.dim(0) != input2.dim(0):
        raise ShapeError(f"mul: inputs must be 1-D of one length, got {input1.shape} and "
                         f"{input2.shape}")


@kernel
def mul_vanilla(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
    """The Torq EasyKernel guide's "1D tensor multiplication (vanilla)": one element per
    iteration."""
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
    """The Torq EasyKernel guide's "vectorized", first version: the output is vectorized too, so it
    must be padded to a multiple of the vector size (deprecated: see ``mul_vectorized``)."""
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
    """The Torq EasyKernel guide's "vectorized" with ``append``: any length, no padding."""
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
    """The Torq EasyKernel guide's "n-dimensional (vectorized)": a multi-iterator over all dims but
    the last."""
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
    """The Torq EasyKernel guide's "n-dimensional (optimized)": broadcast, fuse dense inner dims,
    vectorize. ``fuse=False`` keeps the dims apart (to measure what fusing buys)."""
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
def reduce_cols(s, input, output, *, vector="alu"):
    """Row sums: sum each row of [N, M] into [N], saturating to the output dtype (the
    reduction along the last axis, ``x.sum(axis=1)``). Neither unit reduces across lanes,
    so the vectors run down the columns instead: the transposed view ``input.permute((1,
    0))`` is [M, N], and ``vectorize(w, strided=True)`` cuts it into [M, ceil(N/w), w]
    vectors, each ``w`` rows' elements of one column, gathered by a strided transfer
    (stride: the row stride). For each block of ``w`` rows the ALU accumulates the M
    column vectors lane by lane, then the Act clamps Act-width sub-vectors of the partials
    (PData.Vectors) and appends them: lane k of block b is the sum of row ``b*w + k``.
    ``vector="alu"`` takes ALU-width blocks (the guide's advice for accumulations), ``"act"``
    Act-width ones. Any input strides; the output must be dense."""
    if input.rank != 2 or output.rank != 1 or input.dim(0) != output.dim(0):
        raise ShapeError(f"reduce_cols: input {input.shape} and output {output.shape} must be "
                         f"[N, M] and [N]")
    unit = s.alu.i_width if vector == "alu" else s.act.width
    xt = input.permute((1, 0)).vectorize(unit(input.dtype, None), strided=True)
    cols, blocks = 0, 1
    lo, hi = int_range(output.dtype)
    for b in s.iterate(xt.dim(blocks)):
        for c in s.iterate(xt.dim(cols)):
            idata = s.iram.load(xt[c][b])
            pdata = s.alu.accumulate(idata)
        for av in s.iterate(pdata.dim(PData.Vectors)):
            res = s.act.clamp(pdata[av], lo, hi)
            s.append(output, res)


@kernel
def reduce_rows(s, input, output, *, vector="alu"):
    """The Torq EasyKernel guide's "2-dimensional reduce": sum the rows of [N, M] into [M],
    saturating to the output dtype. ``vector="alu"`` accumulates ALU-width vectors and splits the
    partials into Act-width sub-vectors (the guide's advice); ``"act"`` uses Act-width
    throughout."""
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


# -- the Compass DSL tutorial: SiLU on float16 by a 512-entry table with interpolation ----

SILU_LUT_LEN = 512      # the Compass DSL tutorial's lut_len
SILU_LUT_EDGE = 10      # the Compass DSL tutorial's lut_edge: the table covers [-10, 10]


@functools.cache
def silu_table():
    """The Compass DSL tutorial's SiLU table in the AIE API's ``linear_approx`` form: ``(Lut,
    parameters)`` for ``s.act.linear_approx(p, lut, **parameters)``.

    The Compass DSL tutorial interpolates between neighbouring samples of a 512-entry table over
    [-10, 10] (the chord through them); a ``linear_approx`` entry holds that chord as (slope,
    offset). The AIE API's index is a shift, so cells are a power of two wide: the float16 input is
    scaled by ``2**4`` (exact) and 320 chords of width 1/16 cover [-10, 10) (the Compass DSL
    tutorial: 510 of width 20/510), sampled by ``npukit.lut.design("silu", -10, 10, 512,
    kind="linear")``. Outside the range the table does what the tutorial's clamp and mask do: the
    input is clamped below at -10 (its first chord starts at silu(-10)), and the other 192 entries,
    which every ``x >= 10`` reaches (the index saturates), hold the line ``y = x`` (slope
    ``2**-4`` per scaled unit, offset 0), the tutorial's ``vsel(x, ...)`` for
    ``x_idx >= lut_len - 2``."""
    from .lut import Lut, design

    d = design("silu", -SILU_LUT_EDGE, SILU_LUT_EDGE, SILU_LUT_LEN, kind="linear",
               method="sample")
    last = d.used[1]
    slopes, offsets = d.lut.slopes.copy(), d.lut.offsets.copy()
    slopes[last + 1:] = 2.0 ** -d.in_frac_bits      # y = x above the range
    offsets[last + 1:] = 0.0
    params = {"step_bits": d.step_bits, "bias": d.bias, "clamp": (d.clamp[0], None),
              "scale_exp": d.in_frac_bits}
    return Lut(offsets, slopes), params


@kernel
def silu_fp16(s, input, output):
    """The Compass DSL tutorial's SiLU on a 1-D float16 tensor: ALU-width vectors stream through
    IRAM (the tutorial's DMA to local SRAM), the ALU passes them to float32 partials, and the Act
    interpolates in ``silu_table()`` one Act-width sub-vector at a time; the store rounds
    the float32 results to float16 (nearest even). Any length: the last vector's junk lanes
    are never written (``append``). ``silu_fp16_on_cores`` splits the work over cores."""
    if input.rank != 1 or output.shape != input.shape:
        raise ShapeError(f"silu_fp16: input and output must be 1-D of one length, got "
                         f"{input.shape} and {output.shape}")
    if input.dtype != np.float16 or output.dtype != np.float16:
        raise DTypeError(f"silu_fp16: input and output must be float16, got {input.dtype} "
                         f"and {output.dtype}")
    table, params = silu_table()
    x = input.vectorize(s.alu.i_width(input.dtype))
    for i in s.iterate(x.dim(0)):
        idata = s.iram.load(x[i])
        pdata = s.alu.accumulate(idata)
        for av in s.iterate(pdata.dim(PData.Vectors)):
            res = s.act.linear_approx(pdata[av], table, **params)
            s.append(output, res)


def core_share(n: int, cores: int, core: int) -> tuple[int, int]:
    """The Compass DSL tutorial's split of ``n`` elements: core ``c`` takes
    ``[c * per, min(n, (c + 1) * per))`` with ``per = ceil(n / cores)``; the last cores may get
    fewer or none.

    >>> [core_share(5, 2, c) for c in range(2)], core_share(1, 2, 1)
    ([(0, 3), (3, 5)], (1, 1))
    """
    per = -(-n // cores)
    lo = min(n, core * per)
    return lo, min(n, lo + per)


def silu_fp16_on_cores(x: np.ndarray, out: np.ndarray, target="torq", backend: str = "sim"):
    """Run ``silu_fp16`` on every core of ``target`` (``cores`` in its TOML), as the Compass DSL
    tutorial does: core ``c`` gets its ``core_share`` of the elements as a program of its own (the
    tutorial's kernel reads its core id; here each core's program is built for its slice), and
    writes its slice of ``out``. The cores run in parallel, so the kernel takes the slowest
    core's cycles (their engines are modelled independently); in C they run at once on the
    host's threads. Returns ``[(core, (lo, hi),
    program, result)]`` for the cores with work."""
    tgt = _target(target)
    if x.ndim != 1 or out.shape != x.shape:
        raise ShapeError(f"silu_fp16_on_cores: x and out must be 1-D of one length, got "
                         f"{x.shape} and {out.shape}")
    cores = []
    for core in range(tgt.cores):
        lo, hi = core_share(x.size, tgt.cores, core)
        if lo < hi:
            xs, os_ = x[lo:hi], out[lo:hi]
            prog = build(silu_fp16, target=tgt, input=_spec_of(xs), output=_spec_of(os_))
            cores.append((core, (lo, hi), prog, xs, os_))

    def run(c):
        return c[2].run(backend, input=c[3], output=c[4])
    if backend == "c" and len(cores) > 1 and host_threads() > 1:
        # The cores write disjoint slices, as on the chip: on the host they run at once, on
        # the host's threads (the C call releases the GIL). Compiled one by one first.
        for c in cores:
            c[2].compile("c")
        with ThreadPoolExecutor(min(len(cores), host_threads())) as pool:
            results = list(pool.map(run, cores))
    else:
        results = [run(c) for c in cores]
    return [(core, span, prog, res) for (core, span, prog, _, _), res in zip(cores, results)]


def _spec_of(a: np.ndarray):
    return spec(a.shape, a.dtype, tuple(st // a.itemsize for st in a.strides))
