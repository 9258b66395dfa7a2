"""The Compass DSL (Arm China's Python kernel language for the Zhouyi NPU) on npukit.

Kernels are written as in the Compass DSL tutorials and built into a ``Program`` like any
other front end's::

    import npukit.dsl as S
    prog = S.build(silu_fp16, target="compass", n=4096)   # then prog.run(...)

or, as the public Compass DSL's own kernels and tests are written (``docs/dsl.md``)::

    from npukit.dsl import BuildManager, script as S, hw_native_vdtype
    ex = BuildManager().build(func_add); ex(a, b, out, n)   # generated C
    func_add(a, b, out, n)                                   # the simulator

A kernel's pointers reach tensors in global memory; it moves data into each TEC's local SRAM
with ``S.dma_copy``, computes on vectors (``S.fp16x16``) with masks, selects and table
gathers, and splits its work over TECs by ``S.get_local_id()``. Plain Python around it (such
as a function computing a lookup table) runs at build time. ``docs/dsl.md`` lists every
name; ``npukit.dsl.trace`` says how a kernel becomes IR.
"""

from . import operators as _operators  # noqa: F401 - registers the vectors' operators
from . import pointers as _pointers  # noqa: F401 - registers as_ptr's pointer casts
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
    pow,
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
from .builtins_dot import vdot, vdpa, vmma, vmml, vqdot, vqdpa
from .builtins_lanes import (
    const_mask,
    tail_mask,
    vall,
    vany,
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
from .conversion import cast
from .executable import BuildManager, Executable, aiff, async_aiff, get_rpc_session
from .hints import macro, meta_var, perf_tick_begin, perf_tick_end, tag
from .kernel import PrimFunc, build, prim_func, tec_range, vectorized
from .memory import (
    alloc_buffer,
    alloc_events,
    async_dma_copy,
    barrier,
    dma_copy,
    dma_memset,
    free_events,
    hw_native_vdtype,
    match_buffer,
    vload,
    vstore,
    wait_events,
)
from .ops import (
    alloc,
    alloc_const,
    ceildiv,
    dma_transpose2d,
    get_local_id,
    get_local_size,
    vabs,
    vload_gather,
    vmax,
    vmin,
    vnot,
    vrint,
    vsel,
    vstore_scatter,
)
from .printing import printf
from .testing import get_range
from .types import DType, PtrType, is_type_name, ptr

DataType = DType  # the public DSL's name for a type

# Scalar types, then the vector types (one 256-bit register, and two for 32-bit lanes).
i8, u8, i16, u16, i32, u32 = (DType(t) for t in ("i8", "u8", "i16", "u16", "i32", "u32"))
fp16, fp32, bool_ = DType("fp16"), DType("fp32"), DType("bool")
i8x32, u8x32, i16x16, u16x16 = (DType(t) for t in ("i8x32", "u8x32", "i16x16", "u16x16"))
i32x8, u32x8, i32x16, u32x16 = (DType(t) for t in ("i32x8", "u32x8", "i32x16", "u32x16"))
fp16x16, fp32x8, fp32x16 = DType("fp16x16"), DType("fp32x8"), DType("fp32x16")
boolx8, boolx16, boolx32 = DType("boolx8"), DType("boolx16"), DType("boolx32")



def __getattr__(name: str) -> DType:
    """Any type by its name: ``S.int32``, ``S.uint32x8``, ``S.float16x16``, ``S.i8x16``."""
    if is_type_name(name):
        return DType(name)
    raise AttributeError(f"the Compass DSL on npukit has no name {name!r}")


__all__ = [
    "abs", "aiff", "alloc", "alloc_buffer", "alloc_const", "alloc_events", "asm", "async_aiff",
    "async_dma_copy", "barrier", "bool_", "boolx16", "boolx32", "boolx8", "build",
    "BuildManager", "cast", "ceil", "ceildiv", "clip", "clz", "const_mask", "cos", "DataType",
    "dma_copy", "dma_memset", "dma_transpose2d", "DType", "erf", "Executable", "exp", "exp2",
    "floor", "fma", "fp16", "fp16x16", "fp32", "fp32x16", "fp32x8", "free_events",
    "get_local_id", "get_local_size", "get_range", "get_rpc_session", "hw_native_vdtype", "i",
    "i16", "i16x16", "i32", "i32x16", "i32x8", "i8", "i8x32", "isfinite", "isinf", "isnan",
    "log", "macro", "match_buffer", "max", "meta_var", "min", "perf_tick_begin",
    "perf_tick_end", "pow", "prim_func", "PrimFunc", "printf", "ptr", "PtrType", "reinterpret",
    "rint", "rsqrt", "script", "sin", "sqrt", "tag", "tail_mask", "tanh", "tec_range", "u",
    "u16", "u16x16", "u32", "u32x16", "u32x8", "u8", "u8x32", "vabs", "vadd", "vaddh", "vall",
    "vand", "vany", "vbcast", "vbrevs", "vceq", "vcge", "vcgt", "vcle", "vcls", "vclt",
    "vcneq", "vcompc", "vcompt", "vconcat", "vdiv", "vdot", "vdpa", "vectorized", "vfmae",
    "vfmao", "vinv", "vload", "vload_gather", "vmax", "vmaxh", "vmin", "vminh", "vmma", "vmml",
    "vmod", "vmul", "vmulh", "vmull", "vnot", "vnsr", "vnsrsr", "vor", "vpcnt", "vqdot",
    "vqdpa", "vreplic", "vrevs", "vrint", "vror", "vrpadd", "vrpmax", "vrpmin", "vsel",
    "vshfl", "vsl", "vsldl", "vsplit", "vsr", "vstore", "vstore_scatter", "vsub", "vsubh",
    "vtbl", "vxor", "vxth", "vxtl", "vzip", "wait_events",
]
