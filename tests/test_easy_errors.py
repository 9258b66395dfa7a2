"""Every misuse of the EasyKernel front end fails at build time with the numbers."""

from __future__ import annotations

import numpy as np
import pytest

import npukit as nk
from npukit import kernels as K

MUL = dict(input1=nk.spec((64,), "int8"), input2=nk.spec((64,), "int8"),
           bias_scale=nk.spec((2,), "int32"), output=nk.spec((64,), "int8"),
           shift=0, out_min=-128, out_max=127)


def build(fn, **over):
    return nk.build(nk.kernel(fn), **{**MUL, **over})


def test_two_alu_instructions():
    def k(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
        for i in s.iterate(64):
            d = s.iram.load(input1[i])
            w = s.wram.load(input2[i])
            s.alu.elementwise_product_accumulate(d, w)
            s.alu.elementwise_add(d, w)
    with pytest.raises(nk.KernelError, match="one ALU instruction.*already"):
        build(k)


def test_two_loads_into_iram():
    def k(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
        s.iram.load(input1[0])
        s.iram.load(input2[0])
    with pytest.raises(nk.KernelError, match="one load into IRAM"):
        build(k)


def test_missing_store():
    def k(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
        b = s.bram.load(bias_scale)
        d = s.iram.load(input1[0])
        p = s.alu.accumulate(d)
        s.act.rescale_clamp(p, b, shift, 0, out_min, out_max)
    with pytest.raises(nk.KernelError, match="missing store/append"):
        build(k)


def test_loop_past_tensor_end():
    def k(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
        for i in s.iterate(65):
            s.iram.load(input1[i])
    with pytest.raises(nk.OutOfBoundsError, match=r"'input1'.*0\.\.64.*64 elements"):
        build(k)


def test_integer_index_out_of_range():
    def k(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
        s.iram.load(input1[-65])
    with pytest.raises(nk.OutOfBoundsError, match="-65.*64 elements"):
        build(k)


def test_load_larger_than_iram():
    def k(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
        s.iram.load(input1)
    with pytest.raises(nk.CapacityError, match=r"IRAM holds 288 B.*input1.*300 x int8 = 300 B"):
        build(k, input1=nk.spec((300,), "int8"))


def test_alu_width_exceeded():
    def k(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
        x = input1.vectorize(128)
        d = s.iram.load(x[0])
        s.alu.accumulate(d)
    with pytest.raises(nk.KernelError, match="128 lanes of int8.*ALU width 64"):
        build(k, input1=nk.spec((256,), "int8"))


def test_act_needs_subvectors():
    def k(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
        x = input1.vectorize(64)
        for i in s.iterate(x.dim(0)):
            p = s.alu.accumulate(s.iram.load(x[i]))
            s.append(output, s.act.clamp(p, -128, 127))
    with pytest.raises(nk.KernelError, match="4 vectors of 16.*PData.Vectors"):
        build(k)


def test_unsupported_dtype_pair():
    with pytest.raises(nk.DTypeError, match="int32 x int32"):
        build(K.mul_vectorized.fn, input1=nk.spec((64,), "int32"), input2=nk.spec((64,), "int32"),
              output=nk.spec((64,), "int32"))


def test_append_from_stray_loop():
    def k(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
        b = s.bram.load(bias_scale)
        x = input1.vectorize(16)
        for _rep in s.iterate(2):
            for i in s.iterate(4):
                p = s.alu.accumulate(s.iram.load(x[i]))
                s.append(output[i], s.act.rescale_clamp(p, b, 0, 0, -128, 127))
    with pytest.raises(nk.KernelError, match="loop i0 encloses"):
        build(k, output=nk.spec((4, 16), "int8"))


def test_vectorize_strided_last_dim():
    def k(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
        input1.vectorize(16)
    with pytest.raises(nk.ShapeError, match="stride 2"):
        build(k, input1=nk.spec((32,), "int8", (2,)))


def test_unknown_and_missing_arguments():
    with pytest.raises(nk.KernelError, match=r"missing \['shift'\]"):
        nk.build(K.mul_vectorized, **{k: v for k, v in MUL.items() if k != "shift"})
    with pytest.raises(nk.KernelError, match="not a kernel"):
        nk.build(lambda s: None, **MUL)


def test_run_checks_arrays():
    prog = nk.build(K.mul_vectorized, **MUL)
    a = np.ones(64, np.int8)
    good = dict(input1=a, input2=a, bias_scale=np.array([1, 1], np.int32),
                output=np.zeros(64, np.int8))
    with pytest.raises(nk.ShapeError, match=r"'input1'.*shape \(63,\).*\(64,\)"):
        prog.run(**{**good, "input1": a[:63]})
    with pytest.raises(nk.ShapeError, match="'input2': dtype int16"):
        prog.run(**{**good, "input2": a.astype(np.int16)})
    with pytest.raises(nk.ShapeError, match="'output': dim 0 has stride 2"):
        prog.run(**{**good, "output": np.zeros(128, np.int8)[::2]})
    ro = np.zeros(64, np.int8)
    ro.flags.writeable = False
    with pytest.raises(nk.ShapeError, match="'output'.*read-only"):
        prog.run(**{**good, "output": ro})
    with pytest.raises(nk.NpukitError, match="unknown backend"):
        prog.run("gpu", **good)


def test_target_without_a_slice():
    """gap8 has cores and DMA, no ALU/Act: the error names what is missing and who has it."""
    with pytest.raises(nk.TargetError, match=r"'gap8' has no unit 'alu', unit 'act', memory "
                                             r"IRAM.*targets that have them: torq"):
        nk.build(K.mul_vectorized, "gap8", **MUL)
    with pytest.raises(nk.TargetError, match="'gap8'"):
        nk.build(K.mul_vectorized, target="gap8", **MUL)


KERNEL_SOURCE = '''
import numpy as np
import npukit as nk

@nk.kernel
def double(s, x, output):
    for i in s.iterate(x.dim(0)):
        p = s.alu.elementwise_add(s.iram.load(x[i]), s.wram.load(x[i]))
        s.store(output[i], s.act.clamp(p, -128, 127))
'''


def test_kernel_made_by_exec():
    ns = {}
    exec(compile(KERNEL_SOURCE, "<string>", "exec"), ns)
    prog = nk.build(ns["double"], x=nk.spec((5,), "int8"), output=nk.spec((5,), "int8"))
    assert "not available" in prog.source
    assert all(st.label for st, _ in prog.walk() if not isinstance(st, nk.ir.Loop))
    x = np.array([1, -2, 3, 100, -100], np.int8)
    out = np.zeros(5, np.int8)
    prog.run(x=x, output=out)
    assert out.tolist() == [2, -4, 6, 127, -128]


def test_kernel_read_from_stdin():
    import subprocess
    import sys
    script = KERNEL_SOURCE + '''
prog = nk.build(double, x=nk.spec((3,), "int8"), output=nk.spec((3,), "int8"))
out = np.zeros(3, np.int8)
prog.run(x=np.array([5, 6, 7], np.int8), output=out)
print(out.tolist(), prog.c_source().count("<stdin> line"))
'''
    done = subprocess.run([sys.executable, "-"], input=script, text=True, capture_output=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    got, labels = done.stdout.rsplit(" ", 1)
    assert got == "[10, 12, 14]" and int(labels) > 0


def test_kernel_parameters_named_k_and_target():
    @nk.kernel
    def kern(s, k, target, *, lo=-128):
        for i in s.iterate(k.dim(0)):
            p = s.alu.accumulate(s.iram.load(k[i]))
            s.store(target[i], s.act.clamp(p, lo, 127))
    specs = dict(k=nk.spec((4,), "int8"), target=nk.spec((4,), "int8"))
    x = np.array([-128, -3, 0, 9], np.int8)
    for prog in (nk.build(kern, **specs), nk.build(kern, "torq", **specs, lo=-5)):
        assert prog.target.name == "torq"
        out = np.zeros(4, np.int8)
        prog.run(k=x, target=out)
        assert out.tolist() == np.clip(x, dict(prog.attrs).get("lo", -128), 127).tolist()
    with pytest.raises(nk.KernelError, match="parameter named 'target'.*positionally"):
        nk.build(kern, k=specs["k"], target="torq")
    with pytest.raises(nk.KernelError, match="target is given twice"):
        nk.build(K.mul_vectorized, "torq", target="torq", **MUL)


@pytest.mark.parametrize("call, suggestion", [
    (lambda s, x: s.alu.add(s.iram.load(x[0])), "s.alu.elementwise_add"),
    (lambda s, x: s.act.rescale(None), "s.act.rescale_clamp"),
    (lambda s, x: s.iram.lod(x[0]), "s.iram.load"),
    (lambda s, x: s.stor(x, None), "s.store"),
    (lambda s, x: s.alu.acumulate(None), "s.alu.accumulate"),
    (lambda s, x: x.vectorise(4), "x.vectorize"),
])
def test_misspelt_method_suggests(call, suggestion):
    def k(s, x, output):
        call(s, x)
    with pytest.raises(nk.KernelError, match=f"did you mean {suggestion}"):
        nk.build(nk.kernel(k), x=nk.spec((4,), "int8"), output=nk.spec((4,), "int8"))
