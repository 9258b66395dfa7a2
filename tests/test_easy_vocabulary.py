"""docs/easykernel.md's Torq tables stay true: every npukit name of the vocabulary table
resolves, every row marked "there" names test or example files that exist and use the
name, and the pattern-file table counts 41 files, each "whole" row naming an example
(tests/test_examples.py runs them against numpy on the simulator and in C)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from npukit.easy import ACTMode, ALUOp1Mode, Data, LData, Slice
from npukit.easy.units import _Act, _Alu, _Load

ROOT = Path(__file__).parent.parent
PAGE = (ROOT / "docs" / "easykernel.md").read_text()
OWNERS = {"LData": LData, "IData": Data, "PData": Data, "s.alu": _Alu, "s.act": _Act,
          "s.iram": _Load, "s.wram": _Load, "s.bram": _Load, "s": Slice,
          "ALUOp1Mode": ALUOp1Mode, "ACTMode": ACTMode}


def table(header: str) -> list[list[str]]:
    """The rows of the markdown table whose header row starts with ``header``."""
    lines = PAGE[PAGE.index(header):].splitlines()
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


VOCAB = table("| Torq EasyKernel name | npukit name | status | tested in |")
PATTERNS = table("| pattern file | status | npukit |")


def names(cell: str) -> list[tuple[str, str]]:
    """``(owner, name)`` of each backticked ``owner.name`` in a cell."""
    return [tuple(n.rsplit(".", 1)) for n in re.findall(r"`([\w.]+\.\w+)`", cell)]


@pytest.mark.parametrize("row", VOCAB, ids=[r[0][:40] for r in VOCAB])
def test_vocabulary_row_is_true(row):
    public, ours, status, where = row
    if status.startswith("missing"):
        assert not ours and not where, "a missing name names nothing of npukit's"
        return
    assert status.startswith("there") and ours and where
    used = "".join((ROOT / f).read_text() for f in where.split(", "))
    for owner, name in names(ours):
        assert hasattr(OWNERS[owner], name), f"{owner}.{name}"
        camel = re.sub(r"_(\w)", lambda m: m.group(1).upper(), name)
        assert name in used or camel in used, f"{where} never use {owner}.{name}"


def test_pattern_table_counts_the_compilers_files():
    assert len(PATTERNS) == 41 and len({r[0] for r in PATTERNS}) == 41
    whole = [r for r in PATTERNS if r[1].startswith("whole")]
    assert len(whole) >= 16
    stem = re.compile(r"(\w+?)(Pattern|ToHw)?\.cpp$")
    for file, _, example in whole:
        text = (ROOT / example).read_text()
        assert stem.match(file).group(1) in text.replace("Avgpool2D", "Avgpool"), example
    counted = re.search(r"(\d+) written whole .*?, (\d+) in part, (\d+) programming", PAGE,
                        re.DOTALL)
    parts = [r for r in PATTERNS if r[1].startswith("in part")]
    assert counted and [int(g) for g in counted.groups()] == [
        len(whole), len(parts), 41 - len(whole) - len(parts)]
