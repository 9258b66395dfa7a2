"""ONNX's own backend test suites through npukit, with ONNX Runtime as the reference.

Run:  python benchmarks/onnx_suites.py [--folders node,simple] [--workers 2] [--timeout 120]
      [--only SUBSTRING,...] [--sim-every 1] [--data DIR] [--markdown] [--list refused,...]
      [--json OUT]

The node cases (one operator each) are written from the installed onnx package's own
generators (what ``python -m onnx.backend.test.cmd_tools generate-data`` writes for the model
cases) into ``--data`` (a temporary folder by default); pytorch-converted/, pytorch-operator/
and simple/ are read from the wheel's onnx/backend/test/data/. Every data set of every case
runs through npukit (import, plan, run on the C back end; the first data set of every case
npukit passes also on the simulator, whose outputs must be the C's bytes; ``--sim-every N``
samples every Nth case instead) and through ONNX Runtime, each compared with the case's
expected outputs as the onnx backend test compares them: same shape and type,
``|out - expected| <= atol + rtol * |expected|`` (rtol 1e-3, atol 1e-7 unless the case says
otherwise).

Graph inputs npukit needs as constants (``npukit.onnx.constant_operands``: those that only
select a shape -- a Reshape's shape, axes, pads, starts/ends, scales, sizes, repeats -- and
those it compiles in -- a Conv's weights and bias, quantization scales and zero points, Clip
bounds, a Pad's fill value) are given to ``npukit.onnx.load`` as constants from the data
set, as a deployed model would have them (the model is loaded again for a data set whose
values differ); every other input is a run-time input.

Outcomes per case: pass; refused (a one-line ``NpukitError``); wrong (an output outside the
tolerance, or simulator != C); crash (any other exception); timeout (over ``--timeout``
seconds). Printed per folder, per operator (node/) and the most frequent refusal reasons.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from npukit.dtypes import is_float

FOLDERS = ("node", "pytorch-converted", "pytorch-operator", "simple")
OUTCOMES = ("pass", "refused", "wrong", "crash", "timeout")
# The budgets of the zoo checks: L1 48000 B, L2 512 KiB, L3 64 MiB, a large flash.
BUDGETS = {"target": "gap8", "l1_budget": 48000, "l2_budget": 512 * 1024,
           "l3_budget": 64 << 20, "l3_flash_budget": 256 << 20}
RTOL, ATOL = 1e-3, 1e-7


@dataclass(frozen=True)
class Case:
    """One test case: its folder, name, directory, operator (node/ only) and tolerances."""

    folder: str
    name: str
    path: str
    op: str = ""
    rtol: float = RTOL
    atol: float = ATOL


@dataclass(frozen=True)
class Outcome:
    """What npukit and ONNX Runtime did with one case; ``why`` is the first line of the
    refusal, the error or the mismatch."""

    case: Case
    npukit: str
    why: str = ""
    ort: bool = False
    seconds: float = 0.0
    sim: bool = False  # the simulator ran too (and agreed with the C)


# -- the cases --------------------------------------------------------------------------------

def data_dir() -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data"


def write_node_cases(out: Path) -> None:
    """The node cases of the installed onnx package as folders of ``model.onnx`` and
    ``test_data_set_k/{input,output}_j.pb``, plus ``ops.json`` (case -> operator)."""
    import onnx
    from onnx import numpy_helper
    from onnx.backend.test.case import node

    cases = node.collect_testcases()
    ops = {}
    for case in cases:
        base = re.sub(r"_expanded(_ver\d+)?$", "", case.name)
        ops[case.name] = node._existing_names[base].op_type
        d = out / case.name
        d.mkdir(parents=True, exist_ok=True)
        (d / "model.onnx").write_bytes(case.model.SerializeToString())
        for k, (ins, outs) in enumerate(case.data_sets):
            s = d / f"test_data_set_{k}"
            s.mkdir(exist_ok=True)
            for kind, values, vis in (("input", ins, case.model.graph.input),
                                      ("output", outs, case.model.graph.output)):
                for j, (v, vi) in enumerate(zip(values, vis)):
                    if isinstance(v, onnx.TensorProto):
                        proto = v
                    elif vi.type.HasField("sequence_type"):
                        proto = numpy_helper.from_list(v, vi.name)
                    elif vi.type.HasField("optional_type"):
                        proto = numpy_helper.from_optional(v, vi.name)
                    elif vi.type.HasField("map_type"):
                        proto = numpy_helper.from_dict(v, vi.name)
                    else:
                        proto = numpy_helper.from_array(np.asarray(v), vi.name)
                    (s / f"{kind}_{j}.pb").write_bytes(proto.SerializeToString())
    (out / "ops.json").write_text(json.dumps(ops, sort_keys=True))


def collect(folders, node_dir: Path | None, only=()) -> list[Case]:
    """The cases of ``folders`` whose name contains one of ``only`` (all by default), in name
    order; node/ from ``node_dir``."""
    out = []
    for folder in folders:
        root = node_dir if folder == "node" else data_dir() / folder
        ops = json.loads((root / "ops.json").read_text()) if folder == "node" else {}
        for d in sorted(p for p in root.iterdir() if (p / "model.onnx").exists()):
            if only and not any(part in d.name for part in only):
                continue
            tol = {}
            if (d / "data.json").exists():
                tol = json.loads((d / "data.json").read_text())
            out.append(Case(folder, d.name, str(d), ops.get(d.name, ""),
                            tol.get("rtol", RTOL), tol.get("atol", ATOL)))
    return out


def data_sets(case: Case, model) -> list[tuple[dict, list]]:
    """(inputs by name, expected outputs in graph order) of every data set of a case."""
    import onnx
    from onnx import numpy_helper

    def load(path: Path, vi):
        raw = path.read_bytes()
        if vi.type.HasField("sequence_type"):
            p = onnx.SequenceProto()
            p.ParseFromString(raw)
            return numpy_helper.to_list(p)
        if vi.type.HasField("optional_type"):
            p = onnx.OptionalProto()
            p.ParseFromString(raw)
            return numpy_helper.to_optional(p)
        p = onnx.TensorProto()
        p.ParseFromString(raw)
        return numpy_helper.to_array(p)

    inits = {t.name for t in model.graph.initializer}
    ins = [vi for vi in model.graph.input if vi.name not in inits]
    out = []
    for s in sorted(Path(case.path).glob("test_data_set_*")):
        n_in = len(list(s.glob("input_*.pb")))
        inputs = {vi.name: load(s / f"input_{j}.pb", vi) for j, vi in enumerate(ins[:n_in])}
        outputs = [load(s / f"output_{j}.pb", vi) for j, vi in enumerate(model.graph.output)]
        out.append((inputs, outputs))
    return out


# -- one case ---------------------------------------------------------------------------------

def close(out, want, rtol: float, atol: float) -> str:
    """"" when ``out`` matches ``want`` as the onnx backend test requires, else why not."""
    out = np.asarray(out)
    if not isinstance(want, np.ndarray):
        return f"expected a {type(want).__name__}, not a tensor"
    if out.shape != want.shape:
        return f"shape {out.shape}, expected {want.shape}"
    if out.dtype != want.dtype:
        return f"type {out.dtype}, expected {want.dtype}"
    if want.dtype.kind != "c" and not is_float(want.dtype):  # bfloat16 is a float: NaN == NaN
        bad = out != want
    else:
        o, w = out.astype(np.float64), want.astype(np.float64)
        with np.errstate(invalid="ignore"):
            bad = ~((np.abs(o - w) <= atol + rtol * np.abs(w)) | (np.isnan(o) & np.isnan(w)) |
                    (o == w))
    if not bad.any():
        return ""
    return f"{int(bad.sum())} of {bad.size} elements differ"


class _Timeout(BaseException):
    """A case over its time (not an Exception: no ``except Exception`` of the code under
    test turns it into a refusal)."""


def _alarm(signum, frame):
    # A second alarm (the case did not return to Python after the first) ends the worker:
    # run_units reports the case failed.
    signal.signal(signal.SIGALRM, lambda *_: os._exit(3))
    signal.alarm(10)
    raise _Timeout()


def run_case(unit: tuple[Case, float, bool]) -> Outcome:
    """One case through npukit (and the simulator when ``sim``) and ONNX Runtime."""
    case, timeout, sim = unit
    t0 = time.perf_counter()
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        kind, why, ran_sim = _npukit(case, sim)
    except _Timeout:
        kind, why, ran_sim = "timeout", f"over {timeout:g} s", False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
    seconds = time.perf_counter() - t0
    return Outcome(case, kind, why, _ort(case), seconds, ran_sim)


def _npukit(case: Case, sim: bool) -> tuple[str, str, bool]:
    import onnx

    import npukit.onnx
    from npukit import NpukitError

    model = onnx.load(os.path.join(case.path, "model.onnx"))
    sets = data_sets(case, model)
    try:
        fixed = npukit.onnx.constant_operands(model)
        ran_sim, loaded = False, None
        for inputs, want in sets:
            consts = {k: v for k, v in inputs.items() if k in fixed}
            if loaded is None or any(not np.array_equal(v, loaded[0][k])
                                     for k, v in consts.items()):
                loaded = consts, npukit.onnx.load(model, constants=consts, **BUDGETS)
            g = loaded[1]
            args = {k: v for k, v in inputs.items() if k not in consts}
            res = g.run("c", **args)
            names = [vi.name for vi in model.graph.output]
            for name, w in zip(names, want):
                why = close(res.outputs[name], w, case.rtol, case.atol)
                if why:
                    return "wrong", f"output {name!r}: {why}", False
            if sim and not ran_sim:
                s = g.run("sim", **args)
                for name in names:
                    if s.outputs[name].tobytes() != res.outputs[name].tobytes():
                        return "wrong", f"output {name!r}: the simulator differs from the C", True
                ran_sim = True
        return "pass", "", ran_sim
    except NpukitError as exc:
        lines = str(exc).splitlines() or [""]
        if len(lines) > 1:  # a refusal is one line
            return "crash", f"{type(exc).__name__} of {len(lines)} lines: {lines[0]}", False
        return "refused", lines[0], False
    except _Timeout:
        raise
    except Exception as exc:  # a crash: any error that is not npukit's refusal
        text = str(exc).splitlines()[0] if str(exc) else ""
        return "crash", f"{type(exc).__name__}: {text}", False


def _ort(case: Case) -> bool:
    """Whether ONNX Runtime (CPU, one thread) gives every expected output."""
    import onnx
    import onnxruntime as ort

    try:
        model = onnx.load(os.path.join(case.path, "model.onnx"))
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1
        opts.log_severity_level = 4
        sess = ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        for inputs, want in data_sets(case, model):
            got = sess.run(None, inputs)
            if len(got) != len(want) or any(close(o, w, case.rtol, case.atol)
                                            for o, w in zip(got, want)):
                return False
        return True
    except Exception:  # ONNX Runtime refused or failed: the reference does not pass
        return False


# -- tables -----------------------------------------------------------------------------------

def reason(why: str) -> str:
    """A refusal without its names and numbers, to count the reasons."""
    why = re.sub(r"^nodes? '.*?' \([^)]*\)(, layer \w+)?: ", "", why)
    why = re.sub(r"'[^']*'", "'…'", why)
    return re.sub(r"\[[^\]]*\]|\([^)]*\)|\b\d+(\.\d+)?\b", "…", why)


def tables(outcomes: list[Outcome], markdown: bool) -> str:
    rows = []
    for folder in FOLDERS:
        mine = [o for o in outcomes if o.case.folder == folder]
        if mine:
            c = collections.Counter(o.npukit for o in mine)
            rows.append([folder, len(mine), *(c[k] for k in OUTCOMES),
                         sum(o.ort for o in mine)])
    head = ["suite", "cases", *OUTCOMES, "ONNX Runtime passes"]
    out = [_table(head, rows, markdown)]
    node = [o for o in outcomes if o.case.folder == "node"]
    if node:
        by = collections.defaultdict(collections.Counter)
        for o in node:
            by[o.case.op][o.npukit] += 1
            by[o.case.op]["ort"] += o.ort
        ops = [[op, sum(c[k] for k in OUTCOMES), *(c[k] for k in OUTCOMES), c["ort"]]
               for op, c in sorted(by.items())]
        out.append(_table(["operator", "cases", *OUTCOMES, "ONNX Runtime passes"], ops,
                          markdown))
    why = collections.Counter(reason(o.why) for o in outcomes if o.npukit == "refused")
    out.append(_table(["refusals", "reason"], [[n, r] for r, n in why.most_common(25)],
                      markdown))
    return "\n\n".join(out)


def _table(head: list, rows: list, markdown: bool) -> str:
    cells = [[str(x) for x in r] for r in [head, *rows]]
    if markdown:
        lines = ["| " + " | ".join(r) + " |" for r in cells]
        lines.insert(1, "|" + "|".join(" --- " if k == 0 or not str(rows[0][k]).isdigit()
                                       else " ---: " for k in range(len(head))) + "|"
                     if rows else "|" + " --- |" * len(head))
        return "\n".join(lines)
    width = [max(len(r[k]) for r in cells) for k in range(len(head))]
    return "\n".join("  ".join(x.ljust(w) if k == 0 or not x.isdigit() else x.rjust(w)
                               for k, (x, w) in enumerate(zip(r, width))) for r in cells)


# -- main -------------------------------------------------------------------------------------

def run(folders=FOLDERS, workers: int | None = None, timeout: float = 120.0,
        sim_every: int = 1, only=(), data: str | None = None) -> list[Outcome]:
    """Every case of ``folders`` (whose name contains one of ``only``) through npukit and ONNX
    Runtime on ``workers`` processes (``npukit.workers.run_units``)."""
    from npukit.workers import run_units

    with tempfile.TemporaryDirectory() as tmp:
        node_dir = Path(data or tmp) / "node"
        if "node" in folders and not (node_dir / "ops.json").exists():
            write_node_cases(node_dir)
        cases = collect(folders, node_dir, only)
        units = [(c, timeout, sim_every > 0 and k % sim_every == 0)
                 for k, c in enumerate(cases)]
        results = run_units(run_case, units, workers, label="onnx suites")
    return [r.value if r.ok else Outcome(c, "timeout" if "died" in r.error else "crash",
                                         r.error) for c, r in zip(cases, results)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folders", default=",".join(FOLDERS))
    ap.add_argument("--workers", type=int, default=None, help="processes (default: cores)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    ap.add_argument("--sim-every", type=int, default=1,
                    help="run every Nth case on the simulator too (1: all, 0: none)")
    ap.add_argument("--only", default="", help="cases whose name contains one of these (a,b)")
    ap.add_argument("--data", default=None, help="where to write the node cases (kept)")
    ap.add_argument("--markdown", action="store_true", help="tables in markdown")
    ap.add_argument("--list", default="", help="list the cases of these outcomes (a,b)")
    ap.add_argument("--json", default=None, help="write every case's outcome here")
    args = ap.parse_args(argv)
    folders = tuple(f for f in args.folders.split(",") if f)
    t0 = time.perf_counter()
    only = tuple(p for p in args.only.split(",") if p)
    outcomes = run(folders, args.workers, args.timeout, args.sim_every, only, args.data)
    listed = set(args.list.split(",")) - {""}
    for o in outcomes:
        if o.npukit in listed:
            print(f"{o.npukit:8} {o.case.folder}/{o.case.name}: {o.why}")
    print(tables(outcomes, args.markdown))
    sims = sum(o.sim for o in outcomes)
    print(f"\n{len(outcomes)} cases in {time.perf_counter() - t0:.0f} s; {sims} also on the "
          f"simulator")
    if args.json:
        Path(args.json).write_text(json.dumps(
            [{"folder": o.case.folder, "case": o.case.name, "op": o.case.op,
              "npukit": o.npukit, "why": o.why, "ort": o.ort, "seconds": round(o.seconds, 2)}
             for o in outcomes], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
