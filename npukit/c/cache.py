"""The on-disk cache of compiled shared objects, verified before use.

An entry is named by its key (32 hex digits, ``npukit.c.toolchain`` says what it hashes) and
is three files in the cache directory (``~/.cache/npukit``, ``NPUKIT_CACHE_DIR``
overrides):

- ``<key>.c``: the source compiled — the generated C, then one line the back end appends
  at build time: ``const char npk_cache_key[] = "<key>";``;
- ``<key>-<first 16 hex digits of its sha256>.so``: the shared object;
- ``<key>.json``: the sidecar, written last, after a compile whose output was checked::

      {"format": "npukit-cache/1", "key": "<key>", "so": "<key>-<sha16>.so",
       "sha256": "<sha256 of the .so bytes>", "size": <bytes>,
       "headers": {"<absolute path>": "<sha256 of its bytes>", ...}}

  ``headers`` lists every file the compiler read besides the source (``-MD``: the
  ``#include``s of basic kernels' ``c_source`` and the system headers); ``null`` when the
  compiler wrote no dependency list.

An entry is used only when its sidecar is this format and key, the ``.so`` it names has
those bytes, starts like a shared object (ELF or Mach-O) and holds its key, and every header
still has its recorded bytes. Anything else — a truncated, empty, garbage or foreign
``.so``, a missing sidecar, a changed header — means the entry is rebuilt. Files are
written to a temporary name and renamed into place, so processes share the cache safely; a
cache directory one cannot write to still serves the entries it holds. The checks catch
accidents (a crash mid-write, a copied file, an edited header), not someone who may write
the directory: they could plant any code there, so it must be yours alone.

A graph's C compiled in pieces (``npukit.c.pieces``) keeps each piece in ``objects/``:
``<key>.c`` (the piece, then a line defining ``npk_object_<key>``) and ``<key>.o``, written
under a temporary name and renamed into place once compiled; an object is linked only when it
starts like an object file and holds its key (else it is compiled again). The shared object
they are linked into is an entry as above.

The plans of ONNX models (``npukit.onnx.plan_cache``) are kept in ``plans/`` as
``<key>.plan``.

A graph whose C is known by a key without generating it (an ONNX model's host plan: the plan
cache's key, ``npukit.tiler.graph_c.known_as``) is linked to its entry in ``links/``:
``<key>.json`` holds ``{"format": "npukit-link/1", "key": ..., "entry": "<the entry's key>",
"flash": {"sha256": ..., "size": ...}}`` (``flash``: the graph's constants file, or
``null``). The key hashes the graph's key with the compiler, its identity and flags
(``npukit.c.toolchain.compiler_digest``) and the CPUs its C was split for. A link is
followed only when it is this format and key, its entry passes every check above and the
flash file it names has the bytes it records; anything else means the C is generated and
built (found in the cache by its content as before) and the link written again. A graph's
constants file is kept in ``flash/<first 32 hex digits of its sha256>/<its name>``.

``npukit cache info`` and ``npukit cache clear`` (``register``) report on and empty it (the
pieces, the plans, the links and the constants files included).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from ..errors import CompilerError, NpukitError

FORMAT = "npukit-cache/1"
KEY_SYMBOL = "npk_cache_key"
# The first bytes of a shared object: ELF, Mach-O (32/64 bits, both byte orders), and a
# universal Mach-O binary.
_MAGIC = (b"\x7fELF", b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe",
          b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe")
_KEY = r"[0-9a-f]{32}"
# Entry files, and the shared objects of npukit versions before the sidecar (<key>.so).
_ENTRY_FILE = re.compile(rf"({_KEY})(\.c|\.json|-[0-9a-f]{{16}}\.so|\.so)")
_TEMP_FILE = re.compile(rf"({_KEY})\.\w+\.(so|d|c|json|o|plan)\.tmp")
# The objects of programs compiled in pieces (npukit.c.pieces), in OBJECTS/: <key>.c, <key>.o.
OBJECTS = "objects"
_OBJECT_FILE = re.compile(rf"({_KEY})\.(c|o)")
# The plans of ONNX models (npukit.onnx.plan_cache), in PLANS/: <key>.plan.
PLANS = "plans"
_PLAN_FILE = re.compile(rf"({_KEY})\.plan")
# Graphs' entries by what determines their C (npukit.tiler.graph_c), in LINKS/: <key>.json.
LINKS = "links"
LINK_FORMAT = "npukit-link/1"
_LINK_FILE = re.compile(rf"({_KEY})\.json")
# Graphs' constants files by the sha256 of their bytes (npukit.tiler.graph_c), in FLASH/.
FLASH = "flash"
_STALE_TEMP_SECONDS = 3600  # a temporary file this old belongs to no running compile
_LISTED = 10  # failing entries `npukit cache info` names


def cache_dir() -> Path:
    """Where shared objects are kept: ``NPUKIT_CACHE_DIR`` or ``~/.cache/npukit``."""
    env = os.environ.get("NPUKIT_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "npukit"


def key_line(key: str) -> str:
    """The line appended to a source before it is compiled under ``key``."""
    return (f"\n/* The npukit cache key this shared object was built under (checked before "
            f"it is used). */\nconst char {KEY_SYMBOL}[] = \"{key}\";\n")


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def problem(directory: Path, key: str) -> tuple[Path | None, str | None]:
    """(the entry's shared object, None) when entry ``key`` passes every check, else
    (None, what is wrong)."""
    try:
        meta = json.loads((directory / f"{key}.json").read_text())
    except FileNotFoundError:
        return None, "no sidecar"
    except (OSError, ValueError) as exc:
        return None, f"unreadable sidecar ({exc})"
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("key") != key:
        return None, "the sidecar is not this entry's"
    name = meta.get("so")
    if not isinstance(name, str) or not re.fullmatch(rf"{key}-[0-9a-f]{{16}}\.so", name):
        return None, "the sidecar names no shared object of this entry"
    so = directory / name
    try:
        data = so.read_bytes()
    except OSError as exc:
        return None, f"unreadable shared object ({exc})"
    bad = shared_object_problem(data, key)
    if bad or hashlib.sha256(data).hexdigest() != meta.get("sha256"):
        return None, bad or f"{name} does not hold the bytes the sidecar records"
    headers = meta.get("headers")
    for path, digest in (headers or {}).items():
        try:
            if not Path(path).is_file() or sha256_file(Path(path)) != digest:
                return None, f"header {path} changed"
        except OSError:
            return None, f"header {path} is gone"
    return so, None


def shared_object_problem(data: bytes, key: str) -> str | None:
    """What makes ``data`` no shared object built under ``key``, or None."""
    if not data:
        return "the shared object is empty (0 bytes)"
    if not data.startswith(_MAGIC):
        return f"the file does not start like a shared object (ELF or Mach-O): {data[:8]!r}"
    if f"{key}\0".encode() not in data:
        return f"the shared object does not hold its cache key {key} ({KEY_SYMBOL})"
    return None


def object_key_line(key: str) -> str:
    """The line appended to a piece (``npukit.c.pieces``) compiled as object ``key``."""
    return (f"\n/* The npukit cache key this object was compiled under (checked before it "
            f"is linked). */\nconst char npk_object_{key}[] = \"{key}\";\n")


def object_problem(path: Path, key: str) -> str | None:
    """What makes ``path`` no object file compiled as piece ``key``, or None."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"unreadable object file ({exc.strerror or exc})"
    if not data.startswith(_MAGIC):
        return f"the file does not start like an object file (ELF or Mach-O): {data[:8]!r}"
    return None if f"{key}\0".encode() in data else f"the object does not hold its key {key}"


def dependencies(depfile: Path, source: Path) -> dict[str, str] | None:
    """The files a compile read besides ``source``, from the make rule ``-MD -MF depfile``
    wrote, with the sha256 of their bytes now (None when there is no such file)."""
    try:
        text = depfile.read_text()
    except OSError:
        return None
    _, _, prerequisites = text.replace("\\\n", " ").partition(":")
    # Make's escapes: "\ " is a space in a name, "$$" a dollar sign, "\#" a hash.
    names = [re.sub(r"\\([ #])", r"\1", t).replace("$$", "$")
             for t in re.findall(r"(?:\\[ #]|[^\s])+", prerequisites)]
    out = {}
    for name in names:
        path = Path(os.path.abspath(name))
        if path != Path(os.path.abspath(source)):
            out[str(path)] = sha256_file(path)
    return out


def publish(directory: Path, key: str, tmp: Path, headers: dict | None) -> Path:
    """Move the checked shared object ``tmp`` into place as entry ``key``, then write the
    sidecar; the entry's earlier shared object (if another) is removed."""
    data = tmp.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    so = directory / f"{key}-{digest[:16]}.so"
    old = _named_so(directory, key)
    os.replace(tmp, so)
    meta = {"format": FORMAT, "key": key, "so": so.name, "sha256": digest, "size": len(data),
            "headers": headers}
    write_atomic(directory / f"{key}.json", (json.dumps(meta, indent=1) + "\n").encode())
    if old is not None and old != so:
        _unlink(old)  # a process that mapped it keeps its mapping
    return so


def discard(directory: Path, key: str) -> None:
    """Remove entry ``key``'s sidecar and shared object, as far as one may."""
    so = _named_so(directory, key)
    for path in (directory / f"{key}.json", so):
        if path is not None:
            _unlink(path)


def linked(directory: Path, key: str, flash_name: str | None) -> tuple[Path, Path | None] | None:
    """(the shared object, the folder holding flash file ``flash_name``) that link ``key``
    leads to, when the link and all it names pass their checks (the module docstring);
    None otherwise. ``flash_name``: the graph's constants file (None: it has none)."""
    try:
        meta = json.loads((directory / LINKS / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("format") != LINK_FORMAT or \
            meta.get("key") != key or not re.fullmatch(_KEY, str(meta.get("entry"))):
        return None
    so, _ = problem(directory, meta["entry"])
    flash = meta.get("flash")
    if so is None or (flash is None) != (flash_name is None):
        return None
    if flash is None:
        return so, None
    digest = flash.get("sha256") if isinstance(flash, dict) else None
    if not isinstance(digest, str) or not re.fullmatch("[0-9a-f]{64}", digest):
        return None
    folder = directory / FLASH / digest[:32]
    try:
        with open(folder / flash_name, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            same = size == flash.get("size") and \
                hashlib.file_digest(f, "sha256").hexdigest() == digest
    except OSError:
        return None
    return (so, folder) if same else None


def write_link(directory: Path, key: str, entry: str, flash: tuple[str, int] | None) -> None:
    """Link ``key`` to entry ``entry`` and the flash file of ``flash`` (its sha256 and size;
    None: no flash file); nothing when the directory cannot be written (the graph's C is
    generated again next time)."""
    meta = {"format": LINK_FORMAT, "key": key, "entry": entry,
            "flash": None if flash is None else {"sha256": flash[0], "size": flash[1]}}
    try:
        (directory / LINKS).mkdir(parents=True, exist_ok=True)
        write_atomic(directory / LINKS / f"{key}.json", (json.dumps(meta) + "\n").encode())
    except OSError:
        pass


def _named_so(directory: Path, key: str) -> Path | None:
    """The shared object entry ``key``'s sidecar names, if it names one."""
    try:
        name = json.loads((directory / f"{key}.json").read_text()).get("so", "")
    except (OSError, ValueError, AttributeError):
        return None
    ok = isinstance(name, str) and re.fullmatch(rf"{key}-[0-9a-f]{{16}}\.so", name)
    return directory / name if ok else None


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def temp_file(directory: Path, key: str, suffix: str) -> Path:
    """A new empty file ``<key>.<random>.<suffix>.tmp`` in ``directory``."""
    fd, name = tempfile.mkstemp(prefix=f"{key}.", suffix=f".{suffix}.tmp", dir=directory)
    os.close(fd)
    return Path(name)


def write_atomic(path: Path, data: bytes) -> None:
    """``path`` holds ``data`` or what it held before, never a part."""
    key = path.name[:32]
    tmp = temp_file(path.parent, key, path.suffix.lstrip("."))
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def writable_dir(directory: Path) -> Path:
    """``directory``, created if need be; ``CompilerError`` saying what to do when it
    cannot hold the cache."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise CompilerError(f"the compile cache directory {directory} is a file: remove it, or "
                            f"point NPUKIT_CACHE_DIR at a directory") from None
    except OSError as exc:
        raise CompilerError(f"cannot create the compile cache directory {directory} "
                            f"({exc.strerror}): point NPUKIT_CACHE_DIR at a writable "
                            f"directory") from None
    return directory


def unwritable(directory: Path, exc: OSError) -> CompilerError:
    """The error for a cache directory one cannot write to."""
    return CompilerError(f"cannot write to the compile cache directory {directory} "
                         f"({exc.strerror or exc}): make it writable, or point "
                         f"NPUKIT_CACHE_DIR at a writable directory (the entries it holds "
                         f"are still used; a new program must be compiled somewhere)")


# -- npukit cache info | clear ---------------------------------------------------------------


def _files(directory: Path) -> list[tuple[Path, str]]:
    """npukit's files in ``directory``: (path, key)."""
    try:
        names = sorted(os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise CompilerError(f"cannot read the compile cache directory {directory} "
                            f"({exc.strerror})") from None
    objects, plans, links = (sorted(os.listdir(directory / sub)) if sub in names and
                             (directory / sub).is_dir() else [] for sub in (OBJECTS, PLANS,
                                                                            LINKS))
    out = []
    for folder, listed, kinds in ((directory, names, _ENTRY_FILE),
                                  (directory / OBJECTS, objects, _OBJECT_FILE),
                                  (directory / PLANS, plans, _PLAN_FILE),
                                  (directory / LINKS, links, _LINK_FILE)):
        for name in listed:
            m = kinds.fullmatch(name) or _TEMP_FILE.fullmatch(name)
            if m and (folder / name).is_file():
                out.append((folder / name, m.group(1)))
    return out + (_flash_files(directory / FLASH) if FLASH in names else [])


def _flash_files(flash: Path) -> list[tuple[Path, str]]:
    """The graphs' constants files in ``flash`` (``<sha256 prefix>/<name>``): (path, key)."""
    try:
        folders = sorted(d for d in os.listdir(flash) if re.fullmatch(_KEY, d))
        return [(flash / d / name, d) for d in folders if (flash / d).is_dir()
                for name in sorted(os.listdir(flash / d)) if (flash / d / name).is_file()]
    except OSError:  # removed meanwhile, or not a folder: no constants files
        return []


def info(directory: Path) -> dict:
    """``directory``'s entries: how many, their bytes, how many fail verification (with
    why), and the bytes of files no entry uses."""
    files = _files(directory)
    keys = sorted({k for p, k in files if p.parent == directory and
                   (p.suffix == ".json" or p.name.endswith(".so"))})
    failing = {}
    # the pieces' objects that pass their check, with their sources
    used = {q for p, k in files if p.suffix == ".o" and object_problem(p, k) is None
            for q in (p, p.with_suffix(".c"))}
    objects = sum(p.suffix == ".o" for p in used)
    plans = {p for p, _ in files if p.suffix == ".plan"}  # checked when read
    links = {p for p, _ in files if p.parent.name == LINKS and p.suffix == ".json"}
    flash = {p for p, _ in files if p.parent.parent.name == FLASH}  # checked when used
    used |= plans | links | flash
    for key in keys:
        so, why = problem(directory, key)
        if why:
            failing[key] = why
        else:
            used |= {so, directory / f"{key}.json", directory / f"{key}.c"}
    size = sum(p.stat().st_size for p, _ in files)
    return {"directory": directory, "entries": len(keys), "bytes": size, "failing": failing,
            "objects": objects, "plans": len(plans), "links": len(links), "flash": len(flash),
            "unused_bytes": size - sum(p.stat().st_size for p in used if p.exists())}


def clear(directory: Path) -> tuple[int, int]:
    """Remove npukit's entries from ``directory`` (no other file): (files, bytes) freed.
    Temporary files younger than an hour may belong to a compile under way: kept."""
    count = size = 0
    now = time.time()
    for path, _ in _files(directory):
        try:
            st = path.stat()
        except FileNotFoundError:  # removed meanwhile (another clear)
            continue
        if path.suffix == ".tmp" and now - st.st_mtime < _STALE_TEMP_SECONDS:
            continue
        try:
            path.unlink()
        except OSError as exc:
            raise CompilerError(f"cannot remove {path} ({exc.strerror}) from the compile "
                                f"cache") from None
        count, size = count + 1, size + st.st_size
        if path.parent.parent.name == FLASH:
            try:
                path.parent.rmdir()  # its folder, once empty
            except OSError:
                pass
    return count, size


def _human(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} KiB" if n < 1024**2 else f"{n / 1024**2:.1f} MiB"


def _run(args: argparse.Namespace) -> int:
    directory = cache_dir()
    if args.action == "info":
        got = info(directory)
        print(f"compile cache: {directory}")
        entries = f"{got['entries']} entr{'y' if got['entries'] == 1 else 'ies'}"
        print(f"  {entries}, {_human(got['bytes'])} ({got['bytes']} B)")
        print(f"  {len(got['failing'])} fail verification (rebuilt when next used)")
        if got["objects"]:
            print(f"  {got['objects']} compiled pieces of graphs (in {OBJECTS}/, linked into "
                  f"the entries)")
        if got["plans"]:
            print(f"  {got['plans']} plans of ONNX models (in {PLANS}/)")
        if got["flash"]:
            print(f"  {got['flash']} constants files of graphs (in {FLASH}/)")
        if got["links"]:
            print(f"  {got['links']} links from ONNX models' host plans to their entries (in "
                  f"{LINKS}/)")
        failing = list(got["failing"].items())
        for key, why in failing[:_LISTED]:
            print(f"    {key}: {why}")
        if len(failing) > _LISTED:
            print(f"    ... and {len(failing) - _LISTED} more")
        if got["unused_bytes"]:
            print(f"  {_human(got['unused_bytes'])} in files no valid entry uses")
        return 0
    count, size = clear(directory)
    print(f"removed {count} files from {directory}: {_human(size)} ({size} B) freed")
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``cache`` subcommand to an ``argparse`` subparsers object.

    >>> parser = argparse.ArgumentParser(prog="npukit")
    >>> _ = register(parser.add_subparsers())
    >>> parser.parse_args(["cache", "clear"]).action
    'clear'
    """
    p = subparsers.add_parser(
        "cache", help="show or empty the C back end's compile cache",
        description="The C back end keeps compiled shared objects in NPUKIT_CACHE_DIR "
                    "(default ~/.cache/npukit). 'info' counts the entries and their bytes and "
                    "verifies each; 'clear' removes npukit's files (and no other).")
    p.add_argument("action", choices=("info", "clear"))
    p.set_defaults(func=_refusing)
    return p


def _refusing(args: argparse.Namespace) -> int:
    """``_run``, a refusal (a read-only or unreadable cache) one line on stderr, exit 2."""
    try:
        return _run(args)
    except NpukitError as exc:
        print(f"npukit cache: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
