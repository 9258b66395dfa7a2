"""A graph's host C compiled in pieces (``npukit.c.pieces``): a unit per layer, per basic-kernel
source and for the threads runtime, compiled apart (in parallel, cached by content), then
linked with the graph's own unit. Checked against ONNX Runtime and against the graph's single
unit (bit for bit); the compiles counted through ``toolchain.run_compiler``."""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from onnx_helpers import model, node

import npukit.onnx
from npukit import CompilerError
from npukit.c import cache, pieces, toolchain
from npukit.c.calls import prelude
from npukit.c.pieces import (
    declarations_only,
    interface_only,
    kernel_units,
    split_source,
)
from npukit.onnx.check import ort_run

BUDGETS = dict(l1_budget=48000, l2_budget=256 * 1024, l3_budget=8 << 20,
               l3_flash_budget=8 << 20)


def conv_net(size: int = 12, classes: int = 10, seed: int = 0):
    """Conv 3x3 + Relu, Conv 1x1, a residual Add, MaxPool, global average, Gemm."""
    rng = np.random.default_rng(seed)
    inits = {"w1": rng.normal(size=(8, 3, 3, 3)).astype(np.float32) * 0.3,
             "b1": rng.normal(size=8).astype(np.float32) * 0.1,
             "w2": rng.normal(size=(8, 8, 1, 1)).astype(np.float32) * 0.3,
             "b2": rng.normal(size=8).astype(np.float32) * 0.1,
             "fw": rng.normal(size=(classes, 8)).astype(np.float32) * 0.3,
             "fb": rng.normal(size=classes).astype(np.float32) * 0.1}
    nodes = [node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1] * 4),
             node("Relu", ["c1"], ["r1"]),
             node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[1, 1]),
             node("Add", ["c2", "r1"], ["a"]),
             node("MaxPool", ["a"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             node("GlobalAveragePool", ["p"], ["g"]),
             node("Flatten", ["g"], ["f"]),
             node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)]
    x = rng.normal(size=(1, 3, size, size)).astype(np.float32)
    return model(nodes, {"x": x}, ["y"], inits), {"x": x}


def dense_net(hidden: int = 24, classes: int = 10, depth: int = 6, seed: int = 1):
    """``depth`` Gemm layers, a Relu after each but the last: no convolution (small basic
    kernels, quick to compile in an empty cache); six layers make two pieces (npukit.tiler.
    graph_c groups layers by their names' hashes: L0..L4, then L5)."""
    rng = np.random.default_rng(seed)
    nodes, inits, x, width = [], {}, "x", 16
    for k in range(depth):
        out = hidden if k < depth - 1 else classes
        inits[f"w{k}"] = rng.normal(size=(out, width)).astype(np.float32) * 0.3
        inits[f"b{k}"] = rng.normal(size=out).astype(np.float32) * 0.1
        y = f"h{k}" if k < depth - 1 else "y"
        nodes.append(node("Gemm", [x, f"w{k}", f"b{k}"], [y], transB=1))
        if k < depth - 1:
            nodes.append(node("Relu", [y], [f"r{k}"]))
            x, width = f"r{k}", hidden
    x0 = rng.normal(size=(2, 16)).astype(np.float32)
    return model(nodes, {"x": x0}, ["y"], inits), {"x": x0}


@pytest.fixture
def compiles(monkeypatch):
    """The files each compile of this test compiled (a piece's ``objects/<key>.c``, or the
    graph's own unit, linked with the pieces)."""
    done: list[str] = []
    run = toolchain.run_compiler

    def counting(cmd):
        done.append(cmd[-1])
        return run(cmd)

    monkeypatch.setattr(toolchain, "run_compiler", counting)
    return done


@pytest.fixture
def no_single_unit(monkeypatch):
    """The graph's single unit never built: a piece that fails fails the test."""
    def refuse(*args, **kw):
        raise AssertionError("the pieces did not build: the single unit was compiled")

    monkeypatch.setattr(toolchain, "library", refuse)


def _pieces_of(files: list[str]) -> list[str]:
    return [f for f in files if Path(f).parent.name == "objects"]


def test_pieces_match_onnx_runtime_and_the_single_unit(monkeypatch, no_single_unit):
    m, inputs = conv_net()
    ref, _ = ort_run(m, inputs)
    got = npukit.onnx.load(m, **BUDGETS).run("c", **inputs).outputs["y"]
    assert np.all(np.isfinite(got)) and np.abs(got).max() > 0
    np.testing.assert_allclose(got, ref["y"], rtol=1e-4, atol=1e-4 * np.abs(ref["y"]).max())
    # The same graph through its single unit (the pieces refused): the same bits.
    monkeypatch.undo()
    def refuse(*args, **kw):
        raise CompilerError("the pieces refused by the test")

    monkeypatch.setattr(toolchain, "library_in_pieces", refuse)
    with pytest.warns(RuntimeWarning, match="compiled as one unit instead.*refused by the test"):
        single = npukit.onnx.load(m, **BUDGETS).run("c", **inputs).outputs["y"]
    assert single.tobytes() == got.tobytes()


def test_a_changed_layer_compiles_only_its_piece(tmp_path, monkeypatch, compiles,
                                                 no_single_unit):
    monkeypatch.setenv("NPUKIT_CACHE_DIR", str(tmp_path))
    m, inputs = dense_net(classes=10)
    first = npukit.onnx.load(m, **BUDGETS)
    first.run("c", **inputs)
    layers = first.host_graph().layers
    first_pieces = _pieces_of(compiles)
    # two pieces of layers, the basic kernels' units, the runtime, then the graph's unit
    # (the link)
    assert len(layers) == 6 and len(first_pieces) >= 2 + 2
    assert len(compiles) == len(first_pieces) + 1
    # The same model again: the shared object from the cache, no compiler run.
    compiles.clear()
    again = npukit.onnx.load(m, **BUDGETS).run("c", **inputs).outputs["y"]
    assert compiles == []
    # The last layer changed (12 classes): its piece and the graph's unit, nothing else.
    m12, _ = dense_net(classes=12)
    g12 = npukit.onnx.load(m12, **BUDGETS)
    got = g12.run("c", **inputs).outputs["y"]
    pieces = _pieces_of(compiles)
    assert len(pieces) == 1 and len(compiles) == 2, compiles
    text = Path(pieces[0]).read_text()
    assert f"kernel `{layers[-1].name}`" in text and f"kernel `{layers[0].name}`" not in text
    ref, _ = ort_run(m12, inputs)
    np.testing.assert_allclose(got, ref["y"], rtol=1e-4, atol=1e-5)
    assert again.shape == (2, 10) and np.abs(again).max() > 0
    # npukit cache info counts the pieces; clear removes them with the entries.
    got = cache.info(tmp_path)
    assert got["entries"] == 2 and got["objects"] == len(set(_pieces_of(compiles) + first_pieces))
    assert got["unused_bytes"] == 0 and not got["failing"]
    cache.clear(tmp_path)
    assert list((tmp_path / "objects").iterdir()) == [] and cache.info(tmp_path)["bytes"] == 0


def test_a_compile_error_names_the_piece_and_its_file(tmp_path, monkeypatch):
    monkeypatch.setenv("NPUKIT_CACHE_DIR", str(tmp_path))
    with pytest.raises(CompilerError) as err:
        toolchain.build_pieces([("layer 7 (Broken)", "void Broken(void) { this is not C }")],
                               "int npk_main;")
    text = str(err.value)
    assert "layer 7 (Broken)" in text and str(tmp_path / "objects") in text and ".c" in text


def test_a_compile_timeout_names_the_file_and_is_not_retried(tmp_path, monkeypatch, compiles):
    monkeypatch.setenv("NPUKIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(toolchain, "COMPILE_TIMEOUT", 0.001)
    m, inputs = dense_net()
    g = npukit.onnx.load(m, **BUDGETS)
    with pytest.raises(toolchain.CompileTimeoutError) as err:
        g.run("c", **inputs)
    assert isinstance(err.value, CompilerError)
    assert "ran past 0.001 s compiling" in str(err.value)
    assert str(tmp_path / "objects") in str(err.value)
    assert all(Path(f).parent.name == "objects" for f in compiles)  # no single unit after


def test_declarations_only_keeps_all_but_external_bodies():
    source = textwrap.dedent("""\
        #define INIT { 0, 1 }
        typedef struct { int A; /* } */ } T;
        static const int Table[2] = INIT;
        int Counts[2] = { 3, 4 };
        static inline int helper(int x) { return x + 1; }
        /* void Commented(void) { } */
        void Kernel(T *Arg) __attribute__((noinline))
        {
            const char *s = "} {";
            if (Arg->A) { Arg->A = helper(Table[0]) + s[0]; }
        }
        static void Private(void) { }
        int Other(int a,
                  int b) { return a + b; }
        """)
    got = declarations_only(source)
    assert "void Kernel(T *Arg) __attribute__((noinline))\n;" in got
    assert "int Other(int a,\n          int b) ;" in got
    assert "if (Arg" not in got and "return a + b" not in got
    for kept in ("#define INIT { 0, 1 }", "typedef struct { int A; /* } */ } T;",
                 "static const int Table[2] = INIT;", "int Counts[2] = { 3, 4 };",
                 "static inline int helper(int x) { return x + 1; }",
                 "/* void Commented(void) { } */", "static void Private(void) { }"):
        assert kept in got


@pytest.mark.parametrize("alone", [1, pieces.ALONE])
def test_a_kernel_two_sources_define_under_one_guard_is_linked_once(tmp_path, monkeypatch,
                                                                    alone):
    """Basic-kernel sources may share a guarded block (npukit's layer kernels share their
    helpers and output stages so): each piece sees the sources before it, as the single
    unit does, and the function is defined in one object only; short sources share a
    unit (alone=ALONE), long ones have their own (alone=1)."""
    monkeypatch.setenv("NPUKIT_CACHE_DIR", str(tmp_path))
    guarded = ("#ifndef NPK_TEST_SHARED\n#define NPK_TEST_SHARED\n"
               "int npk_test_twice(int x) { return 2 * x; }\n#endif\n")
    first = guarded + "int KA(int x) { return npk_test_twice(x) + 1; }\n"
    second = guarded + "int KB(int x) { return npk_test_twice(x) + 20; }\n"
    monkeypatch.setattr(pieces, "ALONE", alone)
    units = kernel_units([[first], [second, first]], prelude(2))
    if alone == 1:
        assert len(units) == 2 and "KB" in units[0][0] and "KA" in units[1][0]  # longest first
    else:
        assert len(units) == 1 and "KA" in units[0][0] and "KB" in units[0][0]
    main = "int KA(int); int KB(int);\nint npk_test_sum(int x) { return KA(x) + KB(x); }\n"
    lib = toolchain.library_in_pieces(units, main)
    lib.npk_test_sum.restype, lib.npk_test_sum.argtypes = ctypes.c_int, [ctypes.c_int]
    assert [lib.npk_test_sum(x) for x in (0, 5, -7)] == [21, 41, -7]


def test_a_layers_piece_reads_only_the_kernels_interface():
    """A layer's piece needs the kernels' types and declarations, not their static helpers
    nor the vector intrinsics' headers (the longest part of its compile)."""
    source = textwrap.dedent("""\
        #include <immintrin.h>
        #include <stdint.h>
        typedef struct { float *Out; int N; } KerArgs_T;
        static inline __m512 twice(__m512 v) { return _mm512_add_ps(v, v); }
        static void Body(KerArgs_T *Arg) { Arg->N = 0; }
        void Ker(KerArgs_T *Arg) { Body(Arg); }
        """)
    got = interface_only(source)
    assert got == ("#include <stdint.h>\ntypedef struct { float *Out; int N; } KerArgs_T;\n"
                   "void Ker(KerArgs_T *Arg) ;\n")
    # A type of the interface that is a vector keeps the header that declares it.
    vector = source.replace("float *Out;", "__m512 Lanes;")
    assert "#include <immintrin.h>" in interface_only(vector)
    assert "__m512 Lanes" in interface_only(vector) and "twice" not in interface_only(vector)


def test_a_link_failure_names_the_pieces(tmp_path, monkeypatch):
    monkeypatch.setenv("NPUKIT_CACHE_DIR", str(tmp_path))
    one = ("layer 1 (First)", "int npk_test_dup(void) { return 1; }\n")
    two = ("layer 2 (Second)", "int npk_test_dup(void) { return 2; }\n")
    three = ("layer 3 (Innocent)", "int npk_test_other(void) { return 3; }\n")
    with pytest.raises(CompilerError) as err:
        toolchain.build_pieces([one, two, three], "int npk_test_dup(void);\n")
    text = str(err.value)
    assert "layer 1 (First)" in text and "layer 2 (Second)" in text
    assert "layer 3 (Innocent)" not in text and "npk_test_dup" in text


SPLIT = textwrap.dedent("""\
    /* A long kernel: shape specialisations, each static, called by one external function. */
    static inline int npk_test_scale(int x) { return 3 * x; }
    static __attribute__((noinline)) int Spec1(int x) { return npk_test_scale(x) + 1; }
    static __attribute__((noinline)) int Spec2(int x) { return npk_test_scale(x) + 2; }
    static __attribute__((noinline)) int Spec3(int x) { return Spec1(x) * 10; }
    int KerSplit(int which, int x)
    {
        return which == 1 ? Spec1(x) : which == 2 ? Spec2(x) : Spec3(x);
    }
    """)


def test_a_long_kernel_is_compiled_in_parts(tmp_path, monkeypatch):
    """A long basic-kernel source is compiled in parts (its static functions shared out,
    made external under names of its own), started in parallel, linked as one."""
    monkeypatch.setenv("NPUKIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(pieces, "ALONE", 1)
    monkeypatch.setattr(pieces, "PART", len(SPLIT) // 2)
    monkeypatch.setattr(toolchain, "cpus", lambda: 2)  # parts: at most one per CPU
    units = kernel_units([[SPLIT]], prelude(2))
    assert [w for w, *_ in units] == [f"basic kernels KerSplit (part {k} of 2)" for k in (1, 2)]
    # A static function named as another source's would be: no clash at the link.
    other = ("another kernel", "static int Spec1(int x) { return x; }\n"
             "int KerOther(int x) { return Spec1(x) - 5; }\n")
    main = ("int KerSplit(int, int);\nint KerOther(int);\n"  # the kernels are hidden
            "int npk_test_split(int w, int x) { return KerSplit(w, x); }\n"
            "int npk_test_other(int x) { return KerOther(x); }\n")
    lib = toolchain.library_in_pieces([*units, other], main)
    split, kept = lib.npk_test_split, lib.npk_test_other
    split.restype, split.argtypes = ctypes.c_int, [ctypes.c_int] * 2
    kept.restype, kept.argtypes = ctypes.c_int, [ctypes.c_int]
    for x in (0, 7, -4):
        assert [split(w, x) for w in (1, 2, 3)] == [3 * x + 1, 3 * x + 2, (3 * x + 1) * 10]
        assert kept(x) == x - 5
    # Not split: static data the parts would each have a copy of, an include guard (another
    # source may define the block first), a static function declared ahead of its definition.
    for kept in ("static int Calls;\n" + SPLIT,
                 "#ifndef NPK_TEST_GUARD\n#define NPK_TEST_GUARD\n" + SPLIT + "#endif\n",
                 "static int Spec2(int x);\n" + SPLIT):
        assert split_source(kept, 2) == [kept]
    assert len(split_source("#ifdef __GNUC__\n" + SPLIT + "#endif\n", 2)) == 2


# Two external functions: one instantiating a long inline template through another inline
# function (the compile's work lies there), one short; and two short static functions.
HEAVY = textwrap.dedent("""\
    static inline int npk_test_step(int x, int k) { return (x * 7 + k) ^ (x >> 3); }
    static inline int npk_test_rounds(int x)
    {
        for (int k = 0; k < 64; k++) x = npk_test_step(x, k) + npk_test_step(x, k + 1);
        return x;
    }
    static inline int npk_test_template(int x) { return npk_test_rounds(x) - 1; }
    static __attribute__((noinline)) int Small1(int x) { return x + 1; }
    static __attribute__((noinline)) int Small2(int x) { return x + 2; }
    int KerHeavy(int x) { return npk_test_template(x); }
    int KerLight(int w, int x) { return w == 1 ? Small1(x) : Small2(x); }
    """)


def test_parts_share_out_external_functions_by_what_they_instantiate(tmp_path, monkeypatch):
    """An external function may be defined in any part: the one whose inline calls (and
    theirs in turn) weigh most takes a part of its own, the others declare it; the parts
    link into the functions of the whole source."""
    monkeypatch.setenv("NPUKIT_CACHE_DIR", str(tmp_path))
    parts = split_source(HEAVY, 2)
    assert len(parts) == 2
    defines = [[name for name in ("KerHeavy", "KerLight", "Small1", "Small2")
                if re.search(rf"\b{name}\s*\([^;{{]*\)\s*\{{", part)] for part in parts]
    assert sorted(sum(defines, [])) == ["KerHeavy", "KerLight", "Small1", "Small2"]
    assert ["KerHeavy"] in defines  # the template's weight reached through npk_test_rounds
    monkeypatch.setattr(pieces, "ALONE", 1)
    monkeypatch.setattr(pieces, "PART", len(HEAVY) // 2)
    monkeypatch.setattr(toolchain, "cpus", lambda: 2)
    units = kernel_units([[HEAVY]], prelude(2))
    assert len(units) == 2
    main = ("int KerHeavy(int);\nint KerLight(int, int);\n"
            "int npk_test_heavy(int x) { return KerHeavy(x); }\n"
            "int npk_test_light(int w, int x) { return KerLight(w, x); }\n")
    lib = toolchain.library_in_pieces(units, main)
    heavy, light = lib.npk_test_heavy, lib.npk_test_light
    heavy.restype, heavy.argtypes = ctypes.c_int, [ctypes.c_int]
    light.restype, light.argtypes = ctypes.c_int, [ctypes.c_int] * 2

    def rounds(x: int) -> int:  # the template in Python, on 32-bit ints as C wraps them
        def i32(v):
            return (v + 2**31) % 2**32 - 2**31

        def step(x, k):
            return i32((i32(x * 7 + k)) ^ (x >> 3))
        for k in range(64):
            x = i32(step(x, k) + step(x, k + 1))
        return i32(x - 1)
    for x in (0, 5, -9, 123456):
        assert heavy(x) == rounds(x)
        assert [light(1, x), light(2, x)] == [x + 1, x + 2]


SANITIZED = textwrap.dedent('''
    import sys
    import numpy as np
    sys.path.insert(0, "tests")
    import npukit.onnx
    from npukit.c import cache, pieces, toolchain
    from npukit.onnx.check import ort_run
    from test_c_pieces import BUDGETS, dense_net
    toolchain.library = None  # the pieces only
    m, inputs = dense_net()
    ref, _ = ort_run(m, inputs)
    got = npukit.onnx.load(m, **BUDGETS).run("c", **inputs).outputs["y"]
    np.testing.assert_allclose(got, ref["y"], rtol=1e-4, atol=1e-5)
    print("sanitized pieces: ok")
''')


def test_pieces_run_clean_under_sanitizers(tmp_path):
    try:
        env = dict(os.environ, **toolchain.sanitizer_env(), NPUKIT_CACHE_DIR=str(tmp_path))
    except CompilerError as exc:
        pytest.skip(f"no AddressSanitizer runtime: {exc}")
    res = subprocess.run([sys.executable, "-c", SANITIZED], env=env, capture_output=True,
                         text=True, timeout=600, check=False,
                         cwd=Path(__file__).parent.parent)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "sanitized pieces: ok" in res.stdout
    assert "runtime error" not in res.stderr and "AddressSanitizer" not in res.stderr
