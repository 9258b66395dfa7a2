"""``npukit demo``: one section per capability, each quick and self-checking.

Each section prints what it shows and returns its checks: ``Check(name, ok)``, ``ok``
``None`` when a check could not run (no C compiler). ``demo()`` ends with a summary line
and returns every check; ``npukit demo`` exits non-zero when one failed.
"""

from __future__ import annotations

import time

import numpy as np

from . import kernels as K
from .demo_checks import Check, heading, not_run, on_threads, summary, timed, timing_note
from .demo_cycles import cycles
from .demo_models import blocks, compass_public, host_speed
from .demo_transformers import transformers
from .easy import build, spec
from .errors import CompilerError
from .layout import Layout


def layouts() -> list[Check]:
    """The Torq EasyKernel guide's tensor editing: vectorize, fuse and broadcast as pure
    layout values, each checked against the numpy view it stands for."""
    heading("Layouts (tensor editing of the Torq EasyKernel guide)")
    x = Layout((2, 5, 7), "int8")
    steps = [
        ("x = Layout((2, 5, 7), 'int8')", x),
        ("x.vectorize(16)", x.vectorize(16)),
        ("x.vectorize(4)[1, 2, 1]  (3 valid lanes)", x.vectorize(4)[1, 2, 1]),
        ("Layout((1, 1, 1), 'int8').broadcast_as(x)", Layout((1, 1, 1), "int8").broadcast_as(x)),
        ("Layout((5, 7), 'int8').broadcast_as(x)", Layout((5, 7), "int8").broadcast_as(x)),
    ]
    y = Layout((5, 3, 3, 2), "int8")
    steps += [
        ("y = Layout((5, 3, 3, 2), 'int8')", y),
        ("y.vectorize(16)  (2 of 16 lanes used)", y.vectorize(16)),
        ("y.fuse(y.dense_dims()).vectorize(16)", y.fuse(y.dense_dims()).vectorize(16)),
        ("y[1:4, :, ::2].dense_dims()", y[1:4, :, ::2].dense_dims()),
    ]
    width = max(len(s) for s, _ in steps)
    for text, value in steps:
        print(f"  {text:<{width}}  -> {value!r}")
    # The same views in numpy, read through each layout from a flat buffer.
    data = np.arange(70, dtype=np.int8)
    seen = {
        "broadcast [5,7] -> [2,5,7]": (Layout((5, 7), "int8").broadcast_as(x).view(data),
                                       np.broadcast_to(data[:35].reshape(5, 7), (2, 5, 7))),
        "fuse + vectorize [5,3,3,2]": (y.fuse(4).vectorize(16).view(np.arange(96, dtype=np.int8))
                                       .reshape(-1)[:90], np.arange(90, dtype=np.int8)),
        "slice [1:4, :, ::2]": (y[1:4, :, ::2].view(np.arange(90, dtype=np.int8)),
                                np.arange(90, dtype=np.int8).reshape(5, 3, 3, 2)[1:4, :, ::2]),
    }
    checks = [Check(f"layout {name} = numpy", bool(np.array_equal(got, want)))
              for name, (got, want) in seen.items()]
    print(f"  read through a flat buffer, {sum(bool(c.ok) for c in checks)} of {len(checks)} "
          f"of these views equal numpy's (broadcast_to, reshape, slicing)")
    return checks


def _mul_case(kern, s1, s2, so, dtype="int8", **kw):
    """Build and simulate one mul kernel; returns (program, result, matches numpy, inputs,
    output)."""
    rng = np.random.default_rng(0)
    lo, hi = (-128, 127)
    a = rng.integers(-100, 100, s1).astype(dtype)
    b = rng.integers(-100, 100, s2).astype(dtype)
    bs = np.array([7, 3], np.int32)
    prog = build(kern, target="torq", input1=spec(s1, dtype), input2=spec(s2, dtype),
                 bias_scale=spec((2,), "int32"), output=spec(so, dtype), shift=6, out_min=lo,
                 out_max=hi, **kw)
    out = np.zeros(so, dtype)
    res = prog.run(input1=a, input2=b, bias_scale=bs, output=out)
    # numpy oracle: the guide's formula with round-half-up division by 2**6.
    want = np.clip(np.floor_divide((a.astype(np.int64) * b + 7) * 3 + 32, 64), lo, hi)
    data = out[tuple(slice(0, n) for n in want.shape)]  # a padded output's data part
    return prog, res, bool((data == want).all()), dict(input1=a, input2=b, bias_scale=bs), out


def _reduce_case(vector):
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (32, 300)).astype(np.int8)
    prog = build(K.reduce_rows, target="torq", input=spec((32, 300), "int8"),
                 output=spec((300,), "int8"), vector=vector)
    out = np.zeros(300, np.int8)
    res = prog.run(input=x, output=out)
    ok = bool((out == np.clip(x.astype(np.int64).sum(0), -128, 127)).all())
    return prog, res, ok, dict(input=x), out


def _vanilla_cycles(n: int) -> int:
    from .sim.timing import timeline

    prog = build(K.mul_vanilla, target="torq", input1=spec((n,), "int8"),
                 input2=spec((n,), "int8"), bias_scale=spec((2,), "int32"),
                 output=spec((n,), "int8"), shift=6, out_min=-128, out_max=127)
    return timeline(prog).cycles


def _c_agrees(prog, inputs, sim_out) -> tuple[str, bool | None]:
    """Run the C back end on the same inputs: 'same' when every output bit equals the
    simulator's; with the check's outcome (None: no C compiler)."""

    out = np.zeros_like(sim_out)
    try:
        prog.run("c", **inputs, **{prog.params[-1][0].name: out})
    except CompilerError as e:
        return f"no C: {str(e).splitlines()[0][:30]}", not_run(e)
    same = out.tobytes() == sim_out.tobytes()
    return ("same" if same else "DIFFERS"), same


def easykernel() -> list[Check]:
    """The Torq EasyKernel guide's six kernels on the simulated Torq slice."""
    heading("EasyKernel (the Torq EasyKernel guide) on the simulated Torq slice")
    cases = [
        ("vanilla mul", "[1000]", lambda: _mul_case(K.mul_vanilla, (1000,), (1000,), (1000,))),
        ("vectorized mul, padded store", "[1000]->[1008]",
         lambda: _mul_case(K.mul_vectorized_store, (1000,), (1000,), (1008,))),
        ("vectorized mul, append", "[1000]",
         lambda: _mul_case(K.mul_vectorized, (1000,), (1000,), (1000,))),
        ("n-dim mul, multi-iterator", "[5,3,3,2]",
         lambda: _mul_case(K.mul_ndim, (5, 3, 3, 2), (5, 3, 3, 2), (5, 3, 3, 2))),
        ("fused mul", "[5,3,3,2]",
         lambda: _mul_case(K.mul, (5, 3, 3, 2), (5, 3, 3, 2), (5, 3, 3, 2))),
        ("broadcast mul", "[2,5,7]x[1,1,1]",
         lambda: _mul_case(K.mul, (2, 5, 7), (1, 1, 1), (2, 5, 7))),
        ("reduce rows, Act-width", "[32,300]", lambda: _reduce_case("act")),
        ("reduce rows, ALU-width", "[32,300]", lambda: _reduce_case("alu")),
    ]
    print("  cycles: simulated; roofline: the bound in cycles (the busiest unit's work);")
    print("  vs vanilla: the vanilla mul's cycles on as many elements, over this kernel's")
    print(f"  {'kernel':<30}{'shape':<17}{'cycles':>7}{'roofline':>9}{'vs vanilla':>11}"
          f"{'LRAM bytes':>11}  numpy     C = sim")
    checks = []
    for name, shape, make in cases:
        prog, res, ok, inputs, out = make()
        # Speed-up over the vanilla kernel (one element per iteration) on as many elements.
        vanilla = _vanilla_cycles(prog.params[0][1].size) if "mul" in name else None
        speed = f"{vanilla / res.cycles:.1f}x" if vanilla else "-"
        c_text, c_ok = _c_agrees(prog, inputs, out)
        checks += [Check(f"{name}: numpy", ok), Check(f"{name}: C = sim", c_ok)]
        print(f"  {name:<30}{shape:<17}{res.cycles:>7}{res.report.roofline_cycles:>9}"
              f"{speed:>11}{res.report.bytes_moved.get('LRAM', 0):>11}"
              f"  {'ok' if ok else 'MISMATCH':<8}  {c_text}")
    prog = _mul_case(K.mul, (2, 5, 7), (5, 1), (2, 5, 7))[0]
    print("\n  Derived NDL descriptors for mul [2,5,7] x [5,1] (counts/strides in bytes):")
    for t in prog.transfers():
        print(f"    {t.tensor:<11}{t.src:>5} -> {t.dst:<5} offset {t.offset:<3} counts "
              f"{str(t.counts):<16} strides {t.strides}")
    return checks


def autotiler() -> list[Check]:
    """The GAP AutoTiler's ports: tiling, L1 use, simulated cycles and how much DMA hides."""
    heading("AutoTiler (the GAP AutoTiler) on the simulated GAP8 cluster")
    import runpy
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "examples" / "tiler"
    if not root.exists():
        print("  (the examples/ folder of the source tree is needed for this section)")
        return [Check("AutoTiler ports (examples/ folder not found)", None)]
    print(f"  {'user kernel':<20}{'tiles':>6}{'tile':>5}{'last':>5}{'L1 used / budget':>19}"
          f"{'cycles':>9}{'DMA':>8}{'core':>8}{'overlap':>9}  numpy     C")
    checks = []
    for script, kernel, run in _TILER_CASES:
        mod = runpy.run_path(str(root / f"{script}.py"))
        m = mod["model"]()
        t = m.tiling(kernel)
        label = kernel if kernel in m.kernels and not m.groups else f"{script.upper()} group"
        ok, res, out = run(mod, m, "sim")
        busy = res.report.busy
        dma = sum(b for u, b in busy.items() if "dma" in u)
        core = busy.get("core", 0)
        hidden = (dma + core - res.cycles) / max(min(dma, core), 1)
        c_text, c_ok = _c_matches(run, mod, m, out)
        checks += [Check(f"{label}: numpy", ok), Check(f"{label}: C = sim", c_ok)]
        print(f"  {label:<20}{t.n_tiles:>6}{t.tile:>5}{t.last_tile:>5}"
              f"{f'{t.l1_used} / {t.l1_budget}':>19}{res.cycles:>9}{dma:>8}{core:>8}"
              f"{hidden:>8.0%}  {'ok' if ok else 'MISMATCH':<8}  {c_text}")
    print("  tiles and rows; L1 in bytes; cycles: simulated, DMA and core: busy cycles;")
    print("  a group's row shows its first kernel's tiling and the whole group's cycles;")
    print("  overlap: share of the shorter of DMA and compute hidden behind the other;")
    print("  C: 'same' = bit-identical with the simulator, 'close' = within 1e-5 of the largest")
    return checks


def _run_matadd(mod, m, backend):
    rng = np.random.default_rng(0)
    a, b = rng.integers(-2**30, 2**30, (2, 300, 200), dtype=np.int32)
    out = np.zeros((300, 200), np.int32)
    res = m.program("MatAdd").run(backend, In1=a, In2=b, Out=out)
    return bool((out == a + b).all()), res, out


def _run_matmax(mod, m, backend):
    x = np.random.default_rng(1).integers(-2**31, 2**31 - 1, (300, 200), dtype=np.int32)
    out = np.zeros(1, np.int32)
    res = m.program("MatMax").run(backend, In=x, Out=out)
    return bool(out[0] == x.max()), res, out


def _run_favorite(mod, m, backend):
    rng = np.random.default_rng(2)
    in1, in2 = rng.integers(-10**6, 10**6, (2, 4, 75, 75), dtype=np.int32)
    bias = np.array([5, -7, 11, 100], np.int32)
    out = np.zeros((4, 75, 75), np.int32)
    res = m.program("MyFavoriteKernel").run(backend, In1=in1, In2=in2, Out=out, Bias=bias)
    return bool((out == mod["reference"](in1, in2, bias)).all()), res, out


def _run_conv(mod, m, backend):
    rng = np.random.default_rng(3)
    x = rng.integers(-2000, 2000, (3, 40, 40), dtype=np.int16)
    f = rng.integers(-300, 300, (2, 3, 5, 5), dtype=np.int16)
    bias = np.array([1000, -500], np.int16)
    out = np.zeros((2, 36, 36), np.int16)
    res = m.program("CnnConv5x5").run(backend, In=x, Filter=f, Out=out, Norm=10, Bias=bias)
    return bool((out == mod["reference"](x, f, bias, 10)).all()), res, out


def _run_fft(mod, m, backend, dim=256):
    img = np.random.default_rng(4).integers(0, 256, (dim, dim), dtype=np.uint8)
    tw, swap = mod["tables"](dim)
    out = np.zeros((dim, dim), np.complex64)
    res = m.program("FFT2D").run(backend, In=img, Out=out, Twiddles=tw, SwapTable=swap)
    want = np.fft.fft2(img.astype(np.float64))
    return bool(np.abs(out - want).max() <= 1e-5 * np.abs(want).max()), res, out


def _c_matches(run, mod, m, sim_out) -> tuple[str, bool | None]:
    """'same' when the C back end's output equals the simulator's bit for bit; for float
    results computed differently by the two (the FFT's C kernels vs numpy), 'close'; with
    the check's outcome (None: no C compiler)."""

    try:
        ok, _, out = run(mod, m, "c")
    except CompilerError as e:
        return f"no C: {str(e).splitlines()[0][:30]}", not_run(e)
    if out.tobytes() == sim_out.tobytes():
        return "same", True
    scale = np.abs(sim_out).max()
    close = bool(ok and np.abs(out - sim_out).max() <= 1e-5 * scale)
    return ("close" if close else "DIFFERS"), close


_TILER_CASES = [
    ("matadd", "MatAdd", _run_matadd),
    ("matmax", "MatMax", _run_matmax),
    ("my_favorite_kernel", "MyFavoriteKernel", _run_favorite),
    ("cnn_conv5x5", "CnnConv5x5", _run_conv),
    ("fft2d", "FFT2DHorizontal", _run_fft),
]


def graph() -> list[Check]:
    """The GAP AutoTiler document's MNIST graph: its memory plan, cycles per layer, and the
    check against a float64 numpy forward pass. Returns its checks."""
    heading("AutoTiler graph (GAP AutoTiler's MnistModel) on the simulated GAP8")
    import runpy
    import tempfile
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "examples" / "graph" / "mnist.py"
    if not path.exists():
        print("  (the examples/ folder of the source tree is needed for this section)")
        return [Check("MNIST graph (examples/ folder not found)", None)]
    ex = runpy.run_path(str(path))
    with tempfile.TemporaryDirectory() as tmp:
        w = ex["weights"]()
        ex["write_tensors"](tmp, w)
        m = ex["MnistModel"](48000, 300 * 1024, 8 * 1024 * 1024, 20 * 1024 * 1024,
                             const_dir=tmp)
        from .tiler import AT_GRAPH_TRACE_EXEC, AT_OPT_OFF

        m.AT_SetGraphCtrl(AT_GRAPH_TRACE_EXEC, AT_OPT_OFF)
        g = m.graph("MnistCNN")
        mem = g.memory
        print(f"  L2: {mem['L2'].static} B static (promoted constants) + {mem['L2'].dynamic} B "
              f"dynamic of {mem['L2'].budget} B; L1 {mem['L1'].dynamic} B; flash "
              f"{mem['L3_FLASH'].static} B")
        print(f"  {'tensor':<14}{'memory':<8}{'area':<9}{'offset':>8}{'size':>8}  layers")
        for t in g.tensors.values():
            off = "" if t.offset is None else t.offset
            print(f"  {t.name:<14}{t.memory:<8}{t.area or '':<9}{off:>8}{t.size:>8}  "
                  f"{t.live[0]}..{t.live[1]}")
        x = ex["digits"](1)[0]
        sim = np.zeros(10, np.int16)
        res = g.run("sim", Input0=x, Output0=sim)
        print(f"  {'layer':<26}{'tiles':>6}{'L1 B':>8}{'cycles':>10}")
        for layer in g.layers:
            print(f"  {layer.name:<26}{layer.tiling.n_tiles:>6}{layer.tiling.l1_used:>8}"
                  f"{res.report.layers[layer.name]:>10}")
        print(f"  whole run {res.cycles} cycles (+{res.report.construct_cycles} in the "
              f"constructor's promotions)")
        _, want = ex["forward"](x, w)
        err, bound = np.abs(sim / 2**15 - want).max(), ex["error_bound"](w)
        text, same = _c_graph_agrees(g, x, sim)
        argmax = bool(sim.argmax() == want.argmax())
        print(f"  Output0 vs float64 numpy: max error {err:.1e} (bound {bound:.1e}), argmax "
              f"{'same' if argmax else 'DIFFERS'}; C = sim: {text}")
    plan = mem["L2"].static == 124692 and mem["L2"].dynamic == 11264
    return [Check("MNIST graph: the document's L2 plan", plan),
            Check("MNIST graph: numpy within the bound, same argmax",
                  bool(err <= bound and argmax)),
            Check("MNIST graph: C = sim", same)]


def _c_graph_agrees(g, x, sim_out) -> tuple[str, bool | None]:

    out = np.zeros_like(sim_out)
    try:
        g.run("c", Input0=x, Output0=out)
    except CompilerError as e:
        return f"no C: {str(e).splitlines()[0][:30]}", not_run(e)
    same = out.tobytes() == sim_out.tobytes()
    return ("same" if same else "DIFFERS"), same


def silu() -> list[Check]:
    """The Compass DSL tutorial's float16 SiLU: a 512-entry interpolated table in the Act,
    two cores."""
    heading("SiLU by table (the Compass DSL tutorial) on the simulated Torq slices")
    from .lut import linear_approx

    x = np.linspace(-12, 12, 4096).astype(np.float16)
    out = np.zeros_like(x)
    runs = K.silu_fp16_on_cores(x, out, "torq")
    lut, p = K.silu_table()
    u = np.ldexp(np.maximum(x.astype(np.float32), np.float32(p["clamp"][0])), p["scale_exp"])
    want = linear_approx(lut, u.astype(np.float32), p["step_bits"], p["bias"],
                         extended=True).astype(np.float16)
    xf = x.astype(np.float64)
    err = np.abs(out.astype(np.float64) - xf / (1 + np.exp(-xf)))
    report = runs[0][3].report
    print(f"  {lut.size}-entry table ({lut.offset_dtype} offsets, {lut.slope_dtype} slopes): "
          f"{report.peak['LUT']} B of LUT memory, a constant of the program")
    for core, (lo, hi), _, res in runs:
        print(f"  core {core}: elements {lo}..{hi - 1}, cycles {res.cycles}")
    same = bool(np.array_equal(out, want))
    print(f"  {x.size} float16 values in [-12, 12]: max abs error {err.max():.5f} vs float64 "
          f"SiLU, match numpy: {same}")
    return [Check("SiLU table: simulator = numpy linear_approx", same)]


def compass_dsl() -> list[Check]:
    """The Compass DSL tutorial's LUT kernel as written there, on the simulated Zhouyi core:
    cycles per TEC, the three readings bit for bit, the error against float64 SiLU. Returns
    its checks."""
    heading("Compass DSL tutorial kernel (silu_fp16) on the simulated Zhouyi core")
    import runpy
    from pathlib import Path

    from .dsl import build

    path = Path(__file__).resolve().parent.parent / "examples" / "dsl" / "silu_fp16.py"
    if not path.exists():
        print("  (the examples/ folder of the source tree is needed for this section)")
        return []
    mod = runpy.run_path(str(path))
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    x = every[np.isfinite(every)]
    prog = build(mod["silu_fp16"], target="compass", n=x.size)
    sim = np.full(x.size, np.nan, np.float16)
    res = prog.run("sim", in0=x, out0=sim)
    print(f"  n = {x.size} (every finite float16) on {prog.target.cores} TECs, "
          f"{prog.target.memories['lsram'].size // 1024} KiB lsram each")
    print(f"  cycles per TEC: {' '.join(map(str, res.report.core_cycles))}  "
          f"(DMA busy {res.report.busy['dma']}, vector unit {res.report.busy['vec']})")
    same = sim.tobytes() == mod["tutorial_silu"](x).tobytes()
    c = np.full(x.size, np.nan, np.float16)
    try:
        prog.run("c", in0=x, out0=c)
        c_same = c.tobytes() == sim.tobytes()
    except CompilerError as e:
        c_same = not_run(e)
    print(f"  simulator == numpy reading of the tutorial: {same};  C == simulator: "
          f"{'no C compiler' if c_same is None else c_same}")
    xf = x.astype(np.float64)
    with np.errstate(over="ignore"):
        err = np.abs(sim.astype(np.float64) - xf / (1 + np.exp(-xf)))
    inside = np.abs(xf) <= 10
    print(f"  max abs error vs float64 SiLU: {err[inside].max():.5f} on [-10, 10] "
          f"(at x = {xf[inside][err[inside].argmax()]:g}), {err[~inside].max():.5f} outside")
    return [Check("Compass DSL SiLU: simulator = numpy reading of the tutorial", same),
            Check("Compass DSL SiLU: C = simulator", c_same),
            Check("Compass DSL SiLU: error below 0.01 on [-10, 10]",
                  bool(err[inside].max() < 0.01))]


def _tiny_cnn():
    """A small float32 CNN built in code with onnx.helper: Conv + Relu + MaxPool, a depthwise
    Conv, a residual Add, GlobalAveragePool, Gemm and Softmax."""
    from onnx import TensorProto
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(0)

    def w(*shape, scale=0.3):
        return nh.from_array((rng.normal(size=shape) * scale).astype(np.float32))

    inits = [w(8, 3, 3, 3), w(8), w(8, 1, 3, 3), w(10, 8), w(10)]
    for t, name in zip(inits, ["w1", "b1", "w2", "fw", "fb"]):
        t.name = name
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Conv", ["p1", "w2"], ["c2"], pads=[1, 1, 1, 1], group=8),
             h.make_node("Add", ["c2", "p1"], ["a"]),
             h.make_node("GlobalAveragePool", ["a"], ["g"]), h.make_node("Flatten", ["g"], ["f"]),
             h.make_node("Gemm", ["f", "fw", "fb"], ["z"], transB=1),
             h.make_node("Softmax", ["z"], ["y"])]
    g = h.make_graph(nodes, "TinyCNN",
                     [h.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                     [h.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)])


def onnx_model() -> list[Check]:
    """An ONNX model built in code, imported (``npukit.onnx.load``): its plan and layers, a
    run in C and on the simulator, the check against ONNX Runtime. Returns its checks."""
    heading("ONNX model (npukit.onnx) on the simulated GAP8, checked against ONNX Runtime")
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        print('  (needs the onnx and onnxruntime packages: pip install "npukit[onnx]")')
        return [Check("ONNX CNN: fused layers", None), Check(_SECOND_LOAD, None),
                Check("ONNX CNN: C = ONNX Runtime", None),
                Check("ONNX CNN: C = sim", None), Check("ONNX CNN: tile schedule C = sim", None),
                Check(_LINKED, None)]
    from .onnx import load
    from .onnx.check import compare, ort_run

    m = _tiny_cnn()
    t = time.perf_counter()
    g = load(m, target="gap8", l1_budget=8000, l2_budget=64 * 1024)
    first = time.perf_counter() - t
    mem = g.memory
    print(f"  {len(m.graph.node)} ONNX nodes -> {len(g.layers)} layers; L2 {mem['L2'].static} B "
          f"static + {mem['L2'].dynamic} B dynamic of {mem['L2'].budget} B; L1 "
          f"{mem['L1'].dynamic} of {mem['L1'].budget} B")
    x = {"x": np.random.default_rng(1).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)}
    sim = g.run("sim", **x)
    print(f"  {'layer':<20}{'computes':<22}{'tiles':>7}{'cycles':>9}")
    for info, layer in zip(g.layers, g.graph.layers):
        print(f"  {info.name:<20}{info.ops:<22}{layer.tiling.n_tiles:>7}"
              f"{sim.report.layers[info.name]:>9}")
    fused = any(info.ops == "Conv+Relu+MaxPool" and len(info.nodes) == 3 for info in g.layers)
    again = _second_load(m, x, g, first, sim.outputs["y"])
    ref, _ = ort_run(m, x)
    try:
        c = g.run("c", **x).outputs["y"]  # the host schedule: large tiles
        tiles = g.run("c", schedule="tiles", **x).outputs["y"]  # GAP8's L1 tiles
        linked = _c_found_by_plan(m, x, sim.outputs["y"])
    except CompilerError as e:
        print(f"  C: not run ({str(e).splitlines()[0][:40]})")
        return [Check("ONNX CNN: fused layers", fused), again,
                Check("ONNX CNN: C = ONNX Runtime", not_run(e)),
                Check("ONNX CNN: C = sim", not_run(e)),
                Check("ONNX CNN: tile schedule C = sim", not_run(e)), Check(_LINKED, not_run(e))]
    cmp = compare("y", c, ref["y"])
    same = c.tobytes() == sim.outputs["y"].tobytes()
    same_tiles = tiles.tobytes() == sim.outputs["y"].tobytes()
    print(f"  C vs ONNX Runtime: max relative error {cmp.max_rel:.1e} "
          f"({'within 1e-4' if cmp.within else 'DIFFERS'}); C = sim: "
          f"{'same' if same else 'DIFFERS'} (host schedule: "
          f"{max(t.tiling.n_tiles for t in g.host_graph().layers)} tile(s) a layer at most)")
    print(f"  C of GAP8's tile schedule (every L1 tile as on the chip) = sim: "
          f"{'same' if same_tiles else 'DIFFERS'}")
    return [Check("ONNX CNN: fused layers", fused), again,
            Check("ONNX CNN: C = ONNX Runtime", cmp.within), Check("ONNX CNN: C = sim", same),
            Check("ONNX CNN: tile schedule C = sim", same_tiles), linked]


_SECOND_LOAD = "ONNX CNN: plan cache"
_LINKED = "ONNX CNN: C found by its plan"


def _c_found_by_plan(m, x, sim_out) -> Check:
    """The model loaded once more, as a new process would: its plan read back, and its
    compiled C found in the compile cache by the plan's key (``graph_c.linked``: no C
    generated, no compiler run), its outputs the simulator's."""
    from .onnx import load, plan_cache
    from .tiler.graph_c import linked

    if not plan_cache.enabled():
        print("  C found by its plan: not shown (the plan cache is off: NPUKIT_PLAN_CACHE=0)")
        return Check(_LINKED, None)
    g = load(m, target="gap8", l1_budget=8000, l2_budget=64 * 1024)
    found = linked(g.host_graph())
    same = g.run("c", **x).outputs["y"].tobytes() == sim_out.tobytes()
    how = "found in the compile cache by the plan" if found else "NOT FOUND by the plan"
    print(f"  loaded again: its C {how} (no C generated, no compiler run); C = sim: "
          f"{'same' if same else 'DIFFERS'}")
    return Check(_LINKED, found and same)


def _second_load(m, x, g, first: float, sim_out) -> Check:
    """The same model loaded again: its plan read back from the plan cache
    (``npukit.onnx.plan_cache``), the same plan and the same simulated outputs."""
    from .onnx import load, plan_cache

    if not plan_cache.enabled():
        print("  second load: not shown (the plan cache is off: NPUKIT_PLAN_CACHE=0)")
        return Check(_SECOND_LOAD, None)
    t = time.perf_counter()
    g2 = load(m, target="gap8", l1_budget=8000, l2_budget=64 * 1024)
    second = time.perf_counter() - t
    same = g2.summary() == g.summary() and \
        g2.run("sim", **x).outputs["y"].tobytes() == sim_out.tobytes()
    how = "the plan read from the plan cache" if g2.from_plan_cache else "PLANNED AGAIN"
    print(f"  loaded again: {how} in {second * 1e3:.0f} ms (first load {first * 1e3:.0f} ms"
          f"{', itself from the cache' if g.from_plan_cache else ''}); same plan and "
          f"simulated outputs: {'yes' if same else 'NO'}")
    return Check(_SECOND_LOAD, g2.from_plan_cache and same)


def validation() -> list[Check]:
    """A uint8 QDQ model (the ONNX section's CNN quantized by ONNX Runtime's
    ``quantize_static``) validated on a handful of inputs by ``npukit.onnx.validate`` on the
    local process pool. Returns its checks."""
    heading("Validating a QDQ model on a data set (local worker processes)")
    names = ["validate: QDQ outputs bit-exact vs ONNX Runtime", "validate: no input lost"]
    try:
        import onnx
        from onnxruntime.quantization import (
            CalibrationDataReader,
            QuantFormat,
            QuantType,
            quantize_static,
        )
    except ImportError:
        print('  (needs the onnx and onnxruntime packages: pip install "npukit[onnx]")')
        return [Check(n, None) for n in names]
    import logging
    import tempfile
    from pathlib import Path

    from .onnx import validate

    rng = np.random.default_rng(2)
    xs = [{"x": rng.uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)} for _ in range(6)]

    class Calibration(CalibrationDataReader):
        def __init__(self):
            self.data = iter(xs)

        def get_next(self):
            return next(self.data, None)

    logging.getLogger().setLevel(logging.ERROR)  # the tool's advice to pre-process
    with tempfile.TemporaryDirectory() as tmp:
        f, q = Path(tmp) / "float.onnx", Path(tmp) / "qdq.onnx"
        onnx.save(_tiny_cnn(), f)
        quantize_static(str(f), str(q), Calibration(), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        try:
            v = validate(q, xs, f, l1_budget=8000, l2_budget=64 * 1024, workers=2)
        except CompilerError as e:
            print(f"  C: not run ({str(e).splitlines()[0][:40]})")
            return [Check(n, not_run(e)) for n in names]
    for line in str(v).splitlines():
        print(f"  {line}")
    model = v.outputs[0]
    return [Check(names[0], model.exact == 1.0 and v.within),
            Check(names[1], v.count == len(xs) and not v.failed)]


def tensor_operations() -> list[Check]:
    """The TPP tensor compiler: a GEMM with a ReLU last touch and an einsum contraction,
    each checked against numpy, timed beside OpenBLAS (np.matmul) in interleaved rounds.
    Returns its checks (not run when there is no C compiler)."""
    heading("Tensor operations (TPP tensor compiler) on the C back end")
    from . import tpp

    names = ("TPP gemm + relu last touch = numpy", "TPP einsum abk,kc->abc = numpy")
    rng = np.random.default_rng(0)
    n = 512
    op = tpp.TensorOperation("float32", "zero", "gemm", "relu", ("m", "n", "k"), ("prim",) * 3,
                             (n, n, n), (1, 0, n), (0, n, 1), (1, n, 0)).optimize()
    a = rng.standard_normal(n * n, dtype=np.float32)  # column-major n x n blocks
    b = rng.standard_normal(n * n, dtype=np.float32)
    out, ref = np.empty(n * n, np.float32), np.empty((n, n), np.float32)
    try:
        op(a, b, out)
    except CompilerError as exc:
        print(f"  (C not run: {str(exc).splitlines()[0]})")
        return [Check(name, not_run(exc)) for name in names]
    want = np.maximum(a.reshape(n, n).T.astype(np.float64) @ b.reshape(n, n).T, 0)
    ok_gemm = bool(np.abs(out.reshape(n, n).T - want).max() < 1e-3)
    x = rng.standard_normal((8, 128, 512), dtype=np.float32)
    w = rng.standard_normal((512, 256), dtype=np.float32)
    y = tpp.einsum("abk,kc->abc", x, w)
    ok_einsum = bool(np.allclose(y, np.einsum("abk,kc->abc", x, w), atol=1e-3))
    ein = tpp.einsum_operation("abk,kc->abc", x, w)
    t = timed({"gemm": lambda: op(a, b, out),
               "gemm numpy": lambda: np.matmul(b.reshape(n, n), a.reshape(n, n), out=ref),
               "einsum": lambda: tpp.einsum("abk,kc->abc", x, w),
               "einsum numpy": lambda: np.matmul(x.reshape(-1, 512), w)})
    print(f"  relu(A B), {n}^3 float32, optimizer's {op.history[-1][1][-1]}; matches numpy: "
          f"{ok_gemm}")
    print(f"    tpp                   {t['gemm'].text()}")
    print(f"    OpenBLAS (np.matmul)  {t['gemm numpy'].text()}")
    print(f"  einsum('abk,kc->abc') on {x.shape} x {w.shape}: one {ein.prim_main} operation, "
          f"{ein.history[-1][1][-1]}; matches numpy: {ok_einsum}")
    print(f"    tpp.einsum            {t['einsum'].text()}")
    print(f"    OpenBLAS (np.matmul)  {t['einsum numpy'].text()}")
    print(timing_note())
    return [Check(n, ok) for n, ok in zip(names, (ok_gemm, ok_einsum))]


def speed() -> list[Check]:
    """The C back end at speed: the float16 SiLU of the Compass DSL tutorial as one fused
    loop reading a table, on one and on two host threads (the same bits as the simulator
    either way), called through a compiled handle; ``nk.build`` at 256M elements."""
    heading("Speed: fused LUT loops on host threads, compiled handles, linear builds")

    n = 1 << 23
    x = (np.random.default_rng(0).standard_normal(n) * 4).astype(np.float16)
    prog = build(K.silu_fp16, target="torq", input=spec((n,), "float16"),
                 output=spec((n,), "float16"))
    sim = np.zeros(n, np.float16)
    prog.run("sim", input=x, output=sim)
    checks = []
    for t in (1, 2):
        text, ok = on_threads(t, lambda: _c_agrees(prog, {"input": x}, sim))
        threads = f"{t} thread{'s' * (t > 1)}"
        print(f"  SiLU on {n} float16 values, C on {threads}: {text} as the simulator")
        checks.append(Check(f"speed: SiLU on {threads}: C = sim", ok))
    if all(c.ok for c in checks):
        fn, out = prog.compile("c"), np.empty_like(x)
        fn(x, out)  # the output's pages mapped before timing

        xf, tmp = x.astype(np.float32), np.empty(n, np.float32)

        def numpy_silu():  # float32 arithmetic, rounded to float16 once
            np.negative(xf, out=tmp)
            np.exp(tmp, out=tmp)
            np.add(tmp, 1, out=tmp)
            np.divide(xf, tmp, out=tmp)
            out[...] = tmp
        t = timed({"1": lambda: on_threads(1, lambda: fn(x, out)),
                   "2": lambda: on_threads(2, lambda: fn(x, out)), "numpy": numpy_silu})
        print(f"    fn = prog.compile('c'), 1 thread    {t['1'].text()}")
        print(f"    fn = prog.compile('c'), 2 threads   {t['2'].text()}")
        print(f"    numpy x / (1 + exp(-x)) in float32  {t['numpy'].text()}")
    from .sim.timing import timeline

    def build_big():
        return build(K.mul, target="torq", input1=spec((1 << 28,), "int8"),
                     input2=spec((1 << 28,), "int8"), bias_scale=spec((2,), "int32"),
                     output=spec((1 << 28,), "int8"), shift=6, out_min=-128, out_max=127)

    big = build_big()
    t = timed({"build": build_big, "cycles": lambda: timeline(big)})
    print(f"  nk.build of the int8 multiply on {1 << 28} elements (bounds and coverage checked "
          f"from the index\n  expressions), then its cycle model ({timeline(big).cycles} cycles):")
    print(f"    nk.build     {t['build'].text()}")
    print(f"    cycle model  {t['cycles'].text()}")
    print(timing_note())
    return checks


def _lut() -> list[Check]:
    """The LUT section (``npukit.lut.demo``, imported when it runs)."""
    from .lut.demo import demo as lut_demo

    return [Check(name, held) for name, held in lut_demo()]


# ``npukit demo SECTION`` runs one; ``npukit demo`` runs them all, in this order.
SECTIONS = {
    "layouts": (layouts, "layouts as values: vectorize, fuse, broadcast (EasyKernel)"),
    "easykernel": (easykernel, "the Torq EasyKernel guide's kernels, simulated and in C"),
    "silu": (silu, "the float16 SiLU by a 512-entry table on two Torq slices"),
    "dsl": (compass_dsl, "the Compass DSL tutorial's kernel on the simulated Zhouyi core"),
    "autotiler": (autotiler, "the GAP AutoTiler's user kernels: tilings, cycles, C"),
    "graph": (graph, "the GAP AutoTiler's MNIST graph: memory plan, layers, C"),
    "cycles": (cycles, "GAP8 cycles fitted to published measurements; npukit calibrate"),
    "onnx": (onnx_model, "an ONNX CNN imported, run and checked against ONNX Runtime"),
    "validate": (validation, "a QDQ model validated on a data set by local worker processes"),
    "tpp": (tensor_operations, "TPP tensor operations: GEMM + ReLU, einsum, vs OpenBLAS"),
    "speed": (speed, "the C back end at speed: fused LUT loops, threads, linear builds"),
    "lut": (_lut, "lookup tables designed and measured (AIE API, TPP, Compass DSL)"),
    "blocks": (blocks, "MobileNetV3 and transformer blocks as PyTorch exports them"),
    "compass": (compass_public, "a kernel in the public Compass DSL's style (BuildManager)"),
    "host": (host_speed, "an imported model on the host, timed against ONNX Runtime"),
    "transformers": (transformers, "BERT and GPT-2 with masks; embeddings left in flash"),
}


def sections() -> str:
    """One line per section of ``SECTIONS``: its name and what it shows.

    >>> print(sections().splitlines()[0])
    layouts       layouts as values: vectorize, fuse, broadcast (EasyKernel)
    """
    width = max(map(len, SECTIONS)) + 2
    return "\n".join(f"{name:<{width}}{text}" for name, (_, text) in SECTIONS.items())


def demo(only: list[str] | None = None) -> list[Check]:
    """Run every section (or those named in ``only``, keys of ``SECTIONS``), print the
    summary line and return every check."""
    print("npukit demo: one sequential description, every transfer derived, simulated and run.")
    checks = [c for name, (fn, _) in SECTIONS.items() if only is None or name in only
              for c in fn()]
    print(f"\n{summary(checks)}")
    return checks
