"""``benchmarks/compass_suite.py`` on a small checkout made here, laid out as the public
Compass DSL's (a tutorial, a test file with a passing and a failing case, one that does not
import): the textual change, the per-file counts and the first failure's reason."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent.parent / "benchmarks" / "compass_suite.py"

TUTORIAL = '''
import numpy as np
from tvm.compass.dsl import BuildManager, script as S
from tvm.compass.dsl.testing import rand, assert_allclose
from tvm import get_range


@S.prim_func
def add_one(a: S.ptr("int32", "global"), b: S.ptr("int32", "global"), n: S.i32):
    for i in range(n):
        b[i] = a[i] + 1


def test_add_one():
    a = rand(16, "int32", low=0, high=get_range("int16")[1])
    ex = BuildManager().build(add_one)
    for run in (add_one, ex):
        b = np.zeros(16, "int32")
        run(a, b, 16)
        assert_allclose(b, a + 1)
'''

MIXED = '''
def test_fine():
    assert 1 + 1 == 2


def test_wrong_on_purpose():
    assert 2 + 2 == 5, "arithmetic is broken | badly"
'''


def _suite():
    spec = importlib.util.spec_from_file_location("compass_suite", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclass looks its module up there
    spec.loader.exec_module(mod)
    return mod


def _checkout(root: Path) -> Path:
    tut = root / "python/tvm/compass/dsl/samples"
    tests = root / "compass/tests/python/unittest/dsl"
    tut.mkdir(parents=True)
    tests.mkdir(parents=True)
    (tut / "tutorial_0_add_one.py").write_text(TUTORIAL)
    (tests / "test_mixed.py").write_text(MIXED)
    (tests / "test_broken.py").write_text("import tvm.compass.dsl.nosuch\n")
    (tests / "helper.py").write_text("# not a test file: never run\n")
    return root


def test_textual_change():
    suite = _suite()
    assert suite.textual_change("from tvm.compass.dsl import script as S\nfrom tvm import "
                                "get_range") == "from npukit.dsl import script as S\nfrom " \
                                                "npukit.dsl import get_range"


@pytest.mark.slow
def test_table_of_a_small_checkout(tmp_path, capsys):
    suite = _suite()
    root = _checkout(tmp_path / "checkout")
    assert [f.name for f in suite.suite_files(root)] == [
        "tutorial_0_add_one.py", "test_broken.py", "test_mixed.py"]
    assert suite.main([str(root), "--timeout", "120"]) == 0
    out = capsys.readouterr().out
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ")[1:]
            for line in out.splitlines() if line.startswith("| t")}
    assert rows["tutorial_0_add_one.py"][:4] == ["1", "0", "0", "yes"]
    assert rows["test_mixed.py"][:4] == ["1", "1", "0", "no"]
    assert "arithmetic is broken / badly" in rows["test_mixed.py"][4]  # | kept out of cells
    assert rows["test_broken.py"][0] == "0" and rows["test_broken.py"][3] == "no"
    assert "npukit.dsl.nosuch" in rows["test_broken.py"][4]  # the changed import failed
    assert "1 of 3 files pass whole; cases: 2 passed, 1 failed" in out


def test_an_empty_checkout_is_refused(tmp_path, capsys):
    assert _suite().main([str(tmp_path)]) == 2
    assert "no tutorial or DSL test under" in capsys.readouterr().err


@pytest.mark.slow
def test_files_run_under_the_python_given(tmp_path, capsys):
    # An "interpreter" that marks its environment: the file passes only when run under it.
    python = tmp_path / "marked-python"
    python.write_text(f'#!/bin/sh\nSUITE_MARK=given exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    root = tmp_path / "checkout"
    tests = root / "compass/tests/python/unittest/dsl"
    tests.mkdir(parents=True)
    (tests / "test_marked.py").write_text(
        "import os\n\ndef test_marked():\n    assert os.environ.get('SUITE_MARK') == 'given'\n")
    suite = _suite()
    assert suite.main([str(root), "--python", str(python)]) == 0
    assert "| test_marked.py | 1 | 0 | 0 | yes |" in capsys.readouterr().out
    assert suite.main([str(root)]) == 0  # this interpreter: no mark, the case fails
    assert "| test_marked.py | 0 | 1 | 0 | no |" in capsys.readouterr().out
