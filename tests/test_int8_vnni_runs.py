"""The integer feature-tile convolution's pointwise run form (``conv_int._run_block``: a 1x1
filter at stride 1 without padding, whose outputs are one run of the inputs, 64 outputs of up
to 4 features a block, quads of 4 input planes made by byte and word unpacks) against a numpy
int64 oracle written here: uint8 and int8 activations, zero points 0, 128, 255 and odd ones,
runs around the 16- and 64-output steps, input features not a multiple of 4, 1 to 4 features
a block (calls of fewer than 8 features, or of more on runs of 512 outputs or more: the form's
conditions), a tile of rows starting inside the input tile;
canaries on both sides of the accumulators. At stride 2 (``VnniStrided``) the inputs read are
gathered into runs first: planes of odd and even widths, gathered in one chunk or two."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from test_basic_kernels_conv import cflags
from test_int8_host_kernels import CANARY, FLAGS, ends

from npukit.tiler.basic_kernels import convolution, host


@cache
def kernel_of(in_dt: str, cores: int):
    kernel = convolution.layer_conv(in_dt, "int8", 8, planes=True)
    with cflags(FLAGS["native"]):
        return kernel, host.c_function(kernel, cores)


def pointwise_oracle(x, f, acc, zin, lines):
    """numpy int64: acc[o, q] + sum over i of (x[i, line0 + q] - zin) * f[o, i] (x's planes
    flattened, ``lines`` = (first input line of the outputs, the line width)), wrapped to
    int32."""
    line0, w = lines
    n = acc.shape[1]
    xs = x.reshape(x.shape[0], -1)[:, line0 * w:line0 * w + n].astype(np.int64) - zin
    out = acc.astype(np.int64) + f.astype(np.int64) @ xs
    return ((out + 2**31) % 2**32 - 2**31).astype(np.int32)


def accumulators(rng, outf: int, n: int):
    """Random int32 accumulators [outf, n] (sums wrap) inside a buffer with CANARY words of
    0x5A5A5A5A on both sides: (the buffer, the accumulators)."""
    acc0 = rng.integers(-2**31, 2**31, (outf, n)).astype(np.int32)
    buf = np.full(acc0.size + 2 * CANARY, 0x5A5A5A5A, np.int32)
    buf[CANARY:CANARY + acc0.size] = acc0.ravel()
    return buf, acc0


def assert_written(buf, want):
    """The accumulators of ``accumulators``' buffer are ``want`` (not a constant tile), the
    canaries around them untouched."""
    size = want.size
    assert np.array_equal(buf[CANARY:CANARY + size].reshape(want.shape), want)
    assert (buf[:CANARY] == 0x5A5A5A5A).all() and (buf[CANARY + size:] == 0x5A5A5A5A).all()
    assert len(np.unique(want)) > size // 2


@pytest.mark.parametrize("in_dt, zin", [("uint8", 0), ("uint8", 128), ("uint8", 255),
                                        ("uint8", 37), ("int8", -128), ("int8", 0),
                                        ("int8", 127), ("int8", -3)])
@pytest.mark.parametrize("inf, rows, w, outf, row0, cores", [
    (16, 4, 16, 8, 0, 8),     # 64 outputs: one block, 1 feature a core
    (19, 5, 13, 7, 0, 1),     # 65 outputs, 19 input features: blocks of 4 and 3
    (6, 9, 64, 9, 0, 1),      # 576 outputs (the form for 8 features or more): 4, 4, 1
    (7, 7, 7, 10, 2, 8),      # 7x7 rows 2..8 of an input tile of 11 lines; 2 features a core
    (96, 3, 43, 24, 1, 8),    # 129 outputs, 3 features a core
    (5, 1, 200, 4, 0, 1)])    # one row of 200 outputs, 4 features
def test_pointwise_runs_are_exact(in_dt, zin, inf, rows, w, outf, row0, cores):
    """Accumulators from random int32 (sums wrap) plus every input feature's product, each
    written once, the canaries around them untouched."""
    rng = np.random.default_rng(inf * 1000 + w * 10 + abs(zin))
    in_rows = rows + row0 + 2
    x = ends(rng, in_dt, inf * in_rows * w).reshape(inf, in_rows, w)
    f = ends(rng, "int8", outf * inf).reshape(outf, inf)
    n = rows * w
    buf, acc0 = accumulators(rng, outf, n)
    kernel, fn = kernel_of(in_dt, cores)
    given = dict(In=x.ravel(), W=w, InRow0=0, InRows=in_rows, Hreal=in_rows, PadT=0,
                 InFeat=inf, Filter=f.ravel(), Acc=buf[CANARY:CANARY + outf * n], Wo=w,
                 OutRow0=row0, OutRows=rows, OutFeat=outf, Fx=1, Fy=1, Sx=1, Sy=1, Dx=1, Dy=1,
                 PadL=0, Zin=zin, Zw=0)
    fn(*[given[k] for _, k in kernel.args])
    want = pointwise_oracle(x, f, acc0, zin, (row0, w))
    assert_written(buf, want)


@pytest.mark.parametrize("in_dt, zin", [("uint8", 0), ("uint8", 131), ("int8", -128),
                                        ("int8", 5)])
@pytest.mark.parametrize("inf, h, w, outf, row0, cores", [
    (9, 15, 15, 5, 0, 1),     # 8x8 outputs of a 15x15 plane (its last column unread)
    (40, 60, 60, 3, 0, 8),    # 30x30 outputs, 40 features: gathered in two chunks
    (6, 20, 70, 9, 2, 8)])    # 35 outputs a row (a 32-output step and a tail), rows 2..9
def test_pointwise_stride_two_gathers_are_exact(in_dt, zin, inf, h, w, outf, row0, cores):
    """A 1x1 filter at stride 2 (ResNet's projection shortcuts): the inputs it reads gathered
    into runs, then the run form; accumulators from random int32, canaries around them."""
    rng = np.random.default_rng(inf * 100 + w + abs(zin))
    wo, rows = (w + 1) // 2, (h + 1) // 2 - row0
    x = ends(rng, in_dt, inf * h * w).reshape(inf, h, w)
    f = ends(rng, "int8", outf * inf).reshape(outf, inf)
    n = rows * wo
    buf, acc0 = accumulators(rng, outf, n)
    kernel, fn = kernel_of(in_dt, cores)
    given = dict(In=x.ravel(), W=w, InRow0=0, InRows=h, Hreal=h, PadT=0, InFeat=inf,
                 Filter=f.ravel(), Acc=buf[CANARY:CANARY + outf * n], Wo=wo, OutRow0=row0,
                 OutRows=rows, OutFeat=outf, Fx=1, Fy=1, Sx=2, Sy=2, Dx=1, Dy=1, PadL=0,
                 Zin=zin, Zw=0)
    fn(*[given[k] for _, k in kernel.args])
    picked = x[:, 2 * row0::2, ::2]  # the inputs the outputs read, as a plane of runs
    want = pointwise_oracle(picked, f, acc0, zin, (0, wo))
    assert_written(buf, want)
