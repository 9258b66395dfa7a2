"""``print(prog)``: a Program's IR as indented text, one line per statement.

Parameters come first (role, dtype, shape, strides, offset), then internal buffers
(memory, size, slots), then the statement tree: loops as ``for i0 in range(63):``, data
flows as ``dst = src``, instructions as ``dst = unit.op(srcs)`` with their constants,
calls with their arguments by C name. A statement's source line follows as a comment.
A view reads ``name(shape) at offset``: the elements of buffer ``name`` at ``offset +
Σ idx·strides``, strides shown when the view is not dense. Internal buffers are named
with their memory (``IRAM:idata``, ``L1:In1``), parameters by their name alone. Index
expressions use Python's ``//`` and ``%`` (rounding towards -inf).
"""

from __future__ import annotations

from . import ir
from .layout import dense_strides

INDENT = "    "


def program_text(prog: ir.Program) -> str:
    """The whole program as text (what ``str(prog)`` returns)."""
    t = prog.target
    lines = [f"program {prog.name} for target {t.name}"]
    if prog.attrs:
        lines.append("  attributes: " + ", ".join(f"{k}={v!r}" for k, v in prog.attrs))
    lines.append(f"  parameters (in {t.home}):")
    for buf, spec in prog.params:
        lines.append(f"    {buf.name:<12} {buf.role:<6} {spec.dtype.name}{list(spec.shape)}  "
                     f"strides {spec.strides}  offset {spec.offset}  ({buf.size} elements)")
    if prog.buffers:
        lines.append("  buffers:")
    for b in prog.buffers:
        lines.append(f"    {buffer_name(b):<14} " + _buffer(b))
    lines.append("  body:")
    lines += _block(prog.body, 1)
    return "\n".join(lines)


def _buffer(b: ir.Buffer) -> str:
    where = f" at byte {b.address}" if b.address is not None else ""
    slots = f", {b.slots} slots" + (f" of {b.slot_len}" if b.slot_len else "") \
        if b.slots > 1 or b.slot_len else ""
    const = "  constant" if b.role == "const" else ""
    return f"{b.dtype.name} x {b.size} ({b.nbytes} B{slots}){where}{const}"


def buffer_name(b: ir.Buffer) -> str:
    """A parameter's name, or ``memory:name`` for a buffer of the program (a parameter and
    its L1 copy may share a name)."""
    return b.name if b.role in ("in", "out", "inout") else f"{b.memory}:{b.name}"


def _block(body, depth: int) -> list[str]:
    lines = []
    for st in body:
        pad = INDENT * depth
        if isinstance(st, ir.Loop):
            count = st.var.count if st.var.trips is None else \
                f"{affine_text(ir.affine(st.var.trips))}  (at most {st.var.count})"
            head = f"{pad}for {st.var.name} in range({count}):"
            lines.append(_with_label(head + ("  [one iteration per core]" if st.cores else ""),
                                     st.label))
            lines += _block(st.body, depth + 1)
        elif isinstance(st, ir.Branch):
            lines.append(_with_label(f"{pad}if {view_text(st.cond)}:", st.label))
            lines += _block(st.then, depth + 1)
            if st.orelse:
                lines += [f"{pad}else:"] + _block(st.orelse, depth + 1)
        elif isinstance(st, ir.Repeat):
            lines.append(_with_label(f"{pad}while {view_text(st.cond)}:", st.label))
            lines += _block(st.body, depth + 1)
        else:
            lines.append(_with_label(pad + statement_text(st), st.label))
    return lines


def _with_label(text: str, label: str) -> str:
    return f"{text}  # {label}" if label else text


def statement_text(st) -> str:
    """One statement (not a loop) as one line, without its label."""
    if isinstance(st, ir.Copy):
        via = f"  [{st.engine}" + (f", valid {lanes_text(st.valid)}" if st.valid else "") + "]"
        return f"{view_text(st.dst)} = {view_text(st.src)}{via}"
    if isinstance(st, ir.Append):
        valid = f", valid {lanes_text(st.valid)}" if st.valid else ""
        return f"append {view_text(st.src)} to {view_text(st.dst)} at {st.cursor}  " \
            f"[{st.engine}{valid}]"
    if isinstance(st, ir.ResetCursor):
        return f"{st.cursor} = 0"
    if isinstance(st, ir.Fill):
        return f"{view_text(st.dst)} = fill({st.value!r})"
    if isinstance(st, ir.Compute):
        attrs = ", ".join(f"{k}={v!r}" for k, v in st.attrs)
        srcs = ", ".join(view_text(v) for v in st.srcs)
        value = f"{st.unit}.{st.op}({srcs})"
        if st.acc:  # combined into what the destination holds
            combine = dict(st.attrs).get("combine", "combine")
            value = f"{combine}({view_text(st.dst)}, {value})"
        return f"{view_text(st.dst)} = {value}" + (f"  [{attrs}]" if attrs else "")
    if isinstance(st, ir.Call):
        args = ", ".join(f"{name}={_arg(a)}" for (_, name), a in zip(st.fn.args, st.args))
        kind = "parallel" if st.fn.parallel else "sequential"
        return f"call {st.fn.name}({args})  [{kind}]"
    return repr(st)


def _arg(a) -> str:
    if isinstance(a, ir.Ptr):
        return "&" + view_text(a.view)
    if isinstance(a, ir.Deref):
        return "*" + view_text(a.view)
    return lanes_text(a.expr) if isinstance(a.expr, ir.Lanes) else affine_text(a.expr)


def view_text(v: ir.View) -> str:
    """``name(shape) at offset`` (no ``at`` for offset 0), with ``strides`` when the view is
    not dense."""
    lay = v.layout
    shape = ", ".join(map(str, lay.shape))
    offset = affine_text(v.offset + lay.offset)
    text = f"{buffer_name(v.buffer)}({shape})" + (f" at {offset}" if offset != "0" else "")
    if lay.strides != dense_strides(lay.shape):
        text += f" strides {lay.strides}"
    return text


def lanes_text(lanes: ir.Lanes) -> str:
    """``clamp(total - start, 0, width)``; a number when ``start`` is constant."""
    start = affine_text(lanes.start)
    if _is_int(start):
        return str(min(max(lanes.total - int(start), 0), lanes.width))
    start = f"({start})" if " " in start else start  # a sum
    return f"clamp({lanes.total} - {start}, 0, {lanes.width})"


def affine_text(a: ir.Affine) -> str:
    """``2000*((Tile + 1) % 2) + 10``: atoms of a constant and ``x // 1`` folded."""
    parts, const = [], a.const
    for atom, c in a.terms:
        if isinstance(atom, ir.Var):
            text = atom.name
        elif not atom.expr.terms:  # a div or mod of a constant
            const += c * ir.affine(atom).eval({})
            continue
        elif isinstance(atom, ir.Clamp):
            text = f"clamp({affine_text(atom.expr)}, {atom.lo}, {atom.hi})"
        elif atom.m == 1 and isinstance(atom, ir.Mod):
            continue  # x % 1 == 0
        elif atom.m == 1:
            text = _paren(affine_text(atom.expr))  # x // 1 == x
        else:
            op = "//" if isinstance(atom, ir.FloorDiv) else "%"
            text = f"({_paren(affine_text(atom.expr))} {op} {atom.m})"
        parts.append(text if c == 1 else f"{c}*{text}")
    if const or not parts:
        parts.append(str(const))
    text = " + ".join(parts).replace("+ -", "- ")
    return text[1:-1] if len(parts) == 1 and a.terms and text.startswith("(") and \
        _balanced(text[1:-1]) else text


def _paren(text: str) -> str:
    """``text`` in parentheses unless it is one name or number."""
    return text if text.isidentifier() or _is_int(text) else f"({text})"


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


ir.register_renderer("text", program_text)
