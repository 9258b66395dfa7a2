"""Targets are data: the built-in TOML files carry the numbers of the issue, and a malformed
file fails with a TargetError naming the file, the key and what was expected."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

import npukit as nk
from npukit import DTypeError, NpukitError, TargetError
from npukit.machine import Engine, Memory, Target, Unit, load_target, target, targets

# -- the built-in targets --------------------------------------------------------------------


def test_builtin_target_names():
    names = targets()
    assert {"gap8", "torq"} <= set(names)
    assert names == sorted(names)
    assert nk.targets() == names
    for name in names:
        t = target(name)
        assert isinstance(t, Target) and t.name == name
        assert Path(t.path).name == f"{name}.toml"
        assert target(t) is t  # a Target passes through


def test_torq_numbers():
    t = nk.target("torq")
    assert t.cores == 2 and t.home == "LRAM"
    sizes = {name: m.size for name, m in t.memories.items()}
    want = {"IRAM": 288, "WRAM": 36, "BRAM": 32, "PRAM": 1024, "LRAM": 524288}
    assert {k: sizes[k] for k in want} == want
    assert all(isinstance(m, Memory) and m.name == k for k, m in t.memories.items())
    alu, act = t.units["alu"], t.units["act"]
    assert alu.width("int8", "int8") == 64 and alu.width("int16", "int16") == 16
    assert act.width("int8", "int8") == 16 and act.width("int16", "int16") == 4
    for f in ("float16", "bfloat16", "float32"):
        assert act.width(f, f) == 8
    assert act.width("int8") == act.width("int8", None) == 16  # no weight operand
    assert alu.width(nk.dtype("int8"), "int8") == 64  # dtype objects work too
    assert act.width("int8", "int8") < alu.width("int8", "int8")  # the seed: Act is narrower
    assert t.arith.rounding == "half_up" and t.arith.saturate is True
    assert t.lut.banks >= 1


def test_gap8_numbers():
    t = nk.target("gap8")
    assert t.cores == 8 and t.home == "L2"
    sizes = {name: m.size for name, m in t.memories.items()}
    assert sizes["L1"] == 65536 and sizes["L2"] == 524288
    assert sizes["L3_RAM"] == 8 * 2**20 and sizes["L3_FLASH"] == 64 * 2**20
    assert t.engine("L2", "L1").name == "cluster_dma"
    assert t.engine("L1", "L2").name == "cluster_dma"
    assert t.engine("L3_FLASH", "L2").name == "micro_dma"
    assert t.engine("L3_RAM", "L2").name == "micro_dma"


def test_engine_lookup_and_cycles():
    t = nk.target("torq")
    e = t.engine("LRAM", "IRAM")
    assert isinstance(e, Engine) and e.name == "ndl_i"
    assert "LRAM" in e.src and "IRAM" in e.dst
    assert e.cycles(0) == e.latency
    assert e.cycles(1) == e.latency + 1
    for nbytes in (1, 63, 64, 65, 288, 1000):
        assert e.cycles(nbytes) == e.latency + math.ceil(nbytes / e.bandwidth)
    assert e.cycles(100) == 3 + 2  # the file: 64 B/cycle, 3 cycles to start
    slow = Engine("x", ("A",), ("B",), bandwidth=2.5, latency=7)
    assert slow.cycles(10) == 11 and slow.cycles(11) == 12
    with pytest.raises(TargetError) as err:
        t.engine("IRAM", "WRAM")
    assert "'torq'" in str(err.value) and "from IRAM to WRAM" in str(err.value)
    assert "ndl_i" in str(err.value)


def test_unit_width_of_an_unknown_pair():
    alu = nk.target("torq").units["alu"]
    with pytest.raises(DTypeError) as err:
        alu.width("int8", "float32")
    msg = str(err.value)
    assert "'alu'" in msg and "int8 x float32" in msg
    assert "int8xint8" in msg  # and what it does support
    assert isinstance(err.value, TypeError)
    with pytest.raises(DTypeError, match="float64 x none"):
        alu.width("float64")
    with pytest.raises(DTypeError, match="unknown dtype 'int7'"):
        alu.width("int7", "int8")
    unit = Unit("u", {("int8", "int8"): 4}, latency=1)
    assert unit.width("int8", "int8") == 4
    with pytest.raises(DTypeError, match="unit 'u' has no width for int16 x int8"):
        unit.width("int16", "int8")


def test_unknown_target():
    with pytest.raises(TargetError) as err:
        target("nope")
    msg = str(err.value)
    assert "'nope'" in msg
    for name in targets():
        assert name in msg
    assert "ending in .toml" in msg  # says a file of one's own is accepted too
    assert isinstance(err.value, NpukitError)
    for bad in (None, 3, "../targets/torq"):
        with pytest.raises(TargetError, match="built-in targets: "):
            target(bad)


def test_a_target_file_of_ones_own_by_path(tmp_path, monkeypatch):
    path = write(tmp_path, MINI.replace('"int8,int8" = 8', '"int8,int8" = 8\n"int8,none" = 8'))
    by_path, by_str = target(path), target(str(path))
    assert by_path == by_str == load_target(path) and by_path.name == "mini"
    monkeypatch.chdir(tmp_path)
    assert target("mini.toml") == by_path  # relative to the working directory
    with pytest.raises(TargetError, match=r"missing\.toml: cannot read target"):
        target("missing.toml")
    with pytest.raises(TargetError, match="cannot read target"):
        target(tmp_path / "missing")
    # Everywhere a target name is taken, a path is too: an EasyKernel build ...
    from npukit import kernels as K

    torq = Path(nk.target("torq").path).read_text()
    mine = torq.replace('name = "torq"', 'name = "my_npu"')
    (tmp_path / "my_npu.toml").write_text(mine.replace('"int8,none" = 64', '"int8,none" = 8'))
    prog = nk.build(K.reduce_rows, target="my_npu.toml", input=nk.spec((3, 10), "int8"),
                    output=nk.spec((10,), "int8"), vector="alu")
    assert prog.target.name == "my_npu" and prog.target.units["alu"].width("int8") == 8
    assert prog.buffers[0].size == 8  # vectors of the file's ALU width
    x = np.arange(-15, 15, dtype=np.int8).reshape(3, 10) * 5
    out = np.zeros(10, np.int8)
    prog.run(input=x, output=out)
    assert out.tolist() == np.clip(x.astype(int).sum(0), -128, 127).tolist()
    # ... and an AutoTiler model.
    from npukit.tiler import Model

    assert Model(target=Path(nk.target("gap8").path)).target == nk.target("gap8")


def test_targets_are_immutable():
    t = nk.target("torq")
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.cores = 4
    with pytest.raises(TypeError):
        t.memories["IRAM"] = Memory("IRAM", 1)
    with pytest.raises(TypeError):
        t.units["alu"].widths[("int8", "int8")] = 1
    assert nk.target("torq").memories["IRAM"].size == 288


def test_load_target_of_a_builtin_file():
    t = nk.target("torq")
    assert load_target(t.path) == t
    assert load_target(Path(t.path)).memories == t.memories


# -- malformed target files ------------------------------------------------------------------

MINI = """\
name = "mini"
description = "a minimal target"
clock_mhz = 100
cores = 2
home = "L2"

[memories.L2]
size = 4096
[memories.L1]
size = 256

[engines.dma]
src = ["L2"]
dst = ["L1"]
bandwidth = 4
latency = 10

[units.alu]
latency = 1
[units.alu.width]
"int8,int8" = 8
"int16,none" = 4

[arith]
rounding = "half_even"
saturate = false

[lut]
banks = 2
bank_bits = 64
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mini.toml"
    path.write_text(text)
    return path


def test_a_minimal_valid_file(tmp_path):
    path = write(tmp_path, MINI)
    t = load_target(path)
    assert (t.name, t.description, t.clock_mhz, t.cores, t.home) == (
        "mini", "a minimal target", 100.0, 2, "L2")
    assert isinstance(t.clock_mhz, float)
    assert {k: m.size for k, m in t.memories.items()} == {"L2": 4096, "L1": 256}
    e = t.engine("L2", "L1")
    assert (e.name, e.src, e.dst, e.bandwidth, e.latency) == ("dma", ("L2",), ("L1",), 4.0, 10)
    assert e.cycles(9) == 13
    alu = t.units["alu"]
    assert alu.latency == 1
    assert dict(alu.widths) == {("int8", "int8"): 8, ("int16", "none"): 4}
    assert alu.width("int16") == 4
    assert (t.arith.rounding, t.arith.saturate) == ("half_even", False)
    assert (t.lut.banks, t.lut.bank_bits) == (2, 64)
    assert t.path == str(path)


# (id, text replaced, replacement, fragments the message must hold)
MALFORMED = [
    ("missing key", "cores = 2\n", "", ["key cores", "expected int", "missing"]),
    ("missing table", '[lut]\nbanks = 2\nbank_bits = 64\n', "",
     ["key lut.banks", "expected int", "missing"]),
    ("missing memory size", "[memories.L1]\nsize = 256", "[memories.L1]\nbytes = 256",
     ["key memories.L1.size", "expected int", "missing"]),
    ("wrong type", "cores = 2", 'cores = "two"', ["key cores", "expected int", "'two'"]),
    ("bool for int", "cores = 2", "cores = true", ["key cores", "expected int", "True"]),
    ("float for int", "cores = 2", "cores = 2.5", ["key cores", "expected int", "2.5"]),
    ("too few cores", "cores = 2", "cores = 0", ["key cores", "an integer >= 1", "got 0"]),
    ("zero memory", "size = 256", "size = 0",
     ["key memories.L1.size", "an integer >= 1", "got 0"]),
    ("string for number", "clock_mhz = 100", 'clock_mhz = "fast"',
     ["key clock_mhz", "expected float", "'fast'"]),
    ("negative bandwidth", "bandwidth = 4", "bandwidth = -4",
     ["key engines.dma.bandwidth", "a positive number", "-4.0"]),
    ("wrong type for bool", "saturate = false", 'saturate = "no"',
     ["key arith.saturate", "expected bool", "'no'"]),
    ("table expected", "[memories.L2]\nsize = 4096\n[memories.L1]\nsize = 256\n",
     "memories = 5\n", ["key memories", "expected dict", "got 5"]),
    ("bad rounding", 'rounding = "half_even"', 'rounding = "half_down"',
     ["key arith.rounding", "half_up", "half_even", "floor", "'half_down'"]),
    ("engine names an unknown memory", 'src = ["L2"]', 'src = ["L2", "DRAM"]',
     ["key engines.dma.src", "memory names", "'L1'", "'DRAM'"]),
    ("engine with no memory", 'dst = ["L1"]', "dst = []",
     ["key engines.dma.dst", "memory names", "got []"]),
    ("engine memory not a name", 'dst = ["L1"]', 'dst = [["L1"]]',
     ["key engines.dma.dst", "memory names", "[['L1']]"]),
    ("engine memory not a list", 'dst = ["L1"]', 'dst = "L1"',
     ["key engines.dma.dst", "expected list", "'L1'"]),
    ("home not a memory", 'home = "L2"', 'home = "L3"',
     ["key home", "a memory name", "L2, L1", "'L3'"]),
    ("width key without a comma", '"int8,int8" = 8', '"int8" = 8',
     ["units.alu.width", "'int8'", "'<dtype>,<dtype or none>'"]),
    ("width key with an unknown dtype", '"int8,int8" = 8', '"int8,int9" = 8',
     ["units.alu.width", "'int8,int9'", "'<dtype>,<dtype or none>'", "int9"]),
    ("width value", '"int8,int8" = 8', '"int8,int8" = 0',
     ["key units.alu.width.int8,int8", "an integer >= 1", "got 0"]),
    ("width value type", '"int8,int8" = 8', '"int8,int8" = "wide"',
     ["key units.alu.width.int8,int8", "expected int", "'wide'"]),
    ("small lut banks", "bank_bits = 64", "bank_bits = 4",
     ["key lut.bank_bits", "an integer >= 8", "got 4"]),
    ("invalid TOML", "cores = 2", "cores = ", ["cannot read target", "line 4"]),
    ("duplicate key", "cores = 2", "cores = 2\ncores = 3", ["cannot read target"]),
]


@pytest.mark.parametrize("old, new, fragments", [m[1:] for m in MALFORMED],
                         ids=[m[0] for m in MALFORMED])
def test_malformed_target_files(tmp_path, old, new, fragments):
    assert MINI.count(old) == 1
    path = write(tmp_path, MINI.replace(old, new))
    with pytest.raises(TargetError) as err:
        load_target(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: "), msg
    for fragment in fragments:
        assert fragment in msg, (fragment, msg)


def test_missing_and_unreadable_files(tmp_path):
    missing = tmp_path / "absent.toml"
    with pytest.raises(TargetError, match="cannot read target") as err:
        load_target(missing)
    assert str(missing) in str(err.value)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"name = \"\xff\xfe\"\n")
    with pytest.raises(TargetError, match="cannot read target") as err:
        load_target(binary)
    assert str(binary) in str(err.value)
