"""The compiled handle, ``prog.compile("c")``: called by name or in parameter order, it
checks each array as ``Program.run`` does (the same errors, naming the tensor), accepts what
``run`` accepts, writes outputs in place, reuses a scalar buffer per thread for numbers
passed to scalar parameters, runs on copies when an output overlaps an input, and is kept
on the program (``run`` uses it), which still pickles."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest

import npukit as nk
from npukit import kernels as K
from npukit.run import Result

N = 37


def mul_prog(n: int = N):
    return nk.build(K.mul, target="torq", input1=nk.spec((n,), "int8"),
                    input2=nk.spec((n,), "int8"), bias_scale=nk.spec((2,), "int32"),
                    output=nk.spec((n,), "int8"), shift=4, out_min=-100, out_max=90)


def arrays(n: int = N, seed: int = 0):
    rng = np.random.default_rng(seed)
    a, b = rng.integers(-128, 128, (2, n)).astype(np.int8)
    return a, b, np.array([3, -5], np.int32), np.full(n, 77, np.int8)


def sim(prog, a, b, bs) -> np.ndarray:
    out = np.zeros(a.shape, np.int8)
    prog.run("sim", input1=a, input2=b, bias_scale=bs, output=out)
    return out


def test_by_name_in_order_and_both():
    prog = mul_prog()
    fn = prog.compile("c")
    a, b, bs, out = arrays()
    want = sim(prog, a, b, bs)
    res = fn(input1=a, input2=b, bias_scale=bs, output=out)
    assert isinstance(res, Result) and res.outputs["output"] is out
    assert np.array_equal(out, want) and res.cycles is None and res.wall_time > 0
    out[...] = 0
    fn(a, b, bs, out)
    assert np.array_equal(out, want)
    out[...] = 0
    fn(a, b, bias_scale=bs, output=out)
    assert np.array_equal(out, want)


def test_kept_on_the_program_and_used_by_run():
    prog = mul_prog()
    fn = prog.compile("c")
    assert prog.compile("c") is fn and prog.compile("c", fuse=False) is not fn
    a, b, bs, out = arrays()
    prog.run("c", input1=a, input2=b, bias_scale=bs, output=out)
    assert fn.last[0][0]() is a  # run went through the handle: it holds a's pointer
    back = pickle.loads(pickle.dumps(prog))  # the handle stays behind
    out2 = np.zeros(N, np.int8)
    back.run("c", input1=a, input2=b, bias_scale=bs, output=out2)
    assert np.array_equal(out, out2)


def test_errors_name_the_tensor():
    prog = mul_prog()
    fn = prog.compile("c")
    a, b, bs, out = arrays()
    with pytest.raises(nk.ShapeError, match="tensor 'input2': dtype int16"):
        fn(a, b.astype(np.int16), bs, out)
    with pytest.raises(nk.ShapeError, match="tensor 'input1': shape"):
        fn(a[:-1], b, bs, out)
    with pytest.raises(nk.ShapeError, match="tensor 'output' is written .* read-only"):
        ro = out.copy()
        ro.flags.writeable = False
        fn(a, b, bs, ro)
    with pytest.raises(nk.NpukitError, match=r"missing arrays \['output'\]"):
        fn(a, b, bs)
    with pytest.raises(nk.NpukitError, match="5 arrays passed in order, but it has 4"):
        fn(a, b, bs, out, out)
    with pytest.raises(nk.NpukitError, match=r"\['input1'\] passed both in order and by name"):
        fn(a, b, bs, out, input1=a)
    with pytest.raises(nk.NpukitError, match="backend 'sim' has nothing to compile"):
        prog.compile("sim")
    assert (out == 77).all()  # nothing ran


def test_other_layouts_go_through_the_full_check():
    """A size-1 dim with another stride than the spec's, and an array subclass, are
    accepted (as ``run`` accepts them)."""
    n = 9
    prog = nk.build(K.mul, target="torq", input1=nk.spec((1, n), "int8"),
                    input2=nk.spec((1, n), "int8"), bias_scale=nk.spec((2,), "int32"),
                    output=nk.spec((1, n), "int8"), shift=0, out_min=-128, out_max=127)
    big = np.arange(3 * n, dtype=np.int8).reshape(3, n)
    a = big[::2][:1]  # strides (18, 1): the spec says (9, 1)
    b, bs = np.full((1, n), 2, np.int8).view(np.ma.MaskedArray), np.array([1, 1], np.int32)
    out = np.zeros((1, n), np.int8)
    assert a.strides != (n, 1)
    prog.compile("c")(a, b, bs, out)
    assert out.tolist() == [[2 * k + 1 for k in range(n)]]


def test_output_overlapping_an_input_runs_on_copies():
    prog = mul_prog()
    a, b, bs, _ = arrays()
    want = sim(prog, a, b, bs)
    prog.compile("c")(a, b, bs, a)  # the output is input1
    assert np.array_equal(a, want)


SCALAR_C = """
static void scale(float *out, const float *x, int k, float f)
{
    for (int i = 0; i < 4; i++)
        out[i] = x[i] * (float)k + f;
}
"""


def scalar_prog():
    from npukit import ir
    from npukit.layout import Layout
    tgt = nk.target("torq")
    f32 = np.dtype("float32")
    bufs = [ir.Buffer("out", tgt.home, f32, 4, "out"), ir.Buffer("x", tgt.home, f32, 4, "in"),
            ir.Buffer("k", tgt.home, np.dtype("int32"), 1, "in"),
            ir.Buffer("f", tgt.home, f32, 1, "in")]
    specs = [Layout((4,), f32), Layout((4,), f32), Layout((), "int32"), Layout((), f32)]
    fn = ir.Extern("scale", (("float *", "out"), ("const float *", "x"), ("int", "k"),
                             ("float", "f")), False, SCALAR_C, None, lambda **_: 1)
    args = (ir.Ptr(ir.View(bufs[0], specs[0])), ir.Ptr(ir.View(bufs[1], specs[1])),
            ir.Deref(ir.View(bufs[2], Layout((1,), "int32"))),
            ir.Deref(ir.View(bufs[3], Layout((1,), f32))))
    return ir.Program("scale", tgt, tuple(zip(bufs, specs)), (), (ir.Call(fn, args, "scale"),))


def test_numbers_for_scalars_reuse_a_buffer_per_thread():
    prog = scalar_prog()
    fn = prog.compile("c")
    x = np.arange(4, dtype=np.float32)
    out = np.zeros(4, np.float32)
    fn(out, x, 3, 0.5)
    buf = fn.local.scalars["k"]
    assert out.tolist() == [0.5, 3.5, 6.5, 9.5]
    fn(out, x, 2, 1)  # an int for the float parameter too
    assert out.tolist() == [1, 3, 5, 7] and fn.local.scalars["k"] is buf and buf == 2
    with pytest.raises(nk.ShapeError, match="tensor 'k': 4294967296 does not fit int32"):
        fn(out, x, 2**32, 1.0)
    with pytest.raises(nk.DTypeError, match="scalar argument 'k': True is a bool"):
        fn(out, x, True, 1.0)
    seen = {}

    def other():
        o = np.zeros(4, np.float32)
        fn(o, x, 5, 0.0)
        seen["out"], seen["buf"] = o.tolist(), fn.local.scalars["k"]
    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen["out"] == [0, 5, 10, 15] and seen["buf"] is not buf and buf == 2
