# ruff: noqa: F403, F405  (the AutoTiler's star-import vocabulary, as in test_tiler.py)
"""The C back end on AutoTiler programs: basic kernels (``Call`` of an ``Extern``) with their
C sources, quasi-affine slot indices, multi-buffered L1 (and L2) buffers, tile reads past
the last tile that move nothing.

Every seed-001 port runs on ``backend="c"`` and ``backend="sim"`` (the basic kernels' numpy
references) with the same integer results, each output a dense sub-view of a larger
canary-filled buffer, twice with different canaries and initial contents: nothing outside
the view changes, every element of a pure output is written. The 2-D FFT is float32 in C
and float64-accurate in numpy; both must be within ``FFT_TOLERANCE`` of numpy's ``fft2``,
relative to the largest magnitude.
"""

from __future__ import annotations

import dataclasses
import runpy
from pathlib import Path

import numpy as np
import pytest

import npukit as nk
from npukit import ir
from npukit.c import c_source
from npukit.tiler import *

EX = Path(__file__).parent.parent / "examples" / "tiler"
FFT_TOLERANCE = 1e-5  # max |C - numpy fft2| / max |fft2|; measured 1e-8 .. 1e-9


def example(name):
    return runpy.run_path(str(EX / f"{name}.py"))


def canary_array(shape, dtype, canary, pad=5):
    """A dense array of ``shape`` inside a buffer of ``canary`` values: (big, view)."""
    n = int(np.prod(shape))
    big = np.full(n + 2 * pad, canary, dtype)
    return big, big[pad:pad + n].reshape(shape)


def run_both(prog, inputs: dict, outputs: dict) -> dict:
    """Run ``prog`` on the simulator and in C with every output a canary-bordered sub-view,
    starting from ``outputs[name]`` (an inout's data) or from canary junk (pure outputs);
    check both back ends agree bit for bit and leave the borders alone. Returns the
    simulator's outputs."""
    roles = {b.name: b.role for b, _ in prog.params}
    got = {}
    for canary in (0x5A, -0x3B):
        for backend in ("sim", "c"):
            bigs, arrays = {}, dict(inputs)
            for name, init in outputs.items():
                big, view = canary_array(init.shape, init.dtype, canary)
                if roles[name] == "inout":
                    view[...] = init
                bigs[name], arrays[name] = big, view
            prog.run(backend, **arrays)
            for name, big in bigs.items():
                assert (big[:5] == canary).all() and (big[-5:] == canary).all(), \
                    f"{backend} wrote outside {name}"
            got[canary, backend] = {n: arrays[n] for n in outputs}
    for name in outputs:
        for canary in (0x5A, -0x3B):
            assert np.array_equal(got[canary, "c"][name], got[canary, "sim"][name]), \
                f"{prog.name}: C and simulator differ on {name}"
        assert np.array_equal(got[0x5A, "c"][name], got[-0x3B, "c"][name]), \
            f"{prog.name}: some element of {name} was not written"
    return got[0x5A, "sim"]


def ints(rng, shape, dtype, lo, hi):
    x = rng.integers(lo, hi, shape).astype(dtype)
    x.flat[0] = hi - 1  # never all zero
    return x


# -- the seed-001 ports ------------------------------------------------------------------


@pytest.mark.parametrize("W, H, budget", [(200, 300, 51200), (37, 23, 2000)])
def test_matadd(W, H, budget):
    ex = example("matadd")
    prog = ex["model"](budget, W, H).program("MatAdd")
    assert max(v.count for s, loops in prog.walk() for v in loops) > 1  # it tiles
    rng = np.random.default_rng(W)
    a, b = (ints(rng, (H, W), np.int32, -2**30, 2**30) for _ in range(2))
    out = run_both(prog, {"In1": a, "In2": b}, {"Out": np.zeros((H, W), np.int32)})
    assert (out["Out"] == a + b).all()


@pytest.mark.parametrize("W, H, budget", [(200, 300, 51200), (30, 47, 1500)])
def test_matmax(W, H, budget):
    prog = example("matmax")["model"](budget, W, H).program("MatMax")
    rng = np.random.default_rng(H)
    x = ints(rng, (H, W), np.int32, -2**31, 2**31 - 1)
    x[H - 1, W // 2] = 2**31 - 1  # the maximum in the last, partial tile
    out = run_both(prog, {"In": x}, {"Out": np.array([-5], np.int32)})
    assert out["Out"][0] == x.max()


@pytest.mark.parametrize("planes, size, budget", [(4, 75, 51200), (3, 19, 1200)])
def test_my_favorite_kernel(planes, size, budget):
    ex = example("my_favorite_kernel")
    prog = ex["model"](budget, planes, size).program("MyFavoriteKernel")
    rng = np.random.default_rng(size)
    in1, in2 = (ints(rng, (planes, size, size), np.int32, -10**6, 10**6) for _ in range(2))
    bias = np.arange(planes, dtype=np.int32) * 37 - 11
    out = run_both(prog, {"In1": in1, "In2": in2},
                   {"Out": np.zeros((planes, size, size), np.int32), "Bias": bias})
    assert (out["Out"] == ex["reference"](in1, in2, bias)).all()


@pytest.mark.parametrize("shape, budget", [((3, 2, 40, 40), 8000), ((2, 3, 21, 17), 2500)])
def test_cnn_conv5x5(shape, budget):
    ex = example("cnn_conv5x5")
    nip, nop, h, w = shape
    prog = ex["model"](budget, nip, nop, w, h).program("CnnConv5x5")
    rng = np.random.default_rng(h)
    x = ints(rng, (nip, h, w), np.int16, -2000, 2000)
    f = ints(rng, (nop, nip, 5, 5), np.int16, -300, 300)
    bias = (np.arange(nop, dtype=np.int16) * 700 - 500).astype(np.int16)
    out = run_both(prog, {"In": x, "Filter": f, "Norm": np.array(10, np.uint32)},
                   {"Out": np.zeros((nop, h - 4, w - 4), np.int16), "Bias": bias})
    assert (out["Out"] == ex["reference"](x, f, bias, 10)).all()
    assert len({np.int16(v) for v in out["Out"].flat}) > 100


def fft_program(dim, budget, radix2=False):
    ex = example("fft2d")
    m = Model(target="gap8", l1_budget=budget)
    ex["load_fft_library"](m)
    ex["FFT2D"](m, "FFT2D", dim, ForceRadix2=int(radix2))
    radix = 2 if radix2 or (dim.bit_length() - 1) % 2 else 4
    swap = np.argsort(ex["digit_reverse"](dim, radix)).astype(np.int16)
    twiddles = np.exp(-2j * np.pi * np.arange(dim) / dim).astype(np.complex64)
    return m, m.program("FFT2D"), twiddles, swap


# The vertical pass's InOut (OBJ_IN_OUT_DB) takes three L1 slots, as the AutoTiler's
# generated code gives in-out arguments (docs/tiler.md, "slots"): its budgets allow for it.
@pytest.mark.parametrize("dim, budget, radix2, tiles", [
    (16, 2304, False, (1, 1)),   # 8-line preferred tiles: 16 lines fit no smaller budget
    (16, 2304, True, (1, 1)),
    (32, 6200, False, (4, 4)),   # vertical: 3 slots of 32 x 8 complex = 6144 B
    (64, 12400, False, (8, 8)),  # vertical: 3 slots of 64 x 8 complex = 12288 B
    (64, 24600, True, (4, 4)),
])
def test_fft2d_within_tolerance_of_numpy(dim, budget, radix2, tiles):
    m, prog, twiddles, swap = fft_program(dim, budget, radix2)
    assert (m.tiling("FFT2DHorizontal").n_tiles, m.tiling("FFT2DVertical").n_tiles) == tiles
    img = np.random.default_rng(dim).integers(0, 256, (dim, dim), dtype=np.uint8)
    want = np.fft.fft2(img.astype(np.float64))
    for backend in ("sim", "c"):
        big, out = canary_array((dim, dim), np.complex64, 7 - 3j)
        prog.run(backend, In=img, Out=out, Twiddles=twiddles, SwapTable=swap)
        assert (big[:5] == 7 - 3j).all() and (big[-5:] == 7 - 3j).all()
        err = float(np.abs(out - want).max() / np.abs(want).max())
        assert err < FFT_TOLERANCE, (backend, err)


def test_fft_kernels_leave_digit_reversed_order():
    """Without the swap kernels the C FFT's rows hold numpy's FFT in digit-reversed order,
    as the references say (so the swap has real work)."""
    ex = example("fft2d")
    m = Model(target="gap8", l1_budget=51200)
    ex["load_fft_library"](m)
    for radix in (2, 4):
        m.UserKernel(f"Rows{radix}", KernelDimensions(1, 16, 16, 1),
                     KernelIterationOrder(KER_DIM2, KER_TILE), TILE_HOR,
                     CArgs(TCArg("float _Complex *", "X"),
                           TCArg("float _Complex *", "Twiddles", shape=(16,))),
                     Calls(Call(f"Radix{radix}FFT_DIF_2D_Horizontal", LOC_INNER_LOOP, Bindings(
                         K_Arg("X", KER_ARG_TILE), C_Arg("Twiddles"), K_Arg("X", KER_ARG_TILE_W),
                         K_Arg("X", KER_ARG_TILE_H)))),
                     KerArgs(KerArg("X", OBJ_IN_OUT_DB, 16, 16, 8, 0, 0, 0, "X")))
        x = np.random.default_rng(radix).normal(size=(16, 16)).astype(np.complex64)
        tw = np.exp(-2j * np.pi * np.arange(16) / 16).astype(np.complex64)
        out = x.copy()
        m.program(f"Rows{radix}").run("c", X=out, Twiddles=tw)
        want = np.fft.fft(x.astype(np.complex128), axis=1)[:, ex["digit_reverse"](16, radix)]
        assert np.abs(out - want).max() < 1e-5 * np.abs(want).max()


# -- the generated file reads like the AutoTiler's ---------------------------------------


def test_sections_in_order():
    prog = example("matadd")["model"]().program("MatAdd")
    src = c_source(prog)
    marks = ["/* ==== Read First Tile In1 ==== */", "/* ==== Read First Tile In2 ==== */",
             "/* ==== Loop Tile: 30 iterations ==== */", "/* ==== Read Next Tile In1 ==== */",
             "/* ==== Read Next Tile In2 ==== */",
             "/* ==== Call Kernel LOC_INNER_LOOP: MatSumPar ==== */",
             "/* ==== Write Tile Out ==== */"]
    at = [src.index(m) for m in marks]
    assert at == sorted(at)
    # The seed's struct call: invariants set once, the rest before each call.
    assert "MatrixAdd_Arg_T S_KerArg0, *KerArg0 = &S_KerArg0;" in src
    assert src.index("KerArg0->W = (unsigned int)200;") < at[0]
    assert "KerArg0->In1 = (Word32 *__restrict__)(L1_In1 + 2000 * (Tile % 2));" in src
    assert "MatSumPar(KerArg0);" in src and src.count("void MatSumPar(") == 1
    # Slotted L1 buffers say where the AutoTiler placed them.
    assert "int32_t L1_In2[4000] NPK_ALIGNED;  /* L1_Memory + 16000, 2 slots of 2000 */" in src
    # The read after the last tile moves nothing.
    assert "if (live > 0) {" in src


@pytest.mark.slow
def test_every_tiler_program_compiles_without_warnings(tmp_path):
    import subprocess

    progs = [example(n)["model"]().program(k) for n, k in [
        ("matadd", "MatAdd"), ("matmax", "MatMax"), ("my_favorite_kernel", "MyFavoriteKernel"),
        ("cnn_conv5x5", "CnnConv5x5")]]
    progs.append(fft_program(32, 6200)[1])
    for prog in progs:
        path = tmp_path / "unit.c"
        path.write_text(c_source(prog))
        res = subprocess.run(["cc", "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Wshadow",
                              "-Werror",
                              "-c", str(path), "-o", str(tmp_path / "unit.o")],
                             capture_output=True, text=True, check=False)
        assert res.returncode == 0, f"{prog.name}:\n{res.stderr}"


# -- what the other tiler tests exercise, in C --------------------------------------------

ADD_C = """
typedef struct { int *In1; int *In2; int *Out; unsigned int W; unsigned int H; } Add_T;
void Add(Add_T *Arg)
{
    unsigned int Size = Arg->W * Arg->H, Cores = gap_ncore();
    unsigned int Chunk = (Size + Cores - 1) / Cores, First = gap_coreid() * Chunk;
    for (unsigned int i = First; i < First + Chunk && i < Size; i++)
        Arg->Out[i] = Arg->In1[i] + Arg->In2[i];
}
"""


def add_model(budget, types, W, H, orientation=TILE_HOR, l2_budget=None):
    def ref(In1, In2, Out, W, H, *, core_id, core_count):
        n = W * H
        chunk = -(-n // core_count)
        a, b = core_id * chunk, min(n, core_id * chunk + chunk)
        Out[a:b] = In1[a:b] + In2[a:b]
    m = Model(l1_budget=budget, l2_budget=l2_budget)
    m.LibKernel("Add", CALL_PARALLEL,
                CArgs(TCArg("int *", "In1"), TCArg("int *", "In2"), TCArg("int *", "Out"),
                      TCArg("unsigned int", "W"), TCArg("unsigned int", "H")),
                "Add_T", c_source=ADD_C, reference=ref, cost=lambda W, H: W * H)
    m.UserKernel("K", KernelDimensions(1, W, H, 1), KernelIterationOrder(KER_DIM2, KER_TILE),
                 orientation,
                 CArgs(TCArg("int *", "A"), TCArg("int *", "B"), TCArg("int *", "C")),
                 Calls(Call("Add", LOC_INNER_LOOP, Bindings(
                     K_Arg("A", KER_ARG_TILE), K_Arg("B", KER_ARG_TILE), K_Arg("C", KER_ARG_TILE),
                     K_Arg("A", KER_ARG_TILE_W), K_Arg("A", KER_ARG_TILE_H)))),
                 KerArgs(*[KerArg(n, t, W, H, 4, 0, 0, 0, n) for n, t in zip("ABC", types)]))
    return m.program("K")


@pytest.mark.parametrize("case", ["l3_homes", "vertical", "single_buffered"])
def test_l2_staging_vertical_tiles_single_buffers(case):
    W, H = (16, 40) if case != "vertical" else (30, 24)
    prog = {
        "l3_homes": lambda: add_model(4000, (OBJ_IN_DB_L2DB, OBJ_IN_DB, OBJ_OUT_DB_L2DB), W, H,
                                      l2_budget=10_000),
        "vertical": lambda: add_model(3 * 2 * 24 * 4 * 5, (OBJ_IN_DB,) * 2 + (OBJ_OUT_DB,),
                                      W, H, TILE_VER),
        "single_buffered": lambda: add_model(1000, (OBJ_IN, OBJ_IN, OBJ_OUT), W, H),
    }[case]()
    if case == "l3_homes":
        assert {b.memory for b in prog.buffers} == {"L1", "L2"}
        assert "L2_A_L2" in c_source(prog)
    rng = np.random.default_rng(7)
    a, b = (ints(rng, (H, W), np.int32, -99, 99) for _ in range(2))
    out = run_both(prog, {"A": a, "B": b}, {"C": np.zeros((H, W), np.int32)})
    assert (out["C"] == a + b).all()


PROBE_C = """
void Probe(int *Tile, int *Plane, unsigned int W, unsigned int H, unsigned int W0,
           unsigned int H0, unsigned int N, unsigned int Index, unsigned int Offset,
           unsigned int Scale, unsigned int Sel, unsigned int Imm7, int *Log)
{
    int *L = Log + 12 * Index;
    L[0] = (int)W; L[1] = (int)H; L[2] = (int)W0; L[3] = (int)H0; L[4] = (int)N;
    L[5] = (int)Index; L[6] = (int)Offset; L[7] = (int)Scale; L[8] = (int)Sel;
    L[9] = (int)Imm7; L[10] = Tile[0]; L[11] = Plane[Offset * W];
}
"""


def test_every_binding_kind():
    """One sequential call sees a tile pointer, the whole plane, W/H/W0/H0, the tile count,
    index and offset, a C scalar, a C array indexed by tile and an immediate, and logs them
    (C: the kernel above; simulator: its numpy twin)."""
    def probe(Tile, Plane, W, H, W0, H0, N, Index, Offset, Scale, Sel, Imm7, Log):
        Log[12 * Index:12 * Index + 12] = [W, H, W0, H0, N, Index, Offset, Scale, Sel, Imm7,
                                           Tile[0], Plane[Offset * W]]
    m = Model(l1_budget=2 * 8 * 4 * 5)
    m.LibKernel("Probe", CALL_SEQUENTIAL, CArgs(
        *[TCArg("int *", "Tile"), TCArg("int *", "Plane")],
        *[TCArg("unsigned int", n) for n in ("W", "H", "W0", "H0", "N", "Index", "Offset",
                                             "Scale", "Sel", "Imm7")],
        TCArg("int *", "Log")), c_source=PROBE_C, reference=probe)
    m.UserKernel("B", KernelDimensions(1, 8, 23, 1), KernelIterationOrder(KER_DIM2, KER_TILE),
                 TILE_HOR,
                 CArgs(TCArg("int *", "X"), TCArg("unsigned int", "Scale"),
                       TCArg("int *", "Table", shape=(5,)), TCArg("int *", "Log", shape=(60,))),
                 Calls(Call("Probe", LOC_INNER_LOOP, Bindings(
                     K_Arg("X", KER_ARG_TILE), K_Arg("X", KER_ARG), K_Arg("X", KER_ARG_TILE_W),
                     K_Arg("X", KER_ARG_TILE_H), K_Arg("X", KER_ARG_TILE_W0),
                     K_Arg("X", KER_ARG_TILE_H0), K_Arg("X", KER_ARG_NTILES),
                     K_Arg("X", KER_ARG_TILEINDEX), K_Arg("X", KER_ARG_TILEOFFSET), C_Arg("Scale"),
                     C_ArgIndex("Table", KER_TILE, 1), Imm(7), C_Arg("Log")))),
                 KerArgs(KerArg("X", OBJ_IN_DB, 8, 23, 4, 0, 0, 0, "X")))
    x = np.arange(23 * 8, dtype=np.int32).reshape(23, 8) + 1000
    table = np.array([50, 51, 52, 53, 54], np.int32)
    out = run_both(m.program("B"), {"X": x, "Scale": np.array(3, np.uint32), "Table": table},
                   {"Log": np.zeros(60, np.int32)})
    log = out["Log"].reshape(5, 12)
    assert log.tolist() == [[8, 5 if i < 4 else 3, 8, 5, 5, i, 5 * i, 3, 50 + i, 7,
                             x[5 * i, 0], x[5 * i, 0]] for i in range(5)]


# -- errors ------------------------------------------------------------------------------


def test_an_extern_without_c_source_names_itself():
    ex = example("matmax")
    m = ex["model"]()
    m.libs["KerMatrixMax"] = dataclasses.replace(m.libs["KerMatrixMax"], c_source="")
    prog = m.program("MatMax")
    with pytest.raises(nk.CompilerError, match=r"'KerMatrixMax'.*no other extern's c_source "
                                               r"defines it"):
        c_source(prog)
    m = ex["model"]()  # KerMatrixMaxReduction has none of its own: KerMatrixMax's defines it
    assert m.libs["KerMatrixMaxReduction"].c_source == ""
    assert "void KerMatrixMaxReduction(" in c_source(m.program("MatMax"))
    m.libs["KerMatrixMax"] = dataclasses.replace(m.libs["KerMatrixMax"], arg_type="Nope_T")
    with pytest.raises(nk.CompilerError, match="struct 'Nope_T'"):
        c_source(m.program("MatMax"))


def test_misaligned_tensor_runs_on_an_aligned_copy():
    """A basic kernel reads tensors through plain C pointers: a misaligned array is copied
    to an aligned image first (the generated code itself needs no alignment)."""
    prog = example("matmax")["model"](2000, 10, 20).program("MatMax")
    raw = np.zeros(20 * 10 * 4 + 8, np.uint8)
    x = raw[1:1 + 800].view(np.int32).reshape(20, 10)
    x[...] = np.arange(200).reshape(20, 10) * 3 - 7
    out = np.zeros(1, np.int32)
    prog.run("c", In=x, Out=out)
    assert out[0] == x.max()


def test_zero_valid_rows_touch_nothing():
    """The read after the last tile lies past the tensor's end; C must not address it: its
    copy is guarded by the valid count (checked under ASan in test_c_sanitize.py)."""
    prog = example("cnn_conv5x5")["model"]().program("CnnConv5x5")
    reads = [st for st, _ in prog.walk() if isinstance(st, ir.Copy) and
             st.label == "Read Next Tile Filter"]
    assert reads and reads[0].src.bounds()[1] > reads[0].src.buffer.size  # past the end
    src = c_source(prog)
    block = src[src.index("/* ==== Read Next Tile Filter ==== */"):]
    assert block.index("if (live > 0) {") < block.index("memcpy(")
