"""Rows wider than L1: a ``Gather`` whose one fetched row does not fit (Swin's q, k, v taken
from the [3, ..] qkv tensor by a scalar index) and a broadcast ``Add`` whose one row of each
operand does not fit (Swin's shift mask added to [.., 49 x 49] scores) tile the row itself,
one row at a time in tiles of its columns. Models built with onnx.helper, run on both back
ends into poisoned outputs; a Gather and a float Add are exact, so they equal ONNX Runtime's
outputs bit for bit."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx_helpers import against_ort  # noqa: E402
from ops_helpers import check_ops, model, node, run_poisoned  # noqa: E402

import npukit  # noqa: E402
import npukit.onnx  # noqa: E402

RNG = np.random.default_rng(411)
BUDGET = 4000
SMALL = {"target": "gap8", "l1_budget": BUDGET, "l2_budget": 256 * 1024}
QUICK = settings(max_examples=5, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow])


def layer_form(g):
    """(the layer's kernel walks spaces: the column form, the L1 bytes its tiles use)."""
    (info,) = g.layers
    kernel, tiling = g.model.kernels[info.name], g.model.tiling(info.name)
    return any(a.Space is not None for a in kernel.kerargs), tiling.l1_used


def exact(m, inputs, **kw):
    g, out, ref = check_ops(m, inputs, **kw)
    for k, want in ref.items():
        assert out[k].tobytes() == want.tobytes(), k
    return g


def test_swin_qkv_selected_by_a_scalar_gather_tiles_the_row():
    """q, k, v as both exporters write them: ``Gather(qkv, i)`` of a scalar index on axis 0
    of [3, windows, heads, N, d]; one row is 2,400 values (9,600 B) over a 4,000 B budget."""
    qkv = RNG.normal(size=(3, 4, 2, 10, 30)).astype(np.float32)
    nodes = [node("Gather", ["qkv", f"i{k}"], [f"y{k}"], axis=0) for k in range(3)]
    m = model(nodes, {"qkv": qkv}, ["y0", "y1", "y2"],
              {"i0": np.int64(0), "i1": np.int64(1), "i2": np.int64(-1)})
    g = exact(m, {"qkv": qkv}, **SMALL)
    for info in g.layers:
        assert any(a.Space is not None for a in g.model.kernels[info.name].kerargs)
        assert g.model.tiling(info.name).l1_used <= BUDGET
    assert g.run("sim", qkv=qkv).cycles > 0


@QUICK
@given(outer=st.integers(1, 3), d=st.integers(1, 4), k=st.integers(1, 3),
       inner=st.integers(300, 1500), runtime=st.booleans())
def test_gather_of_any_row_width_equals_onnx_runtime(outer, d, k, inner, runtime):
    """Gather on axis 1 of [outer, d, inner] (constant or run-time indices, negative ones
    from the end): whole rows when a row fits the two slots of the output, tiles of columns
    when one row alone does not fit."""
    x = RNG.normal(size=(outer, d, inner)).astype(np.float32)
    i = RNG.integers(-d, d, size=k).astype(np.int64)
    ins, inits = ({"x": x, "i": i}, {}) if runtime else ({"x": x}, {"i": i})
    m = model([node("Gather", ["x", "i"], ["y"], axis=1)], ins, ["y"], inits)
    g = exact(m, ins, **SMALL)
    cols, used = layer_form(g)
    row = inner * x.itemsize
    assert used <= BUDGET
    assert cols if row > BUDGET else not cols or 2 * row + 64 > BUDGET


def test_gather_nd_rows_wider_than_l1_per_batch():
    """GatherND with ``batch_dims=1``: each batch's coordinates name a row of 2,000 values."""
    x = RNG.normal(size=(2, 3, 4, 2000)).astype(np.float32)
    i = np.array([[[1, 2], [0, -1], [2, 3]], [[-3, 3], [1, 0], [1, 0]]], np.int64)
    m = model([node("GatherND", ["x", "i"], ["y"], batch_dims=1)], {"x": x, "i": i}, ["y"])
    g = exact(m, {"x": x, "i": i}, **SMALL)
    assert layer_form(g)[0]


def test_swin_shift_mask_add_tiles_the_row():
    """Scores [1, windows, heads, N*N] plus the mask [1, windows, 1, N*N] (0 or -100): a row
    of each operand is 1,200 values, three of them in two slots over the 4,000 B budget."""
    s = RNG.normal(size=(1, 4, 3, 1200)).astype(np.float32)
    mask = np.where(RNG.random((1, 4, 1, 1200)) < 0.5, -100.0, 0.0).astype(np.float32)
    m = model([node("Add", ["s", "mask"], ["y"])], {"s": s, "mask": mask}, ["y"])
    g = exact(m, {"s": s, "mask": mask}, **SMALL)
    cols, used = layer_form(g)
    assert cols and used <= BUDGET
    assert g.run("sim", s=s, mask=mask).cycles > 0


@pytest.mark.parametrize("shape_b", [(1, 3, 1), (2, 1, 1200)], ids=["per-row", "per-plane"])
def test_operands_broadcast_along_the_cut_row_in_the_column_form(shape_b):
    """The column form with B one value per row (the same for every plane) or one row per
    plane: B walks only the spaces it varies along."""
    a = RNG.normal(size=(2, 3, 1200)).astype(np.float32)
    b = RNG.normal(size=shape_b).astype(np.float32)
    m = model([node("Mul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    g = exact(m, {"a": a, "b": b}, **SMALL)
    assert layer_form(g)[0]


@pytest.mark.parametrize("first", ["scores", "mask"])
def test_quantized_add_of_wide_rows_is_bit_exact(first):
    """The shift-mask Add quantized (DequantizeLinear, Add, QuantizeLinear, which ONNX
    Runtime runs as QLinearAdd; the mask, 0 or about -100, first or second) in the column
    form, bit for bit as ONNX Runtime."""
    shapes = {"scores": (1, 4, 3, 1500), "mask": (1, 4, 1, 1500)}
    order = [first, *(k for k in shapes if k != first)]
    nodes = [node("DequantizeLinear", [k, f"{k}_s", f"{k}_z"], [f"{k}_f"]) for k in order]
    nodes += [node("Add", [f"{k}_f" for k in order], ["sum"]),
              node("QuantizeLinear", ["sum", "y_s", "y_z"], ["y"])]
    params = {"scores": (0.043, 131), "mask": (0.39, 255), "y": (0.41, 247)}  # (scale, zp)
    inits = {f"{k}_{w}": np.array(v, np.float32 if w == "s" else np.uint8)
             for k, sz in params.items() for w, v in zip("sz", sz)}
    ins = {"scores": RNG.integers(0, 256, size=shapes["scores"]).astype(np.uint8),
           "mask": np.where(RNG.random(shapes["mask"]) < 0.5, 0, 255).astype(np.uint8)}
    m = model(nodes, ins, ["y"], inits)
    g, _, outs = against_ort(m, ins, backends=("sim", "c"), exact=True, **SMALL)
    assert layer_form(g)[0]  # one layer, in the column form
    assert np.array_equal(run_poisoned(g, ins, "c")["y"], outs["c"]["y"])
    assert len(np.unique(outs["c"]["y"])) > 20  # not a constant or saturated output


@QUICK
@given(planes=st.integers(1, 3), rows=st.integers(1, 3), cols=st.integers(200, 900),
       a_axes=st.sets(st.integers(0, 2)), b_axes=st.sets(st.integers(0, 2)),
       op=st.sampled_from(["Add", "Mul", "Sub"]))
def test_broadcast_binary_of_any_row_width_equals_onnx_runtime(planes, rows, cols, a_axes,
                                                               b_axes, op):
    """Each operand broadcast along any of the three axes of [planes, rows, cols] (size 1
    there): whole rows when a row of each operand fits two slots, else tiles of columns."""
    full = (planes, rows, cols)

    a, b = (RNG.normal(size=[1 if k in axes else n for k, n in enumerate(full)])
            .astype(np.float32) for axes in (a_axes, b_axes))
    m = model([node(op, ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    g = exact(m, {"a": a, "b": b}, **SMALL)
    assert layer_form(g)[1] <= BUDGET


def test_a_budget_without_room_for_one_element_per_slot_is_refused():
    """Even the column form needs one value of each argument in each of its slots."""
    x = RNG.normal(size=(3, 500)).astype(np.float32)
    m = model([node("Gather", ["x", "i"], ["y"], axis=0)], {"x": x}, ["y"],
              {"i": np.int64(1)})
    with pytest.raises(npukit.NpukitError, match="budget"):
        npukit.onnx.load(m, target="gap8", l1_budget=4, l2_budget=64 * 1024)
