"""Layer generators of the ONNX importer whose layers read at positions known only at run time
or computed per output (``npukit.tiler.layer_generators`` holds the others, and the helpers
these share):

- ``resize_planes``: nearest or bilinear resizing of planes by row and column tables.
- ``grid_sample``: planes sampled at the locations of a grid (ONNX's GridSample).
- ``fetch_rows``: the rows indices (Gather) or coordinates (GatherND) name, fetched one run of
  consecutive rows at a time from a table left in its home memory (an embedding lookup on an
  L2, L3 or flash table), a row wider than L1 in tiles of its columns; ``gather_elements``:
  ONNX's GatherElements.
- ``top_k``: the K largest or smallest values along an axis and their indices.
"""

from __future__ import annotations

import numpy as np

from .api import (
    D0,
    D1,
    KER_ARG_TILE,
    KER_ARG_TILE_H,
    KER_ARG_TILE_W,
    KER_ARG_TILEOFFSET,
    KER_DIM4,
    KER_IN_PLANE,
    KER_OUT_PLANE,
    KER_TILE,
    LOC_INNER_LOOP,
    LOC_LOOP,
    OBJ_CONSTRAINTS_TILE_VER,
    T0,
    TILE_HOR,
    Bindings,
    C_Arg,
    Call,
    Calls,
    CArgs,
    Imm,
    K_Arg,
    Ker_IteratorIndex,
    KerArg,
    KerArgs,
    KerArgSpace,
    KernelDimensions,
    KernelIterationOrder,
    Obj,
    TCArg,
)
from .api_spaces import IterFixedSpace, IterTiledSpace, KernelIterSpace
from .basic_kernels import gridsample, movement, reduction, resize, rowfetch
from .layer_generators import IN_DB, OUT_DB, _lib, _ptr


def resize_planes(m, Name: str, *, dt, Planes: int, Width: int, Height: int, Wo: int, Ho: int,
                  linear: bool) -> None:
    """``Name(In, Ys, Fy, Xs, Fx, Out)``: each of the Planes [Height, Width] planes of In
    resized to [Ho, Wo] by the row and column tables (``basic_kernels.resize``): the input
    plane whole, the output in tiles of rows."""
    k = _lib(m, resize.resize(np.dtype(dt).name, linear))
    item = np.dtype(dt).itemsize
    tables = [("Ys", "int32", 2 * Ho), ("Fy", "float32", Ho), ("Xs", "int32", 2 * Wo),
              ("Fx", "float32", Wo)]
    m.UserKernel(Name,
        KernelDimensions(1, Width, Height, Planes),
        KernelIterationOrder(KER_DIM4, KER_OUT_PLANE, KER_TILE, KER_IN_PLANE),
        TILE_HOR,
        CArgs(TCArg(_ptr(dt, True), "In"), *(TCArg(_ptr(t, True), n) for n, t, _ in tables),
              TCArg(_ptr(dt), "Out")),
        Calls(Call(k, LOC_INNER_LOOP, Bindings(
            K_Arg("In", KER_ARG_TILE), Imm(Width), K_Arg("Out", KER_ARG_TILE), Imm(Wo),
            K_Arg("Out", KER_ARG_TILEOFFSET), K_Arg("Out", KER_ARG_TILE_H),
            *(K_Arg(n, KER_ARG_TILE) for n, _, _ in tables)))),
        KerArgs(
            KerArg("In", IN_DB | Obj.O_3D | Obj.O_4D, Width, Height, item, 0, 0, 0, "In"),
            *(KerArg(n, Obj.O_IN, size, 1, 4, 0, 0, 0, n) for n, _, size in tables),
            KerArg("Out", OUT_DB | Obj.O_3D | Obj.O_TILED, Wo, Ho, item, 0, 0, 0, "Out")))
    m._cnn_ops[Name] = Planes * Wo * Ho


def grid_sample(m, Name: str, *, Planes: int, Width: int, Height: int, Wo: int, Ho: int,
                mode: str, padding: str, align: bool) -> None:
    """``Name(In, Grid, Out)``: each of the Planes [Height, Width] float32 planes of In
    sampled at the [Ho, Wo, 2] locations of Grid (``basic_kernels.gridsample``): the input
    plane and the grid whole, the output in tiles of rows."""
    k = _lib(m, gridsample.grid_sample(mode, padding, align))
    m.UserKernel(Name,
        KernelDimensions(1, Width, Height, Planes),
        KernelIterationOrder(KER_DIM4, KER_OUT_PLANE, KER_TILE, KER_IN_PLANE),
        TILE_HOR,
        CArgs(TCArg(_ptr("float32", True), "In"), TCArg(_ptr("float32", True), "Grid"),
              TCArg(_ptr("float32"), "Out")),
        Calls(Call(k, LOC_INNER_LOOP, Bindings(
            K_Arg("In", KER_ARG_TILE), Imm(Width), Imm(Height), K_Arg("Out", KER_ARG_TILE),
            Imm(Wo), K_Arg("Out", KER_ARG_TILEOFFSET), K_Arg("Out", KER_ARG_TILE_H),
            K_Arg("Grid", KER_ARG_TILE)))),
        KerArgs(
            KerArg("In", IN_DB | Obj.O_3D | Obj.O_4D, Width, Height, 4, 0, 0, 0, "In"),
            KerArg("Grid", Obj.O_IN, 2 * Wo * Ho, 1, 4, 0, 0, 0, "Grid"),
            KerArg("Out", OUT_DB | Obj.O_3D | Obj.O_TILED, Wo, Ho, 4, 0, 0, 0, "Out")))
    m._cnn_ops[Name] = Planes * Wo * Ho


def fetch_rows(m, Name: str, *, dt, idx_dt, Planes: int, D: int, Inner: int, K: int,
               R: int = 0) -> None:
    """``Name(In, Idx, Out)``: for each of the Planes [D, Inner] tables of In, the K rows the
    run-time indices ``Idx`` name (``basic_kernels.rowfetch.fetch_rows``); with ``R``,
    ``Name(In, Idx, Dims, Out)``: ONNX's GatherND, each row at R coordinates along the axes
    ``Dims`` (``Idx`` [Planes, K, R], a plane of its own per table: ``batch_dims``). In is
    bound to no kernel argument: it stays where the graph keeps it (L2, L3 RAM or flash) and
    the basic kernel gets a pointer to it (``C_Arg``), fetching only the rows it needs, so it
    takes no L1 whatever its size; the indices and the output [K, Inner] move in tiles of
    rows, double-buffered. When one row does not fit L1 (Swin's q, k, v selected from a
    [3, ..] tensor by a scalar index), one row at a time in tiles of its columns
    (``_fetch_cols``): any width tiles while one element per slot fits."""
    args = (m, Name, dt, idx_dt, Planes, D, Inner, K, R)
    m._first_that_tiles(Name, _fetch_rows, _fetch_cols, args)
    m._cnn_ops[Name] = Planes * K * Inner


def _in_cargs(dt, idx_dt, Planes: int, D: int, Inner: int, R: int):
    nd = (TCArg(_ptr("int32", True), "Dims", shape=(R,)),) if R else ()
    return CArgs(TCArg(_ptr(dt, True), "In", shape=(Planes * D * Inner,)),
                 TCArg(_ptr(idx_dt, True), "Idx"), *nd, TCArg(_ptr(dt), "Out"))


def _fetch_rows(m, Name: str, dt, idx_dt, Planes: int, D: int, Inner: int, K: int,
                R: int) -> None:
    """``fetch_rows`` in tiles of whole rows."""
    k = _lib(m, rowfetch.fetch_rows(np.dtype(dt).name, np.dtype(idx_dt).name, bool(R)))
    item, iitem = np.dtype(dt).itemsize, np.dtype(idx_dt).itemsize
    idx = (KerArg("Idx", IN_DB | Obj.O_3D | Obj.O_4D | Obj.O_TILED, R, K, iitem, 0, 0, 0,
                  "Idx") if R else KerArg("Idx", IN_DB | Obj.O_TILED, 1, K, iitem, 0, 0, 0, "Idx"))
    m.UserKernel(Name,
        KernelDimensions(1, Inner, K, Planes),
        KernelIterationOrder(KER_DIM4, KER_OUT_PLANE, KER_TILE, KER_IN_PLANE),
        TILE_HOR,
        _in_cargs(dt, idx_dt, Planes, D, Inner, R),
        Calls(Call(k, LOC_INNER_LOOP, Bindings(
            C_Arg("In"), Imm(D), Imm(Inner), Ker_IteratorIndex(KER_OUT_PLANE),
            K_Arg("Idx", KER_ARG_TILE), *((Imm(R), K_Arg("Dims", KER_ARG_TILE)) if R else ()),
            K_Arg("Out", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE_H)))),
        KerArgs(idx, *((KerArg("Dims", Obj.O_IN, R, 1, 4, 0, 0, 0, "Dims"),) if R else ()),
                KerArg("Out", OUT_DB | Obj.O_3D | Obj.O_TILED, Inner, K, item, 0, 0, 0, "Out")))


def _fetch_cols(m, Name: str, dt, idx_dt, Planes: int, D: int, Inner: int, K: int,
                R: int) -> None:
    """``fetch_rows`` one row at a time in tiles of its columns
    (``basic_kernels.rowfetch.fetch_cols``): fixed spaces over the tables (D1) and the rows
    (D0), the tiled space T0 cutting the row; a row's index (shared by the tables, Gather)
    or coordinates (one set per table, GatherND) follow the fixed spaces; GatherND's R axis
    sizes are read where the graph keeps them, as the table is."""
    k = _lib(m, rowfetch.fetch_cols(np.dtype(dt).name, np.dtype(idx_dt).name, bool(R)))
    item, iitem = np.dtype(dt).itemsize, np.dtype(idx_dt).itemsize
    planes = (D1,) if Planes > 1 else ()
    idx_sp = (*planes, D0) if R else (D0,)
    spaces = ((IterFixedSpace(D1, Planes),) * (Planes > 1)
              + (IterFixedSpace(D0, K), IterTiledSpace(T0)))
    m.UserKernel(Name, KernelIterSpace(len(spaces), *spaces), TILE_HOR,
        _in_cargs(dt, idx_dt, Planes, D, Inner, R),
        Calls(Call(k, LOC_LOOP, Bindings(
            C_Arg("In"), Imm(D), Imm(Inner),
            Ker_IteratorIndex(D1) if Planes > 1 else Imm(0), K_Arg("Idx", KER_ARG_TILE),
            *((Imm(R), C_Arg("Dims")) if R else ()), K_Arg("Out", KER_ARG_TILE),
            K_Arg("Out", KER_ARG_TILEOFFSET), K_Arg("Out", KER_ARG_TILE_W)))),
        KerArgs(KerArg("Idx", KerArgSpace(len(idx_sp), *idx_sp), IN_DB, max(R, 1), 1, iitem,
                       0, 0, 0, "Idx"),
                KerArg("Out", KerArgSpace(*planes, D0, T0), OUT_DB, Inner, 1, item, 0,
                       OBJ_CONSTRAINTS_TILE_VER, 0, "Out")))


def gather_elements(m, Name: str, *, dt, idx_dt, Planes: int, D: int, Inner: int,
                    K: int) -> None:
    """``Name(In, Idx, Out)``: ONNX's GatherElements on each of the Planes [D, Inner] planes
    of In, each output value the row its own index names (``Idx`` [Planes, K, Inner],
    ``basic_kernels.movement.gather_elements``): the input plane whole, the output and the
    indices in tiles of rows."""
    k = _lib(m, movement.gather_elements(np.dtype(dt).name, np.dtype(idx_dt).name))
    item, iitem = np.dtype(dt).itemsize, np.dtype(idx_dt).itemsize
    m.UserKernel(Name,
        KernelDimensions(1, Inner, D, Planes),
        KernelIterationOrder(KER_DIM4, KER_OUT_PLANE, KER_TILE, KER_IN_PLANE),
        TILE_HOR,
        CArgs(TCArg(_ptr(dt, True), "In"), TCArg(_ptr(idx_dt, True), "Idx"),
              TCArg(_ptr(dt), "Out")),
        Calls(Call(k, LOC_INNER_LOOP, Bindings(
            K_Arg("In", KER_ARG_TILE), Imm(D), Imm(Inner), K_Arg("Idx", KER_ARG_TILE),
            K_Arg("Out", KER_ARG_TILE), K_Arg("Out", KER_ARG_TILE_H)))),
        KerArgs(
            KerArg("In", IN_DB | Obj.O_3D | Obj.O_4D, Inner, D, item, 0, 0, 0, "In"),
            KerArg("Idx", IN_DB | Obj.O_3D | Obj.O_4D | Obj.O_TILED, Inner, K, iitem, 0, 0, 0,
                   "Idx"),
            KerArg("Out", OUT_DB | Obj.O_3D | Obj.O_TILED, Inner, K, item, 0, 0, 0, "Out")))
    m._cnn_ops[Name] = Planes * K * Inner


def top_k(m, Name: str, *, dt, Planes: int, D: int, Inner: int, K: int, largest: bool) -> None:
    """``Name(In, Vals, Idx)``: ONNX's sorted TopK along the middle axis of [Planes, D, Inner]
    (``basic_kernels.reduction.top_k``): each plane whole in L1, its K values and int64
    indices per column."""
    k = _lib(m, reduction.top_k(np.dtype(dt).name, largest))
    item = np.dtype(dt).itemsize
    m.UserKernel(Name,
        KernelDimensions(1, Inner, D, Planes),
        KernelIterationOrder(KER_DIM4, KER_OUT_PLANE, KER_TILE, KER_IN_PLANE),
        TILE_HOR,
        CArgs(TCArg(_ptr(dt, True), "In"), TCArg(_ptr(dt), "Vals"), TCArg(_ptr("int64"), "Idx")),
        Calls(Call(k, LOC_INNER_LOOP, Bindings(
            K_Arg("In", KER_ARG_TILE), Imm(D), Imm(Inner), Imm(K), K_Arg("Vals", KER_ARG_TILE),
            K_Arg("Idx", KER_ARG_TILE)))),
        KerArgs(
            KerArg("In", IN_DB | Obj.O_3D | Obj.O_4D, Inner, D, item, 0, 0, 0, "In"),
            KerArg("Vals", OUT_DB | Obj.O_3D, Inner, K, item, 0, 0, 0, "Vals"),
            KerArg("Idx", OUT_DB | Obj.O_3D, Inner, K, 8, 0, 0, 0, "Idx")))
    m._cnn_ops[Name] = Planes * D * Inner


__all__ = ["resize_planes", "grid_sample", "fetch_rows", "gather_elements", "top_k"]
