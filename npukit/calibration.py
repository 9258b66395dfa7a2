"""Fitting a target's cost constants (``npukit.costs``) to measured cycles:
``npukit calibrate TARGET MEASURED.csv -o T.toml``.

A measurement is one layer, described in a line of ``key=value`` words (``layer_model``
builds it as a one-layer int8 ONNX model), run on a number of cores, and the cycles a board
or a simulator measured for it: the whole layer with its transfers (``scope=layer``, as the
GAP AutoTiler's ``AT_GRAPH_PERF`` counts), or its basic kernels' calls alone on data already
in L1 (``scope=kernel``, as a micro-benchmark counts).

The predicted cycles of a measurement are ``sum(constant * factor) + rest``: the factors
(``Report.cost_terms``) are what its calls do, the rest what the timeline adds to them (the
transfers a layer waits for; nothing at kernel scope). The fit minimises the squared log
ratios of predicted to measured cycles, with a weak prior pulling each constant towards its
value in the target file (``fit_log``), the rest held fixed; then runs the timeline again
with the new constants and fits again until the rest settles. Constants no measurement
exercises keep their values.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .costs import USER, CostModel
from .errors import CalibrationError
from .machine import Target, load_target

COLUMNS = ("name", "layer", "cores", "scope", "cycles", "source")
SCOPES = ("layer", "kernel")
# The weight of the prior (see ``fit_log``): a hundredth of a measurement's.
PRIOR = 0.01
OPS = ("conv", "dwconv", "linear", "maxpool", "avgpool", "softmax")


@dataclass(frozen=True)
class Measurement:
    """One row of a measurement table (see the module docstring). ``l1``/``l2``: the
    budgets the layer was tiled under (bytes; the target's memories when 0)."""

    name: str
    layer: str
    cores: int
    scope: str
    cycles: int
    source: str
    l1: int = 0
    l2: int = 0


@dataclass(frozen=True)
class Prediction:
    """The model's cycles of a measurement: ``cycles = sum(value * factor) + rest``."""

    cycles: int
    terms: dict
    rest: float


def read_measurements(path) -> list[Measurement]:
    """The rows of a CSV file with the columns ``COLUMNS`` (and optionally ``l1``, ``l2``);
    lines starting with ``#`` are comments. Errors name the file, row and column."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CalibrationError(f"{path}: cannot read the measurements: {exc}") from exc
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    reader = csv.DictReader(lines)
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise CalibrationError(f"{path}: missing columns {missing}; expected {list(COLUMNS)} "
                               f"(and optionally l1, l2)")
    rows = []
    for k, r in enumerate(reader, start=2):
        where = f"{path}: row {k}"
        scope = (r["scope"] or "").strip()
        if scope not in SCOPES:
            raise CalibrationError(f"{where}, column scope: expected one of {SCOPES}, got "
                                   f"{scope!r}")
        m = Measurement((r["name"] or "").strip(), (r["layer"] or "").strip(),
                        _count(r, "cores", 1, where), scope, _count(r, "cycles", 1, where),
                        (r["source"] or "").strip(), _count(r, "l1", 0, where, 0),
                        _count(r, "l2", 0, where, 0))
        layer_spec(m.layer, where)
        rows.append(m)
    if not rows:
        raise CalibrationError(f"{path}: no measurements")
    return rows


def _count(row: dict, col: str, low: int, where: str, default: int | None = None) -> int:
    """Column ``col`` of a CSV row as an integer >= ``low`` (``default`` when empty)."""
    v = (row.get(col) or "").strip()
    if not v and default is not None:
        return default
    try:
        n = int(v.replace("_", ""))
    except ValueError:
        n = low - 1
    if n < low:
        raise CalibrationError(f"{where}, column {col}: expected an integer >= {low}, got "
                               f"{v!r}")
    return n


def layer_spec(text: str, where: str = "layer") -> dict:
    """A layer description as a dict: ``op=`` one of ``OPS``, ``in=CxHxW`` (``N`` for
    ``linear`` and ``softmax``), ``out=`` output channels or size, ``k=KHxKW``,
    ``stride=``, ``pad=`` (``N`` each side, or ``top,left,bottom,right``), ``relu=1``.

    >>> layer_spec("op=conv in=1x100x100 out=1 k=5x5")["k"]
    (5, 5)
    """
    spec = {"stride": 1, "pad": (0, 0, 0, 0), "relu": 0}
    for word in text.split():
        key, eq, value = word.partition("=")
        if not eq or key not in ("op", "in", "out", "k", "stride", "pad", "relu"):
            raise CalibrationError(f"{where}: {word!r}: expected key=value with a key of op, "
                                   f"in, out, k, stride, pad, relu")
        if key == "op":
            spec[key] = value
        elif key in ("in", "k"):
            if not re.fullmatch(r"\d+(x\d+)*", value):
                raise CalibrationError(f"{where}: {key}={value!r}: expected sizes like 64x25x5")
            spec[key] = tuple(int(v) for v in value.split("x"))
        elif key == "pad":
            if not re.fullmatch(r"\d+(,\d+,\d+,\d+)?", value):
                raise CalibrationError(f"{where}: pad={value!r}: expected N (every side) or "
                                       f"top,left,bottom,right")
            pads = [int(v) for v in value.split(",")]
            spec[key] = tuple(pads * 4 if len(pads) == 1 else pads)
        else:
            if not value.isdigit():
                raise CalibrationError(f"{where}: {key}={value!r}: expected an integer")
            spec[key] = int(value)
    if spec.get("op") not in OPS:
        raise CalibrationError(f"{where}: op={spec.get('op')!r}: expected one of {OPS}")
    need = {"conv": ("in", "out", "k"), "dwconv": ("in", "k"), "linear": ("in", "out"),
            "maxpool": ("in", "k"), "avgpool": ("in", "k"), "softmax": ("in",)}[spec["op"]]
    absent = [k for k in need if k not in spec]
    if absent:
        raise CalibrationError(f"{where}: op={spec['op']} needs {', '.join(absent)}")
    return spec


def layer_model(text: str):
    """The layer of description ``text`` (``layer_spec``) as a one-layer int8 ONNX model in
    ONNX Runtime's QDQ form: input ``x`` and output ``y`` int8, per-tensor scales, random
    weights (cycles do not depend on values)."""
    from onnx import TensorProto
    from onnx import helper as h
    from onnx import numpy_helper as nh

    s = layer_spec(text)
    rng = np.random.default_rng(0)
    op, shape = s["op"], s["in"]
    flat = op in ("linear", "softmax")
    xshape = [1, shape[0]] if flat else [1, *shape]
    inits = {"xs": np.float32(0.05), "z": np.int8(0), "ys": np.float32(0.1)}
    nodes = [h.make_node("DequantizeLinear", ["x", "xs", "z"], ["xf"])]
    cur = "xf"
    if op in ("conv", "dwconv", "linear"):
        c = shape[0]
        o = c if op == "dwconv" else s["out"]
        kshape = () if op == "linear" else s["k"]
        wshape = (o, c, *kshape) if op != "dwconv" else (o, 1, *kshape)
        inits["w"] = rng.integers(-100, 100, wshape, dtype=np.int8)
        inits["ws"] = np.float32(0.01)
        inits["b"] = rng.integers(-500, 500, o, dtype=np.int32)
        inits["bs"] = np.float32(0.05 * 0.01)
        inits["bz"] = np.int32(0)
        nodes += [h.make_node("DequantizeLinear", ["w", "ws", "z"], ["wf"]),
                  h.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bf"])]
        if op == "linear":
            nodes.append(h.make_node("Gemm", [cur, "wf", "bf"], ["yf"], transB=1))
        else:
            p = s["pad"]
            nodes.append(h.make_node("Conv", [cur, "wf", "bf"], ["yf"], kernel_shape=list(kshape),
                                     strides=[s["stride"]] * 2, pads=list(p),
                                     group=c if op == "dwconv" else 1))
        cur = "yf"
        if s["relu"]:
            nodes.append(h.make_node("Relu", [cur], ["rf"]))
            cur = "rf"
    elif op in ("maxpool", "avgpool"):
        p = s["pad"]
        if op == "maxpool":  # the input's scale: a max needs no requantisation
            inits["ys"] = inits["xs"]
        nodes.append(h.make_node("MaxPool" if op == "maxpool" else "AveragePool", [cur], ["yf"],
                                 kernel_shape=list(s["k"]), strides=[s["stride"]] * 2,
                                 pads=list(p)))
        cur = "yf"
    else:
        nodes.append(h.make_node("Softmax", [cur], ["yf"], axis=1))
        cur = "yf"
    nodes.append(h.make_node("QuantizeLinear", [cur, "ys", "z"], ["y"]))
    g = h.make_graph(nodes, op, [h.make_tensor_value_info("x", TensorProto.INT8, xshape)],
                     [h.make_tensor_value_info("y", TensorProto.INT8, None)],
                     [nh.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def predict(target: Target, m: Measurement) -> Prediction:
    """The model's cycles of measurement ``m`` on ``target`` with ``m.cores`` cores."""
    from .onnx import load

    tgt = dataclasses.replace(target, cores=m.cores)
    g = load(layer_model(m.layer), target=tgt, l1_budget=m.l1 or None, l2_budget=m.l2 or None)
    report = g.report()
    terms = dict(report.timeline.cost_terms)
    if m.scope == "kernel":  # the calls alone
        terms.pop("layer", None)
    priced = sum(f * (1.0 if k == USER else target.costs.value(k)) for k, f in terms.items())
    cycles = priced if m.scope == "kernel" else report.cycles
    return Prediction(round(cycles), terms, cycles - priced)


@dataclass(frozen=True)
class Fit:
    """The result of ``calibrate``: the fitted target, the constants fitted, and each
    measurement's cycles before and after."""

    target: Target
    fitted: tuple[str, ...]
    rows: tuple[tuple[Measurement, int, int], ...]  # (measurement, before, after)

    def errors(self, after: bool = True) -> list[float]:
        """Each measurement's relative error ``predicted / measured - 1``."""
        return [(a if after else b) / m.cycles - 1 for m, b, a in self.rows]

    def table(self) -> str:
        """Per measurement: measured, predicted before and after, their ratios."""
        out = [f"{'measurement':<30}{'cores':>6}{'measured':>11}{'before':>11}{'ratio':>7}"
               f"{'after':>11}{'ratio':>7}"]
        for m, b, a in self.rows:
            out.append(f"{m.name[:29]:<30}{m.cores:>6}{m.cycles:>11,}{b:>11,}"
                       f"{b / m.cycles:>7.2f}{a:>11,}{a / m.cycles:>7.2f}")
        for label, after in (("before", False), ("after", True)):
            e = np.abs(self.errors(after))
            out.append(f"{label}: median error {100 * np.median(e):.1f}%, worst "
                       f"{100 * e.max():.1f}%, within 15%: {(e <= 0.15).sum()} of {len(e)}")
        return "\n".join(out)


def calibrate(target: Target, rows: list[Measurement], source: str = "measurements",
              prior: float = PRIOR, iterations: int = 6) -> Fit:
    """Fit ``target``'s cost constants to ``rows`` (see the module docstring); the fitted
    target's ``costs.calibration`` names ``source`` and the rows, ``costs.accuracy`` their
    median and worst error after the fit."""
    before = [predict(target, m) for m in rows]
    preds, costs = before, target.costs
    names = [k for k in costs.names() if any(p.terms.get(k) for p in preds)]
    start = np.array([max(costs.value(k), 1.0) for k in names])
    for _ in range(iterations):
        f = np.array([[p.terms.get(k, 0.0) for k in names] for p in preds])
        rest = np.array([p.rest for p in preds])
        x = fit_log(f, rest, np.array([m.cycles for m in rows], float), start, prior)
        costs = _with(costs, dict(zip(names, x)))
        new = [predict(dataclasses.replace(target, costs=costs), m) for m in rows]
        settled = all(abs(p.rest - q.rest) <= 0.5 for p, q in zip(preds, new))
        preds = new
        if settled:
            break
    errs = np.abs([p.cycles / m.cycles - 1 for m, p in zip(rows, preds)])
    costs = dataclasses.replace(
        costs, calibration=f"{target.name} constants fitted on {len(rows)} measurements "
                           f"({source})",
        accuracy=f"median error {100 * np.median(errs):.0f}%, worst {100 * errs.max():.0f}% "
                 f"on them")
    fitted = dataclasses.replace(target, costs=costs)
    return Fit(fitted, tuple(names), tuple((m, b.cycles, a.cycles)
                                           for m, b, a in zip(rows, before, preds)))


def fit_log(f: np.ndarray, rest: np.ndarray, measured: np.ndarray, start: np.ndarray,
            prior: float = PRIOR) -> np.ndarray:
    """The constants ``x > 0`` minimising ``sum(log((f @ x + rest) / measured) ** 2) + prior
    * sum(log(x / start) ** 2)`` (Levenberg-Marquardt on ``log x``). The prior keeps a
    constant the measurements cannot tell from another (two that always come together)
    near its starting value; the measurements decide the rest."""
    u0 = np.log(start)
    w = math.sqrt(prior)

    def residual(u):
        pred = np.maximum(f @ np.exp(u) + rest, 1e-9)
        return np.concatenate([np.log(pred / measured), w * (u - u0)]), pred

    u, mu = u0.copy(), 1e-3
    r, pred = residual(u)
    for _ in range(200):
        jac = np.vstack([f * np.exp(u)[None, :] / pred[:, None], w * np.eye(len(u))])
        g, h = jac.T @ r, jac.T @ jac
        step = np.linalg.solve(h + mu * np.diag(np.diag(h) + 1e-12), -g)
        r2, pred2 = residual(u + step)
        if r2 @ r2 < r @ r:
            u, r, pred, mu = u + step, r2, pred2, mu / 3
            if np.abs(step).max() < 1e-9:
                break
        else:
            mu *= 4
            if mu > 1e8:
                break
    return np.exp(u)


def _with(costs: CostModel, values: dict) -> CostModel:
    """``costs`` with the constants named in ``values`` (``CostModel.names``) replaced."""
    op = dict(costs.op)
    op.update({k[3:]: v for k, v in values.items() if k.startswith("op.")})
    plain = {k: v for k, v in values.items() if not k.startswith("op.")}
    return dataclasses.replace(costs, op=op, **plain)


def write_target(fit: Fit, path) -> Path:
    """The fitted target as a TOML file: the original file's text with its ``[costs]``
    tables replaced by the fitted ones, each constant marked with where it came from.
    Refuses to overwrite the target it was fitted from."""
    src, out = Path(fit.target.path), Path(path)
    if out.exists() and out.resolve() == src.resolve():
        raise CalibrationError(f"{out}: is the target file the constants were fitted from; "
                               f"write the calibrated target to another file")
    text = src.read_text()
    kept = re.split(r"(?m)^(?:# How basic kernel calls are priced|\[costs\])", text)[0].rstrip()
    out.write_text(kept + "\n\n" + costs_toml(fit) + "\n")
    load_target(out)  # the file reads back
    return out


def costs_toml(fit: Fit) -> str:
    """The ``[costs]`` table of a fitted target, each constant marked with where it came
    from: ``[fitted: ...]`` or ``[not measured: kept]`` (no measurement exercised it: the
    value of the file it was fitted from)."""
    c = fit.target.costs
    source = c.calibration.partition("(")[2].rstrip(")") or "measurements"

    def line(key: str, name: str) -> str:
        mark = f"[fitted: {source}]" if name in fit.fitted else "[not measured: kept]"
        return f"{key} = {_num(c.value(name))}  # {mark}"

    out = ["# How basic kernel calls are priced (npukit.costs, docs/targets.md): written by",
           "# npukit calibrate.",
           "[costs]", f"calibration = {_q(c.calibration)}", f"accuracy = {_q(c.accuracy)}",
           line("call", "call"), line("fork", "fork"), line("layer", "layer"), "",
           "[costs.op]"]
    out += [line(f, f"op.{f}") for f in c.op]
    return "\n".join(out)


def _num(v: float) -> str:
    return f"{v:.6g}" if math.isfinite(v) and v != int(v) else f"{v:.1f}"


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
