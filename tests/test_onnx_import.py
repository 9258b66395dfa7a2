"""Importing ONNX models: constant folding, BatchNormalization folding, dropped nodes, the
errors that name the node, attribute and value npukit cannot take, running with outputs
passed or allocated, and a ten-layer CNN whose weights do not fit L2 (streamed from L3)."""

import itertools

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from onnx import TensorProto  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx_helpers import against_ort, model, node  # noqa: E402

import npukit.onnx  # noqa: E402
from npukit import DTypeError, ModelError, ShapeError  # noqa: E402
from npukit.onnx.lowering.elementwise import broadcast_view  # noqa: E402
from npukit.onnx.lowering.shape import transpose_steps  # noqa: E402

RNG = np.random.default_rng(2)


def randn(*shape, scale=1.0):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


def tiny():
    x = randn(1, 2, 6, 6)
    m = model([node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["y"])],
              {"x": x}, ["y"], {"w": randn(3, 2, 3, 3)})
    return m, x


# -- folding and rewriting ------------------------------------------------------------------

def test_constants_are_folded_shape_arithmetic_included():
    x = randn(1, 3, 4, 5)
    nodes = [node("Shape", ["x"], ["s"]),
             node("Gather", ["s", "i0"], ["n"], axis=0),
             node("Unsqueeze", ["n", "ax"], ["n1"]),
             node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             node("Reshape", ["x", "shape"], ["flat"]),
             node("ConstantOfShape", ["cs"], ["ones"], value=h.make_tensor(
                 "v", TensorProto.FLOAT, [1], [0.5])),
             node("Constant", [], ["k"], value=h.make_tensor("k", TensorProto.FLOAT, [], [2.0])),
             node("Mul", ["ones", "k"], ["two"]),
             node("Add", ["flat", "two"], ["y"])]
    inits = {"i0": np.array(0, np.int64), "ax": np.array([0], np.int64),
             "minus1": np.array([-1], np.int64), "cs": np.array([1, 60], np.int64)}
    m = model(nodes, {"x": x}, ["y"], inits, opset=13)
    g, _, _ = against_ort(m, {"x": x}, ("c", "sim"))
    # Everything but the final Add was folded away or is a view (the Reshape).
    assert [info.ops for info in g.layers] == ["Add"]
    assert g.outputs["y"].shape == (1, 60)


def test_identity_dropout_and_same_type_cast_are_dropped():
    x = randn(1, 8)
    nodes = [node("Identity", ["x"], ["a"]), node("Dropout", ["a", "ratio"], ["b"]),
             node("Cast", ["b"], ["c"], to=TensorProto.FLOAT), node("Relu", ["c"], ["y"])]
    m = model(nodes, {"x": x}, ["y"], {"ratio": np.float32(0.3)}, opset=13)
    g, _, _ = against_ort(m, {"x": x})
    assert [info.ops for info in g.layers] == ["Relu"]


def test_symbolic_batch_becomes_one_and_input_shapes_override_it():
    m, x = tiny()
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    g = npukit.onnx.load(m)
    assert g.inputs["x"].shape == (1, 2, 6, 6)
    g2 = npukit.onnx.load(m, input_shapes={"x": (2, 2, 6, 6)})  # one image at a time
    assert g2.inputs["x"].shape == (2, 2, 6, 6)
    x2 = np.concatenate([x, x[:, ::-1]])
    y2 = g2.run("c", x=x2).outputs["y"]
    assert y2[:1].tobytes() == g.run("c", x=x).outputs["y"].tobytes()
    assert not np.array_equal(y2[0], y2[1])
    with pytest.raises(ModelError, match="input_shapes names \\['nope'\\]"):
        npukit.onnx.load(m, input_shapes={"nope": (1,)})


def test_load_from_a_path(tmp_path):
    m, x = tiny()
    onnx.save(m, tmp_path / "tiny.onnx")
    g = npukit.onnx.load(tmp_path / "tiny.onnx")
    ref = npukit.onnx.load(m).run("c", x=x).outputs["y"]
    assert g.run("c", x=x).outputs["y"].tobytes() == ref.tobytes()
    with pytest.raises(ModelError, match="cannot read the ONNX model"):
        npukit.onnx.load(tmp_path / "missing.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"\x01\x02not a model")
    with pytest.raises(ModelError, match="junk.onnx"):
        npukit.onnx.load(tmp_path / "junk.onnx")
    with pytest.raises(ModelError, match="takes a path or an onnx.ModelProto"):
        npukit.onnx.load(42)


# -- what is refused, by name ---------------------------------------------------------------

def refused(nodes, inputs, inits=None, opset=17, **kw):
    m = model(nodes, inputs, [nodes[-1].output[0]], inits, opset=opset)
    with pytest.raises(ModelError) as err:
        npukit.onnx.load(m, **kw)
    return str(err.value)


def test_an_unsupported_operator_is_named_with_its_node():
    msg = refused([node("Relu", ["x"], ["r"]), node("Det", ["r"], ["y"], name="det_1")],
                  {"x": randn(1, 4, 4)})
    assert msg.startswith("node 'det_1' (Det): operator 'Det' is not supported")


@pytest.mark.parametrize("case,match", [
    ("reflect", r"node 'n' \(Pad\): reflect pads 7, 0 on axis 3 of size 5"),
    ("indices", r"node 'n' \(MaxPool\): the Indices output is not supported"),
    ("lrn", r"node 'n' \(LRN\): the attribute size is required"),
    ("matmul", r"node 'n' \(MatMul\): a batched MatMul of int8 tensors is not supported outside"),
    ("dropout", r"node 'n' \(Dropout\): its mask output 'mask' is used"),
    ("conv3d", r"node 'n' \(Conv\): input 'x' has shape \(1, 2, 3, 4, 5\)"),
    ("quant-axis", r"node 'n' \(QuantizeLinear\): axis=1 with 2 scales"),
    ("cast", r"node 'n' \(Cast\): output 'y' has element type string; npukit computes on "),
])
def test_refusals_name_the_node_attribute_and_value(case, match):
    x = randn(1, 2, 5, 5)
    n = {"reflect": (node("Pad", ["x", "p"], ["y"], mode="reflect", name="n"), {"x": x},
                     {"p": np.array([0, 0, 0, 7, 0, 0, 0, 0], np.int64)}),
         "indices": (node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], name="n"),
                     {"x": x}, None),
         "lrn": (node("LRN", ["x"], ["y"], name="n"), {"x": x}, None),
         "matmul": (node("MatMul", ["a", "b"], ["y"], name="n"),
                    {"a": (randn(2, 4, 5) * 9).astype(np.int8),
                     "b": (randn(2, 5, 3) * 9).astype(np.int8)}, None),
         "dropout": (node("Dropout", ["x"], ["y", "mask"], name="n"), {"x": x}, None),
         "conv3d": (node("Conv", ["x", "w"], ["y"], name="n"), {"x": randn(1, 2, 3, 4, 5)},
                    {"w": randn(2, 2, 1, 1, 1)}),
         "quant-axis": (node("QuantizeLinear", ["x", "s", "z"], ["y"], name="n", axis=1),
                        {"x": x}, {"s": np.array([0.1, 0.2], np.float32),
                                   "z": np.array([0, 0], np.uint8)}),
         "cast": (node("Cast", ["x"], ["y"], to=TensorProto.STRING, name="n"), {"x": x}, None)
         }[case]
    nodes = [n[0]]
    if case == "dropout":
        nodes.append(node("Not", ["mask"], ["nm"]))
        m = model(nodes, n[1], ["y", "nm"], n[2], opset=13)
        with pytest.raises(ModelError, match=match):
            npukit.onnx.load(m)
        return
    assert pytest.raises(ModelError, npukit.onnx.load,
                         model(nodes, n[1], ["y"], n[2], opset=13)).match(match)


def test_relu_on_integers():
    q = RNG.integers(-128, 128, (1, 40)).astype(np.int8)
    m = model([node("Relu", ["q"], ["y"])], {"q": q}, ["y"], opset=14)
    _, stats, outs = against_ort(m, {"q": q}, ("c", "sim"))
    assert stats["c"]["y"].exact == 1.0 and (outs["c"]["y"] == np.maximum(q, 0)).all()


def test_dtype_option_and_unknown_inputs_are_refused():
    m, x = tiny()
    with pytest.raises(ModelError, match="dtype='int16'"):
        npukit.onnx.load(m, dtype="int16")
    g = npukit.onnx.load(m)
    with pytest.raises(ShapeError, match=r"missing inputs \['x'\], unknown arrays \['z'\]"):
        g.run("c", z=x)
    with pytest.raises(DTypeError, match="tensor 'x': float64 array"):
        g.run("c", x=x.astype(np.float64))
    with pytest.raises(ShapeError, match=r"tensor 'x': shape \(2, 6, 6\)"):
        g.run("c", x=x[0])


# -- running --------------------------------------------------------------------------------

def test_outputs_passed_are_written_in_place_and_missing_ones_allocated():
    m, x = tiny()
    g = npukit.onnx.load(m)
    want = g.run("c", x=x).outputs["y"]
    for be in ("c", "sim"):
        out = np.full(g.outputs["y"].shape, np.nan, np.float32)  # a canary in every element
        res = g.run(be, x=x, y=out)
        assert res.outputs["y"] is out
        assert not np.isnan(out).any() and out.tobytes() == want.tobytes()
    assert (want >= 0).all() and want.max() > 0  # a ReLU of nonzero data


@pytest.mark.slow
def test_a_ten_layer_cnn_with_weights_over_l2_streams_them_from_l3():
    """The suite's smaller version of the 224x224 benchmark (benchmarks/onnx_cnn.py): ten
    convolutions whose 6.3 MB of weights far exceed a 96 KB L2: the constants stay in
    flash and the layers stream them (or fetch them ahead)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    from onnx_cnn import cnn

    m = cnn(size=32, seed=1)
    x = {"x": np.random.default_rng(3).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)}
    g, stats, _ = against_ort(m, x, ("c",), l1_budget=16000, l2_budget=96 * 1024,
                              l3_budget=1 << 20, l3_flash_budget=8 << 20)
    convs = [info for info in g.layers if info.ops.startswith("Conv")]
    assert len(convs) >= 10
    weights = sum(t.size for t in g.tensors.values() if t.kind == "const")
    assert weights > 10 * 96 * 1024
    in_flash = [t for t in g.tensors.values() if t.kind == "const" and t.memory == "L3_FLASH"]
    assert sum(t.size for t in in_flash) > 9 * 96 * 1024
    streamed = [layer for layer in g.graph.layers if any(
        g.tensors[t].kind == "const" for t in layer.streamed)]
    assert streamed, "no layer streams its weights from L3"
    assert g.memory["L2"].static + g.memory["L2"].dynamic <= 96 * 1024
    assert stats["c"]["prob"].max_rel < 1e-5


# -- the pure helpers -----------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_broadcast_view_reads_as_numpy_broadcasts(out, data):
    """Reading each operand through the [planes, rows, cols] view gives numpy's
    broadcast of it (or the view is refused)."""
    shapes = []
    for _ in range(2):
        keep = data.draw(st.lists(st.booleans(), min_size=len(out), max_size=len(out)))
        s = tuple(d if k else 1 for d, k in zip(out, keep))
        shapes.append(s[data.draw(st.integers(0, len(s) - 1)):] if len(s) > 1 else s)
    if np.broadcast_shapes(*shapes) != tuple(out):
        return
    view = broadcast_view(tuple(out), shapes, max_cols=data.draw(st.integers(1, 8)))
    if view is None:
        return
    (p, r, c), fulls = view
    assert p * r * c == int(np.prod(out))
    for s, (fp, fr, fc) in zip(shapes, fulls):
        a = np.arange(int(np.prod(s))).reshape(s)
        want = np.broadcast_to(a, out).reshape(p, r, c)
        flat = a.reshape(-1)
        pi, ri, ci = np.meshgrid(np.arange(p), np.arange(r), np.arange(c), indexing="ij")
        n_r, n_c = (r if fr else 1), (c if fc else 1)
        idx = (pi * fp) * (n_r * n_c) + (ri * fr) * n_c + ci * fc
        assert (flat[idx] == want).all()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=5), st.randoms())
def test_transpose_steps_compose_to_the_permutation(shape, rnd):
    perm = list(range(len(shape)))
    rnd.shuffle(perm)
    a = np.arange(int(np.prod(shape))).reshape(shape)
    cur = a.reshape(-1)
    for p, a_, b, i in transpose_steps(tuple(shape), perm):
        cur = cur.reshape(p, a_, b, i).transpose(0, 2, 1, 3).reshape(-1)
    assert (cur == a.transpose(perm).reshape(-1)).all()


@pytest.mark.slow
def test_the_generated_c_compiles_without_warnings(tmp_path):
    """Every kind of layer an import makes (float and integer), compiled with
    -std=c99 -pedantic -Wall -Wextra -Wshadow -Werror, plain and for this host's CPU (its
    vector kernels: AVX-512 and VNNI where it has them)."""
    import shutil
    import subprocess

    from test_onnx_ops import conv_model
    from test_onnx_quant import float_cnn

    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    qmodel = model([
        node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["c"],
             pads=[1, 1, 1, 1]),
        node("Flatten", ["c"], ["f"]),
        node("QLinearMatMul", ["f", "xs", "xz", "fw", "ws", "wz", "ys", "yz"], ["m"])],
        {"x": np.zeros((1, 2, 4, 4), np.uint8)}, ["m"],
        {"xs": np.float32(0.1), "xz": np.uint8(3), "w": np.ones((2, 2, 3, 3), np.int8),
         "ws": np.float32(0.2), "wz": np.int8(0), "ys": np.float32(0.3), "yz": np.uint8(4),
         "fw": np.ones((32, 3), np.int8)}, opset=13)
    for k, m in enumerate([conv_model()[0], float_cnn(), qmodel]):
        g = npukit.onnx.load(m, l1_budget=1500)
        c, _ = g.write(tmp_path / str(k))
        host = tmp_path / f"host{k}.c"  # the host schedule's feature-tile kernels
        host.write_text(g.host_graph().c_source())
        for source, cpu in itertools.product((c, host), ([], ["-march=native"])):
            r = subprocess.run(["cc", "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Wshadow",
                                "-Werror", *cpu, "-c", str(source), "-o", str(tmp_path / "o.o")],
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stderr


@pytest.mark.slow
def test_a_model_exported_from_torch(tmp_path):
    """Only when torch is installed (never required): a small network exported with
    torch.onnx.export imports and matches ONNX Runtime."""
    torch = pytest.importorskip("torch")
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 8, 3, padding=1, groups=8),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 5),
        torch.nn.Softmax(dim=1)).eval()
    x = torch.rand(1, 3, 16, 16) * 2 - 1
    path = tmp_path / "torch.onnx"
    try:
        torch.onnx.export(net, x, str(path), input_names=["x"], output_names=["y"],
                          opset_version=13, dynamo=False)
    except TypeError:  # a torch from before the dynamo switch
        torch.onnx.export(net, x, str(path), input_names=["x"], output_names=["y"],
                          opset_version=13)
    g, _, _ = against_ort(onnx.load(path), {"x": x.numpy()}, ("c",))
    assert any(info.ops.startswith("Conv") for info in g.layers)
