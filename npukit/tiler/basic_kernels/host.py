"""One basic kernel compiled alone for the host, called on numpy arrays: how its C is checked
against its numpy reference and timed outside a graph. The kernel runs as each of ``cores``
cores in turn, core 0 first, as a graph's C runs a parallel kernel on one thread.

>>> import numpy as np
>>> from npukit.tiler.basic_kernels import convolution, host
>>> set_bias = host.c_function(convolution.set_bias("float32", "float32"))
>>> out = np.zeros(6, np.float32)
>>> set_bias(out, 3, 2, np.array([1.5, 2.5], np.float32), 1, 0)
>>> out
array([2.5, 2.5, 2.5, 2.5, 2.5, 2.5], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...c import toolchain
from ...c.calls import prelude
from ...c.preamble import PORTABILITY
from ...dtypes import FACTS, dtype
from ...errors import DTypeError, ShapeError
from .common import BasicKernel

# The numpy type of each C element type the basic kernels point to.
_ELEMENT = {f.gap_c_type: dtype(name) for name, f in FACTS.items() if f.gap_c_type}


def _element(c_type: str) -> np.dtype:
    """The element type of a pointer argument's C type (``const float *__restrict__``)."""
    words = c_type.replace("*", " ").replace("__restrict__", " ").split()
    return _ELEMENT[" ".join(w for w in words if w != "const")]


def c_function(kernel: BasicKernel, cores: int = 8, repeat: int = 1,
               constants: dict[str, int] | None = None) -> Callable[..., None]:
    """``kernel``'s C compiled with a wrapper that runs it as cores ``0 .. cores-1``
    (``repeat`` times over, to time it); the function returned takes the kernel's arguments
    in order (C-contiguous arrays of the pointed type for pointers, ints for the others) and
    writes into the arrays. ``constants`` gives scalar arguments as the literals a graph's
    call writes (the compiler specialises the kernel to them); the call must pass the same
    values."""
    constants = constants or {}
    pointers = [i for i, (t, _) in enumerate(kernel.args) if "*" in t]
    scalars = [i for i, (t, n) in enumerate(kernel.args) if "*" not in t and n not in constants]
    fixed = {i: constants[n] for i, (_, n) in enumerate(kernel.args) if n in constants}
    params = [f"void *{kernel.args[i][1]}" for i in pointers]
    params += [f"long long {kernel.args[i][1]}" for i in scalars]
    values = ", ".join(f"({t}){constants.get(n, n)}" for t, n in kernel.args)
    source = f"""\
{PORTABILITY}
{prelude(cores)}
{kernel.c_source}
/* {kernel.name} as each of the {cores} cores in turn, core 0 first ({repeat} times). */
void npk_run_alone({", ".join(params) or "void"})
{{
    for (int Time = 0; Time < {repeat}; Time++)
        for (npk_core_id = 0; npk_core_id < {cores}; npk_core_id++)
            {kernel.name}({values});
    npk_core_id = 0;
}}"""
    fn = toolchain.function(source, "npk_run_alone", len(pointers), len(scalars))
    types = {i: _element(kernel.args[i][0]) for i in pointers}

    def call(*args) -> None:
        if len(args) != len(kernel.args):
            raise ShapeError(f"{kernel.name}: {len(kernel.args)} arguments "
                             f"({', '.join(n for _, n in kernel.args)}), got {len(args)}")
        for i in pointers:
            a = args[i]
            if not isinstance(a, np.ndarray) or a.dtype != types[i]:
                raise DTypeError(f"{kernel.name}: argument {kernel.args[i][1]} must be a "
                                 f"numpy array of {types[i]}, got "
                                 f"{getattr(a, 'dtype', type(a).__name__)}")
            if not a.flags.c_contiguous:
                raise ShapeError(f"{kernel.name}: argument {kernel.args[i][1]} must be "
                                 f"C-contiguous")
        for i, v in fixed.items():
            if args[i] != v:
                raise ShapeError(f"{kernel.name}: argument {kernel.args[i][1]} was compiled "
                                 f"as {v}, got {args[i]}")
        fn(*(args[i].ctypes.data for i in pointers), *(int(args[i]) for i in scalars))

    return call
