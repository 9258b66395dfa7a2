"""The ``npukit`` command: ``targets`` lists every built-in target with its numbers, and
``demo`` runs, printing the layouts section."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import npukit as nk
from npukit.cli import main


def test_targets_lists_every_target_with_its_memories(capsys):
    assert main(["targets"]) == 0
    out = capsys.readouterr().out
    for name in nk.targets():
        t = nk.target(name)
        assert re.search(rf"^{name}: {re.escape(t.description)}$", out, re.MULTILINE)
        assert f"cores {t.cores}," in out
        for m in t.memories.values():
            assert re.search(rf"^  {m.name}\s+{m.size}$", out, re.MULTILINE), m
        for e in t.engines.values():
            assert re.search(rf"^  {e.name}\s+{','.join(e.src)}\s+{','.join(e.dst)}\s+"
                             rf"{e.bandwidth:g}\s+{e.latency}$", out, re.MULTILINE), e
    # The numbers, spelled out.
    assert re.search(r"^gap8: .*\n  cores 8, ", out, re.MULTILINE)
    assert re.search(r"^torq: .*\n  cores 2, ", out, re.MULTILINE)
    for mem, size in [("IRAM", 288), ("WRAM", 36), ("BRAM", 32), ("PRAM", 1024),
                      ("LRAM", 524288), ("L1", 65536), ("L2", 524288), ("L3_RAM", 8388608),
                      ("L3_FLASH", 67108864)]:
        assert re.search(rf"^  {mem}\s+{size}$", out, re.MULTILINE), mem
    assert re.search(r"unit alu \(latency \d+\):.* int8xint8=64 .*int16xint16=16", out)
    assert re.search(r"unit act \(latency \d+\):.* int8xint8=16 .*int16xint16=4", out)


def test_demo_prints_the_layouts_section(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "== Layouts" in out
    seed = nk.Layout((5, 3, 3, 2), "int8")
    assert repr(seed.fuse(4).vectorize(16)) in out
    assert "Layout(int8[6, 16], strides=(16, 1), offset=0, valid=90 of last 2 dims)" in out
    assert "Layout(int8[2, 5, 7], strides=(0, 7, 1), offset=0)" in out
    assert "Layout(int8[2, 5, 7], strides=(0, 0, 0), offset=0)" in out


def test_a_command_is_required(capsys):
    with pytest.raises(SystemExit) as err:
        main([])
    assert err.value.code == 2
    assert "demo" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["frobnicate"])


def test_the_module_runs_as_a_program():
    r = subprocess.run([sys.executable, "-m", "npukit.cli", "targets"], check=False,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^  IRAM\s+288$", r.stdout, re.MULTILINE)
