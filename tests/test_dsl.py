"""The Compass DSL front end (``npukit.dsl``): the tutorial's LUT kernel as written there and
a second kernel of our own, bit for bit against numpy readings written here from the
formulas, on both back ends; the cycle model per TEC; errors a kernel can cause."""

from __future__ import annotations

import importlib.util
import linecache
import math
import re
from pathlib import Path

import numpy as np
import pytest

import npukit as nk
import npukit.dsl as S
from npukit import ir

EXAMPLES = Path(__file__).parent.parent / "examples" / "dsl"
EVERY = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
FINITE = EVERY[np.isfinite(EVERY)]  # the 63488 finite float16 values


def _example(name: str):
    spec = importlib.util.spec_from_file_location(f"dsl_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SILU = _example("silu_fp16")
GELU = _example("gelu_fp16")


def _run(prog, x: np.ndarray, backend: str, names=("in0", "out0")) -> tuple[np.ndarray, object]:
    out = np.full(x.size, np.nan, np.float16)  # canary: every element must be written
    res = prog.run(backend, **{names[0]: x, names[1]: out})
    return out, res


# -- the tutorial's SiLU ---------------------------------------------------------------------

def silu_reading(x: np.ndarray) -> np.ndarray:
    """The tutorial's compute(), read as numpy: float16 where it computes in float16,
    float32 after S.cast(..., "fp32"), each operation rounded to its type."""
    edge, length = 10, 512
    xs = np.linspace(-edge, edge, length - 1)
    lut = np.empty(length, np.float16)
    lut[:-1] = xs / (1 + np.exp(-xs))  # rounded to float16 on assignment, as gen_silu_lut
    lut[-1] = edge
    inv_delta = np.float32(length - 2) / np.float32(2 * edge)  # S.fp32(510) / 20
    clipped = np.minimum(np.maximum(x, np.float16(-edge)), np.float16(edge))
    idx = (clipped.astype(np.float32) + np.float32(edge)) * inv_delta
    idxr = np.rint(idx - np.float32(0.5))
    i = idxr.astype(np.int64)  # integral and in 0..510 for finite inputs
    assert ((i >= 0) & (i <= length - 2)).all()
    ge = i >= length - 2
    y = np.where(ge, x, np.float16(0))
    lo, hi = lut[i], lut[i + 1]
    diff = (hi - lo).astype(np.float32)  # float16 subtraction, then widened
    yy = (diff * (idx - idxr)).astype(np.float16)
    return np.where(ge, y, yy + lo)  # vxor(true, ge) selects yy + lo where not ge


# n hits every edge of the split over 4 TECs and of the 16384-element LSRAM chunk:
# 63488 fills each TEC with 15872 (a multiple of 16, one chunk); 65537 gives TECs 16385
# (one element past a chunk) and the last TEC 16382; 98307 gives 24577 (not a multiple of
# 16) and 24576; 196609 gives three whole chunks and one element, the last TEC 49150.
@pytest.mark.parametrize("n", [63488, 65537, 98307, 196609])
@pytest.mark.slow
def test_tutorial_silu_all_finite_inputs_sim_c_numpy(n):
    x = np.resize(FINITE, n)  # every finite float16 value, then again from the start
    prog = S.build(SILU.silu_fp16, target="compass", n=n)
    sim, res = _run(prog, x, "sim")
    c, _ = _run(prog, x, "c")
    want = silu_reading(x)
    assert sim.tobytes() == want.tobytes()
    assert c.tobytes() == sim.tobytes()
    per = -(-n // 4)
    assert len(res.report.core_cycles) == 4 and res.cycles == max(res.report.core_cycles)
    if n - 3 * per < per:  # the last TEC has less to do
        assert res.report.core_cycles[3] < res.report.core_cycles[0]


@pytest.mark.parametrize("n", [17, *(pytest.param(n, marks=pytest.mark.slow)
                                    for n in (1, 3, 5, 1000))])
def test_tutorial_silu_small_n(n):
    """n below the TEC count leaves TECs idle; n not a multiple of 16 leaves junk lanes. C
    runs every finite input through the program, the simulator a sample of the batches."""
    prog = S.build(SILU.silu_fp16, target="compass", n=n)
    batches = np.resize(FINITE, -(-FINITE.size // n) * n).reshape(-1, n)
    want = silu_reading(batches.reshape(-1)).reshape(batches.shape)
    c = np.stack([_run(prog, b, "c")[0] for b in batches])
    assert c.tobytes() == want.tobytes()
    for k in np.linspace(0, len(batches) - 1, 8).astype(int):
        sim, res = _run(prog, batches[k], "sim")
        assert sim.tobytes() == want[k].tobytes()
    per = -(-n // 4)
    busy = [min(per, max(0, n - t * per)) > 0 for t in range(4)]
    assert [c > 0 for c in res.report.core_cycles] == busy


@pytest.mark.slow
def test_tutorial_silu_is_accurate():
    """The table's error against float64 SiLU on [-10, 10]: interpolation plus float16."""
    x = FINITE[np.abs(FINITE) <= 10]
    out, _ = _run(S.build(SILU.silu_fp16, target="compass", n=x.size), x, "sim")
    xf = x.astype(np.float64)
    assert np.abs(out - xf / (1 + np.exp(-xf))).max() < 0.01


def test_tutorial_program_is_a_program_like_any_other():
    prog = S.build(SILU.silu_fp16, target="compass", n=1000)
    assert isinstance(prog, nk.Program) and dict(prog.attrs) == {"n": 1000}
    assert [(b.name, b.role, spec.shape) for b, spec in prog.params] == \
        [("in0", "in", (1000,)), ("out0", "out", (1000,))]
    core = prog.body[0]
    assert isinstance(core, ir.Loop) and core.cores and core.var.count == 4
    mems = {b.name: b.memory for b in prog.buffers}
    assert mems["lut"] == "constant" and mems["lsram_ptr"] == "lsram"
    assert mems["x_idx_u16"] == "vreg"  # registers named after the tutorial's variables
    src = prog.c_source()
    assert "Core loop tec" in src and "static const npk_float16 lut[512]" in src
    assert "x_idx_u16 = S.cast(x_idxr, \"u16\")" in src  # statements carry their source line
    engines = {t.src + ">" + t.dst for t in prog.transfers()}
    assert {"DDR>lsram", "lsram>DDR", "lsram>vreg", "vreg>lsram"} <= engines


def test_both_back_ends_implement_every_vector_op():
    from npukit import arith
    from npukit.c import arith as c_arith

    assert set(arith.VEC_OPS) == set(c_arith.VEC_OPS)


@pytest.mark.slow
def test_demo_section_checks_hold(capsys):
    from npukit.demo import compass_dsl

    checks = compass_dsl()
    assert len(checks) == 3 and all(ok is not False for _, ok in checks)
    out = capsys.readouterr().out
    assert re.search(r"cycles per TEC: (\d+ ){3}\d+", out) and "True" in out


def test_run_time_trip_counts():
    """A TEC's chunk loop and vector loop run as many iterations as its share needs."""
    prog = S.build(SILU.silu_fp16, target="compass", n=70001)
    loops = [st for st, _ in prog.walk() if isinstance(st, ir.Loop)]
    chunk, vec = loops[1], loops[2]
    assert chunk.var.count == 2 and vec.var.count == 1024
    assert vec.var.trips is not None and chunk.var in vec.var.trips.vars
    env = {loops[0].var: 3, chunk.var: 1}  # TEC 3 has 70001 - 3 * 17501 = 17498 elements
    assert int(vec.var.running(env)) == -(-(17498 - 16384) // 16)


# -- a kernel of our own: GELU, double-buffered ------------------------------------------

def gelu_reading(x: np.ndarray) -> np.ndarray:
    """gelu16() read as numpy: float32 arithmetic in its order, the 257-entry Phi table."""
    grid = np.arange(257) / 32 - 4
    phi = np.array([0.5 * (1 + math.erf(g / math.sqrt(2))) for g in grid], np.float32)
    f32 = np.float32
    xf = x.astype(f32)
    pos = (np.minimum(np.maximum(xf, f32(-4)), f32(4)) + f32(4)) * f32(32)
    cell = np.minimum(np.rint(pos - f32(0.5)), f32(255))
    i = cell.astype(np.int64)
    cdf = phi[i] + (phi[i + 1] - phi[i]) * (pos - cell)
    inside = (x < 4) & (x > -4)
    y = np.where(inside, xf * cdf, f32(0)).astype(np.float16)
    return np.where(x >= 4, x, y)


@pytest.mark.parametrize("n", [5, *(pytest.param(n, marks=pytest.mark.slow)
                                    for n in (63488, 65537, 98307))])
def test_gelu_kernel_sim_c_numpy(n):
    """5: TECs of 2 and 1 element and an idle one; 63488: every finite input, two halves
    per TEC; 65537: TECs of 16385 = two full halves and one element, so the last pair
    loads nothing into its second half; 98307: three halves and a partial one."""
    x = np.resize(FINITE, n)
    prog = S.build(GELU.gelu_fp16, target="compass", n=n)
    names = ("inp", "out")
    sim, res = _run(prog, x, "sim", names)
    c, _ = _run(prog, x, "c", names)
    assert sim.tobytes() == gelu_reading(x).tobytes()
    assert c.tobytes() == sim.tobytes()
    assert res.cycles == max(res.report.core_cycles)


@pytest.mark.slow
def test_gelu_double_buffering_hides_dma_behind_compute():
    """With 4 halves per TEC, the middle 6 of its 8 transfers run while it computes."""
    n = 4 * 4 * 8192
    x = np.resize(FINITE, n)
    fast = _run(S.build(GELU.gelu_kernel(prefetch=True), target="compass", n=n), x, "sim",
                ("inp", "out"))
    slow = _run(S.build(GELU.gelu_kernel(prefetch=False), target="compass", n=n), x, "sim",
                ("inp", "out"))
    assert fast[0].tobytes() == slow[0].tobytes()
    dma = fast[1].report.busy["dma"]
    assert dma == slow[1].report.busy["dma"]
    assert slow[1].cycles - fast[1].cycles >= 0.6 * dma


# -- loops, subroutines, carried values ----------------------------------------------------

@S.prim_func
def row_sums(a: S.ptr("fp32x8", "global"), out: S.ptr("fp32x8", "global"), rows: S.i32):
    tid = S.get_local_id()
    acc = S.fp32x8(0)
    for r in range(rows):
        acc = acc + a[tid * rows + r]  # carried from one iteration to the next
    out[tid] = acc


def test_vector_carried_across_iterations():
    rows = 5
    prog = S.build(row_sums, target="compass", rows=rows)
    a = np.random.default_rng(0).normal(size=(4, rows, 8)).astype(np.float32)
    want = np.zeros((4, 8), np.float32)
    for r in range(rows):  # float32 additions in loop order
        want = want + a[:, r]
    for backend in ("sim", "c"):
        out = np.full(32, np.nan, np.float32)
        prog.run(backend, a=a.reshape(-1), out=out)
        assert out.tobytes() == want.reshape(-1).tobytes()


@S.prim_func
def scaled_copy(a: S.ptr("i16x16", "global"), out: S.ptr("i16x16", "global"), n: S.i32):
    tid = S.get_local_id()
    for v in range(S.ceildiv(n - tid * 3, 1)):  # a run-time count with no DMA to clamp it
        out[tid * 3 + v] = S.vmul(a[tid * 3 + v], 3)


def test_global_vector_access_in_a_run_time_loop_is_guarded():
    """Direct vector loads in a loop whose count depends on the TEC: the static checks see
    only the iterations that run."""
    prog = S.build(scaled_copy, target="compass", n=10)
    x = np.arange(10 * 16, dtype=np.int16) - 80
    for backend in ("sim", "c"):
        out = np.zeros(160, np.int16)
        prog.run(backend, a=x, out=out)
        assert (out == x * 3).all()


# -- errors ----------------------------------------------------------------------------------

def test_alloc_over_lsram_names_the_buffer():
    @S.prim_func
    def big(a: S.ptr("fp16", "global")):
        first = S.alloc(1024, "fp16x16", scope="lsram")  # noqa: F841 - 32 KiB: all of it
        second = S.alloc(16, "fp16", scope="lsram")  # noqa: F841

    with pytest.raises(nk.CapacityError, match=r"`second`.*32 B.*32768 B.*first 32768 B"):
        S.build(big, target="compass")


def test_out_of_bounds_at_build_time_names_pointer_index_extent():
    @S.prim_func
    def shifted(a: S.ptr("fp16x16", "global"), b: S.ptr("fp16x16", "global")):
        tid = S.get_local_id()
        b[tid] = a[tid + 1]

    with pytest.raises(nk.OutOfBoundsError,
                       match=r"pointer 'a' \(global, 64 x float16\).*reads elements 64\.\.79 "
                             r"\(tec=3\): index 79 is past its extent of 64"):
        S.build(shifted, target="compass", a=64)
    prog = S.build(shifted, target="compass")  # without an extent, a is what it reads
    assert prog.param("a")[1].shape == (80,)


def test_lsram_out_of_bounds_and_negative_index():
    @S.prim_func
    def past(a: S.ptr("fp16", "global"), n: S.i32):
        buf = S.alloc(64, "fp16", scope="lsram")
        S.dma_copy(buf + n, a, 16)

    with pytest.raises(nk.OutOfBoundsError, match=r"pointer 'buf'.*writes elements 60\.\.75"
                                                  r".*index 75 is past its extent of 64"):
        S.build(past, target="compass", n=60)
    with pytest.raises(nk.OutOfBoundsError, match=r"index -4 is before its first element"):
        S.build(past, target="compass", n=-4)


@S.prim_func
def lookup(t: S.ptr("u16x16", "global"), out: S.ptr("fp16x16", "global")):
    table = S.alloc_const((100,), "fp16", np.arange(100) / 4)
    tid = S.get_local_id()
    out[tid] = S.vload_gather(table, t[tid])


def test_gather_out_of_bounds_at_run_time_names_table_index_extent():
    prog = S.build(lookup, target="compass")
    idx = np.arange(64, dtype=np.uint16)
    idx[37] = 100
    with pytest.raises(nk.OutOfBoundsError,
                       match=r"vload_gather from 'table' \(100 x float16\) reads index 100 in "
                             r"lane 5 \(tec=2\), outside its extent 0\.\.99"):
        prog.run("sim", t=idx, out=np.zeros(64, np.float16))


@pytest.mark.parametrize("body, match", [
    ("out[0] = a[0] + S.cast(a[0], 'fp32')", r"vector type mismatch: float16x16 and float32x16"),
    ("out[0] = S.vsel(a[0], S.fp32x16(1), a[0] > 0)", r"float16x16 and float32x16"),
    ("out[0] = S.cast(a[0], 'fp32')", r"float16x16 and float32x16"),
    ("S.dma_copy(S.alloc(16, 'fp16x16', scope='lsram'), a.as_ptr('fp16'), 16)",
     r"dma_copy needs pointers of one type: dst is float16x16\*, src is float16\*"),
    # the sum is float32x16 (the Compass DSL promotes to the wider float): not storable
    ("out[0] = a[0] + S.fp32(1)", r"float16x16\* out: vector type mismatch: float16x16 and "
                                  r"float32x16"),
    ("out[0] = S.vload_gather(S.alloc_const((4,), 'fp16', [1, 2, 3, 4]), S.cast(a[0], 'i32'))",
     r"16-bit integer vector"),
])
def test_type_mismatches_name_both_types(body, match):
    src = f"""
@S.prim_func
def k(a: S.ptr("fp16x16", "global"), out: S.ptr("fp16x16", "global")):
    {body}
"""
    ns = {"S": S}
    exec(compile(src, "<kernel>", "exec"), ns)
    with pytest.raises(nk.DTypeError, match=match):
        S.build(ns["k"], target="compass")


@pytest.mark.parametrize("body, match", [
    ("for i in range(4):\n        if i > 1:\n            out[0] = a[0]",
     r"`i > 1` is true on some TECs or iterations"),
    ("k = 0\n    for i in range(4):\n        k = k + 1\n    out[k] = a[0]",
     r"`k` is reassigned in the device loop"),
    ("for i in range(4):\n        break", r"left early"),
    ("out[S.get_local_id() * S.get_local_id()] = a[0]", r"product of two run-time integers"),
    ("raise ValueError('bad table')", r"ValueError: bad table \(at <kernel>:4\)"),
    ("out[0] = a", r"pointer to float16x16 cannot meet"),
    ("x = a[0]\n    out[0] = x if x else x", r"no truth value"),
    ("S.dma_copy(S.alloc(16, 'fp16x16', scope='lsram'), a, S.get_local_id() - 2)",
     r"S.dma_copy of -2 x float16x16 \(tec=0\)"),
])
def test_hostile_kernels_get_kernel_errors(body, match):
    src = f"""
@S.prim_func
def k(a: S.ptr("fp16x16", "global"), out: S.ptr("fp16x16", "global")):
    {body}
"""
    ns = {"S": S}
    exec(compile(src, "<kernel>", "exec"), ns)
    with pytest.raises(nk.KernelError, match=match):
        S.build(ns["k"], target="compass")


def test_build_arguments_are_checked():
    with pytest.raises(nk.KernelError, match=r"give the scalar argument n \(int32\)"):
        S.build(SILU.silu_fp16, target="compass")
    with pytest.raises(nk.KernelError, match=r"unexpected arguments \['m'\]"):
        S.build(SILU.silu_fp16, target="compass", n=4, m=1)
    with pytest.raises(nk.DTypeError, match=r"does not fit int32"):
        S.build(SILU.silu_fp16, target="compass", n=2**40)
    with pytest.raises(nk.KernelError, match=r"has no memory 'lsram'"):
        S.build(SILU.silu_fp16, target="torq", n=4)
    with pytest.raises(nk.DTypeError, match=r"argument 'in0' is S.ptr\('float16', 'global'\), "
                                            r"the array holds float32"):
        SILU.silu_fp16(np.zeros(4, np.float32), np.zeros(4, np.float16), 4)
    with pytest.raises(nk.DTypeError, match=r"unknown Compass DSL type 'float17'"):
        S.ptr("float17")


def test_subroutine_arguments_and_result_are_checked():
    @S.prim_func
    def half(x: S.fp16x16) -> S.fp16x16:
        return S.cast(x, "fp32")

    @S.prim_func
    def k(a: S.ptr("fp16x16", "global")):
        a[0] = half(a[0])

    with pytest.raises(nk.DTypeError, match=r"half returns float32x16 but is annotated -> "
                                            r"float16x16"):
        S.build(k, target="compass")

    @S.prim_func
    def k2(a: S.ptr("fp16x16", "global")):
        a[0] = half(S.cast(a[0], "fp32"))

    with pytest.raises(nk.DTypeError, match=r"half: argument 'x'.*expects float16x16, got "
                                            r"float32x16"):
        S.build(k2, target="compass")


def test_readable_errors_never_leak_raw_exceptions():
    """Whatever a kernel body does wrong comes out as an NpukitError."""
    bodies = ["a[0] = 'text'", "x = a[0] / a", "S.alloc(-1, 'fp16')", "a[0] = S.vrint(a)",
              "S.cast(a[0], 'fp99')", "a[0] = S.vsel(a[0], a[0], [True] * 17)",
              "a[0] = S.vadd(a[0], a[0], r=a[0])", "a[0] = S.vadd(a[0], a[0], mask='2Q')"]
    for body in bodies:
        src = f"""
@S.prim_func
def k(a: S.ptr("fp16x16", "global")):
    {body}
"""
        ns = {"S": S}
        exec(compile(src, "<kernel>", "exec"), ns)
        with pytest.raises(nk.NpukitError):
            S.build(ns["k"], target="compass")


def test_docs_code_blocks_run():
    text = (Path(__file__).parent.parent / "docs" / "dsl.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 2
    ns: dict = {}
    for k, block in enumerate(blocks):
        where = f"docs/dsl.md block {k}"  # known to linecache, as a file: kernels quote it
        linecache.cache[where] = (len(block), None, block.splitlines(True), where)
        exec(compile(block, where, "exec"), ns)
    for name in S.__all__:  # every name is documented
        assert re.search(rf"`@?S\.{name}\b", text), name


def test_doctests():
    import doctest

    from npukit.dsl import kernel, types

    for mod in (kernel, types):
        result = doctest.testmod(mod)
        assert result.attempted > 0 and result.failed == 0, mod.__name__
