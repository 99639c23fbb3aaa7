"""Convert a local BERT-family folder (safetensors + vocab.txt) into a GGUF that llama.cpp loads.

Needs only `gguf`, `safetensors` and `numpy` (no torch, no transformers), so a machine with
nothing but a PyPI mirror can run qmd. Two kinds of folder:

- sentence-transformers embedders (BertModel: all-MiniLM-L6-v2, bge-small, e5-small):
  mean or CLS pooling read from `1_Pooling/config.json`;
- cross-encoders (BertForSequenceClassification: ms-marco MiniLM, bge-reranker-base):
  rank pooling. The BERT pooler (`pooler.dense`, dense + tanh) becomes llama.cpp's `cls`
  tensor and the classifier its `cls.output`, so llama.cpp computes exactly
  classifier(tanh(pooler(h_CLS))). llama.cpp's own converter drops the pooler and maps the
  classifier to `cls`, which applies tanh to the logit and changes every score.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qmd.core.errors import QmdError
from qmd.core.fileio import replace_file

OUT_TYPES = ("f32", "f16", "q8_0")

# HF tensor name (after dropping a leading "bert.") → GGUF name; {i} is the layer.
_LAYER_MAP = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "output.LayerNorm": "layer_output_norm",
}
_GLOBAL_MAP = {
    "embeddings.word_embeddings": "token_embd",
    "embeddings.position_embeddings": "position_embd",
    "embeddings.token_type_embeddings": "token_types",
    "embeddings.LayerNorm": "token_embd_norm",
}
_LAYER = re.compile(r"^encoder\.layer\.(\d+)\.(.+)\.(weight|bias)$")
_SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@dataclass(frozen=True)
class ImportResult:
    """What was written: the file, whether it embeds or reranks, and its shape."""

    path: Path
    kind: str  # "embed" or "rerank"
    dims: int
    context_length: int
    max_tokens: int  # the sequence length the model was trained/served at
    pooling: str
    out_type: str


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise QmdError(f"cannot read {path}: {exc}", "is this a sentence-transformers or BERT model folder?") from exc
    if not isinstance(data, dict):
        raise QmdError(f"cannot read {path}: not a JSON object", "is this a sentence-transformers or BERT model folder?")
    return data


def _first_duplicate(items: list[str]) -> str | None:
    seen: set[str] = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    return None


def gguf_name(hf_name: str) -> str | None:
    """The llama.cpp tensor name for a Hugging Face BERT tensor name (None: not used)."""
    name = hf_name[len("bert.") :] if hf_name.startswith("bert.") else hf_name
    base, _, suffix = name.rpartition(".")
    if suffix not in ("weight", "bias"):
        return None
    if base in _GLOBAL_MAP:
        return f"{_GLOBAL_MAP[base]}.{suffix}"
    if base == "pooler.dense":
        return f"cls.{suffix}"
    if base in ("classifier", "classifier.out_proj"):
        return f"cls.output.{suffix}"
    match = _LAYER.match(name)
    if match and match.group(2) in _LAYER_MAP:
        return f"blk.{match.group(1)}.{_LAYER_MAP[match.group(2)]}.{suffix}"
    return None


def _phantom(token: str) -> str:
    """WordPiece → llama.cpp's WPM vocabulary: '##x' → 'x', word starts get '▁'."""
    if token.startswith("[") and token.endswith("]"):
        return token
    if token.startswith("##"):
        return token[2:]
    return "\u2581" + token


def _load_tensors(folder: Path) -> dict[str, Any]:
    from safetensors.numpy import load_file

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise QmdError(f"no .safetensors weights in {folder}", "export the model with safetensors (pytorch_model.bin is not supported)")
    tensors: dict[str, Any] = {}
    for file in files:
        tensors.update(load_file(str(file)))
    return tensors


def _prompts(folder: Path) -> tuple[str, str]:
    """(query prefix, document prefix) declared by the model folder, else empty."""
    prompts = _read_json(folder / "config_sentence_transformers.json").get("prompts") or {}
    query = str(prompts.get("query", "") or "")
    document = str(prompts.get("document", prompts.get("passage", "")) or "")
    if not query and "e5" in folder.name.lower():
        return "query: ", "passage: "
    return query, document


def import_bert(folder: Path, out: Path, out_type: str = "f16", name: str | None = None) -> ImportResult:
    """Write `out` (GGUF) from the BERT model in `folder`; see the module docstring."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFWriter, PoolingType, TokenType
    from gguf.quants import quantize

    folder = Path(folder)
    if out_type not in OUT_TYPES:
        raise QmdError(f"unknown --type {out_type}", f"choose one of {', '.join(OUT_TYPES)}")
    if not folder.is_dir():
        raise QmdError(f"{folder} is not a folder", "give the folder holding config.json, vocab.txt and model.safetensors")
    config = _read_json(folder / "config.json")
    if config.get("model_type") != "bert":
        raise QmdError(
            f"{folder} holds a {config.get('model_type') or 'unknown'} model; only BERT-family models (and EmbeddingGemma) can be imported",
            "use a BERT sentence-transformers model (all-MiniLM-L6-v2, bge-small, e5-small), a BERT cross-encoder or EmbeddingGemma-300M",
        )
    vocab_file = folder / "vocab.txt"
    if not vocab_file.exists():
        raise QmdError(f"no vocab.txt in {folder}", "the importer needs the WordPiece vocabulary file")
    vocab = vocab_file.read_text(encoding="utf-8").splitlines()
    architectures = config.get("architectures") or ["BertModel"]
    rerank = any("SequenceClassification" in a for a in architectures)
    tensors = _load_tensors(folder)

    pooling_cfg = _read_json(folder / "1_Pooling" / "config.json")
    if rerank:
        pooling, pooling_name = PoolingType.RANK, "rank"
        if config.get("num_labels", len(config.get("id2label") or {0: 0})) != 1 and tensors.get("classifier.weight", np.zeros((1,))).shape[0] != 1:
            raise QmdError("the cross-encoder has more than one output label", "only single-score rerankers are supported")
    elif pooling_cfg.get("pooling_mode_cls_token"):
        pooling, pooling_name = PoolingType.CLS, "cls"
    else:
        pooling, pooling_name = PoolingType.MEAN, "mean"

    st_config = _read_json(folder / "sentence_bert_config.json")
    context = int(config.get("max_position_embeddings", 512))
    max_tokens = int(st_config.get("max_seq_length") or context)
    hidden = int(config["hidden_size"])
    layers = int(config["num_hidden_layers"])

    tokens = [_phantom(t) for t in vocab]
    if len(set(tokens)) != len(tokens):
        # llama.cpp aborts the whole process on a vocabulary with duplicates: refuse here.
        dup = _first_duplicate(tokens)
        raise QmdError(f"{vocab_file} has duplicate tokens (e.g. {dup!r})", "use the model's original vocab.txt")

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    writer = GGUFWriter(str(tmp), "bert")
    writer.add_name(name or folder.name)
    writer.add_context_length(context)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(int(config["intermediate_size"]))
    writer.add_block_count(layers)
    writer.add_head_count(int(config["num_attention_heads"]))
    writer.add_layer_norm_eps(float(config.get("layer_norm_eps", 1e-12)))
    writer.add_causal_attention(False)
    writer.add_pooling_type(pooling)
    writer.add_file_type({"f32": 0, "f16": 1, "q8_0": 7}[out_type])

    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    types = []
    for token in vocab:
        if token == "[UNK]":
            types.append(TokenType.UNKNOWN)
        elif token in _SPECIAL:
            types.append(TokenType.CONTROL)
        else:
            types.append(TokenType.NORMAL)
    writer.add_token_types(types)
    writer.add_token_type_count(int(config.get("type_vocab_size", 2)))
    ids = {t: i for i, t in enumerate(vocab)}
    for token, add in (("[CLS]", writer.add_bos_token_id), ("[SEP]", writer.add_sep_token_id), ("[UNK]", writer.add_unk_token_id), ("[PAD]", writer.add_pad_token_id), ("[MASK]", writer.add_mask_token_id)):
        if token in ids:
            add(ids[token])
    writer.add_add_bos_token(True)
    writer.add_add_sep_token(True)
    query_prefix, document_prefix = _prompts(folder)
    writer.add_string("qmd.family", "bert")
    writer.add_string("qmd.kind", "rerank" if rerank else "embed")
    writer.add_uint32("qmd.max_tokens", max_tokens)
    writer.add_string("qmd.query_prefix", query_prefix)
    writer.add_string("qmd.document_prefix", document_prefix)

    written = set()
    for hf_name in sorted(tensors):
        target = gguf_name(hf_name)
        if target is None or (not rerank and target.startswith("cls")):
            continue
        data = np.asarray(tensors[hf_name], dtype=np.float32)
        if data.ndim >= 2 and out_type == "q8_0" and data.shape[-1] % 32 == 0 and target != "token_types.weight":
            writer.add_tensor(target, quantize(data, GGMLQuantizationType.Q8_0), raw_dtype=GGMLQuantizationType.Q8_0)
        elif data.ndim >= 2 and out_type in ("f16", "q8_0") and target != "token_types.weight":
            writer.add_tensor(target, data.astype(np.float16))
        else:
            writer.add_tensor(target, data)
        written.add(target)
    required = {"token_embd.weight", "position_embd.weight", "token_embd_norm.weight", f"blk.{layers - 1}.ffn_down.weight"}
    if rerank:
        required |= {"cls.output.weight"}
    missing = required - written
    if missing:
        tmp.unlink(missing_ok=True)
        raise QmdError(f"{folder} is missing tensors: {', '.join(sorted(missing))}", "is the folder a complete BERT model?")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    replace_file(tmp, out)
    return ImportResult(out, "rerank" if rerank else "embed", hidden, context, max_tokens, pooling_name, out_type)
