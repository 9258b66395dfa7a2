"""Operators rewritten as operations npukit lowers, before the other rewrites of
``npukit.onnx.normalize`` (float32):

- ``LpNormalization`` (p 1 or 2, ``axis``): ``x / max(ReduceLp(x, axis), 1.4e-45)``; the
  smallest float32 keeps ONNX Runtime's 0 for a vector of zeros;
- ``LpPool`` (1-D and 2-D; ``kernel_shape``, ``strides``, ``pads``, ``auto_pad``,
  ``dilations``): ``|x|^p`` (``Abs``; p 2: ``x * x``; else ``Pow``), summed over each window by a
  depthwise convolution of ones (padding adds zeros), then ``^(1/p)`` (p 2: ``Sqrt``);
- ``GlobalLpPool``: the same sums by a ``ReduceSum`` over the spatial axes.

(``RMSNormalization`` and the other operators ONNX defines as functions are expanded when
the model is read: ``npukit.onnx.functions``.)

ONNX Runtime computes the same sums in float32 (results differ in the last bits: the sums run
in another order)."""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from .reader import Net, Node, TInfo

TINY = np.float32(1.4e-45)  # the smallest positive float32 (subnormal)


class _Rewrite:
    """New nodes, tensors and constants for one node ``n`` of ``net``."""

    def __init__(self, net: Net, n: Node):
        self.net, self.n, self.nodes = net, n, []

    def const(self, key: str, values) -> str:
        name = f"{self.n.name}__{key}"
        self.net.consts[name] = np.asarray(values)
        return name

    def op(self, op: str, ins: list[str], shape, out: str | None = None, **attrs) -> str:
        out = out or f"{self.n.outputs[0]}__{op.lower()}{len(self.nodes)}"
        if out not in self.net.info:
            self.net.info[out] = TInfo(tuple(shape), np.dtype(np.float32))
        self.nodes.append(Node(op, f"{self.n.name}_{op.lower()}{len(self.nodes)}", ins, [out],
                               attrs))
        return out


def _power(r: _Rewrite, x: str, p: int, shape) -> str:
    if p == 1:
        return r.op("Abs", [x], shape)
    if p == 2:
        return r.op("Mul", [x, x], shape)
    return r.op("Pow", [r.op("Abs", [x], shape), r.const("p", np.array([p], np.float32))], shape)


def _root(r: _Rewrite, s: str, p: int, shape) -> list[Node]:
    out = r.n.outputs[0]
    if p == 1:
        r.nodes[-1].outputs = [out]
    elif p == 2:
        r.op("Sqrt", [s], shape, out)
    else:
        r.op("Pow", [s, r.const("inv_p", np.array([1 / p], np.float32))], shape, out)
    return r.nodes


def _check(net: Net, n: Node) -> tuple[tuple[int, ...], int]:
    x = n.inputs[0]
    if x not in net.info or net.info[x].dtype != np.float32:
        raise ModelError(f"{n.where()}: {n.op} takes float32 data of a known shape")
    p = int(n.attrs.get("p", 2))
    if p < 1:
        raise ModelError(f"{n.where()}: p={p}; ONNX's {n.op} takes p >= 1")
    return net.info[x].shape, p


def lp_normalization(net: Net, n: Node) -> list[Node]:
    shape, p = _check(net, n)
    if p not in (1, 2):
        raise ModelError(f"{n.where()}: p={p}; ONNX's LpNormalization takes 1 or 2")
    axis = int(n.attrs.get("axis", -1))
    if not -len(shape) <= axis < len(shape):
        raise ModelError(f"{n.where()}: axis={axis} for a rank-{len(shape)} input")
    r = _Rewrite(net, n)
    kept = tuple(1 if a == axis % len(shape) else d for a, d in enumerate(shape))
    norm = r.op("ReduceL1" if p == 1 else "ReduceL2", [n.inputs[0]], kept, axes=[axis],
                keepdims=1)
    safe = r.op("Max", [norm, r.const("tiny", np.array([TINY], np.float32))], kept)
    r.op("Div", [n.inputs[0], safe], shape, n.outputs[0])
    return r.nodes


def lp_pool(net: Net, n: Node) -> list[Node]:
    shape, p = _check(net, n)
    if len(shape) not in (3, 4):
        raise ModelError(f"{n.where()}: a {len(shape) - 2}-D LpPool; npukit takes 1-D and 2-D")
    if n.attrs.get("ceil_mode", 0):
        raise ModelError(f"{n.where()}: ceil_mode=1 is not supported for LpPool")
    out = net.info[n.outputs[0]].shape
    r = _Rewrite(net, n)
    powered = _power(r, n.inputs[0], p, shape)
    ks = list(n.attrs["kernel_shape"])
    ones = r.const("ones", np.ones((shape[1], 1, *ks), np.float32))
    attrs = {k: v for k, v in n.attrs.items()
             if k in ("kernel_shape", "strides", "pads", "auto_pad", "dilations")}
    sums = r.op("Conv", [powered, ones], out, group=shape[1], **attrs)
    return _root(r, sums, p, out)


def global_lp_pool(net: Net, n: Node) -> list[Node]:
    shape, p = _check(net, n)
    out = net.info[n.outputs[0]].shape
    r = _Rewrite(net, n)
    sums = r.op("ReduceSum", [_power(r, n.inputs[0], p, shape)], out,
                axes=list(range(2, len(shape))), keepdims=1)
    return _root(r, sums, p, out)


REWRITES = {"LpNormalization": lp_normalization, "LpPool": lp_pool,
            "GlobalLpPool": global_lp_pool}


def composites_as_layers(net: Net) -> None:
    """Every operator of ``REWRITES`` in ``net`` as the operations above."""
    nodes = []
    for n in net.nodes:
        nodes += REWRITES[n.op](net, n) if n.op in REWRITES else [n]
    net.nodes = nodes
