"""The AutoTiler vocabulary beyond the documented examples: the newer generation's spaces,
padded and aliased arguments, model control, and the errors each reports."""

from __future__ import annotations

import numpy as np
import pytest

import npukit as nk
from npukit.tiler import *

ADD1_C = """
typedef struct { int *In; int *Out; unsigned int W; unsigned int H; } Add1_T;
void Add1(Add1_T *Arg)
{
    unsigned int n = Arg->W * Arg->H, c = (n + gap_ncore() - 1) / gap_ncore();
    for (unsigned int i = gap_coreid() * c; i < n && i < (gap_coreid() + 1) * c; i++)
        Arg->Out[i] = Arg->In[i] + 1;
}
"""


def add1(In, Out, W, H, *, core_id, core_count):
    if core_id == 0:
        Out[: W * H] = In[: W * H] + 1


def model(budget):
    m = Model(l1_budget=budget)
    m.LibKernel("Add1", CALL_PARALLEL, CArgs(TCArg("int *", "In"), TCArg("int *", "Out"),
                TCArg("unsigned int", "W"), TCArg("unsigned int", "H")), "Add1_T",
                c_source=ADD1_C, reference=add1)
    return m


CALLS = Calls(Call("Add1", LOC_LOOP, Bindings(K_Arg("In", KER_ARG_TILE),
                                              K_Arg("Out", KER_ARG_TILE),
                                              K_Arg("In", KER_ARG_TILE_W),
                                              K_Arg("In", KER_ARG_TILE_H))))


def run_both(prog, x, out_shape):
    for backend in ("sim", "c"):
        big = np.full(int(np.prod(out_shape)) + 8, -777, np.int32)
        out = big[4:-4].reshape(out_shape)
        prog.run(backend, In=x, Out=out)
        assert (out == x + 1).all() and (big[:4] == -777).all() and (big[-4:] == -777).all()


def test_newer_generation_planes_and_tiles():
    """KernelIterSpace(D0 fixed, Tile0): 3 planes of 10 x 40, tiled by rows per plane."""
    m = model(2 * 2 * 10 * 4 * 7 + 4)
    m.UserKernel("K", KernelIterSpace(2, IterFixedSpace(D0, 3), IterTiledSpace(T0)), TILE_HOR,
                 CArgs(TCArg("int *", "In"), TCArg("int *", "Out")), CALLS,
                 KerArgs(KerArg("In", KerArgSpace(2, D0, T0), O_IN | O_DB, 10, 40, 4, 0, 0, 0,
                                "In"),
                         KerArg("Out", KerArgSpace(2, D0, T0), O_OUT | O_DB, 10, 40, 4, 0, 0, 0,
                                "Out")))
    t = m.tiling("K")
    assert (t.spaces["D0"].count, t.spaces["Tile0"].tile, t.spaces["Tile0"].count) == (3, 7, 6)
    assert t.args["Out"].offset == 560 and t.args["In"].slots == 2
    x = np.arange(1200, dtype=np.int32).reshape(3, 40, 10) * 3 - 500
    run_both(m.program("K"), x, (3, 40, 10))


def test_kerarg_pad_keeps_room_around_each_tile():
    """KerArgPad: 3 items before and 2 after each tile in L1; the data and the kernel's
    pointer sit after the 3."""
    m = model(10_000)
    m.SetKernelOpts(KER_OPT_NONE, KER_OPT_BUFFER_PROMOTE)
    m.UserKernel("K", KernelIterSpace(1, IterTiledSpace(T0)), TILE_HOR,
                 CArgs(TCArg("int *", "In"), TCArg("int *", "Out")), CALLS,
                 KerArgs(KerArgPad("In", KerArgSpace(1, T0), O_IN | O_DB, 8, 100, 3, 2, 4, 0, 0,
                                   0, "In"),
                         KerArg("Out", KerArgSpace(1, T0), O_OUT | O_DB, 8, 100, 4, 0, 0, 0,
                                "Out")))
    t = m.tiling("K")
    lines = t.spaces["Tile0"].tile
    assert t.args["In"].size == (3 + 8 * lines + 2) * 4
    prog = m.program("K")
    call = next(st for st, _ in prog.walk() if isinstance(st, nk.ir.Call))
    assert call.args[0].view.offset.const == 3  # past the room kept before the tile
    x = np.arange(800, dtype=np.int32).reshape(100, 8) - 99
    run_both(prog, x, (100, 8))
    old = KerArgPad("A", OBJ_IN_DB, 8, 100, 3, 2, 4, 0, 0, 0, "A", 0)
    assert old.Buffers == (3, 2) and old.Space is None


def test_aliased_argument_shares_its_targets_memory():
    """KerArgAliased: Out lives in In's L1 slots (the kernel writes in place)."""
    m = model(2 * 10 * 4 * 5)
    m.UserKernel("K", KernelIterSpace(1, IterTiledSpace(T0)), TILE_HOR,
                 CArgs(TCArg("int *", "In"), TCArg("int *", "Out")), CALLS,
                 KerArgs(KerArg("In", KerArgSpace(1, T0), O_IN | O_DB, 10, 30, 4, 0, 0, 0, "In"),
                         KerArgAliased("Out", KerArgSpace(1, T0), 0, O_OUT | O_DB, 10, 30, 4,
                                       0, 0, 0, "Out")))
    t = m.tiling("K")
    assert t.args["Out"] == t.args["In"] and t.l1_used == t.args["In"].footprint
    assert t.spaces["Tile0"].tile == 5  # as if In were alone
    x = np.arange(300, dtype=np.int32).reshape(30, 10) * 7
    run_both(m.program("K"), x, (30, 10))


def test_model_control_calls():
    m = Model(l1_budget=1000)
    m.SetL1MemorySize(2048)
    m.SetSymbolNames("My_L1", "My_L2", "Descr", "Args")
    m.SetSymbolDynamics()
    m.SetUsedFilesNames("KernelLibStdTypes.h", 1, "CNN_BasicKernels.h")
    m.SetGeneratedFilesNames("AInit.c", "AInit.h", "A.c", "A.h")
    m.SetInlineMode(ALWAYS_INLINE)
    s = m.settings
    assert (m.l1_budget, s.l1_symbol, s.l2_symbol, s.dynamic, s.files, s.init_files) == (
        2048, "My_L1", "My_L2", True, ("A.c", "A.h"), ("AInit.c", "AInit.h"))
    assert s.headers == ("CNN_BasicKernels.h",) and s.inline == ALWAYS_INLINE
    with pytest.raises(nk.TilingError, match="2 headers announced, 1 given"):
        m.SetUsedFilesNames(0, 2, "a.h")
    with pytest.raises(nk.TilingError, match="two names"):
        m.SetGeneratedFilesNames("a.c")
    with pytest.raises(nk.TilingError, match="plain file name"):
        m.SetGeneratedFilesNames("../a.c", "a.h")
    with pytest.raises(nk.TilingError, match="C identifier|identifier"):
        m.SetSymbolNames("L1 Memory", "L2")
    with pytest.raises(nk.TilingError, match="positive"):
        m.SetL1MemorySize(0)


def test_append_names_derives_a_generator_s_names():
    """AppendNames concatenates, as gap_sdk's generators derive "Conv0Body" from "Conv0"."""
    assert AppendNames("Conv0", "Body") == "Conv0Body" and AppendNames("", "G1") == "G1"
    m = Model()
    m.LoadCNNLibrary()
    m.CNN_SoftMax(AppendNames("Net", "SoftMax"), 0, 2, 2, 15, 15, 0, 0, 10, KOP_SOFTMAX)
    assert "NetSoftMax" in m.kernels
    with pytest.raises(nk.TilingError, match="AppendNames: Name2 must be a string"):
        AppendNames("Conv0", 1)


def test_promotion_can_be_turned_off():
    """Everything fits whole: one buffer each, unless KER_OPT_BUFFER_PROMOTE is off."""
    def build(promote):
        m = model(10_000)
        if not promote:
            m.SetKernelOpts(KER_OPT_NONE, KER_OPT_BUFFER_PROMOTE)
        m.UserKernel("K", KernelDimensions(4, 6, 5, 4),
                     KernelIterationOrder(KER_DIM3, KER_IN_OUT_PLANE, KER_TILE), TILE_HOR,
                     CArgs(TCArg("int *", "In"), TCArg("int *", "Out")),
                     Calls(Call("Add1", LOC_INNER_LOOP, CALLS[0].BindingList)),
                     KerArgs(KerArg("In", OBJ_IN_DB_3D, 6, 5, 4, 0, 0, 0, "In"),
                             KerArg("Out", OBJ_IN_OUT_DB_3D, 6, 5, 4, 0, 0, 0, "Out")))
        return m
    on, off = build(True), build(False)
    assert on.tiling("K").promoted and on.tiling("K").args["Out"].size == 4 * 30 * 4
    t = off.tiling("K")
    assert not t.promoted and (t.args["In"].slots, t.args["Out"].slots) == (2, 3)
    x = np.arange(120, dtype=np.int32).reshape(4, 5, 6) - 60
    for m in (on, off):
        prog = m.program("K")
        for backend in ("sim", "c"):
            out = np.full((4, 5, 6), 5, np.int32)
            prog.run(backend, In=x, Out=out)
            assert (out == x + 1).all()


@pytest.mark.parametrize("build, message", [
    (lambda: KernelIterSpace(2, IterTiledSpace(T0), IterTiledSpace(T0)), "listed twice"),
    (lambda: IterTiledSpace(D0), "KER_ITER_TILE0..2"),
    (lambda: IterFixedSpace(T0, 3), "IterTiledSpace"),
    (lambda: IterParSpace(D1, 0, 8), "must be >= 1"),
    (lambda: KerArgSpace(2, D0, D0), "listed twice"),
    (lambda: KerArgP("A", KerArgSpace(1, T0), O_IN, 8, 8, 9, 8, (0, 0, 0, 0), (0, 0, 0, 0), 4),
     "must lie in"),
    (lambda: KerArg2D("A", OBJ_IN_DB, 10, 4, 3, 2), "whole number of planes"),
    (lambda: KerArg2DP("A", OBJ_IN_DB, 10, 4, 5, 0, 0, -1, 0, 2), "four counts >= 0"),
    (lambda: KerDim(9), "K_INP"),
])
def test_vocabulary_errors(build, message):
    with pytest.raises(nk.TilingError, match=message):
        build()


def kernel(m, iter_space, kerargs, calls=CALLS):
    m.UserKernel("K", iter_space, TILE_HOR, CArgs(TCArg("int *", "In"), TCArg("int *", "Out")),
                 calls, KerArgs(*kerargs))


def test_kernel_errors_name_what_is_wrong():
    m = model(4096)
    with pytest.raises(nk.TilingError, match="mixes the two generations"):
        kernel(m, KernelIterSpace(1, IterTiledSpace(T0)),
               [KerArg("In", OBJ_IN_DB, 8, 8, 4, 0, 0, 0, "In")])
    with pytest.raises(nk.TilingError, match="walks space D1, which the kernel"):
        kernel(model(4096), KernelIterSpace(1, IterTiledSpace(T0)),
               [KerArg("In", KerArgSpace(2, D1, T0), O_IN, 8, 8, 4, 0, 0, 0, "In")])
    with pytest.raises(nk.TilingError, match="only its innermost space"):
        kernel(model(4096), KernelIterSpace(2, IterTiledSpace(T1), IterTiledSpace(T0)),
               [KerArg("In", KerArgSpace(2, T1, T0), O_IN, 8, 8, 4, 0, 0, 0, "In")])
    m = model(4096)
    kernel(m, KernelIterSpace(1, IterTiledSpace(T0)),
           [KerArg("In", KerArgSpace(1, T0), O_IN | O_DB, 8, 30, 4, 0, 0, 0, "In"),
            KerArg("Out", KerArgSpace(1, T0), O_OUT | O_DB, 8, 20, 4, 0, 0, 0, "Out")])
    with pytest.raises(nk.TilingError, match="not a multiple.*PAD_REM"):
        m.tiling("K")
    m = model(4096)
    kernel(m, KernelIterSpace(1, IterTiledSpace(T0)),
           [KerArg("In", KerArgSpace(1, T0), O_IN | O_DB, 8, 8, 4, 0, 0, 0, "In"),
            KerArg("Out", KerArgSpace(1, T0), O_OUT | O_DB, 8, 8, 4, 0, 0, 0, "Out")],
           Calls(Call("Add1", LOC_D2, CALLS[0].BindingList)))
    with pytest.raises(nk.TilingError, match="no D2 space"):
        m.program("K")
    m = model(4096)
    kernel(m, KernelIterSpace(1, IterTiledSpace(T0)),
           [KerArg("In", KerArgSpace(1, T0), O_IN | O_DB, 8, 8, 4, 0, 0, 0, "In"),
            KerArgAliased("Out", KerArgSpace(1, T0), "In", O_OUT | O_DB, 9, 8, 4, 0, 0, 0,
                          "Out")])
    with pytest.raises(nk.TilingError, match="does not fit the memory of 'In'"):
        m.tiling("K")
    with pytest.raises(nk.TilingError, match="aliases 'Nope'"):
        kernel(model(4096), KernelIterSpace(1, IterTiledSpace(T0)),
               [KerArgAliased("Out", KerArgSpace(1, T0), "Nope", O_OUT, 8, 8, 4, 0, 0, 0,
                              "Out")])
    with pytest.raises(nk.TilingError, match="must be equal"):
        m = model(4096)
        m.UserKernel("K", KernelDimensions(2, 4, 4, 3),
                     KernelIterationOrder(KER_DIM3, KER_IN_OUT_PLANE, KER_TILE), TILE_HOR,
                     CArgs(TCArg("int *", "In")), Calls(),
                     KerArgs(KerArg("In", OBJ_IN_DB_3D, 4, 4, 4, 0, 0, 0, "In")))
        m.tiling("K")


def test_user_symbols_and_kernel_dimensions_bind_values():
    seen = []

    def probe(A, B, C, D, E):
        seen.append((A, B, C, D, E))
    m = Model(l1_budget=4096)
    m.LibKernel("Probe", CALL_SEQUENTIAL, CArgs(*[TCArg("int", n) for n in "ABCDE"]),
                reference=probe)
    m.UserKernel("K", KernelDimensionsAndUserSymbols(3, 8, 6, 2, KerDynamicSymbols(
                     1, S_Dyn("Wo", 25))),
                 KernelIterationOrder(KER_DIM2, KER_TILE), TILE_HOR,
                 CArgs(TCArg("int *", "In")),
                 Calls(Call("Probe", LOC_PROLOG, Bindings(UserSymb("Wo"), KerDim(K_INP),
                                                          KerDim(K_OUTP), KerDim(K_W),
                                                          AT_IGNORE_ARG_BINDING))),
                 KerArgs(KerArg("In", OBJ_IN_DB, 8, 6, 4, 0, 0, 0, "In")))
    m.program("K").run(In=np.ones((6, 8), np.int32))
    assert seen == [(25, 3, 2, 8, 0)]
    m2 = Model()
    m2.LibKernel("Probe", CALL_SEQUENTIAL, CArgs(TCArg("int", "A")), reference=probe)
    with pytest.raises(nk.TilingError, match="no user symbol 'Nope'"):
        m2.UserKernel("K", KernelDimensions(1, 8, 6, 1), KernelIterationOrder(KER_DIM2, KER_TILE),
                      TILE_HOR, CArgs(TCArg("int *", "In")),
                      Calls(Call("Probe", LOC_PROLOG, Bindings(UserSymb("Nope")))),
                      KerArgs(KerArg("In", OBJ_IN_DB, 8, 6, 4, 0, 0, 0, "In")))
