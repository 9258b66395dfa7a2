"""libxsmm's eltwise samples (``samples/eltwise``: binary, ternary, ReLU family,
reductions) as one-node equations: every kind with every broadcast the sample uses, on the
simulator against a numpy float64 reading written here from the samples' reference loops,
and on the C back end bit for bit with the simulator (each kind compiled once)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from npukit import tpp
from npukit.errors import OutOfBoundsError

RNG = np.random.default_rng(3803)
M, N, LD = 13, 5, 16
BCASTS = [(None, None), ("row", None), ("col", None), ("scalar", None), (None, "row"),
          (None, "col"), (None, "scalar")]
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
          "max": np.maximum, "min": np.minimum,
          "compare_gt": np.greater, "compare_ge": np.greater_equal, "compare_lt": np.less,
          "compare_le": np.less_equal, "compare_eq": np.equal, "compare_ne": np.not_equal}


def block(flat, m=M, n=N, ld=LD):
    return np.lib.stride_tricks.as_strided(flat, (m, n), (flat.itemsize, ld * flat.itemsize))


def read(flat, how):
    """What libxsmm's sample reads for an operand broadcast ``how`` (its apply_*_bcast):
    a row: element (0, j); a column: element (i, 0); a scalar: element (0, 0)."""
    full = block(flat).astype(np.float64)
    return {None: full, "row": np.broadcast_to(full[:1, :], full.shape),
            "col": np.broadcast_to(full[:, :1], full.shape),
            "scalar": np.broadcast_to(full[:1, :1], full.shape)}[how]


def shape_of(how):
    return {None: (M, N), "row": (1, N), "col": (M, 1), "scalar": (1, 1)}[how]


def run(eq, args, c=False, m=M, n=N, mask=None):
    """The kernel on the simulator (and, with ``c``, on C too, equal bit for bit)."""
    k = eq.dispatch(m, n, LD)
    out = np.full(LD * n, np.nan, np.float32)
    sim = k.run("sim", args, out, mask=None if mask is None else mask.copy())
    got = sim.outputs["out"]
    if c:
        out_c = np.full(LD * n, np.nan, np.float32)
        k(args, out_c, mask=None if mask is None else mask)
        assert np.array_equal(out_c[:got.size].view(np.uint32), got.view(np.uint32))
        if mask is not None:
            assert np.array_equal(mask[:sim.outputs["mask"].size], sim.outputs["mask"])
    return block(np.concatenate([got, out[got.size:]]), m, n), sim


def push_arg(eq, index, how, dtype="float32"):
    m, n = shape_of(how)
    return eq.push_back_arg(index, m, n, LD, dtype=dtype)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_kind_with_every_broadcast(name):
    """eltwise_binary_simple.c: each kind with no broadcast and a row, column or scalar
    broadcast of either operand; exactly the float32 result of the float64 operation on
    float32 values (one rounding), comparisons 1.0 or 0.0."""
    a = RNG.uniform(-2, 2, LD * N).astype(np.float32)
    b = RNG.uniform(-2, 2, LD * N).astype(np.float32)
    b[::3] = a[::3]                                    # ties for the comparisons
    for pos, (b0, b1) in enumerate(BCASTS):
        eq = tpp.Equation().push_back_binary_op(name, bcast_in0=b0, bcast_in1=b1)
        push_arg(push_arg(eq, 0, b0), 1, b1)
        got, _ = run(eq, [a, b], c=pos == len(name) % len(BCASTS))
        want = BINARY[name](read(a, b0), read(b, b1))
        assert np.array_equal(got, want.astype(np.float32)), (name, b0, b1)
    if name.startswith("compare"):   # the sample's output: a bitmask, ld in bits
        k = eq.dispatch(M, N, 16, dtype="bitmask")
        bits_c = np.full(2 * N, 0x5A, np.uint8)
        sim = k.run("sim", [a, b], bits_c.copy())
        k([a, b], bits_c)
        assert np.array_equal(bits_c[:sim.outputs["out"].size], sim.outputs["out"])
        got = (bits_c.reshape(N, 2)[:, np.arange(M) // 8] >> (np.arange(M) % 8)) & 1
        assert np.array_equal(got.T, want.astype(np.uint8))
        assert ((bits_c.reshape(N, 2)[:, 1] >> (M % 8)) == (0x5A >> (M % 8))).all()


def test_binary_muladd_adds_into_the_output():
    """eltwise_binary_simple.c's MULADD: out += in0 in1 (the product rounded, then the
    sum); with a broadcast operand too."""
    a = RNG.uniform(-2, 2, LD * N).astype(np.float32)
    b = RNG.uniform(-2, 2, LD * N).astype(np.float32)
    out0 = RNG.uniform(-2, 2, LD * N).astype(np.float32)
    for b1 in (None, "col"):
        eq = tpp.Equation().push_back_binary_op("LIBXSMM_MELTW_TYPE_BINARY_MULADD",
                                                bcast_in1=b1)
        k = push_arg(push_arg(eq, 0, None), 1, b1).dispatch(M, N, LD)
        out_c, out_s = out0.copy(), out0.copy()
        k([a, b], out_c)
        sim = k.run("sim", [a, b], out_s)
        assert np.array_equal(out_c[:sim.outputs["out"].size], sim.outputs["out"])
        prod = (read(a, None) * read(b, b1)).astype(np.float32).astype(np.float64)
        assert np.array_equal(block(out_c), (prod + block(out0)).astype(np.float32))
    with pytest.raises(tpp.WrongDimensionError, match="muladd adds into the output"):
        eq = tpp.Equation().push_back_unary_op("exp").push_back_binary_op("muladd")
        push_arg(push_arg(eq, 0, None), 1, None).dispatch(M, N, LD)


@pytest.mark.parametrize("name", ["muladd", "nmuladd", "select"])
def test_ternary_kind_with_every_broadcast(name):
    """libxsmm's ternary kinds: MULADD in0 in1 + in2, NMULADD in2 - in0 in1 (each product
    and sum rounded once to float32), SELECT (eltwise_ternary_simple.c) in1 where the
    bitmask's bit (byte i / 8 + j * ld / 8, bit i % 8) is set, in0 elsewhere; each operand
    broadcast as a row, a column or a scalar in turn."""
    x = [RNG.uniform(-2, 2, LD * N).astype(np.float32) for _ in range(3)]
    bits = RNG.integers(0, 256, LD // 8 * N, dtype=np.uint8)
    for pos, b in enumerate([None, "row", "col", "scalar"]):
        for which in range(3):
            flags = [None, None, None]
            flags[which] = b
            eq = tpp.Equation().push_back_ternary_op(name, *flags)
            push_arg(push_arg(eq, 0, flags[0]), 1, flags[1])
            if name == "select":
                push_arg(eq, 3, flags[2], "bitmask")
            else:
                push_arg(eq, 2, flags[2])
            got, _ = run(eq, [*x, bits], c=which == pos % 3 and b is not None)
            a0, a1 = read(x[0], flags[0]).astype(np.float32), read(x[1], flags[1])
            if name == "select":
                i, j = np.meshgrid(np.arange(M), np.arange(N), indexing="ij")
                i, j = {None: (i, j), "row": (0 * i, j), "col": (i, 0 * j),
                        "scalar": (0 * i, 0 * j)}[flags[2]]
                bit = (bits[i // 8 + j * (LD // 8)] >> (i % 8)) & 1
                want = np.where(bit == 1, a1, a0)
            else:
                prod = (a0 * a1.astype(np.float32)).astype(np.float64)  # rounded once
                a2 = read(x[2], flags[2])
                want = prod + a2 if name == "muladd" else a2 - prod
            assert np.array_equal(got, want.astype(np.float32)), (name, which, b)


def test_relu_family_and_its_backward_kinds():
    """eltwise_unary_relu.c: relu and leaky relu (alpha 0.1) with their bitmasks, elu;
    their backward kinds from the bitmask (relu_inv, leaky_relu_inv) and from elu's forward
    output (elu_inv: dy where the output is above 0, dy (out + alpha) elsewhere)."""
    alpha = np.float32(0.1)
    x = RNG.uniform(-2, 2, LD * N).astype(np.float32)
    dy = RNG.uniform(-1, 1, LD * N).astype(np.float32)
    X = block(x).astype(np.float64)
    mld = -(-LD // 16) * 2
    masks = {}
    for kind, want in (("relu", np.where(X <= 0, 0, X)),
                       ("leaky_relu", np.where(X <= 0, np.float64(alpha) * X, X)),
                       ("elu", np.where(X <= 0, np.float64(alpha) * np.expm1(X), X))):
        eq = tpp.Equation().push_back_unary_op(kind, bitmask=kind != "elu",
                                               alpha=None if kind == "relu" else alpha)
        mask = None if kind == "elu" else np.zeros(mld * N, np.uint8)
        got, _ = run(push_arg(eq, 0, None), [x], c=True, mask=mask)
        tol = 2 ** -23 * np.abs(want) + (1e-7 if kind == "elu" else 0)
        assert (np.abs(got - want) <= tol).all(), kind
        if mask is not None:
            bits = (mask.reshape(N, mld)[:, np.arange(M) // 8] >> (np.arange(M) % 8)) & 1
            assert np.array_equal(bits.T, (X > 0).astype(np.uint8))
            masks[kind] = mask
    elu_out = np.where(X <= 0, np.float64(alpha) * np.expm1(X), X).astype(np.float32)
    fwd = np.zeros(LD * N, np.float32)
    block(fwd)[...] = elu_out
    D = block(dy).astype(np.float64)
    for kind, second, want in (
            ("relu_inv", masks["relu"], np.where(X > 0, D, 0)),
            ("leaky_relu_inv", masks["leaky_relu"], np.where(X > 0, D, np.float64(alpha) * D)),
            ("elu_inv", fwd, np.where(elu_out > 0, D, D * (elu_out + alpha)))):
        eq = tpp.Equation().push_back_binary_op(f"LIBXSMM_MELTW_TYPE_UNARY_{kind.upper()}",
                                                alpha=None if kind == "relu_inv" else alpha)
        push_arg(eq, 0, None)
        if kind == "elu_inv":
            push_arg(eq, 1, None)
        else:
            eq.push_back_arg(1, M, N, mld * 8, dtype="bitmask")
        got, _ = run(eq, [dy, second], c=kind == "elu_inv")
        assert (np.abs(got - want) <= 2 ** -23 * np.abs(want)).all(), kind


@pytest.mark.parametrize("reduce", ["rows", "cols"])
def test_reductions_and_the_two_output_reduction(reduce):
    """eltwise_unary_reduce.c: sums, sums of squares, max, min, absmax over the rows (a
    value per column) or the columns (a value per row), folded in order; REDUCE_X_X2_OP_ADD
    writes both sums (m x 2 over the columns: the sums then the squares; 2 x n over the
    rows, interleaved per column)."""
    x = RNG.uniform(-2, 2, LD * N).astype(np.float32)
    X = block(x).astype(np.float64)
    axis = 0 if reduce == "rows" else 1
    for kind, fn in (("reduce_add", np.sum), ("reduce_x2_add", lambda v, axis: np.sum(
            v * v, axis)), ("reduce_max", np.max), ("reduce_min", np.min),
                     ("reduce_absmax", lambda v, axis: np.max(np.abs(v), axis)),
                     ("reduce_x_x2_add", None)):
        eq = tpp.Equation().push_back_unary_op(kind, reduce=reduce)
        push_arg(eq, 0, None)
        m, n = (1, N) if reduce == "rows" else (M, 1)
        if kind == "reduce_x_x2_add":
            m, n = (2, N) if reduce == "rows" else (M, 2)
        got, _ = run(eq, [x], c=kind == "reduce_x_x2_add", m=m, n=n)
        if kind == "reduce_x_x2_add":
            want = np.stack([X.sum(axis), (X * X).sum(axis)], axis=axis)
        else:
            want = fn(X, axis=axis).reshape(m, n)
        bound = 0 if "max" in kind or "min" in kind else \
            X.shape[axis] * 2 ** -23 * np.abs(X * X).sum(axis).max() * 4
        assert (np.abs(got - want) <= bound).all(), kind
        if "add" in kind:    # REDUCE_INIT_ACC: onto the old output, C and simulator alike
            eq = tpp.Equation().push_back_unary_op(kind, reduce=reduce, init_acc=True)
            k = push_arg(eq, 0, None).dispatch(m, n, LD)
            old = RNG.uniform(-1, 1, LD * n).astype(np.float32)
            out_c, out_s = old.copy(), old.copy()
            k([x], out_c)
            sim = k.run("sim", [x], out_s)
            assert np.array_equal(out_c[:sim.outputs["out"].size], sim.outputs["out"])
            assert (np.abs(block(out_c, m, n) - (want + block(old, m, n))) <= bound + 1e-6
                    ).all(), kind


@pytest.mark.parametrize("by", ["rows", "cols", "offs"])
def test_gather_and_scatter(by):
    """eltwise_unary_gather_scatter.c: GATHER and SCATTER by rows, columns or offsets,
    uint32 and uint64 indices, float32 and bfloat16 elements: C and the simulator equal the
    sample's reference loops (written here afresh); elements no index names keep their
    canary."""
    from npukit.dtypes import dtype
    m, n, ld_small, big_m, big_n, ld_big = 6, 4, 7, 11, 9, 13
    for k, (gather, itype, etype) in enumerate([(True, np.uint32, np.float32),
                                                (False, np.uint64, np.float32),
                                                (True, np.uint64, dtype("bfloat16"))]):
        count = {"rows": m, "cols": n, "offs": m * n}[by]
        space = {"rows": big_m, "cols": big_n, "offs": ld_big * big_n}[by]
        idx = RNG.permutation(space)[:count].astype(itype)
        small = RNG.uniform(-4, 4, ld_small * n).astype(etype)
        big = RNG.uniform(-4, 4, ld_big * big_n).astype(etype)
        src, dst_size = (big, ld_small * n) if gather else (small, ld_big * big_n)
        want = np.full(dst_size, -7.0, np.float64)
        for j in range(n):
            for i in range(m):
                if by == "rows":
                    at = int(idx[i]) + j * ld_big
                elif by == "cols":
                    at = i + int(idx[j]) * ld_big
                else:
                    at = int(idx[i + j * m])
                if gather:
                    want[i + j * ld_small] = src[at]
                else:
                    want[at] = src[i + j * ld_small]
        fn = tpp.gather if gather else tpp.scatter
        lds = dict(ld_in=ld_big, ld_out=ld_small) if gather else \
            dict(ld_in=ld_small, ld_out=ld_big)
        out_c = np.full(dst_size, -7.0, etype)
        fn(src, idx, out_c, m=m, n=n, by=by, **lds)
        sim = fn(src, idx, np.full(dst_size, -7.0, etype), m=m, n=n, by=by, backend="sim",
                 **lds)
        got = sim.outputs["out"]
        assert np.array_equal(out_c[:got.size].astype(np.float64), got.astype(np.float64))
        assert np.array_equal(out_c.astype(np.float64), want), (by, k)
    bad = np.array([0, big_m * ld_big * 9, 0, 0], np.uint32)
    with pytest.raises(OutOfBoundsError, match=r"idx\[1\] = \d+ reaches element"):
        tpp.gather(big, bad, np.zeros(ld_small * n, big.dtype), m=2, n=2, by=by)


UNARY = {"identity": lambda x: x, "zero": lambda x: 0 * x, "square": lambda x: x * x,
         "sqrt": np.sqrt, "tanh": np.tanh, "tanh_inv": lambda x: 1 - np.tanh(x) ** 2,
         "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
         "sigmoid_inv": lambda x: np.exp(-x) / (1 + np.exp(-x)) ** 2,
         "gelu": lambda x: 0.5 * x * (1 + ERF(x / np.sqrt(2))),
         "gelu_inv": lambda x: 0.5 * (1 + ERF(x / np.sqrt(2))) + x * np.exp(-x * x / 2)
         / np.sqrt(2 * np.pi),
         "negate": lambda x: -x, "increment": lambda x: x + 1, "reciprocal": lambda x: 1 / x,
         "rsqrt": lambda x: x ** -0.5, "exp": np.exp}
ERF = np.vectorize(math.erf)
LIBXSMM_UNARY_NAME = {"identity": "IDENTITY", "zero": "XOR", "square": "X2", "sqrt": "SQRT",
                      "tanh": "TANH", "tanh_inv": "TANH_INV", "sigmoid": "SIGMOID",
                      "sigmoid_inv": "SIGMOID_INV", "gelu": "GELU", "gelu_inv": "GELU_INV",
                      "negate": "NEGATE", "increment": "INC", "reciprocal": "RECIPROCAL",
                      "rsqrt": "RECIPROCAL_SQRT", "exp": "EXP"}


@pytest.mark.parametrize("how", [None, "row", "col", "scalar"])
def test_unary_simple_kinds_with_each_broadcast(how):
    """eltwise_unary_simple.c: its fifteen kinds (libxsmm's names: IDENTITY, XOR, X2, SQRT,
    TANH, TANH_INV, SIGMOID, SIGMOID_INV, GELU, GELU_INV, NEGATE, INC, RECIPROCAL,
    RECIPROCAL_SQRT, EXP), the operand read whole or as a row, a column or a scalar: within
    2 float32 ulps of the float64 value; REPLICATE_COL_VAR is the identity over a column."""
    x = RNG.uniform(0.05, 3, LD * N).astype(np.float32)
    x[1::2] *= -1
    for pos, name in enumerate(sorted(UNARY)):
        src = np.abs(x) if name in ("sqrt", "rsqrt") else x
        eq = tpp.Equation().push_back_unary_op(
            f"LIBXSMM_MELTW_TYPE_UNARY_{LIBXSMM_UNARY_NAME[name]}", bcast_in0=how,
            shape=(M, N) if how else None)
        compile_c = pos % 5 == [None, "row", "col", "scalar"].index(how)
        got, _ = run(push_arg(eq, 0, how), [src], c=compile_c)
        want = UNARY[name](read(src, how))
        ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
        assert (np.abs(got - want) <= 2 * ulp + 1e-15).all(), (name, how)


def test_the_bit_packing_kinds():
    """eltwise_unary_simple.c's UNZIP (a float32 into its low and high 16 bits) and
    DECOMP_FP32_TO_BF16X2 / X3 (x = hi + mid (+ lo), the leading parts x's truncated high
    bits, the last rounded to nearest even); eltwise_binary_simple.c's ZIP (two 16-bit
    blocks into 32-bit words): C and simulator bit for bit, against the bits numpy gives."""
    from npukit.dtypes import dtype
    bf16 = dtype("bfloat16")
    x = RNG.uniform(-100, 100, LD * N).astype(np.float32)
    bits = block(x.view(np.uint32))
    halves = np.full(2 * LD * N, 7, np.uint16).view(bf16)
    tpp.unzip(x, halves, m=M, n=N, ldi=LD, ldo=LD)
    sim = tpp.unzip(x, np.full(2 * LD * N, 7, np.uint16).view(bf16), m=M, n=N, ldi=LD,
                    ldo=LD, backend="sim")
    u16 = halves.view(np.uint16)
    assert np.array_equal(u16[:sim.outputs["out"].size], sim.outputs["out"].view(np.uint16))
    assert np.array_equal(block(u16), bits & 0xFFFF)
    assert np.array_equal(block(u16[LD * N:]), bits >> 16)
    out = np.zeros(LD * N, np.float32)
    tpp.zip_halves(u16[:LD * N].view(bf16), u16[LD * N:].view(bf16), out, m=M, n=N, ldi0=LD,
                   ldi1=LD, ldo=LD)
    assert np.array_equal(block(out.view(np.uint32)), bits)
    for parts in (2, 3):
        got = np.zeros(parts * LD * N, bf16)
        tpp.decompose_bf16(x, got, m=M, n=N, parts=parts, ldi=LD, ldo=LD)
        sim = tpp.decompose_bf16(x, np.zeros_like(got), m=M, n=N, parts=parts, ldi=LD,
                                 ldo=LD, backend="sim")
        assert np.array_equal(got[:sim.outputs["out"].size].view(np.uint16),
                              sim.outputs["out"].view(np.uint16))
        p = [block(got[k * LD * N:].astype(np.float64)) for k in range(parts)]
        X = block(x).astype(np.float64)
        hi = (bits & 0xFFFF0000).view(np.float32).astype(np.float64)
        assert np.array_equal(p[0], hi)
        assert (np.abs(sum(p) - X) <= np.abs(X) * 2.0 ** (-7 * parts - 2)).all()  # truncations


@pytest.mark.parametrize("op", ["add", "max", "min"])
def test_reduce_cols_idx(op):
    """eltwise_unary_reduce.c's REDUCE_COLS_IDX_OP_ADD / MAX / MIN: each row over the listed
    columns in the list's order (uint32 and uint64 indices); max and min with their argop
    record (RECORD_ARGOP, from -FLT_MAX / FLT_MAX: INF_ACC), add onto the old output
    (INIT_ACC) too; C and the simulator bit for bit, against the sample's loops."""
    big_n = 9
    x = RNG.integers(-6, 7, LD * big_n).astype(np.float32)    # ties for the argop
    for itype in (np.uint32, np.uint64):
        idx = RNG.permutation(big_n)[:5].astype(itype)
        for accumulate in ((False, True) if op == "add" else (False,)):
            out0 = RNG.uniform(-1, 1, M + 2).astype(np.float32)
            out_c, out_s = out0.copy(), out0.copy()
            arg_c = None if op == "add" else np.full(M + 2, 99, itype)
            kw = dict(m=M, ld=LD, op=op, accumulate=accumulate)
            tpp.reduce_cols_idx(x, idx, out_c, argop=arg_c, **kw)
            sim = tpp.reduce_cols_idx(x, idx, out_s, argop=None if arg_c is None else
                                      np.full(M + 2, 99, itype), backend="sim", **kw)
            assert np.array_equal(out_c[:M], sim.outputs["out"])
            assert np.array_equal(out_c[M:], out0[M:])
            X = block(x, M, big_n).astype(np.float64)
            if op == "add":
                want = X[:, idx.astype(np.int64)].sum(1) + (out0[:M] if accumulate else 0)
                assert np.allclose(out_c[:M], want, rtol=0, atol=1e-5)
                continue
            assert np.array_equal(arg_c[:M], sim.outputs["arg"])
            for i in range(M):
                vals = [X[i, int(j)] for j in idx]
                best = max(vals) if op == "max" else min(vals)
                assert out_c[i] == best
                assert arg_c[i] == idx[vals.index(best)]      # the first on ties
            assert (arg_c[M:] == 99).all()
    with pytest.raises(OutOfBoundsError, match=r"idx\[0\] = 40 reaches element"):
        tpp.reduce_cols_idx(x, np.array([40], np.uint32), np.zeros(M, np.float32), m=M,
                            ld=LD)
