"""The AutoTiler: seed 001's numbers, the solver's optimality under random budgets, errors,
constraints, L3 homes and every binding kind, checked on the simulator against numpy."""

from __future__ import annotations

import math
import runpy
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import npukit as nk
from npukit.tiler import *

EX = Path(__file__).parent.parent / "examples" / "tiler"


def example(name):
    return runpy.run_path(str(EX / f"{name}.py"))


def test_matadd_seed_numbers():
    t = example("matadd")["model"]().tiling("MatAdd")
    assert (t.n_tiles, t.tile, t.last_tile) == (30, 10, 10)
    assert {n: (p.offset, p.size, p.slots) for n, p in t.args.items()} == {
        "In1": (0, 8000, 2), "In2": (16000, 8000, 2), "Out": (32000, 8000, 2)}


def test_matmax_seed_numbers():
    t = example("matmax")["model"]().tiling("MatMax")
    assert (t.n_tiles, t.tile, t.last_tile) == (10, 31, 21)
    assert (t.args["In"].offset, t.args["In"].size, t.args["In"].slots) == (0, 24800, 2)
    dyn = t.args["TiledOut"]
    assert dyn.offset == 49600 and dyn.size == 10 * 4 and dyn.slots == 1


def test_order_1_is_refused():
    with pytest.raises(nk.TilingError, match="only iteration order 2"):
        KernelIterationOrder(KER_DIM4, KER_OUT_PLANE, KER_IN_PLANE, KER_TILE)


def add_kernel(m, name, args, W, H, orientation=TILE_HOR, budget=None):
    """Out = In1 + In2 over int arrays of the given KerArg types."""
    def ref(In1, In2, Out, W, H, *, core_id, core_count):
        n = W * H
        chunk = -(-n // core_count)
        a, b = core_id * chunk, min(n, core_id * chunk + chunk)
        Out[a:b] = In1[a:b] + In2[a:b]
    if "Add" not in m.libs:
        m.LibKernel("Add", CALL_PARALLEL,
                    CArgs(TCArg("int *", "In1"), TCArg("int *", "In2"), TCArg("int *", "Out"),
                          TCArg("unsigned int", "W"), TCArg("unsigned int", "H")),
                    reference=ref, cost=lambda W, H: W * H)
    m.UserKernel(name, KernelDimensions(1, W, H, 1), KernelIterationOrder(KER_DIM2, KER_TILE),
                 orientation,
                 CArgs(TCArg("int *", "A"), TCArg("int *", "B"), TCArg("int *", "C")),
                 Calls(Call("Add", LOC_INNER_LOOP, Bindings(
                     K_Arg("A", KER_ARG_TILE), K_Arg("B", KER_ARG_TILE), K_Arg("C", KER_ARG_TILE),
                     K_Arg("A", KER_ARG_TILE_W), K_Arg("A", KER_ARG_TILE_H)))),
                 KerArgs(*[KerArg(n, t, W, H, 4, 0, c, p, n) for n, t, c, p in args]))


def footprint(W, item, t, n, types):
    """L1 bytes, written independently of the solver: each argument's tile of t lines,
    twice when double buffered and there is more than one tile, starts aligned to 4."""
    off = 0
    for typ in types:
        off = -(-off // 4) * 4
        off += W * item * t * (2 if typ & O_DB and n > 1 else 1)
    return off


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(W=st.integers(1, 40), H=st.integers(1, 60), budget=st.integers(200, 20000),
       dbs=st.tuples(st.booleans(), st.booleans(), st.booleans()), seed=st.integers(0, 2**31))
def test_solver_is_largest_fitting_and_correct(W, H, budget, dbs, seed):
    types = [OBJ_IN_DB if dbs[0] else OBJ_IN, OBJ_IN_DB if dbs[1] else OBJ_IN,
             OBJ_OUT_DB if dbs[2] else OBJ_OUT]
    m = Model(l1_budget=budget)
    add_kernel(m, "K", [("A", types[0], 0, 0), ("B", types[1], 0, 0), ("C", types[2], 0, 0)], W, H)
    try:
        t = m.tiling("K")
    except nk.TilingError as e:
        # Nothing fits: even one-line tiles are over budget, and the message says how much.
        need = min(footprint(W, 4, tt, math.ceil(H / tt), types) for tt in range(1, H + 1))
        assert need > budget and str(budget) in str(e)
        return
    assert t.l1_used == footprint(W, 4, t.tile, t.n_tiles, types) <= budget
    assert t.n_tiles == math.ceil(H / t.tile) and t.last_tile == H - (t.n_tiles - 1) * t.tile
    for bigger in range(t.tile + 1, H + 1):
        assert footprint(W, 4, bigger, math.ceil(H / bigger), types) > budget
    rng = np.random.default_rng(seed)
    a = rng.integers(-1000, 1000, (H, W), dtype=np.int32)
    b = rng.integers(-1000, 1000, (H, W), dtype=np.int32)
    c = np.zeros((H, W), np.int32)
    m.program("K").run(A=a, B=b, C=c)
    assert (c == a + b).all()


@pytest.mark.parametrize("constraint,check", [
    (OBJ_CONSTRAINTS_EVEN, lambda t: t % 2 == 0),
    (OBJ_CONSTRAINTS_ODD, lambda t: t % 2 == 1),
])
def test_even_odd_constraints(constraint, check):
    m = Model(l1_budget=6 * 10 * 4 * 2 * 9 + 8)  # room for 9 lines, not 10
    add_kernel(m, "K", [("A", OBJ_IN_DB, constraint, 0), ("B", OBJ_IN_DB, 0, 0),
                        ("C", OBJ_OUT_DB, 0, 0)], 10, 50)
    t = m.tiling("K")
    assert check(t.tile) and t.tile >= 8 and t.n_tiles > 1


def test_preferred_multiple_and_one_tile():
    m = Model(l1_budget=3 * 2 * 10 * 4 * 13)
    add_kernel(m, "P", [("A", OBJ_IN_DB, 0, 4), ("B", OBJ_IN_DB, 0, 0), ("C", OBJ_OUT_DB, 0, 0)],
               10, 50)
    assert m.tiling("P").tile == 12
    m2 = Model(l1_budget=10 ** 6)
    add_kernel(m2, "O", [("A", OBJ_IN_DB, OBJ_CONSTRAINTS_ONEPREFTILE, 0), ("B", OBJ_IN_DB, 0, 0),
                         ("C", OBJ_OUT_DB, 0, 0)], 10, 50)
    assert m2.tiling("O").n_tiles == 1
    m3 = Model(l1_budget=1000)
    add_kernel(m3, "O", [("A", OBJ_IN_DB, OBJ_CONSTRAINTS_ONEPREFTILE, 0), ("B", OBJ_IN_DB, 0, 0),
                         ("C", OBJ_OUT_DB, 0, 0)], 10, 50)
    with pytest.raises(nk.TilingError, match="1000"):
        m3.tiling("O")


def test_budget_errors_name_the_numbers():
    m = Model(l1_budget=100)
    add_kernel(m, "Wide", [("A", OBJ_IN_DB, 0, 0), ("B", OBJ_IN_DB, 0, 0), ("C", OBJ_OUT_DB, 0, 0)],
               200, 30)
    with pytest.raises(nk.TilingError, match=r"'A' can never fit.*1 line\(s\) of 200 x 4 B = 800 B"
                                             r".*budget of 100 B"):
        m.tiling("Wide")
    m = Model(l1_budget=4700)  # one line fits per argument, not all three double buffered
    add_kernel(m, "Tight", [("A", OBJ_IN_DB, 0, 0), ("B", OBJ_IN_DB, 0, 0),
                            ("C", OBJ_OUT_DB, 0, 0)], 200, 30)
    with pytest.raises(nk.TilingError, match=r"Tight: nothing fits the L1 budget of 4700 B; the "
                                             r"smallest admissible tiling needs 4800 B"):
        m.tiling("Tight")


def test_vertical_tiles_and_orientation_override():
    m = Model(l1_budget=3 * 2 * 24 * 4 * 5)  # five columns of 24 rows, double buffered
    add_kernel(m, "V", [("A", OBJ_IN_DB, 0, 0), ("B", OBJ_IN_DB, 0, 0), ("C", OBJ_OUT_DB, 0, 0)],
               30, 24, TILE_VER)
    t = m.tiling("V")
    assert t.tile == 5 and t.n_tiles == 6  # vertical tiles divide the width
    rng = np.random.default_rng(0)
    a, b = rng.integers(-9, 9, (2, 24, 30), dtype=np.int32)
    c = np.zeros((24, 30), np.int32)
    m.program("V").run(A=a, B=b, C=c)
    assert (c == a + b).all()


def test_l3_home_streams_through_l2():
    m = Model(l1_budget=4000, l2_budget=10_000)
    add_kernel(m, "L3", [("A", OBJ_IN_DB_L2DB, 0, 0), ("B", OBJ_IN_DB, 0, 0),
                         ("C", OBJ_OUT_DB_L2DB, 0, 0)], 16, 40)
    prog = m.program("L3")
    homes = {b.name: b.memory for b, _ in prog.params}
    assert homes == {"A": "L3_RAM", "B": "L2", "C": "L3_RAM"}
    rng = np.random.default_rng(1)
    a, b = rng.integers(-99, 99, (2, 40, 16), dtype=np.int32)
    c = np.zeros((40, 16), np.int32)
    res = prog.run(A=a, B=b, C=c)
    assert (c == a + b).all()
    assert res.report.busy["micro_dma"] > 0 and res.report.bytes_moved["L3_RAM"] == 2 * a.nbytes
    small = Model(l1_budget=4000, l2_budget=100)
    add_kernel(small, "L3", [("A", OBJ_IN_DB_L2DB, 0, 0), ("B", OBJ_IN_DB, 0, 0),
                             ("C", OBJ_OUT_DB, 0, 0)], 16, 40)
    with pytest.raises(nk.TilingError, match="L2 budget of 100 B"):
        small.program("L3")


def test_dma_overlaps_compute():
    """Double buffering shows in the timeline: total cycles well below DMA + compute."""
    conv = example("cnn_conv5x5")["model"]()
    prog = conv.program("CnnConv5x5")
    rng = np.random.default_rng(0)
    res = prog.run(In=rng.integers(-99, 99, (3, 40, 40), dtype=np.int16),
                   Filter=rng.integers(-9, 9, (2, 3, 5, 5), dtype=np.int16),
                   Out=np.zeros((2, 36, 36), np.int16), Norm=3,
                   Bias=np.array([1, 2], np.int16))
    busy = res.report.busy
    assert res.cycles < busy["cluster_dma"] + busy["core"]
    assert res.cycles <= 1.05 * res.report.roofline


def test_every_binding_kind():
    """One call sees tile pointer, whole plane, W/H/W0/H0, tile count, index, offset, a C
    scalar, a C array indexed by tile, and an immediate; its reference records them."""
    seen = []

    def probe(Tile, Plane, W, H, W0, H0, N, Index, Offset, Scale, Sel, Imm7):
        seen.append((W, H, W0, H0, N, Index, Offset, Scale, Sel, Imm7,
                     int(Tile[0]), int(Plane[Offset * W])))
    m = Model(l1_budget=2 * 8 * 4 * 5)
    m.LibKernel("Probe", CALL_SEQUENTIAL, CArgs(
        *[TCArg("int *", "Tile"), TCArg("int *", "Plane")],
        *[TCArg("unsigned int", n) for n in ("W", "H", "W0", "H0", "N", "Index", "Offset",
                                             "Scale", "Sel", "Imm7")]), reference=probe)
    m.UserKernel("B", KernelDimensions(1, 8, 23, 1), KernelIterationOrder(KER_DIM2, KER_TILE),
                 TILE_HOR,
                 CArgs(TCArg("int *", "X"), TCArg("unsigned int", "Scale"),
                       TCArg("int *", "Table", shape=(5,))),
                 Calls(Call("Probe", LOC_INNER_LOOP, Bindings(
                     K_Arg("X", KER_ARG_TILE), K_Arg("X", KER_ARG), K_Arg("X", KER_ARG_TILE_W),
                     K_Arg("X", KER_ARG_TILE_H), K_Arg("X", KER_ARG_TILE_W0),
                     K_Arg("X", KER_ARG_TILE_H0), K_Arg("X", KER_ARG_NTILES),
                     K_Arg("X", KER_ARG_TILEINDEX), K_Arg("X", KER_ARG_TILEOFFSET), C_Arg("Scale"),
                     C_ArgIndex("Table", KER_TILE, 1), Imm(7)))),
                 KerArgs(KerArg("X", OBJ_IN_DB, 8, 23, 4, 0, 0, 0, "X")))
    t = m.tiling("B")
    assert (t.n_tiles, t.tile, t.last_tile) == (5, 5, 3)
    x = np.arange(23 * 8, dtype=np.int32).reshape(23, 8) + 1000
    m.program("B").run(X=x, Scale=3, Table=np.array([50, 51, 52, 53, 54], np.int32))
    assert [s[:10] for s in seen] == [(8, 5 if i < 4 else 3, 8, 5, 5, i, 5 * i, 3, 50 + i, 7)
                                      for i in range(5)]
    assert [s[10] for s in seen] == [x[5 * i, 0] for i in range(5)]  # the tile in L1
    assert [s[11] for s in seen] == [x[5 * i, 0] for i in range(5)]  # the plane in L2


def test_unknown_names_are_errors():
    m = Model()
    with pytest.raises(nk.TilingError, match="unknown C argument 'Nope'"):
        m.UserKernel("K", KernelDimensions(1, 4, 4, 1), KernelIterationOrder(KER_DIM2, KER_TILE),
                     TILE_HOR, CArgs(TCArg("int *", "In")), Calls(),
                     KerArgs(KerArg("In", OBJ_IN, 4, 4, 4, 0, 0, 0, "Nope")))
    with pytest.raises(nk.TilingError, match=r"CArgs\(3, ...\) lists 1 items"):
        CArgs(3, TCArg("int *", "In"))
    m.UserKernel("K", KernelDimensions(1, 4, 4, 1), KernelIterationOrder(KER_DIM2, KER_TILE),
                 TILE_HOR, CArgs(TCArg("int *", "In")),
                 Calls(Call("Missing", LOC_INNER_LOOP, Bindings(K_Arg("In", KER_ARG_TILE)))),
                 KerArgs(KerArg("In", OBJ_IN, 4, 4, 4, 0, 0, 0, "In")))
    with pytest.raises(nk.TilingError, match="unknown basic kernel 'Missing'"):
        m.tiling("K")                           # before any lowering


def test_orientation_override_transposes_by_tiles():
    """Out = In^T: In is tiled by rows, Out (declared W x H swapped) by columns through
    OBJ_CONSTRAINTS_TILE_VER, so tile i of In and tile i of Out are transposes."""
    def transpose(In, Out, W, H, *, core_id, core_count):
        if core_id == 0:  # In tile: H rows of W; Out tile: W rows of H
            Out[: W * H].reshape(W, H)[...] = In[: W * H].reshape(H, W).T
    m = Model(l1_budget=2 * 2 * 12 * 4 * 5)
    m.LibKernel("Transpose", CALL_PARALLEL, CArgs(
        TCArg("int *", "In"), TCArg("int *", "Out"), TCArg("unsigned int", "W"),
        TCArg("unsigned int", "H")), reference=transpose, cost=lambda W, H: W * H)
    m.UserKernel("T", KernelDimensions(1, 12, 30, 1), KernelIterationOrder(KER_DIM2, KER_TILE),
                 TILE_HOR, CArgs(TCArg("int *", "In"), TCArg("int *", "Out")),
                 Calls(Call("Transpose", LOC_INNER_LOOP, Bindings(
                     K_Arg("In", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE),
                     K_Arg("In", KER_ARG_TILE_W), K_Arg("In", KER_ARG_TILE_H)))),
                 KerArgs(KerArg("In", OBJ_IN_DB, 12, 30, 4, 0, 0, 0, "In"),
                         KerArg("Out", OBJ_OUT_DB, 30, 12, 4, 0, OBJ_CONSTRAINTS_TILE_VER, 0,
                                "Out")))
    t = m.tiling("T")
    assert t.tile == 5 and t.n_tiles == 6  # vertical tiles of Out divide its 30 columns
    assert not t.geometry["Out"].horizontal and t.geometry["In"].horizontal
    x = np.arange(360, dtype=np.int32).reshape(30, 12) * 7 - 1000
    out = np.zeros((12, 30), np.int32)
    m.program("T").run(In=x, Out=out)
    assert (out == x.T).all()


def test_one_tile_buffer_is_sized_like_a_tile():
    """A one-tile scratch buffer gets one tile of its own extent, in proportion."""
    def twice(In, Tmp, Out, W, H):
        n = W * H
        Tmp[:n] = In[:n] * 2
        Out[:n] = Tmp[:n] + 1
    m = Model(l1_budget=3 * 2 * 8 * 4 * 4)
    m.LibKernel("Twice", CALL_SEQUENTIAL, CArgs(
        TCArg("int *", "In"), TCArg("int *", "Tmp"), TCArg("int *", "Out"),
        TCArg("unsigned int", "W"), TCArg("unsigned int", "H")), reference=twice)
    m.UserKernel("K", KernelDimensions(1, 8, 21, 1), KernelIterationOrder(KER_DIM2, KER_TILE),
                 TILE_HOR, CArgs(TCArg("int *", "In"), TCArg("int *", "Out")),
                 Calls(Call("Twice", LOC_INNER_LOOP, Bindings(
                     K_Arg("In", KER_ARG_TILE), K_Arg("Tmp", KER_ARG_TILE),
                     K_Arg("Out", KER_ARG_TILE), K_Arg("In", KER_ARG_TILE_W),
                     K_Arg("In", KER_ARG_TILE_H)))),
                 KerArgs(KerArg("In", OBJ_IN_DB, 8, 21, 4, 0, 0, 0, "In"),
                         KerArg("Tmp", OBJ_BUFFER_ONETILE, 8, 21, 4),
                         KerArg("Out", OBJ_OUT_DB, 8, 21, 4, 0, 0, 0, "Out")))
    t = m.tiling("K")
    assert t.args["Tmp"].size == t.tile * 8 * 4 and t.args["Tmp"].slots == 1
    assert t.l1_used == 5 * t.tile * 8 * 4 <= 3 * 2 * 8 * 4 * 4
    x = np.arange(168, dtype=np.int32).reshape(21, 8) - 50
    out = np.zeros((21, 8), np.int32)
    m.program("K").run(In=x, Out=out)
    assert (out == 2 * x + 1).all()


def test_const_pointer_args_are_inputs():
    """A table passed by C_Arg is written back unless its C type says const."""
    def lookup(In, Table, Out, W, H):
        Out[: W * H] = Table[In[: W * H]]
    for ctype, role in (("const int *", "in"), ("int *", "inout")):
        m = Model(l1_budget=4096)
        m.LibKernel("Lookup", CALL_SEQUENTIAL, CArgs(
            TCArg("int *", "In"), TCArg(ctype, "Table"), TCArg("int *", "Out"),
            TCArg("unsigned int", "W"), TCArg("unsigned int", "H")), reference=lookup)
        m.UserKernel("K", KernelDimensions(1, 4, 6, 1), KernelIterationOrder(KER_DIM2, KER_TILE),
                     TILE_HOR, CArgs(TCArg("int *", "In"), TCArg(ctype, "Table", shape=(8,)),
                                     TCArg("int *", "Out")),
                     Calls(Call("Lookup", LOC_INNER_LOOP, Bindings(
                         K_Arg("In", KER_ARG_TILE), C_Arg("Table"), K_Arg("Out", KER_ARG_TILE),
                         K_Arg("In", KER_ARG_TILE_W), K_Arg("In", KER_ARG_TILE_H)))),
                     KerArgs(KerArg("In", OBJ_IN_DB, 4, 6, 4, 0, 0, 0, "In"),
                             KerArg("Out", OBJ_OUT_DB, 4, 6, 4, 0, 0, 0, "Out")))
        prog = m.program("K")
        assert prog.param("Table")[0].role == role
        x = (np.arange(24, dtype=np.int32) * 5 % 8).reshape(6, 4)
        table = np.array([10, 11, 12, 13, 14, 15, 16, 17], np.int32)
        table.flags.writeable = role == "inout"
        out = np.zeros((6, 4), np.int32)
        prog.run(In=x, Table=table, Out=out)
        assert (out == table[x]).all()
