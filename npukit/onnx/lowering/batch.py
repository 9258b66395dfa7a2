"""Batch > 1 for the spatial layers, which compute one image: the input cut into its images
(a ``pad_axis`` crop each), the layer lowered once per image, the outputs put together (one
``concat``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...tiler import layer_generators as G
from ..reader import Node
from .context import Lowering

Handler = Callable[[Lowering, Node], None]


def per_image(handler: Handler) -> Handler:
    """``handler`` for inputs of any batch: itself for batch 1, else once per image."""

    def lower(ctx: Lowering, n: Node) -> None:
        x, out = n.inputs[0], n.outputs[0]
        s, so = ctx.shape(x), ctx.info(out).shape
        if len(s) < 3 or s[0] == 1 or len([o for o in n.outputs if o]) > 1:
            return handler(ctx, n)  # (a second output, MaxPool's Indices, is refused there)
        batch, dt = s[0], ctx.dtype(x)
        size, size_out = int(np.prod(s[1:])), int(np.prod(so[1:]))
        info = type(ctx.info(out))
        src, parts = ctx.tensor(x), []
        for i in range(batch):
            img, img_out = f"{x}__image{i}_{n.name}", f"{out}__image{i}"
            ctx.net.info[img] = info((1, *s[1:]), dt)
            ctx.net.info[img_out] = info((1, *so[1:]), ctx.info(out).dtype)
            name = ctx.layer("Slice")
            G.pad_axis(ctx.m, name, dt=dt, Outer=1, D=batch, Inner=size, PadBegin=-i,
                       PadEnd=i + 1 - batch)
            ctx.of[img] = ctx.local(img, dt, size)
            ctx.add(name, "Slice", [], f"image {i} of {batch} of {x!r} for {n.name}", [src],
                    [ctx.of[img]])
            handler(ctx, Node(n.op, n.name, [img, *n.inputs[1:]], [img_out], n.attrs,
                              n.domain))
            parts.append(ctx.of[img_out])
        name = ctx.layer("Concat")
        G.concat(ctx.m, name, dt=ctx.info(out).dtype, Outer=1, Ds=(1,) * batch,
                 Inner=size_out)
        ctx.add(name, n.op, [n], f"{batch} images of {n.name} together", parts,
                [ctx.output(out)])

    return lower
