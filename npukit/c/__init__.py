"""The C back end: a Program as one C99 translation unit (``c_source``), compiled by the
system compiler and cached on disk (``toolchain``), run through ctypes on the numpy arrays
``Program.run(backend="c", ...)`` is given (``run_c``). See docs/c_backend.md.

>>> import numpy as np, npukit as nk
>>> from npukit import kernels as K
>>> prog = nk.build(K.mul_vectorized, target="torq", input1=nk.spec((100,), "int8"),
...                 input2=nk.spec((100,), "int8"), bias_scale=nk.spec((2,), "int32"),
...                 output=nk.spec((100,), "int8"), shift=8, out_min=-128, out_max=127)
>>> "void npukit_mul_vectorized(" in prog.c_source()
True
"""

from .. import ir
from .emit import c_header, c_source, entry_name
from .runtime import Compiled, compiled, run_c
from .toolchain import sanitizer_env

__all__ = ["Compiled", "c_header", "c_source", "compiled", "entry_name", "run_c",
           "sanitizer_env"]


def _run(prog: ir.Program, arrays: dict):
    # run_c is looked up here at each call: npukit.c.run_c is the entry of every C run.
    return run_c(prog, arrays)


ir.register_backend("c", _run, compiled)
ir.register_renderer("c_source", c_source)
