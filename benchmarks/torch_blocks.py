"""A MobileNetV3 block and a squeeze-excite block exported from real PyTorch modules, with
the default (dynamo) exporter and the legacy TorchScript one, imported by npukit and checked
against ONNX Runtime: float32, and QDQ int8 from ONNX Runtime's ``quantize_static`` (uint8
activations per tensor, int8 activations per channel) bit for bit on every int8 tensor.

Needs torch (and onnxscript for the dynamo exporter); run it with an interpreter that has
them and npukit on its path::

    PYTHONPATH=. /path/to/torch-python benchmarks/torch_blocks.py

Prints one line per block, exporter and format."""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def blocks(torch, nn):
    class MobileNetV3Block(nn.Module):
        """torchvision's InvertedResidual (expand, depthwise, SE, project, residual) with
        HardSwish, BatchNorm after each convolution."""

        def __init__(self, c=16, e=48, s=12):
            super().__init__()
            self.expand = nn.Sequential(nn.Conv2d(c, e, 1, bias=False), nn.BatchNorm2d(e),
                                        nn.Hardswish())
            self.dw = nn.Sequential(nn.Conv2d(e, e, 3, padding=1, groups=e, bias=False),
                                    nn.BatchNorm2d(e), nn.Hardswish())
            self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(e, s, 1), nn.ReLU(),
                                    nn.Conv2d(s, e, 1), nn.Hardsigmoid())
            self.project = nn.Sequential(nn.Conv2d(e, c, 1, bias=False), nn.BatchNorm2d(c))

        def forward(self, x):
            d = self.dw(self.expand(x))
            return x + self.project(d * self.se(d))

    class SqueezeExcite(nn.Module):
        """A conv + ReLU, then squeeze-excite with linear layers and a sigmoid gate."""

        def __init__(self, c=8, f=32, r=4):
            super().__init__()
            self.conv = nn.Sequential(nn.Conv2d(c, f, 3, padding=1), nn.ReLU())
            self.fc = nn.Sequential(nn.Linear(f, f // r), nn.ReLU(), nn.Linear(f // r, f),
                                    nn.Sigmoid())

        def forward(self, x):
            y = self.conv(x)
            w = self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))
            return y * w.view(-1, y.shape[1], 1, 1)

    return {"mobilenet_v3_block": (MobileNetV3Block, (1, 16, 12, 12)),
            "squeeze_excite": (SqueezeExcite, (1, 8, 10, 10))}


def export(torch, module, shape, path: Path, dynamo: bool) -> None:
    x = torch.zeros(shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            torch.onnx.export(module, (x,), str(path), dynamo=True, verbose=False)
        else:
            torch.onnx.export(module, (x,), str(path), dynamo=False, opset_version=13,
                              input_names=["x"], output_names=["y"])


def check(path: Path, shape, folder: Path) -> tuple[list[str], bool]:
    """Lines to print, and whether float32 is within 1e-5 and every int8 tensor exact."""
    import onnx
    from onnx_helpers import expose, quantize_qdq

    import npukit.onnx
    from npukit.onnx.check import ort_run

    m = onnx.load(path)
    name = m.graph.input[0].name
    r = np.random.default_rng(0)
    x = {name: r.uniform(-1, 1, shape).astype(np.float32)}
    ops = sorted({n.op_type for n in m.graph.node})
    lines = []
    ref, _ = ort_run(m, x)
    g = npukit.onnx.load(m)
    out = g.run("c", **x).outputs
    err = max(float(np.abs(out[k] - v).max() / max(np.abs(v).max(), 1e-30))
              for k, v in ref.items())
    ok = err <= 1e-5
    lines.append(f"float32: opset {m.opset_import[0].version}, ops {' '.join(ops)}; "
                 f"{len(g.layers)} layers; max error {err:.2e} of the largest output")
    for act, per_channel in (("u8", False), ("s8", True)):
        calib = [{name: r.uniform(-1, 1, shape).astype(np.float32)} for _ in range(8)]
        qm = quantize_qdq(m, calib, folder, act=act, per_channel=per_channel)
        qs = [n.output[0] for n in qm.graph.node if n.op_type == "QuantizeLinear"]
        qm = expose(qm, qs)
        g = npukit.onnx.load(qm)
        ref, _ = ort_run(qm, x)
        res = {be: g.run(be, **x).outputs for be in ("c", "sim")}
        same = sum(res["c"][k].tobytes() == ref[k].tobytes() == res["sim"][k].tobytes()
                   for k in qs)
        diff = sum(int((res["c"][k] != ref[k]).sum()) for k in qs)
        ok = ok and same == len(qs)
        lines.append(f"QDQ {act} {'per channel' if per_channel else 'per tensor'}: "
                     f"{same}/{len(qs)} int8 tensors identical to ONNX Runtime's (C and "
                     f"simulator), {diff} values differ")
    return lines, ok


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    try:
        import torch
        from torch import nn
    except ImportError:
        print("torch is not installed", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, (cls, shape) in blocks(torch, nn).items():
            module = cls().eval()
            for bn in (mod for mod in module.modules() if isinstance(mod, nn.BatchNorm2d)):
                bn.running_mean.uniform_(-0.5, 0.5)  # trained-like statistics to fold
                bn.running_var.uniform_(0.5, 2.0)
            for dynamo in (True, False):
                which = "dynamo" if dynamo else "legacy"
                path = folder / f"{name}_{which}.onnx"
                try:
                    export(torch, module, shape, path, dynamo)
                    lines, ok = check(path, shape, folder)
                    failed |= not ok
                    for line in lines:
                        print(f"{name:20} {which:7} {line}")
                except Exception as exc:  # report every block, whichever fails
                    failed = True
                    print(f"{name:20} {which:7} FAILED: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0] if str(exc) else ''}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
