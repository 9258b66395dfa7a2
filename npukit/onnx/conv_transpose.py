"""``ConvTranspose`` rewritten as a convolution, before the other rewrites of
``npukit.onnx.normalize`` (so a BatchNormalization after it folds into it and the activation
after it fuses, as after a ``Conv``).

Along one spatial axis of length L, with stride s, kernel k, dilation d, pads (b, e) and
output padding a, ConvTranspose makes ``s (L - 1) + a + d (k - 1) + 1 - b - e`` values:
the input with ``s - 1`` zeros inserted after every value (an ``InsertZeros`` node, length
``s L``), padded by ``d (k - 1) - b`` before and ``d (k - 1) - e + a - (s - 1)`` after,
correlated with the kernel flipped along every spatial axis (stride 1, dilation d). The
positive pads are the convolution's own; negative ones are crops of ``InsertZeros``. The
weights ``[C, O / group, k...]`` become ``[O, C / group, k...]``, each group's block
transposed. The pads come from ``pads``, ``auto_pad`` or ``output_shape`` as ONNX Runtime
computes them: ``output_shape`` (or ``SAME_UPPER``/``SAME_LOWER``: ``s L`` values) gives
the total, split evenly with the odd one at the end for ``SAME_UPPER``, at the beginning
otherwise; an ``output_shape`` up to ``s - 1`` values longer than the attributes give ends
in values of the bias alone.

ONNX Runtime sums a ConvTranspose over the input channels first (a GEMM per tap) and then
over the taps (col2im); the convolution sums tap by tap per input channel: float32 results
differ in the last bits. In a QDQ model ONNX Runtime runs the float ConvTranspose between
its DequantizeLinear and QuantizeLinear nodes, and so does npukit (the new weights carry no
quantization, so nothing fuses them into an integer convolution)."""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from .reader import Net, Node, TInfo


def _axis_pads(n: Node, L: int, s: int, k: int, d: int, a: int, want: int | None,
               explicit: tuple[int, int]) -> tuple[int, int]:
    """(pad before, pad after) of one spatial axis, as ONNX Runtime derives them."""
    auto = n.attrs.get("auto_pad", "NOTSET")
    full = s * (L - 1) + a + d * (k - 1) + 1
    if want is None and auto in ("SAME_UPPER", "SAME_LOWER"):
        want = s * L
    if want is None:
        return (0, 0) if auto == "VALID" else explicit
    total = full - want
    if total < 0:  # ONNX Runtime: up to s - 1 more values at the end (the bias alone)
        if -total >= s:
            raise ModelError(f"{n.where()}: output size {want} on an axis where the "
                             f"attributes give {full} values (ONNX Runtime takes at most "
                             f"{full + s - 1})")
        return 0, total
    first = total // 2 if auto == "SAME_UPPER" else total - total // 2
    return first, total - first


def _conv_weights(w: np.ndarray, group: int) -> np.ndarray:
    """ConvTranspose weights [C, O/g, k...] as Conv weights [O, C/g, k...], flipped."""
    C, og = w.shape[:2]
    cg = C // group
    blocks = [np.swapaxes(w[i * cg:(i + 1) * cg], 0, 1) for i in range(group)]
    flip = (slice(None), slice(None)) + (slice(None, None, -1),) * (w.ndim - 2)
    return np.ascontiguousarray(np.concatenate(blocks, 0)[flip])


def _rewrite(net: Net, n: Node) -> list[Node]:
    x, wt = n.inputs[0], n.inputs[1]
    if x not in net.info:
        raise ModelError(f"{n.where()}: input {x!r} has no known shape")
    shape = net.info[x].shape
    rank = len(shape) - 2
    if rank not in (1, 2):
        raise ModelError(f"{n.where()}: a {rank}-D ConvTranspose; npukit takes 1-D and 2-D")
    if wt not in net.consts:
        raise ModelError(f"{n.where()}: the weights {wt!r} must be a constant")
    if len(n.inputs) > 2 and n.inputs[2] and n.inputs[2] not in net.consts:
        raise ModelError(f"{n.where()}: the bias {n.inputs[2]!r} must be a constant")
    w = net.consts[wt].astype(np.float32)
    group = int(n.attrs.get("group", 1))
    C = shape[1]
    if w.ndim != rank + 2 or w.shape[0] != C or C % group:
        raise ModelError(f"{n.where()}: weights {list(w.shape)} for input {list(shape)} "
                         f"with group={group}")
    ks = list(w.shape[2:])
    if list(n.attrs.get("kernel_shape", ks)) != ks:
        raise ModelError(f"{n.where()}: kernel_shape={n.attrs['kernel_shape']} but the "
                         f"weights are {list(w.shape)}")

    def ints(key, default):
        v = [int(t) for t in n.attrs.get(key, [default] * rank)]
        if len(v) != rank:
            raise ModelError(f"{n.where()}: {key}={v} for {rank} spatial axes")
        return v

    st, dil, op = ints("strides", 1), ints("dilations", 1), ints("output_padding", 0)
    pads = [int(t) for t in n.attrs.get("pads", [0] * 2 * rank)]
    want = n.attrs.get("output_shape")
    want = [int(t) for t in want][-rank:] if want is not None else [None] * rank
    conv_pads, crops = [], []
    for i in range(rank):
        L, s, k, d, a = shape[2 + i], st[i], ks[i], dil[i], op[i]
        if not 0 <= a < max(s, d):
            raise ModelError(f"{n.where()}: output_padding {a} on axis {2 + i}; ONNX takes it "
                             f"below the stride {s} or the dilation {d}")
        b, e = _axis_pads(n, L, s, k, d, a, want[i], (pads[i], pads[i + rank]))
        before, after = d * (k - 1) - b, d * (k - 1) - e + a - (s - 1)
        conv_pads.append((max(before, 0), max(after, 0)))
        crops.append((min(before, 0), min(after, 0)))
    wname = f"{wt}__as_conv_{n.name}"
    net.consts[wname] = _conv_weights(w, group)
    attrs = {"group": group, "dilations": dil, "kernel_shape": ks,
             "pads": [p[0] for p in conv_pads] + [p[1] for p in conv_pads]}
    src, out = x, []
    if any(s > 1 for s in st) or any(c != (0, 0) for c in crops):
        src = f"{x}__zeros_{n.name}"
        made = [L * s + b + e for L, s, (b, e) in zip(shape[2:], st, crops)]
        if min(made) < 1:
            raise ModelError(f"{n.where()}: the pads leave no input along an axis")
        net.info[src] = TInfo((*shape[:2], *made), net.info[x].dtype)
        out.append(Node("InsertZeros", f"{n.name}_zeros", [x], [src],
                        {"strides": st, "crops": crops}, "npukit"))
    out.append(Node("Conv", n.name, [src, wname, *n.inputs[2:3]], n.outputs[:1], attrs))
    return out


def conv_transpose_as_conv(net: Net) -> None:
    """Every ``ConvTranspose`` of ``net`` as an ``InsertZeros`` (when needed) and a ``Conv``."""
    nodes = []
    for n in net.nodes:
        nodes += _rewrite(net, n) if n.op == "ConvTranspose" else [n]
    net.nodes = nodes
