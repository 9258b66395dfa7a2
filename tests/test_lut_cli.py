"""The ``npukit lut`` subcommand, its plot, and the LUT section of ``npukit demo``."""

import argparse
import sys

import numpy as np
import pytest

from npukit.lut.cli import register
from npukit.lut.demo import demo


def _run(argv):
    parser = argparse.ArgumentParser(prog="npukit")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_lut_prints_the_design_and_its_error_table(capsys):
    code = _run(["lut", "sigmoid", "--entries", "33", "--range", "-8", "8", "--kind", "linear",
                 "--method", "minimax", "--points", "4001"])
    out = capsys.readouterr().out
    assert code == 0
    assert "sigmoid on [-8, 8]: linear table of 33" in out and "method minimax" in out
    assert "linear_approx(step_bits=0, bias=16, shift_offset=0)" in out
    table = out[out.index("inputs"):].splitlines()
    assert [line.split()[0] for line in table] == ["inputs", "x", "[lo,", "x", "all"]
    max_abs = float(table[-1].split()[2])
    assert 0 < max_abs < 0.0016          # h^2/16 max|sigma''| = 0.0015, plus rounding


def test_lut_uses_the_catalogue_range_and_dtypes(capsys):
    assert _run(["lut", "exp", "--entries", "64", "--in-dtype", "int8", "--out-dtype",
                 "int8", "--points", "1001"]) == 0
    out = capsys.readouterr().out
    assert "exp on [-8, 0]: direct table of 64 int8 entries" in out
    assert "parallel_lookup(step_bits=1, bias=64, oor='saturate')" in out


def test_lut_reports_design_errors_with_exit_code_2(capsys):
    assert _run(["lut", "rsqrt", "--range", "-1", "4"]) == 2
    err = capsys.readouterr().err
    assert "npukit lut: error:" in err and "rsqrt" in err and "finite" in err


def test_lut_rejects_unknown_functions_and_suggests_close_ones(capsys):
    assert _run(["lut", "softmax"]) == 2
    assert "fn='softmax' is not in the catalogue" in capsys.readouterr().err
    assert _run(["lut", "sigmod", "--entries", "17"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'sigmoid'?" in err and "known: sigmoid, tanh" in err


def test_lut_plot_creates_a_missing_directory(tmp_path, capsys):
    path = tmp_path / "new" / "deeper" / "tanh.png"
    assert _run(["lut", "tanh", "--entries", "17", "--points", "101", "--plot",
                 str(path)]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot written to {path}" in capsys.readouterr().out


@pytest.mark.parametrize("where", ["a directory", "under a file"])
def test_lut_plot_to_an_unwritable_path_is_an_error(tmp_path, capsys, where):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    path = tmp_path if where == "a directory" else blocker / "p.png"
    assert _run(["lut", "tanh", "--entries", "17", "--points", "101", "--plot",
                 str(path)]) == 2
    err = capsys.readouterr().err
    assert f"npukit lut: error: cannot write the plot to '{path}'" in err
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]   # nothing else written


def test_lut_plot_writes_a_png(tmp_path, capsys):
    path = tmp_path / "sigmoid.png"
    assert _run(["lut", "tanh", "--entries", "17", "--kind", "linear", "--points", "501",
                 "--plot", str(path)]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "plot written to" in capsys.readouterr().out


def test_lut_plot_without_matplotlib_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    path = tmp_path / "x.png"
    assert _run(["lut", "tanh", "--entries", "17", "--points", "101",
                 "--plot", str(path)]) == 1
    assert "needs matplotlib" in capsys.readouterr().err
    assert not path.exists()


def test_demo_prints_the_lut_section(capsys):
    demo()
    out = capsys.readouterr().out
    assert "Lookup tables (the AIE API, the TPP tensor compiler, the Compass DSL)" in out
    for approach in ("fast", "taylor", "table"):
        assert f"\n  {approach} " in out
    assert "holds" in out and "512 (offset float32, slope bfloat16) entries" in out
    assert "sample" in out and "minimax" in out


def test_demo_lut_errors_are_ones_a_reader_can_judge(capsys):
    """The SiLU rows give |error| in SiLU's units, relative to SiLU's range and in float32
    ulps at the worst point, under a legend; not a max_ulp dominated by SiLU's zero."""
    demo()
    out = capsys.readouterr().out
    assert "max_ulp" not in out
    head = next(line for line in out.splitlines() if line.startswith("  method "))
    assert head.split() == ["method", "max", "|error|", "at", "x", "/", "range", "ulps", "mean",
                            "|error|"]
    assert "/ range: over SiLU's range on [-10, 10] (10.28); ulps: float32 steps" in out
    silu = lambda x: x / (1 + np.exp(-x))  # noqa: E731
    span = silu(np.float64(10)) - silu(np.linspace(-2, 0, 200001)).min()  # min near -1.278
    for method in ("sample", "minimax"):
        row = next(line for line in out.splitlines() if line.startswith(f"  {method} "))
        max_abs, at, of_range, ulps, mean_abs = map(float, row.split()[1:])
        assert 1e-4 < max_abs < 1e-3 and 0 < mean_abs < max_abs
        assert of_range == pytest.approx(max_abs / span, rel=0.02)
        spacing = float(np.spacing(np.float32(silu(at))))  # float32 ulp at SiLU(x)
        assert ulps == pytest.approx(max_abs / spacing, rel=0.02)
        assert 1e3 < ulps < 1e5  # far coarser than float32, as the legend says
