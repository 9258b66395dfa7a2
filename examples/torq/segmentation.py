"""The Torq compiler's segmentation (its SegmentationPattern), written with the Torq
EasyKernel names. Two layouts, as the pattern chooses by ``h_segments``/``w_segments``:

- 2 x 2: each ``H x W`` plane is written as four quadrants of rows and columns of even and
  odd index (even-even, even-odd, odd-even, odd-odd), the layout a stride-2 convolution
  reads. The output is seen through ``partitionByIndexParity2D`` (natural order over the
  quadrants), so appending each input row in order writes the quadrants.
- h x 1: the rows of each plane are dealt into ``h`` segments, row ``r`` to segment
  ``r % h`` (rows ``[a, b, c, d, e, f]`` with 2 segments become ``[a, c, e, b, d, f]``).

The pattern's other 2 x 2 branch (one fused vector stream per plane) needs a partitioned
output with two dense dims, which ``partitionByIndexParity2D`` never gives (its last dim
steps a whole quadrant), so it is never taken and is left out here. An odd width or
height makes the pattern read one element or row past the tensor: npukit refuses that
read (``OutOfBoundsError``) unless the tensor's buffer reaches it.

Run: python examples/torq/segmentation.py
"""

import numpy as np

import npukit as nk

N, C, H, W = 0, 1, 2, 3          # the pattern's NCHW dims


@nk.kernel
def segmentation(s, input, output, *, h_segments, w_segments):
    if h_segments == 2 and w_segments == 2:
        segment_to_quadrants(s, input, output)
    elif w_segments <= 1:
        segment_h_dim(s, input, output, h_segments)
    else:
        raise nk.KernelError(f"segmentation {h_segments} x {w_segments}: unsupported")


def segment_to_quadrants(s, input, output):
    vector_size = s.act.width(input.dtype)
    output = output.partitionByIndexParity2D()            # [N, C, H/2, 2, W/2, 2]
    dims = list(zip(input.shape, input.layout.strides))
    dims[W] = (input.dim(W) + input.dim(W) % 2, dims[W][1])  # an even count, same stride
    x = input.setShape(dims).reshapeDim(H, [-1, 2], True).vectorize(vector_size)
    for batch in s.iterate(x.dim(N)):
        for ch in s.iterate(x.dim(C)):
            for h in s.iterate(x.dim(H)):
                for oe in s.iterate(2):
                    for iv in s.iterate(x.dim(-2)):
                        pdata = s.alu.load(s.iram.load(x[batch][ch][h][oe][iv]))
                        s.append(output[batch][ch][h][oe], s.act.load(pdata))


def segment_h_dim(s, input, output, h_segments):
    x = input.vectorize(s.act.width(input.dtype))
    x = x.reshapeDim(H, [-1, h_segments], False)          # [N, C, rows, segments, ...]
    out = output.reshapeDim(H, [h_segments, -1], False)   # [N, C, segments, rows, W]
    for batch in s.iterate(x.dim(N)):
        for ch in s.iterate(x.dim(C)):
            for row in s.iterate(x.dim(2)):
                for seg in s.iterate(x.dim(3)):
                    for iv in s.iterate(x.dim(-2)):
                        pdata = s.alu.load(s.iram.load(x[batch][ch][row][seg][iv]))
                        s.append(out[batch][ch][seg][row], s.act.load(pdata))


def quadrants(x):
    """numpy's reading: each plane's four parity quadrants, one after the other."""
    n, c, h, w = x.shape
    return np.stack([x[:, :, p::2, q::2].reshape(n, c, -1) for p in (0, 1) for q in (0, 1)],
                    2).reshape(n, c, h, w)


rng = np.random.default_rng(14)
x = rng.integers(-128, 128, (2, 3, 6, 20)).astype(np.int8)
rows = rng.integers(-128, 128, (2, 3, 6, 24)).astype(np.int8)
rows[..., :20] = x                                  # the same data in rows 24 apart
strided = nk.spec(x.shape, "int8", (3 * 6 * 24, 6 * 24, 24, 1))
dealt = np.concatenate([x[:, :, k::3] for k in range(3)], 2)
for name, spec, a, segs, want in (
        ("quadrants", nk.spec(x.shape, "int8"), x, (2, 2), quadrants(x)),
        ("quadrants, strided rows", strided, rows[..., :20], (2, 2), quadrants(x)),
        ("3 row segments", nk.spec(x.shape, "int8"), x, (3, 1), dealt)):
    prog = nk.build(segmentation, target="torq", input=spec, output=nk.spec(x.shape, "int8"),
                    h_segments=segs[0], w_segments=segs[1])
    for backend in ("sim", "c"):
        out = np.where(want == 99, -99, 99).astype(np.int8)   # a canary unlike every result
        prog.run(backend, input=a, output=out)
        print(name, backend, "matches numpy:", bool((out == want).all()))
        assert (out == want).all()
