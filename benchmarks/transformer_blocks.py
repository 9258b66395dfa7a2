"""Swin-shaped blocks as torchvision's exporter writes them, built with onnx.helper: how many
layers they import as, which ONNX operations those layers come from, how long the import
and plan take, and (small sizes) the float error against ONNX Runtime.

A block (torchvision's ``SwinTransformerBlock``, channels last): ``LayerNormalization``; the
shifted window as ``torch.roll`` exports it (per axis two ``Slice`` and a ``Concat``); the
window partition (``Reshape`` to [B, H/ws, ws, W/ws, ws, C], ``Transpose`` [0, 1, 3, 2, 4,
5], ``Reshape`` to [windows, ws*ws, C]); qkv by ``MatMul`` + ``Add``, ``Reshape`` and
``Transpose`` [2, 0, 3, 1, 4] to [3, windows, heads, N, d], q, k, v by ``Gather`` of a
scalar index; q scaled, Q·Kᵀ by batched ``MatMul``; the relative position bias as the
exporter leaves it without constant folding (a ``Gather`` of the [(2ws-1)², heads] table by
the constant [N*N] index, ``Reshape``, ``Transpose`` [2, 0, 1], ``Unsqueeze``); with a
shift, the mask (0 or -100, [1, windows, 1, N, N]) added to scores viewed as [B, windows,
heads, N, N]; ``Softmax``; scores·V; back to [windows, N, C], the projection, the window
reverse, the roll back, the residual; then the MLP (GELU by ``Erf``) and its residual.

Run: python benchmarks/transformer_blocks.py [--size 56] [--dim 96] [--heads 3] [--window 7]
     [--blocks 2] [--check-size 14] [--select gather|split] [--l1 65536] [--gap8-l1 48000]

Goals (reported, not asserted): a swin_t stage-1 pair of blocks (56x56, dim 96, 3 heads,
window 7, one shifted) imports as at most 60 layers and plans in under 20 s; at the check
size, simulator == C and within 1e-4 of the largest output of ONNX Runtime; the same pair
imports at the GAP8-like L1 budget of 48,000 B too (a row of its own).
"""

from __future__ import annotations

import argparse
import collections
import time

import numpy as np
from harness import goal, machine

BUDGETS = dict(l2_budget=512 * 1024, l3_budget=64 << 20, l3_flash_budget=64 << 20)


def shift_mask(size: int, ws: int, s: int) -> np.ndarray:
    """torchvision's attention mask of shifted windows: [windows, N, N], -100 where two
    tokens of a window come from different regions of the rolled image, else 0."""
    region = np.zeros((size, size), np.int64)
    cuts = ((0, size - ws), (size - ws, size - s), (size - s, size))
    for i, (h0, h1) in enumerate(cuts):
        for j, (w0, w1) in enumerate(cuts):
            region[h0:h1, w0:w1] = 3 * i + j
    n = size // ws
    win = region.reshape(n, ws, n, ws).transpose(0, 2, 1, 3).reshape(n * n, ws * ws)
    return np.where(win[:, None, :] != win[:, :, None], -100.0, 0.0).astype(np.float32)


def position_index(ws: int) -> np.ndarray:
    """torchvision's relative position index: [N*N] rows of the (2ws-1)² bias table."""
    coords = np.stack(np.meshgrid(np.arange(ws), np.arange(ws), indexing="ij")).reshape(2, -1)
    rel = (coords[:, :, None] - coords[:, None, :]).transpose(1, 2, 0) + (ws - 1)
    return (rel[..., 0] * (2 * ws - 1) + rel[..., 1]).reshape(-1).astype(np.int64)


def swin(size: int = 56, dim: int = 96, heads: int = 3, ws: int = 7, blocks: int = 2,
         seed: int = 0, select: str = "gather"):
    """``blocks`` Swin blocks on a [1, size, size, dim] input, every second one shifted by
    ws // 2 (random weights); q, k and v selected by ``Gather`` of a scalar index (as both
    PyTorch exporters write ``qkv[0]``) or, ``select="split"``, by ``Split`` and
    ``Squeeze`` (``unbind``)."""
    from onnx import TensorProto
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(seed)
    nw, tok, d = (size // ws) ** 2, ws * ws, dim // heads
    n = h.make_node
    nodes: list = []
    inits = {"win6": np.array([1, size // ws, ws, size // ws, ws, dim], np.int64),
             "wflat": np.array([nw, tok, dim], np.int64),
             "qkv5": np.array([nw, tok, 3, heads, d], np.int64),
             "scores5": np.array([1, nw, heads, tok, tok], np.int64),
             "scores4": np.array([nw, heads, tok, tok], np.int64),
             "back6": np.array([1, size // ws, size // ws, ws, ws, dim], np.int64),
             "img": np.array([1, size, size, dim], np.int64),
             "bias3": np.array([tok, tok, heads], np.int64),
             "zero": np.array([0], np.int64),
             "scale": np.array(d ** -0.5, np.float32), "half": np.array(0.5, np.float32),
             "one": np.array(1.0, np.float32), "rsqrt2": np.array(2 ** -0.5, np.float32),
             "index": position_index(ws)}

    def w(*s):
        return (rng.normal(size=s) / np.sqrt(s[0])).astype(np.float32)

    def ln(x, name):
        inits[f"{name}_g"] = (1 + 0.1 * rng.normal(size=dim)).astype(np.float32)
        inits[f"{name}_b"] = w(dim) * 0.1
        nodes.append(n("LayerNormalization", [x, f"{name}_g", f"{name}_b"], [name], axis=-1,
                       epsilon=1e-5))
        return name

    def linear(x, name, cin, cout):
        inits[f"{name}_w"], inits[f"{name}_c"] = w(cin, cout), w(cout) * 0.1
        nodes.extend([n("MatMul", [x, f"{name}_w"], [f"{name}_m"]),
                      n("Add", [f"{name}_m", f"{name}_c"], [name])])
        return name

    def roll(x, name, s):
        """torch.roll(x, (s, s), (1, 2)) as the exporter writes it: per axis the last s
        rows sliced before the others, concatenated."""
        for ax in (1, 2):
            parts = []
            for part, (lo, hi) in (("a", (-s, size)), ("b", (0, -s))):
                args = [f"{name}{ax}{part}_{k}" for k in ("start", "end", "axis")]
                for arg, v in zip(args, (lo, hi, ax)):
                    inits[arg] = np.array([v], np.int64)
                nodes.append(n("Slice", [x, *args], [f"{name}{ax}{part}"]))
                parts.append(f"{name}{ax}{part}")
            nodes.append(n("Concat", parts, [f"{name}{ax}"], axis=ax))
            x = f"{name}{ax}"
        return x

    x = "x"
    for b in range(blocks):
        p, s = f"b{b}_", (ws // 2 if b % 2 else 0)
        a = ln(x, p + "ln1")
        if s:
            a = roll(a, p + "roll", -s)
        nodes += [n("Reshape", [a, "win6"], [p + "w6"]),
                  n("Transpose", [p + "w6"], [p + "wt"], perm=[0, 1, 3, 2, 4, 5]),
                  n("Reshape", [p + "wt", "wflat"], [p + "win"])]
        qkv = linear(p + "win", p + "qkv", dim, 3 * dim)
        nodes += [n("Reshape", [qkv, "qkv5"], [p + "q5"]),
                  n("Transpose", [p + "q5"], [p + "qkvt"], perm=[2, 0, 3, 1, 4])]
        if select == "gather":  # qkv[0], qkv[1], qkv[2] (the exporters' select)
            inits.update({f"{q}_at": np.array(i, np.int64) for i, q in enumerate("qkv")})
            for q in "qkv":
                nodes.append(n("Gather", [p + "qkvt", f"{q}_at"], [p + q], axis=0))
        else:  # qkv.unbind(0)
            inits["thirds"] = np.array([1, 1, 1], np.int64)
            nodes.append(n("Split", [p + "qkvt", "thirds"], [p + "q1", p + "k1", p + "v1"],
                           axis=0))
            nodes += [n("Squeeze", [p + q + "1", "zero"], [p + q]) for q in "qkv"]
        inits[p + "table"] = w((2 * ws - 1) ** 2, heads) * 0.1
        nodes += [n("Mul", [p + "q", "scale"], [p + "qs"]),
                  n("Transpose", [p + "k"], [p + "kt"], perm=[0, 1, 3, 2]),
                  n("MatMul", [p + "qs", p + "kt"], [p + "s0"]),
                  n("Gather", [p + "table", "index"], [p + "rb0"], axis=0),
                  n("Reshape", [p + "rb0", "bias3"], [p + "rb1"]),
                  n("Transpose", [p + "rb1"], [p + "rb2"], perm=[2, 0, 1]),
                  n("Unsqueeze", [p + "rb2", "zero"], [p + "rb"]),
                  n("Add", [p + "s0", p + "rb"], [p + "s1"])]
        scores = p + "s1"
        if s:
            inits[p + "mask"] = shift_mask(size, ws, s)[None, :, None]
            nodes += [n("Reshape", [scores, "scores5"], [p + "s5"]),
                      n("Add", [p + "s5", p + "mask"], [p + "s5m"]),
                      n("Reshape", [p + "s5m", "scores4"], [p + "s2"])]
            scores = p + "s2"
        nodes += [n("Softmax", [scores], [p + "sm"], axis=-1),
                  n("MatMul", [p + "sm", p + "v"], [p + "o0"]),
                  n("Transpose", [p + "o0"], [p + "o1"], perm=[0, 2, 1, 3]),
                  n("Reshape", [p + "o1", "wflat"], [p + "o2"])]
        o = linear(p + "o2", p + "proj", dim, dim)
        nodes += [n("Reshape", [o, "back6"], [p + "r6"]),
                  n("Transpose", [p + "r6"], [p + "rt"], perm=[0, 1, 3, 2, 4, 5]),
                  n("Reshape", [p + "rt", "img"], [p + "ri"])]
        back = roll(p + "ri", p + "unroll", s) if s else p + "ri"
        nodes.append(n("Add", [x, back], [p + "r"]))
        f = linear(ln(p + "r", p + "ln2"), p + "f1", dim, 4 * dim)
        nodes += [n("Mul", [f, "rsqrt2"], [p + "e0"]), n("Erf", [p + "e0"], [p + "e1"]),
                  n("Add", [p + "e1", "one"], [p + "e2"]), n("Mul", [f, p + "e2"], [p + "e3"]),
                  n("Mul", [p + "e3", "half"], [p + "gelu"])]
        nodes.append(n("Add", [p + "r", linear(p + "gelu", p + "f2", 4 * dim, dim)], [p + "y"]))
        x = p + "y"
    shape = [1, size, size, dim]
    graph = h.make_graph(nodes, "swin", [h.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                         [h.make_tensor_value_info(x, TensorProto.FLOAT, shape)],
                         [nh.from_array(v, k) for k, v in inits.items()])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), x


def layer_sources(g) -> collections.Counter:
    """Layers per kind of operation they compute (a fused layer counts once, by its ops)."""
    return collections.Counter(i.ops for i in g.layers)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=56)
    ap.add_argument("--dim", type=int, default=96)
    ap.add_argument("--heads", type=int, default=3)
    ap.add_argument("--window", type=int, default=7)
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--check-size", type=int, default=14)
    ap.add_argument("--select", choices=("gather", "split"), default="gather")
    ap.add_argument("--l1", type=int, default=65536, help="L1 budget (GAP8's 64 KiB)")
    ap.add_argument("--gap8-l1", type=int, default=48000,
                    help="a second row at this L1 budget (GAP8's 64 KiB less the cluster's "
                         "stacks, as the GAP AutoTiler's examples give it); 0 skips it")
    a = ap.parse_args(argv)
    budgets = {**BUDGETS, "l1_budget": a.l1}
    print(machine())
    m, _ = swin(a.size, a.dim, a.heads, a.window, a.blocks, select=a.select)
    g = import_row(m, a, budgets)
    if g is None:
        return
    for ops, k in layer_sources(g).most_common():
        print(f"{k:>6}  {ops}")
    print(goal(f"a pair of blocks imports as at most 60 layers ({len(g.layers)})",
               len(g.layers) <= 60 * a.blocks / 2))
    if a.gap8_l1:
        # At 56x56, q, k, v by Gather fetch rows of 301,056 values and the shift mask's
        # Add needs 57,624 B for its rows of 2,401: both cut their rows in tiles of columns.
        small = import_row(m, a, {**budgets, "l1_budget": a.gap8_l1})
        print(goal(f"it imports at the GAP8-like L1 budget of {a.gap8_l1} B", small is not None))
    if a.check_size:
        check(a.check_size, 8 * a.heads, a.heads, a.window, a.blocks, a.select, budgets)


def import_row(m, a, budgets: dict):
    """Import and plan ``m`` at ``budgets``, print its row; the graph, or None when
    refused."""
    import npukit
    import npukit.onnx

    t0 = time.perf_counter()
    try:
        g = npukit.onnx.load(m, **budgets)
    except npukit.NpukitError as e:
        print(f"refused ({a.select}, L1 {budgets['l1_budget']} B): {e}")
        print(goal("the block imports", False))
        return None
    wall = time.perf_counter() - t0
    print(f"swin {a.size}x{a.size}, dim {a.dim}, {a.heads} heads, window {a.window}, "
          f"{a.blocks} blocks, q/k/v by {a.select}, L1 {budgets['l1_budget']} B: "
          f"{len(m.graph.node)} ONNX nodes -> {len(g.layers)} layers, import and plan "
          f"{wall:.1f} s")
    print(goal(f"it plans in under 20 s ({wall:.1f} s)", wall < 20))
    return g


def check(size: int, dim: int, heads: int, ws: int, blocks: int, select: str,
          budgets: dict) -> None:
    """The small model against ONNX Runtime on the simulator and the host C."""
    import onnxruntime as ort

    import npukit.onnx

    m, out = swin(size, dim, heads, ws, blocks, seed=1, select=select)
    x = np.random.default_rng(2).normal(size=(1, size, size, dim)).astype(np.float32)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"x": x})[0]
    g = npukit.onnx.load(m, **budgets)
    outs = {be: g.run(be, x=x).outputs[out] for be in ("sim", "c")}
    err = float(np.abs(outs["c"] - ref).max() / np.abs(ref).max())
    print(f"check {size}x{size}, dim {dim}: {len(g.layers)} layers, relative error {err:.2e}")
    print(goal("simulator == C", outs["sim"].tobytes() == outs["c"].tobytes()))
    print(goal(f"within 1e-4 of ONNX Runtime ({err:.1e})", err <= 1e-4))


if __name__ == "__main__":
    main()
