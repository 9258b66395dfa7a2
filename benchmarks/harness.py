"""What the C back end's benchmarks share: medians of interleaved repetitions in one process,
thread counts for npukit (``NPUKIT_THREADS``) and torch, hand-written C peers compiled with
the back end's own compiler and flags, copy and triad bandwidth, and the last-level cache
size (to say whether a working set fits in it).

A case is a function of no arguments that runs once; ``interleaved`` runs every case once
per round, in a rotating order, for ``rounds`` rounds after one warm-up round, and reports
each case's median: peers measured in the same loop see the same machine (other jobs,
clock, memory traffic) as npukit does.
"""

from __future__ import annotations

import ctypes
import math
import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from npukit import measure
from npukit.c import toolchain

# torch's OpenMP workers spin for milliseconds after each operation: in an interleaved
# loop they would take a CPU from whatever runs next. Waiting passively is what they do in
# a process that does other work between torch calls (set OMP_WAIT_POLICY to override).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
try:  # optional: a peer when installed, never required
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None


def interleaved(cases: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Median seconds per case over ``rounds`` rounds, each running every case once
    (``npukit.measure.interleaved``, as the demo measures)."""
    return {name: s.median for name, s in measure.interleaved(cases, rounds).items()}


@contextmanager
def threads(n: int | None):
    """npukit's C (``NPUKIT_THREADS``) and torch on ``n`` threads (None: as they are)."""
    if n is None:
        yield
        return
    saved = os.environ.get("NPUKIT_THREADS")
    torch_saved = torch.get_num_threads() if torch is not None else None
    os.environ["NPUKIT_THREADS"] = str(n)
    if torch is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("NPUKIT_THREADS", None)
        else:
            os.environ["NPUKIT_THREADS"] = saved
        if torch is not None:
            torch.set_num_threads(torch_saved)


# Seconds between two cases of ``at_threads``: longer than ONNX Runtime's threads spin.
PAUSE = 0.02
# A timed sample of ``at_threads`` lasts at least this long (short calls run several times).
SAMPLE = 0.005


def at_threads(cases_for: Callable[[int], dict[str, Callable]], counts, rounds: int,
               sample: float = SAMPLE) -> dict[int, dict[str, float]]:
    """Median seconds of ``cases_for(t)``'s cases at each thread count ``t`` of ``counts``:
    each round sets each count in turn (outside the timed calls) and takes one sample of
    each case, in an order that rotates from round to round; one warm-up round first. A
    sample runs the case as many times as last ``sample`` seconds (counted in the warm-up
    round; one call for a longer case), so a sub-millisecond call is not timed alone
    against the clock's and the scheduler's jitter. Each sample follows a pause of
    ``PAUSE`` seconds and an untimed call of the same case, so what the case before left
    running does not land in its time (ONNX Runtime's pool keeps its threads spinning a
    while after a run: on two cores they took the second core from the next case's
    threads)."""
    cases = {t: cases_for(t) for t in counts}
    times: dict = {t: {name: [] for name in cases[t]} for t in counts}
    reps: dict = {t: {} for t in counts}
    for r in range(-1, rounds):
        for t in counts:
            names = list(cases[t])
            with threads(t):
                for name in names[r % len(names):] + names[:r % len(names)]:
                    fn, n = cases[t][name], reps[t].get(name, 1)
                    time.sleep(PAUSE)
                    fn()
                    t0 = time.perf_counter()
                    for _ in range(n):
                        fn()
                    took = (time.perf_counter() - t0) / n
                    if r >= 0:
                        times[t][name].append(took)
                    else:
                        reps[t][name] = max(1, math.ceil(sample / max(took, 1e-9)))
    return {t: {name: statistics.median(v) for name, v in times[t].items()} for t in counts}


def c_function(source: str, name: str, argtypes: list) -> Callable:
    """Function ``name`` of ``source`` compiled as the back end compiles its own C (same
    compiler, same flags, same cache)."""
    fn = ctypes.CDLL(str(toolchain.build(source)))[name]
    fn.restype = None
    fn.argtypes = argtypes
    return fn


_POOL = ThreadPoolExecutor(max(1, (os.cpu_count() or 1) - 1))


def split_in_two(fn: Callable[[int, int], object], n: int) -> Callable[[], object]:
    """``fn(begin, end)`` over ``[0, n)`` as two halves, the second on another thread (a C
    function called through ctypes releases the GIL): a hand-written loop on two threads."""
    def run():
        other = _POOL.submit(fn, n // 2, n)
        fn(0, n // 2)
        other.result()
    return run


SPIN_C = """
/* A chain of dependent float operations: one CPU's time, no memory traffic. */
void npk_bench_spin(long n)
{
    volatile double x = 1.0;
    for (long i = 0; i < n; i++)
        x = x * 1.0000001 + 1e-9;
}"""


def busy_loops(t: int, n: int = 1_000_000) -> Callable[[], object]:
    """A case: ``t`` copies of one busy loop (``SPIN_C``, about 4 ms) at once, one per
    thread. It takes as long on 2 threads as on 1 when the machine gives the second thread
    a CPU of its own: timed beside a thread scaling, it says whether the machine had a
    second CPU to give (a virtual machine's may be taken by others: on this project's
    2-CPU guest, two such loops at once took 4.1 ms in most runs and 8 ms in some, whatever
    else the process ran)."""
    spin = c_function(SPIN_C, "npk_bench_spin", [ctypes.c_long])

    def run():
        others = [_POOL.submit(spin, n) for _ in range(t - 1)]
        spin(n)
        for o in others:
            o.result()
    return run


STREAM_C = """
#include <stdint.h>
void triad(float *restrict a, const float *restrict b, const float *restrict c, float s,
           int64_t begin, int64_t end)
{
    for (int64_t i = begin; i < end; i++)
        a[i] = b[i] + s * c[i];
}
"""


def stream_cases(n: int, two: bool = False) -> tuple[dict[str, Callable], int, int]:
    """Copy (numpy ``copyto``) and triad (a C loop, the back end's flags) on ``n`` float32s;
    with ``two`` the triad runs on two threads. Returns (cases, bytes of copy, of triad),
    counting bytes read and written."""
    rng = np.random.default_rng(0)
    b = rng.standard_normal(n, dtype=np.float32)
    c, a = b[::-1].copy(), np.ones(n, np.float32)
    fn = c_function(STREAM_C, "triad", [ctypes.c_void_p] * 3 + [ctypes.c_float] +
                    [ctypes.c_int64] * 2)
    arrays = (a, b, c)  # kept alive by the closure below, which passes their pointers
    ptrs = [x.ctypes.data for x in arrays]

    def triad(begin, end, keep=arrays):
        fn(*ptrs, 3.0, begin, end)
    cases = {"copy": lambda: np.copyto(a, b),
             "triad": split_in_two(triad, n) if two else lambda: triad(0, n)}
    return cases, 2 * b.nbytes, 3 * b.nbytes


def llc_bytes() -> int | None:
    """The size of the largest CPU cache Linux reports (sysfs), or None."""
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = f.read_text().strip()
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        sizes.append(int(text.rstrip("KMG")) * scale)
    return max(sizes) if sizes else None


def where(nbytes: int) -> str:
    """``inside``/``beyond`` the last-level cache, for a working set of ``nbytes``."""
    llc = llc_bytes()
    if llc is None:
        return "cache size unknown"
    return f"{'inside' if nbytes <= llc else 'beyond'} the {llc >> 20} MiB last-level cache"


def available_bytes() -> int:
    """Memory the kernel says is available (``MemAvailable``), or 4 GiB if it does not."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 4 << 30


def beyond_llc(moved: int, held: int, budget_share: float = 0.5) -> int | None:
    """The smallest power-of-two element count at which one run moves (reads + writes) at
    least twice the last-level cache, ``moved`` bytes per element, or None when the arrays
    of every peer, ``held`` bytes per element, would take more than ``budget_share`` of the
    available memory."""
    llc = llc_bytes() or (64 << 20)
    n = 1 << 20
    while n * moved < 2 * llc:
        n *= 2
    return n if n * held <= budget_share * available_bytes() else None


def element_count(text: str) -> int:
    """An element count as written on a command line: '16M' is 16 * 2**20 (K, M, G)."""
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(text.rstrip("KMGkmg")) * scale


def sizes(text: str | None, moved: int, held: int) -> list[int]:
    """The element counts of a ``--sizes`` argument ('16M,256M'); by default 16M and, when
    memory allows, the count at which one run moves twice the last-level cache
    (``beyond_llc(moved, held)``)."""
    if text:
        return [element_count(t) for t in text.split(",")]
    return [16 << 20] + [m for m in [beyond_llc(moved, held)] if m]


def goal(text: str, met: bool) -> str:
    return f"goal: {text}: {'met' if met else 'NOT met'}"


def machine() -> str:
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() \
        else ["?"]
    return (f"{os.cpu_count()} CPUs, load {' '.join(load)}; compiler: {toolchain.compiler()} "
            f"{' '.join(toolchain.flags())}; torch: "
            f"{torch.__version__ if torch is not None else 'not installed'}")
