# ruff: noqa: F403, F405  (the AutoTiler's star-import vocabulary, as in test_tiler.py)
"""AutoTiler models are checked when they are written, not when they are lowered: names,
bindings, argument counts, pointer or scalar, item sizes, integers where the model takes
integers; the simulator runs basic kernels on pointers that cannot reach past their tile
or tensor; a basic kernel without a numpy reference is refused by the simulator only."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import npukit as nk
from npukit.tiler import *
from npukit.tiler.api import ORDER_2

ADD_C = """
void Add(int *In1, int *In2, int *Out, unsigned int W, unsigned int H)
{
    for (unsigned int i = 0; i < W * H; i++) Out[i] = In1[i] + In2[i];
}
"""


def add(In1, In2, Out, W, H):
    Out[: W * H] = In1[: W * H] + In2[: W * H]


def declare_add(m, ref=add, cargs=None, cost=None):
    m.LibKernel("Add", CALL_SEQUENTIAL, cargs or CArgs(
        TCArg("int *", "In1"), TCArg("int *", "In2"), TCArg("int *", "Out"),
        TCArg("unsigned int", "W"), TCArg("unsigned int", "H")),
        c_source=ADD_C, reference=ref, cost=cost)


TILE_BINDINGS = (K_Arg("A", KER_ARG_TILE), K_Arg("B", KER_ARG_TILE), K_Arg("C", KER_ARG_TILE),
                 K_Arg("A", KER_ARG_TILE_W), K_Arg("A", KER_ARG_TILE_H))


def add_kernel(m, bindings=TILE_BINDINGS, cargs=None, kerargs=None, order=(KER_DIM2, KER_TILE),
               H=(40, 40, 40)):
    """C = A + B over 8 x H int32 planes (A, B and C may be declared of other heights)."""
    m.UserKernel("K", KernelDimensions(1, 8, H[0], 1), KernelIterationOrder(*order), TILE_HOR,
                 cargs or CArgs(TCArg("int *", "A"), TCArg("int *", "B"), TCArg("int *", "C")),
                 Calls(Call("Add", LOC_INNER_LOOP, Bindings(*bindings))),
                 kerargs or KerArgs(KerArg("A", OBJ_IN_DB, 8, H[0], 4, 0, 0, 0, "A"),
                                    KerArg("B", OBJ_IN_DB, 8, H[1], 4, 0, 0, 0, "B"),
                                    KerArg("C", OBJ_OUT_DB, 8, H[2], 4, 0, 0, 0, "C")))


def with_binding(k, b):
    return TILE_BINDINGS[:k] + (b,) + TILE_BINDINGS[k + 1:]


HEAD = "UserKernel 'K', call Add (LOC_INNER_LOOP)"
HEAD_RE = re.escape(HEAD)


# -- item 3: mistakes found when the user kernel is declared -----------------------------------

BINDING_MISTAKES = [
    (with_binding(0, K_Arg("Z", KER_ARG_TILE)), None,
     [f"{HEAD}, binding 0 K_Arg('Z', KER_ARG_TILE): no kernel argument 'Z'",
      "KerArgs: ['A', 'B', 'C']"]),
    (with_binding(2, C_Arg("Nope")), None,
     [f"{HEAD}, binding 2 C_Arg('Nope'): no C argument 'Nope'", "CArgs: ['A', 'B', 'C']"]),
    (TILE_BINDINGS[:3], None,
     [f"{HEAD}: basic kernel Add takes 5 arguments (In1, In2, Out, W, H), the call binds 3"]),
    (with_binding(0, K_Arg("A", KER_ARG_TILE_W)), None,
     [f"{HEAD}, binding 0 K_Arg('A', KER_ARG_TILE_W) for In1 (int *): passes a scalar to a "
      f"pointer argument"]),
    (with_binding(3, K_Arg("A", KER_ARG_TILE)), None,
     ["binding 3 K_Arg('A', KER_ARG_TILE) for W (unsigned int): passes a pointer to a scalar"]),
    (with_binding(4, Imm(-1)), None,
     ["binding 4 Imm(-1) for H (unsigned int): -1 does not fit uint32 (0..4294967295)"]),
    (with_binding(3, C_ArgIndex("T", KER_OUT_PLANE, 1)),
     CArgs(TCArg("int *", "A"), TCArg("int *", "B"), TCArg("int *", "C"),
           TCArg("unsigned int *", "T", shape=(4,))),
     ["binding 3 C_ArgIndex('T', KER_OUT_PLANE, 1)", "iterates over KER_TILE, not "
      "KER_OUT_PLANE: the index would always be 0"]),
    (with_binding(3, C_ArgIndex("N", KER_TILE, 1)),
     CArgs(TCArg("int *", "A"), TCArg("int *", "B"), TCArg("int *", "C"),
           TCArg("unsigned int", "N")),
     ["C argument 'N' (unsigned int) is no pointer; C_ArgIndex subscripts a pointer"]),
]


@pytest.mark.parametrize("bindings, cargs, words", BINDING_MISTAKES)
def test_binding_mistakes_fail_when_the_user_kernel_is_declared(bindings, cargs, words):
    m = Model(l1_budget=4000)
    declare_add(m)
    with pytest.raises(nk.TilingError) as err:
        add_kernel(m, bindings, cargs)
    for word in words:
        assert word in str(err.value), (word, str(err.value))
    assert "K" not in m.kernels


def test_the_good_model_runs_and_matches_numpy():   # the control of the mistakes above
    m = Model(l1_budget=1000)
    declare_add(m)
    add_kernel(m)
    rng = np.random.default_rng(0)
    a, b = rng.integers(-10**6, 10**6, (2, 40, 8), dtype=np.int32)
    c = np.full((40, 8), 77, np.int32)
    m.program("K").run(A=a, B=b, C=c)
    assert m.tiling("K").n_tiles > 1 and (c == a + b).all()


def kerargs(**changes):
    base = {"A": ("A", OBJ_IN_DB, 8, 40, 4, "A"), "B": ("B", OBJ_IN_DB, 8, 40, 4, "B"),
            "C": ("C", OBJ_OUT_DB, 8, 40, 4, "C")}
    base.update(changes)
    return KerArgs(*[KerArg(n, t, w, h, item, 0, 0, 0, c) for n, t, w, h, item, c in
                     base.values()])


KERNEL_MISTAKES = [
    ({"kerargs": kerargs(B=("B", OBJ_IN_DB, 8, 40, 2, "B"))},
     ["UserKernel 'K': KerArg 'B' has ItemSize 2 but C argument 'B' (int *) points to int32 "
      "(4 B)"]),
    ({"kerargs": kerargs(B=("B", OBJ_IN_DB, 8, 40, 6, "B"))},
     ["UserKernel 'K': KerArg 'B' has ItemSize 6 but C argument 'B' (int *) points to int32 "
      "(4 B); an item is one of them or several"]),
    ({"kerargs": kerargs(T=("T", OBJ_BUFFER, 8, 40, 3, None))},
     ["KerArg 'T' is bound to no C argument, so its items are C scalars: ItemSize 3 is not "
      "the size of one (1, 2, 4, 8)"]),
    ({"kerargs": kerargs(B=("A", OBJ_IN_DB, 8, 40, 4, "B"))},
     ["kernel argument 'A' is declared twice"]),
    ({"cargs": CArgs(TCArg("int *", "A"), TCArg("int *", "B"), TCArg("int *", "B"),
                     TCArg("int *", "C"))}, ["C argument 'B' is declared twice"]),
    ({"kerargs": kerargs(B=("B", OBJ_IN_DB, 8, 40, 4, "A"))},
     ["KerArgs 'A' and 'B' are both bound to C argument 'A'"]),
    ({"cargs": CArgs(TCArg("int *", "A"), TCArg("int *", "B"), TCArg("int", "C"))},
     ["KerArg 'C' is bound to C argument 'C' of type 'int', which is no pointer"]),
    ({"cargs": CArgs(TCArg("int *", "A", shape=(40,)), TCArg("int *", "B"),
                     TCArg("int *", "C"))},
     ["C argument 'A' declares shape (40,) but KerArg 'A' makes it (40, 8)"]),
    ({"kerargs": kerargs(B=("B", OBJ_IN_DB, 8, 40, 4, "Nope"))},
     ["KerArg 'B' is bound to unknown C argument 'Nope'"]),
    ({"kerargs": kerargs(B=("B", OBJ_IN_DB, 8, 40, 4, None))},
     ["KerArg 'B' (ObjType 0x441) is moved to and from L1, so its home is a C argument"]),
]


@pytest.mark.parametrize("changes, words", KERNEL_MISTAKES)
def test_argument_mistakes_fail_when_the_user_kernel_is_declared(changes, words):
    m = Model(l1_budget=4000)
    declare_add(m)
    with pytest.raises(nk.TilingError) as err:
        add_kernel(m, **changes)
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_selectors_of_tile_places_need_a_tiled_argument():
    m = Model(l1_budget=4000)
    m.LibKernel("Probe", CALL_SEQUENTIAL,
                CArgs(TCArg("int *", "P"), TCArg("unsigned int", "Index")),
                reference=lambda P, Index: None)
    for sel in (KER_ARG_TILEINDEX, KER_ARG_TILEOFFSET, KER_ARG_NTILES):
        with pytest.raises(nk.TilingError, match=rf"binding 1 K_Arg\('F', {sel.name}\): 'F' is "
                                                 r"not tiled .* no tile count, index or offset"):
            m.UserKernel(f"K{sel.name}", KernelDimensions(1, 8, 40, 1),
                         KernelIterationOrder(KER_DIM2, KER_TILE), TILE_HOR,
                         CArgs(TCArg("int *", "F")),
                         Calls(Call("Probe", LOC_INNER_LOOP, Bindings(K_Arg("F", KER_ARG_TILE),
                                                                      K_Arg("F", sel)))),
                         KerArgs(KerArg("F", OBJ_IN_DB_NTILED, 5, 5, 4, 0, 0, 0, "F")))


def test_a_pointer_to_items_of_another_size_is_refused():
    m = Model(l1_budget=4000)
    declare_add(m, cargs=CArgs(TCArg("short *", "In1"), TCArg("int *", "In2"),
                               TCArg("int *", "Out"), TCArg("unsigned int", "W"),
                               TCArg("unsigned int", "H")))
    with pytest.raises(nk.TilingError, match=r"binding 0 K_Arg\('A', KER_ARG_TILE\) for In1 "
                                             r"\(short \*\): points to items of 4 B, but In1 "
                                             r"points to int16 \(2 B\)"):
        add_kernel(m)


def test_declarations_are_checked():
    m = Model(l1_budget=4000)
    declare_add(m)
    with pytest.raises(nk.TilingError, match="LibKernel 'Add': a basic kernel of that name is "
                                             "already declared"):
        declare_add(m)
    with pytest.raises(nk.TilingError, match="LibKernel 'Sub': reference must be a function"):
        m.LibKernel("Sub", CALL_SEQUENTIAL, CArgs(TCArg("int *", "X")), reference="numpy")
    with pytest.raises(nk.TilingError, match=r"UserKernel 'K': KerArgs holds KerArg values; "
                                             r"got 3"):
        add_kernel(m, kerargs=(3,))


def test_basic_kernels_may_be_declared_after_the_user_kernel():
    """The AutoTiler allows LibKernel after UserKernel: the calls are checked at tiling."""
    m = Model(l1_budget=1000)
    add_kernel(m)                                        # no basic kernel yet: accepted
    with pytest.raises(nk.TilingError, match=rf"{HEAD_RE}: unknown basic kernel 'Add'; declare "
                                             r"it with LibKernel \(basic kernels: \[\]\)"):
        m.tiling("K")
    m.LibKernel("Add", CALL_SEQUENTIAL, CArgs(TCArg("int *", "In1"), TCArg("int *", "In2"),
                                              TCArg("int *", "Out")), reference=add)
    with pytest.raises(nk.TilingError, match=rf"{HEAD_RE}: basic kernel Add takes 3 arguments "
                                             r"\(In1, In2, Out\), the call binds 5"):
        m.tiling("K")
    m.libs.pop("Add")
    declare_add(m)
    a = np.arange(320, dtype=np.int32).reshape(40, 8)
    c = np.zeros((40, 8), np.int32)
    m.program("K").run(A=a, B=a, C=c)
    assert (c == 2 * a).all()


# -- item 4: integers where the model takes integers -------------------------------------------

def _kerarg(field, value):
    args = dict(KerArgName="A", ObjType=OBJ_IN_DB, W=8, H=40, ItemSize=4)
    args[field] = value
    return lambda: KerArg(**args)


def _dims(field, value):
    args = dict(InPlanes=1, W=8, H=40, OutPlanes=1)
    args[field] = value
    return lambda: KernelDimensions(**args)


NUMBER_FIELDS = (
    [(f"KerArg 'A': {f}", _kerarg(f, v)) for f in ("W", "H", "ItemSize", "TileOverlap",
                                                 "Constraint", "PreferedTileSize",
                                                 "NextPlaneUpdate", "ObjType")
     for v in (2.5, True, "3", None)]
    + [(f"KernelDimensions: {f}", _dims(f, v)) for f in ("InPlanes", "W", "H", "OutPlanes")
       for v in (8.5, False, "8")]
    + [(f"Model: {f}", (lambda f=f, v=v: Model(**{f: v}))) for f in ("l1_budget", "l2_budget")
       for v in (4000.5, True, "4000")]
    + [("C_ArgIndex('T', ...): MultFactor", (lambda v=v: C_ArgIndex("T", KER_TILE, v)))
       for v in (1.5, True)]
    + [("Imm: Value", (lambda v=v: Imm(v))) for v in (2.5, "3", True, None)]
)


@pytest.mark.parametrize("field, make", NUMBER_FIELDS, ids=[f for f, _ in NUMBER_FIELDS])
def test_non_integers_are_refused_naming_the_field(field, make):
    with pytest.raises(nk.TilingError, match=re.escape(f"{field} must be an integer, got")):
        make()


def test_integers_are_checked_for_range_and_numpy_ints_are_integers():
    for make, words in [
            (lambda: KerArg("A", OBJ_IN_DB, 8, 0, 4), r"H must be in \[1, 2147483647\], got 0"),
            (lambda: KerArg("A", OBJ_IN_DB, 8, 40, 0), r"ItemSize must be in \[1, 21474"),
            (lambda: KerArg("A", OBJ_IN_DB, 8, 40, 4, -4), r"TileOverlap must be in \[0, "
                                                            r"2147483647\], got -4"),
            (lambda: KerArg("A", 1 << 30, 8, 40, 4), "no combination of O_"),
            (lambda: KerArg("A", O_DB | O_TILED, 8, 40, 4), "with O_IN, O_OUT or O_BUFF"),
            (lambda: KerArg("A", OBJ_IN, 8, 40, 4, 0, 1 << 12), "no combination of OBJ_CONST"),
            (lambda: KernelDimensions(0, 8, 40, 1), r"InPlanes must be in \[1, 21474.*got 0"),
            (lambda: Model(l1_budget=0), r"l1_budget must be in \[1, 2147483647\], got 0"),
            (lambda: Imm(2**64), r"Value must be in \[-9223372036854775808, "),
            (lambda: KerArg("A", OBJ_IN_DB, 2**31, 40, 4), r"W must be in \[1, 2147483647\]"),
            (lambda: KernelDimensions(1, 8, 40, 2**40), "OutPlanes must be in"),
            (lambda: K_Arg("A", 42), "the selector 42 is none of KER_ARG, KER_ARG_TILE"),
            (lambda: Call("Add", 99, ()), "CallLocation 99 is none of LOC_PROLOG"),
            (lambda: C_ArgIndex("T", KER_DIM2, 1), "Iterator must be KER_TILE, KER_IN_PLANE"),
            (lambda: KernelIterationOrder(KER_DIM2, 77), "an iterator 77 is none of")]:
        with pytest.raises(nk.TilingError, match=words):
            make()
    a = KerArg("A", OBJ_IN_DB, np.int64(8), np.int32(40), np.uint8(4))
    assert (a.W, a.H, a.ItemSize) == (8, 40, 4) and type(a.W) is int
    assert KernelDimensions(np.int64(2), 8, 40, 1).InPlanes == 2


# -- groups ---------------------------------------------------------------------------------------

def copy(In, Out, W, H):
    Out[: W * H] = In[: W * H]


def copy_group(m, h2=20, calls=None, second_type="int *"):
    m.LibKernel("Copy", CALL_SEQUENTIAL, CArgs(TCArg("int *", "In"), TCArg("int *", "Out"),
                TCArg("unsigned int", "W"), TCArg("unsigned int", "H")), reference=copy)
    m.OpenKernelGroup("G")
    for name, h in (("K1", 20), ("K2", h2)):
        m.UserKernel(name, KernelDimensions(1, 8, h, 1), KernelIterationOrder(KER_DIM2, KER_TILE),
                     TILE_HOR, CArgs(TCArg("int *", "A"), TCArg("int *", "B")),
                     Calls(Call("Copy", LOC_INNER_LOOP, Bindings(
                         K_Arg("A", KER_ARG_TILE), K_Arg("B", KER_ARG_TILE),
                         K_Arg("A", KER_ARG_TILE_W), K_Arg("A", KER_ARG_TILE_H)))),
                     KerArgs(KerArg("A", OBJ_IN_DB, 8, h, 4, 0, 0, 0, "A"),
                             KerArg("B", OBJ_OUT_DB, 8, h, 4, 0, 0, 0, "B")))
    m.CloseKernelGroup()
    m.UserKernelGroup("G", CArgs(TCArg("int *", "X"), TCArg(second_type, "Y"),
                                 TCArg("int *", "Z")),
                      calls or Calls(UserKernelCall("K1", LOC_GROUP, Bindings(C_Arg("X"),
                                                                              C_Arg("Y"))),
                                     UserKernelCall("K2", LOC_GROUP, Bindings(C_Arg("Y"),
                                                                              C_Arg("Z")))))


@pytest.mark.parametrize("calls, second_type, words", [
    (Calls(UserKernelCall("K1", LOC_GROUP, Bindings(C_Arg("X")))), "int *",
     ["UserKernelGroup 'G', call K1: K1 takes 2 C arguments (A, B), the call binds 1"]),
    (Calls(UserKernelCall("K1", LOC_GROUP, Bindings(C_Arg("X"), C_Arg("W")))), "int *",
     ["binding 1 C_Arg('W') for B (int *): no group C argument 'W'"]),
    (Calls(UserKernelCall("K1", LOC_GROUP, Bindings(C_Arg("X"), Imm(3)))), "int *",
     ["binding 1 Imm(3) for B (int *): an immediate for a pointer argument"]),
    (None, "short *", ["binding 1 C_Arg('Y') for B (int *): group argument 'Y' points to "
                       "int16, B to int32"]),
])
def test_group_mistakes_fail_when_the_group_is_declared(calls, second_type, words):
    with pytest.raises(nk.TilingError) as err:
        copy_group(Model(l1_budget=4000), 20, calls, second_type)
    for word in words:
        assert word in str(err.value), (word, str(err.value))


@pytest.mark.parametrize("h2", [10, 40])
def test_kernels_of_a_group_declare_a_shared_tensor_alike(h2):
    """K2 declares the tensor K1 wrote as 10 or 40 rows: it would leave half of it out, or
    read past it. Same rows: the group runs."""
    m = Model(l1_budget=4000)
    copy_group(m, h2)
    with pytest.raises(nk.TilingError, match=rf"K2: C argument 'A' is group argument 'Y', which "
                                             rf"an earlier user kernel of the group declared as "
                                             rf"\(20, 8\) int32; this one declares \({h2}, 8\)"):
        m.program("G")
    m = Model(l1_budget=4000)
    copy_group(m, 20)
    x = np.arange(160, dtype=np.int32).reshape(20, 8)
    y, z = np.zeros_like(x), np.zeros_like(x)
    m.program("G").run(X=x, Y=y, Z=z)
    assert (z == x).all() and (y == x).all()


def test_an_indexed_c_argument_past_its_tensor_fails_at_build():
    m = Model(l1_budget=700)
    declare_add(m)
    cargs = CArgs(TCArg("int *", "A"), TCArg("int *", "B"), TCArg("int *", "C"),
                  TCArg("unsigned int *", "T", shape=(3,)))
    add_kernel(m, with_binding(4, C_ArgIndex("T", KER_TILE, 2)), cargs)
    assert m.tiling("K").n_tiles > 2
    with pytest.raises(nk.OutOfBoundsError, match=r"tensor 'T': `Call Kernel LOC_INNER_LOOP: "
                                                  r"Add` touches elements 0\.\.\d+ but the tensor "
                                                  r"spans elements 0\.\.2"):
        m.program("K")


# -- item 5: a basic kernel without a numpy reference ---------------------------------------------

def test_no_reference_is_refused_by_the_simulator_only():
    m = Model(l1_budget=1000)
    declare_add(m, ref=None)
    add_kernel(m)
    prog = m.program("K")
    a = np.arange(320, dtype=np.int32).reshape(40, 8)
    c = np.full((40, 8), 77, np.int32)
    with pytest.raises(nk.KernelError, match=r"program 'K' calls basic kernel\(s\) Add without "
                                             r"a numpy reference.*reference=fn.*backend='c'"):
        prog.run("sim", A=a, B=a, C=c)
    assert (c == 77).all()                               # nothing ran
    prog.run("c", A=a, B=a, C=c)                         # C needs only the c_source
    assert (c == 2 * a).all()


# -- item 6: references run on pointers that cannot reach past their tile ---------------------

def test_a_tile_smaller_than_what_the_kernel_writes_is_caught_by_the_simulator():
    """C is declared 20 rows tall, A and B 40: A's tile sizes tell Add to write twice C's
    tile. The reference used to get the rest of the buffer (numpy then raised a broadcast
    error, or with two slots wrote into the other one); now each pointer reaches its slot."""
    for budget in (4000, 1600):                          # one slot each; two slots each
        m = Model(l1_budget=budget)
        declare_add(m)
        add_kernel(m, H=(40, 40, 20))
        t = m.tiling("K")
        slot = t.args["C"].size // 4
        a = np.ones((40, 8), np.int32)
        c = np.full((20, 8), 77, np.int32)
        with pytest.raises(nk.OutOfBoundsError) as err:
            m.program("K").run(A=a, B=a, C=c)
        msg = str(err.value)
        for part in ("basic kernel Add (`Call Kernel LOC_INNER_LOOP: Add`)",
                     f"runs past the {slot} elements this pointer reaches",
                     f"Out: L1 buffer 'C'{' slot 0' if t.args['C'].slots > 1 else ''}, "
                     f"elements 0..{slot - 1} ({slot})", "In1: L1 buffer 'A'"):
            assert part in msg, (part, msg)
        assert (c == 77).all()


def test_clipped_slices_and_writes_to_inputs_are_caught():
    def short(In1, In2, Out, W, H):             # numpy would clip both slices alike
        Out[: 2 * W * H] = In1[: 2 * W * H]

    def scribble(In1, In2, Out, W, H):           # writes its input tensor
        In1[0] = 5

    def boom(In1, In2, Out, W, H):
        return 1 // 0

    cases = [(short, with_binding(1, K_Arg("B", KER_ARG_TILE)), nk.OutOfBoundsError,
              "slice :640 runs past the 320 elements"),
             (scribble, with_binding(0, K_Arg("A", KER_ARG)), nk.OutOfBoundsError,
              "assignment destination is read-only. Its pointers reach In1: tensor 'A', "
              "elements 0..319 (320), read-only"),
             (boom, TILE_BINDINGS, nk.KernelError, "its reference raised ZeroDivisionError")]
    for ref, bindings, error, words in cases:
        m = Model(l1_budget=4000)
        # Promoted to whole L1 buffers, A's KER_ARG would be its L1 buffer, not its tensor.
        m.SetKernelOpts(KER_OPT_NONE, KER_OPT_BUFFER_PROMOTE)
        declare_add(m, ref=ref)
        add_kernel(m, bindings)
        a = np.ones((40, 8), np.int32)
        with pytest.raises(error) as err:
            m.program("K").run(A=a, B=a, C=np.zeros((40, 8), np.int32))
        assert words in str(err.value), (words, str(err.value))


def test_a_failing_cost_function_names_its_kernel():
    m = Model(l1_budget=4000)
    declare_add(m, cost=lambda Width, Height: Width * Height)    # wrong names
    add_kernel(m)
    a = np.ones((40, 8), np.int32)
    with pytest.raises(nk.KernelError, match=r"basic kernel Add .*its cost function failed "
                                             r"\(TypeError.*scalar arguments known statically, "
                                             r"by C name: H, W"):
        m.program("K").run(A=a, B=a, C=np.zeros((40, 8), np.int32))


# -- hostile models: an NpukitError or a program that runs, never a raw exception ---------------

HOSTILE = st.sampled_from([2.5, True, None, "4", 2**70, -1, 0])
OBJ_TYPES = [OBJ_IN_DB, OBJ_OUT_DB, OBJ_IN, OBJ_OUT, OBJ_IN_OUT_DB, OBJ_BUFFER_ONETILE,
             OBJ_BUFFER_DYNTILE, OBJ_IN_DB_NTILED, OBJ_IN_DB_3D, OBJ_OUT_DB_3D,
             OBJ_IN_DB_NTILED_4D, OBJ_IN_DB_L2DB, OBJ_OUT_DB_L2DB]


def copy_all(*args):
    """A basic kernel copying its first pointer's W x H items into every other pointer."""
    ptrs = [a for a in args if isinstance(a, np.ndarray)]
    n = int(np.prod([a for a in args[-2:] if not isinstance(a, np.ndarray)] or [1]))
    for p in ptrs[1:]:
        p[:n] = ptrs[0][:n]


def built(make):
    """``make()``, or None when it raises an NpukitError."""
    try:
        return make()
    except nk.NpukitError:
        return None


@st.composite
def models(draw):
    """A valid model of 1 to 3 arguments, then up to three hostile changes to it."""
    names = ["A", "B", "C"][:draw(st.integers(1, 3))]
    karg = {n: [n, draw(st.sampled_from(OBJ_TYPES)), draw(st.integers(1, 12)),
                draw(st.integers(1, 24)), 4, 0, 0, 0, n] for n in names}
    for n in names:
        if karg[n][1] & O_BUFF:
            karg[n][8] = None
    cargs = {n: ["int *", n, None] for n in names if karg[n][8]}
    lib = [("int *", f"P{n}") for n in names] + [("unsigned int", "W"), ("unsigned int", "H")]
    binds = [K_Arg(n, KER_ARG_TILE) for n in names] + [K_Arg("A", KER_ARG_TILE_W),
                                                       K_Arg("A", KER_ARG_TILE_H)]
    dims = [draw(st.integers(1, 3)), 8, 8, draw(st.integers(1, 3))]
    order = draw(st.sampled_from(list(ORDER_2.values())))
    budget = draw(st.integers(64, 6000))
    for _ in range(draw(st.integers(0, 3))):
        what = draw(st.sampled_from(["karg", "carg", "lib", "bind", "dims", "budget"]))
        n = draw(st.sampled_from(names))
        if what == "karg":
            karg[n][draw(st.integers(1, 8))] = draw(st.one_of(HOSTILE, st.sampled_from(
                OBJ_TYPES + [2, 8, "B", "Z", OBJ_CONSTRAINTS_EVEN])))
        elif what == "carg" and n in cargs:
            cargs[n][draw(st.integers(0, 2))] = draw(st.sampled_from(
                ["short *", "unsigned int", "float *", "void *", 3, "Z", (4,), (0,), ()]))
        elif what == "lib":
            k = draw(st.integers(0, len(lib)))
            lib[k:k + 1] = draw(st.sampled_from([[], [("short *", "P")], [("int", "N")],
                                                 [("int *", "W")], [("unsigned char", "X")]]))
        elif what == "bind":
            k = draw(st.integers(0, len(binds)))
            binds[k:k + 1] = draw(st.sampled_from([[], [Imm(-1)], [Imm(7)], [C_Arg("A")],
                                                   [K_Arg("A", KER_ARG)],
                                                   [K_Arg(n, KER_ARG_TILEINDEX)],
                                                   [K_Arg("Z", KER_ARG_TILE)]]))
        elif what == "dims":
            dims[draw(st.integers(0, 3))] = draw(HOSTILE)
        else:
            budget = draw(HOSTILE)
    return karg, cargs, lib, binds, dims, order, budget


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=models(), ref=st.sampled_from([copy_all, None, lambda *a: a[0][10**6]]))
@pytest.mark.slow
def test_hostile_models_fail_with_npukit_errors_only(model, ref):
    karg, cargs, lib, binds, dims, order, budget = model
    m = built(lambda: Model(l1_budget=budget))
    kerargs = [built(lambda a=a: KerArg(*a)) for a in karg.values()]
    dims = built(lambda: KernelDimensions(*dims))
    if m is None or dims is None or None in kerargs:
        return
    built(lambda: m.LibKernel("L", CALL_SEQUENTIAL, CArgs(*[TCArg(t, n) for t, n in lib]),
                              c_source="", reference=ref))
    built(lambda: m.UserKernel("K", dims, order, TILE_HOR,
                               CArgs(*[TCArg(*c) for c in cargs.values()]),
                               Calls(Call("L", LOC_INNER_LOOP, Bindings(*binds))),
                               KerArgs(*kerargs)))
    if "K" not in m.kernels:
        event("refused when declared")
        return
    prog = built(lambda: m.program("K"))
    if prog is None:
        event("refused when tiled or lowered")
        return
    arrays = {b.name: np.ones(spec.shape, spec.dtype) for b, spec in prog.params}
    event("ran" if built(lambda: prog.run("sim", **arrays)) else "refused when run")


# -- the newer generation is checked by the same rules -----------------------------------------

def add_kernel_newer(m, bindings=TILE_BINDINGS, kerargs=None, spaces=None, cargs=None):
    """C = A + B, the newer generation: 8 x 40 int32 planes walking Tile0 (and D1)."""
    sp = spaces or KernelIterSpace(1, IterTiledSpace(T0))
    m.UserKernel("K", sp, TILE_HOR,
                 cargs or CArgs(TCArg("int *", "A"), TCArg("int *", "B"), TCArg("int *", "C"),
                                TCArg("unsigned int *", "T", shape=(4,))),
                 Calls(Call("Add", LOC_LOOP, Bindings(*bindings))),
                 kerargs or KerArgs(*[KerArg(n, KerArgSpace(1, T0), t, 8, 40, 4, 0, 0, 0, n)
                                      for n, t in (("A", O_IN | O_DB), ("B", O_IN | O_DB),
                                                   ("C", O_OUT | O_DB))]))


NEWER_MISTAKES = [
    (dict(bindings=with_binding(3, C_ArgIndex("T", D1, 1))),
     "call Add (LOC_LOOP), binding 3 C_ArgIndex('T', KER_ITER_D1, 1): the kernel iterates "
     "over KER_ITER_TILE0, not KER_ITER_D1: the index would always be 0"),
    (dict(bindings=with_binding(3, K_ArgPar("A", KER_ARG_PARTILE_SIZE, T0))),
     "KER_ARG_PARTILE_SIZE is the tile of a parametric space of the kernel, named by "
     "K_ArgPar(Name, Sel, Space) (its untiled spaces: none)"),
    (dict(bindings=with_binding(3, K_Arg("A", KER_ARG_PARTILE_SIZE))),
     "KER_ARG_PARTILE_SIZE is the tile of a parametric space"),
    (dict(bindings=with_binding(3, K_Arg("Z", KER_ARG_TILE_W))), "no kernel argument 'Z'"),
    (dict(bindings=with_binding(4, Imm(-1))), "Imm(-1) for H (unsigned int): -1 does not fit"),
    (dict(bindings=with_binding(0, K_Arg("A", KER_ARG_TILE_W))), "passes a scalar to a pointer"),
    (dict(bindings=with_binding(3, UserSymb("Wo"))),
     "UserSymb('Wo'): no user symbol 'Wo' (declared with KernelDimensionsAndUserSymbols: none)"),
    (dict(spaces=KernelIterSpace(2, IterFixedSpace(D1, 2), IterTiledSpace(T0)),
          bindings=with_binding(3, K_Arg("A", KER_ARG_TILEINDEX)),
          kerargs=KerArgs(KerArg("A", KerArgSpace(1, D1), O_IN | O_DB, 8, 40, 4, 0, 0, 0, "A"),
                          KerArg("B", KerArgSpace(1, T0), O_IN | O_DB, 8, 40, 4, 0, 0, 0, "B"),
                          KerArg("C", KerArgSpace(1, T0), O_OUT | O_DB, 8, 40, 4, 0, 0, 0,
                                 "C"))),
     "'A' is not tiled (ObjType 0x401 has no O_TILED, no tiled space)"),
    (dict(kerargs=KerArgs(KerArg("A", KerArgSpace(1, T0), O_IN, 8, 40, 6, 0, 0, 0, "A"))),
     "KerArg 'A' has ItemSize 6 but C argument 'A' (int *) points to int32 (4 B)"),
    (dict(kerargs=KerArgs(KerArg("A", KerArgSpace(1, T0), O_IN, 8, 40, 4, 0, 0, 0, "Nope"))),
     "KerArg 'A' is bound to unknown C argument 'Nope'"),
    (dict(kerargs=KerArgs(KerArg("A", KerArgSpace(1, T0), O_IN, 8, 40, 4, 0, 0, 0, "A"),
                          KerArg("B", KerArgSpace(1, T0), O_IN, 8, 40, 4, 0, 0, 0, "A"))),
     "KerArgs 'A' and 'B' are both bound to C argument 'A'"),
    (dict(kerargs=KerArgs(KerArg("A", KerArgSpace(1, T0), O_IN, 8, 40, 4, 0, 0, 0, None))),
     "is moved to and from L1, so its home is a C argument"),
    (dict(cargs=CArgs(TCArg("int *", "A", shape=(40, 9)), TCArg("int *", "B"),
                      TCArg("int *", "C"))),
     "C argument 'A' declares shape (40, 9) but KerArg 'A' makes it (40, 8)"),
]


@pytest.mark.parametrize("changes, words", NEWER_MISTAKES)
def test_newer_generation_mistakes_fail_when_the_user_kernel_is_declared(changes, words):
    m = Model(l1_budget=4000)
    declare_add(m)
    with pytest.raises(nk.TilingError) as err:
        add_kernel_newer(m, **changes)
    assert words in str(err.value), (words, str(err.value))
    assert "K" not in m.kernels


def test_newer_generation_calls_of_later_basic_kernels_are_checked_at_tiling():
    m = Model(l1_budget=4000)
    add_kernel_newer(m, bindings=TILE_BINDINGS[:3])
    declare_add(m)
    with pytest.raises(nk.TilingError, match=r"basic kernel Add takes 5 arguments .*binds 3"):
        m.tiling("K")


def test_items_of_several_elements_and_the_newer_generation_run():
    """The control of the mistakes above: the newer generation and an item of two int32
    (ItemSize 8 on int *, W counted in items) pass every check and match numpy."""
    for item, w in ((4, 8), (8, 4)):
        m = Model(l1_budget=1000)
        declare_add(m)
        kerargs = KerArgs(*[KerArg(n, KerArgSpace(1, T0), t, w, 40, item, 0, 0, 0, n)
                            for n, t in (("A", O_IN | O_DB), ("B", O_IN | O_DB),
                                         ("C", O_OUT | O_DB))])
        add_kernel_newer(m, kerargs=kerargs, bindings=TILE_BINDINGS[:3] + (
            Imm(8), K_Arg("A", KER_ARG_TILE_H)))
        assert m.tiling("K").spaces["Tile0"].count > 1
        rng = np.random.default_rng(item)
        a, b = rng.integers(-10**6, 10**6, (2, 40, 8), dtype=np.int32)
        for backend in ("sim", "c"):
            c = np.full((40, 8), 77, np.int32)
            m.program("K").run(backend, A=a, B=b, C=c, T=np.zeros(4, np.uint32))
            assert (c == a + b).all(), (item, backend)


def test_bounds_flow_through_newer_generation_kernels():
    """TCArg bounds of the basic kernel: an immediate outside is refused when the program
    is made, a C argument passed through is bounded at run time (as in the older one)."""
    m = Model(l1_budget=1000)
    declare_add(m, cargs=CArgs(TCArg("int *", "In1"), TCArg("int *", "In2"),
                               TCArg("int *", "Out"), TCArg("unsigned int", "W", bounds=(8, 8)),
                               TCArg("unsigned int", "H", bounds=(1, 40))))
    add_kernel_newer(m, bindings=TILE_BINDINGS[:3] + (Imm(9), K_Arg("A", KER_ARG_TILE_H)))
    with pytest.raises(nk.TilingError, match="gets the immediate 9, outside 8..8"):
        m.program("K")
    m = Model(l1_budget=1000)
    declare_add(m, cargs=CArgs(TCArg("int *", "In1"), TCArg("int *", "In2"),
                               TCArg("int *", "Out"), TCArg("unsigned int", "W", bounds=(8, 8)),
                               TCArg("unsigned int", "H", bounds=(1, 40))))
    add_kernel_newer(m, bindings=TILE_BINDINGS[:3] + (K_Arg("A", KER_ARG_TILE_W), C_Arg("N")),
                     cargs=CArgs(TCArg("int *", "A"), TCArg("int *", "B"), TCArg("int *", "C"),
                                 TCArg("unsigned int", "N")))
    prog = m.program("K")
    assert prog.bounds == (("N", 1, 40),)
    a = np.ones((40, 8), np.int32)
    for backend in ("sim", "c"):
        c = np.full((40, 8), 77, np.int32)
        with pytest.raises(nk.ShapeError, match="argument 'N': 41 is outside 1..40"):
            prog.run(backend, A=a, B=a, C=c, N=41)
        assert (c == 77).all()


NEWER_OBJ = [O_IN | O_DB, O_OUT | O_DB, O_IN, O_OUT, O_IN | O_OUT | O_DB, O_BUFF,
             O_BUFF | O_ONETILE, O_IN | O_DB | O_NTILED, O_IN | O_CONST]
NEWER_ITER = {"T0": lambda n: [IterTiledSpace(T0)],
              "D0,T0": lambda n: [IterFixedSpace(D0, n), IterTiledSpace(T0)],
              "par D0,T0": lambda n: [IterParSpace(D0, n, 1), IterTiledSpace(T0)],
              "T1,T0": lambda n: [IterTiledSpace(T1), IterTiledSpace(T0)]}


@st.composite
def newer_models(draw):
    """A newer-generation model of 1 to 3 arguments, then up to three hostile changes."""
    names = ["A", "B", "C"][:draw(st.integers(1, 3))]
    kind = draw(st.sampled_from(sorted(NEWER_ITER)))
    iters = [kind, draw(st.integers(1, 3))]
    keys = {"T0": [T0], "D0,T0": [D0, T0], "par D0,T0": [D0, T0], "T1,T0": [T1]}[kind]
    karg = {n: [n, list(keys), draw(st.sampled_from(NEWER_OBJ)), draw(st.integers(1, 12)),
                draw(st.integers(1, 24)), 4, 0, 0, 0, n] for n in names}
    for n in names:
        if karg[n][2] & O_BUFF:
            karg[n][9] = None
    lib = [("int *", f"P{n}") for n in names] + [("unsigned int", "W"), ("unsigned int", "H")]
    binds = [K_Arg(n, KER_ARG_TILE) for n in names] + [K_Arg("A", KER_ARG_TILE_W),
                                                       K_Arg("A", KER_ARG_TILE_H)]
    budget = draw(st.integers(64, 6000))
    for _ in range(draw(st.integers(0, 3))):
        what = draw(st.sampled_from(["karg", "space", "iter", "bind", "budget"]))
        n = draw(st.sampled_from(names))
        if what == "karg":  # an ObjType, or a small size or a name elsewhere
            k = draw(st.integers(2, 9))
            karg[n][k] = draw(st.one_of(HOSTILE, st.sampled_from(
                NEWER_OBJ if k == 2 else [8, 6, 2, "Z", ""])))
        elif what == "space":
            karg[n][1] = draw(st.sampled_from([[D1, T0], [T0, D0], [T0, T0], [T2], [], [5]]))
        elif what == "iter":
            iters[1] = draw(HOSTILE)
        elif what == "bind":
            k = draw(st.integers(0, len(binds)))
            binds[k:k + 1] = draw(st.sampled_from([
                [], [Imm(-1)], [AT_IGNORE_ARG_BINDING], [K_ArgPar(n, KER_ARG_PARTILE_SIZE, D0)],
                [K_ArgPar(n, KER_ARG_PARTILE_SIZE, T0)], [Ker_IteratorIndex(D0)],
                [UserSymb("Z")], [K_Arg(n, KER_ARG_TILEINDEX)], [K_Arg(n, KER_ARG_TILE_PAD)]]))
        else:
            budget = draw(HOSTILE)
    return karg, iters, lib, binds, budget


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=newer_models())
def test_hostile_newer_generation_models_fail_with_npukit_errors_only(model):
    karg, (kind, n), lib, binds, budget = model
    m = built(lambda: Model(l1_budget=budget))
    iters = built(lambda: KernelIterSpace(*NEWER_ITER[kind](n)))
    kerargs = [built(lambda a=a: KerArg(a[0], KerArgSpace(*a[1]), *a[2:])) for a in karg.values()]
    if m is None or iters is None or None in kerargs:
        return
    built(lambda: m.LibKernel("L", CALL_SEQUENTIAL, CArgs(*[TCArg(t, p) for t, p in lib]),
                              c_source="", reference=copy_all))
    built(lambda: m.UserKernel("K", iters, TILE_HOR,
                               CArgs(*[TCArg("int *", a[0]) for a in karg.values() if a[9]]),
                               Calls(Call("L", LOC_LOOP, Bindings(*binds))), KerArgs(*kerargs)))
    if "K" not in m.kernels:
        event("refused when declared")
        return
    prog = built(lambda: m.program("K"))
    if prog is None:
        event("refused when tiled or lowered")
        return
    arrays = {b.name: np.ones(spec.shape, spec.dtype) for b, spec in prog.params}
    event("ran" if built(lambda: prog.run("sim", **arrays)) else "refused when run")
