"""What every section of ``npukit demo`` shares: its checks, the summary line, headings and
the number of timing rounds."""

from __future__ import annotations

import os
from typing import NamedTuple

from .errors import CompilerError, NoCompilerError


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
