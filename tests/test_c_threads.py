"""Parallel loops in the C back end: their iterations run on threads (``npk_parallel_for``),
``NPUKIT_THREADS`` caps them, the result does not depend on the count, nested parallel
loops run serially inside a thread, and a body that needs the entry function's locals is
refused. The cycle model runs one iteration per core at a time."""

from __future__ import annotations

import os

import numpy as np
import pytest

import npukit as nk
from npukit import ir
from npukit.c import threads
from npukit.c.preamble import PORTABILITY
from npukit.c.runtime import run_c
from npukit.layout import Layout
from npukit.sim.timing import timeline

# A basic kernel that records which thread ran it: out[i] = i * 10 + (thread count seen).
_SOURCE = """
#include <stdint.h>
static void fill(float *out, int64_t i, int64_t j)
{
    out[0] = (float)(i * 100 + j);
}
"""
_FILL = ir.Extern("fill", (("float *", "out"), ("int64_t", "i"), ("int64_t", "j")), False,
                  _SOURCE, lambda out, i, j: out.__setitem__(0, i * 100 + j),
                  lambda **_: 10)


def _program(outer: int, inner: int, nested: bool, body_extra=()) -> ir.Program:
    tgt = nk.target("torq")
    out = ir.Buffer("out", tgt.home, np.dtype("float32"), outer * inner, "out")
    i, j = ir.Var("i", outer), ir.Var("j", inner)
    view = ir.View(out, Layout((1,), "float32"), i * inner + j)
    call = ir.Call(_FILL, (ir.Ptr(view), ir.Val(ir.affine(i)), ir.Val(ir.affine(j))), "fill")
    inner_loop = ir.Loop(j, (call,) + tuple(body_extra), "inner", parallel=nested)
    body = (ir.Loop(i, (inner_loop,), "outer", parallel=True),)
    return ir.Program("threads", tgt, ((out, Layout((outer * inner,), "float32")),), (), body)


@pytest.mark.parametrize("threads", ["1", "2", "7"])
def test_parallel_loop_result_does_not_depend_on_threads(threads, monkeypatch):
    monkeypatch.setenv("NPUKIT_THREADS", threads)
    prog = _program(13, 5, nested=True)
    out = np.full(65, np.nan, np.float32)
    run_c(prog, {"out": out})
    want = np.array([i * 100 + j for i in range(13) for j in range(5)], np.float32)
    assert np.array_equal(out, want)


def test_parallel_loop_is_a_task_function():
    src = _program(4, 3, nested=True).c_source()
    # The outer loop is shared among threads; the nested one runs inside its task.
    assert src.count("npk_parallel_for(4, 1, npk_task0") == 1 and "npk_task1" not in src
    assert "static void npk_task0(void *arg, int64_t begin, int64_t end)" in src
    assert "for (int64_t i = begin; i < end; i++)" in src
    assert src.index("#define _POSIX_C_SOURCE") < src.index("#include")


def test_parallel_body_with_internal_memory_is_refused():
    tgt = nk.target("torq")
    buf = ir.Buffer("tmp", "IRAM", np.dtype("float32"), 4)
    fill = ir.Fill(ir.View(buf, Layout((4,), "float32")), 0.0)
    prog = _program(2, 2, nested=False, body_extra=(fill,))
    prog = ir.Program(prog.name, tgt, prog.params, (buf,), prog.body)
    with pytest.raises(NotImplementedError, match="parallel loop i .* holds a Fill"):
        prog.c_source()


def test_cycle_model_runs_a_parallel_loop_on_the_cores():
    """Torq has two cores: 13 parallel iterations cost 7 steps; serial ones 13."""
    par = timeline(_program(13, 1, nested=False)).cycles
    serial_prog = _program(13, 1, nested=False)
    loop = serial_prog.body[0]
    serial_prog = ir.Program(serial_prog.name, serial_prog.target, serial_prog.params, (),
                             (ir.Loop(loop.var, loop.body, loop.label),))
    serial = timeline(serial_prog).cycles
    assert (par, serial) == (7 * 11, 13 * 11)  # 10 cycles of work + 1 of ALU latency


def test_loops_from_two_python_threads_and_a_forked_child(monkeypatch):
    """Two Python threads running the same parallel loop at once (one gets the worker pool,
    the other runs serially) both get the whole result; a child forked after the pool
    started gets a pool of its own instead of waiting for its parent's workers."""
    import os
    import threading

    monkeypatch.setenv("NPUKIT_THREADS", "2")
    prog = _program(13, 5, nested=False)
    want = np.array([i * 100 + j for i in range(13) for j in range(5)], np.float32)
    outs = [np.full(65, np.nan, np.float32) for _ in range(2)]
    ok = []

    def worker(out):
        for _ in range(200):
            out[:] = np.nan
            run_c(prog, {"out": out})
            ok.append(np.array_equal(out, want))

    threads = [threading.Thread(target=worker, args=(o,)) for o in outs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ok) == 400 and all(ok)
    pid = os.fork()
    if pid == 0:  # the child: run the loop once more, exit 0 when right
        out = np.full(65, np.nan, np.float32)
        run_c(prog, {"out": out})
        os._exit(0 if np.array_equal(out, want) else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


# A loop straight on the runtime: each iteration counts its runs and the thread that ran
# it; a worker thread sleeps in its first chunk (a thread that gets no core for a while).
_CLAIMS_C = threads.FEATURE_MACRO + "\n" + PORTABILITY + "\n" + threads.SOURCE + r"""
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
typedef struct { int *runs; int *by_caller; pthread_t caller; int slept; } npk_test_ctx;

static void npk_test_body(void *arg, int64_t begin, int64_t end)
{
    npk_test_ctx *c = arg;
    const int caller = pthread_equal(pthread_self(), c->caller);
    if (!caller && !__atomic_exchange_n(&c->slept, 1, __ATOMIC_RELAXED)) {
        struct timespec nap = {0, 50 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    for (int64_t i = begin; i < end; i++) {
        __atomic_fetch_add(&c->runs[i], 1, __ATOMIC_RELAXED);
        c->by_caller[i] = caller;
    }
}

void npk_test_loop(int64_t n, int64_t grain, int *runs, int *by_caller)
{
    npk_test_ctx c = {runs, by_caller, pthread_self(), 0};
    npk_read_env(1);
    npk_parallel_for(n, grain, npk_test_body, &c);
}

static void npk_count_body(void *arg, int64_t begin, int64_t end)
{
    int *runs = arg;
    for (int64_t i = begin; i < end; i++)
        __atomic_fetch_add(&runs[i], 1, __ATOMIC_RELAXED);
}

/* A loop of 8 chunks of 5 ms each at the pool's threads; returns the Linux thread id of a
   worker that ran one (0 if none did). */
static long npk_test_worker;

static void npk_test_nap_body(void *arg, int64_t begin, int64_t end)
{
    struct timespec nap = {0, 5 * 1000 * 1000};
    (void)begin;
    (void)end;
    if (!pthread_equal(pthread_self(), *(pthread_t *)arg))
        npk_test_worker = syscall(SYS_gettid);
    nanosleep(&nap, NULL);
}

long npk_test_start_pool(void)
{
    pthread_t caller = pthread_self();
    npk_read_env(1);
    npk_parallel_for(8, 1, npk_test_nap_body, &caller);
    return npk_test_worker;
}

/* What an entry function does first (`wake`: it has loops that may be shared); returns the
   count of calls that woke the workers. */
unsigned long npk_test_call_starts(int wake)
{
    npk_read_env(wake);
    return npk_pool.warm;
}

/* `loops` loops back to back, the i-th of n[i] iterations counted in runs[i][...]. */
void npk_test_loops(int64_t loops, const int64_t *n, int *runs, int64_t stride)
{
    npk_read_env(1);
    for (int64_t i = 0; i < loops; i++)
        npk_parallel_for(n[i], 1, npk_count_body, runs + i * stride);
}
"""


@pytest.mark.parametrize("n, grain, threads_", [(64, 1, "2"), (1000, 7, "3"), (5, 1, "2"),
                                               (9, 4, "2"), (1, 1, "2")])
def test_chunks_are_claimed_once_and_a_late_thread_delays_nobody(n, grain, threads_,
                                                                   monkeypatch):
    """Every iteration runs exactly once whatever the threads, in chunks the threads claim:
    while a worker sleeps in its first chunk, the calling thread claims every other chunk
    (with fixed shares, half the loop would wait for the sleeper)."""
    import ctypes

    from npukit.c import toolchain

    monkeypatch.setenv("NPUKIT_THREADS", threads_)
    monkeypatch.delenv("NPUKIT_GRAIN", raising=False)
    fn = ctypes.CDLL(str(toolchain.build(_CLAIMS_C))).npk_test_loop
    fn.restype = None
    fn.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]
    for _ in range(3):
        runs = np.zeros(n, np.int32)
        by_caller = np.full(n, -1, np.int32)
        fn(n, grain, runs.ctypes.data, by_caller.ctypes.data)
        assert (runs == 1).all()
        t = min(int(threads_), os.cpu_count() or 1, max(1, n // grain))
        chunks = min(4 * t, n // grain if grain > 1 else n)
        if t > 1:  # a worker took at most the one chunk it slept in
            assert (by_caller == 0).sum() <= -(-n // max(chunks, t))


@pytest.mark.parametrize("threads_", ["2", "3"])
def test_loops_back_to_back_run_every_iteration_once(threads_, monkeypatch):
    """Thousands of short loops one after the other, of sizes that change from loop to loop:
    a worker still polling from the loop before joins the next (or sleeps and misses it),
    and each loop's iterations run exactly once, none of another loop's."""
    import ctypes

    from npukit.c import toolchain

    monkeypatch.setenv("NPUKIT_THREADS", threads_)
    monkeypatch.delenv("NPUKIT_GRAIN", raising=False)
    fn = ctypes.CDLL(str(toolchain.build(_CLAIMS_C))).npk_test_loops
    fn.restype = None
    fn.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    loops, stride = 3000, 16
    n = np.random.default_rng(3).integers(1, stride + 1, loops).astype(np.int64)
    runs = np.full((loops, stride), 0, np.int32)
    fn(loops, n.ctypes.data, runs.ctypes.data, stride)
    want = (np.arange(stride)[None, :] < n[:, None]).astype(np.int32)
    assert np.array_equal(runs, want)


@pytest.mark.slow  # sleeps 1 s in all
def test_a_call_starting_wakes_the_sleeping_workers(monkeypatch):
    """An entry function's first statement (``npk_read_env``) wakes the pool's workers asleep
    since the call before when the call has loops that may be shared, so that they poll for
    them (a sleeping thread takes tens of microseconds to wake in a virtual machine): a
    sleeping worker uses no CPU; after such a call starts it does (it polls, then sleeps
    again); a call whose loops all run on one thread, or capped at one thread, wakes nobody.
    (Linux: the worker's CPU time from /proc.)"""
    import ctypes
    import time
    from pathlib import Path

    from npukit.c import toolchain

    if (os.cpu_count() or 1) < 2 or not Path("/proc/self/task").is_dir():
        pytest.skip("needs two CPUs and Linux's /proc")
    monkeypatch.setenv("NPUKIT_THREADS", "2")
    monkeypatch.delenv("NPUKIT_GRAIN", raising=False)
    lib = ctypes.CDLL(str(toolchain.build(_CLAIMS_C)))
    lib.npk_test_start_pool.restype = ctypes.c_long
    worker = lib.npk_test_start_pool()
    assert worker > 0, "no worker ran a chunk of 8 naps of 5 ms"

    def cpu_ns() -> int:
        return int(Path(f"/proc/self/task/{worker}/schedstat").read_text().split()[0])

    lib.npk_test_call_starts.restype = ctypes.c_ulong
    lib.npk_test_call_starts.argtypes = [ctypes.c_int]
    time.sleep(0.2)  # the worker polls ~100 us after a loop, then sleeps
    asleep = cpu_ns()
    calls = lib.npk_test_call_starts(0)
    time.sleep(0.2)
    assert cpu_ns() == asleep, "a call without shared loops (or nothing) woke the worker"
    assert lib.npk_test_call_starts(1) == calls + 1
    time.sleep(0.2)
    woken = cpu_ns()
    assert woken > asleep, "a call with shared loops started and the worker did not wake"
    assert lib.npk_test_call_starts(1) == calls + 2  # each such call: poll again
    time.sleep(0.2)
    monkeypatch.setenv("NPUKIT_THREADS", "1")
    woken = cpu_ns()
    assert lib.npk_test_call_starts(1) == calls + 2
    time.sleep(0.2)
    assert cpu_ns() == woken, "a call on one thread woke a worker"
