"""Integer and bool tensors through the ONNX path (npukit.onnx.lowering.typed and
npukit.tiler.basic_kernels.integer): Cast among every type npukit computes on, integer
arithmetic, comparisons, logic, bitwise operations and Where, with ONNX Runtime as the oracle
(bit for bit), the simulator equal to the C, outputs poisoned; int64 extremes, NaN and
infinities, broadcasting."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto  # noqa: E402
from onnx import helper as h  # noqa: E402
from ops_helpers import check_ops, model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402

RNG = np.random.default_rng(2020)
INTS = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
TYPES = ["float32", *INTS, "bool"]


def values(dt: str, n: int) -> np.ndarray:
    """``n`` values of ``dt``: the type's extremes, 0, +-1, then random ones (float32: NaN,
    infinities, values beyond int32 and int64, fractions of both signs)."""
    if dt == "bool":
        return np.resize(np.array([True, False, False, True, True]), n)
    if dt == "float32":
        special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 2.5, -2.5, 0.99, -0.99, 300.7, -300.7,
                   3e9, -3e9, 5e9, 1e20, -1e20, 65537.2, 2.0 ** 31, -2.0 ** 31, 2.0 ** 63]
        rest = RNG.normal(size=n) * 10.0 ** RNG.integers(0, 6, n)
        return np.concatenate([special, rest])[:n].astype(np.float32)
    info = np.iinfo(dt)
    special = [info.min, info.max, 0, 1, info.max - 1, info.min + 1]
    if info.min < 0:
        special += [-1, -2]
    rest = RNG.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    return np.concatenate([np.array(special, dt), rest])[:n]


def exact(c: dict, ref: dict) -> None:
    for k, want in ref.items():
        assert c[k].dtype == want.dtype and c[k].tobytes() == want.tobytes(), k


@pytest.mark.slow
def test_cast_between_every_pair_of_types_is_onnx_runtimes_bit_for_bit():
    inputs = {f"x_{s}": values(s, 60).reshape(3, 20) for s in TYPES}
    nodes, outs = [], []
    for s in TYPES:
        for d in TYPES:
            if s != d:
                to = h.np_dtype_to_tensor_dtype(np.dtype(d))
                nodes.append(node("Cast", [f"x_{s}"], [f"y_{s}_{d}"], to=to))
                outs.append(f"y_{s}_{d}")
    m = model(nodes, inputs, outs, opset=19)
    g, c, ref = check_ops(m, inputs)
    exact(c, ref)
    assert {info.ops for info in g.layers} == {"Cast"} and len(g.layers) == len(outs)
    # The data reach the cases ONNX Runtime's x86 conversions decide: NaN and out-of-range
    # to the minimum of int32, low bits kept by narrower types.
    assert c["y_float32_int32"][0, 0] == np.iinfo(np.int32).min
    assert c["y_float32_int8"][0, 10] == -44 and c["y_float32_uint32"][0, 11] == 3000000000
    assert c["y_float32_uint32"][0, 13] == 0  # 5e9: ONNX Runtime's vectorised conversion
    assert c["y_float32_bool"][0, :3].all() and not c["y_float32_bool"][0, 3:5].any()


@pytest.mark.slow
def test_a_nan_to_every_integer_and_a_shape_output_and_an_empty_cast_like_target():
    x = np.array([[np.nan, -7.9, 7.9, 1e10]], np.float32)
    like = np.zeros(0, np.int16)
    g_ = h.make_graph([node("CastLike", ["x", "like"], ["y"]), node("Shape", ["x"], ["s"])],
                      "g", [h.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
                            h.make_tensor_value_info("like", TensorProto.INT16, [0])],
                      [h.make_tensor_value_info("y", TensorProto.INT16, [1, 4]),
                       h.make_tensor_value_info("s", TensorProto.INT64, [2])])
    m = h.make_model(g_, opset_imports=[h.make_opsetid("", 19)])
    g, c, ref = check_ops(m, {"x": x, "like": like})
    exact(c, ref)
    assert c["y"].tolist() == [[0, -7, 7, 0]] and c["s"].tolist() == [1, 4]
    assert list(g.inputs) == ["x"] and g.unused == ("like",)


def ort_has(n, inputs: dict) -> bool:
    """Whether ONNX Runtime has a kernel for node ``n`` on these inputs."""
    import onnxruntime as ort
    try:
        ort.InferenceSession(model([n], {k: inputs[k] for k in n.input}, list(n.output),
                                   opset=19).SerializeToString(),
                             providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 (ORT raises its own types: not implemented, invalid graph)
        return False
    return True


def _int_case(dt: str):
    """A model of every integer operator ONNX Runtime implements on ``dt``, on tensors ``a``
    [4, 1, 9] and ``b`` [3, 9] (broadcast), nonzero divisors (ONNX Runtime traps on 0)."""
    signed = np.dtype(dt).kind == "i"
    a = values(dt, 36).reshape(4, 1, 9)
    b = values(dt, 27)[::-1].reshape(3, 9).copy()
    b[b == 0] = 3
    if signed:  # ONNX Runtime traps on MIN / -1 (wider than int16): MIN + 1 / -1
        b[0, :3] = -1
        a[0, 0, :3] = np.iinfo(dt).min + 1
    inputs = {"a": a, "b": b, "s": (b % (8 * np.dtype(dt).itemsize)).astype(dt),
              "lo": np.array(-5 if signed else 5, dt), "hi": np.array(90, dt),
              "bn": np.where(b == np.iinfo(dt).min, 5, b).astype(dt),
              "m": RNG.integers(0, 2, (3, 1)).astype(bool)}
    ops = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Less", "LessOrEqual",
           "Greater", "GreaterOrEqual", "BitwiseAnd", "BitwiseOr", "BitwiseXor"]
    nodes = [node(op, ["a", "b"], [op]) for op in ops]
    nodes += [node("Mod", ["a", "b"], ["Mod0"]), node("Mod", ["a", "b"], ["Mod1"], fmod=1),
              node("Neg", ["bn"], ["Neg"]), node("Abs", ["bn"], ["Abs"]),  # ORT traps on MIN
              node("Sign", ["a"], ["Sign"]), node("BitwiseNot", ["a"], ["BitwiseNot"]),
              node("Relu", ["a"], ["Relu"]), node("Clip", ["a", "lo", "hi"], ["Clip"]),
              node("BitShift", ["a", "s"], ["Left"], direction="LEFT"),
              node("BitShift", ["a", "s"], ["Right"], direction="RIGHT"),
              node("Where", ["m", "a", "b"], ["Where"])]
    nodes = [n for n in nodes if ort_has(n, inputs)]
    if dt == "int8":  # bool logic rides along once
        nodes += [node("Less", ["b", "a"], ["L2"]), node("And", ["Less", "L2"], ["And"]),
                  node("Or", ["Less", "L2"], ["Or"]), node("Xor", ["Less", "L2"], ["Xor"]),
                  node("Not", ["Less"], ["Not"])]
    used = {t for n in nodes for t in n.input}
    feeds = {k: v for k, v in inputs.items() if k in used and k not in ("lo", "hi")}
    outs = [o for n in nodes for o in n.output]
    consts = {k: inputs[k] for k in ("lo", "hi") if k in used}
    return model(nodes, feeds, outs, consts, opset=19), feeds


@pytest.mark.slow
@pytest.mark.parametrize("dt", INTS)
def test_integer_operators_are_onnx_runtimes_bit_for_bit(dt):
    m, inputs = _int_case(dt)
    g, c, ref = check_ops(m, inputs)
    exact(c, ref)
    assert len(ref) >= 17
    if np.dtype(dt).kind == "i":
        assert c["Div"][0, 0, 0] == np.iinfo(dt).max  # (MIN + 1) / -1
    with np.errstate(over="ignore"):  # the data overflow: the products wrap
        assert c["Mul"].tolist() == (inputs["a"] * inputs["b"]).tolist()


def test_float_comparisons_isnan_isinf_and_where_on_float32():
    x = np.array([[np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.5, 3e38]], np.float32)
    y = np.array([[np.nan, np.inf, 1.0, -0.0, 0.0, 1.5, -3.0, np.inf]], np.float32)
    nodes = [node(op, ["x", "y"], [op]) for op in ("Equal", "Less", "LessOrEqual", "Greater",
                                                   "GreaterOrEqual")]
    nodes += [node("IsNaN", ["x"], ["nan"]), node("IsInf", ["x"], ["inf"]),
              node("IsInf", ["x"], ["pos"], detect_negative=0),
              node("IsInf", ["x"], ["neg"], detect_positive=0),
              node("IsInf", ["x"], ["none"], detect_positive=0, detect_negative=0),
              node("Where", ["Less", "x", "y"], ["w"])]
    outs = [o for n in nodes for o in n.output]
    g, c, ref = check_ops(model(nodes, {"x": x, "y": y}, outs, opset=20), {"x": x, "y": y})
    exact(c, ref)
    assert c["Equal"].tolist() == [[False, True, False, True, True, True, False, False]]
    assert c["inf"].tolist() == [[False, True, True, False, False, False, False, False]]


@pytest.mark.slow
def test_division_and_remainder_by_zero_give_zero_and_types_are_checked():
    """ONNX leaves them undefined (ONNX Runtime traps): npukit's kernels give 0, and
    MIN / -1 wraps to MIN, the simulator and the C alike."""
    a = np.array([[7, -7, np.iinfo(np.int64).min, 5, np.iinfo(np.int64).min]], np.int64)
    b = np.array([[0, 0, 0, -1, -1]], np.int64)
    m = model([node("Div", ["a", "b"], ["q"]), node("Mod", ["a", "b"], ["r"]),
               node("Sum", ["a", "b", "a"], ["s"])], {"a": a, "b": b}, ["q", "r", "s"],
              opset=19)
    g = npukit.onnx.load(m)
    for backend in ("c", "sim"):
        out = g.run(backend, a=a, b=b).outputs
        assert out["q"].tolist() == [[0, 0, 0, -5, np.iinfo(np.int64).min]]  # MIN / -1 wraps
        assert out["r"].tolist() == [[0, 0, 0, 0, 0]]
        assert out["s"].tolist() == [[14, -14, 0, 9, -1]]  # MIN + MIN wraps to 0
    bad = model([node("And", ["a", "a"], ["y"], name="and1")], {"a": a}, ["y"], opset=19)
    bad.graph.output[0].type.tensor_type.elem_type = TensorProto.BOOL
    with pytest.raises(ModelError, match=r"^node 'and1' \(And\): And of int64 tensor 'a' is "
                                         r"not supported \(npukit computes it on bool\)"):
        npukit.onnx.load(bad)


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(st.data())
def test_where_and_add_broadcast_int64_extremes_as_onnx_runtime(data):
    rank = data.draw(st.integers(1, 4))
    out = data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))

    def operand():
        return tuple(d if data.draw(st.booleans()) else 1 for d in out)[
            data.draw(st.integers(0, rank - 1)):]
    sa, sb, sc = operand(), operand(), operand()
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1)))
    big = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, -1, 0, 1], np.int64)
    a = rng.choice(big, sa) + rng.integers(-3, 3, sa)
    b = rng.choice(big, sb) - rng.integers(-3, 3, sb)
    cond = rng.integers(0, 2, sc).astype(bool)
    inputs = {"c": cond, "a": a.astype(np.int64), "b": b.astype(np.int64)}
    m = model([node("Where", ["c", "a", "b"], ["w"]), node("Add", ["a", "b"], ["s"]),
               node("Greater", ["a", "b"], ["gt"])], inputs, ["w", "s", "gt"], opset=19)
    try:
        g, c, ref = check_ops(m, inputs)
    except ModelError as e:  # more than three alternating groups of broadcast dimensions
        assert "three groups" in str(e)
        return
    exact(c, ref)


@pytest.mark.slow
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_argmax_argmin_every_axis_ties_first_or_last_as_onnx_runtime(op):
    """Values drawn from seven, so most rows tie: the first index, or the last with
    select_last_index, as ONNX Runtime; float32 and int64 inputs, keepdims 0 and 1."""
    x = RNG.integers(-3, 4, (3, 7, 5))
    inputs = {"f": x.astype(np.float32), "i": x.astype(np.int64) * 2 ** 40}
    nodes = [node(op, [t], [f"{t}{a}{last}{kd}"], axis=a, keepdims=kd, select_last_index=last)
             for t in inputs for a in (0, 1, -1) for last in (0, 1) for kd in (0, 1)]
    outs = [o for n in nodes for o in n.output]
    g, c, ref = check_ops(model(nodes, inputs, outs, opset=13), inputs)
    exact(c, ref)
    assert (c["f110"] != c["f100"]).any()  # ties resolved both ways on the data
    assert c["f111"].shape == (3, 1, 5) and c["f110"].shape == (3, 5)


@pytest.mark.slow
def test_gather_by_run_time_indices_wraps_negatives_and_clamps_out_of_range():
    x = RNG.normal(size=(3, 7, 5)).astype(np.float32)
    idx = {"i0": RNG.integers(-3, 3, (2, 4)), "i1": RNG.integers(-7, 7, (6,)),
           "i2": np.array([4, -5, 0], np.int32)}
    idx = {k: v.astype(np.int32 if k == "i2" else np.int64) for k, v in idx.items()}
    inputs = {"x": x, "q": (x * 40).astype(np.int8), **idx}
    nodes = [node("Gather", ["x", "i0"], ["y0"], axis=0),
             node("Gather", ["x", "i1"], ["y1"], axis=1),
             node("Gather", ["q", "i2"], ["y2"], axis=-1)]
    g, c, ref = check_ops(model(nodes, inputs, ["y0", "y1", "y2"], opset=13), inputs)
    exact(c, ref)
    assert {info.ops for info in g.layers} == {"Gather"} and len(g.layers) == 3
    # Out of range (ONNX Runtime refuses it when it runs): clamped into the axis.
    bad = {"x": x, "i1": np.array([7, -8, 100, -100], np.int64)}
    gb = npukit.onnx.load(model([nodes[1]], bad, ["y1"], opset=13))
    for backend in ("c", "sim"):
        y = gb.run(backend, **bad).outputs["y1"]
        assert np.array_equal(y, x[:, [6, 0, 6, 0]])


@pytest.mark.slow
def test_float16_and_float64_casts_as_onnx_runtime_and_bfloat16_as_ml_dtypes():
    """float16 and float64 tensors are cast (only): to and from every type, against ONNX
    Runtime bit for bit; bfloat16 (which ONNX Runtime's Python binding cannot feed) against
    ml_dtypes' rounding through float32. Any other operator on them is refused by name."""
    from npukit.dtypes import dtype

    wide = ["float16", "float64"]
    inputs = {f"x_{s}": values(s, 40).reshape(2, 20)
              for s in ["float32", "int8", "uint32", "int64", "bool"]}
    with np.errstate(over="ignore"):  # 3e9 and beyond are float16's infinities
        inputs["x_float16"] = values("float32", 40).astype(np.float16).reshape(2, 20)
    inputs["x_float64"] = values("float32", 40).astype(np.float64).reshape(2, 20) * 1.000001
    nodes = [node("Cast", [x], [f"{x}_{d}"], to=h.np_dtype_to_tensor_dtype(np.dtype(d)))
             for x in inputs for d in [*wide, "float32", "int8", "uint32", "int64", "bool"]
             if x[2:] != d and (x[2:] in wide or d in wide)]
    outs = [n.output[0] for n in nodes]
    g, c, ref = check_ops(model(nodes, inputs, outs, opset=19), inputs)
    exact(c, ref)
    assert c["x_float64_float16"][0, 11] == np.inf  # 3e9 overflows float16
    bf = {"x": values("float32", 40).reshape(2, 20)}
    m = model([node("Cast", ["x"], ["b"], to=TensorProto.BFLOAT16),
               node("Cast", ["b"], ["f"], to=TensorProto.FLOAT),
               node("Cast", ["b"], ["i"], to=TensorProto.INT32)], bf, ["f", "i"], opset=19)
    g = npukit.onnx.load(m)
    want = bf["x"].astype(dtype("bfloat16")).astype(np.float32)
    for backend in ("c", "sim"):
        out = g.run(backend, **bf).outputs
        assert out["f"].tobytes() == want.tobytes()
        ok = np.isfinite(want) & (np.abs(want) < 2 ** 31)
        assert np.array_equal(out["i"][ok], np.trunc(want[ok]).astype(np.int32))
    bad = model([node("Relu", ["x"], ["y"], name="r")], {"x": inputs["x_float16"]}, ["y"])
    with pytest.raises(ModelError, match=r"^node 'r' \(Relu\): Relu of float16 tensor 'x' is "
                                         r"not supported \(npukit casts float16"):
        npukit.onnx.load(bad)


@pytest.mark.slow
@pytest.mark.parametrize("l1", [48000, 1600], ids=["one-tile", "tiles"])
def test_gather_elements_along_every_axis_as_onnx_runtime(l1):
    x = RNG.normal(size=(3, 7, 5)).astype(np.float32)
    inputs, nodes = {"x": x}, []
    for axis in (0, 1, -1):
        shape = list(x.shape)
        shape[axis] = 4
        d = x.shape[axis]
        inputs[f"i{axis}"] = RNG.integers(-d, d, shape).astype(np.int64 if axis else np.int32)
        nodes.append(node("GatherElements", ["x", f"i{axis}"], [f"y{axis}"], axis=axis))
    outs = [n.output[0] for n in nodes]
    g, c, ref = check_ops(model(nodes, inputs, outs, opset=13), inputs, l1_budget=l1)
    exact(c, ref)
    assert (inputs["i1"] < 0).any() and [info.ops for info in g.layers] == ["GatherElements"] * 3
    tiles = g.run("c", schedule="tiles", **inputs).outputs  # the target's L1 tiles in C
    assert all(tiles[k].tobytes() == c[k].tobytes() for k in outs)


@pytest.mark.slow
@pytest.mark.parametrize("largest", [1, 0])
def test_topk_values_and_indices_ties_by_lower_index_as_onnx_runtime(largest):
    x = RNG.integers(-3, 4, (3, 7, 5))  # seven values: most columns tie
    inputs = {"f": x.astype(np.float32), "i": x.astype(np.int64) * 2 ** 40 - 5}
    nodes = [node("TopK", [t, "k"], [f"v{t}{a}", f"i{t}{a}"], axis=a, largest=largest)
             for t in inputs for a in (0, 1, -1)]
    outs = [o for n in nodes for o in n.output]
    m = model(nodes, inputs, outs, {"k": np.array([3], np.int64)}, opset=13)
    g, c, ref = check_ops(m, inputs)
    exact(c, ref)
    assert c["vf1"].shape == (3, 3, 5) and c["if1"].dtype == np.int64
    tiles = g.run("c", schedule="tiles", **inputs).outputs  # the target's L1 tiles in C
    assert all(tiles[k].tobytes() == c[k].tobytes() for k in outs)
    ties = np.diff(c["vf1"], axis=1) == 0
    assert ties.any() and (np.diff(c["if1"], axis=1)[ties] > 0).all()  # lower index first


@pytest.mark.slow
def test_signed_bitshift_of_opset_28_with_negative_and_wide_shifts_as_onnx_runtime():
    inputs = {}
    for dt in ("int8", "int32", "int64", "uint16"):
        bits = 8 * np.dtype(dt).itemsize
        inputs[f"x_{dt}"] = values(dt, 24).reshape(2, 12)
        lo = -bits - 2 if np.dtype(dt).kind == "i" else 0
        inputs[f"s_{dt}"] = RNG.integers(lo, bits + 3, (2, 12)).astype(dt)
        inputs[f"s_{dt}"][0, :2] = [bits, bits - 1]
    nodes = [node("BitShift", [f"x_{dt}", f"s_{dt}"], [f"{d}_{dt}"], direction=d)
             for dt in ("int8", "int32", "int64", "uint16") for d in ("LEFT", "RIGHT")]
    outs = [n.output[0] for n in nodes]
    g, c, ref = check_ops(model(nodes, inputs, outs, opset=28), inputs)
    exact(c, ref)
    assert (inputs["s_int8"] < 0).any() and (c["RIGHT_int8"] == -1).any()


def test_clip_with_bounds_given_at_run_time_float_and_integer():
    """Bounds that are graph inputs: one Clip layer (before, refused); min > max gives max and
    NaN stays NaN, as ONNX Runtime."""
    x = (RNG.normal(size=(3, 8)) * 3).astype(np.float32)
    x[0, 0] = np.nan
    f = {"x": x, "lo": np.array(-1.0, np.float32), "hi": np.array(1.5, np.float32)}
    m = model([node("Clip", ["x", "lo", "hi"], ["y"]), node("Clip", ["x", "", "hi"], ["y2"]),
               node("Clip", ["x", "hi", "lo"], ["y3"])], f, ["y", "y2", "y3"], opset=13)
    g, c, ref = check_ops(m, f)
    exact(c, ref)
    assert np.isnan(c["y"][0, 0]) and (c["y3"][~np.isnan(x)] == -1).all()
    i = {"x": values("int32", 24).reshape(3, 8), "lo": np.array(-5, np.int32),
         "hi": np.array(9, np.int32)}
    g, c, ref = check_ops(model([node("Clip", ["x", "lo", "hi"], ["y"])], i, ["y"], opset=13),
                          i)
    exact(c, ref)
    assert [info.ops for info in g.layers] == ["Clip"] and c["y"].min() == -5


@pytest.mark.slow
def test_inputs_passed_through_as_outputs_are_copied_whole_in_every_type():
    inputs = {"a": np.array([[np.iinfo(np.int64).min, 5, np.iinfo(np.int64).max]], np.int64),
              "b": np.array([[True, False, True]]),
              "h": np.array([[1.5, np.nan, -2.0]], np.float16)}
    m = model([node("Identity", [k], [f"y{k}"]) for k in inputs], inputs,
              [f"y{k}" for k in inputs], opset=13)
    g, c, ref = check_ops(m, inputs)
    exact(c, ref)
    assert [info.ops for info in g.layers] == ["Copy"] * 3


@pytest.mark.slow
def test_gather_nd_with_batch_dims_and_negative_coordinates_as_onnx_runtime():
    x = RNG.normal(size=(3, 4, 5, 6)).astype(np.float32)
    inputs, nodes = {"x": x}, []
    for k, (b, shape) in enumerate([(0, (7, 2)), (0, (2, 3, 1)), (0, (4, 4)), (1, (3, 5, 2)),
                                    (2, (3, 4, 2, 1))]):
        dims = np.array(x.shape[b:b + shape[-1]])
        inputs[f"i{k}"] = (RNG.integers(0, 2 * 10 ** 6, shape) % (2 * dims) - dims).astype(
            np.int64)
        nodes.append(node("GatherND", ["x", f"i{k}"], [f"y{k}"], batch_dims=b))
    outs = [n.output[0] for n in nodes]
    g, c, ref = check_ops(model(nodes, inputs, outs, opset=13), inputs)
    exact(c, ref)
    tiles = g.run("c", schedule="tiles", **inputs).outputs
    assert all(tiles[k].tobytes() == c[k].tobytes() for k in outs)
    assert (inputs["i0"] < 0).any() and c["y2"].shape == (4,)
