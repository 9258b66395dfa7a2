"""Row sums, x.sum(axis=1): sum each row of [N, M] into [N], saturating. Neither the ALU
nor the Act adds across the lanes of a vector, so the vectors run down the columns: the
transposed view x.permute((1, 0)) is [M, N], and vectorize(w, strided=True) cuts it into
vectors of w rows' elements of one column, which the transfer engine gathers with the row
stride. The ALU accumulates a block of w rows over the M columns, lane by lane; the Act
clamps Act-width sub-vectors of the partials (PData.Vectors) and appends them.

Run: python examples/reduce_cols.py
"""

import numpy as np

import npukit as nk
from npukit.kernels import reduce_cols

rng = np.random.default_rng(7)
x = rng.integers(-128, 128, (300, 24), dtype=np.int8)
want = np.clip(x.astype(np.int64).sum(axis=1), -128, 127)
prog = nk.build(reduce_cols, target="torq", input=nk.spec(x.shape, "int8"),
                output=nk.spec((300,), "int8"))
for backend in ("sim", "c"):
    out = np.zeros(300, np.int8)
    res = prog.run(backend, input=x, output=out)
    print(f"{backend}: matches numpy {bool((out == want).all())}"
          + (f", cycles {res.cycles}" if res.cycles else ""))
    assert (out == want).all()
load = prog.transfers()[0]
print(f"strided load: counts {load.counts}, strides {load.strides} bytes "
      f"(blocks of rows, columns, lanes one row apart)")
assert load.strides[-1] == x.strides[0]
