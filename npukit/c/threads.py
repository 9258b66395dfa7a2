"""Threads for the C back end: the iterations of a parallel loop (``ir.Loop(parallel=True)``)
run on the host's cores through one small C runtime function, ``npk_parallel_for``.

``npk_parallel_for(n, body, ctx)`` calls ``body(ctx, begin, end)`` on contiguous chunks
that cover ``[0, n)``, one chunk per thread: the calling thread runs the first chunk and
then waits for the others. The thread count is the number of online CPUs, capped by the
environment variable ``NPUKIT_THREADS`` (read at every call, so a Python process can
change it between calls) and by ``n``. A call from inside a chunk runs serially on its
thread (no nested threads). Threads are POSIX threads created for the call and joined
before it returns: no pool stays behind, which costs some tens of microseconds per call —
front ends only make loops parallel when each thread gets far more work than that.
Without POSIX threads, or when a thread cannot be created, the chunks run on the calling
thread, so the result never depends on threads being available.

Chunks never share an iteration, so a loop whose iterations write disjoint data computes
the same bits whatever the thread count.

No compiler flag is needed: on glibc 2.34 and later the POSIX thread functions are in
libc, and a Python process has them loaded in any case.

>>> "npk_parallel_for" in SOURCE and "NPUKIT_THREADS" in SOURCE
True
"""

from __future__ import annotations

# What a translation unit that uses the runtime must define before its first #include, so
# that a strict -std=c99 build declares the POSIX functions.
FEATURE_MACRO = """\
#define _POSIX_C_SOURCE 200809L  /* POSIX threads under -std=c99 */
#define _DARWIN_C_SOURCE         /* and, on macOS, the count of online CPUs */"""

SOURCE = r"""/* ---- Threads (npukit.c.threads) ----
   npk_parallel_for(n, body, ctx) runs body(ctx, begin, end) on contiguous chunks covering
   [0, n), one per thread; the calling thread runs the first chunk, then joins the others.
   Threads: the online CPUs, capped by NPUKIT_THREADS and by n; one inside a chunk runs
   serially. Without POSIX threads, or when one cannot be created, chunks run here. */
#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#define NPK_HAVE_THREADS 1
#endif
#define NPK_MAX_THREADS 64

typedef void (*npk_body_fn)(void *ctx, int64_t begin, int64_t end);

typedef struct {
    npk_body_fn body;
    void *ctx;
    int64_t begin, end;
} npk_chunk;

static NPK_THREAD_LOCAL int npk_in_parallel; /* set while this thread runs a chunk */

/* How many threads a loop of n iterations gets. */
static int64_t npk_threads(int64_t n)
{
    int64_t t = 1;
#ifdef NPK_HAVE_THREADS
    static long cpus; /* online CPUs, asked once (a benign race: every thread gets the same) */
#ifdef _SC_NPROCESSORS_ONLN
    if (cpus <= 0)
        cpus = sysconf(_SC_NPROCESSORS_ONLN);
#endif
    t = cpus > 0 ? cpus : 1;
    const char *cap = getenv("NPUKIT_THREADS");
    if (cap != NULL && *cap != '\0') {
        long c = strtol(cap, NULL, 10);
        if (c >= 1 && c < t)
            t = c;
    }
#endif
    if (t > NPK_MAX_THREADS)
        t = NPK_MAX_THREADS;
    if (t > n)
        t = n;
    return npk_in_parallel || t < 1 ? 1 : t;
}

#ifdef NPK_HAVE_THREADS
static void *npk_chunk_main(void *arg)
{
    npk_chunk *c = (npk_chunk *)arg;
    npk_in_parallel = 1;
    c->body(c->ctx, c->begin, c->end);
    return NULL;
}
#endif

static void npk_parallel_for(int64_t n, npk_body_fn body, void *ctx)
{
    const int64_t t = npk_threads(n);
    if (t <= 1) {
        body(ctx, 0, n);
        return;
    }
#ifdef NPK_HAVE_THREADS
    npk_chunk chunk[NPK_MAX_THREADS];
    pthread_t id[NPK_MAX_THREADS];
    int started[NPK_MAX_THREADS];
    for (int64_t k = 1; k < t; k++) {
        chunk[k].body = body;
        chunk[k].ctx = ctx;
        chunk[k].begin = n * k / t;
        chunk[k].end = n * (k + 1) / t;
        started[k] = pthread_create(&id[k], NULL, npk_chunk_main, &chunk[k]) == 0;
    }
    npk_in_parallel = 1;
    body(ctx, 0, n / t);
    for (int64_t k = 1; k < t; k++) {
        if (started[k])
            pthread_join(id[k], NULL);
        else  /* no thread for this chunk: run it here */
            body(ctx, chunk[k].begin, chunk[k].end);
    }
    npk_in_parallel = 0;
#endif
}"""
