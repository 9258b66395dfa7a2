"""The onnx wheel's nine ``light_*`` architectures (onnx/backend/test/data/light/: AlexNet,
ZFNet-512, VGG-19, SqueezeNet, Inception v1 and v2, ResNet-50, DenseNet-121, ShuffleNet) as
shipped (IR version 3), their weights given random values, planned with the GAP AutoTiler
document's L1 (48000 B) and the L2, L3 and flash a model this size needs, run by the host C
and compared with ONNX Runtime on one random input.

The wheel ships each weight as a ``ConstantOfShape`` of zeros; each is replaced by a random
initializer of its shape (He-scaled; 1-D ones uniform in [0.5, 1.5], so that
BatchNormalization's variances are positive), also listed as a graph input as IR version 3
requires.

Run: python benchmarks/onnx_light.py [--only bvlc_alexnet,vgg19] [--seed 0] [--schedule tiles]

``--schedule host`` (the default) runs ``g.run("c")``, the layers planned again for the host
(1 MiB of L1, so most rows fit whole); ``--schedule tiles`` runs the C of the plan for GAP8's
budgets above, every L1 tile of it (slower).

Goal per model (reported, not asserted): plans in under 2 minutes, max error under 1e-4 of
the largest output magnitude, the same top-1 class as ONNX Runtime.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from harness import machine

BUDGETS = dict(l1_budget=48000, l2_budget=512 * 1024, l3_budget=64 << 20,
               l3_flash_budget=1 << 30)


def light_models() -> dict[str, Path]:
    """The light_* models of the installed onnx wheel, by name without the prefix."""
    import onnx

    folder = Path(onnx.__file__).parent / "backend/test/data/light"
    return {p.stem.removeprefix("light_"): p for p in sorted(folder.glob("light_*.onnx"))}


def with_random_weights(m, rng):
    """``m`` with each ``ConstantOfShape`` of a constant shape (the weights of the onnx
    wheel's ``light_*`` models) replaced by a random initializer of that shape, listed as a
    graph input as IR version 3 requires (He-scaled weights; vectors in [0.5, 1.5])."""
    import onnx
    from onnx import helper as h
    from onnx import numpy_helper as nh

    out = onnx.ModelProto()
    out.CopyFrom(m)
    g = out.graph
    inits = {t.name: nh.to_array(t) for t in g.initializer}
    keep, new = [], []
    for n in g.node:
        if n.op_type == "ConstantOfShape" and n.input[0] in inits:
            shape = tuple(int(d) for d in inits[n.input[0]])
            fan = int(np.prod(shape[1:])) if len(shape) > 1 else 0
            v = rng.normal(size=shape) * np.sqrt(2 / fan) if fan else rng.uniform(0.5, 1.5, shape)
            new.append(nh.from_array(v.astype(np.float32), n.output[0]))
        else:
            keep.append(n)
    used = {x for n in keep for x in n.input}
    ins = [vi for vi in g.input if vi.name in used or vi.name not in inits]
    kept_inits = [t for t in g.initializer if t.name in used]
    del g.node[:], g.initializer[:], g.input[:]
    g.node.extend(keep)
    g.initializer.extend(kept_inits + new)
    g.input.extend(ins + [h.make_tensor_value_info(t.name, t.data_type, t.dims) for t in new])
    return out


def check(path: Path, seed: int, schedule: str = "host") -> dict:
    """One model: plan seconds, max error / max |output|, same top-1 (or the refusal)."""
    import onnx

    import npukit.onnx
    from npukit import NpukitError
    from npukit.onnx.check import ort_run

    rng = np.random.default_rng(seed)
    m = with_random_weights(onnx.load(path), rng)
    weights = {t.name for t in m.graph.initializer}
    (x_info,) = [i for i in m.graph.input if i.name not in weights]
    shape = [d.dim_value for d in x_info.type.tensor_type.shape.dim]
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    ref, _ = ort_run(m, {x_info.name: x})
    t0 = time.perf_counter()
    try:
        g = npukit.onnx.load(m, **BUDGETS)
    except NpukitError as e:
        return dict(plan=time.perf_counter() - t0, refused=str(e).splitlines()[0])
    plan = time.perf_counter() - t0
    del m
    t1 = time.perf_counter()
    outs = g.run("c", schedule=schedule, **{x_info.name: x}).outputs
    run = time.perf_counter() - t1
    (name,) = ref
    out, r = outs[name], ref[name]
    return dict(plan=plan, run=run, layers=len(g.layers),
                error=float(np.abs(out - r).max() / np.abs(r).max()),
                top1=bool(out.argmax() == r.argmax()))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated names (e.g. vgg19,shufflenet)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--schedule", choices=("host", "tiles"), default="host",
                    help="the C schedule to run (see above)")
    a = ap.parse_args(argv)
    models = light_models()
    names = a.only.split(",") if a.only else list(models)
    print(f"machine: {machine()}")
    print(f"budgets: {BUDGETS}; C schedule: {a.schedule}")
    print("| model | layers | plan s | C run s | max error / max abs output | same top-1 "
          "| goal met |")
    print("| --- | ---: | ---: | ---: | ---: | --- | --- |")
    for name in names:
        r = check(models[name], seed=a.seed, schedule=a.schedule)
        if "refused" in r:
            print(f"| {name} | | {r['plan']:.1f} | | refused: {r['refused']} | | no |")
            continue
        met = r["plan"] < 120 and r["error"] < 1e-4 and r["top1"]
        print(f"| {name} | {r['layers']} | {r['plan']:.1f} | {r['run']:.1f} | {r['error']:.1e} "
              f"| {'yes' if r['top1'] else 'no'} | {'yes' if met else 'no'} |", flush=True)


if __name__ == "__main__":
    main()
