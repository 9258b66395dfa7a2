"""Paths and files of the command line, in one place: every file the CLI reads or writes goes
through here.

Rules:

- **Inputs are regular files.** A FIFO, a device (``/dev/zero``), a socket or a folder given
  where a file is read is refused before it is opened (``regular_file``), so nothing blocks
  on a FIFO and nothing reads a device without end.
- **Outputs are created, never replaced.** ``check_output`` (run before any work starts)
  refuses an output whose folder is missing or not writable and an output that exists
  already (so neither the model, its external data, an ``--inputs`` file nor anything else
  is ever overwritten); ``new_file`` then creates it without following a symlink
  (``O_EXCL``: a file or a link planted since is refused, not replaced).
- **A folder of outputs** (``--emit DIR``) is new or empty (``check_folder``); its files are
  created with ``write_new`` too, so a link planted in it is never followed out of it.
- **Arrays are read header first.** ``read_arrays`` reads each ``.npy`` header (shape,
  dtype; every member's of a ``.npz``) and refuses an object array, a shape whose bytes pass
  the caller's budget or a header the file is too short for *before* any data is read: a
  small ``.npz`` cannot inflate to gigabytes before its shape is checked.

    >>> from npukit.files import check_output
    >>> check_output("/nonexistent-folder/out.json", "--json")
    Traceback (most recent call last):
    ...
    npukit.files.FileRefused: --json '/nonexistent-folder/out.json': its folder ...
"""

from __future__ import annotations

import contextlib
import os
import stat
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .errors import NpukitError

# What one ``read_arrays`` call reads at most when its caller gives no budget (bytes).
ARRAY_BUDGET = 2 << 30


class FileRefused(NpukitError):
    """A path or a file the command line does not read or write, and why."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def regular_file(path, option: str) -> Path:
    """``path`` when it is a regular file (a link to one is followed); a FIFO, a device, a
    socket, a folder or a missing file is refused, naming ``option``."""
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError as exc:
        raise FileRefused(f"{option} {str(path)!r}: cannot read it: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise FileRefused(f"{option} {str(path)!r}: {_kind(st.st_mode)}, not a regular file: "
                          f"give a file")
    return p


def open_regular(path, option: str):
    """``path`` opened for reading (binary) when it is a regular file; checked again on the
    open file (opened without blocking), so a FIFO swapped in after the check cannot block
    the read."""
    regular_file(path, option)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise FileRefused(f"{option} {str(path)!r}: cannot read it: {exc.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise FileRefused(f"{option} {str(path)!r}: {_kind(mode)}, not a regular file: "
                          f"give a file")
    return os.fdopen(fd, "rb")


def _writable_folder(folder: Path, option: str, path) -> None:
    if not folder.is_dir():
        raise FileRefused(f"{option} {str(path)!r}: its folder {str(folder)!r} does not "
                          f"exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise FileRefused(f"{option} {str(path)!r}: its folder {str(folder)!r} is not "
                          f"writable")


def check_output(path, option: str, inputs: dict | None = None) -> Path:
    """Refuse, before any work, an output ``path`` that could not be created: its folder
    missing or not writable, or the path taken already (an input of the command, named by
    ``inputs``: {path: what it is}, or any other file, folder or link)."""
    p = Path(path)
    for other, what in (inputs or {}).items():
        with contextlib.suppress(OSError):
            if os.path.samefile(p, other):
                raise FileRefused(f"{option} {str(path)!r}: is {what}: npukit never "
                                  f"overwrites an input")
    if os.path.lexists(p):
        raise FileRefused(f"{option} {str(path)!r}: exists already; npukit creates its "
                          f"outputs and replaces nothing: remove it or give a new name")
    _writable_folder(p.parent, option, path)
    return p


def check_folder(path, option: str) -> Path:
    """Refuse, before any work, an output folder that is not new or empty (a link is refused
    too) or whose parent is not writable."""
    p = Path(path)
    if os.path.islink(p):
        raise FileRefused(f"{option} {str(path)!r}: a symbolic link: give a real folder")
    if p.exists():
        if not p.is_dir():
            raise FileRefused(f"{option} {str(path)!r}: exists and is not a folder")
        if any(p.iterdir()):
            raise FileRefused(f"{option} {str(path)!r}: the folder is not empty; npukit "
                              f"replaces nothing: give a new or empty folder")
        if not os.access(p, os.W_OK | os.X_OK):
            raise FileRefused(f"{option} {str(path)!r}: the folder is not writable")
        return p
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    _writable_folder(parent, option, path)
    return p


def make_folder(path, option: str) -> Path:
    """Create folder ``path`` (and its parents), or take it when it is an empty real
    folder; refused otherwise (``check_folder``)."""
    p = check_folder(path, option)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FileRefused(f"{option} {str(path)!r}: cannot create it: {exc.strerror}") from None
    return p


def new_folder(path, option: str) -> Path:
    """Create folder ``path`` (its parent exists): refused when anything is there already
    (a link planted since the check is never followed)."""
    try:
        os.mkdir(path)
    except FileExistsError:
        raise FileRefused(f"{option} {str(path)!r}: exists already; npukit replaces "
                          f"nothing") from None
    except OSError as exc:
        raise FileRefused(f"{option} {str(path)!r}: cannot create it: {exc.strerror}") from None
    return Path(path)


def write_new(path, data: bytes | str, option: str) -> Path:
    """Create file ``path`` holding ``data``: refused when anything (a file, a link) is
    there already; a symlink is never followed."""
    raw = data.encode() if isinstance(data, str) else data
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o666)
    except FileExistsError:
        raise FileRefused(f"{option} {str(path)!r}: exists already; npukit replaces "
                          f"nothing: remove it or give a new name") from None
    except OSError as exc:
        raise FileRefused(f"{option} {str(path)!r}: cannot create it: {exc.strerror}") from None
    with os.fdopen(fd, "wb") as f:
        f.write(raw)
    return Path(path)


@contextlib.contextmanager
def new_file(path, option: str):
    """A context giving a private temporary path beside ``path`` for a writer that takes a
    path (a trace, a plot); on success its file is linked as ``path`` (create or refuse:
    never replacing a file or following a link) and the temporary removed.

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with new_file(os.path.join(d, "a.txt"), "--out") as tmp:
    ...     _ = open(tmp, "w").write("hi")
    >>> open(os.path.join(d, "a.txt")).read()
    'hi'
    """
    p = check_output(path, option)
    fd, tmp = _temporary(p)
    os.close(fd)
    try:
        yield tmp
        data = Path(tmp).read_bytes()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    write_new(p, data, option)


def _temporary(p: Path):
    import tempfile
    try:
        return tempfile.mkstemp(prefix=f".{p.name}.", suffix=p.suffix, dir=p.parent)
    except OSError as exc:
        raise FileRefused(f"cannot write in {str(p.parent)!r}: {exc.strerror}") from None


# -- arrays, header first ----------------------------------------------------------------------

def _npy_header(f, where: str) -> tuple[tuple[int, ...], np.dtype, bool]:
    """(shape, dtype, fortran order) from an open ``.npy`` stream, its data not read."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(f, max_header_size=10000)
        else:
            shape, fortran, dtype = fmt.read_array_header_2_0(f, max_header_size=10000)
    except (ValueError, OSError, EOFError, SyntaxError, TypeError) as exc:
        raise FileRefused(f"{where}: not a .npy array: {str(exc).splitlines()[0]}") from None
    if dtype.hasobject:
        raise FileRefused(f"{where}: an array of Python objects ({dtype}): give numbers")
    return tuple(int(d) for d in shape), dtype, fortran


def _nbytes(shape, dtype) -> int:
    n = 1
    for d in shape:
        n *= d
    return n * dtype.itemsize


def _budgeted(where: str, shape, dtype, spent: int, budget: int) -> int:
    total = spent + _nbytes(shape, dtype)
    if total > budget:
        raise FileRefused(f"{where}: holds {dtype} {shape} ({_nbytes(shape, dtype)} B); with "
                          f"the arrays before it {total} B, above the budget of {budget} B")
    return total


def _read_data(f, shape, dtype, fortran, where: str) -> np.ndarray:
    count = _nbytes(shape, dtype) // max(dtype.itemsize, 1)
    raw = f.read(_nbytes(shape, dtype))
    if len(raw) != _nbytes(shape, dtype):
        raise FileRefused(f"{where}: the header says {dtype} {shape} ({_nbytes(shape, dtype)} "
                          f"B), the file holds {len(raw)} B of data")
    a = np.frombuffer(raw, dtype=dtype, count=count)
    a = a.reshape(shape[::-1]).transpose() if fortran else a.reshape(shape)
    return a.copy()


def read_arrays(path, option: str, budget: int = ARRAY_BUDGET,
                check: Callable | None = None, want: str | None = None) -> dict[str, np.ndarray]:
    """The arrays of a ``.npy`` file (named ``""``) or of a ``.npz`` file (by member name),
    every header read and checked first: an object dtype, a total above ``budget`` bytes, or
    what ``check(name, shape, dtype)`` (called first) raises refuses the file before any
    data is read. A malformed file (not a zip, a bad CRC, a truncated member) is a one-line
    ``FileRefused`` naming ``option`` and the file. ``want``: of a ``.npz``, only the member
    of that name (or its only member) is read."""
    where = f"{option} {str(path)!r}"
    with open_regular(path, option) as f:
        return _arrays(f, where, budget, check, want)


def _arrays(f, where: str, budget: int, check, want) -> dict[str, np.ndarray]:
    try:
        if f.read(4) == b"PK\x03\x04":
            f.seek(0)
            return _npz(f, where, budget, check, want)
        f.seek(0)
        shape, dtype, fortran = _npy_header(f, where)
        if check is not None:
            check("", shape, dtype)
        _budgeted(where, shape, dtype, 0, budget)
        return {"": _read_data(f, shape, dtype, fortran, where)}
    except OSError as exc:
        raise FileRefused(f"{where}: cannot read it: {exc.strerror or exc}") from None


def _npz(f, where: str, budget: int, check, want) -> dict[str, np.ndarray]:
    try:
        with zipfile.ZipFile(f) as z:
            members = [i for i in z.infolist() if not i.is_dir()]
            if want is not None and len(members) > 1:
                members = [i for i in members if i.filename == f"{want}.npy"]
                if not members:
                    held = sorted(i.filename.removesuffix(".npy") for i in z.infolist())
                    raise FileRefused(f"{where}: holds {held}, none named {want!r}")
            heads, spent = {}, 0
            for info in members:
                if not info.filename.endswith(".npy"):
                    raise FileRefused(f"{where}: member {info.filename!r} is not a .npy array")
                name = info.filename[:-4]
                with z.open(info) as f:
                    head = _npy_header(f, f"{where} member {name!r}")
                if check is not None:
                    check(name, head[0], head[1])
                spent = _budgeted(f"{where} member {name!r}", head[0], head[1], spent, budget)
                heads[name] = (info, head)
            out = {}
            for name, (info, (shape, dtype, fortran)) in heads.items():
                with z.open(info) as f:
                    _npy_header(f, where)
                    out[name] = _read_data(f, shape, dtype, fortran, f"{where} member {name!r}")
                    f.read(1)  # the end of the member: its CRC is checked here
            return out
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError,
            NotImplementedError) as exc:
        raise FileRefused(f"{where}: not a readable .npz file: "
                          f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") \
            from None
