"""The TPP primitives and tensor operations against numpy (OpenBLAS) and torch.

Everything runs in one process; each number is the median of interleaved repetitions
(every contender once per round), so a load that comes and goes on a shared machine hits
all of them alike. Sections:

1. memory bandwidth of this machine: numpy ``copyto`` (copy) and ``fill`` on 2048 x 2048
   float32, bytes read + written;
2. every primitive at the TPP text's sizes (50x50, 64x64, 512x512, 2048x2048): GFLOP/s
   (10^9 elements per second, as the TPP text counts unary and binary primitives) of the
   generated C called in a C loop, its transposed variant beside it, numpy's and torch's
   closest spelling; at 2048x2048 the bandwidth and its fraction of copy (fill for zero),
   measured in the same rounds as the row;
3. unary and binary primitives as optimized ``TensorOperation``s on 2048x2048 at 1 and 2
   threads;
4. GEMM (an optimized ``TensorOperation``, first touch zero) on squares 64 ... 2048 and odd
   shapes against ``np.matmul(out=)`` (OpenBLAS) and torch, at 1 and 2 threads;
5. the three sigmoids: their errors over a fine grid beside the errors the TPP text states,
   and their bandwidth beside ``torch.sigmoid``'s at 1 and 2 threads;
6. libxsmm's equations: equation_simple and a softmax as one fused ``tpp.Equation`` kernel
   against the same trees run node by node (one ``Primitive`` call per node, temporaries
   between them) and numpy, at 64 x 64 and 1024 x 1024, one thread.

Targets (reported, not asserted): GEMM 1024^3 at least 70% of OpenBLAS on 1 and 2
threads; unary and binary primitives at 2048x2048 at least 80% of the copy bandwidth; the
fast sigmoid faster than torch.sigmoid at equal threads; a fused equation faster than its
nodes run one by one.

Idle threads of every library sleep instead of spinning (``OPENBLAS_THREAD_TIMEOUT=4``,
``OMP_WAIT_POLICY=PASSIVE`` for torch's OpenMP, unless already set): in interleaved runs a
library whose threads keep spinning after its call takes the core the next contender's
threads need. npukit's worker threads poll about 100 microseconds after a loop, then sleep.

Run: python benchmarks/tpp.py [--repeat N] [--quick]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")  # before numpy loads OpenBLAS
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads OpenMP

import argparse  # noqa: E402
import ctypes  # noqa: E402
import glob  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from functools import partial  # noqa: E402

import numpy as np  # noqa: E402

from npukit.c import toolchain  # noqa: E402
from npukit.lut import sigmoid as S  # noqa: E402
from npukit.tpp import (  # noqa: E402
    BINARY,
    UNARY,
    Equation,
    Primitive,
    TensorOperation,
    einsum_operation,
)
from npukit.tpp.csource import standalone  # noqa: E402

try:
    import torch
except ImportError:  # torch is optional: its columns show "-"
    torch = None

SIZES = (50, 64, 512, 2048)


# -- timing ------------------------------------------------------------------------------------

def medians(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median seconds per call of each function, interleaved: one call of each per round
    after a warm-up round."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: float(np.median(v)) for k, v in times.items()}


def set_threads(n: int) -> None:
    """Threads for OpenBLAS (through its own call), torch and npukit's C back end."""
    os.environ["NPUKIT_THREADS"] = str(n)
    if torch is not None:
        torch.set_num_threads(n)
    for path in glob.glob(os.path.join(os.path.dirname(np.__file__) + ".libs", "*openblas*")):
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                     "openblas_set_num_threads64_", "openblas_set_num_threads"):
            if hasattr(lib, name):
                getattr(lib, name).argtypes = [ctypes.c_int]
                getattr(lib, name)(n)
                return


def c_loop(p: Primitive):
    """``fn(pointers..., scalars..., reps)``: the primitive called ``reps`` times in C."""
    args = ", ".join(f"{t} {n}" for t, n in p.c_args)
    call = ", ".join(n for _, n in p.c_args)
    src = standalone(p.c_source, (p.dtype,)) + (
        f"\n\nvoid npk_bench({args}, int64_t reps)\n{{\n"
        f"    for (int64_t r = 0; r < reps; r++)\n        {p.c_name}({call});\n}}\n")
    fn = ctypes.CDLL(str(toolchain.build(src))).npk_bench
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p] * len(p.arrays) + [ctypes.c_int64] * (len(p.scalars) + 1)
    return fn


def reps_for(elements: int) -> int:
    """Calls per timed batch: about 2 ms of work at a few elements per nanosecond."""
    return max(1, int(4e6 // elements))


# -- 1. bandwidth -----------------------------------------------------------------------------

def bandwidth(repeat: int) -> tuple[float, float]:
    x = np.random.default_rng(0).standard_normal((2048, 2048), dtype=np.float32)
    y = np.ones_like(x)
    t = medians({"copy": lambda: np.copyto(y, x), "fill": lambda: y.fill(0)}, repeat)
    return 2 * x.nbytes / t["copy"] / 1e9, x.nbytes / t["fill"] / 1e9


# -- 2. primitives ----------------------------------------------------------------------------

def _numpy_unary(name: str, x: np.ndarray, y: np.ndarray, tmp: np.ndarray):
    grid = np.linspace(-8, 8, 33)
    spell = {
        "zero": lambda: y.fill(0),
        "identity": lambda: np.copyto(y, x),
        "relu": lambda: np.maximum(x, 0, out=y),
        "square": lambda: np.multiply(x, x, out=y),
        "reciprocal": lambda: np.divide(1, x, out=y),
        "increment": lambda: np.add(x, 1, out=y),
        "decrement": lambda: np.subtract(x, 1, out=y),
        "fast_sigmoid": lambda: (np.abs(x, out=tmp), np.add(tmp, 1, out=tmp),
                                 np.divide(x, tmp, out=tmp), np.add(tmp, 1, out=tmp),
                                 np.multiply(tmp, 0.5, out=y)),
        "taylor_sigmoid": lambda: (np.multiply(x, x, out=tmp), np.multiply(tmp, 0.002083,
                                                                           out=y),
                                   np.add(y, -0.020833, out=y), np.multiply(y, tmp, out=y),
                                   np.add(y, 0.25, out=y), np.multiply(y, x, out=y),
                                   np.add(y, 0.5, out=y)),
        "interp_sigmoid": lambda: np.copyto(y, np.interp(x, grid, S.SIGMOID_TABLE)),
    }
    return spell[name]


def _torch_unary(name: str, x, y):
    if torch is None:
        return None
    spell = {"zero": lambda: y.zero_(), "identity": lambda: y.copy_(x),
             "relu": lambda: torch.clamp_min(x, 0, out=y),
             "square": lambda: torch.square(x, out=y),
             "reciprocal": lambda: torch.reciprocal(x, out=y),
             "increment": lambda: torch.add(x, 1, out=y),
             "decrement": lambda: torch.sub(x, 1, out=y),
             "fast_sigmoid": lambda: torch.sigmoid(x, out=y),
             "taylor_sigmoid": lambda: torch.sigmoid(x, out=y),
             "interp_sigmoid": lambda: torch.sigmoid(x, out=y)}
    return spell.get(name)


_NP_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
              "min": np.minimum, "max": np.maximum}


def _torch_binary(name: str):
    if torch is None:
        return None
    return {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
            "min": torch.minimum, "max": torch.maximum}[name]


def primitives(repeat: int, sizes=SIZES) -> list[tuple[str, float]]:
    """Print one table per size; return (primitive, fraction of copy) at the largest, copy
    (fill for zero) measured in the same rounds as the row."""
    fractions = []
    rng = np.random.default_rng(1)
    loops = {(name, t): c_loop(Primitive(name, trans_b=t)) for name in UNARY
             for t in (False, True)}
    loops.update({(name, False): c_loop(Primitive(name)) for name in BINARY})
    for n in sizes:
        e = n * n
        reps = reps_for(e)
        x = (rng.standard_normal((n, n)) * 4).astype(np.float32)
        x2 = (rng.standard_normal((n, n)) + 3).astype(np.float32)  # away from zero for div
        y, tmp = np.empty_like(x), np.empty_like(x)
        xt = torch.from_numpy(x) if torch is not None else None
        x2t = torch.from_numpy(x2) if torch is not None else None
        yt = torch.from_numpy(y) if torch is not None else None
        big = n == max(sizes)
        print(f"\nprimitives at {n} x {n}: GFLOP/s (10^9 elements/s), one thread, generated C "
              f"called {reps} times in a C loop; torch's sigmoid rows are torch.sigmoid")
        head = f"{'primitive':<16}{'tpp':>8}{'tpp^T':>8}{'numpy':>8}{'torch':>8}"
        if big:
            head += f"{'GB/s':>8}{'of copy':>9}"
        print(head)
        print("-" * len(head))
        for name in UNARY + BINARY:
            unary = name in UNARY
            fns = {}
            if unary:
                for t in (False, True):
                    fn, ptrs = loops[name, t], (x.ctypes.data, y.ctypes.data)
                    fns["tpp" if not t else "tppT"] = partial(fn, *ptrs, n, n, n, n, reps)
                fns["numpy"] = _numpy_unary(name, x, y, tmp)
                tfn = _torch_unary(name, xt, yt)
            else:
                fn = loops[name, False]
                ptrs = (x.ctypes.data, x2.ctypes.data, y.ctypes.data)
                fns["tpp"] = partial(fn, *ptrs, n, n, n, n, n, reps)
                fns["numpy"] = partial(_NP_BINARY[name], x, x2, out=y)
                tb = _torch_binary(name)
                tfn = partial(tb, xt, x2t, out=yt) if tb else None
            if tfn is not None:
                fns["torch"] = tfn
            if big:  # the reference bandwidth, measured in the same rounds
                fns["ref"] = partial(y.fill, 0) if name == "zero" else partial(np.copyto, y, x)
            t = medians(fns, repeat)
            per = {k: (v / reps if k.startswith("tpp") else v) for k, v in t.items()}
            cells = [f"{e / per[k] / 1e9:>8.2f}" if k in per else f"{'-':>8}"
                     for k in ("tpp", "tppT", "numpy", "torch")]
            line = f"{name:<16}" + "".join(cells)
            if big:
                nbytes = e * 4 * (1 if name == "zero" else 2 if unary else 3)
                gbs = nbytes / per["tpp"] / 1e9
                ref = e * 4 * (1 if name == "zero" else 2) / t["ref"] / 1e9
                fractions.append((name, gbs / ref))
                line += f"{gbs:>8.1f}{gbs / ref:>8.0%}" + (" (of fill)" if name == "zero" else "")
            print(line)
    return fractions


# -- 3. unary and binary operations on threads -------------------------------------------------

def _elementwise_op(name: str, n: int, threads: int) -> TensorOperation:
    binary = name in BINARY
    first, main, last = ("zero", "none", "none") if name == "zero" else \
        ("none", name, "none") if binary or name == "identity" or "sigmoid" in name else \
        ("none", "identity", name)
    op = TensorOperation("float32", first, main, last, ("c", "c"), ("prim", "prim"), (n, n),
                         (1, n), (1, n) if binary else (0, 0), (1, n))
    return op.optimize(threads=threads)


def operations(repeat: int) -> None:
    n = 2048
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(n * n) * 4).astype(np.float32)
    x2 = (rng.standard_normal(n * n) + 3).astype(np.float32)
    y = np.empty_like(x)
    print(f"\nunary and binary TensorOperations at {n} x {n} (identity main with the unary "
          f"primitive as last touch, sigmoids and binaries as main; zero as first touch):"
          f" GB/s and fraction of the one-thread copy bandwidth measured in the same rounds;"
          f" a last touch is a second pass over out")
    head = f"{'primitive':<16}" + "".join(f"{f'{t} thr GB/s':>14}{'of copy':>9}" for t in (1, 2))
    print(head)
    print("-" * len(head))
    for name in UNARY + BINARY:
        cells = ""
        for threads in (1, 2):
            set_threads(threads)
            op = _elementwise_op(name, n, threads)
            t = medians({"op": partial(op, x, x2, y), "copy": partial(np.copyto, y, x)},
                        repeat)
            nbytes = n * n * 4 * (1 if name == "zero" else 3 if name in BINARY else 2)
            gbs, copy = nbytes / t["op"] / 1e9, 8 * n * n / t["copy"] / 1e9
            cells += f"{gbs:>14.1f}{gbs / copy:>9.0%}"
        print(f"{name:<16}{cells}")
    set_threads(1)


# -- 4. GEMM --------------------------------------------------------------------------------

def gemm(repeat: int, shapes) -> dict[tuple, float]:
    print("\nGEMM C = A B (float32, row-major numpy arrays; tpp: einsum_operation('ik,kj->ij')"
          ", optimized for the thread count, first touch zero): GFLOP/s")
    head = f"{'m x n x k':<18}{'thr':>4}{'tpp':>9}{'OpenBLAS':>10}{'torch':>9}{'tpp/BLAS':>10}"
    print(head)
    print("-" * len(head))
    ratios = {}
    rng = np.random.default_rng(3)
    for m, n, k in shapes:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        c_tpp, c_np = np.zeros((m, n), np.float32), np.zeros((m, n), np.float32)
        ops = {t: einsum_operation("ik,kj->ij", a, b, threads=t) for t in (1, 2)}
        fl = 2 * m * n * k
        r = max(3, min(repeat, int(2e10 // fl) + 3))
        for threads in (1, 2):
            set_threads(threads)
            op = ops[threads]
            fns = {"tpp": partial(op, a, b, c_tpp), "numpy": partial(np.matmul, a, b, out=c_np)}
            if torch is not None:
                at, bt, ct = (torch.from_numpy(v) for v in (a, b, c_np.copy()))
                fns["torch"] = partial(torch.matmul, at, bt, out=ct)
            t = medians(fns, r)
            err = np.abs(c_tpp - c_np).max() / max(1.0, np.abs(c_np).max())
            assert err < 1e-4 * k ** 0.5, f"GEMM {m}x{n}x{k} differs from numpy by {err}"
            g = {key: fl / v / 1e9 for key, v in t.items()}
            ratios[m, n, k, threads] = g["tpp"] / g["numpy"]
            print(f"{f'{m} x {n} x {k}':<18}{threads:>4}{g['tpp']:>9.1f}{g['numpy']:>10.1f}"
                  f"{g.get('torch', float('nan')):>9.1f}{g['tpp'] / g['numpy']:>10.2f}")
    set_threads(1)
    return ratios


# -- 5. sigmoids ----------------------------------------------------------------------------

STATED = {  # what the TPP text says of its approximations (section 7.4.2)
    "fast": {},
    "taylor": {"[-2, 2]": "1e-5"},
    "table": {"[-8, -2] u [2, 8]": "0.005", "[-8, 8]": "0.01", "[-100, 100]": "0.01"},
}


def sigmoids(repeat: int) -> dict[int, float]:
    def run(name):
        p = Primitive(name)
        return lambda x: p(np.ascontiguousarray(x, np.float32),
                           np.empty(np.size(x), np.float32), m=np.size(x), n=1)
    approx = {"fast": run("fast_sigmoid"), "taylor": run("taylor_sigmoid"),
              "table": run("interp_sigmoid")}
    rows = S.sigmoid_errors(200001, approx)
    print("\nsigmoid approximations (the generated C) on a grid of 200001 points per range: "
          "max |error| against float64 sigmoid, and what the TPP text states")
    labels = list(dict.fromkeys(r.range for r in rows))
    print(f"{'approach':<10}" + "".join(f"{label:>20}" for label in labels))
    for name in approx:
        cells = "".join(
            f"{next(r.max_abs for r in rows if r.approach == name and r.range == label):>10.3g}"
            f"{'(' + STATED[name].get(label, '-') + ')':>10}" for label in labels)
        print(f"{name:<10}{cells}")
    n = 2048
    x = (np.random.default_rng(4).standard_normal(n * n) * 4).astype(np.float32)
    y = np.empty_like(x)
    print(f"\nsigmoids at {n} x {n}: GB/s (read + write) of the optimized TensorOperation, "
          f"torch.sigmoid beside")
    head = f"{'threads':<8}{'fast':>8}{'taylor':>8}{'interp':>8}{'torch':>8}{'fast/torch':>12}"
    print(head)
    print("-" * len(head))
    speedup = {}
    for threads in (1, 2):
        set_threads(threads)
        fns = {name: partial(_elementwise_op(name, n, threads), x, None, y)
               for name in ("fast_sigmoid", "taylor_sigmoid", "interp_sigmoid")}
        if torch is not None:
            xt, yt = torch.from_numpy(x), torch.from_numpy(y.copy())
            fns["torch"] = partial(torch.sigmoid, xt, out=yt)
        t = medians(fns, repeat)
        gbs = {k: 8 * n * n / v / 1e9 for k, v in t.items()}
        if "torch" in gbs:
            speedup[threads] = gbs["fast_sigmoid"] / gbs["torch"]
        print(f"{threads:<8}{gbs['fast_sigmoid']:>8.1f}{gbs['taylor_sigmoid']:>8.1f}"
              f"{gbs['interp_sigmoid']:>8.1f}{gbs.get('torch', float('nan')):>8.1f}"
              f"{speedup.get(threads, float('nan')):>12.2f}")
    set_threads(1)
    return speedup


def _simple(n: int):
    """equation_simple, (a0 + 1 + a1) (a2^2 + a3): the fused kernel, its nodes one by one,
    numpy."""
    eq = Equation().push_back_binary_op("mul").push_back_binary_op("add")
    eq.push_back_unary_op("increment").push_back_arg(0, n, n).push_back_arg(1, n, n)
    eq.push_back_binary_op("add").push_back_unary_op("square").push_back_arg(2, n, n)
    kernel = eq.push_back_arg(3, n, n).dispatch(n, n)
    a = [np.random.default_rng(k).uniform(-1, 1, n * n).astype(np.float32) for k in range(4)]
    out, t0, t1 = (np.empty(n * n, np.float32) for _ in range(3))
    inc, add, sq, mul = (Primitive(k) for k in ("increment", "add", "square", "mul"))

    def nodes():
        inc(a[0], t0, m=n, n=n)
        add(t0, a[1], t0, m=n, n=n)
        sq(a[2], t1, m=n, n=n)
        add(t1, a[3], t1, m=n, n=n)
        mul(t0, t1, out, m=n, n=n)

    return (lambda: kernel(a, out)), nodes, lambda: np.multiply(
        a[0] + 1 + a[1], a[2] * a[2] + a[3], out=out)


def _softmax(n: int):
    """Softmax over an n x n block as libxsmm's sample writes it (the exponentials dumped
    once and read back): max, subtract, exp, sum, reciprocal, scale."""
    eq = Equation().push_back_binary_op("mul", bcast_in1="scalar").push_back_arg(1, n, n)
    eq.push_back_unary_op("reciprocal").push_back_unary_op("reduce_add", reduce="rows")
    eq.push_back_unary_op("reduce_add", reduce="cols").push_back_unary_op("dump", op_arg=0)
    eq.push_back_unary_op("exp").push_back_binary_op("sub", bcast_in1="scalar")
    eq.push_back_arg(0, n, n).push_back_unary_op("reduce_max", reduce="rows")
    kernel = eq.push_back_unary_op("reduce_max", reduce="cols").push_back_arg(0, n, n) \
        .dispatch(n, n)
    x = np.random.default_rng(0).uniform(-4, 4, n * n).astype(np.float32)
    out, t, col = np.empty(n * n, np.float32), np.empty(n * n, np.float32), \
        np.empty(n, np.float32)
    s = np.empty(1, np.float32)
    rmax, rmax_c = Primitive("reduce_max", reduce_cols=True), Primitive("reduce_max")
    radd, radd_c = Primitive("reduce_add", reduce_cols=True), Primitive("reduce_add")
    sub, ex, rec, mul = (Primitive(k) for k in ("sub", "exp", "reciprocal", "mul"))
    spread = Primitive("bias")                        # a scalar broadcast to a column

    def nodes():
        rmax(x, col, m=n, n=n)
        rmax_c(col, s, m=n, n=1)
        spread(s, col, m=n, n=1, inca=0, lda=0, ldb=n)
        sub(x, col, t, m=n, n=n, ldb=0)               # ldb = 0: the column repeated
        ex(t, t, m=n, n=n)
        radd(t, col, m=n, n=n)
        radd_c(col, s, m=n, n=1)
        rec(s, s, m=1, n=1)
        spread(s, col, m=n, n=1, inca=0, lda=0, ldb=n)
        mul(t, col, out, m=n, n=n, ldb=0)

    def numpy():
        e = np.exp(x - x.max())
        np.multiply(e, 1 / e.sum(), out=out)

    return (lambda: kernel([x, t], out, op_args={0: t})), nodes, numpy


def equations(repeat: int) -> dict[str, float]:
    """Section 6: fused equation against its nodes one by one; returns the speed-ups."""
    print("\nlibxsmm's equations, one thread: microseconds per call (median), the fused "
          "kernel beside its nodes run one by one")
    head = f"{'equation':<18}{'n x n':>12}{'fused':>12}{'nodes':>12}{'numpy':>12}{'speed-up':>10}"
    print(head)
    print("-" * len(head))
    speedup = {}
    for name, make in (("equation_simple", _simple), ("softmax", _softmax)):
        for n in (64, 1024):
            fused, nodes, ref = make(n)
            t = medians({"fused": fused, "nodes": nodes, "numpy": ref}, repeat)
            speedup[f"{name} {n}"] = t["nodes"] / t["fused"]
            print(f"{name:<18}{f'{n} x {n}':>12}{t['fused'] * 1e6:>12.1f}"
                  f"{t['nodes'] * 1e6:>12.1f}{t['numpy'] * 1e6:>12.1f}"
                  f"{speedup[f'{name} {n}']:>9.2f}x")
    return speedup


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="interleaved rounds per measurement")
    ap.add_argument("--quick", action="store_true", help="fewer sizes and shapes")
    args = ap.parse_args()
    print(f"compiler: {toolchain.compiler()} {' '.join(toolchain.flags())}; "
          f"torch {'absent' if torch is None else torch.__version__}; "
          f"medians of {args.repeat} interleaved rounds; OPENBLAS_THREAD_TIMEOUT="
          f"{os.environ['OPENBLAS_THREAD_TIMEOUT']}, OMP_WAIT_POLICY="
          f"{os.environ['OMP_WAIT_POLICY']}")
    set_threads(1)
    copy, fill = bandwidth(args.repeat)
    print(f"memory bandwidth, one thread, 2048 x 2048 float32: copy {copy:.1f} GB/s (read + "
          f"write), fill {fill:.1f} GB/s")
    fractions = primitives(args.repeat, (64, 2048) if args.quick else SIZES)
    operations(args.repeat)
    squares = (256, 1024) if args.quick else (64, 128, 256, 512, 1024, 2048)
    odd = [] if args.quick else [(1000, 1000, 1000), (513, 257, 1031), (4096, 48, 512)]
    ratios = gemm(args.repeat, [(s, s, s) for s in squares] + odd)
    speed = sigmoids(args.repeat)
    set_threads(1)
    fused = equations(args.repeat)
    print("\ntargets:")
    for threads in (1, 2):
        r = ratios.get((1024, 1024, 1024, threads))
        print(f"  GEMM 1024^3, {threads} thread(s): {r:.0%} of OpenBLAS (target 70%): "
              f"{'met' if r >= 0.7 else 'NOT met'}")
    low = [(name, f) for name, f in fractions if f < 0.8]
    print(f"  unary/binary primitives at 2048x2048: lowest {min(f for _, f in fractions):.0%} "
          f"of copy (target 80%); below: {', '.join(f'{n} {f:.0%}' for n, f in low) or 'none'}")
    for threads, s in speed.items():
        print(f"  fast sigmoid vs torch.sigmoid, {threads} thread(s): {s:.2f}x "
              f"({'faster' if s > 1 else 'NOT faster'})")
    for name, s in fused.items():
        print(f"  {name}: the fused equation {s:.2f}x its nodes one by one "
              f"({'met' if s > 1 else 'NOT met'})")


if __name__ == "__main__":
    main()
