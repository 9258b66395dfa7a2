"""Layer generators beyond the GAP AutoTiler's CNN library, in its style: each call creates
one user kernel of a ``Model`` with the tiler's vocabulary (``UserKernel``, ``KerArg``,
``Call``), its calls going to the basic kernels of ``basic_kernels``. The model's tiler
picks the tiles, the graph planner places the tensors, both back ends run them.

Generators are functions of the model (``conv_pool_act(m, "Conv0", ...)``), so they add no
method to ``Model``. Shapes follow the tensors' row-major layout:

- ``conv_pool_act``: in ``npukit.tiler.layer_generators_conv``.
- ``pool``: max or average pooling with ONNX's padding, dilations and ``count_include_pad``.
- ``global_pool``: the average of each plane, accumulated tile by tile.
- ``unary``, ``lut``: elementwise functions and 256-entry tables.
- ``binary``: elementwise operations with broadcasting, on [planes, rows, columns] views, in
  tiles of rows or, when a row does not fit, of one row's columns; ``typed`` the same (in
  tiles of rows) for casts, integers, comparisons, logic and ``Where``.
- ``matmul``, ``matmul_k_tiled``: in ``npukit.tiler.layer_generators_matmul``.
- ``softmax``, ``reduce``, ``lrn``: along rows or, in vertical tiles, along columns;
  ``layer_norm`` along rows.
- ``pad_axis``, ``concat``, ``transpose``: data movement (a transpose in tiles of its
  swapped axes or, when a row of those does not fit, of its items' values, or in 2-D
  blocks of items when neither fits); the layers that
  read at run-time indices are in ``npukit.tiler.layer_generators_indexed``.

Padding of windowed layers. These layers' arguments have no padding of their own, so the
tiler cuts argument ``a`` into tiles starting at line ``k_a * T * i``: a tile cannot start
before the plane. A windowed layer therefore reads its input either whole
(``in_tiled=False``: the plane in one L1 buffer, every padding in the basic kernel) or in
row tiles of an input whose rows are already padded (``pad_axis`` before it); columns are
always padded in the kernel. The GAP AutoTiler's generators give the input its padding
instead (``KerArgP``, ``KerArg2DP``) and pass each tile's to their basic kernels
(``KER_ARG_TILE_PAD``); npukit's tiler implements both, these generators do not use them
yet.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..dtypes import is_float
from ..errors import TilingError
from .api import (
    D0,
    D1,
    KER_ARG_PARTILE_SIZE,
    KER_ARG_TILE,
    KER_ARG_TILE_H,
    KER_ARG_TILE_W,
    KER_ARG_TILEINDEX,
    KER_ARG_TILEOFFSET,
    KER_DIM2,
    KER_DIM4,
    KER_IN_PLANE,
    KER_OUT_PLANE,
    KER_TILE,
    LOC_INNER_LOOP,
    LOC_INNER_LOOP_EPILOG,
    LOC_LOOP,
    OBJ_CONSTRAINTS_TILE_HOR,
    OBJ_CONSTRAINTS_TILE_VER,
    T0,
    TILE_HOR,
    Bindings,
    Call,
    Calls,
    CArgs,
    Imm,
    K_Arg,
    K_ArgPar,
    KerArg,
    KerArgs,
    KerArgSpace,
    KernelDimensions,
    KernelIterationOrder,
    Obj,
    TCArg,
)
from .api_spaces import IterFixedSpace, IterParSpace, IterTiledSpace, KernelIterSpace
from .basic_kernels import (
    common,
    elementwise,
    integer,
    mathfn,
    movement,
    normalisation,
    pooling,
    reduction,
)
from .basic_kernels import softmax as softmax_kernels

IN_DB = Obj.O_IN | Obj.O_DB
OUT_DB = Obj.O_OUT | Obj.O_DB


def _ptr(dt, const: bool = False) -> str:
    return f"{'const ' if const else ''}{common.layer_c_type(dt)} *__restrict__"


def _lib(m, k) -> str:
    """Register basic kernel ``k`` with the model (once) and return its name."""
    return m._lib(k)


def _width(m, dt) -> int:
    return m._simd(np.dtype(dt).name)


def _plane_order(planes: int):
    """Iteration over ``planes`` planes (the out-plane iterator, one in-plane) or none."""
    if planes > 1:
        return KernelIterationOrder(KER_DIM4, KER_OUT_PLANE, KER_TILE, KER_IN_PLANE)
    return KernelIterationOrder(KER_DIM2, KER_TILE)


def _per_plane(planes: int, varies: bool) -> int:
    """The flags of an input that varies with the plane: 4D with one in-plane, so its plane
    index is the out-plane's (3D inputs follow the in-plane iterator)."""
    return Obj.O_3D | Obj.O_4D if planes > 1 and varies else 0


def _out_plane(planes: int) -> int:
    return Obj.O_3D if planes > 1 else 0


def _check(name: str, what: str, ok: bool) -> None:
    if not ok:
        raise TilingError(f"{name}: {what}")


# -- pooling ----------------------------------------------------------------------------------

def pool(m, Name: str, *, dt, C: int, Width: int, Height: int, in_tiled: bool, Hreal: int,
         PadT: int, PadL: int, PadB: int, PadR: int, Fx: int, Fy: int, Sx: int, Sy: int,
         Dx: int = 1, Dy: int = 1, Wo: int, Ho: int, Oper: int, CountPad: int = 0,
         InScale: int = 0, InZp: int = 0, OutScale: int = 0, OutZp: int = 0) -> None:
    """``Name(In, Out)``: max or average pooling of each of the C planes (In [C, Height,
    Width], Out [C, Ho, Wo]); padding as in ``conv_pool_act``. Integer averages follow ONNX
    Runtime's QLinearAveragePool (scales as bits). Spaces (features D1, tiles T0): one call
    per tile of features, as the GAP SDK's pooling generators."""
    fe = Dy * (Fy - 1) + 1
    ov_in = Height - Sy * Ho
    if in_tiled:
        _check(Name, f"the input plane has {Height} rows, the {Ho} output rows need "
               f"{Sy * Ho + fe - Sy}: pad its rows first", ov_in >= max(fe - Sy, 0))
    k = _lib(m, pooling.pool(np.dtype(dt).name))
    item = np.dtype(dt).itemsize
    m.UserKernel(Name,
        KernelIterSpace(2, IterParSpace(D1, C, 1), IterTiledSpace(T0)),
        TILE_HOR,
        CArgs(TCArg(_ptr(dt, True), "In"), TCArg(_ptr(dt), "Out")),
        Calls(Call(k, LOC_LOOP, Bindings(
            K_Arg("In", KER_ARG_TILE), Imm(Width),
            K_Arg("In", KER_ARG_TILEOFFSET) if in_tiled else Imm(PadT),
            K_Arg("In", KER_ARG_TILE_H), Imm(Hreal), Imm(PadT), K_Arg("Out", KER_ARG_TILE),
            Imm(Wo), K_Arg("Out", KER_ARG_TILEOFFSET), K_Arg("Out", KER_ARG_TILE_H), Imm(Fx),
            Imm(Fy), Imm(Sx), Imm(Sy), Imm(Dx), Imm(Dy), Imm(PadL), Imm(PadB), Imm(PadR),
            Imm(Oper), Imm(CountPad), Imm(InScale), Imm(InZp), Imm(OutScale), Imm(OutZp),
            K_ArgPar("Out", KER_ARG_PARTILE_SIZE, D1)))),
        KerArgs(
            KerArg("In", KerArgSpace(2, D1, T0) if in_tiled else KerArgSpace(1, D1), IN_DB,
                   Width, Height, item, ov_in if in_tiled else 0, 0, 0, "In"),
            KerArg("Out", KerArgSpace(2, D1, T0), OUT_DB, Wo, Ho, item, 0, 0, 0, "Out")))
    m._cnn_ops[Name] = C * Wo * Ho * Fx * Fy


def global_pool(m, Name: str, *, dt, C: int, Width: int, Height: int, InZp: int = 0,
                Scale: int = 0, OutZp: int = 0) -> None:
    """``Name(In, Out)``: the average of each of the C planes of In [C, Height, Width] into
    Out [C]; the plane is summed tile by tile (``global_sum``), then divided or requantised
    (``global_out``)."""
    acc = "float32" if is_float(dt) else "int32"
    dt = np.dtype(dt).name
    s, o = _lib(m, pooling.global_sum(dt)), _lib(m, pooling.global_out(dt))
    item = np.dtype(dt).itemsize
    m.UserKernel(Name,
        KernelDimensions(1, Width, Height, C),
        KernelIterationOrder(KER_DIM4, KER_OUT_PLANE, KER_TILE, KER_IN_PLANE),
        TILE_HOR,
        CArgs(TCArg(_ptr(dt, True), "In"), TCArg(_ptr(dt), "Out")),
        Calls(
            Call(s, LOC_INNER_LOOP, Bindings(
                K_Arg("In", KER_ARG_TILE), K_Arg("In", KER_ARG_TILE_W),
                K_Arg("In", KER_ARG_TILE_H), K_Arg("Sum", KER_ARG_TILE),
                K_Arg("In", KER_ARG_TILEINDEX))),
            Call(o, LOC_INNER_LOOP_EPILOG, Bindings(
                K_Arg("Sum", KER_ARG_TILE), Imm(Width * Height), K_Arg("Out", KER_ARG_TILE),
                Imm(InZp), Imm(Scale), Imm(OutZp)))),
        KerArgs(
            KerArg("In", IN_DB | Obj.O_3D | Obj.O_4D | Obj.O_TILED, Width, Height, item, 0, 0, 0,
                   "In"),
            KerArg("Out", Obj.O_OUT | Obj.O_3D, 1, 1, item, 0, 0, 0, "Out"),
            KerArg("Sum", Obj.O_BUFF, 1, 1, np.dtype(acc).itemsize, 0, 0, 0, None)))
    m._cnn_ops[Name] = C * Width * Height


# -- elementwise ------------------------------------------------------------------------------

def unary(m, Name: str, *, in_dt, out_dt, Rows: int, Cols: int, Op: int, P0: int = 0,
          P1: int = 0, fn: str | None = None) -> None:
    """``Name(In, Out)``: ``Out = f(In)`` elementwise on a [Rows, Cols] view, tiles of rows:
    ``basic_kernels.elementwise.unary``'s operation ``Op``, or the float32 function ``fn`` of
    ``basic_kernels.mathfn.UNARY``."""
    width = _width(m, in_dt)
    k = _lib(m, mathfn.math_unary(fn, width) if fn is not None else
             elementwise.unary(np.dtype(in_dt).name, np.dtype(out_dt).name, width))
    m.UserKernel(Name,
        KernelDimensions(1, Cols, Rows, 1), KernelIterationOrder(KER_DIM2, KER_TILE), TILE_HOR,
        CArgs(TCArg(_ptr(in_dt, True), "In"), TCArg(_ptr(out_dt), "Out")),
        Calls(Call(k, LOC_INNER_LOOP, Bindings(
            K_Arg("In", KER_ARG_TILE), Imm(Cols), K_Arg("In", KER_ARG_TILE_H),
            K_Arg("Out", KER_ARG_TILE), Imm(Op), Imm(P0), Imm(P1)))),
        KerArgs(
            KerArg("In", IN_DB | Obj.O_TILED, Cols, Rows, np.dtype(in_dt).itemsize, 0, 0, 0, "In"),
            KerArg("Out", OUT_DB | Obj.O_TILED, Cols, Rows, np.dtype(out_dt).itemsize, 0, 0, 0,
                   "Out")))
    m._cnn_ops[Name] = Rows * Cols


def lut(m, Name: str, *, in_dt, out_dt, Rows: int, Cols: int) -> None:
    """``Name(In, Table, Out)``: ``Out = Table[In + offset]`` on a [Rows, Cols] view; the
    table has 256 entries (offset 128 for int8 inputs)."""
    k = _lib(m, elementwise.lut(np.dtype(in_dt).name, np.dtype(out_dt).name))
    offset = 128 if np.dtype(in_dt) == np.int8 else 0
    m.UserKernel(Name,
        KernelDimensions(1, Cols, Rows, 1), KernelIterationOrder(KER_DIM2, KER_TILE), TILE_HOR,
        CArgs(TCArg(_ptr(in_dt, True), "In"), TCArg(_ptr(out_dt, True), "Table"),
              TCArg(_ptr(out_dt), "Out")),
        Calls(Call(k, LOC_INNER_LOOP, Bindings(
            K_Arg("In", KER_ARG_TILE), Imm(Cols), K_Arg("In", KER_ARG_TILE_H),
            K_Arg("Table", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE), Imm(offset)))),
        KerArgs(
            KerArg("In", IN_DB | Obj.O_TILED, Cols, Rows, 1, 0, 0, 0, "In"),
            KerArg("Table", Obj.O_IN, 256, 1, 1, 0, 0, 0, "Table"),
            KerArg("Out", OUT_DB | Obj.O_TILED, Cols, Rows, 1, 0, 0, 0, "Out")))
    m._cnn_ops[Name] = Rows * Cols


def _bcast_arg(name: str, dt, planes: int, rows: int, cols: int, full: tuple[bool, bool, bool]):
    """The KerArg of a broadcast operand of a [planes, rows, cols] operation (``full`` says
    along which of the three it varies) and its (row, column) strides in the tile."""
    fp, fr, fc = full
    flags = Obj.O_IN | Obj.O_DB | _per_plane(planes, fp) | (Obj.O_TILED if fr else 0)
    w, h = (cols if fc else 1), (rows if fr else 1)
    strides = ((cols if fc else 1) if fr else 0, 1 if fc else 0)
    return KerArg(name, flags, w, h, np.dtype(dt).itemsize, 0, 0, 0, name), strides


def binary(m, Name: str, *, a_dt, b_dt, out_dt, Planes: int, Rows: int, Cols: int,
           a_full: tuple[bool, bool, bool], b_full: tuple[bool, bool, bool], Op: int,
           Act: int = common.ACT_NONE, P: tuple[int, int, int] = (0, 0, 0), Za: int = 0,
           Zb: int = 0, Zout: int = 0, Lo: int = 0, Hi: int = 0, fn: str | None = None) -> None:
    """``Name(A, B, Out)``: ``Out[p][r][c] = op(A, B)`` on [Planes, Rows, Cols]; ``a_full`` and
    ``b_full`` say along which dimensions each operand varies (else it is broadcast). Tiles
    of rows; per-plane operands follow the out-plane iterator. When a row of each operand
    does not fit L1 (Swin's shift mask added to [.., 49 x 49] scores at a GAP8-sized
    budget), tiles of columns of one row at a time (``_binary_cols``). ``op``: ``Op`` of
    ``basic_kernels.elementwise.binary``, or the float32 function ``fn`` of
    ``basic_kernels.mathfn.BINARY``."""
    args = (m, Name, a_dt, b_dt, out_dt, Planes, Rows, Cols, a_full, b_full,
            (Op, Act, *P, Za, Zb, Zout, Lo, Hi), fn)
    m._first_that_tiles(Name, _binary_rows, _binary_cols, args)
    m._cnn_ops[Name] = Planes * Rows * Cols


def _binary_kernel(m, a_dt, b_dt, out_dt, fn) -> str:
    width = _width(m, out_dt)
    return _lib(m, mathfn.math_binary(fn, width) if fn is not None else
                elementwise.binary(np.dtype(a_dt).name, np.dtype(b_dt).name,
                                   np.dtype(out_dt).name, width))


def _binary_rows(m, Name, a_dt, b_dt, out_dt, Planes, Rows, Cols, a_full, b_full, params,
                 fn) -> None:
    """``binary`` in tiles of rows."""
    k = _binary_kernel(m, a_dt, b_dt, out_dt, fn)
    ka, (ar, ac) = _bcast_arg("A", a_dt, Planes, Rows, Cols, a_full)
    kb, (br, bc) = _bcast_arg("B", b_dt, Planes, Rows, Cols, b_full)
    m.UserKernel(Name,
        KernelDimensions(1, Cols, Rows, Planes), _plane_order(Planes), TILE_HOR,
        _binary_cargs(a_dt, b_dt, out_dt),
        Calls(Call(k, LOC_INNER_LOOP, Bindings(
            K_Arg("A", KER_ARG_TILE), K_Arg("B", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE),
            K_Arg("Out", KER_ARG_TILE_H), Imm(Cols), Imm(ar), Imm(ac), Imm(br), Imm(bc),
            *map(Imm, params)))),
        KerArgs(ka, kb,
                KerArg("Out", OUT_DB | Obj.O_TILED | _out_plane(Planes), Cols, Rows,
                       np.dtype(out_dt).itemsize, 0, 0, 0, "Out")))


def _binary_cargs(a_dt, b_dt, out_dt):
    return CArgs(TCArg(_ptr(a_dt, True), "A"), TCArg(_ptr(b_dt, True), "B"),
                 TCArg(_ptr(out_dt), "Out"))


def _binary_cols(m, Name, a_dt, b_dt, out_dt, Planes, Rows, Cols, a_full, b_full, params,
                 fn) -> None:
    """``binary`` one row at a time in tiles of its columns: fixed spaces over the planes
    (D1) and the rows (D0), the tiled space T0 cutting the row. Each operand walks only the
    spaces it varies along (a broadcast one is the same data on every step of the others),
    so one element of each operand per L1 slot is enough."""
    k = _binary_kernel(m, a_dt, b_dt, out_dt, fn)
    ver = OBJ_CONSTRAINTS_TILE_VER
    walks = ((D1, Planes > 1), (D0, True), (T0, True))

    def arg(name, dt, full, flags):
        fp, fr, fc = full
        sp = [s for (s, on), f in zip(walks, (fp, fr, fc)) if on and f]
        return KerArg(name, KerArgSpace(len(sp), *sp), flags, Cols if fc else 1, 1,
                      np.dtype(dt).itemsize, 0, ver if fc else 0, 0, name)
    spaces = ((IterFixedSpace(D1, Planes),) * (Planes > 1)
              + (IterFixedSpace(D0, Rows), IterTiledSpace(T0)))
    m.UserKernel(Name, KernelIterSpace(len(spaces), *spaces), TILE_HOR,
        _binary_cargs(a_dt, b_dt, out_dt),
        Calls(Call(k, LOC_LOOP, Bindings(
            K_Arg("A", KER_ARG_TILE), K_Arg("B", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE),
            Imm(1), K_Arg("Out", KER_ARG_TILE_W), Imm(0), Imm(int(a_full[2])), Imm(0),
            Imm(int(b_full[2])), *map(Imm, params)))),
        KerArgs(arg("A", a_dt, a_full, IN_DB), arg("B", b_dt, b_full, IN_DB),
                arg("Out", out_dt, (True, True, True), OUT_DB)))


def typed(m, Name: str, *, op: str, in_dts: tuple, out_dt, Planes: int, Rows: int, Cols: int,
          fulls: tuple[tuple[bool, bool, bool], ...]) -> None:
    """``Name(In0, .., Out)``: ``Out[p][r][c] = op(In0, ..)`` on [Planes, Rows, Cols] for any
    element types: ``basic_kernels.integer.OPS[op]`` (casts, integer arithmetic, comparisons,
    logic, ``Where``); ``fulls`` say along which dimensions each operand varies, as
    ``binary``'s ``a_full``."""
    names = tuple(np.dtype(d).name for d in in_dts)
    k = _lib(m, integer.elementwise(op, names, np.dtype(out_dt).name, _width(m, out_dt)))
    kargs, strides = zip(*(_bcast_arg(f"In{i}", dt, Planes, Rows, Cols, f)
                           for i, (dt, f) in enumerate(zip(in_dts, fulls))))
    m.UserKernel(Name,
        KernelDimensions(1, Cols, Rows, Planes), _plane_order(Planes), TILE_HOR,
        CArgs(*(TCArg(_ptr(dt, True), f"In{i}") for i, dt in enumerate(in_dts)),
              TCArg(_ptr(out_dt), "Out")),
        Calls(Call(k, LOC_INNER_LOOP, Bindings(
            *(K_Arg(f"In{i}", KER_ARG_TILE) for i in range(len(in_dts))),
            K_Arg("Out", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE_H), Imm(Cols),
            *(Imm(v) for rc in strides for v in rc)))),
        KerArgs(*kargs,
                KerArg("Out", OUT_DB | Obj.O_TILED | _out_plane(Planes), Cols, Rows,
                       np.dtype(out_dt).itemsize, 0, 0, 0, "Out")))
    m._cnn_ops[Name] = Planes * Rows * Cols


# -- matrix products --------------------------------------------------------------------------

def softmax(m, Name: str, *, Outer: int, D: int, Inner: int, dt="float32",
            Ys: int = 0, Zp: int = 0, log: bool = False, kernel=None) -> None:
    """``Name(In, Out)`` (integers: ``Name(In, Table, Out)``): softmax along the middle axis of
    [Outer, D, Inner]: along rows (tiles of rows) when Inner is 1, else along the columns of
    vertical tiles of each [D, Inner] plane. float32, or ONNX Runtime's QLinearSoftmax on
    int8/uint8 with its 256-entry exp table (``basic_kernels.softmax.qsoftmax``); ``log``:
    float32 LogSoftmax; ``kernel``: another float32 basic kernel of the same arguments along
    the axis (``basic_kernels.along_axis``: Hardmax, CumSum)."""
    quant = not is_float(dt)
    k = _lib(m, softmax_kernels.qsoftmax(np.dtype(dt).name) if quant
             else kernel if kernel is not None
             else softmax_kernels.layer_log_softmax("float32") if log
             else softmax_kernels.layer_softmax("float32"))
    item = np.dtype(dt).itemsize
    if Inner == 1:
        order, dims = KernelIterationOrder(KER_DIM2, KER_TILE), KernelDimensions(1, D, Outer, 1)
        flags, w, h, con = Obj.O_TILED, D, Outer, OBJ_CONSTRAINTS_TILE_HOR
        binds = [K_Arg("In", KER_ARG_TILE_H), Imm(D), Imm(D), Imm(1)]
    else:
        order, dims = _plane_order(Outer), KernelDimensions(1, Inner, D, Outer)
        flags, w, h, con = Obj.O_TILED, Inner, D, OBJ_CONSTRAINTS_TILE_VER
        binds = [K_Arg("In", KER_ARG_TILE_W), Imm(1), Imm(D), K_Arg("In", KER_ARG_TILE_W)]
    planes = Outer if Inner > 1 else 1
    table = [TCArg(_ptr("float32", True), "Table")] if quant else []
    table_arg = [KerArg("Table", Obj.O_IN, 256, 1, 4, 0, 0, 0, "Table")] if quant else []
    tail = [K_Arg("Table", KER_ARG_TILE), Imm(Ys), Imm(Zp)] if quant else []
    m.UserKernel(Name, dims, order, TILE_HOR,
        CArgs(TCArg(_ptr(dt, True), "In"), *table, TCArg(_ptr(dt), "Out")),
        Calls(Call(k, LOC_INNER_LOOP, Bindings(
            K_Arg("In", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE), *binds, *tail))),
        KerArgs(
            KerArg("In", IN_DB | flags | _per_plane(planes, True), w, h, item, 0, con, 0, "In"),
            *table_arg,
            KerArg("Out", OUT_DB | flags | _out_plane(planes), w, h, item, 0, con, 0, "Out")))
    m._cnn_ops[Name] = Outer * D * Inner


def reduce(m, Name: str, *, op: str, Outer: int, D: int, Inner: int, dt="float32",
           last: bool = False) -> None:
    """``Name(In, Out)``: the float32 reduction ``op`` (``basic_kernels.reduction.REDUCE``),
    or ``ArgMax``/``ArgMin`` of ``dt`` values into int64 indices (``last``: the last on
    ties), of [Outer, D, Inner] along its middle axis into [Outer, Inner]: tiles of rows when
    Inner is 1, else vertical tiles of each [D, Inner] plane (every tile holds all D values
    of its columns)."""
    arg = op in ("ArgMax", "ArgMin")
    out_dt = "int64" if arg else "float32"
    k = _lib(m, reduction.arg_reduce(op, np.dtype(dt).name, last) if arg else
             reduction.reduce(op, _width(m, "float32")))
    if Inner == 1:
        order, dims = KernelIterationOrder(KER_DIM2, KER_TILE), KernelDimensions(1, D, Outer, 1)
        con, (wi, hi), (wo, ho), planes = OBJ_CONSTRAINTS_TILE_HOR, (D, Outer), (1, Outer), 1
        binds = [K_Arg("In", KER_ARG_TILE_H), Imm(D), Imm(D), Imm(1)]
    else:
        order, dims = _plane_order(Outer), KernelDimensions(1, Inner, D, Outer)
        con, (wi, hi), (wo, ho), planes = OBJ_CONSTRAINTS_TILE_VER, (Inner, D), (Inner, 1), Outer
        binds = [K_Arg("In", KER_ARG_TILE_W), Imm(1), Imm(D), K_Arg("In", KER_ARG_TILE_W)]
    m.UserKernel(Name, dims, order, TILE_HOR,
        CArgs(TCArg(_ptr(dt, True), "In"), TCArg(_ptr(out_dt), "Out")),
        Calls(Call(k, LOC_INNER_LOOP, Bindings(
            K_Arg("In", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE), *binds))),
        KerArgs(
            KerArg("In", IN_DB | Obj.O_TILED | _per_plane(planes, True), wi, hi,
                   np.dtype(dt).itemsize, 0, con, 0, "In"),
            KerArg("Out", OUT_DB | Obj.O_TILED | _out_plane(planes), wo, ho, 8 if arg else 4, 0,
                   con, 0, "Out")))
    m._cnn_ops[Name] = Outer * D * Inner


def lrn(m, Name: str, *, Planes: int, C: int, Cols: int, Lo: int, Hi: int, AlphaOverSize: int,
        Beta: int, Bias: int) -> None:
    """``Name(In, Out)``: ONNX LRN across the C rows of each [C, Cols] plane (vertical
    tiles, so every tile holds all the channels of its columns)."""
    k = _lib(m, normalisation.lrn())
    ver = OBJ_CONSTRAINTS_TILE_VER
    m.UserKernel(Name, KernelDimensions(1, Cols, C, Planes), _plane_order(Planes), TILE_HOR,
        CArgs(TCArg(_ptr("float32", True), "In"), TCArg(_ptr("float32"), "Out")),
        Calls(Call(k, LOC_INNER_LOOP, Bindings(
            K_Arg("In", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE), Imm(C),
            K_Arg("In", KER_ARG_TILE_W), Imm(Lo), Imm(Hi), Imm(AlphaOverSize), Imm(Beta),
            Imm(Bias)))),
        KerArgs(
            KerArg("In", IN_DB | Obj.O_TILED | _per_plane(Planes, True), Cols, C, 4, 0, ver, 0,
                   "In"),
            KerArg("Out", OUT_DB | Obj.O_TILED | _out_plane(Planes), Cols, C, 4, 0, ver, 0,
                   "Out")))
    m._cnn_ops[Name] = Planes * C * Cols * (Lo + Hi + 1)


def layer_norm(m, Name: str, *, N: int, D: int, Eps: int) -> None:
    """``Name(In, Scale, Bias, Out, Mean, InvStd)``: ONNX's LayerNormalization of the N rows
    of D values of In (``basic_kernels.normalisation.layer_norm``); Scale and Bias [D] whole,
    the rows in tiles, each row's mean and inverse standard deviation to Mean and InvStd."""
    k = _lib(m, normalisation.layer_norm())
    row = OUT_DB | Obj.O_TILED
    m.UserKernel(Name, KernelDimensions(1, D, N, 1), KernelIterationOrder(KER_DIM2, KER_TILE),
        TILE_HOR,
        CArgs(TCArg(_ptr("float32", True), "In"), TCArg(_ptr("float32", True), "Scale"),
              TCArg(_ptr("float32", True), "Bias"), TCArg(_ptr("float32"), "Out"),
              TCArg(_ptr("float32"), "Mean"), TCArg(_ptr("float32"), "InvStd")),
        Calls(Call(k, LOC_INNER_LOOP, Bindings(
            K_Arg("In", KER_ARG_TILE), K_Arg("Scale", KER_ARG_TILE), K_Arg("Bias", KER_ARG_TILE),
            K_Arg("Out", KER_ARG_TILE), K_Arg("Mean", KER_ARG_TILE), K_Arg("InvStd", KER_ARG_TILE),
            K_Arg("In", KER_ARG_TILE_H), Imm(D), Imm(Eps)))),
        KerArgs(
            KerArg("In", IN_DB | Obj.O_TILED, D, N, 4, 0, 0, 0, "In"),
            KerArg("Scale", Obj.O_IN, D, 1, 4, 0, 0, 0, "Scale"),
            KerArg("Bias", Obj.O_IN, D, 1, 4, 0, 0, 0, "Bias"),
            KerArg("Out", row, D, N, 4, 0, 0, 0, "Out"),
            KerArg("Mean", row, 1, N, 4, 0, 0, 0, "Mean"),
            KerArg("InvStd", row, 1, N, 4, 0, 0, 0, "InvStd")))
    m._cnn_ops[Name] = 4 * N * D


# -- data movement ----------------------------------------------------------------------------

def pad_axis(m, Name: str, *, dt, Outer: int, D: int, Inner: int, PadBegin: int, PadEnd: int,
             Mode: int = movement.PAD_CONSTANT, Value: int = 0) -> None:
    """``Name(In, Out)``: [Outer, D, Inner] -> [Outer, D + PadBegin + PadEnd, Inner] (negative
    pads crop): tiles of rows along Outer when Inner is 1, else vertical tiles of each
    [D, Inner] plane (every tile holds the whole padded axis)."""
    d2 = D + PadBegin + PadEnd
    _check(Name, f"padding leaves {d2} values along the axis", d2 >= 1)
    k = _lib(m, movement.pad_axis(np.dtype(dt).name))
    item = np.dtype(dt).itemsize
    if Inner == 1:
        order, dims = KernelIterationOrder(KER_DIM2, KER_TILE), KernelDimensions(1, D, Outer, 1)
        con, (wi, hi), (wo, ho) = OBJ_CONSTRAINTS_TILE_HOR, (D, Outer), (d2, Outer)
        binds = [K_Arg("In", KER_ARG_TILE_H), Imm(D), Imm(d2), Imm(1), Imm(D), Imm(d2)]
        planes = 1
    else:
        order, dims = _plane_order(Outer), KernelDimensions(1, Inner, D, Outer)
        con, (wi, hi), (wo, ho) = OBJ_CONSTRAINTS_TILE_VER, (Inner, D), (Inner, d2)
        binds = [K_Arg("In", KER_ARG_TILE_W), Imm(D), Imm(d2), K_Arg("In", KER_ARG_TILE_W),
                 Imm(1), Imm(1)]
        planes = Outer
    m.UserKernel(Name, dims, order, TILE_HOR,
        CArgs(TCArg(_ptr(dt, True), "In"), TCArg(_ptr(dt), "Out")),
        Calls(Call(k, LOC_INNER_LOOP, Bindings(
            K_Arg("In", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE), *binds, Imm(PadBegin),
            Imm(Mode), Imm(Value)))),
        KerArgs(
            KerArg("In", IN_DB | Obj.O_TILED | _per_plane(planes, True), wi, hi, item, 0, con, 0,
                   "In"),
            KerArg("Out", OUT_DB | Obj.O_TILED | _out_plane(planes), wo, ho, item, 0, con, 0,
                   "Out")))
    m._cnn_ops[Name] = Outer * d2 * Inner


def concat(m, Name: str, *, dt, Outer: int, Ds: tuple[int, ...], Inner: int) -> None:
    """``Name(In0, In1, ..., Out)``: [Outer, D_k, Inner] inputs concatenated along the middle
    axis: tiles of rows along Outer when Inner is 1, else vertical tiles of each plane; one
    block copy per input."""
    k = _lib(m, movement.copy2d(np.dtype(dt).name))
    item = np.dtype(dt).itemsize
    total = sum(Ds)
    names = [f"In{i}" for i in range(len(Ds))]
    calls, kerargs, off = [], [], 0
    if Inner == 1:
        order, dims = KernelIterationOrder(KER_DIM2, KER_TILE), KernelDimensions(1, total, Outer, 1)
        for n, d in zip(names, Ds):
            kerargs.append(KerArg(n, IN_DB | Obj.O_TILED, d, Outer, item, 0,
                                  OBJ_CONSTRAINTS_TILE_HOR, 0, n))
            calls.append(Call(k, LOC_INNER_LOOP, Bindings(
                K_Arg(n, KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE_H), Imm(d), Imm(d),
                K_Arg("Out", KER_ARG_TILE), Imm(total), Imm(0), Imm(off))))
            off += d
        kerargs.append(KerArg("Out", OUT_DB | Obj.O_TILED, total, Outer, item, 0,
                              OBJ_CONSTRAINTS_TILE_HOR, 0, "Out"))
    else:
        order, dims = _plane_order(Outer), KernelDimensions(1, Inner, total, Outer)
        ver = OBJ_CONSTRAINTS_TILE_VER
        for n, d in zip(names, Ds):
            kerargs.append(KerArg(n, IN_DB | Obj.O_TILED | _per_plane(Outer, True), Inner, d,
                                  item, 0, ver, 0, n))
            calls.append(Call(k, LOC_INNER_LOOP, Bindings(
                K_Arg(n, KER_ARG_TILE), Imm(d), K_Arg(n, KER_ARG_TILE_W),
                K_Arg(n, KER_ARG_TILE_W), K_Arg("Out", KER_ARG_TILE),
                K_Arg("Out", KER_ARG_TILE_W), Imm(off), Imm(0))))
            off += d
        kerargs.append(KerArg("Out", OUT_DB | Obj.O_TILED | _out_plane(Outer), Inner, total, item,
                              0, ver, 0, "Out"))
    m.UserKernel(Name, dims, order, TILE_HOR,
        CArgs(*(TCArg(_ptr(dt, True), n) for n in names), TCArg(_ptr(dt), "Out")),
        Calls(*calls), KerArgs(*kerargs))
    m._cnn_ops[Name] = Outer * total * Inner


def split(m, Name: str, *, dt, Outer: int, Ds: tuple[int, ...], Inner: int) -> None:
    """``Name(In, Out0, Out1, ...)``: an [Outer, sum(Ds), Inner] input cut along the middle
    axis into [Outer, D_k, Inner] outputs (``concat``'s converse, tiled as it is): one block
    copy per output, the input read once."""
    k = _lib(m, movement.crop2d(np.dtype(dt).name))
    item = np.dtype(dt).itemsize
    total = sum(Ds)
    names = [f"Out{i}" for i in range(len(Ds))]
    calls, kerargs, off = [], [], 0
    if Inner == 1:
        order, dims = KernelIterationOrder(KER_DIM2, KER_TILE), KernelDimensions(1, total, Outer, 1)
        kerargs.append(KerArg("In", IN_DB | Obj.O_TILED, total, Outer, item, 0,
                              OBJ_CONSTRAINTS_TILE_HOR, 0, "In"))
        for n, d in zip(names, Ds):
            kerargs.append(KerArg(n, OUT_DB | Obj.O_TILED, d, Outer, item, 0,
                                  OBJ_CONSTRAINTS_TILE_HOR, 0, n))
            calls.append(Call(k, LOC_INNER_LOOP, Bindings(
                K_Arg("In", KER_ARG_TILE), K_Arg("In", KER_ARG_TILE_H), Imm(d), Imm(total),
                K_Arg(n, KER_ARG_TILE), Imm(d), Imm(0), Imm(off))))
            off += d
    else:
        order, dims = _plane_order(Outer), KernelDimensions(1, Inner, total, Outer)
        ver = OBJ_CONSTRAINTS_TILE_VER
        kerargs.append(KerArg("In", IN_DB | Obj.O_TILED | _per_plane(Outer, True), Inner,
                              total, item, 0, ver, 0, "In"))
        for n, d in zip(names, Ds):
            kerargs.append(KerArg(n, OUT_DB | Obj.O_TILED | _out_plane(Outer), Inner, d, item,
                                  0, ver, 0, n))
            calls.append(Call(k, LOC_INNER_LOOP, Bindings(
                K_Arg("In", KER_ARG_TILE), Imm(d), K_Arg("In", KER_ARG_TILE_W),
                K_Arg("In", KER_ARG_TILE_W), K_Arg(n, KER_ARG_TILE), K_Arg(n, KER_ARG_TILE_W),
                Imm(off), Imm(0))))
            off += d
    m.UserKernel(Name, dims, order, TILE_HOR,
        CArgs(TCArg(_ptr(dt, True), "In"), *(TCArg(_ptr(dt), n) for n in names)),
        Calls(*calls), KerArgs(*kerargs))
    m._cnn_ops[Name] = Outer * total * Inner


def transpose(m, Name: str, *, dt, Planes: int, A: int, B: int, I: int) -> None:  # noqa: E741
    """``Name(In, Out)``: [Planes, A, B, I] -> [Planes, B, A, I]. The longer of A and B is
    tiled: horizontal tiles of its rows on one side, vertical tiles of its columns on the
    other. When one row or column of those does not fit L1 (I large, as the channel
    shuffle's [g, C/g, H*W] planes), the I values of every item are cut in vertical tiles
    instead, each tile transposing all A x B items. When neither fits (maxvit's [49, 64,
    64] windows), blocks of x x y items: an outer space over the blocks of A (or B) and the
    tiled space over the other, each block a 2-D transfer in and out, double buffered. One
    item, I values, in 4 slots (in and out, double buffered) must fit L1."""
    forms = (_transpose_rows, _transpose_items,
             *(partial(_transpose_blocks, over_a=o, x=x) for o, x in _block_sides(
                 m, dt, A, B, I)))
    m._first_that_tiles(Name, *forms, (m, Name, dt, Planes, A, B, I))
    try:
        m.tiling(Name)
    except TilingError as e:
        raise TilingError(f"{Name}: transposing [{Planes}, {A}, {B}, {I}] into [{Planes}, {B}, "
                          f"{A}, {I}] needs at least one item of I = {I} values "
                          f"({I * np.dtype(dt).itemsize} B) in 4 slots of L1, over the budget "
                          f"of {m.l1_budget} B: {e}") from None


def _transpose_rows(m, Name: str, dt, Planes: int, A: int, B: int, I: int) -> None:  # noqa: E741
    """``transpose`` in tiles of A or B."""
    k = _lib(m, movement.transpose(np.dtype(dt).name))
    item = np.dtype(dt).itemsize
    hor, ver = OBJ_CONSTRAINTS_TILE_HOR, OBJ_CONSTRAINTS_TILE_VER
    if B >= A:
        kin = KerArg("In", IN_DB | Obj.O_TILED | _per_plane(Planes, True), B * I, A, item, 0,
                     ver, 0, "In")
        kout = KerArg("Out", OUT_DB | Obj.O_TILED | _out_plane(Planes), A * I, B, item, 0, hor,
                      0, "Out")
        ab = [Imm(A), K_Arg("Out", KER_ARG_TILE_H)]
    else:
        kin = KerArg("In", IN_DB | Obj.O_TILED | _per_plane(Planes, True), B * I, A, item, 0,
                     hor, 0, "In")
        kout = KerArg("Out", OUT_DB | Obj.O_TILED | _out_plane(Planes), A * I, B, item, 0, ver,
                      0, "Out")
        ab = [K_Arg("In", KER_ARG_TILE_H), Imm(B)]
    m.UserKernel(Name, KernelDimensions(1, A * I, B, Planes), _plane_order(Planes), TILE_HOR,
        CArgs(TCArg(_ptr(dt, True), "In"), TCArg(_ptr(dt), "Out")),
        Calls(Call(k, LOC_INNER_LOOP, Bindings(
            K_Arg("In", KER_ARG_TILE), *ab, Imm(I), K_Arg("Out", KER_ARG_TILE)))),
        KerArgs(kin, kout))
    m._cnn_ops[Name] = Planes * A * B * I


def _transpose_items(m, Name: str, dt, Planes: int, A: int, B: int, I: int) -> None:  # noqa: E741
    """``transpose`` in tiles of I: In and Out as A*B rows of I values, vertical tiles of
    their columns (a tile holds a few values of every item)."""
    k = _lib(m, movement.transpose(np.dtype(dt).name))
    item, ver = np.dtype(dt).itemsize, OBJ_CONSTRAINTS_TILE_VER
    m.UserKernel(Name, KernelDimensions(1, I, A * B, Planes), _plane_order(Planes), TILE_HOR,
        CArgs(TCArg(_ptr(dt, True), "In"), TCArg(_ptr(dt), "Out")),
        Calls(Call(k, LOC_INNER_LOOP, Bindings(
            K_Arg("In", KER_ARG_TILE), Imm(A), Imm(B), K_Arg("In", KER_ARG_TILE_W),
            K_Arg("Out", KER_ARG_TILE)))),
        KerArgs(KerArg("In", IN_DB | Obj.O_TILED | _per_plane(Planes, True), I, A * B, item, 0,
                       ver, 0, "In"),
                KerArg("Out", OUT_DB | Obj.O_TILED | _out_plane(Planes), I, A * B, item, 0, ver,
                       0, "Out")))
    m._cnn_ops[Name] = Planes * A * B * I


def _block_sides(m, dt, A: int, B: int, I: int) -> list[tuple[bool, int]]:  # noqa: E741
    """The block forms of ``transpose`` to try, best first: (blocks over A?, block size x),
    x a divisor of the blocked side (the outer space walks whole blocks) near the square
    root of the items one L1 slot holds, so that the tiled side gets as many; then smaller
    divisors down to one item."""
    cap = max(m.l1_budget // (4 * I * np.dtype(dt).itemsize), 1)
    side = max(int(cap ** 0.5), 1)
    out = []
    for over_a, n in ((True, A), (False, B)):
        fit = sorted((d for d in range(1, min(n, side) + 1) if n % d == 0), reverse=True)
        out += [(over_a, d) for d in fit[:2]]
    # Best first: the largest block, then the other side's; one item per block always last.
    return sorted(set(out), key=lambda o: -o[1]) + [(True, 1)] * ((True, 1) not in out)


def _transpose_blocks(m, Name: str, dt, Planes: int, A: int, B: int, I: int, *,  # noqa: E741
                      over_a: bool, x: int) -> None:
    """``transpose`` in blocks of items: an outer space D0 over the blocks of x lines of A
    (``over_a``) or of B, the tiled space T0 over the other side. The side whose blocked
    dimension is inner in memory walks them inside its tiled lines (``KerArgSpace(T0,
    D0)``): In's tile is x rows of y items, Out's y rows of x items, both 2-D transfers."""
    k = _lib(m, movement.transpose(np.dtype(dt).name))
    item = I * np.dtype(dt).itemsize
    hor, ver = OBJ_CONSTRAINTS_TILE_HOR, OBJ_CONSTRAINTS_TILE_VER
    plane = (D1,) if Planes > 1 else ()
    outer = KerArgSpace(*plane, D0, T0)
    inner = KerArgSpace(*plane, T0, D0)
    if over_a:  # In [P, A/x, x, B, I], Out [P, B, A/x, x, I]; T0 cuts B
        kin = KerArg("In", outer, IN_DB, B, x, item, 0, ver, 0, "In")
        kout = KerArg("Out", inner, OUT_DB, x, B, item, 0, hor, 0, "Out")
        ab, blocks = [Imm(x), K_Arg("Out", KER_ARG_TILE_H)], A // x
    else:  # In [P, A, B/x, x, I], Out [P, B/x, x, A, I]; T0 cuts A
        kin = KerArg("In", inner, IN_DB, x, A, item, 0, hor, 0, "In")
        kout = KerArg("Out", outer, OUT_DB, A, x, item, 0, ver, 0, "Out")
        ab, blocks = [K_Arg("In", KER_ARG_TILE_H), Imm(x)], B // x
    spaces = (IterFixedSpace(D1, Planes),) * (Planes > 1) + (IterFixedSpace(D0, blocks),
                                                             IterTiledSpace(T0))
    m.UserKernel(Name, KernelIterSpace(len(spaces), *spaces), TILE_HOR,
        CArgs(TCArg(_ptr(dt, True), "In"), TCArg(_ptr(dt), "Out")),
        Calls(Call(k, LOC_LOOP, Bindings(
            K_Arg("In", KER_ARG_TILE), *ab, Imm(I), K_Arg("Out", KER_ARG_TILE)))),
        KerArgs(kin, kout))
    m._cnn_ops[Name] = Planes * A * B * I


__all__ = ["pool", "global_pool", "unary", "lut", "binary", "softmax",
           "reduce", "lrn", "layer_norm", "pad_axis", "concat", "split", "transpose"]
