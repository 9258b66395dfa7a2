"""Kernels too large for the target or the L1 budget are refused at once, before the solver
enumerates tile sizes (a huge tensor has millions of them), with the argument, its sizes and
the budget named."""

import pytest

import npukit.tiler.solver as solver
from npukit import CapacityError, TilingError
from npukit.tiler import Model
from npukit.tiler import layer_generators as G


def relu(m, rows: int, cols: int) -> None:
    G.unary(m, "Big", in_dt="float32", out_dt="float32", Rows=rows, Cols=cols, Op=0)


@pytest.fixture
def layouts(monkeypatch):
    """Counts the tilings the solver lays out (each one costs time linear in its tiles)."""
    calls = []
    layout = solver._layout

    def counted(*args, **kw):
        calls.append(args[3])
        return layout(*args, **kw)

    monkeypatch.setattr(solver, "_layout", counted)
    return calls


def test_an_argument_larger_than_the_largest_memory_is_refused_before_tiling(layouts):
    m = Model(target="gap8", l1_budget=48000)
    relu(m, 2 ** 22, 512)  # 2**31 float32 values: 8 GiB
    with pytest.raises(CapacityError, match=r"Big: argument 'In' \(4194304 x 512 x 4 B = "
                                            r"8589934592 B\) is larger than the largest "
                                            r"memory of gap8, L3_FLASH of 67108864 B"):
        m.tiling("Big")
    assert layouts == []


def test_a_line_over_the_l1_budget_fails_without_enumerating_tile_sizes(layouts):
    m = Model(target="gap8", l1_budget=8000)
    relu(m, 1024, 4096)  # one line is 16 KiB; 1024 tile sizes to try
    with pytest.raises(TilingError, match=r"Big: argument 'In' can never fit: its smallest "
                                          r"tile, 1 line\(s\) of 4096 x 4 B = 16384 B x 1 "
                                          r"slot\(s\), exceeds the L1 budget of 8000 B"):
        m.tiling("Big")
    assert len(layouts) <= 2  # the whole tensor promoted, then the smallest tile


def test_a_kernel_that_fits_is_tiled_as_before():
    m = Model(target="gap8", l1_budget=8000)
    relu(m, 64, 100)  # 400 B a line, 2 arguments of 2 slots: 1600 B per line of tile
    t = m.tiling("Big")
    tile = 8000 // 1600
    assert (t.n_tiles, t.tile, t.last_tile) == (-(-64 // tile), tile, 64 % tile)
