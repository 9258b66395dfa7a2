"""mlir-aie's LUT-based bfloat16 tanh (AIE2's ``getTanhBf16``) as an EasyKernel: the AIE
API's ``linear_approx<bfloat16, lut<4, float, bfloat16>>`` with ``step_bits = -2`` and
``bias = 16`` over a 32-entry table, so entry ``floor(4 x) + 16`` serves the inputs of
``[-4, 4)`` in cells of width 1/4, and inputs beyond read the end entries.

The table is written here from tanh itself: inside, the chord of each cell (bfloat16
slope, float32 offset through the cell's left end); the two end entries are flat at
tanh(-4) and tanh(4), so large inputs saturate. Every finite bfloat16 value goes through the
simulator and the generated C; both must equal numpy's reading of the instruction bit for
bit, and stay within the error the chord spacing and the bfloat16 result allow.

Run: python examples/aie/tanh_bf16.py
"""

import ml_dtypes
import numpy as np

import npukit as nk
from npukit.easy import PData
from npukit.lut import Lut, linear_approx

BF16 = ml_dtypes.bfloat16
STEP_BITS, BIAS, ENTRIES = -2, 16, 32


def tanh_table() -> Lut:
    """Chords of tanh on the cells [(i - 16) / 4, (i - 15) / 4), flat end entries."""
    left = (np.arange(ENTRIES) - BIAS) / 4.0
    slope = ((np.tanh(left + 0.25) - np.tanh(left)) / 0.25).astype(BF16)
    offset = (np.tanh(left) - slope.astype(np.float64) * left).astype(np.float32)
    slope[[0, -1]] = 0
    offset[[0, -1]] = np.tanh([-4.0, 4.0])
    return Lut(offset, slope)


@nk.kernel
def tanh_kernel(s, input, output, *, lut):
    """Stream the input through IRAM, one Act-width vector at a time through the table."""
    x = input.vectorize(s.alu.i_width(input.dtype))
    for i in s.iterate(x.dims(0, -1)):
        p = s.alu.accumulate(s.iram.load(x[i]))
        for av in s.iterate(p.dim(PData.Vectors)):
            s.append(output, s.act.linear_approx(p[av], lut, STEP_BITS, BIAS))


every = np.arange(0x10000, dtype=np.uint32).astype(np.uint16).view(BF16)
x = every[np.isfinite(every.astype(np.float32))]   # all 65280 finite bfloat16 values
lut = tanh_table()
target = nk.target("torq")
prog = nk.build(tanh_kernel, target, input=nk.spec(x.shape, BF16),
                output=nk.spec(x.shape, BF16), lut=lut)
out_sim = np.zeros_like(x)
res = prog.run("sim", input=x, output=out_sim)
out_c = np.zeros_like(x)
prog.run("c", input=x, output=out_c)

# numpy's reading of the instruction: linear_approx's float32 accumulator, rounded to bfloat16
want = linear_approx(lut, x, STEP_BITS, BIAS).astype(BF16)
exact = out_sim.tobytes() == want.tobytes() and out_c.tobytes() == want.tobytes()

xf = x.astype(np.float64)
err = np.abs(out_sim.astype(np.float64) - np.tanh(xf))
# Chord error h**2/8 max|tanh''| (h = 1/4, max|tanh''| < 0.77), plus bfloat16 slope rounding
# 2**-9 * h * max|tanh'|, plus half a bfloat16 ulp of a result below 1 (2**-9); beyond +-4
# the flat ends are off by 1 - tanh(4) < 6.8e-4.
bound = 0.25**2 / 8 * 0.77 + 2.0**-9 * 0.25 + 2.0**-9

print(f"tanh_bf16 on {target.name}: {x.size} bfloat16 inputs, {res.cycles} cycles")
print(f"table: {lut.size} entries, step_bits {STEP_BITS}, bias {BIAS}")
print(f"max abs error vs float64 tanh: {err.max():.6f} at x = {xf[err.argmax()]:g} "
      f"(bound {bound:.6f})")
print(f"simulator and C bit-exact with the instruction's numpy reading: {exact}")
assert exact and err.max() <= bound
