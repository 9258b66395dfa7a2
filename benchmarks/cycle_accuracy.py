"""How accurate npukit's predicted GAP8 cycles are: the shipped gap8 target against published
GAP8 measurements (needs the onnx extra: pip install -e ".[onnx]").

1. Every row of npukit/targets/gap8_cycles.csv (the calibration set: GreenWaves' gap_sdk
   benchmarks/gap8/cnn on a GAPuino board, and GreenWaves' KWS DS-CNN S AT_GRAPH_PERF table
   on GVSoC), each layer built as a one-layer int8 model (``npukit.calibration``).
2. The KWS DS-CNN S network as a user builds it: a float model quantized by ONNX Runtime's
   quantize_static (int8 QDQ, per-channel weights), loaded with npukit.onnx (L1 46,736 B,
   L2 200 KiB), each layer's predicted cycles against the published one (depthwise and
   pointwise layers: the range of the four published), and the network's total against
   807,975 cycles (the published layers; npukit's QuantizeLinear and DequantizeLinear layers
   for the float input and output, which GreenWaves' int8 graph does not have, left out).

Each stated goal is printed as met or not. docs/targets.md's "How accurate are the cycles"
table is this script's output.

Run: python benchmarks/cycle_accuracy.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

import npukit
from npukit.calibration import predict, read_measurements

TARGET = npukit.target("gap8")
MEASURED = Path(TARGET.path).parent / "gap8_cycles.csv"
# GreenWaves' KWS DS-CNN S on GVSoC (AT_GRAPH_PERF), by layer kind: (low, high) cycles.
KWS = {"conv 10x4/2 1-64": (452888, 452888), "depthwise 3x3 64": (24688, 25941),
       "pointwise 64-64": (60839, 61355), "average pool 25x5": (6854, 6854),
       "linear 64-12": (1997, 1997), "softmax 12": (1674, 1674)}
KWS_TOTAL = 807975


def calibration_rows() -> list[float]:
    print(f"## The calibration set ({MEASURED.name}), predicted by the shipped gap8 target")
    print(f"({TARGET.costs.caveat()})\n")
    print(f"| {'measurement':<28} | cores | scope  | {'measured':>9} | {'predicted':>9} | ratio |")
    print("|---|---|---|---|---|---|")
    errors = []
    for m in read_measurements(MEASURED):
        p = predict(TARGET, m).cycles
        errors.append(p / m.cycles - 1)
        print(f"| {m.name:<28} | {m.cores:>5} | {m.scope:<6} | {m.cycles:>9,} | {p:>9,} | "
              f"{p / m.cycles:5.2f} |")
    return errors


def kws_model():
    """DS-CNN S (ARM's keyword-spotting model): a 10x4 stride-2 convolution of the 49x10
    MFCC plane to 64 channels, four depthwise 3x3 + pointwise 64->64 blocks (ReLU after
    each), 25x5 average pooling, a 64->12 linear layer, softmax."""
    from onnx import TensorProto
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(0)
    nodes, inits = [], {}

    def conv(name, x, cin, cout, k, s, pads, group=1):
        inits[name + "w"] = (rng.normal(size=(cout, cin // group, *k))
                             * np.sqrt(2 / (k[0] * k[1] * cin / group))).astype(np.float32)
        inits[name + "b"] = (rng.normal(size=cout) * 0.05).astype(np.float32)
        nodes.append(h.make_node("Conv", [x, name + "w", name + "b"], [name],
                                 kernel_shape=list(k), strides=list(s), pads=pads, group=group))
        nodes.append(h.make_node("Relu", [name], [name + "r"]))
        return name + "r"

    x = conv("c0", "x", 1, 64, (10, 4), (2, 2), [4, 1, 5, 1])
    for i in range(4):
        x = conv(f"dw{i}", x, 64, 64, (3, 3), (1, 1), [1, 1, 1, 1], group=64)
        x = conv(f"pw{i}", x, 64, 64, (1, 1), (1, 1), [0, 0, 0, 0])
    inits["fw"] = (rng.normal(size=(12, 64)) * 0.1).astype(np.float32)
    inits["fb"] = (rng.normal(size=12) * 0.01).astype(np.float32)
    nodes += [h.make_node("AveragePool", [x], ["ap"], kernel_shape=[25, 5]),
              h.make_node("Flatten", ["ap"], ["f"]),
              h.make_node("Gemm", ["f", "fw", "fb"], ["logits"], transB=1),
              h.make_node("Softmax", ["logits"], ["prob"], axis=1)]
    g = h.make_graph(nodes, "kws", [h.make_tensor_value_info("x", TensorProto.FLOAT,
                                                              [1, 1, 49, 10])],
                     [h.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 12])],
                     [nh.from_array(v, k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)])


def quantized(m, folder: Path) -> Path:
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Calibration(CalibrationDataReader):
        def __init__(self):
            r = np.random.default_rng(5)
            self.data = iter([{"x": r.normal(size=(1, 1, 49, 10)).astype(np.float32)}
                              for _ in range(8)])

        def get_next(self):
            return next(self.data, None)

    onnx.save(m, folder / "kws.onnx")
    quantize_static(str(folder / "kws.onnx"), str(folder / "kws_int8.onnx"), Calibration(),
                    quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8, per_channel=True)
    return folder / "kws_int8.onnx"


def kind(detail: str, ops: str) -> str | None:
    """The published layer a layer of npukit's plan is (None: not one of them)."""
    if ops == "QLinearConv":
        return ("conv 10x4/2 1-64" if "10x4" in detail else
                "depthwise 3x3 64" if "depthwise" in detail else "pointwise 64-64")
    return {"QAveragePool": "average pool 25x5", "QLinearMatMul": "linear 64-12",
            "QLinearSoftmax": "softmax 12"}.get(ops)


def kws_network() -> tuple[list[float], float]:
    import logging

    import npukit.onnx
    logging.getLogger().setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as d:
        g = npukit.onnx.load(quantized(kws_model(), Path(d)), target="gap8",
                             l1_budget=46736, l2_budget=200 * 1024)
    report = g.report()
    print("\n## GreenWaves' KWS DS-CNN S (int8 QDQ from quantize_static, npukit.onnx)\n")
    print(f"| {'layer':<22} | {'is':<18} | {'published':>15} | {'predicted':>9} | error |")
    print("|---|---|---|---|---|")
    errors, total = [], 0
    for info in g.layers:
        k = kind(info.detail, info.ops)
        if k is None:
            continue
        lo, hi = KWS[k]
        p = report.layers[info.name]
        total += p
        err = 0.0 if lo <= p <= hi else (p / lo - 1 if p < lo else p / hi - 1)
        errors.append(err)
        pub = f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}"
        print(f"| {info.name:<22} | {k:<18} | {pub:>15} | {p:>9,} | {100 * err:+4.0f}% |")
    print(f"| {'total (these layers)':<22} | {'':<18} | {KWS_TOTAL:>15,} | {total:>9,} | "
          f"{100 * (total / KWS_TOTAL - 1):+4.0f}% |")
    return errors, total / KWS_TOTAL - 1


def main() -> None:
    cal = calibration_rows()
    board = [e for m, e in zip(read_measurements(MEASURED), cal) if "gap_sdk" in m.source]
    kws, total = kws_network()
    print("\n## Goals")
    goals = [
        ("every gap_sdk benchmark row within 15%", max(abs(e) for e in board) <= 0.15,
         f"worst {100 * max(abs(e) for e in board):.0f}%"),
        ("KWS DS-CNN S layers: median error within 15%",
         float(np.median(np.abs(kws))) <= 0.15, f"median {100 * np.median(np.abs(kws)):.0f}%"),
        ("KWS DS-CNN S total within 25%", abs(total) <= 0.25, f"{100 * total:+.0f}%"),
    ]
    for text, ok, value in goals:
        print(f"- {text}: {'MET' if ok else 'NOT MET'} ({value})")


if __name__ == "__main__":
    main()
