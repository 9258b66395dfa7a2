"""The generated C of graphs: warning-free under -std=c99 -pedantic -Wall -Wextra -Wshadow
-Werror for every constructor variant and memory plan (L2 only, constants streamed from
flash, fetched from L3 RAM, activations in L3 RAM), clean under AddressSanitizer and
UndefinedBehaviorSanitizer, and running on the planner's memory areas for real: tensors the
plan overlaps share their bytes on both back ends."""

from __future__ import annotations

import dataclasses
import os
import runpy
import subprocess
import sys
import textwrap
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

from npukit import CompilerError
from npukit.c import sanitizer_env, toolchain
from npukit.tiler import *

ROOT = Path(__file__).parent.parent
EX = ROOT / "examples" / "graph" / "mnist.py"

CONFIGS = textwrap.dedent('''
    import dataclasses, runpy, tempfile
    import numpy as np
    from npukit.tiler import *
    from npukit.tiler.graph_api import AT_MemLocation

    ex = runpy.run_path("examples/graph/mnist.py")
    folder = tempfile.mkdtemp()
    ex["write_tensors"](folder, ex["weights"]())

    def graphs():
        """(description, graph) for each constructor variant and kind of plan."""
        for warm in (0, 1, 2, 3):
            for plan in ("L2", "flash streams", "L3 RAM"):
                m = ex["MnistModel"](48000, 300 * 1024, 8 << 20, 20 << 20, const_dir=folder)
                m.AT_SetGraphCtrl(AT_GRAPH_TRACE_EXEC, AT_OPT_OFF)
                m.AT_SetGraphCtrl(AT_GRAPH_WARM_CONSTRUCT, AT_OPT_VAL(warm))
                if plan == "flash streams":
                    m.SetMemoryDeviceInfos(1, AT_MEM_L2, 34000, "Mnist_L2_Memory", 0, 0)
                    m.AT_SetGraphCtrl(AT_GRAPH_PRODUCE_NODE_NAMES, AT_OPT_ON)
                    m.AT_SetGraphCtrl(AT_GRAPH_PRODUCE_OPERINFOS, AT_OPT_ON)
                elif plan == "L3 RAM":
                    m.SetMemoryDeviceInfos(1, AT_MEM_L2, 140000, "Mnist_L2_Memory", 0, 0)
                    m.AT_SetGraphCtrl(AT_GRAPH_L2_STATIC_MEMORY_BUDGET, AT_OPT_VAL(30000))
                    m.AT_SetGraphCtrl(AT_GRAPH_L3_STATIC_MEMORY_BUDGET, AT_OPT_VAL(200000))
                    spec = m._graph_specs["MnistCNN"]  # OutputStep2 executes in L3 RAM
                    a = dataclasses.replace(spec.args["OutputStep2"],
                                            ExecLoc=AT_MemLocation.AT_MEM_L3_DEFAULTRAM)
                    m._graph_specs["MnistCNN"] = dataclasses.replace(
                        spec, args={**spec.args, "OutputStep2": a})
                yield f"warm {warm}, {plan}", m.graph("MnistCNN")
''')


@pytest.mark.slow
def test_the_configurations_cover_every_plan_kind():
    ns = {}
    exec(compile(CONFIGS, "configs", "exec"), ns)
    seen = {}
    for what, g in ns["graphs"]():
        seen[what.split(", ")[1]] = g
    assert not any(layer.streamed for layer in seen["L2"].layers)
    assert "Step2Weights" in seen["flash streams"].layers[1].streamed
    l3 = seen["L3 RAM"]
    assert l3.tensors["OutputStep2"].memory == "L3" and l3.memory["L3"].static > 0
    assert [f.source for f in l3.fetches] == ["L3"]


@pytest.mark.slow
def test_generated_c_has_no_warnings(tmp_path):
    ns = {}
    exec(compile(CONFIGS, "configs", "exec"), ns)
    cc = toolchain.resolve(toolchain.compiler())
    for what, g in ns["graphs"]():
        path = tmp_path / "graph.c"
        path.write_text(g.c_source())
        res = subprocess.run([*cc, "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Wshadow",
                              "-Werror", "-c", str(path), "-o", str(tmp_path / "graph.o")],
                             capture_output=True, text=True, check=False)
        assert res.returncode == 0, f"{what}:\n{res.stderr[-3000:]}"


SANITIZED = CONFIGS + textwrap.dedent('''
    x = ex["digits"](1, seed=9)[0]
    want = None
    for what, g in graphs():
        if what not in ("warm 0, L2", "warm 1, flash streams", "warm 2, L3 RAM",
                        "warm 3, L3 RAM"):
            continue
        if want is None:
            want = np.zeros(10, np.int16)
            g.run("sim", Input0=x, Output0=want)
        c = np.zeros(10, np.int16)
        g.run("c", Input0=x, Output0=c)
        assert c.tobytes() == want.tobytes(), what
    print("sanitized graph runs: ok")
''')


@pytest.mark.slow
def test_graph_c_runs_clean_under_sanitizers():
    try:
        env = sanitizer_env()
    except CompilerError as exc:
        pytest.skip(f"no AddressSanitizer runtime: {exc}")
    res = subprocess.run([sys.executable, "-c", SANITIZED], env=dict(os.environ, **env),
                         capture_output=True, text=True, timeout=900, check=False, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "sanitized graph runs: ok" in res.stdout
    assert "runtime error" not in res.stderr and "AddressSanitizer" not in res.stderr


@pytest.mark.slow
def test_tensors_the_plan_overlaps_share_bytes(tmp_path):
    """Run the graph on a plan that puts OutputStep3 over OutputStep2 while layer 1 reads
    the one and writes the other: both back ends compute something else. The areas are
    real: a planner that overlapped live tensors would be caught by the tests. (With 30,000 B
    of L1 layer 1 writes its first tile of rows before it reads the input of the second; in
    48,000 B it reads every input before it writes.)"""
    ex = runpy.run_path(str(EX))
    ex["write_tensors"](tmp_path, ex["weights"]())
    m = ex["MnistModel"](30000, 300 * 1024, 8 << 20, 20 << 20, const_dir=tmp_path)
    assert m.tiling("Conv5x5ReLUMaxPool2x2_1").spaces["Tile0"].count > 1
    m.AT_SetGraphCtrl(AT_GRAPH_TRACE_EXEC, AT_OPT_OFF)
    g = m.graph("MnistCNN")
    x = ex["digits"](1)[0]
    good = np.zeros(10, np.int16)
    g.run("sim", Input0=x, Output0=good)
    t = g.tensors["OutputStep3"]
    g.tensors = MappingProxyType({**g.tensors, "OutputStep3": dataclasses.replace(t, offset=0)})
    for backend in ("sim", "c"):
        bad = np.zeros(10, np.int16)
        g.run(backend, Input0=x, Output0=bad)
        assert bad.tobytes() != good.tobytes(), backend


CORRUPTED = CONFIGS + textwrap.dedent('''
    import npukit.tiler.graph_c as GC
    for what, g in graphs():
        break  # warm 0, L2
    true_source, true_pieces = GC.c_source, GC.c_pieces
    # Allocate 256 B less dynamic L2 than the plan needs: OutputStep3 ends past it (in the
    # graph's own piece, and in its single unit).
    short = lambda text: text.replace("AT_L2_ALLOC(0, 11264)", "AT_L2_ALLOC(0, 11008)")
    GC.c_source = lambda g: short(true_source(g))
    GC.c_pieces = lambda g: (lambda units, main: (units, short(main)))(*true_pieces(g))
    g.run("c", Input0=ex["digits"](1)[0], Output0=np.zeros(10, np.int16))
    print("not caught")
''')


@pytest.mark.slow
def test_a_dynamic_area_smaller_than_the_plan_is_caught():
    try:
        env = sanitizer_env()
    except CompilerError as exc:
        pytest.skip(f"no AddressSanitizer runtime: {exc}")
    res = subprocess.run([sys.executable, "-c", CORRUPTED], env=dict(os.environ, **env),
                         capture_output=True, text=True, timeout=900, check=False, cwd=ROOT)
    assert res.returncode != 0 and "not caught" not in res.stdout
    assert "ERROR: AddressSanitizer: heap-buffer-overflow" in res.stderr
    assert "Conv5x5ReLUMaxPool2x2_1" in res.stderr  # the layer writing OutputStep3


def _const_maker(dt, ctype, rng):
    def const(name, shape):
        v = rng.standard_normal(shape) if dt == "float32" else rng.integers(-40, 40, shape)
        return TCArgInfo(ctype, name, ARG_SCOPE_GLOBAL, ARG_DIR_CONSTIN, AT_MEM_L3_HFLASH,
                         AT_MEM_UNDEF, ConstInfo(v, 0 if dt == "float32" else 1, 1,
                                                 32 if dt == "float32" else 8, 0))
    return const


def _local_maker(ctype):
    def local(name):
        return TCArgInfo(ctype, name, ARG_SCOPE_LOCAL, ARG_DIR_INOUT, AT_MEM_UNDEF,
                         AT_MEM_UNDEF, 0)
    return local


def float_and_int8_graphs():
    """A float32 and an int8 graph under a tight L2: convolution with average pooling, linear,
    softmax."""
    out = []
    for dt, size, ctype, l2 in (("float32", "float32", "float *", 1000),
                                ("int8", 1, "signed char *", 400)):
        m = Model(target="gap8", l1_budget=1200, l2_budget=l2, l3_budget=1 << 16,
                  l3_flash_budget=1 << 16)
        m.AT_SetGraphCtrl(AT_GRAPH_TRACE_EXEC, AT_OPT_OFF)
        m.LoadCNNLibrary()
        q = (0, 0, 0, 0) if dt == "float32" else (5, 5, 5, 4)
        m.CNN_ConvolutionPoolReLU("C", 0, size, size, size, size, *q, 0, 0, 0, 0, 2, 3, 11, 11,
                                  KOP_CONV_DP, 3, 3, 1, 1, 1, 1, 0, KOP_AVGPOOL, 2, 2, 1, 1, 2,
                                  2, 0, KOP_RELU)
        m.CNN_LinearReLU("L", 0, size, size, size, size, *q, 0, 0, 0, 0, 48, 6, KOP_LINEAR,
                         KOP_NONE)
        m.CNN_SoftMax("S", 0, size, size, q[3], 7, 0, 0, 6, KOP_SOFTMAX)
        rng = np.random.default_rng(1)
        const = _const_maker(dt, ctype, rng)
        local = _local_maker(ctype)
        m.CreateGraph("G", CArgs(
            TCArgInfo(ctype, "In", ARG_SCOPE_ARG, ARG_DIR_IN, AT_MEM_L2, AT_MEM_UNDEF, 0),
            const("W1", (3, 2, 3, 3)), const("B1", 3), const("W2", (6, 48)), const("B2", 6),
            TCArgInfo(ctype, "Out", ARG_SCOPE_ARG, ARG_DIR_OUT, AT_MEM_UNDEF, AT_MEM_L2, 0)),
            CArgs(local("A"), local("Z")))
        m.AddNode("C", Bindings(GNodeArg(GNA_IN, "In", 0), GNodeArg(GNA_IN, "W1", 0),
                                GNodeArg(GNA_IN, "B1", 0), GNodeArg(GNA_OUT, "A", 0)))
        m.AddNode("L", Bindings(GNodeArg(GNA_IN, "A", 0), GNodeArg(GNA_IN, "W2", 0),
                                GNodeArg(GNA_IN, "B2", 0), GNodeArg(GNA_OUT, "Z", 0)))
        m.AddNode("S", Bindings(GNodeArg(GNA_IN, "Z", 0), GNodeArg(GNA_OUT, "Out", 0)))
        m.CloseGraph()
        x = rng.standard_normal((2, 11, 11)) if dt == "float32" else \
            rng.integers(-60, 60, (2, 11, 11))
        out.append((m.graph("G"), x.astype(dt)))
    return out


@pytest.mark.slow
def test_a_runs_pieces_poison_nothing_and_write_the_simulators_bytes():
    """The C a run compiles (in pieces) poisons neither the layers' local tiles nor their
    junk rows, at every call; the graph's single unit (c_source) does, as the simulator. The
    run writes every output element the simulator writes, over a canary, the same bytes: on
    graphs cut into several L1 tiles, the last with junk rows."""
    import npukit.tiler.graph_c as GC

    for g, x in float_and_int8_graphs():
        units, _ = GC.c_pieces(g)
        layers = [text for what, text, _ in units if what.startswith("layer")]
        assert layers and not any("poison, as in the simulator" in t for t in layers)
        assert "poison, as in the simulator" in g.c_source()
        canary = np.array(-7.25e30 if x.dtype == np.float32 else 77, x.dtype)
        outs = {b: np.full(6, canary) for b in ("sim", "c")}
        for backend, out in outs.items():
            g.run(backend, In=x, Out=out)
        assert (outs["sim"] != canary).all()
        assert outs["c"].tobytes() == outs["sim"].tobytes()


@pytest.mark.slow
def test_float_and_int8_graphs(tmp_path):
    cc = toolchain.resolve(toolchain.compiler())
    for g, x in float_and_int8_graphs():
        path = tmp_path / "graph.c"
        path.write_text(g.c_source())
        res = subprocess.run([*cc, "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Wshadow",
                              "-Werror", "-c", str(path), "-o", str(tmp_path / "graph.o")],
                             capture_output=True, text=True, check=False)
        assert res.returncode == 0, res.stderr[-3000:]
        assert any(layer.streamed for layer in g.layers) or g.fetches  # L2 is tight
        outs = [np.zeros(6, x.dtype) for _ in range(2)]
        for backend, out in zip(("sim", "c"), outs):
            g.run(backend, In=x, Out=out)
        assert outs[0].tobytes() == outs[1].tobytes()  # floats too: same operations in order
        total = outs[0].astype(np.float64).sum() / (1 if x.dtype == np.float32 else 2**7)
        assert abs(total - 1) < 0.05
