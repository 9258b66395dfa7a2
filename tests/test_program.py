"""Programs as values a user handles: ``print(prog)`` shows the IR as indented text, ``repr``
is one line, and a program pickles and runs the same after a round trip."""

from __future__ import annotations

import pickle
import re

import numpy as np
import pytest

import npukit as nk
from npukit import kernels as K
from npukit.tiler import (
    CALL_SEQUENTIAL,
    KER_ARG_TILE,
    KER_ARG_TILE_H,
    KER_ARG_TILE_W,
    KER_DIM2,
    KER_TILE,
    LOC_INNER_LOOP,
    OBJ_IN_DB,
    OBJ_OUT_DB,
    TILE_HOR,
    Bindings,
    Call,
    Calls,
    CArgs,
    K_Arg,
    KerArg,
    KerArgs,
    KernelDimensions,
    KernelIterationOrder,
    Model,
    TCArg,
)


def mul_program(n=1000):
    return nk.build(K.mul_vectorized, target="torq", input1=nk.spec((n,), "int8"),
                    input2=nk.spec((n,), "int8"), bias_scale=nk.spec((2,), "int32"),
                    output=nk.spec((n,), "int8"), shift=6, out_min=-100, out_max=90)


def test_print_shows_parameters_buffers_and_the_statement_tree():
    text = str(mul_program())
    lines = text.splitlines()
    assert lines[0] == "program mul_vectorized for target torq"
    assert "  attributes: out_max=90, out_min=-100, shift=6" in lines
    assert re.search(r"^    input1 +in +int8\[1000\]  strides \(1,\)  offset 0", text, re.M)
    assert re.search(r"^    output +out +int8\[1000\]", text, re.M)
    assert re.search(r"^    bias_scale +in +int32\[2\]", text, re.M)
    # Internal buffers: memory, element count, bytes and slots.
    assert re.search(r"^    IRAM:idata +int8 x 16 \(16 B, 2 slots\)$", text, re.M)
    assert re.search(r"^    BRAM:bdata +int32 x 2 \(8 B\)$", text, re.M)
    # The loop, its body indented one level deeper, each with its kernel source line.
    loop = next(k for k, x in enumerate(lines) if x.lstrip().startswith("for i0 in range(63):"))
    assert lines[loop].endswith("# for i in s.iterate(input1.dim(0)):")
    body = lines[loop + 1: loop + 6]
    indent = len(lines[loop]) - len(lines[loop].lstrip())
    assert all(len(x) - len(x.lstrip()) == indent + 4 for x in body)
    assert body[0].lstrip().startswith("IRAM:idata(16) = input1(16) at 16*i0  [ndl_i, valid "
                                       "clamp(1000 - 16*i0, 0, 16)]")
    assert "PRAM:pdata(16) = alu.mul(IRAM:idata(16), WRAM:wdata(16))" in body[2]
    assert "act.rescale_clamp(PRAM:pdata(16), BRAM:bdata(2))" in body[3]
    assert "hi=90, lo=-100" in body[3] and "shift=6" in body[3]
    assert body[4].lstrip().startswith("append ACT:qdata(16) to output(1000) at cursor")
    assert "cursor = 0  # start of appends into output" in text
    assert "Program(" not in text and "Buffer(" not in text  # not a dataclass dump


def test_print_shows_accumulation_fills_and_calls():
    prog = nk.build(K.reduce_rows, target="torq", input=nk.spec((32, 300), "int8"),
                    output=nk.spec((300,), "int8"), vector="alu")
    text = str(prog)
    assert "PRAM:pdata(64) = fill(0)" in text
    assert "PRAM:pdata(64) = add(PRAM:pdata(64), alu.pass(IRAM:idata(64)))" in text
    assert "IRAM:idata(64) = input(64) at 64*i0 + 300*i1" in text
    tiled = str(tiled_model(scale).program("Scale"))
    assert re.search(r"^    L1:In +int32 x \d+ \(\d+ B, 2 slots of \d+\) at byte 0$", tiled, re.M)
    assert re.search(r"call Scale\(In=&L1:In\(\d+, 40\) at \d+\*\(Tile % 2\), "
                     r"Out=&L1:Out\(\d+, 40\) at \d+\*\(Tile % 2\), W=40, "
                     r"H=clamp\(30 - \d+\*Tile, 0, \d+\)\)  \[sequential\]", tiled)
    assert "for Tile in range(" in tiled


def test_repr_is_one_short_line():
    prog = mul_program()
    text = repr(prog)
    assert text == ("<Program 'mul_vectorized' for torq: 4 parameters, 5 buffers, "
                    "8 statements; print() shows the IR>")
    assert len(text) < 100


# -- pickling --------------------------------------------------------------------------------


def scale(In, Out, W, H):
    """Out = 3 * In + 1 over the tile (a module-level reference: pickle finds it by name)."""
    Out[: W * H] = 3 * In[: W * H] + 1


def scale_cost(W, H):
    return W * H


def tiled_model(reference, cost=scale_cost):
    m = Model(target="gap8", l1_budget=4096)
    m.LibKernel("Scale", CALL_SEQUENTIAL,
                CArgs(TCArg("int *", "In"), TCArg("int *", "Out"), TCArg("unsigned int", "W"),
                      TCArg("unsigned int", "H")), reference=reference, cost=cost)
    m.UserKernel("Scale", KernelDimensions(1, 40, 30, 1),
                 KernelIterationOrder(KER_DIM2, KER_TILE), TILE_HOR,
                 CArgs(TCArg("int *", "In"), TCArg("int *", "Out")),
                 Calls(Call("Scale", LOC_INNER_LOOP, Bindings(
                     K_Arg("In", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE),
                     K_Arg("In", KER_ARG_TILE_W), K_Arg("In", KER_ARG_TILE_H)))),
                 KerArgs(KerArg("In", OBJ_IN_DB, 40, 30, 4, 0, 0, 0, "In", 0),
                         KerArg("Out", OBJ_OUT_DB, 40, 30, 4, 0, 0, 0, "Out", 0)))
    return m


def test_targets_pickle():
    for name in nk.targets():
        t = nk.target(name)
        back = pickle.loads(pickle.dumps(t))
        assert back == t and back.units == t.units and back is not t
        with pytest.raises(TypeError):
            back.memories["L9"] = None  # still read-only


@pytest.mark.parametrize("backend", ["sim", "c"])
def test_an_easykernel_program_pickles_and_runs_the_same(backend):
    prog = mul_program(200)
    back = pickle.loads(pickle.dumps(prog))
    assert back == prog and back is not prog
    assert back.c_source() == prog.c_source()
    rng = np.random.default_rng(5)
    a, b = rng.integers(-128, 128, (2, 200)).astype(np.int8)
    bs = np.array([11, 3], np.int32)
    outs = []
    for p in (prog, back):
        out = np.full(200, 77, np.int8)
        res = p.run(backend, input1=a, input2=b, bias_scale=bs, output=out)
        outs.append((out, res.cycles))
    assert np.array_equal(outs[0][0], outs[1][0]) and outs[0][1] == outs[1][1]
    want = np.clip(np.floor_divide((a.astype(np.int64) * b + 11) * 3 + 32, 64), -100, 90)
    assert np.array_equal(outs[0][0], want)


def test_an_autotiler_program_pickles_when_its_functions_are_module_level():
    prog = tiled_model(scale).program("Scale")
    back = pickle.loads(pickle.dumps(prog))
    assert back == prog
    x = np.random.default_rng(6).integers(-1000, 1000, (30, 40), dtype=np.int32)
    outs = []
    for p in (prog, back):
        out = np.full((30, 40), -5, np.int32)
        res = p.run("sim", In=x, Out=out)
        outs.append((out, res.cycles))
    assert np.array_equal(outs[0][0], 3 * x + 1)
    assert np.array_equal(outs[1][0], outs[0][0]) and outs[1][1] == outs[0][1]


@pytest.mark.parametrize("what", ["reference", "cost"])
def test_a_lambda_in_a_basic_kernel_is_refused_by_name(what):
    def nested(In, Out, W, H):
        Out[: W * H] = In[: W * H]

    funcs = {"reference": (lambda In, Out, W, H: None, scale_cost),
             "cost": (scale, lambda W, H: W * H)}[what]
    prog = tiled_model(*funcs).program("Scale")
    with pytest.raises(nk.KernelError, match=rf"basic kernel 'Scale': its {what}= .*<lambda>"):
        pickle.dumps(prog)
    with pytest.raises(nk.KernelError, match=r"its reference= .*nested.*define it with def"):
        pickle.dumps(tiled_model(nested).program("Scale"))
