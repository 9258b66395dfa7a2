"""Torq EasyKernel unit methods: ``alu.load`` (the partials are the data; refused where a
loop would sum them) and a float ``biasScale`` of one value, the bias alone (Torq's float
types have no Act scale), as its ReduceMeanPattern uses it; simulator and C against
independent numpy readings."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import npukit as nk
from npukit import KernelError
from npukit.easy import PData

BF16 = ml_dtypes.bfloat16


@nk.kernel
def passthrough(s, input, output):
    x = input.vectorize(s.alu.iWidth(input.dtype))
    for i in s.iterate(x.dims(0, -1)):
        pdata = s.alu.load(s.iram.load(x[i]))
        for av in s.iterate(pdata.dim(PData.Vectors)):
            s.append(output, s.act.load(pdata[av]))


@nk.kernel
def summed_load(s, input, output, *, rows):
    for r in s.iterate(rows):
        pdata = s.alu.load(s.iram.load(input[r]))
    s.store(output, s.act.load(pdata))


def test_alu_load_passes_the_data():
    x = np.random.default_rng(1).integers(-128, 128, 300).astype(np.int8)
    prog = nk.build(passthrough, "torq", input=nk.spec(x.shape, "int8"),
                    output=nk.spec(x.shape, "int16"))
    for backend in ("sim", "c"):
        out = np.full(x.shape, 999, np.int16)
        prog.run(backend, input=x, output=out)
        assert np.array_equal(out, x), backend


def test_alu_load_refuses_a_loop_that_would_sum():
    with pytest.raises(KernelError, match=r"alu.load .*outside loop \w+ \(4 iterations\), so "
                                          r"they would be summed.*use accumulate"):
        nk.build(summed_load, "torq", input=nk.spec((4, 8), "int8"),
                 output=nk.spec((8,), "int32"), rows=4)
    prog = nk.build(summed_load, "torq", input=nk.spec((1, 8), "int8"),
                    output=nk.spec((8,), "int32"), rows=1)   # one iteration sums nothing
    x = np.arange(-4, 4, dtype=np.int8).reshape(1, 8)
    out = np.zeros(8, np.int32)
    prog.run("sim", input=x, output=out)
    assert np.array_equal(out, x[0])


@nk.kernel
def reduce_mean(s, input, weight, bias_scale, output, *, lo, hi):
    """Torq's ReduceMeanPattern: the mean over H as a sum of x * (1 / H), then the bias."""
    x = input.vectorize(s.alu.iWidth(input.dtype, weight.dtype))
    bdata = s.bram.load(bias_scale)
    wdata = s.wram.load(weight)
    for c in s.iterate(x.dim(0)):
        for b in s.iterate(x.dim(2)):
            for u in s.iterate(x.dim(1)):
                pdata = s.alu.scalarProductAccumulate(s.iram.load(x[c][u][b]), wdata)
            for a in s.iterate(pdata.dim(PData.Vectors)):
                s.append(output[c], s.act.rescaleClamp(pdata[a], bdata, 0, 0, lo, hi))


@pytest.mark.parametrize("bias_dtype", [np.float32, BF16])
def test_reduce_mean_with_a_one_value_float_bias(bias_dtype):
    """out[c, w] = bf16(clamp(sum_h x[c, h, w] / 8 + bias, lo, hi)), the sum in float32 in
    order of h (exact: dyadic data); canary-filled output; both clamps act."""
    rng = np.random.default_rng(2)
    x = (rng.integers(-64, 64, (3, 8, 40)) / 4).astype(BF16)
    weight = np.array([0.125], BF16)
    bias = np.array([0.75], bias_dtype)
    prog = nk.build(reduce_mean, "torq", input=nk.spec(x.shape, BF16),
                    weight=nk.spec((1,), BF16), bias_scale=nk.spec((1,), bias_dtype),
                    output=nk.spec((3, 40), BF16), lo=-6.0, hi=6.0)
    mean = np.add.accumulate(x.astype(np.float32) * np.float32(0.125), axis=1)[:, -1]
    want = np.clip(mean + np.float32(0.75), -6, 6).astype(BF16)
    assert (want == 6).any() and (want == -6).any() and (np.abs(want) < 6).any()
    for backend in ("sim", "c"):
        out = np.full((3, 40), np.nan, BF16)
        prog.run(backend, input=x, weight=weight, bias_scale=bias, output=out)
        assert out.tobytes() == want.tobytes(), backend


def test_one_value_bias_needs_float_partials():
    @nk.kernel
    def k(s, input, bias_scale, output):
        bdata = s.bram.load(bias_scale)
        pdata = s.alu.accumulate(s.iram.load(input))
        s.store(output, s.act.rescaleClamp(pdata, bdata, 0, 0, -128, 127))
    with pytest.raises(KernelError, match=r"one \(bias, scale\) pair; got 1 value"):
        nk.build(k, "torq", input=nk.spec((8,), "int8"), bias_scale=nk.spec((1,), "int32"),
                 output=nk.spec((8,), "int8"))


@nk.kernel
def fill(s, output, *, value):
    for ii in s.iterate(output.dims()):
        s.store(output[ii], value)


@pytest.mark.parametrize("dtype, value", [("uint8", 200), ("int32", -(2**31)),
                                          (BF16, -2.75), ("float32", 1e30)])
def test_store_of_a_constant_fills_every_element(dtype, value):
    """Torq's store(output, value): every element of a strided view, nothing beside it."""
    buf = np.zeros((5, 9), dtype)
    buf[...] = 7
    prog = nk.build(fill, "torq", output=nk.spec((5, 6), dtype, strides=(9, 1)), value=value)
    want = buf.copy()
    want[:, :6] = value
    for backend in ("sim", "c"):
        out = buf.copy()
        prog.run(backend, output=out[:, :6])
        assert out.tobytes() == want.tobytes(), backend


def test_store_of_a_constant_errors_name_what_is_wrong():
    with pytest.raises(KernelError, match="value 300 does not fit uint8 \\(0..255\\)"):
        nk.build(fill, "torq", output=nk.spec((4,), "uint8"), value=300)

    @nk.kernel
    def whole(s, output):
        s.store(output, 1)
    with pytest.raises(nk.ShapeError, match="must hold one element"):
        nk.build(whole, "torq", output=nk.spec((4,), "int8"))

    @nk.kernel
    def after_alu(s, input, output):
        s.alu.accumulate(s.iram.load(input))
        s.store(output[0], 1)
    with pytest.raises(KernelError, match="stores a constant loads nothing and has no ALU"):
        nk.build(after_alu, "torq", input=nk.spec((4,), "int8"), output=nk.spec((4,), "int8"))

    @nk.kernel
    def then_alu(s, input, output):
        s.store(output[0], 1)
        s.alu.accumulate(s.iram.load(input))
    with pytest.raises(KernelError, match="a kernel that stores a constant has no ALU or Act"):
        nk.build(then_alu, "torq", input=nk.spec((4,), "int8"), output=nk.spec((1,), "int8"))


@nk.kernel
def doubled_rows(s, input, output):
    x = input.vectorize(s.act.width(input.dtype) // 2)
    for r in s.iterate(x.dim(0)):
        for iv in s.iterate(x.dim(1)):
            pdata = s.alu.load(s.iram.load(x[r][iv]).repeat(2))
            s.append(output[r], s.act.load(pdata))


def test_idata_repeat_reads_each_element_twice():
    """IData.repeat(2): [a, b] is [a, a, b, b] to the ALU; 21 columns leave a last vector
    of 5 valid lanes (10 repeated), the rest junk that append drops."""
    x = np.random.default_rng(6).integers(-128, 128, (3, 21)).astype(np.int8)
    prog = nk.build(doubled_rows, "torq", input=nk.spec(x.shape, "int8"),
                    output=nk.spec((3, 42), "int8"))
    for backend in ("sim", "c"):
        out = np.full((3, 42), -99, np.int8)
        out[np.repeat(x, 2, axis=1) == -99] = 99
        prog.run(backend, input=x, output=out)
        assert (out == np.repeat(x, 2, axis=1)).all(), backend
    with pytest.raises(KernelError, match="1-byte elements.*int16"):
        nk.build(doubled_rows, "torq", input=nk.spec((3, 21), "int16"),
                 output=nk.spec((3, 42), "int16"))


@nk.kernel
def per_item_bias(s, input, bias_scale, output, *, shift):
    n = s.act.width(input.dtype, per_item=True)
    x = input.vectorize(n)
    b = bias_scale.reshapeDim(0, [-1, n, bias_scale.dim(0) // input.dim(0)])
    for i in s.iterate(x.dim(0)):
        bdata = s.bram.load(b[i])
        pdata = s.alu.load(s.iram.load(x[i]))
        s.append(output, s.act.rescaleClamp(pdata, bdata, shift, 0, -1000, 1000))


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_per_item_bias_records(dtype):
    """Torq's biasScalePerItem: lane i of each Act vector takes record i % R (R = 4 pairs
    of int32, or 8 float32 biases, what the bias memory holds)."""
    rng = np.random.default_rng(9)
    floating = dtype == "float32"
    x = (rng.integers(-100, 100, 24) / (4 if floating else 1)).astype(dtype)
    if floating:
        bias = (rng.integers(-40, 40, 24) / 8).astype(np.float32)
        want = np.clip(x + bias, -1000, 1000).astype(np.float32)
        records = bias
    else:
        pairs = np.stack([rng.integers(-50, 50, 24), rng.integers(1, 9, 24)], 1).astype(np.int32)
        want = np.clip((((x.astype(np.int64) + pairs[:, 0]) * pairs[:, 1] + 2) >> 2), -1000, 1000)
        records = pairs.reshape(-1)
    prog = nk.build(per_item_bias, "torq", input=nk.spec((24,), dtype),
                    bias_scale=nk.spec(records.shape, records.dtype),
                    output=nk.spec((24,), "float32" if floating else "int16"),
                    shift=0 if floating else 2)
    for backend in ("sim", "c"):
        out = np.full(24, 5000, np.float32 if floating else np.int16)
        prog.run(backend, input=x, bias_scale=records, output=out)
        assert (out == want).all(), backend


def test_per_item_records_must_be_a_power_of_two():
    @nk.kernel
    def k(s, input, bias_scale, output):
        bdata = s.bram.load(bias_scale.reshapeDim(0, [3, 2]))
        s.store(output, s.act.rescaleClamp(s.alu.load(s.iram.load(input)), bdata, 0, 0, -9, 9))
    with pytest.raises(KernelError, match=r"records of shape \(3, 2\).*power of two up to 4"):
        nk.build(k, "torq", input=nk.spec((8,), "int8"), bias_scale=nk.spec((6,), "int32"),
                 output=nk.spec((8,), "int8"))


@nk.kernel
def bits_through(s, input, output):
    x, out = input.setElementType("int16"), output.setElementType("int16")
    x = x.vectorize(s.act.width(x.dtype))
    for i in s.iterate(x.dim(0)):
        s.append(out, s.act.load(s.alu.load(s.iram.load(x[i]))))


def test_set_element_type_moves_the_same_bytes():
    """bfloat16 moved as int16 (Torq's IdentityPattern, Im2ColPattern): every bit pattern
    arrives, NaN payloads and -0.0 included; int8 read as uint8 (its unsigned cast)."""
    a = np.array([1.5, -0.0, np.inf, -2.25, 3e38, 1e-40, -7, 0.1] * 3, BF16)
    a = np.concatenate([a, np.array([0x7FC1, 0xFFA0], np.uint16).view(BF16)])
    prog = nk.build(bits_through, "torq", input=nk.spec(a.shape, BF16),
                    output=nk.spec(a.shape, BF16))
    for backend in ("sim", "c"):
        out = np.full(a.shape, 5, BF16)
        prog.run(backend, input=a, output=out)
        assert out.view(np.uint16).tolist() == a.view(np.uint16).tolist(), backend

    @nk.kernel
    def unsigned(s, input, output):
        x = input.setElementType("uint8").vectorize(s.act.width("uint8"))
        for i in s.iterate(x.dim(0)):
            s.append(output, s.act.load(s.alu.load(s.iram.load(x[i]))))
    b = np.arange(-128, 128, 7, dtype=np.int8)
    prog = nk.build(unsigned, "torq", input=nk.spec(b.shape, "int8"),
                    output=nk.spec(b.shape, "int32"))
    for backend in ("sim", "c"):
        out = np.full(b.shape, -5, np.int32)
        prog.run(backend, input=b, output=out)
        assert (out == b.view(np.uint8)).all(), backend
    with pytest.raises(nk.ShapeError, match=r"set_element_type\(int16\) of int8.*2 B and 1 B"):
        nk.build(bits_through, "torq", input=nk.spec(b.shape, "int8"),
                 output=nk.spec(b.shape, "int8"))


def test_weight_and_kernel_widths_come_from_the_target(tmp_path):
    """Torq's alu.wWidth (its 32-byte weight segment over the weight size) and kerWidth
    (3), read from the target's [units.alu.sizes]; a target without them says so."""
    seen = []

    @nk.kernel
    def k(s, input, output):
        seen.append((s.alu.wWidth("int8"), s.alu.w_width("int16"), s.alu.w_width(),
                     s.alu.kerWidth()))
        s.store(output, s.act.load(s.alu.load(s.iram.load(input))))
    specs = {"input": nk.spec((4,), "int8"), "output": nk.spec((4,), "int8")}
    nk.build(k, "torq", **specs)
    assert seen == [(32, 16, 32, 3)]
    text = (Path(nk.target("torq").path)).read_text()
    bare = tmp_path / "bare.toml"
    bare.write_text(text.replace("[units.alu.sizes]", "[unused]"))
    with pytest.raises(KernelError, match=r"s.alu.w_width: target 'torq' gives no "
                                          r"\[units.alu.sizes\] weight_segment_bytes"):
        nk.build(k, str(bare), **specs)
