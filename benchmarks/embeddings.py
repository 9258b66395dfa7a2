"""Embedding lookups as an NPU runs them: ONNX ``Gather`` on tables from 1,000 to BERT's
30,522 rows of 128 floats, the table left where the plan keeps it and only the rows named
fetched into L1; and a ``Gather`` with 769 constant indices (the dynamo export of ConvNeXt's
``as_strided``) as one layer.

    python benchmarks/embeddings.py [--rounds N]

Per table: where the plan keeps it, the L1 the layer takes, the cycles npukit's model
predicts for 32 token ids (the same ids for every table), and the host C's wall time
(median of ``--rounds`` interleaved runs, every table in the same loop). Goals: the
predicted cycles do not grow with the table; the layer's L1 stays within the budget however
large the table; 769 constant indices are one layer. Every run is checked against numpy's
``take`` first.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from onnx_helpers import model, node  # noqa: E402

import npukit.onnx  # noqa: E402

BUDGETS = {"target": "gap8", "l1_budget": 48000, "l2_budget": 300 * 1024}
HIDDEN, TOKENS = 128, 32


def embedding(rows: int, rng):
    table = rng.normal(size=(rows, HIDDEN)).astype(np.float32)
    m = model([node("Gather", ["emb", "ids"], ["y"], axis=0)],
              {"ids": np.zeros((1, TOKENS), np.int64)}, ["y"], {"emb": table})
    return table, npukit.onnx.load(m, **BUDGETS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 1000, size=(1, TOKENS)).astype(np.int64)
    ids[0, :4] = [-1, 5, 6, 7]  # a negative index and a run of consecutive rows
    cases = {rows: embedding(rows, rng) for rows in (1000, 10000, 30522)}
    cycles, walls = {}, {rows: [] for rows in cases}
    for rows, (table, g) in cases.items():
        res = g.run("sim", ids=ids)
        assert np.array_equal(res.outputs["y"][0], np.take(table, ids[0], axis=0))
        assert np.array_equal(g.run("c", ids=ids).outputs["y"], res.outputs["y"])
        cycles[rows] = res.cycles
    for _ in range(args.rounds):
        for rows, (_, g) in cases.items():
            t = time.perf_counter()
            g.run("c", ids=ids)
            walls[rows].append(time.perf_counter() - t)
    print(f"{'rows':>7} {'table MB':>9} {'lives in':>9} {'L1 B':>6} {'cycles':>8} "
          f"{'C run ms':>9}")
    for rows, (table, g) in cases.items():
        home = [t.memory for t in g.tensors.values() if t.size == table.nbytes]
        print(f"{rows:>7} {table.nbytes / 1e6:>9.2f} {home[0]:>9} "
              f"{g.memory['L1'].dynamic:>6} {cycles[rows]:>8} "
              f"{1e3 * statistics.median(walls[rows]):>9.3f}")
    same = len(set(cycles.values())) == 1
    fits = all(g.memory["L1"].dynamic <= BUDGETS["l1_budget"] for _, g in cases.values())
    x = rng.normal(size=(1, 96 * 56 * 56)).astype(np.float32)
    k = rng.integers(0, x.size, size=769).astype(np.int64)
    t = time.perf_counter()
    g = npukit.onnx.load(model([node("Gather", ["x", "k"], ["y"], axis=1)], {"x": x}, ["y"],
                               {"k": k}), **BUDGETS)
    load = time.perf_counter() - t
    assert np.array_equal(g.run("c", x=x).outputs["y"][0], x[0, k])
    print(f"\n769 constant indices: {len(g.layers)} layer(s), imported and planned in "
          f"{load:.2f} s")
    print(f"goal: predicted cycles independent of the table size: "
          f"{'met' if same else 'NOT met'}")
    print(f"goal: the layer's L1 within {BUDGETS['l1_budget']} B for every table: "
          f"{'met' if fits else 'NOT met'}")
    print(f"goal: 769 constant indices are one layer: {'met' if len(g.layers) == 1 else 'NOT met'}")


if __name__ == "__main__":
    main()
