"""The plan cache: an ``OnnxGraph`` planned once is kept on disk beside the compile cache
(``NPUKIT_CACHE_DIR``, ``npukit.c.cache``), so a second ``npukit.onnx.load`` of the same model
under the same target, budgets and options skips reading, lowering, tiling and planning
(the host plan, ``OnnxGraph.host_graph``, and the plan's cycle model, ``OnnxGraph.report``,
are entries of their own, made when first asked for).

An entry is ``plans/<key>.plan``: one line of JSON (format, key, the payload's size and
sha256; 256 bytes, padded with spaces), then the payload, the planned graph pickled. The
key (32 hex digits) hashes everything a plan depends on: the model's bytes, the target
(every field of it), the four budgets, ``dtype``, ``input_shapes`` and ``constants`` (their
bytes), the operators lowered natively, and the code that plans (the bytes of every file of
the npukit package, and the versions of Python, numpy and onnx). An entry is used only when
its header is this format and key and its payload has the recorded size and sha256 and
unpickles; anything else is ignored and the entry rewritten by the next load. Files are
written under a temporary name and renamed into place (as ``npukit.c.cache`` writes), so
processes share the cache; a directory one cannot write to still serves its entries, and at
most ``MAX_ENTRIES`` plans are kept (the least recently used removed first).

Unpickling runs code, as loading a cached shared object does: the cache directory must be
yours alone (``npukit.c.cache`` says the same of the compile cache).

``NPUKIT_PLAN_CACHE=0`` turns the plan cache off (the test suite does: it tests the
planner). A model whose tensors live in external data files is not cached (its ``.onnx``
file's bytes do not say what they hold).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import io
import json
import marshal
import mmap
import os
import pickle
import re
import sys
import types
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..c.cache import PLANS, cache_dir, temp_file
from ..errors import NpukitError
from ..ir import Extern

FORMAT = "npukit-plan/1"
MAX_ENTRIES = 64
# The key of the entry that holds a tensor's external-data file (TensorProto's external_data):
# a model without these bytes keeps all its tensors in its own file (one with them, in a
# name or a doc string as well, is planned every time).
_EXTERNAL = b"location"


def enabled() -> bool:
    """Whether ``load`` uses the plan cache (``NPUKIT_PLAN_CACHE`` is not ``0``)."""
    return os.environ.get("NPUKIT_PLAN_CACHE", "1") != "0"


def model_digest(model) -> str | None:
    """The sha256 of the bytes of ``model`` (a path or an ``onnx.ModelProto``), None when
    they may not be all the model holds (tensors in external data files: the bytes name a
    ``location``) or the file cannot be read (``load`` then reports why). A file is mapped,
    not read: its bytes are hashed and searched where the page cache holds them."""
    if isinstance(model, (str, os.PathLike)):
        try:
            with open(model, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                return None if m.find(_EXTERNAL) >= 0 else hashlib.sha256(m).hexdigest()
        except (OSError, ValueError):  # ValueError: an empty file cannot be mapped
            return None
    if type(model).__name__ == "ModelProto":
        data = model.SerializeToString()
        return None if _EXTERNAL in data else hashlib.sha256(data).hexdigest()
    return None


def model_again(model, digest: str):
    """``model`` (as ``load`` was given it), to plan from it what the plan cache lost;
    ``NpukitError`` when its bytes are no longer those of sha256 ``digest``, the plan's."""
    if model_digest(model) != digest:
        raise NpukitError(f"model {_shown(model)}: its bytes changed since it was loaded (a "
                          f"plan of it was read from the plan cache, the rest is planned from "
                          f"the model): npukit.onnx.load it again")
    return model


def _shown(model) -> str:
    return repr(str(model)) if isinstance(model, (str, os.PathLike)) else "(a ModelProto)"


@dataclass(frozen=True)
class Key:
    """What a plan depends on besides the model's bytes, hashed into an entry's key."""

    model: str  # the sha256 of the model's bytes
    target: object  # npukit.machine.Target, resolved
    budgets: tuple[int | None, ...]  # l1, l2, l3, l3_flash as the Model resolved them
    dtype: object
    input_shapes: dict | None
    constants: dict | None
    native: frozenset[str]

    def digest(self, kind: str) -> str:
        """The key of entry ``kind``: "target" (the plan), "host" (the host plan) or "report"
        (the plan's cycle model)."""
        h = hashlib.sha256()
        for part in (FORMAT, kind, self.model, code_digest(), repr(self.target),
                     repr(self.budgets), repr(self.dtype),
                     repr(sorted((self.input_shapes or {}).items())), repr(sorted(self.native))):
            h.update(part.encode() + b"\0")
        for name, value in sorted((self.constants or {}).items()):
            a = np.ascontiguousarray(value)
            h.update(f"{name}\0{a.dtype.str}\0{a.shape}\0".encode())
            h.update(a.tobytes())
        return h.hexdigest()[:32]


_CODE: list[str] = []


def code_digest() -> str:
    """The sha256 of npukit's files (every file of the package but compiled bytecode) and of
    the versions of Python, numpy and onnx: the code that plans."""
    if not _CODE:
        root = Path(__file__).resolve().parents[1]
        h = hashlib.sha256(f"{sys.version}\0{np.__version__}\0{_onnx_version()}".encode())
        for path in sorted(p for p in root.rglob("*") if p.is_file() and
                           "__pycache__" not in p.parts):
            h.update(str(path.relative_to(root)).encode() + b"\0")
            h.update(hashlib.sha256(path.read_bytes()).digest())
        _CODE.append(h.hexdigest())
    return _CODE[0]


def _onnx_version() -> str:
    """The installed onnx's version, read from the name of its ``.dist-info`` folder beside
    the package: importing ``importlib.metadata`` (or onnx, which imports it) would take
    longer than the rest of a load that finds its plan here. ``importlib.metadata`` says
    when there is no such folder."""
    spec = importlib.util.find_spec("onnx")
    if spec is not None and spec.origin:
        site = Path(spec.origin).parents[1]
        found = sorted(p.name for p in site.glob("onnx*.dist-info")
                       if re.fullmatch(r"onnx(_weekly)?-[^-]+\.dist-info", p.name))
        if found:
            return ",".join(found)
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("onnx")
    except PackageNotFoundError:
        return "no onnx"


def fetch(key: str):
    """The object entry ``key`` holds, or None (no entry, or one that fails a check)."""
    path = cache_dir() / PLANS / f"{key}.plan"
    try:
        # Mapped, not read: the payload is hashed and unpickled where the page cache holds it.
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m, \
                memoryview(m) as whole:
            end = m.find(b"\n") + 1
            meta = json.loads(whole[:end].tobytes() if end else b"")
            with whole[end:] as payload:
                obj = _checked(meta, key, payload)
    except (OSError, ValueError):  # ValueError: an empty file or header
        return None
    if obj is not None:
        try:
            os.utime(path)  # recently used: evicted last
        except OSError:
            pass
    return obj


def _checked(meta, key: str, payload: memoryview):
    """The object ``payload`` holds when ``meta`` (the entry's header) is this format and
    key and records the payload's size and sha256, and it unpickles; else None."""
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("key") != key \
            or meta.get("size") != payload.nbytes \
            or hashlib.sha256(payload).hexdigest() != meta.get("sha256"):
        return None
    try:
        return pickle.loads(payload)
    except Exception:  # an entry of other code that slipped past the key: planned again
        return None


def store(key: str, obj) -> None:
    """Keep ``obj`` as entry ``key``; nothing when the directory cannot be written or the
    object cannot be pickled (the plan is made again next time). The payload is pickled
    straight into the file, hashed on its way, and the header written over the room left
    for it."""
    folder = cache_dir() / PLANS
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = temp_file(folder, key, "plan")
    except OSError:
        return
    try:
        with open(tmp, "r+b") as f:
            f.write(b" " * _HEADER)
            out = _Hashing(f)
            _Pickler(out, protocol=5).dump(obj)
            meta = {"format": FORMAT, "key": key, "size": out.size,
                    "sha256": out.sha256.hexdigest()}
            f.seek(0)
            f.write(json.dumps(meta).encode().ljust(_HEADER - 1) + b"\n")
        os.replace(tmp, folder / f"{key}.plan")
        _evict(folder)
    except (OSError, pickle.PicklingError, TypeError, AttributeError, ValueError,
            RecursionError):
        try:
            tmp.unlink()
        except OSError:
            pass


# Bytes of an entry's header line (JSON, padded with spaces): room enough for its four fields.
_HEADER = 256


class _Hashing:
    """A file's ``write`` that counts and hashes what it writes."""

    def __init__(self, file):
        self.file, self.size, self.sha256 = file, 0, hashlib.sha256()

    def write(self, data) -> int:
        self.sha256.update(data)
        self.size += memoryview(data).nbytes
        return self.file.write(data)


def _evict(folder: Path) -> None:
    """Keep the ``MAX_ENTRIES`` most recently used plans."""
    entries = []
    for p in folder.glob("*.plan"):
        try:
            entries.append((p.stat().st_mtime, p))
        except FileNotFoundError:  # removed meanwhile by another process
            pass
    for _, p in sorted(entries, reverse=True)[MAX_ENTRIES:]:
        try:
            p.unlink()
        except OSError:
            pass


# -- pickling a plan -------------------------------------------------------------------------
# A plan holds basic kernels whose numpy references and costs are nested functions (closures
# over a layer's parameters). Pickle saves functions by name, so those are saved by value:
# their code (marshal, which the key ties to this Python and this npukit), module, name,
# defaults and the values of their closure cells.


def dumps(obj) -> bytes:
    f = io.BytesIO()
    _Pickler(f, protocol=5).dump(obj)
    return f.getvalue()


class _Pickler(pickle.Pickler):
    """Pickle, with functions saved by value where pickle finds no name for them, and each
    large array saved once however many equal copies the plan holds (a layer's weights as
    the lowering made them and as the graph's constants)."""

    def __init__(self, file, protocol):
        super().__init__(file, protocol)
        self._arrays: dict[tuple, list[tuple[np.ndarray, np.ndarray]]] = {}

    def reducer_override(self, obj):
        if type(obj) is np.ndarray and obj.nbytes >= _SHARED_BYTES:
            first = self._first_equal(obj)
            if first is not obj:
                return _reshaped, (first, obj.shape)
            return NotImplemented
        if type(obj) is types.FunctionType and not _by_name(obj):
            return (_function, (marshal.dumps(obj.__code__), obj.__module__, obj.__name__,
                                len(obj.__closure__ or ())),
                    (obj.__qualname__, obj.__defaults__, obj.__kwdefaults__, dict(obj.__dict__),
                     _cells(obj)), None, None, _fill)
        if type(obj) is types.MappingProxyType:
            return _proxy, (dict(obj),)
        if type(obj) is Extern:  # its __getstate__ refuses functions pickle finds no name for
            return _object, (Extern, dict(obj.__dict__))
        return NotImplemented


    def _first_equal(self, a: np.ndarray) -> np.ndarray:
        """The first array pickled with the elements and dtype of ``a`` (``a`` if none),
        whatever its shape."""
        if a.dtype.hasobject:
            return a
        data = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        seen = self._arrays.setdefault((a.dtype, a.size, zlib.crc32(data)), [])
        for b, b_data in seen:
            if b is a or np.array_equal(data, b_data):
                return b
        seen.append((a, data))
        return a


# Arrays from this size up are compared with those already pickled (a checksum, then the bytes).
_SHARED_BYTES = 1 << 16


def _reshaped(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``a``'s elements (in C order) in ``shape``, sharing ``a``'s memory."""
    return np.ascontiguousarray(a).reshape(shape)


def _by_name(fn) -> bool:
    """Whether pickle finds ``fn`` by its module and qualified name."""
    target = sys.modules.get(fn.__module__)
    for part in fn.__qualname__.split("."):
        target = getattr(target, part, None)
    return target is fn


def _function(code: bytes, module: str, name: str, cells: int):
    """A function of ``code`` with empty closure cells (``_fill`` fills them: a function
    its own cells refer to, a recursive nested function, is pickled once)."""
    return types.FunctionType(marshal.loads(code), importlib.import_module(module).__dict__,
                              name, None, tuple(types.CellType() for _ in range(cells)) or None)


def _fill(fn, state) -> None:
    qualname, defaults, kwdefaults, attrs, cells = state
    fn.__qualname__, fn.__defaults__, fn.__kwdefaults__ = qualname, defaults, kwdefaults
    fn.__dict__.update(attrs)
    for cell, value in zip(fn.__closure__ or (), cells):
        if value is not _EMPTY:
            cell.cell_contents = value


class _Empty:
    """A closure cell not yet assigned when the function was pickled."""

    def __reduce__(self):
        return "_EMPTY"


_EMPTY = _Empty()


def _cells(fn) -> tuple:
    out = []
    for cell in fn.__closure__ or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:
            out.append(_EMPTY)
    return tuple(out)


def _proxy(d: dict) -> types.MappingProxyType:
    return types.MappingProxyType(d)


def _object(cls, state: dict):
    """An instance of ``cls`` (a frozen dataclass) with attributes ``state``."""
    obj = object.__new__(cls)
    obj.__dict__.update(state)
    return obj
