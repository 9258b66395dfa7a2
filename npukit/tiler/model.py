"""``Model``: the AutoTiler's model-level calls as methods, without global state.

>>> from npukit.tiler import *
>>> m = Model(target="gap8", l1_budget=51200)
>>> m.LibKernel("MatSumPar", CALL_PARALLEL, CArgs(5, TCArg("Word32 * __restrict__", "In1"),
...     TCArg("Word32 * __restrict__", "In2"), TCArg("Word32 * __restrict__", "Out"),
...     TCArg("unsigned int", "W"), TCArg("unsigned int", "H")), "MatrixAdd_Arg_T")
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace

from .. import ir
from ..cdecl import file_name, identifier
from ..errors import CapacityError, TargetError, TilingError
from ..machine import Target
from ..machine import target as _target
from ..machine import targets as _targets
from ..passes import check
from .api import (
    CALL_PARALLEL,
    CALL_SEQUENTIAL,
    INT_MAX,
    CallT,
    KerArgT,
    KernelDimensionT,
    TCArg,
    integer,
)
from .cnn import CNNGenerators
from .graph import GraphModel
from .lower import KernelLowering, Lowered, add_bounds
from .solver import Problem, Tiling, solve
from .spaces import kernel_frames
from .validate import alias_target, check_calls, check_group, check_kernel, check_lib

AUTOTILER_VERSIONS = ("3.0", "4")  # the AutoTiler versions whose rules npukit applies
# The memories the tiler places tiles (L1) and kernel arguments (L2) in, by name.
TILER_MEMORIES = ("L1", "L2")


def _tiler_gap(t: Target) -> str | None:
    """What ``t`` lacks for the tiler (memories ``TILER_MEMORIES``, an engine between
    them), or None."""
    missing = [m for m in TILER_MEMORIES if m not in t.memories]
    if missing:
        return f"no memory named {' or '.join(missing)}"
    try:
        t.engine("L2", "L1"), t.engine("L1", "L2")
    except TargetError:
        return "no transfer engine between L2 and L1"
    return None


def tiler_target(target: str | Target) -> Target:
    """``target`` (a built-in name, a TOML path or a ``Target``) when the tiler can plan on
    it: memories L1 (tiles) and L2 (kernel arguments) and a transfer engine between them.
    Otherwise a ``TargetError`` naming what it lacks and the built-in targets that have it:

    >>> tiler_target("gap8").name
    'gap8'
    """
    t = _target(target)
    gap = _tiler_gap(t)
    if gap:
        able = [n for n in _targets() if _tiler_gap(_target(n)) is None]
        raise TargetError(f"target {t.name!r} has {gap} (memories: {', '.join(t.memories)}): "
                          f"the tiler places tiles in L1 and kernel arguments in L2; "
                          f"AutoTiler and ONNX models plan on "
                          f"{', '.join(able) or 'a target file that has them'}")
    return t


@dataclass(frozen=True)
class UserKernelT:
    name: str
    dims: KernelDimensionT
    order: tuple
    orientation: str
    cargs: tuple[TCArg, ...]
    calls: tuple[CallT, ...]
    kerargs: tuple[KerArgT, ...]
    iter_space: object = None  # newer generation: its KernelIterSpace (then order is ())


@dataclass(frozen=True)
class GroupT:
    name: str
    members: tuple[str, ...]
    cargs: tuple[TCArg, ...]
    calls: tuple[CallT, ...]


@dataclass
class Settings:
    """The model-control calls' values (``SetKernelOpts``, ``SetInlineMode``,
    ``SetSymbolNames``, ``SetSymbolDynamics``, ``SetUsedFilesNames``,
    ``SetGeneratedFilesNames``): what the tiler, the GAP-style emitter and the graphs'
    ``GenerateTilingCode`` use."""

    promote: bool = True  # KER_OPT_BUFFER_PROMOTE
    inline: int = 2  # SINGLE_INLINE
    l1_symbol: str = "L1_Memory"
    l2_symbol: str = "L2_Memory"
    dynamic: bool = False  # symbols are pointers (allocated by the caller), not arrays
    std_types: str = ""
    headers: tuple[str, ...] = ()
    files: tuple[str, str] | None = None  # (.c, .h); None: each writer's default names
    init_files: tuple[str, str] | None = None


class Model(GraphModel, CNNGenerators):
    """Collects basic kernels, user kernels and groups; solves and lowers them on demand.
    ``l3`` names the target memory that holds arguments with an L3 home (``O_L2DB``).
    ``l3_budget`` and ``l3_flash_budget`` bound a graph's L3 RAM and flash (the CNN
    generators and graphs are the methods of ``CNNGenerators`` and ``GraphModel``).
    ``autotiler_version`` ("3.0" or "4", the newest) picks the rules of that AutoTiler
    version for kernels written with ``KernelIterSpace`` (docs/tiler.md lists them)."""

    def __init__(self, target: str | Target = "gap8", l1_budget: int | None = None,
                 l2_budget: int | None = None, l3: str = "L3_RAM", *,
                 l3_budget: int | None = None, l3_flash_budget: int | None = None,
                 autotiler_version: str = "4"):
        if autotiler_version not in AUTOTILER_VERSIONS:
            raise TilingError(f"Model(autotiler_version={autotiler_version!r}): the versions "
                              f"are {', '.join(map(repr, AUTOTILER_VERSIONS))}")
        self.autotiler_version = autotiler_version
        self.target = tiler_target(target)
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
        # The way each convolution of given arguments was tiled (layer_generators_conv).
        self._fewest: dict[tuple, int] = {}
        # name -> (kernel, tiling, l2 budget, l3, libraries, program): a user kernel's
        # program, lowered and checked once for the objects it was made from (``program``).
        self._programs: dict[str, tuple] = {}
        # (kernel and tiling but their names, l3, l2 budget, libraries) -> the program.
        self._shapes: dict[tuple, ir.Program] = {}
        # id(program) -> (program, cycles or the program it was renamed from) (``cycles``).
        self._cycles: dict[int, tuple] = {}
        self.settings = Settings()
        self._graph_state()

    _MEMOS = ("_programs", "_shapes", "_cycles")

    def __getstate__(self) -> dict:
        """The model without its memos of programs and cycles (a pickled plan,
        ``npukit.onnx.plan_cache``, has its layers' programs; the memos start empty)."""
        return {k: v for k, v in self.__dict__.items() if k not in self._MEMOS}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, **{k: {} for k in self._MEMOS})

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

    def UserKernel(self, Name: str, KerDim, KerIter, Orientation, CArg, CCalls,
                   KerArg=None) -> None:
        """A user kernel, checked as far as it can be before tiling (``validate``). Older
        generation: ``UserKernel(Name, KernelDimensions(...), KernelIterationOrder(...),
        Orientation, CArgs, Calls, KerArgs)``; newer: ``UserKernel(Name,
        KernelIterSpace(...), Orientation, CArgs, Calls, KerArgs)``."""
        from .api_spaces import KernelIterSpaceT
        iter_space = None
        if isinstance(KerDim, KernelIterSpaceT):
            if KerArg is not None:
                raise TilingError(f"UserKernel {Name!r}: with a KernelIterSpace it takes (Name, "
                                  f"KernelIterSpace, Orientation, CArgs, Calls, KerArgs)")
            iter_space, KerArg = KerDim, CCalls
            KerDim, KerIter, Orientation, CArg, CCalls = (
                KernelDimensionT(1, 1, 1, 1), (), KerIter, Orientation, CArg)
        elif KerArg is None:
            raise TilingError(f"UserKernel {Name!r}: takes (Name, KernelDimensions, "
                              f"KernelIterationOrder, Orientation, CArgs, Calls, KerArgs) or "
                              f"(Name, KernelIterSpace, Orientation, CArgs, Calls, KerArgs)")
        identifier(Name, "UserKernel name")
        if Name in self.kernels or Name in self.groups:
            raise TilingError(f"UserKernel {Name!r}: the name is already used")
        uk = UserKernelT(Name, KerDim, tuple(KerIter), Orientation, tuple(CArg), tuple(CCalls),
                         tuple(KerArg), iter_space)
        check_kernel(uk, self.libs)
        if iter_space is not None:
            uk = replace(uk, kerargs=tuple(
                replace(a, Alias=alias_target(Name, uk.kerargs, a)) if a.Alias is not None else a
                for a in uk.kerargs))
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

    # -- model control (the AutoTiler's Set* calls) ----------------------------------------

    def SetL1MemorySize(self, Size: int) -> None:
        """The L1 budget of the user kernels (bytes)."""
        if integer("SetL1MemorySize", "Size", Size, -INT_MAX) < 1:
            raise TilingError(f"SetL1MemorySize({Size}): the L1 budget must be positive")
        self.l1_budget = int(Size)
        self._tilings.clear()

    def SetKernelOpts(self, On: int, Off: int) -> None:
        """Turn kernel optimisations on and off: ``KER_OPT_BUFFER_PROMOTE`` (every argument
        one L1 buffer when they all fit whole; on by default)."""
        from .api_spaces import KER_OPT_BUFFER_PROMOTE
        On, Off = integer("SetKernelOpts", "On", On), integer("SetKernelOpts", "Off", Off)
        if Off & KER_OPT_BUFFER_PROMOTE:
            self.settings.promote = False
        if On & KER_OPT_BUFFER_PROMOTE:
            self.settings.promote = True
        self._tilings.clear()

    def SetInlineMode(self, Mode: int) -> None:
        """``ALWAYS_INLINE``, ``NEVER_INLINE`` or ``SINGLE_INLINE``: recorded; npukit writes
        every user kernel as a function of its own, with its numbers spelled out, as the
        AutoTiler does when it inlines."""
        if integer("SetInlineMode", "Mode", Mode) not in (0, 1, 2):
            raise TilingError(f"SetInlineMode({Mode!r}): give NEVER_INLINE, ALWAYS_INLINE or "
                              f"SINGLE_INLINE")
        self.settings.inline = int(Mode)

    def SetSymbolNames(self, L1SymbName: str, L2SymbName: str, *descriptors: str) -> None:
        """The C names of the L1 and L2 areas generated code uses (the older generation's
        two kernel-descriptor names are accepted and unused: kernels are inlined)."""
        self.settings.l1_symbol = identifier(L1SymbName, "SetSymbolNames L1 symbol")
        self.settings.l2_symbol = identifier(L2SymbName, "SetSymbolNames L2 symbol")
        for d in descriptors:
            identifier(d, "SetSymbolNames descriptor symbol")

    def SetSymbolDynamics(self) -> None:
        """The L1 and L2 symbols are pointers the caller allocates, not arrays."""
        self.settings.dynamic = True

    def SetUsedFilesNames(self, StdTypedefsName, LibKernelFileCount: int, *names: str) -> None:
        """Headers the generated header includes: standard types (0 for the default) and
        ``LibKernelFileCount`` basic-kernel headers."""
        if int(LibKernelFileCount) != len(names):
            raise TilingError(f"SetUsedFilesNames: {LibKernelFileCount} headers announced, "
                              f"{len(names)} given")
        self.settings.std_types = file_name(StdTypedefsName, "SetUsedFilesNames: standard "
                                            "types header") if StdTypedefsName else ""
        self.settings.headers = tuple(file_name(n, "SetUsedFilesNames: kernel header")
                                      for n in names)

    def SetGeneratedFilesNames(self, *names: str) -> None:
        """``(Kernels.c, Kernels.h)``, or the older generation's four names ``(KernelsInit.c,
        KernelsInit.h, Kernels.c, Kernels.h)``."""
        if len(names) not in (2, 4):
            raise TilingError(f"SetGeneratedFilesNames: give two names (.c, .h) or four, got "
                              f"{len(names)}")
        names = tuple(file_name(n, "SetGeneratedFilesNames: file name") for n in names)
        self.settings.files = names[-2:]
        self.settings.init_files = names[:2] if len(names) == 4 else None

    def SetStyle(self, Old: int) -> None:
        """Accepted for line-by-line ports: npukit tells the generations apart by their
        arguments (a ``KernelIterSpace`` or ``KernelDimensions``)."""

    def emit(self, directory, style: str = "gap") -> dict:
        """Write the generated files into ``directory``: ``style="gap"`` writes
        ``<Name>Kernels.c`` / ``.h`` as the AutoTiler names and structures them, and
        ``at_host.h`` mapping their GAP macros to the host (``npukit.tiler.gap_c``).
        Returns {file name: path}."""
        from . import gap_c
        if style != "gap":
            raise TilingError(f"emit(style={style!r}): the styles are 'gap'")
        return gap_c.emit(self, directory)

    # -- results -----------------------------------------------------------------------------

    def tiling(self, name: str) -> Tiling:
        """The solved tiling of user kernel ``name``."""
        if name not in self._tilings:
            uk = self._kernel(name)
            check_calls(uk, self.libs)
            spaces, frames = kernel_frames(uk)
            _fits_target(name, frames, self.target, {"L3_RAM": self.l3_budget,
                                                     "L3_FLASH": self.l3_flash_budget})
            self._tilings[name] = solve(Problem(
                name, spaces, frames, self.l1_budget, self.settings.promote,
                "old" if uk.iter_space is None else "new", self.autotiler_version))
        return self._tilings[name]

    def _kernel(self, name: str) -> UserKernelT:
        if name not in self.kernels:
            raise TilingError(f"no user kernel {name!r}; kernels: {sorted(self.kernels)}")
        return self.kernels[name]

    def program(self, name: str) -> ir.Program:
        """The IR program of a user kernel or a group; run it with the C argument names."""
        if name not in self.groups:
            uk, tiling = self._kernel(name), self.tiling(name)
            got = self._programs.get(name)
            # A layer timed as a trial (``layer_generators_conv``) and lowered again by its
            # graph is lowered once: the program of the same kernel and tiling objects.
            if got and got[0] is uk and got[1] is tiling and got[2:5] == (
                    self.l2_budget, self.l3, self._libs_of(uk)):
                return got[5]
            prog = self.lowered(uk, tiling, self.l3, self.l2_budget)
            self._programs[name] = (uk, tiling, self.l2_budget, self.l3, self._libs_of(uk),
                                    prog)
            return prog
        out = Lowered()
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
        return self._checked(name, out, [c.ArgName for c in g.cargs], self.l2_budget)

    def lowered(self, uk: UserKernelT, tiling: Tiling, l3: str,
                l2_budget: int | None) -> ir.Program:
        """User kernel ``uk`` lowered with ``tiling`` (arguments with an L3 home in memory
        ``l3``) and checked; L2 staging over ``l2_budget`` refused (None: not checked).

        A kernel and tiling equal to ones lowered before but for their names (a network's
        repeated layers) give that program renamed: the name appears in a program only as
        its own and in its loops' labels (``KernelLowering``), so the renamed program is the
        one lowering would build. A refusal is not remembered: it is raised again, naming
        its own kernel."""
        try:
            key = (replace(uk, name=""), _tiling_key(tiling), l3, l2_budget, self._libs_of(uk))
            got = self._shapes.get(key)
        except TypeError:  # a kernel that is no value (a list in an argument)
            key = got = None
        if got is not None:
            prog = _renamed(got, uk.name)
            self._cycles[id(prog)] = (prog, got)  # its cycles are the original's
            return prog
        out = Lowered()
        KernelLowering(uk, tiling, self.libs, self.target, l3, out,
                       lib_bounds=self.lib_bounds).lower()
        prog = self._checked(uk.name, out, [c.ArgName for c in uk.cargs], l2_budget)
        if key is not None:
            self._shapes[key] = prog
        return prog

    def _libs_of(self, uk: UserKernelT) -> tuple:
        """The basic kernels ``uk`` calls as the model holds them now, with their bounds: a
        program is made from them (one replaced in ``libs`` makes new programs)."""
        return tuple((self.libs.get(c.CallName), self.lib_bounds.get(c.CallName))
                     for c in uk.calls)

    def _checked(self, name: str, out: Lowered, order: list[str],
                 l2_budget: int | None) -> ir.Program:
        params = tuple(out.params[n] for n in order if n in out.params)
        bounds = tuple((n, *out.bounds[n]) for n in order if n in out.params and n in out.bounds)
        prog = ir.Program(name, self.target, params, tuple(out.buffers), tuple(out.body),
                          bounds=bounds)
        l2 = sum(b.nbytes for b in out.buffers if b.memory == "L2")
        if l2_budget is not None and l2 > l2_budget:
            raise TilingError(f"{name}: L3 arguments need {l2} B of L2 staging, over the L2 "
                              f"budget of {l2_budget} B")
        return check(prog)

    def cycles(self, prog: ir.Program) -> int:
        """The cycles the cycle model predicts for ``prog`` (``npukit.sim.timing``),
        remembered for that program object: a layer timed as a trial and estimated again
        by its graph is timed once."""
        from ..sim.timing import timeline
        got = self._cycles.get(id(prog))
        if got is None or got[0] is not prog:
            got = self._cycles[id(prog)] = (prog, timeline(prog).cycles)
        if isinstance(got[1], ir.Program):  # a renamed program: the original's cycles
            got = self._cycles[id(prog)] = (prog, self.cycles(got[1]))
        return got[1]


def _tiling_key(t: Tiling) -> tuple:
    """Everything of a tiling but its kernel's name, as a value."""
    return tuple(tuple(v.items()) if isinstance(v, Mapping) else v
                 for f in fields(t) if f.name != "kernel" for v in (getattr(t, f.name),))


def _renamed(prog: ir.Program, name: str) -> ir.Program:
    """``prog``, the program of a kernel, as the program of the same kernel named ``name``:
    its name and its loops' labels ("... loop of <kernel>") changed."""
    old = f" loop of {prog.name}"

    def body(stmts: tuple) -> tuple:
        return tuple(replace(st, body=body(st.body), label=st.label[:-len(old)] +
                             f" loop of {name}" if st.label.endswith(old) else st.label)
                     if isinstance(st, ir.Loop) else st for st in stmts)
    return replace(prog, name=name, body=body(prog.body))


def _fits_target(name: str, frames, target: Target, budgets: dict[str, int]) -> None:
    """An argument larger than the target's largest memory can live nowhere: refused before
    the solver enumerates tile sizes for it. ``budgets`` give the L3 memories a graph may
    use (a flash budget may exceed the target's own flash, to run larger models)."""
    sizes = {k: max(m.size, budgets.get(k, 0)) for k, m in target.memories.items()}
    big = max(sizes, key=sizes.get)
    for f in frames:
        size = math.prod(f.shape) * f.elem
        if size > sizes[big]:
            raise CapacityError(
                f"{name}: argument {f.arg.KerArgName!r} ({' x '.join(map(str, f.shape))} x "
                f"{f.elem} B = {size} B) is larger than the largest memory of {target.name}, "
                f"{big} of {sizes[big]} B")


__all__ = ["Model"]

