"""The shape of npukit/: the IR is the bottom layer, and modules import each other without
cycles. Read from the source with ast, counting imports inside functions too (a lazy
import is still a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parent.parent / "npukit"

# Cycles that remain, each with why it is still there; the list only shrinks (it is empty:
# npukit has no import cycle). A cycle that is gone must leave the list, a new one fails.
KNOWN_CYCLES: dict[frozenset[str], str] = {}

IR_MAY_IMPORT = {"npukit.dtypes", "npukit.errors", "npukit.layout", "npukit.arith"}


def _modules() -> dict[str, Path]:
    mods = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return mods


def _imports(mod: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The npukit modules ``mod`` imports anywhere in its source (``from . import x`` names
    module ``x``; ``from .x import y`` module ``x`` unless ``y`` is a module)."""
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in mods}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = ".".join(base[:len(base) - node.level + 1]) if node.level else ""
            target = ".".join(p for p in (base, node.module) if p)
            for a in node.names:
                sub = f"{target}.{a.name}"
                out |= {sub} if sub in mods else {target} if target in mods else set()
    # importing a package's module runs the package first: no edge back to a parent
    return {t for t in out if t != mod and not mod.startswith(t + ".")}


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: _imports(m, p, mods) for m, p in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_ir_imports_nothing_above_it():
    assert _graph()["npukit.ir"] <= IR_MAY_IMPORT


def test_no_import_cycle_beyond_the_known_ones():
    found = set(_cycles(_graph()))
    assert not found - set(KNOWN_CYCLES), "new or larger import cycles"
    assert not set(KNOWN_CYCLES) - found, "a known cycle is gone: remove it from KNOWN_CYCLES"


def test_the_check_sees_function_level_imports_and_cycles():
    """The reader of imports counts a lazy import, and the cycle finder finds a cycle."""
    mods = _modules()
    lazy = _imports("npukit.arith", mods["npukit.arith"], mods)
    assert {"npukit.lut", "npukit.lut.table"} <= lazy  # imported inside functions only
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [frozenset("abc")]


def _loads_c(tree: ast.AST) -> bool:
    """Whether the source loads a shared object: ``ctypes.CDLL``/``ctypes.cdll``, or either
    imported from ctypes."""
    names = {"CDLL", "cdll"}
    return any(isinstance(n, ast.Attribute) and n.attr in names and
               isinstance(n.value, ast.Name) and n.value.id == "ctypes" or
               isinstance(n, ast.ImportFrom) and n.module == "ctypes" and
               any(a.name in names for a in n.names) for n in ast.walk(tree))


def _indents(tree: ast.Module) -> bool:
    """Whether the source defines a unit of indentation: a module-level constant holding
    only spaces or tabs, or a whitespace string multiplied by a depth (a name or attribute)."""
    def blank(n):
        return isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value and \
            not n.value.strip()

    if any(isinstance(n, ast.Assign) and blank(n.value) for n in tree.body):
        return True
    depth = (ast.Name, ast.Attribute)
    return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult) and
               (blank(n.left) and isinstance(n.right, depth) or
                blank(n.right) and isinstance(n.left, depth)) for n in ast.walk(tree))


def _modules_where(test) -> set[str]:
    return {m for m, p in _modules().items() if test(ast.parse(p.read_text()))}


def test_one_module_loads_compiled_c():
    """Every C npukit runs (programs, graphs, GAP-style host builds, TPP primitives) is
    compiled, cached and loaded by npukit.c.toolchain."""
    assert _modules_where(_loads_c) == {"npukit.c.toolchain"}


def test_one_module_writes_c_indentation():
    """C is indented by npukit.c.code's Writer only (the IR's text printer is not C)."""
    assert _modules_where(_indents) == {"npukit.c.code", "npukit.ir_text"}


def test_the_source_checks_see_what_they_look_for():
    for src in ("import ctypes\nctypes.CDLL('x')", "from ctypes import cdll"):
        assert _loads_c(ast.parse(src))
    assert not _loads_c(ast.parse("import ctypes\nctypes.c_int(1)"))
    for src in ("TAB = '\\t'", "def f(d):\n    return '    ' * d", "x = self.depth * '  '"):
        assert _indents(ast.parse(src)), src
    assert not _indents(ast.parse("x = ' ' * len(head)\ny = 'a' * n"))
