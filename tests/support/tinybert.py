"""Tiny random-weight BERT models written by the tests, and a numpy forward pass as the oracle.

The folders look like what sentence-transformers / transformers save (config.json,
vocab.txt, model.safetensors, 1_Pooling/config.json), so they go through the same
importer as real models.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

WORDS = (
    "the a to of and in is it for on with as at by from be this that was are or an not but "
    "deploy release rollback blue green load balancer traffic flip switch undo revert version "
    "database backup restore postgres dump cache redis key evict memory kafka lag consumer "
    "offset topic cert tls rotate expire dns zone record page oncall alert incident bread "
    "flour recipe oven cat sleep sun travel tokyo train how do we bad what when why who"
).split()
PIECES = ["##s", "##ed", "##ing", "##er", "##ly", "##a", "##e", "##i", "##o", "##n", "##t", "##r"]
LETTERS = list("abcdefghijklmnopqrstuvwxyz0123456789")
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def vocab() -> list[str]:
    punct = list(".,:;!?'\"()-/")
    return list(dict.fromkeys(SPECIAL + LETTERS + ["##" + c for c in LETTERS] + punct + WORDS + PIECES))


def write_tiny_bert(folder: Path, *, cross_encoder: bool = False, seed: int = 7, hidden: int = 32, layers: int = 2, heads: int = 4) -> Path:
    """Write a random BERT model folder (embedder, or cross-encoder with pooler + classifier)."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    words = vocab()
    inter, positions = hidden * 2, 128
    prefix = "bert." if cross_encoder else ""

    def w(*shape: int, scale: float = 0.2) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    t: dict[str, np.ndarray] = {
        f"{prefix}embeddings.word_embeddings.weight": w(len(words), hidden, scale=0.5),
        f"{prefix}embeddings.position_embeddings.weight": w(positions, hidden, scale=0.1),
        f"{prefix}embeddings.token_type_embeddings.weight": w(2, hidden, scale=0.1),
        f"{prefix}embeddings.LayerNorm.weight": (1 + w(hidden, scale=0.05)),
        f"{prefix}embeddings.LayerNorm.bias": w(hidden, scale=0.05),
        f"{prefix}pooler.dense.weight": w(hidden, hidden),
        f"{prefix}pooler.dense.bias": w(hidden, scale=0.05),
    }
    for i in range(layers):
        base = f"{prefix}encoder.layer.{i}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            t[base + name + ".weight"] = w(hidden, hidden)
            t[base + name + ".bias"] = w(hidden, scale=0.05)
        t[base + "intermediate.dense.weight"] = w(inter, hidden)
        t[base + "intermediate.dense.bias"] = w(inter, scale=0.05)
        t[base + "output.dense.weight"] = w(hidden, inter)
        t[base + "output.dense.bias"] = w(hidden, scale=0.05)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[base + norm + ".weight"] = 1 + w(hidden, scale=0.05)
            t[base + norm + ".bias"] = w(hidden, scale=0.05)
    if cross_encoder:
        t["classifier.weight"] = w(1, hidden, scale=0.5)
        t["classifier.bias"] = w(1, scale=0.1)
    save_file(t, str(folder / "model.safetensors"))
    config = {
        "architectures": ["BertForSequenceClassification" if cross_encoder else "BertModel"],
        "model_type": "bert", "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
        "intermediate_size": inter, "max_position_embeddings": positions, "type_vocab_size": 2,
        "vocab_size": len(words), "layer_norm_eps": 1e-12, "hidden_act": "gelu",
    }
    if cross_encoder:
        config["num_labels"] = 1
        config["id2label"] = {"0": "LABEL_0"}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    if not cross_encoder:
        (folder / "1_Pooling").mkdir(exist_ok=True)
        (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": hidden, "pooling_mode_mean_tokens": True}))
        (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 64}))
    return folder


def _ln(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def _gelu(x: np.ndarray) -> np.ndarray:
    from math import erf

    return 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2)))


def forward(folder: Path, ids: list[int]) -> np.ndarray:
    """Last hidden states (tokens × hidden) of the BERT in `folder`, every token of type 0."""
    from safetensors.numpy import load_file

    t = {k.removeprefix("bert."): v.astype(np.float64) for k, v in load_file(str(folder / "model.safetensors")).items()}
    cfg = json.loads((folder / "config.json").read_text())
    n, heads = len(ids), cfg["num_attention_heads"]
    x = t["embeddings.word_embeddings.weight"][ids] + t["embeddings.position_embeddings.weight"][:n] + t["embeddings.token_type_embeddings.weight"][0]
    x = _ln(x, t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"])
    dh = x.shape[1] // heads
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def lin(name: str, v: np.ndarray) -> np.ndarray:
            return v @ t[p + name + ".weight"].T + t[p + name + ".bias"]

        q, k, v = (lin(f"attention.self.{m}", x).reshape(n, heads, dh).transpose(1, 0, 2) for m in ("query", "key", "value"))
        att = q @ k.transpose(0, 2, 1) / np.sqrt(dh)
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        ctx = (att @ v).transpose(1, 0, 2).reshape(n, -1)
        x = _ln(x + lin("attention.output.dense", ctx), t[p + "attention.output.LayerNorm.weight"], t[p + "attention.output.LayerNorm.bias"])
        h = _gelu(lin("intermediate.dense", x))
        x = _ln(x + lin("output.dense", h), t[p + "output.LayerNorm.weight"], t[p + "output.LayerNorm.bias"])
    return x


def embed(folder: Path, ids: list[int]) -> np.ndarray:
    """Mean-pooled, L2-normalised sentence embedding."""
    v = forward(folder, ids).mean(0)
    return v / np.linalg.norm(v)


def cross_logit(folder: Path, ids: list[int]) -> float:
    """classifier(tanh(pooler(h_CLS))): the BertForSequenceClassification logit."""
    from safetensors.numpy import load_file

    t = {k.removeprefix("bert."): v.astype(np.float64) for k, v in load_file(str(folder / "model.safetensors")).items()}
    h = forward(folder, ids)[0]
    pooled = np.tanh(h @ t["pooler.dense.weight"].T + t["pooler.dense.bias"])
    return float((pooled @ t["classifier.weight"].T + t["classifier.bias"])[0])
