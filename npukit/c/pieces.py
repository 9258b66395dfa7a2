"""A program's C in pieces: translation units compiled apart (in parallel, each cached by
its content, ``npukit.c.toolchain.build_pieces``), then linked into one shared object.

A graph's C is one unit per group of layers (their functions, tasks and constants), one
unit per long basic-kernel source or part of one (``split_source``) and one for the short
ones (``kernel_units``), one runtime unit (the threads of ``npukit.c.threads`` and the core
number ``gap_coreid()`` reads) and the graph's own unit (construction, runner,
destruction). A layer's unit sees its kernels' sources as their interface
(``interface_only``): types, macros and the declarations of their external functions, and
calls the one copy of each kernel the kernels' unit defines. A kernels' unit sees the
sources used before its own as declarations (``declarations_only``, which keeps static
helpers: a later source may rely on them). Everything but the layers' functions and the
graph's entry points stays hidden in the shared object, as in the single unit
(``npukit.c.preamble.HIDDEN``).

>>> print(declarations_only("typedef int T;\\nvoid K(T *p) { p[0] = 1; }\\n"
...                         "static int h(void) { return 2; }"))
typedef int T;
void K(T *p) ;
static int h(void) { return 2; }
"""

from __future__ import annotations

import ast
import functools
import hashlib
import itertools
import math
import operator
import re

from .. import ir
from . import preamble, toolchain
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
    return _without_bodies(source, False)


# Headers of a CPU's vector intrinsics: the longest to parse of what basic kernels include
# (immintrin.h, about 0.1 s a compile), and needed only by code that uses vector types.
_INTRINSICS = re.compile(r"^[ \t]*#[ \t]*include[ \t]*<(?:\w*intrin\.h|arm_neon\.h|"
                         r"arm_sve\.h)>[^\n]*\n?", re.M)
_VECTOR_NAMES = re.compile(r"\b(?:__m\d|__mmask|_mm\d*_|__builtin_ia32|float32x|int\d+x\d|"
                           r"uint\d+x\d|svfloat|svint|svuint|svbool)")


@functools.lru_cache(maxsize=256)
def interface_only(source: str) -> str:
    """What a piece calling the kernels of ``source`` needs of it: ``declarations_only``
    without its static functions (only the kernels' own bodies call them) and, when
    nothing left names a vector type or intrinsic, without the vector intrinsics' headers
    (parsing them, not the piece's own code, was most of a small layer's compile)."""
    text = _without_bodies(source, True)
    rest = _INTRINSICS.sub("", text)
    return text if _VECTOR_NAMES.search(rest) else rest


def _without_bodies(source: str, drop_static: bool) -> str:
    """``source`` with each external function's body replaced by ``;`` and, with
    ``drop_static``, each static function's definition removed."""
    out, cut = [], 0
    for head, prefix, start, end in _blocks(source):
        if _external_function(prefix):
            out += [source[cut:start], ";"]
        elif drop_static and _static_function(prefix):
            out.append(source[cut:head])
        else:
            continue
        cut = end
    return "".join(out) + source[cut:]


def _blocks(source: str):
    """Each brace block at file scope of ``source``: (where its declaration starts, that
    declaration's text without comments, where its ``{`` is, where its ``}`` ends)."""
    depth, head, start, prefix = 0, 0, 0, ""
    for m in _TOKENS.finditer(source):
        tok = m.group()
        if tok in "{};" and depth == 0:
            if tok == "{":
                prefix, start, depth = _COMMENT.sub(" ", source[head:m.start()]), m.start(), 1
            else:
                head = m.end()
        elif tok == "{":
            depth += 1
        elif tok == "}":
            depth -= 1
            if depth == 0:
                yield head, prefix, start, m.end()
                head = m.end()
        elif tok.lstrip().startswith("#") and depth == 0:
            head = m.end()


def external_functions(source: str) -> list[str]:
    """The names of the functions ``source`` defines with external linkage."""
    return [_function_name(prefix) for _, prefix, _, _ in _blocks(source)
            if _external_function(prefix)]


_ATTRIBUTES = re.compile(r"__attribute__\s*\(\(.*?\)\)", re.S)


def _static_function(prefix: str) -> bool:
    """Whether the text before a file-scope ``{`` heads a static function definition."""
    text = prefix.strip()
    return (bool(re.search(r"\b[A-Za-z_]\w*\s*\(.*\)$", text, re.S)) and "=" not in text
            and bool(re.search(r"\bstatic\b", text))
            and not re.search(r"\b(typedef|struct|union|enum)\b", text.split("(")[0]))


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


# The compiler's optimisation level for each kind of piece (``toolchain.build_pieces``):
# long basic kernels (a unit or parts of their own), the short ones (one unit), groups of
# layers, the threads runtime. Measured by benchmarks/compile_time.py: compile CPU against
# the model's inference time.
KINDS = ("long kernels", "short kernels", "layers", "runtime")
LEVELS = {"long kernels": "-O3", "short kernels": "-O3", "layers": "-O3", "runtime": "-O3"}


# A basic-kernel source this long (bytes) is compiled in a unit of its own (a convolution's
# hand-vectorised specialisations: seconds of compile, to run beside everything else), in
# parts of about PART bytes (at most one per CPU) when it can be split (``split_source``);
# the shorter ones share one unit, which reads the system headers once for all of them.
ALONE = 16384


def kernel_units(source_lists: list[list[str]], prelude: str,
                 calls: dict[str, list[dict]] | None = None) -> list[tuple[str, str, str]]:
    """The units defining the distinct basic-kernel sources of ``source_lists`` (each
    program's sources), as ``(what it defines, its C, its optimisation level)``
    (``LEVELS``), the longest source's first (the
    order to start their compiles in): one per source of ``ALONE`` bytes or more (or one
    per part of it), one for all the others. Each holds the sources as the single unit
    does, in the order of first use: its own sources whole and every source before them as
    declarations (for the types and helpers they may use, and the include guards they may
    test: a kernel two sources define under one guard is defined once), after the shared
    ``prelude`` (``npukit.c.calls.prelude``). ``calls``: every call the program makes of
    each kernel (``constant_arguments``), by which each source is compiled without the
    copies of its code no call can reach (``prune``); None: the sources whole."""
    order = list(dict.fromkeys(text for sources in source_lists for text in sources))
    if calls is not None:
        order = [prune(text, reach(text, _calls_of(text, order, calls))) for text in order]
    alone = sorted((k for k, text in enumerate(order) if len(text) >= ALONE),
                   key=lambda k: -len(order[k]))
    units = []
    for k in alone:
        # No more parts than CPUs to compile them at once: each reads the headers again.
        parts = split_source(order[k], min(4, toolchain.cpus(), len(order[k]) // PART))
        units += [(*_kernel_unit(order, [k], prelude, part, f" (part {j + 1} of "
                                 f"{len(parts)})" if len(parts) > 1 else ""),
                   LEVELS["long kernels"]) for j, part in enumerate(parts)]
    rest = [k for k in range(len(order)) if k not in alone]
    return units + ([(*_kernel_unit(order, rest, prelude), LEVELS["short kernels"])]
                    if rest else [])


def _kernel_unit(order: list[str], mine: list[int], prelude: str, own: str | None = None,
                 part: str = "") -> tuple[str, str]:
    """The unit defining the sources ``mine`` (indices into ``order``); ``own``: the text
    of the one source it defines, when a part of it (``split_source``)."""
    texts = [(own or order[k]) if k in mine else declarations_only(order[k])
             for k in range(max(mine) + 1)]
    typedefs = [t for name, t in TYPEDEFS.items() if re.search(rf"\b{name}\b", "\n".join(texts))]
    names = [n for k in mine for n in external_functions(order[k])]
    return (f"basic kernels {', '.join(names) or '(no external functions)'}{part}", "\n".join([
        "/* Basic kernels of a program compiled in pieces (npukit.c.pieces): their C, as "
        "given (c_source=). */",
        "#include <math.h>", "#include <stdint.h>", "#include <string.h>", "",
        preamble.PORTABILITY, *typedefs, preamble.HIDDEN[0], shared_prelude(prelude),
        *(f"\n/* Basic kernel source, {'as given (c_source=)' if k in mine else 'declared'}."
          f" */\n{text}" for k, text in enumerate(texts)),
        preamble.HIDDEN[1], ""]))


# A long basic-kernel source is compiled in parts of about this many bytes each (its
# static non-inline functions, the shape specialisations of a convolution, shared out).
PART = 40000


def split_source(source: str, parts: int) -> list[str]:
    """``source`` as ``parts`` texts to compile apart and link together: each defines a
    share of its static non-inline functions (made external under a name unique to the
    source, hidden like every basic kernel) and of its external functions, and declares
    the others. ``[source]`` when it cannot be split so: fewer such
    functions than parts, static data the functions could share, or a static function
    declared before its definition."""
    blocks = list(_blocks(source))
    mine = [b for b in blocks if _static_function(b[1]) and not re.search(r"\binline\b", b[1])]
    names = [_function_name(b[1]) for b in mine]
    outside = _COMMENT.sub("", "".join(source[e:h] for (_, _, _, e), (h, _, _, _) in zip(
        [(0, "", 0, 0), *blocks], [*blocks, (len(source), "", 0, 0)])))
    data = re.search(r"^\s*static\b(?![^;]*\bconst\b)[^(;]*;", outside, re.M) or any(
        re.search(r"\bstatic\b", p) and "=" in p and not re.search(r"\bconst\b", p)
        for _, p, _, _ in blocks)
    if parts < 2 or len(mine) < parts or data or any(
            re.search(rf"\b{n}\s*\([^{{}}]*\)\s*;", outside) for n in names) or \
            any(_guarded(source, head) for head, _, _, _ in mine):
        return [source]
    tag = hashlib.sha256(source.encode()).hexdigest()[:8]
    renames = "".join(f"#define {n} {n}_npk{tag}\n" for n in names)
    shared = mine + [b for b in blocks if _external_function(b[1])]
    where = dict(zip(shared, _share_out(source, blocks, shared, parts)))
    out = []
    for j in range(parts):
        text, cut = [renames], 0
        for block in blocks:
            head, prefix, start, end = block
            if block in mine:
                text.append(source[cut:head] + re.sub(r"\bstatic\b", "", source[head:start],
                                                      count=1))
                text.append(source[start:end] if where[block] == j else ";")
            elif block in where and where[block] != j:
                text += [source[cut:start], ";"]
            else:
                text.append(source[cut:end])
            cut = end
        out.append("".join(text) + source[cut:])
    return out


def _share_out(source: str, blocks: list, shared: list, parts: int) -> list[int]:
    """The part of each function of ``shared`` (the ones a split defines once) of the
    ``blocks`` of ``source``: the
    heaviest first to the lightest part, a function's weight its body's length plus those
    of the inline functions it calls, and theirs in turn (the code its compile
    instantiates: a shape specialisation is a call of an inline template with constant
    arguments, which calls the templates of its blocks)."""
    inline = {_function_name(p): (start, end) for _, p, start, end in blocks
              if re.search(r"\binline\b", p) and re.search(r"\(", p) and "=" not in p}

    def called(start: int, end: int) -> set:
        """The inline functions the text calls, directly or through one another."""
        seen, todo = set(), [source[start:end]]
        while todo:
            body = todo.pop()
            for name, (s, e) in inline.items():
                if name not in seen and re.search(rf"\b{name}\s*\(", body):
                    seen.add(name)
                    todo.append(source[s:e])
        return seen

    def weight(start: int, end: int) -> int:
        return end - start + sum(inline[n][1] - inline[n][0] for n in called(start, end))

    load, where = [0] * parts, [0] * len(shared)
    for k in sorted(range(len(shared)), key=lambda k: -weight(*shared[k][2:])):
        where[k] = load.index(min(load))
        load[where[k]] += weight(*shared[k][2:])
    return where


def _function_name(prefix: str) -> str:
    """The name a function definition's head (its text before ``{``) defines."""
    return re.search(r"([A-Za-z_]\w*)\s*\(", _ATTRIBUTES.sub(" ", prefix)).group(1)


_CONDITIONALS = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|endif)\b[ \t]*(\w*)[^\n]*"
                           r"(?:\n[ \t]*#[ \t]*define[ \t]+(\w+))?", re.M)


def _guarded(source: str, at: int) -> bool:
    """Whether offset ``at`` of ``source`` lies inside an include guard (``#ifndef X``
    then ``#define X``): a block another source may define first, which this one's
    preprocessing then leaves out."""
    stack: list[bool] = []
    for m in _CONDITIONALS.finditer(source, 0, at):
        if m.group(1) != "endif":
            stack.append(m.group(1) == "ifndef" and m.group(2) == m.group(3))
        elif stack:
            stack.pop()
    return any(stack)


# A copy of a kernel's code that a program may leave out (``common.c_skippable``): its
# name, the condition its caller reaches it under, its text, what stands in for it.
_SKIPPABLE = re.compile(r"^#ifndef NPK_SKIP_(\w+)(?: /\* when: (.*?) \*/)?\n(.*?)"
                        r"(?:^#else\n(.*?))?^#endif /\* NPK_SKIP_\1 \*/\n?", re.M | re.S)
# A skippable copy's test of its constants (``common.c_pick_copy``): ``if (Fx == 3 && ...)``.
_TEST = re.compile(r"[ \t]*if \((.*)\)[ {]*\n")
_EQUALS = re.compile(r"(\w+) == (-?\d+)")


def constant_arguments(fn, args, env: dict | None = None) -> dict[str, int]:
    """The arguments of a call of basic kernel ``fn`` (an ``ir.Extern``) whose values are
    known, by parameter name: constants, and index expressions and valid counts of the
    loop variables ``env`` gives values (the others vary at run time)."""
    env = env or {}
    return {name: int(a.expr.eval(env)) for (_, name), a in zip(fn.args, args)
            if isinstance(a, ir.Val) and isinstance(a.expr, (ir.Affine, ir.Lanes))
            and all(v in env for v in _vars(a))}


# At most this many runs of one call are told apart (each its own loop variables' values);
# a call in more runs than that is one of its constant arguments.
_RUNS = 256


def program_calls(progs) -> dict[str, list[dict]]:
    """Every call ``progs`` make of a basic kernel, by its name: each run's known arguments
    (``constant_arguments``, for each value of the loop variables its arguments depend on,
    every value of a variable's range: a superset of the runs), the ``calls`` of
    ``kernel_units``."""
    out: dict[str, dict] = {}
    for prog in progs:
        for st, loops in ir.walk(prog.body):
            if isinstance(st, ir.Call):
                runs = out.setdefault(st.fn.name, {})
                runs.update((tuple(sorted(r.items())), r) for r in _runs(st, loops))
    return {name: list(runs.values()) for name, runs in out.items()}  # each distinct once


def _runs(call, loops) -> list[dict]:
    """``program_calls``' arguments of each run of ``call`` inside ``loops``."""
    used = [v for v in loops if any(v in _vars(a) for a in call.args)]
    if math.prod(v.count for v in used) > _RUNS:
        return [constant_arguments(call.fn, call.args)]
    return [constant_arguments(call.fn, call.args, dict(zip(used, values)))
            for values in itertools.product(*(range(v.count) for v in used))]


def _vars(arg) -> tuple:
    """The loop variables a call's scalar argument depends on (``()``: none, or not one)."""
    expr = arg.expr if isinstance(arg, ir.Val) else None
    return expr.start.vars if isinstance(expr, ir.Lanes) else \
        expr.vars if isinstance(expr, ir.Affine) else ()


def _calls_of(source: str, order: list[str], calls: dict[str, list[dict]]) -> list[dict]:
    """The calls of the kernels ``source`` defines (by their constant arguments); one of no
    known argument when another source names one of them (its calls are not known)."""
    names = external_functions(source)
    named = any(set(names) & _identifiers(other) for other in order if other is not source)
    return [args for n in names for args in calls.get(n, [])] + ([{}] if named else [])


def unreachable(source: str, calls: list[dict]) -> set[str]:
    """The skippable copies of ``source`` no run of ``calls`` reaches (``reach``)."""
    return {name for name, unless in reach(source, calls).items() if not unless}


def reach(source: str, calls: list[dict]) -> dict[str, str]:
    """The skippable copies of ``source`` (``common.c_skippable``) that none of ``calls``
    (each a run's known arguments by name) can reach: a copy tested for constants the
    run's arguments contradict, or whose test follows one those arguments pass, in a chain
    of tests (``common.c_pick_copy``); the chain's last copy where no test passes; every
    copy of a chain whose condition (``when``) the arguments contradict, or that follows,
    in its function, an ``if (...) { ... return; }`` whose condition they satisfy. Each
    with the C preprocessor condition under which some run reaches it all the same (``""``:
    none; a return under ``#ifdef X`` that the chain is not under leaves the chain reached
    where ``X`` is not defined). A copy that is not a chain's is reached."""
    chains, last = [], -1
    for m in _SKIPPABLE.finditer(source):
        test = _TEST.match(m.group(3))
        follows = m.start() == last and chains and chains[-1][-1][1] is not None
        if test or follows:
            if not follows:
                chains.append([m.start()])
            chains[-1].append((m.group(1), _constants(test.group(1)) if test else None,
                               m.group(2) or "1"))
        last = m.end()
    exits = _exits(source)
    where = _conditions(source, [chain[0] for chain in chains])
    reached: dict[str, set] = {}
    for chain, conditions in zip(chains, where):
        before = [(c, under - conditions) for head, end, at, c, under in exits
                  if head <= chain[0] < end and at < chain[0]]
        for args in calls:
            if evaluate(chain[1][2], args) is False:
                continue
            taken = [extra for c, extra in before if evaluate(c, args) is True]
            if frozenset() in taken:
                continue  # the run returns before this chain
            # Taken only where the preprocessor keeps it: the chain is reached elsewhere.
            unless = f"!({' && '.join(map(_c_condition, sorted(taken[0])))})" if taken \
                else None
            for name, constants, _ in chain[1:]:
                if constants is None or all(args.get(n) in (None, v) for n, v in
                                            constants.items()):
                    reached.setdefault(name, set()).add(unless)
                if constants is None or all(args.get(n) == v for n, v in constants.items()):
                    break  # this test passes: the copies after it are not reached
    names = {name for chain in chains for name, _, _ in chain[1:]}
    return {name: "" for name in names - set(reached)} | {
        name: " || ".join(sorted(how)) for name, how in reached.items() if None not in how}


def _c_condition(directive: str) -> str:
    """The C condition under which the text after preprocessor ``directive`` is kept."""
    if directive.startswith("not "):
        return f"!({_c_condition(directive[4:])})"
    kind, _, rest = directive.partition(" ")
    return {"ifdef": f"defined({rest})", "ifndef": f"!defined({rest})"}.get(kind, f"({rest})")


# What a function's body is scanned for (``_exits``): comments, strings, preprocessor
# lines, ``if (``, ``return;``, parentheses, braces.
_STATEMENTS = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|^[ \t]*#[^\n]*|"
                         r"\bif\s*\(|\breturn\s*;|[{}();]", re.S | re.M)


def _exits(source: str) -> list[tuple[int, int, int, str, frozenset]]:
    """Each ``if (condition) { ... return; }`` at the top of a function of ``source`` (its
    block ending in that return): (where the function starts, ends, where the block ends,
    the condition, the preprocessor conditions it is under)."""
    found = []
    for _, prefix, start, end in _blocks(source):
        if "(" not in prefix:
            continue
        depth, toks = 0, list(_STATEMENTS.finditer(source, start, end))
        for k, m in enumerate(toks):
            tok = m.group()
            if tok in "{}":
                depth += 1 if tok == "{" else -1
            elif tok.startswith("if") and depth == 1:
                found += _exit(source, start, end, toks, k)
    where = _conditions(source, [at for _, _, at, _ in found])
    return [(*x, w) for x, w in zip(found, where)]


def _exit(source: str, start: int, end: int, toks: list, k: int) -> list:
    """``_exits``' entry for the ``if`` at ``toks[k]`` (of a function from ``start`` to
    ``end``), or none."""
    parens, j = 1, k + 1
    while parens and j < len(toks):
        parens += {"(": 1, ")": -1}.get(toks[j].group(), 0)
        j += 1
    statements = [t for t in toks[j:] if not t.group().startswith(("/", "#", '"'))]
    if not statements or statements[0].group() != "{":
        return []
    depth, last = 0, ""
    for t in statements:
        depth += {"{": 1, "}": -1}.get(t.group(), 0)
        if depth == 0:
            break
        if depth == 1 and t.group() != "{":
            last = t.group()
    condition = _COMMENT.sub(" ", source[toks[k].end():toks[j - 1].start()])
    return [(start, end, t.end(), " ".join(condition.split()))] \
        if last.startswith("return") else []


_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b([^\n]*)", re.M)


def _conditions(source: str, places: list[int]) -> list[frozenset]:
    """The preprocessor conditions each of ``places`` of ``source`` is under (the guards
    of skippable copies left out)."""
    out, stack, at = {}, [], 0
    for place in sorted(places):
        for m in _DIRECTIVE.finditer(source, at, place):
            kind, text = m.group(1), m.group(2).split("/*")[0].strip()
            if kind == "endif":
                stack = stack[:-1]
            elif kind in ("else", "elif"):
                stack = stack[:-1] + [None if stack[-1] is None else f"not {stack[-1]}"]
            else:
                stack = stack + [None if text.startswith("NPK_SKIP_") else f"{kind} {text}"]
        at = max(at, place)
        out[place] = frozenset(x for x in stack if x is not None)
    return [out[p] for p in places]


def _constants(test: str) -> dict[str, int] | None:
    """The constants a copy's C test ``Fx == 3 && ...`` asks for (None: another test)."""
    terms = test.split(" && ")
    found = [_EQUALS.fullmatch(t.strip()) for t in terms]
    return {m.group(1): int(m.group(2)) for m in found} if all(found) else None


def evaluate(expression: str, values: dict[str, int]) -> bool | int | None:
    """The value of C ``expression`` (comparisons, ``&& || !``, ``+ - *``) where the names
    ``values`` gives have those values; None where it depends on others.

    >>> evaluate("Wo < 32 && Sx == 1", {"Wo": 56}), evaluate("Wo < 32 && Sx == 1", {"Wo": 7})
    (False, None)
    """
    return _value(_tree(expression), values)


@functools.lru_cache(maxsize=1024)
def _tree(expression: str):
    """C ``expression``'s tree, as Python's (the operators renamed)."""
    text = re.sub(r"!(?!=)", " not ", expression.replace("&&", " and ").replace("||", " or "))
    return ast.parse(text.strip(), mode="eval").body


def _value(node, values: dict[str, int]):
    """``evaluate``'s value of ``node``, an expression's tree (None: not known)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return values.get(node.id)
    if isinstance(node, ast.BoolOp):
        got = [_value(v, values) for v in node.values]
        stop = isinstance(node.op, ast.Or)  # the value that decides: true for ||
        if any(v is not None and bool(v) == stop for v in got):
            return stop
        return None if None in got else not stop
    got = [_value(v, values) for v in ast.iter_child_nodes(node)
           if not isinstance(v, (ast.operator, ast.unaryop, ast.cmpop))]
    if None in got:
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        return not got[0] if isinstance(node.op, ast.Not) else -got[0]
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        return _ARITHMETIC[type(node.op)](*got)
    if isinstance(node, ast.Compare):
        return all(_COMPARE[type(op)](a, b) for op, a, b in zip(node.ops, got, got[1:]))
    return None


_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
            ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}


def prune(source: str, skip: set[str] | dict[str, str]) -> str:
    """``source`` without the copies ``skip`` names (``common.c_skippable``: each replaced
    by what stands in for it; a name mapped to a C preprocessor condition, ``reach``'s, is
    kept where that condition holds), but for any copy the remaining code still names."""
    skip = dict.fromkeys(skip, "") if isinstance(skip, set) else skip
    named = set(skip) & _identifiers(_without(source, skip, False))
    if named:
        return prune(source, {n: c for n, c in skip.items() if n not in named})
    return _without(source, skip, True)


@functools.lru_cache(maxsize=256)
def _identifiers(text: str) -> frozenset[str]:
    """The words of C ``text`` (a superset of the names it uses)."""
    return frozenset(re.findall(r"\w+", text))


def _without(source: str, skip: dict[str, str], kept: bool) -> str:
    """``source`` with each copy of ``skip`` replaced by its stand-in (``kept``: where its
    condition holds, the copy as it was)."""
    def replace(m) -> str:
        if m.group(1) not in skip:
            return m.group()
        instead, unless = m.group(4) or "", skip[m.group(1)]
        if not (kept and unless):
            return instead
        return f"#if {unless}\n{m.group()}#else\n{instead}#endif\n"
    return _SKIPPABLE.sub(replace, source)
