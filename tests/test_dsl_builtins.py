"""The Compass DSL's lane builtins (``npukit.dsl.builtins_lanes``) against numpy readings of
their definitions: concatenation, split, interleave, broadcast, masks and reductions. Each
kernel works on one vector per TEC (4 per run); outputs start as canary, the simulator and
the generated C must agree bit for bit, and undefined lanes hold the poison.

(No ``from __future__ import annotations``: the kernels' annotations use local type names.)"""

import functools

import ml_dtypes
import numpy as np
import pytest
from dsl_check import assert_lanes, run_both

import npukit as nk
import npukit.dsl as S
from npukit.dsl.trace import _parse_mask

rng = np.random.default_rng(23)
NATIVE = {"int8": 32, "uint8": 32, "int16": 16, "uint16": 16, "int32": 8, "uint32": 8,
          "float16": 16, "bfloat16": 16, "float32": 8}
TEC = 4


def values(dtype: str, n: int) -> np.ndarray:
    """Varied nonzero values of ``dtype``: the whole integer range, or floats of both signs."""
    dt = S.DType(dtype).elem
    if dt.kind in "iu":
        info = np.iinfo(dt)
        v = rng.integers(int(info.min), int(info.max) + 1, n, dtype=np.int64)
        return np.where(v == 0, 1, v).astype(dt)
    return (rng.standard_normal(n) * 40 + 0.5).astype(dt)


def vtype(dtype: str, lanes: int | None = None) -> str:
    return f"{dtype}x{lanes or NATIVE[dtype]}"


# -- vconcat, vsplit, vzip -------------------------------------------------------------------

PART = {"all": lambda v: v, "low": lambda v: v[:len(v) // 2], "high": lambda v: v[len(v) // 2:],
        "even": lambda v: v[0::2], "odd": lambda v: v[1::2]}


@functools.cache
def concat_program(dtype: str, part: str, count: int):
    vt = vtype(dtype)
    n = NATIVE[dtype] * count // (1 if part == "all" else 2)

    @S.prim_func
    def cat(a: S.ptr(vt, "global"), b: S.ptr(vt, "global"), out: S.ptr(vtype(dtype, n), "global")):
        t = S.get_local_id()
        parts = [a[t], b[t] + 1, a[t] * 2][:count]
        out[t] = S.vconcat(parts, part)

    return S.build(cat, target="compass"), n


@pytest.mark.parametrize("dtype", ["int8", "float16", "bfloat16", "uint32"])
@pytest.mark.parametrize("part", list(PART))
def test_vconcat_takes_each_part_of_each_operand_in_order(dtype, part):
    count = 3 if dtype == "int8" else 2
    prog, n = concat_program(dtype, part, count)
    lanes = NATIVE[dtype]
    a, b = values(dtype, TEC * lanes), values(dtype, TEC * lanes)
    got = run_both(prog, {"a": a, "b": b}, {"out": (TEC * n, dtype)})["out"]
    dt = a.dtype
    for t in range(TEC):
        va, vb = a[t * lanes:(t + 1) * lanes], b[t * lanes:(t + 1) * lanes]
        ops = [va, (vb.astype(np.float64) + 1).astype(dt) if dt.kind != "u" and dt.kind != "i"
               else (vb.astype(np.int64) + 1).astype(dt),
               (va.astype(np.float64) * 2).astype(dt) if dt.kind not in "iu"
               else (va.astype(np.int64) * 2).astype(dt)][:count]
        assert_lanes(got[t * n:(t + 1) * n], np.concatenate([PART[part](v) for v in ops]))


@functools.cache
def split_program(dtype: str, parts: int):
    lanes = NATIVE[dtype]

    @S.prim_func
    def split(a: S.ptr(vtype(dtype, lanes * parts), "global"), out: S.ptr(vtype(dtype), "global")):
        t = S.get_local_id()
        pieces = S.vsplit(a[t])
        for k, piece in enumerate(pieces[::-1]):  # build-time Python: reversed order
            out[t * parts + k] = piece

    return S.build(split, target="compass")


@pytest.mark.parametrize("dtype,parts", [("int32", 3), ("bfloat16", 2), ("int8", 2)])
def test_vsplit_cuts_native_registers_lowest_first(dtype, parts):
    lanes = NATIVE[dtype]
    a = values(dtype, TEC * lanes * parts)
    got = run_both(split_program(dtype, parts), {"a": a},
                   {"out": (TEC * lanes * parts, dtype)})["out"]
    want = a.reshape(TEC, parts, lanes)[:, ::-1].reshape(-1)
    assert_lanes(got, want)


def test_vsplit_refuses_a_native_register():
    @S.prim_func
    def one(a: S.ptr("i32x8", "global")):
        a[0] = S.vsplit(a[0])[0]

    with pytest.raises(nk.DTypeError, match=r"S.vsplit of int32x8: .*multiple.*native 8"):
        S.build(one, target="compass")


@functools.cache
def zip_program(dtype: str, part: str):
    n = NATIVE[dtype] * (2 if part == "all" else 1)

    @S.prim_func
    def zipped(a: S.ptr(vtype(dtype), "global"), b: S.ptr(vtype(dtype), "global"),
               out: S.ptr(vtype(dtype, n), "global")):
        t = S.get_local_id()
        out[t] = S.vzip(a[t], b[t], part)

    return S.build(zipped, target="compass"), n


@pytest.mark.parametrize("dtype", ["int16", "float32", "uint8"])
@pytest.mark.parametrize("part", list(PART))
def test_vzip_interleaves_the_selected_lanes(dtype, part):
    prog, n = zip_program(dtype, part)
    lanes = NATIVE[dtype]
    a, b = values(dtype, TEC * lanes), values(dtype, TEC * lanes)
    got = run_both(prog, {"a": a, "b": b}, {"out": (TEC * n, dtype)})["out"]
    for t in range(TEC):
        xs = PART[part](a[t * lanes:(t + 1) * lanes])
        ys = PART[part](b[t * lanes:(t + 1) * lanes])
        assert_lanes(got[t * n:(t + 1) * n], np.stack([xs, ys], axis=1).reshape(-1))


def test_vzip_of_masks_interleaves_them():
    @S.prim_func
    def zm(a: S.ptr("i32x8", "global"), out: S.ptr("i32x8", "global")):
        t = S.get_local_id()
        m = S.vzip(a[t] > 0, S.const_mask("4T4F"), "low")  # a0>0 T a1>0 T a2>0 T a3>0 T
        out[t] = S.vsel(a[t], 0, m)

    a = values("int32", 32)
    got = run_both(S.build(zm, target="compass"), {"a": a}, {"out": (32, "int32")})["out"]
    for t in range(TEC):
        v = a[8 * t:8 * t + 8]
        m = np.stack([v[:4] > 0, np.ones(4, bool)], axis=1).reshape(-1)
        assert_lanes(got[8 * t:8 * t + 8], np.where(m, v, 0))


# -- vbcast and lanes ------------------------------------------------------------------------

@functools.cache
def bcast_program(dtype: str):
    vt = vtype(dtype)

    @S.prim_func
    def bc(a: S.ptr(vt, "global"), out: S.ptr(vt, "global"), lane3: S.ptr(vt, "global"),
           part: S.ptr(vt, "global")):
        t = S.get_local_id()
        out[t] = S.vbcast(S.cast(7, dtype))
        lane3[t] = S.vbcast(a[t][3]) + a[t][0]  # a lane spreads over the other operand too
        part[t] = S.vbcast(a[t][-1], mask="3T")

    return S.build(bc, target="compass")


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "float16", "bfloat16", "float32"])
def test_vbcast_spreads_scalars_and_lanes(dtype):  # S.cast(7, "int32") is a plain int
    lanes = NATIVE[dtype]
    a = values(dtype, TEC * lanes)
    if dtype in ("int8", "uint16"):
        a = (a % 50).astype(a.dtype)  # sums stay in range: the check is about lanes
    got = run_both(bcast_program(dtype), {"a": a},
                   {k: (TEC * lanes, dtype) for k in ("out", "lane3", "part")})
    assert_lanes(got["out"], np.full(TEC * lanes, 7, a.dtype))
    for t in range(TEC):
        v = a[t * lanes:(t + 1) * lanes]
        s = slice(t * lanes, (t + 1) * lanes)
        wide = np.float32 if a.dtype.kind not in "iu" else np.int64
        assert_lanes(got["lane3"][s], np.full(lanes, (wide(v[3]) + wide(v[0]))).astype(a.dtype))
        assert_lanes(got["part"][s], np.full(lanes, v[-1]), np.arange(lanes) < 3)


def test_vbcast_of_a_bool_needs_lanes_and_a_lane_must_be_constant():
    def build(body):
        ns = {"S": S}
        exec(f"@S.prim_func\ndef k(a: S.ptr('i32x8', 'global')):\n    {body}\n", ns)
        return S.build(ns["k"], target="compass")

    with pytest.raises(nk.KernelError, match="S.vbcast of a bool: give lanes="):
        build("a[0] = S.vsel(a[0], 0, S.vbcast(True))")
    with pytest.raises(nk.KernelError, match=r"lane 8 of a int32x8 vector.*0\.\.7"):
        build("a[0] = S.vbcast(a[0][8])")
    with pytest.raises(nk.KernelError, match="S.vbcast: expects a typed scalar"):
        build("a[0] = S.vbcast(3.5)")


# -- masks -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text,lanes", [
    ("3T5F", "TTTFFFFF"), ("4TF", "TFTFTFTF"), ("2FT2TF", "FTFTTFTF"), ("FFFF4T", "FFFFTTTT"),
    ("3T_F", "TTTFFFFF"), ("T", "TFFFFFFF"), ("2T_2F_T", "TTFFTFFF")])
def test_mask_strings_read_as_the_compass_dsl_reads_them(text, lanes):
    assert _parse_mask(text, 8, "m") == [c == "T" for c in lanes]


@pytest.mark.parametrize("text", ["3X", "0T", "T_", "T__F", "5T5F", "", "3"])
def test_bad_mask_strings_are_refused_naming_the_string(text):
    with pytest.raises(nk.DTypeError, match="mask"):
        _parse_mask(text, 8, "m")


@functools.cache
def mask_program(n_offset: int):
    @S.prim_func
    def masks(a: S.ptr("i16x16", "global"), c: S.ptr("i16x16", "global"),
              tail: S.ptr("i16x16", "global"), fixed: S.ptr("i16x16", "global")):
        t = S.get_local_id()
        c[t] = S.vsel(a[t], -1, S.const_mask("2FT2TF8F") | S.const_mask([True] * 2 + [False] * 14))
        tail[t] = S.vsel(a[t], -1, S.tail_mask(t * 6 + n_offset, 16))  # run-time n
        fixed[t] = S.vadd(a[t], 1, mask=S.tail_mask(5, 16), r=-2)

    return S.build(masks, target="compass")


def test_const_and_tail_masks_select_the_lanes_they_name():
    a = values("int16", 64)
    got = run_both(mask_program(-3), {"a": a}, {k: (64, "int16") for k in ("c", "tail", "fixed")})
    m = np.array([c == "T" for c in "FTFTTFTF"] + [False] * 8)
    m[:2] = True
    for t in range(TEC):
        v, s = a[16 * t:16 * t + 16], slice(16 * t, 16 * t + 16)
        assert_lanes(got["c"][s], np.where(m, v, -1))
        n = min(max(6 * t - 3, 0), 16)  # below 0 is 0, past the lanes is all of them
        assert_lanes(got["tail"][s], np.where(np.arange(16) < n, v, -1))
        want = np.where(np.arange(16) < 5, (v.astype(np.int64) + 1).astype(np.int16), -2)
        assert_lanes(got["fixed"][s], want)


def test_a_constant_tail_mask_past_its_lanes_is_refused():
    @S.prim_func
    def bad(a: S.ptr("i16x16", "global")):
        a[0] = S.vsel(a[0], 0, S.tail_mask(17, 16))

    with pytest.raises(nk.KernelError, match=r"S.tail_mask\(17, 16\): n must lie in 0\.\.16"):
        S.build(bad, target="compass")


# -- reductions ------------------------------------------------------------------------------

def tree_sum(v: np.ndarray, acc) -> np.ndarray:
    """Neighbours added level by level in ``acc`` arithmetic: (l0+l1)+(l2+l3) ..."""
    v = v.astype(acc)
    while v.size > 1:
        v = (v[0::2] + v[1::2]).astype(acc)
    return v[0]


@functools.cache
def reduce_program(dtype: str, op: str, regs: int):
    lanes = NATIVE[dtype] * regs
    out_t = vtype("float32", lanes // 2) if op == "vrpadd" and dtype in ("float16", "bfloat16") \
        else vtype(dtype, lanes)

    @S.prim_func
    def red(a: S.ptr(vtype(dtype, lanes), "global"), m: S.ptr(vtype(dtype, lanes), "global"),
            out: S.ptr(out_t, "global"), whole: S.ptr(out_t, "global")):
        t = S.get_local_id()
        fn = getattr(S, op)
        out[t] = fn(a[t], m[t] > 0)
        whole[t] = fn(a[t])

    return S.build(red, target="compass"), S.DType(out_t)


@pytest.mark.slow
@pytest.mark.parametrize("dtype,op,regs", [
    ("int8", "vrpadd", 1), ("uint16", "vrpadd", 2), ("int32", "vrpadd", 1),
    ("float16", "vrpadd", 1), ("bfloat16", "vrpadd", 2), ("float32", "vrpadd", 2),
    ("int8", "vrpmax", 1), ("uint32", "vrpmin", 2), ("float16", "vrpmax", 1),
    ("float32", "vrpmin", 1)])
def test_reductions_put_the_active_lanes_result_in_lane_0(dtype, op, regs):
    prog, out_t = reduce_program(dtype, op, regs)
    lanes = NATIVE[dtype] * regs
    a = values(dtype, TEC * lanes)
    m = np.where(rng.random(TEC * lanes) < 0.6, 1, -1).astype(a.dtype)
    if out_t.elem.kind == "f" or out_t.elem.name == "bfloat16":
        a[3] = np.nan if op != "vrpadd" else a[3]  # a NaN lane wins a max / min
        m[3] = 1
    n = out_t.lanes
    got = run_both(prog, {"a": a, "m": m}, {"out": (TEC * n, out_t.elem),
                                            "whole": (TEC * n, out_t.elem)})
    lane0 = np.arange(n) == 0
    for t in range(TEC):
        v, act = a[t * lanes:(t + 1) * lanes], m[t * lanes:(t + 1) * lanes] > 0
        for key, keep in (("out", act), ("whole", np.ones(lanes, bool))):
            if op == "vrpadd":
                acc = np.float32 if out_t.elem.name == "float32" else v.dtype
                zero = np.zeros((), v.dtype)
                regs_sums = [tree_sum(np.where(keep, v, zero)[k:k + NATIVE[dtype]], acc)
                             for k in range(0, lanes, NATIVE[dtype])]
                want = regs_sums[0]
                for s in regs_sums[1:]:  # the registers' sums in order (integers wrap)
                    with np.errstate(over="ignore"):
                        want = np.asarray(want + s).astype(acc)
            else:
                vals = v[keep].astype(np.float64)
                want = np.nan if np.isnan(vals).any() else (vals.max() if op == "vrpmax"
                                                             else vals.min())
            assert_lanes(got[key][t * n:(t + 1) * n], np.full(n, want), lane0)


def test_vrpadd_of_float16_matches_numpy_float64_sum_closely():
    prog, out_t = reduce_program("float16", "vrpadd", 1)
    a = (rng.standard_normal(64) * 1000).astype(np.float16)
    got = run_both(prog, {"a": a, "m": np.ones(64, np.float16)},
                   {"out": (32, "float32"), "whole": (32, "float32")})["whole"]
    want = a.astype(np.float64).reshape(4, 16).sum(axis=1)
    np.testing.assert_allclose(got[0::8], want, rtol=1e-6)


@functools.cache
def index_program(dtype: str):
    v = vtype(dtype)

    @S.prim_func
    def where(a: S.ptr(v, "global"), mx: S.ptr(v, "global"), mn: S.ptr(v, "global")):
        t = S.get_local_id()
        mx[t] = S.vrpmax(a[t], a[t] != 0, return_idx=True)  # lane 1: where the max is
        mn[t] = S.vrpmin(a[t], return_idx=True)

    return S.build(where, target="compass")


@pytest.mark.parametrize("dtype", ["int8", "uint16", "float32"])
def test_vrpmax_vrpmin_return_the_first_index_of_the_extreme_in_lane_1(dtype):
    lanes = NATIVE[dtype]
    a = values(dtype, TEC * lanes)
    a[2], a[5] = a.max(), a.max()  # ties: the first index counts
    a[lanes + 1] = 0  # inactive for the max: never its index
    got = run_both(index_program(dtype), {"a": a}, {"mx": (TEC * lanes, dtype),
                                                    "mn": (TEC * lanes, dtype)})
    bits = f"uint{8 * a.dtype.itemsize}"
    for t in range(TEC):
        v, s = a[t * lanes:(t + 1) * lanes], slice(t * lanes, (t + 1) * lanes)
        act = np.flatnonzero(v != 0)
        top, low = act[np.argmax(v[act])], int(np.argmin(v))
        first2 = np.arange(lanes) < 2
        assert_lanes(got["mx"][s], np.r_[v[top], np.array(top, bits).view(a.dtype),
                                          np.zeros(lanes - 2, a.dtype)], first2)
        assert_lanes(got["mn"][s], np.r_[v[low], np.array(low, bits).view(a.dtype),
                                          np.zeros(lanes - 2, a.dtype)], first2)


def test_bfloat16_vectors_round_through_float32():
    @S.prim_func
    def bf(a: S.ptr("bf16x16", "global"), b: S.ptr("bf16x16", "global"),
           out: S.ptr("bf16x16", "global"), lt: S.ptr("bf16x16", "global")):
        t = S.get_local_id()
        out[t] = a[t] * b[t] + 1
        lt[t] = S.vsel(a[t], b[t], a[t] < b[t])

    a, b = values("bfloat16", 64), values("bfloat16", 64)
    got = run_both(S.build(bf, target="compass"), {"a": a, "b": b},
                   {"out": (64, "bfloat16"), "lt": (64, "bfloat16")})
    f32 = np.float32
    prod = (a.astype(f32) * b.astype(f32)).astype(ml_dtypes.bfloat16)
    assert_lanes(got["out"], (prod.astype(f32) + f32(1)).astype(ml_dtypes.bfloat16))
    assert_lanes(got["lt"], np.where(a.astype(f32) < b.astype(f32), a, b))


# -- permutations ----------------------------------------------------------------------------

@functools.cache
def permute_program(dtype: str, shift: int):
    v = vtype(dtype)

    @S.prim_func
    def perm(a: S.ptr(v, "global"), b: S.ptr(v, "global"), rev: S.ptr(v, "global"),
             shfl: S.ptr(v, "global"), sldl: S.ptr(v, "global"), rep: S.ptr(v, "global"),
             mrev: S.ptr(v, "global")):
        t = S.get_local_id()
        rev[t] = S.vrevs(a[t])
        shfl[t] = S.vshfl(a[t], shift)
        sldl[t] = S.vsldl(a[t], b[t], shift)
        rep[t] = S.vreplic(a[t], shift)
        mrev[t] = S.vsel(a[t], b[t], S.vrevs(S.tail_mask(3, NATIVE[dtype])))

    return S.build(perm, target="compass")


@pytest.mark.parametrize("dtype,shift", [("int8", 5), ("float16", 0), ("uint32", 7)])
def test_lane_permutations_move_whole_lanes(dtype, shift):
    lanes = NATIVE[dtype]
    a, b = values(dtype, TEC * lanes), values(dtype, TEC * lanes)
    got = run_both(permute_program(dtype, shift), {"a": a, "b": b},
                   {k: (TEC * lanes, dtype) for k in ("rev", "shfl", "sldl", "rep", "mrev")})
    for t in range(TEC):
        s = slice(t * lanes, (t + 1) * lanes)
        x, y = a[s], b[s]
        assert_lanes(got["rev"][s], x[::-1])
        assert_lanes(got["shfl"][s], np.r_[x[shift:], x[:shift]])
        assert_lanes(got["sldl"][s], np.r_[x[shift:], y[:shift]])
        assert_lanes(got["rep"][s], np.full(lanes, x[shift]))
        assert_lanes(got["mrev"][s], np.where(np.arange(lanes) >= lanes - 3, x, y))


def test_a_lane_shift_outside_the_vector_is_refused():
    @S.prim_func
    def bad(a: S.ptr("i32x8", "global")):
        a[0] = S.vshfl(a[0], 8)

    with pytest.raises(nk.KernelError, match=r"S.vshfl: shift 8 must lie in 0\.\.7"):
        S.build(bad, target="compass")


@functools.cache
def table_program(dtype: str, idx_t: str, parts: int):
    lanes = NATIVE[dtype]

    @S.prim_func
    def tbl(a: S.ptr(vtype(dtype), "global"), i: S.ptr(vtype(idx_t, lanes), "global"),
            out: S.ptr(vtype(dtype), "global")):
        t = S.get_local_id()
        out[t] = S.vtbl([a[t], a[t] * 2, a[t] + 1, a[t] - 1][:parts], i[t])

    return S.build(tbl, target="compass")


@pytest.mark.parametrize("dtype,idx_t,parts", [("int16", "int16", 3), ("float32", "uint32", 2),
                                               ("uint8", "uint8", 4)])
def test_vtbl_reads_the_concatenated_table_and_0_outside(dtype, idx_t, parts):
    lanes = NATIVE[dtype]
    a = (values(dtype, TEC * lanes) % 60).astype(S.DType(dtype).elem)
    idx = rng.integers(-3, lanes * parts + 4, TEC * lanes)
    if idx_t[0] == "u":
        idx = np.abs(idx)
    idx = idx.astype(idx_t)
    got = run_both(table_program(dtype, idx_t, parts), {"a": a, "i": idx},
                   {"out": (TEC * lanes, dtype)})["out"]
    for t in range(TEC):
        s = slice(t * lanes, (t + 1) * lanes)
        v = a[s]
        wide = np.float64 if v.dtype.kind == "f" else np.int64
        table = np.concatenate([v, (v.astype(wide) * 2).astype(v.dtype),
                                (v.astype(wide) + 1).astype(v.dtype),
                                (v.astype(wide) - 1).astype(v.dtype)][:parts])
        k = idx[s].astype(np.int64)
        inside = (k >= 0) & (k < table.size)
        assert_lanes(got[s], np.where(inside, table[np.where(inside, k, 0)], 0))


@functools.cache
def compact_program(dtype: str):
    v = vtype(dtype)

    @S.prim_func
    def compact(a: S.ptr(v, "global"), b: S.ptr(v, "global"), m: S.ptr(v, "global"),
                t_out: S.ptr(v, "global"), c_out: S.ptr(v, "global")):
        t = S.get_local_id()
        t_out[t] = S.vcompt(a[t], m[t] > 0)
        c_out[t] = S.vcompc(a[t], b[t], m[t] > 0)

    return S.build(compact, target="compass")


@pytest.mark.parametrize("dtype", ["int8", "float16", "uint32", "bfloat16"])
def test_vcompt_vcompc_pack_the_active_lanes_in_order(dtype):
    lanes = NATIVE[dtype]
    a, b = values(dtype, TEC * lanes), values(dtype, TEC * lanes)
    a[:3] = np.array([0, -0.0, 1], np.float32).astype(a.dtype) if a.dtype.kind not in "iu" \
        else a[:3]  # a zero of either sign is moved bit for bit
    m = np.where(rng.random(TEC * lanes) < 0.5, 1, 0).astype(a.dtype)
    m[:lanes] = 1  # TEC 0: every lane active; TEC 1: none
    m[lanes:2 * lanes] = 0
    got = run_both(compact_program(dtype), {"a": a, "b": b, "m": m},
                   {"t_out": (TEC * lanes, dtype), "c_out": (TEC * lanes, dtype)})
    for t in range(TEC):
        s = slice(t * lanes, (t + 1) * lanes)
        kept = a[s][m[s] > 0]
        assert_lanes(got["t_out"][s], np.r_[kept, np.zeros(lanes - kept.size, a.dtype)])
        assert_lanes(got["c_out"][s], np.r_[kept, b[s][:lanes - kept.size]])


@functools.cache
def insert_program(dtype: str):
    v = vtype(dtype)

    @S.prim_func
    def insert(a: S.ptr(v, "global"), out: S.ptr(v, "global")):
        t = S.get_local_id()
        x = a[t]
        x[t + 1] = 9  # a run-time lane
        x[0] = x[NATIVE[dtype] - 1]  # a lane of the register itself
        out[t] = x

    return S.build(insert, target="compass")


@pytest.mark.parametrize("dtype", ["int16", "float32"])
def test_setting_a_lane_changes_only_that_lane(dtype):
    lanes = NATIVE[dtype]
    a = values(dtype, TEC * lanes)
    got = run_both(insert_program(dtype), {"a": a}, {"out": (TEC * lanes, dtype)})["out"]
    want = a.copy().reshape(TEC, lanes)
    for t in range(TEC):
        want[t, t + 1] = 9
        want[t, 0] = want[t, -1]
    assert_lanes(got, want.reshape(-1))


def test_setting_a_lane_outside_the_vector_is_refused():
    @S.prim_func
    def bad(a: S.ptr("i32x8", "global")):
        x = a[0]
        x[S.get_local_id() + 5] = 1

    with pytest.raises(nk.KernelError, match=r"lane 5\.\.8 of a int32x8 vector"):
        S.build(bad, target="compass")
