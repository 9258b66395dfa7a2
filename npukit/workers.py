"""One engine for jobs of independent work units: a local pool of worker processes (one per
core by default) or a running Dask distributed cluster (``scheduler="tcp://HOST:PORT"``,
``pip install "npukit[cluster]"``).

A unit is any picklable value and ``fn`` a module-level function of one unit; units carry
their data (model bytes, input arrays), no shared file system is assumed. ``run_units``
returns one ``Outcome`` per unit, in the order of the units, whatever ran them and in
whatever order they finished. A unit whose function raises is reported failed with the
error; a unit whose worker process dies is run once more on a fresh worker and reported
failed when that one dies too: no unit is lost silently.

A local worker is a fresh interpreter whose main program is npukit's own (``python -c``
with ``serve``): it never runs the caller's script, so a script that calls
``npukit.onnx.validate(..., workers=2)`` at its top level needs no ``if __name__ ==
"__main__":`` guard (``multiprocessing``'s spawn and forkserver workers run the main module
again, and would start workers of their own there). An ``fn`` defined in the caller's
``__main__`` cannot be found that way; it runs on ``multiprocessing``'s spawn workers, which
do import the main module, so that script needs the guard (as on Windows, where every
worker is spawned).
"""

from __future__ import annotations

import multiprocessing
import os
import re
import subprocess
import sys
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any

from .errors import NpukitError

# A unit whose worker died is run this many times in all before it is reported failed.
ATTEMPTS = 2
# The most local worker processes a job starts (``--workers``).
MAX_WORKERS = 64

_SCHEDULER = re.compile(r"(tcp|tls|ucx|ws|wss)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):"
                        r"([0-9]{1,5})")


def check_scheduler(scheduler: str | None) -> None:
    """Refuse a ``--scheduler`` address that is not ``PROTOCOL://HOST:PORT`` (tcp, tls, ucx,
    ws, wss; a port 1 to 65535), before anything runs.

    >>> check_scheduler("tcp://127.0.0.1:8786")
    >>> check_scheduler("tcp://host")
    Traceback (most recent call last):
    ...
    npukit.errors.NpukitError: --scheduler 'tcp://host': give tcp://HOST:PORT (a port 1 to 65535)
    """
    if scheduler is None:
        return
    m = _SCHEDULER.fullmatch(scheduler)
    if not m or not 1 <= int(m.group(3)) <= 65535:
        raise NpukitError(f"--scheduler {scheduler!r}: give tcp://HOST:PORT (a port 1 to "
                          f"65535)")


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


# The program of a local worker, run as ``python -c``: take the caller's sys.path (so ``fn``
# and npukit import as they do there), then serve. Its main module is this text, not the
# caller's script.
_WORKER = ("import sys\n"
           "from multiprocessing.connection import Connection\n"
           "conn = Connection(int(sys.argv[1]))\n"
           "sys.path[:] = conn.recv()\n"
           "from npukit.workers import serve\n"
           "serve(conn)\n")


def serve(conn) -> None:
    """A local worker's loop (``_WORKER``): ``fn`` and its thread count first, then units."""
    try:
        fn, threads = conn.recv()
        _serve(conn, fn, threads)
    except EOFError:  # the caller went away: nothing left to do
        pass


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
    if workers is not None and not 1 <= workers <= MAX_WORKERS:
        raise NpukitError(f"workers={workers}: give 1 to {MAX_WORKERS} worker processes (None: "
                          f"one per core)")
    check_scheduler(scheduler)
    progress = Progress(len(units), label)
    if scheduler:
        return _on_dask(fn, units, scheduler, progress)
    n = workers or min(os.cpu_count() or 1, MAX_WORKERS)
    return _on_pool(fn, units, min(n, max(len(units), 1)), progress)


class _Spawned:
    """A ``multiprocessing`` spawn worker with ``subprocess.Popen``'s ``kill`` and ``wait``."""

    def __init__(self, proc):
        self.proc = proc

    def kill(self) -> None:
        self.proc.kill()

    def wait(self) -> int | None:
        self.proc.join()
        return self.proc.exitcode


def _own_main(fn: Callable) -> bool:
    """Whether ``fn`` can run in a worker whose main program is npukit's (``_WORKER``): a
    POSIX system (the worker inherits one end of a socket pair) and ``fn`` importable from a
    module other than the caller's ``__main__``."""
    return os.name == "posix" and getattr(fn, "__module__", "__main__") != "__main__"


def _launch(fn: Callable, threads: int):
    """A fresh worker process serving ``fn``: (connection, handle with ``kill``/``wait``)."""
    if not _own_main(fn):
        # spawn: a fresh interpreter, safe whatever threads the parent runs; it imports the
        # caller's main module, whose top level must then be guarded.
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_serve, args=(child, fn, threads), daemon=True)
        proc.start()
        child.close()
        return parent, _Spawned(proc)
    parent, child = multiprocessing.Pipe()
    proc = subprocess.Popen([sys.executable, "-c", _WORKER, str(child.fileno())],
                            pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL)
    child.close()
    try:
        parent.send(list(sys.path))
        parent.send((fn, threads))
    except OSError:  # it died already: the first unit's send finds out and runs it again
        pass
    return parent, proc


def _on_pool(fn: Callable, units: list, n: int, progress: Progress) -> list[Outcome]:
    todo = deque(range(len(units)))
    attempts = [0] * len(units)
    results: list[Outcome | None] = [None] * len(units)
    busy = {}  # connection -> (process, index of the unit it runs)

    def start(index: int) -> None:
        conn, proc = _launch(fn, max(1, (os.cpu_count() or 1) // n))
        give(conn, proc, index)

    def give(conn, proc, index: int) -> None:
        attempts[index] += 1
        try:
            conn.send(units[index])
        except OSError:  # the process died before it read the unit (a broken pipe)
            died(conn, proc, index)
            return
        busy[conn] = (proc, index)

    def died(conn, proc, index: int) -> None:
        """The process running unit ``index`` died: run it again on a fresh one, or report
        it failed after ``ATTEMPTS``; the other units go on."""
        conn.close()
        code = proc.wait()
        if attempts[index] < ATTEMPTS:
            todo.appendleft(index)
        else:
            results[index] = Outcome(False, error=f"its worker process died (exit code "
                                     f"{code}) on each of {ATTEMPTS} attempts")
            progress.step()
        if todo and len(busy) < n:
            start(todo.popleft())

    def stop(conn, proc) -> None:
        try:
            conn.send(None)
        except OSError:  # it died already
            pass
        conn.close()
        proc.wait()

    try:
        while todo and len(busy) < n:
            start(todo.popleft())
        while busy:
            for conn in wait(list(busy)):
                proc, index = busy.pop(conn)
                try:
                    results[index] = conn.recv()
                except (EOFError, OSError):  # the process died running this unit
                    died(conn, proc, index)
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
            proc.wait()
    return results


def _call_on_dask(fn: Callable, unit, topic: str, index: int) -> Outcome:
    """``_call(fn, unit)`` on a Dask worker, first telling the scheduler (and waiting for
    it to know) that unit ``index`` started: a unit whose worker died before it began is
    then told from one that was running."""
    from distributed import get_client

    get_client().log_event(topic, index)
    return _call(fn, unit)


def _not_started(index: int, started: set, error: str) -> Outcome:
    """A unit Dask failed: "not started" when no worker ever began it (Dask reports the
    units queued on a worker that died as killed too)."""
    if index in started or not error.startswith("KilledWorker"):
        return Outcome(False, error=error)
    return Outcome(False, error="not started: the workers it was queued on died before "
                   "any began it (Dask reports it as KilledWorker)")


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
        topic = f"npukit-started-{uuid.uuid4().hex}"
        n = len(units)
        futures = client.map(_call_on_dask, [fn] * n, units, [topic] * n, range(n),
                             pure=False, retries=ATTEMPTS - 1)
        index = {f.key: i for i, f in enumerate(futures)}
        failed = []
        for fut in as_completed(futures):
            i = index[fut.key]
            try:
                results[i] = fut.result()
            except Exception as exc:  # KilledWorker and the like: the unit is failed
                failed.append(i)
                results[i] = Outcome(False, error=f"{type(exc).__name__}: "
                                     f"{str(exc).splitlines()[0] if str(exc) else ''}")
            progress.step()
        if failed:
            started = {msg for _, msg in client.get_events(topic)}
            for i in failed:
                results[i] = _not_started(i, started, results[i].error)
    return results
