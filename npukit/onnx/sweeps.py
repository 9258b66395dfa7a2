"""Sweeping memory configurations: one model planned under every combination of L1, L2, L3
budgets and targets, each plan simulated for cycles, as work units of ``npukit.workers``
(a local process pool or a Dask cluster). A row says whether the model fits, and if not
why (the planner's or tiler's message), the bytes it uses in each memory, the simulated
cycles and the bytes of weights streamed from L3.
"""

from __future__ import annotations

import csv
import itertools
from dataclasses import astuple, dataclass, fields
from pathlib import Path

from ..errors import CapacityError, NpukitError, TilingError
from ..machine import target
from ..workers import run_units
from .validation import model_bytes

# Each series of the plot: a marker of its own, then a line style once the markers run out.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h")
LINES = ("-", "--", ":", "-.")


@dataclass(frozen=True)
class SweepRow:
    """One configuration: budgets in, plan and cycles out (None where it does not fit)."""

    target: str
    l1_budget: int
    l2_budget: int
    l3_budget: int | None
    fits: bool
    why_not: str
    l1_used: int | None
    l2_used: int | None
    l3_used: int | None
    cycles: int | None
    weights_streamed: int | None  # bytes of operands streamed from L3 through L2
    microseconds: float | None = None  # the cycles as time at the target's clock
    failed: bool = False  # never computed (an error, a worker lost): ``why_not`` says why


@dataclass(frozen=True)
class Sweep:
    """Every row, sorted by target and budgets; ``pareto`` the fitting rows no other beats
    on both L2 budget and cycles."""

    rows: tuple[SweepRow, ...]

    @property
    def failed(self) -> tuple[SweepRow, ...]:
        """The rows that failed to compute: neither fits nor does not fit is known."""
        return tuple(r for r in self.rows if r.failed)

    @property
    def pareto(self) -> tuple[SweepRow, ...]:
        fit = sorted((r for r in self.rows if r.fits), key=lambda r: (r.l2_budget, r.cycles))
        front, best = [], None
        for r in fit:
            if best is None or r.cycles < best:
                front.append(r)
                best = r.cycles
        return tuple(front)

    def __str__(self) -> str:
        head = f"{'target':<8}{'L1':>8}{'L2':>9}{'L3':>10}  {'L1 used':>8}{'L2 used':>9}" \
               f"{'L3 used':>9}{'cycles':>11}{'us':>10}{'streamed':>10}  fits"
        rows = [head]
        for r in self.rows:
            used = [("" if v is None else str(v)) for v in (r.l1_used, r.l2_used, r.l3_used,
                                                          r.cycles, r.weights_streamed)]
            us = "" if r.microseconds is None else f"{r.microseconds:.1f}"
            rows.append(f"{r.target:<8}{r.l1_budget:>8}{r.l2_budget:>9}"
                        f"{'default' if r.l3_budget is None else r.l3_budget:>10}  "
                        f"{used[0]:>8}{used[1]:>9}{used[2]:>9}{used[3]:>11}{us:>10}"
                        f"{used[4]:>10}  " + ("yes" if r.fits else
                                              f"FAILED to compute: {r.why_not}" if r.failed
                                              else f"no: {r.why_not}"))
        for name in dict.fromkeys(r.target for r in self.rows):
            rows.append(f"({name}: {target(name).costs.caveat()})")
        return "\n".join(rows)

    def write_csv(self, path) -> None:
        """Write one row per combination to ``path``, a new file (``npukit.files``)."""
        import io

        from ..files import write_new
        f = io.StringIO(newline="")
        w = csv.writer(f)
        w.writerow([fl.name for fl in fields(SweepRow)])
        w.writerows(["" if v is None else v for v in astuple(r)] for r in self.rows)
        write_new(path, f.getvalue(), "--csv")

    def figure(self):
        """Cycles against the L2 budget (a log scale, base 2), one series per target and L1
        budget, each with a marker and line style of its own, the Pareto front marked: a
        matplotlib ``Figure`` (``pip install "npukit[plot]"``)."""
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise NpukitError("--plot needs matplotlib: pip install \"npukit[plot]\"") from None
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for k, ((t, l1), rs) in enumerate(self._series()):
            style = LINES[k // len(MARKERS) % len(LINES)]
            ax.plot([r.l2_budget for r in rs], [r.cycles for r in rs],
                    marker=MARKERS[k % len(MARKERS)], linestyle=style, label=f"{t} L1 {l1} B")
        front = self.pareto
        ax.plot([r.l2_budget for r in front], [r.cycles for r in front], "k*--",
                markersize=12, label="Pareto front")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("L2 budget (bytes, log scale)")
        ax.set_ylabel("simulated cycles")
        ax.legend()
        fig.tight_layout()
        return fig

    def _series(self) -> list[tuple[tuple[str, int], list[SweepRow]]]:
        """The fitting rows by (target, L1 budget), each sorted by L2 budget."""
        fit = sorted((r for r in self.rows if r.fits),
                     key=lambda r: (r.target, r.l1_budget, r.l2_budget))
        return [(key, list(rs)) for key, rs in
                itertools.groupby(fit, key=lambda r: (r.target, r.l1_budget))]

    def plot(self, path) -> None:
        """Save ``figure()`` to ``path`` (PNG, SVG, PDF: by its suffix)."""
        fig = self.figure()  # first: it says when matplotlib is missing
        import matplotlib.pyplot as plt

        from ..files import new_file
        try:
            with new_file(path, "--plot") as tmp:  # created, never replacing a file
                fig.savefig(tmp)
        finally:
            plt.close(fig)


def plan_one(unit) -> SweepRow:
    """Plan and simulate the model under one configuration."""
    import onnx

    from . import load
    from .check import random_inputs

    data, target, l1, l2, l3 = unit
    try:
        g = load(onnx.load_from_string(data), target=target, l1_budget=l1, l2_budget=l2,
                 l3_budget=l3)
        cycles = g.run("sim", **random_inputs(g)).cycles
    except (CapacityError, TilingError) as exc:  # does not fit: the row says why
        return SweepRow(target, l1, l2, l3, False, str(exc).splitlines()[0], None, None, None,
                        None, None)
    except NpukitError as exc:  # failed to compute (the model refused...): not "no"
        return SweepRow(target, l1, l2, l3, False,
                        f"{type(exc).__name__}: {str(exc).splitlines()[0]}", None, None, None,
                        None, None, failed=True)
    mem = g.memory
    streamed = sum(g.tensors[t].size for layer in g.graph.layers for t in layer.streamed)
    return SweepRow(target, l1, l2, l3, True, "",
                    *(mem[m].static + mem[m].dynamic for m in ("L1", "L2", "L3")),
                    cycles, streamed, round(cycles / g.target.clock_mhz, 3))


def _parses(data: bytes, model) -> None:
    """Refuse bytes that are no ONNX model, naming the model."""
    import onnx

    try:
        onnx.load_from_string(data)
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and friends
        name = str(model) if isinstance(model, (str, Path)) else "the model"
        raise NpukitError(f"{name!r} is not an ONNX model: {str(exc).splitlines()[0]}") \
            from None


def sweep(model, l1: list[int], l2: list[int], l3: list[int | None] = (None,),
          targets: list[str] = ("gap8",), *, workers: int | None = None,
          scheduler: str | None = None) -> Sweep:
    """Plan ``model`` (a path, bytes or ``onnx.ModelProto``) under every combination of the
    ``l1`` x ``l2`` x ``l3`` budgets (bytes; None: the target's) and ``targets``, each on
    ``workers`` local processes (one per core by default) or the Dask cluster at
    ``scheduler``. A target the tiler cannot plan on (``npukit.tiler.model.tiler_target``)
    is a ``TargetError`` before anything runs."""
    from ..tiler.model import tiler_target

    for t in targets:  # a target the tiler cannot plan on refuses the sweep, not each row
        tiler_target(t)
    data = model_bytes(model)
    _parses(data, model)  # a file that is no model refuses the sweep once, not each row
    combos = sorted(itertools.product(targets, l1, l2, l3),
                    key=lambda c: (c[0], c[1], c[2], -1 if c[3] is None else c[3]))
    outcomes = run_units(plan_one, [(data, *c) for c in combos], workers, scheduler,
                         label="npukit sweep")
    rows = tuple(o.value if o.ok else SweepRow(*c, False, o.error, None, None, None, None,
                                               None, failed=True)
                 for c, o in zip(combos, outcomes))
    return Sweep(rows)
