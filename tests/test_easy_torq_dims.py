"""The Torq EasyKernel dimension editors (subviewDim, reshapeDim, insertDim, eraseDim,
moveDim, partitionByIndexParity1D/2D) on LData, against numpy views of the same data, on
the simulator and in C."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_helpers import canary_output, outside_untouched, rescale_ref

import npukit as nk
from npukit.errors import OutOfBoundsError, ShapeError

SHIFT, LO, HI = 4, -120, 120


def edited_mul(edit):
    """output = rescale(edit(input1) * input2): the edit must give the output's shape."""

    @nk.kernel
    def k(s, input1, input2, bias_scale, output):
        a = edit(input1)
        n = s.act.width(a.dtype, input2.dtype)
        bdata = s.bram.load(bias_scale)
        for i in s.iterate(output.dims(0, -1)):
            pdata = s.alu.elementwise_product_accumulate(
                s.iram.load(a.vectorize(n, strided=True)[i][0]),
                s.wram.load(input2.vectorize(n)[i][0]))
            s.append(output, s.act.rescale_clamp(pdata, bdata, SHIFT, 0, LO, HI))
    return k


# (input shape, edit in camelCase as a Torq pattern writes it, the same edit in numpy)
CASES = [
    ((6, 5), lambda x: x.reshapeDim(0, [2, -1]).moveDim(2, 0),
     lambda x: np.moveaxis(x.reshape(2, 3, 5), 2, 0)),
    ((4, 7), lambda x: x.subviewDim(1, 2, 4).insertDim(1, 3),
     lambda x: np.broadcast_to(x[:, None, 2:6], (4, 3, 4))),
    ((3, 4, 5), lambda x: x.eraseDim(1).moveDim(0, 1),
     lambda x: x[:, 0, :].T),
    ((2, 8), lambda x: x.insert_dim(2, 2, 1).subview_dim(2, 0, 1).erase_dim(2),
     lambda x: x),
    # Torq's parity views read memory holding the even-index block first (quadrants in
    # 2-D) back in natural order: dims (n/2, 2) and (h/2, 2, w/2, 2).
    ((3, 10), lambda x: x.partitionByIndexParity1D(),
     lambda x: x.reshape(3, 2, 5).transpose(0, 2, 1)),
    ((2, 4, 6), lambda x: x.partitionByIndexParity2D(),
     lambda x: x.reshape(2, 2, 2, 2, 3).transpose(0, 3, 1, 4, 2)),
    ((8, 3), lambda x: x.subviewDim(0, 0, 7).reshapeDim(0, [-1, 2], True),  # ceil(7/2) x 2
     lambda x: x.reshape(4, 2, 3)),                              # rows: the last is row 7
    ((7, 3), lambda x: x.reshape_dim(0, [2, 3], allow_non_multiple=True),
     lambda x: x[:6].reshape(2, 3, 3)),
    ((1, 1, 4), lambda x: x.broadcastAs([2, 3, 4], 1),          # the first dim only
     lambda x: np.broadcast_to(x, (2, 1, 4))),
    ((2, 9), lambda x: x.setShape([(4, 2), (2, 9), (3, 1)]),  # Im2Col's overlapping windows
     lambda x: np.lib.stride_tricks.as_strided(x, (4, 2, 3), (2, 9, 1))),
]


@pytest.mark.parametrize("backend", ["sim", "c"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_dim_edits_match_numpy(case, backend):
    shape, edit, ref = CASES[case]
    rng = np.random.default_rng(case)
    a = rng.integers(-100, 100, shape).astype("int8")
    a.flat[0] = -127
    view = ref(a)
    b = rng.integers(-100, 100, view.shape).astype("int8")
    big, out, out_spec = canary_output(view.shape, "int8", rng)
    prog = nk.build(edited_mul(edit), target="torq", input1=nk.spec(shape, "int8"),
                    input2=nk.spec(view.shape, "int8"), bias_scale=nk.spec((2,), "int32"),
                    output=out_spec)
    prog.run(backend, input1=a, input2=b, bias_scale=np.array([3, 5], np.int32), output=out)
    want = rescale_ref(view, b, 3, 5, SHIFT, LO, HI)
    assert (out == want).all()
    assert outside_untouched(big, out)


def test_dim_edit_errors_name_tensor_and_sizes():
    @nk.kernel
    def k(s, x, out, *, edit):
        edit(x)

    def build(edit):
        return nk.build(k, target="torq", x=nk.spec((6, 5), "int8"),
                        out=nk.spec((1,), "int8"), edit=edit)

    with pytest.raises(ShapeError, match=r"reshape_dim\(0, \[4, 2\]\).*6 elements"):
        build(lambda x: x.reshape_dim(0, [4, 2]))
    with pytest.raises(ShapeError, match=r"reshape_dim\(0, \[-1, 4\]\).*allow_non_multiple"):
        build(lambda x: x.reshape_dim(0, [-1, 4]))
    with pytest.raises(ShapeError, match=r"reshape_dim\(0, \[2, 4\]\).*6 elements"):
        build(lambda x: x.reshape_dim(0, [2, 4], allow_non_multiple=True))
    with pytest.raises(ShapeError, match=r"partition_by_index_parity_2d needs 2 dense"):
        build(lambda x: x.subview_dim(1, 0, 4).partitionByIndexParity2D())
    with pytest.raises(OutOfBoundsError, match=r"subview_dim\(1, 3, 3\).*5 elements"):
        build(lambda x: x.subview_dim(1, 3, 3))
    with pytest.raises(ShapeError, match="move_dim dim 2 out of range"):
        build(lambda x: x.move_dim(2, 0))
    with pytest.raises(ShapeError, match="of a vectorized layout"):
        build(lambda x: x.vectorize(4).erase_dim(1))
    with pytest.raises(ShapeError, match=r"partition_by_index_parity_1d needs 1 last dim\(s\) "
                                         r"of even size.*\(6, 5\)"):
        build(lambda x: x.partitionByIndexParity1D())
    with pytest.raises(ShapeError, match=r"partition_by_index_parity_2d .*\(6, 5\)"):
        build(lambda x: x.partitionByIndexParity2D())


@nk.kernel
def torq_scale(s, input, weight, output):
    """A Torq pattern's body as in C++: scalarProductAccumulate(idata, wdata) with the
    one weight second, then act.load of the int32 partials."""
    n = s.act.width(input.dtype, weight.dtype)
    x = input.vectorize(n)
    wdata = s.wram.load(weight)
    for i in s.iterate(x.dim(0)):
        pdata = s.alu.scalarProductAccumulate(s.iram.load(x[i]), wdata)
        s.append(output, s.act.load(pdata))


@pytest.mark.parametrize("backend", ["sim", "c"])
def test_torq_order_scalar_product_and_act_load(backend):
    rng = np.random.default_rng(7)
    a = rng.integers(-128, 128, 100).astype("int8")
    a[0] = -128
    w = np.array([-113], np.int8)
    big, out, out_spec = canary_output((100,), "int16", rng)
    prog = nk.build(torq_scale, target="torq", input=nk.spec((100,), "int8"),
                    weight=nk.spec((1,), "int8"), output=out_spec)
    prog.run(backend, input=a, weight=w, output=out)
    assert (out == a.astype(np.int64) * -113).all()  # |a·w| <= 14464 fits int16: no saturation
    assert outside_untouched(big, out)
