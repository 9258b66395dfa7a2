"""The cost model of basic kernel calls (``npukit.costs``), the targets' ``[costs]`` tables,
the cost factors the timeline sums, and their calibration on measured cycles
(``npukit.calibration``, ``npukit calibrate``)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npukit import CalibrationError, TargetError, load_target, target
from npukit.cli import main
from npukit.costs import FAMILIES, CostModel, Work, as_work

GAP8 = Path(target("gap8").path)
MEASURED = GAP8.parent / "gap8_cycles.csv"


def model(**kw) -> CostModel:
    base = dict(call=7.0, fork=120.0, layer=900.0, op={f: 1.5 for f in FAMILIES},
                calibration="test", accuracy="none")
    return CostModel(**{**base, **kw})


@given(ops=st.integers(0, 10**7), setup=st.integers(0, 10**5), chunks=st.integers(0, 300),
       cores=st.integers(1, 16), parallel=st.booleans(),
       price=st.floats(0.01, 50, allow_nan=False))
def test_a_call_costs_its_formula(ops, setup, chunks, cores, parallel, price):
    """cycles = ceil(call + fork (parallel on more than one core) + op * (ops + setup) *
    the busiest core's share: ceil(chunks / cores) / chunks, 1 / cores when any split)."""
    m = model(op={f: price for f in FAMILIES})
    n = cores if parallel else 1
    if n == 1:
        busiest = ops + setup
    elif chunks:
        busiest = (ops + setup) * math.ceil(chunks / n) / chunks
    else:
        busiest = (ops + setup) / n
    want = 7.0 + (120.0 if n > 1 else 0.0) + price * busiest
    got = m.cycles(Work("conv", ops, setup, chunks), cores, parallel)
    assert want - 1e-6 <= got <= want + 1 + 1e-6
    assert got == math.ceil(want - 1e-9)


def test_terms_are_linear_in_the_constants():
    w = Work("pool_max", 5000, 300, chunks=20)
    m = model()
    terms = m.terms(w, 8, True)
    assert set(terms) == {"call", "fork", "op.pool_max"}
    assert terms["op.pool_max"] == pytest.approx(5300 * 3 / 20)
    doubled = dataclasses.replace(m, op={**m.op, "pool_max": 3.0})
    assert doubled.cycles(w, 8, True) - m.cycles(w, 8, True) == pytest.approx(
        1.5 * terms["op.pool_max"], abs=1)


def test_a_plain_number_from_a_user_cost_is_cycles_of_one_core():
    m = model()
    assert m.cycles(as_work(1000), 4, True) == math.ceil(7 + 1000 / 4)
    assert m.cycles(as_work(1000), 4, False) == 1007


def test_unknown_family_is_named():
    with pytest.raises(KeyError, match="'tensor_core'"):
        model().terms(Work("tensor_core", 1), 8, True)


def write_target(tmp_path, costs: str) -> Path:
    text = GAP8.read_text().split("# How basic kernel calls are priced")[0]
    p = tmp_path / "t.toml"
    p.write_text(text + "\n" + costs)
    return p


def test_target_without_costs_gets_the_default_model(tmp_path):
    t = load_target(write_target(tmp_path, ""))
    assert t.costs.fork == 0 and t.costs.layer == 0
    assert all(v == 1.0 for v in t.costs.op.values())
    assert t.costs.call == t.units["core"].latency
    assert "assumed" in t.costs.caveat()


def test_costs_table_is_read_and_checked(tmp_path):
    good = ('[costs]\ncalibration = "c"\naccuracy = "a"\ncall = 3\nfork = 40.5\nlayer = 7\n'
            '[costs.op]\nconv = 2.5\n')
    t = load_target(write_target(tmp_path, good))
    assert (t.costs.call, t.costs.fork, t.costs.layer) == (3, 40.5, 7)
    assert t.costs.op["conv"] == 2.5 and t.costs.op["linear"] == 1.0
    with pytest.raises(TargetError, match="costs.op.tensor_core.*a family from"):
        load_target(write_target(tmp_path, good + "tensor_core = 1\n"))
    with pytest.raises(TargetError, match="costs.fork.*>= 0"):
        load_target(write_target(tmp_path, good.replace("fork = 40.5", "fork = -1")))
    with pytest.raises(TargetError, match="costs.speed"):
        load_target(write_target(tmp_path, good.replace("call = 3", "call = 3\nspeed = 1")))
    with pytest.raises(TargetError, match="costs.layer"):
        load_target(write_target(tmp_path, good.replace("layer = 7\n", "")))


def test_shipped_gap8_constants_say_where_they_come_from():
    t = target("gap8")
    assert "fitted on" in t.costs.calibration and "gap8_cycles.csv" in t.costs.calibration
    assert "median error" in t.costs.accuracy
    text = GAP8.read_text()
    for name in ("call", "fork", "layer"):
        assert f"{name} = " in text and "[fitted: gap8_cycles.csv]" in text


# -- the timeline's factors --------------------------------------------------------------------

def test_kernel_cycles_are_the_sum_of_priced_terms():
    """A layer's calls cost exactly what the constants times the summed factors say (each
    call rounded up: within one cycle a call)."""
    from npukit.calibration import Measurement, predict

    t = target("gap8")
    m = Measurement("c", "op=conv in=16x12x12 out=16 k=3x3 pad=1 relu=1", 8, "kernel", 1, "")
    p = predict(t, m)
    priced = sum(f * t.costs.value(k) for k, f in p.terms.items())
    assert p.terms["call"] >= 1
    assert priced <= p.cycles <= priced + p.terms["call"] + 1
    layer = predict(t, dataclasses.replace(m, scope="layer"))
    assert layer.cycles > p.cycles + t.costs.layer - 1  # the layer adds its set-up and waits


@pytest.mark.slow
def test_calibration_recovers_known_constants(tmp_path):
    """Measurements made by a known target (its constants changed by known factors) are fitted
    back to those constants from the shipped ones, within 2%."""
    from npukit.calibration import calibrate, predict, read_measurements

    base = target("gap8")
    rng = np.random.default_rng(3)
    truth = dataclasses.replace(base.costs, call=base.costs.call * 1.7,
                                fork=base.costs.fork * 0.6, layer=base.costs.layer * 1.3,
                                op={f: v * rng.uniform(0.5, 2.0) for f, v in base.costs.op.items()})
    known = dataclasses.replace(base, costs=truth)
    rows = [dataclasses.replace(m, cycles=predict(known, m).cycles)
            for m in read_measurements(MEASURED)]
    fit = calibrate(base, rows, "synthetic", prior=1e-8)
    # A call's tens of cycles beside a fork's hundreds are barely told apart by cycles
    # rounded per call: their sum is what the measurements fix.
    assert set(fit.fitted) >= {"call", "fork", "layer", "op.conv", "op.linear", "op.softmax"}
    for name in fit.fitted:
        want, got = truth.value(name), fit.target.costs.value(name)
        assert got == pytest.approx(want, rel=0.02 if name not in ("call", "fork") else 0.5)
    call_and_fork = fit.target.costs.call + fit.target.costs.fork
    assert call_and_fork == pytest.approx(truth.call + truth.fork, rel=0.05)
    assert max(abs(e) for e in fit.errors()) < 0.005
    assert "fitted on 16 measurements (synthetic)" in fit.target.costs.calibration


def test_measurement_table_errors_name_row_and_column(tmp_path):
    from npukit.calibration import read_measurements

    head = "name,layer,cores,scope,cycles,source\n"
    cases = {
        "x,op=conv in=1x8x8 out=1 k=3x3,8,board,100,s\n": "row 2, column scope",
        "x,op=conv in=1x8x8 out=1 k=3x3,8,layer,-5,s\n": "row 2, column cycles",
        "x,op=conv in=1x8x8 out=1 k=3x3,zero,layer,5,s\n": "row 2, column cores",
        "x,op=warp in=1x8x8,8,layer,5,s\n": "op='warp'",
        "x,op=conv in=1x8x8 k=3x3,8,layer,5,s\n": "needs out",
        "x,op=conv in=1x8x8 out=1 k=3x3 speed=2,8,layer,5,s\n": "'speed=2'",
    }
    for row, message in cases.items():
        p = tmp_path / "m.csv"
        p.write_text(head + row)
        with pytest.raises(CalibrationError, match=message):
            read_measurements(p)
    p.write_text("name,layer\n")
    with pytest.raises(CalibrationError, match="missing columns"):
        read_measurements(p)
    p.write_text(head)
    with pytest.raises(CalibrationError, match="no measurements"):
        read_measurements(p)


@pytest.mark.slow
@settings(deadline=None, max_examples=5)
@given(st.sampled_from(["op=conv in=8x10x10 out=8 k=3x3 pad=1",
                        "op=dwconv in=8x10x10 k=3x3 pad=1 relu=1",
                        "op=linear in=40 out=10", "op=maxpool in=4x10x10 k=2x2 stride=2",
                        "op=avgpool in=4x10x10 k=5x5", "op=softmax in=12"]))
def test_layer_models_compute_what_onnx_runtime_computes(spec):
    """The one-layer models a measurement describes are real int8 layers: npukit's simulator
    and C equal ONNX Runtime's integer results."""
    from onnx_helpers import against_ort

    from npukit.calibration import layer_model

    m = layer_model(spec)
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(0).integers(-100, 100, shape).astype(np.int8)
    against_ort(m, {"x": x}, backends=("sim", "c"), target="gap8", l1_budget=4000)


def test_calibrate_command_writes_a_target_that_reads_back(tmp_path, capsys):
    csv = tmp_path / "m.csv"
    lines = MEASURED.read_text().splitlines()
    csv.write_text("\n".join(lines[:11] + [ln for ln in lines[11:] if "KWS" in ln][:3]) + "\n")
    out = tmp_path / "mine.toml"
    assert main(["calibrate", "gap8", str(csv), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "before: median error" in printed and "after: median error" in printed
    t = load_target(out)
    assert "(m.csv)" in t.costs.calibration and "[fitted: m.csv]" in out.read_text()
    assert t.memories == target("gap8").memories  # everything else as in the target file
    assert main(["calibrate", str(out), str(csv), "-o", str(out)]) == 2
    assert "is the target file itself" in capsys.readouterr().err
    assert main(["calibrate", "gap8", str(tmp_path / "none.csv"), "-o", str(out)]) == 2
