"""Small transformers built with onnx.helper the way PyTorch's exporters write them (no torch
needed): a BERT-like and a DistilBERT-like encoder and a GPT-2-like decoder, 2 layers,
hidden 128, sequence 32, int64 token ids and an int64 attention mask (1 = attend).

``mask`` picks how the attention mask reaches the scores:

- ``"arith"`` (the legacy TorchScript export of transformers' ``get_extended_attention_mask``):
  ``Unsqueeze``, ``Cast`` to float, ``(1 - m) * finfo(float32).min`` added to the scores;
- ``"where"`` (DistilBERT's ``masked_fill`` and the dynamo export): ``Equal(mask, 0)``
  reshaped, a bool ``Expand`` to the scores' shape and ``Where(masked, finfo.min, scores)``;
- ``"ninf"``: as ``"where"`` with ``-inf`` as the fill (a fully masked row is NaN in ONNX
  Runtime).

Position ids are ``Shape``/``Gather``/``Range`` of the token ids (GPT-2, DistilBERT) or a
slice of a constant buffer (BERT); GPT-2's causal mask is a slice of a constant lower
triangle (``"arith"``) or a ``Trilu`` of ones compared with zero (else). Every builder
returns an ``onnx.ModelProto`` whose one output is the last hidden state ``y`` [1, T, E].
``vit`` builds a ViT (ViT-tiny by default: 12 layers, hidden 192, 3 heads, 224 x 224 images
in 16 x 16 patches) on ``pixel_values``, without a mask.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

LAYERS, HIDDEN, HEADS, SEQ, VOCAB, FF = 2, 128, 4, 32, 100, 256
MASKS = ("arith", "where", "ninf")
FMIN = np.finfo(np.float32).min


class _Graph:
    """Nodes and initializers being written; ``op`` returns its output's name."""

    def __init__(self, rng, seq: int = SEQ, hidden: int = HIDDEN, heads: int = HEADS):
        self.rng, self.nodes, self.inits, self.count = rng, [], {}, 0
        self.seq, self.hidden, self.heads = seq, hidden, heads

    def const(self, value, name: str | None = None) -> str:
        name = name or f"c{len(self.inits)}"
        self.inits[name] = np.asarray(value)
        return name

    def weight(self, *shape, scale: float = 1.0) -> str:
        w = self.rng.normal(size=shape) * scale / np.sqrt(shape[0])
        return self.const(w.astype(np.float32))

    def op(self, op: str, *ins: str, **attrs) -> str:
        self.count += 1
        out = f"{op.lower()}{self.count}"
        self.nodes.append(h.make_node(op, list(ins), [out], name=f"{op}_{self.count}",
                                      **attrs))
        return out

    def model(self, y: str, name: str, inputs=None) -> object:
        """The model of output ``y`` [1, seq, hidden]; ``inputs`` (value infos): the token ids
        and the attention mask by default."""
        self.nodes.append(h.make_node("Identity", [y], ["y"], name="output"))
        inputs = inputs or [h.make_tensor_value_info(n, TensorProto.INT64, [1, self.seq])
                            for n in ("input_ids", "attention_mask")]
        g = h.make_graph(self.nodes, name, inputs,
                         [h.make_tensor_value_info("y", TensorProto.FLOAT,
                                                   [1, self.seq, self.hidden])],
                         [nh.from_array(v, k) for k, v in self.inits.items()])
        return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _f(x) -> np.ndarray:
    return np.asarray(x, np.float32)


def _i(x) -> np.ndarray:
    return np.asarray(x, np.int64)


def _linear(g: _Graph, x: str, n_in: int, n_out: int) -> str:
    return g.op("Add", g.op("MatMul", x, g.weight(n_in, n_out)),
                g.const(_f(g.rng.normal(size=n_out) * 0.1)))


def _layernorm(g: _Graph, x: str) -> str:
    gamma = g.const(_f(1 + 0.1 * g.rng.normal(size=g.hidden)))
    beta = g.const(_f(0.1 * g.rng.normal(size=g.hidden)))
    return g.op("LayerNormalization", x, gamma, beta, axis=-1, epsilon=1e-12)


def _gelu_erf(g: _Graph, x: str) -> str:
    """BERT's GELU as the exporters write it: x * 0.5 * (1 + erf(x / sqrt 2))."""
    e = g.op("Erf", g.op("Div", x, g.const(_f(1.4142135))))
    return g.op("Mul", g.op("Mul", x, g.op("Add", e, g.const(_f(1.0)))), g.const(_f(0.5)))


def _gelu_tanh(g: _Graph, x: str) -> str:
    """GPT-2's ``gelu_new``: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    cube = g.op("Mul", g.op("Pow", x, g.const(_f(3.0))), g.const(_f(0.044715)))
    inner = g.op("Mul", g.op("Add", x, cube), g.const(_f(np.sqrt(2 / np.pi))))
    t = g.op("Add", g.op("Tanh", inner), g.const(_f(1.0)))
    return g.op("Mul", g.op("Mul", g.const(_f(0.5)), x), t)


def _heads(g: _Graph, x: str, perm: list[int]) -> str:
    shaped = g.op("Reshape", x, g.const(_i([1, g.seq, g.heads, g.hidden // g.heads])))
    return g.op("Transpose", shaped, perm=perm)


def _additive_mask(g: _Graph) -> str:
    """(1 - mask[:, None, None, :]) * finfo.min, float32 [1, 1, 1, T]."""
    m = g.op("Unsqueeze", g.op("Unsqueeze", "attention_mask", g.const(_i([1]))),
             g.const(_i([2])))
    inv = g.op("Sub", g.const(_f(1.0)), g.op("Cast", m, to=TensorProto.FLOAT))
    return g.op("Mul", inv, g.const(_f(FMIN)))


def _masked_bool(g: _Graph, like: str) -> str:
    """mask == 0 as bool [1, 1, 1, T] expanded to the shape of ``like``."""
    eq = g.op("Equal", "attention_mask", g.const(_i(0)))
    shaped = g.op("Reshape", eq, g.const(_i([1, 1, 1, SEQ])))
    return g.op("Expand", shaped, g.op("Shape", like))


def _apply_mask(g: _Graph, scores: str, mask: str, additive: str | None) -> str:
    if mask == "none":
        return scores
    if mask == "arith":
        return g.op("Add", scores, additive)
    fill = g.const(_f(FMIN if mask == "where" else -np.inf))
    return g.op("Where", _masked_bool(g, scores), fill, scores)


def _attention(g: _Graph, x: str, mask: str, additive: str | None, causal: str | None = None,
               fused_qkv: bool = False, scale_q: bool = False) -> str:
    dh, e = g.hidden // g.heads, g.hidden
    if fused_qkv:  # GPT-2's c_attn: one [E, 3E] projection split in three
        qkv = _linear(g, x, e, 3 * e)
        outs = [f"split{g.count + 1}_{k}" for k in range(3)]
        g.count += 1
        g.nodes.append(h.make_node("Split", [qkv, g.const(_i([e] * 3))], outs,
                                   name=f"Split_{g.count}", axis=-1))
        q, k, v = outs
    else:
        q, k, v = (_linear(g, x, e, e) for _ in range(3))
    q, kt, v = _heads(g, q, [0, 2, 1, 3]), _heads(g, k, [0, 2, 3, 1]), _heads(g, v, [0, 2, 1, 3])
    root = g.const(_f(np.sqrt(dh)))
    if scale_q:  # DistilBERT divides the queries, not the scores
        q = g.op("Div", q, root)
        scores = g.op("MatMul", q, kt)
    else:
        scores = g.op("Div", g.op("MatMul", q, kt), root)
    if causal is not None:
        scores = g.op("Where", causal, scores, g.const(_f(FMIN)))
    p = g.op("Softmax", _apply_mask(g, scores, mask, additive), axis=-1)
    ctx = g.op("Transpose", g.op("MatMul", p, v), perm=[0, 2, 1, 3])
    return _linear(g, g.op("Reshape", ctx, g.const(_i([1, g.seq, e]))), e, e)


def _positions(g: _Graph) -> str:
    """arange(T) from the ids' shape, [1, T] (GPT-2's and DistilBERT's position ids)."""
    t = g.op("Gather", g.op("Shape", "input_ids"), g.const(_i(1)), axis=0)
    r = g.op("Range", g.const(_i(0)), t, g.const(_i(1)))
    return g.op("Unsqueeze", r, g.const(_i([0])))


def _table(g: _Graph, rows: int) -> str:
    return g.const(_f(g.rng.normal(size=(rows, g.hidden)) * 0.5))


def bert(rng, mask: str = "arith") -> object:
    """BERT (post-LN): word + position (a slice of a constant ``position_ids`` buffer) +
    token-type (a ``GatherElements`` of a zeros buffer at the positions) embeddings,
    LayerNorm, 2 layers of attention and a GELU (Erf) FFN."""
    g = _Graph(rng)
    buffer = g.const(_i(np.arange(2 * SEQ)[None]))
    pos = g.op("Slice", buffer, g.const(_i([0])), g.const(_i([SEQ])), g.const(_i([1])))
    # transformers' buffered token types: a zeros buffer expanded, then gathered at the
    # position ids (torch.gather: a GatherElements of constants the reader folds)
    zeros = g.op("Expand", g.const(np.zeros((1, 2 * SEQ), np.int64)), g.const(_i([1, 1])))
    types = g.op("GatherElements", zeros, pos, axis=1)
    x = g.op("Add", g.op("Add", g.op("Gather", _table(g, VOCAB), "input_ids", axis=0),
                         g.op("Gather", _table(g, 2), types, axis=0)),
             g.op("Gather", _table(g, 2 * SEQ), pos, axis=0))
    x = _layernorm(g, x)
    additive = _additive_mask(g) if mask == "arith" else None
    for _ in range(LAYERS):
        x = _layernorm(g, g.op("Add", x, _attention(g, x, mask, additive)))
        ff = _linear(g, _gelu_erf(g, _linear(g, x, HIDDEN, FF)), FF, HIDDEN)
        x = _layernorm(g, g.op("Add", x, ff))
    return g.model(x, "bert")


def distilbert(rng, mask: str = "where") -> object:
    """DistilBERT (post-LN, no token types): word + position (``Range``) embeddings, queries
    divided by sqrt(d) before Q K^T, the mask by ``masked_fill`` (``"where"``) or added."""
    g = _Graph(rng)
    x = g.op("Add", g.op("Gather", _table(g, VOCAB), "input_ids", axis=0),
             g.op("Gather", _table(g, SEQ), _positions(g), axis=0))
    x = _layernorm(g, x)
    additive = _additive_mask(g) if mask == "arith" else None
    for _ in range(LAYERS):
        x = _layernorm(g, g.op("Add", x, _attention(g, x, mask, additive, scale_q=True)))
        ff = _linear(g, _gelu_erf(g, _linear(g, x, HIDDEN, FF)), FF, HIDDEN)
        x = _layernorm(g, g.op("Add", x, ff))
    return g.model(x, "distilbert")


def _causal(g: _Graph, mask: str) -> str:
    """A bool [1, 1, T, T] lower triangle: a slice of a constant ``bias`` buffer (the legacy
    export), or ``Trilu`` of ones compared with zero."""
    if mask == "arith":
        bias = g.const(np.tril(np.ones((2 * SEQ, 2 * SEQ), bool))[None, None])
        starts, ends = g.const(_i([0, 0])), g.const(_i([SEQ, SEQ]))
        return g.op("Slice", bias, starts, ends, g.const(_i([2, 3])))
    ones = g.op("ConstantOfShape", g.const(_i([1, 1, SEQ, SEQ])),
                value=h.make_tensor("one", TensorProto.FLOAT, [1], [1.0]))
    return g.op("Greater", g.op("Trilu", ones, upper=0), g.const(_f(0.0)))


def gpt2(rng, mask: str = "arith") -> object:
    """GPT-2 (pre-LN): word + position (``Range``) embeddings, a fused QKV projection split in
    three, a causal mask and the attention mask, GELU (tanh), a final LayerNorm."""
    g = _Graph(rng)
    x = g.op("Add", g.op("Gather", _table(g, VOCAB), "input_ids", axis=0),
             g.op("Gather", _table(g, SEQ), _positions(g), axis=0))
    additive = _additive_mask(g) if mask == "arith" else None
    causal = _causal(g, mask)
    for _ in range(LAYERS):
        x = g.op("Add", x, _attention(g, _layernorm(g, x), mask, additive, causal=causal,
                                      fused_qkv=True))
        ff = _linear(g, _gelu_tanh(g, _linear(g, _layernorm(g, x), HIDDEN, FF)), FF, HIDDEN)
        x = g.op("Add", x, ff)
    return g.model(_layernorm(g, x), "gpt2")


def vit(rng, layers: int = 12, hidden: int = 192, heads: int = 3, image: int = 224,
        patch: int = 16) -> object:
    """ViT (pre-LN, transformers' ViTModel; ViT-tiny by default): a patch-embedding ``Conv``
    flattened and transposed to tokens, a class token concatenated, position embeddings,
    ``layers`` blocks of attention (no mask) and a GELU (Erf) FFN, a final LayerNorm. Input
    ``pixel_values`` [1, 3, image, image], output ``y`` [1, 1 + (image / patch)**2, hidden]."""
    tokens = (image // patch) ** 2
    g = _Graph(rng, 1 + tokens, hidden, heads)
    w = g.const(_f(rng.normal(size=(hidden, 3, patch, patch)) / np.sqrt(3 * patch * patch)))
    conv = g.op("Conv", "pixel_values", w, g.const(_f(0.1 * rng.normal(size=hidden))),
                kernel_shape=[patch, patch], strides=[patch, patch])
    flat = g.op("Reshape", conv, g.const(_i([1, hidden, tokens])))
    cls = g.const(_f(rng.normal(size=(1, 1, hidden)) * 0.5))
    x = g.op("Concat", cls, g.op("Transpose", flat, perm=[0, 2, 1]), axis=1)
    x = g.op("Add", x, g.const(_f(rng.normal(size=(1, 1 + tokens, hidden)) * 0.5)))
    for _ in range(layers):
        x = g.op("Add", x, _attention(g, _layernorm(g, x), "none", None))
        ff = _linear(g, _gelu_erf(g, _linear(g, _layernorm(g, x), hidden, 4 * hidden)),
                     4 * hidden, hidden)
        x = g.op("Add", x, ff)
    pixels = h.make_tensor_value_info("pixel_values", TensorProto.FLOAT, [1, 3, image, image])
    return g.model(_layernorm(g, x), "vit", [pixels])


BUILDERS = {"bert": bert, "distilbert": distilbert, "gpt2": gpt2}


def inputs(rng, padded: int = 5) -> dict[str, np.ndarray]:
    """Random token ids and an attention mask whose last ``padded`` positions are 0."""
    mask = np.ones((1, SEQ), np.int64)
    mask[:, SEQ - padded:] = 0
    return {"input_ids": rng.integers(0, VOCAB, (1, SEQ)).astype(np.int64),
            "attention_mask": mask}
