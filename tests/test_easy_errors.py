"""Every misuse of the EasyKernel front end fails at build time with the numbers."""

from __future__ import annotations

import numpy as np
import pytest

import npukit as nk
from npukit import kernels as K
from npukit.easy import PData

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
    with pytest.raises(nk.KernelError, match=f"did you mean ([\\w.]+ or )?{suggestion}"):
        nk.build(nk.kernel(k), x=nk.spec((4,), "int8"), output=nk.spec((4,), "int8"))


@pytest.mark.parametrize("make, match", [
    (lambda: nk.spec((3.5,), "int8"), r"spec: shape \(3.5,\): dim 0 must be an integer, got 3.5"),
    (lambda: nk.spec((True, 4), "int8"), r"dim 0 must be an integer, got True"),
    (lambda: nk.spec((4,), "int8", strides=(1.0,)), r"spec: strides.*got 1.0"),
    (lambda: nk.spec((4,), "int8", offset=2.5), r"spec: offset must be an integer, got 2.5"),
    (lambda: nk.spec("12", "int8"), r"sequence of integers, got '12'"),
    (lambda: nk.spec((10,), "int8").vectorize(2.5), r"vector size must be an integer, got 2.5"),
    (lambda: nk.spec((10,), "int8").vectorize(True), r"vector size.*got True"),
    (lambda: nk.spec((2, 5), "int8").fuse(2.0), r"fuse: the number of dims.*got 2.0"),
    (lambda: nk.spec((4, 6), "int8").split(1, 2.0), r"split: factor.*got 2.0"),
    (lambda: nk.spec((4, 6), "int8").split(1.0, 2), r"split: dim.*got 1.0"),
    (lambda: nk.spec((4, 6), "int8").permute((1.0, 0)), r"permute: order.*dim 0.*got 1.0"),
    (lambda: nk.spec((4, 6), "int8").reshape((6, 4.0)), r"reshape.*dim 1.*got 4.0"),
    (lambda: nk.spec((4, 6), "int8").broadcast_as((2.0, 4, 6)), r"broadcast_as.*got 2.0"),
    (lambda: nk.spec((4, 6), "int8").dim(1.0), r"dim must be an integer, got 1.0"),
    (lambda: nk.spec((4, 6), "int8").dims(0.0), r"dims: begin.*got 0.0"),
    (lambda: nk.spec((4, 6), "int8")[0.5:], r"slice.*must be an integer, got 0.5"),
])
def test_floats_and_bools_refused_in_layouts(make, match):
    with pytest.raises(nk.NpukitError, match=match):
        make()


def test_numpy_integers_and_int_shapes_accepted():
    assert nk.spec(37, "int8").shape == np.zeros(37).shape == (37,)
    assert nk.spec(np.int64(37), "int8") == nk.spec((37,), "int8")
    lay = nk.spec((np.int64(4), np.int32(6)), "int8", (np.int64(6), 1), np.int64(2))
    assert lay == nk.spec((4, 6), "int8", (6, 1), 2)
    assert lay.vectorize(np.int64(4)) == lay.vectorize(4)


def _act_kernel(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
    b = s.bram.load(bias_scale)
    for i in s.iterate(input1.dim(0)):
        p = s.alu.elementwise_product_accumulate(s.iram.load(input1[i]), s.wram.load(input2[i]))
        s.store(output[i], s.act.rescale_clamp(p, b, shift, 0, out_min, out_max))


@pytest.mark.parametrize("over, match", [
    (dict(shift=2.5), r"shift must be an integer, got 2.5"),
    (dict(shift=True), r"shift must be an integer, got True"),
    (dict(out_min=-3.5), r"rescale_clamp's lo \(integer partials\).*got -3.5"),
    (dict(out_max=127.0), r"rescale_clamp's hi.*got 127.0"),
    (dict(out_max=np.True_), r"rescale_clamp's hi.*got .*True"),
])
def test_floats_and_bools_refused_as_attributes(over, match):
    with pytest.raises(nk.KernelError, match=match):
        build(_act_kernel, **over)
    prog = build(_act_kernel, shift=np.int64(1), out_min=np.int16(-128), out_max=127)
    assert dict(prog.attrs)["shift"] == 1


@pytest.mark.parametrize("index, error, match", [
    (lambda s, x: s.iterate(True), nk.KernelError, r"iterate: a loop count.*got True"),
    (lambda s, x: s.iterate([2, 2.0]), nk.KernelError, r"loop count.*got 2.0"),
    (lambda s, x: x[1.5], nk.OutOfBoundsError, r"'input1': an index.*got 1.5"),
    (lambda s, x: x[np.float64(1)], nk.OutOfBoundsError, r"'input1': an index.*got 1.0"),
])
def test_floats_and_bools_refused_in_kernels(index, error, match):
    def k(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
        for _ in index(s, input1):
            pass
    with pytest.raises(error, match=match):
        build(k)


def test_float_bounds_accepted_on_float_partials():
    @nk.kernel
    def clamp_f(s, x, output):
        for i in s.iterate(x.dim(0)):
            p = s.alu.accumulate(s.iram.load(x[i]))
            s.store(output[i], s.act.clamp(p, -1.5, 2))
    prog = nk.build(clamp_f, x=nk.spec(4, "float32"), output=nk.spec(4, "float32"))
    out = np.zeros(4, np.float32)
    prog.run(x=np.array([-3, 0.25, 1.75, 9], np.float32), output=out)
    assert out.tolist() == [-1.5, 0.25, 1.75, 2.0]
    with pytest.raises(nk.KernelError, match=r"clamp's lo \(a number\).*got True"):
        nk.build(nk.kernel(lambda s, x, output: [s.store(output, s.act.clamp(
            s.alu.accumulate(s.iram.load(x)), True, 2))]),
            x=nk.spec(4, "float32"), output=nk.spec(4, "float32"))


def test_zero_size_tensor_named():
    with pytest.raises(nk.ShapeError, match=r"tensor 'input2' has no elements \(dim 1 of shape "
                                            r"\(4, 0\) is 0\)"):
        nk.build(K.mul, **{**MUL, "input2": nk.spec((4, 0), "int8")})


def _append_under(count):
    """A kernel appending into output[i] from inside a loop of ``count`` iterations that
    does not index the output (and encloses the loop that does)."""
    def k(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
        x = input1.reshape_dim(0, [2, 32]).insert_dim(0, count)
        out = output.reshape_dim(0, [2, 32])
        bdata = s.bram.load(bias_scale)
        for j in s.iterate(count):
            for i in s.iterate(2):
                p = s.alu.accumulate(s.iram.load(x[j][i]))
                for av in s.iterate(p.dim(PData.Vectors)):
                    s.append(out[i], s.act.rescale_clamp(p[av], bdata, shift, 0, out_min,
                                                         out_max))
    return k


def test_append_under_a_loop_that_does_not_index_the_output():
    """Two iterations would overwrite each other's appends: refused, naming the loop; one
    iteration overwrites nothing (a size-1 dim from insertDim): built and right."""
    with pytest.raises(nk.KernelError, match="append into 'output': loop .* encloses the loop "
                                             "that selects the subtensor"):
        build(_append_under(2))
    prog = build(_append_under(1))
    x = np.arange(-32, 32, dtype=np.int8)
    out = np.zeros(64, np.int8)
    prog.run("sim", input1=x, input2=x, bias_scale=np.array([3, 1], np.int32), output=out)
    assert np.array_equal(out, x.astype(np.int64) + 3)
