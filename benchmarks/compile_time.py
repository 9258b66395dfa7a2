"""The compile of a model's host C in pieces (``npukit.c.pieces``), by kind of piece: the
compilers' CPU seconds of each piece compiled alone at -O1, -O2 and -O3, with and without
the copies of the basic kernels' code no call of the model reaches (``pieces.prune``);
then, for sets of optimisation levels by kind of piece (``pieces.LEVELS``: long basic
kernels, the short ones' unit, groups of layers, the threads runtime), the whole compile
in an empty cache (the compilers' CPU, children's rusage) and the inference's median over
interleaved rounds (NPUKIT_THREADS=1), the sets in the same loop. The models are those of
benchmarks/first_result.py (random weights; ``<name>-qdq``: int8 QDQ, uint8 activations).

Run: python benchmarks/compile_time.py [--models resnet18,mobilenet_v2] [--rounds 11]
[--per-piece] [--levels="-O3/-O3/-O3/-O3,-O3/-O2/-O1/-O1"] (long kernels/short kernels/
layers/runtime)

Goals (reported, not asserted): the compilers' CPU for a model's pieces, at the levels
chosen (``pieces.LEVELS``), within 2 s for resnet18 and its QDQ version, 3 s for
mobilenet_v2, 6 s for densenet121; no set of levels slower to infer than all -O3 by more
than 2%.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

GOALS = {"resnet18": 2.0, "mobilenet_v2": 3.0, "densenet121": 6.0}
SLOWER = 1.02
ALL_O3 = "-O3/-O3/-O3/-O3"


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def alone(text: str, level: str) -> float:
    """The compiler's CPU seconds for ``text`` compiled alone to an object file."""
    from npukit.c import toolchain
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "piece.c"
        src.write_text(text)
        flags = [level if f == "-O3" else f for f in toolchain.flags() if f != "-shared"]
        before = children_cpu()
        subprocess.run([*toolchain.resolve(toolchain.compiler()), *flags, "-c", "-o",
                        str(src.with_suffix(".o")), str(src)], check=True)
        return children_cpu() - before


def per_piece(hg) -> None:
    """Each piece's compile CPU at each level, kernels whole and pruned."""
    from npukit.c import pieces
    from npukit.tiler.graph_c import c_pieces
    units, _ = c_pieces(hg)
    kernel_units = pieces.kernel_units
    pieces.kernel_units = lambda sources, prelude, calls=None: kernel_units(sources, prelude)
    try:
        whole, _ = c_pieces(hg)
    finally:
        pieces.kernel_units = kernel_units
    print(f"  {'piece':<60}{'bytes':>8}{'-O1':>7}{'-O2':>7}{'-O3':>7}")
    sums = {}
    for tag, group in (("whole", [u for u in whole if u[0].startswith("basic")]),
                       ("pruned", units)):
        for what, text, _ in group:
            row = [alone(text, level) for level in ("-O1", "-O2", "-O3")]
            kind = "kernels" if what.startswith("basic") else \
                "runtime" if "runtime" in what else "layers"  # (long and short summed)
            name = f"{what[:48]}{' (whole)' if tag == 'whole' else ''}"
            print(f"  {name:<60}{len(text):>8}" + "".join(f"{t:>7.2f}" for t in row),
                  flush=True)
            key = f"{kind} ({tag})" if kind == "kernels" else kind
            sums[key] = [a + b for a, b in zip(sums.get(key, [0, 0, 0]), row)]
    for key, row in sums.items():
        print(f"  {'sum: ' + key:<68}" + "".join(f"{t:>7.2f}" for t in row))


def level_sets(g, hg, x, sets: list[str], rounds: int) -> dict:
    """For each set of levels: the compile's CPU and wall seconds, the inference median."""
    import time

    from harness import interleaved

    from npukit.c import pieces
    from npukit.tiler.graph_c import CompiledGraph
    arrays = {g.inputs["x"].cname: x} | {p.cname: np.empty(p.shape, p.dtype)
                                         for p in g.outputs.values()}
    saved = pieces.LEVELS, os.environ.get("NPUKIT_CACHE_DIR")
    out, handles = {}, {}
    try:
        for s in sets:
            pieces.LEVELS = dict(zip(pieces.KINDS, s.split("/")))
            os.environ["NPUKIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="npukit-levels-")
            cpu, t = children_cpu(), time.perf_counter()
            handles[s] = CompiledGraph(hg)
            out[s] = {"compile": time.perf_counter() - t, "cpu": children_cpu() - cpu}
    finally:
        pieces.LEVELS = saved[0]
        if saved[1] is None:
            os.environ.pop("NPUKIT_CACHE_DIR", None)
        else:
            os.environ["NPUKIT_CACHE_DIR"] = saved[1]
    runs = {s: (lambda h=h: h(**arrays)) for s, h in handles.items()}
    for s, median in interleaved(runs, rounds).items():
        out[s]["run"] = median
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="resnet18,mobilenet_v2")
    ap.add_argument("--levels", default="-O3/-O3/-O3/-O3,-O3/-O2/-O3/-O3,-O3/-O2/-O1/-O1,"
                    "-O3/-O3/-O1/-O1,-O2/-O2/-O2/-O2",
                    help="sets of levels to compare (long kernels/short kernels/layers/"
                    "runtime), comma-separated")
    ap.add_argument("--rounds", type=int, default=11, help="interleaved inference rounds")
    ap.add_argument("--per-piece", action="store_true",
                    help="each piece compiled alone at -O1, -O2, -O3 (whole and pruned)")
    a = ap.parse_args(argv)
    os.environ["NPUKIT_THREADS"] = "1"
    os.environ.pop("NPUKIT_CFLAGS", None)  # the levels replace the default -O3
    from first_result import BUDGETS, build
    from harness import goal, machine

    import npukit.onnx
    from npukit.c import pieces
    chosen = "/".join(pieces.LEVELS[k] for k in pieces.KINDS)
    print(f"machine: {machine()}; levels chosen ({'/'.join(pieces.KINDS)}): {chosen}")
    folder = Path(tempfile.mkdtemp(prefix="npukit-models-"))
    sets = list(dict.fromkeys([chosen, *a.levels.split(",")]))
    for name in a.models.split(","):
        import onnx
        path = folder / f"{name}.onnx"
        onnx.save(build(name), path)
        g = npukit.onnx.load(str(path), **BUDGETS)
        hg = g.host_graph()
        x = np.random.default_rng(0).normal(size=g.inputs["x"].shape).astype(np.float32)
        print(f"\n{name}")
        if a.per_piece:
            per_piece(hg)
        got = level_sets(g, hg, x, sets, a.rounds)
        base = got[ALL_O3]["run"] if ALL_O3 in got else None
        print(f"  {'levels (long/short kernels/layers/runtime)':<44}{'compile s':>10}"
              f"{'cc CPU s':>10}{'run ms':>9}{'vs -O3':>8}")
        for s, r in got.items():
            ratio = r["run"] / base if base else float("nan")
            print(f"  {s:<44}{r['compile']:>10.2f}{r['cpu']:>10.2f}{r['run'] * 1e3:>9.2f}"
                  f"{ratio:>8.3f}")
        bound = GOALS.get(name.removesuffix("-qdq"))
        if bound:
            print("  " + goal(f"{name}: compilers' CPU at {chosen} within {bound} s "
                              f"({got[chosen]['cpu']:.2f} s)", got[chosen]["cpu"] <= bound))
        if base:
            print("  " + goal(f"{name}: inference at {chosen} within 2% of all -O3 "
                              f"({got[chosen]['run'] / base:.3f})",
                              got[chosen]["run"] <= SLOWER * base))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
