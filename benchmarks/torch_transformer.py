"""A 4-head transformer encoder block written in torch (an ``nn.Embedding`` of int64 token
ids, ``nn.LayerNorm``, ``nn.MultiheadAttention``, GELU, residual adds) exported with both of
torch's ONNX exporters (the default, dynamo, and the legacy TorchScript one), imported by
npukit and run on the C back end and the simulator against ONNX Runtime and torch. Prints one
line per exporter: the operators the export holds, the layers npukit made, the largest
difference from ONNX Runtime relative to the largest output, and whether simulator == C.

Needs torch (not a test dependency: the tests build the same block with onnx.helper, in
tests/test_onnx_transformer.py). Run: python benchmarks/torch_transformer.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

VOCAB, T, E, HEADS, FF = 50, 8, 32, 4, 64


def block():
    import torch
    from torch import nn

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, E)
            self.pos = nn.Parameter(torch.randn(T, E) * 0.1)
            self.ln1, self.ln2 = nn.LayerNorm(E), nn.LayerNorm(E)
            self.attn = nn.MultiheadAttention(E, HEADS, batch_first=True)
            self.ff = nn.Sequential(nn.Linear(E, FF), nn.GELU(), nn.Linear(FF, E))

        def forward(self, ids):
            x = self.emb(ids) + self.pos
            a = self.ln1(x)
            x = x + self.attn(a, a, a, need_weights=False)[0]
            return x + self.ff(self.ln2(x))

    torch.manual_seed(0)
    return Encoder().eval()


def main() -> None:
    import onnx
    import torch

    import npukit.onnx
    from npukit.onnx.check import ort_run

    model = block()
    ids = torch.randint(0, VOCAB, (1, T))
    with torch.no_grad():
        want = model(ids).numpy()
    for dynamo in (True, False):
        name = "default (dynamo)" if dynamo else "legacy (TorchScript)"
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "encoder.onnx"
            torch.onnx.export(model, (ids,), str(path), dynamo=dynamo, input_names=["ids"],
                              output_names=["y"], opset_version=18)
            m = onnx.load(str(path))
        ops = sorted({n.op_type for n in m.graph.node})
        feed = {m.graph.input[0].name: ids.numpy()}
        try:
            g = npukit.onnx.load(m)
        except npukit.NpukitError as e:
            print(f"{name}: refused: {e}\n  operators: {', '.join(ops)}")
            continue
        ref, _ = ort_run(m, feed)
        out = m.graph.output[0].name
        c = g.run("c", **feed).outputs[out]
        sim = g.run("sim", **feed).outputs[out]
        scale = float(np.abs(ref[out]).max())
        print(f"{name}: {len(g.layers)} layers; max |npukit - ONNX Runtime| / max |y| = "
              f"{float(np.abs(c - ref[out]).max()) / scale:.2e}; vs torch "
              f"{float(np.abs(c - want).max()) / scale:.2e}; simulator == C: "
              f"{c.tobytes() == sim.tobytes()}\n  operators: {', '.join(ops)}")


if __name__ == "__main__":
    main()
