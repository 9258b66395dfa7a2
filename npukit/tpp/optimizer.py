"""The TPP tensor compiler's optimizer: a new ``TensorOperation`` with the same result.

Its steps, each recorded as a decision that prints with the operation:

1. **Drop** dimensions of size 1 (they move no pointer).
2. **Fuse** two dimensions of one type that are contiguous in every tensor the operation
   touches (``stride_outer == size_inner * stride_inner``) into one; repeated until none
   is left. This is the TPP text's rule for dimensions below ``min_kernel_size`` ("the
   optimizer will try to fuse it with another dimension"), applied to every contiguous
   pair: a fused dimension visits the same elements in the same order.
3. **Choose the prim dimensions**: among the assignments the main primitive can address
   (the checks of ``TensorOperation``), the largest block, without transposition when
   there is a choice.
4. **Split** a prim dimension larger than ``max_kernel_size`` into a seq loop and a prim
   dimension, only if both are at least ``min_kernel_size`` (the TPP text's rule).
5. **Share**: when the work pays for starting threads (``PARALLEL_MIN_FLOPS`` for gemm,
   ``PARALLEL_MIN_BYTES`` otherwise) and there is more than one thread, the outermost
   non-``k`` loops become ``shared`` until they have at least one iteration per thread; if
   the loops cannot feed every thread, a non-``k`` prim dimension (the one with the largest
   out stride) is split exactly into a shared loop of at most 4 blocks per thread, the
   best balanced and then the fewest, times a prim rest of at least ``min_kernel_size``.
   Each primitive call packs its operands, so fewer and larger calls are faster: the
   shared loop is not held to ``min_kernel_size``.
6. **Reorder** for stride-1 access: shared loops outermost, then seq loops from the
   largest out stride to the smallest, ``k`` loops innermost (the output block stays in
   cache while it accumulates), then the prim dimensions.

``k`` dimensions are never split or shared, so every output element is summed in the same
order whatever the thread count; fusing ``k`` dimensions may regroup a sum (a different
rounding of the same exact result).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

from ..layout import chains
from .errors import TppError, WrongDimensionError
from .operation import Dim, TensorOperation, _is_int, host_threads, register_pass
from .primitives import BINARY, REDUCE

# Work that pays for waking the worker threads (tens of microseconds in a virtual machine):
# about half a millisecond on one core.
PARALLEL_MIN_FLOPS = 1 << 26  # gemm: 67 MFLOP
PARALLEL_MIN_BYTES = 1 << 23  # unary and binary: 8.4 MB read and written


def _desc(d: Dim) -> str:
    return f"{d.type} {d.size} (in0 {d.in0}, in1 {d.in1}, out {d.out})"


def _short(d: Dim) -> str:
    return f"{d.type}{d.size}"


def _tensors(main: str) -> tuple[str, ...]:
    if main in ("gemm", "brgemm") or main in BINARY:
        return ("in0", "in1", "out")
    return ("out",) if main == "none" else ("in0", "out")


def _make(base: dict, dims: list[Dim], history: tuple) -> TensorOperation:
    bias = [d.bias for d in dims] if base["prim_first"] == "bias" else None
    return TensorOperation(**base, dim_types=[d.type for d in dims],
                           exec_types=[d.exec for d in dims], dim_sizes=[d.size for d in dims],
                           strides_in0=[d.in0 for d in dims], strides_in1=[d.in1 for d in dims],
                           strides_out=[d.out for d in dims], strides_bias=bias,
                           _history=history)


def _fuse(dims: list[Dim], tensors: tuple[str, ...], lo: int, log: list[str]) -> list[Dim]:
    """Fuse pairs of dims of one type until none is left: any two dims, in either order, whose
    strides chain (``npukit.layout.chains``) in every tensor, the rule of
    ``npukit.layout.coalesce`` applied to all tensors at once."""
    dims = list(dims)
    while True:
        pair = next(((i, j) for i, j in itertools.permutations(range(len(dims)), 2)
                     if dims[i].type == dims[j].type and all(
                         chains((dims[i].size, dims[i].stride(t)),
                                (dims[j].size, dims[j].stride(t))) for t in tensors)), None)
        if pair is None:
            return dims
        i, j = pair
        outer, inner = dims[i], dims[j]
        fused = replace(inner, size=outer.size * inner.size, exec="seq")
        small = [x for x in (outer, inner) if x.size < lo]
        why = f" ({' and '.join(_short(x) for x in small)} below min_kernel_size {lo})" \
            if small else ""
        log.append(f"fused {_desc(outer)} and {_desc(inner)}: contiguous in "
                   f"{', '.join(tensors)}{why} -> {_desc(fused)}")
        dims = [fused if k == j else d for k, d in enumerate(dims) if k != i]


def _prim_choices(base: dict, dims: list[Dim]) -> list[tuple[int, tuple[int, ...], list[Dim]]]:
    """Every assignment of prim dimensions the main primitive can address, as (score,
    prim indices in order, dims with exec types set) — the largest block first."""
    main = base["prim_main"]
    idx = {t: [k for k, d in enumerate(dims) if d.type == t] for t in "cmnk"}
    if main == "gemm":
        cands = [(m, n, k) for m in idx["m"] for n in idx["n"] for k in idx["k"]]
    elif main == "brgemm":
        cands = [(br, m, n, k) for m in idx["m"] for n in idx["n"] for br in idx["k"]
                 for k in idx["k"] if br != k]
    else:
        cands = list(itertools.combinations(range(len(dims)), 2))
    out = []
    for prims in cands:
        trial = [replace(d, exec="seq") for k, d in enumerate(dims) if k not in prims] + \
            [replace(dims[k], exec="prim") for k in prims]
        try:
            op = _make(base, trial, ())
        except TppError:
            continue
        r = op.roles
        size = math.prod(dims[k].size for k in prims)
        plain = not (r.trans or r.swap or r.trans_a or r.trans_b)
        out.append(((size, plain), prims, trial))
    out.sort(key=lambda x: x[0], reverse=True)
    return out


def _split(d: Dim, outer: int) -> tuple[Dim, Dim]:
    """``d`` as ``outer`` iterations of a block of ``d.size / outer``."""
    inner = d.size // outer
    return (replace(d, size=outer, in0=d.in0 * inner, in1=d.in1 * inner, out=d.out * inner,
                    bias=d.bias * inner), replace(d, size=inner))


def plan(base: dict, dims: list[Dim], *, threads: int, min_kernel_size: int,
         max_kernel_size: int | None, history: tuple = (), before: str = "") -> TensorOperation:
    """The optimized operation for the configuration ``base`` (dtype and primitives) over
    ``dims`` (their execution types are chosen anew)."""
    main = base["prim_main"]
    tensors = _tensors(main) + (("bias",) if base["prim_first"] == "bias" else ())
    log: list[str] = []
    # 1. Drop size-1 dimensions.
    kept = [d for d in dims if d.size > 1]
    if len(kept) < len(dims):
        log.append(f"dropped {len(dims) - len(kept)} dimension(s) of size 1")
    # 2. Fuse contiguous dimensions.
    fused = _fuse(kept, tensors, min_kernel_size, log)
    # 3. Prim dimensions: a size-1 placeholder stands in for a type the primitive needs.
    work = list(fused)
    need = {"gemm": "mnk", "brgemm": "mnkk"}.get(main, "k" if main in REDUCE else "")
    for t in set(need):
        missing = need.count(t) - sum(d.type == t for d in work)
        work += [Dim(t, "seq", 1, 0, 0, 0)] * max(0, missing)
    while len(work) < 2:
        work.append(Dim("c", "seq", 1, 0, 0, 0))
    choices = _prim_choices(base, work)
    if not choices:
        # Only a size-1 dimension (dropped) gave a tensor its unit stride: a size-1 placeholder
        # of each type is a unit-stride dimension for every tensor.
        work += [Dim(t, "seq", 1, 0, 0, 0) for t in ("cmnk" if need else "cmn")]
        choices = _prim_choices(base, work)
    if not choices:
        raise WrongDimensionError(f"the optimizer found no prim dimensions the {main} primitive "
                                  f"can address among {', '.join(_desc(d) for d in work)}")
    _, prims, work = choices[0]
    work = [d for d in work if d.exec == "prim" or d.size > 1]  # unused placeholders go
    prim_dims = [d for d in work if d.exec == "prim"]
    log.append("prim dimensions " + ", ".join(_desc(d) for d in prim_dims) +
               ": the largest block the primitive addresses with unit strides")
    # 4. Kernel splits: a prim dimension above max_kernel_size.
    if max_kernel_size is not None:
        work = _kernel_splits(work, min_kernel_size, max_kernel_size, log)
    # 5. Shared loops for the threads.
    work = _share(base, work, threads, min_kernel_size, log)
    # 6. Order: shared, seq (largest out stride first, k innermost), prim.
    shared = sorted((d for d in work if d.exec == "shared"), key=lambda d: -d.out)
    seq = sorted((d for d in work if d.exec == "seq" and d.type != "k"), key=lambda d: -d.out)
    seq_k = sorted((d for d in work if d.exec == "seq" and d.type == "k"),
                   key=lambda d: -max(d.in0, d.in1))
    prim = [d for d in work if d.exec == "prim"]
    final = shared + seq + seq_k + prim
    log.append("order: " + "; ".join(
        f"{name} " + " ".join(_short(d) for d in group)
        for name, group in (("shared", shared), ("seq", seq + seq_k), ("prim", prim))
        if group))
    return _make(base, final, history + ((before, tuple(log)),))


def _kernel_splits(work: list[Dim], lo: int, hi: int, log: list[str]) -> list[Dim]:
    out = []
    for d in work:
        if d.exec != "prim" or d.size <= hi:
            out.append(d)
            continue
        inner = next((b for b in range(min(hi, d.size // lo), lo - 1, -1)
                      if d.size % b == 0), None)
        if inner is None:
            log.append(f"kept prim {_desc(d)} above max_kernel_size {hi}: no split leaves both "
                       f"parts at least min_kernel_size {lo}")
            out.append(d)
            continue
        o, i = _split(d, d.size // inner)
        log.append(f"split prim {_desc(d)} into {o.size} x {i.size} (max_kernel_size {hi}, "
                   f"both parts at least min_kernel_size {lo}): seq {_short(o)}, prim "
                   f"{_short(i)}")
        out += [replace(o, exec="seq"), i]
    return out


def _share(base: dict, work: list[Dim], threads: int, lo: int, log: list[str]) -> list[Dim]:
    main = base["prim_main"]
    points = math.prod(d.size for d in work)
    if main in ("gemm", "brgemm"):
        enough, what = 2 * points >= PARALLEL_MIN_FLOPS, f"{2 * points / 1e6:.3g} MFLOP"
        bound = f"{PARALLEL_MIN_FLOPS / 1e6:.3g} MFLOP"
    else:
        nbytes = 4 * points * len(_tensors(main))
        enough, what = nbytes >= PARALLEL_MIN_BYTES, f"{nbytes / 1e6:.3g} MB"
        bound = f"{PARALLEL_MIN_BYTES / 1e6:.3g} MB"
    if threads <= 1:
        log.append("no shared dimensions: 1 thread")
        return work
    if not enough:
        log.append(f"no shared dimensions: {what} is below {bound}, the work that pays for "
                   f"starting threads")
        return work
    loops = sorted((k for k, d in enumerate(work) if d.exec == "seq" and d.type != "k"),
                   key=lambda k: -work[k].out)
    work = list(work)
    chosen, count = [], 1
    for k in loops:
        if count >= threads and count % threads == 0 or count >= 8 * threads:
            break
        chosen.append(k)
        count *= work[k].size
        work[k] = replace(work[k], exec="shared")
    if count >= threads:
        log.append("shared " + ", ".join(_desc(work[k]) for k in chosen) +
                   f": {count} iterations for {threads} threads")
        return work
    # Split the largest non-k prim dimension: `threads` shared iterations (or a multiple).
    # The prim dimension with the largest out stride: its blocks are the largest runs of out.
    cands = sorted((k for k, d in enumerate(work) if d.exec == "prim" and d.type != "k"),
                   key=lambda k: (-work[k].out, -work[k].size))
    for k in cands:
        d = work[k]
        # Exact splits into at most 4 blocks per thread, the prim part at least
        # min_kernel_size; the best balance (blocks per busiest thread), then the fewest.
        outers = [o for o in range(2, 4 * threads + 1) if d.size % o == 0 and
                  d.size // o >= lo and count * o >= threads]
        if not outers:
            continue
        best = max(outers, key=lambda o: (count * o / threads / math.ceil(count * o / threads),
                                          -o))
        o, i = _split(d, best)
        log.append(f"split prim {_desc(d)} into {o.size} x {i.size} for {threads} threads: "
                   f"shared {_short(o)} (few blocks: each call packs its operands, so fewer "
                   f"larger calls are faster), prim {_short(i)} (at least min_kernel_size "
                   f"{lo})")
        return work[:k] + [replace(o, exec="shared"), i] + work[k + 1:]
    log.append(f"{count} shared iteration(s) for {threads} threads: no dimension splits into "
               f"{threads} parts of at least min_kernel_size {lo}")
    return work


def optimize(op: TensorOperation, *, threads: int | None = None, min_kernel_size: int = 16,
             max_kernel_size: int | None = None) -> TensorOperation:
    """``op`` optimized (see the module docstring); ``threads`` defaults to the host's
    (``NPUKIT_THREADS`` caps it)."""
    threads = host_threads() if threads is None else threads
    for name, v, low in (("threads", threads, 1), ("min_kernel_size", min_kernel_size, 1),
                         ("max_kernel_size", max_kernel_size, 1)):
        if v is None and name == "max_kernel_size":
            continue
        if not _is_int(v) or not low <= v <= 1 << 31:
            raise WrongDimensionError(f"optimize: {name} must be an integer of at least {low}, "
                                      f"got {v!r}")
    if max_kernel_size is not None and max_kernel_size < min_kernel_size:
        raise WrongDimensionError(f"optimize: max_kernel_size {max_kernel_size} is below "
                                  f"min_kernel_size {min_kernel_size}")
    base = {k: v for k, v in op.config().items() if k in
            ("dtype", "prim_first", "prim_main", "prim_last")}
    return plan(base, list(op.dims), threads=int(threads), min_kernel_size=int(min_kernel_size),
                max_kernel_size=max_kernel_size, history=op.history, before=op.table())


register_pass("optimize", optimize)
