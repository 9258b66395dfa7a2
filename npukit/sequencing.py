"""Programs run one after the other as one program: ``nk.sequence``.

An EasyKernel kernel has one ALU and one Act instruction; a computation of two steps is
two kernels, the first writing an intermediate tensor the second reads. ``sequence`` joins
their programs: the parameters are the union by name (a tensor two programs share is one
parameter, so the intermediate is named explicitly, by giving both parameters its name),
the bodies run in order, each program keeps its own local buffers and constants.
"""

from __future__ import annotations

from dataclasses import replace

from . import ir
from .errors import KernelError, ShapeError
from .passes import check


def _renamed(prog: ir.Program, names: dict[str, str]) -> ir.Program:
    """``prog`` with parameter ``p`` called ``names.get(p, p)``."""
    known = [b.name for b, _ in prog.params]
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise KernelError(f"sequence: program {prog.name!r} has no parameter "
                          f"{', '.join(map(repr, unknown))}; its parameters: {', '.join(known)}")
    new = [names.get(n, n) for n in known]
    twice = sorted({n for n in new if new.count(n) > 1})
    if twice:
        raise KernelError(f"sequence: program {prog.name!r} would have two parameters named "
                          f"{', '.join(map(repr, twice))}")
    to = {b.name: replace(b, name=names.get(b.name, b.name)) for b, _ in prog.params}
    body = ir.map_buffers(prog.body, lambda b: to.get(b.name, b) if b.role != "internal" else b)
    return replace(prog, body=body, params=tuple((to[b.name], lay) for b, lay in prog.params),
                   bounds=tuple((names.get(p, p), lo, hi) for p, lo, hi in prog.bounds))


def _role(first: str, later: list[str]) -> str:
    """A shared parameter's role: what its first program does with the caller's array
    ("out": written whole before anything reads it), and whether a later one writes it."""
    if first == "in" and any(r != "in" for r in later):
        return "inout"
    return first


def sequence(*steps, name: str | None = None) -> ir.Program:
    """One program running ``steps`` in order, each a ``Program`` or ``(Program, {parameter:
    tensor name})`` to rename parameters; parameters of the same name are one tensor (same
    shape, dtype and strides), local buffers stay each program's own (their sizes add up).

    >>> import npukit as nk
    >>> from npukit.kernels import mul
    >>> s = nk.spec((32,), "int8")
    >>> p = nk.build(mul, target="torq", input1=s, input2=s, bias_scale=nk.spec((2,), "int32"),
    ...              output=s, shift=1, out_min=-128, out_max=127)
    >>> both = nk.sequence((p, {"output": "t"}), (p, {"input1": "t", "output": "y"}))
    >>> [(b.name, b.role) for b, _ in both.params]
    [('input1', 'in'), ('input2', 'in'), ('bias_scale', 'in'), ('t', 'out'), ('y', 'out')]
    """
    progs = [_renamed(*s) if isinstance(s, tuple) else s for s in steps]
    if not progs or not all(isinstance(p, ir.Program) for p in progs):
        raise KernelError("sequence takes Programs (or (Program, {parameter: name}) pairs), "
                          f"got {[type(s).__name__ for s in steps]}")
    target = progs[0].target
    for p in progs[1:]:
        if p.target.name != target.name:
            raise KernelError(f"sequence: program {p.name!r} is built for {p.target.name}, "
                              f"{progs[0].name!r} for {target.name}")
    uses: dict[str, list] = {}  # parameter name -> [(program, buffer, layout)]
    for p in progs:
        for b, lay in p.params:
            uses.setdefault(b.name, []).append((p, b, lay))
    params = {}
    for n, use in uses.items():
        (p0, b0, lay0), rest = use[0], use[1:]
        for p, _, lay in rest:
            if (lay.shape, lay.dtype, lay.strides, lay.offset) != \
                    (lay0.shape, lay0.dtype, lay0.strides, lay0.offset):
                raise ShapeError(f"sequence: tensor {n!r} is {lay0} in {p0.name!r} but {lay} "
                                 f"in {p.name!r}")
        params[n] = (replace(b0, role=_role(b0.role, [b.role for _, b, _ in rest])), lay0)
    body, buffers = [], []
    for k, p in enumerate(progs):
        own = {b.name: replace(b, name=f"{p.name}{k}.{b.name}") for b in p.buffers}
        buffers += own.values()
        # Local buffers and constants (a lookup table's image) stay the program's own.
        body += ir.map_buffers(p.body, lambda b, own=own: own[b.name]
                               if b.role in ("internal", "const") else params[b.name][0])
    prog = ir.Program(name or "_".join(p.name for p in progs), target, tuple(params.values()),
                      tuple(buffers), tuple(body),
                      source="\n".join(p.source for p in progs),
                      bounds=tuple(dict.fromkeys(x for p in progs for x in p.bounds)))
    return check(prog)
