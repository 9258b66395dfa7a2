# ruff: noqa: F403, F405  (the AutoTiler's star-import vocabulary, as in test_tiler.py)
"""What reaches generated C from the user: names and types of the AutoTiler vocabulary are
checked when the model is made (``TilingError``) and again by the C back end
(``CompilerError``, for an ``ir.Extern`` built directly), before anything is compiled;
every other name is made an identifier, and comments cannot be closed from inside."""

from __future__ import annotations

import dataclasses
import re
import runpy
from pathlib import Path

import numpy as np
import pytest

import npukit as nk
from npukit import ir
from npukit import kernels as K
from npukit.c import toolchain
from npukit.cdecl import parse_ctype
from npukit.tiler import *

EX = Path(__file__).parent.parent / "examples" / "tiler"

HOSTILE_NAMES = [
    'In1 = 0; system("touch pwned"); KerArg0->In1',
    "In1 /* comment */", "In1\n", "2In", "In-1", "", "In 1", "données", "int", "while",
    "__asm__", "__attribute__", "bool", 7, None,
]
HOSTILE_TYPES = [
    'int; system("touch pwned"); int',
    'Word32 *)0; system("touch pwned"); (Word32 *',
    "Word32 * __restrict__ /*", "int **", "void *", "struct T *", "int [4]", "long",
    "int * restrict x", "restrict int *", "Word64 *", "unsigned int;", "const", 3,
]


@pytest.fixture
def no_compiler(monkeypatch, tmp_path):
    """Fails the test if any C is compiled."""
    monkeypatch.setenv("NPUKIT_CACHE_DIR", str(tmp_path))

    def refuse(cmd):
        pytest.fail(f"C was compiled: {cmd}")
    monkeypatch.setattr(toolchain, "run_compiler", refuse)


def matadd(W_name="W", W_type="unsigned int", name="MatSumPar", arg_type="MatrixAdd_Arg_T"):
    """The GAP AutoTiler's matrix addition with the basic kernel's ``W`` argument, name and struct
    type replaced."""
    ex = runpy.run_path(str(EX / "matadd.py"))
    m = Model(target="gap8", l1_budget=51200)
    m.LibKernel(name, CALL_PARALLEL,
                CArgs(TCArg("Word32 * __restrict__", "In1"), TCArg("Word32 * __restrict__", "In2"),
                      TCArg("Word32 * __restrict__", "Out"), TCArg(W_type, W_name),
                      TCArg("unsigned int", "H")),
                arg_type, c_source=ex["MAT_SUM_PAR_C"], reference=ex["mat_sum_par"])
    ex["mat_add_generator"](m, "MatAdd", 20, 30)
    return m.program("MatAdd")


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=repr)
def test_hostile_argument_name_is_refused_at_model_time(name, no_compiler, tmp_path):
    with pytest.raises(nk.TilingError, match="C argument name " + re.escape(repr(name))):
        matadd(W_name=name)
    assert not list(Path.cwd().glob("pwned")) and not list(tmp_path.iterdir())


@pytest.mark.parametrize("ctype", HOSTILE_TYPES, ids=repr)
def test_hostile_argument_type_is_refused_at_model_time(ctype, no_compiler):
    with pytest.raises(nk.TilingError, match=r"C argument 'W'"):
        matadd(W_type=ctype)


@pytest.mark.parametrize("field", ["name", "arg_type"])
def test_hostile_kernel_and_struct_names_are_refused(field, no_compiler):
    hostile = "MatSumPar(0); system(\"touch pwned\"); void X"
    with pytest.raises(nk.TilingError, match=re.escape(repr(hostile))):
        matadd(**{field: hostile})


@pytest.mark.parametrize("bad", ["My Kernel", "f(x)", "int"])
def test_user_kernel_and_group_names_are_c_names(bad):
    m = Model(target="gap8")
    with pytest.raises(nk.TilingError, match="UserKernel name"):
        m.UserKernel(bad, KernelDimensions(1, 4, 4, 1), KernelIterationOrder(KER_DIM2, KER_TILE),
                     TILE_HOR, CArgs(), Calls(), KerArgs())
    with pytest.raises(nk.TilingError, match="OpenKernelGroup name"):
        m.OpenKernelGroup(bad)


def test_c_arguments_are_tcargs_with_distinct_names():
    m = Model(target="gap8")
    with pytest.raises(nk.TilingError, match="'W' is declared twice"):
        m.LibKernel("K", CALL_SEQUENTIAL, CArgs(TCArg("int", "W"), TCArg("int *", "W")))
    with pytest.raises(nk.TilingError, match="TCArg"):
        m.LibKernel("K", CALL_SEQUENTIAL, (("int", "W"),))


def _with_extern(prog: ir.Program, **changes) -> ir.Program:
    """``prog`` with every call's extern changed as ``dataclasses.replace`` says."""
    def stmt(st):
        if isinstance(st, ir.Loop):
            return dataclasses.replace(st, body=tuple(stmt(s) for s in st.body))
        if isinstance(st, ir.Call):
            return dataclasses.replace(st, fn=dataclasses.replace(st.fn, **changes))
        return st
    return dataclasses.replace(prog, body=tuple(stmt(s) for s in prog.body))


def _args(prog, k, value):
    fn = next(st.fn for st, _ in prog.walk() if isinstance(st, ir.Call))
    args = list(fn.args)
    args[3] = (args[3][0], value) if k == 1 else (value, args[3][1])
    return tuple(args)


@pytest.mark.parametrize("what", ["arg name", "arg type", "name", "arg_type"])
def test_extern_built_directly_is_checked_before_compiling(what, no_compiler):
    """An ``ir.Extern`` need not come from the vocabulary: the C back end checks it again,
    before writing any C."""
    prog = matadd()
    hostile = {"arg name": 'W = 0; system("touch pwned"); KerArg0->W',
               "arg type": 'unsigned int)0; system("touch pwned"); (unsigned int',
               "name": 'MatSumPar; system("touch pwned")',
               "arg_type": 'MatrixAdd_Arg_T x; int y'}[what]
    if what.startswith("arg "):
        bad = _with_extern(prog, args=_args(prog, what == "arg name", hostile))
    else:
        bad = _with_extern(prog, **{what: hostile})
    with pytest.raises(nk.CompilerError, match=re.escape(repr(hostile))):
        bad.c_source()
    a = np.ones((30, 20), np.int32)
    with pytest.raises(nk.CompilerError):
        bad.run("c", In1=a, In2=a, Out=np.zeros_like(a))


def test_types_are_written_as_parsed():
    """Accepted spellings reach C in one canonical form, rebuilt from the parse."""
    assert str(parse_ctype("Word32*__restrict__")) == "Word32 *__restrict__"
    assert str(parse_ctype("volatile  const unsigned   char*restrict const")) == \
        "const volatile unsigned char *restrict const"
    assert parse_ctype("int").pointer is False
    assert parse_ctype("const short int * restrict").const
    assert not parse_ctype("short int * const").const  # the pointer is const, not the data
    src = _with_extern(matadd(), args=_args(matadd(), 0, "unsigned  int")).c_source()
    assert "KerArg0->W = (unsigned int)20;" in src


def _code(src: str) -> str:
    """``src`` without its comments."""
    return re.sub(r"/\*.*?\*/", "", src, flags=re.S)


def test_labels_and_names_cannot_escape_comments():
    """A statement label, a program name or a buffer name carrying ``*/``, ``/*``, newlines
    or C stays in comments or becomes an identifier: the C compiles and agrees with the
    simulator, and no text of it is code."""
    payload = '*/ system("touch pwned"); /*\n// x */'
    n = 40
    prog = nk.build(K.mul_vectorized, target="torq", input1=nk.spec((n,), "int8"),
                    input2=nk.spec((n,), "int8"), bias_scale=nk.spec((2,), "int32"),
                    output=nk.spec((n,), "int8"), shift=8, out_min=-100, out_max=100)

    def relabel(st):
        if isinstance(st, ir.Loop):
            st = dataclasses.replace(st, body=tuple(relabel(s) for s in st.body))
        return dataclasses.replace(st, label=payload + st.label)
    hostile = dataclasses.replace(prog, name=payload, source=payload,
                                  body=tuple(relabel(s) for s in prog.body))
    for fuse in (True, False):
        src = nk.c.c_source(hostile, fuse=fuse)
        assert src.count("system(") >= 2 and "system(" not in _code(src)
    rng = np.random.default_rng(1)
    a, b = (rng.integers(-128, 128, n).astype(np.int8) for _ in range(2))
    bs = np.array([3, 5], np.int32)
    outs = []
    for p, backend in ((prog, "sim"), (hostile, "c")):
        out = np.full(n, 77, np.int8)
        p.run(backend, input1=a, input2=b, bias_scale=bs, output=out)
        outs.append(out)
    assert np.array_equal(*outs) and len(set(outs[0].tolist())) > 5


@pytest.mark.parametrize("module", ["npukit.cdecl", "npukit.c.access"])
def test_docstring_examples(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


@nk.kernel
def _macro_names(s, NULL, INT8_MAX, __x, bias_scale, output):
    """Parameters named as macros of the headers the C includes, or as compiler names."""
    bdata = s.bram.load(bias_scale)
    for i in s.iterate(NULL.dim(0)):
        data1 = s.iram.load(NULL[i])
        data2 = s.wram.load(INT8_MAX[i])
        pdata = s.alu.elementwise_product_accumulate(data1, data2)
        s.store(output[i], s.act.rescale_clamp(pdata, bdata, 3, 0, -128, 127))


def test_parameters_named_like_macros_get_other_c_names(tmp_path, monkeypatch):
    monkeypatch.setenv("NPUKIT_CACHE_DIR", str(tmp_path))
    n = 24
    prog = nk.build(_macro_names, target="torq", NULL=nk.spec((n,), "int8"),
                    INT8_MAX=nk.spec((n,), "int8"), __x=nk.spec((n,), "int8"),
                    bias_scale=nk.spec((2,), "int32"), output=nk.spec((n,), "int8"))
    assert "t_NULL" in prog.c_source() and "t_INT8_MAX" in prog.c_source()
    rng = np.random.default_rng(2)
    a, b = (rng.integers(-128, 128, n).astype(np.int8) for _ in range(2))
    outs = []
    for backend in ("sim", "c"):
        out = np.full(n, 99, np.int8)
        prog.run(backend, NULL=a, INT8_MAX=b, __x=a, bias_scale=np.array([1, 3], np.int32),
                 output=out)
        outs.append(out)
    want = np.clip(((a.astype(np.int64) * b + 1) * 3 + 4) >> 3, -128, 127)
    assert np.array_equal(outs[0], want) and np.array_equal(outs[1], want)
