"""The ``npukit demo transformers`` section: a BERT-like encoder and a GPT-2-like decoder,
written as PyTorch's exporters write them (token ids, an attention mask, position ids from
``Range``), imported and planned for GAP8, run in C and on the simulator, checked against
ONNX Runtime; and BERT's 30,522-row word embedding left in flash, its rows fetched."""

from __future__ import annotations

import time

import numpy as np

from .demo_checks import Check, heading
from .demo_models import c_against_ort

_NEEDS_ONNX = '  (needs the onnx and onnxruntime packages: pip install "npukit[onnx]")'
_BUDGETS = {"target": "gap8", "l1_budget": 48000, "l2_budget": 300 * 1024}


def transformers() -> list[Check]:
    """BERT- and GPT-2-like models (2 layers, hidden 128, 32 tokens, 4 heads) from token ids
    and an attention mask: layers, planning time, C against ONNX Runtime and the simulator;
    then an embedding lookup in a table 17 times the L1 budget. Returns its checks."""
    heading("Transformers as PyTorch exports them: BERT and GPT-2 with attention masks")
    names = [f"{m}: {what}" for m in ("BERT-like", "GPT-2-like")
             for what in ("C = ONNX Runtime", "C = sim")] + \
        ["embedding: 30,522-row table left in flash, rows fetched"]
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        print(_NEEDS_ONNX)
        return [Check(n, None) for n in names]
    from . import transformer_models as tm
    from .machine import target
    from .onnx import load

    print(f"  {target('gap8').costs.caveat()}")
    checks = []
    for title, build, mask in (("BERT-like", tm.bert, "where"), ("GPT-2-like", tm.gpt2, "arith")):
        rng = np.random.default_rng(21)
        m, feed = build(rng, mask), tm.inputs(rng)
        start = time.perf_counter()
        g = load(m, **_BUDGETS)
        planned = time.perf_counter() - start
        sim = g.run("sim", **feed)
        print(f"  {title} ({mask} mask): {len(m.graph.node)} ONNX nodes -> {len(g.layers)} "
              f"layers, imported and planned in {planned:.1f} s; {sim.cycles:,} simulated "
              f"GAP8 cycles")
        checks += c_against_ort(title, g, m, feed, sim.outputs["y"])
    return checks + [_embedding()]


def _embedding() -> Check:
    """A Gather of 32 token ids from BERT's 30,522 x 128 float32 vocabulary (15.6 MB): the
    table stays in flash and only the 32 rows reach L1."""
    from onnx import TensorProto
    from onnx import helper as h
    from onnx import numpy_helper as nh

    from .onnx import load

    rng = np.random.default_rng(22)
    table = rng.normal(size=(30_522, 128)).astype(np.float32)
    ids = rng.integers(-30_522, 30_522, (1, 32)).astype(np.int64)  # negatives count from the end
    m = h.make_model(h.make_graph(
        [h.make_node("Gather", ["table", "ids"], ["y"], axis=0)], "embedding",
        [h.make_tensor_value_info("ids", TensorProto.INT64, [1, 32])],
        [h.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 128])],
        [nh.from_array(table, "table")]), opset_imports=[h.make_opsetid("", 17)])
    g = load(m, **_BUDGETS)
    home = next(t.memory for t in g.tensors.values() if t.size == table.nbytes)
    l1 = g.memory["L1"].dynamic
    sim = g.run("sim", ids=ids)
    right = sim.outputs["y"].tobytes() == table[ids].tobytes()
    print(f"  embedding: a {table.nbytes:,} B table kept in {home}; the layer takes {l1:,} B "
          f"of L1 (budget {_BUDGETS['l1_budget']:,} B); 32 rows fetched in {sim.cycles:,} "
          f"simulated cycles, {'every row right' if right else 'WRONG ROWS'}")
    return Check("embedding: 30,522-row table left in flash, rows fetched",
                 right and home == "L3_FLASH" and l1 <= _BUDGETS["l1_budget"])
