"""``Model``: the AutoTiler's model-level calls as methods, without global state.

>>> from npukit.tiler import *
>>> m = Model(target="gap8", l1_budget=51200)
>>> m.LibKernel("MatSumPar", CALL_PARALLEL, CArgs(5, TCArg("Word32 * __restrict__", "In1"),
...     TCArg("Word32 * __restrict__", "In2"), TCArg("Word32 * __restrict__", "Out"),
...     TCArg("unsigned int", "W"), TCArg("unsigned int", "H")), "MatrixAdd_Arg_T")
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .. import ir
from ..errors import TilingError
from ..machine import Target
from ..machine import target as _target
from ..passes import check
from .api import (
    CALL_PARALLEL,
    CALL_SEQUENTIAL,
    KER_IN_PLANE,
    KER_OUT_PLANE,
    CallT,
    KerArgT,
    KernelDimensionT,
    TCArg,
    integer,
)
from .lower import KernelLowering, Lowered
from .solver import Tiling, solve
from .validate import check_calls, check_group, check_kernel, check_lib


@dataclass(frozen=True)
class UserKernelT:
    name: str
    dims: KernelDimensionT
    order: tuple
    orientation: str
    cargs: tuple[TCArg, ...]
    calls: tuple[CallT, ...]
    kerargs: tuple[KerArgT, ...]


@dataclass(frozen=True)
class GroupT:
    name: str
    members: tuple[str, ...]
    cargs: tuple[TCArg, ...]
    calls: tuple[CallT, ...]


class Model:
    """Collects basic kernels, user kernels and groups; solves and lowers them on demand.
    ``l3`` names the target memory that holds arguments with an L3 home (``O_L2DB``)."""

    def __init__(self, target: str | Target = "gap8", l1_budget: int | None = None,
                 l2_budget: int | None = None, l3: str = "L3_RAM"):
        self.target = _target(target)
        self.l1_budget = integer("Model", "l1_budget", l1_budget, 1) if l1_budget is not None \
            else self.target.memories["L1"].size
        self.l2_budget = integer("Model", "l2_budget", l2_budget, 1) if l2_budget is not None \
            else self.target.memories["L2"].size
        self.l3 = l3
        self.libs: dict[str, ir.Extern] = {}
        self.kernels: dict[str, UserKernelT] = {}
        self.groups: dict[str, GroupT] = {}
        self._open: tuple[str, list] | None = None
        self._tilings: dict[str, Tiling] = {}

    def LibKernel(self, KernelName: str, CallType: int, Cargs: tuple[TCArg, ...],
                  ParArgTypeName: str = "", *, c_source: str = "",
                  reference: Callable | None = None, cost: Callable | None = None) -> None:
        """A basic kernel: its C template, ``c_source`` (the full C definition, for the C
        back end), ``reference`` (numpy, for the simulator: pointers arrive as flat 1-D
        views of what they may reach, the rest of their tile's slot or of their tensor, a
        slice past the end raising and an input tensor read-only; scalars as ints;
        parallel kernels also get ``core_id``, ``core_count``; without one the program
        runs on the C back end only) and
        ``cost`` (cycles of work per call, from the scalar arguments known without reading
        memory — tile sizes, indices, immediates — by C name; accept ``**_`` for the rest;
        a parallel call takes ``ceil(cost / cores)`` cycles)."""
        check_lib(KernelName, CallType in (CALL_PARALLEL, CALL_SEQUENTIAL), Cargs,
                  ParArgTypeName, c_source, reference, cost)
        if KernelName in self.libs:
            raise TilingError(f"LibKernel {KernelName!r}: a basic kernel of that name is "
                              f"already declared")
        self.libs[KernelName] = ir.Extern(
            KernelName, tuple((c.ArgType, c.ArgName) for c in Cargs), CallType == CALL_PARALLEL,
            c_source, reference, cost, ParArgTypeName)

    def UserKernel(self, Name: str, KerDim: KernelDimensionT, KerIter: tuple, Orientation: str,
                   CArg: tuple[TCArg, ...], CCalls: tuple[CallT, ...],
                   KerArg: tuple[KerArgT, ...]) -> None:
        """A user kernel, checked as far as it can be before tiling (``validate``)."""
        if not isinstance(Name, str) or not Name:
            raise TilingError(f"UserKernel: Name must be a non-empty string, got {Name!r}")
        if Name in self.kernels or Name in self.groups:
            raise TilingError(f"UserKernel {Name!r}: the name is already used")
        uk = UserKernelT(Name, KerDim, tuple(KerIter), Orientation, tuple(CArg), tuple(CCalls),
                         tuple(KerArg))
        check_kernel(uk, self.libs)
        self.kernels[Name] = uk
        if self._open:
            self._open[1].append(Name)

    def OpenKernelGroup(self, GroupName: str) -> None:
        if self._open:
            raise TilingError(f"OpenKernelGroup {GroupName!r}: group {self._open[0]!r} is open")
        self._open = (GroupName, [])

    def CloseKernelGroup(self) -> None:
        if not self._open:
            raise TilingError("CloseKernelGroup: no group is open")
        name, members = self._open
        self.groups[name] = GroupT(name, tuple(members), (), ())
        self._open = None

    def UserKernelGroup(self, GroupName: str, Carg: tuple[TCArg, ...], Ccalls: tuple[CallT, ...]):
        if GroupName not in self.groups:
            raise TilingError(f"UserKernelGroup {GroupName!r}: open and close the group first")
        g = self.groups[GroupName]
        check_group(GroupName, g.members, Carg, Ccalls, self.kernels)
        self.groups[GroupName] = GroupT(GroupName, g.members, tuple(Carg), tuple(Ccalls))

    # -- results -----------------------------------------------------------------------------

    def tiling(self, name: str) -> Tiling:
        """The solved tiling of user kernel ``name``."""
        if name not in self._tilings:
            uk = self._kernel(name)
            check_calls(uk, self.libs)
            counts = {KER_IN_PLANE: uk.dims.InPlanes, KER_OUT_PLANE: uk.dims.OutPlanes}
            self._tilings[name] = solve(name, uk.kerargs, uk.orientation, uk.order, counts,
                                        self.l1_budget)
        return self._tilings[name]

    def _kernel(self, name: str) -> UserKernelT:
        if name not in self.kernels:
            raise TilingError(f"no user kernel {name!r}; kernels: {sorted(self.kernels)}")
        return self.kernels[name]

    def program(self, name: str) -> ir.Program:
        """The IR program of a user kernel or a group; run it with the C argument names."""
        out = Lowered()
        if name in self.groups:
            g = self.groups[name]
            for c in g.calls:
                uk = self._kernel(c.CallName)
                cmap = {ca.ArgName: (b.name if b.kind == "c_arg" else b.value)
                        for ca, b in zip(uk.cargs, c.BindingList)}
                KernelLowering(uk, self.tiling(uk.name), self.libs, self.target, self.l3, out,
                               cmap, prefix=f"{uk.name}.").lower()
            order = [c.ArgName for c in g.cargs]
        else:
            uk = self._kernel(name)
            KernelLowering(uk, self.tiling(name), self.libs, self.target, self.l3, out).lower()
            order = [c.ArgName for c in uk.cargs]
        params = tuple(out.params[n] for n in order if n in out.params)
        prog = ir.Program(name, self.target, params, tuple(out.buffers), tuple(out.body))
        l2 = sum(b.nbytes for b in out.buffers if b.memory == "L2")
        if l2 > self.l2_budget:
            raise TilingError(f"{name}: L3 arguments need {l2} B of L2 staging, over the L2 "
                              f"budget of {self.l2_budget} B")
        return check(prog)


__all__ = ["Model"]
