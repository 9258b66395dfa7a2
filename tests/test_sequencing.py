"""``nk.sequence``: two EasyKernel kernels chained through an intermediate tensor run as one
program, on the simulator and in C, against numpy; shared parameters are checked."""

from pathlib import Path

import numpy as np
import pytest

import npukit as nk
from npukit import kernels as K

CANARY = -77


def chain():
    """t = mul(a, b) on [32, 300], y = the column sums of t (reduce_rows), saturated."""
    s = nk.spec((32, 300), "int8")
    mul = nk.build(K.mul, target="torq", input1=s, input2=s, bias_scale=nk.spec((2,), "int32"),
                   output=s, shift=3, out_min=-128, out_max=127)
    red = nk.build(K.reduce_rows, target="torq", input=s, output=nk.spec((300,), "int8"))
    return mul, red, nk.sequence((mul, {"input1": "a", "input2": "b", "output": "t"}),
                                 (red, {"input": "t", "output": "y"}), name="mul_then_sum")


@pytest.mark.parametrize("backend", ["sim", "c"])
def test_two_kernels_through_an_intermediate_equal_numpy(backend):
    mul, red, both = chain()
    assert [(b.name, b.role) for b, _ in both.params] == [
        ("a", "in"), ("b", "in"), ("bias_scale", "in"), ("t", "out"), ("y", "out")]
    rng = np.random.default_rng(8)
    a = rng.integers(-60, 60, (32, 300)).astype(np.int8)
    b = rng.integers(-60, 60, (32, 300)).astype(np.int8)
    bs = np.array([5, 3], np.int32)
    # Every element of t and y must be written: both start as canaries inside larger buffers.
    tbuf = np.full(32 * 300 + 20, CANARY, np.int8)
    ybuf = np.full(320, CANARY, np.int8)
    t, y = tbuf[10:-10].reshape(32, 300), ybuf[10:-10]
    res = both.run(backend, a=a, b=b, bias_scale=bs, t=t, y=y)
    prod = a.astype(np.float64) * b
    want_t = np.clip(np.floor(((prod + 5) * 3 + 4) / 8), -128, 127)
    assert (t == want_t).all() and (y == np.clip(want_t.sum(0), -128, 127)).all()
    assert (tbuf[:10] == CANARY).all() and (tbuf[-10:] == CANARY).all()
    assert (ybuf[:10] == CANARY).all() and (ybuf[-10:] == CANARY).all()
    if backend == "sim":  # one timeline: at least as long as either kernel's alone
        one = mul.run("sim", input1=a, input2=b, bias_scale=bs, output=np.zeros_like(a))
        two = red.run("sim", input=t, output=np.zeros(300, np.int8))
        assert res.cycles >= max(one.cycles, two.cycles)
        assert res.outputs.keys() == {"t", "y"}


def test_shared_parameters_must_agree_and_names_must_exist(tmp_path):
    mul, red, _ = chain()
    small = nk.build(K.reduce_rows, target="torq", input=nk.spec((16, 300), "int8"),
                     output=nk.spec((300,), "int8"))
    with pytest.raises(nk.ShapeError, match=r"tensor 't' is .*32, 300.* in 'mul' but .*16, "
                                            r"300.* in 'reduce_rows'"):
        nk.sequence((mul, {"output": "t"}), (small, {"input": "t"}))
    with pytest.raises(nk.KernelError, match=r"program 'mul' has no parameter 'out'; its "
                                             r"parameters: input1, input2, bias_scale, output"):
        nk.sequence((mul, {"out": "t"}), red)
    with pytest.raises(nk.KernelError, match="two parameters named 'x'"):
        nk.sequence((mul, {"input1": "x", "input2": "x"}))
    other = tmp_path / "other.toml"  # the Torq slice under another name
    other.write_text(Path(nk.target("torq").path).read_text().replace('name = "torq"',
                                                                      'name = "other"', 1))
    red2 = nk.build(K.reduce_rows, target=other, input=nk.spec((32, 300), "int8"),
                    output=nk.spec((300,), "int8"))
    with pytest.raises(nk.KernelError, match="'reduce_rows' is built for other, 'mul' for torq"):
        nk.sequence((mul, {"output": "t"}), (red2, {"input": "t"}))


def test_a_tensor_read_first_and_written_later_is_inout():
    """The first program reads the caller's array, the second overwrites it."""
    s = nk.spec((32, 300), "int8")
    red = nk.build(K.reduce_rows, target="torq", input=s, output=nk.spec((300,), "int8"))
    mul = nk.build(K.mul, target="torq", input1=s, input2=s, bias_scale=nk.spec((2,), "int32"),
                   output=s, shift=0, out_min=-128, out_max=127)
    both = nk.sequence((red, {"input": "x"}), (mul, {"input1": "w", "input2": "v",
                                                     "output": "x"}))
    assert dict((b.name, b.role) for b, _ in both.params)["x"] == "inout"
    x = np.arange(32 * 300).reshape(32, 300).astype(np.int8) % 5
    w = np.full((32, 300), 2, np.int8)
    want_sum = np.clip(x.astype(int).sum(0), -128, 127)
    out = np.zeros(300, np.int8)
    both.run("sim", x=x, w=w, v=w, bias_scale=np.array([0, 1], np.int32), output=out)
    assert (out == want_sum).all() and (x == 4).all()
