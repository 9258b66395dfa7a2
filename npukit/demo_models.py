"""``npukit demo`` sections on programs written elsewhere: network blocks in the vocabulary
PyTorch's exporters write, a kernel in the public Compass DSL's style, and an imported model
on the host against ONNX Runtime."""

from __future__ import annotations

import numpy as np

from . import demo_checks as dc
from .demo_checks import Check, heading, not_run, on_threads, timed, timing_note
from .errors import CompilerError

_NEEDS_ONNX = '  (needs the onnx and onnxruntime packages: pip install "npukit[onnx]")'


def _has_onnx() -> bool:
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def _weights(rng, shapes: dict[str, tuple], scale: float = 0.3) -> list:
    """Initializers of random normal float32 weights by name."""
    from onnx import numpy_helper

    return [numpy_helper.from_array((rng.normal(size=s) * scale).astype(np.float32), name)
            for name, s in shapes.items()]


def _model(name: str, nodes: list, x_shape: tuple, y_shape: tuple, inits: list):
    """A float32 model of one input ``x`` and one output ``y``, opset 17."""
    from onnx import TensorProto
    from onnx import helper as h

    g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                     [h.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def mobilenet_v3_block(rng, c: int = 16, e: int = 48, hw: int = 28):
    """A MobileNetV3 inverted residual as PyTorch's exporter writes it (opset 17): 1x1
    expansion, HardSwish, 3x3 depthwise, HardSwish, squeeze-excite (GlobalAveragePool, 1x1,
    Relu, 1x1, HardSigmoid, Mul), 1x1 projection, residual Add."""
    from onnx import helper as h

    s = e // 4
    inits = _weights(rng, {"we": (e, c, 1, 1), "be": (e,), "wd": (e, 1, 3, 3), "bd": (e,),
                           "ws1": (s, e, 1, 1), "bs1": (s,), "ws2": (e, s, 1, 1), "bs2": (e,),
                           "wp": (c, e, 1, 1), "bp": (c,)})
    nodes = [h.make_node("Conv", ["x", "we", "be"], ["c1"]),
             h.make_node("HardSwish", ["c1"], ["a1"]),
             h.make_node("Conv", ["a1", "wd", "bd"], ["c2"], pads=[1, 1, 1, 1], group=e),
             h.make_node("HardSwish", ["c2"], ["a2"]),
             h.make_node("GlobalAveragePool", ["a2"], ["g"]),
             h.make_node("Conv", ["g", "ws1", "bs1"], ["s1"]), h.make_node("Relu", ["s1"], ["r"]),
             h.make_node("Conv", ["r", "ws2", "bs2"], ["s2"]),
             h.make_node("HardSigmoid", ["s2"], ["gate"], alpha=1 / 6),
             h.make_node("Mul", ["a2", "gate"], ["se"]),
             h.make_node("Conv", ["se", "wp", "bp"], ["p"]),
             h.make_node("Add", ["p", "x"], ["y"])]
    return _model("MobileNetV3Block", nodes, (1, c, hw, hw), (1, c, hw, hw), inits)


def encoder_block(rng, seq: int = 16, d: int = 64, heads: int = 4):
    """A transformer encoder block as PyTorch's exporter writes it (opset 17):
    LayerNormalization, four-head self-attention (MatMul per head as batched MatMul, the
    scores scaled, Softmax), a residual Add, LayerNormalization, an MLP with GELU written with
    Erf, a residual Add."""
    from onnx import helper as h
    from onnx import numpy_helper

    dh = d // heads
    inits = _weights(rng, {"wq": (d, d), "wk": (d, d), "wv": (d, d), "wo": (d, d),
                           "w1": (d, 4 * d), "w2": (4 * d, d), "b1": (d,), "b2": (d,)}, 0.2)
    inits += _weights(rng, {"g1": (d,), "g2": (d,)}, 1.0)
    consts = {"heads": np.array([1, seq, heads, dh], np.int64),
              "rows": np.array([1, seq, d], np.int64),
              "scale": np.float32(1 / np.sqrt(dh)), "half": np.float32(0.5),
              "one": np.float32(1), "inv_sqrt2": np.float32(1 / np.sqrt(2))}
    inits += [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()]
    nodes = [h.make_node("LayerNormalization", ["x", "g1", "b1"], ["ln1"], axis=-1)]
    for t, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        nodes += [h.make_node("MatMul", ["ln1", f"w{t}"], [f"{t}0"]),
                  h.make_node("Reshape", [f"{t}0", "heads"], [f"{t}1"]),
                  h.make_node("Transpose", [f"{t}1"], [t], perm=perm)]
    nodes += [h.make_node("MatMul", ["q", "k"], ["qk"]),
              h.make_node("Mul", ["qk", "scale"], ["scores"]),
              h.make_node("Softmax", ["scores"], ["att"], axis=-1),
              h.make_node("MatMul", ["att", "v"], ["o0"]),
              h.make_node("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
              h.make_node("Reshape", ["o1", "rows"], ["o2"]),
              h.make_node("MatMul", ["o2", "wo"], ["o3"]), h.make_node("Add", ["x", "o3"], ["r1"]),
              h.make_node("LayerNormalization", ["r1", "g2", "b2"], ["ln2"], axis=-1),
              h.make_node("MatMul", ["ln2", "w1"], ["f1"]),
              h.make_node("Mul", ["f1", "inv_sqrt2"], ["e0"]), h.make_node("Erf", ["e0"], ["e1"]),
              h.make_node("Add", ["e1", "one"], ["e2"]), h.make_node("Mul", ["f1", "e2"], ["e3"]),
              h.make_node("Mul", ["e3", "half"], ["gelu"]),
              h.make_node("MatMul", ["gelu", "w2"], ["f2"]),
              h.make_node("Add", ["r1", "f2"], ["y"])]
    return _model("EncoderBlock", nodes, (1, seq, d), (1, seq, d), inits)


def blocks() -> list[Check]:
    """A MobileNetV3 block and a transformer encoder block, written as PyTorch's exporter
    writes them, imported and planned for GAP8, run in C and on the simulator and checked
    against ONNX Runtime. Returns its checks."""
    heading("Network blocks as PyTorch exports them: MobileNetV3 and a transformer encoder")
    names = [f"{b}: {what}" for b in ("MobileNetV3 block", "encoder block")
             for what in ("C = ONNX Runtime", "C = sim")]
    if not _has_onnx():
        print(_NEEDS_ONNX)
        return [Check(n, None) for n in names]
    from .onnx import load

    rng = np.random.default_rng(3)
    checks = []
    for title, m, shape in (("MobileNetV3 block", mobilenet_v3_block(rng), (1, 16, 28, 28)),
                            ("encoder block", encoder_block(rng), (1, 16, 64))):
        g = load(m, target="gap8", l1_budget=48000, l2_budget=512 * 1024)
        ops = sorted({n.op_type for n in m.graph.node})
        x = {"x": rng.uniform(-1, 1, shape).astype(np.float32)}
        sim = g.run("sim", **x)
        print(f"  {title}: {len(m.graph.node)} ONNX nodes ({', '.join(ops)}) -> "
              f"{len(g.layers)} layers; {sim.report.cycles} simulated GAP8 cycles")
        checks += c_against_ort(title, g, m, x, sim.outputs["y"])
    return checks


def c_against_ort(title: str, g, m, feed: dict, sim_y: np.ndarray) -> list[Check]:
    """Run imported model ``g`` (of ONNX model ``m``) in C on ``feed``; print and return its
    two checks: output ``y`` within 1e-4 of ONNX Runtime's, and bit for bit the simulator's
    ``sim_y`` (not run without a C compiler)."""
    from .onnx.check import compare, ort_run

    try:
        c = g.run("c", **feed).outputs["y"]
    except CompilerError as e:
        return [Check(f"{title}: C = ONNX Runtime", not_run(e)),
                Check(f"{title}: C = sim", not_run(e))]
    ref, _ = ort_run(m, feed)
    cmp = compare("y", c, ref["y"])
    same = c.tobytes() == sim_y.tobytes()
    print(f"    C vs ONNX Runtime: max relative error {cmp.max_rel:.1e} "
          f"({'within 1e-4' if cmp.within else 'DIFFERS'}); C = sim: "
          f"{'same' if same else 'DIFFERS'}")
    return [Check(f"{title}: C = ONNX Runtime", cmp.within), Check(f"{title}: C = sim", same)]


def compass_public() -> list[Check]:
    """examples/dsl/relu_add_int8.py, a kernel written as the public Compass DSL's tutorials
    write them, run as its users run it: called on the host (the simulator), built with
    ``BuildManager`` (the C back end), with the cycles per TEC. Returns its checks."""
    heading("A kernel in the public Compass DSL's style: BuildManager, S.vload, tail masks")
    import runpy
    from pathlib import Path

    from .dsl import BuildManager, build
    from .dsl.testing import rand

    path = Path(__file__).resolve().parent.parent / "examples" / "dsl" / "relu_add_int8.py"
    if not path.exists():
        print("  (the examples/ folder of the source tree is needed for this section)")
        return []
    kernel = runpy.run_path(str(path))["relu_add_int8"]
    n = 10_001  # not a multiple of 4 TECs x 32 lanes: every TEC ends on a masked vector
    a, b = rand(n, "int8"), rand(n, "int8")
    want = np.maximum(np.clip(a.astype(np.int16) + b, -128, 127), 0).astype(np.int8)
    sim = np.full(n + 8, 99, np.int8)  # canaries past n
    kernel(a, b, sim[:n], n)
    report = build(kernel, target="compass", n=n).run(
        "sim", a=a, b=b, out=np.empty(n, np.int8)).report
    print(f"  relu_add_int8 on {n} int8 values, 4 TECs: cycles per TEC "
          f"{' '.join(map(str, report.core_cycles))}")
    same = bool((sim[:n] == want).all() and (sim[n:] == 99).all())
    c = np.full(n + 8, 99, np.int8)
    try:
        ex = BuildManager(target="X2_1204").build(kernel)
        ex(a, b, c[:n], n)
        c_same = c.tobytes() == sim.tobytes()
    except CompilerError as e:
        c_same = not_run(e)
    c_text = {None: "no C compiler", True: "same", False: "DIFFERS"}[c_same]
    print(f"  kernel(a, b, out, n), the simulator: {'= numpy' if same else 'MISMATCH'}, "
          f"nothing past n; BuildManager().build(kernel), the C: {c_text} as the simulator")
    return [Check("public Compass DSL kernel: simulator = numpy", same),
            Check("public Compass DSL kernel: C = simulator", c_same)]


def host_speed() -> list[Check]:
    """The MobileNetV3 block on the host: ``g.run("c")`` (the host schedule, through the
    graph's compiled handle) timed against ONNX Runtime in the same loop, the same bytes as
    the simulator. Returns its checks."""
    heading("An imported model on the host, timed against ONNX Runtime")
    name = "host: MobileNetV3 block C = sim"
    if not _has_onnx():
        print(_NEEDS_ONNX)
        return [Check(name, None)]
    from .onnx import load
    from .onnx.check import ort_session

    rng = np.random.default_rng(4)
    m = mobilenet_v3_block(rng, c=24, e=96, hw=56)
    g = load(m, target="gap8", l1_budget=48000, l2_budget=512 * 1024)
    x = {"x": rng.uniform(-1, 1, (1, 24, 56, 56)).astype(np.float32)}
    sim = g.run("sim", **x).outputs["y"]
    try:
        same = g.run("c", **x).outputs["y"].tobytes() == sim.tobytes()
    except CompilerError as e:
        return [Check(name, not_run(e))]
    sess = ort_session(m, threads=1, int8_fused=False)
    t = timed({"npukit": lambda: on_threads(1, lambda: g.run("c", **x)),
               "ort": lambda: sess.run(None, x)})
    print(f"  MobileNetV3 block, 24x56x56 (expansion 96), 1 thread:\n"
          f"    npukit g.run('c') {t['npukit'].text()}\n"
          f"    ONNX Runtime      {t['ort'].text()}\n"
          f"    npukit took "
          f"{dc.ratio(t['npukit'], t['ort'], 'ONNX Runtime', dc.machine_load(), dc.cpu_count())}")
    print(f"  bytes as the simulator's: {'same' if same else 'DIFFERS'}")
    print(timing_note())
    return [Check(name, same)]
