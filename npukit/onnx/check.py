"""Checking an imported model against ONNX Runtime (an optional dependency): the same
inputs through both, and per output the maximum absolute and relative error and the
fraction of bit-exact elements.

Tolerances (docs/onnx.md): float32 outputs within ``FLOAT_TOL = 1e-4`` relative, measured
against the output's largest magnitude (``max |ours - ort| <= 1e-4 * max |ort|``: npukit
sums in its own order, ONNX Runtime in its blocked GEMM order, so elements near zero carry
a tiny absolute error that a per-element ratio would magnify); integer outputs within
``INT_TOL = 1`` unit of the last place. NaN where ONNX Runtime has NaN, and the same
infinity where it has one, count as equal.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import numpy as np

from ..errors import NpukitError

FLOAT_TOL = 1e-4
INT_TOL = 1


class RuntimeRefusal(NpukitError):
    """ONNX Runtime refused a model (or its inputs) that npukit imported and ran."""


def _refused(exc: Exception) -> RuntimeRefusal:
    """ONNX Runtime's error on one line, without its status code and source locations."""
    text = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", " ".join(str(exc).split()))
    text = re.sub(r"/onnxruntime_src/\S+:\d+ ", "", text)
    return RuntimeRefusal(f"ONNX Runtime refused the model: {text}")


@dataclass(frozen=True)
class Comparison:
    """One output against ONNX Runtime's."""

    name: str
    max_abs: float
    max_rel: float  # max |ours - ort| / max |ort|
    exact: float  # fraction of bit-identical elements
    within: bool
    integer: bool
    step: float | None = None  # the LSB of a dequantized float output

    def __str__(self) -> str:
        unit = " LSB" if self.integer else ""
        if self.step:
            unit = f" ({self.max_abs / self.step:.3g} LSB of {self.step:.3g})"
        tol = f"<= {INT_TOL} LSB" if self.integer or self.step else \
            f"<= {FLOAT_TOL:g} relative"
        return (f"{shown(self.name)}: max abs error {self.max_abs:.3g}{unit}, max relative "
                f"{self.max_rel:.3g}, bit-exact {100 * self.exact:.2f}% "
                f"({'within' if self.within else 'OUTSIDE'} {tol})")


def shown(name: str) -> str:
    """A tensor or file name for the terminal: as is when every character is printable,
    else its ``repr`` (a control character in a crafted name cannot move the cursor or erase
    a line).

    >>> print(shown("y"), shown("y" + chr(27) + "[2K" + chr(13)))
    y 'y\\x1b[2K\\r'
    """
    return name if name.isprintable() else repr(name)


def compare(name: str, ours: np.ndarray, ref: np.ndarray,
            step: float | None = None) -> Comparison:
    """``ours`` against ``ref``: integers within 1 LSB, floats within FLOAT_TOL relative to
    the largest magnitude of ``ref``, a float output a DequantizeLinear makes from integers
    (``step``, its scale) within one step."""
    ours, ref = np.asarray(ours), np.asarray(ref)
    if ours.shape != ref.shape:
        raise NpukitError(f"output {name!r}: shape {ours.shape}, ONNX Runtime gives {ref.shape}")
    integer = ref.dtype.kind in "iu"
    step = abs(step) if step else step  # a negative DequantizeLinear scale steps as much
    o, r = ours.astype(np.float64), ref.astype(np.float64)
    # NaN where ONNX Runtime has NaN, and the same infinity where it has one, are equal.
    same = (np.isnan(o) & np.isnan(r)) | (np.isinf(r) & (o == r))
    with np.errstate(invalid="ignore"):  # inf - inf is NaN: unequal unless ``same``
        diff = np.where(same, 0.0, np.abs(o - r))
    max_abs = float(diff.max()) if diff.size else 0.0
    finite = np.abs(r[np.isfinite(r)])
    scale = float(finite.max()) if finite.size else 0.0
    max_rel = max_abs / scale if scale else max_abs
    if ref.size:
        u = np.dtype(f"u{ref.dtype.itemsize}")
        same = np.ascontiguousarray(ours.astype(ref.dtype)).reshape(-1).view(u) == \
            np.ascontiguousarray(ref).reshape(-1).view(u)
        exact = float(same.mean())
    else:
        exact = 1.0
    if integer:
        within = max_abs <= INT_TOL
    elif step:
        within = bool(np.isfinite(diff).all()) and max_abs <= INT_TOL * step * (1 + 1e-3)
    else:
        within = bool(np.isfinite(diff).all()) and max_abs <= FLOAT_TOL * scale
    return Comparison(name, max_abs, max_rel, exact, within, integer, step)


def ort_session(model, threads: int = 1, int8_fused: bool = True):
    """An ONNX Runtime CPU session of ``model`` (a path or a ModelProto) on ``threads``
    threads; ``NpukitError`` when onnxruntime is not installed, ``RuntimeRefusal`` when it
    refuses the model.

    The session fuses QDQ groups with int8 activations into integer operators, as ONNX
    Runtime does on ARM: on x86 it leaves them in float by default
    (``session.qdqisint8allowed``), running DequantizeLinear, the float operation and
    QuantizeLinear, whose float sums in MLAS's order move about one value in 10**5 across a
    rounding boundary. npukit computes the integer operators, bit for bit.
    ``int8_fused=False``: the session as ONNX Runtime configures it by default (for timing
    it as a user runs it)."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise NpukitError("checking against ONNX Runtime needs the onnxruntime package: "
                          "pip install \"npukit[onnx]\"") from None
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 4  # its refusals reach the user as one line (RuntimeRefusal)
    if int8_fused:
        opts.add_session_config_entry("session.qdqisint8allowed", "1")
    data = model.SerializeToString() if hasattr(model, "SerializeToString") else str(model)
    try:
        return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime's Fail, InvalidGraph, ... (no common base)
        raise _refused(exc) from None


def ort_run(model, inputs: dict[str, np.ndarray], threads: int = 1,
            repeat: int = 1) -> tuple[dict[str, np.ndarray], float]:
    """ONNX Runtime's outputs by name and its best wall time over ``repeat`` runs."""
    sess = ort_session(model, threads)
    names = [o.name for o in sess.get_outputs()]
    best = float("inf")
    for _ in range(max(repeat, 1)):
        t0 = time.perf_counter()
        try:
            outs = sess.run(names, inputs)
        except Exception as exc:
            raise _refused(exc) from None
        best = min(best, time.perf_counter() - t0)
    return dict(zip(names, outs)), best


def random_inputs(graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Deterministic random inputs for the graph's inputs: float32 uniform in [-1, 1), integers
    uniform over their type, booleans False or True."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, port in graph.inputs.items():
        if port.dtype.kind == "b":
            out[name] = rng.integers(0, 2, port.shape).astype(bool)
        elif port.dtype.kind == "f":
            out[name] = rng.uniform(-1, 1, port.shape).astype(port.dtype)
        elif port.dtype == np.uint64:  # past int64: drawn in its own type
            out[name] = rng.integers(0, np.iinfo(np.uint64).max, port.shape, dtype=np.uint64,
                                     endpoint=True)
        else:
            info = np.iinfo(port.dtype)
            out[name] = rng.integers(info.min, int(info.max) + 1, port.shape).astype(port.dtype)
    return out
