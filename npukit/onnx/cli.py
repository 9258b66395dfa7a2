"""``npukit run MODEL.onnx``: import an ONNX model, print its memory plan and layers with
their tiling and simulated cycles, run it with the C back end, and optionally check it
against ONNX Runtime, write a standalone C project or a timeline trace.

    npukit run model.onnx --target gap8 --l1 48000 --l2 300K --l3 8M \\
        --input x=x.npy --check --emit out/ --trace run.json
    npukit run model.onnx --plan        # the plan, tiles and cycles only: compiles nothing

With no ``--input``, inputs are deterministic random values of the model's input types
(float32 uniform in [-1, 1), integers over their range). ``--check`` exits 1 when an output
is outside the tolerance (float32: 1e-4 relative to the output's largest magnitude;
integers: 1 LSB). An operator npukit cannot import ends the command with one line naming the
node and the operator (exit 2).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

import numpy as np

from ..errors import NpukitError

SUFFIXES = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size(text: str) -> int:
    """A byte count: ``48000``, ``300K``, ``8M`` (powers of 1024)."""
    t = text.strip().upper().removesuffix("B")
    mult = SUFFIXES.get(t[-1:], 1)
    digits = t[:-1] if t[-1:] in SUFFIXES else t
    try:
        value = int(float(digits) * mult)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (48000, 300K, 8M)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive")
    return value


# What every budget option's help says of its value.
SIZE_HELP = "bytes; K, M, G suffixes are powers of 1024 (48000, 300K, 0.5M)"


def register(subparsers) -> argparse.ArgumentParser:
    """Add ``run`` to the ``npukit`` command's subparsers."""
    p = subparsers.add_parser(
        "run", help="import an ONNX model, plan it, run it in C, check it against ONNX Runtime",
        description=__doc__.replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="MODEL.onnx", help="the ONNX model file")
    p.add_argument("--target", default="gap8", help="a built-in target or a target TOML file "
                   "(default: gap8)")
    p.add_argument("--l1", type=size, help=f"L1 budget, at most the target's L1 ({SIZE_HELP}; "
                   f"default: the target's L1)")
    p.add_argument("--l2", type=size, help="L2 budget (default: the target's L2)")
    p.add_argument("--l3", type=size, help="L3 RAM budget (default: the target's)")
    p.add_argument("--flash", type=size, help="L3 flash budget (default: the target's)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="an input's values: a .npy file, or a .npz file holding an array named "
                   "NAME (or only one array); random values for inputs not given")
    p.add_argument("--dtype", choices=["float32"], help="float32: run a QDQ model as written "
                   "(no integer fusion)")
    p.add_argument("--check", action="store_true", help="compare every output with ONNX "
                   "Runtime's; exit 1 past the tolerance")
    p.add_argument("--emit", metavar="DIR", help="write a standalone C project (make check "
                   "reproduces the outputs)")
    p.add_argument("--sdk", choices=["host", "gap"], default="host",
                   help="with --emit: host (C for this machine, the default) or gap (GAP SDK "
                        "C: <Name>Kernels.c/.h with AT_* calls, built here by make emul "
                        "through npukit's emulation of the SDK, make check)")
    p.add_argument("--trace", metavar="OUT.json", help="write the simulated timeline as Chrome "
                   "trace-event JSON (open in Perfetto)")
    p.add_argument("--no-cycles", action="store_true", help="skip the simulated cycle model")
    p.add_argument("--plan", action="store_true", help="print the memory plan, the tiles and "
                   "the predicted cycles, then stop: compiles and runs nothing "
                   "(OnnxGraph.summary() in Python)")
    p.set_defaults(func=run)
    return p


def _progress(text: str) -> None:
    """A progress line on a terminal (stderr), nothing otherwise."""
    if sys.stderr.isatty():
        print(f"npukit run: {text}...", file=sys.stderr, flush=True)


def _inputs(g, specs: list[str]) -> dict[str, np.ndarray]:
    from .check import random_inputs

    arrays = random_inputs(g)
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or name not in g.inputs:
            raise NpukitError(f"--input {spec!r}: give NAME=FILE.npy with NAME one of "
                              f"{list(g.inputs)}")
        a = _read_array(spec, name, path, g.inputs[name])
        port = g.inputs[name]
        if a.shape != tuple(port.shape) or a.dtype != port.dtype:
            raise NpukitError(f"--input {spec!r}: input {name!r} is {port.dtype} "
                              f"{tuple(port.shape)}, the file holds {a.dtype} {a.shape}")
        arrays[name] = np.ascontiguousarray(a)
    return arrays


def _read_array(spec: str, name: str, path: str, port) -> np.ndarray:
    """The array in a .npy file, or in a .npz file the array named ``name`` (or its only one),
    every header checked against the input's dtype and shape before any data is read
    (``npukit.files.read_arrays``)."""
    from ..files import read_arrays

    want = (np.dtype(port.dtype), tuple(port.shape))
    option = f"--input {spec!r}:"

    def check(member, shape, dtype):  # the one array read: the input's, or the only one
        if (dtype, tuple(shape)) != want:
            raise NpukitError(f"--input {spec!r}: input {name!r} is {port.dtype} "
                              f"{tuple(port.shape)}, the file holds {dtype} {tuple(shape)}")

    nbytes = int(np.prod(port.shape, dtype=np.int64)) * np.dtype(port.dtype).itemsize
    data = read_arrays(path, option.rstrip(":"), budget=max(nbytes, 1), check=check, want=name)
    if "" in data:
        return data[""]
    if name in data:
        return data[name]
    if len(data) == 1:
        return next(iter(data.values()))
    raise NpukitError(f"--input {spec!r}: {path!r} holds {sorted(data)}, none named {name!r}")


def plan_table(g) -> str:
    """The memory plan: every tensor's memory, area, offset and size, and the ONNX name it
    stands for where its C name differs; totals per memory."""
    names = dict(g.onnx_names)
    names.update({p.cname: n for n, p in list(g.inputs.items()) + list(g.outputs.items())})
    width = max([len(t) for t in g.tensors] + [6]) + 2
    rows = [f"Memory plan of graph {g.name} on {g.target.name}:"]
    for level, a in g.memory.items():
        rows.append(f"  {level:<9} static {a.static:>10} B  dynamic {a.dynamic:>10} B  "
                    f"(budget {a.budget} B)")
    rows.append(f"  {'tensor':<{width}}{'memory':<10}{'area':<9}{'offset':>9}{'size':>10}  "
                f"layers")
    for t in g.tensors.values():
        off = "" if t.offset is None else str(t.offset)
        live = f"{t.live[0]}" if t.live[0] == t.live[1] else f"{t.live[0]}..{t.live[1]}"
        note = f"  ({names[t.name]!r})" if names.get(t.name, t.name) != t.name else ""
        rows.append(f"  {t.name:<{width}}{t.memory:<10}{t.area or '':<9}{off:>9}{t.size:>10}  "
                    f"{live}{note}")
    for f in g.graph.fetches:
        rows.append(f"  fetch {f.tensor} from {f.source} into dynamic L2 at {f.offset} before "
                    f"layer {f.at}")
    return "\n".join(rows)


def layer_table(g, cycles: dict | None) -> str:
    """Per layer: what it computes, its tiles, L1 bytes, streamed operands, cycles and their
    time at the target's clock."""
    width = max(len(info.name) for info in g.layers) + 2
    ops = max([len(info.ops) for info in g.layers] + [len("computes")]) + 2
    mhz = g.target.clock_mhz
    rows = [f"Layers ({len(g.layers)}):",
            f"  {'layer':<{width}}{'computes':<{ops}}{'tiles':>12}{'L1 B':>8}{'cycles':>12}"
            f"{'us':>10}  details"]
    for info, layer in zip(g.layers, g.graph.layers):
        t = layer.tiling
        tiles = f"{t.n_tiles} x {t.tile}"
        c = None if cycles is None else cycles.get(info.name)
        cyc, us = ("", "") if c is None else (str(c), f"{c / mhz:.1f}")
        streamed = f"; streams {', '.join(sorted(layer.streamed))} from L3" if layer.streamed \
            else ""
        rows.append(f"  {info.name:<{width}}{info.ops:<{ops}}{tiles:>12}{t.l1_used:>8}"
                    f"{cyc:>12}{us:>10}  {info.detail}{streamed}")
    return "\n".join(rows)


def simulated_line(g, report) -> str:
    """The cycle model's totals: cycles and time at the target's clock, bytes moved."""
    mhz = g.target.clock_mhz
    return (f"  simulated: {report.cycles} cycles ({report.cycles / mhz:.1f} us at {mhz:g} MHz), "
            f"{report.construct_cycles} more in the constructor; moved "
            + ", ".join(f"{m} {b} B" for m, b in report.bytes_moved.items())
            + f"\n  ({g.target.costs.caveat()})")


def summary(g, report=None) -> str:
    """The memory plan and the layers with their tiles; with ``report`` (the cycle model's
    ``GraphReport``) each layer's cycles and microseconds and the totals."""
    cycles = None if report is None else dict(report.layers)
    text = plan_table(g) + "\n\n" + layer_table(g, cycles)
    return text if report is None else text + "\n" + simulated_line(g, report)


def refuse_budgets(targets, l1_values) -> None:
    """Refuse, before any model is read, a target the tiler cannot plan on and an ``--l1``
    above a target's L1 memory."""
    from ..tiler.model import tiler_target

    for name in targets:
        t = tiler_target(name)
        chip = t.memories["L1"].size
        for v in l1_values:
            if v is not None and v > chip:
                raise NpukitError(f"--l1 {v}: above the L1 memory of target {t.name!r} "
                                  f"({chip} B); give at most {chip}")


def refusals_exit_2(job):
    """``job(args)`` as a subcommand: a refusal (an ``NpukitError``) is its first line on
    stderr and exit status 2."""
    def run(args: argparse.Namespace) -> int:
        try:
            return job(args)
        except NpukitError as exc:
            print(f"npukit {args.command}: {str(exc).splitlines()[0]}", file=sys.stderr)
            return 2
    return run


def run(args: argparse.Namespace) -> int:
    """Carry out ``npukit run`` for parsed ``args``; returns the exit code."""
    return refusals_exit_2(_run)(args)


def _run(args: argparse.Namespace) -> int:
    from . import load

    refuse_plan_options(args)
    refuse_budgets([args.target], [args.l1])
    check_paths(args)
    _progress(f"importing {args.model}")
    g = load(args.model, target=args.target, l1_budget=args.l1, l2_budget=args.l2,
             l3_budget=args.l3, l3_flash_budget=args.flash, dtype=args.dtype)
    inputs = None if args.plan else _inputs(g, args.input)
    cycles = not args.no_cycles or bool(args.trace)
    if cycles:
        _progress("simulating the cycles of every layer")
    print(g.summary(cycles=cycles))
    if args.trace:
        from ..files import new_file
        with new_file(args.trace, "--trace") as tmp:
            g.report().save_trace(tmp)  # the report's trace: a span per layer on top
        print(f"  timeline written to {args.trace}")
    if args.plan:
        return 0
    return _host_run(args, g, inputs)


def model_inputs(args: argparse.Namespace) -> dict:
    """The files a command reads, {path: what it is}: the model (a regular file), the
    ``--input`` files, ``--inputs`` and ``--reference``."""
    from ..files import regular_file

    found = {}
    if os.path.lexists(args.model):  # a missing model: the import says so
        found[regular_file(args.model, "MODEL.onnx")] = "the model"
    for spec in getattr(args, "input", None) or []:
        found[spec.partition("=")[2]] = f"the --input file of {spec.partition('=')[0]!r}"
    if getattr(args, "inputs", None):
        found[args.inputs] = "the --inputs data set"
    if getattr(args, "reference", None):
        found[regular_file(args.reference, "--reference")] = "the --reference model"
    return found


def check_paths(args: argparse.Namespace) -> None:
    """Before any work: the input files are regular files, every output can be created
    (``npukit.files``): a bad path is found now, not after the run."""
    from ..files import check_folder, check_output

    inputs = model_inputs(args)
    emit = getattr(args, "emit", None)
    for option in ("trace", "json", "csv", "plot"):
        if getattr(args, option, None):
            path = getattr(args, option)
            if emit and os.path.abspath(emit) in map(str, Path(path).absolute().parents):
                raise NpukitError(f"--{option} {path!r}: inside --emit {emit!r}, which "
                                  f"must stay new or empty until the project is written: "
                                  f"give a path outside it")
            check_output(path, f"--{option}", inputs)
    if emit:
        for path, what in inputs.items():
            with contextlib.suppress(OSError):
                if os.path.samefile(path, args.emit):
                    raise NpukitError(f"--emit {args.emit!r}: is {what}")
        check_folder(args.emit, "--emit")


def refuse_plan_options(args: argparse.Namespace) -> None:
    """``--plan`` runs nothing: the options that need a run are refused beside it."""
    if args.plan:
        for option in ("input", "check", "emit"):
            if getattr(args, option):
                raise NpukitError(f"--plan compiles and runs nothing; --{option} needs a run: "
                                  f"drop --plan or --{option}")


def _host_run(args: argparse.Namespace, g, inputs: dict) -> int:
    """Compile the graph's C, run it, print the outputs; ``--check``, ``--emit``."""
    from .check import shown

    _progress("compiling the C and running it")
    t0 = time.perf_counter()
    res = g.run("c", **inputs)
    total = time.perf_counter() - t0
    print()
    print(f"Host run (C back end): {res.wall_time * 1e3:.2f} ms for the graph "
          f"({total:.2f} s with compiling or loading the C)")
    for name, a in res.outputs.items():
        flat = a.reshape(-1)
        first = np.array2string(flat[:4], precision=5, separator=", ")
        print(f"  {shown(name)}: {a.dtype} {list(a.shape)}, min {flat.min():.6g}, "
              f"max {flat.max():.6g}, first {first}")
    status = _check(args.model, g, inputs, res.outputs) if args.check else 0
    if args.emit and args.sdk == "gap":
        from .emit_gap import emit as emit_gap
        folder = emit_gap(g, args.emit, inputs)
        print(f"GAP SDK C written to {folder} (make -C {folder} emul check)")
    elif args.emit:
        from .emit import emit
        folder = emit(g, args.emit, inputs, res.outputs)
        print(f"C project written to {folder} (make -C {folder} check)")
    return status


def _check(model: str, g, inputs: dict, outputs: dict) -> int:
    """``--check``: every output against ONNX Runtime's; 1 past the tolerance."""
    from .check import RuntimeRefusal, ort_run

    _progress("running ONNX Runtime")
    try:
        ref, wall = ort_run(model, inputs, threads=1, repeat=3)
    except RuntimeRefusal as exc:  # nothing to compare with: the check fails
        print(f"npukit run: --check: {exc}", file=sys.stderr)
        return 1
    print(f"ONNX Runtime (1 thread): {wall * 1e3:.2f} ms")
    status = 0
    for name, a in outputs.items():
        c = g.compare(name, a, ref[name])
        print(f"  {c}")
        status |= 0 if c.within else 1
    return status
