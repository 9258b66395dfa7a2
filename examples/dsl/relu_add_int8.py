"""A kernel written as public Compass DSL programs are written (``BuildManager``,
``script as S``, ``tec_range``, ``alloc_buffer``, masked ``vload``/``vstore``): the int8
residual add with ReLU of a quantized network, ``out = max(sat(a + b), 0)``, for any
length ``n`` given at run time.

Each of the four TECs takes a quarter of the values; its lsram holds two chunks of
``CHUNK`` values; the last vector of a chunk is masked with ``S.tail_mask``, so no lane
reads or writes past ``n``.
"""

from npukit.dsl import BuildManager, hw_native_vdtype
from npukit.dsl import script as S

DTYPE = "int8"
VDTYPE = hw_native_vdtype(DTYPE)  # int8x32: one 256-bit register
CHUNK = 4096  # values per DMA round: two chunks in each TEC's 32 KiB lsram


@S.prim_func
def relu_add_int8(a: S.ptr(DTYPE, "global"), b: S.ptr(DTYPE, "global"),
                  out: S.ptr(DTYPE, "global"), n: S.i32):
    lsram = S.alloc_buffer([2 * CHUNK], DTYPE, scope="lsram")
    la = lsram.addr_of(0)
    lb = lsram.addr_of(CHUNK)
    per_tec = S.ceildiv(n, 4)
    for ti in S.tec_range(4):
        mine = S.clip(n - ti * per_tec, min_val=0, max_val=per_tec)
        for k in range(S.ceildiv(mine, CHUNK)):
            count = S.min(CHUNK, mine - k * CHUNK)
            start = ti * per_tec + k * CHUNK
            S.dma_copy(la, a + start, count)
            S.dma_copy(lb, b + start, count)
            for v in range(S.ceildiv(count, VDTYPE.lanes)):
                mask = S.tail_mask(count - v * VDTYPE.lanes, VDTYPE.lanes)
                x = S.vload(la + v * VDTYPE.lanes, mask=mask)
                y = S.vload(lb + v * VDTYPE.lanes, mask=mask)
                s = S.vadd(x, y, saturate=True)
                S.vstore(S.max(s, S.i8x32(0)), la + v * VDTYPE.lanes, mask=mask)
            S.dma_copy(out + start, la, count)


if __name__ == "__main__":
    import numpy as np

    from npukit.dsl.testing import rand

    n = 10_001
    a, b = rand(n, DTYPE), rand(n, DTYPE)
    want = np.maximum(np.clip(a.astype(np.int16) + b, -128, 127), 0).astype(np.int8)
    sim, c = np.full(n, 99, np.int8), np.full(n, 99, np.int8)
    relu_add_int8(a, b, sim, n)  # the simulator ("PySim")
    BuildManager(target="X2_1204").build(relu_add_int8)(a, b, c, n)  # the generated C
    assert (sim == want).all() and (c == sim).all()
    print(f"relu_add_int8 on {n} values: simulator == numpy, C == simulator")
