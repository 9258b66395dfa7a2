"""What a store into a Compass DSL pointer converts, as the public DSL's stores (and C's)
do: a float constant rounds into any float element, an integer vector of the other sign
stores its bits. Checked on the simulator and in C against numpy, with canaries around."""

import ml_dtypes
import numpy as np
import pytest
from dsl_check import host_and_c

from npukit.dsl import script as S


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_a_float_constant_rounds_into_a_float_element(dtype):
    third = np.float32(1) / np.float32(3)  # float32 bits no narrower type holds

    @S.prim_func
    def consts(b: S.ptr(dtype, "global")):
        b[1] = S.rint(2.5)          # float32 2.0 (ties to even)
        b[2] = S.fp32(third)
        b[3] = S.rint(-1234.567)

    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    canary = np.array(-77.0, dt)
    want = np.array([canary, 2.0, third, -1235.0, canary], dt)  # numpy rounds to nearest
    for (out,) in host_and_c(consts, np.full(5, canary, dt)):
        np.testing.assert_array_equal(out.view(f"uint{8 * dt.itemsize}"),
                                      want.view(f"uint{8 * dt.itemsize}"))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32"])
def test_a_vector_of_the_other_sign_stores_its_bits(dtype):
    bits = 8 * np.dtype(dtype).itemsize
    lanes = 256 // bits
    vt, ut = f"{dtype}x{lanes}", f"u{dtype}x{lanes}"

    @S.prim_func
    def signs(a: S.ptr(vt, "global"), u: S.ptr(ut, "global"), out: S.ptr(vt, "global"),
              uout: S.ptr(ut, "global")):
        out[1] = S.vpcnt(a[0], out_sign="u")   # a uint vector into an int pointer
        uout[1] = a[0]                         # an int vector into a uint pointer
        out[2] = u[0] + u[0]                   # wraps in uint lanes, then its bits

    info = np.iinfo(dtype)
    a = np.linspace(info.min, info.max, lanes).astype(dtype)
    a[:3] = [info.min, -1, 0]
    u = (np.arange(lanes) * (2 ** bits // lanes - 3) + 5).astype(f"u{dtype}")
    u[0] = 2 ** bits - 1
    ones = np.array([bin(int(v)).count("1") for v in a.view(f"u{dtype}")], dtype)
    twice = ((u.astype(np.int64) * 2) % 2 ** bits).astype(f"u{dtype}").view(dtype)
    for out, uout in (r[2:] for r in host_and_c(signs, a, u, np.full(3 * lanes, 91, dtype),
                                           np.full(3 * lanes, 92, f"u{dtype}"))):
        np.testing.assert_array_equal(out, np.concatenate([np.full(lanes, 91, dtype), ones,
                                                           twice]))
        np.testing.assert_array_equal(uout, np.concatenate([np.full(lanes, 92, f"u{dtype}"),
                                                            a.view(f"u{dtype}"),
                                                            np.full(lanes, 92, f"u{dtype}")]))
