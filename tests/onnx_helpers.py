"""Building ONNX models with ``onnx.helper`` and checking npukit's import of them against ONNX
Runtime (the oracle for what a model computes)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
from onnx import helper as h
from onnx import numpy_helper as nh

import npukit.onnx
from npukit.onnx.check import compare, ort_run

MS = h.make_opsetid("com.microsoft", 1)


def node(op: str, ins: list[str], outs: list[str], **attrs) -> onnx.NodeProto:
    return h.make_node(op, ins, outs, **attrs)


def model(nodes, inputs: dict[str, np.ndarray], outputs: list[str], inits=None, opset=17,
          extra_opsets=()) -> onnx.ModelProto:
    """A model of ``nodes``: typed inputs from example arrays, outputs typed by ONNX shape
    inference, ``inits`` as initializers."""
    g = h.make_graph(nodes, "m",
                     [h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                      for n, a in inputs.items()],
                     [onnx.ValueInfoProto(name=o) for o in outputs],
                     [nh.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset), *extra_opsets])
    typed = onnx.shape_inference.infer_shapes(m)
    types = {v.name: v.type for v in list(typed.graph.value_info) + list(typed.graph.output)}
    for o in m.graph.output:
        if o.name in types and types[o.name].tensor_type.elem_type:
            o.type.CopyFrom(types[o.name])
    return m


def small_cnn(seed: int = 0, w0=None):
    """A 3x3 convolution with ReLU, a 1x1 one, a residual Add, a global average pooling."""
    r = np.random.default_rng(seed)
    inits = {"w0": r.normal(size=(8, 3, 3, 3)) * 0.4 if w0 is None else w0,
             "b0": r.normal(size=8) * 0.1,
             "w1": r.normal(size=(8, 8, 1, 1)) * 0.3, "b1": r.normal(size=8) * 0.1}
    inits = {k: np.asarray(v, np.float32) for k, v in inits.items()}
    nodes = [node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             node("Relu", ["c0"], ["r0"]),
             node("Conv", ["r0", "w1", "b1"], ["c1"], kernel_shape=[1, 1]),
             node("Add", ["c1", "r0"], ["s"]),
             node("GlobalAveragePool", ["s"], ["y"])]
    x = r.uniform(-1, 1, (1, 3, 20, 20)).astype(np.float32)
    return model(nodes, {"x": x}, ["y"], inits, opset=13), x


def expose(m: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    """``m`` with tensors ``names`` added as graph outputs (their types inferred)."""
    out = onnx.ModelProto()
    out.CopyFrom(m)
    typed = onnx.shape_inference.infer_shapes(out)
    types = {v.name: v.type for v in typed.graph.value_info}
    for n in names:
        vi = onnx.ValueInfoProto(name=n)
        vi.type.CopyFrom(types[n])
        out.graph.output.append(vi)
    return out


def against_ort(m, inputs: dict[str, np.ndarray], backends=("c",), exact=False, **load_kw):
    """Import ``m``, run it on ``backends`` and compare every output with ONNX Runtime's;
    returns (graph, {backend: {output: Comparison}}, {backend: outputs}). Asserts every
    output is within the tolerance (a dequantized output: one step of its scale), or with
    ``exact`` bit-identical to ONNX Runtime's, and that the simulator and the C agree bit
    for bit."""
    ref, _ = ort_run(m, inputs)
    g = npukit.onnx.load(m, **load_kw)
    stats, outs = {}, {}
    for be in backends:
        res = g.run(be, **inputs)
        outs[be] = {k: v.copy() for k, v in res.outputs.items()}
        stats[be] = {k: compare(k, res.outputs[k], ref[k], g.output_steps.get(k)) for k in ref}
        bad = [str(c) for c in stats[be].values()
               if not c.within or (exact and c.exact < 1.0)]
        assert not bad, f"{be}: " + "; ".join(bad)
    if len(backends) > 1:
        a, b = (outs[be] for be in backends[:2])
        for k in a:
            assert a[k].tobytes() == b[k].tobytes(), f"{k}: simulator and C differ"
    return g, stats, outs


def quantize_qdq(m: onnx.ModelProto, calibration: list[dict], folder: Path, act: str = "u8",
                 per_channel: bool = False) -> onnx.ModelProto:
    """``m`` quantized by ONNX Runtime's own tool (``quantize_static``, QDQ format, int8
    weights) with ``act`` ("u8" or "s8") activations, calibrated on the input dicts
    ``calibration``; the files go to ``folder``."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Calibration(CalibrationDataReader):
        def __init__(self):
            self.data = iter(calibration)

        def get_next(self):
            return next(self.data, None)

    logging.getLogger().setLevel(logging.ERROR)  # the tool's advice to pre-process
    onnx.save(m, folder / "float.onnx")
    out = folder / f"qdq-{act}-{'channel' if per_channel else 'tensor'}.onnx"
    quantize_static(str(folder / "float.onnx"), str(out), Calibration(),
                    quant_format=QuantFormat.QDQ, per_channel=per_channel,
                    activation_type=QuantType.QUInt8 if act == "u8" else QuantType.QInt8,
                    weight_type=QuantType.QInt8)
    return onnx.load(out)
