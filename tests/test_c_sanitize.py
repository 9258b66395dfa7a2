"""The generated C under AddressSanitizer and UndefinedBehaviorSanitizer.

Python is not built with ASan, so each check runs in a subprocess started with the ASan
runtime preloaded (``npukit.c.sanitizer_env()``): first every Torq EasyKernel guide kernel
over several shapes, strided sub-view outputs and unaligned arrays, then the AutoTiler ports (basic
kernels in C, reads past the last tile that must move nothing) and the LUT kernels, which
must all exit cleanly; then programs corrupted past the bounds pass, whose out-of-bounds
write (a Torq EasyKernel guide kernel) or read (an AutoTiler tile) ASan must report.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from npukit import CompilerError
from npukit.c import sanitizer_env

try:
    ENV, WHY = sanitizer_env(), ""
except CompilerError as exc:  # no compiler, or one without the ASan runtime
    ENV, WHY = None, str(exc)

ROOT = Path(__file__).parent.parent
pytestmark = [pytest.mark.skipif(ENV is None, reason=f"no AddressSanitizer runtime: {WHY}"),
              pytest.mark.slow]  # each program compiled and run under the sanitizers

KERNELS = textwrap.dedent('''
    import numpy as np, npukit as nk
    from npukit import kernels as K
    from npukit.c import run_c
    from npukit.run import check_arrays

    rng = np.random.default_rng(0)
    BS = dict(bias_scale=nk.spec((2,), "int32"))

    def rand(shape, dt):
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, shape, endpoint=True).astype(dt)

    def sub_view(shape, dt, gap, offset, unaligned=False):
        """A strided sub-view of a bigger buffer (rows gap elements apart)."""
        dt = np.dtype(dt)
        strides, acc = [], 1
        for k, n in enumerate(reversed(shape)):
            strides.append(acc)
            acc = acc * n + (gap if k == 0 else 0)
        strides = tuple(reversed(strides))
        span = offset + sum((n - 1) * s for n, s in zip(shape, strides)) + 1
        raw = np.zeros(span * dt.itemsize + 1, np.uint8)[int(unaligned):][:span * dt.itemsize]
        view = np.lib.stride_tricks.as_strided(raw.view(dt)[offset:], shape,
                                               tuple(s * dt.itemsize for s in strides))
        return view, nk.spec(shape, dt, strides, offset)

    def check(kern, inputs, out_shape, dt, gap=0, unaligned=False, **attrs):
        out, out_spec = sub_view(out_shape, dt, gap, 5, unaligned)
        specs = {k: nk.spec(v.shape, v.dtype) for k, v in inputs.items()}
        prog = nk.build(kern, target="torq", output=out_spec, **specs, **attrs)
        want = sub_view(out_shape, dt, gap, 5)[0]
        prog.run("sim", **inputs, output=want)
        for fuse in (True, False):
            out[...] = 0
            run_c(prog, check_arrays(prog, dict(inputs, output=out)), fuse=fuse)
            assert (out == want).all(), (kern.name, out_shape, fuse)

    MUL = dict(shift=7, out_min=-100, out_max=100)
    for n, dt in [(37, "int8"), (45, "int16")]:
        bs = np.array([3, 11], np.int32)
        ins = dict(input1=rand(n, dt), input2=rand(n, dt), bias_scale=bs)
        for kern in (K.mul_vanilla, K.mul_vectorized):
            check(kern, ins, (n,), dt, **MUL)
        pad = -(-n // (16 if dt == "int8" else 4)) * (16 if dt == "int8" else 4)
        check(K.mul_vectorized_store, ins, (pad,), dt, **MUL)
    wide = np.array([-2**31 + 5, 2**31 - 7], np.int32)  # the 64-bit lanes
    for kern, shape, b_shape, dt, bs, gap in [
            (K.mul, (2, 5, 7), (1, 1, 1), "int8", np.array([3, 11], np.int32), 3),
            (K.mul, (2, 5, 7), (1, 5, 1), "int16", wide, 0),
            (K.mul_ndim, (5, 3, 3, 2), (5, 3, 3, 2), "int8", wide, 2),
            (K.mul, (3, 40), (3, 40), "int16", np.array([3, 11], np.int32), 1)]:
        ins = dict(input1=rand(shape, dt), input2=rand(b_shape, dt), bias_scale=bs)
        check(kern, ins, shape, dt, gap=gap, unaligned=dt == "int16", **MUL)
    for rows, cols, dt, vector in [(5, 70, "int8", "alu"), (9, 33, "int16", "act")]:
        check(K.reduce_rows, dict(input=rand((rows, cols), dt)), (cols,), dt, vector=vector)
    # Strided loads: the last block's junk lanes lie rows past the input's end.
    for rows, cols, dt, vector in [(70, 5, "int8", "alu"), (9, 33, "int16", "act")]:
        check(K.reduce_cols, dict(input=rand((rows, cols), dt)), (rows,), dt, vector=vector)
    f32 = dict(input1=rng.standard_normal(300).astype(np.float32),
               input2=rng.standard_normal(300).astype(np.float32),
               bias_scale=np.array([0.5, -1.5], np.float32))
    check(K.mul, f32, (300,), "float32", shift=0, out_min=-1.0, out_max=2.0)
    print("sanitized runs: ok")
''')

CORRUPTED = textwrap.dedent('''
    import dataclasses
    import numpy as np, npukit as nk
    from npukit import ir, kernels as K
    from npukit.c import run_c

    n = 4000
    prog = nk.build(K.mul_vectorized, target="torq", input1=nk.spec((n,), "int8"),
                    input2=nk.spec((n,), "int8"), bias_scale=nk.spec((2,), "int32"),
                    output=nk.spec((n,), "int8"), shift=8, out_min=-128, out_max=127)
    # Move the append's destination half a tensor on, past what the bounds pass allowed.
    loop = prog.body[-1]
    app = loop.body[-1]
    assert isinstance(app, ir.Append)
    bad = dataclasses.replace(app, dst=dataclasses.replace(app.dst, offset=ir.Affine(n // 2)))
    body = prog.body[:-1] + (dataclasses.replace(loop, body=loop.body[:-1] + (bad,)),)
    prog = dataclasses.replace(prog, body=body)
    a = np.ones(n, np.int8)
    run_c(prog, dict(input1=a, input2=a, bias_scale=np.array([1, 2], np.int32),
                     output=np.zeros(n, np.int8)), fuse=FUSE)
    print("not caught")
''')


TILER = textwrap.dedent('''
    import runpy
    import numpy as np, npukit as nk
    from npukit import kernels as K
    from npukit.tiler import Model

    EX = "examples/tiler/"
    rng = np.random.default_rng(0)

    def same(prog, inputs, outputs):
        got = []
        for backend in ("sim", "c"):
            outs = {k: v.copy() for k, v in outputs.items()}
            prog.run(backend, **inputs, **outs)
            got.append(outs)
        for k in outputs:
            assert np.array_equal(got[0][k], got[1][k]), (prog.name, k)

    def i32(shape, lo=-10**6, hi=10**6):
        return rng.integers(lo, hi, shape).astype(np.int32)

    ex = runpy.run_path(EX + "matadd.py")
    for args in ((51200, 200, 300), (2000, 37, 23)):
        W, H = args[1:]
        same(ex["model"](*args).program("MatAdd"), {"In1": i32((H, W)), "In2": i32((H, W))},
             {"Out": np.zeros((H, W), np.int32)})
    ex = runpy.run_path(EX + "matmax.py")
    same(ex["model"](1500, 30, 47).program("MatMax"), {"In": i32((47, 30))},
         {"Out": np.zeros(1, np.int32)})
    ex = runpy.run_path(EX + "my_favorite_kernel.py")
    same(ex["model"](1200, 3, 19).program("MyFavoriteKernel"),
         {"In1": i32((3, 19, 19)), "In2": i32((3, 19, 19))},
         {"Out": np.zeros((3, 19, 19), np.int32), "Bias": np.array([3, -4, 5], np.int32)})
    ex = runpy.run_path(EX + "cnn_conv5x5.py")
    same(ex["model"]().program("CnnConv5x5"),
         {"In": rng.integers(-2000, 2000, (3, 40, 40)).astype(np.int16),
          "Filter": rng.integers(-300, 300, (2, 3, 5, 5)).astype(np.int16),
          "Norm": np.array(10, np.uint32)},
         {"Out": np.zeros((2, 36, 36), np.int16), "Bias": np.array([1000, -500], np.int16)})
    ex = runpy.run_path(EX + "fft2d.py")
    for dim, budget in ((16, 2304), (32, 6200), (64, 12400)):  # in-out: 3 slots
        prog = ex["model"](dim, budget).program("FFT2D")
        tw, swap = ex["tables"](dim)
        img = rng.integers(0, 256, (dim, dim)).astype(np.uint8)
        out = np.zeros((dim, dim), np.complex64)
        prog.run("c", In=img, Out=out, Twiddles=tw, SwapTable=swap)
        want = np.fft.fft2(img.astype(np.float64))
        assert np.abs(out - want).max() < 1e-5 * np.abs(want).max()
    every = np.arange(0x10000, dtype=np.uint32).astype(np.uint16).view(np.float16)
    x = every[np.isfinite(every)][::7].copy()
    out, want = np.zeros_like(x), np.zeros_like(x)
    K.silu_fp16_on_cores(x, out, backend="c")
    K.silu_fp16_on_cores(x, want, backend="sim")
    assert out.tobytes() == want.tobytes()
    # Tabulated LUT loops: sixteen entries a gather, read as 4-byte words from a padded
    # table (2- and 1-byte entries), then a tail of single reads.
    import sys
    sys.path.insert(0, "tests")
    from test_lut_kernels import lookup_kernel
    from npukit.lut import Lut
    x = np.concatenate([every, every[:5]])
    prog = nk.build(K.silu_fp16, target="torq", input=nk.spec((x.size,), "float16"),
                    output=nk.spec((x.size,), "float16"))
    got, want = np.zeros_like(x), np.ones_like(x)
    prog.run("c", input=x, output=got)
    prog.run("sim", input=x, output=want)
    assert np.array_equal(got, want, equal_nan=True)
    keys = np.resize(np.arange(-32768, 32768).astype(np.int16), 65536 + 3)
    prog = nk.build(lookup_kernel, target="torq", input=nk.spec((keys.size,), "int16"),
                    output=nk.spec((keys.size,), "uint8"), step_bits=2, bias=8,
                    lut=Lut((np.arange(37) * 7 - 100).astype(np.int16)))
    got, want = np.zeros(keys.size, np.uint8), np.ones(keys.size, np.uint8)
    prog.run("c", input=keys, output=got)
    prog.run("sim", input=keys, output=want)
    assert np.array_equal(got, want) and "npk_gather16_k16_e1" in prog.c_source()
    print("sanitized tiler and LUT runs: ok")
''')

CORRUPTED_TILE = textwrap.dedent('''
    import dataclasses, runpy
    import numpy as np
    from npukit import ir

    ex = runpy.run_path("examples/tiler/matadd.py")
    prog = ex["model"]().program("MatAdd")
    # Read each next tile of In1 one tile further on: the last read runs off its end.
    loop = next(st for st in prog.body if isinstance(st, ir.Loop))
    read = loop.body[0]
    assert read.label == "Read Next Tile In1"
    bad = dataclasses.replace(read, src=dataclasses.replace(
        read.src, offset=read.src.offset + 2000))
    body = tuple(dataclasses.replace(loop, body=(bad,) + loop.body[1:]) if st is loop else st
                 for st in prog.body)
    prog = dataclasses.replace(prog, body=body)
    a = np.ones((300, 200), np.int32)
    prog.run("c", In1=a, In2=a, Out=np.zeros((300, 200), np.int32))
    print("not caught")
''')


OVERRUN_TILE = textwrap.dedent('''
    import numpy as np
    from npukit import OutOfBoundsError
    from npukit.tiler import *

    C = """
    void Add(int *In1, int *In2, int *Out, unsigned int W, unsigned int H)
    {
        for (unsigned int i = 0; i < W * H; i++) Out[i] = In1[i] + In2[i];
    }
    """

    def add(In1, In2, Out, W, H):
        Out[: W * H] = In1[: W * H] + In2[: W * H]

    m = Model(l1_budget=4000)
    m.LibKernel("Add", CALL_SEQUENTIAL, CArgs(TCArg("int *", "In1"), TCArg("int *", "In2"),
                TCArg("int *", "Out"), TCArg("unsigned int", "W"), TCArg("unsigned int", "H")),
                c_source=C, reference=add)
    # Out is declared half as tall as A and B, but Add writes W x H of A's tile into it: a
    # model the tiler cannot tell from a 2:1 subsampling kernel, so it builds.
    m.UserKernel("Half", KernelDimensions(1, 8, 40, 1), KernelIterationOrder(KER_DIM2, KER_TILE),
                 TILE_HOR, CArgs(TCArg("int *", "A"), TCArg("int *", "B"), TCArg("int *", "Out")),
                 Calls(Call("Add", LOC_INNER_LOOP, Bindings(
                     K_Arg("A", KER_ARG_TILE), K_Arg("B", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE),
                     K_Arg("A", KER_ARG_TILE_W), K_Arg("A", KER_ARG_TILE_H)))),
                 KerArgs(KerArg("A", OBJ_IN_DB, 8, 40, 4, 0, 0, 0, "A"),
                         KerArg("B", OBJ_IN_DB, 8, 40, 4, 0, 0, 0, "B"),
                         KerArg("Out", OBJ_OUT_DB, 8, 20, 4, 0, 0, 0, "Out")))
    prog = m.program("Half")
    a = np.ones((40, 8), np.int32)
    try:
        prog.run("sim", A=a, B=a, Out=np.zeros((20, 8), np.int32))
    except OutOfBoundsError as exc:
        print("simulator:", exc)
    prog.run("c", A=a, B=a, Out=np.zeros((20, 8), np.int32))
    print("not caught")
''')


def run_sanitized(script: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, **ENV)
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=600, check=False, cwd=ROOT)


def test_easykernel_kernels_run_clean_under_sanitizers():
    res = run_sanitized(KERNELS)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "sanitized runs: ok" in res.stdout
    assert "runtime error" not in res.stderr and "AddressSanitizer" not in res.stderr


@pytest.mark.parametrize("fuse", [True, False])
def test_out_of_bounds_write_is_caught(fuse):
    res = run_sanitized(CORRUPTED.replace("FUSE", str(fuse)))
    assert res.returncode != 0 and "not caught" not in res.stdout
    assert "ERROR: AddressSanitizer: heap-buffer-overflow" in res.stderr
    assert "WRITE of size" in res.stderr and "npukit_mul_vectorized" in res.stderr


def test_tiler_and_lut_programs_run_clean_under_sanitizers():
    res = run_sanitized(TILER)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "sanitized tiler and LUT runs: ok" in res.stdout
    assert "runtime error" not in res.stderr and "AddressSanitizer" not in res.stderr


def test_tile_read_past_the_tensor_is_caught():
    res = run_sanitized(CORRUPTED_TILE)
    assert res.returncode != 0 and "not caught" not in res.stdout
    assert "ERROR: AddressSanitizer: heap-buffer-overflow" in res.stderr
    assert "READ of size" in res.stderr and "npukit_MatAdd" in res.stderr


def test_a_basic_kernel_writing_past_its_l1_tile_is_caught():
    """No build-time rule tells a tile too small for what a basic kernel writes from a
    subsampling kernel's smaller output (docs/tiler.md): the simulator's bounded pointers
    and the sanitizers catch it at run time."""
    res = run_sanitized(OVERRUN_TILE)
    assert "simulator: basic kernel Add" in res.stdout
    assert "Out: L1 buffer 'Out', elements 0..159 (160)" in res.stdout
    assert res.returncode != 0 and "not caught" not in res.stdout
    # L1 buffers are local arrays: UBSan's object-size check or ASan's stack check fires.
    assert ("stack-buffer-overflow" in res.stderr or
            "store to address" in res.stderr and "insufficient space" in res.stderr)
