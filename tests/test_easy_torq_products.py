"""Torq's outer and multi-scalar products (``alu.outerProductAccumulate``,
``multiScalarProductAccumulate``): partials of ``[m, vectors, width]``, read row by row,
accumulated over a loop; simulator and C against numpy (int64 sums)."""

from __future__ import annotations

import numpy as np
import pytest

import npukit as nk
from npukit import KernelError


@nk.kernel
def outer(s, input, weight, output):
    """out[m, n] = sum over r of w[m] * x[r, n]: the input's rows in vectors of 16."""
    x = input.vectorize(16)
    wdata = s.wram.load(weight)
    for iv in s.iterate(x.dim(1)):
        for r in s.iterate(x.dim(0)):
            pdata = s.alu.outerProductAccumulate(s.iram.load(x[r][iv]), wdata)
        for m in s.iterate(weight.dim(0)):
            for av in s.iterate(pdata.dim(1)):
                s.append(output[m], s.act.load(pdata[m][av]))


@nk.kernel
def multi_scalar(s, input, weight, output):
    """out[m, n] = sum over r of w[m] * x[r, m, n]."""
    wdata = s.wram.load(weight)
    for r in s.iterate(input.dim(0)):
        pdata = s.alu.multiScalarProductAccumulate(s.iram.load(input[r]), wdata)
    for m in s.iterate(weight.dim(0)):
        for av in s.iterate(pdata.dim(1)):
            s.append(output[m], s.act.load(pdata[m][av]))


def test_outer_and_multi_scalar_products_match_numpy():
    rng = np.random.default_rng(10)
    w = rng.integers(-128, 128, 4).astype(np.int8)
    w[0] = -128
    x = rng.integers(-128, 128, (3, 40)).astype(np.int8)    # 40: a last vector of 8 lanes
    y = rng.integers(-128, 128, (3, 4, 12)).astype(np.int8)
    cases = [(outer, x, w[:, None].astype(np.int64) * x.astype(np.int64).sum(0)),
             (multi_scalar, y, (y.astype(np.int64) * w[None, :, None]).sum(0))]
    for kern, data, want in cases:
        prog = nk.build(kern, "torq", input=nk.spec(data.shape, "int8"),
                        weight=nk.spec((4,), "int8"), output=nk.spec(want.shape, "int32"))
        for backend in ("sim", "c"):
            out = np.full(want.shape, -999999, np.int32)
            prog.run(backend, input=data, weight=w, output=out)
            assert (out == want).all(), (kern.name, backend)


def test_rows_of_partials_are_indexed_before_the_act():
    @nk.kernel
    def k(s, input, weight, output):
        pdata = s.alu.outerProductAccumulate(s.iram.load(input), s.wram.load(weight))
        s.append(output, s.act.load(pdata))
    with pytest.raises(KernelError, match=r"4 rows .*pdata\[m\]\[av\]"):
        nk.build(k, "torq", input=nk.spec((8,), "int8"), weight=nk.spec((4,), "int8"),
                 output=nk.spec((32,), "int32"))
