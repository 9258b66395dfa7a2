"""Shared by the TPP tests: an independent numpy oracle of a tensor operation, random valid
operations for property tests, and data whose sums are exact in float32."""

from __future__ import annotations

import itertools
import string

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from npukit import tpp
from npukit.tpp.formulas import LIBXSMM_UNARY
from npukit.tpp.operation import FIRST_TOUCH, LAST_TOUCH
from npukit.tpp.primitives import BINARY_REF, UNARY_REF

DYADIC = np.array([-4, -2, -1, -0.5, 0.5, 1, 2, 4], np.float32)  # exact sums and reciprocals


def strided(buf: np.ndarray, op, tensor: str, dims: list[int]) -> np.ndarray:
    """The view of ``buf`` over ``dims`` of ``op`` with ``tensor``'s strides."""
    return np.lib.stride_tricks.as_strided(
        buf, [op.dims[i].size for i in dims], [op.dims[i].stride(tensor) * buf.itemsize
                                               for i in dims])


def oracle(op, in0, in1, out) -> np.ndarray:
    """What ``op`` means, from the TPP text's definitions and not from npukit's lowering:
    ``out = last(main(first(out)))`` over every output element; gemm sums over the k
    dimensions in float64 and rounds once."""
    res = out.copy()
    every = list(range(len(op.dims)))
    nonk = [i for i in every if op.dims[i].type != "k"]
    o = strided(res, op, "out", nonk)
    with np.errstate(all="ignore"):
        if op.prim_first != "none":
            o[...] = UNARY_REF[op.prim_first](o.copy())
        main = op.prim_main
        if main in ("gemm", "brgemm"):
            letters = string.ascii_letters[:len(every)]
            keep = "".join(letters[i] for i in nonk)
            a = strided(in0.astype(np.float64), op, "in0", every)
            b = strided(in1.astype(np.float64), op, "in1", every)
            o[...] = (o.astype(np.float64) + np.einsum(f"{letters},{letters}->{keep}", a, b)
                      ).astype(np.float32)
        elif main in BINARY_REF:
            o[...] = BINARY_REF[main](strided(in0, op, "in0", nonk), strided(in1, op, "in1", nonk))
        elif main != "none":
            o[...] = UNARY_REF[main](strided(in0, op, "in0", nonk))
        if op.prim_last != "none":
            o[...] = UNARY_REF[op.prim_last](o.copy())
    return res


def data(rng, op, dtype=np.float32) -> tuple:
    """in0, in1 (None when not read) and out, dyadic values, with a few spare elements."""
    def make(t):
        return rng.choice(DYADIC, op.extent(t) + 3).astype(dtype)
    in0 = make("in0") if op.inputs else None
    in1 = make("in1") if len(op.inputs) == 2 else None
    return in0, in1, make("out").astype(np.float32)


def _strides(sizes, members, rng_order, pads) -> list[int]:
    """Dense strides (with pads) for the dims in ``members``, innermost first in order."""
    out = [0] * len(sizes)
    s = 1
    for k in rng_order:
        if k in members:
            out[k] = s
            s *= sizes[k] + pads[k]
    return out


@st.composite
def operations(draw, mains=None, max_size=6):
    """A random valid ``TensorOperation``: random dims, layouts, prim choice, shared and seq
    loops, touches."""
    mains = mains or ["gemm", "brgemm", "identity", "none", "fast_sigmoid", "interp_sigmoid",
                      *BINARY_REF]
    main = draw(st.sampled_from(mains))
    gemm = main in ("gemm", "brgemm")
    types = list({"gemm": "mnk", "brgemm": "mnkk"}.get(main, ""))
    extra = draw(st.lists(st.sampled_from("cmnk" if gemm else "cmn"), min_size=0,
                          max_size=3 if gemm else 4))
    types += extra
    while len(types) < 2:
        types.append("c")
    order = draw(st.permutations(range(len(types))))
    types = [types[k] for k in order]
    n = len(types)
    sizes = [draw(st.integers(1, max_size)) for _ in range(n)]
    pads = [draw(st.sampled_from([0, 0, 0, 1, 2])) for _ in range(n)]
    member = {"in0": [k for k in range(n) if types[k] in ("cmk" if gemm else "cmn")],
              "in1": [k for k in range(n) if types[k] in ("cnk" if gemm else "cmn")],
              "out": [k for k in range(n) if types[k] in "cmn"]}
    same = draw(st.booleans())
    base_order = draw(st.permutations(range(n)))
    strides = {t: _strides(sizes, member[t], base_order if same else
                           draw(st.permutations(range(n))), pads) for t in member}
    if main not in ("gemm", "brgemm") and main not in BINARY_REF:
        strides["in1"] = [0] * n
    prim_count = {"gemm": 3, "brgemm": 4}.get(main, 2)
    # The bias touch reads a fourth tensor: test_tpp_bias.py tests it. A first touch keeps
    # the data dyadic (the TPP text's touches), so that sums stay exact however they are
    # grouped; libxsmm's (exp, sqrt, ...) would not: test_tpp_libxsmm.py tests them.
    first = draw(st.sampled_from([t for t in FIRST_TOUCH
                                  if t != "bias" and t not in LIBXSMM_UNARY]))
    last = draw(st.sampled_from(LAST_TOUCH))
    valid = []
    for prims in itertools.combinations(range(n), prim_count):
        exec_types = ["prim" if k in prims else "seq" for k in range(n)]
        try:
            tpp.TensorOperation("float32", first, main, last, types, exec_types, sizes,
                                strides["in0"], strides["in1"], strides["out"])
        except tpp.TppError:
            continue
        valid.append(exec_types)
    assume(valid)
    exec_types = list(draw(st.sampled_from(valid)))
    for k in range(n):
        if exec_types[k] == "seq" and types[k] != "k" and draw(st.booleans()):
            exec_types[k] = "shared"
    return tpp.TensorOperation("float32", first, main, last, types, exec_types, sizes,
                               strides["in0"], strides["in1"], strides["out"])
