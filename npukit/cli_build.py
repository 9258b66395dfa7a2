"""``npukit build FILE.py:KERNEL --target T --spec NAME=SHAPE:DTYPE ... -o OUT.c``: build an
EasyKernel kernel from a Python file and write its C and a header declaring the entry point.

    npukit build kernels.py:mul --target torq --spec input1=1000:int8 \\
        --spec input2=1000:int8 --spec bias_scale=2:int32 --spec output=1000:int8 \\
        --attr shift=8 --attr out_min=-128 --attr out_max=127 -o mul.c

writes ``mul.c`` (the translation unit, ``npukit.c.c_source``) and ``mul.h`` (the entry
function ``npukit_<kernel>``'s prototype, each parameter described: ``npukit.c.c_header``).
"""

from __future__ import annotations

import argparse
import ast
import runpy
import sys
from pathlib import Path

from .easy import Kernel, build, spec
from .errors import KernelError, NpukitError, ShapeError


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``build`` to the ``npukit`` command's subparsers."""
    p = subparsers.add_parser(
        "build", help="build a kernel of a Python file and write its C and header",
        description=__doc__.replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kernel", metavar="FILE.py:KERNEL",
                   help="a Python file and the name of an @npukit.kernel function in it")
    p.add_argument("--target", default="torq",
                   help="a built-in target name or the path of a target TOML file "
                        "(default: torq)")
    p.add_argument("--spec", action="append", default=[], metavar="NAME=SHAPE:DTYPE",
                   help="a tensor parameter: shape as 2,5,7 (or 2x5x7; () for a scalar) "
                        "and a dtype name, e.g. input1=1000:int8; one per tensor")
    p.add_argument("--attr", action="append", default=[], metavar="NAME=VALUE",
                   help="a keyword attribute of the kernel, e.g. shift=8 (a Python literal, "
                        "else the text itself)")
    p.add_argument("-o", "--output", required=True, metavar="OUT.c",
                   help="the C file to write; the header goes next to it as OUT.h")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Carry out ``npukit build`` for parsed ``args``; returns the exit code."""
    try:
        from .c import c_header, c_source, entry_name

        c_path, h_path = output_paths(args.output)
        kern = load_kernel(args.kernel)
        specs = dict(parse_spec(text) for text in args.spec)
        attrs = dict(parse_attr(text) for text in args.attr)
        prog = build(kern, target=args.target, **specs, **attrs)
        source, header = c_source(prog), c_header(prog)
        try:
            c_path.write_text(source)
            h_path.write_text(header)
        except OSError as exc:
            raise NpukitError(f"cannot write {exc.filename}: {exc.strerror}") from exc
    except NpukitError as exc:
        print(f"npukit build: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {c_path} ({source.count(chr(10))} lines) and {h_path}: "
          f"void {entry_name(prog)}({', '.join(b.name for b, _ in prog.params)})")
    return 0


def output_paths(output: str) -> tuple[Path, Path]:
    """(C path, header path) for ``-o OUTPUT``: the header is OUTPUT with the suffix ``.h``;
    refused when that is the C file itself (``-o k.h``), which the header would overwrite.

    >>> output_paths("out/mul.c")
    (PosixPath('out/mul.c'), PosixPath('out/mul.h'))
    """
    c_path = Path(output)
    if c_path.name in ("", "..") or output.endswith("/"):
        raise KernelError(f"-o {output!r}: give the path of a C file, e.g. mul.c")
    h_path = c_path.with_suffix(".h")
    if h_path.resolve() == c_path.resolve():
        raise KernelError(f"-o {output!r}: the header would be written over the C file (the "
                          f"header is OUTPUT with the suffix .h); name the C file OUT.c")
    return c_path, h_path


def load_kernel(ref: str) -> Kernel:
    """The kernel ``NAME`` of ``FILE.py:NAME``; the file runs as a module (not as a script:
    its ``if __name__ == "__main__":`` part does not run)."""
    path, sep, name = ref.rpartition(":")
    if not sep or not path or not name:
        raise KernelError(f"expected FILE.py:KERNEL, got {ref!r}")
    if not Path(path).is_file():
        raise KernelError(f"{ref}: no file {path!r}")
    try:
        scope = runpy.run_path(path)
    except NpukitError:
        raise
    except Exception as exc:  # the user's file failed: say where, keep its message
        raise KernelError(f"{path}: running the file failed: {type(exc).__name__}: {exc}") \
            from exc
    kernels = sorted(k for k, v in scope.items() if isinstance(v, Kernel))
    if not isinstance(scope.get(name), Kernel):
        what = "not an @npukit.kernel function" if name in scope else "not defined"
        raise KernelError(f"{ref}: {name!r} is {what} in {path}; kernels there: "
                          f"{', '.join(kernels) or 'none'}")
    return scope[name]


def parse_spec(text: str):
    """``"input1=2,5,7:int8"`` -> ``("input1", spec((2, 5, 7), "int8"))``.

    >>> parse_spec("x=2x5x7:int8")
    ('x', Layout(int8[2, 5, 7], strides=(35, 7, 1), offset=0))
    >>> parse_spec("n=():int32")[1].shape
    ()
    """
    name, eq, rest = text.partition("=")
    shape, colon, dtype = rest.rpartition(":")
    if not eq or not colon or not name or not dtype:
        raise ShapeError(f"--spec {text!r}: expected NAME=SHAPE:DTYPE, e.g. input1=1000:int8")
    dims = shape.strip("()[] ").replace("x", ",").split(",")
    try:
        dims = tuple(int(d) for d in dims if d.strip())
    except ValueError:
        raise ShapeError(f"--spec {text!r}: shape {shape!r} is not a list of integers like "
                         f"2,5,7") from None
    return name.strip(), spec(dims, dtype.strip())


def parse_attr(text: str):
    """``"shift=8"`` -> ``("shift", 8)``; a value that is no Python literal stays text.

    >>> parse_attr("vector=alu"), parse_attr("clamp=(-8, 8)")
    (('vector', 'alu'), ('clamp', (-8, 8)))
    """
    name, eq, value = text.partition("=")
    if not eq or not name.strip():
        raise KernelError(f"--attr {text!r}: expected NAME=VALUE, e.g. shift=8")
    try:
        return name.strip(), ast.literal_eval(value.strip())
    except (ValueError, SyntaxError):
        return name.strip(), value.strip()
