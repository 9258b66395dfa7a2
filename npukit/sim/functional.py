"""Functional simulation: the IR's sequential semantics, evaluated in bulk with numpy.

A loop whose iterations do not depend on each other through memory (and that calls no
extern function) is *batched*: its
iterations become rows of a batch and every internal buffer gets one copy per row (as if
each iteration had its own IRAM, WRAM, ...). The two dependences the IR allows across
iterations are evaluated in closed form: accumulation into partials is a prefix
reduction along the batched loops entered since the partials were last reset, and an
append cursor is a clamped prefix sum (``c_{k+1} = min(cap, c_k + v_k)`` equals
``min(cap, c_0 + Σ v)`` because every ``v`` is non-negative). Any other loop runs
iteration by iteration. Internal memories start poisoned (0xA5 bytes, NaN for floats,
True for masks) and junk lanes are poisoned, so a result computed from unwritten data is
visibly wrong.

An innermost loop may also update an internal buffer in place when each iteration touches
its own elements (the Compass DSL's ``lsram[i] = f(lsram[i])``): that buffer is not copied
per row but shared by the rows of a batch, each reading and writing its own elements. A
loop whose trip count is known at run time only (``Var.trips``) runs that many iterations;
it is batched only when no loop inside it has a trip count depending on its variable (so
every batch is rectangular).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import arith, ir
from ..dtypes import is_float
from ..errors import KernelError, NpukitError, OutOfBoundsError, ZeroDivisorError
from ..poison import poison

# Elements a batch may hold per internal buffer copy or operand (rows times elements per
# row): a longer batched loop runs in chunks, so memory does not grow with the tensors.
BATCH_ELEMENTS = 1 << 16
OFFSETS_KEPT = 1 << 16  # elements of the largest view whose offsets are kept between chunks


@dataclass
class _Batch:
    axes: list[int]  # sizes of the batched loops entered, outermost first
    size: int


class Machine:
    """Executes a Program's body on flat parameter images (modified in place)."""

    def __init__(self, prog: ir.Program, images: dict[str, np.ndarray]):
        missing = sorted({st.fn.name for st, _ in prog.walk()
                          if isinstance(st, ir.Call) and st.fn.reference is None})
        if missing:
            raise KernelError(f"program {prog.name!r} calls basic kernel(s) {', '.join(missing)} "
                              f"without a numpy reference: the simulator runs a basic kernel "
                              f"through LibKernel(..., reference=fn); give one, or run on the C "
                              f"back end (backend='c'), which needs only its c_source")
        self.prog = prog
        # Constants (program data) are read like tensors, from their own read-only images.
        self.images = {**images, **{b.name: b.values() for b in prog.buffers
                                    if b.role == "const"}}
        internal = [b for b in prog.buffers if b.role != "const"]
        self.state = {b.name: poison(b.dtype, (1, b.size)) for b in internal}
        self.depth = {b.name: 0 for b in internal}  # batch depth of the last full write
        self.tables: dict = {}  # (constant, attrs) -> the Lut its image holds
        self.cursors: dict[str, np.ndarray] = {}
        self.cursor_depth: dict[str, int] = {}
        self.env: dict[ir.Var, np.ndarray] = {}
        self.batch = _Batch([], 1)
        self.shared: dict[str, int] = {}  # buffer -> rows per state row (in-place loops)
        self.offsets: dict[int, np.ndarray] = {}  # id(view) -> element offsets (_offsets)
        self.weights: dict[int, int] = {}  # id(loop body) -> elements per row (_weight)
        self.carry: dict | None = None  # a chunked loop's last rows (_chunked)
        self.span = 0
        self.seen: dict[int, int] = {}

    def run(self) -> None:
        self.block(self.prog.body)

    # -- control ---------------------------------------------------------------------------

    def block(self, body) -> None:
        for st in body:
            getattr(self, type(st).__name__.lower())(st)

    def branch(self, st: ir.Branch) -> None:
        """One arm, by the condition's value (no loop around a branch is batched, so the
        batch is one row)."""
        self.block(st.then if self._holds(st) else st.orelse)

    def repeat(self, st: ir.Repeat) -> None:
        """The body again and again while the condition holds (as ``branch``: one row)."""
        while self._holds(st):
            self.block(st.body)

    def _holds(self, st) -> bool:
        cond = self.read(st.cond).astype(bool).reshape(-1)
        if cond.size != 1:
            raise NotImplementedError(f"simulator: `{st.label}` branches in a batch of "
                                      f"{cond.size} rows")
        return bool(cond[0])

    def loop(self, st: ir.Loop) -> None:
        n = self._trips(st.var)
        if n == 0:
            return
        shared = _batchable(st)
        per = self._weight(st.body) if shared is not None and self.batch.size == 1 else 0
        if shared is None or per > BATCH_ELEMENTS:
            for k in range(n):
                self.env[st.var] = np.full(self.batch.size, k, np.int64)
                self.block(st.body)
            del self.env[st.var]
        elif n * per > BATCH_ELEMENTS:
            self._chunked(st, n, shared, BATCH_ELEMENTS // per)
        else:
            self._enter(st.var, n, shared)
            self.block(st.body)
            self._leave(st.var, n)

    def _chunked(self, st: ir.Loop, n: int, shared: frozenset[str], step: int) -> None:
        """Run a batched loop ``step`` iterations at a time, each chunk as the whole batch
        would run them: every row starts from the state before the loop, and accumulations
        and append cursors that span the loop continue from the previous chunk's last row."""
        before = (dict(self.state), dict(self.cursors), dict(self.depth),
                  dict(self.cursor_depth))
        self.carry, self.span = {}, len(self.batch.axes)
        for k0 in range(0, n, step):
            if k0:
                state, cursors, depth, cursor_depth = before
                self.state = {k: self.state[k] if k in shared else v for k, v in state.items()}
                self.cursors, self.depth = dict(cursors), dict(depth)
                self.cursor_depth = dict(cursor_depth)
            self.seen: dict[int, int] = {}
            m = min(step, n - k0)
            self._enter(st.var, m, shared, k0)
            self.block(st.body)
            self._leave(st.var, m)
        self.carry = None

    def _carried(self, st, depth: int, first: np.ndarray) -> tuple[np.ndarray, object]:
        """What a group of rows since ``depth`` starts from: ``first``, or in a chunked loop
        (``_chunked``) whose chunks the group spans, the previous chunk's last row. Also the
        key under which to leave this chunk's last row for the next."""
        if self.carry is None or depth > self.span:
            return first, None
        k = self.seen.get(id(st), 0)  # the same statement may run several times a chunk
        self.seen[id(st)] = k + 1
        key = (id(st), k)
        return self.carry.get(key, first), key

    def _weight(self, body) -> int:
        """Elements one iteration of ``body`` holds per row of a batch: the internal
        buffers' copies, the largest view, the rows of the loops inside (an upper bound:
        ``BATCH_ELEMENTS`` of them bound the simulator's memory)."""
        key = id(body)
        if key not in self.weights:
            w = sum(v.shape[1] for k, v in self.state.items() if k not in self.shared)
            for x in body:
                if isinstance(x, ir.Loop):
                    w = max(w, x.var.count * self._weight(x.body))
                else:
                    w = max([w] + [v.size for v in _row_views(x)])
            self.weights[key] = w
        return self.weights[key]

    def _trips(self, var: ir.Var) -> int:
        """Iterations that run: every row of the batch runs as many (``_batchable`` batches
        no loop whose inner trip counts depend on its variable)."""
        if var.trips is None:
            return var.count
        t = np.unique(np.asarray(var.running(self.env)))
        assert t.size == 1, f"loop {var.name}: trip counts differ across a batch"
        return int(t[0])

    def _enter(self, var: ir.Var, n: int, shared: frozenset[str] = frozenset(),
               first: int = 0) -> None:
        for k, v in self.state.items():
            if k in shared:
                self.shared[k] = n
                continue
            self.state[k] = np.repeat(v, n, axis=0)
        for k, v in self.cursors.items():
            self.cursors[k] = np.repeat(v, n)
        for k, v in self.env.items():
            self.env[k] = np.repeat(v, n)
        self.env[var] = np.tile(np.arange(first, first + n, dtype=np.int64), self.batch.size)
        self.batch = _Batch(self.batch.axes + [n], self.batch.size * n)

    def _leave(self, var: ir.Var, n: int) -> None:
        outer = self.batch.size // n
        for k, v in self.state.items():
            if self.shared.pop(k, None) is None:
                self.state[k] = v.reshape(outer, n, -1)[:, -1]
        for k, v in self.cursors.items():
            self.cursors[k] = v.reshape(outer, n)[:, -1]
        for k, v in self.env.items():
            if k != var:
                self.env[k] = v.reshape(outer, n)[:, -1]
        del self.env[var]
        self.batch = _Batch(self.batch.axes[:-1], outer)
        d = len(self.batch.axes)
        self.depth = {k: min(v, d) for k, v in self.depth.items()}
        self.cursor_depth = {k: min(v, d) for k, v in self.cursor_depth.items()}

    # -- memory access ---------------------------------------------------------------------

    def _base(self, view: ir.View) -> np.ndarray:
        return np.broadcast_to(np.asarray(view.offset.eval(self.env), np.int64), (self.batch.size,))

    def _block(self, base: np.ndarray, offs: np.ndarray, size: int) -> int | None:
        """Start of the contiguous run that rows ``base + offs`` cover, or None: true when
        each row is a dense vector and row k starts where row k-1 ended."""
        n = offs.size
        if n == 0 or offs[-1] - offs[0] != n - 1 or (n > 1 and (np.diff(offs) != 1).any()):
            return None
        start = int(base[0] + offs[0])
        if start < 0 or start + base.size * n > size:
            return None
        if base.size > 1 and (np.diff(base) != n).any():
            return None
        return start

    def _offsets(self, view: ir.View) -> np.ndarray:
        """``view.element_offsets()``, kept for the views of vector size a batched loop
        reads and writes chunk after chunk."""
        got = self.offsets.get(id(view))
        if got is None:
            got = view.element_offsets()
            if got.size <= OFFSETS_KEPT:
                self.offsets[id(view)] = got
        return got

    def read(self, view: ir.View, valid: np.ndarray | None = None) -> np.ndarray:
        buf, offs = view.buffer, self._offsets(view)
        if valid is not None and (valid >= (view.shape[0] if view.shape else 1)).all():
            valid = None
        if buf.name in self.shared:  # rows share one state row, each its own elements
            out = self.state[buf.name][self._rows(buf)[:, None],
                                       self._base(view)[:, None] + offs[None, :]]
        elif buf.role == "internal":
            st = self.state[buf.name]
            if not view.offset.vars:
                cols = view.offset.const + offs
                out = st[:, cols[0]:cols[0] + cols.size] if self._block(
                    np.zeros(1, np.int64), cols, st.shape[1]) is not None else st[:, cols]
            else:
                out = np.take_along_axis(st, self._base(view)[:, None] + offs[None, :], axis=1)
        else:
            img, base = _image(self.images, view), self._base(view)
            start = self._block(base, offs, img.size)
            if start is not None:
                out = img[start:start + base.size * offs.size].reshape(base.size, offs.size)
            else:
                pos = base[:, None] + offs[None, :]
                if valid is not None:  # junk lanes are never fetched: they may lie outside
                    pos = np.where(_live(view, valid), pos, 0)
                out = img[pos]
        if valid is not None:
            out = np.where(_live(view, valid), out, poison(out.dtype, ()))
        return out

    def write(self, view: ir.View, values: np.ndarray, live: np.ndarray | None = None) -> None:
        buf, offs = view.buffer, self._offsets(view)
        values = arith.convert(values, view.dtype)
        if live is not None and live.all():
            live = None
        if buf.role == "internal":
            st = self.state[buf.name]
            if buf.name in self.shared:  # rows share one state row, each its own elements
                at = (self._rows(buf)[:, None], self._base(view)[:, None] + offs[None, :])
            elif not view.offset.vars:
                at = (slice(None), view.offset.const + offs)
            else:
                at = (np.arange(self.batch.size)[:, None],
                      self._base(view)[:, None] + offs[None, :])
            if live is not None:
                # Junk past the valid lanes is poison; a copy with no valid lane moves
                # nothing (as in C): where a row of the batch has none, memory is kept.
                keep = ~live.any(axis=1)
                junk = poison(buf.dtype, ())
                if keep.any():
                    junk = np.where(keep[:, None], st[at], junk)
                values = np.where(live, values, junk)
            st[at] = values
            self.depth[buf.name] = len(self.batch.axes)
            return
        img, base = _image(self.images, view), self._base(view)
        start = self._block(base, offs, img.size) if live is None else None
        if start is not None:
            img[start:start + values.size] = values.reshape(-1)
        elif live is None:
            img[(base[:, None] + offs[None, :]).reshape(-1)] = values.reshape(-1)
        else:
            img[(base[:, None] + offs[None, :])[live]] = values[live]

    def _rows(self, buf: ir.Buffer) -> np.ndarray:
        """The state row of a shared buffer each batch row reads and writes."""
        return np.arange(self.batch.size) // self.shared[buf.name]

    def _lanes(self, lanes: ir.Lanes | None) -> np.ndarray | None:
        if lanes is None:
            return None
        return np.broadcast_to(np.asarray(lanes.eval(self.env), np.int64), (self.batch.size,))

    def _groups(self, depth: int, x: np.ndarray) -> np.ndarray:
        """View a per-row array as [groups, rows since depth, ...]."""
        inner = int(np.prod(self.batch.axes[depth:], dtype=np.int64))
        return x.reshape(self.batch.size // inner, inner, *x.shape[1:])

    # -- statements ------------------------------------------------------------------------

    def copy(self, st: ir.Copy) -> None:
        valid = self._lanes(st.valid)
        vals = self.read(st.src, valid)
        rows = st.dst.shape[0] if st.dst.shape else 1
        whole = valid is None or (valid >= rows).all()  # then every lane is live
        self.write(st.dst, vals, None if whole else _live(st.dst, valid))

    def call(self, st: ir.Call) -> None:
        """Run the extern's numpy reference on views of the simulated memories. A pointer
        reaches what C may touch through it: the rest of its slot of an L1/L2 buffer (the
        whole buffer when it has one), or of its tensor, as a ``Reach`` whose slices past
        the end raise; a pointer into an input tensor is read-only. What the reference
        raises is re-raised naming the basic kernel, with what each pointer reaches."""
        args, reach = [], []
        for (_, name), a in zip(st.fn.args, st.args):
            if isinstance(a, ir.Val):
                args.append(int(np.asarray(a.expr.eval(self.env)).reshape(-1)[0]))
                continue
            v = a.view
            flat = self.state[v.buffer.name][0] if v.buffer.role == "internal" else \
                self.images[v.buffer.name]
            start = int(self._base(v)[0] + v.layout.offset)
            if isinstance(a, ir.Deref):
                args.append(flat[start].item())
                continue
            end, where = _reach(v.buffer, start)
            ptr = flat[start:end].view(Reach)
            ptr.flags.writeable = v.buffer.role in ("internal", "out", "inout")
            args.append(ptr)
            reach.append(f"{name}: {where}, elements {start}..{end - 1} ({end - start})"
                         + ("" if ptr.flags.writeable else ", read-only"))
        cores = self.prog.target.cores if st.fn.parallel else 1
        try:
            for core in range(cores):
                if st.fn.parallel:
                    st.fn.reference(*args, core_id=core, core_count=cores)
                else:
                    st.fn.reference(*args)
        except NpukitError:
            raise
        except Exception as exc:  # the user's reference: say which call, and what it may reach
            kind = OutOfBoundsError if isinstance(exc, (IndexError, ValueError)) else KernelError
            raise kind(f"basic kernel {st.fn.name} (`{st.label}`): its reference raised "
                       f"{type(exc).__name__}: {exc}. Its pointers reach "
                       f"{'; '.join(reach) or 'nothing'}") from exc
        for a in st.args:
            if isinstance(a, ir.Ptr) and a.view.buffer.role == "internal":
                self.depth[a.view.buffer.name] = len(self.batch.axes)

    def resetcursor(self, st: ir.ResetCursor) -> None:
        self.cursors[st.cursor] = np.zeros(self.batch.size, np.int64)
        self.cursor_depth[st.cursor] = len(self.batch.axes)

    def append(self, st: ir.Append) -> None:
        cap = st.dst.size
        want = self._lanes(st.valid)
        if want is None:
            want = np.full(self.batch.size, st.src.size, np.int64)
        d = self.cursor_depth[st.cursor]
        c0, key = self._carried(st, d, self._groups(d, self.cursors[st.cursor]))
        v = self._groups(d, want)
        before = np.minimum(cap, c0 + np.cumsum(v, axis=1) - v).reshape(-1)
        after = np.minimum(cap, before + want)
        if key is not None:
            self.carry[key] = after[-1:]
        self.cursors[st.cursor] = after
        self.cursor_depth[st.cursor] = len(self.batch.axes)
        vals = arith.convert(self.read(st.src), st.dst.dtype)
        img, n = _image(self.images, st.dst), vals.shape[1]
        base = self._base(st.dst) + before
        lay = st.dst.layout
        dense = lay.is_dense() and cap > 0 and 0 <= lay.offset and lay.offset + cap <= img.size
        whole = (after - before == n).all()
        if dense and whole and self._block(base, lay.offset + np.arange(n), img.size) is not None:
            # Every append writes a whole vector right after the previous one.
            start = int(base[0] + lay.offset)
            img[start:start + vals.size] = vals.reshape(-1)
            return
        lane = np.arange(n)[None, :]
        live = lane < (after - before)[:, None]
        slot = np.minimum(before[:, None] + lane, max(cap - 1, 0))
        pos = self._base(st.dst)[:, None] + _offsets_at(lay, slot)
        img[pos[live]] = vals[live]

    def fill(self, st: ir.Fill) -> None:
        """A float value is rounded to the dtype by ``write`` (``arith.convert``), once, as
        the C back end's literal is."""
        shape = (self.batch.size, st.dst.size)
        self.write(st.dst, np.full(shape, st.value, None if is_float(st.dst.dtype) else
                                   st.dst.dtype))

    def compute(self, st: ir.Compute) -> None:
        if st.op in ("lookup", "linear_approx"):
            self.write(st.dst, self._lut_op(st))
            return
        if st.op == "vgather":
            self.write(st.dst, self._gather(st))
            return
        if st.op == "vscatter":
            self._scatter(st)
            return
        if st.op in arith.VEC_OPS:
            srcs = [self.read(v) for v in st.srcs]
            if dict(st.attrs).get("checked"):
                self._nonzero(st, *srcs)
            self.write(st.dst, arith.vec_op(st.op, srcs, st.dst.dtype, dict(st.attrs)))
            return
        srcs = [self.read(v) for v in st.srcs]
        if st.unit == "alu":
            x = arith.alu(st.op, srcs, st.dst.dtype)
            if st.acc:
                x = self._accumulate(st, x)
        elif st.op == "rescale_clamp":
            p, bs = srcs
            a = dict(st.attrs)
            recs = a.get("records", 1)   # Torq's per-item records: lane i reads i % recs
            bs = bs.reshape(len(bs), recs, -1)[:, np.arange(p.shape[1]) % recs]
            scale = bs[..., 1] if bs.shape[2] > 1 else np.ones_like(bs[..., 0])  # a bias alone
            x = arith.rescale_clamp(p, bs[..., 0], scale, a["shift"], a["zero_point"],
                                    a["lo"], a["hi"], self.prog.target.arith.rounding)
        elif st.op == "clamp":
            a = dict(st.attrs)
            x = arith.act_clamp(srcs[0], a["lo"], a["hi"], a.get("mode", "ACT"))
        elif st.op == "to_fixed":
            x = arith.to_fixed(srcs[0], st.attr("shift"))
        else:
            raise NotImplementedError(f"simulator: no rule for {st.unit}.{st.op}")
        self.write(st.dst, x)

    def _nonzero(self, st: ir.Compute, x: np.ndarray, y: np.ndarray) -> None:
        """A checked ``vquot``/``vrem``: a zero divisor lane is a ``ZeroDivisorError`` naming
        the statement, the lane and the loop variables."""
        bad = np.broadcast_to(y == 0, x.shape)
        if bad.any():
            row, lane = (int(a[0]) for a in np.nonzero(bad))
            where = ", ".join(f"{v.name}={int(self.env[v][row])}" for v in self.env)
            raise ZeroDivisorError(
                f"`{st.label}`: an integer division ({st.op}) by 0 in lane {lane}"
                f"{f' ({where})' if where else ''}. The 2nd arg can't be zero.")

    def _lut_op(self, st: ir.Compute) -> np.ndarray:
        """Act ``lookup`` / ``linear_approx``: read the table back from the constant the
        instruction names (srcs[1]) and apply ``npukit.lut``'s semantics to every row."""
        a = dict(st.attrs)
        tv = st.srcs[1]
        key = (tv.buffer.name, st.attrs)
        if key not in self.tables:
            if tv.offset.vars:
                raise NotImplementedError(f"simulator: `{st.label}` moves its table view")
            flat = self.images[tv.buffer.name][tv.offset.const + tv.element_offsets()]
            self.tables[key] = arith.lut_from_image(flat, a)
        lut, p = self.tables[key], self.read(st.srcs[0])
        if st.op == "lookup":
            return arith.act_lookup(p, lut, a["step_bits"], a["bias"], a["oor"])
        return arith.act_linear_approx(p, lut, a["step_bits"], a["bias"], a["shift_offset"],
                                       a["lo"], a["hi"], a["scale_exp"], a["in_dtype"],
                                       a.get("to_vector"))

    def _indices(self, st: ir.Compute, table: ir.View, what: str, verb: str):
        """The lane indices (``srcs[1]``) of a gather or scatter and which lanes are active
        (``srcs[2]``, the mask, when given); an active index outside ``table`` is an
        ``OutOfBoundsError``."""
        idx = self.read(st.srcs[1]).astype(np.int64)
        active = self.read(st.srcs[2]).astype(bool) if len(st.srcs) > 2 else \
            np.ones(idx.shape, bool)
        bad = active & ((idx < 0) | (idx >= table.size))
        if bad.any():
            row, lane = (int(a[0]) for a in np.nonzero(bad))
            where = ", ".join(f"{v.name}={int(self.env[v][row])}" for v in self.env)
            raise OutOfBoundsError(
                f"`{st.label}`: {what} {table.buffer.name!r} ({table.size} x "
                f"{table.dtype.name}) {verb} index {int(idx[row, lane])} in lane {lane}"
                f"{f' ({where})' if where else ''}, outside its extent 0..{table.size - 1}")
        return idx, active

    def _gather(self, st: ir.Compute) -> np.ndarray:
        """``vgather``: lane k reads ``table[indices[k]]`` (0 where the mask is false); an
        active index outside the table view is an ``OutOfBoundsError``."""
        table = st.srcs[0]
        idx, active = self._indices(st, table, "vload_gather from", "reads")
        pos = np.where(active, idx, 0)
        if table.buffer.role == "internal":
            flat = self.state[table.buffer.name]
            rows = self._rows(table.buffer) if table.buffer.name in self.shared else \
                np.arange(self.batch.size)
            out = flat[rows[:, None], self._base(table)[:, None] + _offsets_at(table.layout, pos)]
        else:
            img = self.images[table.buffer.name]
            out = img[self._base(table)[:, None] + _offsets_at(table.layout, pos)]
        return np.where(active, out, np.zeros((), out.dtype))

    def _scatter(self, st: ir.Compute) -> None:
        """``vscatter``: lane k of the values goes to ``table[indices[k]]`` where the mask is
        true, rows of the batch in order, then lanes in order (a later write wins); an active
        index outside the table is an ``OutOfBoundsError``."""
        table = st.dst
        vals = arith.convert(self.read(st.srcs[0]), table.dtype)
        idx, active = self._indices(st, table, "vstore_scatter into", "writes")
        pos = self._base(table)[:, None] + _offsets_at(table.layout, np.where(active, idx, 0))
        buf = table.buffer
        if buf.role == "internal":
            rows = self._rows(buf) if buf.name in self.shared else np.arange(self.batch.size)
            rows = np.broadcast_to(rows[:, None], pos.shape)
            self.state[buf.name][rows[active], pos[active]] = vals[active]
            self.depth[buf.name] = len(self.batch.axes)
        else:
            self.images[buf.name][pos[active]] = vals[active]

    def _accumulate(self, st: ir.Compute, x: np.ndarray) -> np.ndarray:
        """Partials after this instruction in every row: the value at the last reset
        combined, in loop order, with every contribution since."""
        how = st.attr("combine")
        d = self.depth[st.dst.buffer.name]
        first = self._groups(d, self.read(st.dst))[:, :1]
        acc0, key = self._carried(st, d, first)
        xs = self._groups(d, x)
        seq = np.concatenate([acc0, xs], axis=1)
        if seq.dtype == np.float32:
            ufunc = {"add": np.add, "max": np.maximum, "min": np.minimum, "mul": np.multiply}[how]
            out = ufunc.accumulate(seq, axis=1)[:, 1:]
        elif how == "add":
            out = arith.wrap32(np.cumsum(seq.astype(np.int64), axis=1)[:, 1:])
        elif how == "mul":  # products modulo 2**32: uint32 arithmetic wraps as int32's does
            out = np.multiply.accumulate(seq.astype(np.uint32), axis=1, dtype=np.uint32)[:, 1:]
            out = out.view(np.int32)
        else:
            ufunc = {"max": np.maximum, "min": np.minimum, "and": np.bitwise_and,
                     "or": np.bitwise_or, "xor": np.bitwise_xor}[how]
            out = ufunc.accumulate(seq, axis=1)[:, 1:]
        if key is not None:
            self.carry[key] = out[:, -1:].astype(first.dtype)
        return out.reshape(x.shape)


def _image(images: dict, view: ir.View) -> np.ndarray:
    """The flat image of ``view``'s buffer, as its elements' type when the view casts them
    (the same bytes: numpy's view)."""
    img = images[view.buffer.name]
    return img.view(view.dtype) if view.cast else img


class Reach(np.ndarray):
    """A pointer argument of a basic kernel's reference: a flat view of what the pointer may
    reach. Indexing or slicing it past its end raises ``IndexError`` where numpy would clip
    a slice (C would run on into the next slot or buffer); what it returns is a plain
    array."""

    def _check(self, key) -> None:
        first = key[0] if isinstance(key, tuple) and key else key
        n = self.shape[0] if self.ndim else 0
        if isinstance(first, slice) and (first.step or 1) > 0 and first.stop is not None:
            start = first.start or 0
            if first.stop > n and first.stop > start >= 0:   # wants elements past the end
                raise IndexError(f"slice {first.start or ''}:{first.stop} runs past the "
                                 f"{n} elements this pointer reaches")

    def __getitem__(self, key):
        self._check(key)
        return np.ndarray.__getitem__(self.view(np.ndarray), key)

    def __setitem__(self, key, value) -> None:
        self._check(key)
        np.ndarray.__setitem__(self.view(np.ndarray), key, value)


def _reach(buf: ir.Buffer, start: int) -> tuple[int, str]:
    """One past the last element a pointer at ``start`` into ``buf`` may touch, and what
    that region is, for messages."""
    if buf.role == "internal":
        if buf.slot_len and buf.slots > 1:
            slot = start // buf.slot_len
            return min((slot + 1) * buf.slot_len, buf.size), \
                f"{buf.memory} buffer {buf.name!r} slot {slot}"
        return buf.size, f"{buf.memory} buffer {buf.name!r}"
    return buf.size, f"tensor {buf.name!r}"


def _live(view: ir.View, valid: np.ndarray) -> np.ndarray:
    """[batch, elements] mask of the elements whose dim-0 index is below ``valid``."""
    inner = max(1, view.size // (view.shape[0] if view.shape else 1))
    return (np.arange(view.size) // inner)[None, :] < valid[:, None]


def _offsets_at(lay, flat: np.ndarray) -> np.ndarray:
    """The element offsets of the row-major positions ``flat`` of layout ``lay`` (what
    ``element_offsets()[flat]`` holds, without listing every element)."""
    if lay.is_dense():
        return lay.offset + flat
    out = np.full(flat.shape, lay.offset, np.int64)
    for i, s in zip(np.unravel_index(flat, lay.shape), lay.strides):
        out += i * s
    return out


def _row_views(st) -> list[ir.View]:
    """The views a statement holds one copy of per row of a batch (a table it reads from
    or a tensor it appends into is not copied)."""
    if isinstance(st, ir.Copy):
        return [st.src, st.dst]
    if isinstance(st, ir.Append):
        return [st.src]
    if isinstance(st, ir.Compute):
        if st.op == "vscatter":  # the table it writes into is not copied
            return list(st.srcs)
        table = {"vgather": 0, "lookup": 1, "linear_approx": 1}.get(st.op)
        return [st.dst] + [v for k, v in enumerate(st.srcs) if k != table]
    return [st.dst] if isinstance(st, ir.Fill) else []


def _batchable(loop: ir.Loop) -> frozenset[str] | None:
    """The internal buffers the batch shares (see the module docstring), or None when the
    loop must run iteration by iteration. A loop is batched when no iteration reads what an
    earlier iteration wrote, apart from accumulation and append cursors: every internal
    buffer read in the loop is written earlier in the same iteration, or not at all, or (in
    an innermost loop) only at elements no other iteration touches; no tensor is both read
    and written; and no inner loop's trip count depends on the loop's variable."""
    written_first: set[str] = set()
    read_first: set[str] = set()
    written: set[str] = set()
    moving: set[str] = set()  # written at elements that move with the loop's variable
    read: set[str] = set()
    tensors_read: set[str] = set()
    tensors_written: set[str] = set()

    def visit(body):
        for st in body:
            if isinstance(st, ir.Loop):
                visit(st.body)
                continue
            if isinstance(st, ir.Call):  # opaque: may touch anything it is given
                read_first.add("<call>")
                written.add("<call>")
                continue
            reads = [st.src] if isinstance(st, (ir.Copy, ir.Append)) else \
                st.reads() if isinstance(st, ir.Compute) else []
            for v in reads:
                read.add(v.buffer.name)
                if v.buffer.role == "internal":
                    if v.buffer.name not in written_first:
                        read_first.add(v.buffer.name)
                else:
                    tensors_read.add(v.buffer.name)
            dst = getattr(st, "dst", None)
            if dst is None:
                continue
            if dst.buffer.role == "internal":
                written.add(dst.buffer.name)
                if loop.var in dst.offset.vars:
                    moving.add(dst.buffer.name)
                if dst.buffer.name not in read_first:
                    written_first.add(dst.buffer.name)
            else:
                tensors_written.add(dst.buffer.name)
    visit(loop.body)
    if tensors_read & tensors_written or _inner_trips_depend(loop.body, loop.var) or \
            _has_branch(loop.body):  # each row would take its own arm
        return None
    # A row of its own would keep one iteration's elements only (the last row survives the
    # batch): a buffer read before it is written is shared, and so is one the loop only
    # writes, a part at a time (it is filled for after the loop: the Compass DSL's
    # ``lsram[i] = x``).
    conflict = (read_first & written) | (moving - read)
    if "<call>" in conflict or (conflict and any(isinstance(st, ir.Loop) for st in loop.body)):
        return None
    if all(_disjoint(loop.body, b, loop.var) for b in conflict):
        return frozenset(conflict)
    return None


def _has_branch(body) -> bool:
    return any(isinstance(st, (ir.Branch, ir.Repeat)) or any(_has_branch(b) for b in ir.bodies(st))
               for st in body)


def _inner_trips_depend(body, var: ir.Var) -> bool:
    for st in body:
        if isinstance(st, ir.Loop):
            if st.var.trips is not None and var in st.var.trips.vars:
                return True
            if _inner_trips_depend(st.body, var):
                return True
    return False


def _disjoint(body, name: str, var: ir.Var) -> bool:
    """True when each iteration of ``var`` touches its own elements of buffer ``name``:
    every view of it steps by the same ``c`` elements per iteration and all of them fit,
    relative to each other, in a window of ``|c|`` elements."""
    views = []
    for st in body:
        for v in (getattr(st, "src", None), getattr(st, "dst", None), *getattr(st, "srcs", ())):
            if v is not None and v.buffer.name == name:
                views.append(v)
    steps, spans = set(), []
    for v in views:
        c = 0
        for atom, k in v.offset.terms:
            if atom == var:
                c = k
            elif var in ir.affine(atom).vars:  # var inside a div/mod/clamp atom
                return False
        rest = v.offset - var * c if c else v.offset
        lo, hi = v.layout.footprint()
        steps.add(c)
        spans.append((rest, lo, hi))
    if len(steps) != 1 or 0 in steps:
        return False
    base = spans[0][0]
    if any((r - base).terms for r, _, _ in spans):
        return False
    lo = min(r.const - base.const + a for r, a, _ in spans)
    hi = max(r.const - base.const + b for r, _, b in spans)
    return hi - lo <= abs(steps.pop())
