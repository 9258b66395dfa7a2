"""Rewriting a read ``Net`` into the operations npukit lowers:

- ``Identity``, ``Dropout`` (inference) and same-type ``Cast`` become aliases;
- ``ConvTranspose`` becomes a ``Conv`` (after an ``InsertZeros`` when strided or cropped:
  ``npukit.onnx.conv_transpose``);
- ``LpNormalization``, ``LpPool`` and ``GlobalLpPool`` become
  reductions, a depthwise convolution and elementwise operations (``npukit.onnx.composites``);
- ``Einsum`` of one or two operands becomes sums, transposes, reshapes and a ``MatMul``
  (``npukit.onnx.einsum``);
- ``BatchNormalization`` after a ``Conv`` whose output it alone reads is folded into the
  convolution's weights and bias;
- ``ReduceMean`` over the two spatial axes of a 4-D tensor (PyTorch's dynamo exporter writes
  ``adaptive_avg_pool2d`` to 1x1 so) becomes ``GlobalAveragePool``;
- quantized operations become integer operations (``Q*`` ops, attributes below): the
  ``QLinearConv``, ``QLinearMatMul``, ``QLinearAdd``, ``QLinearMul``, ``QGemm``,
  ``QLinearAveragePool``, ``QLinearGlobalAveragePool``, ``QLinearSigmoid``,
  ``QLinearLeakyRelu``, ``QLinearSoftmax`` and ``QLinearConcat`` nodes, and the float
  operations that a ``DequantizeLinear`` feeds and a ``QuantizeLinear`` reads (QDQ), as ONNX
  Runtime's graph transformers fuse them on the CPU. A ``DequantizeLinear`` or
  ``QuantizeLinear`` nothing absorbs stays a layer of its own, around a float operation.

Integer operations carry their quantization parameters: ``x``/``y``/``a``/``b`` are
``(scale, zero_point)`` of per-tensor tensors; weights are ``QConst``; ``lo``/``hi`` the clamp
of the output (an absorbed ReLU or Clip).
"""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from .composites import composites_as_layers
from .conv_transpose import conv_transpose_as_conv
from .einsum import einsum_as_layers
from .reader import MS_DOMAIN, Net, Node, QConst, TInfo

ALIAS_OPS = ("Identity", "Dropout")
LAYOUT_OPS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose")
LUT_FUNCS = ("Sigmoid", "Tanh", "LeakyRelu", "Relu", "Clip")


class _Graph:
    """Producers and consumers of the tensors of a node list."""

    def __init__(self, net: Net):
        self.net = net
        self.producer: dict[str, Node] = {}
        self.consumers: dict[str, list[Node]] = {}
        for n in net.nodes:
            for t in n.outputs:
                self.producer[t] = n
            for t in n.inputs:
                if t:
                    self.consumers.setdefault(t, []).append(n)

    def only_consumer(self, t: str) -> Node | None:
        c = self.consumers.get(t, [])
        return c[0] if len(c) == 1 and t not in self.net.outputs else None


def _scalar(net: Net, node: Node, k: int, what: str, default=None):
    """Input ``k`` of ``node`` as a known constant."""
    if k >= len(node.inputs) or not node.inputs[k]:
        if default is not None:
            return default
        raise ModelError(f"{node.where()}: input {k} ({what}) is missing")
    t = node.inputs[k]
    if t not in net.consts:
        raise ModelError(f"{node.where()}: {what} {t!r} must be a constant")
    return net.consts[t]


def _tensor_q(net: Net, node: Node, ks: int, kz: int, what: str, dtype) -> tuple[np.float32, int]:
    """A per-tensor (scale, zero point) from inputs ``ks`` and ``kz``."""
    s = np.asarray(_scalar(net, node, ks, f"{what} scale"), np.float32)
    z = np.asarray(_scalar(net, node, kz, f"{what} zero point", np.zeros((), dtype)))
    if s.size != 1 or z.size != 1:
        raise ModelError(f"{node.where()}: {what} must be quantized per tensor (scale "
                         f"{s.shape}, zero point {z.shape})")
    return np.float32(s.reshape(-1)[0]), int(z.reshape(-1)[0])


def finite_scales(net: Net) -> None:
    """Refuse a quantization scale that is infinite or NaN: ONNX Runtime's ``quantize_static``
    calibrates one where a tensor holds ``-inf`` or twice ``finfo(float32).min`` (an attention
    mask's fill), and what ONNX Runtime then computes (``-inf / inf`` is NaN) depends on
    which of its vector or scalar loops meets the element."""
    for n in net.nodes:
        if n.op in ("QuantizeLinear", "DequantizeLinear"):
            scales = n.inputs[1:2]
        elif n.domain == MS_DOMAIN and (n.op.startswith("QLinear") or n.op == "QGemm"):
            scales = n.inputs  # their float32 constants are all scales
        else:
            continue
        for t in scales:
            v = net.consts.get(t)
            if v is not None and v.dtype == np.float32 and not np.isfinite(v).all():
                raise ModelError(
                    f"{n.where()}: scale {t!r} is {v.reshape(-1)[~np.isfinite(v.reshape(-1))][0]}"
                    f" (a range calibrated over -inf or finfo(float32).min values, as an "
                    f"attention mask's fill makes); npukit refuses a non-finite scale, whose "
                    f"results ONNX Runtime leaves to the order of its loops (exclude the node "
                    f"from quantization)")


def aliases(net: Net) -> dict[str, str]:
    """Drop Identity, Dropout and same-type Cast; returns output -> input. A graph output
    such a node writes from a tensor another node makes becomes that node's output (the
    tensor is renamed to it), so the rewrites that follow see a graph output where the
    model has one."""
    alias: dict[str, str] = {}

    def root(t: str) -> str:
        while t in alias:
            t = alias[t]
        return t

    producer = {t: n for n in net.nodes for t in n.outputs if t}
    kept = []
    for n in net.nodes:
        if n.op in ALIAS_OPS or (n.op == "Cast" and n.inputs[0] in net.info and
                                 n.outputs[0] in net.info and
                                 net.info[n.inputs[0]].dtype == net.info[n.outputs[0]].dtype):
            if n.op == "Dropout" and len(n.outputs) > 1 and n.outputs[1]:
                used = any(n.outputs[1] in m.inputs for m in net.nodes) or \
                    n.outputs[1] in net.outputs
                if used:
                    raise ModelError(f"{n.where()}: its mask output {n.outputs[1]!r} is used; "
                                     f"npukit runs inference, where Dropout is the identity")
            if n.op == "Dropout" and len(n.inputs) > 2 and n.inputs[2] and not (
                    n.inputs[2] in net.consts and not net.consts[n.inputs[2]].any()):
                raise ModelError(f"{n.where()}: training_mode {n.inputs[2]!r} must be a constant "
                                 f"false; npukit runs inference")
            src, out = root(n.inputs[0]), n.outputs[0]
            made = producer.get(src)
            if out in net.outputs and made is not None and src not in net.outputs:
                made.outputs = [out if t == src else t for t in made.outputs]
                producer[out] = made
                alias[src] = out
            else:
                alias[out] = n.inputs[0]
            continue
        kept.append(n)

    for n in kept:
        n.inputs = [root(t) if t else t for t in n.inputs]
    net.nodes = kept
    return {t: root(t) for t in alias}


def fold_batchnorm(net: Net) -> None:
    """Conv followed by BatchNormalization (the only reader of the convolution's output)
    becomes one Conv with ``W * s`` and ``(B - mean) * s + beta``, ``s = scale / sqrt(var +
    epsilon)`` (computed in float64, stored as float32)."""
    g = _Graph(net)
    drop = set()
    for bn in net.nodes:
        if bn.op != "BatchNormalization" or bn.attrs.get("spatial", 1) != 1:
            continue
        conv = g.producer.get(bn.inputs[0])
        if conv is None or conv.op != "Conv" or g.only_consumer(bn.inputs[0]) is not bn:
            continue
        if any(t not in net.consts for t in bn.inputs[1:5]) or conv.inputs[1] not in net.consts:
            continue
        if len(conv.inputs) > 2 and conv.inputs[2] and conv.inputs[2] not in net.consts:
            continue
        scale, beta, mean, var = (net.consts[t].astype(np.float64) for t in bn.inputs[1:5])
        s = scale / np.sqrt(var + bn.attrs.get("epsilon", 1e-5))
        w = net.consts[conv.inputs[1]].astype(np.float64)
        b = net.consts[conv.inputs[2]].astype(np.float64) if len(conv.inputs) > 2 and \
            conv.inputs[2] else np.zeros(w.shape[0])
        wn, bname = f"{conv.inputs[1]}__bn_{bn.name}", f"{bn.name}__bias"
        net.consts[wn] = (w * s.reshape(-1, *([1] * (w.ndim - 1)))).astype(np.float32)
        net.consts[bname] = ((b - mean) * s + beta).astype(np.float32)
        conv.inputs = [conv.inputs[0], wn, bname]
        conv.outputs = [bn.outputs[0]]
        conv.attrs["_folded"] = [*conv.attrs.get("_folded", []), bn.name]
        drop.add(id(bn))
    net.nodes = [n for n in net.nodes if id(n) not in drop]


def hard_swish_of_mul(net: Net) -> None:
    """``Mul(x, HardSigmoid(x))`` at alpha 1/6 and beta 0.5 (torch.onnx's hardswish before
    opset 14), the hard sigmoid read by the Mul alone, is one ``HardSwish``: the same
    operations on the same float32 values, which a layer can then absorb."""
    g = _Graph(net)
    drop = set()
    for mul in net.nodes:
        if mul.op != "Mul" or len(mul.inputs) != 2:
            continue
        for x, h in (mul.inputs, mul.inputs[::-1]):
            hs = g.producer.get(h)
            if hs is not None and hs.op == "HardSigmoid" and hs.inputs[0] == x and \
                    g.only_consumer(h) is mul and x in net.info and \
                    net.info[x].dtype == np.float32 and \
                    np.float32(hs.attrs.get("alpha", 0.2)) == np.float32(1 / 6) and \
                    np.float32(hs.attrs.get("beta", 0.5)) == np.float32(0.5):
                mul.op, mul.inputs, mul.attrs = "HardSwish", [x], {}
                drop.add(id(hs))
                break
    net.nodes = [n for n in net.nodes if id(n) not in drop]


def reduce_mean_as_pool(net: Net) -> None:
    """``ReduceMean`` over axes {2, 3} of a 4-D tensor is ``GlobalAveragePool``. With
    ``keepdims=0`` the pooling writes the [N, C] output directly: dropping two axes of size 1
    leaves the same bytes. Any other ``ReduceMean`` stays a reduction."""
    for n in net.nodes:
        if n.op != "ReduceMean":
            continue
        shape = net.info[n.inputs[0]].shape if n.inputs[0] in net.info else None
        if len(n.inputs) > 1 and n.inputs[1]:  # opset 18: the axes are an input
            axes = _scalar(net, n, 1, "axes").reshape(-1).tolist()
        else:
            axes = n.attrs.get("axes", [])
        if shape is not None and len(shape) == 4 and shape[0] == 1 and \
                sorted(a % 4 for a in axes) == [2, 3]:
            n.op, n.inputs, n.attrs = "GlobalAveragePool", n.inputs[:1], {}


# -- explicit quantized operators -------------------------------------------------------------

def _qweight(net: Net, node: Node, k: int, ks: int, kz: int, axis: int) -> QConst:
    """A constant integer weight input with its (per-tensor or per-axis) scale and zero point."""
    w = np.asarray(_scalar(net, node, k, "weight"))
    s = np.asarray(_scalar(net, node, ks, "weight scale"), np.float32).reshape(-1)
    z = np.asarray(_scalar(net, node, kz, "weight zero point", np.zeros(1, w.dtype))).reshape(-1)
    return QConst(w, s, z, axis)


def _bias(net: Net, node: Node, k: int) -> np.ndarray | None:
    if k >= len(node.inputs) or not node.inputs[k]:
        return None
    b = np.asarray(_scalar(net, node, k, "bias"))
    if b.dtype != np.int32:
        raise ModelError(f"{node.where()}: the bias must be int32, got {b.dtype}")
    return b


def _qnode(op: str, node: Node, inputs: list[str], outputs: list[str], **attrs) -> Node:
    return Node(op, node.name, inputs, outputs, {**node.attrs, **attrs}, "npukit")


def explicit_quantized(net: Net) -> None:
    """QLinear* (and QGemm) nodes as the ``Q*`` integer operations."""
    out = []
    for n in net.nodes:
        dt = net.info[n.inputs[0]].dtype if n.inputs and n.inputs[0] in net.info else None
        if n.op == "QLinearConv":
            out.append(_qnode("QConv", n, [n.inputs[0]], n.outputs,
                              x=_tensor_q(net, n, 1, 2, "x", dt), w=_qweight(net, n, 3, 4, 5, 0),
                              y=_tensor_q(net, n, 6, 7, "y", dt), bias=_bias(net, n, 8)))
        elif n.op == "QLinearMatMul":
            b = n.inputs[3]
            if b in net.consts:
                out.append(_qnode("QMatMul", n, [n.inputs[0]], n.outputs,
                                  a=_tensor_q(net, n, 1, 2, "a", dt),
                                  w=_qweight(net, n, 3, 4, 5, 1),
                                  y=_tensor_q(net, n, 6, 7, "y", dt), bias=None))
            else:
                out.append(_qnode("QMatMul", n, [n.inputs[0], b], n.outputs,
                                  a=_tensor_q(net, n, 1, 2, "a", dt),
                                  b=_tensor_q(net, n, 4, 5, "b", net.info[b].dtype),
                                  y=_tensor_q(net, n, 6, 7, "y", dt), bias=None))
        elif n.op in ("QLinearAdd", "QLinearMul") and n.domain == MS_DOMAIN:
            out.append(_qnode("QAdd" if n.op == "QLinearAdd" else "QMul", n,
                              [n.inputs[0], n.inputs[3]], n.outputs,
                              a=_tensor_q(net, n, 1, 2, "A", dt),
                              b=_tensor_q(net, n, 4, 5, "B", net.info[n.inputs[3]].dtype
                                          if n.inputs[3] in net.info else dt),
                              y=_tensor_q(net, n, 6, 7, "C", dt)))
        elif n.op == "QGemm" and n.domain == MS_DOMAIN:
            if n.attrs.get("transA", 0):
                raise ModelError(f"{n.where()}: transA=1 is not supported on quantized Gemm")
            w = _qweight(net, n, 3, 4, 5, 1)
            if n.attrs.get("transB", 0):
                w = QConst(w.values.T.copy(), w.scale, w.zero_point, 1)
            if len(n.inputs) < 8 or not n.inputs[7]:
                raise ModelError(f"{n.where()}: QGemm without y_scale (float output) is not "
                                 f"supported")
            out.append(_qnode("QMatMul", n, [n.inputs[0]], n.outputs,
                              a=_tensor_q(net, n, 1, 2, "A", dt), w=w,
                              y=_tensor_q(net, n, 7, 8, "Y", dt), bias=_bias(net, n, 6),
                              alpha=float(n.attrs.get("alpha", 1.0))))
        elif n.op in ("QLinearAveragePool", "QLinearGlobalAveragePool") and n.domain == MS_DOMAIN:
            if n.attrs.get("channels_last", 0):
                raise ModelError(f"{n.where()}: channels_last=1 is not supported")
            op = "QAveragePool" if n.op == "QLinearAveragePool" else "QGlobalAveragePool"
            out.append(_qnode(op, n, [n.inputs[0]], n.outputs,
                              x=_tensor_q(net, n, 1, 2, "X", dt),
                              y=_tensor_q(net, n, 3, 4, "Y", dt)))
        elif n.op in ("QLinearSigmoid", "QLinearLeakyRelu") and n.domain == MS_DOMAIN:
            fn = n.op[len("QLinear"):]
            out.append(_qnode("QLut", n, [n.inputs[0]], n.outputs, fn=fn,
                              alpha=float(n.attrs.get("alpha", 0.01)),
                              x=_tensor_q(net, n, 1, 2, "X", dt),
                              y=_tensor_q(net, n, 3, 4, "Y", dt)))
        elif n.op == "QLinearSoftmax" and n.domain == MS_DOMAIN:
            # Its ``opset`` attribute picks Softmax's axis semantics (coerced to 2-D before
            # opset 13), which npukit takes from the model's opset.
            if (n.attrs.get("opset", net.opset) >= 13) != (net.opset >= 13):
                raise ModelError(f"{n.where()}: opset={n.attrs['opset']} in a model of opset "
                                 f"{net.opset}; npukit needs both before 13 or both from 13")
            out.append(_qnode("QSoftmax", n, [n.inputs[0]], n.outputs,
                              axis=int(n.attrs.get("axis", -1)),
                              x=_tensor_q(net, n, 1, 2, "X", dt),
                              y=_tensor_q(net, n, 3, 4, "Y", dt)))
        elif n.op == "QLinearConcat" and n.domain == MS_DOMAIN:
            y = _tensor_q(net, n, 0, 1, "Y", net.info[n.outputs[0]].dtype)
            ins, qs = [], []
            for k in range(2, len(n.inputs), 3):
                ins.append(n.inputs[k])
                qs.append(_tensor_q(net, n, k + 1, k + 2, f"input {len(ins) - 1}",
                                    net.info[n.inputs[k]].dtype))
            out += _concat_with_requant(net, n, ins, qs, y)
        else:
            out.append(n)
    net.nodes = out


# -- QDQ --------------------------------------------------------------------------------------

def _dq(net: Net, g: _Graph, t: str):
    """(integer tensor, (scale, zero point)) when ``t`` is a per-tensor DequantizeLinear of a
    computed tensor."""
    d = g.producer.get(t)
    if d is None or d.op != "DequantizeLinear" or d.inputs[0] in net.consts:
        return None
    x = d.inputs[0]
    if x not in net.info or net.info[x].dtype not in (np.int8, np.uint8):
        return None
    try:
        return x, _tensor_q(net, d, 1, 2, "x", net.info[x].dtype)
    except ModelError:
        return None


def _q(net: Net, g: _Graph, t: str):
    """(Q nodes, (scale, zero point), dtype) when every reader of ``t`` is a per-tensor
    QuantizeLinear with the same parameters (and ``t`` is no graph output)."""
    readers = g.consumers.get(t, [])
    if not readers or t in net.outputs or any(r.op != "QuantizeLinear" for r in readers):
        return None
    params = set()
    for r in readers:
        out = r.outputs[0]
        if out not in net.info or net.info[out].dtype not in (np.int8, np.uint8):
            return None
        try:
            params.add((*_tensor_q(net, r, 1, 2, "y", net.info[out].dtype), net.info[out].dtype))
        except ModelError:
            return None
    if len(params) != 1:
        return None
    s, z, dt = params.pop()
    return readers, (s, z), dt


def _clamp_of(net: Net, act: Node | None, y, dt) -> tuple[int, int]:
    """The integer output range: the type's, narrowed by a ReLU or a Clip between the
    operation and its QuantizeLinear (quantized with the output's parameters)."""
    info = np.iinfo(dt)
    lo, hi = int(info.min), int(info.max)
    if act is None:
        return lo, hi
    s, z = y
    fmin, fmax = _clip_bounds(net, act)
    if fmin is not None:
        lo = max(lo, int(_quant1(fmin, s, z, info)))
    if fmax is not None:
        hi = min(hi, int(_quant1(fmax, s, z, info)))
    return lo, hi


def _quant1(v: float, s, z: int, info) -> int:
    from ..tiler.basic_kernels.common import quantize
    return int(quantize(np.float32(v), s, z, int(info.min), int(info.max)))


def _clip_bounds(net: Net, act: Node) -> tuple[float | None, float | None]:
    if act.op == "Relu":
        return 0.0, None
    if "min" in act.attrs or "max" in act.attrs:  # Clip-6
        return _ordered(act.attrs.get("min"), act.attrs.get("max"))
    for k, what in ((1, "min"), (2, "max")):
        if k < len(act.inputs) and act.inputs[k] and act.inputs[k] not in net.consts:
            raise ModelError(f"{act.where()}: its {what} {act.inputs[k]!r} is computed or a "
                             f"graph input; npukit needs Clip's min and max as constants "
                             f"(initializers)")
    lo = net.consts[act.inputs[1]] if len(act.inputs) > 1 and act.inputs[1] else None
    hi = net.consts[act.inputs[2]] if len(act.inputs) > 2 and act.inputs[2] else None
    return _ordered(None if lo is None else float(lo), None if hi is None else float(hi))


def _ordered(lo: float | None, hi: float | None) -> tuple[float | None, float | None]:
    """Clip bounds as ONNX applies them, min(max(x, lo), hi): with lo > hi every value
    becomes hi, as the bounds [hi, hi] give."""
    return (hi if lo is not None and hi is not None and lo > hi else lo), hi


def _act_then_q(net: Net, g: _Graph, t: str):
    """The readers of an operation's output ``t``: straight QuantizeLinear nodes, or one
    ReLU/Clip whose readers are QuantizeLinear nodes. Returns (activation or None, q)."""
    q = _q(net, g, t)
    if q:
        return None, q
    a = g.only_consumer(t)
    if a is not None and a.op in ("Relu", "Clip"):
        q = _q(net, g, a.outputs[0])
        if q:
            return a, q
    return None


def _wq(net: Net, t: str, axis_ok: tuple[int, ...]) -> QConst | None:
    w = net.qconsts.get(t)
    if w is None or w.values.dtype not in (np.int8, np.uint8):
        return None
    if w.scale.size > 1 and w.axis not in axis_ok:
        return None
    return w


def _bias_q(net: Net, t: str | None) -> tuple[bool, np.ndarray | None]:
    """(usable, int32 bias) for an optional bias input of a QDQ convolution or Gemm."""
    if not t:
        return True, None
    b = net.qconsts.get(t)
    if b is None or b.values.dtype != np.int32:
        return False, None
    return True, b.values


def _concat_with_requant(net: Net, n: Node, ins: list[str], qs: list, y) -> list[Node]:
    """A Concat of integer tensors whose parameters may differ from the output's: each such
    input first goes through a requantisation table (as ONNX Runtime's QLinearConcat)."""
    nodes, fixed = [], []
    for k, (t, q) in enumerate(zip(ins, qs)):
        if (np.float32(q[0]), q[1]) == (np.float32(y[0]), y[1]):
            fixed.append(t)
            continue
        r = f"{t}__requant_{n.name}_{k}"
        net.info[r] = net.info[t]
        nodes.append(Node("QLut", f"{n.name}_requant{k}", [t], [r],
                          {"fn": "Identity", "x": q, "y": y}, "npukit"))
        fixed.append(r)
    nodes.append(Node("Concat", n.name, fixed, n.outputs, {"axis": n.attrs.get("axis", 0)}, ""))
    return nodes


def qdq(net: Net) -> None:
    """Fuse the DequantizeLinear -> op -> QuantizeLinear patterns ONNX Runtime fuses."""
    g = _Graph(net)
    replaced: dict[int, list[Node]] = {}
    absorbed: set[int] = set()

    def fused(node: Node, new: list[Node], extra: list[Node]) -> None:
        replaced[id(node)] = new
        absorbed.update(id(x) for x in extra)

    def alias_rest(qnodes, first: str) -> list[Node]:
        """Further identical QuantizeLinear readers: copies of the first output."""
        return [Node("Identity", f"{qn.name}_same", [first], [qn.outputs[0]], {}, "")
                for qn in qnodes[1:]]

    for n in net.nodes:
        if id(n) in absorbed or n.domain not in ("", "ai.onnx"):
            continue
        ins = [i for i in n.inputs if i]
        if n.op == "Conv":
            x = _dq(net, g, n.inputs[0])
            w = _wq(net, n.inputs[1], (0,))
            ok, bias = _bias_q(net, n.inputs[2] if len(n.inputs) > 2 else None)
            tail = _act_then_q(net, g, n.outputs[0])
            if x and w is not None and ok and tail:
                act, (qnodes, y, dt) = tail
                lo, hi = _clamp_of(net, act, y, dt)
                new = [_qnode("QConv", n, [x[0]], [qnodes[0].outputs[0]], x=x[1], w=w, y=y,
                              bias=bias, lo=lo, hi=hi)]
                fused(n, new + alias_rest(qnodes, qnodes[0].outputs[0]),
                      qnodes + ([act] if act else []))
        elif n.op in ("MatMul", "Gemm"):
            a = _dq(net, g, n.inputs[0])
            gemm = n.op == "Gemm"
            biased = gemm and len(n.inputs) > 2 and n.inputs[2]
            # ONNX Runtime computes alpha * (A B) + C: a bias added before the one scaling
            # of the sum would be multiplied by alpha too, so such a Gemm stays in float.
            if gemm and (n.attrs.get("transA", 0) or (biased and (
                    n.attrs.get("beta", 1.0) != 1.0 or n.attrs.get("alpha", 1.0) != 1.0))):
                continue
            w = _wq(net, n.inputs[1], (1,) if not n.attrs.get("transB", 0) else (0,))
            bdq = None if w is not None else _dq(net, g, n.inputs[1])
            ok, bias = _bias_q(net, n.inputs[2] if gemm and len(n.inputs) > 2 else None)
            tail = _act_then_q(net, g, n.outputs[0])
            if a and (w is not None or bdq) and ok and tail:
                act, (qnodes, y, dt) = tail
                lo, hi = _clamp_of(net, act, y, dt)
                if w is not None and n.attrs.get("transB", 0):
                    w = QConst(w.values.T.copy(), w.scale, w.zero_point, 1)
                extra = {"w": w} if w is not None else {"b": bdq[1]}
                inputs = [a[0]] if w is not None else [a[0], bdq[0]]
                new = [_qnode("QMatMul", n, inputs, [qnodes[0].outputs[0]], a=a[1], y=y,
                              bias=bias, lo=lo, hi=hi, alpha=float(n.attrs.get("alpha", 1.0)),
                              **extra)]
                fused(n, new + alias_rest(qnodes, qnodes[0].outputs[0]),
                      qnodes + ([act] if act else []))
        elif n.op in ("Add", "Mul") and len(ins) == 2:
            srcs = [_dq(net, g, t) or _qconst_operand(net, t) for t in n.inputs]
            tail = _act_then_q(net, g, n.outputs[0])
            if all(srcs) and tail:
                act, (qnodes, y, dt) = tail
                lo, hi = _clamp_of(net, act, y, dt)
                op = "QMul" if n.op == "Mul" else "QAdd"
                new = [_qnode(op, n, [s[0] for s in srcs], [qnodes[0].outputs[0]], a=srcs[0][1],
                              b=srcs[1][1], y=y, lo=lo, hi=hi)]
                fused(n, new + alias_rest(qnodes, qnodes[0].outputs[0]),
                      qnodes + ([act] if act else []))
        elif n.op in LUT_FUNCS or n.op in ("MaxPool", "AveragePool", "GlobalAveragePool",
                                           "Pad", "Softmax") or n.op in LAYOUT_OPS:
            x = _dq(net, g, n.inputs[0])
            q = _q(net, g, n.outputs[0]) if len(n.outputs) == 1 else None
            if not (x and q):
                continue
            qnodes, y, dt = q
            out = qnodes[0].outputs[0]
            same = (np.float32(x[1][0]), x[1][1]) == (np.float32(y[0]), y[1]) and \
                net.info[x[0]].dtype == dt
            new = _quantized_single(net, n, x, y, dt, out, same)
            if new is None:
                continue
            fused(n, new + alias_rest(qnodes, out), qnodes)
        elif n.op == "Gather":
            found = _quantized_gather(net, g, n)
            if found:
                nodes, qnodes = found
                fused(n, nodes + alias_rest(qnodes, nodes[0].outputs[0]), qnodes)
        elif n.op == "Concat":
            srcs = [_dq(net, g, t) for t in n.inputs]
            q = _q(net, g, n.outputs[0])
            if all(srcs) and q and len({net.info[s[0]].dtype for s in srcs} | {q[2]}) == 1:
                qnodes, y, dt = q
                new = _concat_with_requant(net, n, [s[0] for s in srcs], [s[1] for s in srcs], y)
                new[-1].outputs = [qnodes[0].outputs[0]]
                fused(n, new + alias_rest(qnodes, qnodes[0].outputs[0]), qnodes)
    out = []
    for n in net.nodes:
        if id(n) in absorbed:
            continue
        out += replaced.get(id(n), [n])
    net.nodes = _live(net, out)


def _qconst_operand(net: Net, t: str):
    """A constant operand of a quantized Add/Mul: its integers and per-tensor parameters."""
    q = net.qconsts.get(t)
    if q is None or q.scale.size != 1 or q.values.dtype not in (np.int8, np.uint8):
        return None
    return t, (np.float32(q.scale.reshape(-1)[0]), int(q.zero_point.reshape(-1)[0]))


def _quantized_gather(net: Net, g: _Graph, n: Node):
    """An embedding quantized as ONNX Runtime's quantizer writes it (a DequantizeLinear of
    the integer table, Gather, a QuantizeLinear with the same parameters): a Gather of the
    integers themselves (a copy: ONNX Runtime drops the pair too), its table a quarter of
    the float one. Returns (new nodes, the QuantizeLinear nodes absorbed) or None."""
    w, q = net.qconsts.get(n.inputs[0]), _q(net, g, n.outputs[0])
    if w is None or q is None or w.scale.size != 1 or w.values.dtype != q[2]:
        return None
    qnodes, y, _ = q
    if (np.float32(w.scale.reshape(-1)[0]), int(w.zero_point.reshape(-1)[0])) != \
            (np.float32(y[0]), y[1]):
        return None
    table = f"{n.inputs[0]}__int"
    net.consts[table] = w.values
    net.info[table] = TInfo(tuple(w.values.shape), w.values.dtype)
    return [Node("Gather", n.name, [table, *n.inputs[1:]], [qnodes[0].outputs[0]], n.attrs,
                 n.domain)], qnodes


def _quantized_single(net: Net, n: Node, x, y, dt, out: str, same: bool) -> list[Node] | None:
    """A one-input operation between a DequantizeLinear and a QuantizeLinear, on integers."""
    xt, xq = x
    if n.op in LUT_FUNCS:
        if n.op in ("Relu", "Clip") and same:
            lo, hi = _clamp_of(net, n, y, dt)
            return [_qnode("QClamp", n, [xt], [out], lo=lo, hi=hi)]
        if n.op == "Clip":
            _clip_bounds(net, n)
        return [_qnode("QLut", n, [xt], [out], fn=n.op, alpha=float(n.attrs.get("alpha", 0.01)),
                       bounds=_clip_bounds(net, n) if n.op == "Clip" else None, x=xq, y=y)]
    if n.op == "AveragePool":
        if any(d != 1 for d in n.attrs.get("dilations", [])):
            return None
        return [_qnode("QAveragePool", n, [xt], [out], x=xq, y=y)]
    if n.op == "GlobalAveragePool":
        return [_qnode("QGlobalAveragePool", n, [xt], [out], x=xq, y=y)]
    if n.op == "Softmax":
        if net.info[xt].dtype != dt:
            return None
        return [_qnode("QSoftmax", n, [xt], [out], x=xq, y=y)]
    # MaxPool, Pad and the layout operations move integers; a requantisation table follows
    # when the output parameters differ.
    if n.op == "Pad":
        mode = n.attrs.get("mode", "constant")
        value = float(net.consts[n.inputs[2]].reshape(-1)[0]) if len(n.inputs) > 2 and \
            n.inputs[2] else 0.0
        info = np.iinfo(net.info[xt].dtype)
        qv = _quant1(value, xq[0], xq[1], info)
        if mode == "constant" and (qv - xq[1]) * xq[0] != np.float32(value):
            return None  # the pad value is not exactly representable: float path
        extra = {"qvalue": qv}
    else:
        extra = {}
    mid = out if same else f"{out}__int_{n.name}"
    moved = Node(n.op, n.name, [xt] + n.inputs[1:], [mid], {**n.attrs, **extra}, n.domain)
    if same:
        return [moved]
    net.info[mid] = TInfo(net.info[out].shape, net.info[xt].dtype)
    return [moved, Node("QLut", f"{n.name}_requant", [mid], [out],
                        {"fn": "Identity", "x": xq, "y": y}, "npukit")]


def _live(net: Net, nodes: list[Node]) -> list[Node]:
    """Nodes whose outputs something reads (another node or the graph)."""
    needed = set(net.outputs)
    keep = []
    for n in reversed(nodes):
        if any(t in needed for t in n.outputs):
            keep.append(n)
            needed.update(t for t in n.inputs if t)
    return keep[::-1]


def normalize(net: Net, fuse_qdq: bool = True) -> dict[str, str]:
    """Every rewrite, in order; returns the aliases (output -> tensor it names). Without
    ``fuse_qdq`` QDQ patterns stay float operations between their Q and DQ layers."""
    finite_scales(net)
    alias = aliases(net)
    conv_transpose_as_conv(net)
    composites_as_layers(net)
    einsum_as_layers(net)
    fold_batchnorm(net)
    hard_swish_of_mul(net)
    reduce_mean_as_pool(net)
    explicit_quantized(net)
    if fuse_qdq:
        qdq(net)
    net.nodes = _live(net, net.nodes)
    return alias
