"""The fixed C text a generated unit or header opens with: portability macros, the
visibility guard around basic kernels, and include-once guards."""

from __future__ import annotations

PORTABILITY = """\
/* Tensor elements may sit at any address (numpy arrays need not be aligned); internal
   arrays are aligned for vector loads. */
#if defined(__GNUC__)
#define NPK_ALIGNED __attribute__((aligned(64)))
#define NPK_ANY_ADDRESS __attribute__((aligned(1)))
#define NPK_THREAD_LOCAL __thread
#define NPK_NOINLINE __attribute__((noinline))
#else
#define NPK_ALIGNED
#define NPK_ANY_ADDRESS
#define NPK_THREAD_LOCAL
#define NPK_NOINLINE
#endif"""


# Basic kernels stay private to their shared object: a call of one never binds to a
# function of the same name elsewhere in the process (another program's, a library's).
HIDDEN = ("""\
/* The basic kernels below are private to this shared object. */
#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif""", """\
#if defined(__GNUC__)
#pragma GCC visibility pop
#endif""")


# What a header needs of PORTABILITY, defined once whichever headers are included.
ANY_ADDRESS = """\
#ifndef NPK_ANY_ADDRESS
#if defined(__GNUC__)
#define NPK_ANY_ADDRESS __attribute__((aligned(1)))
#else
#define NPK_ANY_ADDRESS
#endif
#endif"""


def once(macro: str, text: str) -> str:
    """``text`` guarded so that two npukit headers in one file declare it once."""
    return f"#ifndef {macro}\n#define {macro}\n{text}\n#endif"
