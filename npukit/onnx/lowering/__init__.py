"""Lowering a normalized ``Net`` to an AutoTiler graph: one user kernel per layer (a fused
group of ONNX operations), made by the generators of ``npukit.tiler.layer_generators``; tensors
declared with ``TCArgInfo`` (graph inputs and outputs as arguments, weights as constants,
the rest as locals), the layers connected with ``AddNode``. The model's planner and tiler
do the rest, as for a hand-written AutoTiler model.

Fusion: a convolution absorbs the activation (Relu, LeakyRelu, Clip, Sigmoid, Tanh) and the
pooling without padding that alone read its output; a MatMul or Gemm, and an Add, the
activation that follows. Layout operations (Reshape, Flatten, Squeeze, Unsqueeze) are names
for the same bytes.

``HANDLERS`` maps each operator of a normalized net to the function that lowers it, one module
per family; an operator is added as one function there and one entry here. A handler takes the
``Lowering`` context and the node, and adds its layers (and those of the nodes it fuses).
"""

from __future__ import annotations

from functools import partial

from ...errors import ModelError
from ...tiler.model import Model
from ..reader import Net
from . import (
    batch,
    conv,
    elementwise,
    indexing,
    linear,
    math,
    norm,
    pool,
    quantized,
    reductions,
    resize,
    shape,
    softmax,
)
from .context import VIEW_OPS, Lowering, c_name

HANDLERS = {
    **{op: shape.view for op in VIEW_OPS},
    "Cast": shape.cast,
    "CastLike": shape.cast,
    "Concat": shape.concat,
    "Transpose": shape.transpose,
    "DepthToSpace": shape.depth_space,
    "SpaceToDepth": shape.depth_space,
    "Pad": shape.pad,
    "Conv": batch.per_image(partial(conv.conv, quant=False)),
    "QConv": batch.per_image(partial(conv.conv, quant=True)),
    "MaxPool": batch.per_image(pool.max_pool),
    "AveragePool": batch.per_image(partial(pool.pool, quant_avg=False)),
    "QAveragePool": batch.per_image(partial(pool.pool, quant_avg=True)),
    "GlobalAveragePool": batch.per_image(partial(pool.global_pool, quant=False)),
    "QGlobalAveragePool": batch.per_image(partial(pool.global_pool, quant=True)),
    **{op: elementwise.act for op in ("Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh")},
    **{op: elementwise.float_binary for op in elementwise.BINARY},
    **{op: math.math_unary for op in math.OPS},
    "Pow": math.math_binary,
    "PRelu": math.math_binary,
    **{op: math.variadic for op in ("Max", "Min", "Mean")},
    "Expand": math.expand,
    "Slice": indexing.slice_,
    "Resize": resize.resize,
    "Upsample": resize.resize,
    "Split": indexing.split,
    "Gather": indexing.gather,
    **{op: reductions.reduce for op in reductions.OPS},
    "Sum": elementwise.sum_inputs,
    "QAdd": elementwise.qadd,
    "QMul": elementwise.qmul,
    "QClamp": quantized.qclamp,
    "QuantizeLinear": quantized.quantize,
    "DequantizeLinear": quantized.dequantize,
    "QLut": quantized.qlut,
    "Gemm": linear.gemm,
    "MatMul": linear.matmul,
    "QMatMul": linear.qmatmul,
    "Softmax": partial(softmax.softmax, quant=False),
    "LogSoftmax": partial(softmax.softmax, quant=False),
    "QSoftmax": partial(softmax.softmax, quant=True),
    "LRN": batch.per_image(norm.lrn),
    "LayerNormalization": norm.layer_norm,
    "InstanceNormalization": norm.instance_norm,
    "BatchNormalization": norm.batch_norm,
}


def lower(net: Net, alias: dict[str, str], model: Model, graph_name: str,
          host: bool = False) -> Lowering:
    """The layers and tensors of ``net`` on ``model``, declared as graph ``graph_name``;
    ``host``: for the host schedule (its convolutions work on tiles of features)."""
    ctx = Lowering(net, alias, model, graph_name, host)
    for n in net.nodes:
        if id(n) in ctx.done:
            continue
        handler = HANDLERS.get(n.op)
        if handler is None:
            raise ModelError(f"{n.where()}: operator {n.op!r} is not supported by npukit "
                             f"(see docs/onnx.md for the supported operators)")
        handler(ctx, n)
    for o in net.outputs:
        ctx.finish_output(o)
    ctx.declare()
    return ctx


__all__ = ["HANDLERS", "Lowering", "c_name", "lower"]
