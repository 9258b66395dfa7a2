"""AutoTiler graphs (the GAP AutoTiler's graph mode): the document's MNIST model ported line by
line reproduces its L2 plan and constructor; its outputs on the simulator and in C are
identical and within the quantisation error bound of a float64 forward pass; random chains
of CNN layers under random budgets equal numpy on both back ends; the vocabulary refuses
what it does not support, with the names and numbers involved."""

from __future__ import annotations

import ctypes
import dataclasses
import json
import re
import runpy
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from test_cnn import conv_layer

from npukit import CapacityError, NpukitError, ShapeError, TilingError
from npukit.c import toolchain
from npukit.tiler import *
from npukit.tiler.planner import Placement

EX = Path(__file__).parent.parent / "examples" / "graph"
DOC_STATIC = {"Step2Weights": (0, 102400), "Step3Weights": (102400, 20480),
              "Step1Weights": (122880, 1600), "Step2Biases": (124480, 128),
              "Step1Biases": (124608, 64), "Step3Biases": (124672, 20)}


@pytest.fixture(scope="module")
def mnist(tmp_path_factory):
    ex = runpy.run_path(str(EX / "mnist.py"))
    folder = tmp_path_factory.mktemp("mnist")
    w = ex["weights"]()
    ex["write_tensors"](folder, w)

    def model(l2=300 * 1024, trace=False, warm=0):
        m = ex["MnistModel"](48000, l2, 8 * 1024 * 1024, 20 * 1024 * 1024, const_dir=folder)
        m.AT_SetGraphCtrl(AT_GRAPH_TRACE_EXEC, AT_OPT_ON if trace else AT_OPT_OFF)
        m.AT_SetGraphCtrl(AT_GRAPH_WARM_CONSTRUCT, AT_OPT_VAL(warm))
        return m

    return ex, w, model


def test_mnist_reproduces_the_documents_l2_plan(mnist):
    _, _, model = mnist
    g = model().graph("MnistCNN")
    assert g.memory["L2"].static == 124692 and g.memory["L2"].dynamic == 11264
    assert {n: (t.offset, t.size) for n, t in g.tensors.items()
            if t.memory == "L2" and t.area == "static"} == DOC_STATIC
    assert g.tensors["Step2Weights"].memory == "L2"
    assert {n: t.memory for n, t in g.tensors.items() if t.kind == "arg"} == \
        {"Input0": "ARG", "Output0": "ARG"}
    locals_ = {n: (t.offset, t.size, t.live) for n, t in g.tensors.items() if t.kind == "local"}
    assert locals_ == {"OutputStep2": (0, 9216, (0, 1)), "OutputStep3": (9216, 2048, (1, 2)),
                       "OutputStep4": (0, 20, (2, 3))}
    assert [layer.name for layer in g.layers] == ["Conv5x5ReLUMaxPool2x2_0",
                                                  "Conv5x5ReLUMaxPool2x2_1",
                                                  "LinearLayerReLU_0", "SoftMax_0"]
    assert g.memory["L1"].dynamic == max(layer.tiling.l1_used for layer in g.layers) <= 48000
    assert g.flash_image()[122880:124480] == g.constants["Step1Weights"].tobytes()


def test_printing_a_graph_shows_each_layers_tiles(mnist):
    _, _, model = mnist
    g = model().graph("MnistCNN")
    text = str(g)
    for layer in g.layers:
        t = layer.tiling
        assert re.search(rf"^  {layer.name} +{t.n_tiles} x {t.tile} +{t.l1_used}$", text,
                         re.M), layer.name


def test_a_graph_tensor_is_the_plans_placement_plus_its_declaration(mnist):
    _, _, model = mnist
    g = model().graph("MnistCNN")
    assert g.tensors.keys() == g.plan.tensors.keys()
    for name, t in g.tensors.items():
        place = {f.name: getattr(t, f.name) for f in dataclasses.fields(Placement)}
        assert Placement(**place) == g.plan.tensors[name]
        assert t.size == t.count * t.dtype.itemsize  # bytes of its elements
    w = g.tensors["Step1Weights"]  # 32 5x5 int16 filters, in L2 at the document's offset
    assert (w.kind, w.ctype, w.dtype, w.count) == ("const", "short int *__restrict__",
                                                   np.dtype("int16"), 800)
    assert (w.memory, w.area, w.offset, w.size) == ("L2", "static", 122880, 1600)


def test_the_constructor_allocates_exactly_them(mnist):
    _, _, model = mnist
    g = model().graph("MnistCNN")
    src = g.c_source()
    assert re.findall(r"AT_L2_ALLOC\(0, (\d+)\)", src) == ["124692", "11264"]
    for name, (off, size) in sorted(DOC_STATIC.items(), key=lambda x: x[1]):
        line = (f"/* Static Moving {name}, size {size} from DefaultFlash at {off} to (size {size}) "
                f"L2 at {off}..{off + size - 1} */")
        assert line in src
    moved = re.findall(r"Static Moving (\w+)", src)
    assert moved == ["Step1Weights", "Step1Biases", "Step2Weights", "Step2Biases",
                     "Step3Weights", "Step3Biases"]  # in the order the layers use them
    lib = ctypes.CDLL(str(toolchain.build(src)))
    lib.MnistCNN_Memory.restype = ctypes.c_int
    got = [lib.MnistCNN_Memory(k) for k in range(6)]
    assert got == [g.memory["L1"].dynamic, 124692, 11264, 0, 0, 0]


@pytest.mark.slow
def test_a_runs_report_saves_a_trace_with_one_span_per_layer(mnist, tmp_path):
    ex, _, model = mnist
    g = model().graph("MnistCNN")
    x = ex["digits"](1, seed=3)[0]
    res = g.run("sim", Input0=x, Output0=np.full(10, -1, np.int16))
    res.report.save_trace(str(tmp_path / "g.json"))
    trace = json.loads((tmp_path / "g.json").read_text())
    rows = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert all({"name", "pid", "tid", "ts", "dur"} <= e.keys() for e in spans)
    layers = [e for e in spans if rows[e["tid"]] == "layers"]
    assert [e["name"] for e in layers] == [layer.name for layer in g.layers]
    assert [e["dur"] for e in layers] == list(res.report.layers.values())
    assert layers[-1]["ts"] + layers[-1]["dur"] <= res.report.cycles
    steps = [e for e in spans if rows[e["tid"]] != "layers"]
    for layer in layers:  # every layer has its own steps inside its span
        inside = [e for e in steps if layer["ts"] <= e["ts"]
                  and e["ts"] + e["dur"] <= layer["ts"] + layer["dur"]]
        assert inside, layer["name"]
    assert sum(1 for e in steps if not any(
        lay["ts"] <= e["ts"] < lay["ts"] + lay["dur"] for lay in layers)) == 0
    pytest.importorskip("matplotlib")
    res.report.save_png(str(tmp_path / "g.png"))
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_mnist_on_both_back_ends_within_the_bound(mnist):
    ex, w, model = mnist
    g = model().graph("MnistCNN")
    bound = ex["error_bound"](w)
    for x in ex["digits"](3, seed=7):
        sim, c = np.full(10, -1, np.int16), np.full(10, -2, np.int16)
        res = g.run("sim", Input0=x, Output0=sim)
        g.run("c", Input0=x, Output0=c)
        assert sim.tobytes() == c.tobytes()
        (a1, a2, z), want = ex["forward"](x, w)
        assert max(a1.max(), a2.max()) < 8 and np.abs(z).max() < 16  # the bound's premise
        assert np.abs(sim / 2**15 - want).max() <= bound
        assert sim.argmax() == want.argmax() and abs(int(sim.sum()) - 2**15) < 20
    assert res.cycles == sum(res.report.layers.values()) > 0
    assert list(res.report.layers) == [layer.name for layer in g.layers]
    assert res.report.bytes_moved["L2"] > 0 and "L3_FLASH" not in res.report.bytes_moved
    assert res.report.construct_cycles > 124692  # the promotions: one byte per cycle


@pytest.mark.slow
@pytest.mark.parametrize("l2", [300 * 1024, 34000])
def test_the_simulator_runs_the_graph_as_one_program(mnist, monkeypatch, l2):
    """g.run("sim") runs Graph.program() on one simulator: the same statements in the same
    order (layers and fetches), with every placed tensor bound to its bytes in memory."""
    from npukit.sim import functional
    ex, _, model = mnist
    g = model(l2=l2).graph("MnistCNN")
    built = []
    init = functional.Machine.__init__

    def record(self, prog, images):
        built.append((prog, images))
        init(self, prog, images)
    monkeypatch.setattr(functional.Machine, "__init__", record)
    g.run("sim", Input0=ex["digits"](1, seed=3)[0], Output0=np.zeros(10, np.int16))
    runs = [(p, i) for p, i in built if p.name == g.name]
    assert len(runs) == 1 and len(built) == 1 + len(g.promoted)  # + the constructor's moves
    prog, images = runs[0]
    want = [(type(st).__name__, st.label) for st, _ in g.program()[0].walk()]
    assert [(type(st).__name__, st.label) for st, _ in prog.walk()] == want
    placed = {b.name for b, _ in prog.params} - {"Input0", "Output0"}
    assert {n.partition("@")[0] for n in placed} == {
        n for n, t in g.tensors.items() if t.memory != "ARG"}
    assert any("@" in n for n in placed) == bool(g.fetches)
    for n in placed:  # each image is a window of the memory areas, not a copy
        assert images[n].base is not None and not images[n].flags.owndata


@pytest.mark.slow
def test_a_compiled_graph_constructs_once_and_owns_its_memories(mnist, tmp_path):
    """g.compile("c") constructs once however often it is called, close() destructs (a later
    call constructs again); two graphs with the same C but other weights each run their own,
    in turn; a direct Construct/Destruct of the same C (the library in the cache) does not
    touch a handle's memories."""
    ex, w, model = mnist
    other = tmp_path / "other"
    other.mkdir()
    w2 = ex["weights"](seed=5)
    ex["write_tensors"](other, w2)
    g1 = model().graph("MnistCNN")
    m2 = ex["MnistModel"](48000, 300 * 1024, 8 << 20, 20 << 20, const_dir=other)
    m2.AT_SetGraphCtrl(AT_GRAPH_TRACE_EXEC, AT_OPT_OFF)
    g2 = m2.graph("MnistCNN")
    assert g1.c_source() == g2.c_source()  # the constants are in the flash file only
    h1, h2 = g1.compile("c"), g2.compile("c")
    assert g1.compile("c") is h1
    constructs = []
    for h in (h1, h2):
        real = h.construct
        h.construct = lambda *a, real=real, h=h: constructs.append(h) or real(*a)
    xs = ex["digits"](3, seed=11)
    shared = ctypes.CDLL(str(toolchain.build(g1.c_source())))
    g2.write(tmp_path / "files")
    shared.npk_host_flash_dir(str(tmp_path / "files").encode())
    for x, h, weights in [(xs[0], h1, w), (xs[1], h1, w), (xs[2], h2, w2), (xs[0], h1, w)]:
        assert shared.MnistCNN_Construct() == 0 and shared.MnistCNN_Destruct() == 0
        g = h.g
        want, got = np.full(10, -3, np.int16), np.full(10, -4, np.int16)
        g.run("sim", Input0=x, Output0=want)
        res = h(Input0=x, Output0=got)
        assert res.outputs["Output0"] is got and got.tobytes() == want.tobytes()
        (_, _, z), ref = ex["forward"](x, weights)
        assert got.argmax() == ref.argmax()
    assert constructs == [h1, h2]  # once each, not per call
    h1.close()
    h1.close()  # closing twice destructs once
    h1(Input0=xs[1], Output0=np.zeros(10, np.int16))
    assert constructs == [h1, h2, h1]
    with pytest.raises(NpukitError, match="compiles for backend 'c', not 'sim'"):
        g1.compile("sim")


@pytest.mark.slow
def test_shrinking_l2_moves_weights_to_l3_and_keeps_the_results(mnist):
    ex, _, model = mnist
    x = ex["digits"](1, seed=3)[0]
    want = np.zeros(10, np.int16)
    model().graph("MnistCNN").run("sim", Input0=x, Output0=want)
    # The second convolution streams filter tiles of every output feature and 4 input
    # features (12,800 B, double buffered) through L2: 34,000 B leave room for them.
    g = model(l2=34000).graph("MnistCNN")
    assert g.tensors["Step2Weights"].memory == "L3_FLASH"
    assert "Step2Weights" in g.layers[1].streamed
    assert [f.tensor for f in g.fetches] == ["Step3Weights"]
    for backend in ("sim", "c"):
        out = np.zeros(10, np.int16)
        res = g.run(backend, Input0=x, Output0=out)
        assert out.tobytes() == want.tobytes()
    assert res.report is None
    report = g.report()
    assert report.bytes_moved["L3_FLASH"] == 102400 + 20480
    with pytest.raises(CapacityError, match=r"Conv5x5ReLUMaxPool2x2_1.* 32128 B of dynamic L2.* "
                                            r"B missing"):
        model(l2=12000).graph("MnistCNN")


@pytest.mark.c_once  # the C prints each layer: run it once
@pytest.mark.slow
def test_trace_prints_each_layer(mnist, capfd):
    ex, _, model = mnist
    g = model(trace=True).graph("MnistCNN")
    x = ex["digits"](1)[0]
    lines = [f"MnistCNN: layer {k} {layer.name}" for k, layer in enumerate(g.layers)]
    for backend in ("sim", "c"):
        g.run(backend, Input0=x, Output0=np.zeros(10, np.int16))
        assert capfd.readouterr().out.splitlines() == lines


def _signatures(src: str) -> list[str]:
    return [" ".join(s.split()) for s in re.findall(r"^int MnistCNN\w*\([^)]*\)", src, re.M)]


@pytest.mark.slow
def test_warm_constructors(mnist, tmp_path):
    ex, _, model = mnist
    x = ex["digits"](1, seed=4)[0]
    want = np.zeros(10, np.int16)
    model().graph("MnistCNN").run("sim", Input0=x, Output0=want)
    sigs = {
        0: ["int MnistCNN_Construct(void)", "int MnistCNN_Destruct(void)"],
        1: ["int MnistCNN_Construct(int Warm)", "int MnistCNN_Destruct(int Warm)"],
        3: ["int MnistCNN_Construct(int DoL1Alloc, int DoL2Alloc, int DoL2DynAlloc, "
            "int DoL3Init, int DoL3Alloc, int DoPromotion)",
            "int MnistCNN_Destruct(int DoL1Dealloc, int DoL2Dealloc, int DoL2DynDealloc, "
            "int DoL3Dealloc, int DoL3DeInit)"]}
    for warm in (0, 1, 2, 3):
        g = model(warm=warm).graph("MnistCNN")
        src = g.c_source()
        s = _signatures(src)
        assert s[:2] == sigs.get(warm, sigs[1])
        runner = "void * _L1_Memory)" if warm == 3 else "Output0)"
        assert s[2].startswith("int MnistCNN( short int *__restrict__ Input0") and \
            s[2].endswith(runner)
        # WARM_L1 allocates static and dynamic L2 as one block (124692 + 11264).
        allocs = re.findall(r"AT_L2_ALLOC\(0, (\d+)\)", src)
        assert allocs == (["135956"] if warm == 1 else ["11264", "124692", "11264"]
                          if warm == 2 else ["124692", "11264"])
        out = np.zeros(10, np.int16)
        g.run("c", Input0=x, Output0=out)
        assert out.tobytes() == want.tobytes()
    # On the host: construct once, then warm destruct / construct of L1 (and dynamic L2).
    g = model(warm=2).graph("MnistCNN")
    lib = ctypes.CDLL(str(toolchain.build(g.c_source())))
    g.write(tmp_path)
    lib.npk_host_flash_dir(str(tmp_path).encode())
    lib.MnistCNN.argtypes = [ctypes.c_void_p] * 2
    out = np.zeros(10, np.int16)
    assert lib.MnistCNN_Construct(0) == 0
    for warm in (1, 2):
        out[...] = 0
        assert lib.MnistCNN(x.ctypes.data, out.ctypes.data) == 0
        assert out.tobytes() == want.tobytes()
        assert lib.MnistCNN_Destruct(warm) == 0 and lib.MnistCNN_Construct(warm) == 0
    assert lib.MnistCNN_Destruct(0) == 0


@pytest.mark.slow
def test_node_names_and_operations(mnist):
    _, _, model = mnist
    m = model()
    m.AT_SetGraphCtrl(AT_GRAPH_PRODUCE_NODE_NAMES, AT_OPT_ON)
    m.AT_SetGraphCtrl(AT_GRAPH_PRODUCE_OPERINFOS, AT_OPT_ON)
    m.AT_SetGraphCtrl(AT_GRAPH_PRODUCE_OPERINFOS_CVAR_NAME, AT_OPT_VAL("MnistOperCount"))
    lib = ctypes.CDLL(str(toolchain.build(m.graph("MnistCNN").c_source())))
    names = (ctypes.c_char_p * 4).in_dll(lib, "AT_GraphNodeNames")
    ops = (ctypes.c_uint * 4).in_dll(lib, "MnistOperCount")
    assert [n.decode() for n in names][:2] == ["Conv5x5ReLUMaxPool2x2_0", "Conv5x5ReLUMaxPool2x2_1"]
    assert list(ops) == [24 * 24 * 25 * 32 + 32 * 12 * 12 * 4, 8 * 8 * 25 * 32 * 64 + 64 * 16 * 4,
                         10240, 10]


@pytest.mark.slow
def test_reordering_constants_changes_nothing(mnist):
    """MnistModel.c sets AT_GRAPH_REORDER_CONSTANT_IN: it lays constants out tile by tile
    (1-D transfers). npukit keeps them row-major and counts a transfer's bytes, not its rows,
    so ON and OFF give the same flash image, plan, C, cycles and outputs."""
    ex, _, model = mnist
    x = ex["digits"](1, seed=5)[0]
    graphs, outs = [], []
    for val in (AT_OPT_ON, AT_OPT_OFF):
        m = model()
        m.AT_SetGraphCtrl(AT_GRAPH_REORDER_CONSTANT_IN, val)
        g = m.graph("MnistCNN")
        out = np.zeros(10, np.int16)
        g.run("sim", Input0=x, Output0=out)
        graphs.append(g)
        outs.append(out)
    on, off = graphs
    assert on.flash_image() == off.flash_image() and dict(on.tensors) == dict(off.tensors)
    assert on.c_source() == off.c_source() and on.report().cycles == off.report().cycles
    assert outs[0].tobytes() == outs[1].tobytes() and len(np.unique(outs[0])) > 5


def test_constants_can_execute_from_flash(mnist):
    ex, _, model = mnist
    m = model()
    m.AT_SetGraphCtrl(AT_GRAPH_CONST_EXEC_FROM_FLASH, AT_OPT_ON)
    g = m.graph("MnistCNN")
    assert g.memory["L2"].static == 0 and g.fetches == ()
    assert all(g.tensors[t].memory == "L3_FLASH" for t in DOC_STATIC)
    assert g.layers[1].streamed == {"Step2Weights", "Step2Biases"}
    assert "Static Moving" not in g.c_source()


def test_a_model_from_the_four_budgets():
    m = Model.from_budgets(48000, 300 * 1024, 8 * 1024 * 1024, 20 * 1024 * 1024)
    assert (m.l1_budget, m.l2_budget, m.l3_budget, m.l3_flash_budget) == \
        (48000, 307200, 8388608, 20971520)


@pytest.mark.slow
def test_preferred_l3_devices_name_the_generated_code(mnist):
    ex, _, model = mnist
    m = model(l2=34000)
    m.AT_SetGraphCtrl(AT_GRAPH_PREF_L3_HOME, AT_MEM_L3_HFLASH)
    g = m.graph("MnistCNN")
    src = g.c_source()
    assert "AT_HYPERFLASH_FS_OPEN(&HyperFlash" in src and "DefaultFlash" not in src
    x = ex["digits"](1)[0]
    outs = [np.zeros(10, np.int16) for _ in range(2)]
    for backend, out in zip(("sim", "c"), outs):
        g.run(backend, Input0=x, Output0=out)
    assert outs[0].tobytes() == outs[1].tobytes()


def test_generated_files(mnist, tmp_path):
    _, _, model = mnist
    m = model()
    c_path, flash = m.GenerateTilingCode(tmp_path)
    assert c_path.name == "MnistKernels.c" and flash.name == "Mnist_L3_Flash_Const.dat"
    g = m.graph("MnistCNN")
    assert flash.read_bytes() == g.flash_image() and c_path.read_text() == g.c_source()
    assert len(g.flash_image()) == 124692


# -- random chains of layers, both back ends -------------------------------------------------

@st.composite
def chains(draw):
    dt = draw(st.sampled_from(["int16", "int8"]))
    n = draw(st.integers(1, 3))
    feats = [draw(st.integers(1, 3)) for _ in range(n + 1)]
    size = draw(st.integers(8, 16))
    layers = []
    for k in range(n):
        f = draw(st.integers(1, 3))
        pool = draw(st.sampled_from([KOP_NONE, KOP_MAXPOOL]))
        layers.append(dict(dt=dt, dp=draw(st.booleans()), pad=draw(st.booleans()), S=1, D=1,
                           F=f, pool=pool, pf=2, ps=2, ppad=False, act=KOP_RELU,
                           nip=feats[k], nop=feats[k + 1], Q=(6, 6, 6, 6) if dt == "int16"
                           else (3, 3, 3, 3)))
    return dict(dt=dt, layers=layers, size=size, l1=draw(st.integers(500, 4000)),
                in_l3=[draw(st.booleans()) for _ in range(n)],
                l2=draw(st.integers(300, 3000)), seed=draw(st.integers(0, 1000)),
                promote=draw(st.booleans()))


def chain_graph(c):
    """A chain of convolutions as a graph; returns (model, input, weights, shapes)."""
    m = Model(target="gap8", l1_budget=c["l1"], l2_budget=c["l2"], l3_budget=1 << 20,
              l3_flash_budget=1 << 20)
    m.LoadCNNLibrary()
    m.AT_SetGraphCtrl(AT_GRAPH_TRACE_EXEC, AT_OPT_OFF)
    if not c["promote"]:
        m.AT_SetGraphCtrl(AT_GRAPH_DISABLE_CONST_L2_PROMOTION, AT_OPT_ON)
    rng = np.random.default_rng(c["seed"])
    dt, h = np.dtype(c["dt"]), c["size"]
    lim = 60 if dt == np.int8 else 1500
    ctype = "signed char *" if dt == np.int8 else "short int *"
    consts, locals_, nodes = [], [], []
    x = rng.integers(-lim, lim, (c["layers"][0]["nip"], h, h)).astype(dt)
    weights = []
    for k, L in enumerate(c["layers"]):
        L = dict(L, H=h, W=h)
        size = dt.itemsize
        m.CNN_ConvolutionPoolReLU(f"L{k}", 0, size, size, size, size, *L["Q"], 0, 0, 0, 0,
                                  L["nip"], L["nop"], h, h,
                                  KOP_CONV_DP if L["dp"] else KOP_CONV, L["F"], L["F"], 1, 1, 1,
                                  1, int(L["pad"]), L["pool"], 2, 2, 1, 1, 2, 2, 0, L["act"])
        w = rng.integers(-lim // 4, lim // 4, (L["nop"], L["nip"], L["F"], L["F"])).astype(dt)
        b = rng.integers(-lim, lim, L["nop"]).astype(dt)
        weights.append((w, b, L))
        consts += [TCArgInfo(ctype, f"W{k}", ARG_SCOPE_GLOBAL, ARG_DIR_CONSTIN, AT_MEM_L3_HFLASH,
                             AT_MEM_UNDEF, ConstInfo(w, 1, 1, 8 * size, 0)),
                   TCArgInfo(ctype, f"B{k}", ARG_SCOPE_GLOBAL, ARG_DIR_CONSTIN, AT_MEM_L3_HFLASH,
                             AT_MEM_UNDEF, ConstInfo(b, 1, 1, 8 * size, 0))]
        src = "In" if k == 0 else f"A{k - 1}"
        dst = "Out" if k == len(c["layers"]) - 1 else f"A{k}"
        if dst != "Out":  # some activations are put in L3 RAM by their execution location
            exec_loc = AT_MEM_L3_DEFAULTRAM if c["in_l3"][k] else AT_MEM_UNDEF
            locals_.append(TCArgInfo(ctype, dst, ARG_SCOPE_LOCAL, ARG_DIR_INOUT, AT_MEM_UNDEF,
                                     exec_loc, 0))
        nodes.append((f"L{k}", Bindings(4, GNodeArg(GNA_IN, src, 0), GNodeArg(GNA_IN, f"W{k}", 0),
                                        GNodeArg(GNA_IN, f"B{k}", 0), GNodeArg(GNA_OUT, dst, 0))))
        h = conv_layer(np.zeros((L["nip"], h, h), dt), w, b, L).shape[-1]
    m.CreateGraph("Chain",
                  CArgs(TCArgInfo(ctype, "In", ARG_SCOPE_ARG, ARG_DIR_IN, AT_MEM_L2, AT_MEM_UNDEF,
                                  0), *consts,
                        TCArgInfo(ctype, "Out", ARG_SCOPE_ARG, ARG_DIR_OUT, AT_MEM_UNDEF,
                                  AT_MEM_L2, 0)),
                  CArgs(*locals_))
    for name, binds in nodes:
        m.AddNode(name, binds)
    m.CloseGraph()
    return m, x, weights


@settings(max_examples=16, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(chains())
@pytest.mark.slow
def test_random_chains_equal_numpy_on_both_back_ends(c):
    try:
        m, x, weights = chain_graph(c)
        g = m.graph("Chain")
    except CapacityError:
        # Refused: a smaller L2 budget is refused too.
        m, _, _ = chain_graph(dict(c, l2=c["l2"] // 2))
        with pytest.raises(CapacityError):
            m.graph("Chain")
        assume(False)
    except TilingError:
        assume(False)
    want = x
    for w, b, L in weights:
        want = conv_layer(want, w, b, dict(L, H=want.shape[1], W=want.shape[2]))
    assert g.memory["L2"].total <= c["l2"] and g.memory["L1"].dynamic <= c["l1"]
    event(f"streams from L3: {any(layer.streamed for layer in g.layers)}")
    event(f"activations in L3: {any(t.memory == 'L3' for t in g.tensors.values())}")
    event(f"fetches: {bool(g.fetches)}")
    for backend in ("sim", "c"):
        out = np.full(want.shape, 99, np.dtype(c["dt"]))
        g.run(backend, In=x, Out=out)
        assert np.array_equal(out, want), backend


# -- errors --------------------------------------------------------------------------------

def small_model():
    m = Model(target="gap8")
    m.LoadCNNLibrary()
    m.CNN_LinearReLU("Lin", 0, 2, 2, 2, 2, 12, 12, 12, 12, 0, 0, 0, 0, 8, 4, KOP_LINEAR,
                     KOP_NONE)
    return m


ARGS = dict(
    In=TCArgInfo("short int *", "In", ARG_SCOPE_ARG, ARG_DIR_IN, AT_MEM_L2, AT_MEM_UNDEF, 0),
    W=TCArgInfo("short int *", "W", ARG_SCOPE_GLOBAL, ARG_DIR_CONSTIN, AT_MEM_L3_HFLASH,
                AT_MEM_UNDEF, ConstInfo(np.full((4, 8), 4096, np.int16), 1, 1, 16, 0)),
    B=TCArgInfo("short int *", "B", ARG_SCOPE_GLOBAL, ARG_DIR_CONSTIN, AT_MEM_L3_HFLASH,
                AT_MEM_UNDEF, ConstInfo(np.zeros(4), 0, 1, 16, 12)),
    Out=TCArgInfo("short int *", "Out", ARG_SCOPE_ARG, ARG_DIR_OUT, AT_MEM_UNDEF, AT_MEM_L2, 0))


def bind(*pairs):
    return Bindings(*(GNodeArg(t, n, 0) for t, n in pairs))


def test_a_small_graph_runs():
    m = small_model()
    m.CreateGraph("G", CArgs(4, *ARGS.values()))
    m.AddNode("Lin", bind((GNA_IN, "In"), (GNA_IN, "W"), (GNA_IN, "B"), (GNA_OUT, "Out")))
    m.CloseGraph()
    g = m.graph("G")
    x = np.arange(8, dtype=np.int16) * 100
    for backend in ("sim", "c"):
        out = np.zeros((2, 2), np.int16)  # any shape with the right element count
        g.run(backend, In=x, Out=out)
        assert (out.reshape(-1) == x.sum()).all()
    with pytest.raises(ShapeError, match="'In'.*int32"):
        g.run("sim", In=x.astype(np.int32), Out=np.zeros(4, np.int16))
    with pytest.raises(ShapeError, match="missing arrays \\['Out'\\]"):
        g.run("sim", In=x)


@pytest.mark.parametrize("step,message", [
    (lambda m: m.AT_SetGraphCtrl(AT_GRAPH_DUMP_TENSOR, AT_OPT_ON),
     "AT_GRAPH_DUMP_TENSOR is not supported"),
    (lambda m: m.AT_SetGraphCtrl(AT_GRAPH_WARM_CONSTRUCT, AT_OPT_VAL(4)), "0..3"),
    (lambda m: m.AT_SetGraphCtrl(AT_GRAPH_PREF_L3_HOME, AT_MEM_L3_HRAM), "flash"),
    (lambda m: m.SetMemoryDeviceInfos(2, AT_MEM_L1, 100, "L1", 0, 0), "10 values"),
    (lambda m: m.SetMemoryDeviceInfos(1, AT_MEM_L2, 100, "L2 mem", 0, 0), "C identifier"),
    (lambda m: m.CreateGraph("1G", CArgs(ARGS["In"])), "is not a C identifier"),
    (lambda m: m.CreateGraph("G", CArgs(ARGS["In"], ARGS["In"])), "declared twice"),
    (lambda m: m.AddNode("Lin", ()), "no graph is open"),
    (lambda m: m.CloseGraph(), "no graph is open"),
    (lambda m: m.graph("Nope"), "no graph 'Nope'"),
])
def test_model_level_errors(step, message):
    with pytest.raises(TilingError, match=message):
        step(small_model())


@pytest.mark.parametrize("binds,message", [
    ([(GNA_IN, "In"), (GNA_IN, "W"), (GNA_IN, "B")], "takes 4 C arguments"),
    ([(GNA_IN, "In"), (GNA_IN, "W"), (GNA_IN, "X"), (GNA_OUT, "Out")], "'X', which is not"),
    ([(GNA_OUT, "In"), (GNA_IN, "W"), (GNA_IN, "B"), (GNA_OUT, "Out")], "bind it with GNA_IN"),
    ([(GNA_IN, "In"), (GNA_IN, "W"), (GNA_IN, "B"), (GNA_IN, "Out")], "bind it with GNA_OUT"),
    ([(GNA_IN, "In"), (GNA_IN, "W"), (GNA_IN, "B"), (GNA_OUT, "W")], "writes 'W'"),
    ([(GNA_IN, "Out"), (GNA_IN, "W"), (GNA_IN, "B"), (GNA_OUT, "Out")], "reads 'Out'"),
])
def test_add_node_errors(binds, message):
    m = small_model()
    m.CreateGraph("G", CArgs(4, *ARGS.values()))
    with pytest.raises(TilingError, match=message):
        m.AddNode("Lin", bind(*binds))


def test_close_and_plan_errors(tmp_path):
    m = small_model()
    m.CNN_LinearReLU("Lin2", 0, 2, 2, 2, 2, 12, 12, 12, 12, 0, 0, 0, 0, 4, 4, KOP_LINEAR,
                     KOP_NONE)
    loc = TCArgInfo("short int *", "T", ARG_SCOPE_LOCAL, ARG_DIR_INOUT, AT_MEM_UNDEF,
                    AT_MEM_UNDEF, 0)
    m.CreateGraph("G", CArgs(4, *ARGS.values()), CArgs(1, loc))
    m.AddNode("Lin2", bind((GNA_IN, "T"), (GNA_IN, "W"), (GNA_IN, "B"), (GNA_OUT, "Out")))
    with pytest.raises(TilingError, match="reads local 'T' before any node writes it"):
        m.CloseGraph()

    def graph(w_source, budget=None):
        m = small_model()
        if budget:
            m.SetMemoryDeviceInfos(1, AT_MEM_L2, budget, "L2_Memory", 0, 0)
        m.SetConstDir(str(tmp_path))
        w = TCArgInfo("short int *", "W", ARG_SCOPE_GLOBAL, ARG_DIR_CONSTIN, AT_MEM_L3_HFLASH,
                      AT_MEM_UNDEF, w_source)
        m.CreateGraph("G", CArgs(4, ARGS["In"], w, ARGS["B"], ARGS["Out"]))
        m.AddNode("Lin", bind((GNA_IN, "In"), (GNA_IN, "W"), (GNA_IN, "B"), (GNA_OUT, "Out")))
        m.CloseGraph()
        return m.graph("G")

    with pytest.raises(TilingError, match="cannot read .*missing.tensor"):
        graph(ConstInfo("missing.tensor", 1, 1, 16, 0))
    (tmp_path / "w.tensor").write_bytes(np.ones(31, "<i2").tobytes())
    with pytest.raises(TilingError, match="31 values but the tensor has 32"):
        graph(ConstInfo("w.tensor", 1, 1, 16, 0))
    (tmp_path / "w.txt").write_text("0.5, -1.25\n" * 16)
    g = graph(ConstInfo("w.txt", 0, 0, 16, 4))  # floats in Q4
    assert g.constants["W"][:2].tolist() == [8, -20]
    with pytest.raises(TilingError, match="does not fit int16 in Q14"):
        graph(ConstInfo(np.full(32, 2.5), 0, 1, 16, 14))
    with pytest.raises(TilingError, match="not integers"):
        graph(ConstInfo(np.full(32, 2.5), 1, 1, 16, 0))
    with pytest.raises(TilingError, match="Size 8 bits but the tensor is int16"):
        graph(ConstInfo(np.ones(32), 1, 1, 8, 0))
    with pytest.raises(CapacityError, match="'Lin'.* B missing"):
        graph(ConstInfo(np.ones(32), 1, 1, 16, 0), budget=40)


def test_the_docs_code_runs(tmp_path, monkeypatch):
    text = (Path(__file__).parent.parent / "docs" / "graph.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)  # the page's blocks run in order and write files
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "docs/graph.md", "exec"), namespace)


@pytest.mark.parametrize("size, match", [(48000.5, "must be an integer"), (True, "integer"),
                                         ("48000", "integer"), (-1, r"must be in \[0")])
def test_memory_device_sizes_are_whole_numbers(size, match):
    m = Model(target="gap8")
    with pytest.raises(TilingError, match=match):
        m.SetMemoryDeviceInfos(1, AT_MEM_L1, size, "L1_Memory", 0, 0)


def test_memory_device_locations_are_named():
    with pytest.raises(TilingError, match="none of"):
        Model(target="gap8").SetMemoryDeviceInfos(1, 999, 48000, "L1_Memory", 0, 0)


def _mnist_layers(keywords: bool) -> Model:
    """The MNIST example's four user kernels, by GAP's argument names or by position."""
    m = Model(target="gap8", l1_budget=48000)
    m.LoadCNNLibrary()
    sizes = (2, 2, 2, 2)
    if not keywords:
        m.CNN_ConvolutionPoolReLU("C", 0, *sizes, 12, 14, 14, 12, 1, 1, 1, 1, 32, 64, 12, 12,
                                  KOP_CONV_DP, 5, 5, 1, 1, 1, 1, 0,
                                  KOP_MAXPOOL, 2, 2, 1, 1, 2, 2, 0, KOP_RELU)
        m.CNN_LinearReLU("L", 0, *sizes, 12, 12, 8, 11, 2, 2, 2, 2, 1024, 10, KOP_LINEAR,
                         KOP_NONE)
        m.CNN_SoftMax("S", 0, 2, 2, 15, 15, 1, 1, 10, KOP_SOFTMAX)
        return m
    m.CNN_ConvolutionPoolReLU(
        Name="C", Ctrl=0, In_DataSize=2, Filter_DataSize=2, Bias_DataSize=2, Out_DataSize=2,
        In_Q=12, Filter_Q=14, Bias_Q=14, Out_Q=12, In_InL3=1, Filter_InL3=1, Bias_InL3=1,
        Out_InL3=1, InFeat=32, OutFeat=64, Width=12, Height=12,
        ConvOper=KOP_CONV_DP, Fcx=5, Fcy=5, Dcx=1, Dcy=1, Scx=1, Scy=1, ConvPad=0,
        PoolOper=KOP_MAXPOOL, Fpx=2, Fpy=2, Dpx=1, Dpy=1, Spx=2, Spy=2, PoolPad=0,
        ReLUOper=KOP_RELU)
    m.CNN_LinearReLU(Name="L", Ctrl=0, In_DataSize=2, Filter_DataSize=2, Bias_DataSize=2,
                     Out_DataSize=2, In_Q=12, Filter_Q=12, Bias_Q=8, Out_Q=11, In_InL3=2,
                     Filter_InL3=2, Bias_InL3=2, Out_InL3=2, InDim=1024, OutDim=10,
                     LinearOper=KOP_LINEAR, ReLUOper=KOP_NONE)
    m.CNN_SoftMax(Name="S", Ctrl=0, In_DataSize=2, Out_DataSize=2, In_Q=15, Out_Q=15,
                  In_InL3=1, Out_InL3=1, Dim=10, SoftMaxOper=KOP_SOFTMAX)
    return m


def test_generators_take_gaps_argument_names():
    by_name, by_position = _mnist_layers(True), _mnist_layers(False)
    for kernel in ("C", "L", "S"):
        assert by_name.tiling(kernel) == by_position.tiling(kernel)
        assert by_name.program(kernel) == by_position.program(kernel)
    with pytest.raises(TypeError, match="Fcz"):
        by_name.CNN_SoftMax(Name="X", Ctrl=0, In_DataSize=2, Out_DataSize=2, In_Q=15, Out_Q=15,
                            In_InL3=1, Out_InL3=1, Dim=10, SoftMaxOper=KOP_SOFTMAX, Fcz=3)
