"""mlir-aie's 8-bit reciprocal table (``aie_kernels/aie2/lut_inv_8b.h``) as an EasyKernel:
the AIE API's ``parallel_lookup`` of uint8 inputs in a 256-entry table of uint16 values
holding ``1 / x`` in Q0.8, ``floor(256 / x)`` kept to 8 bits, so ``x = 1`` reads 0 (256 wraps)
and ``x = 0`` reads 255 (the table's stand-in for infinity).

The table is written here from that rule; the target stores it bank-interleaved for its
parallel accesses as the AIE API lays out ``aie::lut``. Every uint8 value, many times over,
goes through the simulator and the generated C; both must equal the table's rule computed
independently in float64 numpy, bit for bit, and so be within one Q0.8 step (1/256) below
the true reciprocal for every x from 2 up.

Run: python examples/aie/inv_u8.py
"""

import numpy as np

import npukit as nk
from npukit.easy import PData
from npukit.lut import Lut

i = np.arange(256)
table = Lut(np.where(i == 0, 255, np.floor(256.0 / np.maximum(i, 1)) % 256).astype(np.uint16))


@nk.kernel
def inv_kernel(s, input, output, *, lut):
    """Stream the input through IRAM; the Act looks each partial up, step_bits 0."""
    x = input.vectorize(s.alu.i_width(input.dtype))
    for k in s.iterate(x.dims(0, -1)):
        p = s.alu.accumulate(s.iram.load(x[k]))
        for av in s.iterate(p.dim(PData.Vectors)):
            s.append(output, s.act.lookup(p[av], lut))


rng = np.random.default_rng(8)
x = np.concatenate([np.arange(256), rng.integers(0, 256, 1800)]).astype(np.uint8)
target = nk.target("torq")
prog = nk.build(inv_kernel, target, input=nk.spec(x.shape, np.uint8),
                output=nk.spec(x.shape, np.uint16), lut=table)
out_sim = np.full(x.shape, 0xA5A5, np.uint16)
res = prog.run("sim", input=x, output=out_sim)
out_c = np.full(x.shape, 0xA5A5, np.uint16)
prog.run("c", input=x, output=out_c)

xf = x.astype(np.float64)
with np.errstate(divide="ignore", invalid="ignore"):
    recip = 1.0 / xf                                  # float64 reciprocal (inf at 0)
    want = np.where(x == 0, 255, np.floor(recip * 256) % 256).astype(np.uint16)
exact = np.array_equal(out_sim, want) and np.array_equal(out_c, want)
big = x >= 2
err = recip[big] - out_sim[big] / 256.0
print(f"inv_u8 on {target.name}: {x.size} uint8 inputs, {res.cycles} cycles, table "
      f"{table.size} entries")
print(f"simulator and C equal the Q0.8 rule bit for bit: {exact}")
print(f"x >= 2: the Q0.8 result is below 1/x by at most {err.max():.6f} (one step: "
      f"{1 / 256:.6f})")
# the first entries as mlir-aie publishes them
assert table.offsets[:8].tolist() == [255, 0, 128, 85, 64, 51, 42, 36]
assert exact and 0 <= err.min() and err.max() < 1 / 256
