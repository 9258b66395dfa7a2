"""The ``npukit demo cycles`` section: GAP8 cycles predicted by constants fitted to published
measurements, and ``npukit calibrate`` fitting a chip's constants back from its cycles."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from .demo_checks import Check, heading


def cycles() -> list[Check]:
    """The shipped gap8 target against the published GAP8 cycles it was calibrated on, then a
    calibration round trip: cycles made by a chip of known constants, fitted back. Returns
    its checks."""
    heading("Cycles you can trust: GAP8 constants fitted to published measurements")
    try:
        import onnx  # noqa: F401
    except ImportError:
        print('  (needs the onnx package: pip install "npukit[onnx]")')
        return [Check("cycles: gap_sdk rows within 15%", None),
                Check("cycles: calibration recovers known constants", None)]
    from .calibration import calibrate, predict, read_measurements
    from .machine import target

    gap8 = target("gap8")
    rows = read_measurements(Path(gap8.path).parent / "gap8_cycles.csv")
    print(f"  {gap8.costs.caveat()}")
    print(f"  {'measurement':<30}{'cores':>6}{'measured':>10}{'predicted':>11}{'ratio':>7}")
    ratios = []
    for m in rows:
        p = predict(gap8, m).cycles
        ratios.append(p / m.cycles)
        print(f"  {m.name:<30}{m.cores:>6}{m.cycles:>10,}{p:>11,}{p / m.cycles:>7.2f}")
    board = [r for m, r in zip(rows, ratios) if "gap_sdk" in m.source]
    within = all(abs(r - 1) <= 0.15 for r in board)
    print(f"  gap_sdk benchmark rows (a GAPuino board): worst "
          f"{100 * max(abs(r - 1) for r in board):.0f}% off; all 16: median "
          f"{100 * float(np.median(np.abs(np.array(ratios) - 1))):.0f}% off")
    # A chip whose kernels are 30% slower and whose fork costs half: its cycles, fitted back.
    chip = dataclasses.replace(gap8.costs, fork=gap8.costs.fork / 2,
                               op={f: v * 1.3 for f, v in gap8.costs.op.items()})
    made = dataclasses.replace(gap8, costs=chip)
    board_rows = [dataclasses.replace(m, cycles=predict(made, m).cycles) for m in rows]
    fit = calibrate(gap8, board_rows, "the chip's cycles", prior=1e-8)
    # The families' prices and the layer's set-up; a call's 20 cycles beside a fork's 100 are
    # barely told apart by these measurements, and matter as little.
    priced = [k for k in fit.fitted if k not in ("call", "fork")]
    got = {k: fit.target.costs.value(k) / chip.value(k) for k in priced}
    worst = max(abs(e) for e in fit.errors())
    recovered = all(abs(v - 1) <= 0.02 for v in got.values()) and worst <= 0.005
    print(f"  npukit calibrate on a chip with 1.3x the kernels' cycles and half the fork: "
          f"{len(fit.fitted)} constants fitted from {len(board_rows)} measurements; the "
          f"families' and the layer's within {100 * max(abs(v - 1) for v in got.values()):.1f}% "
          f"of the chip's, its cycles within {100 * worst:.2f}%")
    return [Check("cycles: gap_sdk rows within 15%", within),
            Check("cycles: calibration recovers known constants", recovered)]
