"""Act ``to_fixed`` (the AIE API's ``aie::to_fixed<int32>(v, shift)``, AIE-ML's floor): every
bfloat16 value through the simulator and the C back end against numpy float64's floor,
saturation into int32 and into the output tensor, NaN to 0, and the errors it raises; and
``nk.sequence`` of programs that each hold a lookup table (constants kept apart)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import npukit as nk
from npukit import KernelError
from npukit.lut import Lut

BF16 = ml_dtypes.bfloat16


@nk.kernel
def fixed(s, input, output, *, shift):
    """Each element alone through the ALU and ``to_fixed`` (vectors: exp_bf16.py)."""
    for ii in s.iterate(input.dims()):
        pdata = s.alu.accumulate(s.iram.load(input[ii]))
        s.store(output[ii], s.act.to_fixed(pdata, shift))


@nk.kernel
def table(s, input, output, *, lut):
    for ii in s.iterate(input.dims()):
        pdata = s.alu.accumulate(s.iram.load(input[ii]))
        s.store(output[ii], s.act.lookup(pdata, lut))


@pytest.mark.parametrize("shift, out", [(8, np.int16), (-3, np.int32), (0, np.int32)])
def test_every_bfloat16_value_to_fixed_point(shift, out):
    """floor(x * 2**shift) in float64, NaN 0, saturated to int32 and then to the output's
    type; simulator and C agree with it on all 65536 bit patterns (canary-filled output)."""
    x = np.arange(0x10000, dtype=np.uint32).astype(np.uint16).view(BF16)
    prog = nk.build(fixed, "torq", input=nk.spec(x.shape, BF16), output=nk.spec(x.shape, out),
                    shift=shift)
    with np.errstate(invalid="ignore"):
        t = np.floor(x.astype(np.float64) * 2.0 ** shift)
    info = np.iinfo(out)
    t = np.clip(np.nan_to_num(t, nan=0.0), -2.0 ** 31, 2.0 ** 31 - 1)
    want = np.clip(t, info.min, info.max).astype(out)
    for backend in ("sim", "c"):
        got = np.full(x.shape, 0x5A5A, out)
        prog.run(backend, input=x, output=got)
        assert np.array_equal(got, want), backend
    assert want.min() == info.min and want.max() == info.max  # both ends saturate


def test_to_fixed_errors_name_what_is_wrong():
    spec = nk.spec((64,), BF16)
    with pytest.raises(KernelError, match="shift 127 outside -126..126"):
        nk.build(fixed, "torq", input=spec, output=nk.spec((64,), np.int32), shift=127)
    with pytest.raises(KernelError, match="to_fixed converts float partials.*int32"):
        nk.build(fixed, "torq", input=nk.spec((64,), np.int16),
                 output=nk.spec((64,), np.int32), shift=0)


def test_sequence_keeps_each_programs_table():
    """Two lookups with different tables in one sequence: each reads its own constant."""
    x = np.arange(-128, 128, dtype=np.int16)
    s = nk.spec(x.shape, np.int16)
    k = np.arange(256)
    lut_a = Lut(((k * 7) % 251).astype(np.int16))
    lut_b = Lut((1000 - k).astype(np.int16))
    ta = nk.build(table, "torq", input=s, output=s, lut=lut_a)
    tb = nk.build(table, "torq", input=s, output=s, lut=lut_b)
    both = nk.sequence((ta, {"output": "t"}), (tb, {"input": "t", "output": "y"}))
    want_t = lut_a.offsets[np.clip(x, 0, 255)]
    want_y = lut_b.offsets[np.clip(want_t, 0, 255)]
    for backend in ("sim", "c"):
        t, y = np.zeros_like(x), np.zeros_like(x)
        both.run(backend, input=x, t=t, y=y)
        assert np.array_equal(t, want_t) and np.array_equal(y, want_y), backend
