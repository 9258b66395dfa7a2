"""What every section of ``npukit demo`` shares: its checks, the summary line, headings,
the number of timing rounds, and timings that say how loaded the machine was."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import NamedTuple

from .errors import CompilerError, NoCompilerError
from .measure import Spread, interleaved


class Check(NamedTuple):
    """One self-check of the demo: ``ok`` True (held), False (failed) or None (not run)."""

    name: str
    ok: bool | None


def not_run(e: CompilerError) -> bool | None:
    """A check the C back end could not run: skipped (None) when there is no C compiler,
    failed (False) when there is one and it failed: that is a defect, never a skip."""
    return None if isinstance(e, NoCompilerError) else False


def summary(checks: list[Check]) -> str:
    """``"N checks passed"`` (with how many were skipped), or which ones failed.

    >>> summary([Check("a", True), Check("b", None)])
    '1 checks passed, 1 skipped (could not run: b)'
    >>> summary([Check("a", True), Check("b", False)])
    '1 of 2 checks FAILED: b'
    """
    failed = [c.name for c in checks if c.ok is False]
    skipped = [c.name for c in checks if c.ok is None]
    if failed:
        return f"{len(failed)} of {len(checks)} checks FAILED: {', '.join(failed)}"
    text = f"{len(checks) - len(skipped)} checks passed"
    return text + (f", {len(skipped)} skipped (could not run: {', '.join(skipped)})"
                   if skipped else "")


# Rounds of each timing: every speed the demo prints is the median of as many interleaved
# runs, with the lowest and highest (npukit.measure.interleaved).
ROUNDS = 7


class Timed(NamedTuple):
    """One case's time per run: the wall-clock ``Spread`` and the median CPU seconds the
    process used (every thread of it: C on two threads uses up to twice its wall time)."""

    wall: Spread
    cpu: float

    def text(self) -> str:
        """``"12.3 ms (11.9-14) wall, 11.8 ms CPU"``.

        >>> Timed(Spread(0.0123, 0.0119, 0.014), 0.0118).text()
        '12.3 ms (11.9-14) wall, 11.8 ms CPU'
        """
        return f"{self.wall.ms()} wall, {1e3 * self.cpu:.3g} ms CPU"


def timed(cases: dict[str, Callable[[], object]], rounds: int = ROUNDS) -> dict[str, Timed]:
    """``npukit.measure.interleaved`` over ``cases``, with each case's CPU time beside its
    wall time (``time.process_time``, the warm-up round left out)."""
    cpu: dict[str, list[float]] = {name: [] for name in cases}

    def clocked(name: str, fn: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            t0 = time.process_time()
            fn()
            cpu[name].append(time.process_time() - t0)
        return run

    wall = interleaved({name: clocked(name, fn) for name, fn in cases.items()}, rounds)
    return {name: Timed(wall[name], statistics.median(cpu[name][1:])) for name in cases}


def cpu_count() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def machine_load() -> float | None:
    """The machine's load, averaged over the last minute (None where the system has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def reliable(load: float | None, cpus: int) -> bool:
    """Whether wall times measured under ``load`` on ``cpus`` CPUs say what this program
    costs: not when more jobs wanted a CPU than there are CPUs (or the load is unknown).

    >>> reliable(0.7, 2), reliable(2.0, 2), reliable(8.3, 2), reliable(None, 2)
    (True, True, False, False)
    """
    return load is not None and load <= cpus


def load_line(load: float | None, cpus: int) -> str:
    """What the timings above it are worth, said plainly.

    >>> load_line(0.7, 2)
    'machine: load 0.7 on 2 CPUs (1-minute average)'
    >>> print(load_line(8.3, 2))
    machine: load 8.3 on 2 CPUs (1-minute average), above the CPU count: other jobs took CPU
      time, so these wall times and their ratios are UNRELIABLE (the CPU times less so); an
      idle machine gives figures to compare
    """
    if reliable(load, cpus):
        return f"machine: load {load:.1f} on {cpus} CPUs (1-minute average)"
    said = "unknown" if load is None else f"{load:.1f}"
    why = "" if load is None else ", above the CPU count"
    return (f"machine: load {said} on {cpus} CPUs (1-minute average){why}: other jobs took CPU\n"
            f"  time, so these wall times and their ratios are UNRELIABLE (the CPU times less "
            f"so); an\n  idle machine gives figures to compare")


def ratio(ours: Timed, theirs: Timed, name: str, load: float | None, cpus: int) -> str:
    """npukit's time against ``name``'s, wall and CPU, with what the figure is worth.

    >>> a, b = Timed(Spread(0.02, 0.02, 0.03), 0.02), Timed(Spread(0.01, 0.01, 0.01), 0.01)
    >>> ratio(a, b, "ONNX Runtime", 0.5, 2)
    "2.0x ONNX Runtime's wall time, 2.0x its CPU time"
    >>> ratio(a, b, "ONNX Runtime", 9.0, 2)
    "2.0x ONNX Runtime's wall time (unreliable: load 9.0 on 2 CPUs), 2.0x its CPU time"
    """
    wall = f"{ours.wall.median / theirs.wall.median:.1f}x {name}'s wall time"
    if not reliable(load, cpus):
        said = "unknown" if load is None else f"{load:.1f}"
        wall += f" (unreliable: load {said} on {cpus} CPUs)"
    return f"{wall}, {ours.cpu / theirs.cpu:.1f}x its CPU time"


def timing_note(rounds: int = ROUNDS) -> str:
    """The lines printed under a section's timings: how they were taken, and the machine's
    load now (which covers the last minute, the timings included)."""
    return (f"  (medians of {rounds} interleaved rounds, lowest-highest; CPU: this process, "
            f"every thread)\n  {load_line(machine_load(), cpu_count())}")


def heading(title: str) -> None:
    """A section's title line."""
    print(f"\n== {title} " + "=" * max(0, 74 - len(title)))


def on_threads(threads: int, fn):
    """``fn()`` with the C back end on ``threads`` host threads (``NPUKIT_THREADS``)."""
    saved = os.environ.get("NPUKIT_THREADS")
    os.environ["NPUKIT_THREADS"] = str(threads)
    try:
        return fn()
    finally:
        if saved is None:
            del os.environ["NPUKIT_THREADS"]
        else:
            os.environ["NPUKIT_THREADS"] = saved
