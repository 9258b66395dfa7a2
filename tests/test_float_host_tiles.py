"""The host schedule of a float32 convolution whose filter is large beside its plane
(squeezenet1_1's last, 512 -> 1000 features at 13x13): tiles of output features with every
input feature and whole planes (``layer_generators_conv.FLOAT_CUT_OUT``), where bands of
rows read the whole filter again each band. The same sums in the same order: the host C's
bytes are the simulator's (canaries: every output written), within 1e-4 of ONNX Runtime's
largest output.
"""

from __future__ import annotations

import numpy as np
from onnx_helpers import model, node

import npukit.onnx
from npukit.onnx.check import ort_run

CANARY = np.float32(-7.25e30)


def test_large_filters_take_whole_planes_of_every_input_feature():
    r = np.random.default_rng(3)
    cin, cout, hw = 64, 800, 13  # per output feature 13x13 x (accumulators, outputs) + filter
    w = (r.normal(size=(cout, cin, 1, 1)) / 8).astype(np.float32)
    b = r.normal(size=cout).astype(np.float32)
    x = r.normal(size=(1, cin, hw, hw)).astype(np.float32)
    m = model([node("Conv", ["x", "w", "b"], ["c"]), node("Relu", ["c"], ["y"])], {"x": x},
              ["y"], {"w": w, "b": b})
    g = npukit.onnx.load(m, l1_budget=48000, l2_budget=8 << 20, l3_budget=64 << 20)
    tiling = g.host_graph().layers[0].tiling
    assert tiling.n_tiles == 1 and tiling.tile == hw  # whole planes, not bands of rows
    assert tiling.args["In"].size == cin * hw * hw * 4  # every input feature at once
    got = {}
    for backend in ("sim", "c"):
        out = np.full((1, cout, hw, hw), CANARY)
        g.run(backend, x=x, y=out)
        got[backend] = out
    assert (got["sim"] != CANARY).all()
    assert got["c"].tobytes() == got["sim"].tobytes()
    ref, _ = ort_run(m, {"x": x})
    assert np.abs(got["c"] - ref["y"]).max() <= 1e-4 * np.abs(ref["y"]).max()
