"""The Torq compiler's type conversion (its ConvertPattern), written with the Torq
EasyKernel names: one element at a time through the ALU and the Act, the store narrowing
to the output's type with saturation.

    out = saturate_int8(x)     (x int16)

Run: python examples/torq/convert.py
"""

import numpy as np

import npukit as nk


@nk.kernel
def convert(s, input, output):
    for ii in s.iterate(input.dims()):
        pdata = s.alu.load(s.iram.load(input[ii]))
        s.store(output[ii], s.act.load(pdata))


rng = np.random.default_rng(4)
x = rng.integers(-400, 400, (5, 7)).astype(np.int16)
prog = nk.build(convert, target="torq", input=nk.spec(x.shape, "int16"),
                output=nk.spec(x.shape, "int8"))
want = np.clip(x, -128, 127)
assert (want != x).any() and (want == x).any()  # saturates some, keeps others
for backend in ("sim", "c"):
    out = np.full(x.shape, 77, np.int8)
    prog.run(backend, input=x, output=out)
    print(backend, "first outputs:", out[0, :6], "matches numpy:", bool((out == want).all()))
    assert (out == want).all()
