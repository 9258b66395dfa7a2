"""The CNN library's parallel-feature basic kernels (GAP's ``KerPar*``), as the newer CNN
generators call them: each call works on a tile of several feature planes at once (the
``KER_ARG_PARTILE_SIZE`` of a parametric space), plane after plane in order, through the
one-plane kernel of ``convolution`` / ``pooling`` it wraps. The arithmetic is therefore the
one-plane kernel's, element for element (see ``common``).

Layouts in a tile: planes one after the other, each dense (``W * H`` items); a filter tile
holds ``OutFeat`` rows of ``TotalInFeat`` filters (every input feature loaded in L1), the
call using the ``InFeat`` of them its input tile holds. ``par_mat_add`` has no one-plane
twin: it adds every element of its planes at once.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from ...costs import Work
from ...dtypes import is_float
from .common import BasicKernel, c_signature, c_type, share_rows, suffix
from .convolution import conv, set_bias
from .pooling import pool_act


def _plane_c(k: BasicKernel) -> tuple[str, str]:
    """The one-plane kernel's C as a static helper of the wrapper: (its name, its source)."""
    helper = f"{k.name}_Plane"
    return helper, k.c_source.replace(f"void {k.name}(", f"static void {helper}(", 1)


def _par_name(k: BasicKernel) -> str:
    return k.name.replace("Ker", "KerPar", 1)


@cache
def par_set_bias(bias_dt: str, acc_dt: str) -> BasicKernel:
    """``Feat`` planes of ``W * H`` accumulators: plane ``f`` starts at ``Bias[f]`` (aligned as
    ``convolution.set_bias`` aligns it)."""
    plane = set_bias(bias_dt, acc_dt)
    helper, helper_src = _plane_c(plane)
    (to, _), w, h, (tb, _), _, nb = plane.args
    args = ((to, "Out"), w, h, ("int", "Feat"), (tb, "Bias"), nb)
    name = _par_name(plane)
    src = f"""\
{helper_src}
void {name}({c_signature(args)})
{{
    /* Plane f of the tile starts at the bias of its output feature, Bias[f]; each call
       shares the rows of its plane among the cores. */
    for (int f = 0; f < Feat; f++) {helper}(Out + f * W * H, W, H, Bias, f, NormBias);
}}"""

    def reference(Out, W, H, Feat, Bias, NormBias, *, core_id, core_count):
        for f in range(Feat):
            plane.reference(Out[f * W * H:], W, H, Bias, f, NormBias, core_id=core_id,
                            core_count=core_count)

    return BasicKernel(name, args, True, src, reference,
                       lambda W, H, Feat, **_: Work("conv_out", W * H * Feat, chunks=H))


@cache
def par_conv(in_dt: str, filter_dt: str, acc_dt: str, width: int) -> BasicKernel:
    """``OutFeat`` planes of ``Wc * Hc`` accumulators, each accumulating the ``InFeat`` input
    planes of the tile in order (``convolution.conv`` plane by plane): output plane ``o``
    and input plane ``i`` use filter ``Filter[o * TotalInFeat + i]``."""
    plane = conv(in_dt, filter_dt, acc_dt, width)
    helper, helper_src = _plane_c(plane)
    a = dict((n, (t, n)) for t, n in plane.args)
    args = (a["In"], a["W"], a["H"], ("int", "InFeat"), ("int", "OutFeat"), a["Filter"],
            ("int", "TotalInFeat"), a["Out"], a["Wc"], a["Hc"], a["Fx"], a["Fy"], a["Sx"],
            a["Sy"], a["Dx"], a["Dy"], a["PadL"], a["PadT"], a["Norm"])
    name = _par_name(plane)
    src = f"""\
{helper_src}
void {name}({c_signature(args)})
{{
    /* Output plane o accumulates input planes 0 .. InFeat-1 in order; each call shares the
       rows of its plane among the cores, so a core always touches the same rows. */
    for (int o = 0; o < OutFeat; o++)
        for (int i = 0; i < InFeat; i++)
            {helper}(In + i * W * H, W, H, Filter + (o * TotalInFeat + i) * Fx * Fy,
                     Out + o * Wc * Hc, Wc, Hc, Fx, Fy, Sx, Sy, Dx, Dy, PadL, PadT, Norm);
}}"""

    def reference(In, W, H, InFeat, OutFeat, Filter, TotalInFeat, Out, Wc, Hc, Fx, Fy, Sx, Sy,
                  Dx, Dy, PadL, PadT, Norm, *, core_id, core_count):
        for o in range(OutFeat):
            for i in range(InFeat):
                plane.reference(In[i * W * H:], W, H, Filter[(o * TotalInFeat + i) * Fx * Fy:],
                                Out[o * Wc * Hc:], Wc, Hc, Fx, Fy, Sx, Sy, Dx, Dy, PadL, PadT,
                                Norm, core_id=core_id, core_count=core_count)

    def cost(InFeat, OutFeat, **kw):
        w, n = plane.cost(**kw), InFeat * OutFeat
        return Work(w.family, n * w.ops, n * w.setup, chunks=w.chunks)

    return BasicKernel(name, args, True, src, reference, cost)


@cache
def par_pool_act(conv_dt: str, out_dt: str) -> BasicKernel:
    """``Feat`` planes of ``Wc * Hc`` convolution results to ``Feat`` planes of ``Wo * Ho``
    outputs, plane by plane as ``pooling.pool_act``."""
    plane = pool_act(conv_dt, out_dt)
    helper, helper_src = _plane_c(plane)
    a = dict((n, (t, n)) for t, n in plane.args)
    args = (a["In"], a["Wc"], a["Hc"], ("int", "Feat"), *plane.args[3:])
    name = _par_name(plane)
    src = f"""\
{helper_src}
void {name}({c_signature(args)})
{{
    /* Output plane f pools convolution plane f; each call shares its rows among the cores. */
    for (int f = 0; f < Feat; f++)
        {helper}(In + f * Wc * Hc, Wc, Hc, Out + f * Wo * Ho, Wo, Ho, Fx, Fy, Sx, Sy, Dx, Dy,
                 PadL, PadT, Oper, Norm, LB, UB);
}}"""

    def reference(In, Wc, Hc, Feat, Out, Wo, Ho, *rest, core_id, core_count):
        for f in range(Feat):
            plane.reference(In[f * Wc * Hc:], Wc, Hc, Out[f * Wo * Ho:], Wo, Ho, *rest,
                            core_id=core_id, core_count=core_count)

    def cost(Feat, **kw):
        w = plane.cost(**kw)
        return Work(w.family, Feat * w.ops, Feat * w.setup, chunks=w.chunks)

    return BasicKernel(name, args, True, src, reference, cost)


@cache
def par_mat_add(dt: str) -> BasicKernel:
    """``Feat`` planes of ``W * H``: ``Out = clip(In1 + In2, LB, UB)`` (fixed point, GAP's
    ``KerParMatAdd``: a saturating add), ``Out = In1 + In2`` in float32 (``LB``, ``UB``
    unused)."""
    flt = is_float(dt)
    name = f"KerParMatAdd_{suffix(dt)}"
    t = c_type(dt)
    args = ((f"const {t} * __restrict__", "In1"), (f"const {t} * __restrict__", "In2"),
            (f"{t} * __restrict__", "Out"), ("int", "W"), ("int", "H"), ("int", "Feat"),
            ("int", "LB"), ("int", "UB"))
    if flt:
        body, unused = "Out[i] = In1[i] + In2[i];", "    (void)LB;\n    (void)UB;\n"
    else:
        body = (f"int V = In1[i] + In2[i];\n"
                f"        Out[i] = ({t})(V < LB ? LB : V > UB ? UB : V);")
        unused = ""
    src = f"""\
void {name}({c_signature(args)})
{{
    /* Out = In1 + In2 element by element over the Feat planes, saturated to [LB, UB]; the
       elements are shared among the cores. */
{unused}    int N = Feat * W * H;
{share_rows("N")}
    for (int i = First; i < Last; i++) {{
        {body}
    }}
}}"""

    def reference(In1, In2, Out, W, H, Feat, LB, UB, *, core_id, core_count):
        n = Feat * W * H
        if core_id or n <= 0:
            return
        if flt:
            Out[:n] = In1[:n] + In2[:n]
        else:
            Out[:n] = np.clip(In1[:n].astype(np.int64) + In2[:n], LB, UB)

    return BasicKernel(name, args, True, src, reference,
                       lambda W, H, Feat, **_: Work("elementwise", W * H * Feat))


@cache
def planes(k: BasicKernel, strides: tuple[tuple[str, tuple[str, ...]], ...]) -> BasicKernel:
    """``k`` (a one-plane kernel whose cores share each plane's rows) over a tile of ``Feat``
    feature planes in one call, plane after plane: pointer argument ``p`` of ``strides``
    (``(p, (a, b, ...))``) moves ``a * b * ...`` elements (products of ``k``'s integer
    arguments) from one plane to the next, the other arguments stay. One call where the GAP
    AutoTiler's generators make one for a tile of features (a depthwise convolution, a
    pooling), the arithmetic ``k``'s plane by plane."""
    helper, helper_src = _plane_c(k)
    args = (*k.args, ("int", "Feat"))
    step = dict(strides)
    names = [n for _, n in k.args]
    moved = ", ".join(f"{n} + f * {' * '.join(step[n])}" if n in step else n for n in names)
    name = k.name.replace("Ker", "KerPlanes", 1)
    src = f"""\
{helper_src}
void {name}({c_signature(args)})
{{
    /* Each of the Feat planes of the tile in turn ({', '.join(step)} move a plane each);
       the cores share the rows of each plane. */
    for (int f = 0; f < Feat; f++)
        {helper}({moved});
}}"""

    def reference(*values, core_id, core_count):
        if k.planes_reference is not None and k.planes_reference[0] == strides:
            if not core_id:  # every plane at once, at array speed
                k.planes_reference[1](*values)
            return
        *vals, feat = values
        env = dict(zip(names, vals))
        for f in range(feat):
            moved = [v[f * math.prod(env[a] for a in step[n]):] if n in step else v
                     for n, v in zip(names, vals)]
            k.reference(*moved, core_id=core_id, core_count=core_count)

    def cost(Feat, **kw):
        w = k.cost(**kw)
        return Work(w.family, Feat * w.ops, Feat * w.setup, chunks=w.chunks)

    return BasicKernel(name, args, True, src, reference, cost)
