"""``@kernel`` and ``build``: a kernel function, specs and attributes to an IR program."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace

from .. import ir
from ..errors import KernelError, ShapeError
from ..layout import Layout
from ..machine import Target
from ..machine import target as _target
from .builder import Slice
from .values import LData


def _source(fn: Callable) -> str:
    """The kernel's source text, or a note saying why it is missing."""
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):  # no file behind it: a REPL, stdin, exec, a builtin
        return (f"# the source of kernel {getattr(fn, '__name__', fn)!r} is not available "
                f"(defined in an interactive session, read from stdin or made by exec)\n")


@dataclass(frozen=True)
class Kernel:
    """A kernel function: ``fn(s, *tensors, **attrs)``; see ``npukit.build``."""

    fn: Callable
    name: str
    tensors: tuple[str, ...]
    attrs: tuple[str, ...]
    optional: tuple[str, ...] = ()  # attributes with a default

    def __call__(self, *a, **k):
        return self.fn(*a, **k)


def kernel(fn: Callable) -> Kernel:
    """Mark ``fn(s, tensor, ..., *, attr, ...)`` as an EasyKernel kernel."""
    params = list(inspect.signature(fn).parameters.values())
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if not params or params[0].kind not in positional:
        raise KernelError(f"kernel {fn.__name__}: first parameter must be the Slice")
    tensors = tuple(p.name for p in params[1:] if p.kind == p.POSITIONAL_OR_KEYWORD)
    attrs = tuple(p.name for p in params[1:] if p.kind == p.KEYWORD_ONLY)
    optional = tuple(p.name for p in params[1:] if p.kind == p.KEYWORD_ONLY
                     and p.default is not p.empty)
    return Kernel(fn, fn.__name__, tensors, attrs, optional)


def build(k: Kernel, target: str | Target | None = None, /, **specs_and_attrs) -> ir.Program:
    """Record kernel ``k`` for ``target`` (default ``"torq"``) with a ``spec`` per tensor and
    a value per attribute, check it, and return the ``Program``::

        prog = nk.build(mul, target="torq", input1=nk.spec((1000,), "int8"), ...)

    The kernel and the target are positional-only, so a kernel parameter may take any name,
    ``k`` and ``target`` included. When the kernel has a parameter named ``target``,
    ``target=`` goes to the kernel and the build target is given positionally::

        prog = nk.build(kern, "torq", x=nk.spec((64,), "int8"), target=nk.spec((64,), "int8"))

    (``KernelError`` when that keyword holds a target name and no target is given
    positionally: which one was meant is ambiguous.)"""
    from ..passes import check

    if not isinstance(k, Kernel):
        raise KernelError(f"build: {k!r} is not a kernel; decorate it with @npukit.kernel")
    if "target" not in k.tensors + k.attrs and "target" in specs_and_attrs:
        if target is not None:
            raise KernelError(f"build {k.name}: the target is given twice, {target!r} and "
                              f"target={specs_and_attrs['target']!r}")
        target = specs_and_attrs.pop("target")
    elif target is None and isinstance(specs_and_attrs.get("target"), (str, Target)):
        raise KernelError(f"build {k.name}: the kernel has a parameter named 'target', so "
                          f"target={specs_and_attrs['target']!r} is that parameter; give the "
                          f"build target positionally: npukit.build({k.name}, \"torq\", "
                          f"target=...)")
    tgt = _target("torq" if target is None else target)
    missing = [n for n in k.tensors + k.attrs if n not in specs_and_attrs and n not in k.optional]
    extra = [n for n in specs_and_attrs if n not in k.tensors + k.attrs]
    if missing or extra:
        raise KernelError(f"build {k.name}: missing {missing}, unexpected {extra}")
    s = Slice(tgt)
    datas = []
    for name in k.tensors:
        lay = specs_and_attrs[name]
        if not isinstance(lay, Layout):
            raise KernelError(f"build {k.name}: tensor {name!r} needs npukit.spec(...), "
                              f"got {lay!r}")
        if 0 in lay.shape:
            raise ShapeError(f"build {k.name}: tensor {name!r} has no elements (dim "
                             f"{lay.shape.index(0)} of shape {lay.shape} is 0); a kernel needs "
                             f"at least one element in every tensor")
        buf = ir.Buffer(name, tgt.home, lay.dtype, lay.footprint()[1], role="in")
        datas.append(LData(buf, Layout(lay.shape, lay.dtype, lay.strides, lay.offset),
                           ir.Affine(), None, name))
    attrs = {n: specs_and_attrs[n] for n in k.attrs if n in specs_and_attrs}
    k.fn(s, *datas, **attrs)
    body = s.freeze()
    params = []
    for d in datas:
        written, read = d.buffer.name in s.writes, d.buffer.name in s.reads
        partial = getattr(specs_and_attrs[d.name], "partial", False)
        if partial and not written:
            raise KernelError(f"build {k.name}: tensor {d.name!r} is only read; partial=True "
                              f"is for outputs the kernel fills in part")
        # A partial output keeps what the kernel does not write: it is read, in effect.
        role = ("inout" if read or partial else "out") if written else "in"
        params.append((replace(d.buffer, role=role), specs_and_attrs[d.name]))
    # views point at the parameter buffers with their final roles
    final = {b.name: b for b, _ in params}
    body = ir.map_buffers(body, lambda b: final[b.name] if b.name in final and
                          b.role != "internal" else b)
    prog = ir.Program(k.name, tgt, tuple(params), tuple(s.buffers), body,
                      tuple(sorted(attrs.items())), _source(k.fn))
    return check(prog)
