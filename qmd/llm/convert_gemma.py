"""Convert a sentence-transformers EmbeddingGemma folder (Gemma3TextModel) into a GGUF.

Like the BERT importer (convert.py) it needs only `gguf`, `safetensors` and `numpy`: no
torch, no transformers, no sentencepiece (qmd/llm/spm.py reads `tokenizer.model`).
What llama.cpp's `gemma-embedding` architecture expects, and how the folder maps onto it:

- the Gemma3 text encoder: bidirectional attention (llama.cpp hard-codes it for this arch),
  a symmetric sliding window (`sliding_window` from config.json as saved, 512: a token sees
  ±256 positions) on five layers of every six (the sixth attends to everything; llama.cpp
  hard-codes the period 6, so another `layer_types` pattern is refused), RoPE base
  `rope_theta` on global layers and 10000 on sliding ones, GELU-tanh gated MLP;
- every Gemma RMSNorm computes x·(1 + w): each `*norm.weight` is written as 1 + w;
- `embed_tokens` is cut to the tokenizer's vocabulary; llama.cpp multiplies it by √hidden;
- sentence-transformers' head: `1_Pooling` (mean) → `{arch}.pooling_type`, then the Dense
  modules of modules.json (no bias, identity activation) → `dense_2.weight`, `dense_3.weight`
  with `{arch}.dense_2_feat_in/out`, `dense_3_feat_in/out`; `Normalize` is qmd's
  normalize=True. llama.cpp applies pooling, then dense_2, then dense_3;
- the SentencePiece vocabulary (tokens, scores, types) from `tokenizer.model`, with the
  added tokens of tokenizer_config.json as llama.cpp's converter marks them (special →
  CONTROL, others → USER_DEFINED, score -1000), BOS and EOS added around every input
  (`add_bos_token` / `add_eos_token`), no space prefix (Gemma's tokenizer adds none).

Weights: f32 keeps everything f32; f16 writes every matrix as f16; q8_0 quantizes every
matrix whose rows are a multiple of 32 (gguf's own numpy quantizer) except the two Dense
layers, kept f16 (4 MB more; measured on the reference texts, the worst text's cosine with
sentence-transformers goes from 0.99890 to 0.99931 with them f16). Norms stay f32.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from qmd.core.errors import QmdError
from qmd.core.fileio import replace_file
from qmd.llm.convert import OUT_TYPES, ImportResult, _first_duplicate, _prompts, _read_json
from qmd.llm import spm

ARCH = "gemma-embedding"
MODEL_TYPES = ("gemma3_text",)
SWA_PERIOD = 6  # llama.cpp: set_swa_pattern(6) for gemma-embedding
_FIX = "use a sentence-transformers EmbeddingGemma folder (model.safetensors, tokenizer.model, modules.json, 2_Dense, 3_Dense)"

_LAYER_MAP = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "post_attention_layernorm": "post_attention_norm",
    "pre_feedforward_layernorm": "ffn_norm",
    "post_feedforward_layernorm": "post_ffw_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
_LAYER = re.compile(r"^layers\.(\d+)\.(.+)\.weight$")


def is_gemma_folder(folder: Path) -> bool:
    """Whether config.json names a Gemma3 text model."""
    return _read_json(Path(folder) / "config.json").get("model_type") in MODEL_TYPES


def default_name(folder: Path) -> str:
    """The model name: the folder's, unless it says nothing (e.g. `model_download`)."""
    folder = Path(folder).resolve()
    if "gemma" in folder.name.lower():
        return folder.name
    config = _read_json(folder / "config.json")
    if config.get("num_hidden_layers") == 24 and config.get("hidden_size") == 768:
        return "embeddinggemma-300m"
    return "embeddinggemma"


def gguf_name(hf_name: str) -> str | None:
    """The llama.cpp tensor name of a Gemma3TextModel tensor (None: not used)."""
    name = hf_name.removeprefix("model.")
    if name == "embed_tokens.weight":
        return "token_embd.weight"
    if name == "norm.weight":
        return "output_norm.weight"
    match = _LAYER.match(name)
    if match and match.group(2) in _LAYER_MAP:
        return f"blk.{match.group(1)}.{_LAYER_MAP[match.group(2)]}.weight"
    return None


def _check_layers(config: dict[str, Any], layers: int) -> None:
    expected = ["full_attention" if i % SWA_PERIOD == SWA_PERIOD - 1 else "sliding_attention" for i in range(layers)]
    types = config.get("layer_types")
    if types is not None and list(types) != expected:
        raise QmdError("the model's sliding-window layer pattern is not every 6th layer global", "llama.cpp's gemma-embedding supports only that pattern")
    pattern = config.get("sliding_window_pattern", config.get("_sliding_window_pattern"))
    if types is None and pattern is not None and int(pattern) != SWA_PERIOD:
        raise QmdError(f"the model's sliding_window_pattern is {pattern}, not {SWA_PERIOD}", "llama.cpp's gemma-embedding supports only a period of 6")


def _dense_modules(folder: Path, hidden: int) -> list[tuple[str, Any, int, int]]:
    """(gguf prefix, weight, in, out) of each sentence-transformers Dense module, in order."""
    import numpy as np
    from safetensors.numpy import load_file

    modules = json.loads((folder / "modules.json").read_text(encoding="utf-8")) if (folder / "modules.json").exists() else []
    dense = [m for m in modules if str(m.get("type", "")).endswith(".Dense")]
    if len(dense) not in (0, 2):
        raise QmdError(f"{folder} has {len(dense)} Dense modules", "llama.cpp's gemma-embedding takes none or two (2_Dense, 3_Dense)")
    out = []
    for prefix, module in zip(("dense_2", "dense_3"), dense):
        path = folder / str(module.get("path", ""))
        cfg = _read_json(path / "config.json")
        act = str(cfg.get("activation_function", "torch.nn.modules.linear.Identity"))
        if not act.endswith("Identity"):
            raise QmdError(f"{path.name} uses the activation {act}", "llama.cpp's gemma-embedding Dense layers are linear (Identity)")
        weights_file = path / "model.safetensors"
        if not weights_file.exists():
            raise QmdError(f"no model.safetensors in {path}", "export the Dense modules with safetensors")
        tensors = load_file(str(weights_file))
        bias = tensors.get("linear.bias")
        if bias is not None and np.any(bias != 0):
            raise QmdError(f"{path.name} has a bias", "llama.cpp's gemma-embedding Dense layers have none")
        weight = tensors.get("linear.weight")
        if weight is None or weight.ndim != 2:
            raise QmdError(f"{path.name} has no linear.weight matrix", _FIX)
        n_out, n_in = (int(d) for d in weight.shape)
        out.append((prefix, weight, n_in, n_out))
    if out and (out[0][2] != hidden or out[1][3] != hidden or out[0][3] != out[1][2]):
        raise QmdError(f"the Dense layers map {out[0][2]}→{out[0][3]}→{out[1][2]}→{out[1][3]}", f"llama.cpp needs {hidden}→N→{hidden}")
    return out


def gemma_vocab(folder: Path, vocab_size: int | None = None) -> tuple[list[str], list[float], list[int], dict[str, Any]]:
    """Tokens, scores and GGUF token types, plus the tokenizer settings, the way llama.cpp's
    converter builds them for Gemma3 (`_create_vocab_sentencepiece`)."""
    model_file = folder / "tokenizer.model"
    if not model_file.exists():
        raise QmdError(f"no tokenizer.model in {folder}", "the importer needs the SentencePiece tokenizer file")
    try:
        model = spm.read_model(model_file)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise QmdError(f"cannot read {model_file}: {exc}", "use the model's original tokenizer.model") from exc
    size = vocab_size or len(model.pieces)
    tokens = [f"[PAD{i}]" for i in range(size)]
    scores = [-10000.0] * size
    types = [spm.UNUSED] * size
    for i, (piece, score, kind) in enumerate(zip(model.pieces, model.scores, model.types)):
        if i >= size:
            break
        tokens[i], scores[i] = piece, score
        # llama.cpp's converter keeps only these four kinds; USER_DEFINED comes from the
        # tokenizer config below.
        types[i] = kind if kind in (spm.UNKNOWN, spm.CONTROL, spm.UNUSED, spm.BYTE) else spm.NORMAL
    tok_config = _read_json(folder / "tokenizer_config.json")
    for key, data in (tok_config.get("added_tokens_decoder") or {}).items():
        idx = int(key)
        if idx >= size or not isinstance(data, dict):
            continue
        content = str(data.get("content", ""))
        if data.get("special") or _looks_special(content):
            types[idx] = spm.CONTROL
        else:
            content = content.replace("\u2581", " ")
            types[idx] = spm.USER_DEFINED
        tokens[idx], scores[idx] = content, -1000.0
    dup = _first_duplicate(tokens)
    if dup is not None:
        # llama.cpp aborts the whole process on a vocabulary with duplicates: refuse here.
        raise QmdError(f"the vocabulary has duplicate tokens (e.g. {dup!r})", "use the model's original tokenizer files")
    ids = {t: i for i, t in enumerate(tokens)}
    settings = {
        "bos": ids.get(_special(tok_config, "bos_token", "<bos>")),
        "eos": ids.get(_special(tok_config, "eos_token", "<eos>")),
        "unk": ids.get(_special(tok_config, "unk_token", "<unk>")),
        "pad": ids.get(_special(tok_config, "pad_token", "<pad>")),
        "add_bos": bool(tok_config.get("add_bos_token", True)),
        "add_eos": bool(tok_config.get("add_eos_token", False)),
        "add_space_prefix": _space_prefix(folder, model.add_dummy_prefix),
    }
    return tokens, scores, types, settings


def _looks_special(token: str) -> bool:
    # llama.cpp's converter (does_token_look_special): added tokens some models forget to mark special
    return (
        token in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
        or (token.startswith("<|") and token.endswith("|>"))
        or (token.startswith("<\uff5c") and token.endswith("\uff5c>"))
        or (token.startswith("<unused") and token.endswith(">"))
    )


def _special(tok_config: dict[str, Any], key: str, default: str) -> str:
    value = tok_config.get(key, default)
    if isinstance(value, dict):
        value = value.get("content", default)
    return str(value or default)


def _space_prefix(folder: Path, spm_flag: bool) -> bool:
    """Whether the tokenizer prepends '▁' to the text: tokenizer.json's normalizer decides
    (Gemma3: it only replaces spaces), else the SentencePiece model's add_dummy_prefix."""
    path = folder / "tokenizer.json"
    if not path.exists():
        return spm_flag
    try:
        with path.open(encoding="utf-8") as fh:
            normalizer = json.load(fh).get("normalizer") or {}
    except (OSError, ValueError):
        return spm_flag
    parts = normalizer.get("normalizers", [normalizer]) if isinstance(normalizer, dict) else []
    return any(isinstance(p, dict) and p.get("type") == "Prepend" for p in parts)


def import_gemma_embedding(folder: Path, out: Path, out_type: str = "f16", name: str | None = None) -> ImportResult:
    """Write `out` (GGUF, arch gemma-embedding) from the EmbeddingGemma folder; see the module docstring."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFWriter, PoolingType
    from gguf.quants import quantize
    from safetensors import safe_open

    folder = Path(folder)
    if out_type not in OUT_TYPES:
        raise QmdError(f"unknown --type {out_type}", f"choose one of {', '.join(OUT_TYPES)}")
    config = _read_json(folder / "config.json")
    if config.get("model_type") not in MODEL_TYPES:
        raise QmdError(f"{folder} holds a {config.get('model_type') or 'unknown'} model, not a Gemma3 text model", _FIX)
    if not config.get("use_bidirectional_attention", False):
        raise QmdError(f"{folder} is a causal Gemma3 model, not an embedding model", "use EmbeddingGemma (use_bidirectional_attention: true)")
    act = str(config.get("hidden_activation") or config.get("hidden_act") or "gelu_pytorch_tanh")
    if act not in ("gelu_pytorch_tanh", "gelu_new", "gelu"):
        raise QmdError(f"{folder} uses the activation {act}", "llama.cpp's gemma-embedding computes GELU (tanh)")
    weights_file = folder / "model.safetensors"
    if not weights_file.exists():
        raise QmdError(f"no model.safetensors in {folder}", "export the model with safetensors (sharded or .bin weights are not supported)")

    hidden = int(config["hidden_size"])
    layers = int(config["num_hidden_layers"])
    heads = int(config.get("num_attention_heads", 8))
    head_dim = int(config.get("head_dim", 256))
    if float(config.get("query_pre_attn_scalar", head_dim)) != head_dim:
        raise QmdError("query_pre_attn_scalar differs from head_dim", "llama.cpp's gemma-embedding scales attention by 1/sqrt(head_dim)")
    _check_layers(config, layers)
    context = int(config.get("max_position_embeddings", 2048))
    st_config = _read_json(folder / "sentence_bert_config.json")
    max_tokens = min(context, int(st_config.get("max_seq_length") or context))

    pooling_cfg = _read_json(folder / "1_Pooling" / "config.json")
    if pooling_cfg.get("pooling_mode_cls_token"):
        pooling, pooling_name = PoolingType.CLS, "cls"
    elif pooling_cfg.get("pooling_mode_lasttoken"):
        pooling, pooling_name = PoolingType.LAST, "last"
    else:
        pooling, pooling_name = PoolingType.MEAN, "mean"
    dense = _dense_modules(folder, hidden)
    tokens, scores, types, tok = gemma_vocab(folder, int(config.get("vocab_size") or 0) or None)

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    writer = GGUFWriter(str(tmp), ARCH)
    try:
        writer.add_name(name or default_name(folder))
        writer.add_context_length(context)
        writer.add_embedding_length(hidden)
        writer.add_block_count(layers)
        writer.add_feed_forward_length(int(config["intermediate_size"]))
        writer.add_head_count(heads)
        writer.add_head_count_kv(int(config.get("num_key_value_heads", heads)))
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
        writer.add_layer_norm_rms_eps(float(config.get("rms_norm_eps", 1e-6)))
        writer.add_rope_freq_base(float(config.get("rope_theta", 1_000_000.0)))
        writer.add_rope_freq_base_swa(float(config.get("rope_local_base_freq", 10_000.0)))
        writer.add_sliding_window(int(config["sliding_window"]))
        writer.add_causal_attention(False)
        writer.add_pooling_type(pooling)
        for prefix, _, n_in, n_out in dense:
            writer.add_dense_features_dims(prefix, n_in, n_out)
        writer.add_file_type({"f32": 0, "f16": 1, "q8_0": 7}[out_type])

        writer.add_tokenizer_model("llama")
        writer.add_tokenizer_pre("default")
        writer.add_token_list(tokens)
        writer.add_token_scores(scores)
        writer.add_token_types(types)
        for key, add_id in (("bos", writer.add_bos_token_id), ("eos", writer.add_eos_token_id), ("unk", writer.add_unk_token_id), ("pad", writer.add_pad_token_id)):
            if tok[key] is not None:
                add_id(int(tok[key]))
        writer.add_add_bos_token(tok["add_bos"])
        writer.add_add_eos_token(tok["add_eos"])
        writer.add_add_space_prefix(tok["add_space_prefix"])

        query_prefix, document_prefix = _prompts(folder)
        writer.add_string("qmd.family", "embeddinggemma")
        writer.add_string("qmd.kind", "embed")
        writer.add_uint32("qmd.max_tokens", max_tokens)
        writer.add_string("qmd.query_prefix", query_prefix)
        writer.add_string("qmd.document_prefix", document_prefix)

        def add(target: str, data: Any) -> None:
            data = np.asarray(data, dtype=np.float32)
            if data.ndim >= 2 and out_type == "q8_0" and data.shape[-1] % 32 == 0 and not target.startswith("dense_"):
                writer.add_tensor(target, quantize(data, GGMLQuantizationType.Q8_0), raw_dtype=GGMLQuantizationType.Q8_0)
            elif data.ndim >= 2 and out_type in ("f16", "q8_0"):
                writer.add_tensor(target, data.astype(np.float16))
            else:
                writer.add_tensor(target, np.ascontiguousarray(data))

        written: set[str] = set()
        with safe_open(str(weights_file), framework="numpy") as st:
            for hf_name in sorted(st.keys()):
                target = gguf_name(hf_name)
                if target is None:
                    continue
                data = st.get_tensor(hf_name).astype(np.float32)
                if target == "token_embd.weight":
                    data = data[: len(tokens)]
                if hf_name.endswith("norm.weight"):
                    data = data + np.float32(1.0)  # Gemma3RMSNorm: x * (1 + w)
                add(target, data)
                written.add(target)
        for prefix, weight, _, _ in dense:
            add(f"{prefix}.weight", weight)
        required = {"token_embd.weight", "output_norm.weight"} | {f"blk.{i}.{t}.weight" for i in range(layers) for t in _LAYER_MAP.values()}
        missing = required - written
        if missing:
            raise QmdError(f"{folder} is missing tensors: {', '.join(sorted(missing)[:5])}", "is the folder a complete EmbeddingGemma model?")
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    except BaseException:
        writer.close()
        tmp.unlink(missing_ok=True)
        raise
    writer.close()
    replace_file(tmp, out)
    dims = dense[-1][3] if dense else hidden
    return ImportResult(out, "embed", dims, context, max_tokens, pooling_name, out_type)
