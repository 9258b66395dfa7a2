"""The ``npukit`` command: ``targets`` lists every built-in target with its numbers, and
``demo`` runs, printing the layouts section and a summary of its checks, failing when one
fails."""

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
    assert main(["demo", "layouts"]) == 0
    out = capsys.readouterr().out
    assert "== Layouts" in out
    seed = nk.Layout((5, 3, 3, 2), "int8")
    assert repr(seed.fuse(4).vectorize(16)) in out
    assert "Layout(int8[6, 16], strides=(16, 1), offset=0, valid=90 of last 2 dims)" in out
    assert "Layout(int8[2, 5, 7], strides=(0, 7, 1), offset=0)" in out
    assert "Layout(int8[2, 5, 7], strides=(0, 0, 0), offset=0)" in out


# The demo's self-checks: 3 layout views, 8 EasyKernel kernels x (numpy, C), the SiLU
# table, 3 for the Compass DSL kernel, 5 AutoTiler ports x (numpy, C), 3 for the MNIST
# graph, 2 for the calibrated cycles (published GAP8 rows, a calibration round trip), 6 for
# the ONNX model (its second load from the plan cache, its C found by the plan), 2 for its
# validation on a data set, 2 tensor operations, 2 for speed (1 and 2 threads), 2 LUT
# claims, 2 network blocks x (ONNX Runtime, C), 2 for the public Compass DSL kernel, 1 for
# the host run of a model, 2 transformers x (ONNX Runtime, C) and their embedding lookup.
DEMO_CHECKS = 3 + 8 * 2 + 1 + 3 + 5 * 2 + 3 + 2 + 6 + 2 + 2 + 2 + 2 + 2 * 2 + 2 + 1 + 2 * 2 + 1
# The EasyKernel kernels, the Compass DSL kernel, the AutoTiler ports, the MNIST graph, the
# ONNX model (C against ONNX Runtime, host and tile schedule C against the simulator, its
# C found by its plan), speed
# (1 and 2 threads), the network blocks (against ONNX Runtime and the simulator), the public
# Compass DSL kernel's C, the host run of a model, the transformers (against ONNX Runtime
# and the simulator).
C_CHECKS = 8 + 1 + 5 + 1 + 4 + 2 + 4 + 1 + 1 + 4


@pytest.fixture(autouse=True)
def plan_cache_on(monkeypatch):
    """The demo as a user runs it: the plan cache on (the suite turns it off elsewhere)."""
    monkeypatch.setenv("NPUKIT_PLAN_CACHE", "1")


@pytest.mark.slow
def test_demo_ends_with_a_summary_of_every_check(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1] == f"{DEMO_CHECKS} checks passed"
    assert "MISMATCH" not in out and "DIFFERS" not in out and "FAILS" not in out
    # Every speed is a median of interleaved rounds with their range, never one sample, its
    # CPU time beside it; each section's timings end with the machine's load.
    spread = r"[\d.e+]+ ms \([\d.e+]+-[\d.e+]+\) wall, [\d.e+]+ ms CPU"
    assert len(re.findall(spread, out)) == 4 + 3 + 2 + 2
    assert re.search(rf"fn = prog.compile\('c'\), 1 thread +{spread}\n.*2 threads +{spread}", out)
    assert re.search(rf"^    OpenBLAS \(np.matmul\) +{spread}$", out, re.MULTILINE)
    assert len(re.findall(r"^  machine: load [\d.]+ on \d+ CPUs", out, re.MULTILINE)) == 3
    assert re.search(r"npukit took [\d.]+x ONNX Runtime's wall time.*, [\d.]+x its CPU time", out)
    assert "GFLOP/s" not in out


def test_demo_sections_are_listed_and_run_one_at_a_time(capsys):
    from npukit.demo import SECTIONS

    assert main(["demo", "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == list(SECTIONS) and len(listed) >= 10
    assert main(["demo", "layouts"]) == 0
    out = capsys.readouterr().out
    assert "== Layouts" in out and "== EasyKernel" not in out and "== Lookup" not in out
    assert out.rstrip().splitlines()[-1] == "3 checks passed"
    assert main(["demo", "lut"]) == 0
    out = capsys.readouterr().out
    assert "== Lookup tables" in out and "== Layouts" not in out
    assert out.rstrip().splitlines()[-1] == "2 checks passed"
    with pytest.raises(SystemExit) as err:
        main(["demo", "nope"])
    assert err.value.code == 2
    msg = capsys.readouterr().err
    assert "invalid choice: 'nope'" in msg and all(f"'{name}'" in msg for name in SECTIONS)


def help_text(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as err:
        main([*argv, "--help"])
    assert err.value.code == 0
    return capsys.readouterr().out


def test_help_is_plain_text_and_demo_has_a_description(capsys):
    top, demo = help_text([], capsys), help_text(["demo"], capsys)
    assert "``" not in top and "``" not in demo
    assert "Write, tile, verify and generate compute kernels for NPUs" in top
    assert "A tour of every capability" in demo and "--list" in demo and "SECTION" in demo


@pytest.mark.slow
def test_a_wrong_kernel_result_fails_the_demo(capsys, monkeypatch):
    from npukit import kernels as K

    right = K.mul_vanilla

    @nk.kernel
    def mul_vanilla(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
        right.fn(s, input1, input2, bias_scale, output, shift=shift + 1, out_min=out_min,
                 out_max=out_max)  # off by one bit: numpy disagrees, C still equals sim

    monkeypatch.setattr(K, "mul_vanilla", mul_vanilla)
    assert main(["demo", "easykernel"]) == 1  # the section that runs it: the summary is shared
    out = capsys.readouterr().out
    assert re.search(r"^  vanilla mul .* MISMATCH +same$", out, re.MULTILINE)
    assert out.rstrip().splitlines()[-1] == "1 of 16 checks FAILED: vanilla mul: numpy"


@pytest.mark.slow
def test_a_failed_lut_claim_fails_the_demo(capsys, monkeypatch):
    import npukit.lut.demo as lut_demo
    from npukit.lut.sigmoid import ApproxError

    monkeypatch.setattr(lut_demo, "sigmoid_errors", lambda points: (
        ApproxError("table", "[-8, 8]", 0.02, 0.01),))
    assert main(["demo", "lut"]) == 1
    out = capsys.readouterr().out
    assert "within about 0.01 everywhere: FAILS (0.02)" in out
    assert out.rstrip().endswith("FAILED: LUT: 33-entry sigmoid table within 0.01")


@pytest.mark.slow
def test_c_that_differs_from_the_simulator_fails_the_demo(capsys, monkeypatch):
    import npukit.c
    import npukit.tiler.graph_c

    real = {npukit.c: npukit.c.run_c, npukit.tiler.graph_c: npukit.tiler.graph_c.run_c}

    def wrong_first_element(prog, arrays, **kw):
        run = real[npukit.c if isinstance(prog, nk.Program) else npukit.tiler.graph_c]
        res = run(prog, arrays, **kw)
        for a in res.outputs.values():
            flat = a.reshape(-1)  # a view: the demo's outputs are contiguous
            flat[:1] = flat[:1] * 3 + 101  # never equal: 2x + 101 is odd (ints), or large
        return res

    monkeypatch.setattr(npukit.c, "run_c", wrong_first_element)
    monkeypatch.setattr(npukit.tiler.graph_c, "run_c", wrong_first_element)
    assert main(["demo"]) == 1
    out = capsys.readouterr().out
    last = out.rstrip().splitlines()[-1]
    assert last.startswith(f"{C_CHECKS} of {DEMO_CHECKS} checks FAILED: vanilla mul: C = sim, ")
    assert "MatAdd: C = sim" in last and "FFT2D group: C = sim" in last
    assert "Compass DSL SiLU: C = simulator" in last and "MNIST graph: C = sim" in last
    assert out.count("DIFFERS") == C_CHECKS - 1  # the DSL section says "False"


@pytest.mark.slow
def test_without_a_c_compiler_the_c_checks_are_skipped(capsys, monkeypatch):
    import npukit.c

    def no_compiler(prog, arrays, **kw):
        raise nk.NoCompilerError("no C compiler found: install gcc")

    import npukit.tiler.graph_c

    monkeypatch.setattr(npukit.c, "run_c", no_compiler)
    monkeypatch.setattr(npukit.tiler.graph_c, "run_c", no_compiler)
    assert main(["demo"]) == 0
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert last.startswith(f"{DEMO_CHECKS - C_CHECKS} checks passed, {C_CHECKS} skipped "
                           f"(could not run: vanilla mul: C = sim, ")


@pytest.mark.slow
def test_a_compiler_that_fails_fails_the_demo_checks(capsys, monkeypatch):
    """A C compiler that is there but rejects the code is a failure, never a skip."""
    import npukit.c
    import npukit.tiler.graph_c

    def broken(prog, arrays, **kw):
        raise nk.CompilerError("cc failed (exit 1) on the generated C")

    monkeypatch.setattr(npukit.c, "run_c", broken)
    monkeypatch.setattr(npukit.tiler.graph_c, "run_c", broken)
    assert main(["demo"]) == 1
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert last.startswith(f"{C_CHECKS} of {DEMO_CHECKS} checks FAILED: vanilla mul: C = sim")


def test_a_command_is_required(capsys):
    with pytest.raises(SystemExit) as err:
        main([])
    assert err.value.code == 2
    assert "demo" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["frobnicate"])


@pytest.mark.slow
def test_the_module_runs_as_a_program():
    r = subprocess.run([sys.executable, "-m", "npukit.cli", "targets"], check=False,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^  IRAM\s+288$", r.stdout, re.MULTILINE)


@pytest.mark.slow
def test_output_into_a_closed_pipe_is_not_a_traceback():
    """`npukit targets | head -1`: the reader leaves early; npukit says nothing more."""
    import subprocess
    import sys

    cmd = [sys.executable, "-c", "import sys; from npukit.cli import main; sys.exit(main())",
           "targets"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as p:
        p.stdout.close()  # nobody reads: the first write breaks the pipe
        err = p.stderr.read().decode()
        code = p.wait()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert code == 1


@pytest.mark.slow
def test_demo_validates_a_qdq_model_on_the_local_pool(capsys):
    assert main(["demo", "validate"]) == 0
    out = capsys.readouterr().out
    assert "Validated on 6 inputs" in out and "bit-exact 100.00% of elements" in out
    assert out.rstrip().splitlines()[-1] == "2 checks passed"
