"""GELU on float16, written in the Compass DSL: a second kernel beside the tutorial's SiLU,
to show the vocabulary is general.

gelu(x) = x * Phi(x), with Phi the standard normal CDF read from a 257-entry float32 table
over [-4, 4] (computed on the host at build time) and interpolated linearly in float32.
Above 4 the result is x, below -4 it is 0 (|x * Phi(x)| < 1.3e-4 there).

Unlike the tutorial's kernel, each TEC double-buffers its local SRAM: two halves, each
loaded by DMA while the other is computed (software pipelining: the cycle model shows the
DMA hidden behind compute, against the same kernel built without it), and the work on one
half is a device subroutine taking pointers and a run-time count.

Run: python examples/dsl/gelu_fp16.py
"""

import math

import numpy as np

import npukit.dsl as S

TABLE_EDGE = 4          # the table covers [-4, 4]
STEPS = 32              # entries per unit: 8 * 32 + 1 = 257 entries
CHUNK = 8192            # float16 elements per lsram half: two halves fill its 32 KiB


def phi_table() -> np.ndarray:
    """Phi(x) at x = -4 + k / 32, k = 0..256, in float32 (host code, run at build time)."""
    xs = np.arange(2 * TABLE_EDGE * STEPS + 1) / STEPS - TABLE_EDGE
    return np.array([0.5 * (1 + math.erf(x / math.sqrt(2))) for x in xs], np.float32)


@S.prim_func
def gelu16(x: S.fp16x16, phi: S.ptr("fp32", "constant")) -> S.fp16x16:
    xf = S.cast(x, "fp32")
    pos = (S.clip(xf, min_val=-4.0, max_val=4.0) + 4.0) * 32.0   # table position, 0..256
    cell = S.min(S.vrint(pos - 0.5), 255.0)                      # its cell, 0..255
    i = S.cast(cell, "u16")
    lo = S.vload_gather(phi, i)
    hi = S.vload_gather(phi, i + 1)
    cdf = lo + (hi - lo) * (pos - cell)
    inside = S.vnot(S.vor(x >= 4, x <= -4))
    y = S.vmul(xf, cdf, mask=inside, r=0.0)                      # 0 outside the table
    return S.vsel(x, S.cast(y, "fp16"), x >= 4)                  # x above it


@S.prim_func
def gelu_chunk(
    buf: S.ptr("fp16x16", "lsram"),
    dst: S.ptr("fp16", "global"),
    count: S.i32,
    phi: S.ptr("fp32", "constant"),
):
    for v in range(S.ceildiv(count, 16)):
        buf[v] = gelu16(buf[v], phi)
    S.dma_copy(dst, buf.as_ptr("fp16"), count)


def gelu_kernel(prefetch: bool = True) -> S.PrimFunc:
    """The kernel. With ``prefetch`` each half loads while the other computes; without it
    (for comparison) a half loads just before it is computed. The choice is plain Python
    around the kernel: it is made at build time."""

    @S.prim_func
    def gelu_fp16(inp: S.ptr("fp16", "global"), out: S.ptr("fp16", "global"), n: S.i32):
        phi = S.alloc_const((2 * TABLE_EDGE * STEPS + 1,), "fp32", phi_table())
        half_a = S.alloc(CHUNK // 16, "fp16x16", scope="lsram")
        half_b = S.alloc(CHUNK // 16, "fp16x16", scope="lsram")
        tid = S.get_local_id()
        per_tec = S.ceildiv(n, S.get_local_size())
        mine = S.clip(n - tid * per_tec, min_val=0, max_val=per_tec)
        src, dst = inp + tid * per_tec, out + tid * per_tec
        if prefetch:
            S.dma_copy(half_a.as_ptr("fp16"), src, S.min(mine, CHUNK))
        for pair in range(S.ceildiv(S.ceildiv(mine, CHUNK), 2)):
            even = 2 * pair * CHUNK
            odd = even + CHUNK
            if prefetch:  # the odd half loads while the even one computes
                S.dma_copy(half_b.as_ptr("fp16"), src + odd, S.clip(mine - odd, 0, CHUNK))
            else:
                S.dma_copy(half_a.as_ptr("fp16"), src + even, S.clip(mine - even, 0, CHUNK))
            gelu_chunk(half_a, dst + even, S.clip(mine - even, 0, CHUNK), phi)
            if prefetch:  # the next even half loads while the odd one computes
                S.dma_copy(half_a.as_ptr("fp16"), src + odd + CHUNK,
                           S.clip(mine - odd - CHUNK, 0, CHUNK))
            else:
                S.dma_copy(half_b.as_ptr("fp16"), src + odd, S.clip(mine - odd, 0, CHUNK))
            gelu_chunk(half_b, dst + odd, S.clip(mine - odd, 0, CHUNK), phi)

    return gelu_fp16


gelu_fp16 = gelu_kernel()


def main() -> None:
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    finite = every[np.isfinite(every)]
    n = finite.size
    prog = S.build(gelu_fp16, target="compass", n=n)
    outs = {}
    for backend in ("sim", "c"):
        out = np.full(n, np.nan, np.float16)
        outs[backend] = (out, prog.run(backend, inp=finite, out=out))
    sim, res = outs["sim"]
    xf = finite.astype(np.float64)
    gelu = xf * 0.5 * (1 + np.vectorize(math.erf)(xf / math.sqrt(2)))
    err = np.abs(sim.astype(np.float64) - gelu)
    rel = err / np.maximum(np.abs(gelu), 1)
    serial = S.build(gelu_kernel(prefetch=False), target="compass", n=n)
    alone = serial.run("sim", inp=finite, out=np.zeros(n, np.float16))
    saved, dma = alone.cycles - res.cycles, res.report.busy["dma"]
    print(f"gelu_fp16 on {prog.target.name}: n = {n}, every finite float16 value")
    print(f"  cycles {res.cycles} (per TEC {', '.join(map(str, res.report.core_cycles))}); "
          f"without double buffering {alone.cycles}: {saved} of a TEC's {dma} DMA cycles "
          f"hidden behind compute")
    print(f"  C == sim: {outs['c'][0].tobytes() == sim.tobytes()}; max error vs float64 GELU "
          f"{rel.max():.5f} (absolute below 1, relative above)")
    assert outs["c"][0].tobytes() == sim.tobytes() and rel.max() < 2e-3
    assert saved > dma // 3  # the middle transfers: all but the first load and last store


if __name__ == "__main__":
    main()
