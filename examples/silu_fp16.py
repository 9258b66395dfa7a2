"""The Compass DSL tutorial's "LUT operator": SiLU on float16 by a 512-entry table over [-10, 10]
with interpolation between neighbouring entries, the work split over the target's cores, each
core streaming its share through local memory (vector loads into IRAM).

The table is the AIE API's ``linear_approx`` form of the tutorial's interpolation: one chord
(slope, offset) per cell (``npukit.kernels.silu_table``), carried by the program as
constant data in the Act's table memory. Inputs below -10 are clamped to -10 and inputs
from 10 up come out unchanged, as the tutorial's clip and mask do. Every finite float16 value
goes through the simulated kernel; the result must equal numpy's reading of the
instruction bit for bit, and stay within the error bound the table spacing and float16
rounding allow.

Run: python examples/silu_fp16.py
"""

import numpy as np

import npukit as nk
from npukit.kernels import silu_fp16_on_cores, silu_table
from npukit.lut import linear_approx


def compass_silu(x):
    """The Compass DSL tutorial's own computation, in numpy: float16 table, float16
    interpolation."""
    lut_len, edge = 512, 10
    xs = np.linspace(-edge, edge, lut_len - 1)
    lut = np.zeros(lut_len, np.float16)
    lut[:-1] = xs / (1 + np.exp(-xs))
    lut[-1] = edge
    xc = np.clip(x, np.float16(-edge), np.float16(edge))
    x_idx = (xc.astype(np.float32) + np.float32(edge)) * (np.float32(lut_len - 2)
                                                           / np.float32(2 * edge))
    x_idxr = np.rint(x_idx - np.float32(0.5))
    i = x_idxr.astype(np.uint16)
    yy = ((lut[i + 1] - lut[i]).astype(np.float32) * (x_idx - x_idxr)).astype(np.float16)
    return np.where(i >= lut_len - 2, x, (yy + lut[i]).astype(np.float16))


every = np.arange(0x10000, dtype=np.uint32).astype(np.uint16).view(np.float16)
x = every[np.isfinite(every)]                      # all 63488 finite float16 values
out = np.zeros_like(x)
target = nk.target("torq")
runs = silu_fp16_on_cores(x, out, target)

# numpy's reading of the instruction: clamp below, scale by 2**4, linear_approx, float16.
lut, p = silu_table()
u = np.ldexp(np.maximum(x.astype(np.float32), np.float32(p["clamp"][0])), p["scale_exp"])
want = linear_approx(lut, u.astype(np.float32), p["step_bits"], p["bias"],
                     extended=True).astype(np.float16)
exact = bool(np.array_equal(out, want))

xf = x.astype(np.float64)
with np.errstate(over="ignore"):
    silu = xf / (1 + np.exp(-xf))
err = np.abs(out.astype(np.float64) - silu)
compass_err = np.abs(compass_silu(x).astype(np.float64) - silu)
# Bound (tests/test_lut_kernels.py derives it): half a float16 ulp below 16 (2**-8), plus
# chord error h**2/8 max|silu''| with h = 1/16, plus bfloat16 slope rounding
# 2**-8 h max|silu'|, plus float32 roundings (< 2e-6).
bound = 2.0**-8 + (1 / 16) ** 2 / 8 * 0.5 + 2.0**-8 / 16 * 1.0999 + 2e-6

print(f"silu_fp16 on {target.name}: {x.size} float16 inputs over {len(runs)} cores")
for core, (lo, hi), _prog, res in runs:
    print(f"  core {core}: elements {lo}..{hi - 1}, cycles {res.cycles}")
cycles = max(res.cycles for *_, res in runs)
print(f"cycles {cycles} (cores in parallel), {x.size / cycles:.2f} elements/cycle")
print(f"table: {lut.size} entries, {runs[0][3].report.peak['LUT']} B of "
      f"{target.lut.memory} as a {target.lut.banks}-bank image")
print(f"max abs error vs float64 SiLU: {err.max():.6f} at x = {xf[err.argmax()]:g} "
      f"(bound {bound:.6f}; the Compass DSL tutorial's float16 arithmetic: "
      f"{compass_err.max():.6f})")
print(f"bit-exact with the instruction's numpy reading (match numpy: {exact})")
assert exact and err.max() <= bound
