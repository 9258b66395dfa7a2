"""mlir-aie's LUT-based bfloat16 exp (AIE2's ``getExpBf16``, ``aie_kernels/aie2/bf16_exp.cc``)
as EasyKernel programs: the input is made fixed point with 8 fractional bits
(``bfloat16_to_int(x, 8)``, AIE-ML's floor), its high byte (the integer part, two's
complement) indexes a 256-entry table of exp(i), its low byte (the fraction) a 256-entry
table of exp(f / 256), both the AIE API's ``parallel_lookup`` with ``lut_oor_policy::
truncate`` (step_bits 8 and 0) on the 16 bits as uint16, and the two bfloat16 values are
multiplied into a float accumulator rounded to bfloat16.

An EasyKernel kernel has one ALU and one Act instruction, so the four steps are four
kernels joined by ``nk.sequence``: to fixed point (``s.act.to_fixed``), the two lookups,
the product. The tables are written here from their rule, ``exp(min(i, 88))`` (exp(88)
is the largest bfloat16 power below overflow; mlir-aie repeats it above) and
``exp(f / 256)``, rounded to bfloat16; the first entries are checked against the values
mlir-aie publishes. mlir-aie keeps the low 16 bits of the fixed-point value, npukit's store
into int16 saturates: the two agree for |x| < 128, the kernel's domain.

Every finite bfloat16 input of the domain goes through the simulator and the generated C;
both must equal numpy's reading of the four instructions bit for bit, and meet mlir-aie's
published tolerance (its testbench: inputs ``random_bfloat16(-4, 1, 3)``, ``|out - ref| <=
max(1e-2 * max(|out|, |ref|), 1e-2)`` with ``ref = bfloat16(expf(x))``).

Run: python examples/aie/exp_bf16.py
"""

import ml_dtypes
import numpy as np

import npukit as nk
from npukit.easy import PData
from npukit.lut import Lut

BF16 = ml_dtypes.bfloat16


def _stream(s, input, output, act):
    """One input vector at a time through the ALU (``input`` passes) and ``act``."""
    x = input.vectorize(s.alu.i_width(input.dtype))
    for i in s.iterate(x.dims(0, -1)):
        p = s.alu.accumulate(s.iram.load(x[i]))
        for av in s.iterate(p.dim(PData.Vectors)):
            s.append(output, act(p[av]))


@nk.kernel
def to_q8(s, input, output):
    """q = floor(x * 2^8), int16."""
    _stream(s, input, output, lambda p: s.act.to_fixed(p, 8))


@nk.kernel
def lookup(s, input, output, *, lut, step_bits):
    """output = lut[(q >> step_bits) mod 256], as parallel_lookup<uint16, truncate>."""
    _stream(s, input, output, lambda p: s.act.lookup(p, lut, step_bits, oor="truncate"))


@nk.kernel
def product(s, a, b, output):
    """output = bfloat16(a * b), the float product rounded once."""
    x, y = (t.vectorize(s.alu.i_width(t.dtype, t.dtype)) for t in (a, b))
    for i in s.iterate(x.dims(0, -1)):
        p = s.alu.elementwise_product_accumulate(s.iram.load(x[i]), s.wram.load(y[i]))
        for av in s.iterate(p.dim(PData.Vectors)):
            s.append(output, s.act.load(p[av]))


k = np.arange(256)
EXP_INT = Lut(np.exp(np.minimum(np.where(k < 128, k, k - 256), 88.0)).astype(BF16))
EXP_FRAC = Lut(np.exp(k / 256.0).astype(BF16))

every = np.arange(0x10000, dtype=np.uint32).astype(np.uint16).view(BF16)
with np.errstate(invalid="ignore"):                     # NaN patterns among them
    xf_all = every.astype(np.float64)
x = every[np.isfinite(xf_all) & (np.abs(xf_all) < 128)]   # the kernel's domain
target = nk.target("torq")
spec, q_spec = nk.spec(x.shape, BF16), nk.spec(x.shape, np.int16)
exp_prog = nk.sequence(
    (nk.build(to_q8, target, input=spec, output=q_spec), {"output": "q"}),
    (nk.build(lookup, target, input=q_spec, output=spec, lut=EXP_INT, step_bits=8),
     {"input": "q", "output": "i_val"}),
    (nk.build(lookup, target, input=q_spec, output=spec, lut=EXP_FRAC, step_bits=0),
     {"input": "q", "output": "f_val"}),
    (nk.build(product, target, a=spec, b=spec, output=spec), {"a": "i_val", "b": "f_val"}),
    name="exp_bf16")


def run(backend: str) -> np.ndarray:
    scratch = {n: np.zeros(x.shape, d) for n, d in (("q", np.int16), ("i_val", BF16),
                                                    ("f_val", BF16))}
    out = np.full(x.shape, np.nan, BF16)
    res = exp_prog.run(backend, input=x, output=out, **scratch)
    return out, res


out_sim, res = run("sim")
out_c, _ = run("c")

# numpy's reading of the four instructions
q = np.floor(x.astype(np.float64) * 256).astype(np.int64)
want = (EXP_INT.offsets[(q >> 8) & 255].astype(np.float32)
        * EXP_FRAC.offsets[q & 255].astype(np.float32)).astype(BF16)
exact = out_sim.tobytes() == want.tobytes() and out_c.tobytes() == want.tobytes()

# mlir-aie's testbench inputs: exponents -4..1, 3 mantissa bits, both signs (every one)
e, m, sign = np.meshgrid(np.arange(-4, 2), np.arange(8), [1.0, -1.0])
tb = (sign * (1 + m / 8.0) * 2.0 ** e).reshape(-1)
pos = {float(v): i for i, v in enumerate(x.astype(np.float64))}
got = out_sim[[pos[v] for v in tb]].astype(np.float64)
ref = np.exp(tb.astype(np.float32)).astype(BF16).astype(np.float64)
tol = np.maximum(1e-2 * np.maximum(np.abs(got), np.abs(ref)), 1e-2)
published = bool(np.all(np.abs(got - ref) <= tol))

inside = np.abs(x.astype(np.float64)) <= 80     # exp's value, not just its bfloat16 range
xf = x.astype(np.float64)[inside]
rel = np.abs(out_sim[inside].astype(np.float64) - np.exp(xf)) / np.exp(xf)
# Three bfloat16 roundings (each table entry, the product), 2^-8 relative at most each, and
# the floor to 1/256 of x, exp(1/256) at most.
bound = (1 + 2.0**-8) ** 3 * np.exp(1 / 256) - 1

print(f"exp_bf16 on {target.name}: {x.size} bfloat16 inputs (|x| < 128), {res.cycles} cycles")
print(f"simulator and C bit-exact with the instructions' numpy reading: {exact}")
print(f"mlir-aie's testbench inputs ({tb.size}) within its tolerance (1e-2 rel/abs): "
      f"{published}, largest |out - ref| {np.abs(got - ref).max():.4f}")
print(f"|x| <= 80: relative error vs float64 exp at most {rel.max():.5f} (bound {bound:.5f})")
# the first entries as mlir-aie publishes them (exp_ilut_ab, exp_flut_ab: bfloat16 bits)
assert EXP_INT.offsets.view(np.uint16)[:8].tolist() == [16256, 16430, 16620, 16801, 16986,
                                                        17172, 17354, 17545]
assert EXP_INT.offsets.view(np.uint16)[[87, 88, 127, 164, 165, 166, 167, 255]].tolist() == \
    [32311, 32505, 32505, 1, 3, 9, 24, 16060]
assert EXP_FRAC.offsets.view(np.uint16)[:8].tolist() == [16256, 16257, 16257, 16258, 16258,
                                                         16259, 16259, 16260]
assert exact and published and rel.max() <= bound
