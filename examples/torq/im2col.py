"""The Torq compiler's 1-D im2col (its Im2ColPattern), written with the Torq EasyKernel
names: the ``[C, W]`` input is seen through overlapping windows ``[Ow, C, Kw]`` (``setShape``
with explicit strides, nothing copied) and each window row goes through the ALU and Act
unchanged into the ``[Ow, C * Kw]`` output (bfloat16 data moved as int16:
``setElementType``).

    out[o, c * Kw + k] = x[c, o * stride + k * dilation]

Run: python examples/torq/im2col.py
"""

import ml_dtypes
import numpy as np

import npukit as nk


@nk.kernel
def im2col(s, input, output, *, stride, dilation, kernel_width):
    if input.dtype == "bfloat16":   # a pure copy: bfloat16 moves as int16, bits unchanged
        input, output = input.setElementType("int16"), output.setElementType("int16")
    channels, width = input.shape
    out_width = output.dim(0)
    x = input.setShape([(out_width, stride), (channels, width), (kernel_width, dilation)])
    out = output.setShape([(out_width, output.dim(1)), (channels, kernel_width),
                           (kernel_width, 1)])
    for ow in s.iterate(out_width):
        for c in s.iterate(channels):
            pdata = s.alu.load(s.iram.load(x[ow][c]))
            s.store(out[ow][c], s.act.load(pdata))


rng = np.random.default_rng(12)
C, W, KW, STRIDE, DIL = 3, 20, 3, 2, 2
OW = (W - DIL * (KW - 1) - 1) // STRIDE + 1
for dtype in ("int8", ml_dtypes.bfloat16):
    x = (rng.integers(-128, 128, (C, W)) / 8).astype(dtype)
    x.reshape(-1)[:2] = [np.nan, -0.0] if dtype != "int8" else [-128, 127]
    prog = nk.build(im2col, target="torq", input=nk.spec(x.shape, dtype),
                    output=nk.spec((OW, C * KW), dtype), stride=STRIDE, dilation=DIL,
                    kernel_width=KW)
    want = np.stack([np.concatenate([x[c, o * STRIDE:o * STRIDE + DIL * (KW - 1) + 1:DIL]
                                     for c in range(C)]) for o in range(OW)])
    bits = want.view(np.uint8 if dtype == "int8" else np.uint16)
    for backend in ("sim", "c"):
        out = np.full(want.shape, 99, dtype)
        prog.run(backend, input=x, output=out)
        got = out.view(bits.dtype)
        assert 99 not in want   # 99: the canary
        print(np.dtype(dtype).name, backend, "first row:", out[0], "matches numpy:",
              bool((got == bits).all()))
        assert (got == bits).all()   # bit for bit (a NaN and -0.0 included)
