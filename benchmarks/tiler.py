"""Ports of the GAP AutoTiler's examples: simulated cycles against the roofline (the busiest unit's
work), how much of the DMA the double buffering hides, and the tiled C program's host time
against numpy doing the same arithmetic untiled.

Run: python benchmarks/tiler.py
"""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
from harness import interleaved  # the medians every C benchmark reports

ROOT = Path(__file__).resolve().parent.parent / "examples" / "tiler"


def cases(mods):
    """Per port: the program, its arrays, and numpy doing the same arithmetic untiled."""
    rng = np.random.default_rng(0)
    a, b = rng.integers(-2**20, 2**20, (2, 300, 200), dtype=np.int32)
    x4 = rng.integers(-2**20, 2**20, (2, 4, 75, 75), dtype=np.int32)
    img = rng.integers(0, 256, (256, 256), dtype=np.uint8)
    tw, swap = mods["fft2d"]["tables"](256)
    conv = (rng.integers(-99, 99, (3, 40, 40), dtype=np.int16),
            rng.integers(-9, 9, (2, 3, 5, 5), dtype=np.int16))
    bias = np.array([5, -7, 11, 100], np.int32)
    return {
        "matadd": ("MatAdd", dict(In1=a, In2=b, Out=np.empty_like(a)),
                   lambda: np.add(a, b, out=np.empty_like(a))),
        "matmax": ("MatMax", dict(In=a, Out=np.zeros(1, np.int32)), lambda: a.max()),
        "my_favorite_kernel": ("MyFavoriteKernel",
                               dict(In1=x4[0], In2=x4[1], Out=np.empty_like(x4[0]), Bias=bias),
                               lambda: mods["my_favorite_kernel"]["reference"](*x4, bias)),
        "cnn_conv5x5": ("CnnConv5x5", dict(In=conv[0], Filter=conv[1], Norm=4,
                                           Out=np.zeros((2, 36, 36), np.int16),
                                           Bias=np.array([1, 2], np.int16)),
                        lambda: mods["cnn_conv5x5"]["reference"](*conv, np.array([1, 2]), 4)),
        "fft2d": ("FFT2D", dict(In=img, Out=np.empty((256, 256), np.complex64), Twiddles=tw,
                                SwapTable=swap), lambda: np.fft.fft2(img)),
    }


def main() -> None:
    mods = {p.stem: runpy.run_path(str(p)) for p in ROOT.glob("*.py")}
    print(f"{'port':<20}{'cycles':>9}{'roofline':>9}{'x bound':>8}{'DMA hidden':>11}"
          f"{'C host ms':>10}{'numpy ms':>9}")
    for script, (name, arrays, numpy_fn) in cases(mods).items():
        m = mods[script]["model"]()
        prog = m.program(name)
        res = prog.run("sim", **arrays)
        rep = res.report
        dma = sum(b for u, b in rep.busy.items() if "dma" in u)
        core = rep.busy.get("core", 0)
        hidden = (dma + core - res.cycles) / max(min(dma, core), 1)
        times = interleaved({"c": lambda prog=prog, arrays=arrays: prog.run("c", **arrays),
                             "numpy": numpy_fn}, 5)
        c_ms, np_ms = 1e3 * times["c"], 1e3 * times["numpy"]
        bound = rep.roofline_cycles
        print(f"{script:<20}{res.cycles:>9}{bound:>9}{res.cycles / bound:>8.3f}"
              f"{hidden:>10.0%}{c_ms:>10.2f}{np_ms:>9.2f}")
    print("cycles: simulated; roofline: the bound in cycles (the busiest unit's work); x bound:")
    print("cycles over roofline. DMA hidden:")
    print("share of the shorter of DMA and compute overlapped by the other. C host ms: one")
    print("run of the tiled C program on this machine (tiles copied through local L1 arrays;")
    print("a parallel call's cores on one thread, core 0 first, as its tiles are small), Python")
    print("call and checks included; numpy ms: the same arithmetic untiled (the conv reference")
    print("is a float64 einsum per plane). Both: medians of 5 interleaved runs.")


if __name__ == "__main__":
    main()
