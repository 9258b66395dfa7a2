"""Compiling generated C with the system compiler into shared objects cached on disk.

``cc`` by default (``NPUKIT_CC`` overrides), flags ``-O3 -march=native`` (``NPUKIT_CFLAGS``
overrides) plus the ones the generated code needs. A shared object is keyed by a hash of
the source, the compiler, its version, the flags (relative include directories made
absolute) and, for ``-march=native``, the CPU; the files it ``#include``s are recorded when
it is compiled and checked when it is looked up. ``npukit.c.cache`` keeps the entries and
verifies each before it is loaded; processes can share the cache (``~/.cache/npukit``,
``NPUKIT_CACHE_DIR`` overrides). ``NPUKIT_SANITIZE=1`` builds with AddressSanitizer and
UndefinedBehaviorSanitizer.

>>> "-ffp-contract=off" in flags()
True
"""

from __future__ import annotations

import _ctypes
import ctypes
import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import CompilerError, NoCompilerError
from . import cache
from .cache import cache_dir

DEFAULT_CFLAGS = "-O3 -march=native"
# What the generated code relies on, whatever NPUKIT_CFLAGS says: position-independent shared
# objects, C99, one rounding per float operation (no FMA contraction), and no trapping math,
# without which gcc does not vectorise the ``?:`` clamps.
REQUIRED_CFLAGS = ("-std=c99", "-fPIC", "-shared", "-ffp-contract=off", "-fno-trapping-math")
SANITIZE_CFLAGS = ("-fsanitize=address,undefined", "-fno-omit-frame-pointer",
                   "-fno-sanitize-recover=all", "-g")
# Flags naming a directory or file the compiler reads: a relative one is made absolute, so
# the key says which files they are whatever the working directory.
_PATH_FLAGS = ("-I", "-isystem", "-iquote", "-idirafter", "-include", "-imacros")


def compiler() -> str:
    """The C compiler command: ``NPUKIT_CC`` (a program, possibly with arguments: ``gcc-12``,
    ``ccache gcc``) or ``cc``."""
    return os.environ.get("NPUKIT_CC") or "cc"


def sanitize() -> bool:
    """True when ``NPUKIT_SANITIZE`` asks for sanitizer builds."""
    return os.environ.get("NPUKIT_SANITIZE", "") not in ("", "0")


def _split(text: str, variable: str) -> list[str]:
    """``text`` split as a shell would; ``CompilerError`` naming ``variable`` otherwise."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise CompilerError(f"{variable}={text!r} cannot be split into arguments as a shell "
                            f"would ({exc}): balance its quotes") from None


def flags() -> list[str]:
    """Compiler flags: ``NPUKIT_CFLAGS`` (default ``-O3 -march=native``), the required ones,
    and the sanitizers when ``NPUKIT_SANITIZE`` is set."""
    out = _split(os.environ.get("NPUKIT_CFLAGS", DEFAULT_CFLAGS), "NPUKIT_CFLAGS")
    out += list(REQUIRED_CFLAGS)
    return out + list(SANITIZE_CFLAGS) if sanitize() else out


def _absolute_paths(fl: list[str]) -> list[str]:
    """``fl`` with the paths of ``-Idir``, ``-I dir``, ``-include file``... made absolute."""
    out = list(fl)
    for k, f in enumerate(out):
        for opt in _PATH_FLAGS:
            if f == opt and k + 1 < len(out):
                out[k + 1] = os.path.abspath(out[k + 1])
            elif f.startswith(opt) and len(f) > len(opt) and opt in ("-I", "-isystem",
                                                                      "-iquote", "-idirafter"):
                out[k] = opt + os.path.abspath(f[len(opt):])
    return out


def resolve(cc: str) -> list[str]:
    """The compiler command with its program's full path; ``CompilerError`` saying what to
    install when there is no such program."""
    cmd = _split(cc, "NPUKIT_CC")
    path = shutil.which(cmd[0]) if cmd else None
    if path is None:
        raise NoCompilerError(
            f"no C compiler: {cc!r} is not an executable on PATH. The C back end needs one: "
            f"install gcc (Debian/Ubuntu: `apt-get install gcc`, Fedora: `dnf install gcc`, "
            f"macOS: `xcode-select --install`) or point NPUKIT_CC at a C compiler.")
    return [path, *cmd[1:]]


@functools.cache
def _identity(cmd: tuple[str, ...], native: bool) -> str:
    """The compiler's version text, and the CPU when flags say ``native``: what besides the
    source decides the machine code."""
    try:
        out = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=60,
                             check=False)
    except OSError as exc:
        raise CompilerError(f"cannot run the C compiler {cmd[0]}: {exc}") from exc
    text = out.stdout + out.stderr
    if native:
        try:
            cpu = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpu = ""
        text += "".join(x for x in cpu.splitlines(keepends=True)
                        if x.startswith(("flags", "model name")))[:4096]
    return text


def _key(source: str) -> tuple[str, list[str], list[str]]:
    """(cache key of ``source``, compiler command, flags)."""
    cmd = resolve(compiler())
    fl = _absolute_paths(flags())
    ident = _identity(tuple(cmd), any("native" in f for f in fl))
    key = hashlib.sha256("\0".join([source, *cmd, ident, *fl]).encode()).hexdigest()[:32]
    return key, cmd, fl


def build(source: str) -> Path:
    """The shared object of ``source``: the cache's entry when it passes every check
    (``npukit.c.cache``), else compiled now (and the entry replaced)."""
    key, cmd, fl = _key(source)
    directory = cache_dir()
    so, _ = cache.problem(directory, key)
    if so is not None:
        return so
    return _compile(directory, key, source, cmd, fl)


def build_pieces(pieces: list[tuple[str, ...]], main: str) -> Path:
    """The shared object of a program compiled in pieces (``npukit.c.pieces``): each piece
    ``(what it is, its C)`` or ``(what it is, its C, its optimisation level)`` compiled to
    an object file of its own, cached by its content in ``objects/`` of the cache
    directory (only the pieces not there are compiled, in parallel, one ``cc`` per CPU,
    started in the pieces' order: give the longest first), then linked with ``main``
    (which defines the entry points), the whole cached as one entry. A program already
    built costs the hashing of its pieces and one look-up: no compile, no check of the
    objects. A piece's level (``-O1``, ``-O2``...) replaces the default flags' ``-O3``;
    flags set by ``NPUKIT_CFLAGS`` are used as they are for every piece."""
    cmd = resolve(compiler())
    fl = _absolute_paths(flags())
    ident = _identity(tuple(cmd), any("native" in f for f in fl))
    own = [_at_level(fl, piece[2] if len(piece) > 2 else "") for piece in pieces]
    keys = [_object_key(piece[1], cmd, ident, f) for piece, f in zip(pieces, own)]
    key, _, _ = _key(main + "".join(f"\0{k}" for k in keys))
    directory = cache_dir()
    so, _ = cache.problem(directory, key)
    if so is not None:
        return so
    objects = cache.writable_dir(directory / "objects")
    todo = {k: (piece[0], piece[1], f) for k, piece, f in zip(keys, pieces, own)
            if cache.object_problem(objects / f"{k}.o", k) is not None}
    if todo:
        workers = min(len(todo), cpus())
        with ThreadPoolExecutor(workers) as pool:
            done = [pool.submit(_compile_object, objects, k, what, text, cmd, f)
                    for k, (what, text, f) in todo.items()]
            for job in done:
                job.result()  # the first failure, in the pieces' order
    return _compile(directory, key, main, cmd, fl,
                    {objects / f"{k}.o": piece[0] for k, piece in zip(keys, pieces)})


def _at_level(fl: list[str], level: str) -> list[str]:
    """``fl`` with ``level`` for the default flags' optimisation level (``fl`` itself
    without a level, or when ``NPUKIT_CFLAGS`` chose the flags)."""
    if not level or "NPUKIT_CFLAGS" in os.environ:
        return fl
    return [level if f == DEFAULT_CFLAGS.split()[0] else f for f in fl]


def cpus() -> int:
    """The CPUs this process may run on (its affinity: what ``taskset`` or a container's
    CPU set allow, not every CPU of the machine): how many compiles to run at once."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # no affinity call (macOS)
        return os.cpu_count() or 1


def _object_key(text: str, cmd: list[str], ident: str, fl: list[str]) -> str:
    return hashlib.sha256("\0".join(["object", text, *cmd, ident, *fl]).encode()
                          ).hexdigest()[:32]


def _compile_object(objects: Path, key: str, what: str, text: str, cmd: list[str],
                    fl: list[str]) -> Path:
    """Compile one piece into ``objects/<key>.o`` (its C kept beside it as ``<key>.c``)."""
    src, obj = objects / f"{key}.c", objects / f"{key}.o"
    made: list[Path] = []
    try:
        try:
            cache.write_atomic(src, (text + cache.object_key_line(key)).encode())
            made.append(cache.temp_file(objects, key, "o"))
        except OSError as exc:
            raise cache.unwritable(objects, exc) from None
        tmp = made[0]
        res = run_compiler([*cmd, *(f for f in fl if f != "-shared"), "-c", "-o", str(tmp),
                            str(src)])
        said = (res.stderr + res.stdout)[-4000:]
        if res.returncode != 0:
            raise CompilerError(f"{compiler()} failed (exit {res.returncode}) on {what}, "
                                f"kept at {src}:\n{said}")
        bad = cache.object_problem(tmp, key)
        if bad:
            raise CompilerError(f"{compiler()} exited 0 on {src} ({what}) but {bad}; nothing "
                                f"was cached. Its output:\n{said or '(none)'}")
        os.replace(tmp, obj)
        return obj
    finally:
        for path in made:
            if path.exists():
                path.unlink()


def _compile(directory: Path, key: str, source: str, cmd: list[str], fl: list[str],
             objects: dict[Path, str] | None = None) -> Path:
    """Compile ``source`` as entry ``key`` (linked with ``objects``, each object file with
    what it holds, named when the link fails): its output checked, then published."""
    objects = objects or {}
    cache.writable_dir(directory)
    src = directory / f"{key}.c"
    made: list[Path] = []  # temporary files, removed whatever happens
    try:
        try:
            cache.write_atomic(src, (source + cache.key_line(key)).encode())
            made.append(cache.temp_file(directory, key, "so"))
            made.append(cache.temp_file(directory, key, "d"))
        except OSError as exc:
            raise cache.unwritable(directory, exc) from None
        tmp, dep = made
        # -MD -MF: the files the compile reads, as a make rule (its target named -MT).
        res = run_compiler([*cmd, *fl, "-MD", "-MF", str(dep), "-MT", "npk", "-o", str(tmp),
                            *map(str, objects), str(src)])
        said = (res.stderr + res.stdout)[-4000:]
        if res.returncode != 0:
            linked = "".join(f"\n  {path.name}: {what}" for path, what in objects.items()
                             if path.name in said)
            raise CompilerError(f"{compiler()} failed (exit {res.returncode}) on the generated "
                                f"C, kept at {src}" + (f", linked with {len(objects)} pieces "
                                f"in {next(iter(objects)).parent}; the pieces its messages "
                                f"name:{linked or ' none'}" if objects else "") + f":\n{said}")
        bad = cache.shared_object_problem(tmp.read_bytes(), key)
        if bad:
            raise CompilerError(f"{compiler()} exited 0 on {src} but {bad}; nothing was cached. "
                                f"Its output:\n{said or '(none)'}")
        try:
            return cache.publish(directory, key, tmp, cache.dependencies(dep, src))
        except OSError as exc:
            raise cache.unwritable(directory, exc) from None
    finally:
        for path in made:
            if path.exists():
                path.unlink()


class CompileTimeoutError(CompilerError):
    """A compile stopped after ``COMPILE_TIMEOUT`` seconds; the message names the file."""


# The longest one compile may take (seconds) before it is stopped and refused.
COMPILE_TIMEOUT = 600


def run_compiler(cmd: list[str]) -> subprocess.CompletedProcess:
    """Run one compile command (tests count calls through here); a compile past
    ``COMPILE_TIMEOUT`` is a ``CompilerError`` naming the file compiled."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT,
                              check=False)
    except subprocess.TimeoutExpired:
        source = cmd[-1] if len(cmd) > 1 else cmd[0]
        raise CompileTimeoutError(f"{cmd[0]} ran past {COMPILE_TIMEOUT} s compiling {source} and "
                            f"was stopped") from None
    except OSError as exc:
        raise CompilerError(f"cannot run the C compiler {cmd[0]}: {exc}") from exc


class _LoadError(CompilerError):
    """A shared object that passed the cache's checks but cannot be used."""


@functools.cache
def _library(so: Path) -> ctypes.CDLL:
    """Shared object ``so`` (a cache entry's) loaded, once per process. The object must hold
    its entry's key (``npk_cache_key``): another program's is unloaded unused."""
    if sanitize() and not _asan_loaded():
        raise CompilerError(
            "NPUKIT_SANITIZE=1 builds need the AddressSanitizer runtime loaded before python "
            "starts: run it as LD_PRELOAD=$(cc -print-file-name=libasan.so) "
            "ASAN_OPTIONS=detect_leaks=0 python ... (see npukit.c.sanitizer_env())")
    try:
        lib = ctypes.CDLL(str(so))
    except OSError as exc:
        raise _LoadError(f"cannot load the compiled kernel {so}: {exc}") from None
    key = so.name[:32]
    try:
        got = (ctypes.c_char * 33).in_dll(lib, cache.KEY_SYMBOL).value.decode(errors="replace")
    except ValueError:
        got = None
    if got != key:
        _ctypes.dlclose(lib._handle)
        raise _LoadError(f"{so} was built under cache key {got!r}, not {key!r}: another "
                         f"program's shared object; not used")
    return lib


@functools.cache
def load(so: Path, name: str, nargs: int, scalars: int = 0):
    """Function ``name`` of shared object ``so`` (a cache entry's), taking ``nargs`` pointers
    (as ints) then ``scalars`` 64-bit integers, returning nothing. ``CompilerError`` when
    it cannot be used."""
    lib = _library(so)
    try:
        fn = lib[name]
    except AttributeError:
        raise _LoadError(f"the compiled kernel {so} defines no function {name}") from None
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p] * nargs + [ctypes.c_int64] * scalars
    return fn


def _rebuilt(source: str, use, make=build):
    """``use`` applied to ``source`` compiled (by ``make``); an entry that passed the
    cache's checks but cannot be loaded is discarded and built once more before the error
    is raised."""
    so = make(source)
    try:
        return use(so)
    except _LoadError:
        cache.discard(so.parent, so.name[:32])
        return use(make(source))


def function(source: str, name: str, nargs: int, scalars: int = 0):
    """Function ``name`` of ``source`` compiled and loaded (``nargs`` pointer arguments then
    ``scalars`` 64-bit integers): the one way npukit runs a C function."""
    return _rebuilt(source, lambda so: load(so, name, nargs, scalars))


def library(source: str, private: bool = False) -> ctypes.CDLL:
    """``source`` compiled and loaded as a whole, for C with several entry points (a graph's
    construct, run and destruct); the caller sets each function's types. ``private``: a
    copy loaded apart from every other load of the same code, so that its globals (a
    graph's memories) belong to the caller alone."""
    return _rebuilt(source, _private_library if private else _library)


def library_in_pieces(pieces: list[tuple[str, ...]], main: str,
                      private: bool = False) -> ctypes.CDLL:
    """``library`` for a program compiled in pieces (``build_pieces``)."""
    return _rebuilt(main, _private_library if private else _library,
                    lambda text: build_pieces(pieces, text))


def compiler_digest() -> str:
    """The sha256 of what besides a source decides its machine code (the compiler command,
    its identity and the flags, as the cache keys hash them): a key for C not generated
    yet (``npukit.c.cache.linked``)."""
    cmd = resolve(compiler())
    fl = _absolute_paths(flags())
    ident = _identity(tuple(cmd), any("native" in f for f in fl))
    return hashlib.sha256("\0".join([*cmd, ident, *fl]).encode()).hexdigest()


def load_entry(so: Path, private: bool = False) -> ctypes.CDLL:
    """The cache entry ``so`` (one ``npukit.c.cache.problem`` passed) loaded as ``library``
    loads it; ``CompilerError`` when it cannot be."""
    return (_private_library if private else _library)(so)


def entry_key(lib: ctypes.CDLL) -> str:
    """The cache key the loaded shared object ``lib`` was built under (``npk_cache_key``,
    which loading it checked)."""
    return (ctypes.c_char * 33).in_dll(lib, cache.KEY_SYMBOL).value.decode()


def _private_library(so: Path) -> ctypes.CDLL:
    # The loader shares one instance per file: a copy under another name (keeping the key
    # the name starts with) is an instance of its own. The copies stay until the process
    # ends, for debuggers and sanitizers to read their symbols.
    fd, tmp = tempfile.mkstemp(prefix=so.name[:32] + "-", suffix=".so", dir=_copies().name)
    os.close(fd)
    shutil.copyfile(so, tmp)
    return _library(Path(tmp))


@functools.cache
def _copies() -> tempfile.TemporaryDirectory:
    """This process's folder of private library copies (removed when it exits)."""
    return tempfile.TemporaryDirectory(prefix="npukit-libs-")


def _asan_loaded() -> bool:
    try:
        return "libasan" in Path("/proc/self/maps").read_text()
    except OSError:
        return False


def sanitizer_env(cc: str | None = None) -> dict[str, str]:
    """Environment variables that run a Python subprocess with sanitizer builds: the ASan
    runtime preloaded (Python itself is not built with it), leak checks off (the
    interpreter keeps memory until exit), ``NPUKIT_SANITIZE=1``.

    >>> env = dict(os.environ, **sanitizer_env())  # doctest: +SKIP
    >>> subprocess.run([sys.executable, "my_checks.py"], env=env)  # doctest: +SKIP
    """
    cmd = resolve(cc or compiler())
    lib = subprocess.run([*cmd, "-print-file-name=libasan.so"], capture_output=True,
                         text=True, timeout=60, check=False).stdout.strip()
    if not os.path.isabs(lib):
        raise CompilerError(f"{cmd[0]} has no AddressSanitizer runtime (libasan.so); install "
                            f"it (Debian/Ubuntu: `apt-get install libasan8`)")
    return {"LD_PRELOAD": lib, "ASAN_OPTIONS": "detect_leaks=0", "NPUKIT_SANITIZE": "1"}
