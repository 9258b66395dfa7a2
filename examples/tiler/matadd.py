"""The GAP AutoTiler's "Illustrative example 1 - Matrix addition", ported line by line.

MatAdd(In1, In2, Out) adds two 200 x 300 int32 matrices that live in L2; the AutoTiler
cuts them in tiles that fit a 51200-byte L1 budget and double-buffers every argument.

Run: python examples/tiler/matadd.py
"""

import numpy as np

from npukit.tiler import *

MAT_SUM_PAR_C = """
typedef struct {
    int * __restrict__ In1;
    int * __restrict__ In2;
    int * __restrict__ Out;
    unsigned int W;
    unsigned int H;
} MatrixAdd_Arg_T;

void MatSumPar(MatrixAdd_Arg_T *Arg)
{
    unsigned int CoreId = gap_coreid(), Cores = gap_ncore();
    unsigned int Size = Arg->W * Arg->H;
    unsigned int Chunk = (Size + Cores - 1) / Cores;   /* ChunkSize(W*H) */
    unsigned int First = CoreId * Chunk;
    unsigned int Last = First + Chunk < Size ? First + Chunk : Size;
    for (unsigned int i = First; i < Last; i++)
        Arg->Out[i] = Arg->In1[i] + Arg->In2[i];
    gap_waitbarrier(0);
}
"""


def mat_sum_par(In1, In2, Out, W, H, *, core_id, core_count):
    """The numpy reference of MatSumPar: this core's chunk of the W*H elements."""
    size = W * H
    chunk = -(-size // core_count)
    first, last = core_id * chunk, min(core_id * chunk + chunk, size)
    Out[first:last] = In1[first:last] + In2[first:last]


def mat_add_generator(m, UserKernelName, W, H):
    m.UserKernel(UserKernelName,
        KernelDimensions(1, W, H, 1),
        KernelIterationOrder(KER_DIM2, KER_TILE),
        TILE_HOR,
        CArgs(3,
            TCArg("Word32 * __restrict__", "In1"),
            TCArg("Word32 * __restrict__", "In2"),
            TCArg("Word32 * __restrict__", "Out"),
        ),
        Calls(1,
            Call("MatSumPar", LOC_INNER_LOOP,
                Bindings(5,
                    K_Arg("In1", KER_ARG_TILE), K_Arg("In2", KER_ARG_TILE),
                    K_Arg("Out", KER_ARG_TILE),
                    K_Arg("In1", KER_ARG_TILE_W), K_Arg("In1", KER_ARG_TILE_H))),
        ),
        KerArgs(3,
            KerArg("In1", OBJ_IN_DB, W, H, 4, 0, 0, 0, "In1", 0),
            KerArg("In2", OBJ_IN_DB, W, H, 4, 0, 0, 0, "In2", 0),
            KerArg("Out", OBJ_OUT_DB, W, H, 4, 0, 0, 0, "Out", 0),
        ),
    )


def model(l1_budget=51200, W=200, H=300):
    m = Model(target="gap8", l1_budget=l1_budget)
    m.LibKernel("MatSumPar", CALL_PARALLEL,
        CArgs(5,
            TCArg("Word32 * __restrict__", "In1"),
            TCArg("Word32 * __restrict__", "In2"),
            TCArg("Word32 * __restrict__", "Out"),
            TCArg("unsigned int", "W"),
            TCArg("unsigned int", "H"),
        ),
        "MatrixAdd_Arg_T", c_source=MAT_SUM_PAR_C, reference=mat_sum_par,
        cost=lambda W, H: 2 * W * H)  # about two cycles per element on one core
    mat_add_generator(m, "MatAdd", W, H)
    return m


if __name__ == "__main__":
    m = model()
    print(m.tiling("MatAdd"))
    prog = m.program("MatAdd")
    rng = np.random.default_rng(0)
    a = rng.integers(-2**30, 2**30, (300, 200), dtype=np.int32)
    b = rng.integers(-2**30, 2**30, (300, 200), dtype=np.int32)
    out = np.zeros((300, 200), np.int32)
    res = prog.run(In1=a, In2=b, Out=out)
    ok = bool((out == a + b).all())
    print("matches numpy:", ok)
    print(res.report)
    assert ok
