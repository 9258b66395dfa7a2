"""Timing several ways of doing one thing fairly: interleaved rounds, medians and spread.

One sample of a run on a shared machine says little (another job, the clock, the memory
traffic of the moment); runs of different cases far apart in time say less. ``interleaved``
runs every case once per round, in an order that rotates from round to round, after one
warm-up round, and reports each case's median with the lowest and highest time seen.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import NamedTuple


class Spread(NamedTuple):
    """Seconds per run of one case: the median of the rounds, and their lowest and highest."""

    median: float
    low: float
    high: float

    def ms(self) -> str:
        """``"12.3 ms (11.9-14)"``: the median, then the range of the rounds.

        >>> Spread(0.0123, 0.0119, 0.014).ms()
        '12.3 ms (11.9-14)'
        """
        return f"{1e3 * self.median:.3g} ms ({1e3 * self.low:.3g}-{1e3 * self.high:.3g})"


def interleaved(cases: dict[str, Callable[[], object]], rounds: int) -> dict[str, Spread]:
    """Each case's ``Spread`` over ``rounds`` rounds, each round running every case once
    (round ``r`` starts at case ``r mod len(cases)``), after one untimed warm-up round.

    >>> s = interleaved({"sum": lambda: sum(range(1000)), "nothing": lambda: None}, 5)
    >>> s["nothing"].low <= s["nothing"].median <= s["nothing"].high
    True
    """
    names = list(cases)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(-1, rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            t0 = time.perf_counter()
            cases[name]()
            if r >= 0:
                times[name].append(time.perf_counter() - t0)
    return {name: Spread(statistics.median(v), min(v), max(v)) for name, v in times.items()}
