"""The cycle model (DESIGN.md): every unit of the target — transfer engines, ALU, Act —
runs in parallel and executes its own steps in program order. A step costs
``latency + ceil(elements / width)`` on a compute unit or ``latency + ceil(bytes /
bandwidth)`` on an engine; it starts when its unit is free, when the data it reads has
been written, and when the buffer slot it overwrites has been read by every consumer of
its previous value (double-buffered buffers have two slots, so loads run ahead).

A parallel loop (``ir.Loop(parallel=True)``) costs as many iterations as each core runs.

Long loops reach a periodic steady state after a few iterations; the model then advances
every clock and counter by the measured per-period increment instead of stepping through
each iteration, as long as the iterations ahead cost the same (same valid lanes, same inner
trip counts). A loop with a run-time trip count costs the iterations that run.

A core loop (``Loop.cores``) gives every core its own units and memories: each iteration
starts from the clocks at the loop's start, the cores run side by side, the loop ends when
the slowest does. ``Report.core_cycles`` holds each core's cycles; busy cycles are the
busiest core's, bytes moved add up over the cores."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from .. import ir
from ..costs import USER, Work, as_work
from ..errors import KernelError
from ..extent import Changes, changes
from ..passes import memory_use

MAX_EVENTS = 20000
TERM_SCALE = 1 << 16


@dataclass
class Report:
    """What the timing model measured for one run. Times are in cycles of the target's
    clock (``clock_mhz``), sizes in bytes.

    ``roofline_cycles`` is the bound no schedule can beat: the busiest compute unit's or
    transfer engine's total work, ``max(compute_bound, transfer_bound)``."""

    cycles: int
    busy: dict[str, int]  # busy cycles per unit
    bytes_moved: dict[str, int]  # bytes read or written by transfers, per memory
    peak: dict[str, int]  # bytes allocated per internal memory (slots included)
    capacity: dict[str, int]  # bytes per memory
    compute_bound: int  # cycles: the busiest compute unit's total work
    transfer_bound: int  # cycles: the busiest transfer engine's total work
    clock_mhz: float
    events: list = field(repr=False, default_factory=list)  # (unit, label, start, end)
    events_dropped: bool = False  # more than MAX_EVENTS steps: the rest are not recorded
    skipped_iterations: int = 0  # steady-state iterations advanced in one jump, not drawn
    core_cycles: tuple[int, ...] = ()  # cycles of each core of a core loop, core 0 first
    # Each cost constant's factor summed over the basic kernel calls (``npukit.costs``):
    # the calls' cycles are ``sum(target.costs.value(k) * f)`` (``cycles``: 1 each).
    cost_terms: dict[str, float] = field(default_factory=dict)
    costs: str = ""  # which constants priced the calls and how accurate they are

    @property
    def roofline_cycles(self) -> int:
        """The roofline bound in cycles: no schedule can beat the busiest unit's total work."""
        return max(self.compute_bound, self.transfer_bound)

    @property
    def roofline(self) -> int:
        """The roofline bound in cycles (the same as ``roofline_cycles``)."""
        return self.roofline_cycles

    @property
    def microseconds(self) -> float:
        """``cycles`` as time at the target's clock."""
        return self.cycles / self.clock_mhz

    def save_trace(self, path: str, above: list = ()) -> None:
        """Write the timeline as Chrome trace-event JSON (open in Perfetto); one thread per
        unit, 1 cycle = 1 µs of trace time. ``above``: (row, label, start, end) spans drawn on
        rows of their own before the units' (a graph's layers)."""
        rows = list(dict.fromkeys(e[0] for e in above))
        units = rows + sorted({e[0] for e in self.events})
        tid = {u: k for k, u in enumerate(units)}
        ev = [{"name": "thread_name", "ph": "M", "pid": 0, "tid": tid[u], "args": {"name": u}}
              for u in units]
        ev += [{"name": label or unit, "ph": "X", "pid": 0, "tid": tid[unit], "ts": s,
                "dur": e - s, "args": {"statement": label}}
               for unit, label, s, e in list(above) + self.events]
        meta = {"cycles": self.cycles, "events_dropped": self.events_dropped,
                "skipped_iterations": self.skipped_iterations,
                "note": "steady-state iterations skipped by the model are not drawn"}
        with open(path, "w") as f:
            json.dump({"traceEvents": ev, "displayTimeUnit": "ns", "otherData": meta}, f)

    def save_png(self, path: str, above: list = ()) -> None:
        """Draw the timeline (one row per unit) as a PNG; needs matplotlib (``npukit[plot]``).
        ``above``: (row, label, start, end) spans drawn, labelled, on rows above the units."""
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as exc:
            from ..errors import NpukitError
            raise NpukitError("save_png needs matplotlib: pip install 'npukit[plot]'") from exc
        events = list(above) + self.events
        units = list(dict.fromkeys(e[0] for e in events))
        fig, ax = plt.subplots(figsize=(10, 0.5 + 0.45 * len(units)))
        for row, unit in enumerate(units):
            spans = [(s, e - s) for u, _, s, e in events if u == unit]
            ax.broken_barh(spans, (row - 0.4, 0.8), color=f"C{row % 10}", edgecolor="white",
                           linewidth=0.5)
        for unit, label, s, e in above:
            ax.text((s + e) / 2, units.index(unit), label, ha="center", va="center",
                    fontsize=6, clip_on=True)
        ax.set_yticks(range(len(units)), units)
        ax.invert_yaxis()
        ax.set_xlabel("cycle")
        skipped = self.events_dropped or self.skipped_iterations
        note = " (steady-state iterations skipped by the model are not drawn)" if skipped else ""
        ax.set_title(f"{self.cycles} cycles, roofline {self.roofline_cycles} cycles{note}",
                     fontsize=9)
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)

    def __str__(self) -> str:
        bound = self.roofline_cycles
        lines = [f"{self.cycles} cycles ({self.microseconds:.4g} us at {self.clock_mhz:g} MHz); "
                 f"roofline {bound} cycles (compute {self.compute_bound} cycles, transfers "
                 f"{self.transfer_bound} cycles): {self.cycles / max(bound, 1):.2f}x the bound"]
        for u, b in self.busy.items():
            lines.append(f"  {u:<12} busy  {b:>10} cycles ({100 * b / max(self.cycles, 1):5.1f}%)")
        for m, b in self.bytes_moved.items():
            lines.append(f"  {m:<12} moved {b:>10} B")
        for m, b in self.peak.items():
            lines.append(f"  {m:<12} peak  {b:>10} B of {self.capacity[m]} B")
        if self.costs:
            lines.append(f"  ({self.costs})")
        return "\n".join(lines)


class Timeline:
    def __init__(self, prog: ir.Program, fast_forward: bool = True):
        self.prog, self.fast_forward = prog, fast_forward
        tgt = prog.target
        self.units = list(tgt.engines) + list(tgt.units)
        self.bufs = [b for b in prog.buffers]
        self.slot_count = {b.name: b.slots for b in self.bufs}
        self.mems = list(tgt.memories)
        # Clocks and counters, all in one vector so a steady state can be advanced at once.
        names = [f"free:{u}" for u in self.units] + [f"busy:{u}" for u in self.units]
        for b in self.bufs:
            names += [f"w:{b.name}:{k}" for k in range(b.slots)]
            names += [f"r:{b.name}:{k}" for k in range(b.slots)]
            names.append(f"n:{b.name}")
        names += [f"bytes:{m}" for m in self.mems] + ["cursor", "end"]
        # Each cost constant's factor summed over the calls (``npukit.costs``), in
        # 1/TERM_SCALE units: the cycles of the calls as a linear function of the constants.
        self.terms = tgt.costs.names() + [USER]
        names += [f"term:{k}" for k in self.terms]
        self.ix = ix = {n: k for k, n in enumerate(names)}
        # The indices a step uses, looked up once: a unit's free clock (its busy counter
        # lies ``_busy`` further), a buffer's first write and read clock (slot k: + k) and
        # its write count.
        self._free = {u: ix[f"free:{u}"] for u in self.units}
        self._busy = len(self.units)
        self._w0 = {b.name: ix[f"w:{b.name}:0"] for b in self.bufs}
        self._r0 = {b.name: ix[f"r:{b.name}:0"] for b in self.bufs}
        self._n = {b.name: ix[f"n:{b.name}"] for b in self.bufs}
        self._end = ix["end"]
        self._bytes = {m: ix[f"bytes:{m}"] for m in self.mems}
        self._term = {k: ix[f"term:{k}"] for k in self.terms}
        self.s = np.zeros(len(names), np.int64)
        self.env: dict[ir.Var, int] = {}
        self.events: list = []
        self.dropped = False
        self.skipped = 0
        self.core_cycles: tuple[int, ...] = ()
        self.tag = ""  # appended to unit names in events: the core a step runs on
        # id(expression) -> (expression, its ``_compiled`` function): hashing an expression
        # by value costs more than evaluating it.
        self._fns: dict[int, tuple] = {}
        self._looked: dict[int, tuple] = {}  # id(loop) -> (loop, its lanes, its inner vars)
        # id(call) -> (call, its scalar arguments' functions, its internal pointers, its
        # price per argument values)
        self._calls: dict[int, tuple] = {}
        self._touch: dict[int, tuple] = {}  # id(loop) -> (loop, ``_touched(loop)``)

    def run(self) -> Report:
        self.block(self.prog.body)
        return self.report()

    def report(self) -> Report:
        """What the statements run so far (``block``) measured."""
        tgt = self.prog.target
        busy = {u: int(self.s[self.ix[f"busy:{u}"]]) for u in self.units}
        busy = {u: b for u, b in busy.items() if b}
        peak = {m: memory_use([b for b in self.bufs if b.memory == m])
                for m in dict.fromkeys(b.memory for b in self.bufs)}
        moved = {m: int(self.s[self.ix[f"bytes:{m}"]]) for m in self.mems}
        return Report(
            cycles=int(self.s[self.ix["end"]]), busy=busy,
            bytes_moved={m: b for m, b in moved.items() if b}, peak=peak,
            capacity={m: tgt.memories[m].size for m in peak},
            compute_bound=max([b for u, b in busy.items() if u in tgt.units] or [0]),
            transfer_bound=max([b for u, b in busy.items() if u in tgt.engines] or [0]),
            clock_mhz=tgt.clock_mhz, events=self.events, events_dropped=self.dropped,
            skipped_iterations=self.skipped, core_cycles=self.core_cycles,
            cost_terms={k: v / TERM_SCALE for k in self.terms
                        if (v := int(self.s[self.ix[f"term:{k}"]]))},
            costs=tgt.costs.caveat())

    # -- walking ----------------------------------------------------------------------------

    def block(self, body) -> None:
        for st in body:
            if isinstance(st, ir.Loop):
                self.loop(st)
            elif isinstance(st, ir.Branch):  # no data here: both arms, an upper bound
                self.block(st.then)
                self.block(st.orelse)
            elif isinstance(st, ir.Repeat):  # no data here: the body once, a lower bound
                self.block(st.body)
            elif isinstance(st, ir.ResetCursor):
                self.s[self.ix["cursor"]] = 0
            else:
                self.step(st)

    def loop(self, st: ir.Loop) -> None:
        v = st.var
        n = v.count if v.trips is None else min(max(self._int(v.trips), 0), v.count)
        if st.cores:
            self.cores(st, n)
            return
        # A parallel loop's iterations run on the target's cores at once: one step of the
        # schedule stands for one iteration on each core.
        if st.parallel:
            n = math.ceil(n / self.prog.target.cores)
        changes = self._changes(st) if self.fast_forward else None
        # The steady state is looked for in the entries the body can change (a graph's
        # timeline holds every layer's buffers; the others stay as they are).
        idx = self._touched(st) if self.fast_forward else None
        snaps: list[np.ndarray] = []
        k = 0
        while k < n:
            self.env[st.var] = k
            self.block(st.body)
            if idx is not None:
                snaps.append(self.s[idx])
            if len(snaps) > 5:
                snaps.pop(0)
            if self.fast_forward and len(snaps) == 5 and not changes.any_in(k - 3, k):
                d1, d2 = snaps[4] - snaps[2], snaps[2] - snaps[0]
                if np.array_equal(d1, d2):
                    run_end = changes.next_after(k, n)
                    m = (run_end - 1 - k) // 2
                    m = self._cursor_safe(m, d1[0])
                    if m > 0:
                        self.s[idx] += m * d1
                        k += 2 * m
                        self.skipped += 2 * m
                        snaps.clear()
            k += 1
        self.env.pop(st.var, None)

    def cores(self, st: ir.Loop, n: int) -> None:
        """Each core runs the body from the clocks at the loop's start (see the module
        docstring); afterwards every clock is the latest core's."""
        s0, ix = self.s.copy(), self.ix
        states, cycles = [], []
        for k in range(n):
            self.s, self.env[st.var], self.tag = s0.copy(), k, f" {st.var.name}{k}"
            self.block(st.body)
            states.append(self.s)
            cycles.append(int(self.s[ix["end"]] - s0[ix["end"]]))
        del self.env[st.var]
        self.tag = ""
        if not states:
            return
        self.s = np.max(states, axis=0)
        for m in self.mems:  # traffic adds up; clocks and busy time are the latest core's
            k = ix[f"bytes:{m}"]
            self.s[k] = s0[k] + sum(x[k] - s0[k] for x in states)
        self.core_cycles = tuple(cycles)

    def _cursor_safe(self, m: int, dc: int) -> int:
        """Stop a jump before an append cursor gets near its tensor's end, where clipping
        changes the cost of each append (``dc``: the cursor's step per period)."""
        if dc <= 0:
            return m
        cap, width = min(((a.dst.size, a.src.size) for a, _ in self.prog.walk()
                          if isinstance(a, ir.Append)), default=(0, 0))
        room = cap - 2 * width - self.s[self.ix["cursor"]]
        return max(0, min(m, int(room // dc)))

    def _touched(self, st: ir.Loop) -> np.ndarray:
        """The entries of the clock vector the loop's body can change, the cursor first:
        every unit's, memory's and cost term's, the end, and the slots and write count of
        every buffer a statement of the body views."""
        got = self._touch.get(id(st))
        if got is None:
            names = set()
            for x, _ in _walk(st.body):
                if isinstance(x, (ir.Copy, ir.Append)):
                    views = (x.src, x.dst)
                elif isinstance(x, ir.Compute):
                    views = (*x.srcs, x.dst)
                elif isinstance(x, ir.Fill):
                    views = (x.dst,)
                elif isinstance(x, ir.Call):
                    views = tuple(a.view for a in x.args if isinstance(a, (ir.Ptr, ir.Deref)))
                else:
                    views = ()
                names.update(v.buffer.name for v in views)
            ix = self.ix
            keep = {ix[f"{what}:{u}"] for u in self.units for what in ("free", "busy")}
            keep |= {ix[f"bytes:{m}"] for m in self.mems} | {ix["end"]}
            keep |= {ix[f"term:{k}"] for k in self.terms}
            for name in names & self._w0.keys():
                n = self.slot_count[name]
                keep |= set(range(self._w0[name], self._w0[name] + n))
                keep |= set(range(self._r0[name], self._r0[name] + n)) | {self._n[name]}
            keep.discard(ix["cursor"])
            got = self._touch[id(st)] = (st, np.array([ix["cursor"], *sorted(keep)]))
        return got[1]

    def _changes(self, st: ir.Loop) -> Changes:
        """The iterations whose cost may differ from the one before: where a valid lane
        count or an inner loop's trip count changes (``npukit.extent``, in closed form)."""
        got = self._looked.get(id(st))
        if got is None:  # what the loop's body holds, looked for once per loop
            lanes = [x.valid for x, _ in _walk(st.body) if isinstance(x, (ir.Copy, ir.Append))
                     and x.valid is not None and st.var in x.valid.start.vars]
            lanes += [x.var.trips for x in _loops(st.body)
                      if x.var.trips is not None and st.var in x.var.trips.vars]
            inner = tuple(dict.fromkeys(x.var for x in _loops(st.body)))
            got = self._looked[id(st)] = (st, lanes, inner)
        _, lanes, inner = got
        return Changes([c for lane in lanes for c in changes(lane, st.var, inner, self.env)])

    def _fn(self, expr):
        """``_compiled(expr)``, found by the expression's identity."""
        got = self._fns.get(id(expr))
        if got is None:
            got = self._fns[id(expr)] = (expr, _compiled(expr))
        return got[1]

    def _int(self, expr) -> int:
        """The value of an index expression or valid count at the current point."""
        return self._fn(expr)(self.env)

    # -- one step ---------------------------------------------------------------------------

    def step(self, st) -> None:
        tgt = self.prog.target
        s, ix = self.s, self.ix
        reads: list[ir.Buffer] = []
        write: ir.Buffer | None = None
        in_place = False
        if isinstance(st, (ir.Copy, ir.Append)):
            unit = st.engine
            rows = st.src.shape[0] if st.src.shape else 1
            lanes = st.src.size if st.valid is None else \
                self._int(st.valid) * (st.src.size // max(rows, 1))
            if isinstance(st, ir.Append):
                before = int(s[ix["cursor"]])
                lanes = max(0, min(lanes, st.dst.size - before))
                s[ix["cursor"]] = before + lanes
            if lanes == 0:
                return  # nothing to move: the engine is not started (a tile past the last)
            src_b, dst_b = lanes * st.src.dtype.itemsize, lanes * st.dst.dtype.itemsize
            # Results leave the Act already narrowed to the tensor's dtype.
            cost = tgt.engines[unit].cycles(min(src_b, dst_b))
            s[self._bytes[st.src.buffer.memory]] += src_b
            s[self._bytes[st.dst.buffer.memory]] += dst_b
            reads = [st.src.buffer]
            write = st.dst.buffer
        elif isinstance(st, ir.Compute):
            unit = st.unit
            u = tgt.units[unit]
            width = u.width(*st.attr("pair"))
            lanes = st.srcs[0].size if st.op == "vscatter" else st.dst.size  # not the table
            cost = u.latency + math.ceil(lanes / width)
            reads = [v.buffer for v in st.reads()]
            write, in_place = st.dst.buffer, st.acc
        elif isinstance(st, ir.Fill):
            # The first compute unit clears partials or splats a constant as it starts.
            unit, cost, write = next(iter(tgt.units)), 0, st.dst.buffer
        elif isinstance(st, ir.Call):
            self.call(st)
            return
        else:
            raise NotImplementedError(type(st).__name__)
        # A buffer read through several views counts as read through its last one.
        views = {b.name: v for b, v in zip(reads, self._views(st))}
        # Each slot once: the slots depend on the write counts, which change only after the
        # reads' slots are taken.
        rk = [(self._w0[b.name], self._r0[b.name], self._slot(b, views.get(b.name)))
              for b in reads if b.role == "internal"]
        free = self._free[unit]
        start = s[free]
        for w0, _, k in rk:
            start = max(start, s[w0 + k])
        wview = getattr(st, "dst", None)
        internal = write is not None and write.role == "internal"
        if internal:
            k = self._next_slot(write, wview) if not in_place else self._slot(write, wview)
            if not in_place:
                start = max(start, s[self._r0[write.name] + k])
        end = start + cost
        s[free] = end
        s[free + self._busy] += cost
        for _, r0, k2 in rk:
            s[r0 + k2] = max(s[r0 + k2], end)
        if internal:
            if not in_place:
                s[self._n[write.name]] += 1
            s[self._w0[write.name] + k] = end
            if not in_place:
                s[self._r0[write.name] + k] = end
        s[self._end] = max(s[self._end], end)
        if cost:
            if len(self.events) < MAX_EVENTS:
                self.events.append((unit + self.tag, st.label, int(start), int(end)))
            else:
                self.dropped = True

    def _slot(self, b: ir.Buffer, view: ir.View | None = None) -> int:
        """The slot a view touches: named by its address when the front end placed slots
        explicitly, else the one most recently written (hardware multi-buffering)."""
        if b.slot_len and view is not None:
            start = self._int(view.offset) + view.layout.offset
            return min(start // b.slot_len, b.slots - 1)
        return int((self.s[self._n[b.name]] - 1) % b.slots)

    def _next_slot(self, b: ir.Buffer, view: ir.View | None) -> int:
        if b.slot_len and view is not None:
            return self._slot(b, view)
        return int(self.s[self._n[b.name]] % b.slots)

    @staticmethod
    def _views(st) -> list[ir.View]:
        if isinstance(st, (ir.Copy, ir.Append)):
            return [st.src]
        if isinstance(st, ir.Compute):
            return st.reads()
        return []

    def call(self, st: ir.Call) -> None:
        """An extern call runs on the target's first compute unit; a parallel one is spread
        over its cores. It reads and writes every internal buffer it gets a pointer to."""
        tgt, s = self.prog.target, self.s
        unit = next(iter(tgt.units))
        got = self._calls.get(id(st))
        if got is None:  # the call's scalar arguments and internal pointers, found once
            vals = tuple((name, self._fn(a.expr)) for (_, name), a in zip(st.fn.args, st.args)
                         if isinstance(a, ir.Val))
            ptrs = [a.view for a in st.args if isinstance(a, (ir.Ptr, ir.Deref))
                    and a.view.buffer.role == "internal"]
            got = self._calls[id(st)] = (st, vals, ptrs, {})
        _, vals, ptrs, priced = got
        env = self.env
        at = tuple(f(env) for _, f in vals)
        # The cost of a call depends only on its scalar arguments: priced once per values.
        price = priced.get(at)
        if price is None:
            work = _work(st, {name: v for (name, _), v in zip(vals, at)})
            price = priced[at] = (
                tgt.costs.cycles(work, tgt.cores, st.fn.parallel),
                [(self._term[k], round(f * TERM_SCALE))
                 for k, f in tgt.costs.terms(work, tgt.cores, st.fn.parallel).items()])
        cost, terms = price
        for k, f in terms:
            s[k] += f
        # Each slot once: nothing here changes a write count.
        wr = [(self._w0[v.buffer.name] + k, self._r0[v.buffer.name] + k)
              for v in ptrs for k in (self._slot(v.buffer, v),)]
        free = self._free[unit]
        start = s[free]
        for w, r in wr:
            start = max(start, s[w], s[r])
        end = start + cost
        s[free] = end
        s[free + self._busy] += cost
        for w, r in wr:
            s[w] = end
            s[r] = end
        s[self._end] = max(s[self._end], end)
        if len(self.events) < MAX_EVENTS:
            self.events.append((unit, st.label, int(start), int(end)))
        else:
            self.dropped = True


@lru_cache(maxsize=1 << 14)
def _compiled(expr):
    """``expr`` (an ``ir.Affine`` or ``ir.Lanes``) as a Python function of an ``env`` that
    holds ints: the same value as its ``eval``, in plain int arithmetic (numpy's
    broadcasting costs far more than the arithmetic on one point, and the model evaluates
    the expressions of every step). Python's ``//`` and ``%`` floor as numpy's do."""
    names: dict[ir.Var, str] = {}

    def var(v: ir.Var) -> str:
        return names.setdefault(v, f"v{len(names)}")

    def affine(e: ir.Affine) -> str:
        out = [str(e.const)]
        for a, c in e.terms:
            if isinstance(a, ir.Var):
                x = f"env[{var(a)}]"
            elif isinstance(a, ir.Clamp):
                x = affine(a.expr)
                x = x if a.lo is None else f"max({x}, {a.lo})"
                x = x if a.hi is None else f"min({x}, {a.hi})"
            else:
                x = f"({affine(a.expr)}) {'//' if isinstance(a, ir.FloorDiv) else '%'} {a.m}"
            out.append(f"{c} * ({x})")
        return " + ".join(out)

    if isinstance(expr, ir.Lanes):
        body = f"min(max({expr.total} - ({affine(expr.start)}), 0), {expr.width})"
    else:
        body = affine(expr)
    args = "".join(f", {n}={n}" for n in names.values())
    return eval(f"lambda env{args}: {body}", {"min": min, "max": max},  # noqa: S307
                {n: v for v, n in names.items()})


def _walk(body):
    for st in body:
        yield st, None
        for body in ir.bodies(st):
            yield from _walk(body)


def _loops(body):
    return [st for st, _ in _walk(body) if isinstance(st, ir.Loop)]


def timeline(prog: ir.Program, fast_forward: bool = True) -> Report:
    """Run the cycle model over a program; ``fast_forward=False`` steps through every
    iteration (slow, for checking the steady-state shortcut)."""
    return Timeline(prog, fast_forward).run()


def _work(st: ir.Call, scalars: dict) -> Work:
    """The work of a call: its basic kernel's ``cost`` of the scalar arguments known
    statically (1 cycle without one); ``KernelError`` naming the kernel when it fails."""
    if not st.fn.cost:
        return as_work(1)
    try:
        work = st.fn.cost(**scalars)
        if isinstance(work, Work):
            return work
        if isinstance(work, bool) or not isinstance(work, (int, float, np.integer,
                                                             np.floating)) or not work >= 0:
            raise ValueError(f"it returned {work!r}, not a number of cycles >= 0")
        return as_work(int(work))
    except Exception as exc:  # the user's function: name it and what it was given
        raise KernelError(f"basic kernel {st.fn.name} (`{st.label}`): its cost function failed "
                          f"({type(exc).__name__}: {exc}); it gets the scalar arguments known "
                          f"statically, by C name: {', '.join(sorted(scalars)) or 'none'} "
                          f"(accept **_ for the ones it does not use)") from exc
