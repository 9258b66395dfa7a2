"""GAP-ready C (``Model.emit(dir, style="gap")``): the real cases' user kernels written as
the AutoTiler writes them compile on the host through at_host.h and run equal to numpy;
the ParMatMult file carries the numbers of the real tool's MatMultKernels.c."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
import real_cases as C

from npukit.errors import TilingError
from npukit.tiler import gap_c

CANARY = -12345
# One kernel per generator and size, and the AutoTiler 3.0 GRU encoders but N=200 (GAP C
# cannot yet write its one-column last tile's 2-D read).
MAIN = [c for c in C.CASES[:13] if not c.xfail] + [
    c for c in C.CASES if "gru" in c.name and c.name != "gapuino_gru_200"]


@pytest.mark.parametrize("case", MAIN, ids=[c.name for c in MAIN])
@pytest.mark.slow
def test_gap_c_runs_equal_to_numpy(case):
    m, kernel = case.build()
    run = gap_c.host_function(m, kernel)
    ins, outs, want = case.data(np.random.default_rng(7))
    arrays = dict(ins)
    bigs = {}
    for name, init in outs.items():
        big = np.full(init.size + 16, CANARY, init.dtype)
        arrays[name] = big[8:8 + init.size].reshape(init.shape)
        arrays[name][...] = init if m.program(kernel).param(name)[0].role == "inout" else CANARY
        bigs[name] = big
    run(**arrays)
    for name, expected in want.items():
        assert (arrays[name] == expected).all(), name
        assert (bigs[name][:8] == CANARY).all() and (bigs[name][-8:] == CANARY).all()


def test_matmult_file_has_the_real_tools_numbers():
    """MatMultKernels.c (fernandoFernandeSantos/gap9radsetup at c55b744): Tile1 6 tiles of
    38 lines, Tile0 4 of 38 columns, M1 / Out / M2 at L1 0 / 10640 / 33440, 2-D reads of
    M2's 38-column tiles (76 B chunks, 300 B apart), the kernel dispatched with AT_FORK."""
    m, kernel = [c for c in C.CASES if c.name == "matmult"][0].build()
    src = gap_c.kernels_c(m)
    for text in ("void ParMatMult(", "for (T1Ind=0; T1Ind<6; T1Ind++)",
                 "for (T0Ind=0; T0Ind<4; T0Ind++)", "(L1_Memory+0+5320*", "(L1_Memory+10640+11400*",
                 "(L1_Memory+33440+5320*", "/* Shared L1: 44080 bytes",
                 "AT_FORK(gap_ncore(), (void *) KerMatMultParallel16, (void *) KerArg0);",
                 "KerArg0->W_In1 = (unsigned int) (70);"):
        assert text in src, text
    first_m2 = next(line for line in src.splitlines() if "AT_L2_COPY2D" in line
                    and "L1_Memory+33440" in line and "5320, 300, 76" in line)
    assert "M2" in first_m2
    head = gap_c.kernels_h(m)
    assert "#define _L1_Memory_SIZE 44080" in head and "extern AT_L1_POINTER L1_Memory;" in head


def test_gru_file_has_the_real_tools_numbers():
    """EncDecLayer.c (CappelDen/Univariate-time-series-forecasting-with-Seq2Seq-models-on-
    GAPuino- at 0a34b07, GRU/150, AutoTiler 3.0): Shared L1 47212 B, Tile1 5 tiles and
    Tile0 10 inside it, Rec_Kernel2's 32-column tiles at 9412 (9600 B apart), Rec_Kernel's
    31-column ones at 28612 (9300 B apart, 62-byte rows of 150), H_0 at 112."""
    m, kernel = [c for c in C.CASES if c.name == "gapuino_gru_150"][0].build()
    src = gap_c.kernels_c(m)
    for text in ("/* Shared L1: 47212 bytes", "for (T1Ind=0; T1Ind<5; T1Ind++)",
                 "for (T0Ind=0; T0Ind<10; T0Ind++)", "(L1_Memory+9412+9600*",
                 "(L1_Memory+28612+9300*", "(L1_Memory+28612)), 9300, 600, 62,",
                 "(L1_Memory+112)"):
        assert text in src, text


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_emitted_files_compile_on_the_host_without_warnings(tmp_path):
    m, _ = [c for c in C.CASES if c.name == "mnist_conv_0"][0].build()
    paths = m.emit(tmp_path, style="gap")
    assert set(paths) == {"MnistKernels.c", "MnistKernels.h", "at_host.h", "host_kernels.c"}
    for name in ("MnistKernels.c",):  # it includes host_kernels.c on a host
        res = subprocess.run(["cc", "-std=gnu99", "-DAT_HOST", "-Wall", "-Wextra", "-Werror",
                              "-Wno-unused-function", "-c", str(paths[name]), "-o",
                              str(tmp_path / (name + ".o"))], capture_output=True, text=True,
                             check=False)
        assert res.returncode == 0, res.stderr
    assert "#include \"CNN_BasicKernels.h\"" in paths["MnistKernels.h"].read_text()


def test_a_parallel_kernel_needs_its_argument_struct():
    from dataclasses import replace

    from npukit.tiler import Model
    m, kernel = [c for c in C.CASES if c.name == "dronet_relu_1"][0].build()
    # The parallel basic kernel as if declared without its ParArgTypeName (a model may not
    # declare a basic kernel twice).
    m.libs["KerReLU_fp"] = replace(m.libs["KerReLU_fp"], arg_type="")
    with pytest.raises(TilingError, match="KerReLU_fp has no argument struct"):
        gap_c.kernels_c(m)
    with pytest.raises(TilingError, match="styles are 'gap'"):
        Model().emit("x", style="sdk")


def test_the_documented_examples_run_as_gap_c():
    """The AutoTiler documentation's examples, emitted as GAP C, run equal to numpy."""
    import runpy
    from pathlib import Path
    ex_dir = Path(__file__).parent.parent.parent / "examples" / "tiler"
    rng = np.random.default_rng(3)
    ex = runpy.run_path(str(ex_dir / "matadd.py"))
    a, b = rng.integers(-2**30, 2**30, (2, 300, 200)).astype(np.int32)
    out = np.zeros((300, 200), np.int32)
    gap_c.host_function(ex["model"](), "MatAdd")(In1=a, In2=b, Out=out)
    assert (out == a + b).all()
    ex = runpy.run_path(str(ex_dir / "matmax.py"))
    x = rng.integers(-2**31, 2**31 - 1, (300, 200)).astype(np.int32)
    top = np.zeros(1, np.int32)
    gap_c.host_function(ex["model"](), "MatMax")(In=x, Out=top)
    assert top[0] == x.max()
    ex = runpy.run_path(str(ex_dir / "cnn_conv5x5.py"))
    x = rng.integers(-2000, 2000, (3, 40, 40)).astype(np.int16)
    f = rng.integers(-300, 300, (2, 3, 5, 5)).astype(np.int16)
    bias = np.array([1000, -500], np.int16)
    out = np.zeros((2, 36, 36), np.int16)
    gap_c.host_function(ex["model"](), "CnnConv5x5")(In=x, Filter=f, Out=out, Norm=10, Bias=bias)
    assert (out == ex["reference"](x, f, bias, 10)).all()
