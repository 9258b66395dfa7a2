"""Attention at the scale of a transformer: a batched MatMul ([1, heads, T, d] x [1, heads,
d, T]) is one layer iterating its products, bit for bit what one layer per head computes,
within float32 rounding of float64 numpy and ONNX Runtime; a ViT-shaped model (the
builder of benchmarks/onnx_plan.py) planned under an L2 budget that sends activations to
L3 runs as ONNX Runtime does, the simulator equal to the C. (Planning speed is measured by
benchmarks/onnx_plan.py, never asserted here.)"""

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402
from onnx_helpers import against_ort  # noqa: E402

import npukit.onnx  # noqa: E402

HEADS, T, D = 3, 7, 5


def attention(per_head: bool):
    """softmax(Q K^T / sqrt(D)) V over HEADS heads: both products batched, or (``per_head``)
    each head's matrices cut out by Slice, multiplied in 2-D and concatenated."""
    n = h.make_node
    inits = {"scale": np.array(1 / np.sqrt(D), np.float32)}
    nodes = [n("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2])]

    def matmul(a: str, b: str, out: str) -> None:
        if not per_head:
            nodes.append(n("MatMul", [a, b], [out]))
            return
        parts = []
        for i in range(HEADS):
            inits[f"from{i}"], inits[f"to{i}"] = np.array([i], np.int64), np.array([i + 1],
                                                                                np.int64)
            inits["ax"] = np.array([1], np.int64)
            nodes.extend([n("Slice", [a, f"from{i}", f"to{i}", "ax"], [f"{out}_a{i}"]),
                          n("Slice", [b, f"from{i}", f"to{i}", "ax"], [f"{out}_b{i}"]),
                          n("MatMul", [f"{out}_a{i}", f"{out}_b{i}"], [f"{out}_{i}"])])
            parts.append(f"{out}_{i}")
        nodes.append(n("Concat", parts, [out], axis=1))

    matmul("q", "kt", "s0")
    nodes += [n("Mul", ["s0", "scale"], ["s"]), n("Softmax", ["s"], ["p"], axis=-1)]
    matmul("p", "v", "y")
    shape = [1, HEADS, T, D]
    g = h.make_graph(nodes, "attention",
                     [h.make_tensor_value_info(x, TensorProto.FLOAT, shape) for x in "qkv"],
                     [h.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                     [nh.from_array(v, k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def test_batched_matmul_is_one_layer_bit_exact_with_one_per_head():
    rng = np.random.default_rng(39)
    ins = {x: rng.normal(size=(1, HEADS, T, D)).astype(np.float32) for x in "qkv"}
    outs = {}
    for per_head in (False, True):
        g = npukit.onnx.load(attention(per_head), l1_budget=4000)
        y = np.full((1, HEADS, T, D), np.nan, np.float32)  # a canary in every element
        g.run("c", **ins, y=y)
        assert not np.isnan(y).any()
        outs[per_head] = y
        products = [info for info in g.layers if info.ops == "MatMul"]
        assert len(products) == (2 * HEADS if per_head else 2)
    assert outs[False].tobytes() == outs[True].tobytes()
    q, k, v = (ins[x].astype(np.float64) for x in "qkv")
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(D)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v
    assert np.abs(outs[False] - want).max() <= 1e-6 * np.abs(want).max()


@pytest.mark.slow
def test_vit_planned_with_activations_in_l3_matches_onnx_runtime():
    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    from onnx_plan import vit

    rng = np.random.default_rng(40)
    m = vit(size=32, patch=8, hidden=48, heads=4, blocks=2, classes=10)
    x = rng.normal(size=(1, 3, 32, 32)).astype(np.float32)
    g, stats, outs = against_ort(m, {"x": x}, ("c", "sim"), l1_budget=8000,
                                 l2_budget=24 * 1024)
    assert stats["c"]["head"].max_rel <= 1e-5 and np.std(outs["c"]["head"]) > 0.1
    assert sum(info.ops == "MatMul" and "products" in info.detail for info in g.layers) == 4
    plan = g.graph
    assert plan.memory["L3"].dynamic > 0 and any(layer.streamed for layer in plan.layers)


def test_resumed_allocation_is_the_whole_run():
    """The planner's allocation resumed from a run over other items (``planner.run`` with a
    base) places every item where a whole run does, and its size is the whole run's."""
    from dataclasses import replace

    from npukit.tiler.planner import Item, peak, run

    rng = np.random.default_rng(41)
    resumed = 0
    for _ in range(60):
        starts = rng.integers(0, 40, 50)
        items = [Item(f"t{i}", int(f), int(f + rng.integers(0, 5)), int(rng.integers(1, 300)))
                 for i, f in enumerate(starts)]
        base, _ = run(items)
        changed = list(items)
        for k in rng.choice(len(items), 2, replace=False):  # smaller, or moved later
            it = changed[k]
            changed[k] = replace(it, size=it.size // 2) if rng.random() < 0.5 else \
                replace(it, first=it.first + 1, last=it.last + 1)
        want, want_size = run(changed)
        got, got_size = run(changed, base=base)
        resumed += peak(changed) == base.cap
        assert (got.offsets, got.order, got_size) == (want.offsets, want.order, want_size)
    assert resumed >= 10  # runs that did resume (the same peak), not only whole ones
