"""Every call of compiled C in the test suite runs twice from the same inputs: on one thread
(``NPUKIT_THREADS=1``), then on two with every loop split between them, however small
(``NPUKIT_THREADS=2 NPUKIT_GRAIN=1``: fused loops, parallel loops and the cores of parallel
basic kernels). The written arrays must come out the same bytes, so every kernel the suite
runs in C gives the same results whatever the thread count; the second run's result is
the one the test sees (and compares with the simulator, where it does). A test that counts
what the C prints marks itself ``@pytest.mark.c_once``: its calls run once, on two threads."""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager

import numpy as np
import pytest

from npukit.c.runtime import Compiled
from npukit.tiler import graph_c

ONE = {"NPUKIT_THREADS": "1", "NPUKIT_GRAIN": None}
TWO_SPLIT = {"NPUKIT_THREADS": "2", "NPUKIT_GRAIN": "1"}


@contextmanager
def environment(values: dict[str, str | None]):
    saved = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


ONCE = {"now": False}  # set while a test marked c_once runs


def pytest_configure(config):
    config.addinivalue_line("markers", "c_once: run compiled C once (it prints what it does)")


@pytest.fixture(autouse=True)
def c_once(request):
    ONCE["now"] = request.node.get_closest_marker("c_once") is not None
    yield
    ONCE["now"] = False


# Calls from several Python threads at once (the cores of silu_fp16_on_cores) take turns
# here: each sets NPUKIT_THREADS for its two runs and restores it.
THREAD_SWITCH = threading.RLock()


def at_one_and_two_threads(run, written: list[np.ndarray], what: str):
    """``run()`` on one thread, the written arrays restored, ``run()`` on two; the bytes
    written must agree."""
    with THREAD_SWITCH:
        return _at_one_and_two_threads(run, written, what)


def _at_one_and_two_threads(run, written: list[np.ndarray], what: str):
    if ONCE["now"]:
        with environment(TWO_SPLIT):
            return run()
    before = [a.copy() for a in written]
    with environment(ONE):
        run()
    one = [a.copy() for a in written]
    for a, b in zip(written, before):
        a[...] = b
    with environment(TWO_SPLIT):
        res = run()
    for k, (a, b) in enumerate(zip(written, one)):
        assert a.tobytes() == b.tobytes(), \
            f"{what}: written array {k} differs between 1 and 2 threads"
    return res


@pytest.fixture(autouse=True, scope="session")
def c_calls_at_one_and_two_threads():
    patch = pytest.MonkeyPatch()
    call, graph_run = Compiled._call, graph_c.run_c

    def compiled_call(self, arrs, last):
        return at_one_and_two_threads(lambda: call(self, arrs, last),
                                      [arrs[k] for k in self.written], self.prog.name)

    def graph_run_c(g, args):
        written = [a for n, a in args.items()
                   if g.spec.args[n].Dir != graph_c.ArgDirection.ARG_DIR_IN]
        return at_one_and_two_threads(lambda: graph_run(g, args), written, g.name)

    patch.setattr(Compiled, "_call", compiled_call)
    patch.setattr(graph_c, "run_c", graph_run_c)
    yield
    patch.undo()
