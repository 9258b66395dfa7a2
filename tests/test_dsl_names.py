"""The public Compass DSL's names on npukit (``npukit.dsl.script``, ``BuildManager``,
``hw_native_vdtype``, ``get_range``, ``DataType``, ``npukit.dsl.testing``): a kernel
called on the host runs on the simulator, its executable runs the generated C, and what
cannot be modelled is refused by name."""

from __future__ import annotations

import doctest

import ml_dtypes
import numpy as np
import pytest

import npukit as nk
from npukit.dsl import BuildManager, DataType, get_range, hw_native_vdtype
from npukit.dsl import script as S
from npukit.dsl.testing import assert_allclose, rand


@S.prim_func
def scale_add(a: S.ptr("int16", "global"), b: S.ptr("int16", "global"),
              c: S.ptr("int16", "global"), n: S.i32, k: S.int16):
    for i in range(n):
        c[i] = a[i] * k + b[i]


def _want(a, b, k, n):
    """Products and sums wrap to int16, as the DSL's integer arithmetic does."""
    return ((a[:n].astype(np.int64) * k + b[:n]) & 0xFFFF).astype(np.uint16).view(np.int16)


def test_host_call_runs_the_simulator_and_the_executable_runs_c():
    n, k = 37, 700  # 700 * 30000 wraps
    a = np.arange(-20000, 20000, 1000 + 81, dtype=np.int16)[:40]
    b = np.arange(40, dtype=np.int16) * 321
    want = _want(a, b, k, n)
    assert (want != a[:n].astype(np.int64) * k + b[:n]).any()  # some products did wrap
    for run in (scale_add, BuildManager().build(scale_add)):
        out = np.full(40, 12345, np.int16)  # canary: the last 3 are never written
        run(a, b, out, n, k)
        assert (out[:n] == want).all() and (out[n:] == 12345).all()


def test_executable_c_code_and_target_names():
    ex = BuildManager(target="X2_1204").build(scale_add)
    with pytest.raises(nk.KernelError, match=r"call the executable first.*\(n, k\)"):
        _ = ex.c_code
    a = np.ones(8, np.int16)
    ex(a, a, np.zeros(8, np.int16), 8, 3)
    assert "scale_add" in ex.c_code and ex.c_code.lstrip().startswith(("/*", "#"))
    assert BuildManager(target="compass -mcpu=X2_1204").target.name == "compass"
    assert BuildManager(target="X3P_1304").target.name == "compass"
    with pytest.raises(nk.TargetError, match=r"X3S_1304 is not modelled"):
        BuildManager(target="X3S_1304")


def test_call_arguments_are_checked():
    with pytest.raises(nk.DTypeError, match=r"argument 'a' is S.ptr\('int16', 'global'\), "
                                            r"the array holds int32"):
        scale_add(np.zeros(4, np.int32), np.zeros(4, np.int16), np.zeros(4, np.int16), 4, 1)
    with pytest.raises(nk.DTypeError, match=r"argument 'b' .* takes a numpy array, got list"):
        scale_add(np.zeros(4, np.int16), [0] * 4, np.zeros(4, np.int16), 4, 1)
    with pytest.raises(nk.OutOfBoundsError, match=r"pointer 'c'.*past its extent of 4"):
        scale_add(np.zeros(8, np.int16), np.zeros(8, np.int16), np.zeros(4, np.int16), 8, 1)


def test_types_by_their_long_and_short_names():
    assert S.int32 == S.i32 == "int32" and S.uint32x8.lanes == 8
    assert S.float16x16 == S.fp16x16 and S.float16x16.element_of == "float16"
    assert S.int8x16.lanes == 16 and S.bool == "bool"
    t = DataType("float16x16")
    assert (t.is_float16, t.is_floating16, t.is_float, t.is_integer, t.is_vector,
            t.is_scalar, t.bits, t.bytes) == (True, True, True, False, True, False, 16, 2)
    assert DataType("u8").is_uint and DataType("i32").is_int and DataType("bool").is_bool
    assert DataType("float16x16").with_int() == "int16x16"
    assert DataType("int8x32").with_uint() == "uint8x32"
    assert DataType("int8x32").with_bits(16) == "int16x32"
    assert DataType("i32x8").total_bytes == 32 and DataType("u16x16").is_integer_vector
    with pytest.raises(AttributeError, match="has no attribute 'vfoo'"):
        _ = S.vfoo


@pytest.mark.parametrize("dtype, lanes", [("int8", 32), ("uint8", 32), ("int16", 16),
                                          ("uint16", 16), ("int32", 8), ("uint32", 8),
                                          ("float16", 16), ("float32", 8), ("fp16", 16)])
def test_hw_native_vdtype_fills_one_256_bit_register(dtype, lanes):
    t = hw_native_vdtype(dtype)
    assert t.lanes == lanes and t.lanes * t.bits == 256 and t.element_of == DataType(dtype)
    assert hw_native_vdtype(t) == t


def test_get_range():
    assert get_range("int8") == (-128, 127) and get_range("uint32") == (0, 2**32 - 1)
    assert get_range("float16") == (-65504.0, 65504.0)
    assert get_range("bfloat16")[1] == float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)


def test_rand_gives_the_type_in_range_with_its_corners():
    np.random.seed(7)
    x = rand(1000, "int8")
    assert x.dtype == np.int8 and {-128, 0, 127} <= set(x.tolist())
    y = rand((4, 50), "float16", low=-3, high=3)
    assert y.shape == (4, 50) and y.dtype == np.float16 and y.min() == -3 and y.max() < 3
    z = rand(100, "uint16", low=10, high=20, enable_corner_values=False)
    assert z.min() >= 10 and z.max() <= 19
    assert isinstance(rand(1, "int32", return_python_type=True), int)
    np.random.seed(7)
    assert (rand(1000, "int8") == x).all()  # numpy's seed repeats the data


def test_assert_allclose_reads_as_the_public_dsl_does():
    a = np.float16([1.0, 2.0, np.nan])
    b = a.copy()
    b[1] = np.nextafter(b[1], np.float16(3))  # one unit in the last place: passes
    assert_allclose(a, b)
    b[0] = 1.5
    with pytest.raises(AssertionError):
        assert_allclose(a, b)
    with pytest.raises(AssertionError, match="dtype mismatch"):
        assert_allclose(np.int8([1]), np.int16([1]))
    with pytest.raises(AssertionError):
        assert_allclose(np.int32([5]), np.int32([6]))  # integers compare exactly
    assert_allclose(np.int32([5]), np.int32([6]), atol=1)
    bf = np.array([1.0, -2.5, 3e38], ml_dtypes.bfloat16)  # compared exactly, numpy 1 or 2
    assert_allclose(bf, bf.copy())
    with pytest.raises(AssertionError):
        assert_allclose(bf, (bf.view(np.uint16) + np.uint16(1)).view(ml_dtypes.bfloat16))


def test_what_cannot_be_modelled_is_refused_by_name():
    from npukit.dsl import get_rpc_session

    with pytest.raises(nk.NpukitError, match="get_rpc_session: RPC to a Zhouyi board"):
        get_rpc_session(session_timeout=300, rpc_key=None)
    ex = BuildManager().build(scale_add)
    with pytest.raises(nk.NpukitError, match="scale_add.benchmark"):
        ex.benchmark()

    @S.prim_func
    def k(a: S.ptr("int32", "global")):
        S.asm("{add t0.b, t0.b, 1;}")

    with pytest.raises(nk.NpukitError, match=r"S.asm: npukit does not model"):
        k(np.zeros(1, np.int32))


def test_prim_func_takes_the_entry_flag():
    @S.prim_func(is_entry=True)
    def neg(a: S.ptr("int32", "global"), b: S.ptr("int32", "global")):
        b[0] = -a[0]

    b = np.int32([5, 4])
    neg(np.int32([17]), b)
    assert b.tolist() == [-17, 4]


def test_doctests():
    from npukit.dsl import executable, hints, memory, testing

    for mod in (executable, hints, memory, testing):
        result = doctest.testmod(mod)
        assert result.attempted > 0 and result.failed == 0, mod.__name__


def test_every_script_name_is_documented():
    import re
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "dsl.md").read_text()
    missing = [n for n in S.__all__ if not re.search(rf"`@?S\.{n}\b", text)]
    assert not missing
