"""libxsmm's equation samples (``samples/equation``), each written as one equation and run
as one fused kernel on the C back end and the simulator: the two agree bit for bit, and
both meet the sample's own tolerance (libxsmm's ``normf_rel``, the relative Frobenius norm
of the error) against a numpy float64 reading written here from the sample's
mathematics. Outputs are poisoned with a canary first; every element of the block is
written and nothing beyond it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from npukit import tpp

RNG = np.random.default_rng(38)
CANARY = np.uint32(0x7FC0BEEF)
ERF = np.vectorize(math.erf)


def canary(n: int) -> np.ndarray:
    return np.full(n, CANARY, np.uint32).view(np.float32)


def block(flat: np.ndarray, m: int, n: int, ld: int) -> np.ndarray:
    """The m x n column-major block of ``flat`` with leading dimension ``ld``, as [i, j]."""
    return np.lib.stride_tricks.as_strided(flat, (m, n), (flat.itemsize, ld * flat.itemsize))


def normf_rel(got, want) -> float:
    want = np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def run_both(kernel, args, m, n, ld, op_args=None, mask=None):
    """The kernel on C and on the simulator, outputs canary-poisoned: C's output, after
    checking the two agree bit for bit and that exactly the block was written."""
    out_c, out_s = canary(ld * n + 5), canary(ld * n + 5)
    ops_s = {p: a.copy() for p, a in (op_args or {}).items()}
    args_s = [ops_s.get(next((p for p, b in (op_args or {}).items() if b is a), None), a)
              for a in args]
    mask_s = None if mask is None else mask.copy()
    kernel(args, out_c, op_args=op_args, mask=mask)
    sim = kernel.run("sim", args_s, out_s, op_args=ops_s or None, mask=mask_s)
    assert np.array_equal(sim.outputs["out"].view(np.uint32), out_c[:sim.outputs["out"].size]
                          .view(np.uint32))
    inside = np.zeros(out_c.size, bool)
    block(inside, m, n, ld)[...] = True
    assert (out_c.view(np.uint32)[~inside] == CANARY).all()
    assert not np.isnan(out_c[inside]).any()
    if mask is not None:
        assert np.array_equal(sim.outputs["mask"], mask[:sim.outputs["mask"].size])
    for p in ops_s:
        assert np.array_equal(sim.outputs[f"op{p}"], op_args[p][:sim.outputs[f"op{p}"].size])
    return out_c


def test_equation_simple():
    """samples/equation/equation_simple.c: out = (arg0 + 1 + arg1) * (arg2^2 + arg3),
    pushed as libxsmm pushes it (MUL, ADD, INC, arg0, arg1, ADD, X2, arg2, arg3); bound
    1e-5."""
    m, n, ld = 23, 9, 29
    eq = tpp.Equation()
    eq.push_back_binary_op("LIBXSMM_MELTW_TYPE_BINARY_MUL")
    eq.push_back_binary_op("add").push_back_unary_op("LIBXSMM_MELTW_TYPE_UNARY_INC")
    eq.push_back_arg(0, m, n, ld).push_back_arg(1, m, n, ld)
    eq.push_back_binary_op("add").push_back_unary_op("LIBXSMM_MELTW_TYPE_UNARY_X2")
    eq.push_back_arg(2, m, n, ld).push_back_arg(3, m, n, ld)
    k = eq.dispatch(m, n, ld)
    assert k.stages() == 1
    args = [RNG.uniform(-1, 1, ld * n).astype(np.float32) for _ in range(4)]
    got = block(run_both(k, args, m, n, ld), m, n, ld)
    a = [block(x, m, n, ld).astype(np.float64) for x in args]
    want = (a[0] + 1 + a[1]) * (a[2] ** 2 + a[3])
    assert normf_rel(got, want) <= 1e-5
    out = np.zeros(ld * n, np.float32)    # called again: new data in the same arrays, then
    for step in range(3):                 # a new array in place of one, are read anew
        args[0][:] = step
        if step == 2:
            args[3] = args[3] + 1
        k(args, out)
        a = [block(x, m, n, ld).astype(np.float64) for x in args]
        assert normf_rel(block(out, m, n, ld), (a[0] + 1 + a[1]) * (a[2] ** 2 + a[3])) <= 1e-5


def test_equation_relu_with_its_bitmask():
    """samples/equation/equation_relu.c: out = relu(1 + (arg0 - arg1) + arg2) and its
    bitmask (bit i % 8 of byte i / 8 + j * mask_ld set where the value is above 0, mask_ld
    = ceil(ld / 16) * 2 bytes); bound 1e-5, the mask exact where the value is not within
    rounding of 0, bits past m kept."""
    m, n, ld = 37, 6, 40
    eq = tpp.Equation()
    eq.push_back_unary_op("relu", bitmask=True).push_back_binary_op("add")
    eq.push_back_unary_op("increment").push_back_binary_op("sub")
    for i in range(3):
        eq.push_back_arg(i, m, n, ld)
    k = eq.dispatch(m, n, ld)
    args = [RNG.uniform(-1, 1, ld * n).astype(np.float32) for _ in range(3)]
    mld = -(-ld // 16) * 2
    mask = np.full(mld * n, 0xA5, np.uint8)
    got = block(run_both(k, args, m, n, ld, mask=mask), m, n, ld)
    a = [block(x, m, n, ld).astype(np.float64) for x in args]
    res = 1 + (a[0] - a[1]) + a[2]
    assert normf_rel(got, np.maximum(res, 0)) <= 1e-5
    assert 0 < (got == 0).sum() < got.size
    bits = (mask.reshape(n, mld)[:, np.arange(m) // 8] >> (np.arange(m) % 8)) & 1
    clear = np.abs(res.T) > 1e-6
    assert np.array_equal(bits[clear], (res.T > 0)[clear])
    assert ((mask.reshape(n, mld)[:, -1] >> (m % 8)) == (0xA5 >> (m % 8))).all()


def softmax_fwd(s3: int, s1: int, ld: int) -> tpp.EquationKernel:
    """samples/equation/equation_softmax.c's forward equation, as libxsmm pushes it: the
    exponentials dumped to op argument 31, which the caller also passes as argument 0."""
    eq = tpp.Equation()
    eq.push_back_binary_op("mul", bcast_in1="scalar").push_back_arg(0, s3, s1, s3)
    eq.push_back_unary_op("reciprocal").push_back_unary_op("reduce_add", reduce="rows")
    eq.push_back_unary_op("reduce_add", reduce="cols").push_back_unary_op("dump", op_arg=31)
    eq.push_back_unary_op("exp").push_back_binary_op("sub", bcast_in1="scalar")
    eq.push_back_arg(1, s3, s1, ld)
    eq.push_back_unary_op("LIBXSMM_MELTW_TYPE_UNARY_REDUCE_X_OP_MAX", reduce="rows")
    eq.push_back_unary_op("reduce_max", reduce="cols").push_back_arg(1, s3, s1, ld)
    return eq.dispatch(s3, s1, ld)


def softmax_bwd(s3: int, s1: int, ld: int) -> tpp.EquationKernel:
    """The backward pass in one equation (libxsmm's sample uses two, the product first):
    ginp = out * gout - sum(out * gout) * out, libxsmm's NMULADD (in2 - in0 * in1)."""
    eq = tpp.Equation()
    eq.push_back_ternary_op("LIBXSMM_MELTW_TYPE_TERNARY_NMULADD", bcast_in0="scalar")
    eq.push_back_unary_op("reduce_add", reduce="rows")
    eq.push_back_unary_op("reduce_add", reduce="cols")
    eq.push_back_binary_op("mul").push_back_arg(0, s3, s1, ld).push_back_arg(1, s3, s1, ld)
    eq.push_back_arg(1, s3, s1, ld)
    eq.push_back_binary_op("mul").push_back_arg(0, s3, s1, ld).push_back_arg(1, s3, s1, ld)
    return eq.dispatch(s3, s1, ld)


def test_equation_softmax_forward_and_backward():
    """samples/equation/equation_softmax.c: per block s2 of an S1 x S2 x S3 tensor,
    softmax over its S1 x S3 elements (max subtracted), then the backward pass; bound 0.009
    (the sample's float32 bound), each block one call of one fused kernel."""
    s1, s2, s3 = 5, 3, 20
    ld = s2 * s3
    fwd, bwd = softmax_fwd(s3, s1, ld), softmax_bwd(s3, s1, ld)
    assert fwd.stages() == 6 and bwd.stages() == 3
    inp = RNG.uniform(-4, 4, (s1, s2, s3)).astype(np.float32)
    gout = RNG.uniform(-1, 1, (s1, s2, s3)).astype(np.float32)
    out = np.empty((s1, s2, s3), np.float32)
    ginp = np.empty((s1, s2, s3), np.float32)
    for b in range(s2):
        tmp = canary(s3 * s1)
        flat_in = inp.reshape(-1)[b * s3:].copy()
        res = run_both(fwd, [tmp, flat_in], s3, s1, ld, op_args={31: tmp})
        out[:, b, :] = block(res, s3, s1, ld).T
        flat_out = out.reshape(-1)[b * s3:].copy()
        res = run_both(bwd, [gout.reshape(-1)[b * s3:].copy(), flat_out], s3, s1, ld)
        ginp[:, b, :] = block(res, s3, s1, ld).T
    x = inp.astype(np.float64)
    e = np.exp(x - x.max(axis=(0, 2), keepdims=True))
    want = e / e.sum(axis=(0, 2), keepdims=True)
    assert normf_rel(out, want) <= 0.009
    g = gout.astype(np.float64)
    want_g = want * (g - (g * want).sum(axis=(0, 2), keepdims=True))
    assert normf_rel(ginp, want_g) <= 0.009


S1, S2, S3 = 4, 3, 24       # the layernorm blocks: S3 x S1 elements each, S2 of them
LN_LD = S2 * S3


def moment(eq: tpp.Equation, kind: str, scale: int = 3) -> None:
    """c * sum over the block of x (``reduce_add``) or of x^2 (``reduce_x2_add``); x is
    argument 0, c (1 / (S1 S3)) argument ``scale``."""
    eq.push_back_binary_op("mul").push_back_unary_op("reduce_add", reduce="rows")
    eq.push_back_unary_op(kind, reduce="cols").push_back_arg(0, S3, S1, LN_LD)
    eq.push_back_arg(scale, 1, 1)


def rstd(eq: tpp.Equation, dump: bool = False) -> None:
    """1 / sqrt(max(E[x^2] - mean^2, 0) + eps), as libxsmm's sample computes it; eps is
    argument 5, 0 argument 4; ``dump`` also writes it to op argument 1."""
    if dump:
        eq.push_back_unary_op("dump", op_arg=1)
    eq.push_back_unary_op("reciprocal").push_back_unary_op("sqrt")
    eq.push_back_binary_op("add").push_back_binary_op("max").push_back_binary_op("sub")
    moment(eq, "reduce_x2_add")
    eq.push_back_unary_op("square")
    moment(eq, "reduce_add")
    eq.push_back_arg(4, 1, 1).push_back_arg(5, 1, 1)


def layernorm_forward() -> tpp.EquationKernel:
    """out = (x rstd - mean rstd) gamma + beta by two MULADDs, mean and rstd dumped to op
    arguments 0 and 1 (the sample's mean[] and var[] outputs)."""
    eq = tpp.Equation()
    eq.push_back_ternary_op("muladd")
    eq.push_back_ternary_op("muladd", bcast_in1="scalar", bcast_in2="scalar")
    eq.push_back_arg(0, S3, S1, LN_LD)
    rstd(eq, dump=True)
    eq.push_back_binary_op("mul").push_back_unary_op("negate")
    rstd(eq)
    eq.push_back_unary_op("dump", op_arg=0)
    moment(eq, "reduce_add")
    eq.push_back_arg(1, S3, S1, S3).push_back_arg(2, S3, S1, S3)
    return eq.dispatch(S3, S1, LN_LD)


def layernorm_din() -> tpp.EquationKernel:
    """The backward pass's din in ONE equation (the sample: two MUL_AND_REDUCE equations,
    scalar code, one more equation): with g = dout gamma, db = sum g, ds = sum g x,
    b = (db mean - ds) a^3 c, e = -b mean - db a c: din = (dout a) gamma + (x b + e).
    Arguments: 0 x, 1 a (rstd), 2 mean, 3 dout, 4 gamma, 5 c = 1 / (S1 S3)."""
    def total(eq: tpp.Equation, with_x: bool) -> None:    # db, or ds with x
        eq.push_back_unary_op("reduce_add", reduce="rows")
        eq.push_back_unary_op("reduce_add", reduce="cols")
        if with_x:
            eq.push_back_binary_op("mul")
        eq.push_back_binary_op("mul").push_back_arg(3, S3, S1, LN_LD)
        eq.push_back_arg(4, S3, S1, S3)
        if with_x:
            eq.push_back_arg(0, S3, S1, LN_LD)

    def b(eq: tpp.Equation) -> None:
        eq.push_back_binary_op("mul").push_back_binary_op("mul").push_back_binary_op("mul")
        eq.push_back_binary_op("mul").push_back_binary_op("sub").push_back_binary_op("mul")
        total(eq, False)
        eq.push_back_arg(2, 1, 1)
        total(eq, True)
        for _ in range(3):
            eq.push_back_arg(1, 1, 1)
        eq.push_back_arg(5, 1, 1)

    eq = tpp.Equation().push_back_ternary_op("muladd")
    eq.push_back_binary_op("mul", bcast_in1="scalar").push_back_arg(3, S3, S1, LN_LD)
    eq.push_back_arg(1, 1, 1).push_back_arg(4, S3, S1, S3)
    eq.push_back_ternary_op("muladd", bcast_in1="scalar", bcast_in2="scalar")
    eq.push_back_arg(0, S3, S1, LN_LD)
    b(eq)
    eq.push_back_binary_op("sub").push_back_binary_op("mul").push_back_unary_op("negate")
    b(eq)
    eq.push_back_arg(2, 1, 1)
    eq.push_back_binary_op("mul").push_back_binary_op("mul")
    total(eq, False)
    eq.push_back_arg(1, 1, 1).push_back_arg(5, 1, 1)
    return eq.dispatch(S3, S1, LN_LD)


def test_equation_layernorm_forward_and_backward():
    """samples/equation/equation_layernorm.c: the forward pass in ONE equation (the sample:
    two reductions, scalar code, one equation), its mean and rstd dumped as the sample's
    mean[] and var[]; the backward pass: din in one equation, dgamma += (a x + b) dout
    (the sample's MULADD equation, here adding into the output) and dbeta += dout, per
    block; each against the float64 layer norm and its gradient, bound 2e-4 (the
    sample's)."""
    inp = RNG.uniform(-1, 3, (S1, S2, S3)).astype(np.float32)
    gamma = RNG.uniform(0.5, 1.5, (S1, S3)).astype(np.float32)
    beta = RNG.uniform(-1, 1, (S1, S3)).astype(np.float32)
    dout = RNG.uniform(-1, 1, (S1, S2, S3)).astype(np.float32)
    c = np.array([1.0 / (S1 * S3)], np.float32)
    scalars = [c, np.zeros(1, np.float32), np.array([np.finfo(np.float32).eps], np.float32)]
    fwd, din_k = layernorm_forward(), layernorm_din()
    dgamma_k = tpp.Equation().push_back_binary_op("muladd").push_back_ternary_op(
        "muladd", bcast_in1="scalar", bcast_in2="scalar").push_back_arg(
        0, S3, S1, LN_LD).push_back_arg(1, 1, 1).push_back_arg(2, 1, 1).push_back_arg(
        3, S3, S1, LN_LD).dispatch(S3, S1, S3)
    dbeta_k = tpp.Equation().push_back_binary_op("add").push_back_arg(
        0, S3, S1, LN_LD).push_back_arg(1, S3, S1, S3).dispatch(S3, S1, S3)
    out, din = np.empty_like(inp), np.empty_like(inp)
    mean, rs = np.empty(S2, np.float32), np.empty(S2, np.float32)
    dgamma, dbeta = np.zeros(S1 * S3, np.float32), np.zeros(S1 * S3, np.float32)
    for s2 in range(S2):
        x = inp.reshape(-1)[s2 * S3:].copy()
        go = dout.reshape(-1)[s2 * S3:].copy()
        ops = {0: canary(1), 1: canary(1)}
        res = run_both(fwd, [x, gamma.reshape(-1), beta.reshape(-1), *scalars], S3, S1,
                       LN_LD, op_args=ops)
        out[:, s2, :] = block(res, S3, S1, LN_LD).T
        mean[s2], rs[s2] = ops[0][0], ops[1][0]
        a, m = rs[s2:s2 + 1].copy(), mean[s2:s2 + 1].copy()
        res = run_both(din_k, [x, a, m, go, gamma.reshape(-1), c], S3, S1, LN_LD)
        din[:, s2, :] = block(res, S3, S1, LN_LD).T
        b = (-a * m).astype(np.float32)                       # the sample's b = -a mean
        dgamma_k([x, a, b, go], dgamma)
        dbeta_k([go, dbeta.copy()], dbeta)
    X = inp.astype(np.float64)
    mu = X.mean(axis=(0, 2), keepdims=True)
    r = 1 / np.sqrt(X.var(axis=(0, 2), keepdims=True) + np.finfo(np.float32).eps)
    xhat = (X - mu) * r
    assert normf_rel(out, xhat * gamma[:, None, :] + beta[:, None, :]) <= 2e-4
    assert normf_rel(mean, mu.reshape(-1)) <= 2e-4 and normf_rel(rs, r.reshape(-1)) <= 2e-4
    g = dout.astype(np.float64) * gamma[:, None, :]
    want = r * (g - g.mean(axis=(0, 2), keepdims=True)
                - xhat * (g * xhat).mean(axis=(0, 2), keepdims=True))
    assert normf_rel(din, want) <= 2e-4
    D = dout.astype(np.float64)
    assert normf_rel(dgamma.reshape(S1, S3), (D * xhat).sum(axis=1)) <= 2e-4
    assert normf_rel(dbeta.reshape(S1, S3), D.sum(axis=1)) <= 2e-4


def gelu(x):
    return 0.5 * x * (1 + ERF(x / np.sqrt(2)))


def vnni(a: np.ndarray) -> np.ndarray:
    """Batches r of m x k matrices a[r] in libxsmm's VNNI-2 layout, flat: element (i, p)
    of batch r at r * m * k + (p // 2) * 2 * m + 2 * i + p % 2."""
    br, m, k = a.shape
    return a.reshape(br, m, k // 2, 2).transpose(0, 2, 1, 3).reshape(-1)


@pytest.mark.parametrize("act", ["relu", "sigmoid"])
def test_equation_matmul_float32(act):
    """samples/equation/equation_matmul.c, its float32 equations: gelu(A + B) *
    tanh(C D); gelu(A) * tanh(B + sum_r C_r D_r) (the ternary BRGEMM, B its
    accumulator); act(colbias + 1 + sum_r C_r D_r) (a column broadcast); bound 1e-5."""
    m, n, k, br = 20, 12, 8, 3
    a0, a1 = (RNG.uniform(-1, 1, m * n).astype(np.float32) for _ in range(2))
    c = RNG.uniform(-1, 1, (br, k, m)).astype(np.float32)   # batch r: column-major m x k
    d = RNG.uniform(-1, 1, (br, n, k)).astype(np.float32)   # batch r: column-major k x n
    bias = RNG.uniform(-1, 1, m).astype(np.float32)
    C = c.transpose(0, 2, 1).astype(np.float64)             # [r, i, p]
    D = d.transpose(0, 2, 1).astype(np.float64)             # [r, p, j]
    A0, A1 = (block(x, m, n, m).astype(np.float64) for x in (a0, a1))

    eq = tpp.Equation()
    eq.push_back_binary_op("mul").push_back_unary_op("gelu").push_back_binary_op("add")
    eq.push_back_arg(0, m, n).push_back_arg(1, m, n).push_back_unary_op("tanh")
    eq.push_back_binary_op("LIBXSMM_MELTW_TYPE_BINARY_MATMUL")
    eq.push_back_arg(2, m, k).push_back_arg(3, k, n)
    got = block(run_both(eq.dispatch(m, n), [a0, a1, c.reshape(-1), d.reshape(-1)], m, n, m),
                m, n, m)
    assert normf_rel(got, gelu(A0 + A1) * np.tanh(C[0] @ D[0])) <= 1e-5

    eq = tpp.Equation()
    eq.push_back_binary_op("mul").push_back_unary_op("gelu").push_back_arg(0, m, n)
    eq.push_back_unary_op("tanh").push_back_ternary_op("LIBXSMM_MELTW_TYPE_TERNARY_BRGEMM")
    eq.push_back_arg(2, m, k, count=br, stride=m * k)
    eq.push_back_arg(3, k, n, count=br, stride=k * n).push_back_arg(1, m, n)
    got = block(run_both(eq.dispatch(m, n), [a0, a1, c.reshape(-1), d.reshape(-1)], m, n, m),
                m, n, m)
    assert normf_rel(got, gelu(A0) * np.tanh(A1 + np.einsum("rip,rpj->ij", C, D))) <= 1e-5

    eq = tpp.Equation().push_back_ternary_op("LIBXSMM_MELTW_TYPE_TERNARY_MATMUL")
    eq.push_back_arg(2, m, k).push_back_arg(3, k, n).push_back_unary_op("exp")
    eq.push_back_arg(1, m, n)                    # C computed: exp(B), then + C_0 D_0
    got = block(run_both(eq.dispatch(m, n), [a0, a1, c.reshape(-1), d.reshape(-1)], m, n, m),
                m, n, m)
    assert normf_rel(got, np.exp(A1) + C[0] @ D[0]) <= 1e-5

    eq = tpp.Equation()
    eq.push_back_unary_op(act).push_back_binary_op("add", bcast_in0="col")
    eq.push_back_unary_op("increment").push_back_arg(0, m, 1)
    eq.push_back_binary_op("brgemm").push_back_arg(2, m, k, count=br, stride=m * k)
    eq.push_back_arg(3, k, n, count=br, stride=k * n)
    kern = eq.dispatch(m, n)
    assert kern.stages() == 3       # the broadcast operand, the BRGEMM, the output
    got = block(run_both(kern, [bias, a1, c.reshape(-1), d.reshape(-1)], m, n, m), m, n, m)
    x = bias[:, None] + 1.0 + np.einsum("rip,rpj->ij", C, D)
    want = np.maximum(x, 0) if act == "relu" else 1 / (1 + np.exp(-x))
    assert normf_rel(got, want) <= 1e-5


def test_equation_matmul_bfloat16_vnni():
    """equation_matmul.c's bfloat16 equations: A in VNNI-2 layout (BRGEMM_A_VNNI), B
    bfloat16, float32 sums, bfloat16 outputs: gelu(X) + tanh(sum_r A_r B_r); the ternary
    BRGEMM whose accumulator is gelu(X) rounded to bfloat16, the result rounded again
    (libxsmm's IDENTITY with a BF16 datatype); relu(colbias + 1 + sum_r A_r B_r). Bound: one
    bfloat16 rounding, 2^-8."""
    from npukit.dtypes import dtype
    bf16 = dtype("bfloat16")
    m, n, k, br = 16, 10, 6, 2
    a = RNG.uniform(-1, 1, (br, m, k)).astype(bf16)         # logical [r, i, p]
    b = RNG.uniform(-1, 1, (br, n, k)).astype(bf16)         # batch r: column-major k x n
    x = RNG.uniform(-1, 1, m * n).astype(np.float32)
    bias = RNG.uniform(-1, 1, m).astype(bf16)               # the sample's in_dt
    A = a.astype(np.float64)
    B = b.astype(np.float64).transpose(0, 2, 1)
    S = np.einsum("rip,rpj->ij", A, B)
    X = block(x, m, n, m).astype(np.float64)
    args = [x, bias, vnni(a), b.reshape(-1)]

    def brgemm(eq: tpp.Equation, arity: int = 2) -> tpp.Equation:
        name = f"LIBXSMM_MELTW_TYPE_{'BINARY' if arity == 2 else 'TERNARY'}_BRGEMM_A_VNNI"
        (eq.push_back_binary_op if arity == 2 else eq.push_back_ternary_op)(name)
        eq.push_back_arg(2, m, k, dtype="bfloat16", count=br, stride=m * k, vnni=True)
        return eq.push_back_arg(3, k, n, dtype="bfloat16", count=br, stride=k * n)

    def run(eq: tpp.Equation) -> np.ndarray:
        kern = eq.dispatch(m, n, dtype="bfloat16")
        out_c = np.full(m * n, np.nan, bf16)
        out_s = out_c.copy()
        kern(args, out_c)
        sim = kern.run("sim", args, out_s)
        assert np.array_equal(sim.outputs["out"].view(np.uint16), out_c.view(np.uint16))
        return block(out_c.astype(np.float64), m, n, m)

    eq = tpp.Equation().push_back_binary_op("add").push_back_unary_op("gelu")
    eq.push_back_arg(0, m, n).push_back_unary_op("tanh")
    assert normf_rel(run(brgemm(eq)), gelu(X) + np.tanh(S)) <= 2 ** -8

    eq = tpp.Equation().push_back_unary_op("identity", dtype="bfloat16")
    brgemm(eq, 3).push_back_unary_op("identity", dtype="bfloat16").push_back_unary_op("gelu")
    eq.push_back_arg(0, m, n)
    acc = gelu(X).astype(np.float32).astype(bf16).astype(np.float64)
    assert normf_rel(run(eq), acc + S) <= 2 ** -8

    eq = tpp.Equation().push_back_unary_op("relu").push_back_binary_op("add", bcast_in0="col")
    eq.push_back_unary_op("increment").push_back_arg(1, m, 1, dtype="bfloat16")
    want = np.maximum(bias.astype(np.float64)[:, None] + 1 + S, 0)
    assert normf_rel(run(brgemm(eq)), want) <= 2 ** -8


def test_the_samples_table_is_true():
    """docs/tpp.md's table of libxsmm's eleven samples: the count of whole ones is what
    the page says (all eleven), and every test a row names exists in the TPP tests."""
    import re
    from pathlib import Path

    import test_tpp_eltwise as eltwise
    root = Path(__file__).parent.parent
    text = (root / "docs" / "tpp.md").read_text()
    section = text[text.index("### libxsmm's samples"):]
    rows = re.findall(r"^\| `((?:eltwise|equation)_\w+)` \| (whole|in part) \| [^|]* \| "
                      r"([^|]*) \|$", section, re.M)
    assert len(rows) == 11
    assert sum(status == "whole" for _, status, _ in rows) == 11
    assert "All eleven run whole" in section
    here = globals()
    for sample, _, tests in rows:
        for name in re.findall(r"`(\w+)`", tests):
            assert callable(here.get(name) or getattr(eltwise, name, None)), (sample, name)


def test_equation_errors_name_what_is_wrong():
    """Bad equations and calls raise NpukitError subclasses naming the node, operand,
    shapes or sizes, before anything runs."""
    from npukit.errors import CapacityError, NpukitError, OutOfBoundsError

    def two(kind="add", **kw):
        eq = tpp.Equation().push_back_binary_op(kind, **kw)
        return eq.push_back_arg(0, 4, 3).push_back_arg(1, 4, 3)

    with pytest.raises(tpp.WrongPrimitiveError, match="'LIBXSMM_MELTW_TYPE_UNARY_DROPOUT' is "
                       "no unary kind"):
        tpp.Equation().push_back_unary_op("LIBXSMM_MELTW_TYPE_UNARY_DROPOUT")
    with pytest.raises(tpp.WrongDimensionError, match="incomplete: 1 operations still wait"):
        tpp.Equation().push_back_binary_op("add").push_back_arg(0, 2, 2).dispatch(2, 2)
    with pytest.raises(tpp.WrongDimensionError, match="operand 1 is 4 x 2 but the result is "
                       "4 x 3"):
        tpp.Equation().push_back_binary_op("add").push_back_arg(0, 4, 3).push_back_arg(1, 4, 2)
    with pytest.raises(tpp.WrongDimensionError, match="read as a row broadcast"):
        tpp.Equation().push_back_binary_op("add", bcast_in1="row").push_back_arg(
            0, 4, 3).push_back_arg(1, 1, 2)
    with pytest.raises(tpp.WrongDimensionError, match="matmul: A is 4 x 3, B 2 x 5"):
        tpp.Equation().push_back_binary_op("matmul").push_back_arg(0, 4, 3).push_back_arg(
            1, 2, 5)
    with pytest.raises(tpp.OperationNotSupportedError, match="leaky_relu: alpha=None"):
        tpp.Equation().push_back_unary_op("leaky_relu")
    with pytest.raises(tpp.OperationNotSupportedError, match="only relu and leaky_relu"):
        tpp.Equation().push_back_unary_op("exp", bitmask=True)
    with pytest.raises(tpp.OperationNotSupportedError, match="reduce=None; a reduction"):
        tpp.Equation().push_back_unary_op("reduce_add")
    with pytest.raises(tpp.WrongDimensionError, match="ld = 3 below m = 4"):
        tpp.Equation().push_back_arg(0, 4, 2, 3)
    with pytest.raises(tpp.WrongDimensionError, match="root is 4 x 3, the output 3 x 4"):
        two().dispatch(3, 4)
    with pytest.raises(tpp.WrongDimensionError, match="complete: its root has every operand"):
        two().push_back_arg(2, 4, 3)
    with pytest.raises(CapacityError, match="need 1048576 bytes, over the kernel's budget of "
                       "262144"):
        eq = tpp.Equation().push_back_binary_op("add", bcast_in1="col")
        eq.push_back_arg(0, 512, 512).push_back_unary_op("exp", bcast_in0="col",
                                                         shape=(512, 512))
        eq.push_back_arg(1, 512, 1).dispatch(512, 512)
    kernel = two().dispatch(4, 3)
    with pytest.raises(tpp.WrongDimensionError, match="reads or writes arg1 .12 elements of "
                       "float32.; none given"):
        kernel([np.zeros(12, np.float32)], np.zeros(12, np.float32))
    with pytest.raises(OutOfBoundsError, match="arg1 holds 5 elements"):
        kernel([np.zeros(12, np.float32), np.zeros(5, np.float32)], np.zeros(12, np.float32))
    with pytest.raises(tpp.WrongDtypeError, match="out has dtype float64"):
        kernel([np.zeros(12, np.float32)] * 2, np.zeros(12))
    assert issubclass(tpp.TppError, NpukitError)
