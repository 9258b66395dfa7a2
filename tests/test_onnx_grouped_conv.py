"""Grouped convolutions (RegNet's, ResNeXt's: neither dense nor depthwise) lowered as one
grouped convolution layer, never a dense filter mostly zeros nor a layer per group: float32
within 1e-5 (relative to the largest output) of ONNX Runtime, int8 QDQ bit-exact, the
simulator's bytes the C's, and the MACs the convolution layers compute the model's real ones
(counted from the ONNX shapes, not by npukit)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx_helpers import against_ort, model, node, quantize_qdq

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import grouped_conv  # noqa: E402


def conv_macs(g) -> int:
    """The MACs npukit's convolution layers compute (what the tiler counts per layer)."""
    return sum(g.model._cnn_ops[info.name] for info in g.layers
               if info.ops.startswith(("Conv", "QLinearConv")))


@pytest.mark.parametrize("cin,width,stride,size,l1", [(32, 48, 2, 10, None),
                                                      (32, 32, 1, 7, None),
                                                      (16, 32, 1, 12, 4000)])
def test_float32_regnet_block_matches_onnx_runtime(cin, width, stride, size, l1):
    """(At a 4000-byte L1 the target's schedule convolves a group's features in tiles.)"""
    m = grouped_conv.regnet_block(cin, width, stride, size, seed=size)
    x = np.random.default_rng(size).uniform(-1, 1, (1, cin, size, size)).astype(np.float32)
    budget = {} if l1 is None else {"l1_budget": l1}
    g, stats, outs = against_ort(m, {"x": x}, backends=("sim", "c"), **budget)
    assert stats["c"]["y"].max_abs <= 1e-5 * np.abs(outs["c"]["y"]).max()
    assert np.count_nonzero(outs["c"]["y"]) > outs["c"]["y"].size // 4
    real, dense = grouped_conv.macs(m)
    assert conv_macs(g) == real < dense


@pytest.mark.parametrize("act", ["s8", "u8"])
def test_qdq_int8_regnet_block_is_bit_exact(act, tmp_path):
    cin, width, size = 32, 48, 9
    m = grouped_conv.regnet_block(cin, width, 2, size, seed=3)
    r = np.random.default_rng(4)
    calib = [{"x": r.uniform(-1, 1, (1, cin, size, size)).astype(np.float32)} for _ in range(4)]
    q = quantize_qdq(m, calib, tmp_path, act=act, per_channel=act == "s8")
    x = {"x": r.uniform(-1.1, 1.1, (1, cin, size, size)).astype(np.float32)}
    g, _, outs = against_ort(q, x, backends=("sim", "c"), exact=True)
    assert any(info.ops.startswith("QLinearConv") and "grouped(3)" in info.detail and
               "48->48" in info.detail for info in g.layers)
    assert not any(info.ops in ("Split", "Concat") for info in g.layers)
    assert np.unique(outs["c"]["y"]).size > 10
    assert conv_macs(g) == grouped_conv.macs(m)[0]


def test_groups_with_a_channel_multiplier_and_a_1d_input():
    """Two groups of 3 input channels, 4 outputs each (a 1-D convolution with a bias, dilated
    and strided), and a 2-D one whose groups take one input channel each, two outputs."""
    r = np.random.default_rng(7)
    x1 = r.normal(size=(1, 6, 17)).astype(np.float32)
    x2 = r.normal(size=(1, 3, 8, 8)).astype(np.float32)
    inits = {"w1": r.normal(size=(8, 3, 3)).astype(np.float32),
             "b1": r.normal(size=8).astype(np.float32),
             "w2": r.normal(size=(6, 1, 3, 3)).astype(np.float32)}
    m = model([node("Conv", ["x1", "w1", "b1"], ["y1"], group=2, dilations=[2], strides=[2],
                    pads=[1, 2]),
               node("Conv", ["x2", "w2"], ["y2"], group=3, pads=[1, 1, 1, 1])],
              {"x1": x1, "x2": x2}, ["y1", "y2"], inits, opset=13)
    g, stats, outs = against_ort(m, {"x1": x1, "x2": x2}, backends=("sim", "c"))
    for k in ("y1", "y2"):
        assert stats["c"][k].max_abs <= 1e-5 * np.abs(outs["c"][k]).max()
    assert [info.detail.split()[0] for info in g.layers] == ["grouped(2)", "grouped(3)"]
