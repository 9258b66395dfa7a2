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
from ..cdecl import identifier
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
from .cnn import CNNGenerators
from .graph import GraphModel
from .lower import KernelLowering, Lowered, add_bounds
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


class Model(GraphModel, CNNGenerators):
    """Collects basic kernels, user kernels and groups; solves and lowers them on demand.
    ``l3`` names the target memory that holds arguments with an L3 home (``O_L2DB``).
    ``l3_budget`` and ``l3_flash_budget`` bound a graph's L3 RAM and flash (the CNN
    generators and graphs are the methods of ``CNNGenerators`` and ``GraphModel``)."""

    def __init__(self, target: str | Target = "gap8", l1_budget: int | None = None,
                 l2_budget: int | None = None, l3: str = "L3_RAM", *,
                 l3_budget: int | None = None, l3_flash_budget: int | None = None):
        self.target = _target(target)
        mem = self.target.memories
        self.l1_budget = integer("Model", "l1_budget", l1_budget, 1) if l1_budget is not None \
            else mem["L1"].size
        self.l2_budget = integer("Model", "l2_budget", l2_budget, 1) if l2_budget is not None \
            else mem["L2"].size
        self.l3_budget = l3_budget if l3_budget is not None else \
            (mem["L3_RAM"].size if "L3_RAM" in mem else 0)
        self.l3_flash_budget = l3_flash_budget if l3_flash_budget is not None else \
            (mem["L3_FLASH"].size if "L3_FLASH" in mem else 0)
        self.l3 = l3
        self.libs: dict[str, ir.Extern] = {}
        self.lib_bounds: dict[str, tuple] = {}  # basic kernel -> TCArg bounds of each argument
        self.kernels: dict[str, UserKernelT] = {}
        self.groups: dict[str, GroupT] = {}
        self._open: tuple[str, list] | None = None
        self._tilings: dict[str, Tiling] = {}
        self._graph_state()

    @classmethod
    def from_budgets(cls, L1Memory: int, L2Memory: int, L3Memory: int, L3Flash: int,
                     target: str | Target = "gap8") -> Model:
        """A model from the four budgets a GAP model function takes, as in
        ``MnistModel(48000, 300*1024, 8*1024*1024, 20*1024*1024)``."""
        return cls(target, L1Memory, L2Memory, l3_budget=L3Memory, l3_flash_budget=L3Flash)

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
        identifier(KernelName, "LibKernel name")
        check_lib(KernelName, CallType in (CALL_PARALLEL, CALL_SEQUENTIAL), Cargs,
                  ParArgTypeName, c_source, reference, cost)
        if ParArgTypeName:
            identifier(ParArgTypeName, f"LibKernel {KernelName!r}: ParArgTypeName")
        if KernelName in self.libs:
            raise TilingError(f"LibKernel {KernelName!r}: a basic kernel of that name is "
                              f"already declared")
        self.lib_bounds[KernelName] = tuple(c.bounds for c in Cargs)
        self.libs[KernelName] = ir.Extern(
            KernelName, tuple((c.ArgType, c.ArgName) for c in Cargs), CallType == CALL_PARALLEL,
            c_source, reference, cost, ParArgTypeName)

    def UserKernel(self, Name: str, KerDim: KernelDimensionT, KerIter: tuple, Orientation: str,
                   CArg: tuple[TCArg, ...], CCalls: tuple[CallT, ...],
                   KerArg: tuple[KerArgT, ...]) -> None:
        """A user kernel, checked as far as it can be before tiling (``validate``)."""
        identifier(Name, "UserKernel name")
        if Name in self.kernels or Name in self.groups:
            raise TilingError(f"UserKernel {Name!r}: the name is already used")
        uk = UserKernelT(Name, KerDim, tuple(KerIter), Orientation, tuple(CArg), tuple(CCalls),
                         tuple(KerArg))
        check_kernel(uk, self.libs)
        self.kernels[Name] = uk
        if self._open:
            self._open[1].append(Name)

    def OpenKernelGroup(self, GroupName: str) -> None:
        identifier(GroupName, "OpenKernelGroup name")
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
                               cmap, prefix=f"{uk.name}.", lib_bounds=self.lib_bounds).lower()
            for c in g.cargs:
                if c.ArgName in out.params:
                    add_bounds(out, c.ArgName, c.bounds, f"{name}: C argument {c.ArgName!r}")
            order = [c.ArgName for c in g.cargs]
        else:
            uk = self._kernel(name)
            KernelLowering(uk, self.tiling(name), self.libs, self.target, self.l3, out,
                           lib_bounds=self.lib_bounds).lower()
            order = [c.ArgName for c in uk.cargs]
        params = tuple(out.params[n] for n in order if n in out.params)
        bounds = tuple((n, *out.bounds[n]) for n in order if n in out.params and n in out.bounds)
        prog = ir.Program(name, self.target, params, tuple(out.buffers), tuple(out.body),
                          bounds=bounds)
        l2 = sum(b.nbytes for b in out.buffers if b.memory == "L2")
        if l2 > self.l2_budget:
            raise TilingError(f"{name}: L3 arguments need {l2} B of L2 staging, over the L2 "
                              f"budget of {self.l2_budget} B")
        return check(prog)


__all__ = ["Model"]
