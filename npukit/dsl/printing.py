"""``S.printf``: the Compass DSL's formatted print, once by every TEC that runs it, on the
simulator (Python's ``sys.stdout``) and in generated C (the process's ``stdout``, flushed).

The format takes the public DSL's conversions, without flags or widths:

- ``%d %i`` an integer as int32, ``%u`` as uint32, ``%o`` uint32 in octal after a ``0``,
  ``%x %X`` uint32 in hex after ``0x`` (a float argument prints its float32 bits);
- ``%f`` a float as float32 with six decimals, cut rather than rounded, as the Compass
  printf prints them (``0.0000546`` prints ``0.000054``); ``%c`` the character of the low 8
  bits; ``%s`` a literal string; ``%%`` a percent sign;
- ``%p`` prints ``%p``, as the public DSL's simulation does: a host address means nothing
  on the NPU, and the simulator has none;
- the 256-bit vector conversions ``%v32hhx``, ``%v16hx``, ``%v8hlx`` (the register's bits as
  32 x 8, 16 x 16 or 8 x 32-bit lanes in hex after ``0x``) and ``%v16hf`` (float16 x 16),
  ``%v8hlf`` (float32 x 8) lanes as ``%f``, the lanes joined by commas.

Arguments known at build time (numbers, typed scalars, strings) are rendered when the
kernel is built. Run-time ones (the local id, loop variables, registers) become the
arguments of a small generated function, an ``ir.Extern`` called where the printf stands:
its C prints with ``printf`` and flushes, its reference (the simulator's) renders with
``render`` below. The two differ in one thing: ``%c`` of a code above 127 writes that one
byte in C and the character's UTF-8 on the simulator.
"""

from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass

import numpy as np

from .. import ir
from ..cdecl import c_string
from ..dtypes import FACTS, is_float
from ..errors import DTypeError, KernelError
from .values import Index, Ptr, Scalar, Vec, _describe, tracer

INTEGER = ("%d", "%i", "%u", "%o", "%c")
VECTOR = {"%v32hhx": 8, "%v16hx": 16, "%v8hlx": 32, "%v16hf": "float16", "%v8hlf": "float32"}
_SPEC = re.compile(r"%(?:v32hhx|v16hx|v8hlx|v16hf|v8hlf|[diuoxXfcsp%])")


@dataclass(frozen=True)
class Field:
    """A conversion whose value comes at run time: of an ``Index`` (``lanes`` 0) or of a
    register of ``lanes`` lanes of ``dtype``."""

    spec: str
    dtype: str
    lanes: int


@dataclass(frozen=True)
class Printer:
    """The simulator's side of one ``S.printf``: ``pieces`` are literal text and
    ``Field``s, in order; called with the fields' values (ints, register arrays)."""

    pieces: tuple

    def __call__(self, *args) -> None:
        values = iter(args)
        out = [p if isinstance(p, str) else _render_field(p, next(values))
               for p in self.pieces]
        sys.stdout.write("".join(out))
        sys.stdout.flush()


def printf(fmt: str, *args) -> None:
    """``S.printf(fmt, *args)``: print by C's rules as the Compass DSL reads them (module
    docstring), once by every TEC.

    >>> import numpy as np, npukit.dsl as S
    >>> @S.prim_func
    ... def hello(x: S.ptr("int32", "global"), out: S.ptr("int32", "global")):
    ...     out[0] = x[0]
    ...     S.printf("TEC %d of %d: x=%x\\n", S.get_local_id(), S.get_local_size(), x[0])
    >>> hello(np.array([26], "int32"), np.zeros(1, "int32"))
    TEC 0 of 4: x=0x1a
    TEC 1 of 4: x=0x1a
    TEC 2 of 4: x=0x1a
    TEC 3 of 4: x=0x1a
    """
    if not isinstance(fmt, str):
        raise KernelError(f"S.printf: the format must be a str, got {_describe(fmt)}")
    pieces, fields, call_args = [], [], []
    parts = _parse(fmt)
    wanted = sum(1 for p in parts if p.startswith("%") and p != "%%")
    if wanted != len(args):
        raise KernelError(f"S.printf({fmt!r}): {wanted} conversion(s) but {len(args)} "
                          f"argument(s)")
    values = iter(args)
    for part in parts:
        if not part.startswith("%") or part == "%%":
            pieces.append(part[:1] if part == "%%" else part)
            continue
        arg = next(values)
        _check(part, arg, fmt)
        if isinstance(arg, Index):
            f = Field(part, "int64", 0)
            call_args.append(ir.Val(arg.expr))
        elif isinstance(arg, Vec) and part != "%p":
            f = Field(part, arg.type.elem.name, arg.type.lanes)
            call_args.append(ir.Ptr(arg.view))
        else:
            pieces.append(render(part, _constant(arg)))
            continue
        pieces.append(f)
        fields.append(f)
    _emit(_merged(pieces), fields, call_args)


def _parse(fmt: str) -> list[str]:
    """Literal runs and conversions of ``fmt``; a ``%`` starting no conversion the Compass
    DSL knows is a ``KernelError``."""
    out, at = [], 0
    while at < len(fmt):
        k = fmt.find("%", at)
        if k < 0:
            out.append(fmt[at:])
            break
        if k > at:
            out.append(fmt[at:k])
        m = _SPEC.match(fmt, k)
        if not m:
            raise KernelError(f"S.printf({fmt!r}): unsupported conversion {fmt[k:k + 8]!r}; "
                              f"the Compass DSL's are %d %i %u %o %x %X %f %c %s %p %% "
                              f"{' '.join(VECTOR)}")
        out.append(m.group())
        at = m.end()
    return out


def _check(spec: str, arg, fmt: str) -> None:
    """The Compass DSL's rule for what each conversion takes; a ``DTypeError`` naming the
    conversion and the argument otherwise."""
    what = f"S.printf({fmt!r}): {spec}"
    if spec == "%p":
        return
    if spec == "%s":
        if not isinstance(arg, str):
            raise DTypeError(f"{what} takes a literal string, got {_describe(arg)}")
        return
    if spec in VECTOR:
        want = VECTOR[spec]
        if not isinstance(arg, Vec) or arg.type.elem.itemsize * arg.type.lanes != 32 or \
                arg.type.elem == np.bool_ or (isinstance(want, str) and arg.type.elem.name != want):
            kind = f"a {want} x {256 // np.dtype(want).itemsize // 8} vector" \
                if isinstance(want, str) else "a 256-bit vector"
            raise DTypeError(f"{what} takes {kind}, got {_describe(arg)}")
        return
    kind = _scalar_kind(arg)
    if kind is None or (spec in INTEGER and kind != "i") or (spec == "%f" and kind != "f"):
        need = "an integer" if spec in INTEGER else "a float" if spec == "%f" else "a number"
        raise DTypeError(f"{what} takes {need} scalar, got {_describe(arg)}")


def _scalar_kind(arg) -> str | None:
    """``"i"`` or ``"f"`` for a scalar argument (a number, a typed scalar, a run-time
    integer, a one-lane register), else None."""
    if isinstance(arg, (bool, np.bool_)):
        return None
    if isinstance(arg, (int, np.integer, Index)):
        return "i"
    if isinstance(arg, (float, np.floating)):
        return "f"
    if isinstance(arg, (Scalar, Vec)) and (isinstance(arg, Scalar) or arg.type.lanes == 1):
        dt = arg.type.elem
        return "f" if is_float(dt) else "i" if dt.kind in "iu" else None
    return None


def _constant(arg):
    """A build-time argument as a Python int, float or str (a typed scalar's value)."""
    if isinstance(arg, Ptr):
        return None
    if isinstance(arg, Scalar):
        return float(arg.value) if is_float(arg.type.elem) else int(arg.value)
    if isinstance(arg, (float, np.floating)):
        return float(arg)
    return arg if isinstance(arg, str) else int(arg)


# -- rendering (the simulator's, and build-time arguments') ----------------------------------

def render(spec: str, value) -> str:
    """One conversion of a Python int, float or str, or of a register's lanes (an array).

    >>> render("%x", -6), render("%o", 4), render("%u", -6), render("%x", 1.25)
    ('0xfffffffa', '04', '4294967290', '0x3fa00000')
    >>> render("%f", 0.0000546), render("%c", 83), render("%d", 4294967295)
    ('0.000054', 'S', '-1')
    """
    if spec == "%p":
        return "%p"
    if spec == "%s":
        return value
    if spec in VECTOR:
        if isinstance(VECTOR[spec], str):
            return ",".join(_decimals(x) for x in value.astype(np.float32).tolist())
        lanes = np.ascontiguousarray(value).view(f"uint{VECTOR[spec]}")
        return ",".join(f"0x{int(v):x}" for v in lanes)
    if spec == "%f":
        return _decimals(value)
    if isinstance(value, float):  # %x %X of a float: its float32 bits
        value = int(np.float32(value).view(np.uint32))
    u = value % (1 << 32)
    if spec in ("%d", "%i"):
        return str(u - (1 << 32) if u >= 1 << 31 else u)
    if spec == "%u":
        return str(u)
    if spec == "%o":
        return f"0{u:o}"
    if spec == "%c":
        return chr(u & 0xFF)
    return f"0x{u:x}" if spec == "%x" else f"0x{u:X}"


def _decimals(x) -> str:
    """A float32 with six decimals, cut: printed with twelve, then six dropped."""
    f = float(np.float32(x))
    if f != f:
        return "nan"
    s = f"{f:.12f}"
    return s[:-6] if "." in s else s


def _render_field(f: Field, value) -> str:
    if f.lanes == 0:
        return render(f.spec, int(value))
    lanes = np.asarray(value[:f.lanes])
    if f.spec in VECTOR:
        return render(f.spec, lanes)
    x = lanes[0]
    return render(f.spec, float(x) if is_float(lanes.dtype) else int(x))


def _merged(pieces: list) -> tuple:
    """Adjacent literal pieces joined."""
    out: list = []
    for p in pieces:
        if isinstance(p, str) and out and isinstance(out[-1], str):
            out[-1] += p
        elif p != "":
            out.append(p)
    return tuple(out)


# -- the call and its C ------------------------------------------------------------------------

def _emit(pieces: tuple, fields: list[Field], call_args: list) -> None:
    """The ``ir.Call`` of this printf's function (named after what it prints, so equal
    printfs share one)."""
    tr = tracer()
    args = tuple(("int64_t" if f.lanes == 0 else f"const {FACTS[f.dtype].c_type} *", f"a{k}")
                 for k, f in enumerate(fields))
    name = "npk_printf_" + hashlib.sha1(repr(pieces).encode()).hexdigest()[:12]
    ext = ir.Extern(name, args, False, _c_source(name, pieces, args), Printer(pieces))
    tr.emit(ir.Call(ext, tuple(call_args), tr.label()))


def _c_source(name: str, pieces: tuple, args: tuple) -> str:
    body, k = [], 0
    for p in pieces:
        if isinstance(p, str):
            body.append(f"    fputs({c_string(p)}, stdout);")
            continue
        body.extend(f"    {line}" for line in _c_field(p, f"a{k}"))
        k += 1
    params = ", ".join(f"{t}{n}" if t.endswith("*") else f"{t} {n}" for t, n in args) \
        or "void"
    shown = "".join(p if isinstance(p, str) else p.spec for p in pieces)
    comment = repr(shown).replace("*/", "* /")
    return "\n".join([
        "#if defined(__GNUC__)",
        "#pragma GCC visibility push(default) /* the C library's functions stay its own */",
        "#endif",
        "#include <stdio.h>",
        "#include <string.h>",
        "#if defined(__GNUC__)",
        "#pragma GCC visibility pop",
        "#endif",
        f"/* S.printf of {comment}, build-time arguments rendered */",
        f"void {name}({params})",
        "{",
        *body,
        "    fflush(stdout);",
        "}"])


def _c_float(dt: str, x: str) -> str:
    """A float lane ``x`` of ``dt`` as a C float."""
    if dt == "bfloat16":  # the top half of a float32's bits
        return f"((union {{ uint32_t u; float f; }}){{ .u = (uint32_t){x} << 16 }}).f"
    return f"(float){x}"


def _c_decimals(f: str) -> list[str]:
    return ["{",
            "    char b[64];",
            f"    const double d = (double)({f});",
            '    const int n = d != d ? snprintf(b, sizeof b, "nan") : '
            'snprintf(b, sizeof b, "%.12f", d);',
            "    fwrite(b, 1, (size_t)(strchr(b, '.') ? n - 6 : n), stdout);",
            "}"]


def _c_field(f: Field, a: str) -> list[str]:
    """C printing field ``f`` from argument ``a``."""
    if f.spec in VECTOR:
        want = VECTOR[f.spec]
        lanes = f.lanes if isinstance(want, str) else 256 // want
        head = f"for (int k = 0; k < {lanes}; k++) {{"
        if isinstance(want, str):
            return [head, '    if (k) fputc(\',\', stdout);',
                    *("    " + x for x in _c_decimals(_c_float(f.dtype, f"{a}[k]"))), "}"]
        return [head, f"    uint{want}_t u;",
                f"    memcpy(&u, (const unsigned char *){a} + k * {want // 8}, sizeof u);",
                '    printf(k ? ",0x%x" : "0x%x", (unsigned)u);', "}"]
    x = a if f.lanes == 0 else f"{a}[0]"
    if f.spec == "%f":
        return _c_decimals(_c_float(f.dtype, x))
    if f.lanes and is_float(f.dtype):  # %x %X: the float32 bits
        u = f"((union {{ float f; uint32_t u; }}){{ .f = {_c_float(f.dtype, x)} }}).u"
    else:
        u = f"(uint32_t)(int64_t){x}"
    if f.spec in ("%d", "%i"):
        return [f'printf("%d", (int)(int32_t){u});']
    if f.spec == "%c":
        return [f"fputc((unsigned char){u}, stdout);"]
    prefix = {"%u": "", "%o": "0", "%x": "0x", "%X": "0x"}[f.spec]
    conv = {"%u": "u", "%o": "o", "%x": "x", "%X": "X"}[f.spec]
    return [f'printf("{prefix}%{conv}", (unsigned){u});']


__all__ = ["Field", "Printer", "printf", "render"]
