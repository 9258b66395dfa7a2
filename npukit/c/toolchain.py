"""Compiling generated C with the system compiler into shared objects cached on disk.

``cc`` by default (``NPUKIT_CC`` overrides), flags ``-O3 -march=native`` (``NPUKIT_CFLAGS``
overrides) plus the ones the generated code needs. A shared object is named by a hash of
the source, the compiler, its version, the flags and, for ``-march=native``, the CPU, and
is written atomically (a temporary file in the same directory, then ``os.replace``), so
processes can share the cache (``~/.cache/npukit``, ``NPUKIT_CACHE_DIR`` overrides).
``NPUKIT_SANITIZE=1`` builds with AddressSanitizer and UndefinedBehaviorSanitizer.

>>> "-ffp-contract=off" in flags()
True
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..errors import CompilerError

DEFAULT_CFLAGS = "-O3 -march=native"
# What the generated code relies on, whatever NPUKIT_CFLAGS says: position-independent shared
# objects, C99, one rounding per float operation (no FMA contraction), and no trapping math,
# without which gcc does not vectorise the ``?:`` clamps.
REQUIRED_CFLAGS = ("-std=c99", "-fPIC", "-shared", "-ffp-contract=off", "-fno-trapping-math")
SANITIZE_CFLAGS = ("-fsanitize=address,undefined", "-fno-omit-frame-pointer",
                   "-fno-sanitize-recover=all", "-g")


def compiler() -> str:
    """The C compiler command: ``NPUKIT_CC`` (a program, possibly with arguments: ``gcc-12``,
    ``ccache gcc``) or ``cc``."""
    return os.environ.get("NPUKIT_CC") or "cc"


def sanitize() -> bool:
    """True when ``NPUKIT_SANITIZE`` asks for sanitizer builds."""
    return os.environ.get("NPUKIT_SANITIZE", "") not in ("", "0")


def flags() -> list[str]:
    """Compiler flags: ``NPUKIT_CFLAGS`` (default ``-O3 -march=native``), the required ones,
    and the sanitizers when ``NPUKIT_SANITIZE`` is set."""
    out = shlex.split(os.environ.get("NPUKIT_CFLAGS", DEFAULT_CFLAGS)) + list(REQUIRED_CFLAGS)
    return out + list(SANITIZE_CFLAGS) if sanitize() else out


def cache_dir() -> Path:
    """Where shared objects are kept: ``NPUKIT_CACHE_DIR`` or ``~/.cache/npukit``."""
    env = os.environ.get("NPUKIT_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "npukit"


def resolve(cc: str) -> list[str]:
    """The compiler command with its program's full path; ``CompilerError`` saying what to
    install when there is no such program."""
    cmd = shlex.split(cc)
    path = shutil.which(cmd[0]) if cmd else None
    if path is None:
        raise CompilerError(
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


def build(source: str) -> Path:
    """The shared object of ``source``, compiled now unless the cache already holds it."""
    cc = compiler()
    cmd = resolve(cc)
    fl = flags()
    ident = _identity(tuple(cmd), any("native" in f for f in fl))
    key = hashlib.sha256("\0".join([source, *cmd, ident, *fl]).encode()).hexdigest()[:32]
    out_dir = cache_dir()
    so = out_dir / f"{key}.so"
    if so.exists():
        return so
    out_dir.mkdir(parents=True, exist_ok=True)
    src = out_dir / f"{key}.c"
    _write_atomic(src, source.encode())
    fd, tmp = tempfile.mkstemp(suffix=".so.tmp", dir=out_dir)
    os.close(fd)
    try:
        res = run_compiler([*cmd, *fl, "-o", tmp, str(src)])
        if res.returncode != 0:
            raise CompilerError(f"{cc} failed (exit {res.returncode}) on the generated C, kept at "
                                f"{src}:\n{(res.stderr or res.stdout)[-4000:]}")
        os.replace(tmp, so)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return so


def run_compiler(cmd: list[str]) -> subprocess.CompletedProcess:
    """Run one compile command (tests count calls through here)."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    except OSError as exc:
        raise CompilerError(f"cannot run the C compiler {cmd[0]}: {exc}") from exc


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


@functools.cache
def load(so: Path, name: str, nargs: int):
    """Function ``name`` of shared object ``so``, taking ``nargs`` pointers (as ints)."""
    if sanitize() and not _asan_loaded():
        raise CompilerError(
            "NPUKIT_SANITIZE=1 builds need the AddressSanitizer runtime loaded before python "
            "starts: run it as LD_PRELOAD=$(cc -print-file-name=libasan.so) "
            "ASAN_OPTIONS=detect_leaks=0 python ... (see npukit.c.sanitizer_env())")
    fn = ctypes.CDLL(str(so))[name]
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p] * nargs
    return fn


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
