"""Embeddings as an NPU runs them: a ``Gather`` leaves its table in L2, L3 RAM or flash and
fetches only the rows its indices name into L1 (one transfer per run of consecutive indices).
Models built with onnx.helper, run on both back ends into poisoned outputs and compared with
ONNX Runtime (a Gather is a copy: bit for bit)."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ops_helpers import check_ops, model, node, run_poisoned  # noqa: E402

import npukit.onnx  # noqa: E402

RNG = np.random.default_rng(39)
BERT_VOCAB, HIDDEN = 30522, 128
SMALL = {"target": "gap8", "l1_budget": 4000, "l2_budget": 64 * 1024}


def ids(*v):
    return np.array([v], np.int64)


# Repeats, negative indices (from the end), runs of consecutive rows, both ends of the table.
IDS = ids(101, 7592, 7593, 7594, 102, 0, 0, -1, -2, 30521, 2000, 7592, 5, 6, 7, 8)


def embedding(table: np.ndarray, n: int = IDS.shape[1]):
    return model([node("Gather", ["emb", "ids"], ["y"], axis=0)],
                 {"ids": np.zeros((1, n), np.int64)}, ["y"], {"emb": table})


def test_bert_vocabulary_table_stays_in_flash_and_only_its_rows_reach_l1():
    table = RNG.normal(size=(BERT_VOCAB, HIDDEN)).astype(np.float32)
    g, out, ref = check_ops(embedding(table), {"ids": IDS}, **SMALL)
    assert np.array_equal(out["y"], ref["y"])
    assert np.array_equal(out["y"][0], table[IDS[0]])  # numpy's reading of the indices
    assert len(g.layers) == 1
    emb = [t for t in g.tensors.values() if t.size == table.nbytes]
    assert [t.memory for t in emb] == ["L3_FLASH"]
    assert g.memory["L1"].dynamic <= SMALL["l1_budget"] < table.nbytes
    # only the indices and the output rows take L1, each in two slots (double-buffered)
    tiling = g.graph.layers[0].tiling
    assert {k: a.slots for k, a in tiling.args.items()} == {"Idx": 2, "Out": 2}


def test_a_table_over_the_flash_budget_is_refused_by_name():
    table = RNG.normal(size=(3000, 16)).astype(np.float32)
    with pytest.raises(npukit.CapacityError, match=r"its constants need 192000 B of flash "
                                                   r"\(W_emb\), over the flash budget of "
                                                   r"100000 B"):
        npukit.onnx.load(embedding(table, 4), **SMALL, l3_flash_budget=100000)


def test_a_table_a_hundred_times_larger_costs_the_same_cycles():
    """The cycle model prices the rows fetched, not the table: the same ids on a table of
    300 rows and of 30,000 rows take the same cycles."""
    cycles = []
    for rows in (300, 30000):
        table = RNG.normal(size=(rows, 32)).astype(np.float32)
        x = ids(0, 1, 2, 299, -300, 150, 151, 7)
        g = npukit.onnx.load(embedding(table, 8), **SMALL)
        res = g.run("sim", ids=x)
        assert np.array_equal(res.outputs["y"][0], table[x[0]])
        cycles.append(res.cycles)
    assert cycles[0] == cycles[1] > 0


def test_int8_table_dequantized_after_the_gather_is_bit_exact():
    """ONNX Runtime's quantized embedding: the int8 table gathered, then DequantizeLinear."""
    q = RNG.integers(-128, 128, size=(5000, 64)).astype(np.int8)
    nodes = [node("Gather", ["emb", "ids"], ["g"], axis=0),
             node("DequantizeLinear", ["g", "s", "z"], ["y"])]
    x = ids(4999, -5000, 17, 18, 19, 17, 2500, 0)
    m = model(nodes, {"ids": x}, ["g", "y"], {"emb": q, "s": np.float32(0.037),
                                              "z": np.int8(-3)})
    g, out, ref = check_ops(m, {"ids": x}, **SMALL)
    assert np.array_equal(out["g"], ref["g"]) and out["g"].dtype == np.int8
    assert np.array_equal(out["y"], ref["y"])
    assert np.array_equal(out["g"][0], q[x[0]])


def test_qdq_embedding_as_onnx_runtime_quantizes_it_gathers_the_integers():
    """ONNX Runtime's quantizer writes DequantizeLinear(int8 table), Gather, QuantizeLinear
    with the same parameters: npukit gathers the int8 table itself (a quarter of the float
    one in flash), bit for bit as ONNX Runtime."""
    q = RNG.integers(-128, 128, size=(5000, 64)).astype(np.int8)
    nodes = [node("DequantizeLinear", ["emb", "s", "z"], ["f"]),
             node("Gather", ["f", "ids"], ["g"], axis=0),
             node("QuantizeLinear", ["g", "s", "z"], ["gq"]),
             node("DequantizeLinear", ["gq", "s", "z"], ["y"])]
    x = ids(4999, -5000, 17, 18, 19, 17, 2500, 0)
    m = model(nodes, {"ids": x}, ["gq", "y"], {"emb": q, "s": np.float32(0.037),
                                               "z": np.int8(-3)})
    g, out, ref = check_ops(m, {"ids": x}, **SMALL)
    assert np.array_equal(out["gq"], ref["gq"]) and np.array_equal(out["y"], ref["y"])
    assert np.array_equal(out["gq"][0], q[x[0]])
    assert [t.memory for t in g.tensors.values() if t.size == q.nbytes] == ["L3_FLASH"]
    assert [info.ops for info in g.layers] == ["Gather", "DequantizeLinear"]


def test_embedding_rows_wider_than_l1_are_fetched_in_tiles_of_columns():
    """Rows of 1,500 values (6,000 B) over the 4,000 B budget: each row is fetched in tiles
    of its columns, straight from the table's home; indices outside the table still read
    the nearest row, and the cycles priced are those of the rows fetched, not the table's."""
    cycles = []
    for rows in (40, 1000):
        table = RNG.normal(size=(rows, 1500)).astype(np.float32)
        g = npukit.onnx.load(embedding(table, 5), **SMALL)
        (info,) = g.layers
        assert any(a.Space is not None for a in g.model.kernels[info.name].kerargs)
        x = ids(3, -1, 4, rows + 7, -(rows + 2))
        for backend in ("sim", "c"):
            out = run_poisoned(g, {"ids": x}, backend)
            assert np.array_equal(out["y"][0], table[[3, rows - 1, 4, rows - 1, 0]])
        cycles.append(g.run("sim", ids=x).cycles)
    assert cycles[0] == cycles[1] > 0


def test_index_outside_the_table_reads_the_nearest_row_on_both_back_ends():
    """ONNX Runtime refuses an index outside [-D, D) when it runs; npukit clamps it to the
    nearest row on both back ends (the simulator and C agree) and never reads outside."""
    table = RNG.normal(size=(50, 8)).astype(np.float32)
    g = npukit.onnx.load(embedding(table, 4), **SMALL)
    x = ids(3, 50, -51, 1 << 40)
    for backend in ("sim", "c"):
        out = run_poisoned(g, {"ids": x}, backend)
        assert np.array_equal(out["y"][0], table[[3, 49, 0, 49]])


def test_constant_indices_are_one_layer_on_any_axis():
    """A Gather with constant indices (the dynamo export of ``as_strided``) is one layer
    however many indices it has."""
    x = RNG.normal(size=(2, 40, 3)).astype(np.float32)
    k = RNG.integers(-40, 40, size=(5, 6)).astype(np.int64)
    nodes = [node("Gather", ["x", "k"], ["y"], axis=1), node("Gather", ["x", "k0"], ["z"],
                                                             axis=-1)]
    m = model(nodes, {"x": x}, ["y", "z"], {"k": k, "k0": np.array([2, 2, 0, -3], np.int64)})
    g, out, ref = check_ops(m, {"x": x}, **SMALL)
    assert np.array_equal(out["y"], ref["y"]) and np.array_equal(out["z"], ref["z"])
    assert [info.ops for info in g.layers] == ["Gather", "Gather"]


def test_bert_embeddings_words_token_types_and_positions():
    """Word, token-type and position embeddings (positions by Range of the sequence length,
    and a Slice of a constant table) summed, as BERT's exporters write them."""
    s, e, vocab = 16, 32, 4000
    words = RNG.normal(size=(vocab, e)).astype(np.float32)
    types = RNG.normal(size=(2, e)).astype(np.float32)
    pos = RNG.normal(size=(64, e)).astype(np.float32)
    nodes = [node("Shape", ["ids"], ["shape"]),
             node("Gather", ["shape", "one"], ["len"], axis=0),
             node("Range", ["zero", "len", "one"], ["positions"]),
             node("Gather", ["words", "ids"], ["w"], axis=0),
             node("Gather", ["types", "tt"], ["t"], axis=0),
             node("Gather", ["pos", "positions"], ["p"], axis=0),
             node("Slice", ["pos", "zero1", "len1"], ["p2"]),
             node("Add", ["w", "t"], ["wt"]), node("Add", ["wt", "p"], ["y"]),
             node("Add", ["wt", "p2"], ["y2"])]
    x = RNG.integers(-vocab, vocab, size=(1, s)).astype(np.int64)
    tt = (np.arange(s) >= 9).astype(np.int64)[None]
    inits = {"words": words, "types": types, "pos": pos, "one": np.int64(1),
             "zero": np.int64(0), "zero1": np.array([0], np.int64),
             "len1": np.array([s], np.int64)}
    m = model(nodes, {"ids": x, "tt": tt}, ["y", "y2"], inits)
    g, out, ref = check_ops(m, {"ids": x, "tt": tt}, **SMALL)
    want = words[np.where(x < 0, x + vocab, x)] + types[tt] + pos[:s]
    assert np.array_equal(out["y"], ref["y"]) and np.array_equal(out["y2"], ref["y2"])
    assert np.array_equal(out["y"], want.astype(np.float32))


def test_tied_output_projection_by_the_transposed_embedding_table():
    """GPT-2's head: the hidden states times the word table transposed, the table far larger
    than L1."""
    e, vocab = 32, 3000
    words = RNG.normal(size=(vocab, e)).astype(np.float32)
    nodes = [node("Gather", ["words", "ids"], ["h"], axis=0),
             node("Transpose", ["words"], ["wt"], perm=[1, 0]),
             node("MatMul", ["h", "wt"], ["logits"])]
    x = ids(5, 2999, 6, -1)
    m = model(nodes, {"ids": x}, ["logits"], {"words": words})
    g, out, ref = check_ops(m, {"ids": x}, **SMALL)
    h = words[np.where(x < 0, x + vocab, x)].astype(np.float64)
    want = h @ words.T.astype(np.float64)
    assert np.abs(out["logits"] - want).max() <= 1e-4 * np.abs(want).max()


def test_gather_nd_rows_fetched_from_a_large_table_and_per_batch():
    """GatherND whose coordinates name whole rows: the table (4.9 MB) stays in flash; with
    ``batch_dims`` each batch fetches from its own table."""
    x = RNG.normal(size=(300, 256, 16)).astype(np.float32)
    c = np.array([[0, 0], [0, 1], [0, 2], [-1, -1], [299, 255], [7, -256], [7, 3], [7, 4]],
                 np.int64)[None]
    xb = RNG.normal(size=(3, 5, 4)).astype(np.float32)
    cb = RNG.integers(-5, 5, size=(3, 6, 1)).astype(np.int64)
    nodes = [node("GatherND", ["x", "c"], ["y"]),
             node("GatherND", ["xb", "cb"], ["yb"], batch_dims=1)]
    m = model(nodes, {"c": c, "cb": cb}, ["y", "yb"], {"x": x, "xb": xb}, opset=13)
    g, out, ref = check_ops(m, {"c": c, "cb": cb}, **SMALL)
    assert np.array_equal(out["y"], ref["y"]) and np.array_equal(out["yb"], ref["yb"])
    assert np.array_equal(out["y"][0], x[c[0, :, 0], c[0, :, 1]])
    assert [t.memory for t in g.tensors.values() if t.size == x.nbytes] == ["L3_FLASH"]


def test_gap_sdk_output_refuses_a_table_its_cluster_cannot_address(tmp_path):
    """GAP's cluster cannot read flash or L3 RAM through a pointer: the GAP SDK writer
    refuses a table the plan keeps there, naming the layer, the tensor and its size."""
    from npukit.tiler import gap_sdk

    table = RNG.normal(size=(3000, 16)).astype(np.float32)
    g = npukit.onnx.load(embedding(table, 4), **SMALL)
    x = ids(1, 2, 3, 4)
    y = g.run("sim", ids=x).outputs["y"]
    with pytest.raises(npukit.TilingError, match=r"layer L0_Gather: basic kernel "
                       r"KerFetchRowsNpk_fl_i64 reads W_emb \(192000 B\) through a pointer "
                       r"where the plan keeps it \(L3_FLASH\)"):
        gap_sdk.write(g.graph, tmp_path / "gap", {"In_ids": x}, {"Out_y": y})
