"""The convolution layer generator (``conv_pool_act``), in the style of
``npukit.tiler.layer_generators``: a convolution (dense, or depthwise: one input plane per
output plane), strided, dilated, zero padded, then an activation (float32) or ONNX Runtime's
requantisation (int8/uint8), then an optional pooling without padding.

The target's schedule takes, of the ways the GAP SDK's generators tile a convolution, the one
the cycle model predicts the fewest cycles for (``_fewest_cycles``): tiles of features
(output features shared by the cores, input features, rows), or plane by plane (iteration
order out-plane, tile, in-plane, as GAP's ``CNN_ConvolutionPoolReLU``: a one-tile L1
accumulator receives the bias, then each input plane's taps, then is activated and pooled
into the output tile). With ``par_features`` (the host schedule) the features are
parametric spaces, each call on every feature of its tile.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import is_float
from ..errors import NpukitError
from .api import (
    D0,
    D1,
    D2,
    KER_ARG_PARTILE_SIZE,
    KER_ARG_TILE,
    KER_ARG_TILE_H,
    KER_ARG_TILEOFFSET,
    KER_DIM4,
    KER_IN_PLANE,
    KER_OUT_PLANE,
    KER_TILE,
    LOC_D0,
    LOC_D0_EPILOG,
    LOC_D0_PROLOG,
    LOC_IN_PLANE_EPILOG,
    LOC_IN_PLANE_PROLOG,
    LOC_INNER_LOOP,
    LOC_LOOP,
    T0,
    TILE_HOR,
    Bindings,
    Call,
    Calls,
    CArgs,
    Imm,
    K_Arg,
    K_ArgPar,
    Ker_IteratorIndex,
    KerArg,
    KerArgs,
    KerArgSpace,
    KernelDimensions,
    KernelIterationOrder,
    Obj,
    TCArg,
)
from .api_spaces import IterFixedSpace, IterParSpace, IterTiledSpace, KernelIterSpace
from .basic_kernels import common, convolution, parallel
from .layer_generators import _check, _lib, _ptr, _width
from .layer_generators_dw import conv_dw_requant, fused_applies

# -- convolution ------------------------------------------------------------------------------

# The output features a float32 host tile of whole planes and every input feature must hold
# at the least for the host schedule to prefer it to bands of rows (each band reading the
# filter again: squeezenet1_1's last convolution copied its 2 MB filter 4 times a run); 64,
# so that the cores still share the features in whole vectors (``conv_channels.SPLIT``).
FLOAT_CUT_OUT = 64


def conv_pool_act(m, Name: str, *, in_dt, w_dt, out_dt, InFeat: int, OutFeat: int, Width: int,
                  Height: int, in_tiled: bool, Hreal: int, PadT: int, PadL: int, Fcx: int,
                  Fcy: int, Dcx: int = 1, Dcy: int = 1, Scx: int = 1, Scy: int = 1, Wc: int,
                  Hc: int, depthwise: bool = False, PoolOper: int = common.POOL_NONE, Fpx: int = 1,
                  Fpy: int = 1, Spx: int = 1, Spy: int = 1, Wo: int, Ho: int,
                  Act: int = common.ACT_NONE, ActParams: tuple[int, int] = (0, 0), Zin: int = 0,
                  Zw: int = 0, Zout: int = 0, Lo: int = 0, Hi: int = 0,
                  par_features: bool = False, Groups: int = 1) -> None:
    """The user kernel ``Name(In, Filter, Bias[, Scale], Out)``: In [InFeat, Height, Width]
    (``in_tiled``: rows already padded, ``PadT`` of them on top, ``Hreal`` real ones; else
    the real plane, padded in the kernel), Filter [OutFeat, InFeat or 1, Fcy, Fcx], Bias
    [OutFeat] (float32 or int32), Scale [OutFeat] float32 (integers: the requantisation
    scale ``x_scale * w_scale / y_scale``), Out [OutFeat, Ho, Wo]; the convolution output is
    Wc x Hc. Integer outputs are clamped to [Lo, Hi] (the activation, folded).

    ``par_features`` (a dense convolution): the features as parametric spaces, as the GAP
    SDK's current convolution generators iterate (output features, tiles, input features,
    each space whole where it fits): each call works on every feature of its tile, so a
    layer that fits runs as a few calls (the host schedule); the same sums in the same order,
    so the same bytes.

    ``Groups`` > 1 (a grouped convolution, neither dense nor depthwise): Filter [OutFeat,
    InFeat / Groups, Fcy, Fcx], output features ``g * OutFeat / Groups`` onwards reading input
    features ``g * InFeat / Groups`` onwards, in place; a fixed space over the groups (D2)
    outside the tile of features, each call one group's, so each output adds its group's
    input features in order as one convolution of the group alone would."""
    same = tuple(v for k, v in locals().items() if k not in ("m", "Name"))
    flt = is_float(out_dt)
    _check(Name, f"{Groups} groups of {InFeat} input and {OutFeat} output features "
           f"(neither dense nor depthwise)", Groups == 1 or (
               not depthwise and InFeat % Groups == 0 and OutFeat % Groups == 0))
    in_g, out_g = InFeat // Groups, OutFeat // Groups
    _check(Name, "pooling after an integer convolution must be a max pooling",
           flt or PoolOper in (common.POOL_NONE, common.POOL_MAX))
    fe = Dcy * (Fcy - 1) + 1
    k_in = Scy * Spy
    ov_in = Height - k_in * Ho
    need = Scy * (Fpy - Spy - 1) + fe
    if in_tiled:
        _check(Name, f"the input plane has {Height} rows, the {Ho} output rows need "
               f"{k_in * Ho + need}: pad its rows first", ov_in >= max(need, 0))
    hc_decl = Spy * (Ho - 1) + Fpy
    _check(Name, f"pooling window {Fpy} smaller than its stride {Spy}", Fpy >= Spy)
    quant = [] if flt else [TCArg(_ptr("float32"), "Scale")]
    item = (np.dtype(in_dt).itemsize, np.dtype(w_dt).itemsize, np.dtype(out_dt).itemsize)

    def l1_bytes(in_feat: int, out_rows: int, out_feat: int = out_g) -> int:
        """L1 a tile of ``out_feat`` output features, ``out_rows`` output rows and
        ``in_feat`` input features takes, about (the solver's alignment aside)."""
        in_rows = ov_in + k_in * out_rows if in_tiled else Height
        return (item[0] * in_feat * Width * in_rows + 4 * out_feat * Wc * (
            Spy * out_rows + Fpy - Spy) + item[2] * out_feat * Wo * out_rows +
            item[1] * out_feat * in_feat * Fcx * Fcy + 8 * out_feat)

    shape = dict(in_dt=in_dt, w_dt=w_dt, out_dt=out_dt, Width=Width, Height=Height,
                 in_tiled=in_tiled, in_rows=(ov_in, PadT, Hreal),
                 conv=(Fcx, Fcy, Scx, Scy, Dcx, Dcy, PadL, Wc, Hc, Zin, Zw),
                 pool=(PoolOper, Fpx, Fpy, Spx, Spy, Wo, Ho, hc_decl),
                 act=(Act, *ActParams) if flt else (Zout, Lo, Hi), quant=quant)

    def features(in_tile: int, cut_out: bool, out_tile: int = 1):
        return lambda name: _conv_feature_tiles(
            m, name, InFeat=in_g, in_tile=in_tile, cut_out=cut_out, OutFeat=out_g,
            db=0 if par_features else Obj.O_DB, out_tile=out_tile, groups=Groups, **shape)

    def each_plane(name: str) -> None:
        _conv_each_plane(m, name, InFeat=InFeat, OutFeat=OutFeat, depthwise=depthwise,
                         par_features=par_features, **shape)

    in_tile = _feature_tile_inputs(m.l1_budget, in_g, Ho, l1_bytes)
    if Groups > 1:
        # Tiles of one group's features (plane by plane has no group space; tiles of one
        # input feature stand for it): every input feature of the group with a part of its
        # outputs, or bands of rows.
        cut_out = in_tile == 1 and l1_bytes(in_g, Ho) > m.l1_budget >= l1_bytes(in_g, Ho, 1)
        ways = [features(in_g if cut_out else in_tile or 1, cut_out)]
        if not par_features:
            ways = [features(in_g, True, m.target.cores)] * (out_g % m.target.cores == 0) + \
                [features(in_tile, False)] * (in_tile > 1) + [features(in_g, True),
                                                              features(1, False)]
        if len(ways) > 1:
            _fewest_of(m, Name, ways, same)
        else:
            ways[0](Name)
        return
    if par_features and depthwise and fused_applies(in_dt, out_dt, PoolOper):
        conv_dw_requant(m, Name, C=OutFeat, **shape)  # one call a tile of 8-bit features
        return
    if par_features:
        # The host schedule: every input feature with a part of the output features when
        # that fits whole planes (a tile of the filter is then one block of it, read where
        # it is), else plane by plane.
        cut_out = in_tile == 1 and l1_bytes(InFeat, Ho) > m.l1_budget >= l1_bytes(InFeat,
                                                                                 Ho, 1)
        # Float32: also where bands of rows would read a large filter again each band, if
        # every input feature and whole planes fit for FLOAT_CUT_OUT output features.
        cut_out = cut_out or flt and in_tile > 1 and not depthwise and \
            l1_bytes(InFeat, Ho) > m.l1_budget >= l1_bytes(InFeat, Ho, FLOAT_CUT_OUT)
        build = features(InFeat if cut_out else in_tile, cut_out) \
            if in_tile and not depthwise else each_plane
        build(Name)
        return
    # The target's schedule: the fewest predicted cycles among the ways the GAP SDK's
    # generators tile a convolution (tiles of features, with or without cutting the output
    # features before the rows: in multiples of the cores where they divide the features,
    # so that every core has one) and plane by plane.
    if depthwise:
        ways = [lambda name: _conv_dw_tiles(m, name, C=OutFeat, **shape), each_plane]
    else:
        cores = m.target.cores
        ways = [features(InFeat, True), each_plane]
        if OutFeat % cores == 0:
            ways.insert(0, features(InFeat, True, cores))
        if in_tile:
            ways.insert(0, features(in_tile, False))
    _fewest_of(m, Name, ways, same)


def _fewest_of(m, Name: str, ways, same: tuple) -> None:
    """``_fewest_cycles``, remembered in the model for layers of the same arguments ``same``
    (the ways and their cycles depend only on those and on the model's budgets and
    settings): a network's repeated layers are timed once."""
    key = (same, m.l1_budget, m.l2_budget, m.autotiler_version, repr(m.settings))
    try:
        k = m._fewest.get(key)
    except TypeError:  # an argument that is no value (a list): timed every time
        _fewest_cycles(m, Name, ways)
        return
    if k is None:
        m._fewest[key] = _fewest_cycles(m, Name, ways)
    else:
        ways[k](Name)


def _fewest_cycles(m, Name: str, ways) -> int:
    """Add user kernel ``Name`` built by whichever of ``ways`` (functions adding a user
    kernel under the name they are given) the cycle model predicts the fewest cycles for,
    the first on a tie. A way the tiler cannot tile, or whose program the checks refuse, is
    passed over; when none is left the last is built, to fail under the layer's own name.
    Returns the index of the way built.

    Each way is tried under the layer's own name, and the best one's kernel, tiling and
    count of operations are kept (not built again): its program and cycles, remembered by
    the model for those objects, serve the graph as they are."""
    best = None
    for k, way in enumerate(ways):
        try:
            way(Name)
            cycles = m.cycles(m.program(Name))
        except NpukitError:  # (a tiling of features with padded rows can read past In)
            cycles = None
        built = (m.kernels.pop(Name, None), m._tilings.pop(Name, None),
                 m._cnn_ops.pop(Name, None), m._programs.pop(Name, None))
        if cycles is not None and (best is None or cycles < best[0]):
            best = (cycles, k, built)
    if best is None:
        ways[-1](Name)
        return len(ways) - 1
    _, chosen, (kernel, tiling, ops, program) = best
    m.kernels[Name], m._tilings[Name], m._programs[Name] = kernel, tiling, program
    if ops is not None:
        m._cnn_ops[Name] = ops
    return chosen


def _conv_each_plane(m, Name: str, *, in_dt, w_dt, out_dt, InFeat: int, OutFeat: int,
                     Width: int, Height: int, in_tiled: bool, in_rows, conv, pool, act, quant,
                     depthwise: bool, par_features: bool) -> None:
    """``conv_pool_act`` plane by plane (``KER_DIM4``: output planes, tiles, input planes),
    as GAP's ``CNN_ConvolutionPoolReLU``: per output plane and tile, a one-tile L1
    accumulator receives the bias, then each input plane's taps, then is activated and
    pooled into the output tile."""
    ov_in, PadT, Hreal = in_rows
    Fcx, Fcy, Scx, Scy, Dcx, Dcy, PadL, Wc, Hc, Zin, Zw = conv
    PoolOper, Fpx, Fpy, Spx, Spy, Wo, Ho, hc_decl = pool
    flt = is_float(out_dt)
    acc_dt = bias_dt = "float32" if flt else "int32"
    Act, *ActParams = act if flt else (common.ACT_NONE, 0, 0)
    Zout, Lo, Hi = (0, 0, 0) if flt else act
    ker = _lib(m, convolution.layer_conv(np.dtype(in_dt).name, np.dtype(w_dt).name,
                                         _width(m, in_dt)))
    set_bias = _lib(m, convolution.set_bias(bias_dt, acc_dt))
    out = _lib(m, convolution.conv_out(acc_dt, np.dtype(out_dt).name))
    # The host schedule (``par_features``: here a depthwise convolution) single-buffers its
    # tiles, so that a plane read whole is read where it is (nothing runs beside the copies).
    db = 0 if par_features else Obj.O_DB
    in_flags = Obj.O_IN | db | (Obj.O_3D | Obj.O_4D if depthwise else Obj.O_3D)
    in_row0 = K_Arg("In", KER_ARG_TILEOFFSET) if in_tiled else Imm(PadT)
    if flt:
        tail = [Imm(Act), Imm(ActParams[0]), Imm(ActParams[1])]
    else:
        tail = [K_Arg("Scale", KER_ARG_TILE), Ker_IteratorIndex(KER_OUT_PLANE), Imm(Zout),
                Imm(Lo), Imm(Hi)]
    kerargs = [
        KerArg("In", in_flags | (Obj.O_TILED if in_tiled else 0), Width, Height,
               np.dtype(in_dt).itemsize, ov_in if in_tiled else 0, 0, 0, "In"),
        KerArg("Bias", Obj.O_IN, OutFeat, 1, 4, 0, 0, 0, "Bias"),
        KerArg("Filter", Obj.O_IN | db | Obj.O_3D | Obj.O_4D, Fcx, Fcy,
               np.dtype(w_dt).itemsize, 0, 0, 0, "Filter"),
    ]
    if not flt:
        kerargs.append(KerArg("Scale", Obj.O_IN, OutFeat, 1, 4, 0, 0, 0, "Scale"))
    kerargs += [
        KerArg("Out", Obj.O_OUT | db | Obj.O_3D | Obj.O_TILED, Wo, Ho,
               np.dtype(out_dt).itemsize, 0, 0, 0, "Out"),
        KerArg("Acc", Obj.O_BUFF | Obj.O_TILED | Obj.O_ONETILE, Wc, hc_decl, 4,
               hc_decl - Spy * Ho, 0, 0, None),
    ]
    m.UserKernel(Name,
        KernelDimensions(1 if depthwise else InFeat, Width, Height, OutFeat),
        KernelIterationOrder(KER_DIM4, KER_OUT_PLANE, KER_TILE, KER_IN_PLANE),
        TILE_HOR,
        _conv_cargs(in_dt, w_dt, out_dt, quant),
        Calls(
            Call(set_bias, LOC_IN_PLANE_PROLOG, Bindings(
                K_Arg("Acc", KER_ARG_TILE), Imm(Wc), K_Arg("Acc", KER_ARG_TILE_H),
                K_Arg("Bias", KER_ARG_TILE), Ker_IteratorIndex(KER_OUT_PLANE), Imm(0))),
            Call(ker, LOC_INNER_LOOP, Bindings(
                K_Arg("In", KER_ARG_TILE), Imm(Width), in_row0, K_Arg("In", KER_ARG_TILE_H),
                Imm(Hreal), Imm(PadT), K_Arg("Filter", KER_ARG_TILE), K_Arg("Acc", KER_ARG_TILE),
                Imm(Wc), K_Arg("Acc", KER_ARG_TILEOFFSET), K_Arg("Acc", KER_ARG_TILE_H),
                Imm(Fcx), Imm(Fcy), Imm(Scx), Imm(Scy), Imm(Dcx), Imm(Dcy), Imm(PadL), Imm(Zin),
                Imm(Zw))),
            Call(out, LOC_IN_PLANE_EPILOG, Bindings(
                K_Arg("Acc", KER_ARG_TILE), Imm(Wc), K_Arg("Acc", KER_ARG_TILEOFFSET), Imm(Hc),
                K_Arg("Out", KER_ARG_TILE), Imm(Wo), K_Arg("Out", KER_ARG_TILEOFFSET),
                K_Arg("Out", KER_ARG_TILE_H), Imm(Fpx), Imm(Fpy), Imm(Spx), Imm(Spy),
                Imm(PoolOper), *tail))),
        KerArgs(*kerargs))
    m._cnn_ops[Name] = Wc * Hc * Fcx * Fcy * OutFeat * (1 if depthwise else InFeat)


# The fewest output rows a band of a large plane's tile of features takes.
BAND_ROWS = 4


def _feature_tile_inputs(budget: int, InFeat: int, Ho: int, l1_bytes) -> int:
    """The input features a tile of features takes at the least (the preferred divider of
    its input features' space), 0 when it does not pay. Where every output feature's
    accumulators and outputs fit L1 whole beside one input plane, 1: the solver keeps the
    rows whole and gives the input features tiles of the most that fit. Elsewhere the
    solver, which cuts the innermost space first, would cut the input features to one before
    the rows (then the planes one at a time are faster): the most input features dividing
    ``InFeat`` whose band of ``BAND_ROWS`` output rows fits, so the rows come in bands
    instead, every input feature of a band (or as many as fit) in one call."""
    if l1_bytes(1, Ho) <= budget:
        return 1
    rows = min(Ho, BAND_ROWS)
    return next((d for d in range(InFeat, 0, -1)
                 if InFeat % d == 0 and l1_bytes(d, rows) <= budget), 0)


def _conv_feature_tiles(m, Name: str, *, in_dt, w_dt, out_dt, InFeat: int, in_tile: int,
                        cut_out: bool, OutFeat: int, Width: int, Height: int, in_tiled: bool,
                        in_rows, conv, pool, act, quant, db: int, out_tile: int = 1,
                        groups: int = 1) -> None:
    """``conv_pool_act(par_features=True)``: spaces (output features D1, tiles T0, input
    features D0), or with ``cut_out`` (T0, D1, D0), the solver then cutting the output
    features before the rows; per tile of D1 x T0, the accumulators of its features receive
    the biases, then each tile of input features (``layer_conv(planes=True)``), then are
    activated and pooled into the output tile (``conv_out_planes``). ``db``: ``Obj.O_DB``
    double-buffers the moving arguments (the target's schedule, as the GAP SDK's
    generators); 0 single-buffers them (the host schedule copies a tile before the calls
    that read it). ``groups`` > 1: ``InFeat`` and ``OutFeat`` are a group's, a fixed space
    over the groups (D2) outermost, every argument but the accumulators walking it."""
    ov_in, PadT, Hreal = in_rows
    Fcx, Fcy, Scx, Scy, Dcx, Dcy, PadL, Wc, Hc, Zin, Zw = conv
    PoolOper, Fpx, Fpy, Spx, Spy, Wo, Ho, hc_decl = pool
    flt = is_float(out_dt)
    acc_dt = "float32" if flt else "int32"
    ker = _lib(m, convolution.layer_conv(np.dtype(in_dt).name, np.dtype(w_dt).name,
                                         _width(m, in_dt), planes=True))
    set_bias = _lib(m, convolution.set_bias_planes(acc_dt))
    out = _lib(m, convolution.conv_out_planes(acc_dt, np.dtype(out_dt).name))
    in_row0 = K_Arg("In", KER_ARG_TILEOFFSET) if in_tiled else Imm(PadT)
    g = (D2,) if groups > 1 else ()
    kerargs = _tile_args(D0, (D1, D0), db, in_dt, w_dt, out_dt, Width, Height, in_tiled,
                         in_rows, conv, pool, g)
    inner = (IterTiledSpace(T0), IterParSpace(D1, OutFeat, out_tile)) if cut_out else \
        (IterParSpace(D1, OutFeat, out_tile), IterTiledSpace(T0))
    outer = (IterFixedSpace(D2, groups),) if g else ()
    m.UserKernel(Name,
        KernelIterSpace(len(outer) + 3, *outer, *inner, IterParSpace(D0, InFeat, in_tile)),
        TILE_HOR,
        _conv_cargs(in_dt, w_dt, out_dt, quant),
        Calls(
            Call(set_bias, LOC_D0_PROLOG, _bias_bindings(Wc)),
            Call(ker, LOC_D0, Bindings(
                K_Arg("In", KER_ARG_TILE), Imm(Width), in_row0, K_Arg("In", KER_ARG_TILE_H),
                Imm(Hreal), Imm(PadT), K_ArgPar("In", KER_ARG_PARTILE_SIZE, D0),
                K_Arg("Filter", KER_ARG_TILE), K_Arg("Acc", KER_ARG_TILE), Imm(Wc),
                K_Arg("Acc", KER_ARG_TILEOFFSET), K_Arg("Acc", KER_ARG_TILE_H),
                K_ArgPar("Acc", KER_ARG_PARTILE_SIZE, D1), Imm(Fcx), Imm(Fcy), Imm(Scx),
                Imm(Scy), Imm(Dcx), Imm(Dcy), Imm(PadL), Imm(Zin), Imm(Zw))),
            Call(out, LOC_D0_EPILOG, _out_bindings(conv, pool, act, flt))),
        KerArgs(*kerargs))
    m._cnn_ops[Name] = Wc * Hc * Fcx * Fcy * OutFeat * InFeat * groups


def _conv_dw_tiles(m, Name: str, *, in_dt, w_dt, out_dt, C: int, Width: int, Height: int,
                   in_tiled: bool, in_rows, conv, pool, act, quant) -> None:
    """``conv_pool_act(depthwise=True)`` in the target's schedule: spaces (features D1,
    tiles T0), as the GAP SDK's depthwise generators iterate; per tile of D1 x T0 one call
    of each basic kernel: the accumulators of its features receive the biases, then each
    feature's input plane with its filter (``parallel.planes`` of the one-plane
    convolution), then are activated and pooled into the output tile. Double buffers."""
    ov_in, PadT, Hreal = in_rows
    Fcx, Fcy, Scx, Scy, Dcx, Dcy, PadL, Wc, Hc, Zin, Zw = conv
    PoolOper, Fpx, Fpy, Spx, Spy, Wo, Ho, hc_decl = pool
    flt = is_float(out_dt)
    acc_dt = "float32" if flt else "int32"
    one = convolution.layer_conv(np.dtype(in_dt).name, np.dtype(w_dt).name, _width(m, in_dt))
    ker = _lib(m, parallel.planes(one, (("In", ("InRows", "W")), ("Filter", ("Fy", "Fx")),
                                        ("Acc", ("OutRows", "Wo")))))
    set_bias = _lib(m, convolution.set_bias_planes(acc_dt))
    out = _lib(m, convolution.conv_out_planes(acc_dt, np.dtype(out_dt).name))
    in_row0 = K_Arg("In", KER_ARG_TILEOFFSET) if in_tiled else Imm(PadT)
    kerargs = _tile_args(D1, (D1,), Obj.O_DB, in_dt, w_dt, out_dt, Width, Height,
                         in_tiled, in_rows, conv, pool)
    m.UserKernel(Name,
        KernelIterSpace(2, IterParSpace(D1, C, 1), IterTiledSpace(T0)),
        TILE_HOR,
        _conv_cargs(in_dt, w_dt, out_dt, quant),
        Calls(
            Call(set_bias, LOC_LOOP, _bias_bindings(Wc)),
            Call(ker, LOC_LOOP, Bindings(
                K_Arg("In", KER_ARG_TILE), Imm(Width), in_row0, K_Arg("In", KER_ARG_TILE_H),
                Imm(Hreal), Imm(PadT), K_Arg("Filter", KER_ARG_TILE), K_Arg("Acc", KER_ARG_TILE),
                Imm(Wc), K_Arg("Acc", KER_ARG_TILEOFFSET), K_Arg("Acc", KER_ARG_TILE_H),
                Imm(Fcx), Imm(Fcy), Imm(Scx), Imm(Scy), Imm(Dcx), Imm(Dcy), Imm(PadL), Imm(Zin),
                Imm(Zw), K_ArgPar("Acc", KER_ARG_PARTILE_SIZE, D1))),
            Call(out, LOC_LOOP, _out_bindings(conv, pool, act, flt))),
        KerArgs(*kerargs))
    m._cnn_ops[Name] = Wc * Hc * Fcx * Fcy * C



def _conv_cargs(in_dt, w_dt, out_dt, quant) -> tuple:
    """A convolution kernel's C arguments: In, Filter, Bias (of the accumulator's type),
    ``quant`` (Scale, integers only), Out."""
    acc_dt = "float32" if is_float(out_dt) else "int32"
    return CArgs(TCArg(_ptr(in_dt, True), "In"), TCArg(_ptr(w_dt, True), "Filter"),
                 TCArg(_ptr(acc_dt, True), "Bias"), *quant, TCArg(_ptr(out_dt), "Out"))


def _tile_args(in_space, filter_spaces: tuple, db: int, in_dt, w_dt, out_dt, Width: int,
               Height: int, in_tiled: bool, in_rows, conv, pool, group: tuple = ()) -> list:
    """The arguments of a tile of features: In (features ``in_space``, rows T0 when
    ``in_tiled``), Filter (``filter_spaces``), Bias and Scale per output feature (D1), Out and
    the one-tile accumulators (D1, T0); ``group`` (a grouped convolution's (D2,)) comes
    first in all but the accumulators; ``db`` double-buffers the moving ones."""
    ov_in = in_rows[0]
    Fcx, Fcy, *_, Wc, _, _, _ = conv
    _, _, Fpy, _, Spy, Wo, Ho, hc_decl = pool

    def space(*spaces) -> object:
        return KerArgSpace(len(group) + len(spaces), *group, *spaces)

    args = [
        KerArg("In", space(in_space, T0) if in_tiled else space(in_space),
               Obj.O_IN | db, Width, Height, np.dtype(in_dt).itemsize,
               ov_in if in_tiled else 0, 0, 0, "In"),
        KerArg("Bias", space(D1), Obj.O_IN | db, 1, 1, 4, 0, 0, 0, "Bias"),
        KerArg("Filter", space(*filter_spaces), Obj.O_IN | db, Fcx, Fcy,
               np.dtype(w_dt).itemsize, 0, 0, 0, "Filter")]
    if not is_float(out_dt):
        args.append(KerArg("Scale", space(D1), Obj.O_IN | db, 1, 1, 4, 0, 0, 0, "Scale"))
    return args + [
        KerArg("Out", space(D1, T0), Obj.O_OUT | db, Wo, Ho, np.dtype(out_dt).itemsize,
               0, 0, 0, "Out"),
        KerArg("Acc", KerArgSpace(2, D1, T0), Obj.O_BUFF | Obj.O_ONETILE, Wc, hc_decl, 4,
               hc_decl - Spy * Ho, 0, 0, None)]


def _bias_bindings(Wc: int) -> Bindings:
    """``set_bias_planes`` of a tile of features: its accumulators start at their biases."""
    return Bindings(K_Arg("Acc", KER_ARG_TILE), Imm(Wc), K_Arg("Acc", KER_ARG_TILE_H),
                    K_ArgPar("Acc", KER_ARG_PARTILE_SIZE, D1), K_Arg("Bias", KER_ARG_TILE))


def _out_bindings(conv, pool, act, flt: bool) -> Bindings:
    """``conv_out_planes`` of a tile of features: the accumulators activated (float32) or
    requantised, then pooled, into the output tile."""
    *_, Wc, Hc, _, _ = conv
    PoolOper, Fpx, Fpy, Spx, Spy, Wo, _, _ = pool
    tail = [Imm(v) for v in act] if flt else [K_Arg("Scale", KER_ARG_TILE),
                                              *(Imm(v) for v in act)]
    return Bindings(
        K_Arg("Acc", KER_ARG_TILE), Imm(Wc), K_Arg("Acc", KER_ARG_TILEOFFSET), Imm(Hc),
        K_Arg("Acc", KER_ARG_TILE_H), K_Arg("Out", KER_ARG_TILE), Imm(Wo),
        K_Arg("Out", KER_ARG_TILEOFFSET), K_Arg("Out", KER_ARG_TILE_H),
        K_ArgPar("Out", KER_ARG_PARTILE_SIZE, D1), Imm(Fpx), Imm(Fpy), Imm(Spx), Imm(Spy),
        Imm(PoolOper), *tail)


__all__ = ["conv_pool_act"]
