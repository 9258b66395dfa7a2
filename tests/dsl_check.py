"""Shared by the tests of the Compass DSL's builtins: run one program on both back ends with
canary-filled outputs and compare with an independent expectation, lane by lane."""

import numpy as np

import npukit.dsl as S
from npukit.poison import poison

CANARY = {1: 0x5A, 2: 0x5A5A, 4: 0x5A5A5A5A}  # a bit pattern no result here is made of


def canary(n: int, dtype) -> np.ndarray:
    dt = np.dtype(dtype) if not isinstance(dtype, str) else S.DType(dtype).elem
    bits = np.full(n, CANARY[dt.itemsize], f"uint{8 * dt.itemsize}")
    return bits.view(dt)


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(f"uint{8 * a.dtype.itemsize}")


def run_both(prog, inputs: dict, outputs: dict) -> dict:
    """``{backend: {name: array}}``: every output starts as canary, both back ends run, and
    their results must agree bit for bit."""
    got = {}
    for backend in ("sim", "c"):
        outs = {k: canary(n, dt) for k, (n, dt) in outputs.items()}
        prog.run(backend, **inputs, **outs)
        got[backend] = outs
    for k in outputs:
        assert np.array_equal(bits(got["sim"][k]), bits(got["c"][k])), \
            (k, got["sim"][k], got["c"][k])
    return got["sim"]


def host_and_c(func, *arrays) -> list[list[np.ndarray]]:
    """A ``@S.prim_func`` run as the public DSL's users run it, on fresh copies of
    ``arrays`` each: called (the simulator), then through ``BuildManager`` (the C); the
    copies after each run."""
    runs = []
    for run in (func, S.BuildManager().build(func)):
        copies = [a.copy() for a in arrays]
        run(*copies)
        runs.append(copies)
    return runs


def assert_lanes(got: np.ndarray, want: np.ndarray, defined=None) -> None:
    """``got`` equals ``want`` bit for bit where ``defined`` (a bool array; all lanes when
    None); a NaN lane only needs to be NaN. Undefined lanes must hold npukit's poison."""
    want = np.asarray(want).astype(got.dtype)
    defined = np.ones(got.shape, bool) if defined is None else np.asarray(defined, bool)
    g, w = got[defined], want[defined]
    if g.dtype.kind == "f" or g.dtype.name == "bfloat16":
        nan = np.isnan(w.astype(np.float64))
        assert (np.isnan(g[nan].astype(np.float64))).all(), (g, w)
        g, w = g[~nan], w[~nan]
    assert np.array_equal(bits(g), bits(w)), (g, w)
    junk = got[~defined]
    assert np.array_equal(bits(junk), bits(np.full(junk.shape, poison(got.dtype, ())))), junk
