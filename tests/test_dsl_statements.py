"""The Compass DSL's statements as its public tutorials use them, on npukit: scalar and
slice indexing, ``S.vload``/``S.vstore`` with masks and strides, ``S.alloc_buffer`` and
``addr_of``, ``S.tec_range``, lane extract, ``if``/``return`` decided at build time,
``S.vsl``/``S.vsr``, ``saturate=``/``out_sign=`` and ``S.vrpmax``/``S.vrpmin``. Each
kernel runs on the simulator (a host call) and in C (``BuildManager``), against numpy
readings written here from the public documentation; outputs start as canaries.
(No ``from __future__ import annotations``: kernels made in a function take types from
its local variables, as the public DSL's tests write them.)"""

from fractions import Fraction

import numpy as np
import pytest

import npukit as nk
from npukit.dsl import BuildManager, hw_native_vdtype
from npukit.dsl import script as S

CANARY = 77


def both(func, *args, out: int = -1):
    """``func`` run on the simulator and in C, each on fresh copies of the arrays; the
    two copies of argument ``out`` (an index into ``args``)."""
    results = []
    for run in (func, BuildManager().build(func)):
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        run(*copies)
        results.append(copies[out])
    return results


def test_scalar_indexing_and_slices():
    @S.prim_func
    def k(a: S.ptr("int8", "global"), out: S.ptr("int32", "global"), n: S.i32):
        for i in range(n):  # a scalar load, a run-time scalar, a scalar store
            out[i] = S.cast(a[i], "int32") * 3
        for j in range(2):  # 8-lane slices
            out[n + 8 * j: n + 8 * j + 8] = S.cast(a[8 * j: 8 * j + 8], "int32") - 1000

    a = np.arange(-100, 100, 7, dtype=np.int8)[:24]
    n = 5
    want = np.full(32, CANARY, np.int32)
    want[:n] = a[:n].astype(np.int32) * 3
    want[n:n + 16] = a[:16].astype(np.int32) - 1000
    for got in both(k, a, np.full(32, CANARY, np.int32), n, out=1):
        assert (got == want).all()


def test_vload_vstore_with_masks_and_strides():
    @S.prim_func
    def k(a: S.ptr("int16", "global"), out: S.ptr("int16", "global")):
        v = S.vload(a + 1, mask="3T5F", lanes=8, stride=2)  # lanes 3..7 read as 0
        S.vstore(v, out, stride=2)
        w = S.vload(a)  # the native int16x16
        S.vstore(w + 1, out + 16, mask="T" * 4 + "F" * 12)  # only 4 lanes written

    a = np.arange(1, 33, dtype=np.int16) * 11
    want = np.full(40, CANARY, np.int16)
    want[0:16:2] = [a[1], a[3], a[5], 0, 0, 0, 0, 0]
    want[16:20] = a[:4] + 1
    for got in both(k, a, np.full(40, CANARY, np.int16), out=1):
        assert (got == want).all()


def test_alloc_buffer_addr_of_and_tec_range():
    @S.prim_func
    def k(a: S.ptr("float16", "global"), out: S.ptr("float16", "global")):
        buf = S.alloc_buffer([64], "float16", scope="lsram")
        half = buf.addr_of(32)
        for t in S.tec_range(1, 3):  # TECs 1 and 2 only, each its own 32 elements
            S.dma_copy(buf, a + t * 32, 32)
            for v in range(2):
                S.vstore(S.vload(buf + v * 16) * S.fp16(0.5), half + v * 16)
            S.dma_copy(out + t * 32, half, 32)

    a = np.linspace(-4, 4, 128).astype(np.float16)
    want = np.full(128, CANARY, np.float16)
    want[32:96] = a[32:96] * np.float16(0.5)
    for got in both(k, a, np.full(128, CANARY, np.float16), out=1):
        assert (got == want).all()


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int8", "float16"])
def test_vrpmax_vrpmin_and_lane_extract(dtype):
    vt = hw_native_vdtype(dtype)

    @S.prim_func
    def k(a: S.ptr(vt, "global"), out: S.ptr(dtype, "global")):
        v = a[0]
        out[0] = S.vrpmax(v)[0]
        out[1] = S.vrpmin(v)[0]
        out[2] = S.vrpmax(v, mask=S.vload(a.as_ptr(dtype)) > 0)[0]  # positive lanes only
        out[3] = v[vt.lanes - 1]

    rng = np.random.default_rng(5)
    info = np.finfo(dtype) if dtype == "float16" else np.iinfo(dtype)
    a = rng.uniform(max(info.min, -1000), min(info.max, 1000), vt.lanes).astype(dtype)
    a[3] = 1  # at least one positive lane
    want = np.array([a.max(), a.min(), a[a > 0].max(), a[-1]], dtype)
    for got in both(k, a, np.full(5, CANARY, dtype), out=1):
        assert (got[:4] == want).all() and got[4] == CANARY


def _vsr(x: int, s: int, bits: int, rnd: bool) -> int:
    """The public DSL's vsr: the shift read as uint32; x / 2^s rounded half to even, or
    an arithmetic shift (all sign bits from ``bits`` on)."""
    s &= 0xFFFFFFFF
    if rnd:
        q = Fraction(x, 2 ** min(s, 200))
        f = q.numerator // q.denominator
        rest = q - f
        return f + (rest > Fraction(1, 2) or (rest == Fraction(1, 2) and f % 2 == 1))
    return x >> min(s, bits)


def _vsl(x: int, s: int, dtype, saturate: bool) -> int:
    s &= 0xFFFFFFFF
    bits = 8 * np.dtype(dtype).itemsize
    full = x << min(s, bits)
    if saturate:
        info = np.iinfo(dtype)
        return min(max(full, int(info.min)), int(info.max))
    return full


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32"])
def test_vsl_vsr_every_shift_count(dtype):
    vt = hw_native_vdtype(dtype)
    bits = 8 * np.dtype(dtype).itemsize
    signed = np.dtype(dtype).kind == "i"

    @S.prim_func
    def k(x: S.ptr(vt, "global"), s: S.ptr(vt, "global"), out: S.ptr(vt, "global")):
        out[0] = S.vsr(x[0], s[0])
        out[1] = S.vsr(x[0], s[0], with_round=True)
        out[2] = S.vsl(x[0], s[0])
        out[3] = S.vsl(x[0], s[0], saturate=signed)  # saturation: signed lanes only
        out[4] = S.vsr(x[0], 3, with_round=True)  # a constant shift

    info = np.iinfo(dtype)
    lanes = vt.lanes
    xs = np.resize(np.array([info.min, info.max, -5 if info.min else 5, 6, 7, 0, 12, 1,
                             info.min + 1, 9, 10, 11], np.int64), lanes)
    counts = [0, 1, 2, 3, bits - 1, bits, bits + 3, -1, -3, 4, 5, 1]
    ss = np.resize(np.array(counts, np.int64), lanes)
    x = xs.astype(dtype)
    s = (ss & ((1 << bits) - 1)).astype(np.uint64).astype(dtype) if info.min == 0 else \
        ss.astype(dtype)
    sv = [int(v) for v in s]  # the shift as stored (its sign for the signed types)
    wrap = (1 << bits)

    def typed(vals):
        return np.array([v % wrap for v in vals], np.uint64).astype(dtype)

    want = np.concatenate([
        typed([_vsr(int(a), b, bits, False) for a, b in zip(x, sv, strict=True)]),
        typed([_vsr(int(a), b, bits, True) for a, b in zip(x, sv, strict=True)]),
        typed([_vsl(int(a), b, dtype, False) for a, b in zip(x, sv, strict=True)]),
        typed([_vsl(int(a), b, dtype, signed) for a, b in zip(x, sv, strict=True)]),
        typed([_vsr(int(a), 3, bits, True) for a in x]),
        np.full(lanes, CANARY, dtype)])
    for got in both(k, x, s, np.full(6 * lanes, CANARY, dtype), out=2):
        assert (got == want).all()


def test_saturate_and_out_sign():
    @S.prim_func
    def k(a: S.ptr("int16x16", "global"), b: S.ptr("uint32x8", "global"),
          out16: S.ptr("int16x16", "global"), out32: S.ptr("int32x8", "global"),
          zp: S.i16):
        out16[0] = S.vsub(a[0], zp, saturate=True)
        out16[1] = S.vadd(a[0], a[0], saturate=True)
        out16[2] = S.vsub(a[0], zp)  # wraps
        out32[0] = S.vmul(b[0], S.u16(3), out_sign="s")  # the low 32 bits, signed

    a = np.array([-32768, -32000, 32767, 30000, 0, 1, -1, 100] * 2, np.int16)
    b = np.array([0, 1, 2**31, 2**32 - 1, 12345, 2**30, 7, 2**31 + 5], np.uint32)
    zp = 1000
    a64 = a.astype(np.int64)
    want16 = np.concatenate([np.clip(a64 - zp, -32768, 32767), np.clip(2 * a64, -32768, 32767),
                             ((a64 - zp) % 2**16)]).astype(np.uint64).astype(np.uint16)
    want16 = want16.view(np.int16)
    want32 = ((b.astype(np.int64) * 3) % 2**32).astype(np.uint32).view(np.int32)
    for run in (k, BuildManager().build(k)):
        o16, o32 = np.full(48, CANARY, np.int16), np.full(8, CANARY, np.int32)
        run(a, b, o16, o32, zp)
        assert (o16 == want16).all() and (o32 == want32).all()


@pytest.mark.parametrize("n, early", [(40, False), (12, True)])
def test_if_and_return_decided_at_build_time(n, early):
    @S.prim_func
    def k(a: S.ptr("int32", "global"), out: S.ptr("int32", "global"), n: S.i32):
        per = S.ceildiv(n, S.get_local_size())
        start = S.get_local_id() * per
        if start >= n:  # the same on every TEC for these n: decided at build time
            return
        if n < 16:
            out[0] = a[0] + 1
            return
        for i in range(per):
            out[start + i] = a[start + i] * 2

    a = np.arange(1, 41, dtype=np.int32)
    want = np.full(40, CANARY, np.int32)
    if early:
        want[0] = a[0] + 1
    else:
        want[:n] = a[:n] * 2
    for got in both(k, a, np.full(40, CANARY, np.int32), n, out=1):
        assert (got == want).all()


def test_conditions_on_the_local_id_trace_each_tec():
    @S.prim_func
    def k(a: S.ptr("int32", "global"), out: S.ptr("int32", "global"), n: S.i32):
        for t in S.tec_range(4):
            if t * 2 >= n:  # TECs 2 and 3 for n = 3: they zero their part and stop
                out[t * 8: t * 8 + 8] = S.int32x8(0)
                return
            for i in range(8):
                out[t * 8 + i] = a[t * 8 + i] + t

    a = np.arange(32, dtype=np.int32) * 5
    want = a + np.repeat(np.arange(4), 8)
    want[16:] = 0
    for got in both(k, a, np.full(32, CANARY, np.int32), 3, out=1):
        assert (got == want).all()
    prog = BuildManager().build(k)
    prog(a, np.zeros(32, np.int32), 3)
    assert "TEC 3" in prog.c_code  # each TEC's trace, named

    @S.prim_func
    def first_three(a: S.ptr("int32", "global"), out: S.ptr("int32", "global")):
        tid = S.get_local_id()
        if tid == 3:
            return
        out[tid] = a[tid] * 10

    want = np.array([0, 50, 100, CANARY], np.int32)
    for got in both(first_three, a, np.full(4, CANARY, np.int32), out=1):
        assert (got == want).all()


def test_a_condition_that_differs_between_iterations_is_refused():
    @S.prim_func
    def k(a: S.ptr("int32", "global"), out: S.ptr("int32", "global")):
        for i in range(4):
            if i >= 2:
                out[i] = a[i]

    with pytest.raises(nk.KernelError, match=r"`i >= 2` is true on some TECs or iterations "
                                             r"and false on others"):
        k(np.zeros(4, np.int32), np.zeros(4, np.int32))


def test_statement_errors_name_what_is_wrong():
    @S.prim_func
    def lanes(a: S.ptr("int32x8", "global"), out: S.ptr("int32", "global")):
        out[0] = a[0][8]

    with pytest.raises(nk.KernelError, match=r"lane 8 of a int32x8 vector"):
        lanes(np.zeros(8, np.int32), np.zeros(1, np.int32))

    @S.prim_func
    def sliced(a: S.ptr("int32", "global"), out: S.ptr("int32", "global")):
        out[0:4] = a[0:S.get_local_id() + 1]

    with pytest.raises(nk.KernelError, match=r"a\[0:tec \+ 1:1\]: a slice of a pointer "
                                             r"with a constant length"):
        sliced(np.zeros(8, np.int32), np.zeros(8, np.int32))

    @S.prim_func
    def in_ddr(a: S.ptr("int32", "global")):
        S.alloc_buffer([8], "int32", scope="global")

    with pytest.raises(nk.KernelError, match=r"scope='global'\): the scopes are 'lsram', "
                                             r"'private', 'shared'"):
        in_ddr(np.zeros(8, np.int32))

    @S.prim_func
    def strided(a: S.ptr("int32", "global"), out: S.ptr("int32", "global"), n: S.i32):
        S.vstore(S.vload(a, stride=n), out)

    with pytest.raises(nk.OutOfBoundsError, match=r"pointer 'a'"):
        strided(np.zeros(8, np.int32), np.zeros(8, np.int32), 2)


def test_strided_dma_memset_and_async_copies_with_events():
    @S.prim_func
    def k(a: S.ptr("int16", "global"), out: S.ptr("int16", "global")):
        buf = S.alloc_buffer([64], "int16", scope="lsram")
        S.dma_memset(buf, -7, 64)
        # "@@@@@xxx" four times: the 5 first of every 8, packed, then spread every 6
        S.dma_copy(buf, a, width=5, src_stride=8, times=4)
        ev = S.alloc_events(1)
        S.async_dma_copy(out + 1, buf, 5, times=4, dst_stride=6, event=ev)
        S.wait_events(ev)
        S.free_events(ev)
        S.dma_copy(out + 30, buf + 20, 4)  # still -7: dma_memset's

    a = np.arange(100, 132, dtype=np.int16)
    packed = a.reshape(4, 8)[:, :5].reshape(-1)
    want = np.full(40, CANARY, np.int16)
    for r in range(4):
        want[1 + 6 * r: 6 + 6 * r] = packed[5 * r: 5 * r + 5]
    want[30:34] = -7
    for got in both(k, a, np.full(40, CANARY, np.int16), out=1):
        assert (got == want).all()


def test_barrier_lets_tecs_read_what_others_wrote():
    @S.prim_func
    def k(a: S.ptr("int32", "global"), tmp: S.ptr("int32", "global"),
          out: S.ptr("int32", "global")):
        tid = S.get_local_id()
        buf = S.alloc_buffer([8], "int32", scope="lsram")
        S.dma_copy(buf, a + tid * 8, 8)
        S.vstore(S.vload(buf) * 2, tmp + tid * 8)
        S.barrier()
        S.dma_copy(buf, tmp + (tid + 1) % 4 * 8, 8)  # the next TEC's result
        S.dma_copy(out + tid * 8, buf, 8)

    a = np.arange(3, 35, dtype=np.int32)
    want = np.roll(a * 2, -8)  # TEC 0 reads what TEC 1 wrote before the barrier
    for run in (k, BuildManager().build(k)):
        tmp, out = np.zeros(32, np.int32), np.full(32, CANARY, np.int32)
        run(a, tmp, out)
        assert (out == want).all()

    @S.prim_func
    def stale(a: S.ptr("int32", "global"), out: S.ptr("int32", "global")):
        buf = S.alloc_buffer([8], "int32", scope="lsram")
        S.dma_copy(buf, a + S.get_local_id() * 8, 8)
        S.barrier()
        S.dma_copy(out + S.get_local_id() * 8, buf, 8)

    for run in (stale, BuildManager().build(stale)):  # each TEC keeps its own copy
        out = np.full(32, CANARY, np.int32)
        run(a, out)
        assert (out == a).all()

    @S.prim_func
    def same(a: S.ptr("int32", "global"), out: S.ptr("int32", "global")):
        v = S.vload(a)  # the same data on every TEC: it may live across the barrier
        S.barrier()
        S.vstore(v + 1, out + S.get_local_id() * 8)

    for run in (same, BuildManager().build(same)):
        out = np.full(32, CANARY, np.int32)
        run(a, out)
        assert (out == np.tile(a[:8] + 1, 4)).all()

    @S.prim_func
    def updated(a: S.ptr("int32", "global"), out: S.ptr("int32", "global")):
        buf = S.alloc_buffer([8], "int32", scope="lsram")
        S.dma_copy(buf, a, 8)
        S.barrier()
        for i in range(8):  # each TEC adds to its own copy, not to the last TEC's sums
            buf[i] = buf[i] + 1
        S.dma_copy(out, buf, 8)

    for run in (updated, BuildManager().build(updated)):  # one update per TEC's own copy
        out = np.full(32, CANARY, np.int32)
        run(a, out)
        assert (out[:8] == a[:8] + 1).all() and (out[8:] == CANARY).all()


def test_a_buffer_filled_element_by_element_then_read_after_the_loop():
    # The simulator batches loop iterations; a buffer the loop only writes, a part at a
    # time, must keep every iteration's part, not the last one's.
    @S.prim_func
    def k(a: S.ptr("int16", "global"), out: S.ptr("int16", "global")):
        src = S.alloc_buffer([16], "int16", scope="lsram")
        dst = S.alloc_buffer([16], "int16", scope="lsram")
        S.dma_copy(src, a, 16)
        for i in S.vectorized(16):
            dst[i] = src[15 - i] + 1
        S.dma_copy(out, dst, 16)

    a = np.arange(200, 216, dtype=np.int16)
    for got in both(k, a, np.full(16, CANARY, np.int16), out=1):
        assert (got == a[::-1] + 1).all()


def test_a_constant_mask_touches_no_memory_after_its_last_active_lane():
    @S.prim_func
    def k(a: S.ptr("int8", "global"), b: S.ptr("int8", "global")):
        v = S.vload(a + 32, mask="3T29F")  # a tail of 3 elements: a holds 35
        S.vstore(v + 1, b + 32, mask="3T29F")
        c = S.vload(a, mask=[True] * 32)  # an all-active list: the whole vector
        S.vstore(c, b)

    a = np.arange(35, dtype=np.int8)
    want = a.copy()
    want[32:] += 1
    for got in both(k, a, np.full(35, CANARY, np.int8), out=1):
        assert (got == want).all()


def test_dma_within_global_memory():
    @S.prim_func
    def k(a: S.ptr("float32", "global"), b: S.ptr("float32", "global")):
        S.dma_copy(b + 4, a, 8)

    a = np.linspace(-1, 1, 8).astype(np.float32)
    want = np.full(12, CANARY, np.float32)
    want[4:] = a
    for got in both(k, a, np.full(12, CANARY, np.float32), out=1):
        assert (got == want).all()


def test_one_lane_values_meet_as_scalars():
    @S.prim_func
    def k(a: S.ptr("float32", "global"), b: S.ptr("float32", "global"),
          c: S.ptr("float32", "global"), n: S.i32):
        for i in range(n):  # the public DSL's quick start
            c[i] = a[i] + b[i]

    a = np.linspace(-3, 3, 20).astype(np.float32)
    b = np.linspace(1, 2, 20).astype(np.float32)
    for got in both(k, a, b, np.full(20, CANARY, np.float32), 20, out=2):
        assert (got == a + b).all()
