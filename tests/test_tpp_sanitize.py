"""The TPP primitives and a threaded tensor operation under AddressSanitizer and
UndefinedBehaviorSanitizer: every buffer is exactly as long as the block it holds, so a
read or write one element past it (a packing edge, a vector tail) is reported."""

from __future__ import annotations

import textwrap

from test_c_sanitize import pytestmark, run_sanitized  # noqa: F401  (skips without ASan; slow)

SCRIPT = textwrap.dedent('''
    import numpy as np
    from npukit import tpp
    from npukit.tpp.primitives import footprint

    rng = np.random.default_rng(0)

    def exact(n):
        return rng.standard_normal(n).astype(np.float32)

    for name, ta, tb in [("gemm", False, False), ("gemm", True, True), ("brgemm", False, True)]:
        p = tpp.Primitive(name, trans_a=ta, trans_b=tb)
        for m, n, k in [(1, 1, 1), (33, 13, 7), (70, 25, 385), (5, 40, 2)]:
            s = p.defaults(m=m, n=n, k=k, **({"br": 2} if name == "brgemm" else {}))
            span = p.spans(**s)
            p(exact(span["a"]), exact(span["b"]), exact(span["c"]), **s)
    for trans in (False, True):
        p = tpp.Primitive("interp_sigmoid", trans_b=trans)
        for m, n in [(1, 1), (17, 3), (33, 35), (130, 9)]:
            p(exact(m * n), np.empty(m * n, np.float32), m=m, n=n)
    add = tpp.Primitive("add")
    for m, n in [(1, 1), (31, 3)]:
        add(exact(m * n), exact(m * n), np.empty(m * n, np.float32), m=m, n=n)
    op = tpp.TensorOperation("float32", "zero", "gemm", "fast_sigmoid",
                             ("n", "k", "m", "n", "k"), ("shared", "seq", "prim", "prim",
                                                         "prim"),
                             (3, 2, 37, 5, 11), (0, 37 * 11, 1, 0, 37), (55, 11, 0, 165, 1),
                             (37 * 5, 0, 1, 37, 0))
    out = np.empty(op.extent("out"), np.float32)
    op(exact(op.extent("in0")), exact(op.extent("in1")), out)
    print("sanitized tpp runs: ok")
''')


def test_tpp_runs_clean_under_sanitizers():
    res = run_sanitized(SCRIPT)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "sanitized tpp runs: ok" in res.stdout
    assert "runtime error" not in res.stderr and "AddressSanitizer" not in res.stderr
