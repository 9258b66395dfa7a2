"""``npukit run MODEL.onnx --emit DIR --sdk gap``: the imported model's graph as GAP SDK C
(``npukit.tiler.gap_sdk``), its inputs and the simulator's outputs as raw ``.bin`` files named
as ``--emit`` names its ``.npy`` files."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..tiler import gap_sdk
from .emit import npy_stems


def emit(g, directory, inputs: dict[str, np.ndarray] | None = None) -> Path:
    """Write OnnxGraph ``g`` as GAP SDK C into ``directory``; ``inputs`` by ONNX name
    (random ones when None); ``expected/`` holds what npukit's simulator computes for them."""
    from .check import random_inputs

    inputs = inputs if inputs is not None else random_inputs(g)
    expected = g.run("sim", **inputs).outputs
    by_onnx = {**g.inputs, **g.outputs}
    stems = {p.cname: s for name, s in npy_stems(g).items() if (p := by_onnx.get(name))}
    for t in g.graph.args:
        stems.setdefault(t.name, t.name)
    ins = {g.inputs[n].cname: np.asarray(a, g.inputs[n].dtype) for n, a in inputs.items()}
    outs = {g.outputs[n].cname: np.asarray(a, g.outputs[n].dtype) for n, a in expected.items()}
    return gap_sdk.write(g.graph, directory, ins, outs, stems)
