"""The GAP AutoTiler's "Illustrative example 2 - Searching the maximum in a 2D matrix": a parallel
map (the max of each tile into a dyn-tile buffer) and a sequential reduction in the
inner-loop epilog.

Run: python examples/tiler/matmax.py
"""

import numpy as np

from npukit.tiler import *

KERNELS_C = """
typedef struct {
    int * __restrict__ In;
    int * __restrict__ Out;
    unsigned int W;
    unsigned int H;
    unsigned int TileIndex;
    unsigned int CompareWithOut;
} MatrixMax_Arg_T;

void KerMatrixMax(MatrixMax_Arg_T *Arg)
{
    /* Each core scans a chunk of the tile's rows; the last core combines after the
       barrier (on the host, cores run one after the other, in order). */
    static int Partial[8];
    unsigned int CoreId = gap_coreid(), Cores = gap_ncore();
    unsigned int Chunk = (Arg->H + Cores - 1) / Cores;
    unsigned int First = CoreId * Chunk;
    unsigned int Last = First + Chunk < Arg->H ? First + Chunk : Arg->H;
    int M = -2147483647 - 1;
    for (unsigned int i = First * Arg->W; i < Last * Arg->W; i++)
        if (Arg->In[i] > M) M = Arg->In[i];
    Partial[CoreId] = M;
    gap_waitbarrier(0);
    if (CoreId == Cores - 1) {
        for (unsigned int c = 0; c < Cores; c++)
            if (Partial[c] > M) M = Partial[c];
        if (Arg->CompareWithOut && Arg->Out[0] > M) M = Arg->Out[0];
        Arg->Out[0] = M;
    }
}

void KerMatrixMaxReduction(int * __restrict__ In, int * __restrict__ Out, unsigned int Ntile)
{
    int M = In[0];
    for (unsigned int i = 1; i < Ntile; i++)
        if (In[i] > M) M = In[i];
    *Out = M;
}
"""


def ker_matrix_max(In, Out, W, H, TileIndex, CompareWithOut, *, core_id, core_count):
    """Reference: the cores' chunks combined; the last core's call writes the result, as
    the last core does after the barrier in C."""
    if core_id != core_count - 1:
        return
    m = In[: W * H].max()
    if CompareWithOut:
        m = max(m, Out[0])
    Out[0] = m


def ker_matrix_max_reduction(In, Out, Ntile):
    Out[0] = In[:Ntile].max()


def matrix_max(m, Name, W, H):
    m.UserKernel(Name,
        KernelDimensions(1, W, H, 1),
        KernelIterationOrder(KER_DIM2, KER_TILE),
        TILE_HOR,
        CArgs(2,
            TCArg("int * __restrict__", "In"),
            TCArg("int * __restrict__", "Out", shape=(1,)),
        ),
        Calls(2,
            Call("KerMatrixMax", LOC_INNER_LOOP,
                Bindings(6,
                    K_Arg("In", KER_ARG_TILE), K_Arg("TiledOut", KER_ARG_TILE),
                    K_Arg("In", KER_ARG_TILE_W), K_Arg("In", KER_ARG_TILE_H),
                    K_Arg("In", KER_ARG_TILEINDEX), Imm(0))),
            Call("KerMatrixMaxReduction", LOC_INNER_LOOP_EPILOG,
                Bindings(3,
                    K_Arg("TiledOut", KER_ARG), C_Arg("Out"),
                    K_Arg("TiledOut", KER_ARG_NTILES))),
        ),
        KerArgs(2,
            KerArg("In", OBJ_IN_DB, W, H, 4, 0, 0, 0, "In", 0),
            KerArg("TiledOut", OBJ_BUFFER_DYN, 1, H, 4, 0, 0, 0, 0, 0),
        ),
    )


def model(l1_budget=51200, W=200, H=300):
    m = Model(target="gap8", l1_budget=l1_budget)
    m.LibKernel("KerMatrixMax", CALL_PARALLEL,
        CArgs(6,
            TCArg("Word32 * __restrict__", "In"),
            TCArg("Word32 * __restrict__", "Out"),
            TCArg("unsigned int", "W"),
            TCArg("unsigned int", "H"),
            TCArg("unsigned int", "TileIndex"),
            TCArg("unsigned int", "CompareWithOut"),
        ),
        "MatrixMax_Arg_T", c_source=KERNELS_C, reference=ker_matrix_max,
        cost=lambda W, H, TileIndex, CompareWithOut: W * H)
    m.LibKernel("KerMatrixMaxReduction", CALL_SEQUENTIAL,
        CArgs(3,
            TCArg("Word32 * __restrict__", "In"),
            TCArg("Word32 * __restrict__", "Out"),
            TCArg("unsigned int", "Ntile"),
        ),
        "MatrixMaxReduction_Arg_T", reference=ker_matrix_max_reduction,
        cost=lambda Ntile: 2 * Ntile)
    matrix_max(m, "MatMax", W, H)
    return m


if __name__ == "__main__":
    m = model()
    print(m.tiling("MatMax"))
    prog = m.program("MatMax")
    x = np.random.default_rng(1).integers(-2**31, 2**31 - 1, (300, 200), dtype=np.int32)
    out = np.zeros(1, np.int32)
    res = prog.run(In=x, Out=out)
    ok = bool(out[0] == x.max())
    print("max", out[0], "matches numpy:", ok)
    print(res.report)
    assert ok
