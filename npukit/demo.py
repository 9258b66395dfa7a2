"""``npukit demo``: one section per capability, each quick and self-checking."""

from __future__ import annotations

import numpy as np

from . import kernels as K
from .easy import build, spec
from .layout import Layout


def _heading(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 74 - len(title)))


def layouts() -> None:
    """Seed 000's tensor editing: vectorize, fuse and broadcast as pure layout values."""
    _heading("Layouts (seed 000 tensor editing)")
    x = Layout((2, 5, 7), "int8")
    steps = [
        ("x = Layout((2, 5, 7), 'int8')", x),
        ("x.vectorize(16)", x.vectorize(16)),
        ("x.vectorize(4)[1, 2, 1]  (3 valid lanes)", x.vectorize(4)[1, 2, 1]),
        ("Layout((1, 1, 1), 'int8').broadcast_as(x)", Layout((1, 1, 1), "int8").broadcast_as(x)),
        ("Layout((5, 7), 'int8').broadcast_as(x)", Layout((5, 7), "int8").broadcast_as(x)),
    ]
    y = Layout((5, 3, 3, 2), "int8")
    steps += [
        ("y = Layout((5, 3, 3, 2), 'int8')", y),
        ("y.vectorize(16)  (2 of 16 lanes used)", y.vectorize(16)),
        ("y.fuse(y.dense_dims()).vectorize(16)", y.fuse(y.dense_dims()).vectorize(16)),
        ("y[1:4, :, ::2].dense_dims()", y[1:4, :, ::2].dense_dims()),
    ]
    width = max(len(s) for s, _ in steps)
    for text, value in steps:
        print(f"  {text:<{width}}  -> {value!r}")


def _mul_case(kern, s1, s2, so, dtype="int8", **kw):
    """Build and simulate one mul kernel; returns (program, result, matches numpy, inputs,
    output)."""
    rng = np.random.default_rng(0)
    lo, hi = (-128, 127)
    a = rng.integers(-100, 100, s1).astype(dtype)
    b = rng.integers(-100, 100, s2).astype(dtype)
    bs = np.array([7, 3], np.int32)
    prog = build(kern, target="torq", input1=spec(s1, dtype), input2=spec(s2, dtype),
                 bias_scale=spec((2,), "int32"), output=spec(so, dtype), shift=6, out_min=lo,
                 out_max=hi, **kw)
    out = np.zeros(so, dtype)
    res = prog.run(input1=a, input2=b, bias_scale=bs, output=out)
    # numpy oracle: the seed's formula with round-half-up division by 2**6.
    want = np.clip(np.floor_divide((a.astype(np.int64) * b + 7) * 3 + 32, 64), lo, hi)
    data = out[tuple(slice(0, n) for n in want.shape)]  # a padded output's data part
    return prog, res, bool((data == want).all()), dict(input1=a, input2=b, bias_scale=bs), out


def _reduce_case(vector):
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (32, 300)).astype(np.int8)
    prog = build(K.reduce_rows, target="torq", input=spec((32, 300), "int8"),
                 output=spec((300,), "int8"), vector=vector)
    out = np.zeros(300, np.int8)
    res = prog.run(input=x, output=out)
    ok = bool((out == np.clip(x.astype(np.int64).sum(0), -128, 127)).all())
    return prog, res, ok, dict(input=x), out


def _vanilla_cycles(n: int) -> int:
    from .sim.timing import timeline

    prog = build(K.mul_vanilla, target="torq", input1=spec((n,), "int8"),
                 input2=spec((n,), "int8"), bias_scale=spec((2,), "int32"),
                 output=spec((n,), "int8"), shift=6, out_min=-128, out_max=127)
    return timeline(prog).cycles


def _c_agrees(prog, inputs, sim_out) -> str:
    """Run the C back end on the same inputs: 'same' when every output bit equals the
    simulator's."""
    from .errors import CompilerError

    out = np.zeros_like(sim_out)
    try:
        prog.run("c", **inputs, **{prog.params[-1][0].name: out})
    except CompilerError as e:
        return f"no C: {str(e).splitlines()[0][:30]}"
    return "same" if out.tobytes() == sim_out.tobytes() else "DIFFERS"


def easykernel() -> None:
    """Seed 000's six kernels on the simulated Torq slice."""
    _heading("EasyKernel (seed 000) on the simulated Torq slice")
    cases = [
        ("vanilla mul", "[1000]", lambda: _mul_case(K.mul_vanilla, (1000,), (1000,), (1000,))),
        ("vectorized mul, padded store", "[1000]->[1008]",
         lambda: _mul_case(K.mul_vectorized_store, (1000,), (1000,), (1008,))),
        ("vectorized mul, append", "[1000]",
         lambda: _mul_case(K.mul_vectorized, (1000,), (1000,), (1000,))),
        ("n-dim mul, multi-iterator", "[5,3,3,2]",
         lambda: _mul_case(K.mul_ndim, (5, 3, 3, 2), (5, 3, 3, 2), (5, 3, 3, 2))),
        ("fused mul", "[5,3,3,2]",
         lambda: _mul_case(K.mul, (5, 3, 3, 2), (5, 3, 3, 2), (5, 3, 3, 2))),
        ("broadcast mul", "[2,5,7]x[1,1,1]",
         lambda: _mul_case(K.mul, (2, 5, 7), (1, 1, 1), (2, 5, 7))),
        ("reduce rows, Act-width", "[32,300]", lambda: _reduce_case("act")),
        ("reduce rows, ALU-width", "[32,300]", lambda: _reduce_case("alu")),
    ]
    print("  (vs vanilla: the vanilla mul's cycles on as many elements, over this kernel's)")
    print(f"  {'kernel':<30}{'shape':<17}{'cycles':>7}{'roofline':>9}{'vs vanilla':>11}"
          f"{'LRAM bytes':>11}  numpy  C = sim")
    for name, shape, make in cases:
        prog, res, ok, inputs, out = make()
        # Speed-up over the vanilla kernel (one element per iteration) on as many elements.
        vanilla = _vanilla_cycles(prog.params[0][1].size) if "mul" in name else None
        speed = f"{vanilla / res.cycles:.1f}x" if vanilla else "-"
        print(f"  {name:<30}{shape:<17}{res.cycles:>7}{res.report.roofline:>9}"
              f"{speed:>11}{res.report.bytes_moved.get('LRAM', 0):>11}"
              f"  {'ok' if ok else 'MISMATCH':<5}  {_c_agrees(prog, inputs, out)}")
    prog = _mul_case(K.mul, (2, 5, 7), (5, 1), (2, 5, 7))[0]
    print("\n  Derived NDL descriptors for mul [2,5,7] x [5,1] (counts/strides in bytes):")
    for t in prog.transfers():
        print(f"    {t.tensor:<11}{t.src:>5} -> {t.dst:<5} offset {t.offset:<3} counts "
              f"{str(t.counts):<16} strides {t.strides}")


def autotiler() -> None:
    """Seed 001's ports: tiling, L1 use, simulated cycles and how much DMA hides."""
    _heading("AutoTiler (seed 001) on the simulated GAP8 cluster")
    import runpy
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "examples" / "tiler"
    if not root.exists():
        print("  (the examples/ folder of the source tree is needed for this section)")
        return
    print(f"  {'user kernel':<20}{'tiles':>6}{'tile':>5}{'last':>5}{'L1 used / budget':>19}"
          f"{'cycles':>9}{'DMA':>8}{'core':>8}{'overlap':>9}  numpy  C")
    for script, kernel, run in _TILER_CASES:
        mod = runpy.run_path(str(root / f"{script}.py"))
        m = mod["model"]()
        t = m.tiling(kernel)
        label = kernel if kernel in m.kernels and not m.groups else f"{script.upper()} group"
        ok, res, out = run(mod, m, "sim")
        busy = res.report.busy
        dma = sum(b for u, b in busy.items() if "dma" in u)
        core = busy.get("core", 0)
        hidden = (dma + core - res.cycles) / max(min(dma, core), 1)
        print(f"  {label:<20}{t.n_tiles:>6}{t.tile:>5}{t.last_tile:>5}"
              f"{f'{t.l1_used} / {t.l1_budget}':>19}{res.cycles:>9}{dma:>8}{core:>8}"
              f"{hidden:>8.0%}  {'ok' if ok else 'MISMATCH':<5}  "
              f"{_c_matches(run, mod, m, out)}")
    print("  a group's row shows its first kernel's tiling and the whole group's cycles;")
    print("  overlap: share of the shorter of DMA and compute hidden behind the other;")
    print("  C: 'same' = bit-identical with the simulator, 'close' = within 1e-5 of the largest")


def _run_matadd(mod, m, backend):
    rng = np.random.default_rng(0)
    a, b = rng.integers(-2**30, 2**30, (2, 300, 200), dtype=np.int32)
    out = np.zeros((300, 200), np.int32)
    res = m.program("MatAdd").run(backend, In1=a, In2=b, Out=out)
    return bool((out == a + b).all()), res, out


def _run_matmax(mod, m, backend):
    x = np.random.default_rng(1).integers(-2**31, 2**31 - 1, (300, 200), dtype=np.int32)
    out = np.zeros(1, np.int32)
    res = m.program("MatMax").run(backend, In=x, Out=out)
    return bool(out[0] == x.max()), res, out


def _run_favorite(mod, m, backend):
    rng = np.random.default_rng(2)
    in1, in2 = rng.integers(-10**6, 10**6, (2, 4, 75, 75), dtype=np.int32)
    bias = np.array([5, -7, 11, 100], np.int32)
    out = np.zeros((4, 75, 75), np.int32)
    res = m.program("MyFavoriteKernel").run(backend, In1=in1, In2=in2, Out=out, Bias=bias)
    return bool((out == mod["reference"](in1, in2, bias)).all()), res, out


def _run_conv(mod, m, backend):
    rng = np.random.default_rng(3)
    x = rng.integers(-2000, 2000, (3, 40, 40), dtype=np.int16)
    f = rng.integers(-300, 300, (2, 3, 5, 5), dtype=np.int16)
    bias = np.array([1000, -500], np.int16)
    out = np.zeros((2, 36, 36), np.int16)
    res = m.program("CnnConv5x5").run(backend, In=x, Filter=f, Out=out, Norm=10, Bias=bias)
    return bool((out == mod["reference"](x, f, bias, 10)).all()), res, out


def _run_fft(mod, m, backend, dim=256):
    img = np.random.default_rng(4).integers(0, 256, (dim, dim), dtype=np.uint8)
    tw, swap = mod["tables"](dim)
    out = np.zeros((dim, dim), np.complex64)
    res = m.program("FFT2D").run(backend, In=img, Out=out, Twiddles=tw, SwapTable=swap)
    want = np.fft.fft2(img.astype(np.float64))
    return bool(np.abs(out - want).max() <= 1e-5 * np.abs(want).max()), res, out


def _c_matches(run, mod, m, sim_out) -> str:
    """'same' when the C back end's output equals the simulator's bit for bit; for float
    results computed differently by the two (the FFT's C kernels vs numpy), 'close'."""
    from .errors import CompilerError

    try:
        ok, _, out = run(mod, m, "c")
    except CompilerError as e:
        return f"no C: {str(e).splitlines()[0][:30]}"
    if out.tobytes() == sim_out.tobytes():
        return "same"
    scale = np.abs(sim_out).max()
    return "close" if ok and np.abs(out - sim_out).max() <= 1e-5 * scale else "DIFFERS"


_TILER_CASES = [
    ("matadd", "MatAdd", _run_matadd),
    ("matmax", "MatMax", _run_matmax),
    ("my_favorite_kernel", "MyFavoriteKernel", _run_favorite),
    ("cnn_conv5x5", "CnnConv5x5", _run_conv),
    ("fft2d", "FFT2DHorizontal", _run_fft),
]


def silu() -> None:
    """Seed 004's float16 SiLU: a 512-entry interpolated table in the Act, two cores."""
    _heading("SiLU by table (seed 004) on the simulated Torq slices")
    from .lut import linear_approx

    x = np.linspace(-12, 12, 4096).astype(np.float16)
    out = np.zeros_like(x)
    runs = K.silu_fp16_on_cores(x, out, "torq")
    lut, p = K.silu_table()
    u = np.ldexp(np.maximum(x.astype(np.float32), np.float32(p["clamp"][0])), p["scale_exp"])
    want = linear_approx(lut, u.astype(np.float32), p["step_bits"], p["bias"],
                         extended=True).astype(np.float16)
    xf = x.astype(np.float64)
    err = np.abs(out.astype(np.float64) - xf / (1 + np.exp(-xf)))
    report = runs[0][3].report
    print(f"  {lut.size}-entry table ({lut.offset_dtype} offsets, {lut.slope_dtype} slopes): "
          f"{report.peak['LUT']} B of LUT memory, a constant of the program")
    for core, (lo, hi), _, res in runs:
        print(f"  core {core}: elements {lo}..{hi - 1}, cycles {res.cycles}")
    print(f"  {x.size} float16 values in [-12, 12]: max abs error {err.max():.5f} vs float64 "
          f"SiLU, match numpy: {bool(np.array_equal(out, want))}")


def tensor_operations() -> list[tuple[str, bool | None]]:
    """The TPP tensor compiler: a GEMM with a ReLU last touch and an einsum contraction,
    each checked against numpy, timed beside OpenBLAS (np.matmul). Returns its checks as
    (name, ok) pairs, ok None when there is no C compiler."""
    _heading("Tensor operations (TPP tensor compiler) on the C back end")
    import time

    from . import tpp
    from .errors import CompilerError

    def best(fn, repeat=5):
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    names = ("TPP gemm + relu last touch = numpy", "TPP einsum abk,kc->abc = numpy")
    rng = np.random.default_rng(0)
    n = 512
    op = tpp.TensorOperation("float32", "zero", "gemm", "relu", ("m", "n", "k"), ("prim",) * 3,
                             (n, n, n), (1, 0, n), (0, n, 1), (1, n, 0)).optimize()
    a = rng.standard_normal(n * n, dtype=np.float32)  # column-major n x n blocks
    b = rng.standard_normal(n * n, dtype=np.float32)
    out, ref = np.empty(n * n, np.float32), np.empty((n, n), np.float32)
    try:
        op(a, b, out)
    except CompilerError as exc:
        print(f"  (no C compiler: {str(exc).splitlines()[0]})")
        return [(name, None) for name in names]
    want = np.maximum(a.reshape(n, n).T.astype(np.float64) @ b.reshape(n, n).T, 0)
    ok_gemm = bool(np.abs(out.reshape(n, n).T - want).max() < 1e-3)
    t_op = best(lambda: op(a, b, out))
    t_np = best(lambda: np.matmul(b.reshape(n, n), a.reshape(n, n), out=ref))
    print(f"  relu(A B), {n}^3 float32, optimizer's {op.history[-1][1][-1]}")
    print(f"    matches numpy: {ok_gemm}; {2 * n**3 / t_op / 1e9:.1f} GFLOP/s, OpenBLAS "
          f"(np.matmul) {2 * n**3 / t_np / 1e9:.1f} GFLOP/s")
    x = rng.standard_normal((8, 128, 512), dtype=np.float32)
    w = rng.standard_normal((512, 256), dtype=np.float32)
    y = tpp.einsum("abk,kc->abc", x, w)
    ok_einsum = bool(np.allclose(y, np.einsum("abk,kc->abc", x, w), atol=1e-3))
    t_ein = best(lambda: tpp.einsum("abk,kc->abc", x, w))
    t_np = best(lambda: np.matmul(x.reshape(-1, 512), w))
    flops = 2 * x.size * 256
    ein = tpp.einsum_operation("abk,kc->abc", x, w)
    print(f"  einsum('abk,kc->abc') on {x.shape} x {w.shape}: one {ein.prim_main} operation, "
          f"{ein.history[-1][1][-1]}")
    print(f"    matches numpy: {ok_einsum}; {flops / t_ein / 1e9:.1f} GFLOP/s, OpenBLAS "
          f"{flops / t_np / 1e9:.1f} GFLOP/s")
    return list(zip(names, (ok_gemm, ok_einsum)))


def demo() -> None:
    print("npukit demo: one sequential description, every transfer derived, simulated and run.")
    layouts()
    easykernel()
    silu()
    tensor_operations()
    autotiler()
    from .lut.demo import demo as lut_demo

    lut_demo()
