"""Layer generators of matrix products (``npukit.tiler.layer_generators`` holds the others,
and the helpers these share):

- ``matmul``: rows of ``A`` times column tiles of ``B`` (vertical tiles), with Gemm's ``C``;
- ``matmul_k_tiled``, which ``matmul`` takes when a row of K does not fit L1: K in tiles, an
  L1 accumulator per output column across them;
- ``batched_matmul``: a stack of products (attention's Q x K^T and scores x V) as one
  layer, its batch a space of the kernel's iteration.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from ..dtypes import is_float
from ..errors import TilingError
from .api import (
    D0,
    D1,
    D2,
    D3,
    KER_ARG_TILE,
    KER_ARG_TILE_W,
    LOC_INNER_LOOP,
    LOC_LOOP,
    LOC_LOOP_EPILOG,
    LOC_LOOP_PROLOG,
    OBJ_CONSTRAINTS_TILE_VER,
    T0,
    TILE_HOR,
    TILE_VER,
    Bindings,
    Call,
    Calls,
    CArgs,
    Imm,
    K_Arg,
    KerArg,
    KerArgs,
    KerArgSpace,
    KernelDimensions,
    Obj,
    TCArg,
)
from .api_spaces import IterFixedSpace, IterTiledSpace, KernelIterSpace
from .basic_kernels import common, linear
from .layer_generators import (
    IN_DB,
    OUT_DB,
    _lib,
    _out_plane,
    _per_plane,
    _plane_order,
    _ptr,
    _width,
)


def matmul(m, Name: str, *, a_dt, b_dt, out_dt, M: int, K_: int, N: int, c: str | None = None,
           Alpha: int = 0, Beta: int = 0, Act: int = common.ACT_NONE, ActParams=(0, 0), Za: int = 0,
           Zb: int = 0, scale_per_column: bool = False, Zout: int = 0, Lo: int = 0,
           Hi: int = 0, k_tiles: bool = False) -> bool:
    """``Name(A, B[, C][, Scale], Out)``: Out [M, N] = A [M, K] x B [K, N], Gemm's ``C``
    (float32) or the int32 bias (integers) being ``c``: ``"column"`` [N], ``"element"`` [M, N],
    ``"row"`` [M] or ``"scalar"`` [1]. Each output row is an out-plane; B, C, Scale and Out are
    cut in vertical tiles of columns. Integers: Scale [N] or [1] float32.

    A row of A and a column of B are whole in L1. When they do not fit and ``k_tiles`` is
    set, the layer is made in the K-tiled form instead (``matmul_k_tiled``), which reads B
    transposed ([N, K]). Returns whether it did."""
    kw = dict(a_dt=a_dt, b_dt=b_dt, out_dt=out_dt, M=M, K_=K_, N=N, c=c, Alpha=Alpha,
              Beta=Beta, Act=Act, ActParams=ActParams, Za=Za, Zb=Zb,
              scale_per_column=scale_per_column, Zout=Zout, Lo=Lo, Hi=Hi)
    rows, k_tiled = partial(_matmul_rows, m, Name, **kw), partial(matmul_k_tiled, m, Name, **kw)
    if not k_tiles:
        rows()
        return False
    return m._first_that_tiles(Name, rows, k_tiled, ()) is k_tiled


def _matmul_rows(m, Name: str, *, a_dt, b_dt, out_dt, M: int, K_: int, N: int, c, Alpha, Beta,
                 Act, ActParams, Za, Zb, scale_per_column, Zout, Lo, Hi) -> None:
    """``matmul``'s form with whole rows of K."""
    flt = is_float(out_dt)
    k = _lib(m, linear.matmul(np.dtype(a_dt).name, np.dtype(b_dt).name, np.dtype(out_dt).name,
                         _width(m, a_dt)))
    ver = OBJ_CONSTRAINTS_TILE_VER
    cdt = "float32" if flt else "int32"
    cargs = [TCArg(_ptr(a_dt, True), "A"), TCArg(_ptr(b_dt, True), "B")]
    kerargs = [KerArg("A", Obj.O_IN | Obj.O_DB | _per_plane(M, True), K_, 1,
                      np.dtype(a_dt).itemsize, 0, 0, 0, "A"),
               KerArg("B", IN_DB | Obj.O_TILED, N, K_, np.dtype(b_dt).itemsize, 0, ver, 0, "B")]
    if c is not None:
        cargs.append(TCArg(_ptr(cdt, True), "C"))
        if c in ("column", "element"):
            kerargs.append(KerArg("C", IN_DB | Obj.O_TILED | _per_plane(M, c == "element"), N, 1,
                                  4, 0, ver, 0, "C"))
        else:
            kerargs.append(KerArg("C", IN_DB | _per_plane(M, c == "row"), 1, 1, 4, 0, 0, 0,
                                  "C"))
        c_bind, c_step = K_Arg("C", KER_ARG_TILE), int(c in ("column", "element"))
    else:
        # No C: the kernel never reads it; the binding is any pointer to 4-byte items.
        c_bind, c_step = K_Arg("B" if flt else "Scale", KER_ARG_TILE), 0
    if flt:
        tail = [Imm(Alpha), Imm(Beta), Imm(Act), Imm(ActParams[0]), Imm(ActParams[1])]
    else:
        cargs.append(TCArg(_ptr("float32", True), "Scale"))
        if scale_per_column:
            kerargs.append(KerArg("Scale", IN_DB | Obj.O_TILED, N, 1, 4, 0, ver, 0, "Scale"))
        else:
            kerargs.append(KerArg("Scale", Obj.O_IN, 1, 1, 4, 0, 0, 0, "Scale"))
        tail = [Imm(Za), Imm(Zb), K_Arg("Scale", KER_ARG_TILE), Imm(int(scale_per_column)),
                Imm(Zout), Imm(Lo), Imm(Hi)]
    cargs.append(TCArg(_ptr(out_dt), "Out"))
    kerargs.append(KerArg("Out", OUT_DB | Obj.O_TILED | _out_plane(M), N, 1,
                          np.dtype(out_dt).itemsize, 0, ver, 0, "Out"))
    m.UserKernel(Name,
        KernelDimensions(1, N, K_, M), _plane_order(M), TILE_HOR,
        CArgs(*cargs),
        Calls(Call(k, LOC_INNER_LOOP, Bindings(
            K_Arg("A", KER_ARG_TILE), Imm(K_), K_Arg("B", KER_ARG_TILE),
            K_Arg("B", KER_ARG_TILE_W), c_bind, Imm(c_step), Imm(int(c is not None)),
            K_Arg("Out", KER_ARG_TILE), *tail))),
        KerArgs(*kerargs))
    m._cnn_ops[Name] = M * K_ * N


def matmul_k_tiled(m, Name: str, *, a_dt, b_dt, out_dt, M: int, K_: int, N: int, c, Alpha,
                   Beta, Act, ActParams, Za, Zb, scale_per_column, Zout, Lo, Hi) -> None:
    """``matmul`` with the reduction dimension in tiles, for rows of K that do not fit L1
    (the GAP AutoTiler's linear layer with a reduction): ``Name(A, Bt[, C][, Scale], Out)``
    with ``Bt`` [N, K], B transposed. ``KernelIterSpace(D1 rows of A, D0 blocks of up to 8
    output columns, T0 tiles of K)``, K tiles of a multiple of 8 values: before the first K
    tile an L1 accumulator per column receives 0 (float32) or the int32 bias, each K tile
    adds its products in order of k, after the last one the accumulator is scaled, added to
    C and activated (float32) or requantised into the output. The solver picks the K tile;
    the arithmetic, the order of each column's sum included, is ``matmul``'s, whatever the
    tile."""
    flt = is_float(out_dt)
    acc = "float32" if flt else "int32"
    names = [np.dtype(d).name for d in (a_dt, b_dt, out_dt)]
    start = _lib(m, linear.matmul_acc_start(acc))
    part = _lib(m, linear.matmul_acc(names[0], names[1], acc, _width(m, a_dt)))
    last = _lib(m, linear.matmul_acc_out(acc, names[2]))
    nb = max(d for d in range(1, 9) if N % d == 0)  # output columns per block
    ver = OBJ_CONSTRAINTS_TILE_VER
    cargs = [TCArg(_ptr(a_dt, True), "A"), TCArg(_ptr(b_dt, True), "Bt")]
    # K tiles of a multiple of 8 values (vector-friendly, and 8 times fewer sizes to try).
    kerargs = [KerArg("A", KerArgSpace(2, D1, T0), IN_DB, K_, 1, np.dtype(a_dt).itemsize, 0, ver,
                      8, "A"),
               KerArg("Bt", KerArgSpace(2, D0, T0), IN_DB, K_, nb, np.dtype(b_dt).itemsize, 0,
                      ver, 8, "Bt")]

    def operand(name: str, spaces: tuple) -> KerArg:
        """C or Scale, 4-byte items walked by ``spaces`` (D1: per row, D0: per column)."""
        if not spaces:  # one value for every block: whole in L1, read once
            return KerArg(name, KerArgSpace(1, T0), Obj.O_IN | Obj.O_BUFF | Obj.O_NTILED, 1, 1,
                          4, 0, 0, 0, name)
        return KerArg(name, KerArgSpace(len(spaces), *spaces), IN_DB,
                      nb if spaces[-1] == D0 else 1, 1, 4, 0, 0, 0, name)

    if c is not None:
        cargs.append(TCArg(_ptr(acc, True), "C"))  # Gemm's C, or the int32 bias
        kerargs.append(operand("C", {"element": (D1, D0), "column": (D0,), "row": (D1,),
                                     "scalar": ()}[c]))
        c_bind, c_step = K_Arg("C", KER_ARG_TILE), int(c in ("column", "element"))
    else:  # the kernels never read C: a pointer that is not the one they write (restrict)
        c_bind, c_step = K_Arg("Acc" if flt else "Scale", KER_ARG_TILE), 0
    has_c = int(c is not None)
    if flt:
        start_c = [K_Arg("Out", KER_ARG_TILE), Imm(0), Imm(0)]  # C comes after the scaling
        part_zps = []
        tail = [c_bind, Imm(c_step), Imm(has_c), Imm(Alpha), Imm(Beta), Imm(Act),
                Imm(ActParams[0]), Imm(ActParams[1])]
    else:
        cargs.append(TCArg(_ptr("float32", True), "Scale"))
        kerargs.append(operand("Scale", (D0,) if scale_per_column else ()))
        start_c = [c_bind, Imm(c_step), Imm(has_c)]
        part_zps = [Imm(Za), Imm(Zb)]
        tail = [K_Arg("Scale", KER_ARG_TILE), Imm(int(scale_per_column)), Imm(Zout), Imm(Lo),
                Imm(Hi)]
    cargs.append(TCArg(_ptr(out_dt), "Out"))
    kerargs += [KerArg("Out", KerArgSpace(2, D1, D0), OUT_DB, nb, 1, np.dtype(out_dt).itemsize,
                       0, 0, 0, "Out"),
                KerArg("Acc", KerArgSpace(1, T0), Obj.O_BUFF | Obj.O_NTILED, nb, 1, 4, 0, 0, 0,
                       None)]
    m.UserKernel(Name,
        KernelIterSpace(3, IterFixedSpace(D1, M), IterFixedSpace(D0, N // nb), IterTiledSpace(T0)),
        TILE_VER,
        CArgs(*cargs),
        Calls(
            Call(start, LOC_LOOP_PROLOG, Bindings(K_Arg("Acc", KER_ARG_TILE), Imm(nb), *start_c)),
            Call(part, LOC_LOOP, Bindings(
                K_Arg("A", KER_ARG_TILE), K_Arg("A", KER_ARG_TILE_W), K_Arg("Bt", KER_ARG_TILE),
                Imm(nb), K_Arg("Acc", KER_ARG_TILE), *part_zps)),
            Call(last, LOC_LOOP_EPILOG, Bindings(
                K_Arg("Acc", KER_ARG_TILE), Imm(nb), K_Arg("Out", KER_ARG_TILE), *tail))),
        KerArgs(*kerargs))
    m._cnn_ops[Name] = M * K_ * N
    try:
        m.tiling(Name)
    except TilingError as e:
        raise TilingError(f"{Name}: [{M}, {K_}] x [{K_}, {N}] does not fit the L1 budget of "
                          f"{m.l1_budget} B even with K = {K_} cut into tiles: {e}") from None


def batched_matmul(m, Name: str, *, a_dt, b_dt, out_dt, Batch: tuple[int, ...], M: int, K_: int,
                   N: int, a_walks: tuple[bool, ...], b_walks: tuple[bool, ...], Alpha: int = 0,
                   Beta: int = 0, Za: int = 0, Zb: int = 0, Zout: int = 0, Lo: int = 0,
                   Hi: int = 0) -> None:
    """``Name(A, B[, Scale], Out)``: Out [*Batch, M, N], one product per index of ``Batch``
    (one or two dimensions) of a matrix of A [M, K] and one of B [K, N]; A holds a matrix per
    index of the batch dimensions ``a_walks`` marks and repeats it along the others (numpy's
    broadcasting), B likewise with ``b_walks``. ``KernelIterSpace(D3, D2: the batch, D1: rows
    of A, T0: tiles of columns)``: each call is ``matmul``'s (a row of A times a tile of B's
    columns, the same kernel, the same order of each sum), the batch walked by the tiler's
    spaces rather than by one layer per matrix. Integers: Scale [1] float32."""
    flt = is_float(out_dt)
    k = _lib(m, linear.matmul(np.dtype(a_dt).name, np.dtype(b_dt).name, np.dtype(out_dt).name,
                         _width(m, a_dt)))
    ver = OBJ_CONSTRAINTS_TILE_VER
    batch = (D3, D2)[2 - len(Batch):]  # the batch spaces, outermost first
    a_sp = tuple(sp for sp, w in zip(batch, a_walks) if w) + (D1,)
    b_sp = tuple(sp for sp, w in zip(batch, b_walks) if w) + (T0,)
    cargs = [TCArg(_ptr(a_dt, True), "A"), TCArg(_ptr(b_dt, True), "B")]
    kerargs = [KerArg("A", KerArgSpace(len(a_sp), *a_sp), IN_DB, K_, 1, np.dtype(a_dt).itemsize,
                      0, 0, 0, "A"),
               KerArg("B", KerArgSpace(len(b_sp), *b_sp), IN_DB, N, K_, np.dtype(b_dt).itemsize,
                      0, ver, 0, "B")]
    if flt:
        c_bind = K_Arg("B", KER_ARG_TILE)  # no C: the kernel never reads it
        tail = [Imm(Alpha), Imm(Beta), Imm(common.ACT_NONE), Imm(0), Imm(0)]
    else:
        cargs.append(TCArg(_ptr("float32", True), "Scale"))
        kerargs.append(KerArg("Scale", KerArgSpace(1, T0), Obj.O_IN | Obj.O_BUFF | Obj.O_NTILED,
                              1, 1, 4, 0, 0, 0, "Scale"))
        c_bind = K_Arg("Scale", KER_ARG_TILE)
        tail = [Imm(Za), Imm(Zb), K_Arg("Scale", KER_ARG_TILE), Imm(0), Imm(Zout), Imm(Lo),
                Imm(Hi)]
    cargs.append(TCArg(_ptr(out_dt), "Out"))
    kerargs.append(KerArg("Out", KerArgSpace(len(batch) + 2, *batch, D1, T0), OUT_DB, N, 1,
                          np.dtype(out_dt).itemsize, 0, ver, 0, "Out"))
    m.UserKernel(Name,
        KernelIterSpace(len(batch) + 2, *(IterFixedSpace(sp, n) for sp, n in zip(batch, Batch)),
                        IterFixedSpace(D1, M), IterTiledSpace(T0)),
        TILE_VER,
        CArgs(*cargs),
        Calls(Call(k, LOC_INNER_LOOP, Bindings(
            K_Arg("A", KER_ARG_TILE), Imm(K_), K_Arg("B", KER_ARG_TILE),
            K_Arg("B", KER_ARG_TILE_W), c_bind, Imm(0), Imm(0), K_Arg("Out", KER_ARG_TILE),
            *tail))),
        KerArgs(*kerargs))
    m._cnn_ops[Name] = math.prod(Batch) * M * K_ * N


__all__ = ["batched_matmul", "matmul", "matmul_k_tiled"]
