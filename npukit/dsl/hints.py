"""The Compass DSL's names that steer its compiler or hardware counters and have nothing to
compute on npukit, which runs a kernel's Python at build time and times it on its
simulator.

>>> meta_var(48), tag(3, "no_zip")
(48, 3)
"""

from __future__ import annotations


def meta_var(value):
    """A build-time value, as it is: npukit runs the kernel's Python at build time."""
    return value


def macro(fn=None, **options):
    """``@S.macro``: a helper whose body is inlined where it is called, as any Python
    function called from a kernel is."""
    return macro if fn is None else fn


def tag(x, attr: str):
    """``x`` marked for a compiler pass of the public DSL; npukit has nothing to mark."""
    return x


def perf_tick_begin(cid) -> None:
    """Start a hardware cycle counter: npukit's cycles are the simulator's
    (``prog.run('sim', ...).cycles``), so nothing to do."""


def perf_tick_end(cid) -> None:
    """Stop a hardware cycle counter (see ``perf_tick_begin``)."""
