"""Compiling and caching the generated C: the disk cache, compiler overrides and errors."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import npukit as nk
from npukit import kernels as K
from npukit.c import toolchain


def build_mul(n: int = 100):
    return nk.build(K.mul_vectorized, target="torq", input1=nk.spec((n,), "int8"),
                    input2=nk.spec((n,), "int8"), bias_scale=nk.spec((2,), "int32"),
                    output=nk.spec((n,), "int8"), shift=4, out_min=-128, out_max=127)


def run(prog) -> np.ndarray:
    n = prog.param("input1")[1].shape[0]
    a = (np.arange(n) % 23 - 11).astype(np.int8)
    out = np.zeros(n, np.int8)
    prog.run("c", input1=a, input2=a[::-1].copy(), bias_scale=np.array([3, 7], np.int32),
             output=out)
    return out


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache directory, and a list that records every compiler command run."""
    monkeypatch.setenv("NPUKIT_CACHE_DIR", str(tmp_path))
    calls: list[list[str]] = []
    real = toolchain.run_compiler

    def counting(cmd):
        calls.append(cmd)
        return real(cmd)
    monkeypatch.setattr(toolchain, "run_compiler", counting)
    return tmp_path, calls


def test_second_run_does_not_compile(cache):
    tmp, calls = cache
    want = run(build_mul())
    assert len(calls) == 1 and want.any()
    so = next(tmp.glob("*.so"))
    mtime = so.stat().st_mtime_ns
    # A new Program with the same source: found on disk, not compiled again.
    assert (run(build_mul()) == want).all()
    assert len(calls) == 1 and so.stat().st_mtime_ns == mtime
    assert sorted(p.suffix for p in tmp.iterdir()) == [".c", ".json", ".so"]  # no temporary left


@pytest.mark.slow
def test_flags_and_sanitizer_are_part_of_the_key(cache, monkeypatch):
    _, calls = cache
    src = build_mul().c_source()
    plain = toolchain.build(src)
    monkeypatch.setenv("NPUKIT_CFLAGS", "-O1")
    low = toolchain.build(src)
    assert "-O1" in calls[-1] and "-march=native" not in calls[-1]
    monkeypatch.setenv("NPUKIT_SANITIZE", "1")
    san = toolchain.build(src)
    assert "-fsanitize=address,undefined" in calls[-1]
    assert len({plain, low, san}) == 3 and len(calls) == 3
    for flag in toolchain.REQUIRED_CFLAGS:
        assert all(flag in c for c in calls)


def test_concurrent_builds_share_one_object(cache):
    """Threads compiling the same source at once all get a complete shared object."""
    tmp, _ = cache
    src = build_mul(77).c_source()
    with ThreadPoolExecutor(3) as pool:
        got = list(pool.map(lambda _: toolchain.build(src), range(3)))
    assert len(set(got)) == 1
    assert toolchain.load(got[0], "npukit_mul_vectorized", 4) is not None
    assert not [p for p in tmp.iterdir() if p.name.endswith(".tmp")]


def test_missing_compiler_says_what_to_install(cache, monkeypatch):
    monkeypatch.setenv("NPUKIT_CC", "/nonexistent/cc")
    with pytest.raises(nk.CompilerError, match=r"/nonexistent/cc.*apt-get install gcc"):
        run(build_mul(51))


def test_compile_error_keeps_the_source(cache):
    tmp, _ = cache
    with pytest.raises(nk.CompilerError) as err:
        toolchain.build("void broken(void) { int x = ; }\n")
    msg = str(err.value)
    kept = next(tmp.glob("*.c"))
    assert str(kept) in msg and "error" in msg and "broken" in kept.read_text()
    assert not list(tmp.glob("*.so"))


def test_compiler_override(cache, monkeypatch, tmp_path_factory):
    """NPUKIT_CC names the compiler, with arguments if need be: here a wrapper script that
    logs its calls, then runs cc."""
    _, calls = cache
    bin_dir = tmp_path_factory.mktemp("bin")
    log = bin_dir / "log"
    wrapper = bin_dir / "mycc"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec cc "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("NPUKIT_CC", f"{wrapper} -DUNUSED_BY_THE_KERNEL=1")
    assert run(build_mul(63)).any()
    assert calls[0][:2] == [str(wrapper), "-DUNUSED_BY_THE_KERNEL=1"]
    assert "-shared" in log.read_text()


def test_sanitizer_build_needs_the_runtime_preloaded(cache, monkeypatch):
    if "libasan" in Path("/proc/self/maps").read_text():
        pytest.skip("this process already runs with the ASan runtime")
    monkeypatch.setenv("NPUKIT_SANITIZE", "1")
    with pytest.raises(nk.CompilerError, match="LD_PRELOAD"):
        run(build_mul(65))


def test_default_cache_dir(monkeypatch):
    monkeypatch.delenv("NPUKIT_CACHE_DIR", raising=False)
    assert toolchain.cache_dir() == toolchain.Path.home() / ".cache" / "npukit"
    monkeypatch.setenv("NPUKIT_CACHE_DIR", os.sep + "x")
    assert str(toolchain.cache_dir()) == os.sep + "x"
