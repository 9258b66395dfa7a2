"""What a basic kernel call costs on a target: a formula of the call's shape, priced with the
target's constants (the ``[costs]`` table of its TOML file, docs/targets.md).

A basic kernel's ``cost`` function returns the ``Work`` of a call from its scalar arguments:
its cost family (``conv``, ``pool_max``, ``linear``, ...), its operations ``ops`` (its inner
loop's, ``ceil(elements / SIMD width)`` where the family's kernels are vectorised:
multiply-accumulates for a convolution, taps for a pooling), its set-up operations
``setup`` (per row, per plane, per output: a fixed number of operations each, stated by the
kernel) and the ``chunks`` its cores share (rows or features; 0: any split). On a target
with ``n`` cores a call takes

    cycles = ceil(call + fork·[parallel, n > 1] + op[family]·(ops + setup)·share)

with ``share = ceil(chunks / n) / chunks`` (the busiest core's part: ``1 / n`` when
``chunks`` is 0; 1 for a sequential kernel or on one core). ``call`` is what any call costs
(entry, argument structure), ``fork`` the dispatch of a parallel call to the cores and their
barrier, ``op[family]`` the cycles of one operation of the family on one core. A graph's
layer adds ``layer`` cycles (its function's set-up and the waits around its first and last
transfers that the transfer engines' model leaves out). Every sum is linear in the
constants: ``CostModel.terms`` gives each constant's factor, which ``npukit.calibration``
fits to measured cycles.

A user's cost function may return a plain number instead: cycles of one core, shared
evenly by the cores of a parallel kernel (family ``cycles``, priced 1, never fitted).

>>> m = CostModel.default(call=1)
>>> m.cycles(Work("conv", ops=1000, setup=40, chunks=10), cores=8, parallel=True)
209
>>> m.cycles(Work("conv", ops=1000, setup=40, chunks=10), cores=1, parallel=True)
1041
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

# The families the built-in kernels report, in the order a target file lists them.
FAMILIES = ("conv", "conv_nxm", "conv_out", "pool_max", "pool_avg", "linear", "softmax",
            "elementwise", "other")
USER = "cycles"  # a plain number from a user's cost function


@dataclass(frozen=True)
class Work:
    """One call's work: ``family`` prices it; ``ops`` operations, ``setup`` set-up
    operations, ``chunks`` the pieces its cores share (0: any split)."""

    family: str
    ops: float
    setup: float = 0
    chunks: int = 0

    @property
    def size(self) -> float:
        """Operations in all (``ops + setup``): the measure by which the host's threads
        decide whether a call is worth sharing."""
        return self.ops + self.setup


def as_work(value) -> Work:
    """A cost function's result as ``Work``: a plain number is cycles of one core."""
    return value if isinstance(value, Work) else Work(USER, value)


@dataclass(frozen=True)
class CostModel:
    """A target's prices of basic kernel calls (see the module docstring): ``op`` maps a
    family to its cycles per operation; ``calibration`` says where the constants come from
    and ``accuracy`` how close they came to measurements: both are printed beside every
    cycle count."""

    call: float
    fork: float
    layer: float
    op: Mapping[str, float]
    calibration: str
    accuracy: str

    @staticmethod
    def default(call: float) -> CostModel:
        """A target without a ``[costs]`` table: one cycle per operation, ``call`` cycles a
        call (its compute unit's latency), no fork, nothing for a layer."""
        return CostModel(call, 0.0, 0.0, {f: 1.0 for f in FAMILIES},
                         "assumed constants (one cycle per operation: no [costs] table)",
                         "not measured")

    def names(self) -> list[str]:
        """The constants, as ``terms`` names them: ``call``, ``fork``, ``layer``,
        ``op.<family>``."""
        return ["call", "fork", "layer"] + [f"op.{f}" for f in self.op]

    def value(self, name: str) -> float:
        kind, _, family = name.partition(".")
        return getattr(self, kind) if not family else getattr(self, kind)[family]

    def terms(self, work: Work, cores: int, parallel: bool) -> dict[str, float]:
        """Each constant's factor in the cycles of a call: ``cycles = ceil(sum(value(k) *
        f for k, f in terms.items()))``."""
        n, chunks = (cores if parallel else 1), work.chunks
        share = 1.0 if n == 1 else math.ceil(chunks / n) / chunks if chunks else 1 / n
        if work.family == USER:
            return {"call": 1.0, USER: work.size * share}
        if work.family not in self.op:
            raise KeyError(f"cost family {work.family!r}: known families {list(self.op)}")
        return {"call": 1.0, "fork": 1.0 if n > 1 else 0.0,
                f"op.{work.family}": work.size * share}

    def cycles(self, work: Work, cores: int, parallel: bool) -> int:
        """The cycles of a call of ``work`` on ``cores`` cores (``parallel``: the kernel
        shares its work among them)."""
        terms = self.terms(work, cores, parallel)
        return math.ceil(sum(f * (1.0 if k == USER else self.value(k))
                             for k, f in terms.items()) - 1e-9)

    def caveat(self) -> str:
        """One line for every cycle count shown: which constants made it, how accurate."""
        return f"cycles from {self.calibration}; {self.accuracy}"
