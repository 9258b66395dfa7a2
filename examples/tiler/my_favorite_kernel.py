"""The GAP AutoTiler's "MyFavoriteKernel": a 4-D user kernel (4 input planes, 4 output planes, order
2) adding two 75 x 75 int32 inputs plus a per-output-plane bias into each output plane,
summed over the input planes:

    Out[op] = sum over ip of (In1[ip] + In2[ip] + Bias[op])

The documentation's MatrixAdd assigns; to make the sum over input planes it describes,
this port's MatrixAdd accumulates and a KerSetZero call at LOC_IN_PLANE_PROLOG clears each
output tile before the input planes are traversed (as the CNN example does with its bias).

Run: python examples/tiler/my_favorite_kernel.py
"""

import numpy as np

from npukit.tiler import *

KERNELS_C = """
typedef struct {
    int * __restrict__ In1;
    int * __restrict__ In2;
    int * __restrict__ Out;
    int Bias;
    unsigned int W;
    unsigned int H;
} MatrixAdd_Arg_T;

void MatrixAdd(MatrixAdd_Arg_T *Arg)
{
    unsigned int CoreId = gap_coreid(), Cores = gap_ncore();
    unsigned int Size = Arg->W * Arg->H, Chunk = (Size + Cores - 1) / Cores;
    unsigned int First = CoreId * Chunk, Last = First + Chunk < Size ? First + Chunk : Size;
    for (unsigned int i = First; i < Last; i++)
        Arg->Out[i] += Arg->In1[i] + Arg->In2[i] + Arg->Bias;
    gap_waitbarrier(0);
}

void KerSetZero(int * __restrict__ Out, unsigned int W, unsigned int H)
{
    for (unsigned int i = 0; i < W * H; i++) Out[i] = 0;
}
"""


def matrix_add(In1, In2, Out, Bias, W, H, *, core_id, core_count):
    size = W * H
    chunk = -(-size // core_count)
    a, b = core_id * chunk, min(core_id * chunk + chunk, size)
    Out[a:b] += In1[a:b] + In2[a:b] + np.int32(Bias)


def ker_set_zero(Out, W, H):
    Out[: W * H] = 0


def model(l1_budget=51200, planes=4, size=75):
    m = Model(target="gap8", l1_budget=l1_budget)
    m.LibKernel("MatrixAdd", CALL_PARALLEL,
        CArgs(6,
            TCArg("Word32 * __restrict__", "In1"),
            TCArg("Word32 * __restrict__", "In2"),
            TCArg("Word32 * __restrict__", "Out"),
            TCArg("Word32", "Bias"),
            TCArg("Wordu32", "W"),
            TCArg("Wordu32", "H"),
        ),
        "MatrixAdd_Arg_T", c_source=KERNELS_C, reference=matrix_add,
        cost=lambda W, H, **_: 3 * W * H)
    m.LibKernel("KerSetZero", CALL_SEQUENTIAL,
        CArgs(3, TCArg("Word32 * __restrict__", "Out"), TCArg("Wordu32", "W"),
              TCArg("Wordu32", "H")),
        "", reference=ker_set_zero, cost=lambda W, H: W * H)
    m.UserKernel("MyFavoriteKernel",
        KernelDimensions(planes, 32, 28, planes),
        KernelIterationOrder(KER_DIM4, KER_OUT_PLANE, KER_TILE, KER_IN_PLANE),
        TILE_HOR,
        CArgs(4,
            TCArg("Word32 * __restrict__", "In1"),
            TCArg("Word32 * __restrict__", "In2"),
            TCArg("Word32 * __restrict__", "Out"),
            TCArg("Word32 * __restrict__", "Bias", shape=(planes,)),
        ),
        Calls(2,
            Call("KerSetZero", LOC_IN_PLANE_PROLOG,
                Bindings(3, K_Arg("KerOut", KER_ARG_TILE), K_Arg("KerOut", KER_ARG_TILE_W),
                         K_Arg("KerOut", KER_ARG_TILE_H))),
            Call("MatrixAdd", LOC_INNER_LOOP,
                Bindings(6,
                    K_Arg("KerIn1", KER_ARG_TILE),        # A tile
                    K_Arg("KerIn2", KER_ARG_TILE),        # A tile
                    K_Arg("KerOut", KER_ARG_TILE),        # A tile
                    C_ArgIndex("Bias", KER_OUT_PLANE, 1),  # Bias[CurrentOutputPlane*1]
                    K_Arg("KerIn1", KER_ARG_TILE_W),      # Tile width
                    K_Arg("KerIn1", KER_ARG_TILE_H),      # Tile height
                )),
        ),
        KerArgs(3,
            KerArg("KerIn1", OBJ_IN_DB_3D, size, size, 4, 0, 0, 0, "In1", 0),
            KerArg("KerIn2", OBJ_IN_DB_3D, size, size, 4, 0, 0, 0, "In2", 0),
            KerArg("KerOut", OBJ_OUT_DB_3D, size, size, 4, 0, 0, 0, "Out", 0),
        ),
    )
    return m


def reference(in1, in2, bias):
    nip = in1.shape[0]
    return (in1.sum(0) + in2.sum(0))[None] + nip * bias[:, None, None]


if __name__ == "__main__":
    m = model()
    print(m.tiling("MyFavoriteKernel"))
    prog = m.program("MyFavoriteKernel")
    rng = np.random.default_rng(2)
    in1 = rng.integers(-10**6, 10**6, (4, 75, 75), dtype=np.int32)
    in2 = rng.integers(-10**6, 10**6, (4, 75, 75), dtype=np.int32)
    bias = np.array([5, -7, 11, 100], np.int32)
    out = np.zeros((4, 75, 75), np.int32)
    res = prog.run(In1=in1, In2=in2, Out=out, Bias=bias)
    ok = bool((out == reference(in1, in2, bias)).all())
    print("matches numpy:", ok)
    print(res.report)
    assert ok
