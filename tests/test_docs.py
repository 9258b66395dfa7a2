"""Every code block of README.md and docs/*.md runs as written.

Each fenced block names its language. Every ``python`` block runs ALONE, as a reader pastes
it: saved as a script and run by a fresh interpreter in an empty directory (holding only
the files the page shows, below), so a block that leans on an earlier one fails with the
NameError a reader would get. The ``npukit ...`` lines of ``sh`` blocks run through the
command's ``main`` in the directory of the python block before them, whose files (a model
it saved, say) they may use (``npukit demo`` has tests of its own); other shell lines do
not run; ``c`` and ``text`` (output, formulas) blocks are shown, not run. A block whose info
string carries a file name after the language (```` ```toml my.toml ````) is a file the page
shows: it is written to that file, not run, so blocks can use it. The examples in the
docstrings of the core modules run too.
"""

from __future__ import annotations

import doctest
import importlib
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import npukit as nk
from npukit.cli import main

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGES = {"python", "sh", "c", "text", "toml", "csv"}
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


def run_npukit(argv: list[str]) -> int:
    """The exit code of ``npukit ARGV`` (``--version`` and ``--help`` exit through
    SystemExit)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


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


# Pages of numbers, with no example to run.
NO_EXAMPLES = {"measured.md"}


def page_files(path: Path) -> dict[str, str]:
    """The files a page shows (blocks with a file name): name -> contents."""
    return {name: code for _, name, code, _ in blocks(path) if name}


def run_alone(code: str, where: str, directory: Path) -> str:
    """Run ``code`` as a script in a fresh interpreter in ``directory``: "" when it exits 0,
    else what it printed last (the reader's traceback)."""
    script = directory / "example.py"
    script.write_text(code)
    r = subprocess.run([sys.executable, script.name], cwd=directory, capture_output=True,
                       text=True, timeout=600)
    (directory / script.name).unlink()
    return "" if r.returncode == 0 else f"{where}:\n{(r.stdout + r.stderr)[-3000:]}"


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.name)
def test_every_python_block_runs_alone(path, tmp_path, monkeypatch, capsys):
    files = page_files(path)
    failures, ran, here = [], 0, None
    for k, (lang, name, code, line) in enumerate(blocks(path)):
        where = f"{path.name}:{line}"
        if lang == "python" and not name:
            here = tmp_path / f"block{k}"
            here.mkdir()
            for file, text in files.items():
                (here / file).write_text(text)
            failures.append(run_alone(code, where, here))
            ran += 1
        elif lang == "sh" and (commands := npukit_commands(code)):
            if here is None:
                here = tmp_path / f"block{k}"
                here.mkdir()
            monkeypatch.chdir(here)
            for argv in commands:
                failures.append("" if run_npukit(argv) == 0
                                else f"{where}: npukit {' '.join(argv)} failed")
            ran += 1
    capsys.readouterr()
    assert ran > 0 or path.name in NO_EXAMPLES, f"{path.name} has no block that runs"
    failed = [f for f in failures if f]
    assert not failed, "\n\n".join(failed)


def width_table(name: str) -> str:
    """The Markdown table of a target's vector widths, one column per unit, as
    docs/kernel-language.md shows it (paste it there when a target file changes)."""
    units = list(nk.target(name).units.values())
    pairs = list(dict.fromkeys(p for u in units for p in u.widths))
    rows = ["| input dtype | weight dtype | " + " | ".join(f"`{u.name}`" for u in units) + " |",
            "| --- | --- | " + " | ".join("---:" for _ in units) + " |"]
    rows += [f"| {a} | {b} | " + " | ".join(str(u.widths.get((a, b), "-")) for u in units)
             + " |" for a, b in pairs]
    return "\n".join(rows)


@pytest.mark.parametrize("name", nk.targets())
def test_reference_width_tables_match_the_target_files(name):
    text = (ROOT / "docs" / "kernel-language.md").read_text()
    table = width_table(name)
    assert f"### {name}\n\n{table}\n" in text, f"docs/kernel-language.md, ### {name}:\n{table}"
    # Every width of every unit is in the table, in its unit's column.
    units = list(nk.target(name).units.values())
    for u in units:
        for (a, b), w in u.widths.items():
            row = next(x for x in table.splitlines() if x.startswith(f"| {a} | {b} |"))
            assert row.split(" | ")[2 + units.index(u)].strip(" |") == str(w)


def toml_keys(raw: dict) -> set[tuple[str, str]]:
    """(section, key) of every leaf of a target file, names of memories, engines and units
    as NAME: ``("memories.NAME", "size")``, ``("units.NAME.width", '"IN,W" = N')``."""
    keys = {("", k) for k, v in raw.items() if not isinstance(v, dict)}
    for section in ("arith", "lut"):
        keys |= {(section, k) for k in raw[section]}
    for section in ("memories", "engines", "units"):
        for entry in raw[section].values():
            keys |= {(f"{section}.NAME", k) for k, v in entry.items() if not isinstance(v, dict)}
            if "width" in entry:
                keys.add((f"{section}.NAME.width", '"IN,W" = N'))
    return keys


def test_the_reference_covers_programs_results_and_reports():
    import dataclasses

    from npukit.sim.timing import Report

    page = (ROOT / "docs" / "kernel-language.md").read_text()
    section = page[page.index("## Programs, results and reports"):]
    hidden = {"events", "events_dropped", "skipped_iterations"}  # drawn by save_trace
    for name in [f.name for f in dataclasses.fields(Report) if f.name not in hidden] + [
            "roofline_cycles", "microseconds", "save_trace", "save_png", "outputs",
            "wall_time", "transfers", "c_source", "compile"]:
        assert re.search(rf"[`.]{name}\b", section), name
    assert nk.Program.run.__doc__ and "Result" in nk.Program.run.__doc__


def test_the_targets_page_names_every_built_in_target():
    page = (ROOT / "docs" / "targets.md").read_text()
    for name in nk.targets():
        assert f"`npukit/targets/{name}.toml`" in page, name


def test_the_targets_page_explains_every_key_of_a_target_file():
    import tomllib

    page = (ROOT / "docs" / "targets.md").read_text()
    cells = [line.split(" | ")[0].lstrip("| ") for line in page.splitlines()
             if line.startswith("| `")]
    for name in nk.targets():
        raw = tomllib.loads(Path(nk.target(name).path).read_text())
        for section, key in sorted(toml_keys(raw)):
            want = f"`{key}`" if not section else f"`[{section}]`"
            assert any(c.startswith(want) and f"`{key}`" in c for c in cells), \
                f"targets.md does not explain [{section}] {key}"


@pytest.mark.parametrize("name", ["npukit", "npukit.machine", "npukit.layout", "npukit.easy",
                                  "npukit.kernels", "npukit.demo", "npukit.demo_checks",
                                  "npukit.cli_build",
                                  "npukit.measure", "npukit.sequencing", "npukit.tiler",
                                  "npukit.tiler.spaces", "npukit.tiler.api_spaces",
                                  "npukit.dtypes"])
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS,
                             extraglobs={"np": np})
    assert result.failed == 0 and result.attempted > 0


def test_the_dsl_page_has_one_row_per_builtin_and_its_own_counts():
    """docs/dsl.md: each builtin described once; the suite table's paths written from the
    package down (no checkout's absolute path); the sentence before the table counts it."""
    page = (ROOT / "docs" / "dsl.md").read_text()
    described = [line.split(" | ")[0] for line in page.splitlines() if line.startswith("| `")]
    assert len(described) == len(set(described)), sorted(
        {d for d in described if described.count(d) > 1})
    assert not re.search(r"/(work|root|home|tmp)/\S*npukit/", page)
    rows = [line.split("|") for line in page.splitlines()
            if line.startswith(("| test_", "| tutorial_"))]
    whole = sum(r[5].strip() == "yes" for r in rows)
    assert f"{whole} of its {len(rows)} files pass whole" in page
