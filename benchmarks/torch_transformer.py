"""Transformers through npukit against ONNX Runtime: the BERT-, DistilBERT- and GPT-2-like
models the tests build with onnx.helper (npukit/transformer_models.py: 2 layers, hidden 128,
sequence 32, token ids and an attention mask), and, when torch and transformers are
installed, transformers' BertModel, DistilBertModel, GPT2Model (the same sizes, eager
attention) and a ViT-tiny exported with both of torch's ONNX exporters (the default,
dynamo, and the legacy TorchScript one), plus a 4-head encoder block written in torch.

Per model and source one row: the layers npukit made, the seconds ``npukit.onnx.load``
takes (import and planning; the median of ``--repeat`` interleaved loads), the largest
difference from ONNX Runtime relative to the largest output (float32, on the C back end),
whether the simulator equals the C bit for bit, and for the text models quantized by ONNX
Runtime's ``quantize_static`` (QDQ, per-channel int8 weights, uint8 activations) the
fraction of bit-exact int8 elements or the refusal. The goals: planned within 120 s, float32
within 1e-4 of the largest output, int8 bit-exact or refused by name; each printed met or
not.

Without torch and transformers (they are no test dependency) the exported models are
skipped, and the script says so. ``--vit`` adds the onnx.helper ViT-tiny.
Run: python benchmarks/torch_transformer.py [--repeat N] [--vit]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

VOCAB, T, E, HEADS, FF = 50, 8, 32, 4, 64  # the torch encoder block
PLAN_GOAL_S, FLOAT_GOAL = 120.0, 1e-4


def block(torch, nn):
    """A 4-head encoder block: an ``nn.Embedding`` of int64 token ids, ``nn.LayerNorm``,
    ``nn.MultiheadAttention``, GELU, residual adds."""

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, E)
            self.pos = nn.Parameter(torch.randn(T, E) * 0.1)
            self.ln1, self.ln2 = nn.LayerNorm(E), nn.LayerNorm(E)
            self.attn = nn.MultiheadAttention(E, HEADS, batch_first=True)
            self.ff = nn.Sequential(nn.Linear(E, FF), nn.GELU(), nn.Linear(FF, E))

        def forward(self, ids):
            x = self.emb(ids) + self.pos
            a = self.ln1(x)
            x = x + self.attn(a, a, a, need_weights=False)[0]
            return x + self.ff(self.ln2(x))

    return Encoder().eval()


def hf_models(torch):
    """transformers' models with random weights, each with its example inputs (names to
    tensors) and whether it is a text model (quantized too)."""
    import transformers as tf

    import npukit.transformer_models as tm

    ids = torch.randint(0, 1000, (1, tm.SEQ))
    mask = torch.ones(1, tm.SEQ, dtype=torch.int64)
    mask[:, -5:] = 0
    text = {"input_ids": ids, "attention_mask": mask}
    small = dict(attn_implementation="eager")
    return {
        "hf_bert": (tf.BertModel(tf.BertConfig(
            vocab_size=1000, hidden_size=tm.HIDDEN, num_hidden_layers=tm.LAYERS,
            num_attention_heads=tm.HEADS, intermediate_size=4 * tm.HIDDEN,
            max_position_embeddings=2 * tm.SEQ, **small)), text, True),
        "hf_distilbert": (tf.DistilBertModel(tf.DistilBertConfig(
            vocab_size=1000, dim=tm.HIDDEN, n_layers=tm.LAYERS, n_heads=tm.HEADS,
            hidden_dim=4 * tm.HIDDEN, max_position_embeddings=2 * tm.SEQ, **small)), text, True),
        "hf_gpt2": (tf.GPT2Model(tf.GPT2Config(
            vocab_size=1000, n_embd=tm.HIDDEN, n_layer=tm.LAYERS, n_head=tm.HEADS,
            n_positions=2 * tm.SEQ, **small)), text, True),
        "hf_vit_tiny": (tf.ViTModel(tf.ViTConfig(
            hidden_size=192, num_hidden_layers=12, num_attention_heads=3,
            intermediate_size=768, image_size=224, patch_size=16, **small),
            add_pooling_layer=False), {"pixel_values": torch.randn(1, 3, 224, 224)}, False),
    }


def export(torch, module, feed: dict, path: Path, dynamo: bool) -> None:
    module = module.eval()
    if hasattr(module, "config"):  # a transformers model: its last hidden state only
        module.config.return_dict = False
        module.config.use_cache = False
    with torch.no_grad():
        torch.onnx.export(module, tuple(feed.values()), str(path), dynamo=dynamo,
                          input_names=list(feed), opset_version=18)


def measure(m, feed: dict, repeat: int, quantize_folder: Path | None):
    """(layers, load seconds, relative float error, simulator == C, int8 text)."""
    from onnx_helpers import expose, quantize_qdq

    import npukit.onnx
    from npukit.onnx.check import compare, ort_run

    times, g = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        g = npukit.onnx.load(m)
        times.append(time.perf_counter() - start)
    ref, _ = ort_run(m, feed)
    out = m.graph.output[0].name
    c = g.run("c", **feed).outputs[out]
    sim = g.run("sim", **feed).outputs[out]
    err = float(np.abs(c - ref[out]).max()) / float(np.abs(ref[out]).max())
    q = "-"
    if quantize_folder is not None:
        qm = quantize_qdq(m, [feed], quantize_folder, "u8", per_channel=True)
        qs = [n.output[0] for n in qm.graph.node if n.op_type == "QuantizeLinear"]
        qm = expose(qm, qs)
        try:
            gq = npukit.onnx.load(qm)
        except npukit.NpukitError as exc:
            q = f"refused: {str(exc)[:70]}"
        else:
            qref, _ = ort_run(qm, feed)
            res = gq.run("c", **feed).outputs
            exact = [compare(k, res[k], qref[k]).exact for k in qs]
            q = f"{100 * min(exact):.2f}% exact (min of {len(qs)})"
    return len(g.layers), statistics.median(times), err, c.tobytes() == sim.tobytes(), q


def report(name: str, source: str, measured) -> bool:
    layers, secs, err, same, q = measured
    ok = secs <= PLAN_GOAL_S and err <= FLOAT_GOAL and same and (
        q == "-" or q.startswith("refused") or q.startswith("100.00%"))
    print(f"{name:15} {source:8} {layers:6} {secs:8.1f} {err:10.2e} {str(same):6} "
          f"{'met' if ok else 'NOT met':8} {q}")
    return ok


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3, help="loads per model (median)")
    p.add_argument("--vit", action="store_true",
                   help="also the onnx.helper ViT-tiny (353 layers: minutes on the simulator)")
    args = p.parse_args()
    import npukit.transformer_models as tm

    print(f"goals: planned within {PLAN_GOAL_S:g} s, float32 within {FLOAT_GOAL:g} of the "
          f"largest output, simulator == C, int8 bit-exact or refused by name")
    print(f"{'model':15} {'source':8} {'layers':>6} {'load s':>8} {'float err':>10} "
          f"{'sim==C':6} {'goal':8} int8 (uint8 activations)")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, build in tm.BUILDERS.items():
            for mask in tm.MASKS[:2]:
                rng = np.random.default_rng(0)
                m = build(rng, mask)
                feed = tm.inputs(rng)
                ok &= report(name, f"helper/{mask}", measure(m, feed, args.repeat, folder))
        if args.vit:
            rng = np.random.default_rng(0)
            pixels = {"pixel_values": rng.normal(size=(1, 3, 224, 224)).astype(np.float32)}
            ok &= report("vit_tiny", "helper", measure(tm.vit(rng), pixels, 1, None))
        try:
            import onnx
            import torch
            from torch import nn
        except ImportError:
            print("torch is not installed: the models exported from torch and transformers "
                  "are skipped")
            return 0 if ok else 1
        torch.manual_seed(0)
        models = {"encoder_block": (block(torch, nn),
                                    {"ids": torch.randint(0, VOCAB, (1, T))}, False)}
        try:
            models.update(hf_models(torch))
        except ImportError:
            print("transformers is not installed: only the torch encoder block is exported")
        for name, (module, feed, text) in models.items():
            for dynamo in (True, False):
                which = "dynamo" if dynamo else "legacy"
                path = folder / f"{name}_{which}.onnx"
                try:
                    export(torch, module, feed, path, dynamo)
                    m = onnx.load(str(path))
                    np_feed = {i.name: feed[i.name].numpy() for i in m.graph.input
                               if i.name in feed}
                    ok &= report(name, which, measure(m, np_feed, 1, folder if text else None))
                except Exception as exc:  # report every model, whichever fails
                    ok = False
                    print(f"{name:15} {which:8} FAILED: {type(exc).__name__}: "
                          f"{' '.join(str(exc).split())[:200]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
