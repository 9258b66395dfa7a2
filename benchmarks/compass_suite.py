"""The public Compass DSL's own tutorials and unit tests, run on npukit: a per-file table.

    python benchmarks/compass_suite.py PATH_TO_CHECKOUT [--timeout S] [--only GLOB] [--python EXE]
                                        [--jobs N]

PATH_TO_CHECKOUT is a checkout of Arm China's Compass_Apache_TVM (GitHub). Its tutorials
(``python/tvm/compass/dsl/samples/tutorial_*.py``) and DSL unit tests
(``compass/tests/python/unittest/dsl/test_*.py``) are copied to a temporary directory with
one textual change, the one a user makes: ``tvm.compass.dsl`` becomes ``npukit.dsl`` and
``from tvm import`` becomes ``from npukit.dsl import``. Each file then runs under pytest
in a subprocess of its own, with a time limit, and one row per file gives its passed,
failed and erroring cases and the first failure's reason. A file passes whole when every
case it collects passes. ``--jobs N`` runs N files at a time (each in its own directory;
the rows keep the files' order). Nothing of the suite is kept.

The files run under ``--python`` (this interpreter by default), which must have npukit,
pytest and whatever the files import. The public suite's own numpy code is written for
numpy 1 (the public repository installs numpy 1.21): under numpy 2 some of its reference
computations refuse to store ``-3`` in a ``uint8`` array (``OverflowError``). Run it with
the Python of a virtual environment holding numpy 1.26 to measure npukit rather than that.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

TUTORIALS = "python/tvm/compass/dsl/samples"
UNIT_TESTS = "compass/tests/python/unittest/dsl"


@dataclass(frozen=True)
class Row:
    """One file's outcome: counts of cases, and the first failure's reason ("" if none)."""

    name: str
    passed: int
    failed: int
    errors: int
    reason: str

    @property
    def whole(self) -> bool:
        return self.passed > 0 and self.failed == 0 and self.errors == 0


def textual_change(source: str) -> str:
    """The public DSL's imports rewritten to npukit's."""
    return source.replace("tvm.compass.dsl", "npukit.dsl").replace("from tvm import",
                                                                   "from npukit.dsl import")


def suite_files(checkout: Path, only: str = "*") -> list[Path]:
    """The tutorials, then the unit tests, of a checkout (those whose name matches
    ``only``)."""
    files = sorted((checkout / TUTORIALS).glob("tutorial_*.py")) + \
        sorted((checkout / UNIT_TESTS).glob("test_*.py"))
    return [f for f in files if fnmatch(f.name, only)]


def run_file(path: Path, work: Path, timeout: float, python: str = sys.executable) -> Row:
    """``path`` changed textually and run by pytest in a subprocess of ``python``."""
    copy = work / path.name
    copy.write_text(textual_change(path.read_text()))
    report = work / f"{path.stem}.xml"
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           f"--junitxml={report}", str(copy)]
    try:
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Row(path.name, 0, 0, 1, f"timed out after {timeout:g} s")
    if proc.returncode < 0:
        return Row(path.name, 0, 0, 1, f"the interpreter crashed (signal {-proc.returncode})")
    if not report.exists():
        return Row(path.name, 0, 0, 1, _last_line(proc.stdout + proc.stderr))
    return _read_report(path.name, report)


def _read_report(name: str, report: Path) -> Row:
    passed = failed = errors = 0
    reason = ""
    for case in ET.parse(report).getroot().iter("testcase"):
        bad = case.find("failure")
        err = case.find("error")
        if bad is not None:
            failed += 1
        elif err is not None:
            errors += 1
        elif case.find("skipped") is None:
            passed += 1
        hit = bad if bad is not None else err
        if hit is not None and not reason:
            reason = _reason(_raised(hit.text or "") or hit.get("message") or "")
    if passed + failed + errors == 0 and not reason:
        reason = "no test collected"
    return Row(name, passed, failed, errors, reason)


def _raised(text: str) -> str:
    """The exception line of a pytest traceback ("E   KernelError: ..."), if any."""
    lines = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]
    named = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception|Exit)\b", ln)]
    return (named or lines or [""])[0]


def _reason(message: str) -> str:
    """The first line of a failure message, shortened to fit a table cell; a path into a
    checkout of npukit is written from the package down (``npukit/dsl/__init__.py``), the
    same wherever the suite ran."""
    line = next((ln.strip() for ln in message.splitlines() if ln.strip()), "")
    line = re.sub(r"\s+", " ", line).replace("|", "/")
    line = re.sub(r"/\S*?/(npukit/[\w/.]+)", r"\1", line)
    return line if len(line) <= 150 else line[:147] + "..."


def _last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return _reason(lines[-1]) if lines else "no output"


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table, then the totals."""
    out = ["| file | passed | failed | errors | whole | first failure |",
           "| --- | ---: | ---: | ---: | :---: | --- |"]
    out += [f"| {r.name} | {r.passed} | {r.failed} | {r.errors} | "
            f"{'yes' if r.whole else 'no'} | {r.reason} |" for r in rows]
    whole = sum(r.whole for r in rows)
    out.append(f"\n{whole} of {len(rows)} files pass whole; cases: "
               f"{sum(r.passed for r in rows)} passed, {sum(r.failed for r in rows)} failed, "
               f"{sum(r.errors for r in rows)} errors")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout", type=Path, help="a checkout of Compass_Apache_TVM")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per file")
    ap.add_argument("--only", default="*", help="file names matching this glob")
    ap.add_argument("--jobs", type=int, default=1, help="files run at a time")
    ap.add_argument("--python", default=sys.executable,
                    help="the interpreter that runs the files (one with numpy 1 for the "
                         "suite's numpy-1 code); this one by default")
    args = ap.parse_args(argv)
    files = suite_files(args.checkout, args.only)
    if not files:
        print(f"no tutorial or DSL test under {args.checkout} ({TUTORIALS}, {UNIT_TESTS})",
              file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="compass_suite_"))
    def one(k: int, f: Path) -> Row:
        own = work / str(k)  # a directory per file: parallel runs share no junit report
        own.mkdir()
        row = run_file(f, own, args.timeout, args.python)
        print(f"{f.name}: {row.passed} passed, {row.failed} failed, {row.errors} errors",
              file=sys.stderr, flush=True)
        return row

    try:
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            rows = list(pool.map(one, range(len(files)), files))
        print(table(rows))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
