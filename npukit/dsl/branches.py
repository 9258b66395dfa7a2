"""``if`` on a value known only at run time (``if S.vall(mask):``, ``if a[0] > b[0]:``): the
kernel's source is rewritten so that both arms are traced, into an ``ir.Branch``.

A kernel is traced by running its Python once, so a plain ``if`` can follow one arm only.
Each ``if`` of a kernel (or device subroutine) becomes::

    with __npk_if__(TEST, escaping, exits, locals()) as c:
        if c.then():
            BODY
            c.arm_end(locals())              # when names escape
        if c.orelse():
            NAME = ... / del NAME            # each escaping name as it was before the if
            ORELSE
            c.arm_end(locals())
    if c.merges("NAME"): NAME = c.merged["NAME"]

When ``TEST`` is decided at build time (a number, a build-time comparison, the local id)
``then``/``orelse`` are ``bool(TEST)`` and its negation: Python's own ``if``. When it is a
one-lane ``bool`` value (a lane of a mask, ``S.vall``/``S.vany``, a comparison of lanes; a
one-lane number is its ``!= 0``, as in C), both arms are traced, each into its own block,
and the statement becomes one ``ir.Branch``. A name assigned in the arms and used outside
them (``escaping``) is one variable for both, as in the Compass DSL: the else arm starts
from its value before the ``if``, each arm ends by writing its value into one register, and
after the ``if`` the name is that register (a vector of the arms' type; for numbers an
int32, float32 or bool one, or the typed scalars' type). Leaving an arm early
(``return``, ``break``, ``continue``: ``exits``) is a ``KernelError``.

``x if c else y`` becomes ``__npk_ifexp__(c, lambda: x, lambda: y)``: Python's own on a
build-time ``c``; on a one-lane value known at run time both sides are computed and ``c``
selects one (the Compass DSL's ``if_then_else``).

``and``, ``or`` and ``not`` are rewritten too (``a and b`` becomes
``__npk_and__(lambda: a, lambda: b)``, ``not a`` becomes ``__npk_not__(a)``): on build-time
values they are Python's own, short-circuit and all; on a one-lane ``bool`` value they are
the lanes' ``S.vand``, ``S.vor`` and ``S.vnot`` (both sides traced), as the Compass DSL reads
``if mask[2] or mask[4]:`` and ``m = mask[3] and mask[4]``.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import types

import numpy as np

from .. import ir
from ..errors import DTypeError, KernelError
from ..layout import Layout
from .trace import _same
from .types import DType
from .values import Index, Ptr, Scalar, Vec, _convert, _describe, tracer

_CACHE: dict = {}


def branching_code(fn) -> types.CodeType:
    """``fn``'s code with every ``if`` rewritten as above (its own code when it has none or
    its source cannot be read); line numbers and file stay the source's."""
    key = fn.__code__
    if key not in _CACHE:
        _CACHE[key] = _rewrite(fn)
    return _CACHE[key]


def closure_for(code: types.CodeType, fn) -> tuple | None:
    """``fn``'s closure cells in the order ``code`` names its free variables."""
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    return tuple(cells[n] for n in code.co_freevars) if code.co_freevars else None


def _rewrite(fn) -> types.CodeType:
    try:
        src = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(src)
    except (OSError, TypeError, SyntaxError):
        return fn.__code__
    fdef = tree.body[0] if tree.body else None
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
            fdef.name != fn.__name__ or not any(_rewritten(n) for n in ast.walk(fdef)):
        return fn.__code__  # no if, and, or, not; or not the source of fn (code given to exec)
    fdef.decorator_list = []
    _WhileRewriter().visit(fdef)
    _IfRewriter(fdef).visit(fdef)
    _IfExpRewriter().visit(fdef)
    _BoolRewriter().visit(fdef)
    # an outer function whose parameters are fn's free variables keeps them free in fdef
    outer = ast.FunctionDef(
        name="__npk_outer__", body=[fdef, ast.Return(ast.Name(fdef.name, ast.Load()))],
        args=ast.arguments(posonlyargs=[], args=[ast.arg(n) for n in fn.__code__.co_freevars],
                           kwonlyargs=[], kw_defaults=[], defaults=[]),
        decorator_list=[], returns=None)
    module = ast.Module(body=[outer], type_ignores=[])
    ast.copy_location(outer, fdef)
    ast.fix_missing_locations(module)
    ast.increment_lineno(module, fn.__code__.co_firstlineno - 1)  # line 1: its first line
    code = compile(module, fn.__code__.co_filename, "exec")
    outer_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    return next(c for c in outer_code.co_consts
                if isinstance(c, types.CodeType) and c.co_name == fdef.name)


def _rewritten(node) -> bool:
    return isinstance(node, (ast.If, ast.IfExp, ast.While, ast.BoolOp)) or \
        isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)


def _names(nodes, ctx) -> set[str]:
    return {n.id for node in nodes for n in ast.walk(node)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def _exits(nodes) -> bool:
    """Whether a ``return`` (anywhere) or a ``break``/``continue`` of a loop outside the
    arms leaves them."""
    def rec(node, in_loop: bool) -> bool:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return False
        if isinstance(node, ast.Return) or \
                isinstance(node, (ast.Break, ast.Continue)) and not in_loop:
            return True
        loop = isinstance(node, (ast.For, ast.While))
        return any(rec(c, in_loop or loop) for c in ast.iter_child_nodes(node))
    return any(rec(n, False) for n in nodes)


class _IfRewriter(ast.NodeTransformer):
    def __init__(self, fdef):
        self.fdef, self.count = fdef, 0

    def visit_If(self, node: ast.If):
        self.generic_visit(node)  # inner ifs first (an elif is an if in orelse)
        arms = node.body + node.orelse
        inside = {id(n) for a in arms for n in ast.walk(a)}
        loaded = {n.id for n in ast.walk(self.fdef) if isinstance(n, ast.Name) and
                  isinstance(n.ctx, ast.Load) and id(n) not in inside}
        escaping = sorted(_names(arms, ast.Store) & loaded)
        self.count += 1
        c = f"__npk_c{self.count}__"
        test = ast.Call(ast.Name("__npk_if__", ast.Load()),
                        [node.test, ast.Constant(tuple(escaping)), ast.Constant(_exits(arms)),
                         _parsed("locals()", node.test)[0].value], [])

        def arm(method: str, body: list) -> ast.If:  # on the line of the if, as its test
            call = ast.Call(ast.Attribute(ast.Name(c, ast.Load()), method, ast.Load()), [], [])
            for n in ast.walk(call):
                ast.copy_location(n, node.test)
            return ast.copy_location(ast.If(call, body or [ast.Pass()], []), node.test)

        end = _parsed(f"{c}.arm_end(locals())", node.test) if escaping else []
        restore = [st for n in escaping for st in _parsed(
            f"if {c}.had({n!r}): {n} = {c}.old({n!r})\n"
            f"elif {c}.drops({n!r}, locals()): del {n}", node.test)]
        merge = [st for n in escaping for st in _parsed(
            f"if {c}.merges({n!r}): {n} = {c}.merged[{n!r}]", node.test)]
        out = ast.With([ast.withitem(test, ast.Name(c, ast.Store()))],
                       [arm("then", node.body + end), arm("orelse", restore + node.orelse + end)])
        return [ast.copy_location(out, node), *merge]


def _parsed(text: str, at) -> list:
    """The statements of ``text``, every node on the line of ``at`` (the if's test)."""
    body = ast.parse(text).body
    for st in body:
        for n in ast.walk(st):
            ast.copy_location(n, at)
    return body


class _WhileRewriter(ast.NodeTransformer):
    """``while TEST: BODY`` -> (``w`` this loop's ``RuntimeWhile``, ``N`` each name the body
    assigns)::

        with __npk_while__(lambda: TEST, names, exits, locals()) as w:
            if w.has("N"): N = w.value("N")       # its register, on a run-time TEST
            while w.next():
                BODY
                if w.has("N"): N = w.carried("N", N)
    """

    def __init__(self):
        self.count = 0

    def visit_While(self, node: ast.While):
        self.generic_visit(node)
        if node.orelse:
            return node  # while ... else: Python's own only
        names = sorted(_names(node.body, ast.Store))
        self.count += 1
        w = f"__npk_w{self.count}__"
        make = ast.Call(ast.Name("__npk_while__", ast.Load()),
                        [_thunk(node.test), ast.Constant(tuple(names)),
                         ast.Constant(_exits(node.body)),
                         _parsed("locals()", node.test)[0].value], [])
        pre = [st for n in names
               for st in _parsed(f"if {w}.has({n!r}): {n} = {w}.value({n!r})", node.test)]
        post = [st for n in names
                for st in _parsed(f"if {w}.has({n!r}): {n} = {w}.carried({n!r}, {n})",
                                  node.test)]
        loop = ast.copy_location(ast.While(_parsed(f"{w}.next()", node.test)[0].value,
                                           node.body + post, []), node)
        out = ast.With([ast.withitem(make, ast.Name(w, ast.Store()))], pre + [loop])
        return ast.copy_location(out, node)


class _IfExpRewriter(ast.NodeTransformer):
    """``x if c else y`` -> ``__npk_ifexp__(c, lambda: x, lambda: y)``."""

    def visit_IfExp(self, node: ast.IfExp):
        self.generic_visit(node)
        call = ast.Call(ast.Name("__npk_ifexp__", ast.Load()),
                        [node.test, _thunk(node.body), _thunk(node.orelse)], [])
        return ast.copy_location(call, node)


class _BoolRewriter(ast.NodeTransformer):
    """``a and b and c`` -> ``__npk_and__(lambda: __npk_and__(lambda: a, lambda: b),
    lambda: c)``; ``or`` alike; ``not a`` -> ``__npk_not__(a)``."""

    def visit_BoolOp(self, node: ast.BoolOp):
        self.generic_visit(node)
        name = "__npk_and__" if isinstance(node.op, ast.And) else "__npk_or__"
        out = node.values[0]
        for v in node.values[1:]:
            out = ast.Call(ast.Name(name, ast.Load()), [_thunk(out), _thunk(v)], [])
        return ast.copy_location(out, node)

    def visit_UnaryOp(self, node: ast.UnaryOp):
        self.generic_visit(node)
        if not isinstance(node.op, ast.Not):
            return node
        return ast.copy_location(ast.Call(ast.Name("__npk_not__", ast.Load()), [node.operand],
                                          []), node)


def _thunk(expr) -> ast.Lambda:
    args = ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[])
    return ast.copy_location(ast.Lambda(args, expr), expr)


def _lane_bool(x) -> bool:
    return isinstance(x, Vec) and x.type.is_bool and x.type.lanes == 1


def _lanes_logic(op: str, a: Vec, b):
    """``a op b`` of a one-lane bool value ``a``: a build-time ``b`` decides (``x and True``
    is ``x``, ``x and False`` is ``False``), else the lanes' operation."""
    if _lane_bool(b):
        return tracer().logic(op, a, b, "and" if op == "vand" else "or")
    keeps = bool(b) if op == "vand" else not bool(b)
    return a if keeps else bool(b)


def logical_and(left, right):
    """``left() and right()`` (thunks, module docstring)."""
    a = left()
    if _lane_bool(a):
        return _lanes_logic("vand", a, right())
    return right() if a else a


def logical_or(left, right):
    """``left() or right()`` (thunks, module docstring)."""
    a = left()
    if _lane_bool(a):
        return _lanes_logic("vor", a, right())
    return a if a else right()


def if_exp(test, then, orelse):
    """``then() if test else orelse()`` (thunks): Python's own on a build-time test; on a
    one-lane value known at run time (a number: its ``!= 0``) both sides are computed and
    the test selects one, lane for lane, as the Compass DSL's ``if_then_else`` does (a
    number beside a vector spreads over its lanes, numbers alone are int32/float32/bool)."""
    test = _as_condition(test)
    if not (isinstance(test, Vec) and test.type.is_bool and test.type.lanes == 1):
        return then() if test else orelse()
    tr = tracer()
    values = [then(), orelse()]
    what = f"`{tr.label()}`: x if a run-time condition else y"
    if not any(isinstance(v, Vec) for v in values):
        values[0] = tr.coerce(values[0], _number_type("the value", values, tr.label()), what)
    t = tr.vector_type(what, *values)
    return tr.select(test if t.lanes == 1 else tr.spread(test, t.lanes), *values, what)


def _as_condition(test):
    """A one-lane number known at run time as its ``!= 0`` (C's truth), else ``test``."""
    if isinstance(test, Vec) and test.type.lanes == 1 and not test.type.is_bool:
        return tracer().compare("ne", test, 0)
    return test


def logical_not(x):
    """``not x``: ``S.vnot`` of a one-lane bool value, else Python's."""
    return tracer().logic("vnot", x, None, "not") if _lane_bool(x) else not x


class RuntimeIf:
    """One ``if`` as the kernel runs it at trace time (see the module docstring)."""

    def __init__(self, test, escaping: tuple, exits: bool, scope: dict):
        test = _as_condition(test)
        self.test, self.escaping, self.exits = test, escaping, exits
        self.runtime = isinstance(test, Vec) and test.type.is_bool and test.type.lanes == 1
        self.value = None
        self.before = {n: scope[n] for n in escaping if n in scope} if self.runtime else {}
        self.ends: list[dict] = []  # the escaping names' values at the end of each arm
        self.merged: dict = {}

    def __enter__(self) -> RuntimeIf:
        return self

    def then(self) -> bool:
        if not self.runtime:
            self.value = bool(self.test)
            return self.value
        tr = tracer()
        if self.exits:
            raise KernelError(f"`{tr.label()}`: an if on a value known only at run time "
                              f"leaves its arm early (return, break or continue); npukit "
                              f"traces both arms: store the results and let the kernel run on")
        tr.blocks.append([])
        tr.arms += 1
        self.label = tr.label()
        return True

    def orelse(self) -> bool:
        if not self.runtime:
            return not self.value
        tr = tracer()
        self.then_body = tuple(tr.blocks.pop())
        tr.blocks.append([])
        return True

    # -- names assigned in the arms and used outside them (module docstring) -------------

    def arm_end(self, scope: dict) -> None:
        if self.runtime:
            self.ends.append({n: scope.get(n, _UNBOUND) for n in self.escaping})

    def had(self, name: str) -> bool:
        """Whether the else arm starts from ``name``'s value before the if (not the then
        arm's, which Python's trace of that arm left in the frame)."""
        return name in self.before

    def old(self, name: str):
        return self.before[name]

    def drops(self, name: str, scope: dict) -> bool:
        """Whether ``name``, unbound before the if and bound by the then arm, is unbound
        again for the else arm."""
        return self.runtime and name not in self.before and name in scope

    def merges(self, name: str) -> bool:
        return name in self.merged

    def __exit__(self, kind, exc, tb) -> bool:
        if self.runtime and kind is None:
            tr = tracer()
            tr.arms -= 1
            orelse = tuple(tr.blocks.pop())
            arms = [list(self.then_body), list(orelse)]
            for name in self.escaping:
                values = [end[name] for end in self.ends]
                if any(v is _UNBOUND for v in values):  # unbound on one path in Python:
                    continue                                # so it is here
                self.merged[name] = _merge(tr, name, values, arms, self.label)
            cond = ir.View(self.test.buf, Layout((1,), np.bool_))
            tr.emit(ir.Branch(cond, tuple(arms[0]), tuple(arms[1]), self.label))
        return False


_UNBOUND = object()  # a name an arm leaves unbound

# the type a register takes for a Python number assigned in a run-time if's arms
_NUMBER_TYPES = ((bool, np.bool_, "bool"), (int, np.integer, "int32"),
                 (float, np.floating, "float32"))


def _merge(tr, name: str, values: list, arms: list, label: str):
    """The value ``name`` has after a run-time if whose arms end with ``values``: the value
    itself when both arms leave the same one; else a register both arms write their own
    into (a vector of their type, or an int32/float32/bool or typed scalar one for
    numbers), as the Compass DSL's variable is one for both arms."""
    a, b = values
    if a is b or not isinstance(a, Vec) and not isinstance(b, Vec) and _same(a, b):
        return a
    vecs = [v for v in values if isinstance(v, Vec)]
    if any(v.type != vecs[0].type for v in vecs):
        raise DTypeError(f"`{label}`: {name} is a {vecs[0].type} value in one arm of an if on "
                         f"a run-time value and a {vecs[1].type} one in the other: give it "
                         f"one type")
    t = vecs[0].type if vecs else _number_type(name, values, label)
    out = tr.new_vec(t, name)
    for v, arm in zip(values, arms):
        arm.append(_write(tr, out, v, f"{name} after `{label}`"))
    return out


def _write(tr, out: Vec, v, what: str):
    """The statement that writes value ``v`` (a vector of ``out``'s type, a number or a
    typed scalar) into register ``out``."""
    if isinstance(v, Vec):
        return ir.Copy(out.view, v.view, tr.tgt.engine("vreg", "vreg").name, label=what)
    return ir.Fill(out.view, _convert(v, out.type.element_of, what).item(), what)


def _number_type(name: str, values: list, label: str) -> DType:
    scalars = {v.type for v in values if isinstance(v, Scalar)}
    if len(scalars) == 1:
        return scalars.pop()
    kinds = [next((t for *py, t in _NUMBER_TYPES if isinstance(v, tuple(py))), None)
             for v in values]
    if not scalars and None not in kinds:
        return DType("float32" if "float32" in kinds else "bool" if set(kinds) == {"bool"}
                     else "int32")
    raise KernelError(f"`{label}`: {name} is {_describe(values[0])} in one arm of an if on a "
                      f"run-time value and {_describe(values[1])} in the other: npukit merges "
                      f"vectors, numbers and typed scalars of one type after such an if")


class RuntimeWhile:
    """One ``while`` as the kernel runs it at trace time (``_WhileRewriter``). On a test
    decided at build time, Python's own loop. On a one-lane value known at run time, the
    body is traced once into an ``ir.Repeat``: each name it assigns that was bound before
    the loop lives in a register (a copy of a vector; an int32/float32/bool or typed-scalar
    one for a number), the body ends by writing its new value there, then recomputes the
    test into the loop's condition, as the Compass DSL's ``while`` runs."""

    def __init__(self, test, names: tuple, exits: bool, scope: dict):
        self.test, self.calls = test, 0
        first = _as_condition(test())
        self.runtime = isinstance(first, Vec) and first.type.is_bool and first.type.lanes == 1
        self.first, self.values, self.fixed = first, {}, {}
        if not self.runtime:
            return
        tr = tracer()
        self.label = tr.label()
        if exits:
            raise KernelError(f"`{self.label}`: a while on a value known only at run time "
                              f"leaves its body early (return, break or continue); npukit "
                              f"traces the body once: give the loop's condition the exit")
        self.cond = tr.new_vec(first.type, "cond")
        tr.emit(_write(tr, self.cond, first, f"the condition of `{self.label}`"))
        for n in (n for n in names if n in scope):
            v = scope[n]
            if isinstance(v, Vec) or not isinstance(v, (Index, Ptr)) and \
                    isinstance(v, (Scalar, bool, int, float, np.number, np.bool_)):
                t = v.type if isinstance(v, Vec) else _number_type(n, [v, v], self.label)
                self.values[n] = tr.new_vec(t, n)
                tr.emit(_write(tr, self.values[n], v, f"{n} into `{self.label}`"))
            else:
                self.fixed[n] = v

    def __enter__(self) -> RuntimeWhile:
        return self

    def has(self, name: str) -> bool:
        return name in self.values or name in self.fixed

    def value(self, name: str):
        return self.values.get(name, self.fixed.get(name))

    def next(self) -> bool:
        self.calls += 1
        if not self.runtime:
            return bool(self.first) if self.calls == 1 else bool(_as_condition(self.test()))
        tr = tracer()
        if self.calls == 1:
            tr.blocks.append([])
            tr.arms += 1
            return True
        again = _as_condition(self.test())
        if not (isinstance(again, Vec) and again.type == self.cond.type):
            raise KernelError(f"`{self.label}`: the condition of a while on a run-time value "
                              f"is {_describe(again)} after its body")
        tr.emit(_write(tr, self.cond, again, f"the condition of `{self.label}` again"))
        return False

    def carried(self, name: str, v):
        """``name``'s register after the body wrote ``v`` (its new value) there."""
        if name in self.fixed:
            if not _same(v, self.fixed[name]):
                raise KernelError(f"`{self.label}`: {name} ({_describe(self.fixed[name])}) "
                                  f"changes in a while on a run-time value; npukit carries "
                                  f"vectors, numbers and typed scalars from one run of the "
                                  f"body to the next")
            return v
        out = self.values[name]
        if v is not out:
            if isinstance(v, Vec) and v.type != out.type:
                raise DTypeError(f"`{self.label}`: {name} is {out.type} before the while on "
                                 f"a run-time value and {v.type} after its body: give it one "
                                 f"type")
            tracer().emit(_write(tracer(), out, v, f"{name} carried by `{self.label}`"))
        return out

    def __exit__(self, kind, exc, tb) -> bool:
        if self.runtime and kind is None and self.calls >= 2:
            tr = tracer()
            tr.arms -= 1
            body = tuple(tr.blocks.pop())
            cond = ir.View(self.cond.buf, Layout((1,), np.bool_))
            tr.emit(ir.Repeat(cond, body, self.label))
        return False
