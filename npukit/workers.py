"""One engine for jobs of independent work units: a local pool of worker processes (one per
core by default) or a running Dask distributed cluster (``scheduler="tcp://HOST:PORT"``,
``pip install "npukit[cluster]"``).

A unit is any picklable value and ``fn`` a module-level function of one unit; units carry
their data (model bytes, input arrays), no shared file system is assumed. ``run_units``
returns one ``Outcome`` per unit, in the order of the units, whatever ran them and in
whatever order they finished. A unit whose function raises is reported failed with the
error; a unit whose worker process dies is run once more on a fresh worker and reported
failed when that one dies too: no unit is lost silently.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any

from .errors import NpukitError

# A unit whose worker died is run this many times in all before it is reported failed.
ATTEMPTS = 2


@dataclass(frozen=True)
class Outcome:
    """What one unit gave: ``value`` when ``ok``, otherwise ``error`` says why not."""

    ok: bool
    value: Any = None
    error: str = ""


def _call(fn: Callable, unit) -> Outcome:
    """``fn(unit)`` as an Outcome: an exception becomes a failed unit, not a lost worker."""
    try:
        return Outcome(True, fn(unit))
    except Exception as exc:  # any error of the unit is its result, reported to the user
        return Outcome(False, error=f"{type(exc).__name__}: {str(exc).splitlines()[0]}")


def _serve(conn, fn: Callable, threads: int) -> None:
    """A local worker: run the units sent over ``conn`` one at a time until ``None``. Its
    compiled C runs on ``threads`` host threads (the cores shared out among the workers)
    unless NPUKIT_THREADS says otherwise."""
    os.environ.setdefault("NPUKIT_THREADS", str(threads))
    while (unit := conn.recv()) is not None:
        conn.send(_call(fn, unit))


class Progress:
    """A progress bar on stderr when stderr is a terminal; nothing otherwise."""

    def __init__(self, total: int, label: str, show: bool | None = None):
        self.total, self.label, self.done = total, label, 0
        self.show = sys.stderr.isatty() if show is None else show

    def step(self) -> None:
        self.done += 1
        if self.show:
            filled = 30 * self.done // max(self.total, 1)
            end = "\n" if self.done == self.total else ""
            print(f"\r{self.label} [{'#' * filled}{'.' * (30 - filled)}] "
                  f"{self.done}/{self.total}", end=end, file=sys.stderr, flush=True)


def run_units(fn: Callable, units: list, workers: int | None = None,
              scheduler: str | None = None, label: str = "npukit") -> list[Outcome]:
    """``fn`` on every unit: on ``workers`` local processes (default: one per core) or, with
    ``scheduler``, on the Dask cluster it addresses. One Outcome per unit, in unit order."""
    progress = Progress(len(units), label)
    if scheduler:
        return _on_dask(fn, units, scheduler, progress)
    n = workers or os.cpu_count() or 1
    if n < 1:
        raise NpukitError(f"workers={workers}: give at least 1 worker process")
    return _on_pool(fn, units, min(n, max(len(units), 1)), progress)


def _on_pool(fn: Callable, units: list, n: int, progress: Progress) -> list[Outcome]:
    # spawn: a fresh interpreter per worker, safe whatever threads the parent runs.
    ctx = multiprocessing.get_context("spawn")
    todo = deque(range(len(units)))
    attempts = [0] * len(units)
    results: list[Outcome | None] = [None] * len(units)
    busy = {}  # connection -> (process, index of the unit it runs)

    def start(index: int) -> None:
        parent, child = ctx.Pipe()
        threads = max(1, (os.cpu_count() or 1) // n)
        proc = ctx.Process(target=_serve, args=(child, fn, threads), daemon=True)
        proc.start()
        child.close()
        give(parent, proc, index)

    def give(conn, proc, index: int) -> None:
        attempts[index] += 1
        conn.send(units[index])
        busy[conn] = (proc, index)

    def stop(conn, proc) -> None:
        try:
            conn.send(None)
        except OSError:  # it died already
            pass
        conn.close()
        proc.join()

    try:
        while todo and len(busy) < n:
            start(todo.popleft())
        while busy:
            for conn in wait(list(busy)):
                proc, index = busy.pop(conn)
                try:
                    results[index] = conn.recv()
                except EOFError:  # the process died running this unit
                    conn.close()
                    proc.join()
                    if attempts[index] < ATTEMPTS:
                        todo.appendleft(index)
                    else:
                        results[index] = Outcome(False, error=f"its worker process died "
                                                 f"(exit code {proc.exitcode}) on each of "
                                                 f"{ATTEMPTS} attempts")
                    if todo:
                        start(todo.popleft())
                    if results[index] is not None:
                        progress.step()
                    continue
                progress.step()
                if todo:
                    give(conn, proc, todo.popleft())
                else:
                    stop(conn, proc)
    finally:
        for conn, (proc, _) in busy.items():
            proc.kill()
            conn.close()
    return results


def _on_dask(fn: Callable, units: list, scheduler: str, progress: Progress) -> list[Outcome]:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise NpukitError(f"--scheduler {scheduler}: a Dask cluster needs dask.distributed: "
                          f"pip install \"npukit[cluster]\"") from None
    try:
        client = Client(scheduler, timeout=30)
    except OSError as exc:
        raise NpukitError(f"--scheduler {scheduler}: cannot reach the Dask scheduler: "
                          f"{exc}") from None
    results: list[Outcome | None] = [None] * len(units)
    with client:
        # retries: a unit whose worker died runs again (Dask also moves units of a lost
        # worker); pure=False: equal units are still separate units.
        futures = client.map(_call, [fn] * len(units), units, pure=False,
                             retries=ATTEMPTS - 1)
        index = {f.key: i for i, f in enumerate(futures)}
        for fut in as_completed(futures):
            i = index[fut.key]
            try:
                results[i] = fut.result()
            except Exception as exc:  # KilledWorker and the like: the unit is failed
                results[i] = Outcome(False, error=f"{type(exc).__name__}: "
                                     f"{str(exc).splitlines()[0] if str(exc) else ''}")
            progress.step()
    return results
