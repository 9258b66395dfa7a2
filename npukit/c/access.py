"""Where a view's elements live, as C index expressions.

A view's element ``k`` (row-major) sits at ``base + Σ idx_d·stride_d``; ``coalesced`` merges
dims that step evenly (``npukit.layout.coalesce``), so most views become one run
``base + k·stride`` and the emitted loops stay simple enough for gcc to vectorise.

>>> from npukit.layout import Layout
>>> coalesced(Layout((2, 5, 7), "int8", (100, 10, 1)))
((2, 100), (5, 10), (7, 1))
>>> coalesced(Layout((2, 5, 7), "int8"))
((70, 1),)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .. import ir
from ..layout import Layout, coalesce
from .arith import Helpers


def key(buf: ir.Buffer) -> tuple[str, bool]:
    """What tells buffers apart: the name, and whether it is a parameter (the AutoTiler's
    L1 copy of tensor ``In1`` is also called ``In1``)."""
    return buf.name, buf.role in ("in", "out", "inout")


def coalesced(lay: Layout) -> tuple[tuple[int, int], ...]:
    """(count, stride) per dim of ``npukit.layout.coalesce`` of ``lay``, outermost first."""
    return tuple(zip(*coalesce(lay.shape, lay.strides)))


def injective(dims: tuple[tuple[int, int], ...]) -> bool:
    """True when no two indices share an element (sufficient test: sorted by stride, each
    stride clears the extent of the dims inside it)."""
    extent = 0
    for n, s in sorted(dims, key=lambda d: d[1]):
        if s <= extent:
            return False
        extent += (n - 1) * s
    return True


def dense(dims: tuple[tuple[int, int], ...]) -> bool:
    """True when the indices fill ``0 .. Π n_d - 1`` exactly once, in any order: sorted by
    stride, each stride is the product of the counts inside it (a copy between two views of
    the same dense dims moves one block, whatever order it visits it in)."""
    extent = 1
    for n, s in sorted(dims, key=lambda d: d[1]):
        if s != extent:
            return False
        extent *= n
    return True


@dataclass(frozen=True)
class Access:
    """The elements of a view as ``ptr[base + index(k)]``; ``base`` is affine in the loop
    variables and counts elements from ``ptr``."""

    ptr: str
    base: ir.Affine
    dims: tuple[tuple[int, int], ...]

    @property
    def run(self) -> int | None:
        """The stride between consecutive elements when they form one evenly spaced run."""
        if not self.dims:
            return 1
        return self.dims[0][1] if len(self.dims) == 1 else None


def access(view: ir.View, ptr: str, origin: int = 0) -> Access:
    """``view`` addressed from ``ptr``, which points at element ``origin`` of its buffer."""
    base = view.offset + (view.layout.offset - origin)
    return Access(ptr, base, coalesced(view.layout))


# Object-like macros of the headers the generated code includes (<stdint.h>, <string.h>,
# <math.h>) and of its own prelude: a local of such a name would be macro-expanded.
_MACROS = re.compile(r"[A-Z0-9_]*_(MIN|MAX|WIDTH|C)|NULL|NAN|INFINITY|HUGE_VAL[FL]?|FP_\w+|"
                     r"MATH_ERR\w+|math_errhandling|NPK_\w+")


def safe_name(name: str, prefix_ok: bool = False) -> str:
    """``name`` (any text) as a C identifier: each character outside ASCII letters, digits
    and ``_`` becomes ``_``; names the compiler or the headers own (``__x``, ``_X``, macros
    such as ``INT8_MAX``) get a ``t_`` prefix, and so do ``npk_`` names unless they are the
    back end's own (``prefix_ok``).

    >>> safe_name("x; system(1)"), safe_name("INT8_MAX"), safe_name("2d")
    ('x__system_1_', 't_INT8_MAX', 't_2d')
    """
    base = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not base or base[0].isdigit() or (base.startswith("npk_") and not prefix_ok) or \
            re.match(r"_[_A-Z]", base) or _MACROS.fullmatch(base):
        base = "t_" + base
    return base


class Names:
    """C names of loop variables (unique even when the IR reuses a name in sibling loops)."""

    def __init__(self, taken: set[str]):
        self.taken = set(taken)
        self.of: dict[ir.Var, str] = {}

    def bind(self, var: ir.Var) -> str:
        base = safe_name(var.name)
        name, k = base, 1
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        self.of[var] = name
        return name

    def release(self, var: ir.Var) -> None:
        self.taken.discard(self.of.pop(var))


def simplify(a: ir.Affine) -> ir.Affine:
    """``a`` with its div/mod atoms folded where their value is plain: ``x floordiv 1 = x``,
    ``x mod 1 = 0``, an atom of a constant is that constant, ``x floordiv m`` is constant
    when x stays inside one multiple of m, ``x mod m = x`` when 0 <= x < m.

    >>> i = ir.Var("i", 4)
    >>> simplify((i + 1) // 1 * 10 + (i + 1) % 2 * 3 + (i + 1) // 8)
    3*(i + 1) mod 2 + 10*i + 10
    """
    out = ir.Affine(a.const)
    for atom, c in a.terms:
        if isinstance(atom, ir.Var):
            out = out + atom * c
            continue
        e = simplify(atom.expr)
        lo, hi = e.bounds()
        if isinstance(atom, ir.Clamp):  # a bound the value never crosses is dropped
            below = atom.hi is not None and lo >= atom.hi
            above = atom.lo is not None and hi <= atom.lo
            a_lo = None if atom.lo is None or lo >= atom.lo else atom.lo
            a_hi = None if atom.hi is None or hi <= atom.hi else atom.hi
            v = ir.affine(atom.hi) if below else ir.affine(atom.lo) if above else \
                e if a_lo is None and a_hi is None else ir.affine(ir.Clamp(e, a_lo, a_hi))
        elif isinstance(atom, ir.FloorDiv):
            v = e if atom.m == 1 else ir.affine(lo // atom.m) if lo // atom.m == hi // atom.m \
                else e // atom.m
        else:
            v = ir.Affine() if atom.m == 1 else e if 0 <= lo and hi < atom.m else \
                ir.affine(lo % atom.m) if lo == hi else e % atom.m
        out = out + v * c
    return out


def affine_c(a: ir.Affine, names: Names, h: Helpers) -> str:
    """``a`` as a C expression, constants spelled out: ``35 * i0 + 7 * i1 + 3``. A div/mod
    atom is C's ``/`` or ``%`` when its operand cannot be negative, else a helper that
    rounds towards -inf as Python does: ``2000 * ((Tile + 1) % 2)``."""
    a = simplify(a)
    parts = []
    for atom, c in a.terms:
        if isinstance(atom, ir.Var):
            x = names.of[atom]
        elif isinstance(atom, ir.Clamp):
            e = affine_c(atom.expr, names, h)
            x = f"{h.use('npk_max64')}({e}, {atom.lo})" if atom.hi is None else \
                f"{h.use('npk_min64')}({e}, {atom.hi})" if atom.lo is None else \
                f"{h.use('npk_clamp64')}({e}, {atom.lo}, {atom.hi})"
        else:
            e = affine_c(atom.expr, names, h)
            div = isinstance(atom, ir.FloorDiv)
            if atom.expr.bounds()[0] >= 0:
                x = f"{_p(e)} {'/' if div else '%'} {atom.m}"
                x = x if c == 1 else f"({x})"
            else:
                x = f"{h.use('npk_floordiv' if div else 'npk_mod')}({e}, {atom.m})"
        parts.append(x if c == 1 else f"{c} * {x}")
    if a.const > 0 and parts and parts[0].startswith("-"):  # 1000 - 16 * i0
        return join_sum([str(a.const)] + parts)
    return join_sum(parts + [str(a.const)])


def join_sum(terms: list[str]) -> str:
    """``a + b - 3`` from terms, dropping zeros; "0" when nothing is left."""
    out = ""
    for t in terms:
        if t in ("0", ""):
            continue
        if t.startswith("-") and out:
            out += f" - {t[1:]}"
        else:
            out += f" + {t}" if out else t
    return out or "0"


def _p(x: str) -> str:
    """``x`` parenthesised unless it is a name or a number."""
    return x if x.isidentifier() or x.lstrip("-").isdigit() else f"({x})"


def scaled(x: str, s: int) -> str:
    """``s * x`` as C text."""
    return "0" if s == 0 else x if s == 1 else f"{s} * {_p(x)}"


def index(acc: Access, k: str, names: Names, h: Helpers) -> str:
    """C index of element ``k`` (a C expression, row-major) of ``acc``'s view:
    ``base + (k / inner_d) % n_d * stride_d`` summed over its dims."""
    terms = [affine_c(acc.base, names, h)]
    inner = math.prod(n for n, _ in acc.dims)
    for d, (n, s) in enumerate(acc.dims):
        inner //= n
        digit = k if inner == 1 else f"{_p(k)} / {inner}"
        if d > 0:
            digit = f"{_p(digit)} % {n}"
        terms.append(scaled(digit, s))
    return join_sum(terms)


def element(acc: Access, k: str, names: Names, h: Helpers) -> str:
    """``ptr[index]``: element ``k`` of ``acc``'s view as an lvalue."""
    return f"{acc.ptr}[{index(acc, k, names, h)}]"
