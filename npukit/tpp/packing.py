"""libxsmm's bit-level packing kinds (``samples/eltwise``): a float32 block split into
16-bit halves (UNARY_UNZIP) and two 16-bit blocks joined into one of 32-bit words
(BINARY_ZIP), and a float32 block decomposed into a sum of two or three bfloat16 blocks
(UNARY_DECOMP_FP32_TO_BF16X2 / X3). Each is one IR program calling one generated C
function; the numpy reference beside it moves the same bits.

Blocks are column-major ``m x n`` with a leading dimension, as in libxsmm; the 16-bit
blocks are bfloat16 arrays (libxsmm's type for them), their bits what matters.

>>> import numpy as np
>>> from npukit import tpp
>>> from npukit.dtypes import dtype
>>> x = np.array([1 + 2.0 ** -10, -3.0], np.float32)
>>> parts = np.zeros(4, dtype("bfloat16"))
>>> tpp.decompose_bf16(x, parts, m=2, n=1, parts=2).astype(np.float32).tolist()
[1.0, -3.0, 0.0009765625, 0.0]
"""

from __future__ import annotations

import numpy as np

from ..c.runtime import run_c
from ..dtypes import dtype as _dtype
from .errors import OperationNotSupportedError, WrongDimensionError, WrongDtypeError
from .gather import one_call
from .operation import as_flat

_LOOP = "    for (int64_t j = 0; j < {n}; ++j)\n        for (int64_t i = 0; i < {m}; ++i) {{"
_BITS = "union tpp_bits {{ float f; uint32_t u; }};"


def _span(m: int, n: int, ld: int) -> int:
    return (m - 1) + (n - 1) * ld + 1


class _Reference:
    """The kind's numpy reference on flat buffers (the simulator's call)."""

    def __init__(self, kind: str, m: int, n: int, ldi: int, ldo: int, extra: int):
        self.args = (kind, m, n, ldi, ldo, extra)

    def __call__(self, *bufs) -> None:
        kind, m, n, ldi, ldo, extra = self.args
        i, j = np.meshgrid(np.arange(m), np.arange(n), indexing="ij")
        src, dst = i + j * ldi, i + j * ldo
        if kind == "unzip":       # extra: the high halves' offset in 16-bit elements
            bits = bufs[0].view(np.uint32)[src]
            out = bufs[1].view(np.uint16)
            out[dst], out[dst + extra] = bits & 0xFFFF, bits >> 16
        elif kind == "zip":       # bufs: lo, hi, out; extra: hi's leading dimension
            lo = bufs[0].view(np.uint16)[src].astype(np.uint32)
            hi = bufs[1].view(np.uint16)[i + j * extra].astype(np.uint32)
            bufs[2].view(np.uint32)[dst] = lo | (hi << 16)
        else:                     # decompose into ``extra`` parts, each ldo * n apart
            rest = bufs[0][src].astype(np.float32)
            out = bufs[1]
            for p in range(extra):
                last = p == extra - 1
                part = rest.astype(_dtype("bfloat16")) if last else \
                    (rest.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
                out[dst + p * ldo * n] = part if last else part.astype(_dtype("bfloat16"))
                rest = rest - part.astype(np.float32)


def _c(kind: str, name: str, m: int, n: int, ldi: int, ldo: int, extra: int) -> str:
    loop = _LOOP.format(m=m, n=n)
    at_i, at_o = f"i + j * {ldi}", f"i + j * {ldo}"
    if kind == "unzip":
        head = f"static void {name}(const float *in, npk_bfloat16 *out)"
        body = [f"            union tpp_bits v; v.f = in[{at_i}];",
                f"            out[{at_o}] = (npk_bfloat16)(v.u & 0xFFFFu);",
                f"            out[{at_o} + {extra}] = (npk_bfloat16)(v.u >> 16);"]
    elif kind == "zip":
        head = (f"static void {name}(const npk_bfloat16 *lo, const npk_bfloat16 *hi, "
                "float *out)")
        body = [f"            union tpp_bits v; v.u = (uint32_t)lo[{at_i}] | "
                f"((uint32_t)hi[i + j * {extra}] << 16);", f"            out[{at_o}] = v.f;"]
    else:
        head = f"static void {name}(const float *in, npk_bfloat16 *out)"
        body = [f"            union tpp_bits v; float rest = in[{at_i}];"]
        for p in range(extra):
            dst = f"out[{at_o} + {p * ldo * n}]"
            if p < extra - 1:   # the high bits, truncated; the rest carries the remainder
                body += ["            v.f = rest; v.u &= 0xFFFF0000u;",
                         f"            {dst} = (npk_bfloat16)(v.u >> 16); rest = rest - v.f;"]
            else:               # the last part rounded to nearest even
                body += ["            v.f = rest;",
                         "            v.u = (rest != rest) ? (v.u | 0x00400000u) : "
                         "(v.u + 0x7FFFu + ((v.u >> 16) & 1u));",
                         f"            {dst} = (npk_bfloat16)(v.u >> 16);"]
    return "\n".join([_BITS.format(), f"/* libxsmm {kind}: {m} x {n} */", head, "{", loop,
                      *body, "        }", "}", ""])


def _run(kind: str, arrays: list[tuple[str, np.ndarray, str, int, str]], m: int, n: int,
         ldi: int, ldo: int, extra: int, backend: str, target: str):
    """``arrays``: (parameter, array, dtype it must have, elements it spans, role)."""
    if min(m, n) < 1 or ldi < m or ldo < m:
        raise WrongDimensionError(f"{kind}: block {m} x {n}, ldi = {ldi}, ldo = {ldo}; the "
                                  "block at least 1 x 1, each ld at least m")
    name = f"tpp_{kind}_{m}x{n}"
    for pname, a, dt, _, _ in arrays:
        if not isinstance(a, np.ndarray) or a.dtype != _dtype(dt):
            raise WrongDtypeError(f"{kind}: {pname} must be a {dt} numpy array, got "
                                  f"{getattr(a, 'dtype', type(a).__name__)}")
    prog = one_call(name, target, [(p, _dtype(dt), size, role) for p, _, dt, size, role in
                                   arrays], _c(kind, name, m, n, ldi, ldo, extra),
                    _Reference(kind, m, n, ldi, ldo, extra), m * n, f"libxsmm {kind} {m} x {n}")
    flats = {p: as_flat(a, p, _dtype(dt), size, write=role != "in")
             for p, a, dt, size, role in arrays}
    if backend == "c":
        run_c(prog, flats)
        return arrays[-1][1]
    return prog.run(backend, **flats)


def unzip(x: np.ndarray, out: np.ndarray, *, m: int, n: int, ldi: int | None = None,
          ldo: int | None = None, offset: int | None = None, backend: str = "c",
          target: str = "torq"):
    """libxsmm's UNARY_UNZIP: the low 16 bits of each float32 of ``x`` to ``out[i + j *
    ldo]``, the high 16 bits ``offset`` elements further (default ``ldo * n``)."""
    ldi, ldo = ldi or m, ldo or m
    offset = ldo * n if offset is None else offset
    if offset < 0:
        raise WrongDimensionError(f"unzip: offset = {offset} below 0")
    return _run("unzip", [("in", x, "float32", _span(m, n, ldi), "in"),
                          ("out", out, "bfloat16", _span(m, n, ldo) + offset, "inout")],
                m, n, ldi, ldo, offset, backend, target)


def zip_halves(lo: np.ndarray, hi: np.ndarray, out: np.ndarray, *, m: int, n: int,
               ldi0: int | None = None, ldi1: int | None = None, ldo: int | None = None,
               backend: str = "c", target: str = "torq"):
    """libxsmm's BINARY_ZIP: float32 words whose low 16 bits come from ``lo`` and high 16
    bits from ``hi``."""
    ldi0, ldi1, ldo = ldi0 or m, ldi1 or m, ldo or m
    if ldi1 < m:
        raise WrongDimensionError(f"zip: ldi1 = {ldi1} below m = {m}")
    return _run("zip", [("lo", lo, "bfloat16", _span(m, n, ldi0), "in"),
                        ("hi", hi, "bfloat16", _span(m, n, ldi1), "in"),
                        ("out", out, "float32", _span(m, n, ldo), "inout")],
                m, n, ldi0, ldo, ldi1, backend, target)


def decompose_bf16(x: np.ndarray, out: np.ndarray, *, m: int, n: int, parts: int = 2,
                   ldi: int | None = None, ldo: int | None = None, backend: str = "c",
                   target: str = "torq"):
    """libxsmm's UNARY_DECOMP_FP32_TO_BF16X2 (``parts=2``) and _X3: ``x`` as a sum of
    bfloat16 parts, part ``p`` at ``out[i + j * ldo + p * ldo * n]``: each part but the last
    the remainder's high 16 bits (truncated), the last the remainder rounded to nearest
    even."""
    if parts not in (2, 3):
        raise OperationNotSupportedError(f"decompose_bf16: parts = {parts}; libxsmm splits "
                                         "into 2 or 3 bfloat16 parts")
    ldi, ldo = ldi or m, ldo or m
    return _run("decompose", [("in", x, "float32", _span(m, n, ldi), "in"),
                              ("out", out, "bfloat16", _span(m, n, ldo) + (parts - 1) * ldo * n,
                               "inout")], m, n, ldi, ldo, parts, backend, target)


__all__ = ["decompose_bf16", "unzip", "zip_halves"]
