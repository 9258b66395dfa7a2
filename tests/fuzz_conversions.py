"""Random programs that convert and mask, for the differential fuzzer: simulator against
the fused and the literal C, bit for bit, and against an oracle that shares no conversion
code with npukit (``float_oracle``'s exact rounding, Python integers).

``generate(seed)`` makes one ``Case``, of one of two kinds:

- a Compass DSL kernel of a few statements, each an ``S.cast`` of one vector (any pair of
  the DSL's types, ``bool`` included; native or other lane counts; ``saturate`` or not)
  or rounds of ``S.vstore_scatter`` under a mask (none, a comparison, ``S.vnot``/``S.vand``
  of comparisons, a constant one: ``S.tail_mask``, a ``"16T16F"`` string, a list), into
  global memory or lsram, indices colliding, masked-off lanes pointing anywhere;
- the kernel language's conversions (``arith.convert``: a transfer into a buffer of
  another dtype), every pair of its dtypes in one hand-built IR program; the pairs from a
  float to an integer must be refused at build (``DTypeError``).

The data sit at every rounding edge: ties of bfloat16 and float16 and the values just
beside them (a second rounding goes the wrong way from those), integers past 2^24, halves,
the limits of every integer type, NaN, infinities, signed zeros, subnormals.
``check(case, data_seeds)`` returns one ``fuzz_kernels.Outcome`` per data set.
"""

from __future__ import annotations

import linecache
import warnings
from dataclasses import dataclass

import numpy as np
from float_oracle import DTYPES, exact, rounded
from fuzz_kernels import CANARY, Outcome, _error, same_bits

import npukit as nk
import npukit.dsl as S
from npukit import ir, passes
from npukit.layout import Layout

DSL_TYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "float16", "bfloat16",
             "float32")
KERNEL_TYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                "float16", "bfloat16", "float32", "float64")
BF16 = DTYPES["bfloat16"]


def _dt(name: str) -> np.dtype:
    return BF16 if name == "bfloat16" else np.dtype(name)


def _is_float(name: str) -> bool:
    return name in DTYPES


# -- data at the rounding edges ----------------------------------------------------------

INT_EDGES = sorted({s * (v + d) for v in (0, 2**7, 2**8, 2**15, 2**16, 2**24, 2**31, 2**32,
                                          2**53, 2**63)
                    for d in (-1, 0, 1) for s in (1, -1)}
                   | {2**24 + 2**16 + 1, 2**24 + 3 * 2**16, 2**31 - 2**7, 2**31 - 2**7 - 1,
                      65519, 65520, 2049, 2051})
FLOAT_EDGES = [0.5, 1.5, 2.5, -0.5, -1.5, 0.99, -0.99, 127.5, -128.5, 255.5, 32767.5,
               65535.5, 65519.99, 65520.0, 2147483647.5, 2147483648.0, -2147483649.0, 1e10,
               -1e10, 3.4e38, 3.4028235e38, 1e300, 5e-324, 1e-45, 2**-24, 2**-25, 2**-133,
               2**-134, 1 + 2**-8 + 2**-30, 0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan]


def _from_float64(x: np.ndarray, name: str) -> np.ndarray:
    """float64 data as ``name``: bfloat16 by keeping the top half of the float32 (input
    data need no rounding, and this way none of ml_dtypes' conversions is used)."""
    if name == "bfloat16":
        with np.errstate(over="ignore"):
            f = x.astype(np.float32)
        return (f.view(np.uint32) >> np.uint32(16)).astype(np.uint16).view(BF16)
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(name)


def _ties(rng: np.random.Generator, n: int) -> np.ndarray:
    """float64 midpoints between neighbouring bfloat16 or float16 values (random signs and
    exponents), the float64 values beside them, and integers around those that are."""
    bf = rng.random(n) < 0.5
    hi = np.where(bf, 0x7F7F, 0x7BFF)
    b = rng.integers(0, hi)
    lo_val = np.where(bf, _widen(b, "bfloat16"), _widen(b, "float16"))
    up_val = np.where(bf, _widen(b + 1, "bfloat16"), _widen(b + 1, "float16"))
    mid = (lo_val + up_val) / 2 * np.where(rng.random(n) < 0.5, -1, 1)
    near = np.nextafter(mid, np.where(rng.random(n) < 0.5, -np.inf, np.inf))
    return np.where(rng.random(n) < 0.5, mid, near)


def _widen(bits: np.ndarray, fmt: str) -> np.ndarray:
    b = np.asarray(bits).astype(np.uint16)
    if fmt == "bfloat16":
        return (b.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    return b.view(np.float16).astype(np.float64)


def values(rng: np.random.Generator, name: str, n: int) -> np.ndarray:
    """``n`` values of dtype ``name``: a mix of edges, ties (as ``name`` holds them: the
    neighbours of a tie in its own precision) and random values."""
    dt = _dt(name)
    pick = rng.choice(4, n, p=[0.3, 0.3, 0.2, 0.2])
    if not _is_float(name):
        info = np.iinfo(dt)
        edges = np.array([v for v in INT_EDGES if info.min <= v <= info.max], object)
        ties = np.round(_ties(rng, n))
        ties = np.where((ties >= float(info.min)) & (ties < float(info.max)), ties, 0)
        ties = ties.astype(np.int64 if dt.kind == "i" else np.uint64)
        ties = (ties.astype(object) + rng.integers(-1, 2, n).astype(object))
        uniform = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True).astype(object)
        small = rng.integers(-300, 300, n).astype(object)
        parts = [rng.choice(edges, n), ties, uniform, small]
        out = np.choose(pick, parts)
        return np.array([min(max(int(v), int(info.min)), int(info.max)) for v in out], dt)
    edges = rng.choice(np.array(FLOAT_EDGES + INT_EDGES[::3], np.float64), n)
    ties = _ties(rng, n)
    scaled = rng.normal(size=n) * 10.0 ** rng.integers(-12, 12, n)
    halves = rng.integers(-600, 600, n) / 2
    out = _from_float64(np.choose(pick, [edges, ties, scaled, halves]), name)
    if name == "float32":  # the float32 neighbours of the ties, as float32 holds them
        with np.errstate(over="ignore"):
            near = np.nextafter(out, np.where(rng.random(n) < 0.5, -np.inf, np.inf)
                                .astype(np.float32))
        out = np.where((pick == 1) & (rng.random(n) < 0.5), near, out)
    return out


# -- the oracle ----------------------------------------------------------------------------

def convert_exact(x: np.ndarray, dst: str, wrap: bool, saturate: bool = False) -> np.ndarray:
    """``x`` converted to ``dst`` by the rules npukit states, computed independently: to a
    float, rounded once to nearest even (``float_oracle``); float to integer (the DSL's
    ``S.cast``; the kernel language refuses it), truncated toward zero, NaN -> 0,
    saturated to int32, then the low bits (``saturate``: clamped to ``dst``); integer to
    integer, the low bits (``wrap``, the DSL) or clamped (the kernel language's stores)."""
    if _is_float(dst):
        return rounded(x, dst)
    if dst == "bool":
        return np.array([v != 0 for v in exact(x)], np.uint8)  # NaN is not 0
    info = np.iinfo(dst)
    out = []
    for v in exact(x):
        if isinstance(v, float):
            v = 0 if v != v else -2**31 if v < -2**31 else 2**31 - 1 if v > 2**31 - 1 \
                else int(v)  # int() truncates toward zero
        if wrap and not saturate:
            out.append((v - int(info.min)) % (1 << info.bits) + int(info.min))
        else:
            out.append(min(max(v, int(info.min)), int(info.max)))
    return np.array(out, dst)


# -- Compass DSL programs --------------------------------------------------------------------

@dataclass(frozen=True)
class Cast:
    """``y = S.cast(a, dst)`` on 4 vectors (one per TEC) of ``lanes`` lanes; a bool source
    is ``a > 0`` of int8 lanes, a bool result is cast again to uint8."""

    src: str
    dst: str
    lanes: int
    saturate: bool | None

    def params(self, k: int) -> list[tuple[str, str, int]]:
        src = "int8" if self.src == "bool" else self.src
        dst = "uint8" if self.dst == "bool" else self.dst
        return [(f"a{k}", f"{src}x{self.lanes}", 4 * self.lanes),
                (f"y{k}", f"{dst}x{self.lanes}", 4 * self.lanes)]

    def lines(self, k: int) -> list[str]:
        x = f"a{k}[tid] > 0" if self.src == "bool" else f"a{k}[tid]"
        sat = "" if self.saturate is None else f", saturate={self.saturate}"
        expr = f"S.cast({x}, {self.dst!r}{sat})"
        if self.dst == "bool":
            expr = f"S.cast({expr}, 'uint8')"
        return [f"y{k}[tid] = {expr}"]

    def inputs(self, rng, k: int) -> dict:
        src = "int8" if self.src == "bool" else self.src
        return {f"a{k}": values(rng, src, 4 * self.lanes)}

    def expected(self, k: int, inputs: dict, start: dict) -> dict:
        a = inputs[f"a{k}"]
        x = (a > 0).astype(np.uint8) if self.src == "bool" else a
        want = convert_exact(x, self.dst, True, bool(self.saturate))
        return {f"y{k}": (want, np.ones(a.size, bool))}


@dataclass(frozen=True)
class Scatter:
    """``rounds`` of ``S.vstore_scatter(v[r], out, i[r], mask)`` into ``n`` elements of
    global memory or of an lsram copy of it; ``mask`` is the mask's source text with
    ``{m}`` for the mask data vector of the round, ``bits`` the lanes of a constant one;
    ``zeroed``: the values and indices of the masked-off lanes are 0 (``S.vsel``), as a
    masked ``S.vload`` leaves them (the Compass DSL's own tail loop)."""

    dtype: str
    lanes: int
    rounds: int
    n: int
    index: str
    mask: str
    bits: tuple[bool, ...] | None
    lsram: bool
    zeroed: bool = False

    def params(self, k: int) -> list[tuple[str, str, int]]:
        size = self.rounds * self.lanes
        return [(f"v{k}", f"{self.dtype}x{self.lanes}", size),
                (f"i{k}", f"{self.index}x{self.lanes}", size),
                (f"m{k}", f"int16x{self.lanes}", size), (f"o{k}", self.dtype, self.n)]

    def lines(self, k: int) -> list[str]:
        out = f"b{k}" if self.lsram else f"o{k}"
        mask = self.mask.format(m=f"m{k}[r]")
        v, i = f"v{k}[r]", f"i{k}[r]"
        if self.zeroed:
            v, i = f"S.vsel({v}, 0, {mask})", f"S.vsel({i}, 0, {mask})"
        body = [f"for r in range({self.rounds}):",
                f"    S.vstore_scatter({v}, {out}, {i}{', ' + mask if mask else ''})"]
        if not self.lsram:
            return body
        return [f"b{k} = S.alloc_buffer({self.n}, {self.dtype!r}, 'lsram')",
                f"S.dma_copy(b{k}, o{k}, {self.n})", *body, f"S.dma_copy(o{k}, b{k}, {self.n})"]

    def active(self, m: np.ndarray) -> np.ndarray:
        """Which lanes store, round by round, for mask data ``m``."""
        m = m.reshape(self.rounds, self.lanes)
        if self.bits is not None:
            return np.broadcast_to(np.array(self.bits), m.shape)
        if not self.mask:
            return np.ones(m.shape, bool)
        return {"{m} > 0": m > 0, "S.vnot({m} > 0)": m <= 0,
                "S.vand({m} > 0, {m} < 3)": (m > 0) & (m < 3)}[self.mask]

    def inputs(self, rng, k: int) -> dict:
        size = self.rounds * self.lanes
        m = rng.integers(-2, 5, size).astype(np.int16)
        act = self.active(m).reshape(-1)
        spread = self.n if rng.random() < 0.5 else max(self.n // 8, 1)  # collisions
        idx = rng.integers(0, spread, size)
        hi = 32767 if self.index == "int16" else 65535
        wild = rng.integers(-32768 if self.index == "int16" else 0, hi + 1, size)
        idx = np.where(act, idx, 0 if self.zeroed else wild)  # or point anywhere
        return {f"v{k}": values(rng, self.dtype, size), f"i{k}": idx.astype(self.index),
                f"m{k}": m}

    def expected(self, k: int, inputs: dict, start: dict) -> dict:
        """Lanes in order, rounds in order, onto what the output held (its canary)."""
        v = inputs[f"v{k}"].reshape(self.rounds, self.lanes)
        idx = inputs[f"i{k}"].reshape(self.rounds, self.lanes).astype(np.int64)
        act = self.active(inputs[f"m{k}"])
        out, written = start[f"o{k}"].copy(), np.zeros(self.n, bool)
        for r in range(self.rounds):
            for lane in np.flatnonzero(act[r]):
                out[idx[r, lane]], written[idx[r, lane]] = v[r, lane], True
        return {f"o{k}": (out, written)}


@dataclass(frozen=True)
class DslCase:
    """A Compass DSL kernel: ``statements`` in order, 4 TECs."""

    seed: int
    statements: tuple
    name: str = "fuzz"
    hostile: str | None = None

    @property
    def source(self) -> str:
        params = [p for k, s in enumerate(self.statements) for p in s.params(k)]
        head = ", ".join(f"{name}: S.ptr({t!r}, 'global')" for name, t, _ in params)
        body = ["tid = S.get_local_id()"] + [x for k, s in enumerate(self.statements)
                                             for x in s.lines(k)]
        return f"def {self.name}_{self.seed}({head}):\n" + "".join(f"    {x}\n" for x in body)

    def build(self):
        filename = f"<npukit-{self.name}-{self.seed}>"
        src = self.source
        linecache.cache[filename] = (len(src), None, src.splitlines(keepends=True), filename)
        ns = {"S": S}
        exec(compile(src, filename, "exec"), ns)  # noqa: S102 - our own generated text
        sizes = {name: n for k, s in enumerate(self.statements) for name, _, n in s.params(k)}
        fn = S.prim_func(ns[f"{self.name}_{self.seed}"])
        return S.build(fn, target="compass", **sizes)

    def arrays(self, data_seed: int) -> dict:
        rng = np.random.default_rng([self.seed, data_seed])
        return {name: a for k, s in enumerate(self.statements)
                for name, a in s.inputs(rng, k).items()}

    def outputs(self) -> dict[str, tuple[int, np.dtype]]:
        return {name: (n, _dt(S.DType(t).elem.name)) for k, s in enumerate(self.statements)
                for name, t, n in s.params(k)[1 if isinstance(s, Cast) else 3:]}

    def expected(self, inputs: dict, start: dict) -> dict:
        return {name: w for k, s in enumerate(self.statements)
                for name, w in s.expected(k, inputs, start).items()}

    def describe(self) -> str:
        return f"# fuzz case {self.seed}: Compass DSL\n{self.source}"


MASKS = ("", "{m} > 0", "S.vnot({m} > 0)", "S.vand({m} > 0, {m} < 3)")


def _const_mask(rng, lanes: int) -> tuple[str, tuple[bool, ...]]:
    """A constant mask's text and lanes: the tail masks gcc once folded wrongly (16 or 32
    true lanes, then false), any tail, a string, a list."""
    kind = rng.integers(4)
    if kind == 0 and lanes in (32, 64):
        t = int(rng.choice([16, 32])) if lanes == 64 else 16
        return f"S.tail_mask({t}, {lanes})", tuple(k < t for k in range(lanes))
    if kind <= 1:
        t = int(rng.integers(0, lanes + 1))
        return f"S.tail_mask({t}, {lanes})", tuple(k < t for k in range(lanes))
    bits = tuple(bool(b) for b in rng.random(lanes) < 0.6)
    if kind == 2:
        text = "".join("T" if b else "F" for b in bits)
        return repr(text), bits
    return repr(list(bits)), bits


def _lanes(rng, name: str) -> int:
    native = 32 // _dt("int8" if name == "bool" else name).itemsize
    return int(rng.choice([native, native, native // 2, 2 * native,
                           int(rng.integers(2, 41))]))


def _dsl_case(seed: int, rng) -> DslCase:
    sts = []
    for _ in range(int(rng.integers(2, 7))):
        if rng.random() < 0.7:
            src, dst = rng.choice(DSL_TYPES + ("bool",), 2, replace=False)
            sat = None
            if dst in DSL_TYPES and not _is_float(dst) and rng.random() < 0.5:
                sat = bool(rng.random() < 0.7)
            sts.append(Cast(str(src), str(dst), _lanes(rng, src), sat))
            continue
        dtype = str(rng.choice(DSL_TYPES))
        lanes = _lanes(rng, dtype)
        if rng.random() < 0.5:
            mask, bits = _const_mask(rng, lanes)
        else:
            mask, bits = str(rng.choice(MASKS)), None
        sts.append(Scatter(dtype, lanes, int(rng.integers(1, 4)), int(rng.integers(8, 200)),
                           str(rng.choice(["int16", "uint16"])), mask, bits,
                           bool(rng.random() < 0.3), bool(mask) and rng.random() < 0.5))
    return DslCase(seed, tuple(sts))


def all_casts(lanes: int = 8) -> DslCase:
    """One DSL kernel that casts between every pair of the DSL's types (and bool), with
    and without saturation: the fuzzer's first case, and the test suite's."""
    sts = [Cast(s, d, lanes, sat) for s in DSL_TYPES + ("bool",) for d in DSL_TYPES + ("bool",)
           if s != d for sat in ((None, True) if d in DSL_TYPES and not _is_float(d)
                                 else (None,))]
    return DslCase(lanes, tuple(sts), "all_casts")


# -- the kernel language's conversions -------------------------------------------------------

@dataclass(frozen=True)
class CopyCase:
    """Hand-built IR: for every pair of ``KERNEL_TYPES``, a tensor of the source type moved
    into a tensor of the destination type. A float source and an integer destination is not
    a conversion the target defines: building such a program must be refused (``refused``
    lists those pairs, each checked on its own)."""

    seed: int
    n: int = 64
    hostile: str | None = None

    def pairs(self) -> list[tuple[str, str]]:
        return [(s, d) for s in KERNEL_TYPES for d in KERNEL_TYPES
                if s != d and not (_is_float(s) and not _is_float(d))]

    def refused(self) -> list[tuple[str, str]]:
        return [(s, d) for s in KERNEL_TYPES for d in KERNEL_TYPES
                if _is_float(s) and not _is_float(d)]

    def program(self, pairs) -> ir.Program:
        n = self.n
        ins = {s: ir.Buffer(f"x_{s}", "LRAM", _dt(s), n, "in") for s, _ in pairs}
        params, body = [(b, nk.spec((n,), b.dtype)) for b in ins.values()], []
        for s, d in pairs:
            out = ir.Buffer(f"y_{s}_{d}", "LRAM", _dt(d), n, "out")
            body.append(ir.Copy(ir.View(out, Layout((n,), _dt(d))),
                                ir.View(ins[s], Layout((n,), _dt(s))), "ndl_q", None,
                                f"{s} to {d}"))
            params.append((out, nk.spec((n,), _dt(d))))
        return ir.Program(f"conversions_{len(pairs)}", nk.target("torq"), tuple(params), (),
                          tuple(body))

    def build(self):
        for pair in self.refused():
            try:
                passes.check(self.program([pair]))
            except nk.DTypeError:
                continue
            raise AssertionError(f"{pair[0]} into {pair[1]} was accepted: a float-to-int "
                                 f"transfer must be refused")
        return passes.check(self.program(self.pairs()))

    def arrays(self, data_seed: int) -> dict:
        rng = np.random.default_rng([self.seed, data_seed])
        return {f"x_{s}": values(rng, s, self.n) for s in KERNEL_TYPES}

    def outputs(self) -> dict[str, tuple[int, np.dtype]]:
        return {f"y_{s}_{d}": (self.n, _dt(d)) for s, d in self.pairs()}

    def expected(self, inputs: dict, start: dict) -> dict:
        return {f"y_{s}_{d}": (convert_exact(inputs[f"x_{s}"], d, False),
                               np.ones(self.n, bool)) for s, d in self.pairs()}

    def describe(self) -> str:
        return (f"# fuzz case {self.seed}: the kernel language's conversions, every pair of "
                f"{', '.join(KERNEL_TYPES)}, {self.n} elements each")


def generate(seed: int):
    """Case ``seed``: every fourth one the kernel language's conversions (the same program,
    other data), the others a random Compass DSL kernel."""
    if seed % 4 == 0:
        return CopyCase(seed)
    return _dsl_case(seed, np.random.default_rng(seed))


# -- the differential run ----------------------------------------------------------------

def _canary(n: int, dt: np.dtype, backend: str) -> np.ndarray:
    return np.full(n * dt.itemsize, CANARY[backend], np.uint8).view(dt)


def check(case, data_seeds=(0,)) -> list[Outcome]:
    """Build ``case`` and run each data set on every back end; one Outcome each (one in
    all when the build fails)."""
    try:
        prog = case.build()
    except nk.NpukitError as exc:
        return [Outcome(case.seed, None, "refused", type(exc).__name__, _error(exc))]
    except Exception as exc:  # noqa: BLE001 - anything else is what we look for
        return [Outcome(case.seed, None, "raw", type(exc).__name__, "build: " + _error(exc))]
    return [run(case, prog, d) for d in data_seeds]


def run(case, prog, data_seed: int) -> Outcome:
    """One data set on the simulator, the fused C and the literal C, outputs canary first
    (a different byte per back end); each output's written elements must agree bit for bit
    (any NaN matches any NaN) and with the oracle, the others keep the canary."""
    from npukit.c import run_c
    from npukit.run import check_arrays

    inputs = case.arrays(data_seed)
    got, want = {}, {}
    for backend in CANARY:
        outs = {k: _canary(n, dt, backend) for k, (n, dt) in case.outputs().items()}
        want[backend] = case.expected(inputs, {k: v.copy() for k, v in outs.items()})
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                arrays = dict(inputs, **outs)
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
        got[backend] = outs
    for name in case.outputs():
        bad = _compare(name, {b: got[b][name] for b in CANARY}, {b: want[b][name] for b in CANARY})
        if bad:
            return Outcome(case.seed, data_seed, *bad)
    return Outcome(case.seed, data_seed, "agree")


def _compare(name: str, got: dict, want: dict) -> tuple[str, str, str] | None:
    """``(status, error, detail)`` of the first difference in output ``name``, else None:
    disagree when a back end differs from the simulator or leaves an element it must not
    write changed, oracle when they agree on something else than the oracle."""
    exp_sim, written = want["sim"]
    for backend in ("sim", "c", "literal"):
        exp = want[backend][0]
        kept = same_bits(got[backend][~written], exp[~written])
        if not kept.all():
            k = int(np.flatnonzero(~written)[np.flatnonzero(~kept)[0]])
            return "disagree", "", f"{name}[{k}]: {backend} wrote an element it must not"
    sim = got["sim"][written]
    for backend in ("c", "literal"):
        eq = same_bits(sim, got[backend][written])
        if not eq.all():
            k = int(np.flatnonzero(written)[np.flatnonzero(~eq)[0]])
            return "disagree", "", (f"{name}[{k}]: {backend} != sim ({int((~eq).sum())} of "
                                    f"{eq.size}): sim {got['sim'][k]!r}, {backend} "
                                    f"{got[backend][k]!r}")
    eq = same_bits(sim, exp_sim[written])
    if not eq.all():
        k = int(np.flatnonzero(written)[np.flatnonzero(~eq)[0]])
        return "oracle", "", (f"{name}[{k}]: back ends {got['sim'][k]!r}, oracle "
                              f"{exp_sim[k]!r}")
    return None
