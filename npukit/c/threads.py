"""Threads for the C back end: the iterations of a parallel loop (``ir.Loop(parallel=True)``),
the elements of a fused streaming loop (``npukit.c.fuse``) and the cores of a parallel basic
kernel (``npukit.c.calls``) run on the host's cores through one small C runtime function,
``npk_parallel_for``.

``npk_parallel_for(n, grain, body, ctx)`` calls ``body(ctx, begin, end)`` on contiguous
chunks that cover ``[0, n)``, up to four per thread, which the threads claim one at a time
(an atomic counter): the calling thread claims chunks until none is left, then waits for
the chunks other threads are running. A thread that does not get a core in time (a busy
machine) claims nothing and delays nobody: the others run its share. The thread count is
the number of online CPUs, capped by the
environment variable ``NPUKIT_THREADS`` and so that each thread gets at least ``grain``
iterations (``NPUKIT_GRAIN``, when set, replaces every loop's grain: ``NPUKIT_GRAIN=1``
splits even the smallest loop, which the tests use). Both variables are read when an entry
function starts (``npk_read_env``), so a Python process can change them between calls. A
call from inside a chunk runs serially on its thread (no nested threads).

The other threads are a pool of POSIX threads that the translation unit starts on its
first parallel loop and keeps, so a loop costs no thread creation (about a hundred
microseconds in a virtual machine). A worker that finished a loop polls for the next one
for about a hundred microseconds (yielding its CPU to any other thread that wants it), then
sleeps on a condition variable, until a loop or the start of an entry function with loops
that may be shared (``npk_read_env(1)``, unless ``NPUKIT_THREADS`` is 1) wakes it to poll
again, so that a call's first loop finds it awake; the calling thread, its own chunks done,
polls as long for the workers' last chunks before it sleeps: the parallel calls of a
graph follow each other closely, and a sleeping thread takes tens of microseconds to wake
in a virtual machine, which made a second thread slower than one on calls of a few hundred
microseconds. One loop uses the pool at a time; a loop started while another runs (from a
second Python thread) runs serially. A process forked after the pool started gets a pool of
its own on its first loop. Without POSIX threads, or when a thread cannot be started, the
chunks run on the calling thread, so the result never depends on threads being available.

Chunks never share an iteration, so a loop whose iterations write disjoint data computes
the same bits whatever the thread count.

No compiler flag is needed: on glibc 2.34 and later the POSIX thread functions are in
libc, and a Python process has them loaded in any case.

>>> "npk_parallel_for" in SOURCE and "NPUKIT_THREADS" in SOURCE
True
"""

from __future__ import annotations

import os


def host_threads() -> int:
    """Threads the C back end uses: the host's CPUs, capped by ``NPUKIT_THREADS``."""
    n = os.cpu_count() or 1
    cap = os.environ.get("NPUKIT_THREADS", "").strip()
    if cap.isdigit() and int(cap) >= 1:
        n = min(n, int(cap))
    return max(1, n)


# What a translation unit that uses the runtime must define before its first #include, so
# that a strict -std=c99 build declares the POSIX functions.
FEATURE_MACRO = """\
#define _POSIX_C_SOURCE 200809L  /* POSIX threads under -std=c99 */
#define _DARWIN_C_SOURCE         /* and, on macOS, the count of online CPUs */"""

SOURCE = r"""/* ---- Threads (npukit.c.threads) ----
   npk_parallel_for(n, grain, body, ctx) runs body(ctx, begin, end) on contiguous chunks
   covering [0, n), up to four per thread, each claimed by one thread (an atomic counter):
   the calling thread claims chunks until none is left, a pool of worker threads (started
   on the first loop, then kept; between loops they poll a while, then sleep) claims them
   too, and a worker that wakes late finds nothing left and delays nobody. Threads: the
   online CPUs, capped by NPUKIT_THREADS and so that each gets at least grain iterations
   (NPUKIT_GRAIN, when set, replaces grain); a loop inside a chunk, or one started while
   another runs, runs serially.
   Without POSIX threads everything runs here. */
#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#define NPK_HAVE_THREADS 1
#endif
#define NPK_MAX_THREADS 64
#define NPK_CHUNKS_PER_THREAD 4

typedef void (*npk_body_fn)(void *ctx, int64_t begin, int64_t end);

static NPK_THREAD_LOCAL int npk_in_parallel; /* set while this thread runs a chunk */

#ifdef NPK_HAVE_THREADS
/* A positive integer from environment variable `name`, or 0 when it is unset or not one. */
static long npk_env_count(const char *name)
{
    const char *text = getenv(name);
    const long c = text != NULL ? strtol(text, NULL, 10) : 0;
    return c >= 1 ? c : 0;
}

/* NPUKIT_THREADS and NPUKIT_GRAIN as they were when an entry function last started: read
   there once (npk_read_env), not by every loop, whose getenv calls cost more than a small
   tile's kernel call. Every thread reads the same values. */
static long npk_env_cap, npk_env_grain;
#endif

/* How many threads a loop of n iterations gets, each at least grain of them. */
static int64_t npk_threads(int64_t n, int64_t grain)
{
    int64_t t = 1;
    if (npk_in_parallel)
        return 1;
#ifdef NPK_HAVE_THREADS
    static long cpus; /* online CPUs, asked once (a benign race: every thread gets the same) */
#ifdef _SC_NPROCESSORS_ONLN
    if (cpus <= 0)
        cpus = sysconf(_SC_NPROCESSORS_ONLN);
#endif
    t = cpus > 0 ? cpus : 1;
    if (npk_env_cap >= 1 && npk_env_cap < t)
        t = npk_env_cap;
    if (npk_env_grain >= 1)
        grain = npk_env_grain;
#endif
    if (t > NPK_MAX_THREADS)
        t = NPK_MAX_THREADS;
    if (grain > 1 && t > n / grain)
        t = n / grain;
    if (t > n)
        t = n;
    return t < 1 ? 1 : t;
}

#ifdef NPK_HAVE_THREADS
/* The pool. A loop opens a round; worker k (1, 2, ...) joins a round while it is open if
   the loop has more than k threads, and claims chunks until none is left; the calling
   thread closes the round once its own claims run dry and waits for the workers that
   joined. `round` counts the loops; a worker waits until it changes. */
static struct {
    pthread_mutex_t lock;  /* guards the fields below but `next` */
    pthread_cond_t wake;   /* a new round (a loop for the workers), or a call starting */
    pthread_cond_t done;   /* the last worker that joined the round finished */
    pid_t pid;             /* the process the workers belong to */
    int64_t workers;       /* workers started */
    unsigned long round;
    unsigned long warm;    /* counts entry calls started: the workers poll again */
    npk_body_fn body;
    void *ctx;
    int64_t n, t, chunks;  /* the loop: iterations, threads, chunks */
    int open;              /* workers may still join the round */
    int64_t active;        /* workers that joined and have not finished */
    int64_t next;          /* the next chunk to claim (atomic) */
} npk_pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
               0, 0, 0, 0, NULL, NULL, 0, 0, 0, 0, 0, 0};
static pthread_mutex_t npk_pool_busy = PTHREAD_MUTEX_INITIALIZER; /* one loop at a time */
static unsigned long npk_worker_round[NPK_MAX_THREADS]; /* the round a worker starts after */

/* Waiting a while before sleeping. Waking a sleeping thread takes tens of microseconds in a
   virtual machine (a futex call and an interrupt to a halted virtual CPU), more than most
   waits between a graph's parallel calls: on a 2-CPU KVM guest, a loop of 160 us of work in
   8 chunks took 121 us on 2 threads whose worker slept between loops, 79 us with it polling
   (about 1 us more than half the work). So a worker that finished a loop polls for the next
   one for NPK_SPIN pauses (about 100 us at 25 ns a pause) before it sleeps, yielding its CPU
   every NPK_YIELD pauses to any other thread that wants it (a busy machine: the worker is
   then late, and the caller runs the chunks); and the caller, its own claims done, polls as
   long for the workers' last chunks before it sleeps. */
#define NPK_SPIN 4000
#define NPK_YIELD 64
static inline void npk_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Until *round differs from seen, or NPK_SPIN pauses passed (a worker between loops). */
static void npk_poll_round(const unsigned long *round, unsigned long seen)
{
    for (int k = 1; k <= NPK_SPIN && __atomic_load_n(round, __ATOMIC_ACQUIRE) == seen; k++) {
        npk_pause();
        if (k % NPK_YIELD == 0)
            sched_yield();
    }
}

/* Until *active is 0, or NPK_SPIN pauses passed (the caller waiting for the workers). */
static void npk_poll_done(const int64_t *active)
{
    for (int k = 0; k < NPK_SPIN && __atomic_load_n(active, __ATOMIC_ACQUIRE) > 0; k++)
        npk_pause();
}

/* Chunks of the open round, claimed one at a time until none is left. */
static void npk_claim(npk_body_fn body, void *ctx, int64_t n, int64_t chunks)
{
    for (;;) {
        const int64_t c = __atomic_fetch_add(&npk_pool.next, 1, __ATOMIC_RELAXED);
        if (c >= chunks)
            return;
        body(ctx, n * c / chunks, n * (c + 1) / chunks);
    }
}

static void *npk_worker(void *arg)
{
    const int64_t k = (int64_t)(intptr_t)arg;
    npk_in_parallel = 1;
    pthread_mutex_lock(&npk_pool.lock);
    unsigned long seen = npk_worker_round[k], warm = npk_pool.warm;
    for (;;) {
        if (npk_pool.round == seen) { /* the next loop may be near: poll a while */
            pthread_mutex_unlock(&npk_pool.lock);
            npk_poll_round(&npk_pool.round, seen);
            pthread_mutex_lock(&npk_pool.lock);
        }
        while (npk_pool.round == seen && npk_pool.warm == warm)
            pthread_cond_wait(&npk_pool.wake, &npk_pool.lock);
        warm = npk_pool.warm;
        if (npk_pool.round == seen)
            continue; /* a call started (npk_read_env): its loops are near, poll again */
        seen = npk_pool.round;
        if (npk_pool.open && k < npk_pool.t) {
            const npk_body_fn body = npk_pool.body;
            void *ctx = npk_pool.ctx;
            const int64_t n = npk_pool.n, chunks = npk_pool.chunks;
            __atomic_add_fetch(&npk_pool.active, 1, __ATOMIC_RELAXED);
            pthread_mutex_unlock(&npk_pool.lock);
            npk_claim(body, ctx, n, chunks);
            pthread_mutex_lock(&npk_pool.lock);
            if (__atomic_sub_fetch(&npk_pool.active, 1, __ATOMIC_RELEASE) == 0)
                pthread_cond_signal(&npk_pool.done);
        }
    }
    return NULL;
}

/* Workers 1 .. t-1, started as needed (called holding npk_pool_busy); how many there are. */
static int64_t npk_start_workers(int64_t t)
{
    if (npk_pool.pid != getpid()) { /* the first loop, or a forked child: no workers yet */
        pthread_mutex_init(&npk_pool.lock, NULL);
        pthread_cond_init(&npk_pool.wake, NULL);
        pthread_cond_init(&npk_pool.done, NULL);
        npk_pool.pid = getpid();
        npk_pool.workers = 0;
    }
    while (npk_pool.workers < t - 1) {
        const int64_t k = npk_pool.workers + 1;
        pthread_t id;
        pthread_attr_t attr;
        npk_worker_round[k] = npk_pool.round;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        const int failed = pthread_create(&id, &attr, npk_worker, (void *)(intptr_t)k);
        pthread_attr_destroy(&attr);
        if (failed)
            break;
        npk_pool.workers = k;
    }
    return npk_pool.workers;
}
#endif

/* At the start of an entry function that has parallel loops: NPUKIT_THREADS and NPUKIT_GRAIN
   read for this call; when a loop of it may run on several threads (`wake`), the workers,
   when there are some and the call may use them, woken to poll: the call's first loop then
   finds them awake (a worker asleep since the call before woke too late for it: on a 2-CPU
   KVM guest the first split convolution of a 32x32 CNN ran 0.9x on two threads, the next
   ones 1.7x). Only then: a worker polling beside a call that runs on one thread slowed it
   by 5 to 25% there (the guest's two CPUs share a core's resources). */
static void npk_read_env(int wake)
{
#ifdef NPK_HAVE_THREADS
    npk_env_cap = npk_env_count("NPUKIT_THREADS");
    npk_env_grain = npk_env_count("NPUKIT_GRAIN");
    if (wake && npk_pool.workers > 0 && npk_pool.pid == getpid() && npk_env_cap != 1 &&
        !npk_in_parallel) {
        pthread_mutex_lock(&npk_pool.lock);
        npk_pool.warm++;
        pthread_cond_broadcast(&npk_pool.wake);
        pthread_mutex_unlock(&npk_pool.lock);
    }
#else
    (void)wake;
#endif
}

/* npk_once(&flag, init): the first caller runs init(); every caller returns after it ran
   (a table the generated code fills once per process). */
#ifdef NPK_HAVE_THREADS
typedef pthread_once_t npk_once_t;
#define NPK_ONCE_INIT PTHREAD_ONCE_INIT
static inline void npk_once(npk_once_t *flag, void (*init)(void)) { pthread_once(flag, init); }
#else
typedef int npk_once_t;
#define NPK_ONCE_INIT 0
static inline void npk_once(npk_once_t *flag, void (*init)(void))
{
    if (!*flag) {
        init();
        *flag = 1;
    }
}
#endif

static void npk_parallel_for(int64_t n, int64_t grain, npk_body_fn body, void *ctx)
{
    int64_t t = npk_threads(n, grain);
#ifdef NPK_HAVE_THREADS
    if (t > 1 && pthread_mutex_trylock(&npk_pool_busy) == 0) {
        const int64_t workers = npk_start_workers(t);
        if (workers + 1 < t)
            t = workers + 1;
        /* Up to four chunks a thread, each of at least grain iterations (t <= n / grain). */
        int64_t chunks = NPK_CHUNKS_PER_THREAD * t;
        if (npk_env_grain >= 1)
            grain = npk_env_grain;
        if (grain > 1 && chunks > n / grain)
            chunks = n / grain;
        if (chunks > n)
            chunks = n;
        if (chunks < t)
            chunks = t;
        pthread_mutex_lock(&npk_pool.lock);
        npk_pool.body = body;
        npk_pool.ctx = ctx;
        npk_pool.n = n;
        npk_pool.t = t;
        npk_pool.chunks = chunks;
        npk_pool.next = 0;
        npk_pool.open = 1;
        __atomic_store_n(&npk_pool.round, npk_pool.round + 1, __ATOMIC_RELEASE);
        pthread_cond_broadcast(&npk_pool.wake);
        pthread_mutex_unlock(&npk_pool.lock);
        npk_in_parallel = 1;
        npk_claim(body, ctx, n, chunks);
        npk_in_parallel = 0;
        pthread_mutex_lock(&npk_pool.lock);
        npk_pool.open = 0; /* a worker not awake yet stays out of this round */
        if (npk_pool.active > 0) { /* their chunks may end soon: poll a while */
            pthread_mutex_unlock(&npk_pool.lock);
            npk_poll_done(&npk_pool.active);
            pthread_mutex_lock(&npk_pool.lock);
        }
        while (npk_pool.active > 0)
            pthread_cond_wait(&npk_pool.done, &npk_pool.lock);
        pthread_mutex_unlock(&npk_pool.lock);
        pthread_mutex_unlock(&npk_pool_busy);
        return;
    }
#endif
    (void)t;
    body(ctx, 0, n);
}"""
