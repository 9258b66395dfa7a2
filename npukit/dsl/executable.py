"""The Compass DSL's ``BuildManager``: a kernel built into an executable whose calls run the
generated C, as the public DSL's ``ex = BuildManager().build(func); ex(*arrays)`` runs the
NPU simulator.

>>> import numpy as np
>>> from npukit.dsl import BuildManager, script as S
>>> @S.prim_func
... def twice(a: S.ptr("int32", "global"), b: S.ptr("int32", "global"), n: S.i32):
...     for i in range(n):
...         b[i] = a[i] * 2
>>> ex = BuildManager().build(twice)
>>> a, b = np.arange(8, dtype=np.int32), np.zeros(8, np.int32)
>>> ex(a, b, 8)          # the C back end
>>> b.tolist()
[0, 2, 4, 6, 8, 10, 12, 14]
>>> "twice" in ex.c_code
True
"""

from __future__ import annotations

import dis
import sys
import types

from ..errors import CompassBuildError, DTypeError, KernelError, NpukitError, TargetError
from ..machine import target as _target
from .builtins_lanes import ConstantIndexError
from .kernel import PrimFunc, _build
from .types import PtrType
from .values import BroadcastError

# The Compass targets npukit models as target "compass" (npukit/targets): the X2 core, and
# the X3P core, whose builtins the public DSL computes as on X2 (one Python simulator
# implementation of each; 256-bit vectors on both). X3P lacks vmml, vmma and the float
# vqdpa, which the public DSL refuses there and npukit does not.
_MODELLED = ("X2_1204", "X2_1204MP3", "X3P_1304")


def _compass_target(name: str | None):
    """npukit's target for a Compass DSL target name ("X2_1204", "compass -mcpu=X2_1204")."""
    cpu = (name or "X2_1204").split("-mcpu=")[-1].strip()
    if cpu == "compass" or cpu.startswith("X2_") or cpu in _MODELLED:
        return _target("compass")
    raise TargetError(f"BuildManager(target={name!r}): npukit models the Zhouyi X2 and X3P "
                      f"cores (target 'compass', as {', '.join(_MODELLED)}); {cpu} is not "
                      f"modelled")


class BuildManager:
    """Builds Compass DSL kernels for a target (``"X2_1204"`` by default); the public DSL's
    compiler options (``disabled_pass`` and the like) are accepted and change nothing."""

    def __init__(self, target: str | None = None, **options):
        self.target = _compass_target(target)
        self.options = options

    def build(self, func: PrimFunc, name: str | None = None) -> Executable:
        """An executable of ``func`` (a ``@S.prim_func``). A kernel without scalar
        parameters is built here, so a kernel whose types npukit refuses fails here, as in
        the public DSL: the error is written to stderr and raised as a
        ``CompassBuildError`` (a ``RuntimeError``). What depends on the arrays' sizes is
        checked when the executable is called."""
        if not isinstance(func, PrimFunc):
            raise KernelError(f"BuildManager.build: {func!r} is not a Compass DSL kernel; "
                              f"decorate it with @S.prim_func")
        ex = Executable(func, self.target, name or func.name)
        try:
            _refuse_python_builtins(func)
            if not _scalar_parameters(func):
                ex.program = _typed_program(func, self.target)
            else:
                _refuse_by_types(func, self.target)
        except NpukitError as exc:
            print(f"error: {exc}", file=sys.stderr)  # where the public DSL reports it
            raise CompassBuildError(str(exc)) from exc
        return ex


def _typed_program(func: PrimFunc, target):
    """``func``'s program, or None where building it needs the arrays' sizes (a gather
    table's extent, say): only a type error is final before the call."""
    try:
        return func.host_program(target)
    except DTypeError:
        raise
    except NpukitError:
        return None  # the call builds it with the arrays' sizes and reports what remains


def _refuse_by_types(func: PrimFunc, target) -> None:
    """A kernel with scalar parameters is built for their values at its call; it is traced
    here with stand-in values (1) only for the refusals that no value changes
    (``BroadcastError``, ``ConstantIndexError``), which the public DSL makes at build."""
    try:
        _build(func, target, {n: 1 for n in _scalar_parameters(func)}, partial=True)
    except (BroadcastError, ConstantIndexError):
        raise
    except Exception:  # noqa: BLE001 - what a stand-in breaks, the call finds with the values
        return


def _scalar_parameters(func: PrimFunc) -> list[str]:
    """The parameters a call gives as numbers (npukit specialises the kernel for them)."""
    return [n for n, p in func.signature.parameters.items() if not isinstance(p.annotation,
                                                                              PtrType)]


# Python builtins a kernel may not call, and the Compass DSL's name to use instead
_REFUSED_BUILTINS = {"max": "S.max", "min": "S.min", "print": "S.printf"}


def _refuse_python_builtins(func: PrimFunc) -> None:
    """The public DSL refuses Python's ``max``/``min`` (``S.max``/``S.min`` are its own)
    and ``print`` (``S.printf`` prints on the device) in a kernel; npukit refuses them at
    build too, rather than comparing or printing at build time."""
    codes = [func.fn.__code__]
    while codes:
        code = codes.pop()
        codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
        for ins in dis.get_instructions(code):
            if ins.opname == "LOAD_GLOBAL" and ins.argval in _REFUSED_BUILTINS and \
                    ins.argval not in func.fn.__globals__:
                raise KernelError(f'{func.name}: Python\'s {ins.argval}() in a kernel: The '
                                  f'built-in "{ins.argval}" isn\'t supported, please use '
                                  f'"{_REFUSED_BUILTINS[ins.argval]}".')


class Executable:
    """A built kernel: ``ex(*args)`` runs it in generated C with the arguments of a call of
    the kernel (numpy arrays for pointers, numbers for scalars), writing the arrays;
    ``ex.c_code`` is the C of the last call (npukit specialises a kernel for its scalar
    arguments, so the C exists once they are known)."""

    def __init__(self, func: PrimFunc, target, name: str):
        self.func, self.target, self.name = func, target, name
        self.program = None

    def __call__(self, *args, **kwargs) -> None:
        self.program, arrays = self.func.specialise(self.target, args, kwargs)
        self.program.run("c", **arrays)

    def run(self, *args, **kwargs) -> None:
        """The same as calling the executable."""
        self(*args, **kwargs)

    @property
    def c_code(self) -> str:
        if self.program is None:
            scalars = _scalar_parameters(self.func)
            if scalars:
                raise KernelError(f"{self.name}.c_code: call the executable first: npukit "
                                  f"specialises the kernel for its scalar arguments "
                                  f"({', '.join(scalars)}), so its C exists after a call")
            self.program = self.func.host_program(self.target)
        return self.program.c_source()

    def _refused(self, what: str):
        raise NpukitError(f"{self.name}.{what}: npukit runs kernels on its simulator and in "
                          f"generated C on this machine; there is no Zhouyi board or NPU "
                          f"profiler to reach (use the cycles of prog.run('sim', ...))")

    def benchmark(self, *args, **kwargs):
        self._refused("benchmark")

    def profile(self, *args, **kwargs):
        self._refused("profile")


def get_rpc_session(*args, **kwargs):
    """The public DSL's RPC session to a Zhouyi board: not modelled (an ``NpukitError``)."""
    raise NpukitError("get_rpc_session: RPC to a Zhouyi board is not modelled by npukit; "
                      "run ex(...) (generated C) or call the kernel (the simulator)")


def aiff(*args, **kwargs):
    """The AIFF accelerator: not modelled (a ``KernelError``)."""
    raise KernelError("S.aiff: the AIFF accelerator is not modelled by npukit")


def async_aiff(*args, **kwargs):
    """The AIFF accelerator: not modelled (a ``KernelError``)."""
    raise KernelError("S.async_aiff: the AIFF accelerator is not modelled by npukit")
