"""Random EasyKernel programs for a differential fuzzer: simulator against C, bit for bit.

``generate(seed)`` makes one ``Case``: the Python source of a random but (mostly) valid
kernel in the Torq EasyKernel guide's style, its parameter specs and attributes, a target
(torq with a random rounding mode, sometimes other unit widths or LUT bank layouts) and a
logical description of what it computes, from which ``oracle`` reads the expected result
with numpy. A seed reproduces a case; ``data_seed`` reproduces a data set for it.
``check(case, data_seeds)`` builds the case, runs every data set on the simulator, the
fused C and the literal C (``fuse=False``) with outputs poisoned by a different canary
each, and returns one ``Outcome`` per data set.

What varies: the computation (an elementwise map, possibly reading the output it writes,
or a reduction over inner loops, possibly along the vectors too), loop nests grouped into
single and multi-iterators, loops over size-1 dims or indices 0, vectorization by the ALU
or Act width, a smaller power of two or any smaller size (or none: one element per
iteration), block loads of several vectors, fusion of dense dims, broadcast of size-1
dims, strided, offset and sliced input views, loads into IRAM/WRAM/BRAM at every loop
depth their indices allow, every ALU instruction, every Act instruction (tables of every
value dtype from ``npukit.lut``, direct and linear, raw or from a ``design``), store or
append, sub-vector loops over ``PData.Vectors``, the dtype pairs the target has widths
for, output dtypes from int8 to uint64 and float16 to float64, attributes up to the dtype
extremes, and data with integer extremes, NaN, infinities, signed zeros and subnormals.

Some programs break a rule on purpose (a vector wider than the ALU, a table that breaks a
LUT rule, a float result into an integer tensor, ...): ``nk.build`` must refuse them with
an ``NpukitError``; any other exception is a failure. ``Case.hostile`` names the rule
when acceptance itself would be a bug.

``KNOWN`` lists the open bugs the generator steers around; remove an entry once its fix
has landed and the generator makes those programs again.
"""

from __future__ import annotations

import dataclasses
import itertools
import linecache
import math
import traceback
import warnings
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

import npukit as nk
from npukit.dtypes import dtype as _dt
from npukit.dtypes import is_float
from npukit.machine import ROUNDING_MODES, Arith

# Open bugs the generator steers around, name -> what it avoids: an entry stops it from
# making the programs that hit the bug, until the fix lands and the entry goes. None open.
KNOWN: dict[str, str] = {}

TARGET = nk.target("torq")
ALU, ACT = TARGET.units["alu"], TARGET.units["act"]
CAPACITY = {m: TARGET.memories[m].size for m in ("IRAM", "WRAM", "BRAM")}
INT_OUT = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
FLOAT_OUT = ("float16", "bfloat16", "float32", "float64")
LUT_VALUES = ("int8", "uint8", "int16", "uint16", "int32", "float16", "bfloat16", "float32")
ALU_METHOD = {"mul": "elementwise_product_accumulate", "add": "elementwise_add",
              "sub": "elementwise_sub", "max": "elementwise_max", "min": "elementwise_min"}
COMBINE = {"mul": "add", "add": "add", "sub": "add", "pass": "add", "smul": "add",
           "max": "max", "min": "min"}
# Torq's accumulate modes (ALUOp1Mode) of accumulate / elementwise_product_accumulate /
# scalar_product_accumulate, and how each folds the partials (bitwise ones: integers only).
MODE_COMBINE = {"MAX": "max", "MIN": "min", "MUL": "mul", "BAND": "and", "BOR": "or",
                "BXOR": "xor"}


# -- the case -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Operand:
    """A tensor parameter: spec (shape, strides, offset in elements) and, for an input, the
    slice of it the kernel works on."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0
    cut: tuple[int, int, int, int] | None = None  # kernel-side slice: (dim, start, stop, step)

    def spec(self):
        return nk.spec(self.shape, self.dtype, self.strides, self.offset)

    def key(self) -> tuple:
        """The numpy index of the kernel-side slice (``()`` when there is none)."""
        if self.cut is None:
            return ()
        d, start, stop, step = self.cut
        return (slice(None),) * d + (slice(start, stop, step),)

    def footprint(self) -> int:
        return self.offset + sum((n - 1) * s for n, s in zip(self.shape, self.strides)) + 1


@dataclass(frozen=True)
class Logic:
    """What the kernel computes, for the oracle: ``out[o] = store(act(combine over the
    reduced dims, in ``red_order``, of alu(x, y)))`` over the iteration shape ``full``
    (the output's dims with the reduced dims inserted before the last)."""

    family: str                     # "map" or "reduce"
    op: str                         # mul add sub max min pass smul
    self_op: bool                   # the ALU's second operand is its first
    full: tuple[int, ...]
    out_shape: tuple[int, ...]      # logical output (the spec may be padded at the end)
    red_dims: tuple[int, ...]       # positions in ``full`` that are reduced
    red_order: tuple[int, ...]      # the same, in loop nesting order
    acc: bool                       # an accumulation loop exists (partials start at identity)
    fold: int                       # > 0: the last dim is cut in vectors of ``fold`` lanes
                                    # that are summed (one output per lane), else 0
    act: str
    act_args: dict = field(default_factory=dict)
    combine: str = "add"            # how partials fold: COMBINE of op, or its mode's


@dataclass(frozen=True)
class Case:
    """One generated program: its source, parameters, target and what it computes."""

    seed: int
    name: str
    source: str
    operands: tuple[Operand, ...]   # inputs then the output, in kernel parameter order
    attrs: dict
    rounding: str
    lut_banks: tuple[int, int]      # the target's lut.banks and lut.bank_bits
    widths: tuple[int, int] | None  # ALU and Act widths of every dtype pair, else torq's
    logic: Logic
    hostile: str | None = None      # the rule it breaks, when building it is a bug
    init: Operand | None = None     # the output's contents before the run, when it is read

    @property
    def target(self):
        banks, bits = self.lut_banks
        units = dict(TARGET.units)
        if self.widths:
            for name, w in zip(("alu", "act"), self.widths):
                units[name] = dataclasses.replace(units[name], widths={
                    k: w for k in units[name].widths})
        return dataclasses.replace(TARGET, arith=Arith(self.rounding, True), units=units,
                                   lut=dataclasses.replace(TARGET.lut, banks=banks,
                                                           bank_bits=bits))

    @property
    def out(self) -> Operand:
        return self.operands[-1]

    def kernel(self) -> nk.easy.Kernel:
        """The kernel, compiled from ``source`` (registered with linecache so that
        ``inspect.getsource`` and the builder's source labels work)."""
        filename = f"<npukit-fuzz-{self.seed}>"
        linecache.cache[filename] = (len(self.source), None,
                                     self.source.splitlines(keepends=True), filename)
        ns = {"PData": nk.easy.PData}
        exec(compile(self.source, filename, "exec"), ns)  # noqa: S102 - our own generated text
        return nk.kernel(ns[self.name])

    def build(self) -> nk.Program:
        specs = {o.name: o.spec() for o in self.operands}
        return nk.build(self.kernel(), target=self.target, **specs, **self.attrs)

    def arrays(self, data_seed: int) -> dict[str, np.ndarray]:
        """Input arrays (views of larger random buffers, as the specs say)."""
        rng = np.random.default_rng([self.seed, data_seed])
        profile = rng.choice(["mixed", "small", "extreme"], p=[0.5, 0.3, 0.2])
        out = {}
        for o in self.operands[:-1] + ((self.init,) if self.init else ()):
            buf = values(rng, o.dtype, o.footprint(), profile)
            if o.name == "bs":
                buf = bias_scale(rng, o.dtype, buf)
            out[o.name] = strided_view(buf, o)
        return out

    def describe(self) -> str:
        specs = ", ".join(f"{o.name}=nk.spec({o.shape}, {o.dtype!r}, {o.strides}, {o.offset})"
                          for o in self.operands)
        attrs = ", ".join(f"{k}={v!r}" for k, v in self.attrs.items())
        widths = f", ALU and Act widths {self.widths}" if self.widths else ""
        return (f"# fuzz case {self.seed}: torq with rounding {self.rounding!r}, lut.banks, "
                f"lut.bank_bits = {self.lut_banks}{widths}\n{self.source}\n"
                f"prog = nk.build({self.name}, target=..., {specs}, {attrs})")


def strided_view(buf: np.ndarray, o: Operand) -> np.ndarray:
    raw = buf.view(f"V{buf.itemsize}")[o.offset:]
    view = np.lib.stride_tricks.as_strided(raw, o.shape, tuple(s * buf.itemsize
                                                               for s in o.strides))
    return view.view(buf.dtype)


# -- random data --------------------------------------------------------------------------

def float_specials(dt: np.dtype) -> np.ndarray:
    fi = ml_dtypes.finfo(dt) if dt.name == "bfloat16" else np.finfo(dt)
    tiny, sub = float(fi.tiny), float(fi.smallest_subnormal)
    vals = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, sub, -sub, tiny, -tiny, tiny / 2,
            float(fi.max), -float(fi.max), 1.0, -1.0, 0.5, 65504.0, 3e38]
    with np.errstate(over="ignore"):
        return np.array(vals, np.float64).astype(dt)


def values(rng: np.random.Generator, dtype: str, n: int, profile: str) -> np.ndarray:
    """``n`` random values of ``dtype``: ``mixed`` spans the range with some extremes,
    ``small`` stays near zero, ``extreme`` is mostly extremes (NaN, inf, subnormals, ...).
    Never all zero."""
    dt = _dt(dtype)
    if is_float(dt):
        scale = {"mixed": 50.0, "small": 2.0, "extreme": 1e4}[profile]
        x = (rng.standard_normal(n) * scale).astype(np.float32)
        if profile != "small":
            x = np.where(rng.random(n) < 0.3, np.round(x), x)
        with np.errstate(over="ignore"):
            x = x.astype(dt)
        share = {"mixed": 0.15, "small": 0.03, "extreme": 0.6}[profile]
        pick = rng.random(n) < share
        x[pick] = rng.choice(float_specials(dt), int(pick.sum()))
    else:
        info = np.iinfo(dt)
        lo, hi = int(info.min), int(info.max)
        if profile == "small":
            x = rng.integers(max(lo, -9), min(hi, 9), n, endpoint=True)
        else:
            x = rng.integers(lo, hi, n, endpoint=True, dtype=np.int64 if dt.name != "uint64"
                             else np.uint64)
        ext = np.array([lo, hi, lo + 1, hi - 1, 0, 1, hi // 2], dtype=object)
        if lo < 0:
            ext = np.concatenate([ext, np.array([-1], dtype=object)])
        share = {"mixed": 0.1, "small": 0.02, "extreme": 0.6}[profile]
        pick = np.flatnonzero(rng.random(n) < share)
        x = x.astype(dt)
        for k in pick:
            x[k] = ext[rng.integers(ext.size)]
    x = np.asarray(x, dt)
    x[0] = 3
    return x


def bias_scale(rng, dtype, buf: np.ndarray) -> np.ndarray:
    """A (bias, scale) pair: small (the usual requantisation), or anything the dtype holds."""
    if rng.random() < 0.6:
        small = np.array([rng.integers(-300, 300), rng.integers(-40, 40) or 1], np.float64)
        if is_float(_dt(dtype)):
            small = small / 8
        buf[:2] = small.astype(buf.dtype)
    return buf


# -- the generator ------------------------------------------------------------------------

class _Gen:
    """One random program; ``generate`` drives it."""

    def __init__(self, seed: int):
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.hostile: str | None = None
        self.lines: list[str] = []

    # small helpers
    def p(self, prob: float) -> bool:
        return bool(self.rng.random() < prob)

    def pick(self, items, weights=None):
        items = list(items)
        if weights is not None:
            w = np.asarray(weights, float)
            return items[int(self.rng.choice(len(items), p=w / w.sum()))]
        return items[int(self.rng.integers(len(items)))]

    def gap(self) -> int:
        """Extra elements between rows of a strided view."""
        return int(self.rng.integers(0, 4)) if self.p(0.4) else 0

    def dim(self, big: bool = False) -> int:
        if big and self.p(0.5):
            return int(self.rng.integers(1, 90))
        return int(self.pick([1, 1, 2, 3, 4, 5, 7, 8, 16]))

    # -- the computation ------------------------------------------------------------------

    def run(self) -> Case:
        rng = self.rng
        self.family = self.pick(["map", "reduce"], [0.55, 0.45])
        self.op = self.pick(["mul", "add", "sub", "max", "min", "pass", "smul"],
                            [3, 2, 1, 1.5, 1.5, 2, 1.5])
        self.self_op = self.op in ("mul", "add", "sub", "max", "min") and self.p(0.15)
        self.pair = self.dtype_pair()
        x_dt, w_dt = self.pair
        self.float_p = is_float(_dt(x_dt))
        self.mode = "ACC"
        if self.op in ("pass", "mul", "smul") and self.p(0.25):
            self.mode = self.pick(["MAX", "MIN", "MUL"] +
                                  ([] if self.float_p else ["BAND", "BOR", "BXOR"]))
        self.act = self.pick(["rescale_clamp", "clamp", "lookup", "linear_approx"],
                             [3.5, 2.5, 2, 2])
        if self.float_p and self.act == "lookup" and not self.p(0.1):
            self.act = "linear_approx"  # lookup on float partials is refused: rarely
        self.rounding = self.pick(ROUNDING_MODES)
        # Iteration shape: output dims, with reduced dims inserted before the last.
        if self.family == "map":
            rank = int(rng.integers(1, 5))
            out_shape = tuple(self.dim(big=k == rank - 1) for k in range(rank))
            red = ()
        else:
            out_shape = tuple(self.dim() for _ in range(int(rng.integers(0, 2)))) + \
                (self.dim(big=True),)
            red = tuple(self.dim() for _ in range(int(rng.integers(1, 3))))
        while math.prod(out_shape) * math.prod(red) > 2500:  # keep the simulator quick
            out_shape = tuple(max(1, n // 2) for n in out_shape)
            red = tuple(max(1, n // 2) for n in red)
        self.out_shape = out_shape
        self.full = out_shape[:-1] + red + out_shape[-1:]
        self.red_dims = tuple(range(len(out_shape) - 1, len(out_shape) - 1 + len(red)))
        self.scalar_mode = self.p(0.15)
        # Accumulate along the vectors of a row too (lane k of the result sums lanes k).
        self.fold = self.family == "reduce" and not self.scalar_mode and self.p(0.2)
        self.make_operands()
        self.make_structure()
        return self.emit()

    def dtype_pair(self) -> tuple[str, str | None]:
        unary = self.op == "pass"
        keys = [(a, None if b == "none" else b) for a, b in ALU.widths
                if (b == "none") == unary]
        if self.self_op:
            keys = [(a, a) for a, b in keys if a == b]
        if self.p(0.03):  # a pair without a width: refused
            if unary:
                return self.pick([("uint16", None), ("int64", None), ("float64", None)])
            return self.pick([("int16", "int8"), ("int32", "int32"), ("float16", "float32"),
                              ("int8", "uint8")] if not self.self_op else [("int32", "int32")])
        return self.pick(keys, [3 if "int8" in k else 1 for k in keys])

    def make_operands(self) -> None:
        x_dt, w_dt = self.pair
        full = self.full
        vector_inner = not self.scalar_mode
        # x: the primary vector operand, broadcast in the map family, full in a reduction.
        x_shape = self.broadcastable(full) if self.family == "map" else full
        self.x = self.operand("x", x_dt, x_shape, vector_inner, may_slice=True)
        self.y = self.w = self.out_op = None
        self.out_dt = self.out_dtype()
        # The second operand of a map may be the output itself: y = out (read, then written).
        self.inout = self.family == "map" and self.op in ALU_METHOD and not self.self_op \
            and self.p(0.12)
        if self.op == "smul":
            w_shape = tuple(n if self.p(0.6) else 1 for n in full[:-1]) + (1,)
            self.w = self.operand("w", w_dt, w_shape, False)
        elif self.inout:
            self.out_dt = w_dt
            self.out_op = self.out_operand(pad=False, dense=vector_inner, fused=0)
            self.y = dataclasses.replace(self.out_op, name="y")
        elif self.op != "pass" and not self.self_op:
            self.y = self.operand("y", w_dt, self.broadcastable(full), vector_inner)

    def broadcastable(self, full) -> tuple[int, ...]:
        shape = tuple(1 if self.p(0.25) else n for n in full)
        drop = int(self.rng.integers(0, len(shape))) if self.p(0.2) else 0
        return shape[drop:]

    def operand(self, name, dt, shape, inner_dense, may_slice=False) -> Operand:
        strides, acc = [0] * len(shape), 1
        for d in reversed(range(len(shape))):
            if d == len(shape) - 1:
                strides[d] = 1 if inner_dense or not self.p(0.5) else int(self.rng.integers(2, 4))
                if inner_dense and self.p(0.005):
                    strides[d] = 2  # vectorize refuses a strided last dim
            else:
                strides[d] = acc + self.gap()
                if shape[d] > 1 and self.p(0.05):
                    strides[d] = 0  # the spec itself broadcasts this dim
            acc = max(acc, strides[d] * shape[d])
        cut = None
        spec_shape = list(shape)
        if may_slice and shape and self.p(0.15):
            # The spec is larger; the kernel slices the view it works on out of it.
            d = 1 if len(shape) > 1 and not self.known("tuple-slice") and self.p(0.4) else 0
            last = d == len(shape) - 1
            step = int(self.pick([1, 1, 2])) if not last or not inner_dense else 1
            start = int(self.rng.integers(0, 3))
            cut = (d, start, start + shape[d] * step, step)
            spec_shape[d] = start + shape[d] * step + int(self.rng.integers(0, 2))
            strides = self.restride(spec_shape, strides, inner_dense)
        offset = int(self.rng.integers(0, 6)) if self.p(0.5) else 0
        return Operand(name, dt, tuple(spec_shape), tuple(strides), offset, cut)

    def restride(self, shape, strides, inner_dense) -> list[int]:
        """Strides for a grown ``shape``: rows must not overlap again."""
        acc = 1
        out = list(strides)
        for d in reversed(range(len(shape))):
            if d < len(shape) - 1 and out[d] != 0:
                out[d] = max(out[d], acc)
            acc = max(acc, out[d] * shape[d])
        return out

    def out_dtype(self) -> str:
        """Mostly dtypes the Act result can be stored into; rarely an int for a float."""
        result_float = self.float_p
        if self.act == "lookup":
            self.lut_dt = self.pick(LUT_VALUES + ("int64",), [1] * 8 + [0.1])
            result_float = is_float(_dt(self.lut_dt))
        if result_float:
            return self.pick(FLOAT_OUT + INT_OUT[:2], [3, 3, 3, 1, 0.1, 0.1])
        return self.pick(INT_OUT + FLOAT_OUT, [3, 1.5, 3, 1, 2, 1, 1, 1, 1, 0.5, 1, 0.5])

    # -- structure --------------------------------------------------------------------------

    def make_structure(self) -> None:
        x_dt, w_dt = self.pair
        try:
            self.alu_w, self.act_w = ALU.width(x_dt, w_dt), ACT.width(x_dt, w_dt)
        except nk.DTypeError:
            self.alu_w = self.act_w = 16
        self.widths = None
        if self.p(0.15):  # a target whose units have other widths (any, not powers of two)
            self.act_w = int(self.rng.integers(1, 13))
            self.alu_w = self.act_w * int(self.rng.integers(1, 5))
            self.widths = (self.alu_w, self.act_w)
        rng = self.rng
        # Fusion of dense inner dims (map family only; a scalar operand cannot fuse).
        self.fuse = 0
        if self.family == "map" and not self.scalar_mode and self.op != "smul":
            lays = [self.logical_layout(o).broadcast_as(self.full) for o in (self.x, self.y)
                    if o is not None]
            dense = min(lay.dense_dims() for lay in lays)
            if dense > 1 and self.p(0.6):
                self.fuse = int(rng.integers(2, dense + 1))
        # The output fuses too when whole vectors are stored, else when it likes.
        self.fuse_out = self.fuse >= 2 and self.p(0.5)
        fused = self.full if self.fuse < 2 else \
            self.full[:-self.fuse] + (math.prod(self.full[-self.fuse:]),)
        self.fused = fused
        # Vector size.
        if self.scalar_mode:
            self.n = 1
        else:
            self.n = int(self.pick(
                [self.act_w, self.alu_w, max(1, self.act_w // 2), max(1, self.act_w // 4),
                 int(rng.integers(1, self.act_w + 1)), self.alu_w * 2,
                 int(rng.integers(self.act_w, self.alu_w + 1))],
                [4, 2, 1.5, 0.5, 1, 0.1, 0 if self.known("subvector-junk") else 1]))
        self.n_expr = {self.act_w: f"s.act.width({self.width_args()})",
                       self.alu_w: f"s.alu.i_width({self.width_args()})"}.get(self.n)
        # Axes of the loops: (size, kind, dim of x after fuse/vectorize, dim of the output).
        last = fused[-1]
        self.nv = -(-last // self.n)
        axes = []
        n_out = len(self.out_shape) if self.fuse < 2 else len(fused)
        for d, size in enumerate(fused[:-1]):
            red = d in self.red_dims
            odim = None if red else (d if d < n_out - 1 else None)
            axes.append(dict(size=size, kind="red" if red else "par", xdim=d, odim=odim))
        axes.append(dict(size=last if self.scalar_mode else self.nv,
                         kind="red" if self.fold else "par", xdim=len(fused) - 1,
                         odim=None if self.fold else n_out - 1))
        if self.fold:
            self.out_shape = self.out_shape[:-1] + (self.n,)
        for a in axes:
            a["looped"] = a["size"] > 1 or not self.p(0.5)
        # Block loads: the innermost axes stay in the loaded view (several vectors, rows
        # of a strided tensor) when the ALU is wide enough and no vector is partial.
        self.alu_size = self.n
        if self.family == "map" and not self.scalar_mode and self.op != "smul" and \
                last % self.n == 0 and self.p(0.15):
            for a in reversed(axes):
                size = self.alu_size * a["size"]
                if size > self.alu_w or (self.known("subvector-junk") and size > self.act_w
                                         and size % self.act_w):
                    break
                a["block"], a["looped"] = True, False
                self.alu_size *= a["size"]
                if self.p(0.5):
                    break
        # Output: store (whole vectors, padded) or append.
        self.store = self.p(0.35) or (self.fold and (self.known("append-after-acc")
                                                     or self.p(0.5)))
        if self.store and not self.scalar_mode and (self.fuse >= 2 or self.inout) and \
                fused[-1] % self.n:
            self.store = False  # the output would need padding
        # Sub-vector loop over PData.Vectors: needed when the vector exceeds the Act width.
        self.act_n = min(self.act_w, self.alu_size)
        self.sub = self.alu_size > self.act_w or (not self.scalar_mode and self.p(0.15))
        if self.store and self.sub and (self.n % self.act_n or any(a.get("block")
                                                                  for a in axes)):
            self.store = False  # sub-vectors are stored by the vector index: keep it
        if self.fold and not self.store:  # an append keeps the lanes no junk reached
            self.out_shape = self.out_shape[:-1] + (last - (self.nv - 1) * self.n,)
        # Loop order: appends write in row-major order, stores anywhere.
        par = [a for a in axes if a["kind"] == "par"]
        red = [a for a in axes if a["kind"] == "red"]
        if self.store and len(par) > 1 and self.p(0.4):
            order = [par[int(k)] for k in rng.permutation(len(par))]
            par = order
        if len(red) > 1 and self.p(0.4):
            red = [red[int(k)] for k in rng.permutation(len(red))]
        self.axes = par + red
        # Group looped axes into iterate() calls (never across the par/red boundary).
        self.groups: list[list[dict]] = []
        for kind in ("par", "red"):
            run = [a for a in self.axes if a["kind"] == kind and a["looped"]]
            while run:
                k = int(rng.integers(1, len(run) + 1)) if self.p(0.5) else 1
                self.groups.append(run[:k])
                run = run[k:]
        self.n_par_groups = sum(1 for g in self.groups if g[0]["kind"] == "par")
        self.acc = any(g[0]["kind"] == "red" for g in self.groups)
        self.empty_multi = not self.groups and not (self.store and self.sub) and \
            (self.scalar_mode or fused[-1] % self.n == 0 or not self.known("load-partial-vector")) \
            and self.p(0.3)
        for g, grp in enumerate(self.groups):
            multi = len(grp) > 1 or self.p(0.2)
            for j, a in enumerate(grp):
                a["var"] = f"m{g}[{j}]" if multi else f"i{g}"
                a["group"] = g
                a["multi"] = multi
        self.memories()

    def width_args(self) -> str:
        """The arguments of ``s.act.width`` / ``s.alu.i_width`` for this ALU instruction."""
        if self.op == "pass":
            return "x.dtype"
        return "x.dtype, " + ("w" if self.op == "smul" else "x" if self.self_op else "y") + \
            ".dtype"

    def logical_layout(self, o: Operand) -> nk.Layout:
        lay = nk.Layout(o.shape, o.dtype, o.strides, o.offset)
        return lay[o.key()] if o.cut else lay

    def memories(self) -> None:
        """Which internal memory each load goes to: (load, tensor) pairs; ``x2`` is a second
        load of ``x`` (the ALU's two operands from one tensor through two memories)."""
        self.load_list = [(k, o) for k, o in (("x", self.x), ("y", self.y), ("w", self.w))
                          if o is not None]
        if self.self_op and self.p(0.5):
            self.load_list.insert(1, ("x2", self.x))
        mems = ["IRAM", "WRAM"] + ([] if self.act == "rescale_clamp" else ["BRAM"])
        self.mem = {}

        def nbytes(load) -> int:
            return (1 if load[1].name == "w" else self.alu_size) * _dt(load[1].dtype).itemsize
        for load in sorted(self.load_list, key=nbytes, reverse=True):  # the largest first
            k = load[0]
            free = [m for m in mems if m not in self.mem.values()]
            fits = [m for m in free if 2 * nbytes(load) <= CAPACITY[m]] or free
            self.mem[k] = self.pick(fits) if self.p(0.95) else self.pick(free)
        if self.act == "rescale_clamp":
            self.mem["bs"] = "BRAM"

    # -- emission ---------------------------------------------------------------------------

    def emit(self) -> Case:
        self.attrs: dict = {}
        act_line = self.act_line()  # sets attrs and the Act's params
        operands = [o for o in (self.x, None if self.inout else self.y, self.w) if o is not None]
        if self.act == "rescale_clamp":
            bs_dt = "float32" if self.float_p else "int32"
            bs_dt = self.pick([bs_dt, "int16", "float16", "bfloat16", "int64", "float32"],
                              [8, 0.3, 0.3, 0.2, 0.2, 0.1]) if self.p(0.1) else bs_dt
            operands.append(Operand("bs", bs_dt, (2,), (1,)))
        out = self.out_op or self.out_operand(
            pad=self.store and not self.scalar_mode and self.fuse < 2 and not self.fold,
            dense=self.store and not self.scalar_mode,
            fused=self.fuse if self.store or self.fuse_out else 0)
        operands.append(out)
        name = f"fuzz_{self.seed}"
        params = ", ".join(o.name for o in operands)
        kw = ", *, " + ", ".join(self.attrs) if self.attrs else ""
        L = self.lines
        L.append(f"def {name}(s, {params}{kw}):")
        self.prologue()
        self.body(0, 1, act_line)
        source = "\n".join(L) + "\n"
        red_dims = self.red_dims + ((len(self.full) - 1,) if self.fold else ())
        logic = Logic(self.family, self.op, self.self_op, self.full, self.out_shape,
                      red_dims, tuple(a["xdim"] for a in self.axes if a["kind"] == "red"),
                      self.acc, self.fold and self.n, self.act, self.act_args,
                      MODE_COMBINE.get(self.mode, COMBINE[self.op]))
        banks = (TARGET.lut.banks, TARGET.lut.bank_bits) if self.p(0.6) else \
            (int(self.pick([1, 2, 4])), int(self.pick([64, 128, 256])))
        return Case(self.seed, name, source, tuple(operands), self.attrs, self.rounding, banks,
                    self.widths, logic, self.hostile, self.y if self.inout else None)

    def line(self, ind: int, text: str) -> None:
        self.lines.append("    " * ind + text)

    def prologue(self) -> None:
        full = self.full
        x = self.x
        if self.inout:
            self.line(1, "y = out  # read, then written")
        if x.cut:
            d, a, b, c = x.cut
            self.line(1, f"x = x[{':, ' * d}{a}:{b}{'' if c == 1 else f':{c}'}]")
        for o in (self.x, self.y):
            if o is not None and (o.name == "y" or len(o.shape) != len(full) or
                                  self.logical_layout(o).shape != full or self.p(0.3)):
                self.line(1, f"{o.name} = {o.name}.broadcast_as({full})")
        if self.w is not None:
            self.line(1, f"w = w.broadcast_as({full[:-1] + (1,)})")
        if self.scalar_mode:
            return
        n = self.n_expr if self.n_expr and self.p(0.5) else str(self.n)
        if self.n_expr and n == self.n_expr:
            self.line(1, f"n = {n}")
            n = "n"
        if not self.known("float-attrs") and self.p(0.03):
            n = f"{self.n}.5"
            self.hostile = "vectorize by a float"
        for o in (self.x, self.y):
            if o is not None:
                fuse = f".fuse({self.fuse})" if self.fuse else ""
                self.line(1, f"{o.name} = {o.name}{fuse}.vectorize({n})")
        if self.fuse and (self.store or self.fuse_out):
            self.line(1, f"out = out.fuse({self.fuse})")
        if self.store and (self.sub or not self.fold):
            self.line(1, f"out = out.vectorize({self.act_n if self.sub else n})")

    @staticmethod
    def known(name: str) -> bool:
        return name in KNOWN

    def out_operand(self, pad: bool, dense: bool, fused: int) -> Operand:
        """The output: a strided view, padded at the end when vectors are stored whole (the
        last vector's junk lanes land there), with a dense last dim when asked and its
        ``fused`` innermost dims dense."""
        shape = list(self.out_shape)
        if pad:
            shape[-1] = self.nv * self.n
        if not self.known("output-size") and not self.inout and self.p(0.03):
            shape[-1] += self.pick([-1, 1, 2]) if shape[-1] > 1 else 1
            self.hostile = "an output spec that the kernel does not write exactly"
        step = 1 if dense or fused or not self.p(0.2) else 2
        strides, acc = [0] * len(shape), 1
        for d in reversed(range(len(shape))):
            gap = 0 if d >= len(shape) - fused else self.gap()  # fused dims stay dense
            strides[d] = step if d == len(shape) - 1 else acc + gap
            acc = strides[d] * shape[d]
        offset = int(self.rng.integers(0, 4))
        return Operand("out", self.out_dt, tuple(shape), tuple(strides), offset)

    def index(self, name: str, zero: set[int]) -> str:
        """The index chain of tensor ``name`` over the dims the loop axes cover: each dim
        gets its loop's variable, or 0 (dims of size 1 and those in ``zero``)."""
        if self.empty_multi:
            return f"{name}[m]"
        exprs = []
        for a in sorted(self.axes, key=lambda a: a["xdim"]):
            if not a.get("block"):
                exprs.append("0" if not a["looped"] or a["xdim"] in zero else a["var"])
        # A multi-iterator whose variables index consecutive dims in order: index by it.
        out, d = name, 0
        while d < len(exprs):
            e = exprs[d]
            if e.endswith("[0]"):
                g = e[:e.index("[")]
                size = sum(1 for a in self.axes if a.get("var", "").startswith(g + "["))
                if exprs[d:d + size] == [f"{g}[{j}]" for j in range(size)] and self.p(0.6):
                    out += f"[{g}]"
                    d += size
                    continue
            out += f"[{e}]"
            d += 1
        if len(exprs) > 1 and "][" in out and "m" not in out[len(name):] and self.p(0.3):
            out = f"{name}[{', '.join(exprs)}]"  # a tuple index, as numpy spells it
        return out

    def depth_of(self, used_dims: set[int]) -> int:
        """The shallowest group boundary at which every used dim's loop is open."""
        need = 0
        for a in self.axes:
            if a["xdim"] in used_dims and a["looped"]:
                need = max(need, a["group"] + 1)
        return need

    def load_plan(self) -> dict[int, list[str]]:
        """Load statements by group boundary: as deep as the ALU, or shallower when the
        view does not depend on the inner loops (broadcast dims indexed by 0)."""
        G = len(self.groups)
        ndims = len(self.fused)
        at: dict[int, list[str]] = {}
        for k, o in self.load_list:
            zero = self.broadcast_dims(o) if self.p(0.5) else set()
            if not self.scalar_mode and k == "x":
                # The primary operand's vector index gives the valid lanes: keep it.
                zero -= {ndims - 1}
            if o.name == "w":  # the scalar does not move along the vectors
                zero |= {ndims - 1}
            used = set(range(ndims)) - zero
            depth = int(self.rng.integers(self.depth_of(used), G + 1))
            mem = self.mem[k].lower()
            at.setdefault(depth, []).append(f"{mem[0]}data = s.{mem}.load("
                                            f"{self.index(o.name, zero)})")
        if self.act == "rescale_clamp":
            act_depth = self.n_par_groups if self.acc else G
            depth = int(self.rng.integers(0, act_depth + 1))
            at.setdefault(depth, []).append("bdata = s.bram.load(bs)")
        for v in at.values():
            self.rng.shuffle(v)
        return at

    def broadcast_dims(self, o: Operand) -> set[int]:
        """Dims of ``o`` (after broadcast, fuse, vectorize) with stride 0."""
        lay = self.logical_layout(o)
        try:
            if o.name == "w":
                lay = lay.broadcast_as(self.full[:-1] + (1,))
            else:
                lay = lay.broadcast_as(self.full)
                if not self.scalar_mode:
                    lay = lay.fuse(self.fuse).vectorize(self.n)
        except nk.ShapeError:
            return set()
        return {d for d, s in enumerate(lay.strides[:len(self.fused)]) if s == 0}

    def body(self, b: int, ind: int, act_line: list[str]) -> None:
        if b == 0:
            self.loads = self.load_plan()
            if self.empty_multi:
                self.line(ind, "for m in s.iterate([]):")
                ind += 1
        for st in self.loads.get(b, []):
            self.line(ind, st)
        G = len(self.groups)
        if b == G:
            self.line(ind, f"pdata = {self.alu_call()}")
            if not self.acc:
                self.act_block(ind, act_line)
            return
        grp = self.groups[b]
        if grp[0]["multi"]:
            sizes = [a["size"] for a in grp]
            dims = [a["xdim"] for a in grp]
            count = str(sizes)
            if dims == list(range(dims[0], dims[0] + len(dims))) and self.p(0.5):
                count = f"x.dims({dims[0]}, {dims[-1] + 1})"
            self.line(ind, f"for m{b} in s.iterate({count}):")
        else:
            a = grp[0]
            count = f"x.dim({a['xdim']})" if self.p(0.4) else str(a["size"])
            self.line(ind, f"for i{b} in s.iterate({count}):")
        self.body(b + 1, ind + 1, act_line)
        if self.acc and b == self.n_par_groups:
            self.act_block(ind, act_line)

    def alu_call(self) -> str:
        data = {o: self.mem[o].lower()[0] + "data" for o in self.mem if o != "bs"}
        x = data["x"]
        mode = "" if self.mode == "ACC" else f", {self.mode!r}"
        if self.op == "pass":
            return f"s.alu.accumulate({x}{mode})"
        if self.op == "smul":
            return f"s.alu.scalar_product_accumulate({data['w']}, {x}{mode})"
        y = data.get("x2", x) if self.self_op else data["y"]
        return f"s.alu.{ALU_METHOD[self.op]}({x}, {y}{mode})"

    def act_block(self, ind: int, act_line: list[str]) -> None:
        p = "pdata"
        if self.sub:
            self.line(ind, "for av in s.iterate(pdata.dim(PData.Vectors)):")
            ind += 1
            p = "pdata[av]"
        self.line(ind, "res = " + act_line[0].replace("PDATA", p))
        self.line(ind, self.out_line())

    def out_line(self) -> str:
        if not self.store:
            # Append into a subtensor selected by the leading output dims, or the whole.
            lead = []
            for a in self.axes:  # leading dims only: never the vector index
                if a["kind"] != "par" or a["odim"] != len(lead) or a.get("block") or \
                        a["xdim"] >= len(self.fused) - 1:
                    break
                lead.append(a)
            k = int(self.rng.integers(0, len(lead) + 1)) if self.p(0.5) else 0
            view = "out" if k == 0 else "out" + "".join(
                f"[{a['var'] if a['looped'] else 0}]" for a in lead[:k])
            if self.empty_multi:
                view = "out"
            return f"s.append({view}, res)"
        # Store: every output dim indexed; the vector dim by its vector index.
        par = sorted((a for a in self.axes if a["kind"] == "par" and not a.get("block")),
                     key=lambda a: a["odim"])
        exprs = [a["var"] if a["looped"] else "0" for a in par]
        if self.fold:
            exprs += ["av"] if self.sub else []
        elif self.sub:
            k = self.n // self.act_n
            exprs[-1] = f"{exprs[-1]} * {k} + av" if k > 1 else f"{exprs[-1]} + av"
        if self.empty_multi:
            return "s.store(out[m], res)"
        return f"s.store(out{''.join(f'[{e}]' for e in exprs)}, res)"

    # -- the Act ----------------------------------------------------------------------------

    def act_line(self) -> list[str]:
        self.act_args: dict = {}
        if self.act == "rescale_clamp":
            shift = 0 if self.float_p else int(self.pick(
                [0, 1, int(self.rng.integers(2, 20)), int(self.rng.integers(20, 63)), 62, 63],
                [1, 1, 4, 1, 0.3, 0.1]))
            if self.float_p and self.p(0.03):
                shift = 2  # refused: float partials take no shift
            zp = self.int_or_float(self.pick(
                [0, int(self.rng.integers(-20, 21)), int(self.rng.integers(-2**31, 2**31)),
                 -2**63, 2**63 - 1], [3, 2, 1, 0.2, 0.2]))
            lo, hi = self.bounds()
            self.attrs.update(shift=shift, zero_point=zp, out_min=lo, out_max=hi)
            if not self.known("float-attrs") and self.p(0.03):
                self.attrs["shift"] = shift + 0.5
                self.hostile = "a float shift"
            self.act_args.update(shift=shift, zero_point=zp, lo=lo, hi=hi)
            return ["s.act.rescale_clamp(PDATA, bdata, shift, zero_point, out_min, out_max)"]
        if self.act == "clamp":
            lo, hi = self.bounds()
            self.attrs.update(out_min=lo, out_max=hi)
            # Torq's Act modes, applied before the clamp (I2F and F2I change the type: not
            # drawn here).
            mode = "ACT" if self.p(0.7) else self.pick(
                ["ABS", "NEG"] + (["CEL", "FLR"] if self.float_p else ["CLZ"]))
            self.act_args.update(lo=lo, hi=hi, mode=mode)
            arg = "" if mode == "ACT" else f", {mode!r}"
            return [f"s.act.clamp(PDATA, out_min, out_max{arg})"]
        if self.act == "lookup":
            return [self.lookup()]
        return [self.linear()]

    def int_or_float(self, v):
        return float(v) if self.float_p else int(v)

    def bounds(self):
        """(lo, hi) for the Act: the output dtype's extremes, a tight range, or wider."""
        if self.float_p:
            specials = [-np.inf, np.inf, -3.4e38, 3.4e38, 0.0, -0.0, 65504.0, -65504.0]
            lo = float(self.pick([self.rng.uniform(-100, 0), self.pick(specials), -1e30],
                                 [3, 1, 0.5]))
            hi = float(self.pick([lo + self.rng.uniform(0, 200), self.pick(specials), np.nan],
                                 [3, 1, 0.05]))
            return lo, hi
        if self.out_dt in INT_OUT:
            olo, ohi = (int(v) for v in (np.iinfo(self.out_dt).min, np.iinfo(self.out_dt).max))
        else:
            olo, ohi = -2**31, 2**31 - 1
        if self.known("clamp-2**63"):
            olo, ohi = max(olo, -2**31), min(ohi, 2**31 - 1)
        kind = self.pick(["dtype", "tight", "int32", "wide", "point", "inverted"],
                         [3, 3, 1, 1, 0.3, 0.2])
        if kind == "dtype":
            return olo, ohi
        if kind == "tight":
            lo = int(self.rng.integers(max(olo, -2**40), min(ohi, 2**40) + 1))
            return lo, min(ohi, lo + int(self.rng.integers(0, 300)))
        if kind == "int32":
            return -2**31, 2**31 - 1
        if kind == "wide":
            return (olo, ohi) if self.known("clamp-2**63") else (-2**63, 2**64 - 1)
        if kind == "point":
            v = int(self.rng.integers(-100, 100))
            return v, v
        return 5, -5

    def table_size(self, item_bytes: int) -> int:
        cap = TARGET.memories["LUT"].size // (2 * item_bytes)
        sizes = [1, 2, 3, 7, 16, 33, 64, 128, 256, 512, 1024, cap, cap * 2]
        return int(self.pick(sizes, [0.5, 1, 1, 1, 2, 1, 2, 2, 2, 1, 1, 0.5, 0.1]))

    def lookup(self) -> str:
        from npukit.lut import Lut, design

        x_dt = self.pair[0]
        if x_dt in ("int8", "int16") and self.p(0.2):
            out = self.pick(["int8", "int16", "int32", "float32", "bfloat16", "float16"])
            fn = self.pick(["tanh", "sigmoid", "silu", "exp", "gelu_tanh"])
            d = design(fn, -4.0, 4.0, int(self.pick([16, 64, 256])), kind="direct",
                       in_dtype=x_dt, out_dtype=out)
            self.attrs["table"] = d
            self.lut_dt = d.lut.offset_dtype.name
            self.act_args.update(lut=d.lut, step_bits=d.step_bits, bias=d.bias, oor="saturate")
            return "s.act.lookup(PDATA, table)"
        dt = _dt(self.lut_dt)
        store = 2 if dt.itemsize == 1 else dt.itemsize
        size = self.table_size(store)
        table = Lut(values(self.rng, self.lut_dt, size, "mixed"))
        step = int(self.pick([0, int(self.rng.integers(0, 8)), int(self.rng.integers(8, 32)),
                              32], [2, 3, 1, 0.05]))
        bias = int(self.pick([0, 1 << int(self.rng.integers(0, 12)),
                              1 << int(self.rng.integers(12, 40)), 3], [2, 3, 0.5, 0.05]))
        oor = self.pick([None, "saturate", "truncate"], [2, 1, 1])
        self.attrs["table"] = table
        self.act_args.update(lut=table, step_bits=step, bias=bias, oor=oor or "saturate")
        args = f"step_bits={step}, bias={bias}" if self.p(0.5) else f"{step}, {bias}"
        return f"s.act.lookup(PDATA, table, {args}{'' if oor is None else f', oor={oor!r}'})"

    def linear(self) -> str:
        from npukit.lut import Lut, design

        x_dt = self.pair[0]
        if x_dt in ("int8", "int16", "bfloat16") and self.p(0.2):
            out = {"int8": "int8", "int16": self.pick(["int16", "int32"]),
                   "bfloat16": "float32"}[x_dt]
            fn = self.pick(["tanh", "sigmoid", "silu", "gelu_tanh", "reciprocal"])
            lo, hi = (0.25, 4.0) if fn == "reciprocal" else (-4.0, 4.0)
            d = design(fn, lo, hi, int(self.pick([16, 64, 128])), kind="linear",
                       in_dtype=x_dt, out_dtype=out)
            self.attrs["table"] = d
            if is_float(d.in_dtype):
                clamp, scale_exp = d.clamp, d.in_frac_bits
            else:
                clamp, scale_exp = tuple(int(math.ldexp(c, d.in_frac_bits)) for c in d.clamp), 0
            self.act_args.update(lut=d.lut, step_bits=d.step_bits, bias=d.bias,
                                 shift_offset=d.shift_offset, lo=clamp[0], hi=clamp[1],
                                 scale_exp=scale_exp)
            return "s.act.linear_approx(PDATA, table)"
        if self.float_p:
            size = self.table_size(8)
            offsets = values(self.rng, "float32", size, "mixed")
            slopes = values(self.rng, "bfloat16", size, self.pick(["mixed", "small"]))
            if self.p(0.3):  # float32 slopes with the low 16 bits zero are accepted too
                slopes = slopes.astype(np.float32)
            table = Lut(offsets, slopes)
            step = int(self.pick([0, int(self.rng.integers(0, 6)), int(self.rng.integers(6, 32))],
                                 [2, 3, 1]))
            bias = int(self.pick([0, int(self.rng.integers(-50, 50)), size // 2], [2, 1, 2]))
            so = 0
            scale_exp = int(self.pick([0, int(self.rng.integers(-8, 9)), 126, -126],
                                      [3, 2, 0.2, 0.2]))
            lo = self.pick([None, float(self.rng.uniform(-100, 0)), -np.inf], [2, 2, 0.3])
            hi = self.pick([None, float(self.rng.uniform(0, 100)), np.inf], [2, 2, 0.3])
            if lo is not None:
                lo = float(np.float32(lo))
            if hi is not None:
                hi = float(np.float32(hi))
        else:
            row = self.pick([("int8", "int8", 2, 8, 32), ("int16", "int16", 3, 16, 64),
                             ("int16", "int32", 4, 16, 64)],
                            [2 if x_dt in ("int8",) else 0.2, 1, 1])
            in_dt, val_dt, min_step, bits, acc_bits = row
            size = self.table_size(2 * _dt(val_dt).itemsize)
            table = Lut(values(self.rng, val_dt, size, "mixed"),
                        values(self.rng, val_dt, size, self.pick(["mixed", "small"])))
            step = int(self.rng.integers(min_step, bits)) if self.p(0.95) else min_step - 1
            bias = int(self.pick([0, int(self.rng.integers(-40, 40)), size // 2,
                                  int(self.rng.integers(-2**31, 2**31))], [2, 1, 2, 0.3]))
            most = acc_bits - 8 * _dt(val_dt).itemsize - 1
            so = int(self.rng.integers(0, most + 1)) if self.p(0.97) else most + 1
            scale_exp = 0
            lo = self.pick([None, int(self.rng.integers(-2**15, 0)), -2**40], [2, 2, 0.3])
            hi = self.pick([None, int(self.rng.integers(0, 2**15)), 2**40], [2, 2, 0.3])
        self.attrs["table"] = table
        self.act_args.update(lut=table, step_bits=step, bias=bias, shift_offset=so, lo=lo,
                             hi=hi, scale_exp=scale_exp)
        kw = []
        if lo is not None or hi is not None:
            kw.append(f"clamp=({lo!r}, {hi!r})".replace("inf", "float('inf')"))
        if scale_exp:
            kw.append(f"scale_exp={scale_exp}")
        pos = f"{step}, {bias}, {so}" if self.p(0.5) else \
            f"step_bits={step}, bias={bias}, shift_offset={so}"
        return f"s.act.linear_approx(PDATA, table, {', '.join([pos] + kw)})"


def generate(seed: int) -> Case:
    """The random case of ``seed``."""
    return _Gen(seed).run()


# -- the oracle ---------------------------------------------------------------------------

def wrap32(x: np.ndarray) -> np.ndarray:
    return (np.asarray(x, np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def logical(case: Case, name: str, arrays: dict) -> np.ndarray | None:
    """Input ``name`` as the kernel sees it, broadcast to the iteration shape."""
    o = next((o for o in case.operands + (case.init,) if o and o.name == name), None)
    if o is None:
        return None
    a = arrays[name]
    a = a[o.key()]
    return np.broadcast_to(a, case.logic.full)


def _alu(op: str, a: np.ndarray, b: np.ndarray | None, floating: bool) -> np.ndarray:
    if floating:
        a = a.astype(np.float32)
        b = None if b is None else b.astype(np.float32)
        with np.errstate(all="ignore"):
            return {"mul": lambda: a * b, "smul": lambda: a * b, "add": lambda: a + b,
                    "sub": lambda: a - b, "max": lambda: np.maximum(a, b),
                    "min": lambda: np.minimum(a, b), "pass": lambda: a}[op]()
    a = a.astype(np.int64)
    b = None if b is None else b.astype(np.int64)
    return wrap32({"mul": lambda: a * b, "smul": lambda: a * b, "add": lambda: a + b,
                   "sub": lambda: a - b, "max": lambda: np.maximum(a, b),
                   "min": lambda: np.minimum(a, b), "pass": lambda: a}[op]())


def _reduce(L: Logic, p: np.ndarray) -> np.ndarray:
    """Combine the partials over the reduced dims in loop order, from the identity."""
    how = L.combine
    floating = p.dtype == np.float32
    shape = tuple(n for d, n in enumerate(p.shape) if d not in L.red_dims)
    if not L.acc:
        return p.reshape(shape)
    if how in ("add", "or", "xor"):
        acc = np.zeros(shape, p.dtype)
    elif how in ("mul", "and"):
        acc = np.full(shape, 1 if how == "mul" else -1, p.dtype)
    elif floating:
        acc = np.full(shape, -np.inf if how == "max" else np.inf, np.float32)
    else:
        acc = np.full(shape, -2**31 if how == "max" else 2**31 - 1, np.int32)
    first = L.red_dims[0]
    sizes = [p.shape[d] for d in L.red_order]
    for idx in itertools.product(*(range(n) for n in sizes)):
        pos = dict(zip(L.red_order, idx))
        key = tuple(pos[d] for d in L.red_dims)
        x = p[(slice(None),) * first + key]
        with np.errstate(all="ignore"):
            if how in ("add", "mul"):
                f = np.add if how == "add" else np.multiply
                acc = f(acc, x).astype(p.dtype) if floating else \
                    wrap32(f(acc.astype(np.int64), x))
            elif how in ("and", "or", "xor"):
                acc = {"and": np.bitwise_and, "or": np.bitwise_or,
                       "xor": np.bitwise_xor}[how](acc, x)
            else:
                acc = (np.maximum if how == "max" else np.minimum)(acc, x)
    return acc


def _clampf(x: np.ndarray, lo, hi) -> np.ndarray:
    """x below lo becomes lo, above hi becomes hi; NaN and values equal to a bound stay."""
    lo, hi = np.float32(lo), np.float32(hi)
    x = np.where(x < lo, lo, x)
    return np.where(x > hi, hi, x).astype(np.float32)


def _rescale(case: Case, p: np.ndarray, bs: np.ndarray):
    a = case.logic.act_args
    if p.dtype == np.float32:
        if not is_float(bs.dtype):
            return None, None
        f = np.float32
        bias, scale = f(bs[0]), f(bs[1])
        with np.errstate(all="ignore"):
            t = (p + bias) * scale + f(a["zero_point"])
            return _clampf(t, a["lo"], a["hi"]), None
    if is_float(bs.dtype):
        return None, None
    bias, scale, shift = int(bs[0]), int(bs[1]), a["shift"]
    out, ok = [], []
    for v in p.reshape(-1).tolist():
        t = (v + bias) * scale
        q, r = divmod(t, 1 << shift)
        half = 1 << shift >> 1
        if shift and (r > half or (r == half and (case.rounding == "half_up" or q % 2))):
            q += case.rounding != "floor"
        q += a["zero_point"]
        # Beyond 64 bits the target wraps: the simulator is the oracle there.
        ok.append(all(-2**63 <= z < 2**63 for z in (t, t + half, q)))
        out.append(_act_int(q, a["lo"], a["hi"]) if ok[-1] else 0)
    return np.array(out, np.int32).reshape(p.shape), np.array(ok).reshape(p.shape)


def _act_mode_int(v: int, mode: str) -> int:
    """Torq's Act mode on one int32 partial, in Python's unbounded integers."""
    if mode == "CLZ":
        return 32 - (v & 0xFFFFFFFF).bit_length()
    return {"ABS": abs(v), "NEG": -v}.get(mode, v)


def _act_mode_float(p: np.ndarray, mode: str) -> np.ndarray:
    fn = {"ABS": np.abs, "NEG": np.negative, "CEL": np.ceil, "FLR": np.floor}.get(mode)
    return p if fn is None else fn(p).astype(np.float32)


def _act_int(v: int, lo: int, hi: int) -> int:
    """An integer Act result: ``v`` clamped to [lo, hi], saturated to int32 (its type)."""
    return min(max(min(max(v, lo), hi), -2**31), 2**31 - 1)


def _lookup(a: dict, p: np.ndarray) -> np.ndarray:
    offsets = a["lut"].offsets
    n = offsets.size
    raw = p.astype(np.int64) >> a["step_bits"]
    if a["oor"] == "saturate":
        idx = np.clip(raw + a["bias"], 0, n - 1)
    else:
        idx = (raw % n + a["bias"] % n) % n
    v = offsets[idx]
    return v.astype(np.float32) if is_float(v.dtype) else v.astype(np.int32)


def _linear(a: dict, p: np.ndarray, data_dt: str) -> np.ndarray:
    lut, sb, bias = a["lut"], a["step_bits"], a["bias"]
    n = lut.size
    if p.dtype == np.float32:
        x = p
        if a["lo"] is not None:
            x = np.where(x < np.float32(a["lo"]), np.float32(a["lo"]), x)
        if a["hi"] is not None:
            x = np.where(x > np.float32(a["hi"]), np.float32(a["hi"]), x)
        with np.errstate(all="ignore"):
            x = (x * np.float32(2.0 ** a["scale_exp"])).astype(np.float32)
            fl = np.nan_to_num(np.floor(x.astype(np.float64)), nan=0.0)
            fl = np.clip(fl, -2**31, 2**31 - 1).astype(np.int64)
            idx = np.clip((fl >> sb) + bias, 0, n - 1)
            slope = lut.slopes[idx].astype(ml_dtypes.bfloat16).astype(np.float32)
            return (slope * x).astype(np.float32) + lut.offsets[idx].astype(np.float32)
    in_dt = "int8" if lut.offset_dtype == np.int8 else "int16"
    x = p.astype(np.int64)
    if a["lo"] is not None:
        x = np.maximum(x, a["lo"])
    if a["hi"] is not None:
        x = np.minimum(x, a["hi"])
    info = np.iinfo(in_dt)
    x = np.clip(x, info.min, info.max)
    idx = np.clip((x >> sb) + bias, 0, n - 1)
    q = lut.slopes[idx].astype(np.int64) * (x & ((1 << sb) - 1)) + \
        (lut.offsets[idx].astype(np.int64) << a["shift_offset"])
    return q.astype(np.int32 if in_dt == "int8" else np.int64)


def oracle(case: Case, arrays: dict) -> tuple[np.ndarray, np.ndarray] | None:
    """The expected logical output and the mask of elements it speaks for (None when
    the case has no oracle): numpy's reading of the kernel's logical description."""
    L = case.logic
    x, y, w = (logical(case, n, arrays) for n in ("x", "y", "w"))
    floating = is_float(x.dtype)
    if L.op == "smul":
        p = _alu("smul", w, x, floating)
    elif L.op == "pass":
        p = _alu("pass", x, None, floating)
    else:
        p = _alu(L.op, x, x if L.self_op else y, floating)
    if L.fold:  # vectors of ``fold`` lanes along the last dim
        m = p.shape[-1]
        nv = -(-m // L.fold)
        p = np.concatenate([p, np.zeros(p.shape[:-1] + (nv * L.fold - m,), p.dtype)], axis=-1)
        p = p.reshape(p.shape[:-1] + (nv, L.fold))
    p = _reduce(L, p)
    mask = np.ones(p.shape, bool)
    if L.fold:  # lanes the last vector's junk reached hold no mathematics
        mask[..., m - (nv - 1) * L.fold:] = False
    a = L.act_args
    if L.act == "rescale_clamp":
        q, ok = _rescale(case, p, arrays["bs"])
        if q is None:
            return None
        if ok is not None:
            mask &= ok
    elif L.act == "clamp":
        if floating:
            q = _clampf(_act_mode_float(p, a["mode"]), a["lo"], a["hi"])
        else:
            vals = [_act_int(_act_mode_int(v, a["mode"]), a["lo"], a["hi"])
                    for v in p.reshape(-1).tolist()]
            q = np.array(vals, np.int32).reshape(p.shape)
    elif L.act == "lookup":
        q = _lookup(a, p)
    else:
        q = _linear(a, p, x.dtype.name)
    if floating and L.act in ("clamp", "rescale_clamp") and np.isnan([a["lo"], a["hi"]]).any():
        mask[...] = False  # a NaN bound: no mathematics to check (the back ends must agree)
    out_dt = _dt(case.out.dtype)
    if out_dt.kind in "iu":
        info = np.iinfo(out_dt)
        q = np.clip(q.astype(np.int64) if q.dtype.kind == "i" else q, info.min, info.max)
    cut = tuple(slice(0, n) for n in L.out_shape)  # an append keeps junk-free lanes only
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return q.astype(out_dt)[cut], mask[cut]


# -- the differential run -----------------------------------------------------------------

CANARY = {"sim": 0x5A, "c": 0x3C, "literal": 0x69}  # a byte pattern per back end
FAILURES = ("raw", "run-error", "disagree", "oracle", "accepted")


@dataclass
class Outcome:
    """``status``: refused (an NpukitError at build: expected for some programs), agree,
    or a failure: raw (any other exception), run-error (an NpukitError while running a
    program that built), disagree (back ends differ, an output element is unwritten or
    something outside the output changed), oracle (the back ends agree on something
    else than numpy), accepted (a hostile program built)."""

    seed: int
    data_seed: int | None
    status: str
    error: str = ""      # exception class
    detail: str = ""

    def __str__(self) -> str:
        where = f"case {self.seed}" + ("" if self.data_seed is None else f" data {self.data_seed}")
        return f"{where}: {self.status} {self.error} {self.detail}".strip()


def same_bits(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Element-wise bit equality; any NaN matches any NaN."""
    if is_float(x.dtype):
        xf, yf = x.astype(np.float64), y.astype(np.float64)
        u = f"u{x.dtype.itemsize}"
        return (np.isnan(xf) & np.isnan(yf)) | (x.view(u) == y.view(u))
    return x == y


def canary_output(o: Operand, backend: str) -> tuple[np.ndarray, np.ndarray]:
    """(buffer filled with the back end's canary bytes, the output view inside it)."""
    itemsize = _dt(o.dtype).itemsize
    raw = np.full((o.footprint() + 3) * itemsize, CANARY[backend], np.uint8)
    big = raw.view(_dt(o.dtype))
    return big, strided_view(big, o)


def positions(o: Operand) -> np.ndarray:
    """The buffer position of every element of the output view."""
    idx = np.arange(o.footprint() + 3)
    return strided_view(idx, o)


def _error(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f"{tb[-1].filename.split('npukit/')[-1]}:{tb[-1].lineno}" if tb else ""
    return f"{str(exc).splitlines()[0][:200] if str(exc) else ''} [{where}]"


def check(case: Case, data_seeds=(0,)) -> list[Outcome]:
    """Build ``case`` and run each data set on every back end; one Outcome each (one
    in all when the build fails)."""
    try:
        prog = case.build()
    except nk.NpukitError as exc:
        return [Outcome(case.seed, None, "refused", type(exc).__name__, _error(exc))]
    except Exception as exc:  # noqa: BLE001 - anything else is what we look for
        return [Outcome(case.seed, None, "raw", type(exc).__name__, "build: " + _error(exc))]
    if case.hostile:
        return [Outcome(case.seed, None, "accepted", "", case.hostile)]
    return [run(case, prog, d) for d in data_seeds]


def run(case: Case, prog, data_seed: int) -> Outcome:
    """One data set on the simulator, the fused C and the literal C."""
    from npukit.c import run_c
    from npukit.run import check_arrays

    inputs = case.arrays(data_seed)
    init = inputs.pop("y") if case.init else None
    before = {k: v.copy() for k, v in inputs.items()}
    got = {}
    for backend in CANARY:
        big, view = canary_output(case.out, backend)
        if init is not None:
            view[...] = init
        arrays = dict(inputs, out=view)
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if backend == "sim":
                    prog.run("sim", **arrays)
                else:
                    run_c(prog, check_arrays(prog, arrays), fuse=backend == "c")
        except nk.NpukitError as exc:
            return Outcome(case.seed, data_seed, "run-error", type(exc).__name__,
                           f"{backend}: {_error(exc)}")
        except Exception as exc:  # noqa: BLE001
            return Outcome(case.seed, data_seed, "raw", type(exc).__name__,
                           f"{backend}: {_error(exc)}")
        got[backend] = big
    for k, v in inputs.items():
        if not np.array_equal(v.view(np.uint8) if False else v, before[k], equal_nan=False) \
                and not same_bits(v, before[k]).all():
            return Outcome(case.seed, data_seed, "disagree", "", f"input {k} was written")
    out = case.out
    inside = np.zeros(got["sim"].size, bool)
    pos = positions(out)
    inside[pos.reshape(-1)] = True
    for backend, big in got.items():
        outside = big.view(np.uint8).reshape(big.size, -1)[~inside]
        if (outside != CANARY[backend]).any():
            bad = int(np.flatnonzero(~inside)[np.flatnonzero((outside != CANARY[backend])
                                                             .any(axis=1))[0]])
            return Outcome(case.seed, data_seed, "disagree", "",
                           f"{backend} wrote position {bad} outside the output view")
    sim = strided_view(got["sim"], out)
    for backend in ("c", "literal"):
        other = strided_view(got[backend], out)
        eq = same_bits(sim, other)
        if not eq.all():
            k = np.unravel_index(int(np.flatnonzero(~eq)[0]), eq.shape)
            n_bad = int((~eq).sum())
            return Outcome(case.seed, data_seed, "disagree", "",
                           f"{backend} != sim at {tuple(map(int, k))} ({n_bad} of {eq.size}): "
                           f"sim {sim[k]!r}, {backend} {other[k]!r}")
    if init is not None:
        inputs["y"] = init
    want = oracle(case, inputs)
    if want is not None:
        exp, mask = want
        region = sim[tuple(slice(0, n) for n in exp.shape)]
        eq = same_bits(region, exp) | ~mask
        if not eq.all():
            k = np.unravel_index(int(np.flatnonzero(~eq)[0]), eq.shape)
            return Outcome(case.seed, data_seed, "oracle", "",
                           f"at {tuple(map(int, k))} ({int((~eq).sum())} of {eq.size}): "
                           f"back ends {region[k]!r}, numpy {exp[k]!r}")
    return Outcome(case.seed, data_seed, "agree")
