"""``S.pow`` (``npukit.dsl.builtins_arith``) and ``**``: float lanes of any width the kernel slices,
bfloat16 included, against numpy's float64 power rounded to float32, then to the lane
type, on the simulator and the C back end (bit for bit); scalars give typed scalars."""

import numpy as np
import pytest
from dsl_check import run_both

import npukit.dsl as S
from npukit.errors import DTypeError


@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float32"])
def test_pow_of_a_sliced_vector_and_of_scalars(dt):
    elem = S.DType(dt).elem
    n = 21

    @S.prim_func
    def f(a: S.ptr(dt, "global"), b: S.ptr(dt, "global"), c: S.ptr(dt, "global")):
        c[0:n] = S.pow(a[0:n], b[0:n])
        c[n] = S.pow(a[0], 0.5)
        c[n + 1:n + 4] = a[0:3] ** b[0:3]

    rng = np.random.default_rng(3)
    a = rng.uniform(0.05, 4.0, n).astype(elem)
    b = rng.uniform(-3.0, 3.0, n).astype(elem)
    got = run_both(S.build(f, target="compass"), {"a": a, "b": b}, {"c": (n + 4, dt)})["c"]
    x, y = a.astype(np.float64), b.astype(np.float64)
    want = np.power(x, y).astype(np.float32).astype(elem)
    assert np.array_equal(got[:n].astype(np.float64), want.astype(np.float64))
    assert got[n].astype(np.float64) == np.float64(np.sqrt(x[0])).astype(np.float32).astype(elem)
    assert np.array_equal(got[n + 1:].astype(np.float64), want[:3].astype(np.float64))


def test_pow_of_numbers_is_a_float32_scalar_and_integers_are_refused():
    @S.prim_func
    def f(c: S.ptr("float32", "global")):
        c[0] = S.pow(2.0, 0.5)

    out = np.zeros(1, np.float32)
    f(out)
    assert out[0] == np.float32(np.sqrt(2.0))

    @S.prim_func
    def g(a: S.ptr("i32x8", "global"), c: S.ptr("i32x8", "global")):
        c[0] = S.pow(a[0], a[0])

    with pytest.raises(DTypeError, match="S.pow of int32x8: expects float lanes"):
        S.build(g, target="compass")
