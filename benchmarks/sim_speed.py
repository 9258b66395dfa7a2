"""The functional simulator's speed on int8 QDQ CNNs built in code: simulated cycles per CPU
second with the convolutions' references run as they ran before (the one-plane reference
over every pair of output and input features of a feature tile, over every plane of a
depthwise tile: ``before``) and as they run now (every feature at once:
``conv_reference``), per model and input size; medians of interleaved repetitions. Each
pair must give the same output bytes and the same cycle count. Goals, printed as met or
not: 10x the simulated cycles per CPU second of before; one int8 squeezenet1_1 inference at
224x224 under 25 s of CPU. (Pooling's references run every plane at once in both styles:
the before column understates the simulator as it was, which took 82.7 s of CPU for
squeezenet1_1 at 224x224 where this one takes about 5.)

The models: squeezenet1_1 (torchvision's layers: a 3x3 stride-2 stem, eight fire modules,
ceil-mode max pooling, a 1x1 classifier, global average pooling) and the MobileNet-style
model of ``onnx_cnn.py``, random weights, quantized by ONNX Runtime's tool (int8
activations and weights, per-tensor scales). The before style is slow (about 30 s of CPU at
64x64, minutes at 224x224): it runs only at sizes up to --before-max.

Run: python benchmarks/sim_speed.py [--sizes 64,224] [--before-max 64] [--rounds 1]
     [--models squeezenet1_1,mobile]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

CPU_GOAL_S = 25.0  # one int8 squeezenet1_1 inference at 224x224
SPEED_GOAL = 10.0  # times the simulated cycles per CPU second of before


def squeezenet1_1(size: int = 224, seed: int = 0, classes: int = 1000, fires: int = 8):
    """torchvision's squeezenet1_1 layer by layer (random weights), input 1x3xSIZExSIZE,
    output ``logits`` (1 x classes); ``fires`` < 8 keeps the first fire modules only (a model
    whose C compiles quickly, for tests)."""
    from onnx import TensorProto
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(seed)
    nodes, inits = [], {}

    def conv(x, cin, cout, k, name, stride=1, pad=None):
        inits[f"{name}_w"] = (rng.normal(size=(cout, cin, k, k)) *
                              np.sqrt(2 / (k * k * cin))).astype(np.float32)
        inits[f"{name}_b"] = (rng.normal(size=cout) * 0.05).astype(np.float32)
        p = k // 2 if pad is None else pad
        nodes.extend([h.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_c"],
                                  kernel_shape=[k, k], pads=[p] * 4, strides=[stride] * 2),
                      h.make_node("Relu", [f"{name}_c"], [name])])
        return name

    def fire(x, cin, s, e, name):
        sq = conv(x, cin, s, 1, f"{name}_s")
        a, b = conv(sq, s, e, 1, f"{name}_e1"), conv(sq, s, e, 3, f"{name}_e3")
        nodes.append(h.make_node("Concat", [a, b], [name], axis=1))
        return name

    def pool(x, name):
        nodes.append(h.make_node("MaxPool", [x], [name], kernel_shape=[3, 3], strides=[2, 2],
                                 ceil_mode=1))
        return name

    x, cin = pool(conv("x", 3, 64, 3, "stem", stride=2, pad=0), "p0"), 64
    for k, (s, e) in enumerate([(16, 64), (16, 64), (32, 128), (32, 128), (48, 192), (48, 192),
                                (64, 256), (64, 256)][:fires]):
        x, cin = fire(x, cin, s, e, f"f{k}"), 2 * e
        if k in (1, 3):
            x = pool(x, f"p{k}")
    x = conv(x, cin, classes, 1, "cls", pad=0)
    nodes += [h.make_node("GlobalAveragePool", [x], ["g"]),
              h.make_node("Flatten", ["g"], ["logits"])]
    g = h.make_graph(nodes, "squeezenet1_1",
                     [h.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
                     [h.make_tensor_value_info("logits", TensorProto.FLOAT, [1, classes])],
                     [nh.from_array(v, k) for k, v in inits.items()])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)])


def images(size: int, n: int, seed: int = 5) -> list[dict]:
    r = np.random.default_rng(seed)
    return [{"x": r.uniform(-1, 1, (1, 3, size, size)).astype(np.float32)} for _ in range(n)]


def int8_model(build, size: int, folder: Path):
    """``build(size)`` quantized to int8 QDQ by ONNX Runtime's tool (two calibration
    images)."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
    from onnx_helpers import quantize_qdq

    return quantize_qdq(build(size), images(size, 2), folder, act="s8")


def one_plane_pairs(flt, In, W, InRow0, InRows, Hreal, PadT, InFeat, Filter, Acc, Wo, OutRow0,
                    OutRows, OutFeat, Fx, Fy, *rest) -> None:
    """A tile of features as the simulator ran it before: the one-plane reference for each
    output feature, then each input feature (Python loops over every pair)."""
    from npukit.tiler.basic_kernels.convolution import layer_conv

    one = layer_conv(In.dtype.name, Filter.dtype.name, 8).reference  # (8: the cost's width)
    plane, taps, tile = InRows * W, Fy * Fx, OutRows * Wo
    for o in range(OutFeat):
        for i in range(InFeat):
            f = (o * InFeat + i) * taps
            one(In[i * plane:(i + 1) * plane], W, InRow0, InRows, Hreal, PadT,
                Filter[f:f + taps], Acc[o * tile:(o + 1) * tile], Wo, OutRow0, OutRows,
                Fx, Fy, *rest, core_id=0, core_count=1)


def plane_by_plane(flt, In, W, InRow0, InRows, Hreal, PadT, Filter, Acc, Wo, OutRow0,
                   OutRows, Fx, Fy, *rest) -> None:
    """A depthwise tile of planes as the simulator ran it before: the one-plane reference
    for each plane in turn."""
    from npukit.tiler.basic_kernels.convolution import layer_conv

    one = layer_conv(In.dtype.name, Filter.dtype.name, 8).reference
    *rest, feat = rest
    plane, taps, tile = InRows * W, Fy * Fx, OutRows * Wo
    for f in range(feat):
        one(In[f * plane:], W, InRow0, InRows, Hreal, PadT, Filter[f * taps:], Acc[f * tile:],
            Wo, OutRow0, OutRows, Fx, Fy, *rest, core_id=0, core_count=1)


@contextmanager
def before_style():
    """The simulator with the convolutions' references as they were (``one_plane_pairs``,
    ``plane_by_plane``)."""
    from npukit.tiler.basic_kernels import conv_reference

    now = conv_reference.feature_tile, conv_reference.planes
    conv_reference.feature_tile, conv_reference.planes = one_plane_pairs, plane_by_plane
    try:
        yield
    finally:
        conv_reference.feature_tile, conv_reference.planes = now


def simulate(g, x: np.ndarray) -> tuple[float, int, bytes]:
    """CPU seconds, cycles and output bytes of one inference on the simulator."""
    t = time.process_time()
    res = g.run("sim", x=x)
    cpu = time.process_time() - t
    return cpu, res.cycles, b"".join(v.tobytes() for v in res.outputs.values())


def main(sizes, before_max: int, rounds: int, models) -> None:
    from onnx_cnn import mobile_like

    import npukit.onnx

    build = {"squeezenet1_1": squeezenet1_1, "mobile": mobile_like}
    rows, goals = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in models:
            for size in sizes:
                folder = Path(tmp) / f"{name}{size}"
                folder.mkdir()
                g = npukit.onnx.load(int8_model(build[name], size, folder))
                x = images(size, 1, seed=9)[0]["x"]
                styles = ["now", "before"] if size <= before_max else ["now"]
                got = {s: [] for s in styles}
                for r in range(rounds):
                    for s in styles[r % 2:] + styles[:r % 2]:
                        if s == "before":
                            with before_style():
                                got[s].append(simulate(g, x))
                        else:
                            got[s].append(simulate(g, x))
                cpu = {s: statistics.median(v[0] for v in got[s]) for s in styles}
                cycles = {s: got[s][0][1] for s in styles}
                rate = {s: cycles[s] / cpu[s] for s in styles}
                same = len({(c, b) for s in styles for _, c, b in got[s]}) == 1
                rows.append((name, size, cycles["now"], cpu.get("before"), cpu["now"],
                             rate.get("before"), rate["now"], same))
                if "before" in rate:
                    goals.append((f"{name} {size}x{size}: {rate['now'] / rate['before']:.1f}x "
                                  f"the simulated cycles per CPU second of before "
                                  f"(goal {SPEED_GOAL:g}x)",
                                  rate["now"] >= SPEED_GOAL * rate["before"]))
                goals.append((f"{name} {size}x{size}: same bytes and cycles in every run",
                              same))
                if name == "squeezenet1_1" and size == 224:
                    goals.append((f"squeezenet1_1 int8 224x224 in {cpu['now']:.1f} s of CPU "
                                   f"(goal under {CPU_GOAL_S:g} s)", cpu["now"] < CPU_GOAL_S))

    def fmt(v, width: int, spec: str) -> str:
        return f"{'-' if v is None else format(v, spec):>{width}}"

    print(f"{'model':<14} {'size':>5} {'cycles':>11} {'before s':>9} {'now s':>7} "
          f"{'before cyc/s':>13} {'now cyc/s':>11}  same")
    for name, size, cyc, cb, cn, rb, rn, same in rows:
        print(f"{name:<14} {size:>5} {cyc:>11} {fmt(cb, 9, '.2f')} {cn:>7.2f} "
              f"{fmt(rb, 13, '.3g')} {rn:>11.3g}  {'yes' if same else 'NO'}")
    for text, met in goals:
        print(f"{'met    ' if met else 'NOT met'}  {text}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64,224")
    ap.add_argument("--before-max", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--models", default="squeezenet1_1,mobile")
    a = ap.parse_args()
    main([int(s) for s in a.sizes.split(",")], a.before_max, a.rounds, a.models.split(","))
