"""The float32 feature tile vectorised across output features (``conv_channels``: 16 output
features to a vector, the input broadcast). Each output is checked against the
definition's float32 sums in numpy (input features in order, each one's live taps in
(fy, fx) order, a tap on padding not added: ``test_conv_float_blocks.oracles``) bit for bit,
for the C and for the kernel's numpy reference (the simulator's), and within float32
rounding of the float64 sums. Odd widths and heights, strides 1 and 2, padding, 1x1, 3x3,
5x5, 7x7 and dilated filters, output features not a multiple of 16 (and more than a group
of 64), input features not a multiple of the transposed chunk, bands of rows, tiles in the
middle of a plane; canaries after the last plane.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_conv_float_blocks import CANARY, compiled, oracles, run, tile

from npukit.tiler.basic_kernels import convolution


@pytest.mark.parametrize("W, rows, F, S, pad, in_feat, out_feat", [
    (7, 7, 3, 1, 1, 20, 40),     # 7x7: rows of 1 + 4 + 1 + 1 outputs; 40 features, 24 lanes idle
    (14, 14, 3, 1, 1, 17, 70),   # 14x14: 6 + 6 inside; 70 features: a group of 64, one of 6
    (13, 13, 3, 2, 1, 33, 16),   # 13 -> 7 at stride 2; 33 input features: 3 chunks of 16
    (14, 7, 1, 2, 0, 150, 33),   # 1x1 at stride 2: 150 input features, chunks of 144
    (25, 14, 3, 1, 1, 3, 18),    # rows of 25: bands of 10 rows (256 outputs at most)
    (31, 5, 3, 2, 0, 5, 16),     # stride 2, no padding: 15 outputs a row, every tap inside
    (37, 6, 7, 2, 3, 3, 20),     # 7x7 at stride 2 (a first layer): 3 chunks of 2 input features
    (58, 5, 3, 1, 1, 2, 16),     # rows of 58: bands of 4 rows, 9 blocks of 6 inside a row
])
def test_channels_match_the_definition(W, rows, F, S, pad, in_feat, out_feat):
    """Whole planes (the top and bottom padding) and a tile of rows in the middle of a plane
    (its first lines not the plane's), on one core, on three and on eight (the cores share
    the features 32 at a time: some take none)."""
    Wo = (W + 2 * pad - F) // S + 1
    run(tile(W, Wo, rows, F, S, pad), in_feat, out_feat, 1, seed=W + rows)
    mid = tile(W, Wo, 3, F, S, pad, in_row0=2 * S, out_row0=2, hreal=2 * S + 3 * S + F)
    run(mid, in_feat, out_feat, 1, seed=W * F)
    run(tile(W, Wo, rows, F, S, pad), in_feat, 3 * out_feat, 3, seed=S + F)
    run(tile(W, Wo, rows, F, S, pad), in_feat, 64 + out_feat, 8, seed=S * F)


def test_taps_on_padding_add_nothing():
    """Accumulators of -0.0 stay -0.0 where every live tap adds -0.0, and infinite weights
    on the taps that fall on padding never reach an output (an added 0 * inf would be NaN):
    the skipped taps are not added, as the definition says."""
    p = tile(7, 7, 7, 3, 1, 1)
    in_feat, out_feat, tile_n = 4, 32, 49
    rng = np.random.default_rng(5)
    In = rng.uniform(-1, 1, in_feat * p["InRows"] * p["W"]).astype(np.float32)
    In[rng.random(In.size) < 0.3] = 0.0
    Filter = rng.uniform(-1, 1, (out_feat, in_feat, 3, 3)).astype(np.float32)
    Filter[::2, :, 0, 0] = np.inf  # tap (0, 0): on padding for the first row and column
    Filter = Filter.reshape(-1)
    acc = np.full(out_feat * tile_n + 40, CANARY)
    acc[:out_feat * tile_n] = -0.0
    want, _ = oracles(p, In, Filter, acc, in_feat, out_feat)
    kernel = convolution.layer_conv("float32", "float32", 8, planes=True)
    given = dict(p, In=In, Filter=Filter, InFeat=in_feat, OutFeat=out_feat)
    compiled(1)(*[acc if n == "Acc" else given[n] for _, n in kernel.args])
    n = out_feat * tile_n
    assert np.array_equal(acc[:n].view(np.int32), want.view(np.int32))
    assert np.isfinite(acc[:n].reshape(out_feat, 7, 7)[::2, 0, :]).all()  # no 0 * inf there
    assert np.all(acc[n:] == CANARY)


def test_dilated_filters_take_the_general_copy():
    """A dilated 3x3 filter (no copy of its own: the loops as written) and a 5x5 one."""
    p = tile(11, 7, 7, 3, 1, 2)
    run(dict(p, Dx=2, Dy=2, InRows=11, Hreal=11, PadT=2, InRow0=2), 6, 18, 1, seed=3)
    run(tile(12, 12, 4, 5, 1, 2), 7, 17, 1, seed=4)
