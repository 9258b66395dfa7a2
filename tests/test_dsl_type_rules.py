"""The Compass DSL's public type rules on npukit: a type constructor of a vector converts it
(``S.u32x8(i32x8)`` is ``S.cast``), a Python number in an operator moves the lanes' type
as the public ``get_binary_op_result_type`` says (``u8x32 + 5.3`` is float32,
``u8x32 + 300`` int32), ``S.reinterpret`` reads a vector's bytes as lanes of another width
(a C union), and ``S`` reports a missing name as a module does. Each kernel runs on the
simulator and in C against numpy, every output element written over a canary."""

import numpy as np
import pytest
from dsl_check import canary, host_and_c

from npukit import NpukitError
from npukit.dsl import script as S

RNG = np.random.default_rng(38)


def _ints(n: int, dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    a = RNG.integers(info.min, info.max, n, endpoint=True).astype(dtype)
    a[:2] = [info.min, info.max]  # both ends of the range, never all zero
    return a


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    u = f"uint{8 * got.dtype.itemsize}"
    np.testing.assert_array_equal(got.view(u), want.view(u))


@pytest.mark.slow
def test_a_type_constructor_converts_a_vector_as_cast():
    @S.prim_func
    def ctors(a: S.ptr("i32x8", "global"), h: S.ptr("i16x16", "global"),
              out: S.ptr("i32x8", "global"), wide: S.ptr("i32", "global"),
              f: S.ptr("fp32x8", "global")):
        u = S.u32x8(a[0])     # int32 -> uint32 lane for lane: the same bits
        out[0] = u
        wide[:16] = S.int32(h[0])   # a scalar type keeps the lanes: i32x16
        f[0] = S.fp32x8(a[0])

    a, h = _ints(8, "int32"), _ints(16, "int16")
    for out, wide, f in (r[2:] for r in host_and_c(ctors, a, h, canary(8, "int32"),
                                                  canary(16, "int32"),
                                                  canary(8, "float32"))):
        _same_bits(out, a.astype(np.uint32).view(np.int32))
        _same_bits(wide, h.astype(np.int32))
        _same_bits(f, a.astype(np.float32))


@pytest.mark.slow
def test_a_number_moves_the_lanes_type():
    @S.prim_func
    def literals(a: S.ptr("u8x32", "global"), b: S.ptr("fp16x16", "global"),
                 f32: S.ptr("fp32", "global"), i32: S.ptr("i32", "global"),
                 f16: S.ptr("fp16", "global")):
        f32[:32] = a[0] + 5.3       # a float literal: float32 lanes
        f32[32:48] = 0.5 * b[0]     # float16 meets float32: float32
        i32[:32] = 300 + a[0]       # 300 does not fit uint8: int32 lanes
        i32[32:64] = S.cast(a[0] - 7, "int32")  # 7 fits uint8: uint8 lanes, wrapping
        f16[:16] = b[0] + 300       # an integer literal leaves float lanes as they are

    a = _ints(32, "uint8")
    b = (RNG.standard_normal(16) * 8).astype(np.float16)
    for f32, i32, f16 in (r[2:] for r in host_and_c(literals, a, b, canary(48, "float32"),
                                                   canary(64, "int32"),
                                                   canary(16, "float16"))):
        _same_bits(f32, np.concatenate([a.astype(np.float32) + np.float32(5.3),
                                        b.astype(np.float32) * np.float32(0.5)]))
        _same_bits(i32, np.concatenate([a.astype(np.int32) + 300,
                                        (a - np.uint8(7)).astype(np.int32)]))
        _same_bits(f16, b + np.float16(300))


@pytest.mark.slow
@pytest.mark.parametrize("src, dst, n", [("uint8", "int32", 32), ("int32", "uint8", 8),
                                         ("int16", "uint32", 16), ("float32", "int8", 8),
                                         ("uint32", "float16", 8), ("uint8", "int16", 64)])
def test_reinterpret_across_lane_widths_is_a_c_union(src, dst, n):
    to_lanes = n * np.dtype(src).itemsize // np.dtype(dst).itemsize

    @S.prim_func
    def union(a: S.ptr(src, "global"), out: S.ptr(dst, "global")):
        S.vstore(S.reinterpret(S.vload(a, lanes=n), f"{dst}x{to_lanes}"), out)

    a = (RNG.standard_normal(n) * 1000).astype(src) if src.startswith("float") \
        else _ints(n, src)
    for (out,) in (r[1:] for r in host_and_c(union, a, canary(to_lanes, dst))):
        _same_bits(out, a.view(dst))  # numpy's view: the bytes of a little-endian machine


def test_reinterpret_needs_the_same_total_bits():
    @S.prim_func
    def bad(a: S.ptr("u8x32", "global"), out: S.ptr("i32x16", "global")):
        out[0] = S.reinterpret(a[0], "i32x16")

    with pytest.raises(NpukitError, match="uint8x32 as int32x16.*256 and 512"):
        bad(_ints(32, "uint8"), np.zeros(16, np.int32))


def test_a_missing_name_of_S_is_reported_as_a_module_attribute():
    with pytest.raises(AttributeError, match="module 'npukit.dsl.script' has no attribute "
                                             "'fp8x32'"):
        S.fp8x32  # noqa: B018 - the lookup is the test
    assert S.i8x26.lanes == 26 and S.vload is not None


@pytest.mark.slow
def test_as_ptr_to_another_element_width_reads_and_writes_the_bytes():
    @S.prim_func
    def casts(a: S.ptr("u8x32", "global"), out: S.ptr("i32x8", "global"),
              back: S.ptr("u8x32", "global")):
        u8 = (out + 1).as_ptr("u8x32")   # the bytes of out's values 8..15, then 16..23
        u8[0] = a[0] + 5                 # wraps in uint8 lanes
        u8 += 1
        u8[0] = S.vrevs(a[1])            # lanes reversed: a byte order no one lane keeps
        i32 = u8.as_ptr("i32x8")         # back to a plain pointer: values 16..23
        i32[1] = S.i32x8(-2)
        h16 = out.as_ptr("i16x16")       # the first 8 values as 16 int16 halves
        back[0] = S.reinterpret(h16[0], "u8x32")
        back[1:3] = (out + 1).as_ptr("u8x32")[0:2]

    a = _ints(64, "uint8")
    out0 = np.arange(32, dtype=np.int32) * 65537 - 1000  # every byte written stays apart
    for out, back in (r[1:] for r in host_and_c(casts, a, out0, canary(96, "uint8"))):
        want = out0.copy()
        want[8:16] = (a[:32] + np.uint8(5)).view(np.int32)
        want[16:24] = np.ascontiguousarray(a[32:][::-1]).view(np.int32)
        want[24:32] = -2
        _same_bits(out, want)
        _same_bits(back[:32], out0[:8].view(np.uint8))
        _same_bits(back[32:], want[8:24].view(np.uint8))


def test_as_ptr_to_part_of_an_element_is_refused_naming_it():
    @S.prim_func
    def bad(out: S.ptr("i32", "global")):
        p = out.as_ptr("u8x2")
        p[0] = S.u8x2(1)

    with pytest.raises(NpukitError, match="out.as_ptr.'uint8x2'.*int32 elements of out"):
        bad(np.zeros(8, np.int32))


@pytest.mark.slow
def test_a_pointer_without_scope_takes_a_registers_address():
    @S.prim_func
    def add_lanes(x: S.ptr("i32x8"), k: S.i32):    # "private", as the Compass DSL's default
        x[0] = x[0] + k

    @S.prim_func
    def through_addr(a: S.ptr("i32x8", "global"), out: S.ptr("i32x8", "global")):
        v = S.max(a[0], 0)
        add_lanes(v.addr, 7)        # writes into v
        out[0] = v - a[0]

    a = _ints(8, "int32") // 4
    for (out,) in (r[1:] for r in host_and_c(through_addr, a, canary(8, "int32"))):
        _same_bits(out, np.maximum(a, 0) + 7 - a)


def test_a_kernel_pointer_without_scope_is_refused_naming_it():
    @S.prim_func
    def bad(out: S.ptr("i32")):
        out[0] = 1

    with pytest.raises(NpukitError, match="'out' is S.ptr.'int32', 'private'.*global memory"):
        bad(np.zeros(8, np.int32))


@pytest.mark.slow
def test_pointers_into_one_tensor_compare_by_address():
    @S.prim_func
    def compare(a: S.ptr("i32", "global"), out: S.ptr("i32", "global"), n: S.i32):
        p, q = a + 3, (a + 1).as_ptr("i32x8")
        out[0] = 1 if p > q else 0         # known when built
        out[1] = 1 if q + 0 == a + 1 else 0
        out[2] = 1 if p <= q else 0
        if a + n >= p:                     # known at run time
            out[3] = 7
        else:
            out[3] = 8

    for n in (2, 3, 5):
        for run in (compare, S.BuildManager().build(compare)):
            out = canary(4, "int32")
            run(np.arange(8, dtype=np.int32), out, n)
            _same_bits(out, np.array([1, 1, 0, 7 if n >= 3 else 8], np.int32))


def test_pointers_into_two_tensors_do_not_compare():
    @S.prim_func
    def bad(a: S.ptr("i32", "global"), out: S.ptr("i32", "global")):
        if a < out:
            out[0] = 1

    with pytest.raises(NpukitError, match="a < a pointer to int32: npukit compares pointers"):
        bad(np.zeros(8, np.int32), np.zeros(8, np.int32))


@pytest.mark.slow
def test_a_number_moves_a_typed_scalars_type():
    @S.prim_func
    def scalars(i32: S.ptr("i32", "global"), f32: S.ptr("fp32", "global"),
                f16: S.ptr("fp16", "global"), u8: S.ptr("u8", "global")):
        i32[0] = S.u8(200) + 300     # 300 does not fit uint8: int32, no wrap
        f32[0] = S.fp16(1.5) * 0.1   # a float literal: float32
        f16[0] = S.fp16(2.5) + 3     # an integer literal leaves float16 as it is
        u8[0] = S.u8(200) + 100      # 100 fits uint8: wraps in uint8

    for i32, f32, f16, u8 in host_and_c(scalars, canary(1, "int32"), canary(1, "float32"),
                                        canary(1, "float16"), canary(1, "uint8")):
        _same_bits(i32, np.array([500], np.int32))
        _same_bits(f32, np.array([np.float32(1.5) * np.float32(0.1)], np.float32))
        _same_bits(f16, np.array([5.5], np.float16))
        _same_bits(u8, np.array([44], np.uint8))


@pytest.mark.slow
def test_addr_of_pads_missing_indices_with_zeros():
    @S.prim_func
    def rows(a: S.ptr("fp32", "global"), out: S.ptr("fp32", "global")):
        m = S.match_buffer(a, (4, 8))
        for r in range(4):
            row = m.addr_of(3 - r)          # (3 - r, 0): the start of row 3 - r
            out[r * 8:r * 8 + 8] = row[0:8] * 2.0

    a = (RNG.standard_normal(32) * 100).astype(np.float32)
    for (out,) in (r[1:] for r in host_and_c(rows, a, canary(32, "float32"))):
        want = a.reshape(4, 8)[::-1] * np.float32(2)
        _same_bits(out, want.reshape(-1))
