"""The demo's timings say what they are worth: wall time with its range, the CPU time the
process used beside it, and the machine's load, called unreliable when it is above the
CPU count (other jobs then took CPU time, and a wall-time ratio says little)."""

from __future__ import annotations

import re
import time

from npukit import demo_checks as dc
from npukit.measure import Spread


def test_timed_gives_cpu_time_beside_wall_time():
    t = dc.timed({"sleep": lambda: time.sleep(0.01),
                  "spin": lambda: sum(range(200_000))}, rounds=3)
    # Sleeping takes wall time and next to no CPU time; a loop takes both.
    assert t["sleep"].wall.median >= 0.01 and t["sleep"].cpu < 0.005
    assert t["spin"].cpu > 0
    assert re.fullmatch(r"[\d.e+]+ ms \([\d.e+]+-[\d.e+]+\) wall, [\d.e+]+ ms CPU",
                        t["spin"].text())


def test_a_loaded_machine_makes_the_figures_unreliable(monkeypatch):
    monkeypatch.setattr(dc, "machine_load", lambda: 9.3)
    monkeypatch.setattr(dc, "cpu_count", lambda: 2)
    note = dc.timing_note()
    assert "load 9.3 on 2 CPUs" in note and "above the CPU count" in note
    assert "UNRELIABLE" in note
    monkeypatch.setattr(dc, "machine_load", lambda: 0.4)
    note = dc.timing_note()
    assert "load 0.4 on 2 CPUs" in note and "UNRELIABLE" not in note
    monkeypatch.setattr(dc, "machine_load", lambda: None)   # no load average on this system
    assert "load unknown" in dc.timing_note() and "UNRELIABLE" in dc.timing_note()


def test_a_ratio_is_never_bare():
    slow, fast = dc.Timed(Spread(0.078, 0.07, 0.09), 0.012), \
        dc.Timed(Spread(0.01, 0.01, 0.011), 0.01)
    assert dc.ratio(slow, fast, "ONNX Runtime", 0.5, 2) == (
        "7.8x ONNX Runtime's wall time, 1.2x its CPU time")
    assert dc.ratio(slow, fast, "ONNX Runtime", 8.1, 2) == (
        "7.8x ONNX Runtime's wall time (unreliable: load 8.1 on 2 CPUs), 1.2x its CPU time")
