"""The compile cache verifies what it finds and heals itself: truncated, empty, garbage,
foreign and stale entries are rebuilt, a compiler's bad output is never cached, and cache
directories or variables one cannot use give ``CompilerError`` saying what to do. Every
test uses its own ``NPUKIT_CACHE_DIR``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import npukit as nk
from npukit import kernels as K
from npukit.c import cache, toolchain
from npukit.cli import main


@pytest.fixture
def compiles(tmp_path, monkeypatch):
    """A fresh cache directory (a space in its name: the dependency list escapes it); the
    list of compiler commands run."""
    monkeypatch.setenv("NPUKIT_CACHE_DIR", str(tmp_path / "the cache"))
    calls: list[list[str]] = []
    real = toolchain.run_compiler

    def counting(cmd):
        calls.append(cmd)
        return real(cmd)
    monkeypatch.setattr(toolchain, "run_compiler", counting)
    return calls


def tiny(value: int, head: str = "") -> str:
    """A C source whose function ``npk_t`` stores ``value``."""
    return f"{head}\nvoid npk_t(int *out) {{ *out = {value}; }}\n"


def call(source: str) -> int:
    """Build ``source`` (or find it in the cache), load it, call ``npk_t``."""
    out = np.zeros(1, np.int32)
    toolchain.load(toolchain.build(source), "npk_t", 1)(out.ctypes.data)
    return int(out[0])


def entry(source: str) -> tuple[Path, dict]:
    """(the shared object, the sidecar) of ``source``'s cache entry."""
    key = toolchain._key(source)[0]
    meta = json.loads((cache.cache_dir() / f"{key}.json").read_text())
    return cache.cache_dir() / meta["so"], meta


# -- entries that cannot be trusted ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["empty", "garbage", "truncated", "no sidecar",
                                    "sidecar garbage"])
def test_damaged_entry_is_rebuilt(damage, compiles):
    src = tiny(4100 + len(damage))
    toolchain.build(src)
    so, _ = entry(src)
    data = so.read_bytes()
    if damage == "empty":
        so.write_bytes(b"")
    elif damage == "garbage":
        so.write_bytes(b"not a shared object" * 100)
    elif damage == "truncated":
        so.write_bytes(data[: len(data) // 2])
    elif damage == "no sidecar":
        so.with_name(so.name[:32] + ".json").unlink()
    else:
        so.with_name(so.name[:32] + ".json").write_text("{not json")
    assert cache.problem(so.parent, so.name[:32])[1]
    assert call(src) == 4100 + len(damage)
    assert len(compiles) == 2 and so.read_bytes() == data  # rebuilt, the same bytes
    assert cache.problem(so.parent, so.name[:32])[1] is None


@pytest.mark.slow
def test_truncated_entry_does_not_crash_a_new_process(compiles, tmp_path):
    """A process that maps a truncated shared object dies of SIGBUS: the entry is checked
    first. Run in a subprocess so that a failure cannot kill pytest."""
    n = 70
    build = textwrap.dedent(f"""
        import numpy as np, npukit as nk
        from npukit import kernels as K
        prog = nk.build(K.mul_vectorized, target="torq", input1=nk.spec(({n},), "int8"),
                        input2=nk.spec(({n},), "int8"), bias_scale=nk.spec((2,), "int32"),
                        output=nk.spec(({n},), "int8"), shift=3, out_min=-128, out_max=127)
        a = (np.arange({n}) % 29 - 14).astype(np.int8)
        out = np.zeros({n}, np.int8)
        prog.run("c", input1=a, input2=a[::-1].copy(), bias_scale=np.array([2, 5], np.int32),
                 output=out)
        want = np.zeros({n}, np.int8)
        prog.run("sim", input1=a, input2=a[::-1].copy(), bias_scale=np.array([2, 5], np.int32),
                 output=want)
        assert (out == want).all() and out.any()
        print("ok")
    """)
    env = dict(os.environ)

    def run():
        return subprocess.run([sys.executable, "-c", build], env=env, capture_output=True,
                              text=True, timeout=300)
    assert run().stdout.strip() == "ok"
    so = next(cache.cache_dir().glob("*.so"))
    data = so.read_bytes()
    with open(so, "r+b") as f:  # in place, as a crash while writing would leave it
        f.truncate(len(data) // 3)
    got = run()
    assert got.returncode == 0 and got.stdout.strip() == "ok", got.stderr[-2000:]
    assert so.read_bytes() == data


def _mul(n: int, shift: int):
    return nk.build(K.mul_vectorized, target="torq", input1=nk.spec((n,), "int8"),
                    input2=nk.spec((n,), "int8"), bias_scale=nk.spec((2,), "int32"),
                    output=nk.spec((n,), "int8"), shift=shift, out_min=-128, out_max=127)


def _run_mul(prog, backend: str) -> np.ndarray:
    n = prog.param("input1")[1].shape[0]
    a = (np.arange(n) % 31 - 15).astype(np.int8)
    big = np.full(n + 16, 77, np.int8)  # canaries either side
    prog.run(backend, input1=a, input2=a[::-1].copy(), bias_scale=np.array([1, 3], np.int32),
             output=big[8:-8])
    assert (big[:8] == 77).all() and (big[-8:] == 77).all(), "written outside the output"
    return big[8:-8]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["shared object", "shared object and sidecar",
                                 "forged sidecar"])
def test_foreign_entry_is_rebuilt_never_run(how, compiles):
    """Another program's shared object under this key (same entry function, other
    arithmetic) is detected and the entry rebuilt: the kernel computes what it should."""
    mine, other = _mul(48, 2), _mul(48, 5)
    want = _run_mul(mine, "sim")
    src_mine, src_other = mine.c_source(), other.c_source()
    toolchain.build(src_mine)
    toolchain.build(src_other)
    so, meta = entry(src_mine)
    so_other, meta_other = entry(src_other)
    key = meta["key"]
    so.write_bytes(so_other.read_bytes())
    sidecar = cache.cache_dir() / f"{key}.json"
    if how == "shared object and sidecar":
        sidecar.write_text(json.dumps(meta_other))
    elif how == "forged sidecar":  # the hash made to match: the embedded key tells
        sidecar.write_text(json.dumps(dict(meta, sha256=meta_other["sha256"])))
    assert not np.array_equal(want, _run_mul(other, "sim"))  # the foreign one differs
    assert np.array_equal(_run_mul(mine, "c"), want)
    assert len(compiles) == 3


def test_load_never_calls_another_programs_object(compiles, tmp_path):
    """Past the cache's checks (a race), ``load`` still reads the embedded key and refuses
    a shared object built under another one, without calling it."""
    toolchain.build(tiny(1))
    so, _ = entry(tiny(1))
    key = toolchain._key(tiny(2))[0]
    impostor = tmp_path / f"{key}-{'0' * 16}.so"
    shutil.copy(so, impostor)
    with pytest.raises(nk.CompilerError, match=f"not '{key}'.*another program"):
        toolchain.load(impostor, "npk_t", 1)


def test_changed_header_rebuilds(compiles, tmp_path, monkeypatch):
    """A header a source includes (here through ``-I``) is part of the entry: change it and
    the next lookup compiles again, in this process too."""
    inc = tmp_path / "my headers"
    inc.mkdir()
    header = inc / "npk_test_value.h"
    header.write_text("#define NPK_TEST_VALUE 3\n")
    monkeypatch.setenv("NPUKIT_CFLAGS", f"-O1 -I'{inc}'")
    src = tiny("NPK_TEST_VALUE", '#include "npk_test_value.h"')
    assert call(src) == 3 and call(src) == 3 and len(compiles) == 1
    _, meta = entry(src)
    assert meta["headers"][str(header)]
    header.write_text("#define NPK_TEST_VALUE 5\n")
    assert call(src) == 5 and len(compiles) == 2
    header.unlink()  # a header gone: compiled again, which fails naming it
    with pytest.raises(nk.CompilerError, match="npk_test_value.h"):
        call(src)


def test_relative_include_directory_is_keyed_by_its_place(compiles, tmp_path, monkeypatch):
    """``-Iinc`` names a different directory in each working directory: each gets its own
    entry."""
    monkeypatch.setenv("NPUKIT_CFLAGS", "-O1 -Iinc")
    src = tiny("NPK_TEST_VALUE", '#include "npk_test_value.h"')
    for value in (6, 7):
        (tmp_path / f"w{value}" / "inc").mkdir(parents=True)
        (tmp_path / f"w{value}" / "inc" / "npk_test_value.h").write_text(
            f"#define NPK_TEST_VALUE {value}\n")
    for value in (6, 7, 6):
        monkeypatch.chdir(tmp_path / f"w{value}")
        assert call(src) == value
    assert len(compiles) == 2


# -- compilers that misbehave ---------------------------------------------------------------


def _fake_cc(tmp_path, body: str) -> str:
    script = tmp_path / "fakecc"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize("body, what", [
    ('echo "all fine"; exit 0', "empty"),
    ('for a; do [ "$prev" = -o ] && echo junk > "$a"; prev=$a; done; exit 0',
     "does not start like a shared object"),
])
def test_compiler_that_exits_0_without_a_shared_object(body, what, compiles, tmp_path,
                                                       monkeypatch):
    monkeypatch.setenv("NPUKIT_CC", _fake_cc(tmp_path, body))
    with pytest.raises(nk.CompilerError, match=f"exited 0 .*{what}.*nothing was cached"):
        call(tiny(8))
    assert not list(cache.cache_dir().glob("*.so"))
    assert not list(cache.cache_dir().glob("*.json"))
    assert not list(cache.cache_dir().glob("*.tmp"))


def test_output_that_cannot_be_loaded_is_a_compiler_error(compiles, tmp_path, monkeypatch):
    """A compiler whose output is an object file, not a shared object: built twice (once
    more in case the entry changed under us), then ``CompilerError`` with the loader's
    message, never ``OSError``."""
    monkeypatch.setenv("NPUKIT_CC", _fake_cc(tmp_path, 'exec cc "$@" -c'))
    with pytest.raises(nk.CompilerError, match="cannot load the compiled kernel"):
        toolchain.function(tiny(9), "npk_t", 1)
    assert len(compiles) == 2


# -- directories and variables one cannot use ------------------------------------------------


def test_read_only_cache_serves_its_entries(compiles, monkeypatch):
    """A cache directory one cannot write to (simulated: every write is refused, as for a
    read-only mount) still serves its valid entries; a new program's build says what to
    do."""
    assert call(tiny(10)) == 10

    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(cache.tempfile, "mkstemp", refuse)
    monkeypatch.setattr(cache.os, "replace", refuse)
    assert call(tiny(10)) == 10 and len(compiles) == 1
    with pytest.raises(nk.CompilerError, match=r"cannot write to the compile cache directory "
                                               r".*Permission denied.*NPUKIT_CACHE_DIR"):
        call(tiny(11))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only directories")
def test_read_only_cache_directory(compiles):
    assert call(tiny(12)) == 12
    cache.cache_dir().chmod(0o555)
    try:
        assert call(tiny(12)) == 12
        with pytest.raises(nk.CompilerError, match="NPUKIT_CACHE_DIR"):
            call(tiny(13))
    finally:
        cache.cache_dir().chmod(0o755)


@pytest.mark.parametrize("where", ["the directory", "a parent"])
def test_file_where_the_cache_directory_should_be(where, tmp_path, monkeypatch):
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    path = blocker if where == "the directory" else blocker / "sub"
    monkeypatch.setenv("NPUKIT_CACHE_DIR", str(path))
    with pytest.raises(nk.CompilerError, match=f"{path}.*NPUKIT_CACHE_DIR"):
        call(tiny(14))


@pytest.mark.parametrize("variable, value", [("NPUKIT_CC", 'cc "-O2'),
                                             ("NPUKIT_CFLAGS", "-O2 -DX='1")])
def test_unbalanced_quotes(variable, value, compiles, monkeypatch):
    monkeypatch.setenv(variable, value)
    with pytest.raises(nk.CompilerError, match=f"{variable}=.*balance its quotes"):
        call(tiny(15))


# -- npukit cache info | clear ---------------------------------------------------------------


def test_cache_info_and_clear(compiles, capsys):
    for v in (20, 21, 22):
        call(tiny(v))
    directory = cache.cache_dir()
    so, _ = entry(tiny(22))
    # A new file, not the loaded one cut short in place: this process maps that one, and
    # reading its pages past a new end (at exit) would be a SIGBUS.
    so.unlink()
    so.write_bytes(b"\x7fELF truncated")
    (directory / "notes.txt").write_text("mine")  # not npukit's: never touched
    (directory / "abc.so").write_bytes(b"x")
    (directory / f"{'e' * 32}.so").write_bytes(b"an entry of an npukit before the sidecar")
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    ours = [p for p in directory.iterdir() if p.name not in ("notes.txt", "abc.so")]
    size = sum(p.stat().st_size for p in ours)
    assert f"compile cache: {directory}\n" in out
    assert "4 entries, " in out and f"({size} B)" in out
    assert "2 fail verification" in out and so.name[:32] in out and "e" * 32 in out
    assert main(["cache", "clear"]) == 0
    out = capsys.readouterr().out
    assert f"removed {len(ours)} files from {directory}" in out and f"({size} B) freed" in out
    assert sorted(p.name for p in directory.iterdir()) == ["abc.so", "notes.txt"]
    assert main(["cache", "info"]) == 0
    assert "0 entries, 0 B (0 B)" in capsys.readouterr().out
    assert call(tiny(20)) == 20 and len(compiles) == 4


def test_cache_docstring_examples():
    import doctest

    for module in (cache, toolchain):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 0 and result.failed == 0
