"""The Compass DSL tutorial's LUT operator, as written there: float16 SiLU by a 512-entry
constant table over [-10, 10] with interpolation, the work split over the TECs, each TEC
streaming its share through its local SRAM by DMA.

The code between the markers is the tutorial's, unchanged except its import (the
tutorial's `from tvm.aipu import script as S`). The main part builds it with npukit, runs it
on the simulator and the C back end, and checks both against a plain numpy reading of the
tutorial's formulas, bit for bit, on every finite float16 input.

Run: python examples/dsl/silu_fp16.py
"""
# ruff: noqa: E501 - the tutorial's lines are quoted as written, long ones included

import numpy as np

import npukit.dsl as S

# ---- the Compass DSL tutorial's code --------------------------------------------------

dtype = "float16"
vdtype = "float16x16"
lut_len = 512
lut_edge = 10

FP16_ELEMS_ON_LSRAM = 32 * 1024 // 2
FP16x16_ELEMS_ON_LSRAM = FP16_ELEMS_ON_LSRAM // 16


def gen_silu_lut(lut_len, lut_edge, dtype):
    # Key points of FP16 LUT generation:
    # 1. lut_x[-lut_edge, lut_edge]
    # 2. dytpe = "float16"
    # 3. pad the lut_table with the last element (lut_edge)
    x = np.linspace(-lut_edge, lut_edge, lut_len - 1)
    n = lut_len - 1
    lut = np.zeros((n,), dtype=dtype)
    for i in range(n):
        lut[i] = x[i] / (1 + np.exp(-x[i]))
    lut.resize(lut_len)
    lut[-1] = lut_edge
    return lut


@S.prim_func
def compute(
    x: S.fp16x16,
    lut: S.ptr(dtype, "constant"),
    lut_inverse_delta: S.fp32,
    lut_len: S.i32,
    lut_edge: S.i32,
) -> S.fp16x16:
    # Original formula: silu(x) = x / (1 + e^(-x))
    # Here use lookup table implement with interpolation instead
    x_clipped = S.clip(x, min_val=S.fp16(-lut_edge), max_val=S.fp16(lut_edge))
    x_fp32 = S.cast(x_clipped, "fp32")
    x_idx = (x_fp32 + lut_edge) * lut_inverse_delta
    x_idxr = S.vrint(x_idx - 0.5)
    x_idx_u16 = S.cast(x_idxr, "u16")
    mask_idx_ge_lutlen_m2 = x_idx_u16 >= S.u16x16(lut_len - 2)

    y = S.vsel(x, 0, mask_idx_ge_lutlen_m2)
    lut_x_idx = S.vload_gather(lut, x_idx_u16)
    lut_x_idx_plus1 = S.vload_gather(lut, x_idx_u16 + 1)
    x_idx_diff = x_idx - x_idxr
    lut_diff = S.cast(lut_x_idx_plus1 - lut_x_idx, "fp32")
    yy = S.cast(lut_diff * x_idx_diff, dtype)
    mask_xor = S.vxor(x_idx_u16 >= 0, mask_idx_ge_lutlen_m2)
    return S.vadd(yy, lut_x_idx, mask=mask_xor, r=y)


@S.prim_func
def silu_fp16(
    in0: S.ptr(dtype, "global"),
    out0: S.ptr(dtype, "global"),
    n: S.i32,
):
    lut = S.alloc_const((lut_len,), dtype, gen_silu_lut(lut_len, lut_edge, dtype))
    lut_inverse_delta = S.fp32(lut_len - 2) / (2 * lut_edge)

    lsram_ptr = S.alloc(FP16x16_ELEMS_ON_LSRAM, vdtype, scope="lsram")
    tec_cnt = S.get_local_size()
    tid = S.get_local_id()

    elems_per_tec = S.ceildiv(n, tec_cnt)
    elems_cur_tec = S.clip(n - tid * elems_per_tec, min_val=0, max_val=elems_per_tec)

    offset_cur_tec = tid * elems_per_tec
    for lsram_idx in range(S.ceildiv(elems_cur_tec, FP16_ELEMS_ON_LSRAM)):
        elems_cur_lsram = S.min(FP16_ELEMS_ON_LSRAM, elems_cur_tec - lsram_idx * FP16_ELEMS_ON_LSRAM)
        offset_cur_lsram = offset_cur_tec + lsram_idx * FP16_ELEMS_ON_LSRAM

        S.dma_copy(lsram_ptr.as_ptr(dtype), in0 + offset_cur_lsram, elems_cur_lsram)
        for vec_idx in range(S.ceildiv(elems_cur_lsram, vdtype.lanes)):
            lsram_ptr[vec_idx] = compute(lsram_ptr[vec_idx], lut, lut_inverse_delta, lut_len, lut_edge)
        S.dma_copy(out0 + offset_cur_lsram, lsram_ptr.as_ptr(dtype), elems_cur_lsram)

# ---- end of the tutorial's code -------------------------------------------------------


def tutorial_silu(x: np.ndarray) -> np.ndarray:
    """The tutorial's formulas in plain numpy, step by step in its order and types: float16
    operations round to float16, the index and interpolation weight are float32."""
    lut = gen_silu_lut(lut_len, lut_edge, dtype)
    delta = np.float32(lut_len - 2) / np.float32(2 * lut_edge)
    x_clipped = np.minimum(np.maximum(x, np.float16(-lut_edge)), np.float16(lut_edge))
    x_idx = (x_clipped.astype(np.float32) + np.float32(lut_edge)) * delta
    x_idxr = np.rint(x_idx - np.float32(0.5))
    i = x_idxr.astype(np.uint16)  # integral and in [0, 510] here: every reading agrees
    ge = i >= lut_len - 2
    y = np.where(ge, x, np.float16(0))
    lut_diff = (lut[i + 1] - lut[i]).astype(np.float32)
    yy = (lut_diff * (x_idx - x_idxr)).astype(np.float16)
    return np.where(~ge, yy + lut[i], y)


def main() -> None:
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    finite = every[np.isfinite(every)]  # all 63488 finite float16 values
    n = finite.size
    prog = S.build(silu_fp16, target="compass", n=n)
    want = tutorial_silu(finite)
    outs = {}
    for backend in ("sim", "c"):
        out = np.full(n, np.nan, np.float16)
        res = prog.run(backend, in0=finite, out0=out)
        outs[backend] = (out, res)
    sim, res = outs["sim"]
    xf = finite.astype(np.float64)
    with np.errstate(over="ignore"):
        err = np.abs(sim.astype(np.float64) - xf / (1 + np.exp(-xf)))
    small = np.abs(xf) <= 10
    print(f"silu_fp16 (the Compass DSL tutorial) on {prog.target.name}: n = {n}, every finite "
          f"float16 value")
    print(f"  cycles {res.cycles}; per TEC {', '.join(map(str, res.report.core_cycles))}")
    print(f"  sim == numpy reading of the tutorial: {sim.tobytes() == want.tobytes()}; "
          f"C == sim: {outs['c'][0].tobytes() == sim.tobytes()}")
    print(f"  max abs error vs float64 SiLU on [-10, 10]: {err[small].max():.5f}")
    assert sim.tobytes() == want.tobytes() and outs["c"][0].tobytes() == sim.tobytes()
    assert err[small].max() < 0.02


if __name__ == "__main__":
    main()
