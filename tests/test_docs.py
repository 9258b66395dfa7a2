"""Every code block of README.md and docs/*.md runs as written.

Each fenced block names its language: ``python`` blocks run, file by file in order, in one
namespace (like a doctest session) in a temporary directory; the ``npukit ...`` lines of
``sh`` blocks run through the command's ``main`` (``npukit demo`` has tests of its own),
other shell lines do not; ``c`` and ``text`` (output, formulas) blocks are shown, not run.
A block whose info string carries a file name after the language (```` ```toml my.toml ````)
is a file the page shows: it is written to that file, not run, so later blocks can use it.
The examples in the docstrings of the core modules run too.
"""

from __future__ import annotations

import doctest
import importlib
import linecache
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from npukit.cli import main

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGES = {"python", "sh", "c", "text", "toml"}
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def blocks(path: Path) -> list[tuple[str, str, str, int]]:
    """``(language, file name or "", code, line)`` of each fenced block, in order."""
    text = path.read_text()
    out = []
    for m in FENCE.finditer(text):
        lang, _, name = m.group(1).strip().partition(" ")
        out.append((lang, name.strip(), m.group(2), text.count("\n", 0, m.start()) + 1))
    return out


def npukit_commands(code: str) -> list[list[str]]:
    """The arguments of each ``npukit ...`` command of a ``sh`` block (not ``demo``)."""
    argvs = [shlex.split(x) for x in code.replace("\\\n", " ").splitlines()
             if x.startswith("npukit ")]
    return [a[1:] for a in argvs if a[1:2] != ["demo"]]


def test_fences_are_parsed(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("intro\n```python\nx = 1\n```\ntext\n```toml my.toml\na = 1\n```\n")
    assert blocks(page) == [("python", "", "x = 1\n", 2), ("toml", "my.toml", "a = 1\n", 6)]
    assert npukit_commands("npukit targets\nnpukit lut tanh \\\n  --entries 9\n") == [
        ["targets"], ["lut", "tanh", "--entries", "9"]]
    assert npukit_commands("npukit demo") == []
    assert npukit_commands("pip install -e . && npukit demo\ncc main.c") == []


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_every_block_names_its_language(path):
    for lang, _, _, line in blocks(path):
        assert lang in LANGUAGES, f"{path.name}:{line}: fence language {lang!r}"
    # Every fence is closed: an odd count would swallow the rest of the page.
    assert len(re.findall(r"^```", path.read_text(), re.MULTILINE)) == 2 * len(blocks(path))


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_the_blocks_of_a_page_run_in_order(path, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    ran = 0
    for lang, name, code, line in blocks(path):
        where = f"{path.name}:{line}"
        if name:  # a file the page shows: written, not run
            (tmp_path / name).write_text(code)
        elif lang == "python":
            # Known to linecache, as a file would be: kernels quote their source lines.
            linecache.cache[where] = (len(code), None, code.splitlines(True), where)
            exec(compile(code, where, "exec"), namespace)
            ran += 1
        elif lang == "sh" and (commands := npukit_commands(code)):
            for argv in commands:
                assert main(argv) == 0, f"{where}: npukit {' '.join(argv)}"
            ran += 1
    capsys.readouterr()
    assert ran > 0, f"{path.name} has no block that runs"


@pytest.mark.parametrize("name", ["npukit", "npukit.machine", "npukit.layout", "npukit.easy",
                                  "npukit.kernels", "npukit.demo", "npukit.cli_build",
                                  "npukit.tiler"])
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS,
                             extraglobs={"np": np})
    assert result.failed == 0 and result.attempted > 0
