"""A tiny random-weight llama-architecture GGUF (SentencePiece vocabulary with byte fallback).

Big enough for llama.cpp to load and generate (every string is tokenizable through the
byte tokens), small enough to write in milliseconds: the tests' generate model and yes/no
reranker, so that grammar and prompt plumbing run through real llama.cpp.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

# SentencePiece merges adjacent pieces only through pieces in the vocabulary: the letters
# and the prefixes of "yes"/"no" make both one token, as in real rerankers' vocabularies.
PIECES = [*"abcdefghijklmnopqrstuvwxyz", "▁", "▁y", "▁ye", "▁yes", "▁n", "▁no", "ye", "yes", "no", "lex", "vec", "hyde", ":", "\n"]


def write_tiny_llama(path: Path, seed: int = 3, hidden: int = 32, layers: int = 1, heads: int = 4, ctx: int = 512, tuned: bool = True) -> Path:
    import gguf

    rng = np.random.default_rng(seed)
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)] + PIECES
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256 + [gguf.TokenType.NORMAL] * len(PIECES)
    scores = [0.0, 0.0, 0.0] + [-1000.0] * 256 + [-float(i) for i in range(len(PIECES))]
    vocab, ff = len(tokens), hidden * 2

    def w(*shape: int, scale: float = 0.3) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-llama")
    if tuned:
        writer.add_string("qmd.expansion", "true")  # qmd's mark for a model trained for query expansion
    writer.add_context_length(ctx)
    writer.add_embedding_length(hidden)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(heads)
    writer.add_head_count_kv(heads)
    writer.add_rope_dimension_count(hidden // heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(0)
    writer.add_tokenizer_model("llama")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_tensor("token_embd.weight", w(vocab, hidden))
    for i in range(layers):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(hidden, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"blk.{i}.{name}.weight", w(hidden, hidden))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(hidden, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", w(ff, hidden))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", w(ff, hidden))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", w(hidden, ff))
    writer.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    writer.add_tensor("output.weight", w(vocab, hidden, scale=1.0))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
