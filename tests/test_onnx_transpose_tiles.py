"""Transposes where neither a row of the longer side nor a column of all A x B items fits
L1, tiled in two dimensions (blocks of x x y items, an outer space over the blocks of one
side, the tiled space over the other): the layer generator alone (numpy's transpose as the
oracle, the simulator against the C's bytes, canaries around every output, cycles
counted), then maxvit's [49, 64, 64] permutation through ONNX against ONNX Runtime."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_tiler_k_tiles import against_ort_tiles, run_layer

from npukit import TilingError
from npukit.tiler import Model
from npukit.tiler import layer_generators as G

DTYPES = ("float32", "int8", "int16")


def values(rng, shape, dt: str) -> np.ndarray:
    """Random values over the dtype's range (never all zero, every byte varies)."""
    if dt == "float32":
        return rng.uniform(-100, 100, shape).astype(np.float32)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dt)


def blocks_need(P, A, B, I, dt) -> tuple[int, int]:  # noqa: E741
    """(least, most) L1 budget in which only the block form tiles: one item of I values in
    4 slots of 4-byte pitch, and under the other forms' smallest tiles (min(A, B) x I or
    A x B values, 4 slots) and the tensors whole (In and Out, 2 x P*A*B*I values)."""
    e = np.dtype(dt).itemsize
    least = 4 * (-(-I * e // 4) * 4)
    most = min(4 * min(A, B) * I * e, 4 * A * B * e, 2 * P * A * B * I * e) - 1
    return least, most


def check_blocks(P, A, B, I, dt, budget, seed) -> None:  # noqa: E741
    x = values(np.random.default_rng(seed), (P, A, B, I), dt)
    m = Model(target="gap8", l1_budget=budget)
    G.transpose(m, "T", dt=dt, Planes=P, A=A, B=B, I=I)
    assert m.kernels["T"].kerargs[0].Space is not None  # the block form's spaces
    assert m.tiling("T").l1_used <= budget
    want = np.ascontiguousarray(x.transpose(0, 2, 1, 3)).tobytes()
    outs = {be: run_layer(m, "T", dict(In=x), dt, be) for be in ("sim", "c")}
    assert outs["sim"].tobytes() == outs["c"].tobytes() == want
    prog = m.program("T")
    out = np.empty((P, B, A, I), dt)
    res = prog.run("sim", In=x.reshape(prog.params[0][1].shape),
                   Out=out.reshape(prog.params[1][1].shape))
    assert res.cycles > 0
    # Every value crosses L1 once in and once out: no block is read or written twice.
    assert res.report.bytes_moved["L1"] == 2 * x.nbytes


@pytest.mark.slow  # compiles C per example
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(P=st.integers(1, 3), A=st.integers(2, 40), B=st.integers(2, 40), I=st.integers(1, 24),  # noqa: E741
       dt=st.sampled_from(DTYPES), frac=st.floats(0, 1), seed=st.integers(0, 2 ** 31))
def test_a_transpose_neither_side_of_fits_is_tiled_in_blocks(P, A, B, I, dt, frac, seed):  # noqa: E741
    """[P, A, B, I] -> [P, B, A, I] under a budget that holds one item but no row of the
    shorter side, no column of all items and not the tensors: blocks of items, the bytes of
    numpy's transpose, sim == C, nothing written outside the output."""
    least, most = blocks_need(P, A, B, I, dt)
    assume(least <= most)
    check_blocks(P, A, B, I, dt, int(least + frac * (most - least)), seed)


@pytest.mark.slow  # compiles C
@pytest.mark.parametrize("dt", DTYPES)
def test_one_item_per_block_at_the_least_budget(dt):
    """Prime sides (no block but one item divides them) at the least budget that holds one
    item: blocks of 1 x y items still tile."""
    least, _ = blocks_need(2, 13, 11, 5, dt)
    check_blocks(2, 13, 11, 5, dt, least, 3)


def test_a_transpose_whose_item_does_not_fit_is_refused_naming_the_sizes_and_the_budget():
    m = Model(target="gap8", l1_budget=1000)
    with pytest.raises(TilingError, match=r"^T: transposing \[1, 9, 7, 70\] into \[1, 7, 9, "
                                          r"70\] needs at least one item of I = 70 values "
                                          r"\(280 B\) in 4 slots of L1, over the budget of "
                                          r"1000 B"):
        G.transpose(m, "T", dt="float32", Planes=1, A=9, B=7, I=70)


@pytest.mark.slow  # ONNX Runtime, two back ends
def test_maxvit_window_permutation_matches_onnx_runtime():
    """maxvit_t's [49, 64, 64] Transpose (perm [0, 2, 1, 3]: 49 x 64 items of 64 values),
    refused before at a 48,000 B L1 (50,176 B for its smallest tile), in blocks: the bytes of
    ONNX Runtime on the simulator, the host C and the tile schedule's C."""
    pytest.importorskip("onnxruntime")
    from onnx_helpers import model, node

    x = values(np.random.default_rng(7), (1, 49, 64, 64), "float32")
    mod = model([node("Transpose", ["x"], ["y"], perm=[0, 2, 1, 3])], {"x": x}, ["y"])
    g, stats, _ = against_ort_tiles(mod, {"x": x}, l1_budget=48000)
    assert stats["c"]["y"].exact == 1.0
    (layer,) = g.layers
    assert g.model.kernels[layer.name].kerargs[0].Space is not None


# -- torch.roll as the exporters write it: one layer per axis ----------------------------------

def roll_model(x: np.ndarray, cuts: list[tuple[int, int, int]], axes=(1, 2)):
    """Per axis, Slices of ``x`` along it ([begin, end) per cut, INT64_MAX for the end as the
    exporters write it) concatenated along it in the order given."""
    from onnx_helpers import model, node

    nodes, inits, cur = [], {}, "x"
    for ax in axes:
        parts = []
        for k, (b, e) in enumerate(cuts):
            names = [f"a{ax}{k}{w}" for w in "bea"]
            inits.update(zip(names, (np.array([v], np.int64) for v in (b, e, ax))))
            nodes.append(node("Slice", [cur, *names], [f"s{ax}{k}"]))
            parts.append(f"s{ax}{k}")
        nodes.append(node("Concat", parts, [f"r{ax}"], axis=ax))
        cur = f"r{ax}"
    return model(nodes, {"x": x}, [cur], inits), cur


@pytest.mark.slow  # ONNX Runtime, two back ends
@pytest.mark.parametrize("dt", ["float32", "int8"])
def test_a_roll_by_slices_and_concat_is_one_layer_per_axis(dt):
    """torch.roll(x, (-3, -3), (1, 2)) on a [1, 14, 14, 24] channels-last tensor (a Swin
    block's shifted windows): one wrap layer per axis, ONNX Runtime's bytes."""
    pytest.importorskip("onnxruntime")
    x = values(np.random.default_rng(4), (1, 14, 14, 24), dt)
    m, _ = roll_model(x, [(3, 2 ** 63 - 1), (0, 3)])
    g, stats, _ = against_ort_tiles(m, {"x": x})
    assert [i.ops for i in g.layers] == ["Slice+Concat"] * 2
    assert all(s.exact == 1.0 for s in stats["c"].values())


@pytest.mark.slow  # ONNX Runtime, two back ends
def test_slices_concatenated_that_are_no_roll_stay_crops():
    """Pieces that skip values ([4, 9) then [0, 3) of 9) or repeat them are no rotation:
    a crop per piece and a concat, ONNX Runtime's bytes."""
    pytest.importorskip("onnxruntime")
    x = values(np.random.default_rng(5), (2, 9, 5), "float32")
    for cuts in ([(4, 9), (0, 3)], [(4, 9), (0, 5), (2, 3)]):
        m, _ = roll_model(x, cuts, axes=(1,))
        g, stats, _ = against_ort_tiles(m, {"x": x})
        assert "Slice+Concat" not in [i.ops for i in g.layers]
        assert all(s.exact == 1.0 for s in stats["c"].values())


def test_fixed_spaces_inside_the_lines_only_of_a_horizontally_tiled_argument():
    """KerArgSpace(T0, D0) puts D0's planes inside the tiled lines: refused, naming the
    argument, for a vertically tiled argument or a parametric space after the tiled one."""
    from npukit.tiler import (
        D0,
        O_DB,
        O_IN,
        OBJ_CONSTRAINTS_TILE_VER,
        T0,
        TILE_HOR,
        Calls,
        CArgs,
        IterFixedSpace,
        IterParSpace,
        IterTiledSpace,
        KerArg,
        KerArgs,
        KerArgSpace,
        KernelIterSpace,
        TCArg,
    )

    for d0, con in ((IterFixedSpace(D0, 4), OBJ_CONSTRAINTS_TILE_VER),
                    (IterParSpace(D0, 4, 2), 0)):
        m = Model(target="gap8", l1_budget=4096)
        with pytest.raises(TilingError, match=r"K: KerArg 'In' walks \('Tile0', 'D0'\): after "
                                              r"its tiled space only fixed spaces"):
            m.UserKernel("K", KernelIterSpace(2, d0, IterTiledSpace(T0)), TILE_HOR,
                         CArgs(TCArg("int *", "In")), Calls(),
                         KerArgs(KerArg("In", KerArgSpace(2, T0, D0), O_IN | O_DB, 8, 30, 4, 0,
                                        con, 0, "In")))
