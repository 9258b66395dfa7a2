"""Attention masks as PyTorch's exporters write them, against ONNX Runtime: bool and integer
``Expand``, ``Where``, ``Equal``, ``Not``, ``And``, ``Or``, ``Xor``, ``Cast`` chains of an int64
mask, causal masks from ``Trilu`` or comparisons of position ids, ``Range``/``Shape``-derived
positions, and large negative fills (``-inf``, ``finfo(float32).min``) before ``Softmax``,
fully masked rows included (NaN for ``-inf`` as ONNX Runtime gives, uniform for
``finfo.min``). Integer and bool outputs bit for bit, float ones within the float
tolerance."""

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto as TP  # noqa: E402
from onnx_helpers import against_ort, model, node  # noqa: E402

T = 6
FMIN = np.finfo(np.float32).min
MASK = np.array([[1, 1, 1, 0, 0, 1]], np.int64)


def _i(*v):
    return np.array(v if len(v) != 1 else v[0], np.int64)


def _scores(seed=0):
    return (np.random.default_rng(seed).normal(size=(1, 2, T, T)) * 3).astype(np.float32)


def _masked(fill: float, mask) -> tuple:
    """Where(mask == 0 as [1, 1, 1, T], fill, scores), then Softmax."""
    return ([node("Equal", ["m", "zero"], ["e"]), node("Reshape", ["e", "s4"], ["r"]),
             node("Expand", ["r", "full"], ["b"]), node("Where", ["b", "fill", "x"], ["w"]),
             node("Softmax", ["w"], ["y"], axis=-1)],
            {"m": mask, "x": _scores()},
            {"zero": _i(0), "s4": _i(1, 1, 1, T), "full": _i(1, 2, T, T),
             "fill": np.array(fill, np.float32)})


def _additive(factor: float, mask, twice: bool = False) -> tuple:
    """scores + (1 - float(mask[:, None, None, :])) * factor (twice: added again), then
    Softmax."""
    nodes = [node("Unsqueeze", ["m", "axes"], ["u"]), node("Cast", ["u"], ["f"], to=TP.FLOAT),
             node("Sub", ["one", "f"], ["i"]), node("Mul", ["i", "factor"], ["a"]),
             node("Add", ["x", "a"], ["w"])]
    if twice:
        nodes.append(node("Add", ["w", "a"], ["w2"]))
    nodes.append(node("Softmax", ["w2" if twice else "w"], ["y"], axis=-1))
    return (nodes, {"m": mask, "x": _scores(1)},
            {"axes": _i(1, 2), "one": np.array(1, np.float32),
             "factor": np.array(factor, np.float32)})


CASES = {
    "bool expand": ([node("Equal", ["m", "zero"], ["e"]), node("Reshape", ["e", "s4"], ["r"]),
                     node("Expand", ["r", "full"], ["y"])],
                    {"m": MASK}, {"zero": _i(0), "s4": _i(1, 1, 1, T), "full": _i(1, 2, T, T)}),
    "int64 and uint8 expand": ([node("Expand", ["m", "shape"], ["y"]),
                                node("Cast", ["m"], ["u"], to=TP.UINT8),
                                node("Expand", ["u", "col"], ["y2"])],
                               {"m": MASK}, {"shape": _i(2, 3, T), "col": _i(3, 1, T)}),
    "logic chain": ([node("Cast", ["m"], ["b"], to=TP.BOOL), node("Not", ["b"], ["nb"]),
                     node("And", ["b", "k"], ["a"]), node("Or", ["a", "nb"], ["o"]),
                     node("Xor", ["o", "k"], ["xo"]), node("Cast", ["xo"], ["y"], to=TP.FLOAT),
                     node("Cast", ["nb"], ["y2"], to=TP.INT64)],
                    {"m": MASK}, {"k": np.array([True, False, True, True, False, True])}),
    "int64 where": ([node("Cast", ["m"], ["b"], to=TP.BOOL),
                     node("Where", ["b", "m", "k"], ["y"])], {"m": MASK}, {"k": _i(-7)}),
    "causal by comparison": ([node("Unsqueeze", ["p", "a1"], ["pi"]),
                              node("Unsqueeze", ["p", "a0"], ["pj"]),
                              node("LessOrEqual", ["pj", "pi"], ["c"]),
                              node("Where", ["c", "x", "fill"], ["w"]),
                              node("Softmax", ["w"], ["y"], axis=-1)],
                             {"p": np.arange(T, dtype=np.int64), "x": _scores(2)},
                             {"a1": _i([1]), "a0": _i([0]), "fill": np.array(FMIN, np.float32)}),
    "causal by trilu of a bool": ([node("Cast", ["m"], ["b"], to=TP.BOOL),
                                   node("Expand", ["b", "square"], ["e"]),
                                   node("Trilu", ["e"], ["y"], upper=0)],
                                  {"m": MASK}, {"square": _i(T, T)}),
    "positions from shape and range": ([node("Shape", ["m"], ["s"]),
                                        node("Gather", ["s", "one"], ["t"], axis=0),
                                        node("Range", ["zero", "t", "one"], ["r"]),
                                        node("Mul", ["r", "m"], ["y"])],
                                       {"m": MASK}, {"zero": _i(0), "one": _i(1)}),
    "sdpa's inverted mask": ([node("Unsqueeze", ["m", "axes"], ["u"]),
                              node("Expand", ["u", "full"], ["e"]),
                              node("Cast", ["e"], ["f"], to=TP.FLOAT),
                              node("Sub", ["one", "f"], ["inv"]),
                              node("Cast", ["inv"], ["b"], to=TP.BOOL),
                              node("Where", ["b", "fill", "inv"], ["am"]),
                              node("Add", ["x", "am"], ["w"]),
                              node("Softmax", ["w"], ["y"], axis=-1)],
                             {"m": MASK, "x": _scores(3)},
                             {"axes": _i(1, 2), "full": _i(1, 1, T, T),
                              "one": np.array(1, np.float32), "fill": np.array(FMIN, np.float32)}),
    "-inf fill": _masked(-np.inf, MASK),
    "-inf fill, every row fully masked": _masked(-np.inf, np.zeros((1, T), np.int64)),
    "finfo.min fill, fully masked": _masked(FMIN, np.zeros((1, T), np.int64)),
    "finfo.min added": _additive(FMIN, MASK),
    "finfo.min added twice (-inf)": _additive(FMIN, MASK, twice=True),
    "finfo.min added, fully masked": _additive(FMIN, np.zeros((1, T), np.int64)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_mask_chain_matches_onnx_runtime(case):
    nodes, inputs, inits = CASES[case]
    outs = [o for o in ("y", "y2") if any(o in n.output for n in nodes)]
    m = model(nodes, inputs, outs, inits)
    _, stats, res = against_ort(m, inputs, ("sim",))
    for name, c in stats["sim"].items():
        assert c.within and (c.exact == 1.0 or c.max_rel <= 1e-6), str(c)
        if res["sim"][name].dtype.kind != "f":
            assert c.exact == 1.0, str(c)
    y = res["sim"]["y"]
    if case.endswith("every row fully masked"):
        assert np.isnan(y).all()  # as ONNX Runtime: exp(-inf - -inf)
    elif "fully masked" in case:
        np.testing.assert_allclose(y, 1 / T, rtol=1e-6)


@pytest.mark.slow
def test_bool_expand_on_the_c_equals_the_simulator():
    nodes, inputs, inits = _masked(FMIN, MASK)
    m = model(nodes, inputs, ["y", "b"], inits)
    _, stats, _ = against_ort(m, inputs, ("c", "sim"))
    assert stats["c"]["b"].exact == 1.0
