"""EasyKernel in Python (the Torq EasyKernel guide): a kernel is one sequential program over tensor
views; every data flow is derived from it.

>>> @kernel
... def mul(s, input1, input2, bias_scale, output, *, shift, out_min, out_max):
...     bdata = s.bram.load(bias_scale)
...     for i in s.iterate(input1.dim(0)):
...         d1 = s.iram.load(input1[i])
...         d2 = s.wram.load(input2[i])
...         p = s.alu.elementwise_product_accumulate(d1, d2)
...         q = s.act.rescale_clamp(p, bdata, shift, 0, out_min, out_max)
...         s.store(output[i], q)

``for i in s.iterate(n)`` runs its body once, at build time, and records one hardware loop,
exactly as the guide's uppercase ``For``. Tensor views are immutable: write
``x = x.vectorize(16)`` where the guide writes ``x.vectorize(16);``.
"""

from .build import Kernel, build, kernel
from .builder import SLICE_MEMORIES, SLICE_UNITS, Slice
from .units import ACTMode, ALUOp1Mode
from .values import BData, Data, IData, LData, MultiIndex, PData, QData, Spec, WData, spec

__all__ = ["ACTMode", "ALUOp1Mode", "BData", "Data", "IData", "Kernel", "LData", "MultiIndex",
           "PData", "QData", "SLICE_MEMORIES", "SLICE_UNITS", "Slice", "Spec", "WData", "build",
           "kernel", "spec"]
