"""A graph's compiled C found without generating it: an ONNX model's host plan is known by
the plan cache's key (``known_as``), and the compile cache links that key, with the compiler,
its flags and where the plan put each tensor, to the verified shared object and flash file
(``npukit.c.cache.linked``). ``npukit.tiler.graph_c.CompiledGraph`` loads through here.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import weakref
from pathlib import Path

from ..c import cache, toolchain
from ..errors import CompilerError

# Graphs whose C is a function of a key and npukit's code, known without generating the C:
# ``known_as``. Weak: a graph forgotten takes its key with it.
_KNOWN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def known_as(g, key: str) -> None:
    """Tell the C back end that graph ``g``'s C is decided by ``key`` (with npukit's own
    files) — ``npukit.onnx.load`` says so of its host plans, by the plan cache's key, which
    hashes the model's bytes, the target, the budgets, the options and npukit's files — so
    that its shared object is found in the compile cache without generating the C
    (``npukit.c.cache.linked``)."""
    _KNOWN[g] = key


def link_key(g) -> str | None:
    """The key of graph ``g``'s link in the compile cache (None when its C is not known by
    a key): its ``known_as`` key, the compiler, its identity and flags, the CPUs its C is
    split for (``npukit.c.pieces.kernel_units`` cuts long kernels into one part per CPU,
    up to 4), and where the plan put each tensor (the addresses its C is written with: a
    plan made again under the same key that placed them otherwise finds no link)."""
    known = _KNOWN.get(g)
    if known is None:
        return None
    places = [(n, t.memory, t.area, t.offset, t.size, t.flash) for n, t in g.tensors.items()]
    text = "\0".join([cache.LINK_FORMAT, known, toolchain.compiler_digest(),
                      str(toolchain.cpus()), repr(places), repr(dict(g.memory)),
                      repr([layer.name for layer in g.layers])])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def loaded(g, library, flash_name: str | None) -> tuple[object, Path | None]:
    """The graph's C compiled and loaded (a private copy: ``toolchain.load_entry``'s) and
    the folder of its flash file ``flash_name`` (None without constants). A graph
    ``known_as`` a key follows its link to the verified entry without generating its C;
    otherwise, or when the link or what it names fails a check, ``library(g)`` generates
    and builds it, and the link is written."""
    link, name = link_key(g), flash_name
    directory = toolchain.cache_dir()
    found = cache.linked(directory, link, name) if link is not None else None
    if found is not None:
        try:
            return toolchain.load_entry(found[0], private=True), found[1]
        except CompilerError:  # loads nothing it cannot use: built again below
            pass
    lib = library(g)
    folder, flash = None, None
    if name is not None:
        folder, digest, size = flash_dir(g, name)
        flash = (digest, size)
    if link is not None:
        entry = toolchain.entry_key(lib)
        cache.write_link(directory, link, entry, flash)
    return lib, folder


def flash_dir(g, name: str) -> tuple[Path, str, int]:
    """A folder holding the graph's flash file (named as the model names it), by content:
    (the folder, the sha256 and size of the file). A file there with other bytes (a crash
    mid-write, an edit) is written again."""
    image = g.flash_image()
    digest = hashlib.sha256(image).hexdigest()
    folder = toolchain.cache_dir() / cache.FLASH / digest[:32]
    path = folder / name
    try:
        same = path.read_bytes() == image
    except OSError:
        same = False
    if not same:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder)
        with os.fdopen(fd, "wb") as f:
            f.write(image)
        os.replace(tmp, path)
    return folder, digest, len(image)
