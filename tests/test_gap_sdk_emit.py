"""``npukit run MODEL.onnx --emit DIR --sdk gap`` and ``npukit.tiler.gap_sdk``: a graph as
GAP SDK C (``<Name>Kernels.c/.h`` with AT_* calls, npukit's basic kernels, the emulation
header, main.c, a Makefile), built on the host by ``make emul`` and compared with the
simulator by ``make check``: outputs byte for byte, arena guards intact, no memcpy for DMA,
as many transfers per layer as the simulator's timeline starts, and a 32-bit build."""

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from npukit.tiler import gap_sdk

HAVE_CC = shutil.which("make") is not None and shutil.which("cc") is not None
needs_cc = pytest.mark.skipif(not HAVE_CC, reason="needs make and a C compiler")
RNG = np.random.default_rng(11)


def _m32_works() -> bool:
    """Whether ``gcc -m32`` compiles and links a program with the C library here."""
    if shutil.which("gcc") is None:
        return False
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "t.c"
        src.write_text("#include <stdio.h>\nint main(void) { return printf(\"\") ; }\n")
        r = subprocess.run(["gcc", "-m32", str(src), "-o", str(Path(d) / "t")],
                           capture_output=True)
        return r.returncode == 0


def tiny_graph():
    """The int16 graph of docs/graph.md (a 5x5 convolution with ReLU and max pooling, then a
    linear layer), weights in flash."""
    from npukit.tiler import (
        ARG_DIR_CONSTIN,
        ARG_DIR_IN,
        ARG_DIR_INOUT,
        ARG_DIR_OUT,
        ARG_SCOPE_ARG,
        ARG_SCOPE_GLOBAL,
        ARG_SCOPE_LOCAL,
        AT_GRAPH_TRACE_EXEC,
        AT_MEM_L2,
        AT_MEM_L3_HFLASH,
        AT_MEM_UNDEF,
        AT_OPT_OFF,
        GNA_IN,
        GNA_OUT,
        KOP_CONV_DP,
        KOP_LINEAR,
        KOP_MAXPOOL,
        KOP_NONE,
        KOP_RELU,
        Bindings,
        CArgs,
        ConstInfo,
        GNodeArg,
        Model,
        TCArgInfo,
    )
    m = Model(target="gap8", l1_budget=8000, l2_budget=64 * 1024, l3_budget=1 << 20,
              l3_flash_budget=1 << 20)
    m.AT_SetGraphCtrl(AT_GRAPH_TRACE_EXEC, AT_OPT_OFF)
    m.LoadCNNLibrary()
    m.CNN_ConvolutionPoolReLU("Conv", 0, 2, 2, 2, 2, 12, 14, 14, 12, 0, 0, 0, 0, 1, 4, 12, 12,
                              KOP_CONV_DP, 5, 5, 1, 1, 1, 1, 0, KOP_MAXPOOL, 2, 2, 1, 1, 2, 2,
                              0, KOP_RELU)
    m.CNN_LinearReLU("Dense", 0, 2, 2, 2, 2, 12, 12, 12, 12, 0, 0, 0, 0, 64, 3, KOP_LINEAR,
                     KOP_NONE)
    rng = np.random.default_rng(0)
    w1 = rng.integers(-2000, 2000, (4, 1, 5, 5)).astype(np.int16)
    w2 = rng.integers(-500, 500, (3, 64)).astype(np.int16)
    m.CreateGraph("Tiny", CArgs(
        6,
        TCArgInfo("short int *", "In", ARG_SCOPE_ARG, ARG_DIR_IN, AT_MEM_L2, AT_MEM_UNDEF, 0),
        TCArgInfo("short int *", "W1", ARG_SCOPE_GLOBAL, ARG_DIR_CONSTIN, AT_MEM_L3_HFLASH,
                  AT_MEM_UNDEF, ConstInfo(w1, 1, 1, 16, 0)),
        TCArgInfo("short int *", "B1", ARG_SCOPE_GLOBAL, ARG_DIR_CONSTIN, AT_MEM_L3_HFLASH,
                  AT_MEM_UNDEF, ConstInfo(np.full(4, 0.25), 0, 1, 16, 14)),
        TCArgInfo("short int *", "W2", ARG_SCOPE_GLOBAL, ARG_DIR_CONSTIN, AT_MEM_L3_HFLASH,
                  AT_MEM_UNDEF, ConstInfo(w2, 1, 1, 16, 0)),
        TCArgInfo("short int *", "B2", ARG_SCOPE_GLOBAL, ARG_DIR_CONSTIN, AT_MEM_L3_HFLASH,
                  AT_MEM_UNDEF, ConstInfo(np.zeros(3), 0, 1, 16, 12)),
        TCArgInfo("short int *", "Out", ARG_SCOPE_ARG, ARG_DIR_OUT, AT_MEM_UNDEF, AT_MEM_L2, 0)),
        CArgs(1, TCArgInfo("short int *", "Hidden", ARG_SCOPE_LOCAL, ARG_DIR_INOUT,
                           AT_MEM_UNDEF, AT_MEM_UNDEF, 0)))
    m.AddNode("Conv", Bindings(4, GNodeArg(GNA_IN, "In", 0), GNodeArg(GNA_IN, "W1", 0),
                               GNodeArg(GNA_IN, "B1", 0), GNodeArg(GNA_OUT, "Hidden", 0)))
    m.AddNode("Dense", Bindings(4, GNodeArg(GNA_IN, "Hidden", 0), GNodeArg(GNA_IN, "W2", 0),
                                GNodeArg(GNA_IN, "B2", 0), GNodeArg(GNA_OUT, "Out", 0)))
    m.CloseGraph()
    return m.graph("Tiny")


def emit_tiny(folder: Path):
    g = tiny_graph()
    x = RNG.integers(0, 4096, (1, 12, 12)).astype(np.int16)
    out = np.zeros(3, np.int16)
    g.run("sim", In=x, Out=out)
    return g, gap_sdk.write(g, folder, {"In": x}, {"Out": out})


def make(folder: Path, *targets: str, cc: str = "cc") -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-C", str(folder), *targets, f"CC={cc}"],
                          capture_output=True, text=True)


def check_project(g, folder: Path, cc: str = "cc") -> str:
    """``make emul check`` passes; guards intact; transfers per layer as the simulator's."""
    r = make(folder, "emul", "check", cc=cc)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "outputs identical to expected/" in r.stdout
    assert "arena guards intact" in r.stdout
    got = {m[0]: int(m[1]) for m in re.findall(r"^transfers (\S+): (\d+)", r.stdout, re.M)}
    want = gap_sdk.transfer_counts(g)
    assert [got[layer.name] for layer in g.layers] == want, (got, want)
    # the AT_GraphPerf table (-DPERF) holds the cycles the model predicts, and names them
    report = g.report()
    for layer in g.layers:
        assert re.search(rf"^{re.escape(layer.name)}\s+{report.layers[layer.name]}\s", r.stdout,
                         re.M), r.stdout
    assert "Cycles predicted by npukit's cycle model" in r.stdout
    return r.stdout


def kernels_text(g, folder: Path) -> str:
    return (folder / f"{g.name}Kernels.c").read_text()


def test_the_graph_is_written_with_the_sdk_api(tmp_path):
    """Fast: the files and the API names, no compiler."""
    g, folder = emit_tiny(tmp_path / "tiny")
    names = {p.name for p in folder.iterdir()}
    assert {"TinyKernels.c", "TinyKernels.h", "npukit_BasicKernels.c", "npukit_BasicKernels.h",
            "npukit_at_emul.h", "main.c", "Makefile", "Tiny_L3_Flash_Const.dat", "inputs",
            "expected"} <= names
    c = kernels_text(g, folder)
    assert "memcpy" not in c
    for name in ("int TinyCNN_Construct(void)", "int TinyCNN_Destruct(void)", "int TinyCNN(",
                 "AT_L1_POINTER Tiny_L1_Memory", "AT_L2_POINTER Tiny_L2_Memory",
                 "AT_FORK(gap_ncore(), (void *) ", "AT_L2_COPY", "AT_L2_WAIT(0, &",
                 "AT_L2_EVENT ", "AT_HYPERFLASH_FS_OPEN(&HyperFlash", "AT_GraphPerf[0] = "
                 "gap_cl_readhwtimer();", "#ifdef PERF", "Tiny_Predicted_Cycles"):
        assert name in c, name
    assert re.search(r"if \(Tiny_L2_Memory == 0\) return 3;", c)
    assert "typedef struct {" in (folder / "npukit_BasicKernels.h").read_text()
    # each layer and each transfer says what it serves
    assert "/* Layer 0: Conv" in c and "/* Static Moving W1" in c
    # the layers' predicted cycles are constants of the file
    report = g.report()
    for layer in g.layers:
        assert f"{report.layers[layer.name]}, /* {layer.name} */" in c
    make_text = (folder / "Makefile").read_text()
    assert re.search(r"^CFLAGS \?= .*-Wall -Wextra -Werror", make_text, re.M)
    for target in ("emul:", "check:", "clean:"):
        assert target in make_text


def test_a_folder_that_is_not_empty_or_a_link_is_refused(tmp_path):
    from npukit.errors import NpukitError
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "mine.txt").write_text("keep")
    with pytest.raises(NpukitError, match="not empty"):
        emit_tiny(busy)
    assert (busy / "mine.txt").read_text() == "keep"
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(NpukitError, match="link"):
        emit_tiny(tmp_path / "link")
    assert not any((tmp_path / "real").iterdir())


@pytest.mark.slow
@needs_cc
def test_the_graph_of_the_guide_builds_and_matches_the_simulator(tmp_path):
    g, folder = emit_tiny(tmp_path / "tiny")
    check_project(g, folder)
    # a mismatch fails the check: cmp exits 1, make reports the failure
    exp = folder / "expected" / "Out.bin"
    data = bytearray(exp.read_bytes())
    data[0] ^= 1
    exp.chmod(0o644)
    exp.write_bytes(bytes(data))
    r = make(folder, "check")
    assert r.returncode != 0 and "differ" in r.stdout + r.stderr


# -- ONNX models, through the command line ----------------------------------------------------

onnx = pytest.importorskip("onnx")


def _save(tmp_path: Path, m, name: str) -> Path:
    path = tmp_path / name
    onnx.save(m, path)
    return path


def run_cli(model: Path, folder: Path, *extra: str) -> None:
    from npukit.cli import main
    assert main(["run", str(model), "--no-cycles", "--emit", str(folder), "--sdk", "gap",
                 *extra]) == 0


def cnn_model(tmp_path: Path) -> Path:
    from onnx_helpers import model, node
    x = RNG.normal(size=(1, 3, 8, 8)).astype(np.float32)
    inits = {"w": (RNG.normal(size=(4, 3, 3, 3)) * 0.3).astype(np.float32),
             "b": RNG.normal(size=4).astype(np.float32),
             "fw": (RNG.normal(size=(64, 5)) * 0.2).astype(np.float32),
             "fb": RNG.normal(size=5).astype(np.float32)}
    nodes = [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["r"]),
             node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Flatten", ["p"], ["f"]), node("Gemm", ["f", "fw", "fb"], ["y"])]
    return _save(tmp_path, model(nodes, {"x": x}, ["y"], inits, opset=13), "cnn.onnx")


def depthwise_model(tmp_path: Path) -> Path:
    from onnx_helpers import model, node
    x = RNG.normal(size=(1, 8, 10, 10)).astype(np.float32)
    inits = {"dw": (RNG.normal(size=(8, 1, 3, 3)) * 0.3).astype(np.float32),
             "db": RNG.normal(size=8).astype(np.float32),
             "pw": (RNG.normal(size=(6, 8, 1, 1)) * 0.3).astype(np.float32)}
    nodes = [node("Conv", ["x", "dw", "db"], ["d"], group=8, pads=[1, 1, 1, 1]),
             node("Relu", ["d"], ["r"]), node("Conv", ["r", "pw"], ["y"])]
    return _save(tmp_path, model(nodes, {"x": x}, ["y"], inits, opset=13), "dw.onnx")


def qdq_model(tmp_path: Path) -> Path:
    pytest.importorskip("onnxruntime")
    from onnx_helpers import model, node, quantize_qdq
    x = RNG.normal(size=(1, 2, 8, 8)).astype(np.float32)
    inits = {"w": (RNG.normal(size=(4, 2, 3, 3)) * 0.3).astype(np.float32),
             "b": (RNG.normal(size=4) * 0.1).astype(np.float32),
             "fw": (RNG.normal(size=(64, 5)) * 0.2).astype(np.float32)}
    nodes = [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["r"]),
             node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Flatten", ["p"], ["f"]), node("MatMul", ["f", "fw"], ["y"])]
    m = model(nodes, {"x": x}, ["y"], inits, opset=13)
    calib = [{"x": RNG.normal(size=x.shape).astype(np.float32)} for _ in range(8)]
    folder = tmp_path / "q"
    folder.mkdir()
    return _save(tmp_path, quantize_qdq(m, calib, folder, act="s8"), "qdq.onnx")


def grouped_model(tmp_path: Path) -> Path:
    """A grouped convolution (2 groups of 3 input channels, 4 outputs each): one layer
    walking the groups."""
    from onnx_helpers import model, node
    x = RNG.normal(size=(1, 6, 9, 9)).astype(np.float32)
    inits = {"gw": (RNG.normal(size=(8, 3, 3, 3)) * 0.3).astype(np.float32),
             "gb": RNG.normal(size=8).astype(np.float32)}
    nodes = [node("Conv", ["x", "gw", "gb"], ["g"], group=2, pads=[1, 1, 1, 1], strides=[2, 2]),
             node("Relu", ["g"], ["y"])]
    return _save(tmp_path, model(nodes, {"x": x}, ["y"], inits, opset=13), "grouped.onnx")


MODELS = {"cnn": cnn_model, "qdq-int8": qdq_model, "depthwise": depthwise_model,
          "grouped": grouped_model}


@pytest.mark.slow
@needs_cc
@pytest.mark.parametrize("kind", list(MODELS))
def test_an_onnx_model_emitted_for_the_sdk_builds_and_matches_the_simulator(kind, tmp_path):
    import npukit.onnx
    path = MODELS[kind](tmp_path)
    folder = tmp_path / "gap"
    run_cli(path, folder)
    g = npukit.onnx.load(path)
    assert "memcpy" not in kernels_text(g.graph, folder)
    check_project(g.graph, folder)


def big_dense_model(tmp_path: Path) -> Path:
    """A convolution, then a dense layer whose 80 KB of weights the plan leaves in flash
    under a 20 KB L2 budget (the layer streams them)."""
    from onnx_helpers import model, node
    x = RNG.normal(size=(1, 3, 16, 16)).astype(np.float32)
    inits = {"w": (RNG.normal(size=(8, 3, 3, 3)) * 0.3).astype(np.float32),
             "b": RNG.normal(size=8).astype(np.float32),
             "fw": (RNG.normal(size=(512, 40)) * 0.2).astype(np.float32)}
    nodes = [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["r"]),
             node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Flatten", ["p"], ["f"]), node("MatMul", ["f", "fw"], ["y"])]
    return _save(tmp_path, model(nodes, {"x": x}, ["y"], inits, opset=13), "big.onnx")


@pytest.mark.slow
@needs_cc
def test_weights_streamed_from_flash_use_the_flash_calls(tmp_path):
    """Weights the plan leaves in flash: the layer streams them tile by tile with
    AT_HYPERFLASH_FS_CL_COPY*, still the simulator's bytes and transfers."""
    import npukit.onnx
    path = big_dense_model(tmp_path)
    g = npukit.onnx.load(path, l2_budget=20000, l1_budget=8000)
    assert any(layer.streamed for layer in g.graph.layers)
    folder = tmp_path / "gap"
    run_cli(path, folder, "--l2", "20000", "--l1", "8000")
    c = kernels_text(g.graph, folder)
    body = c[c.index("void L1_MatMul("):c.index("int mCNN_Construct")]
    assert "AT_HYPERFLASH_FS_CL_COPY" in body and "AT_HYPERFLASH_FS_CL_WAIT(&HyperFlash" in body
    check_project(g.graph, folder)


def activations_model(tmp_path: Path) -> Path:
    """Two 3x3 convolutions on 32x32 planes: under a 20 KB L2 budget the activations live in
    L3 RAM and every layer streams them."""
    from onnx_helpers import model, node
    x = RNG.normal(size=(1, 4, 32, 32)).astype(np.float32)
    inits = {"w": (RNG.normal(size=(8, 4, 3, 3)) * 0.3).astype(np.float32),
             "w2": (RNG.normal(size=(4, 8, 3, 3)) * 0.3).astype(np.float32)}
    nodes = [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"], ["r"]),
             node("Conv", ["r", "w2"], ["y"], pads=[1, 1, 1, 1])]
    return _save(tmp_path, model(nodes, {"x": x}, ["y"], inits, opset=13), "act.onnx")


@pytest.mark.slow
@needs_cc
def test_activations_in_l3_ram_use_the_hyperram_calls(tmp_path):
    """Activations the plan puts in L3 RAM: allocated with AT_HYPERRAM_ALLOC, streamed tile
    by tile with AT_HYPERRAM_CL_COPY*, still the simulator's bytes and transfers."""
    import npukit.onnx
    path = activations_model(tmp_path)
    g = npukit.onnx.load(path, l2_budget=20000, l1_budget=8000)
    assert g.graph.memory["L3"].dynamic > 0
    folder = tmp_path / "gap"
    run_cli(path, folder, "--l2", "20000", "--l1", "8000")
    c = kernels_text(g.graph, folder)
    assert "AT_HYPERRAM_ALLOC(&HyperRam" in c and "AT_HYPERRAM_CL_COPY" in c
    assert "AT_HYPERRAM_CL_WAIT(&HyperRam" in c
    check_project(g.graph, folder)


@pytest.mark.slow
@needs_cc
def test_the_emitted_sources_build_for_32_bits(tmp_path):
    """gcc -m32 with -Wall -Wextra -Werror: no 64-bit assumption (pointer sizes, long),
    and the 32-bit program still matches the simulator."""
    if not _m32_works():
        pytest.skip("gcc -m32 cannot build here (install gcc-multilib for 32-bit builds)")
    import npukit.onnx
    for make_model, l1, l2 in ((cnn_model, None, None), (qdq_model, None, None),
                               (big_dense_model, 8000, 20000),
                               (activations_model, 8000, 20000)):
        path = make_model(tmp_path)
        folder = tmp_path / f"gap32-{path.stem}"
        budgets = ["--l1", str(l1), "--l2", str(l2)] if l1 else []
        run_cli(path, folder, *budgets)
        kw = {"l1_budget": l1, "l2_budget": l2} if l1 else {}
        # SSE arithmetic: the x87 unit's excess precision would round floats otherwise
        check_project(npukit.onnx.load(path, **kw).graph, folder,
                      cc="gcc -m32 -msse2 -mfpmath=sse")
