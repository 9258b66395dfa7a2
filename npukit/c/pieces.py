"""A program's C in pieces: translation units compiled apart (in parallel, each cached by
its content, ``npukit.c.toolchain.build_pieces``), then linked into one shared object.

A graph's C is one unit per layer (its function, its tasks, its constants), one unit per
distinct basic-kernel source (the kernels' code, shared by every layer and every model that
calls them), one runtime unit (the threads of ``npukit.c.threads`` and the core number
``gap_coreid()`` reads) and the graph's own unit (construction, runner, destruction). A
layer's unit sees its kernels' sources with the bodies of their external functions taken
out (``declarations_only``): it keeps their types, macros and static helpers, and calls
the one copy of each kernel the kernel's own unit defines. Everything but the layers'
functions and the graph's entry points stays hidden in the shared object, as in the single
unit (``npukit.c.preamble.HIDDEN``).

>>> print(declarations_only("typedef int T;\\nvoid K(T *p) { p[0] = 1; }\\n"
...                         "static int h(void) { return 2; }"))
typedef int T;
void K(T *p) ;
static int h(void) { return 2; }
"""

from __future__ import annotations

import functools
import re

from . import preamble
from .ctype import TYPEDEFS
from .threads import FEATURE_MACRO
from .threads import SOURCE as THREADS_SOURCE

# What a scan of C at file scope stops at: comments, string and character literals,
# preprocessor lines (their braces are not the code's), braces and semicolons.
_TOKENS = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'"
                     r"|^[ \t]*#(?:\\\n|[^\n])*|[{};]", re.S | re.M)
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


@functools.lru_cache(maxsize=256)
def declarations_only(source: str) -> str:
    """``source`` with the body of every function it defines at file scope with external
    linkage replaced by ``;`` (a declaration): static and inline functions, types, macros
    and data are kept as they are."""
    out, depth, head, cut, body = [], 0, 0, 0, None
    for m in _TOKENS.finditer(source):
        tok = m.group()
        if tok in "{};" and depth == 0:
            if tok == "{":
                prefix = _COMMENT.sub(" ", source[head:m.start()])
                if _external_function(prefix):
                    body = m.start()
                depth = 1
            else:
                head = m.end()
        elif tok == "{":
            depth += 1
        elif tok == "}":
            depth -= 1
            if depth == 0:
                if body is not None:
                    out += [source[cut:body], ";"]
                    cut, body = m.end(), None
                head = m.end()
        elif tok.lstrip().startswith("#") and depth == 0:
            head = m.end()
    return "".join(out) + source[cut:]


def _external_function(prefix: str) -> bool:
    """Whether the text before a file-scope ``{`` heads a function definition with
    external linkage: ``... name(...)`` (attributes allowed after), neither static nor
    inline, no initializer."""
    text = prefix.strip()
    return (bool(re.search(r"\b[A-Za-z_]\w*\s*\(.*\)$", text, re.S)) and "=" not in text
            and not re.search(r"\b(static|inline|typedef|struct|union|enum)\b", text))


# The core number basic kernels read (gap_coreid()): defined once, in the runtime unit.
_CORE_ID = "static NPK_THREAD_LOCAL int npk_core_id;"


def shared_prelude(prelude: str) -> str:
    """``npukit.c.calls.prelude``'s text for a piece: the core number declared, not
    defined, so that a layer's task and the kernel it calls read one variable."""
    assert _CORE_ID in prelude, "npukit.c.calls.prelude no longer defines npk_core_id"
    return prelude.replace(_CORE_ID, "extern NPK_THREAD_LOCAL int npk_core_id;")


# The runtime functions generated code calls (npukit.c.threads).
_ENTRIES = ("static void npk_read_env(int wake)",
            "static void npk_parallel_for(int64_t n, int64_t grain, npk_body_fn body, "
            "void *ctx)")

# The runtime's entry points stay private to the shared object, as static functions are in
# a single unit (the threads source includes system headers: no visibility pragma around it).
_HIDDEN_FUNCTION = """\
#ifndef NPK_HIDDEN
#if defined(__GNUC__)
#define NPK_HIDDEN __attribute__((visibility("hidden")))
#else
#define NPK_HIDDEN
#endif
#endif"""

THREADS_DECLARATIONS = f"""\
/* ---- Threads (npukit.c.threads): defined once, in the runtime unit ---- */
{_HIDDEN_FUNCTION}
typedef void (*npk_body_fn)(void *ctx, int64_t begin, int64_t end);
""" + "\n".join(e.replace("static ", "NPK_HIDDEN ", 1) + ";" for e in _ENTRIES)


def runtime_unit() -> str:
    """The unit that defines the threads runtime and the core number for every piece."""
    text = THREADS_SOURCE
    for entry in _ENTRIES:
        assert entry in text, f"npukit.c.threads no longer defines {entry}"
        text = text.replace(entry, entry.replace("static ", "NPK_HIDDEN ", 1))
    return "\n".join([
        "/* The runtime of a program compiled in pieces (npukit.c.pieces): the threads every",
        "   piece's parallel loops share, and the core number basic kernels read. */",
        FEATURE_MACRO, "#include <stdint.h>", "", preamble.PORTABILITY, _HIDDEN_FUNCTION, "",
        "NPK_HIDDEN NPK_THREAD_LOCAL int npk_core_id; /* the core a parallel kernel runs "
        "as */", "", text, ""])


def kernel_units(source_lists: list[list[str]], prelude: str) -> list[str]:
    """One unit per distinct basic-kernel source of ``source_lists`` (each program's
    sources), in the order of first use, as the single unit holds them: the source whole,
    after every source before it as declarations (for the types and helpers it may use,
    and the include guards it may test: a kernel two sources define under one guard is
    defined once), after the shared ``prelude`` (``npukit.c.calls.prelude``)."""
    order = list(dict.fromkeys(text for sources in source_lists for text in sources))
    units = []
    for k, text in enumerate(order):
        context = [declarations_only(s) for s in order[:k]]
        typedefs = [t for name, t in TYPEDEFS.items()
                    if re.search(rf"\b{name}\b", "\n".join([*context, text]))]
        units.append("\n".join([
            "/* Basic kernels of a program compiled in pieces (npukit.c.pieces): their "
            "C, as given (c_source=). */",
            "#include <math.h>", "#include <stdint.h>", "#include <string.h>", "",
            preamble.PORTABILITY, *typedefs, preamble.HIDDEN[0], shared_prelude(prelude),
            *context, "", "/* Basic kernel source, as given (c_source=). */", text,
            preamble.HIDDEN[1], ""]))
    return units
