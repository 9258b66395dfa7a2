"""Random QDQ models against ONNX Runtime: a small float model of Conv, Gemm, MatMul, Add,
Softmax, MaxPool/AveragePool, Tanh, deep residual chains (``x + Relu(Conv(x))`` up to 16
times), Swish (``x * Sigmoid(x)``) and global-average-pooling heads, quantized by ONNX
Runtime's own tool (``onnxruntime.quantization.quantize_static``, QDQ format; int8 or uint8
activations, int8 weights per tensor or per channel), then imported by npukit and run on the
simulator next to ONNX Runtime. Every quantized output must equal ONNX Runtime's bit for
bit; a float output (a last ``Tanh`` the tool leaves in float) lies within 1e-4 relative.

Model number k is what ``generate(k)`` builds from the random seed k. Used by
tests/test_onnx_fuzz.py (a few dozen models) and benchmarks/qdq_fuzz.py (hundreds).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnx_helpers import model, node, quantize_qdq

import npukit.onnx
from npukit.onnx.check import Comparison, compare, ort_run

onnxruntime.set_default_logger_severity(3)  # its notes on unused initializers and shapes


@dataclass(frozen=True)
class Case:
    """One random float model, how it is quantized, and the input it runs on."""

    number: int
    float_model: onnx.ModelProto
    ops: tuple[str, ...]
    activations: str  # "u8" or "s8"
    per_channel: bool
    inputs: dict

    def describe(self) -> str:
        return (f"model {self.number}: {' -> '.join(self.ops)}, {self.activations} activations, "
                f"{'per-channel' if self.per_channel else 'per-tensor'} weights")


class _Builder:
    """Grows a chain of operations on one tensor, recording its shape."""

    def __init__(self, r: np.random.Generator):
        self.r, self.nodes, self.inits, self.ops, self.k = r, [], {}, [], 0
        self.dropped = False  # a pooling whose shape ONNX and ONNX Runtime see differently
        self.shapes: list[tuple[str, list[int]]] = []  # the tensors so far

    def name(self, what: str) -> str:
        self.k += 1
        return f"{what}{self.k}"

    def const(self, a: np.ndarray) -> str:
        n = self.name("c")
        self.inits[n] = a.astype(np.float32)
        return n

    def add(self, op: str, ins: list[str], **attrs) -> str:
        out = self.name("t")
        self.nodes.append(node(op, ins, [out], **attrs))
        brief = ",".join(f"{k}={v}" for k, v in attrs.items())
        self.ops.append(f"{op}({brief})" if brief else op)
        return out


def _spatial(b: _Builder, x: str, shape: list[int], op: str) -> tuple[str, list[int]]:
    """One spatial operation ``op`` (Conv, Pool, Tanh or Add) on an [1, C, H, W] tensor."""
    r = b.r
    C, H, W = shape[1:]
    if op == "Conv":
        k = int(r.choice([1, 3]))
        pad = int(r.integers(0, k // 2 + 1))
        s = int(r.choice([1, 1, 2]))
        depthwise = k == 3 and r.random() < 0.3
        out_ch = C if depthwise else int(r.integers(2, 7))
        w = r.normal(size=(out_ch, 1 if depthwise else C, k, k)) * (0.6 / k)
        ins = [x, b.const(w)]
        if r.random() < 0.8:
            ins.append(b.const(r.normal(size=out_ch) * 0.2))
        y = b.add("Conv", ins, kernel_shape=[k, k], pads=[pad] * 4, strides=[s, s],
                  group=C if depthwise else 1)
        H, W = (H + 2 * pad - k) // s + 1, (W + 2 * pad - k) // s + 1
        if r.random() < 0.4:
            y = b.add("Relu", [y])
        return y, [1, out_ch, H, W]
    if op == "Pool":
        kind = str(r.choice(["MaxPool", "AveragePool"]))
        k, s = (2, 2) if r.random() < 0.6 else (3, int(r.choice([1, 2])))
        pad = int(r.integers(0, 2)) if k > 1 else 0
        ceil = int(r.random() < 0.3)
        attrs = dict(kernel_shape=[k, k], strides=[s, s], pads=[pad] * 4, ceil_mode=ceil)
        if kind == "AveragePool":
            attrs["count_include_pad"] = int(r.integers(0, 2))
        y = b.add(kind, [x], **attrs)

        def size(n):
            span = n + 2 * pad - k
            out = (-(-span // s) if ceil else span // s) + 1
            if ceil and (out - 1) * s >= n + pad:  # ONNX Runtime drops the last window,
                b.dropped = True  # ONNX shape inference does not
                return out - 1
            return out
        return y, [1, C, size(H), size(W)]
    if op == "Tanh":
        return b.add("Tanh", [x]), shape
    if op == "Swish":
        return b.add("Mul", [x, b.add("Sigmoid", [x])]), shape
    if op == "Residual":  # a deep chain of residual joins: ONNX Runtime's QLinearAdd each
        for _ in range(int(r.integers(2, 17))):
            w = r.normal(size=(C, C, 3, 3)) * (0.3 / np.sqrt(C))
            y = b.add("Conv", [x, b.const(w), b.const(r.normal(size=C) * 0.1)],
                      kernel_shape=[3, 3], pads=[1, 1, 1, 1])
            x = b.add("Add", [x, b.add("Relu", [y])])
        return x, shape
    # a residual from an earlier tensor of this shape, else a constant per channel
    earlier = [t for t, s in b.shapes if s == shape and t != x]
    other = str(r.choice(earlier)) if earlier and r.random() < 0.7 else \
        b.const(r.normal(size=(1, C, 1, 1)) * 0.5)
    return b.add("Add", [x, other]), shape


def generate(number: int) -> Case:
    """Model ``number``: a Conv and 0-2 further spatial operations on [1, C, H, W], then
    (most of the time) maybe a GlobalAveragePool, a Flatten, a Gemm or MatMul and maybe a
    Softmax."""
    r = np.random.default_rng(number)
    b = _Builder(r)
    first = [1, int(r.integers(2, 5)), int(r.integers(4, 10)), int(r.integers(4, 10))]
    t, shape = "x", first
    b.shapes.append((t, shape))
    for k in range(int(r.integers(1, 4))):
        if min(shape[2:]) < 3:
            break
        # a Conv first: ONNX Runtime's tool leaves a model of a lone pooling in float
        op = "Conv" if k == 0 else str(r.choice(["Conv", "Pool", "Pool", "Tanh", "Add",
                                                  "Residual", "Swish"]))
        t, shape = _spatial(b, t, shape, op)
        b.shapes.append((t, shape))
    # (a Gemm after a pooling that drops a window would have weights of the wrong size for
    # ONNX shape inference, which ONNX Runtime's quantization tool runs)
    if r.random() < 0.7 and not b.dropped:
        if r.random() < 0.3:  # a pooling head, as SqueezeNet's and ResNet's
            t = b.add("GlobalAveragePool", [t])
            shape = shape[:2] + [1, 1]
        t = b.add("Flatten", [t])
        K, N = int(np.prod(shape[1:])), int(r.integers(3, 12))
        w = r.normal(size=(K, N)) / np.sqrt(K)
        if r.random() < 0.5:
            alpha = float(r.choice([1.0, 0.7]))
            t = b.add("Gemm", [t, b.const(w), b.const(r.normal(size=N) * 0.3)], alpha=alpha)
        else:
            t = b.add("MatMul", [t, b.const(w)])
        if r.random() < 0.5:
            t = b.add("Softmax", [t], axis=-1)
            if r.random() < 0.4:  # folded into the softmax's output scale by the tool
                t = b.add("Relu", [t]) if r.random() < 0.5 else \
                    b.add("Clip", [t, b.const(np.array(r.uniform(0, 0.1))),
                                   b.const(np.array(r.uniform(0.3, 1)))])
    b.nodes[-1].output[0] = "y"
    data = r.uniform(-1, 1, first).astype(np.float32)
    m = model(b.nodes, {"x": data}, ["y"], b.inits, opset=13)
    return Case(number, m, tuple(b.ops), "u8" if r.random() < 0.5 else "s8",
                bool(r.random() < 0.5), {"x": data})


def quantize(case: Case, folder: Path) -> onnx.ModelProto:
    """The case's model quantized by ONNX Runtime's quantize_static on 8 random inputs."""
    r = np.random.default_rng(case.number + 2)
    shape = case.inputs["x"].shape
    return quantize_qdq(case.float_model,
                        [{"x": r.uniform(-1, 1, shape).astype(np.float32)} for _ in range(8)],
                        folder, case.activations, case.per_channel)


def check(case: Case, backend: str = "sim") -> list[Comparison]:
    """The quantized model on ``backend`` against ONNX Runtime: one Comparison per output
    (a dequantized output: in steps of its scale)."""
    with tempfile.TemporaryDirectory() as d:
        qm = quantize(case, Path(d))
    ref, _ = ort_run(qm, case.inputs)
    g = npukit.onnx.load(qm)
    out = g.run(backend, **case.inputs).outputs
    return [compare(k, out[k], ref[k], g.output_steps.get(k)) for k in ref]


def quantized(c: Comparison) -> bool:
    """Whether an output is quantized (integers, or a DequantizeLinear's float with a step):
    those must be bit-exact."""
    return c.integer or bool(c.step)


def lsb(c: Comparison) -> float:
    """A comparison's largest error in steps of the output."""
    return c.max_abs / c.step if c.step else c.max_abs
