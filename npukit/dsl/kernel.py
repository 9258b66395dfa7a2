"""``@S.prim_func`` and ``S.build``: a Compass DSL kernel traced into a ``Program``."""

from __future__ import annotations

import builtins
import inspect
import sys
import textwrap
import types
from dataclasses import replace

import numpy as np

from .. import ir
from ..errors import DTypeError, KernelError, NpukitError
from ..layout import Layout
from ..machine import Target
from ..machine import target as _target
from . import trace
from .branches import (
    RuntimeIf,
    RuntimeWhile,
    branching_code,
    closure_for,
    if_exp,
    logical_and,
    logical_not,
    logical_or,
)
from .memory import per_tec_copies
from .ops import cast
from .trace import Tracer, error_site
from .types import DType, PtrType, is_type_name, is_vector_name
from .values import (
    Index,
    ParamInt,
    ParamScalar,
    Ptr,
    Scalar,
    TecCondition,
    Vec,
    _current,
    as_affine,
)


class PrimFunc:
    """A Compass DSL function: a kernel (built with ``S.build``) or, called from one, a
    device subroutine (inlined; its arguments and result checked against its
    annotations)."""

    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
        self.signature = _signature(fn)
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __repr__(self) -> str:
        return f"<Compass DSL prim_func {self.name}>"

    def __call__(self, *args, **kwargs):
        if not _current:  # called on the host: run it, as the Compass DSL's PySim does
            prog, arrays = self.specialise("compass", args, kwargs)
            prog.run("sim", **arrays)
            return None
        tr = trace.tracer()
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise KernelError(f"call of {self.name}: {exc}") from exc
        values = {name: _argument(self.name, name, self.signature.parameters[name].annotation,
                                  value) for name, value in bound.arguments.items()}
        tr.enter(self.fn)
        out = _traced(self.fn)(**values)
        ann = self.signature.return_annotation
        if isinstance(ann, DType) and ann.is_vector and \
                not (isinstance(out, Vec) and out.type == ann):
            got = out.type if isinstance(out, Vec) else trace._describe(out)
            raise DTypeError(f"{self.name} returns {got} but is annotated -> {ann}")
        if isinstance(ann, DType) and ann.is_scalar and isinstance(out, (Scalar, Vec)) and \
                out.type.element_of != ann:
            out = cast(out, ann)  # the Compass DSL converts a value returned to its type
        return out

    def host_program(self, target) -> ir.Program:
        """The program of a kernel without scalar parameters as host calls run it: every
        pointer raw memory, its extent what the kernel touches."""
        return _build(self, target, {}, partial=True)

    def specialise(self, target, args: tuple, kwargs: dict) -> tuple[ir.Program, dict]:
        """The program for a host call's arguments (numpy arrays for the pointers, numbers
        for the scalars) and the flat arrays to run it with: built once per argument
        lengths, dtypes and scalar values (npukit specialises a kernel for its scalars)."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise KernelError(f"call of {self.name}: {exc}") from exc
        arrays, key = {}, []
        for name, value in bound.arguments.items():
            ann = self.signature.parameters[name].annotation
            if isinstance(ann, PtrType):
                arrays[name] = _host_array(self.name, name, ann, value)
                key.append((name, arrays[name].size))
            elif isinstance(value, np.ndarray) and value.ndim == 0 or \
                    isinstance(value, np.generic):
                key.append((name, value.item()))
            else:
                key.append((name, value))
        cache = self.__dict__.setdefault("_programs", {})
        tkey = (target if isinstance(target, str) else target.name, tuple(key))
        if tkey not in cache:
            cache[tkey] = _build(self, target, dict(key), partial=True)
        return cache[tkey], arrays


def _host_array(fn: str, name: str, ann: PtrType, value) -> np.ndarray:
    """The numpy array a host call passes for pointer ``name``, as a flat view (so the
    kernel's writes land in it)."""
    if not isinstance(value, np.ndarray):
        raise DTypeError(f"call of {fn}: argument {name!r} ({ann}) takes a numpy array, got "
                         f"{type(value).__name__}")
    if value.dtype != ann.dtype.elem:
        raise DTypeError(f"call of {fn}: argument {name!r} is {ann}, the array holds "
                         f"{value.dtype.name}")
    if not value.flags.c_contiguous:
        raise DTypeError(f"call of {fn}: argument {name!r}: the array must be C-contiguous "
                         f"(the kernel writes through its flat view)")
    return value.reshape(-1)


def _signature(fn) -> inspect.Signature:
    """``fn``'s signature with annotations written as text (``from __future__ import
    annotations``) evaluated in its module; a type such as ``S.fp16x16`` is text already."""
    sig = inspect.signature(fn)

    def ev(a):
        if type(a) is not str:
            return a
        if is_type_name(a):  # x: "fp16x16"
            return DType(a)
        try:
            return eval(a, fn.__globals__)  # noqa: S307 - the kernel author's own annotation
        except Exception as exc:
            raise KernelError(f"{fn.__name__}: annotation {a!r} does not evaluate: "
                              f"{type(exc).__name__}: {exc}") from exc

    params = [p.replace(annotation=ev(p.annotation)) for p in sig.parameters.values()]
    return sig.replace(parameters=params, return_annotation=ev(sig.return_annotation))


def prim_func(fn=None, *, is_entry: bool | None = None):
    """Mark ``fn`` as a Compass DSL function (a kernel or a device subroutine); also
    written ``@S.prim_func(is_entry=True)`` (npukit builds whichever function it is given,
    so the flag changes nothing)."""
    if fn is None:
        return prim_func
    if isinstance(fn, PrimFunc):
        return fn
    if not inspect.isfunction(fn):
        raise KernelError(f"S.prim_func decorates a Python function, got {fn!r}")
    return PrimFunc(fn)


def _argument(fn: str, name: str, ann, value):
    """``value`` checked against (and converted to) annotation ``ann``."""
    where = f"{fn}: argument {name!r}"
    if isinstance(ann, PtrType):
        if not isinstance(value, Ptr) or value.type != ann.dtype or value.scope != ann.scope:
            got = f"a {value.scope} {value.type}* pointer" if isinstance(value, Ptr) else \
                trace._describe(value)
            raise DTypeError(f"{where} expects {ann}, got {got}")
        return value
    if isinstance(ann, DType):
        if ann.is_vector:
            if isinstance(value, Vec) and value.type != ann:
                raise DTypeError(f"{where}: vector type mismatch: expects {ann}, got "
                                 f"{value.type}")
            return value if isinstance(value, Vec) else trace.tracer().coerce(value, ann, where)
        if isinstance(value, Vec) and value.type.lanes == 1:  # a run-time scalar (a[0] + 1):
            return value if value.type == ann else cast(value, ann)  # converted, as C does
        if ann == "int32" and not isinstance(value, Scalar):
            return trace.index(as_affine(value, where))
        if isinstance(value, Scalar) and value.type != ann:
            raise DTypeError(f"{where}: type mismatch: expects {ann}, got {value.type}")
        if isinstance(value, (Vec, Ptr, Index)):
            raise DTypeError(f"{where} expects a {ann} scalar, got {trace._describe(value)}")
        return value if isinstance(value, Scalar) else Scalar(ann, value)
    return value


def _device_range(*args):
    """``range`` inside a kernel: a device loop (see ``npukit.dsl.trace``)."""
    if not _current or not all(isinstance(a, (int, np.integer, Index, Scalar)) for a in args):
        return builtins.range(*args)
    if not 1 <= len(args) <= 3:
        raise KernelError(f"range takes 1 to 3 arguments, got {len(args)}")
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
    step_a = as_affine(step, "range step")
    if step_a.terms or step_a.const <= 0:
        raise KernelError(f"range step {step}: a device loop steps by a positive constant")
    tr = trace.tracer()
    frame = sys._getframe(2 if sys._getframe(1).f_code is vectorized.__code__ else 1)
    return tr.loop(frame, start, stop, step_a.const, tr.label())


def vectorized(start, stop=None):
    """``for i in S.vectorized(a, b)``: a loop the public DSL's compiler turns into vector
    code; npukit runs it as ``range(a, b)`` (a device loop)."""
    return _device_range(start) if stop is None else _device_range(start, stop)


def tec_range(start, stop=None):
    """``for t in S.tec_range(a, b)``: the body runs on the TECs whose local id ``t`` is in
    ``a..b-1``, once each (``S.tec_range(n)``: ids ``0..n-1``)."""
    start, stop = (0, start) if stop is None else (start, stop)
    tr = trace.tracer()
    if tr.fixed_id is not None:  # traced for one TEC: it runs the body or not
        return [tr.fixed_id] if start <= tr.fixed_id < stop else []
    tid = tr.local_id()
    first = trace.imax(tid, start)  # a loop of one iteration if start <= tid < stop, else none
    return _gate(tr.loop(sys._getframe(1), first, trace.imin(stop, tid + 1), 1, tr.label()),
                 first)


def _gate(loop, value):
    """The iterations of device loop ``loop`` (at most one), each giving ``value``."""
    for _ in loop:
        yield value


def _traced(fn):
    """``fn`` with the DSL's ``range``, its ``if`` statements able to branch on run-time
    values (``npukit.dsl.branches``) and, for its module's strings that name vector types
    (``vdtype = "float16x16"``), the types themselves (so ``vdtype.lanes`` works)."""
    g = dict(fn.__globals__)
    for k, v in g.items():
        if is_vector_name(v):
            g[k] = DType(v)
    g["range"] = _device_range
    g["__npk_if__"], g["__npk_ifexp__"], g["__npk_while__"] = RuntimeIf, if_exp, RuntimeWhile
    g["__npk_and__"], g["__npk_or__"], g["__npk_not__"] = logical_and, logical_or, logical_not
    code = branching_code(fn)
    trace.tracer().code.add(code)  # its lines label what it records
    out = types.FunctionType(code, g, fn.__name__, fn.__defaults__, closure_for(code, fn))
    out.__kwdefaults__ = fn.__kwdefaults__
    return out


def build(kernel: PrimFunc, target: str | Target = "compass", **kwargs) -> ir.Program:
    """Trace ``kernel`` for ``target`` into a checked ``Program``.

    Scalar arguments (``n: S.i32``) are given as keywords: the program is specialised for
    them. A pointer argument's extent is what the kernel touches (its highest element + 1)
    unless a keyword gives it (a length or ``npukit.spec``); accesses are then checked
    against it.

    >>> import npukit.dsl as S
    >>> @S.prim_func
    ... def double(a: S.ptr("fp16x16", "global"), b: S.ptr("fp16x16", "global")):
    ...     tid = S.get_local_id()
    ...     b[tid] = a[tid] * 2
    >>> prog = S.build(double, target="compass")
    >>> [(buf.name, spec.shape) for buf, spec in prog.params]
    [('a', (64,)), ('b', (64,))]
    """
    return _build(kernel, target, kwargs)


def _build(kernel: PrimFunc, target, kwargs: dict, partial: bool = False) -> ir.Program:
    """``build``; with ``partial`` every pointer is raw memory, as on a host call: what
    the kernel leaves unwritten keeps the array's contents (as ``npukit.spec(...,
    partial=True)`` gives one pointer)."""
    if not isinstance(kernel, PrimFunc):
        raise KernelError(f"build: {kernel!r} is not a Compass DSL kernel; decorate it with "
                          f"@npukit.dsl.prim_func")
    tgt = _target(target)
    params = kernel.signature.parameters
    extra = [k for k in kwargs if k not in params]
    if extra:
        raise KernelError(f"build {kernel.name}: unexpected arguments {extra}; the kernel "
                          f"takes {list(params)}")
    try:
        tr, scalars = _trace(kernel, tgt, kwargs, per_tec=False)
    except TecCondition:
        tr, scalars = _trace(kernel, tgt, kwargs, per_tec=True)
    if tr.broken is not None:
        raise KernelError(f"`{tr.broken}`: the loop was left early (break, return or an "
                          f"exception): a device loop runs every iteration")
    return _assemble(tr, kernel, scalars, partial)


def _trace(kernel: PrimFunc, tgt: Target, kwargs: dict, per_tec: bool):
    """The kernel's body traced inside the core loop (``per_tec``: once per TEC, with the
    local id a constant, each trace in a loop that runs once on its TEC and not at all on
    the others, so that conditions on the local id are decided at build time)."""
    tr = Tracer(tgt, kernel.name)
    args, scalars = {}, {}
    for name, p in kernel.signature.parameters.items():
        args[name] = _parameter(tr, kernel.name, name, p.annotation, kwargs, scalars)
    _current.append(tr)
    try:
        tr.core_var = ir.Var(tr.fresh("tec"), tgt.cores)
        tr.open(tr.core_var)
        tr.enter(kernel.fn)
        for k in range(tgt.cores) if per_tec else (None,):
            if k is not None:
                tr.fixed_id = k
                tec = trace.index(ir.affine(tr.core_var))  # runs once where tec == k:
                once = trace.imin(-tec + (k + 1), tec - (k - 1))  # 1 there, <= 0 elsewhere
                tr.open(ir.Var(tr.fresh(f"on_tec{k}"), 1, as_affine(once)))
            _traced(kernel.fn)(**args)
            if k is not None:
                tr.close(f"TEC {k} (its conditions on the local id decided)")
        tr.close(f"{kernel.name}: each of the {tgt.cores} TECs runs the kernel with its local "
                 f"id", cores=True)
    except (NpukitError, TecCondition):
        raise
    except Exception as exc:  # the kernel's own Python failed: say where
        where = error_site(exc, tr.code)
        raise KernelError(f"building {kernel.name}: {type(exc).__name__}: {exc}"
                          f"{f' (at {where})' if where else ''}") from exc
    finally:
        _current.pop()
    return tr, scalars


def _parameter(tr: Tracer, kname: str, name: str, ann, kwargs: dict, scalars: dict):
    """The stand-in value of kernel parameter ``name``."""
    if isinstance(ann, PtrType):
        if ann.scope != "global":
            raise KernelError(f"{kname}: parameter {name!r} is {ann}; kernel pointers point "
                              f"at tensors in global memory")
        extent = _extent(kname, name, ann, kwargs.get(name))
        buf = ir.Buffer(name, tr.tgt.home, ann.dtype.elem, extent or 0, role="in")
        tr.taken.add(name)
        tr.params[name] = {"extent": extent, "hi": 0, "read": False, "written": False,
                           "dtype": ann.dtype.elem,
                           "partial": bool(getattr(kwargs.get(name), "partial", False))}
        return Ptr(buf, ann.dtype, ir.Affine(), "global", name)
    if isinstance(ann, DType) and not ann.is_vector:
        if name not in kwargs:
            raise KernelError(f"build {kname}: give the scalar argument {name} ({ann}) as a "
                              f"keyword: the program is specialised for its value")
        value = kwargs[name]
        if ann.elem.kind in "iu":
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise KernelError(f"build {kname}: {name} must be an integer, got {value!r}")
            v = trace._convert(value, ann, f"build {kname}: {name}")
            scalars[name] = int(v)
            return ParamInt(v) if ann == "int32" else ParamScalar(ann, v)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
            raise KernelError(f"build {kname}: {name} must be a number, got {value!r}")
        scalars[name] = float(value)
        return ParamScalar(ann, value)
    raise KernelError(f"{kname}: parameter {name!r} needs an annotation: S.ptr(dtype, "
                      f"'global') for a tensor or a scalar type such as S.i32")


def _extent(kname: str, name: str, ann: PtrType, given) -> int | None:
    if given is None:
        return None
    if isinstance(given, Layout):
        if given.dtype != ann.dtype.elem:
            raise DTypeError(f"build {kname}: {name} is {ann}, its spec says {given.dtype}")
        return given.footprint()[1]
    if isinstance(given, (int, np.integer)) and given >= 0:
        return int(given)
    raise KernelError(f"build {kname}: {name}= takes the tensor's length in elements or "
                      f"npukit.spec(...), got {given!r}")


def _assemble(tr: Tracer, kernel: PrimFunc, scalars: dict, partial: bool) -> ir.Program:
    from ..passes import check

    rename: dict[str, ir.Buffer] = {}
    params = []
    for name, info in tr.params.items():
        extent = info["extent"] if info["extent"] is not None else info["hi"]
        keep = info["read"] or info["partial"] or partial  # unwritten elements kept
        role = ("inout" if keep else "out") if info["written"] else "in"
        p = ir.Buffer(name, tr.tgt.home, info["dtype"], extent, role=role)
        rename[name] = p
        params.append((p, Layout((extent,), p.dtype)))
    buffers = []
    for b in tr.buffers:
        new = b if b.memory != "vreg" else replace(b, name=tr.fresh(tr.reg_names[b.name]))
        rename[b.name] = new
        buffers.append(new)
    body = trace.run_guarded(tr, ir.map_buffers(tr.blocks[0], lambda b: rename.get(b.name, b)))
    body, buffers = per_tec_copies(body, buffers, tr.core_var, tr.tgt)
    used = _used(body)
    source = "\n\n".join(_source(f) for f in tr.funcs)
    prog = ir.Program(kernel.name, tr.tgt, tuple(params),
                      tuple(b for b in buffers if b.name in used), body,
                      tuple(sorted(scalars.items())), source)
    return check(prog)


def _source(fn) -> str:
    """``fn``'s source text, or a note when Python kept none (code made by exec)."""
    try:
        return textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return f"# {fn.__name__}: no source text available"


def _used(body) -> set[str]:
    out: set[str] = set()
    for st in body:
        for body in ir.bodies(st):
            out |= _used(body)
        for v in (getattr(st, "dst", None), getattr(st, "src", None), getattr(st, "cond", None),
                  *getattr(st, "srcs", ())):
            if v is not None:
                out.add(v.buffer.name)
    return out
