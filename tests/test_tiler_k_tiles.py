"""Matrix products whose rows of K do not fit L1, tiled along K (an L1 accumulator per output
column across the K tiles), and transposes tiled along their items' values: the layer
generators alone (numpy float64 and integer oracles written here, the simulator against the
C's bytes, canaries around every output), then through ONNX against ONNX Runtime."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from npukit import TilingError
from npukit.tiler import Model
from npukit.tiler import layer_generators as G
from npukit.tiler import layer_generators_matmul as GM
from npukit.tiler.basic_kernels.common import ACT_RELU, f32_bits

GUARD = 16


def run_layer(m: Model, name: str, arrays: dict[str, np.ndarray], out_dt, backend: str
              ) -> np.ndarray:
    """Run user kernel ``name`` on ``arrays`` (reshaped to its parameters); its ``Out`` is a
    view into a buffer filled with a canary, checked untouched around it."""
    prog = m.program(name)
    shapes = {b.name: lay.shape for b, lay in prog.params}
    size = int(np.prod(shapes["Out"]))
    canary = np.array(np.nan if np.dtype(out_dt).kind == "f" else 77, out_dt)
    buf = np.full(size + 2 * GUARD, canary, out_dt)
    out = buf[GUARD:GUARD + size].reshape(shapes["Out"])
    prog.run(backend, **{k: np.ascontiguousarray(v).reshape(shapes[k])
                         for k, v in arrays.items()}, Out=out)
    for guard in (buf[:GUARD], buf[GUARD + size:]):
        assert guard.tobytes() == np.full(GUARD, canary, out_dt).tobytes(), "written outside"
    return out.reshape(-1).copy()


def sequential_f32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in float32, each sum k ascending from 0 with a rounding after every product
    and every addition (the order the K-tiled form documents)."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        acc = acc + a[:, k:k + 1] * b[k]
    return acc


def k_tiled_float(M, K, N, budget, c, seed):
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    cs = {"column": (N,), "row": (M, 1), "element": (M, N), "scalar": (1,), None: None}[c]
    cv = rng.uniform(-1, 1, cs).astype(np.float32) if cs else None
    m = Model(target="gap8", l1_budget=budget)
    assert GM.matmul(m, "L", a_dt="float32", b_dt="float32", out_dt="float32", M=M, K_=K, N=N,
                    c=c, Alpha=f32_bits(0.5), Beta=f32_bits(2.0), Act=ACT_RELU, k_tiles=True)
    t = m.tiling("L")
    assert t.spaces["Tile0"].count > 1 and t.l1_used <= budget
    arrays = dict(A=a, Bt=b.T, **({"C": cv} if c else {}))
    outs = {be: run_layer(m, "L", arrays, np.float32, be) for be in ("sim", "c")}
    assert outs["sim"].tobytes() == outs["c"].tobytes()
    v = np.float32(0.5) * sequential_f32(a, b)
    if c:
        v = v + np.float32(2.0) * np.broadcast_to(cv, (M, N))
    v = np.maximum(v, np.float32(0))
    assert outs["c"].tobytes() == v.astype(np.float32).reshape(-1).tobytes()
    exact = np.maximum(0.5 * (a.astype(np.float64) @ b) + (
        2.0 * np.broadcast_to(cv, (M, N)) if c else 0), 0)
    assert np.abs(outs["c"] - exact.reshape(-1)).max() <= 1e-6 * K
    return m, arrays, outs["c"]


@pytest.mark.slow  # compiles C per example (~1 s each)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# (budget: from the least that tiles every case: 8 columns, K tiles of 8, a column's C:
# 736 B.)
@given(M=st.integers(1, 3), K=st.integers(300, 3000), N=st.integers(1, 20),
       budget=st.integers(736, 6000), c=st.sampled_from(["column", "row", "element", "scalar",
                                                         None]),
       seed=st.integers(0, 2 ** 31))
def test_a_float_product_tiled_along_k_sums_in_order_of_k(M, K, N, budget, c, seed):
    """Whatever the K tile the solver picks: the bytes of a float32 sum k ascending, within
    1e-6 K of float64, simulator == C, nothing written outside the output."""
    if 8 * K + 16 * N + 64 <= budget:  # a whole row of K fits: not this form's case
        budget = 8 * K // 2
    k_tiled_float(M, K, N, budget, c, seed)


@pytest.mark.slow  # compiles C (~1.5 s)
def test_the_k_tiled_form_gives_the_bytes_of_the_whole_row_form():
    """The summation order does not depend on the tiling: the same product planned with an
    L1 that holds whole rows of K gives the same bytes."""
    M, K, N = 2, 700, 9
    m, arrays, out = k_tiled_float(M, K, N, 1500, "column", 3)
    whole = Model(target="gap8", l1_budget=48000)
    assert not GM.matmul(whole, "L", a_dt="float32", b_dt="float32", out_dt="float32", M=M,
                        K_=K, N=N, c="column", Alpha=f32_bits(0.5), Beta=f32_bits(2.0),
                        Act=ACT_RELU, k_tiles=True)
    rows = run_layer(whole, "L", dict(A=arrays["A"], B=arrays["Bt"].T, C=arrays["C"]),
                     np.float32, "c")
    assert rows.tobytes() == out.tobytes()


def requant(acc: np.ndarray, scale: np.ndarray, zp: int, lo: int, hi: int) -> np.ndarray:
    """ONNX Runtime's requantisation, written plainly: float32 product, clamp, round half to
    even, add the zero point."""
    v = acc.astype(np.float32) * scale.astype(np.float32)
    v = np.clip(v, np.float32(lo - zp), np.float32(hi - zp))
    return np.rint(v).astype(np.int64) + zp


@pytest.mark.slow  # compiles C per example
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# (budget: from the least that tiles every case: 8 columns with a bias and a scale each,
# 320 B.)
@given(M=st.integers(1, 2), K=st.integers(2000, 9000), N=st.integers(1, 17),
       budget=st.integers(320, 3000), per_col=st.booleans(), bias=st.booleans(),
       seed=st.integers(0, 2 ** 31))
def test_an_int8_product_tiled_along_k_is_exact(M, K, N, budget, per_col, bias, seed):
    """int8 x int8 -> int8 with zero points, an int32 bias and per-column or per-tensor
    scales: exactly the int32 accumulation requantised, simulator == C."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (M, K), dtype=np.int8)
    b = rng.integers(-128, 128, (K, N), dtype=np.int8)
    za, zb, zout = (int(v) for v in rng.integers(-20, 20, 3))
    cv = rng.integers(-50000, 50000, N, dtype=np.int32)
    acc = (a.astype(np.int64) - za) @ (b.astype(np.int64) - zb) + (cv if bias else 0)
    assert np.abs(acc).max() < 2 ** 31
    # Scales that map the largest sum to 30-80 % of 127: with the zero point (|zout| < 20)
    # every output inside the range; ±128 and 127 then come only from a wrong sum.
    scale = (rng.uniform(0.3, 0.8, N if per_col else 1) * 127 / np.abs(acc).max()).astype(
        np.float32)
    m = Model(target="gap8", l1_budget=budget)
    assert GM.matmul(m, "L", a_dt="int8", b_dt="int8", out_dt="int8", M=M, K_=K, N=N,
                    c="column" if bias else None, Za=za, Zb=zb, scale_per_column=per_col,
                    Zout=zout, Lo=-128, Hi=127, k_tiles=True)
    assert m.tiling("L").spaces["Tile0"].count > 1
    arrays = dict(A=a, Bt=b.T, Scale=scale, **({"C": cv} if bias else {}))
    outs = {be: run_layer(m, "L", arrays, np.int8, be) for be in ("sim", "c")}
    assert outs["sim"].tobytes() == outs["c"].tobytes()
    want = requant(acc, np.broadcast_to(scale, (N,)), zout, -128, 127)
    assert np.array_equal(outs["c"].astype(np.int64), want.reshape(-1))
    assert ((want > -128) & (want < 127)).all()


def test_a_product_no_k_tile_fits_is_refused_naming_the_layer_k_and_the_budget():
    m = Model(target="gap8", l1_budget=40)
    with pytest.raises(TilingError, match=r"^Lin: \[1, 5000\] x \[5000, 8\] does not fit the L1 "
                                          r"budget of 40 B even with K = 5000 cut into tiles: "):
        GM.matmul(m, "Lin", a_dt="float32", b_dt="float32", out_dt="float32", M=1, K_=5000, N=8,
                 Alpha=f32_bits(1.0), k_tiles=True)


def test_without_k_tiles_the_whole_row_form_is_kept():
    """Callers that cannot bind B transposed (batched products) get the old form and its
    refusal."""
    m = Model(target="gap8", l1_budget=4000)
    assert not GM.matmul(m, "L", a_dt="float32", b_dt="float32", out_dt="float32", M=1,
                        K_=5000, N=8, Alpha=f32_bits(1.0))
    with pytest.raises(TilingError, match="exceeds the L1 budget of 4000 B"):
        m.tiling("L")


# -- transposes tiled along the items' values --------------------------------------------------

@pytest.mark.slow  # compiles C per example
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(P=st.integers(1, 3), A=st.integers(1, 6), B=st.integers(1, 6), I=st.integers(40, 900),
       frac=st.floats(0, 1), seed=st.integers(0, 2 ** 31))
def test_a_transpose_whose_rows_do_not_fit_is_tiled_along_its_items(P, A, B, I, frac, seed):  # noqa: E741
    """[P, A, B, I] -> [P, B, A, I] with an L1 budget under one row of the longer of A and B
    (min(A, B) * I values, in 4 slots) and under the tensors: tiles of I, the bytes of
    numpy's transpose, sim == C, nothing written outside the output."""
    smallest = 16 * A * B  # a value of each item in In and Out, 2 slots each
    over = min(16 * min(A, B) * I, 4 * P * A * B * I) - 4
    if smallest > over:
        return
    budget = int(smallest + frac * (over - smallest))
    x = np.random.default_rng(seed).uniform(-1, 1, (P, A, B, I)).astype(np.float32)
    m = Model(target="gap8", l1_budget=budget)
    G.transpose(m, "T", dt="float32", Planes=P, A=A, B=B, I=I)
    assert m.kernels["T"].kerargs[0].W == I  # In as A * B rows of I values
    assert m.tiling("T").l1_used <= budget
    outs = {be: run_layer(m, "T", dict(In=x), np.float32, be) for be in ("sim", "c")}
    assert outs["sim"].tobytes() == outs["c"].tobytes()
    assert outs["c"].tobytes() == np.ascontiguousarray(x.transpose(0, 2, 1, 3)).tobytes()


def test_a_transpose_that_fits_in_rows_keeps_its_row_tiles():
    m = Model(target="gap8", l1_budget=48000)
    G.transpose(m, "T", dt="float32", Planes=1, A=4, B=60, I=10)
    assert m.kernels["T"].kerargs[0].W == 60 * 10  # In as A rows of B * I values


def test_a_transpose_nothing_fits_is_refused_naming_the_sizes_and_the_budget():
    m = Model(target="gap8", l1_budget=1000)
    with pytest.raises(TilingError, match=r"^T: transposing \[1, 40, 50, 300\] into \[1, 50, 40, "
                                          r"300\] needs at least one item of I = 300 values "
                                          r"\(1200 B\) in 4 slots of L1, over the budget of "
                                          r"1000 B"):
        G.transpose(m, "T", dt="float32", Planes=1, A=40, B=50, I=300)


# -- through ONNX, against ONNX Runtime ---------------------------------------------------------

def against_ort_tiles(m, inputs: dict, **load_kw):
    """``against_ort`` on the simulator and the host C, then the C of the target's own plan
    (``schedule="tiles"``: the tiles these tests are about): its bytes are the simulator's."""
    from onnx_helpers import against_ort

    g, stats, outs = against_ort(m, inputs, ("sim", "c"), **load_kw)
    tiles = g.run("c", schedule="tiles", **inputs).outputs
    for k, v in outs["sim"].items():
        assert tiles[k].tobytes() == v.tobytes(), f"{k}: the tile schedule's C differs"
    return g, stats, outs


def k_tiled_layers(g) -> list[str]:
    """The layers of an imported graph made in the K-tiled form (they bind B transposed)."""
    return [i.name for i in g.layers
            if any(c.ArgName == "Bt" for c in g.model.kernels[i.name].cargs)]


@pytest.mark.slow  # ONNX Runtime, two back ends
@pytest.mark.parametrize("b_const", [True, False], ids=["weights", "computed"])
def test_a_gemm_whose_rows_do_not_fit_matches_onnx_runtime(b_const):
    """A fully-connected layer (Gemm, transB, bias, Relu) with K = 3000 float32 under an L1
    of 6000 B; B a constant (read as given, [N, K]) or computed (transposed by a layer)."""
    pytest.importorskip("onnxruntime")
    from onnx_helpers import model, node

    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (2, 3000)).astype(np.float32)
    w = (rng.normal(size=(10, 3000)) * 0.03).astype(np.float32)
    bias = rng.normal(size=10).astype(np.float32)
    nodes = [node("Gemm", ["x", "w", "b"], ["y"], transB=1), node("Relu", ["y"], ["r"])]
    ins = {"x": x}
    if not b_const:
        nodes.insert(0, node("Neg", ["v"], ["w"]))
        ins["v"] = -w
    m = model(nodes, ins, ["r"], {"b": bias, **({"w": w} if b_const else {})})
    g, stats, outs = against_ort_tiles(m, ins, l1_budget=6000)
    assert len(k_tiled_layers(g)) == 1
    assert (outs["c"]["r"] > 0).any() and (outs["c"]["r"] == 0).any()


@pytest.mark.slow  # ONNX Runtime, two back ends
def test_an_int8_qlinearmatmul_whose_rows_do_not_fit_is_bit_exact():
    pytest.importorskip("onnxruntime")
    from onnx_helpers import model, node

    rng = np.random.default_rng(6)
    a = rng.integers(0, 256, (1, 4000), dtype=np.uint8)
    w = rng.integers(-127, 128, (4000, 12), dtype=np.int8)
    inits = dict(sa=np.float32(0.02), za=np.uint8(120), w=w, sw=np.float32(0.01),
                 zw=np.int8(0), sy=np.float32(3.0), zy=np.uint8(128))
    m = model([node("QLinearMatMul", ["a", "sa", "za", "w", "sw", "zw", "sy", "zy"], ["y"])],
              {"a": a}, ["y"], inits, opset=13)
    g, stats, outs = against_ort_tiles(m, {"a": a}, l1_budget=3000)
    assert len(k_tiled_layers(g)) == 1
    assert stats["c"]["y"].exact == 1.0
    assert len(np.unique(outs["c"]["y"])) > 3


@pytest.mark.slow  # ONNX Runtime, two back ends per example
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.lists(st.integers(2, 5), min_size=2, max_size=4), last=st.integers(200, 1000),
       perm_seed=st.integers(0, 2 ** 31))
def test_transposes_of_tensors_larger_than_l1_match_onnx_runtime(shape, last, perm_seed):
    """Random permutations of tensors 2 to 210 times the L1 budget (12000 B), the last axis
    long (rows of it with the other axes do not fit), against ONNX Runtime, sim == C. The
    other axes hold at most 625 values: every swap fits one of the two tilings."""
    pytest.importorskip("onnxruntime")
    from onnx_helpers import model, node

    rng = np.random.default_rng(perm_seed)
    dims = (1, *shape, last)
    perm = [0, *(1 + rng.permutation(len(dims) - 1))]
    x = rng.uniform(-1, 1, dims).astype(np.float32)
    assume(x.nbytes >= 2 * 12000)
    m = model([node("Transpose", ["x"], ["y"], perm=perm)], {"x": x}, ["y"])
    _, _, outs = against_ort_tiles(m, {"x": x}, l1_budget=12000)
    assert np.array_equal(outs["c"]["y"], x.transpose(perm))


@pytest.mark.slow  # ONNX Runtime
def test_the_channel_shuffle_of_shufflenet_is_tiled():
    """ShuffleNet's [1, g, C/g, H, W] -> [1, C/g, g, H, W] at 56 x 56 (a 50,176-byte row of
    the old tiling) under GAP8's 48000 B."""
    pytest.importorskip("onnxruntime")
    from onnx_helpers import model, node

    x = np.random.default_rng(7).uniform(-1, 1, (1, 4, 6, 56, 56)).astype(np.float32)
    m = model([node("Transpose", ["x"], ["y"], perm=[0, 2, 1, 3, 4])], {"x": x}, ["y"])
    g, _, outs = against_ort_tiles(m, {"x": x}, l1_budget=48000)
    assert np.array_equal(outs["c"]["y"], x.transpose(0, 2, 1, 3, 4))
    (layer,) = g.layers
    assert g.model.kernels[layer.name].kerargs[0].W == 56 * 56  # tiles of the H*W values


def test_an_imported_product_no_k_tile_fits_is_refused_naming_the_node():
    pytest.importorskip("onnxruntime")
    from onnx_helpers import model, node

    import npukit.onnx

    x, w = np.ones((1, 5000), np.float32), np.ones((8, 5000), np.float32)
    m = model([node("Gemm", ["x", "w"], ["y"], transB=1, name="fc")], {"x": x}, ["y"], {"w": w})
    with pytest.raises(TilingError, match=r"^node 'fc' \(Gemm\), layer L0_Gemm: \[1, 5000\] x "
                                          r"\[5000, 8\] does not fit the L1 budget of 100 B even "
                                          r"with K = 5000 cut into tiles: "):
        npukit.onnx.load(m, l1_budget=100)


@pytest.mark.slow  # builds a C project with make
def test_an_emitted_project_with_a_k_tiled_product_builds_with_warnings_as_errors(tmp_path):
    """The deployable C of a K-tiled product without C (its kernels' unused C pointer must
    not alias the accumulator they write: restrict) builds and reproduces the outputs."""
    import subprocess

    pytest.importorskip("onnxruntime")
    from onnx_helpers import model, node

    import npukit.onnx

    rng = np.random.default_rng(8)
    x = rng.uniform(-1, 1, (1, 3000)).astype(np.float32)
    w = rng.uniform(-1, 1, (8, 3000)).astype(np.float32)
    g = npukit.onnx.load(model([node("Gemm", ["x", "w"], ["y"], transB=1)], {"x": x}, ["y"],
                               {"w": w}), l1_budget=4000)
    assert len(k_tiled_layers(g)) == 1
    g.emit(tmp_path, {"x": x})
    r = subprocess.run(["make", "-C", str(tmp_path), "check", "CFLAGS=-O1 -Wall -Wextra -Werror"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "outputs identical to expected/" in r.stdout
    y = np.load(tmp_path / "outputs" / "y.npy")
    assert np.abs(y - x.astype(np.float64) @ w.T.astype(np.float64)).max() < 1e-3
