"""The Torq compiler's zero-point correction of integer results, per row (its
ZeroPointCorrectPattern), written with the Torq EasyKernel names: unit batch dims are
dropped (``eraseDim``), each row is cut into vectors of the largest power of two that
divides it within the Act's width, and the Act adds the row's bias and scales it with the
row's (bias, scale) record, loaded from BRAM for each vector (``reshapeDim`` makes one
record per row).

    out[m, n] = clamp((x[m, n] + bias[m]) * scale[m], lo, hi)

Run: python examples/torq/zero_point_correct.py
"""

import numpy as np

import npukit as nk


def fitting_vector_size(limit: int, count: int) -> int:
    """The largest power of two up to ``limit`` that divides ``count`` (a record restarts on
    a vector boundary)."""
    size = min(limit, count)
    while size > 1 and (size & (size - 1) or count % size):
        size -= 1
    return size


@nk.kernel
def zero_point_correct(s, input, bias_scale, output, *, out_min, out_max):
    while input.rank > 2 and input.dim(0) == 1:   # rows and columns, one loop each
        input, output = input.eraseDim(0), output.eraseDim(0)
    x = input.vectorize(fitting_vector_size(s.act.width(input.dtype), input.dim(-1)))
    records = bias_scale.reshapeDim(0, [-1, 1, 2])   # one (bias, scale) record per row
    for ndd in s.iterate(x.dims(0, -2)):
        for iv in s.iterate(x.dim(-2)):
            pdata = s.alu.load(s.iram.load(x[ndd][iv]))
            bdata = s.bram.load(records[ndd][0])
            s.append(output[ndd], s.act.rescaleClamp(pdata, bdata, 0, 0, out_min, out_max))


rng = np.random.default_rng(12)
m, n = 6, 48
x = rng.integers(-5000, 5000, (1, m, n)).astype(np.int32)
bias = rng.integers(-300, 300, m)
scale = rng.integers(1, 40, m)
bias_scale = np.stack([bias, scale], 1).reshape(-1).astype(np.int32)
lo, hi = -100000, 100000
prog = nk.build(zero_point_correct, target="torq", input=nk.spec(x.shape, "int32"),
                bias_scale=nk.spec(bias_scale.shape, "int32"),
                output=nk.spec(x.shape, "int32"), out_min=lo, out_max=hi)
want = np.clip((x[0].astype(np.int64) + bias[:, None]) * scale[:, None], lo, hi)[None]
assert (want == hi).any() and (want == lo).any()
for backend in ("sim", "c"):
    out = np.full(x.shape, -7, np.int32)
    prog.run(backend, input=x, bias_scale=bias_scale, output=out)
    print(backend, "first outputs:", out[0, 0, :4], "matches numpy:", bool((out == want).all()))
    assert (out == want).all()
