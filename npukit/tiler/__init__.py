"""The GAP AutoTiler in Python: basic kernels, user kernels tiled automatically under an L1
budget, multi-buffered DMA across L3/L2/L1, kernel groups. A GAP AutoTiler model ports
line by line: the model-level calls are methods of ``Model``; the argument builders and
constants are names of this module.

>>> from npukit.tiler import *
>>> m = Model(target="gap8", l1_budget=51200)
>>> m.UserKernel("MatAdd", KernelDimensions(1, 200, 300, 1),
...     KernelIterationOrder(KER_DIM2, KER_TILE), TILE_HOR,
...     CArgs(3, TCArg("int *", "In1"), TCArg("int *", "In2"), TCArg("int *", "Out")),
...     Calls(0), KerArgs(3, KerArg("In1", OBJ_IN_DB, 200, 300, 4, 0, 0, 0, "In1", 0),
...                          KerArg("In2", OBJ_IN_DB, 200, 300, 4, 0, 0, 0, "In2", 0),
...                          KerArg("Out", OBJ_OUT_DB, 200, 300, 4, 0, 0, 0, "Out", 0)))
>>> t = m.tiling("MatAdd"); (t.n_tiles, t.tile, t.args["In2"].offset)
(30, 10, 16000)
"""

from .api import *
from .api import OBJ, Constraint, KerArgSel, KerArgSpace, KerIter, Loc, Obj
from .api_spaces import (
    ALWAYS_INLINE,
    KER_OPT_BUFFER_PROMOTE,
    KER_OPT_NONE,
    KER_OPT_PARTIAL_BUFFER_PROMOTE,
    NEVER_INLINE,
    SINGLE_INLINE,
    IterFixedSpace,
    IterParSpace,
    IterTiledSpace,
    KerArgAliased,
    KernelIterSpace,
)
from .cnn import *
from .cnn import KernelOper
from .graph import Graph
from .graph_api import *
from .graph_api import ConstInfo, GNodeArg, TCArgInfo
from .model import Model
from .solver import ArgPlacement, Tiling

__all__ = ["Model", "Tiling", "ArgPlacement", "Graph", "TCArgInfo", "ConstInfo", "GNodeArg",
           "KernelOper"] + [n for n in dir() if n.isupper() or n in (
    "CArgs", "TCArg", "Calls", "Call", "Bindings", "K_Arg", "C_Arg", "C_ArgIndex", "Imm",
    "Ker_IteratorIndex", "KerArgs", "KerArg", "KernelDimensions", "KernelIterationOrder",
    "UserKernelCall", "AppendNames",
    # the older generation's variants and symbols
    "KerArg2D", "KerArg2DP", "KerArgP", "KerArgPad", "KernelDimensionsAndUserSymbols",
    "KerDynamicSymbols", "S_Dyn", "UserSymb", "KerDim", "K_ArgPar",
    # the newer generation
    "KernelIterSpace", "IterTiledSpace", "IterFixedSpace", "IterParSpace", "KerArgSpace",
    "KerArgAliased")]
__all__ += [n for n in list(OBJ) + [f.name for f in Obj] + [f.name for f in Constraint]
            + [f.name for f in KerArgSel] + [f.name for f in Loc] + [f.name for f in KerIter]]
__all__ = sorted(set(__all__))
