"""Running an imported model on both back ends into poisoned output buffers and checking it
against ONNX Runtime, for the operator tests (tests/test_onnx_ops_*.py)."""

from __future__ import annotations

import numpy as np
from onnx_helpers import model, node  # noqa: F401  (re-exported for the operator tests)

import npukit.onnx
from npukit.onnx.check import compare, ort_run

GUARD = 8  # canary elements on each side of every output


def run_poisoned(g, inputs: dict, backend: str) -> dict[str, np.ndarray]:
    """Run ``g`` with each output a view into a NaN-filled buffer ``GUARD`` elements longer on
    each side; asserts the guards are untouched. Returns the outputs."""
    outs, bufs = {}, {}
    for name, port in g.outputs.items():
        size = int(np.prod(port.shape))
        buf = np.full(size + 2 * GUARD, np.nan if port.dtype.kind == "f" else 77, port.dtype)
        bufs[name] = buf
        outs[name] = buf[GUARD:GUARD + size].reshape(port.shape)
    res = g.run(backend, **inputs, **outs)
    for name, buf in bufs.items():
        assert res.outputs[name] is outs[name]
        canary = buf[:GUARD].tobytes() + buf[-GUARD:].tobytes()
        assert canary == np.full(2 * GUARD, buf[0]).tobytes(), f"{name}: written outside"
    return outs


def check_ops(m, inputs: dict, **load_kw):
    """Import ``m``, run it on the C back end and the simulator into poisoned outputs; asserts
    every element is written (no canary NaN where ONNX Runtime has a number), C == simulator
    bit for bit, and every output within the tolerance of ``npukit run --check``. Returns
    (graph, C outputs, ONNX Runtime's outputs)."""
    ref, _ = ort_run(m, inputs)
    g = npukit.onnx.load(m, **load_kw)
    c = run_poisoned(g, inputs, "c")
    sim = run_poisoned(g, inputs, "sim")
    for k, want in ref.items():
        assert c[k].tobytes() == sim[k].tobytes(), f"{k}: simulator and C differ"
        if c[k].dtype.kind == "f":
            unwritten = np.isnan(c[k]) & ~np.isnan(want)
            assert not unwritten.any(), f"{k}: {int(unwritten.sum())} elements not written"
        cmp = compare(k, c[k], want, g.output_steps.get(k))
        assert cmp.within, str(cmp)
    return g, c, ref
