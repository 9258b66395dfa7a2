"""The float32 math unaries and activations of ``basic_kernels.mathfn`` (Abs, Exp, Sqrt,
Sin, Erf, Elu, HardSwish, Gelu, ...): one elementwise layer each."""

from __future__ import annotations

import numpy as np

from ...errors import ModelError
from ...tiler.basic_kernels.common import f32_bits
from ...tiler.basic_kernels.mathfn import UNARY
from ..reader import Node
from .context import Lowering
from .elementwise import unary

OPS = tuple(op for op in UNARY if op != "GeluTanh")


def math_unary(ctx: Lowering, n: Node) -> None:
    dt = ctx.dtype(n.inputs[0])
    if dt != np.float32:
        raise ModelError(f"{n.where()}: {n.op} of {dt} data is not supported (float32 only; "
                         f"between a DequantizeLinear and a QuantizeLinear it runs in float32)")
    fn = n.op
    if n.op == "Gelu":
        approx = n.attrs.get("approximate", "none")
        if approx not in ("none", "tanh"):
            raise ModelError(f"{n.where()}: approximate={approx!r}; ONNX's Gelu takes "
                             f"'none' or 'tanh'")
        fn = "GeluTanh" if approx == "tanh" else "Gelu"
    params = [float(n.attrs.get(k, v)) for k, v in UNARY[fn][1]]
    if fn == "Celu" and params[0] == 0:
        raise ModelError(f"{n.where()}: alpha=0 divides by zero in Celu's exp(x / alpha)")
    p0, p1 = (f32_bits(v) for v in (params + [0.0, 0.0])[:2])
    what = ", ".join(f"{k}={v:g}" for (k, _), v in zip(UNARY[fn][1], params))
    unary(ctx, n, "float32", "float32", 0, p0, p1,
          f"{ctx.info(n.outputs[0]).size} values" + (f" ({what})" if what else ""), fn=fn)
