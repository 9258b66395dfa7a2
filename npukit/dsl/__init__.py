"""The Compass DSL (Arm China's Python kernel language for the Zhouyi NPU) on npukit.

Kernels are written as in the Compass DSL tutorials and built into a ``Program`` like any
other front end's::

    import npukit.dsl as S
    prog = S.build(silu_fp16, target="compass", n=4096)   # then prog.run(...)

A kernel's pointers reach tensors in global memory; it moves data into each TEC's local SRAM
with ``S.dma_copy``, computes on vectors (``S.fp16x16``) with masks, selects and table
gathers, and splits its work over TECs by ``S.get_local_id()``. Plain Python around it (such
as a function computing a lookup table) runs at build time. ``docs/dsl.md`` lists every
name; ``npukit.dsl.trace`` says how a kernel becomes IR.
"""

from .builtins_arith import (
    abs,
    asm,
    ceil,
    clip,
    clz,
    cos,
    erf,
    exp,
    exp2,
    floor,
    fma,
    i,
    isfinite,
    isinf,
    isnan,
    log,
    max,
    min,
    printf,
    reinterpret,
    rint,
    rsqrt,
    sin,
    sqrt,
    tanh,
    u,
    vadd,
    vaddh,
    vand,
    vbrevs,
    vceq,
    vcge,
    vcgt,
    vcle,
    vcls,
    vclt,
    vcneq,
    vdiv,
    vfmae,
    vfmao,
    vinv,
    vmaxh,
    vminh,
    vmod,
    vmul,
    vmulh,
    vmull,
    vnsr,
    vnsrsr,
    vor,
    vpcnt,
    vror,
    vsl,
    vsr,
    vsub,
    vsubh,
    vxor,
    vxth,
    vxtl,
)
from .builtins_lanes import (
    const_mask,
    tail_mask,
    vbcast,
    vcompc,
    vcompt,
    vconcat,
    vreplic,
    vrevs,
    vrpadd,
    vrpmax,
    vrpmin,
    vshfl,
    vsldl,
    vsplit,
    vtbl,
    vzip,
)
from .kernel import PrimFunc, build, prim_func
from .ops import (
    alloc,
    alloc_const,
    cast,
    ceildiv,
    dma_copy,
    get_local_id,
    get_local_size,
    vabs,
    vload_gather,
    vmax,
    vmin,
    vnot,
    vrint,
    vsel,
)
from .types import DType, PtrType, ptr

# Scalar types, then the vector types (one 256-bit register, and two for 32-bit lanes).
i8, u8, i16, u16, i32, u32 = (DType(t) for t in ("i8", "u8", "i16", "u16", "i32", "u32"))
fp16, fp32, bool_ = DType("fp16"), DType("fp32"), DType("bool")
i8x32, u8x32, i16x16, u16x16 = (DType(t) for t in ("i8x32", "u8x32", "i16x16", "u16x16"))
i32x8, u32x8, i32x16, u32x16 = (DType(t) for t in ("i32x8", "u32x8", "i32x16", "u32x16"))
fp16x16, fp32x8, fp32x16 = DType("fp16x16"), DType("fp32x8"), DType("fp32x16")
boolx8, boolx16, boolx32 = DType("boolx8"), DType("boolx16"), DType("boolx32")

__all__ = [
    "abs", "alloc", "alloc_const", "asm", "bool_", "boolx16", "boolx32", "boolx8", "build",
    "cast", "ceil", "ceildiv", "clip", "clz", "const_mask", "cos", "dma_copy", "DType", "erf",
    "exp", "exp2", "floor", "fma", "fp16", "fp16x16", "fp32", "fp32x16", "fp32x8",
    "get_local_id", "get_local_size", "i", "i16", "i16x16", "i32", "i32x16", "i32x8", "i8",
    "i8x32", "isfinite", "isinf", "isnan", "log", "max", "min", "prim_func", "PrimFunc",
    "printf", "ptr", "PtrType", "reinterpret", "rint", "rsqrt", "sin", "sqrt", "tail_mask",
    "tanh", "u", "u16", "u16x16", "u32", "u32x16", "u32x8", "u8", "u8x32", "vabs", "vadd",
    "vaddh", "vand", "vbcast", "vbrevs", "vceq", "vcge", "vcgt", "vcle", "vcls", "vclt",
    "vcneq", "vcompc", "vcompt", "vconcat", "vdiv", "vfmae", "vfmao", "vinv", "vload_gather",
    "vmax", "vmaxh", "vmin", "vminh", "vmod", "vmul", "vmulh", "vmull", "vnot", "vnsr",
    "vnsrsr", "vor", "vpcnt", "vreplic", "vrevs", "vrint", "vror", "vrpadd", "vrpmax", "vrpmin",
    "vsel", "vshfl", "vsl", "vsldl", "vsplit", "vsr", "vsub", "vsubh", "vtbl", "vxor", "vxth",
    "vxtl", "vzip",
]
