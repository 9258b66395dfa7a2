"""Torq's ALU accumulate modes (``ALUOp1Mode``: ACC, MAX, MIN, MUL, BAND, BOR, BXOR, and the
one-input NOT and BNOT) on the simulator and in C, against numpy reductions of the same
data (int32 wrap-around for products)."""

from __future__ import annotations

import numpy as np
import pytest

import npukit as nk
from npukit import KernelError
from npukit.easy import ALUOp1Mode, PData


@nk.kernel
def reduce_rows(s, input, output, *, mode):
    x = input.vectorize(s.alu.iWidth(input.dtype))
    for rv in s.iterate(x.dim(-2)):
        for r in s.iterate(x.dim(0)):
            pdata = s.alu.accumulate(s.iram.load(x[r][rv]), mode)
        for av in s.iterate(pdata.dim(PData.Vectors)):
            s.append(output, s.act.load(pdata[av]))


def wrap32(v):
    return (v + 2**31) % 2**32 - 2**31


REFS = {"ACC": lambda a: a.sum(0), "MAX": lambda a: a.max(0), "MIN": lambda a: a.min(0),
        "MUL": lambda a: wrap32(np.prod(a, 0, dtype=object).astype(object)),
        "BAND": lambda a: np.bitwise_and.reduce(a, 0), "BOR": lambda a: np.bitwise_or.reduce(a, 0),
        "BXOR": lambda a: np.bitwise_xor.reduce(a, 0)}


@pytest.mark.parametrize("mode", list(REFS))
def test_accumulate_modes_match_numpy(mode):
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (6, 70)).astype(np.int8)
    x[0, 0], x[1, 1] = -128, 127
    prog = nk.build(reduce_rows, "torq", input=nk.spec(x.shape, "int8"),
                    output=nk.spec((70,), "int32"), mode=getattr(ALUOp1Mode, mode))
    want = np.array([int(v) for v in REFS[mode](x.astype(np.int64))], np.int64)
    for backend in ("sim", "c"):
        out = np.full(70, -999999, np.int32)
        prog.run(backend, input=x, output=out)
        assert (out == want).all(), backend


@nk.kernel
def unary(s, input, output, *, mode):
    x = input.vectorize(s.act.width(input.dtype))
    for b in s.iterate(x.dim(0)):
        s.append(output, s.act.load(s.alu.accumulate(s.iram.load(x[b]), mode)))


@pytest.mark.parametrize("mode, ref", [("BNOT", np.invert),
                                       ("NOT", lambda a: (a == 0).astype(a.dtype))])
def test_not_and_bnot_transform_one_input(mode, ref):
    x = np.random.default_rng(4).integers(-128, 128, 50).astype(np.int8)
    x[::7] = 0
    prog = nk.build(unary, "torq", input=nk.spec(x.shape, "int8"),
                    output=nk.spec(x.shape, "int8"), mode=mode)
    for backend in ("sim", "c"):
        out = np.full(50, 99, np.int8)
        prog.run(backend, input=x, output=out)
        assert (out == ref(x)).all(), backend


@nk.kernel
def max_of_products(s, input, weight, output):
    x = input.vectorize(s.act.width(input.dtype, weight.dtype))
    wdata = s.wram.load(weight)
    for rv in s.iterate(x.dim(-2)):
        for r in s.iterate(x.dim(0)):
            pdata = s.alu.scalarProductAccumulate(s.iram.load(x[r][rv]), wdata, "MAX")
        s.append(output, s.act.load(pdata))


def test_product_with_max_mode_and_float_product_accumulation():
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, (4, 40)).astype(np.int8)
    prog = nk.build(max_of_products, "torq", input=nk.spec(x.shape, "int8"),
                    weight=nk.spec((1,), "int8"), output=nk.spec((40,), "int32"))
    for backend in ("sim", "c"):
        out = np.full(40, -999999, np.int32)
        prog.run(backend, input=x, weight=np.array([-3], np.int8), output=out)
        assert (out == (x.astype(np.int64) * -3).max(0)).all(), backend
    f = rng.uniform(0.5, 1.5, (5, 8)).astype(np.float32)
    prog = nk.build(reduce_rows, "torq", input=nk.spec(f.shape, "float32"),
                    output=nk.spec((8,), "float32"), mode="MUL")
    want = f[0]
    for row in f[1:]:
        want = (want * row).astype(np.float32)   # float32 products in row order
    for backend in ("sim", "c"):
        out = np.full(8, np.nan, np.float32)
        prog.run(backend, input=f, output=out)
        assert out.tobytes() == want.tobytes(), backend


def test_mode_errors_name_the_mode():
    def build(mode, dtype="int8", rows=3):
        return nk.build(reduce_rows, "torq", input=nk.spec((rows, 16), dtype),
                        output=nk.spec((16,), dtype), mode=mode)

    with pytest.raises(KernelError, match="ALU mode 'AMAX'.*ACC, MAX"):
        build("AMAX")
    with pytest.raises(KernelError, match="BXOR is bitwise.*float32"):
        build("BXOR", "float32")
    with pytest.raises(KernelError, match=r"alu.accumulate\(..., BNOT\).*3 iterations"):
        build("BNOT")


@nk.kernel
def act_mode(s, input, output, *, mode, lo, hi):
    x = input.vectorize(s.act.width(input.dtype))
    for i in s.iterate(x.dim(0)):
        s.append(output, s.act.clamp(s.alu.load(s.iram.load(x[i])), lo, hi, mode))


def act_ref(mode, x, lo, hi):
    """numpy's reading of Torq's Act modes (in float64 / Python ints), then the clamp."""
    wide = x.astype(np.float64) if x.dtype.kind == "f" else x.astype(np.int64)
    v = {"ABS": np.abs, "NEG": np.negative, "CEL": np.ceil, "FLR": np.floor,
         "I2F": lambda a: a.astype(np.float32).astype(np.float64), "F2I": lambda a: a,
         "CLZ": lambda a: np.array([32 - int(u).bit_length() for u in a & 0xFFFFFFFF])}[mode](wide)
    with np.errstate(invalid="ignore"):
        v = np.where(v < lo, lo, v)
        v = np.where(v > hi, hi, v)
    if mode == "F2I":
        return np.clip(np.nan_to_num(np.trunc(v), nan=0), -2**31, 2**31 - 1).astype(np.int32)
    return v.astype(np.float32 if mode == "I2F" or x.dtype.kind == "f" else np.int32)


RNG = np.random.default_rng(8)
INTS = np.concatenate([[0, -2**31, 1, -1, 2**31 - 1],
                       RNG.integers(-2**31, 2**31, 45)]).astype(np.int32)
FLOATS = np.concatenate([[np.nan, -0.5, 0.5, 3e9, -3e9, -2.5],
                         RNG.standard_normal(44) * 1000]).astype(np.float32)


@pytest.mark.parametrize("mode, x, lo, hi", [
    ("ABS", INTS, -2**31, 2**31 - 1), ("NEG", INTS, -10**9, 10**9), ("CLZ", INTS, 0, 40),
    ("ABS", FLOATS, -np.inf, 500.0), ("NEG", FLOATS, -np.inf, np.inf),
    ("CEL", FLOATS, -np.inf, np.inf), ("FLR", FLOATS, -100.0, np.inf),
    ("I2F", INTS, -1e9, np.inf), ("F2I", FLOATS, -np.inf, np.inf)])
def test_act_modes_match_numpy(mode, x, lo, hi):
    want = act_ref(mode, x, lo, hi)
    prog = nk.build(act_mode, "torq", input=nk.spec(x.shape, x.dtype),
                    output=nk.spec(x.shape, want.dtype), mode=mode, lo=lo, hi=hi)
    for backend in ("sim", "c"):
        out = np.full(x.shape, 7, want.dtype)
        out[want == 7] = 8
        prog.run(backend, input=x, output=out)
        assert out.tobytes() == want.tobytes(), backend


def test_act_mode_errors_name_the_mode():
    def build(mode, dtype):
        return nk.build(act_mode, "torq", input=nk.spec((8,), dtype),
                        output=nk.spec((8,), dtype), mode=mode, lo=0, hi=1)

    with pytest.raises(KernelError, match="Act mode 'SQRT'.*ABS, NEG"):
        build("SQRT", "int8")
    with pytest.raises(KernelError, match="Act mode CEL takes float partials.*int32"):
        build("CEL", "int8")
    with pytest.raises(KernelError, match="Act mode I2F takes integer partials.*float32"):
        build("I2F", "float32")
