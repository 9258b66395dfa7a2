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

from ...errors import ModelError, TilingError
from ...tiler.model import Model
from ..reader import Net
from . import (
    batch,
    conv,
    elementwise,
    gridsample,
    indexing,
    insert_zeros,
    linear,
    math,
    norm,
    pool,
    quantized,
    reductions,
    resize,
    select,
    shape,
    softmax,
    typed,
)
from .context import VIEW_OPS, Lowering, c_name

# Operators that move float16, bfloat16 and float64 tensors (no other computes on them).
CAST_ONLY_OPS = ("Cast", "CastLike", *VIEW_OPS)

HANDLERS = {
    **{op: shape.view for op in VIEW_OPS},
    "Cast": typed.cast,
    "CastLike": typed.cast,
    "Concat": shape.concat,
    "Transpose": shape.transpose,
    "DepthToSpace": shape.depth_space,
    "SpaceToDepth": shape.depth_space,
    "Pad": shape.pad,
    "Conv": batch.per_image(partial(conv.conv, quant=False)),
    "InsertZeros": insert_zeros.insert_zeros,
    "QConv": batch.per_image(partial(conv.conv, quant=True)),
    "MaxPool": batch.per_image(pool.max_pool),
    "AveragePool": batch.per_image(partial(pool.pool, quant_avg=False)),
    "QAveragePool": batch.per_image(partial(pool.pool, quant_avg=True)),
    "GlobalAveragePool": batch.per_image(partial(pool.global_pool, quant=False)),
    "QGlobalAveragePool": batch.per_image(partial(pool.global_pool, quant=True)),
    **{op: elementwise.act for op in ("LeakyRelu", "Sigmoid", "Tanh")},
    "Relu": typed.on_integers(elementwise.act, typed.clip),
    "Clip": typed.clip,
    **{op: typed.on_integers(elementwise.float_binary, typed.int_arith)
       for op in elementwise.BINARY},
    **{op: math.math_unary for op in math.OPS},
    **{op: typed.on_integers(math.math_unary, typed.int_arith) for op in ("Abs", "Neg", "Sign")},
    **{op: typed.typed_op for op in typed.OPS},
    "Pow": math.math_binary,
    "PRelu": math.math_binary,
    **{op: typed.on_integers(math.variadic, typed.int_variadic) for op in ("Max", "Min", "Mean")},
    "Expand": typed.on_integers(math.expand, typed.expand),
    "Slice": indexing.slice_,
    "Resize": resize.resize,
    "GridSample": gridsample.grid_sample,
    "Upsample": resize.resize,
    "Split": indexing.split,
    "Tile": select.tile,
    "Trilu": select.trilu,
    "Gather": indexing.gather,
    "GatherElements": indexing.gather_elements,
    "GatherND": indexing.gather_nd,
    **{op: reductions.reduce for op in reductions.OPS},
    "ArgMax": reductions.arg,
    "ArgMin": reductions.arg,
    "TopK": reductions.top_k,
    "Sum": typed.on_integers(elementwise.sum_inputs, typed.int_variadic),
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
    "Hardmax": partial(softmax.softmax, quant=False),
    "CumSum": softmax.cumsum,
    "QSoftmax": partial(softmax.softmax, quant=True),
    "LRN": batch.per_image(norm.lrn),
    "LayerNormalization": norm.layer_norm,
    "InstanceNormalization": norm.instance_norm,
    "GroupNormalization": norm.group_norm,
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
        if handler is not None and n.op not in CAST_ONLY_OPS:
            typed.compute_types(ctx, n)
        if handler is None:
            raise ModelError(f"{n.where()}: operator {n.op!r} is not supported by npukit "
                             f"(see docs/onnx.md for the supported operators)")
        try:
            handler(ctx, n)
        except TilingError as exc:  # a layer generator's refusal, which names its layer
            raise type(exc)(f"{n.where()}, layer {exc}") from None
    for o in net.outputs:
        ctx.finish_output(o)
    ctx.declare()
    return ctx


__all__ = ["HANDLERS", "Lowering", "c_name", "lower"]
