"""The float32 math unaries and activations (npukit.tiler.basic_kernels.mathfn) imported from
ONNX: against ONNX Runtime (the suite's tolerance), against float64 numpy with each function's
stated accuracy, the simulator against the C bit for bit, outputs poisoned."""

import math

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from ops_helpers import check_ops, model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import ModelError  # noqa: E402

RNG = np.random.default_rng(20)
ERF = np.vectorize(math.erf)


def elu(x, a=1.0):
    return np.where(x < 0, a * np.expm1(x), x)


def hard_sigmoid(x, a=0.2, b=0.5):
    return np.clip(a * x + b, 0, 1)


def softplus(x):
    return np.logaddexp(0, x)


# op: (float64 oracle, input domain, absolute error allowed per unit of max(1, |y|))
UNARIES = {
    "Abs": (np.abs, None, 0), "Neg": (np.negative, None, 0),
    "Reciprocal": (lambda x: 1 / x, "away0", 6e-8), "Floor": (np.floor, None, 0),
    "Ceil": (np.ceil, None, 0), "Round": (np.round, "halves", 0), "Sign": (np.sign, None, 0),
    "Sqrt": (np.sqrt, "pos", 1.2e-7), "Exp": (np.exp, None, 1e-6), "Log": (np.log, "pos", 2e-7),
    "Sin": (np.sin, None, 3e-7), "Cos": (np.cos, None, 3e-7), "Tan": (np.tan, "unit", 1e-6),
    "Asin": (np.arcsin, "unit", 1e-6), "Acos": (np.arccos, "unit", 1e-6),
    "Atan": (np.arctan, None, 3e-7), "Sinh": (np.sinh, None, 1e-6),
    "Cosh": (np.cosh, None, 1e-6), "Asinh": (np.arcsinh, None, 3e-7),
    "Acosh": (np.arccosh, "above1", 3e-7), "Atanh": (np.arctanh, "unit", 1e-6),
    "Erf": (ERF, None, 5e-7), "Elu": (elu, None, 3e-7),
    "Selu": (lambda x: 1.05070102214813232421875 * elu(x, 1.67326319217681884765625), None,
             3e-7),
    "Celu": (lambda x: np.maximum(x, 0) + np.minimum(0, np.expm1(x)), None, 3e-7),
    "HardSigmoid": (hard_sigmoid, None, 1e-7), "HardSwish": (lambda x: x * hard_sigmoid(
        x, 1 / 6, 0.5), None, 1.2e-7), "Softplus": (softplus, None, 3e-7),
    "Softsign": (lambda x: x / (1 + np.abs(x)), None, 1.2e-7),
    "Mish": (lambda x: x * np.tanh(softplus(x)), None, 8e-7),
    "ThresholdedRelu": (lambda x: np.where(x > 1, x, 0), None, 0),
    "Shrink": (lambda x: np.where(x < -0.5, x, np.where(x > 0.5, x, 0)), None, 0),
    "Gelu": (lambda x: 0.5 * x * (1 + ERF(x / math.sqrt(2))), None, 3e-7),
}


def data(domain, shape):
    x = RNG.normal(size=shape) * 3
    if domain == "pos":
        x = np.abs(x) + 1e-3
    elif domain == "away0":
        x = np.where(np.abs(x) < 0.1, 0.5, x)
    elif domain == "unit":
        x = np.tanh(x) * 0.97
    elif domain == "above1":
        x = 1 + np.abs(x)
    elif domain == "halves":
        x = np.round(x * 2) / 2 + RNG.choice([0, 0, 0.01], size=shape)
    return x.astype(np.float32)


@pytest.mark.slow
@pytest.mark.parametrize("l1", [48000, 700], ids=["one-tile", "many-tiles"])
def test_every_unary_matches_onnx_runtime_and_float64(l1):
    ops = list(UNARIES)
    inputs = {f"x{i}": data(UNARIES[op][1], (2, 3, 37)) for i, op in enumerate(ops)}
    m = model([node(op, [f"x{i}"], [f"y{i}"]) for i, op in enumerate(ops)], inputs,
              [f"y{i}" for i in range(len(ops))], opset=20)
    g, c, ref = check_ops(m, inputs, l1_budget=l1)
    assert [info.ops for info in g.layers] == ops
    for i, op in enumerate(ops):
        f, _, tol = UNARIES[op]
        want = f(inputs[f"x{i}"].astype(np.float64))
        err = np.abs(c[f"y{i}"] - want) / np.maximum(1, np.abs(want))
        assert err.max() <= tol, (op, float(err.max()))
        assert np.std(want) > 0.1, op  # the data exercises the function


def test_activation_attributes_and_gelu_tanh():
    x = data(None, (4, 25))
    attrs = [("Elu", dict(alpha=0.4), lambda v: elu(v, 0.4)),
             ("Selu", dict(alpha=2.0, gamma=0.7), lambda v: 0.7 * elu(v, 2.0)),
             ("Celu", dict(alpha=2.5), lambda v: np.maximum(v, 0) + np.minimum(
                 0, 2.5 * np.expm1(v / 2.5))),
             ("HardSigmoid", dict(alpha=0.3, beta=0.4), lambda v: hard_sigmoid(v, 0.3, 0.4)),
             ("ThresholdedRelu", dict(alpha=0.7), lambda v: np.where(v > 0.7, v, 0)),
             ("Shrink", dict(bias=0.25, lambd=1.5), lambda v: np.where(
                 v < -1.5, v + 0.25, np.where(v > 1.5, v - 0.25, 0))),
             ("Gelu", dict(approximate="tanh"), lambda v: 0.5 * v * (1 + np.tanh(
                 math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))))]
    m = model([node(op, ["x"], [f"y{i}"], **a) for i, (op, a, _) in enumerate(attrs)],
              {"x": x}, [f"y{i}" for i in range(len(attrs))], opset=20)
    g, c, _ = check_ops(m, {"x": x})
    for i, (op, _, f) in enumerate(attrs):
        want = f(x.astype(np.float64))
        assert np.abs(c[f"y{i}"] - want).max() <= 1e-6 * max(1, np.abs(want).max()), op
    assert "alpha=2, gamma=0.7" in g.layers[1].detail


def test_special_values_as_onnx_runtime():
    """Zeros of both signs, infinities, NaN, subnormals, huge values: the same NaN, infinity
    and value as ONNX Runtime."""
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3e38, -3e38, 1.0,
                        -1.0, 0.5, -0.5, 2.5, -2.5, 8388609.0, -8388609.0, 1e-30],
                       np.float32)
    ops = ["Abs", "Neg", "Floor", "Ceil", "Round", "Sign", "Sqrt", "Exp", "Log", "Reciprocal",
           "Softsign", "Elu", "HardSwish", "Erf"]
    m = model([node(op, ["x"], [f"y{i}"]) for i, op in enumerate(ops)], {"x": special},
              [f"y{i}" for i in range(len(ops))], opset=20)
    _, c, ref = check_ops(m, {"x": special})
    for i, op in enumerate(ops):
        got, want = c[f"y{i}"], ref[f"y{i}"]
        assert np.array_equal(np.isnan(got), np.isnan(want)), op
        fin = np.isfinite(want)
        assert np.array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)]), op
        if op not in ("Exp", "Log", "Erf", "Softsign", "Elu", "Sqrt"):  # exact functions
            assert np.array_equal(got[fin], want[fin]), op


@pytest.mark.parametrize("dt", [np.uint8, np.int8])
def test_between_dequantize_and_quantize(dt):
    """QDQ: DequantizeLinear, the function in float32, QuantizeLinear, as ONNX Runtime runs
    it: within one step of the output scale."""
    lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
    x = RNG.integers(lo, hi + 1, size=(2, 40)).astype(dt)
    zp = np.array(3 if dt == np.int8 else 128, dt)
    ops = ["Exp", "Elu", "HardSwish", "Gelu", "Sqrt", "Sin"]
    nodes, outs = [node("DequantizeLinear", ["x", "s", "z"], ["f"])], []
    for i, op in enumerate(ops):
        src = "fa" if op == "Sqrt" else "f"
        nodes += [node(op, [src], [f"g{i}"]), node("QuantizeLinear", [f"g{i}", "ys", "z"],
                                                    [f"q{i}"]),
                  node("DequantizeLinear", [f"q{i}", "ys", "z"], [f"y{i}"])]
        outs.append(f"y{i}")
    nodes.insert(1, node("Abs", ["f"], ["fa"]))
    inits = {"s": np.array(0.02, np.float32), "ys": np.array(0.015, np.float32), "z": zp}
    m = model(nodes, {"x": x}, outs, inits, opset=20)
    g, c, ref = check_ops(m, {"x": x})
    for i in range(len(ops)):
        assert np.abs(c[f"y{i}"] - ref[f"y{i}"]).max() <= 0.015 * 1.001
        assert np.unique(c[f"y{i}"]).size > 10


def test_refusals_name_the_node_and_the_attribute():
    x = data(None, (3, 4))
    m = model([node("Gelu", ["x"], ["y"], name="g1", approximate="erf")], {"x": x}, ["y"],
              opset=20)
    with pytest.raises(ModelError, match=r"^node 'g1' \(Gelu\): approximate='erf'; ONNX's "
                                         r"Gelu takes 'none' or 'tanh'$"):
        npukit.onnx.load(m)
    m = model([node("Celu", ["x"], ["y"], name="c1", alpha=0.0)], {"x": x}, ["y"])
    with pytest.raises(ModelError, match=r"^node 'c1' \(Celu\): alpha=0 divides by zero"):
        npukit.onnx.load(m)
    q = np.arange(12, dtype=np.int8).reshape(3, 4)
    m = model([node("Exp", ["q"], ["y"], name="a1")], {"q": q}, ["y"])
    with pytest.raises(ModelError, match=r"^node 'a1' \(Exp\): Exp of int8 data is not "
                                         r"supported \(float32 only"):
        npukit.onnx.load(m)


def test_the_c_of_a_function_is_its_definition_one_statement_per_operation():
    """Softsign ``x / (1 + |x|)`` as the kernel's C writes it: one float32 operation per
    statement, in the definition's order (so the numpy reference rounds the same way)."""
    from npukit.tiler.basic_kernels.mathfn import math_unary

    src = math_unary("Softsign", 8).c_source
    assert """
        float X = In[i];
        int V0 = X < 0x0.0p+0f;
        float V1 = -X;
        float V2 = V0 ? V1 : X;
        float V3 = 0x1.0000000000000p+0f + V2;
        float V4 = X / V3;
        Out[i] = V4;
""" in src


# -- two inputs and more ----------------------------------------------------------------------

def test_max_min_mean_of_several_broadcast_inputs():
    a = RNG.normal(size=(2, 3, 4)).astype(np.float32)
    b = RNG.normal(size=(3, 1)).astype(np.float32)
    c = RNG.normal(size=(4,)).astype(np.float32)
    a[0, 0, 0] = np.nan  # Max and Min propagate NaN, as ONNX Runtime
    ins = {"a": a, "b": b, "c": c}
    nodes = [node("Max", ["a", "b", "c"], ["y0"]), node("Min", ["c", "a"], ["y1"]),
             node("Mean", ["a", "b", "c"], ["y2"]), node("Max", ["b", "c"], ["y3"])]
    g, out, _ = check_ops(model(nodes, ins, ["y0", "y1", "y2", "y3"]), ins)
    a64, b64, c64 = (v.astype(np.float64) for v in (a, b, c))
    assert np.array_equal(out["y0"], np.maximum(np.maximum(a, b), c), equal_nan=True)
    assert np.array_equal(out["y1"], np.minimum(c, a), equal_nan=True)
    mean = (a64 + b64 + c64) / 3
    assert np.isnan(out["y2"][0, 0, 0])
    assert np.nanmax(np.abs(out["y2"] - mean)) <= 3e-7 * np.nanmax(np.abs(mean))
    assert out["y3"].shape == (3, 4) and np.array_equal(out["y3"], np.maximum(b, c))
    assert [info.ops for info in g.layers] == ["Max", "Max", "Min", "Mean (sum)", "Mean (sum)",
                                               "Mean", "Max"]


def test_pow_and_prelu():
    x = RNG.normal(size=(2, 3, 5)).astype(np.float32) * 2
    e = np.round(RNG.normal(size=(2, 3, 5)) * 2).astype(np.float32)  # integer powers
    e[0, 0] = [0.5, 2.0, 0.0, -1.0, 3.0]  # a root of a negative x is NaN
    x[0, 0, 0] = -abs(x[0, 0, 0]) - 0.5
    p = (np.abs(x) + 0.25).astype(np.float32)
    slope = RNG.uniform(0.05, 0.5, size=(3, 1)).astype(np.float32)
    ins = {"x": x, "e": e, "p": p, "s": slope}
    nodes = [node("Pow", ["x", "e"], ["y0"]), node("Pow", ["p", "x"], ["y1"]),
             node("PRelu", ["x", "s"], ["y2"])]
    _, out, _ = check_ops(model(nodes, ins, ["y0", "y1", "y2"]), ins)
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        want = np.power(x64, e)
    assert np.array_equal(np.isnan(out["y0"]), np.isnan(want)) and np.isnan(want).any()
    ok = ~np.isnan(want)
    assert (np.abs(out["y0"][ok] - want[ok]) <= 1e-6 * np.abs(want[ok]) + 1e-30).all()
    assert np.abs(out["y1"] / np.power(p.astype(np.float64), x64) - 1).max() < 1e-6
    assert np.array_equal(out["y2"], np.where(x < 0, x * slope, x))


def test_a_constant_integer_exponent_is_read_as_float_and_integer_data_is_refused():
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    m = model([node("Pow", ["x", "k"], ["y"])], {"x": x}, ["y"], {"k": np.array(3, np.int64)})
    _, out, _ = check_ops(m, {"x": x})
    assert np.abs(out["y"] - x.astype(np.float64) ** 3).max() <= 1e-6 * np.abs(x ** 3).max()
    q = (x * 20).astype(np.int8)
    m = model([node("PRelu", ["q", "s"], ["y"], name="p1")], {"q": q}, ["y"],
              {"s": np.array([1], np.int8)})
    with pytest.raises(ModelError, match=r"^node 'p1' \(PRelu\): PRelu of int8 input 'q' is "
                                         r"not supported \(float32 only\)$"):
        npukit.onnx.load(m)


@pytest.mark.parametrize("opset", [11, 13])
def test_log_softmax_along_rows_and_columns(opset):
    x = (RNG.normal(size=(2, 5, 7)) * 4).astype(np.float32)
    axes = [-1, 1] if opset >= 13 else [1, 2]
    nodes = [node("LogSoftmax", ["x"], [f"y{i}"], axis=a) for i, a in enumerate(axes)]
    g, out, _ = check_ops(model(nodes, {"x": x}, ["y0", "y1"], opset=opset), {"x": x},
                          l1_budget=900)
    x64 = x.astype(np.float64)
    for i, a in enumerate(axes):
        # opset 11: over the flattened trailing axes from ``axis``
        v = x64.reshape(2, -1) if opset < 13 and a == 1 else x64
        ax = -1 if opset < 13 else a
        want = v - v.max(axis=ax, keepdims=True)
        want = (want - np.log(np.exp(want).sum(axis=ax, keepdims=True))).reshape(x.shape)
        assert np.abs(out[f"y{i}"] - want).max() <= 1e-6 * np.abs(want).max()
    assert [info.ops for info in g.layers] == ["LogSoftmax", "LogSoftmax"]


def test_swish_of_opset_24_with_its_alpha():
    x = data(None, (3, 11))
    m = model([node("Swish", ["x"], ["y"], alpha=0.7)], {"x": x}, ["y"], opset=24)
    _, out, _ = check_ops(m, {"x": x})
    x64 = x.astype(np.float64)
    want = x64 / (1 + np.exp(-0.7 * x64))
    assert np.abs(out["y"] - want).max() <= 3e-7 * max(1, np.abs(want).max())


# -- hostile values: NaN, both zeros, infinities, subnormals, far from the origin -----------

HOSTILE = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 1e-40, -1e-40, 1e-45, -1e-45,
                    1e-10, -1e-10, 1e-5, 1.0, -1.0, 0.5, -2.5, 3.0, -3.0, 10.5, 88.5, -88.9,
                    89.3, -89.4, 89.5, 100.0, 4095.0, 4097.0, 1e4, -1e5, 1e10, -1e10, 1e19,
                    3e19, 1e30, -1e30, 3e38, -3e38, 1.5707964, 3.1415927, 1e6 + 0.25,
                    16367173.0 * 2.0 ** 72], np.float32)
# Activations and functions ONNX Runtime computes element by element; opset 20.
HOSTILE_OPS = [*(op for op in UNARIES if op != "Gelu"), "Gelu", "Relu", "LeakyRelu", "Clip",
               "Sigmoid", "Tanh"]


def _hostile_tolerance(op: str, x: np.ndarray) -> np.ndarray:
    """|npukit - ort| / max(1, |ort|) allowed: the function's accuracy (docs/onnx.md) and
    ONNX Runtime's own float32 rounding."""
    if op in ("Exp", "Celu", "Elu", "Selu"):  # exp's rounding of x * log2(e)
        return 1.3e-7 + np.abs(x) * 6e-8 + 2e-7
    return np.full(x.shape, UNARIES.get(op, (None, None, 0))[2] + 2.4e-7)


@pytest.mark.parametrize("ops", [HOSTILE_OPS[:18], HOSTILE_OPS[18:]], ids=["first", "second"])
def test_hostile_values_as_onnx_runtime(ops):
    """NaN where ONNX Runtime has NaN, its infinities, its signs of zero, and every finite
    value within the function's stated accuracy: Sin(1e10), Sinh(89.4), Asinh(3e38),
    Relu(NaN), HardSigmoid(NaN), Relu(-0) = -0, Abs(-0) = 0, Round(-0.3) = -0..."""
    x = HOSTILE
    m = model([node(op, ["x"], [f"y{i}"]) for i, op in enumerate(ops)], {"x": x},
              [f"y{i}" for i in range(len(ops))], opset=20)
    _, c, ref = check_ops(m, {"x": x})  # also: the simulator == the C, bit for bit
    for i, op in enumerate(ops):
        got, want = c[f"y{i}"], ref[f"y{i}"]
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(got), nan), (op, x[np.isnan(got) != nan])
        inf = np.isinf(want)
        assert np.array_equal(got[inf], want[inf]), (op, x[inf][got[inf] != want[inf]])
        # A zero of the same sign (near 0 a function may round to a tiny value instead,
        # within its accuracy, except at +-0 itself).
        zero = (want == 0) & ((got == 0) | (x == 0))
        assert np.array_equal(got[zero], want[zero]), (op, x[zero])
        assert np.array_equal(np.signbit(got[zero]), np.signbit(want[zero])), (op, x[zero])
        fin = np.isfinite(want)
        err = np.abs(got[fin].astype(np.float64) - want[fin]) / np.maximum(1, np.abs(want[fin]))
        bad = err > _hostile_tolerance(op, x[fin])
        assert not bad.any(), (op, x[fin][bad], got[fin][bad], want[fin][bad])


def test_nan_passes_with_its_bits_as_onnx_runtime():
    """Relu, LeakyRelu, Clip, Neg pass a NaN on with its bits (Neg flipping its sign), Abs
    clears its sign, as ONNX Runtime; Max and Min of a NaN are NaN either side."""
    x = np.array([np.nan, -np.nan, -0.0, 0.0, 1.0, -1.0], np.float32)
    y = np.array([1.0, -0.0, np.nan, -0.0, 0.0, np.nan], np.float32)
    ops = ["Relu", "LeakyRelu", "Clip", "Neg", "Abs"]
    nodes = [node(op, ["x"], [f"y{i}"]) for i, op in enumerate(ops)]
    nodes += [node("Max", ["x", "y"], ["mx"]), node("Min", ["x", "y"], ["mn"])]
    outs = [f"y{i}" for i in range(len(ops))] + ["mx", "mn"]
    m = model(nodes, {"x": x, "y": y}, outs, opset=20)
    _, c, ref = check_ops(m, {"x": x, "y": y})
    for k in outs[:len(ops)]:
        assert c[k].tobytes() == ref[k].tobytes(), (k, c[k].view(np.uint32), ref[k].view(
            np.uint32))
    # (Max and Min of +0 and -0: ONNX Runtime's sign depends on the length of the data, its
    # vector loop and its tail disagreeing; not checked.)
    for k in ("mx", "mn"):
        assert np.array_equal(np.isnan(c[k]), np.isnan(ref[k])), k
        assert np.array_equal(c[k], ref[k], equal_nan=True), k


def test_trigonometric_and_hyperbolic_functions_everywhere_on_float32():
    """Random float32 of every exponent: Sin, Cos, Tan, Sinh, Cosh within half an ulp of the
    float64 value (rounded once from float64), Asinh and Acosh within 3e-7 (of
    max(1, |f|)), the simulator and the C bit for bit."""
    bits = np.random.default_rng(7).integers(0, 2 ** 32, 60000, dtype=np.uint64)
    x = bits.astype(np.uint32).view(np.float32)
    x = np.where(np.isfinite(x), x, np.float32(1.5)).reshape(300, 200)
    ops = {"Sin": np.sin, "Cos": np.cos, "Tan": np.tan, "Sinh": np.sinh, "Cosh": np.cosh,
           "Asinh": np.arcsinh, "Acosh": np.arccosh}
    m = model([node(op, ["x"], [f"y{i}"]) for i, op in enumerate(ops)], {"x": x},
              [f"y{i}" for i in range(len(ops))], opset=20)
    g = npukit.onnx.load(m)
    c, s = g.run("c", x=x).outputs, g.run("sim", x=x).outputs
    d = x.astype(np.float64)
    for i, (op, f) in enumerate(ops.items()):
        assert c[f"y{i}"].tobytes() == s[f"y{i}"].tobytes(), op
        with np.errstate(all="ignore"):
            want = f(d)
        got = c[f"y{i}"].astype(np.float64)
        fin = np.isfinite(want.astype(np.float32))
        assert np.array_equal(np.isnan(got), np.isnan(want)), op
        assert np.array_equal(got[~fin & ~np.isnan(want)],
                              want.astype(np.float32)[~fin & ~np.isnan(want)]), op
        if op in ("Asinh", "Acosh"):  # the stated measure: |error| / max(1, |f(x)|)
            err = np.abs(got[fin] - want[fin]) / np.maximum(1, np.abs(want[fin]))
            assert err.max() <= 3e-7, (op, err.max())
        else:
            ulp = np.spacing(np.abs(want[fin]).astype(np.float32)).astype(np.float64)
            assert (np.abs(got[fin] - want[fin]) <= 0.5 * ulp + 1e-300).all(), op
