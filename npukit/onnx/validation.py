"""Validating an imported model on a data set: every input through npukit and through ONNX
Runtime on the same model (and on a float reference model when given), per output the
bit-exact fraction, the largest errors, top-1 agreement and the inputs that differ most.

The inputs run as work units of ``npukit.workers`` (a local process pool or a Dask
cluster): each unit carries the model's bytes and its input arrays; each worker process
imports and compiles the model once (into its own C cache, ``npukit.c.cache``, whose
entries are written under temporary names and renamed, so workers of one machine may
share it) and keeps it for its later units.

Tolerance (the exit status of ``npukit validate``): against ONNX Runtime on the same model,
integer outputs and the float outputs a DequantizeLinear makes from integers are bit-exact
on every input; other float outputs within the tolerance of ``npukit run --check``
(``npukit.onnx.check.FLOAT_TOL`` relative to the output's largest magnitude). The float
reference model measures the quantization error and never fails a validation.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..errors import NpukitError
from ..workers import run_units
from .check import compare, ort_session, shown

WORST = 5  # inputs named as the worst of each output


class InputError(NpukitError):
    """A data set that does not fit the model's inputs."""


def model_bytes(model) -> bytes:
    """The serialized model of a path, bytes or an ``onnx.ModelProto``; a path's external
    data is read from the model's folder, as ONNX reads it, and travels in the bytes."""
    if isinstance(model, bytes):
        return model
    if hasattr(model, "SerializeToString"):
        return model.SerializeToString()
    from ..files import open_regular

    try:
        with open_regular(model, "model") as f:  # never a FIFO or a device
            data = f.read()
    except OSError as exc:
        raise NpukitError(f"model {str(model)!r}: cannot read it: {exc.strerror}") from None
    return _with_external_data(data, Path(model))


def _with_external_data(data: bytes, path: Path) -> bytes:
    """``data`` with the tensors it keeps in external files read from ``path``'s folder
    (never the current directory); ``data`` itself when it has none or is no ONNX model
    (refused by the loader then)."""
    import onnx
    from onnx.external_data_helper import load_external_data_for_model, uses_external_data

    try:
        proto = onnx.load_from_string(data)
    except Exception:  # noqa: BLE001 - not a model: the loader's refusal comes later
        return data
    tensors = [t for t in onnx.external_data_helper._get_all_tensors(proto)
               if uses_external_data(t)]
    if not tensors:
        return data
    try:
        load_external_data_for_model(proto, str(path.resolve().parent))
    except (OSError, ValueError, onnx.checker.ValidationError) as exc:
        raise NpukitError(f"model {str(path)!r}: cannot read its external data from "
                          f"{str(path.resolve().parent)!r}: {str(exc).splitlines()[0]}"
                          ) from None
    return proto.SerializeToString()


# -- reading a data set -----------------------------------------------------------------------

def _arrays(path: Path, ports: dict, stacked: bool = False) -> dict[str, np.ndarray]:
    """The arrays of a .npy or .npz file, every header checked first (``npukit.files``): at
    most the bytes of one input set (``stacked``: of any number of them, each array of an
    input's dtype and shape after its first axis)."""
    from ..files import ARRAY_BUDGET, read_arrays

    one = sum(int(np.prod(p.shape, dtype=np.int64)) * np.dtype(p.dtype).itemsize
              for p in ports.values())

    def check(name, shape, dtype):
        port = ports.get(name) or (next(iter(ports.values())) if len(ports) == 1 else None)
        if stacked and port is not None and (tuple(shape[1:]) != tuple(port.shape)
                                             or dtype != port.dtype):
            raise InputError(f"--inputs {path.name!r}: input {name!r} is {port.dtype} "
                             f"{tuple(port.shape)}, the file stacks {dtype} "
                             f"{tuple(shape[1:])} ({tuple(shape)} in all)")

    budget = ARRAY_BUDGET if stacked else max(one, 1) * 64
    return read_arrays(path, "--inputs", budget, check)


def _by_input(arrays: dict, ports: dict, where: str) -> dict[str, np.ndarray]:
    """``arrays`` by the model's input names: arrays named so, or the only array of a
    one-input model."""
    if len(ports) == 1 and len(arrays) == 1:
        return {next(iter(ports)): next(iter(arrays.values()))}
    missing = sorted(set(ports) - set(arrays))
    if missing:
        raise InputError(f"--inputs {where}: holds {sorted(arrays)}, no array for input(s) "
                         f"{missing}")
    return {k: arrays[k] for k in ports}


def _fit(name: str, a: np.ndarray, port, where: str) -> np.ndarray:
    if a.shape != tuple(port.shape) or a.dtype != port.dtype:
        raise InputError(f"--inputs {where}: input {name!r} is {port.dtype} "
                         f"{tuple(port.shape)}, the file holds {a.dtype} {a.shape}")
    return np.ascontiguousarray(a)


def read_inputs(path, ports: dict) -> list[tuple[str, dict[str, np.ndarray]]]:
    """The data set at ``path`` as (name, inputs by ONNX name), sorted by name.

    ``path`` is a folder of ``.npy`` files (a one-input model) and ``.npz`` files (arrays
    named by the model's inputs), one input set a file, named by the file; or one ``.npz``
    whose arrays (named by the inputs, or one array for a one-input model) stack the input
    sets along a new first axis, named ``FILE[i]``. ``ports``: the model's inputs."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in (".npy", ".npz"))
        if not files:
            raise InputError(f"--inputs {str(path)!r}: the folder holds no .npy or .npz file")
        sets = []
        for f in files:
            got = _by_input(_arrays(f, ports), ports, repr(f.name))
            sets.append((f.name, {k: _fit(k, a, ports[k], repr(f.name))
                                  for k, a in got.items()}))
        return sets
    if path.suffix != ".npz":
        raise InputError(f"--inputs {str(path)!r}: give a folder of .npy/.npz files or one "
                         f".npz of stacked inputs")
    stacked = _by_input(_arrays(path, ports, stacked=True), ports, repr(path.name))
    counts = {len(a) if a.ndim else 0 for a in stacked.values()}
    if len(counts) != 1:
        raise InputError(f"--inputs {str(path)!r}: the arrays stack different numbers of "
                         f"inputs: { {k: a.shape for k, a in stacked.items()} }")
    n = counts.pop()
    return [(f"{path.name}[{i}]", {k: _fit(k, a[i], ports[k], f"{path.name}[{i}]")
                                   for k, a in stacked.items()}) for i in range(n)]


# -- the work of one input --------------------------------------------------------------------

@dataclass(frozen=True)
class Job:
    """What every unit of one validation shares: the models and how to import them."""

    model: bytes
    reference: bytes | None
    target: str
    l1_budget: int | None
    l2_budget: int | None
    l3_budget: int | None
    backend: str


_LOADED: dict = {}  # per worker process: a Job's digest -> (graph, sessions)


def _loaded(job: Job):
    key = hashlib.sha256(repr((job.target, job.l1_budget, job.l2_budget, job.l3_budget,
                               job.backend)).encode() + job.model
                         + (job.reference or b"")).hexdigest()
    if key not in _LOADED:
        import onnx

        from . import load

        g = load(onnx.load_from_string(job.model), target=job.target, l1_budget=job.l1_budget,
                 l2_budget=job.l2_budget, l3_budget=job.l3_budget)
        sessions = [ort_session(onnx.load_from_string(m)) for m in (job.model, job.reference)
                    if m is not None]
        _LOADED.clear()  # one job at a time: keep one model's graph and C
        _LOADED[key] = (g, sessions)
    return _LOADED[key]


def run_one(unit) -> dict:
    """One input set through npukit and ONNX Runtime: ``{"npukit", "ort", "reference"}``
    output arrays by name (``reference`` None without a reference model), and ``cycles``."""
    job, inputs = unit
    g, sessions = _loaded(job)
    res = g.run(job.backend, **inputs)
    outs = []
    for sess in sessions:
        names = [o.name for o in sess.get_outputs() if o.name in g.outputs]
        outs.append(dict(zip(names, sess.run(names, inputs))))
    return {"npukit": {k: v.copy() for k, v in res.outputs.items()}, "ort": outs[0],
            "reference": outs[1] if len(outs) > 1 else None, "cycles": res.cycles}


# -- the result -------------------------------------------------------------------------------

@dataclass(frozen=True)
class OutputStats:
    """One output of the model over the data set, against one ONNX Runtime model."""

    output: str
    against: str  # "model" (ONNX Runtime on the same model) or "reference" (the float one)
    exact: float  # fraction of bit-identical elements over every input
    inputs_exact: float  # fraction of inputs with every element bit-identical
    max_abs: float
    max_rel: float  # largest over inputs of max |ours - ort| / max |ort|
    top1: float | None  # fraction of inputs with the same arg-max (a classifier output)
    worst: tuple[tuple[str, float], ...]  # inputs not bit-exact, largest max_abs first
    # (up to WORST of them, with their max_abs; empty when every input is bit-exact)
    within: bool  # the documented tolerance held on every input (always True: reference)

    def __str__(self) -> str:
        top = "" if self.top1 is None else f", top-1 agreement {100 * self.top1:.2f}%"
        # Names printed as ``npukit run`` prints them (``shown``): a crafted file or node
        # name cannot move the cursor or erase a line of the verdict.
        worst = ", ".join(f"{shown(n)} ({e:.3g})" for n, e in self.worst) or "none differ"
        mark = "" if self.against == "reference" else \
            f"  [{'within' if self.within else 'OUTSIDE'} tolerance]"
        return (f"{shown(self.output)} vs ONNX Runtime on the {self.against}: bit-exact "
                f"{100 * self.exact:.2f}% of elements, {100 * self.inputs_exact:.2f}% of "
                f"inputs; max abs error {self.max_abs:.3g}, max relative {self.max_rel:.3g}"
                f"{top}; worst: {worst}{mark}")


@dataclass(frozen=True)
class Validation:
    """A validation's numbers: ``count`` inputs run, ``outputs`` (``OutputStats`` per output
    and model compared with), ``failed`` (input name, why) for inputs that could not run,
    ``cycles`` (simulated, per input, with ``backend="sim"``), ``clock_mhz`` (the target's),
    ``within``."""

    count: int
    outputs: tuple[OutputStats, ...]
    failed: tuple[tuple[str, str], ...]
    cycles: tuple[int, ...] | None
    clock_mhz: float | None = None  # the target's clock, for the cycles' time
    costs: str = ""  # which constants priced the cycles, how accurate (``CostModel.caveat``)

    @property
    def within(self) -> bool:
        """Every input ran and every output against the same model is within tolerance."""
        return not self.failed and all(s.within for s in self.outputs)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["within"] = self.within
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def __str__(self) -> str:
        rows = [f"Validated on {self.count} inputs"
                + (f" ({len(self.failed)} FAILED to run)" if self.failed else "") + ":"]
        rows += [f"  {s}" for s in self.outputs]
        rows += [f"  input {shown(n)}: {shown(why)}" for n, why in self.failed]
        if self.cycles:
            lo, hi = min(self.cycles), max(self.cycles)
            time = "" if not self.clock_mhz else \
                f" ({lo / self.clock_mhz:.1f} .. {hi / self.clock_mhz:.1f} us at " \
                f"{self.clock_mhz:g} MHz)"
            rows.append(f"  simulated cycles: {lo} .. {hi}{time}")
            rows.append(f"  ({self.costs})")
        rows.append("within tolerance" if self.within else "OUTSIDE tolerance")
        return "\n".join(rows)


def _classifier(shape) -> bool:
    return len(shape) >= 1 and shape[-1] > 1 and int(np.prod(shape[:-1])) == 1


def _worst(names, cmps) -> list[int]:
    """The inputs (indices) not bit-exact, largest error first (NaN first), then by name;
    at most ``WORST``."""
    def error(i: int) -> float:
        return np.inf if np.isnan(cmps[i].max_abs) else cmps[i].max_abs

    differ = [i for i, c in enumerate(cmps) if c.exact < 1.0]
    return sorted(differ, key=lambda i: (-error(i), names[i]))[:WORST]


def _stats(output: str, against: str, names, ours, refs, step, exact_needed) -> OutputStats:
    cmps = [compare(output, o, r, step) for o, r in zip(ours, refs)]
    sizes = [r.size for r in refs]
    exact = sum(c.exact * s for c, s in zip(cmps, sizes)) / max(sum(sizes), 1)
    top1 = None
    if _classifier(refs[0].shape):
        top1 = float(np.mean([np.argmax(o) == np.argmax(r) for o, r in zip(ours, refs)]))
    order = _worst(names, cmps)
    if against == "reference":
        within = True
    elif exact_needed:
        within = all(c.exact == 1.0 for c in cmps)
    else:
        within = all(c.within for c in cmps)
    return OutputStats(output, against, float(exact),
                       float(np.mean([c.exact == 1.0 for c in cmps])),
                       max(c.max_abs for c in cmps), max(c.max_rel for c in cmps), top1,
                       tuple((names[i], cmps[i].max_abs) for i in order), within)


def _check_reference(data: bytes, reference, g) -> None:
    """Refuse, before any worker starts, a ``--reference`` that is not an ONNX model ONNX
    Runtime loads, or that lacks one of the model's outputs (by name)."""
    import onnx
    from google.protobuf.message import DecodeError

    where = f"--reference {str(reference)!r}" if isinstance(reference, (str, Path)) \
        else "--reference"
    try:
        proto = onnx.load_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise NpukitError(f"{where}: not an ONNX model: {str(exc).splitlines()[0]}") from None
    names = [o.name for o in proto.graph.output]
    missing = [n for n in g.outputs if n not in names]
    if missing:
        raise NpukitError(f"{where}: has outputs {names}, not the model's {missing}: "
                          f"the float model must name its outputs as the model does")
    ort_session(proto)  # ONNX Runtime's refusal (a RuntimeRefusal) comes now, once


def validate(model, inputs, reference=None, *, target: str = "gap8",
             l1_budget: int | None = None, l2_budget: int | None = None,
             l3_budget: int | None = None, backend: str = "c", count: int | None = None,
             workers: int | None = None, scheduler: str | None = None) -> Validation:
    """Validate ``model`` (a path, bytes or ``onnx.ModelProto``) on ``inputs``: a path
    (``read_inputs``) or a list of input dicts (by ONNX name; named ``#0``, ``#1``, ...).
    ``reference``: a float model to compare with too. ``count``: the first inputs only.
    ``backend``: "c" or "sim" (adds cycles). Runs on ``workers`` local processes (one per
    core by default) or the Dask cluster at ``scheduler``."""
    from . import load

    if backend not in ("c", "sim"):
        raise NpukitError(f"backend={backend!r}: give 'c' or 'sim'")
    if count is not None and count < 1:  # sets[:-1] would drop the last input silently
        raise NpukitError(f"--count {count}: give the number of inputs to validate, 1 or more")
    data = model_bytes(model)
    import onnx

    g = load(onnx.load_from_string(data), target=target, l1_budget=l1_budget,
             l2_budget=l2_budget, l3_budget=l3_budget)  # refusals before any worker starts
    if isinstance(inputs, (str, Path)):
        sets = read_inputs(inputs, g.inputs)
    else:
        sets = [(f"#{i}", {k: _fit(k, np.asarray(a), g.inputs[k], f"#{i}")
                           for k, a in _by_input(d, g.inputs, f"#{i}").items()})
                for i, d in enumerate(inputs)]
    sets = sets[:count] if count is not None else sets
    if not sets:
        raise InputError("no inputs to validate on")
    ref = None if reference is None else model_bytes(reference)
    if ref is not None:
        _check_reference(ref, reference, g)
    if backend == "c":  # compiled once here: a compiler or cache problem is one refusal now,
        g.host_graph().compile("c")  # not one failure per input (and the workers find it)
    job = Job(data, ref, target, l1_budget, l2_budget, l3_budget, backend)
    outcomes = run_units(run_one, [(job, arrays) for _, arrays in sets], workers, scheduler,
                         label="npukit validate")
    names = [n for n, _ in sets]
    done = [(n, o.value) for n, o in zip(names, outcomes) if o.ok]
    failed = tuple((n, o.error) for n, o in zip(names, outcomes) if not o.ok)
    stats = []
    if done:
        ok_names = [n for n, _ in done]
        for out, port in g.outputs.items():
            step = g.output_steps.get(out)
            exact_needed = port.dtype.kind in "iu" or step is not None
            ours = [v["npukit"][out] for _, v in done]
            stats.append(_stats(out, "model", ok_names, ours, [v["ort"][out] for _, v in done],
                                step, exact_needed))
            if job.reference is not None:
                stats.append(_stats(out, "reference", ok_names, ours,
                                    [v["reference"][out] for _, v in done], None, False))
    cycles = tuple(v["cycles"] for _, v in done) if backend == "sim" else None
    return Validation(len(sets), tuple(stats), failed, cycles, g.target.clock_mhz,
                      g.target.costs.caveat())
