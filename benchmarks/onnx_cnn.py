"""A ten-convolution CNN at 224x224 imported from ONNX, planned for GAP8 with the GAP AutoTiler
document's budgets (L1 48000 B, L2 300 KB, L3 8 MB, flash 20 MB): its 6.3 MB of weights are
far over L2, so they stay in flash and are streamed (or fetched ahead) by their layers; the
activations that do not fit L2 live in L3 RAM. The graph runs on the C back end and is
compared with ONNX Runtime on the same machine and thread count (1), in float32 and as an
int8 QDQ model made by ONNX Runtime's quantization tool.

Run: python benchmarks/onnx_cnn.py [SIZE]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

WIDTHS = (16, 32, 32, 64, 64, 128, 128, 128, 256, 256)
POOL_AFTER = (0, 1, 3, 5, 7)
BUDGETS = dict(l1_budget=48000, l2_budget=300 * 1024, l3_budget=8 << 20,
               l3_flash_budget=20 << 20)


def cnn(size: int = 224, widths=WIDTHS, seed: int = 0):
    """3x3 convolutions with ReLU (max pooling after some), global average pooling, a
    1000-way Gemm and a softmax; outputs ``logits`` and ``prob``."""
    from onnx import TensorProto
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(seed)
    nodes, inits, cur, c = [], {}, "x", 3
    for i, w in enumerate(widths):
        inits[f"w{i}"] = (rng.normal(size=(w, c, 3, 3)) * np.sqrt(2 / (9 * c))).astype(
            np.float32)
        inits[f"b{i}"] = (rng.normal(size=w) * 0.05).astype(np.float32)
        nodes += [h.make_node("Conv", [cur, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1],
                              kernel_shape=[3, 3]),
                  h.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        cur, c = f"r{i}", w
        if i in POOL_AFTER:
            nodes.append(h.make_node("MaxPool", [cur], [f"p{i}"], kernel_shape=[2, 2],
                                     strides=[2, 2]))
            cur = f"p{i}"
    inits["fw"] = (rng.normal(size=(1000, c)) * 0.05).astype(np.float32)
    inits["fb"] = (rng.normal(size=1000) * 0.01).astype(np.float32)
    nodes += [h.make_node("GlobalAveragePool", [cur], ["g"]),
              h.make_node("Flatten", ["g"], ["f"]),
              h.make_node("Gemm", ["f", "fw", "fb"], ["logits"], transB=1),
              h.make_node("Softmax", ["logits"], ["prob"], axis=1)]
    g = h.make_graph(nodes, "cnn10", [h.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                [1, 3, size, size])],
                     [h.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1000]),
                      h.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 1000])],
                     [nh.from_array(v, k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)])


def quantized(path: Path, size: int, out: Path) -> None:
    """The model as int8 QDQ (ONNX Runtime's quantize_static, per-channel weights) over a
    calibration set of 8 random images."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Calibration(CalibrationDataReader):
        def __init__(self):
            r = np.random.default_rng(5)
            self.data = iter([{"x": r.uniform(-1, 1, (1, 3, size, size)).astype(np.float32)}
                              for _ in range(8)])

        def get_next(self):
            return next(self.data, None)

    quantize_static(str(path), str(out), Calibration(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    per_channel=True)


def measure(path: Path, label: str, repeat: int = 5) -> None:
    import npukit.onnx
    from npukit.onnx.check import compare, ort_run, random_inputs

    t0 = time.perf_counter()
    g = npukit.onnx.load(path, **BUDGETS)
    t_load = time.perf_counter() - t0
    consts = [t for t in g.tensors.values() if t.kind == "const"]
    weights = sum(t.size for t in consts)
    flash = sum(t.size for t in consts if t.memory == "L3_FLASH")
    streaming = [layer.name for layer in g.graph.layers
                 if any(g.tensors[t].kind == "const" for t in layer.streamed)]
    fetched = sorted({f.tensor for f in g.graph.fetches})
    x = random_inputs(g)
    t0 = time.perf_counter()
    res = g.run("c", **x)
    t_first = time.perf_counter() - t0
    walls = [g.run("c", **x).wall_time for _ in range(repeat)]
    ref, _ = ort_run(path, x, threads=1)
    ort_walls = [ort_run(path, x, threads=1)[1] for _ in range(repeat)]
    report = g.report()
    m = g.memory
    print(f"\n== {label} ==")
    convs = sum(i.ops.startswith(("Conv", "QLinearConv")) for i in g.layers)
    print(f"  {len(g.layers)} layers ({convs} convolutions); import and plan {t_load:.2f} s")
    print(f"  weights {weights} B ({weights / BUDGETS['l2_budget']:.1f}x the L2 budget of "
          f"{BUDGETS['l2_budget']} B); in flash {flash} B; {len(fetched)} fetched into L2 ahead "
          f"of their layer, {len(streaming)} layers stream weights from L3")
    print(f"  L2 {m['L2'].static} B static + {m['L2'].dynamic} B dynamic; L3 RAM "
          f"{m['L3'].dynamic} B; L1 {m['L1'].dynamic} B")
    ms = report.cycles / g.target.clock_mhz / 1e3
    print(f"  simulated GAP8: {report.cycles} cycles = {ms:.1f} ms at {g.target.clock_mhz:g} MHz")
    print(f"  host C run: {statistics.median(walls) * 1e3:.1f} ms (median of {repeat}; first run "
          f"with compiling {t_first:.1f} s); ONNX Runtime, 1 thread: "
          f"{statistics.median(ort_walls) * 1e3:.1f} ms")
    for name in res.outputs:
        print(f"  {compare(name, res.outputs[name], ref[name], g.output_steps.get(name))}")


def main(size: int = 224) -> None:
    import onnx

    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "cnn.onnx"
        onnx.save(cnn(size), f)
        measure(f, f"float32 CNN, {size}x{size}")
        q = Path(tmp) / "cnn_int8.onnx"
        quantized(f, size, q)
        measure(q, f"int8 QDQ CNN (quantize_static, per-channel), {size}x{size}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 224)
