"""The Torq compiler's fill (its FillPattern), written with the Torq EasyKernel names: a
kernel with no ALU or Act instruction that stores one constant into every element of the
output, whatever its dims and strides (a view of a larger buffer here: the elements between
its rows stay as they were).

    out[i, j, k] = value

Run: python examples/torq/fill.py
"""

import numpy as np

import npukit as nk


@nk.kernel
def fill(s, output, *, value):
    for ii in s.iterate(output.dims()):
        s.store(output[ii], value)


buf = np.full((3, 4, 12), 55, np.int16)
view = buf[:, :, 2:9]                                      # rows of 7 in rows of 12
prog = nk.build(fill, target="torq",
                output=nk.spec(view.shape, "int16", strides=(48, 12, 1)), value=-1234)
for backend in ("sim", "c"):
    out = np.full((3, 4, 12), 55, np.int16)
    prog.run(backend, output=out[:, :, 2:9])
    want = np.full((3, 4, 12), 55, np.int16)
    want[:, :, 2:9] = -1234                                # independent numpy reading
    print(backend, "a row:", out[0, 0], "matches numpy:", bool((out == want).all()))
    assert (out == want).all()
