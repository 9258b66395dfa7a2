"""``S.ceildiv`` of one-lane values and vectors, N-dimensional ``S.match_buffer`` views and
the Compass DSL's words for vectors of different widths (``npukit.dsl.ops``,
``npukit.dsl.memory``, ``npukit.dsl.builtins_arith``), against numpy on the simulator and
the C back end (bit for bit).

(No ``from __future__ import annotations`` here: the kernels' annotations use the factory's
local type names.)"""

import numpy as np
import pytest
from dsl_check import canary, host_and_c, run_both

import npukit.dsl as S
from npukit.dsl.utils import get_binary_op_result_type
from npukit.errors import CapacityError, DTypeError, KernelError

RNG = np.random.default_rng(12)


def _ints(n: int, dtype: str) -> np.ndarray:
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, n, dtype=np.int64).astype(dtype)


def _ceildiv(x: np.ndarray, y: np.ndarray, dt: str) -> np.ndarray:
    """``(x + y - 1) / y`` in ``dt``: the sum wraps in ``dt``, the quotient truncates
    toward zero (computed in Python integers)."""
    info = np.iinfo(dt)
    span = info.max - info.min + 1
    out = []
    for a, b in zip(x.astype(dt).tolist(), y.astype(dt).tolist()):
        s = (a + b - 1 - info.min) % span + info.min
        out.append((abs(s) // abs(b)) * (1 if (s >= 0) == (b > 0) else -1))
    return np.array(out, dtype=np.int64).astype(dt)


@pytest.mark.parametrize("xt,yt", [("int8", "uint16"), ("int32", "int8"), ("uint8", "uint32")])
def test_ceildiv_of_lanes(xt, yt):
    """Lane by lane through one-lane values, in the type the operands meet in."""
    out_t = str(get_binary_op_result_type(xt, yt))

    @S.prim_func
    def f(a: S.ptr(xt, "global"), d: S.ptr(yt, "global"), out: S.ptr(out_t, "global")):
        for i in range(8):
            out[i] = S.ceildiv(a[i], d[i])

    a, d = _ints(8, xt), _ints(8, yt)
    d = np.where(d == 0, 3, d).astype(yt)
    got = run_both(S.build(f, target="compass"), {"a": a, "d": d}, {"out": (8, out_t)})
    assert np.array_equal(got["out"], _ceildiv(a, d, out_t))


def test_ceildiv_of_a_number_and_a_vector():
    """A number meets the vector's type when it fits it, else int32 (32767 and int8)."""
    @S.prim_func
    def f(a: S.ptr("i8x32", "global"), o8: S.ptr("i8x32", "global"),
          o32: S.ptr("i32", "global")):
        o8[0] = S.ceildiv(a[0], 8)
        o32[0] = S.ceildiv(32767, a[0][1])

    a = _ints(32, "int8")
    a[1] = -7
    got = run_both(S.build(f, target="compass"), {"a": a},
                   {"o8": (32, "int8"), "o32": (1, "int32")})
    assert np.array_equal(got["o8"], _ceildiv(a, np.full(32, 8), "int8"))
    assert got["o32"][0] == _ceildiv(np.array([32767]), np.array([-7]), "int32")[0]


def test_ceildiv_refuses_floats():
    @S.prim_func
    def f(a: S.ptr("fp32x8", "global"), out: S.ptr("fp32x8", "global")):
        out[0] = S.ceildiv(a[0], 2)

    with pytest.raises(DTypeError, match="takes integers"):
        S.build(f, target="compass")


def test_match_buffer_of_three_dimensions():
    """``b[i, j]`` and ``b.addr_of((i, j))`` address row-major, with run-time indices;
    the values not written keep the canary."""
    @S.prim_func
    def f(A: S.ptr("i16x16", "global"), C: S.ptr("i16x16", "global")):
        a = S.match_buffer(A, (3, 4))
        c = S.match_buffer(C, (3, 4))
        for i in range(3):
            c[i, 3 - i] = a[i, i] + 1
        S.vstore(S.vload(a.addr_of((2, 1))), c.addr_of((0, 0)))

    a = _ints(3 * 4 * 16, "int16")
    (_, sim), (_, c) = host_and_c(f, a, canary(3 * 4 * 16, "int16"))
    assert np.array_equal(sim.view(np.uint16), c.view(np.uint16))
    a3, want = a.reshape(3, 4, 16), canary(3 * 4 * 16, "int16").reshape(3, 4, 16)
    for i in range(3):
        want[i, 3 - i] = a3[i, i] + np.int16(1)
    want[0, 0] = a3[2, 1]
    assert np.array_equal(sim.reshape(3, 4, 16), want)


@pytest.mark.parametrize("index,words", [((1, 4), "outside its size 4"), ((1,), "takes 2")])
def test_match_buffer_refuses_bad_indices(index, words):
    @S.prim_func
    def f(A: S.ptr("int8", "global")):
        a = S.match_buffer(A, (2, 4))
        a[index] = S.i8(1)

    with pytest.raises(KernelError, match=words):
        S.build(f, target="compass")


def test_vadd_of_different_widths_in_the_public_words():
    @S.prim_func
    def f(a: S.ptr("u8x32", "global"), b: S.ptr("i16x16", "global"),
          c: S.ptr("u8x32", "global")):
        c[0] = S.vadd(a[0], b[0])

    with pytest.raises(DTypeError, match='Argument type mismatch: 0-th: "uint8x32" vs. '
                                         '1-th: "int16x16"'):
        S.build(f, target="compass")


def test_shared_buffer_is_one_for_the_tecs():
    """What each TEC puts in a "shared" buffer before a barrier, every TEC reads after it:
    TEC t copies its quarter in, then writes out its neighbour's quarter."""
    @S.prim_func
    def f(a: S.ptr("int16", "global"), out: S.ptr("int16", "global")):
        shared = S.alloc_buffer(64, "int16", scope="shared")
        t = S.get_local_id()
        S.dma_copy(shared + t * 16, a + t * 16, 16)
        S.barrier()
        S.dma_copy(out + t * 16, shared + (t + 1) % 4 * 16, 16)

    a = _ints(64, "int16")
    (_, sim), (_, c) = host_and_c(f, a, canary(64, "int16"))
    assert np.array_equal(sim, c)
    assert np.array_equal(sim, np.roll(a, -16))


def test_shared_buffer_beyond_the_core_sram():
    @S.prim_func
    def f(a: S.ptr("int8", "global")):
        big = S.alloc_buffer(256 * 1024 + 1, "int8", scope="shared")
        S.dma_copy(big, a, 8)

    with pytest.raises(CapacityError, match="holds 262144 B for the core's TECs"):
        S.build(f, target="compass")


def test_scalar_parameter_meets_lanes_by_its_type():
    """An ``S.int16`` parameter fits no 8-bit lane whatever its value: ``BuildManager``
    refuses it before any call; an ``S.int8`` one meets int16 lanes."""
    @S.prim_func
    def narrow(a: S.ptr("int8x32", "global"), k: S.int16, c: S.ptr("int8x32", "global")):
        c[0] = S.vadd(a[0], k)

    with pytest.raises(RuntimeError, match=r'Can\'t broadcast "int16" to any of "\(int8x32, '
                                           r'uint8x32\)"'):
        S.BuildManager().build(narrow)

    @S.prim_func
    def wide(a: S.ptr("int16x16", "global"), k: S.int8, c: S.ptr("int16x16", "global")):
        c[0] = S.vadd(a[0], k, saturate=True)

    a = _ints(16, "int16")
    ex = S.BuildManager().build(wide)
    for run in (wide, ex):
        c = canary(16, "int16")
        run(a, -100, c)
        assert np.array_equal(c, np.clip(a.astype(np.int64) - 100, -32768, 32767))


def test_shared_pointer_parameter_of_a_helper():
    """A helper kernel takes ``S.ptr(dtype, "shared")``: the shared buffer passes to it."""
    @S.prim_func
    def add_one(buf: S.ptr("int16x16", "shared")):
        buf[0] = buf[0] + 1

    @S.prim_func
    def f(a: S.ptr("int16", "global"), out: S.ptr("int16", "global")):
        shared = S.alloc_buffer(16, "int16", scope="shared")
        if S.get_local_id() == 0:
            S.dma_copy(shared, a, 16)
            add_one(shared.as_ptr("int16x16"))
            S.dma_copy(out, shared, 16)

    a = _ints(16, "int16")
    (_, sim), (_, c) = host_and_c(f, a, canary(16, "int16"))
    assert np.array_equal(sim, c)
    assert np.array_equal(sim, a + np.int16(1))
