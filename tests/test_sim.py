"""The simulator: poisoning, target arithmetic rules, and the cycle model's claims."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from kernel_helpers import rescale_ref

import npukit as nk
from npukit import kernels as K
from npukit.sim.timing import Report, timeline


def mul_prog(kern, shape, dtype="int8", target="torq", shift=6, **extra):
    out_shape = extra.pop("out_shape", shape)
    return nk.build(kern, target=target, input1=nk.spec(shape, dtype), input2=nk.spec(shape, dtype),
                    bias_scale=nk.spec((2,), "int32"), output=nk.spec(out_shape, dtype),
                    shift=shift, out_min=-128, out_max=127, **extra)


def cycles(prog, **arrays) -> int:
    return timeline(prog).cycles


def test_vectorized_beats_vanilla_by_8x():
    """Seed 000: the vectorized kernel is about 10x faster than vanilla."""
    van = timeline(mul_prog(K.mul_vanilla, (4096,))).cycles
    vec = timeline(mul_prog(K.mul_vectorized, (4096,))).cycles
    assert van >= 8 * vec


def test_fusing_small_dims_pays():
    fused = timeline(mul_prog(K.mul, (5, 3, 3, 2))).cycles
    unfused = timeline(mul_prog(K.mul, (5, 3, 3, 2), fuse=False)).cycles
    assert fused < unfused


def test_alu_width_accumulation_beats_act_width():
    def prog(vector):
        return nk.build(K.reduce_rows, input=nk.spec((32, 256), "int8"),
                        output=nk.spec((256,), "int8"), vector=vector)
    assert timeline(prog("alu")).cycles < timeline(prog("act")).cycles


@pytest.mark.parametrize("kern,shape", [(K.mul_vectorized, (1000,)), (K.mul_vectorized, (4096,)),
                                        (K.mul_vanilla, (300,)), (K.mul_ndim, (7, 3, 37)),
                                        (K.mul, (4, 3, 100))])
def test_fast_forward_is_exact(kern, shape):
    prog = mul_prog(kern, shape)
    fast, slow = timeline(prog), timeline(prog, fast_forward=False)
    assert fast.cycles == slow.cycles
    assert fast.busy == slow.busy and fast.bytes_moved == slow.bytes_moved


def test_reduce_fast_forward_is_exact():
    prog = nk.build(K.reduce_rows, input=nk.spec((50, 300), "int16"),
                    output=nk.spec((300,), "int16"))
    assert timeline(prog).cycles == timeline(prog, fast_forward=False).cycles


def test_report_counts_and_bound():
    n = 1000
    rep = timeline(mul_prog(K.mul_vectorized, (n,)))
    vectors = -(-n // 16)
    tq = nk.target("torq")
    # Engines count the bytes that carry data: junk lanes of the last vector are not data.
    assert rep.bytes_moved["IRAM"] == n and rep.bytes_moved["WRAM"] == n
    assert rep.bytes_moved["LRAM"] == 2 * n + 8 + n
    last = n - (vectors - 1) * 16
    assert rep.busy["ndl_i"] == (vectors - 1) * tq.engines["ndl_i"].cycles(16) + \
        tq.engines["ndl_i"].cycles(last)
    assert rep.busy["alu"] == vectors * (tq.units["alu"].latency + 1)
    assert rep.roofline <= rep.cycles <= rep.roofline + 50
    assert rep.peak["IRAM"] == 2 * 16  # double buffered
    assert all(rep.peak[m] <= rep.capacity[m] for m in rep.peak)


def test_trace_is_chrome_json(tmp_path: Path):
    prog = mul_prog(K.mul_vectorized, (100,))
    res = prog.run(input1=np.ones(100, np.int8), input2=np.ones(100, np.int8),
                   bias_scale=np.array([1, 1], np.int32), output=np.zeros(100, np.int8))
    path = tmp_path / "trace.json"
    res.report.save_trace(str(path))
    doc = json.loads(path.read_text())
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    threads = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M"}
    assert {"ndl_i", "ndl_w", "alu", "act", "ndl_q"} <= threads
    assert len([e for e in spans if e["args"]["statement"].startswith("pdata")]) == 7
    assert max(e["ts"] + e["dur"] for e in spans) == res.cycles


def test_timeline_png(tmp_path: Path):
    prog = mul_prog(K.mul_vectorized, (200,))
    rep = timeline(prog)
    path = tmp_path / "timeline.png"
    rep.save_png(str(path))
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000


def test_junk_lanes_come_from_poison():
    """The padded store writes results of junk lanes: they must come from poisoned IRAM and
    WRAM (0xA5 bytes = -91 as int8), not from zeros or leftovers."""
    prog = mul_prog(K.mul_vectorized_store, (1000,), out_shape=(1008,), shift=0)
    a = np.full(1000, 3, np.int8)
    out = np.zeros(1008, np.int8)
    prog.run(input1=a, input2=a, bias_scale=np.array([0, 1], np.int32), output=out)
    assert (out[:1000] == 9).all()
    assert (out[1000:] == min(127, (-91) * (-91))).all()


def test_unwritten_output_is_a_build_error():
    """An output the kernel does not fill would come back poisoned on the simulator and
    stale in C: the build refuses it, naming the first unwritten element."""
    with pytest.raises(nk.ShapeError, match=r"'output': the kernel writes 10 of its 20 "
                                            r"elements.*first unwritten is output\[10\]"):
        mul_prog(K.mul_vectorized, (10,), out_shape=(20,))


@pytest.mark.parametrize("backend", ["sim", "c"])
def test_partial_output_keeps_the_array_contents(backend):
    """``spec(..., partial=True)``: the elements the kernel leaves alone keep the array's
    contents on both back ends (the simulator must not write its poison back)."""
    prog = nk.build(K.mul_vectorized, input1=nk.spec(10, "int8"), input2=nk.spec(10, "int8"),
                    bias_scale=nk.spec(2, "int32"), output=nk.spec(20, "int8", partial=True),
                    shift=6, out_min=-128, out_max=127)
    assert prog.param("output")[0].role == "inout"
    out = np.arange(20, dtype=np.int8) + 50
    a = np.full(10, 2, np.int8)
    prog.run(backend, input1=a, input2=a, bias_scale=np.array([0, 64], np.int32), output=out)
    assert (out[:10] == 4).all() and (out[10:] == np.arange(10, 20) + 50).all()


@pytest.mark.parametrize("mode", ["half_up", "half_even", "floor"])
def test_rounding_mode_comes_from_the_target(tmp_path: Path, mode):
    text = Path(nk.target("torq").path).read_text().replace('rounding = "half_up"',
                                                              f'rounding = "{mode}"')
    path = tmp_path / "torq_variant.toml"
    path.write_text(text)
    tgt = nk.load_target(path)
    assert tgt.arith.rounding == mode
    x = np.arange(-64, 64, dtype=np.int8)  # every residue mod 8, ties included
    one = np.ones(128, np.int8)
    prog = mul_prog(K.mul_vectorized, (128,), target=tgt, shift=3)
    out = np.zeros(128, np.int8)
    prog.run(input1=x, input2=one, bias_scale=np.array([0, 1], np.int32), output=out)
    exact = x.astype(float) / 8
    want = {"half_up": np.floor(exact + 0.5), "floor": np.floor(exact),
            "half_even": np.round(exact)}[mode]
    assert (out == want).all()
    if mode == "half_up":
        assert (out == rescale_ref(x, one, 0, 1, 3, -128, 127)).all()


def test_sixteen_bit_products_and_wide_partials():
    """int16 x int16 products exceed int16; partials are int32, rescale in 64-bit."""
    x = np.array([32767, -32768, 30000, -12345] * 8, np.int16)
    prog = mul_prog(K.mul_vectorized, (32,), dtype="int16", shift=15)
    out = np.zeros(32, np.int16)
    prog.run(input1=x, input2=x, bias_scale=np.array([7, 3], np.int32), output=out)
    assert (out == rescale_ref(x, x, 7, 3, 15, -128, 127)).all()


def test_report_says_its_units():
    rep = timeline(mul_prog(K.mul_vectorized, (1000,)))
    assert rep.roofline_cycles == rep.roofline == max(rep.compute_bound, rep.transfer_bound)
    lines = str(rep).splitlines()
    bound = rep.roofline_cycles
    assert lines[0] == (
        f"{rep.cycles} cycles ({rep.cycles / 800:.4g} us at 800 MHz); roofline {bound} cycles "
        f"(compute {rep.compute_bound} cycles, transfers {rep.transfer_bound} cycles): "
        f"{rep.cycles / bound:.2f}x the bound")
    # Every other line: a unit or memory, a quantity, its number and its unit; the last
    # where the cycles' constants come from (the torq file has no [costs] table).
    for line in lines[1:-1]:
        assert re.fullmatch(r"  \S+ +(busy +\d+ cycles \( *[\d.]+%\)|moved +\d+ B|"
                            r"peak +\d+ B of \d+ B)", line), line
    assert lines[-1] == "  (cycles from assumed constants (one cycle per operation: no [costs] " \
                        "table); not measured)"
    assert len(lines) == 2 + len(rep.busy) + len(rep.bytes_moved) + len(rep.peak)
    assert "roofline" in Report.roofline_cycles.__doc__ and "cycles" in \
        Report.roofline.__doc__
