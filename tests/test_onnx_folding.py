"""Constant folding (``npukit.onnx.folding.evaluate``) against ONNX Runtime: each operator the
exporters apply to constants (indexing, ``Range``, ``Cast``, integer arithmetic, comparisons,
logic, ``Where``, shapes) on random inputs, fed to ONNX Runtime as graph inputs so its kernels
compute them; the values, types and shapes bit for bit, and where ONNX Runtime refuses the
inputs (an index out of range) a one-line ``ModelError`` naming the node."""

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument  # noqa: E402

from npukit.errors import ModelError  # noqa: E402
from npukit.onnx.folding import evaluate  # noqa: E402

OPSETS = [h.make_opsetid("", 17)]
INTS = (np.int8, np.uint8, np.int32, np.int64)


def _shape(rng, rank=None):
    return tuple(int(d) for d in rng.integers(1, 5, rng.integers(1, 4) if rank is None
                                              else rank))


def _data(rng, shape, dt) -> np.ndarray:
    return np.asarray(_values(rng, shape, np.dtype(dt)))


def _values(rng, shape, dt):
    if dt == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    if dt.kind == "f":
        v = (rng.normal(size=shape) * 10 ** rng.integers(0, 11)).astype(dt)
        v.reshape(-1)[rng.random(v.size) < 0.1] = np.nan
        return v
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -300), min(info.max, 300), shape, endpoint=True).astype(dt)


def _broadcastable(rng, shape):
    """``shape`` with some dimensions 1, maybe fewer of them."""
    s = [d if rng.random() < 0.6 else 1 for d in shape]
    return tuple(s[rng.integers(0, len(s) + 1):]) if rng.random() < 0.3 else tuple(s)


def _gather(rng):
    data = _data(rng, _shape(rng), rng.choice([np.float32, np.int64, np.bool_]))
    axis = int(rng.integers(-data.ndim, data.ndim))
    d = data.shape[axis]
    idx = rng.integers(-d - (rng.random() < 0.1), d + (rng.random() < 0.1), _shape(rng))
    return "Gather", {"axis": axis}, [data, idx.astype(rng.choice([np.int64, np.int32]))]


def _gather_elements(rng):
    data = _data(rng, _shape(rng), rng.choice([np.float32, np.int64]))
    axis = int(rng.integers(-data.ndim, data.ndim))
    shape = [int(rng.integers(1, s + 1)) for s in data.shape]
    d = data.shape[axis]
    shape[axis] = int(rng.integers(1, 2 * d + 1))  # longer than the data along the axis too
    idx = rng.integers(-d - (rng.random() < 0.1), d + (rng.random() < 0.1), shape)
    return "GatherElements", {"axis": axis}, [data, idx.astype(np.int64)]


def _range(rng):
    dt = rng.choice([np.int64, np.int32, np.float32])
    if dt == np.float32:
        start, delta = rng.normal() * 5, rng.choice([-1, 1]) * rng.uniform(0.01, 3)
    else:
        start, delta = rng.integers(-20, 20), rng.choice([-1, 1]) * rng.integers(1, 5)
    limit = start + delta * rng.uniform(-2, 40)
    return "Range", {}, [np.array(v, dt) for v in (start, limit, delta)]


def _cast(rng):
    src = rng.choice([np.float32, np.int64, np.int32, np.uint8, np.bool_])
    to = rng.choice([TP.FLOAT, TP.INT8, TP.UINT8, TP.INT32, TP.INT64, TP.BOOL, TP.UINT16])
    x = _data(rng, _shape(rng), src)
    if src == np.float32:  # NaN and out-of-range to integers: implementation-defined
        x = np.nan_to_num(x) if to == TP.BOOL else np.clip(np.nan_to_num(x), -100, 100)
    return "Cast", {"to": int(to)}, [x]


def _binary(rng, ops, dts, nonzero=False):
    op, dt = rng.choice(ops), rng.choice(dts)
    shape = _shape(rng)
    a, b = _data(rng, _broadcastable(rng, shape), dt), _data(rng, shape, dt)
    if nonzero:
        b = np.where(b == 0, 3, b).astype(dt)
        if np.dtype(dt).kind == "i":  # MIN / -1 overflows in ONNX Runtime's C++
            b = np.where(b == -1, 2, b).astype(dt)
    pair = [a, b] if nonzero or rng.random() < 0.5 else [b, a]  # a divisor of no zero
    attrs = {"fmod": int(rng.integers(0, 2))} if op == "Mod" else {}
    return op, attrs, pair


def _where(rng):
    shape = _shape(rng)
    dt = rng.choice([np.float32, np.int64, np.int32])
    return "Where", {}, [np.asarray(rng.random(_broadcastable(rng, shape)) < 0.5),
                         _data(rng, shape, dt), _data(rng, _broadcastable(rng, shape), dt)]


def _unary(rng):
    op = rng.choice(["Neg", "Abs", "Sign", "Not"])
    return op, {}, [_data(rng, _shape(rng), np.bool_ if op == "Not"
                          else rng.choice([np.int64, np.int32, np.int8]))]


def _clip(rng):
    dt = rng.choice([np.int64, np.int32])
    lo, hi = sorted(int(v) for v in rng.integers(-100, 100, 2))
    return "Clip", {}, [_data(rng, _shape(rng), dt), np.array(lo, dt), np.array(hi, dt)]


def _expand(rng):
    shape = _shape(rng)
    x = _data(rng, _broadcastable(rng, shape), rng.choice([np.bool_, np.int64]))
    return "Expand", {}, [x, np.array(shape, np.int64)]


def _trilu(rng):
    x = _data(rng, _shape(rng, int(rng.integers(2, 4))), rng.choice([np.float32, np.int64]))
    return "Trilu", {"upper": int(rng.integers(0, 2))}, [x, np.array(rng.integers(-3, 4),
                                                                       np.int64)]


def _cumsum(rng):
    x = _data(rng, _shape(rng), rng.choice([np.int64, np.int32]))
    return "CumSum", {"exclusive": int(rng.integers(0, 2)), "reverse": int(rng.integers(0, 2))
                      }, [x, np.array(rng.integers(-x.ndim, x.ndim), np.int64)]


def _slice(rng):
    x = _data(rng, _shape(rng), np.int64)
    ax = int(rng.integers(0, x.ndim))
    step = int(rng.choice([-2, -1, 1, 2, 3]))
    b, e = (int(v) for v in rng.integers(-6, 7, 2))
    if step == 1 and ax == 0 and rng.random() < 0.5:  # axes and steps absent
        return "Slice", {}, [x, *(np.array([v], np.int64) for v in (b, e))]
    return "Slice", {}, [x, *(np.array([v], np.int64) for v in (b, e, ax, step))]


def _layout(rng):
    x = _data(rng, _shape(rng), rng.choice([np.int64, np.float32, np.bool_]))
    op = rng.choice(["Transpose", "Tile", "Unsqueeze", "Concat", "Reshape"])
    if op == "Transpose":
        return op, {"perm": [int(a) for a in rng.permutation(x.ndim)]}, [x]
    if op == "Tile":
        return op, {}, [x, rng.integers(1, 4, x.ndim).astype(np.int64)]
    if op == "Unsqueeze":
        return op, {}, [x, np.array([int(rng.integers(-x.ndim - 1, x.ndim + 1))], np.int64)]
    if op == "Concat":
        ax = int(rng.integers(-x.ndim, x.ndim))
        other = list(x.shape)
        other[ax] = int(rng.integers(1, 4))
        return op, {"axis": ax}, [x, _data(rng, tuple(other), x.dtype)]
    shape = [0 if rng.random() < 0.3 and k < x.ndim else d
             for k, d in enumerate(rng.permutation(x.shape))]
    if rng.random() < 0.8:
        shape[int(rng.integers(0, len(shape)))] = -1
    if rng.random() < 0.2:
        shape.append(int(rng.integers(1, 3)))  # maybe too many elements
    if rng.random() < 0.2:
        return "Expand", {}, [x, np.array(rng.integers(1, 4, x.ndim), np.int64)]
    return op, {}, [x, np.array(shape, np.int64)]


def _reduce(rng):
    op = rng.choice(["ReduceSum", "ReduceMax", "ReduceMin", "ArgMax"])
    x = _data(rng, _shape(rng), rng.choice([np.int64, np.int32]))
    ax = int(rng.integers(-x.ndim, x.ndim))
    keep = int(rng.integers(0, 2))
    if op == "ReduceSum":
        return op, {"keepdims": keep}, [x, np.array([ax], np.int64)]
    return op, {"keepdims": keep, ("axis" if op == "ArgMax" else "axes"):
                ax if op == "ArgMax" else [ax]}, [x]


def _float_arith(rng):
    op = rng.choice(["Add", "Sub", "Mul", "Div", "Sqrt"])
    if op == "Sqrt":
        return op, {}, [np.abs(_data(rng, _shape(rng), np.float32))]
    return _binary(rng, [op], (np.float32,))


def _quantization(rng):
    dt = rng.choice([np.int8, np.uint8])
    x = _data(rng, _shape(rng), np.float32)
    x = np.nan_to_num(x, nan=0.0)
    axis = int(rng.integers(-x.ndim, x.ndim))
    n = x.shape[axis] if rng.random() < 0.5 else 1
    scale = rng.uniform(0.01, 20, n).astype(np.float32).reshape(() if n == 1 else (n,))
    zp = rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, scale.shape, endpoint=True
                      ).astype(dt)
    if rng.random() < 0.5:
        return "QuantizeLinear", {"axis": axis}, [x, scale, zp]
    q = rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, x.shape, endpoint=True).astype(dt)
    return "DequantizeLinear", {"axis": axis}, [q, scale, zp]


def _scatter(rng):
    data = _data(rng, _shape(rng), rng.choice([np.float32, np.int64]))
    if rng.random() < 0.5:  # ScatterElements: distinct targets along the axis
        axis = int(rng.integers(-data.ndim, data.ndim))
        d = data.shape[axis]
        shape = [int(rng.integers(1, s + 1)) for s in data.shape]
        shape[axis] = int(rng.integers(1, d + 1))
        order = np.argsort(rng.random((*shape[:axis % data.ndim], d,
                                       *shape[axis % data.ndim + 1:])), axis=axis)
        idx = np.take(order, np.arange(shape[axis]), axis=axis) - d * (rng.random() < 0.3)
        return "ScatterElements", {"axis": axis}, [data, idx.astype(np.int64),
                                                   _data(rng, tuple(shape), data.dtype)]
    k = int(rng.integers(1, data.ndim + 1))
    cells = np.array(list(np.ndindex(*data.shape[:k])))
    rows = cells[rng.permutation(len(cells))[:int(rng.integers(1, len(cells) + 1))]]
    upd = _data(rng, (len(rows), *data.shape[k:]), data.dtype)
    return "ScatterND", {}, [data, rows.astype(np.int64), upd]


def _misc(rng):
    op = rng.choice(["Pow", "ConstantOfShape", "Squeeze", "NonZero", "OneHot", "Shape"])
    x = _data(rng, _shape(rng), rng.choice([np.int64, np.float32]))
    if op == "Pow":
        e = rng.integers(0, 4, x.shape[-1:]).astype(x.dtype)
        return op, {}, [np.clip(np.nan_to_num(x), -20, 20).astype(x.dtype), e]
    if op == "ConstantOfShape":
        return op, {"value": h.make_tensor("v", TP.INT64, [1], [int(rng.integers(-9, 9))])}, [
            np.array(x.shape, np.int64)]
    if op == "Squeeze":
        y = x.reshape(1, *x.shape, 1)
        return op, {}, [y, np.array([0, -1] if rng.random() < 0.5 else [-1], np.int64)]
    if op == "OneHot":
        return op, {"axis": int(rng.integers(-x.ndim - 1, x.ndim + 1))}, [
            rng.integers(-5, 5, x.shape).astype(np.int64), np.array(5, np.int64),
            np.array([0, 7], np.int64)]
    if op == "Shape":
        return op, {"start": int(rng.integers(-3, 3)), "end": int(rng.integers(-3, 4))}, [x]
    return op, {}, [x]


GENERATORS = {
    "Gather": _gather, "GatherElements": _gather_elements, "Range": _range, "Cast": _cast,
    "integer arithmetic": lambda rng: _binary(rng, ["Add", "Sub", "Mul"], INTS),
    "integer division": lambda rng: _binary(rng, ["Div", "Mod"], (np.int64, np.int32, np.uint8),
                                            nonzero=True),
    "Max, Min": lambda rng: _binary(rng, ["Max", "Min"], (np.int64, np.int32)),
    "comparisons": lambda rng: _binary(rng, ["Equal", "Less", "Greater", "LessOrEqual"],
                                       (np.int64, np.float32, np.int32)),
    "logic": lambda rng: _binary(rng, ["And", "Or", "Xor"], (np.bool_,)),
    "Where": _where, "unary": _unary, "Clip": _clip, "Expand": _expand, "Trilu": _trilu,
    "CumSum": _cumsum, "Slice": _slice, "layout": _layout, "reductions": _reduce,
    "float32 arithmetic": _float_arith, "quantization": _quantization, "scatter": _scatter,
    "miscellaneous": _misc,
}


def _ort(op: str, attrs: dict, values: list):
    names = [f"x{k}" for k in range(len(values))]
    g = h.make_graph([h.make_node(op, names, ["y"], **attrs)], "fold",
                     [h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                      for n, v in zip(names, values)], [h.make_value_info("y", h.TypeProto())])
    m = h.make_model(g, opset_imports=OPSETS)
    m.ir_version = 8
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    try:
        return s.run(None, dict(zip(names, values)))[0]
    except (Fail, InvalidArgument):  # refused at run time: an index out of range
        return None


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(list(GENERATORS)), st.integers(0, 2 ** 32 - 1))
def test_folding_matches_onnx_runtime(family, seed):
    op, attrs, values = GENERATORS[family](np.random.default_rng(seed))
    node = h.make_node(op, [f"c{k}" for k in range(len(values))], ["y"], name="folded",
                       **attrs)
    want = _ort(op, attrs, values)
    if want is None:  # ONNX Runtime refuses the values: so must the folding, by name
        with pytest.raises(ModelError) as err:
            evaluate(node, values, OPSETS)
        assert str(err.value).startswith("node 'folded'") and "\n" not in str(err.value)
        return
    got = evaluate(node, values, OPSETS)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    if op == "Pow" and got.dtype.kind == "f":
        # ONNX Runtime's float pow is its own (vectorised), not the C library's powf that
        # numpy calls: the two differ by one unit in the last place on some values.
        np.testing.assert_array_max_ulp(got, want, 1)
        return
    assert got.tobytes() == want.tobytes() or np.array_equal(got, want, equal_nan=True), \
        (op, attrs, values, got, want)


@pytest.mark.slow
def test_bert_token_types_gathered_from_a_buffer_fold():
    """transformers' BERT gathers its buffered token types at the position ids (a
    GatherElements of constants, with more data than indices: ONNX's reference evaluator
    cannot reshape it); folded, no layer is left of it."""
    import npukit.onnx
    import npukit.transformer_models as tm

    g = npukit.onnx.load(tm.bert(np.random.default_rng(3)))
    assert "GatherElements" not in {info.ops for info in g.layers}


def test_a_constant_index_out_of_range_is_refused_by_name():
    node = h.make_node("Gather", ["t", "i"], ["y"], name="pick", axis=1)
    with pytest.raises(ModelError, match=r"^node 'pick' \(Gather\): index -4 along axis 1 of "
                                         r"size 3 is outside \[-3, 2\]$"):
        evaluate(node, [np.zeros((2, 3), np.float32), np.array([0, -4], np.int64)], OPSETS)


def test_a_reshape_of_constants_that_does_not_fit_is_refused_in_one_line():
    from onnx_helpers import model, node

    import npukit.onnx

    m = model([node("Reshape", ["c", "s"], ["r"], name="fold_me"), node("Add", ["r", "x"], ["y"])],
              {"x": np.zeros(4, np.float32)}, ["y"],
              {"c": np.arange(6, dtype=np.float32), "s": np.array([4], np.int64)})
    with pytest.raises(ModelError, match=r"^node 'fold_me' \(Reshape\): shape \[4\] cannot hold "
                                         r"the 6 elements of its input of shape \[6\]$"):
        npukit.onnx.load(m)
