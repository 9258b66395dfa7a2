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
    """Build and simulate one mul kernel; returns (program, result, matches numpy)."""
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
    return prog, res, bool((data == want).all()), (a, b, bs)


def _reduce_case(vector):
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (32, 300)).astype(np.int8)
    prog = build(K.reduce_rows, target="torq", input=spec((32, 300), "int8"),
                 output=spec((300,), "int8"), vector=vector)
    out = np.zeros(300, np.int8)
    res = prog.run(input=x, output=out)
    return prog, res, bool((out == np.clip(x.astype(np.int64).sum(0), -128, 127)).all()), (x,)


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
    print(f"  {'kernel':<30}{'shape':<17}{'cycles':>7}{'roofline':>9}{'elem/cycle':>11}"
          f"{'LRAM bytes':>11}  numpy")
    for name, shape, make in cases:
        prog, res, ok, _ = make()
        elems = prog.params[-1][1].size  # the output tensor's elements
        print(f"  {name:<30}{shape:<17}{res.cycles:>7}{res.report.roofline:>9}"
              f"{elems / res.cycles:>11.2f}{res.report.bytes_moved.get('LRAM', 0):>11}"
              f"  {'ok' if ok else 'MISMATCH'}")
    prog, *_ = _mul_case(K.mul, (2, 5, 7), (5, 1), (2, 5, 7))
    print("\n  Derived NDL descriptors for mul [2,5,7] x [5,1] (counts/strides in bytes):")
    for t in prog.transfers():
        print(f"    {t.tensor:<11}{t.src:>5} -> {t.dst:<5} offset {t.offset:<3} counts "
              f"{str(t.counts):<16} strides {t.strides}")


def demo() -> None:
    print("npukit demo: one sequential description, every transfer derived, simulated and run.")
    layouts()
    easykernel()
    from .lut.demo import demo as lut_demo

    lut_demo()
