"""A tiny random-weight EmbeddingGemma folder written by the tests, and a numpy forward pass as the oracle.

The folder looks like what sentence-transformers saves for google/embeddinggemma-300m
(config.json with `gemma3_text`, model.safetensors, tokenizer.model, tokenizer_config.json,
modules.json, 1_Pooling, 2_Dense, 3_Dense), so it goes through the same importer as the
real model. Six layers (five sliding-window layers, then one global, as llama.cpp expects)
and a sliding window of 8, so an input of a dozen tokens exercises both masks.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from qmd.llm import spm

WORDS = ("the", "cat", "sat", "on", "mat", "rollback", "release", "deploy", "how", "do", "we", "undo", "a", "bad")
SPECIAL = [("<pad>", spm.CONTROL), ("<eos>", spm.CONTROL), ("<bos>", spm.CONTROL), ("<unk>", spm.UNKNOWN), ("<mask>", spm.USER_DEFINED)]
SLIDING_WINDOW = 8


def pieces() -> list[tuple[str, float, int]]:
    """The vocabulary: specials, the 256 byte tokens, letters and every prefix of every word
    (with and without the '▁' word mark), longer pieces scoring higher (SentencePiece BPE
    merges the best-scoring pair first)."""
    out: list[tuple[str, float, int]] = [(p, 0.0, t) for p, t in SPECIAL]
    out += [(f"<0x{b:02X}>", 0.0, spm.BYTE) for b in range(256)]
    seen = {p for p, _, _ in out}
    texts = ["\u2581", *"abcdefghijklmnopqrstuvwxyz.,?"]
    for word in WORDS:
        for k in range(1, len(word) + 1):
            texts += [word[:k], "\u2581" + word[:k]]
    for text in texts:
        if text not in seen:
            seen.add(text)
            out.append((text, -100.0 + len(text), spm.NORMAL))
    return out


def write_tiny_gemma(folder: Path, *, seed: int = 3, hidden: int = 64, layers: int = 6, heads: int = 2, head_dim: int = 32, dense_mid: int = 96) -> Path:
    """Write a random EmbeddingGemma sentence-transformers folder."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = pieces()
    inter, kv_heads = hidden * 2, 1

    def w(*shape: int, scale: float = 0.15) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    t: dict[str, np.ndarray] = {"embed_tokens.weight": w(len(vocab), hidden, scale=0.3), "norm.weight": w(hidden, scale=0.1)}
    for i in range(layers):
        p = f"layers.{i}."
        t[p + "self_attn.q_proj.weight"] = w(heads * head_dim, hidden)
        t[p + "self_attn.k_proj.weight"] = w(kv_heads * head_dim, hidden)
        t[p + "self_attn.v_proj.weight"] = w(kv_heads * head_dim, hidden)
        t[p + "self_attn.o_proj.weight"] = w(hidden, heads * head_dim)
        t[p + "self_attn.q_norm.weight"] = w(head_dim, scale=0.1)
        t[p + "self_attn.k_norm.weight"] = w(head_dim, scale=0.1)
        t[p + "mlp.gate_proj.weight"] = w(inter, hidden)
        t[p + "mlp.up_proj.weight"] = w(inter, hidden)
        t[p + "mlp.down_proj.weight"] = w(hidden, inter)
        for norm in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"):
            t[p + norm + ".weight"] = w(hidden, scale=0.1)
    save_file(t, str(folder / "model.safetensors"))
    config = {
        "architectures": ["Gemma3TextModel"], "model_type": "gemma3_text", "hidden_size": hidden, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim, "query_pre_attn_scalar": head_dim,
        "intermediate_size": inter, "max_position_embeddings": 256, "vocab_size": len(vocab), "rms_norm_eps": 1e-6,
        "rope_theta": 1_000_000.0, "rope_local_base_freq": 10_000.0, "sliding_window": SLIDING_WINDOW, "_sliding_window_pattern": 6,
        "layer_types": ["full_attention" if i % 6 == 5 else "sliding_attention" for i in range(layers)],
        "hidden_activation": "gelu_pytorch_tanh", "use_bidirectional_attention": True, "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
    }
    (folder / "config.json").write_text(json.dumps(config))
    spm.write_model(folder / "tokenizer.model", vocab)
    decoder = {str(i): {"content": p, "special": k == spm.CONTROL or p == "<unk>"} for i, (p, _, k) in enumerate(vocab[: len(SPECIAL)])}
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "add_bos_token": True, "add_eos_token": True, "bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>",
        "added_tokens_decoder": decoder, "model_max_length": 256,
    }))
    (folder / "tokenizer.json").write_text(json.dumps({"normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}}))
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
        {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"},
        {"idx": 4, "name": "4", "path": "4_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": hidden, "pooling_mode_mean_tokens": True}))
    for name, n_in, n_out in (("2_Dense", hidden, dense_mid), ("3_Dense", dense_mid, hidden)):
        (folder / name).mkdir(exist_ok=True)
        (folder / name / "config.json").write_text(json.dumps({"in_features": n_in, "out_features": n_out, "bias": False, "activation_function": "torch.nn.modules.linear.Identity"}))
        save_file({"linear.weight": w(n_out, n_in, scale=0.2)}, str(folder / name / "model.safetensors"))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 256, "do_lower_case": False}))
    (folder / "config_sentence_transformers.json").write_text(json.dumps({"prompts": {"query": "task: search result | query: ", "document": "title: none | text: "}}))
    return folder


def token_id(piece: str) -> int:
    return [p for p, _, _ in pieces()].index(piece)


def _rms(x: np.ndarray, w: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * (1.0 + w)


def _rope(x: np.ndarray, base: float) -> np.ndarray:
    """NEOX-style rotary embedding of x (heads × tokens × dim), positions 0..n-1."""
    n, dim = x.shape[1], x.shape[2]
    inv = base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    ang = np.arange(n)[:, None] * inv[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))
    half = dim // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], -1)
    return x * cos + rot * sin


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def embed(folder: Path, ids: list[int]) -> np.ndarray:
    """The sentence-transformers embedding of token ids (BOS/EOS included by the caller):
    Gemma3 bidirectional encoder, mean pooling, Dense, Dense, L2 normalisation."""
    from safetensors.numpy import load_file

    t = {k: v.astype(np.float64) for k, v in load_file(str(folder / "model.safetensors")).items()}
    cfg = json.loads((folder / "config.json").read_text())
    n, hidden = len(ids), cfg["hidden_size"]
    heads, kv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    pos = np.arange(n)
    local = np.abs(pos[:, None] - pos[None, :]) <= cfg["sliding_window"] // 2
    x = t["embed_tokens.weight"][ids] * np.sqrt(hidden)
    for i in range(cfg["num_hidden_layers"]):
        p = f"layers.{i}."
        sliding = cfg["layer_types"][i] == "sliding_attention"
        h = _rms(x, t[p + "input_layernorm.weight"])
        q = (h @ t[p + "self_attn.q_proj.weight"].T).reshape(n, heads, hd).transpose(1, 0, 2)
        k = (h @ t[p + "self_attn.k_proj.weight"].T).reshape(n, kv, hd).transpose(1, 0, 2)
        v = (h @ t[p + "self_attn.v_proj.weight"].T).reshape(n, kv, hd).transpose(1, 0, 2)
        q, k = _rms(q, t[p + "self_attn.q_norm.weight"]), _rms(k, t[p + "self_attn.k_norm.weight"])
        base = cfg["rope_local_base_freq"] if sliding else cfg["rope_theta"]
        q, k = _rope(q, base), _rope(k, base)
        k, v = np.repeat(k, heads // kv, 0), np.repeat(v, heads // kv, 0)
        att = q @ k.transpose(0, 2, 1) / np.sqrt(cfg["query_pre_attn_scalar"])
        if sliding:
            att = np.where(local[None], att, -np.inf)
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        o = (att @ v).transpose(1, 0, 2).reshape(n, heads * hd) @ t[p + "self_attn.o_proj.weight"].T
        x = x + _rms(o, t[p + "post_attention_layernorm.weight"])
        h = _rms(x, t[p + "pre_feedforward_layernorm.weight"])
        h = (_gelu_tanh(h @ t[p + "mlp.gate_proj.weight"].T) * (h @ t[p + "mlp.up_proj.weight"].T)) @ t[p + "mlp.down_proj.weight"].T
        x = x + _rms(h, t[p + "post_feedforward_layernorm.weight"])
    pooled = _rms(x, t["norm.weight"]).mean(0)
    for name in ("2_Dense", "3_Dense"):
        pooled = load_file(str(folder / name / "model.safetensors"))["linear.weight"].astype(np.float64) @ pooled
    return pooled / np.linalg.norm(pooled)
