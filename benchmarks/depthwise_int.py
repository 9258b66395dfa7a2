"""The host schedule's int8 / uint8 depthwise layers (QDQ, ONNX Runtime's quantization tool):
MobileNet-v2's 3x3 depthwise shapes at 224x224, each layer's host program alone, one
thread, the kernel of a tile of features requantised in one pass
(``depthwise_int.dw_conv_requant``) against the plane-by-plane schedule it replaced (bias,
one-plane convolution, requantisation: three calls a plane), the same bytes checked first.
CPU seconds of this thread (medians of interleaved rounds: on a shared machine the wall
times swing), wall beside them; the compile CPU seconds of each layer's C (the compiler's,
as children's rusage, an empty compile cache). Goal: the depthwise layers' sum at least 3x
faster than plane by plane, printed as met or not.

Run: python benchmarks/depthwise_int.py [--kinds u8,s8] [--rounds 15] [--layers all|first]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
from pathlib import Path

import harness
import numpy as np
from host_speed import interleaved_cpu, random_array

# MobileNet-v2's depthwise layers at 224x224: (channels, input size, stride, how many)
LAYERS = [(32, 112, 1, 1), (96, 112, 2, 1), (144, 56, 1, 1), (144, 56, 2, 1),
          (192, 28, 1, 2), (192, 28, 2, 1), (384, 14, 1, 4), (576, 14, 1, 2),
          (576, 14, 2, 1), (960, 7, 1, 3)]
GOAL = 3.0


def layer_model(c: int, size: int, stride: int, kind: str, folder: Path):
    """Conv (depthwise 3x3, padding 1) + Clip(0, 6), QDQ with ``kind`` activations."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from onnx_helpers import model, node, quantize_qdq

    r = np.random.default_rng(c + size)
    x = r.normal(size=(1, c, size, size)).astype(np.float32)
    inits = {"w": (r.normal(size=(c, 1, 3, 3)) / 3).astype(np.float32),
             "b": (r.normal(size=c) * 0.2).astype(np.float32),
             "lo": np.float32(0), "hi": np.float32(6)}
    m = model([node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1] * 4,
                    strides=[stride, stride], group=c), node("Clip", ["c", "lo", "hi"], ["y"])],
              {"x": x}, ["y"], inits)
    calib = [{"x": r.normal(size=x.shape).astype(np.float32)} for _ in range(2)]
    return quantize_qdq(m, calib, folder, kind)


def conv_layer(q, fused: bool):
    """The host graph's convolution layer of ``q``, built with the one-pass kernel or plane
    by plane (the generator's choice switched off for the comparison)."""
    import npukit.onnx
    from npukit.tiler import layer_generators_conv as gc

    saved = gc.fused_applies
    gc.fused_applies = saved if fused else (lambda *a: False)
    try:
        g = npukit.onnx.load(q, l1_budget=48000, l2_budget=512 * 1024, l3_budget=64 << 20,
                             l3_flash_budget=64 << 20)
        return next(la for la in g.host_graph().layers if la.name.endswith("_Conv"))
    finally:
        gc.fused_applies = saved


def compiled(layer):
    """The layer's program compiled (an empty cache: a fresh folder), and the compiler's
    CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    fn = layer.program.compile("c")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return fn, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kinds", default="u8,s8")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--layers", default="all", choices=["all", "first"])
    a = ap.parse_args(argv)
    os.environ["NPUKIT_CACHE_DIR"] = tempfile.mkdtemp()
    os.environ["NPUKIT_PLAN_CACHE"] = "0"  # each variant planned, not read back
    print(f"machine: {harness.machine()}")
    print("| kind | layer (C x size, stride) x n | planes ms CPU | one pass ms CPU | ratio | "
          "one pass wall ms | compile s CPU planes / one pass |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    goals = []
    rng = np.random.default_rng(0)
    for kind in a.kinds.split(","):
        total = {"planes": 0.0, "fused": 0.0}
        for c, size, stride, n in LAYERS[:1] if a.layers == "first" else LAYERS:
            with tempfile.TemporaryDirectory() as tmp:
                q = layer_model(c, size, stride, kind, Path(tmp))
            fns, cc = {}, {}
            for how in ("planes", "fused"):
                layer = conv_layer(q, how == "fused")
                fn, cc[how] = compiled(layer)
                arrays = {b.name: random_array(lay, rng) for b, lay in layer.program.params}
                fns[how] = (fn, arrays, layer.program)
            # the same inputs for both (the planes' input [C, 1, H, W] the features' [C, H, W]),
            # then the same bytes out
            fused = fns["fused"][1]
            fused.update({k: np.ascontiguousarray(v).reshape(fused[k].shape)
                          for k, v in fns["planes"][1].items() if k != "Out"})
            outs = {}
            for how, (fn, arrays, _) in fns.items():
                fn(**arrays)
                outs[how] = arrays["Out"].copy()
            assert outs["planes"].tobytes() == outs["fused"].tobytes(), (kind, c, size)
            with harness.threads(1):
                wall, cpu = interleaved_cpu({h: (lambda f=f, x=x: f(**x))
                                             for h, (f, x, _) in fns.items()}, a.rounds)
            total["planes"] += n * cpu["planes"]
            total["fused"] += n * cpu["fused"]
            print(f"| {kind} | {c} x {size}, {stride} x {n} | {cpu['planes'] * 1e3:.3f} | "
                  f"{cpu['fused'] * 1e3:.3f} | {cpu['planes'] / cpu['fused']:.1f}x | "
                  f"{wall['fused'] * 1e3:.3f} | {cc['planes']:.2f} / {cc['fused']:.2f} |",
                  flush=True)
        ratio = total["planes"] / total["fused"]
        print(f"| {kind} | sum (one MobileNet-v2) | {total['planes'] * 1e3:.3f} | "
              f"{total['fused'] * 1e3:.3f} | {ratio:.1f}x | | |")
        goals.append(harness.goal(f"{kind} depthwise layers at least {GOAL}x faster than plane "
                                  f"by plane ({ratio:.1f}x)", ratio >= GOAL))
    print("\n".join(goals))


if __name__ == "__main__":
    main()
