"""Calls of basic kernels (``ir.Call`` of an ``ir.Extern``), as the AutoTiler's generated
code makes them (the GAP AutoTiler).

Each distinct non-empty ``Extern.c_source`` is emitted once, before the entry function, after
a prelude of what GAP8 basic kernels rely on: the ``Word8`` ... ``Wordu32`` types and the
cluster calls ``gap_coreid()``, ``gap_ncore()`` and ``gap_waitbarrier()``. On the host a
parallel kernel runs on each of the target's cores, ``gap_coreid()`` saying which one:

- when its cores need not run at the same time — its C has no ``gap_waitbarrier()`` but
  as its very last statement, and calls no function that waits at one — they run on the
  host's threads (``npk_parallel_for``; each thread claims contiguous ranges of core ids,
  ``gap_coreid()`` is thread-local), the dispatch returning when every core has: that
  return is the barrier. A core must then write what no other core of the call reads or
  writes, as on the target, where the cores run at once. The cores run on one thread
  unless the call's work — its kernel's ``cost`` at the largest values its scalar
  arguments take — is ``CALL_WORK`` cycles or more, since waking a thread costs more than
  a smaller call's work (``NPUKIT_GRAIN`` overrides it, for tests);
- a kernel that waits at a barrier in the middle (MatMax: each core stores its partial
  maximum, waits, then the last core combines them) needs all its cores running at once,
  more than the host has threads: its cores run one after the other, core 0 first, and
  ``gap_waitbarrier()`` has nothing to wait for (the cores before have finished, the ones
  after have not started), which gives the target's result for kernels that combine
  per-core results after the barrier in the last core.

A parallel kernel with an argument type (``arg_type``, the AutoTiler's ``ParArgTypeName``) is
called as ``fn(KerArg)`` with a pointer to that struct, whose fields are named as its C
arguments; the struct of each call site is declared once with the arguments that never
change filled in ("Kernel invariant arguments", as the AutoTiler's generated code does), the
others are set before each call. Other kernels take their arguments directly.

Nothing of an extern but its ``c_source`` reaches the C as written: its name, argument
names and struct type must be C identifiers and its argument types parse into
``npukit.cdecl``'s closed set (``check_extern``, ``CompilerError``); types are written as
parsed.

>>> sorted(defined_names("typedef struct { int A; } T;\\nvoid F(T *Arg) { G(1); }"))
['F', 'T']
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from .. import ir
from ..cdecl import identifier, parse_ctype
from ..costs import as_work
from ..errors import CompilerError
from .code import Writer

_WORDS = (("Word8", "signed char"), ("Wordu8", "unsigned char"), ("Word16", "short int"),
          ("Wordu16", "unsigned short int"), ("Word32", "int"), ("Wordu32", "unsigned int"))
PRELUDE_NAMES = frozenset({w for w, _ in _WORDS} | {"gap_coreid", "gap_ncore",
                                                     "gap_waitbarrier"})


def prelude(cores: int) -> str:
    """The GAP8 types and cluster calls basic kernels use, for ``cores`` cores on the host."""
    words = "\n".join(f"typedef {t} {w};" for w, t in _WORDS)
    return f"""\
/* ---- What GAP8 basic kernels rely on, on the host ----
   A parallel basic kernel runs on each of the {cores} cores in turn, core 0 first:
   gap_coreid() says which one; gap_waitbarrier() has nothing to wait for (the cores before
   this one have finished, the ones after have not started), so a kernel must not rely on
   its cores running at the same time. */
{words}
static NPK_THREAD_LOCAL int npk_core_id; /* the core a parallel kernel runs as */
static inline int gap_coreid(void) {{ return npk_core_id; }}
static inline int gap_ncore(void) {{ return {cores}; }}
static inline void gap_waitbarrier(int barrier) {{ (void)barrier; }}"""


@functools.lru_cache(maxsize=256)
def defined_names(source: str) -> frozenset[str]:
    """Functions and types a C source defines at file scope (what generated names must not
    shadow): ``name(...) {`` definitions and ``typedef ... name;`` (found once per source:
    every layer calling a basic kernel asks)."""
    names = set(re.findall(r"\b([A-Za-z_]\w*)\s*\([^;{}()]*(?:\([^()]*\)[^;{}()]*)*\)\s*\{",
                           source))
    names |= set(re.findall(r"\}\s*([A-Za-z_]\w*)\s*;", source))
    names |= set(re.findall(r"typedef[^;{}]*?\b([A-Za-z_]\w*)\s*;", source))
    return frozenset(names - {"if", "for", "while", "switch", "return", "sizeof"})


def externs(prog: ir.Program) -> list[ir.Extern]:
    """The externs the program calls, in order of first call."""
    out: dict[str, ir.Extern] = {}
    for st, _ in prog.walk():
        if isinstance(st, ir.Call):
            out.setdefault(st.fn.name, st.fn)
    return list(out.values())


def extern_sources(prog: ir.Program) -> list[str]:
    """The distinct non-empty C sources of the called externs, in order of first call;
    ``CompilerError`` naming an extern none of them defines (or whose argument struct none
    of them declares)."""
    fns = externs(prog)
    for fn in fns:
        check_extern(fn)
    sources = list(dict.fromkeys(fn.c_source.strip() for fn in fns if fn.c_source.strip()))
    defined = set().union(*(defined_names(s) for s in sources)) if sources else set()
    for fn in fns:
        if fn.name not in defined:
            where = "its c_source does not define it" if fn.c_source.strip() else \
                "its c_source is empty and no other extern's c_source defines it"
            raise CompilerError(f"C back end: program {prog.name!r} calls basic kernel "
                                f"{fn.name!r}, but {where}; give the C definition in "
                                f"c_source= (LibKernel(..., c_source=...))")
        if fn.parallel and fn.arg_type and fn.arg_type not in defined:
            raise CompilerError(f"C back end: parallel basic kernel {fn.name!r} takes its "
                                f"arguments as struct {fn.arg_type!r}, which no c_source "
                                f"declares (typedef struct {{...}} {fn.arg_type};)")
    return sources


def check_extern(fn: ir.Extern) -> None:
    """What of ``fn`` is written into C — its name, its argument struct's type, its
    arguments' names and types — must be C names and types of ``npukit.cdecl``:
    ``CompilerError`` naming the part otherwise (an ``ir.Extern`` may be built directly,
    without the AutoTiler vocabulary's checks)."""
    identifier(fn.name, "C back end: basic kernel name", CompilerError)
    what = f"C back end: basic kernel {fn.name!r}"
    if fn.arg_type:
        identifier(fn.arg_type, f"{what}: argument struct type", CompilerError)
    names = []
    for ctype, name in fn.args:
        names.append(identifier(name, f"{what}: argument name", CompilerError))
        parse_ctype(ctype, f"{what}: argument {name!r}", CompilerError)
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise CompilerError(f"{what}: argument {twice[0]!r} is declared twice")


@dataclass
class ArgStruct:
    """The argument struct of one call site: ``S_KerArg0, *KerArg0 = &S_KerArg0``."""

    ctype: str
    name: str
    store: str
    invariant: list[tuple[str, str]] = field(default_factory=list)  # (field, value)


def _cast(ctype: str, expr: str) -> str:
    """``(ctype)expr``, parenthesised unless ``expr`` is a name, a number, a call or an
    element: ``(unsigned int)npk_clamp64(...)``, ``(short int)Bias[Op]``."""
    return f"({ctype}){expr}" if _primary(expr) else f"({ctype})({expr})"


def _primary(expr: str) -> bool:
    if expr.isidentifier() or expr.isdigit():
        return True
    m = re.match(r"[A-Za-z_]\w*[(\[]", expr)
    if not m:
        return False
    depth = 0
    for k, ch in enumerate(expr[m.end() - 1:], m.end() - 1):
        depth += ch in "(["
        depth -= ch in ")]"
        if depth == 0:
            return k == len(expr) - 1
    return False


def emit_call(em, st: ir.Call, w: Writer) -> None:
    """``st`` as C on ``w``; ``em`` is the emitter (names, accesses, argument structs)."""
    fn = st.fn
    if len(st.args) != len(fn.args):
        raise CompilerError(f"C back end: `{st.label}` passes {len(st.args)} arguments to "
                            f"{fn.name}, which takes {len(fn.args)}")
    w.banner(st.label or f"Call {fn.name}")
    # The types as parsed (check_extern), never as given.
    values = [_cast(str(parse_ctype(ctype, fn.name, CompilerError)), em.arg_value(a))
              for a, (ctype, _) in zip(st.args, fn.args)]
    cores = em.prog.target.cores
    struct = None
    if fn.parallel and fn.arg_type:
        s = em.arg_struct(fn.arg_type)
        struct = s.name
        for a, (_, name), v in zip(st.args, fn.args, values):
            if _invariant(a, em.in_place):
                s.invariant.append((name, v))
            else:
                w.line(f"{s.name}->{name} = {v};")
        calls = [f"{fn.name}({s.name});"]
    else:
        head = f"{fn.name}("
        lines = [(head if k == 0 else " " * len(head)) + v + ("," if k < len(values) - 1
                                                               else ");")
                 for k, v in enumerate(values)] or [head + ");"]
        width = max(len(x) for x in lines)
        calls = [f"{x:<{width}}  /* {name} */" for x, (_, name) in zip(lines, fn.args)] or lines
    if fn.parallel and not em.in_task and cores_independent(fn.name, em.sources):
        _on_threads(em, st, calls, struct, w)
    elif fn.parallel:
        core = "npk_core_id"
        w.comment(f"Dispatched on the {cores} cores, core 0 first, one after the other: "
                  f"{fn.name} waits at a barrier before it returns, so its cores need to "
                  f"run at once, which the host's threads cannot give them.")
        with w.block(f"for ({core} = 0; {core} < {cores}; {core}++)"):
            for line in calls:
                w.line(line)
        w.line(f"{core} = 0;")
    else:
        for line in calls:
            w.line(line)


# The least work (the kernel's cost, in the target's cycles: about one multiply-accumulate
# each for a convolution) of a call whose cores are shared among the host's threads. The
# host's vector kernels run a million such cycles in 30 to 100 microseconds (a
# convolution's feature tile in AVX-512, its quantized form in VNNI); a loop of
# npk_parallel_for costs about 1 us while the workers poll between loops, and a worker
# still asleep wakes too late to claim anything of a short call (the caller runs it all).
# Measured on a 2-CPU KVM guest (AMD EPYC, Zen 4), 1 -> 2 threads: with workers that slept
# between loops a second thread was slower below 2^22 cycles; with polling workers, 2^18
# made the MobileNet-style model of benchmarks/onnx_cnn.py slower (0.87x: its smaller calls
# split), 2^20 not (1.04x to 1.07x), and sped cnn10 at 224x224 up 1.59x (float32).
CALL_WORK = 1 << 20


def call_work(st: ir.Call) -> int:
    """The work of call ``st``: its kernel's ``cost`` of its scalar arguments at the largest
    values they take (operations: ``npukit.costs.Work.size``); 0 without a cost, or when the
    cost cannot be had (the simulator names the failure)."""
    if not st.fn.cost:
        return 0
    top = {}
    for (_, name), a in zip(st.fn.args, st.args):
        if isinstance(a, ir.Val):
            e = a.expr
            top[name] = min(e.width, max(0, e.total - e.start.bounds()[0])) \
                if isinstance(e, ir.Lanes) else e.bounds()[1]
    try:
        work = as_work(st.fn.cost(**top)).size
        return int(work) if work >= 0 else 0
    except Exception:  # a user's cost function: the simulator reports its failure
        return 0


def _on_threads(em, st: ir.Call, calls: list[str], struct: str | None, w: Writer) -> None:
    """A parallel kernel's cores as a task over core ids that the host's threads share:
    ``calls`` (the call as written, its arguments' values computed in the task, so that gcc
    specialises the kernel to the constant ones — a stride of 1, a 3x3 filter — as it does
    where the cores run one after the other); ``struct`` names its argument struct's
    pointer (set before), if it takes one."""
    fn, cores = st.fn, em.prog.target.cores
    # what the values read besides tensors and loop variables: internal memories (local
    # arrays of the entry function, passed by address) and the struct
    # (the internal memories the call's lines name: looked up from their words, as a concat
    # of n inputs has n calls over n memories)
    words = set(re.findall(r"\w+", "\n".join(calls)))
    extra = [em.internal_fields[i] for i in sorted(
        em.internal_at[w] for w in words if w in em.internal_at)]
    if struct is not None:
        extra.append((f"{fn.arg_type} *", struct))
    work = call_work(st)
    grain = 1 if work >= CALL_WORK else cores
    body = Writer(1)
    with body.block("for (int64_t core = begin; core < end; core++)"):
        body.line("npk_core_id = (int)core;")
        for line in calls:
            body.line(line)
    body.line("npk_core_id = 0;")
    w.comment(f"Dispatched on the {cores} cores, on the host's threads: {fn.name} does not "
              f"wait at a barrier before it returns, so its cores need not run at once"
              + (f" (its work, {work} cycles, is split)" if grain == 1 else
                 f" (its work, {work} cycles, is less than {CALL_WORK}: one thread runs "
                 f"them, core 0 first)") + ".")
    with w.block():
        em.run_task(f"the dispatch of {fn.name}: cores [begin, end) of it, on one thread.",
                    extra, body, str(cores), grain, w)


def cores_independent(name: str, sources: list[str]) -> bool:
    """True when the cores of parallel kernel ``name`` need not run at the same time: in the
    C sources, the kernel's function waits at ``gap_waitbarrier`` at most as its last
    statement and calls no function that waits at one.

    >>> cores_independent("K", ["void K(int *p) { p[0] = 1; gap_waitbarrier(0); }"])
    True
    >>> cores_independent("K", ["void K(int *p) { gap_waitbarrier(0); p[0] = 1; }"])
    False
    """
    return _independent(name, tuple(sources))


@functools.lru_cache(maxsize=256)
def _independent(name: str, sources: tuple[str, ...]) -> bool:
    """``cores_independent``, answered once per kernel and sources."""
    bodies = _bodies(sources)
    body = bodies.get(name)
    if body is None:
        return False
    inner = re.sub(r"\bgap_waitbarrier\s*\([^()]*\)\s*;\s*$", "", body.strip())
    if _BARRIER.search(inner):
        return False
    waiting = {f for f, b in bodies.items() if f != name and _BARRIER.search(b)}
    return not any(re.search(rf"\b{f}\s*\(", inner) for f in waiting)


_BARRIER = re.compile(r"\bgap_waitbarrier\s*\(")


@functools.lru_cache(maxsize=64)
def _bodies(sources: tuple[str, ...]) -> dict[str, str]:
    """``function_bodies`` of the uncommented sources, parsed once: a graph's layers call
    the same basic kernels' sources, tens of kilobytes each, once per call."""
    return function_bodies("\n".join(_uncommented(x) for x in sources))


def _uncommented(source: str) -> str:
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", source, flags=re.S)


_BRACE = re.compile(r"[{}]")


def function_bodies(source: str) -> dict[str, str]:
    """The functions ``source`` defines at file scope: name -> the text between its
    braces."""
    out = {}
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\([^;{}()]*(?:\([^()]*\)[^;{}()]*)*\)\s*\{",
                         source):
        depth, k = 1, m.end()
        for brace in _BRACE.finditer(source, m.end()):  # brace by brace, not char by char
            depth += 1 if brace.group() == "{" else -1
            k = brace.end()
            if not depth:
                break
        else:
            k = len(source)
        if m.group(1) not in ("if", "for", "while", "switch"):
            out.setdefault(m.group(1), source[m.end():k - 1])
    return out


def _invariant(a, in_place) -> bool:
    """An argument whose value is the same at every call: a constant, or the address of a
    view that does not move (``Deref`` reads memory, which may change; a buffer read in
    place, ``in_place``, is wherever its last copy's source was)."""
    if isinstance(a, ir.Val):
        return not (a.expr.terms if isinstance(a.expr, ir.Affine) else a.expr.start.terms)
    return isinstance(a, ir.Ptr) and not a.view.offset.terms and not (
        a.view.buffer.role == "internal" and a.view.buffer.name in in_place)
