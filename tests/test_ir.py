"""The IR itself: the rewriter reaches every statement kind, ``walk`` visits in program
order, Program's methods dispatch through the registry the back ends fill, and a program
prints, reprs and pickles as a value."""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys
import typing

import numpy as np
import pytest

import npukit as nk
from npukit import ir, ir_text
from npukit import kernels as K
from npukit.layout import Layout

I8 = np.dtype("int8")


def _buf(name: str, role: str = "internal", memory: str = "vmem") -> ir.Buffer:
    return ir.Buffer(name, memory, I8, 64, role)


def _view(buf: ir.Buffer, offset=0) -> ir.View:
    return ir.View(buf, Layout((16,), I8), ir.affine(offset))


def _every_statement_kind(a: ir.Buffer) -> tuple[ir.Stmt, ...]:
    """One statement of each kind, each with views of ``a`` in every place a view goes,
    inside a core loop whose variable has a run-time trip count and index atoms."""
    i = ir.Var("i", 4)
    j = ir.Var("j", 3, trips=ir.affine(ir.Clamp(ir.affine(i) + 1, 0, 2)))
    tile = ir.Buffer("tile", "vmem", I8, 64)
    ext = ir.Extern("k", (("int8_t *", "p"), ("int", "n"), ("int8_t", "s")), parallel=False)
    body = (
        ir.ResetCursor("c"),
        ir.Copy(_view(tile), _view(a, i * 16), "dma", ir.Lanes(50, i * 16, 16), "copy"),
        ir.Append(_view(a), _view(tile), "dma", "c", ir.Lanes(50, i * 16, 16)),
        ir.Fill(_view(a, j * 16), 7),
        ir.Compute("alu", "vadd", _view(a), (_view(a, (i + j) // 2), _view(tile)), acc=True,
                   attrs=(("shift", 1),)),
        ir.Compute("act", "vgather", _view(tile), (_view(a, i % 3), _view(a))),
        ir.Call(ext, (ir.Ptr(_view(a)), ir.Val(ir.affine(j)), ir.Deref(_view(a, 1)))),
        ir.Branch(_view(a, 2), (ir.Fill(_view(a, 3), 1),), (ir.Fill(_view(tile), 2),)),
        ir.Repeat(_view(a, 4), (ir.Fill(_view(a, 5), 1),)),
    )
    inner = ir.Loop(j, body, "rows", parallel=True)
    return (ir.Loop(i, (inner,), "cores", cores=True),)


def _buffers_in(x) -> list[ir.Buffer]:
    """Every Buffer reachable from ``x`` through dataclass fields and tuples: an oracle
    independent of the rewriter's own list of where views go."""
    if isinstance(x, ir.Buffer):
        return [x]
    if isinstance(x, (tuple, list)):
        return [b for y in x for b in _buffers_in(y)]
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return [b for f in dataclasses.fields(x) for b in _buffers_in(getattr(x, f.name))]
    return []


def test_map_buffers_reaches_every_view_of_every_statement_kind():
    a, b = _buf("a"), _buf("b", "out")
    body = _every_statement_kind(a)
    kinds = {type(st) for st, _ in ir.Program("p", None, (), (), body).walk()}
    assert kinds == set(typing.get_args(ir.Stmt)), "a statement kind the test does not build"
    seen = [x.name for x in _buffers_in(body)]
    assert seen.count("a") == 13

    mapped = ir.map_buffers(body, lambda x: b if x.name == "a" else x)
    after = [x.name for x in _buffers_in(mapped)]
    assert "a" not in after and after.count("b") == 13 and after.count("tile") == 5
    # everything but the buffers is kept: loops' flags and variables, lanes, attributes
    assert ir.map_buffers(mapped, lambda x: a if x.name == "b" else x) == body
    outer, inner = mapped[0], mapped[0].body[0]
    assert outer.cores and not outer.parallel and inner.parallel and inner.var.trips is not None


def test_map_views_refuses_what_is_not_a_statement():
    with pytest.raises(TypeError, match="Lanes is not an IR statement"):
        ir.map_views((ir.Lanes(4, ir.affine(0), 4),), lambda v: v)


def test_map_views_gives_each_view_to_the_function():
    a = _buf("a")
    body = _every_statement_kind(a)
    offsets = []

    def shift(v):
        offsets.append(v.offset)
        return dataclasses.replace(v, offset=v.offset + 5)

    mapped = ir.map_views(body, shift)
    assert len(offsets) == 18  # 13 views of a, 5 of tile
    fill = mapped[0].body[0].body[3]
    assert fill.dst.offset == ir.affine(ir.Var("j", 3, fill.dst.offset.vars[0].trips)) * 16 + 5


def test_walk_visits_in_program_order_with_the_enclosing_loops():
    body = _every_statement_kind(_buf("a"))
    walked = list(ir.Program("p", None, (), (), body).walk())
    names = [type(st).__name__ for st, _ in walked]
    assert names == ["Loop", "Loop", "ResetCursor", "Copy", "Append", "Fill", "Compute",
                     "Compute", "Call", "Branch", "Fill", "Fill", "Repeat", "Fill"]
    assert [tuple(v.name for v in loops) for _, loops in walked] == \
        [(), ("i",)] + [("i", "j")] * 12


def mul_program(n=40):
    return nk.build(K.mul_vectorized, target="torq", input1=nk.spec((n,), "int8"),
                    input2=nk.spec((n,), "int8"), bias_scale=nk.spec((2,), "int32"),
                    output=nk.spec((n,), "int8"), shift=2, out_min=-100, out_max=100)


def test_the_back_ends_and_renderers_register_themselves():
    assert list(ir._BACKENDS) == ["sim", "c"]
    assert ir._BACKENDS["sim"].compile is None and ir._BACKENDS["c"].compile is not None
    assert set(ir._RENDERERS) == {"text", "c_source", "transfers"}


def test_program_methods_dispatch_through_the_registry(monkeypatch):
    prog = mul_program()
    calls = []
    monkeypatch.setitem(ir._BACKENDS, "probe",
                        ir.Backend(lambda p, arrays: calls.append((p, arrays)) or "ran",
                                   lambda p, fuse: ("handle", fuse)))
    assert prog.run("probe", x=1) == "ran" and calls == [(prog, {"x": 1})]
    assert prog.compile("probe", fuse=False) == ("handle", False)
    monkeypatch.setitem(ir._RENDERERS, "c_source", lambda p: f"C of {p.name}")
    assert prog.c_source() == "C of mul_vectorized"
    with pytest.raises(nk.NpukitError, match=r"unknown backend 'gpu'; use 'sim' or 'c' or "
                                             r"'probe'"):
        prog.run("gpu")
    with pytest.raises(nk.NpukitError, match=r"backend 'sim' has nothing to compile; use "
                                             r"'c' or 'probe'"):
        prog.compile("sim")


@pytest.mark.slow
def test_importing_the_ir_alone_gives_working_methods():
    """``import npukit.ir`` runs npukit/__init__, which imports the modules that register."""
    code = ("import numpy as np; from npukit import ir; from npukit.layout import Layout\n"
            "import npukit.machine as m\n"
            "t = m.target('torq'); i8 = np.dtype('int8')\n"
            "a = ir.Buffer('a', t.home, i8, 4, 'in'); o = ir.Buffer('o', t.home, i8, 4, 'out')\n"
            "lay = Layout((4,), i8)\n"
            "p = ir.Program('cp', t, ((a, lay), (o, lay)), (), (ir.Fill(ir.View(o, lay), 3),))\n"
            "out = np.zeros(4, np.int8)\n"
            "p.run('sim', a=np.ones(4, np.int8), o=out)\n"
            "print(out.tolist(), 'void npukit_cp(' in p.c_source(), 'fill' in str(p))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.stdout.split() == ["[3,", "3,", "3,", "3]", "True", "True"], res.stderr


def test_str_is_the_ir_text_and_repr_one_line():
    prog = mul_program()
    assert str(prog) == ir_text.program_text(prog) and str(prog).count("\n") > 5
    assert repr(prog) == (f"<Program 'mul_vectorized' for torq: 4 parameters, "
                          f"{len(prog.buffers)} buffers, {sum(1 for _ in prog.walk())} "
                          f"statements; print() shows the IR>")


def test_a_program_pickles_without_what_back_ends_keep_on_it():
    prog = mul_program()
    prog.__dict__["_compiled_c"] = lambda: None  # what npukit.c keeps: not picklable
    back = pickle.loads(pickle.dumps(prog))
    assert back == prog and "_compiled_c" not in back.__dict__
    assert back.c_source() == prog.c_source()


def test_an_extern_with_a_lambda_reference_refuses_to_pickle_naming_it():
    ext = ir.Extern("k", (), parallel=False, reference=lambda *a: None)
    with pytest.raises(nk.KernelError,
                       match=r"basic kernel 'k': its reference= .*<lambda> is not a module"):
        pickle.dumps(ext)
